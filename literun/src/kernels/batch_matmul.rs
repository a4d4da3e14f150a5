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
#[path = "batch_matmul_tests.rs"]
mod tests;
