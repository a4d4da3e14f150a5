//! Quantization of the lowered (TFLite-shaped, NHWC) graph: float16 weights, int8 weights only
//! (hybrid kernels), and full int8 from calibrated activation ranges. Follows the TFLite int8
//! quantization spec: symmetric per-channel int8 weights, int32 biases with scale
//! input_scale × weight_scale, asymmetric per-tensor int8 activations.

pub mod bias_correction;
pub mod calibrate;
pub mod clip_ranges;
pub mod downstream;
pub mod equalize;
pub mod equalize_gated;
mod feeds_log;
pub mod float_islands;
mod full_int8;
mod inverse_factor;
mod layernorm16;
mod lstm_cell;
pub mod mixed;
mod observe;
mod outer_products;
pub mod params;
pub mod pipeline;
pub mod qdq;
mod quantizer;
pub mod range_stats;
pub mod report;
mod saturating_clamps;
mod weight_cache;
pub mod weight_rounding;
pub mod weights;
mod wide;

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
    g.tensors[c].data = Some(data.into());
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

/// The inputs of `node` weights-only int8 re-encodes: [`weight_inputs`] but an elementwise op's
/// operands (anchors and strides of a detector's box decoding, positional tables, scales), which
/// TFLite's dynamic range and ONNX Runtime's dynamic quantization leave float too: one int8
/// step over such a table's range moves a box by pixels (the YOLOv8 detector nudenet: 34.6 dB
/// with its box-decoding constants float, 33.0 with them int8, on 16 held-out inputs).
fn int8_weight_inputs(node: &Node) -> &'static [usize] {
    match node.op {
        Op::Binary { .. } | Op::PRelu => &[],
        _ => weight_inputs(node),
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
    // Hybrid kernels exist for conv, depthwise and dense layers (not TRANSPOSE_CONV). Depthwise
    // layers are not given them: a hybrid depthwise kernel quantizes its input with one range for
    // all channels, and each output channel reads one input channel only, so a channel with small
    // inputs and large weights (a batch norm folded into it) loses all its bits (-27 dB in one
    // layer of PicoDet). Their weights stay int8 behind a per-channel DEQUANTIZE: the same bytes,
    // and a float kernel with the int8 weights' exact values. (An already-quantized model's own
    // depthwise weights keep their hybrid kernel, which reads them as they are.)
    let hybrid_axis = |g: &Graph, node: &Node| match node.op {
        Op::Conv2d { .. } | Op::FullyConnected { .. } => {
            let own = |w: &TensorId| model.constants.contains_key(w);
            weight_channel_axis(g, node)
                .filter(|&axis| axis == 0 || node.inputs.get(1).is_some_and(own))
        }
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
    // Not where an already-quantized model gives the layer int8 weights, nor where another
    // node reads its constants (they are re-encoded in place for all readers).
    let mut feeds_log = feeds_log::layers_feeding_log(g);
    feeds_log.retain(|&i| {
        g.nodes[i]
            .inputs
            .iter()
            .skip(1)
            .all(|t| !model.constants.contains_key(t) && uses.get(t) == Some(&1))
    });
    for (i, mut node) in std::mem::take(&mut g.nodes).into_iter().enumerate() {
        if feeds_log.contains(&i) {
            s.notes.push(format!(
                "'{}': weights stay float: its output reaches a LOG, which int8's rounding of \
                 small values would turn into large errors",
                node.name
            ));
            nodes.push(node);
            continue;
        }
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
                g.tensors[w].data = Some(q.into());
                g.tensors[w].dtype = DType::I8;
                g.tensors[w].quant = Some(p);
                s.quantized_nodes += 1;
                nodes.push(node);
                continue;
            }
        }
        for &k in int8_weight_inputs(&node) {
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
            // Conv and transposed-conv weights per output channel (depthwise: the last axis),
            // others per tensor: a batch norm folded into a transposed conv scales each output
            // channel's weights differently (PP-OCRv4 det's head: 25.8 → 26.5 dB per channel).
            let axis =
                if k == 1 && matches!(node.op, Op::Conv2d { .. } | Op::ConvTranspose2d { .. }) {
                    weight_channel_axis(g, &node)
                } else {
                    None
                };
            node.inputs[k] = reencoded(g, c, &mut done, &mut nodes, |d| {
                let (q, p) = weights::quantize_symmetric(d.as_f32().expect("f32"), axis);
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
    let inner = if p.is_per_channel() {
        d.shape()[p.axis + 1..].iter().product::<usize>()
    } else {
        1
    };
    // Contiguous int8 (weights): a run of `inner` values per channel index, without the
    // widened copy (the same values).
    let int8 = match d {
        ConstData::I8(a) => a.as_slice(),
        _ => None,
    };
    if let Some(q) = int8 {
        if inner > 0 && (!p.is_per_channel() || axis_len > 0) {
            let run = if p.is_per_channel() {
                inner
            } else {
                q.len().max(1)
            };
            let mut out = Vec::with_capacity(q.len());
            for (i, run) in q.chunks(run).enumerate() {
                let c = if p.is_per_channel() { i % axis_len } else { 0 };
                let (z, s) = (p.zero_point[c], p.scale[c]);
                out.extend(run.iter().map(|&v| (i64::from(v) - z) as f32 * s));
            }
            return out;
        }
    }
    let v = d.to_i64_vec();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Activation, Layout};

    fn conv(
        g: &mut Graph,
        name: &str,
        x: TensorId,
        w: ndarray::ArrayD<f32>,
        group: usize,
    ) -> TensorId {
        let out_c = if group > 1 {
            w.shape()[3]
        } else {
            w.shape()[0]
        };
        let w = g.add_const(format!("{name}_w"), ConstData::F32(w));
        let y = g.add_tensor(format!("{name}_out"), vec![1, 4, 4, out_c], DType::F32);
        g.nodes.push(Node {
            name: name.into(),
            op: Op::Conv2d {
                layout: Layout::Nhwc,
                group,
                strides: [1, 1],
                dilations: [1, 1],
                pads: [1; 4],
                activation: Activation::None,
            },
            inputs: vec![x, w],
            outputs: vec![y],
        });
        y
    }

    /// Weights-only: a conv reads its int8 weights directly (hybrid); a depthwise conv reads them
    /// through a per-channel DEQUANTIZE (its float kernel sees each channel's exact int8 values).
    #[test]
    fn depthwise_weights_are_dequantized_per_channel_and_conv_weights_stay_hybrid() {
        let c = 128; // 3x3x128 = 1152 weights: above the float threshold
        let mut g = Graph::default();
        let x = g.add_tensor("x", vec![1, 4, 4, c], DType::F32);
        g.inputs.push(x);
        // Channel k's weights scale with k: one shared scale would round the first ones to 0.
        let dw = ndarray::Array4::from_shape_fn((1, 3, 3, c), |(_, i, j, k)| {
            (1.0 + i as f32 - j as f32) * (k + 1) as f32 * 1e-3
        });
        let d = conv(&mut g, "dw", x, dw.into_dyn(), c);
        let pw =
            ndarray::Array4::from_shape_fn((16, 1, 1, c), |(o, _, _, k)| (o + k) as f32 * 0.01);
        let y = conv(&mut g, "pw", d, pw.into_dyn(), 1);
        g.outputs.push(y);
        let s = int8_weights(&mut g);
        assert_eq!((s.quantized_nodes, s.dequantize_ops), (1, 1));
        let node = |name: &str| g.nodes.iter().find(|n| n.name == name).expect("node");
        let pw_w = node("pw").inputs[1];
        assert_eq!(g.tensors[pw_w].dtype, DType::I8);
        let dw_w = node("dw").inputs[1];
        assert_eq!(g.tensors[dw_w].dtype, DType::F32);
        let deq = g
            .nodes
            .iter()
            .find(|n| n.outputs == [dw_w])
            .expect("a DEQUANTIZE");
        assert!(matches!(deq.op, Op::Dequantize));
        let q = &g.tensors[deq.inputs[0]];
        assert_eq!(q.dtype, DType::I8);
        let p = q.quant.as_ref().expect("quantized");
        assert_eq!((p.axis, p.scale.len()), (3, c));
        // Every channel keeps its values to within half its own step.
        let values = const_values(q.data.as_ref().expect("data"), p, c);
        let first = (1.0 + 0.0 - 2.0) * 1e-3; // (i, j, k) = (0, 2, 0)
        assert!((values[2 * c] - first).abs() <= p.scale[0] * 0.5 + 1e-9);
    }

    /// Weights-only: a dense layer whose output reaches a LOG (a log-mel filterbank) keeps its
    /// float weights; one whose output does not is int8.
    #[test]
    fn a_dense_layer_feeding_a_log_keeps_float_weights() {
        let mut g = Graph::default();
        let x = g.add_tensor("x", vec![1, 4, 257], DType::F32);
        g.inputs.push(x);
        let dense = |g: &mut Graph, name: &str, x: TensorId| {
            let w = ndarray::Array2::from_shape_fn((32, 257), |(o, i)| ((o * i) % 7) as f32);
            let w = g.add_const(format!("{name}_w"), ConstData::F32(w.into_dyn()));
            let y = g.add_tensor(format!("{name}_out"), vec![1, 4, 32], DType::F32);
            g.nodes.push(Node {
                name: name.into(),
                op: Op::FullyConnected {
                    activation: Activation::None,
                },
                inputs: vec![x, w],
                outputs: vec![y],
            });
            (w, y)
        };
        let (mel_w, mel) = dense(&mut g, "mel", x);
        let (other_w, other) = dense(&mut g, "other", x);
        g.outputs.push(other);
        let floor = g.add_const("floor", ConstData::F32(ndarray::arr0(1e-10f32).into_dyn()));
        let clipped = g.add_tensor("clipped", vec![1, 4, 32], DType::F32);
        g.nodes.push(Node {
            name: "clip".into(),
            op: Op::Binary {
                op: crate::ir::BinaryOp::Max,
                activation: Activation::None,
            },
            inputs: vec![mel, floor],
            outputs: vec![clipped],
        });
        let log = g.add_tensor("log", vec![1, 4, 32], DType::F32);
        g.nodes.push(Node {
            name: "log".into(),
            op: Op::Unary(crate::ir::UnaryOp::Log),
            inputs: vec![clipped],
            outputs: vec![log],
        });
        g.outputs.push(log);
        let s = int8_weights(&mut g);
        assert_eq!(g.tensors[mel_w].dtype, DType::F32);
        assert_eq!(g.tensors[other_w].dtype, DType::I8);
        assert!(s
            .notes
            .iter()
            .any(|n| n.contains("'mel'") && n.contains("LOG")));
    }

    /// Weights-only: a large constant operand of an elementwise op (a detector's anchor grid)
    /// stays float; a dense layer's weights still become int8.
    #[test]
    fn elementwise_constants_stay_float_and_dense_weights_become_int8() {
        let mut g = Graph::default();
        let x = g.add_tensor("x", vec![1, 2100, 8], DType::F32);
        g.inputs.push(x);
        let anchors = ndarray::Array3::from_shape_fn((1, 2100, 8), |(_, i, _)| i as f32 + 0.5);
        let a = g.add_const("anchors", ConstData::F32(anchors.into_dyn()));
        let y = g.add_tensor("y", vec![1, 2100, 8], DType::F32);
        g.nodes.push(Node {
            name: "decode".into(),
            op: Op::Binary {
                op: crate::ir::BinaryOp::Add,
                activation: Activation::None,
            },
            inputs: vec![x, a],
            outputs: vec![y],
        });
        let w = ndarray::Array2::from_shape_fn((128, 8), |(o, i)| (o + i) as f32 * 0.01);
        let w = g.add_const("fc_w", ConstData::F32(w.into_dyn()));
        let z = g.add_tensor("z", vec![1, 2100, 128], DType::F32);
        g.nodes.push(Node {
            name: "fc".into(),
            op: Op::FullyConnected {
                activation: Activation::None,
            },
            inputs: vec![y, w],
            outputs: vec![z],
        });
        g.outputs.push(z);
        let s = int8_weights(&mut g);
        assert_eq!((s.quantized_nodes, s.dequantize_ops), (1, 0));
        assert_eq!(g.tensors[a].dtype, DType::F32);
        assert_eq!(g.tensors[w].dtype, DType::I8);
    }

    /// Weights-only: a transposed conv (no hybrid kernel) reads int8 weights through a DEQUANTIZE
    /// with one scale per output channel, so a small channel keeps its values.
    #[test]
    fn transposed_conv_weights_are_dequantized_per_output_channel() {
        let (o, i) = (16, 32); // [O, 2, 2, I]: 2048 weights, above the float threshold
        let mut g = Graph::default();
        let x = g.add_tensor("x", vec![1, 4, 4, i], DType::F32);
        g.inputs.push(x);
        // Output channel 0's weights are 1000x smaller than the others' (a folded batch norm).
        let w = ndarray::Array4::from_shape_fn((o, 2, 2, i), |(oc, a, b, ic)| {
            let v = ((a + 2 * b + ic) % 7) as f32 - 3.0;
            if oc == 0 {
                v * 1e-3
            } else {
                v
            }
        });
        let w = g.add_const("ct_w", ConstData::F32(w.into_dyn()));
        let y = g.add_tensor("ct_out", vec![1, 8, 8, o], DType::F32);
        g.nodes.push(Node {
            name: "ct".into(),
            op: Op::ConvTranspose2d {
                strides: [2, 2],
                pads: [0; 4],
                output_size: [8, 8],
                activation: Activation::None,
                layout: Layout::Nhwc,
            },
            inputs: vec![x, w],
            outputs: vec![y],
        });
        g.outputs.push(y);
        let s = int8_weights(&mut g);
        assert_eq!(s.dequantize_ops, 1);
        let w = g
            .nodes
            .iter()
            .find(|n| n.name == "ct")
            .expect("node")
            .inputs[1];
        let deq = g
            .nodes
            .iter()
            .find(|n| n.outputs == [w])
            .expect("a DEQUANTIZE");
        let q = &g.tensors[deq.inputs[0]];
        let p = q.quant.as_ref().expect("quantized");
        assert_eq!((p.axis, p.scale.len()), (0, o));
        // Channel 0 keeps its values to within half its own step (a shared scale, 3/127, would
        // round all of them to 0).
        let values = const_values(q.data.as_ref().expect("data"), p, o);
        for (k, &v) in values[..2 * 2 * i].iter().enumerate() {
            let (a, b, ic) = (k / i / 2, (k / i) % 2, k % i);
            let want = ((a + 2 * b + ic) % 7) as f32 - 3.0;
            assert!(
                (v - want * 1e-3).abs() <= p.scale[0] * 0.5 + 1e-9,
                "{k}: {v}"
            );
        }
    }

    #[test]
    fn the_snr_budget_holds_pooled_and_per_sample() {
        use super::pipeline::budget_snr;
        use super::report::LayerError;
        let out = |pooled: f64, per_sample: &[f64]| LayerError {
            tensor: "y".into(),
            op: "output".into(),
            snr_db: pooled,
            max_abs_error: 0.0,
            sample_snr_db: per_sample.to_vec(),
        };
        // A quiet sample pulls the per-sample mean under the pooled figure.
        assert_eq!(budget_snr(&[out(30.0, &[20.0, 34.0])]), 27.0);
        // Each sample counts its worst output: min(40, 25) and min(20, 45).
        assert_eq!(
            budget_snr(&[out(35.0, &[40.0, 20.0]), out(33.0, &[25.0, 45.0])]),
            22.5
        );
        // The pooled figure binds when it is the lower; an error-free sample counts 100 dB.
        assert_eq!(budget_snr(&[out(50.0, &[f64::INFINITY, 40.0])]), 50.0);
        assert_eq!(budget_snr(&[out(90.0, &[f64::INFINITY, 40.0])]), 70.0);
        // Without per-sample figures, the pooled one.
        assert_eq!(budget_snr(&[out(31.0, &[])]), 31.0);
    }
}
