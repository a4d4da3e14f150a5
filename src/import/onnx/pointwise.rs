//! Celu, Softsign, ThresholdedRelu, Shrink, Swish, SwiGLU, Mish, Sign, Sinh and Cosh: float32
//! elementwise functions TFLite has no operator for, written with IR ops as their ONNX
//! definitions read.

use super::{bad, bin, unsup, Importer, R};
use crate::import::proto::Attrs;
use crate::ir::{BinaryOp, CompareOp, DType, Op, TensorId, UnaryOp};
use tract_onnx::pb::NodeProto;

impl Importer<'_> {
    /// Input 0, which must be float32.
    fn float_input(&mut self, n: &NodeProto) -> R<TensorId> {
        let x = self.req(n, 0, "X")?;
        let dt = self.dtype(x);
        if dt != DType::F32 {
            return unsup(format!("{} of {} is not supported", n.op_type, dt.name()));
        }
        Ok(x)
    }

    fn compare(&mut self, op: CompareOp, a: TensorId, b: TensorId, what: &str) -> R<TensorId> {
        self.emit_tmp(Op::Compare { op }, &[a, b], what)
    }

    /// Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).
    pub(super) fn celu(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.float_input(n)?;
        let alpha = a.float_or("alpha", 1.0)?;
        let out = self.out0(n)?;
        let zero = self.scalar(0.0, DType::F32, "zero");
        let one = self.scalar(1.0, DType::F32, "one");
        let k = self.scalar(alpha, DType::F32, "alpha");
        let pos = self.emit_tmp(bin(BinaryOp::Max), &[x, zero], "pos")?;
        let xs = self.emit_tmp(bin(BinaryOp::Div), &[x, k], "x_over_alpha")?;
        let e = self.emit_tmp(Op::Unary(UnaryOp::Exp), &[xs], "exp")?;
        let em1 = self.emit_tmp(bin(BinaryOp::Sub), &[e, one], "expm1")?;
        let scaled = self.emit_tmp(bin(BinaryOp::Mul), &[em1, k], "scaled")?;
        let neg = self.emit_tmp(bin(BinaryOp::Min), &[scaled, zero], "neg")?;
        self.emit_to(bin(BinaryOp::Add), &[pos, neg], out)?;
        Ok(())
    }

    /// Softsign: x / (1 + |x|).
    pub(super) fn softsign(&mut self, n: &NodeProto) -> R<()> {
        let x = self.float_input(n)?;
        let out = self.out0(n)?;
        let one = self.scalar(1.0, DType::F32, "one");
        let abs = self.emit_tmp(Op::Unary(UnaryOp::Abs), &[x], "abs")?;
        let den = self.emit_tmp(bin(BinaryOp::Add), &[abs, one], "den")?;
        self.emit_to(bin(BinaryOp::Div), &[x, den], out)?;
        Ok(())
    }

    /// ThresholdedRelu: x where x > alpha, else 0.
    pub(super) fn thresholded_relu(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.float_input(n)?;
        let out = self.out0(n)?;
        let alpha = self.scalar(a.float_or("alpha", 1.0)?, DType::F32, "alpha");
        let zero = self.scalar(0.0, DType::F32, "zero");
        let above = self.compare(CompareOp::Greater, x, alpha, "above")?;
        self.emit_to(Op::Where, &[above, x, zero], out)?;
        Ok(())
    }

    /// Shrink: x - bias where x > lambd, x + bias where x < -lambd, else 0.
    pub(super) fn shrink(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.float_input(n)?;
        let out = self.out0(n)?;
        let lambd = a.float_or("lambd", 0.5)?;
        let bias = self.scalar(a.float_or("bias", 0.0)?, DType::F32, "bias");
        let hi = self.scalar(lambd, DType::F32, "lambd");
        let lo = self.scalar(-lambd, DType::F32, "neg_lambd");
        let zero = self.scalar(0.0, DType::F32, "zero");
        let above = self.compare(CompareOp::Greater, x, hi, "above")?;
        let below = self.compare(CompareOp::Less, x, lo, "below")?;
        let minus = self.emit_tmp(bin(BinaryOp::Sub), &[x, bias], "minus_bias")?;
        let plus = self.emit_tmp(bin(BinaryOp::Add), &[x, bias], "plus_bias")?;
        let upper = self.emit_tmp(Op::Where, &[above, minus, zero], "upper")?;
        self.emit_to(Op::Where, &[below, plus, upper], out)?;
        Ok(())
    }

    /// Swish: x * sigmoid(alpha * x).
    pub(super) fn swish(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.float_input(n)?;
        let out = self.out0(n)?;
        let alpha = a.float_or("alpha", 1.0)?;
        let ax = if alpha == 1.0 {
            x
        } else {
            let k = self.scalar(alpha, DType::F32, "alpha");
            self.emit_tmp(bin(BinaryOp::Mul), &[x, k], "alpha_x")?
        };
        let s = self.emit_tmp(Op::Unary(UnaryOp::Sigmoid), &[ax], "sigmoid")?;
        self.emit_to(bin(BinaryOp::Mul), &[x, s], out)?;
        Ok(())
    }

    /// SwiGLU: a * sigmoid(alpha * a) * b, for A and B of one shape.
    pub(super) fn swiglu(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.float_input(n)?;
        let gate = self.req(n, 1, "B")?;
        if self.shape(gate) != self.shape(x) || self.dtype(gate) != DType::F32 {
            return bad(format!(
                "B {:?} must be float32 of A's shape {:?}",
                self.shape(gate),
                self.shape(x)
            ));
        }
        let out = self.out0(n)?;
        let alpha = a.float_or("alpha", 1.0)?;
        let ax = if alpha == 1.0 {
            x
        } else {
            let k = self.scalar(alpha, DType::F32, "alpha");
            self.emit_tmp(bin(BinaryOp::Mul), &[x, k], "alpha_x")?
        };
        let s = self.emit_tmp(Op::Unary(UnaryOp::Sigmoid), &[ax], "sigmoid")?;
        let swish = self.emit_tmp(bin(BinaryOp::Mul), &[x, s], "swish")?;
        self.emit_to(bin(BinaryOp::Mul), &[swish, gate], out)?;
        Ok(())
    }

    /// Mish: x * tanh(softplus(x)), softplus as the Softplus import writes it.
    pub(super) fn mish(&mut self, n: &NodeProto) -> R<()> {
        let x = self.float_input(n)?;
        let out = self.out0(n)?;
        let one = self.scalar(1.0, DType::F32, "one");
        let pos = self.emit_tmp(Op::Unary(UnaryOp::Relu), &[x], "pos")?;
        let abs = self.emit_tmp(Op::Unary(UnaryOp::Abs), &[x], "abs")?;
        let na = self.emit_tmp(Op::Unary(UnaryOp::Neg), &[abs], "neg_abs")?;
        let e = self.emit_tmp(Op::Unary(UnaryOp::Exp), &[na], "exp")?;
        let e1 = self.emit_tmp(bin(BinaryOp::Add), &[e, one], "exp_plus_1")?;
        let l = self.emit_tmp(Op::Unary(UnaryOp::Log), &[e1], "log")?;
        let sp = self.emit_tmp(bin(BinaryOp::Add), &[pos, l], "softplus")?;
        let t = self.emit_tmp(Op::Unary(UnaryOp::Tanh), &[sp], "tanh")?;
        self.emit_to(bin(BinaryOp::Mul), &[x, t], out)?;
        Ok(())
    }

    /// Sign: 1 where x > 0, -1 where x < 0, else x * 0 (0, and NaN for NaN).
    pub(super) fn sign(&mut self, n: &NodeProto) -> R<()> {
        let x = self.float_input(n)?;
        let out = self.out0(n)?;
        let zero = self.scalar(0.0, DType::F32, "zero");
        let one = self.scalar(1.0, DType::F32, "one");
        let minus_one = self.scalar(-1.0, DType::F32, "minus_one");
        let pos = self.compare(CompareOp::Greater, x, zero, "positive")?;
        let neg = self.compare(CompareOp::Less, x, zero, "negative")?;
        let rest = self.emit_tmp(bin(BinaryOp::Mul), &[x, zero], "zero_or_nan")?;
        let lower = self.emit_tmp(Op::Where, &[neg, minus_one, rest], "lower")?;
        self.emit_to(Op::Where, &[pos, one, lower], out)?;
        Ok(())
    }

    /// Sinh (exp(x) - exp(-x)) / 2 and Cosh (exp(x) + exp(-x)) / 2.
    pub(super) fn hyperbolic(&mut self, n: &NodeProto) -> R<()> {
        let x = self.float_input(n)?;
        let out = self.out0(n)?;
        let half = self.scalar(0.5, DType::F32, "half");
        let ep = self.emit_tmp(Op::Unary(UnaryOp::Exp), &[x], "exp")?;
        let nx = self.emit_tmp(Op::Unary(UnaryOp::Neg), &[x], "neg")?;
        let en = self.emit_tmp(Op::Unary(UnaryOp::Exp), &[nx], "exp_neg")?;
        let op = if n.op_type == "Sinh" {
            BinaryOp::Sub
        } else {
            BinaryOp::Add
        };
        let s = self.emit_tmp(bin(op), &[ep, en], "sum")?;
        self.emit_to(bin(BinaryOp::Mul), &[s, half], out)?;
        Ok(())
    }
}
