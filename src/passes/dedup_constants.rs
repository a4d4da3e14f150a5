//! Duplicate constants are shared: two constant tensors with the same dtype, shape and bytes
//! become one (exporters often repeat the same scale, shape or bias tensor per node).

use crate::ir::{DType, Graph};
use std::collections::HashMap;

/// Points every use of a duplicate constant at its first copy. Returns how many were merged;
/// the copies are dropped by the next dead-code removal.
pub fn dedup_constants(g: &mut Graph) -> usize {
    let used: std::collections::HashSet<usize> = g
        .nodes
        .iter()
        .flat_map(|n| n.inputs.iter().copied())
        .collect();
    // Constants kept so far by dtype, shape and a fingerprint of their bytes (equal constants
    // always share one); a candidate is compared byte for byte with the kept ones of its key,
    // which differ from each other, so it matches at most one. The bytes are read in place.
    let mut first: HashMap<(DType, &[usize], u64), Vec<usize>> = HashMap::new();
    let mut replace = Vec::new();
    for (id, t) in g.tensors.iter().enumerate() {
        // Graph outputs keep their own tensor (and name).
        if !used.contains(&id) || g.outputs.contains(&id) {
            continue;
        }
        let Some(d) = &t.data else { continue };
        let bytes = d.as_le_bytes();
        let kept = first
            .entry((t.dtype, &t.shape, fingerprint(&bytes)))
            .or_default();
        let same = |&&k: &&usize| {
            g.tensors[k]
                .data
                .as_ref()
                .is_some_and(|e| e.as_le_bytes() == bytes)
        };
        match kept.iter().find(same) {
            Some(&keep) => replace.push((id, keep)),
            None => kept.push(id),
        }
    }
    for &(old, new) in &replace {
        g.replace_uses(old, new);
    }
    replace.len()
}

/// The length and up to 64 evenly spread 8-byte words of `bytes`, hashed: equal bytes, equal
/// fingerprints, without reading a large weight tensor whole.
fn fingerprint(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.len().hash(&mut h);
    let words = bytes.len() / 8;
    if words <= 64 {
        bytes.hash(&mut h);
    } else {
        for i in 0..64 {
            let at = i * (words - 1) / 63 * 8;
            bytes[at..at + 8].hash(&mut h);
        }
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Activation, BinaryOp, ConstData, DType, Node, Op};
    use ndarray::ArrayD;

    #[test]
    fn equal_constants_are_shared_and_different_ones_kept() {
        let c =
            |v: &[f32]| ConstData::F32(ArrayD::from_shape_vec(vec![v.len()], v.to_vec()).unwrap());
        let mut g = Graph::default();
        let x = g.add_tensor("x", vec![2], DType::F32);
        let k1 = g.add_const("k1", c(&[1.0, 2.0]));
        let k2 = g.add_const("k2", c(&[1.0, 2.0]));
        let k3 = g.add_const("k3", c(&[1.0, 3.0]));
        let mut prev = x;
        for (i, k) in [k1, k2, k3].into_iter().enumerate() {
            let y = g.add_tensor(format!("y{i}"), vec![2], DType::F32);
            g.nodes.push(Node {
                name: format!("mul{i}"),
                op: Op::Binary {
                    op: BinaryOp::Mul,
                    activation: Activation::None,
                },
                inputs: vec![prev, k],
                outputs: vec![y],
            });
            prev = y;
        }
        g.inputs = vec![x];
        g.outputs = vec![prev];
        assert_eq!(dedup_constants(&mut g), 1);
        assert_eq!(g.nodes[1].inputs[1], k1);
        assert_eq!(g.nodes[2].inputs[1], k3);
        g.remove_dead();
        assert_eq!(g.tensors.iter().filter(|t| t.is_const()).count(), 2);
    }
}
