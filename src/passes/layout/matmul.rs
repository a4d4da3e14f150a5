//! The layout rule of the matrix ops: a dense layer reading flattened NHWC data takes its weight
//! columns reordered; a MatMul operand's swapped matrix axes become its transpose flag.

use super::{identity, is_identity, Placed, Rewriter};
use crate::ir::{Activation, ConstData, Node, Op, TensorId};
use anyhow::Result;

impl Rewriter<'_> {
    pub(super) fn rewrite_fully_connected(
        &mut self,
        node: &Node,
        x: TensorId,
        activation: Activation,
    ) -> Result<()> {
        let rank = self.old.tensors[x].shape.len();
        let placed = if self.old.tensors[x].is_const() {
            None
        } else {
            Some(self.placed(x)?)
        };
        let w = node.inputs[1];
        let mut inputs;
        let perm;
        match placed {
            Some(Placed {
                id,
                col_map: Some(map),
                perm: p,
            }) => {
                // Flattened NHWC data: reorder the weight columns to match.
                let wt = &self.old.tensors[w];
                let data = wt
                    .data
                    .as_ref()
                    .expect("FullyConnected weights are constant")
                    .to_f32_vec();
                let (n, k) = (wt.shape[0], wt.shape[1]);
                let mut cols = vec![0f32; n * k];
                for r in 0..n {
                    for (j, &l) in map.iter().enumerate() {
                        cols[r * k + j] = data[r * k + l];
                    }
                }
                let quant = wt.quant.clone();
                let wid = self.new.add_const(
                    format!("{}_nhwc", wt.name),
                    ConstData::from_f32(&[n, k], cols),
                );
                // Reordered columns keep their rows' (output channels') parameters.
                self.new.tensors[wid].quant = quant;
                inputs = vec![id, wid];
                perm = p;
            }
            _ => {
                let mut p = self.perm_of(x)?;
                if p.last() != Some(&(rank - 1)) {
                    p = identity(rank);
                }
                inputs = vec![self.get(x, &p)?, self.get(w, &[0, 1])?];
                perm = p;
            }
        }
        if let Some(&b) = node.inputs.get(2) {
            inputs.push(self.get(b, &[0])?);
        }
        self.emit(node, Op::FullyConnected { activation }, inputs, vec![perm]);
        Ok(())
    }

    /// A MatMul operand whose batch axes are in order; a swap of the last two axes becomes the
    /// transpose flag instead of a TRANSPOSE op.
    pub(super) fn matmul_operand(
        &mut self,
        t: TensorId,
        transposed: bool,
    ) -> Result<(TensorId, bool)> {
        let r = self.old.tensors[t].shape.len();
        let perm = self.perm_of(t)?;
        if r >= 2 && perm[..r - 2].iter().enumerate().all(|(i, &p)| i == p) {
            if perm[r - 2] == r - 1 && perm[r - 1] == r - 2 {
                return Ok((self.get(t, &perm)?, !transposed));
            }
            if is_identity(&perm) {
                return Ok((self.get(t, &perm)?, transposed));
            }
        }
        // The batch axes must move. Keep the two matrix axes in the order they already have
        // and say which order that is with the flag: the TRANSPOSE then moves whole rows (or,
        // when only unit axes move, is a pure reshape that `transpose_chains` removes).
        if r >= 2 {
            let pos = |a: usize| perm.iter().position(|&p| p == a);
            if pos(r - 1) < pos(r - 2) {
                let mut want = identity(r);
                want.swap(r - 2, r - 1);
                return Ok((self.get(t, &want)?, !transposed));
            }
        }
        Ok((self.get(t, &identity(r))?, transposed))
    }
}
