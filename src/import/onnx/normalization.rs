//! BatchNormalization, LayerNormalization, InstanceNormalization, RMSNormalization,
//! LpNormalization, and Dropout (an identity at inference).

use super::{bad, bin, unsup, Importer, R};
use crate::import::proto::{norm_axis, Attrs};
use crate::ir::{BinaryOp, ConstData, Layout, Op, ReduceOp, UnaryOp};
use tract_onnx::pb::NodeProto;

/// How to convert a model exported in training mode all the same.
const TRAINING_HINT: &str = "export the model in inference mode, or convert it as its \
    inference form with --training-as-inference";

impl Importer<'_> {
    /// Dropout in inference mode: the identity, and a mask of all ones. Training mode (opset
    /// 12's training_mode input true) with a non-zero ratio drops random elements, which a
    /// converted model cannot reproduce: unsupported unless converting training as inference.
    pub(super) fn dropout(&mut self, n: &NodeProto) -> R<()> {
        if !self.training_as_inference {
            if let Some(training) = self.const_input(n, 2, "training_mode")? {
                if training.to_i64_vec().iter().any(|&t| t != 0) {
                    let ratio = self.const_scalar(n, 1, "ratio")?.unwrap_or(0.5);
                    if ratio != 0.0 {
                        return unsup(format!(
                            "training_mode is true with ratio {ratio}: it drops random elements \
                             at run time; {TRAINING_HINT}"
                        ));
                    }
                }
            }
        }
        if let Some(mask) = n.output.get(1).filter(|m| self.used(m)) {
            let x = self.req(n, 0, "data")?;
            let shape = self.shape(x);
            // bool from opset 10, the data's type before.
            let dtype = if self.opset >= 10 {
                crate::ir::DType::Bool
            } else {
                self.dtype(x)
            };
            let count = shape.iter().product();
            let ones = ConstData::from_i64(&shape, vec![1; count]).cast(dtype);
            self.out_const(mask, ones)?;
        }
        self.alias(n)
    }

    /// LpNormalization: x / (sum of |x|^p along the axis)^(1/p), for p = 1 or 2 (0 where that
    /// norm is 0).
    pub(super) fn lp_norm(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let dt = self.dtype(x);
        if dt != crate::ir::DType::F32 {
            return unsup(format!("LpNormalization of {} is not supported", dt.name()));
        }
        let axis = norm_axis(a.int_or("axis", -1)?, self.shape(x).len())?;
        let sum = Op::Reduce {
            op: ReduceOp::Sum,
            axes: vec![axis],
            keep_dims: true,
        };
        let norm = match a.int_or("p", 2)? {
            1 => {
                let abs = self.emit_tmp(Op::Unary(UnaryOp::Abs), &[x], "abs")?;
                self.emit_tmp(sum, &[abs], "norm")?
            }
            2 => {
                let sq = self.emit_tmp(bin(BinaryOp::Mul), &[x, x], "squared")?;
                let ss = self.emit_tmp(sum, &[sq], "sum_squares")?;
                self.emit_tmp(Op::Unary(UnaryOp::Sqrt), &[ss], "norm")?
            }
            p => return bad(format!("p = {p} is not 1 or 2")),
        };
        // A zero norm gives 0, not 0/0.
        let divided = self.emit_tmp(bin(BinaryOp::Div), &[x, norm], "divided")?;
        let zero = self.scalar(0.0, dt, "zero");
        let eq = crate::ir::CompareOp::Equal;
        let zero_norm = self.emit_tmp(Op::Compare { op: eq }, &[norm, zero], "zero_norm")?;
        let out = self.out0(n)?;
        self.emit_to(Op::Where, &[zero_norm, zero, divided], out)?;
        Ok(())
    }

    /// InstanceNormalization: per-sample, per-channel normalization over the spatial axes,
    /// written out with Reduce/Sub/Mul/Add/Sqrt/Div.
    pub(super) fn instance_norm(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let scale = self.req(n, 1, "scale")?;
        let bias = self.req(n, 2, "B")?;
        let xs = self.shape(x);
        if xs.len() < 3 {
            return bad(format!("expects data of rank ≥ 3, got {xs:?}"));
        }
        let c = xs[1];
        for (id, what) in [(scale, "scale"), (bias, "B")] {
            if self.shape(id).iter().product::<usize>() != c {
                return bad(format!(
                    "{what} {:?} does not have {c} values",
                    self.shape(id)
                ));
            }
        }
        let dt = self.dtype(x);
        let epsilon = a.float_or("epsilon", 1e-5)?;
        let axes: Vec<usize> = (2..xs.len()).collect();
        let mean_op = Op::Reduce {
            op: ReduceOp::Mean,
            axes,
            keep_dims: true,
        };
        let mut cshape = vec![c];
        cshape.extend(std::iter::repeat_n(1, xs.len() - 2));
        let out = self.out0(n)?;
        let mean = self.emit_tmp(mean_op.clone(), &[x], "mean")?;
        let d = self.emit_tmp(bin(BinaryOp::Sub), &[x, mean], "centered")?;
        let sq = self.emit_tmp(bin(BinaryOp::Mul), &[d, d], "squared")?;
        let var = self.emit_tmp(mean_op, &[sq], "var")?;
        let eps = self.scalar(epsilon, dt, "epsilon");
        let ve = self.emit_tmp(bin(BinaryOp::Add), &[var, eps], "var_eps")?;
        let sd = self.emit_tmp(Op::Unary(UnaryOp::Sqrt), &[ve], "std")?;
        let nrm = self.emit_tmp(bin(BinaryOp::Div), &[d, sd], "normalized")?;
        let reshape = Op::Reshape { shape: cshape };
        let sc = self.emit_tmp(reshape.clone(), &[scale], "scale")?;
        let bi = self.emit_tmp(reshape, &[bias], "bias")?;
        let y = self.emit_tmp(bin(BinaryOp::Mul), &[nrm, sc], "scaled")?;
        self.emit_to(bin(BinaryOp::Add), &[y, bi], out)?;
        Ok(())
    }

    pub(super) fn batchnorm(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let xs = self.shape(x);
        if xs.len() < 2 {
            return bad(format!("expects X of rank ≥ 2 (N, C, ...), got {xs:?}"));
        }
        let c = xs[1];
        let mut ins = vec![x];
        for (i, what) in [(1, "scale"), (2, "B"), (3, "mean"), (4, "var")] {
            let id = self.req(n, i, what)?;
            if self.cst(id).is_none() {
                return bad("scale, bias, mean and var must be constant");
            }
            if self.shape(id) != [c] {
                return bad(format!(
                    "{what} has shape {:?}, expected [{c}] (X's channels)",
                    self.shape(id)
                ));
            }
            ins.push(id);
        }
        if a.int_or("spatial", 1)? == 0 {
            return unsup("spatial=0 is not supported");
        }
        let epsilon = a.float_or("epsilon", 1e-5)?;
        // Training mode normalizes with the batch's own statistics (and outputs the updated
        // running ones): opset 14 says so with training_mode=1, opsets 7-13 by asking for more
        // outputs than Y.
        let extra: Vec<&String> = n.output.iter().skip(1).filter(|o| !o.is_empty()).collect();
        if a.int_or("training_mode", 0)? != 0 || !extra.is_empty() {
            if !self.training_as_inference {
                let why = match extra.first() {
                    Some(o) if a.int_or("training_mode", 0)? == 0 => {
                        format!("the training-mode output '{o}' (batch statistics)")
                    }
                    _ => "training_mode=1 (normalizing with the batch's statistics)".to_string(),
                };
                return unsup(format!("{why} is not supported; {TRAINING_HINT}"));
            }
            for o in &extra {
                if self.node_uses.get(o.as_str()).copied().unwrap_or(0) > 0 {
                    return unsup(format!(
                        "the training-mode output '{o}' is used by another node"
                    ));
                }
            }
            eprintln!(
                "warning: {}: node '{}' (BatchNormalization): training-mode batch normalization \
                 imported as inference (uses the running mean and variance)",
                self.file, self.cur
            );
            for o in extra {
                if self.graph_outputs.contains(o.as_str()) {
                    eprintln!(
                        "warning: {}: graph output '{o}' (a training statistic of '{}') dropped",
                        self.file, self.cur
                    );
                    self.dropped_outputs.insert(o.clone());
                }
            }
        }
        let out = self.out0(n)?;
        self.emit_to(
            Op::BatchNorm {
                epsilon,
                layout: Layout::Nchw,
            },
            &ins,
            out,
        )?;
        Ok(())
    }

    /// RMSNormalization (opset 23): X / sqrt(mean(X², axes axis..) + epsilon) * scale.
    pub(super) fn rmsnorm(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let scale = self.req(n, 1, "scale")?;
        let dt = self.dtype(x);
        if dt != crate::ir::DType::F32 {
            return unsup(format!(
                "RMSNormalization of {} is not supported",
                dt.name()
            ));
        }
        let rank = self.shape(x).len();
        let axis = norm_axis(a.int_or("axis", -1)?, rank)?;
        let epsilon = a.float_or("epsilon", 1e-5)?;
        let sq = self.emit_tmp(bin(BinaryOp::Mul), &[x, x], "squared")?;
        let mean = Op::Reduce {
            op: ReduceOp::Mean,
            axes: (axis..rank).collect(),
            keep_dims: true,
        };
        let ms = self.emit_tmp(mean, &[sq], "mean_square")?;
        let eps = self.scalar(epsilon, dt, "epsilon");
        let me = self.emit_tmp(bin(BinaryOp::Add), &[ms, eps], "mean_square_eps")?;
        let rms = self.emit_tmp(Op::Unary(UnaryOp::Sqrt), &[me], "rms")?;
        let nrm = self.emit_tmp(bin(BinaryOp::Div), &[x, rms], "normalized")?;
        let out = self.out0(n)?;
        self.emit_to(bin(BinaryOp::Mul), &[nrm, scale], out)?;
        Ok(())
    }

    pub(super) fn layernorm(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let scale = self.req(n, 1, "Scale")?;
        let b = self.inp(n, 2)?;
        let rank = self.shape(x).len();
        let axis = norm_axis(a.int_or("axis", -1)?, rank)?;
        let epsilon = a.float_or("epsilon", 1e-5)?;
        if n.output.iter().skip(1).any(|o| self.used(o)) {
            return self.layernorm_with_statistics(n, [x, scale], b, axis, epsilon);
        }
        let mut ins = vec![x, scale];
        ins.extend(b);
        let out = self.out0(n)?;
        self.emit_to(Op::LayerNorm { axis, epsilon }, &ins, out)?;
        Ok(())
    }

    /// LayerNormalization whose Mean and InvStdDev outputs are used: written out so that both
    /// are tensors (keeping the reduced axes as 1s, as ONNX shapes them).
    fn layernorm_with_statistics(
        &mut self,
        n: &NodeProto,
        [x, scale]: [crate::ir::TensorId; 2],
        bias: Option<crate::ir::TensorId>,
        axis: usize,
        epsilon: f32,
    ) -> R<()> {
        let dt = self.dtype(x);
        if dt != crate::ir::DType::F32 {
            return unsup(format!(
                "LayerNormalization of {} is not supported",
                dt.name()
            ));
        }
        let mean_op = Op::Reduce {
            op: ReduceOp::Mean,
            axes: (axis..self.shape(x).len()).collect(),
            keep_dims: true,
        };
        let named = |s: &mut Self, i: usize, what: &str| match n.output.get(i) {
            Some(o) if !o.is_empty() => o.clone(),
            _ => s.tmp(what),
        };
        let mean_name = named(self, 1, "mean");
        let inv_name = named(self, 2, "inv_std_dev");
        let mean = self.emit(mean_op.clone(), &[x], vec![mean_name.clone()])?[0];
        self.bind(&mean_name, mean);
        let d = self.emit_tmp(bin(BinaryOp::Sub), &[x, mean], "centered")?;
        let sq = self.emit_tmp(bin(BinaryOp::Mul), &[d, d], "squared")?;
        let var = self.emit_tmp(mean_op, &[sq], "var")?;
        let eps = self.scalar(epsilon, dt, "epsilon");
        let ve = self.emit_tmp(bin(BinaryOp::Add), &[var, eps], "var_eps")?;
        let sd = self.emit_tmp(Op::Unary(UnaryOp::Sqrt), &[ve], "std")?;
        let one = self.scalar(1.0, dt, "one");
        let inv = self.emit(bin(BinaryOp::Div), &[one, sd], vec![inv_name.clone()])?[0];
        self.bind(&inv_name, inv);
        let nrm = self.emit_tmp(bin(BinaryOp::Mul), &[d, inv], "normalized")?;
        let out = self.out0(n)?;
        match bias {
            None => self.emit_to(bin(BinaryOp::Mul), &[nrm, scale], out)?,
            Some(b) => {
                let y = self.emit_tmp(bin(BinaryOp::Mul), &[nrm, scale], "scaled")?;
                self.emit_to(bin(BinaryOp::Add), &[y, b], out)?
            }
        };
        Ok(())
    }
}
