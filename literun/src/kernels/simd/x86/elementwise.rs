//! Elementwise kernels: int8 ADD/SUB/MUL, float unary operators, TRANSPOSE of 32-bit values
//! from few rows, and QUANTIZE from float32.

use super::*;

/// `out[i] = a[i] ± b[i]` (or `*`) for an int8 ADD/SUB (MUL), bit-exact with the scalar kernel
/// (`BinaryI8::eval_i32`, of the tables for ADD/SUB). MUL multiplies the offset inputs in 32
/// bits; ADD/SUB compute each input's table entry, `MBQM((x + off)
/// << 20, mult, shift)`, its high multiply in 32-bit products (`ArithI8::split1`) and its
/// rounding shift as in [`rdbpot_8`] (the parameters of [`ArithI8::new`] keep every intermediate
/// inside i32, as in the scalar kernel), then the sum goes through the output stage with the
/// exact vector `MultiplyByQuantizedMultiplier` of [`srdhm_rdbpot_8`], as in [`Rq8`].
pub(crate) fn arith_i8(p: &ArithI8, a: Run<'_, i8>, b: Run<'_, i8>, out: &mut [i8]) {
    let n = out.len();
    let (Some(a), Some(b)) = (Operand::new(a, n), Operand::new(b, n)) else {
        return;
    };
    if p.isa == Isa::Avx512Vnni {
        // SAFETY: Avx512Vnni is only chosen when the CPU has AVX-512 F/BW/VL (`available`).
        unsafe { arith_i8_avx512(p, &a, &b, out) }
    } else {
        // SAFETY: ArithI8 exists only for an available x86 ISA (`has_elementwise`), all of
        // which include AVX2 and FMA.
        unsafe { arith_i8_avx2(p, &a, &b, out) }
    }
}

/// An operand of [`arith_i8`] (and the int16 kernels'): `n` values, or one value repeated (as
/// sixteen copies). The loads are per element type.
pub(crate) enum Operand<'a, T> {
    Slice(&'a [T]),
    Repeat([T; 16]),
}

impl<T: Copy> Operand<'_, T> {
    /// `None` for a slice shorter than `n`.
    pub(crate) fn new(r: Run<'_, T>, n: usize) -> Option<Operand<'_, T>> {
        Some(match r {
            Run::Slice(s) => Operand::Slice(s.get(..n)?),
            Run::Repeat(v) => Operand::Repeat([v; 16]),
        })
    }
}

impl Operand<'_, i8> {
    /// Sixteen values from `i` (`i + 16 <= n`).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn load(&self, i: usize) -> __m128i {
        match self {
            Operand::Slice(s) => {
                let s = &s[i..i + 16];
                // SAFETY: s has 16 bytes.
                unsafe { _mm_loadu_si128(s.as_ptr() as *const __m128i) }
            }
            // SAFETY: v has 16 bytes.
            Operand::Repeat(v) => unsafe { _mm_loadu_si128(v.as_ptr() as *const __m128i) },
        }
    }

    /// The values from `i` to `n` (fewer than sixteen), zeros after.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn load_tail(&self, i: usize) -> __m128i {
        match self {
            Operand::Slice(s) => load_tail_16(&s[i..]),
            Operand::Repeat(v) => load_tail_16(v),
        }
    }
}

/// The parameters of one [`Mbqm`] stage in registers: multiplier, mask, threshold, right shift.
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn stage_16(m: &Mbqm) -> [__m512i; 4] {
    let set = _mm512_set1_epi32;
    [set(m.mult), set(m.mask), set(m.thr), set(m.right)]
}

/// The parameters of [`add_sub_16`] in registers.
struct Arith16 {
    op: ArithOp,
    off1: __m512i,
    off2: __m512i,
    split1: [__m512i; 2],
    split2: [__m512i; 2],
    in1: [__m512i; 4],
    in2: [__m512i; 4],
    out_left: __m128i,
    out: [__m512i; 4],
    lo: __m512i,
    hi: __m512i,
    off: __m512i,
}

impl Arith16 {
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    fn new(p: &ArithI8) -> Arith16 {
        let set = _mm512_set1_epi32;
        Arith16 {
            op: p.op,
            off1: set(p.off1),
            off2: set(p.off2),
            split1: p.split1.map(|v| set(v)),
            split2: p.split2.map(|v| set(v)),
            in1: stage_16(&p.in1),
            in2: stage_16(&p.in2),
            out_left: _mm_cvtsi32_si128(p.out.left),
            out: stage_16(&p.out),
            // clamp(sat_add(v, off), lo, hi) = clamp(v, lo - off, hi - off) + off (`Rq8`).
            lo: set(p.act_min - p.out_offset),
            hi: set(p.act_max - p.out_offset),
            off: set(p.out_offset),
        }
    }

    /// Sixteen outputs of the sixteen int8 values in `x` and in `y`.
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    fn apply(&self, x: __m128i, y: __m128i) -> __m128i {
        // SRDHM((x + off) << 20, m) = (x + off) * (m >> 11) + ((x + off) * (m & 2047) + 2^10)
        // >> 11 (see `ArithI8::split`); the low product by `vpmaddwd` (x + off fits in the low
        // 16 bits of the lane, the high half of the constant is zero).
        let round = _mm512_set1_epi32(1 << 10);
        let rescale = |v: __m128i, off: __m512i, hl: &[__m512i; 2], m: &[__m512i; 4]| {
            let v = _mm512_add_epi32(_mm512_cvtepi8_epi32(v), off);
            let lo = _mm512_add_epi32(_mm512_madd_epi16(v, hl[1]), round);
            let hm = _mm512_add_epi32(_mm512_mullo_epi32(v, hl[0]), _mm512_srai_epi32::<11>(lo));
            rdbpot_16(hm, m[1], m[2], m[3])
        };
        let raw = if self.op == ArithOp::Mul {
            let vx = _mm512_add_epi32(_mm512_cvtepi8_epi32(x), self.off1);
            let vy = _mm512_add_epi32(_mm512_cvtepi8_epi32(y), self.off2);
            _mm512_mullo_epi32(vx, vy)
        } else {
            let s1 = rescale(x, self.off1, &self.split1, &self.in1);
            let s2 = rescale(y, self.off2, &self.split2, &self.in2);
            if self.op == ArithOp::Sub {
                _mm512_sub_epi32(s1, s2)
            } else {
                _mm512_add_epi32(s1, s2)
            }
        };
        let o = &self.out;
        let q = srdhm_rdbpot_16(_mm512_sll_epi32(raw, self.out_left), o[0], o[1], o[2], o[3]);
        let q = _mm512_min_epi32(_mm512_max_epi32(q, self.lo), self.hi);
        _mm512_cvtsepi32_epi8(_mm512_add_epi32(q, self.off))
    }
}

#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn arith_i8_avx512(p: &ArithI8, a: &Operand<'_, i8>, b: &Operand<'_, i8>, out: &mut [i8]) {
    let k = Arith16::new(p);
    let n = out.len();
    let mut i = 0;
    while i + 16 <= n {
        let v = k.apply(a.load(i), b.load(i));
        let o = &mut out[i..i + 16];
        // SAFETY: o has 16 bytes.
        unsafe { _mm_storeu_si128(o.as_mut_ptr() as *mut __m128i, v) };
        i += 16;
    }
    if i < n {
        store_16(k.apply(a.load_tail(i), b.load_tail(i)), &mut out[i..]);
    }
}

/// The first `v.len() <= 16` bytes of `v`, zeros after.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn load_tail_16(v: &[i8]) -> __m128i {
    let mut tmp = [0i8; 16];
    let m = v.len().min(16);
    tmp[..m].copy_from_slice(&v[..m]);
    // SAFETY: tmp has 16 bytes.
    unsafe { _mm_loadu_si128(tmp.as_ptr() as *const __m128i) }
}

/// [`Arith16`] on eight lanes.
struct Arith8 {
    op: ArithOp,
    off1: __m256i,
    off2: __m256i,
    split1: [__m256i; 2],
    split2: [__m256i; 2],
    in1: [__m256i; 4],
    in2: [__m256i; 4],
    out_left: __m128i,
    out: [__m256i; 4],
    lo: __m256i,
    hi: __m256i,
    off: __m256i,
}

impl Arith8 {
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn new(p: &ArithI8) -> Arith8 {
        let set = _mm256_set1_epi32;
        let stage = |m: &Mbqm| [set(m.mult), set(m.mask), set(m.thr), set(m.right)];
        Arith8 {
            op: p.op,
            off1: set(p.off1),
            off2: set(p.off2),
            split1: p.split1.map(|v| set(v)),
            split2: p.split2.map(|v| set(v)),
            in1: stage(&p.in1),
            in2: stage(&p.in2),
            out_left: _mm_cvtsi32_si128(p.out.left),
            out: stage(&p.out),
            lo: set(p.act_min - p.out_offset),
            hi: set(p.act_max - p.out_offset),
            off: set(p.out_offset),
        }
    }

    /// Eight outputs (as i32, in the int8 range) of the low eight int8 values of `x` and `y`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn apply(&self, x: __m128i, y: __m128i) -> __m256i {
        let round = _mm256_set1_epi32(1 << 10);
        let rescale = |v: __m128i, off: __m256i, hl: &[__m256i; 2], m: &[__m256i; 4]| {
            let v = _mm256_add_epi32(_mm256_cvtepi8_epi32(v), off);
            let lo = _mm256_add_epi32(_mm256_madd_epi16(v, hl[1]), round);
            let hm = _mm256_add_epi32(_mm256_mullo_epi32(v, hl[0]), _mm256_srai_epi32::<11>(lo));
            rdbpot_8(hm, m[1], m[2], m[3])
        };
        let raw = if self.op == ArithOp::Mul {
            let vx = _mm256_add_epi32(_mm256_cvtepi8_epi32(x), self.off1);
            let vy = _mm256_add_epi32(_mm256_cvtepi8_epi32(y), self.off2);
            _mm256_mullo_epi32(vx, vy)
        } else {
            let s1 = rescale(x, self.off1, &self.split1, &self.in1);
            let s2 = rescale(y, self.off2, &self.split2, &self.in2);
            if self.op == ArithOp::Sub {
                _mm256_sub_epi32(s1, s2)
            } else {
                _mm256_add_epi32(s1, s2)
            }
        };
        let o = &self.out;
        let q = srdhm_rdbpot_8(_mm256_sll_epi32(raw, self.out_left), o[0], o[1], o[2], o[3]);
        let q = _mm256_min_epi32(_mm256_max_epi32(q, self.lo), self.hi);
        _mm256_add_epi32(q, self.off)
    }

    /// Sixteen outputs of the sixteen int8 values in `x` and in `y`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn apply_16(&self, x: __m128i, y: __m128i) -> __m128i {
        let lo = self.apply(x, y);
        let hi = self.apply(_mm_unpackhi_epi64(x, x), _mm_unpackhi_epi64(y, y));
        narrow_16(lo, hi)
    }
}

#[target_feature(enable = "avx2,fma")]
fn arith_i8_avx2(p: &ArithI8, a: &Operand<'_, i8>, b: &Operand<'_, i8>, out: &mut [i8]) {
    let k = Arith8::new(p);
    let n = out.len();
    let mut i = 0;
    while i + 16 <= n {
        let v = k.apply_16(a.load(i), b.load(i));
        let o = &mut out[i..i + 16];
        // SAFETY: o has 16 bytes.
        unsafe { _mm_storeu_si128(o.as_mut_ptr() as *mut __m128i, v) };
        i += 16;
    }
    if i < n {
        store_16(k.apply_16(a.load_tail(i), b.load_tail(i)), &mut out[i..]);
    }
}

// ------------------------------------------------------------------------------ float unary

/// Float unary operators: [`crate::kernels::elementwise::unary_loops`] compiled for AVX-512 or AVX2, which the compiler
/// vectorizes 16 or 8 lanes wide. The same arithmetic in the same order (Rust never contracts
/// to FMA), so the results are the portable loop's, bit for bit.
#[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
pub(crate) fn unary_f32(
    isa: Isa,
    op: crate::kernels::elementwise::UnaryOp,
    input: &[f32],
    out: &mut [f32],
) {
    if isa == Isa::Avx512Vnni {
        // SAFETY: Avx512Vnni is only chosen when the CPU has AVX-512 F/BW/VL (`available`).
        unsafe { unary_f32_avx512(op, input, out) }
    } else {
        // SAFETY: only called for an available x86 ISA (`has_elementwise`), all of which
        // include AVX2 and FMA.
        unsafe { unary_f32_avx2(op, input, out) }
    }
}

/// Float GELU at `isa`'s vector width with fused multiply-adds: the exact form in
/// `x86::gelu`'s kernels, the tanh form as the portable formula in blocks (within a few ulp
/// of the portable kernel).
#[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
pub(crate) fn gelu_f32(isa: Isa, approximate: bool, input: &[f32], out: &mut [f32]) {
    if isa == Isa::Avx512Vnni {
        // SAFETY: Avx512Vnni is only chosen when the CPU has AVX-512 F/BW/VL (`available`).
        unsafe { gelu_f32_avx512(approximate, input, out) }
    } else {
        // SAFETY: only called for an available x86 ISA (`has_elementwise`), all of which
        // include AVX2 and FMA.
        unsafe { gelu_f32_avx2(approximate, input, out) }
    }
}

/// [`crate::kernels::softmax::softmax_f32_fast`] compiled for `isa`'s vectors, `exp` with fused
/// multiply-adds.
#[cfg(all(feature = "ops-softmax", feature = "ops-float"))]
pub(crate) fn softmax_f32(
    isa: Isa,
    input: &[f32],
    outer: usize,
    depth: usize,
    beta: f32,
    out: &mut [f32],
) {
    if isa == Isa::Avx512Vnni {
        // SAFETY: Avx512Vnni is only chosen when the CPU has AVX-512 F/BW/VL (`available`).
        unsafe { softmax_f32_avx512(input, outer, depth, beta, out) }
    } else {
        // SAFETY: only called for an available x86 ISA (`has_elementwise`), all of which
        // include AVX2 and FMA.
        unsafe { softmax_f32_avx2(input, outer, depth, beta, out) }
    }
}

/// [`crate::kernels::layer_norm::layer_norm_f32`] compiled for `isa`'s vectors.
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
) {
    if isa == Isa::Avx512Vnni {
        // SAFETY: Avx512Vnni is only chosen when the CPU has AVX-512 F/BW/VL (`available`).
        unsafe { layer_norm_f32_avx512(input, depth, eps, affine, out) }
    } else {
        // SAFETY: only called for an available x86 ISA (`has_elementwise`), all of which
        // include AVX2 and FMA.
        unsafe { layer_norm_f32_avx2(input, depth, eps, affine, out) }
    }
}

/// `out[j * rows + i] = input[i * cols + j]` for `rows` 2 to 4 (`cols = input.len() / rows`):
/// the transpose of a `[rows, cols]` matrix with few rows.
#[cfg(feature = "ops-shape")]
pub(crate) fn interleave_u32(input: &[u32], rows: usize, out: &mut [u32]) {
    assert!(input.len() == out.len() && input.len().is_multiple_of(rows));
    let cols = input.len() / rows;
    match rows {
        // SAFETY (all three): only called for Isa::Avx512Vnni, chosen when the CPU has
        // AVX-512 F (`has_transpose_few_rows_32`).
        2 => unsafe { interleave_u32_avx512::<2>(input, cols, out) },
        // SAFETY: as above.
        3 => unsafe { interleave_u32_avx512::<3>(input, cols, out) },
        // SAFETY: as above.
        4 => unsafe { interleave_u32_avx512::<4>(input, cols, out) },
        _ => unreachable!(),
    }
}

/// [`interleave_u32`] of `R` rows: per 16 columns, `R` output vectors, each lane taking its
/// column of its row by one masked permute per row.
#[cfg(feature = "ops-shape")]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
fn interleave_u32_avx512<const R: usize>(input: &[u32], cols: usize, out: &mut [u32]) {
    assert!(input.len() == R * cols && out.len() == R * cols);
    // Lane l of output vector v is output position 16v + l of the step: column (16v + l) / R
    // of row (16v + l) % R.
    let mut idx = [_mm512_setzero_si512(); R];
    let mut masks = [[0 as __mmask16; R]; R];
    for (v, (idx, masks)) in idx.iter_mut().zip(&mut masks).enumerate() {
        let mut cols_of = [0i32; 16];
        for (l, col) in cols_of.iter_mut().enumerate() {
            let p = 16 * v + l;
            *col = (p / R) as i32;
            masks[p % R] |= 1 << l;
        }
        // SAFETY: 16 i32.
        *idx = unsafe { _mm512_loadu_si512(cols_of.as_ptr() as *const __m512i) };
    }
    let (src, dst) = (input.as_ptr(), out.as_mut_ptr());
    let mut j = 0;
    while j + 16 <= cols {
        let mut rows = [_mm512_setzero_si512(); R];
        for (i, r) in rows.iter_mut().enumerate() {
            // SAFETY: columns j..j + 16 <= cols of row i.
            *r = unsafe { _mm512_loadu_si512(src.add(i * cols + j) as *const __m512i) };
        }
        for v in 0..R {
            let mut o = _mm512_setzero_si512();
            for (i, &r) in rows.iter().enumerate() {
                o = _mm512_mask_permutexvar_epi32(o, masks[v][i], idx[v], r);
            }
            // SAFETY: output positions R * j + 16v.. + 16 <= R * (j + 16) <= R * cols.
            unsafe { _mm512_storeu_si512(dst.add(R * j + 16 * v) as *mut __m512i, o) };
        }
        j += 16;
    }
    for j in j..cols {
        for i in 0..R {
            out[j * R + i] = input[i * cols + j];
        }
    }
}

#[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn unary_f32_avx512(op: crate::kernels::elementwise::UnaryOp, input: &[f32], out: &mut [f32]) {
    crate::kernels::elementwise::unary_loops(op, input, out)
}

#[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
#[target_feature(enable = "avx2,fma")]
fn unary_f32_avx2(op: crate::kernels::elementwise::UnaryOp, input: &[f32], out: &mut [f32]) {
    crate::kernels::elementwise::unary_loops(op, input, out)
}

#[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn gelu_f32_avx512(approximate: bool, input: &[f32], out: &mut [f32]) {
    if !approximate {
        return super::gelu::gelu_exact_avx512(input, out);
    }
    // Eight vectors side by side (four: 1.5x the time; sixteen spill too much).
    crate::kernels::elementwise::gelu_tanh_blocks::<128>(input, out)
}

#[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
#[target_feature(enable = "avx2,fma")]
fn gelu_f32_avx2(approximate: bool, input: &[f32], out: &mut [f32]) {
    if !approximate {
        return super::gelu::gelu_exact_avx2(input, out);
    }
    // Four vectors side by side (eight spill too much in 16 registers).
    crate::kernels::elementwise::gelu_tanh_blocks::<32>(input, out)
}

#[cfg(all(feature = "ops-softmax", feature = "ops-float"))]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn softmax_f32_avx512(input: &[f32], outer: usize, depth: usize, beta: f32, out: &mut [f32]) {
    crate::kernels::softmax::softmax_fast_loops::<true>(input, outer, depth, beta, out)
}

#[cfg(all(feature = "ops-softmax", feature = "ops-float"))]
#[target_feature(enable = "avx2,fma")]
fn softmax_f32_avx2(input: &[f32], outer: usize, depth: usize, beta: f32, out: &mut [f32]) {
    crate::kernels::softmax::softmax_fast_loops::<true>(input, outer, depth, beta, out)
}

#[cfg(all(
    feature = "ops-reduce",
    feature = "ops-elementwise",
    feature = "ops-float"
))]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn layer_norm_f32_avx512(
    input: &[f32],
    depth: usize,
    eps: f32,
    affine: crate::kernels::layer_norm::Affine<'_>,
    out: &mut [f32],
) {
    crate::kernels::layer_norm::layer_norm_loops(input, depth, eps, affine, out)
}

#[cfg(all(
    feature = "ops-reduce",
    feature = "ops-elementwise",
    feature = "ops-float"
))]
#[target_feature(enable = "avx2,fma")]
fn layer_norm_f32_avx2(
    input: &[f32],
    depth: usize,
    eps: f32,
    affine: crate::kernels::layer_norm::Affine<'_>,
    out: &mut [f32],
) {
    crate::kernels::layer_norm::layer_norm_loops(input, depth, eps, affine, out)
}

// ------------------------------------------------------------------------------ QUANTIZE

/// QUANTIZE of float32 `input` to `to` (`out`: `input.len()` values, little-endian), bit-exact
/// with the scalar `quantize_f32`: the same IEEE division `x / scale`, the same
/// `round_half_away` (truncate, add or subtract one when the exact remainder is at least a half;
/// `|q| >= 2^23` and NaN unchanged), the same float addition of the zero point, NaN to 0, the
/// clamp to the type's range in float, then an exact conversion.
pub(crate) fn quantize_f32(
    isa: Isa,
    input: &[f32],
    scale: f32,
    zero_point: i32,
    to: QuantizeTo,
    out: &mut [u8],
) {
    let (lo, hi) = match to {
        QuantizeTo::I8 => (-128.0, 127.0),
        QuantizeTo::U8 => (0.0, 255.0),
        QuantizeTo::I16 => (-32768.0, 32767.0),
    };
    let k = QuantParams {
        scale,
        z: zero_point as f32,
        lo,
        hi,
    };
    if isa == Isa::Avx512Vnni {
        // SAFETY: Avx512Vnni is only chosen when the CPU has AVX-512 F/BW/VL (`available`).
        unsafe { quantize_f32_avx512(&k, input, to, out) }
    } else {
        // SAFETY: only called for an available x86 ISA (`has_elementwise`), all of which
        // include AVX2 and FMA.
        unsafe { quantize_f32_avx2(&k, input, to, out) }
    }
}

struct QuantParams {
    scale: f32,
    z: f32,
    lo: f32,
    hi: f32,
}

/// Sixteen quantized values (i32, in `[lo, hi]`) of sixteen floats.
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn quantize_16(k: &QuantParams, x: __m512) -> __m512i {
    let q = _mm512_div_ps(x, _mm512_set1_ps(k.scale));
    // round_half_away: NaN and |q| >= 2^23 are kept.
    let keep = _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(_mm512_abs_ps(q), _mm512_set1_ps(8_388_608.0));
    let t = _mm512_cvtepi32_ps(_mm512_cvttps_epi32(q));
    let d = _mm512_sub_ps(q, t);
    let one = _mm512_set1_ps(1.0);
    let up = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(d, _mm512_set1_ps(0.5));
    let down = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(d, _mm512_set1_ps(-0.5));
    let r = _mm512_mask_add_ps(t, up, t, one);
    let r = _mm512_mask_sub_ps(r, down, r, one);
    let r = _mm512_mask_mov_ps(r, keep, q);
    let r = _mm512_add_ps(r, _mm512_set1_ps(k.z));
    let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(r, r);
    let r = _mm512_min_ps(_mm512_max_ps(r, _mm512_set1_ps(k.lo)), _mm512_set1_ps(k.hi));
    let r = _mm512_mask_mov_ps(r, nan, _mm512_setzero_ps());
    _mm512_cvttps_epi32(r)
}

#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn quantize_f32_avx512(k: &QuantParams, input: &[f32], to: QuantizeTo, out: &mut [u8]) {
    let size = if to == QuantizeTo::I16 { 2 } else { 1 };
    let n = input.len();
    assert!(out.len() == n * size);
    // Sixteen values to 16 or 32 bytes at `o` (truncating, as `v as i8` etc.; the values are
    // in the type's range anyway).
    // SAFETY (callers): `o` has room for 16 values of the output type.
    let store = |v: __m512i, o: *mut u8| unsafe {
        match to {
            QuantizeTo::I8 | QuantizeTo::U8 => {
                _mm_storeu_si128(o as *mut __m128i, _mm512_cvtepi32_epi8(v))
            }
            QuantizeTo::I16 => _mm256_storeu_si256(o as *mut __m256i, _mm512_cvtepi32_epi16(v)),
        }
    };
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: i + 16 <= n: sixteen floats of input, 16 * size bytes of out.
        unsafe {
            let x = _mm512_loadu_ps(input.as_ptr().add(i));
            store(quantize_16(k, x), out.as_mut_ptr().add(i * size));
        }
        i += 16;
    }
    if i < n {
        let mut x = [0f32; 16];
        x[..n - i].copy_from_slice(&input[i..]);
        let mut o = [0u8; 32];
        // SAFETY: x has sixteen floats, o 32 bytes.
        unsafe { store(quantize_16(k, _mm512_loadu_ps(x.as_ptr())), o.as_mut_ptr()) };
        out[i * size..].copy_from_slice(&o[..(n - i) * size]);
    }
}

/// [`quantize_16`] on eight lanes.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn quantize_8(k: &QuantParams, x: __m256) -> __m256i {
    let q = _mm256_div_ps(x, _mm256_set1_ps(k.scale));
    let abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0), q);
    let keep = _mm256_cmp_ps::<_CMP_NLT_UQ>(abs, _mm256_set1_ps(8_388_608.0));
    let t = _mm256_cvtepi32_ps(_mm256_cvttps_epi32(q));
    let d = _mm256_sub_ps(q, t);
    let one = _mm256_set1_ps(1.0);
    let up = _mm256_and_ps(_mm256_cmp_ps::<_CMP_GE_OQ>(d, _mm256_set1_ps(0.5)), one);
    let down = _mm256_and_ps(_mm256_cmp_ps::<_CMP_LE_OQ>(d, _mm256_set1_ps(-0.5)), one);
    // t + 1, t - 1 or t + 0 (the same sums as the scalar `t + 1.0`, `t - 1.0`, `t`; the
    // `up`/`down` lanes exclude each other).
    let r = _mm256_sub_ps(_mm256_add_ps(t, up), down);
    let r = _mm256_blendv_ps(r, q, keep);
    let r = _mm256_add_ps(r, _mm256_set1_ps(k.z));
    let nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(r, r);
    let r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(k.lo)), _mm256_set1_ps(k.hi));
    let r = _mm256_andnot_ps(nan, r);
    _mm256_cvttps_epi32(r)
}

#[target_feature(enable = "avx2,fma")]
fn quantize_f32_avx2(k: &QuantParams, input: &[f32], to: QuantizeTo, out: &mut [u8]) {
    let size = if to == QuantizeTo::I16 { 2 } else { 1 };
    let n = input.len();
    assert!(out.len() == n * size);
    // Sixteen values (two vectors in the type's range) to 16 or 32 bytes at `o`.
    // SAFETY (callers): `o` has room for 16 values of the output type.
    let store = |v0: __m256i, v1: __m256i, o: *mut u8| unsafe {
        match to {
            QuantizeTo::I8 => _mm_storeu_si128(o as *mut __m128i, narrow_16(v0, v1)),
            QuantizeTo::U8 => {
                let p = _mm256_permute4x64_epi64(_mm256_packs_epi32(v0, v1), 0b11_01_10_00);
                let v = _mm_packus_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
                _mm_storeu_si128(o as *mut __m128i, v)
            }
            QuantizeTo::I16 => {
                let p = _mm256_permute4x64_epi64(_mm256_packs_epi32(v0, v1), 0b11_01_10_00);
                _mm256_storeu_si256(o as *mut __m256i, p)
            }
        }
    };
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: i + 16 <= n: sixteen floats of input, 16 * size bytes of out.
        unsafe {
            let x0 = _mm256_loadu_ps(input.as_ptr().add(i));
            let x1 = _mm256_loadu_ps(input.as_ptr().add(i + 8));
            store(
                quantize_8(k, x0),
                quantize_8(k, x1),
                out.as_mut_ptr().add(i * size),
            );
        }
        i += 16;
    }
    if i < n {
        let mut x = [0f32; 16];
        x[..n - i].copy_from_slice(&input[i..]);
        let mut o = [0u8; 32];
        // SAFETY: x has sixteen floats, o 32 bytes.
        unsafe {
            let v0 = quantize_8(k, _mm256_loadu_ps(x.as_ptr()));
            let v1 = quantize_8(k, _mm256_loadu_ps(x.as_ptr().add(8)));
            store(v0, v1, o.as_mut_ptr());
        }
        out[i * size..].copy_from_slice(&o[..(n - i) * size]);
    }
}
