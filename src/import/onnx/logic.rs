//! Equal, Less, Greater, LessOrEqual, GreaterOrEqual, And, Or, Xor, Not, Where, IsNaN, IsInf,
//! Trilu and Hardmax.

use super::{bad, bin, unsup, Importer, R};
use crate::import::fold;
use crate::ir::{BinaryOp, CompareOp, ConstData, DType, Op, ReduceOp, TensorId};
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
            let exact = match c {
                C::Equal => self.exact_extreme_test(a, b)?,
                _ => None,
            };
            let (c, a, b) = exact.unwrap_or((c, a, b));
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

    /// `ReduceMax(x) == -inf` (or `ReduceMin(x) == +inf`) as ONNX means it: whether every
    /// element is -inf (+inf). TFLite's reference REDUCE_MAX starts from the lowest finite
    /// float, so a row of -inf reduces to that (XNNPACK's to -inf). Halving keeps -inf and
    /// lifts every finite value above the lowest float, so `REDUCE_MAX(x * 0.5) <= lowest`
    /// holds exactly when every element is -inf, in either runtime. Returns the comparison and
    /// its operands, or None for other operands.
    fn exact_extreme_test(
        &mut self,
        a: TensorId,
        b: TensorId,
    ) -> R<Option<(CompareOp, TensorId, TensorId)>> {
        for (reduced, limit) in [(a, b), (b, a)] {
            let Some(ConstData::F32(l)) = self.cst(limit) else {
                continue;
            };
            let Some(&first) = l.iter().next() else {
                continue;
            };
            let (want, bound, at_bound) = match first {
                f32::NEG_INFINITY => (ReduceOp::Max, f32::MIN, CompareOp::LessEqual),
                f32::INFINITY => (ReduceOp::Min, f32::MAX, CompareOp::GreaterEqual),
                _ => continue,
            };
            if l.iter().any(|&v| v != first) {
                continue;
            }
            let Some(node) = self.g.nodes.iter().find(|n| n.outputs.contains(&reduced)) else {
                continue;
            };
            let Op::Reduce { op, .. } = &node.op else {
                continue;
            };
            if *op != want || self.dtype(node.inputs[0]) != DType::F32 {
                continue;
            }
            let (reduce, x) = (node.op.clone(), node.inputs[0]);
            let half = self.scalar(0.5, DType::F32, "half");
            let halved = self.emit_tmp(bin(BinaryOp::Mul), &[x, half], "halved")?;
            let h = self.emit_tmp(reduce, &[halved], "halved_extreme")?;
            let limit_shape = self.shape(limit);
            let count = limit_shape.iter().product();
            let bound = ConstData::from_f32(&limit_shape, vec![bound; count]);
            let bound = self.add_const(&format!("{}/finite_limit", self.cur), bound);
            return Ok(Some((at_bound, h, bound)));
        }
        Ok(None)
    }

    /// IsNaN (x != x) and IsInf (x == +inf and/or x == -inf, as detect_positive/negative say).
    pub(super) fn is_special(&mut self, n: &NodeProto, a: &crate::import::proto::Attrs) -> R<()> {
        let x = self.req(n, 0, "X")?;
        if self.dtype(x) != DType::F32 {
            return unsup(format!(
                "{} of {} is not supported",
                n.op_type,
                self.dtype(x).name()
            ));
        }
        let out = self.out0(n)?;
        let cmp = |op| Op::Compare { op };
        if n.op_type == "IsNaN" {
            self.emit_to(cmp(CompareOp::NotEqual), &[x, x], out)?;
            return Ok(());
        }
        let mut found = Vec::new();
        for (attr, inf) in [
            ("detect_positive", f32::INFINITY),
            ("detect_negative", f32::NEG_INFINITY),
        ] {
            if a.int_or(attr, 1)? != 0 {
                let inf =
                    self.add_const(&format!("{}/{attr}", self.cur), ConstData::scalar_f32(inf));
                found.push(self.emit_tmp(cmp(CompareOp::Equal), &[x, inf], attr)?);
            }
        }
        match found[..] {
            [one] => self.bind(out, one),
            [pos, neg] => {
                self.emit_to(Op::Logical { and: false }, &[pos, neg], out)?;
            }
            _ => {
                let shape = self.shape(x);
                let count = shape.iter().product();
                let none = ConstData::from_i64(&shape, vec![0; count]).cast(DType::Bool);
                self.out_const(out, none)?;
            }
        }
        Ok(())
    }

    /// Hardmax: 1 at the first maximum along the axis, 0 elsewhere: the ArgMax compared with
    /// the axis' indices.
    pub(super) fn hardmax(&mut self, n: &NodeProto, a: &crate::import::proto::Attrs) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let xs = self.shape(x);
        let dt = self.dtype(x);
        if dt != DType::F32 {
            return unsup(format!("Hardmax of {} is not supported", dt.name()));
        }
        let rank = xs.len();
        let axis = crate::import::proto::norm_axis(a.int_or("axis", -1)?, rank)?;
        // Before opset 13 the input is flattened to 2-D at the axis: the same only for the last.
        if self.opset < 13 && axis + 1 != rank {
            return unsup("Hardmax before opset 13 over an axis other than the last");
        }
        let arg = self.emit_tmp(
            Op::ArgMax {
                axis,
                keep_dims: true,
            },
            &[x],
            "argmax",
        )?;
        let mut ishape = vec![1; rank];
        ishape[axis] = xs[axis];
        let iota =
            ConstData::from_i64(&ishape, (0..xs[axis] as i64).collect()).cast(self.dtype(arg));
        let iota = self.add_const(&format!("{}/indices", self.cur), iota);
        let hit = self.emit_tmp(
            Op::Compare {
                op: CompareOp::Equal,
            },
            &[iota, arg],
            "is_max",
        )?;
        let one = self.add_const(&format!("{}/one", self.cur), ConstData::scalar_f32(1.0));
        let zero = self.add_const(&format!("{}/zero", self.cur), ConstData::scalar_f32(0.0));
        let out = self.out0(n)?;
        self.emit_to(Op::Where, &[hit, one, zero], out)?;
        Ok(())
    }

    /// Trilu: the upper (j - i >= k) or lower (j - i <= k) triangle of the last two axes, the
    /// rest zero: a Where on a constant mask.
    pub(super) fn trilu(&mut self, n: &NodeProto, a: &crate::import::proto::Attrs) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let xs = self.shape(x);
        if xs.len() < 2 {
            return bad(format!("expects rank ≥ 2, got {xs:?}"));
        }
        let k = match self.const_ints(n, 1, "k")? {
            Some(v) if v.len() == 1 => v[0],
            Some(v) => return bad(format!("k must have one element, has {}", v.len())),
            None => 0,
        };
        let upper = a.int_or("upper", 1)? != 0;
        let (rows, cols) = (xs[xs.len() - 2], xs[xs.len() - 1]);
        let keep: Vec<i64> = (0..rows)
            .flat_map(|i| {
                (0..cols).map(move |j| {
                    let d = j as i64 - i as i64;
                    i64::from(if upper { d >= k } else { d <= k })
                })
            })
            .collect();
        let mask = ConstData::from_i64(&[rows, cols], keep).cast(DType::Bool);
        let mask = self.add_const(&format!("{}/mask", self.cur), mask);
        let zero = ConstData::from_i64(&[], vec![0]).cast(self.dtype(x));
        let zero = self.add_const(&format!("{}/zero", self.cur), zero);
        let out = self.out0(n)?;
        self.emit_to(Op::Where, &[mask, x, zero], out)?;
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
