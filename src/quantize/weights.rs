//! Encoding constant weights: float16, and symmetric int8 (max |w| ↦ 127, zero point 0), per
//! tensor or per channel, as the TFLite quantization spec prescribes for weights.

use super::wide::{per_isa, Isa};
use crate::ir::{ConstData, DType, QuantParams};
use ndarray::{ArrayD, Axis, IxDyn};
use rayon::prelude::*;

/// float32 → float16 (round to nearest even, as `half` does).
pub fn to_f16(d: &ConstData) -> ConstData {
    d.cast(crate::ir::DType::F16)
}

/// Weights whose largest |value| is below this are a dead channel (a batch norm scale of ~0
/// folded in): quantized to zeros, since a scale this small times an activation scale would
/// underflow f32 and make the bias scale 0, which runtimes reject.
const DEAD_CHANNEL: f32 = 1e-20;

/// Scale for symmetric int8 of values with this max |w|: max ↦ 127. An all-zero (or dead)
/// channel gets scale 1 (any positive scale represents it; zero would be an invalid parameter).
pub fn symmetric_scale(max_abs: f32) -> f32 {
    if max_abs > DEAD_CHANNEL && max_abs.is_finite() {
        max_abs / 127.0
    } else {
        1.0
    }
}

/// `x / scale` rounded half away from zero and clamped to ±127: the value of
/// `(x / scale).round().clamp(-127.0, 127.0) as i8`, without the C library's `roundf` call per
/// weight (every quantized attempt rounds all of a model's weights; ResNet18: 11 M). Clamping
/// first changes nothing (±127 are whole), and below 2^23 the fraction `v - trunc(v)` is exact,
/// so comparing it with ±0.5 rounds as `round` does; NaN gives 0 either way.
fn quantize_value(x: f32, scale: f32) -> i8 {
    let v = (x / scale).clamp(-127.0, 127.0);
    let t = v as i32 as f32;
    let f = v - t;
    (if f >= 0.5 {
        t + 1.0
    } else if f <= -0.5 {
        t - 1.0
    } else {
        t
    }) as i8
}

per_isa! {
    /// [`quantize_value`] of each of `src` into `dst`, the same values, in a form that
    /// vectorizes: the NaN case and the rounding's two branches as selects, the truncation as
    /// the vector instruction (every attempt quantizes all of a model's weights).
    fn quantize_slice(dst: &mut [i8], src: &[f32], scale: f32) {
        for (d, &x) in dst.iter_mut().zip(src) {
            let v = (x / scale).clamp(-127.0, 127.0);
            let v = if v.is_nan() { 0.0 } else { v };
            let t = v.trunc();
            let f = v - t;
            let up = if f >= 0.5 { 1.0 } else { 0.0 };
            let down = if f <= -0.5 { 1.0 } else { 0.0 };
            *d = (t + up - down) as i32 as i8;
        }
    }
}

/// Symmetric int8 with one scale per index of `axis` (`None`: one scale for the whole tensor).
pub fn quantize_symmetric(w: &ArrayD<f32>, axis: Option<usize>) -> (ConstData, QuantParams) {
    match axis {
        None => {
            let scale = symmetric_scale(w.iter().fold(0f32, |m, x| m.max(x.abs())));
            let q = w.mapv(|x| quantize_value(x, scale));
            (ConstData::I8(q), QuantParams::per_tensor(scale, 0))
        }
        // Channels first (conv and dense weights) in memory order: each channel a contiguous
        // slice, quantized in parallel (the same values as `per_channel`).
        Some(0) if w.ndim() > 0 && w.shape()[0] > 0 => {
            let Some(values) = w.as_slice() else {
                return per_channel(w, 0);
            };
            let per = values.len() / w.shape()[0];
            if per == 0 {
                return per_channel(w, 0);
            }
            let scales: Vec<f32> = values
                .chunks_exact(per)
                .map(|c| symmetric_scale(c.iter().fold(0f32, |m, x| m.max(x.abs()))))
                .collect();
            let mut q = vec![0i8; values.len()];
            let isa = Isa::detect();
            q.par_chunks_mut(per)
                .zip(values.par_chunks(per))
                .zip(&scales)
                .for_each(|((dst, src), &scale)| quantize_slice(isa, dst, src, scale));
            let n = scales.len();
            let q =
                ArrayD::from_shape_vec(IxDyn(w.shape()), q).expect("as many values as the weights");
            (
                ConstData::I8(q),
                QuantParams {
                    scale: scales,
                    zero_point: vec![0; n],
                    axis: 0,
                },
            )
        }
        Some(axis) => per_channel(w, axis),
    }
}

/// [`quantize_symmetric`] with one scale per index of `axis`, for any layout.
fn per_channel(w: &ArrayD<f32>, axis: usize) -> (ConstData, QuantParams) {
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

/// Integer bias for a quantized conv/dense layer: scale = input_scale × weight_scale[c], zero
/// point 0 (the spec's rule, so the accumulator needs no rescaling before the bias is added);
/// int32 for int8 activations, int64 for int16 ones (`wide`), as TFLite's 16x8 kernels take.
pub fn quantize_bias(
    b: &ArrayD<f32>,
    input_scale: f32,
    weight_scales: &[f32],
    wide: bool,
) -> (ConstData, QuantParams) {
    let n = b.len();
    let scales: Vec<f32> = (0..n)
        .map(|c| input_scale * weight_scales[if weight_scales.len() == 1 { 0 } else { c }])
        .collect();
    let (lo, hi) = if wide {
        (i64::MIN as f64, i64::MAX as f64)
    } else {
        (i32::MIN as f64, i32::MAX as f64)
    };
    let q: Vec<i64> = b
        .iter()
        .zip(&scales)
        .map(|(&x, &s)| (x as f64 / s as f64).round().clamp(lo, hi) as i64)
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
    let data = ConstData::from_i64(&[n], q);
    (if wide { data } else { data.cast(DType::I32) }, params)
}

/// The element type of quantized activations: int8 (full int8) or int16 (int16x8, 16-bit
/// activations with int8 weights).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Activations {
    #[default]
    Int8,
    Int16,
}

impl Activations {
    pub fn dtype(self) -> DType {
        match self {
            Activations::Int8 => DType::I8,
            Activations::Int16 => DType::I16,
        }
    }

    /// The stored range.
    pub fn range(self) -> (f32, f32) {
        match self {
            Activations::Int8 => (-128.0, 127.0),
            Activations::Int16 => (-32768.0, 32767.0),
        }
    }

    /// Parameters for values in [min, max]: asymmetric for int8; symmetric (zero point 0, max
    /// |x| ↦ 32767) for int16, which TFLite's 16x8 kernels require.
    pub fn params(self, min: f32, max: f32) -> QuantParams {
        match self {
            Activations::Int8 => asymmetric_params(min, max),
            Activations::Int16 => {
                let m = min.abs().max(max.abs());
                let scale = if m > 0.0 && m.is_finite() {
                    m / 32767.0
                } else {
                    1.0 / 32767.0
                };
                QuantParams::per_tensor(scale, 0)
            }
        }
    }

    /// Quantizes float values with per-tensor parameters `q` (saturating).
    pub fn quantize(self, x: &ArrayD<f32>, q: &QuantParams) -> ConstData {
        match self {
            Activations::Int8 => quantize_asymmetric(x, q),
            Activations::Int16 => {
                let (s, z) = (q.scale[0], q.zero_point[0] as f32);
                ConstData::I16(x.mapv(|v| (v / s + z).round().clamp(-32768.0, 32767.0) as i16))
            }
        }
    }
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

    /// The inline rounding gives `round` then clamp's value everywhere: halves, the largest
    /// float below a half, past ±127, infinities, NaN, and a sweep of quotients.
    #[test]
    fn quantized_values_are_rounds_of_the_quotient() {
        let reference = |x: f32, s: f32| (x / s).round().clamp(-127.0, 127.0) as i8;
        let below_half = 0.5f32.next_down();
        let mut xs = vec![
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.5,
            -2.5,
            below_half,
            -below_half,
            126.5,
            -126.5,
            127.49,
            127.5,
            -127.5,
            128.0,
            1e9,
            -1e9,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MIN_POSITIVE / 4.0,
        ];
        xs.extend((0..200_000).map(|i| (i as f32 - 100_000.0) * 0.001_37));
        for s in [1.0f32, 0.3, 7.9e-3, 2.0e-5] {
            for &x in &xs {
                let x = x * s;
                assert_eq!(quantize_value(x, s), reference(x, s), "{x} / {s}");
            }
        }
        // The vector loop gives the same values, for every width the CPU has.
        for isa in Isa::all_available() {
            for s in [1.0f32, 0.3, 2.0e-5] {
                let src: Vec<f32> = xs.iter().map(|&x| x * s).collect();
                let mut dst = vec![0i8; src.len()];
                quantize_slice(isa, &mut dst, &src, s);
                for (&x, &d) in src.iter().zip(&dst) {
                    assert_eq!(d, quantize_value(x, s), "{isa:?} {x} / {s}");
                }
            }
        }
        // The sweep reaches both clamps and rounds both ways (the test can fail).
        assert_eq!(quantize_value(200.0, 1.0), 127);
        assert_eq!(quantize_value(-2.5, 1.0), -3);
    }

    #[test]
    fn a_dead_channel_gets_a_bias_scale_a_runtime_accepts() {
        // A channel a ~0 batch-norm scale was folded into: 1e-38 / 127 times a typical int16
        // activation scale underflows to 0.
        let w = ArrayD::from_shape_vec(IxDyn(&[2, 2]), vec![1e-38f32, -1e-38, 0.5, -0.25]).unwrap();
        let (q, p) = quantize_symmetric(&w, Some(0));
        assert_eq!(q.to_i64_vec(), vec![0, 0, 127, -64]);
        let b = ArrayD::from_shape_vec(IxDyn(&[2]), vec![0.0f32, 1.0]).unwrap();
        let (_, bp) = quantize_bias(&b, 3e-5, &p.scale, true);
        assert!(
            bp.scale.iter().all(|&s| s > 0.0 && s.is_normal()),
            "{:?}",
            bp.scale
        );
    }

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
        let (q, p) = quantize_bias(&b, 0.1, &[0.01, 0.02], false);
        assert_eq!(q.to_i64_vec(), vec![500, -500]);
        assert!((p.scale[1] - 0.002).abs() < 1e-9);
        assert_eq!(q.dtype(), DType::I32);
        // int16x8: scale 2^-40, values beyond 32 bits.
        let tiny = 1.0 / (1u64 << 20) as f32;
        let (q, _) = quantize_bias(&b, tiny, &[tiny], true);
        assert_eq!(q.dtype(), DType::I64);
        assert_eq!(q.to_i64_vec(), vec![1 << 39, -(1 << 40)]);
    }

    #[test]
    fn int16_activations_are_symmetric() {
        let p = Activations::Int16.params(-1.0, 3.0);
        assert_eq!(p.zero_point[0], 0);
        assert!((p.scale[0] - 3.0 / 32767.0).abs() < 1e-9);
        let x = ArrayD::from_shape_vec(IxDyn(&[3]), vec![-1.0, 3.0, 10.0]).unwrap();
        assert_eq!(
            Activations::Int16.quantize(&x, &p).to_i64_vec(),
            vec![-10922, 32767, 32767]
        );
        assert!(Activations::Int16.params(0.0, 0.0).scale[0] > 0.0);
    }
}
