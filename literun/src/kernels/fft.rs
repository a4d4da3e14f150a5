//! Spectra: RFFT2D (the 2-D discrete Fourier transform of real values, the non-negative
//! frequencies of the last axis) and the parts of complex values (COMPLEX_ABS, REAL, IMAG).
//!
//! The transform computes in double precision, as LiteRT's kernel does, and rounds each output
//! once to float; it is an iterative radix-2 FFT over power-of-two lengths.

/// A complex value in double precision: `[real, imaginary]`.
pub type C64 = [f64; 2];

/// `e^(-2πik/n)` for `k < n / 2`: the twiddle factors of a forward transform of length `n` (a
/// power of two), and of every shorter power-of-two length (every `n / m`-th entry).
pub fn twiddles(n: usize, out: &mut [C64]) {
    let step = -2.0 * core::f64::consts::PI / n as f64;
    for (k, t) in out.iter_mut().enumerate().take(n / 2) {
        let a = step * k as f64;
        *t = [libm::cos(a), libm::sin(a)];
    }
}

/// In-place forward DFT of `buf` (its length a power of two, at most twice `twiddles.len()`):
/// `X[k] = Σ x[j] e^(-2πijk/n)`.
pub fn fft_in_place(buf: &mut [C64], twiddles: &[C64]) {
    let n = buf.len();
    if n < 2 || !n.is_power_of_two() || n > 2 * twiddles.len() {
        return;
    }
    // Bit-reversed order.
    let bits = n.trailing_zeros();
    for i in 0..n {
        let j = i.reverse_bits() >> (usize::BITS - bits);
        if i < j {
            buf.swap(i, j);
        }
    }
    let table = 2 * twiddles.len();
    let mut size = 2;
    while size <= n {
        let half = size / 2;
        let stride = table / size;
        for block in buf.chunks_exact_mut(size) {
            let (lo, hi) = block.split_at_mut(half);
            for (k, (a, b)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
                let w = twiddles[k * stride];
                let t = [b[0] * w[0] - b[1] * w[1], b[0] * w[1] + b[1] * w[0]];
                *b = [a[0] - t[0], a[1] - t[1]];
                *a = [a[0] + t[0], a[1] + t[1]];
            }
        }
        size *= 2;
    }
}

/// The shapes of one RFFT2D: each slice of the input is `in_h` x `in_w`, transformed as an
/// `fft_h` x `fft_w` array (cropped, or padded with zeros), giving `fft_h` x `(fft_w / 2 + 1)`
/// complex values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rfft2dShape {
    pub in_h: usize,
    pub in_w: usize,
    pub fft_h: usize,
    pub fft_w: usize,
}

impl Rfft2dShape {
    /// Output columns: the frequencies `0..=fft_w / 2` of the last axis.
    pub fn out_w(&self) -> usize {
        self.fft_w / 2 + 1
    }

    /// Complex values of working memory [`rfft2d`] needs: the slice's half spectrum and one
    /// row or column. `None` on overflow.
    pub fn work_len(&self) -> Option<usize> {
        self.fft_h
            .checked_mul(self.out_w())?
            .checked_add(self.fft_h.max(self.fft_w))
    }
}

/// RFFT2D of `input` (slices of `s.in_h * s.in_w` floats) into `out` (slices of
/// `s.fft_h * s.out_w()` complex values, `[real, imaginary]`): the 2-D DFT of each slice, the
/// rows transformed first, then the columns of the kept frequencies. `twiddles` holds
/// [`twiddles`] for `max(fft_h, fft_w)`; `work` at least [`Rfft2dShape::work_len`] values.
pub fn rfft2d(
    input: &[f32],
    s: Rfft2dShape,
    twiddles: &[C64],
    work: &mut [C64],
    out: &mut [[f32; 2]],
) {
    let out_w = s.out_w();
    let Some(need) = s.work_len().filter(|&n| n <= work.len()) else {
        return;
    };
    if s.in_h * s.in_w == 0 {
        out.fill([0.0; 2]);
        return;
    }
    let (grid, line) = work[..need].split_at_mut(s.fft_h * out_w);
    let rows = s.in_h.min(s.fft_h);
    let cols = s.in_w.min(s.fft_w);
    for (x, o) in input
        .chunks_exact(s.in_h * s.in_w)
        .zip(out.chunks_exact_mut(s.fft_h * out_w))
    {
        let row = &mut line[..s.fft_w];
        for (r, spectrum) in grid.chunks_exact_mut(out_w).enumerate() {
            row.fill([0.0; 2]);
            if r < rows {
                for (v, &xv) in row.iter_mut().zip(&x[r * s.in_w..r * s.in_w + cols]) {
                    v[0] = f64::from(xv);
                }
            }
            fft_in_place(row, twiddles);
            spectrum.copy_from_slice(&row[..out_w]);
        }
        let column = &mut line[..s.fft_h];
        for c in 0..out_w {
            for (v, g) in column.iter_mut().zip(grid.chunks_exact(out_w)) {
                *v = g[c];
            }
            fft_in_place(column, twiddles);
            for (v, orow) in column.iter().zip(o.chunks_exact_mut(out_w)) {
                orow[c] = [v[0] as f32, v[1] as f32];
            }
        }
    }
}

/// COMPLEX_ABS: `|z|` of each value (`hypot(re, im)`, as LiteRT's `std::abs`).
pub fn complex_abs(input: &[[f32; 2]], out: &mut [f32]) {
    for (o, z) in out.iter_mut().zip(input) {
        *o = libm::hypotf(z[0], z[1]);
    }
}

/// REAL (`part` 0) or IMAG (`part` 1): one part of each value.
pub fn complex_part(input: &[[f32; 2]], part: usize, out: &mut [f32]) {
    for (o, z) in out.iter_mut().zip(input) {
        *o = z[part & 1];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::{vec, vec::Vec};

    /// The DFT by its definition, in double precision.
    fn naive_dft2(x: &[f64], h: usize, w: usize) -> Vec<C64> {
        let mut out = vec![[0.0; 2]; h * w];
        for u in 0..h {
            for v in 0..w {
                let mut acc = [0.0f64; 2];
                for r in 0..h {
                    for c in 0..w {
                        let a = -2.0
                            * core::f64::consts::PI
                            * ((u * r) as f64 / h as f64 + (v * c) as f64 / w as f64);
                        acc[0] += x[r * w + c] * libm::cos(a);
                        acc[1] += x[r * w + c] * libm::sin(a);
                    }
                }
                out[u * w + v] = acc;
            }
        }
        out
    }

    fn pseudo_random(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// Against the definition, with the input cropped (rows) and padded (columns), over two
    /// slices, and for lengths 1 (fft_h 1 is what TensorFlow's 1-D RFFT becomes).
    #[test]
    fn rfft2d_matches_the_definition() {
        for &(in_h, in_w, fft_h, fft_w) in &[
            (3, 5, 4, 8),
            (6, 16, 4, 16),
            (1, 64, 1, 64),
            (2, 3, 2, 1),
            (5, 7, 1, 2),
        ] {
            let s = Rfft2dShape {
                in_h,
                in_w,
                fft_h,
                fft_w,
            };
            let slices = 2;
            let x = pseudo_random(slices * in_h * in_w, (in_h * 31 + in_w) as u32);
            let n = fft_h.max(fft_w);
            let mut tw = vec![[0.0; 2]; (n / 2).max(1)];
            twiddles(n, &mut tw);
            let mut work = vec![[0.0; 2]; s.work_len().unwrap()];
            let mut out = vec![[0.0f32; 2]; slices * fft_h * s.out_w()];
            rfft2d(&x, s, &tw, &mut work, &mut out);
            for k in 0..slices {
                let mut padded = vec![0.0f64; fft_h * fft_w];
                for r in 0..in_h.min(fft_h) {
                    for c in 0..in_w.min(fft_w) {
                        padded[r * fft_w + c] = f64::from(x[k * in_h * in_w + r * in_w + c]);
                    }
                }
                let want = naive_dft2(&padded, fft_h, fft_w);
                for u in 0..fft_h {
                    for v in 0..s.out_w() {
                        let got = out[k * fft_h * s.out_w() + u * s.out_w() + v];
                        let w = want[u * fft_w + v];
                        for p in 0..2 {
                            let d = (f64::from(got[p]) - w[p]).abs();
                            assert!(
                                d <= 1e-6 * (1.0 + w[p].abs()),
                                "{s:?} [{k},{u},{v}]: {got:?} vs {w:?}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn parts_of_complex_values() {
        let z = [[3.0f32, -4.0], [0.0, 0.0], [-1.5, 2.0]];
        let mut out = [0.0f32; 3];
        complex_abs(&z, &mut out);
        assert_eq!(out, [5.0, 0.0, 2.5]);
        complex_part(&z, 0, &mut out);
        assert_eq!(out, [3.0, 0.0, -1.5]);
        complex_part(&z, 1, &mut out);
        assert_eq!(out, [-4.0, 0.0, 2.0]);
    }
}
