//! Folds a constant Add/Sub after a conv or dense layer into its bias (a MatMul + Add exported
//! by PyTorch becomes one FULLY_CONNECTED). Runs on the ONNX-layout IR, after BN folding.

use crate::ir::{Activation, BinaryOp, ConstData, Graph, Layout, Op};

/// The per-channel vector of a constant that only varies along the channel axis `axis` of an
/// output of rank `rank` (numpy broadcasting), or None.
pub(crate) fn per_channel(
    c: &ConstData,
    rank: usize,
    axis: usize,
    channels: usize,
) -> Option<Vec<f32>> {
    let shape = c.shape();
    if shape.len() > rank {
        return None;
    }
    let offset = rank - shape.len();
    for (i, &d) in shape.iter().enumerate() {
        let along = i + offset == axis;
        if d != 1 && (!along || d != channels) {
            return None;
        }
    }
    let v = c.to_f32_vec();
    Some(if v.len() == channels {
        v
    } else {
        vec![v[0]; channels]
    })
}

/// Fuses every constant bias it can; returns how many.
pub fn fuse_bias(g: &mut Graph) -> usize {
    let mut fused = 0;
    loop {
        let producers = g.producers();
        let uses = g.use_counts();
        let mut found = None;
        for (ai, n) in g.nodes.iter().enumerate() {
            let Op::Binary {
                op: op @ (BinaryOp::Add | BinaryOp::Sub),
                activation: Activation::None,
            } = n.op
            else {
                continue;
            };
            // runtime operand first for Sub (x - c); either order for Add
            let (x, c) = match (
                g.tensors[n.inputs[0]].is_const(),
                g.tensors[n.inputs[1]].is_const(),
            ) {
                (false, true) => (n.inputs[0], n.inputs[1]),
                (true, false) if op == BinaryOp::Add => (n.inputs[1], n.inputs[0]),
                _ => continue,
            };
            let Some(&pi) = producers.get(&x) else {
                continue;
            };
            if uses.get(&x) != Some(&1)
                || g.outputs.contains(&x)
                || g.shape(x) != g.shape(n.outputs[0])
            {
                continue;
            }
            let p = &g.nodes[pi];
            let rank = g.shape(x).len();
            let (axis, channels) = match &p.op {
                Op::Conv2d {
                    activation: Activation::None,
                    layout: Layout::Nchw,
                    ..
                } => (1, g.shape(p.inputs[1])[0]),
                Op::FullyConnected {
                    activation: Activation::None,
                } => (rank - 1, g.shape(p.inputs[1])[0]),
                _ => continue,
            };
            let Some(mut add) =
                per_channel(g.const_data(c).expect("constant"), rank, axis, channels)
            else {
                continue;
            };
            if op == BinaryOp::Sub {
                add.iter_mut().for_each(|v| *v = -*v);
            }
            found = Some((ai, pi, add));
            break;
        }
        let Some((ai, pi, add)) = found else { break };
        let p = g.nodes[pi].clone();
        let mut bias = p
            .inputs
            .get(2)
            .and_then(|&b| g.const_data(b))
            .map(|d| d.to_f32_vec())
            .unwrap_or(vec![0.0; add.len()]);
        bias.iter_mut().zip(&add).for_each(|(b, a)| *b += a);
        let name = g.fresh_name(&format!("{}/bias_fused", p.name));
        let n = bias.len();
        let bid = g.add_const(name, ConstData::from_f32(&[n], bias));
        let out = g.nodes[ai].outputs[0];
        let node = &mut g.nodes[pi];
        node.inputs.truncate(2);
        node.inputs.push(bid);
        node.outputs[0] = out;
        g.nodes.remove(ai);
        g.remove_dead();
        fused += 1;
    }
    fused
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{DType, Node};

    #[test]
    fn matmul_plus_bias_becomes_one_dense_layer() {
        let mut g = Graph::default();
        let x = g.add_tensor("x", vec![1, 5, 3], DType::F32);
        let w = g.add_const("w", ConstData::from_f32(&[2, 3], vec![1.0; 6]));
        let y = g.add_tensor("y", vec![1, 5, 2], DType::F32);
        let b = g.add_const("b", ConstData::from_f32(&[2], vec![0.5, -1.0]));
        let z = g.add_tensor("z", vec![1, 5, 2], DType::F32);
        g.nodes.push(Node {
            name: "fc".into(),
            op: Op::FullyConnected {
                activation: Activation::None,
            },
            inputs: vec![x, w],
            outputs: vec![y],
        });
        g.nodes.push(Node {
            name: "add".into(),
            op: Op::Binary {
                op: BinaryOp::Add,
                activation: Activation::None,
            },
            inputs: vec![b, y],
            outputs: vec![z],
        });
        g.inputs = vec![x];
        g.outputs = vec![z];
        assert_eq!(fuse_bias(&mut g), 1);
        assert_eq!(g.nodes.len(), 1);
        assert_eq!(
            g.const_data(g.nodes[0].inputs[2]).unwrap().to_f32_vec(),
            vec![0.5, -1.0]
        );
    }

    #[test]
    fn a_constant_varying_along_another_axis_is_not_a_bias() {
        let c = ConstData::from_f32(&[5, 1], vec![1.0; 5]);
        assert!(per_channel(&c, 3, 2, 2).is_none());
    }
}
