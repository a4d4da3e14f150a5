//! The AVX-512 float 3x3 depthwise kernels: rows of output pixels in runs, or columns in
//! strips and bands for large inputs.

use super::*;

/// Output pixels of a row that one pass over a 16-channel block covers when the input fits in
/// L2. Stride 2 reads the input lines of a pass one per pixel (a pixel's channels are far
/// apart): shorter passes get the other blocks' lines while still in L2 (measured on
/// MobileNetV2's 112x112x96 stride-2 layer: 16 pixels 15% faster than 32).
const DW_RUN: usize = 16;

/// Input bytes (one batch) above which [`dw3x3_f32_rows_avx512`] passes over [`DW_RUN_BIG`]
/// pixels instead: such an input comes mostly from L3, which streams whole pixels
/// (consecutive lines) faster than one line per pixel.
const DW_BIG_INPUT: usize = 2 << 20;

/// Pass length for inputs above [`DW_BIG_INPUT`]: one group of four pixels, so all channel
/// blocks of its input pixels are read back to back (MobileNetV2's 113x113x96 stride-2 layer,
/// 4.9 MB: about 8% faster than 16; its layers with inputs in L2 are 2-10% slower with 4,
/// which reloads the weights per group).
const DW_RUN_BIG: usize = 4;

/// The nine weights and the bias of channels `cb..` (`mask`: the lanes below `c - cb`) of a 3x3
/// depthwise layer, for the kernels that keep them in registers.
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
fn dw3x3_block_weights(dw: &DwF32, cb: usize, mask: __mmask16) -> ([__m512; 9], __m512) {
    let (c, cp) = (dw.c, dw.cp);
    assert!(cb < c && mask == lanes16(c - cb));
    assert!(dw.taps == 9 && dw.w.len() >= 9 * cp && cp >= c && dw.bias.len() >= c);
    let mut w = [_mm512_setzero_ps(); 9];
    for (t, w) in w.iter_mut().enumerate() {
        // SAFETY: lanes below c - cb (asserted): within tap t's cp weights.
        *w = unsafe { _mm512_maskz_loadu_ps(mask, dw.w.as_ptr().add(t * cp + cb)) };
    }
    // SAFETY: lanes below c - cb: within the bias' c floats.
    let bias = unsafe { _mm512_maskz_loadu_ps(mask, dw.bias.as_ptr().add(cb)) };
    (w, bias)
}

/// [`dw_f32_rows`] for 3x3 kernels without dilation, strides other than 1 ([`dw3x3_f32_cols`]
/// takes stride 1): for each 16-channel block of a run of
/// output pixels, the nine weights and the bias stay in registers, so each multiply-add
/// loads one input vector (the generic path loads the weight too and builds nine tap
/// pointers per pixel); taps outside the input are skipped (columns only at the row's ends).
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
pub(super) fn dw3x3_f32_rows_avx512(
    dw: &DwF32,
    input: &[f32],
    [in_h, in_w, _, _, out_w]: [usize; 5],
    [stride_h, stride_w, _, _, pad_top, pad_left]: [usize; 6],
    oys: Range<usize>,
    out: &mut [f32],
) {
    let (c, cp) = (dw.c, dw.cp);
    assert!(c > 0 && input.len() >= in_h * in_w * c && out.len() >= oys.len() * out_w * c);
    assert!(dw.taps == 9 && dw.w.len() >= 9 * cp && cp >= c && dw.bias.len() >= c);
    let clamp = !matches!(dw.act, Activation::None | Activation::Tanh);
    let (lo, hi) = clamp512(dw.act);
    let (inp, op) = (input.as_ptr(), out.as_mut_ptr());
    let y0 = oys.start;
    let run = if in_h * in_w * c * 4 > DW_BIG_INPUT {
        DW_RUN_BIG
    } else {
        DW_RUN
    };
    // Bottom rows first: the layer before wrote this input top to bottom, so when it does not
    // fit in L2 its last rows are the ones still there (MobileNetV2's 112x112x96 stride-2
    // layer, 4.8 MB: 20% faster than top down).
    for oy in oys.rev() {
        // Start of each kernel row's input row, None above or below the input.
        let mut rows = [None; 3];
        for (ky, r) in rows.iter_mut().enumerate() {
            let y = (oy * stride_h + ky).wrapping_sub(pad_top);
            if y < in_h {
                *r = Some(y * in_w * c);
            }
        }
        let orow = (oy - y0) * out_w * c;
        let mut ox0 = 0;
        while ox0 < out_w {
            // The first run also takes the pixels whose windows start left of the input, so
            // the later runs split no group of four.
            let lead = if ox0 == 0 {
                pad_left.div_ceil(stride_w)
            } else {
                0
            };
            let ox1 = (ox0 + lead + run).min(out_w);
            let mut cb = 0;
            while cb < c {
                let mask = lanes16(c - cb);
                let (w, bias) = dw3x3_block_weights(dw, cb, mask);
                let mut ox = ox0;
                while ox < ox1 {
                    let x0 = (ox * stride_w).wrapping_sub(pad_left);
                    // Four pixels whose windows start inside the row (fewer at the row's
                    // end: the others are computed, not stored): four independent chains,
                    // input columns shared between neighbouring windows loaded once; columns
                    // right of the input (padding) are zero.
                    let n = (ox1 - ox).min(4);
                    if x0 < in_w {
                        let cols = in_w - x0;
                        let quad = match (stride_w, cols >= 3 * stride_w + 3) {
                            // SAFETY: columns x0..x0 + min(cols, 3 * stride + 3) of every
                            // valid row are inside the input; lanes below c - cb.
                            (1, true) => Some(unsafe {
                                dw3x3_quad::<1, false>(inp, &rows, x0 * c + cb, c, cols, mask, &w)
                            }),
                            // SAFETY: as above.
                            (1, false) => Some(unsafe {
                                dw3x3_quad::<1, true>(inp, &rows, x0 * c + cb, c, cols, mask, &w)
                            }),
                            // SAFETY: as above.
                            (2, true) => Some(unsafe {
                                dw3x3_quad::<2, false>(inp, &rows, x0 * c + cb, c, cols, mask, &w)
                            }),
                            // SAFETY: as above.
                            (2, false) => Some(unsafe {
                                dw3x3_quad::<2, true>(inp, &rows, x0 * c + cb, c, cols, mask, &w)
                            }),
                            _ => None,
                        };
                        if let Some(quad) = quad {
                            for (j, acc) in quad.into_iter().enumerate().take(n) {
                                let mut v = _mm512_add_ps(acc, bias);
                                if clamp {
                                    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
                                }
                                let o = orow + (ox + j) * c + cb;
                                // SAFETY: output pixel (oy, ox + j) of this block, ox + j <
                                // ox1 <= out_w; lanes below c - cb.
                                unsafe { _mm512_mask_storeu_ps(op.add(o), mask, v) };
                            }
                            ox += n;
                            continue;
                        }
                    }
                    let inside = x0 < in_w && in_w - x0 >= 3;
                    let mut acc = _mm512_setzero_ps();
                    for (ky, r) in rows.iter().enumerate() {
                        let Some(r) = *r else { continue };
                        if inside {
                            // SAFETY: pixels x0..x0 + 3 of input row y are inside the input;
                            // lanes below c - cb stay within each pixel's channels.
                            unsafe {
                                let p = inp.add(r + x0 * c + cb);
                                let a = _mm512_maskz_loadu_ps(mask, p);
                                acc = _mm512_fmadd_ps(a, w[ky * 3], acc);
                                let a = _mm512_maskz_loadu_ps(mask, p.add(c));
                                acc = _mm512_fmadd_ps(a, w[ky * 3 + 1], acc);
                                let a = _mm512_maskz_loadu_ps(mask, p.add(2 * c));
                                acc = _mm512_fmadd_ps(a, w[ky * 3 + 2], acc);
                            }
                        } else {
                            for kx in 0..3 {
                                let x = x0.wrapping_add(kx);
                                if x < in_w {
                                    // SAFETY: pixel (y, x) is inside the input; lanes as
                                    // above.
                                    let a = unsafe {
                                        _mm512_maskz_loadu_ps(mask, inp.add(r + x * c + cb))
                                    };
                                    acc = _mm512_fmadd_ps(a, w[ky * 3 + kx], acc);
                                }
                            }
                        }
                    }
                    let mut v = _mm512_add_ps(acc, bias);
                    if clamp {
                        v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
                    }
                    // SAFETY: output pixel (oy, ox) of this block, lanes below c - cb.
                    unsafe { _mm512_mask_storeu_ps(op.add(orow + ox * c + cb), mask, v) };
                    ox += 1;
                }
                cb += 16;
            }
            ox0 = ox1;
        }
    }
}

/// Output pixels side by side in one column strip of [`dw3x3_f32_cols`].
const DW_STRIP: usize = 4;

/// Output rows of one walk of [`dw3x3_f32_cols`]: a walk of all rows strides through far apart
/// input rows, which the hardware prefetchers do not follow (measured: twice as slow on
/// 112x112x32); 8 rows cost two extra input rows per eight and keep the band's rows in L2.
const DW_BAND: usize = 8;

/// Output rows of one band of [`Dw3Walk::bands`]: three rows of four pixels are twelve
/// accumulators, which with the nine weights and six input vectors fill the registers.
const DW_BAND3: usize = 3;

/// Input bytes (one batch) up to which [`dw3x3_f32_cols`] goes by [`Dw3Walk::bands`]. When the
/// rows are a multiple of 4 KiB long and the output a multiple of 4 KiB from the input (greedy
/// planning places equal-sized tensors so), a walk down a column strip loads input rows right
/// after storing output rows with the same addresses modulo 4 KiB: 4K aliasing with the
/// pending stores, and all of the walk's lines on the same few L1 sets. MobileNetV2 block's
/// 16x16x64 layer took 5.8 us so and 3.8 with its output moved by 2 KiB; bands, which store
/// after all their loads, 3.7 either way. Also measured: MobileNetV2's 14x14 and 7x7 layers
/// 5-12% faster with bands, 28x28x192 (602 KB) the same; the 56x56x144 and 112x112x32 layers
/// (1.6-1.8 MB) 10-15% slower (bands reload two of every five input rows).
const DW_BANDS_INPUT: usize = 1 << 20;

/// [`dw_f32_rows`] for 3x3 kernels with stride 1, no dilation: the output is cut into strips
/// of [`DW_STRIP`] pixels; per strip and 16-channel block the nine weights stay in registers
/// while the walk goes down [`DW_BAND`] output rows, and each input row is loaded once per
/// strip (six vectors) and multiply-added into the three output rows it feeds (three
/// rotating accumulator sets). So an output pixel costs 1.5 loads for its nine multiply-adds
/// instead of 4.5 ([`dw3x3_f32_rows_avx512`]), and the input lines go from L2 to L1 about
/// once instead of once per output row. Inputs up to [`DW_BANDS_INPUT`] go by bands of
/// [`DW_BAND3`] rows instead ([`Dw3Walk::bands`]).
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
pub(super) fn dw3x3_f32_cols(
    dw: &DwF32,
    input: &[f32],
    [in_h, in_w, _, _, out_w]: [usize; 5],
    [_, _, _, _, pad_top, pad_left]: [usize; 6],
    oys: Range<usize>,
    out: &mut [f32],
) {
    let (c, cp) = (dw.c, dw.cp);
    assert!(c > 0 && input.len() >= in_h * in_w * c && out.len() >= oys.len() * out_w * c);
    assert!(dw.taps == 9 && dw.w.len() >= 9 * cp && cp >= c && dw.bias.len() >= c);
    if oys.is_empty() {
        return;
    }
    let clamp = !matches!(dw.act, Activation::None | Activation::Tanh);
    let (lo, hi) = clamp512(dw.act);
    let g = Dw3Walk {
        inp: input.as_ptr(),
        op: out.as_mut_ptr(),
        in_h,
        in_w,
        c,
        out_row: out_w * c,
        pad_top,
        oys: oys.clone(),
        clamp,
        lo,
        hi,
    };
    if in_h * in_w * c * 4 <= DW_BANDS_INPUT {
        // SAFETY: this function's features; `g` is made for these arguments.
        return unsafe { g.bands(dw, out_w, pad_left, oys) };
    }
    let mut band = oys.start;
    while band < oys.end {
        let rows = band..(band + DW_BAND).min(oys.end);
        let mut ox = 0;
        while ox < out_w {
            let np = (out_w - ox).min(DW_STRIP);
            let mut cb = 0;
            while cb < c {
                let mask = lanes16(c - cb);
                let wb = dw3x3_block_weights(dw, cb, mask);
                let (s, inside) = g.strip(ox, np, pad_left, cb, mask, wb);
                // SAFETY: this function's features; the strip is as `walk` needs (`inside` as
                // `strip` found it).
                unsafe {
                    if inside {
                        g.walk::<false>(rows.clone(), &s);
                    } else {
                        g.walk::<true>(rows.clone(), &s);
                    }
                }
                cb += 16;
            }
            ox += np;
        }
        band = rows.end;
    }
}

/// The geometry of one [`dw3x3_f32_cols`] call: input `[in_h, in_w, c]` at `inp`, output
/// rows `oys` (of `out_row` floats) at `op`.
struct Dw3Walk {
    inp: *const f32,
    op: *mut f32,
    in_h: usize,
    in_w: usize,
    c: usize,
    out_row: usize,
    pad_top: usize,
    oys: Range<usize>,
    clamp: bool,
    lo: __m512,
    hi: __m512,
}

/// One strip of [`Dw3Walk`]: output pixels `ox..ox + np`, whose first window starts at input
/// column `x0` (wrapping: left of the input), channels `cb..` of `mask`, the nine weights
/// `w` and the bias.
#[derive(Clone, Copy)]
struct Dw3Strip {
    x0: usize,
    ox: usize,
    np: usize,
    cb: usize,
    mask: __mmask16,
    w: [__m512; 9],
    bias: __m512,
}

impl Dw3Walk {
    /// The strip of `np` (at most [`DW_STRIP`]) output columns from `ox` in the 16-channel
    /// block `cb` (lanes `mask`, weights and bias `wb` of [`dw3x3_block_weights`]), and whether
    /// all its `DW_STRIP + 2` input columns are inside the input (then the kernels skip the
    /// per-column checks).
    #[inline]
    fn strip(
        &self,
        ox: usize,
        np: usize,
        pad_left: usize,
        cb: usize,
        mask: __mmask16,
        (w, bias): ([__m512; 9], __m512),
    ) -> (Dw3Strip, bool) {
        let x0 = ox.wrapping_sub(pad_left);
        let inside = ox >= pad_left && x0 + DW_STRIP + 2 <= self.in_w;
        let s = Dw3Strip {
            x0,
            ox,
            np,
            cb,
            mask,
            w,
            bias,
        };
        (s, inside)
    }

    /// The six input vectors of input row `y` (wrapping: above or below the input
    /// gives None) from the strip's column `x0`; columns outside the input are zero (checked
    /// only when `EDGE`).
    ///
    /// # Safety
    /// AVX-512 F/VL; `s` as in [`Dw3Walk::walk`].
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
    unsafe fn row<const EDGE: bool>(
        &self,
        y: usize,
        s: &Dw3Strip,
    ) -> Option<[__m512; DW_STRIP + 2]> {
        if y >= self.in_h {
            return None;
        }
        let mut a = [_mm512_setzero_ps(); DW_STRIP + 2];
        for (col, a) in a.iter_mut().enumerate() {
            let x = s.x0.wrapping_add(col);
            if !EDGE || x < self.in_w {
                // SAFETY: pixel (y, x) is inside the input (y < in_h checked, x by the
                // contract or just above); lanes below c - cb.
                let p = unsafe { self.inp.add((y * self.in_w + x) * self.c + s.cb) };
                // SAFETY: as above.
                *a = unsafe { _mm512_maskz_loadu_ps(s.mask, p) };
            }
        }
        Some(a)
    }

    /// Adds kernel row `ky` over the input row `a` to the four pixels of `acc`.
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
    fn fma(a: &[__m512; DW_STRIP + 2], s: &Dw3Strip, ky: usize, acc: &mut [__m512; DW_STRIP]) {
        for (j, acc) in acc.iter_mut().enumerate() {
            for kx in 0..3 {
                *acc = _mm512_fmadd_ps(a[j + kx], s.w[ky * 3 + kx], *acc);
            }
        }
    }

    /// Stores the strip's pixels of `acc` (bias included), clamped, at output row `oy`, and
    /// restarts `acc` at the bias.
    ///
    /// # Safety
    /// AVX-512 F/VL; `oy` in `oys`; `s` as in [`Dw3Walk::walk`].
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
    unsafe fn store(&self, acc: &mut [__m512; DW_STRIP], oy: usize, s: &Dw3Strip) {
        for (j, &v) in acc.iter().enumerate().take(s.np) {
            let v = if self.clamp {
                _mm512_min_ps(_mm512_max_ps(v, self.lo), self.hi)
            } else {
                v
            };
            let o = (oy - self.oys.start) * self.out_row + (s.ox + j) * self.c + s.cb;
            // SAFETY: pixel (oy, ox + j) of the output rows oys; lanes below c - cb.
            unsafe { _mm512_mask_storeu_ps(self.op.add(o), s.mask, v) };
        }
        *acc = [s.bias; DW_STRIP];
    }

    /// Input row of kernel row 0 for output row `oy` (wrapping above the input).
    #[inline]
    fn y_of(&self, oy: usize) -> usize {
        oy.wrapping_sub(self.pad_top)
    }

    /// Input row `oy + 2` (less `pad_top`) completes output row `oy` (`a`) and feeds rows `oy + 1`
    /// (`b`) and `oy + 2` (`d`).
    ///
    /// # Safety
    /// As [`Dw3Walk::walk`], `oy` in `oys`.
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
    unsafe fn step<const EDGE: bool>(
        &self,
        oy: usize,
        s: &Dw3Strip,
        [a, b, d]: [&mut [__m512; DW_STRIP]; 3],
    ) {
        // SAFETY: the contract.
        unsafe {
            if let Some(r) = self.row::<EDGE>(self.y_of(oy).wrapping_add(2), s) {
                Self::fma(&r, s, 2, a);
                Self::fma(&r, s, 1, b);
                Self::fma(&r, s, 0, d);
            }
            self.store(a, oy, s);
        }
    }

    /// Every output row of `rows` in bands of [`DW_BAND3`] rows: per band and 16-channel
    /// block, the strips left to right, each computing all of the band's rows of its
    /// [`DW_STRIP`] pixels before storing them (see [`dw3x3_f32_cols`] for when).
    ///
    /// # Safety
    /// AVX-512 F/VL; `self` made by [`dw3x3_f32_cols`] for `dw`, `out_w` and `pad_left`,
    /// `rows` in `self.oys`.
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
    unsafe fn bands(&self, dw: &DwF32, out_w: usize, pad_left: usize, rows: Range<usize>) {
        let c = self.c;
        let mut band = rows.start;
        while band < rows.end {
            let oys = band..(band + DW_BAND3).min(rows.end);
            let mut cb = 0;
            while cb < c {
                let mask = lanes16(c - cb);
                let wb = dw3x3_block_weights(dw, cb, mask);
                let mut ox = 0;
                while ox < out_w {
                    let np = (out_w - ox).min(DW_STRIP);
                    let (s, inside) = self.strip(ox, np, pad_left, cb, mask, wb);
                    // SAFETY: the contract; the strip is as `band` needs (`inside` as `strip`
                    // found it).
                    unsafe {
                        if inside {
                            self.band::<false>(oys.clone(), &s);
                        } else {
                            self.band::<true>(oys.clone(), &s);
                        }
                    }
                    ox += np;
                }
                cb += 16;
            }
            band = oys.end;
        }
    }

    /// One strip of up to [`DW_BAND3`] output rows `oys`: its `oys.len() + 2` input rows are
    /// each loaded once and multiply-added into every row they feed; the stores come after
    /// all loads.
    ///
    /// # Safety
    /// As [`Dw3Walk::walk`], `oys.len() <= DW_BAND3`.
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
    unsafe fn band<const EDGE: bool>(&self, oys: Range<usize>, s: &Dw3Strip) {
        let n = oys.len();
        let y0 = self.y_of(oys.start);
        let mut acc = [[s.bias; DW_STRIP]; DW_BAND3];
        for i in 0..DW_BAND3 + 2 {
            if i >= n + 2 {
                break;
            }
            // SAFETY: the contract.
            let Some(r) = (unsafe { self.row::<EDGE>(y0.wrapping_add(i), s) }) else {
                continue;
            };
            // Input row i is kernel row i - j of output row j.
            for (j, acc) in acc.iter_mut().enumerate().take(n) {
                if i >= j && i - j < 3 {
                    Self::fma(&r, s, i - j, acc);
                }
            }
        }
        for (j, acc) in acc.iter_mut().enumerate().take(n) {
            // SAFETY: the contract; oys.start + j < oys.end.
            unsafe { self.store(acc, oys.start + j, s) };
        }
    }

    /// One strip down the output rows `rows`: every input row is loaded once and
    /// multiply-added into each output row it feeds (accumulators rotate, so the loops are
    /// unrolled by their count).
    ///
    /// # Safety
    /// AVX-512 F/VL; `s.ox + s.np <= out_w`, `s.x0 = s.ox - pad_left` (wrapping), lanes
    /// of `s.mask` below `c - s.cb`; when not `EDGE`, columns `x0..x0 + 6` inside
    /// the input.
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
    unsafe fn walk<const EDGE: bool>(&self, rows: Range<usize>, s: &Dw3Strip) {
        let (o0, o1) = (rows.start, rows.end);
        let y0 = self.y_of(o0);
        // SAFETY (all calls below): the contract; output rows stored are in o0..o1.
        unsafe {
            let (mut a, mut b, mut d) =
                ([s.bias; DW_STRIP], [s.bias; DW_STRIP], [s.bias; DW_STRIP]);
            if let Some(r) = self.row::<EDGE>(y0, s) {
                Self::fma(&r, s, 0, &mut a);
            }
            if let Some(r) = self.row::<EDGE>(y0.wrapping_add(1), s) {
                Self::fma(&r, s, 1, &mut a);
                Self::fma(&r, s, 0, &mut b);
            }
            let mut oy = o0;
            while oy + 3 <= o1 {
                self.step::<EDGE>(oy, s, [&mut a, &mut b, &mut d]);
                self.step::<EDGE>(oy + 1, s, [&mut b, &mut d, &mut a]);
                self.step::<EDGE>(oy + 2, s, [&mut d, &mut a, &mut b]);
                oy += 3;
            }
            if oy < o1 {
                self.step::<EDGE>(oy, s, [&mut a, &mut b, &mut d]);
            }
            if oy + 1 < o1 {
                self.step::<EDGE>(oy + 1, s, [&mut b, &mut d, &mut a]);
            }
        }
    }
}

/// [`dw_f32_rows`] compiled for AVX-512, so the pixel kernel inlines into the window loop.
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
pub(super) fn dw_f32_rows_avx512(
    dw: &DwF32,
    input: &[f32],
    dims: [usize; 5],
    geometry: [usize; 6],
    oys: Range<usize>,
    out: &mut [f32],
) {
    let c = dw.c;
    for_each_window_ptrs(input, c, dims, geometry, oys, |ptrs, at| {
        // SAFETY: this function's features; for_each_window_ptrs gives c readable elements at
        // every non-null pointer.
        unsafe { dw_f32_pixel_avx512(dw, ptrs, &mut out[at..at + c]) };
    });
}
