//! Quantization of the lowered (TFLite-shaped, NHWC) graph: float16 weights, int8 weights only
//! (hybrid kernels), and full int8 from calibrated activation ranges. Follows the TFLite int8
//! quantization spec: symmetric per-channel int8 weights, int32 biases with scale
//! input_scale × weight_scale, asymmetric per-tensor int8 activations.

pub mod calibrate;
pub mod mixed;
pub mod params;
pub mod qdq;
pub mod report;
pub mod weights;

use crate::ir::{ConstData, DType, Graph, Layout, Node, Op, QuantParams, TensorId};
use anyhow::{bail, Result};
use params::OutputRule;
use serde::Serialize;
use std::collections::HashMap;

/// `--quantize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantizeMode {
    /// float16 constants, DEQUANTIZE to float32 before use.
    Fp16,
    /// int8 weights, float activations (no calibration data).
    Int8Weights,
    /// int8 weights and activations (calibrated).
    Int8Full,
    /// int8 weights, int16 activations (calibrated): for models that lose too much at int8.
    Int16x8,
}

/// The element type of the model's inputs and outputs in full-int8 mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoType {
    #[default]
    Float,
    /// The quantized activation type: int8, or int16 with `--quantize int16x8`.
    Integer,
}

/// Calibrated [min, max] of each runtime tensor of the float graph.
pub type Ranges = HashMap<TensorId, (f32, f32)>;

/// What quantization did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct QuantSummary {
    pub mode: String,
    /// Nodes running integer (or hybrid) kernels.
    pub quantized_nodes: usize,
    /// Nodes left in float: (node name, op, why).
    pub float_nodes: Vec<(String, String, String)>,
    pub quantize_ops: usize,
    pub dequantize_ops: usize,
    pub weight_bytes_before: usize,
    pub weight_bytes_after: usize,
    /// What an already-quantized (QDQ / dynamic) model's parameters became, where they could
    /// not be used as given (requantized weights, parameters the TFLite spec fixes).
    pub notes: Vec<String>,
}

/// Inserts `x' = DEQUANTIZE(c)` for constant `c` (re-encoded by the caller), returning x'.
fn dequantize_const(g: &mut Graph, c: TensorId, new_nodes: &mut Vec<Node>) -> TensorId {
    let name = g.tensors[c].name.clone();
    let shape = g.tensors[c].shape.clone();
    g.tensors[c].name = g.fresh_name(&format!("{name}/quantized"));
    let out = g.add_tensor(name.clone(), shape, DType::F32);
    new_nodes.push(Node {
        name: format!("{name}/dequantize"),
        op: Op::Dequantize,
        inputs: vec![c],
        outputs: vec![out],
    });
    out
}

/// The float32 version of constant `c` re-encoded by `encode` (float16, or int8 with its
/// parameters) behind one DEQUANTIZE, made once however many nodes read `c`.
fn reencoded(
    g: &mut Graph,
    c: TensorId,
    done: &mut HashMap<TensorId, TensorId>,
    nodes: &mut Vec<Node>,
    encode: impl FnOnce(&ConstData) -> (ConstData, Option<QuantParams>),
) -> TensorId {
    if let Some(&f) = done.get(&c) {
        return f;
    }
    let (data, quant) = encode(g.tensors[c].data.as_ref().expect("a constant"));
    g.tensors[c].dtype = data.dtype();
    g.tensors[c].data = Some(data);
    g.tensors[c].quant = quant;
    let f = dequantize_const(g, c, nodes);
    done.insert(c, f);
    f
}

/// Which constant inputs of `node` are weights that quantization may re-encode.
fn weight_inputs(node: &Node) -> &'static [usize] {
    match node.op {
        Op::Conv2d { .. } | Op::ConvTranspose2d { .. } | Op::FullyConnected { .. } => &[1, 2],
        Op::MatMul { .. } | Op::Binary { .. } | Op::PRelu => &[0, 1],
        Op::Gather { .. } => &[0],
        _ => &[],
    }
}

/// float16 weights: each float32 weight constant becomes FLOAT16 behind a DEQUANTIZE (once per
/// constant, however many nodes read it), as TFLite's float16 quantization does.
pub fn fp16_weights(g: &mut Graph) -> QuantSummary {
    let before = g.const_bytes();
    let mut done: HashMap<TensorId, TensorId> = HashMap::new();
    let mut nodes = Vec::with_capacity(g.nodes.len());
    for mut node in std::mem::take(&mut g.nodes) {
        for &k in weight_inputs(&node) {
            let Some(&c) = node.inputs.get(k) else {
                continue;
            };
            // A weight shared by several nodes is re-encoded once; later readers reuse it.
            let is_f32 = g.tensors[c].data.as_ref().map(|d| d.dtype()) == Some(DType::F32);
            if !is_f32 && !done.contains_key(&c) {
                continue;
            }
            node.inputs[k] = reencoded(g, c, &mut done, &mut nodes, |d| (weights::to_f16(d), None));
        }
        nodes.push(node);
    }
    g.nodes = nodes;
    QuantSummary {
        mode: "fp16".into(),
        dequantize_ops: done.len(),
        weight_bytes_before: before,
        weight_bytes_after: g.const_bytes(),
        ..Default::default()
    }
}

/// The per-channel axis of a conv/dense weight in NHWC layout: output channels.
fn weight_channel_axis(g: &Graph, node: &Node) -> Option<usize> {
    match &node.op {
        Op::Conv2d {
            layout: Layout::Nhwc,
            group,
            ..
        } => {
            let ws = g.shape(node.inputs[1]);
            let x = g.shape(node.inputs[0]);
            // Depthwise weights are [1, KH, KW, C*M]: channels last.
            if *group > 1 && *group == x[3] && ws[0] == 1 {
                Some(3)
            } else {
                Some(0)
            }
        }
        Op::FullyConnected { .. } | Op::ConvTranspose2d { .. } => Some(0),
        _ => None,
    }
}

/// Constants smaller than this stay float in weights-only mode when no hybrid kernel reads them
/// (TFLite's dynamic-range default): quantizing them saves little and costs a DEQUANTIZE.
const MIN_DEQUANTIZED_ELEMENTS: usize = 1024;

/// Weights-only int8: conv/depthwise/dense weights become int8 per output channel read directly
/// by hybrid kernels; other large float weights become int8 behind a DEQUANTIZE.
pub fn int8_weights(g: &mut Graph) -> QuantSummary {
    int8_weights_with(g, &qdq::Annotations::default())
}

/// [`int8_weights`] using the int8 values and scales of an already-quantized model's weights
/// where TFLite's hybrid kernels can take them as they are.
pub fn int8_weights_with(g: &mut Graph, model: &qdq::Annotations) -> QuantSummary {
    let before = g.const_bytes();
    let mut s = QuantSummary {
        mode: "int8 weights-only".into(),
        weight_bytes_before: before,
        ..Default::default()
    };
    let uses = g.use_counts();
    // Hybrid kernels exist for conv, depthwise and dense layers (not TRANSPOSE_CONV).
    let hybrid_axis = |g: &Graph, node: &Node| match node.op {
        Op::Conv2d { .. } | Op::FullyConnected { .. } => weight_channel_axis(g, node),
        _ => None,
    };
    // Weights every reader of which is a hybrid layer (an unrolled LSTM's recurrent weights,
    // shared by every time step) are quantized once, in place, for all of them.
    let mut reads: HashMap<TensorId, (usize, Option<usize>)> = HashMap::new();
    for node in &g.nodes {
        let axis = hybrid_axis(g, node);
        for (k, &t) in node.inputs.iter().enumerate() {
            let e = reads.entry(t).or_insert((0, axis.filter(|_| k == 1)));
            e.0 += 1;
            if k != 1 || axis.is_none() || e.1 != axis {
                e.1 = None;
            }
        }
    }
    let hybrid_only = |t: TensorId| {
        reads
            .get(&t)
            .is_some_and(|&(n, axis)| axis.is_some() && uses.get(&t) == Some(&n))
    };
    let mut done: HashMap<TensorId, TensorId> = HashMap::new();
    let mut nodes = Vec::with_capacity(g.nodes.len());
    for mut node in std::mem::take(&mut g.nodes) {
        let hybrid_axis = hybrid_axis(g, &node);
        if let (Some(_), Some(&w)) = (hybrid_axis, node.inputs.get(1)) {
            if g.tensors[w].dtype == DType::I8 && hybrid_only(w) {
                // Already quantized for an earlier reader.
                s.quantized_nodes += 1;
                nodes.push(node);
                continue;
            }
        }
        if let (Some(axis), Some(&w)) = (hybrid_axis, node.inputs.get(1)) {
            let is_f32 = g.tensors[w]
                .data
                .as_ref()
                .and_then(|d| d.as_f32())
                .is_some();
            // A weight shared with another kind of reader keeps its float copy for that reader.
            if is_f32 && (uses.get(&w) == Some(&1) || hybrid_only(w)) {
                let data = g.tensors[w]
                    .data
                    .as_ref()
                    .and_then(|d| d.as_f32())
                    .expect("f32");
                let (q, p) = match qdq::weight(data, model.constants.get(&w), axis) {
                    // LiteRT's hybrid conv kernels read one scale per output channel.
                    Ok(Some((q, p)))
                        if !p.is_per_channel() && matches!(node.op, Op::Conv2d { .. }) =>
                    {
                        let n = g.tensors[w].shape[axis];
                        let p = QuantParams {
                            scale: vec![p.scale[0]; n],
                            zero_point: vec![0; n],
                            axis,
                        };
                        (q, p)
                    }
                    Ok(Some(exact)) => exact,
                    Ok(None) => weights::quantize_symmetric(data, Some(axis)),
                    Err(why) => {
                        s.notes.push(format!(
                            "'{}': weights requantized symmetric per channel: {why}",
                            node.name
                        ));
                        weights::quantize_symmetric(data, Some(axis))
                    }
                };
                g.tensors[w].data = Some(q);
                g.tensors[w].dtype = DType::I8;
                g.tensors[w].quant = Some(p);
                s.quantized_nodes += 1;
                nodes.push(node);
                continue;
            }
        }
        for &k in weight_inputs(&node) {
            let Some(&c) = node.inputs.get(k) else {
                continue;
            };
            let big_f32 = g.tensors[c]
                .data
                .as_ref()
                .and_then(|d| d.as_f32())
                .is_some_and(|d| d.len() >= MIN_DEQUANTIZED_ELEMENTS);
            if !big_f32 && !done.contains_key(&c) {
                continue;
            }
            node.inputs[k] = reencoded(g, c, &mut done, &mut nodes, |d| {
                let (q, p) = weights::quantize_symmetric(d.as_f32().expect("f32"), None);
                (q, Some(p))
            });
        }
        nodes.push(node);
    }
    g.nodes = nodes;
    s.dequantize_ops = done.len();
    s.weight_bytes_after = g.const_bytes();
    s
}

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
}

struct Int8Builder<'r> {
    ranges: &'r Ranges,
    act: weights::Activations,
    model: &'r qdq::Annotations,
    nodes: Vec<Node>,
    /// float tensor → its int8 version (made by a QUANTIZE, or the tensor itself once int8).
    int8_of: HashMap<TensorId, TensorId>,
    /// int8 tensor → its float version (made by a DEQUANTIZE).
    float_of: HashMap<TensorId, TensorId>,
    quantize_ops: usize,
    dequantize_ops: usize,
}

impl Int8Builder<'_> {
    fn range(&self, g: &Graph, t: TensorId) -> Result<(f32, f32)> {
        self.ranges.get(&t).copied().ok_or_else(|| {
            anyhow::anyhow!(
                "no calibration statistics for tensor '{}'",
                g.tensors[t].name
            )
        })
    }

    /// The int8 parameters of float tensor `t`: the model's (QDQ), else from its calibrated range.
    fn params(&self, g: &Graph, t: TensorId) -> Result<QuantParams> {
        if let Some(p) = self.model.activations.get(&t) {
            return Ok(p.clone());
        }
        let (lo, hi) = self.range(g, t)?;
        Ok(self.act.params(lo, hi))
    }

    /// The float range of `t`: calibrated, else what the model's (QDQ) parameters represent.
    fn value_range(&self, g: &Graph, t: TensorId) -> Result<(f32, f32)> {
        if let Some(r) = self.ranges.get(&t) {
            return Ok(*r);
        }
        let p = self.params(g, t)?;
        let (s, z) = (p.scale[0], p.zero_point[0] as f32);
        let (lo, hi) = self.act.range();
        Ok(((lo - z) * s, (hi - z) * s))
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
        if let Some(&q) = self.int8_of.get(&t) {
            if want.is_none_or(|w| g.tensors[q].quant.as_ref() == Some(w)) {
                return Ok(q);
            }
            return Ok(self.requantize(g, q, want.expect("checked").clone()));
        }
        let params = match want {
            Some(w) => w.clone(),
            None => self.params(g, t)?,
        };
        let name = g.fresh_name(&format!(
            "{}/{}",
            g.tensors[t].name,
            self.act.dtype().name()
        ));
        let q = g.add_tensor(name.clone(), g.tensors[t].shape.clone(), self.act.dtype());
        g.tensors[q].quant = Some(params);
        self.nodes.push(Node {
            name: format!("{name}/quantize"),
            op: Op::Quantize,
            inputs: vec![t],
            outputs: vec![q],
        });
        self.quantize_ops += 1;
        self.int8_of.insert(t, q);
        Ok(q)
    }

    /// Quantized → quantized with new parameters (QUANTIZE requantizes).
    fn requantize(&mut self, g: &mut Graph, t: TensorId, params: QuantParams) -> TensorId {
        let name = g.fresh_name(&format!("{}/requantized", g.tensors[t].name));
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
        act,
        model: &opts.qdq,
        nodes: Vec::new(),
        int8_of: HashMap::new(),
        float_of: HashMap::new(),
        quantize_ops: 0,
        dequantize_ops: 0,
    };
    // Rules are decided on the float graph, before any tensor becomes int8.
    let rules: Vec<Option<OutputRule>> = g
        .nodes
        .iter()
        .map(|n| match act {
            weights::Activations::Int8 => params::int8_rule(g, n),
            weights::Activations::Int16 => params::int16_rule(g, n),
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
    let old_nodes = std::mem::take(&mut g.nodes);
    let is_f32 = |g: &Graph, t: TensorId| g.tensors[t].dtype == DType::F32;
    for (mut node, rule) in old_nodes.into_iter().zip(rules) {
        // Nothing real-valued in or out (bool logic, integer index math): nothing to quantize.
        if !node
            .inputs
            .iter()
            .chain(&node.outputs)
            .any(|&t| is_f32(g, t) || g.tensors[t].dtype == qt)
        {
            b.nodes.push(node);
            continue;
        }
        let excluded = opts.exclude_nodes.contains(&node.name)
            || opts.exclude_ops.iter().any(|o| o == node.op.name());
        let mut rule = if excluded { None } else { rule };
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
                    || b.int8_of.contains_key(&t)
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
                if g.tensors[t].dtype == qt && !g.tensors[t].is_const() {
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
                Some(act.params(lo, hi))
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
            if let Some(d) = g.tensors[t].data.clone() {
                let Some(f) = d.as_f32() else { continue };
                if let (1, Some(_), Some(&c)) =
                    (i, channel_axis, quantized_weights.get(&(t, per_channel)))
                {
                    weight_scales = g.tensors[c].quant.as_ref().expect("int8").scale.clone();
                    node.inputs[i] = c;
                    continue;
                }
                let (q, p) = match (i, channel_axis) {
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
                        let r = exact.unwrap_or_else(|| {
                            weights::quantize_symmetric(f, per_channel.then_some(axis))
                        });
                        weight_scales = r.1.scale.clone();
                        r
                    }
                    (2, Some(_)) => weights::quantize_bias(
                        f,
                        input_scale,
                        &weight_scales,
                        act == weights::Activations::Int16,
                    ),
                    // Operands that must share the output's parameters (MAXIMUM, CONCATENATION).
                    _ if shared.is_some() => {
                        let p = shared.clone().expect("checked");
                        (act.quantize(f, &p), p)
                    }
                    _ => {
                        let (lo, hi) = f
                            .iter()
                            .fold((0f32, 0f32), |(l, h), &x| (l.min(x), h.max(x)));
                        let p = act.params(lo, hi);
                        (act.quantize(f, &p), p)
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
            } else if !is_f32(g, t) && g.tensors[t].dtype != qt {
                // Conditions and indices stay as they are.
                continue;
            } else {
                let want = shared.as_ref();
                // A free (calibrated) producer feeding only this concat adopts its parameters.
                if let (Some(w), true) = (want, free.contains(&t)) {
                    if uses.get(&t) == Some(&1) && !g.outputs.contains(&t) {
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
            if g.tensors[t].dtype == qt {
                let f = b.float(g, t);
                let name = g.tensors[t].name.clone();
                g.tensors[t].name = g.fresh_name(&format!("{name}/{}", qt.name()));
                g.tensors[f].name = name;
                g.outputs[k] = f;
            }
        }
    } else {
        for k in 0..g.outputs.len() {
            let t = g.outputs[k];
            if g.tensors[t].dtype == DType::F32 {
                let q = b.int8(g, t, None)?;
                let name = g.tensors[t].name.clone();
                g.tensors[t].name = g.fresh_name(&format!("{name}/float"));
                g.tensors[q].name = name;
                g.outputs[k] = q;
            }
        }
    }
    g.nodes = b.nodes;
    g.remove_dead();
    s.quantize_ops = b.quantize_ops;
    s.dequantize_ops = b.dequantize_ops;
    s.weight_bytes_after = g.const_bytes();
    Ok(s)
}

/// Float values of an int8 constant (for tests and reports).
pub fn const_values(d: &ConstData, p: &QuantParams, axis_len: usize) -> Vec<f32> {
    let v = d.to_i64_vec();
    let inner = if p.is_per_channel() {
        d.shape()[p.axis + 1..].iter().product::<usize>()
    } else {
        1
    };
    v.iter()
        .enumerate()
        .map(|(i, &q)| {
            let c = if p.is_per_channel() {
                (i / inner) % axis_len
            } else {
                0
            };
            (q - p.zero_point[c]) as f32 * p.scale[c]
        })
        .collect()
}
