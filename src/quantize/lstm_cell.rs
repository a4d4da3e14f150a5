//! LSTM cells written out as separate ops (PyTorch's `LSTMCell` exported with the dynamo
//! exporter, or a model that steps its own cell): the same treatment as an imported LSTM's
//! unrolled cell, which TFLite's integer LSTM kernel keeps in int16. The cell is recognised by
//! its state update,
//!
//! ```text
//! c' = σ(f) ⊙ c + σ(i) ⊙ tanh(g)        h' = σ(o) ⊙ tanh(c')
//! ```
//!
//! and its gates' pre-activations traced back through the ops that split and add them to the
//! dense layers that compute them. In int8 each call's rounding of `c'` and `h'` feeds the next
//! call through the state the model returns; the gates' products lose most where a gate is
//! near 0 or 1.

use crate::ir::{BinaryOp, Graph, NodeId, Op, TensorId, UnaryOp};
use std::collections::{BTreeSet, HashMap};

/// Ops between a gate's dense layers and its activation: the sum of the input's and the
/// state's products, the split into four gates, reshapes.
const MAX_TRACE: usize = 6;

/// Names of the nodes of every written-out LSTM cell of `g`, in graph order.
pub fn written_out_cells(g: &Graph) -> Vec<String> {
    let producers = g.producers();
    let made_by = |t: TensorId| producers.get(&t).copied();
    let unary = |t: TensorId, op: UnaryOp| made_by(t).filter(|&p| g.nodes[p].op == Op::Unary(op));
    // The two-input `op` that writes `t`.
    let binary = |t: TensorId, op: BinaryOp| {
        made_by(t).filter(|&p| {
            matches!(g.nodes[p].op, Op::Binary { op: o, .. } if o == op)
                && g.nodes[p].inputs.len() == 2
        })
    };
    // `σ(a) ⊙ b` (either order): (the MUL, the LOGISTIC, b).
    let gated = |t: TensorId| -> Option<(NodeId, NodeId, TensorId)> {
        let m = binary(t, BinaryOp::Mul)?;
        let [a, b] = [g.nodes[m].inputs[0], g.nodes[m].inputs[1]];
        if let Some(s) = unary(a, UnaryOp::Sigmoid) {
            Some((m, s, b))
        } else {
            unary(b, UnaryOp::Sigmoid).map(|s| (m, s, a))
        }
    };
    let mut cell_nodes = BTreeSet::new();
    for n in &g.nodes {
        let Some(&h) = n.outputs.first() else {
            continue;
        };
        // h' = σ(o) ⊙ tanh(c')
        let Some((h_mul, o, t)) = gated(h) else {
            continue;
        };
        let Some(tanh_c) = unary(t, UnaryOp::Tanh) else {
            continue;
        };
        let c_new = g.nodes[tanh_c].inputs[0];
        // c' = σ(f) ⊙ c + σ(i) ⊙ tanh(g)
        let Some(add) = binary(c_new, BinaryOp::Add) else {
            continue;
        };
        let (Some(first), Some(second)) =
            (gated(g.nodes[add].inputs[0]), gated(g.nodes[add].inputs[1]))
        else {
            continue;
        };
        // One of the two products takes tanh(g): that is the input gate's.
        let (forget, input, candidate) = match (
            unary(first.2, UnaryOp::Tanh),
            unary(second.2, UnaryOp::Tanh),
        ) {
            (_, Some(t)) => (first, second, t),
            (Some(t), None) => (second, first, t),
            (None, None) => continue,
        };
        let mut found = vec![
            h_mul, o, tanh_c, add, forget.0, forget.1, input.0, input.1, candidate,
        ];
        // Each gate's pre-activation, back to the dense layers that compute it.
        for gate in [o, forget.1, input.1, candidate] {
            trace_to_dense(g, &producers, g.nodes[gate].inputs[0], &mut found);
        }
        cell_nodes.extend(found);
    }
    cell_nodes
        .into_iter()
        .map(|i| g.nodes[i].name.clone())
        .collect()
}

/// Adds the nodes from tensor `t` back through splits, reshapes and additions to the dense
/// layers (inclusive) that compute it.
fn trace_to_dense(
    g: &Graph,
    producers: &HashMap<TensorId, NodeId>,
    t: TensorId,
    found: &mut Vec<NodeId>,
) {
    let mut frontier = vec![(t, 0)];
    while let Some((t, depth)) = frontier.pop() {
        let Some(&p) = producers.get(&t) else {
            continue;
        };
        if found.contains(&p) || depth >= MAX_TRACE {
            continue;
        }
        let n = &g.nodes[p];
        match &n.op {
            Op::FullyConnected { .. } | Op::MatMul { .. } => found.push(p),
            Op::Binary {
                op: BinaryOp::Add, ..
            }
            | Op::Split { .. }
            | Op::Slice { .. }
            | Op::Reshape { .. } => {
                found.push(p);
                for &x in &n.inputs {
                    if g.tensors[x].data.is_none() {
                        frontier.push((x, depth + 1));
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Activation, ConstData, DType, Node};

    /// `x → dense → split in two → gate(a) ⊙ tanh(b)`, then `c_new` built as `cell` says:
    /// `true` adds the LSTM cell update `σ(f) ⊙ c + σ(i) ⊙ tanh(g)` before the output's tanh.
    fn graph(cell: bool) -> Graph {
        let mut g = Graph::default();
        let t = |g: &mut Graph, n: &str| g.add_tensor(n, vec![1, 4], DType::F32);
        let x = g.add_tensor("x", vec![1, 8], DType::F32);
        let c = t(&mut g, "c");
        g.inputs.extend([x, c]);
        let pieces = if cell { 5 } else { 2 };
        let w = g.add_const(
            "w",
            ConstData::from_f32(&[4 * pieces, 8], vec![0.1; 32 * pieces]),
        );
        let z = g.add_tensor("z", vec![1, 4 * pieces], DType::F32);
        let parts: Vec<TensorId> = (0..pieces).map(|k| t(&mut g, &format!("p{k}"))).collect();
        let mut nodes = vec![
            Node {
                name: "dense".into(),
                op: Op::FullyConnected {
                    activation: Activation::None,
                },
                inputs: vec![x, w],
                outputs: vec![z],
            },
            Node {
                name: "split".into(),
                op: Op::Split {
                    axis: 1,
                    sizes: vec![4; pieces],
                },
                inputs: vec![z],
                outputs: parts.clone(),
            },
        ];
        let mut apply = |g: &mut Graph, name: &str, op: Op, inputs: Vec<TensorId>| {
            let out = t(g, name);
            nodes.push(Node {
                name: name.into(),
                op,
                inputs,
                outputs: vec![out],
            });
            out
        };
        let (sigmoid, tanh) = (Op::Unary(UnaryOp::Sigmoid), Op::Unary(UnaryOp::Tanh));
        let binary = |op| Op::Binary {
            op,
            activation: Activation::None,
        };
        let o = apply(&mut g, "o", sigmoid.clone(), vec![parts[0]]);
        let c_new = if cell {
            let f = apply(&mut g, "f", sigmoid.clone(), vec![parts[2]]);
            let i = apply(&mut g, "i", sigmoid.clone(), vec![parts[3]]);
            let gg = apply(&mut g, "g", tanh.clone(), vec![parts[4]]);
            let kept = apply(&mut g, "kept", binary(BinaryOp::Mul), vec![f, c]);
            let added = apply(&mut g, "added", binary(BinaryOp::Mul), vec![i, gg]);
            apply(&mut g, "c_new", binary(BinaryOp::Add), vec![kept, added])
        } else {
            parts[1]
        };
        let squashed = apply(&mut g, "tanh_c", tanh, vec![c_new]);
        let h = apply(&mut g, "h", binary(BinaryOp::Mul), vec![o, squashed]);
        g.nodes = nodes;
        g.outputs.push(h);
        g
    }

    #[test]
    fn an_lstm_cell_is_found_with_the_dense_layer_and_split_before_its_gates() {
        let mut found = written_out_cells(&graph(true));
        found.sort();
        let mut all = [
            "dense", "split", "o", "f", "i", "g", "kept", "added", "c_new", "tanh_c", "h",
        ];
        all.sort();
        assert_eq!(found, all);
    }

    #[test]
    fn a_gated_tanh_without_the_cell_update_is_not_a_cell() {
        // WaveNet's gated activation `σ(a) ⊙ tanh(b)` has the output's shape only.
        assert!(written_out_cells(&graph(false)).is_empty());
    }
}
