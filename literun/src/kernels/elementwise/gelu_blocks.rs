//! Float GELU over blocks of values, one step of the formula at a time for the whole block:
//! the same arithmetic as [`crate::math::gelu_fma`] and [`crate::math::gelu_tanh_fma`] (the
//! results are bit-identical), in another order.
//!
//! One value's GELU is a chain of ~50 dependent steps (~120 cycles of latency with AVX-512).
//! Compiled one vector at a time, the CPU's out-of-order window holds about two such chains,
//! which leaves its multiply-add units idle most of the time; with every step taken for a
//! block of several vectors before the next, the vectors' chains advance side by side.

use crate::math::{
    mul_add, ERFC_FIT, ERFC_MAX_A, ERFC_SPLIT_MASK, EXP_POLY, LN2_HI, LN2_LO, ROUNDING,
    ROUNDING_BITS,
};

/// `2^k` for `k` in the normal exponent range, from bits.
#[inline(always)]
fn pow2(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

/// `e^r 2^n` for a block (the polynomial and scaling of `exp_fast`), with fused
/// multiply-adds.
#[inline(always)]
fn exp_reduced_block<const N: usize>(r: &[f32; N], n: &[i32; N], out: &mut [f32; N]) {
    let ma = mul_add::<true>;
    let mut p = [EXP_POLY[0]; N];
    for &c in &EXP_POLY[1..] {
        for (p, &r) in p.iter_mut().zip(r) {
            *p = ma(*p, r, c);
        }
    }
    for (((o, &p), &r), &n) in out.iter_mut().zip(&p).zip(r).zip(n) {
        let e = ma(p * r, r, r) + 1.0;
        let half = n >> 1;
        *o = e * pow2(half) * pow2(n - half);
    }
}

/// [`crate::math::gelu_fma`] of a block of values.
#[inline(always)]
pub(crate) fn gelu_block<const N: usize>(x: &[f32; N], out: &mut [f32; N]) {
    let ma = mul_add::<true>;
    let mut a = [0f32; N];
    let mut t = [0f32; N];
    for ((a, t), &x) in a.iter_mut().zip(t.iter_mut()).zip(x) {
        *a = x.abs().min(ERFC_MAX_A);
        *t = 1.0 / (1.0 + 0.5 * core::f32::consts::FRAC_1_SQRT_2 * *a);
    }
    let mut p = [ERFC_FIT[0]; N];
    for &c in &ERFC_FIT[1..] {
        for (p, &t) in p.iter_mut().zip(&t) {
            *p = ma(*p, t, c);
        }
    }
    // e^(hi + lo), hi = -s^2 / 2 exact, reduced as `exp_hi_lo`.
    let mut r = [0f32; N];
    let mut n = [0i32; N];
    for (((r, n), &a), &p) in r.iter_mut().zip(n.iter_mut()).zip(&a).zip(&p) {
        let s = f32::from_bits(a.to_bits() & ERFC_SPLIT_MASK);
        let hi = -0.5 * (s * s);
        let lo = p - 0.5 * (a - s) * (a + s);
        let k = (hi + lo) * core::f32::consts::LOG2_E + ROUNDING;
        *n = (k.to_bits() as i32).wrapping_sub(ROUNDING_BITS);
        let nf = k - ROUNDING;
        *r = hi - nf * LN2_HI + lo - nf * LN2_LO;
    }
    let mut e = [0f32; N];
    exp_reduced_block(&r, &n, &mut e);
    for (((o, &x), &t), &e) in out.iter_mut().zip(x).zip(&t).zip(&e) {
        let e = t * e;
        // erfc(-|z|) = 2 - erfc(|z|).
        let erfc = if x <= 0.0 { e } else { 2.0 - e };
        *o = 0.5 * x * erfc;
    }
}

/// [`crate::math::gelu_tanh_fma`] of a block of values.
#[inline(always)]
pub(crate) fn gelu_tanh_block<const N: usize>(x: &[f32; N], out: &mut [f32; N]) {
    // 2 sqrt(2 / pi)
    const K2: f32 = 1.595_769_2;
    let mut r = [0f32; N];
    let mut n = [0i32; N];
    for ((r, n), &x) in r.iter_mut().zip(n.iter_mut()).zip(x) {
        let u2 = K2 * (x + 0.044715 * x * x * x);
        // `exp_fast` of -u2.
        let v = (-u2).clamp(-104.0, 89.0);
        let k = v * core::f32::consts::LOG2_E + ROUNDING;
        *n = (k.to_bits() as i32).wrapping_sub(ROUNDING_BITS);
        let nf = k - ROUNDING;
        *r = v - nf * LN2_HI - nf * LN2_LO;
    }
    let mut e = [0f32; N];
    exp_reduced_block(&r, &n, &mut e);
    for ((o, &x), &e) in out.iter_mut().zip(x).zip(&e) {
        *o = x / (1.0 + e);
    }
}

/// `out = gelu(input)` ([`gelu_block`], or [`gelu_tanh_block`] when `approximate`) in blocks
/// of `N` values, the rest one value at a time.
#[inline(always)]
pub(crate) fn gelu_blocks<const N: usize>(approximate: bool, input: &[f32], out: &mut [f32]) {
    let n = input.len().min(out.len());
    let (input, out) = (&input[..n], &mut out[..n]);
    let mut ins = input.chunks_exact(N);
    let mut outs = out.chunks_exact_mut(N);
    for (c, o) in (&mut ins).zip(&mut outs) {
        let (Ok(c), Ok(o)) = (<&[f32; N]>::try_from(c), <&mut [f32; N]>::try_from(o)) else {
            continue; // (chunks_exact: never)
        };
        if approximate {
            gelu_tanh_block(c, o);
        } else {
            gelu_block(c, o);
        }
    }
    let f = if approximate {
        crate::math::gelu_tanh_fma
    } else {
        crate::math::gelu_fma
    };
    for (o, &x) in outs.into_remainder().iter_mut().zip(ins.remainder()) {
        *o = f(x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_bit_identical_to_one_value_at_a_time() {
        let mut xs: Vec<f32> = (0..4096).map(|i| (i as f32 - 2048.0) / 150.0).collect();
        xs.extend([
            0.0,
            -0.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -200.0,
            200.0,
            1e-38,
            -1e-38,
            -15.99,
            -16.01,
        ]);
        for approximate in [false, true] {
            let mut got = vec![0f32; xs.len()];
            gelu_blocks::<32>(approximate, &xs, &mut got);
            for (&x, &g) in xs.iter().zip(&got) {
                let want = if approximate {
                    crate::math::gelu_tanh_fma(x)
                } else {
                    crate::math::gelu_fma(x)
                };
                assert!(
                    g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                    "gelu({x}, {approximate}): {g} vs {want}"
                );
            }
        }
    }
}
