//! The float GEMM tiles: AVX2 + FMA, and AVX-512 tiles reading the left-hand side in place,
//! through row pointers, or strided.

use super::*;

/// `tile[r][j] = act(bias[j] + rows[r] · b[:, j])` for one 16-channel panel `b` (`[k][16]`),
/// for the panel's first `width` channels: 16, or 8 for a layer of at most 8 channels (half
/// the multiply-adds; lanes 8.. of `tile` are then left as they are).
pub(crate) fn tile_f32(
    isa: Isa,
    width: usize,
    rows: &[&[f32]],
    b: &[f32],
    bias: &[f32],
    act: Activation,
    tile: &mut [[f32; NR_F32]; MR_F32],
) {
    let tile = (tile.as_flattened_mut(), NR_F32);
    tile_f32_out(isa, width, rows, b, bias, act, tile)
}

/// [`tile_f32`] storing row `r` to `out[r * stride..][..width]` (a whole panel straight
/// into the output, without a copy out of a tile).
pub(crate) fn tile_f32_out(
    isa: Isa,
    width: usize,
    rows: &[&[f32]],
    b: &[f32],
    bias: &[f32],
    act: Activation,
    out: (&mut [f32], usize),
) {
    let k = b.len() / NR_F32;
    let ptrs = f32_row_ptrs(rows, k);
    let lhs = WholeRows { ptrs: &ptrs, k };
    // SAFETY: every row has `k` values (checked by `f32_row_ptrs`), reduction indices 0..k.
    unsafe { tile_f32_lhs(isa, width, lhs, rows.len(), b, bias, act, out) }
}

/// Most segments of [`tile_f32_strided_run`] (kernel rows of a convolution read in place).
pub(crate) const STRIDED_SEGS_F32: usize = 7;

/// The rows of an AVX2 float tile, in segments: segment `s` of row `r` is `len` floats at
/// `ptrs[r]`, reduction indices `koff..koff + len` (`(koff, len, ptrs) = seg(s)`).
pub(super) trait Avx2Lhs: Copy {
    fn segs(&self) -> usize;
    fn seg(&self, s: usize) -> (usize, usize, &[*const f32; MR_F32]);
}

/// Whole rows of `k` values: one segment.
#[derive(Clone, Copy)]
pub(super) struct WholeRows<'a> {
    pub(super) ptrs: &'a [*const f32; MR_F32],
    pub(super) k: usize,
}

impl Avx2Lhs for WholeRows<'_> {
    #[inline(always)]
    fn segs(&self) -> usize {
        1
    }
    #[inline(always)]
    fn seg(&self, _: usize) -> (usize, usize, &[*const f32; MR_F32]) {
        (0, self.k, self.ptrs)
    }
}

/// Segments of `len` values, each with its first reduction index.
#[derive(Clone, Copy)]
pub(super) struct SegRows<'a> {
    pub(super) segs: &'a [(usize, [*const f32; MR_F32])],
    pub(super) len: usize,
}

impl Avx2Lhs for SegRows<'_> {
    #[inline(always)]
    fn segs(&self) -> usize {
        self.segs.len()
    }
    #[inline(always)]
    fn seg(&self, s: usize) -> (usize, usize, &[*const f32; MR_F32]) {
        let (koff, ref ptrs) = self.segs[s];
        (koff, self.len, ptrs)
    }
}

/// [`tile_f32_avx2_rows`] for [`tile_f32`], checking the output.
///
/// # Safety
/// For every segment `(koff, len, ptrs)` of `lhs`, `ptrs[..rows]` readable for `len` floats
/// and `koff + len <= b.len() / 16`. Row `r` goes to `out.0[r * out.1..][..width]`.
#[allow(clippy::too_many_arguments)]
unsafe fn tile_f32_lhs<L: Avx2Lhs>(
    isa: Isa,
    width: usize,
    lhs: L,
    rows: usize,
    b: &[f32],
    bias: &[f32],
    act: Activation,
    (out, stride): (&mut [f32], usize),
) {
    debug_assert!(isa != Isa::Portable);
    debug_assert!(width == NR_F32 || matches!(isa, Isa::Avx2 | Isa::AvxVnni));
    let _ = isa;
    assert!(
        bias.len() == NR_F32
            && (1..=MR_F32).contains(&rows)
            && (width == NR_F32 || width == 8)
            && out.len() >= (rows - 1) * stride + width
    );
    // SAFETY: the ISA's features are available (module invariant, `available`); the segments'
    // rows and weights are readable (the caller's contract), the rows' outputs writable
    // (asserted).
    unsafe {
        tile_f32_avx2_rows(
            width,
            rows,
            lhs,
            b.as_ptr(),
            bias,
            act,
            out.as_mut_ptr(),
            stride,
        )
    }
}

/// The row-count and width dispatch of the AVX2 tiles: `act(bias + rows · b)` for the first
/// `rows` (1 to 6) rows of `lhs` and one 16-channel panel `b` (`[k][16]`), row `r`'s first
/// `width` channels (16, or 8) stored to `out + r * stride`. Every driver (one tile, a row
/// block's panels, a run of row blocks) calls this one copy per kind of rows rather than
/// inlining the tiles: their code stays small, and code is resident memory on a device.
///
/// # Safety
/// AVX2 and FMA available; `width` 16 or 8 and `rows` 1 to 6; for every segment `(koff, len,
/// ptrs)` of `lhs`, `ptrs[..rows]` readable for `len` floats and `b` for `(koff + len) * 16`;
/// `bias` 16 floats; `out + r * stride` writable for `width` floats for each row `r`.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn tile_f32_avx2_rows<L: Avx2Lhs>(
    width: usize,
    rows: usize,
    lhs: L,
    b: *const f32,
    bias: &[f32],
    act: Activation,
    out: *mut f32,
    stride: usize,
) {
    macro_rules! dispatch {
        ($($n:literal)*) => {
            match (width, rows) {
                // SAFETY: the caller's contract.
                $(
                    (NR_F32, $n) => unsafe { tile_f32_avx2::<$n, L>(lhs, b, bias, act, out, stride) },
                    (_, $n) => unsafe { tile_f32_avx2_8::<$n, L>(lhs, b, bias, act, out, stride) },
                )*
                _ => unreachable!(),
            }
        };
    }
    dispatch!(1 2 3 4 5 6)
}

#[target_feature(enable = "avx2,fma")]
unsafe fn tile_f32_avx2_8<const MR: usize, L: Avx2Lhs>(
    lhs: L,
    b: *const f32,
    bias: &[f32],
    act: Activation,
    out: *mut f32,
    stride: usize,
) {
    let mut acc = [_mm256_setzero_ps(); MR];
    for s in 0..lhs.segs() {
        let (koff, len, rows) = lhs.seg(s);
        for kk in 0..len {
            // SAFETY: koff + kk < k: b has k * 16 floats and every row len (the caller's
            // contract).
            unsafe {
                let b0 = _mm256_loadu_ps(b.add((koff + kk) * NR_F32));
                for (r, acc) in acc.iter_mut().enumerate() {
                    let av = _mm256_broadcast_ss(&*rows[r].add(kk));
                    *acc = _mm256_fmadd_ps(av, b0, *acc);
                }
            }
        }
    }
    // SAFETY: bias has 16 floats; row r's 8 outputs at out + r * stride are writable (the
    // caller's contract).
    unsafe {
        let bias0 = _mm256_loadu_ps(bias.as_ptr());
        for (r, acc) in acc.iter().enumerate() {
            let v = activate(_mm256_add_ps(*acc, bias0), act);
            _mm256_storeu_ps(out.add(r * stride), v);
        }
    }
}

/// Every panel of one block of `rows` GEMM rows with AVX-512, stored straight into `out`:
/// `out[r * n + j] = act(bias[j] + A[r] · B[:, j])` (Tanh left to the caller), where row `r`
/// of `A` is given by `segs`: segment `s` holds reduction indices `koff..koff + seg_len` at
/// `srcs[source][offset..]` (reduction indices in no segment are zero). `b` is packed in
/// groups of four panels (`[group][k][64]`, the last group narrower, see `GemmF32::pack`) and
/// `bias` padded to whole panels. A group is a tile of up to 6 rows x 64 channels: 24
/// independent multiply-add chains keep both FMA units busy with one weight load per 6
/// multiply-adds; the last partial panel goes through masked stores. Only the groups in
/// `groups` are computed (`0..usize::MAX`: all), their columns of `out` written.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_rows_f32_avx512(
    srcs: [&[f32]; 3],
    segs: &[SegF32],
    seg_len: usize,
    rows: usize,
    b: &[f32],
    bias: &[f32],
    n: usize,
    k: usize,
    act: Activation,
    out: &mut [f32],
    groups: Range<usize>,
) {
    let panels = n.div_ceil(NR_F32);
    assert!(b.len() >= panels * k * NR_F32 && bias.len() >= panels * NR_F32);
    assert!(n > 0 && (1..=MR_F32).contains(&rows) && out.len() >= rows * n);
    assert!(segs.len() <= MAX_SEGS_F32);
    for seg in segs {
        assert!(seg.koff + seg_len <= k);
    }
    let lhs = (srcs, segs, seg_len, rows, groups);
    let (b, bias, out) = (b.as_ptr(), bias.as_ptr(), out.as_mut_ptr());
    // The row pointers live in an array sized for the segments (initializing room for
    // MAX_SEGS_F32 on every block costs as much as a small block's multiply-adds).
    match segs.len() {
        // SAFETY: `b`, `bias` and `out` as asserted above.
        0 | 1 => unsafe { gemm_rows_f32_avx512_segs::<1>(lhs, b, bias, n, k, act, out) },
        // SAFETY: as above.
        2..=4 => unsafe { gemm_rows_f32_avx512_segs::<4>(lhs, b, bias, n, k, act, out) },
        // SAFETY: as above.
        _ => unsafe { gemm_rows_f32_avx512_segs::<MAX_SEGS_F32>(lhs, b, bias, n, k, act, out) },
    }
}

/// Left-hand sides up to this size may be swept once per group of output channels by
/// [`gemm_direct_f32_avx512`].
pub(super) const DIRECT_LHS_L2_BYTES: usize = 512 << 10;
/// Weights up to this size stay in L1 without help.
pub(super) const DIRECT_RHS_L1_BYTES: usize = 32 << 10;

/// [`gemm_rows_f32_avx512`] for rows `ms` of a matrix in place (row `m` is
/// `data[m * stride..][..k]`), all row blocks in one call: `out` starts at row `ms.start`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_direct_f32_avx512(
    data: &[f32],
    stride: usize,
    ms: Range<usize>,
    b: &[f32],
    bias: &[f32],
    n: usize,
    k: usize,
    act: Activation,
    out: &mut [f32],
) {
    let panels = n.div_ceil(NR_F32);
    assert!(b.len() >= panels * k * NR_F32 && bias.len() >= panels * NR_F32);
    assert!(n > 0 && out.len() >= ms.len() * n);
    if ms.is_empty() {
        return;
    }
    assert!((ms.end - 1) * stride + k <= data.len());
    let koffs = [0usize];
    let (b, bias) = (b.as_ptr(), bias.as_ptr());
    // Weights bigger than L1 with a left-hand side that stays in L2: the rows are swept once
    // per group of 64 channels, so the group's weights stay in L1 across the row blocks
    // (else every row block reads all the weights; sweeping per group when they fit L1
    // anyway only writes the output in partial lines).
    let group_outer = ms.len() > MR_F32
        && ms.len() * k * 4 <= DIRECT_LHS_L2_BYTES
        && k * n * 4 > DIRECT_RHS_L1_BYTES;
    if !group_outer {
        // Row blocks at a fixed stride: no row pointers to build per block and no prefetch
        // check in the innermost loop (the K=16 1x1 layers of MobileNetV2's block 4.6 -> 4.3
        // us).
        let base = [data[ms.start * stride..].as_ptr()];
        let lhs = StridedLhs {
            bases: &base,
            koffs: &koffs,
            seg_len: k,
            stride,
            row0: 0,
        };
        // SAFETY: only called for Isa::Avx512Vnni, chosen when the CPU has AVX-512 F/VL; rows
        // of the block have k floats each ((ms.end - 1) * stride + k <= data.len(), asserted
        // above), `b` and `bias` cover every panel and `out` has `ms.len() * n` floats
        // (asserted).
        unsafe { direct_blocks_f32(lhs, ms.len(), b, bias, n, k, act, out.as_mut_ptr()) };
        return;
    }
    for g in 0..panels.div_ceil(GROUP_F32) {
        // The next group's weights (one 64-byte line per panel and reduction index) are
        // prefetched into L2 while this group's later row blocks run, spread evenly over them
        // (at most one per reduction index): else the first row block of every group waits on
        // L3 for them (the 7x7 layers of MobileNetV2 have 1.2-1.6 MB of weights for 49 rows).
        let next_p = (g + 1) * GROUP_F32;
        let next_lines = panels.saturating_sub(next_p).min(GROUP_F32) * k;
        let nblocks = ms.len().div_ceil(MR_F32);
        let mut m0 = ms.start;
        while m0 < ms.end {
            let block = (m0 - ms.start) / MR_F32;
            let per = next_lines.div_ceil(nblocks.max(2) - 1).clamp(1, k);
            let pf_first = (block.saturating_sub(1) * per).min(next_lines);
            let pf = if block == 0 || pf_first >= next_lines {
                (b, 0, 1)
            } else {
                // SAFETY: a next group exists (next_lines > 0), and line pf_first < next_lines
                // of it is within its k * g * 16 floats of `b`.
                let at = unsafe { b.add(next_p * k * NR_F32 + pf_first * NR_F32) };
                (at, (next_lines - pf_first).min(per), k / per)
            };
            let rows = (ms.end - m0).min(MR_F32);
            let mut ptrs = [[data.as_ptr(); MR_F32]; 1];
            for (r, p) in ptrs[0].iter_mut().enumerate().take(rows) {
                *p = data[(m0 + r) * stride..].as_ptr();
            }
            let lhs = (&ptrs[..], &koffs[..], k);
            let o = out[(m0 - ms.start) * n..].as_mut_ptr();
            let groups = g..g + 1;
            macro_rules! dispatch {
                ($($n:literal)*) => {
                    match rows {
                        // SAFETY: only called for Isa::Avx512Vnni, chosen when the CPU has
                        // AVX-512 F/VL; rows m0..m0 + rows have k floats each ((ms.end - 1) *
                        // stride + k <= data.len(), asserted above), `b` and `bias` cover
                        // every panel and `o` is followed by `rows * n` floats of `out`
                        // (asserted).
                        $($n => unsafe {
                            gemm_rows_f32_avx512_mr::<$n, _>(lhs, b, bias, n, k, act, o, groups, pf)
                        },)*
                        _ => unreachable!(),
                    }
                };
            }
            dispatch!(1 2 3 4 5 6);
            m0 += MR_F32;
        }
    }
}

/// The row blocks of [`gemm_direct_f32_avx512`] without the groups outer, in one function
/// compiled for AVX-512 so the full blocks' tile kernel inlines into the loop.
///
/// # Safety
/// AVX-512 F/VL; `lhs` rows `0..rows` readable for `k` floats each; `b`, `bias` as
/// [`gemm_rows_f32_avx512_mr`]; `out` writable for `rows * n` floats.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
unsafe fn direct_blocks_f32(
    mut lhs: StridedLhs<'_>,
    rows: usize,
    b: *const f32,
    bias: *const f32,
    n: usize,
    k: usize,
    act: Activation,
    out: *mut f32,
) {
    let all = 0..usize::MAX;
    while lhs.row0 + MR_F32 <= rows {
        // SAFETY: the contract, for rows row0..row0 + MR_F32.
        unsafe {
            let o = out.add(lhs.row0 * n);
            gemm_rows_f32_avx512_mr::<MR_F32, _>(
                lhs,
                b,
                bias,
                n,
                k,
                act,
                o,
                all.clone(),
                (b, 0, 1),
            );
        }
        lhs.row0 += MR_F32;
    }
    let o = out.wrapping_add(lhs.row0 * n);
    macro_rules! dispatch {
        ($($n:literal)*) => {
            match rows - lhs.row0 {
                0 => {}
                // SAFETY: the contract, for the last rows.
                $($n => unsafe {
                    gemm_rows_f32_avx512_mr::<$n, _>(lhs, b, bias, n, k, act, o, all, (b, 0, 1))
                },)*
                _ => unreachable!(),
            }
        };
    }
    dispatch!(1 2 3 4 5);
}

/// Rows of the tall tiles of [`gemm_strided_f32_avx512`] for one or two panels (12 x 16:
/// 12 accumulators, 12 x 32: 24), where the 6-row tile has too few independent multiply-add
/// chains to hide their latency and broadcasts one input per one or two multiply-adds.
pub(crate) const TALL_MR_F32: usize = 12;

/// Rows up to which one panel goes in one tile (16 accumulators) rather than two: short
/// output rows of a convolution, one call each (MobileNetV2 block's 16-pixel rows of its 3x3
/// stride-2 layer: 3.1 -> 2.9 us; longer runs were no faster or slower with 16-row tiles).
pub(crate) const TALL1_MR_F32: usize = 16;

/// [`gemm_rows_f32_avx512`] for `rows` rows at a fixed stride, all row blocks in one call:
/// segment `s` (first reduction index `segs[s].0`) of row `r` is
/// `data[segs[s].1 + r * stride..][..seg_len]`; `out` starts at row 0. Up to two panels (wider
/// outputs take [`gemm_direct_f32_avx512`] or the gathered blocks), in tiles of up to
/// [`TALL_MR_F32`] rows, the rows split evenly over them (one panel of up to
/// [`TALL1_MR_F32`] rows in one tile).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_strided_f32_avx512(
    data: &[f32],
    segs: &[(usize, usize)],
    seg_len: usize,
    stride: usize,
    rows: usize,
    b: &[f32],
    bias: &[f32],
    n: usize,
    k: usize,
    act: Activation,
    out: &mut [f32],
) {
    let panels = n.div_ceil(NR_F32);
    assert!(b.len() >= panels * k * NR_F32 && bias.len() >= panels * NR_F32);
    assert!(n > 0 && n <= 2 * NR_F32 && out.len() >= rows * n && segs.len() <= MAX_SEGS_F32);
    if rows == 0 {
        return;
    }
    let mut bases = [data.as_ptr(); MAX_SEGS_F32];
    let mut koffs = [0usize; MAX_SEGS_F32];
    for ((&(koff, at), base), ko) in segs.iter().zip(&mut bases).zip(&mut koffs) {
        assert!(koff + seg_len <= k);
        // Every row's segment is inside `data` (checked by the slicing).
        *base = data[at..at + (rows - 1) * stride + seg_len].as_ptr();
        *ko = koff;
    }
    let mut lhs = StridedLhs {
        bases: &bases[..segs.len()],
        koffs: &koffs[..segs.len()],
        seg_len,
        stride,
        row0: 0,
    };
    let (b, bias) = (b.as_ptr(), bias.as_ptr());
    if n <= NR_F32 && (TALL_MR_F32 + 1..=TALL1_MR_F32).contains(&rows) {
        let (o, none) = (out.as_mut_ptr(), (b, 0, 1));
        macro_rules! dispatch {
            ($($n:literal)*) => {
                match rows {
                    // SAFETY: as below, for all the rows in one tile of one panel.
                    $($n => unsafe {
                        gemm_group_f32::<$n, 1, _>(lhs, b, bias, n, 0, act, o, none)
                    },)*
                    _ => unreachable!(),
                }
            };
        }
        dispatch!(13 14 15 16);
        return;
    }
    // Blocks of `per` or `per + 1` rows (the first `extra`): no short last tile.
    let blocks = rows.div_ceil(TALL_MR_F32);
    let (per, extra) = (rows / blocks, rows % blocks);
    for block in 0..blocks {
        let here = per + usize::from(block < extra);
        let o = out[lhs.row0 * n..].as_mut_ptr();
        macro_rules! dispatch {
            ($($n:literal)*) => {
                match here {
                    // SAFETY: only called for Isa::Avx512Vnni, chosen when the CPU has AVX-512
                    // F/VL; rows row0..row0 + here of every segment have seg_len floats in
                    // `data` (row0 + here <= rows, sliced above) and their weights are within
                    // `k` (asserted), `b` and `bias` cover every panel (n <= 32, asserted)
                    // and `o` is followed by `here * n` floats of `out` (asserted).
                    $($n => unsafe { tall_f32::<$n>(lhs, b, bias, n, act, o) },)*
                    _ => unreachable!(),
                }
            };
        }
        dispatch!(1 2 3 4 5 6 7 8 9 10 11 12);
        lhs.row0 += here;
    }
}

/// One tile of up to two panels (all of them), `MR` rows.
///
/// # Safety
/// As [`gemm_rows_f32_avx512_mr`], with `n <= 32`.
#[inline(always)]
unsafe fn tall_f32<const MR: usize>(
    lhs: StridedLhs<'_>,
    b: *const f32,
    bias: *const f32,
    n: usize,
    act: Activation,
    out: *mut f32,
) {
    let none = (b, 0, 1);
    // SAFETY: the caller's contract; one group of one or two panels starts at `b`.
    unsafe {
        if n > NR_F32 {
            gemm_group_f32::<MR, 2, _>(lhs, b, bias, n, 0, act, out, none)
        } else {
            gemm_group_f32::<MR, 1, _>(lhs, b, bias, n, 0, act, out, none)
        }
    }
}

/// [`gemm_rows_f32_avx512`] after its checks on `b`, `bias`, `out` and the segments' `koff`:
/// resolves (and checks) every row of up to `S` segments to a pointer.
///
/// # Safety
/// `b` readable for `panels * k * 16` floats, `bias` for `panels * 16`, `out` writable for
/// `rows * n` (`panels = n.div_ceil(16)`); `segs.len() <= S`, every `koff + seg_len <= k`.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_rows_f32_avx512_segs<const S: usize>(
    (srcs, segs, seg_len, rows, groups): ([&[f32]; 3], &[SegF32], usize, usize, Range<usize>),
    b: *const f32,
    bias: *const f32,
    n: usize,
    k: usize,
    act: Activation,
    out: *mut f32,
) {
    let mut ptrs = [[core::ptr::null::<f32>(); MR_F32]; S];
    let mut koffs = [0usize; S];
    for ((seg, ptrs), koff) in segs.iter().zip(&mut ptrs).zip(&mut koffs) {
        *koff = seg.koff;
        for (&(src, at), ptr) in seg.rows[..rows].iter().zip(ptrs.iter_mut()) {
            *ptr = srcs[src as usize][at..at + seg_len].as_ptr();
        }
    }
    let lhs = (&ptrs[..segs.len()], &koffs[..segs.len()], seg_len);
    macro_rules! dispatch {
        ($($n:literal)*) => {
            match rows {
                // SAFETY: only called for Isa::Avx512Vnni, chosen when the CPU has AVX-512
                // F/VL; every segment's first `rows` pointers have `seg_len` readable floats
                // (sliced above) and its B rows are within `k`, `b` and `bias` cover every
                // panel and `out` every row of `n` (the caller's contract).
                $($n => unsafe {
                    gemm_rows_f32_avx512_mr::<$n, _>(
                        lhs, b, bias, n, k, act, out, groups.clone(), (b, 0, 1)
                    )
                },)*
                _ => unreachable!(),
            }
        };
    }
    dispatch!(1 2 3 4 5 6)
}

/// The left-hand side of a row block: row pointers and first reduction index of each segment,
/// and the segments' length.
type LhsF32<'a> = (&'a [[*const f32; MR_F32]], &'a [usize], usize);

/// The left-hand side of a tile of `MR` rows as segments of `seg_len` consecutive floats per
/// row, each at a first reduction index: how [`gemm_group_f32`] finds its rows.
trait TileLhs<const MR: usize>: Copy {
    /// Whether tiles of this source take the `pf` prefetch hint (else its check, in the
    /// innermost loop, is compiled out).
    const PREFETCH: bool;
    fn segs(&self) -> usize;
    fn seg_len(&self) -> usize;
    /// Segment `s`'s first reduction index and row pointers.
    ///
    /// # Safety
    /// `s < self.segs()`; the rows' pointers are then readable for `seg_len` floats (each
    /// implementation's contract).
    unsafe fn seg(&self, s: usize) -> (usize, [*const f32; MR]);
}

/// Row pointers per segment (`MR <= MR_F32`): rows anywhere (gathered, padding, in place).
impl<const MR: usize> TileLhs<MR> for LhsF32<'_> {
    const PREFETCH: bool = true;
    #[inline(always)]
    fn segs(&self) -> usize {
        self.0.len().min(self.1.len())
    }
    #[inline(always)]
    fn seg_len(&self) -> usize {
        self.2
    }
    #[inline(always)]
    unsafe fn seg(&self, s: usize) -> (usize, [*const f32; MR]) {
        (self.1[s], core::array::from_fn(|r| self.0[s][r]))
    }
}

/// Rows at a fixed stride: segment `s` of row `r` starts at `bases[s] + (row0 + r) * stride`
/// (one output row of a convolution, or a matrix in place), so a tile's rows cost no
/// per-row bookkeeping and any number of them fit.
#[derive(Clone, Copy)]
struct StridedLhs<'a> {
    bases: &'a [*const f32],
    koffs: &'a [usize],
    seg_len: usize,
    stride: usize,
    row0: usize,
}

impl<const MR: usize> TileLhs<MR> for StridedLhs<'_> {
    const PREFETCH: bool = false;
    #[inline(always)]
    fn segs(&self) -> usize {
        self.bases.len().min(self.koffs.len())
    }
    #[inline(always)]
    fn seg_len(&self) -> usize {
        self.seg_len
    }
    #[inline(always)]
    unsafe fn seg(&self, s: usize) -> (usize, [*const f32; MR]) {
        // SAFETY: rows row0..row0 + MR of every segment are within the slice `bases[s]`
        // points into ([`gemm_strided_f32_avx512`] checks them before making the tile).
        let at = |r: usize| unsafe { self.bases[s].add((self.row0 + r) * self.stride) };
        (self.koffs[s], core::array::from_fn(at))
    }
}

/// # Safety
/// AVX-512 F/VL; for every segment `s`, its first `MR` row pointers readable for `seg_len`
/// floats and `koffs[s] + seg_len <= k`; `b` readable for `panels * k * 16`,
/// `bias` for `panels * 16`, `out` writable for `MR * n` (`panels = n.div_ceil(16)`).
/// Computes the panels of groups `groups` (of four panels; the last may be narrower).
/// `pf` is a prefetch hint: `pf.1` cache lines (16 floats apart) from `pf.0` into L2.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
unsafe fn gemm_rows_f32_avx512_mr<const MR: usize, L: TileLhs<MR>>(
    lhs: L,
    b: *const f32,
    bias: *const f32,
    n: usize,
    k: usize,
    act: Activation,
    out: *mut f32,
    groups: Range<usize>,
    pf: (*const f32, usize, usize),
) {
    let panels = n.div_ceil(NR_F32);
    // (`groups` may be `0..usize::MAX`, all of them.)
    let mut p = groups.start.saturating_mul(GROUP_F32);
    while p < panels.min(groups.end.saturating_mul(GROUP_F32)) {
        let g = (panels - p).min(GROUP_F32);
        // SAFETY: the group of panels p..p + g starts at p * k * 16 floats of `b` and has
        // k * g * 16 (GemmF32::pack); its bias and output columns are within the caller's.
        unsafe {
            let (bg, bias) = (b.add(p * k * NR_F32), bias.add(p * NR_F32));
            let (o, c0) = (out.add(p * NR_F32), p * NR_F32);
            match g {
                4 => gemm_group_f32::<MR, 4, L>(lhs, bg, bias, n, c0, act, o, pf),
                3 => gemm_group_f32::<MR, 3, L>(lhs, bg, bias, n, c0, act, o, pf),
                2 => gemm_group_f32::<MR, 2, L>(lhs, bg, bias, n, c0, act, o, pf),
                _ => gemm_group_f32::<MR, 1, L>(lhs, bg, bias, n, c0, act, o, pf),
            }
        }
        p += g;
    }
}

/// One `MR` x `G * 16` tile: output channels `c0..c0 + G * 16` (the existing ones) of `MR`
/// rows.
///
/// # Safety
/// As [`gemm_rows_f32_avx512_mr`], for the group's weights `[k][G * 16]` at `bg`, its bias
/// (`G * 16` floats) and `out` pointing at channel `c0` of the first row; prefetches `pf.1`
/// lines from `pf.0` (a hint: one per reduction index up to `pf.1`).
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
unsafe fn gemm_group_f32<const MR: usize, const G: usize, L: TileLhs<MR>>(
    lhs: L,
    bg: *const f32,
    bias: *const f32,
    n: usize,
    c0: usize,
    act: Activation,
    out: *mut f32,
    (pf, pf_lines, pf_step): (*const f32, usize, usize),
) {
    let (mut pf_i, mut pf_next) = (0, 0);
    let cols = G * NR_F32;
    let mut acc = [[_mm512_setzero_ps(); G]; MR];
    let seg_len = lhs.seg_len();
    for s in 0..lhs.segs() {
        // SAFETY: reduction indices koff..koff + seg_len are within k: rows koff.. of the
        // group's [k][G * 16] weights; every row pointer has seg_len floats (the contract).
        unsafe {
            let (koff, rows) = lhs.seg(s);
            let bs = bg.add(koff * cols);
            for kk in 0..seg_len {
                if L::PREFETCH && koff + kk == pf_next && pf_i < pf_lines {
                    _mm_prefetch::<_MM_HINT_T1>(pf.wrapping_add(pf_i * NR_F32) as *const i8);
                    pf_i += 1;
                    pf_next += pf_step;
                }
                let mut w = [_mm512_setzero_ps(); G];
                for (h, w) in w.iter_mut().enumerate() {
                    *w = _mm512_loadu_ps(bs.add(kk * cols + h * NR_F32));
                }
                for (r, acc) in acc.iter_mut().enumerate() {
                    let a = _mm512_set1_ps(*rows[r].add(kk));
                    for (acc, w) in acc.iter_mut().zip(&w) {
                        *acc = _mm512_fmadd_ps(a, *w, *acc);
                    }
                }
            }
        }
    }
    // Masks, bias and clamp bounds first, so the stores below unroll over registers (the
    // accumulators stay in registers instead of going through the stack).
    let mut lanes = [0xFFFF as __mmask16; G];
    let mut bv = [_mm512_setzero_ps(); G];
    for (h, (lanes, bv)) in lanes.iter_mut().zip(&mut bv).enumerate() {
        let cn = n - (c0 + h * NR_F32);
        if cn < NR_F32 {
            *lanes = ((1u32 << cn) - 1) as __mmask16;
        }
        // SAFETY: bias has the group's G * 16 floats.
        *bv = unsafe { _mm512_loadu_ps(bias.add(h * NR_F32)) };
    }
    let clamp = !matches!(act, Activation::None | Activation::Tanh);
    let (lo, hi) = clamp512(act);
    for (r, acc) in acc.iter().enumerate() {
        for h in 0..G {
            let mut v = _mm512_add_ps(acc[h], bv[h]);
            if clamp {
                v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
            }
            // SAFETY: the mask keeps each store to the row's channels c0 + 16h..
            // min(c0 + 16h + 16, n) (the caller's contract).
            unsafe { _mm512_mask_storeu_ps(out.add(r * n + h * NR_F32), lanes[h], v) };
        }
    }
}

/// Reduction indices (64-byte weight lines) ahead that [`tile_f32_avx2`] prefetches.
const PREFETCH_F32: usize = 14;

#[target_feature(enable = "avx2,fma")]
unsafe fn tile_f32_avx2<const MR: usize, L: Avx2Lhs>(
    lhs: L,
    b: *const f32,
    bias: &[f32],
    act: Activation,
    out: *mut f32,
    stride: usize,
) {
    let mut acc = [[_mm256_setzero_ps(); 2]; MR];
    for s in 0..lhs.segs() {
        let (koff, len, rows) = lhs.seg(s);
        for kk in 0..len {
            // SAFETY: koff + kk < k: b has k * 16 floats and every row len (the caller's
            // contract).
            unsafe {
                let bp = b.add((koff + kk) * NR_F32);
                // The weights' line PREFETCH_F32 reduction indices ahead into L1: a panel
                // read from L2 or memory (layers whose weights exceed L1) otherwise waits on
                // each line, as the hardware prefetcher does not run that far ahead.
                _mm_prefetch::<_MM_HINT_T0>(bp.wrapping_add(PREFETCH_F32 * NR_F32) as *const i8);
                let b0 = _mm256_loadu_ps(bp);
                let b1 = _mm256_loadu_ps(bp.add(8));
                for (r, acc) in acc.iter_mut().enumerate() {
                    let av = _mm256_broadcast_ss(&*rows[r].add(kk));
                    acc[0] = _mm256_fmadd_ps(av, b0, acc[0]);
                    acc[1] = _mm256_fmadd_ps(av, b1, acc[1]);
                }
            }
        }
    }
    // SAFETY: bias has 16 floats; row r's 16 outputs at out + r * stride are writable (the
    // caller's contract).
    unsafe {
        let bias0 = _mm256_loadu_ps(bias.as_ptr());
        let bias1 = _mm256_loadu_ps(bias.as_ptr().add(8));
        for (r, acc) in acc.iter().enumerate() {
            let t = out.add(r * stride);
            _mm256_storeu_ps(t, activate(_mm256_add_ps(acc[0], bias0), act));
            _mm256_storeu_ps(t.add(8), activate(_mm256_add_ps(acc[1], bias1), act));
        }
    }
}
