//! Sums: ADD_N (over inputs), CUMSUM (along an axis) and L2_NORMALIZATION (of squares along the
//! last axis, float and TFLite's int8 reference form).

use crate::kernels::elementwise::inv_sqrt_quantized_multiplier_exp;
use crate::quant::multiply_by_quantized_multiplier as mbqm;

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
