//! FULLY_CONNECTED (float32), matching TFLite's reference `FullyConnected`.
//!
//! `weights` is `[out_depth, in_depth]` row-major, so each output is a dot product of two
//! contiguous rows, accumulated from zero in order; then `bias` is added and the activation
//! applied.

use super::conv::ConvAccumulate;
use super::Activation;

/// `output[b, o] = act(sum_d input[b, d] * weights[o, d] + bias[o])`. `input` holds `batches`
/// rows of `in_depth`, `output` holds `batches` rows of `out_depth`.
#[allow(clippy::too_many_arguments)]
pub fn fully_connected_f32(
    input: &[f32],
    batches: usize,
    in_depth: usize,
    weights: &[f32],
    out_depth: usize,
    bias: Option<&[f32]>,
    activation: Activation,
    output: &mut [f32],
) {
    debug_assert_eq!(input.len(), batches * in_depth);
    debug_assert_eq!(weights.len(), out_depth * in_depth);
    debug_assert_eq!(output.len(), batches * out_depth);
    debug_assert!(bias.is_none_or(|b| b.len() == out_depth));
    if out_depth == 0 {
        return;
    }
    for b in 0..batches {
        let in_row = &input[b * in_depth..(b + 1) * in_depth];
        let out_row = &mut output[b * out_depth..(b + 1) * out_depth];
        for (o, out) in out_row.iter_mut().enumerate() {
            let w_row = &weights[o * in_depth..(o + 1) * in_depth];
            let mut total = 0.0f32;
            for (&x, &w) in in_row.iter().zip(w_row) {
                total += x * w;
            }
            let bias_value = bias.map_or(0.0, |bb| bb[o]);
            *out = activation.apply(total + bias_value);
        }
    }
}

/// Int8 FULLY_CONNECTED as TFLite's `reference_integer_ops::FullyConnected` (per-tensor, the
/// multiplier repeated) and `FullyConnectedPerChannel`: `acc = sum w * (x + input_offset) +
/// bias`, requantized per output channel, clamped.
#[allow(clippy::too_many_arguments)]
pub fn fully_connected_i8(
    input: &[i8],
    batches: usize,
    in_depth: usize,
    weights: &[i8],
    out_depth: usize,
    bias: Option<&[i32]>,
    q: &crate::quant::OutputStage,
    output: &mut [i8],
) {
    fully_connected_quantized(
        input,
        batches,
        in_depth,
        weights,
        out_depth,
        bias,
        q.input_offset,
        output,
        |acc, o| q.apply(acc, o),
    );
}

/// Int16x8 FULLY_CONNECTED (int16 input with zero point 0, int8 weights, int64 bias), as
/// TFLite's `reference_integer_ops::FullyConnected` (per tensor, the multiplier repeated) and
/// `FullyConnectedPerChannel` for int16: `acc = sum w * x + bias` in int64, requantized as
/// LiteRT does ([`crate::quant::OutputStage::apply_16x8_fc`]).
#[allow(clippy::too_many_arguments)]
pub fn fully_connected_16x8(
    input: &[i16],
    batches: usize,
    in_depth: usize,
    weights: &[i8],
    out_depth: usize,
    bias: Option<&[i64]>,
    q: &crate::quant::OutputStage,
    output: &mut [i16],
) {
    fully_connected_quantized(
        input,
        batches,
        in_depth,
        weights,
        out_depth,
        bias,
        q.input_offset,
        output,
        |acc, o| q.apply_16x8_fc(acc, o),
    );
}

/// The integer FULLY_CONNECTED loop nest of [`fully_connected_i8`] and
/// [`fully_connected_16x8`]: per output, [`ConvAccumulate::dot`] of the input row and the
/// weights row plus the bias, then `requantize(acc, channel)`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fully_connected_quantized<T: ConvAccumulate>(
    input: &[T],
    batches: usize,
    in_depth: usize,
    weights: &[i8],
    out_depth: usize,
    bias: Option<&[T::Acc]>,
    input_offset: i32,
    output: &mut [T],
    requantize: impl Fn(T::Acc, usize) -> T,
) {
    if out_depth == 0 {
        return;
    }
    for b in 0..batches {
        let x = &input[b * in_depth..(b + 1) * in_depth];
        let out_row = &mut output[b * out_depth..(b + 1) * out_depth];
        for (o, ov) in out_row.iter_mut().enumerate() {
            let w = &weights[o * in_depth..(o + 1) * in_depth];
            let acc = T::add_bias(
                T::dot(x, w, input_offset),
                bias.map_or(T::Acc::default(), |bb| bb[o]),
            );
            *ov = requantize(acc, o);
        }
    }
}

/// Hybrid FULLY_CONNECTED (float input/output, constant int8 weights), as TFLite's
/// `EvalHybrid`: each batch row is quantized (symmetric, or asymmetric when
/// `asymmetric_quantize_inputs`), then
/// `out = act(bias[o] + float(sum w * (q - zp)) * (input_scale[b] * weight_scale[o]))`.
#[allow(clippy::too_many_arguments)]
pub fn fully_connected_hybrid(
    input: &[f32],
    batches: usize,
    in_depth: usize,
    weights: &[i8],
    weight_scales: &[f32],
    out_depth: usize,
    bias: Option<&[f32]>,
    activation: Activation,
    mode: super::conv::HybridInput,
    scratch: &mut super::conv::HybridScratch<'_>,
    output: &mut [f32],
) {
    if out_depth == 0 {
        return;
    }
    super::conv::quantize_rows(input, in_depth, mode, scratch);
    for b in 0..batches {
        let x = &scratch.quantized[b * in_depth..(b + 1) * in_depth];
        let sf = scratch.scales[b];
        let off = -scratch.offsets[b];
        let out_row = &mut output[b * out_depth..(b + 1) * out_depth];
        for (o, ov) in out_row.iter_mut().enumerate() {
            let w = &weights[o * in_depth..(o + 1) * in_depth];
            let dot = super::conv::dot_offset(x, w, off);
            let ws = weight_scales[if weight_scales.len() == 1 { 0 } else { o }];
            let v = bias.map_or(0.0, |bb| bb[o]) + dot as f32 * (sf * ws);
            *ov = activation.apply(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn hand_computed() {
        // 2 batches x 3 inputs, 2 outputs.
        let input = [1.0, 2.0, 3.0, -1.0, 0.5, 2.0];
        let weights = [1.0, 0.0, -1.0, 0.5, 0.5, 0.5];
        let bias = [0.25, -1.0];
        let mut out = [0.0; 4];
        fully_connected_f32(
            &input,
            2,
            3,
            &weights,
            2,
            Some(&bias),
            Activation::None,
            &mut out,
        );
        assert_eq!(
            out,
            [1.0 - 3.0 + 0.25, 3.0 - 1.0, -1.0 - 2.0 + 0.25, 0.75 - 1.0]
        );
        fully_connected_f32(
            &input,
            2,
            3,
            &weights,
            2,
            Some(&bias),
            Activation::Relu,
            &mut out,
        );
        assert_eq!(out, [0.0, 2.0, 0.0, 0.0]);
        fully_connected_f32(&input, 2, 3, &weights, 2, None, Activation::Relu6, &mut out);
        assert_eq!(out, [0.0, 3.0, 0.0, 0.75]);
    }

    #[test]
    fn random_against_naive() {
        let (batches, ind, outd) = (3, 17, 5);
        let mut s = 12345u32;
        let mut rnd = || {
            s = s.wrapping_mul(1664525).wrapping_add(1013904223);
            (s >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        };
        let input: alloc::vec::Vec<f32> = (0..batches * ind).map(|_| rnd()).collect();
        let weights: alloc::vec::Vec<f32> = (0..outd * ind).map(|_| rnd()).collect();
        let bias: alloc::vec::Vec<f32> = (0..outd).map(|_| rnd()).collect();
        let mut out = vec![0.0; batches * outd];
        fully_connected_f32(
            &input,
            batches,
            ind,
            &weights,
            outd,
            Some(&bias),
            Activation::Tanh,
            &mut out,
        );
        for b in 0..batches {
            for o in 0..outd {
                let mut s = bias[o] as f64;
                for d in 0..ind {
                    s += input[b * ind + d] as f64 * weights[o * ind + d] as f64;
                }
                let want = crate::math::tanhf(s as f32);
                assert!((out[b * outd + o] - want).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn empty_input_depth_gives_bias() {
        let mut out = [9.0; 2];
        fully_connected_f32(
            &[],
            1,
            0,
            &[],
            2,
            Some(&[1.0, -2.0]),
            Activation::None,
            &mut out,
        );
        assert_eq!(out, [1.0, -2.0]);
    }
}
