//! Equal, Less, Greater, LessOrEqual, GreaterOrEqual, And, Or, Xor, Not and Where.

use super::{bad, unsup, Importer, R};
use crate::import::fold;
use crate::ir::{DType, Op, TensorId};
use tract_onnx::pb::NodeProto;

impl Importer<'_> {
    pub(super) fn const_logic(&mut self, n: &NodeProto, op: &str) -> R<()> {
        let mut vals = Vec::new();
        let mut ids = Vec::new();
        for i in 0..n.input.len() {
            let Some(id) = self.inp(n, i)? else {
                return bad(format!("missing input {i}"));
            };
            ids.push(id);
            if let Some(d) = self.cst(id) {
                vals.push(d.clone());
            }
        }
        if vals.len() < ids.len() {
            return self.runtime_logic(n, op, &ids);
        }
        let need = if op == "Not" {
            1
        } else if op == "Where" {
            3
        } else {
            2
        };
        if vals.len() != need {
            return bad(format!("expects {need} inputs, got {}", vals.len()));
        }
        let r = match op {
            "Not" => fold::not(&vals[0]),
            "Where" => fold::where_(&vals[0], &vals[1], &vals[2])?,
            "And" | "Or" | "Xor" => fold::logical(op, &vals[0], &vals[1])?,
            _ => fold::compare(op, &vals[0], &vals[1])?,
        };
        let out = self.out0(n)?;
        self.out_const(out, r)
    }

    /// Comparisons, logic and Where on run-time values: TFLite EQUAL/LESS/..., LOGICAL_*,
    /// SELECT_V2.
    fn runtime_logic(&mut self, n: &NodeProto, op: &str, ids: &[TensorId]) -> R<()> {
        use crate::ir::CompareOp as C;
        let need = match op {
            "Not" => 1,
            "Where" => 3,
            _ => 2,
        };
        if ids.len() != need {
            return bad(format!("expects {need} inputs, got {}", ids.len()));
        }
        let out = self.out0(n)?;
        let cmp = match op {
            "Equal" => Some(C::Equal),
            "Less" => Some(C::Less),
            "Greater" => Some(C::Greater),
            "LessOrEqual" => Some(C::LessEqual),
            "GreaterOrEqual" => Some(C::GreaterEqual),
            "Xor" => Some(C::NotEqual),
            _ => None,
        };
        let bool_in = |s: &Self, i: usize| -> R<()> {
            if s.dtype(ids[i]) != DType::Bool {
                return bad(format!(
                    "input {i} must be bool, is {}",
                    s.dtype(ids[i]).name()
                ));
            }
            Ok(())
        };
        if let Some(c) = cmp {
            if op == "Xor" {
                bool_in(self, 0)?;
                bool_in(self, 1)?;
            }
            let (a, b) = self.same_type(ids[0], ids[1])?;
            let dt = self.dtype(a);
            if dt == DType::Bool && !matches!(c, C::Equal | C::NotEqual) {
                return unsup(format!("{op} of bool tensors is not supported"));
            }
            if matches!(dt, DType::F16 | DType::U8) {
                return unsup(format!("{op} of {} tensors is not supported", dt.name()));
            }
            self.emit_to(Op::Compare { op: c }, &[a, b], out)?;
            return Ok(());
        }
        match op {
            "And" | "Or" => {
                bool_in(self, 0)?;
                bool_in(self, 1)?;
                self.emit_to(Op::Logical { and: op == "And" }, ids, out)?;
            }
            "Not" => {
                bool_in(self, 0)?;
                self.emit_to(Op::Not, ids, out)?;
            }
            _ => {
                bool_in(self, 0)?;
                let (x, y) = self.same_type(ids[1], ids[2])?;
                self.emit_to(Op::Where, &[ids[0], x, y], out)?;
            }
        }
        Ok(())
    }

    /// Two operands with one element type: a constant is cast to the run-time operand's type
    /// (exporters mix int32/int64 constants freely); two run-time operands must agree.
    fn same_type(&mut self, a: TensorId, b: TensorId) -> R<(TensorId, TensorId)> {
        let (da, db) = (self.dtype(a), self.dtype(b));
        if da == db {
            return Ok((a, b));
        }
        if let Some(d) = self.cst(b).cloned() {
            let c = self.add_const(&format!("{}/cast", self.cur), d.cast(da));
            return Ok((a, c));
        }
        if let Some(d) = self.cst(a).cloned() {
            let c = self.add_const(&format!("{}/cast", self.cur), d.cast(db));
            return Ok((c, b));
        }
        bad(format!(
            "operands have different types ({} and {})",
            da.name(),
            db.name()
        ))
    }
}
