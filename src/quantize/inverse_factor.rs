//! The factor GPTQ's weight rounding reads (`weight_rounding`): the upper `U` with
//! `(H + λI)⁻¹ = Uᵀ U` of a layer's input statistics `H`, from one Cholesky factorization and one
//! triangular inverse, both in bands of rows so the rows below a band read their pivot rows from
//! cache. Every element takes the same terms in the same order with any vector width and any
//! number of threads.

use super::wide::{per_isa, Isa};
use rayon::prelude::*;

/// Dampening added to `H`'s diagonal, as a fraction of its mean (GPTQ's default).
pub(super) const DAMP: f64 = 0.05;

/// From this size on, a factorization's rows are computed in parallel.
pub(super) const PARALLEL_FACTOR_K: usize = 128;

/// Columns of a factorization done together: the rows below read their pivot rows from cache
/// instead of streaming the whole matrix once per column.
pub(super) const FACTOR_BAND: usize = 16;

/// Lower Cholesky factor of the symmetric positive definite `a` (`k × k`), in place; `false`
/// if it is not positive definite. Each element is `(a[i][j] − Σ_{p<j} a[i][p]·a[j][p]) / a[j][j]`
/// with the terms subtracted in the order of `p`; the columns are done a band at a time (first
/// the band's own rows, then every row below, in parallel), which changes no value.
fn cholesky(isa: Isa, a: &mut [f64], k: usize) -> bool {
    for j0 in (0..k).step_by(FACTOR_BAND) {
        let j1 = (j0 + FACTOR_BAND).min(k);
        // The band's diagonal block, column by column.
        for j in j0..j1 {
            let mut d = a[j * k + j];
            for p in 0..j {
                d -= a[j * k + p] * a[j * k + p];
            }
            if d <= 0.0 || !d.is_finite() {
                return false;
            }
            let d = d.sqrt();
            a[j * k + j] = d;
            for i in j + 1..j1 {
                let mut s = a[i * k + j];
                for p in 0..j {
                    s -= a[i * k + p] * a[j * k + p];
                }
                a[i * k + j] = s / d;
            }
        }
        // Every row below the band: its band columns, each from the row's earlier columns and
        // the pivot row's (independent of the other rows).
        let (head, below) = a.split_at_mut(j1 * k);
        let pivots = &head[j0 * k..];
        let band = j1 - j0;
        // The pivot rows' columns before the band, transposed: column `p` of every pivot row
        // side by side (zero past the band), so each row below reads them contiguously.
        let mut across = vec![[0f64; FACTOR_BAND]; j0];
        for (p, col) in across.iter_mut().enumerate() {
            for (c, v) in col[..band].iter_mut().enumerate() {
                *v = pivots[c * k + p];
            }
        }
        let columns = |rows: &mut [f64]| band_columns(isa, rows, j0, j1, pivots, &across, k);
        if k >= PARALLEL_FACTOR_K {
            below.par_chunks_mut(k * ROWS_TOGETHER).for_each(columns);
        } else {
            below.chunks_mut(k * ROWS_TOGETHER).for_each(columns);
        }
        for j in j0..j1 {
            for p in j + 1..k {
                a[j * k + p] = 0.0;
            }
        }
    }
    true
}

/// Rows below a band whose columns are computed together (independent chains of subtractions
/// side by side).
const ROWS_TOGETHER: usize = 4;

per_isa! {
    /// Columns `j0..j1` of `rows` (whole rows below the band of pivot rows `pivots`, whose
    /// columns before the band are `across`, transposed): the terms of the columns before the
    /// band for every band column at once (one chain of subtractions per column, each in the
    /// order of `p`, side by side, for `ROWS_TOGETHER` rows at a time), then the band's own
    /// earlier columns of each row, in order.
    fn band_columns(
        rows: &mut [f64],
        j0: usize,
        j1: usize,
        pivots: &[f64],
        across: &[[f64; FACTOR_BAND]],
        k: usize,
    ) {
        let band = j1 - j0;
        let mut together = rows.chunks_exact_mut(ROWS_TOGETHER * k);
        for rows in &mut together {
            let mut s = [[0f64; FACTOR_BAND]; ROWS_TOGETHER];
            for (r, s) in s.iter_mut().enumerate() {
                s[..band].copy_from_slice(&rows[r * k + j0..r * k + j1]);
            }
            for (p, col) in across.iter().enumerate() {
                for (r, s) in s.iter_mut().enumerate() {
                    let x = rows[r * k + p];
                    for (s, &y) in s.iter_mut().zip(col) {
                        *s -= x * y;
                    }
                }
            }
            for (row, s) in rows.chunks_exact_mut(k).zip(&s) {
                own_columns(row, s, j0, j1, pivots, k);
            }
        }
        for row in together.into_remainder().chunks_exact_mut(k) {
            let mut s = [0f64; FACTOR_BAND];
            s[..band].copy_from_slice(&row[j0..j1]);
            for (&x, col) in row[..j0].iter().zip(across) {
                for (s, &y) in s.iter_mut().zip(col) {
                    *s -= x * y;
                }
            }
            own_columns(row, &s, j0, j1, pivots, k);
        }
    }
}

/// The band's columns `j0..j1` of `row` from `s` (each column's value less the terms of the
/// columns before the band): less the band's own earlier columns, in order, over the pivot.
#[inline(always)]
fn own_columns(
    row: &mut [f64],
    s: &[f64; FACTOR_BAND],
    j0: usize,
    j1: usize,
    pivots: &[f64],
    k: usize,
) {
    for (c, j) in (j0..j1).enumerate() {
        let pivot = &pivots[c * k..c * k + j];
        let mut s = s[c];
        for (x, y) in row[j0..j].iter().zip(&pivot[j0..]) {
            s -= x * y;
        }
        row[j] = s / pivots[c * k + j];
    }
}

/// The upper factor `U` of `H⁻¹ = Uᵀ U` that GPTQ's updates read, from the accumulated `H`
/// (upper triangle filled); `None` if `H` is degenerate.
pub(super) fn inverse_factor(h: &[f64], k: usize) -> Option<Vec<f64>> {
    inverse_factor_with(Isa::detect(), h, k)
}

/// [`inverse_factor`] with the loops built for `isa`. With `J` the order-reversing permutation,
/// the lower Cholesky factor `M` of `J H J` gives `H = R Rᵀ` with `R = J M J` upper triangular,
/// so `H⁻¹ = R⁻ᵀ R⁻¹` and `U = R⁻¹ = J M⁻¹ J`: one factorization and one triangular inverse
/// (`k³/3` multiply-adds), where factoring `H`, inverting it as `L⁻ᵀ L⁻¹` and factoring that
/// again took twice as many. `U` is the same matrix (the factor with a positive diagonal is
/// unique), up to rounding.
pub(super) fn inverse_factor_with(isa: Isa, h: &[f64], k: usize) -> Option<Vec<f64>> {
    // `J H J`, both triangles: element (i, j) is H's (k-1-i, k-1-j), read from its upper triangle.
    let mut a = vec![0f64; k * k];
    for i in 0..k {
        for j in 0..=i {
            let (r, c) = (k - 1 - i, k - 1 - j);
            let v = h[r * k + c];
            a[i * k + j] = v;
            a[j * k + i] = v;
        }
    }
    let mean = (0..k).map(|i| a[i * k + i]).sum::<f64>() / k as f64;
    if mean <= 0.0 || !mean.is_finite() {
        return None;
    }
    for i in 0..k {
        // An input that is always zero: any rounding of its weights is as good.
        if a[i * k + i] == 0.0 {
            a[i * k + i] = 1.0;
        }
        a[i * k + i] += DAMP * mean;
    }
    if !cholesky(isa, &mut a, k) {
        return None;
    }
    let inv = lower_inverse(isa, &a, k);
    // U = J M⁻¹ J: upper triangular.
    let mut u = vec![0f64; k * k];
    for i in 0..k {
        for j in i..k {
            u[i * k + j] = inv[(k - 1 - i) * k + (k - 1 - j)];
        }
    }
    Some(u)
}

per_isa! {
    /// `L⁻¹` of the lower factor `a` (`k × k`) by forward substitution, a row at a time: row `i`
    /// is `(eᵢ − Σ_{p<i} L[i][p]·row p) / L[i][i]`, each element's terms subtracted in the order
    /// of `p`; a band of rows at a time, so each earlier row is read once per band.
    fn lower_inverse(a: &[f64], k: usize) -> Vec<f64> {
        let mut inv = vec![0f64; k * k];
        for i0 in (0..k).step_by(FACTOR_BAND) {
            let i1 = (i0 + FACTOR_BAND).min(k);
            let (done, band) = inv.split_at_mut(i0 * k);
            let band = &mut band[..(i1 - i0) * k];
            for (i, row) in (i0..i1).zip(band.chunks_mut(k)) {
                row[i] = 1.0;
            }
            // Four earlier rows at a time: each element takes the terms of those of the four
            // that reach it one after the other, held in a register.
            let mut p = 0;
            while p + 4 <= i0 {
                let e: [&[f64]; 4] =
                    std::array::from_fn(|q| &done[(p + q) * k..(p + q) * k + p + q + 1]);
                for (i, row) in (i0..i1).zip(band.chunks_mut(k)) {
                    let l: [f64; 4] = std::array::from_fn(|q| a[i * k + p + q]);
                    let (e0, e1, e2, e3) = (&e[0][..=p], &e[1][..=p], &e[2][..=p], &e[3][..=p]);
                    for (j, r) in row[..=p].iter_mut().enumerate() {
                        *r = *r - l[0] * e0[j] - l[1] * e1[j] - l[2] * e2[j] - l[3] * e3[j];
                    }
                    // Columns past `p` that only the later of the four reach, in their order.
                    for q in 1..4 {
                        for (r, &x) in row[p + 1..=p + q].iter_mut().zip(&e[q][p + 1..]) {
                            *r -= l[q] * x;
                        }
                    }
                }
                p += 4;
            }
            for p in p..i0 {
                let earlier = &done[p * k..p * k + p + 1];
                for (i, row) in (i0..i1).zip(band.chunks_mut(k)) {
                    let l = a[i * k + p];
                    for (r, &x) in row[..=p].iter_mut().zip(earlier) {
                        *r -= l * x;
                    }
                }
            }
            for i in i0..i1 {
                let (before, rest) = band.split_at_mut((i - i0) * k);
                let row = &mut rest[..k];
                for p in i0..i {
                    let l = a[i * k + p];
                    let earlier = &before[(p - i0) * k..(p - i0) * k + p + 1];
                    for (r, &x) in row[..=p].iter_mut().zip(earlier) {
                        *r -= l * x;
                    }
                }
                let d = a[i * k + i];
                for r in &mut row[..=i] {
                    *r /= d;
                }
            }
        }
        inv
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quantize::outer_products::add_outer;

    #[test]
    fn cholesky_inverse_factor_matches_the_inverse() {
        // H = [[4, 2], [2, 3]] (upper triangle given): H⁻¹ = [[3, -2], [-2, 4]] / 8.
        let h = [4.0, 2.0, 0.0, 3.0];
        let u = inverse_factor(&h, 2).unwrap();
        // Damping adds DAMP times the mean diagonal (3.5).
        let damp = DAMP * 3.5;
        let (a, b, d) = (4.0 + damp, 2.0, 3.0 + damp);
        let det = a * d - b * b;
        let inv = [d / det, -b / det, -b / det, a / det];
        // Uᵀ U = H⁻¹
        let utu = |i: usize, j: usize| (0..2).map(|p| u[p * 2 + i] * u[p * 2 + j]).sum::<f64>();
        for (i, j) in [(0, 0), (0, 1), (1, 1)] {
            assert!((utu(i, j) - inv[i * 2 + j]).abs() < 1e-9, "{i}{j}");
        }
    }

    /// Past several bands and the size where rows go parallel, `U` is upper triangular and
    /// `Uᵀ U` is the inverse of the damped `H`: `Uᵀ U (H + damping) = I` to rounding.
    #[test]
    fn inverse_factor_inverts_the_damped_matrix() {
        let k = PARALLEL_FACTOR_K + 2 * FACTOR_BAND + 5;
        let patches: Vec<f32> = (0..3 * k)
            .map(|i| (((i * 7919 + 3) % 1013) as f32 / 1013.0 - 0.4).max(0.0))
            .collect();
        let mut h = vec![0f64; k * k];
        add_outer(&mut h, &patches, k);
        let mut full = h.clone();
        for i in 0..k {
            for j in 0..i {
                full[i * k + j] = full[j * k + i];
            }
        }
        let mean = (0..k).map(|i| full[i * k + i]).sum::<f64>() / k as f64;
        for i in 0..k {
            if full[i * k + i] == 0.0 {
                full[i * k + i] = 1.0;
            }
            full[i * k + i] += DAMP * mean;
        }
        let u = inverse_factor(&h, k).expect("positive definite");
        for i in 0..k {
            assert!(u[i * k + i] > 0.0);
            assert!(u[i * k..i * k + i].iter().all(|&x| x == 0.0), "row {i}");
        }
        // H⁻¹ = Uᵀ U, then H⁻¹ H.
        let mut hinv = vec![0f64; k * k];
        for p in 0..k {
            for i in p..k {
                for j in p..k {
                    hinv[i * k + j] += u[p * k + i] * u[p * k + j];
                }
            }
        }
        for i in 0..k {
            for j in 0..k {
                let x: f64 = (0..k).map(|p| hinv[i * k + p] * full[p * k + j]).sum();
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((x - want).abs() < 1e-9, "({i}, {j}): {x}");
            }
        }
    }

    /// The banded, parallel factorization gives every element exactly as the formula does (each
    /// element's terms subtracted in the order of `p`), past several bands and the size where
    /// rows go parallel.
    #[test]
    fn banded_cholesky_is_the_formula_bit_for_bit() {
        let k = PARALLEL_FACTOR_K + 2 * FACTOR_BAND + 3;
        // A symmetric positive definite matrix: diagonally dominant, irregular entries.
        let mut a = vec![0f64; k * k];
        for i in 0..k {
            for j in 0..=i {
                let v = (((i * 7919 + j * 104729) % 1000) as f64 / 1000.0 - 0.5) / 3.0;
                a[i * k + j] = v;
                a[j * k + i] = v;
            }
            a[i * k + i] = k as f64 / 2.0 + (i % 5) as f64;
        }
        let mut expected = a.clone();
        for j in 0..k {
            let mut d = expected[j * k + j];
            for p in 0..j {
                d -= expected[j * k + p] * expected[j * k + p];
            }
            let d = d.sqrt();
            expected[j * k + j] = d;
            for i in j + 1..k {
                let mut s = expected[i * k + j];
                for p in 0..j {
                    s -= expected[i * k + p] * expected[j * k + p];
                }
                expected[i * k + j] = s / d;
            }
            for p in j + 1..k {
                expected[j * k + p] = 0.0;
            }
        }
        for isa in Isa::all_available() {
            let mut a = a.clone();
            assert!(cholesky(isa, &mut a, k));
            for (n, (x, y)) in a.iter().zip(&expected).enumerate() {
                assert_eq!(
                    x.to_bits(),
                    y.to_bits(),
                    "{isa:?} row {} column {}",
                    n / k,
                    n % k
                );
            }
        }
    }
}
