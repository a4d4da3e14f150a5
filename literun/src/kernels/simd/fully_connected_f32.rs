//! Float FULLY_CONNECTED over [`GemmF32`]: how a dense layer splits over workers (by rows, or
//! by output channels for one row) and when it stays on one thread.

use super::*;

/// Output channels of one block when a one-row dense layer is split over workers (whole
/// AVX-512 tiles: 4 panels of 16).
pub(crate) const COLS_F32: usize = GROUP_F32 * NR_F32;

/// Batch rows under which a float dense layer stays on one thread (row split) unless it is
/// large: with fewer than four tiles a worker, a transformer's 32-token layers ran slower split
/// than whole, the hand-over and the reads of the other core's half costing more than it saves
/// (with AVX-512 kernels; with AVX2 ones the 32 x 64 x 64 layers, 3.5 µs, ran slower split
/// and the 32 x 64 x 256 ones, 13 µs, no faster).
const FC_ROW_SPLIT_MIN: usize = 8 * MR_F32;

/// Multiply-accumulates from which a dense layer of few rows splits anyway (about 10 µs on one
/// thread with AVX-512 kernels): there the hand-over is a small part of the half it saves.
pub(crate) const FC_FEW_ROWS_SPLIT_MACS: usize = 1 << 20;

/// The [`Work`] of a float dense layer's row split (`macs`; none under the rows above, unless
/// the layer is large), on every ISA.
pub(crate) fn fc_row_work(batches: usize, macs: usize) -> Work {
    let few_rows = batches < FC_ROW_SPLIT_MIN && macs < FC_FEW_ROWS_SPLIT_MACS;
    Work::GemmF32(if few_rows { 0 } else { macs })
}

/// Float FULLY_CONNECTED through [`GemmF32`]: split over workers by rows, or with one batch
/// row and enough channels, by output channels.
pub(crate) fn fully_connected_f32(
    g: &GemmF32,
    input: &[f32],
    batches: usize,
    output: &mut [f32],
    workers: &mut Workers,
) {
    let work = batches * g.n * g.k;
    if batches == 1 && g.n >= 2 * COLS_F32 {
        for_row_blocks(
            g.n,
            COLS_F32,
            1,
            Work::GemmF32(work),
            output,
            workers,
            |cols, o, _| g.run_cols(cols, input, o),
        );
        return;
    }
    let rows = Rows::Direct {
        data: input,
        stride: g.k,
    };
    for_row_blocks(
        batches,
        MR_F32,
        g.n,
        fc_row_work(batches, work),
        output,
        workers,
        |ms, o, s| g.run(ms, &rows, &mut s.f32s, o),
    );
}
