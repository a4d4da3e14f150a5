//! The SIMD kernels with pre-packed constant weights ([`crate::kernels::simd`]): which prepared
//! operators have one on this CPU, and running them.
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

use super::buffers::{cast_out, Ins};
use super::conv::Conv;
use super::depthwise_conv::Depthwise;
use super::elementwise::Elementwise;
use super::fully_connected::FullyConnected;
use super::quantize::Quantize;
use super::shape::Shape;
use super::Kind;
use crate::kernels::simd;
use crate::kernels::simd::{DwF32, DwI8, FastScratch, GemmF32, GemmI8, Isa, WinoF32};
use crate::model::{DType, OpDesc};

/// The constant inputs of an operator whose fast kernel is being prepared.
pub(crate) struct Constants<'c, 'a> {
    op: &'a OpDesc<'a>,
    constant: &'a dyn Fn(usize) -> Option<&'c [u8]>,
}

impl<'c> Constants<'c, '_> {
    fn data(&self, k: usize) -> Option<&'c [u8]> {
        self.op
            .inputs
            .get(k)
            .copied()
            .flatten()
            .and_then(self.constant)
    }

    pub(crate) fn weights_i8(&self) -> Option<&'c [i8]> {
        Some(bytemuck::cast_slice(self.data(1)?))
    }

    pub(crate) fn weights_f32(&self) -> Option<&'c [f32]> {
        bytemuck::try_cast_slice(self.data(1)?).ok()
    }

    /// The bias: absent, or constant (a bias computed at run time keeps the portable kernel).
    fn bias<T: bytemuck::Pod>(&self) -> Option<Option<&'c [T]>> {
        match self.op.inputs.get(2).copied().flatten() {
            None => Some(None),
            Some(_) => Some(Some(bytemuck::try_cast_slice(self.data(2)?).ok()?)),
        }
    }

    pub(crate) fn bias_i32(&self) -> Option<Option<&'c [i32]>> {
        self.bias()
    }

    pub(crate) fn bias_f32(&self) -> Option<Option<&'c [f32]>> {
        self.bias()
    }
}

/// An operator's pre-packed constant weights for the fast kernels ([`crate::kernels::simd`]).
pub(crate) enum Fast {
    ConvI8(GemmI8),
    FullyConnectedI8(GemmI8),
    DepthwiseI8(DwI8),
    Conv(GemmF32),
    /// Float 3x3 stride-1 CONV_2D by Winograd F(2x2, 3x3).
    ConvWino(WinoF32),
    FullyConnected(GemmF32),
    Depthwise(DwF32),
    /// Int8 ADD/SUB/MUL computed in vectors (no weights: the kernel's parameters).
    ArithI8(simd::ArithI8),
    /// An int8 binary operator as a table of its 65536 input pairs, `t[(x as u8) << 8 | y as
    /// u8]`: SQUARED_DIFFERENCE, whose three rescalings per element (and 64-bit products) have
    /// no vector form here. 64 KiB, so only where the fast kernels run (not on microcontrollers).
    PairTableI8(alloc::boxed::Box<[i8]>),
    /// QUANTIZE float32 -> int8/uint8/int16 with this ISA's vector kernel.
    Quantize(Isa),
    /// A float unary operator at this ISA's vector width.
    Unary(Isa),
    /// TRANSPOSE of 32-bit values from few rows (`simd::transpose_few_rows_32`).
    TransposeFewRows(Isa),
}

impl Fast {
    pub(crate) fn bytes(&self) -> usize {
        match self {
            Fast::ConvI8(g) | Fast::FullyConnectedI8(g) => g.bytes(),
            Fast::DepthwiseI8(d) => d.bytes(),
            Fast::Conv(g) | Fast::FullyConnected(g) => g.bytes(),
            Fast::ConvWino(w) => w.bytes(),
            Fast::Depthwise(d) => d.bytes(),
            Fast::PairTableI8(t) => t.len(),
            Fast::ArithI8(_) | Fast::Quantize(_) | Fast::Unary(_) | Fast::TransposeFewRows(_) => 0,
        }
    }

    /// Whether the kernel reads its weights and bias (inputs 1 and 2) only from its packed copy,
    /// so the model's bytes of them are not read after preparing.
    pub(crate) fn packs_weights(&self) -> bool {
        match self {
            Fast::ConvI8(_)
            | Fast::FullyConnectedI8(_)
            | Fast::DepthwiseI8(_)
            | Fast::Conv(_)
            | Fast::ConvWino(_)
            | Fast::FullyConnected(_)
            | Fast::Depthwise(_) => true,
            Fast::ArithI8(_)
            | Fast::PairTableI8(_)
            | Fast::Quantize(_)
            | Fast::Unary(_)
            | Fast::TransposeFewRows(_) => false,
        }
    }

    /// Scratch for [`FastScratch`]: (i8, i32, f32) values.
    pub(crate) fn scratch(&self) -> (usize, usize, usize) {
        match self {
            Fast::ConvI8(g) | Fast::FullyConnectedI8(g) => (g.k, g.scratch_i32(), 0),
            Fast::Conv(g) | Fast::FullyConnected(g) => (0, 0, g.scratch_f32()),
            Fast::ConvWino(w) => (0, 0, w.scratch_f32()),
            Fast::DepthwiseI8(d) => (0, d.scratch_i32(), 0),
            Fast::Depthwise(_) => (0, 0, 0),
            Fast::ArithI8(_)
            | Fast::PairTableI8(_)
            | Fast::Quantize(_)
            | Fast::Unary(_)
            | Fast::TransposeFewRows(_) => (0, 0, 0),
        }
    }

    /// Packs the weights of `kind` for `isa` when its weights (and bias) are constant (Winograd
    /// only with `winograd`).
    pub(crate) fn prepare<'c>(
        isa: Isa,
        winograd: bool,
        kind: &Kind,
        op: &OpDesc<'_>,
        constant: &dyn Fn(usize) -> Option<&'c [u8]>,
    ) -> Option<Fast> {
        if isa == Isa::Portable || !simd::FAST_KERNELS {
            return None;
        }
        let c = Constants { op, constant };
        match kind {
            Kind::Conv(k) => k.fast(isa, winograd, &c),
            Kind::Depthwise(k) => k.fast(isa, &c),
            Kind::FullyConnected(k) => k.fast(isa, &c),
            Kind::Elementwise(k) => k.fast(isa),
            Kind::Shape(k) => k.fast(isa),
            Kind::Quantize(k) => k.fast(isa),
            Kind::TransposeConv(_)
            | Kind::BatchMatMul(_)
            | Kind::Pool(_)
            | Kind::Softmax(_)
            | Kind::Pad(_)
            | Kind::Reduce(_)
            | Kind::Resize(_)
            | Kind::Compare(_)
            | Kind::Copy
            | Kind::Precomputed
            | Kind::Lut8 { .. } => None,
        }
    }
}

/// Runs an operator with its pre-packed weights (`None` if the kinds do not match, which
/// `Fast::prepare` rules out).
pub(crate) fn run_fast(
    fast: &Fast,
    kind: &Kind,
    ins: &Ins<'_>,
    out: &mut [u8],
    s: &mut [FastScratch],
) -> Option<()> {
    match (fast, kind) {
        (
            Fast::ConvI8(g),
            Kind::Conv(Conv::I8 {
                params,
                in_shape,
                filter_shape,
                out_shape,
                q,
            }),
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
        (Fast::FullyConnectedI8(g), Kind::FullyConnected(FullyConnected::I8 { batches, .. })) => {
            simd::fully_connected_i8(g, ins.typed(0).ok()?, *batches, cast_out(out).ok()?, s)
        }
        (
            Fast::DepthwiseI8(d),
            Kind::Depthwise(Depthwise::I8 {
                params,
                in_shape,
                filter_shape,
                out_shape,
                ..
            }),
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
            Fast::Conv(g),
            Kind::Conv(Conv::F32 {
                params,
                in_shape,
                filter_shape,
                out_shape,
            }),
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
            Kind::Conv(Conv::F32 {
                params,
                in_shape,
                out_shape,
                ..
            }),
        ) => simd::conv2d_wino_f32(
            w,
            ins.typed(0).ok()?,
            *in_shape,
            params,
            cast_out(out).ok()?,
            *out_shape,
            s,
        ),
        (Fast::FullyConnected(g), Kind::FullyConnected(FullyConnected::F32 { batches, .. })) => {
            simd::fully_connected_f32(g, ins.typed(0).ok()?, *batches, cast_out(out).ok()?, s)
        }
        (
            Fast::Depthwise(d),
            Kind::Depthwise(Depthwise::F32 {
                params,
                in_shape,
                filter_shape,
                out_shape,
            }),
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
        (Fast::PairTableI8(t), Kind::Elementwise(Elementwise::BinaryI8 { bc, .. }))
            if t.len() == 1 << 16 =>
        {
            let (a, b) = (ins.typed::<i8>(0).ok()?, ins.typed::<i8>(1).ok()?);
            bc.apply(a, b, cast_out::<i8>(out).ok()?, |x, y| {
                t[usize::from(x as u8) << 8 | usize::from(y as u8)]
            });
        }
        (Fast::ArithI8(f), Kind::Elementwise(Elementwise::BinaryI8 { p, bc })) => simd::arith_i8(
            f,
            p,
            bc,
            ins.typed(0).ok()?,
            ins.typed(1).ok()?,
            cast_out(out).ok()?,
        ),
        (
            Fast::Quantize(isa),
            Kind::Quantize(Quantize::FromFloat {
                scale,
                zero_point,
                to,
            }),
        ) => {
            let to = match to {
                DType::I8 => simd::QuantizeTo::I8,
                DType::U8 => simd::QuantizeTo::U8,
                _ => simd::QuantizeTo::I16,
            };
            let i = ins.typed::<f32>(0).ok()?;
            return simd::quantize_f32(*isa, i, *scale, *zero_point, to, out).then_some(());
        }
        #[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
        (Fast::Unary(isa), Kind::Elementwise(Elementwise::Unary { op, .. })) => {
            let (i, o) = (ins.typed::<f32>(0).ok()?, cast_out(out).ok()?);
            return simd::unary_f32(*isa, *op, i, o).then_some(());
        }
        #[cfg(feature = "ops-shape")]
        (Fast::TransposeFewRows(isa), Kind::Shape(Shape::Transpose { in_shape, perm, .. })) => {
            let (i, o) = (ins.typed::<u32>(0).ok()?, cast_out(out).ok()?);
            return simd::transpose_few_rows_32(*isa, in_shape, perm, i, o).then_some(());
        }
        _ => return None,
    }
    Some(())
}
