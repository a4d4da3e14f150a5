//! SOFTMAX and LOG_SOFTMAX (float32) over the last axis, matching TFLite's reference kernels.
//!
//! Softmax: `y = exp(beta * (x - max)) / sum_c exp(beta * (x_c - max))`.
//! Log-softmax: `y = (x - max) - log(sum_c exp(x_c - max))`.

use crate::math::{exp_fast_block, exp_fast_with, expf, logf, tree_sum};

/// The row maximum as TFLite computes it (start from `lowest`, `std::max`).
#[inline]
fn row_max(row: &[f32]) -> f32 {
    let mut max = f32::MIN;
    for &x in row {
        if max < x {
            max = x;
        }
    }
    max
}

/// Softmax over `outer` rows of `depth` contiguous values.
pub fn softmax_f32(input: &[f32], outer: usize, depth: usize, beta: f32, output: &mut [f32]) {
    debug_assert_eq!(input.len(), outer * depth);
    debug_assert_eq!(output.len(), outer * depth);
    if depth == 0 {
        return;
    }
    for (in_row, out_row) in input
        .chunks_exact(depth)
        .zip(output.chunks_exact_mut(depth))
        .take(outer)
    {
        let max = row_max(in_row);
        let mut sum = 0.0f32;
        for (&x, y) in in_row.iter().zip(out_row.iter_mut()) {
            // (`expf`, not the vectorizing `exp_fast`: a quantized model may requantize this
            // float result, and LiteRT's reference kernels round from `expf`'s values.)
            let e = expf((x - max) * beta);
            *y = e;
            sum += e;
        }
        for y in out_row.iter_mut() {
            *y /= sum;
        }
    }
}

/// Lanes of the partial maxima and sums of [`softmax_f32_fast`] (a vector of AVX-512).
const LANES: usize = 16;

/// The largest of the partial maxima (as [`row_max`] keeps them), halving the lanes in each
/// step: four vector operations, where one lane after another is a chain of sixteen dependent
/// compares (short rows, such as attention's 32 keys, spend most of their time in them).
#[inline(always)]
fn tree_max(mut v: [f32; LANES]) -> f32 {
    let mut half = LANES / 2;
    while half > 0 {
        for i in 0..half {
            v[i] = if v[i] < v[i + half] {
                v[i + half]
            } else {
                v[i]
            };
        }
        half /= 2;
    }
    v[0]
}

/// [`softmax_f32`] with the vectorizing [`exp_fast`](crate::math::exp_fast) (within 2 ulp of `expf`) and the row's
/// maximum and sum taken in [`LANES`] partial results, so every loop vectorizes; within a few
/// ulp of [`softmax_f32`], whose in-order sum and math-library `exp` it keeps for outputs that
/// are requantized (they must round as LiteRT's reference kernels do). Not inlined;
/// `simd::softmax_f32` compiles the same loops for wider vectors.
#[inline(never)]
pub fn softmax_f32_fast(input: &[f32], outer: usize, depth: usize, beta: f32, output: &mut [f32]) {
    softmax_fast_loops::<false>(input, outer, depth, beta, output)
}

/// Rows [`softmax_fast_loops`] takes through each of its passes together: a short row's passes
/// are chains of dependent steps (maximum, exponentials, sum, division), and the rows of a
/// group are independent chains the CPU overlaps.
const ROWS: usize = 8;

/// The loops of [`softmax_f32_fast`], inlined wherever they are compiled; with `FMA` (where the
/// CPU has fused multiply-adds) `exp`'s steps use them, within an ulp of the loops without.
#[inline(always)]
pub(crate) fn softmax_fast_loops<const FMA: bool>(
    input: &[f32],
    outer: usize,
    depth: usize,
    beta: f32,
    output: &mut [f32],
) {
    if depth == 0 {
        return;
    }
    let rows = outer.min(input.len() / depth).min(output.len() / depth);
    for (ins, outs) in input[..rows * depth]
        .chunks(ROWS * depth)
        .zip(output[..rows * depth].chunks_mut(ROWS * depth))
    {
        let mut maxes = [0.0f32; ROWS];
        for (max, in_row) in maxes.iter_mut().zip(ins.chunks_exact(depth)) {
            *max = row_max_fast(in_row);
        }
        for ((&max, in_row), out_row) in maxes
            .iter()
            .zip(ins.chunks_exact(depth))
            .zip(outs.chunks_exact_mut(depth))
        {
            for (y, &x) in out_row.iter_mut().zip(in_row) {
                *y = (x - max) * beta;
            }
        }
        exp_in_blocks::<FMA>(outs);
        let mut invs = [0.0f32; ROWS];
        for (inv, out_row) in invs.iter_mut().zip(outs.chunks_exact(depth)) {
            *inv = 1.0 / row_sum(out_row);
        }
        for (&inv, out_row) in invs.iter().zip(outs.chunks_exact_mut(depth)) {
            let mut chunks = out_row.chunks_exact_mut(LANES);
            for c in &mut chunks {
                for y in c.iter_mut() {
                    *y *= inv;
                }
            }
            for y in chunks.into_remainder() {
                *y *= inv;
            }
        }
    }
}

/// The row maximum (as [`row_max`]) in [`LANES`] partial maxima.
#[inline(always)]
fn row_max_fast(row: &[f32]) -> f32 {
    let mut maxes = [f32::MIN; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for c in &mut chunks {
        for (m, &x) in maxes.iter_mut().zip(c) {
            *m = if *m < x { x } else { *m };
        }
    }
    row_max(chunks.remainder()).max(tree_max(maxes))
}

/// Values [`exp_in_blocks`] takes through each step of `exp` together (four AVX-512
/// vectors).
const EXP_BLOCK: usize = 64;

/// `v = exp_fast(v)` ([`crate::math::exp_fast`]) for every value, in blocks of [`EXP_BLOCK`] ([`exp_fast_block`]).
#[inline(always)]
fn exp_in_blocks<const FMA: bool>(values: &mut [f32]) {
    let mut blocks = values.chunks_exact_mut(EXP_BLOCK);
    for b in &mut blocks {
        if let Ok(b) = <&mut [f32; EXP_BLOCK]>::try_from(b) {
            exp_fast_block::<EXP_BLOCK, FMA>(b);
        }
    }
    for v in blocks.into_remainder() {
        *v = exp_fast_with::<FMA>(*v);
    }
}

/// The sum of a row in [`LANES`] partial sums.
#[inline(always)]
fn row_sum(row: &[f32]) -> f32 {
    let mut sums = [0.0f32; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for c in &mut chunks {
        for (s, &e) in sums.iter_mut().zip(c) {
            *s += e;
        }
    }
    tree_sum(sums) + chunks.remainder().iter().sum::<f32>()
}

/// Log-softmax over `outer` rows of `depth` contiguous values.
pub fn log_softmax_f32(input: &[f32], outer: usize, depth: usize, output: &mut [f32]) {
    debug_assert_eq!(input.len(), outer * depth);
    debug_assert_eq!(output.len(), outer * depth);
    if depth == 0 {
        return;
    }
    for (in_row, out_row) in input
        .chunks_exact(depth)
        .zip(output.chunks_exact_mut(depth))
        .take(outer)
    {
        let max = row_max(in_row);
        let mut sum = 0.0f32;
        for &x in in_row {
            sum += expf(x - max);
        }
        let log_sum = logf(sum);
        for (&x, y) in in_row.iter().zip(out_row.iter_mut()) {
            *y = x - max - log_sum;
        }
    }
}

/// The exp table of TFLite's optimized quantized softmax (`PopulateSoftmaxLookupTable`):
/// `table[255 - d] = exp(-input_scale * beta * d)` for `d` in `0..=255`.
pub fn softmax_table(input_scale: f32, beta: f32) -> [f32; 256] {
    let scale = -input_scale * beta;
    let mut t = [0.0f32; 256];
    for d in 0..=255i32 {
        t[(255 - d) as usize] = expf(scale * d as f32);
    }
    t
}

/// Int8 softmax over rows of `depth`, as TFLite's optimized `Softmax` with a float table (the
/// builtin kernel on x86): `p = table[x] / (sum * out_scale)`, `q = round(p) + out_zp`, clamped.
pub fn softmax_i8(
    input: &[i8],
    outer: usize,
    depth: usize,
    table: &[f32; 256],
    out_scale: f32,
    out_zero_point: i32,
    output: &mut [i8],
) {
    if depth == 0 {
        return;
    }
    for (in_row, out_row) in input
        .chunks_exact(depth)
        .zip(output.chunks_exact_mut(depth))
        .take(outer)
    {
        let max = in_row.iter().map(|&v| i32::from(v)).max().unwrap_or(-128);
        let base = 255 - max;
        let mut sum = 0.0f32;
        for &x in in_row {
            sum += table[(base + i32::from(x)) as usize];
        }
        let inv = 1.0f32 / (sum * out_scale);
        for (o, &x) in out_row.iter_mut().zip(in_row) {
            let p = table[(base + i32::from(x)) as usize] * inv;
            let q = round_non_negative(p).saturating_add(out_zero_point);
            *o = q.clamp(-128, 127) as i8;
        }
    }
}

/// `roundf(p) as i32` (half away from zero, saturating) for `p >= 0` or NaN, without a call,
/// so the loop around it can vectorize: the truncation, plus one when the part it dropped
/// (exact below 2^24; above, `p` is an integer) is at least a half.
#[inline(always)]
fn round_non_negative(p: f32) -> i32 {
    let t = p as i32;
    t.saturating_add(i32::from(p - t as f32 >= 0.5))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    fn close(a: f32, b: f32) -> bool {
        (a - b).abs() <= 1e-6 * (1.0 + b.abs())
    }

    #[test]
    fn rows_sum_to_one_and_match_formula() {
        let input = [1.0, 2.0, 3.0, 4.0, -1.0, 0.0, 0.5, 10.0];
        let mut out = [0.0; 8];
        softmax_f32(&input, 2, 4, 1.0, &mut out);
        for r in 0..2 {
            let row = &input[r * 4..r * 4 + 4];
            let s: f64 = row.iter().map(|&x| (x as f64).exp()).sum();
            let mut total = 0.0;
            for c in 0..4 {
                let want = ((row[c] as f64).exp() / s) as f32;
                assert!(
                    close(out[r * 4 + c], want),
                    "{} vs {}",
                    out[r * 4 + c],
                    want
                );
                total += out[r * 4 + c];
            }
            assert!((total - 1.0f32).abs() < 1e-6);
        }
    }

    #[test]
    fn fast_matches_reference() {
        for depth in [1, 5, 16, 33, 100] {
            let x: Vec<f32> = (0..3 * depth)
                .map(|i| ((i * 37) % 23) as f32 * 0.7 - 8.0)
                .collect();
            let (mut want, mut got) = (vec![0.0; x.len()], vec![0.0; x.len()]);
            softmax_f32(&x, 3, depth, 0.8, &mut want);
            softmax_f32_fast(&x, 3, depth, 0.8, &mut got);
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() <= 1e-6 * w.abs(), "{g} vs {w}");
            }
        }
    }

    #[test]
    fn fast_keeps_tiny_outputs_within_their_floor() {
        // Logits 80-120 below the row's maximum: e^x from the normal range down through the
        // subnormals to zero. The fast loops' exp stops at e^-87.33 (1.2e-38), so an output
        // may be off by that much absolutely, and by 1e-6 relatively above it.
        let depth = 130;
        let x: Vec<f32> = (0..depth)
            .map(|i| {
                if i == 7 {
                    0.0
                } else {
                    -80.0 - (i as f32) * 0.31
                }
            })
            .collect();
        let (mut want, mut got) = (vec![0.0; depth], vec![0.0; depth]);
        softmax_f32(&x, 1, depth, 1.0, &mut want);
        softmax_f32_fast(&x, 1, depth, 1.0, &mut got);
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-6 * w.abs() + 1.2e-38, "{g} vs {w}");
        }
        assert_eq!(got[7], 1.0);
        assert!(got.iter().all(|v| v.is_finite() && *v >= 0.0));
    }

    #[test]
    fn beta_scales_logits() {
        let input = [0.0, 1.0];
        let mut out = [0.0; 2];
        softmax_f32(&input, 1, 2, 2.0, &mut out);
        let want1 = (2.0f64.exp() / (1.0 + 2.0f64.exp())) as f32;
        assert!(close(out[1], want1));
        assert!(close(out[0], 1.0 - want1));
    }

    #[test]
    fn large_values_are_stable() {
        let input = [1000.0, 1001.0, 1002.0, -1e30, 3e38, 3e38];
        let mut out = [0.0; 6];
        softmax_f32(&input, 2, 3, 1.0, &mut out);
        assert!(out.iter().all(|v| v.is_finite()));
        let s: f64 = [0.0f64, 1.0, 2.0].iter().map(|x| x.exp()).sum();
        assert!(close(out[0], (1.0 / s) as f32));
        assert!(close(out[2], (2.0f64.exp() / s) as f32));
        assert_eq!(out[3], 0.0);
        assert_eq!(out[4], 0.5);
        assert_eq!(out[5], 0.5);

        let mut lout = [0.0; 6];
        log_softmax_f32(&input, 2, 3, &mut lout);
        assert!(lout[..3].iter().all(|v| v.is_finite()));
        assert!(close(lout[2], (2.0 - s.ln()) as f32));
    }

    #[test]
    fn log_softmax_matches_log_of_softmax() {
        let input: Vec<f32> = (0..15)
            .map(|i| ((i * 7) % 11) as f32 * 0.37 - 1.5)
            .collect();
        let mut sm = vec![0.0; 15];
        let mut lsm = vec![0.0; 15];
        softmax_f32(&input, 3, 5, 1.0, &mut sm);
        log_softmax_f32(&input, 3, 5, &mut lsm);
        for (a, b) in sm.iter().zip(&lsm) {
            assert!((a.ln() - b).abs() < 1e-5, "{} vs {}", a.ln(), b);
        }
        // exp of log-softmax rows sum to one
        for r in 0..3 {
            let t: f32 = lsm[r * 5..r * 5 + 5].iter().map(|v| v.exp()).sum();
            assert!((t - 1.0).abs() < 1e-5);
        }
    }

    #[test]
    fn rounding_non_negative_values_matches_roundf() {
        let mut values = vec![
            0.0f32,
            0.5,
            1.5,
            2.5,
            0.49999997,
            1.4999999,
            8388607.5,
            3e9,
            f32::NAN,
        ];
        values.extend((0..20_000).map(|i| i as f32 * 0.0137));
        for v in values {
            assert_eq!(round_non_negative(v), crate::math::roundf(v) as i32, "{v}");
        }
    }
}
