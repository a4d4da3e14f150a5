//! Add, Sub, Mul, Div, Pow, Max, Min, Sum, Mean, Cast and CastLike (one-input ops are mapped in
//! `node`).

use super::{bad, bin, unsup, Importer, R};
use crate::import::proto::{cast_dtype, Attrs};
use crate::ir::{BinaryOp, ConstData, Op};
use tract_onnx::pb::NodeProto;

impl Importer<'_> {
    pub(super) fn binary(&mut self, n: &NodeProto, op: BinaryOp) -> R<()> {
        let x = self.req(n, 0, "A")?;
        let mut y = self.req(n, 1, "B")?;
        let (dx, dy) = (self.dtype(x), self.dtype(y));
        if dx != dy {
            // Pow allows a differently typed exponent; so do some exporters elsewhere.
            match self.cst(y) {
                Some(d) => {
                    let d = d.cast(dx);
                    y = self.add_const(&format!("{}/cast", self.cur), d);
                }
                None => y = self.emit_tmp(Op::Cast { to: dx }, &[y], "cast")?,
            }
        }
        let out = self.out0(n)?;
        self.emit_to(bin(op), &[x, y], out)?;
        Ok(())
    }

    pub(super) fn variadic(&mut self, n: &NodeProto, op: BinaryOp, mean: bool) -> R<()> {
        let count = n.input.iter().filter(|s| !s.is_empty()).count();
        if count == 0 {
            return bad("needs at least one input");
        }
        let out = self.out0(n)?;
        let mut acc = self.req(n, 0, "data_0")?;
        for i in 1..n.input.len() {
            let Some(y) = self.inp(n, i)? else { continue };
            let last = i == n.input.len() - 1 && !mean;
            acc = if last {
                self.emit_to(bin(op), &[acc, y], out)?
            } else {
                self.emit_tmp(bin(op), &[acc, y], &format!("acc{i}"))?
            };
        }
        if mean {
            let c = ConstData::scalar_f32(count as f32).cast(self.dtype(acc));
            let c = self.add_const(&format!("{}/count", self.cur), c);
            self.emit_to(bin(BinaryOp::Div), &[acc, c], out)?;
        } else if count == 1 {
            self.bind(out, acc);
        }
        Ok(())
    }

    pub(super) fn cast(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let Some(to) = a.int("to")? else {
            return bad("'to' is required");
        };
        let to = match cast_dtype(to as i32) {
            Ok(t) => t,
            Err(e) => return unsup(e),
        };
        let out = self.out0(n)?;
        if self.dtype(x) == to {
            self.bind(out, x);
            return Ok(());
        }
        self.emit_to(Op::Cast { to }, &[x], out)?;
        Ok(())
    }

    /// CastLike: Cast to the element type of the second input (whose values are unused).
    pub(super) fn cast_like(&mut self, n: &NodeProto) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let like = self.req(n, 1, "target_type")?;
        let to = self.dtype(like);
        let out = self.out0(n)?;
        if self.dtype(x) == to {
            self.bind(out, x);
            return Ok(());
        }
        self.emit_to(Op::Cast { to }, &[x], out)?;
        Ok(())
    }
}
