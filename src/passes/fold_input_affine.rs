//! Folds a per-channel affine that a conv or dense layer reads into that layer: `Conv(y * s)`
//! becomes `Conv` with weights `w[:, c] * s[c]` (exact with zero padding too: a zero pad of
//! `y * s` is `s` times a zero pad of `y`), and `Conv(y + t)` adds `sum w[o, c, taps] * t[c]` to
//! the bias (exact only where no tap reads padding: no padding, as a 1x1 or VALID layer, or a
//! dense layer). PP-LCNet's "learnable affine" after each HardSwish is such a Mul and Add: two
//! ops less, and in int8 two requantizations less (PP-OCRv4 det: one such ADD lost 11.7 dB).
//! Where padding keeps the Add out, `y * s + t` is rewritten `(y + t / s) * s` (s nonzero) so the
//! Mul still folds and only the Add stays. Runs on the ONNX-layout IR; the mirror of
//! `fold_channel_scale`, which folds a scale *after* a layer.

use super::fuse_bias::per_channel;
use super::swish::bin_op;
use crate::ir::{Activation, BinaryOp, ConstData, Graph, Layout, Node, Op, TensorId};

/// How a layer's weights hold its input channels.
struct Reader {
    /// Input channels of the layer.
    channels: usize,
    /// Channel axis of the input value.
    axis: usize,
    /// Whether a constant added to the input can move into the bias exactly.
    shift_ok: bool,
}

fn reader(g: &Graph, n: &Node, x: TensorId) -> Option<Reader> {
    if n.inputs.first() != Some(&x) || g.const_data(*n.inputs.get(1)?).is_none() {
        return None;
    }
    let rank = g.shape(x).len();
    match n.op {
        Op::Conv2d {
            layout: Layout::Nchw,
            pads,
            ..
        } if rank == 4 => Some(Reader {
            channels: g.shape(x)[1],
            axis: 1,
            shift_ok: pads == [0; 4],
        }),
        Op::FullyConnected { .. } if rank >= 1 => Some(Reader {
            channels: g.shape(x)[rank - 1],
            axis: rank - 1,
            shift_ok: true,
        }),
        _ => None,
    }
}

/// `w` (ONNX layout: conv [O, I/group, KH, KW], dense [O, I]) with input channel `c` (of
/// `channels`, `group` groups) scaled by `s[c]`.
fn scale_inputs(w: &[f32], shape: &[usize], group: usize, s: &[f32]) -> Vec<f32> {
    let (o, per_group_in) = (shape[0], shape[1]);
    let taps: usize = shape[2..].iter().product();
    let out_per_group = o / group.max(1);
    let mut v = w.to_vec();
    for oc in 0..o {
        let g0 = (oc / out_per_group.max(1)) * per_group_in;
        for ic in 0..per_group_in {
            let f = s[g0 + ic];
            let base = (oc * per_group_in + ic) * taps;
            v[base..base + taps].iter_mut().for_each(|x| *x *= f);
        }
    }
    v
}

/// The bias change `sum w[o, c, taps] * t[c]` of adding `t` to the input.
fn shifted_bias(w: &[f32], shape: &[usize], group: usize, t: &[f32]) -> Vec<f32> {
    let (o, per_group_in) = (shape[0], shape[1]);
    let taps: usize = shape[2..].iter().product();
    let out_per_group = o / group.max(1);
    (0..o)
        .map(|oc| {
            let g0 = (oc / out_per_group.max(1)) * per_group_in;
            (0..per_group_in)
                .map(|ic| {
                    let base = (oc * per_group_in + ic) * taps;
                    let sum: f64 = w[base..base + taps].iter().map(|&x| f64::from(x)).sum();
                    sum * f64::from(t[g0 + ic])
                })
                .sum::<f64>() as f32
        })
        .collect()
}

/// The constant operand of binary node `n` and the other one, if exactly one is constant.
fn split_const(g: &Graph, n: &Node) -> Option<(TensorId, TensorId)> {
    if n.inputs.len() != 2 {
        return None;
    }
    match (
        g.tensors[n.inputs[0]].is_const(),
        g.tensors[n.inputs[1]].is_const(),
    ) {
        (false, true) => Some((n.inputs[0], n.inputs[1])),
        (true, false) => Some((n.inputs[1], n.inputs[0])),
        _ => None,
    }
}

/// Finds `Mul(y, s) → Add(·, t) → layer` where the layer's padding keeps the Add from folding,
/// and makes it `Add(y, t / s) → Mul(·, s) → layer` (same values up to float rounding).
fn swap_scale_past_shift(g: &mut Graph) -> bool {
    let uses = g.use_counts();
    let mut reader_of: std::collections::HashMap<TensorId, usize> = Default::default();
    for (i, n) in g.nodes.iter().enumerate() {
        for &t in &n.inputs {
            reader_of.insert(t, i);
        }
    }
    let sole = |t: TensorId| {
        (uses.get(&t) == Some(&1) && !g.outputs.contains(&t))
            .then(|| reader_of.get(&t).copied())
            .flatten()
    };
    for (mi, m) in g.nodes.iter().enumerate() {
        if bin_op(m) != Some(BinaryOp::Mul) {
            continue;
        }
        let Some((y, s)) = split_const(g, m) else {
            continue;
        };
        let Some(ai) = sole(m.outputs[0]) else {
            continue;
        };
        let a = &g.nodes[ai];
        if bin_op(a) != Some(BinaryOp::Add) {
            continue;
        }
        let Some((mo, t)) = split_const(g, a) else {
            continue;
        };
        let Some(li) = sole(a.outputs[0]) else {
            continue;
        };
        let Some(r) = reader(g, &g.nodes[li], a.outputs[0]) else {
            continue;
        };
        let rank = g.shape(y).len();
        if r.shift_ok
            || mo != m.outputs[0]
            || g.shape(y) != g.shape(m.outputs[0])
            || g.shape(y) != g.shape(a.outputs[0])
        {
            continue;
        }
        let (Some(sv), Some(tv)) = (
            per_channel(g.const_data(s).expect("constant"), rank, r.axis, r.channels),
            per_channel(g.const_data(t).expect("constant"), rank, r.axis, r.channels),
        ) else {
            continue;
        };
        let shifted: Vec<f32> = tv.iter().zip(&sv).map(|(t, s)| t / s).collect();
        if sv.contains(&0.0) || shifted.iter().any(|x| !x.is_finite()) {
            continue;
        }
        let mut shape = vec![1; rank];
        shape[r.axis] = r.channels;
        let name = g.fresh_name(&format!("{}/over_scale", g.tensors[t].name));
        let tid = g.add_const(name, ConstData::from_f32(&shape, shifted));
        let (m_out, a_out) = (g.nodes[mi].outputs[0], g.nodes[ai].outputs[0]);
        let add = Op::Binary {
            op: BinaryOp::Add,
            activation: Activation::None,
        };
        let mul = std::mem::replace(&mut g.nodes[mi].op, add);
        g.nodes[mi].inputs = vec![y, tid];
        g.nodes[ai].op = mul;
        g.nodes[ai].inputs = vec![m_out, s];
        debug_assert_eq!(g.nodes[ai].outputs[0], a_out);
        return true;
    }
    false
}

/// Folds every such affine it can; returns how many.
pub fn fold_input_affine(g: &mut Graph) -> usize {
    let mut folded = 0;
    while swap_scale_past_shift(g) {
        folded += 1;
    }
    loop {
        let uses = g.use_counts();
        let consumers = {
            let mut c: std::collections::HashMap<TensorId, usize> = Default::default();
            for (i, n) in g.nodes.iter().enumerate() {
                for &t in &n.inputs {
                    c.insert(t, i);
                }
            }
            c
        };
        let mut found = None;
        for (ai, n) in g.nodes.iter().enumerate() {
            let Some(op @ (BinaryOp::Mul | BinaryOp::Add)) = bin_op(n) else {
                continue;
            };
            let Some((y, c)) = split_const(g, n) else {
                continue;
            };
            let out = n.outputs[0];
            if uses.get(&out) != Some(&1) || g.outputs.contains(&out) || g.shape(y) != g.shape(out)
            {
                continue;
            }
            let Some(&li) = consumers.get(&out) else {
                continue;
            };
            let layer = &g.nodes[li];
            let Some(r) = reader(g, layer, out) else {
                continue;
            };
            if op == BinaryOp::Add && !r.shift_ok {
                continue;
            }
            let rank = g.shape(out).len();
            let Some(v) = per_channel(g.const_data(c).expect("constant"), rank, r.axis, r.channels)
            else {
                continue;
            };
            if v.iter().any(|x| !x.is_finite()) {
                continue;
            }
            let w = g.const_data(layer.inputs[1]).expect("checked");
            let shape = w.shape().to_vec();
            let group = match layer.op {
                Op::Conv2d { group, .. } => group,
                _ => 1,
            };
            // Weights must hold the input channels as ONNX lays them out.
            let per_group_in = shape.get(1).copied().unwrap_or(0);
            if shape.len() < 2 || per_group_in * group != r.channels {
                continue;
            }
            let bias_ok = layer
                .inputs
                .get(2)
                .is_none_or(|&b| g.const_data(b).is_some_and(|d| d.len() == shape[0]));
            if !bias_ok {
                continue;
            }
            found = Some((ai, li, y, op, v, group));
            break;
        }
        let Some((ai, li, y, op, v, group)) = found else {
            break;
        };
        let layer = g.nodes[li].clone();
        let w = g.const_data(layer.inputs[1]).expect("checked").clone();
        let shape = w.shape().to_vec();
        let wv = w.to_f32_vec();
        match op {
            BinaryOp::Mul => {
                let nw = scale_inputs(&wv, &shape, group, &v);
                let name = g.fresh_name(&format!("{}_in_scaled", g.tensors[layer.inputs[1]].name));
                let wid = g.add_const(name, ConstData::from_f32(&shape, nw));
                g.nodes[li].inputs[1] = wid;
            }
            _ => {
                let delta = shifted_bias(&wv, &shape, group, &v);
                let old = layer
                    .inputs
                    .get(2)
                    .and_then(|&b| g.const_data(b))
                    .map(|d| d.to_f32_vec())
                    .unwrap_or(vec![0.0; shape[0]]);
                let nb: Vec<f32> = old.iter().zip(&delta).map(|(a, d)| a + d).collect();
                let name = g.fresh_name(&format!("{}/bias_in_shifted", layer.name));
                let bid = g.add_const(name, ConstData::from_f32(&[shape[0]], nb));
                if g.nodes[li].inputs.len() > 2 {
                    g.nodes[li].inputs[2] = bid;
                } else {
                    g.nodes[li].inputs.push(bid);
                }
            }
        }
        g.nodes[li].inputs[0] = y;
        g.nodes.remove(ai);
        g.remove_dead();
        folded += 1;
    }
    folded
}
