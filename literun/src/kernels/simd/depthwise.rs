//! What the int8 and float DEPTHWISE_CONV_2D fast paths share: the walk over output windows
//! and the split of output rows over workers.

use super::*;

/// Largest kernel (taps) of the fast depthwise paths.
pub(crate) const DW_MAX_TAPS: usize = 64;

/// Calls `f(oy, ox, taps)` per output pixel with the input pixel index of every tap
/// (`usize::MAX` for padding).
// The x86 kernels take runs of tap pointers ([`for_each_window_run`]) instead.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline]
pub(super) fn for_each_window(
    in_hw: [usize; 2],
    k_hw: [usize; 2],
    out_rows: Range<usize>,
    out_w: usize,
    [stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left]: [usize; 6],
    mut f: impl FnMut(usize, usize, &[usize]),
) {
    let [in_h, in_w] = in_hw;
    let [k_h, k_w] = k_hw;
    let mut taps = [usize::MAX; DW_MAX_TAPS];
    let taps = &mut taps[..k_h * k_w];
    for oy in out_rows {
        for ox in 0..out_w {
            for ky in 0..k_h {
                let y = (oy * stride_h + ky * dilation_h).wrapping_sub(pad_top);
                for kx in 0..k_w {
                    let x = (ox * stride_w + kx * dilation_w).wrapping_sub(pad_left);
                    taps[ky * k_w + kx] = if y < in_h && x < in_w {
                        y * in_w + x
                    } else {
                        usize::MAX
                    };
                }
            }
            f(oy, ox, taps);
        }
    }
}

/// Calls `pixel(ptrs, at)` for every output pixel of rows `oys` of a depthwise window over one
/// batch `input` (`[in_h, in_w, c]`): `ptrs[t]` points to the `c` elements of tap `t`'s input
/// pixel, or is null for padding, and `ptrs[k_h * k_w..]` are null; `at` is the pixel's offset
/// in the rows' output (`c` per pixel from `oys.start`). `dims` = `[in_h, in_w, k_h, k_w,
/// out_w]`, `geometry` as [`dw_geometry`]. Windows inside the input take their taps' addresses
/// as one base plus fixed offsets; the others check every tap.
// Only the x86 depthwise kernels take tap pointers so far.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[inline]
pub(super) fn for_each_window_ptrs<T>(
    input: &[T],
    c: usize,
    [in_h, in_w, k_h, k_w, out_w]: [usize; 5],
    [stride_h, stride_w, dil_h, dil_w, pad_top, pad_left]: [usize; 6],
    oys: Range<usize>,
    mut pixel: impl FnMut(&[*const T; DW_MAX_TAPS + 1], usize),
) {
    let taps = k_h * k_w;
    assert!(taps <= DW_MAX_TAPS && c > 0 && input.len() >= in_h * in_w * c);
    // The taps' offsets from the window's first pixel, in elements.
    let mut offset = [0usize; DW_MAX_TAPS];
    for ky in 0..k_h {
        for kx in 0..k_w {
            offset[ky * k_w + kx] = (ky * dil_h * in_w + kx * dil_w) * c;
        }
    }
    let span_w = (k_w - 1) * dil_w + 1;
    let span_h = (k_h - 1) * dil_h + 1;
    let x_inside =
        |ox: usize| ox * stride_w >= pad_left && ox * stride_w - pad_left + span_w <= in_w;
    let mut ptrs = [core::ptr::null::<T>(); DW_MAX_TAPS + 1];
    let base = input.as_ptr();
    let y0 = oys.start;
    for oy in oys {
        let y_inside = oy * stride_h >= pad_top && oy * stride_h - pad_top + span_h <= in_h;
        for ox in 0..out_w {
            if y_inside && x_inside(ox) {
                let first = ((oy * stride_h - pad_top) * in_w + ox * stride_w - pad_left) * c;
                for (p, &o) in ptrs.iter_mut().zip(&offset[..taps]) {
                    // first + o is the start of an input pixel: the window is inside the input
                    // (whose length is asserted above).
                    *p = base.wrapping_add(first + o);
                }
            } else {
                for ky in 0..k_h {
                    let y = (oy * stride_h + ky * dil_h).wrapping_sub(pad_top);
                    for kx in 0..k_w {
                        let x = (ox * stride_w + kx * dil_w).wrapping_sub(pad_left);
                        ptrs[ky * k_w + kx] = if y < in_h && x < in_w {
                            base.wrapping_add((y * in_w + x) * c)
                        } else {
                            core::ptr::null()
                        };
                    }
                }
            }
            pixel(&ptrs, ((oy - y0) * out_w + ox) * c);
        }
    }
}

/// [`for_each_window_ptrs`] by runs: `run(ptrs, at, count)` covers `count` consecutive output
/// pixels of one row from offset `at` (`c` outputs each). When `count > 1` the windows are all
/// inside the input and pixel `k`'s tap `t` is at `ptrs[t] + k * stride_w * c`; the edge
/// pixels come one at a time (`count == 1`, null pointers for padding).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[inline]
pub(super) fn for_each_window_run<T>(
    input: &[T],
    c: usize,
    [in_h, in_w, k_h, k_w, out_w]: [usize; 5],
    [stride_h, stride_w, dil_h, dil_w, pad_top, pad_left]: [usize; 6],
    oys: Range<usize>,
    mut run: impl FnMut(&[*const T; DW_MAX_TAPS + 1], usize, usize),
) {
    let taps = k_h * k_w;
    assert!(taps <= DW_MAX_TAPS && c > 0 && input.len() >= in_h * in_w * c);
    let mut offset = [0usize; DW_MAX_TAPS];
    for ky in 0..k_h {
        for kx in 0..k_w {
            offset[ky * k_w + kx] = (ky * dil_h * in_w + kx * dil_w) * c;
        }
    }
    let span_w = (k_w - 1) * dil_w + 1;
    let span_h = (k_h - 1) * dil_h + 1;
    // The interior columns: ox * stride_w >= pad_left and ox * stride_w - pad_left + span_w <=
    // in_w.
    let ox_lo = pad_left.div_ceil(stride_w).min(out_w);
    let ox_hi = if in_w + pad_left >= span_w {
        ((in_w + pad_left - span_w) / stride_w + 1).clamp(ox_lo, out_w)
    } else {
        ox_lo
    };
    let mut ptrs = [core::ptr::null::<T>(); DW_MAX_TAPS + 1];
    let base = input.as_ptr();
    let y0 = oys.start;
    for oy in oys {
        let y_inside = oy * stride_h >= pad_top && oy * stride_h - pad_top + span_h <= in_h;
        let mut ox = 0;
        while ox < out_w {
            let at = ((oy - y0) * out_w + ox) * c;
            if y_inside && ox == ox_lo && ox_hi > ox_lo {
                let first = ((oy * stride_h - pad_top) * in_w + ox * stride_w - pad_left) * c;
                for (p, &o) in ptrs.iter_mut().zip(&offset[..taps]) {
                    // first + o is the start of an input pixel: the window is inside the input
                    // (whose length is asserted above), and so are the run's next ones.
                    *p = base.wrapping_add(first + o);
                }
                run(&ptrs, at, ox_hi - ox_lo);
                ox = ox_hi;
                continue;
            }
            for ky in 0..k_h {
                let y = (oy * stride_h + ky * dil_h).wrapping_sub(pad_top);
                for kx in 0..k_w {
                    let x = (ox * stride_w + kx * dil_w).wrapping_sub(pad_left);
                    ptrs[ky * k_w + kx] = if y < in_h && x < in_w {
                        base.wrapping_add((y * in_w + x) * c)
                    } else {
                        core::ptr::null()
                    };
                }
            }
            run(&ptrs, at, 1);
            ox += 1;
        }
    }
}

pub(super) fn dw_geometry(p: &DepthwiseParams) -> [usize; 6] {
    [
        p.stride_h,
        p.stride_w,
        p.dilation_h,
        p.dilation_w,
        p.pad_top,
        p.pad_left,
    ]
}

/// Runs `rows(input_batch, out_rows, out_block)` over the output rows of a depthwise
/// convolution (per batch), split over the `workers` ([`for_row_blocks`]).
pub(super) fn depthwise_rows<T: Send + Sync>(
    input: &[T],
    in_shape: [usize; 4],
    k_hw: [usize; 2],
    output: &mut [T],
    out_shape: [usize; 4],
    workers: &mut Workers,
    rows: impl Fn(&[T], Range<usize>, &mut [T], &mut [i32]) + Sync,
) {
    let [batches, in_h, in_w, c] = in_shape;
    let [_, out_h, out_w, _] = out_shape;
    let work = out_h * out_w * c * k_hw[0] * k_hw[1];
    for b in 0..batches {
        let inb = &input[b * in_h * in_w * c..(b + 1) * in_h * in_w * c];
        let outb = &mut output[b * out_h * out_w * c..(b + 1) * out_h * out_w * c];
        for_row_blocks(
            out_h,
            1,
            out_w * c,
            Work::Depthwise(work),
            outb,
            workers,
            |oys, block, s| rows(inb, oys, block, &mut s.i32s),
        );
    }
}

/// Runs `pixel(input_batch, taps, out_pixel)` for every output pixel of a depthwise convolution
/// ([`depthwise_rows`], [`for_each_window`]).
#[allow(clippy::too_many_arguments)]
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
pub(super) fn depthwise_pixels<T: Send + Sync>(
    input: &[T],
    in_shape: [usize; 4],
    k_hw: [usize; 2],
    p: &DepthwiseParams,
    output: &mut [T],
    out_shape: [usize; 4],
    workers: &mut Workers,
    pixel: impl Fn(&[T], &[usize], &mut [T]) + Sync,
) {
    let [_, in_h, in_w, c] = in_shape;
    let out_w = out_shape[2];
    depthwise_rows(
        input,
        in_shape,
        k_hw,
        output,
        out_shape,
        workers,
        |inb, oys, block, _| {
            let y0 = oys.start;
            for_each_window(
                [in_h, in_w],
                k_hw,
                oys,
                out_w,
                dw_geometry(p),
                |oy, ox, taps| {
                    let at = ((oy - y0) * out_w + ox) * c;
                    pixel(inb, taps, &mut block[at..at + c]);
                },
            );
        },
    );
}
