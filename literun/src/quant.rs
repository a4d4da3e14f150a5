//! Fixed-point helpers for quantized kernels, ported from TensorFlow Lite's
//! `quantization_util.cc`, `common.h` and gemmlowp's `fixedpoint.h`.
//!
//! These are the default (non-`TFLITE_SINGLE_ROUNDING`) forms: a saturating rounding doubling
//! high multiply followed by a rounding (half away from zero) right shift. The converter uses the
//! same functions, so multipliers computed at conversion time and at run time agree bit for bit.
//!
//! # Agreement with LiteRT
//! `tests/litert_compare.py` runs the int8 kernel tests' models with the pip `ai-edge-litert`
//! interpreter. With its builtin kernels (`BUILTIN_WITHOUT_DEFAULT_DELEGATES`) every int8 output
//! is bit-exact (CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV, FULLY_CONNECTED, BATCH_MATMUL,
//! ADD/SUB/MUL, SQUARED_DIFFERENCE, MAXIMUM/MINIMUM, RSQRT, both RESIZEs, pools, MEAN, SUM,
//! REDUCE_MAX/MIN, SOFTMAX's float table, the LUT activations, HARD_SWISH, LEAKY_RELU,
//! QUANTIZE/DEQUANTIZE) except the 4-D MEAN over H, W, where literun follows the reference
//! kernel: the builtin one's special path rounds its zero-point correction to an integer
//! separately and differs by one step on some outputs. Hybrid BATCH_MATMUL outputs are bit-exact
//! too and the other hybrid outputs agree to ~1e-5 relative (float summation order).
//! `litert_compare.py --ref` checks against LiteRT's reference kernels (`BUILTIN_REF`), the
//! interop check's target, which agree except for int8 SUM (the reference reads int8 data as
//! uint8 and does not clamp). Of these only FULLY_CONNECTED rounds once; BATCH_MATMUL, although it shares
//! FULLY_CONNECTED's parameters, rounds twice in both LiteRT kernels (measured on ties). LiteRT's
//! default XNNPACK delegate differs from its own builtin kernels: ±1 step on some int8 MUL,
//! DEPTHWISE_CONV_2D, MEAN, LEAKY_RELU and BATCH_MATMUL outputs (single rounding), and ~2% on
//! hybrid FULLY_CONNECTED with symmetric input quantization (XNNPACK quantizes the input
//! asymmetrically per row); literun follows the builtin kernels. Builds with
//! `TFLITE_SINGLE_ROUNDING` (some ARM builds) or the ARM uint16 softmax table may differ by ±1
//! step as well.

/// `std::round` for `f64` (half away from zero), as `TfLiteRound`.
#[inline]
fn round_f64(x: f64) -> f64 {
    #[cfg(feature = "std")]
    {
        x.round()
    }
    #[cfg(not(feature = "std"))]
    {
        libm::round(x)
    }
}

/// `std::frexp`: `x = m * 2^e` with `0.5 <= |m| < 1` (`(0, 0)` for zero, `(x, 0)` for non-finite).
pub fn frexp(x: f64) -> (f64, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    if exp == 0 {
        // Subnormal: scale up first.
        let (m, e) = frexp(x * f64::from_bits(0x4350_0000_0000_0000)); // 2^54
        return (m, e - 54);
    }
    let e = exp - 1022;
    let m = f64::from_bits((bits & !(0x7ffu64 << 52)) | (1022u64 << 52));
    (m, e)
}

/// TFLite `QuantizeMultiplier`: `real ≈ multiplier * 2^(shift - 31)`, `multiplier` in
/// `[2^30, 2^31)` (or 0). A positive `shift` is a left shift. Multipliers below about 2^-31 give
/// `(0, 0)`. `real` must be finite and non-negative (negative values are mirrored, as in TFLite).
pub fn quantize_multiplier(real: f64) -> (i32, i32) {
    if real == 0.0 || !real.is_finite() {
        return (0, 0);
    }
    let (q, mut shift) = frexp(real);
    let mut q_fixed = round_f64(q * (1u64 << 31) as f64) as i64;
    debug_assert!(q_fixed.abs() <= 1i64 << 31);
    if q_fixed.abs() == 1i64 << 31 {
        q_fixed /= 2;
        shift += 1;
    }
    if shift < -31 {
        shift = 0;
        q_fixed = 0;
    }
    // A multiplier >= 2^31 in magnitude cannot be represented; TFLite checks this. Clamp (only
    // reachable for absurd scale ratios, which prepare rejects beforehand).
    if shift > 30 {
        return (i32::MAX, 30);
    }
    (q_fixed as i32, shift)
}

/// [`quantize_multiplier`] of `(f64) num[0] * (f64) num[1] / (f64) den`, the way TFLite forms
/// its rescaling ratios from float scales, computed with integers only: the double product is
/// exact, the quotient is rounded to 53 bits (to nearest, ties to even) as the double division
/// rounds it, then to the 31-bit multiplier. So it gives the same numbers without double-precision
/// arithmetic, which microcontrollers without a double FPU would link software routines for.
/// Scales must be positive and finite (a zero numerator gives `(0, 0)`).
pub fn quantize_scale_ratio(num: [f32; 2], den: f32) -> (i32, i32) {
    // value = m * 2^e with an integer m (subnormals have no hidden bit).
    let parts = |x: f32| -> (u64, i32) {
        let b = x.to_bits();
        let (exp, frac) = ((b >> 23) & 0xff, u64::from(b & 0x7f_ffff));
        if exp == 0 {
            (frac, -149)
        } else {
            (frac | 1 << 23, exp as i32 - 150)
        }
    };
    let ((ma, ea), (mb, eb), (md, ed)) = (parts(num[0]), parts(num[1]), parts(den));
    if ma == 0 || mb == 0 || md == 0 || !num[0].is_finite() || !num[1].is_finite() {
        return (0, 0);
    }
    // The exact product normalized to [2^47, 2^48), the divisor to [2^23, 2^24).
    let n = ma * mb;
    let norm_n = n.leading_zeros() as i32 - 16;
    let norm_d = md.leading_zeros() as i32 - 40;
    let (n, d) = (n << norm_n, md << norm_d);
    // q = floor(n * 2^39 / d), 63 or 64 bits, by long division in two 64-bit steps.
    let (q1, r1) = ((n << 15) / d, (n << 15) % d);
    let (q2, r2) = ((r1 << 24) / d, (r1 << 24) % d);
    let q = (q1 << 24) + q2;
    let sticky = r2 != 0;
    let mut e = ea + eb - norm_n - 39 - (ed - norm_d);
    // Round to 53 significant bits, ties to even (the double quotient).
    let drop = (64 - q.leading_zeros() as i32) - 53;
    let mut mant = q >> drop;
    let rest = q & ((1u64 << drop) - 1);
    let half = 1u64 << (drop - 1);
    if rest > half || (rest == half && (sticky || mant & 1 == 1)) {
        mant += 1;
    }
    e += drop;
    if mant == 1 << 53 {
        mant >>= 1;
        e += 1;
    }
    // frexp: real = (mant / 2^53) * 2^(e + 53); the multiplier rounds half away from zero.
    let mut shift = e + 53;
    let mut fixed = (mant + (1 << 21)) >> 22;
    if fixed == 1 << 31 {
        fixed /= 2;
        shift += 1;
    }
    if shift < -31 {
        return (0, 0);
    }
    if shift > 30 {
        return (i32::MAX, 30);
    }
    (fixed as i32, shift)
}

/// TFLite `QuantizeMultiplierSmallerThanOneExp`: as [`quantize_multiplier`] for `0 < real < 1`;
/// the returned exponent is `<= 0`. `None` outside that range.
pub fn quantize_multiplier_smaller_than_one(real: f64) -> Option<(i32, i32)> {
    if !(real > 0.0 && real < 1.0) {
        return None;
    }
    let (m, s) = quantize_multiplier(real);
    if s > 0 {
        return None;
    }
    Some((m, s))
}

/// gemmlowp `SaturatingRoundingDoublingHighMul` (`SQRDMULH`).
#[inline]
pub fn saturating_rounding_doubling_high_mul(a: i32, b: i32) -> i32 {
    if a == b && a == i32::MIN {
        return i32::MAX;
    }
    let ab = i64::from(a) * i64::from(b);
    let nudge: i64 = if ab >= 0 { 1 << 30 } else { 1 - (1 << 30) };
    ((ab + nudge) / (1i64 << 31)) as i32
}

/// gemmlowp `RoundingDivideByPOT`: `x / 2^exponent` rounded to nearest, ties away from zero.
/// `exponent` must be in `0..=31`.
#[inline]
pub fn rounding_divide_by_pot(x: i32, exponent: i32) -> i32 {
    debug_assert!((0..=31).contains(&exponent));
    let exponent = exponent.clamp(0, 31);
    let mask = ((1i64 << exponent) - 1) as i32;
    let remainder = x & mask;
    let threshold = (mask >> 1) + i32::from(x < 0);
    (x >> exponent) + i32::from(remainder > threshold)
}

/// LiteRT's `CheckedLog2`: `log2(x)` rounded, when `x` is within a thousandth of an octave of
/// that power of two (in f32, as LiteRT computes it: a scale of `2^-10 * 1.0005` counts).
pub fn checked_log2(x: f32) -> Option<i32> {
    let l = libm::logf(x) * (1.0 / libm::logf(2.0));
    let r = libm::roundf(l);
    ((l - r).abs() < 1e-3 && r.abs() < 128.0).then_some(r as i32)
}

/// TFLite `MultiplyByQuantizedMultiplier` (double rounding): `x * multiplier * 2^(shift - 31)`.
#[inline]
pub fn multiply_by_quantized_multiplier(x: i32, multiplier: i32, shift: i32) -> i32 {
    let left = if shift > 0 { shift } else { 0 };
    let right = if shift > 0 { 0 } else { -shift };
    rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(
            x.wrapping_mul(1i32.wrapping_shl(left as u32)),
            multiplier,
        ),
        right,
    )
}

/// TFLite `MultiplyByQuantizedMultiplierSmallerThanOneExp` (`left_shift <= 0`).
#[inline]
pub fn multiply_by_quantized_multiplier_smaller_than_one(
    x: i32,
    multiplier: i32,
    left_shift: i32,
) -> i32 {
    rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(x, multiplier),
        -left_shift,
    )
}

/// 16-bit `SaturatingRoundingDoublingHighMul`.
#[inline]
pub fn saturating_rounding_doubling_high_mul_i16(a: i16, b: i16) -> i16 {
    if a == b && a == i16::MIN {
        return i16::MAX;
    }
    let ab = i32::from(a) * i32::from(b);
    let nudge: i32 = if ab >= 0 { 1 << 14 } else { 1 - (1 << 14) };
    ((ab + nudge) / (1 << 15)) as i16
}

/// 16-bit `RoundingDivideByPOT` (`exponent` in `0..=15`).
#[inline]
pub fn rounding_divide_by_pot_i16(x: i16, exponent: i32) -> i16 {
    let exponent = exponent.clamp(0, 15);
    let mask = ((1i32 << exponent) - 1) as i16;
    let remainder = x & mask;
    let threshold = (mask >> 1) + i16::from(x < 0);
    (x >> exponent) + i16::from(remainder > threshold)
}

/// TFLite `DownScaleInt32ToInt16Multiplier`.
pub fn downscale_multiplier_to_i16(m: i32) -> i16 {
    const ROUND: i32 = 1 << 15;
    if m >= i32::MAX - ROUND {
        return i16::MAX;
    }
    ((m + ROUND) >> 16) as i16
}

/// A fused activation for quantized outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantActivation {
    None,
    Relu,
    Relu6,
    ReluN1To1,
}

/// TFLite `CalculateActivationRangeQuantized`: the clamp range `[min, max]` of a quantized output
/// with `scale`/`zero_point`, for an output type with range `[qmin, qmax]`.
pub fn activation_range_quantized(
    act: QuantActivation,
    scale: f32,
    zero_point: i32,
    qmin: i32,
    qmax: i32,
) -> (i32, i32) {
    let quantize = |f: f32| -> i32 {
        let r = crate::math::roundf(f / scale);
        zero_point.saturating_add(saturating_f32_to_i32(r))
    };
    match act {
        QuantActivation::None => (qmin, qmax),
        QuantActivation::Relu => (qmin.max(quantize(0.0)), qmax),
        QuantActivation::Relu6 => (qmin.max(quantize(0.0)), qmax.min(quantize(6.0))),
        QuantActivation::ReluN1To1 => (qmin.max(quantize(-1.0)), qmax.min(quantize(1.0))),
    }
}

/// `static_cast<int32_t>(f)` for finite in-range values; saturating (and 0 for NaN) otherwise.
#[inline]
pub fn saturating_f32_to_i32(f: f32) -> i32 {
    f as i32
}

/// Round half away from zero then convert, as `static_cast<int32_t>(std::round(x))`.
#[inline]
pub fn round_to_i32(x: f32) -> i32 {
    crate::math::roundf(x) as i32
}

/// Output-stage parameters shared by the int8 CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED
/// kernels: `out = clamp(MBQM(acc + bias, multiplier[c], shift[c]) + output_offset)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputStage {
    /// `-input_zero_point`.
    pub input_offset: i32,
    /// The output zero point.
    pub output_offset: i32,
    /// One multiplier/shift per output channel (a per-tensor multiplier is repeated).
    pub multipliers: alloc::vec::Vec<i32>,
    pub shifts: alloc::vec::Vec<i32>,
    /// Clamp range (the fused activation's range intersected with the type's).
    pub act_min: i32,
    pub act_max: i32,
    /// Round once (64-bit product, then one rounding shift) instead of TFLite's default double
    /// rounding: LiteRT's int8 FULLY_CONNECTED kernel does, measured against ai-edge-litert.
    pub single_rounding: bool,
}

/// `x * multiplier * 2^(shift - 31)` rounded once (TFLite's `TFLITE_SINGLE_ROUNDING` form).
#[inline]
pub fn multiply_by_quantized_multiplier_single_rounding(
    x: i32,
    multiplier: i32,
    shift: i32,
) -> i32 {
    let total = (31 - shift).clamp(1, 62) as u32;
    let r = (i64::from(x) * i64::from(multiplier) + (1i64 << (total - 1))) >> total;
    r.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

/// TFLite's `MultiplyByQuantizedMultiplier(int64_t x, ...)` of the 16x8 kernels: the
/// multiplier reduced to 16 bits (rounded), then one rounding shift.
#[inline]
pub fn multiply_by_quantized_multiplier_i64(x: i64, multiplier: i32, shift: i32) -> i32 {
    let reduced = if multiplier < 0x7FFF_0000 {
        (multiplier + (1 << 15)) >> 16
    } else {
        0x7FFF
    };
    let total = (15 - shift).clamp(1, 62) as u32;
    let r = x
        .wrapping_mul(i64::from(reduced))
        .wrapping_add(1i64 << (total - 1))
        >> total;
    r.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

impl OutputStage {
    /// Requantizes one int64 accumulator of channel `c` to int16 (the 16x8 kernels).
    #[inline]
    pub fn apply_16x8(&self, acc: i64, c: usize) -> i16 {
        let v = multiply_by_quantized_multiplier_i64(acc, self.multipliers[c], self.shifts[c])
            .saturating_add(self.output_offset);
        v.clamp(self.act_min, self.act_max) as i16
    }

    /// [`Self::apply_16x8`] as LiteRT's int16 FULLY_CONNECTED does it (measured against
    /// ai-edge-litert 2.3.0, like its int8 one): the full multiplier, rounded once.
    #[inline]
    pub fn apply_16x8_fc(&self, acc: i64, c: usize) -> i16 {
        let total = (31 - self.shifts[c]).clamp(1, 126) as u32;
        let r =
            (i128::from(acc) * i128::from(self.multipliers[c]) + (1i128 << (total - 1))) >> total;
        let v = r.clamp(i128::from(i32::MIN), i128::from(i32::MAX)) as i32;
        v.saturating_add(self.output_offset)
            .clamp(self.act_min, self.act_max) as i16
    }

    /// Requantizes one accumulator of channel `c`.
    #[inline]
    pub fn apply(&self, acc: i32, c: usize) -> i8 {
        let scaled = if self.single_rounding {
            multiply_by_quantized_multiplier_single_rounding(
                acc,
                self.multipliers[c],
                self.shifts[c],
            )
        } else {
            multiply_by_quantized_multiplier(acc, self.multipliers[c], self.shifts[c])
        };
        let v = scaled.saturating_add(self.output_offset);
        v.clamp(self.act_min, self.act_max) as i8
    }
}

/// TFLite `SymmetricQuantizeFloats`: quantizes `values` to `[-127, 127]` with one scale
/// (`range / 127`); returns the scale (1 for an all-zero input).
pub fn symmetric_quantize_floats(values: &[f32], out: &mut [i8]) -> f32 {
    let mut min = f32::INFINITY;
    let mut max = f32::NEG_INFINITY;
    for &v in values {
        // std::minmax_element keeps the first min and the last max; the values are equal either
        // way, and NaN never compares less/greater.
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    if values.is_empty() {
        return 1.0;
    }
    let range = min.abs().max(max.abs());
    if range == 0.0 {
        out.iter_mut().for_each(|o| *o = 0);
        return 1.0;
    }
    let scaling_factor = range / 127.0;
    let inv = 127.0 / range;
    for (o, &v) in out.iter_mut().zip(values) {
        let q = saturating_f32_to_i32(crate::math::roundf(v * inv));
        *o = q.clamp(-127, 127) as i8;
    }
    scaling_factor
}

/// TFLite `AsymmetricQuantizeFloats`: quantizes `values` to `[-128, 127]` with a scale and a
/// nudged zero point (`real ≈ scale * (q - offset)`); returns `(scale, offset)`.
pub fn asymmetric_quantize_floats(values: &[f32], out: &mut [i8]) -> (f32, i32) {
    let mut min = f32::INFINITY;
    let mut max = f32::NEG_INFINITY;
    for &v in values {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    let rmin = f64::from(0.0f32.min(min));
    let rmax = f64::from(0.0f32.max(max));
    let (qmin, qmax) = (-128.0f64, 127.0f64);
    if rmin == rmax || values.is_empty() {
        out.iter_mut().for_each(|o| *o = 0);
        return (1.0, 0);
    }
    let scale = (rmax - rmin) / (qmax - qmin);
    let zp_from_min = qmin - rmin / scale;
    let zp_from_max = qmax - rmax / scale;
    let zp_from_min_err = qmin.abs() + (rmin / scale).abs();
    let zp_from_max_err = qmax.abs() + (rmax / scale).abs();
    let zp = if zp_from_min_err < zp_from_max_err {
        zp_from_min
    } else {
        zp_from_max
    };
    let offset: i32 = if zp <= qmin {
        -128
    } else if zp >= qmax {
        127
    } else {
        round_f64(zp) as i32
    };
    let scaling_factor = scale as f32;
    let inv = 1.0f32 / scaling_factor;
    for (o, &v) in out.iter_mut().zip(values) {
        let q = saturating_f32_to_i32(crate::math::roundf(offset as f32 + v * inv));
        *o = q.clamp(-128, 127) as i8;
    }
    (scaling_factor, offset)
}

#[cfg(test)]
mod tests {
    #[test]
    fn integer_scale_ratio_matches_the_double_computation() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // Scales across the whole f32 range, subnormals included, and typical ones.
        let mut scale = |typical: bool| loop {
            let r = next();
            let v = if typical {
                f32::from_bits(0x3000_0000 + (r as u32 % 0x1000_0000))
            } else {
                f32::from_bits(r as u32 & 0x7fff_ffff)
            };
            if v.is_finite() && v > 0.0 {
                return v;
            }
        };
        for i in 0..200_000 {
            let typical = i % 2 == 0;
            let (a, b, c) = (scale(typical), scale(typical), scale(typical));
            let want = quantize_multiplier(f64::from(a) * f64::from(b) / f64::from(c));
            assert_eq!(quantize_scale_ratio([a, b], c), want, "{a:e} {b:e} {c:e}");
            let want = quantize_multiplier(f64::from(a) / f64::from(c));
            assert_eq!(quantize_scale_ratio([a, 1.0], c), want, "{a:e} {c:e}");
        }
        // Ties of the 31-bit rounding and exact powers of two.
        assert_eq!(
            quantize_scale_ratio([0.5, 1.0], 1.0),
            quantize_multiplier(0.5)
        );
        assert_eq!(
            quantize_scale_ratio([3.0, 1.0], 4.0),
            quantize_multiplier(0.75)
        );
        assert_eq!(quantize_scale_ratio([0.0, 1.0], 4.0), (0, 0));
    }

    #[test]
    fn int64_multiplier_of_16x8_layers_rounds_half_up_with_a_16_bit_multiplier() {
        let half = 1 << 30; // 0.5
        assert_eq!(multiply_by_quantized_multiplier_i64(1000, half, 0), 500);
        assert_eq!(multiply_by_quantized_multiplier_i64(-3, half, 0), -1);
        assert_eq!(multiply_by_quantized_multiplier_i64(3, half, 0), 2);
        // Accumulators beyond 32 bits (int16 x int8 sums with an int64 bias).
        assert_eq!(
            multiply_by_quantized_multiplier_i64(1 << 40, half, -10),
            1 << 29
        );
        // The multiplier keeps 16 bits: 0.75 + 2^-20 is 0.75.
        let (m, s) = quantize_multiplier(0.75 + 1.0 / f64::from(1 << 20));
        assert_eq!(multiply_by_quantized_multiplier_i64(1 << 20, m, s), 3 << 18);
    }

    #[test]
    fn int16_fully_connected_output_stage_rounds_once_with_64_bit_accumulators() {
        let stage = |shift: i32| OutputStage {
            input_offset: 0,
            output_offset: 0,
            multipliers: alloc::vec![1 << 30], // 0.5
            shifts: alloc::vec![shift],
            act_min: -32768,
            act_max: 32767,
            single_rounding: true,
        };
        // 2^40 * 0.5 * 2^-25 = 2^14: the accumulator does not fit 32 bits.
        assert_eq!(stage(-25).apply_16x8_fc(1 << 40, 0), 1 << 14);
        assert_eq!(stage(0).apply_16x8_fc(3, 0), 2); // 1.5 rounds up
        assert_eq!(stage(0).apply_16x8_fc(-3, 0), -1); // -1.5 rounds up too
        assert_eq!(stage(0).apply_16x8_fc(1 << 50, 0), 32767); // saturates
    }

    #[test]
    fn single_rounding_rounds_the_exact_product_once() {
        // 6369 * real(0.00149...) = 9.4987: double rounding gives 10, one rounding gives 9
        // (the case that showed LiteRT's FULLY_CONNECTED rounds once).
        let (m, s) = quantize_multiplier(9.498_676_894_212_254 / 6369.0);
        assert_eq!(
            multiply_by_quantized_multiplier_single_rounding(6369, m, s),
            9
        );
        assert_eq!(
            multiply_by_quantized_multiplier_single_rounding(-6369, m, s),
            -9
        );
        let (m, s) = quantize_multiplier(0.5);
        assert_eq!(multiply_by_quantized_multiplier_single_rounding(3, m, s), 2);
        assert_eq!(
            multiply_by_quantized_multiplier_single_rounding(-3, m, s),
            -1
        );
    }

    use super::*;

    #[test]
    fn frexp_matches_definition() {
        for &x in &[1.0f64, 0.5, 0.75, 3.0, 1e-10, 123456.789, -6.5] {
            let (m, e) = frexp(x);
            assert!((0.5..1.0).contains(&m.abs()), "{x}: {m}");
            // `ldexp` scales exactly (`powi` need not, and Miri makes it inexact on purpose).
            assert_eq!(libm::ldexp(m, e), x);
        }
        assert_eq!(frexp(0.0), (0.0, 0));
        assert_eq!(frexp(f64::from_bits(1)), (0.5, -1073));
    }

    #[test]
    fn quantize_multiplier_known_values() {
        // Values from TFLite's quantization_util_test.cc (QuantizeMultiplierSmallerThanOneExp,
        // QuantizeMultiplier).
        assert_eq!(quantize_multiplier(0.0), (0, 0));
        assert_eq!(quantize_multiplier(0.25), (1 << 30, -1));
        assert_eq!(quantize_multiplier(0.5), (1 << 30, 0));
        assert_eq!(quantize_multiplier(1.0), (1 << 30, 1));
        assert_eq!(quantize_multiplier(2.0), (1 << 30, 2));
        assert_eq!(quantize_multiplier(0.75), (1610612736, 0));
        assert_eq!(
            quantize_multiplier_smaller_than_one(0.75),
            Some((1610612736, 0))
        );
        assert_eq!(
            quantize_multiplier_smaller_than_one(0.25),
            Some((1073741824, -1))
        );
        assert_eq!(
            quantize_multiplier_smaller_than_one(1.0 - 1e-7),
            Some((2147483433, 0))
        );
        assert_eq!(quantize_multiplier_smaller_than_one(1.0), None);
        assert_eq!(quantize_multiplier_smaller_than_one(0.0), None);
        // 1e-6 = 0.524288 * 2^-19
        assert_eq!(quantize_multiplier(1e-6), (1125899907, -19));
        // The q_fixed == 2^31 case: a mantissa that rounds up to 1.0.
        let just_below = 1.0 - 1e-12; // frexp -> (1-1e-12, 0), rounds to 2^31
        assert_eq!(quantize_multiplier(just_below), (1 << 30, 1));
        // Flush to zero below 2^-32.
        assert_eq!(quantize_multiplier(2f64.powi(-33)), (0, 0));
        assert_eq!(quantize_multiplier(2f64.powi(-32)), (1 << 30, -31));
    }

    #[test]
    fn srdhm_and_rdbpot_known_values() {
        assert_eq!(
            saturating_rounding_doubling_high_mul(i32::MIN, i32::MIN),
            i32::MAX
        );
        assert_eq!(
            saturating_rounding_doubling_high_mul(1 << 30, 1 << 30),
            1 << 29
        );
        // gemmlowp's nudge makes ties round upwards: 1.5 -> 2, -1.5 -> -1, 0.5 -> 1, -0.5 -> 0.
        assert_eq!(saturating_rounding_doubling_high_mul(3, 1 << 30), 2);
        assert_eq!(saturating_rounding_doubling_high_mul(-3, 1 << 30), -1);
        assert_eq!(saturating_rounding_doubling_high_mul(1, 1 << 30), 1);
        assert_eq!(saturating_rounding_doubling_high_mul(-1, 1 << 30), 0);
        assert_eq!(saturating_rounding_doubling_high_mul(-5, 1 << 30), -2); // -2.5 -> -2
        assert_eq!(rounding_divide_by_pot(5, 1), 3); // 2.5 -> 3
        assert_eq!(rounding_divide_by_pot(-5, 1), -3); // -2.5 -> -3
        assert_eq!(rounding_divide_by_pot(7, 2), 2); // 1.75 -> 2
        assert_eq!(rounding_divide_by_pot(-7, 2), -2);
        assert_eq!(rounding_divide_by_pot(6, 2), 2); // 1.5 -> 2
        assert_eq!(rounding_divide_by_pot(-6, 2), -2);
        assert_eq!(rounding_divide_by_pot(5, 2), 1); // 1.25 -> 1
        assert_eq!(rounding_divide_by_pot(12345, 0), 12345);
        assert_eq!(rounding_divide_by_pot(i32::MIN, 31), -1);
        assert_eq!(rounding_divide_by_pot(i32::MAX, 31), 1);
    }

    #[test]
    fn multiply_by_quantized_multiplier_known_values() {
        // x * 0.75 with (1610612736, 0)
        assert_eq!(multiply_by_quantized_multiplier(100, 1610612736, 0), 75);
        assert_eq!(multiply_by_quantized_multiplier(-100, 1610612736, 0), -75);
        assert_eq!(multiply_by_quantized_multiplier(3, 1610612736, 0), 2); // 2.25
        assert_eq!(multiply_by_quantized_multiplier(2, 1610612736, 0), 2); // 1.5 -> 2
        assert_eq!(multiply_by_quantized_multiplier(-2, 1610612736, 0), -1); // -1.5 -> -1
                                                                             // x * 0.25 with (2^30, -1): 10 * 0.25 = 2.5 -> 3 (double rounding: 10*0.5=5, 5/2 -> 3)
        assert_eq!(multiply_by_quantized_multiplier(10, 1 << 30, -1), 3);
        assert_eq!(multiply_by_quantized_multiplier(-10, 1 << 30, -1), -3);
        // x * 2 with (2^30, 2)
        assert_eq!(multiply_by_quantized_multiplier(1000, 1 << 30, 2), 2000);
        // Against f64 for a spread of values: within 1 of the exact product.
        let mut s = 7u64;
        for _ in 0..2000 {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let real = ((s >> 11) as f64 / (1u64 << 53) as f64) * 4.0 + 1e-6;
            let x = ((s >> 20) as i32) >> 8;
            let (m, sh) = quantize_multiplier(real);
            let got = multiply_by_quantized_multiplier(x, m, sh);
            let want = x as f64 * real;
            if want.abs() < 2e9 {
                assert!(
                    (got as f64 - want).abs() <= 1.0 + want.abs() * 1e-9,
                    "{x} * {real}"
                );
            }
        }
    }

    #[test]
    fn activation_ranges() {
        let s = 0.05f32;
        assert_eq!(
            activation_range_quantized(QuantActivation::None, s, 3, -128, 127),
            (-128, 127)
        );
        assert_eq!(
            activation_range_quantized(QuantActivation::Relu, s, 3, -128, 127),
            (3, 127)
        );
        // 6 / 0.05 = 120 (+3 = 123)
        assert_eq!(
            activation_range_quantized(QuantActivation::Relu6, s, 3, -128, 127),
            (3, 123)
        );
        assert_eq!(
            activation_range_quantized(QuantActivation::ReluN1To1, s, 3, -128, 127),
            (-17, 23)
        );
        // Range clipped by the type.
        assert_eq!(
            activation_range_quantized(QuantActivation::Relu6, 0.01, -128, -128, 127),
            (-128, 127)
        );
        assert_eq!(
            activation_range_quantized(QuantActivation::Relu, 0.01, -200, -128, 127),
            (-128, 127)
        );
    }

    #[test]
    fn i16_helpers() {
        assert_eq!(
            saturating_rounding_doubling_high_mul_i16(i16::MIN, i16::MIN),
            i16::MAX
        );
        assert_eq!(
            saturating_rounding_doubling_high_mul_i16(16384, 16384),
            8192
        );
        assert_eq!(saturating_rounding_doubling_high_mul_i16(-3, 16384), -1);
        assert_eq!(rounding_divide_by_pot_i16(-5, 1), -3);
        assert_eq!(rounding_divide_by_pot_i16(5, 1), 3);
        assert_eq!(downscale_multiplier_to_i16(1 << 30), 1 << 14);
        assert_eq!(downscale_multiplier_to_i16(i32::MAX), i16::MAX);
        assert_eq!(
            downscale_multiplier_to_i16((1 << 30) + (1 << 15)),
            (1 << 14) + 1
        );
    }
}
