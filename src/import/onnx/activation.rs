//! Elu, Selu, Softplus, Clip, Softmax and LogSoftmax.

use super::{bad, bin, unsup, Importer, R};
use crate::import::proto::{norm_axis, Attrs};
use crate::ir::{BinaryOp, Op, TensorId, UnaryOp};
use tract_onnx::pb::NodeProto;

impl Importer<'_> {
    /// Elu (and Selu): [gamma *] (max(x, 0) + alpha * (exp(min(x, 0)) - 1)), in IR ops.
    pub(super) fn elu(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let dt = self.dtype(x);
        let selu = n.op_type == "Selu";
        let (alpha, gamma) = if selu {
            (
                a.float_or("alpha", 1.673_263_2)?,
                Some(a.float_or("gamma", 1.050_701)?),
            )
        } else {
            (a.float_or("alpha", 1.0)?, None)
        };
        let out = self.out0(n)?;
        let zero = self.scalar(0.0, dt, "zero");
        let one = self.scalar(1.0, dt, "one");
        let k = self.scalar(alpha, dt, "alpha");
        let pos = self.emit_tmp(bin(BinaryOp::Max), &[x, zero], "pos")?;
        let neg = self.emit_tmp(bin(BinaryOp::Min), &[x, zero], "neg")?;
        let e = self.emit_tmp(Op::Unary(UnaryOp::Exp), &[neg], "exp")?;
        let em1 = self.emit_tmp(bin(BinaryOp::Sub), &[e, one], "expm1")?;
        let scaled = self.emit_tmp(bin(BinaryOp::Mul), &[em1, k], "scaled")?;
        match gamma {
            None => {
                self.emit_to(bin(BinaryOp::Add), &[pos, scaled], out)?;
            }
            Some(g) => {
                let sum = self.emit_tmp(bin(BinaryOp::Add), &[pos, scaled], "sum")?;
                let gk = self.scalar(g, dt, "gamma");
                self.emit_to(bin(BinaryOp::Mul), &[sum, gk], out)?;
            }
        }
        Ok(())
    }

    /// Softplus: max(x, 0) + log(1 + exp(-|x|)) (no overflow for large x), in IR ops.
    pub(super) fn softplus(&mut self, n: &NodeProto) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let dt = self.dtype(x);
        let out = self.out0(n)?;
        let one = self.scalar(1.0, dt, "one");
        let pos = self.emit_tmp(Op::Unary(UnaryOp::Relu), &[x], "pos")?;
        let abs = self.emit_tmp(Op::Unary(UnaryOp::Abs), &[x], "abs")?;
        let na = self.emit_tmp(Op::Unary(UnaryOp::Neg), &[abs], "neg_abs")?;
        let e = self.emit_tmp(Op::Unary(UnaryOp::Exp), &[na], "exp")?;
        let e1 = self.emit_tmp(bin(BinaryOp::Add), &[e, one], "exp_plus_1")?;
        let l = self.emit_tmp(Op::Unary(UnaryOp::Log), &[e1], "log")?;
        self.emit_to(bin(BinaryOp::Add), &[pos, l], out)?;
        Ok(())
    }

    pub(super) fn clip(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let (min, max) = if self.opset < 11 {
            (
                a.float_or("min", f32::NEG_INFINITY)?,
                a.float_or("max", f32::INFINITY)?,
            )
        } else {
            let lo = self.inp(n, 1)?.filter(|&id| self.cst(id).is_none());
            let hi = self.inp(n, 2)?.filter(|&id| self.cst(id).is_none());
            if lo.is_some() || hi.is_some() {
                return self.clip_runtime(n, x, lo, hi);
            }
            (
                self.const_scalar(n, 1, "min")?.unwrap_or(f32::NEG_INFINITY),
                self.const_scalar(n, 2, "max")?.unwrap_or(f32::INFINITY),
            )
        };
        let out = self.out0(n)?;
        self.emit_to(Op::Clip { min, max }, &[x], out)?;
        Ok(())
    }

    /// Clip with a bound computed at run time (a log-mel spectrogram's `max(x, x.max() - 80)`):
    /// `min(max(x, lo), hi)` as ONNX defines it, a runtime bound as Max/Min, a constant one as
    /// a one-sided Clip.
    fn clip_runtime(
        &mut self,
        n: &NodeProto,
        x: TensorId,
        lo: Option<TensorId>,
        hi: Option<TensorId>,
    ) -> R<()> {
        for (b, what) in [(lo, "min"), (hi, "max")] {
            let Some(b) = b else { continue };
            let t = &self.g.tensors[b];
            if t.elements() != 1 {
                return bad(format!("{what} must be a scalar, got shape {:?}", t.shape));
            }
            if t.dtype != self.dtype(x) {
                return bad(format!(
                    "{what} has type {:?} but the input has {:?}",
                    t.dtype,
                    self.dtype(x)
                ));
            }
        }
        let cmin = match lo {
            Some(_) => None,
            None => self.const_scalar(n, 1, "min")?,
        };
        let cmax = match hi {
            Some(_) => None,
            None => self.const_scalar(n, 2, "max")?,
        };
        let out = self.out0(n)?;
        let mut steps: Vec<(Op, Option<TensorId>)> = Vec::new();
        match (lo, cmin) {
            (Some(b), _) => steps.push((bin(BinaryOp::Max), Some(b))),
            (None, Some(m)) => steps.push((
                Op::Clip {
                    min: m,
                    max: f32::INFINITY,
                },
                None,
            )),
            (None, None) => {}
        }
        match (hi, cmax) {
            (Some(b), _) => steps.push((bin(BinaryOp::Min), Some(b))),
            (None, Some(m)) => steps.push((
                Op::Clip {
                    min: f32::NEG_INFINITY,
                    max: m,
                },
                None,
            )),
            (None, None) => {}
        }
        let mut cur = x;
        let last = steps.len() - 1;
        for (i, (op, b)) in steps.into_iter().enumerate() {
            let ins: Vec<TensorId> = std::iter::once(cur).chain(b).collect();
            cur = if i == last {
                self.emit_to(op, &ins, out)?
            } else {
                self.emit_tmp(op, &ins, "clip_lo")?
            };
        }
        Ok(())
    }

    pub(super) fn softmax(&mut self, n: &NodeProto, a: &Attrs, log: bool) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let s = self.shape(x);
        let rank = s.len();
        let axis = if self.opset >= 13 {
            norm_axis(a.int_or("axis", -1)?, rank)?
        } else {
            // Coerced to 2-D at `axis`: the same as a softmax over one axis only when every
            // other axis from `axis` on has size 1.
            let from = norm_axis(a.int_or("axis", 1)?, rank)?;
            let big: Vec<usize> = (from..rank).filter(|&i| s[i] != 1).collect();
            match big.as_slice() {
                [] => rank.saturating_sub(1),
                [k] => *k,
                _ => {
                    return unsup(format!(
                        "opset {} softmax flattens axes {from}.. of shape {s:?}; only a \
                         softmax over a single axis is supported",
                        self.opset
                    ))
                }
            }
        };
        let op = if log {
            Op::LogSoftmax { axis }
        } else {
            Op::Softmax { axis }
        };
        let out = self.out0(n)?;
        self.emit_to(op, &[x], out)?;
        Ok(())
    }
}
