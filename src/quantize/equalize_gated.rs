//! Cross-layer equalization across a HardSwish (the precondition stage, beside `equalize`).
//! HardSwish is not positively homogeneous, so a per-channel scale cannot pass it as it passes a
//! ReLU; but it is its input times a gate of its input, `hswish(x) = x · clamp(x/6 + ½, 0, 1)`,
//! so with `x = s·x'`
//!
//! ```text
//! hswish(x) / s = x' · clamp(s/6 · x' + ½, 0, 1)
//! ```
//!
//! The producer layer writes `x' = x / s` (its weights and bias divided by `s[c]`), a 1x1
//! depthwise layer computes the gate from `x'` with weights `s[c]/6` and bias ½ (a fused ReLU,
//! then MINIMUM with 1) — per-channel weights, so int8 keeps each channel's slope — and a MUL of
//! `x'` by the gate gives the HardSwish's output divided by `s`; the consumer's weights are
//! multiplied by `s[c]`. Exact in real arithmetic. Int8 then gives the HardSwish's input and
//! output one range in which every channel has its share of the steps: PP-LCNet's (PP-OCR,
//! PicoDet) HardSwish outputs span channels 50-600x apart after the batch norm folded into the
//! layer before, and a per-tensor range rounds the small ones to a few steps.
//!
//! The gate is 0 for `x ≤ -3`, so every channel's gate is 0 for `x' ≤ L = -3 / min(s)`: a
//! MAXIMUM of `x'` with `L` before the gate and the MUL changes nothing, and int8 calibration
//! (the MAXIMUM's input takes its clipped range) spends no steps on values the HardSwish
//! discards. The scale: `s[c] ∝ max(a[c], 3)` with `a[c]` channel `c`'s largest output on the
//! calibration samples when the consumer is depthwise (its per-channel weights take any scale),
//! the balance `sqrt(max(a[c], 3) / w[c])` of `equalize` for a conv or dense consumer. The floor
//! of 3 keeps `L` within the largest channel's range.
//!
//! Each rewrite adds an operator to the file (the floor and the gate's clip are int8 saturation,
//! `saturating_clamps` drops them): a chain is rewritten only where the rounding noise it passes
//! to the consumer, estimated from the ranges and the consumer's weights, falls below 0.8 of what
//! it was. On 16 held-out inputs: PP-OCRv4 det 16.0 → 23.0 dB (21.8 with every chain rewritten,
//! the one more at an estimate of 0.86 included), the PicoDet layout detector 2.8 → 12.4 (9.3
//! where the estimate must halve). SiLU (`x · σ(x)`) admits the same rewrite with a LOGISTIC of
//! a 1x1 depthwise layer as its gate (floored at `-8/min(s)`, where int8 LOGISTIC is 0); on the
//! two YOLO-style detectors of `scripts/real_models.py` it gave 28.1 → 28.0 and 38.4 → 37.0 dB,
//! so it is not done.

use super::calibrate::Sample;
use super::equalize::{
    activation_absmax, channel_absmax, const_f32, input_axis, output_axis, scale_channels, Axis,
};
use crate::ir::{
    Activation, BinaryOp, ConstData, DType, Graph, Layout, Node, Op, PadMode, TensorId, UnaryOp,
};
use anyhow::Result;
use std::collections::HashMap;

/// A channel's scale stays within this factor of the largest (a dead channel would otherwise
/// ask for an unbounded one).
const MAX_SCALE: f32 = 64.0;

/// Channels whose largest output differs from the tensor's by less than this factor are left
/// alone (as in `equalize`).
const MIN_SPREAD: f32 = 4.0;

/// HardSwish's input at and under which its gate, and its output, are 0.
const KNEE: f32 = 3.0;

/// Equalize only where the estimated rounding noise falls below this share of what it was (the
/// estimate is rough: 0.5 cost the layout detector 3 dB, 1.0 PP-OCRv4 det 1.2 dB).
const MAX_NOISE_RATIO: f64 = 0.8;

/// Longest chain of shifts and pads between the HardSwish and its consumer.
const MAX_BETWEEN: usize = 3;

/// Producer → HardSwish → consumer.
struct Chain {
    /// The HardSwish node.
    activation: usize,
    producer: usize,
    producer_axis: Axis,
    /// ADD/SUB nodes between the activation and the consumer whose constant (input 1) scales with
    /// the channel.
    shifts: Vec<usize>,
    consumer: usize,
    consumer_axis: Axis,
    channels: usize,
}

fn chains(g: &Graph) -> Vec<Chain> {
    let uses = g.use_counts();
    let producers = g.producers();
    let readers: HashMap<TensorId, usize> = g
        .nodes
        .iter()
        .enumerate()
        .flat_map(|(i, n)| n.inputs.iter().map(move |&t| (t, i)))
        .collect();
    let single = |t: TensorId| uses.get(&t) == Some(&1) && !g.outputs.contains(&t);
    let mut out = Vec::new();
    for (hi, h) in g.nodes.iter().enumerate() {
        let Some(x) = hard_swish_input(g, &uses, hi) else {
            continue;
        };
        let u = h.outputs[0];
        if !single(u) {
            continue;
        }
        let Some(&pi) = producers.get(&x) else {
            continue;
        };
        let channels = *g.shape(x).last().unwrap_or(&0);
        let Some((ci, shifts)) = consumer_through_shifts(g, &readers, &single, u, channels) else {
            continue;
        };
        let (p, c) = (&g.nodes[pi], &g.nodes[ci]);
        let consumer_input = c.inputs[0];
        let (Some(producer_axis), Some(consumer_axis)) =
            (output_axis(g, p, false), input_axis(g, c))
        else {
            continue;
        };
        let consts_ok = [p.inputs.get(1), c.inputs.get(1)]
            .into_iter()
            .all(|w| w.is_some_and(|&w| const_f32(g, w).is_some() && uses.get(&w) == Some(&1)))
            && p.inputs.get(2).is_none_or(|&b| {
                const_f32(g, b).is_some_and(|v| v.len() == channels) && uses.get(&b) == Some(&1)
            });
        // The gate is a depthwise convolution: NHWC tensors only (not a dense layer's rows).
        let image = g.shape(x).len() == 4;
        if channels < 2 || !consts_ok || !image || g.shape(x) != g.shape(u) || consumer_input == x {
            continue;
        }
        out.push(Chain {
            activation: hi,
            producer: pi,
            producer_axis,
            shifts,
            consumer: ci,
            consumer_axis,
            channels,
        });
    }
    out
}

/// Node `ni`'s input if it is a HardSwish whose input only it reads.
fn hard_swish_input(g: &Graph, uses: &HashMap<TensorId, usize>, ni: usize) -> Option<TensorId> {
    let n = &g.nodes[ni];
    let x = *n.inputs.first()?;
    (n.op == Op::Unary(UnaryOp::HardSwish) && uses.get(&x) == Some(&1) && !g.outputs.contains(&x))
        .then_some(x)
}

/// The conv or dense layer reading `u` (as its input 0) through single-use ADD/SUB with a
/// constant (scalar or per channel, second operand) and zero PADs, and those ADD/SUB nodes.
fn consumer_through_shifts(
    g: &Graph,
    readers: &HashMap<TensorId, usize>,
    single: &dyn Fn(TensorId) -> bool,
    u: TensorId,
    channels: usize,
) -> Option<(usize, Vec<usize>)> {
    let mut cur = u;
    let mut shifts = Vec::new();
    for _ in 0..=MAX_BETWEEN {
        if !single(cur) {
            return None;
        }
        let ri = *readers.get(&cur)?;
        let n = &g.nodes[ri];
        match &n.op {
            Op::Conv2d { .. } | Op::FullyConnected { .. } => {
                return (n.inputs[0] == cur).then_some((ri, shifts));
            }
            Op::Binary {
                op: BinaryOp::Add | BinaryOp::Sub,
                activation: Activation::None,
            } => {
                let ok = n.inputs.len() == 2
                    && n.inputs[0] == cur
                    && const_f32(g, n.inputs[1])
                        .is_some_and(|k| k.len() == 1 || k.len() == channels)
                    && g.shape(n.outputs[0]) == g.shape(cur);
                if !ok {
                    return None;
                }
                shifts.push(ri);
            }
            Op::Pad {
                value,
                mode: PadMode::Constant,
                ..
            } if *value == 0.0 && n.inputs[0] == cur => {}
            _ => return None,
        }
        cur = n.outputs[0];
    }
    None
}

/// Σ over the consumer's weights for each of its input channels of weight² (`channels` of them).
fn input_channel_energy(w: &ndarray::ArrayD<f32>, axis: Axis, channels: usize) -> Vec<f64> {
    let mut e = vec![0f64; channels];
    let v = w.as_standard_layout();
    let v = v.as_slice().expect("standard layout");
    let per_row = match axis {
        Axis::DepthwiseInput { multiplier } => channels * multiplier,
        _ => channels,
    };
    for row in v.chunks_exact(per_row.max(1)) {
        for (k, &x) in row.iter().enumerate() {
            e[k * channels / per_row] += f64::from(x) * f64::from(x);
        }
    }
    e
}

/// The rounding noise the consumer's output gets from the equalized tensors over what it gets
/// from them as they are: each channel's error passes through its weights, now multiplied by
/// `s[c]`, and the int8 step is the activation input's span over 255 — before, from its lowest
/// value (taken as `-input_top`, its largest |value|) to the largest output `A`; after, from the
/// floor `L` to the scaled input's largest value.
fn rounding_noise_ratio(a: &[f32], input_top: f32, s: &[f32], energy: &[f64]) -> f64 {
    let top = f64::from(a.iter().fold(0f32, |m, &x| m.max(x)) + input_top);
    let scaled_top = a.iter().zip(s).fold(0f32, |m, (&a, &s)| m.max(a / s));
    let floor = -KNEE / s.iter().fold(f32::INFINITY, |m, &v| m.min(v));
    let span = f64::from(scaled_top - floor);
    let before: f64 = energy.iter().sum::<f64>() * top * top;
    let after: f64 = energy
        .iter()
        .zip(s)
        .map(|(&e, &s)| e * f64::from(s) * f64::from(s))
        .sum::<f64>()
        * span
        * span;
    if before > 0.0 {
        after / before
    } else {
        f64::INFINITY
    }
}

/// Each channel's scale `s[c]` (largest 1), or `None` where the channels are balanced already.
fn scales(a: &[f32], w: &[f32], consumer: Axis) -> Option<Vec<f32>> {
    let top = a.iter().fold(0f32, |m, &x| m.max(x));
    if !(top > 0.0 && top.is_finite()) || a.iter().all(|&x| x * MIN_SPREAD >= top) {
        return None;
    }
    let s: Vec<f32> = a
        .iter()
        .zip(w)
        .map(|(&a, &w)| {
            let a = a.max(KNEE);
            match consumer {
                Axis::DepthwiseInput { multiplier: 1 } => a,
                _ if w > 0.0 && w.is_finite() => (a / w).sqrt(),
                _ => 0.0,
            }
        })
        .collect();
    let largest = s.iter().fold(0f32, |m, &x| m.max(x));
    if !(largest > 0.0 && largest.is_finite()) {
        return None;
    }
    Some(
        s.iter()
            .map(|&x| {
                if x > 0.0 {
                    (x / largest).max(1.0 / MAX_SCALE)
                } else {
                    1.0
                }
            })
            .collect(),
    )
}

/// Rewrites every eligible producer → HardSwish → consumer chain of `g` (whose float file is
/// `float_bytes`) as the module describes, scaled on `samples`. Returns the names of the
/// HardSwish outputs it equalized.
pub fn equalize_gated(
    g: &mut Graph,
    float_bytes: &[u8],
    samples: &[Sample],
) -> Result<Vec<String>> {
    let chains = chains(g);
    if chains.is_empty() {
        return Ok(vec![]);
    }
    let wanted: HashMap<String, usize> = chains
        .iter()
        .flat_map(|c| {
            let p = &g.nodes[c.producer];
            [g.nodes[c.activation].outputs[0], p.outputs[0]]
                .map(|t| (g.tensors[t].name.clone(), c.channels))
        })
        .collect();
    let act = activation_absmax(float_bytes, samples, &wanted)?;
    // (HardSwish output, per-channel scale).
    let mut rewrites: Vec<(TensorId, Vec<f32>)> = Vec::new();
    for c in &chains {
        let u = g.nodes[c.activation].outputs[0];
        let x = g.nodes[c.producer].outputs[0];
        let (Some(a), Some(input)) = (act.get(&g.tensors[u].name), act.get(&g.tensors[x].name))
        else {
            continue;
        };
        let (pn, cn) = (&g.nodes[c.producer], &g.nodes[c.consumer]);
        let (w1, w2, bias) = (pn.inputs[1], cn.inputs[1], pn.inputs.get(2).copied());
        let w = channel_absmax(
            const_f32(g, w2).expect("checked"),
            c.consumer_axis,
            c.channels,
        );
        let Some(s) = scales(a, &w, c.consumer_axis) else {
            continue;
        };
        let energy = input_channel_energy(
            const_f32(g, w2).expect("checked"),
            c.consumer_axis,
            c.channels,
        );
        let input_top = input.iter().fold(0f32, |m, &v| m.max(v));
        let ratio = rounding_noise_ratio(a, input_top, &s, &energy);
        if ratio.is_nan() || ratio >= MAX_NOISE_RATIO {
            continue;
        }
        let inv: Vec<f32> = s.iter().map(|x| 1.0 / x).collect();
        let new_w1 = scale_channels(const_f32(g, w1).expect("checked"), c.producer_axis, &inv);
        let new_w2 = scale_channels(const_f32(g, w2).expect("checked"), c.consumer_axis, &s);
        g.tensors[w1].data = Some(ConstData::F32(new_w1).into());
        g.tensors[w2].data = Some(ConstData::F32(new_w2).into());
        if let Some(b) = bias {
            let nb = scale_channels(const_f32(g, b).expect("checked"), Axis::Last, &inv);
            g.tensors[b].data = Some(ConstData::F32(nb).into());
        }
        // A shift moves with its channel: a constant of its own, one value per channel.
        for &ni in &c.shifts {
            let k = g.nodes[ni].inputs[1];
            let values: Vec<f32> = const_f32(g, k).expect("checked").iter().copied().collect();
            let per_channel: Vec<f32> = (0..c.channels)
                .map(|ch| values[if values.len() == 1 { 0 } else { ch }] * inv[ch])
                .collect();
            let name = g.fresh_name(&format!("{}/equalized", g.tensors[k].name));
            let id = g.add_const(name, ConstData::from_f32(&[c.channels], per_channel));
            g.nodes[ni].inputs[1] = id;
        }
        rewrites.push((g.nodes[c.activation].outputs[0], s));
    }
    // Nodes are found again by the tensors they write: each rewrite inserts nodes.
    let mut names = Vec::new();
    for (u, s) in rewrites {
        let Some(hi) = g.nodes.iter().position(|n| n.outputs.contains(&u)) else {
            continue;
        };
        names.push(g.tensors[u].name.clone());
        gate_by_scaled_input(g, hi, &s);
    }
    Ok(names)
}

/// Replaces HardSwish node `hi`, whose input is now `x / s`, by `MAX(x', L)`, the 1x1 depthwise
/// gate and its MINIMUM, and a MUL (the node itself, keeping its output tensor).
fn gate_by_scaled_input(g: &mut Graph, hi: usize, s: &[f32]) {
    let (x, name) = (g.nodes[hi].inputs[0], g.nodes[hi].name.clone());
    let shape = g.shape(x).to_vec();
    let c = s.len();
    let floor = -KNEE / s.iter().fold(f32::INFINITY, |m, &v| m.min(v));
    let tensor = |g: &mut Graph, suffix: &str| {
        let n = g.fresh_name(&format!("{name}/{suffix}"));
        g.add_tensor(n, shape.clone(), DType::F32)
    };
    let floored = tensor(g, "floored");
    let argument = tensor(g, "gate_argument");
    let gate = tensor(g, "gate");
    let constant = |g: &mut Graph, suffix: &str, dims: &[usize], v: Vec<f32>| {
        let n = g.fresh_name(&format!("{name}/{suffix}"));
        g.add_const(n, ConstData::from_f32(dims, v))
    };
    let floor_k = constant(g, "floor", &[], vec![floor]);
    let slope: Vec<f32> = s.iter().map(|v| v / (2.0 * KNEE)).collect();
    let slope = constant(g, "gate_slope", &[1, 1, 1, c], slope);
    let offset = constant(g, "gate_offset", &[c], vec![0.5; c]);
    let one = constant(g, "one", &[], vec![1.0]);
    let binary = |op| Op::Binary {
        op,
        activation: Activation::None,
    };
    let new_nodes = [
        Node {
            name: format!("{name}/floor"),
            op: binary(BinaryOp::Max),
            inputs: vec![x, floor_k],
            outputs: vec![floored],
        },
        Node {
            name: format!("{name}/gate_argument"),
            op: Op::Conv2d {
                strides: [1, 1],
                dilations: [1, 1],
                pads: [0; 4],
                group: c,
                activation: Activation::Relu,
                layout: Layout::Nhwc,
            },
            inputs: vec![floored, slope, offset],
            outputs: vec![argument],
        },
        Node {
            name: format!("{name}/gate"),
            op: binary(BinaryOp::Min),
            inputs: vec![argument, one],
            outputs: vec![gate],
        },
    ];
    let h = &mut g.nodes[hi];
    h.op = binary(BinaryOp::Mul);
    h.inputs = vec![floored, gate];
    for (k, n) in new_nodes.into_iter().enumerate() {
        g.nodes.insert(hi + k, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::npy::NpyArray;

    fn conv(group: usize, pads: [usize; 4]) -> Op {
        Op::Conv2d {
            strides: [1, 1],
            dilations: [1, 1],
            pads,
            group,
            activation: Activation::None,
            layout: Layout::Nhwc,
        }
    }

    /// Conv3x3 (channels scaled 0.02 to 40) → HardSwish → ADD of a per-channel shift → zero PAD
    /// → depthwise 3x3.
    fn graph() -> Graph {
        let mut g = Graph::default();
        let (c, cin) = (4usize, 3usize);
        let spread = [0.02f32, 0.5, 4.0, 40.0];
        let wave = |i: usize, k: f32| ((i as f32 * k).sin() * 0.7) + 0.1;
        let x = g.add_tensor("x", vec![1, 6, 6, cin], DType::F32);
        g.inputs.push(x);
        let w0: Vec<f32> = (0..c * 9 * cin)
            .map(|i| wave(i, 1.3) * spread[i / (9 * cin)])
            .collect();
        let w0 = g.add_const("w0", ConstData::from_f32(&[c, 3, 3, cin], w0));
        let b0 = g.add_const("b0", ConstData::from_f32(&[c], vec![0.3, -1.0, 2.0, -4.0]));
        let shift = g.add_const(
            "shift",
            ConstData::from_f32(&[c], vec![0.1, -0.2, 0.3, 0.5]),
        );
        let wd: Vec<f32> = (0..9 * c).map(|i| wave(i, 0.7) / spread[i % c]).collect();
        let wd = g.add_const("wd", ConstData::from_f32(&[1, 3, 3, c], wd));
        let t = |g: &mut Graph, n: &str, hw: usize| g.add_tensor(n, vec![1, hw, hw, c], DType::F32);
        let (a, h, s, p, y) = (
            t(&mut g, "a", 6),
            t(&mut g, "h", 6),
            t(&mut g, "s", 6),
            t(&mut g, "p", 8),
            t(&mut g, "y", 6),
        );
        let node = |name: &str, op: Op, inputs: Vec<TensorId>, out: TensorId| Node {
            name: name.into(),
            op,
            inputs,
            outputs: vec![out],
        };
        g.nodes = vec![
            node("conv", conv(1, [1; 4]), vec![x, w0, b0], a),
            node("hswish", Op::Unary(UnaryOp::HardSwish), vec![a], h),
            node(
                "shift",
                Op::Binary {
                    op: BinaryOp::Add,
                    activation: Activation::None,
                },
                vec![h, shift],
                s,
            ),
            node(
                "pad",
                Op::Pad {
                    before: vec![0, 1, 1, 0],
                    after: vec![0, 1, 1, 0],
                    mode: PadMode::Constant,
                    value: 0.0,
                },
                vec![s],
                p,
            ),
            node("dw", conv(c, [0; 4]), vec![p, wd], y),
        ];
        g.outputs.push(y);
        g
    }

    fn run(g: &Graph, x: &[f32]) -> Vec<f32> {
        let bytes = crate::export::planned_tflite(g, "t").unwrap();
        let input = NpyArray::f32(vec![1, 6, 6, 3], x.to_vec());
        crate::runtime::run_lite(&bytes, "t", &[(None, input)]).unwrap()[0]
            .1
            .to_f32()
    }

    #[test]
    fn the_gated_rewrite_is_exact_in_float() {
        let mut g = graph();
        let sample =
            |k: f32| -> Vec<f32> { (0..108).map(|i| ((i as f32 * k).cos()) * 3.0).collect() };
        let samples: Vec<Sample> = (1..5).map(|k| vec![sample(k as f32 * 0.37)]).collect();
        let float = crate::export::planned_tflite(&g, "t").unwrap();
        let probe = sample(0.91);
        let before = run(&g, &probe);
        let done = equalize_gated(&mut g, &float, &samples).unwrap();
        assert_eq!(done, ["h"]);
        let ops: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(
            ops,
            ["Conv2d", "Max", "Conv2d", "Min", "Mul", "Add", "Pad", "Conv2d"]
        );
        let after = run(&g, &probe);
        let top = before.iter().fold(0f32, |m, v| m.max(v.abs()));
        for (a, b) in after.iter().zip(&before) {
            assert!((a - b).abs() <= 1e-5 * top, "{a} vs {b}");
        }
        // The floor lets every channel's gate reach 0 and no further.
        let floor = const_f32(&g, g.nodes[1].inputs[1]).unwrap()[[]];
        let slope = const_f32(&g, g.nodes[2].inputs[1]).unwrap();
        let steepest = slope.iter().fold(0f32, |m, &v| m.max(v));
        let flattest = slope.iter().fold(f32::INFINITY, |m, &v| m.min(v));
        assert!((floor * flattest + 0.5).abs() < 1e-6, "{floor} {flattest}");
        assert!(steepest <= 1.0 / 6.0 + 1e-7);
    }
}
