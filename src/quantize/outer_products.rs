//! Weight rounding's largest loop: `H += Σ p pᵀ` over a layer's input patches (one call per
//! sample), as one register-tiled product `Xᵀ X` of the call's patches `X` (upper triangle).
//! Each element of a call's product is a chain of f32 fused multiply-adds over the patches, in
//! their order, from zero (as GPTQ's own float32 `H`), then added to `H` in f64: a call takes at
//! most a few thousand patches, so the f32 chain loses nothing that `H`'s damping does not
//! swamp, and the vectors run twice as many lanes as f64 with one instruction per term. The tiles
//! only choose which elements are computed side by side, so `H` is the same bit for bit with
//! any tile shape, vector width ([`super::wide`]) and number of threads.

use super::wide::{per_isa, Isa};
use rayon::prelude::*;

/// Rows of `H` a task sums: its part of the call's product stays in cache while the patches
/// stream by.
const BAND: usize = 32;

/// Patches taken together: their values stay in cache while every tile of a band reads them.
const BLOCK: usize = 128;

/// Rows of a tile (each row's value of a patch broadcast once for the tile's columns).
const TILE_ROWS: usize = 4;

/// Adds `p pᵀ` for each `k`-value patch `p` of `patches` to the `k × k` block `h` (upper
/// triangle; mirrored later). Bands of rows are summed in parallel where `k` is large enough.
pub(super) fn add_outer(h: &mut [f64], patches: &[f32], k: usize) {
    if k == 0 || patches.len() < k {
        return;
    }
    let isa = Isa::detect();
    let cols = tile_cols(isa);
    // Patches padded with zeros to whole tiles of columns (and rows).
    let kp = k.div_ceil(cols.max(TILE_ROWS)) * cols.max(TILE_ROWS);
    let n = patches.len() / k;
    let mut x = vec![0f32; n * kp];
    for (dst, src) in x.chunks_exact_mut(kp).zip(patches.chunks_exact(k)) {
        dst[..k].copy_from_slice(src);
    }
    let x = &x;
    let sum = |(b, band): (usize, &mut [f64])| {
        let first = b * BAND;
        let rows = band.len() / k;
        // The band's rows of the call's product, from column `first` on (f32, tiles padded).
        let mut part = vec![0f32; BAND * kp];
        for block in x.chunks(BLOCK * kp) {
            sum_band(isa, &mut part, first, rows, block, kp);
        }
        for (r, row) in band.chunks_exact_mut(k).enumerate() {
            let i = first + r;
            for (h, &s) in row[i..].iter_mut().zip(&part[r * kp + i..r * kp + k]) {
                *h += f64::from(s);
            }
        }
    };
    // A depthwise channel's 9 taps are not worth a task each.
    if k < 64 {
        h.chunks_mut(k * BAND).enumerate().for_each(sum);
    } else {
        h.par_chunks_mut(k * BAND).enumerate().for_each(sum);
    }
}

/// Columns of a tile: two vectors of the widest width, as many accumulators as keep both FMA
/// units busy without spilling.
fn tile_cols(isa: Isa) -> usize {
    #[cfg(target_arch = "x86_64")]
    if isa.width() == super::wide::Width::Avx512 {
        return 32;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = isa;
    16
}

/// Tiles of the band of rows `first..first + rows` of the call's product `part` (row stride
/// `kp`, columns from the band's first tile of columns on): each takes the patches of `block`
/// (rows of `kp` values) in order, continuing the chains already in `part`.
fn sum_band(isa: Isa, part: &mut [f32], first: usize, rows: usize, block: &[f32], kp: usize) {
    match tile_cols(isa) {
        32 => sum_band_32(isa, part, first, rows, block, kp),
        _ => sum_band_16(isa, part, first, rows, block, kp),
    }
}

macro_rules! sum_band_with {
    ($name:ident, $cols:expr) => {
        per_isa! {
            /// [`sum_band`] with tiles of `TILE_ROWS × cols`.
            fn $name(part: &mut [f32], first: usize, rows: usize, block: &[f32], kp: usize) {
                const C: usize = $cols;
                for r0 in (0..rows).step_by(TILE_ROWS) {
                    let i0 = first + r0;
                    for j0 in (i0 / C * C..kp).step_by(C) {
                        let mut acc = [[0f32; C]; TILE_ROWS];
                        for (r, acc) in acc.iter_mut().enumerate() {
                            acc.copy_from_slice(&part[(r0 + r) * kp + j0..(r0 + r) * kp + j0 + C]);
                        }
                        for p in block.chunks_exact(kp) {
                            let b: &[f32; C] = p[j0..j0 + C].try_into().expect("a tile");
                            for (r, acc) in acc.iter_mut().enumerate() {
                                let a = p[i0 + r];
                                for (s, &y) in acc.iter_mut().zip(b) {
                                    *s = a.mul_add(y, *s);
                                }
                            }
                        }
                        for (r, acc) in acc.iter().enumerate() {
                            part[(r0 + r) * kp + j0..(r0 + r) * kp + j0 + C].copy_from_slice(acc);
                        }
                    }
                }
            }
        }
    };
}

sum_band_with!(sum_band_16, 16);
sum_band_with!(sum_band_32, 32);

#[cfg(test)]
mod tests {
    use super::*;

    /// One patch at a time: each element's f32 chain of fused multiply-adds over the patches,
    /// then added to `h` in f64.
    fn reference(h: &mut [f64], patches: &[f32], k: usize) {
        for i in 0..k {
            for j in i..k {
                let mut s = 0f32;
                for p in patches.chunks_exact(k) {
                    s = p[i].mul_add(p[j], s);
                }
                h[i * k + j] += f64::from(s);
            }
        }
    }

    /// Every build of the loop gives every element of `H` bit for bit as the definition, with
    /// zeros and values of every magnitude, past several blocks of patches, bands and tiles, with
    /// sizes that are not a multiple of any of them.
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
                for cols in [16, 32] {
                    let kp = k.div_ceil(cols) * cols;
                    let mut x = vec![0f32; n * kp];
                    for (d, s) in x.chunks_exact_mut(kp).zip(patches.chunks_exact(k)) {
                        d[..k].copy_from_slice(s);
                    }
                    let mut got = vec![0.25f64; k * k];
                    for first in (0..k).step_by(BAND) {
                        let rows = BAND.min(k - first);
                        let mut part = vec![0f32; BAND * kp];
                        for block in x.chunks(BLOCK * kp) {
                            if cols == 16 {
                                sum_band_16(isa, &mut part, first, rows, block, kp);
                            } else {
                                sum_band_32(isa, &mut part, first, rows, block, kp);
                            }
                        }
                        for r in 0..rows {
                            let i = first + r;
                            for j in i..k {
                                got[i * k + j] += f64::from(part[r * kp + j]);
                            }
                        }
                    }
                    for (e, (x, y)) in got.iter().zip(&expected).enumerate() {
                        assert_eq!(x.to_bits(), y.to_bits(), "{isa:?} {cols} k {k} element {e}");
                    }
                }
            }
            let mut h = vec![0.25f64; k * k];
            add_outer(&mut h, &patches, k);
            for (e, (x, y)) in h.iter().zip(&expected).enumerate() {
                assert_eq!(x.to_bits(), y.to_bits(), "k {k} element {e}");
            }
            // The lower triangle is left as it was.
            assert!((0..k).all(|i| (0..i).all(|j| h[i * k + j] == 0.25)));
        }
    }
}
