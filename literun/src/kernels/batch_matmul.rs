//! BATCH_MATMUL (float32 and int8), matching TFLite's reference `BatchMatMul`.
//!
//! `lhs` is `[..., M, K]` (`[..., K, M]` with `adj_x`), `rhs` is `[..., K, N]` (`[..., N, K]`
//! with `adj_y`). Leading batch dims are right-aligned and broadcast numpy-style. Every output is
//! accumulated from zero over `k = 0..K` in order, like the reference kernel.

/// Batched matrix product; `out_shape` is `[...broadcast batch..., M, N]`.
#[allow(clippy::too_many_arguments)]
pub fn batch_matmul_f32(
    lhs: &[f32],
    lhs_shape: &[usize],
    rhs: &[f32],
    rhs_shape: &[usize],
    adj_x: bool,
    adj_y: bool,
    output: &mut [f32],
    out_shape: &[usize],
) {
    let d = dims(
        lhs.len(),
        lhs_shape,
        rhs.len(),
        rhs_shape,
        adj_x,
        adj_y,
        output.len(),
        out_shape,
    );
    debug_assert!(d.is_some(), "inconsistent BATCH_MATMUL shapes");
    let Some((m, k, n)) = d else {
        return;
    };
    for_each_batch(
        lhs_shape,
        rhs_shape,
        out_shape,
        m * k,
        k * n,
        |lo, ro, oo| {
            let a = &lhs[lo..lo + m * k];
            let b = &rhs[ro..ro + k * n];
            let out = &mut output[oo..oo + m * n];
            matmul(a, b, m, k, n, adj_x, adj_y, out);
        },
    );
}

/// Calls `f(lhs_offset, rhs_offset, out_offset)` for every output matrix, mapping each output
/// batch index to the (broadcast) lhs/rhs matrix, innermost batch dim first. `lhs_mat` and
/// `rhs_mat` are the element counts of one operand matrix.
pub(crate) fn for_each_batch(
    lhs_shape: &[usize],
    rhs_shape: &[usize],
    out_shape: &[usize],
    lhs_mat: usize,
    rhs_mat: usize,
    mut f: impl FnMut(usize, usize, usize),
) {
    let (lr, rr, or) = (lhs_shape.len(), rhs_shape.len(), out_shape.len());
    let out_mat = out_shape[or - 2] * out_shape[or - 1];
    if out_mat == 0 {
        return;
    }
    let batch_dims = or - 2;
    let out_batches: usize = out_shape[..batch_dims].iter().product();
    for ob in 0..out_batches {
        let mut rem = ob;
        let (mut lhs_off, mut rhs_off) = (0usize, 0usize);
        let (mut lhs_stride, mut rhs_stride) = (lhs_mat, rhs_mat);
        for j in 0..batch_dims {
            let od = out_shape[or - 3 - j];
            let c = rem % od;
            rem /= od;
            if j + 2 < lr {
                let ld = lhs_shape[lr - 3 - j];
                if ld != 1 {
                    lhs_off += c * lhs_stride;
                }
                lhs_stride *= ld;
            }
            if j + 2 < rr {
                let rd = rhs_shape[rr - 3 - j];
                if rd != 1 {
                    rhs_off += c * rhs_stride;
                }
                rhs_stride *= rd;
            }
        }
        f(lhs_off, rhs_off, ob * out_mat);
    }
}

/// `(m, k, n)` of operands of these shapes (the lhs `[..., M, K]`, `[..., K, M]` with `adj_x`;
/// the rhs `[..., K, N]`, `[..., N, K]` with `adj_y`), when both have rank 2 or more and agree
/// on K.
pub fn matmul_dims(
    lhs_shape: &[usize],
    rhs_shape: &[usize],
    adj_x: bool,
    adj_y: bool,
) -> Option<(usize, usize, usize)> {
    let (lr, rr) = (lhs_shape.len(), rhs_shape.len());
    if lr < 2 || rr < 2 {
        return None;
    }
    let (m, k) = if adj_x {
        (lhs_shape[lr - 1], lhs_shape[lr - 2])
    } else {
        (lhs_shape[lr - 2], lhs_shape[lr - 1])
    };
    let (k2, n) = if adj_y {
        (rhs_shape[rr - 1], rhs_shape[rr - 2])
    } else {
        (rhs_shape[rr - 2], rhs_shape[rr - 1])
    };
    (k == k2).then_some((m, k, n))
}

/// Checks the operand shapes against the slices; `(m, k, n)` when they agree.
#[allow(clippy::too_many_arguments)]
pub(crate) fn dims(
    lhs_len: usize,
    lhs_shape: &[usize],
    rhs_len: usize,
    rhs_shape: &[usize],
    adj_x: bool,
    adj_y: bool,
    out_len: usize,
    out_shape: &[usize],
) -> Option<(usize, usize, usize)> {
    let (m, k, n) = matmul_dims(lhs_shape, rhs_shape, adj_x, adj_y)?;
    let (lr, rr, or) = (lhs_shape.len(), rhs_shape.len(), out_shape.len());
    if or != lr.max(rr) {
        return None;
    }
    let ok = out_shape[or - 2] == m
        && out_shape[or - 1] == n
        && lhs_len == lhs_shape.iter().product::<usize>()
        && rhs_len == rhs_shape.iter().product::<usize>()
        && out_len == out_shape.iter().product::<usize>()
        && (0..or - 2).all(|j| {
            let o = out_shape[or - 3 - j];
            let l = if j + 2 < lr { lhs_shape[lr - 3 - j] } else { 1 };
            let r = if j + 2 < rr { rhs_shape[rr - 3 - j] } else { 1 };
            (l == o || l == 1) && (r == o || r == 1)
        });
    ok.then_some((m, k, n))
}

/// Scratch of [`batch_matmul_i8`]: the lhs as rows along K and the rhs as rows along N (where
/// the layout does not have them so already), and the sums of the lhs rows and rhs columns.
pub struct BmmI8Scratch<'a> {
    /// The lhs rows (`m * k`, with `adj_x`), then the rhs as `[K, N]` (`k * n`, with `adj_y`).
    pub i8s: &'a mut [i8],
    /// `m + n` sums.
    pub sums: &'a mut [i32],
}

impl BmmI8Scratch<'_> {
    /// (i8, i32) values the scratch needs for operands of these shapes.
    pub fn sizes(
        lhs_shape: &[usize],
        rhs_shape: &[usize],
        adj_x: bool,
        adj_y: bool,
    ) -> (usize, usize) {
        let (m, k, n) = matmul_dims(lhs_shape, rhs_shape, adj_x, adj_y).unwrap_or_default();
        let lhs = if adj_x { m * k } else { 0 };
        let rhs = if adj_y { k * n } else { 0 };
        (lhs + rhs, m + n)
    }
}

/// Int8 BATCH_MATMUL as LiteRT's builtin kernel (`EvalInt8Int8`): per output,
/// `acc = sum_k (lhs + lhs_offset) * (rhs + rhs_offset)` (in wrapping i32), requantized by `q`
/// (one multiplier; `q.input_offset` is `-lhs_zero_point`), plus the output zero point, clamped
/// to int8. Shapes as [`batch_matmul_f32`]; does nothing if they or the scratch sizes
/// ([`BmmI8Scratch::sizes`]) do not agree with the slices.
///
/// Computed as `dot(row, col) + rhs_offset * sum(row) + lhs_offset * sum(col)` plus
/// `K * lhs_offset * rhs_offset`: the same value modulo 2^32 as the reference's sum of
/// products. Each lhs row's outputs are accumulated together, [`BMM_I8_COLS`] at a time, one
/// lhs value times a contiguous run of the rhs row along N per step (a loop over output
/// columns, which vectorizes even when K is short, as in attention heads).
#[allow(clippy::too_many_arguments)]
pub fn batch_matmul_i8(
    lhs: &[i8],
    lhs_shape: &[usize],
    rhs: &[i8],
    rhs_shape: &[usize],
    adj_x: bool,
    adj_y: bool,
    rhs_offset: i32,
    q: &crate::quant::OutputStage,
    scratch: &mut BmmI8Scratch<'_>,
    output: &mut [i8],
    out_shape: &[usize],
) {
    let operands = BmmI8Operands {
        lhs,
        lhs_shape,
        rhs,
        rhs_shape,
        adj_x,
        adj_y,
        lhs_offset: q.input_offset,
        rhs_offset,
    };
    let mut acc = [0i32; BMM_I8_COLS];
    batch_matmul_i8_rows(&operands, q.apply(0, 0), scratch, output, out_shape, |r| {
        for j0 in (0..r.out.len()).step_by(BMM_I8_COLS) {
            let jn = (r.out.len() - j0).min(BMM_I8_COLS);
            let acc = &mut acc[..jn];
            for (a, &c) in acc.iter_mut().zip(&r.col_terms[j0..j0 + jn]) {
                *a = c.wrapping_add(r.row_term);
            }
            let n = r.col_terms.len();
            for (kk, &x) in r.row.iter().enumerate() {
                let x = i32::from(x);
                for (a, &y) in acc.iter_mut().zip(&r.rhs[kk * n + j0..kk * n + j0 + jn]) {
                    // Each product fits in i16; the sum wraps as the reference's.
                    *a = a.wrapping_add(x * i32::from(y));
                }
            }
            for (o, &a) in r.out[j0..j0 + jn].iter_mut().zip(acc.iter()) {
                *o = q.apply(a, 0);
            }
        }
    });
}

/// The operands of an int8 BATCH_MATMUL: shapes as [`batch_matmul_f32`]; the offsets are
/// `-zero_point` of each side.
pub(crate) struct BmmI8Operands<'a> {
    pub(crate) lhs: &'a [i8],
    pub(crate) lhs_shape: &'a [usize],
    pub(crate) rhs: &'a [i8],
    pub(crate) rhs_shape: &'a [usize],
    pub(crate) adj_x: bool,
    pub(crate) adj_y: bool,
    pub(crate) lhs_offset: i32,
    pub(crate) rhs_offset: i32,
}

/// One output row of an int8 BATCH_MATMUL for a row kernel of [`batch_matmul_i8_rows`]:
/// `out[j] = requant(row_term + col_terms[j] + sum_k row[k] * rhs[k * n + j])` (wrapping i32),
/// `n = col_terms.len() = out.len()`.
pub(crate) struct BmmI8Row<'a> {
    /// The lhs row, K values.
    pub(crate) row: &'a [i8],
    /// The rhs matrix as `[K, N]`.
    pub(crate) rhs: &'a [i8],
    pub(crate) col_terms: &'a [i32],
    pub(crate) row_term: i32,
    pub(crate) out: &'a mut [i8],
}

/// [`batch_matmul_i8`]'s walk over the matrices, with `row_kernel` computing and requantizing
/// each output row (`zero` is the output of an empty sum, for K = 0). Does nothing if the
/// shapes or the scratch sizes do not agree with the slices.
pub(crate) fn batch_matmul_i8_rows(
    operands: &BmmI8Operands<'_>,
    zero: i8,
    scratch: &mut BmmI8Scratch<'_>,
    output: &mut [i8],
    out_shape: &[usize],
    mut row_kernel: impl FnMut(BmmI8Row<'_>),
) {
    let &BmmI8Operands {
        lhs,
        lhs_shape,
        rhs,
        rhs_shape,
        adj_x,
        adj_y,
        lhs_offset: lo,
        rhs_offset,
    } = operands;
    let Some((m, k, n)) = dims(
        lhs.len(),
        lhs_shape,
        rhs.len(),
        rhs_shape,
        adj_x,
        adj_y,
        output.len(),
        out_shape,
    ) else {
        return;
    };
    let (need_i8, need_i32) = BmmI8Scratch::sizes(lhs_shape, rhs_shape, adj_x, adj_y);
    if scratch.i8s.len() < need_i8 || scratch.sums.len() < need_i32 {
        return;
    }
    let (lhs_rows, rhs_kn) = scratch.i8s[..need_i8].split_at_mut(if adj_x { m * k } else { 0 });
    if k == 0 {
        output.fill(zero);
        return;
    }
    let base = (k as i32).wrapping_mul(lo).wrapping_mul(rhs_offset);
    let (row_sums, col_sums) = scratch.sums[..m + n].split_at_mut(m);
    for_each_batch(
        lhs_shape,
        rhs_shape,
        out_shape,
        m * k,
        k * n,
        |la, ra, oo| {
            let a = &lhs[la..la + m * k];
            let b = &rhs[ra..ra + k * n];
            let out = &mut output[oo..oo + m * n];
            let rows: &[i8] = if adj_x {
                transpose(a, k, m, lhs_rows);
                lhs_rows
            } else {
                a
            };
            let bkn: &[i8] = if adj_y {
                transpose(b, n, k, rhs_kn);
                rhs_kn
            } else {
                b
            };
            for (s, row) in row_sums.iter_mut().zip(rows.chunks_exact(k)) {
                *s = sum_i8(row);
            }
            col_sums.fill(0);
            for brow in bkn.chunks_exact(n) {
                for (s, &v) in col_sums.iter_mut().zip(brow) {
                    *s = s.wrapping_add(i32::from(v));
                }
            }
            for s in col_sums.iter_mut() {
                *s = lo.wrapping_mul(*s);
            }
            for ((row, &sum), out) in rows
                .chunks_exact(k)
                .zip(&*row_sums)
                .zip(out.chunks_exact_mut(n))
            {
                row_kernel(BmmI8Row {
                    row,
                    rhs: bkn,
                    col_terms: col_sums,
                    row_term: rhs_offset.wrapping_mul(sum).wrapping_add(base),
                    out,
                });
            }
        },
    );
}

/// Output columns of one row pass of [`batch_matmul_i8`] (its accumulators live on the stack).
const BMM_I8_COLS: usize = 64;

/// `out[j * r + i] = x[i * c + j]`: `x` is `r` rows of `c`, `out` is `c` rows of `r`.
fn transpose(x: &[i8], r: usize, c: usize, out: &mut [i8]) {
    for (i, row) in x.chunks_exact(c).enumerate() {
        for (j, &v) in row.iter().enumerate() {
            out[j * r + i] = v;
        }
    }
}

fn sum_i8(x: &[i8]) -> i32 {
    x.iter().fold(0i32, |s, &v| s.wrapping_add(i32::from(v)))
}

/// Scratch of [`batch_matmul_hybrid`].
pub struct HybridBmmScratch<'a> {
    /// The quantized lhs (as many values as the lhs).
    pub quantized: &'a mut [i8],
    /// One scaling factor per lhs row (all lhs matrices).
    pub scales: &'a mut [f32],
    /// One zero point per lhs row.
    pub offsets: &'a mut [i32],
    /// One lhs row (K values), gathered when `adj_x`.
    pub row: &'a mut [f32],
    /// The sum of each rhs column (N per rhs matrix).
    pub col_sums: &'a mut [i32],
}

/// Hybrid BATCH_MATMUL (float lhs, int8 rhs with one scale, float output) as LiteRT's
/// `EvalHybrid` (`reference_ops::BatchMatMul`, which both its kernels use): each lhs row of K
/// values is quantized on its own (symmetric, or asymmetric when `asymmetric`), its scale
/// multiplied by `rhs_scale` in f32; then per output
/// `total = sum_k q[m, k] * w[k, n]`, `total -= col_sum[n] * offset[m]` (in f32, back to i32) and
/// `out = scale[m] * total`. Does nothing if the shapes or scratch sizes do not agree.
#[allow(clippy::too_many_arguments)]
pub fn batch_matmul_hybrid(
    lhs: &[f32],
    lhs_shape: &[usize],
    rhs: &[i8],
    rhs_shape: &[usize],
    adj_x: bool,
    adj_y: bool,
    rhs_scale: f32,
    asymmetric: bool,
    scratch: &mut HybridBmmScratch<'_>,
    output: &mut [f32],
    out_shape: &[usize],
) {
    let Some((m, k, n)) = dims(
        lhs.len(),
        lhs_shape,
        rhs.len(),
        rhs_shape,
        adj_x,
        adj_y,
        output.len(),
        out_shape,
    ) else {
        return;
    };
    if m * n == 0 || k == 0 {
        output.fill(0.0);
        return;
    }
    let rows = lhs.len() / k;
    let rhs_mats = rhs.len() / (k * n);
    if scratch.quantized.len() < lhs.len()
        || scratch.scales.len() < rows
        || scratch.offsets.len() < rows
        || scratch.row.len() < k
        || scratch.col_sums.len() < rhs_mats * n
    {
        output.fill(0.0);
        return;
    }
    // Quantize each lhs row (`BatchQuantizeFloats`).
    for r in 0..rows {
        let (mat, i) = (r / m, r % m);
        let row = &mut scratch.row[..k];
        for (kk, v) in row.iter_mut().enumerate() {
            *v = if adj_x {
                lhs[mat * m * k + kk * m + i]
            } else {
                lhs[r * k + kk]
            };
        }
        let q = &mut scratch.quantized[r * k..(r + 1) * k];
        let (scale, offset) = if asymmetric {
            crate::quant::asymmetric_quantize_floats(row, q)
        } else {
            (crate::quant::symmetric_quantize_floats(row, q), 0)
        };
        scratch.scales[r] = scale * rhs_scale;
        scratch.offsets[r] = offset;
    }
    // Column sums of every rhs matrix (`ReductionSumVector` over the transposed rhs).
    let w_at = |mat: usize, kk: usize, j: usize| {
        let b = mat * k * n;
        i32::from(if adj_y {
            rhs[b + j * k + kk]
        } else {
            rhs[b + kk * n + j]
        })
    };
    for mat in 0..rhs_mats {
        for j in 0..n {
            scratch.col_sums[mat * n + j] = (0..k).map(|kk| w_at(mat, kk, j)).sum();
        }
    }
    let s = &*scratch;
    for_each_batch(
        lhs_shape,
        rhs_shape,
        out_shape,
        m * k,
        k * n,
        |la, ra, oo| {
            let (lmat, rmat) = (la / (m * k), ra / (k * n));
            for i in 0..m {
                let r = lmat * m + i;
                let q = &s.quantized[r * k..(r + 1) * k];
                let (scale, offset) = (s.scales[r], s.offsets[r] as f32);
                for j in 0..n {
                    let mut total = 0i32;
                    for (kk, &qv) in q.iter().enumerate() {
                        total = total.wrapping_add(i32::from(qv) * w_at(rmat, kk, j));
                    }
                    let col_sum = s.col_sums[rmat * n + j] as f32;
                    let total = (total as f32 - col_sum * offset) as i32;
                    output[oo + i * n + j] = 0.0 + scale * total as f32;
                }
            }
        },
    );
}

/// One `[M, N]` product; the lhs element (i, kk) is `a[i*K + kk]`, or `a[kk*M + i]` if `adj_x`.
#[allow(clippy::too_many_arguments)]
fn matmul(
    a: &[f32],
    b: &[f32],
    m: usize,
    k: usize,
    n: usize,
    adj_x: bool,
    adj_y: bool,
    out: &mut [f32],
) {
    let lhs_at = |i: usize, kk: usize| if adj_x { a[kk * m + i] } else { a[i * k + kk] };
    for (i, out_row) in out.chunks_exact_mut(n).enumerate() {
        if adj_y {
            // rhs is [N, K]: each output is a dot product over contiguous rhs rows.
            for (j, o) in out_row.iter_mut().enumerate() {
                let b_row = &b[j * k..(j + 1) * k];
                let mut total = 0.0f32;
                if adj_x {
                    for (kk, &bv) in b_row.iter().enumerate() {
                        total += lhs_at(i, kk) * bv;
                    }
                } else {
                    for (&av, &bv) in a[i * k..(i + 1) * k].iter().zip(b_row) {
                        total += av * bv;
                    }
                }
                *o = total;
            }
        } else {
            // rhs is [K, N]: accumulate rows of rhs scaled by lhs(i, kk), contiguous over N.
            out_row.fill(0.0);
            for kk in 0..k {
                let av = lhs_at(i, kk);
                let b_row = &b[kk * n..(kk + 1) * n];
                for (o, &bv) in out_row.iter_mut().zip(b_row) {
                    *o += av * bv;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    fn rand_vec(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1664525).wrapping_add(1013904223);
                (s >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
            })
            .collect()
    }

    /// Transposes the last two dims of a row-major tensor.
    fn transpose_last2(x: &[f32], shape: &[usize]) -> (Vec<f32>, Vec<usize>) {
        let r = shape.len();
        let (p, q) = (shape[r - 2], shape[r - 1]);
        let mut out = vec![0.0; x.len()];
        for bch in 0..x.len() / (p * q) {
            for i in 0..p {
                for j in 0..q {
                    out[bch * p * q + j * p + i] = x[bch * p * q + i * q + j];
                }
            }
        }
        let mut s = shape.to_vec();
        s.swap(r - 2, r - 1);
        (out, s)
    }

    /// Naive: explicit multi-index broadcasting (f64 accumulation).
    fn naive(l: &[f32], ls: &[usize], r: &[f32], rs: &[usize], os: &[usize]) -> Vec<f32> {
        let or = os.len();
        let (m, k, n) = (ls[ls.len() - 2], ls[ls.len() - 1], rs[rs.len() - 1]);
        let total: usize = os.iter().product();
        let mut out = vec![0.0; total];
        for (flat, o) in out.iter_mut().enumerate() {
            let mut idx = vec![0; or];
            let mut rem = flat;
            for d in (0..or).rev() {
                idx[d] = rem % os[d];
                rem /= os[d];
            }
            let (i, j) = (idx[or - 2], idx[or - 1]);
            let offset = |shape: &[usize], mat: usize| {
                let nb = shape.len() - 2;
                let mut off = 0;
                for d in 0..nb {
                    let oi = idx[or - 2 - nb + d];
                    let c = if shape[d] == 1 { 0 } else { oi };
                    off = off * shape[d] + c;
                }
                off * mat
            };
            let lo = offset(ls, m * k);
            let ro = offset(rs, k * n);
            let mut s = 0.0f64;
            for kk in 0..k {
                s += l[lo + i * k + kk] as f64 * r[ro + kk * n + j] as f64;
            }
            *o = s as f32;
        }
        out
    }

    #[test]
    fn hand_computed_2x2() {
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [5.0, 6.0, 7.0, 8.0];
        let mut o = [0.0; 4];
        batch_matmul_f32(&a, &[2, 2], &b, &[2, 2], false, false, &mut o, &[2, 2]);
        assert_eq!(o, [19.0, 22.0, 43.0, 50.0]);
        batch_matmul_f32(&a, &[2, 2], &b, &[2, 2], true, false, &mut o, &[2, 2]);
        assert_eq!(o, [26.0, 30.0, 38.0, 44.0]);
        batch_matmul_f32(&a, &[2, 2], &b, &[2, 2], false, true, &mut o, &[2, 2]);
        assert_eq!(o, [17.0, 23.0, 39.0, 53.0]);
        batch_matmul_f32(&a, &[2, 2], &b, &[2, 2], true, true, &mut o, &[2, 2]);
        assert_eq!(o, [23.0, 31.0, 34.0, 46.0]);
    }

    fn check(ls: &[usize], rs: &[usize], os: &[usize]) {
        let l = rand_vec(ls.iter().product(), 1 + ls.len() as u32);
        let r = rand_vec(rs.iter().product(), 77 + rs.len() as u32);
        let want = naive(&l, ls, &r, rs, os);
        for adj_x in [false, true] {
            for adj_y in [false, true] {
                let (lx, lxs) = if adj_x {
                    transpose_last2(&l, ls)
                } else {
                    (l.clone(), ls.to_vec())
                };
                let (ry, rys) = if adj_y {
                    transpose_last2(&r, rs)
                } else {
                    (r.clone(), rs.to_vec())
                };
                let mut out = vec![f32::NAN; want.len()];
                batch_matmul_f32(&lx, &lxs, &ry, &rys, adj_x, adj_y, &mut out, os);
                for (i, (a, b)) in out.iter().zip(&want).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                        "adj {adj_x} {adj_y} at {i}: {a} vs {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn broadcast_different_ranks() {
        // [2,1,3,4] x [5,4,2] -> [2,5,3,2]
        check(&[2, 1, 3, 4], &[5, 4, 2], &[2, 5, 3, 2]);
        check(&[5, 3, 4], &[2, 1, 4, 2], &[2, 5, 3, 2]);
    }

    #[test]
    fn plain_batched_and_rank2() {
        check(&[3, 4, 5], &[3, 5, 2], &[3, 4, 2]);
        check(&[4, 5], &[5, 3], &[4, 3]);
        check(&[4, 5], &[2, 3, 5, 3], &[2, 3, 4, 3]);
    }

    #[test]
    fn rank6_broadcast() {
        check(
            &[2, 1, 2, 1, 2, 3],
            &[1, 2, 1, 2, 3, 2],
            &[2, 2, 2, 2, 2, 2],
        );
    }

    #[test]
    fn empty_k_gives_zero() {
        let mut o = [9.0; 6];
        batch_matmul_f32(&[], &[2, 0], &[], &[0, 3], false, false, &mut o, &[2, 3]);
        assert_eq!(o, [0.0; 6]);
        let mut o = [9.0; 6];
        batch_matmul_f32(&[], &[2, 0], &[], &[3, 0], false, true, &mut o, &[2, 3]);
        assert_eq!(o, [0.0; 6]);
    }

    /// The reference's loop: every product accumulated in order, operands read in place.
    #[allow(clippy::too_many_arguments)]
    fn reference_i8(
        lhs: &[i8],
        lhs_shape: &[usize],
        rhs: &[i8],
        rhs_shape: &[usize],
        adj_x: bool,
        adj_y: bool,
        rhs_offset: i32,
        q: &crate::quant::OutputStage,
        out_shape: &[usize],
    ) -> Vec<i8> {
        let mut output = vec![0i8; out_shape.iter().product()];
        let (m, k, n) = dims(
            lhs.len(),
            lhs_shape,
            rhs.len(),
            rhs_shape,
            adj_x,
            adj_y,
            output.len(),
            out_shape,
        )
        .unwrap();
        let lo = q.input_offset;
        for_each_batch(
            lhs_shape,
            rhs_shape,
            out_shape,
            m * k,
            k * n,
            |la, ra, oo| {
                for i in 0..m {
                    for j in 0..n {
                        let mut acc = 0i32;
                        for kk in 0..k {
                            let x = if adj_x {
                                lhs[la + kk * m + i]
                            } else {
                                lhs[la + i * k + kk]
                            };
                            let y = if adj_y {
                                rhs[ra + j * k + kk]
                            } else {
                                rhs[ra + kk * n + j]
                            };
                            acc =
                                acc.wrapping_add((i32::from(x) + lo) * (i32::from(y) + rhs_offset));
                        }
                        output[oo + i * n + j] = q.apply(acc, 0);
                    }
                }
            },
        );
        output
    }

    #[test]
    fn int8_matches_the_reference_loop() {
        let mut seed = 7u32;
        let mut next = move || {
            seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
            seed >> 8
        };
        let shapes: [(&[usize], &[usize], &[usize]); 6] = [
            (&[3, 5, 17], &[3, 17, 6], &[3, 5, 6]),
            (&[1, 1], &[1, 1], &[1, 1]),
            (&[2, 4, 64], &[64, 9], &[2, 4, 9]),
            (&[2, 1, 3, 33], &[4, 33, 2], &[2, 4, 3, 2]),
            (&[7, 40], &[40, 31], &[7, 31]),
            (&[2, 3, 2, 5, 8], &[1, 3, 1, 8, 5], &[2, 3, 2, 5, 5]),
        ];
        for (ls, rs, os) in shapes {
            for (adj_x, adj_y) in [(false, false), (true, false), (false, true), (true, true)] {
                // The shapes above are for no adjoint; swap the last two dims where adjoint.
                let swap = |s: &[usize], adj: bool| {
                    let mut s = s.to_vec();
                    let r = s.len();
                    if adj {
                        s.swap(r - 1, r - 2);
                    }
                    s
                };
                let (ls, rs) = (swap(ls, adj_x), swap(rs, adj_y));
                let lhs: Vec<i8> = (0..ls.iter().product()).map(|_| next() as i8).collect();
                let rhs: Vec<i8> = (0..rs.iter().product()).map(|_| next() as i8).collect();
                for (lo, ro, mult, shift) in [
                    (0, 0, 1 << 30, -7),
                    (128, -127, 1_518_500_250, -16),
                    (-127, 128, 2_000_000_000, -17),
                    (5, 3, 1 << 30, -9),
                ] {
                    let q = crate::quant::OutputStage {
                        input_offset: lo,
                        output_offset: -3,
                        multipliers: vec![mult],
                        shifts: vec![shift],
                        act_min: -128,
                        act_max: 127,
                        single_rounding: false,
                    };
                    let want = reference_i8(&lhs, &ls, &rhs, &rs, adj_x, adj_y, ro, &q, os);
                    let (ni8, ni32) = BmmI8Scratch::sizes(&ls, &rs, adj_x, adj_y);
                    let mut i8s = vec![0i8; ni8];
                    let mut i32s = vec![0i32; ni32];
                    let mut got = vec![0i8; want.len()];
                    batch_matmul_i8(
                        &lhs,
                        &ls,
                        &rhs,
                        &rs,
                        adj_x,
                        adj_y,
                        ro,
                        &q,
                        &mut BmmI8Scratch {
                            i8s: &mut i8s,
                            sums: &mut i32s,
                        },
                        &mut got,
                        os,
                    );
                    assert_eq!(
                        got, want,
                        "{ls:?} x {rs:?} adj {adj_x} {adj_y} offsets {lo} {ro}"
                    );
                    // Not all saturated: the case checks something.
                    assert!(
                        got.iter().any(|&v| v != 127 && v != -128),
                        "{ls:?} {lo} {ro}"
                    );
                }
            }
        }
    }
}
