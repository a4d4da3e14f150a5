//! Int16 ADD/SUB/MUL ([`ArithI16`]) on 8 (AVX2) and 16 (AVX-512) 32-bit lanes.

use super::*;

/// `out[i] = a[i] ± b[i]` (or `*`) for an int16 ADD/SUB (MUL), bit-exact with the scalar
/// kernel (`BinaryI8::eval_i32`): each input's rescaling as [`ArithI16`] describes, then the
/// output stage with the exact vector `MultiplyByQuantizedMultiplier` ([`srdhm_rdbpot_8`]), the
/// clamp, and a saturating narrowing (the clamp keeps the values inside int16).
pub(crate) fn arith_i16(p: &ArithI16, a: Run<'_, i16>, b: Run<'_, i16>, out: &mut [i16]) {
    let n = out.len();
    let (Some(a), Some(b)) = (Operand::new(a, n), Operand::new(b, n)) else {
        return;
    };
    if p.isa == Isa::Avx512Vnni {
        // SAFETY: Avx512Vnni is only chosen when the CPU has AVX-512 F/BW/VL (`available`).
        unsafe { arith_i16_avx512(p, &a, &b, out) }
    } else {
        // SAFETY: ArithI16 exists only for an available ISA (`has_arith_i16`), on x86 all of
        // them include AVX2 and FMA.
        unsafe { arith_i16_avx2(p, &a, &b, out) }
    }
}

impl Operand<'_, i16> {
    /// Sixteen values from `i` (`i + 16 <= n`).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn load(&self, i: usize) -> __m256i {
        let s: &[i16] = match self {
            Operand::Slice(s) => &s[i..i + 16],
            Operand::Repeat(v) => v,
        };
        // SAFETY: s has 16 values (32 bytes).
        unsafe { _mm256_loadu_si256(s.as_ptr() as *const __m256i) }
    }

    /// The values from `i` to `n` (fewer than sixteen), zeros after.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn load_tail(&self, i: usize) -> __m256i {
        let mut tmp = [0i16; 16];
        match self {
            Operand::Slice(s) => {
                let m = (s.len() - i).min(16);
                tmp[..m].copy_from_slice(&s[i..i + m]);
            }
            Operand::Repeat(v) => tmp = *v,
        }
        // SAFETY: tmp has 16 values (32 bytes).
        unsafe { _mm256_loadu_si256(tmp.as_ptr() as *const __m256i) }
    }
}

/// The parameters of [`arith_i16_avx512`] in registers.
struct ArithW16 {
    op: ArithOp,
    split1: [__m512i; 2],
    split2: [__m512i; 2],
    in1: [__m512i; 4],
    in2: [__m512i; 4],
    out_left: __m128i,
    out: [__m512i; 4],
    lo: __m512i,
    hi: __m512i,
}

impl ArithW16 {
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    fn new(p: &ArithI16) -> ArithW16 {
        let set = _mm512_set1_epi32;
        let stage = |m: &Mbqm| [set(m.mult), set(m.mask), set(m.thr), set(m.right)];
        ArithW16 {
            op: p.op,
            split1: p.split1.map(|v| set(v)),
            split2: p.split2.map(|v| set(v)),
            in1: stage(&p.in1),
            in2: stage(&p.in2),
            out_left: _mm_cvtsi32_si128(p.out.left),
            out: stage(&p.out),
            lo: set(p.act_min),
            hi: set(p.act_max),
        }
    }

    /// Sixteen outputs of the sixteen int16 values in `x` and in `y`.
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    fn apply(&self, x: __m256i, y: __m256i) -> __m256i {
        let (vx, vy) = (_mm512_cvtepi16_epi32(x), _mm512_cvtepi16_epi32(y));
        let round = _mm512_set1_epi32(1 << 15);
        // SRDHM(v << 15, m) = v mh + ((v ml + 2^15) >> 16), v ml = v (ml - 2^15) + (v << 15).
        let rescale = |v: __m512i, s: &[__m512i; 2], m: &[__m512i; 4]| {
            let high = _mm512_madd_epi16(v, s[0]);
            let low = _mm512_add_epi32(_mm512_madd_epi16(v, s[1]), _mm512_slli_epi32::<15>(v));
            let low = _mm512_srai_epi32::<16>(_mm512_add_epi32(low, round));
            rdbpot_16(_mm512_add_epi32(high, low), m[1], m[2], m[3])
        };
        let raw = match self.op {
            // The high halves of `vy`'s lanes zero: `vpmaddwd` is then the 32-bit product.
            ArithOp::Mul => _mm512_madd_epi16(vx, _mm512_cvtepu16_epi32(y)),
            ArithOp::Add => _mm512_add_epi32(
                rescale(vx, &self.split1, &self.in1),
                rescale(vy, &self.split2, &self.in2),
            ),
            ArithOp::Sub => _mm512_sub_epi32(
                rescale(vx, &self.split1, &self.in1),
                rescale(vy, &self.split2, &self.in2),
            ),
        };
        let o = &self.out;
        let q = srdhm_rdbpot_16(_mm512_sll_epi32(raw, self.out_left), o[0], o[1], o[2], o[3]);
        let q = _mm512_min_epi32(_mm512_max_epi32(q, self.lo), self.hi);
        _mm512_cvtsepi32_epi16(q)
    }
}

#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn arith_i16_avx512(p: &ArithI16, a: &Operand<'_, i16>, b: &Operand<'_, i16>, out: &mut [i16]) {
    let k = ArithW16::new(p);
    let n = out.len();
    let mut i = 0;
    while i + 16 <= n {
        let v = k.apply(a.load(i), b.load(i));
        let o = &mut out[i..i + 16];
        // SAFETY: o has 16 values (32 bytes).
        unsafe { _mm256_storeu_si256(o.as_mut_ptr() as *mut __m256i, v) };
        i += 16;
    }
    if i < n {
        store_tail_i16(k.apply(a.load_tail(i), b.load_tail(i)), &mut out[i..]);
    }
}

/// Stores the first `out.len() < 16` values of `v`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn store_tail_i16(v: __m256i, out: &mut [i16]) {
    let mut tmp = [0i16; 16];
    // SAFETY: tmp has 16 values (32 bytes).
    unsafe { _mm256_storeu_si256(tmp.as_mut_ptr() as *mut __m256i, v) };
    let m = out.len().min(16);
    out[..m].copy_from_slice(&tmp[..m]);
}

/// [`ArithW16`] on eight lanes.
struct ArithW8 {
    op: ArithOp,
    split1: [__m256i; 2],
    split2: [__m256i; 2],
    in1: [__m256i; 4],
    in2: [__m256i; 4],
    out_left: __m128i,
    out: [__m256i; 4],
    lo: __m256i,
    hi: __m256i,
}

impl ArithW8 {
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn new(p: &ArithI16) -> ArithW8 {
        let set = _mm256_set1_epi32;
        let stage = |m: &Mbqm| [set(m.mult), set(m.mask), set(m.thr), set(m.right)];
        ArithW8 {
            op: p.op,
            split1: p.split1.map(|v| set(v)),
            split2: p.split2.map(|v| set(v)),
            in1: stage(&p.in1),
            in2: stage(&p.in2),
            out_left: _mm_cvtsi32_si128(p.out.left),
            out: stage(&p.out),
            lo: set(p.act_min),
            hi: set(p.act_max),
        }
    }

    /// Eight outputs (as i32, in the int16 range) of the eight int16 values in `x` and `y`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn apply(&self, x: __m128i, y: __m128i) -> __m256i {
        let (vx, vy) = (_mm256_cvtepi16_epi32(x), _mm256_cvtepi16_epi32(y));
        let round = _mm256_set1_epi32(1 << 15);
        let rescale = |v: __m256i, s: &[__m256i; 2], m: &[__m256i; 4]| {
            let high = _mm256_madd_epi16(v, s[0]);
            let low = _mm256_add_epi32(_mm256_madd_epi16(v, s[1]), _mm256_slli_epi32::<15>(v));
            let low = _mm256_srai_epi32::<16>(_mm256_add_epi32(low, round));
            rdbpot_8(_mm256_add_epi32(high, low), m[1], m[2], m[3])
        };
        let raw = match self.op {
            ArithOp::Mul => _mm256_madd_epi16(vx, _mm256_cvtepu16_epi32(y)),
            ArithOp::Add => _mm256_add_epi32(
                rescale(vx, &self.split1, &self.in1),
                rescale(vy, &self.split2, &self.in2),
            ),
            ArithOp::Sub => _mm256_sub_epi32(
                rescale(vx, &self.split1, &self.in1),
                rescale(vy, &self.split2, &self.in2),
            ),
        };
        let o = &self.out;
        let q = srdhm_rdbpot_8(_mm256_sll_epi32(raw, self.out_left), o[0], o[1], o[2], o[3]);
        _mm256_min_epi32(_mm256_max_epi32(q, self.lo), self.hi)
    }

    /// Sixteen outputs of the sixteen int16 values in `x` and in `y`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn apply_16(&self, x: __m256i, y: __m256i) -> __m256i {
        let lo = self.apply(_mm256_castsi256_si128(x), _mm256_castsi256_si128(y));
        let hi = self.apply(
            _mm256_extracti128_si256::<1>(x),
            _mm256_extracti128_si256::<1>(y),
        );
        // 0-3, 8-11 | 4-7, 12-15, then in order.
        _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packs_epi32(lo, hi))
    }
}

#[target_feature(enable = "avx2,fma")]
fn arith_i16_avx2(p: &ArithI16, a: &Operand<'_, i16>, b: &Operand<'_, i16>, out: &mut [i16]) {
    let k = ArithW8::new(p);
    let n = out.len();
    let mut i = 0;
    while i + 16 <= n {
        let v = k.apply_16(a.load(i), b.load(i));
        let o = &mut out[i..i + 16];
        // SAFETY: o has 16 values (32 bytes).
        unsafe { _mm256_storeu_si256(o.as_mut_ptr() as *mut __m256i, v) };
        i += 16;
    }
    if i < n {
        store_tail_i16(k.apply_16(a.load_tail(i), b.load_tail(i)), &mut out[i..]);
    }
}
