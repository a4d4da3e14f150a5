//! MAX_POOL_2D (int8 and float32, NHWC) at the ISA's vector width, split by output rows over
//! the workers: the portable kernels' loop (per output pixel, every in-bounds window position's
//! run of channels combined with a max, in the same order, then clamped or activated), compiled
//! for the ISA, so every output is the portable kernel's, bit for bit.

use super::*;
use crate::kernels::pool::{window, Pool2dParams};

/// An element of a max pooling: its lowest value (where a window starts), the portable
/// kernel's max, and the clamp or activation of the result.
pub(crate) trait PoolMax: Copy + Send + Sync {
    /// What [`Self::finish`] applies: the int8 activation range, or the float activation.
    type Bounds: Copy + Sync;
    const LOWEST: Self;
    fn max(self, x: Self) -> Self;
    fn finish(self, b: Self::Bounds) -> Self;
}

impl PoolMax for i8 {
    type Bounds = (i8, i8);
    const LOWEST: i8 = i8::MIN;
    #[inline(always)]
    fn max(self, x: i8) -> i8 {
        Ord::max(self, x)
    }
    #[inline(always)]
    fn finish(self, (lo, hi): (i8, i8)) -> i8 {
        Ord::min(Ord::max(self, lo), hi)
    }
}

impl PoolMax for f32 {
    type Bounds = Activation;
    const LOWEST: f32 = f32::MIN;
    #[inline(always)]
    fn max(self, x: f32) -> f32 {
        // The portable kernel's select (TFLite's `std::max(m, x)`): NaN inputs are skipped.
        if self < x {
            x
        } else {
            self
        }
    }
    #[inline(always)]
    fn finish(self, act: Activation) -> f32 {
        act.apply(self)
    }
}

/// The int8 activation range `[act_min, act_max]` as [`PoolMax::Bounds`]: what clamping the
/// i32 maximum to it and saturating to int8 gives.
pub(crate) fn pool_bounds_i8(act_min: i32, act_max: i32) -> (i8, i8) {
    let sat = |v: i32| v.clamp(i8::MIN.into(), i8::MAX.into()) as i8;
    (sat(act_min), sat(act_max))
}

/// MAX_POOL_2D of `input` (`in_shape`, NHWC) into `output` (`out_shape`), one block of output
/// rows per worker (feature `threads`, enough work).
#[allow(clippy::too_many_arguments)]
pub(crate) fn max_pool<T: PoolMax>(
    isa: Isa,
    input: &[T],
    in_shape: [usize; 4],
    p: &Pool2dParams,
    bounds: T::Bounds,
    output: &mut [T],
    out_shape: [usize; 4],
    workers: &mut Workers,
) {
    let [batches, _, _, depth] = in_shape;
    let [_, out_h, out_w, _] = out_shape;
    let rows = batches * out_h;
    let row_len = out_w * depth;
    if rows == 0 || row_len == 0 || output.len() < rows * row_len {
        return;
    }
    let work = rows * row_len * p.filter_h * p.filter_w;
    for_row_blocks(
        rows,
        1,
        row_len,
        Work::Copies(work),
        output,
        workers,
        |rs, block, _| max_pool_rows_isa(isa, input, in_shape, p, bounds, out_shape, rs, block),
    );
}

/// [`max_pool_rows`] compiled for `isa`.
#[allow(clippy::too_many_arguments)]
fn max_pool_rows_isa<T: PoolMax>(
    isa: Isa,
    input: &[T],
    in_shape: [usize; 4],
    p: &Pool2dParams,
    bounds: T::Bounds,
    out_shape: [usize; 4],
    rows: Range<usize>,
    out: &mut [T],
) {
    #[cfg(target_arch = "x86_64")]
    match isa {
        // SAFETY: `Isa::Avx512Vnni` is chosen only when the CPU has AVX-512 F/BW/VL and AVX2
        // (`x86::available`); the function only compiles safe code for them.
        Isa::Avx512Vnni => unsafe {
            return max_pool_rows_avx512(input, in_shape, p, bounds, out_shape, rows, out);
        },
        // SAFETY: these ISAs are chosen only when the CPU has AVX2 (`x86::available`).
        Isa::Avx2 | Isa::AvxVnni => unsafe {
            return max_pool_rows_avx2(input, in_shape, p, bounds, out_shape, rows, out);
        },
        _ => {}
    }
    let _ = isa;
    max_pool_rows(input, in_shape, p, bounds, out_shape, rows, out)
}

/// # Safety
/// The CPU has AVX2 and AVX-512 F/BW/VL.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl")]
unsafe fn max_pool_rows_avx512<T: PoolMax>(
    input: &[T],
    in_shape: [usize; 4],
    p: &Pool2dParams,
    bounds: T::Bounds,
    out_shape: [usize; 4],
    rows: Range<usize>,
    out: &mut [T],
) {
    max_pool_rows(input, in_shape, p, bounds, out_shape, rows, out)
}

/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2")]
unsafe fn max_pool_rows_avx2<T: PoolMax>(
    input: &[T],
    in_shape: [usize; 4],
    p: &Pool2dParams,
    bounds: T::Bounds,
    out_shape: [usize; 4],
    rows: Range<usize>,
    out: &mut [T],
) {
    max_pool_rows(input, in_shape, p, bounds, out_shape, rows, out)
}

/// Output rows `rows` (over batches and output rows: `b * out_h + oy`) of a max pooling into
/// `out` (rows of `out_w * depth`), as the portable kernel computes them.
#[inline(always)]
fn max_pool_rows<T: PoolMax>(
    input: &[T],
    [_, in_h, in_w, depth]: [usize; 4],
    p: &Pool2dParams,
    bounds: T::Bounds,
    [_, out_h, out_w, _]: [usize; 4],
    rows: Range<usize>,
    out: &mut [T],
) {
    let row_len = out_w * depth;
    for (r, out_row) in rows.zip(out.chunks_exact_mut(row_len)) {
        let (b, oy) = (r / out_h, r % out_h);
        let (fy0, fy1) = window(oy, p.stride_h, p.pad_top, p.filter_h, in_h);
        for (ox, px) in out_row.chunks_exact_mut(depth).enumerate() {
            let (fx0, fx1) = window(ox, p.stride_w, p.pad_left, p.filter_w, in_w);
            px.fill(T::LOWEST);
            for fy in fy0..fy1 {
                let iy = oy * p.stride_h + fy - p.pad_top;
                for fx in fx0..fx1 {
                    let ix = ox * p.stride_w + fx - p.pad_left;
                    let at = ((b * in_h + iy) * in_w + ix) * depth;
                    for (m, &x) in px.iter_mut().zip(&input[at..at + depth]) {
                        *m = m.max(x);
                    }
                }
            }
            for v in px.iter_mut() {
                *v = v.finish(bounds);
            }
        }
    }
}
