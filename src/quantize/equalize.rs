//! Cross-layer equalization of activations (the precondition stage, before calibration): where
//! a conv or dense layer's output feeds only another conv or dense layer, with nothing between
//! or only ops that commute with a positive per-channel scale (ReLU, LeakyReLU, max or average
//! pooling, a MAXIMUM/MINIMUM with a constant, whose constant is scaled with the channel),
//! channel `c` of the tensors between them can be divided by `s[c] > 0` in the first layer's
//! weights and bias and multiplied back in the second layer's weights for input channel `c` —
//! exact in real arithmetic (those ops are positively homogeneous). Int8 gives the
//! tensor one range for all channels, so a tensor whose channels span ranges 20x apart (a
//! depthwise layer's output after its batch norm was folded in) rounds its small channels to a
//! few steps; equalized, every channel uses the range.
//!
//! `s[c] = sqrt(a[c] / w[c])` (Nagel et al. 2019 and SmoothQuant with α = ½): `a[c]` the
//! channel's largest |value| on calibration samples, `w[c]` the largest |weight| the second
//! layer applies to it, so the activation's and the weights' ranges meet halfway (per-channel
//! weights of the second layer then lose little). Not across ReLU6, HardSwish or other clipping
//! or non-homogeneous activations, where the rewrite would not be exact.

use super::calibrate::Sample;
use crate::ir::{Activation, BinaryOp, ConstData, Graph, Layout, Op, TensorId, UnaryOp};
use anyhow::Result;
use std::collections::HashMap;

/// Scales are kept within this factor of their geometric mean (a dead channel would otherwise
/// ask for an unbounded one).
const MAX_SCALE: f32 = 64.0;

/// Channels whose largest value differs from the tensor's by less than this factor are left
/// alone: equalizing them buys nothing.
const MIN_SPREAD: f32 = 4.0;

/// How a layer's weights hold its output (producer) or input (consumer) channels.
#[derive(Clone, Copy, Debug)]
pub(super) enum Axis {
    /// The first axis ([O, KH, KW, I], [O, I]: output channels).
    First,
    /// The last axis ([1, KH, KW, C·M] depthwise output channels; [O, KH, KW, I] input channels).
    Last,
    /// Depthwise input channels: `c` scales output channels `c·M .. (c+1)·M` (last axis).
    DepthwiseInput { multiplier: usize },
}

/// Longest chain of scale-commuting ops between two equalized layers.
const MAX_BETWEEN: usize = 4;

/// A pair of layers and the tensor between them.
struct Pair {
    tensor: TensorId,
    /// The MAXIMUM/MINIMUM nodes between them whose constant operand (input 1) scales with the
    /// channel.
    clamps: Vec<usize>,
    producer: usize,
    producer_axis: Axis,
    consumer: usize,
    consumer_axis: Axis,
    channels: usize,
}

pub(super) fn is_depthwise(g: &Graph, n: &crate::ir::Node) -> bool {
    matches!(n.op, Op::Conv2d { group, .. } if group > 1 && group == *g.shape(n.inputs[0]).last().unwrap_or(&0))
}

pub(super) fn const_f32(g: &Graph, t: TensorId) -> Option<&ndarray::ArrayD<f32>> {
    g.tensors[t].data.as_ref()?.as_f32()
}

/// How conv or dense layer `n`'s weights hold its input channels (`None` for other ops and
/// grouped, non-depthwise convolutions).
pub(super) fn input_axis(g: &Graph, n: &crate::ir::Node) -> Option<Axis> {
    match n.op {
        Op::Conv2d {
            layout: Layout::Nhwc,
            group,
            ..
        } => {
            if is_depthwise(g, n) {
                let cin = *g.shape(n.inputs[0]).last().unwrap_or(&1);
                let cout = *g.shape(n.outputs[0]).last().unwrap_or(&1);
                Some(Axis::DepthwiseInput {
                    multiplier: (cout / cin.max(1)).max(1),
                })
            } else {
                (group == 1).then_some(Axis::Last)
            }
        }
        Op::FullyConnected { .. } => Some(Axis::Last),
        _ => None,
    }
}

/// How conv or dense layer `n`'s weights hold its output channels, if it has no fused activation
/// (or a ReLU, with `relu`: it commutes with a positive scale).
pub(super) fn output_axis(g: &Graph, n: &crate::ir::Node, relu: bool) -> Option<Axis> {
    let (Op::Conv2d {
        activation: act, ..
    }
    | Op::FullyConnected { activation: act }) = n.op
    else {
        return None;
    };
    if !(act == Activation::None || (relu && act == Activation::Relu)) {
        return None;
    }
    match n.op {
        Op::Conv2d {
            layout: Layout::Nhwc,
            group,
            ..
        } => {
            if is_depthwise(g, n) {
                Some(Axis::Last)
            } else {
                (group == 1).then_some(Axis::First)
            }
        }
        Op::FullyConnected { .. } => Some(Axis::First),
        _ => None,
    }
}

fn pairs(g: &Graph) -> Vec<Pair> {
    let uses = g.use_counts();
    let producers = g.producers();
    let mut out = Vec::new();
    for (ci, c) in g.nodes.iter().enumerate() {
        let Some(consumer_axis) = input_axis(g, c) else {
            continue;
        };
        let t = c.inputs[0];
        if uses.get(&t) != Some(&1) || g.outputs.contains(&t) || c.inputs.get(1).is_none() {
            continue;
        }
        let Some((pi, clamps)) = producer_through_homogeneous(g, &producers, &uses, t) else {
            continue;
        };
        let p = &g.nodes[pi];
        let Some(producer_axis) = output_axis(g, p, true) else {
            continue;
        };
        let channels = *g.shape(t).last().unwrap_or(&0);
        let weights_ok = const_f32(g, p.inputs[1]).is_some()
            && const_f32(g, c.inputs[1]).is_some()
            && p.inputs
                .get(2)
                .is_none_or(|&b| const_f32(g, b).is_some_and(|b| b.len() == channels))
            && uses.get(&p.inputs[1]) == Some(&1)
            && uses.get(&c.inputs[1]) == Some(&1)
            && p.inputs.get(2).is_none_or(|b| uses.get(b) == Some(&1));
        if channels < 2 || !weights_ok {
            continue;
        }
        out.push(Pair {
            tensor: t,
            clamps,
            producer: pi,
            producer_axis,
            consumer: ci,
            consumer_axis,
            channels,
        });
    }
    out
}

/// The node producing `t` through a chain of single-use ops that commute with a positive
/// per-channel scale (at most `MAX_BETWEEN`), and the MAXIMUM/MINIMUM-with-a-constant nodes of
/// that chain.
fn producer_through_homogeneous(
    g: &Graph,
    producers: &HashMap<TensorId, usize>,
    uses: &HashMap<TensorId, usize>,
    t: TensorId,
) -> Option<(usize, Vec<usize>)> {
    let channels = *g.shape(t).last()?;
    let mut cur = t;
    let mut clamps = Vec::new();
    for _ in 0..=MAX_BETWEEN {
        let pi = *producers.get(&cur)?;
        let n = &g.nodes[pi];
        let passes = match &n.op {
            Op::Unary(UnaryOp::Relu | UnaryOp::LeakyRelu { .. }) => true,
            Op::Pool2d {
                layout: Layout::Nhwc,
                ..
            } => true,
            Op::Binary {
                op: BinaryOp::Max | BinaryOp::Min,
                activation: Activation::None,
            } => {
                let ok = n.inputs.len() == 2
                    && const_f32(g, n.inputs[1])
                        .is_some_and(|k| k.len() == 1 || k.len() == channels)
                    && !g.tensors[n.inputs[0]].is_const()
                    && g.shape(n.inputs[0]) == g.shape(cur);
                if ok {
                    clamps.push(pi);
                }
                ok
            }
            _ => return Some((pi, clamps)),
        };
        let x = *n.inputs.first()?;
        if !passes || uses.get(&x) != Some(&1) || g.outputs.contains(&x) {
            return None;
        }
        cur = x;
    }
    None
}

/// Largest |weight| per channel along `axis` (`channels` of them).
pub(super) fn channel_absmax(w: &ndarray::ArrayD<f32>, axis: Axis, channels: usize) -> Vec<f32> {
    let mut m = vec![0f32; channels];
    let v: Vec<f32> = w.iter().copied().collect();
    match axis {
        Axis::First => {
            let per = v.len() / channels.max(1);
            for (c, row) in v.chunks_exact(per.max(1)).enumerate().take(channels) {
                m[c] = row.iter().fold(0f32, |a, &x| a.max(x.abs()));
            }
        }
        Axis::Last => {
            for row in v.chunks_exact(channels) {
                for (c, &x) in row.iter().enumerate() {
                    m[c] = m[c].max(x.abs());
                }
            }
        }
        Axis::DepthwiseInput { multiplier } => {
            for row in v.chunks_exact(channels * multiplier) {
                for (k, &x) in row.iter().enumerate() {
                    m[k / multiplier] = m[k / multiplier].max(x.abs());
                }
            }
        }
    }
    m
}

/// Multiplies channel `c` along `axis` by `f[c]`.
pub(super) fn scale_channels(
    w: &ndarray::ArrayD<f32>,
    axis: Axis,
    f: &[f32],
) -> ndarray::ArrayD<f32> {
    let channels = f.len();
    let mut out = w.as_standard_layout().into_owned();
    let v = out.as_slice_mut().expect("standard layout");
    match axis {
        Axis::First => {
            let per = v.len() / channels.max(1);
            for (c, row) in v.chunks_exact_mut(per.max(1)).enumerate().take(channels) {
                row.iter_mut().for_each(|x| *x *= f[c]);
            }
        }
        Axis::Last => {
            for row in v.chunks_exact_mut(channels) {
                row.iter_mut().zip(f).for_each(|(x, s)| *x *= s);
            }
        }
        Axis::DepthwiseInput { multiplier } => {
            for row in v.chunks_exact_mut(channels * multiplier) {
                for (k, x) in row.iter_mut().enumerate() {
                    *x *= f[k / multiplier];
                }
            }
        }
    }
    out
}

/// Largest |value| per channel (last axis) of every `wanted` tensor of the float file, by name.
pub(super) fn activation_absmax(
    float_bytes: &[u8],
    samples: &[Sample],
    wanted: &HashMap<String, usize>,
) -> Result<HashMap<String, Vec<f32>>> {
    let names = super::report::tensor_names(float_bytes)?;
    let mut out: HashMap<String, Vec<f32>> = HashMap::new();
    let observed = |t: usize| names.get(t).is_some_and(|n| wanted.contains_key(n));
    super::observe::observe_where(float_bytes, samples, &observed, |_, t, v| {
        let Some(name) = names.get(t) else { return };
        let Some(&c) = wanted.get(name) else { return };
        if c == 0 || !v.len().is_multiple_of(c) {
            return;
        }
        let m = out.entry(name.clone()).or_insert_with(|| vec![0.0; c]);
        for row in v.chunks_exact(c) {
            for (k, &x) in row.iter().enumerate() {
                if x.is_finite() {
                    m[k] = m[k].max(x.abs());
                }
            }
        }
    })?;
    Ok(out)
}

/// Equalizes every eligible pair of layers of `g` (whose float file is `float_bytes`) on
/// `samples`. Returns the names of the tensors it equalized.
pub fn equalize(g: &mut Graph, float_bytes: &[u8], samples: &[Sample]) -> Result<Vec<String>> {
    let pairs = pairs(g);
    if pairs.is_empty() {
        return Ok(vec![]);
    }
    let wanted: HashMap<String, usize> = pairs
        .iter()
        .map(|p| (g.tensors[p.tensor].name.clone(), p.channels))
        .collect();
    let act = activation_absmax(float_bytes, samples, &wanted)?;
    let mut done = Vec::new();
    for p in &pairs {
        let Some(a) = act.get(&g.tensors[p.tensor].name) else {
            continue;
        };
        let (pn, cn) = (&g.nodes[p.producer], &g.nodes[p.consumer]);
        let (w1, w2) = (pn.inputs[1], cn.inputs[1]);
        let bias = pn.inputs.get(2).copied();
        let w = channel_absmax(
            const_f32(g, w2).expect("checked"),
            p.consumer_axis,
            p.channels,
        );
        let top = a.iter().fold(0f32, |m, &x| m.max(x));
        let live: Vec<f32> = a.iter().copied().filter(|&x| x > 0.0).collect();
        if live.is_empty() || live.iter().all(|&x| x * MIN_SPREAD >= top) {
            continue;
        }
        let mut s: Vec<f32> = a
            .iter()
            .zip(&w)
            .map(|(&a, &w)| {
                if a > 0.0 && w > 0.0 && a.is_finite() && w.is_finite() {
                    (a / w).sqrt()
                } else {
                    0.0
                }
            })
            .collect();
        let known: Vec<f32> = s.iter().copied().filter(|&x| x > 0.0).collect();
        if known.is_empty() {
            continue;
        }
        let geo = (known.iter().map(|x| f64::from(x.ln())).sum::<f64>() / known.len() as f64).exp()
            as f32;
        for x in &mut s {
            *x = if *x > 0.0 {
                (*x / geo).clamp(1.0 / MAX_SCALE, MAX_SCALE)
            } else {
                1.0
            };
        }
        let inv: Vec<f32> = s.iter().map(|x| 1.0 / x).collect();
        let new_w1 = scale_channels(const_f32(g, w1).expect("checked"), p.producer_axis, &inv);
        let new_w2 = scale_channels(const_f32(g, w2).expect("checked"), p.consumer_axis, &s);
        g.tensors[w1].data = Some(ConstData::F32(new_w1).into());
        g.tensors[w2].data = Some(ConstData::F32(new_w2).into());
        if let Some(b) = bias {
            let nb = scale_channels(const_f32(g, b).expect("checked"), Axis::Last, &inv);
            g.tensors[b].data = Some(ConstData::F32(nb).into());
        }
        // A clamp's bound moves with its channel: a constant of its own, one value per channel.
        for &ni in &p.clamps {
            let k = g.nodes[ni].inputs[1];
            let values: Vec<f32> = const_f32(g, k).expect("checked").iter().copied().collect();
            let per_channel: Vec<f32> = (0..p.channels)
                .map(|c| values[if values.len() == 1 { 0 } else { c }] * inv[c])
                .collect();
            let name = g.fresh_name(&format!("{}/equalized", g.tensors[k].name));
            let data = ConstData::from_f32(&[p.channels], per_channel);
            let id = g.add_const(name, data);
            g.nodes[ni].inputs[1] = id;
        }
        done.push(g.tensors[p.tensor].name.clone());
    }
    Ok(done)
}
