//! aarch64 micro-kernels: NEON (`Isa::Neon`) and NEON + `sdot` (`Isa::NeonDot`, through
//! inline `asm!` since `vdotq_s32` is unstable on stable Rust).
//!
//! To keep the code small (the aarch64 footprint goal), each tile kernel exists in two sizes
//! only: one row (FULLY_CONNECTED with batch 1) and the full tile; a partial tile of more than
//! one row runs the full tile on repeated or stale rows and the caller keeps the rows it asked
//! for. Int8 depthwise multiply-accumulates 8 channels in i16 x i16 -> i32. Requantization is
//! scalar ([`super::Requant::apply`]).
//!
//! Every `unsafe` block here relies on one invariant besides its bounds checks: the packed
//! weights it is given ([`super::GemmI8`], [`DwI8`], [`super::GemmF32`], [`DwF32`]) were built by their
//! `pack` functions for an [`Isa`] whose `available()` returned true on this CPU, and their
//! fields are private to the crate, so the instructions each kernel uses exist.

use core::arch::aarch64::*;
use core::arch::asm;

use super::{DwF32, DwI8, Isa, MR_F32, NR_F32};
use crate::kernels::Activation;

/// Whether the CPU has `isa`.
pub(crate) fn available(isa: Isa) -> bool {
    #[cfg(feature = "std")]
    {
        let neon = std::arch::is_aarch64_feature_detected!("neon");
        match isa {
            Isa::Portable => true,
            Isa::Neon => neon,
            Isa::NeonDot => neon && std::arch::is_aarch64_feature_detected!("dotprod"),
            _ => false,
        }
    }
    #[cfg(not(feature = "std"))]
    {
        // No run-time detection without std: what the build targets.
        let neon = cfg!(target_feature = "neon");
        match isa {
            Isa::Portable => true,
            Isa::Neon => neon,
            Isa::NeonDot => neon && cfg!(target_feature = "dotprod"),
            _ => false,
        }
    }
}

// ------------------------------------------------------------------------------ int8 GEMM

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
    let mut acc = [[vdupq_n_s32(0); 4]; MR];
    for g in 0..groups {
        // SAFETY: the 64 bytes at b + 64 g and a[r * row_stride + g], r < MR, are in bounds
        // (checked by the caller).
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

// ------------------------------------------------------------------------ int8 depthwise

/// One output pixel of an int8 depthwise convolution: `taps[t]` is the input pixel of tap `t`
/// (`usize::MAX` for padding, skipped as in the reference).
pub(crate) fn dw_i8_pixel(isa: Isa, dw: &DwI8, input: &[i8], taps: &[usize], out: &mut [i8]) {
    debug_assert!(isa != Isa::Portable);
    // SAFETY: DwI8 exists only when NEON is available (module invariant).
    unsafe { dw_i8_pixel_neon(dw, input, taps, out) }
}

/// Blocks of 8 channels: `(x + input_offset) * w` (both as i16, exact: |x + off| <= 383)
/// multiply-accumulated into two `int32x4`, then the scalar requantization.
#[target_feature(enable = "neon")]
fn dw_i8_pixel_neon(dw: &DwI8, input: &[i8], taps: &[usize], out: &mut [i8]) {
    let c = dw.c;
    let cp = dw.w.len() / dw.taps;
    assert!(taps.len() == dw.taps && out.len() == c && cp >= c && cp.is_multiple_of(8));
    let off = vdupq_n_s16(dw.input_offset);
    for ch in (0..c).step_by(8) {
        let n = (c - ch).min(8);
        let mut acc = [vdupq_n_s32(0); 2];
        for (t, &px) in taps.iter().enumerate() {
            if px == usize::MAX {
                continue;
            }
            let start = px * c + ch;
            let mut tmp = [0i8; 8];
            let x: &[i8] = if n == 8 {
                &input[start..start + 8]
            } else {
                tmp[..n].copy_from_slice(&input[start..start + n]);
                &tmp
            };
            let w = &dw.w[t * cp + ch..t * cp + ch + 8];
            // SAFETY: x has 8 bytes and w 8 i16.
            unsafe {
                let xv = vaddq_s16(vmovl_s8(vld1_s8(x.as_ptr())), off);
                let wv = vld1q_s16(w.as_ptr());
                acc[0] = vmlal_s16(acc[0], vget_low_s16(xv), vget_low_s16(wv));
                acc[1] = vmlal_high_s16(acc[1], xv, wv);
            }
        }
        let mut v = [0i32; 8];
        // SAFETY: v has 8 lanes.
        unsafe {
            vst1q_s32(v.as_mut_ptr(), acc[0]);
            vst1q_s32(v.as_mut_ptr().add(4), acc[1]);
        }
        for (j, o) in out[ch..ch + n].iter_mut().enumerate() {
            *o = dw.rq.apply(v[j], ch + j);
        }
    }
}

// ------------------------------------------------------------------------------ float

#[inline]
#[target_feature(enable = "neon")]
fn activate(v: float32x4_t, act: Activation) -> float32x4_t {
    match act {
        Activation::Relu => vmaxq_f32(v, vdupq_n_f32(0.0)),
        Activation::Relu6 => vminq_f32(vmaxq_f32(v, vdupq_n_f32(0.0)), vdupq_n_f32(6.0)),
        Activation::ReluN1To1 => vminq_f32(vmaxq_f32(v, vdupq_n_f32(-1.0)), vdupq_n_f32(1.0)),
        // Tanh is applied by the caller (scalar).
        Activation::None | Activation::Tanh => v,
    }
}

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

/// One output pixel of a float depthwise convolution (activation applied, except Tanh).
pub(crate) fn dw_f32_pixel(isa: Isa, dw: &DwF32, input: &[f32], taps: &[usize], out: &mut [f32]) {
    debug_assert!(isa != Isa::Portable);
    // SAFETY: DwF32 exists only when NEON is available (module invariant).
    unsafe { dw_f32_pixel_neon(dw, input, taps, out) }
}

/// Blocks of 8 channels (two vectors, two independent multiply-add chains per tap).
#[target_feature(enable = "neon")]
fn dw_f32_pixel_neon(dw: &DwF32, input: &[f32], taps: &[usize], out: &mut [f32]) {
    let (c, cp) = (dw.c, dw.cp);
    assert!(taps.len() == dw.taps && out.len() == c && dw.w.len() == dw.taps * cp);
    assert!(dw.bias.len() == cp && cp >= c);
    for cb in 0..cp / 8 {
        let ch = cb * 8;
        let full = ch + 8 <= c;
        let mut acc = [vdupq_n_f32(0.0); 2];
        for (t, &px) in taps.iter().enumerate() {
            if px == usize::MAX {
                continue;
            }
            let start = px * c + ch;
            let mut tmp = [0f32; 8];
            let x: &[f32] = if full {
                &input[start..start + 8]
            } else {
                tmp[..c - ch].copy_from_slice(&input[start..start + c - ch]);
                &tmp
            };
            let w = &dw.w[t * cp + ch..t * cp + ch + 8];
            // SAFETY: x and w have 8 floats each.
            unsafe {
                acc[0] = vfmaq_f32(acc[0], vld1q_f32(x.as_ptr()), vld1q_f32(w.as_ptr()));
                acc[1] = vfmaq_f32(
                    acc[1],
                    vld1q_f32(x.as_ptr().add(4)),
                    vld1q_f32(w.as_ptr().add(4)),
                );
            }
        }
        let mut v = [0f32; 8];
        let bias = &dw.bias[ch..ch + 8];
        for (h, acc) in acc.iter().enumerate() {
            // SAFETY: bias and v have 8 floats; 4h + 4 <= 8.
            unsafe {
                let bv = vld1q_f32(bias.as_ptr().add(4 * h));
                vst1q_f32(
                    v.as_mut_ptr().add(4 * h),
                    activate(vaddq_f32(*acc, bv), dw.act),
                );
            }
        }
        let end = (ch + 8).min(c);
        out[ch..end].copy_from_slice(&v[..end - ch]);
    }
}
