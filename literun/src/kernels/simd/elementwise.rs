//! Elementwise fast paths without weights: int8 ADD/SUB/MUL, QUANTIZE from float32, float
//! unary operators and TRANSPOSE of 32-bit values from few rows.

use super::*;

// ------------------------------------------------------------------ elementwise int8 / QUANTIZE

/// Whether `isa` has the vector elementwise kernels below (the x86-64 ones; aarch64 and the
/// portable build keep the scalar kernels).
pub(crate) fn has_elementwise(isa: Isa) -> bool {
    cfg!(target_arch = "x86_64") && matches!(isa, Isa::Avx2 | Isa::AvxVnni | Isa::Avx512Vnni)
}

/// Which int8 arithmetic an [`ArithI8`] does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ArithOp {
    Add,
    Sub,
    Mul,
}

/// An int8 ADD/SUB or MUL for the vector kernels, then the output stage (`MBQM(raw, out)`, the
/// output offset, the clamp). ADD/SUB ([`crate::kernels::elementwise::AddSubTables`]) compute
/// each input's rescaling instead of looking it up: `s = MBQM((x + off) << left_shift, in_mult,
/// in_shift)` (the table entries), `raw = s1 ± s2`. MUL: `raw = (x + off1) * (y + off2)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ArithI8 {
    pub(crate) isa: Isa,
    pub(crate) op: ArithOp,
    pub(crate) off1: i32,
    pub(crate) off2: i32,
    /// ADD/SUB: `[m >> 11, m & 2047]` of each input multiplier: with the inputs' left shift of 20,
    /// `SRDHM(v << 20, m) = floor((v m + 2^10) / 2^11) = v (m >> 11) + ((v (m & 2047) + 2^10)
    /// >> 11)`, every term inside i32 for `|v| < 2^9` (`v` = stored value + offset).
    pub(crate) split1: [i32; 2],
    pub(crate) split2: [i32; 2],
    pub(crate) in1: Mbqm,
    pub(crate) in2: Mbqm,
    pub(crate) out: Mbqm,
    pub(crate) out_offset: i32,
    pub(crate) act_min: i32,
    pub(crate) act_max: i32,
}

impl ArithI8 {
    /// An int8 ADD/SUB. `None` when `isa` has no such kernel or the parameters are outside what it reproduces
    /// exactly (the scalar kernel then runs): input multipliers below one, shifts in TFLite's
    /// range, offsets of int8 zero points and a clamp range inside int8.
    pub(crate) fn new(isa: Isa, t: &crate::kernels::elementwise::AddSubTables) -> Option<ArithI8> {
        if !has_elementwise(isa)
            || t.in1_shift > 0
            || t.in2_shift > 0
            || t.left_shift != 20
            || t.in1_mult < 0
            || t.in2_mult < 0
            || !(-255..=255).contains(&t.in1_offset)
            || !(-255..=255).contains(&t.in2_offset)
            || !(-128..=127).contains(&t.out_offset)
            || !(-128 <= t.act_min && t.act_min <= t.act_max && t.act_max <= 127)
        {
            return None;
        }
        Some(ArithI8 {
            isa,
            op: if t.sub { ArithOp::Sub } else { ArithOp::Add },
            off1: t.in1_offset,
            off2: t.in2_offset,
            split1: [t.in1_mult >> 11, t.in1_mult & 2047],
            split2: [t.in2_mult >> 11, t.in2_mult & 2047],
            in1: Mbqm::new(t.in1_mult, t.in1_shift)?,
            in2: Mbqm::new(t.in2_mult, t.in2_shift)?,
            out: Mbqm::new(t.out_mult, t.out_shift)?,
            out_offset: t.out_offset,
            act_min: t.act_min,
            act_max: t.act_max,
        })
    }

    /// An int8 MUL ([`crate::kernels::elementwise::BinaryI8::Mul`]). `None` for another
    /// operator, when `isa` has no such kernel, or outside what it reproduces exactly: offsets
    /// of int8 zero points (so the product fits 17 bits), a shift in TFLite's range, a clamp
    /// inside int8.
    pub(crate) fn mul(isa: Isa, p: &crate::kernels::elementwise::BinaryI8) -> Option<ArithI8> {
        let crate::kernels::elementwise::BinaryI8::Mul {
            in1_offset,
            in2_offset,
            out_mult,
            out_shift,
            out_offset,
            act_min,
            act_max,
        } = *p
        else {
            return None;
        };
        let exact = (-255..=255).contains(&in1_offset)
            && (-255..=255).contains(&in2_offset)
            && (-128..=127).contains(&out_offset)
            && -128 <= act_min
            && act_min <= act_max
            && act_max <= 127;
        if !(has_elementwise(isa) && exact) {
            return None;
        }
        let unused = Mbqm::new(0, 0)?;
        Some(ArithI8 {
            isa,
            op: ArithOp::Mul,
            off1: in1_offset,
            off2: in2_offset,
            split1: [0; 2],
            split2: [0; 2],
            in1: unused,
            in2: unused,
            out: Mbqm::new(out_mult, out_shift)?,
            out_offset,
            act_min,
            act_max,
        })
    }
}

/// Values of an elementwise operator's blocks over the workers are multiples of this (whole
/// cache lines).
const ELEMENTWISE_ALIGN: usize = 64;

/// Int8 ADD/SUB/MUL: the vector kernel on runs of the output ([`arith_runs`]), else the scalar
/// kernel (`portable`, the same operator, for ADD/SUB as tables).
pub(crate) fn arith_i8(
    f: &ArithI8,
    portable: &crate::kernels::elementwise::BinaryI8,
    bc: &crate::kernels::elementwise::Broadcast,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
    workers: &mut Workers,
) {
    #[cfg(target_arch = "x86_64")]
    if arith_runs(bc, a, b, out, workers, |ra, rb, o| {
        x86::arith_i8(f, ra, rb, o)
    }) {
        return;
    }
    let _ = workers;
    let _ = f;
    crate::kernels::elementwise::binary_quantized::<i8>(portable, bc, a, b, out)
}

/// A binary operator's vector `kernel` on runs of its output: the whole output when each
/// input has its shape (split over the workers in contiguous blocks: each value depends on its
/// inputs' values at its place only) or is one value, else each innermost row of at least 16
/// elements (its inputs contiguous or one value repeated). `false` (nothing done) when the
/// rows are shorter: the scalar kernel's case.
#[cfg_attr(
    not(any(
        target_arch = "x86_64",
        all(target_arch = "aarch64", feature = "ops-int16")
    )),
    allow(dead_code)
)]
pub(super) fn arith_runs<T: Copy + Send + Sync>(
    bc: &crate::kernels::elementwise::Broadcast,
    a: &[T],
    b: &[T],
    out: &mut [T],
    workers: &mut Workers,
    kernel: impl Fn(
            crate::kernels::elementwise::Run<'_, T>,
            crate::kernels::elementwise::Run<'_, T>,
            &mut [T],
        ) + Sync,
) -> bool {
    use crate::kernels::elementwise::Run;
    if a.len() == out.len() && b.len() == out.len() && bc.output_len() == out.len() {
        let (len, work) = (out.len(), Work::Values(out.len()));
        for_row_blocks(len, ELEMENTWISE_ALIGN, 1, work, out, workers, |r, o, _| {
            kernel(Run::Slice(&a[r.clone()]), Run::Slice(&b[r]), o)
        });
        return true;
    }
    bc.apply_runs(a, b, out, 16, &kernel)
}

/// The output type of a vector QUANTIZE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QuantizeTo {
    I8,
    U8,
    I16,
}

/// QUANTIZE float32 to `to` (stored little-endian in `out`), bit-exact with
/// [`crate::kernels::elementwise::quantize_f32`] over the type's full range; as that, it stops
/// at the shorter of `input` and `out`. `false` (nothing done) when `isa` has no such kernel.
pub(crate) fn quantize_f32(
    isa: Isa,
    input: &[f32],
    scale: f32,
    zero_point: i32,
    to: QuantizeTo,
    out: &mut [u8],
    workers: &mut Workers,
) -> bool {
    let size = if to == QuantizeTo::I16 { 2 } else { 1 };
    if !has_elementwise(isa) {
        return false;
    }
    let n = input.len().min(out.len() / size);
    let (input, out) = (&input[..n], &mut out[..n * size]);
    let work = Work::Values(n);
    for_row_blocks(n, ELEMENTWISE_ALIGN, size, work, out, workers, |r, o, _| {
        #[cfg(target_arch = "x86_64")]
        x86::quantize_f32(isa, &input[r], scale, zero_point, to, o);
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (input, r, scale, zero_point, o);
    });
    true
}

/// Whether [`transpose_few_rows_32`] does this TRANSPOSE (`size`-byte values): batches of
/// `[rows, cols]` matrices with 2 to 4 rows (NCHW -> NHWC with up to 4 channels), 32-bit
/// values, AVX-512.
#[cfg(feature = "ops-shape")]
pub(crate) fn has_transpose_few_rows_32(
    isa: Isa,
    in_shape: &[usize],
    perm: &[usize],
    size: usize,
) -> bool {
    cfg!(target_arch = "x86_64")
        && isa == Isa::Avx512Vnni
        && size == 4
        && crate::kernels::shape_ops::batched_2d(in_shape, perm)
            .is_some_and(|(_, rows, cols)| (2..=4).contains(&rows) && cols > 1)
}

/// TRANSPOSE of 32-bit values when [`has_transpose_few_rows_32`]: each output row interleaves
/// one value of every input row, 16 columns per vector step (the scalar loop moves one value
/// at a time: 0.9 us for MobileNetV2 block's 3x32x32 input). `false` (nothing done) otherwise.
#[cfg(feature = "ops-shape")]
pub(crate) fn transpose_few_rows_32(
    isa: Isa,
    in_shape: &[usize],
    perm: &[usize],
    input: &[u32],
    out: &mut [u32],
) -> bool {
    if !has_transpose_few_rows_32(isa, in_shape, perm, 4) {
        return false;
    }
    let Some((batches, rows, cols)) = crate::kernels::shape_ops::batched_2d(in_shape, perm) else {
        return false;
    };
    let len = batches * rows * cols;
    if input.len() < len || out.len() < len {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    for (i, o) in input[..len]
        .chunks_exact(rows * cols)
        .zip(out[..len].chunks_exact_mut(rows * cols))
    {
        x86::interleave_u32(i, rows, o);
    }
    true
}

/// Whether [`transpose_few_rows_split`] does this TRANSPOSE: 1-, 2- or 4-byte values in batches
/// of `[rows, cols]` matrices with 2 to 4 rows (an image's NCHW -> NHWC with up to 4 channels).
#[cfg(all(
    feature = "ops-shape",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub(crate) fn has_transpose_few_rows_split(
    in_shape: &[usize],
    perm: &[usize],
    size: usize,
) -> bool {
    matches!(size, 1 | 2 | 4)
        && crate::kernels::shape_ops::batched_2d(in_shape, perm)
            .is_some_and(|(_, rows, cols)| (2..=4).contains(&rows) && cols > 1)
}

/// TRANSPOSE when [`has_transpose_few_rows_split`]: each output pixel gathers one value of
/// every input row, as the portable kernel does, the pixels split over the workers in contiguous
/// blocks. `false` (nothing done) otherwise.
#[cfg(all(
    feature = "ops-shape",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub(crate) fn transpose_few_rows_split<T: Copy + Send + Sync>(
    in_shape: &[usize],
    perm: &[usize],
    input: &[T],
    out: &mut [T],
    workers: &mut Workers,
) -> bool {
    let Some((batches, rows, cols)) = crate::kernels::shape_ops::batched_2d(in_shape, perm) else {
        return false;
    };
    let len = batches * rows * cols;
    if !(2..=4).contains(&rows) || cols <= 1 || input.len() < len || out.len() < len {
        return false;
    }
    let (input, out) = (&input[..len], &mut out[..len]);
    let work = Work::Values(len);
    let pixels = batches * cols;
    for_row_blocks(
        pixels,
        ELEMENTWISE_ALIGN,
        rows,
        work,
        out,
        workers,
        |ps, o, _| match rows {
            2 => few_rows_pixels::<T, 2>(input, cols, ps, o),
            3 => few_rows_pixels::<T, 3>(input, cols, ps, o),
            _ => few_rows_pixels::<T, 4>(input, cols, ps, o),
        },
    );
    true
}

/// Output pixels `ps` (over batches and columns) of a transpose of `[R, cols]` matrices into
/// `out` (`R` values per pixel): the portable kernel's loop, over a part of the pixels.
#[cfg(all(
    feature = "ops-shape",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
fn few_rows_pixels<T: Copy, const R: usize>(
    input: &[T],
    cols: usize,
    ps: Range<usize>,
    out: &mut [T],
) {
    let mut p = ps.start;
    while p < ps.end {
        let (b, c0) = (p / cols, p % cols);
        let n = (cols - c0).min(ps.end - p);
        let m = &input[b * R * cols..(b + 1) * R * cols];
        let rows: [&[T]; R] = core::array::from_fn(|r| &m[r * cols + c0..r * cols + c0 + n]);
        let o = &mut out[(p - ps.start) * R..(p - ps.start + n) * R];
        for (j, o) in o.chunks_exact_mut(R).enumerate() {
            for (o, row) in o.iter_mut().zip(&rows) {
                *o = row[j];
            }
        }
        p += n;
    }
}

/// Whether [`transpose_rows`] does this TRANSPOSE (`size`-byte values): `[a, b, c] -> [b, a,
/// c]` with rows of `c` values at least 16 bytes long, on a SIMD ISA (not on the Cortex-M
/// builds, whose portable strided copy is smaller).
#[cfg(feature = "ops-shape")]
pub(crate) fn has_transpose_rows(
    isa: Isa,
    in_shape: &[usize],
    perm: &[usize],
    size: usize,
) -> bool {
    isa != Isa::Portable
        && crate::kernels::shape_ops::swap_above_rows(in_shape, perm)
            .is_some_and(|(_, _, c)| c * size >= 16)
}

/// TRANSPOSE when [`has_transpose_rows`]: `out[j][i] = in[i][j]` for rows of `c * size` bytes,
/// each a whole copy (the general strided copy steps a multi-dimensional index per row:
/// 0.35 us for attention's 32 x 4 rows of 16 floats, 4x this). `false` (nothing done)
/// otherwise.
#[cfg(feature = "ops-shape")]
pub(crate) fn transpose_rows(
    isa: Isa,
    in_shape: &[usize],
    perm: &[usize],
    size: usize,
    input: &[u8],
    out: &mut [u8],
) -> bool {
    if !has_transpose_rows(isa, in_shape, perm, size) {
        return false;
    }
    let Some((a, b, c)) = crate::kernels::shape_ops::swap_above_rows(in_shape, perm) else {
        return false;
    };
    let row = c * size;
    if input.len() < a * b * row || out.len() < a * b * row {
        return false;
    }
    // Rows of a fixed size are copied as such (a few vector moves each) rather than by a call
    // to `memcpy` per row, which is most of the time for rows this short.
    match row {
        64 => swap_rows::<64>(a, b, input, out),
        _ => {
            for (j, dst) in out.chunks_exact_mut(a * row).take(b).enumerate() {
                for (i, d) in dst.chunks_exact_mut(row).enumerate() {
                    let at = (i * b + j) * row;
                    d.copy_from_slice(&input[at..at + row]);
                }
            }
        }
    }
    true
}

/// `[a, b]` rows of `R` bytes to `[b, a]`: `out` row `j * a + i` is `input` row `i * b + j`.
#[cfg(feature = "ops-shape")]
fn swap_rows<const R: usize>(a: usize, b: usize, input: &[u8], out: &mut [u8]) {
    for (j, dst) in out.chunks_exact_mut(a * R).take(b).enumerate() {
        for (i, d) in dst.chunks_exact_mut(R).enumerate() {
            let at = (i * b + j) * R;
            let src = input.get(at..at + R).map(<&[u8; R]>::try_from);
            if let (Ok(d), Some(Ok(src))) = (<&mut [u8; R]>::try_from(d), src) {
                *d = *src;
            }
        }
    }
}

/// Float unary operators (RELU, LOGISTIC, TANH, EXP, ...) at this ISA's vector width, bit-exact
/// with [`crate::kernels::elementwise::unary_f32`] (which vectorizes at the baseline width
/// elsewhere). `false` (nothing done) when `isa` has no such kernel.
#[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
pub(crate) fn unary_f32(
    isa: Isa,
    op: crate::kernels::elementwise::UnaryOp,
    input: &[f32],
    out: &mut [f32],
) -> bool {
    if !has_elementwise(isa) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    x86::unary_f32(isa, op, input, out);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (op, input, out);
    true
}

/// Whether `isa` has a float GELU kernel ([`gelu_f32`]) for the exact form (every x86 ISA
/// with [`has_elementwise`], and NEON) or for both forms (`approximate` too: x86 only).
#[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
pub(crate) fn has_gelu(isa: Isa, approximate: bool) -> bool {
    has_elementwise(isa)
        || (!approximate
            && cfg!(target_arch = "aarch64")
            && matches!(isa, Isa::Neon | Isa::NeonDot))
}

/// Float GELU ([`crate::kernels::elementwise::gelu_f32`]'s formula) at this ISA's vector
/// width with fused multiply-adds, within the same accuracy contract
/// ([`crate::math::gelu_fast`]). `false` (nothing done) when `isa` has no such kernel
/// ([`has_gelu`]).
#[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
pub(crate) fn gelu_f32(isa: Isa, approximate: bool, input: &[f32], out: &mut [f32]) -> bool {
    if !has_gelu(isa, approximate) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    x86::gelu_f32(isa, approximate, input, out);
    #[cfg(target_arch = "aarch64")]
    aarch64::gelu_exact(isa, input, out);
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = (approximate, input, out);
    true
}

/// Float SOFTMAX ([`crate::kernels::softmax::softmax_f32_fast`]) at this ISA's vector width,
/// bit-identical with that kernel. `false` (nothing done) when `isa` has no such kernel.
#[cfg(all(feature = "ops-softmax", feature = "ops-float"))]
pub(crate) fn softmax_f32(
    isa: Isa,
    input: &[f32],
    outer: usize,
    depth: usize,
    beta: f32,
    out: &mut [f32],
) -> bool {
    if !has_elementwise(isa) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    x86::softmax_f32(isa, input, outer, depth, beta, out);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (input, outer, depth, beta, out);
    true
}

/// LayerNorm rows ([`crate::kernels::layer_norm::layer_norm_f32`]) at this ISA's vector width,
/// bit-identical with that kernel. `false` (nothing done) when `isa` has no such kernel.
#[cfg(all(
    feature = "ops-reduce",
    feature = "ops-elementwise",
    feature = "ops-float"
))]
pub(crate) fn layer_norm_f32(
    isa: Isa,
    input: &[f32],
    depth: usize,
    eps: f32,
    affine: crate::kernels::layer_norm::Affine<'_>,
    out: &mut [f32],
) -> bool {
    if !has_elementwise(isa) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    x86::layer_norm_f32(isa, input, depth, eps, affine, out);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (input, depth, eps, affine, out);
    true
}

/// Float ADD, SUB or MUL with a fused activation at `isa`'s vector width, inputs of the output's
/// shape split over the workers in contiguous blocks; broadcasts take the portable kernel. The
/// same arithmetic per value as the portable kernel (`act(x op y)`), so the same results.
#[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn binary_f32(
    isa: Isa,
    op: crate::kernels::elementwise::BinaryOp,
    act: Activation,
    bc: &crate::kernels::elementwise::Broadcast,
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
    workers: &mut Workers,
) {
    use crate::kernels::elementwise::{self as ew, BinaryOp};
    let same = a.len() == out.len() && b.len() == out.len() && bc.output_len() == out.len();
    if !same || !matches!(op, BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul) {
        return ew::binary_f32(op, bc, a, b, act, out);
    }
    let (len, work) = (out.len(), Work::Values(out.len()));
    for_row_blocks(len, ELEMENTWISE_ALIGN, 1, work, out, workers, |r, o, _| {
        let (a, b) = (&a[r.clone()], &b[r]);
        #[cfg(target_arch = "x86_64")]
        match isa {
            // SAFETY: `Isa::Avx512Vnni` is chosen only when the CPU has AVX-512 F/BW/VL and
            // AVX2 (`x86::available`); the function only compiles safe code for them.
            Isa::Avx512Vnni => return unsafe { binary_f32_avx512(op, act, a, b, o) },
            // SAFETY: these ISAs are chosen only when the CPU has AVX2 (`x86::available`).
            Isa::Avx2 | Isa::AvxVnni => return unsafe { binary_f32_avx2(op, act, a, b, o) },
            _ => {}
        }
        let _ = isa;
        binary_f32_values(op, act, a, b, o)
    });
}

/// # Safety
/// The CPU has AVX2 and AVX-512 F/BW/VL.
#[cfg(all(
    target_arch = "x86_64",
    feature = "ops-elementwise",
    feature = "ops-float"
))]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl")]
unsafe fn binary_f32_avx512(
    op: crate::kernels::elementwise::BinaryOp,
    act: Activation,
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
) {
    binary_f32_values(op, act, a, b, out)
}

/// # Safety
/// The CPU has AVX2.
#[cfg(all(
    target_arch = "x86_64",
    feature = "ops-elementwise",
    feature = "ops-float"
))]
#[target_feature(enable = "avx2")]
unsafe fn binary_f32_avx2(
    op: crate::kernels::elementwise::BinaryOp,
    act: Activation,
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
) {
    binary_f32_values(op, act, a, b, out)
}

/// `out = act(a op b)` value by value (ADD, SUB, MUL), one loop per operator and activation
/// so that each vectorizes.
#[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
#[inline(always)]
fn binary_f32_values(
    op: crate::kernels::elementwise::BinaryOp,
    act: Activation,
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
) {
    use crate::kernels::elementwise::BinaryOp;
    #[inline(always)]
    fn each(a: &[f32], b: &[f32], out: &mut [f32], f: impl Fn(f32, f32) -> f32) {
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
            *o = f(x, y);
        }
    }
    macro_rules! with_act {
        ($f:expr) => {
            match act {
                Activation::None => each(a, b, out, $f),
                Activation::Relu => each(a, b, out, |x, y| Activation::Relu.apply($f(x, y))),
                Activation::Relu6 => each(a, b, out, |x, y| Activation::Relu6.apply($f(x, y))),
                _ => each(a, b, out, |x, y| act.apply($f(x, y))),
            }
        };
    }
    match op {
        BinaryOp::Add => with_act!(|x: f32, y: f32| x + y),
        BinaryOp::Sub => with_act!(|x: f32, y: f32| x - y),
        _ => with_act!(|x: f32, y: f32| x * y),
    }
}
