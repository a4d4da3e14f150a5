//! 8-bit unary operators: lookup tables (activations, requantization), HARD_SWISH and RSQRT.

use super::*;

/// A 256-entry lookup table over the bytes of an 8-bit tensor: `out[i] = table[in[i] as u8]`.
pub type Lut8 = [u8; 256];

/// Applies a [`Lut8`].
pub fn apply_lut8(table: &Lut8, input: &[u8], out: &mut [u8]) {
    for (o, &x) in out.iter_mut().zip(input) {
        *o = table[usize::from(x)];
    }
}

/// The value range of an 8-bit type (`signed` = int8).
fn range8(signed: bool) -> (i32, i32) {
    if signed {
        (-128, 127)
    } else {
        (0, 255)
    }
}

/// The value a byte stands for.
fn byte_value(byte: u8, signed: bool) -> i32 {
    if signed {
        i32::from(byte as i8)
    } else {
        i32::from(byte)
    }
}

/// A table from an integer function of the stored value (the output is clamped to the output
/// type and stored as its byte).
pub fn lut8_from_int(in_signed: bool, out_signed: bool, f: impl Fn(i32) -> i32) -> Lut8 {
    let (lo, hi) = range8(out_signed);
    let mut t = [0u8; 256];
    for (b, e) in t.iter_mut().enumerate() {
        let v = f(byte_value(b as u8, in_signed)).clamp(lo, hi);
        *e = v as u8;
    }
    t
}

/// TFLite `LUTPopulate` / `PopulateLookupTable` for 8-bit types: dequantize, apply `f` in float,
/// requantize with `round(y / out_scale) + out_zp`, clamp.
pub fn lut8_from_float(input: Q8, output: Q8, signed: bool, f: impl Fn(f32) -> f32) -> Lut8 {
    let inv = 1.0 / output.scale;
    lut8_from_int(signed, signed, |v| {
        let x = input.scale * (v - input.zero_point) as f32;
        let r = crate::math::roundf(f(x) * inv);
        (r + output.zero_point as f32) as i32
    })
}

/// TFLite's quantized RELU / RELU6 / RELU_N1_TO_1 (`QuantizedReluX`), as a table. `hi` is
/// `None` for an unbounded RELU.
pub fn lut8_relu(input: Q8, output: Q8, signed: bool, lo: f32, hi: Option<f32>) -> Lut8 {
    let (tmin, tmax) = range8(signed);
    let (m, s) = quantize_multiplier(f64::from(input.scale / output.scale));
    // Saturating: a file may give scales whose ratio makes these overflow i32 (clamped anyway).
    let qmin = tmin.max(
        output
            .zero_point
            .saturating_add(crate::math::roundf(lo / output.scale) as i32),
    );
    let qmax = hi.map_or(tmax, |h| {
        tmax.min(
            output
                .zero_point
                .saturating_add(crate::math::roundf(h / output.scale) as i32),
        )
    });
    lut8_from_int(signed, signed, |v| {
        output
            .zero_point
            .saturating_add(mbqm(v - input.zero_point, m, s))
            .max(qmin)
            .min(qmax)
    })
}

/// TFLite's quantized LEAKY_RELU (`QuantizeLeakyRelu`), as a table.
pub fn lut8_leaky_relu(input: Q8, output: Q8, signed: bool, alpha: f32) -> Lut8 {
    let (ma, sa) = quantize_multiplier(f64::from(input.scale * alpha / output.scale));
    let (mi, si) = quantize_multiplier(f64::from(input.scale / output.scale));
    lut8_from_int(signed, signed, |v| {
        let x = v - input.zero_point;
        if x >= 0 {
            output.zero_point + mbqm(x, mi, si)
        } else {
            output.zero_point + mbqm(x, ma, sa)
        }
    })
}

/// TFLite's quantized requantization (QUANTIZE between 8-bit types, quantize.cc `Requantize`).
pub fn lut8_requantize(input: Q8, output: Q8, in_signed: bool, out_signed: bool) -> Lut8 {
    let (m, s) = crate::quant::quantize_scale_ratio([input.scale, 1.0], output.scale);
    lut8_from_int(in_signed, out_signed, |v| {
        mbqm(v - input.zero_point, m, s).saturating_add(output.zero_point)
    })
}

/// The fixed-point parameters of a quantized HARD_SWISH (TFLite `HardSwishParams`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HardSwishParams {
    pub input_zero_point: i16,
    pub output_zero_point: i16,
    pub reluish_multiplier: i16,
    pub reluish_exponent: i32,
    pub output_multiplier: i16,
    pub output_exponent: i32,
}

impl HardSwishParams {
    /// activations.cc `HardSwishPrepare`; `None` when the output multiplier would need a left
    /// shift (TFLite rejects that too).
    pub fn new(input: Q8, output: Q8) -> Option<HardSwishParams> {
        let hires_input_scale = (1.0f32 / 128.0) * input.scale;
        let reluish_scale = 3.0f32 / 32768.0;
        let (om, oe) = quantize_multiplier(f64::from(hires_input_scale / output.scale));
        let (rm, re) = quantize_multiplier(f64::from(hires_input_scale / reluish_scale));
        if oe > 0 {
            return None;
        }
        Some(HardSwishParams {
            input_zero_point: input.zero_point as i16,
            output_zero_point: output.zero_point as i16,
            reluish_multiplier: downscale_multiplier_to_i16(rm),
            reluish_exponent: re,
            output_multiplier: downscale_multiplier_to_i16(om),
            output_exponent: oe,
        })
    }

    /// `reference_ops::HardSwish` for one stored value (before the type clamp).
    pub fn eval(&self, v: i32) -> i32 {
        fn sat_left_shift(value: i16, amount: i32) -> i16 {
            let r = i64::from(value) * (1i64 << amount.clamp(0, 62));
            r.clamp(i64::from(i16::MIN), i64::from(i16::MAX)) as i16
        }
        fn sat_doubling_high_mul(a: i16, b: i16) -> i16 {
            if a == b && a == i16::MIN {
                return i16::MAX;
            }
            ((i32::from(a) * i32::from(b)) / (1 << 15)) as i16
        }
        let input_value = (v - i32::from(self.input_zero_point)) as i16;
        let hires = input_value.wrapping_mul(1 << 7);
        let preshift_out = srdhm16(hires, self.output_multiplier);
        let mut reluish = hires;
        if self.reluish_exponent > 0 {
            reluish = sat_left_shift(reluish, self.reluish_exponent - 1);
        }
        reluish = srdhm16(reluish, self.reluish_multiplier);
        if self.reluish_exponent > 0 {
            reluish = sat_left_shift(reluish, 1);
        }
        if self.reluish_exponent < 0 {
            reluish = rounding_divide_by_pot_i16(reluish, -self.reluish_exponent);
        }
        reluish = ((i32::from(reluish) + (1 << 15)) >> 1) as i16;
        let preshift_output_value = sat_doubling_high_mul(reluish, preshift_out);
        let out = rounding_divide_by_pot_i16(preshift_output_value, -self.output_exponent);
        i32::from(out.wrapping_add(self.output_zero_point))
    }
}

/// gemmlowp `SaturatingRoundingMultiplyByPOT` for a left shift (`exponent > 0`): saturates.
fn sat_mul_pot(x: i32, exponent: u32) -> i32 {
    let threshold = (1i32 << (31 - exponent)) - 1;
    if x > threshold {
        i32::MAX
    } else if x < -threshold {
        i32::MIN
    } else {
        x << exponent
    }
}

/// TFLite `GetInvSqrtQuantizedMultiplierExp(input, /*reverse_shift=*/-1)`: `1 / sqrt(input)` as
/// a multiplier and a (left) shift, by five Newton-Raphson steps in gemmlowp fixed point.
/// `input <= 1` gives `(i32::MAX, 0)`.
pub fn inv_sqrt_quantized_multiplier_exp(input: i32) -> (i32, i32) {
    use crate::quant::saturating_rounding_doubling_high_mul as mul;
    if input <= 1 {
        return (i32::MAX, 0);
    }
    let mut input = input;
    let mut shift = 11i32;
    while input >= 1 << 29 {
        input /= 4;
        shift += 1;
    }
    let max_left_shift_bits = input.leading_zeros() - 1;
    let left_shift_bit_pairs = max_left_shift_bits / 2 - 1;
    shift -= left_shift_bit_pairs as i32;
    input <<= 2 * left_shift_bit_pairs;
    // F3 values (3 integer bits): raw / 2^28.
    let fixed_input = input >> 1;
    let half_input = crate::quant::rounding_divide_by_pot(fixed_input, 1);
    let half_three = (1 << 28) + (1 << 27);
    let mut x = 1i32 << 28;
    for _ in 0..5 {
        // x * x * x is F9; Rescale<3> multiplies by 2^6.
        let x3 = sat_mul_pot(mul(mul(x, x), x), 6);
        // F6 - F6, Rescale<3> multiplies by 2^3.
        x = sat_mul_pot(mul(half_three, x).wrapping_sub(mul(half_input, x3)), 3);
    }
    // x * sqrt(2)/2 (F0).
    let mut inv = mul(x, 1_518_500_250);
    if shift < 0 {
        inv = inv.wrapping_shl((-shift) as u32);
        shift = 0;
    }
    (inv, -shift)
}

/// TFLite's int8 RSQRT (elementwise.cc `RsqrtEvalQuantized`) for the stored value `v`; `None`
/// when `v` is below the input zero point (a negative real: TFLite fails the invocation).
/// `multiplier`/`shift` quantize `1 / (sqrt(in_scale) * out_scale)`.
pub fn rsqrt_i8(
    v: i32,
    in_zero_point: i32,
    multiplier: i32,
    shift: i32,
    out_zero_point: i32,
) -> Option<i8> {
    const K_SHIFT: i32 = 20;
    let value = v - in_zero_point;
    if value < 0 {
        return None;
    }
    if value == 0 {
        return Some(127);
    }
    let (m, s) = inv_sqrt_quantized_multiplier_exp(value);
    let data = mbqm(1, m, s + K_SHIFT);
    let out = mbqm(data, multiplier, shift - K_SHIFT).saturating_add(out_zero_point);
    Some(out.clamp(-128, 127) as i8)
}

/// The table of an int8 RSQRT and the smallest valid stored input (the input zero point).
/// `None` when the output multiplier cannot be applied (`shift - 20` below -31).
pub fn rsqrt_i8_table(input: Q8, output: Q8) -> Option<Lut8> {
    let real = 1.0 / f64::from(crate::math::sqrtf(input.scale) * output.scale);
    if !real.is_finite() {
        return None;
    }
    let (m, s) = quantize_multiplier(real);
    if m == 0 || s - 20 < -31 {
        return None;
    }
    Some(lut8_from_int(true, true, |v| {
        rsqrt_i8(v, input.zero_point, m, s, output.zero_point).map_or(0, i32::from)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inv_sqrt_multiplier_is_accurate() {
        assert_eq!(inv_sqrt_quantized_multiplier_exp(1), (i32::MAX, 0));
        assert_eq!(inv_sqrt_quantized_multiplier_exp(0), (i32::MAX, 0));
        for v in (2..100_000).step_by(7).chain([1 << 29, i32::MAX]) {
            let (m, s) = inv_sqrt_quantized_multiplier_exp(v);
            let got = f64::from(m) * 2f64.powi(s - 31);
            let want = 1.0 / f64::from(v).sqrt();
            assert!((got / want - 1.0).abs() < 1e-5, "{v}: {got} vs {want}");
        }
    }
}
