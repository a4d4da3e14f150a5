//! Folds an inference BatchNormalization into the convolution or dense layer before it:
//! y = (conv(x) - mean) * gamma / sqrt(var + eps) + beta becomes a conv with weights scaled per
//! output channel and a new bias. Runs on the ONNX-layout IR (before `layout`).

use crate::ir::{ConstData, Graph, Layout, Op};

/// Output-channel axis of a producer's weights, if it is a layer BN can fold into.
fn channel_axis(op: &Op) -> Option<usize> {
    match op {
        Op::Conv2d {
            layout: Layout::Nchw,
            ..
        }
        | Op::FullyConnected { .. } => Some(0),
        Op::ConvTranspose2d {
            layout: Layout::Nchw,
            ..
        } => Some(1),
        _ => None,
    }
}

/// Folds every foldable BatchNorm; returns how many were folded.
pub fn fold_batchnorm(g: &mut Graph) -> usize {
    let mut folded = 0;
    loop {
        let producers = g.producers();
        let uses = g.use_counts();
        let mut found = None;
        for (bi, bn) in g.nodes.iter().enumerate() {
            let Op::BatchNorm {
                epsilon,
                layout: Layout::Nchw,
            } = bn.op
            else {
                continue;
            };
            let x = bn.inputs[0];
            let Some(&pi) = producers.get(&x) else {
                continue;
            };
            let p = &g.nodes[pi];
            let Some(axis) = channel_axis(&p.op) else {
                continue;
            };
            // FullyConnected output's channels are its last axis; BN's are axis 1: only rank 2.
            if matches!(p.op, Op::FullyConnected { .. }) && g.shape(x).len() != 2 {
                continue;
            }
            if uses.get(&x) != Some(&1) || g.outputs.contains(&x) || p.outputs.len() != 1 {
                continue;
            }
            let params: Option<Vec<Vec<f32>>> = bn.inputs[1..5]
                .iter()
                .map(|&t| g.const_data(t).map(|d| d.to_f32_vec()))
                .collect();
            let Some(params) = params else { continue };
            let Some(w) = g.const_data(p.inputs[1]) else {
                continue;
            };
            let scale: Vec<f32> = params[0]
                .iter()
                .zip(&params[3])
                .map(|(gm, v)| gm / (v + epsilon).sqrt())
                .collect();
            let c = scale.len();
            // A layer bias must be a constant of c values too (it is folded into the new one).
            let bias_ok = match p.inputs.get(2) {
                None => true,
                Some(&b) => g.const_data(b).is_some_and(|d| d.len() == c),
            };
            if scale.iter().any(|s| !s.is_finite())
                || w.shape().get(axis) != Some(&c)
                || params.iter().any(|v| v.len() != c)
                || !bias_ok
            {
                continue; // e.g. var + eps <= 0: leave the BN alone, correct and unfolded
            }
            found = Some((bi, pi, axis, scale, params));
            break;
        }
        let Some((bi, pi, axis, scale, params)) = found else {
            break;
        };
        let c = scale.len();
        let p = g.nodes[pi].clone();
        let w = g.const_data(p.inputs[1]).expect("checked").clone();
        let shape = w.shape();
        let mut wv = w.to_f32_vec();
        let inner: usize = shape[axis + 1..].iter().product();
        for (i, v) in wv.iter_mut().enumerate() {
            *v *= scale[(i / inner) % c];
        }
        let old_bias = p
            .inputs
            .get(2)
            .and_then(|&b| g.const_data(b))
            .map(|d| d.to_f32_vec())
            .unwrap_or(vec![0.0; c]);
        let (beta, mean) = (&params[1], &params[2]);
        let bias: Vec<f32> = (0..c)
            .map(|i| (old_bias[i] - mean[i]) * scale[i] + beta[i])
            .collect();
        let wname = g.fresh_name(&format!("{}_bn_folded", g.tensors[p.inputs[1]].name));
        let wid = g.add_const(wname, ConstData::from_f32(&shape, wv));
        let bname = g.fresh_name(&format!("{}/bias_bn_folded", p.name));
        let bid = g.add_const(bname, ConstData::from_f32(&[c], bias));
        let bn_out = g.nodes[bi].outputs[0];
        let node = &mut g.nodes[pi];
        node.inputs.truncate(1);
        node.inputs.extend([wid, bid]);
        // The layer now writes the BN's output tensor directly.
        node.outputs[0] = bn_out;
        g.nodes.remove(bi);
        g.remove_dead();
        folded += 1;
    }
    folded
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Activation, DType, Node};

    fn conv_bn(var: f32) -> Graph {
        let mut g = Graph::default();
        let x = g.add_tensor("x", vec![1, 2, 3, 3], DType::F32);
        let w = g.add_const(
            "w",
            ConstData::from_f32(&[2, 2, 1, 1], vec![1.0, 2.0, 3.0, 4.0]),
        );
        let y = g.add_tensor("y", vec![1, 2, 3, 3], DType::F32);
        let p: Vec<_> = [
            vec![2.0, 1.0],
            vec![0.5, -1.0],
            vec![1.0, 0.0],
            vec![var, 3.0],
        ]
        .into_iter()
        .enumerate()
        .map(|(i, v)| g.add_const(format!("p{i}"), ConstData::from_f32(&[2], v)))
        .collect();
        let z = g.add_tensor("z", vec![1, 2, 3, 3], DType::F32);
        let conv = Op::Conv2d {
            strides: [1, 1],
            dilations: [1, 1],
            pads: [0; 4],
            group: 1,
            activation: Activation::None,
            layout: Layout::Nchw,
        };
        g.nodes.push(Node {
            name: "conv".into(),
            op: conv,
            inputs: vec![x, w],
            outputs: vec![y],
        });
        let bn = Op::BatchNorm {
            epsilon: 0.0,
            layout: Layout::Nchw,
        };
        g.nodes.push(Node {
            name: "bn".into(),
            op: bn,
            inputs: vec![y, p[0], p[1], p[2], p[3]],
            outputs: vec![z],
        });
        g.inputs = vec![x];
        g.outputs = vec![z];
        g
    }

    #[test]
    fn folds_scale_into_weights_and_shift_into_a_new_bias() {
        let mut g = conv_bn(4.0);
        assert_eq!(fold_batchnorm(&mut g), 1);
        assert_eq!(g.nodes.len(), 1);
        let n = &g.nodes[0];
        // scale = gamma / sqrt(var) = [2/2, 1/sqrt(3)]
        let s1 = 1.0 / 3f32.sqrt();
        assert_eq!(
            g.const_data(n.inputs[1]).unwrap().to_f32_vec(),
            vec![1.0, 2.0, 3.0 * s1, 4.0 * s1]
        );
        // bias = (0 - mean) * scale + beta = [-1*1 + 0.5, 0 - 1]
        assert_eq!(
            g.const_data(n.inputs[2]).unwrap().to_f32_vec(),
            vec![-0.5, -1.0]
        );
        assert_eq!(g.tensors[n.outputs[0]].name, "z");
    }

    #[test]
    fn leaves_a_bn_with_non_positive_variance_alone() {
        let mut g = conv_bn(-1.0);
        assert_eq!(fold_batchnorm(&mut g), 0);
        assert_eq!(g.nodes.len(), 2);
    }
}
