//! Preparation context of one operator and the checks and parameter readers families share.
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

use crate::error::{format, Error, Result};
use crate::kernels::{elementwise as ew, Activation};
use crate::model::rawfb::RawTable;
use crate::model::{op_err, DType, OpDesc, TensorDesc};
use crate::quant::{
    activation_range_quantized, quantize_scale_ratio, OutputStage, QuantActivation,
};
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

/// TFLite `BuiltinOptions` union tags.
pub(crate) mod tag {
    pub const CONV_2D: u8 = 1;
    pub const DEPTHWISE_CONV_2D: u8 = 2;
    pub const POOL_2D: u8 = 5;
    pub const FULLY_CONNECTED: u8 = 8;
    pub const L2_NORMALIZATION: u8 = 12;
    pub const SOFTMAX: u8 = 9;
    pub const CONCATENATION: u8 = 10;
    pub const ADD: u8 = 11;
    pub const RESIZE_BILINEAR: u8 = 15;
    pub const MUL: u8 = 21;
    pub const GATHER: u8 = 23;
    pub const REDUCER: u8 = 27;
    pub const SUB: u8 = 28;
    pub const DIV: u8 = 29;
    pub const SQUEEZE: u8 = 30;
    pub const STRIDED_SLICE: u8 = 32;
    pub const SPACE_TO_DEPTH: u8 = 19;
    pub const SPLIT: u8 = 35;
    pub const TRANSPOSE_CONV: u8 = 49;
    pub const SHAPE: u8 = 55;
    pub const PACK: u8 = 59;
    pub const UNPACK: u8 = 64;
    pub const RESIZE_NEAREST: u8 = 74;
    pub const LEAKY_RELU: u8 = 75;
    pub const MIRROR_PAD: u8 = 77;
    pub const DEPTH_TO_SPACE: u8 = 94;
    pub const UNIDIRECTIONAL_SEQUENCE_LSTM: u8 = 71;
    pub const BATCH_MATMUL: u8 = 101;
    pub const CUMSUM: u8 = 102;
    pub const GELU: u8 = 116;
}

/// What an operator's preparation records and reads while inferring shapes.
pub(crate) struct Inference<'v> {
    /// Output shapes the inputs imply: (output position, shape).
    pub(crate) shapes: RefCell<Vec<(usize, Vec<usize>)>>,
    /// Integer values known before running, by tensor: what SHAPE gives and what is computed
    /// from it (`None` for the others; constants are read from the file).
    pub(crate) values: &'v [Option<Vec<i64>>],
}

/// Preparation context of one operator.
pub(crate) struct Ctx<'c, 'm> {
    pub(crate) index: usize,
    pub(crate) op: &'c OpDesc<'m>,
    pub(crate) tensors: &'c [TensorDesc<'m>],
    /// When inferring shapes for new input shapes (`Interpreter::resize_input`): where
    /// [`check_out`](Self::check_out) records the output shapes the inputs imply, as
    /// (output position, shape), instead of comparing them with the file's.
    #[cfg_attr(not(feature = "dynamic-shapes"), allow(dead_code))]
    pub(crate) inferred: Option<&'c Inference<'c>>,
}

impl<'c, 'm> Ctx<'c, 'm> {
    pub(crate) fn err(&self, reason: impl Into<String>) -> Error {
        op_err(self.index, self.op, reason)
    }

    pub(crate) fn input(&self, k: usize) -> Result<&'c TensorDesc<'m>> {
        let t = self
            .op
            .inputs
            .get(k)
            .copied()
            .flatten()
            .ok_or_else(|| self.err(format!("input {k} is missing")))?;
        Ok(&self.tensors[t])
    }

    pub(crate) fn has_input(&self, k: usize) -> bool {
        matches!(self.op.inputs.get(k), Some(Some(_)))
    }

    pub(crate) fn output(&self, j: usize) -> Result<&'c TensorDesc<'m>> {
        let t = *self
            .op
            .outputs
            .get(j)
            .ok_or_else(|| self.err(format!("output {j} is missing")))?;
        Ok(&self.tensors[t])
    }

    pub(crate) fn shape(&self, k: usize) -> Result<&'c [usize]> {
        Ok(&self.input(k)?.shape)
    }

    pub(crate) fn dtype(&self, k: usize) -> Result<DType> {
        Ok(self.input(k)?.dtype)
    }

    /// The options table, checking its union tag; `None` when the operator has none (defaults).
    pub(crate) fn options(&self, expected: u8) -> Result<Option<RawTable<'m>>> {
        match self.op.options_type {
            0 => Ok(None),
            t if t == expected => Ok(self.op.options),
            t => Err(self.err(format!("builtin options type {t}, expected {expected}"))),
        }
    }

    pub(crate) fn opt<T>(&self, r: core::result::Result<T, &'static str>) -> Result<T> {
        r.map_err(|e| self.err(format!("malformed options: {e}")))
    }

    /// Values of integer input `k` known before running while inferring shapes (what SHAPE
    /// gives and what is computed from it).
    pub(crate) fn known_ints(&self, k: usize) -> Option<&'c [i64]> {
        let t = self.op.inputs.get(k).copied().flatten()?;
        self.inferred?.values.get(t)?.as_deref()
    }

    /// A constant integer input (INT32 or INT64) as i64 values (or, while inferring shapes, one
    /// whose values are known before running: [`known_ints`](Self::known_ints)).
    pub(crate) fn const_ints(&self, k: usize) -> Result<Vec<i64>> {
        let t = self.input(k)?;
        if t.data.is_none() {
            if let Some(v) = self.known_ints(k) {
                return Ok(v.to_vec());
            }
        }
        let d = t.data.ok_or_else(|| {
            self.err(format!(
                "input {k} must be a constant (dynamic values are not supported)"
            ))
        })?;
        match t.dtype {
            DType::I32 => Ok(d
                .chunks_exact(4)
                .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect()),
            DType::I64 => Ok(d
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect()),
            other => Err(self.err(format!(
                "input {k} must be INT32 or INT64, not {}",
                other.name()
            ))),
        }
    }

    pub(crate) fn check_out(&self, j: usize, shape: &[usize], dtype: DType) -> Result<()> {
        let o = self.output(j)?;
        if o.dtype != dtype {
            return Err(self.err(format!(
                "output {j} is {}, expected {}",
                o.dtype.name(),
                dtype.name()
            )));
        }
        #[cfg(feature = "dynamic-shapes")]
        if let Some(inferred) = self.inferred {
            inferred.shapes.borrow_mut().push((j, shape.to_vec()));
            return Ok(());
        }
        if o.shape != shape {
            return Err(self.err(format!(
                "output {j} has shape {:?}, but the inputs imply {shape:?}",
                o.shape
            )));
        }
        Ok(())
    }

    /// Whether output shapes are being inferred rather than checked (see [`Ctx::inferred`]).
    #[cfg_attr(not(feature = "dynamic-shapes"), allow(dead_code))]
    pub(crate) fn inferring(&self) -> bool {
        cfg!(feature = "dynamic-shapes") && self.inferred.is_some()
    }

    pub(crate) fn want_dtype(&self, k: usize, allowed: &[DType]) -> Result<DType> {
        let d = self.dtype(k)?;
        if allowed.contains(&d) {
            Ok(d)
        } else {
            Err(self.err(format!("input {k} type {} is not supported", d.name())))
        }
    }

    pub(crate) fn shape4(&self, k: usize) -> Result<[usize; 4]> {
        let s = self.shape(k)?;
        <[usize; 4]>::try_from(s)
            .map_err(|_| self.err(format!("input {k} must be 4-D, has shape {s:?}")))
    }

    /// Per-tensor quantization of an 8-bit activation tensor (required).
    pub(crate) fn q8_of(&self, t: &TensorDesc<'_>, what: &str) -> Result<ew::Q8> {
        let q = t.qparams.as_ref().ok_or_else(|| {
            self.err(format!(
                "{what} '{}' ({}) has no quantization parameters",
                t.name,
                t.dtype.name()
            ))
        })?;
        if !q.is_per_tensor() {
            return Err(self.err(format!(
                "{what} '{}' must be quantized per tensor, has {} scales",
                t.name,
                q.scales.len()
            )));
        }
        Ok(ew::Q8 {
            scale: q.scales[0],
            zero_point: q.zero_points[0] as i32,
        })
    }

    pub(crate) fn in_q8(&self, k: usize) -> Result<ew::Q8> {
        self.q8_of(self.input(k)?, &format!("input {k}"))
    }

    pub(crate) fn out_q8(&self, j: usize) -> Result<ew::Q8> {
        self.q8_of(self.output(j)?, &format!("output {j}"))
    }

    /// For data-movement operators on quantized types: TFLite copies the stored values, so the
    /// input and output must carry the same quantization.
    pub(crate) fn same_q(&self, k: usize, j: usize) -> Result<()> {
        let (i, o) = (self.input(k)?, self.output(j)?);
        if !matches!(i.dtype, DType::I8 | DType::U8 | DType::I16) {
            return Ok(());
        }
        if let (Some(a), Some(b)) = (&i.qparams, &o.qparams) {
            if a != b {
                return Err(self.err(format!(
                    "input {k} and output {j} have different quantization (scale {:?} zp {:?} vs \
                     scale {:?} zp {:?}); this operator copies values without requantizing",
                    a.scales, a.zero_points, b.scales, b.zero_points
                )));
            }
        }
        Ok(())
    }

    /// Resolves a possibly negative axis against `rank`.
    pub(crate) fn axis(&self, a: i64, rank: usize) -> Result<usize> {
        let r = rank as i64;
        let v = if a < 0 { a + r } else { a };
        // Strict even for a scalar (callers index the shape with the result; the fuzzer found
        // axis 0 of a rank-0 tensor reaching the kernels). REDUCE ops handle scalars themselves.
        if v < 0 || v >= r {
            return Err(self.err(format!("axis {a} out of range for rank {rank}")));
        }
        Ok(v as usize)
    }
}

pub(crate) fn activation(code: i8) -> core::result::Result<Activation, &'static str> {
    Ok(match code {
        0 => Activation::None,
        1 => Activation::Relu,
        2 => Activation::ReluN1To1,
        3 => Activation::Relu6,
        4 => Activation::Tanh,
        _ => return Err("unsupported fused activation"),
    })
}

pub(crate) fn positive(ctx: &Ctx<'_, '_>, v: i32, what: &str) -> Result<usize> {
    if v >= 1 {
        Ok(v as usize)
    } else {
        Err(ctx.err(format!("{what} must be >= 1, is {v}")))
    }
}

/// TFLite `ComputeOutSize` and `ComputePadding` for one spatial dimension: (out, pad_before).
pub(crate) fn conv_out_and_pad(
    ctx: &Ctx<'_, '_>,
    same: bool,
    input: usize,
    k: usize,
    stride: usize,
    dilation: usize,
) -> Result<(usize, usize)> {
    let eff = k
        .checked_sub(1)
        .and_then(|v| v.checked_mul(dilation))
        .and_then(|v| v.checked_add(1))
        .ok_or_else(|| ctx.err("bad filter size"))?;
    let out = if same {
        input.div_ceil(stride)
    } else {
        if input + stride < eff {
            return Err(ctx.err(format!(
                "VALID padding with filter {eff} larger than input {input}"
            )));
        }
        (input + stride - eff) / stride
    };
    let total = (out.saturating_sub(1) * stride + eff) as i64 - input as i64;
    Ok((out, if total > 0 { (total / 2) as usize } else { 0 }))
}

pub(crate) fn padding_same(ctx: &Ctx<'_, '_>, p: i8) -> Result<bool> {
    match p {
        0 => Ok(true),
        1 => Ok(false),
        _ => Err(ctx.err(format!("unknown padding {p}"))),
    }
}

pub(crate) fn data_dtype(c: &Ctx<'_, '_>, k: usize) -> Result<DType> {
    c.want_dtype(
        k,
        &[
            DType::F32,
            DType::I32,
            DType::I64,
            DType::Bool,
            DType::I8,
            DType::U8,
            DType::I16,
        ],
    )
}

pub(crate) fn f32_inputs(c: &Ctx<'_, '_>, n: usize) -> Result<()> {
    for k in 0..n {
        if c.has_input(k) {
            c.want_dtype(k, &[DType::F32])?;
        }
    }
    Ok(())
}

pub(crate) fn bias_check(c: &Ctx<'_, '_>, k: usize, n: usize) -> Result<()> {
    if c.has_input(k) && c.input(k)?.elements != n {
        return Err(c.err(format!(
            "bias has {} elements, expected {n}",
            c.input(k)?.elements
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Quantized (int8) and hybrid preparation.

pub(crate) fn quant_activation(c: &Ctx<'_, '_>, act: Activation) -> Result<QuantActivation> {
    Ok(match act {
        Activation::None => QuantActivation::None,
        Activation::Relu => QuantActivation::Relu,
        Activation::Relu6 => QuantActivation::Relu6,
        Activation::ReluN1To1 => QuantActivation::ReluN1To1,
        Activation::Tanh => return Err(c.err("a fused TANH is not supported on int8 outputs")),
    })
}

/// The clamp range of a quantized output of type `dt` with a fused activation.
pub(crate) fn act_range(
    c: &Ctx<'_, '_>,
    act: Activation,
    out: ew::Q8,
    dt: DType,
) -> Result<(i32, i32)> {
    let a = quant_activation(c, act)?;
    let (lo, hi) = dt.int_range().unwrap_or((-128, 127));
    Ok(activation_range_quantized(
        a,
        out.scale,
        out.zero_point,
        lo as i32,
        hi as i32,
    ))
}

/// The scales of a constant int8 filter: symmetric (all zero points 0), one scale or one per
/// index of `qdim` (which must then be the quantized dimension).
pub(crate) fn filter_scales(
    c: &Ctx<'_, '_>,
    k: usize,
    channels: usize,
    qdim: usize,
) -> Result<Vec<f32>> {
    let f = c.input(k)?;
    let q = f
        .qparams
        .as_ref()
        .ok_or_else(|| c.err("the int8 filter has no quantization parameters"))?;
    if q.zero_points.iter().any(|&z| z != 0) {
        return Err(c.err("int8 filters must be symmetric (zero point 0)"));
    }
    if !q.is_per_tensor() && (q.scales.len() != channels || q.quantized_dimension != qdim) {
        return Err(c.err(format!(
            "filter has {} scales along dimension {}, expected 1 or {channels} along {qdim}",
            q.scales.len(),
            q.quantized_dimension
        )));
    }
    Ok(q.scales.to_vec())
}

/// The output stage of an int8 conv/depthwise/fully-connected layer, with bias checks.
pub(crate) fn output_stage(
    c: &Ctx<'_, '_>,
    channels: usize,
    qdim: usize,
    act: Activation,
    fc: bool,
) -> Result<OutputStage> {
    output_stage_at(c, [0, 1, 2], channels, qdim, act, fc)
}

/// [`output_stage`] with the input, filter and bias at the given input indices.
pub(crate) fn output_stage_at(
    c: &Ctx<'_, '_>,
    [xi, wi, bi]: [usize; 3],
    channels: usize,
    qdim: usize,
    act: Activation,
    fc: bool,
) -> Result<OutputStage> {
    let (qi, qo) = (c.in_q8(xi)?, c.out_q8(0)?);
    let scales = filter_scales(c, wi, channels, qdim)?;
    // int16x8: int16 activations with zero point 0 and an int64 bias.
    let dt = c.dtype(xi)?;
    let bias_dt = if dt == DType::I16 {
        if qi.zero_point != 0 || qo.zero_point != 0 {
            return Err(c.err("int16 activations need zero point 0"));
        }
        DType::I64
    } else {
        DType::I32
    };
    if c.has_input(bi) {
        let b = c.input(bi)?;
        if b.dtype != bias_dt {
            return Err(c.err(format!(
                "{} layers need an {} bias, not {}",
                dt.name(),
                bias_dt.name(),
                b.dtype.name()
            )));
        }
        if let Some(bq) = &b.qparams {
            if bq.zero_points.iter().any(|&z| z != 0) {
                return Err(c.err("the int32 bias must have zero point 0"));
            }
            for ch in 0..channels {
                let want = qi.scale * scales[ch.min(scales.len() - 1)];
                let got = bq.channel(ch).0;
                if (want - got).abs() / qo.scale > 0.02 {
                    return Err(c.err(format!(
                        "bias scale {got} of channel {ch} differs from input scale x filter \\
                         scale {want}"
                    )));
                }
            }
        }
    }
    let mut multipliers = Vec::with_capacity(channels);
    let mut shifts = Vec::with_capacity(channels);
    for ch in 0..channels {
        let fs = scales[if scales.len() == 1 { 0 } else { ch }];
        let (m, sh) = if fc && scales.len() == 1 {
            // GetQuantizedConvolutionMultipler: the product in float, divided in double.
            quantize_scale_ratio([qi.scale * fs, 1.0], qo.scale)
        } else {
            // PopulateConvolutionQuantizationParams: all in double.
            quantize_scale_ratio([qi.scale, fs], qo.scale)
        };
        multipliers.push(m);
        shifts.push(sh);
    }
    let (act_min, act_max) = act_range(c, act, qo, dt)?;
    Ok(OutputStage {
        input_offset: -qi.zero_point,
        output_offset: qo.zero_point,
        multipliers,
        shifts,
        act_min,
        act_max,
        single_rounding: fc,
    })
}

/// Checks the float bias of a hybrid layer.
pub(crate) fn hybrid_bias(c: &Ctx<'_, '_>) -> Result<()> {
    if c.has_input(2) {
        c.want_dtype(2, &[DType::F32])?;
    }
    Ok(())
}
