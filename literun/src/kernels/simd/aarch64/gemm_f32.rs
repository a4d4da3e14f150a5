//! The float GEMM tile (NEON).

use super::*;

/// `tile[r][j] = act(bias[j] + rows[r] · b[:, j])` for one 16-channel panel `b` (`[k][16]`).
pub(crate) fn tile_f32(
    isa: Isa,
    rows: &[&[f32]],
    b: &[f32],
    bias: &[f32],
    act: Activation,
    tile: &mut [[f32; NR_F32]; MR_F32],
) {
    debug_assert!(isa != Isa::Portable);
    let k = b.len() / NR_F32;
    assert!(!rows.is_empty() && rows.len() <= MR_F32 && bias.len() == NR_F32);
    assert!(rows.iter().all(|r| r.len() >= k));
    // Rows past `rows.len()` repeat row 0 (computed, not used).
    let mut ptrs = [rows[0].as_ptr(); MR_F32];
    for (p, r) in ptrs.iter_mut().zip(rows) {
        *p = r.as_ptr();
    }
    // SAFETY: NEON is available (module invariant); every pointer is a row of at least `k`
    // values and `b` has `k * 16` (asserted above).
    unsafe {
        if rows.len() == 1 {
            tile_f32_neon::<1>(&ptrs, b.as_ptr(), k, bias, act, tile)
        } else {
            tile_f32_neon::<MR_F32>(&ptrs, b.as_ptr(), k, bias, act, tile)
        }
    }
}

#[target_feature(enable = "neon")]
unsafe fn tile_f32_neon<const MR: usize>(
    rows: &[*const f32; MR_F32],
    b: *const f32,
    k: usize,
    bias: &[f32],
    act: Activation,
    tile: &mut [[f32; NR_F32]; MR_F32],
) {
    let mut acc = [[vdupq_n_f32(0.0); 4]; MR];
    for kk in 0..k {
        // SAFETY: kk < k: b has k * 16 floats and every row k (checked by the caller).
        unsafe {
            let bp = b.add(kk * NR_F32);
            let w = [
                vld1q_f32(bp),
                vld1q_f32(bp.add(4)),
                vld1q_f32(bp.add(8)),
                vld1q_f32(bp.add(12)),
            ];
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = *rows[r].add(kk);
                for (acc, w) in acc.iter_mut().zip(&w) {
                    *acc = vfmaq_n_f32(*acc, *w, x);
                }
            }
        }
    }
    assert!(bias.len() == NR_F32);
    for (acc, t) in acc.iter().zip(tile.iter_mut()) {
        for (q, v) in acc.iter().enumerate() {
            // SAFETY: bias and the tile row have 16 floats; 4q + 4 <= 16.
            unsafe {
                let bv = vld1q_f32(bias.as_ptr().add(4 * q));
                vst1q_f32(t.as_mut_ptr().add(4 * q), activate(vaddq_f32(*v, bv), act));
            }
        }
    }
}
