//! MAX_POOL_2D, AVERAGE_POOL_2D and L2_POOL_2D (float32, NHWC), matching TFLite's reference
//! kernels.
//!
//! Window positions that fall in the padding are skipped: max pooling ignores them and average
//! pooling divides by the number of in-bounds positions only. Max starts from `f32::MIN`
//! (TFLite's `numeric_limits<float>::lowest()`), so a window of only `-inf` gives `f32::MIN`,
//! as in TFLite.

use super::Activation;

/// Options of a 2-D pooling; padding is already resolved to the top/left amounts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool2dParams {
    pub filter_h: usize,
    pub filter_w: usize,
    pub stride_h: usize,
    pub stride_w: usize,
    pub pad_top: usize,
    pub pad_left: usize,
    pub activation: Activation,
}

impl Default for Pool2dParams {
    fn default() -> Self {
        Pool2dParams {
            filter_h: 1,
            filter_w: 1,
            stride_h: 1,
            stride_w: 1,
            pad_top: 0,
            pad_left: 0,
            activation: Activation::None,
        }
    }
}

/// The in-bounds filter range `[start, end)` along one axis for output coordinate `o`.
#[inline]
pub(crate) fn window(
    o: usize,
    stride: usize,
    pad: usize,
    filter: usize,
    in_size: usize,
) -> (usize, usize) {
    // origin = o*stride - pad (may be negative); valid k: 0 <= origin + k < in_size.
    let pos = o * stride;
    let start = pad.saturating_sub(pos).min(filter);
    let end = (in_size + pad).saturating_sub(pos).min(filter);
    (start, end.max(start))
}

#[allow(clippy::too_many_arguments)]
#[inline]
fn pool<F: Fn(&mut [f32], &[f32]), G: Fn(&mut [f32], usize)>(
    input: &[f32],
    in_shape: [usize; 4],
    p: &Pool2dParams,
    output: &mut [f32],
    out_shape: [usize; 4],
    init: f32,
    accumulate: F,
    finish: G,
) {
    let [batches, in_h, in_w, depth] = in_shape;
    let [out_n, out_h, out_w, out_c] = out_shape;
    debug_assert_eq!(batches, out_n);
    debug_assert_eq!(depth, out_c);
    debug_assert_eq!(input.len(), batches * in_h * in_w * depth);
    debug_assert_eq!(output.len(), out_n * out_h * out_w * out_c);
    debug_assert!(p.stride_h > 0 && p.stride_w > 0);
    if output.is_empty() {
        return;
    }
    for b in 0..batches {
        for oy in 0..out_h {
            let (fy0, fy1) = window(oy, p.stride_h, p.pad_top, p.filter_h, in_h);
            for ox in 0..out_w {
                let (fx0, fx1) = window(ox, p.stride_w, p.pad_left, p.filter_w, in_w);
                let out_off = ((b * out_h + oy) * out_w + ox) * depth;
                let out_px = &mut output[out_off..out_off + depth];
                out_px.fill(init);
                for fy in fy0..fy1 {
                    let iy = oy * p.stride_h + fy - p.pad_top;
                    for fx in fx0..fx1 {
                        let ix = ox * p.stride_w + fx - p.pad_left;
                        let in_off = ((b * in_h + iy) * in_w + ix) * depth;
                        accumulate(out_px, &input[in_off..in_off + depth]);
                    }
                }
                finish(out_px, (fy1 - fy0) * (fx1 - fx0));
            }
        }
    }
}

/// Max pooling.
pub fn max_pool_f32(
    input: &[f32],
    in_shape: [usize; 4],
    p: &Pool2dParams,
    output: &mut [f32],
    out_shape: [usize; 4],
) {
    let act = p.activation;
    pool(
        input,
        in_shape,
        p,
        output,
        out_shape,
        f32::MIN,
        |acc, row| {
            for (m, &x) in acc.iter_mut().zip(row) {
                // std::max(m, x), as a select with an unconditional store (a conditional
                // store keeps the loop scalar, branching on every value).
                *m = if *m < x { x } else { *m };
            }
        },
        |acc, _| {
            for v in acc.iter_mut() {
                *v = act.apply(*v);
            }
        },
    );
}

/// Average pooling; the divisor is the number of in-bounds window positions.
pub fn average_pool_f32(
    input: &[f32],
    in_shape: [usize; 4],
    p: &Pool2dParams,
    output: &mut [f32],
    out_shape: [usize; 4],
) {
    let act = p.activation;
    pool(
        input,
        in_shape,
        p,
        output,
        out_shape,
        0.0,
        |acc, row| {
            for (s, &x) in acc.iter_mut().zip(row) {
                *s += x;
            }
        },
        |acc, count| {
            // TFLite returns an error for an empty window; we leave the (zero) sum there.
            let count = count.max(1) as f32;
            for v in acc.iter_mut() {
                *v = act.apply(*v / count);
            }
        },
    );
}

/// L2 pooling (TFLite's L2_POOL_2D, float only): `sqrt(sum of squares / count)` over the
/// in-bounds window positions, then the fused activation.
pub fn l2_pool_f32(
    input: &[f32],
    in_shape: [usize; 4],
    p: &Pool2dParams,
    output: &mut [f32],
    out_shape: [usize; 4],
) {
    let act = p.activation;
    pool(
        input,
        in_shape,
        p,
        output,
        out_shape,
        0.0,
        |acc, row| {
            for (s, &x) in acc.iter_mut().zip(row) {
                *s += x * x;
            }
        },
        |acc, count| {
            let count = count.max(1) as f32;
            for v in acc.iter_mut() {
                *v = act.apply(crate::math::sqrtf(*v / count));
            }
        },
    );
}

/// Int8 and int16 pooling (TFLite `reference_integer_ops::AveragePool` / `MaxPool`, and their
/// int16 forms): input and output share their quantization. Average rounds half away from zero
/// (`(acc ± count/2) / count`); both clamp to `[act_min, act_max]`.
#[allow(clippy::too_many_arguments)]
pub fn pool_quantized<T: super::Quantized>(
    max: bool,
    input: &[T],
    in_shape: [usize; 4],
    p: &Pool2dParams,
    act_min: i32,
    act_max: i32,
    output: &mut [T],
    out_shape: [usize; 4],
) {
    if max {
        pool_quantized_by::<T, true>(input, in_shape, p, act_min, act_max, output, out_shape)
    } else {
        pool_quantized_by::<T, false>(input, in_shape, p, act_min, act_max, output, out_shape)
    }
}

/// Channels of one pass of [`pool_quantized_by`] (its accumulators live on the stack).
const POOL_CHANNELS: usize = 64;

/// [`pool_quantized`] for max (`MAX`) or average pooling: per output pixel, up to
/// [`POOL_CHANNELS`] channels at a time accumulate every window position's contiguous run of
/// channels (a loop over channels, which vectorizes), then round and clamp.
#[allow(clippy::too_many_arguments)]
fn pool_quantized_by<T: super::Quantized, const MAX: bool>(
    input: &[T],
    in_shape: [usize; 4],
    p: &Pool2dParams,
    act_min: i32,
    act_max: i32,
    output: &mut [T],
    out_shape: [usize; 4],
) {
    let [batches, in_h, in_w, depth] = in_shape;
    let [_, out_h, out_w, _] = out_shape;
    if output.is_empty() {
        return;
    }
    let mut acc = [0i32; POOL_CHANNELS];
    for b in 0..batches {
        for oy in 0..out_h {
            let (fy0, fy1) = window(oy, p.stride_h, p.pad_top, p.filter_h, in_h);
            for ox in 0..out_w {
                let (fx0, fx1) = window(ox, p.stride_w, p.pad_left, p.filter_w, in_w);
                let out_off = ((b * out_h + oy) * out_w + ox) * depth;
                let count = ((fy1 - fy0) * (fx1 - fx0)) as i32;
                for c0 in (0..depth).step_by(POOL_CHANNELS) {
                    let cn = (depth - c0).min(POOL_CHANNELS);
                    let acc = &mut acc[..cn];
                    acc.fill(if MAX { T::MIN } else { 0 });
                    for fy in fy0..fy1 {
                        let iy = oy * p.stride_h + fy - p.pad_top;
                        for fx in fx0..fx1 {
                            let ix = ox * p.stride_w + fx - p.pad_left;
                            let at = ((b * in_h + iy) * in_w + ix) * depth + c0;
                            for (a, v) in acc.iter_mut().zip(&input[at..at + cn]) {
                                *a = if MAX { (*a).max(v.get()) } else { *a + v.get() };
                            }
                        }
                    }
                    let out = &mut output[out_off + c0..out_off + c0 + cn];
                    for (o, &a) in out.iter_mut().zip(acc.iter()) {
                        let v = if MAX || count == 0 {
                            a
                        } else if a > 0 {
                            (a + count / 2) / count
                        } else {
                            (a - count / 2) / count
                        };
                        *o = T::saturate(v.clamp(act_min, act_max));
                    }
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

    /// Naive pooling with signed coordinates.
    fn naive(
        input: &[f32],
        is: [usize; 4],
        p: &Pool2dParams,
        os: [usize; 4],
        max: bool,
    ) -> Vec<f32> {
        let mut out = vec![0.0; os.iter().product()];
        for n in 0..os[0] {
            for oy in 0..os[1] {
                for ox in 0..os[2] {
                    for c in 0..os[3] {
                        let mut vals = Vec::new();
                        for fy in 0..p.filter_h {
                            for fx in 0..p.filter_w {
                                let iy = (oy * p.stride_h + fy) as isize - p.pad_top as isize;
                                let ix = (ox * p.stride_w + fx) as isize - p.pad_left as isize;
                                if iy >= 0 && ix >= 0 && iy < is[1] as isize && ix < is[2] as isize
                                {
                                    vals.push(
                                        input[((n * is[1] + iy as usize) * is[2] + ix as usize)
                                            * is[3]
                                            + c],
                                    );
                                }
                            }
                        }
                        let v = if max {
                            vals.iter().cloned().fold(f32::MIN, f32::max)
                        } else {
                            (vals.iter().map(|&v| v as f64).sum::<f64>() / vals.len() as f64) as f32
                        };
                        out[((n * os[1] + oy) * os[2] + ox) * os[3] + c] = p.activation.apply(v);
                    }
                }
            }
        }
        out
    }

    fn check(is: [usize; 4], p: Pool2dParams, os: [usize; 4]) {
        let mut s = 99u32 + is[1] as u32;
        let input: Vec<f32> = (0..is.iter().product::<usize>())
            .map(|_| {
                s = s.wrapping_mul(1664525).wrapping_add(1013904223);
                (s >> 8) as f32 / (1u32 << 24) as f32 * 8.0 - 4.0
            })
            .collect();
        for max in [false, true] {
            let mut out = vec![f32::NAN; os.iter().product()];
            if max {
                max_pool_f32(&input, is, &p, &mut out, os);
            } else {
                average_pool_f32(&input, is, &p, &mut out, os);
            }
            let want = naive(&input, is, &p, os, max);
            for (i, (a, b)) in out.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                    "max={max} at {i}: {a} vs {b}"
                );
            }
        }
    }

    #[test]
    fn average_at_padded_borders_excludes_padding() {
        // 1x3x3x1 input 1..9, 3x3 window, stride 1, SAME (pad 1).
        let input: Vec<f32> = (1..=9).map(|v| v as f32).collect();
        let p = Pool2dParams {
            filter_h: 3,
            filter_w: 3,
            pad_top: 1,
            pad_left: 1,
            ..Default::default()
        };
        let mut out = [0.0; 9];
        average_pool_f32(&input, [1, 3, 3, 1], &p, &mut out, [1, 3, 3, 1]);
        let want = [
            12.0 / 4.0,
            21.0 / 6.0,
            16.0 / 4.0,
            27.0 / 6.0,
            5.0,
            33.0 / 6.0,
            24.0 / 4.0,
            39.0 / 6.0,
            28.0 / 4.0,
        ];
        for (a, b) in out.iter().zip(want) {
            assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        }
        let mut mx = [0.0; 9];
        max_pool_f32(&input, [1, 3, 3, 1], &p, &mut mx, [1, 3, 3, 1]);
        assert_eq!(mx, [5.0, 6.0, 6.0, 8.0, 9.0, 9.0, 8.0, 9.0, 9.0]);
    }

    #[test]
    fn max_ignores_padding_with_negative_values() {
        let input = [-5.0, -6.0, -7.0, -8.0];
        let p = Pool2dParams {
            filter_h: 2,
            filter_w: 2,
            pad_top: 1,
            pad_left: 1,
            ..Default::default()
        };
        let mut out = [0.0; 9];
        max_pool_f32(&input, [1, 2, 2, 1], &p, &mut out, [1, 3, 3, 1]);
        assert_eq!(out, [-5.0, -5.0, -6.0, -5.0, -5.0, -6.0, -7.0, -7.0, -8.0]);
    }

    #[test]
    fn stride2_valid_and_same_asymmetric() {
        let p = Pool2dParams {
            filter_h: 2,
            filter_w: 2,
            stride_h: 2,
            stride_w: 2,
            ..Default::default()
        };
        check([2, 4, 6, 3], p, [2, 2, 3, 3]);
        // SAME 3x3 stride 2 on 6x7: out 3x4, pad total h=1 (top 0), w=2 (left 1): extra
        // bottom/right padding implied by the output size.
        let p = Pool2dParams {
            filter_h: 3,
            filter_w: 3,
            stride_h: 2,
            stride_w: 2,
            pad_top: 0,
            pad_left: 1,
            activation: Activation::Relu,
        };
        check([1, 6, 7, 2], p, [1, 3, 4, 2]);
    }

    #[test]
    fn large_padding_and_activation() {
        let p = Pool2dParams {
            filter_h: 4,
            filter_w: 3,
            stride_h: 1,
            stride_w: 3,
            pad_top: 2,
            pad_left: 2,
            activation: Activation::ReluN1To1,
        };
        check([1, 5, 5, 4], p, [1, 6, 3, 4]);
    }

    /// Per channel, per window position, as TFLite's reference integer pooling.
    #[allow(clippy::too_many_arguments)]
    fn naive_quantized(
        max: bool,
        input: &[i8],
        [batches, in_h, in_w, depth]: [usize; 4],
        p: &Pool2dParams,
        act_min: i32,
        act_max: i32,
        [_, out_h, out_w, _]: [usize; 4],
    ) -> Vec<i8> {
        let mut out = vec![0i8; batches * out_h * out_w * depth];
        for b in 0..batches {
            for oy in 0..out_h {
                for ox in 0..out_w {
                    for c in 0..depth {
                        let (mut acc, mut count) = (if max { -128 } else { 0 }, 0i32);
                        for fy in 0..p.filter_h {
                            for fx in 0..p.filter_w {
                                let iy = (oy * p.stride_h + fy) as isize - p.pad_top as isize;
                                let ix = (ox * p.stride_w + fx) as isize - p.pad_left as isize;
                                if iy < 0 || ix < 0 || iy >= in_h as isize || ix >= in_w as isize {
                                    continue;
                                }
                                let at = ((b * in_h + iy as usize) * in_w + ix as usize) * depth;
                                let v = i32::from(input[at + c]);
                                acc = if max { acc.max(v) } else { acc + v };
                                count += 1;
                            }
                        }
                        if !max && count > 0 {
                            let half = if acc > 0 { count / 2 } else { -(count / 2) };
                            acc = (acc + half) / count;
                        }
                        out[((b * out_h + oy) * out_w + ox) * depth + c] =
                            acc.clamp(act_min, act_max) as i8;
                    }
                }
            }
        }
        out
    }

    #[test]
    fn quantized_matches_the_per_channel_loop() {
        // Channel counts below, at and past one pass of POOL_CHANNELS.
        for (depth, pad, act) in [(3, 1, (-128, 127)), (64, 0, (-20, 127)), (130, 1, (0, 90))] {
            let p = Pool2dParams {
                filter_h: 3,
                filter_w: 3,
                stride_h: 2,
                stride_w: 2,
                pad_top: pad,
                pad_left: pad,
                activation: Activation::None,
            };
            let is = [2, 7, 6, depth];
            let os = [
                2,
                (7 + 2 * pad - 3) / 2 + 1,
                (6 + 2 * pad - 3) / 2 + 1,
                depth,
            ];
            let mut s = 7u32 + depth as u32;
            let input: Vec<i8> = (0..is.iter().product::<usize>())
                .map(|_| {
                    s = s.wrapping_mul(1664525).wrapping_add(1013904223);
                    (s >> 24) as i8
                })
                .collect();
            for max in [false, true] {
                let mut out = vec![0i8; os.iter().product()];
                pool_quantized(max, &input, is, &p, act.0, act.1, &mut out, os);
                let want = naive_quantized(max, &input, is, &p, act.0, act.1, os);
                assert_eq!(out, want, "max={max} depth={depth}");
            }
        }
    }
}
