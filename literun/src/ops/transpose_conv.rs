//! TRANSPOSE_CONV (float32, int8).
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
use super::context::{
    activation, bias_check, conv_out_and_pad, output_stage_at, padding_same, positive, tag, Ctx,
};
use super::Kind;
use crate::error::{format, Result};
use crate::kernels::transpose_conv;
use crate::kernels::transpose_conv::TransposeConvParams;
use crate::model::{DType, OpDesc};
use crate::quant::OutputStage;
use crate::schema;
use crate::schema::BuiltinOperator as B;

/// A prepared TRANSPOSE_CONV, by element type.
#[derive(Debug)]
pub(crate) enum TransposeConv {
    F32 {
        params: TransposeConvParams,
        in_shape: [usize; 4],
        filter_shape: [usize; 4],
        out_shape: [usize; 4],
    },
    /// Int8 TRANSPOSE_CONV (per-tensor input/output, per-channel or per-tensor filter, int32
    /// bias).
    I8 {
        params: TransposeConvParams,
        in_shape: [usize; 4],
        filter_shape: [usize; 4],
        out_shape: [usize; 4],
        q: OutputStage,
    },
}

/// Prepares TRANSPOSE_CONV: this family's entry in the operator table
/// ([`crate::model::registry::op_table`]).
pub(super) fn prepare(c: &Ctx<'_, '_>, _code: B) -> Result<Kind> {
    transpose_conv(c)
}

fn transpose_conv(c: &Ctx<'_, '_>) -> Result<Kind> {
    let int8 = match (c.dtype(2)?, c.dtype(1)?) {
        (DType::F32, DType::F32) => {
            if c.has_input(3) {
                c.want_dtype(3, &[DType::F32])?;
            }
            false
        }
        (DType::I8, DType::I8) => true,
        (a, b) => {
            return Err(c.err(format!(
                "input {} with filter {} is not supported",
                a.name(),
                b.name()
            )))
        }
    };
    use schema::TransposeConvOptions as O;
    let t = c.options(tag::TRANSPOSE_CONV)?;
    let get = |v, d| -> Result<i32> { t.map_or(Ok(d), |t| c.opt(t.i32(v, d))) };
    let same = padding_same(c, t.map_or(Ok(0), |t| c.opt(t.i8(O::VT_PADDING, 0)))?)?;
    let sw = positive(c, get(O::VT_STRIDE_W, 0)?, "stride_w")?;
    let sh = positive(c, get(O::VT_STRIDE_H, 0)?, "stride_h")?;
    let act = c.opt(
        t.map_or(Ok(0), |t| t.i8(O::VT_FUSED_ACTIVATION_FUNCTION, 0))
            .and_then(activation),
    )?;
    let fs = c.shape4(1)?;
    let is = c.shape4(2)?;
    let target = c.const_ints(0)?;
    if target.len() != 4 || target.iter().any(|&v| v < 0 || v > i64::from(i32::MAX)) {
        return Err(c.err(format!("bad output_shape {target:?}")));
    }
    let os = [
        target[0] as usize,
        target[1] as usize,
        target[2] as usize,
        target[3] as usize,
    ];
    if fs[3] != is[3] || os[3] != fs[0] || os[0] != is[0] {
        return Err(c.err(format!(
            "input {is:?}, filter {fs:?} and output {os:?} do not match"
        )));
    }
    bias_check(c, 3, fs[0])?;
    c.check_out(0, &os, if int8 { DType::I8 } else { DType::F32 })?;
    // TFLite: padding from the output size, as for the forward convolution producing the input.
    let (_, pt) = conv_out_and_pad(c, same, os[1], fs[1], sh, 1)?;
    let (_, pl) = conv_out_and_pad(c, same, os[2], fs[2], sw, 1)?;
    let params = TransposeConvParams {
        stride_h: sh,
        stride_w: sw,
        pad_top: pt,
        pad_left: pl,
        activation: act,
    };
    if int8 {
        let q = output_stage_at(c, [2, 1, 3], fs[0], 0, act, false)?;
        return Ok(Kind::TransposeConv(TransposeConv::I8 {
            params,
            in_shape: is,
            filter_shape: fs,
            out_shape: os,
            q,
        }));
    }
    Ok(Kind::TransposeConv(TransposeConv::F32 {
        params,
        in_shape: is,
        filter_shape: fs,
        out_shape: os,
    }))
}

impl TransposeConv {
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
            TransposeConv::F32 {
                params,
                in_shape,
                filter_shape,
                out_shape,
            } => {
                #[cfg(all(feature = "ops-transpose-conv", feature = "ops-float"))]
                {
                    transpose_conv::transpose_conv_f32(
                        ins.typed(2)?,
                        *in_shape,
                        ins.typed(1)?,
                        *filter_shape,
                        bias(3)?,
                        params,
                        cast_out(out)?,
                        *out_shape,
                    )
                }
                #[cfg(not(all(feature = "ops-transpose-conv", feature = "ops-float")))]
                return Err(super::compiled_out(_index, _op));
            }
            TransposeConv::I8 {
                params,
                in_shape,
                filter_shape,
                out_shape,
                q,
            } => {
                #[cfg(all(feature = "ops-transpose-conv", feature = "ops-int8"))]
                {
                    {
                        let n: usize = out_shape.iter().product();
                        transpose_conv::transpose_conv_i8(
                            ins.typed(2)?,
                            *in_shape,
                            ins.typed(1)?,
                            *filter_shape,
                            if ins.has(3) {
                                Some(ins.typed::<i32>(3)?)
                            } else {
                                None
                            },
                            params,
                            q,
                            &mut scratch.i32s[..n],
                            cast_out(out)?,
                            *out_shape,
                        )
                    }
                }
                #[cfg(not(all(feature = "ops-transpose-conv", feature = "ops-int8")))]
                return Err(super::compiled_out(_index, _op));
            }
        }
        Ok(())
    }
}

impl TransposeConv {
    /// Scratch this operator needs at run time: (i8 values, f32 values, i32 values).
    pub(super) fn scratch(&self) -> (usize, usize, usize) {
        match self {
            TransposeConv::I8 { out_shape, .. } => (0, 0, out_shape.iter().product()),
            TransposeConv::F32 { .. } => (0, 0, 0),
        }
    }
}
