//! Float GELU (exact form) with AVX2 and FMA, one 8-lane vector at a time with every step in
//! registers, within 1e-5 relative of the exact value (as [`crate::math::gelu_fast`]) down to
//! 1e-35, 1e-35 absolute below:
//!
//! - from x = -2.25 up, `x/2 (1 + erf(x/√2))` with a rational approximation of the `erf`
//!   (about 17 operations a vector): `1 + erf` keeps 1e-5 of relative accuracy down to there
//!   (it is at least 0.024);
//! - a vector with a value below -2.25 (about one in ten in a transformer's feed-forward block
//!   after LayerNorm) also takes the relatively accurate `x/2 erfc(-x/√2)` of
//!   [`crate::math::gelu_fast`] (the Numerical Recipes fit `erfc(z) = t e^(-z^2 + P(t))`, `t =
//!   1 / (1 + z/2)`, ~45 operations) for those values, with two shortcuts: `-a^2 / 2` as an
//!   exact `hi + lo` from a fused multiply-subtract (`a a - round(a a)`) instead of splitting
//!   `a` into halves whose squares are exact, and `erfc(|x| / √2)` taken as 0 from `|x| = 13`
//!   (below 2e-38 there; GELU is then `x` or a value under 1e-36), so the exponential's `2^n`
//!   is a normal float, built in one step instead of two halves.
//!
//! Not bit-identical with the portable kernel (a few ulp apart, more around x = -2.25), and
//! the values of a slice's last partial vector go through the same vector code, so a value's
//! result does not depend on its position.

use super::*;
use crate::math::{ERFC_FIT, EXP_POLY, LN2_HI, LN2_LO, ROUNDING, ROUNDING_BITS};

/// Where `erfc(|x| / √2)` is taken as 0.
const ERFC_ZERO_FROM: f32 = 13.0;
/// Below this, GELU is taken from `erfc` ([`gelu8_tail`]), not from `1 + erf`.
const ERF_FROM: f32 = -2.25;
/// Where the rational `erf` is capped (beyond, `erf(x/√2)` is 1 within 1.2e-7).
const ERF_CAP: f32 = 5.3;
/// `erf(x/√2) = x P(x^2) / Q(x^2)`: `P`'s coefficients, lowest degree first (x, x^3, ...,
/// x^11), fitted to `erf(x/√2)` on `[0, 5.3]` by least squares reweighted toward equal
/// ripple (8e-9 absolute in exact arithmetic; a few 1e-8 in f32 with fused multiply-adds).
const ERF_NUM: [f32; 6] = [
    0.797_884_5,
    0.065_874_37,
    0.009_256_179,
    3.206_983e-4,
    1.275_839_6e-5,
    4.809_918_5e-8,
];
/// `Q`'s coefficients after its constant 1 (x^2, ..., x^10); see [`ERF_NUM`].
const ERF_DEN: [f32; 5] = [
    0.249_227_5,
    0.028_139_65,
    0.001_836_657_9,
    7.135_71e-5,
    1.237_156_7e-6,
];

/// The exact GELU of 8 values: `x/2 (1 + erf(x/√2))`, and [`gelu8_tail`] for the values
/// below [`ERF_FROM`] when there are any.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn gelu8(x: __m256) -> __m256 {
    let c = _mm256_set1_ps;
    let xc = _mm256_min_ps(_mm256_max_ps(x, c(-ERF_CAP)), c(ERF_CAP));
    let u = _mm256_mul_ps(xc, xc);
    let mut p = c(ERF_NUM[5]);
    for &k in ERF_NUM[..5].iter().rev() {
        p = _mm256_fmadd_ps(p, u, c(k));
    }
    let mut q = c(ERF_DEN[4]);
    for &k in ERF_DEN[..4].iter().rev() {
        q = _mm256_fmadd_ps(q, u, c(k));
    }
    let q = _mm256_fmadd_ps(q, u, c(1.0));
    let erf = _mm256_div_ps(_mm256_mul_ps(xc, p), q);
    let half_x = _mm256_mul_ps(c(0.5), x);
    let y = _mm256_fmadd_ps(half_x, erf, half_x);
    let low = _mm256_cmp_ps::<_CMP_LT_OQ>(x, c(ERF_FROM));
    if _mm256_movemask_ps(low) == 0 {
        return y;
    }
    _mm256_blendv_ps(y, gelu8_tail(x), low)
}

/// The exact GELU of 8 values from `erfc`, relatively accurate however small. Not inlined: a
/// call is taken only for the vectors that need it, where the compiler would otherwise
/// compute it for every vector and select.
#[inline(never)]
#[target_feature(enable = "avx2,fma")]
fn gelu8_tail(x: __m256) -> __m256 {
    let c = _mm256_set1_ps;
    let full = _mm256_andnot_ps(c(-0.0), x);
    let a = _mm256_min_ps(full, c(ERFC_ZERO_FROM));
    let keep = _mm256_cmp_ps::<_CMP_LT_OQ>(full, c(ERFC_ZERO_FROM));
    // t = 1 / (1 + z / 2), z = a / √2.
    let t = _mm256_div_ps(
        c(1.0),
        _mm256_fmadd_ps(a, c(0.5 * core::f32::consts::FRAC_1_SQRT_2), c(1.0)),
    );
    let mut p = c(ERFC_FIT[0]);
    for &k in &ERFC_FIT[1..] {
        p = _mm256_fmadd_ps(p, t, c(k));
    }
    // -a^2 / 2 + P(t) = hi + lo, hi = -round(a^2) / 2 (exact), lo = P(t) - (a^2 - round(a^2)) / 2.
    let sq = _mm256_mul_ps(a, a);
    let sq_err = _mm256_fmsub_ps(a, a, sq);
    let hi = _mm256_mul_ps(sq, c(-0.5));
    let lo = _mm256_fmadd_ps(sq_err, c(-0.5), p);
    // e^(hi + lo) = e^r 2^n: `hi - n ln2_hi` is exact (the two are within a factor 2 where n
    // is not 0), so `lo`'s digits count.
    let k = _mm256_fmadd_ps(
        _mm256_add_ps(hi, lo),
        c(core::f32::consts::LOG2_E),
        c(ROUNDING),
    );
    let n = _mm256_sub_epi32(_mm256_castps_si256(k), _mm256_set1_epi32(ROUNDING_BITS));
    let nf = _mm256_sub_ps(k, c(ROUNDING));
    let r = _mm256_fnmadd_ps(nf, c(LN2_HI), hi);
    let r = _mm256_fnmadd_ps(nf, c(LN2_LO), _mm256_add_ps(r, lo));
    let mut q = c(EXP_POLY[0]);
    for &k in &EXP_POLY[1..] {
        q = _mm256_fmadd_ps(q, r, c(k));
    }
    let e = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(q, r), r, r), c(1.0));
    // n >= -125 for a < 13: 2^n is normal.
    let scale = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(
        n,
        _mm256_set1_epi32(127),
    )));
    let tail = _mm256_and_ps(keep, _mm256_mul_ps(t, _mm256_mul_ps(e, scale)));
    // erfc(-z) = tail for x <= 0, 2 - tail above.
    let neg = _mm256_cmp_ps::<_CMP_LE_OQ>(x, _mm256_setzero_ps());
    let erfc = _mm256_blendv_ps(_mm256_sub_ps(c(2.0), tail), tail, neg);
    _mm256_mul_ps(_mm256_mul_ps(c(0.5), x), erfc)
}

/// `out = gelu(input)` (exact form) over the common length.
#[target_feature(enable = "avx2,fma")]
pub(crate) fn gelu_exact_avx2(input: &[f32], out: &mut [f32]) {
    let n = input.len().min(out.len());
    let (input, out) = (&input[..n], &mut out[..n]);
    let mut ins = input.chunks_exact(32);
    let mut outs = out.chunks_exact_mut(32);
    // Four vectors per step: their chains (~20 dependent steps each) overlap.
    for (i, o) in (&mut ins).zip(&mut outs) {
        for (i, o) in i.chunks_exact(8).zip(o.chunks_exact_mut(8)) {
            // SAFETY: `i` and `o` hold 8 floats each.
            unsafe { _mm256_storeu_ps(o.as_mut_ptr(), gelu8(_mm256_loadu_ps(i.as_ptr()))) };
        }
    }
    let (rest_in, rest_out) = (ins.remainder(), outs.into_remainder());
    for (i, o) in rest_in.chunks(8).zip(rest_out.chunks_mut(8)) {
        let mut buf = [0f32; 8];
        buf[..i.len()].copy_from_slice(i);
        // SAFETY: `buf` holds 8 floats.
        unsafe { _mm256_storeu_ps(buf.as_mut_ptr(), gelu8(_mm256_loadu_ps(buf.as_ptr()))) };
        o.copy_from_slice(&buf[..o.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact GELU in f64.
    fn gelu_exact(x: f32) -> f64 {
        let x = f64::from(x);
        0.5 * x * libm::erfc(-x / core::f64::consts::SQRT_2)
    }

    fn avx2() -> bool {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }

    #[test]
    fn gelu_avx2_is_within_1e5_relative_of_the_exact_value() {
        if !avx2() {
            return;
        }
        let mut xs: Vec<f32> = (0..40_000)
            .map(|i| (i as f32 - 20_000.0) / 1000.0)
            .collect();
        // Densely where `1 + erf` is used down to its limit (vectors on both sides of it).
        xs.extend((0..400_000).map(|i| -2.3 + i as f32 * 2e-5));
        // Around the cut at 13 and the fit's clamps, tiny, huge and special values.
        xs.extend([
            12.99, 13.0, 13.01, -12.99, -12.5, -13.0, -13.01, 1e-38, -1e-38, 1e-45, -1e-45, 0.0,
        ]);
        xs.extend([-0.0, 3e38, -3e38, 1e30, -1e30, 1e-7, -1e-7]);
        let mut got = vec![0f32; xs.len()];
        // SAFETY: (test) the CPU has AVX2 and FMA.
        unsafe { gelu_exact_avx2(&xs, &mut got) };
        for (&x, &g) in xs.iter().zip(&got) {
            let want = gelu_exact(x);
            let err = (f64::from(g) - want).abs();
            assert!(
                err <= 1e-5 * want.abs() || err <= 1e-35,
                "gelu({x}) = {g}, want {want}"
            );
        }
        let special = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY];
        let mut got = [0f32; 3];
        // SAFETY: (test) as above.
        unsafe { gelu_exact_avx2(&special, &mut got) };
        // GELU(-inf) is 0 * inf here, as in the portable kernel and TFLite's formula.
        assert!(got[0].is_nan() && got[1] == f32::INFINITY && got[2].is_nan());
    }

    #[test]
    fn gelu_avx2_agrees_with_the_reference_formula_at_every_length() {
        if !avx2() {
            return;
        }
        let xs: Vec<f32> = (0..77).map(|i| (i as f32 - 40.0) * 0.173).collect();
        let mut all = vec![0f32; xs.len()];
        // SAFETY: (test) the CPU has AVX2 and FMA.
        unsafe { gelu_exact_avx2(&xs, &mut all) };
        let reference = crate::kernels::elementwise::UnaryOp::Gelu { approximate: false };
        for (&v, &g) in xs.iter().zip(&all) {
            let want = crate::kernels::elementwise::unary_fn(reference, v);
            // As the portable GELU: relatively, and to the rounding of TFLite's `1 + erf`.
            let tol = 1e-5 * want.abs() + 0.5 * v.abs() * f32::EPSILON;
            assert!((g - want).abs() <= tol, "gelu({v}) = {g}, want {want}");
        }
        // Every length and offset (whole blocks, vectors, a partial vector) gives each value
        // the same result; nothing beyond the output's length is written.
        for start in [0, 3] {
            for len in 0..=xs.len() - start {
                let mut got = vec![-7f32; len + 1];
                // SAFETY: (test) as above.
                unsafe { gelu_exact_avx2(&xs[start..start + len], &mut got[..len]) };
                assert_eq!(&got[..len], &all[start..start + len], "length {len}");
                assert_eq!(got[len], -7.0);
            }
        }
    }
}
