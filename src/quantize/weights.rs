//! Encoding constant weights: float16, and symmetric int8 (max |w| ↦ 127, zero point 0), per
//! tensor or per channel, as the TFLite quantization spec prescribes for weights.

use crate::ir::{ConstData, QuantParams};
use ndarray::{ArrayD, Axis, IxDyn};

/// float32 → float16 (round to nearest even, as `half` does).
pub fn to_f16(d: &ConstData) -> ConstData {
    d.cast(crate::ir::DType::F16)
}

/// Scale for symmetric int8 of values with this max |w|: max ↦ 127. An all-zero channel gets
/// scale 1 (any positive scale represents it exactly; zero would be an invalid parameter).
pub fn symmetric_scale(max_abs: f32) -> f32 {
    if max_abs > 0.0 && max_abs.is_finite() {
        max_abs / 127.0
    } else {
        1.0
    }
}

fn quantize_value(x: f32, scale: f32) -> i8 {
    (x / scale).round().clamp(-127.0, 127.0) as i8
}

/// Symmetric int8 with one scale per index of `axis` (`None`: one scale for the whole tensor).
pub fn quantize_symmetric(w: &ArrayD<f32>, axis: Option<usize>) -> (ConstData, QuantParams) {
    match axis {
        None => {
            let scale = symmetric_scale(w.iter().fold(0f32, |m, x| m.max(x.abs())));
            let q = w.mapv(|x| quantize_value(x, scale));
            (ConstData::I8(q), QuantParams::per_tensor(scale, 0))
        }
        Some(axis) => {
            let scales: Vec<f32> = w
                .axis_iter(Axis(axis))
                .map(|c| symmetric_scale(c.iter().fold(0f32, |m, x| m.max(x.abs()))))
                .collect();
            let mut q = ArrayD::<i8>::zeros(IxDyn(w.shape()));
            for (c, (src, mut dst)) in w
                .axis_iter(Axis(axis))
                .zip(q.axis_iter_mut(Axis(axis)))
                .enumerate()
            {
                dst.zip_mut_with(&src, |d, &x| *d = quantize_value(x, scales[c]));
            }
            let n = scales.len();
            (
                ConstData::I8(q),
                QuantParams {
                    scale: scales,
                    zero_point: vec![0; n],
                    axis,
                },
            )
        }
    }
}

/// int32 bias for an integer conv/dense layer: scale = input_scale × weight_scale[c], zero
/// point 0 (the spec's rule, so the accumulator needs no rescaling before the bias is added).
pub fn quantize_bias(
    b: &ArrayD<f32>,
    input_scale: f32,
    weight_scales: &[f32],
) -> (ConstData, QuantParams) {
    let n = b.len();
    let scales: Vec<f32> = (0..n)
        .map(|c| input_scale * weight_scales[if weight_scales.len() == 1 { 0 } else { c }])
        .collect();
    let q: Vec<i32> = b
        .iter()
        .zip(&scales)
        .map(|(&x, &s)| {
            (x as f64 / s as f64)
                .round()
                .clamp(i32::MIN as f64, i32::MAX as f64) as i32
        })
        .collect();
    let per_channel = weight_scales.len() > 1;
    let params = if per_channel {
        QuantParams {
            scale: scales,
            zero_point: vec![0; n],
            axis: 0,
        }
    } else {
        QuantParams::per_tensor(scales[0], 0)
    };
    (ConstData::from_i32(&[n], q), params)
}

/// Asymmetric int8 parameters for values in [min, max]: the range is widened to contain 0 (so
/// zero, e.g. padding, is exact), mapped onto [-128, 127]. A degenerate range gets a small
/// positive scale.
pub fn asymmetric_params(min: f32, max: f32) -> QuantParams {
    let (lo, hi) = (min.min(0.0), max.max(0.0));
    let range = hi - lo;
    if range.is_nan() || range <= 0.0 || range.is_infinite() {
        // Constant (or all-zero) activations: any scale represents 0 exactly.
        return QuantParams::per_tensor(1.0 / 255.0, -128);
    }
    let scale = range / 255.0;
    let zp = (-128.0 - lo / scale).round().clamp(-128.0, 127.0) as i64;
    QuantParams::per_tensor(scale, zp)
}

/// Quantizes float values with per-tensor asymmetric parameters.
pub fn quantize_asymmetric(x: &ArrayD<f32>, q: &QuantParams) -> ConstData {
    let (s, z) = (q.scale[0], q.zero_point[0] as f32);
    ConstData::I8(x.mapv(|v| (v / s + z).round().clamp(-128.0, 127.0) as i8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symmetric_per_channel_maps_each_max_to_127() {
        let w =
            ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![1.0, -2.0, 0.5, 0.0, 0.0, 0.0]).unwrap();
        let (q, p) = quantize_symmetric(&w, Some(0));
        let ConstData::I8(q) = q else { panic!() };
        assert_eq!(q.as_slice().unwrap(), &[64, -127, 32, 0, 0, 0]);
        assert_eq!(p.scale, vec![2.0 / 127.0, 1.0]);
        assert_eq!(p.zero_point, vec![0, 0]);
    }

    #[test]
    fn symmetric_per_tensor_never_uses_minus_128() {
        let w = ArrayD::from_shape_vec(IxDyn(&[2]), vec![-3.0, 1.0]).unwrap();
        let (q, p) = quantize_symmetric(&w, None);
        let ConstData::I8(q) = q else { panic!() };
        assert_eq!(q.as_slice().unwrap(), &[-127, 42]);
        assert_eq!(p.scale.len(), 1);
    }

    #[test]
    fn asymmetric_params_keep_zero_exact_and_cover_the_range() {
        let p = asymmetric_params(-1.0, 3.0);
        let (s, z) = (p.scale[0], p.zero_point[0]);
        assert!((s - 4.0 / 255.0).abs() < 1e-7);
        assert_eq!(z, -64);
        let deq = |q: i64| (q - z) as f32 * s;
        assert!(deq(-128) <= -0.99 && deq(127) >= 2.99);
        // Positive-only ranges still contain 0.
        assert_eq!(asymmetric_params(2.0, 4.0).zero_point[0], -128);
        // Degenerate ranges get a valid scale.
        assert!(asymmetric_params(0.0, 0.0).scale[0] > 0.0);
    }

    #[test]
    fn bias_scale_is_input_times_weight_scale() {
        let b = ArrayD::from_shape_vec(IxDyn(&[2]), vec![0.5, -1.0]).unwrap();
        let (q, p) = quantize_bias(&b, 0.1, &[0.01, 0.02]);
        assert_eq!(q.to_i64_vec(), vec![500, -500]);
        assert!((p.scale[1] - 0.002).abs() < 1e-9);
    }
}
