//! Quantization of the lowered (TFLite-shaped, NHWC) graph: float16 weights, int8 weights only
//! (hybrid kernels), and full int8 from calibrated activation ranges. Follows the TFLite int8
//! quantization spec: symmetric per-channel int8 weights, int32 biases with scale
//! input_scale × weight_scale, asymmetric per-tensor int8 activations.

pub mod bias_correction;
pub mod calibrate;
pub mod clip_ranges;
pub mod downstream;
pub mod equalize;
pub mod float_islands;
mod full_int8;
pub mod mixed;
pub mod params;
pub mod pipeline;
pub mod qdq;
pub mod range_stats;
pub mod report;
pub mod weight_rounding;
pub mod weights;

pub use full_int8::{full_int8, FullInt8Options};

use crate::ir::{ConstData, DType, Graph, Layout, Node, Op, QuantParams, TensorId};
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
pub(crate) fn weight_channel_axis(g: &Graph, node: &Node) -> Option<usize> {
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

/// Weights smaller than this stay float in weights-only mode (TFLite's dynamic-range default,
/// `min_elements_for_weights`): quantizing them saves little and costs accuracy (a small
/// depthwise or first conv kernel) or a DEQUANTIZE.
const MIN_QUANTIZED_ELEMENTS: usize = 1024;

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
            // The model's own int8 weights are used whatever their size.
            let worth_it = |d: &ndarray::ArrayD<f32>| {
                d.len() >= MIN_QUANTIZED_ELEMENTS || model.constants.contains_key(&w)
            };
            let is_f32 = g.tensors[w]
                .data
                .as_ref()
                .and_then(|d| d.as_f32())
                .is_some_and(worth_it);
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
                .is_some_and(|d| d.len() >= MIN_QUANTIZED_ELEMENTS);
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
