//! The AVX2 float GEMM over rows read in place, many tiles per call: rows at a fixed stride
//! (1x1 convolutions, dense rows; every row block and panel), and a run of a convolution's
//! output pixels whose windows lie inside the input (one panel).
//!
//! Through `GemmF32::run_panels` a tile's rows are sliced,
//! checked and dispatched again for every 6-row, 16-channel tile; a 1x1 convolution of few
//! input channels (the 0.35-wide MobileNetV2's expansions from 8 or 16 channels) has about as
//! few multiply-adds per tile as that costs. Here the checks are made once per call and each
//! tile is a call of the shared [`tile_f32_avx2_rows`].

use super::gemm_f32::{
    tile_f32_avx2_rows, SegRows, WholeRows, DIRECT_LHS_L2_BYTES, DIRECT_RHS_L1_BYTES,
};
use super::*;

/// `out[m - ms.start, c - cols.start] = act(data[m * stride..][..k] · W[c] + bias[c])` for `m`
/// in `ms` and `c` in `cols` (`cols.start` a multiple of 16), `W` packed one 16-channel panel
/// at a time (`b`: `[panel][k][16]`, `bias` padded to whole panels). `width` is 16, or 8 for a
/// layer of at most 8 channels (half the tile). Tanh is left to the caller, as in the tile.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_direct_f32_avx2(
    isa: Isa,
    width: usize,
    data: &[f32],
    stride: usize,
    ms: Range<usize>,
    (b, bias, k): (&[f32], &[f32], usize),
    cols: Range<usize>,
    act: Activation,
    out: &mut [f32],
) {
    if ms.is_empty() || cols.is_empty() {
        return;
    }
    let panels = cols.end.div_ceil(NR_F32);
    // One check (one panic site) for the whole contract.
    assert!(
        matches!(isa, Isa::Avx2 | Isa::AvxVnni | Isa::Avx512Vnni)
            && (width == NR_F32 || (width == NR_F32 / 2 && panels == 1))
            && cols.start.is_multiple_of(NR_F32)
            && k >= 1
            && b.len() >= panels * k * NR_F32
            && bias.len() >= panels * NR_F32
            && stride >= k
            && data.len() >= (ms.end - 1) * stride + k
            && out.len() >= ms.len() * cols.len()
    );
    // SAFETY: the ISA's features are available (module invariant); every row `m` in `ms` has
    // `k` floats at `data[m * stride..]`, the panels' weights and biases are in `b` and
    // `bias`, and the rows' outputs in `out` (asserted).
    unsafe {
        direct_avx2(
            width,
            data.as_ptr(),
            stride,
            ms,
            (b.as_ptr(), bias.as_ptr(), k),
            cols,
            act,
            out.as_mut_ptr(),
        )
    }
}

/// [`gemm_direct_f32_avx2`] after its checks: per block of rows, every panel of `cols`. A
/// panel the tile fills whole is stored straight into `out` (rows of `cols.len()`), a partial
/// one through a tile on the stack; a panel of at most 8 channels through the 8-channel tile.
///
/// # Safety
/// As asserted by [`gemm_direct_f32_avx2`] (`b`, `bias` and `out` its slices' pointers), on a
/// CPU with AVX2 and FMA.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
unsafe fn direct_avx2(
    width: usize,
    data: *const f32,
    stride: usize,
    ms: Range<usize>,
    (b, bias, k): (*const f32, *const f32, usize),
    cols: Range<usize>,
    act: Activation,
    out: *mut f32,
) {
    let nc = cols.len();
    // The rows split evenly over the fewest blocks of at most MR_F32 rows (32 rows as 6, 6,
    // 5, 5, 5, 5, not 6 x 5 and 2): a block of one or two rows has too few independent
    // multiply-add chains to keep the FMA units busy.
    let blocks = ms.len().div_ceil(MR_F32);
    let (base, extra) = (ms.len() / blocks, ms.len() % blocks);
    // Weights bigger than L1 with rows that stay in L2 (a late 1x1 layer: 9 rows, 150-600
    // KB of weights): each panel goes through every row block before the next, so its
    // weights come from L2 once and stay in L1 for the other blocks (block by block, every
    // block reads all the weights from L2 again).
    let panels = cols.start / NR_F32..cols.end.div_ceil(NR_F32);
    if blocks > 1
        && ms.len() * k * 4 <= DIRECT_LHS_L2_BYTES
        && panels.len() * k * NR_F32 * 4 > DIRECT_RHS_L1_BYTES
    {
        for p in panels {
            let mut m = ms.start;
            for i in 0..blocks {
                let rows = base + usize::from(i < extra);
                // SAFETY: the caller's contract, for rows m..m + rows and panel p (whose
                // columns are inside `cols`).
                unsafe {
                    direct_tile(
                        width,
                        data,
                        stride,
                        (ms.start, m, rows),
                        (b, bias, k),
                        (&cols, p),
                        act,
                        out,
                    )
                };
                m += rows;
            }
        }
        return;
    }
    let mut m = ms.start;
    for i in 0..blocks {
        let rows = base + usize::from(i < extra);
        let mut ptrs = [core::ptr::null::<f32>(); MR_F32];
        for (r, p) in ptrs.iter_mut().enumerate().take(rows) {
            // SAFETY: row m + r < ms.end is inside `data` (the caller's contract).
            *p = unsafe { data.add((m + r) * stride) };
        }
        let lhs = WholeRows { ptrs: &ptrs, k };
        // SAFETY: rows m..m + rows of `out` (the caller's contract).
        let o = unsafe { out.add((m - ms.start) * nc) };
        for p in cols.start / NR_F32..cols.end.div_ceil(NR_F32) {
            let c0 = p * NR_F32;
            let cn = (cols.end - c0).min(NR_F32);
            // A last panel of at most 8 channels (24, 56 or 120 in all) takes the 8-channel
            // tile too: the other half's multiply-adds would be thrown away.
            let width = if cn <= NR_F32 / 2 { NR_F32 / 2 } else { width };
            let whole = cn == width;
            let mut tile = [0f32; MR_F32 * NR_F32];
            // SAFETY: panel p's weights and bias are inside `b` and `bias`, the rows readable
            // (the caller's contract); a whole panel's rows of `width` floats at `o + c0 -
            // cols.start + r * nc` are inside `out` (c0 - cols.start + width <= nc), a
            // partial panel goes to the tile and its first `cn` channels of each row are
            // copied to the same place.
            unsafe {
                let (bp, biasp) = (b.add(p * k * NR_F32), bias.add(p * NR_F32));
                let biasp = core::slice::from_raw_parts(biasp, NR_F32);
                let at = o.add(c0 - cols.start);
                let (dst, ld) = if whole {
                    (at, nc)
                } else {
                    (tile.as_mut_ptr(), NR_F32)
                };
                tile_f32_avx2_rows(width, rows, lhs, bp, biasp, act, dst, ld);
                if !whole {
                    for r in 0..rows {
                        core::ptr::copy_nonoverlapping(
                            tile.as_ptr().add(r * NR_F32),
                            at.add(r * nc),
                            cn,
                        );
                    }
                }
            }
        }
        m += rows;
    }
}

/// One tile of [`direct_avx2`]: rows `m..m + rows` (`m0` the first row of `out`) and panel
/// `p` of `cols`, a whole panel stored straight into `out`, a partial one through a tile.
///
/// # Safety
/// As [`direct_avx2`], for these rows and this panel.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
unsafe fn direct_tile(
    width: usize,
    data: *const f32,
    stride: usize,
    (m0, m, rows): (usize, usize, usize),
    (b, bias, k): (*const f32, *const f32, usize),
    (cols, p): (&Range<usize>, usize),
    act: Activation,
    out: *mut f32,
) {
    let nc = cols.len();
    let mut ptrs = [core::ptr::null::<f32>(); MR_F32];
    for (r, ptr) in ptrs.iter_mut().enumerate().take(rows) {
        // SAFETY: row m + r is inside `data` (the caller's contract).
        *ptr = unsafe { data.add((m + r) * stride) };
    }
    let lhs = WholeRows { ptrs: &ptrs, k };
    let c0 = p * NR_F32;
    let cn = (cols.end - c0).min(NR_F32);
    let width = if cn <= NR_F32 / 2 { NR_F32 / 2 } else { width };
    let mut tile = [0f32; MR_F32 * NR_F32];
    // SAFETY: as in direct_avx2: panel p's weights and bias, rows m..m + rows of `out` at
    // columns c0 - cols.start.. (a whole panel's `width` of them, else the first `cn` copied
    // from the tile).
    unsafe {
        let biasp = core::slice::from_raw_parts(bias.add(p * NR_F32), NR_F32);
        let at = out.add((m - m0) * nc + c0 - cols.start);
        if cn == width {
            tile_f32_avx2_rows(width, rows, lhs, b.add(p * k * NR_F32), biasp, act, at, nc);
        } else {
            let t = tile.as_mut_ptr();
            tile_f32_avx2_rows(
                width,
                rows,
                lhs,
                b.add(p * k * NR_F32),
                biasp,
                act,
                t,
                NR_F32,
            );
            for r in 0..rows {
                core::ptr::copy_nonoverlapping(t.add(r * NR_F32), at.add(r * nc), cn);
            }
        }
    }
}

/// The tiles of a run of `rows` GEMM rows read in place at a fixed stride, in segments, for
/// one 16-channel panel `b` (`[k][16]`): segment `s` (reduction indices from `segs[s].0`,
/// `seg_len` of them) of row `r` is `data[segs[s].1 + r * stride..][..seg_len]`; reduction
/// indices in no segment count as zero. Tiles of `block` rows (the last one the rest), row `r`'s first
/// `width` channels (16, or 8 for a layer of at most 8 channels) stored to
/// `out.0[r * out.1..]`. A convolution's windows inside the input, one segment per kernel row:
/// no gathering.
#[allow(clippy::too_many_arguments)]
pub(crate) fn tile_f32_strided_run(
    isa: Isa,
    width: usize,
    data: &[f32],
    (segs, seg_len, stride): (&[(usize, usize)], usize, usize),
    (rows, block): (usize, usize),
    (b, bias): (&[f32], &[f32]),
    act: Activation,
    (out, ld): (&mut [f32], usize),
) {
    let k = b.len() / NR_F32;
    // Every segment's reduction indices within `k` and every row's segment inside `data`.
    let segs_in = segs
        .iter()
        .all(|&(koff, at)| koff + seg_len <= k && at + (rows - 1) * stride + seg_len <= data.len());
    // One check (one panic site) for the whole contract.
    assert!(
        matches!(isa, Isa::Avx2 | Isa::AvxVnni | Isa::Avx512Vnni)
            && (width == NR_F32 || width == NR_F32 / 2)
            && rows >= 1
            && (1..=MR_F32).contains(&block)
            && segs.len() <= STRIDED_SEGS_F32
            && segs_in
            && bias.len() == NR_F32
            && ld >= width
            && out.len() >= (rows - 1) * ld + width
    );
    // SAFETY: the ISA's features are available (module invariant); every segment of every
    // row is inside `data`, its reduction indices within `k`, and every row's outputs inside
    // `out` (asserted).
    unsafe {
        strided_run_avx2(
            width,
            data.as_ptr(),
            (segs, seg_len, stride),
            (rows, block),
            (b, bias),
            act,
            (out.as_mut_ptr(), ld),
        )
    }
}

/// [`tile_f32_strided_run`] after its checks.
///
/// # Safety
/// As asserted by [`tile_f32_strided_run`], on a CPU with AVX2 and FMA.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
unsafe fn strided_run_avx2(
    width: usize,
    data: *const f32,
    (segs, seg_len, stride): (&[(usize, usize)], usize, usize),
    (rows, block): (usize, usize),
    (b, bias): (&[f32], &[f32]),
    act: Activation,
    (out, ld): (*mut f32, usize),
) {
    let mut ptrs = [(0, [core::ptr::null::<f32>(); MR_F32]); STRIDED_SEGS_F32];
    let mut r0 = 0;
    while r0 < rows {
        let here = (rows - r0).min(block);
        for (&(koff, at), (ko, ptrs)) in segs.iter().zip(&mut ptrs) {
            *ko = koff;
            for (r, p) in ptrs.iter_mut().enumerate().take(here) {
                // SAFETY: row r0 + r < rows of this segment is inside `data` (the contract).
                *p = unsafe { data.add(at + (r0 + r) * stride) };
            }
        }
        let lhs = SegRows {
            segs: &ptrs[..segs.len()],
            len: seg_len,
        };
        // SAFETY: the contract, for rows r0..r0 + here and their outputs.
        unsafe {
            let o = out.add(r0 * ld);
            tile_f32_avx2_rows(width, here, lhs, b.as_ptr(), bias, act, o, ld);
        }
        r0 += here;
    }
}
