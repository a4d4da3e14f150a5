//! ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd, ReduceSumSquare, ReduceL1, ReduceL2,
//! ReduceLogSum, ArgMax, ArgMin, TopK and CumSum.

use super::{bad, bin, unsup, Importer, R};
use crate::import::proto::{norm_axis, Attrs};
use crate::ir::{BinaryOp, ConstData, DType, Op, ReduceOp, UnaryOp};
use tract_onnx::pb::NodeProto;

impl Importer<'_> {
    /// Sorted, unique, non-negative axes.
    pub(super) fn norm_axes(axes: &[i64], rank: usize) -> R<Vec<usize>> {
        let mut v = axes
            .iter()
            .map(|&x| norm_axis(x, rank))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        v.sort_unstable();
        v.dedup();
        Ok(v)
    }

    pub(super) fn reduce(&mut self, n: &NodeProto, a: &Attrs, op: ReduceOp) -> R<()> {
        let x = self.req(n, 0, "data")?;
        self.reduce_of(n, a, op, x, None)
    }

    /// ReduceSumSquare, ReduceL1, ReduceL2 and ReduceLogSum: a sum of x², |x| or x, then √ or
    /// log for the last two.
    pub(super) fn reduce_composite(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "data")?;
        if !matches!(self.dtype(x), DType::F32) {
            return unsup(format!(
                "{} of {} is not supported",
                n.op_type,
                self.dtype(x).name()
            ));
        }
        let summed = match n.op_type.as_str() {
            "ReduceSumSquare" | "ReduceL2" => {
                self.emit_tmp(bin(BinaryOp::Mul), &[x, x], "squared")?
            }
            "ReduceL1" => self.emit_tmp(Op::Unary(UnaryOp::Abs), &[x], "abs")?,
            _ => x,
        };
        let post = match n.op_type.as_str() {
            "ReduceL2" => Some(UnaryOp::Sqrt),
            "ReduceLogSum" => Some(UnaryOp::Log),
            _ => None,
        };
        self.reduce_of(n, a, ReduceOp::Sum, summed, post)
    }

    /// Reduces `x` (input 0, or what a composite reduction made of it) as node `n` says, then
    /// applies `post`.
    fn reduce_of(
        &mut self,
        n: &NodeProto,
        a: &Attrs,
        op: ReduceOp,
        x: crate::ir::TensorId,
        post: Option<UnaryOp>,
    ) -> R<()> {
        let composite = !matches!(
            n.op_type.as_str(),
            "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceProd"
        );
        let rank = self.shape(x).len();
        let axes_from_input = self.opset >= 18 || (n.op_type == "ReduceSum" && self.opset >= 13);
        let axes = if axes_from_input {
            self.const_ints(n, 1, "axes")?
        } else {
            a.ints("axes")?
        };
        let keep_dims = a.int_or("keepdims", 1)? != 0;
        let out = self.out0(n)?;
        let axes = match axes.filter(|v| !v.is_empty()) {
            Some(v) => Self::norm_axes(&v, rank)?,
            None if a.int_or("noop_with_empty_axes", 0)? != 0 => {
                if composite {
                    return unsup("noop_with_empty_axes=1 is not supported");
                }
                let x = self.req(n, 0, "data")?;
                self.bind(out, x);
                return Ok(());
            }
            None => (0..rank).collect(),
        };
        let reduce = Op::Reduce {
            op,
            axes,
            keep_dims,
        };
        match post {
            None => self.emit_to(reduce, &[x], out)?,
            Some(f) => {
                let sum = self.emit_tmp(reduce, &[x], "sum")?;
                self.emit_to(Op::Unary(f), &[sum], out)?
            }
        };
        Ok(())
    }

    pub(super) fn argmax(&mut self, n: &NodeProto, a: &Attrs, min: bool) -> R<()> {
        let x = self.req(n, 0, "data")?;
        let rank = self.shape(x).len();
        let axis = norm_axis(a.int_or("axis", 0)?, rank)?;
        let keep_dims = a.int_or("keepdims", 1)? != 0;
        let out = self.out0(n)?;
        let op = if min {
            Op::ArgMin { axis, keep_dims }
        } else {
            Op::ArgMax { axis, keep_dims }
        };
        if a.int_or("select_last_index", 0)? == 0 {
            self.emit_to(op, &[x], out)?;
            return Ok(());
        }
        // The last of tied extremes: the first one along the reversed axis (a Gather with
        // descending indices), counted back from the end.
        let len = self.shape(x)[axis];
        let descending = ConstData::from_i64(&[len], (0..len as i64).rev().collect());
        let descending = self.add_const(&format!("{}/descending", self.cur), descending);
        let reversed = self.emit_tmp(Op::Gather { axis }, &[x, descending], "reversed")?;
        let from_end = self.emit_tmp(op, &[reversed], "index_from_end")?;
        let dt = self.dtype(from_end);
        let last = ConstData::from_i64(&[], vec![len as i64 - 1]).cast(dt);
        let last = self.add_const(&format!("{}/last_index", self.cur), last);
        self.emit_to(bin(BinaryOp::Sub), &[last, from_end], out)?;
        Ok(())
    }

    /// TopK (opset 10+: k is input 1; opset 1: attribute): largest, sorted only.
    pub(super) fn topk(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let xs = self.shape(x);
        let axis = norm_axis(a.int_or("axis", -1)?, xs.len())?;
        if a.int_or("largest", 1)? != 1 {
            return unsup("largest=0 (smallest k) is not supported");
        }
        if a.int_or("sorted", 1)? != 1 {
            return unsup("sorted=0 is not supported");
        }
        let k = if self.opset >= 10 {
            match self.const_ints(n, 1, "K")? {
                Some(v) if v.len() == 1 => v[0],
                Some(v) => return bad(format!("K must have one element, has {}", v.len())),
                None => return bad("K is required"),
            }
        } else {
            match a.int("k")? {
                Some(k) => k,
                None => return bad("attribute k is required"),
            }
        };
        let k = match usize::try_from(k) {
            Ok(k) if k <= xs[axis] => k,
            _ => return bad(format!("K = {k} is out of range for axis {axis} of {xs:?}")),
        };
        if !matches!(self.dtype(x), DType::F32 | DType::I32 | DType::I64) {
            return unsup(format!("TopK of {} is not supported", self.dtype(x).name()));
        }
        let names: Vec<String> = (0..2)
            .map(|i| match n.output.get(i).filter(|o| !o.is_empty()) {
                Some(o) => o.clone(),
                None => self.tmp(if i == 0 { "values" } else { "indices" }),
            })
            .collect();
        let ids = self.emit(Op::TopK { axis, k }, &[x], names.clone())?;
        for (name, id) in names.iter().zip(ids) {
            self.bind(name, id);
        }
        Ok(())
    }

    /// CumSum with a constant axis → CUMSUM (float32; int32, and int64 narrowed to int32 as
    /// every int64 value is).
    pub(super) fn cumsum(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "x")?;
        if !matches!(self.dtype(x), DType::F32 | DType::I32 | DType::I64) {
            return unsup(format!(
                "CumSum of {} is not supported (float32 and int32 are)",
                self.dtype(x).name()
            ));
        }
        let Some(axis) = self.const_ints(n, 1, "axis")? else {
            return bad("axis (input 1) is required");
        };
        let &[axis] = axis.as_slice() else {
            return bad(format!("axis must have one element, has {}", axis.len()));
        };
        let axis = norm_axis(axis, self.shape(x).len())?;
        let flag = |name: &str| -> R<bool> {
            match a.int_or(name, 0)? {
                0 => Ok(false),
                1 => Ok(true),
                other => bad(format!("{name} must be 0 or 1, is {other}")),
            }
        };
        let op = Op::CumSum {
            axis,
            exclusive: flag("exclusive")?,
            reverse: flag("reverse")?,
        };
        let out = self.out0(n)?;
        self.emit_to(op, &[x], out)?;
        Ok(())
    }
}
