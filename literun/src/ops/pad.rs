//! PAD, PADV2 and MIRROR_PAD.
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
use super::fast::Fast;
use super::Kind;
use crate::error::{format, Result};
use crate::kernels::shape_ops as so;
use crate::kernels::simd::{self, Isa, Workers};
use crate::model::{DType, OpDesc};
use crate::schema;
use crate::schema::BuiltinOperator as B;
use alloc::vec::Vec;

/// A prepared PAD/PADV2 or MIRROR_PAD.
#[derive(Debug)]
pub(crate) enum Pad {
    Constant {
        in_shape: Vec<usize>,
        before: Vec<usize>,
        after: Vec<usize>,
        size: usize,
        /// The pad byte when there is no constant-value input (the zero point for 8-bit types).
        fill: u8,
    },
    /// MIRROR_PAD (float32): REFLECT excludes the border, SYMMETRIC repeats it.
    Mirror {
        in_shape: Vec<usize>,
        before: Vec<usize>,
        after: Vec<usize>,
        symmetric: bool,
    },
}

/// Prepares PAD, PADV2 or MIRROR_PAD: this family's entry in the operator table
/// ([`crate::model::registry::op_table`]).
pub(super) fn prepare(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    match code {
        B::MIRROR_PAD => mirror_pad(c),
        _ => pad(c),
    }
}

fn pad(c: &Ctx<'_, '_>) -> Result<Kind> {
    let dt = data_dtype(c, 0)?;
    let s = c.shape(0)?;
    let p = c.const_ints(1)?;
    if p.len() != 2 * s.len() || c.shape(1)?.first() != Some(&s.len()) && !s.is_empty() {
        return Err(c.err(format!("paddings must have shape [{}, 2]", s.len())));
    }
    if c.has_input(2) && (c.dtype(2)? != dt || c.input(2)?.elements != 1) {
        return Err(c.err("constant value must be one element of the input type"));
    }
    let mut before = Vec::new();
    let mut after = Vec::new();
    let mut out = Vec::new();
    for d in 0..s.len() {
        let (b, a) = (p[2 * d], p[2 * d + 1]);
        if b < 0 || a < 0 || b > i64::from(i32::MAX) || a > i64::from(i32::MAX) {
            return Err(c.err(format!("bad paddings {b}, {a}")));
        }
        before.push(b as usize);
        after.push(a as usize);
        out.push(s[d] + b as usize + a as usize);
    }
    c.check_out(0, &out, dt)?;
    c.same_q(0, 0)?;
    // TFLite pads quantized 8-bit tensors with the output zero point (real 0) by default.
    let fill = match dt {
        DType::I8 | DType::U8 => c.output(0)?.quant.map_or(0, |q| q.zero_point as i32 as u8),
        _ => 0,
    };
    if c.has_input(2) && matches!(dt, DType::I8 | DType::U8) {
        let v = c.input(2)?;
        if let (Some(a), Some(b)) = (&v.qparams, &c.output(0)?.qparams) {
            if a != b {
                return Err(c.err("the pad value's quantization differs from the output's"));
            }
        }
    }
    Ok(Kind::Pad(Pad::Constant {
        in_shape: s.to_vec(),
        before,
        after,
        size: dt.size(),
        fill,
    }))
}

fn mirror_pad(c: &Ctx<'_, '_>) -> Result<Kind> {
    if data_dtype(c, 0)? != DType::F32 {
        return Err(c.err("only float32 data is supported"));
    }
    let symmetric = match c.options(tag::MIRROR_PAD)? {
        Some(t) => c.opt(t.i8(schema::MirrorPadOptions::VT_MODE, 0))? == 1,
        None => false,
    };
    let Kind::Pad(Pad::Constant {
        in_shape,
        before,
        after,
        ..
    }) = pad(c)?
    else {
        return Err(c.err("paddings"));
    };
    for d in 0..in_shape.len() {
        // Each side may take at most dim (SYMMETRIC) or dim - 1 (REFLECT) values.
        let limit = if symmetric {
            in_shape[d]
        } else {
            in_shape[d].saturating_sub(1)
        };
        if before[d] > limit || after[d] > limit {
            return Err(c.err(format!(
                "padding {} / {} too large for dimension {}",
                before[d], after[d], in_shape[d]
            )));
        }
    }
    Ok(Kind::Pad(Pad::Mirror {
        in_shape,
        before,
        after,
        symmetric,
    }))
}

impl Pad {
    /// Runs the operator reading `ins`, writing `out`.
    pub(super) fn run<'b>(
        &self,
        _index: usize,
        _op: &'b OpDesc<'b>,
        ins: Ins<'b>,
        out: &mut [u8],
        _scratch: &mut Scratch,
    ) -> Result<()> {
        match self {
            Pad::Mirror {
                in_shape,
                before,
                after,
                symmetric,
            } => {
                #[cfg(feature = "ops-pad")]
                {
                    so::mirror_pad_f32(
                        ins.typed::<f32>(0)?,
                        in_shape,
                        before,
                        after,
                        *symmetric,
                        cast_out(out)?,
                    )
                }
                #[cfg(not(feature = "ops-pad"))]
                return Err(super::compiled_out(_index, _op));
            }
            Pad::Constant {
                in_shape,
                before,
                after,
                size,
                fill,
            } => {
                #[cfg(feature = "ops-pad")]
                {
                    {
                        let value = if ins.has(2) {
                            ins.bytes(2).unwrap_or(&[])
                        } else {
                            &[]
                        };
                        let mut v = [0u8; 8];
                        v[0] = *fill;
                        if value.len() >= *size {
                            v[..*size].copy_from_slice(&value[..*size]);
                        }
                        match size {
                            1 => so::pad(
                                ins.typed::<u8>(0)?,
                                in_shape,
                                before,
                                after,
                                v[0],
                                cast_out(out)?,
                            ),
                            2 => so::pad(
                                ins.typed::<u16>(0)?,
                                in_shape,
                                before,
                                after,
                                u16::from_le_bytes([v[0], v[1]]),
                                cast_out(out)?,
                            ),
                            4 => so::pad(
                                ins.typed::<u32>(0)?,
                                in_shape,
                                before,
                                after,
                                u32::from_le_bytes([v[0], v[1], v[2], v[3]]),
                                cast_out(out)?,
                            ),
                            _ => so::pad(
                                ins.typed::<u64>(0)?,
                                in_shape,
                                before,
                                after,
                                u64::from_le_bytes(v),
                                cast_out(out)?,
                            ),
                        }
                    }
                }
                #[cfg(not(feature = "ops-pad"))]
                return Err(super::compiled_out(_index, _op));
            }
        }
        Ok(())
    }
}

impl Pad {
    /// Constant padding's row kernel split over the workers (`simd::pad_rows`), where the fast
    /// kernels run.
    pub(super) fn fast(&self, isa: Isa) -> Option<Fast> {
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        return {
            let _ = isa;
            None
        };
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        {
            let rows = simd::FAST_KERNELS && isa != Isa::Portable;
            match self {
                Pad::Constant { .. } if rows => Some(Fast::PadRows),
                _ => None,
            }
        }
    }

    /// Runs constant padding by output rows over the workers, or (the innermost dimension
    /// padded) with the portable kernel (`None` if `fast` is not this operator's, which
    /// [`Fast::prepare`] rules out).
    #[inline]
    pub(super) fn run_fast(
        &self,
        fast: &Fast,
        ins: &Ins<'_>,
        out: &mut [u8],
        s: &mut Workers,
    ) -> Option<()> {
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        return {
            let _ = (fast, ins, out, s);
            None
        };
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        {
            let (
                Fast::PadRows,
                Pad::Constant {
                    in_shape,
                    before,
                    after,
                    size,
                    fill,
                },
            ) = (fast, self)
            else {
                return None;
            };
            let value = if ins.has(2) {
                ins.bytes(2).unwrap_or(&[])
            } else {
                &[]
            };
            let mut v = [0u8; 8];
            v[0] = *fill;
            if value.len() >= *size {
                v[..*size].copy_from_slice(&value[..*size]);
            }
            fn go<T: Copy + Send + Sync + bytemuck::Pod>(
                ins: &Ins<'_>,
                (shape, before, after): (&[usize], &[usize], &[usize]),
                value: T,
                out: &mut [u8],
                s: &mut Workers,
            ) -> Option<()> {
                let (i, o) = (ins.typed::<T>(0).ok()?, cast_out::<T>(out).ok()?);
                if !simd::pad_rows(i, shape, before, after, value, o, s) {
                    so::pad(i, shape, before, after, value, o);
                }
                Some(())
            }
            let dims = (&in_shape[..], &before[..], &after[..]);
            match size {
                1 => go(ins, dims, v[0], out, s),
                2 => go(ins, dims, u16::from_le_bytes([v[0], v[1]]), out, s),
                4 => go(
                    ins,
                    dims,
                    u32::from_le_bytes([v[0], v[1], v[2], v[3]]),
                    out,
                    s,
                ),
                _ => go(ins, dims, u64::from_le_bytes(v), out, s),
            }
        }
    }
}
