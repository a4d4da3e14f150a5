//! Per-operator preparation: checks input/output types and shapes against what the inputs imply,
//! reads options, resolves padding and axes, and produces the [`Kind`] that `invoke` runs.
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

use crate::error::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::interpreter::op_err;
use crate::kernels::{
    compare as cmp,
    conv::{Conv2dParams, HybridInput},
    depthwise_conv::DepthwiseParams,
    elementwise as ew,
    pool::Pool2dParams,
    reduce::ReduceKind,
    transpose_conv::TransposeConvParams,
    Activation,
};
use crate::model::{DType, Model, OpDesc, TensorDesc, MAX_RANK};
use crate::quant::{
    activation_range_quantized, quantize_multiplier, quantize_scale_ratio, OutputStage,
    QuantActivation,
};
use crate::rawfb::RawTable;
use crate::schema::{self, BuiltinOperator as B};

/// What `invoke` does for one operator (all sizes and parameters resolved): the operator
/// family, holding its own prepared parameters, or a form any family can prepare into.
#[derive(Debug)]
pub(crate) enum Kind {
    Conv(Conv),
    Depthwise(Depthwise),
    TransposeConv(TransposeConv),
    FullyConnected(FullyConnected),
    BatchMatMul(BatchMatMul),
    Pool(Pool),
    Softmax(Softmax),
    Elementwise(Elementwise),
    Pad(Pad),
    Shape(Shape),
    Quantize(Quantize),
    Reduce(Reduce),
    Resize(Resize),
    Compare(Compare),
    Copy,
    /// A DEQUANTIZE of a constant, done once in `Interpreter::new` (nothing to do at run time).
    Precomputed,
    /// An 8-bit -> 8-bit elementwise operator as a table over the input bytes.
    Lut8 {
        table: alloc::boxed::Box<ew::Lut8>,
    },
}

#[derive(Debug)]
pub(crate) enum Conv {
    /// Int16x8 (int16 activations, int8 weights, int64 bias) layers and int16 operators; the
    /// fields are those of their int8 counterparts.
    I16 {
        params: Conv2dParams,
        in_shape: [usize; 4],
        filter_shape: [usize; 4],
        out_shape: [usize; 4],
        q: OutputStage,
    },
    I8 {
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

#[derive(Debug)]
pub(crate) enum Depthwise {
    I16 {
        params: DepthwiseParams,
        in_shape: [usize; 4],
        filter_shape: [usize; 4],
        out_shape: [usize; 4],
        q: OutputStage,
    },
    I8 {
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

#[derive(Debug)]
pub(crate) enum FullyConnected {
    I16 {
        batches: usize,
        in_depth: usize,
        out_depth: usize,
        q: OutputStage,
    },
    I8 {
        batches: usize,
        in_depth: usize,
        out_depth: usize,
        q: OutputStage,
    },
    Hybrid {
        batches: usize,
        in_depth: usize,
        out_depth: usize,
        act: Activation,
        scales: Vec<f32>,
        mode: HybridInput,
    },
    F32 {
        batches: usize,
        in_depth: usize,
        out_depth: usize,
        act: Activation,
    },
}

#[derive(Debug)]
pub(crate) enum BatchMatMul {
    F32 {
        lhs_shape: Vec<usize>,
        rhs_shape: Vec<usize>,
        out_shape: Vec<usize>,
        adj_x: bool,
        adj_y: bool,
    },
    /// Hybrid BATCH_MATMUL: float lhs quantized per row at run time, constant int8 rhs.
    Hybrid {
        lhs_shape: Vec<usize>,
        rhs_shape: Vec<usize>,
        out_shape: Vec<usize>,
        adj_x: bool,
        adj_y: bool,
        rhs_scale: f32,
        asymmetric: bool,
    },
    /// Int8 x int8 -> int8 BATCH_MATMUL (per-tensor parameters, one multiplier).
    I8 {
        lhs_shape: Vec<usize>,
        rhs_shape: Vec<usize>,
        out_shape: Vec<usize>,
        adj_x: bool,
        adj_y: bool,
        /// `-rhs_zero_point`.
        rhs_offset: i32,
        q: OutputStage,
    },
}

#[derive(Debug)]
pub(crate) enum Pool {
    I16 {
        max: bool,
        params: Pool2dParams,
        in_shape: [usize; 4],
        out_shape: [usize; 4],
        act_min: i32,
        act_max: i32,
    },
    I8 {
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
}

#[derive(Debug)]
pub(crate) enum Softmax {
    I8 {
        table: alloc::boxed::Box<[f32; 256]>,
        outer: usize,
        depth: usize,
        out_scale: f32,
        out_zero_point: i32,
    },
    F32 {
        outer: usize,
        depth: usize,
        beta: f32,
        log: bool,
    },
}

#[derive(Debug)]
pub(crate) enum Elementwise {
    Binary {
        op: ew::BinaryOp,
        act: Activation,
        bc: ew::Broadcast,
        dtype: DType,
    },
    Unary {
        op: ew::UnaryOp,
        dtype: DType,
    },
    Cast {
        from: DType,
        to: DType,
    },
    BinaryI16 {
        p: ew::BinaryI8,
        bc: ew::Broadcast,
    },
    /// Int8 RSQRT: a table, and an invocation error for stored inputs below `min_input` (the
    /// input zero point: negative reals), as TFLite.
    RsqrtI8 {
        table: alloc::boxed::Box<ew::Lut8>,
        min_input: i8,
    },
    BinaryI8 {
        p: ew::BinaryI8,
        bc: ew::Broadcast,
    },
}

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
    Gather {
        outer: usize,
        axis_size: usize,
        inner: usize,
        size: usize,
        idx: DType,
    },
}

#[derive(Debug)]
pub(crate) enum Quantize {
    DequantizeF16,
    DequantizeAffine {
        scale: f32,
        zero_point: i64,
        from: DType,
    },
    /// Per-channel DEQUANTIZE: element `i` is in channel `(i / inner) % channels`.
    DequantizePerChannel {
        scales: Vec<f32>,
        zero_points: Vec<i32>,
        channels: usize,
        inner: usize,
        from: DType,
    },
    /// QUANTIZE float32 -> INT8/UINT8/INT16.
    FromFloat {
        scale: f32,
        zero_point: i32,
        to: DType,
    },
    /// QUANTIZE between quantized types where one is int16 (TFLite's `Requantize`).
    Requantize {
        multiplier: i32,
        shift: i32,
        in_zero_point: i32,
        out_zero_point: i32,
        from: DType,
        to: DType,
    },
}

#[derive(Debug)]
pub(crate) enum Reduce {
    ArgMinMax {
        outer: usize,
        axis: usize,
        inner: usize,
        max: bool,
        input: DType,
        output: DType,
    },
    MeanI16(crate::kernels::reduce::QuantizedMean),
    /// Int8 MEAN (TFLite's `QuantizedMeanOrSum`).
    MeanI8(crate::kernels::reduce::QuantizedMean),
    /// Int8 SUM (LiteRT's builtin float-scaled form).
    SumI8 {
        shape: Vec<usize>,
        axes: Vec<usize>,
        count: usize,
        in_q: ew::Q8,
        out_q: ew::Q8,
    },
    /// Int8 REDUCE_MAX / REDUCE_MIN (same input and output quantization).
    MaxMinI8 {
        shape: Vec<usize>,
        axes: Vec<usize>,
        max: bool,
    },
    F32 {
        shape: Vec<usize>,
        axes: Vec<usize>,
        kind: ReduceKind,
    },
}

#[derive(Debug)]
pub(crate) struct Resize {
    pub(crate) bilinear: bool,
    pub(crate) align_corners: bool,
    pub(crate) half_pixel: bool,
    pub(crate) in_shape: [usize; 4],
    pub(crate) out_shape: [usize; 4],
    /// Int8 (same input and output quantization) instead of float32.
    pub(crate) int8: bool,
}

#[derive(Debug)]
pub(crate) enum Compare {
    /// A comparison with a BOOL output; `q` rescales int8 operands.
    Relation {
        op: cmp::CompareOp,
        bc: ew::Broadcast,
        dtype: DType,
        q: Option<(cmp::CompareSide, cmp::CompareSide)>,
    },
    /// LOGICAL_AND (`and`) / LOGICAL_OR.
    Logical {
        and: bool,
        bc: ew::Broadcast,
    },
    LogicalNot,
    /// SELECT_V2 over elements of `size` bytes.
    Select {
        plan: cmp::Select3,
        size: usize,
    },
    /// TOPK_V2 over the last axis: rows of `n`, keeping `k`.
    TopK {
        n: usize,
        k: usize,
        dtype: DType,
    },
}

/// TFLite `BuiltinOptions` union tags.
mod tag {
    pub const CONV_2D: u8 = 1;
    pub const DEPTHWISE_CONV_2D: u8 = 2;
    pub const POOL_2D: u8 = 5;
    pub const FULLY_CONNECTED: u8 = 8;
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
    pub const SPLIT: u8 = 35;
    pub const TRANSPOSE_CONV: u8 = 49;
    pub const RESIZE_NEAREST: u8 = 74;
    pub const LEAKY_RELU: u8 = 75;
    pub const MIRROR_PAD: u8 = 77;
    pub const BATCH_MATMUL: u8 = 101;
    pub const GELU: u8 = 116;
}

/// Preparation context of one operator.
struct Ctx<'c, 'm> {
    index: usize,
    op: &'c OpDesc<'m>,
    tensors: &'c [TensorDesc<'m>],
}

impl<'c, 'm> Ctx<'c, 'm> {
    fn err(&self, reason: impl Into<String>) -> Error {
        op_err(self.index, self.op, reason)
    }

    fn input(&self, k: usize) -> Result<&'c TensorDesc<'m>> {
        let t = self
            .op
            .inputs
            .get(k)
            .copied()
            .flatten()
            .ok_or_else(|| self.err(format!("input {k} is missing")))?;
        Ok(&self.tensors[t])
    }

    fn has_input(&self, k: usize) -> bool {
        matches!(self.op.inputs.get(k), Some(Some(_)))
    }

    fn output(&self, j: usize) -> Result<&'c TensorDesc<'m>> {
        let t = *self
            .op
            .outputs
            .get(j)
            .ok_or_else(|| self.err(format!("output {j} is missing")))?;
        Ok(&self.tensors[t])
    }

    fn shape(&self, k: usize) -> Result<&'c [usize]> {
        Ok(&self.input(k)?.shape)
    }

    fn dtype(&self, k: usize) -> Result<DType> {
        Ok(self.input(k)?.dtype)
    }

    /// The options table, checking its union tag; `None` when the operator has none (defaults).
    fn options(&self, expected: u8) -> Result<Option<RawTable<'m>>> {
        match self.op.options_type {
            0 => Ok(None),
            t if t == expected => Ok(self.op.options),
            t => Err(self.err(format!("builtin options type {t}, expected {expected}"))),
        }
    }

    fn opt<T>(&self, r: core::result::Result<T, &'static str>) -> Result<T> {
        r.map_err(|e| self.err(format!("malformed options: {e}")))
    }

    /// A constant integer input (INT32 or INT64) as i64 values.
    fn const_ints(&self, k: usize) -> Result<Vec<i64>> {
        let t = self.input(k)?;
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

    fn check_out(&self, j: usize, shape: &[usize], dtype: DType) -> Result<()> {
        let o = self.output(j)?;
        if o.dtype != dtype {
            return Err(self.err(format!(
                "output {j} is {}, expected {}",
                o.dtype.name(),
                dtype.name()
            )));
        }
        if o.shape != shape {
            return Err(self.err(format!(
                "output {j} has shape {:?}, but the inputs imply {shape:?}",
                o.shape
            )));
        }
        Ok(())
    }

    fn want_dtype(&self, k: usize, allowed: &[DType]) -> Result<DType> {
        let d = self.dtype(k)?;
        if allowed.contains(&d) {
            Ok(d)
        } else {
            Err(self.err(format!("input {k} type {} is not supported", d.name())))
        }
    }

    fn shape4(&self, k: usize) -> Result<[usize; 4]> {
        let s = self.shape(k)?;
        <[usize; 4]>::try_from(s)
            .map_err(|_| self.err(format!("input {k} must be 4-D, has shape {s:?}")))
    }

    /// Per-tensor quantization of an 8-bit activation tensor (required).
    fn q8_of(&self, t: &TensorDesc<'_>, what: &str) -> Result<ew::Q8> {
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

    fn in_q8(&self, k: usize) -> Result<ew::Q8> {
        self.q8_of(self.input(k)?, &format!("input {k}"))
    }

    fn out_q8(&self, j: usize) -> Result<ew::Q8> {
        self.q8_of(self.output(j)?, &format!("output {j}"))
    }

    /// For data-movement operators on quantized types: TFLite copies the stored values, so the
    /// input and output must carry the same quantization.
    fn same_q(&self, k: usize, j: usize) -> Result<()> {
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
    fn axis(&self, a: i64, rank: usize) -> Result<usize> {
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

fn activation(code: i8) -> core::result::Result<Activation, &'static str> {
    Ok(match code {
        0 => Activation::None,
        1 => Activation::Relu,
        2 => Activation::ReluN1To1,
        3 => Activation::Relu6,
        4 => Activation::Tanh,
        _ => return Err("unsupported fused activation"),
    })
}

fn positive(ctx: &Ctx<'_, '_>, v: i32, what: &str) -> Result<usize> {
    if v >= 1 {
        Ok(v as usize)
    } else {
        Err(ctx.err(format!("{what} must be >= 1, is {v}")))
    }
}

/// TFLite `ComputeOutSize` and `ComputePadding` for one spatial dimension: (out, pad_before).
fn conv_out_and_pad(
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

fn padding_same(ctx: &Ctx<'_, '_>, p: i8) -> Result<bool> {
    match p {
        0 => Ok(true),
        1 => Ok(false),
        _ => Err(ctx.err(format!("unknown padding {p}"))),
    }
}

/// Prepares operator `index`.
pub(crate) fn prepare_op(model: &Model<'_>, index: usize, op: &OpDesc<'_>) -> Result<Kind> {
    let ctx = Ctx {
        index,
        op,
        tensors: model.tensors(),
    };
    let c = &ctx;
    let code = op.code;
    let r = match code {
        #[cfg(feature = "ops-elementwise")]
        B::ADD
        | B::SUB
        | B::MUL
        | B::DIV
        | B::POW
        | B::MAXIMUM
        | B::MINIMUM
        | B::SQUARED_DIFFERENCE
        | B::PRELU => binary(c, code)?,
        #[cfg(feature = "ops-elementwise")]
        B::ABS
        | B::NEG
        | B::EXP
        | B::LOG
        | B::SQRT
        | B::RSQRT
        | B::RELU
        | B::RELU6
        | B::RELU_N1_TO_1
        | B::LOGISTIC
        | B::TANH
        | B::HARD_SWISH
        | B::GELU
        | B::LEAKY_RELU
        | B::FLOOR
        | B::SQUARE => unary(c, code)?,
        #[cfg(feature = "ops-reshape")]
        B::RESHAPE | B::SQUEEZE | B::EXPAND_DIMS => reshape(c, code)?,
        #[cfg(feature = "ops-shape")]
        B::TRANSPOSE => transpose(c)?,
        #[cfg(feature = "ops-shape")]
        B::CONCATENATION => concat(c)?,
        #[cfg(feature = "ops-shape")]
        B::SPLIT | B::SPLIT_V => split(c, code == B::SPLIT_V)?,
        #[cfg(feature = "ops-shape")]
        B::SLICE => slice(c)?,
        #[cfg(feature = "ops-shape")]
        B::STRIDED_SLICE => strided_slice(c)?,
        #[cfg(feature = "ops-shape")]
        B::GATHER => gather(c)?,
        #[cfg(feature = "ops-pad")]
        B::PAD | B::PADV2 => pad(c)?,
        #[cfg(feature = "ops-pad")]
        B::MIRROR_PAD => mirror_pad(c)?,
        #[cfg(feature = "ops-shape")]
        B::BROADCAST_TO => broadcast_to(c)?,
        #[cfg(feature = "ops-shape")]
        B::TILE => tile(c)?,
        #[cfg(feature = "ops-elementwise")]
        B::CAST => cast(c)?,
        #[cfg(feature = "ops-reduce")]
        B::ARG_MAX | B::ARG_MIN => arg_min_max(c, code == B::ARG_MAX)?,
        #[cfg(feature = "ops-quantize")]
        B::DEQUANTIZE => dequantize(c)?,
        #[cfg(feature = "ops-quantize")]
        B::QUANTIZE => quantize(c)?,
        #[cfg(feature = "ops-conv")]
        B::CONV_2D => conv2d(c)?,
        #[cfg(feature = "ops-depthwise-conv")]
        B::DEPTHWISE_CONV_2D => depthwise(c)?,
        #[cfg(feature = "ops-transpose-conv")]
        B::TRANSPOSE_CONV => transpose_conv(c)?,
        #[cfg(feature = "ops-fully-connected")]
        B::FULLY_CONNECTED => fully_connected(c)?,
        #[cfg(feature = "ops-batch-matmul")]
        B::BATCH_MATMUL => batch_matmul(c)?,
        #[cfg(feature = "ops-pool")]
        B::MAX_POOL_2D | B::AVERAGE_POOL_2D => pool2d(c, code == B::MAX_POOL_2D)?,
        #[cfg(feature = "ops-resize")]
        B::RESIZE_BILINEAR | B::RESIZE_NEAREST_NEIGHBOR => resize(c, code == B::RESIZE_BILINEAR)?,
        #[cfg(feature = "ops-softmax")]
        B::SOFTMAX | B::LOG_SOFTMAX => softmax(c, code == B::LOG_SOFTMAX)?,
        #[cfg(feature = "ops-reduce")]
        B::MEAN | B::SUM | B::REDUCE_MAX | B::REDUCE_MIN | B::REDUCE_PROD => reduce(c, code)?,
        #[cfg(feature = "ops-compare")]
        B::EQUAL | B::NOT_EQUAL | B::LESS | B::LESS_EQUAL | B::GREATER | B::GREATER_EQUAL => {
            compare(c, code)?
        }
        #[cfg(feature = "ops-compare")]
        B::LOGICAL_AND | B::LOGICAL_OR => logical(c, code == B::LOGICAL_AND)?,
        #[cfg(feature = "ops-compare")]
        B::LOGICAL_NOT => {
            c.want_dtype(0, &[DType::Bool])?;
            c.check_out(0, c.shape(0)?, DType::Bool)?;
            Kind::Compare(Compare::LogicalNot)
        }
        #[cfg(feature = "ops-compare")]
        B::SELECT_V2 => select_v2(c)?,
        #[cfg(feature = "ops-compare")]
        B::TOPK_V2 => topk(c)?,
        _ => return Err(c.err("not supported by the interpreter")),
    };
    Ok(r)
}

fn binary(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    use ew::BinaryOp as O;
    let (op, tag) = match code {
        B::ADD => (O::Add, Some(tag::ADD)),
        B::SUB => (O::Sub, Some(tag::SUB)),
        B::MUL => (O::Mul, Some(tag::MUL)),
        B::DIV => (O::Div, Some(tag::DIV)),
        B::POW => (O::Pow, None),
        B::MAXIMUM => (O::Maximum, None),
        B::MINIMUM => (O::Minimum, None),
        B::SQUARED_DIFFERENCE => (O::SquaredDifference, None),
        _ => (O::Prelu, None),
    };
    let mut act = Activation::None;
    if let Some(tag) = tag {
        if let Some(t) = c.options(tag)? {
            // fused_activation_function is the first field of Add/Sub/Mul/DivOptions.
            act = c.opt(t.i8(4, 0).and_then(activation))?;
        }
    }
    if matches!(c.dtype(0)?, DType::I8 | DType::I16) {
        return binary_i8(c, op, act);
    }
    let int_ok = matches!(
        op,
        O::Add | O::Sub | O::Mul | O::Maximum | O::Minimum | O::SquaredDifference
    );
    let allowed: &[DType] = if int_ok {
        &[DType::F32, DType::I32]
    } else {
        &[DType::F32]
    };
    let dtype = c.want_dtype(0, allowed)?;
    if c.dtype(1)? != dtype {
        return Err(c.err("inputs have different types"));
    }
    if dtype == DType::I32 && act == Activation::Tanh {
        return Err(c.err("TANH activation on int32"));
    }
    let (a, b) = (c.shape(0)?, c.shape(1)?);
    let out = ew::broadcast_shapes(a, b)
        .ok_or_else(|| c.err(format!("shapes {a:?} and {b:?} do not broadcast")))?;
    c.check_out(0, &out, dtype)?;
    let bc = ew::Broadcast::new(a, b).ok_or_else(|| c.err("bad broadcast"))?;
    Ok(Kind::Elementwise(Elementwise::Binary {
        op,
        act,
        bc,
        dtype,
    }))
}

fn unary(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    use ew::UnaryOp as U;
    let op = match code {
        B::ABS => U::Abs,
        B::NEG => U::Neg,
        B::EXP => U::Exp,
        B::LOG => U::Log,
        B::SQRT => U::Sqrt,
        B::RSQRT => U::Rsqrt,
        B::RELU => U::Relu,
        B::RELU6 => U::Relu6,
        B::RELU_N1_TO_1 => U::ReluN1To1,
        B::LOGISTIC => U::Logistic,
        B::TANH => U::Tanh,
        B::HARD_SWISH => U::HardSwish,
        B::FLOOR => U::Floor,
        B::SQUARE => U::Square,
        B::GELU => {
            let approximate = match c.options(tag::GELU)? {
                Some(t) => c.opt(t.bool(schema::GeluOptions::VT_APPROXIMATE, false))?,
                None => false,
            };
            U::Gelu { approximate }
        }
        _ => {
            let alpha = match c.options(tag::LEAKY_RELU)? {
                Some(t) => c.opt(t.f32(schema::LeakyReluOptions::VT_ALPHA, 0.0))?,
                None => 0.0,
            };
            U::LeakyRelu { alpha }
        }
    };
    if matches!(c.dtype(0)?, DType::I8 | DType::U8) {
        return unary_8bit(c, op);
    }
    let int_ok = matches!(
        op,
        U::Abs | U::Neg | U::Square | U::Relu | U::Relu6 | U::ReluN1To1
    );
    let allowed: &[DType] = if int_ok {
        &[DType::F32, DType::I32]
    } else {
        &[DType::F32]
    };
    let dtype = c.want_dtype(0, allowed)?;
    c.check_out(0, c.shape(0)?, dtype)?;
    Ok(Kind::Elementwise(Elementwise::Unary { op, dtype }))
}

fn reshape(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    let i = c.input(0)?;
    let o = c.output(0)?;
    if i.dtype == DType::F16 {
        return Err(c.err("FLOAT16 tensors are only supported as DEQUANTIZE inputs"));
    }
    let expected: Vec<usize> = match code {
        B::SQUEEZE => {
            let dims = match c.options(tag::SQUEEZE)? {
                Some(t) => c
                    .opt(t.vec_i32(schema::SqueezeOptions::VT_SQUEEZE_DIMS))?
                    .unwrap_or_default(),
                None => Vec::new(),
            };
            let mut drop = vec![false; i.shape.len()];
            if dims.is_empty() {
                for (d, &s) in i.shape.iter().enumerate() {
                    drop[d] = s == 1;
                }
            } else {
                for &d in &dims {
                    let a = c.axis(i64::from(d), i.shape.len())?;
                    if i.shape[a] != 1 {
                        return Err(c.err(format!(
                            "cannot squeeze dimension {a} of size {}",
                            i.shape[a]
                        )));
                    }
                    drop[a] = true;
                }
            }
            i.shape
                .iter()
                .zip(&drop)
                .filter(|(_, &d)| !d)
                .map(|(&s, _)| s)
                .collect()
        }
        B::EXPAND_DIMS => {
            let a = c.const_ints(1)?;
            if a.len() != 1 {
                return Err(c.err("axis must have one element"));
            }
            let ax = c.axis(a[0], i.shape.len() + 1)?;
            // Built in order: `Vec::insert`'s memmove would be 1.5 KiB of firmware code.
            let (head, tail) = i.shape.split_at(ax);
            [head, &[1], tail].concat()
        }
        _ => {
            if o.elements != i.elements {
                return Err(c.err(format!(
                    "cannot reshape {:?} ({} elements) to {:?} ({} elements)",
                    i.shape, i.elements, o.shape, o.elements
                )));
            }
            o.shape.clone()
        }
    };
    c.check_out(0, &expected, i.dtype)?;
    c.same_q(0, 0)?;
    Ok(Kind::Copy)
}

fn perm_of(c: &Ctx<'_, '_>, k: usize, rank: usize) -> Result<Vec<usize>> {
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

fn data_dtype(c: &Ctx<'_, '_>, k: usize) -> Result<DType> {
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

fn strides_isize(shape: &[usize]) -> Vec<isize> {
    let s = crate::kernels::shape_ops::strides_of(shape);
    s[..shape.len()].iter().map(|&v| v as isize).collect()
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
        outer: s[..ax].iter().product(),
        axis_size: s[ax],
        inner: s[ax + 1..].iter().product(),
        size: dt.size(),
        idx,
    }))
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

fn cast(c: &Ctx<'_, '_>) -> Result<Kind> {
    let from = data_dtype(c, 0)?;
    let to = c.output(0)?.dtype;
    if matches!(to, DType::F16 | DType::I16) {
        return Err(c.err(format!("cast to {} is not supported", to.name())));
    }
    c.check_out(0, c.shape(0)?, to)?;
    Ok(Kind::Elementwise(Elementwise::Cast { from, to }))
}

fn arg_min_max(c: &Ctx<'_, '_>, max: bool) -> Result<Kind> {
    let input = c.want_dtype(
        0,
        &[DType::F32, DType::I32, DType::I64, DType::I8, DType::U8],
    )?;
    let s = c.shape(0)?;
    let a = c.const_ints(1)?;
    if a.len() != 1 {
        return Err(c.err("axis must have one element"));
    }
    let ax = c.axis(a[0], s.len())?;
    if s[ax] == 0 {
        return Err(c.err("reduction over an empty axis"));
    }
    let output = c.output(0)?.dtype;
    if !matches!(output, DType::I32 | DType::I64) {
        return Err(c.err("output must be INT32 or INT64"));
    }
    let mut out = s.to_vec();
    out.remove(ax);
    c.check_out(0, &out, output)?;
    Ok(Kind::Reduce(Reduce::ArgMinMax {
        outer: s[..ax].iter().product(),
        axis: s[ax],
        inner: s[ax + 1..].iter().product(),
        max,
        input,
        output,
    }))
}

fn dequantize(c: &Ctx<'_, '_>) -> Result<Kind> {
    let i = c.input(0)?;
    c.check_out(0, &i.shape, DType::F32)?;
    match i.dtype {
        DType::F16 => Ok(Kind::Quantize(Quantize::DequantizeF16)),
        DType::I8 | DType::U8 | DType::I16 => {
            let q = i
                .qparams
                .as_ref()
                .ok_or_else(|| c.err("input has no quantization parameters"))?;
            if q.is_per_tensor() {
                return Ok(Kind::Quantize(Quantize::DequantizeAffine {
                    scale: q.scales[0],
                    zero_point: q.zero_points[0],
                    from: i.dtype,
                }));
            }
            let d = q.quantized_dimension;
            Ok(Kind::Quantize(Quantize::DequantizePerChannel {
                scales: q.scales.to_vec(),
                zero_points: q.zero_points.iter().map(|&z| z as i32).collect(),
                channels: i.shape[d],
                inner: i.shape[d + 1..].iter().product(),
                from: i.dtype,
            }))
        }
        d => Err(c.err(format!("cannot dequantize {}", d.name()))),
    }
}

fn quantize(c: &Ctx<'_, '_>) -> Result<Kind> {
    let i = c.input(0)?;
    let o = c.output(0)?;
    c.check_out(0, &i.shape, o.dtype)?;
    let oq = c.out_q8(0)?;
    match (i.dtype, o.dtype) {
        (DType::F32, DType::I8 | DType::U8 | DType::I16) => {
            Ok(Kind::Quantize(Quantize::FromFloat {
                scale: oq.scale,
                zero_point: oq.zero_point,
                to: o.dtype,
            }))
        }
        (DType::I8 | DType::I16, DType::I16) | (DType::I16, DType::I8) => {
            let iq = c.in_q8(0)?;
            let (multiplier, shift) = quantize_scale_ratio([iq.scale, 1.0], oq.scale);
            Ok(Kind::Quantize(Quantize::Requantize {
                multiplier,
                shift,
                in_zero_point: iq.zero_point,
                out_zero_point: oq.zero_point,
                from: i.dtype,
                to: o.dtype,
            }))
        }
        (DType::I8 | DType::U8, DType::I8 | DType::U8) => {
            let iq = c.in_q8(0)?;
            Ok(Kind::Lut8 {
                table: alloc::boxed::Box::new(ew::lut8_requantize(
                    iq,
                    oq,
                    i.dtype == DType::I8,
                    o.dtype == DType::I8,
                )),
            })
        }
        (a, b) => Err(c.err(format!(
            "QUANTIZE from {} to {} is not supported",
            a.name(),
            b.name()
        ))),
    }
}

fn f32_inputs(c: &Ctx<'_, '_>, n: usize) -> Result<()> {
    for k in 0..n {
        if c.has_input(k) {
            c.want_dtype(k, &[DType::F32])?;
        }
    }
    Ok(())
}

fn bias_check(c: &Ctx<'_, '_>, k: usize, n: usize) -> Result<()> {
    if c.has_input(k) && c.input(k)?.elements != n {
        return Err(c.err(format!(
            "bias has {} elements, expected {n}",
            c.input(k)?.elements
        )));
    }
    Ok(())
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
            Ok(Kind::Conv(Conv::I8 {
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
            Ok(Kind::Conv(Conv::I16 {
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
            Ok(Kind::Depthwise(Depthwise::I8 {
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
            Ok(Kind::Depthwise(Depthwise::I16 {
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

fn fully_connected(c: &Ctx<'_, '_>) -> Result<Kind> {
    let (in_dt, f_dt) = (c.dtype(0)?, c.dtype(1)?);
    #[cfg(feature = "ops-float")]
    if (in_dt, f_dt) == (DType::F32, DType::F32) {
        f32_inputs(c, 3)?;
    }
    use schema::FullyConnectedOptions as O;
    let t = c.options(tag::FULLY_CONNECTED)?;
    let act = c.opt(
        t.map_or(Ok(0), |t| t.i8(O::VT_FUSED_ACTIVATION_FUNCTION, 0))
            .and_then(activation),
    )?;
    let keep = t.map_or(Ok(false), |t| c.opt(t.bool(O::VT_KEEP_NUM_DIMS, false)))?;
    if t.map_or(Ok(0), |t| c.opt(t.i8(O::VT_WEIGHTS_FORMAT, 0)))? != 0 {
        return Err(c.err("shuffled weights are not supported"));
    }
    let ws = c.shape(1)?;
    if ws.len() != 2 {
        return Err(c.err(format!("weights must be 2-D, are {ws:?}")));
    }
    let (out_depth, in_depth) = (ws[0], ws[1]);
    let i = c.input(0)?;
    if in_depth == 0 || i.elements % in_depth != 0 {
        return Err(c.err(format!(
            "input {:?} does not flatten to rows of {in_depth}",
            i.shape
        )));
    }
    bias_check(c, 2, out_depth)?;
    let batches = i.elements / in_depth;
    let out = if keep {
        if i.shape.last() != Some(&in_depth) {
            return Err(
                c.err("keep_num_dims needs the input's last dimension to match the weights")
            );
        }
        let mut s = i.shape.clone();
        *s.last_mut().unwrap_or(&mut 0) = out_depth;
        s
    } else {
        vec![batches, out_depth]
    };
    match (in_dt, f_dt) {
        #[cfg(feature = "ops-float")]
        (DType::F32, DType::F32) => {
            c.check_out(0, &out, DType::F32)?;
            Ok(Kind::FullyConnected(FullyConnected::F32 {
                batches,
                in_depth,
                out_depth,
                act,
            }))
        }
        #[cfg(feature = "ops-int8")]
        (DType::I8, DType::I8) => {
            c.check_out(0, &out, DType::I8)?;
            let q = output_stage(c, out_depth, 0, act, true)?;
            Ok(Kind::FullyConnected(FullyConnected::I8 {
                batches,
                in_depth,
                out_depth,
                q,
            }))
        }
        #[cfg(feature = "ops-int16")]
        (DType::I16, DType::I8) => {
            c.check_out(0, &out, DType::I16)?;
            let q = output_stage(c, out_depth, 0, act, true)?;
            Ok(Kind::FullyConnected(FullyConnected::I16 {
                batches,
                in_depth,
                out_depth,
                q,
            }))
        }
        #[cfg(feature = "ops-hybrid")]
        (DType::F32, DType::I8) => {
            c.check_out(0, &out, DType::F32)?;
            if c.input(1)?.data.is_none() {
                return Err(c.err("a hybrid FULLY_CONNECTED needs constant int8 weights"));
            }
            hybrid_bias(c)?;
            let scales = filter_scales(c, 1, out_depth, 0)?;
            let asym = t.map_or(Ok(false), |t| {
                c.opt(t.bool(O::VT_ASYMMETRIC_QUANTIZE_INPUTS, false))
            })?;
            Ok(Kind::FullyConnected(FullyConnected::Hybrid {
                batches,
                in_depth,
                out_depth,
                act,
                scales,
                mode: if asym {
                    HybridInput::Asymmetric
                } else {
                    HybridInput::Symmetric
                },
            }))
        }
        (a, b) => Err(c.err(format!(
            "input {} with weights {} is not supported",
            a.name(),
            b.name()
        ))),
    }
}

fn batch_matmul(c: &Ctx<'_, '_>) -> Result<Kind> {
    let dts = (c.dtype(0)?, c.dtype(1)?);
    match dts {
        (DType::F32, DType::F32) => f32_inputs(c, 2)?,
        (DType::I8, DType::I8) | (DType::F32, DType::I8) => {}
        (a, b) => {
            return Err(c.err(format!(
                "lhs {} with rhs {} is not supported",
                a.name(),
                b.name()
            )))
        }
    }
    let (mut adj_x, mut adj_y, mut asymmetric) = (false, false, false);
    if let Some(t) = c.options(tag::BATCH_MATMUL)? {
        use schema::BatchMatMulOptions as O;
        adj_x = c.opt(t.bool(O::VT_ADJ_X, false))?;
        adj_y = c.opt(t.bool(O::VT_ADJ_Y, false))?;
        asymmetric = c.opt(t.bool(O::VT_ASYMMETRIC_QUANTIZE_INPUTS, false))?;
    }
    let (l, r) = (c.shape(0)?, c.shape(1)?);
    if !(2..=6).contains(&l.len()) || !(2..=6).contains(&r.len()) {
        return Err(c.err("operands must have rank 2..=6"));
    }
    let (lm, lk) = (l[l.len() - 2], l[l.len() - 1]);
    let (m, k) = if adj_x { (lk, lm) } else { (lm, lk) };
    let (rk, rn) = (r[r.len() - 2], r[r.len() - 1]);
    let (k2, n) = if adj_y { (rn, rk) } else { (rk, rn) };
    if k != k2 {
        return Err(c.err(format!("inner dimensions differ: {l:?} x {r:?}")));
    }
    let mut out = ew::broadcast_shapes(&l[..l.len() - 2], &r[..r.len() - 2]).ok_or_else(|| {
        c.err(format!(
            "batch dimensions of {l:?} and {r:?} do not broadcast"
        ))
    })?;
    out.push(m);
    out.push(n);
    if dts.0 == DType::I8 {
        c.check_out(0, &out, DType::I8)?;
        let (ql, qr, qo) = (c.in_q8(0)?, c.in_q8(1)?, c.out_q8(0)?);
        // GetQuantizedConvolutionMultipler: the scale product in float, divided in double.
        let real = f64::from(ql.scale * qr.scale) / f64::from(qo.scale);
        if !(real.is_finite() && real > 0.0) {
            return Err(c.err(format!(
                "scales {} x {} / {} give no valid multiplier",
                ql.scale, qr.scale, qo.scale
            )));
        }
        let (multiplier, shift) = quantize_multiplier(real);
        return Ok(Kind::BatchMatMul(BatchMatMul::I8 {
            lhs_shape: l.to_vec(),
            rhs_shape: r.to_vec(),
            out_shape: out,
            adj_x,
            adj_y,
            rhs_offset: -qr.zero_point,
            q: OutputStage {
                input_offset: -ql.zero_point,
                output_offset: qo.zero_point,
                multipliers: vec![multiplier],
                shifts: vec![shift],
                act_min: -128,
                act_max: 127,
                // Measured: LiteRT's builtin and reference int8 BATCH_MATMUL both round twice.
                single_rounding: false,
            },
        }));
    }
    c.check_out(0, &out, DType::F32)?;
    if dts.1 == DType::I8 {
        let w = c.input(1)?;
        if w.data.is_none() {
            return Err(c.err("a hybrid BATCH_MATMUL needs a constant int8 rhs"));
        }
        let q = w
            .qparams
            .as_ref()
            .ok_or_else(|| c.err("the int8 rhs has no quantization parameters"))?;
        if q.scales.len() != 1 || q.zero_points[0] != 0 {
            return Err(
                c.err("a hybrid BATCH_MATMUL needs one scale and zero point 0 on its int8 rhs")
            );
        }
        // LiteRT's hybrid kernel steps through its per-row scales and per-column sums by one
        // matrix per batch level, which is only right with at most one batch dim above 1 on
        // each side (after it folds the lhs batch into rows when the rhs is [..., 1, K, N]).
        let fold = l.len() > 2 && r.len() > 2 && r[r.len() - 3] == 1;
        let (lb, rb) = if fold {
            (&l[..l.len() - 3], &r[..r.len() - 3])
        } else {
            (&l[..l.len() - 2], &r[..r.len() - 2])
        };
        if fold && adj_x {
            return Err(c.err(format!(
                "hybrid BATCH_MATMUL of {l:?} x {r:?} with adj_x: LiteRT quantizes the lhs \
                 along the wrong axis when the rhs is [..., 1, K, N] (drop the rhs's leading 1s \
                 or transpose the lhs first)"
            )));
        }
        let many = |d: &[usize]| d.iter().filter(|&&v| v != 1).count() > 1;
        if many(lb) || many(rb) || l.len() > 5 || r.len() > 5 {
            return Err(c.err(format!(
                "hybrid BATCH_MATMUL of {l:?} x {r:?}: LiteRT computes it wrongly with more than \
                 one batch dimension above 1 per operand (reshape to rank 3 first)"
            )));
        }
        return Ok(Kind::BatchMatMul(BatchMatMul::Hybrid {
            lhs_shape: l.to_vec(),
            rhs_shape: r.to_vec(),
            out_shape: out,
            adj_x,
            adj_y,
            rhs_scale: q.scales[0],
            asymmetric,
        }));
    }
    Ok(Kind::BatchMatMul(BatchMatMul::F32 {
        lhs_shape: l.to_vec(),
        rhs_shape: r.to_vec(),
        out_shape: out,
        adj_x,
        adj_y,
    }))
}

fn pool2d(c: &Ctx<'_, '_>, max: bool) -> Result<Kind> {
    let dt = c.want_dtype(0, &[DType::F32, DType::I8, DType::I16])?;
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
        return Ok(if dt == DType::I16 {
            Kind::Pool(Pool::I16 {
                max,
                params,
                in_shape: is,
                out_shape: os,
                act_min,
                act_max,
            })
        } else {
            Kind::Pool(Pool::I8 {
                max,
                params,
                in_shape: is,
                out_shape: os,
                act_min,
                act_max,
            })
        });
    }
    Ok(Kind::Pool(Pool::F32 {
        max,
        params,
        in_shape: is,
        out_shape: os,
    }))
}

fn resize(c: &Ctx<'_, '_>, bilinear: bool) -> Result<Kind> {
    let dt = c.want_dtype(0, &[DType::F32, DType::I8])?;
    let (mut align_corners, mut half_pixel) = (false, false);
    if bilinear {
        if let Some(t) = c.options(tag::RESIZE_BILINEAR)? {
            use schema::ResizeBilinearOptions as O;
            align_corners = c.opt(t.bool(O::VT_ALIGN_CORNERS, false))?;
            half_pixel = c.opt(t.bool(O::VT_HALF_PIXEL_CENTERS, false))?;
        }
    } else if let Some(t) = c.options(tag::RESIZE_NEAREST)? {
        use schema::ResizeNearestNeighborOptions as O;
        align_corners = c.opt(t.bool(O::VT_ALIGN_CORNERS, false))?;
        half_pixel = c.opt(t.bool(O::VT_HALF_PIXEL_CENTERS, false))?;
    }
    let is = c.shape4(0)?;
    let size = c.const_ints(1)?;
    if size.len() != 2 || size.iter().any(|&v| v <= 0 || v > i64::from(i32::MAX)) {
        return Err(c.err(format!("bad size {size:?}")));
    }
    if bilinear && align_corners && half_pixel {
        // TFLite's RESIZE_BILINEAR Prepare rejects this too.
        return Err(c.err("align_corners and half_pixel_centers cannot both be set"));
    }
    let os = [is[0], size[0] as usize, size[1] as usize, is[3]];
    c.check_out(0, &os, dt)?;
    if dt == DType::I8 {
        let (qi, qo) = (c.in_q8(0)?, c.out_q8(0)?);
        if qi != qo {
            return Err(c.err(format!(
                "int8 resizing needs the same input and output quantization (TFLite does not \
                 requantize), has scale {} zp {} and scale {} zp {}",
                qi.scale, qi.zero_point, qo.scale, qo.zero_point
            )));
        }
    }
    Ok(Kind::Resize(Resize {
        bilinear,
        align_corners,
        half_pixel,
        in_shape: is,
        out_shape: os,
        int8: dt == DType::I8,
    }))
}

fn softmax(c: &Ctx<'_, '_>, log: bool) -> Result<Kind> {
    if c.dtype(0)? == DType::I8 && !log {
        return softmax_i8(c);
    }
    f32_inputs(c, 1)?;
    let beta = if log {
        1.0
    } else {
        match c.options(tag::SOFTMAX)? {
            Some(t) => c.opt(t.f32(schema::SoftmaxOptions::VT_BETA, 0.0))?,
            None => 1.0,
        }
    };
    let i = c.input(0)?;
    let depth = *i
        .shape
        .last()
        .ok_or_else(|| c.err("input must have rank >= 1"))?;
    c.check_out(0, &i.shape, DType::F32)?;
    let outer = i.elements.checked_div(depth).unwrap_or(0);
    Ok(Kind::Softmax(Softmax::F32 {
        outer,
        depth,
        beta,
        log,
    }))
}

fn reduce(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    let dt = if code == B::REDUCE_PROD {
        c.want_dtype(0, &[DType::F32])?
    } else {
        c.want_dtype(0, &[DType::F32, DType::I8, DType::I16])?
    };
    if dt == DType::I16 && code != B::MEAN {
        return Err(c.err("only MEAN has an int16 kernel among the reductions"));
    }
    let kind = match code {
        B::MEAN => ReduceKind::Mean,
        B::SUM => ReduceKind::Sum,
        B::REDUCE_MAX => ReduceKind::Max,
        B::REDUCE_MIN => ReduceKind::Min,
        _ => ReduceKind::Prod,
    };
    let keep = match c.options(tag::REDUCER)? {
        Some(t) => c.opt(t.bool(schema::ReducerOptions::VT_KEEP_DIMS, false))?,
        None => false,
    };
    let s = c.shape(0)?;
    let mut axes = Vec::new();
    for a in c.const_ints(1)? {
        if s.is_empty() && (a == 0 || a == -1) {
            continue; // TFLite accepts axis 0 of a scalar: nothing to reduce.
        }
        axes.push(c.axis(a, s.len())?);
    }
    axes.sort_unstable();
    axes.dedup();
    if matches!(kind, ReduceKind::Max | ReduceKind::Min) && axes.iter().any(|&a| s[a] == 0) {
        // TFLite produces lowest()/max() here; keep it simple and refuse.
        return Err(c.err("max/min over an empty axis"));
    }
    let mut out = Vec::new();
    for (d, &v) in s.iter().enumerate() {
        if axes.contains(&d) {
            if keep {
                out.push(1);
            }
        } else {
            out.push(v);
        }
    }
    c.check_out(0, &out, dt)?;
    if dt == DType::I8 && matches!(kind, ReduceKind::Max | ReduceKind::Min) {
        let (qi, qo) = (c.in_q8(0)?, c.out_q8(0)?);
        if qi != qo {
            return Err(c.err(format!(
                "int8 REDUCE_MAX/REDUCE_MIN need the same input and output quantization (TFLite \
                 checks this), has scale {} zp {} and scale {} zp {}",
                qi.scale, qi.zero_point, qo.scale, qo.zero_point
            )));
        }
        return Ok(Kind::Reduce(Reduce::MaxMinI8 {
            shape: s.to_vec(),
            axes,
            max: kind == ReduceKind::Max,
        }));
    }
    if matches!(dt, DType::I8 | DType::I16) {
        let (qi, qo) = (c.in_q8(0)?, c.out_q8(0)?);
        let count = axes.iter().map(|&a| s[a]).product();
        if kind == ReduceKind::Sum {
            return Ok(Kind::Reduce(Reduce::SumI8 {
                shape: s.to_vec(),
                axes,
                count,
                in_q: qi,
                out_q: qo,
            }));
        }
        // One formula for every axis set: the reference kernels' (TFLite's reference MEAN over
        // H, W and its general path agree; only the optimized builtin kernel rounds differently).
        let (multiplier, shift) = quantize_scale_ratio([qi.scale, 1.0], qo.scale);
        let mean = crate::kernels::reduce::QuantizedMean {
            shape: s.to_vec(),
            axes,
            count,
            in_zero_point: qi.zero_point,
            multiplier,
            shift,
            out_zero_point: qo.zero_point,
        };
        return Ok(if dt == DType::I16 {
            Kind::Reduce(Reduce::MeanI16(mean))
        } else {
            Kind::Reduce(Reduce::MeanI8(mean))
        });
    }
    Ok(Kind::Reduce(Reduce::F32 {
        shape: s.to_vec(),
        axes,
        kind,
    }))
}

// ---------------------------------------------------------------------------------------------
// Quantized (int8) and hybrid preparation.

fn quant_activation(c: &Ctx<'_, '_>, act: Activation) -> Result<QuantActivation> {
    Ok(match act {
        Activation::None => QuantActivation::None,
        Activation::Relu => QuantActivation::Relu,
        Activation::Relu6 => QuantActivation::Relu6,
        Activation::ReluN1To1 => QuantActivation::ReluN1To1,
        Activation::Tanh => return Err(c.err("a fused TANH is not supported on int8 outputs")),
    })
}

/// The clamp range of a quantized output of type `dt` with a fused activation.
fn act_range(c: &Ctx<'_, '_>, act: Activation, out: ew::Q8, dt: DType) -> Result<(i32, i32)> {
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

/// Int8 and int16 ADD, SUB, MUL, MAXIMUM, MINIMUM (and int8 SQUARED_DIFFERENCE).
fn binary_i8(c: &Ctx<'_, '_>, op: ew::BinaryOp, act: Activation) -> Result<Kind> {
    use ew::BinaryOp as O;
    let dt = c.dtype(0)?;
    if c.dtype(1)? != dt {
        return Err(c.err("inputs have different types"));
    }
    let (a, b) = (c.shape(0)?, c.shape(1)?);
    let out = ew::broadcast_shapes(a, b)
        .ok_or_else(|| c.err(format!("shapes {a:?} and {b:?} do not broadcast")))?;
    c.check_out(0, &out, dt)?;
    let bc = ew::Broadcast::new(a, b).ok_or_else(|| c.err("bad broadcast"))?;
    let (qa, qb, qo) = (c.in_q8(0)?, c.in_q8(1)?, c.out_q8(0)?);
    let int16 = dt == DType::I16;
    if int16 && [qa, qb, qo].iter().any(|q| q.zero_point != 0) {
        return Err(c.err("int16 operands need zero point 0"));
    }
    let range = act_range(c, act, qo, dt)?;
    let p = match op {
        O::Add | O::Sub => ew::BinaryI8::add_sub(qa, qb, qo, range, op == O::Sub, int16)
            .ok_or_else(|| c.err("input/output scales give an out-of-range multiplier"))?,
        O::Mul if int16 => ew::BinaryI8::mul_i16(qa, qb, qo, range),
        O::Mul => ew::BinaryI8::mul(qa, qb, qo, range),
        O::Maximum | O::Minimum => {
            // TFLite compares the stored values.
            if qa != qo || qb != qo {
                return Err(c.err(format!(
                    "int8 MAXIMUM/MINIMUM need the same quantization on both inputs and the \
                     output (TFLite compares stored values), have ({}, {}), ({}, {}), ({}, {})",
                    qa.scale, qa.zero_point, qb.scale, qb.zero_point, qo.scale, qo.zero_point
                )));
            }
            ew::BinaryI8::MaxMin {
                max: op == O::Maximum,
            }
        }
        O::SquaredDifference if !int16 => {
            ew::BinaryI8::squared_difference(qa, qb, qo).ok_or_else(|| {
                c.err(format!(
                    "output scale {} is too small for int8 SQUARED_DIFFERENCE of scales {} and {} \
                 (TFLite needs (2 max scale)^2 / 2^14 < output scale)",
                    qo.scale, qa.scale, qb.scale
                ))
            })?
        }
        _ => return Err(c.err(format!("this operator has no {} kernel", dt.name()))),
    };
    Ok(if int16 {
        Kind::Elementwise(Elementwise::BinaryI16 { p, bc })
    } else {
        Kind::Elementwise(Elementwise::BinaryI8 {
            p: p.with_tables(),
            bc,
        })
    })
}

fn unary_8bit(c: &Ctx<'_, '_>, op: ew::UnaryOp) -> Result<Kind> {
    use ew::UnaryOp as U;
    let dt = c.dtype(0)?;
    c.check_out(0, c.shape(0)?, dt)?;
    let signed = dt == DType::I8;
    let (qi, qo) = (c.in_q8(0)?, c.out_q8(0)?);
    let table = match op {
        U::Relu => ew::lut8_relu(qi, qo, signed, 0.0, None),
        U::Relu6 => ew::lut8_relu(qi, qo, signed, 0.0, Some(6.0)),
        U::ReluN1To1 => ew::lut8_relu(qi, qo, signed, -1.0, Some(1.0)),
        U::LeakyRelu { alpha } => ew::lut8_leaky_relu(qi, qo, signed, alpha),
        U::HardSwish => {
            let hp = ew::HardSwishParams::new(qi, qo)
                .ok_or_else(|| c.err("output scale too small for HARD_SWISH"))?;
            ew::lut8_from_int(signed, signed, |v| hp.eval(v))
        }
        U::Logistic => {
            if qo.scale != 1.0 / 256.0 {
                return Err(c.err(format!(
                    "quantized LOGISTIC needs output scale 1/256, has {}",
                    qo.scale
                )));
            }
            ew::lut8_from_float(qi, qo, signed, |x| ew::unary_fn(op, x))
        }
        U::Tanh | U::Gelu { .. } => ew::lut8_from_float(qi, qo, signed, |x| ew::unary_fn(op, x)),
        U::Rsqrt if signed => {
            let table = ew::rsqrt_i8_table(qi, qo).ok_or_else(|| {
                c.err(format!(
                    "int8 RSQRT: 1 / (sqrt({}) * {}) is out of range for a multiplier",
                    qi.scale, qo.scale
                ))
            })?;
            return Ok(Kind::Elementwise(Elementwise::RsqrtI8 {
                table: alloc::boxed::Box::new(table),
                min_input: qi.zero_point as i8,
            }));
        }
        _ => {
            return Err(c.err(format!(
                "{} input is not supported by this operator",
                dt.name()
            )))
        }
    };
    Ok(Kind::Lut8 {
        table: alloc::boxed::Box::new(table),
    })
}

/// The scales of a constant int8 filter: symmetric (all zero points 0), one scale or one per
/// index of `qdim` (which must then be the quantized dimension).
fn filter_scales(c: &Ctx<'_, '_>, k: usize, channels: usize, qdim: usize) -> Result<Vec<f32>> {
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
fn output_stage(
    c: &Ctx<'_, '_>,
    channels: usize,
    qdim: usize,
    act: Activation,
    fc: bool,
) -> Result<OutputStage> {
    output_stage_at(c, [0, 1, 2], channels, qdim, act, fc)
}

/// [`output_stage`] with the input, filter and bias at the given input indices.
fn output_stage_at(
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
fn hybrid_bias(c: &Ctx<'_, '_>) -> Result<()> {
    if c.has_input(2) {
        c.want_dtype(2, &[DType::F32])?;
    }
    Ok(())
}

/// Whether a filter's scales are not all equal (TFLite then uses its per-channel hybrid path).
fn distinct_scales(s: &[f32]) -> bool {
    s.iter().any(|&v| v != s[0])
}

fn softmax_i8(c: &Ctx<'_, '_>) -> Result<Kind> {
    let beta = match c.options(tag::SOFTMAX)? {
        Some(t) => c.opt(t.f32(schema::SoftmaxOptions::VT_BETA, 0.0))?,
        None => 1.0,
    };
    let i = c.input(0)?;
    let depth = *i
        .shape
        .last()
        .ok_or_else(|| c.err("input must have rank >= 1"))?;
    c.check_out(0, &i.shape, DType::I8)?;
    let (qi, qo) = (c.in_q8(0)?, c.out_q8(0)?);
    if qo.zero_point != -128 || (qo.scale - 1.0 / 256.0).abs() > 0.001 / 256.0 {
        return Err(c.err(format!(
            "int8 SOFTMAX needs output scale 1/256 and zero point -128, has {} and {}",
            qo.scale, qo.zero_point
        )));
    }
    Ok(Kind::Softmax(Softmax::I8 {
        table: alloc::boxed::Box::new(crate::kernels::softmax::softmax_table(qi.scale, beta)),
        outer: i.elements.checked_div(depth).unwrap_or(0),
        depth,
        out_scale: qo.scale,
        out_zero_point: qo.zero_point,
    }))
}

impl Kind {
    /// Frees the per-channel multipliers and shifts of an int8 conv/depthwise/fully-connected
    /// layer once its fast kernel holds them in its own form: an operator with a fast kernel
    /// never runs the portable one (`run_one`), and a model with thousands of channels would
    /// hold them twice.
    pub(crate) fn drop_portable_requant(&mut self) {
        if let Kind::Conv(Conv::I8 { q, .. })
        | Kind::FullyConnected(FullyConnected::I8 { q, .. })
        | Kind::Depthwise(Depthwise::I8 { q, .. }) = self
        {
            q.multipliers = Vec::new();
            q.shifts = Vec::new();
        }
    }

    /// Scratch this operator needs at run time: (i8 values, f32 values, i32 values).
    pub(crate) fn scratch(&self) -> (usize, usize, usize) {
        match self {
            Kind::BatchMatMul(BatchMatMul::I8 {
                lhs_shape,
                rhs_shape,
                adj_x,
                adj_y,
                ..
            }) => {
                let (i8s, i32s) = crate::kernels::batch_matmul::BmmI8Scratch::sizes(
                    lhs_shape, rhs_shape, *adj_x, *adj_y,
                );
                (i8s, 0, i32s)
            }
            Kind::Conv(Conv::Hybrid { in_shape, .. }) => {
                (in_shape.iter().product(), in_shape[0], in_shape[0])
            }
            Kind::Depthwise(Depthwise::Hybrid {
                in_shape,
                filter_shape,
                ..
            }) => (
                in_shape.iter().product(),
                in_shape[0],
                in_shape[0] + filter_shape[3],
            ),
            Kind::FullyConnected(FullyConnected::Hybrid {
                batches, in_depth, ..
            }) => (batches * in_depth, *batches, *batches),
            Kind::Depthwise(Depthwise::I8 { filter_shape, .. }) => (0, 0, filter_shape[3]),
            Kind::TransposeConv(TransposeConv::I8 { out_shape, .. }) => {
                (0, 0, out_shape.iter().product())
            }
            Kind::BatchMatMul(BatchMatMul::Hybrid {
                lhs_shape,
                rhs_shape,
                adj_x,
                adj_y,
                ..
            }) => {
                let (_, k, n) =
                    crate::kernels::batch_matmul::matmul_dims(lhs_shape, rhs_shape, *adj_x, *adj_y)
                        .unwrap_or_default();
                let r = rhs_shape.len();
                let lhs_len: usize = lhs_shape.iter().product();
                let rows = lhs_len.checked_div(k).unwrap_or(0);
                let rhs_mats: usize = rhs_shape[..r - 2].iter().product();
                (lhs_len, rows + k, rows + rhs_mats * n)
            }
            Kind::Reduce(Reduce::MeanI8(m)) | Kind::Reduce(Reduce::MeanI16(m)) => {
                (0, 0, m.output_len())
            }
            Kind::Reduce(Reduce::SumI8 { shape, axes, .. }) => {
                let out: usize = (0..shape.len())
                    .filter(|d| !axes.contains(d))
                    .map(|d| shape[d])
                    .product();
                (0, 0, out)
            }
            Kind::Compare(Compare::TopK { n, .. }) => (0, 0, *n),
            _ => (0, 0, 0),
        }
    }
}

fn compare(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    use cmp::CompareOp as O;
    let op = match code {
        B::EQUAL => O::Equal,
        B::NOT_EQUAL => O::NotEqual,
        B::LESS => O::Less,
        B::LESS_EQUAL => O::LessEqual,
        B::GREATER => O::Greater,
        _ => O::GreaterEqual,
    };
    let equality = matches!(op, O::Equal | O::NotEqual);
    let allowed: &[DType] = if equality {
        &[DType::F32, DType::I32, DType::I64, DType::I8, DType::Bool]
    } else {
        &[DType::F32, DType::I32, DType::I64, DType::I8]
    };
    let dtype = c.want_dtype(0, allowed)?;
    if c.dtype(1)? != dtype {
        return Err(c.err("inputs have different types"));
    }
    let (a, b) = (c.shape(0)?, c.shape(1)?);
    let out = ew::broadcast_shapes(a, b)
        .ok_or_else(|| c.err(format!("shapes {a:?} and {b:?} do not broadcast")))?;
    c.check_out(0, &out, DType::Bool)?;
    let bc = ew::Broadcast::new(a, b).ok_or_else(|| c.err("bad broadcast"))?;
    let q = if dtype == DType::I8 {
        let side = |k: usize| -> Result<cmp::CompareSide> {
            let q = c.in_q8(k)?;
            cmp::CompareSide::new(q.scale, q.zero_point).ok_or_else(|| {
                c.err(format!(
                    "input {k} scale {} must be in (0, 1) for an int8 comparison",
                    q.scale
                ))
            })
        };
        Some((side(0)?, side(1)?))
    } else {
        None
    };
    Ok(Kind::Compare(Compare::Relation { op, bc, dtype, q }))
}

fn logical(c: &Ctx<'_, '_>, and: bool) -> Result<Kind> {
    c.want_dtype(0, &[DType::Bool])?;
    c.want_dtype(1, &[DType::Bool])?;
    let (a, b) = (c.shape(0)?, c.shape(1)?);
    let out = ew::broadcast_shapes(a, b)
        .ok_or_else(|| c.err(format!("shapes {a:?} and {b:?} do not broadcast")))?;
    c.check_out(0, &out, DType::Bool)?;
    let bc = ew::Broadcast::new(a, b).ok_or_else(|| c.err("bad broadcast"))?;
    Ok(Kind::Compare(Compare::Logical { and, bc }))
}

fn select_v2(c: &Ctx<'_, '_>) -> Result<Kind> {
    c.want_dtype(0, &[DType::Bool])?;
    let dt = c.want_dtype(
        1,
        &[
            DType::F32,
            DType::I32,
            DType::I64,
            DType::I8,
            DType::U8,
            DType::Bool,
        ],
    )?;
    if c.dtype(2)? != dt {
        return Err(c.err("x and y have different types"));
    }
    let (s0, s1, s2) = (c.shape(0)?, c.shape(1)?, c.shape(2)?);
    let out = ew::broadcast_shapes(s0, s1)
        .and_then(|o| ew::broadcast_shapes(&o, s2))
        .ok_or_else(|| c.err(format!("shapes {s0:?}, {s1:?} and {s2:?} do not broadcast")))?;
    c.check_out(0, &out, dt)?;
    // Values are copied: quantized x, y and output must agree.
    c.same_q(1, 0)?;
    c.same_q(2, 0)?;
    let plan = cmp::Select3::new(s0, s1, s2).ok_or_else(|| c.err("bad broadcast"))?;
    Ok(Kind::Compare(Compare::Select {
        plan,
        size: dt.size(),
    }))
}

fn topk(c: &Ctx<'_, '_>) -> Result<Kind> {
    let dtype = c.want_dtype(
        0,
        &[DType::F32, DType::I32, DType::I64, DType::I8, DType::U8],
    )?;
    let s = c.shape(0)?;
    let Some((&n, lead)) = s.split_last() else {
        return Err(c.err("input must have rank >= 1"));
    };
    let k = c.const_ints(1)?;
    if k.len() != 1 {
        return Err(c.err("k must have one element"));
    }
    let k = usize::try_from(k[0])
        .ok()
        .filter(|&k| k <= n)
        .ok_or_else(|| c.err(format!("k = {} is not in 0..={n}", k[0])))?;
    if n > u32::MAX as usize {
        return Err(c.err("last axis too long"));
    }
    let mut out = lead.to_vec();
    out.push(k);
    c.check_out(0, &out, dtype)?;
    c.same_q(0, 0)?;
    let idx = c.output(1)?.dtype;
    if idx != DType::I32 {
        return Err(c.err(format!("indices output must be INT32, not {}", idx.name())));
    }
    c.check_out(1, &out, DType::I32)?;
    Ok(Kind::Compare(Compare::TopK { n, k, dtype }))
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
    // The value the PAD writes (as `run_op` does: the fill byte, or the PADV2 constant).
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
        Kind::Conv(Conv::I8 {
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
        Kind::Conv(Conv::I16 {
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
        Kind::Depthwise(Depthwise::I8 {
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
        Kind::Depthwise(Depthwise::I16 {
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
