//! Add, Sub, Mul, Div, Pow, Mod, Max, Min, Sum, Mean, Cast and CastLike (one-input ops are mapped
//! in `node`).

use super::{bad, bin, unsup, Importer, R};
use crate::import::fold;
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

    /// Mod: `fmod=0` is FLOOR_MOD (the remainder takes the divisor's sign); `fmod=1` (C's
    /// `fmod`, the dividend's sign) only on constants, since TFLite has no such operator and
    /// correcting FLOOR_MOD's result rounds for floats.
    pub(super) fn modulo(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "A")?;
        let y = self.req(n, 1, "B")?;
        if self.dtype(x) != self.dtype(y) {
            return bad(format!(
                "A is {} and B is {}",
                self.dtype(x).name(),
                self.dtype(y).name()
            ));
        }
        let out = self.out0(n)?;
        match a.int_or("fmod", 0)? {
            0 => {
                self.emit_to(bin(BinaryOp::FloorMod), &[x, y], out)?;
                Ok(())
            }
            1 => match (self.cst(x), self.cst(y)) {
                (Some(cx), Some(cy)) => {
                    let r = fold::truncated_mod(cx, cy)?;
                    self.out_const(out, r)
                }
                _ => unsup(
                    "fmod=1 (remainder with the dividend's sign) on run-time values: TFLite \
                     has no such operator",
                ),
            },
            f => bad(format!("fmod {f} is not 0 or 1")),
        }
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
