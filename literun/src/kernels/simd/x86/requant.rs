//! The int8 output stage in vector form: `MultiplyByQuantizedMultiplier` on 8 (AVX2) and 16
//! (AVX-512) channels, bit-exact with [`Requant::apply`].

use super::*;

/// `RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x, m), right)` on 8 lanes, `mask`
/// = `(1 << right) - 1` and `thr` = `mask >> 1` (the double rounding of
/// `MultiplyByQuantizedMultiplier` after its left shift; see [`Rq8`] for why it is exact
/// for every `x` when no lane of `m` is `i32::MIN`).
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn srdhm_rdbpot_8(
    x: __m256i,
    m: __m256i,
    mask: __m256i,
    thr: __m256i,
    right: __m256i,
) -> __m256i {
    let nudge = _mm256_set1_epi64x(1 << 30);
    let even = _mm256_srli_epi64(_mm256_add_epi64(_mm256_mul_epi32(x, m), nudge), 31);
    let odd = _mm256_mul_epi32(_mm256_srli_epi64(x, 32), _mm256_srli_epi64(m, 32));
    let odd = _mm256_slli_epi64(_mm256_srli_epi64(_mm256_add_epi64(odd, nudge), 31), 32);
    let hm = _mm256_blend_epi32(even, odd, 0b1010_1010);
    rdbpot_8(hm, mask, thr, right)
}

/// `RoundingDivideByPOT(hm, right)` on 8 lanes (`mask`, `thr` as in [`srdhm_rdbpot_8`]).
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn rdbpot_8(hm: __m256i, mask: __m256i, thr: __m256i, right: __m256i) -> __m256i {
    let rem = _mm256_and_si256(hm, mask);
    let neg = _mm256_cmpgt_epi32(_mm256_setzero_si256(), hm);
    let thr = _mm256_sub_epi32(thr, neg);
    let q = _mm256_srav_epi32(hm, right);
    _mm256_sub_epi32(q, _mm256_cmpgt_epi32(rem, thr))
}

/// [`srdhm_rdbpot_8`] on 16 lanes (the same operations, so the same numbers).
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
pub(super) fn srdhm_rdbpot_16(
    x: __m512i,
    m: __m512i,
    mask: __m512i,
    thr: __m512i,
    right: __m512i,
) -> __m512i {
    let nudge = _mm512_set1_epi64(1 << 30);
    let even = _mm512_srli_epi64(_mm512_add_epi64(_mm512_mul_epi32(x, m), nudge), 31);
    let odd = _mm512_mul_epi32(_mm512_srli_epi64(x, 32), _mm512_srli_epi64(m, 32));
    let odd = _mm512_add_epi64(odd, nudge);
    // (odd + nudge) << 1 has bits 31..62 in its high half, which is all the blend takes.
    let odd = _mm512_add_epi64(odd, odd);
    let hm = _mm512_mask_blend_epi32(0xAAAA, even, odd);
    rdbpot_16(hm, mask, thr, right)
}

/// [`rdbpot_8`] on 16 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
pub(super) fn rdbpot_16(hm: __m512i, mask: __m512i, thr: __m512i, right: __m512i) -> __m512i {
    let one = _mm512_set1_epi32(1);
    let rem = _mm512_and_si512(hm, mask);
    let neg = _mm512_cmpgt_epi32_mask(_mm512_setzero_si512(), hm);
    let thr = _mm512_mask_add_epi32(thr, neg, thr, one);
    let q = _mm512_srav_epi32(hm, right);
    _mm512_mask_add_epi32(q, _mm512_cmpgt_epi32_mask(rem, thr), q, one)
}

/// The requantization parameters of 8 channels in registers, derived from the stored ones
/// (`left`, `right`, `mask`, `thr` from `shift`, as [`Mbqm::new`]); loaded once per 8-channel
/// column of a tile. [`Rq8::apply`] is `MultiplyByQuantizedMultiplier` (double rounding) of
/// the 8 lanes, plus the output offset and clamp, bit-exact with [`Requant::apply`]:
/// - `SaturatingRoundingDoublingHighMul(a, m) = (a * m + 2^30) >> 31` (floor) for every `a`
///   when `m != i32::MIN` (the reference's negative nudge `1 - 2^30` with truncating division
///   gives the same value as the floor of `(a * m + 2^30) / 2^31`);
/// - `RoundingDivideByPOT(x, e) = (x >> e) + (x & mask > (mask >> 1) + (x < 0))`;
/// - `clamp(sat_add(v, off), lo, hi) = clamp(v, lo - off, hi - off) + off`.
///
/// With [`Requant::single_rounding`] the scaling is `(x * m + 2^(t - 1)) >> t`, `t = clamp(31 -
/// shift, 1, 62)`, in 64-bit lanes (even and odd lanes apart), clamped to i32, as
/// `multiply_by_quantized_multiplier_single_rounding`.
#[derive(Clone, Copy)]
pub(super) struct Rq8 {
    /// Single rounding: the shifts `t` and rounding constants `2^(t - 1)` of the even and the
    /// odd lanes, in 64-bit lanes.
    single: Option<[__m256i; 4]>,
    bias: __m256i,
    /// Whether any channel shifts left (`Requant::any_left`; else `left` is zero and unused).
    any_left: bool,
    left: __m256i,
    mult: __m256i,
    mask: __m256i,
    thr: __m256i,
    right: __m256i,
    lo: __m256i,
    hi: __m256i,
    off: __m256i,
}

impl Rq8 {
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn load(rq: &Requant, c: usize) -> Rq8 {
        assert!(c + 8 <= rq.bias.len());
        // SAFETY: the loads read rq.bias, rq.mult (8 i32) and rq.shift (8 i8) from c, in
        // bounds (asserted; all arrays have the same length).
        let (bias, mult, shift) = unsafe {
            let ld = |v: &[i32]| _mm256_loadu_si256(v.as_ptr().add(c) as *const __m256i);
            let s = _mm_loadl_epi64(rq.shift.as_ptr().add(c) as *const __m128i);
            (ld(&rq.bias), ld(&rq.mult), _mm256_cvtepi8_epi32(s))
        };
        let [left, right, mask, thr] = derive_8(shift, rq.any_left);
        let off = rq.out_offset;
        let single = rq.single_rounding.then(|| {
            let total = _mm256_sub_epi32(_mm256_set1_epi32(31), shift);
            let total = _mm256_min_epi32(
                _mm256_max_epi32(total, _mm256_set1_epi32(1)),
                _mm256_set1_epi32(62),
            );
            let even = _mm256_and_si256(total, _mm256_set1_epi64x(0xFFFF_FFFF));
            let odd = _mm256_srli_epi64::<32>(total);
            let one = _mm256_set1_epi64x(1);
            let round = |t: __m256i| _mm256_sllv_epi64(one, _mm256_sub_epi64(t, one));
            [even, odd, round(even), round(odd)]
        });
        Rq8 {
            single,
            bias,
            any_left: rq.any_left,
            left,
            mult,
            mask,
            thr,
            right,
            lo: _mm256_set1_epi32(rq.act_min.saturating_sub(off)),
            hi: _mm256_set1_epi32(rq.act_max.saturating_sub(off)),
            off: _mm256_set1_epi32(off),
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn apply(&self, acc: __m256i) -> __m256i {
        let x = _mm256_add_epi32(acc, self.bias);
        if let Some([t_even, t_odd, r_even, r_odd]) = self.single {
            let even = _mm256_add_epi64(_mm256_mul_epi32(x, self.mult), r_even);
            let odd = _mm256_mul_epi32(
                _mm256_srli_epi64::<32>(x),
                _mm256_srli_epi64::<32>(self.mult),
            );
            let odd = _mm256_add_epi64(odd, r_odd);
            let (even, odd) = (sra_clamp_64(even, t_even), sra_clamp_64(odd, t_odd));
            let q = _mm256_blend_epi32::<0b1010_1010>(even, _mm256_slli_epi64::<32>(odd));
            let q = _mm256_min_epi32(_mm256_max_epi32(q, self.lo), self.hi);
            return _mm256_add_epi32(q, self.off);
        }
        // Most layers' multipliers are below one: no left shift anywhere.
        let x = if self.any_left {
            _mm256_sllv_epi32(x, self.left)
        } else {
            x
        };
        let q = srdhm_rdbpot_8(x, self.mult, self.mask, self.thr, self.right);
        let q = _mm256_min_epi32(_mm256_max_epi32(q, self.lo), self.hi);
        _mm256_add_epi32(q, self.off)
    }
}

/// `v >> t` (arithmetic; `t` in 1..=62 per 64-bit lane) clamped to the i32 range: AVX2 shifts
/// 64-bit lanes logically only, and `v >> t = !(!v >>> t)` for negative `v`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn sra_clamp_64(v: __m256i, t: __m256i) -> __m256i {
    let sign = _mm256_cmpgt_epi64(_mm256_setzero_si256(), v);
    let q = _mm256_xor_si256(_mm256_srlv_epi64(_mm256_xor_si256(v, sign), t), sign);
    let (lo, hi) = (
        _mm256_set1_epi64x(i64::from(i32::MIN)),
        _mm256_set1_epi64x(i64::from(i32::MAX)),
    );
    let q = _mm256_blendv_epi8(q, lo, _mm256_cmpgt_epi64(lo, q));
    _mm256_blendv_epi8(q, hi, _mm256_cmpgt_epi64(q, hi))
}

/// `[left, right, mask, thr]` of [`Mbqm::new`] from 8 lanes of `shift` (in `-31..=31`;
/// `any_left`: whether any is positive, else `left` is zero). The AVX2 kernels derive these
/// per tile or per run of depthwise pixels, so every instruction counts.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn derive_8(shift: __m256i, any_left: bool) -> [__m256i; 4] {
    let (zero, one) = (_mm256_setzero_si256(), _mm256_set1_epi32(1));
    let (left, right) = if any_left {
        let left = _mm256_max_epi32(shift, zero);
        // max(shift, 0) - shift = max(-shift, 0).
        (left, _mm256_sub_epi32(left, shift))
    } else {
        (zero, _mm256_sub_epi32(zero, shift))
    };
    // (1 << 31) - 1 wraps to i32::MAX, as Mbqm's i64 arithmetic gives.
    let mask = _mm256_sub_epi32(_mm256_sllv_epi32(one, right), one);
    [left, right, mask, _mm256_srli_epi32::<1>(mask)]
}

/// [`derive_8`] on 16 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn derive_16(shift: __m512i, any_left: bool) -> [__m512i; 4] {
    let (zero, one) = (_mm512_setzero_si512(), _mm512_set1_epi32(1));
    let (left, right) = if any_left {
        let left = _mm512_max_epi32(shift, zero);
        (left, _mm512_sub_epi32(left, shift))
    } else {
        (zero, _mm512_sub_epi32(zero, shift))
    };
    let mask = _mm512_sub_epi32(_mm512_sllv_epi32(one, right), one);
    [left, right, mask, _mm512_srli_epi32::<1>(mask)]
}

/// The fused form's per-lane constants from 16 lanes of `shift` (every stored channel shifting
/// right, `shift = -e <= -1`): `[add_even, add_odd, rshift]`, the 64-bit
/// [`Requant::fused_add`] of the even and of the odd channels, and `e - 1` per channel.
/// Padding channels (shift 0) get meaningless lanes, which are never stored.
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn derive_fused_16(shift: __m512i, out_offset: i32) -> [__m512i; 3] {
    // e - 1 = -shift - 1 = !shift.
    let rshift = _mm512_xor_si512(shift, _mm512_set1_epi32(-1));
    // 2^30 + 2^(30 + e) + off * 2^(31 + e) = 2^30 + ((1 + 2 off) * 2^31) << (e - 1): |(1 + 2
    // off) * 2^31| < 2^63, and the shifted value fits as the whole constant does (checked when
    // packing), so the 64-bit shift is exact.
    let base = _mm512_set1_epi64((1 + 2 * i64::from(out_offset)) << 31);
    let half = _mm512_set1_epi64(1 << 30);
    // Each 64-bit lane's shift count: the even channel's e - 1 (low half), the odd one's (high).
    let r_even = _mm512_and_si512(rshift, _mm512_set1_epi64(0xFFFF_FFFF));
    let r_odd = _mm512_srli_epi64::<32>(rshift);
    let add = |r: __m512i| _mm512_add_epi64(half, _mm512_sllv_epi64(base, r));
    [add(r_even), add(r_odd), rshift]
}

/// The fused form's constants ([`derive_fused_16`]) of the 16-channel blocks of `rq` that
/// hold channels `chans`, block `b` at words `48 b..48 b + 48` of `cache` (`add_even`,
/// `add_odd`, `rshift`): derived once per GEMM or depthwise call (for the channels it
/// computes: a dense layer split over workers by channels derives each block once) and loaded
/// by each tile or pixel ([`Rq16::load_cached`]).
pub(crate) fn fused_cache(rq: &Requant, cache: &mut [i32], chans: Range<usize>) {
    assert!(rq.fused && available(Isa::Avx512Vnni));
    // SAFETY: AVX-512 F/BW/VL are available (asserted).
    unsafe { fused_cache_avx512(rq, cache, chans) }
}

#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn fused_cache_avx512(rq: &Requant, cache: &mut [i32], chans: Range<usize>) {
    assert!(cache.len() == rq.shift.len() / 16 * FUSED_CACHE_WORDS);
    let blocks = chans.start / 16..chans.end.div_ceil(16);
    for (b, words) in cache.chunks_exact_mut(FUSED_CACHE_WORDS).enumerate() {
        if blocks.contains(&b) {
            fused_cache_block(rq, 16 * b, words);
        }
    }
}

/// [`derive_fused_16`] of channels `c..c + 16` into `words` (48).
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn fused_cache_block(rq: &Requant, c: usize, words: &mut [i32]) {
    assert!(c + 16 <= rq.shift.len() && words.len() == FUSED_CACHE_WORDS);
    // SAFETY: shifts c..c + 16 (asserted).
    let shift = unsafe {
        _mm512_cvtepi8_epi32(_mm_loadu_si128(rq.shift.as_ptr().add(c) as *const __m128i))
    };
    for (i, v) in derive_fused_16(shift, rq.out_offset)
        .into_iter()
        .enumerate()
    {
        // SAFETY: words 16 i..16 i + 16 of the 48 (asserted).
        unsafe { _mm512_storeu_si512(words.as_mut_ptr().add(16 * i) as *mut __m512i, v) };
    }
}

/// Two requantized 8-lane vectors (channels 0-7, 8-15) narrowed to 16 bytes in order.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn narrow_16(v0: __m256i, v1: __m256i) -> __m128i {
    let p = _mm256_packs_epi32(v0, v1); // 0-3, 8-11 | 4-7, 12-15
    let p = _mm256_permute4x64_epi64(p, 0b11_01_10_00); // 0-3, 4-7 | 8-11, 12-15
    _mm_packs_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1))
}

/// Stores the first `out.len() <= 16` bytes of `v`.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn store_16(v: __m128i, out: &mut [i8]) {
    if out.len() >= 16 {
        // SAFETY: 16 bytes fit.
        unsafe { _mm_storeu_si128(out.as_mut_ptr() as *mut __m128i, v) };
    } else {
        let mut tmp = [0i8; 16];
        // SAFETY: tmp has 16 bytes.
        unsafe { _mm_storeu_si128(tmp.as_mut_ptr() as *mut __m128i, v) };
        out.copy_from_slice(&tmp[..out.len()]);
    }
}

/// Requantizes `cn <= 32` channels starting at `c0` of each of `rows` (double or single
/// rounding), row `r` to `out[r * stride..][..cn]`. The parameters are
/// loaded (and derived) once per column of the tile, not per row. `cache`: with AVX2 (or
/// AVX-VNNI), [`unsigned_cache`] of `rq` for its unsigned-product form, or empty.
#[allow(clippy::too_many_arguments)]
pub(crate) fn requant_tile(
    isa: Isa,
    rq: &Requant,
    cache: &[i32],
    c0: usize,
    rows: &[[i32; 32]],
    cn: usize,
    out: &mut [i8],
    stride: usize,
) {
    assert!(cn <= 32 && (rows.is_empty() || out.len() >= (rows.len() - 1) * stride + cn));
    if isa == Isa::Avx512Vnni {
        // SAFETY: Avx512Vnni is only chosen when the CPU has AVX-512 F/BW/VL (`available`).
        return unsafe { requant_tile_avx512(rq, c0, rows, cn, out, stride) };
    }
    // SAFETY: only called with packed weights, which exist only when AVX2 is available
    // (module invariant); a non-empty cache is `unsigned_cache` of `rq` (the callers').
    unsafe {
        if cache.is_empty() {
            requant_tile_avx2::<D16>(rq, cache, c0, rows, cn, out, stride)
        } else {
            assert!(rq.unsigned);
            requant_tile_avx2::<U16>(rq, cache, c0, rows, cn, out, stride)
        }
    }
}

/// The requantization parameters of 16 channels in registers ([`Rq8`] on 16 lanes: the
/// same operations, so the same numbers), loaded once for every row of a tile.
///
/// With [`Requant::fused`] (every channel shifts right by `e >= 1`) the two roundings and
/// the output offset are one 64-bit rounding shift per lane instead, with `p = x * m`:
///
/// ```text
/// RoundingDivideByPOT(SRDHM(x, m), e) + off
///     = (p + 2^30 + 2^(30 + e) + off * 2^(31 + e) - [p < 0] * 2^31) >> (31 + e)
/// ```
///
/// Why it is exact: with `hm = (p + 2^30) >> 31` (see [`Rq8`]), `RoundingDivideByPOT(hm,
/// e) = (hm + 2^(e-1) - [hm < 0]) >> e` for `e >= 1`, and `(floor(p' / 2^31) + c) >> e = (p' +
/// c * 2^31) >> (31 + e)` for integer `c`. `[hm < 0]` differs from `[p < 0]` only for `-2^30 <=
/// p < 0`, where both give 0. `|p| < 2^62` and `|constant| < 2^62` (checked when packing), so
/// nothing overflows, and the result (at most `2^30 + 1` before the offset) is the exact
/// `sat_add(q, off)`.
pub(super) struct Rq16 {
    /// Single rounding (`Requant::single_rounding`): the 64-bit rounding constants and shifts
    /// of the even and the odd lanes.
    single: Option<[__m512i; 4]>,
    pub(super) bias: __m512i,
    left: __m512i,
    any_left: bool,
    mult: __m512i,
    mask: __m512i,
    thr: __m512i,
    right: __m512i,
    lo: __m512i,
    hi: __m512i,
    off: __m512i,
    fused: bool,
    clamp: bool,
    /// The activation range (the fused form clamps after the offset).
    act_min: __m512i,
    act_max: __m512i,
    /// The odd channels' multipliers in the low halves of the 64-bit lanes.
    mult_odd: __m512i,
    add_even: __m512i,
    add_odd: __m512i,
    /// `e - 1` per channel.
    rshift: __m512i,
}

impl Rq16 {
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    pub(super) fn load(rq: &Requant, c: usize) -> Rq16 {
        if !rq.fused {
            return Self::load_cached(rq, &[], c);
        }
        // The block's fused constants through a one-block cache (the same loads as from the
        // whole cache, so one code path).
        let mut block = [0i32; FUSED_CACHE_WORDS];
        fused_cache_block(rq, c, &mut block);
        Self::load_at(rq, &block, 0, c)
    }

    /// [`Self::load`] taking the fused form's constants from `cache` ([`fused_cache`] of the
    /// whole `rq`; unused without the fused form).
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    pub(super) fn load_cached(rq: &Requant, cache: &[i32], c: usize) -> Rq16 {
        Self::load_at(rq, cache, c / 16 * FUSED_CACHE_WORDS, c)
    }

    /// The parameters of channels `c..c + 16`, with the fused form's constants at word `at` of
    /// `cache`.
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    fn load_at(rq: &Requant, cache: &[i32], at: usize, c: usize) -> Rq16 {
        assert!(c + 16 <= rq.bias.len());
        // SAFETY: the loads read rq.bias, rq.mult (16 i32) and rq.shift (16 i8) from c, in
        // bounds (asserted; all arrays have the same length).
        let ld = |v: &[i32]| unsafe { _mm512_loadu_si512(v.as_ptr().add(c) as *const __m512i) };
        // SAFETY: as above.
        let shift = unsafe {
            _mm512_cvtepi8_epi32(_mm_loadu_si128(rq.shift.as_ptr().add(c) as *const __m128i))
        };
        // Only what the chosen form uses: the fused form's constants come derived already
        // (the depthwise kernels load parameters per pixel).
        let fused = rq.fused;
        let z = _mm512_setzero_si512();
        let ([add_even, add_odd, rshift], [left, right, mask, thr]) = if fused {
            // The fused form's blocks start at multiples of 16 channels.
            assert!(c.is_multiple_of(16) && at + FUSED_CACHE_WORDS <= cache.len());
            // SAFETY: words at..at + 48 of the cache (asserted).
            let ld = |i: usize| unsafe {
                _mm512_loadu_si512(cache.as_ptr().add(at + 16 * i) as *const __m512i)
            };
            ([ld(0), ld(1), ld(2)], [z; 4])
        } else {
            ([z; 3], derive_16(shift, rq.any_left))
        };
        let off = rq.out_offset;
        let single = rq.single_rounding.then(|| {
            // total = clamp(31 - shift, 1, 62): the rounding shift of the 64-bit product.
            let total = _mm512_sub_epi32(_mm512_set1_epi32(31), shift);
            let total = _mm512_min_epi32(
                _mm512_max_epi32(total, _mm512_set1_epi32(1)),
                _mm512_set1_epi32(62),
            );
            let even = _mm512_and_si512(total, _mm512_set1_epi64(0xFFFF_FFFF));
            let odd = _mm512_srli_epi64::<32>(total);
            let one = _mm512_set1_epi64(1);
            let round = |t: __m512i| _mm512_sllv_epi64(one, _mm512_sub_epi64(t, one));
            [round(even), even, round(odd), odd]
        });
        let mult = ld(&rq.mult);
        Rq16 {
            single,
            bias: ld(&rq.bias),
            left,
            any_left: rq.any_left,
            mult,
            mask,
            thr,
            right,
            lo: _mm512_set1_epi32(rq.act_min.saturating_sub(off)),
            hi: _mm512_set1_epi32(rq.act_max.saturating_sub(off)),
            off: _mm512_set1_epi32(off),
            fused,
            clamp: rq.clamp,
            act_min: _mm512_set1_epi32(rq.act_min),
            act_max: _mm512_set1_epi32(rq.act_max),
            // (A shuffle, not a shift: port 0 is the one vpdpbusd needs.)
            mult_odd: _mm512_shuffle_epi32::<0xF5>(mult),
            add_even,
            add_odd,
            rshift,
        }
    }

    /// Requantized accumulators, narrowed to 16 bytes (in range already, so the saturating
    /// narrowing is a plain one).
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    pub(super) fn apply(&self, acc: __m512i) -> __m128i {
        self.apply_biased(_mm512_add_epi32(acc, self.bias))
    }

    /// [`Self::apply`] of accumulators that started from the bias (`x = acc + bias`).
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    pub(super) fn apply_biased(&self, x: __m512i) -> __m128i {
        _mm512_cvtsepi32_epi8(self.apply_i32(x))
    }

    /// The requantized values of `x = acc + bias` as 32-bit lanes, whose saturation to int8
    /// (`vpmovsdb`, or `vpackssdw` then `vpacksswb`) is the output.
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    pub(super) fn apply_i32(&self, x: __m512i) -> __m512i {
        if self.fused {
            let zero = _mm512_setzero_si512();
            let neg = _mm512_set1_epi64(-(1 << 31));
            let p = _mm512_mul_epi32(x, self.mult);
            let t = _mm512_add_epi64(p, self.add_even);
            let even = _mm512_mask_add_epi64(t, _mm512_cmplt_epi64_mask(p, zero), t, neg);
            // The odd lanes to the low halves with a shuffle (port 5) rather than a shift
            // (port 0, which vpdpbusd and the multiplies need).
            let p = _mm512_mul_epi32(_mm512_shuffle_epi32::<0xF5>(x), self.mult_odd);
            let t = _mm512_add_epi64(p, self.add_odd);
            let odd = _mm512_mask_add_epi64(t, _mm512_cmplt_epi64_mask(p, zero), t, neg);
            // `t >> (31 + e) = (t >> 32) >> (e - 1)`: the high halves of the sums (which fit
            // in 32 bits as |t| < 2^63), even lanes' moved down, shifted as 32-bit lanes.
            let v = _mm512_mask_shuffle_epi32::<0xF5>(odd, 0x5555, even);
            let v = _mm512_srav_epi32(v, self.rshift);
            // With the offset added: clamp to the activation range (the saturating narrowing
            // clamps to int8's).
            return if self.clamp {
                _mm512_min_epi32(_mm512_max_epi32(v, self.act_min), self.act_max)
            } else {
                v
            };
        }
        let q = if let Some([round_even, total_even, round_odd, total_odd]) = self.single {
            // `multiply_by_quantized_multiplier_single_rounding`: (x m + 2^(total-1)) >> total
            // in 64 bits, saturated to i32; even lanes, then odd lanes moved down.
            let lim = |v: __m512i| {
                let v = _mm512_max_epi64(v, _mm512_set1_epi64(i64::from(i32::MIN)));
                _mm512_min_epi64(v, _mm512_set1_epi64(i64::from(i32::MAX)))
            };
            let even = _mm512_mul_epi32(x, self.mult);
            let even = lim(_mm512_srav_epi64(
                _mm512_add_epi64(even, round_even),
                total_even,
            ));
            let odd = _mm512_mul_epi32(_mm512_shuffle_epi32::<0xF5>(x), self.mult_odd);
            let odd = lim(_mm512_srav_epi64(
                _mm512_add_epi64(odd, round_odd),
                total_odd,
            ));
            // Each 64-bit lane holds its i32 in the low half: odd ones go to the high half.
            _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64::<32>(odd))
        } else {
            // Most layers' multipliers are below one: no left shift anywhere.
            let x = if self.any_left {
                _mm512_sllv_epi32(x, self.left)
            } else {
                x
            };
            srdhm_rdbpot_16(x, self.mult, self.mask, self.thr, self.right)
        };
        let q = _mm512_min_epi32(_mm512_max_epi32(q, self.lo), self.hi);
        _mm512_add_epi32(q, self.off)
    }
}

#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn requant_tile_avx512(
    rq: &Requant,
    c0: usize,
    rows: &[[i32; 32]],
    cn: usize,
    out: &mut [i8],
    stride: usize,
) {
    let mut j = 0;
    while j < cn {
        let p = Rq16::load(rq, c0 + j);
        let end = (j + 16).min(cn);
        for (r, acc) in rows.iter().enumerate() {
            // SAFETY: j + 16 <= 32 lanes of acc.
            let a = unsafe { _mm512_loadu_si512(acc.as_ptr().add(j) as *const __m512i) };
            store_16(p.apply(a), &mut out[r * stride + j..r * stride + end]);
        }
        j += 16;
    }
}

/// The AVX2 output stage of a tile ([`requant_tile`]) in the form `S`.
///
/// # Safety
/// The CPU has AVX2 and FMA; `cache` is [`unsigned_cache`] of `rq` when `S` is [`U16`].
#[target_feature(enable = "avx2,fma")]
unsafe fn requant_tile_avx2<S: Stage16>(
    rq: &Requant,
    cache: &[i32],
    c0: usize,
    rows: &[[i32; 32]],
    cn: usize,
    out: &mut [i8],
    stride: usize,
) {
    if cn <= 8 {
        // (The narrow tile's layers: the first 8 lanes only.)
        // SAFETY: this function's contract.
        let p = unsafe { S::load8(rq, cache, c0) };
        for (r, acc) in rows.iter().enumerate() {
            // SAFETY: 8 <= 32 lanes of acc; the contract.
            let v = unsafe { p.bytes8(_mm256_loadu_si256(acc.as_ptr() as *const __m256i)) };
            let out = &mut out[r * stride..r * stride + cn];
            if cn == 8 {
                // SAFETY: 8 bytes fit.
                unsafe { _mm_storel_epi64(out.as_mut_ptr() as *mut __m128i, v) };
            } else {
                store_16(v, out);
            }
        }
        return;
    }
    let mut j = 0;
    while j < cn {
        // The per-channel arrays are padded to whole 16-channel tiles (the loads assert).
        // SAFETY: this function's contract.
        let p = unsafe { S::load16(rq, cache, c0 + j) };
        let end = (j + 16).min(cn);
        for (r, acc) in rows.iter().enumerate() {
            // SAFETY: j + 16 <= 32 lanes of acc; the contract.
            let v = unsafe {
                p.bytes16(
                    _mm256_loadu_si256(acc.as_ptr().add(j) as *const __m256i),
                    _mm256_loadu_si256(acc.as_ptr().add(j + 8) as *const __m256i),
                )
            };
            store_16(v, &mut out[r * stride + j..r * stride + end]);
        }
        j += 16;
    }
}

/// The parameters [`Rq16::load`] and [`Rq8::load`] derive for channels `c..c + 16`, for the
/// tests to compare with [`Mbqm::new`] and [`Requant::fused_add`].
#[cfg(test)]
pub(crate) struct Derived {
    /// `[left, right, mask, thr]` per channel (zero in the fused form).
    pub(crate) stages: [[i32; 16]; 4],
    /// The fused form's constant and `e - 1` per channel, in channel order.
    pub(crate) add: [i64; 16],
    pub(crate) rshift: [i32; 16],
    /// `add` and `rshift` through [`fused_cache`] and [`Rq16::load_cached`] (fused form only).
    pub(crate) cached: Option<([i64; 16], [i32; 16])>,
    /// [`Rq8::load`]'s `[left, right, mask, thr]` of the same channels (both halves).
    pub(crate) stages_8: [[i32; 16]; 4],
}

/// [`Derived`] of channels `c..c + 16`; `None` without AVX-512.
#[cfg(test)]
pub(crate) fn derived(rq: &Requant, c: usize) -> Option<Derived> {
    if !available(Isa::Avx512Vnni) {
        return None;
    }
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    fn run(rq: &Requant, c: usize) -> Derived {
        // SAFETY (transmutes): vectors and integer arrays of the same size, any bits valid.
        let v16 = |v: __m512i| unsafe { core::mem::transmute::<__m512i, [i32; 16]>(v) };
        let v64 = |v: __m512i| unsafe { core::mem::transmute::<__m512i, [i64; 8]>(v) };
        let v8 = |v: __m256i| unsafe { core::mem::transmute::<__m256i, [i32; 8]>(v) };
        let in_order = |p: &Rq16| -> [i64; 16] {
            let (even, odd) = (v64(p.add_even), v64(p.add_odd));
            core::array::from_fn(|i| if i % 2 == 0 { even[i / 2] } else { odd[i / 2] })
        };
        let p = Rq16::load(rq, c);
        let cached = rq.fused.then(|| {
            let mut cache = alloc::vec![0; rq.shift.len() / 16 * FUSED_CACHE_WORDS];
            fused_cache(rq, &mut cache, 0..rq.shift.len());
            let q = Rq16::load_cached(rq, &cache, c);
            (in_order(&q), v16(q.rshift))
        });
        let (h0, h1) = (Rq8::load(rq, c), Rq8::load(rq, c + 8));
        let both = |a: __m256i, b: __m256i| {
            let (a, b) = (v8(a), v8(b));
            core::array::from_fn(|i| if i < 8 { a[i] } else { b[i - 8] })
        };
        Derived {
            stages: [v16(p.left), v16(p.right), v16(p.mask), v16(p.thr)],
            add: in_order(&p),
            rshift: v16(p.rshift),
            cached,
            stages_8: [
                both(h0.left, h1.left),
                both(h0.right, h1.right),
                both(h0.mask, h1.mask),
                both(h0.thr, h1.thr),
            ],
        }
    }
    // SAFETY: AVX-512 F/BW/VL are available (checked above).
    Some(unsafe { run(rq, c) })
}
