//! RotaryEmbedding (opset 23), written with IR ops as ONNX defines it: the first
//! `rotary_embedding_dim` values of each head split in two halves (or, `interleaved`, into
//! even and odd ones) x1, x2 and replaced by `cos·x1 - sin·x2` and `sin·x1 + cos·x2`, the cos
//! and sin of each position read from the caches (by `position_ids` when given).

use super::{bad, bin, unsup, Importer, R};
use crate::import::proto::Attrs;
use crate::ir::{BinaryOp, DType, Op, TensorId};
use tract_onnx::pb::NodeProto;

impl Importer<'_> {
    pub(super) fn rotary_embedding(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let cos = self.req(n, 1, "cos_cache")?;
        let sin = self.req(n, 2, "sin_cache")?;
        let positions = self.inp(n, 3)?;
        for id in [x, cos, sin] {
            if self.dtype(id) != DType::F32 {
                return unsup(format!(
                    "RotaryEmbedding of {} is not supported",
                    self.dtype(id).name()
                ));
            }
        }
        let xs = self.shape(x);
        let interleaved = a.int_or("interleaved", 0)? != 0;
        // Work on [batch, heads, seq, head_size] with caches [batch, 1, seq, half].
        let (b, heads, seq, head) = match xs[..] {
            [b, h, s, d] => (b, h, s, d),
            [b, s, hidden] => {
                let heads = match a.int("num_heads")? {
                    Some(h) if h > 0 && hidden % h as usize == 0 => h as usize,
                    other => {
                        return bad(format!(
                            "num_heads {other:?} must divide the hidden size {hidden}"
                        ))
                    }
                };
                (b, heads, s, hidden / heads)
            }
            _ => return bad(format!("X {xs:?} must be 3-D or 4-D")),
        };
        let x4 = if xs.len() == 3 {
            let split = vec![b, seq, heads, head];
            let t = self.emit_tmp(Op::Reshape { shape: split }, &[x], "heads_last")?;
            let perm = vec![0, 2, 1, 3];
            self.emit_tmp(Op::Transpose { perm }, &[t], "heads")?
        } else {
            x
        };
        let rot = match a.int_or("rotary_embedding_dim", 0)? {
            0 => head,
            r if r > 0 && r as usize <= head && r % 2 == 0 => r as usize,
            r => return bad(format!("rotary_embedding_dim {r} for head size {head}")),
        };
        let half = rot / 2;
        let (cos, sin) = match positions {
            Some(p) => {
                let p = self.wrap_negative(p, self.shape(cos)[0])?;
                let g = Op::Gather { axis: 0 };
                let c = self.emit_tmp(g.clone(), &[cos, p], "cos")?;
                (c, self.emit_tmp(g, &[sin, p], "sin")?)
            }
            None => (cos, sin),
        };
        for c in [cos, sin] {
            if self.shape(c) != [b, seq, half] {
                return bad(format!(
                    "cos/sin {:?} must be [{b}, {seq}, {half}]",
                    self.shape(c)
                ));
            }
        }
        let cache = vec![b, 1, seq, half];
        let cos = self.emit_tmp(
            Op::Reshape {
                shape: cache.clone(),
            },
            &[cos],
            "cos_4d",
        )?;
        let sin = self.emit_tmp(Op::Reshape { shape: cache }, &[sin], "sin_4d")?;
        let slice = |s: &mut Self, t: TensorId, from: usize, to: usize, what: &str| {
            let shape = s.shape(t);
            let r = shape.len();
            let mut begins = vec![0i64; r];
            let mut ends: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
            begins[r - 1] = from as i64;
            ends[r - 1] = to as i64;
            let op = Op::Slice {
                begins,
                ends,
                steps: vec![1; r],
            };
            s.emit_tmp(op, &[t], what)
        };
        let rotated = if rot < head {
            slice(self, x4, 0, rot, "rotated_part")?
        } else {
            x4
        };
        let pairs = vec![b, heads, seq, half, 2];
        let (x1, x2) = if interleaved {
            let p = self.emit_tmp(
                Op::Reshape {
                    shape: pairs.clone(),
                },
                &[rotated],
                "pairs",
            )?;
            let even = slice(self, p, 0, 1, "even")?;
            let odd = slice(self, p, 1, 2, "odd")?;
            let flat = vec![b, heads, seq, half];
            let x1 = self.emit_tmp(
                Op::Reshape {
                    shape: flat.clone(),
                },
                &[even],
                "x1",
            )?;
            (
                x1,
                self.emit_tmp(Op::Reshape { shape: flat }, &[odd], "x2")?,
            )
        } else {
            (
                slice(self, rotated, 0, half, "x1")?,
                slice(self, rotated, half, rot, "x2")?,
            )
        };
        let mul = bin(BinaryOp::Mul);
        let c1 = self.emit_tmp(mul.clone(), &[cos, x1], "cos_x1")?;
        let s2 = self.emit_tmp(mul.clone(), &[sin, x2], "sin_x2")?;
        let s1 = self.emit_tmp(mul.clone(), &[sin, x1], "sin_x1")?;
        let c2 = self.emit_tmp(mul, &[cos, x2], "cos_x2")?;
        let real = self.emit_tmp(bin(BinaryOp::Sub), &[c1, s2], "real")?;
        let imag = self.emit_tmp(bin(BinaryOp::Add), &[s1, c2], "imag")?;
        let mut y = if interleaved {
            let col = vec![b, heads, seq, half, 1];
            let r = self.emit_tmp(Op::Reshape { shape: col.clone() }, &[real], "real_col")?;
            let i = self.emit_tmp(Op::Reshape { shape: col }, &[imag], "imag_col")?;
            let p = self.emit_tmp(Op::Concat { axis: 4 }, &[r, i], "rotated_pairs")?;
            let shape = vec![b, heads, seq, rot];
            self.emit_tmp(Op::Reshape { shape }, &[p], "rotated")?
        } else {
            self.emit_tmp(Op::Concat { axis: 3 }, &[real, imag], "rotated")?
        };
        if rot < head {
            let rest = slice(self, x4, rot, head, "kept_part")?;
            y = self.emit_tmp(Op::Concat { axis: 3 }, &[y, rest], "joined")?;
        }
        let out = self.out0(n)?;
        if xs.len() == 3 {
            let perm = vec![0, 2, 1, 3];
            let t = self.emit_tmp(Op::Transpose { perm }, &[y], "seq_first")?;
            self.emit_to(Op::Reshape { shape: xs }, &[t], out)?;
        } else {
            self.emit_to(Op::Reshape { shape: xs }, &[y], out)?;
        }
        Ok(())
    }
}
