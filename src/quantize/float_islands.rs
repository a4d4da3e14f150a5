//! Nodes sandwiched between ops that stay float (no int8 kernel): int8 there buys only a
//! QUANTIZE/DEQUANTIZE pair on each side and the precision an int8 tensor loses. The case that
//! matters is an audio front-end: `Pow(re, 2) + Pow(im, 2)` → mel `MatMul` → `Log`, whose
//! power spectrum spans ten decades: in int8 nearly every value rounds to 0 and the log of it is
//! the clip floor. Whether to keep them float is measured (pipeline), not assumed: a node
//! between two float ops with large weights may still be worth int8.

use super::params::moves_values;
use super::QuantSummary;
use crate::ir::{DType, Graph, NodeId, TensorId};
use std::collections::{HashMap, HashSet};

/// Nodes (by name) whose every runtime input comes from a node in `stays_float` (or another
/// such node) and whose every reader is in `stays_float` (or another such node), never a graph
/// output: the nodes that would run int8 between float ops.
pub fn between_float_ops(g: &Graph, stays_float: &HashSet<String>) -> Vec<String> {
    let producers = g.producers();
    let float_node = |n: NodeId| stays_float.contains(&g.nodes[n].name);
    let runtime = |t: TensorId| !g.tensors[t].is_const();
    let mut readers: HashMap<TensorId, Vec<NodeId>> = HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        for &t in &n.inputs {
            readers.entry(t).or_default().push(i);
        }
    }
    let graph_outputs: HashSet<TensorId> = g.outputs.iter().copied().collect();
    // Start from every node that could run int8 and narrow until both conditions hold: a node
    // dropped for one side can change the other side of its neighbours.
    let mut kept: Vec<bool> = (0..g.nodes.len()).map(|i| !float_node(i)).collect();
    loop {
        let before = kept.clone();
        // Forward, in execution order: fed only by float ops (or by nodes still kept).
        for (i, n) in g.nodes.iter().enumerate() {
            if !kept[i] {
                continue;
            }
            let mut inputs = n.inputs.iter().copied().filter(|&t| runtime(t)).peekable();
            kept[i] = inputs.peek().is_some()
                && inputs.all(|t| producers.get(&t).is_some_and(|&p| float_node(p) || kept[p]));
        }
        // Backward: read only by float ops (or by nodes still kept), never a graph output.
        for i in (0..g.nodes.len()).rev() {
            if !kept[i] {
                continue;
            }
            kept[i] = g.nodes[i].outputs.iter().all(|o| {
                let rs = readers.get(o).map(Vec::as_slice).unwrap_or(&[]);
                !graph_outputs.contains(o)
                    && !rs.is_empty()
                    && rs.iter().all(|&r| float_node(r) || kept[r])
            });
        }
        if kept == before {
            break;
        }
    }
    g.nodes
        .iter()
        .zip(kept)
        .filter(|(_, k)| *k)
        .map(|(n, _)| n.name.clone())
        .collect()
}

/// The nodes `summary` (a quantization of `g`) left in float that compute on float values. A
/// node that makes float values from integers (a Cast of the model's byte or id input) starts
/// the float path as a model input does: its output would be quantized anyway.
pub fn float_values(g: &Graph, summary: &QuantSummary) -> HashSet<String> {
    let left: HashSet<&str> = summary
        .float_nodes
        .iter()
        .map(|(name, _, _)| name.as_str())
        .collect();
    g.nodes
        .iter()
        .filter(|n| left.contains(n.name.as_str()))
        .filter(|n| {
            n.inputs
                .iter()
                .any(|&t| !g.tensors[t].is_const() && g.tensors[t].dtype == DType::F32)
        })
        .map(|n| n.name.clone())
        .collect()
}

/// The share of `g`'s constant values (weights, biases, tables) that the nodes `names` read.
pub fn constant_share(g: &Graph, names: &[String]) -> f64 {
    let chosen: HashSet<&str> = names.iter().map(String::as_str).collect();
    let (mut theirs, mut all) = (0usize, 0usize);
    let mut seen = HashSet::new();
    for n in &g.nodes {
        for &t in &n.inputs {
            if !g.tensors[t].is_const() || !seen.insert(t) {
                continue;
            }
            let count: usize = g.tensors[t].shape.iter().product();
            all += count;
            if chosen.contains(n.name.as_str()) {
                theirs += count;
            }
        }
    }
    if all == 0 {
        0.0
    } else {
        theirs as f64 / all as f64
    }
}

/// The nodes of `g` that only move values (reshape, transpose, slice…) and sit between the
/// nodes `summary` (a quantization of `g`) left in float, but ran int8 there.
pub fn movers_between_float_ops(g: &Graph, summary: &QuantSummary) -> Vec<String> {
    let between: HashSet<String> = between_float_ops(g, &float_values(g, summary))
        .into_iter()
        .collect();
    g.nodes
        .iter()
        .filter(|n| moves_values(&n.op) && between.contains(&n.name))
        .map(|n| n.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Activation, BinaryOp, ConstData, DType, Node, Op};

    fn op(op: BinaryOp) -> Op {
        Op::Binary {
            op,
            activation: Activation::None,
        }
    }

    fn node(g: &mut Graph, name: &str, op: Op, inputs: Vec<TensorId>) -> TensorId {
        let out = g.add_tensor(format!("{name}_out"), vec![1, 4], DType::F32);
        g.nodes.push(Node {
            name: name.into(),
            op,
            inputs,
            outputs: vec![out],
        });
        out
    }

    /// x → Pow → Add(·, c) → Mul(·, c) → Log → Mul → output: Add and Mul sit between Pow and
    /// Log; the Mul after Log feeds the output.
    #[test]
    fn finds_the_nodes_between_two_float_ops() {
        let mut g = Graph::default();
        let x = g.add_tensor("x", vec![1, 4], DType::F32);
        g.inputs.push(x);
        let c = g.add_const("c", ConstData::F32(ndarray::arr1(&[2.0f32]).into_dyn()));
        let p = node(&mut g, "pow", op(BinaryOp::Mul), vec![x, x]);
        let a = node(&mut g, "add", op(BinaryOp::Add), vec![p, c]);
        let m = node(&mut g, "mul", op(BinaryOp::Mul), vec![a, c]);
        let l = node(&mut g, "log", op(BinaryOp::Mul), vec![m, m]);
        let y = node(&mut g, "scale", op(BinaryOp::Mul), vec![l, c]);
        g.outputs.push(y);
        let float: HashSet<String> = ["pow", "log"].map(String::from).into();
        assert_eq!(between_float_ops(&g, &float), ["add", "mul"]);
        // A second reader that is not float (here the output) keeps a node int8.
        g.outputs.push(a);
        assert!(between_float_ops(&g, &float).is_empty());
        // Nothing float: nothing between.
        g.outputs.pop();
        assert!(between_float_ops(&g, &HashSet::new()).is_empty());
    }

    /// A node also fed by the model's input (not a float op) is not between float ops.
    #[test]
    fn a_graph_input_is_not_a_float_op() {
        let mut g = Graph::default();
        let x = g.add_tensor("x", vec![1, 4], DType::F32);
        g.inputs.push(x);
        let p = node(&mut g, "pow", op(BinaryOp::Mul), vec![x, x]);
        let a = node(&mut g, "add", op(BinaryOp::Add), vec![p, x]);
        let l = node(&mut g, "log", op(BinaryOp::Mul), vec![a, a]);
        g.outputs.push(l);
        let float: HashSet<String> = ["pow", "log"].map(String::from).into();
        assert!(between_float_ops(&g, &float).is_empty());
    }

    /// The constants a set of nodes reads, as a share of all the graph's constants (a constant
    /// read twice counts once).
    #[test]
    fn constant_share_counts_each_constant_once() {
        let mut g = Graph::default();
        let x = g.add_tensor("x", vec![1, 4], DType::F32);
        let w = g.add_const("w", ConstData::F32(ndarray::Array1::zeros(3).into_dyn()));
        let b = g.add_const("b", ConstData::F32(ndarray::Array1::zeros(1).into_dyn()));
        let y = node(&mut g, "big", op(BinaryOp::Mul), vec![x, w]);
        let z = node(&mut g, "small", op(BinaryOp::Add), vec![y, b]);
        node(&mut g, "again", op(BinaryOp::Mul), vec![z, w]);
        assert_eq!(constant_share(&g, &["small".into()]), 0.25);
        assert_eq!(constant_share(&g, &["big".into(), "small".into()]), 1.0);
        assert_eq!(constant_share(&g, &["again".into()]), 0.0);
    }
}
