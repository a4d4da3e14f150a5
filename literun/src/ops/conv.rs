//! CONV_2D (float32, int8, int16x8, hybrid), and folding a PAD into the convolution reading it.
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
use super::depthwise_conv::Depthwise;
use super::fast::{Constants, Fast};
use super::pad::Pad;
use super::Precision;
use super::{prepare_op, Kind};
use crate::error::{format, Result};
use crate::kernels::conv;
use crate::kernels::conv::{Conv2dParams, HybridInput};
use crate::kernels::simd::Workers;
use crate::kernels::simd::{self, GemmF32, GemmI8, Isa, WinoF32};
use crate::model::{DType, Model, OpDesc};
use crate::quant::OutputStage;
use crate::schema;
use crate::schema::BuiltinOperator as B;
use alloc::vec;
use alloc::vec::Vec;

/// A prepared CONV_2D, by element type.
#[derive(Debug)]
pub(crate) enum Conv {
    /// Int8, or int16x8 (int16 activations, int8 weights, int64 bias): the same parameters,
    /// run by the kernel of `precision`.
    Quantized {
        precision: Precision,
        params: Conv2dParams,
        in_shape: [usize; 4],
        filter_shape: [usize; 4],
        out_shape: [usize; 4],
        q: OutputStage,
    },
    Hybrid {
        params: Conv2dParams,
        in_shape: [usize; 4],
        filter_shape: [usize; 4],
        out_shape: [usize; 4],
        scales: Vec<f32>,
        mode: HybridInput,
    },
    F32 {
        params: Conv2dParams,
        in_shape: [usize; 4],
        filter_shape: [usize; 4],
        out_shape: [usize; 4],
    },
}

/// Prepares CONV_2D: this family's entry in the operator table
/// ([`crate::model::registry::op_table`]).
pub(super) fn prepare(c: &Ctx<'_, '_>, _code: B) -> Result<Kind> {
    conv2d(c)
}

fn conv2d(c: &Ctx<'_, '_>) -> Result<Kind> {
    let (in_dt, f_dt) = (c.dtype(0)?, c.dtype(1)?);
    #[cfg(feature = "ops-float")]
    if (in_dt, f_dt) == (DType::F32, DType::F32) {
        f32_inputs(c, 3)?;
    }
    use schema::Conv2DOptions as O;
    let t = c.options(tag::CONV_2D)?;
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
    if fs[3] == 0 || is[3] % fs[3] != 0 || fs[0] % (is[3] / fs[3]).max(1) != 0 {
        return Err(c.err(format!(
            "filter {fs:?} does not fit input channels {}",
            is[3]
        )));
    }
    bias_check(c, 2, fs[0])?;
    let (oh, pt) = conv_out_and_pad(c, same, is[1], fs[1], sh, dh)?;
    let (ow, pl) = conv_out_and_pad(c, same, is[2], fs[2], sw, dw)?;
    let os = [is[0], oh, ow, fs[0]];
    let params = Conv2dParams {
        stride_h: sh,
        stride_w: sw,
        dilation_h: dh,
        dilation_w: dw,
        pad_top: pt,
        pad_left: pl,
        activation: act,
    };
    match (in_dt, f_dt) {
        #[cfg(feature = "ops-float")]
        (DType::F32, DType::F32) => {
            c.check_out(0, &os, DType::F32)?;
            Ok(Kind::Conv(Conv::F32 {
                params,
                in_shape: is,
                filter_shape: fs,
                out_shape: os,
            }))
        }
        #[cfg(feature = "ops-int8")]
        (DType::I8, DType::I8) => {
            c.check_out(0, &os, DType::I8)?;
            let q = output_stage(c, fs[0], 0, act, false)?;
            Ok(Kind::Conv(Conv::Quantized {
                precision: Precision::I8,
                params,
                in_shape: is,
                filter_shape: fs,
                out_shape: os,
                q,
            }))
        }
        #[cfg(feature = "ops-int16")]
        (DType::I16, DType::I8) => {
            c.check_out(0, &os, DType::I16)?;
            let q = output_stage(c, fs[0], 0, act, false)?;
            Ok(Kind::Conv(Conv::Quantized {
                precision: Precision::I16,
                params,
                in_shape: is,
                filter_shape: fs,
                out_shape: os,
                q,
            }))
        }
        #[cfg(feature = "ops-hybrid")]
        (DType::F32, DType::I8) => {
            c.check_out(0, &os, DType::F32)?;
            if c.input(1)?.data.is_none() {
                return Err(c.err("a hybrid CONV_2D needs a constant int8 filter"));
            }
            hybrid_bias(c)?;
            let scales = filter_scales(c, 1, fs[0], 0)?;
            // TFLite: per-channel (distinct scales) or grouped -> HybridConvPerChannel with
            // asymmetric input quantization; otherwise HybridConv with symmetric.
            let mode = if distinct_scales(&scales) || fs[3] != is[3] {
                HybridInput::Asymmetric
            } else {
                HybridInput::Symmetric
            };
            Ok(Kind::Conv(Conv::Hybrid {
                params,
                in_shape: is,
                filter_shape: fs,
                out_shape: os,
                scales,
                mode,
            }))
        }
        (a, b) => Err(c.err(format!(
            "input {} with filter {} is not supported",
            a.name(),
            b.name()
        ))),
    }
}

/// A PAD (or PADV2) whose padding the one convolution reading its output can do itself: the
/// convolution reads the PAD's input with the PAD's top/left padding added to its own, and the
/// PAD does not run. PyTorch's stride-2 convolutions pad 1 on every side, which SAME cannot
/// express for even sizes, so converted models keep PAD -> CONV_2D/DEPTHWISE_CONV_2D (VALID).
///
/// Found from the model alone by [`pad_folds`] (which prepares the two operators and folds
/// them as preparation will), so the arena planner (which keeps the PAD's input alive until
/// `conv` and gives the PAD's output no memory) and the interpreter see the same pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PadFold {
    pub(crate) pad: usize,
    pub(crate) conv: usize,
    /// The PAD's input, which the convolution reads instead of the PAD's output.
    pub(crate) input: usize,
    /// The PAD's output, which nothing reads once the PAD is folded.
    pub(crate) output: usize,
}

/// The PAD operators a convolution can absorb ([`PadFold`]): a PAD/PADV2 with constant,
/// non-negative paddings on the two spatial axes of a 4-D tensor only (a PADV2 value a constant),
/// whose output is no graph output, is written by it alone and read exactly once, as input 0 of
/// a later CONV_2D or DEPTHWISE_CONV_2D with VALID padding (float, int8, or int16x8: not hybrid,
/// whose dynamic input quantization would see the padded values), and whose input is not written
/// after it; and [`fold_pad`] folds the two operators' prepared kinds (pad value, geometry).
pub(crate) fn pad_folds(model: &Model<'_>) -> Vec<PadFold> {
    #[allow(unused_mut)]
    let mut folds = Vec::new();
    #[cfg(all(
        feature = "pad-fold",
        feature = "ops-pad",
        any(feature = "ops-conv", feature = "ops-depthwise-conv")
    ))]
    {
        let ops = model.operators();
        let tensors = model.tensors();
        let nt = tensors.len();
        // Per tensor: how many input slots read it and the last reader; how many outputs write
        // it and the last writer.
        let mut reads = vec![0usize; nt];
        let mut reader = vec![0usize; nt];
        let mut writes = vec![0usize; nt];
        let mut writer = vec![0usize; nt];
        for (i, op) in ops.iter().enumerate() {
            for &t in op.inputs.iter().flatten() {
                if t < nt {
                    reads[t] = reads[t].saturating_add(1);
                    reader[t] = i;
                }
            }
            for &t in &op.outputs {
                if t < nt {
                    writes[t] = writes[t].saturating_add(1);
                    writer[t] = i;
                }
            }
        }
        for info in model.outputs() {
            if let Some(r) = reads.get_mut(info.tensor) {
                // A graph output is read by the application.
                *r = usize::MAX;
            }
        }
        for (i, op) in ops.iter().enumerate() {
            let fold = || -> Option<PadFold> {
                if !matches!(op.code, B::PAD | B::PADV2) {
                    return None;
                }
                let (&[out], Some(Some(x))) = (&op.outputs[..], op.inputs.first()) else {
                    return None;
                };
                let x = *x;
                if x >= nt || out >= nt || reads[out] != 1 || writes[out] != 1 {
                    return None;
                }
                // The input keeps its value until the convolution: written before the PAD only.
                if writes[x] > 1 || writes[x] == 1 && writer[x] >= i {
                    return None;
                }
                let j = reader[out];
                let conv = ops.get(j).filter(|_| j > i)?;
                if conv.inputs.first() != Some(&Some(out)) {
                    return None;
                }
                let (expected, vt_padding) = match conv.code {
                    B::CONV_2D => (tag::CONV_2D, schema::Conv2DOptions::VT_PADDING),
                    B::DEPTHWISE_CONV_2D => (
                        tag::DEPTHWISE_CONV_2D,
                        schema::DepthwiseConv2DOptions::VT_PADDING,
                    ),
                    _ => return None,
                };
                // VALID is 1; options left out mean SAME.
                let cc = Ctx {
                    index: j,
                    op: conv,
                    tensors,
                    inferred: None,
                };
                let options = cc.options(expected).ok()??;
                if options.i8(vt_padding, 0).ok()? != 1 {
                    return None;
                }
                let filter = tensors.get(conv.inputs.get(1).copied().flatten()?)?;
                let (xt, ot) = (&tensors[x], &tensors[out]);
                if xt.dtype != ot.dtype
                    || !matches!(
                        (ot.dtype, filter.dtype),
                        (DType::F32, DType::F32) | (DType::I8, DType::I8) | (DType::I16, DType::I8)
                    )
                    || xt.shape.len() != 4
                {
                    return None;
                }
                let c = Ctx {
                    index: i,
                    op,
                    tensors,
                    inferred: None,
                };
                let value = match c.has_input(2) {
                    true => Some(c.input(2).ok()?.data?),
                    false => None,
                };
                let p = c.const_ints(1).ok()?;
                if p.len() != 8 || p.iter().any(|&v| v < 0) || p[0] | p[1] | p[6] | p[7] != 0 {
                    return None;
                }
                // Exactly what preparation will do.
                let pad = prepare_op(model, i, op).ok()?;
                let mut conv_kind = prepare_op(model, j, conv).ok()?;
                if !fold_pad(&pad, value, &mut conv_kind) {
                    return None;
                }
                Some(PadFold {
                    pad: i,
                    conv: j,
                    input: x,
                    output: out,
                })
            };
            if let Some(f) = fold() {
                folds.push(f);
            }
        }
    }
    folds
}

/// Makes the convolution `conv` do the work of the PAD `pad` (its kind; `value`: the bytes of a
/// PADV2's constant value) on the PAD's input: the input shape becomes the PAD's input shape
/// and `pad_top`/`pad_left` grow by the PAD's. Only when that is exact: the PAD pads the two
/// spatial axes of a non-empty 4-D tensor to the convolution's input shape, the convolution
/// has no padding of its own (VALID) and reads no tap beyond the padded input (so the taps the
/// kernels treat as out of range, contributing the input zero point or 0.0, are exactly the
/// padded ones, bottom/right included), and the pad value is what those taps stand for (0.0,
/// or the convolution's input zero point). Returns whether `conv` was changed.
pub(crate) fn fold_pad(pad: &Kind, value: Option<&[u8]>, conv: &mut Kind) -> bool {
    let Kind::Pad(Pad::Constant {
        in_shape,
        before,
        after,
        size,
        fill,
    }) = pad
    else {
        return false;
    };
    let (Ok(&[n, h, w, ch]), Ok(&[b0, top, left, c0]), Ok(&[b1, bottom, right, c1])) = (
        <&[usize; 4]>::try_from(&in_shape[..]),
        <&[usize; 4]>::try_from(&before[..]),
        <&[usize; 4]>::try_from(&after[..]),
    ) else {
        return false;
    };
    if b0 | c0 | b1 | c1 != 0 || n == 0 || h == 0 || w == 0 || ch == 0 {
        return false;
    }
    // The value the PAD writes (as `Pad::run` does: the fill byte, or the PADV2 constant).
    let mut v = [0u8; 8];
    v[0] = *fill;
    if let Some(val) = value {
        match (val.get(..*size), v.get_mut(..*size)) {
            (Some(s), Some(d)) => d.copy_from_slice(s),
            _ => return false,
        }
    }
    let zero_f32 = *size == 4 && v[..4] == [0; 4];
    let zp_i8 =
        |q: &OutputStage| *size == 1 && i32::from(v[0] as i8) == q.input_offset.wrapping_neg();
    let zp_i16 = |q: &OutputStage| {
        *size == 2 && i32::from(i16::from_le_bytes([v[0], v[1]])) == q.input_offset.wrapping_neg()
    };
    // (input shape, pad_top, pad_left, [stride, dilation] per axis, filter, output shape,
    // whether the pad value is what out-of-range taps stand for).
    let (padded, p_top, p_left, geo, fs, os, value_ok) = match conv {
        Kind::Conv(Conv::F32 {
            params: p,
            in_shape,
            filter_shape,
            out_shape,
        }) => (
            in_shape,
            &mut p.pad_top,
            &mut p.pad_left,
            [p.stride_h, p.dilation_h, p.stride_w, p.dilation_w],
            *filter_shape,
            *out_shape,
            zero_f32,
        ),
        Kind::Conv(Conv::Quantized {
            precision: Precision::I8,
            params: p,
            in_shape,
            filter_shape,
            out_shape,
            q,
        }) => (
            in_shape,
            &mut p.pad_top,
            &mut p.pad_left,
            [p.stride_h, p.dilation_h, p.stride_w, p.dilation_w],
            *filter_shape,
            *out_shape,
            zp_i8(q),
        ),
        Kind::Conv(Conv::Quantized {
            precision: Precision::I16,
            params: p,
            in_shape,
            filter_shape,
            out_shape,
            q,
        }) => (
            in_shape,
            &mut p.pad_top,
            &mut p.pad_left,
            [p.stride_h, p.dilation_h, p.stride_w, p.dilation_w],
            *filter_shape,
            *out_shape,
            zp_i16(q),
        ),
        Kind::Depthwise(Depthwise::F32 {
            params: p,
            in_shape,
            filter_shape,
            out_shape,
        }) => (
            in_shape,
            &mut p.pad_top,
            &mut p.pad_left,
            [p.stride_h, p.dilation_h, p.stride_w, p.dilation_w],
            *filter_shape,
            *out_shape,
            zero_f32,
        ),
        Kind::Depthwise(Depthwise::Quantized {
            precision: Precision::I8,
            params: p,
            in_shape,
            filter_shape,
            out_shape,
            q,
        }) => (
            in_shape,
            &mut p.pad_top,
            &mut p.pad_left,
            [p.stride_h, p.dilation_h, p.stride_w, p.dilation_w],
            *filter_shape,
            *out_shape,
            zp_i8(q),
        ),
        Kind::Depthwise(Depthwise::Quantized {
            precision: Precision::I16,
            params: p,
            in_shape,
            filter_shape,
            out_shape,
            q,
        }) => (
            in_shape,
            &mut p.pad_top,
            &mut p.pad_left,
            [p.stride_h, p.dilation_h, p.stride_w, p.dilation_w],
            *filter_shape,
            *out_shape,
            zp_i16(q),
        ),
        _ => return false,
    };
    if !value_ok || *p_top != 0 || *p_left != 0 {
        return false;
    }
    // The padded shape is the convolution's input shape.
    let (Some(ph), Some(pw)) = (
        h.checked_add(top).and_then(|v| v.checked_add(bottom)),
        w.checked_add(left).and_then(|v| v.checked_add(right)),
    ) else {
        return false;
    };
    if *padded != [n, ph, pw, ch] {
        return false;
    }
    // The last tap of each axis, `(out - 1) * stride + (k - 1) * dilation`, is inside the padded
    // input: the kernels treat taps at or beyond `h + pad_top` as padding, exactly the bottom
    // (right) padding.
    let within = |out: usize, k: usize, stride: usize, dilation: usize, padded: usize| {
        out.checked_sub(1)
            .and_then(|o| o.checked_mul(stride))
            .zip(k.checked_sub(1).and_then(|k| k.checked_mul(dilation)))
            .and_then(|(a, b)| a.checked_add(b))
            .is_some_and(|last| last < padded)
    };
    if !within(os[1], fs[1], geo[0], geo[1], ph) || !within(os[2], fs[2], geo[2], geo[3], pw) {
        return false;
    }
    *padded = [n, h, w, ch];
    *p_top = top;
    *p_left = left;
    true
}

/// Whether a filter's scales are not all equal (TFLite then uses its per-channel hybrid path).
pub(crate) fn distinct_scales(s: &[f32]) -> bool {
    s.iter().any(|&v| v != s[0])
}

impl Conv {
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
            Conv::Quantized {
                precision: Precision::I16,
                params,
                in_shape,
                filter_shape,
                out_shape,
                q,
            } => {
                #[cfg(all(feature = "ops-conv", feature = "ops-int16"))]
                {
                    conv::conv2d_16x8(
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
                #[cfg(not(all(feature = "ops-conv", feature = "ops-int16")))]
                return Err(super::compiled_out(_index, _op));
            }
            Conv::Quantized {
                precision: Precision::I8,
                params,
                in_shape,
                filter_shape,
                out_shape,
                q,
            } => {
                #[cfg(all(feature = "ops-conv", feature = "ops-int8"))]
                {
                    conv::conv2d_i8(
                        ins.typed(0)?,
                        *in_shape,
                        ins.typed(1)?,
                        *filter_shape,
                        bias_i32(&ins)?,
                        params,
                        q,
                        cast_out(out)?,
                        *out_shape,
                    )
                }
                #[cfg(not(all(feature = "ops-conv", feature = "ops-int8")))]
                return Err(super::compiled_out(_index, _op));
            }
            Conv::Hybrid {
                params,
                in_shape,
                filter_shape,
                out_shape,
                scales,
                mode,
            } => {
                #[cfg(all(feature = "ops-conv", feature = "ops-hybrid"))]
                {
                    {
                        let n = conv::hybrid_rows(*in_shape, *filter_shape, params, *mode);
                        let mut hs = conv::HybridScratch {
                            quantized: &mut scratch.i8s,
                            scales: &mut scratch.f32s[..n],
                            offsets: &mut scratch.i32s[..n],
                        };
                        conv::conv2d_hybrid(
                            ins.typed(0)?,
                            *in_shape,
                            ins.typed(1)?,
                            *filter_shape,
                            scales,
                            bias(2)?,
                            params,
                            *mode,
                            &mut hs,
                            cast_out(out)?,
                            *out_shape,
                        )
                    }
                }
                #[cfg(not(all(feature = "ops-conv", feature = "ops-hybrid")))]
                return Err(super::compiled_out(_index, _op));
            }
            Conv::F32 {
                params,
                in_shape,
                filter_shape,
                out_shape,
            } => {
                #[cfg(all(feature = "ops-conv", feature = "ops-float"))]
                {
                    conv::conv2d_f32(
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
                #[cfg(not(all(feature = "ops-conv", feature = "ops-float")))]
                return Err(super::compiled_out(_index, _op));
            }
        }
        Ok(())
    }
}

impl Conv {
    /// Scratch this operator needs at run time: (i8 values, f32 values, i32 values).
    pub(super) fn scratch(&self) -> (usize, usize, usize) {
        match self {
            Conv::Hybrid {
                in_shape,
                filter_shape,
                params,
                mode,
                ..
            } => {
                let rows = conv::hybrid_rows(*in_shape, *filter_shape, params, *mode);
                (in_shape.iter().product(), rows, rows)
            }
            Conv::F32 { .. }
            | Conv::Quantized {
                precision: Precision::I8,
                ..
            }
            | Conv::Quantized {
                precision: Precision::I16,
                ..
            } => (0, 0, 0),
        }
    }
}

impl Conv {
    /// This operator's SIMD kernel with its constant weights packed for `isa`, if it has one.
    pub(super) fn fast(
        &self,
        isa: Isa,
        winograd: bool,
        constants: &Constants<'_, '_>,
    ) -> Option<Fast> {
        match self {
            Conv::Quantized {
                precision: Precision::I8,
                in_shape,
                filter_shape: [o, kh, kw, i],
                q,
                ..
            } if *i == in_shape[3] => GemmI8::pack(
                isa,
                constants.weights_i8()?,
                *o,
                kh * kw * i,
                constants.bias_i32()?,
                q,
            )
            .map(Fast::ConvI8),
            Conv::F32 {
                params,
                in_shape,
                filter_shape: [o, 3, 3, i],
                out_shape,
                ..
            } if *i == in_shape[3]
                && [
                    params.stride_h,
                    params.stride_w,
                    params.dilation_h,
                    params.dilation_w,
                ] == [1; 4] =>
            {
                let w = constants.weights_f32()?;
                let b = constants.bias_f32()?;
                let tiles = out_shape[1].div_ceil(2) * out_shape[2].div_ceil(2);
                let wino = (winograd && tiles >= simd::WINO_MIN_TILES)
                    .then(|| WinoF32::pack(isa.vector(), w, *o, *i, b, params.activation))
                    .flatten();
                match wino {
                    Some(wf) => Some(Fast::ConvWino(wf)),
                    None => GemmF32::pack(isa.vector(), w, *o, 9 * i, b, params.activation)
                        .map(Fast::Conv),
                }
            }
            Conv::F32 {
                params,
                in_shape,
                filter_shape: [o, kh, kw, i],
                ..
            } if *i == in_shape[3] => GemmF32::pack(
                isa.vector(),
                constants.weights_f32()?,
                *o,
                kh * kw * i,
                constants.bias_f32()?,
                params.activation,
            )
            .map(Fast::Conv),
            _ => None,
        }
    }
}

impl Conv {
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
                Fast::ConvI8(g),
                Conv::Quantized {
                    precision: Precision::I8,
                    params,
                    in_shape,
                    filter_shape,
                    out_shape,
                    q,
                },
            ) => simd::conv2d_i8(
                g,
                ins.typed(0).ok()?,
                *in_shape,
                *filter_shape,
                params,
                q.input_offset,
                cast_out(out).ok()?,
                *out_shape,
                s,
            ),
            (
                Fast::Conv(g),
                Conv::F32 {
                    params,
                    in_shape,
                    filter_shape,
                    out_shape,
                },
            ) => simd::conv2d_f32(
                g,
                ins.typed(0).ok()?,
                *in_shape,
                *filter_shape,
                params,
                cast_out(out).ok()?,
                *out_shape,
                s,
            ),
            (
                Fast::ConvWino(w),
                Conv::F32 {
                    params,
                    in_shape,
                    out_shape,
                    ..
                },
            ) => simd::conv2d_wino_f32(
                w,
                ins.typed(0).ok()?,
                *in_shape,
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
