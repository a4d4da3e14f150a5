//! TRANSPOSE_CONV (float32 and int8, NHWC), matching TFLite's reference `TransposeConv` (scatter
//! form).
//!
//! Filter layout is `[O, KH, KW, I]`. The output is zeroed, then every input pixel scatters
//! `in[n, iy, ix, i] * filter[o, kh, kw, i]` into `out[n, iy*sh - pad_top + kh,
//! ix*sw - pad_left + kw, o]` (out-of-range positions dropped); finally `bias` is added and the
//! activation applied. Each output element accumulates its terms in the reference order (input
//! row, input column, input channel).

use super::Activation;

/// Options of a TRANSPOSE_CONV; padding is already resolved to the top/left amounts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransposeConvParams {
    pub stride_h: usize,
    pub stride_w: usize,
    pub pad_top: usize,
    pub pad_left: usize,
    pub activation: Activation,
}

impl Default for TransposeConvParams {
    fn default() -> Self {
        TransposeConvParams {
            stride_h: 1,
            stride_w: 1,
            pad_top: 0,
            pad_left: 0,
            activation: Activation::None,
        }
    }
}

/// Transposed 2-D convolution. `input` is `[N, H, W, I]`, `filter` is `[O, KH, KW, I]`, `bias`
/// has `O` elements, `output` is `[N, OH, OW, O]`.
#[allow(clippy::too_many_arguments)]
pub fn transpose_conv_f32(
    input: &[f32],
    in_shape: [usize; 4],
    filter: &[f32],
    filter_shape: [usize; 4],
    bias: Option<&[f32]>,
    p: &TransposeConvParams,
    output: &mut [f32],
    out_shape: [usize; 4],
) {
    let [batches, in_h, in_w, in_c] = in_shape;
    let [out_c, k_h, k_w, f_in] = filter_shape;
    let [out_n, out_h, out_w, out_c2] = out_shape;
    debug_assert_eq!(batches, out_n);
    debug_assert_eq!(in_c, f_in);
    debug_assert_eq!(out_c, out_c2);
    debug_assert_eq!(input.len(), batches * in_h * in_w * in_c);
    debug_assert_eq!(filter.len(), out_c * k_h * k_w * f_in);
    debug_assert_eq!(output.len(), out_n * out_h * out_w * out_c);
    debug_assert!(bias.is_none_or(|b| b.len() == out_c));
    if output.is_empty() {
        return;
    }
    output.fill(0.0);
    let filter_o_stride = k_h * k_w * in_c;

    if in_c > 0 {
        for b in 0..batches {
            for iy in 0..in_h {
                for ix in 0..in_w {
                    let in_off = ((b * in_h + iy) * in_w + ix) * in_c;
                    let in_px = &input[in_off..in_off + in_c];
                    for ky in 0..k_h {
                        let y = iy * p.stride_h + ky;
                        if y < p.pad_top || y - p.pad_top >= out_h {
                            continue;
                        }
                        let oy = y - p.pad_top;
                        for kx in 0..k_w {
                            let x = ix * p.stride_w + kx;
                            if x < p.pad_left || x - p.pad_left >= out_w {
                                continue;
                            }
                            let ox = x - p.pad_left;
                            let out_off = ((b * out_h + oy) * out_w + ox) * out_c;
                            let out_px = &mut output[out_off..out_off + out_c];
                            let f_off = (ky * k_w + kx) * in_c;
                            for (o, acc) in out_px.iter_mut().enumerate() {
                                let fo = o * filter_o_stride + f_off;
                                let f_row = &filter[fo..fo + in_c];
                                let mut total = *acc;
                                for (&xv, &wv) in in_px.iter().zip(f_row) {
                                    total += xv * wv;
                                }
                                *acc = total;
                            }
                        }
                    }
                }
            }
        }
    }

    for px in output.chunks_exact_mut(out_c) {
        for (o, v) in px.iter_mut().enumerate() {
            let bias_value = bias.map_or(0.0, |bb| bb[o]);
            *v = p.activation.apply(*v + bias_value);
        }
    }
}

/// Int8 TRANSPOSE_CONV as TFLite's `reference_integer_ops::TransposeConv` (per-channel):
/// `acc[n, oy, ox, o] = sum (x + input_offset) * w` scattered as in [`transpose_conv_f32`] (exact
/// in i32, so the order does not matter), plus `bias[o]`, requantized with channel `o`'s
/// multiplier of `q`, clamped. `acc` is scratch of the output's length.
#[allow(clippy::too_many_arguments)]
pub fn transpose_conv_i8(
    input: &[i8],
    in_shape: [usize; 4],
    filter: &[i8],
    filter_shape: [usize; 4],
    bias: Option<&[i32]>,
    p: &TransposeConvParams,
    q: &crate::quant::OutputStage,
    acc: &mut [i32],
    output: &mut [i8],
    out_shape: [usize; 4],
) {
    let [batches, in_h, in_w, in_c] = in_shape;
    let [out_c, k_h, k_w, f_in] = filter_shape;
    let [out_n, out_h, out_w, out_c2] = out_shape;
    if batches != out_n
        || in_c != f_in
        || out_c != out_c2
        || input.len() != batches * in_h * in_w * in_c
        || filter.len() != out_c * k_h * k_w * f_in
        || output.len() != out_n * out_h * out_w * out_c
        || acc.len() < output.len()
        || bias.is_some_and(|b| b.len() != out_c)
        || q.multipliers.len() < out_c
        || output.is_empty()
    {
        return;
    }
    let acc = &mut acc[..output.len()];
    acc.fill(0);
    let filter_o_stride = k_h * k_w * in_c;
    for b in 0..batches {
        for iy in 0..in_h {
            for ix in 0..in_w {
                let in_off = ((b * in_h + iy) * in_w + ix) * in_c;
                let in_px = &input[in_off..in_off + in_c];
                for ky in 0..k_h {
                    let y = iy * p.stride_h + ky;
                    if y < p.pad_top || y - p.pad_top >= out_h {
                        continue;
                    }
                    let oy = y - p.pad_top;
                    for kx in 0..k_w {
                        let x = ix * p.stride_w + kx;
                        if x < p.pad_left || x - p.pad_left >= out_w {
                            continue;
                        }
                        let ox = x - p.pad_left;
                        let out_off = ((b * out_h + oy) * out_w + ox) * out_c;
                        let f_off = (ky * k_w + kx) * in_c;
                        for (o, a) in acc[out_off..out_off + out_c].iter_mut().enumerate() {
                            let fo = o * filter_o_stride + f_off;
                            let w = &filter[fo..fo + in_c];
                            *a = a.wrapping_add(super::conv::dot_offset(in_px, w, q.input_offset));
                        }
                    }
                }
            }
        }
    }
    for (opx, apx) in output.chunks_exact_mut(out_c).zip(acc.chunks_exact(out_c)) {
        for (o, (ov, &a)) in opx.iter_mut().zip(apx).enumerate() {
            *ov = q.apply(a.wrapping_add(bias.map_or(0, |bb| bb[o])), o);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    fn rand_vec(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1664525).wrapping_add(1013904223);
                (s >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
            })
            .collect()
    }

    /// Naive gather form: out[oy, ox, o] = sum over (iy, kh) with iy*sh - pad + kh == oy, ...
    #[allow(clippy::too_many_arguments)]
    fn naive(
        input: &[f32],
        is: [usize; 4],
        filter: &[f32],
        fs: [usize; 4],
        bias: Option<&[f32]>,
        p: &TransposeConvParams,
        os: [usize; 4],
    ) -> Vec<f32> {
        let mut out = vec![0.0; os.iter().product()];
        for n in 0..os[0] {
            for oy in 0..os[1] {
                for ox in 0..os[2] {
                    for o in 0..os[3] {
                        let mut s = 0.0f64;
                        for kh in 0..fs[1] {
                            let t = oy as isize + p.pad_top as isize - kh as isize;
                            if t < 0 || t % p.stride_h as isize != 0 {
                                continue;
                            }
                            let iy = (t / p.stride_h as isize) as usize;
                            if iy >= is[1] {
                                continue;
                            }
                            for kw in 0..fs[2] {
                                let t = ox as isize + p.pad_left as isize - kw as isize;
                                if t < 0 || t % p.stride_w as isize != 0 {
                                    continue;
                                }
                                let ix = (t / p.stride_w as isize) as usize;
                                if ix >= is[2] {
                                    continue;
                                }
                                for i in 0..is[3] {
                                    s += input[((n * is[1] + iy) * is[2] + ix) * is[3] + i] as f64
                                        * filter[((o * fs[1] + kh) * fs[2] + kw) * fs[3] + i]
                                            as f64;
                                }
                            }
                        }
                        let v = s as f32 + bias.map_or(0.0, |b| b[o]);
                        out[((n * os[1] + oy) * os[2] + ox) * os[3] + o] = p.activation.apply(v);
                    }
                }
            }
        }
        out
    }

    fn check(is: [usize; 4], fs: [usize; 4], p: TransposeConvParams, os: [usize; 4]) {
        let input = rand_vec(is.iter().product(), 5);
        let filter = rand_vec(fs.iter().product(), 6);
        let bias = rand_vec(fs[0], 7);
        for bias in [None, Some(&bias[..])] {
            let mut out = vec![f32::NAN; os.iter().product()];
            transpose_conv_f32(&input, is, &filter, fs, bias, &p, &mut out, os);
            let want = naive(&input, is, &filter, fs, bias, &p, os);
            for (i, (a, b)) in out.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                    "at {i}: {a} vs {b}"
                );
            }
        }
    }

    #[test]
    fn hand_computed_stride2() {
        // 1x2x2x1 input [1,2;3,4], 2x2 all-ones filter, stride 2, no padding: every input pixel
        // becomes a 2x2 block.
        let input = [1.0, 2.0, 3.0, 4.0];
        let filter = [1.0; 4];
        let p = TransposeConvParams {
            stride_h: 2,
            stride_w: 2,
            ..Default::default()
        };
        let mut out = [0.0; 16];
        transpose_conv_f32(
            &input,
            [1, 2, 2, 1],
            &filter,
            [1, 2, 2, 1],
            None,
            &p,
            &mut out,
            [1, 4, 4, 1],
        );
        #[rustfmt::skip]
        let want = [
            1.0, 1.0, 2.0, 2.0,
            1.0, 1.0, 2.0, 2.0,
            3.0, 3.0, 4.0, 4.0,
            3.0, 3.0, 4.0, 4.0,
        ];
        assert_eq!(out, want);
    }

    #[test]
    fn hand_computed_overlap_with_padding() {
        // 1x1x2x1 input [1, 2], 1x3 filter [1, 10, 100], stride 2, pad_left 1, out width 4:
        // full (unpadded) output is [1, 10, 102, 20, 200]; dropping 1 on the left -> width 4.
        let p = TransposeConvParams {
            stride_w: 2,
            pad_left: 1,
            ..Default::default()
        };
        let mut out = [0.0; 4];
        transpose_conv_f32(
            &[1.0, 2.0],
            [1, 1, 2, 1],
            &[1.0, 10.0, 100.0],
            [1, 1, 3, 1],
            Some(&[0.5]),
            &p,
            &mut out,
            [1, 1, 4, 1],
        );
        assert_eq!(out, [10.5, 102.5, 20.5, 200.5]);
    }

    #[test]
    fn stride1() {
        check(
            [2, 3, 4, 3],
            [2, 3, 3, 3],
            TransposeConvParams::default(),
            [2, 5, 6, 2],
        );
    }

    #[test]
    fn stride2_same_padding() {
        // SAME, stride 2, 3x3 kernel, in 3x4 -> out 6x8; total pad = (in-1)*s + k - out = 1
        // -> top/left 0 (TFLite puts the extra at the end), and asymmetric variant with 1.
        for pad in [0, 1] {
            let p = TransposeConvParams {
                stride_h: 2,
                stride_w: 2,
                pad_top: pad,
                pad_left: pad,
                activation: Activation::Relu,
            };
            check([1, 3, 4, 2], [3, 3, 3, 2], p, [1, 6, 8, 3]);
        }
    }

    #[test]
    fn stride_mixed_4x4_kernel_padding() {
        let p = TransposeConvParams {
            stride_h: 2,
            stride_w: 3,
            pad_top: 1,
            pad_left: 2,
            activation: Activation::Relu6,
        };
        check([2, 3, 3, 2], [4, 4, 4, 2], p, [2, 6, 8, 4]);
    }
}
