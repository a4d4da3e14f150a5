//! RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR (float32 and int8, NHWC), matching TFLite's
//! reference kernels (`reference_ops::ResizeBilinear`, `ResizeBilinearInteger` for int8,
//! `reference_ops::ResizeNearestNeighbor`).
//!
//! Scale per axis: `in / out`, or `(in - 1) / (out - 1)` with `align_corners` (when `out > 1`),
//! computed in f32.
//!
//! Bilinear: source `s = (o + 0.5) * scale - 0.5` with `half_pixel_centers`, else `o * scale`;
//! `lo = max(floor(s), 0)`, `hi = min(ceil(s), in - 1)`, and the weights use `s - lo` (not
//! `s - floor(s)`): so at the top/left border, where `s < 0` and `lo = hi = 0`, the two weights
//! are `1 - s` and `s` on the same pixel and still sum to that pixel.
//!
//! Nearest: `s = (o + offset) * scale` with `offset = 0.5` for `half_pixel_centers`, else 0;
//! index `round(s)` (half away from zero) with `align_corners`, else `floor(s)`; clamped to
//! `in - 1` (and to 0 with `half_pixel_centers`).

use crate::math::{floorf, roundf};

#[inline]
fn scale(in_size: usize, out_size: usize, align_corners: bool) -> f32 {
    if align_corners && out_size > 1 {
        (in_size - 1) as f32 / (out_size - 1) as f32
    } else {
        in_size as f32 / out_size as f32
    }
}

/// TFLite's `ComputeInterpolationValues`: (scaled value, lower index, upper index).
#[inline]
fn interpolation_values(
    value: usize,
    scale: f32,
    half_pixel_centers: bool,
    in_size: usize,
) -> (f32, usize, usize) {
    let s = if half_pixel_centers {
        (value as f32 + 0.5) * scale - 0.5
    } else {
        value as f32 * scale
    };
    let fl = floorf(s);
    let ce = if fl == s { fl } else { fl + 1.0 };
    let last = in_size as i64 - 1;
    let lower = (fl as i64).max(0);
    let upper = (ce as i64).min(last);
    // For consistent shapes in_size >= 1, so both are in [0, in_size).
    (
        s,
        lower.clamp(0, last.max(0)) as usize,
        upper.max(0) as usize,
    )
}

/// Bilinear resize of `[N, H, W, C]` to `[N, OH, OW, C]`.
pub fn resize_bilinear_f32(
    input: &[f32],
    in_shape: [usize; 4],
    align_corners: bool,
    half_pixel_centers: bool,
    output: &mut [f32],
    out_shape: [usize; 4],
) {
    let [batches, in_h, in_w, depth] = in_shape;
    let [out_n, out_h, out_w, out_c] = out_shape;
    debug_assert_eq!(batches, out_n);
    debug_assert_eq!(depth, out_c);
    debug_assert_eq!(input.len(), batches * in_h * in_w * depth);
    debug_assert_eq!(output.len(), out_n * out_h * out_w * out_c);
    if output.is_empty() || input.is_empty() {
        return;
    }
    let h_scale = scale(in_h, out_h, align_corners);
    let w_scale = scale(in_w, out_w, align_corners);
    let row = in_w * depth;
    for b in 0..batches {
        let in_b = &input[b * in_h * row..(b + 1) * in_h * row];
        for y in 0..out_h {
            let (iy, y0, y1) = interpolation_values(y, h_scale, half_pixel_centers, in_h);
            let dy = iy - y0 as f32;
            for x in 0..out_w {
                let (ix, x0, x1) = interpolation_values(x, w_scale, half_pixel_centers, in_w);
                let dx = ix - x0 as f32;
                let p00 = &in_b[y0 * row + x0 * depth..][..depth];
                let p10 = &in_b[y1 * row + x0 * depth..][..depth];
                let p01 = &in_b[y0 * row + x1 * depth..][..depth];
                let p11 = &in_b[y1 * row + x1 * depth..][..depth];
                let out_off = ((b * out_h + y) * out_w + x) * depth;
                let out_px = &mut output[out_off..out_off + depth];
                for c in 0..depth {
                    // Same association as the reference expression.
                    out_px[c] = p00[c] * (1.0 - dy) * (1.0 - dx)
                        + p10[c] * dy * (1.0 - dx)
                        + p01[c] * (1.0 - dy) * dx
                        + p11[c] * dy * dx;
                }
            }
        }
    }
}

/// TFLite's `GetNearestNeighbor`.
#[inline]
fn nearest_index(
    value: usize,
    in_size: usize,
    out_size: usize,
    align_corners: bool,
    half_pixel_centers: bool,
) -> usize {
    let scale = scale(in_size, out_size, align_corners);
    let offset = if half_pixel_centers { 0.5 } else { 0.0 };
    let s = (value as f32 + offset) * scale;
    let idx = if align_corners { roundf(s) } else { floorf(s) } as i64;
    let idx = idx.min(in_size as i64 - 1);
    // Without half_pixel_centers idx is never negative; clamp anyway (TFLite only clamps with
    // half_pixel_centers, which is the only case where it matters).
    idx.max(0) as usize
}

/// Nearest-neighbour resize of `[N, H, W, C]` to `[N, OH, OW, C]` (any element type: values
/// are copied, so int8 needs the same input and output quantization).
pub fn resize_nearest<T: Copy>(
    input: &[T],
    in_shape: [usize; 4],
    align_corners: bool,
    half_pixel_centers: bool,
    output: &mut [T],
    out_shape: [usize; 4],
) {
    let [batches, in_h, in_w, depth] = in_shape;
    let [out_n, out_h, out_w, out_c] = out_shape;
    debug_assert_eq!(batches, out_n);
    debug_assert_eq!(depth, out_c);
    debug_assert_eq!(input.len(), batches * in_h * in_w * depth);
    debug_assert_eq!(output.len(), out_n * out_h * out_w * out_c);
    if output.is_empty() || input.is_empty() {
        return;
    }
    let row = in_w * depth;
    for b in 0..batches {
        let in_b = &input[b * in_h * row..(b + 1) * in_h * row];
        for y in 0..out_h {
            let iy = nearest_index(y, in_h, out_h, align_corners, half_pixel_centers);
            for x in 0..out_w {
                let ix = nearest_index(x, in_w, out_w, align_corners, half_pixel_centers);
                let src = &in_b[iy * row + ix * depth..][..depth];
                let out_off = ((b * out_h + y) * out_w + x) * depth;
                output[out_off..out_off + depth].copy_from_slice(src);
            }
        }
    }
}

/// TFLite's 10-bit fixed-point scale (`ResizeBilinearInteger`): `round(1024 * in / out)`, or
/// `(in - 1) / (out - 1)` with `align_corners` (when `out > 1`).
#[inline]
fn scale_10(in_size: usize, out_size: usize, align_corners: bool) -> i64 {
    let (i, o) = if align_corners && out_size > 1 {
        (in_size as i64 - 1, out_size as i64 - 1)
    } else {
        (in_size as i64, out_size as i64)
    };
    ((1 << 10) * i + o / 2) / o
}

/// TFLite's integer `ComputeInterpolationValues`: (scaled value in 1/1024 pixels, lower index,
/// upper index). Divisions truncate toward zero, as in C.
#[inline]
fn interpolation_values_10(
    value: usize,
    scale_10: i64,
    half_pixel_centers: bool,
    in_size: usize,
) -> (i64, usize, usize) {
    let v = value as i64;
    let s = if half_pixel_centers {
        v * scale_10 + scale_10 / 2 - (1 << 9)
    } else {
        v * scale_10
    };
    let last = in_size as i64 - 1;
    let lower = (s / (1 << 10)).max(0).min(last.max(0));
    let upper = ((s + (1 << 10) - 1) / (1 << 10)).min(last).max(0);
    (s, lower as usize, upper as usize)
}

/// Int8 bilinear resize as TFLite's `reference_ops::ResizeBilinearInteger` (which LiteRT's
/// optimized kernel calls too): positions and weights in 1/1024 pixels, the four products
/// summed in 1/2^20 units and rounded half away from zero. Values are interpolated as stored,
/// so the input and output must share their quantization.
pub fn resize_bilinear_i8(
    input: &[i8],
    in_shape: [usize; 4],
    align_corners: bool,
    half_pixel_centers: bool,
    output: &mut [i8],
    out_shape: [usize; 4],
) {
    let [batches, in_h, in_w, depth] = in_shape;
    let [out_n, out_h, out_w, out_c] = out_shape;
    if batches != out_n
        || depth != out_c
        || input.len() != batches * in_h * in_w * depth
        || output.len() != out_n * out_h * out_w * out_c
        || output.is_empty()
        || input.is_empty()
    {
        return;
    }
    let h_scale = scale_10(in_h, out_h, align_corners);
    let w_scale = scale_10(in_w, out_w, align_corners);
    let row = in_w * depth;
    const ONE: i64 = 1 << 10;
    for b in 0..batches {
        let in_b = &input[b * in_h * row..(b + 1) * in_h * row];
        for y in 0..out_h {
            let (iy, y0, y1) = interpolation_values_10(y, h_scale, half_pixel_centers, in_h);
            let dy = iy - ONE * y0 as i64;
            for x in 0..out_w {
                let (ix, x0, x1) = interpolation_values_10(x, w_scale, half_pixel_centers, in_w);
                let dx = ix - ONE * x0 as i64;
                let p00 = &in_b[y0 * row + x0 * depth..][..depth];
                let p10 = &in_b[y1 * row + x0 * depth..][..depth];
                let p01 = &in_b[y0 * row + x1 * depth..][..depth];
                let p11 = &in_b[y1 * row + x1 * depth..][..depth];
                let out_off = ((b * out_h + y) * out_w + x) * depth;
                let out_px = &mut output[out_off..out_off + depth];
                for c in 0..depth {
                    let v = i64::from(p00[c]) * (ONE - dy) * (ONE - dx)
                        + i64::from(p10[c]) * dy * (ONE - dx)
                        + i64::from(p01[c]) * (ONE - dy) * dx
                        + i64::from(p11[c]) * dy * dx;
                    let round = if v > 0 { 1 << 19 } else { -(1 << 19) };
                    out_px[c] = ((v + round) / (1 << 20)).clamp(-128, 127) as i8;
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

    fn close_all(got: &[f32], want: &[f32]) {
        assert_eq!(got.len(), want.len());
        for (i, (a, b)) in got.iter().zip(want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-6 * (1.0 + b.abs()),
                "at {i}: {got:?} vs {want:?}"
            );
        }
    }

    const IN2X2: [f32; 4] = [1.0, 2.0, 3.0, 4.0];

    #[test]
    fn bilinear_2x2_to_4x4_default() {
        // scale 0.5: sources 0, 0.5, 1, 1.5 (1.5 -> lo 1, hi 1).
        let mut out = [0.0; 16];
        resize_bilinear_f32(&IN2X2, [1, 2, 2, 1], false, false, &mut out, [1, 4, 4, 1]);
        #[rustfmt::skip]
        let want = [
            1.0, 1.5, 2.0, 2.0,
            2.0, 2.5, 3.0, 3.0,
            3.0, 3.5, 4.0, 4.0,
            3.0, 3.5, 4.0, 4.0,
        ];
        close_all(&out, &want);
    }

    #[test]
    fn bilinear_2x2_to_4x4_align_corners() {
        // scale 1/3: sources 0, 1/3, 2/3, 1; value = 1 + sx + 2*sy.
        let mut out = [0.0; 16];
        resize_bilinear_f32(&IN2X2, [1, 2, 2, 1], true, false, &mut out, [1, 4, 4, 1]);
        let t = 1.0 / 3.0;
        let mut want = [0.0f32; 16];
        for y in 0..4 {
            for x in 0..4 {
                want[y * 4 + x] = 1.0 + x as f32 * t + 2.0 * y as f32 * t;
            }
        }
        close_all(&out, &want);
    }

    #[test]
    fn bilinear_2x2_to_4x4_half_pixel() {
        // scale 0.5: sources -0.25, 0.25, 0.75, 1.25; -0.25 -> weights 1.25/-0.25 on pixel 0,
        // 1.25 -> lo = hi = 1: effective positions 0, 0.25, 0.75, 1.
        let mut out = [0.0; 16];
        resize_bilinear_f32(&IN2X2, [1, 2, 2, 1], false, true, &mut out, [1, 4, 4, 1]);
        #[rustfmt::skip]
        let want = [
            1.0, 1.25, 1.75, 2.0,
            1.5, 1.75, 2.25, 2.5,
            2.5, 2.75, 3.25, 3.5,
            3.0, 3.25, 3.75, 4.0,
        ];
        close_all(&out, &want);
    }

    #[test]
    fn bilinear_multichannel_batch_and_downscale() {
        // 2 batches, 2 channels, 3x4 -> 2x3 default: channel 1 is channel 0 * 10, batch 1 is
        // batch 0 + 100; each output must follow.
        let (h, w) = (3, 4);
        let mut input = Vec::new();
        for b in 0..2 {
            for y in 0..h {
                for x in 0..w {
                    let v = (y * w + x) as f32 + 100.0 * b as f32;
                    input.push(v);
                    input.push(v * 10.0);
                }
            }
        }
        let mut out = vec![0.0; 2 * 2 * 3 * 2];
        resize_bilinear_f32(&input, [2, h, w, 2], false, false, &mut out, [2, 2, 3, 2]);
        // y scale 1.5: sources 0, 1.5; x scale 4/3: sources 0, 4/3, 8/3.
        // value(sy, sx) = sy * 4 + sx (bilinear is exact on linear data).
        for b in 0..2 {
            for (yi, sy) in [0.0f32, 1.5].iter().enumerate() {
                for (xi, sx) in [0.0f32, 4.0 / 3.0, 8.0 / 3.0].iter().enumerate() {
                    let v = sy * 4.0 + sx + 100.0 * b as f32;
                    let o = ((b * 2 + yi) * 3 + xi) * 2;
                    assert!((out[o] - v).abs() < 1e-4, "{} vs {v}", out[o]);
                    assert!((out[o + 1] - 10.0 * v).abs() < 1e-3);
                }
            }
        }
    }

    #[test]
    fn bilinear_identity_and_align_corners_keeps_corners() {
        let input: Vec<f32> = (0..20).map(|v| (v as f32 * 0.7).sin()).collect();
        for hp in [false, true] {
            let mut out = vec![0.0; 20];
            resize_bilinear_f32(&input, [1, 4, 5, 1], false, hp, &mut out, [1, 4, 5, 1]);
            close_all(&out, &input);
        }
        let mut out = vec![0.0; 7 * 9];
        resize_bilinear_f32(&input, [1, 4, 5, 1], true, false, &mut out, [1, 7, 9, 1]);
        assert_eq!(out[0], input[0]);
        assert!((out[8] - input[4]).abs() < 1e-6);
        assert!((out[6 * 9] - input[15]).abs() < 1e-6);
        assert!((out[6 * 9 + 8] - input[19]).abs() < 1e-6);
    }

    fn nearest_1d(in_w: usize, out_w: usize, ac: bool, hp: bool) -> Vec<f32> {
        let input: Vec<f32> = (0..in_w).map(|v| v as f32).collect();
        let mut out = vec![0.0; out_w];
        resize_nearest(&input, [1, 1, in_w, 1], ac, hp, &mut out, [1, 1, out_w, 1]);
        out
    }

    #[test]
    fn nearest_2x2_to_4x4_all_modes() {
        // floor(o/2), round(o/3) and floor((o+0.5)/2) all give 0,0,1,1.
        for (ac, hp) in [(false, false), (true, false), (false, true)] {
            let mut out = [0.0; 16];
            resize_nearest(&IN2X2, [1, 2, 2, 1], ac, hp, &mut out, [1, 4, 4, 1]);
            #[rustfmt::skip]
            let want = [
                1.0, 1.0, 2.0, 2.0,
                1.0, 1.0, 2.0, 2.0,
                3.0, 3.0, 4.0, 4.0,
                3.0, 3.0, 4.0, 4.0,
            ];
            assert_eq!(out, want, "ac={ac} hp={hp}");
        }
    }

    #[test]
    fn nearest_3_to_5_modes_differ() {
        // scale 0.6: floor(0, .6, 1.2, 1.8, 2.4)
        assert_eq!(nearest_1d(3, 5, false, false), [0.0, 0.0, 1.0, 1.0, 2.0]);
        // scale 0.5: round(0, .5, 1, 1.5, 2), half away from zero
        assert_eq!(nearest_1d(3, 5, true, false), [0.0, 1.0, 1.0, 2.0, 2.0]);
        // scale 0.6: floor(.3, .9, 1.5, 2.1, 2.7)
        assert_eq!(nearest_1d(3, 5, false, true), [0.0, 0.0, 1.0, 2.0, 2.0]);
        // both: round((o + .5) * .5) = round(.25, .75, 1.25, 1.75, 2.25), clamped to 2
        assert_eq!(nearest_1d(3, 5, true, true), [0.0, 1.0, 1.0, 2.0, 2.0]);
        // downscale 5 -> 2: floor(0, 2.5) ; half: floor(1.25, 3.75) ; align: round(0, 4)
        assert_eq!(nearest_1d(5, 2, false, false), [0.0, 2.0]);
        assert_eq!(nearest_1d(5, 2, false, true), [1.0, 3.0]);
        assert_eq!(nearest_1d(5, 2, true, false), [0.0, 4.0]);
    }

    #[test]
    fn nearest_multichannel_copies_pixels() {
        let input: Vec<f32> = (0..2 * 2 * 3).map(|v| v as f32).collect(); // [1,2,2,3]
        let mut out = vec![0.0; 3 * 3 * 3];
        resize_nearest(&input, [1, 2, 2, 3], false, false, &mut out, [1, 3, 3, 3]);
        // scale 2/3: floor(0, .667, 1.333) = 0, 0, 1
        let idx = [0usize, 0, 1];
        for y in 0..3 {
            for x in 0..3 {
                let src = (idx[y] * 2 + idx[x]) * 3;
                assert_eq!(out[(y * 3 + x) * 3..][..3], input[src..src + 3]);
            }
        }
    }
}
