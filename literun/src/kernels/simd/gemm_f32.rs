//! Float CONV_2D and FULLY_CONNECTED through a GEMM over packed weights ([`GemmF32`]).

use super::*;

/// Constant float weights `[N, K]` packed in panels of 16 output channels (`[panel][k][16]`;
/// with AVX-512 in groups of [`GROUP_F32`] panels, `[group][k][64]`).
#[derive(Clone, Debug)]
pub struct GemmF32 {
    pub(crate) isa: Isa,
    pub(crate) n: usize,
    pub(crate) k: usize,
    pub(crate) b: Vec<f32>,
    pub(crate) bias: Vec<f32>,
    pub(crate) act: Activation,
}

/// Rows of the float GEMM tile.
pub(crate) const MR_F32: usize = 6;
/// Output channels of a float GEMM panel.
pub(crate) const NR_F32: usize = 16;
/// Panels of one AVX-512 float GEMM tile (6 rows x 64 channels: 24 accumulators).
pub(crate) const GROUP_F32: usize = 4;
/// Packed weights above this many bytes make [`GemmF32::run`]'s gathered AVX-512 path sweep
/// them one group of output channels at a time, and the other ISAs' path one chunk of
/// [`GROUP_F32`] panels at a time (one group of a 3x3 convolution over 512 channels, 1.2 MB,
/// stays in a 2 MB L2).
const GATHERED_SWEEP_BYTES: usize = 1 << 20;
/// Most kernel rows (KH) of a convolution whose receptive field the AVX-512 float GEMM reads
/// in place, one segment per kernel row (more: gathered im2col rows, one segment).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) const MAX_SEGS_F32: usize = 16;

/// Where a row of one segment of the AVX-512 float GEMM lives.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SrcF32 {
    /// The operator's input (the convolution's input, the dense operator's rows).
    Data,
    /// The gathered row buffers.
    Buf,
    /// A run of padding values.
    Pad,
}

/// One segment of the left-hand side of an AVX-512 float GEMM row block: reduction indices
/// `koff..koff + seg_len` of row `r` are `seg_len` consecutive floats at `rows[r]` (source,
/// offset).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
pub(crate) struct SegF32 {
    pub(crate) koff: usize,
    pub(crate) rows: [(SrcF32, usize); MR_F32],
}

impl GemmF32 {
    pub fn pack(
        isa: Isa,
        weights: &[f32],
        n: usize,
        k: usize,
        bias: Option<&[f32]>,
        act: Activation,
    ) -> Option<GemmF32> {
        if isa == Isa::Portable || !isa.available() || weights.len() != n * k || n == 0 || k == 0 {
            return None;
        }
        let panels = n.div_ceil(NR_F32);
        // AVX-512 interleaves groups of GROUP_F32 panels (`[group][k][width * 16]`, the last
        // group narrower) so its 6 x 64 tile reads one weight stream; other ISAs read one
        // panel at a time. Either way panel `p`'s group starts at `group_start * k * 16`.
        let group = if isa == Isa::Avx512Vnni { GROUP_F32 } else { 1 };
        let mut b = vec![0f32; panels * k * NR_F32];
        // Channel `p * NR_F32 + j`'s weight `kk` goes to `g0 * k * NR_F32 + (kk * width + p -
        // g0) * NR_F32 + j`: a panel's `NR_F32` rows are read side by side (each front to back)
        // and written `NR_F32` values at a time.
        for (p, rows) in weights.chunks(k * NR_F32).enumerate() {
            let g0 = p / group * group;
            let width = (panels - g0).min(group);
            let rows: Vec<&[f32]> = rows.chunks_exact(k).collect();
            let start = g0 * k * NR_F32 + (p - g0) * NR_F32;
            let span = (k - 1) * width * NR_F32 + NR_F32;
            let dst = b[start..start + span].chunks_mut(width * NR_F32);
            for (kk, d) in dst.enumerate() {
                for (d, row) in d[..rows.len()].iter_mut().zip(&rows) {
                    *d = row[kk];
                }
            }
        }
        let mut bv = vec![0f32; panels * NR_F32];
        if let Some(bias) = bias {
            bv[..n].copy_from_slice(&bias[..n]);
        }
        Some(GemmF32 {
            isa,
            n,
            k,
            b,
            bias: bv,
            act,
        })
    }

    pub fn bytes(&self) -> usize {
        (self.b.len() + self.bias.len()) * 4
    }

    /// f32 scratch of [`Self::run`] (row buffers for gathered rows, then a run of padding).
    pub fn scratch_f32(&self) -> usize {
        (MR_F32 + 1) * self.k
    }

    /// `out[m - ms.start, :] = act(rows.row(m) · W^T + bias)` for `m` in `ms`.
    pub(crate) fn run(
        &self,
        ms: Range<usize>,
        rows: &Rows<'_, f32>,
        row_bufs: &mut [f32],
        out: &mut [f32],
    ) {
        self.run_block(ms, 0..self.n, rows, row_bufs, out)
    }

    /// [`Self::run`] for the output channels `cols` only (`cols.start` a multiple of
    /// [`COLS_F32`]; `out` has rows of `cols.len()`), each channel computed exactly as
    /// [`Self::run`] computes it: a GEMM with few rows splits its channels over the workers.
    pub(crate) fn run_block(
        &self,
        ms: Range<usize>,
        cols: Range<usize>,
        rows: &Rows<'_, f32>,
        row_bufs: &mut [f32],
        out: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        if self.isa == Isa::Avx512Vnni {
            return self.run_avx512(ms, cols, rows, row_bufs, out);
        }
        // Weights too big for L2 are swept once per chunk of GROUP_F32 panels, every row
        // block reading that chunk (from L2) before the next: with a few output pixels and
        // many channels (ResNet18's last layers: 16 pixels, 9.4 MB of weights) each row block
        // would otherwise stream all the weights from memory again. The blocks' rows are then
        // gathered once per chunk.
        let (p_first, p_end) = (cols.start / NR_F32, cols.end.div_ceil(NR_F32));
        let sweep = ms.len() > MR_F32 && cols.len() * self.k * 4 > GATHERED_SWEEP_BYTES;
        // Rows in place at a fixed stride (1x1 convolutions, dense rows), weights that fit:
        // one loop over every tile, without the per-tile slicing and dispatch below.
        #[cfg(target_arch = "x86_64")]
        if let (Rows::Direct { data, stride }, false) = (rows, sweep) {
            let width = if self.n <= NR_F32 / 2 {
                NR_F32 / 2
            } else {
                NR_F32
            };
            let packed = (&self.b[..], &self.bias[..], self.k);
            let (ms_len, cols_len) = (ms.len(), cols.len());
            x86::gemm_direct_f32_avx2(
                self.isa, width, data, *stride, ms, packed, cols, self.act, out,
            );
            if self.act == Activation::Tanh {
                for v in out[..ms_len * cols_len].iter_mut() {
                    *v = self.act.apply(*v);
                }
            }
            return;
        }
        let chunk = if sweep { GROUP_F32 } else { p_end - p_first };
        for p in (p_first..p_end).step_by(chunk) {
            let panels = p..(p + chunk).min(p_end);
            self.run_panels(ms.clone(), cols.clone(), panels, rows, row_bufs, out);
        }
    }

    /// [`Self::run_block`] for the panels `panels` of `cols` (the AVX2 and NEON tiles): every
    /// row block of `ms` over those panels.
    fn run_panels(
        &self,
        ms: Range<usize>,
        cols: Range<usize>,
        panels: Range<usize>,
        rows: &Rows<'_, f32>,
        row_bufs: &mut [f32],
        out: &mut [f32],
    ) {
        let (n, k) = (cols.len(), self.k);
        let (base, m_count) = (ms.start, ms.end);
        let mut m0 = base;
        let mut tile = [[0f32; NR_F32]; MR_F32];
        while m0 < m_count {
            #[cfg(target_arch = "x86_64")]
            let (rows_here, in_place) = self.block_f32(rows, m0, m_count);
            #[cfg(not(target_arch = "x86_64"))]
            let rows_here = (m_count - m0).min(MR_F32);
            let mut bufs = row_bufs[..MR_F32 * k].chunks_exact_mut(k);
            let mut rs: [&[f32]; MR_F32] = [&[]; MR_F32];
            #[cfg(target_arch = "x86_64")]
            let gather = rows_here * usize::from(in_place.is_none());
            #[cfg(not(target_arch = "x86_64"))]
            let gather = rows_here;
            for (r, slot) in rs.iter_mut().enumerate().take(gather) {
                let buf = bufs.next().unwrap_or_default();
                *slot = &rows.row(m0 + r, buf)[..k];
            }
            // Writes panel `p` of the tile to the output rows.
            let store = |p: usize, tile: &[[f32; NR_F32]; MR_F32], out: &mut [f32]| {
                let c0 = p * NR_F32;
                let cn = (cols.end - c0).min(NR_F32);
                for (r, t) in tile.iter().enumerate().take(rows_here) {
                    let at = (m0 - base + r) * n + c0 - cols.start;
                    let o = &mut out[at..at + cn];
                    match <&mut [f32; NR_F32]>::try_from(&mut *o) {
                        // A whole panel: a fixed-size copy (vector moves, not a `memcpy` call
                        // per row, which cost more than the copy).
                        Ok(o) => *o = *t,
                        Err(_) => o.copy_from_slice(&t[..cn]),
                    }
                    if self.act == Activation::Tanh {
                        for v in o.iter_mut() {
                            *v = self.act.apply(*v);
                        }
                    }
                }
            };
            let panel = |p: usize| &self.b[p * k * NR_F32..(p + 1) * k * NR_F32];
            let bias = |p: usize| &self.bias[p * NR_F32..(p + 1) * NR_F32];
            // A layer of at most 8 channels fills half the 16-channel tile: the narrow tile
            // skips the other half's multiply-adds.
            #[cfg(target_arch = "x86_64")]
            let width = if self.n <= NR_F32 / 2 {
                NR_F32 / 2
            } else {
                NR_F32
            };
            let mut p = panels.start;
            while p < panels.end {
                // A panel whose channels are all the tile computes (and no Tanh to apply
                // after) is stored straight into the output rows, else through the tile.
                #[cfg(target_arch = "x86_64")]
                {
                    let c0 = p * NR_F32;
                    let direct =
                        (cols.end - c0).min(NR_F32) == width && self.act != Activation::Tanh;
                    let at = (m0 - base) * n + c0 - cols.start;
                    let dst = if direct {
                        (&mut out[at..], n)
                    } else {
                        (tile.as_flattened_mut(), NR_F32)
                    };
                    match (&in_place, rows) {
                        (Some(at), Rows::Conv { input, .. }) => x86::tile_f32_strided_run(
                            self.isa,
                            width,
                            input,
                            (&at.segs[..at.count], at.seg_len, at.stride),
                            (rows_here, at.tile_rows),
                            (panel(p), bias(p)),
                            self.act,
                            dst,
                        ),
                        _ => x86::tile_f32_out(
                            self.isa,
                            width,
                            &rs[..rows_here],
                            panel(p),
                            bias(p),
                            self.act,
                            dst,
                        ),
                    }
                    if !direct {
                        store(p, &tile, out);
                    }
                }
                #[cfg(target_arch = "aarch64")]
                aarch64::tile_f32(
                    self.isa,
                    &rs[..rows_here],
                    panel(p),
                    bias(p),
                    self.act,
                    &mut tile,
                );
                #[cfg(target_arch = "aarch64")]
                store(p, &tile, out);
                p += 1;
            }
            m0 += rows_here;
        }
    }

    /// The rows of the AVX2 tile block starting at row `m0` (rows end at `end`) and, for a
    /// convolution of up to two panels whose block's windows lie inside the input's columns,
    /// their kernel rows in place (kernel rows above or below the input skipped: their
    /// padding is zero). Such blocks split each output row's run of those pixels evenly; the
    /// pixels at the left and right edges are gathered, as many as lie before the next run.
    #[cfg(target_arch = "x86_64")]
    fn block_f32(
        &self,
        rows: &Rows<'_, f32>,
        m0: usize,
        end: usize,
    ) -> (usize, Option<InPlaceF32>) {
        let whole = (end - m0).min(MR_F32);
        let Rows::Conv {
            in_hwc: [in_h, in_w, c],
            k_hw: [k_h, k_w],
            out_w,
            ref p,
            ..
        } = *rows
        else {
            return (whole, None);
        };
        if p.dilation_w != 1 || k_h > x86::STRIDED_SEGS_F32 || self.n > 2 * NR_F32 || out_w == 0 {
            return (whole, None);
        }
        let (sw, pl) = (p.stride_w, p.pad_left);
        // Output columns lo..hi have their windows inside the input's columns.
        let lo = pl.div_ceil(sw);
        let hi = match (in_w + pl).checked_sub(k_w) {
            Some(span) => (span / sw + 1).min(out_w),
            None => 0,
        };
        let (oy, ox) = (m0 / out_w, m0 % out_w);
        if !(lo..hi).contains(&ox) {
            let next = match ox < lo {
                _ if lo >= hi => usize::MAX,
                true => lo - ox,
                false => out_w - ox + lo,
            };
            return (whole.min(next), None);
        }
        let left = (m0 - ox + hi).min(end) - m0;
        let here = left.div_ceil(left.div_ceil(MR_F32));
        // When every panel is stored straight into the output (whole panels, no Tanh), the
        // block is the whole run, its tiles of `here` rows walked in one call.
        let width = if self.n <= NR_F32 / 2 {
            NR_F32 / 2
        } else {
            NR_F32
        };
        let whole_run = self.n.is_multiple_of(width) && self.act != Activation::Tanh;
        let mut at = InPlaceF32 {
            segs: [(0, 0); x86::STRIDED_SEGS_F32],
            count: 0,
            seg_len: k_w * c,
            stride: sw * c,
            tile_rows: here,
        };
        for ky in 0..k_h {
            let y = (oy * p.stride_h + ky * p.dilation_h).wrapping_sub(p.pad_top);
            if y < in_h {
                at.segs[at.count] = (ky * k_w * c, (y * in_w + ox * sw - pl) * c);
                at.count += 1;
            }
        }
        (if whole_run { left } else { here }, Some(at))
    }

    /// `out = act(x · W[cols]ᵀ + bias[cols])` for one row `x` and the output channels `cols`
    /// only (`cols.start` a multiple of [`COLS_F32`]), each channel computed exactly as
    /// [`Self::run`] computes it: a dense layer with one batch row splits its channels over
    /// the workers.
    pub(crate) fn run_cols(&self, cols: Range<usize>, x: &[f32], out: &mut [f32]) {
        let k = self.k;
        let out = &mut out[..cols.len()];
        #[cfg(target_arch = "x86_64")]
        if self.isa == Isa::Avx512Vnni {
            if self.n <= 2 * NR_F32 {
                // `run`'s path for narrow outputs (never split: fewer than 2 * COLS_F32).
                let rows = Rows::Direct { data: x, stride: k };
                return self.run(0..1, &rows, &mut [], out);
            }
            let (b, bias) = (&self.b[cols.start * k..], &self.bias[cols.start..]);
            x86::gemm_direct_f32_avx512(x, k, 0..1, b, bias, cols.len(), k, self.act, out);
            if self.act == Activation::Tanh {
                for v in out.iter_mut() {
                    *v = self.act.apply(*v);
                }
            }
            return;
        }
        let x = &x[..k];
        let mut tile = [[0f32; NR_F32]; MR_F32];
        for p in cols.start / NR_F32..cols.end.div_ceil(NR_F32) {
            let panel = &self.b[p * k * NR_F32..(p + 1) * k * NR_F32];
            let bias = &self.bias[p * NR_F32..(p + 1) * NR_F32];
            #[cfg(target_arch = "x86_64")]
            x86::tile_f32(self.isa, NR_F32, &[x], panel, bias, self.act, &mut tile);
            #[cfg(target_arch = "aarch64")]
            aarch64::tile_f32(self.isa, &[x], panel, bias, self.act, &mut tile);
            let c0 = p * NR_F32;
            let cn = (cols.end - c0).min(NR_F32);
            let o = &mut out[c0 - cols.start..][..cn];
            o.copy_from_slice(&tile[0][..cn]);
            if self.act == Activation::Tanh {
                for v in o.iter_mut() {
                    *v = self.act.apply(*v);
                }
            }
        }
    }

    /// [`Self::run`] with AVX-512: a convolution's receptive field is read in place, one
    /// segment per kernel row (`KW * C` contiguous input floats when the window's columns
    /// lie inside the input), so only windows that cross the left or right edge are gathered
    /// and kernel rows above or below the input are skipped when no row of the block needs
    /// them.
    #[cfg(target_arch = "x86_64")]
    fn run_avx512(
        &self,
        ms: Range<usize>,
        cols: Range<usize>,
        rows: &Rows<'_, f32>,
        scratch: &mut [f32],
        out: &mut [f32],
    ) {
        let (n, k) = (cols.len(), self.k);
        let o = &mut out[..ms.len() * n];
        // The paths are chosen by the whole layer's channels; up to two panels (never split
        // by channels) take `cols` as all of them.
        let narrow = self.n <= 2 * NR_F32;
        let (b, bias) = (&self.b[cols.start * k..], &self.bias[cols.start..]);
        match *rows {
            // Rows in place at a fixed stride, without the segments' per-block bookkeeping.
            Rows::Direct { data, stride } if narrow => gemm_packed_direct_f32_avx512(
                &self.b, &self.bias, n, k, self.act, data, stride, ms, o,
            ),
            Rows::Direct { data, stride } => {
                x86::gemm_direct_f32_avx512(data, stride, ms, b, bias, n, k, self.act, o)
            }
            // Up to two panels (tall tiles): windows in place at a fixed stride per output
            // row. Wider outputs keep the gathered 6-row blocks across output rows (no gain
            // measured from the strided path there, and no short tiles at row ends).
            Rows::Conv { ref p, k_hw, .. }
                if p.dilation_w == 1 && k_hw[0] <= MAX_SEGS_F32 && narrow =>
            {
                self.conv_avx512(ms, rows, o)
            }
            Rows::Conv { .. } => self.gathered_avx512(ms, cols, rows, scratch, o),
        }
        if self.act == Activation::Tanh {
            for v in o.iter_mut() {
                *v = self.act.apply(*v);
            }
        }
    }

    /// [`Self::run_avx512`] for a convolution with dilation 1 across and up to two panels:
    /// each output row's pixels whose windows lie inside the input columns read their kernel
    /// rows in place at a fixed stride ([`x86::gemm_strided_f32_avx512`], kernel rows above
    /// or below the input skipped); a pixel at the left or right edge reads the kernel
    /// columns inside the input the same way, alone.
    #[cfg(target_arch = "x86_64")]
    fn conv_avx512(&self, ms: Range<usize>, rows: &Rows<'_, f32>, out: &mut [f32]) {
        let Rows::Conv {
            input,
            in_hwc: [in_h, in_w, c],
            k_hw: [k_h, k_w],
            out_w,
            ref p,
            ..
        } = *rows
        else {
            unreachable!()
        };
        let (n, k, sw, pl) = (self.n, self.k, p.stride_w, p.pad_left);
        // Output columns lo..hi have their windows inside the input's columns.
        let lo = pl.div_ceil(sw);
        let hi = match (in_w + pl).checked_sub(k_w) {
            Some(span) => span / sw + 1,
            None => 0,
        };
        // Pixels m..end of one output row, kernel columns `kx` of each (inside the input):
        // every kernel row inside the input is a segment at a fixed stride.
        let strided = |m: usize, end: usize, kx: Range<usize>, out: &mut [f32]| {
            let (oy, ox) = (m / out_w, m % out_w);
            let mut segs = [(0, 0); MAX_SEGS_F32];
            let mut count = 0;
            for ky in (0..k_h).filter(|_| !kx.is_empty()) {
                let y = (oy * p.stride_h + ky * p.dilation_h).wrapping_sub(p.pad_top);
                if y < in_h {
                    let x = ox * sw + kx.start - pl;
                    segs[count] = ((ky * k_w + kx.start) * c, (y * in_w + x) * c);
                    count += 1;
                }
            }
            let (b, bias, act) = (&self.b, &self.bias, self.act);
            let (segs, seg_len, rows) = (&segs[..count], kx.len() * c, end - m);
            x86::gemm_strided_f32_avx512(
                input,
                segs,
                seg_len,
                sw * c,
                rows,
                b,
                bias,
                n,
                k,
                act,
                out,
            );
        };
        let mut m = ms.start;
        while m < ms.end {
            let (row, ox) = (m - m % out_w, m % out_w);
            let o = &mut out[(m - ms.start) * n..];
            if (lo..hi).contains(&ox) {
                let end = (row + hi.min(out_w)).min(ms.end);
                strided(m, end, 0..k_w, &mut o[..(end - m) * n]);
                m = end;
            } else {
                // A pixel at the left or right edge alone, reading the kernel columns inside
                // the input (a narrow tile of one row costs less than gathering a block).
                let kx_lo = pl.saturating_sub(ox * sw).min(k_w);
                let kx_hi = (in_w + pl).saturating_sub(ox * sw).clamp(kx_lo, k_w);
                strided(m, m + 1, kx_lo..kx_hi, &mut o[..n]);
                m += 1;
            }
        }
    }

    /// [`Self::run_avx512`] for rows that are not at a fixed stride, in blocks of `MR_F32`:
    /// each block's receptive fields as segments ([`conv_segments`]) or gathered rows.
    #[cfg(target_arch = "x86_64")]
    fn gathered_avx512(
        &self,
        ms: Range<usize>,
        cols: Range<usize>,
        rows: &Rows<'_, f32>,
        scratch: &mut [f32],
        out: &mut [f32],
    ) {
        let (n, k) = (cols.len(), self.k);
        let (b, bias) = (&self.b[cols.start * k..], &self.bias[cols.start..]);
        let (bufs, pads) = scratch[..(MR_F32 + 1) * k].split_at_mut(MR_F32 * k);
        let unset = SegF32 {
            koff: 0,
            rows: [(SrcF32::Pad, 0); MR_F32],
        };
        let mut segs = [unset; MAX_SEGS_F32];
        let mut filled = false;
        // Weights too big for L2 are swept once per group of output channels, every row
        // block of the call reading that group (from L2) before the next: with a few output
        // pixels and many channels (ResNet18's last layers: 16 pixels, 9.4 MB of weights)
        // each row block would otherwise stream all the weights from memory again. The
        // blocks' rows are then gathered once per group.
        let all = n.div_ceil(NR_F32).div_ceil(GROUP_F32);
        let step = if ms.len() > MR_F32 && k * n * 4 > GATHERED_SWEEP_BYTES {
            1
        } else {
            all
        };
        for g0 in (0..all).step_by(step) {
            let mut m0 = ms.start;
            while m0 < ms.end {
                let here = (ms.end - m0).min(MR_F32);
                let (data, count, seg_len) = match *rows {
                    Rows::Direct { .. } => unreachable!("rows in place take the other paths"),
                    Rows::Conv {
                        input,
                        in_hwc,
                        k_hw,
                        out_w,
                        ref p,
                        pad,
                    } if p.dilation_w == 1 && k_hw[0] <= MAX_SEGS_F32 => {
                        if !filled {
                            pads.fill(pad);
                            filled = true;
                        }
                        let seg_len = k_hw[1] * in_hwc[2];
                        let count = conv_segments(
                            input, in_hwc, k_hw, out_w, p, pad, m0, here, bufs, k, &mut segs,
                        );
                        (input, count, seg_len)
                    }
                    Rows::Conv { input, .. } => {
                        for (r, row) in segs[0].rows.iter_mut().enumerate().take(here) {
                            rows.row(m0 + r, &mut bufs[r * k..(r + 1) * k]);
                            *row = (SrcF32::Buf, r * k);
                        }
                        (input, 1, k)
                    }
                };
                let o = &mut out[(m0 - ms.start) * n..(m0 - ms.start + here) * n];
                x86::gemm_rows_f32_avx512(
                    [data, bufs, pads],
                    &segs[..count],
                    seg_len,
                    here,
                    b,
                    bias,
                    n,
                    k,
                    self.act,
                    o,
                    g0..g0 + step,
                );
                m0 += MR_F32;
            }
        }
    }
}

/// A block of AVX2 tile rows read in place ([`GemmF32::block_f32`]): segment `s` (first
/// reduction index `segs[s].0`) of row `r` is `input[segs[s].1 + r * stride..][..seg_len]`.
#[cfg(target_arch = "x86_64")]
struct InPlaceF32 {
    segs: [(usize, usize); x86::STRIDED_SEGS_F32],
    count: usize,
    seg_len: usize,
    stride: usize,
    /// Rows of each tile when the block is a whole run of tiles (see [`GemmF32::block_f32`]);
    /// the block's row count otherwise.
    tile_rows: usize,
}

/// Fills `segs` with the receptive fields of output pixels `m0..m0 + here` of a convolution
/// (dilation 1 across), one segment per kernel row that some pixel of the block reads inside
/// the input: in place where the window's columns are inside the input, else gathered into
/// row `r`'s buffer (`bufs[r * k..]`, at the kernel row's place), and [`SrcF32::Pad`] for a
/// pixel whose kernel row is above or below the input. Returns the number of segments.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
fn conv_segments(
    input: &[f32],
    [in_h, in_w, c]: [usize; 3],
    [k_h, k_w]: [usize; 2],
    out_w: usize,
    p: &Conv2dParams,
    pad: f32,
    m0: usize,
    here: usize,
    bufs: &mut [f32],
    k: usize,
    segs: &mut [SegF32; MAX_SEGS_F32],
) -> usize {
    let seg_len = k_w * c;
    // Per row: top input row of the window (wrapping below 0) and left input column.
    let mut at = [(0usize, 0usize); MR_F32];
    for (r, a) in at.iter_mut().enumerate().take(here) {
        let (oy, ox) = ((m0 + r) / out_w, (m0 + r) % out_w);
        *a = (
            (oy * p.stride_h).wrapping_sub(p.pad_top),
            (ox * p.stride_w).wrapping_sub(p.pad_left),
        );
    }
    let mut count = 0;
    for ky in 0..k_h {
        let seg = &mut segs[count];
        seg.koff = ky * seg_len;
        let mut live = false;
        for (r, &(y0, x0)) in at.iter().enumerate().take(here) {
            let y = y0.wrapping_add(ky * p.dilation_h);
            if y >= in_h {
                seg.rows[r] = (SrcF32::Pad, 0);
                continue;
            }
            live = true;
            if x0 < in_w && in_w - x0 >= k_w {
                seg.rows[r] = (SrcF32::Data, (y * in_w + x0) * c);
                continue;
            }
            let o = r * k + ky * seg_len;
            for (kx, dst) in bufs[o..o + seg_len].chunks_exact_mut(c).enumerate() {
                let x = x0.wrapping_add(kx);
                if x < in_w {
                    let i = (y * in_w + x) * c;
                    dst.copy_from_slice(&input[i..i + c]);
                } else {
                    dst.fill(pad);
                }
            }
            seg.rows[r] = (SrcF32::Buf, o);
        }
        if live {
            count += 1;
        }
    }
    count
}

/// The first-element pointers of a float tile's rows, checking what the tile kernels read:
/// 1 to `MR_F32` rows of at least `k` values each.
#[cfg(target_arch = "x86_64")]
pub(crate) fn f32_row_ptrs(rows: &[&[f32]], k: usize) -> [*const f32; MR_F32] {
    assert!(!rows.is_empty() && rows.len() <= MR_F32);
    assert!(rows.iter().all(|r| r.len() >= k));
    let mut ptrs = [core::ptr::null::<f32>(); MR_F32];
    for (p, r) in ptrs.iter_mut().zip(rows) {
        *p = r.as_ptr();
    }
    ptrs
}

/// Float CONV_2D (groups 1) through [`GemmF32`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d_f32(
    g: &GemmF32,
    input: &[f32],
    in_shape: [usize; 4],
    filter_shape: [usize; 4],
    p: &Conv2dParams,
    output: &mut [f32],
    out_shape: [usize; 4],
    workers: &mut Workers,
) {
    let [batches, in_h, in_w, in_c] = in_shape;
    let [_, out_h, out_w, out_c] = out_shape;
    let m = out_h * out_w;
    for b in 0..batches {
        let inb = &input[b * in_h * in_w * in_c..(b + 1) * in_h * in_w * in_c];
        let outb = &mut output[b * m * out_c..(b + 1) * m * out_c];
        let rows = conv_rows(inb, in_shape, filter_shape, p, out_w, 0.0);
        let split = GemmBlocks {
            m,
            n: out_c,
            k: g.k,
            mr: MR_F32,
            cols: COLS_F32,
        };
        for_gemm_blocks(split, outb, workers, |ms, cols, o, s| {
            g.run_block(ms, cols, &rows, &mut s.f32s, o)
        });
    }
}

/// `out[m - ms.start, :] = act(data[m * stride..][..k] · Wᵀ + bias)` for `m` in `ms`, with
/// `W` (`n x k`) packed as [`GemmF32::b`] (AVX-512): the rows are read in place at a fixed
/// stride, in one loop over the row blocks (1x1 convolutions, dense, Winograd); up to two
/// panels take the strided path's taller tiles.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_packed_direct_f32_avx512(
    b: &[f32],
    bias: &[f32],
    n: usize,
    k: usize,
    act: Activation,
    data: &[f32],
    stride: usize,
    ms: Range<usize>,
    out: &mut [f32],
) {
    if n <= 2 * NR_F32 {
        let (rows, at) = (ms.len(), ms.start * stride);
        x86::gemm_strided_f32_avx512(data, &[(0, at)], k, stride, rows, b, bias, n, k, act, out);
    } else {
        x86::gemm_direct_f32_avx512(data, stride, ms, b, bias, n, k, act, out);
    }
}
