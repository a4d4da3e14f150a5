//! [`GemmI8`]'s blocks of rows on AMX tiles (x86-64, [`Isa::Avx512Amx`]): the AVX-512 VNNI
//! GEMM's packed weights and output stage, 32 rows by 32 channels per block
//! (`x86::tile_rq_i8_amx`), the same output bytes as its VNNI tile (the sums are exact i32).

use super::*;

/// Rows of an AMX block: two tiles of 16.
pub(crate) const AMX_ROWS: usize = 32;

/// Fewest rows, and fewest multiply-adds, of a call worth the AMX blocks; fewer rows left at
/// the end of a call also go to the VNNI tile. Measured on a Xeon with AMX (family 6 model
/// 207, per operator with `litecvt bench --profile`): a one-row dense layer (1000 channels)
/// and the 32-token dense layers of a transformer (32x64x64 to 32x64x256) took 1.0-3.1x the
/// VNNI tile's time on the tiles (their fixed costs: the tile configuration, stores of the
/// sums through memory, rows packed one by one), ResNet18's layers 0.4-0.85x.
/// (The unit tests take every shape with 5 rows or more to the tiles, and leave tails of 1-4
/// rows to the VNNI tile.)
#[cfg(all(target_arch = "x86_64", feature = "amx"))]
const AMX_MIN_ROWS: usize = if cfg!(test) { 5 } else { 16 };
#[cfg(all(target_arch = "x86_64", feature = "amx"))]
const AMX_MIN_MACS: usize = if cfg!(test) { 1 } else { 1 << 20 };

/// Whether a layer of `n` output channels and `k` values per output takes AMX blocks: at
/// least one whole step of `k` (64; a shorter one multiplies mostly padding: MobileNetV2's
/// 1x1 layers of 8-56 values took 1.2-2.9x the VNNI tile's time) and a 32-channel panel
/// (its 6x6x24 layers of 144 values: 1.4-1.5x).
pub(crate) fn amx_pays(n: usize, k: usize) -> bool {
    cfg!(test) || (k >= 64 && n >= 32)
}

impl GemmI8 {
    /// Words between the rows of an AMX block's left-hand side: whole steps of 16 groups (64
    /// values of `k`), zero past `k`.
    pub(crate) fn amx_row_words(&self) -> usize {
        self.groups.next_multiple_of(16)
    }

    /// Rows `ms` (output channels `cols`) in AMX blocks while enough rows are left: returns
    /// how many rows from `ms.start` it computed ([`Self::run_cols`] takes the rest). `cache`:
    /// the fused form's constants ([`x86::fused_cache`]), or empty.
    #[cfg(all(target_arch = "x86_64", feature = "amx"))]
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    pub(super) fn run_cols_amx(
        &self,
        ms: Range<usize>,
        cols: Range<usize>,
        rows: &Rows<'_, i8>,
        row_buf: &mut [i8],
        a_buf: &mut [i32],
        cache: &[i32],
        out: &mut [i8],
    ) -> usize {
        if ms.len() < AMX_MIN_ROWS || ms.len() * cols.len() * self.k < AMX_MIN_MACS {
            return 0;
        }
        let tiles = x86::Tiles::configure();
        let words = self.amx_row_words();
        let (nr, n) = (self.isa.nr_i8(), cols.len());
        let panel = self.groups * nr * self.isa.kg_i8();
        let mut sums = x86::Sums([[0; 32]; 32]);
        let mut m0 = ms.start;
        while ms.end - m0 >= AMX_MIN_ROWS {
            let count = (ms.end - m0).min(AMX_ROWS);
            self.pack_rows_amx(rows, m0, count, row_buf, a_buf);
            for p in cols.start / nr..cols.end.div_ceil(nr) {
                let c0 = p * nr;
                let at = (m0 - ms.start) * n + c0 - cols.start;
                x86::tile_rq_i8_amx(
                    &tiles,
                    count,
                    a_buf,
                    words * 4,
                    words / 16,
                    &self.b[p * panel..],
                    &self.rq,
                    cache,
                    c0,
                    (cols.end - c0).min(nr),
                    &mut out[at..],
                    n,
                    &mut sums,
                );
            }
            m0 += count;
        }
        m0 - ms.start
    }

    /// Rows `m0..m0 + count` of `rows` as rows `0..count` of `a_buf`, [`Self::amx_row_words`]
    /// apart (the VNNI packing: bytes offset to unsigned, zero past `k`).
    #[cfg(all(target_arch = "x86_64", feature = "amx"))]
    fn pack_rows_amx(
        &self,
        rows: &Rows<'_, i8>,
        m0: usize,
        count: usize,
        row_buf: &mut [i8],
        a_buf: &mut [i32],
    ) {
        let words = self.amx_row_words();
        if let Rows::Conv { .. } = rows {
            let conv = x86_conv_rows(rows);
            return x86::pack_conv_rows_vnni512(&conv, m0, count, words, a_buf);
        }
        for r in 0..count {
            let row = rows.row(m0 + r, row_buf);
            let dst = &mut a_buf[r * words..(r + 1) * words];
            x86::pack_row_vnni(&row[..self.k], dst);
            dst[self.groups..].fill(0);
        }
    }
}
