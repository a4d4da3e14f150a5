//! Data movement: TRANSPOSE, CONCATENATION, SPLIT(_V), SLICE, STRIDED_SLICE, GATHER,
//! BROADCAST_TO and TILE, and the operators prepared as views of these in [`super::shape_views`]
//! (PACK, UNPACK, REVERSE_V2, DEPTH_TO_SPACE, SPACE_TO_DEPTH, EMBEDDING_LOOKUP).
// With some `ops-*` features off, helpers only the left-out operators use are unused; without
// `error-details`, values only error messages mention.
#![cfg_attr(
    not(all(feature = "all-ops", feature = "error-details")),
    allow(
        dead_code,
        unused_imports,
        unused_variables,
        unused_macros,
        unreachable_code
    )
)]

use super::buffers::{by_size, cast_out, Ins, Scratch};
use super::context::{activation, data_dtype, tag, Ctx};
use super::fast::Fast;
use super::shape_views as views;
use super::Kind;
use crate::error::{format, Result};
use crate::kernels::simd::Workers;
use crate::kernels::simd::{self, Isa};
use crate::kernels::{shape_ops as so, Activation};
use crate::model::{op_err, DType, OpDesc, MAX_RANK};
use crate::schema;
use crate::schema::BuiltinOperator as B;
use alloc::vec;
use alloc::vec::Vec;

/// A prepared data movement operator.
#[derive(Debug)]
pub(crate) enum Shape {
    Transpose {
        in_shape: Vec<usize>,
        perm: Vec<usize>,
        size: usize,
    },
    Strided {
        start: isize,
        shape: Vec<usize>,
        strides: Vec<isize>,
        size: usize,
    },
    BroadcastTo {
        in_shape: Vec<usize>,
        out_shape: Vec<usize>,
        size: usize,
    },
    Tile {
        in_shape: Vec<usize>,
        out_shape: Vec<usize>,
        size: usize,
    },
    Split {
        input: usize,
        strides: Vec<isize>,
        parts: Vec<(isize, Vec<usize>)>,
        size: usize,
    },
    Concat {
        outer: usize,
        out_chunk: usize,
        parts: Vec<(usize, usize)>,
        size: usize,
        act: Activation,
    },
    /// GATHER (`params` 0, indices 1) or EMBEDDING_LOOKUP (`params` 1, indices 0).
    Gather {
        params: usize,
        outer: usize,
        axis_size: usize,
        inner: usize,
        size: usize,
        idx: DType,
    },
    /// EMBEDDING_LOOKUP of an int8 table into float32 rows (hybrid): each picked row's values
    /// times its scale (one for the table, or one per row), as TFLite dequantizes them.
    #[cfg(feature = "ops-shape")]
    EmbeddingHybrid {
        rows: usize,
        cols: usize,
        scales: Vec<f32>,
    },
}

/// Prepares a data movement operator: this family's entry in the operator table
/// ([`crate::model::registry::op_table`]).
pub(super) fn prepare(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    match code {
        B::TRANSPOSE => transpose(c),
        B::CONCATENATION => concat(c),
        B::SPLIT | B::SPLIT_V => split(c, code == B::SPLIT_V),
        B::SLICE => slice(c),
        B::STRIDED_SLICE => strided_slice(c),
        B::GATHER => gather(c),
        B::BROADCAST_TO => broadcast_to(c),
        B::PACK => views::pack(c),
        B::UNPACK => views::unpack(c),
        B::REVERSE_V2 => views::reverse(c),
        B::DEPTH_TO_SPACE => views::depth_space(c, true),
        B::SPACE_TO_DEPTH => views::depth_space(c, false),
        B::EMBEDDING_LOOKUP => views::embedding_lookup(c),
        _ => tile(c),
    }
}

fn transpose(c: &Ctx<'_, '_>) -> Result<Kind> {
    let dt = data_dtype(c, 0)?;
    let s = c.shape(0)?;
    if s.len() > 6 {
        return Err(c.err("TRANSPOSE supports rank <= 6"));
    }
    let perm = perm_of(c, 1, s.len())?;
    let out: Vec<usize> = perm.iter().map(|&p| s[p]).collect();
    c.check_out(0, &out, dt)?;
    c.same_q(0, 0)?;
    Ok(Kind::Shape(Shape::Transpose {
        in_shape: s.to_vec(),
        perm,
        size: dt.size(),
    }))
}

fn concat(c: &Ctx<'_, '_>) -> Result<Kind> {
    let (axis, act) = match c.options(tag::CONCATENATION)? {
        Some(t) => (
            c.opt(t.i32(schema::ConcatenationOptions::VT_AXIS, 0))?,
            c.opt(
                t.i8(
                    schema::ConcatenationOptions::VT_FUSED_ACTIVATION_FUNCTION,
                    0,
                )
                .and_then(activation),
            )?,
        ),
        None => (0, Activation::None),
    };
    let dt = data_dtype(c, 0)?;
    if act != Activation::None && dt != DType::F32 {
        return Err(c.err("fused activation on a non-float concatenation"));
    }
    let s0 = c.shape(0)?;
    let rank = s0.len();
    let ax = c.axis(i64::from(axis), rank)?;
    let mut out = s0.to_vec();
    out[ax] = 0;
    let inner: usize = s0[ax + 1..].iter().product();
    let outer: usize = s0[..ax].iter().product();
    let mut parts = Vec::new();
    let mut offset = 0usize;
    for k in 0..c.op.inputs.len() {
        let s = c.shape(k)?;
        if c.dtype(k)? != dt {
            return Err(c.err(format!("input {k} has a different type")));
        }
        if s.len() != rank || (0..rank).any(|d| d != ax && s[d] != s0[d]) {
            return Err(c.err(format!(
                "input {k} shape {s:?} does not match {s0:?} off axis {ax}"
            )));
        }
        out[ax] += s[ax];
        c.same_q(k, 0)?;
        let chunk = s[ax] * inner;
        parts.push((chunk, offset));
        offset += chunk;
    }
    c.check_out(0, &out, dt)?;
    Ok(Kind::Shape(Shape::Concat {
        outer,
        out_chunk: offset,
        parts,
        size: dt.size(),
        act,
    }))
}

fn split(c: &Ctx<'_, '_>, v: bool) -> Result<Kind> {
    let (input, axis_k) = if v { (0, 2) } else { (1, 0) };
    let dt = data_dtype(c, input)?;
    let s = c.shape(input)?;
    let a = c.const_ints(axis_k)?;
    if a.len() != 1 {
        return Err(c.err("axis must have one element"));
    }
    let ax = c.axis(a[0], s.len())?;
    let n = c.op.outputs.len();
    let sizes: Vec<usize> = if v {
        let raw = c.const_ints(1)?;
        if raw.len() != n {
            return Err(c.err(format!("{} split sizes for {n} outputs", raw.len())));
        }
        let known: i64 = raw.iter().filter(|&&x| x >= 0).sum();
        let unknown = raw.iter().filter(|&&x| x < 0).count();
        if raw.iter().any(|&x| x < -1) || unknown > 1 {
            return Err(c.err(format!("bad split sizes {raw:?}")));
        }
        let rest = s[ax] as i64 - known;
        if rest < 0 || (unknown == 0 && rest != 0) {
            return Err(c.err(format!("split sizes {raw:?} do not sum to {}", s[ax])));
        }
        raw.iter()
            .map(|&x| if x < 0 { rest as usize } else { x as usize })
            .collect()
    } else {
        if let Some(t) = c.options(tag::SPLIT)? {
            let ns = c.opt(t.i32(schema::SplitOptions::VT_NUM_SPLITS, 0))?;
            if ns != n as i32 {
                return Err(c.err(format!("num_splits {ns} but {n} outputs")));
            }
        }
        if s[ax] % n != 0 {
            return Err(c.err(format!("dimension {} not divisible into {n} splits", s[ax])));
        }
        vec![s[ax] / n; n]
    };
    let strides = strides_isize(s);
    let mut parts = Vec::new();
    let mut off = 0usize;
    for (j, &sz) in sizes.iter().enumerate() {
        let mut os = s.to_vec();
        os[ax] = sz;
        c.check_out(j, &os, dt)?;
        c.same_q(input, j)?;
        parts.push(((off as isize) * strides[ax], os));
        off += sz;
    }
    Ok(Kind::Shape(Shape::Split {
        input,
        strides,
        parts,
        size: dt.size(),
    }))
}

fn slice(c: &Ctx<'_, '_>) -> Result<Kind> {
    let dt = data_dtype(c, 0)?;
    let s = c.shape(0)?;
    let begin = c.const_ints(1)?;
    let size = c.const_ints(2)?;
    if begin.len() != s.len() || size.len() != s.len() {
        return Err(c.err("begin/size length must equal the input rank"));
    }
    let strides = strides_isize(s);
    let mut start = 0isize;
    let mut out = Vec::new();
    for d in 0..s.len() {
        let b = begin[d];
        let n = if size[d] == -1 {
            s[d] as i64 - b
        } else {
            size[d]
        };
        if b < 0 || n < 0 || b + n > s[d] as i64 {
            return Err(c.err(format!(
                "slice begin {b} size {} out of range for dimension {}",
                size[d], s[d]
            )));
        }
        start += b as isize * strides[d];
        out.push(n as usize);
    }
    c.check_out(0, &out, dt)?;
    c.same_q(0, 0)?;
    Ok(Kind::Shape(Shape::Strided {
        start,
        shape: out,
        strides,
        size: dt.size(),
    }))
}

fn strided_slice(c: &Ctx<'_, '_>) -> Result<Kind> {
    let dt = data_dtype(c, 0)?;
    let s = c.shape(0)?;
    let rank = s.len();
    let (mut bm, mut em, mut elm, mut nam, mut sm, mut offset) = (0, 0, 0, 0, 0, false);
    if let Some(t) = c.options(tag::STRIDED_SLICE)? {
        use schema::StridedSliceOptions as S;
        bm = c.opt(t.i32(S::VT_BEGIN_MASK, 0))?;
        em = c.opt(t.i32(S::VT_END_MASK, 0))?;
        elm = c.opt(t.i32(S::VT_ELLIPSIS_MASK, 0))?;
        nam = c.opt(t.i32(S::VT_NEW_AXIS_MASK, 0))?;
        sm = c.opt(t.i32(S::VT_SHRINK_AXIS_MASK, 0))?;
        offset = c.opt(t.bool(S::VT_OFFSET, false))?;
    }
    if elm != 0 || nam != 0 || offset {
        return Err(c.err("ellipsis_mask, new_axis_mask and offset are not supported"));
    }
    let begin = c.const_ints(1)?;
    let end = c.const_ints(2)?;
    let stride = if c.has_input(3) {
        c.const_ints(3)?
    } else {
        vec![1; begin.len()]
    };
    let n = begin.len();
    if end.len() != n || stride.len() != n || n > rank {
        return Err(c.err("begin/end/strides must have equal length <= rank"));
    }
    let in_strides = strides_isize(s);
    let mut start_off = 0isize;
    let mut shape = Vec::new();
    let mut strides = Vec::new();
    let mut out_shape = Vec::new();
    for d in 0..rank {
        let size = s[d] as i64;
        let (b, e, st, bmask, emask, shrink) = if d < n {
            (
                begin[d],
                end[d],
                stride[d],
                bm & (1 << d) != 0,
                em & (1 << d) != 0,
                sm & (1 << d) != 0,
            )
        } else {
            (0, 0, 1, true, true, false)
        };
        if st == 0 {
            return Err(c.err("stride 0"));
        }
        let clamp = |v: i64| {
            if st > 0 {
                v.clamp(0, size)
            } else {
                v.clamp(-1, size - 1)
            }
        };
        let (start, stop) = if size == 0 {
            (0, 0)
        } else {
            let mut b = if bmask {
                if st > 0 {
                    i64::MIN / 4
                } else {
                    i64::MAX / 4
                }
            } else {
                b
            };
            if b < 0 {
                b += size;
            }
            let start = clamp(b);
            let stop = if shrink {
                start + 1
            } else {
                let mut e = if emask {
                    if st > 0 {
                        i64::MAX / 4
                    } else {
                        i64::MIN / 4
                    }
                } else {
                    e
                };
                if e < 0 {
                    e += size;
                }
                clamp(e)
            };
            (start, stop)
        };
        let count = if st > 0 {
            if stop > start {
                (stop - start + st - 1) / st
            } else {
                0
            }
        } else if start > stop {
            (start - stop + (-st) - 1) / (-st)
        } else {
            0
        };
        if shrink && (count != 1 || start < 0 || start >= size) {
            return Err(c.err(format!(
                "shrink axis {d}: index {} out of range {size}",
                begin[d]
            )));
        }
        if count > 0 {
            start_off += start as isize * in_strides[d];
        }
        shape.push(count as usize);
        strides.push(st as isize * in_strides[d]);
        if !shrink {
            out_shape.push(count as usize);
        }
    }
    c.check_out(0, &out_shape, dt)?;
    c.same_q(0, 0)?;
    if shape.contains(&0) {
        start_off = 0;
    }
    Ok(Kind::Shape(Shape::Strided {
        start: start_off,
        shape,
        strides,
        size: dt.size(),
    }))
}

fn gather(c: &Ctx<'_, '_>) -> Result<Kind> {
    let dt = data_dtype(c, 0)?;
    let idx = c.want_dtype(1, &[DType::I32, DType::I64])?;
    let (mut axis, mut batch_dims) = (0, 0);
    if let Some(t) = c.options(tag::GATHER)? {
        axis = c.opt(t.i32(schema::GatherOptions::VT_AXIS, 0))?;
        batch_dims = c.opt(t.i32(schema::GatherOptions::VT_BATCH_DIMS, 0))?;
    }
    if batch_dims != 0 {
        return Err(c.err("batch_dims != 0 is not supported"));
    }
    let s = c.shape(0)?;
    let ax = c.axis(i64::from(axis), s.len())?;
    let is = c.shape(1)?;
    let mut out: Vec<usize> = s[..ax].to_vec();
    out.extend_from_slice(is);
    out.extend_from_slice(&s[ax + 1..]);
    if out.len() > MAX_RANK {
        return Err(c.err("output rank too large"));
    }
    c.check_out(0, &out, dt)?;
    c.same_q(0, 0)?;
    Ok(Kind::Shape(Shape::Gather {
        params: 0,
        outer: s[..ax].iter().product(),
        axis_size: s[ax],
        inner: s[ax + 1..].iter().product(),
        size: dt.size(),
        idx,
    }))
}

fn broadcast_to(c: &Ctx<'_, '_>) -> Result<Kind> {
    let dt = data_dtype(c, 0)?;
    let s = c.shape(0)?;
    let target = c.const_ints(1)?;
    if target.iter().any(|&d| d < 0) || target.len() < s.len() || target.len() > MAX_RANK {
        return Err(c.err(format!("bad target shape {target:?}")));
    }
    let out: Vec<usize> = target.iter().map(|&d| d as usize).collect();
    let lead = out.len() - s.len();
    for (d, &v) in s.iter().enumerate() {
        if v != 1 && v != out[lead + d] {
            return Err(c.err(format!("{s:?} does not broadcast to {out:?}")));
        }
    }
    c.check_out(0, &out, dt)?;
    c.same_q(0, 0)?;
    Ok(Kind::Shape(Shape::BroadcastTo {
        in_shape: s.to_vec(),
        out_shape: out,
        size: dt.size(),
    }))
}

fn tile(c: &Ctx<'_, '_>) -> Result<Kind> {
    let dt = data_dtype(c, 0)?;
    let s = c.shape(0)?;
    let m = c.const_ints(1)?;
    if m.len() != s.len() || m.iter().any(|&v| v < 0) {
        return Err(c.err(format!("bad multiples {m:?}")));
    }
    let mut out = Vec::new();
    for d in 0..s.len() {
        out.push(
            s[d].checked_mul(m[d] as usize)
                .ok_or_else(|| c.err("too large"))?,
        );
    }
    c.check_out(0, &out, dt)?;
    c.same_q(0, 0)?;
    Ok(Kind::Shape(Shape::Tile {
        in_shape: s.to_vec(),
        out_shape: out,
        size: dt.size(),
    }))
}

pub(crate) fn perm_of(c: &Ctx<'_, '_>, k: usize, rank: usize) -> Result<Vec<usize>> {
    let p = c.const_ints(k)?;
    if p.len() != rank {
        return Err(c.err(format!("permutation {p:?} does not match rank {rank}")));
    }
    let mut seen = vec![false; rank];
    let mut out = Vec::with_capacity(rank);
    for &v in &p {
        let a = c.axis(v, rank)?;
        if seen[a] {
            return Err(c.err(format!("permutation {p:?} repeats axis {a}")));
        }
        seen[a] = true;
        out.push(a);
    }
    Ok(out)
}

pub(crate) fn strides_isize(shape: &[usize]) -> Vec<isize> {
    let s = crate::kernels::shape_ops::strides_of(shape);
    s[..shape.len()].iter().map(|&v| v as isize).collect()
}

impl Shape {
    /// Runs the operator reading `ins`, writing `out`.
    pub(super) fn run<'b>(
        &self,
        index: usize,
        op: &'b OpDesc<'b>,
        ins: Ins<'b>,
        out: &mut [u8],
        _scratch: &mut Scratch,
    ) -> Result<()> {
        match self {
            Shape::Split { .. } => {
                #[cfg(feature = "ops-shape")]
                {
                    {}
                }
                #[cfg(not(feature = "ops-shape"))]
                return Err(super::compiled_out(index, op));
            }
            Shape::Transpose {
                in_shape,
                perm,
                size,
            } => {
                #[cfg(feature = "ops-shape")]
                {
                    {
                        by_size!(*size, ins, 0, out, |i, o| so::transpose(
                            i, in_shape, perm, o
                        ))
                    }
                }
                #[cfg(not(feature = "ops-shape"))]
                return Err(super::compiled_out(index, op));
            }
            Shape::Strided {
                start,
                shape,
                strides,
                size,
            } => {
                #[cfg(feature = "ops-shape")]
                {
                    {
                        by_size!(*size, ins, 0, out, |i, o| so::strided_copy(
                            i, *start, shape, strides, o
                        ))
                    }
                }
                #[cfg(not(feature = "ops-shape"))]
                return Err(super::compiled_out(index, op));
            }
            Shape::BroadcastTo {
                in_shape,
                out_shape,
                size,
            } => {
                #[cfg(feature = "ops-shape")]
                {
                    {
                        by_size!(*size, ins, 0, out, |i, o| so::broadcast_to(
                            i, in_shape, out_shape, o
                        ))
                    }
                }
                #[cfg(not(feature = "ops-shape"))]
                return Err(super::compiled_out(index, op));
            }
            Shape::Tile {
                in_shape,
                out_shape,
                size,
            } => {
                #[cfg(feature = "ops-shape")]
                {
                    {
                        by_size!(*size, ins, 0, out, |i, o| so::tile(
                            i, in_shape, out_shape, o
                        ))
                    }
                }
                #[cfg(not(feature = "ops-shape"))]
                return Err(super::compiled_out(index, op));
            }
            Shape::Concat {
                outer,
                out_chunk,
                parts,
                size,
                act,
            } => {
                #[cfg(feature = "ops-shape")]
                {
                    {
                        for (k, &(chunk, offset)) in parts.iter().enumerate() {
                            let cb = chunk * size;
                            let i = ins.bytes(k).unwrap_or(&[]);
                            so::concat_part(i, *outer, cb, out_chunk * size, offset * size, out);
                        }
                        if *act != Activation::None {
                            for v in cast_out::<f32>(out)? {
                                *v = act.apply(*v);
                            }
                        }
                    }
                }
                #[cfg(not(feature = "ops-shape"))]
                return Err(super::compiled_out(index, op));
            }
            Shape::Gather {
                params,
                outer,
                axis_size,
                inner,
                size,
                idx,
            } => {
                #[cfg(feature = "ops-shape")]
                {
                    {
                        let ik = 1 - *params;
                        let r = match idx {
                            DType::I64 => {
                                let ix = ins.typed::<i64>(ik)?;
                                by_size!(*size, ins, *params, out, |i, o| so::gather(
                                    i,
                                    *outer,
                                    *axis_size,
                                    *inner,
                                    ix.iter().copied(),
                                    o
                                ))
                            }
                            _ => {
                                let ix = ins.typed::<i32>(ik)?;
                                by_size!(*size, ins, *params, out, |i, o| so::gather(
                                    i,
                                    *outer,
                                    *axis_size,
                                    *inner,
                                    ix.iter().map(|&v| i64::from(v)),
                                    o
                                ))
                            }
                        };
                        r.map_err(|bad| {
                            op_err(
                                index,
                                op,
                                format!("index {bad} out of range 0..{axis_size}"),
                            )
                        })?;
                    }
                }
                #[cfg(not(feature = "ops-shape"))]
                return Err(super::compiled_out(index, op));
            }
            #[cfg(feature = "ops-shape")]
            Shape::EmbeddingHybrid { rows, cols, scales } => {
                #[cfg(feature = "ops-hybrid")]
                {
                    so::embedding_hybrid(
                        ins.typed::<i8>(1)?,
                        *cols,
                        scales,
                        ins.typed::<i32>(0)?,
                        cast_out::<f32>(out)?,
                    )
                    .map_err(|bad| {
                        op_err(index, op, format!("index {bad} out of range 0..{rows}"))
                    })?;
                }
                #[cfg(not(feature = "ops-hybrid"))]
                {
                    let _ = (rows, cols, scales);
                    return Err(super::compiled_out(index, op));
                }
            }
        }
        Ok(())
    }
}

impl Shape {
    /// This operator's SIMD kernel with its constant weights packed for `isa`, if it has one.
    pub(super) fn fast(&self, isa: Isa) -> Option<Fast> {
        match self {
            #[cfg(feature = "ops-shape")]
            Shape::Transpose {
                in_shape,
                perm,
                size,
            } if simd::has_transpose_few_rows_32(isa, in_shape, perm, *size) => {
                Some(Fast::TransposeFewRows(isa))
            }
            #[cfg(feature = "ops-shape")]
            Shape::Transpose {
                in_shape,
                perm,
                size,
            } if simd::has_transpose_rows(isa, in_shape, perm, *size) => {
                Some(Fast::TransposeRows(isa))
            }
            #[cfg(all(
                feature = "ops-shape",
                any(target_arch = "x86_64", target_arch = "aarch64")
            ))]
            Shape::Transpose {
                in_shape,
                perm,
                size,
            } if isa != Isa::Portable
                && simd::has_transpose_few_rows_split(in_shape, perm, *size) =>
            {
                Some(Fast::TransposeFewRowsSplit)
            }
            _ => None,
        }
    }
}

impl Shape {
    /// Runs this operator with its pre-packed weights `fast` (`None` if `fast` is not this
    /// operator's, which [`Fast::prepare`] rules out).
    #[inline]
    pub(super) fn run_fast(
        &self,
        fast: &Fast,
        ins: &Ins<'_>,
        out: &mut [u8],
        s: &mut Workers,
    ) -> Option<()> {
        match (fast, self) {
            #[cfg(feature = "ops-shape")]
            (Fast::TransposeFewRows(isa), Shape::Transpose { in_shape, perm, .. }) => {
                let (i, o) = (ins.typed::<u32>(0).ok()?, cast_out(out).ok()?);
                simd::transpose_few_rows_32(*isa, in_shape, perm, i, o).then_some(())
            }
            #[cfg(feature = "ops-shape")]
            (
                Fast::TransposeRows(isa),
                Shape::Transpose {
                    in_shape,
                    perm,
                    size,
                },
            ) => {
                simd::transpose_rows(*isa, in_shape, perm, *size, ins.bytes(0)?, out).then_some(())
            }
            #[cfg(all(
                feature = "ops-shape",
                any(target_arch = "x86_64", target_arch = "aarch64")
            ))]
            (
                Fast::TransposeFewRowsSplit,
                Shape::Transpose {
                    in_shape,
                    perm,
                    size,
                },
            ) => {
                let done = match size {
                    1 => {
                        let (i, o) = (ins.typed::<u8>(0).ok()?, cast_out::<u8>(out).ok()?);
                        simd::transpose_few_rows_split(in_shape, perm, i, o, s)
                    }
                    2 => {
                        let (i, o) = (ins.typed::<u16>(0).ok()?, cast_out::<u16>(out).ok()?);
                        simd::transpose_few_rows_split(in_shape, perm, i, o, s)
                    }
                    _ => {
                        let (i, o) = (ins.typed::<u32>(0).ok()?, cast_out::<u32>(out).ok()?);
                        simd::transpose_few_rows_split(in_shape, perm, i, o, s)
                    }
                };
                done.then_some(())
            }
            _ => None,
        }
    }
}
