//! CONV_2D (float32, NHWC), matching TFLite's reference `Conv`.
//!
//! Filter layout is `[O, KH, KW, I]`. Grouped convolution is supported: `groups = in_C / I`, and
//! output channel `o` reads input channels `[g*I, (g+1)*I)` with `g = o / (O / groups)`.
//!
//! Per output element the accumulation order is the reference one (filter row, filter column,
//! input channel), starting from zero, then `bias` is added and the activation applied.

use core::ops::AddAssign;

use super::{Activation, Quantized};
use crate::quant::OutputStage;

/// Options of a CONV_2D; padding is already resolved to the top/left amounts (any extra
/// bottom/right padding is implied by the output size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dParams {
    pub stride_h: usize,
    pub stride_w: usize,
    pub dilation_h: usize,
    pub dilation_w: usize,
    pub pad_top: usize,
    pub pad_left: usize,
    pub activation: Activation,
}

impl Default for Conv2dParams {
    fn default() -> Self {
        Conv2dParams {
            stride_h: 1,
            stride_w: 1,
            dilation_h: 1,
            dilation_w: 1,
            pad_top: 0,
            pad_left: 0,
            activation: Activation::None,
        }
    }
}

/// 2-D convolution. `input` is `in_shape` = `[N, H, W, C]`, `filter` is `filter_shape` =
/// `[O, KH, KW, I]` with `C % I == 0`, `bias` has `O` elements, `output` is `out_shape` =
/// `[N, OH, OW, O]`.
#[allow(clippy::too_many_arguments)]
pub fn conv2d_f32(
    input: &[f32],
    in_shape: [usize; 4],
    filter: &[f32],
    filter_shape: [usize; 4],
    bias: Option<&[f32]>,
    p: &Conv2dParams,
    output: &mut [f32],
    out_shape: [usize; 4],
) {
    let [batches, in_h, in_w, in_c] = in_shape;
    let [out_c, k_h, k_w, f_in] = filter_shape;
    let [out_n, out_h, out_w, out_c2] = out_shape;
    debug_assert_eq!(batches, out_n);
    debug_assert_eq!(out_c, out_c2);
    debug_assert!(f_in > 0 && in_c % f_in == 0);
    debug_assert_eq!(input.len(), batches * in_h * in_w * in_c);
    debug_assert_eq!(filter.len(), out_c * k_h * k_w * f_in);
    debug_assert_eq!(output.len(), out_n * out_h * out_w * out_c);
    debug_assert!(bias.is_none_or(|b| b.len() == out_c));
    debug_assert!(p.stride_h > 0 && p.stride_w > 0 && p.dilation_h > 0 && p.dilation_w > 0);
    if output.is_empty() {
        return;
    }
    if f_in == 0 || in_c == 0 {
        // Empty reduction: every output is just bias + activation.
        for px in output.chunks_exact_mut(out_c) {
            for (o, v) in px.iter_mut().enumerate() {
                *v = p.activation.apply(bias.map_or(0.0, |b| b[o]));
            }
        }
        return;
    }
    let groups = in_c / f_in;
    let out_per_group = (out_c / groups.max(1)).max(1);
    let filter_o_stride = k_h * k_w * f_in;

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
                        let f_off = (ky * k_w + kx) * f_in;
                        for (o, acc) in out_px.iter_mut().enumerate() {
                            let g = o / out_per_group;
                            let in_row = &in_px[g * f_in..(g + 1) * f_in];
                            let fo = o * filter_o_stride + f_off;
                            let f_row = &filter[fo..fo + f_in];
                            let mut total = *acc;
                            for (&xv, &wv) in in_row.iter().zip(f_row) {
                                total += xv * wv;
                            }
                            *acc = total;
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

/// How the float input of a hybrid (weights-only int8) kernel is quantized per batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HybridInput {
    /// `SymmetricQuantizeFloats` (zero point 0, range ±127).
    Symmetric,
    /// `AsymmetricQuantizeFloats` (a zero point per batch).
    Asymmetric,
}

/// Scratch buffers of a hybrid kernel, allocated once by the interpreter.
#[derive(Debug)]
pub struct HybridScratch<'a> {
    /// Room for the quantized input (as many values as the float input).
    pub quantized: &'a mut [i8],
    /// One scaling factor per batch.
    pub scales: &'a mut [f32],
    /// One zero point per batch.
    pub offsets: &'a mut [i32],
}

/// Quantizes `input` (`batches` rows of `row` values) into the scratch buffers.
pub(crate) fn quantize_rows(
    input: &[f32],
    row: usize,
    mode: HybridInput,
    s: &mut HybridScratch<'_>,
) {
    if row == 0 {
        return;
    }
    for (b, (x, q)) in input
        .chunks_exact(row)
        .zip(s.quantized.chunks_exact_mut(row))
        .enumerate()
    {
        match mode {
            HybridInput::Symmetric => {
                s.scales[b] = crate::quant::symmetric_quantize_floats(x, q);
                s.offsets[b] = 0;
            }
            HybridInput::Asymmetric => {
                let (sc, off) = crate::quant::asymmetric_quantize_floats(x, q);
                s.scales[b] = sc;
                s.offsets[b] = off;
            }
        }
    }
}

/// Calls `f(input_y, input_x, tap)` for every in-bounds tap of the window of output `(oy, ox)`,
/// `tap = ky * k_w + kx`, in the reference order (filter row, filter column).
#[inline]
#[allow(clippy::too_many_arguments)]
fn for_each_tap(
    oy: usize,
    ox: usize,
    in_h: usize,
    in_w: usize,
    k_h: usize,
    k_w: usize,
    p: &Conv2dParams,
    mut f: impl FnMut(usize, usize, usize),
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
            f(iy, x - p.pad_left, ky * k_w + kx);
        }
    }
}

/// A quantized activation type of the integer convolutions and dense layers, with the
/// accumulator its products sum in: int8 sums `w * (x + input_offset)` in i32, int16 (zero
/// point 0) sums `w * x` in i64. The reference kernels for the two differ only in these types
/// and the output rescale.
pub(crate) trait ConvAccumulate: Quantized {
    /// The accumulator, and the bias's type.
    type Acc: Copy + Default + AddAssign;
    /// `sum w[i] * (x[i] + input_offset)` over one tap's input channels.
    fn dot(x: &[Self], w: &[i8], input_offset: i32) -> Self::Acc;
    /// `acc + bias`, wrapping.
    fn add_bias(acc: Self::Acc, bias: Self::Acc) -> Self::Acc;
    /// The output stage of channel `c`.
    fn requantize(q: &OutputStage, acc: Self::Acc, c: usize) -> Self;
}

impl ConvAccumulate for i8 {
    type Acc = i32;
    #[inline]
    fn dot(x: &[i8], w: &[i8], input_offset: i32) -> i32 {
        dot_offset(x, w, input_offset)
    }
    #[inline]
    fn add_bias(acc: i32, bias: i32) -> i32 {
        acc.wrapping_add(bias)
    }
    #[inline]
    fn requantize(q: &OutputStage, acc: i32, c: usize) -> i8 {
        q.apply(acc, c)
    }
}

impl ConvAccumulate for i16 {
    type Acc = i64;
    /// The input offset is 0 (int16 activations are symmetric).
    #[inline]
    fn dot(x: &[i16], w: &[i8], _input_offset: i32) -> i64 {
        x.iter()
            .zip(w)
            .map(|(&x, &w)| i64::from(i32::from(x) * i32::from(w)))
            .sum()
    }
    #[inline]
    fn add_bias(acc: i64, bias: i64) -> i64 {
        acc.wrapping_add(bias)
    }
    #[inline]
    fn requantize(q: &OutputStage, acc: i64, c: usize) -> i16 {
        q.apply_16x8(acc, c)
    }
}

/// Int8 CONV_2D with per-channel requantization, as TFLite's
/// `reference_integer_ops::ConvPerChannel`: `acc = sum w * (x + input_offset)` over in-bounds
/// taps (padding contributes the zero point, i.e. real 0), `+ bias`, requantized per output
/// channel, clamped. `p.activation` is ignored (the clamp range is in `q`).
#[allow(clippy::too_many_arguments)]
pub fn conv2d_i8(
    input: &[i8],
    in_shape: [usize; 4],
    filter: &[i8],
    filter_shape: [usize; 4],
    bias: Option<&[i32]>,
    p: &Conv2dParams,
    q: &OutputStage,
    output: &mut [i8],
    out_shape: [usize; 4],
) {
    let [batches, in_h, in_w, in_c] = in_shape;
    let [out_c, k_h, k_w, f_in] = filter_shape;
    let [_, out_h, out_w, _] = out_shape;
    debug_assert_eq!(input.len(), batches * in_h * in_w * in_c);
    debug_assert_eq!(filter.len(), out_c * k_h * k_w * f_in);
    debug_assert_eq!(output.len(), batches * out_h * out_w * out_c);
    conv2d_quantized(
        input,
        in_shape,
        filter,
        filter_shape,
        bias,
        p,
        q,
        output,
        out_shape,
    );
}

/// Int16x8 CONV_2D (int16 activations with zero point 0, int8 filter, int64 bias), as
/// TFLite's `reference_integer_ops::ConvPerChannel<int64_t>`: `acc = sum w * x + bias` in
/// int64, requantized per output channel ([`OutputStage::apply_16x8`]), clamped.
#[allow(clippy::too_many_arguments)]
pub fn conv2d_16x8(
    input: &[i16],
    in_shape: [usize; 4],
    filter: &[i8],
    filter_shape: [usize; 4],
    bias: Option<&[i64]>,
    p: &Conv2dParams,
    q: &OutputStage,
    output: &mut [i16],
    out_shape: [usize; 4],
) {
    conv2d_quantized(
        input,
        in_shape,
        filter,
        filter_shape,
        bias,
        p,
        q,
        output,
        out_shape,
    );
}

/// The integer CONV_2D loop nest of [`conv2d_i8`] and [`conv2d_16x8`]: per output channel, the
/// sum over in-bounds taps (reference order) of [`ConvAccumulate::dot`], then the bias, then
/// the output stage.
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d_quantized<T: ConvAccumulate>(
    input: &[T],
    in_shape: [usize; 4],
    filter: &[i8],
    filter_shape: [usize; 4],
    bias: Option<&[T::Acc]>,
    p: &Conv2dParams,
    q: &OutputStage,
    output: &mut [T],
    out_shape: [usize; 4],
) {
    let [batches, in_h, in_w, in_c] = in_shape;
    let [out_c, k_h, k_w, f_in] = filter_shape;
    let [_, out_h, out_w, _] = out_shape;
    if output.is_empty() {
        return;
    }
    let groups = in_c.checked_div(f_in).unwrap_or(1).max(1);
    let out_per_group = (out_c / groups).max(1);
    let fo_stride = k_h * k_w * f_in;
    for b in 0..batches {
        let in_batch = &input[b * in_h * in_w * in_c..(b + 1) * in_h * in_w * in_c];
        for oy in 0..out_h {
            for ox in 0..out_w {
                let out_off = ((b * out_h + oy) * out_w + ox) * out_c;
                let out_px = &mut output[out_off..out_off + out_c];
                for (o, ov) in out_px.iter_mut().enumerate() {
                    let g = o / out_per_group;
                    let mut total = T::Acc::default();
                    for_each_tap(oy, ox, in_h, in_w, k_h, k_w, p, |iy, ix, tap| {
                        let io = (iy * in_w + ix) * in_c + g * f_in;
                        let x = &in_batch[io..io + f_in];
                        let fo = o * fo_stride + tap * f_in;
                        let w = &filter[fo..fo + f_in];
                        total += T::dot(x, w, q.input_offset);
                    });
                    if let Some(bb) = bias {
                        total = T::add_bias(total, bb[o]);
                    }
                    *ov = T::requantize(q, total, o);
                }
            }
        }
    }
}

/// `sum w[i] * (x[i] + offset)` in i32 (`offset * sum w` is added separately, which is the same
/// in two's-complement arithmetic and lets the product loop vectorize).
#[inline]
pub(crate) fn dot_offset(x: &[i8], w: &[i8], offset: i32) -> i32 {
    let n = x.len().min(w.len());
    let (x, w) = (&x[..n], &w[..n]);
    let mut s = 0i32;
    // Blocks of 16 with i16 products summed pairwise keep the compiler on the
    // multiply-add instructions.
    let mut xc = x.chunks_exact(16);
    let mut wc = w.chunks_exact(16);
    for (a, b) in (&mut xc).zip(&mut wc) {
        let mut acc = 0i32;
        for i in 0..16 {
            acc += i32::from(i16::from(a[i]) * i16::from(b[i]));
        }
        s = s.wrapping_add(acc);
    }
    for (&a, &b) in xc.remainder().iter().zip(wc.remainder()) {
        s = s.wrapping_add(i32::from(a) * i32::from(b));
    }
    if offset != 0 {
        let ws: i32 = w.iter().map(|&v| i32::from(v)).sum();
        s = s.wrapping_add(ws.wrapping_mul(offset));
    }
    s
}

/// Whether a CONV_2D is a matrix product of its pixels by the filter: 1x1, stride 1, no padding,
/// one group.
fn is_pointwise(in_shape: [usize; 4], filter_shape: [usize; 4], p: &Conv2dParams) -> bool {
    filter_shape[1] == 1
        && filter_shape[2] == 1
        && filter_shape[3] == in_shape[3]
        && p.stride_h == 1
        && p.stride_w == 1
        && p.pad_top == 0
        && p.pad_left == 0
}

/// Rows of the float input a hybrid CONV_2D quantizes on their own (one scale and zero point
/// each). A pointwise convolution with asymmetric input quantization (per-channel filter scales:
/// what litecvt writes) quantizes every pixel (its `in_c` values) separately, as XNNPACK's
/// dynamically quantized GEMM (LiteRT's default CPU path) does for each row: a pixel's values no
/// longer share a range with the largest pixel of the image, which keeps more bits where
/// activations vary across the image (+7 dB on a PP-LCNet classifier). Other convolutions
/// quantize each batch as TFLite's `HybridConvPerChannel` / `HybridConv` (and XNNPACK) do.
pub fn hybrid_rows(
    in_shape: [usize; 4],
    filter_shape: [usize; 4],
    p: &Conv2dParams,
    mode: HybridInput,
) -> usize {
    if mode == HybridInput::Asymmetric && is_pointwise(in_shape, filter_shape, p) {
        in_shape[0] * in_shape[1] * in_shape[2]
    } else {
        in_shape[0]
    }
}

/// Hybrid CONV_2D (float input/output, constant int8 filter), as TFLite's `HybridConv` (symmetric
/// per-batch input quantization, per-tensor filter scale) and `HybridConvPerChannel`
/// (asymmetric per-batch input quantization, per-channel filter scales):
/// `out = act(float(sum w * (q - zp)) * (filter_scale[c] * input_scale[b]) + bias[c])`.
/// `filter_scales` has one value (per-tensor) or one per output channel. An asymmetric pointwise
/// convolution quantizes each pixel instead (see [`hybrid_rows`]): `scratch` holds
/// [`hybrid_rows`] scales and offsets.
#[allow(clippy::too_many_arguments)]
pub fn conv2d_hybrid(
    input: &[f32],
    in_shape: [usize; 4],
    filter: &[i8],
    filter_shape: [usize; 4],
    filter_scales: &[f32],
    bias: Option<&[f32]>,
    p: &Conv2dParams,
    mode: HybridInput,
    scratch: &mut HybridScratch<'_>,
    output: &mut [f32],
    out_shape: [usize; 4],
) {
    let [batches, in_h, in_w, in_c] = in_shape;
    let [out_c, k_h, k_w, f_in] = filter_shape;
    let [_, out_h, out_w, _] = out_shape;
    if output.is_empty() {
        return;
    }
    if hybrid_rows(in_shape, filter_shape, p, mode) != batches {
        // A matrix product of (pixels x in_c) by (in_c x out_c): one quantization row per pixel.
        return super::fully_connected::fully_connected_hybrid(
            input,
            batches * in_h * in_w,
            in_c,
            filter,
            filter_scales,
            out_c,
            bias,
            p.activation,
            HybridInput::Asymmetric,
            scratch,
            output,
        );
    }
    let row = in_h * in_w * in_c;
    quantize_rows(input, row, mode, scratch);
    let groups = in_c.checked_div(f_in).unwrap_or(1).max(1);
    let out_per_group = (out_c / groups).max(1);
    let fo_stride = k_h * k_w * f_in;
    for b in 0..batches {
        let qin = &scratch.quantized[b * row..(b + 1) * row];
        let sf = scratch.scales[b];
        let offset = -scratch.offsets[b];
        for oy in 0..out_h {
            for ox in 0..out_w {
                let out_off = ((b * out_h + oy) * out_w + ox) * out_c;
                let out_px = &mut output[out_off..out_off + out_c];
                for (o, ov) in out_px.iter_mut().enumerate() {
                    let g = o / out_per_group;
                    let mut total = 0i32;
                    for_each_tap(oy, ox, in_h, in_w, k_h, k_w, p, |iy, ix, tap| {
                        let io = (iy * in_w + ix) * in_c + g * f_in;
                        let fo = o * fo_stride + tap * f_in;
                        total += dot_offset(&qin[io..io + f_in], &filter[fo..fo + f_in], offset);
                    });
                    let fs = filter_scales[if filter_scales.len() == 1 { 0 } else { o }];
                    let v = total as f32 * (fs * sf) + bias.map_or(0.0, |bb| bb[o]);
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

    /// Naive gather-form conv written with signed coordinates and an explicit dot product.
    #[allow(clippy::too_many_arguments)]
    fn naive(
        input: &[f32],
        is: [usize; 4],
        filter: &[f32],
        fs: [usize; 4],
        bias: Option<&[f32]>,
        p: &Conv2dParams,
        os: [usize; 4],
    ) -> Vec<f32> {
        let groups = is[3] / fs[3];
        let opg = fs[0] / groups;
        let mut out = vec![0.0f32; os.iter().product()];
        for n in 0..os[0] {
            for oy in 0..os[1] {
                for ox in 0..os[2] {
                    for o in 0..os[3] {
                        let g = o / opg;
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
                                for i in 0..fs[3] {
                                    let xi = ((n * is[1] + iy as usize) * is[2] + ix as usize)
                                        * is[3]
                                        + g * fs[3]
                                        + i;
                                    let wi = ((o * fs[1] + ky) * fs[2] + kx) * fs[3] + i;
                                    s += input[xi] as f64 * filter[wi] as f64;
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

    fn check(is: [usize; 4], fs: [usize; 4], p: Conv2dParams, os: [usize; 4], with_bias: bool) {
        let mut rng = Lcg(is.iter().sum::<usize>() as u64 * 31 + fs[1] as u64);
        let input = rng.vec(is.iter().product());
        let filter = rng.vec(fs.iter().product());
        let bias = rng.vec(fs[0]);
        let bias = if with_bias { Some(&bias[..]) } else { None };
        let mut out = vec![f32::NAN; os.iter().product()];
        conv2d_f32(&input, is, &filter, fs, bias, &p, &mut out, os);
        let want = naive(&input, is, &filter, fs, bias, &p, os);
        for (i, (a, b)) in out.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                "at {i}: {a} vs {b}"
            );
        }
    }

    #[test]
    fn hand_computed_3x3_same() {
        // 1x3x3x1 input 1..9, 3x3 all-ones filter, SAME padding (pad 1): box sums.
        let input: Vec<f32> = (1..=9).map(|v| v as f32).collect();
        let filter = [1.0f32; 9];
        let p = Conv2dParams {
            pad_top: 1,
            pad_left: 1,
            ..Default::default()
        };
        let mut out = [0.0f32; 9];
        conv2d_f32(
            &input,
            [1, 3, 3, 1],
            &filter,
            [1, 3, 3, 1],
            Some(&[0.5]),
            &p,
            &mut out,
            [1, 3, 3, 1],
        );
        let want = [12.0, 21.0, 16.0, 27.0, 45.0, 33.0, 24.0, 39.0, 28.0];
        for (a, b) in out.iter().zip(want) {
            assert_eq!(*a, b + 0.5);
        }
    }

    #[test]
    fn stride1_valid() {
        check(
            [2, 5, 6, 3],
            [4, 3, 3, 3],
            Conv2dParams::default(),
            [2, 3, 4, 4],
            true,
        );
    }

    #[test]
    fn stride2_asymmetric_padding() {
        // SAME with stride 2 on 6x7: out 3x4; pads total (3-1)*2+3-6=1 -> top 0, bottom 1;
        // width (4-1)*2+3-7=2 -> left 1, right 1. Use top 0 / left 1 with implied extra.
        let p = Conv2dParams {
            stride_h: 2,
            stride_w: 2,
            pad_top: 0,
            pad_left: 1,
            activation: Activation::Relu,
            ..Default::default()
        };
        check([1, 6, 7, 2], [3, 3, 3, 2], p, [1, 3, 4, 3], true);
    }

    #[test]
    fn dilation2_padded() {
        let p = Conv2dParams {
            dilation_h: 2,
            dilation_w: 2,
            pad_top: 2,
            pad_left: 1,
            activation: Activation::Relu6,
            ..Default::default()
        };
        check([1, 7, 6, 3], [5, 3, 2, 3], p, [1, 7, 5, 5], false);
    }

    #[test]
    fn grouped() {
        // in_C 6, I 2 -> 3 groups, O 6 -> 2 outputs per group.
        let p = Conv2dParams {
            stride_h: 2,
            pad_top: 1,
            pad_left: 1,
            ..Default::default()
        };
        check([2, 5, 5, 6], [6, 3, 3, 2], p, [2, 3, 5, 6], true);
        // depthwise-like grouping: groups == in_C
        check(
            [1, 4, 4, 4],
            [8, 2, 2, 1],
            Conv2dParams::default(),
            [1, 3, 3, 8],
            true,
        );
    }

    #[test]
    fn activation_tanh_and_n1to1() {
        for act in [Activation::Tanh, Activation::ReluN1To1] {
            let p = Conv2dParams {
                activation: act,
                ..Default::default()
            };
            check([1, 4, 4, 3], [2, 2, 2, 3], p, [1, 3, 3, 2], true);
        }
    }

    #[test]
    fn hybrid_pointwise_quantizes_each_pixel() {
        // Pixels whose magnitudes span 1e-3..1e3: quantized per image, the small ones would
        // round to zero; per pixel, each keeps its own 8 bits.
        let (pixels, in_c, out_c) = (12, 8, 5);
        let mut r = Lcg(7);
        let mut input = r.vec(pixels * in_c);
        for (px, row) in input.chunks_exact_mut(in_c).enumerate() {
            let mag = 10f32.powf(-3.0 + 6.0 * px as f32 / (pixels - 1) as f32);
            row.iter_mut().for_each(|v| *v = v.abs() * mag);
        }
        let filter: Vec<i8> = (0..out_c * in_c)
            .map(|i| (i as i8 % 11) * 11 - 50)
            .collect();
        let scales: Vec<f32> = (0..out_c).map(|o| 0.01 * (o + 1) as f32).collect();
        let in_shape = [1, 3, 4, in_c];
        let filter_shape = [out_c, 1, 1, in_c];
        let p = Conv2dParams::default();
        let asym = HybridInput::Asymmetric;
        assert_eq!(hybrid_rows(in_shape, filter_shape, &p, asym), pixels);
        let sym = HybridInput::Symmetric;
        assert_eq!(hybrid_rows(in_shape, filter_shape, &p, sym), 1);
        let strided = Conv2dParams {
            stride_h: 2,
            ..Default::default()
        };
        assert_eq!(hybrid_rows(in_shape, filter_shape, &strided, asym), 1);
        let (mut q, mut sc, mut off) =
            (vec![0i8; input.len()], vec![0f32; pixels], vec![0; pixels]);
        let mut scratch = HybridScratch {
            quantized: &mut q,
            scales: &mut sc,
            offsets: &mut off,
        };
        let mut out = vec![0f32; pixels * out_c];
        conv2d_hybrid(
            &input,
            in_shape,
            &filter,
            filter_shape,
            &scales,
            None,
            &p,
            asym,
            &mut scratch,
            &mut out,
            [1, 3, 4, out_c],
        );
        for px in 0..pixels {
            let x = &input[px * in_c..(px + 1) * in_c];
            let step = x.iter().fold(0f32, |a, &v| a.max(v)) / 255.0;
            for o in 0..out_c {
                let w = &filter[o * in_c..(o + 1) * in_c];
                let want: f32 =
                    x.iter().zip(w).map(|(&a, &b)| a * b as f32).sum::<f32>() * scales[o];
                let bound = step * w.iter().map(|&b| (b as f32).abs()).sum::<f32>() * scales[o];
                let got = out[px * out_c + o];
                assert!(
                    (got - want).abs() <= bound * 0.51 + want.abs() * 1e-5,
                    "pixel {px} output {o}: {got} vs {want} (bound {bound})"
                );
            }
        }
    }
}
