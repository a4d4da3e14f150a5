//! Removes the data movement the layout pass leaves where the math needs none. Runs on the
//! lowered graph: a chain of RESHAPE/TRANSPOSE ops (each intermediate read only by the next,
//! and no graph output) from `a` to `b` is replaced by
//! - one RESHAPE when the chain keeps the elements in order — a TRANSPOSE that only moves
//!   axes of size 1 (single-head attention's `[1, S, 1, D] → [1, 1, S, D]`), a
//!   TRANSPOSE∘RESHAPE∘TRANSPOSE round trip, or several RESHAPEs;
//! - one TRANSPOSE when the chain holds only TRANSPOSEs (their composition).
//!
//! The element order is checked by pushing an index ramp through the chain, so a chain is
//! only rewritten when the result is exactly the same tensor.

use crate::ir::{Graph, Node, Op, TensorId};
use ndarray::{ArrayD, IxDyn};

/// Largest tensor whose element order is checked (bigger chains are left alone).
const MAX_ELEMENTS: usize = 1 << 22;

/// The flat input index of every output element after `ops` (None when too large or malformed).
fn element_order(shape: &[usize], ops: &[&Op]) -> Option<Vec<u32>> {
    let n: usize = shape.iter().product();
    if n > MAX_ELEMENTS {
        return None;
    }
    let mut a = ArrayD::from_shape_vec(IxDyn(shape), (0..n as u32).collect()).ok()?;
    for op in ops {
        a = match op {
            Op::Transpose { perm } if is_permutation(perm, a.ndim()) => {
                let t = a.permuted_axes(IxDyn(perm));
                t.as_standard_layout().into_owned()
            }
            Op::Reshape { shape } if shape.iter().product::<usize>() == n => {
                a.into_shape_with_order(IxDyn(shape)).ok()?
            }
            _ => return None,
        };
    }
    Some(a.iter().copied().collect())
}

fn is_permutation(perm: &[usize], rank: usize) -> bool {
    let mut seen = vec![false; rank];
    perm.len() == rank
        && perm
            .iter()
            .all(|&p| p < rank && !std::mem::replace(&mut seen[p], true))
}

fn is_movement(op: &Op) -> bool {
    matches!(op, Op::Transpose { .. } | Op::Reshape { .. })
}

/// (index of the chain's last node, chain input, replacement op) of the first simplifiable chain.
fn find(g: &Graph) -> Option<(usize, TensorId, Op)> {
    let producers = g.producers();
    let uses = g.use_counts();
    for (i, n) in g.nodes.iter().enumerate() {
        if !is_movement(&n.op) {
            continue;
        }
        // Walk back while the input is an intermediate only this chain reads.
        let mut chain: Vec<&Node> = vec![n];
        let mut a = n.inputs[0];
        while let Some(&pi) = producers.get(&a) {
            let p = &g.nodes[pi];
            if !is_movement(&p.op) || uses.get(&a) != Some(&1) || g.outputs.contains(&a) {
                break;
            }
            chain.push(p);
            a = p.inputs[0];
        }
        chain.reverse();
        let transposes = chain
            .iter()
            .filter(|c| matches!(c.op, Op::Transpose { .. }))
            .count();
        if chain.len() == 1 && transposes == 0 {
            continue; // a lone RESHAPE is already minimal
        }
        let shape_a = g.shape(a);
        let shape_b = g.shape(n.outputs[0]).to_vec();
        let ops: Vec<&Op> = chain.iter().map(|c| &c.op).collect();
        let Some(order) = element_order(shape_a, &ops) else {
            continue;
        };
        if order.iter().enumerate().all(|(j, &k)| j as u32 == k) {
            return Some((i, a, Op::Reshape { shape: shape_b }));
        }
        if transposes == chain.len() && chain.len() > 1 {
            // output axis i is input axis perm[i]: compose from the first transpose on
            let mut perm: Vec<usize> = (0..shape_a.len()).collect();
            for op in &ops {
                if let Op::Transpose { perm: p } = op {
                    perm = p.iter().map(|&k| perm[k]).collect();
                }
            }
            return Some((i, a, Op::Transpose { perm }));
        }
    }
    None
}

/// Simplifies every RESHAPE/TRANSPOSE chain it can; returns how many.
pub fn simplify_transposes(g: &mut Graph) -> usize {
    let mut count = 0;
    while let Some((i, a, op)) = find(g) {
        let n = &mut g.nodes[i];
        n.op = op;
        n.inputs = vec![a];
        g.remove_dead();
        count += 1;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DType;

    fn chain(input: &[usize], ops: Vec<Op>) -> Graph {
        let mut g = Graph::default();
        let mut cur = g.add_tensor("x", input.to_vec(), DType::F32);
        g.inputs = vec![cur];
        for (i, op) in ops.into_iter().enumerate() {
            let ts = [&g.tensors[cur]];
            let (shape, dtype) = crate::ir::shape::infer(&op, &ts).unwrap().remove(0);
            let t = g.add_tensor(format!("t{i}"), shape, dtype);
            g.nodes.push(Node {
                name: format!("n{i}"),
                op,
                inputs: vec![cur],
                outputs: vec![t],
            });
            cur = t;
        }
        g.outputs = vec![cur];
        g
    }

    fn t(perm: &[usize]) -> Op {
        Op::Transpose {
            perm: perm.to_vec(),
        }
    }

    fn r(shape: &[usize]) -> Op {
        Op::Reshape {
            shape: shape.to_vec(),
        }
    }

    #[test]
    fn a_transpose_of_unit_axes_is_a_reshape() {
        let mut g = chain(&[1, 16, 1, 8], vec![t(&[0, 2, 1, 3])]);
        assert_eq!(simplify_transposes(&mut g), 1);
        assert_eq!(g.nodes.len(), 1);
        assert_eq!(g.nodes[0].op, r(&[1, 1, 16, 8]));
    }

    #[test]
    fn a_round_trip_through_a_reshape_is_one_reshape() {
        // [1,4,16,8] → heads back to [1,16,4,8] → [1,16,32] → [1,16,4,8] → [1,4,16,8]
        let mut g = chain(
            &[1, 4, 16, 8],
            vec![
                t(&[0, 2, 1, 3]),
                r(&[1, 16, 32]),
                r(&[1, 16, 4, 8]),
                t(&[0, 2, 1, 3]),
            ],
        );
        assert_eq!(simplify_transposes(&mut g), 1);
        assert_eq!(g.nodes.len(), 1);
        assert_eq!(g.nodes[0].op, r(&[1, 4, 16, 8]));
    }

    #[test]
    fn transposes_compose_and_real_ones_stay() {
        let mut g = chain(&[2, 3, 4], vec![t(&[1, 0, 2]), t(&[0, 2, 1])]);
        assert_eq!(simplify_transposes(&mut g), 1);
        assert_eq!(g.nodes.len(), 1);
        assert_eq!(g.nodes[0].op, t(&[1, 2, 0]));
        // A head split needs its transpose.
        let mut g = chain(&[1, 16, 32], vec![r(&[1, 16, 4, 8]), t(&[0, 2, 1, 3])]);
        assert_eq!(simplify_transposes(&mut g), 0);
        assert_eq!(g.nodes.len(), 2);
    }

    #[test]
    fn an_intermediate_read_elsewhere_ends_the_chain() {
        let mut g = chain(&[2, 3], vec![t(&[1, 0]), t(&[1, 0])]);
        let mid = g.nodes[0].outputs[0];
        g.outputs.push(mid);
        // The second transpose alone is a real transpose of its input.
        assert_eq!(simplify_transposes(&mut g), 0);
    }
}
