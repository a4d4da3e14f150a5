//! Concat, Split, Slice, Gather, GatherElements, Compress, ReverseSequence, OneHot, Pad and
//! CenterCropPad.

use super::{bad, bin, unsup, Importer, R};
use crate::import::proto::{dim_values, norm_axis, size_values, Attrs};
use crate::ir::{BinaryOp, CompareOp, ConstData, DType, Op, PadMode, ReduceOp, TensorId};
use std::collections::HashSet;
use tract_onnx::pb::NodeProto;

impl Importer<'_> {
    pub(super) fn concat(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let mut ins = Vec::new();
        for i in 0..n.input.len() {
            if let Some(id) = self.inp(n, i)? {
                ins.push(id);
            }
        }
        let Some(&first) = ins.first() else {
            return bad("needs at least one input");
        };
        let Some(axis) = a.int("axis")? else {
            return bad("axis is required");
        };
        let axis = norm_axis(axis, self.shape(first).len())?;
        // Inputs empty along the axis add nothing (an empty Split piece, an empty shape
        // vector); dropped, they leave no zero-element tensor behind.
        let non_empty: Vec<TensorId> = ins
            .iter()
            .copied()
            .filter(|&id| self.shape(id).get(axis) != Some(&0))
            .collect();
        if !non_empty.is_empty() {
            ins = non_empty;
        }
        let first = ins[0];
        let out = self.out0(n)?;
        if ins.len() == 1 {
            self.bind(out, first);
            return Ok(());
        }
        self.emit_to(Op::Concat { axis }, &ins, out)?;
        Ok(())
    }

    pub(super) fn split(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let xs = self.shape(x);
        let axis = norm_axis(a.int_or("axis", 0)?, xs.len())?;
        let d = xs[axis];
        let k = n.output.len();
        if k == 0 {
            return bad("the node has no outputs");
        }
        let split = if self.opset >= 13 {
            self.const_ints(n, 1, "split")?
        } else {
            a.ints("split")?
        };
        let sizes = match split.filter(|v| !v.is_empty()) {
            Some(v) => {
                if v.len() != k {
                    return bad(format!("split {v:?} does not match {k} outputs"));
                }
                dim_values(&v, "split size")?
            }
            None => {
                if self.opset >= 18 && a.has("num_outputs") {
                    let chunk = d.div_ceil(k);
                    let sizes: Vec<usize> = (0..k)
                        .map(|i| d.saturating_sub(i * chunk).min(chunk))
                        .collect();
                    if sizes.contains(&0) && d >= k {
                        return bad(format!("cannot split {d} into {k} chunks"));
                    }
                    sizes
                } else {
                    if !d.is_multiple_of(k) {
                        return bad(format!("cannot split {d} evenly into {k} outputs"));
                    }
                    vec![d / k; k]
                }
            }
        };
        let names: Vec<String> = n
            .output
            .iter()
            .map(|o| {
                if o.is_empty() {
                    self.tmp("split")
                } else {
                    o.clone()
                }
            })
            .collect();
        let ids = self.emit(Op::Split { axis, sizes }, &[x], names)?;
        for (o, id) in n.output.iter().zip(ids) {
            self.bind(o, id);
        }
        Ok(())
    }

    pub(super) fn slice(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "data")?;
        let xs = self.shape(x);
        let rank = xs.len();
        let (starts, ends, axes, steps) = if self.opset >= 10 {
            let Some(s) = self.const_ints(n, 1, "starts")? else {
                return bad("starts is required");
            };
            let Some(e) = self.const_ints(n, 2, "ends")? else {
                return bad("ends is required");
            };
            (
                s,
                e,
                self.const_ints(n, 3, "axes")?,
                self.const_ints(n, 4, "steps")?,
            )
        } else {
            let (Some(s), Some(e)) = (a.ints("starts")?, a.ints("ends")?) else {
                return bad("starts and ends are required");
            };
            (s, e, a.ints("axes")?, None)
        };
        let k = starts.len();
        let axes = axes.unwrap_or_else(|| (0..k as i64).collect());
        let steps = steps.unwrap_or_else(|| vec![1; k]);
        if ends.len() != k || axes.len() != k || steps.len() != k {
            return bad("starts, ends, axes and steps must have the same length");
        }
        let mut begins = vec![0i64; rank];
        let mut endv: Vec<i64> = xs.iter().map(|&d| d as i64).collect();
        let mut stepv = vec![1i64; rank];
        let mut seen = HashSet::new();
        for i in 0..k {
            let ax = norm_axis(axes[i], rank)?;
            if !seen.insert(ax) {
                return bad(format!("axis {} is sliced twice", axes[i]));
            }
            if steps[i] == 0 {
                return bad("slice step 0");
            }
            // Steps longer than the axis take one element, like a step of the axis length.
            let lim = (xs[ax] as i64).max(1);
            begins[ax] = starts[i];
            endv[ax] = ends[i];
            stepv[ax] = steps[i].clamp(-lim, lim);
        }
        let out = self.out0(n)?;
        self.emit_to(
            Op::Slice {
                begins,
                ends: endv,
                steps: stepv,
            },
            &[x],
            out,
        )?;
        Ok(())
    }

    pub(super) fn gather(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "data")?;
        let mut idx = self.req(n, 1, "indices")?;
        let xs = self.shape(x);
        let axis = norm_axis(a.int_or("axis", 0)?, xs.len())?;
        if matches!(self.dtype(idx), DType::F32 | DType::F16 | DType::Bool) {
            return bad("indices must be integers");
        }
        if let Some(d) = self.cst(idx) {
            let dim = xs[axis] as i64;
            let v = d
                .to_i64_vec()
                .into_iter()
                .map(|i| {
                    let j = if i < 0 { i + dim } else { i };
                    if (0..dim).contains(&j) {
                        Ok(j)
                    } else {
                        Err(format!(
                            "index {i} is out of range for axis {axis} of length {dim}"
                        ))
                    }
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let nd = ConstData::from_i64(&d.shape(), v);
            if Some(&nd) != self.cst(idx) {
                let name = format!("{}_normalized", self.g.tensors[idx].name);
                idx = self.add_const(&name, nd);
            }
        } else {
            // ONNX counts a negative index from the end; TFLite GATHER rejects it.
            idx = self.wrap_negative(idx, xs[axis])?;
        }
        let out = self.out0(n)?;
        self.emit_to(Op::Gather { axis }, &[x, idx], out)?;
        Ok(())
    }

    /// Run-time indices along an axis of length `dim`, a negative one counted from the end:
    /// `indices < 0 ? indices + dim : indices` (as they are when they cannot be negative).
    pub(super) fn wrap_negative(&mut self, idx: TensorId, dim: usize) -> R<TensorId> {
        if self.dtype(idx) == DType::U8 || self.never_negative(idx) {
            return Ok(idx);
        }
        let dt = self.dtype(idx);
        let zero = ConstData::from_i64(&[], vec![0]).cast(dt);
        let zero = self.add_const(&format!("{}/zero", self.cur), zero);
        let dim = ConstData::from_i64(&[], vec![dim as i64]).cast(dt);
        let dim = self.add_const(&format!("{}/axis_length", self.cur), dim);
        let negative = self.emit_tmp(
            Op::Compare {
                op: CompareOp::Less,
            },
            &[idx, zero],
            "negative_index",
        )?;
        let wrapped = self.emit_tmp(bin(BinaryOp::Add), &[idx, dim], "wrapped_index")?;
        self.emit_tmp(Op::Where, &[negative, wrapped, idx], "index")
    }

    /// GatherElements: `out[.., i, ..] = data[.., indices[.., i, ..], ..]` along `axis`, as a
    /// sum over that axis of the data where the position equals the index and 0 elsewhere
    /// (one nonzero term: exact). Other axes of the data are cut to the indices' extent.
    pub(super) fn gather_elements(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let mut x = self.req(n, 0, "data")?;
        let idx = self.req(n, 1, "indices")?;
        let (xs, is) = (self.shape(x), self.shape(idx));
        if xs.len() != is.len() || xs.is_empty() {
            return bad(format!("data {xs:?} and indices {is:?} must have one rank"));
        }
        let axis = norm_axis(a.int_or("axis", 0)?, xs.len())?;
        if matches!(self.dtype(idx), DType::F32 | DType::F16 | DType::Bool) {
            return bad("indices must be integers");
        }
        if (0..xs.len()).any(|d| d != axis && is[d] > xs[d]) {
            return bad(format!("indices {is:?} exceed data {xs:?} off axis {axis}"));
        }
        let len = xs[axis];
        let mut cut = is.clone();
        cut[axis] = len;
        if cut != xs {
            let slice = Op::Slice {
                begins: vec![0; xs.len()],
                ends: cut.iter().map(|&e| e as i64).collect(),
                steps: vec![1; xs.len()],
            };
            x = self.emit_tmp(slice, &[x], "data_cut")?;
        }
        let idx = self.wrap_negative(idx, len)?;
        // The axes before and after `axis` as one each (at most 4 axes below):
        // indices [A, I, 1, B] against positions [1, 1, len, 1]; data [A, 1, len, B].
        let before: usize = is[..axis].iter().product();
        let after: usize = is[axis + 1..].iter().product();
        let i_shape = vec![before, is[axis], 1, after];
        let idx = self.emit_tmp(Op::Reshape { shape: i_shape }, &[idx], "indices_4d")?;
        let pos: Vec<i64> = (0..len as i64).collect();
        let pos = ConstData::from_i64(&[1, 1, len, 1], pos).cast(self.dtype(idx));
        let pos = self.add_const(&format!("{}/positions", self.cur), pos);
        let eq = Op::Compare {
            op: CompareOp::Equal,
        };
        let mask = self.emit_tmp(eq, &[idx, pos], "picked")?;
        let x_shape = vec![before, 1, len, after];
        let x = self.emit_tmp(Op::Reshape { shape: x_shape }, &[x], "data_4d")?;
        let zero = ConstData::from_i64(&[], vec![0]).cast(self.dtype(x));
        let zero = self.add_const(&format!("{}/zero", self.cur), zero);
        let sel = self.emit_tmp(Op::Where, &[mask, x, zero], "selected")?;
        let sum = Op::Reduce {
            op: ReduceOp::Sum,
            axes: vec![2],
            keep_dims: false,
        };
        let picked = self.emit_tmp(sum, &[sel], "gathered")?;
        let out = self.out0(n)?;
        self.emit_to(Op::Reshape { shape: is }, &[picked], out)?;
        Ok(())
    }

    /// Whether a run-time tensor holds indices that cannot be negative: those ArgMax, ArgMin
    /// and TopK produce.
    fn never_negative(&self, id: TensorId) -> bool {
        self.g.nodes.iter().any(|node| {
            node.outputs.last() == Some(&id)
                && matches!(
                    node.op,
                    Op::ArgMax { .. } | Op::ArgMin { .. } | Op::TopK { .. }
                )
        })
    }

    /// Compress with a constant condition: a Gather of the selected positions along `axis`
    /// (of the flattened input without one).
    pub(super) fn compress(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let mut x = self.req(n, 0, "input")?;
        let Some(cond) = self.const_input(n, 1, "condition")? else {
            return bad("condition is required");
        };
        let xs = self.shape(x);
        let axis = match a.int("axis")? {
            Some(ax) => norm_axis(ax, xs.len())?,
            None => {
                let flat = vec![xs.iter().product()];
                x = self.emit_tmp(Op::Reshape { shape: flat }, &[x], "flat")?;
                0
            }
        };
        let len = self.shape(x)[axis];
        let keep: Vec<i64> = cond
            .to_i64_vec()
            .iter()
            .enumerate()
            .filter(|&(i, &c)| c != 0 && i < len)
            .map(|(i, _)| i as i64)
            .collect();
        if keep.is_empty() {
            return unsup("the condition selects nothing: a zero-element output");
        }
        let idx = ConstData::from_i64(&[keep.len()], keep).cast(DType::I32);
        let idx = self.add_const(&format!("{}/selected", self.cur), idx);
        let out = self.out0(n)?;
        self.emit_to(Op::Gather { axis }, &[x, idx], out)?;
        Ok(())
    }

    /// ReverseSequence with constant sequence lengths: the first `len[b]` time steps of each
    /// batch entry reversed, as a Gather of the (time, batch) rows at constant positions.
    pub(super) fn reverse_sequence(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let Some(lens) = self.const_ints(n, 1, "sequence_lens")? else {
            return bad("sequence_lens is required");
        };
        let xs = self.shape(x);
        let time_axis = a.int_or("time_axis", 0)?;
        let batch_axis = a.int_or("batch_axis", 1)?;
        if xs.len() < 2 || ![(0, 1), (1, 0)].contains(&(time_axis, batch_axis)) {
            return bad(format!(
                "time_axis {time_axis} and batch_axis {batch_axis} must be 0 and 1 (either \
                 way) of a rank >= 2 input, got {xs:?}"
            ));
        }
        let (steps, batch) = if time_axis == 0 {
            (xs[0], xs[1])
        } else {
            (xs[1], xs[0])
        };
        if lens.len() != batch || lens.iter().any(|&l| l < 0 || l as usize > steps) {
            return bad(format!(
                "sequence_lens {lens:?} must hold {batch} lengths in 0..={steps}"
            ));
        }
        let row = |t: usize, b: usize| {
            if time_axis == 0 {
                t * batch + b
            } else {
                b * steps + t
            }
        };
        let mut src = vec![0i64; steps * batch];
        for (b, &len) in lens.iter().enumerate() {
            let len = len as usize;
            for t in 0..steps {
                let from = if t < len { len - 1 - t } else { t };
                src[row(t, b)] = row(from, b) as i64;
            }
        }
        let rest: usize = xs[2..].iter().product();
        let flat = vec![steps * batch, rest];
        let x2 = self.emit_tmp(Op::Reshape { shape: flat }, &[x], "rows")?;
        let idx = ConstData::from_i64(&[src.len()], src).cast(DType::I32);
        let idx = self.add_const(&format!("{}/source_rows", self.cur), idx);
        let y = self.emit_tmp(Op::Gather { axis: 0 }, &[x2, idx], "reversed")?;
        let out = self.out0(n)?;
        self.emit_to(Op::Reshape { shape: xs }, &[y], out)?;
        Ok(())
    }

    /// OneHot with constant depth and values: `on` where the index (negative ones counted
    /// from the end) equals the position along the new axis, `off` elsewhere; out-of-range
    /// indices give a row of `off`.
    pub(super) fn one_hot(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let idx = self.req(n, 0, "indices")?;
        let Some(depth) = self.const_scalar(n, 1, "depth")? else {
            return bad("depth is required");
        };
        let Some(values) = self.const_input(n, 2, "values")? else {
            return bad("values is required");
        };
        if values.len() != 2 {
            return bad(format!("values must hold [off, on], has {}", values.len()));
        }
        let depth = depth as i64;
        if depth < 1 {
            return bad(format!("depth {depth} must be positive"));
        }
        let is = self.shape(idx);
        let axis = norm_axis(a.int_or("axis", -1)?, is.len() + 1)?;
        let dt = self.dtype(idx);
        if dt == DType::Bool {
            return bad("indices must be numbers");
        }
        let zero = ConstData::from_i64(&[], vec![0]).cast(dt);
        let zero = self.add_const(&format!("{}/zero", self.cur), zero);
        let d = ConstData::from_i64(&[], vec![depth]).cast(dt);
        let d = self.add_const(&format!("{}/depth", self.cur), d);
        let less = Op::Compare {
            op: CompareOp::Less,
        };
        let negative = self.emit_tmp(less, &[idx, zero], "negative")?;
        let wrapped = self.emit_tmp(bin(BinaryOp::Add), &[idx, d], "wrapped")?;
        let idx = self.emit_tmp(Op::Where, &[negative, wrapped, idx], "index")?;
        let mut i_shape = is.clone();
        i_shape.insert(axis, 1);
        let idx = self.emit_tmp(Op::Reshape { shape: i_shape }, &[idx], "index_1")?;
        let mut p_shape = vec![1; is.len() + 1];
        p_shape[axis] = depth as usize;
        let pos = ConstData::from_i64(&p_shape, (0..depth).collect()).cast(dt);
        let pos = self.add_const(&format!("{}/positions", self.cur), pos);
        let eq = Op::Compare {
            op: CompareOp::Equal,
        };
        let hot = self.emit_tmp(eq, &[idx, pos], "hot")?;
        let vt = values.dtype();
        let v = values.to_f32_vec();
        let iv = values.to_i64_vec();
        let scalar = |k: usize| match vt {
            DType::F32 | DType::F16 => ConstData::scalar_f32(v[k]).cast(vt),
            _ => ConstData::from_i64(&[], vec![iv[k]]).cast(vt),
        };
        let off = self.add_const(&format!("{}/off", self.cur), scalar(0));
        let on = self.add_const(&format!("{}/on", self.cur), scalar(1));
        let out = self.out0(n)?;
        self.emit_to(Op::Where, &[hot, on, off], out)?;
        Ok(())
    }

    /// CenterCropPad: each listed axis cropped (a Slice) or zero-padded (a Pad) to the given
    /// size around its center; an odd difference puts the extra element at the end.
    pub(super) fn center_crop_pad(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "input_data")?;
        let xs = self.shape(x);
        let rank = xs.len();
        let Some(shape) = self.const_ints(n, 1, "shape")? else {
            return bad("shape is required");
        };
        let axes = match a.ints("axes")? {
            Some(v) => v,
            None => (0..rank as i64).collect(),
        };
        if axes.len() != shape.len() {
            return bad(format!("shape {shape:?} does not match axes {axes:?}"));
        }
        let sizes = dim_values(&shape, "size")?;
        let mut begins = vec![0i64; rank];
        let mut ends: Vec<i64> = xs.iter().map(|&d| d as i64).collect();
        let (mut before, mut after) = (vec![0; rank], vec![0; rank]);
        let mut seen = HashSet::new();
        for (&axis, &size) in axes.iter().zip(&sizes) {
            let ax = norm_axis(axis, rank)?;
            if !seen.insert(ax) {
                return bad(format!("axis {axis} is listed twice"));
            }
            let dim = xs[ax];
            if size < dim {
                begins[ax] = ((dim - size) / 2) as i64;
                ends[ax] = begins[ax] + size as i64;
            } else if size > dim {
                before[ax] = (size - dim) / 2;
                after[ax] = size - dim - before[ax];
            }
        }
        let mut y = x;
        let crops =
            begins.iter().any(|&b| b != 0) || ends.iter().zip(&xs).any(|(&e, &d)| e != d as i64);
        if crops {
            let slice = Op::Slice {
                begins,
                ends,
                steps: vec![1; rank],
            };
            y = self.emit_tmp(slice, &[y], "cropped")?;
        }
        let out = self.out0(n)?;
        if before.iter().chain(&after).any(|&p| p != 0) {
            let pad = Op::Pad {
                before,
                after,
                mode: PadMode::Constant,
                value: 0.0,
            };
            self.emit_to(pad, &[y], out)?;
        } else {
            self.bind(out, y);
        }
        Ok(())
    }

    pub(super) fn pad(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "data")?;
        let rank = self.shape(x).len();
        let mode = match a.string_or("mode", "constant")?.as_str() {
            "constant" => PadMode::Constant,
            "reflect" => PadMode::Reflect,
            other => return unsup(format!("mode '{other}' is not supported")),
        };
        let (pads, value, axes) = if self.opset >= 11 {
            let Some(p) = self.const_ints(n, 1, "pads")? else {
                return bad("pads is required");
            };
            let v = self.const_scalar(n, 2, "constant_value")?.unwrap_or(0.0);
            (p, v, self.const_ints(n, 3, "axes")?)
        } else {
            let p = match a.ints("pads")? {
                Some(p) => p,
                None => a.ints("paddings")?.unwrap_or_default(),
            };
            (p, a.float_or("value", 0.0)?, None)
        };
        let axes = match axes {
            Some(v) => {
                let mut out = Vec::with_capacity(v.len());
                for &ax in &v {
                    out.push(norm_axis(ax, rank)?);
                }
                out
            }
            None => (0..rank).collect(),
        };
        if pads.len() != 2 * axes.len() {
            return bad(format!("pads {pads:?} must have {} values", 2 * axes.len()));
        }
        if pads.iter().any(|&p| p < 0) {
            return unsup(format!(
                "negative pads {pads:?} (cropping) are not supported"
            ));
        }
        let p = size_values(&pads, "pad")?;
        let (mut before, mut after) = (vec![0; rank], vec![0; rank]);
        let k = axes.len();
        for (i, &ax) in axes.iter().enumerate() {
            before[ax] = p[i];
            after[ax] = p[i + k];
        }
        let out = self.out0(n)?;
        self.emit_to(
            Op::Pad {
                before,
                after,
                mode,
                value,
            },
            &[x],
            out,
        )?;
        Ok(())
    }
}
