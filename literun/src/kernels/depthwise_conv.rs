//! DEPTHWISE_CONV_2D (float32, NHWC), matching TFLite's reference `DepthwiseConv`.
//!
//! Filter layout is `[1, KH, KW, C_out]` with `C_out = C_in * depth_multiplier`; output channel
//! `ic * depth_multiplier + m` reads input channel `ic`. Per output element the accumulation
//! order is the reference one (filter row, filter column), starting from zero, then `bias` is
//! added and the activation applied.

use super::Activation;

/// Options of a DEPTHWISE_CONV_2D; padding is already resolved to the top/left amounts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DepthwiseParams {
    pub stride_h: usize,
    pub stride_w: usize,
    pub dilation_h: usize,
    pub dilation_w: usize,
    pub pad_top: usize,
    pub pad_left: usize,
    pub depth_multiplier: usize,
    pub activation: Activation,
}

impl Default for DepthwiseParams {
    fn default() -> Self {
        DepthwiseParams {
            stride_h: 1,
            stride_w: 1,
            dilation_h: 1,
            dilation_w: 1,
            pad_top: 0,
            pad_left: 0,
            depth_multiplier: 1,
            activation: Activation::None,
        }
    }
}

/// Depthwise 2-D convolution. `input` is `[N, H, W, C_in]`, `filter` is `[1, KH, KW, C_out]`,
/// `bias` has `C_out` elements, `output` is `[N, OH, OW, C_out]`.
#[allow(clippy::too_many_arguments)]
pub fn depthwise_conv2d_f32(
    input: &[f32],
    in_shape: [usize; 4],
    filter: &[f32],
    filter_shape: [usize; 4],
    bias: Option<&[f32]>,
    p: &DepthwiseParams,
    output: &mut [f32],
    out_shape: [usize; 4],
) {
    let [batches, in_h, in_w, in_c] = in_shape;
    let [_, k_h, k_w, f_c] = filter_shape;
    let [out_n, out_h, out_w, out_c] = out_shape;
    let dm = p.depth_multiplier;
    debug_assert_eq!(batches, out_n);
    debug_assert!(dm > 0);
    debug_assert_eq!(filter_shape[0], 1);
    debug_assert_eq!(f_c, out_c);
    debug_assert_eq!(out_c, in_c * dm);
    debug_assert_eq!(input.len(), batches * in_h * in_w * in_c);
    debug_assert_eq!(filter.len(), k_h * k_w * f_c);
    debug_assert_eq!(output.len(), out_n * out_h * out_w * out_c);
    debug_assert!(bias.is_none_or(|b| b.len() == out_c));
    debug_assert!(p.stride_h > 0 && p.stride_w > 0 && p.dilation_h > 0 && p.dilation_w > 0);
    if output.is_empty() || dm == 0 {
        return;
    }

    for b in 0..batches {
        let in_batch = &input[b * in_h * in_w * in_c..(b + 1) * in_h * in_w * in_c];
        for oy in 0..out_h {
            for ox in 0..out_w {
                let out_off = ((b * out_h + oy) * out_w + ox) * out_c;
                let out_px = &mut output[out_off..out_off + out_c];
                out_px.fill(0.0);
                for ky in 0..k_h {
                    let y = oy * p.stride_h + ky * p.dilation_h;
                    if y < p.pad_top || y - p.pad_top >= in_h {
                        continue;
                    }
                    let iy = y - p.pad_top;
                    for kx in 0..k_w {
                        let x = ox * p.stride_w + kx * p.dilation_w;
                        if x < p.pad_left || x - p.pad_left >= in_w {
                            continue;
                        }
                        let ix = x - p.pad_left;
                        let in_off = (iy * in_w + ix) * in_c;
                        let in_px = &in_batch[in_off..in_off + in_c];
                        let f_off = (ky * k_w + kx) * out_c;
                        let f_px = &filter[f_off..f_off + out_c];
                        // Output channel oc = ic * dm + m reads input channel oc / dm.
                        for ((acc_row, f_row), &xv) in out_px
                            .chunks_exact_mut(dm)
                            .zip(f_px.chunks_exact(dm))
                            .zip(in_px)
                        {
                            for (acc, &wv) in acc_row.iter_mut().zip(f_row) {
                                *acc += xv * wv;
                            }
                        }
                    }
                }
                for (o, v) in out_px.iter_mut().enumerate() {
                    let bias_value = bias.map_or(0.0, |bb| bb[o]);
                    *v = p.activation.apply(*v + bias_value);
                }
            }
        }
    }
}

/// Calls `f(input_pixel_offset, filter_tap)` for each in-bounds tap of output `(oy, ox)`.
#[inline]
#[allow(clippy::too_many_arguments)]
fn for_each_tap(
    oy: usize,
    ox: usize,
    in_h: usize,
    in_w: usize,
    k_h: usize,
    k_w: usize,
    p: &DepthwiseParams,
    mut f: impl FnMut(usize, usize),
) {
    for ky in 0..k_h {
        let y = oy * p.stride_h + ky * p.dilation_h;
        if y < p.pad_top || y - p.pad_top >= in_h {
            continue;
        }
        let iy = y - p.pad_top;
        for kx in 0..k_w {
            let x = ox * p.stride_w + kx * p.dilation_w;
            if x < p.pad_left || x - p.pad_left >= in_w {
                continue;
            }
            f(iy * in_w + x - p.pad_left, ky * k_w + kx);
        }
    }
}

/// Int8 DEPTHWISE_CONV_2D with per-channel requantization, as TFLite's
/// `reference_integer_ops::DepthwiseConvPerChannel`. `p.activation` is ignored (the clamp range
/// is in `q`); `acc` is scratch of `C_out` values.
#[allow(clippy::too_many_arguments)]
pub fn depthwise_conv2d_i8(
    input: &[i8],
    in_shape: [usize; 4],
    filter: &[i8],
    filter_shape: [usize; 4],
    bias: Option<&[i32]>,
    p: &DepthwiseParams,
    q: &crate::quant::OutputStage,
    acc: &mut [i32],
    output: &mut [i8],
    out_shape: [usize; 4],
) {
    let [batches, in_h, in_w, in_c] = in_shape;
    let [_, k_h, k_w, out_c] = filter_shape;
    let [_, out_h, out_w, _] = out_shape;
    let dm = p.depth_multiplier;
    if output.is_empty() || dm == 0 {
        return;
    }
    let acc = &mut acc[..out_c];
    let off = q.input_offset;
    for b in 0..batches {
        let in_batch = &input[b * in_h * in_w * in_c..(b + 1) * in_h * in_w * in_c];
        for oy in 0..out_h {
            for ox in 0..out_w {
                acc.fill(0);
                for_each_tap(oy, ox, in_h, in_w, k_h, k_w, p, |px, tap| {
                    let x = &in_batch[px * in_c..(px + 1) * in_c];
                    let w = &filter[tap * out_c..(tap + 1) * out_c];
                    for ((a_row, w_row), &xv) in
                        acc.chunks_exact_mut(dm).zip(w.chunks_exact(dm)).zip(x)
                    {
                        let xv = i32::from(xv) + off;
                        for (a, &wv) in a_row.iter_mut().zip(w_row) {
                            *a += i32::from(wv) * xv;
                        }
                    }
                });
                let out_off = ((b * out_h + oy) * out_w + ox) * out_c;
                for (o, (ov, &a)) in output[out_off..out_off + out_c]
                    .iter_mut()
                    .zip(acc.iter())
                    .enumerate()
                {
                    let a = a.wrapping_add(bias.map_or(0, |bb| bb[o]));
                    *ov = q.apply(a, o);
                }
            }
        }
    }
}

/// Int16x8 DEPTHWISE_CONV_2D (int16 activations with zero point 0, int8 filter, int64
/// bias), as TFLite's `reference_integer_ops::DepthwiseConvPerChannel<int64_t>`.
#[allow(clippy::too_many_arguments)]
pub fn depthwise_conv2d_16x8(
    input: &[i16],
    in_shape: [usize; 4],
    filter: &[i8],
    filter_shape: [usize; 4],
    bias: Option<&[i64]>,
    p: &DepthwiseParams,
    q: &crate::quant::OutputStage,
    output: &mut [i16],
    out_shape: [usize; 4],
) {
    let [batches, in_h, in_w, in_c] = in_shape;
    let [_, k_h, k_w, out_c] = filter_shape;
    let [_, out_h, out_w, _] = out_shape;
    let dm = p.depth_multiplier;
    if output.is_empty() || dm == 0 {
        return;
    }
    for b in 0..batches {
        let in_batch = &input[b * in_h * in_w * in_c..(b + 1) * in_h * in_w * in_c];
        for oy in 0..out_h {
            for ox in 0..out_w {
                let out_off = ((b * out_h + oy) * out_w + ox) * out_c;
                for (o, ov) in output[out_off..out_off + out_c].iter_mut().enumerate() {
                    let mut acc = 0i64;
                    for_each_tap(oy, ox, in_h, in_w, k_h, k_w, p, |px, tap| {
                        let x = i64::from(in_batch[px * in_c + o / dm]);
                        acc += x * i64::from(filter[tap * out_c + o]);
                    });
                    acc = acc.wrapping_add(bias.map_or(0, |bb| bb[o]));
                    *ov = q.apply_16x8(acc, o);
                }
            }
        }
    }
}

/// Hybrid DEPTHWISE_CONV_2D (float input/output, constant int8 filter), as TFLite's
/// `DepthwiseConvHybridPerChannel`: the input is quantized per batch (asymmetric), then
/// `out = act(float(sum w * (q - zp)) * (filter_scale[c] * input_scale[b]) + bias[c])`.
/// `acc` is scratch of `C_out` values.
#[allow(clippy::too_many_arguments)]
pub fn depthwise_conv2d_hybrid(
    input: &[f32],
    in_shape: [usize; 4],
    filter: &[i8],
    filter_shape: [usize; 4],
    filter_scales: &[f32],
    bias: Option<&[f32]>,
    p: &DepthwiseParams,
    mode: super::conv::HybridInput,
    scratch: &mut super::conv::HybridScratch<'_>,
    acc: &mut [i32],
    output: &mut [f32],
    out_shape: [usize; 4],
) {
    let [batches, in_h, in_w, in_c] = in_shape;
    let [_, k_h, k_w, out_c] = filter_shape;
    let [_, out_h, out_w, _] = out_shape;
    let dm = p.depth_multiplier;
    if output.is_empty() || dm == 0 {
        return;
    }
    let row = in_h * in_w * in_c;
    super::conv::quantize_rows(input, row, mode, scratch);
    let acc = &mut acc[..out_c];
    for b in 0..batches {
        let in_batch = &scratch.quantized[b * row..(b + 1) * row];
        let sf = scratch.scales[b];
        let off = -scratch.offsets[b];
        for oy in 0..out_h {
            for ox in 0..out_w {
                acc.fill(0);
                for_each_tap(oy, ox, in_h, in_w, k_h, k_w, p, |px, tap| {
                    let x = &in_batch[px * in_c..(px + 1) * in_c];
                    let w = &filter[tap * out_c..(tap + 1) * out_c];
                    for ((a_row, w_row), &xv) in
                        acc.chunks_exact_mut(dm).zip(w.chunks_exact(dm)).zip(x)
                    {
                        let xv = i32::from(xv) + off;
                        for (a, &wv) in a_row.iter_mut().zip(w_row) {
                            *a += i32::from(wv) * xv;
                        }
                    }
                });
                let out_off = ((b * out_h + oy) * out_w + ox) * out_c;
                for (o, (ov, &a)) in output[out_off..out_off + out_c]
                    .iter_mut()
                    .zip(acc.iter())
                    .enumerate()
                {
                    let fs = filter_scales[if filter_scales.len() == 1 { 0 } else { o }];
                    let v = a as f32 * (fs * sf) + bias.map_or(0.0, |bb| bb[o]);
                    *ov = p.activation.apply(v);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> f32 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        }
        fn vec(&mut self, n: usize) -> Vec<f32> {
            (0..n).map(|_| self.next()).collect()
        }
    }

    fn naive(
        input: &[f32],
        is: [usize; 4],
        filter: &[f32],
        fs: [usize; 4],
        bias: Option<&[f32]>,
        p: &DepthwiseParams,
        os: [usize; 4],
    ) -> Vec<f32> {
        let mut out = vec![0.0f32; os.iter().product()];
        for n in 0..os[0] {
            for oy in 0..os[1] {
                for ox in 0..os[2] {
                    for oc in 0..os[3] {
                        let ic = oc / p.depth_multiplier;
                        let mut s = 0.0f64;
                        for ky in 0..fs[1] {
                            for kx in 0..fs[2] {
                                let iy = (oy * p.stride_h + ky * p.dilation_h) as isize
                                    - p.pad_top as isize;
                                let ix = (ox * p.stride_w + kx * p.dilation_w) as isize
                                    - p.pad_left as isize;
                                if iy < 0 || ix < 0 || iy >= is[1] as isize || ix >= is[2] as isize
                                {
                                    continue;
                                }
                                let xi =
                                    ((n * is[1] + iy as usize) * is[2] + ix as usize) * is[3] + ic;
                                let wi = (ky * fs[2] + kx) * fs[3] + oc;
                                s += input[xi] as f64 * filter[wi] as f64;
                            }
                        }
                        let v = s as f32 + bias.map_or(0.0, |b| b[oc]);
                        out[((n * os[1] + oy) * os[2] + ox) * os[3] + oc] = p.activation.apply(v);
                    }
                }
            }
        }
        out
    }

    fn check(is: [usize; 4], k: [usize; 2], p: DepthwiseParams, os: [usize; 4], with_bias: bool) {
        let fs = [1, k[0], k[1], is[3] * p.depth_multiplier];
        let mut rng = Lcg(7 + is.iter().product::<usize>() as u64);
        let input = rng.vec(is.iter().product());
        let filter = rng.vec(fs.iter().product());
        let bias = rng.vec(fs[3]);
        let bias = if with_bias { Some(&bias[..]) } else { None };
        let mut out = vec![f32::NAN; os.iter().product()];
        depthwise_conv2d_f32(&input, is, &filter, fs, bias, &p, &mut out, os);
        let want = naive(&input, is, &filter, fs, bias, &p, os);
        for (i, (a, b)) in out.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                "at {i}: {a} vs {b}"
            );
        }
    }

    #[test]
    fn hand_computed() {
        // 1x2x2x1 input, 2x2 filter, dm 2, VALID: one output pixel with 2 channels.
        let input = [1.0, 2.0, 3.0, 4.0];
        // filter [1,2,2,2]: channel 0 weights 1,1,1,1; channel 1 weights 1,0,0,-1.
        let filter = [1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, -1.0];
        let p = DepthwiseParams {
            depth_multiplier: 2,
            ..Default::default()
        };
        let mut out = [0.0; 2];
        depthwise_conv2d_f32(
            &input,
            [1, 2, 2, 1],
            &filter,
            [1, 2, 2, 2],
            Some(&[0.0, 10.0]),
            &p,
            &mut out,
            [1, 1, 1, 2],
        );
        assert_eq!(out, [10.0, 7.0]);
    }

    #[test]
    fn stride1_same() {
        let p = DepthwiseParams {
            pad_top: 1,
            pad_left: 1,
            ..Default::default()
        };
        check([2, 5, 4, 3], [3, 3], p, [2, 5, 4, 3], true);
    }

    #[test]
    fn stride2_asymmetric_padding_dm2() {
        let p = DepthwiseParams {
            stride_h: 2,
            stride_w: 2,
            pad_top: 0,
            pad_left: 1,
            depth_multiplier: 2,
            activation: Activation::Relu6,
            ..Default::default()
        };
        check([1, 6, 7, 3], [3, 3], p, [1, 3, 4, 6], true);
    }

    #[test]
    fn dilation2_dm3() {
        let p = DepthwiseParams {
            dilation_h: 2,
            dilation_w: 2,
            pad_top: 2,
            pad_left: 2,
            depth_multiplier: 3,
            activation: Activation::Relu,
            ..Default::default()
        };
        check([1, 6, 6, 2], [3, 3], p, [1, 6, 6, 6], false);
    }
}
