//! QUANTIZE from float32 to an integer type.

/// QUANTIZE of float32 values: `clamp(round(x / scale) + zero_point, lo, hi)`, rounding half away
/// from zero as TFLite's reference `AffineQuantize`, stored through `store` (NaN stores 0).
pub fn quantize_f32<T>(
    input: &[f32],
    scale: f32,
    zero_point: i32,
    (lo, hi): (i32, i32),
    out: &mut [T],
    store: impl Fn(i32) -> T,
) {
    let (z, lo, hi) = (zero_point as f32, lo as f32, hi as f32);
    for (o, &x) in out.iter_mut().zip(input) {
        let r = crate::math::round_half_away(x / scale) + z;
        // max/min rather than `clamp`, whose `lo <= hi` assertion would bring float formatting
        // into firmware builds.
        let r = if r.is_nan() { 0.0 } else { r.max(lo).min(hi) };
        // SAFETY: r is an integer value in [lo, hi], inside i32 (no NaN, no overflow); the
        // unchecked form lets the loop use vector conversions. Tested with NaN, infinities
        // and out-of-range values (`quantize_saturates_and_maps_nan_to_zero`).
        *o = store(unsafe { r.to_int_unchecked::<i32>() });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantize_saturates_and_maps_nan_to_zero() {
        let x = [
            0.0,
            0.25,
            -0.25,
            0.75,
            1e9,
            -1e9,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ];
        let mut out = [0i8; 9];
        quantize_f32(&x, 0.5, 3, (-128, 127), &mut out, |v| v as i8);
        // 0.25 / 0.5 = 0.5 rounds away from zero to 1.
        assert_eq!(out, [3, 4, 2, 5, 127, -128, 127, -128, 0]);
        let mut wide = [0i16; 9];
        quantize_f32(&x, 0.5, 0, (-32768, 32767), &mut wide, |v| v as i16);
        assert_eq!(wide, [0, 1, -1, 2, 32767, -32768, 32767, -32768, 0]);
    }
}
