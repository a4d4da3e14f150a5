//! Weight rounding's largest loop: `H += p pᵀ` over a layer's input patches, in f64, built for
//! the widest vectors the CPU has ([`super::wide`]). Every element of `H` adds the same terms
//! in the same order (the patches') however the loop is blocked, so `H`, and the weights
//! rounded with it, are the same bit for bit.

use super::wide::{per_isa, Isa};
use rayon::prelude::*;

/// Rows of `H` summed together: their part of `H` stays in cache while the patches stream by.
const BAND: usize = 8;

/// Patches a band takes before going on to the next ones: their values stay in cache while
/// each of the band's rows reads them.
const BLOCK: usize = 64;

/// Adds `p pᵀ` for each `k`-value patch `p` of `patches` to the `k × k` block `h` (upper
/// triangle; mirrored later), skipping a row's term where its patch value is zero. Bands of
/// rows are summed in parallel; each element adds its terms in the order of the patches, as
/// one patch at a time would (`h[i][j] += p[i]·p[j]`).
pub(super) fn add_outer(h: &mut [f64], patches: &[f32], k: usize) {
    if k == 0 {
        return;
    }
    let isa = Isa::detect();
    let sum = |(b, band): (usize, &mut [f64])| sum_band(isa, band, b * BAND, patches, k);
    // A depthwise channel's 9 taps are not worth a task each.
    if k < 64 {
        h.chunks_mut(k * BAND).enumerate().for_each(sum);
    } else {
        h.par_chunks_mut(k * BAND).enumerate().for_each(sum);
    }
}

per_isa! {
    /// Adds the terms of `patches` to the band of rows `first..` of `h` (`band`, whole rows): a
    /// block of patches at a time, in order; for each row of the band, the block's patches whose
    /// value at the row is not zero, eight at a time: the row's elements take the eight terms
    /// one after the other while held in registers (one load and store of `H` per eight terms,
    /// the same sums as eight passes).
    fn sum_band(band: &mut [f64], first: usize, patches: &[f32], k: usize) {
        let mut terms: Vec<(f64, &[f32])> = Vec::with_capacity(BLOCK);
        for block in patches.chunks(BLOCK * k) {
            for (r, row) in band.chunks_mut(k).enumerate() {
                let i = first + r;
                terms.clear();
                terms.extend(
                    block
                        .chunks_exact(k)
                        .filter(|p| p[i] != 0.0)
                        .map(|p| (f64::from(p[i]), &p[i..])),
                );
                add_terms(&mut row[i..], &terms);
            }
        }
    }
}

/// `row[j] += a·p[j]` for each `(a, p)` of `terms`, in order.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
fn add_terms(row: &mut [f64], terms: &[(f64, &[f32])]) {
    let n = row.len();
    let mut eights = terms.chunks_exact(8);
    for t in &mut eights {
        let (a0, a1, a2, a3) = (t[0].0, t[1].0, t[2].0, t[3].0);
        let (a4, a5, a6, a7) = (t[4].0, t[5].0, t[6].0, t[7].0);
        let (p0, p1, p2, p3) = (&t[0].1[..n], &t[1].1[..n], &t[2].1[..n], &t[3].1[..n]);
        let (p4, p5, p6, p7) = (&t[4].1[..n], &t[5].1[..n], &t[6].1[..n], &t[7].1[..n]);
        for j in 0..n {
            row[j] = row[j]
                + a0 * f64::from(p0[j])
                + a1 * f64::from(p1[j])
                + a2 * f64::from(p2[j])
                + a3 * f64::from(p3[j])
                + a4 * f64::from(p4[j])
                + a5 * f64::from(p5[j])
                + a6 * f64::from(p6[j])
                + a7 * f64::from(p7[j]);
        }
    }
    for &(a, p) in eights.remainder() {
        for (r, &x) in row.iter_mut().zip(&p[..n]) {
            *r += a * f64::from(x);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One patch at a time, one row at a time: the definition.
    fn reference(h: &mut [f64], patches: &[f32], k: usize) {
        for p in patches.chunks_exact(k) {
            for i in 0..k {
                let a = p[i];
                if a == 0.0 {
                    continue;
                }
                for j in i..k {
                    h[i * k + j] += f64::from(a) * f64::from(p[j]);
                }
            }
        }
    }

    /// Every build of the loop gives every element of `H` bit for bit as the definition, with
    /// zeros (skipped terms) and values of every magnitude, past several blocks of patches and
    /// rows that are not a multiple of the band or of the eight terms at a time.
    #[test]
    fn outer_products_are_the_definition_bit_for_bit() {
        for k in [1, 9, 70, 147] {
            let n = 2 * BLOCK + 7;
            let patches: Vec<f32> = (0..n * k)
                .map(|i| {
                    let v = ((i * 7919 + 13) % 1009) as f32 / 1009.0 - 0.3;
                    // About a third zeros (ReLU outputs), and a wide spread of magnitudes.
                    if v < 0.0 {
                        0.0
                    } else {
                        v * [1e-3f32, 1.0, 37.0][i % 3]
                    }
                })
                .collect();
            let mut expected = vec![0.25f64; k * k];
            reference(&mut expected, &patches, k);
            for isa in Isa::all_available() {
                let mut h = vec![0.25f64; k * k];
                for (b, band) in h.chunks_mut(k * BAND).enumerate() {
                    sum_band(isa, band, b * BAND, &patches, k);
                }
                for (n, (x, y)) in h.iter().zip(&expected).enumerate() {
                    assert_eq!(x.to_bits(), y.to_bits(), "{isa:?} k {k} element {n}");
                }
            }
            let mut h = vec![0.25f64; k * k];
            add_outer(&mut h, &patches, k);
            assert!(h
                .iter()
                .zip(&expected)
                .all(|(x, y)| x.to_bits() == y.to_bits()));
        }
    }
}
