//! How much each channel of an activation matters to the layers that read it, so calibration
//! can choose a tensor's int8 range by the error it causes downstream rather than in the tensor
//! itself.
//!
//! A tensor read only by conv, depthwise and dense layers passes channel `c`'s quantization
//! error `e[c]` on multiplied by that layer's weights for input channel `c`: the output error's
//! energy is `Σ_c e[c]² · Σ_k w[k, c]²`. When channels span ranges far apart (PP-LCNet's
//! depthwise layers after a HardSwish: one channel reaches 128 while most stay below 4), the
//! small channels often carry the large weights, and the range that is best for the tensor
//! itself (the whole 128) rounds them to a few steps. Weighted by `Σ_k w[k, c]²`, the expected
//! error prefers clipping the large channel a little over zeroing the small ones. Equalization
//! would rescale the channels instead, but not across HardSwish or ReLU6, where that is not exact.

use super::equalize::{const_f32, is_depthwise};
use crate::ir::{Activation, BinaryOp, Graph, Layout, Op, TensorId, UnaryOp};
use std::collections::{HashMap, HashSet};

/// Weights closer together than this factor are left uniform: weighting them changes nothing.
const MIN_SPREAD: f32 = 4.0;

/// Per channel (last axis) importance of every tensor that only conv, depthwise and dense layers
/// read (through a constant PAD too), normalized to mean 1. Tensors not in the map weigh every
/// channel alike.
pub fn channel_weights(g: &Graph) -> HashMap<TensorId, Vec<f32>> {
    let mut readers: HashMap<TensorId, Vec<usize>> = HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        for &t in &n.inputs {
            readers.entry(t).or_default().push(i);
        }
    }
    let mut out = HashMap::new();
    for (&t, _) in readers.iter() {
        if g.outputs.contains(&t) || g.tensors[t].data.is_some() {
            continue;
        }
        let Some(w) = tensor_weights(g, &readers, t, 0) else {
            continue;
        };
        let (lo, hi) = w
            .iter()
            .fold((f32::INFINITY, 0f32), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        if hi > 0.0 && hi >= lo * MIN_SPREAD {
            out.insert(t, w);
        }
    }
    out
}

/// Tensors that only SiLU reads (and that are not model outputs): in the lowered graph, `x`
/// read by a LOGISTIC and by the MUL of `x` and that LOGISTIC's output, which nothing else
/// reads. SiLU maps everything below about -4 to within 0.08 of zero and passes a rounding
/// error on scaled by its slope, so such a tensor's range is judged by the error of SiLU's
/// output, not its own.
pub fn silu_inputs(g: &Graph) -> HashSet<TensorId> {
    let mut readers: HashMap<TensorId, Vec<usize>> = HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        for &t in &n.inputs {
            readers.entry(t).or_default().push(i);
        }
    }
    let producers = g.producers();
    let is_sigmoid_of = |i: usize, x: TensorId| {
        let n = &g.nodes[i];
        n.op == Op::Unary(UnaryOp::Sigmoid) && n.inputs == [x]
    };
    // MUL(x, σ(x)) in either order, with σ(x) read by nothing else.
    let is_gated_product = |i: usize, x: TensorId| {
        let n = &g.nodes[i];
        let gate = match n.inputs.as_slice() {
            [a, b] if *a == x => *b,
            [a, b] if *b == x => *a,
            _ => return false,
        };
        matches!(
            n.op,
            Op::Binary {
                op: BinaryOp::Mul,
                activation: Activation::None
            }
        ) && !g.outputs.contains(&gate)
            && readers.get(&gate).is_some_and(|r| r == &[i])
            && producers.get(&gate).is_some_and(|&p| is_sigmoid_of(p, x))
    };
    readers
        .iter()
        .filter(|&(&x, list)| {
            !g.outputs.contains(&x)
                && g.tensors[x].data.is_none()
                && list.iter().any(|&i| is_gated_product(i, x))
                && list
                    .iter()
                    .all(|&i| is_gated_product(i, x) || is_sigmoid_of(i, x))
        })
        .map(|(&x, _)| x)
        .collect()
}

/// The mean of the readers' normalized weights, `None` when any reader is not a linear layer.
fn tensor_weights(
    g: &Graph,
    readers: &HashMap<TensorId, Vec<usize>>,
    t: TensorId,
    depth: usize,
) -> Option<Vec<f32>> {
    let channels = *g.shape(t).last()?;
    let list = readers.get(&t)?;
    if channels < 2 || list.is_empty() || g.outputs.contains(&t) {
        return None;
    }
    let mut sum = vec![0f32; channels];
    for &ni in list {
        let n = &g.nodes[ni];
        let w = match &n.op {
            // A constant PAD of the spatial axes keeps channels where they are (its output shares
            // the input's parameters).
            Op::Pad {
                before,
                after,
                mode: crate::ir::PadMode::Constant,
                ..
            } if depth == 0
                && before.last() == Some(&0)
                && after.last() == Some(&0)
                && n.inputs[0] == t =>
            {
                tensor_weights(g, readers, n.outputs[0], depth + 1)?
            }
            _ => normalized(layer_input_sumsq(g, ni, t, channels)?)?,
        };
        sum.iter_mut().zip(&w).for_each(|(s, x)| *s += x);
    }
    let k = list.len() as f32;
    Some(sum.into_iter().map(|s| s / k).collect())
}

/// `Σ_k w[k, c]²` for every input channel `c` of the conv, depthwise or dense node `ni` reading
/// `t` as its data input.
fn layer_input_sumsq(g: &Graph, ni: usize, t: TensorId, channels: usize) -> Option<Vec<f32>> {
    let n = &g.nodes[ni];
    if n.inputs.first() != Some(&t) || n.inputs.iter().skip(1).any(|&i| i == t) {
        return None;
    }
    let w = const_f32(g, *n.inputs.get(1)?)?;
    let v: Vec<f32> = w.iter().copied().collect();
    let mut s = vec![0f32; channels];
    match n.op {
        Op::Conv2d {
            layout: Layout::Nhwc,
            group,
            ..
        } => {
            if is_depthwise(g, n) {
                // [1, KH, KW, C·M]: input channel c feeds outputs c·M .. (c+1)·M.
                let m = v.len().checked_div(channels)?;
                let per_row = *w.shape().last()?;
                let multiplier = per_row.checked_div(channels)?;
                if m == 0 || multiplier == 0 {
                    return None;
                }
                for row in v.chunks_exact(per_row) {
                    for (k, &x) in row.iter().enumerate() {
                        s[k / multiplier] += x * x;
                    }
                }
            } else if group == 1 {
                // [O, KH, KW, I]
                if *w.shape().last()? != channels {
                    return None;
                }
                for row in v.chunks_exact(channels) {
                    s.iter_mut().zip(row).for_each(|(a, &x)| *a += x * x);
                }
            } else {
                return None;
            }
        }
        Op::FullyConnected { .. } => {
            // [O, I]
            if *w.shape().last()? != channels {
                return None;
            }
            for row in v.chunks_exact(channels) {
                s.iter_mut().zip(row).for_each(|(a, &x)| *a += x * x);
            }
        }
        _ => return None,
    }
    Some(s)
}

/// Scaled to mean 1; `None` for all-zero weights.
fn normalized(w: Vec<f32>) -> Option<Vec<f32>> {
    let mean = w.iter().sum::<f32>() / w.len().max(1) as f32;
    (mean > 0.0 && mean.is_finite()).then(|| w.into_iter().map(|x| x / mean).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{ConstData, DType, Node};
    use ndarray::ArrayD;

    /// input [1, 4, 4, 3] → depthwise 3x3 whose channel 2 has 10x the weights → output.
    fn depthwise_graph() -> (Graph, TensorId) {
        let mut g = Graph::default();
        let x = g.add_tensor("x", vec![1, 4, 4, 3], DType::F32);
        let mut w = ArrayD::<f32>::from_elem(vec![1, 3, 3, 3], 0.1);
        for v in w.iter_mut().skip(2).step_by(3) {
            *v = 1.0;
        }
        let w = g.add_const("w", ConstData::F32(w));
        let y = g.add_tensor("y", vec![1, 2, 2, 3], DType::F32);
        g.inputs.push(x);
        g.nodes.push(Node {
            name: "dw".into(),
            op: Op::Conv2d {
                layout: Layout::Nhwc,
                group: 3,
                strides: [1, 1],
                dilations: [1, 1],
                pads: [0; 4],
                activation: Activation::None,
            },
            inputs: vec![x, w],
            outputs: vec![y],
        });
        g.outputs.push(y);
        (g, x)
    }

    #[test]
    fn depthwise_weights_rank_the_channels_they_amplify() {
        let (g, x) = depthwise_graph();
        let w = &channel_weights(&g)[&x];
        assert_eq!(w.len(), 3);
        assert!((w.iter().sum::<f32>() - 3.0).abs() < 1e-4, "{w:?}");
        assert!((w[2] / w[0] - 100.0).abs() < 1e-2, "{w:?}");
        assert_eq!(w[0], w[1]);
    }

    #[test]
    fn only_tensors_that_silu_alone_reads_are_silu_inputs() {
        let (mut g, x) = depthwise_graph();
        let y = g.outputs[0];
        let gate = g.add_tensor("gate", vec![1, 2, 2, 3], DType::F32);
        let z = g.add_tensor("z", vec![1, 2, 2, 3], DType::F32);
        g.nodes.push(Node {
            name: "sigmoid".into(),
            op: Op::Unary(UnaryOp::Sigmoid),
            inputs: vec![y],
            outputs: vec![gate],
        });
        g.nodes.push(Node {
            name: "silu".into(),
            op: Op::Binary {
                op: BinaryOp::Mul,
                activation: Activation::None,
            },
            inputs: vec![gate, y],
            outputs: vec![z],
        });
        g.outputs = vec![z];
        assert_eq!(silu_inputs(&g), HashSet::from([y]));
        assert!(!silu_inputs(&g).contains(&x));
        // Read by SiLU and by the model's caller: its own values matter.
        g.outputs.push(y);
        assert!(silu_inputs(&g).is_empty());
        // The gate read elsewhere too: not a SiLU.
        g.outputs = vec![z, gate];
        assert!(silu_inputs(&g).is_empty());
    }

    #[test]
    fn a_tensor_any_other_op_reads_keeps_uniform_weights() {
        let (mut g, x) = depthwise_graph();
        let z = g.add_tensor("z", vec![1, 4, 4, 3], DType::F32);
        g.nodes.push(Node {
            name: "relu".into(),
            op: Op::Unary(crate::ir::UnaryOp::Relu),
            inputs: vec![x],
            outputs: vec![z],
        });
        g.outputs.push(z);
        assert!(!channel_weights(&g).contains_key(&x));
    }
}
