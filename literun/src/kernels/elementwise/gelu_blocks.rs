//! Float GELU's tanh form over blocks of values, one step of the formula at a time for the
//! whole block: the same arithmetic as [`crate::math::gelu_tanh_fma`] (the results are
//! bit-identical), in another order, so that the vectors' dependent chains advance side by
//! side instead of one vector's filling the CPU's out-of-order window. (The exact form has its
//! own x86 kernels, `simd::x86::gelu`.)

use crate::math::{mul_add, EXP_POLY, LN2_HI, LN2_LO, ROUNDING, ROUNDING_BITS};

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

/// `out = gelu_tanh(input)` ([`gelu_tanh_block`]) in blocks of `N` values, the rest one value
/// at a time.
#[inline(always)]
pub(crate) fn gelu_tanh_blocks<const N: usize>(input: &[f32], out: &mut [f32]) {
    let n = input.len().min(out.len());
    let (input, out) = (&input[..n], &mut out[..n]);
    let mut ins = input.chunks_exact(N);
    let mut outs = out.chunks_exact_mut(N);
    for (c, o) in (&mut ins).zip(&mut outs) {
        let (Ok(c), Ok(o)) = (<&[f32; N]>::try_from(c), <&mut [f32; N]>::try_from(o)) else {
            continue; // (chunks_exact: never)
        };
        gelu_tanh_block(c, o);
    }
    for (o, &x) in outs.into_remainder().iter_mut().zip(ins.remainder()) {
        *o = crate::math::gelu_tanh_fma(x);
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
        let mut got = vec![0f32; xs.len()];
        gelu_tanh_blocks::<32>(&xs, &mut got);
        for (&x, &g) in xs.iter().zip(&got) {
            let want = crate::math::gelu_tanh_fma(x);
            assert!(
                g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                "gelu_tanh({x}): {g} vs {want}"
            );
        }
    }
}
