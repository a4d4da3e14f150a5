//! Gemm and MatMul.

use super::{bad, bin, Importer, R};
use crate::import::proto::Attrs;
use crate::ir::{Activation, BinaryOp, ConstData, DType, Op, TensorId};
use tract_onnx::pb::NodeProto;

impl Importer<'_> {
    pub(super) fn gemm(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let am = self.req(n, 0, "A")?;
        let bm = self.req(n, 1, "B")?;
        let c = self.inp(n, 2)?;
        let alpha = a.float_or("alpha", 1.0)?;
        let beta = a.float_or("beta", 1.0)?;
        let trans_a = a.int_or("transA", 0)? != 0;
        let trans_b = a.int_or("transB", 0)? != 0;
        let (sa, sb) = (self.shape(am), self.shape(bm));
        if sa.len() != 2 || sb.len() != 2 {
            return bad(format!("A {sa:?} and B {sb:?} must be 2-D"));
        }
        let nn = if trans_b { sb[0] } else { sb[1] };
        let out = self.out0(n)?;
        let c_const = c.and_then(|c| self.cst(c).cloned());
        // beta * C folded into a [N] bias when C is constant and broadcasts along rows.
        let bias_vec = match (&c_const, c) {
            (Some(cd), Some(cid)) => {
                let cs = self.shape(cid);
                let row = cd.len() == 1 || cs == [nn] || cs == [1, nn];
                row.then(|| {
                    let v = cd.to_f32_vec();
                    let v: Vec<f32> = (0..nn).map(|j| beta * v[j % v.len()]).collect();
                    ConstData::from_f32(&[nn], v)
                })
            }
            _ => None,
        };
        let post_add = c.is_some() && bias_vec.is_none();
        let base = if post_add { None } else { Some(out) };
        let y = if let Some(bd) = self.cst(bm).filter(|_| self.dtype(am) == DType::F32) {
            let mut wd = if trans_b {
                bd.cast(DType::F32)
            } else {
                bd.cast(DType::F32).permute(&[1, 0])
            };
            if alpha != 1.0 {
                if let ConstData::F32(arr) = &mut wd {
                    arr.mapv_inplace(|v| v * alpha);
                }
            }
            let wname = format!("{}_fc_weights", self.g.tensors[bm].name);
            let w = self.add_const(&wname, wd);
            // A dequantized weight keeps its parameters (axis moved by the transpose).
            if alpha == 1.0 {
                let perm: &[usize] = if trans_b { &[0, 1] } else { &[1, 0] };
                self.g.tensors[w].quant =
                    self.g.tensors[bm].quant.as_ref().map(|q| q.permuted(perm));
            }
            let x = if trans_a {
                self.emit_tmp(Op::Transpose { perm: vec![1, 0] }, &[am], "transpose_a")?
            } else {
                am
            };
            let mut ins = vec![x, w];
            if let Some(bv) = bias_vec.clone() {
                let bname = format!("{}_fc_bias", self.cur);
                ins.push(self.add_const(&bname, bv));
            }
            let op = Op::FullyConnected {
                activation: Activation::None,
            };
            match base {
                Some(o) => self.emit_to(op, &ins, o)?,
                None => self.emit_tmp(op, &ins, "fc")?,
            }
        } else {
            let op = Op::MatMul {
                transpose_a: trans_a,
                transpose_b: trans_b,
            };
            let scaled = alpha != 1.0;
            let last = base.filter(|_| !scaled && c.is_none());
            let mut y = match last {
                Some(o) => self.emit_to(op, &[am, bm], o)?,
                None => self.emit_tmp(op, &[am, bm], "matmul")?,
            };
            if scaled {
                let k = ConstData::scalar_f32(alpha).cast(self.dtype(y));
                let k = self.add_const(&format!("{}/alpha", self.cur), k);
                y = if c.is_none() {
                    self.emit_to(bin(BinaryOp::Mul), &[y, k], out)?
                } else {
                    self.emit_tmp(bin(BinaryOp::Mul), &[y, k], "scaled")?
                };
            }
            if let (Some(bv), Some(_)) = (bias_vec, c) {
                let b = self.add_const(&format!("{}/bias", self.cur), bv);
                self.emit_to(bin(BinaryOp::Add), &[y, b], out)?;
                return Ok(());
            }
            y
        };
        if post_add {
            let cid = c.expect("post_add implies C");
            let cc = if beta == 1.0 {
                cid
            } else if let Some(cd) = c_const {
                let scaled = crate::ir::eval::binary(
                    BinaryOp::Mul,
                    &cd,
                    &ConstData::scalar_f32(beta).cast(cd.dtype()),
                )?;
                self.add_const(&format!("{}/beta_c", self.cur), scaled)
            } else {
                let k = ConstData::scalar_f32(beta).cast(self.dtype(cid));
                let k = self.add_const(&format!("{}/beta", self.cur), k);
                self.emit_tmp(bin(BinaryOp::Mul), &[cid, k], "beta_c")?
            };
            self.emit_to(bin(BinaryOp::Add), &[y, cc], out)?;
        }
        Ok(())
    }

    pub(super) fn matmul(&mut self, n: &NodeProto) -> R<()> {
        let am = self.req(n, 0, "A")?;
        let bm = self.req(n, 1, "B")?;
        let (sa, sb) = (self.shape(am), self.shape(bm));
        if sa.is_empty() || sb.is_empty() {
            return bad(format!("MatMul of a scalar ({sa:?} x {sb:?})"));
        }
        let out = self.out0(n)?;
        if sa.len() == 1 || sb.len() == 1 {
            return self.matmul_vector(am, bm, out);
        }
        let b_const = self.cst(bm).cloned();
        if let Some(bd) = b_const.filter(|_| sb.len() == 2 && self.dtype(am) == DType::F32) {
            if self.cst(am).is_none() {
                let wname = format!("{}_T", self.g.tensors[bm].name);
                let w = self.add_const(&wname, bd.cast(DType::F32).permute(&[1, 0]));
                self.g.tensors[w].quant = self.g.tensors[bm]
                    .quant
                    .as_ref()
                    .map(|q| q.permuted(&[1, 0]));
                self.emit_to(
                    Op::FullyConnected {
                        activation: Activation::None,
                    },
                    &[am, w],
                    out,
                )?;
                return Ok(());
            }
        }
        self.emit_to(
            Op::MatMul {
                transpose_a: false,
                transpose_b: false,
            },
            &[am, bm],
            out,
        )?;
        Ok(())
    }

    /// MatMul with a 1-D operand, as numpy defines it: a vector `a` is a [1, K] matrix and a
    /// vector `b` a [K, 1] one, and the added axis is removed from the product.
    fn matmul_vector(&mut self, am: TensorId, bm: TensorId, out: &str) -> R<()> {
        let (sa, sb) = (self.shape(am), self.shape(bm));
        let a2 = if sa.len() == 1 {
            let shape = vec![1, sa[0]];
            self.emit_tmp(Op::Reshape { shape }, &[am], "a_row")?
        } else {
            am
        };
        let b2 = if sb.len() == 1 {
            let shape = vec![sb[0], 1];
            self.emit_tmp(Op::Reshape { shape }, &[bm], "b_column")?
        } else {
            bm
        };
        let op = Op::MatMul {
            transpose_a: false,
            transpose_b: false,
        };
        let y = self.emit_tmp(op, &[a2, b2], "matmul")?;
        let mut shape = self.shape(y);
        let r = shape.len();
        if sb.len() == 1 {
            shape.remove(r - 1);
        }
        if sa.len() == 1 {
            shape.remove(r - 2);
        }
        self.emit_to(Op::Reshape { shape }, &[y], out)?;
        Ok(())
    }
}
