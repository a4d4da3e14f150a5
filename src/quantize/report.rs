//! What quantization cost, per layer: the float model and the quantized model run on the same
//! samples, and every int8 tensor of the quantized model (dequantized) is compared with the
//! float tensor of the same name.

use super::calibrate::Sample;
use super::observe::{File, KeptInterpreters};
use crate::ir::{ConstData, Graph};
use anyhow::{anyhow, Result};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Error of one tensor, accumulated over the samples.
#[derive(Clone, Debug, Serialize)]
pub struct LayerError {
    pub tensor: String,
    /// Builtin name of the operator producing it in the quantized file.
    pub op: String,
    pub snr_db: f64,
    pub max_abs_error: f32,
    /// A model output's SNR on each sample (its own signal against its own error); empty for
    /// inner tensors.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sample_snr_db: Vec<f64>,
}

#[derive(Default, Clone)]
struct Acc {
    signal: f64,
    noise: f64,
    max_abs: f32,
}

impl Acc {
    fn add(&mut self, reference: &[f32], test: impl Iterator<Item = f32>) {
        for (&r, t) in reference.iter().zip(test) {
            // A max pool's padding (the lowest float; int8's lowest value in the quantized
            // file): never picked in either, so not an error.
            if r <= f32::MIN {
                continue;
            }
            let e = (r - t) as f64;
            self.signal += (r as f64) * (r as f64);
            self.noise += e * e;
            self.max_abs = self.max_abs.max(e.abs() as f32);
        }
    }

    /// Adds the error that survives the clipping to `(lo, hi)` the tensor's readers do: both
    /// sides clamped, since a quantized tensor keeps values beyond it wherever its range could
    /// not be narrowed (a RESHAPE before a ReLU shares its input's int8 parameters).
    fn add_within(&mut self, reference: &[f32], test: &[f32], (lo, hi): (f32, f32)) {
        let clamped: Vec<f32> = reference.iter().map(|x| x.clamp(lo, hi)).collect();
        self.add(&clamped, test.iter().map(|x| x.clamp(lo, hi)));
    }

    fn merge(&mut self, other: &Acc) {
        self.signal += other.signal;
        self.noise += other.noise;
        self.max_abs = self.max_abs.max(other.max_abs);
    }

    fn snr_db(&self) -> f64 {
        if self.noise == 0.0 {
            f64::INFINITY
        } else {
            10.0 * (self.signal / self.noise).log10()
        }
    }
}

/// The float tensor a quantized file's tensor stands for: a QUANTIZE of float tensor `x` writes
/// `x/int8` (or `x/int16`); other tensors keep their name.
pub(crate) fn float_name(name: &str) -> &str {
    name.strip_suffix("/int8")
        .or_else(|| name.strip_suffix("/int16"))
        .unwrap_or(name)
}

/// The name of every tensor of a model, by index.
pub(crate) fn tensor_names(bytes: &[u8]) -> Result<Vec<String>> {
    Ok(labels(bytes)?
        .into_iter()
        .map(|(name, _, _)| name)
        .collect())
}

/// (name, producing builtin, is int8) of every tensor of a model.
fn labels(bytes: &[u8]) -> Result<Vec<(String, String, bool)>> {
    let aligned = super::observe::aligned(bytes);
    let model = literun::Model::from_bytes(&aligned).map_err(|e| anyhow!("{e}"))?;
    Ok(model_labels(&model))
}

/// [`labels`] of a parsed model.
fn model_labels(model: &literun::Model<'_>) -> Vec<(String, String, bool)> {
    let mut producer = vec![String::new(); model.tensors().len()];
    for op in model.operators() {
        for &o in &op.outputs {
            producer[o] = op.name();
        }
    }
    model
        .tensors()
        .iter()
        .zip(producer)
        .map(|(t, p)| {
            let quantized = matches!(t.dtype, literun::DType::I8 | literun::DType::I16);
            (t.name.to_string(), p, quantized)
        })
        .collect()
}

/// Per-layer error of `quantized` against `float` on `samples`, worst (lowest SNR) first. A
/// tensor with an interval in `bounded` (by name) is compared with the float values clamped to
/// it: what later clipping removes is not an error (`clip_ranges`).
pub fn layer_errors(
    float: &KeptInterpreters<'_>,
    quantized: &[u8],
    samples: &[Sample],
    bounded: &HashMap<String, (f32, f32)>,
) -> Result<Vec<LayerError>> {
    let float_index: HashMap<String, usize> = model_labels(float.model())
        .into_iter()
        .enumerate()
        .map(|(i, (name, _, _))| (name, i))
        .collect();
    let qlabels = labels(quantized)?;
    // By tensor index, so tensors of equal SNR keep one order (the search reads it).
    let mut accs: BTreeMap<usize, Acc> = BTreeMap::new();
    let int8 = |t: usize| qlabels.get(t).is_some_and(|(_, _, int8)| *int8);
    // Each sample runs through the float file, then the quantized one, on the same worker (whose
    // interpreters serve all its samples); the float activations of one sample are held until
    // the quantized run of the same sample has been compared with them (a 480x480 detector's
    // take ~0.4 GB a sample). The sums add the samples in order.
    let all = |_: usize| true;
    let mut float_values: HashMap<usize, Vec<f32>> = HashMap::new();
    let mut current = None;
    super::observe::observe_files(
        &[(File::Kept(float), &all), (File::Bytes(quantized), &int8)],
        samples,
        |k, file, t, v| {
            if file == 0 {
                if current != Some(k) {
                    float_values.clear();
                    current = Some(k);
                }
                float_values.insert(t, v.to_vec());
                return;
            }
            let (name, _, _) = &qlabels[t];
            let base = float_name(name);
            let fi = float_index.get(name).or_else(|| float_index.get(base));
            let Some(r) = fi.and_then(|fi| float_values.get(fi)) else {
                return;
            };
            if r.len() != v.len() {
                return;
            }
            let acc = accs.entry(t).or_default();
            match bounded.get(base) {
                Some(&interval) => acc.add_within(r, v, interval),
                None => acc.add(r, v.iter().copied()),
            }
        },
    )?;
    let mut out: Vec<LayerError> = accs
        .into_iter()
        .map(|(t, a)| LayerError {
            tensor: qlabels[t].0.clone(),
            op: qlabels[t].1.clone(),
            snr_db: a.snr_db(),
            max_abs_error: a.max_abs,
            sample_snr_db: vec![],
        })
        .collect();
    out.sort_by(|a, b| a.snr_db.total_cmp(&b.snr_db));
    Ok(out)
}

/// Every output of a model on every sample: `[sample][output]` values; on the same runs, the
/// values of the tensors `also` marks (by index) go to `f(tensor index, values)`, in sample order.
fn outputs_of(
    bytes: &[u8],
    samples: &[Sample],
    also: &[bool],
    mut f: impl FnMut(usize, &[f32]),
) -> Result<Vec<Vec<Vec<f32>>>> {
    let aligned = super::observe::aligned(bytes);
    let model = literun::Model::from_bytes(&aligned).map_err(|e| anyhow!("{e}"))?;
    let outs: Vec<usize> = model.outputs().iter().map(|o| o.tensor).collect();
    let mut per_sample = vec![vec![Vec::new(); outs.len()]; samples.len()];
    let also = |t: usize| also.get(t).copied().unwrap_or(false);
    let wanted = |t: usize| outs.contains(&t) || also(t);
    super::observe::observe_where(bytes, samples, &wanted, |k, t, v| {
        if let Some(j) = outs.iter().position(|&o| o == t) {
            per_sample[k][j] = v.to_vec();
        }
        if also(t) {
            f(t, v);
        }
    })?;
    Ok(per_sample)
}

/// The float model's outputs on the error samples, computed once and compared with every
/// quantized attempt (`--min-snr` makes many).
pub struct FloatOutputs {
    names: Vec<String>,
    values: Vec<Vec<Vec<f32>>>,
}

impl FloatOutputs {
    pub fn new(float: &KeptInterpreters<'_>, samples: &[Sample]) -> Result<FloatOutputs> {
        let mut collect = FloatOutputs::collector(float.model(), samples.len());
        let outs = collect.outs.clone();
        let wanted = |t: usize| outs.contains(&t);
        super::observe::observe_kept_where(float, samples, &wanted, |k, t, v| {
            collect.add(k, t, v)
        })?;
        Ok(collect.finish())
    }

    /// Gathers the outputs of the float file `float` on its first `few` samples from runs a
    /// caller makes (calibration's), through [`OutputsCollector::add`].
    pub fn collector(float: &literun::Model<'_>, few: usize) -> OutputsCollector {
        let outs: Vec<usize> = float.outputs().iter().map(|o| o.tensor).collect();
        OutputsCollector {
            values: vec![vec![Vec::new(); outs.len()]; few],
            names: float.outputs().iter().map(|o| o.name.to_string()).collect(),
            outs,
        }
    }
}

/// The float model's outputs, sample by sample, as a run observes them.
pub struct OutputsCollector {
    outs: Vec<usize>,
    names: Vec<String>,
    values: Vec<Vec<Vec<f32>>>,
}

impl OutputsCollector {
    /// The outputs' tensor indices.
    pub fn tensors(&self) -> &[usize] {
        &self.outs
    }

    /// Sample `k`'s values of tensor `t` (ignored past the samples collected and for other
    /// tensors).
    pub fn add(&mut self, k: usize, t: usize, v: &[f32]) {
        if let (Some(row), Some(j)) = (
            self.values.get_mut(k),
            self.outs.iter().position(|&o| o == t),
        ) {
            row[j] = v.to_vec();
        }
    }

    pub fn finish(self) -> FloatOutputs {
        FloatOutputs {
            names: self.names,
            values: self.values,
        }
    }
}

/// End-to-end output error: SNR (dB) and max abs error of each output, quantized vs float.
pub fn output_errors(
    float: &FloatOutputs,
    quantized: &[u8],
    samples: &[Sample],
) -> Result<Vec<LayerError>> {
    output_errors_observing(float, quantized, samples, &[], |_, _| {})
}

/// [`output_errors`], handing the values of the tensors `also` marks (by index) to
/// `f(tensor index, values)` on the same runs, in sample order.
pub fn output_errors_observing(
    float: &FloatOutputs,
    quantized: &[u8],
    samples: &[Sample],
    also: &[bool],
    f: impl FnMut(usize, &[f32]),
) -> Result<Vec<LayerError>> {
    let q = outputs_of(quantized, samples, also, f)?;
    let mut out = Vec::new();
    for (j, name) in float.names.iter().enumerate() {
        let mut a = Acc::default();
        let mut per_sample = Vec::new();
        for (f, q) in float.values.iter().zip(&q) {
            let mut one = Acc::default();
            one.add(&f[j], q[j].iter().copied());
            per_sample.push(one.snr_db());
            a.merge(&one);
        }
        out.push(LayerError {
            tensor: name.clone(),
            op: "output".into(),
            snr_db: a.snr_db(),
            max_abs_error: a.max_abs,
            sample_snr_db: per_sample,
        });
    }
    Ok(out)
}

/// End-to-end error of the float graph with only its conv, depthwise, transposed-conv and dense
/// weights rounded to int8 (per output channel, as full int8 stores them) and every activation
/// still float: what the weights alone cost, beside which the full-int8 error shows what the
/// activations add.
pub fn weights_only_errors(
    float_graph: &Graph,
    label: &str,
    reference: &FloatOutputs,
    samples: &[Sample],
    cache: Option<&super::weight_cache::WeightCache>,
) -> Result<Vec<LayerError>> {
    let mut g = float_graph.clone();
    for ni in 0..g.nodes.len() {
        let node = &g.nodes[ni];
        let (Some(axis), Some(&w)) = (super::weight_channel_axis(&g, node), node.inputs.get(1))
        else {
            continue;
        };
        let Some(data) = g.tensors[w].data.as_ref() else {
            continue;
        };
        let Some(values) = data.as_f32() else {
            continue;
        };
        // The int8 weights full int8 made of the same tensor, where it did.
        let (q, params) = super::weight_cache::WeightCache::quantize(cache, w, data, Some(axis));
        let rounded = super::const_values(&q, &params, values.shape()[axis]);
        let shape = values.shape().to_vec();
        g.tensors[w].data = Some(ConstData::from_f32(&shape, rounded).into());
    }
    let bytes = crate::export::planned_tflite(&g, label)?;
    output_errors(reference, &bytes, samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_max_pools_padding_is_not_an_error() {
        let mut acc = Acc::default();
        acc.add(&[f32::MIN, 2.0, -1.0], [-6.0f32, 2.0, -1.0].into_iter());
        assert_eq!(acc.snr_db(), f64::INFINITY);
        acc.add(&[1.0], [1.5f32].into_iter());
        // Signal 4 + 1 + 1, noise 0.25: the padding adds to neither.
        assert!((acc.snr_db() - 10.0 * (6.0f64 / 0.25).log10()).abs() < 1e-9);
        assert_eq!(acc.max_abs, 0.5);
    }

    #[test]
    fn values_a_later_clip_removes_are_no_error_on_either_side() {
        let relu = (0.0, f32::INFINITY);
        let mut acc = Acc::default();
        // Negative on both sides (the int8 tensor kept them): both become 0 after the ReLU.
        acc.add_within(&[-0.5, -2.0, 1.0], &[-0.4, -1.0, 1.0], relu);
        assert_eq!(acc.snr_db(), f64::INFINITY);
        // A value the ReLU keeps, quantized below 0: an error of its whole size.
        acc.add_within(&[0.2], &[-0.1], relu);
        assert!((acc.snr_db() - 10.0 * (1.04f64 / 0.04).log10()).abs() < 1e-6);
    }
}
