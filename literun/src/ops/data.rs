//! Shape values and index-driven data movement: SHAPE, FILL, ZEROS_LIKE, BROADCAST_ARGS,
//! GATHER_ND, DYNAMIC_UPDATE_SLICE, SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND. Inputs that carry
//! shapes or indices may be computed at run time; their values are checked when the operator
//! runs (a shape that disagrees with the planned output, an index out of range: an error).
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

use super::buffers::{cast_out, Ins, Scratch};
use super::context::{data_dtype, tag, Ctx};
use super::Kind;
use crate::error::{format, Result};
use crate::kernels::data as dk;
use crate::model::{op_err, DType, OpDesc, MAX_RANK};
use crate::schema;
use crate::schema::BuiltinOperator as B;
use alloc::vec::Vec;

/// A prepared operator of the data family.
#[derive(Debug)]
pub(crate) enum Data {
    /// SHAPE: the input's shape as `out` (INT32 or INT64) values.
    Shape { dims: Vec<i64>, out: DType },
    /// FILL: the output (`shape`, elements of `size` bytes) filled with the scalar input 1; the
    /// dims input 0 (of type `dims`) must equal `shape`.
    Fill {
        shape: Vec<usize>,
        dims: DType,
        size: usize,
    },
    /// ZEROS_LIKE.
    Zeros,
    /// BROADCAST_ARGS of two shapes of type `dtype`.
    BroadcastArgs { dtype: DType },
    /// GATHER_ND: `depth`-long index tuples (of type `idx`) into `params`, slices of `inner`.
    GatherNd {
        params: Vec<usize>,
        depth: usize,
        inner: usize,
        size: usize,
        idx: DType,
    },
    /// DYNAMIC_UPDATE_SLICE: `update` (input 1) into `shape` (input 0) at input 2 (`idx`).
    UpdateSlice {
        shape: Vec<usize>,
        update: Vec<usize>,
        size: usize,
        idx: DType,
    },
    /// SPACE_TO_BATCH_ND (`to_batch`, padding with the bytes of `pad`) or BATCH_TO_SPACE_ND.
    SpaceBatch {
        geometry: dk::SpaceBatch,
        to_batch: bool,
        size: usize,
        pad: i64,
    },
}

/// Prepares an operator of the data family: this family's entry in the operator table
/// ([`crate::model::registry::op_table`]).
pub(super) fn prepare(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    let d = match code {
        B::SHAPE => shape(c)?,
        B::FILL => fill(c)?,
        B::ZEROS_LIKE => {
            // int8 as TFLite Micro: stored zeros, whatever the zero point.
            let dt = c.want_dtype(0, &[DType::F32, DType::I32, DType::I64, DType::I8])?;
            c.check_out(0, c.shape(0)?, dt)?;
            Data::Zeros
        }
        B::BROADCAST_ARGS => broadcast_args(c)?,
        B::GATHER_ND => gather_nd(c)?,
        B::DYNAMIC_UPDATE_SLICE => update_slice(c)?,
        _ => space_batch(c, code == B::SPACE_TO_BATCH_ND)?,
    };
    Ok(Kind::Data(d))
}

fn shape(c: &Ctx<'_, '_>) -> Result<Data> {
    let mut out = DType::I32;
    if let Some(t) = c.options(tag::SHAPE)? {
        let ty = c.opt(t.i8(schema::ShapeOptions::VT_OUT_TYPE, 2))?;
        out = match DType::from_tflite(schema::TensorType(ty)) {
            Some(d @ (DType::I32 | DType::I64)) => d,
            _ => return Err(c.err(format!("out_type {ty} is not INT32 or INT64"))),
        };
    }
    let s = c.shape(0)?;
    c.check_out(0, &[s.len()], out)?;
    Ok(Data::Shape {
        dims: s.iter().map(|&d| d as i64).collect(),
        out,
    })
}

/// The INT32 or INT64 1-D input `k` holding a shape of `len` values.
fn shape_input(c: &Ctx<'_, '_>, k: usize, len: usize) -> Result<DType> {
    let dt = c.want_dtype(k, &[DType::I32, DType::I64])?;
    if c.shape(k)? != [len] {
        return Err(c.err(format!(
            "input {k} has shape {:?}, expected [{len}]",
            c.shape(k)?
        )));
    }
    Ok(dt)
}

fn fill(c: &Ctx<'_, '_>) -> Result<Data> {
    let o = c.output(0)?;
    let dims = shape_input(c, 0, o.shape.len())?;
    if c.input(0)?.data.is_some() {
        let d = c.const_ints(0)?;
        if d.iter()
            .map(|&v| usize::try_from(v).ok())
            .ne(o.shape.iter().map(|&v| Some(v)))
        {
            return Err(c.err(format!("dims {d:?} but output shape {:?}", o.shape)));
        }
    }
    let dt = data_dtype(c, 1)?;
    if c.input(1)?.elements != 1 {
        return Err(c.err("value must be a scalar"));
    }
    c.check_out(0, &o.shape, dt)?;
    c.same_q(1, 0)?;
    Ok(Data::Fill {
        shape: o.shape.clone(),
        dims,
        size: dt.size(),
    })
}

fn broadcast_args(c: &Ctx<'_, '_>) -> Result<Data> {
    let dt = c.want_dtype(0, &[DType::I32, DType::I64])?;
    let (a, b) = (c.shape(0)?, c.shape(1)?);
    if a.len() != 1 || b.len() != 1 || c.dtype(1)? != dt || a[0].max(b[0]) > MAX_RANK {
        return Err(c.err("inputs must be two 1-D shapes of one type and rank <= 8"));
    }
    c.check_out(0, &[a[0].max(b[0])], dt)?;
    Ok(Data::BroadcastArgs { dtype: dt })
}

fn gather_nd(c: &Ctx<'_, '_>) -> Result<Data> {
    let dt = data_dtype(c, 0)?;
    let idx = c.want_dtype(1, &[DType::I32, DType::I64])?;
    let (p, i) = (c.shape(0)?, c.shape(1)?);
    let depth = i.last().copied().unwrap_or(0);
    if depth == 0 || depth > p.len() {
        return Err(c.err(format!(
            "index depth {depth} must be in 1..={} (params {p:?})",
            p.len()
        )));
    }
    let out = [&i[..i.len() - 1], &p[depth..]].concat();
    if out.len() > MAX_RANK {
        return Err(c.err("output rank too large"));
    }
    c.check_out(0, &out, dt)?;
    c.same_q(0, 0)?;
    Ok(Data::GatherNd {
        params: p.to_vec(),
        depth,
        inner: p[depth..].iter().product(),
        size: dt.size(),
        idx,
    })
}

fn update_slice(c: &Ctx<'_, '_>) -> Result<Data> {
    let dt = data_dtype(c, 0)?;
    let (s, u) = (c.shape(0)?, c.shape(1)?);
    if c.dtype(1)? != dt || u.len() != s.len() || u.iter().zip(s).any(|(a, b)| a > b) {
        return Err(c.err(format!(
            "update {u:?} must have the operand's type and rank and fit in {s:?}"
        )));
    }
    let idx = shape_input(c, 2, s.len())?;
    c.check_out(0, s, dt)?;
    c.same_q(0, 0)?;
    c.same_q(1, 0)?;
    Ok(Data::UpdateSlice {
        shape: s.to_vec(),
        update: u.to_vec(),
        size: dt.size(),
        idx,
    })
}

/// SPACE_TO_BATCH_ND (`to_batch`) or BATCH_TO_SPACE_ND on a 4-D NHWC or 3-D NWC input, with a
/// constant block shape (input 1) and constant paddings or crops (input 2, `[spatial, 2]`).
fn space_batch(c: &Ctx<'_, '_>, to_batch: bool) -> Result<Data> {
    let dt = data_dtype(c, 0)?;
    let s = c.shape(0)?;
    let [n, h, w, ch] = match *s {
        [n, h, w, ch] => [n, h, w, ch],
        [n, h, ch] => [n, h, 1, ch],
        _ => return Err(c.err(format!("input must be 3-D or 4-D, is {s:?}"))),
    };
    let spatial = s.len() - 2;
    let block = c.const_ints(1)?;
    let pads = c.const_ints(2)?;
    if block.len() != spatial || pads.len() != 2 * spatial {
        return Err(c.err("block shape and paddings must match the spatial rank"));
    }
    let small = |v: i64| usize::try_from(v).ok().filter(|&v| v <= 1 << 24);
    let pos = |v: i64| small(v).filter(|&v| v >= 1);
    let (Some(bh), Some(bw), Some(pt), Some(pb)) = (
        pos(block[0]),
        pos(block.get(1).copied().unwrap_or(1)),
        small(pads[0]),
        small(pads[1]),
    ) else {
        return Err(c.err(format!("bad block shape {block:?} or paddings {pads:?}")));
    };
    let (pl, pr) = if spatial == 2 {
        match (small(pads[2]), small(pads[3])) {
            (Some(l), Some(r)) => (l, r),
            _ => return Err(c.err(format!("bad paddings {pads:?}"))),
        }
    } else {
        (0, 0)
    };
    let blocks = bh * bw;
    let geometry = if to_batch {
        let (hp, wp) = (h + pt + pb, w + pl + pr);
        if hp % bh != 0 || wp % bw != 0 {
            return Err(c.err(format!("padded {hp}x{wp} is not a multiple of the block")));
        }
        dk::SpaceBatch {
            batch: n,
            h,
            w,
            c: ch,
            block_h: bh,
            block_w: bw,
            h_b: hp / bh,
            w_b: wp / bw,
            pad_top: pt,
            pad_left: pl,
        }
    } else {
        let (hs, ws) = (h * bh, w * bw);
        if n % blocks != 0 || pt + pb > hs || pl + pr > ws {
            return Err(c.err(format!(
                "batch {n} is not a multiple of {blocks} or the crops exceed {hs}x{ws}"
            )));
        }
        dk::SpaceBatch {
            batch: n / blocks,
            h: hs - pt - pb,
            w: ws - pl - pr,
            c: ch,
            block_h: bh,
            block_w: bw,
            h_b: h,
            w_b: w,
            pad_top: pt,
            pad_left: pl,
        }
    };
    let g = &geometry;
    let out = if to_batch {
        [g.batch * blocks, g.h_b, g.w_b, ch]
    } else {
        [g.batch, g.h, g.w, ch]
    };
    let out: Vec<usize> = if spatial == 2 {
        out.to_vec()
    } else {
        [out[0], out[1], out[3]].to_vec()
    };
    c.check_out(0, &out, dt)?;
    c.same_q(0, 0)?;
    // TFLite pads a quantized tensor with its zero point.
    let pad = match dt {
        DType::I8 | DType::U8 | DType::I16 => c
            .output(0)?
            .qparams
            .as_ref()
            .map_or(0, |q| q.zero_points.first().copied().unwrap_or(0)),
        _ => 0,
    };
    Ok(Data::SpaceBatch {
        geometry,
        to_batch,
        size: dt.size(),
        pad,
    })
}

/// Runs `$body` with `$t` the unsigned type of `$size` bytes.
macro_rules! by_elem {
    ($size:expr, |$t:ident| $body:expr) => {
        match $size {
            1 => {
                type $t = u8;
                $body
            }
            2 => {
                type $t = u16;
                $body
            }
            4 => {
                type $t = u32;
                $body
            }
            _ => {
                type $t = u64;
                $body
            }
        }
    };
}

/// Runs `$body` with `$v` the values of the INT32 or INT64 input `$k` as an iterator of i64.
macro_rules! with_ints {
    ($ins:expr, $k:expr, $dt:expr, |$v:ident| $body:expr) => {
        match $dt {
            DType::I64 => {
                let $v = $ins.typed::<i64>($k)?.iter().copied();
                $body
            }
            _ => {
                let $v = $ins.typed::<i32>($k)?.iter().map(|&v| i64::from(v));
                $body
            }
        }
    };
}

/// Writes `vals` to an INT32 or INT64 output.
fn write_ints(out: &mut [u8], dt: DType, vals: impl Iterator<Item = i64>) -> Result<()> {
    if dt == DType::I64 {
        for (o, v) in cast_out::<i64>(out)?.iter_mut().zip(vals) {
            *o = v;
        }
    } else {
        for (o, v) in cast_out::<i32>(out)?.iter_mut().zip(vals) {
            *o = v as i32;
        }
    }
    Ok(())
}

impl Data {
    /// Runs the operator reading `ins`, writing `out`.
    pub(super) fn run<'b>(
        &self,
        index: usize,
        op: &'b OpDesc<'b>,
        ins: Ins<'b>,
        out: &mut [u8],
        _scratch: &mut Scratch,
    ) -> Result<()> {
        #[cfg(not(feature = "ops-data"))]
        return Err(super::compiled_out(index, op));
        #[cfg(feature = "ops-data")]
        match self {
            Data::Shape { dims, out: dt } => write_ints(out, *dt, dims.iter().copied())?,
            Data::Zeros => out.fill(0),
            Data::Fill { shape, dims, size } => {
                let same = with_ints!(ins, 0, dims, |d| d
                    .map(|v| usize::try_from(v).ok())
                    .eq(shape.iter().map(|&v| Some(v))));
                if !same {
                    return Err(op_err(
                        index,
                        op,
                        "dims differ from the planned output shape",
                    ));
                }
                let v = ins.bytes(1).unwrap_or(&[]);
                if v.len() == *size {
                    for o in out.chunks_exact_mut(*size) {
                        o.copy_from_slice(v);
                    }
                }
            }
            Data::BroadcastArgs { dtype } => {
                let mut a = [0i64; MAX_RANK];
                let mut b = [0i64; MAX_RANK];
                let na = with_ints!(ins, 0, dtype, |v| a
                    .iter_mut()
                    .zip(v)
                    .map(|(o, v)| *o = v)
                    .count());
                let nb = with_ints!(ins, 1, dtype, |v| b
                    .iter_mut()
                    .zip(v)
                    .map(|(o, v)| *o = v)
                    .count());
                let mut r = [0i64; MAX_RANK];
                let n = na.max(nb);
                dk::broadcast_args(&a[..na], &b[..nb], &mut r[..n])
                    .ok_or_else(|| op_err(index, op, "the shapes do not broadcast"))?;
                write_ints(out, *dtype, r[..n].iter().copied())?;
            }
            Data::GatherNd {
                params,
                depth,
                inner,
                size,
                idx,
            } => {
                let r = by_elem!(*size, |T| {
                    let p = ins.typed::<T>(0)?;
                    let o = cast_out::<T>(out)?;
                    with_ints!(ins, 1, idx, |ix| dk::gather_nd(
                        p, params, ix, *depth, *inner, o
                    ))
                });
                r.map_err(|bad| op_err(index, op, format!("index {bad} out of range")))?;
            }
            Data::UpdateSlice {
                shape,
                update,
                size,
                idx,
            } => by_elem!(*size, |T| {
                let (x, u) = (ins.typed::<T>(0)?, ins.typed::<T>(1)?);
                let o = cast_out::<T>(out)?;
                with_ints!(ins, 2, idx, |st| dk::dynamic_update_slice(
                    x, shape, u, update, st, o
                ))
            }),
            Data::SpaceBatch {
                geometry,
                to_batch,
                size,
                pad,
            } => by_elem!(*size, |T| {
                let x = ins.typed::<T>(0)?;
                let o = cast_out::<T>(out)?;
                if *to_batch {
                    geometry.to_batch(x, *pad as T, o)
                } else {
                    geometry.to_space(x, o)
                }
            }),
        }
        Ok(())
    }
}
