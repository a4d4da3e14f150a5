//! NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, written with IR ops.
//!
//! The picked element `x[n, target[n, d...], d...]` is a sum over the class axis of `x` where
//! the class equals the target and 0 elsewhere (one nonzero term: exact); the weight of each
//! target is picked the same way. A target equal to `ignore_index` gets weight 0 and loss 0.

use super::{bad, bin, unsup, Importer, R};
use crate::import::proto::Attrs;
use crate::ir::{BinaryOp, CompareOp, ConstData, DType, Op, ReduceOp, TensorId, UnaryOp};
use tract_onnx::pb::NodeProto;

/// How the per-element losses are combined.
#[derive(Clone, Copy, PartialEq)]
enum Reduction {
    None,
    Sum,
    Mean,
}

impl Importer<'_> {
    pub(super) fn nll_loss(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let out = self.out0(n)?;
        self.loss(n, a, x, out)
    }

    /// SoftmaxCrossEntropyLoss: the NLL loss of LogSoftmax(scores) over the class axis (1),
    /// whose values are the optional second output.
    pub(super) fn softmax_cross_entropy(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let scores = self.req(n, 0, "scores")?;
        let shape = self.shape(scores);
        if shape.len() < 2 {
            return bad("scores must have a class axis (rank >= 2)");
        }
        let log_prob_name = n.output.get(1).map(String::as_str).unwrap_or("");
        let op = Op::LogSoftmax { axis: 1 };
        // Over [N, C, d1·d2·...]: the class axis moves last for TFLite, whose TRANSPOSE
        // has at most 6 axes.
        let log_prob = if shape.len() > 3 {
            let flat = vec![shape[0], shape[1], shape[2..].iter().product()];
            let s3 = self.emit_tmp(Op::Reshape { shape: flat }, &[scores], "scores_3d")?;
            let l3 = self.emit_tmp(op, &[s3], "log_prob_3d")?;
            let back = Op::Reshape { shape };
            if log_prob_name.is_empty() {
                self.emit_tmp(back, &[l3], "log_prob")?
            } else {
                self.emit_to(back, &[l3], log_prob_name)?
            }
        } else if log_prob_name.is_empty() {
            self.emit_tmp(op, &[scores], "log_prob")?
        } else {
            self.emit_to(op, &[scores], log_prob_name)?
        };
        let out = self.out0(n)?;
        self.loss(n, a, log_prob, out)
    }

    /// The loss of log-probabilities `x` [N, C, d...] against input 1 (targets [N, d...])
    /// with the optional class weights of input 2.
    fn loss(&mut self, n: &NodeProto, a: &Attrs, x: TensorId, out: &str) -> R<()> {
        let mut x = x;
        let mut target = self.req(n, 1, "target")?;
        let weight = self.inp(n, 2)?;
        let reduction = match a.string_or("reduction", "mean")?.as_str() {
            "none" => Reduction::None,
            "sum" => Reduction::Sum,
            "mean" => Reduction::Mean,
            other => return bad(format!("reduction '{other}' is not none, sum or mean")),
        };
        let ignore_index = a.int("ignore_index")?;
        if self.dtype(x) != DType::F32 {
            return unsup(format!(
                "{} of {} is not supported",
                n.op_type,
                self.dtype(x).name()
            ));
        }
        let (mut xs, mut ts) = (self.shape(x), self.shape(target));
        let tdt = self.dtype(target);
        if xs.len() < 2 || ts.len() + 1 != xs.len() || ts[0] != xs[0] || ts[1..] != xs[2..] {
            return bad(format!("input {xs:?} and target {ts:?} do not match"));
        }
        if !matches!(tdt, DType::I64 | DType::I32) {
            return bad(format!("target must be int32 or int64, is {}", tdt.name()));
        }
        // Several trailing axes as one ([N, C, d1·d2·...]), as few axes as TFLite's kernels
        // (and XNNPACK's) take; a per-element loss gets its shape back at the end.
        let target_shape = ts.clone();
        if xs.len() > 3 {
            let d = xs[2..].iter().product();
            xs = vec![xs[0], xs[1], d];
            ts = vec![ts[0], d];
            let flat = Op::Reshape { shape: xs.clone() };
            x = self.emit_tmp(flat, &[x], "input_3d")?;
            let flat = Op::Reshape { shape: ts.clone() };
            target = self.emit_tmp(flat, &[target], "target_2d")?;
        }
        let classes = xs[1];
        // [N, 1, d...] against [1, C, 1...]: the one-hot mask of each target.
        let mut t_shape = ts.clone();
        t_shape.insert(1, 1);
        let t1 = self.emit_tmp(Op::Reshape { shape: t_shape }, &[target], "target_1")?;
        let mut c_shape = vec![1; xs.len()];
        c_shape[1] = classes;
        let ids: Vec<i64> = (0..classes as i64).collect();
        let ids = ConstData::from_i64(&c_shape, ids).cast(tdt);
        let ids = self.add_const(&format!("{}/classes", self.cur), ids);
        let eq = Op::Compare {
            op: CompareOp::Equal,
        };
        let onehot = self.emit_tmp(eq, &[t1, ids], "onehot")?;
        let zero = self.scalar(0.0, DType::F32, "zero");
        let sum_classes = Op::Reduce {
            op: ReduceOp::Sum,
            axes: vec![1],
            keep_dims: false,
        };
        let picked = self.emit_tmp(Op::Where, &[onehot, x, zero], "picked_all")?;
        let picked = self.emit_tmp(sum_classes.clone(), &[picked], "picked")?;
        let mut loss = self.emit_tmp(Op::Unary(UnaryOp::Neg), &[picked], "neg_picked")?;

        let mut gathered = match weight {
            None => None,
            Some(w) => {
                if self.shape(w) != [classes] || self.dtype(w) != DType::F32 {
                    return bad(format!(
                        "weight must be float32 [{classes}], is {} {:?}",
                        self.dtype(w).name(),
                        self.shape(w)
                    ));
                }
                let w = self.emit_tmp(Op::Reshape { shape: c_shape }, &[w], "weight_c")?;
                let w = self.emit_tmp(Op::Where, &[onehot, w, zero], "weight_all")?;
                Some(self.emit_tmp(sum_classes, &[w], "weight_picked")?)
            }
        };
        if let Some(ii) = ignore_index {
            let ii = ConstData::from_i64(&[], vec![ii]).cast(tdt);
            let ii = self.add_const(&format!("{}/ignore_index", self.cur), ii);
            let ne = Op::Compare {
                op: CompareOp::NotEqual,
            };
            let valid = self.emit_tmp(ne, &[target, ii], "valid")?;
            loss = self.emit_tmp(Op::Where, &[valid, loss, zero], "loss_valid")?;
            let w = match gathered {
                Some(w) => w,
                None => self.scalar(1.0, DType::F32, "one"),
            };
            gathered = Some(self.emit_tmp(Op::Where, &[valid, w, zero], "weight_valid")?);
        }
        if let Some(w) = gathered {
            loss = self.emit_tmp(bin(BinaryOp::Mul), &[w, loss], "weighted")?;
        }
        let all = Op::Reduce {
            op: ReduceOp::Sum,
            axes: (0..ts.len()).collect(),
            keep_dims: false,
        };
        match (reduction, gathered) {
            (Reduction::None, _) if ts != target_shape => {
                let back = Op::Reshape {
                    shape: target_shape,
                };
                self.emit_to(back, &[loss], out)?;
            }
            (Reduction::None, _) => {
                self.bind(out, loss);
            }
            (Reduction::Sum, _) => {
                self.emit_to(all, &[loss], out)?;
            }
            (Reduction::Mean, Some(w)) => {
                let total = self.emit_tmp(all.clone(), &[loss], "total")?;
                let count = self.emit_tmp(all, &[w], "total_weight")?;
                self.emit_to(bin(BinaryOp::Div), &[total, count], out)?;
            }
            (Reduction::Mean, None) => {
                let mean = Op::Reduce {
                    op: ReduceOp::Mean,
                    axes: (0..ts.len()).collect(),
                    keep_dims: false,
                };
                self.emit_to(mean, &[loss], out)?;
            }
        }
        Ok(())
    }
}
