//! Float GELU (exact form) with NEON: the AVX2 kernel's arithmetic (`simd::x86::gelu`, the
//! formula of [`crate::math::gelu_fast`] with fused multiply-adds, `-a^2/2` rounded once and
//! `2^n` added to the numerator's exponent) on 4-lane vectors, keeping the same accuracy
//! contract; the choice between `Φ(-a)` and `1 - Φ(-a)` is a bit select, one operation here. Four vectors per step so that their chains overlap; a slice's
//! last partial vector goes through the same code from a small buffer.

use super::*;
use crate::math::{GELU_CLAMP, GELU_EXP, GELU_HALF_M_NUM as HALF_M_NUM, GELU_M_DEN, ROUNDING};

/// The exact GELU of 4 values.
#[inline]
#[target_feature(enable = "neon")]
fn gelu4(x: float32x4_t) -> float32x4_t {
    let c = vdupq_n_f32;
    let a = vminq_f32(vabsq_f32(x), c(GELU_CLAMP));
    // e^w = 2^n e^r for w = -a^2/2 (rounded once, as in the x86 kernels).
    let w = vmulq_f32(vmulq_f32(a, c(-0.5)), a);
    let k = vfmaq_f32(c(ROUNDING), w, c(core::f32::consts::LOG2_E));
    let nf = vsubq_f32(k, c(ROUNDING));
    let r = vfmsq_f32(w, nf, c(core::f32::consts::LN_2));
    let mut e = c(GELU_EXP[4]);
    for &k in GELU_EXP[..4].iter().rev() {
        e = vfmaq_f32(c(k), e, r);
    }
    let e = vfmaq_f32(c(1.0), e, r);
    let mut p = c(HALF_M_NUM[3]);
    for &k in HALF_M_NUM[..3].iter().rev() {
        p = vfmaq_f32(c(k), p, a);
    }
    // p 2^n by adding n to p's exponent (`k`'s low bits hold n; p >= 0.49, n >= -122).
    let n_exp = vshlq_n_s32::<23>(vreinterpretq_s32_f32(k));
    let p = vreinterpretq_f32_s32(vaddq_s32(vreinterpretq_s32_f32(p), n_exp));
    let mut q = c(GELU_M_DEN[3]);
    for &k in GELU_M_DEN[..3].iter().rev() {
        q = vfmaq_f32(c(k), q, a);
    }
    let q = vfmaq_f32(c(1.0), q, a);
    // Φ(-a) = erfc(a / √2) / 2; Φ(x) is that for x < 0, 1 - it above.
    let phi = vdivq_f32(vmulq_f32(e, p), q);
    let f = vbslq_f32(vcltq_f32(x, c(0.0)), phi, vsubq_f32(c(1.0), phi));
    // (NEON's `max` keeps a NaN.)
    let xc = vmaxq_f32(c(-GELU_CLAMP), x);
    vmulq_f32(xc, f)
}

/// `out = gelu(input)` (exact form) over the common length; `isa` is `Neon` or `NeonDot`.
pub(crate) fn gelu_exact(isa: Isa, input: &[f32], out: &mut [f32]) {
    debug_assert!(matches!(isa, Isa::Neon | Isa::NeonDot));
    // SAFETY: only called for an available NEON `isa` (`simd::gelu_f32`).
    unsafe { gelu_exact_neon(input, out) }
}

#[target_feature(enable = "neon")]
fn gelu_exact_neon(input: &[f32], out: &mut [f32]) {
    let n = input.len().min(out.len());
    let (input, out) = (&input[..n], &mut out[..n]);
    let mut ins = input.chunks_exact(16);
    let mut outs = out.chunks_exact_mut(16);
    for (i, o) in (&mut ins).zip(&mut outs) {
        for (i, o) in i.chunks_exact(4).zip(o.chunks_exact_mut(4)) {
            // SAFETY: `i` and `o` hold 4 floats each.
            unsafe { vst1q_f32(o.as_mut_ptr(), gelu4(vld1q_f32(i.as_ptr()))) };
        }
    }
    let (rest_in, rest_out) = (ins.remainder(), outs.into_remainder());
    for (i, o) in rest_in.chunks(4).zip(rest_out.chunks_mut(4)) {
        let mut buf = [0f32; 4];
        buf[..i.len()].copy_from_slice(i);
        // SAFETY: `buf` holds 4 floats.
        unsafe { vst1q_f32(buf.as_mut_ptr(), gelu4(vld1q_f32(buf.as_ptr()))) };
        o.copy_from_slice(&buf[..o.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_neon_keeps_the_gelu_contract() {
        if !Isa::Neon.available() {
            return;
        }
        crate::math::gelu_contract::check("neon", |x, o| gelu_exact(Isa::Neon, x, o));
    }
}
