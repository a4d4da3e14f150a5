//! The layout rule of Reshape: keeping a permuted value permuted where the reshape allows it.

use super::{identity, inverse, is_identity, permute, Rewriter};
use crate::ir::{Node, Op, TensorId};
use anyhow::Result;

impl Rewriter<'_> {
    pub(super) fn rewrite_reshape(
        &mut self,
        node: &Node,
        x: TensorId,
        shape: &[usize],
    ) -> Result<()> {
        let out = node.outputs[0];
        let in_shape = self.old.tensors[x].shape.clone();
        let perm = self.perm_of(x)?;
        let placed_col_map = if self.old.tensors[x].is_const() {
            None
        } else {
            self.placed(x)?.col_map
        };
        if placed_col_map.is_none() && !is_identity(&perm) {
            // Same element order when the non-unit axes keep their relative order.
            let phys_order: Vec<usize> =
                perm.iter().copied().filter(|&a| in_shape[a] != 1).collect();
            let mut sorted = phys_order.clone();
            sorted.sort_unstable();
            if phys_order == sorted {
                let data = self.get(x, &perm)?;
                self.emit(
                    node,
                    Op::Reshape {
                        shape: shape.to_vec(),
                    },
                    vec![data],
                    vec![identity(shape.len())],
                );
                return Ok(());
            }
            // Merging axes that sit together physically (a patch embedding's NHWC [1,H,W,C] →
            // logical [1,C,H*W]): reshape physically and carry the permutation over the groups.
            if let Some(out_perm) = grouped_reshape_perm(&in_shape, &perm, shape) {
                let data = self.get(x, &perm)?;
                self.emit(
                    node,
                    Op::Reshape {
                        shape: permute(shape, &out_perm),
                    },
                    vec![data],
                    vec![out_perm],
                );
                return Ok(());
            }
            // Flatten feeding only FullyConnected layers: keep NHWC order, fix their weights.
            let consumers = self.consumers.get(&out).cloned().unwrap_or_default();
            let feeds_only_fc = !consumers.is_empty()
                && !self.old.outputs.contains(&out)
                && consumers.iter().all(|&c| {
                    let n = &self.old.nodes[c];
                    matches!(n.op, Op::FullyConnected { .. })
                        && n.inputs[0] == out
                        && self.old.tensors[n.inputs[1]].is_const()
                });
            if feeds_only_fc && shape.len() == 2 && perm[0] == 0 && shape[0] == in_shape[0] {
                let data = self.get(x, &perm)?;
                let inner: Vec<usize> = in_shape[1..].to_vec();
                let phys_inner = permute(&in_shape, &perm)[1..].to_vec();
                let logical_strides = strides(&inner);
                let k = shape[1];
                let mut map = vec![0; k];
                for (j, slot) in map.iter_mut().enumerate() {
                    // Physical multi-index of element j, then its logical flat index.
                    let mut rem = j;
                    let mut logical = 0;
                    for (d, &size) in phys_inner.iter().enumerate().rev() {
                        let idx = rem % size;
                        rem /= size;
                        logical += idx * logical_strides[perm[d + 1] - 1];
                    }
                    *slot = logical;
                }
                self.emit(
                    node,
                    Op::Reshape {
                        shape: shape.to_vec(),
                    },
                    vec![data],
                    vec![identity(2)],
                );
                if let Some(p) = self.placed.get_mut(&out) {
                    p.col_map = Some(map);
                }
                return Ok(());
            }
        }
        let data = self.get(x, &identity(in_shape.len()))?;
        self.emit(
            node,
            Op::Reshape {
                shape: shape.to_vec(),
            },
            vec![data],
            vec![identity(shape.len())],
        );
        Ok(())
    }
}

/// When a reshape from `in_shape` to `out_shape` only merges runs of consecutive input axes (each
/// output axis is one run; unit axes join a neighbour) and every run is also consecutive in the
/// input's physical order `perm`, the output can stay permuted: returns its perm over the runs.
fn grouped_reshape_perm(
    in_shape: &[usize],
    perm: &[usize],
    out_shape: &[usize],
) -> Option<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::with_capacity(out_shape.len());
    let mut next = 0;
    for &target in out_shape {
        let mut group = Vec::new();
        let mut size = 1;
        while next < in_shape.len() && (size < target || in_shape[next] == 1) {
            if size * in_shape[next] > target {
                break;
            }
            size *= in_shape[next];
            group.push(next);
            next += 1;
        }
        if size != target || group.is_empty() {
            return None;
        }
        groups.push(group);
    }
    if next != in_shape.len() {
        return None;
    }
    let position = inverse(perm);
    for g in &groups {
        if g.windows(2).any(|w| position[w[1]] != position[w[0]] + 1) {
            return None;
        }
    }
    let mut out_perm: Vec<usize> = (0..groups.len()).collect();
    out_perm.sort_by_key(|&j| position[groups[j][0]]);
    Some(out_perm)
}

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

#[cfg(test)]
mod tests {
    use super::grouped_reshape_perm;

    #[test]
    fn reshapes_that_merge_physically_adjacent_axes_keep_a_permutation() {
        // NHWC data of logical [1, C=8, H=2, W=3] flattened to [1, 8, 6]: physically [1, 6, 8].
        assert_eq!(
            grouped_reshape_perm(&[1, 8, 2, 3], &[0, 2, 3, 1], &[1, 8, 6]),
            Some(vec![0, 2, 1])
        );
        // Merging C with H is not contiguous in NHWC.
        assert_eq!(
            grouped_reshape_perm(&[1, 8, 2, 3], &[0, 2, 3, 1], &[1, 16, 3]),
            None
        );
        // Splitting an axis is not a merge.
        assert_eq!(
            grouped_reshape_perm(&[1, 8, 6], &[0, 2, 1], &[1, 8, 2, 3]),
            None
        );
        // Unit axes join a neighbour; identity stays identity.
        assert_eq!(
            grouped_reshape_perm(&[1, 4, 1, 5], &[0, 1, 2, 3], &[4, 5]),
            Some(vec![0, 1])
        );
    }
}
