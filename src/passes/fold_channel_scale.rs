//! Moves a per-channel scale that follows a conv or dense layer into the layer's weights and
//! bias: `Conv → Mul(s)` becomes `Conv(w·s, b·s)` (a BatchNorm exported as Mul/Add, a
//! MobileOne block's learnt scale), also across a ReLU or LeakyReLU when `s >= 0`:
//! `relu(conv(x)) * s = relu(conv(x) * s)` (both are positively homogeneous), so
//! `Conv → Relu → Mul(s)` becomes `Conv(w·s, b·s) → Relu`. A BatchNorm after the activation
//! (`Conv → Relu → BN`) is `* s + t`: its scale moves the same way and an Add of the shift is
//! left. Exact in real arithmetic; what it buys is ranges (and one op less): such models
//! normalise channels whose raw ranges span orders of magnitude only *after* the layer, and a
//! per-tensor int8 range over those raw channels rounds the small ones to nothing.
//! Runs on the ONNX-layout IR, before `fuse_bias` (which then folds any shift it can).

use super::fuse_bias::per_channel;
use crate::ir::{Activation, BinaryOp, ConstData, Graph, Layout, Node, Op, TensorId, UnaryOp};

/// What follows the activation.
enum After {
    /// `Mul(y, s)`: the scale moves, the Mul goes.
    Mul(Vec<f32>),
    /// `BatchNorm(y)`: the scale moves, an Add of the shift stays.
    BatchNorm { scale: Vec<f32>, shift: Vec<f32> },
}

/// The output-channel axis of a layer the scale can move into, in its output and its weights.
fn layer_axes(g: &Graph, n: &Node) -> Option<(usize, usize)> {
    match n.op {
        Op::Conv2d {
            activation: Activation::None,
            layout: Layout::Nchw,
            ..
        } => Some((1, 0)),
        Op::FullyConnected {
            activation: Activation::None,
        } => Some((g.shape(n.outputs[0]).len().checked_sub(1)?, 0)),
        _ => None,
    }
}

fn is_positively_homogeneous(op: &Op) -> bool {
    match op {
        Op::Unary(UnaryOp::Relu) => true,
        Op::Unary(UnaryOp::LeakyRelu { alpha }) => alpha.is_finite(),
        _ => false,
    }
}

/// The scale (and shift) node `n` applies per channel of `y` (rank `rank`, channel axis `axis`).
fn after(g: &Graph, n: &Node, y: TensorId, axis: usize, channels: usize) -> Option<After> {
    let rank = g.shape(y).len();
    match &n.op {
        Op::Binary {
            op: BinaryOp::Mul,
            activation: Activation::None,
        } => {
            let c = if n.inputs[0] == y {
                n.inputs[1]
            } else {
                n.inputs[0]
            };
            let s = per_channel(g.const_data(c)?, rank, axis, channels)?;
            Some(After::Mul(s))
        }
        Op::BatchNorm {
            epsilon,
            layout: Layout::Nchw,
        } if axis == 1 && n.inputs[0] == y => {
            let p: Option<Vec<Vec<f32>>> = n.inputs[1..5]
                .iter()
                .map(|&t| g.const_data(t).map(|d| d.to_f32_vec()))
                .collect();
            let p = p?;
            if p.iter().any(|v| v.len() != channels) {
                return None;
            }
            let scale: Vec<f32> = (0..channels)
                .map(|c| p[0][c] / (p[3][c] + epsilon).sqrt())
                .collect();
            let shift = (0..channels)
                .map(|c| p[1][c] - p[2][c] * scale[c])
                .collect();
            Some(After::BatchNorm { scale, shift })
        }
        _ => None,
    }
}

/// Moves every scale it can; returns how many.
pub fn fold_channel_scale(g: &mut Graph) -> usize {
    let mut moved = fold_hard_sigmoid_affine(g);
    loop {
        let producers = g.producers();
        let uses = g.use_counts();
        let single = |t: TensorId| uses.get(&t) == Some(&1) && !g.outputs.contains(&t);
        let mut found = None;
        for (ni, n) in g.nodes.iter().enumerate() {
            if !matches!(
                n.op,
                Op::Binary {
                    op: BinaryOp::Mul,
                    ..
                } | Op::BatchNorm { .. }
            ) {
                continue;
            }
            let Some((y, &ai)) = n
                .inputs
                .iter()
                .take(2)
                .filter(|&&t| !g.tensors[t].is_const())
                .find_map(|t| producers.get(t).map(|p| (*t, p)))
            else {
                continue;
            };
            // The layer writes `y` directly, or through a positively homogeneous activation.
            let through = is_positively_homogeneous(&g.nodes[ai].op);
            let (z, li) = if through {
                let z = g.nodes[ai].inputs[0];
                match producers.get(&z) {
                    Some(&li) if single(y) && single(z) => (z, li),
                    _ => continue,
                }
            } else if single(y) {
                (y, ai)
            } else {
                continue;
            };
            let layer = &g.nodes[li];
            let Some((axis, w_axis)) = layer_axes(g, layer) else {
                continue;
            };
            if g.shape(z) != g.shape(y) || g.shape(y) != g.shape(n.outputs[0]) {
                continue;
            }
            let Some(w) = g.const_data(layer.inputs[1]) else {
                continue;
            };
            let channels = w.shape()[w_axis];
            let bias_ok = layer
                .inputs
                .get(2)
                .is_none_or(|&b| g.const_data(b).is_some_and(|d| d.len() == channels));
            if g.shape(y).get(axis) != Some(&channels) || !bias_ok {
                continue;
            }
            let Some(a) = after(g, n, y, axis, channels) else {
                continue;
            };
            // A BatchNorm right after the layer is `fold_batchnorm`'s.
            if !through && matches!(a, After::BatchNorm { .. }) {
                continue;
            }
            let scale = match &a {
                After::Mul(s) | After::BatchNorm { scale: s, .. } => s,
            };
            if scale
                .iter()
                .any(|s| !(s.is_finite() && (*s >= 0.0 || !through)))
            {
                continue;
            }
            found = Some((ni, ai, li, w_axis, a));
            break;
        }
        let Some((ni, ai, li, w_axis, a)) = found else {
            break;
        };
        let (scale, shift) = match a {
            After::Mul(s) => (s, None),
            After::BatchNorm { scale, shift } => (scale, Some(shift)),
        };
        let layer = g.nodes[li].clone();
        let w = g.const_data(layer.inputs[1]).expect("checked").clone();
        let shape = w.shape().to_vec();
        let inner: usize = shape[w_axis + 1..].iter().product();
        let c = scale.len();
        let mut wv = w.to_f32_vec();
        for (i, v) in wv.iter_mut().enumerate() {
            *v *= scale[(i / inner) % c];
        }
        let wname = g.fresh_name(&format!("{}_scaled", g.tensors[layer.inputs[1]].name));
        let wid = g.add_const(wname, ConstData::from_f32(&shape, wv));
        let mut ins = vec![layer.inputs[0], wid];
        if let Some(&b) = layer.inputs.get(2) {
            let bv: Vec<f32> = g.const_data(b).expect("checked").to_f32_vec();
            let bv = bv
                .iter()
                .zip(&scale)
                .map(|(b, s)| b * s)
                .collect::<Vec<_>>();
            let bname = g.fresh_name(&format!("{}/bias_scaled", layer.name));
            ins.push(g.add_const(bname, ConstData::from_f32(&[c], bv)));
        }
        g.nodes[li].inputs = ins;
        let out = g.nodes[ni].outputs[0];
        match shift {
            None => {
                // The activation (or the layer) now writes the Mul's output, which may be a
                // graph output.
                g.nodes[ai].outputs[0] = out;
                g.nodes.remove(ni);
            }
            Some(shift) => {
                let rank = g.shape(out).len();
                let mut cshape = vec![1; rank];
                cshape[1] = c;
                let sname = g.fresh_name(&format!("{}/shift", g.nodes[ni].name));
                let sid = g.add_const(sname, ConstData::from_f32(&cshape, shift));
                let n = &mut g.nodes[ni];
                n.op = Op::Binary {
                    op: BinaryOp::Add,
                    activation: Activation::None,
                };
                n.inputs = vec![n.inputs[0], sid];
            }
        }
        g.remove_dead();
        moved += 1;
    }
    moved
}

/// `HardSigmoid(α, β)` of a conv/dense output read by nothing else: `α·(Wx + b) + β` is the
/// layer with weights `α·W` and bias `α·b + β`, leaving the clip to [0, 1] (a squeeze-excite
/// gate's MUL and ADD in int8 each round once more; the layer's output range becomes the
/// gate's). Returns how many it folded.
fn fold_hard_sigmoid_affine(g: &mut Graph) -> usize {
    let mut folded = 0;
    let producers = g.producers();
    let uses = g.use_counts();
    for ni in 0..g.nodes.len() {
        let Op::HardSigmoid { alpha, beta } = g.nodes[ni].op else {
            continue;
        };
        if alpha == 1.0 && beta == 0.0 || !(alpha.is_finite() && beta.is_finite()) {
            continue;
        }
        let x = g.nodes[ni].inputs[0];
        let Some(&li) = producers.get(&x) else {
            continue;
        };
        if uses.get(&x) != Some(&1) || g.outputs.contains(&x) {
            continue;
        }
        let layer = g.nodes[li].clone();
        let Some((_, w_axis)) = layer_axes(g, &layer) else {
            continue;
        };
        let Some(w) = g.const_data(layer.inputs[1]) else {
            continue;
        };
        let channels = w.shape()[w_axis];
        let bias = match layer.inputs.get(2) {
            Some(&b) => match g.const_data(b) {
                Some(d) if d.len() == channels => d.to_f32_vec(),
                _ => continue,
            },
            None => vec![0.0; channels],
        };
        let shape = w.shape().to_vec();
        let wv: Vec<f32> = w.to_f32_vec().iter().map(|v| v * alpha).collect();
        let bv: Vec<f32> = bias.iter().map(|b| b * alpha + beta).collect();
        let wname = g.fresh_name(&format!("{}_hardsigmoid", g.tensors[layer.inputs[1]].name));
        let wid = g.add_const(wname, ConstData::from_f32(&shape, wv));
        let bname = g.fresh_name(&format!("{}/bias_hardsigmoid", layer.name));
        let bid = g.add_const(bname, ConstData::from_f32(&[channels], bv));
        g.nodes[li].inputs = vec![layer.inputs[0], wid, bid];
        g.nodes[ni].op = Op::HardSigmoid {
            alpha: 1.0,
            beta: 0.0,
        };
        folded += 1;
    }
    if folded > 0 {
        g.remove_dead();
    }
    folded
}
