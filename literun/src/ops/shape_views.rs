//! Data movement operators that are views of the shape family's kernels: PACK (a concatenation
//! along a new axis), UNPACK (a split dropping the axis), REVERSE_V2 (a strided copy with
//! negative strides), DEPTH_TO_SPACE and SPACE_TO_DEPTH (transposes of a 6-D view) and
//! EMBEDDING_LOOKUP (a gather along axis 0 with the indices first).
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

use super::context::{data_dtype, filter_scales, positive, tag, Ctx};
use super::shape::{strides_isize, Shape};
use super::Kind;
use crate::error::{format, Result};
use crate::kernels::Activation;
use crate::model::{DType, MAX_RANK};
use crate::schema;
use alloc::vec;
use alloc::vec::Vec;

/// PACK: `values_count` inputs of one shape stacked along a new axis `axis`.
pub(super) fn pack(c: &Ctx<'_, '_>) -> Result<Kind> {
    let (mut count, mut axis) = (c.op.inputs.len() as i32, 0);
    if let Some(t) = c.options(tag::PACK)? {
        count = c.opt(t.i32(schema::PackOptions::VT_VALUES_COUNT, count))?;
        axis = c.opt(t.i32(schema::PackOptions::VT_AXIS, 0))?;
    }
    let n = c.op.inputs.len();
    if count != n as i32 {
        return Err(c.err(format!("values_count {count} but {n} inputs")));
    }
    let dt = data_dtype(c, 0)?;
    let s = c.shape(0)?;
    if s.len() + 1 > MAX_RANK {
        return Err(c.err("output rank too large"));
    }
    let ax = c.axis(i64::from(axis), s.len() + 1)?;
    for k in 0..n {
        if c.dtype(k)? != dt || c.shape(k)? != s {
            return Err(c.err(format!("input {k} differs in type or shape from input 0")));
        }
        c.same_q(k, 0)?;
    }
    let (head, tail) = s.split_at(ax);
    c.check_out(0, &[head, &[n], tail].concat(), dt)?;
    let chunk: usize = tail.iter().product();
    Ok(Kind::Shape(Shape::Concat {
        outer: head.iter().product(),
        out_chunk: chunk * n,
        parts: (0..n).map(|k| (chunk, k * chunk)).collect(),
        size: dt.size(),
        act: Activation::None,
    }))
}

/// UNPACK: the input split into `num` outputs along `axis`, each without that axis.
pub(super) fn unpack(c: &Ctx<'_, '_>) -> Result<Kind> {
    let n = c.op.outputs.len();
    let mut axis = 0;
    if let Some(t) = c.options(tag::UNPACK)? {
        let num = c.opt(t.i32(schema::UnpackOptions::VT_NUM, n as i32))?;
        if num != n as i32 {
            return Err(c.err(format!("num {num} but {n} outputs")));
        }
        axis = c.opt(t.i32(schema::UnpackOptions::VT_AXIS, 0))?;
    }
    let dt = data_dtype(c, 0)?;
    let s = c.shape(0)?;
    let ax = c.axis(i64::from(axis), s.len())?;
    if s[ax] != n {
        return Err(c.err(format!("dimension {ax} is {} but {n} outputs", s[ax])));
    }
    let strides = strides_isize(s);
    let mut part = s.to_vec();
    part[ax] = 1;
    let squeezed: Vec<usize> = [&s[..ax], &s[ax + 1..]].concat();
    let mut parts = Vec::with_capacity(n);
    for j in 0..n {
        c.check_out(j, &squeezed, dt)?;
        c.same_q(0, j)?;
        parts.push((j as isize * strides[ax], part.clone()));
    }
    Ok(Kind::Shape(Shape::Split {
        input: 0,
        strides,
        parts,
        size: dt.size(),
    }))
}

/// REVERSE_V2: the input with the constant axes of input 1 reversed.
pub(super) fn reverse(c: &Ctx<'_, '_>) -> Result<Kind> {
    let dt = data_dtype(c, 0)?;
    let s = c.shape(0)?;
    let mut strides = strides_isize(s);
    let mut start = 0isize;
    let mut seen = vec![false; s.len()];
    for a in c.const_ints(1)? {
        let d = c.axis(a, s.len())?;
        if seen[d] {
            return Err(c.err(format!("axis {d} is reversed twice")));
        }
        seen[d] = true;
        if s[d] > 0 {
            start += (s[d] as isize - 1) * strides[d];
        }
        strides[d] = -strides[d];
    }
    c.check_out(0, s, dt)?;
    c.same_q(0, 0)?;
    Ok(Kind::Shape(Shape::Strided {
        start: if s.contains(&0) { 0 } else { start },
        shape: s.to_vec(),
        strides,
        size: dt.size(),
    }))
}

/// DEPTH_TO_SPACE (`to_space`) or SPACE_TO_DEPTH on NHWC: both a transpose swapping the two
/// middle dimensions of a 6-D view, `[B, H, W, b, b, C/b²]` or `[B, H/b, b, W/b, b, C]`.
pub(super) fn depth_space(c: &Ctx<'_, '_>, to_space: bool) -> Result<Kind> {
    let block = match c.options(if to_space {
        tag::DEPTH_TO_SPACE
    } else {
        tag::SPACE_TO_DEPTH
    })? {
        // The two options tables have the same layout.
        Some(t) => c.opt(t.i32(schema::DepthToSpaceOptions::VT_BLOCK_SIZE, 0))?,
        None => 0,
    };
    let b = positive(c, block, "block_size")?;
    let dt = data_dtype(c, 0)?;
    let [n, h, w, ch] = c.shape4(0)?;
    let (view, out) = if to_space {
        let bb = b
            .checked_mul(b)
            .ok_or_else(|| c.err("block_size too large"))?;
        if ch % bb != 0 {
            return Err(c.err(format!("depth {ch} is not a multiple of {bb}")));
        }
        ([n, h, w, b, b, ch / bb], [n, h * b, w * b, ch / bb])
    } else {
        if h % b != 0 || w % b != 0 {
            return Err(c.err(format!("{h}x{w} is not a multiple of block_size {b}")));
        }
        ([n, h / b, b, w / b, b, ch], [n, h / b, w / b, ch * b * b])
    };
    c.check_out(0, &out, dt)?;
    c.same_q(0, 0)?;
    Ok(Kind::Shape(Shape::Transpose {
        in_shape: view.to_vec(),
        perm: vec![0, 1, 3, 2, 4, 5],
        size: dt.size(),
    }))
}

/// EMBEDDING_LOOKUP: rows of `value` (input 1) picked by the INT32 `lookup` (input 0). An int8
/// `value` with a float32 output is TFLite's hybrid form: the rows are dequantized (symmetric,
/// one scale for the table or one per row).
pub(super) fn embedding_lookup(c: &Ctx<'_, '_>) -> Result<Kind> {
    c.want_dtype(0, &[DType::I32])?;
    let dt = data_dtype(c, 1)?;
    let ids = c.shape(0)?;
    let v = c.shape(1)?;
    if ids.len() != 1 || v.len() < 2 {
        return Err(c.err(format!(
            "lookup must be 1-D and value at least 2-D, are {ids:?} and {v:?}"
        )));
    }
    #[cfg(feature = "ops-shape")]
    if dt == DType::I8 && c.output(0)?.dtype == DType::F32 {
        c.check_out(0, &[ids, &v[1..]].concat(), DType::F32)?;
        return Ok(Kind::Shape(Shape::EmbeddingHybrid {
            rows: v[0],
            cols: v[1..].iter().product(),
            scales: filter_scales(c, 1, v[0], 0)?,
        }));
    }
    c.check_out(0, &[ids, &v[1..]].concat(), dt)?;
    c.same_q(1, 0)?;
    Ok(Kind::Shape(Shape::Gather {
        params: 1,
        outer: 1,
        axis_size: v[0],
        inner: v[1..].iter().product(),
        size: dt.size(),
        idx: DType::I32,
    }))
}
