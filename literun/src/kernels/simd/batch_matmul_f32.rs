//! Float BATCH_MATMUL through the float GEMM's kernels: both operands are activations, so each
//! rhs matrix is packed per call, in scratch the interpreter sized once. With AVX-512 a whole
//! matrix product is one call of a row kernel over the lhs rows in place: for up to 32 columns
//! the tall tiles of the convolutions' strided rows (`gemm_strided_f32_avx512`, up to 12 rows
//! x 32), wider ones the dense layer's (`gemm_direct_f32_avx512`, 6 x 64), whose weight layout
//! a row-major rhs of 16, 32, 48 or 64 columns already has (read in place, as attention's
//! product with the values); elsewhere the
//! tile kernel (`tile_f32`, the one [`GemmF32::run`] uses) over 16-column panels, of which a
//! row-major rhs of 16 columns is one. A rhs stored transposed (`adj_y`, attention's keys) is
//! packed. With AVX2, matrices of up to 64 columns (a multiple of 8) are one call of a row
//! kernel that keeps two output rows in registers (`matmul_rows_f32_avx2`).

use super::*;

/// Whether [`batch_matmul_f32`] runs on `isa` (the float tile's ISAs: x86-64 AVX2 and up,
/// aarch64 NEON).
pub(crate) fn has_batch_matmul_f32(isa: Isa) -> bool {
    isa.available() && (has_elementwise(isa) || isa.neon())
}

/// f32 scratch of [`batch_matmul_f32`] for an `[m, k] x [k, n]` product: one rhs matrix in
/// panels of [`NR_F32`] columns, a zero bias for them, and with `adj_x` one lhs matrix
/// transposed to rows.
pub(crate) fn batch_matmul_f32_scratch(m: usize, k: usize, n: usize, adj_x: bool) -> usize {
    let panels = n.div_ceil(NR_F32);
    panels * k * NR_F32 + panels * NR_F32 + if adj_x { m * k } else { 0 }
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
    let (panels, rest) = scratch.split_at_mut(n.div_ceil(NR_F32) * k * NR_F32);
    let (zero_bias, lhs_rows) = rest.split_at_mut(n.div_ceil(NR_F32) * NR_F32);
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512Vnni {
        zero_bias.fill(0.0);
        let mut packed_from = None;
        // The rhs as it is stored already has the row kernel's layout.
        let in_place = !adj_y && n % NR_F32 == 0 && n <= COLS_F32;
        for_each_batch(
            lhs_shape,
            rhs_shape,
            out_shape,
            m * k,
            k * n,
            |lo, ro, oo| {
                let b = if in_place {
                    &rhs[ro..ro + k * n]
                } else {
                    if packed_from != Some(ro) {
                        pack_rhs(&rhs[ro..ro + k * n], k, n, adj_y, COLS_F32, panels);
                        packed_from = Some(ro);
                    }
                    &*panels
                };
                let a = lhs_as_rows(&lhs[lo..lo + m * k], m, k, adj_x, lhs_rows);
                if n <= 2 * NR_F32 {
                    // One or two panels (attention's products with 16- or 32-value heads and
                    // 32 keys): tiles of up to 12 rows, whose 12-24 multiply-add chains the
                    // 6-row tile of one or two panels (6-12) cannot match.
                    let out = &mut out[oo..oo + m * n];
                    x86::gemm_strided_f32_avx512(
                        a,
                        &[(0, 0)],
                        k,
                        k,
                        m,
                        b,
                        zero_bias,
                        n,
                        k,
                        Activation::None,
                        out,
                    );
                    return;
                }
                x86::gemm_direct_f32_avx512(
                    a,
                    k,
                    0..m,
                    b,
                    zero_bias,
                    n,
                    k,
                    Activation::None,
                    &mut out[oo..oo + m * n],
                );
            },
        );
        return true;
    }
    let _ = zero_bias;
    // AVX2: whole matrices of up to 64 columns in one call, two rows at a time in registers
    // (`matmul_rows_f32_avx2`), the rhs read in place or (`adj_y`) transposed once into rows.
    #[cfg(target_arch = "x86_64")]
    if n.is_multiple_of(8) && n <= 64 {
        let mut packed_from = None;
        let mut done = true;
        for_each_batch(
            lhs_shape,
            rhs_shape,
            out_shape,
            m * k,
            k * n,
            |lo, ro, oo| {
                let (b, ldb) = if adj_y {
                    if packed_from != Some(ro) {
                        pack_rhs(&rhs[ro..ro + k * n], k, n, true, COLS_F32, panels);
                        packed_from = Some(ro);
                    }
                    (&*panels, n.div_ceil(NR_F32) * NR_F32)
                } else {
                    (&rhs[ro..ro + k * n], n)
                };
                let a = lhs_as_rows(&lhs[lo..lo + m * k], m, k, adj_x, lhs_rows);
                done &= x86::matmul_rows_f32_avx2(a, m, k, b, ldb, n, &mut out[oo..oo + m * n]);
            },
        );
        // (Always done: the shapes were checked above.)
        return done;
    }
    let mut packed_from = None;
    // A rhs of one panel is that panel as it is stored.
    let in_place = !adj_y && n == NR_F32;
    for_each_batch(
        lhs_shape,
        rhs_shape,
        out_shape,
        m * k,
        k * n,
        |lo, ro, oo| {
            let b = if in_place {
                &rhs[ro..ro + k * n]
            } else {
                // A broadcast rhs matrix is packed once for its run of batches.
                if packed_from != Some(ro) {
                    pack_rhs(&rhs[ro..ro + k * n], k, n, adj_y, NR_F32, panels);
                    packed_from = Some(ro);
                }
                &*panels
            };
            let a = lhs_as_rows(&lhs[lo..lo + m * k], m, k, adj_x, lhs_rows);
            product(isa, a, b, m, k, n, &mut out[oo..oo + m * n]);
        },
    );
    true
}

/// One lhs matrix as `[m, k]` rows: itself, or with `adj_x` (`[k, m]` stored, the product's
/// rows its columns) transposed into `buf`.
fn lhs_as_rows<'a>(a: &'a [f32], m: usize, k: usize, adj_x: bool, buf: &'a mut [f32]) -> &'a [f32] {
    if !adj_x {
        return a;
    }
    let t = &mut buf[..m * k];
    for (kk, col) in a.chunks_exact(m).enumerate() {
        for (i, &v) in col.iter().enumerate() {
            t[i * k + kk] = v;
        }
    }
    t
}

/// Packs a `[k, n]` matrix (`[n, k]` with `adj_y`) in groups of `cols` columns (a multiple of
/// [`NR_F32`]), `[group][k][width]`, the last group's width the rest of the columns rounded up
/// to whole panels, columns past `n` zero: with `cols` [`NR_F32`] the tile kernel's panels,
/// with [`COLS_F32`] the AVX-512 row kernel's weight layout.
fn pack_rhs(b: &[f32], k: usize, n: usize, adj_y: bool, cols: usize, packed: &mut [f32]) {
    let padded = n.div_ceil(NR_F32) * NR_F32;
    let mut c0 = 0;
    while c0 < n {
        let width = (padded - c0).min(cols);
        let cn = (n - c0).min(width);
        let group = &mut packed[c0 * k..(c0 + width) * k];
        if adj_y {
            // Column c of the product is row c of the stored matrix: four rows at a time, so
            // each reduction index takes one contiguous store of four values (one value per
            // iteration, the scatter was most of a 32 x 16 Q·Kᵀ product's time).
            let rows = &b[c0 * k..(c0 + cn) * k];
            let mut quads = rows.chunks_exact(4 * k);
            let mut j = 0;
            // (No indexing that can panic: each panic site adds a relocation to the static
            // binary, which moves its text; see "Peak RSS" in docs/performance.md.)
            for q in &mut quads {
                let mut r = q.chunks_exact(k);
                let (Some(r0), Some(r1), Some(r2), Some(r3)) =
                    (r.next(), r.next(), r.next(), r.next())
                else {
                    break;
                };
                let cols = r0.iter().zip(r1).zip(r2.iter().zip(r3));
                for (dst, ((&v0, &v1), (&v2, &v3))) in group.chunks_exact_mut(width).zip(cols) {
                    if let Some(d) = dst.get_mut(j..j + 4) {
                        d.copy_from_slice(&[v0, v1, v2, v3]);
                    }
                }
                j += 4;
            }
            for row in quads.remainder().chunks_exact(k) {
                for (dst, &v) in group.chunks_exact_mut(width).zip(row) {
                    if let Some(d) = dst.get_mut(j) {
                        *d = v;
                    }
                }
                j += 1;
            }
            if cn < width {
                for dst in group.chunks_exact_mut(width) {
                    dst[cn..].fill(0.0);
                }
            }
        } else {
            for (kk, dst) in group.chunks_exact_mut(width).enumerate() {
                dst[..cn].copy_from_slice(&b[kk * n + c0..kk * n + c0 + cn]);
                dst[cn..].fill(0.0);
            }
        }
        c0 += width;
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
                NR_F32,
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
