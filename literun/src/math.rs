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
pub(crate) fn exp_fast_with<const FMA: bool>(x: f32) -> f32 {
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
/// (bit-identical; with `FMA`, the range reduction and polynomial in fused multiply-adds
/// ([`mul_add`]), within an ulp of it): the steps of `N / lanes` vectors side by side, where
/// one vector at a time is a chain of ~20 dependent steps whose latency the CPU cannot hide.
#[inline(always)]
pub(crate) fn exp_fast_block<const N: usize, const FMA: bool>(x: &mut [f32; N]) {
    let ma = mul_add::<FMA>;
    let mut n = [0i32; N];
    for (x, n) in x.iter_mut().zip(n.iter_mut()) {
        let v = x.clamp(EXP_BLOCK_MIN, 89.0);
        let t = ma(v, core::f32::consts::LOG2_E, ROUNDING);
        *n = (t.to_bits() as i32).wrapping_sub(ROUNDING_BITS);
        let nf = t - ROUNDING;
        *x = if FMA {
            ma(nf, -LN2_LO, ma(nf, -LN2_HI, v))
        } else {
            v - nf * LN2_HI - nf * LN2_LO
        };
    }
    let mut p = [EXP_POLY[0]; N];
    for &c in &EXP_POLY[1..] {
        for (p, &r) in p.iter_mut().zip(x.iter()) {
            *p = ma(*p, r, c);
        }
    }
    for ((x, &p), &n) in x.iter_mut().zip(&p).zip(&n) {
        let r = *x;
        let e = ma(p * r, r, r) + 1.0;
        // n >= -126: 2^n is a normal float, one multiplication.
        *x = e * f32::from_bits(((n + 127) as u32) << 23);
    }
}

/// Where [`exp_fast_block`] clamps its arguments from below: `n >= -126` there, so `2^n` is one
/// normal float (one multiplication, where [`exp_fast`] takes two halves to reach the
/// subnormals). `e^x` below it reads `e^-87.33` (1.2e-38) instead of a subnormal or zero, an
/// absolute error under 1.2e-38: SOFTMAX, its one user, divides it by a row sum of at least 1.
const EXP_BLOCK_MIN: f32 = -87.33;

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

/// The sum of `N` partial sums (`N` a power of two) in pairs, halving the lanes in each step:
/// `log2 N` vector additions, where adding one lane after another is a chain of `N` dependent
/// steps (a short row's reductions, as attention's SOFTMAX and a transformer's LayerNorm take
/// them, spend most of their time in such chains). The same order on every ISA.
#[inline(always)]
pub(crate) fn tree_sum<const N: usize>(mut v: [f32; N]) -> f32 {
    let mut half = N / 2;
    while half > 0 {
        for i in 0..half {
            v[i] += v[i + half];
        }
        half /= 2;
    }
    v[0]
}

/// Where the exact GELU's kernels clamp `|x|`: `x Φ(x)` is below 1e-37 in magnitude beyond
/// -13, and `e^(-13^2 / 2)`'s `2^n` is still a normal float.
pub(crate) const GELU_CLAMP: f32 = 13.0;
/// `e^r` for `|r| <= ln 2 / 2`: `1 + r (c1 + r (c2 + ...))`, `c1..c5` lowest degree first,
/// fitted here for relative error (9.2e-8 in exact arithmetic; GELU needs about 1e-6).
pub(crate) const GELU_EXP: [f32; 5] = [
    0.999_999_7,
    0.499_991_5,
    0.166_676_36,
    0.041_897_82,
    0.008_290_236,
];
/// `erfc(a / √2) e^(a^2 / 2) = P(a) / Q(a)` on `0 <= a <= 13` (a Mills-ratio-like function,
/// smooth and slowly varying): `P`'s coefficients, lowest degree first, fitted here by least
/// squares reweighted toward equal relative ripple (3.8e-7 relative with these f32 values).
pub(crate) const GELU_M_NUM: [f32; 4] = [0.999_999_64, 0.719_998_5, 0.236_804_02, 0.033_561_327];
/// `Q`'s coefficients after its constant 1; see [`GELU_M_NUM`].
pub(crate) const GELU_M_DEN: [f32; 4] = [1.517_866, 0.948_022_2, 0.296_569_23, 0.042_068_54];
/// [`GELU_M_NUM`] halved (exactly), so the vector kernels' rational gives `erfc / 2`, that is
/// `Φ(-a)`, and `GELU = x Φ(x)` needs no multiplication by 1/2.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) const GELU_HALF_M_NUM: [f32; 4] = [
    GELU_M_NUM[0] * 0.5,
    GELU_M_NUM[1] * 0.5,
    GELU_M_NUM[2] * 0.5,
    GELU_M_NUM[3] * 0.5,
];
/// The mask keeping the top 12 bits of a float's mantissa: the square of such a value is exact.
const SPLIT_MASK: u32 = 0xFFFF_F000;

/// GELU, `x Φ(x) = x/2 erfc(-x/√2)`, branch-free so loops over it vectorize. The accuracy
/// contract of every float GELU kernel (this one, the AVX2, AVX-512 and NEON ones): within
/// 1e-5 relative of the exact value wherever `|GELU(x)| >= 1e-37` (every `x >= -13`), within
/// 1e-37 absolute below; `GELU(x) = x` exactly from `x = 6`; finite for every finite `x`;
/// `GELU(+inf) = +inf`, `GELU(-inf)` a negative value under 1e-37, NaN stays NaN. That is
/// more than TFLite's reference formula `x/2 (1 + erf(x/√2))` keeps (its `1 + erf` cancels
/// below x ≈ -3: absolute error up to 8e-8 there, not relative), at about 30 operations.
///
/// The method, for `a = min(|x|, 13)`: `E = erfc(a/√2) = e^(-a^2/2) M(a)` with `M` a rational
/// ([`GELU_M_NUM`]) and the exponential Cephes' reduction `2^n e^r` with a degree-5 `e^r`
/// ([`GELU_EXP`]); then `GELU = x/2 E` for `x < 0` (relatively accurate however small `E`
/// is, where `1 + erf` would cancel) and `x/2 (2 - E)` above. `x/2` is floored at -13/2, so
/// values below -13 give `-13/2 E(13)`, not `x E(13)`. `a^2` is split as `s^2 + (a-s)(a+s)`
/// (`s` the top 12 bits of `a`, so `s^2` is exact) so that the exponent keeps the digits a
/// rounded `a^2` drops (4e-6 of the result at a = 12); the vector kernels skip the split
/// (3 operations fewer a vector) and stay within the contract (4.4e-6 at worst, in the tail).
#[inline(always)]
pub fn gelu_fast(x: f32) -> f32 {
    let a = x.abs();
    // (`if`, not `min`: a NaN stays NaN.)
    let a = if a > GELU_CLAMP { GELU_CLAMP } else { a };
    let s = f32::from_bits(a.to_bits() & SPLIT_MASK);
    let hi = s * s;
    let lo = (a - s) * (a + s);
    // e^(-(hi + lo) / 2) = 2^n e^r.
    let k = (hi + lo) * (-0.5 * core::f32::consts::LOG2_E) + ROUNDING;
    let n = (k.to_bits() as i32).wrapping_sub(ROUNDING_BITS);
    let nf = k - ROUNDING;
    let r = (-0.5 * hi - nf * LN2_HI) - nf * LN2_LO - 0.5 * lo;
    let mut e = GELU_EXP[4];
    for &c in GELU_EXP[..4].iter().rev() {
        e = e * r + c;
    }
    let e = e * r + 1.0;
    let mut p = GELU_M_NUM[3];
    for &c in GELU_M_NUM[..3].iter().rev() {
        p = p * a + c;
    }
    let mut q = GELU_M_DEN[3];
    for &c in GELU_M_DEN[..3].iter().rev() {
        q = q * a + c;
    }
    let q = q * a + 1.0;
    // n >= -122 for a <= 13: 2^n is normal.
    let scale = f32::from_bits(((n + 127) as u32) << 23);
    let erfc = e * p / q * scale;
    let f = if x < 0.0 { erfc } else { 2.0 - erfc };
    let half = 0.5 * x;
    let half = if half < -0.5 * GELU_CLAMP {
        -0.5 * GELU_CLAMP
    } else {
        half
    };
    half * f
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

    /// GELU's tanh form in f64.
    fn gelu_tanh_f64(x: f32) -> f64 {
        let x = f64::from(x);
        let u = (2.0 / core::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
        x / (1.0 + (-2.0 * u).exp())
    }

    #[test]
    fn gelu_tanh_fast_is_within_1e5_of_exact() {
        for x in sweep(-14.0, 14.0).chain(sweep(-0.01, 0.01)) {
            let (got, want) = (gelu_tanh_fast(x), gelu_tanh_f64(x));
            // (Below 1e-30 intermediates go subnormal or to zero; the exponent, rounded from a
            // cubic in x, costs the result 6e-6 relative near 1e-30.)
            if want.abs() >= 1e-30 {
                assert!(
                    (f64::from(got) - want).abs() <= 1e-5 * want.abs(),
                    "gelu_tanh({x}) = {got}, want {want}"
                );
            } else {
                assert!(
                    (f64::from(got) - want).abs() <= 1e-30,
                    "gelu_tanh({x}) = {got}"
                );
            }
        }
        assert_eq!(gelu_tanh_fast(f32::INFINITY), f32::INFINITY);
        assert_eq!(gelu_tanh_fast(-200.0), 0.0);
        assert!(gelu_tanh_fast(f32::NAN).is_nan());
    }

    #[test]
    fn gelu_fast_keeps_the_gelu_contract() {
        gelu_contract::check("portable", |x, out| {
            for (o, &x) in out.iter_mut().zip(x) {
                *o = gelu_fast(x);
            }
        });
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

/// The float GELU accuracy contract ([`gelu_fast`]), checked against an f64 reference for any
/// kernel over slices.
#[cfg(test)]
pub(crate) mod gelu_contract {
    use alloc::vec::Vec;

    /// The exact GELU in f64 (libm's double `erfc` is relative in the tail).
    pub(crate) fn exact(x: f32) -> f64 {
        let x = f64::from(x);
        0.5 * x * libm::erfc(-x * core::f64::consts::FRAC_1_SQRT_2)
    }

    /// Runs `gelu` (`out = GELU(x)` over a slice) on a dense sweep of [-14, 14], denser over
    /// the negative tail and near 0, tiny and huge values of both signs and the special values,
    /// and asserts the contract of [`super::gelu_fast`]. Every slice length in 1..=40 also
    /// runs, so the kernel's partial vectors are checked, and values must not depend on their
    /// position in the slice.
    pub(crate) fn check(name: &str, gelu: impl Fn(&[f32], &mut [f32])) {
        let mut xs: Vec<f32> = (0..280_001).map(|i| -14.0 + i as f32 * 1e-4).collect();
        xs.extend((0..575_000).map(|i| -13.5 + i as f32 * 2e-5));
        xs.extend((0..20_001).map(|i| (i as f32 - 10_000.0) * 1e-7));
        for e in -45..=38 {
            let v = 10f32.powi(e);
            xs.extend([v, -v, 3.0 * v, -3.0 * v]);
        }
        xs.extend([
            0.0,
            -0.0,
            f32::MAX,
            f32::MIN,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
        ]);
        xs.extend([12.99, 13.0, 13.01, -12.99, -13.0, -13.01, 5.99, 6.0, 6.01]);
        let mut got = alloc::vec![0f32; xs.len()];
        gelu(&xs, &mut got);
        for (&x, &g) in xs.iter().zip(&got) {
            let want = exact(x);
            let err = (f64::from(g) - want).abs();
            let ok = if want.abs() >= 1e-37 {
                err <= 1e-5 * want.abs()
            } else {
                err <= 1e-37
            };
            assert!(ok, "{name}: gelu({x}) = {g}, want {want}");
            assert!(g.is_finite(), "{name}: gelu({x}) = {g}");
            if x >= 6.0 {
                assert_eq!(g, x, "{name}: gelu({x})");
            }
        }
        let special = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -1e30, 1e30];
        let mut got = [0f32; 5];
        gelu(&special, &mut got);
        assert!(got[0].is_nan(), "{name}: gelu(NaN) = {}", got[0]);
        assert_eq!(got[1], f32::INFINITY, "{name}: gelu(inf)");
        for g in [got[2], got[3]] {
            assert!(g <= 0.0 && g > -1e-37, "{name}: gelu(-inf / -1e30) = {g}");
        }
        assert_eq!(got[4], 1e30, "{name}: gelu(1e30)");
        // Every length (whole vectors and a partial one) and offset: each value's result is
        // the same, and nothing beyond the output's length is written.
        let xs: Vec<f32> = (0..43).map(|i| (i as f32 - 25.0) * 0.61).collect();
        let mut all = alloc::vec![0f32; xs.len()];
        gelu(&xs, &mut all);
        for start in [0, 3] {
            for len in 0..=40 {
                let mut out = alloc::vec![-7f32; len + 1];
                gelu(&xs[start..start + len], &mut out[..len]);
                assert_eq!(
                    &out[..len],
                    &all[start..start + len],
                    "{name}: length {len}"
                );
                assert_eq!(out[len], -7.0, "{name}: length {len}");
            }
        }
    }
}
