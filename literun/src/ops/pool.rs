//! MAX_POOL_2D and AVERAGE_POOL_2D (float32, int8, int16), L2_POOL_2D (float32).
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
use super::context::{act_range, activation, conv_out_and_pad, padding_same, positive, tag, Ctx};
use super::fast::Fast;
use super::{Kind, Precision};
use crate::error::Result;
use crate::kernels::pool;
use crate::kernels::pool::Pool2dParams;
use crate::kernels::simd::{self, Isa, Workers};
use crate::model::{DType, OpDesc};
use crate::schema;
use crate::schema::BuiltinOperator as B;

/// A prepared MAX_POOL_2D or AVERAGE_POOL_2D, by element type.
#[derive(Debug)]
pub(crate) enum Pool {
    /// Int8 or int16 (same input and output quantization; TFLite does not requantize).
    Quantized {
        precision: Precision,
        max: bool,
        params: Pool2dParams,
        in_shape: [usize; 4],
        out_shape: [usize; 4],
        act_min: i32,
        act_max: i32,
    },
    F32 {
        max: bool,
        params: Pool2dParams,
        in_shape: [usize; 4],
        out_shape: [usize; 4],
    },
    /// L2_POOL_2D.
    L2F32 {
        params: Pool2dParams,
        in_shape: [usize; 4],
        out_shape: [usize; 4],
    },
}

/// Prepares MAX_POOL_2D or AVERAGE_POOL_2D: this family's entry in the operator table
/// ([`crate::model::registry::op_table`]).
pub(super) fn prepare(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    pool2d(c, code)
}

fn pool2d(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    let max = code == B::MAX_POOL_2D;
    let dt = if code == B::L2_POOL_2D {
        c.want_dtype(0, &[DType::F32])?
    } else {
        c.want_dtype(0, &[DType::F32, DType::I8, DType::I16])?
    };
    use schema::Pool2DOptions as O;
    let t = c
        .options(tag::POOL_2D)?
        .ok_or_else(|| c.err("missing Pool2DOptions"))?;
    let same = padding_same(c, c.opt(t.i8(O::VT_PADDING, 0))?)?;
    let sw = positive(c, c.opt(t.i32(O::VT_STRIDE_W, 0))?, "stride_w")?;
    let sh = positive(c, c.opt(t.i32(O::VT_STRIDE_H, 0))?, "stride_h")?;
    let fw = positive(c, c.opt(t.i32(O::VT_FILTER_WIDTH, 0))?, "filter_width")?;
    let fh = positive(c, c.opt(t.i32(O::VT_FILTER_HEIGHT, 0))?, "filter_height")?;
    let act = c.opt(
        t.i8(O::VT_FUSED_ACTIVATION_FUNCTION, 0)
            .and_then(activation),
    )?;
    let is = c.shape4(0)?;
    let (oh, pt) = conv_out_and_pad(c, same, is[1], fh, sh, 1)?;
    let (ow, pl) = conv_out_and_pad(c, same, is[2], fw, sw, 1)?;
    let os = [is[0], oh, ow, is[3]];
    c.check_out(0, &os, dt)?;
    let params = Pool2dParams {
        filter_h: fh,
        filter_w: fw,
        stride_h: sh,
        stride_w: sw,
        pad_top: pt,
        pad_left: pl,
        activation: act,
    };
    if matches!(dt, DType::I8 | DType::I16) {
        let (qi, qo) = (c.in_q8(0)?, c.out_q8(0)?);
        if (qi.scale - qo.scale).abs() > 1e-6 || qi.zero_point != qo.zero_point {
            return Err(c.err(
                "quantized pooling needs the same input and output quantization (TFLite does \
                 not requantize)",
            ));
        }
        let (act_min, act_max) = act_range(c, act, qo, dt)?;
        return Ok(Kind::Pool(Pool::Quantized {
            precision: Precision::of(dt),
            max,
            params,
            in_shape: is,
            out_shape: os,
            act_min,
            act_max,
        }));
    }
    if code == B::L2_POOL_2D {
        return Ok(Kind::Pool(Pool::L2F32 {
            params,
            in_shape: is,
            out_shape: os,
        }));
    }
    Ok(Kind::Pool(Pool::F32 {
        max,
        params,
        in_shape: is,
        out_shape: os,
    }))
}

impl Pool {
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
            Pool::Quantized {
                precision: Precision::I16,
                max,
                params,
                in_shape,
                out_shape,
                act_min,
                act_max,
            } => {
                #[cfg(all(feature = "ops-pool", feature = "ops-int16"))]
                {
                    pool::pool_quantized::<i16>(
                        *max,
                        ins.typed(0)?,
                        *in_shape,
                        params,
                        *act_min,
                        *act_max,
                        cast_out(out)?,
                        *out_shape,
                    )
                }
                #[cfg(not(all(feature = "ops-pool", feature = "ops-int16")))]
                return Err(super::compiled_out(_index, _op));
            }
            Pool::Quantized {
                precision: Precision::I8,
                max,
                params,
                in_shape,
                out_shape,
                act_min,
                act_max,
            } => {
                #[cfg(all(feature = "ops-pool", feature = "ops-int8"))]
                {
                    pool::pool_quantized::<i8>(
                        *max,
                        ins.typed(0)?,
                        *in_shape,
                        params,
                        *act_min,
                        *act_max,
                        cast_out(out)?,
                        *out_shape,
                    )
                }
                #[cfg(not(all(feature = "ops-pool", feature = "ops-int8")))]
                return Err(super::compiled_out(_index, _op));
            }
            Pool::F32 {
                max,
                params,
                in_shape,
                out_shape,
            } => {
                #[cfg(all(feature = "ops-pool", feature = "ops-float"))]
                {
                    {
                        if *max {
                            pool::max_pool_f32(
                                ins.typed(0)?,
                                *in_shape,
                                params,
                                cast_out(out)?,
                                *out_shape,
                            )
                        } else {
                            pool::average_pool_f32(
                                ins.typed(0)?,
                                *in_shape,
                                params,
                                cast_out(out)?,
                                *out_shape,
                            )
                        }
                    }
                }
                #[cfg(not(all(feature = "ops-pool", feature = "ops-float")))]
                return Err(super::compiled_out(_index, _op));
            }
            Pool::L2F32 {
                params,
                in_shape,
                out_shape,
            } => {
                #[cfg(all(feature = "ops-pool", feature = "ops-float"))]
                pool::l2_pool_f32(ins.typed(0)?, *in_shape, params, cast_out(out)?, *out_shape);
                #[cfg(not(all(feature = "ops-pool", feature = "ops-float")))]
                return Err(super::compiled_out(_index, _op));
            }
        }
        Ok(())
    }
}

impl Pool {
    /// Int8 and float MAX_POOL_2D's vector kernel for `isa`, if it has one.
    pub(super) fn fast(&self, isa: Isa) -> Option<Fast> {
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        return {
            let _ = isa;
            None
        };
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        {
            let vectors = simd::FAST_KERNELS && isa != Isa::Portable;
            match self {
                Pool::Quantized {
                    precision: Precision::I8,
                    max: true,
                    ..
                }
                | Pool::F32 { max: true, .. }
                    if vectors =>
                {
                    Some(Fast::MaxPool(isa))
                }
                _ => None,
            }
        }
    }

    /// Runs this operator with its vector kernel `fast` (`None` if `fast` is not this
    /// operator's, which [`Fast::prepare`] rules out).
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
            let Fast::MaxPool(isa) = fast else {
                return None;
            };
            match self {
                Pool::Quantized {
                    precision: Precision::I8,
                    max: true,
                    params,
                    in_shape,
                    out_shape,
                    act_min,
                    act_max,
                } => {
                    let bounds = simd::pool_bounds_i8(*act_min, *act_max);
                    let (i, o) = (ins.typed::<i8>(0).ok()?, cast_out(out).ok()?);
                    simd::max_pool(*isa, i, *in_shape, params, bounds, o, *out_shape, s);
                }
                Pool::F32 {
                    max: true,
                    params,
                    in_shape,
                    out_shape,
                } => {
                    let (i, o) = (ins.typed::<f32>(0).ok()?, cast_out(out).ok()?);
                    let act = params.activation;
                    simd::max_pool(*isa, i, *in_shape, params, act, o, *out_shape, s);
                }
                _ => return None,
            }
            Some(())
        }
    }
}
