//! Empirical bias correction: weight and activation rounding shift the mean of a conv or dense
//! layer's output per channel, and the shift accumulates through the model (a global average
//! pool or a squeeze-excite gate then sees mostly the shift). Run the float and the quantized
//! file on calibration samples, measure each layer's per-channel mean error, and subtract it
//! from the layer's float bias; the int32 bias then carries the correction exactly (AIMET's and
//! Nagel et al.'s empirical bias correction).
//!
//! A fused ReLU / ReLU6 hides the pre-activation mean: the observed shift is divided by the
//! fraction of outputs in the activation's linear range (channels almost always clipped are
//! left alone). Each layer is corrected only for the shift it adds itself: the shift it
//! inherits from its input (the input's per-channel mean error through the layer's weights,
//! summed over the taps) is subtracted first, so correcting every layer at once does not
//! correct an upstream shift twice. Corrections are measured again on the file they produce for
//! a few rounds, and a round is kept only if the output SNR improves.

use super::calibrate::Sample;
use super::pipeline::{Attempt, Quantizer};
use crate::ir::{Activation, ConstData, Graph, Op, TensorId};
use anyhow::Result;
use std::cell::RefCell;
use std::collections::HashMap;

/// Rounds of measure-and-correct.
const ROUNDS: usize = 3;

/// Samples the means are measured on.
const SAMPLES: usize = 32;

/// Channels whose outputs are in the activation's linear range less often than this are left
/// alone (their pre-activation shift cannot be read from the output).
const MIN_ACTIVE: f64 = 0.05;

/// A layer whose bias can absorb a correction.
#[derive(Clone)]
struct Target {
    /// The output tensor (its name is the same in the float and the quantized file).
    name: String,
    /// The input tensor's name.
    input: String,
    in_channels: usize,
    bias: TensorId,
    channels: usize,
    activation: Activation,
    /// The weights summed over the kernel's taps: `[channels][in_channels]`, or `[channels]`
    /// for a depthwise layer (output channel `o` reads input channel `o / multiplier`).
    tap_sums: Vec<f32>,
    depthwise_multiplier: Option<usize>,
}

impl Target {
    /// The mean shift of output channel `o` that an input mean shift `d_in` causes.
    fn inherited(&self, o: usize, d_in: &[f64]) -> f64 {
        match self.depthwise_multiplier {
            Some(m) => f64::from(self.tap_sums[o]) * d_in[o / m],
            None => self.tap_sums[o * self.in_channels..(o + 1) * self.in_channels]
                .iter()
                .zip(d_in)
                .map(|(&w, &d)| f64::from(w) * d)
                .sum(),
        }
    }
}

/// Gives every conv and dense layer a float bias of its own (a zero one where it had none; a
/// copy where constant deduplication shares one between layers), so correcting one layer's bias
/// changes no other layer.
fn own_biases(g: &mut Graph) {
    let uses = g.use_counts();
    for k in 0..g.nodes.len() {
        let n = &g.nodes[k];
        if !matches!(n.op, Op::Conv2d { .. } | Op::FullyConnected { .. }) || n.inputs.len() < 2 {
            continue;
        }
        let out = n.outputs[0];
        let Some(&channels) = g.shape(out).last() else {
            continue;
        };
        let name = format!("{}/bias", g.tensors[out].name);
        let data = match n.inputs.get(2) {
            None => ConstData::F32(ndarray::ArrayD::zeros(ndarray::IxDyn(&[channels]))),
            Some(&b) if uses.get(&b).is_some_and(|&u| u > 1) => {
                match g.tensors[b].data.as_ref().and_then(|d| d.as_f32()) {
                    Some(d) => ConstData::F32(d.clone()),
                    None => continue,
                }
            }
            Some(_) => continue,
        };
        let name = g.fresh_name(&name);
        let b = g.add_const(name, data);
        let n = &mut g.nodes[k];
        if n.inputs.len() == 2 {
            n.inputs.push(b);
        } else {
            n.inputs[2] = b;
        }
    }
}

fn targets(g: &Graph) -> Vec<Target> {
    g.nodes
        .iter()
        .filter_map(|n| {
            let activation = match n.op {
                Op::Conv2d { activation, .. } | Op::FullyConnected { activation } => activation,
                _ => return None,
            };
            let &bias = n.inputs.get(2)?;
            let b = g.tensors[bias].data.as_ref()?.as_f32()?;
            let w = g.tensors[*n.inputs.get(1)?].data.as_ref()?.as_f32()?;
            let (x, out) = (n.inputs[0], n.outputs[0]);
            let channels = *g.shape(out).last()?;
            let in_channels = *g.shape(x).last()?;
            if b.len() != channels || channels == 0 || in_channels == 0 {
                return None;
            }
            let wv: Vec<f32> = w.iter().copied().collect();
            let depthwise = matches!(n.op, Op::Conv2d { group, .. } if group > 1);
            let (tap_sums, depthwise_multiplier) = if depthwise {
                // [1, KH, KW, C*M]: channels last.
                let mut sums = vec![0f32; channels];
                for row in wv.chunks_exact(channels) {
                    sums.iter_mut().zip(row).for_each(|(s, w)| *s += w);
                }
                (sums, Some((channels / in_channels).max(1)))
            } else {
                // [O, KH, KW, I] or [O, I]: input channels last.
                if !wv.len().is_multiple_of(channels * in_channels) {
                    return None;
                }
                let per_out = wv.len() / channels;
                let mut sums = vec![0f32; channels * in_channels];
                for (o, taps) in wv.chunks_exact(per_out).enumerate() {
                    for tap in taps.chunks_exact(in_channels) {
                        for (i, w) in tap.iter().enumerate() {
                            sums[o * in_channels + i] += w;
                        }
                    }
                }
                (sums, None)
            };
            Some(Target {
                name: g.tensors[out].name.clone(),
                input: g.tensors[x].name.clone(),
                in_channels,
                bias,
                channels,
                activation,
                tap_sums,
                depthwise_multiplier,
            })
        })
        .collect()
}

/// Per-channel sums of a tensor's values over the samples (channels last).
#[derive(Clone, Default)]
struct ChannelStats {
    sum: Vec<f64>,
    /// Values in the linear range of the layer's activation (float run only).
    active: Vec<u64>,
    count: u64,
}

impl ChannelStats {
    /// Adds a tensor's values (rows of the channels), each clamped to `[lo, hi]`, counting
    /// those `linear` accepts (one loop per activation, so the compiler can vectorize it).
    #[inline(always)]
    fn add(&mut self, v: &[f32], (lo, hi): (f32, f32), linear: impl Fn(f32) -> bool) {
        let c = self.sum.len();
        let (sum, active) = (&mut self.sum[..], &mut self.active[..c]);
        for row in v.chunks_exact(c) {
            for ((s, a), &x) in sum.iter_mut().zip(active.iter_mut()).zip(row) {
                let x = x.clamp(lo, hi);
                *s += f64::from(x);
                *a += u64::from(linear(x));
            }
        }
        self.count += (v.len() / c) as u64;
    }

    fn mean(&self, c: usize) -> f64 {
        self.sum[c] / (self.count.max(1) as f64)
    }
}

fn linear(a: Activation, x: f32) -> bool {
    match a {
        Activation::None => true,
        Activation::Relu => x > 0.0,
        Activation::Relu6 => x > 0.0 && x < 6.0,
        Activation::ReluN1To1 => x > -1.0 && x < 1.0,
        // Not a piecewise-linear clip: the shift passes scaled by the slope; treat as linear
        // where the slope is not tiny.
        Activation::Tanh => x.abs() < 0.9,
    }
}

/// Per-channel statistics, by tensor name, of every target's output and input in one file,
/// accumulated sample after sample (an int8 copy of a float input, `x/int8`, counts as `x`).
#[derive(Clone)]
struct Means<'a> {
    /// name → (channels, activation whose linear range is counted)
    wanted: HashMap<String, (usize, Activation)>,
    /// The file's tensor names, by index.
    names: Vec<String>,
    /// Useful intervals of clipped tensors, by name.
    bounded: &'a HashMap<String, (f32, f32)>,
    stats: HashMap<String, ChannelStats>,
}

impl<'a> Means<'a> {
    fn new(
        bytes: &[u8],
        targets: &[Target],
        bounded: &'a HashMap<String, (f32, f32)>,
    ) -> Result<Means<'a>> {
        let mut wanted: HashMap<String, (usize, Activation)> = HashMap::new();
        for t in targets {
            wanted.insert(t.name.clone(), (t.channels, t.activation));
            wanted
                .entry(t.input.clone())
                .or_insert((t.in_channels, Activation::None));
        }
        Ok(Means {
            wanted,
            names: super::report::tensor_names(bytes)?,
            bounded,
            stats: HashMap::new(),
        })
    }

    /// Which tensors (by index in the file) the statistics read.
    fn observed(&self) -> Vec<bool> {
        self.names
            .iter()
            .map(|n| self.wanted.contains_key(super::report::float_name(n)))
            .collect()
    }

    /// Adds tensor `t`'s values of one sample.
    fn add(&mut self, t: usize, v: &[f32]) {
        let Some(name) = self.names.get(t) else {
            return;
        };
        let base = super::report::float_name(name);
        let Some(&(c, activation)) = self.wanted.get(base) else {
            return;
        };
        // A value that later clipping removes is no error: compare what survives it.
        let (lo, hi) = self
            .bounded
            .get(base)
            .copied()
            .unwrap_or((f32::NEG_INFINITY, f32::INFINITY));
        if !v.len().is_multiple_of(c) {
            return;
        }
        let s = self
            .stats
            .entry(base.to_string())
            .or_insert_with(|| ChannelStats {
                sum: vec![0.0; c],
                active: vec![0; c],
                count: 0,
            });
        match activation {
            Activation::None => s.add(v, (lo, hi), |x| linear(Activation::None, x)),
            Activation::Relu => s.add(v, (lo, hi), |x| linear(Activation::Relu, x)),
            Activation::Relu6 => s.add(v, (lo, hi), |x| linear(Activation::Relu6, x)),
            Activation::ReluN1To1 => s.add(v, (lo, hi), |x| linear(Activation::ReluN1To1, x)),
            Activation::Tanh => s.add(v, (lo, hi), |x| linear(Activation::Tanh, x)),
        }
    }
}

/// [`Means`] of `bytes` over `samples`.
fn measure(
    bytes: &[u8],
    samples: &[Sample],
    targets: &[Target],
    bounded: &HashMap<String, (f32, f32)>,
) -> Result<HashMap<String, ChannelStats>> {
    let mut means = Means::new(bytes, targets, bounded)?;
    let observed = means.observed();
    let observed = |t: usize| observed.get(t).copied().unwrap_or(false);
    super::observe::observe_where(bytes, samples, &observed, |_, t, v| means.add(t, v))?;
    Ok(means.stats)
}

/// The samples of `samples` bias correction measures on.
pub fn samples_used(samples: &[Sample]) -> &[Sample] {
    &samples[..samples.len().min(SAMPLES)]
}

/// What bias correction reads from the float file, gathered by the caller on runs it makes of
/// the float file anyway ([`samples_used`], in order, through [`Self::add`]): the float graph
/// with a bias of its own for every layer, the layers, and their float statistics.
#[derive(Clone)]
pub struct FloatMeans<'a> {
    graph: Graph,
    targets: Vec<Target>,
    means: Means<'a>,
}

impl<'a> FloatMeans<'a> {
    /// Prepares to measure `float_bytes`, the file of `float_graph`; `bounded`: the useful
    /// intervals of clipped tensors, by name. `None` when no layer's bias can be corrected.
    pub fn new(
        float_graph: &Graph,
        float_bytes: &[u8],
        bounded: &'a HashMap<String, (f32, f32)>,
    ) -> Result<Option<FloatMeans<'a>>> {
        let mut graph = float_graph.clone();
        own_biases(&mut graph);
        let targets = targets(&graph);
        if targets.is_empty() {
            return Ok(None);
        }
        let means = Means::new(float_bytes, &targets, bounded)?;
        Ok(Some(FloatMeans {
            graph,
            targets,
            means,
        }))
    }

    /// Which tensors of the float file (by index) [`Self::add`] reads.
    pub fn observed(&self) -> Vec<bool> {
        self.means.observed()
    }

    /// Adds tensor `t`'s float values of one sample.
    pub fn add(&mut self, t: usize, v: &[f32]) {
        self.means.add(t, v);
    }
}

/// Corrects the biases of `q`'s float graph (measured in `float`, on [`samples_used`] of
/// `samples`) against the quantized attempt `best`. Returns the corrected float graph, the
/// layers (output tensor names) whose bias changed and the attempt made from it, or `None` when
/// no round improved the output SNR.
pub fn correct(
    q: &Quantizer<'_>,
    best: &Attempt,
    samples: &[Sample],
    float: FloatMeans<'_>,
) -> Result<Option<(Graph, Vec<String>, Attempt)>> {
    let samples = samples_used(samples);
    let FloatMeans {
        mut graph,
        targets,
        means,
    } = float;
    if targets.is_empty() {
        return Ok(None);
    }
    let float = means.stats;
    let mut current = best.clone();
    let mut found: Option<Vec<String>> = None;
    // The error samples are the first of those the means are measured on: an attempt's runs on
    // them also give its means there, and a kept attempt's measurement goes on from the next
    // sample (the sums add the same terms in the same order).
    let few = q.samples.len();
    let reuse = std::ptr::eq(q.samples.as_ptr(), samples.as_ptr()) && few <= samples.len();
    let mut carried: Option<Means<'_>> = None;
    for _ in 0..ROUNDS {
        let quantized = match carried.take() {
            Some(mut means) => {
                let observed = means.observed();
                let observed = |t: usize| observed.get(t).copied().unwrap_or(false);
                super::observe::observe_where(
                    &current.bytes,
                    &samples[few..],
                    &observed,
                    |_, t, v| means.add(t, v),
                )?;
                means.stats
            }
            None => measure(&current.bytes, samples, &targets, &q.bounded)?,
        };
        let mut trial = graph.clone();
        let mut changed: Vec<String> = Vec::new();
        for t in &targets {
            let (Some(f), Some(qs)) = (float.get(&t.name), quantized.get(&t.name)) else {
                continue;
            };
            let Some(b) = trial.tensors[t.bias].data.as_ref().and_then(|d| d.as_f32()) else {
                continue;
            };
            // The input's mean error per channel (none known: assume none).
            let d_in: Vec<f64> = match (float.get(&t.input), quantized.get(&t.input)) {
                (Some(fi), Some(qi)) if fi.sum.len() == t.in_channels => (0..t.in_channels)
                    .map(|c| qi.mean(c) - fi.mean(c))
                    .collect(),
                _ => vec![0.0; t.in_channels],
            };
            let mut b = b.clone();
            let mut any = false;
            for (c, v) in b.iter_mut().enumerate() {
                let active = f.active[c] as f64 / f.count.max(1) as f64;
                if active < MIN_ACTIVE {
                    continue;
                }
                let shift = (qs.mean(c) - f.mean(c)) / active - t.inherited(c, &d_in);
                if shift.is_finite() && shift != 0.0 {
                    *v -= shift as f32;
                    any = true;
                }
            }
            if any {
                trial.tensors[t.bias].data = Some(ConstData::F32(b).into());
                changed.push(t.name.clone());
            }
        }
        if changed.is_empty() {
            break;
        }
        let slot: RefCell<Option<Means<'_>>> = RefCell::new(None);
        let attempt = if reuse {
            q.attempt_observing(&trial, &current.precision, |bytes| {
                let means = Means::new(bytes, &targets, &q.bounded)?;
                let observed = means.observed();
                *slot.borrow_mut() = Some(means);
                let add = |t: usize, v: &[f32]| {
                    if let Some(m) = slot.borrow_mut().as_mut() {
                        m.add(t, v);
                    }
                };
                Ok(Some((
                    observed,
                    Box::new(add) as Box<dyn FnMut(usize, &[f32])>,
                )))
            })?
        } else {
            q.attempt_with(&trial, &current.precision)?
        };
        if attempt.worst_snr() <= current.worst_snr() {
            break;
        }
        carried = slot.into_inner();
        graph = trial;
        current = attempt;
        let mut all = found.take().unwrap_or_default();
        all.extend(
            changed
                .into_iter()
                .filter(|n| !all.contains(n))
                .collect::<Vec<_>>(),
        );
        found = Some(all);
    }
    Ok(found.map(|n| (graph, n, current)))
}

/// Corrects the biases again for the precision a `--min-snr` search chose (`best`). The plain
/// file's corrections compensate the mean errors of int8 activations; where the search moved
/// layers to int16 or float those errors shrink or vanish, and the corrections become errors of
/// their own (PP-OCRv4 rec's corrected float graph, run in float, reads 14.3 dB against the
/// model). Starts again from the uncorrected graph with `best`'s precision. Returns the graph,
/// the corrected layers and the attempt made from it when that is better than `best` by what
/// the budget judges ([`Attempt::budget_snr`]).
pub fn correct_for_precision(
    q: &Quantizer<'_>,
    best: &Attempt,
    samples: &[Sample],
    float: FloatMeans<'_>,
) -> Result<Option<(Graph, Vec<String>, Attempt)>> {
    let uncorrected = q.attempt_with(&float.graph, &best.precision)?;
    let graph = float.graph.clone();
    let (graph, layers, attempt) = match correct(q, &uncorrected, samples, float)? {
        Some(corrected) => corrected,
        None => (graph, Vec::new(), uncorrected),
    };
    Ok((attempt.budget_snr() > best.budget_snr()).then_some((graph, layers, attempt)))
}
