//! Sums: ADD_N (over inputs), CUMSUM (along an axis) and L2_NORMALIZATION (of squares along the
//! last axis, float and TFLite's int8 reference form); int8 ADD_N and CUMSUM as TFLite Micro
//! computes them.

use crate::kernels::elementwise::inv_sqrt_quantized_multiplier_exp;
use crate::quant::multiply_by_quantized_multiplier as mbqm;
use crate::quant::multiply_by_quantized_multiplier_smaller_than_one as mbqm_below_one;

/// The requantization of TFLite Micro's int8 ADD_N and CUMSUM (`ArithmeticParams` with its
/// `left_shift` of 20): each `x - zero_point` is shifted left by 20 and scaled by
/// `input_multiplier` (one half), the sum scaled by `output_multiplier` (`2 * input_scale /
/// (2^20 * output_scale)`) to the output's zero point, clamped to int8.
///
/// As in TFLite Micro, every sum starts from the scaled input offset (`-zero_point` shifted and
/// scaled like an element, where its comment says 0), so with a nonzero input zero point the
/// result is `-zero_point * input_scale` below the true sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SumQuant {
    /// `-input_zero_point`.
    pub input_offset: i32,
    pub input_multiplier: (i32, i32),
    pub output_multiplier: (i32, i32),
    pub output_zero_point: i32,
}

impl SumQuant {
    /// TFLite Micro's `kAddNIntegerShift` / `kCumSumIntegerShift`.
    pub const LEFT_SHIFT: i32 = 20;

    /// `x` (an input value, or the offset itself for the start) scaled to the sum's units.
    #[inline]
    fn scaled(&self, offset_x: i32) -> i32 {
        let (m, s) = self.input_multiplier;
        mbqm_below_one(offset_x.wrapping_mul(1 << Self::LEFT_SHIFT), m, s)
    }

    /// The value every sum starts from.
    #[inline]
    pub fn start(&self) -> i32 {
        self.scaled(self.input_offset)
    }

    /// Input value `v` in the sum's units.
    #[inline]
    pub fn term(&self, v: i8) -> i32 {
        self.scaled(self.input_offset + i32::from(v))
    }

    /// A sum as an int8 output value.
    #[inline]
    pub fn output(&self, sum: i32) -> i8 {
        let (m, s) = self.output_multiplier;
        (mbqm_below_one(sum, m, s).saturating_add(self.output_zero_point)).clamp(-128, 127) as i8
    }
}

/// Int8 ADD_N (TFLite Micro's `reference_ops::AddN` for int8): `out[i]` from the sum of
/// `input(k)[i]` over `inputs` inputs, in blocks of 64 sums on the stack.
pub fn add_n_i8<'a>(
    q: &SumQuant,
    inputs: usize,
    input: impl Fn(usize) -> &'a [i8],
    out: &mut [i8],
) {
    const BLOCK: usize = 64;
    let mut sums = [0i32; BLOCK];
    for (b, ob) in out.chunks_mut(BLOCK).enumerate() {
        let sums = &mut sums[..ob.len()];
        sums.fill(q.start());
        for k in 0..inputs {
            let x = input(k).get(b * BLOCK..).unwrap_or(&[]);
            for (s, &v) in sums.iter_mut().zip(x) {
                *s = s.wrapping_add(q.term(v));
            }
        }
        for (o, &s) in ob.iter_mut().zip(sums.iter()) {
            *o = q.output(s);
        }
    }
}

/// Int8 CUMSUM (TFLite Micro's `reference_ops::CumSum` for int8) of `input` viewed as
/// `[outer, depth, inner]` along `depth`.
#[allow(clippy::too_many_arguments)]
pub fn cumsum_i8(
    q: &SumQuant,
    input: &[i8],
    outer: usize,
    depth: usize,
    inner: usize,
    exclusive: bool,
    reverse: bool,
    out: &mut [i8],
) {
    let n = outer * depth * inner;
    if input.len() < n || out.len() < n {
        return;
    }
    for o in 0..outer {
        for i in 0..inner {
            let mut acc = q.start();
            for d in 0..depth {
                let d = if reverse { depth - 1 - d } else { d };
                let k = (o * depth + d) * inner + i;
                let before = acc;
                acc = acc.wrapping_add(q.term(input[k]));
                out[k] = q.output(if exclusive { before } else { acc });
            }
        }
    }
}

/// One element type's addition (wrapping for integers, as TFLite's two's-complement sums).
pub trait Accumulate: Copy + Default {
    fn add(self, other: Self) -> Self;
}

impl Accumulate for f32 {
    #[inline]
    fn add(self, other: f32) -> f32 {
        self + other
    }
}

impl Accumulate for i32 {
    #[inline]
    fn add(self, other: i32) -> i32 {
        self.wrapping_add(other)
    }
}

impl Accumulate for i64 {
    #[inline]
    fn add(self, other: i64) -> i64 {
        self.wrapping_add(other)
    }
}

/// One step of ADD_N (`out = in[0] + in[1] + ...` in input order, from zero as TFLite): adds
/// `x` to `out`.
pub fn add_into<T: Accumulate>(x: &[T], out: &mut [T]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = o.add(v);
    }
}

/// CUMSUM of `input` viewed as `[outer, depth, inner]` along `depth`: running sums (from the end
/// with `reverse`; each excluding its own element with `exclusive`).
pub fn cumsum<T: Accumulate>(
    input: &[T],
    outer: usize,
    depth: usize,
    inner: usize,
    exclusive: bool,
    reverse: bool,
    out: &mut [T],
) {
    let n = outer * depth * inner;
    if input.len() < n || out.len() < n {
        return;
    }
    for o in 0..outer {
        for i in 0..inner {
            let mut acc = T::default();
            for d in 0..depth {
                let d = if reverse { depth - 1 - d } else { d };
                let k = (o * depth + d) * inner + i;
                if exclusive {
                    out[k] = acc;
                    acc = acc.add(input[k]);
                } else {
                    acc = acc.add(input[k]);
                    out[k] = acc;
                }
            }
        }
    }
}

/// Float L2_NORMALIZATION over rows of `depth`: `x / max(sqrt(sum x²), 1e-6)` (TFLite's epsilon).
pub fn l2_normalize_f32(input: &[f32], depth: usize, out: &mut [f32]) {
    if depth == 0 {
        return;
    }
    for (x, o) in input.chunks_exact(depth).zip(out.chunks_exact_mut(depth)) {
        let sq: f32 = x.iter().fold(0.0, |s, &v| s + v * v);
        let norm = crate::math::sqrtf(sq).max(1e-6);
        for (o, &v) in o.iter_mut().zip(x) {
            *o = v / norm;
        }
    }
}

/// Int8 L2_NORMALIZATION (TFLite `reference_integer_ops::L2Normalization`): output scale 1/128,
/// zero point 0; each row scaled by its inverse square root in fixed point.
pub fn l2_normalize_i8(input: &[i8], depth: usize, in_zero_point: i32, out: &mut [i8]) {
    const OUTPUT_SCALE_SHIFT: i32 = 7;
    if depth == 0 {
        return;
    }
    for (x, o) in input.chunks_exact(depth).zip(out.chunks_exact_mut(depth)) {
        let acc = x.iter().fold(0i32, |s, &v| {
            let d = i32::from(v) - in_zero_point;
            s.wrapping_add(d * d)
        });
        let (m, s) = inv_sqrt_quantized_multiplier_exp(acc);
        for (o, &v) in o.iter_mut().zip(x) {
            let r = mbqm(i32::from(v) - in_zero_point, m, s + OUTPUT_SCALE_SHIFT);
            *o = r.clamp(-128, 127) as i8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_n_and_cumsum() {
        let mut o = [0.0f32; 3];
        for x in [[1.0, 2.0, 3.0], [10.0, 20.0, 30.0], [0.5; 3]] {
            add_into(&x, &mut o);
        }
        assert_eq!(o, [11.5, 22.5, 33.5]);
        // [2, 3] along axis 1 (outer 2, depth 3, inner 1).
        let x = [1, 2, 3, 4, 5, 6];
        let mut o = [0i32; 6];
        cumsum(&x, 2, 3, 1, false, false, &mut o);
        assert_eq!(o, [1, 3, 6, 4, 9, 15]);
        cumsum(&x, 2, 3, 1, true, false, &mut o);
        assert_eq!(o, [0, 1, 3, 0, 4, 9]);
        cumsum(&x, 2, 3, 1, false, true, &mut o);
        assert_eq!(o, [6, 5, 3, 15, 11, 6]);
        cumsum(&x, 2, 3, 1, true, true, &mut o);
        assert_eq!(o, [5, 3, 0, 11, 6, 0]);
        // Along axis 0 (outer 1, depth 2, inner 3).
        cumsum(&x, 1, 2, 3, false, false, &mut o);
        assert_eq!(o, [1, 2, 3, 5, 7, 9]);
    }

    /// Input scale 0.5 (zero point 3), output scale 0.25 (zero point -2): the input multiplier
    /// is one half (`2^30`, shift 0), the output one `4 / 2^20` = `2^30` with shift -17, so a
    /// term is `(v - 3) * 2^19`, every sum starts at `-3 * 2^19`, and a sum `s` gives
    /// `round(s / 2^18) - 2`.
    fn sum_quant() -> SumQuant {
        SumQuant {
            input_offset: -3,
            input_multiplier: crate::quant::quantize_multiplier(0.5),
            output_multiplier: crate::quant::quantize_multiplier(4.0 / f64::from(1 << 20)),
            output_zero_point: -2,
        }
    }

    #[test]
    fn int8_add_n_as_tflite_micro() {
        let q = sum_quant();
        assert_eq!(q.input_multiplier, (1 << 30, 0));
        assert_eq!(q.output_multiplier, (1 << 30, -17));
        let a: [i8; 4] = [5, -10, 127, 3];
        let b: [i8; 4] = [3, 7, -128, 4];
        let mut o = [0i8; 4];
        add_n_i8(&q, 2, |k| if k == 0 { &a[..] } else { &b[..] }, &mut o);
        // (-3 + (5-3) + (3-3)) * 2^19 / 2^18 - 2 = -4; (-3 - 13 + 4) * 2 - 2 = -26;
        // (-3 + 124 - 131) * 2 - 2 = -22; (-3 + 0 + 1) * 2 - 2 = -6.
        assert_eq!(o, [-4, -26, -22, -6]);
        // Clamped to int8: (-3 + 124 * 3) * 2 - 2 = 736.
        add_n_i8(&q, 3, |_| &[127i8][..], &mut o[..1]);
        assert_eq!(o[0], 127);
        // More values than one block of sums.
        let x = [4i8; 130];
        let mut o = [0i8; 130];
        add_n_i8(&q, 2, |_| &x[..], &mut o);
        // (-3 + 1 + 1) * 2 - 2 = -4 everywhere.
        assert!(o.iter().all(|&v| v == -4), "{o:?}");
    }

    #[test]
    fn int8_cumsum_as_tflite_micro() {
        let q = sum_quant();
        // [2, 3] along axis 1; terms (v - 3): [1, 2, 3], [-3, 0, 7].
        let x: [i8; 6] = [4, 5, 6, 0, 3, 10];
        let mut o = [0i8; 6];
        // Running sums from -3: [-2, 0, 3], [-6, -6, 1]; times 2, minus 2.
        cumsum_i8(&q, &x, 2, 3, 1, false, false, &mut o);
        assert_eq!(o, [-6, -2, 4, -14, -14, 0]);
        // Exclusive: [-3, -2, 0], [-3, -6, -6].
        cumsum_i8(&q, &x, 2, 3, 1, true, false, &mut o);
        assert_eq!(o, [-8, -6, -2, -8, -14, -14]);
        // Reverse: [3, 2, 0], [1, 4, 4]; exclusive reverse: [2, 0, -3], [4, 4, -3].
        cumsum_i8(&q, &x, 2, 3, 1, false, true, &mut o);
        assert_eq!(o, [4, 2, -2, 0, 6, 6]);
        cumsum_i8(&q, &x, 2, 3, 1, true, true, &mut o);
        assert_eq!(o, [2, -2, -8, 6, 6, -8]);
    }

    #[test]
    fn l2_normalize() {
        let mut o = [0.0f32; 4];
        l2_normalize_f32(&[3.0, 4.0, 0.0, 0.0], 2, &mut o);
        assert_eq!(o, [0.6, 0.8, 0.0, 0.0]);
        // 3-4-5 in int8: 0.6 and 0.8 in steps of 1/128 (77, 102).
        let mut o = [0i8; 2];
        l2_normalize_i8(&[30, 40], 2, 0, &mut o);
        assert!(
            (i32::from(o[0]) - 77).abs() <= 1 && (i32::from(o[1]) - 102).abs() <= 1,
            "{o:?}"
        );
    }
}
