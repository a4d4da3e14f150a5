//! Int8 CONV_2D and FULLY_CONNECTED through a GEMM over packed weights ([`GemmI8`]): the
//! tile drivers, the packing, and the choice of ISA kernel for each step.

use super::*;

/// Constant int8 weights `[N, K]` packed for the int8 GEMM of one ISA.
#[derive(Clone, Debug)]
pub struct GemmI8 {
    pub(crate) isa: Isa,
    pub(crate) n: usize,
    pub(crate) k: usize,
    /// Groups of `kg` values of `k` (the last one zero-padded).
    pub(crate) groups: usize,
    /// Panel `p`, group `g`, channel `j`, byte `t` at `((p * groups + g) * nr + j) * kg + t`.
    /// (With the AMX blocks, zero groups after the last panel up to a whole step of 16.)
    pub(crate) b: Vec<i8>,
    pub(crate) rq: Requant,
    /// Blocks of rows on AMX tiles (`gemm_i8_amx`; `isa` is then [`Isa::Avx512Vnni`], whose
    /// tile takes the blocks too short for them).
    pub(crate) amx: bool,
}

impl GemmI8 {
    /// Packs `weights` (`n` rows of `k`) with `bias` and the output stage `q` (whose
    /// `input_offset` is folded into the bias). `None` when `isa` has no int8 GEMM here.
    /// [`Isa::Avx512Amx`] packs for [`Isa::Avx512Vnni`] with the AMX blocks where they pay.
    pub fn pack(
        isa: Isa,
        weights: &[i8],
        n: usize,
        k: usize,
        bias: Option<&[i32]>,
        q: &OutputStage,
    ) -> Option<GemmI8> {
        if isa == Isa::Portable
            || !isa.available()
            || weights.len() != n * k
            || q.multipliers.len() != n
            || n == 0
            || k == 0
        {
            return None;
        }
        let amx = isa == Isa::Avx512Amx && amx_pays(n, k);
        let isa = isa.vector();
        let (nr, kg) = (isa.nr_i8(), isa.kg_i8());
        let groups = k.div_ceil(kg);
        let panels = n.div_ceil(nr);
        // The AMX blocks read whole steps of 16 groups: past the last panel's end too.
        let past = if amx {
            groups.next_multiple_of(16) - groups
        } else {
            0
        };
        let mut b = vec![0i8; (panels * groups + past) * nr * kg];
        match kg {
            4 => scatter_rows::<4>(weights, k, nr, groups, &mut b),
            _ => scatter_rows::<2>(weights, k, nr, groups, &mut b),
        }
        let off = q.input_offset - if isa.vnni() { 128 } else { 0 };
        let mut rq = Requant::new(q, panels * nr, |c| {
            let wsum: i32 = weights[c * k..(c + 1) * k]
                .iter()
                .map(|&v| i32::from(v))
                .sum();
            bias.map_or(0, |b| b[c])
                .wrapping_add(off.wrapping_mul(wsum))
        })?;
        if matches!(isa, Isa::Avx2 | Isa::AvxVnni) {
            // Each product is of an input byte (signed, or offset to unsigned) and a weight.
            rq.allow_unsigned(k as i64 * 256 * 128);
        }
        Some(GemmI8 {
            isa,
            n,
            k,
            groups,
            b,
            rq,
            amx,
        })
    }

    /// Bytes held (packed weights and per-channel parameters).
    pub fn bytes(&self) -> usize {
        self.b.len() + self.rq.bytes()
    }

    /// i32 words of the scratch [`Self::run`] needs: the packed rows, then (AVX-512 with the
    /// fused form) the derived requantization constants of every channel.
    pub fn scratch_i32(&self) -> usize {
        self.a_words() + self.fused_cache_words()
    }

    /// Words of the packed rows: a tile's, and with AVX2 16 i16 more, so that packing an
    /// im2col row's last 16-byte step stays inside them (`x86::pack_conv_rows_pairs`).
    fn a_words(&self) -> usize {
        if self.amx {
            return AMX_ROWS * self.amx_row_words();
        }
        self.groups * self.isa.mr_i8() + if self.isa == Isa::Avx2 { 8 } else { 0 }
    }

    /// Rows of the output computed together ([`GemmBlocks::mr`]): an AMX block's, or the
    /// ISA's tile's.
    pub(crate) fn mr(&self) -> usize {
        if self.amx {
            AMX_ROWS
        } else {
            self.isa.mr_i8()
        }
    }

    /// Words of the fused form's constants, derived once per [`Self::run`] (`x86::fused_cache`)
    /// rather than in every tile: the derivation costs a few instructions per 16 channels,
    /// which a tile of few rows and a short `k` notices.
    fn fused_cache_words(&self) -> usize {
        fused_cache_scratch(self.isa, &self.rq)
    }

    /// `out[m - ms.start, :] = requant(rows.row(m) · W^T)` for `m` in `ms` (`out` has rows of
    /// `n`). `row_buf` holds `k` values (for gathered rows), `a_buf` [`Self::scratch_i32`].
    pub(crate) fn run(
        &self,
        ms: Range<usize>,
        rows: &Rows<'_, i8>,
        row_buf: &mut [i8],
        a_buf: &mut [i32],
        out: &mut [i8],
    ) {
        self.run_cols(ms, 0..self.n, rows, row_buf, a_buf, out)
    }

    /// [`Self::run`] for the output channels `cols` only (`cols.start` a multiple of the
    /// tile's channels, e.g. [`COLS_I8`]): `out` has rows of `cols.len()`.
    pub(crate) fn run_cols(
        &self,
        ms: Range<usize>,
        cols: Range<usize>,
        rows: &Rows<'_, i8>,
        row_buf: &mut [i8],
        a_buf: &mut [i32],
        out: &mut [i8],
    ) {
        let (mr, nr, kg) = (self.isa.mr_i8(), self.isa.nr_i8(), self.isa.kg_i8());
        let n = cols.len();
        let (a_buf, scratch) = a_buf.split_at_mut(self.a_words());
        // (Only the AVX-512 tile reads it: empty elsewhere.)
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
        let cache: &[i32] = match fused_cache_in(scratch, self.fused_cache_words()) {
            #[cfg(target_arch = "x86_64")]
            Some(cache) => {
                // (Only the panels this call computes.)
                let panels = cols.start..cols.end.div_ceil(nr) * nr;
                if self.isa == Isa::Avx512Vnni {
                    x86::fused_cache(&self.rq, cache, panels);
                } else {
                    x86::unsigned_cache(&self.rq, cache, panels);
                }
                cache
            }
            _ => &[],
        };
        // A layer of at most 16 channels leaves the AVX-512 tile's second 16 channels unused:
        // its narrow form skips their multiply-adds (as the AVX2 tile's does for at most 8 of
        // its 16). One form per layer: a wider layer's last panel (e.g. 16 of 48 channels)
        // keeps the wide one.
        #[cfg(target_arch = "x86_64")]
        let narrow = self.n <= 16;
        // AMX blocks first (while they pay), the VNNI tile for any rows left.
        #[cfg(all(target_arch = "x86_64", feature = "amx"))]
        let amx_rows = if self.amx {
            self.run_cols_amx(ms.clone(), cols.clone(), rows, row_buf, a_buf, cache, out)
        } else {
            0
        };
        #[cfg(not(all(target_arch = "x86_64", feature = "amx")))]
        let amx_rows = 0;
        let mut tile = [[0i32; 32]; 8];
        let (base, m_count) = (ms.start, ms.end);
        let mut m0 = base + amx_rows;
        while m0 < m_count {
            // With AVX-512, between one and two tiles of rows left: two tiles of about half
            // each (9 rows as 5 and 4, not 8 and 1), as a tile of few rows has few
            // accumulators to overlap `vpdpbusd`'s latency with (its tiles of every height are
            // kernels of their own; NEON's computes 4 rows for any of 2 to 4).
            let left = m_count - m0;
            let rows_here = if self.isa == Isa::Avx512Vnni && left > mr && left < 2 * mr {
                left.div_ceil(2)
            } else {
                left.min(mr)
            };
            self.pack_rows(rows, m0, rows_here, row_buf, a_buf);
            for p in cols.start / nr..cols.end.div_ceil(nr) {
                let b = &self.b[p * self.groups * nr * kg..(p + 1) * self.groups * nr * kg];
                let c0 = p * nr;
                let cn = (cols.end - c0).min(nr);
                let at = (m0 - base) * n + c0 - cols.start;
                #[cfg(target_arch = "x86_64")]
                if self.isa == Isa::Avx512Vnni {
                    x86::tile_rq_i8_avx512(
                        rows_here,
                        a_buf,
                        b,
                        self.groups,
                        &self.rq,
                        cache,
                        c0,
                        cn,
                        &mut out[at..],
                        n,
                        narrow,
                    );
                    continue;
                }
                // AVX2: the same from registers to bytes; layers of at most 8 channels in the
                // narrow form.
                #[cfg(target_arch = "x86_64")]
                if self.isa == Isa::Avx2 {
                    x86::tile_rq_i8_avx2(
                        rows_here,
                        a_buf,
                        b,
                        self.groups,
                        &self.rq,
                        cache,
                        c0,
                        cn,
                        &mut out[at..],
                        n,
                        self.n <= 8,
                    );
                    continue;
                }
                tile_i8(self.isa, rows_here, a_buf, b, self.groups, &mut tile);
                requant_tile(
                    self.isa,
                    &self.rq,
                    cache,
                    c0,
                    &tile,
                    rows_here,
                    cn,
                    &mut out[at..],
                    n,
                );
            }
            m0 += rows_here;
        }
    }
}

/// Writes each row of `weights` (`k` values) into the packed layout `b`: channel `ch` (panel
/// `ch / nr`, lane `j = ch % nr`), group `g`'s `KG` bytes at `((p * groups + g) * nr + j) * KG`,
/// the last group's missing bytes left zero. A row is read once, front to back, and each group
/// is one small copy (packing ResNet18's int8 weights byte by byte took 4-5% of a full-int8
/// conversion, which prepares interpreters many times).
fn scatter_rows<const KG: usize>(weights: &[i8], k: usize, nr: usize, groups: usize, b: &mut [i8]) {
    let stride = nr * KG;
    for (ch, row) in weights.chunks_exact(k).enumerate() {
        let (p, j) = (ch / nr, ch % nr);
        let panel = &mut b[p * groups * stride..(p + 1) * groups * stride];
        let mut dst = panel[j * KG..].chunks_mut(stride);
        let mut src = row.chunks_exact(KG);
        // (`src` first: `zip` stops at its end without taking a group of `dst`.)
        for (s, d) in (&mut src).zip(&mut dst) {
            d[..KG].copy_from_slice(s);
        }
        let rest = src.remainder();
        if let Some(d) = dst.next().filter(|_| !rest.is_empty()) {
            d[..rest.len()].copy_from_slice(rest);
        }
    }
}

impl GemmI8 {
    /// Packs rows `m0..m0 + count` of `rows` as rows `0..count` of `a_buf`
    /// ([`pack_row_i8`]). Contiguous rows of whole words (a multiple of four bytes with
    /// `vpdpbusd`, of two with AVX2's `vpmaddwd`) are one block already in the packed layout
    /// (one offset-to-unsigned or sign-extending copy for the whole tile), and with AVX-512 an
    /// im2col row is gathered straight into its packed form.
    #[inline]
    fn pack_rows(
        &self,
        rows: &Rows<'_, i8>,
        m0: usize,
        count: usize,
        row_buf: &mut [i8],
        a_buf: &mut [i32],
    ) {
        #[cfg(target_arch = "x86_64")]
        if self.isa.vnni() {
            match rows {
                Rows::Direct { data, stride } if *stride == self.k && self.k.is_multiple_of(4) => {
                    let block = &data[m0 * self.k..(m0 + count) * self.k];
                    return x86::pack_row_vnni(block, &mut a_buf[..count * self.groups]);
                }
                Rows::Conv { .. } if self.isa == Isa::Avx512Vnni => {
                    let conv = x86_conv_rows(rows);
                    return x86::pack_conv_rows_vnni512(&conv, m0, count, self.groups, a_buf);
                }
                _ => {}
            }
        }
        #[cfg(target_arch = "x86_64")]
        if self.isa == Isa::Avx2 {
            match rows {
                Rows::Direct { data, stride } if *stride == self.k && self.k.is_multiple_of(2) => {
                    // Whole rows of whole words: the tile's rows are one contiguous run,
                    // packed in one pass.
                    let block = &data[m0 * self.k..(m0 + count) * self.k];
                    return x86::pack_row_pairs(block, &mut a_buf[..count * self.groups]);
                }
                Rows::Conv { .. } => {
                    let conv = x86_conv_rows(rows);
                    return x86::pack_conv_rows_pairs(
                        &conv,
                        m0,
                        count,
                        self.groups,
                        row_buf,
                        a_buf,
                    );
                }
                _ => {}
            }
        }
        for r in 0..count {
            let row = rows.row(m0 + r, row_buf);
            pack_row_i8(self.isa, &row[..self.k], r, self.groups, a_buf);
        }
    }
}

/// Writes `row` as row `r` of the packed left-hand side, `groups` 32-bit words per row (`kg`
/// bytes per word: unsigned `x + 128` for `vpdpbusd`, four signed bytes for `sdot`, two
/// sign-extended i16 for `vpmaddwd` and NEON).
/// Rows are contiguous, so packing is a vectorizable copy.
#[inline]
fn pack_row_i8(isa: Isa, row: &[i8], r: usize, groups: usize, a_buf: &mut [i32]) {
    let dst = &mut a_buf[r * groups..(r + 1) * groups];
    if isa.kg_i8() == 4 && !isa.vnni() {
        // Four signed bytes (`sdot`), the last word zero-padded.
        let mut chunks = row.chunks_exact(4);
        for (d, c) in dst.iter_mut().zip(&mut chunks) {
            *d = i32::from_le_bytes([c[0] as u8, c[1] as u8, c[2] as u8, c[3] as u8]);
        }
        let rem = chunks.remainder();
        if !rem.is_empty() {
            let mut b = [0u8; 4];
            for (d, &s) in b.iter_mut().zip(rem) {
                *d = s as u8;
            }
            dst[row.len() / 4] = i32::from_le_bytes(b);
        }
    } else if isa.vnni() {
        // The VNNI ISAs (`vpdpbusd`) exist on x86-64 only.
        #[cfg(target_arch = "x86_64")]
        x86::pack_row_vnni(row, dst);
    } else if cfg!(target_arch = "x86_64") {
        // (AVX2: two sign-extended bytes per word, sixteen at a time.)
        #[cfg(target_arch = "x86_64")]
        x86::pack_row_pairs(row, dst);
    } else {
        let mut chunks = row.chunks_exact(2);
        for (d, c) in dst.iter_mut().zip(&mut chunks) {
            *d = (u32::from(c[0] as i16 as u16) | (u32::from(c[1] as i16 as u16) << 16)) as i32;
        }
        if let [x] = chunks.remainder() {
            dst[row.len() / 2] = i32::from(*x as i16 as u16);
        }
    }
}

/// `tile[r][j] = sum_g a[g, r] · b[g, j]` for `r < rows`.
#[inline]
fn tile_i8(isa: Isa, rows: usize, a: &[i32], b: &[i8], groups: usize, tile: &mut [[i32; 32]; 8]) {
    #[cfg(target_arch = "x86_64")]
    x86::tile_i8(isa, rows, a, b, groups, tile);
    #[cfg(target_arch = "aarch64")]
    aarch64::tile_i8(isa, rows, a, b, groups, tile);
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = (isa, rows, a, b, groups, tile);
        unreachable!("no int8 GEMM for this ISA");
    }
}

/// [`requant_row`] for the first `rows` rows of `tile`, row `r` at `out[r * stride..]` (the
/// AVX-512 GEMM requantizes inside its tile instead: `x86::tile_rq_i8_avx512`).
#[inline]
#[allow(clippy::too_many_arguments)]
fn requant_tile(
    isa: Isa,
    rq: &Requant,
    cache: &[i32],
    c0: usize,
    tile: &[[i32; 32]; 8],
    rows: usize,
    cn: usize,
    out: &mut [i8],
    stride: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Portable {
        x86::requant_tile(isa, rq, cache, c0, &tile[..rows], cn, out, stride);
        return;
    }
    let _ = cache;
    for (r, acc) in tile.iter().enumerate().take(rows) {
        requant_row(isa, rq, c0, acc, &mut out[r * stride..r * stride + cn]);
    }
}

/// Requantizes `out.len()` channels starting at `c0` from `acc`.
#[inline]
pub(super) fn requant_row(isa: Isa, rq: &Requant, c0: usize, acc: &[i32; 32], out: &mut [i8]) {
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Portable {
        let cn = out.len();
        x86::requant_tile(isa, rq, &[], c0, core::slice::from_ref(acc), cn, out, 0);
        return;
    }
    let _ = isa;
    for (j, o) in out.iter_mut().enumerate() {
        *o = rq.apply(acc[j], c0 + j);
    }
}

/// Int8 CONV_2D (groups 1) through [`GemmI8`]: 1x1 stride 1 reads the input rows in place,
/// anything else gathers one im2col row at a time.
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d_i8(
    g: &GemmI8,
    input: &[i8],
    in_shape: [usize; 4],
    filter_shape: [usize; 4],
    p: &Conv2dParams,
    input_offset: i32,
    output: &mut [i8],
    out_shape: [usize; 4],
    workers: &mut Workers,
) {
    let [batches, in_h, in_w, in_c] = in_shape;
    let [_, out_h, out_w, out_c] = out_shape;
    let m = out_h * out_w;
    for b in 0..batches {
        let inb = &input[b * in_h * in_w * in_c..(b + 1) * in_h * in_w * in_c];
        let outb = &mut output[b * m * out_c..(b + 1) * m * out_c];
        let rows = conv_rows(inb, in_shape, filter_shape, p, out_w, (-input_offset) as i8);
        let split = GemmBlocks {
            m,
            n: out_c,
            k: g.k,
            mr: g.mr(),
            cols: COLS_I8,
        };
        for_gemm_blocks(split, outb, workers, |ms, cols, o, s| {
            g.run_cols(ms, cols, &rows, &mut s.i8s, &mut s.i32s, o)
        });
    }
}

/// Output channels of one block when a one-row dense layer is split over workers (whole
/// tiles on every ISA).
pub(crate) const COLS_I8: usize = 64;

/// Int8 FULLY_CONNECTED through [`GemmI8`]: split over workers by rows, or with one batch row
/// and enough channels, by output channels.
pub(crate) fn fully_connected_i8(
    g: &GemmI8,
    input: &[i8],
    batches: usize,
    output: &mut [i8],
    workers: &mut Workers,
) {
    let rows = Rows::Direct {
        data: input,
        stride: g.k,
    };
    let work = batches * g.n * g.k;
    if batches == 1 && g.n >= 2 * COLS_I8 {
        for_row_blocks(
            g.n,
            COLS_I8,
            1,
            Work::GemmI8(work),
            output,
            workers,
            |cols, o, s| g.run_cols(0..1, cols, &rows, &mut s.i8s, &mut s.i32s, o),
        );
        return;
    }
    for_row_blocks(
        batches,
        g.mr(),
        g.n,
        fc_row_work_i8(g.isa, batches, work),
        output,
        workers,
        |ms, o, s| g.run(ms, &rows, &mut s.i8s, &mut s.i32s, o),
    );
}

/// The [`Work`] of an int8 dense layer's row split: as the float one's ([`fc_row_work`]),
/// none with AVX-512 kernels under four tiles a worker of two unless the layer is large (a
/// transformer's 32-token layers, 2-5 µs, ran slower split than whole).
pub(crate) fn fc_row_work_i8(isa: Isa, batches: usize, macs: usize) -> Work {
    let few_rows =
        isa == Isa::Avx512Vnni && batches < 8 * isa.mr_i8() && macs < FC_FEW_ROWS_SPLIT_MACS;
    Work::GemmI8(if few_rows { 0 } else { macs })
}

/// The x86 packers' view of an im2col row source (`Rows::Conv`).
#[cfg(target_arch = "x86_64")]
pub(super) fn x86_conv_rows<'a>(rows: &'a Rows<'_, i8>) -> x86::ConvRows<'a> {
    match rows {
        Rows::Conv {
            input,
            in_hwc,
            k_hw,
            out_w,
            p,
            pad,
        } => x86::ConvRows {
            input,
            in_hwc: *in_hwc,
            k_hw: *k_hw,
            out_w: *out_w,
            p,
            pad: *pad,
        },
        Rows::Direct { .. } => unreachable!("only im2col rows are packed as windows"),
    }
}
