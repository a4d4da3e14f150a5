//! ScatterElements (and the older Scatter), ScatterND and GatherND, written with IR ops.
//!
//! The data is seen as `[B, L, A]` (L the scattered positions) and the updates as
//! `[B, I, 1, A]` with a one-hot mask `[B, I, L, A]` of the position each update goes to. Each
//! position takes the sum (`none`, `add`), product (`mul`), maximum or minimum of the updates
//! aimed at it (one term when the indices do not repeat; ONNX leaves repeated indices with
//! reduction `none` undefined) and is combined with the data as the reduction says; positions
//! no update aims at keep the data.

use super::{bad, bin, unsup, Importer, R};
use crate::import::proto::{norm_axis, Attrs};
use crate::ir::{BinaryOp, CompareOp, ConstData, DType, Op, ReduceOp, TensorId};
use tract_onnx::pb::NodeProto;

#[derive(Clone, Copy, PartialEq)]
enum Reduction {
    None,
    Add,
    Mul,
    Max,
    Min,
}

impl Importer<'_> {
    fn scatter_reduction(a: &Attrs) -> R<Reduction> {
        Ok(match a.string_or("reduction", "none")?.as_str() {
            "none" => Reduction::None,
            "add" => Reduction::Add,
            "mul" => Reduction::Mul,
            "max" => Reduction::Max,
            "min" => Reduction::Min,
            other => return bad(format!("reduction '{other}' is not none/add/mul/max/min")),
        })
    }

    fn float_scatter_inputs(&mut self, n: &NodeProto) -> R<(TensorId, TensorId, TensorId)> {
        let x = self.req(n, 0, "data")?;
        let idx = self.req(n, 1, "indices")?;
        let upd = self.req(n, 2, "updates")?;
        if self.dtype(x) != DType::F32 || self.dtype(upd) != DType::F32 {
            return unsup(format!(
                "{} of {} is not supported (only float32)",
                n.op_type,
                self.dtype(x).name()
            ));
        }
        if matches!(self.dtype(idx), DType::F32 | DType::F16 | DType::Bool) {
            return bad("indices must be integers");
        }
        Ok((x, idx, upd))
    }

    /// ScatterElements / Scatter: `out[.., idx[.., i, ..], ..] = updates[.., i, ..]` along
    /// `axis`. The indices must span the data on the other axes.
    pub(super) fn scatter_elements(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let (x, idx, upd) = self.float_scatter_inputs(n)?;
        let reduction = Self::scatter_reduction(a)?;
        let (xs, is) = (self.shape(x), self.shape(idx));
        if xs.len() != is.len() || self.shape(upd) != is {
            return bad(format!(
                "data {xs:?}, indices {is:?} and updates {:?} do not match",
                self.shape(upd)
            ));
        }
        let axis = norm_axis(a.int_or("axis", 0)?, xs.len())?;
        if (0..xs.len()).any(|d| d != axis && is[d] != xs[d]) {
            return unsup(format!(
                "indices {is:?} cover part of data {xs:?} off axis {axis}"
            ));
        }
        let len = xs[axis];
        let before: usize = xs[..axis].iter().product();
        let after: usize = xs[axis + 1..].iter().product();
        let idx = self.wrap_negative(idx, len)?;
        let shape = vec![before, is[axis], 1, after];
        let idx = self.emit_tmp(Op::Reshape { shape }, &[idx], "indices_4d")?;
        let pos: Vec<i64> = (0..len as i64).collect();
        let pos = ConstData::from_i64(&[1, 1, len, 1], pos).cast(self.dtype(idx));
        let pos = self.add_const(&format!("{}/positions", self.cur), pos);
        let eq = Op::Compare {
            op: CompareOp::Equal,
        };
        let mask = self.emit_tmp(eq, &[idx, pos], "aimed")?;
        let shape = vec![before, is[axis], 1, after];
        let upd = self.emit_tmp(Op::Reshape { shape }, &[upd], "updates_4d")?;
        let shape = vec![before, len, after];
        let x3 = self.emit_tmp(Op::Reshape { shape }, &[x], "data_3d")?;
        let y = self.scatter_combine(x3, mask, upd, reduction)?;
        let out = self.out0(n)?;
        self.emit_to(Op::Reshape { shape: xs }, &[y], out)?;
        Ok(())
    }

    /// ScatterND: the update slices `updates[q]` go to `data[indices[q]]`, an index of the
    /// first `k` axes (its linear position compared in float32: exact below 2^24 positions).
    pub(super) fn scatter_nd(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let (x, idx, upd) = self.float_scatter_inputs(n)?;
        let reduction = Self::scatter_reduction(a)?;
        let (xs, is, us) = (self.shape(x), self.shape(idx), self.shape(upd));
        let Some(&k) = is.last() else {
            return bad("indices must have a last axis");
        };
        if k == 0 || k > xs.len() || us[..] != [&is[..is.len() - 1], &xs[k..]].concat()[..] {
            return bad(format!(
                "data {xs:?}, indices {is:?} and updates {us:?} do not match"
            ));
        }
        let places: usize = xs[..k].iter().product();
        if places >= 1 << 24 {
            return unsup(format!(
                "{places} positions: more than float32 counts exactly"
            ));
        }
        let slice: usize = xs[k..].iter().product();
        let count: usize = is[..is.len() - 1].iter().product();
        let lin = self.nd_positions(idx, count, &xs[..k])?;
        let shape = vec![1, count, 1, 1];
        let lin = self.emit_tmp(Op::Reshape { shape }, &[lin], "position_4d")?;
        let pos: Vec<f32> = (0..places).map(|p| p as f32).collect();
        let pos = ConstData::from_f32(&[1, 1, places, 1], pos);
        let pos = self.add_const(&format!("{}/positions", self.cur), pos);
        let eq = Op::Compare {
            op: CompareOp::Equal,
        };
        let mask = self.emit_tmp(eq, &[lin, pos], "aimed")?;
        let shape = vec![1, count, 1, slice];
        let upd = self.emit_tmp(Op::Reshape { shape }, &[upd], "updates_4d")?;
        let shape = vec![1, places, slice];
        let x3 = self.emit_tmp(Op::Reshape { shape }, &[x], "data_3d")?;
        let y = self.scatter_combine(x3, mask, upd, reduction)?;
        let out = self.out0(n)?;
        self.emit_to(Op::Reshape { shape: xs }, &[y], out)?;
        Ok(())
    }

    /// The linear positions (float32, row-major over `dims`) of `rows` index tuples of
    /// `dims.len()` values each, negative values counted from the end of their axis.
    fn nd_positions(&mut self, idx: TensorId, rows: usize, dims: &[usize]) -> R<TensorId> {
        let k = dims.len();
        let idx = self.emit_tmp(Op::Cast { to: DType::F32 }, &[idx], "indices_f")?;
        let lens: Vec<f32> = dims.iter().map(|&d| d as f32).collect();
        let lens = self.add_const(
            &format!("{}/dims", self.cur),
            ConstData::from_f32(&[1, k], lens),
        );
        let zero = self.scalar(0.0, DType::F32, "zero");
        let shape = vec![rows, k];
        let idx = self.emit_tmp(Op::Reshape { shape }, &[idx], "indices_2d")?;
        let less = Op::Compare {
            op: CompareOp::Less,
        };
        let negative = self.emit_tmp(less, &[idx, zero], "negative")?;
        let wrapped = self.emit_tmp(bin(BinaryOp::Add), &[idx, lens], "wrapped")?;
        let idx = self.emit_tmp(Op::Where, &[negative, wrapped, idx], "index")?;
        let mut strides = vec![1.0f32; k];
        for j in (0..k.saturating_sub(1)).rev() {
            strides[j] = strides[j + 1] * dims[j + 1] as f32;
        }
        let strides = self.add_const(
            &format!("{}/strides", self.cur),
            ConstData::from_f32(&[1, k], strides),
        );
        let lin = self.emit_tmp(bin(BinaryOp::Mul), &[idx, strides], "offsets")?;
        let sum = Op::Reduce {
            op: ReduceOp::Sum,
            axes: vec![1],
            keep_dims: false,
        };
        self.emit_tmp(sum, &[lin], "position")
    }

    /// GatherND: the slices `data[b][indices[b, q]]` (batch axes `b`, index tuples of the
    /// first `k` other axes), summed over a one-hot mask of the positions (one nonzero term;
    /// positions compared in float32: exact below 2^24).
    pub(super) fn gather_nd(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "data")?;
        let idx = self.req(n, 1, "indices")?;
        if matches!(self.dtype(idx), DType::F32 | DType::F16 | DType::Bool) {
            return bad("indices must be integers");
        }
        if self.dtype(x) != DType::F32 {
            // (The selection sums over positions: TFLite's SUM has no integer kernel here.)
            return unsup(format!(
                "GatherND of {} is not supported (only float32)",
                self.dtype(x).name()
            ));
        }
        let (xs, is) = (self.shape(x), self.shape(idx));
        let bd = usize::try_from(a.int_or("batch_dims", 0)?).unwrap_or(usize::MAX);
        let Some(&k) = is.last() else {
            return bad("indices must have a last axis");
        };
        if bd >= is.len() || k == 0 || bd + k > xs.len() || xs[..bd] != is[..bd] {
            return bad(format!(
                "data {xs:?} and indices {is:?} do not fit batch_dims {bd}"
            ));
        }
        let batch: usize = xs[..bd].iter().product();
        let places: usize = xs[bd..bd + k].iter().product();
        if places >= 1 << 24 {
            return unsup(format!(
                "{places} positions: more than float32 counts exactly"
            ));
        }
        let slice: usize = xs[bd + k..].iter().product();
        let count: usize = is[bd..is.len() - 1].iter().product();
        let lin = self.nd_positions(idx, batch * count, &xs[bd..bd + k])?;
        let shape = vec![batch, count, 1, 1];
        let lin = self.emit_tmp(Op::Reshape { shape }, &[lin], "position_4d")?;
        let pos: Vec<f32> = (0..places).map(|p| p as f32).collect();
        let pos = ConstData::from_f32(&[1, 1, places, 1], pos);
        let pos = self.add_const(&format!("{}/positions", self.cur), pos);
        let eq = Op::Compare {
            op: CompareOp::Equal,
        };
        let mask = self.emit_tmp(eq, &[lin, pos], "picked")?;
        let shape = vec![batch, 1, places, slice];
        let x4 = self.emit_tmp(Op::Reshape { shape }, &[x], "data_4d")?;
        let zero = self.scalar(0.0, DType::F32, "zero");
        let sel = self.emit_tmp(Op::Where, &[mask, x4, zero], "selected")?;
        let sum = Op::Reduce {
            op: ReduceOp::Sum,
            axes: vec![2],
            keep_dims: false,
        };
        let picked = self.emit_tmp(sum, &[sel], "gathered")?;
        let shape = [&is[..is.len() - 1], &xs[bd + k..]].concat();
        let out = self.out0(n)?;
        self.emit_to(Op::Reshape { shape }, &[picked], out)?;
        Ok(())
    }

    /// The data `[B, L, A]` with the updates `[B, I, 1, A]` that `mask` (`[B, I, L, A]`,
    /// broadcast) aims at each position combined in.
    fn scatter_combine(
        &mut self,
        x3: TensorId,
        mask: TensorId,
        upd: TensorId,
        reduction: Reduction,
    ) -> R<TensorId> {
        let over_updates = |op| Op::Reduce {
            op,
            axes: vec![1],
            keep_dims: false,
        };
        let (neutral, op) = match reduction {
            Reduction::None | Reduction::Add => (0.0, ReduceOp::Sum),
            Reduction::Mul => (1.0, ReduceOp::Prod),
            Reduction::Max => (f32::NEG_INFINITY, ReduceOp::Max),
            Reduction::Min => (f32::INFINITY, ReduceOp::Min),
        };
        let neutral = self.scalar(neutral, DType::F32, "neutral");
        let aimed = self.emit_tmp(Op::Where, &[mask, upd, neutral], "aimed_updates")?;
        let merged = self.emit_tmp(over_updates(op), &[aimed], "merged")?;
        match reduction {
            Reduction::Add => return self.emit_tmp(bin(BinaryOp::Add), &[x3, merged], "added"),
            Reduction::Mul => {
                return self.emit_tmp(bin(BinaryOp::Mul), &[x3, merged], "multiplied")
            }
            _ => {}
        }
        // Where some update is aimed: its value, or its max/min with the data.
        let one = self.scalar(1.0, DType::F32, "one");
        let zero = self.scalar(0.0, DType::F32, "zero");
        let hits = self.emit_tmp(Op::Where, &[mask, one, zero], "hits")?;
        let hit = self.emit_tmp(over_updates(ReduceOp::Max), &[hits], "hit_count")?;
        let gt = Op::Compare {
            op: CompareOp::Greater,
        };
        let hit = self.emit_tmp(gt, &[hit, zero], "hit")?;
        let value = match reduction {
            Reduction::Max => self.emit_tmp(bin(BinaryOp::Max), &[x3, merged], "max")?,
            Reduction::Min => self.emit_tmp(bin(BinaryOp::Min), &[x3, merged], "min")?,
            _ => merged,
        };
        self.emit_tmp(Op::Where, &[hit, value, x3], "scattered")
    }
}
