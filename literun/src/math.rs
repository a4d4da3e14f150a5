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

unary!(expf => exp, logf => ln, sqrtf => sqrt, tanhf => tanh, floorf => floor, roundf => round);

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

/// The error function (std has none on stable, so always libm's).
#[inline]
pub fn erff(x: f32) -> f32 {
    libm::erff(x)
}

#[cfg(test)]
mod tests {
    use super::round_half_away;

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
