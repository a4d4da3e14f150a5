//! Int8 depthwise: the choice of kernel, and the kernels for any window over runs of output
//! pixels (AVX2 and AVX-512).

use super::*;

/// Output rows `oys` of an int8 depthwise convolution into `out` (rows of `out_w * c`), from
/// one batch `input` (`[in_h, in_w, c]`).
pub(crate) fn dw_i8_rows(
    dw: &DwI8,
    input: &[i8],
    dims: [usize; 5],
    geometry: [usize; 6],
    oys: Range<usize>,
    out: &mut [i8],
    scratch: &mut [i32],
) {
    assert!(dims[2] * dims[3] == dw.taps);
    assert!(
        scratch.len() >= dw.scratch_i32(),
        "depthwise scratch too short"
    );
    if dw.isa != Isa::Avx512Vnni {
        assert!(matches!(dw.isa, Isa::Avx2 | Isa::AvxVnni));
        // The unsigned-product form's constants once per call, where it applies.
        let cache = match fused_cache_in(scratch, fused_cache_scratch(dw.isa, &dw.rq)) {
            Some(cache) => {
                unsigned_cache(&dw.rq, cache, 0..dw.rq.bias.len());
                &*cache
            }
            None => &[],
        };
        // SAFETY: a DwI8 for Avx2 or AvxVnni is only packed when the CPU has AVX2 and FMA.
        return unsafe { dw_i8_rows_avx2(dw, input, dims, geometry, oys, out, cache) };
    }
    let [in_h, in_w, k_h, k_w, out_w] = dims;
    let [stride_h, stride_w, dil_h, dil_w, pad_top, pad_left] = geometry;
    if let Some(dw3) = &dw.dw3 {
        if [k_h, k_w, dil_h, dil_w] == [3, 3, 1, 1] {
            // Its output stage's fused constants (the first words of `scratch`), then the ring.
            let (head, ring) = scratch.split_at_mut(fused_cache_scratch(dw.isa, &dw3.rq));
            let cache = match fused_cache_in(head, head.len()) {
                Some(cache) => {
                    fused_cache(&dw3.rq, cache, 0..dw3.rq.shift.len());
                    &*cache
                }
                None => &[],
            };
            let ring = bytemuck::cast_slice_mut::<i32, i8>(ring);
            // (At most 60 for a 4-byte-aligned pointer: the 15 spare words.)
            let skip = ring.as_ptr().align_offset(64).min(60);
            let call = Dw3Call {
                dw3,
                c: dw.c,
                zero_point: dw.input_offset.wrapping_neg() as i8,
                input,
                in_hw: [in_h, in_w],
                out_w,
                stride: [stride_h, stride_w],
                pad: [pad_top, pad_left],
                oys,
                cache,
            };
            // SAFETY: Avx512Vnni is only chosen when the CPU has AVX-512 F/BW/VL/VNNI.
            return unsafe {
                dw3x3_i8_rows_avx512(&call, out, &mut ring[skip..skip + DW3_RING_BYTES])
            };
        }
    }
    // The fused form's constants once per call (`DwI8::scratch_i32` words of `scratch`).
    let cache = match fused_cache_in(scratch, fused_cache_scratch(dw.isa, &dw.rq)) {
        Some(cache) => {
            fused_cache(&dw.rq, cache, 0..dw.rq.shift.len());
            &*cache
        }
        None => &[],
    };
    // SAFETY: Avx512Vnni is only chosen when the CPU has AVX-512 F/BW/VL/VNNI (`available`).
    unsafe { dw_i8_rows_avx512(dw, input, dims, geometry, oys, out, cache) }
}

/// [`dw_i8_rows`] compiled for AVX-512, so the pixel kernel inlines into the window loop.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
fn dw_i8_rows_avx512(
    dw: &DwI8,
    input: &[i8],
    dims: [usize; 5],
    geometry: [usize; 6],
    oys: Range<usize>,
    out: &mut [i8],
    cache: &[i32],
) {
    let c = dw.c;
    let step = geometry[1] * c;
    // 3x3 kernels get their own copy of the tap loop, unrolled, so the accumulators stay in
    // registers (with a run-time tap count they went through the stack).
    if dw.pairs {
        return for_each_window_run(input, c, dims, geometry, oys, |ptrs, at, n| {
            let out = &mut out[at..at + n * c];
            // SAFETY: as below.
            unsafe {
                match dw.taps {
                    9 => dw_i8_pairs_avx512::<9>(dw, cache, ptrs, n, step, out),
                    _ => dw_i8_pairs_avx512::<0>(dw, cache, ptrs, n, step, out),
                }
            }
        });
    }
    if !dw.w8.is_empty() {
        return for_each_window_run(input, c, dims, geometry, oys, |ptrs, at, n| {
            let out = &mut out[at..at + n * c];
            // SAFETY: as below.
            unsafe {
                match dw.taps {
                    9 => dw_i8_pixel_quads_avx512::<9>(dw, cache, ptrs, n, step, out),
                    _ => dw_i8_pixel_quads_avx512::<0>(dw, cache, ptrs, n, step, out),
                }
            }
        });
    }
    for_each_window_run(input, c, dims, geometry, oys, |ptrs, at, n| {
        // SAFETY: this function's features; for_each_window_run gives c readable elements at
        // every non-null pointer (plus k * step for the k-th pixel of a run) and nulls past
        // the taps.
        unsafe { dw_i8_pixel_avx512(dw, cache, ptrs, n, step, &mut out[at..at + n * c]) };
    });
}

/// One 64-channel block (`ch` a multiple of 64) of the `vpdpbusd` layout of
/// `DwI8::pack_avx512_quads`, `load(t)` giving tap `t`'s 64 input bytes offset to unsigned:
/// four taps' bytes are interleaved by two rounds of unpacks into four vectors of 16 channels x
/// 4 taps and accumulated from the bias (a group with a single tap is spread by `vpshufb`
/// instead). The accumulators are in the layout's channel order, which two rounds of
/// saturating packs turn back into channel order: the result is the block's 64 output bytes.
/// `TAPS` is `dw.taps` when known at compile time (the loop over taps then unrolls), else 0.
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
fn dw_quads_block<const TAPS: usize>(
    dw: &DwI8,
    cache: &[i32],
    ch: usize,
    load: impl Fn(usize) -> __m512i,
) -> __m512i {
    assert!(TAPS == 0 || TAPS == dw.taps);
    let taps = if TAPS == 0 { dw.taps } else { TAPS };
    let quads = taps.div_ceil(4);
    assert!(ch.is_multiple_of(64) && dw.w8.len() >= (ch / 64 + 1) * quads * 256);
    assert!(dw.rq.bias.len() >= ch + 64);
    // A single tap's byte of channel 16 l + 4 j + i to byte 0 of lane (l, i) for accumulator
    // j (the other bytes zero).
    let spread = |j: usize| {
        let b = |i: usize| (0x8080_8000_u32 | (4 * j + i) as u32) as i32;
        _mm512_broadcast_i32x4(_mm_setr_epi32(b(0), b(1), b(2), b(3)))
    };
    // SAFETY: block ch / 64 has quads * 256 weights (asserted above).
    let w = unsafe { dw.w8.as_ptr().add(ch / 64 * quads * 256) };
    let bias = |j: usize| {
        // SAFETY: positions ch + 16 j..ch + 16 j + 16 of the bias (asserted above).
        unsafe { _mm512_loadu_si512(dw.rq.bias.as_ptr().add(ch + 16 * j) as *const __m512i) }
    };
    let mut acc = [bias(0), bias(1), bias(2), bias(3)];
    for qd in 0..quads {
        // SAFETY: group qd's four 64-byte vectors are in the block (qd < quads).
        let wv =
            |j: usize| unsafe { _mm512_loadu_si512(w.add((qd * 4 + j) * 64) as *const __m512i) };
        if taps - 4 * qd == 1 {
            let x = load(4 * qd);
            for (j, a) in acc.iter_mut().enumerate() {
                *a = _mm512_dpbusd_epi32(*a, _mm512_shuffle_epi8(x, spread(j)), wv(j));
            }
            continue;
        }
        // Taps past the last are zero (so are their weights).
        let ld = |t: usize| {
            if t < taps {
                load(t)
            } else {
                _mm512_setzero_si512()
            }
        };
        let (x0, x1, x2, x3) = (ld(4 * qd), ld(4 * qd + 1), ld(4 * qd + 2), ld(4 * qd + 3));
        let (lo01, hi01) = (_mm512_unpacklo_epi8(x0, x1), _mm512_unpackhi_epi8(x0, x1));
        let (lo23, hi23) = (_mm512_unpacklo_epi8(x2, x3), _mm512_unpackhi_epi8(x2, x3));
        acc[0] = _mm512_dpbusd_epi32(acc[0], _mm512_unpacklo_epi16(lo01, lo23), wv(0));
        acc[1] = _mm512_dpbusd_epi32(acc[1], _mm512_unpackhi_epi16(lo01, lo23), wv(1));
        acc[2] = _mm512_dpbusd_epi32(acc[2], _mm512_unpacklo_epi16(hi01, hi23), wv(2));
        acc[3] = _mm512_dpbusd_epi32(acc[3], _mm512_unpackhi_epi16(hi01, hi23), wv(3));
    }
    // A loop rather than a closure: the closure was not inlined, which sent every
    // accumulator through the stack.
    let mut r = [_mm512_setzero_si512(); 4];
    for (j, r) in r.iter_mut().enumerate() {
        *r = Rq16::load_cached(&dw.rq, cache, ch + 16 * j).apply_i32(acc[j]);
    }
    let p01 = _mm512_packs_epi32(r[0], r[1]);
    let p23 = _mm512_packs_epi32(r[2], r[3]);
    _mm512_packs_epi16(p01, p23)
}

/// `count` output pixels of the `DwI8::pack_avx512_quads` layout ([`dw_quads_block`] per 64
/// channels), pixel `k`'s taps at `ptrs[t] + k * step`. The last block's missing channels are
/// masked off in the loads and the store.
///
/// # Safety
/// The CPU has AVX-512 F/BW/VL/VNNI; for every non-null `ptrs[t]` (`t < dw.taps`) and `k <
/// count`, `ptrs[t] + k * step` points to `dw.c` readable bytes.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn dw_i8_pixel_quads_avx512<const TAPS: usize>(
    dw: &DwI8,
    cache: &[i32],
    ptrs: &[*const i8; DW_MAX_TAPS + 1],
    count: usize,
    step: usize,
    out: &mut [i8],
) {
    let c = dw.c;
    assert!(out.len() == count * c && c > 0 && dw.taps <= DW_MAX_TAPS);
    let flip = _mm512_set1_epi8(-128);
    let padv = _mm512_set1_epi8(((dw.input_offset.wrapping_neg() as u8) ^ 0x80) as i8);
    for k in 0..count {
        let out = &mut out[k * c..(k + 1) * c];
        let mut ch = 0;
        while ch < c {
            let n = (c - ch).min(64);
            let mask: __mmask64 = if n == 64 { !0 } else { (1u64 << n) - 1 };
            let v = dw_quads_block::<TAPS>(dw, cache, ch, |t| {
                let p = ptrs[t];
                if p.is_null() {
                    return padv;
                }
                // SAFETY: p + k * step starts c readable bytes (the caller's contract); the
                // mask keeps the load to channels ch..ch + n, and masked-off bytes are not
                // accessed.
                let x = unsafe { _mm512_maskz_loadu_epi8(mask, p.add(k * step + ch)) };
                _mm512_xor_si512(x, flip)
            });
            // SAFETY: the mask keeps the store to out[ch..ch + n].
            unsafe { _mm512_mask_storeu_epi8(out.as_mut_ptr().add(ch), mask, v) };
            ch += 64;
        }
    }
}

/// `count` output pixels of a `DwI8::pack_avx512_pairs` layout (`c <= 32`), two per block:
/// pixel `k` in channels `0..32`, pixel `k + 1` in `32..64` (pixel `k`'s taps at `ptrs[t] + k
/// * step`).
///
/// # Safety
/// As [`dw_i8_pixel_quads_avx512`].
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn dw_i8_pairs_avx512<const TAPS: usize>(
    dw: &DwI8,
    cache: &[i32],
    ptrs: &[*const i8; DW_MAX_TAPS + 1],
    count: usize,
    step: usize,
    out: &mut [i8],
) {
    let c = dw.c;
    assert!(dw.pairs && c > 0 && c <= 32 && out.len() == count * c && dw.taps <= DW_MAX_TAPS);
    let mask: __mmask32 = if c == 32 { !0 } else { (1u32 << c) - 1 };
    let flip = _mm256_set1_epi8(-128);
    let padv = _mm256_set1_epi8(((dw.input_offset.wrapping_neg() as u8) ^ 0x80) as i8);
    let mut k = 0;
    while k < count {
        let two = k + 1 < count;
        let half = |p: *const i8, k: usize| {
            if p.is_null() {
                return padv;
            }
            // SAFETY: p + k * step starts c readable bytes (the caller's contract); the mask
            // keeps the load to them.
            _mm256_xor_si256(
                unsafe { _mm256_maskz_loadu_epi8(mask, p.add(k * step)) },
                flip,
            )
        };
        let v = dw_quads_block::<TAPS>(dw, cache, 0, |t| {
            let lo = half(ptrs[t], k);
            // Without a second pixel the high half is not stored.
            let hi = if two { half(ptrs[t], k + 1) } else { lo };
            _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1)
        });
        // SAFETY: the masks keep the stores to pixels k and k + 1 (when two) of out.
        unsafe {
            let o = out.as_mut_ptr().add(k * c);
            _mm256_mask_storeu_epi8(o, mask, _mm512_castsi512_si256(v));
            if two {
                _mm256_mask_storeu_epi8(o.add(c), mask, _mm512_extracti64x4_epi64(v, 1));
            }
        }
        k += 2;
    }
}

/// One output pixel over blocks of 32 channels (the layout of `DwI8::pack_avx512`): two taps'
/// bytes widened to i16, interleaved, and `vpdpwssd`-accumulated against the packed weights;
/// padding taps (null) read the input zero point (its product is in the folded bias). The last
/// block's missing channels are masked off in the loads and the stores.
///
/// # Safety
/// The CPU has AVX-512 F/BW/VL/VNNI; every non-null `ptrs[t]` (`t < dw.taps`) points to
/// `dw.c` readable bytes, and `ptrs[dw.taps]` is null.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn dw_i8_pixel_avx512(
    dw: &DwI8,
    cache: &[i32],
    ptrs: &[*const i8; DW_MAX_TAPS + 1],
    count: usize,
    step: usize,
    out: &mut [i8],
) {
    let c = dw.c;
    let pairs = dw.taps.div_ceil(2);
    assert!(out.len() == count * c && c > 0);
    assert!(dw.w.len() >= c.div_ceil(32) * pairs * 64 && dw.rq.bias.len() >= c.div_ceil(32) * 32);
    let zero_point = _mm512_set1_epi16(dw.input_offset.wrapping_neg());
    // After the per-128-bit-lane unpacks: lo = channels 0-3 | 8-11 | 16-19 | 24-27 and hi =
    // 4-7 | 12-15 | 20-23 | 28-31; these put them back in channel order.
    let first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    let second = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    for k in 0..count {
        let out = &mut out[k * c..(k + 1) * c];
        let mut ch = 0;
        while ch < c {
            let n = (c - ch).min(32);
            let mask: __mmask32 = if n == 32 { !0 } else { (1u32 << n) - 1 };
            let load = |t: usize| -> __m512i {
                let p = ptrs[t];
                if p.is_null() {
                    return zero_point;
                }
                // SAFETY: p + k * step starts c readable bytes (the caller's contract); the mask
                // keeps the load to channels ch..ch + n, and masked-off bytes are not accessed.
                _mm512_cvtepi8_epi16(unsafe { _mm256_maskz_loadu_epi8(mask, p.add(k * step + ch)) })
            };
            // SAFETY: block ch / 32 has pairs * 64 weights (asserted above).
            let w = unsafe { dw.w.as_ptr().add(ch / 32 * pairs * 64) };
            let mut lo = _mm512_setzero_si512();
            let mut hi = _mm512_setzero_si512();
            for pr in 0..pairs {
                let (x0, x1) = (load(2 * pr), load(2 * pr + 1));
                // SAFETY: pair pr's 64 weights are in the block (pr < pairs).
                let (wl, wh) = unsafe {
                    (
                        _mm512_loadu_si512(w.add(pr * 64) as *const __m512i),
                        _mm512_loadu_si512(w.add(pr * 64 + 32) as *const __m512i),
                    )
                };
                lo = _mm512_dpwssd_epi32(lo, _mm512_unpacklo_epi16(x0, x1), wl);
                hi = _mm512_dpwssd_epi32(hi, _mm512_unpackhi_epi16(x0, x1), wh);
            }
            let v = Rq16::load_cached(&dw.rq, cache, ch)
                .apply(_mm512_permutex2var_epi32(lo, first, hi));
            // SAFETY: the mask keeps the store to out[ch..ch + min(n, 16)].
            unsafe { _mm_mask_storeu_epi8(out.as_mut_ptr().add(ch), mask as __mmask16, v) };
            if n > 16 {
                let v = Rq16::load_cached(&dw.rq, cache, ch + 16)
                    .apply(_mm512_permutex2var_epi32(lo, second, hi));
                // SAFETY: the mask keeps the store to out[ch + 16..ch + n].
                unsafe {
                    _mm_mask_storeu_epi8(
                        out.as_mut_ptr().add(ch + 16),
                        (mask >> 16) as __mmask16,
                        v,
                    )
                };
            }
            ch += 32;
        }
    }
}

/// [`dw_i8_rows`] with AVX2 (the layout of [`DwI8::pack`] for AVX2: tap pairs interleaved per
/// 16 channels, `input_offset * sum(w)` in the bias), so the run kernel inlines into the window
/// loop.
/// `cache`: [`unsigned_cache`] of `dw.rq` (its unsigned-product output stage), or empty.
#[target_feature(enable = "avx2,fma")]
fn dw_i8_rows_avx2(
    dw: &DwI8,
    input: &[i8],
    dims: [usize; 5],
    geometry: [usize; 6],
    oys: Range<usize>,
    out: &mut [i8],
    cache: &[i32],
) {
    let c = dw.c;
    let step = geometry[1] * c;
    let unsigned = !cache.is_empty();
    assert!(!unsigned || dw.rq.unsigned);
    for_each_window_run(input, c, dims, geometry, oys, |ptrs, at, n| {
        let out = &mut out[at..at + n * c];
        // SAFETY: this function's features; for_each_window_run gives c readable elements at
        // every non-null pointer (plus k * step for the k-th pixel of a run) and nulls past
        // the taps; the cache is `dw.rq`'s (asserted). 3x3 kernels get their own copy with
        // the tap loop unrolled.
        unsafe {
            match (dw.taps, unsigned) {
                (9, true) => dw_i8_run_avx2::<9, U16>(dw, cache, ptrs, n, step, out),
                (_, true) => dw_i8_run_avx2::<0, U16>(dw, cache, ptrs, n, step, out),
                (9, false) => dw_i8_run_avx2::<9, D16>(dw, cache, ptrs, n, step, out),
                (_, false) => dw_i8_run_avx2::<0, D16>(dw, cache, ptrs, n, step, out),
            }
        }
    });
}

/// `count` output pixels, pixel `k`'s taps at `ptrs[t] + k * step`, in blocks of 16 channels
/// (the output stage's parameters derived once per block and run): two taps' bytes widened to
/// i16, interleaved, and `vpmaddwd`-summed against the packed weights, which is exact (no
/// saturation: each product pair is at most 2 * 128 * 128 in magnitude). Padding taps (null)
/// read the input zero point, whose products cancel the folded `input_offset * sum(w)`.
/// `TAPS` is `dw.taps` when known at compile time (the loop over taps then unrolls), else 0.
///
/// # Safety
/// The CPU has AVX2 and FMA; for every non-null `ptrs[t]` (`t < dw.taps`) and `k < count`,
/// `ptrs[t] + k * step` points to `dw.c` readable bytes, and `ptrs[dw.taps]` is null; `cache`
/// is [`unsigned_cache`] of `dw.rq` when `S` is [`U16`].
#[target_feature(enable = "avx2,fma")]
unsafe fn dw_i8_run_avx2<const TAPS: usize, S: Stage16>(
    dw: &DwI8,
    cache: &[i32],
    ptrs: &[*const i8; DW_MAX_TAPS + 1],
    count: usize,
    step: usize,
    out: &mut [i8],
) {
    assert!(TAPS == 0 || TAPS == dw.taps);
    let taps = if TAPS == 0 { dw.taps } else { TAPS };
    let (c, pairs) = (dw.c, taps.div_ceil(2));
    assert!(out.len() == count * c && c > 0 && taps <= DW_MAX_TAPS);
    assert!(dw.w.len() >= c.div_ceil(16) * pairs * 32 && dw.rq.bias.len() >= c.div_ceil(16) * 16);
    let zero_point = _mm256_set1_epi16(dw.input_offset.wrapping_neg());
    for cb in 0..c.div_ceil(16) {
        let ch = cb * 16;
        let n = (c - ch).min(16);
        // SAFETY: the caller's contract.
        let stage = unsafe { S::load16(&dw.rq, cache, ch) };
        // SAFETY: block cb has pairs * 32 weights (asserted above).
        let w = unsafe { dw.w.as_ptr().add(cb * pairs * 32) };
        for k in 0..count {
            let load = |t: usize| -> __m256i {
                let p = ptrs[t];
                if p.is_null() {
                    return zero_point;
                }
                // SAFETY: p + k * step + ch starts c - ch >= n readable bytes (the caller's
                // contract); a partial block goes through a copy.
                let v = unsafe {
                    let p = p.add(k * step + ch);
                    if n == 16 {
                        _mm_loadu_si128(p as *const __m128i)
                    } else {
                        let mut tmp = [0i8; 16];
                        core::ptr::copy_nonoverlapping(p, tmp.as_mut_ptr(), n);
                        _mm_loadu_si128(tmp.as_ptr() as *const __m128i)
                    }
                };
                _mm256_cvtepi8_epi16(v)
            };
            let mut lo = _mm256_setzero_si256();
            let mut hi = _mm256_setzero_si256();
            for pr in 0..pairs {
                let (x0, x1) = (load(2 * pr), load(2 * pr + 1));
                // SAFETY: pair pr's 32 weights are in the block (pr < pairs).
                let (wl, wh) = unsafe {
                    (
                        _mm256_loadu_si256(w.add(pr * 32) as *const __m256i),
                        _mm256_loadu_si256(w.add(pr * 32 + 16) as *const __m256i),
                    )
                };
                lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(x0, x1), wl));
                hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(x0, x1), wh));
            }
            // lo = channels 0-3 | 8-11, hi = 4-7 | 12-15, the order of the stage.
            // SAFETY: the caller's contract.
            let v = unsafe { stage.bytes16_quads(lo, hi) };
            store_16(v, &mut out[k * c + ch..k * c + ch + n]);
        }
    }
}
