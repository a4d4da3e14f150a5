//! The AVX2 int8 output stage in its unsigned-product form ([`RqU8`]): the fused double
//! rounding of `MultiplyByQuantizedMultiplier` and the output offset as one 32x32-bit unsigned
//! product and one add per lane, bit-exact with [`Requant::apply`] where
//! [`Requant::unsigned`] holds; and [`Stage16`], the 16-channel output stage the AVX2 GEMM and
//! depthwise kernels are generic over (this form, or [`Rq8`]'s general one).

use super::*;

/// i32 words per 8 channels of [`unsigned_cache`]: `bias + 2^31`, `2m`, `2m` of the odd
/// channels in the low halves of the 64-bit lanes, the 64-bit constants `A` of the even and of
/// the odd channels, and `e`.
const U_BLOCK_WORDS: usize = UNSIGNED_CACHE_WORDS / 2;

/// The unsigned-product form's constants of the 8-channel blocks of `rq` that hold channels
/// `chans`, block `b` at words `48 b..48 b + 48` of `cache` ([`RqU8`]'s fields): derived once
/// per GEMM or depthwise call (for the channels it computes) and loaded by each tile or run of
/// pixels, as the AVX-512 kernels' `fused_cache`.
pub(crate) fn unsigned_cache(rq: &Requant, cache: &mut [i32], chans: Range<usize>) {
    assert!(rq.unsigned && available(Isa::Avx2));
    // SAFETY: AVX2 and FMA are available (asserted).
    unsafe { unsigned_cache_avx2(rq, cache, chans) }
}

#[target_feature(enable = "avx2,fma")]
fn unsigned_cache_avx2(rq: &Requant, cache: &mut [i32], chans: Range<usize>) {
    let n = rq.bias.len();
    assert!(n.is_multiple_of(8) && cache.len() == n / 8 * U_BLOCK_WORDS && chans.end <= n);
    assert!(rq.mult.len() == n && rq.shift.len() == n);
    // A = 2K - 2^32 (m + 1) with 2K = 2^31 + ((1 + 2 off) 2^31) << e (`Requant::fused_add`):
    // `(1 + 2 off) 2^31` and its shift by `e` are below 2K in magnitude, which the fused form
    // keeps under 2^63.
    let base = _mm256_set1_epi64x((1 + 2 * i64::from(rq.out_offset)) << 31);
    let low = _mm256_set1_epi64x(0xFFFF_FFFF);
    let (one, half) = (_mm256_set1_epi64x(1), _mm256_set1_epi64x(1 << 31));
    let a = |m: __m256i, e: __m256i| {
        let hi = _mm256_slli_epi64::<32>(_mm256_add_epi64(m, one));
        _mm256_sub_epi64(_mm256_add_epi64(_mm256_sllv_epi64(base, e), half), hi)
    };
    let blocks = chans.start / 8..chans.end.div_ceil(8);
    for (b, words) in cache.chunks_exact_mut(U_BLOCK_WORDS).enumerate() {
        if !blocks.contains(&b) {
            continue;
        }
        let c = 8 * b;
        // SAFETY: channels c..c + 8 of the three arrays (c + 8 <= n, asserted lengths).
        let (bias, m, shift) = unsafe {
            let ld = |v: &[i32]| _mm256_loadu_si256(v.as_ptr().add(c) as *const __m256i);
            let s = _mm_loadl_epi64(rq.shift.as_ptr().add(c) as *const __m128i);
            (ld(&rq.bias), ld(&rq.mult), _mm256_cvtepi8_epi32(s))
        };
        let e = _mm256_sub_epi32(_mm256_setzero_si256(), shift);
        let m2 = _mm256_add_epi32(m, m);
        let v = [
            _mm256_add_epi32(bias, _mm256_set1_epi32(i32::MIN)),
            m2,
            _mm256_srli_epi64::<32>(m2),
            // m >= 0 (checked by `Requant::allow_unsigned`): zero-extended in 64-bit lanes.
            a(_mm256_and_si256(m, low), _mm256_and_si256(e, low)),
            a(_mm256_srli_epi64::<32>(m), _mm256_srli_epi64::<32>(e)),
            e,
        ];
        for (i, v) in v.into_iter().enumerate() {
            // SAFETY: words 8 i..8 i + 8 of the block's 48.
            unsafe { _mm256_storeu_si256(words.as_mut_ptr().add(8 * i) as *mut __m256i, v) };
        }
    }
}

/// The unsigned-product form of 8 channels, loaded from [`unsigned_cache`].
///
/// With `x = acc + bias`, `m >= 0`, `e >= 1` and `K = Requant::fused_add(e, off)`, the output
/// before the clamp is the fused form of [`Rq16`], `((p + K) >> 31 - [p < 0]) >> e` with `p =
/// x m`. With `y = x + 2^31` as unsigned (what adding `bias + 2^31` to the accumulator
/// leaves), the unsigned product `y * 2m = 2p + 2^32 m`, so `T = y * 2m + A`, `A = 2K - 2^32
/// (m + 1)` (modulo 2^64), is `2 (p + K) - 2^32`, exact when `|p + K| + 2^32 < 2^62` (checked
/// for the kernel's accumulators by [`Requant::allow_unsigned`]); its high half is `(p + K) >>
/// 31 - 1`, and adding the top bit of `y`, `1 - [x < 0]`, gives `(p + K) >> 31 - [x < 0]`.
/// `[x < 0] = [p < 0]` when `m > 0`; when `m = 0` both give `off` (`K >> 31 = 2^(e-1) + off
/// 2^e`). Then the arithmetic shift by `e`: ten vector operations per 8 outputs where
/// [`Rq8::apply`] takes nineteen, and the clamp moves to the narrowed bytes.
#[derive(Clone, Copy)]
pub(super) struct RqU8 {
    bias: __m256i,
    m2: __m256i,
    m2_odd: __m256i,
    a_even: __m256i,
    a_odd: __m256i,
    e: __m256i,
}

impl RqU8 {
    /// Channels `c..c + 8` (`c` a multiple of 8) of `cache` ([`unsigned_cache`]).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn load(cache: &[i32], c: usize) -> RqU8 {
        assert!(c.is_multiple_of(8) && (c / 8 + 1) * U_BLOCK_WORDS <= cache.len());
        // SAFETY: the block's 48 words (asserted).
        let ld = |i: usize| unsafe {
            _mm256_loadu_si256(cache.as_ptr().add(c / 8 * U_BLOCK_WORDS + 8 * i) as *const __m256i)
        };
        RqU8 {
            bias: ld(0),
            m2: ld(1),
            m2_odd: ld(2),
            a_even: ld(3),
            a_odd: ld(4),
            e: ld(5),
        }
    }

    /// The requantized accumulators plus the output offset (not clamped), as i32 lanes.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn apply(&self, acc: __m256i) -> __m256i {
        let y = _mm256_add_epi32(acc, self.bias);
        let even = _mm256_add_epi64(_mm256_mul_epu32(y, self.m2), self.a_even);
        // The odd lanes to the low halves with a shuffle (port 5) rather than a shift (the
        // multiplies' ports).
        let odd = _mm256_mul_epu32(_mm256_shuffle_epi32::<0xF5>(y), self.m2_odd);
        let odd = _mm256_add_epi64(odd, self.a_odd);
        let h = _mm256_blend_epi32::<0b1010_1010>(_mm256_shuffle_epi32::<0xF5>(even), odd);
        let h = _mm256_add_epi32(h, _mm256_srli_epi32::<31>(y));
        _mm256_srav_epi32(h, self.e)
    }
}

/// The output stage of 16 channels (two 8-lane halves) as the AVX2 kernels use it: loaded
/// once per tile column or run of pixels, then applied to each row's accumulators.
pub(super) trait Stage16: Sized {
    /// Channels `c..c + 16` of `rq` (`cache`: [`unsigned_cache`] of `rq` for [`U16`]).
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    unsafe fn load16(rq: &Requant, cache: &[i32], c: usize) -> Self;
    /// Channels `c..c + 8` only (the other half unused).
    ///
    /// # Safety
    /// As [`Self::load16`].
    unsafe fn load8(rq: &Requant, cache: &[i32], c: usize) -> Self;
    /// The requantized lanes (output offset added) of the two halves' accumulators.
    ///
    /// # Safety
    /// As [`Self::load16`].
    unsafe fn apply(&self, a0: __m256i, a1: __m256i) -> (__m256i, __m256i);
    /// The narrowed bytes made outputs (the activation clamp, where `apply` leaves it).
    ///
    /// # Safety
    /// As [`Self::load16`].
    unsafe fn finish(&self, v: __m128i) -> __m128i;

    /// The output bytes of the accumulators `a0` (channels 0-7) and `a1` (8-15).
    ///
    /// # Safety
    /// As [`Self::load16`].
    #[inline(always)]
    unsafe fn bytes16(&self, a0: __m256i, a1: __m256i) -> __m128i {
        // SAFETY: the contract (AVX2).
        unsafe {
            let (v0, v1) = self.apply(a0, a1);
            self.finish(narrow_16(v0, v1))
        }
    }

    /// The output bytes of accumulators in the order `vpunpck{l,h}wd` leave a 16-channel
    /// block in, `a0` channels 0-3 | 8-11 and `a1` 4-7 | 12-15 (the stage loaded in that
    /// order): one pack per 128-bit lane puts them back in channel order.
    ///
    /// # Safety
    /// As [`Self::load16`].
    #[inline(always)]
    unsafe fn bytes16_quads(&self, a0: __m256i, a1: __m256i) -> __m128i {
        // SAFETY: the contract (AVX2).
        unsafe {
            let (v0, v1) = self.apply(a0, a1);
            // 0-3, 4-7 | 8-11, 12-15 as i16.
            let p = _mm256_packs_epi32(v0, v1);
            let v = _mm_packs_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
            self.finish(v)
        }
    }

    /// The output bytes of channels 0-7 (the low 8 of the result; the others unspecified).
    ///
    /// # Safety
    /// As [`Self::load16`].
    #[inline(always)]
    unsafe fn bytes8(&self, a0: __m256i) -> __m128i {
        // SAFETY: the contract (AVX2).
        unsafe {
            let (q, _) = self.apply(a0, a0);
            let v = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
            self.finish(_mm_packs_epi16(v, v))
        }
    }
}

/// [`Rq8`]'s general form on 16 channels (offset and clamp in the 32-bit lanes).
pub(super) struct D16(Rq8, Rq8);

impl Stage16 for D16 {
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn load16(rq: &Requant, _: &[i32], c: usize) -> D16 {
        D16(Rq8::load(rq, c), Rq8::load(rq, c + 8))
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn load8(rq: &Requant, _: &[i32], c: usize) -> D16 {
        let p = Rq8::load(rq, c);
        D16(p, p)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn apply(&self, a0: __m256i, a1: __m256i) -> (__m256i, __m256i) {
        (self.0.apply(a0), self.1.apply(a1))
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn finish(&self, v: __m128i) -> __m128i {
        v
    }
}

/// [`RqU8`] on 16 channels, with the activation clamp on the narrowed bytes (the saturating
/// narrowing is int8's clamp, and clamping to a range inside int8's commutes with it).
pub(super) struct U16 {
    lo: RqU8,
    hi: RqU8,
    clamp: Option<(__m128i, __m128i)>,
}

impl U16 {
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn new(rq: &Requant, lo: RqU8, hi: RqU8) -> U16 {
        // (`allow_unsigned` keeps the activation range inside int8's.)
        let b = |v: i32| _mm_set1_epi8(v as i8);
        U16 {
            lo,
            hi,
            clamp: rq.clamp.then(|| (b(rq.act_min), b(rq.act_max))),
        }
    }
}

impl Stage16 for U16 {
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn load16(rq: &Requant, cache: &[i32], c: usize) -> U16 {
        U16::new(rq, RqU8::load(cache, c), RqU8::load(cache, c + 8))
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn load8(rq: &Requant, cache: &[i32], c: usize) -> U16 {
        let lo = RqU8::load(cache, c);
        U16::new(rq, lo, lo)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn apply(&self, a0: __m256i, a1: __m256i) -> (__m256i, __m256i) {
        (self.lo.apply(a0), self.hi.apply(a1))
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn finish(&self, v: __m128i) -> __m128i {
        match self.clamp {
            Some((lo, hi)) => _mm_min_epi8(_mm_max_epi8(v, lo), hi),
            None => v,
        }
    }
}
