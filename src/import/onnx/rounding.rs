//! Ceil and Round, written with TFLite's FLOOR (TFLite runtimes here have no CEIL or ROUND).

use super::{bin, unsup, Importer, R};
use crate::ir::{BinaryOp, CompareOp, DType, Op, UnaryOp};
use tract_onnx::pb::NodeProto;

impl Importer<'_> {
    /// Ceil: -floor(-x).
    pub(super) fn ceil(&mut self, n: &NodeProto) -> R<()> {
        let x = self.req(n, 0, "X")?;
        if self.dtype(x) != DType::F32 {
            return unsup(format!("Ceil of {} is not supported", self.dtype(x).name()));
        }
        let neg = self.emit_tmp(Op::Unary(UnaryOp::Neg), &[x], "negated")?;
        let floor = self.emit_tmp(Op::Unary(UnaryOp::Floor), &[neg], "floor")?;
        let out = self.out0(n)?;
        self.emit_to(Op::Unary(UnaryOp::Neg), &[floor], out)?;
        Ok(())
    }

    /// Round, halves to even: f = floor(x), then f + 1 where x - f > 0.5, or x - f = 0.5 and f
    /// is odd (f - 2 floor(f / 2) = 1). x - f is exact, so ties are found exactly.
    pub(super) fn round(&mut self, n: &NodeProto) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let dt = self.dtype(x);
        if dt != DType::F32 {
            return unsup(format!("Round of {} is not supported", dt.name()));
        }
        let floor = |s: &mut Self, t, what| s.emit_tmp(Op::Unary(UnaryOp::Floor), &[t], what);
        let f = floor(self, x, "floor")?;
        let frac = self.emit_tmp(bin(BinaryOp::Sub), &[x, f], "fraction")?;
        let half = self.scalar(0.5, dt, "half");
        let one = self.scalar(1.0, dt, "one");
        let two = self.scalar(2.0, dt, "two");
        let halved = self.emit_tmp(bin(BinaryOp::Mul), &[f, half], "halved")?;
        let halved = floor(self, halved, "halved_floor")?;
        let even = self.emit_tmp(bin(BinaryOp::Mul), &[halved, two], "even")?;
        let parity = self.emit_tmp(bin(BinaryOp::Sub), &[f, even], "parity")?;
        let cmp = |op| Op::Compare { op };
        let above = self.emit_tmp(cmp(CompareOp::Greater), &[frac, half], "above_half")?;
        let tie = self.emit_tmp(cmp(CompareOp::Equal), &[frac, half], "tie")?;
        let odd = self.emit_tmp(cmp(CompareOp::Equal), &[parity, one], "odd")?;
        let tie_odd = self.emit_tmp(Op::Logical { and: true }, &[tie, odd], "tie_to_even")?;
        let up = self.emit_tmp(Op::Logical { and: false }, &[above, tie_odd], "up")?;
        let next = self.emit_tmp(bin(BinaryOp::Add), &[f, one], "next")?;
        let out = self.out0(n)?;
        self.emit_to(Op::Where, &[up, next, f], out)?;
        Ok(())
    }
}
