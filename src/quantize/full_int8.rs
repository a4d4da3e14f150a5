//! Full integer quantization (the emit stage): every op with an integer rule runs on int8 (or,
//! per node, int16x8) tensors; the rest stay float between DEQUANTIZE and QUANTIZE. Where the
//! activation type changes between two nodes, the value goes DEQUANTIZE → QUANTIZE, which every
//! TFLite runtime runs (a direct int8 → int16 QUANTIZE fails on older ones).

use super::params::{self, OutputRule};
use super::weight_cache::WeightCache;
use super::{qdq, weight_channel_axis, weights, IoType, QuantSummary, Ranges};
use crate::ir::{ConstData, DType, Graph, Node, Op, QuantParams, TensorId};
use anyhow::{bail, Result};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Options of full-integer quantization.
#[derive(Clone, Debug, Default)]
pub struct FullInt8Options {
    pub io_type: IoType,
    /// int8, or int16 (int16x8) activations.
    pub activations: weights::Activations,
    /// Fail instead of leaving ops in float.
    pub strict: bool,
    /// Node names to keep in float.
    pub exclude_nodes: Vec<String>,
    /// IR op names (e.g. "Softmax") to keep in float.
    pub exclude_ops: Vec<String>,
    /// Dense-layer weights per tensor (for runtimes without per-channel FULLY_CONNECTED, such
    /// as TFLite before 2.13); conv weights stay per channel.
    pub per_tensor_dense: bool,
    /// Parameters an already-quantized (QDQ) model gives: used instead of calibrated ranges,
    /// and the only source when there is no calibration data (then tensors without parameters
    /// stay float, as ONNX Runtime runs them).
    pub qdq: qdq::Annotations,
    /// With int8 activations: nodes (by name) to run with int16 activations instead, where
    /// TFLite has a 16x8 kernel (mixed precision); one that computes without such a kernel
    /// runs float, one that only moves values stays int8.
    pub int16_nodes: Vec<String>,
    /// Nodes (by name) kept in float because they sit between ops that stay float
    /// (`float_islands`).
    pub between_float: Vec<String>,
    /// Ranges of the tensors that `int16_nodes` read and write (min/max: with 16 bits a range
    /// needs no clipping, and the ranges chosen for int8 clip); the calibrated ones when `None`.
    pub int16_ranges: Option<std::sync::Arc<Ranges>>,
    /// Weights quantized by earlier quantizations of the same graph, reused where the float
    /// values are the same (every attempt of the range choice and bias correction quantizes
    /// the same weights).
    pub weight_cache: Option<std::sync::Arc<WeightCache>>,
}

/// Weight-free elementwise arithmetic: a detector's box decoding (anchors added, strides
/// multiplied), a final activation or rescale.
fn is_elementwise_arithmetic(op: &Op) -> bool {
    matches!(op, Op::Binary { .. } | Op::Unary(_) | Op::Clip { .. })
}

/// Layers with weights (the work int8 is for).
fn has_weights(op: &Op) -> bool {
    matches!(
        op,
        Op::Conv2d { .. }
            | Op::ConvTranspose2d { .. }
            | Op::FullyConnected { .. }
            | Op::MatMul { .. }
    )
}

/// Tensors that are model outputs, or reach one only through ops that move values.
fn output_heads(g: &Graph) -> HashSet<TensorId> {
    outputs_through(g, params::moves_values)
}

/// Tensors that reach the model's outputs only through ops that move values or weight-free
/// elementwise arithmetic: the tail after the last layer with weights.
fn output_tail(g: &Graph) -> HashSet<TensorId> {
    outputs_through(g, |op| {
        params::moves_values(op) || is_elementwise_arithmetic(op)
    })
}

/// Tensors that are model outputs or reach one only through ops `passes` accepts (or a
/// control-flow op whose outputs do).
fn outputs_through(g: &Graph, passes: impl Fn(&Op) -> bool) -> HashSet<TensorId> {
    let mut heads: HashSet<TensorId> = g.outputs.iter().copied().collect();
    let readers = {
        let mut r: HashMap<TensorId, Vec<usize>> = HashMap::new();
        for (i, n) in g.nodes.iter().enumerate() {
            for &t in &n.inputs {
                r.entry(t).or_default().push(i);
            }
        }
        r
    };
    for n in g.nodes.iter().rev() {
        for &o in &n.outputs {
            if heads.contains(&o) {
                continue;
            }
            let rs = readers.get(&o).map(Vec::as_slice).unwrap_or(&[]);
            // Read by ops that only move it to an output, or by a control-flow op (which stays
            // float) whose outputs are heads; comparisons beside them (an IF's condition) read
            // it too without making it less of an output.
            let mut to_output = false;
            let all = rs.iter().all(|&r| {
                let r = &g.nodes[r];
                let passes = passes(&r.op) || matches!(r.op, Op::If { .. } | Op::While { .. });
                if passes && r.outputs.iter().all(|t| heads.contains(t)) {
                    to_output = true;
                    true
                } else {
                    matches!(r.op, Op::Compare { .. })
                }
            });
            if all && to_output {
                heads.insert(o);
            }
        }
    }
    heads
}

fn is_quantized(d: DType) -> bool {
    matches!(d, DType::I8 | DType::I16)
}

struct Int8Builder<'r> {
    ranges: &'r Ranges,
    /// Ranges for int16 tensors among int8 ones (`FullInt8Options::int16_ranges`).
    int16_ranges: Option<&'r Ranges>,
    /// The activation type of the node being built.
    act: weights::Activations,
    model: &'r qdq::Annotations,
    nodes: Vec<Node>,
    /// (float tensor, type) → its quantized version (made by a QUANTIZE).
    int8_of: HashMap<(TensorId, DType), TensorId>,
    /// int8 tensor → its float version (made by a DEQUANTIZE).
    float_of: HashMap<TensorId, TensorId>,
    quantize_ops: usize,
    dequantize_ops: usize,
}

impl Int8Builder<'_> {
    /// The calibrated range of `t` for the activation type being built.
    fn ranges_for(&self) -> &Ranges {
        match self.int16_ranges {
            Some(r) if self.act == weights::Activations::Int16 => r,
            _ => self.ranges,
        }
    }

    fn range(&self, g: &Graph, t: TensorId) -> Result<(f32, f32)> {
        self.ranges_for().get(&t).copied().ok_or_else(|| {
            anyhow::anyhow!(
                "no calibration statistics for tensor '{}'",
                g.tensors[t].name
            )
        })
    }

    /// The int8 parameters of float tensor `t`: the model's (QDQ), else from its calibrated range.
    fn params(&self, g: &Graph, t: TensorId) -> Result<QuantParams> {
        if let Some(p) = self.model_params(t) {
            return Ok(p.clone());
        }
        let (lo, hi) = self.range(g, t)?;
        Ok(self.act.params(lo, hi))
    }

    /// The float range of `t`: calibrated, else what the model's (QDQ) parameters represent.
    fn value_range(&self, g: &Graph, t: TensorId) -> Result<(f32, f32)> {
        if let Some(r) = self.ranges_for().get(&t) {
            return Ok(*r);
        }
        let p = self.params(g, t)?;
        let (s, z) = (p.scale[0], p.zero_point[0] as f32);
        let (lo, hi) = self.act.range();
        Ok(((lo - z) * s, (hi - z) * s))
    }

    /// The parameters an (int8) QDQ model gives `t`, where they apply.
    fn model_params(&self, t: TensorId) -> Option<&QuantParams> {
        (self.act == weights::Activations::Int8)
            .then(|| self.model.activations.get(&t))
            .flatten()
    }

    /// Whether [`Self::params`] has an answer for `t`.
    fn has_params(&self, t: TensorId) -> bool {
        self.model.activations.contains_key(&t) || self.ranges.contains_key(&t)
    }

    /// The quantized (int8 or int16) version of runtime tensor `t`, with parameters `want`
    /// (or calibrated).
    fn int8(&mut self, g: &mut Graph, t: TensorId, want: Option<&QuantParams>) -> Result<TensorId> {
        if g.tensors[t].dtype == self.act.dtype() {
            let have = g.tensors[t]
                .quant
                .clone()
                .expect("quantized tensors carry parameters");
            return match want {
                Some(w) if *w != have => Ok(self.requantize(g, t, w.clone())),
                _ => Ok(t),
            };
        }
        if is_quantized(g.tensors[t].dtype) {
            // Quantized with the other type: through float, which every runtime converts,
            // with the parameters `t`'s calibrated range gives this type.
            let p = match want {
                Some(w) => w.clone(),
                None => self.params(g, t)?,
            };
            let f = self.float(g, t);
            return self.int8(g, f, Some(&p));
        }
        if let Some(&q) = self.int8_of.get(&(t, self.act.dtype())) {
            if want.is_none_or(|w| g.tensors[q].quant.as_ref() == Some(w)) {
                return Ok(q);
            }
            return Ok(self.requantize(g, q, want.expect("checked").clone()));
        }
        let params = match want {
            Some(w) => w.clone(),
            None => self.params(g, t)?,
        };
        let suffix = self.act.dtype().name();
        let q = self.quantize_op(g, t, suffix, params);
        self.int8_of.insert((t, self.act.dtype()), q);
        Ok(q)
    }

    /// Quantized → quantized with new parameters (QUANTIZE requantizes).
    fn requantize(&mut self, g: &mut Graph, t: TensorId, params: QuantParams) -> TensorId {
        self.quantize_op(g, t, "requantized", params)
    }

    /// A QUANTIZE of `t` into a new tensor named `<t>/<suffix>` with `params`.
    fn quantize_op(
        &mut self,
        g: &mut Graph,
        t: TensorId,
        suffix: &str,
        params: QuantParams,
    ) -> TensorId {
        let name = g.fresh_name(&format!("{}/{suffix}", g.tensors[t].name));
        let q = g.add_tensor(name.clone(), g.tensors[t].shape.clone(), self.act.dtype());
        g.tensors[q].quant = Some(params);
        self.nodes.push(Node {
            name: format!("{name}/quantize"),
            op: Op::Quantize,
            inputs: vec![t],
            outputs: vec![q],
        });
        self.quantize_ops += 1;
        q
    }

    /// The float version of quantized tensor `t`.
    fn float(&mut self, g: &mut Graph, t: TensorId) -> TensorId {
        if let Some(&f) = self.float_of.get(&t) {
            return f;
        }
        let name = g.fresh_name(&format!("{}/float", g.tensors[t].name));
        let f = g.add_tensor(name.clone(), g.tensors[t].shape.clone(), DType::F32);
        self.nodes.push(Node {
            name: format!("{name}/dequantize"),
            op: Op::Dequantize,
            inputs: vec![t],
            outputs: vec![f],
        });
        self.dequantize_ops += 1;
        self.float_of.insert(t, f);
        f
    }
}

/// Full int8: every op with an int8 rule runs on int8 tensors; the rest stay float between
/// DEQUANTIZE and QUANTIZE (reported, or an error with `strict`).
pub fn full_int8(g: &mut Graph, ranges: &Ranges, opts: &FullInt8Options) -> Result<QuantSummary> {
    let before = g.const_bytes();
    let mut s = QuantSummary {
        mode: match opts.activations {
            weights::Activations::Int8 => "int8",
            weights::Activations::Int16 => "int16x8",
        }
        .into(),
        weight_bytes_before: before,
        ..Default::default()
    };
    let uses = g.use_counts();
    // Outputs whose parameters come from calibration alone (a consumer may still choose them).
    let mut free: std::collections::HashSet<TensorId> = Default::default();
    // Weights quantize the same for every reader (symmetric, per channel): one int8 copy each,
    // e.g. for an unrolled LSTM's recurrent weights read by every time step.
    let mut quantized_weights: HashMap<(TensorId, bool), TensorId> = HashMap::new();
    let act = opts.activations;
    let qt = act.dtype();
    let mut b = Int8Builder {
        ranges,
        int16_ranges: opts.int16_ranges.as_deref(),
        act,
        model: &opts.qdq,
        nodes: Vec::new(),
        int8_of: HashMap::new(),
        float_of: HashMap::new(),
        quantize_ops: 0,
        dequantize_ops: 0,
    };
    // Each node's activation type and rule are decided on the float graph, before any tensor
    // becomes quantized; a node asked to run in int16 without a 16x8 kernel keeps int8 if it
    // only moves values and runs in float if it computes.
    let int16: HashSet<&str> = opts.int16_nodes.iter().map(String::as_str).collect();
    let rules: Vec<(weights::Activations, Option<OutputRule>)> = g
        .nodes
        .iter()
        .map(|n| {
            let wide = act == weights::Activations::Int16 || int16.contains(n.name.as_str());
            match (wide, params::int16_rule(g, n)) {
                (true, Some(r)) => (weights::Activations::Int16, Some(r)),
                (true, None) if act == weights::Activations::Int16 => (act, None),
                // A computing op among int16 ones (an LSTM gate's LOGISTIC or TANH) runs in
                // float: int8 would round what the int16 ops around it keep.
                (true, None) if !opts.strict && !params::moves_values(&n.op) => {
                    (weights::Activations::Int16, None)
                }
                _ => (weights::Activations::Int8, params::int8_rule(g, n)),
            }
        })
        .collect();
    if opts.io_type == IoType::Integer {
        for &t in &g.inputs.clone() {
            if g.tensors[t].dtype == DType::F32 {
                let p = b.params(g, t)?;
                g.tensors[t].dtype = qt;
                g.tensors[t].quant = Some(p);
            }
        }
    }
    // (Not for an already-quantized model: it states its own quantization of such outputs.)
    let float_outputs = opts.io_type == IoType::Float && !opts.strict && !opts.qdq.is_static();
    let output_heads = output_heads(g);
    // After the last layer with weights, the arithmetic that turns its output into the model's
    // (a detector's box decoding: anchors added, strides multiplied) runs in float from the
    // quantized values: it costs no weights and few values, and in int8 each of its steps
    // would round the outputs again, on ranges as wide as an image (YOLOv8n: +1.5 dB).
    let output_tail = if g.nodes.iter().any(|n| has_weights(&n.op)) {
        output_tail(g)
    } else {
        HashSet::new()
    };
    let mut float_heads: HashSet<TensorId> = HashSet::new();
    let old_nodes = std::mem::take(&mut g.nodes);
    let is_f32 = |g: &Graph, t: TensorId| g.tensors[t].dtype == DType::F32;
    for (mut node, (node_act, rule)) in old_nodes.into_iter().zip(rules) {
        b.act = node_act;
        let qt = node_act.dtype();
        // Nothing real-valued in or out (bool logic, integer index math): nothing to quantize.
        if !node
            .inputs
            .iter()
            .chain(&node.outputs)
            .any(|&t| is_f32(g, t) || is_quantized(g.tensors[t].dtype))
        {
            b.nodes.push(node);
            continue;
        }
        let excluded = opts.exclude_nodes.contains(&node.name)
            || opts.exclude_ops.iter().any(|o| o == node.op.name());
        let between_float = opts.between_float.contains(&node.name);
        // A fixed-scale activation whose values are a model output (sigmoid scores, softmax
        // probabilities) is computed in float from its quantized input: int8 would round every
        // score under 1/512 to 0 (a detector's or wake-word model's usual output), and the
        // output is float anyway. So are the value-moving ops between it and the output.
        let float_output = float_outputs
            && rule.is_some()
            && ((node.outputs.iter().all(|o| output_heads.contains(o))
                && match &rule {
                    Some(OutputRule::Fixed(_)) => true,
                    _ => {
                        params::moves_values(&node.op)
                            && node.inputs.iter().any(|t| float_heads.contains(t))
                    }
                })
                || (node.outputs.iter().all(|o| output_tail.contains(o))
                    && (is_elementwise_arithmetic(&node.op)
                        || (params::moves_values(&node.op)
                            && node.inputs.iter().any(|t| float_heads.contains(t))))));
        if float_output {
            float_heads.extend(node.outputs.iter().copied());
        }
        // A comparison of values that stay float (an IF's condition on a float score) compares
        // them as they are: int8 would only add a QUANTIZE and round the score at the threshold.
        let compares_float = matches!(node.op, Op::Compare { .. })
            && node.inputs.iter().any(|t| float_heads.contains(t))
            && node
                .inputs
                .iter()
                .all(|&t| g.tensors[t].is_const() || float_heads.contains(&t));
        let mut rule = if excluded || float_output || between_float || compares_float {
            None
        } else {
            rule
        };
        // TFLite's int8 comparisons need every input scale below 1 (a range under 255).
        if rule == Some(OutputRule::Unquantized) && matches!(node.op, Op::Compare { .. }) {
            for &t in &node.inputs {
                if !g.tensors[t].is_const() && b.has_params(t) && b.params(g, t)?.scale[0] >= 1.0 {
                    rule = None;
                }
            }
        }
        // Without calibration data (a QDQ model), a node runs int8 only where the model gives
        // the parameters it needs: those of its runtime inputs, and of its output unless the
        // rule fixes or copies them.
        let unknown = rule.as_ref().is_some_and(|r| {
            let out_needed = matches!(r, OutputRule::Calibrated | OutputRule::Shared);
            let in_missing = node.inputs.iter().any(|&t| {
                let tt = &g.tensors[t];
                let known = tt.is_const()
                    || tt.dtype != DType::F32
                    || b.int8_of.contains_key(&(t, qt))
                    || b.has_params(t)
                    || *r == OutputRule::Shared;
                !known
            });
            in_missing || (out_needed && node.outputs.iter().any(|&o| !b.has_params(o)))
        });
        let rule = if unknown { None } else { rule };
        let Some(rule) = rule else {
            if !matches!(node.op, Op::Dequantize | Op::Quantize) {
                let why = if excluded {
                    "excluded".to_string()
                } else if between_float {
                    "between ops that stay float: quantized, it would only add a QUANTIZE and a \
                     DEQUANTIZE and lose precision (measured)"
                        .to_string()
                } else if float_output {
                    "model output, computed in float from the quantized input".to_string()
                } else if compares_float {
                    "compares values that stay float".to_string()
                } else if unknown {
                    "no quantization parameters in the model".to_string()
                } else {
                    format!("no {} kernel", qt.name())
                };
                s.float_nodes
                    .push((node.name.clone(), node.op.name().to_string(), why));
            }
            for i in 0..node.inputs.len() {
                let t = node.inputs[i];
                if is_quantized(g.tensors[t].dtype) && !g.tensors[t].is_const() {
                    node.inputs[i] = b.float(g, t);
                } else if let Some(p) = opts.qdq.activations.get(&t).cloned() {
                    // A float op reads what ONNX Runtime reads: the value quantized and
                    // dequantized with the model's parameters.
                    if g.tensors[t].dtype == DType::F32 && !g.tensors[t].is_const() {
                        let q = b.int8(g, t, Some(&p))?;
                        node.inputs[i] = b.float(g, q);
                    }
                }
            }
            b.nodes.push(node);
            continue;
        };
        s.quantized_nodes += 1;
        // Output parameters first where they constrain the inputs (Shared).
        let out = node.outputs[0];
        let shared = match rule {
            OutputRule::Shared => Some(b.params(g, out)?),
            OutputRule::SameAs(k) => {
                let range = b.value_range(g, node.inputs[k])?;
                let fills: Vec<f32> = node
                    .inputs
                    .iter()
                    .filter_map(|&t| g.tensors[t].data.as_ref())
                    .filter_map(|d| d.as_f32())
                    .flat_map(|a| a.iter().copied())
                    .collect();
                let (lo, hi) = params::select_range(range, &fills);
                Some(node_act.params(lo, hi))
            }
            _ => None,
        };
        // Weights per output channel, FULLY_CONNECTED included (LiteRT has per-channel FC;
        // `FullInt8Options::per_tensor_dense` keeps the spec's older per-tensor form).
        let channel_axis = weight_channel_axis(g, &node);
        let per_channel = !(opts.per_tensor_dense && matches!(node.op, Op::FullyConnected { .. }));
        let mut input_scale = 1.0f32;
        let mut weight_scales: Vec<f32> = vec![];
        for i in 0..node.inputs.len() {
            let t = node.inputs[i];
            if let Some(d) = g.tensors[t].data.as_ref() {
                let Some(f) = d.as_f32() else { continue };
                if let (1, Some(_), Some(&c)) =
                    (i, channel_axis, quantized_weights.get(&(t, per_channel)))
                {
                    weight_scales = g.tensors[c].quant.as_ref().expect("int8").scale.clone();
                    node.inputs[i] = c;
                    continue;
                }
                let (q, p): (Arc<ConstData>, QuantParams) = match (i, channel_axis) {
                    (1, Some(axis)) => {
                        let exact = match qdq::weight(f, opts.qdq.constants.get(&t), axis) {
                            Ok(e) => e,
                            Err(why) => {
                                s.notes.push(format!(
                                    "'{}': weights requantized symmetric: {why}",
                                    node.name
                                ));
                                None
                            }
                        };
                        let r = match exact {
                            Some((q, p)) => (q.into(), p),
                            None => WeightCache::quantize(
                                opts.weight_cache.as_deref(),
                                t,
                                d,
                                per_channel.then_some(axis),
                            ),
                        };
                        weight_scales = r.1.scale.clone();
                        r
                    }
                    (2, Some(_)) => {
                        let (q, p) = weights::quantize_bias(
                            f,
                            input_scale,
                            &weight_scales,
                            node_act == weights::Activations::Int16,
                        );
                        (q.into(), p)
                    }
                    // Operands that must share the output's parameters (MAXIMUM, CONCATENATION).
                    _ if shared.is_some() => {
                        let p = shared.clone().expect("checked");
                        (node_act.quantize(f, &p).into(), p)
                    }
                    _ => {
                        let (lo, hi) = f
                            .iter()
                            .fold((0f32, 0f32), |(l, h), &x| (l.min(x), h.max(x)));
                        let p = node_act.params(lo, hi);
                        (node_act.quantize(f, &p).into(), p)
                    }
                };
                // A constant read by several nodes gets its own quantized copy here (but weights,
                // the same for every reader, only one).
                let name = g.fresh_name(&format!("{}/q", g.tensors[t].name));
                let c = g.add_const(name, q);
                g.tensors[c].quant = Some(p);
                node.inputs[i] = c;
                if i == 1 && channel_axis.is_some() {
                    quantized_weights.insert((t, per_channel), c);
                }
            } else if !is_f32(g, t) && !is_quantized(g.tensors[t].dtype) {
                // Conditions and indices stay as they are.
                continue;
            } else {
                let want = shared.as_ref();
                // A free (calibrated) producer feeding only this concat adopts its parameters.
                if let (Some(w), true) = (want, free.contains(&t)) {
                    if uses.get(&t) == Some(&1)
                        && !g.outputs.contains(&t)
                        && g.tensors[t].dtype == qt
                    {
                        g.tensors[t].quant = Some(w.clone());
                    }
                }
                let q = b.int8(g, t, want)?;
                if i == 0 {
                    input_scale = g.tensors[q].quant.as_ref().expect("quantized").scale[0];
                }
                node.inputs[i] = q;
            }
        }
        let out_params = match &rule {
            OutputRule::Unquantized => {
                b.nodes.push(node);
                continue;
            }
            OutputRule::Calibrated => b.params(g, out)?,
            OutputRule::SameAsInput => g.tensors[node.inputs[0]].quant.clone().expect("int8"),
            OutputRule::Fixed(p) => p.clone(),
            OutputRule::Shared | OutputRule::SameAs(_) => shared.clone().expect("computed above"),
        };
        if let Some(m) = opts.qdq.activations.get(&out) {
            if *m != out_params {
                let what = match &rule {
                    OutputRule::Fixed(_) => "the TFLite int8 spec fixes",
                    OutputRule::SameAsInput => "TFLite's kernel keeps its input's",
                    _ => "its inputs must share",
                };
                s.notes.push(format!(
                    "'{}' ({}): output scale/zero point {}/{} where the model has {}/{} ({what})",
                    node.name,
                    node.op.name(),
                    out_params.scale[0],
                    out_params.zero_point[0],
                    m.scale[0],
                    m.zero_point[0]
                ));
            }
        }
        for &o in &node.outputs {
            if !is_f32(g, o) {
                continue;
            }
            g.tensors[o].dtype = qt;
            g.tensors[o].quant = Some(out_params.clone());
            if rule == OutputRule::Calibrated {
                free.insert(o);
            }
        }
        b.nodes.push(node);
    }
    b.act = act;
    if opts.strict && !s.float_nodes.is_empty() {
        bail!(
            "--strict-int8: {} op(s) would stay float: {}",
            s.float_nodes.len(),
            s.float_nodes
                .iter()
                .map(|(n, op, why)| format!("'{n}' ({op}: {why})"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    // Outputs: float by default (DEQUANTIZE; the float tensor takes the model's output name).
    if opts.io_type == IoType::Float {
        for k in 0..g.outputs.len() {
            let t = g.outputs[k];
            // A float output the model quantizes: ONNX Runtime returns it dequantized.
            if g.tensors[t].dtype == DType::F32 {
                if let Some(p) = opts.qdq.activations.get(&t).cloned() {
                    let q = b.int8(g, t, Some(&p))?;
                    let f = b.float(g, q);
                    let name = g.tensors[t].name.clone();
                    g.tensors[t].name = g.fresh_name(&format!("{name}/unquantized"));
                    g.tensors[f].name = name;
                    g.outputs[k] = f;
                }
                continue;
            }
            let dt = g.tensors[t].dtype;
            if is_quantized(dt) {
                let f = b.float(g, t);
                let name = g.tensors[t].name.clone();
                g.tensors[t].name = g.fresh_name(&format!("{name}/{}", dt.name()));
                g.tensors[f].name = name;
                g.outputs[k] = f;
            }
        }
    } else {
        for k in 0..g.outputs.len() {
            let t = g.outputs[k];
            let dt = g.tensors[t].dtype;
            if dt == DType::F32 || (is_quantized(dt) && dt != qt) {
                let q = b.int8(g, t, None)?;
                let name = g.tensors[t].name.clone();
                g.tensors[t].name = g.fresh_name(&format!("{name}/float"));
                g.tensors[q].name = name;
                g.outputs[k] = q;
            }
        }
    }
    let wide = b
        .nodes
        .iter()
        .filter(|n| n.outputs.iter().any(|&o| g.tensors[o].dtype == DType::I16))
        .count();
    if act == weights::Activations::Int8 && wide > 0 {
        s.mode = format!("int8, {wide} op(s) int16x8");
    }
    g.nodes = b.nodes;
    g.remove_dead();
    s.quantize_ops = b.quantize_ops;
    s.dequantize_ops = b.dequantize_ops;
    s.weight_bytes_after = g.const_bytes();
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{CompareOp, UnaryOp};

    /// score = Sigmoid(x); If(score >= t) then 2·score else score: the score reaches the output
    /// through the IF (openWakeWord's two-stage heads), so it is an output head; a score that is
    /// also read by another computing op is not.
    #[test]
    fn a_value_an_if_passes_to_the_output_is_an_output_head() {
        let branch = |scale: f32| {
            let mut b = Graph::default();
            let s = b.add_tensor("s", vec![1], DType::F32);
            let out = b.add_tensor("out", vec![1], DType::F32);
            b.inputs.push(s);
            if scale == 1.0 {
                b.nodes.push(Node {
                    name: "pass".into(),
                    op: Op::Reshape { shape: vec![1] },
                    inputs: vec![s],
                    outputs: vec![out],
                });
            } else {
                let k = b.add_const("k", crate::ir::ConstData::from_f32(&[1], vec![scale]));
                b.nodes.push(Node {
                    name: "scale".into(),
                    op: Op::Binary {
                        op: crate::ir::BinaryOp::Mul,
                        activation: crate::ir::Activation::None,
                    },
                    inputs: vec![s, k],
                    outputs: vec![out],
                });
            }
            b.outputs.push(out);
            Box::new(b)
        };
        let build = |extra_reader: bool| {
            let mut g = Graph::default();
            let x = g.add_tensor("x", vec![1], DType::F32);
            let score = g.add_tensor("score", vec![1], DType::F32);
            let t = g.add_const("t", crate::ir::ConstData::from_f32(&[1], vec![0.5]));
            let fire = g.add_tensor("fire", vec![1], DType::Bool);
            let out = g.add_tensor("out", vec![1], DType::F32);
            g.inputs.push(x);
            g.nodes.push(Node {
                name: "sigmoid".into(),
                op: Op::Unary(UnaryOp::Sigmoid),
                inputs: vec![x],
                outputs: vec![score],
            });
            g.nodes.push(Node {
                name: "ge".into(),
                op: Op::Compare {
                    op: CompareOp::GreaterEqual,
                },
                inputs: vec![score, t],
                outputs: vec![fire],
            });
            g.nodes.push(Node {
                name: "if".into(),
                op: Op::If {
                    then_branch: branch(2.0),
                    else_branch: branch(1.0),
                },
                inputs: vec![fire, score],
                outputs: vec![out],
            });
            g.outputs.push(out);
            if extra_reader {
                let y = g.add_tensor("y", vec![1], DType::F32);
                g.nodes.push(Node {
                    name: "exp".into(),
                    op: Op::Unary(UnaryOp::Exp),
                    inputs: vec![score],
                    outputs: vec![y],
                });
                g.outputs.push(y);
            }
            (g, score)
        };
        let (g, score) = build(false);
        assert!(output_heads(&g).contains(&score));
        let (g, score) = build(true);
        assert!(!output_heads(&g).contains(&score));
    }
}
