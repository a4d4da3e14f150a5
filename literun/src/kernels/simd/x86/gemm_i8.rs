//! The int8 GEMM tiles (AVX2 `vpmaddwd`, AVX-VNNI and AVX-512 `vpdpbusd`) and the packing of
//! their left-hand side (AVX-512's tile with the requantization fused in: `gemm_i8_rq512`).

use super::*;

/// `tile[r][j] = sum_g a[r * groups + g] · b[g][j]` for `r < rows`.
pub(crate) fn tile_i8(
    isa: Isa,
    rows: usize,
    a: &[i32],
    b: &[i8],
    groups: usize,
    tile: &mut [[i32; 32]; 8],
) {
    let mr = isa.mr_i8();
    let bstride = isa.nr_i8() * isa.kg_i8();
    assert!(rows >= 1 && rows <= mr && a.len() >= groups * mr && b.len() >= groups * bstride);
    macro_rules! dispatch {
        ($f:ident, $($n:literal)*) => {
            match rows {
                // SAFETY: the ISA is available (module invariant); `a` has `groups * mr`
                // words (rows of `groups`) and `b` `groups * bstride` bytes (asserted above),
                // which is all the kernel reads.
                $($n => unsafe { $f::<$n>(a.as_ptr(), groups, b.as_ptr(), groups, tile) },)*
                _ => unreachable!(),
            }
        };
    }
    match isa {
        Isa::Avx2 => dispatch!(tile_i8_avx2, 1 2 3 4),
        Isa::AvxVnni => dispatch!(tile_i8_avxvnni, 1 2 3 4 5 6),
        Isa::Avx512Vnni => dispatch!(tile_i8_avx512vnni, 1 2 3 4 5 6 7 8),
        Isa::Portable | Isa::Neon | Isa::NeonDot | Isa::Avx512Amx => {
            unreachable!("no int8 GEMM for {isa:?} here")
        }
    }
}

/// The AVX2 tile with its requantization: `out[r * stride + j] = requant(sum_g a[r * groups +
/// g] · b[g][j])` for `r < rows`, `j < cn <= 16`, channel `c0 + j` of `rq` (`cache`:
/// [`unsigned_cache`] of `rq` for its unsigned-product form, or empty for the general one). The
/// accumulators go from registers to bytes; nothing else is written. `narrow` (a layer of at
/// most 8 channels) sums the first 8 channels of the panel only, half the multiply-adds.
#[allow(clippy::too_many_arguments)]
pub(crate) fn tile_rq_i8_avx2(
    rows: usize,
    a: &[i32],
    b: &[i8],
    groups: usize,
    rq: &Requant,
    cache: &[i32],
    c0: usize,
    cn: usize,
    out: &mut [i8],
    stride: usize,
    narrow: bool,
) {
    assert!((1..=4).contains(&rows) && a.len() >= groups * 4 && b.len() >= groups * 32);
    assert!((1..=16).contains(&cn) && c0 + 16 <= rq.bias.len() && (!narrow || cn <= 8));
    assert!(out.len() >= (rows - 1) * stride + cn && (cache.is_empty() || rq.unsigned));
    macro_rules! dispatch {
        ($wide:literal, $s:ty, $($n:literal)*) => {
            match rows {
                // SAFETY: the AVX2 GEMM is only packed when the CPU has AVX2 and FMA (module
                // invariant); `a` has rows of `groups` words and `b` `groups * 32` bytes, `out`
                // holds every (row, channel) stored, the narrow tile (`false`) only for `cn <=
                // 8`, and a non-empty cache is `rq`'s unsigned form (asserted).
                $($n => unsafe {
                    tile_rq_i8_avx2_k::<$n, $wide, $s>(a.as_ptr(), groups, b.as_ptr(), groups,
                        rq, cache, c0, cn, out.as_mut_ptr(), stride)
                },)*
                _ => unreachable!(),
            }
        };
    }
    match (narrow, cache.is_empty()) {
        (false, false) => dispatch!(true, U16, 1 2 3 4),
        (false, true) => dispatch!(true, D16, 1 2 3 4),
        (true, false) => dispatch!(false, U16, 1 2 3 4),
        (true, true) => dispatch!(false, D16, 1 2 3 4),
    }
}

/// # Safety
/// AVX2 and FMA; `a` readable for `(MR - 1) * row_stride + groups` words, `b` for `groups *
/// 32` bytes, `rq`'s arrays for channels `c0..c0 + 16`, `cache` [`unsigned_cache`] of `rq`
/// when `S` is [`U16`], and `out` writable at `r * stride + j` for `r < MR`, `j < cn <= 16`
/// (`cn <= 8` unless `WIDE`: the narrow tile sums the first 8 channels only).
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_rq_i8_avx2_k<const MR: usize, const WIDE: bool, S: Stage16>(
    a: *const i32,
    row_stride: usize,
    b: *const i8,
    groups: usize,
    rq: &Requant,
    cache: &[i32],
    c0: usize,
    cn: usize,
    out: *mut i8,
    stride: usize,
) {
    let mut acc = [[_mm256_setzero_si256(); 2]; MR];
    for g in 0..groups {
        // SAFETY: g < groups, so the 32 bytes at b + 32 g and the words a[r * row_stride + g],
        // r < MR, are in bounds (the caller's contract).
        unsafe {
            let bp = b.add(g * 32);
            let b0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(bp as *const __m128i));
            let ap = a.add(g);
            if WIDE {
                let b1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(bp.add(16) as *const __m128i));
                for (r, acc) in acc.iter_mut().enumerate() {
                    let av = _mm256_set1_epi32(*ap.add(r * row_stride));
                    acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(av, b0));
                    acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(av, b1));
                }
            } else {
                for (r, acc) in acc.iter_mut().enumerate() {
                    let av = _mm256_set1_epi32(*ap.add(r * row_stride));
                    acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(av, b0));
                }
            }
        }
    }
    // SAFETY: the caller's contract (AVX2; rq and cache for channels c0..c0 + 16).
    let p = unsafe {
        if WIDE {
            S::load16(rq, cache, c0)
        } else {
            S::load8(rq, cache, c0)
        }
    };
    for (r, acc) in acc.iter().enumerate() {
        // SAFETY: the caller's contract (AVX2; row r's channels 0..cn writable).
        unsafe {
            let v = if WIDE {
                p.bytes16(acc[0], acc[1])
            } else {
                p.bytes8(acc[0])
            };
            let o = out.add(r * stride);
            match cn {
                16 => _mm_storeu_si128(o as *mut __m128i, v),
                8 => _mm_storel_epi64(o as *mut __m128i, v),
                _ => {
                    let mut tmp = [0i8; 16];
                    _mm_storeu_si128(tmp.as_mut_ptr() as *mut __m128i, v);
                    core::ptr::copy_nonoverlapping(tmp.as_ptr(), o, cn);
                }
            }
        }
    }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn tile_i8_avx2<const MR: usize>(
    a: *const i32,
    row_stride: usize,
    b: *const i8,
    groups: usize,
    tile: &mut [[i32; 32]; 8],
) {
    let mut acc = [[_mm256_setzero_si256(); 2]; MR];
    for g in 0..groups {
        // SAFETY: g < groups, so the 32 bytes at b + 32 g and the words a[r * groups + g],
        // r < MR <= mr, are in bounds (checked by the caller).
        unsafe {
            let bp = b.add(g * 32);
            let b0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(bp as *const __m128i));
            let b1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(bp.add(16) as *const __m128i));
            let ap = a.add(g);
            for (r, acc) in acc.iter_mut().enumerate() {
                let av = _mm256_set1_epi32(*ap.add(r * row_stride));
                acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(av, b0));
                acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(av, b1));
            }
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        // SAFETY: tile rows have 32 lanes; 16 are written.
        unsafe {
            _mm256_storeu_si256(tile[r].as_mut_ptr() as *mut __m256i, acc[0]);
            _mm256_storeu_si256(tile[r].as_mut_ptr().add(8) as *mut __m256i, acc[1]);
        }
    }
}

#[target_feature(enable = "avx2,fma,avxvnni")]
unsafe fn tile_i8_avxvnni<const MR: usize>(
    a: *const i32,
    row_stride: usize,
    b: *const i8,
    groups: usize,
    tile: &mut [[i32; 32]; 8],
) {
    let mut acc = [[_mm256_setzero_si256(); 2]; MR];
    for g in 0..groups {
        // SAFETY: 64 bytes at b + 64 g and a[r * groups + g] are in bounds (checked by the
        // caller).
        unsafe {
            let bp = b.add(g * 64);
            let b0 = _mm256_loadu_si256(bp as *const __m256i);
            let b1 = _mm256_loadu_si256(bp.add(32) as *const __m256i);
            let ap = a.add(g);
            for (r, acc) in acc.iter_mut().enumerate() {
                let av = _mm256_set1_epi32(*ap.add(r * row_stride));
                acc[0] = _mm256_dpbusd_avx_epi32(acc[0], av, b0);
                acc[1] = _mm256_dpbusd_avx_epi32(acc[1], av, b1);
            }
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        // SAFETY: tile rows have 32 lanes; 16 are written.
        unsafe {
            _mm256_storeu_si256(tile[r].as_mut_ptr() as *mut __m256i, acc[0]);
            _mm256_storeu_si256(tile[r].as_mut_ptr().add(8) as *mut __m256i, acc[1]);
        }
    }
}

#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn tile_i8_avx512vnni<const MR: usize>(
    a: *const i32,
    row_stride: usize,
    b: *const i8,
    groups: usize,
    tile: &mut [[i32; 32]; 8],
) {
    let mut acc = [[_mm512_setzero_si512(); 2]; MR];
    for g in 0..groups {
        // SAFETY: 128 bytes at b + 128 g and a[r * groups + g] are in bounds (checked by the
        // caller).
        unsafe {
            let bp = b.add(g * 128);
            let b0 = _mm512_loadu_si512(bp as *const __m512i);
            let b1 = _mm512_loadu_si512(bp.add(64) as *const __m512i);
            let ap = a.add(g);
            for (r, acc) in acc.iter_mut().enumerate() {
                let av = _mm512_set1_epi32(*ap.add(r * row_stride));
                acc[0] = _mm512_dpbusd_epi32(acc[0], av, b0);
                acc[1] = _mm512_dpbusd_epi32(acc[1], av, b1);
            }
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        // SAFETY: tile rows have 32 lanes, all written.
        unsafe {
            _mm512_storeu_si512(tile[r].as_mut_ptr() as *mut __m512i, acc[0]);
            _mm512_storeu_si512(tile[r].as_mut_ptr().add(16) as *mut __m512i, acc[1]);
        }
    }
}

/// One packed GEMM row for `vpdpbusd`: the bytes of `row` offset to unsigned (`x + 128`, i.e.
/// `x ^ 0x80`), the last word's missing bytes zero (their weights are zero).
pub(crate) fn pack_row_vnni(row: &[i8], dst: &mut [i32]) {
    // SAFETY: the VNNI ISAs are only chosen when the CPU has AVX2 (`available`).
    unsafe { pack_row_vnni_avx2(row, dst) }
}

#[target_feature(enable = "avx2")]
fn pack_row_vnni_avx2(row: &[i8], dst: &mut [i32]) {
    let n = row.len();
    let words = n.div_ceil(4);
    assert!(dst.len() >= words);
    let flip = _mm256_set1_epi8(-128);
    let out = dst.as_mut_ptr() as *mut u8;
    let mut i = 0;
    while i + 32 <= n {
        // SAFETY: bytes i..i + 32 are inside row and inside dst (dst has at least n bytes).
        unsafe {
            let v = _mm256_loadu_si256(row.as_ptr().add(i) as *const __m256i);
            _mm256_storeu_si256(out.add(i) as *mut __m256i, _mm256_xor_si256(v, flip));
        }
        i += 32;
    }
    if i + 16 <= n {
        // SAFETY: as above, for 16 bytes.
        unsafe {
            let v = _mm_loadu_si128(row.as_ptr().add(i) as *const __m128i);
            let v = _mm_xor_si128(v, _mm256_castsi256_si128(flip));
            _mm_storeu_si128(out.add(i) as *mut __m128i, v);
        }
        i += 16;
    }
    while i + 4 <= n {
        let w = u32::from_le_bytes([
            row[i] as u8,
            row[i + 1] as u8,
            row[i + 2] as u8,
            row[i + 3] as u8,
        ]);
        // SAFETY: bytes i..i + 4 are inside dst (i + 4 <= n <= its byte length).
        unsafe { (out.add(i) as *mut u32).write_unaligned(w ^ 0x8080_8080) };
        i += 4;
    }
    while i < words * 4 {
        let b = row.get(i).map_or(0, |&x| x as u8 ^ 0x80);
        // SAFETY: i < 4 * words <= the byte length of dst (asserted); writing bytes of an i32
        // slice is sound (every bit pattern is an i32).
        unsafe { *out.add(i) = b };
        i += 1;
    }
}

/// One packed GEMM row for `vpmaddwd`: the bytes of `row` sign-extended to i16, two per word
/// (an odd length's last word has a zero high half).
pub(crate) fn pack_row_pairs(row: &[i8], dst: &mut [i32]) {
    // SAFETY: the AVX2 int8 GEMM is only chosen when the CPU has AVX2 (`available`).
    unsafe { pack_row_pairs_avx2(row, dst) }
}

#[target_feature(enable = "avx2")]
fn pack_row_pairs_avx2(row: &[i8], dst: &mut [i32]) {
    let n = row.len();
    assert!(dst.len() >= n.div_ceil(2));
    let out = dst.as_mut_ptr() as *mut i16;
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: bytes i..i + 16 are inside row, and i16 i..i + 16 inside dst (which has at
        // least n i16).
        unsafe {
            let v = _mm_loadu_si128(row.as_ptr().add(i) as *const __m128i);
            _mm256_storeu_si256(out.add(i) as *mut __m256i, _mm256_cvtepi8_epi16(v));
        }
        i += 16;
    }
    let mut chunks = row[i..].chunks_exact(2);
    for (d, c) in dst[i / 2..].iter_mut().zip(&mut chunks) {
        *d = (u32::from(c[0] as i16 as u16) | (u32::from(c[1] as i16 as u16) << 16)) as i32;
    }
    if let [x] = chunks.remainder() {
        dst[n / 2] = i32::from(*x as i16 as u16);
    }
}

/// Rows `m0..m0 + count` of `conv`'s im2col packed for AVX2's `vpmaddwd` (bytes sign-extended
/// to i16, [`pack_row_pairs`]) as rows `0..count` of `dst` (`groups` words each). A window
/// inside the input goes straight from the input to its packed row, 16 bytes at a time; the
/// others through `row_buf` ([`crate::kernels::simd::Rows::row`]).
///
/// Each 16-byte step stores 16 i16 whole, past the window row's end where it is shorter: what
/// it writes past is the next window row's (stored after it), the row's padding words (whose
/// weights are zero, so any value there adds nothing), or the next packed row's (packed after
/// it); the stores stay inside `dst`, else go through a copy.
pub(crate) fn pack_conv_rows_pairs(
    conv: &ConvRows<'_>,
    m0: usize,
    count: usize,
    groups: usize,
    row_buf: &mut [i8],
    dst: &mut [i32],
) {
    // SAFETY: only called for Isa::Avx2, chosen when the CPU has AVX2.
    unsafe { pack_conv_rows_pairs_avx2(conv, m0, count, groups, row_buf, dst) }
}

#[target_feature(enable = "avx2,fma")]
fn pack_conv_rows_pairs_avx2(
    conv: &ConvRows<'_>,
    m0: usize,
    count: usize,
    groups: usize,
    row_buf: &mut [i8],
    dst: &mut [i32],
) {
    let [in_h, in_w, c] = conv.in_hwc;
    let [k_h, k_w] = conv.k_hw;
    let p = conv.p;
    let input = conv.input;
    let k = k_h * k_w * c;
    assert!(c > 0 && conv.out_w > 0 && k <= groups * 2 && dst.len() >= count * groups);
    assert!(input.len() >= in_h * in_w * c && row_buf.len() >= k);
    let rows = crate::kernels::simd::Rows::Conv {
        input,
        in_hwc: conv.in_hwc,
        k_hw: conv.k_hw,
        out_w: conv.out_w,
        p: *p,
        pad: conv.pad,
    };
    let span_h = (k_h - 1) * p.dilation_h + 1;
    let wrow = k_w * c;
    // (In i16.)
    let (row_len, dst_len) = (2 * groups, 2 * dst.len());
    let out = dst.as_mut_ptr() as *mut i16;
    for r in 0..count {
        let m = m0 + r;
        let (oy, ox) = (m / conv.out_w, m % conv.out_w);
        let x0 = (ox * p.stride_w).wrapping_sub(p.pad_left);
        let y0 = (oy * p.stride_h).wrapping_sub(p.pad_top);
        let inside =
            p.dilation_w == 1 && x0 < in_w && in_w - x0 >= k_w && y0 < in_h && in_h - y0 >= span_h;
        if !inside {
            let row = rows.row(m, row_buf);
            pack_row_pairs(&row[..k], &mut dst[r * groups..(r + 1) * groups]);
            continue;
        }
        for ky in 0..k_h {
            let at = ((y0 + ky * p.dilation_h) * in_w + x0) * c;
            let o = r * row_len + ky * wrow;
            let mut i = 0;
            while i < wrow {
                let n = (wrow - i).min(16);
                if at + i + 16 <= input.len() && o + i + 16 <= dst_len {
                    // SAFETY: 16 bytes of the input and 16 i16 of dst from these offsets
                    // (checked just above).
                    unsafe {
                        let v = _mm_loadu_si128(input.as_ptr().add(at + i) as *const __m128i);
                        let v = _mm256_cvtepi8_epi16(v);
                        _mm256_storeu_si256(out.add(o + i) as *mut __m256i, v);
                    }
                } else {
                    for j in 0..n {
                        // SAFETY: o + i + j is inside the row (ky * wrow + i + j < k <=
                        // row_len) of a row r < count of dst.
                        unsafe { *out.add(o + i + j) = i16::from(input[at + i + j]) };
                    }
                }
                i += n;
            }
        }
    }
}

/// The im2col rows of a convolution ([`crate::kernels::simd::Rows::Conv`]'s fields).
pub(crate) struct ConvRows<'a> {
    pub(crate) input: &'a [i8],
    pub(crate) in_hwc: [usize; 3],
    pub(crate) k_hw: [usize; 2],
    pub(crate) out_w: usize,
    pub(crate) p: &'a Conv2dParams,
    pub(crate) pad: i8,
}

/// Rows `m0..m0 + count` of `conv`'s im2col packed for `vpdpbusd` as rows `0..count` of `dst`
/// (`groups` words each): what [`pack_row_vnni`] makes of [`crate::kernels::simd::Rows::row`], gathered in
/// one pass with masked AVX-512 copies (no per-tap `memcpy` calls, no row buffer).
pub(crate) fn pack_conv_rows_vnni512(
    conv: &ConvRows<'_>,
    m0: usize,
    count: usize,
    groups: usize,
    dst: &mut [i32],
) {
    // SAFETY: only called for Isa::Avx512Vnni, chosen when the CPU has AVX-512 F/BW/VL.
    unsafe { pack_conv_rows_avx512(conv, m0, count, groups, dst) }
}

#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn pack_conv_rows_avx512(
    conv: &ConvRows<'_>,
    m0: usize,
    count: usize,
    groups: usize,
    dst: &mut [i32],
) {
    let [in_h, in_w, c] = conv.in_hwc;
    let [k_h, k_w] = conv.k_hw;
    let p = conv.p;
    let input = conv.input;
    let k = k_h * k_w * c;
    assert!(c > 0 && conv.out_w > 0 && k <= groups * 4 && dst.len() >= count * groups);
    assert!(input.len() >= in_h * in_w * c);
    let flip = _mm512_set1_epi8(-128);
    let padv = _mm512_set1_epi8((conv.pad as u8 ^ 0x80) as i8);
    let lanes = |n: usize| -> __mmask64 {
        if n >= 64 {
            !0
        } else {
            (1u64 << n) - 1
        }
    };
    // `input[at..at + n] ^ 0x80` (or `n` padding bytes when `at` is None) to `out`.
    let run = |at: Option<usize>, n: usize, out: *mut u8| {
        let mut i = 0;
        while i < n {
            let m = lanes(n - i);
            // SAFETY: the mask keeps both accesses to bytes i..n of the run: inside input
            // (at + n <= input.len(), checked by the callers' index arithmetic below) and inside
            // the packed row (out + n is at most k bytes into a row of groups * 4 >= k bytes).
            unsafe {
                let v = match at {
                    Some(at) => {
                        let v = _mm512_maskz_loadu_epi8(m, input.as_ptr().add(at + i));
                        _mm512_xor_si512(v, flip)
                    }
                    None => padv,
                };
                _mm512_mask_storeu_epi8(out.add(i) as *mut i8, m, v);
            }
            i += 64;
        }
    };
    // Windows inside the input take their rows as whole copies (`run`); rows of at most 16
    // bytes (the 3-channel stem: 9) through 16-byte registers, as a 64-byte masked access at
    // an unaligned address spans two cache lines even when few of its bytes are enabled.
    let span_h = (k_h - 1) * p.dilation_h + 1;
    let wrow = k_w * c;
    let short = lanes(wrow) as __mmask16;
    let flip16 = _mm_set1_epi8(-128);
    // The window at input byte `at` (inside the input) to packed row `row`.
    let window = |at: usize, row: *mut u8| {
        for ky in 0..k_h {
            let at = at + ky * p.dilation_h * in_w * c;
            let o = ky * wrow;
            if wrow > 16 {
                run(Some(at), wrow, row.wrapping_add(o));
                continue;
            }
            // SAFETY: the window is inside the input (the callers check y0 + span_h <= in_h and
            // x0 + k_w <= in_w), so its row's wrow bytes at `at` are; the store's wrow bytes
            // are inside the packed row (o + wrow <= k <= groups * 4). The mask keeps both
            // accesses to those bytes.
            unsafe {
                let v = _mm_maskz_loadu_epi8(short, input.as_ptr().add(at));
                _mm_mask_storeu_epi8(row.add(o) as *mut i8, short, _mm_xor_si128(v, flip16));
            }
        }
    };
    // A window of at most 64 bytes (the 3-channel stem: 27) is assembled in one register
    // instead: each of its rows loaded straight into its lanes, then one store of the packed
    // row (its tail lanes zero). A full-width store when it stays inside `dst` (it runs over
    // into the next rows, which are packed after it), since a load from a masked store waits
    // for the store to complete, and the GEMM tile reads this row right away.
    let in_register = k <= 64;
    let flip_k = _mm512_maskz_mov_epi8(lanes(k), flip);
    let row_mask = lanes(wrow);
    let packed_bytes = groups * 4;
    let dst_bytes = dst.len() * 4;
    // Bytes `from..` of the packed row at `row` to zero: the last word's missing bytes, and
    // the whole steps of the AMX blocks (up to 63 bytes), whose weights are zero.
    let zero_tail = |row: *mut u8, from: usize| {
        let mut o = from;
        while o < packed_bytes {
            // SAFETY: the mask keeps the store to bytes o..packed_bytes of the row, which the
            // callers pass inside dst (a row r < count).
            unsafe {
                let m = lanes(packed_bytes - o);
                _mm512_mask_storeu_epi8(row.add(o) as *mut i8, m, _mm512_setzero_si512());
            }
            o += 64;
        }
    };
    // The window at input byte `at` to the packed row at `out`, byte `row_at` of `dst`.
    let window_in_register = |at: usize, row_at: usize, out: *mut u8| {
        let mut v = _mm512_setzero_si512();
        for ky in 0..k_h {
            let o = ky * wrow;
            let from = at + ky * p.dilation_h * in_w * c;
            // The lanes o..o + wrow of a load from `from - o` are the window row's bytes.
            let src = input.as_ptr().wrapping_add(from).wrapping_sub(o);
            // SAFETY: the window is inside the input (the callers check y0 + span_h <= in_h and
            // x0 + k_w <= in_w), so bytes from..from + wrow are; the mask (o + wrow <= k <= 64)
            // enables only the lanes o..o + wrow, which read exactly those bytes (masked-off
            // lanes are not accessed).
            v = unsafe { _mm512_mask_loadu_epi8(v, row_mask << o, src) };
        }
        let v = _mm512_xor_si512(v, flip_k);
        // SAFETY: row_at + 64 <= dst_bytes for the full store; otherwise the mask keeps the
        // store to the row's packed_bytes, inside dst (the callers' row < count).
        unsafe {
            if row_at + 64 <= dst_bytes {
                _mm512_storeu_si512(out as *mut __m512i, v);
            } else {
                _mm512_mask_storeu_epi8(out as *mut i8, lanes(packed_bytes), v);
            }
        }
    };
    let (mut oy, mut ox) = (m0 / conv.out_w, m0 % conv.out_w);
    let mut r = 0;
    while r < count {
        // SAFETY: row r's groups * 4 bytes are inside dst (asserted); any byte pattern is an i32.
        let row = unsafe { (dst.as_mut_ptr() as *mut u8).add(r * groups * 4) };
        let mut o = 0;
        let x0 = (ox * p.stride_w).wrapping_sub(p.pad_left);
        let contiguous = p.dilation_w == 1 && x0 < in_w && in_w - x0 >= k_w;
        let y0 = (oy * p.stride_h).wrapping_sub(p.pad_top);
        if contiguous && y0 < in_h && in_h - y0 >= span_h {
            // This and the following windows of the output row that are inside the input:
            // the same copies at a fixed step.
            let last_x0 = in_w - k_w; // x0 <= last_x0 here
            let run = (count - r)
                .min(conv.out_w - ox)
                .min((last_x0 - x0) / p.stride_w + 1);
            let at0 = (y0 * in_w + x0) * c;
            if in_register {
                for i in 0..run {
                    let row_at = (r + i) * packed_bytes;
                    let out = row.wrapping_add(i * packed_bytes);
                    window_in_register(at0 + i * p.stride_w * c, row_at, out);
                }
                r += run;
                ox += run;
                if ox == conv.out_w {
                    ox = 0;
                    oy += 1;
                }
                continue;
            }
            for i in 0..run {
                let row = row.wrapping_add(i * groups * 4);
                window(at0 + i * p.stride_w * c, row);
                zero_tail(row, k);
            }
            r += run;
            ox += run;
            if ox == conv.out_w {
                ox = 0;
                oy += 1;
            }
            continue;
        }
        for ky in 0..k_h {
            let y = (oy * p.stride_h + ky * p.dilation_h).wrapping_sub(p.pad_top);
            if contiguous && y < in_h {
                // x0 + k_w <= in_w, so the window row's k_w pixels are inside the input.
                run(Some((y * in_w + x0) * c), k_w * c, row.wrapping_add(o));
                o += k_w * c;
                continue;
            }
            if y >= in_h || p.dilation_w == 1 {
                // Padding taps, the taps inside the input (one run of pixels), padding taps:
                // three copies instead of one per tap (an image's stem: 7 taps of 3 bytes).
                let xs = (ox * p.stride_w) as isize - p.pad_left as isize;
                let inside = |n: isize| n.max(0).min(k_w as isize) as usize;
                let (lo, hi) = if y < in_h {
                    (inside(-xs), inside(in_w as isize - xs))
                } else {
                    (k_w, k_w)
                };
                let hi = hi.max(lo);
                run(None, lo * c, row.wrapping_add(o));
                if hi > lo {
                    // Pixels xs + lo..xs + hi of input row y (0 <= xs + lo, xs + hi <= in_w).
                    let at = (y * in_w + (xs + lo as isize) as usize) * c;
                    run(Some(at), (hi - lo) * c, row.wrapping_add(o + lo * c));
                }
                run(None, (k_w - hi) * c, row.wrapping_add(o + hi * c));
                o += k_w * c;
                continue;
            }
            for kx in 0..k_w {
                let x = (ox * p.stride_w + kx * p.dilation_w).wrapping_sub(p.pad_left);
                let at = (y < in_h && x < in_w).then(|| (y * in_w + x) * c);
                run(at, c, row.wrapping_add(o));
                o += c;
            }
        }
        zero_tail(row, o);
        r += 1;
        ox += 1;
        if ox == conv.out_w {
            ox = 0;
            oy += 1;
        }
    }
}

/// `acc[j] = init[j] + row_term + sum_k row[k] * rhs[k * n + j0 + j]` for `j < init.len()`
/// (at most 32; wrapping i32, as the portable kernel), the rest of `acc` left as it is: the
/// sums of one output row of an int8 BATCH_MATMUL whose rhs is `[K, n]`, eight columns per
/// vector.
#[cfg(all(feature = "ops-batch-matmul", feature = "ops-int8"))]
pub(crate) fn bmm_row_i8(
    row: &[i8],
    rhs: &[i8],
    n: usize,
    j0: usize,
    init: &[i32],
    row_term: i32,
    acc: &mut [i32; 32],
) {
    let (k, jn) = (row.len(), init.len());
    assert!(jn <= 32 && j0 + jn <= n && rhs.len() >= k * n);
    // SAFETY: only reached through `BmmI8`, built for an x86 ISA the CPU has (AVX2 and up);
    // the reads are within the lengths asserted above.
    unsafe { bmm_row_i8_avx2(row, rhs, n, j0, init, row_term, acc) }
}

#[cfg(all(feature = "ops-batch-matmul", feature = "ops-int8"))]
#[target_feature(enable = "avx2")]
unsafe fn bmm_row_i8_avx2(
    row: &[i8],
    rhs: &[i8],
    n: usize,
    j0: usize,
    init: &[i32],
    row_term: i32,
    acc: &mut [i32; 32],
) {
    let jn = init.len();
    let full = jn / 8 * 8;
    let term = _mm256_set1_epi32(row_term);
    for j in (0..full).step_by(8) {
        // SAFETY: j + 8 <= jn lanes of init and acc; the 8 bytes at kk * n + j0 + j end at or
        // before (kk + 1) * n <= rhs.len() (asserted by the caller).
        unsafe {
            let mut a = _mm256_add_epi32(_mm256_loadu_si256(init.as_ptr().add(j).cast()), term);
            for (kk, &x) in row.iter().enumerate() {
                let b = _mm_loadl_epi64(rhs.as_ptr().add(kk * n + j0 + j).cast());
                let prod =
                    _mm256_mullo_epi32(_mm256_set1_epi32(i32::from(x)), _mm256_cvtepi8_epi32(b));
                a = _mm256_add_epi32(a, prod);
            }
            _mm256_storeu_si256(acc.as_mut_ptr().add(j).cast(), a);
        }
    }
    for j in full..jn {
        let mut a = init[j].wrapping_add(row_term);
        for (kk, &x) in row.iter().enumerate() {
            a = a.wrapping_add(i32::from(x) * i32::from(rhs[kk * n + j0 + j]));
        }
        acc[j] = a;
    }
}
