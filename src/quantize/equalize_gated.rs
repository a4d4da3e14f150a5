//! Cross-layer equalization across a gated activation, HardSwish or SiLU (the precondition
//! stage, beside `equalize`). Neither is positively homogeneous, so a per-channel scale cannot
//! pass it as it passes a ReLU; but each is its input times a gate of its input,
//! `hswish(x) = x · clamp(x/6 + ½, 0, 1)`, `silu(x) = x · σ(x)`, so with `x = s·x'`
//!
//! ```text
//! hswish(x) / s = x' · clamp(s/6 · x' + ½, 0, 1)        silu(x) / s = x' · σ(s · x')
//! ```
//!
//! The producer layer writes `x' = x / s` (its weights and bias divided by `s[c]`), a 1x1
//! depthwise layer computes the gate's argument from `x'` with weights `s[c]/6` and bias ½ (then a
//! fused ReLU and MINIMUM with 1) or weights `s[c]` (then the LOGISTIC) — per-channel weights, so
//! int8 keeps each channel's slope — and a MUL of `x'` by the gate gives the activation's output
//! divided by `s`; the consumer's weights are multiplied by `s[c]`. Int8 then gives the activation's
//! input and output one range in which every channel has its share of the steps: PP-LCNet's
//! (PP-OCR, PicoDet) HardSwish outputs span channels 50-600x apart after the batch norm folded
//! into the layer before, and a per-tensor range rounds the small ones to a few steps.
//!
//! A gate is 0 (HardSwish) or under 1/512 — 0 in int8 LOGISTIC's 1/256 steps — (SiLU) for
//! arguments under `-K` (3 and 8): a MAXIMUM of `x'` with `L = -K / min(s)` before the gate and the
//! MUL changes nothing for HardSwish and at most `8·σ(-8) = 0.003` per value for SiLU, and int8
//! calibration (the MAXIMUM's input takes its clipped range) spends no steps on values the gate
//! discards. The scale: `s[c] ∝ max(a[c], K)` with `a[c]` channel `c`'s largest output on the
//! calibration samples when the consumer is depthwise (its per-channel weights take any scale), the
//! balance `sqrt(max(a[c], K) / w[c])` of `equalize` for a conv or dense consumer. The floor of `K`
//! keeps `L` within the largest channel's range.
//!
//! Each rewrite adds an operator to the file (the floor and the gate's clip are int8 saturation,
//! `saturating_clamps` drops them): a chain is rewritten only where the rounding noise it passes
//! to the consumer, estimated from the ranges and the consumer's weights, falls below 0.8 of what
//! it was. On 16 held-out inputs: PP-OCRv4 det 16.0 → 23.0 dB (21.8 with every chain rewritten,
//! the one more at an estimate of 0.86 included), the PicoDet layout detector 2.8 → 12.4 (9.3
//! where the estimate must halve); on a YOLO-style captcha detector the SiLU floor at
//! `-8/min(s)` widens the scaled input more than the balance gains, and the estimate keeps 5 of
//! 31 chains.

use super::calibrate::Sample;
use super::equalize::{
    activation_absmax, channel_absmax, const_f32, is_depthwise, scale_channels, Axis,
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

/// The gated activations, by how their gate is computed.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Gate {
    /// `Unary(HardSwish)` (node `activation`).
    HardSwish,
    /// `MUL(x, LOGISTIC(x))` (node `activation` the MUL), the LOGISTIC node.
    Silu { logistic: usize },
}

impl Gate {
    /// The gate's argument under which it is 0, or 0 in int8.
    fn knee(self) -> f32 {
        match self {
            Gate::HardSwish => 3.0,
            Gate::Silu { .. } => 8.0,
        }
    }
}

/// Equalize only where the estimated rounding noise falls below this share of what it was (the
/// estimate is rough: 0.5 cost the layout detector 3 dB, 1.0 PP-OCRv4 det 1.2 dB).
const MAX_NOISE_RATIO: f64 = 0.8;

/// Longest chain of shifts and pads between the HardSwish and its consumer.
const MAX_BETWEEN: usize = 3;

/// Producer → HardSwish → consumer.
struct Chain {
    /// The node writing the activation's output (HardSwish, or SiLU's MUL).
    activation: usize,
    gate: Gate,
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
        let Some((x, gate)) = gated_input(g, &producers, &uses, hi) else {
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
        let producer_axis = match p.op {
            Op::Conv2d {
                layout: Layout::Nhwc,
                activation: Activation::None,
                group,
                ..
            } if is_depthwise(g, p) || group == 1 => {
                if group == 1 {
                    Axis::First
                } else {
                    Axis::Last
                }
            }
            Op::FullyConnected {
                activation: Activation::None,
            } => Axis::First,
            _ => continue,
        };
        let consumer_axis = match c.op {
            Op::Conv2d {
                layout: Layout::Nhwc,
                group,
                ..
            } => {
                if is_depthwise(g, c) {
                    let cin = *g.shape(c.inputs[0]).last().unwrap_or(&1);
                    let cout = *g.shape(c.outputs[0]).last().unwrap_or(&1);
                    Axis::DepthwiseInput {
                        multiplier: (cout / cin.max(1)).max(1),
                    }
                } else if group == 1 {
                    Axis::Last
                } else {
                    continue;
                }
            }
            Op::FullyConnected { .. } => Axis::Last,
            _ => continue,
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
            gate,
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

/// Node `ni`'s activation input and gate, if it writes a HardSwish or a SiLU whose input only it
/// reads.
fn gated_input(
    g: &Graph,
    producers: &HashMap<TensorId, usize>,
    uses: &HashMap<TensorId, usize>,
    ni: usize,
) -> Option<(TensorId, Gate)> {
    let n = &g.nodes[ni];
    let only = |t: TensorId, k: usize| uses.get(&t) == Some(&k) && !g.outputs.contains(&t);
    match n.op {
        Op::Unary(UnaryOp::HardSwish) => {
            only(n.inputs[0], 1).then_some((n.inputs[0], Gate::HardSwish))
        }
        Op::Binary {
            op: BinaryOp::Mul,
            activation: Activation::None,
        } if n.inputs.len() == 2 => (0..2).find_map(|k| {
            let (x, sig) = (n.inputs[k], n.inputs[1 - k]);
            let li = *producers.get(&sig)?;
            let l = &g.nodes[li];
            (l.op == Op::Unary(UnaryOp::Sigmoid)
                && l.inputs[0] == x
                && only(sig, 1)
                && only(x, 2)
                && g.shape(sig) == g.shape(x))
            .then_some((x, Gate::Silu { logistic: li }))
        }),
        _ => None,
    }
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
fn rounding_noise_ratio(a: &[f32], input_top: f32, s: &[f32], energy: &[f64], knee: f32) -> f64 {
    let top = f64::from(a.iter().fold(0f32, |m, &x| m.max(x)) + input_top);
    let scaled_top = a.iter().zip(s).fold(0f32, |m, (&a, &s)| m.max(a / s));
    let floor = -knee / s.iter().fold(f32::INFINITY, |m, &v| m.min(v));
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
fn scales(a: &[f32], w: &[f32], consumer: Axis, knee: f32) -> Option<Vec<f32>> {
    let top = a.iter().fold(0f32, |m, &x| m.max(x));
    if !(top > 0.0 && top.is_finite()) || a.iter().all(|&x| x * MIN_SPREAD >= top) {
        return None;
    }
    let s: Vec<f32> = a
        .iter()
        .zip(w)
        .map(|(&a, &w)| {
            let a = a.max(knee);
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

/// Rewrites every eligible producer → HardSwish or SiLU → consumer chain of `g` (whose float file
/// is `float_bytes`) as the module describes, scaled on `samples`. Returns the names of the
/// activation outputs it equalized.
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
    // (activation node, gate, per-channel scale), rewritten last to first so indices stay valid.
    let mut rewrites: Vec<(usize, Gate, Vec<f32>)> = Vec::new();
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
        let Some(s) = scales(a, &w, c.consumer_axis, c.gate.knee()) else {
            continue;
        };
        let energy = input_channel_energy(
            const_f32(g, w2).expect("checked"),
            c.consumer_axis,
            c.channels,
        );
        let input_top = input.iter().fold(0f32, |m, &v| m.max(v));
        let ratio = rounding_noise_ratio(a, input_top, &s, &energy, c.gate.knee());
        if ratio.is_nan() || ratio >= MAX_NOISE_RATIO {
            continue;
        }
        let inv: Vec<f32> = s.iter().map(|x| 1.0 / x).collect();
        let new_w1 = scale_channels(const_f32(g, w1).expect("checked"), c.producer_axis, &inv);
        let new_w2 = scale_channels(const_f32(g, w2).expect("checked"), c.consumer_axis, &s);
        g.tensors[w1].data = Some(ConstData::F32(new_w1));
        g.tensors[w2].data = Some(ConstData::F32(new_w2));
        if let Some(b) = bias {
            let nb = scale_channels(const_f32(g, b).expect("checked"), Axis::Last, &inv);
            g.tensors[b].data = Some(ConstData::F32(nb));
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
        rewrites.push((c.activation, c.gate, s));
    }
    // Nodes are found again by the tensors they write: each rewrite inserts nodes.
    let mut done = Vec::new();
    for (ai, gate, s) in rewrites {
        let u = g.nodes[ai].outputs[0];
        let logistic_out = match gate {
            Gate::HardSwish => None,
            Gate::Silu { logistic } => Some(g.nodes[logistic].outputs[0]),
        };
        done.push((u, logistic_out, gate, s));
    }
    let writer = |g: &Graph, t: TensorId| g.nodes.iter().position(|n| n.outputs.contains(&t));
    let mut names = Vec::new();
    for (u, logistic_out, gate, s) in done {
        let (Some(ai), gate) = (
            writer(g, u),
            match (gate, logistic_out.and_then(|t| writer(g, t))) {
                (Gate::Silu { .. }, Some(logistic)) => Gate::Silu { logistic },
                (g, _) => g,
            },
        ) else {
            continue;
        };
        names.push(g.tensors[u].name.clone());
        gate_by_scaled_input(g, ai, gate, &s);
    }
    Ok(names)
}

/// Rewrites the activation written by node `ai`, whose input is now `x / s`, as `MAX(x', L)`, the
/// 1x1 depthwise gate argument, the gate and a MUL (the node `ai` itself, keeping its output).
fn gate_by_scaled_input(g: &mut Graph, ai: usize, gate: Gate, s: &[f32]) {
    let name = g.nodes[ai].name.clone();
    let (first, x) = match gate {
        Gate::HardSwish => (ai, g.nodes[ai].inputs[0]),
        Gate::Silu { logistic } => (logistic, g.nodes[logistic].inputs[0]),
    };
    let shape = g.shape(x).to_vec();
    let c = s.len();
    let knee = gate.knee();
    let floor = -knee / s.iter().fold(f32::INFINITY, |m, &v| m.min(v));
    let tensor = |g: &mut Graph, suffix: &str| {
        let n = g.fresh_name(&format!("{name}/{suffix}"));
        g.add_tensor(n, shape.clone(), DType::F32)
    };
    let floored = tensor(g, "floored");
    let argument = tensor(g, "gate_argument");
    let constant = |g: &mut Graph, suffix: &str, dims: &[usize], v: Vec<f32>| {
        let n = g.fresh_name(&format!("{name}/{suffix}"));
        g.add_const(n, ConstData::from_f32(dims, v))
    };
    let floor_k = constant(g, "floor", &[], vec![floor]);
    let (slope, offset, activation): (Vec<f32>, f32, _) = match gate {
        Gate::HardSwish => (
            s.iter().map(|v| v / (2.0 * knee)).collect(),
            0.5,
            Activation::Relu,
        ),
        Gate::Silu { .. } => (s.to_vec(), 0.0, Activation::None),
    };
    let slope = constant(g, "gate_slope", &[1, 1, 1, c], slope);
    let offset = constant(g, "gate_offset", &[c], vec![offset; c]);
    let binary = |op| Op::Binary {
        op,
        activation: Activation::None,
    };
    let mut new_nodes = vec![
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
                activation,
                layout: Layout::Nhwc,
            },
            inputs: vec![floored, slope, offset],
            outputs: vec![argument],
        },
    ];
    match gate {
        Gate::HardSwish => {
            let gate_t = tensor(g, "gate");
            let one = constant(g, "one", &[], vec![1.0]);
            new_nodes.push(Node {
                name: format!("{name}/gate"),
                op: binary(BinaryOp::Min),
                inputs: vec![argument, one],
                outputs: vec![gate_t],
            });
            let h = &mut g.nodes[ai];
            h.op = binary(BinaryOp::Mul);
            h.inputs = vec![floored, gate_t];
        }
        Gate::Silu { logistic } => {
            g.nodes[logistic].inputs = vec![argument];
            for t in &mut g.nodes[ai].inputs {
                if *t == x {
                    *t = floored;
                }
            }
        }
    }
    for (k, n) in new_nodes.into_iter().enumerate() {
        g.nodes.insert(first + k, n);
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

    /// The same chain with a SiLU written as LOGISTIC and MUL.
    fn silu_graph() -> Graph {
        let mut g = graph();
        let (a, h) = (g.nodes[0].outputs[0], g.nodes[1].outputs[0]);
        let sig = g.add_tensor("sig", g.shape(a).to_vec(), DType::F32);
        g.nodes[1] = Node {
            name: "sigmoid".into(),
            op: Op::Unary(UnaryOp::Sigmoid),
            inputs: vec![a],
            outputs: vec![sig],
        };
        g.nodes.insert(
            2,
            Node {
                name: "silu".into(),
                op: Op::Binary {
                    op: BinaryOp::Mul,
                    activation: Activation::None,
                },
                inputs: vec![a, sig],
                outputs: vec![h],
            },
        );
        g
    }

    #[test]
    fn the_gated_silu_matches_within_the_floor() {
        let mut g = silu_graph();
        let sample =
            |k: f32| -> Vec<f32> { (0..108).map(|i| (i as f32 * k).cos() * 3.0).collect() };
        let samples: Vec<Sample> = (1..5).map(|k| vec![sample(k as f32 * 0.37)]).collect();
        let float = crate::export::planned_tflite(&g, "t").unwrap();
        let probe = sample(0.91);
        let before = run(&g, &probe);
        let done = equalize_gated(&mut g, &float, &samples).unwrap();
        assert_eq!(done, ["h"]);
        let ops: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(
            ops,
            ["Conv2d", "Max", "Conv2d", "Sigmoid", "Mul", "Add", "Pad", "Conv2d"]
        );
        let after = run(&g, &probe);
        let top = before.iter().fold(0f32, |m, v| m.max(v.abs()));
        let worst = after
            .iter()
            .zip(&before)
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        // Below the floor a SiLU is under 8·σ(-8) = 0.003: far under an int8 step of the output.
        assert!(worst <= 2e-3 * top, "{worst} of {top}");
    }
}
