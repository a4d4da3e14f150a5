//! AVX-512 Winograd F(2x2, 3x3): the weight, input and output transforms.

use super::*;

/// Row `r` of the transformed weights of Winograd F(2x2, 3x3), `U = G g Gᵀ`, from the nine
/// taps (tap `3 * ky + kx` at `taps[tap * len..][..len]`, each in the float GEMM's packed
/// layout): position `(r, c)` goes to `u[c * len..][..len]`, in the same layout (the
/// transform is a per-element linear combination of the taps).
pub(crate) fn wino_weights_f32(taps: &[f32], len: usize, r: usize, u: &mut [f32]) {
    assert!(len.is_multiple_of(16) && r < 4 && taps.len() >= 9 * len && u.len() >= 4 * len);
    // SAFETY: called only for Isa::Avx512Vnni (AVX-512 F available); every access is within
    // the lengths asserted above (element offsets below `len`, in 16-float steps).
    unsafe { wino_weights_avx512(taps.as_ptr(), len, r, u.as_mut_ptr()) }
}

/// # Safety
/// AVX-512 F; `taps` readable for `9 * len` floats, `u` writable for `4 * len`, `len` a
/// multiple of 16, `r < 4`.
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
unsafe fn wino_weights_avx512(taps: *const f32, len: usize, r: usize, u: *mut f32) {
    let half = _mm512_set1_ps(0.5);
    let ends_too = !r.is_multiple_of(3);
    // Row r of G (4 x 3): rows 0 and 3 pick tap row 0 or 2; rows 1 and 2 are
    // (g0 + g1 + g2) / 2 and (g0 - g1 + g2) / 2.
    let mut e = 0;
    while e < len {
        // SAFETY: tap < 9 and e + 16 <= len: within `taps` (the contract).
        let g = |tap: usize| unsafe { _mm512_loadu_ps(taps.add(tap * len + e)) };
        let mut gr = [_mm512_setzero_ps(); 3];
        for (x, gx) in gr.iter_mut().enumerate() {
            *gx = match r {
                0 => g(x),
                3 => g(6 + x),
                1 => _mm512_mul_ps(half, _mm512_add_ps(_mm512_add_ps(g(x), g(3 + x)), g(6 + x))),
                _ => _mm512_mul_ps(half, _mm512_add_ps(_mm512_sub_ps(g(x), g(3 + x)), g(6 + x))),
            };
        }
        // Times Gᵀ: the four positions of the row.
        let [g0, g1, g2] = gr;
        let row = [
            g0,
            _mm512_mul_ps(half, _mm512_add_ps(_mm512_add_ps(g0, g1), g2)),
            _mm512_mul_ps(half, _mm512_add_ps(_mm512_sub_ps(g0, g1), g2)),
            g2,
        ];
        for (c, v) in row.iter().enumerate() {
            // Rows 0 and 3 begin and end with a tap as it is: the GEMM reads it in place.
            if ends_too || c % 3 != 0 {
                // SAFETY: c < 4 and e + 16 <= len: within `u` (the contract).
                unsafe { _mm512_storeu_ps(u.add(c * len + e), *v) };
            }
        }
        e += 16;
    }
}

/// Row `r` of the input transform of Winograd F(2x2, 3x3) for tiles `tiles` (tile `t` is
/// tile row `ty0 + t / tw`, column `t % tw`; its 4x4 input patch starts at row
/// `2 * ty - pad_top`, column `2 * tx - pad_left`, taps outside the input are 0): writes
/// position `(r, c)` of `V = Bᵀ d B`, channel `ch`, of the `l`-th tile of the range at
/// `v[(l * 4 + c) * c_in + ch]` (tile-major: the stores are one sequential stream).
pub(crate) fn wino_input_f32(
    input: &[f32],
    [h, w, c]: [usize; 3],
    [pad_top, pad_left]: [usize; 2],
    [tw, ty0]: [usize; 2],
    tiles: Range<usize>,
    r: usize,
    v: &mut [f32],
) {
    assert!(tw > 0 && c > 0 && r < 4 && input.len() >= h * w * c);
    assert!(v.len() >= tiles.len() * 4 * c);
    // SAFETY: called only for Isa::Avx512Vnni (AVX-512 F available); the sizes are asserted
    // above and the function reads only in-range pixels.
    unsafe {
        wino_input_avx512(
            input,
            [h, w, c],
            [pad_top, pad_left],
            [tw, ty0],
            tiles,
            r,
            v,
        )
    }
}

#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
unsafe fn wino_input_avx512(
    input: &[f32],
    [h, w, c]: [usize; 3],
    [pad_top, pad_left]: [usize; 2],
    [tw, ty0]: [usize; 2],
    tiles: Range<usize>,
    r: usize,
    v: &mut [f32],
) {
    // Row r of Bᵀ: patch row `ia` minus (or plus) patch row `ib`.
    let (ia, ib, plus) = [(0, 2, false), (1, 2, true), (2, 1, false), (1, 3, false)][r];
    let (inp, vp) = (input.as_ptr(), v.as_mut_ptr());
    for (l, t) in tiles.enumerate() {
        let (ty, tx) = (ty0 + t / tw, t % tw);
        let y0 = (2 * ty).wrapping_sub(pad_top);
        let x0 = (2 * tx).wrapping_sub(pad_left);
        // Pixel offset of column j of patch rows ia and ib, or None outside the input.
        let mut at = [[None; 4]; 2];
        for (row, i) in at.iter_mut().zip([ia, ib]) {
            let y = y0.wrapping_add(i);
            for (j, a) in row.iter_mut().enumerate() {
                let x = x0.wrapping_add(j);
                if y < h && x < w {
                    *a = Some((y * w + x) * c);
                }
            }
        }
        let mut cb = 0;
        while cb < c {
            let mask = lanes16(c - cb);
            let mut d = [[_mm512_setzero_ps(); 4]; 2];
            for (drow, arow) in d.iter_mut().zip(&at) {
                for (dv, a) in drow.iter_mut().zip(arow) {
                    if let Some(a) = a {
                        // SAFETY: pixel (y, x) is inside the input; the mask keeps the
                        // lanes to channels cb..c of it.
                        *dv = unsafe { _mm512_maskz_loadu_ps(mask, inp.add(a + cb)) };
                    }
                }
            }
            // t = row r of Bᵀ d.
            let tt: [__m512; 4] = if plus {
                core::array::from_fn(|j| _mm512_add_ps(d[0][j], d[1][j]))
            } else {
                core::array::from_fn(|j| _mm512_sub_ps(d[0][j], d[1][j]))
            };
            // Times B: the four positions of the row.
            let vv = [
                _mm512_sub_ps(tt[0], tt[2]),
                _mm512_add_ps(tt[1], tt[2]),
                _mm512_sub_ps(tt[2], tt[1]),
                _mm512_sub_ps(tt[1], tt[3]),
            ];
            for (j, vv) in vv.iter().enumerate() {
                let o = (l * 4 + j) * c + cb;
                // SAFETY: l < tiles.len() and the lanes are channels below c: within v
                // (asserted by the caller).
                unsafe { _mm512_mask_storeu_ps(vp.add(o), mask, *vv) };
            }
            cb += 16;
        }
    }
}

/// Row `r`'s share of the output transform of Winograd F(2x2, 3x3), `Y = Aᵀ M A`: for the
/// `l`-th tile of `tiles` (numbered as in [`wino_input_f32`]), the products of positions
/// `(r, c)` are `m[c * c_stride + l * n + ch]`; `A[r] M[r] A` is added to (or subtracted from)
/// the tile's output rows that row `r` of `A` reaches. Row `r = 0` starts output row 0 from
/// `bias` and `r = 1` row 1; the last row reaching an output row (2 for row 0, 3 for row 1)
/// clamps it to `act` (Tanh left to the caller). Output pixel `(2 * ty + i, 2 * tx + j)` is
/// touched for rows in `rows` and columns below `ow` only; `out` starts at row `rows.start`
/// (rows of `ow * n`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn wino_output_f32(
    m: &[f32],
    c_stride: usize,
    n: usize,
    bias: &[f32],
    act: Activation,
    [ow, tw, ty0]: [usize; 3],
    rows: Range<usize>,
    tiles: Range<usize>,
    r: usize,
    out: &mut [f32],
) {
    assert!(tw > 0 && n > 0 && r < 4 && 2 * ty0 >= rows.start);
    assert!(bias.len() >= n.div_ceil(16) * 16);
    assert!(m.len() >= 3 * c_stride + tiles.len() * n && c_stride >= tiles.len() * n);
    assert!(out.len() >= rows.len() * ow * n);
    // SAFETY: called only for Isa::Avx512Vnni (AVX-512 F available); sizes asserted above,
    // loads and stores only to pixels of rows `rows` and columns below `ow`.
    unsafe {
        wino_output_avx512(
            m,
            c_stride,
            n,
            bias,
            act,
            [ow, tw, ty0],
            rows,
            tiles,
            r,
            out,
        )
    }
}

/// How row `r` of `A` (4 x 2, `[[1, 0], [1, 1], [1, -1], [0, -1]]`) reaches one output row
/// (`None`: not at all).
#[derive(Clone, Copy)]
enum WinoStep {
    /// First: `bias + s`.
    Start,
    /// `out + s`, or `out - s`; `last`: then clamped.
    Add { minus: bool, last: bool },
}

#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
unsafe fn wino_output_avx512(
    m: &[f32],
    c_stride: usize,
    n: usize,
    bias: &[f32],
    act: Activation,
    [ow, tw, ty0]: [usize; 3],
    rows: Range<usize>,
    tiles: Range<usize>,
    r: usize,
    out: &mut [f32],
) {
    use WinoStep::*;
    let add = |last| Some(Add { minus: false, last });
    let sub = |last| Some(Add { minus: true, last });
    let steps = [
        [Some(Start), None],
        [add(false), Some(Start)],
        [add(true), sub(false)],
        [None, sub(true)],
    ][r];
    let clamp = !matches!(act, Activation::None | Activation::Tanh);
    let (lo, hi) = clamp512(act);
    let (mp, op) = (m.as_ptr(), out.as_mut_ptr());
    for (l, t) in tiles.enumerate() {
        let (oy0, ox0) = (2 * (ty0 + t / tw), 2 * (t % tw));
        let mut ob = 0;
        while ob < n {
            let mask = lanes16(n - ob);
            let mut mm = [_mm512_setzero_ps(); 4];
            for (c, mv) in mm.iter_mut().enumerate() {
                // SAFETY: c < 4, l < tiles.len() and the lanes are channels below n: within m.
                *mv = unsafe { _mm512_maskz_loadu_ps(mask, mp.add(c * c_stride + l * n + ob)) };
            }
            // s = M[r] A (1 x 2).
            let s = [
                _mm512_add_ps(_mm512_add_ps(mm[0], mm[1]), mm[2]),
                _mm512_sub_ps(_mm512_sub_ps(mm[1], mm[2]), mm[3]),
            ];
            for (i, step) in steps.iter().enumerate() {
                let oy = oy0 + i;
                let Some(step) = step.filter(|_| oy < rows.end) else {
                    continue;
                };
                for (j, s) in s.iter().enumerate() {
                    let ox = ox0 + j;
                    if ox >= ow {
                        continue;
                    }
                    // SAFETY: rows.start <= oy < rows.end, ox < ow and the lanes are channels
                    // below n: within out (asserted by the caller); bias has whole 16-channel
                    // panels.
                    unsafe {
                        let at = op.add(((oy - rows.start) * ow + ox) * n + ob);
                        let y = match step {
                            Start => _mm512_add_ps(_mm512_loadu_ps(bias.as_ptr().add(ob)), *s),
                            Add { minus, last } => {
                                let y0 = _mm512_maskz_loadu_ps(mask, at);
                                let y = if minus {
                                    _mm512_sub_ps(y0, *s)
                                } else {
                                    _mm512_add_ps(y0, *s)
                                };
                                if last && clamp {
                                    _mm512_min_ps(_mm512_max_ps(y, lo), hi)
                                } else {
                                    y
                                }
                            }
                        };
                        _mm512_mask_storeu_ps(at, mask, y);
                    }
                }
            }
            ob += 16;
        }
    }
}
