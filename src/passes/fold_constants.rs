//! Constant folding on the IR: a node whose inputs are all constant is evaluated now and replaced
//! by its result. The importer already folds while it reads the model; this catches what other
//! passes expose (e.g. a Reshape of a weight once a Transpose was composed into it).

use crate::ir::eval;
use crate::ir::{ConstData, Graph};

/// Evaluates every all-constant node the evaluator knows. Returns how many nodes were folded.
/// A node the evaluator rejects (or whose result would be too large) is left as it is.
pub fn fold_constants(g: &mut Graph) -> usize {
    let mut folded = 0;
    let mut i = 0;
    while i < g.nodes.len() {
        let n = &g.nodes[i];
        let datas: Option<Vec<&ConstData>> = n.inputs.iter().map(|&t| g.const_data(t)).collect();
        let values = match datas {
            Some(d) if !d.is_empty() => match eval::eval(&n.op, &d) {
                Some(Ok(v)) if v.len() == n.outputs.len() => Some(v),
                _ => None,
            },
            _ => None,
        };
        let Some(values) = values else {
            i += 1;
            continue;
        };
        // Only an exact-shape result replaces the node (never change an output's shape).
        let outs = g.nodes[i].outputs.clone();
        if values
            .iter()
            .zip(&outs)
            .any(|(v, &o)| v.shape() != g.tensors[o].shape || v.dtype() != g.tensors[o].dtype)
        {
            i += 1;
            continue;
        }
        for (v, o) in values.into_iter().zip(outs) {
            g.tensors[o].data = Some(v.into());
        }
        g.nodes.remove(i);
        folded += 1;
    }
    folded
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Activation, BinaryOp, DType, Node, Op};
    use ndarray::ArrayD;

    fn c(v: &[f32]) -> ConstData {
        ConstData::F32(ArrayD::from_shape_vec(vec![v.len()], v.to_vec()).unwrap())
    }

    #[test]
    fn folds_all_constant_nodes_and_keeps_the_rest() {
        let mut g = Graph::default();
        let x = g.add_tensor("x", vec![2], DType::F32);
        let a = g.add_const("a", c(&[1.0, 2.0]));
        let b = g.add_const("b", c(&[3.0, 4.0]));
        let ab = g.add_tensor("ab", vec![2], DType::F32);
        let y = g.add_tensor("y", vec![2], DType::F32);
        let add = Op::Binary {
            op: BinaryOp::Add,
            activation: Activation::None,
        };
        g.nodes.push(Node {
            name: "const_add".into(),
            op: add.clone(),
            inputs: vec![a, b],
            outputs: vec![ab],
        });
        g.nodes.push(Node {
            name: "runtime_add".into(),
            op: add,
            inputs: vec![x, ab],
            outputs: vec![y],
        });
        g.inputs = vec![x];
        g.outputs = vec![y];
        assert_eq!(fold_constants(&mut g), 1);
        assert_eq!(g.nodes.len(), 1);
        assert_eq!(g.nodes[0].name, "runtime_add");
        assert_eq!(g.const_data(ab).unwrap().to_f32_vec(), vec![4.0, 6.0]);
    }
}
