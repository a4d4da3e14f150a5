//! Float GELU (exact form) with AVX2 + FMA (8 lanes) and AVX-512 (16 lanes): the branch-free
//! formula of [`crate::math::gelu_fast`] (`x/2 erfc(-x/√2)` from `e^(-a^2/2)` times a rational,
//! ~24 operations a vector, the same for every lane) with fused multiply-adds, keeping its
//! accuracy contract (within 1e-5 relative wherever `|GELU(x)| >= 1e-37`). Differences in
//! the arithmetic: `-a^2/2` is rounded once and taken as exact (its error, under `a^2 2^-25`,
//! is at most 5e-6 of the result at a = 13, where the portable kernel splits `a`: the kernels
//! read 4.4e-6 at worst over the contract's sweep, against 8.4e-7 with the split, for 3 fewer
//! operations), `n ln 2` is taken off in one fused step with the f32 `ln 2` (its error,
//! under 2e-9 a unit of `n`, is 2.5e-7 of the result at most), and the rational's numerator
//! is halved so it gives `Φ(-a)` and `x` needs no halving. Not bit-identical with the
//! portable kernel (a few ulp apart, up to 4e-6 relative in the far tail).
//!
//! Four vectors per step, so that their chains (~20 dependent operations, a division among
//! them) overlap; a slice's last partial vector goes through the same code with masked loads
//! and stores, so a value's result does not depend on its position.

use super::*;
use crate::math::{GELU_CLAMP, GELU_EXP, GELU_HALF_M_NUM as HALF_M_NUM, GELU_M_DEN, ROUNDING};

/// The exact GELU of 8 values.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn gelu8(x: __m256) -> __m256 {
    let c = _mm256_set1_ps;
    // x clamped to ±13, and a = |x| of that. (`min` and `max` return their second operand
    // for a NaN: it stays NaN through both, and through the rest.)
    let xc = _mm256_min_ps(c(GELU_CLAMP), _mm256_max_ps(c(-GELU_CLAMP), x));
    let a = _mm256_andnot_ps(c(-0.0), xc);
    // e^w = 2^n e^r for w = -a^2/2.
    let w = _mm256_mul_ps(_mm256_mul_ps(a, c(-0.5)), a);
    let k = _mm256_fmadd_ps(w, c(core::f32::consts::LOG2_E), c(ROUNDING));
    let nf = _mm256_sub_ps(k, c(ROUNDING));
    let r = _mm256_fnmadd_ps(nf, c(core::f32::consts::LN_2), w);
    let mut e = c(GELU_EXP[4]);
    for &k in GELU_EXP[..4].iter().rev() {
        e = _mm256_fmadd_ps(e, r, c(k));
    }
    let e = _mm256_fmadd_ps(e, r, c(1.0));
    let mut p = c(HALF_M_NUM[3]);
    for &k in HALF_M_NUM[..3].iter().rev() {
        p = _mm256_fmadd_ps(p, a, c(k));
    }
    // p 2^n by adding n to p's exponent: `k`'s low bits hold n (two's complement), so shifted
    // by 23 they are n in the exponent field. (p >= 0.49 and n >= -122: no underflow.)
    let n_exp = _mm256_slli_epi32::<23>(_mm256_castps_si256(k));
    let p = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), n_exp));
    let mut q = c(GELU_M_DEN[3]);
    for &k in GELU_M_DEN[..3].iter().rev() {
        q = _mm256_fmadd_ps(q, a, c(k));
    }
    let q = _mm256_fmadd_ps(q, a, c(1.0));
    // Φ(-a) = erfc(a / √2) / 2. GELU = xc Φ(-a) for x < 0 and x - x Φ(-a) above: both are
    // max(x, 0) - |xc Φ(-a)| (a blend costs more). xc, not x, so that x = +inf gives
    // inf - 13 Φ(-13); x >= 6 gives x exactly, as `x Φ(-a)` is then under half its ulp.
    let phi = _mm256_div_ps(_mm256_mul_ps(e, p), q);
    let tail = _mm256_andnot_ps(c(-0.0), _mm256_mul_ps(xc, phi));
    // (`max` returns its second operand, x, for a NaN.)
    _mm256_sub_ps(_mm256_max_ps(_mm256_setzero_ps(), x), tail)
}

/// The exact GELU of 16 values: [`gelu8`]'s arithmetic on 512-bit vectors, `2^n` applied by
/// `scalef` and the sign's choice by a masked subtraction.
#[inline]
#[target_feature(enable = "avx2,fma,avx512f")]
fn gelu16(x: __m512) -> __m512 {
    let c = _mm512_set1_ps;
    let a = _mm512_min_ps(_mm512_abs_ps(x), c(GELU_CLAMP));
    let w = _mm512_mul_ps(_mm512_mul_ps(a, c(-0.5)), a);
    let k = _mm512_fmadd_ps(w, c(core::f32::consts::LOG2_E), c(ROUNDING));
    let nf = _mm512_sub_ps(k, c(ROUNDING));
    let r = _mm512_fnmadd_ps(nf, c(core::f32::consts::LN_2), w);
    let mut e = c(GELU_EXP[4]);
    for &k in GELU_EXP[..4].iter().rev() {
        e = _mm512_fmadd_ps(e, r, c(k));
    }
    let e = _mm512_fmadd_ps(e, r, c(1.0));
    let mut p = c(HALF_M_NUM[3]);
    for &k in HALF_M_NUM[..3].iter().rev() {
        p = _mm512_fmadd_ps(p, a, c(k));
    }
    let mut q = c(GELU_M_DEN[3]);
    for &k in GELU_M_DEN[..3].iter().rev() {
        q = _mm512_fmadd_ps(q, a, c(k));
    }
    let q = _mm512_fmadd_ps(q, a, c(1.0));
    // `* 2^n` in one step (`scalef`, exact as the multiplication by `2^n` is: n >= -122).
    let phi = _mm512_scalef_ps(_mm512_div_ps(_mm512_mul_ps(e, p), q), nf);
    // `1 - Φ(-a)` in the lanes not below 0 (NaN included), in one masked step.
    let up = _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(x, _mm512_setzero_ps());
    let f = _mm512_mask_sub_ps(phi, up, c(1.0), phi);
    let xc = _mm512_max_ps(c(-GELU_CLAMP), x);
    _mm512_mul_ps(xc, f)
}

/// `out = gelu(input)` (exact form) over the common length, 8 lanes.
#[target_feature(enable = "avx2,fma")]
pub(crate) fn gelu_exact_avx2(input: &[f32], out: &mut [f32]) {
    let n = input.len().min(out.len());
    let (input, out) = (&input[..n], &mut out[..n]);
    let mut ins = input.chunks_exact(32);
    let mut outs = out.chunks_exact_mut(32);
    for (i, o) in (&mut ins).zip(&mut outs) {
        for (i, o) in i.chunks_exact(8).zip(o.chunks_exact_mut(8)) {
            // SAFETY: `i` and `o` hold 8 floats each.
            unsafe { _mm256_storeu_ps(o.as_mut_ptr(), gelu8(_mm256_loadu_ps(i.as_ptr()))) };
        }
    }
    let (rest_in, rest_out) = (ins.remainder(), outs.into_remainder());
    for (i, o) in rest_in.chunks(8).zip(rest_out.chunks_mut(8)) {
        let lanes = _mm256_cmpgt_epi32(
            _mm256_set1_epi32(i.len() as i32),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        );
        // SAFETY: the mask enables the first `i.len()` (= `o.len()`, at most 8) lanes only,
        // which are inside `i` and `o`; masked-off lanes are neither read nor written.
        unsafe {
            let x = _mm256_maskload_ps(i.as_ptr(), lanes);
            _mm256_maskstore_ps(o.as_mut_ptr(), lanes, gelu8(x));
        }
    }
}

/// `out = gelu(input)` (exact form) over the common length, 16 lanes.
#[target_feature(enable = "avx2,fma,avx512f")]
pub(crate) fn gelu_exact_avx512(input: &[f32], out: &mut [f32]) {
    let n = input.len().min(out.len());
    let (input, out) = (&input[..n], &mut out[..n]);
    let mut ins = input.chunks_exact(64);
    let mut outs = out.chunks_exact_mut(64);
    for (i, o) in (&mut ins).zip(&mut outs) {
        for (i, o) in i.chunks_exact(16).zip(o.chunks_exact_mut(16)) {
            // SAFETY: `i` and `o` hold 16 floats each.
            unsafe { _mm512_storeu_ps(o.as_mut_ptr(), gelu16(_mm512_loadu_ps(i.as_ptr()))) };
        }
    }
    let (rest_in, rest_out) = (ins.remainder(), outs.into_remainder());
    for (i, o) in rest_in.chunks(16).zip(rest_out.chunks_mut(16)) {
        let lanes: __mmask16 = ((1u32 << i.len()) - 1) as u16;
        // SAFETY: the mask enables the first `i.len()` (= `o.len()`, at most 16) lanes only,
        // which are inside `i` and `o`; masked-off lanes are neither read nor written (no
        // fault either).
        unsafe {
            let x = _mm512_maskz_loadu_ps(lanes, i.as_ptr());
            _mm512_mask_storeu_ps(o.as_mut_ptr(), lanes, gelu16(x));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::gelu_contract;

    #[test]
    fn gelu_avx2_keeps_the_gelu_contract() {
        if !(std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")) {
            return;
        }
        // SAFETY: (test) the CPU has AVX2 and FMA.
        gelu_contract::check("avx2", |x, o| unsafe { gelu_exact_avx2(x, o) });
    }

    #[test]
    fn gelu_avx512_keeps_the_gelu_contract() {
        if !(std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("fma")) {
            return;
        }
        // SAFETY: (test) the CPU has AVX-512 F, AVX2 and FMA.
        gelu_contract::check("avx512", |x, o| unsafe { gelu_exact_avx512(x, o) });
    }
}
