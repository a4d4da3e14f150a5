//! LayerNorm over the last axis in one pass per row: the work of the MEAN, SQUARED_DIFFERENCE,
//! MEAN, ADD (epsilon), RSQRT, SUB, MUL and optional MUL (gamma) and ADD (beta) operators
//! converters write for it (`y = (x - mean) * rsqrt(var + eps) * gamma + beta`, `var` the mean
//! of `(x - mean)^2`), without writing their intermediate tensors.
//!
//! The row's sums are taken in [`LANES`] partial sums (so the loops vectorize) added in pairs
//! (one lane after another would be a chain of sixteen dependent additions per sum, twice a
//! row: most of a transformer's 64-value row's time), the rest in the chain's order of
//! operations: within float rounding of the chain, not bit-identical.

use crate::math::tree_sum;

/// Lanes of the partial sums (a vector of AVX-512).
const LANES: usize = 16;

/// The affine part of a LayerNorm: `gamma` and `beta`, each of the row's length when present.
#[derive(Clone, Copy, Debug, Default)]
pub struct Affine<'a> {
    pub gamma: Option<&'a [f32]>,
    pub beta: Option<&'a [f32]>,
}

/// LayerNorm of every row of `depth` values of `input` into `out` (up to the shorter of the
/// two). Does nothing when `depth` is 0 or `gamma`/`beta` are not `depth` long.
#[inline(never)]
pub fn layer_norm_f32(input: &[f32], depth: usize, eps: f32, affine: Affine<'_>, out: &mut [f32]) {
    layer_norm_loops(input, depth, eps, affine, out)
}

/// The sum of `v` in [`LANES`] partial sums, then those in pairs ([`tree_sum`]).
#[inline(always)]
fn lane_sum(v: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut sums = [0.0f32; LANES];
    let mut chunks = v.chunks_exact(LANES);
    for c in &mut chunks {
        for (s, &x) in sums.iter_mut().zip(c) {
            *s += f(x);
        }
    }
    let tail: f32 = chunks.remainder().iter().map(|&x| f(x)).sum();
    tree_sum(core::hint::black_box(sums)) + tail
}

/// The loops of [`layer_norm_f32`], inlined wherever they are compiled (`simd` compiles them
/// again for wider vectors).
#[inline(always)]
pub(crate) fn layer_norm_loops(
    input: &[f32],
    depth: usize,
    eps: f32,
    affine: Affine<'_>,
    out: &mut [f32],
) {
    let fits = |v: Option<&[f32]>| v.is_none_or(|v| v.len() == depth);
    if depth == 0 || !fits(affine.gamma) || !fits(affine.beta) {
        return;
    }
    let n = depth as f32;
    for (x, y) in input.chunks_exact(depth).zip(out.chunks_exact_mut(depth)) {
        let mean = lane_sum(x, |v| v) / n;
        let var = lane_sum(x, |v| (v - mean) * (v - mean)) / n;
        let rstd = 1.0 / crate::math::sqrtf(var + eps);
        for (o, &v) in y.iter_mut().zip(x) {
            *o = (v - mean) * rstd;
        }
        if let Some(g) = affine.gamma {
            for (o, &g) in y.iter_mut().zip(g) {
                *o *= g;
            }
        }
        if let Some(b) = affine.beta {
            for (o, &b) in y.iter_mut().zip(b) {
                *o += b;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_chain_in_f64() {
        for depth in [1, 7, 16, 64, 100] {
            let rows = 3;
            let x: Vec<f32> = (0..rows * depth)
                .map(|i| ((i * 7919) % 101) as f32 * 0.13 - 5.0 + (i / depth) as f32 * 40.0)
                .collect();
            let gamma: Vec<f32> = (0..depth).map(|i| 0.5 + i as f32 * 0.01).collect();
            let beta: Vec<f32> = (0..depth).map(|i| i as f32 * -0.02).collect();
            for affine in [
                Affine::default(),
                Affine {
                    gamma: Some(&gamma),
                    beta: None,
                },
                Affine {
                    gamma: Some(&gamma),
                    beta: Some(&beta),
                },
            ] {
                let mut out = vec![f32::NAN; x.len()];
                layer_norm_f32(&x, depth, 1e-5, affine, &mut out);
                for (xr, yr) in x.chunks(depth).zip(out.chunks(depth)) {
                    let mean = xr.iter().map(|&v| f64::from(v)).sum::<f64>() / depth as f64;
                    let var = xr
                        .iter()
                        .map(|&v| (f64::from(v) - mean).powi(2))
                        .sum::<f64>()
                        / depth as f64;
                    for (j, (&v, &y)) in xr.iter().zip(yr).enumerate() {
                        let mut want = (f64::from(v) - mean) / (var + 1e-5).sqrt();
                        if let Some(g) = affine.gamma {
                            want *= f64::from(g[j]);
                        }
                        if let Some(b) = affine.beta {
                            want += f64::from(b[j]);
                        }
                        assert!((f64::from(y) - want).abs() <= 1e-5 * want.abs().max(1.0));
                    }
                }
            }
        }
    }
}
