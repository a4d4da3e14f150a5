//! The int8 GEMM tiles: NEON `vmull_s16` and `sdot`.

use super::*;

/// Rows of the int8 tile on both NEON paths (`Isa::mr_i8`).
pub(crate) const MR_I8: usize = 4;

/// `tile[r][j] = sum_g a[r * groups + g] · b[g][j]` for `r < rows` (rows past `rows` of the
/// tile get garbage).
pub(crate) fn tile_i8(
    isa: Isa,
    rows: usize,
    a: &[i32],
    b: &[i8],
    groups: usize,
    tile: &mut [[i32; 32]; 8],
) {
    let bstride = isa.nr_i8() * isa.kg_i8();
    assert!(isa.mr_i8() == MR_I8 && isa.nr_i8() == 16);
    assert!((1..=MR_I8).contains(&rows));
    assert!(a.len() >= groups * MR_I8 && b.len() >= groups * bstride);
    let (a, b) = (a.as_ptr(), b.as_ptr());
    // SAFETY: the ISA is available (module invariant); `a` has `groups * MR_I8` words (rows of
    // `groups`) and `b` `groups * bstride` bytes (asserted above), which is all the kernels
    // read (the full-tile kernels read all MR_I8 rows of `a`, initialized scratch).
    unsafe {
        match (isa, rows) {
            (Isa::NeonDot, 1) => tile_i8_dot::<1>(a, groups, b, groups, tile),
            (Isa::NeonDot, _) => tile_i8_dot::<MR_I8>(a, groups, b, groups, tile),
            (Isa::Neon, 1) => tile_i8_neon::<1>(a, groups, b, groups, tile),
            (Isa::Neon, _) => tile_i8_neon::<MR_I8>(a, groups, b, groups, tile),
            _ => unreachable!("no int8 GEMM for {isa:?} here"),
        }
    }
}

/// `kg = 2`: every 32-bit word of `a` holds two sign-extended i16 of one row; `b` has, per
/// group, 16 channels x 2 bytes. Products by `vmull_s16`, pairs summed by `vpaddq_s32`.
#[target_feature(enable = "neon")]
unsafe fn tile_i8_neon<const MR: usize>(
    a: *const i32,
    row_stride: usize,
    b: *const i8,
    groups: usize,
    tile: &mut [[i32; 32]; 8],
) {
    let mut acc = [[vdupq_n_s32(0); 4]; MR];
    for g in 0..groups {
        // SAFETY: g < groups, so the 32 bytes at b + 32 g and the words a[r * row_stride + g],
        // r < MR <= MR_I8, are in bounds (checked by the caller).
        unsafe {
            let bp = b.add(g * 32);
            let b0 = vld1q_s8(bp);
            let b1 = vld1q_s8(bp.add(16));
            // w[q]: channels 4q..4q + 4, each as (tap 0, tap 1).
            let w = [
                vmovl_s8(vget_low_s8(b0)),
                vmovl_high_s8(b0),
                vmovl_s8(vget_low_s8(b1)),
                vmovl_high_s8(b1),
            ];
            let ap = a.add(g);
            for (r, acc) in acc.iter_mut().enumerate() {
                // (x0, x1) repeated four times.
                let av = vreinterpretq_s16_s32(vdupq_n_s32(*ap.add(r * row_stride)));
                let al = vget_low_s16(av);
                for (acc, w) in acc.iter_mut().zip(&w) {
                    let lo = vmull_s16(al, vget_low_s16(*w));
                    let hi = vmull_high_s16(av, *w);
                    *acc = vaddq_s32(*acc, vpaddq_s32(lo, hi));
                }
            }
        }
    }
    store_i8_tile(&acc, tile);
}

/// `acc += sdot(a, b)`: lane `i` gains the dot product of bytes `4i..4i + 4` (signed).
#[inline]
#[target_feature(enable = "neon,dotprod")]
fn sdot(mut acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    // SAFETY: `sdot` exists (the dotprod feature is enabled for this function); it only
    // reads and writes the three registers.
    unsafe {
        asm!(
            "sdot {0:v}.4s, {1:v}.16b, {2:v}.16b",
            inout(vreg) acc,
            in(vreg) a,
            in(vreg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    acc
}

/// `kg = 4`: every 32-bit word of `a` holds four signed bytes of one row; `b` has, per group,
/// 16 channels x 4 bytes.
#[target_feature(enable = "neon,dotprod")]
unsafe fn tile_i8_dot<const MR: usize>(
    a: *const i32,
    row_stride: usize,
    b: *const i8,
    groups: usize,
    tile: &mut [[i32; 32]; 8],
) {
    // One row (a dense layer's) has four accumulators, fewer than `sdot`'s latency keeps
    // busy: its odd groups go to a second set, added at the end (wrapping i32 sums, so the
    // same sums).
    let two = MR == 1;
    let mut acc = [[vdupq_n_s32(0); 4]; MR];
    let mut acc2 = [[vdupq_n_s32(0); 4]; MR];
    let step = |acc: &mut [[int32x4_t; 4]; MR], g: usize| {
        // SAFETY: g < groups (below), so the 64 bytes at b + 64 g and a[r * row_stride + g],
        // r < MR, are in bounds (checked by the caller).
        unsafe {
            let bp = b.add(g * 64);
            let w = [
                vld1q_s8(bp),
                vld1q_s8(bp.add(16)),
                vld1q_s8(bp.add(32)),
                vld1q_s8(bp.add(48)),
            ];
            let ap = a.add(g);
            for (r, acc) in acc.iter_mut().enumerate() {
                let av = vreinterpretq_s8_s32(vdupq_n_s32(*ap.add(r * row_stride)));
                for (acc, w) in acc.iter_mut().zip(&w) {
                    *acc = sdot(*acc, av, *w);
                }
            }
        }
    };
    let mut g = 0;
    if two {
        while g + 2 <= groups {
            step(&mut acc, g);
            step(&mut acc2, g + 1);
            g += 2;
        }
    }
    while g < groups {
        step(&mut acc, g);
        g += 1;
    }
    if two {
        for (acc, acc2) in acc.iter_mut().zip(&acc2) {
            for (v, w) in acc.iter_mut().zip(acc2) {
                *v = vaddq_s32(*v, *w);
            }
        }
    }
    store_i8_tile(&acc, tile);
}

#[inline]
#[target_feature(enable = "neon")]
fn store_i8_tile<const MR: usize>(acc: &[[int32x4_t; 4]; MR], tile: &mut [[i32; 32]; 8]) {
    for (acc, t) in acc.iter().zip(tile.iter_mut()) {
        for (q, v) in acc.iter().enumerate() {
            let dst = &mut t[4 * q..4 * q + 4];
            // SAFETY: dst has 4 lanes.
            unsafe { vst1q_s32(dst.as_mut_ptr(), *v) };
        }
    }
}
