//! Float depthwise: the choice of kernel, and the per-pixel kernels for any window (AVX2 and
//! AVX-512).

use super::*;

/// One output pixel of a float depthwise convolution (activation applied, except Tanh).
pub(crate) fn dw_f32_pixel(isa: Isa, dw: &DwF32, input: &[f32], taps: &[usize], out: &mut [f32]) {
    debug_assert!(isa != Isa::Portable);
    debug_assert!(isa != Isa::Avx512Vnni);
    // SAFETY: DwF32 exists only when AVX2+FMA are available (module invariant).
    unsafe { dw_f32_pixel_avx2(dw, input, taps, out) }
}

/// Output rows `oys` of a float depthwise convolution with AVX-512 into `out` (rows of
/// `out_w * c`), from one batch `input` (`[in_h, in_w, c]`); activation applied, except Tanh.
pub(crate) fn dw_f32_rows(
    dw: &DwF32,
    input: &[f32],
    dims: [usize; 5],
    geometry: [usize; 6],
    oys: Range<usize>,
    out: &mut [f32],
) {
    assert!(dw.isa == Isa::Avx512Vnni && dims[2] * dims[3] == dw.taps);
    if dims[2] == 3 && dims[3] == 3 && geometry[2] == 1 && geometry[3] == 1 {
        if geometry[0] == 1 && geometry[1] == 1 {
            // SAFETY: as below.
            return unsafe { dw3x3_f32_cols(dw, input, dims, geometry, oys, out) };
        }
        // SAFETY: as below.
        return unsafe { dw3x3_f32_rows_avx512(dw, input, dims, geometry, oys, out) };
    }
    // SAFETY: Avx512Vnni is only chosen when the CPU has AVX-512 F/VL (`available`).
    unsafe { dw_f32_rows_avx512(dw, input, dims, geometry, oys, out) }
}

/// Four horizontally adjacent 3x3 windows (stride `S`) of one 16-channel block: the sums of
/// their valid rows' taps (`at` is the first window's first pixel offset within a row plus
/// the block's first channel). When `EDGE`, only the first `cols` columns are read, the
/// others (right of the input) count as zero.
///
/// # Safety
/// AVX-512 F/VL; for every `Some(r)` in `rows`, `inp` readable at `r + at + col * c` for the
/// lanes of `mask`, `col < 3 * S + 3` (and `col < cols` when `EDGE`).
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
pub(super) unsafe fn dw3x3_quad<const S: usize, const EDGE: bool>(
    inp: *const f32,
    rows: &[Option<usize>; 3],
    at: usize,
    c: usize,
    cols: usize,
    mask: __mmask16,
    w: &[__m512; 9],
) -> [__m512; 4] {
    let mut acc = [_mm512_setzero_ps(); 4];
    for (ky, r) in rows.iter().enumerate() {
        let Some(r) = *r else { continue };
        let mut a = [_mm512_setzero_ps(); 9];
        for (col, a) in a.iter_mut().enumerate().take(3 * S + 3) {
            if !EDGE || col < cols {
                // SAFETY: col < 3 * S + 3 (and < cols when EDGE): the contract.
                *a = unsafe { _mm512_maskz_loadu_ps(mask, inp.add(r + at + col * c)) };
            }
        }
        for (j, acc) in acc.iter_mut().enumerate() {
            for kx in 0..3 {
                *acc = _mm512_fmadd_ps(a[j * S + kx], w[ky * 3 + kx], *acc);
            }
        }
    }
    acc
}

/// Up to four 16-channel blocks at a time, so four independent multiply-add chains run per
/// tap (one chain per block is bound by the multiply-add latency); masked loads and stores
/// for the last channels.
///
/// # Safety
/// AVX-512 F/VL; every non-null `ptrs[t]` (`t < dw.taps`) points to `dw.c` readable floats.
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
pub(super) unsafe fn dw_f32_pixel_avx512(
    dw: &DwF32,
    ptrs: &[*const f32; DW_MAX_TAPS + 1],
    out: &mut [f32],
) {
    let (c, cp) = (dw.c, dw.cp);
    assert!(dw.taps <= DW_MAX_TAPS && out.len() == c && dw.w.len() == dw.taps * cp);
    assert!(dw.bias.len() >= c && cp >= c);
    let mask = |from: usize| -> __mmask16 {
        match c.saturating_sub(from) {
            n if n >= 16 => 0xFFFF,
            n => ((1u32 << n) - 1) as __mmask16,
        }
    };
    let mut ch = 0;
    while ch < c {
        let blocks = (c - ch).div_ceil(16).min(4);
        let masks = [mask(ch), mask(ch + 16), mask(ch + 32), mask(ch + 48)];
        let mut acc = [_mm512_setzero_ps(); 4];
        for (t, &px) in ptrs[..dw.taps].iter().enumerate() {
            if px.is_null() {
                continue;
            }
            let w = &dw.w[t * cp + ch..t * cp + c];
            for b in 0..blocks {
                // SAFETY: lanes of masks[b] are channels below c: within px's c floats (the
                // caller's contract) and w.
                unsafe {
                    let xv = _mm512_maskz_loadu_ps(masks[b], px.add(ch + 16 * b));
                    let wv = _mm512_maskz_loadu_ps(masks[b], w.as_ptr().add(16 * b));
                    acc[b] = _mm512_fmadd_ps(xv, wv, acc[b]);
                }
            }
        }
        for b in 0..blocks {
            let at = ch + 16 * b;
            // SAFETY: lanes of masks[b] are channels below c: within bias and out.
            unsafe {
                let bias = _mm512_maskz_loadu_ps(masks[b], dw.bias.as_ptr().add(at));
                let v = activate512(_mm512_add_ps(acc[b], bias), dw.act);
                _mm512_mask_storeu_ps(out.as_mut_ptr().add(at), masks[b], v);
            }
        }
        ch += 64;
    }
}

/// Up to four 8-channel blocks at a time, so four independent multiply-add chains run per
/// tap (one chain per block is bound by the multiply-add latency); masked loads and stores
/// for the last channels. Each channel sums its taps in order, then adds the bias.
#[target_feature(enable = "avx2,fma")]
fn dw_f32_pixel_avx2(dw: &DwF32, input: &[f32], taps: &[usize], out: &mut [f32]) {
    let (c, cp) = (dw.c, dw.cp);
    assert!(taps.len() == dw.taps && out.len() == c && dw.w.len() == dw.taps * cp);
    assert!(dw.bias.len() >= c && cp >= c);
    // Every tap's pixel (`usize::MAX`: padding) checked once: `c` floats from its start.
    for &px in taps {
        assert!(px == usize::MAX || (px + 1) * c <= input.len());
    }
    // Lane `l` of the mask of the block at channel `from` is on when `from + l < c`.
    let mask = |from: usize| -> __m256i {
        let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let left = c.saturating_sub(from).min(8) as i32;
        _mm256_cmpgt_epi32(_mm256_set1_epi32(left), lanes)
    };
    let (x, w, bias, o) = (
        input.as_ptr(),
        dw.w.as_ptr(),
        dw.bias.as_ptr(),
        out.as_mut_ptr(),
    );
    let mut ch = 0;
    while ch < c {
        let blocks = (c - ch).div_ceil(8).min(4);
        let masks = [mask(ch), mask(ch + 8), mask(ch + 16), mask(ch + 24)];
        let mut acc = [_mm256_setzero_ps(); 4];
        for (t, &px) in taps.iter().enumerate() {
            if px == usize::MAX {
                continue;
            }
            for b in 0..blocks {
                let at = ch + 8 * b;
                // SAFETY: the mask's lanes are channels below c: within the pixel's c floats
                // (asserted above) and tap t's row of cp >= c weights.
                unsafe {
                    let xv = _mm256_maskload_ps(x.add(px * c + at), masks[b]);
                    let wv = _mm256_maskload_ps(w.add(t * cp + at), masks[b]);
                    acc[b] = _mm256_fmadd_ps(xv, wv, acc[b]);
                }
            }
        }
        for b in 0..blocks {
            let at = ch + 8 * b;
            // SAFETY: the mask's lanes are channels below c: within bias and out.
            unsafe {
                let bv = _mm256_maskload_ps(bias.add(at), masks[b]);
                let v = activate(_mm256_add_ps(acc[b], bv), dw.act);
                _mm256_maskstore_ps(o.add(at), masks[b], v);
            }
        }
        ch += 32;
    }
}
