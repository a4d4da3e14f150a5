//! The float depthwise per-pixel kernel (NEON).

use super::*;

/// One output pixel of a float depthwise convolution (activation applied, except Tanh).
pub(crate) fn dw_f32_pixel(isa: Isa, dw: &DwF32, input: &[f32], taps: &[usize], out: &mut [f32]) {
    debug_assert!(isa != Isa::Portable);
    // SAFETY: DwF32 exists only when NEON is available (module invariant).
    unsafe { dw_f32_pixel_neon(dw, input, taps, out) }
}

/// Blocks of 16 channels while whole ones remain (four vectors: four independent multiply-add
/// chains per tap, as one chain per vector is bound by the multiply-add latency), then blocks
/// of 8 (two vectors). Each channel sums its taps in order, then adds the bias.
#[target_feature(enable = "neon")]
fn dw_f32_pixel_neon(dw: &DwF32, input: &[f32], taps: &[usize], out: &mut [f32]) {
    let (c, cp) = (dw.c, dw.cp);
    assert!(taps.len() == dw.taps && out.len() == c && dw.w.len() == dw.taps * cp);
    assert!(dw.bias.len() == cp && cp >= c);
    let mut ch = 0;
    while ch + 16 <= c {
        let mut acc = [vdupq_n_f32(0.0); 4];
        for (t, &px) in taps.iter().enumerate() {
            if px == usize::MAX {
                continue;
            }
            let x = &input[px * c + ch..px * c + ch + 16];
            let w = &dw.w[t * cp + ch..t * cp + ch + 16];
            for (h, acc) in acc.iter_mut().enumerate() {
                // SAFETY: x and w have 16 floats; 4h + 4 <= 16.
                unsafe {
                    let (xv, wv) = (
                        vld1q_f32(x.as_ptr().add(4 * h)),
                        vld1q_f32(w.as_ptr().add(4 * h)),
                    );
                    *acc = vfmaq_f32(*acc, xv, wv);
                }
            }
        }
        let (bias, o) = (&dw.bias[ch..ch + 16], &mut out[ch..ch + 16]);
        for (h, acc) in acc.iter().enumerate() {
            // SAFETY: bias and o have 16 floats; 4h + 4 <= 16.
            unsafe {
                let bv = vld1q_f32(bias.as_ptr().add(4 * h));
                vst1q_f32(
                    o.as_mut_ptr().add(4 * h),
                    activate(vaddq_f32(*acc, bv), dw.act),
                );
            }
        }
        ch += 16;
    }
    for cb in ch / 8..cp / 8 {
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
