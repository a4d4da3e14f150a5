//! The SIMD kernels with pre-packed constant weights ([`crate::kernels::simd`]): their packed
//! forms ([`Fast`]) and the dispatch to each family's `fast` (which kernel an operator has on
//! this CPU) and `run_fast`.
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

use super::buffers::Ins;
use super::Kind;
use crate::kernels::simd;
use crate::kernels::simd::{DwF32, DwI8, GemmF32, GemmI8, Isa, WinoF32, Workers};
use crate::model::OpDesc;

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
    /// Int16 ADD/SUB/MUL computed in vectors (`simd::arith_i16`).
    #[cfg(all(
        feature = "ops-int16",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    ArithI16(simd::ArithI16),
    /// An int8 binary operator as a table of its 65536 input pairs, `t[(x as u8) << 8 | y as
    /// u8]`: SQUARED_DIFFERENCE, whose three rescalings per element (and 64-bit products) have
    /// no vector form here. 64 KiB, so only where the fast kernels run (not on microcontrollers).
    PairTableI8(alloc::boxed::Box<[i8]>),
    /// QUANTIZE float32 -> int8/uint8/int16 with this ISA's vector kernel.
    Quantize(Isa),
    /// A float unary operator at this ISA's vector width.
    Unary(Isa),
    /// A float ADD, SUB or MUL at this ISA's vector width (`simd::binary_f32`).
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    BinaryF32(Isa),
    /// A float SOFTMAX at this ISA's vector width (`simd::softmax_f32`).
    #[cfg(all(feature = "ops-softmax", feature = "ops-float"))]
    Softmax(Isa),
    /// A float BATCH_MATMUL through the float GEMM tile, packing the rhs into `scratch` floats
    /// (`simd::batch_matmul_f32`).
    #[cfg(all(feature = "ops-batch-matmul", feature = "ops-float"))]
    BatchMatMulF32 {
        isa: Isa,
        scratch: usize,
    },
    /// An int8 BATCH_MATMUL summed and requantized in vectors (`simd::batch_matmul_i8`), with
    /// the portable kernel's scratch (`i8s`, `i32s` values).
    #[cfg(all(feature = "ops-batch-matmul", feature = "ops-int8"))]
    BatchMatMulI8 {
        bmm: simd::BmmI8,
        i8s: usize,
        i32s: usize,
    },
    /// TRANSPOSE of 32-bit values from few rows (`simd::transpose_few_rows_32`).
    TransposeFewRows(Isa),
    /// TRANSPOSE swapping two dimensions above rows that stay (`simd::transpose_rows`).
    TransposeRows(Isa),
    // The variants below exist only where the fast kernels do (`simd::FAST_KERNELS`), so that
    // other targets' builds (microcontroller firmware) do not change.
    /// Int8 or float MAX_POOL_2D at this ISA's vector width (`simd::max_pool`).
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    MaxPool(Isa),
    /// Constant PAD/PADV2 by output rows over the workers (`simd::pad_rows`).
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    PadRows,
    /// TRANSPOSE of 2-4 rows of 1-, 2- or 4-byte values over the workers
    /// (`simd::transpose_few_rows_split`).
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    TransposeFewRowsSplit,
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
            Fast::ArithI8(_)
            | Fast::Quantize(_)
            | Fast::Unary(_)
            | Fast::TransposeFewRows(_)
            | Fast::TransposeRows(_) => 0,
            #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
            Fast::MaxPool(_) | Fast::PadRows | Fast::BinaryF32(_) | Fast::TransposeFewRowsSplit => {
                0
            }
            #[cfg(all(feature = "ops-softmax", feature = "ops-float"))]
            Fast::Softmax(_) => 0,
            #[cfg(all(
                feature = "ops-int16",
                any(target_arch = "x86_64", target_arch = "aarch64")
            ))]
            Fast::ArithI16(_) => 0,
            #[cfg(all(feature = "ops-batch-matmul", feature = "ops-float"))]
            Fast::BatchMatMulF32 { .. } => 0,
            #[cfg(all(feature = "ops-batch-matmul", feature = "ops-int8"))]
            Fast::BatchMatMulI8 { bmm, .. } => bmm.bytes(),
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
            | Fast::TransposeFewRows(_)
            | Fast::TransposeRows(_) => false,
            #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
            Fast::MaxPool(_) | Fast::PadRows | Fast::BinaryF32(_) | Fast::TransposeFewRowsSplit => {
                false
            }
            #[cfg(all(feature = "ops-softmax", feature = "ops-float"))]
            Fast::Softmax(_) => false,
            #[cfg(all(
                feature = "ops-int16",
                any(target_arch = "x86_64", target_arch = "aarch64")
            ))]
            Fast::ArithI16(_) => false,
            #[cfg(all(feature = "ops-batch-matmul", feature = "ops-float"))]
            Fast::BatchMatMulF32 { .. } => false,
            #[cfg(all(feature = "ops-batch-matmul", feature = "ops-int8"))]
            Fast::BatchMatMulI8 { .. } => false,
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
            #[cfg(all(feature = "ops-batch-matmul", feature = "ops-float"))]
            Fast::BatchMatMulF32 { scratch, .. } => (0, 0, *scratch),
            #[cfg(all(feature = "ops-batch-matmul", feature = "ops-int8"))]
            Fast::BatchMatMulI8 { i8s, i32s, .. } => (*i8s, *i32s, 0),
            Fast::ArithI8(_)
            | Fast::PairTableI8(_)
            | Fast::Quantize(_)
            | Fast::Unary(_)
            | Fast::TransposeFewRows(_)
            | Fast::TransposeRows(_) => (0, 0, 0),
            #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
            Fast::MaxPool(_) | Fast::PadRows | Fast::BinaryF32(_) | Fast::TransposeFewRowsSplit => {
                (0, 0, 0)
            }
            #[cfg(all(feature = "ops-softmax", feature = "ops-float"))]
            Fast::Softmax(_) => (0, 0, 0),
            #[cfg(all(
                feature = "ops-int16",
                any(target_arch = "x86_64", target_arch = "aarch64")
            ))]
            Fast::ArithI16(_) => (0, 0, 0),
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
        // (CONV_2D and FULLY_CONNECTED take the full ISA for their int8 GEMM: `Avx512Amx`.)
        let full = isa;
        let isa = isa.vector();
        match kind {
            Kind::Conv(k) => k.fast(full, winograd, &c),
            Kind::Depthwise(k) => k.fast(isa, &c),
            Kind::FullyConnected(k) => k.fast(full, &c),
            Kind::Elementwise(k) => k.fast(isa),
            Kind::Shape(k) => k.fast(isa),
            Kind::Quantize(k) => k.fast(isa),
            Kind::Softmax(k) => k.fast(isa),
            Kind::BatchMatMul(k) => k.fast(isa),
            Kind::Pool(k) => k.fast(isa),
            Kind::Pad(k) => k.fast(isa),
            #[cfg(feature = "ops-data")]
            Kind::Data(_) => None,
            #[cfg(feature = "ops-accumulate")]
            Kind::Accumulate(_) => None,
            #[cfg(feature = "ops-sequence")]
            Kind::Sequence(_) => None,
            Kind::TransposeConv(_)
            | Kind::Reduce(_)
            | Kind::Resize(_)
            | Kind::Compare(_)
            | Kind::Copy
            | Kind::Precomputed
            | Kind::Lut8 { .. } => None,
            #[cfg(feature = "ops-variables")]
            Kind::Variables(_) => None,
            #[cfg(feature = "ops-fft")]
            Kind::Fft(_) => None,
        }
    }
}

/// Runs an operator with its pre-packed weights (`None` if the kinds do not match, which
/// `Fast::prepare` rules out).
#[inline]
pub(crate) fn run_fast(
    fast: &Fast,
    kind: &Kind,
    ins: &Ins<'_>,
    out: &mut [u8],
    s: &mut Workers,
) -> Option<()> {
    match kind {
        Kind::Conv(k) => k.run_fast(fast, ins, out, s),
        Kind::Depthwise(k) => k.run_fast(fast, ins, out, s),
        Kind::FullyConnected(k) => k.run_fast(fast, ins, out, s),
        Kind::Elementwise(k) => k.run_fast(fast, ins, out, s),
        Kind::Shape(k) => k.run_fast(fast, ins, out, s),
        Kind::Quantize(k) => k.run_fast(fast, ins, out, s),
        Kind::Softmax(k) => k.run_fast(fast, ins, out),
        Kind::BatchMatMul(k) => k.run_fast(fast, ins, out, s),
        Kind::Pool(k) => k.run_fast(fast, ins, out, s),
        Kind::Pad(k) => k.run_fast(fast, ins, out, s),
        #[cfg(feature = "ops-data")]
        Kind::Data(_) => None,
        #[cfg(feature = "ops-accumulate")]
        Kind::Accumulate(_) => None,
        #[cfg(feature = "ops-sequence")]
        Kind::Sequence(_) => None,
        #[cfg(feature = "ops-fft")]
        Kind::Fft(_) => None,
        Kind::TransposeConv(_)
        | Kind::Reduce(_)
        | Kind::Resize(_)
        | Kind::Compare(_)
        | Kind::Copy
        | Kind::Precomputed
        | Kind::Lut8 { .. } => None,
        #[cfg(feature = "ops-variables")]
        Kind::Variables(_) => None,
    }
}
