//! Float math that works without std: `core` has no transcendental functions, so without the
//! `std` feature these come from `libm`; with it, from the platform's math library.

macro_rules! unary {
    ($($name:ident => $method:ident),* $(,)?) => {$(
        #[inline]
        pub fn $name(x: f32) -> f32 {
            #[cfg(feature = "std")]
            { x.$method() }
            #[cfg(not(feature = "std"))]
            { libm::$name(x) }
        }
    )*};
}

unary!(expf => exp, logf => ln, sqrtf => sqrt, tanhf => tanh, floorf => floor, ceilf => ceil, roundf => round,
    sinf => sin, cosf => cos, expm1f => exp_m1);

/// `x.round()` (half away from zero) without a call into the math library, so loops over it
/// vectorize: truncation and the remainder are exact below 2^23, and larger floats are integers.
#[inline]
pub fn round_half_away(x: f32) -> f32 {
    if x.is_nan() || x.abs() >= 8_388_608.0 {
        return x; // already an integer, or NaN / infinite
    }
    let t = x as i32 as f32;
    let d = x - t;
    if d >= 0.5 {
        t + 1.0
    } else if d <= -0.5 {
        t - 1.0
    } else {
        t
    }
}

/// `x^y`.
#[inline]
pub fn powf(x: f32, y: f32) -> f32 {
    #[cfg(feature = "std")]
    {
        x.powf(y)
    }
    #[cfg(not(feature = "std"))]
    {
        libm::powf(x, y)
    }
}

/// `e^x` within 2 ulp, as straight-line arithmetic (no call, no branch), so loops over it
/// vectorize (the math library's `expf` is a call per element). Cephes' method: `x = n ln 2 + r`
/// with `|r| <= ln 2 / 2`, a degree-7 polynomial for `e^r`, times `2^n` built from bits (in two
/// halves, so results that are subnormal come out right too). NaN stays NaN; overflow gives
/// infinity and underflow zero, as `expf`.
#[inline(always)]
pub fn exp_fast(x: f32) -> f32 {
    exp_fast_with::<false>(x)
}

/// `a b + c`: rounded once (a fused multiply-add) with `FMA`, else twice. Only where the CPU
/// has the instruction (the x86-64 kernels compiled for FMA; with `std`, which has `mul_add`):
/// elsewhere it would be a math-library call.
#[inline(always)]
pub(crate) fn mul_add<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(feature = "std")]
    if FMA {
        return a.mul_add(b, c);
    }
    a * b + c
}

/// [`exp_fast`], its polynomial with fused multiply-adds when `FMA` ([`mul_add`]).
#[inline(always)]
fn exp_fast_with<const FMA: bool>(x: f32) -> f32 {
    // Beyond these the result is infinite or zero anyway; inside, `n` fits the bit tricks.
    let x = x.clamp(-104.0, 89.0);
    // Round to nearest with the 1.5 * 2^23 trick; its bits hold n.
    let t = x * core::f32::consts::LOG2_E + ROUNDING;
    let n = (t.to_bits() as i32).wrapping_sub(ROUNDING_BITS);
    let nf = t - ROUNDING;
    // ln 2 in two parts (the first exact in few bits), so r is exact enough.
    let r = x - nf * LN2_HI - nf * LN2_LO;
    exp_reduced::<FMA>(r, n)
}

/// `1.5 * 2^23`: added to a float below 2^22 in magnitude, rounds it to an integer, which the
/// sum's low mantissa bits hold (the sum's bits minus [`ROUNDING_BITS`]).
pub(crate) const ROUNDING: f32 = 12_582_912.0;
/// The bits of [`ROUNDING`].
pub(crate) const ROUNDING_BITS: i32 = 0x4B40_0000;
/// `ln 2` as `LN2_HI + LN2_LO`, the first with few mantissa bits (`n LN2_HI` is exact).
pub(crate) const LN2_HI: f32 = 0.693_359_4;
/// See [`LN2_HI`].
pub(crate) const LN2_LO: f32 = -2.121_944_4e-4;
/// `(e^r - 1 - r) / r^2` for `|r| <= ln 2 / 2` (Cephes), highest degree first.
pub(crate) const EXP_POLY: [f32; 6] = [
    1.987_569_1e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    1.666_666_5e-1,
    5e-1,
];

/// [`exp_fast`] of every value of a block, in place, one step at a time for the whole block
/// (bit-identical): the steps of `N / lanes` vectors side by side, where one vector at a time
/// is a chain of ~20 dependent steps whose latency the CPU cannot hide.
#[inline(always)]
pub(crate) fn exp_fast_block<const N: usize>(x: &mut [f32; N]) {
    let mut n = [0i32; N];
    for (x, n) in x.iter_mut().zip(n.iter_mut()) {
        let v = x.clamp(-104.0, 89.0);
        let t = v * core::f32::consts::LOG2_E + ROUNDING;
        *n = (t.to_bits() as i32).wrapping_sub(ROUNDING_BITS);
        let nf = t - ROUNDING;
        *x = v - nf * LN2_HI - nf * LN2_LO;
    }
    let mut p = [EXP_POLY[0]; N];
    for &c in &EXP_POLY[1..] {
        for (p, &r) in p.iter_mut().zip(x.iter()) {
            *p = mul_add::<false>(*p, r, c);
        }
    }
    for ((x, &p), &n) in x.iter_mut().zip(&p).zip(&n) {
        let r = *x;
        let e = mul_add::<false>(p * r, r, r) + 1.0;
        let half = n >> 1;
        let scale = |k: i32| f32::from_bits(((k + 127) as u32) << 23);
        *x = e * scale(half) * scale(n - half);
    }
}

/// `e^r 2^n` for `|r| <= ln 2 / 2` (about; the polynomial's range) and `n` in `-252..=128`:
/// the polynomial and scaling of [`exp_fast`].
#[inline(always)]
fn exp_reduced<const FMA: bool>(r: f32, n: i32) -> f32 {
    let ma = mul_add::<FMA>;
    let mut p = EXP_POLY[0];
    for &c in &EXP_POLY[1..] {
        p = ma(p, r, c);
    }
    let e = ma(p * r, r, r) + 1.0;
    let half = n >> 1;
    let scale = |k: i32| f32::from_bits(((k + 127) as u32) << 23);
    e * scale(half) * scale(n - half)
}

/// `1 / (1 + e^-x)` with [`exp_fast`] (vectorizes).
#[inline(always)]
pub fn logistic_fast(x: f32) -> f32 {
    1.0 / (1.0 + exp_fast(-x))
}

/// `tanh(x)` within a few ulp, vectorizing: Cephes' odd polynomial below 0.625, where
/// `1 - 2 / (e^2x + 1)` would cancel, and that formula above.
#[inline(always)]
pub fn tanh_fast(x: f32) -> f32 {
    let a = x.abs();
    let z = x * x;
    let small =
        ((((-5.704_988_7e-3 * z + 2.063_909e-2) * z - 5.373_971_6e-2) * z + 1.333_144_2e-1) * z
            - 3.333_328e-1)
            * z
            * x
            + x;
    let large = (1.0 - 2.0 / (exp_fast(2.0 * a) + 1.0)).copysign(x);
    if a < 0.625 {
        small.copysign(x) // (keeps the sign of -0.0)
    } else {
        large
    }
}

/// The error function (std has none on stable, so always libm's).
#[inline]
pub fn erff(x: f32) -> f32 {
    libm::erff(x)
}

/// [`exp_fast`] of an argument given as `hi + lo` (`|lo|` a few units at most, `hi + lo` in
/// `-176..=88`), reduced as `hi - n ln 2 + lo`, so the digits of `lo` a rounded `hi + lo`
/// would drop still count. `hi - n ln2_hi` is exact when `hi` has its low bits clear.
#[inline(always)]
fn exp_hi_lo<const FMA: bool>(hi: f32, lo: f32) -> f32 {
    let t = (hi + lo) * core::f32::consts::LOG2_E + ROUNDING;
    let n = (t.to_bits() as i32).wrapping_sub(ROUNDING_BITS);
    let nf = t - ROUNDING;
    let r = hi - nf * LN2_HI + lo - nf * LN2_LO;
    exp_reduced::<FMA>(r, n)
}

/// `erfc(a / √2)` for `a >= 0` within about 4e-7 relative (the Numerical Recipes Chebyshev fit,
/// `t e^(-z^2 + P(t))` with `z = a / √2`, `t = 1 / (1 + z / 2)`, fractional error 1.2e-7,
/// evaluated in f32 with [`exp_fast`]'s method) as straight-line arithmetic, so loops over it
/// vectorize. Relative, not absolute, accuracy: the tail `1 - erf` that cancels in
/// `1 + erf(-z)` keeps its digits. The exponent `-a^2 / 2` is taken from `a`, not from a
/// rounded `z` (whose relative error `2 z^2` times larger in the result would be 1e-5 at z = 9).
#[inline(always)]
fn erfc_of_scaled<const FMA: bool>(a: f32) -> f32 {
    let ma = mul_add::<FMA>;
    // erfc(16 / √2) = 2e-58 is zero in f32 (as everything beyond); up to it the exponent's
    // 2^n stays in the range of `exp_reduced`'s scaling.
    let a = a.min(ERFC_MAX_A);
    let t = 1.0 / (1.0 + 0.5 * core::f32::consts::FRAC_1_SQRT_2 * a);
    let mut p = ERFC_FIT[0];
    for &c in &ERFC_FIT[1..] {
        p = ma(p, t, c);
    }
    // -a^2 / 2 = -s^2 / 2 - (a - s)(a + s) / 2 with `s` the top 12 bits of `a`: `s^2` is
    // exact, so the digits a rounded a^2 would drop (3.8e-6 of it at a = 13) are kept.
    let s = f32::from_bits(a.to_bits() & ERFC_SPLIT_MASK);
    t * exp_hi_lo::<FMA>(-0.5 * (s * s), p - 0.5 * (a - s) * (a + s))
}

/// Where [`erfc_of_scaled`] clamps its argument: `erfc(16 / √2) = 2e-58` is zero in f32.
pub(crate) const ERFC_MAX_A: f32 = 16.0;
/// The mask keeping the top 12 bits of [`erfc_of_scaled`]'s argument (its exact square).
pub(crate) const ERFC_SPLIT_MASK: u32 = 0xFFFF_F000;
/// The Numerical Recipes fit `P(t)` of [`erfc_of_scaled`], highest degree first.
pub(crate) const ERFC_FIT: [f32; 10] = [
    0.170_872_77,
    -0.822_152_23,
    1.488_515_9,
    -1.135_204,
    0.278_868_07,
    -0.186_288_06,
    0.096_784_18,
    0.374_091_96,
    1.000_023_7,
    -1.265_512_2,
];

/// GELU, `x Φ(x) = x/2 erfc(-x/√2)`, within 1e-5 relative of the exact value down to 1e-35
/// (below, within 1e-35 absolute), vectorizing (branch-free). The reference formula
/// `x/2 (1 + erf(x/√2))` ([`crate::kernels::elementwise::unary_fn`]) loses its digits below
/// x ≈ -3, where `1 + erf` cancels: the two agree there to about `|x| 2^-25`, not relatively.
#[inline(always)]
pub fn gelu_fast(x: f32) -> f32 {
    gelu_with::<false>(x)
}

/// [`gelu_fast`] with fused multiply-adds in its polynomials: for kernels compiled for FMA
/// (within a few ulp of `gelu_fast`, as accurate).
#[inline(always)]
#[cfg_attr(
    not(all(
        target_arch = "x86_64",
        feature = "ops-elementwise",
        feature = "ops-float"
    )),
    allow(dead_code)
)]
pub(crate) fn gelu_fma(x: f32) -> f32 {
    gelu_with::<true>(x)
}

#[inline(always)]
fn gelu_with<const FMA: bool>(x: f32) -> f32 {
    let e = erfc_of_scaled::<FMA>(x.abs());
    // erfc(-|z|) = 2 - erfc(|z|).
    let erfc = if x <= 0.0 { e } else { 2.0 - e };
    0.5 * x * erfc
}

/// GELU's tanh approximation, `x/2 (1 + tanh(√(2/π) (x + 0.044715 x^3)))`, as the equal
/// `x / (1 + e^(-2u))` (no cancellation for negative x), vectorizing: within 1e-5 relative of
/// the exact value down to 1e-30 (the reference formula's `1 + tanh` cancels below x ≈ -3).
#[inline(always)]
pub fn gelu_tanh_fast(x: f32) -> f32 {
    gelu_tanh_with::<false>(x)
}

/// [`gelu_tanh_fast`] with fused multiply-adds in its `exp` (for kernels compiled for FMA).
#[inline(always)]
#[cfg_attr(
    not(all(
        target_arch = "x86_64",
        feature = "ops-elementwise",
        feature = "ops-float"
    )),
    allow(dead_code)
)]
pub(crate) fn gelu_tanh_fma(x: f32) -> f32 {
    gelu_tanh_with::<true>(x)
}

#[inline(always)]
fn gelu_tanh_with<const FMA: bool>(x: f32) -> f32 {
    // 2 sqrt(2 / pi)
    const K2: f32 = 1.595_769_2;
    let u2 = K2 * (x + 0.044715 * x * x * x);
    x / (1.0 + exp_fast_with::<FMA>(-u2))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every float in [lo, hi) spaced by about 1/2^16 of the range, and the edges.
    fn sweep(lo: f32, hi: f32) -> impl Iterator<Item = f32> {
        let step = (hi - lo) / 65_536.0;
        (0..65_536)
            .map(move |i| lo + step * i as f32)
            .chain([lo, hi, 0.0, -0.0])
    }

    /// Distance in units in the last place (finite values of the same sign).
    fn ulps(a: f32, b: f32) -> u32 {
        (a.to_bits() as i32)
            .wrapping_sub(b.to_bits() as i32)
            .unsigned_abs()
    }

    #[test]
    fn exp_fast_is_within_2_ulp_of_libm() {
        for x in sweep(-103.0, 88.7) {
            let (got, want) = (exp_fast(x), libm::expf(x));
            if want >= f32::MIN_POSITIVE {
                assert!(ulps(got, want) <= 2, "exp({x}) = {got}, libm {want}");
            } else {
                // Subnormal results keep fewer bits: absolute error.
                assert!(
                    (got - want).abs() <= 2.0 * 1.4e-45,
                    "exp({x}) = {got}, libm {want}"
                );
            }
        }
        assert_eq!(exp_fast(89.0), f32::INFINITY);
        assert_eq!(exp_fast(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp_fast(-105.0), 0.0);
        assert_eq!(exp_fast(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_fast(0.0), 1.0);
        assert!(exp_fast(f32::NAN).is_nan());
    }

    /// Exact GELU and its tanh form in f64.
    fn gelu_f64(x: f32, approximate: bool) -> f64 {
        let x = f64::from(x);
        if approximate {
            let u = (2.0 / core::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            x / (1.0 + (-2.0 * u).exp())
        } else {
            // erfc(t) for t = -x/sqrt2 from libm's double erfc (relative in the tail).
            0.5 * x * libm::erfc(-x * core::f64::consts::FRAC_1_SQRT_2)
        }
    }

    #[test]
    fn gelu_fast_is_within_1e5_of_exact() {
        for approximate in [false, true] {
            let f = if approximate {
                gelu_tanh_fast
            } else {
                gelu_fast
            };
            for x in sweep(-14.0, 14.0).chain(sweep(-0.01, 0.01)) {
                let (got, want) = (f(x), gelu_f64(x, approximate));
                // (Below 1e-35 intermediates go subnormal or to zero. The tanh form's exponent,
                // rounded from a cubic in x, costs its result 6e-6 relative near 1e-35.)
                let tiny = if approximate { 1e-30 } else { 1e-35 };
                if want.abs() >= tiny {
                    assert!(
                        (f64::from(got) - want).abs() <= 1e-5 * want.abs(),
                        "gelu({x}, {approximate}) = {got}, want {want}"
                    );
                } else {
                    assert!((f64::from(got) - want).abs() <= tiny, "gelu({x}) = {got}");
                }
            }
            assert_eq!(f(f32::INFINITY), f32::INFINITY);
            assert_eq!(f(-200.0), 0.0);
            assert!(f(f32::NAN).is_nan());
        }
    }

    #[test]
    fn logistic_and_tanh_fast_are_within_4_ulp_of_libm() {
        for x in sweep(-30.0, 30.0) {
            let want = 1.0 / (1.0 + libm::expf(-x));
            let got = logistic_fast(x);
            assert!(ulps(got, want) <= 4, "logistic({x}) = {got}, want {want}");
            let (got, want) = (tanh_fast(x), libm::tanhf(x));
            assert!(ulps(got, want) <= 4, "tanh({x}) = {got}, libm {want}");
        }
        assert_eq!(logistic_fast(200.0), 1.0);
        assert_eq!(logistic_fast(-200.0), 0.0);
        assert_eq!(tanh_fast(50.0), 1.0);
        assert_eq!(tanh_fast(-50.0), -1.0);
        assert!(logistic_fast(f32::NAN).is_nan() && tanh_fast(f32::NAN).is_nan());
    }

    #[test]
    fn round_half_away_is_round() {
        let edge = [
            0.5,
            -0.5,
            1.5,
            -2.5,
            0.499_999_97,
            -0.499_999_97,
            8_388_607.5,
            8_388_608.0,
            -8_388_609.0,
            1e30,
            f32::MAX,
            f32::MIN_POSITIVE,
            0.0,
            -0.0,
        ];
        let mut x = -70_000.0f32;
        let sweep = core::iter::from_fn(|| {
            x += 0.123_457;
            (x < 70_000.0).then_some(x)
        });
        for v in edge.into_iter().chain(sweep) {
            assert_eq!(round_half_away(v), libm::roundf(v), "{v}");
        }
        assert!(round_half_away(f32::NAN).is_nan());
        assert_eq!(round_half_away(f32::INFINITY), f32::INFINITY);
    }
}
