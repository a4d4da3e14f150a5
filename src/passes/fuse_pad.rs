//! Folds an explicit constant Pad of H and W (what `nn.ZeroPad2d` / TF "same" emulation export)
//! into the padding of the conv or max pool that reads it, when the combined padding is what
//! TFLite's SAME or VALID padding expresses — so the lowering needs no PAD op for it.
//! Runs on the ONNX-layout (NCHW) IR.
//!
//! - Conv2d (regular, depthwise, grouped): the Pad value must be 0, the conv's own padding value.
//! - MaxPool: the conv-style padding never wins a max, so the Pad value must be -inf (or
//!   `f32::MIN`), or 0 in front of a value that is never negative (Relu, Relu6, Sigmoid, Clip with
//!   min ≥ 0); SAME windows always contain real input, so a padded value is never the answer.
//! - AveragePool is left alone: a Pad's zeros are counted in the average (count_include_pad),
//!   while the pool's own padding (and TFLite's SAME) leaves them out.
//!
//! Pads on other axes, other modes, or a combination SAME/VALID cannot express are left as they are.

use crate::ir::{Graph, Layout, Op, PadMode, PoolKind, TensorId, UnaryOp};
use crate::passes::lower::is_same;

/// Whether `t` is produced by an op whose output is never negative.
fn non_negative(g: &Graph, t: TensorId) -> bool {
    g.nodes
        .iter()
        .find(|n| n.outputs.contains(&t))
        .is_some_and(|n| match n.op {
            Op::Unary(UnaryOp::Relu | UnaryOp::Relu6 | UnaryOp::Sigmoid) => true,
            Op::Clip { min, .. } => min >= 0.0,
            _ => false,
        })
}

/// (consumer node, Pad's input, combined pads) of the first foldable Pad.
fn find(g: &Graph) -> Option<(usize, TensorId, [usize; 4])> {
    let producers = g.producers();
    for (ci, n) in g.nodes.iter().enumerate() {
        let (pads, kernel, strides, dilations, zero_ok, neg_inf_ok) = match &n.op {
            Op::Conv2d {
                strides,
                dilations,
                pads,
                layout: Layout::Nchw,
                ..
            } => {
                let ws = g.shape(*n.inputs.get(1)?);
                if ws.len() != 4 {
                    continue;
                }
                (*pads, [ws[2], ws[3]], *strides, *dilations, true, false)
            }
            Op::Pool2d {
                kind: PoolKind::Max,
                kernel,
                strides,
                pads,
                layout: Layout::Nchw,
            } => (*pads, *kernel, *strides, [1, 1], false, true),
            _ => continue,
        };
        let Some(&pi) = producers.get(&n.inputs[0]) else {
            continue;
        };
        let Op::Pad {
            before,
            after,
            mode: PadMode::Constant,
            value,
        } = &g.nodes[pi].op
        else {
            continue;
        };
        let y = g.nodes[pi].inputs[0];
        let shape = g.shape(y);
        if shape.len() != 4 || before.len() != 4 || after.len() != 4 {
            continue;
        }
        if before[..2] != [0, 0] || after[..2] != [0, 0] {
            continue;
        }
        let value_ok = if *value == 0.0 {
            zero_ok || (neg_inf_ok && non_negative(g, y))
        } else {
            neg_inf_ok && *value <= f32::MIN
        };
        if !value_ok {
            continue;
        }
        let combined = [
            pads[0] + before[2],
            pads[1] + before[3],
            pads[2] + after[2],
            pads[3] + after[3],
        ];
        let (h, w) = (shape[2], shape[3]);
        let sane = h > 0
            && w > 0
            && kernel
                .iter()
                .chain(&strides)
                .chain(&dilations)
                .all(|&v| v > 0);
        if sane && (combined == [0; 4] || is_same(h, w, kernel, strides, dilations, combined)) {
            return Some((ci, y, combined));
        }
    }
    None
}

/// Folds every foldable Pad into its reader; returns how many readers changed. A Pad read by
/// several layers stays until the last of them has taken it over.
pub fn fuse_pad(g: &mut Graph) -> usize {
    let mut fused = 0;
    while let Some((ci, y, combined)) = find(g) {
        let n = &mut g.nodes[ci];
        n.inputs[0] = y;
        match &mut n.op {
            Op::Conv2d { pads, .. } | Op::Pool2d { pads, .. } => *pads = combined,
            _ => unreachable!("find returns convs and pools"),
        }
        g.remove_dead();
        fused += 1;
    }
    fused
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Activation, ConstData, DType, Node};

    /// x [1, 2, 6, 6] → (Relu) → Pad(value) by [top, left, bottom, right] → reader.
    fn graph(pad: [usize; 4], value: f32, relu_first: bool, reader: Op) -> Graph {
        let mut g = Graph::default();
        let x = g.add_tensor("x", vec![1, 2, 6, 6], DType::F32);
        g.inputs = vec![x];
        let mut cur = x;
        if relu_first {
            let r = g.add_tensor("r", vec![1, 2, 6, 6], DType::F32);
            g.nodes.push(Node {
                name: "relu".into(),
                op: Op::Unary(UnaryOp::Relu),
                inputs: vec![x],
                outputs: vec![r],
            });
            cur = r;
        }
        let p = g.add_tensor(
            "p",
            vec![1, 2, 6 + pad[0] + pad[2], 6 + pad[1] + pad[3]],
            DType::F32,
        );
        g.nodes.push(Node {
            name: "pad".into(),
            op: Op::Pad {
                before: vec![0, 0, pad[0], pad[1]],
                after: vec![0, 0, pad[2], pad[3]],
                mode: PadMode::Constant,
                value,
            },
            inputs: vec![cur],
            outputs: vec![p],
        });
        let mut inputs = vec![p];
        if matches!(reader, Op::Conv2d { .. }) {
            inputs.push(g.add_const("w", ConstData::from_f32(&[2, 2, 3, 3], vec![0.1; 36])));
        }
        let ts: Vec<_> = inputs.iter().map(|&i| &g.tensors[i]).collect();
        let (shape, _) = crate::ir::shape::infer(&reader, &ts).unwrap().remove(0);
        let y = g.add_tensor("y", shape, DType::F32);
        g.nodes.push(Node {
            name: "reader".into(),
            op: reader,
            inputs,
            outputs: vec![y],
        });
        g.outputs = vec![y];
        g
    }

    fn conv(strides: [usize; 2]) -> Op {
        Op::Conv2d {
            strides,
            dilations: [1, 1],
            pads: [0; 4],
            group: 1,
            activation: Activation::None,
            layout: Layout::Nchw,
        }
    }

    fn maxpool(strides: [usize; 2]) -> Op {
        Op::Pool2d {
            kind: PoolKind::Max,
            kernel: [3, 3],
            strides,
            pads: [0; 4],
            layout: Layout::Nchw,
        }
    }

    fn reader_pads(g: &Graph) -> [usize; 4] {
        match g.nodes.last().unwrap().op {
            Op::Conv2d { pads, .. } | Op::Pool2d { pads, .. } => pads,
            _ => panic!("no reader"),
        }
    }

    #[test]
    fn zero_pad_folds_into_a_conv_as_same_padding() {
        let mut g = graph([1, 1, 1, 1], 0.0, false, conv([1, 1]));
        assert_eq!(fuse_pad(&mut g), 1);
        assert_eq!(g.nodes.len(), 1);
        assert_eq!(reader_pads(&g), [1, 1, 1, 1]);
        // TF-style stride-2 SAME: pad only at the end.
        let mut g = graph([0, 0, 1, 1], 0.0, false, conv([2, 2]));
        assert_eq!(fuse_pad(&mut g), 1);
        assert_eq!(reader_pads(&g), [0, 0, 1, 1]);
    }

    #[test]
    fn pads_same_cannot_express_or_a_nonzero_value_stay() {
        // PyTorch-style stride-2 pads (1, 1) are not TFLite's SAME (0, 1).
        let mut g = graph([1, 1, 1, 1], 0.0, false, conv([2, 2]));
        assert_eq!(fuse_pad(&mut g), 0);
        let mut g = graph([1, 1, 1, 1], 0.5, false, conv([1, 1]));
        assert_eq!(fuse_pad(&mut g), 0);
        let avg = Op::Pool2d {
            kind: PoolKind::Average,
            kernel: [3, 3],
            strides: [1, 1],
            pads: [0; 4],
            layout: Layout::Nchw,
        };
        let mut g = graph([1, 1, 1, 1], 0.0, false, avg);
        assert_eq!(fuse_pad(&mut g), 0, "zeros count in the average");
    }

    #[test]
    fn max_pool_takes_minus_infinity_or_zero_after_relu() {
        let mut g = graph([1, 1, 1, 1], f32::NEG_INFINITY, false, maxpool([1, 1]));
        assert_eq!(fuse_pad(&mut g), 1);
        assert_eq!(reader_pads(&g), [1, 1, 1, 1]);
        let mut g = graph([1, 1, 1, 1], 0.0, true, maxpool([1, 1]));
        assert_eq!(fuse_pad(&mut g), 1);
        let mut g = graph([1, 1, 1, 1], 0.0, false, maxpool([1, 1]));
        assert_eq!(fuse_pad(&mut g), 0, "a zero may beat negative inputs");
    }
}
