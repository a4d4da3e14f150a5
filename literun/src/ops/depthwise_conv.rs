//! DEPTHWISE_CONV_2D (float32, int8, int16x8, hybrid).
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

use super::buffers::{bias_i32, bias_i64, cast_out, Ins, Scratch};
use super::context::{
    activation, bias_check, conv_out_and_pad, f32_inputs, filter_scales, hybrid_bias, output_stage,
    padding_same, positive, tag, Ctx,
};
use super::fast::{Constants, Fast};
use super::{Kind, Precision};
use crate::error::{format, Result};
use crate::kernels::conv::HybridInput;
use crate::kernels::depthwise_conv::DepthwiseParams;
use crate::kernels::simd;
use crate::kernels::simd::Workers;
use crate::kernels::simd::{DwF32, DwI8, Isa};
use crate::kernels::{conv, depthwise_conv};
use crate::model::{DType, OpDesc};
use crate::quant::OutputStage;
use crate::schema;
use crate::schema::BuiltinOperator as B;
use alloc::vec::Vec;

/// A prepared DEPTHWISE_CONV_2D, by element type.
#[derive(Debug)]
pub(crate) enum Depthwise {
    /// Int8, or int16x8 (int16 activations, int8 weights, int64 bias): the same parameters,
    /// run by the kernel of `precision`.
    Quantized {
        precision: Precision,
        params: DepthwiseParams,
        in_shape: [usize; 4],
        filter_shape: [usize; 4],
        out_shape: [usize; 4],
        q: OutputStage,
    },
    Hybrid {
        params: DepthwiseParams,
        in_shape: [usize; 4],
        filter_shape: [usize; 4],
        out_shape: [usize; 4],
        scales: Vec<f32>,
        mode: HybridInput,
    },
    F32 {
        params: DepthwiseParams,
        in_shape: [usize; 4],
        filter_shape: [usize; 4],
        out_shape: [usize; 4],
    },
}

/// Prepares DEPTHWISE_CONV_2D: this family's entry in the operator table
/// ([`crate::model::registry::op_table`]).
pub(super) fn prepare(c: &Ctx<'_, '_>, _code: B) -> Result<Kind> {
    depthwise(c)
}

fn depthwise(c: &Ctx<'_, '_>) -> Result<Kind> {
    let (in_dt, f_dt) = (c.dtype(0)?, c.dtype(1)?);
    if (in_dt, f_dt) == (DType::F32, DType::F32) {
        f32_inputs(c, 3)?;
    }
    use schema::DepthwiseConv2DOptions as O;
    let t = c.options(tag::DEPTHWISE_CONV_2D)?;
    let get = |v, d| -> Result<i32> { t.map_or(Ok(d), |t| c.opt(t.i32(v, d))) };
    let same = padding_same(c, t.map_or(Ok(0), |t| c.opt(t.i8(O::VT_PADDING, 0)))?)?;
    let sw = positive(c, get(O::VT_STRIDE_W, 0)?, "stride_w")?;
    let sh = positive(c, get(O::VT_STRIDE_H, 0)?, "stride_h")?;
    let dw = positive(c, get(O::VT_DILATION_W_FACTOR, 1)?, "dilation_w")?;
    let dh = positive(c, get(O::VT_DILATION_H_FACTOR, 1)?, "dilation_h")?;
    let act = c.opt(
        t.map_or(Ok(0), |t| t.i8(O::VT_FUSED_ACTIVATION_FUNCTION, 0))
            .and_then(activation),
    )?;
    let is = c.shape4(0)?;
    let fs = c.shape4(1)?;
    if fs[0] != 1 || is[3] == 0 || fs[3] % is[3] != 0 {
        return Err(c.err(format!(
            "filter {fs:?} does not fit input channels {}",
            is[3]
        )));
    }
    bias_check(c, 2, fs[3])?;
    let (oh, pt) = conv_out_and_pad(c, same, is[1], fs[1], sh, dh)?;
    let (ow, pl) = conv_out_and_pad(c, same, is[2], fs[2], sw, dw)?;
    let os = [is[0], oh, ow, fs[3]];
    let params = DepthwiseParams {
        stride_h: sh,
        stride_w: sw,
        dilation_h: dh,
        dilation_w: dw,
        pad_top: pt,
        pad_left: pl,
        depth_multiplier: fs[3] / is[3],
        activation: act,
    };
    match (in_dt, f_dt) {
        (DType::F32, DType::F32) => {
            c.check_out(0, &os, DType::F32)?;
            Ok(Kind::Depthwise(Depthwise::F32 {
                params,
                in_shape: is,
                filter_shape: fs,
                out_shape: os,
            }))
        }
        (DType::I8, DType::I8) => {
            c.check_out(0, &os, DType::I8)?;
            let q = output_stage(c, fs[3], 3, act, false)?;
            Ok(Kind::Depthwise(Depthwise::Quantized {
                precision: Precision::I8,
                params,
                in_shape: is,
                filter_shape: fs,
                out_shape: os,
                q,
            }))
        }
        (DType::I16, DType::I8) => {
            c.check_out(0, &os, DType::I16)?;
            let q = output_stage(c, fs[3], 3, act, false)?;
            Ok(Kind::Depthwise(Depthwise::Quantized {
                precision: Precision::I16,
                params,
                in_shape: is,
                filter_shape: fs,
                out_shape: os,
                q,
            }))
        }
        (DType::F32, DType::I8) => {
            c.check_out(0, &os, DType::F32)?;
            if c.input(1)?.data.is_none() {
                return Err(c.err("a hybrid DEPTHWISE_CONV_2D needs a constant int8 filter"));
            }
            hybrid_bias(c)?;
            let scales = filter_scales(c, 1, fs[3], 3)?;
            Ok(Kind::Depthwise(Depthwise::Hybrid {
                params,
                in_shape: is,
                filter_shape: fs,
                out_shape: os,
                scales,
                // TFLite's hybrid depthwise always quantizes the input asymmetrically.
                mode: HybridInput::Asymmetric,
            }))
        }
        (a, b) => Err(c.err(format!(
            "input {} with filter {} is not supported",
            a.name(),
            b.name()
        ))),
    }
}

impl Depthwise {
    /// Runs the operator reading `ins`, writing `out`.
    pub(super) fn run<'b>(
        &self,
        _index: usize,
        _op: &'b OpDesc<'b>,
        ins: Ins<'b>,
        out: &mut [u8],
        scratch: &mut Scratch,
    ) -> Result<()> {
        let bias = |k: usize| ins.optional_f32(k);
        match self {
            Depthwise::Quantized {
                precision: Precision::I16,
                params,
                in_shape,
                filter_shape,
                out_shape,
                q,
            } => {
                #[cfg(all(feature = "ops-depthwise-conv", feature = "ops-int16"))]
                {
                    depthwise_conv::depthwise_conv2d_16x8(
                        ins.typed(0)?,
                        *in_shape,
                        ins.typed(1)?,
                        *filter_shape,
                        bias_i64(&ins)?,
                        params,
                        q,
                        cast_out(out)?,
                        *out_shape,
                    )
                }
                #[cfg(not(all(feature = "ops-depthwise-conv", feature = "ops-int16")))]
                return Err(super::compiled_out(_index, _op));
            }
            Depthwise::Quantized {
                precision: Precision::I8,
                params,
                in_shape,
                filter_shape,
                out_shape,
                q,
            } => {
                #[cfg(all(feature = "ops-depthwise-conv", feature = "ops-int8"))]
                {
                    depthwise_conv::depthwise_conv2d_i8(
                        ins.typed(0)?,
                        *in_shape,
                        ins.typed(1)?,
                        *filter_shape,
                        bias_i32(&ins)?,
                        params,
                        q,
                        &mut scratch.i32s,
                        cast_out(out)?,
                        *out_shape,
                    )
                }
                #[cfg(not(all(feature = "ops-depthwise-conv", feature = "ops-int8")))]
                return Err(super::compiled_out(_index, _op));
            }
            Depthwise::Hybrid {
                params,
                in_shape,
                filter_shape,
                out_shape,
                scales,
                mode,
            } => {
                #[cfg(all(feature = "ops-depthwise-conv", feature = "ops-hybrid"))]
                {
                    {
                        let n = in_shape[0];
                        let (offsets, acc) = scratch.i32s.split_at_mut(n);
                        let mut hs = conv::HybridScratch {
                            quantized: &mut scratch.i8s,
                            scales: &mut scratch.f32s[..n],
                            offsets,
                        };
                        depthwise_conv::depthwise_conv2d_hybrid(
                            ins.typed(0)?,
                            *in_shape,
                            ins.typed(1)?,
                            *filter_shape,
                            scales,
                            bias(2)?,
                            params,
                            *mode,
                            &mut hs,
                            acc,
                            cast_out(out)?,
                            *out_shape,
                        )
                    }
                }
                #[cfg(not(all(feature = "ops-depthwise-conv", feature = "ops-hybrid")))]
                return Err(super::compiled_out(_index, _op));
            }
            Depthwise::F32 {
                params,
                in_shape,
                filter_shape,
                out_shape,
            } => {
                #[cfg(all(feature = "ops-depthwise-conv", feature = "ops-float"))]
                {
                    depthwise_conv::depthwise_conv2d_f32(
                        ins.typed(0)?,
                        *in_shape,
                        ins.typed(1)?,
                        *filter_shape,
                        bias(2)?,
                        params,
                        cast_out(out)?,
                        *out_shape,
                    )
                }
                #[cfg(not(all(feature = "ops-depthwise-conv", feature = "ops-float")))]
                return Err(super::compiled_out(_index, _op));
            }
        }
        Ok(())
    }
}

impl Depthwise {
    /// Scratch this operator needs at run time: (i8 values, f32 values, i32 values).
    pub(super) fn scratch(&self) -> (usize, usize, usize) {
        match self {
            Depthwise::Hybrid {
                in_shape,
                filter_shape,
                ..
            } => (
                in_shape.iter().product(),
                in_shape[0],
                in_shape[0] + filter_shape[3],
            ),
            Depthwise::Quantized {
                precision: Precision::I8,
                filter_shape,
                ..
            } => (0, 0, filter_shape[3]),
            Depthwise::F32 { .. }
            | Depthwise::Quantized {
                precision: Precision::I16,
                ..
            } => (0, 0, 0),
        }
    }
}

impl Depthwise {
    /// This operator's SIMD kernel with its constant weights packed for `isa`, if it has one.
    pub(super) fn fast(&self, isa: Isa, constants: &Constants<'_, '_>) -> Option<Fast> {
        match self {
            Depthwise::Quantized {
                precision: Precision::I8,
                params,
                filter_shape: [_, kh, kw, c],
                q,
                ..
            } if params.depth_multiplier == 1 => {
                let dil = [params.dilation_h, params.dilation_w];
                DwI8::pack(
                    isa,
                    constants.weights_i8()?,
                    kh * kw,
                    *c,
                    constants.bias_i32()?,
                    q,
                )
                .map(|dw| Fast::DepthwiseI8(dw.for_window(*kh, *kw, dil)))
            }
            Depthwise::F32 {
                params,
                filter_shape: [_, kh, kw, c],
                ..
            } if params.depth_multiplier == 1 => DwF32::pack(
                isa,
                constants.weights_f32()?,
                kh * kw,
                *c,
                constants.bias_f32()?,
                params.activation,
            )
            .map(Fast::Depthwise),
            _ => None,
        }
    }
}

impl Depthwise {
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
            (
                Fast::DepthwiseI8(d),
                Depthwise::Quantized {
                    precision: Precision::I8,
                    params,
                    in_shape,
                    filter_shape,
                    out_shape,
                    ..
                },
            ) => simd::depthwise_i8(
                d,
                ins.typed(0).ok()?,
                *in_shape,
                [filter_shape[1], filter_shape[2]],
                params,
                cast_out(out).ok()?,
                *out_shape,
                s,
            ),
            (
                Fast::Depthwise(d),
                Depthwise::F32 {
                    params,
                    in_shape,
                    filter_shape,
                    out_shape,
                },
            ) => simd::depthwise_f32(
                d,
                ins.typed(0).ok()?,
                *in_shape,
                [filter_shape[1], filter_shape[2]],
                params,
                cast_out(out).ok()?,
                *out_shape,
                s,
            ),
            _ => return None,
        }
        Some(())
    }
}
