//! Float BATCH_MATMUL through the float GEMM's tile kernel (`tile_f32`, the one
//! [`GemmF32::run`] uses): both operands are activations, so each rhs matrix is packed into
//! the tile's 16-column panels per call, in scratch the interpreter sized once.

use super::*;

/// Whether [`batch_matmul_f32`] runs on `isa` (the float tile's ISAs: x86-64 AVX2 and up,
/// aarch64 NEON).
pub(crate) fn has_batch_matmul_f32(isa: Isa) -> bool {
    isa.available() && (has_elementwise(isa) || isa.neon())
}

/// f32 scratch of [`batch_matmul_f32`] for an `[m, k] x [k, n]` product: one rhs matrix in
/// panels of [`NR_F32`] columns, and with `adj_x` one lhs matrix transposed to rows.
pub(crate) fn batch_matmul_f32_scratch(m: usize, k: usize, n: usize, adj_x: bool) -> usize {
    n.div_ceil(NR_F32) * k * NR_F32 + if adj_x { m * k } else { 0 }
}

/// BATCH_MATMUL of float operands as [`crate::kernels::batch_matmul::batch_matmul_f32`] (same
/// shapes and broadcasting), through the GEMM tile of `isa`. Sums in another order, with
/// fused multiply-adds: within float rounding of the portable kernel. `false` (nothing done)
/// when `isa` has no tile kernel or the shapes, slices or scratch do not agree.
#[allow(clippy::too_many_arguments)]
pub(crate) fn batch_matmul_f32(
    isa: Isa,
    lhs: &[f32],
    lhs_shape: &[usize],
    rhs: &[f32],
    rhs_shape: &[usize],
    adj_x: bool,
    adj_y: bool,
    out: &mut [f32],
    out_shape: &[usize],
    scratch: &mut [f32],
) -> bool {
    use crate::kernels::batch_matmul::{dims, for_each_batch};
    if !has_batch_matmul_f32(isa) {
        return false;
    }
    let Some((m, k, n)) = dims(
        lhs.len(),
        lhs_shape,
        rhs.len(),
        rhs_shape,
        adj_x,
        adj_y,
        out.len(),
        out_shape,
    ) else {
        return false;
    };
    if scratch.len() < batch_matmul_f32_scratch(m, k, n, adj_x) {
        return false;
    }
    if k == 0 {
        out.fill(0.0);
        return true;
    }
    let (panels, lhs_rows) = scratch.split_at_mut(n.div_ceil(NR_F32) * k * NR_F32);
    let mut packed_from = None;
    for_each_batch(
        lhs_shape,
        rhs_shape,
        out_shape,
        m * k,
        k * n,
        |lo, ro, oo| {
            // A broadcast rhs matrix is packed once for its run of batches.
            if packed_from != Some(ro) {
                pack_rhs(&rhs[ro..ro + k * n], k, n, adj_y, panels);
                packed_from = Some(ro);
            }
            let a = &lhs[lo..lo + m * k];
            let a = if adj_x {
                // [k, m] stored: rows of the product are its columns.
                let t = &mut lhs_rows[..m * k];
                for (kk, col) in a.chunks_exact(m).enumerate() {
                    for (i, &v) in col.iter().enumerate() {
                        t[i * k + kk] = v;
                    }
                }
                &*t
            } else {
                a
            };
            product(isa, a, panels, m, k, n, &mut out[oo..oo + m * n]);
        },
    );
    true
}

/// Packs a `[k, n]` matrix (`[n, k]` with `adj_y`) into panels of 16 columns, `[panel][k][16]`,
/// columns past `n` zero.
fn pack_rhs(b: &[f32], k: usize, n: usize, adj_y: bool, panels: &mut [f32]) {
    for (p, panel) in panels
        .chunks_exact_mut(k * NR_F32)
        .take(n.div_ceil(NR_F32))
        .enumerate()
    {
        let c0 = p * NR_F32;
        let cn = (n - c0).min(NR_F32);
        for (kk, dst) in panel.chunks_exact_mut(NR_F32).enumerate() {
            for (j, d) in dst.iter_mut().enumerate() {
                *d = if j >= cn {
                    0.0
                } else if adj_y {
                    b[(c0 + j) * k + kk]
                } else {
                    b[kk * n + c0 + j]
                };
            }
        }
    }
}

/// `out = a · B` for `a` `[m, k]` row-major and `B` packed by [`pack_rhs`], in tiles of
/// [`MR_F32`] rows by one panel.
fn product(isa: Isa, a: &[f32], panels: &[f32], m: usize, k: usize, n: usize, out: &mut [f32]) {
    let zero = [0f32; NR_F32];
    let mut tile = [[0f32; NR_F32]; MR_F32];
    let mut m0 = 0;
    while m0 < m {
        let here = (m - m0).min(MR_F32);
        let mut rows: [&[f32]; MR_F32] = [&[]; MR_F32];
        for (r, row) in rows.iter_mut().enumerate().take(here) {
            *row = &a[(m0 + r) * k..(m0 + r + 1) * k];
        }
        for (p, panel) in panels
            .chunks_exact(k * NR_F32)
            .take(n.div_ceil(NR_F32))
            .enumerate()
        {
            #[cfg(target_arch = "x86_64")]
            x86::tile_f32(
                isa,
                &rows[..here],
                panel,
                &zero,
                Activation::None,
                &mut tile,
            );
            #[cfg(target_arch = "aarch64")]
            aarch64::tile_f32(
                isa,
                &rows[..here],
                panel,
                &zero,
                Activation::None,
                &mut tile,
            );
            let c0 = p * NR_F32;
            let cn = (n - c0).min(NR_F32);
            for (r, t) in tile.iter().enumerate().take(here) {
                let at = (m0 + r) * n + c0;
                out[at..at + cn].copy_from_slice(&t[..cn]);
            }
        }
        m0 += MR_F32;
    }
}
