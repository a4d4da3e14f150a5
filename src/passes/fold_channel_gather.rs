//! Folds a constant reordering of a convolution's output channels into the convolution: `Conv →
//! Gather(axis 1, a permutation)` becomes `Conv` with its weight rows (and bias, and per-channel
//! quantization parameters) in the gathered order. ONNX DepthToSpace in mode CRD (PyTorch's
//! PixelShuffle, after a convolution in super-resolution and decoder blocks) imports as such a
//! GATHER before DEPTH_TO_SPACE, which then reads the convolution directly. Exact; runs on the
//! ONNX-layout IR once BatchNorms are folded into their convolutions.

use crate::ir::{Graph, Layout, Op, TensorId};

/// Whether `order` holds each of `0..n` once.
fn is_permutation(order: &[i64], n: usize) -> bool {
    let mut seen = vec![false; n];
    order.len() == n
        && order.iter().all(|&v| {
            usize::try_from(v)
                .ok()
                .and_then(|i| seen.get_mut(i))
                .is_some_and(|s| !std::mem::replace(s, true))
        })
}

/// A copy of constant `t` with its rows (axis 0) in `rows` order, per-channel parameters on axis
/// 0 reordered with them; `None` when its parameters are per channel on another axis.
fn reordered(g: &mut Graph, t: TensorId, rows: &[usize]) -> Option<TensorId> {
    let old = &g.tensors[t];
    let quant = match &old.quant {
        Some(q) if q.is_per_channel() => {
            if q.axis != 0 || q.scale.len() != rows.len() || q.zero_point.len() != rows.len() {
                return None;
            }
            let mut q = q.clone();
            q.scale = rows.iter().map(|&r| q.scale[r]).collect();
            q.zero_point = rows.iter().map(|&r| q.zero_point[r]).collect();
            Some(q)
        }
        other => other.clone(),
    };
    let data = old.data.as_ref()?.select_rows(rows);
    let name = g.fresh_name(&format!("{}_reordered", old.name));
    let id = g.add_const(name, data);
    g.tensors[id].quant = quant;
    Some(id)
}

pub fn fold_channel_gather(g: &mut Graph) -> usize {
    let producers = g.producers();
    let uses = g.use_counts();
    let mut folded = Vec::new();
    for k in 0..g.nodes.len() {
        let n = &g.nodes[k];
        let Op::Gather { axis: 1 } = n.op else {
            continue;
        };
        let (x, idx, y) = (n.inputs[0], n.inputs[1], n.outputs[0]);
        let Some(&p) = producers.get(&x) else {
            continue;
        };
        let conv = &g.nodes[p];
        // Grouped and depthwise convolutions tie output channels to input groups.
        let Op::Conv2d {
            group: 1,
            layout: Layout::Nchw,
            ..
        } = conv.op
        else {
            continue;
        };
        let channels = g.shape(x)[1];
        let order = match g.const_data(idx) {
            Some(d) if g.shape(idx) == [channels] => d.to_i64_vec(),
            _ => continue,
        };
        let consts_ok = conv.inputs[1..]
            .iter()
            .all(|&t| g.tensors[t].is_const() && g.shape(t).first() == Some(&channels));
        if uses.get(&x) != Some(&1) || !consts_ok || !is_permutation(&order, channels) {
            continue;
        }
        let rows: Vec<usize> = order.iter().map(|&v| v as usize).collect();
        let params = g.nodes[p].inputs[1..].to_vec();
        let Some(new_params) = params
            .iter()
            .map(|&t| reordered(g, t, &rows))
            .collect::<Option<Vec<TensorId>>>()
        else {
            continue;
        };
        let conv = &mut g.nodes[p];
        conv.inputs.truncate(1);
        conv.inputs.extend(new_params);
        conv.outputs[0] = y;
        folded.push(k);
    }
    let count = folded.len();
    let mut index = 0;
    g.nodes.retain(|_| {
        let keep = !folded.contains(&index);
        index += 1;
        keep
    });
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Activation, ConstData, DType, Node, QuantParams};

    /// `y = Gather(Conv(x; w, b), order, axis 1)`, 1x1 conv, 1 input channel and 3 outputs.
    fn conv_then_gather(order: Vec<i32>, group: usize) -> Graph {
        let mut g = Graph::default();
        let x = g.add_tensor("x", vec![1, 1, 2, 2], DType::F32);
        let w = g.add_const("w", ConstData::from_f32(&[3, 1, 1, 1], vec![1.0, 2.0, 3.0]));
        g.tensors[w].quant = Some(QuantParams {
            scale: vec![0.1, 0.2, 0.3],
            zero_point: vec![0, 0, 0],
            axis: 0,
        });
        let b = g.add_const("b", ConstData::from_f32(&[3], vec![10.0, 20.0, 30.0]));
        let h = g.add_tensor("h", vec![1, 3, 2, 2], DType::F32);
        let idx = g.add_const("order", ConstData::from_i32(&[3], order));
        let y = g.add_tensor("y", vec![1, 3, 2, 2], DType::F32);
        g.nodes.push(Node {
            name: "conv".into(),
            op: Op::Conv2d {
                strides: [1, 1],
                dilations: [1, 1],
                pads: [0; 4],
                group,
                activation: Activation::None,
                layout: Layout::Nchw,
            },
            inputs: vec![x, w, b],
            outputs: vec![h],
        });
        g.nodes.push(Node {
            name: "gather".into(),
            op: Op::Gather { axis: 1 },
            inputs: vec![h, idx],
            outputs: vec![y],
        });
        g.inputs.push(x);
        g.outputs.push(y);
        g
    }

    #[test]
    fn a_channel_permutation_moves_into_the_weights() {
        let mut g = conv_then_gather(vec![2, 0, 1], 1);
        assert_eq!(fold_channel_gather(&mut g), 1);
        assert_eq!(g.nodes.len(), 1);
        let conv = &g.nodes[0];
        assert_eq!(conv.outputs[0], g.outputs[0]);
        let w = &g.tensors[conv.inputs[1]];
        assert_eq!(w.data.as_ref().unwrap().to_f32_vec(), [3.0, 1.0, 2.0]);
        assert_eq!(w.quant.as_ref().unwrap().scale, [0.3, 0.1, 0.2]);
        let b = g.const_data(conv.inputs[2]).unwrap().to_f32_vec();
        assert_eq!(b, [30.0, 10.0, 20.0]);
    }

    #[test]
    fn other_gathers_stay() {
        // Not a permutation (a channel twice), or a grouped convolution.
        for (order, group) in [(vec![0, 0, 1], 1), (vec![2, 0, 1], 3)] {
            let mut g = conv_then_gather(order, group);
            assert_eq!(fold_channel_gather(&mut g), 0);
            assert_eq!(g.nodes.len(), 2);
        }
    }
}
