//! Float depthwise: the choice of kernel, and the kernels for any window (AVX2 over runs of
//! output pixels, AVX-512 per pixel).

use super::*;

/// Output rows `oys` of a float depthwise convolution into `out` (rows of `out_w * c`), from
/// one batch `input` (`[in_h, in_w, c]`); activation applied, except Tanh.
pub(crate) fn dw_f32_rows(
    dw: &DwF32,
    input: &[f32],
    dims: [usize; 5],
    geometry: [usize; 6],
    oys: Range<usize>,
    out: &mut [f32],
) {
    assert!(dims[2] * dims[3] == dw.taps);
    if dw.isa != Isa::Avx512Vnni {
        assert!(matches!(dw.isa, Isa::Avx2 | Isa::AvxVnni));
        // SAFETY: a DwF32 for Avx2 or AvxVnni is only packed when the CPU has AVX2 and FMA.
        return unsafe { dw_f32_rows_avx2(dw, input, dims, geometry, oys, out) };
    }
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

/// [`dw_f32_rows`] with AVX2, so the run kernel inlines into the window loop.
#[target_feature(enable = "avx2,fma")]
fn dw_f32_rows_avx2(
    dw: &DwF32,
    input: &[f32],
    dims: [usize; 5],
    geometry: [usize; 6],
    oys: Range<usize>,
    out: &mut [f32],
) {
    let c = dw.c;
    let step = geometry[1] * c;
    for_each_window_run(input, c, dims, geometry, oys, |ptrs, at, n| {
        let out = &mut out[at..at + n * c];
        // SAFETY: this function's features; for_each_window_run gives c readable elements at
        // every non-null pointer (plus k * step for the k-th pixel of a run) and nulls past
        // the taps. 3x3 kernels get their own copy with the tap loop unrolled.
        unsafe {
            match dw.taps {
                9 if n > 1 => dw9_run_avx2(dw, ptrs, n, step, out),
                9 => dw9_pixel_avx2(dw, ptrs, out),
                _ => dw_f32_run_avx2::<0>(dw, ptrs, n, step, out),
            }
        }
    });
}

/// `count` output pixels, pixel `k`'s taps at `ptrs[t] + k * step`: four pixels at a time per
/// 8-channel block (four independent multiply-add chains, one weight load for the four), the
/// rest one at a time over four 8-channel blocks at once (four chains again). Each channel sums
/// its taps in order (padding taps, null, skipped), then adds the bias. Masked loads and stores
/// for the last channels. `TAPS` is `dw.taps` when known at compile time (the loop over taps
/// then unrolls), else 0.
///
/// # Safety
/// The CPU has AVX2 and FMA; for every non-null `ptrs[t]` (`t < dw.taps`) and `k < count`,
/// `ptrs[t] + k * step` points to `dw.c` readable floats; when `count > 1` no `ptrs[t]` (`t <
/// dw.taps`) is null ([`for_each_window_run`]'s runs).
#[target_feature(enable = "avx2,fma")]
unsafe fn dw_f32_run_avx2<const TAPS: usize>(
    dw: &DwF32,
    ptrs: &[*const f32; DW_MAX_TAPS + 1],
    count: usize,
    step: usize,
    out: &mut [f32],
) {
    assert!(TAPS == 0 || TAPS == dw.taps);
    let taps = if TAPS == 0 { dw.taps } else { TAPS };
    let (c, cp) = (dw.c, dw.cp);
    assert!(taps <= DW_MAX_TAPS && out.len() == count * c && dw.w.len() == taps * cp);
    assert!(dw.bias.len() >= c && cp >= c && cp.is_multiple_of(8));
    let (w, o) = (dw.w.as_ptr(), out.as_mut_ptr());
    // Whether the block at channel `ch` is whole, and its mask (lane `l` on when `ch + l < c`).
    let block = |ch: usize| {
        let mask = _mm256_cmpgt_epi32(
            _mm256_set1_epi32(c.saturating_sub(ch).min(8) as i32),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        );
        (ch + 8 <= c, mask)
    };
    let load = |p: *const f32, (full, mask): (bool, __m256i)| {
        // SAFETY: p starts a block's channels of a tap's pixel: 8 readable floats when the
        // block is whole, else the mask keeps the load to channels below c.
        unsafe {
            if full {
                _mm256_loadu_ps(p)
            } else {
                _mm256_maskload_ps(p, mask)
            }
        }
    };
    let store = |v: __m256, k: usize, ch: usize, (full, mask): (bool, __m256i)| {
        // SAFETY: channels ch..ch + 8 of the bias (padded to cp).
        let bias = unsafe { _mm256_loadu_ps(dw.bias.as_ptr().add(ch)) };
        let v = activate(_mm256_add_ps(v, bias), dw.act);
        // SAFETY: pixel k's channels ch.. of out (k < count); the mask keeps the store to
        // channels below c.
        unsafe {
            let p = o.add(k * c + ch);
            if full {
                _mm256_storeu_ps(p, v)
            } else {
                _mm256_maskstore_ps(p, mask, v)
            }
        }
    };
    let quads = count / 4 * 4;
    for ch in (0..c).step_by(8) {
        let blk = block(ch);
        for k in (0..quads).step_by(4) {
            let mut acc = [_mm256_setzero_ps(); 4];
            for (t, &p) in ptrs[..taps].iter().enumerate() {
                // (Runs of several pixels are inside the input: no padding taps.)
                // SAFETY: channels ch..ch + 8 of tap t's weights (padded to cp).
                let wv = unsafe { _mm256_loadu_ps(w.add(t * cp + ch)) };
                for (j, acc) in acc.iter_mut().enumerate() {
                    let x = load(p.wrapping_add((k + j) * step + ch), blk);
                    *acc = _mm256_fmadd_ps(x, wv, *acc);
                }
            }
            for (j, &acc) in acc.iter().enumerate() {
                store(acc, k + j, ch, blk);
            }
        }
    }
    for k in quads..count {
        let mut ch = 0;
        while ch < c {
            let blocks = (c - ch).div_ceil(8).min(4);
            let blk = [block(ch), block(ch + 8), block(ch + 16), block(ch + 24)];
            let mut acc = [_mm256_setzero_ps(); 4];
            for (t, &p) in ptrs[..taps].iter().enumerate() {
                if p.is_null() {
                    continue;
                }
                let p = p.wrapping_add(k * step + ch);
                for b in 0..blocks {
                    // SAFETY: channels ch + 8 b..ch + 8 b + 8 of tap t's weights (padded to
                    // cp: b < blocks keeps them below cp).
                    let wv = unsafe { _mm256_loadu_ps(w.add(t * cp + ch + 8 * b)) };
                    acc[b] = _mm256_fmadd_ps(load(p.wrapping_add(8 * b), blk[b]), wv, acc[b]);
                }
            }
            for b in 0..blocks {
                store(acc[b], k, ch + 8 * b, blk[b]);
            }
            ch += 32;
        }
    }
}

/// One output pixel of a nine-tap (3x3) kernel, its padding taps (null) skipped: the taps
/// inside the input are listed once, then four 8-channel blocks at a time (four independent
/// multiply-add chains: one or two are bound by the multiply-add latency), then two, sum them
/// with no test or mask in the loop (edge pixels: a 3x3 or 6x6 layer's are most of its
/// pixels). Each channel sums its taps in order, then adds the bias, as [`dw_f32_run_avx2`].
///
/// # Safety
/// The CPU has AVX2 and FMA; `dw.taps == 9`; every non-null `ptrs[t]` (`t < 9`) points to
/// `dw.c` readable floats.
#[target_feature(enable = "avx2,fma")]
unsafe fn dw9_pixel_avx2(dw: &DwF32, ptrs: &[*const f32; DW_MAX_TAPS + 1], out: &mut [f32]) {
    let (c, cp) = (dw.c, dw.cp);
    assert!(dw.taps == 9 && out.len() == c && dw.w.len() == 9 * cp);
    assert!(dw.bias.len() >= c && cp >= c && cp.is_multiple_of(8));
    // The taps inside the input: (input pointer, offset of the tap's weights).
    let mut taps = [(core::ptr::null::<f32>(), 0usize); 9];
    let mut n = 0;
    for (t, &p) in ptrs[..9].iter().enumerate() {
        if !p.is_null() {
            taps[n] = (p, t * cp);
            n += 1;
        }
    }
    let taps = &taps[..n];
    let (w, b, o) = (dw.w.as_ptr(), dw.bias.as_ptr(), out.as_mut_ptr());
    let mut ch = 0;
    // SAFETY: channels below c of every listed tap are readable (the contract), the weights
    // and bias are padded to cp (asserted), out holds c floats.
    unsafe {
        // Four 8-channel blocks at a time: four independent multiply-add chains.
        while ch + 32 <= c {
            let mut a = [_mm256_setzero_ps(); 4];
            for &(p, wo) in taps {
                for (j, a) in a.iter_mut().enumerate() {
                    let x = _mm256_loadu_ps(p.add(ch + 8 * j));
                    *a = _mm256_fmadd_ps(x, _mm256_loadu_ps(w.add(wo + ch + 8 * j)), *a);
                }
            }
            for (j, a) in a.iter().enumerate() {
                let v = activate(
                    _mm256_add_ps(*a, _mm256_loadu_ps(b.add(ch + 8 * j))),
                    dw.act,
                );
                _mm256_storeu_ps(o.add(ch + 8 * j), v);
            }
            ch += 32;
        }
        if ch + 16 <= c {
            let (mut a0, mut a1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
            for &(p, wo) in taps {
                let (x0, x1) = (_mm256_loadu_ps(p.add(ch)), _mm256_loadu_ps(p.add(ch + 8)));
                a0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(w.add(wo + ch)), a0);
                a1 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(w.add(wo + ch + 8)), a1);
            }
            let v0 = activate(_mm256_add_ps(a0, _mm256_loadu_ps(b.add(ch))), dw.act);
            let v1 = activate(_mm256_add_ps(a1, _mm256_loadu_ps(b.add(ch + 8))), dw.act);
            _mm256_storeu_ps(o.add(ch), v0);
            _mm256_storeu_ps(o.add(ch + 8), v1);
            ch += 16;
        }
        while ch < c {
            let mask = _mm256_cmpgt_epi32(
                _mm256_set1_epi32((c - ch).min(8) as i32),
                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
            );
            let mut a0 = _mm256_setzero_ps();
            for &(p, wo) in taps {
                let x0 = _mm256_maskload_ps(p.add(ch), mask);
                a0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(w.add(wo + ch)), a0);
            }
            let v0 = activate(_mm256_add_ps(a0, _mm256_loadu_ps(b.add(ch))), dw.act);
            _mm256_maskstore_ps(o.add(ch), mask, v0);
            ch += 8;
        }
    }
}

/// A run of `count > 1` output pixels of a nine-tap (3x3) kernel, pixel `k`'s taps at
/// `ptrs[t] + k * step` (all inside the input): one 8-channel block at a time, its nine
/// weights and bias held in registers while the run's pixels pass two at a time, so each
/// multiply-add reads one input vector and nothing else (the four-pixel kernel reloads the
/// weights per pixel group and keeps 36 tap addresses, more than the registers hold). Each
/// channel sums its taps in order, then adds the bias, as [`dw_f32_run_avx2`].
///
/// # Safety
/// The CPU has AVX2 and FMA; `dw.taps == 9`; for every `t < 9` and `k < count`, `ptrs[t] + k
/// * step` points to `dw.c` readable floats.
#[target_feature(enable = "avx2,fma")]
unsafe fn dw9_run_avx2(
    dw: &DwF32,
    ptrs: &[*const f32; DW_MAX_TAPS + 1],
    count: usize,
    step: usize,
    out: &mut [f32],
) {
    let (c, cp) = (dw.c, dw.cp);
    assert!(dw.taps == 9 && out.len() == count * c && dw.w.len() == 9 * cp);
    assert!(dw.bias.len() >= c && cp >= c && cp.is_multiple_of(8));
    for ch in (0..c).step_by(8) {
        let taps: [*const f32; 9] = core::array::from_fn(|t| ptrs[t].wrapping_add(ch));
        let o = out[ch..].as_mut_ptr();
        // SAFETY: the contract, for channels ch..min(ch + 8, c) of every tap and pixel; the
        // weights and bias are padded to cp, out has count * c floats (asserted).
        unsafe {
            let w = dw.w.as_ptr().add(ch);
            let bias = dw.bias.as_ptr().add(ch);
            if ch + 8 <= c {
                dw9_block_avx2::<true>(&taps, w, cp, bias, dw.act, 8, count, step, o, c);
            } else {
                dw9_block_avx2::<false>(&taps, w, cp, bias, dw.act, c - ch, count, step, o, c);
            }
        }
    }
}

/// One 8-channel block (`lanes` channels, all 8 when `FULL`) of [`dw9_run_avx2`].
///
/// # Safety
/// AVX2 and FMA; `taps[t] + k * step` readable for `lanes` floats (`t < 9`, `k < count`);
/// `w + t * cp` and `bias` readable for 8 floats; `out + k * c` writable for `lanes` floats.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn dw9_block_avx2<const FULL: bool>(
    taps: &[*const f32; 9],
    w: *const f32,
    cp: usize,
    bias: *const f32,
    act: Activation,
    lanes: usize,
    count: usize,
    step: usize,
    out: *mut f32,
    c: usize,
) {
    let mask = _mm256_cmpgt_epi32(
        _mm256_set1_epi32(lanes as i32),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    );
    let mut wv = [_mm256_setzero_ps(); 9];
    for (t, wv) in wv.iter_mut().enumerate() {
        // SAFETY: tap t's weights (the contract).
        *wv = unsafe { _mm256_loadu_ps(w.add(t * cp)) };
    }
    // SAFETY: the bias (the contract).
    let bv = unsafe { _mm256_loadu_ps(bias) };
    let mut k = 0;
    while k < count {
        // SAFETY: pixels k and (when two) k + 1 are below count: the contract's taps and
        // outputs, `mask` keeping a partial block's loads and stores to its `lanes` channels.
        unsafe {
            if k + 2 <= count {
                let (o0, o1) = (k * step, (k + 1) * step);
                let mut a0 = _mm256_mul_ps(dw9_load::<FULL>(taps[0].add(o0), mask), wv[0]);
                let mut a1 = _mm256_mul_ps(dw9_load::<FULL>(taps[0].add(o1), mask), wv[0]);
                for t in 1..9 {
                    a0 = _mm256_fmadd_ps(dw9_load::<FULL>(taps[t].add(o0), mask), wv[t], a0);
                    a1 = _mm256_fmadd_ps(dw9_load::<FULL>(taps[t].add(o1), mask), wv[t], a1);
                }
                let v0 = activate(_mm256_add_ps(a0, bv), act);
                let v1 = activate(_mm256_add_ps(a1, bv), act);
                dw9_store::<FULL>(out.add(k * c), mask, v0);
                dw9_store::<FULL>(out.add((k + 1) * c), mask, v1);
                k += 2;
            } else {
                let o0 = k * step;
                let mut a0 = _mm256_mul_ps(dw9_load::<FULL>(taps[0].add(o0), mask), wv[0]);
                for t in 1..9 {
                    a0 = _mm256_fmadd_ps(dw9_load::<FULL>(taps[t].add(o0), mask), wv[t], a0);
                }
                let v0 = activate(_mm256_add_ps(a0, bv), act);
                dw9_store::<FULL>(out.add(k * c), mask, v0);
                k += 1;
            }
        }
    }
}

/// 8 floats at `p`, or the lanes of `mask` (others zero) unless `FULL`.
///
/// # Safety
/// AVX2; `p` readable for 8 floats (`FULL`) or for the lanes of `mask`.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn dw9_load<const FULL: bool>(p: *const f32, mask: __m256i) -> __m256 {
    // SAFETY: the contract.
    unsafe {
        if FULL {
            _mm256_loadu_ps(p)
        } else {
            _mm256_maskload_ps(p, mask)
        }
    }
}

/// Stores `v` to 8 floats at `p`, or to the lanes of `mask` unless `FULL`.
///
/// # Safety
/// AVX2; `p` writable for 8 floats (`FULL`) or for the lanes of `mask`.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn dw9_store<const FULL: bool>(p: *mut f32, mask: __m256i, v: __m256) {
    // SAFETY: the contract.
    unsafe {
        if FULL {
            _mm256_storeu_ps(p, v)
        } else {
            _mm256_maskstore_ps(p, mask, v)
        }
    }
}
