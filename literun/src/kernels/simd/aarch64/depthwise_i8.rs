//! The int8 depthwise per-pixel kernel (NEON).

use super::*;

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
