//! x86-64 micro-kernels: AVX2 (+FMA), AVX-VNNI and AVX-512 VNNI.
//!
//! Every `unsafe` block here relies on one invariant besides its bounds checks: the packed
//! weights it is given ([`GemmI8`], [`DwI8`], [`GemmF32`], [`DwF32`]) were built by their
//! `pack` functions for an [`Isa`] whose `available()` returned true on this CPU, and their
//! fields are private to the crate, so the instructions each kernel uses exist.

use core::arch::x86_64::*;
use core::ops::Range;

use super::{
    ArithI8, ArithOp, Dw3, Dw3Stage, DwF32, DwI8, Isa, Mbqm, QuantizeTo, Requant, SegF32,
    DW3_STRIP, DW_MAX_TAPS, FUSED_CACHE_WORDS, GROUP_F32, MAX_SEGS_F32, MR_F32, NR_F32,
};
use crate::kernels::conv::Conv2dParams;
use crate::kernels::elementwise::Run;
use crate::kernels::Activation;

/// Whether the CPU has `isa`.
pub(crate) fn available(isa: Isa) -> bool {
    #[cfg(feature = "std")]
    {
        let avx2 = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
        match isa {
            Isa::Portable => true,
            Isa::Neon | Isa::NeonDot => false,
            Isa::Avx2 => avx2,
            Isa::AvxVnni => avx2 && std::is_x86_feature_detected!("avxvnni"),
            Isa::Avx512Vnni => {
                avx2 && std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vl")
                    && std::is_x86_feature_detected!("avx512vnni")
            }
        }
    }
    #[cfg(not(feature = "std"))]
    {
        // No run-time detection without std: what the build targets.
        let avx2 = cfg!(target_feature = "avx2") && cfg!(target_feature = "fma");
        match isa {
            Isa::Portable => true,
            Isa::Neon | Isa::NeonDot => false,
            Isa::Avx2 => avx2,
            Isa::AvxVnni => avx2 && cfg!(target_feature = "avxvnni"),
            Isa::Avx512Vnni => {
                avx2 && cfg!(target_feature = "avx512f")
                    && cfg!(target_feature = "avx512bw")
                    && cfg!(target_feature = "avx512vl")
                    && cfg!(target_feature = "avx512vnni")
            }
        }
    }
}

// ------------------------------------------------------------------------------ int8 GEMM

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
        Isa::Portable | Isa::Neon | Isa::NeonDot => unreachable!("no int8 GEMM for {isa:?} here"),
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

/// The im2col rows of a convolution ([`super::Rows::Conv`]'s fields).
pub(crate) struct ConvRows<'a> {
    pub(crate) input: &'a [i8],
    pub(crate) in_hwc: [usize; 3],
    pub(crate) k_hw: [usize; 2],
    pub(crate) out_w: usize,
    pub(crate) p: &'a Conv2dParams,
    pub(crate) pad: i8,
}

/// Rows `m0..m0 + count` of `conv`'s im2col packed for `vpdpbusd` as rows `0..count` of `dst`
/// (`groups` words each): what [`pack_row_vnni`] makes of [`super::Rows::row`], gathered in
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
            for i in 0..run {
                let row = row.wrapping_add(i * groups * 4);
                window(at0 + i * p.stride_w * c, row);
                // The last word's missing bytes (their weights are zero).
                for o in k..groups * 4 {
                    // SAFETY: o < groups * 4, inside row r + i (r + i < count).
                    unsafe { *row.add(o) = 0 };
                }
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
            for kx in 0..k_w {
                let x = (ox * p.stride_w + kx * p.dilation_w).wrapping_sub(p.pad_left);
                let at = (y < in_h && x < in_w).then(|| (y * in_w + x) * c);
                run(at, c, row.wrapping_add(o));
                o += c;
            }
        }
        // The last word's missing bytes (their weights are zero).
        while o < groups * 4 {
            // SAFETY: o < groups * 4, inside row r.
            unsafe { *row.add(o) = 0 };
            o += 1;
        }
        r += 1;
        ox += 1;
        if ox == conv.out_w {
            ox = 0;
            oy += 1;
        }
    }
}

/// The AVX-512 VNNI tile with its requantization: `out[r * stride + j] = requant(sum_g
/// a[r * groups + g] · b[g][j])` for `r < rows`, `j < cn`, channel `c0 + j` of `rq` (`fused`:
/// [`fused_cache`] of `rq`, with the fused form). The accumulators go from registers to bytes;
/// nothing else is written.
#[allow(clippy::too_many_arguments)]
pub(crate) fn tile_rq_i8_avx512(
    rows: usize,
    a: &[i32],
    b: &[i8],
    groups: usize,
    rq: &Requant,
    fused: &[i32],
    c0: usize,
    cn: usize,
    out: &mut [i8],
    stride: usize,
) {
    assert!((1..=8).contains(&rows) && a.len() >= groups * 8 && b.len() >= groups * 128);
    assert!((1..=32).contains(&cn) && c0 + 32 <= rq.bias.len());
    assert!(out.len() >= (rows - 1) * stride + cn);
    macro_rules! dispatch {
        ($($n:literal)*) => {
            match rows {
                // SAFETY: only called for Isa::Avx512Vnni, chosen when the CPU has AVX-512
                // F/BW/VL/VNNI (`available`); `a` has rows of `groups` words and `b`
                // `groups * 128` bytes, and `out` holds every (row, channel) stored (asserted).
                $($n => unsafe {
                    tile_rq_i8_avx512vnni::<$n>(a.as_ptr(), groups, b.as_ptr(), groups, rq,
                        fused, c0, cn, out.as_mut_ptr(), stride)
                },)*
                _ => unreachable!(),
            }
        };
    }
    dispatch!(1 2 3 4 5 6 7 8)
}

/// # Safety
/// AVX-512 F/BW/VL/VNNI; `a` readable for `(MR - 1) * row_stride + groups` words, `b` for
/// `groups * 128` bytes, `rq`'s arrays for channels `c0..c0 + 32`, and `out` writable at
/// `r * stride + j` for `r < MR`, `j < cn <= 32`.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn tile_rq_i8_avx512vnni<const MR: usize>(
    a: *const i32,
    row_stride: usize,
    b: *const i8,
    groups: usize,
    rq: &Requant,
    fused: &[i32],
    c0: usize,
    cn: usize,
    out: *mut i8,
    stride: usize,
) {
    // The accumulators start from the bias (wrapping, as `acc + bias` would).
    assert!(c0 + 32 <= rq.bias.len());
    // SAFETY: channels c0..c0 + 32 of the bias (asserted).
    let (bias0, bias1) = unsafe {
        (
            _mm512_loadu_si512(rq.bias.as_ptr().add(c0) as *const __m512i),
            _mm512_loadu_si512(rq.bias.as_ptr().add(c0 + 16) as *const __m512i),
        )
    };
    let mut acc = [[bias0, bias1]; MR];
    for g in 0..groups {
        // SAFETY: the caller's contract.
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
    let lanes = |n: usize| -> __mmask16 {
        if n >= 16 {
            0xFFFF
        } else {
            (1u16 << n) - 1
        }
    };
    let p = Rq16::load_cached(rq, fused, c0);
    for (r, acc) in acc.iter().enumerate() {
        // SAFETY: row r's channels 0..min(cn, 16) are writable (the caller's contract).
        unsafe { _mm_mask_storeu_epi8(out.add(r * stride), lanes(cn), p.apply_biased(acc[0])) };
    }
    if cn > 16 {
        let p = Rq16::load_cached(rq, fused, c0 + 16);
        for (r, acc) in acc.iter().enumerate() {
            // SAFETY: row r's channels 16..cn are writable (the caller's contract).
            unsafe {
                let v = p.apply_biased(acc[1]);
                _mm_mask_storeu_epi8(out.add(r * stride + 16), lanes(cn - 16), v)
            };
        }
    }
}

// ------------------------------------------------------------------------ requantization

/// `RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x, m), right)` on 8 lanes, `mask`
/// = `(1 << right) - 1` and `thr` = `mask >> 1` (the double rounding of
/// `MultiplyByQuantizedMultiplier` after its left shift; see [`Rq8`] for why it is exact
/// for every `x` when no lane of `m` is `i32::MIN`).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn srdhm_rdbpot_8(x: __m256i, m: __m256i, mask: __m256i, thr: __m256i, right: __m256i) -> __m256i {
    let nudge = _mm256_set1_epi64x(1 << 30);
    let even = _mm256_srli_epi64(_mm256_add_epi64(_mm256_mul_epi32(x, m), nudge), 31);
    let odd = _mm256_mul_epi32(_mm256_srli_epi64(x, 32), _mm256_srli_epi64(m, 32));
    let odd = _mm256_slli_epi64(_mm256_srli_epi64(_mm256_add_epi64(odd, nudge), 31), 32);
    let hm = _mm256_blend_epi32(even, odd, 0b1010_1010);
    rdbpot_8(hm, mask, thr, right)
}

/// `RoundingDivideByPOT(hm, right)` on 8 lanes (`mask`, `thr` as in [`srdhm_rdbpot_8`]).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn rdbpot_8(hm: __m256i, mask: __m256i, thr: __m256i, right: __m256i) -> __m256i {
    let rem = _mm256_and_si256(hm, mask);
    let neg = _mm256_cmpgt_epi32(_mm256_setzero_si256(), hm);
    let thr = _mm256_sub_epi32(thr, neg);
    let q = _mm256_srav_epi32(hm, right);
    _mm256_sub_epi32(q, _mm256_cmpgt_epi32(rem, thr))
}

/// [`srdhm_rdbpot_8`] on 16 lanes (the same operations, so the same numbers).
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn srdhm_rdbpot_16(x: __m512i, m: __m512i, mask: __m512i, thr: __m512i, right: __m512i) -> __m512i {
    let nudge = _mm512_set1_epi64(1 << 30);
    let even = _mm512_srli_epi64(_mm512_add_epi64(_mm512_mul_epi32(x, m), nudge), 31);
    let odd = _mm512_mul_epi32(_mm512_srli_epi64(x, 32), _mm512_srli_epi64(m, 32));
    let odd = _mm512_add_epi64(odd, nudge);
    // (odd + nudge) << 1 has bits 31..62 in its high half, which is all the blend takes.
    let odd = _mm512_add_epi64(odd, odd);
    let hm = _mm512_mask_blend_epi32(0xAAAA, even, odd);
    rdbpot_16(hm, mask, thr, right)
}

/// [`rdbpot_8`] on 16 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn rdbpot_16(hm: __m512i, mask: __m512i, thr: __m512i, right: __m512i) -> __m512i {
    let one = _mm512_set1_epi32(1);
    let rem = _mm512_and_si512(hm, mask);
    let neg = _mm512_cmpgt_epi32_mask(_mm512_setzero_si512(), hm);
    let thr = _mm512_mask_add_epi32(thr, neg, thr, one);
    let q = _mm512_srav_epi32(hm, right);
    _mm512_mask_add_epi32(q, _mm512_cmpgt_epi32_mask(rem, thr), q, one)
}

/// The requantization parameters of 8 channels in registers, derived from the stored ones
/// (`left`, `right`, `mask`, `thr` from `shift`, as [`Mbqm::new`]); loaded once per 8-channel
/// column of a tile. [`Rq8::apply`] is `MultiplyByQuantizedMultiplier` (double rounding) of
/// the 8 lanes, plus the output offset and clamp, bit-exact with [`Requant::apply`]:
/// - `SaturatingRoundingDoublingHighMul(a, m) = (a * m + 2^30) >> 31` (floor) for every `a`
///   when `m != i32::MIN` (the reference's negative nudge `1 - 2^30` with truncating division
///   gives the same value as the floor of `(a * m + 2^30) / 2^31`);
/// - `RoundingDivideByPOT(x, e) = (x >> e) + (x & mask > (mask >> 1) + (x < 0))`;
/// - `clamp(sat_add(v, off), lo, hi) = clamp(v, lo - off, hi - off) + off`.
struct Rq8 {
    bias: __m256i,
    /// Whether any channel shifts left (`Requant::any_left`; else `left` is zero and unused).
    any_left: bool,
    left: __m256i,
    mult: __m256i,
    mask: __m256i,
    thr: __m256i,
    right: __m256i,
    lo: __m256i,
    hi: __m256i,
    off: __m256i,
}

impl Rq8 {
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn load(rq: &Requant, c: usize) -> Rq8 {
        assert!(c + 8 <= rq.bias.len());
        // SAFETY: the loads read rq.bias, rq.mult (8 i32) and rq.shift (8 i8) from c, in
        // bounds (asserted; all arrays have the same length).
        let (bias, mult, shift) = unsafe {
            let ld = |v: &[i32]| _mm256_loadu_si256(v.as_ptr().add(c) as *const __m256i);
            let s = _mm_loadl_epi64(rq.shift.as_ptr().add(c) as *const __m128i);
            (ld(&rq.bias), ld(&rq.mult), _mm256_cvtepi8_epi32(s))
        };
        let [left, right, mask, thr] = derive_8(shift, rq.any_left);
        let off = rq.out_offset;
        Rq8 {
            bias,
            any_left: rq.any_left,
            left,
            mult,
            mask,
            thr,
            right,
            lo: _mm256_set1_epi32(rq.act_min.saturating_sub(off)),
            hi: _mm256_set1_epi32(rq.act_max.saturating_sub(off)),
            off: _mm256_set1_epi32(off),
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn apply(&self, acc: __m256i) -> __m256i {
        let x = _mm256_add_epi32(acc, self.bias);
        // Most layers' multipliers are below one: no left shift anywhere.
        let x = if self.any_left {
            _mm256_sllv_epi32(x, self.left)
        } else {
            x
        };
        let q = srdhm_rdbpot_8(x, self.mult, self.mask, self.thr, self.right);
        let q = _mm256_min_epi32(_mm256_max_epi32(q, self.lo), self.hi);
        _mm256_add_epi32(q, self.off)
    }
}

/// `[left, right, mask, thr]` of [`Mbqm::new`] from 8 lanes of `shift` (in `-31..=31`;
/// `any_left`: whether any is positive, else `left` is zero). The AVX2 depthwise kernel loads
/// these per pixel, so every instruction counts.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn derive_8(shift: __m256i, any_left: bool) -> [__m256i; 4] {
    let (zero, one) = (_mm256_setzero_si256(), _mm256_set1_epi32(1));
    let (left, right) = if any_left {
        let left = _mm256_max_epi32(shift, zero);
        // max(shift, 0) - shift = max(-shift, 0).
        (left, _mm256_sub_epi32(left, shift))
    } else {
        (zero, _mm256_sub_epi32(zero, shift))
    };
    // (1 << 31) - 1 wraps to i32::MAX, as Mbqm's i64 arithmetic gives.
    let mask = _mm256_sub_epi32(_mm256_sllv_epi32(one, right), one);
    [left, right, mask, _mm256_srli_epi32::<1>(mask)]
}

/// [`derive_8`] on 16 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn derive_16(shift: __m512i, any_left: bool) -> [__m512i; 4] {
    let (zero, one) = (_mm512_setzero_si512(), _mm512_set1_epi32(1));
    let (left, right) = if any_left {
        let left = _mm512_max_epi32(shift, zero);
        (left, _mm512_sub_epi32(left, shift))
    } else {
        (zero, _mm512_sub_epi32(zero, shift))
    };
    let mask = _mm512_sub_epi32(_mm512_sllv_epi32(one, right), one);
    [left, right, mask, _mm512_srli_epi32::<1>(mask)]
}

/// The fused form's per-lane constants from 16 lanes of `shift` (every stored channel shifting
/// right, `shift = -e <= -1`): `[add_even, add_odd, rshift]`, the 64-bit
/// [`Requant::fused_add`] of the even and of the odd channels, and `e - 1` per channel.
/// Padding channels (shift 0) get meaningless lanes, which are never stored.
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn derive_fused_16(shift: __m512i, out_offset: i32) -> [__m512i; 3] {
    // e - 1 = -shift - 1 = !shift.
    let rshift = _mm512_xor_si512(shift, _mm512_set1_epi32(-1));
    // 2^30 + 2^(30 + e) + off * 2^(31 + e) = 2^30 + ((1 + 2 off) * 2^31) << (e - 1): |(1 + 2
    // off) * 2^31| < 2^63, and the shifted value fits as the whole constant does (checked when
    // packing), so the 64-bit shift is exact.
    let base = _mm512_set1_epi64((1 + 2 * i64::from(out_offset)) << 31);
    let half = _mm512_set1_epi64(1 << 30);
    // Each 64-bit lane's shift count: the even channel's e - 1 (low half), the odd one's (high).
    let r_even = _mm512_and_si512(rshift, _mm512_set1_epi64(0xFFFF_FFFF));
    let r_odd = _mm512_srli_epi64::<32>(rshift);
    let add = |r: __m512i| _mm512_add_epi64(half, _mm512_sllv_epi64(base, r));
    [add(r_even), add(r_odd), rshift]
}

/// The fused form's constants ([`derive_fused_16`]) of every 16-channel block of `rq`, block
/// `b` at words `48 b..48 b + 48` of `cache` (`add_even`, `add_odd`, `rshift`): derived once per
/// GEMM or depthwise call and loaded by each tile or pixel ([`Rq16::load_cached`]).
pub(crate) fn fused_cache(rq: &Requant, cache: &mut [i32]) {
    assert!(rq.fused && available(Isa::Avx512Vnni));
    // SAFETY: AVX-512 F/BW/VL are available (asserted).
    unsafe { fused_cache_avx512(rq, cache) }
}

#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn fused_cache_avx512(rq: &Requant, cache: &mut [i32]) {
    assert!(cache.len() == rq.shift.len() / 16 * FUSED_CACHE_WORDS);
    for (b, words) in cache.chunks_exact_mut(FUSED_CACHE_WORDS).enumerate() {
        fused_cache_block(rq, 16 * b, words);
    }
}

/// [`derive_fused_16`] of channels `c..c + 16` into `words` (48).
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn fused_cache_block(rq: &Requant, c: usize, words: &mut [i32]) {
    assert!(c + 16 <= rq.shift.len() && words.len() == FUSED_CACHE_WORDS);
    // SAFETY: shifts c..c + 16 (asserted).
    let shift = unsafe {
        _mm512_cvtepi8_epi32(_mm_loadu_si128(rq.shift.as_ptr().add(c) as *const __m128i))
    };
    for (i, v) in derive_fused_16(shift, rq.out_offset)
        .into_iter()
        .enumerate()
    {
        // SAFETY: words 16 i..16 i + 16 of the 48 (asserted).
        unsafe { _mm512_storeu_si512(words.as_mut_ptr().add(16 * i) as *mut __m512i, v) };
    }
}

/// Two requantized 8-lane vectors (channels 0-7, 8-15) narrowed to 16 bytes in order.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn narrow_16(v0: __m256i, v1: __m256i) -> __m128i {
    let p = _mm256_packs_epi32(v0, v1); // 0-3, 8-11 | 4-7, 12-15
    let p = _mm256_permute4x64_epi64(p, 0b11_01_10_00); // 0-3, 4-7 | 8-11, 12-15
    _mm_packs_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1))
}

/// Stores the first `out.len() <= 16` bytes of `v`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn store_16(v: __m128i, out: &mut [i8]) {
    if out.len() >= 16 {
        // SAFETY: 16 bytes fit.
        unsafe { _mm_storeu_si128(out.as_mut_ptr() as *mut __m128i, v) };
    } else {
        let mut tmp = [0i8; 16];
        // SAFETY: tmp has 16 bytes.
        unsafe { _mm_storeu_si128(tmp.as_mut_ptr() as *mut __m128i, v) };
        out.copy_from_slice(&tmp[..out.len()]);
    }
}

/// Requantizes `cn <= 32` channels starting at `c0` of each of `rows` (double rounding;
/// AVX-512 also single rounding), row `r` to `out[r * stride..][..cn]`. The parameters are
/// loaded (and derived) once per column of the tile, not per row.
pub(crate) fn requant_tile(
    isa: Isa,
    rq: &Requant,
    c0: usize,
    rows: &[[i32; 32]],
    cn: usize,
    out: &mut [i8],
    stride: usize,
) {
    assert!(cn <= 32 && (rows.is_empty() || out.len() >= (rows.len() - 1) * stride + cn));
    if isa == Isa::Avx512Vnni {
        // SAFETY: Avx512Vnni is only chosen when the CPU has AVX-512 F/BW/VL (`available`).
        return unsafe { requant_tile_avx512(rq, c0, rows, cn, out, stride) };
    }
    // SAFETY: only called with packed weights, which exist only when AVX2 is available
    // (module invariant).
    unsafe { requant_tile_avx2(rq, c0, rows, cn, out, stride) }
}

/// The requantization parameters of 16 channels in registers ([`Rq8`] on 16 lanes: the
/// same operations, so the same numbers), loaded once for every row of a tile.
///
/// With [`Requant::fused`] (every channel shifts right by `e >= 1`) the two roundings and
/// the output offset are one 64-bit rounding shift per lane instead, with `p = x * m`:
///
/// ```text
/// RoundingDivideByPOT(SRDHM(x, m), e) + off
///     = (p + 2^30 + 2^(30 + e) + off * 2^(31 + e) - [p < 0] * 2^31) >> (31 + e)
/// ```
///
/// Why it is exact: with `hm = (p + 2^30) >> 31` (see [`Rq8`]), `RoundingDivideByPOT(hm,
/// e) = (hm + 2^(e-1) - [hm < 0]) >> e` for `e >= 1`, and `(floor(p' / 2^31) + c) >> e = (p' +
/// c * 2^31) >> (31 + e)` for integer `c`. `[hm < 0]` differs from `[p < 0]` only for `-2^30 <=
/// p < 0`, where both give 0. `|p| < 2^62` and `|constant| < 2^62` (checked when packing), so
/// nothing overflows, and the result (at most `2^30 + 1` before the offset) is the exact
/// `sat_add(q, off)`.
struct Rq16 {
    /// Single rounding (`Requant::single_rounding`): the 64-bit rounding constants and shifts
    /// of the even and the odd lanes.
    single: Option<[__m512i; 4]>,
    bias: __m512i,
    left: __m512i,
    any_left: bool,
    mult: __m512i,
    mask: __m512i,
    thr: __m512i,
    right: __m512i,
    lo: __m512i,
    hi: __m512i,
    off: __m512i,
    fused: bool,
    clamp: bool,
    /// The activation range (the fused form clamps after the offset).
    act_min: __m512i,
    act_max: __m512i,
    /// The odd channels' multipliers in the low halves of the 64-bit lanes.
    mult_odd: __m512i,
    add_even: __m512i,
    add_odd: __m512i,
    /// `e - 1` per channel.
    rshift: __m512i,
}

impl Rq16 {
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    fn load(rq: &Requant, c: usize) -> Rq16 {
        if !rq.fused {
            return Self::load_cached(rq, &[], c);
        }
        // The block's fused constants through a one-block cache (the same loads as from the
        // whole cache, so one code path).
        let mut block = [0i32; FUSED_CACHE_WORDS];
        fused_cache_block(rq, c, &mut block);
        Self::load_at(rq, &block, 0, c)
    }

    /// [`Self::load`] taking the fused form's constants from `cache` ([`fused_cache`] of the
    /// whole `rq`; unused without the fused form).
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    fn load_cached(rq: &Requant, cache: &[i32], c: usize) -> Rq16 {
        Self::load_at(rq, cache, c / 16 * FUSED_CACHE_WORDS, c)
    }

    /// The parameters of channels `c..c + 16`, with the fused form's constants at word `at` of
    /// `cache`.
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    fn load_at(rq: &Requant, cache: &[i32], at: usize, c: usize) -> Rq16 {
        assert!(c + 16 <= rq.bias.len());
        // SAFETY: the loads read rq.bias, rq.mult (16 i32) and rq.shift (16 i8) from c, in
        // bounds (asserted; all arrays have the same length).
        let ld = |v: &[i32]| unsafe { _mm512_loadu_si512(v.as_ptr().add(c) as *const __m512i) };
        // SAFETY: as above.
        let shift = unsafe {
            _mm512_cvtepi8_epi32(_mm_loadu_si128(rq.shift.as_ptr().add(c) as *const __m128i))
        };
        // Only what the chosen form uses: the fused form's constants come derived already
        // (the depthwise kernels load parameters per pixel).
        let fused = rq.fused;
        let z = _mm512_setzero_si512();
        let ([add_even, add_odd, rshift], [left, right, mask, thr]) = if fused {
            // The fused form's blocks start at multiples of 16 channels.
            assert!(c.is_multiple_of(16) && at + FUSED_CACHE_WORDS <= cache.len());
            // SAFETY: words at..at + 48 of the cache (asserted).
            let ld = |i: usize| unsafe {
                _mm512_loadu_si512(cache.as_ptr().add(at + 16 * i) as *const __m512i)
            };
            ([ld(0), ld(1), ld(2)], [z; 4])
        } else {
            ([z; 3], derive_16(shift, rq.any_left))
        };
        let off = rq.out_offset;
        let single = rq.single_rounding.then(|| {
            // total = clamp(31 - shift, 1, 62): the rounding shift of the 64-bit product.
            let total = _mm512_sub_epi32(_mm512_set1_epi32(31), shift);
            let total = _mm512_min_epi32(
                _mm512_max_epi32(total, _mm512_set1_epi32(1)),
                _mm512_set1_epi32(62),
            );
            let even = _mm512_and_si512(total, _mm512_set1_epi64(0xFFFF_FFFF));
            let odd = _mm512_srli_epi64::<32>(total);
            let one = _mm512_set1_epi64(1);
            let round = |t: __m512i| _mm512_sllv_epi64(one, _mm512_sub_epi64(t, one));
            [round(even), even, round(odd), odd]
        });
        let mult = ld(&rq.mult);
        Rq16 {
            single,
            bias: ld(&rq.bias),
            left,
            any_left: rq.any_left,
            mult,
            mask,
            thr,
            right,
            lo: _mm512_set1_epi32(rq.act_min.saturating_sub(off)),
            hi: _mm512_set1_epi32(rq.act_max.saturating_sub(off)),
            off: _mm512_set1_epi32(off),
            fused,
            clamp: rq.clamp,
            act_min: _mm512_set1_epi32(rq.act_min),
            act_max: _mm512_set1_epi32(rq.act_max),
            // (A shuffle, not a shift: port 0 is the one vpdpbusd needs.)
            mult_odd: _mm512_shuffle_epi32::<0xF5>(mult),
            add_even,
            add_odd,
            rshift,
        }
    }

    /// Requantized accumulators, narrowed to 16 bytes (in range already, so the saturating
    /// narrowing is a plain one).
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    fn apply(&self, acc: __m512i) -> __m128i {
        self.apply_biased(_mm512_add_epi32(acc, self.bias))
    }

    /// [`Self::apply`] of accumulators that started from the bias (`x = acc + bias`).
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    fn apply_biased(&self, x: __m512i) -> __m128i {
        _mm512_cvtsepi32_epi8(self.apply_i32(x))
    }

    /// The requantized values of `x = acc + bias` as 32-bit lanes, whose saturation to int8
    /// (`vpmovsdb`, or `vpackssdw` then `vpacksswb`) is the output.
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    fn apply_i32(&self, x: __m512i) -> __m512i {
        if self.fused {
            let zero = _mm512_setzero_si512();
            let neg = _mm512_set1_epi64(-(1 << 31));
            let p = _mm512_mul_epi32(x, self.mult);
            let t = _mm512_add_epi64(p, self.add_even);
            let even = _mm512_mask_add_epi64(t, _mm512_cmplt_epi64_mask(p, zero), t, neg);
            // The odd lanes to the low halves with a shuffle (port 5) rather than a shift
            // (port 0, which vpdpbusd and the multiplies need).
            let p = _mm512_mul_epi32(_mm512_shuffle_epi32::<0xF5>(x), self.mult_odd);
            let t = _mm512_add_epi64(p, self.add_odd);
            let odd = _mm512_mask_add_epi64(t, _mm512_cmplt_epi64_mask(p, zero), t, neg);
            // `t >> (31 + e) = (t >> 32) >> (e - 1)`: the high halves of the sums (which fit
            // in 32 bits as |t| < 2^63), even lanes' moved down, shifted as 32-bit lanes.
            let v = _mm512_mask_shuffle_epi32::<0xF5>(odd, 0x5555, even);
            let v = _mm512_srav_epi32(v, self.rshift);
            // With the offset added: clamp to the activation range (the saturating narrowing
            // clamps to int8's).
            return if self.clamp {
                _mm512_min_epi32(_mm512_max_epi32(v, self.act_min), self.act_max)
            } else {
                v
            };
        }
        let q = if let Some([round_even, total_even, round_odd, total_odd]) = self.single {
            // `multiply_by_quantized_multiplier_single_rounding`: (x m + 2^(total-1)) >> total
            // in 64 bits, saturated to i32; even lanes, then odd lanes moved down.
            let lim = |v: __m512i| {
                let v = _mm512_max_epi64(v, _mm512_set1_epi64(i64::from(i32::MIN)));
                _mm512_min_epi64(v, _mm512_set1_epi64(i64::from(i32::MAX)))
            };
            let even = _mm512_mul_epi32(x, self.mult);
            let even = lim(_mm512_srav_epi64(
                _mm512_add_epi64(even, round_even),
                total_even,
            ));
            let odd = _mm512_mul_epi32(_mm512_shuffle_epi32::<0xF5>(x), self.mult_odd);
            let odd = lim(_mm512_srav_epi64(
                _mm512_add_epi64(odd, round_odd),
                total_odd,
            ));
            // Each 64-bit lane holds its i32 in the low half: odd ones go to the high half.
            _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64::<32>(odd))
        } else {
            // Most layers' multipliers are below one: no left shift anywhere.
            let x = if self.any_left {
                _mm512_sllv_epi32(x, self.left)
            } else {
                x
            };
            srdhm_rdbpot_16(x, self.mult, self.mask, self.thr, self.right)
        };
        let q = _mm512_min_epi32(_mm512_max_epi32(q, self.lo), self.hi);
        _mm512_add_epi32(q, self.off)
    }
}

#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn requant_tile_avx512(
    rq: &Requant,
    c0: usize,
    rows: &[[i32; 32]],
    cn: usize,
    out: &mut [i8],
    stride: usize,
) {
    let mut j = 0;
    while j < cn {
        let p = Rq16::load(rq, c0 + j);
        let end = (j + 16).min(cn);
        for (r, acc) in rows.iter().enumerate() {
            // SAFETY: j + 16 <= 32 lanes of acc.
            let a = unsafe { _mm512_loadu_si512(acc.as_ptr().add(j) as *const __m512i) };
            store_16(p.apply(a), &mut out[r * stride + j..r * stride + end]);
        }
        j += 16;
    }
}

#[target_feature(enable = "avx2,fma")]
fn requant_tile_avx2(
    rq: &Requant,
    c0: usize,
    rows: &[[i32; 32]],
    cn: usize,
    out: &mut [i8],
    stride: usize,
) {
    let mut j = 0;
    while j < cn {
        // The per-channel arrays are padded to whole 16-channel tiles (Rq8::load asserts).
        let (p0, p1) = (Rq8::load(rq, c0 + j), Rq8::load(rq, c0 + j + 8));
        let end = (j + 16).min(cn);
        for (r, acc) in rows.iter().enumerate() {
            // SAFETY: j + 16 <= 32 lanes of acc.
            let (a0, a1) = unsafe {
                (
                    _mm256_loadu_si256(acc.as_ptr().add(j) as *const __m256i),
                    _mm256_loadu_si256(acc.as_ptr().add(j + 8) as *const __m256i),
                )
            };
            let v = narrow_16(p0.apply(a0), p1.apply(a1));
            store_16(v, &mut out[r * stride + j..r * stride + end]);
        }
        j += 16;
    }
}

// ------------------------------------------------------------------------ int8 ADD/SUB/MUL

/// `out[i] = a[i] ± b[i]` (or `*`) for an int8 ADD/SUB (MUL), bit-exact with the scalar kernel
/// (`BinaryI8::eval_i32`, of the tables for ADD/SUB). MUL multiplies the offset inputs in 32
/// bits; ADD/SUB compute each input's table entry, `MBQM((x + off)
/// << 20, mult, shift)`, its high multiply in 32-bit products (`ArithI8::split1`) and its
/// rounding shift as in [`rdbpot_8`] (the parameters of [`ArithI8::new`] keep every intermediate
/// inside i32, as in the scalar kernel), then the sum goes through the output stage with the
/// exact vector `MultiplyByQuantizedMultiplier` of [`srdhm_rdbpot_8`], as in [`Rq8`].
pub(crate) fn arith_i8(p: &ArithI8, a: Run<'_, i8>, b: Run<'_, i8>, out: &mut [i8]) {
    let n = out.len();
    let (Some(a), Some(b)) = (Operand::new(a, n), Operand::new(b, n)) else {
        return;
    };
    if p.isa == Isa::Avx512Vnni {
        // SAFETY: Avx512Vnni is only chosen when the CPU has AVX-512 F/BW/VL (`available`).
        unsafe { arith_i8_avx512(p, &a, &b, out) }
    } else {
        // SAFETY: ArithI8 exists only for an available x86 ISA (`has_elementwise`), all of
        // which include AVX2 and FMA.
        unsafe { arith_i8_avx2(p, &a, &b, out) }
    }
}

/// An int8 operand of [`arith_i8`]: `n` values, or one value repeated (as sixteen copies).
enum Operand<'a> {
    Slice(&'a [i8]),
    Repeat([i8; 16]),
}

impl Operand<'_> {
    /// `None` for a slice shorter than `n`.
    fn new(r: Run<'_, i8>, n: usize) -> Option<Operand<'_>> {
        Some(match r {
            Run::Slice(s) => Operand::Slice(s.get(..n)?),
            Run::Repeat(v) => Operand::Repeat([v; 16]),
        })
    }

    /// Sixteen values from `i` (`i + 16 <= n`).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn load(&self, i: usize) -> __m128i {
        match self {
            Operand::Slice(s) => {
                let s = &s[i..i + 16];
                // SAFETY: s has 16 bytes.
                unsafe { _mm_loadu_si128(s.as_ptr() as *const __m128i) }
            }
            // SAFETY: v has 16 bytes.
            Operand::Repeat(v) => unsafe { _mm_loadu_si128(v.as_ptr() as *const __m128i) },
        }
    }

    /// The values from `i` to `n` (fewer than sixteen), zeros after.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn load_tail(&self, i: usize) -> __m128i {
        match self {
            Operand::Slice(s) => load_tail_16(&s[i..]),
            Operand::Repeat(v) => load_tail_16(v),
        }
    }
}

/// The parameters of one [`Mbqm`] stage in registers: multiplier, mask, threshold, right shift.
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn stage_16(m: &Mbqm) -> [__m512i; 4] {
    let set = _mm512_set1_epi32;
    [set(m.mult), set(m.mask), set(m.thr), set(m.right)]
}

/// The parameters of [`add_sub_16`] in registers.
struct Arith16 {
    op: ArithOp,
    off1: __m512i,
    off2: __m512i,
    split1: [__m512i; 2],
    split2: [__m512i; 2],
    in1: [__m512i; 4],
    in2: [__m512i; 4],
    out_left: __m128i,
    out: [__m512i; 4],
    lo: __m512i,
    hi: __m512i,
    off: __m512i,
}

impl Arith16 {
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    fn new(p: &ArithI8) -> Arith16 {
        let set = _mm512_set1_epi32;
        Arith16 {
            op: p.op,
            off1: set(p.off1),
            off2: set(p.off2),
            split1: p.split1.map(|v| set(v)),
            split2: p.split2.map(|v| set(v)),
            in1: stage_16(&p.in1),
            in2: stage_16(&p.in2),
            out_left: _mm_cvtsi32_si128(p.out.left),
            out: stage_16(&p.out),
            // clamp(sat_add(v, off), lo, hi) = clamp(v, lo - off, hi - off) + off (`Rq8`).
            lo: set(p.act_min - p.out_offset),
            hi: set(p.act_max - p.out_offset),
            off: set(p.out_offset),
        }
    }

    /// Sixteen outputs of the sixteen int8 values in `x` and in `y`.
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    fn apply(&self, x: __m128i, y: __m128i) -> __m128i {
        // SRDHM((x + off) << 20, m) = (x + off) * (m >> 11) + ((x + off) * (m & 2047) + 2^10)
        // >> 11 (see `ArithI8::split`); the low product by `vpmaddwd` (x + off fits in the low
        // 16 bits of the lane, the high half of the constant is zero).
        let round = _mm512_set1_epi32(1 << 10);
        let rescale = |v: __m128i, off: __m512i, hl: &[__m512i; 2], m: &[__m512i; 4]| {
            let v = _mm512_add_epi32(_mm512_cvtepi8_epi32(v), off);
            let lo = _mm512_add_epi32(_mm512_madd_epi16(v, hl[1]), round);
            let hm = _mm512_add_epi32(_mm512_mullo_epi32(v, hl[0]), _mm512_srai_epi32::<11>(lo));
            rdbpot_16(hm, m[1], m[2], m[3])
        };
        let raw = if self.op == ArithOp::Mul {
            let vx = _mm512_add_epi32(_mm512_cvtepi8_epi32(x), self.off1);
            let vy = _mm512_add_epi32(_mm512_cvtepi8_epi32(y), self.off2);
            _mm512_mullo_epi32(vx, vy)
        } else {
            let s1 = rescale(x, self.off1, &self.split1, &self.in1);
            let s2 = rescale(y, self.off2, &self.split2, &self.in2);
            if self.op == ArithOp::Sub {
                _mm512_sub_epi32(s1, s2)
            } else {
                _mm512_add_epi32(s1, s2)
            }
        };
        let o = &self.out;
        let q = srdhm_rdbpot_16(_mm512_sll_epi32(raw, self.out_left), o[0], o[1], o[2], o[3]);
        let q = _mm512_min_epi32(_mm512_max_epi32(q, self.lo), self.hi);
        _mm512_cvtsepi32_epi8(_mm512_add_epi32(q, self.off))
    }
}

#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn arith_i8_avx512(p: &ArithI8, a: &Operand<'_>, b: &Operand<'_>, out: &mut [i8]) {
    let k = Arith16::new(p);
    let n = out.len();
    let mut i = 0;
    while i + 16 <= n {
        let v = k.apply(a.load(i), b.load(i));
        let o = &mut out[i..i + 16];
        // SAFETY: o has 16 bytes.
        unsafe { _mm_storeu_si128(o.as_mut_ptr() as *mut __m128i, v) };
        i += 16;
    }
    if i < n {
        store_16(k.apply(a.load_tail(i), b.load_tail(i)), &mut out[i..]);
    }
}

/// The first `v.len() <= 16` bytes of `v`, zeros after.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn load_tail_16(v: &[i8]) -> __m128i {
    let mut tmp = [0i8; 16];
    let m = v.len().min(16);
    tmp[..m].copy_from_slice(&v[..m]);
    // SAFETY: tmp has 16 bytes.
    unsafe { _mm_loadu_si128(tmp.as_ptr() as *const __m128i) }
}

/// [`Arith16`] on eight lanes.
struct Arith8 {
    op: ArithOp,
    off1: __m256i,
    off2: __m256i,
    split1: [__m256i; 2],
    split2: [__m256i; 2],
    in1: [__m256i; 4],
    in2: [__m256i; 4],
    out_left: __m128i,
    out: [__m256i; 4],
    lo: __m256i,
    hi: __m256i,
    off: __m256i,
}

impl Arith8 {
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn new(p: &ArithI8) -> Arith8 {
        let set = _mm256_set1_epi32;
        let stage = |m: &Mbqm| [set(m.mult), set(m.mask), set(m.thr), set(m.right)];
        Arith8 {
            op: p.op,
            off1: set(p.off1),
            off2: set(p.off2),
            split1: p.split1.map(|v| set(v)),
            split2: p.split2.map(|v| set(v)),
            in1: stage(&p.in1),
            in2: stage(&p.in2),
            out_left: _mm_cvtsi32_si128(p.out.left),
            out: stage(&p.out),
            lo: set(p.act_min - p.out_offset),
            hi: set(p.act_max - p.out_offset),
            off: set(p.out_offset),
        }
    }

    /// Eight outputs (as i32, in the int8 range) of the low eight int8 values of `x` and `y`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn apply(&self, x: __m128i, y: __m128i) -> __m256i {
        let round = _mm256_set1_epi32(1 << 10);
        let rescale = |v: __m128i, off: __m256i, hl: &[__m256i; 2], m: &[__m256i; 4]| {
            let v = _mm256_add_epi32(_mm256_cvtepi8_epi32(v), off);
            let lo = _mm256_add_epi32(_mm256_madd_epi16(v, hl[1]), round);
            let hm = _mm256_add_epi32(_mm256_mullo_epi32(v, hl[0]), _mm256_srai_epi32::<11>(lo));
            rdbpot_8(hm, m[1], m[2], m[3])
        };
        let raw = if self.op == ArithOp::Mul {
            let vx = _mm256_add_epi32(_mm256_cvtepi8_epi32(x), self.off1);
            let vy = _mm256_add_epi32(_mm256_cvtepi8_epi32(y), self.off2);
            _mm256_mullo_epi32(vx, vy)
        } else {
            let s1 = rescale(x, self.off1, &self.split1, &self.in1);
            let s2 = rescale(y, self.off2, &self.split2, &self.in2);
            if self.op == ArithOp::Sub {
                _mm256_sub_epi32(s1, s2)
            } else {
                _mm256_add_epi32(s1, s2)
            }
        };
        let o = &self.out;
        let q = srdhm_rdbpot_8(_mm256_sll_epi32(raw, self.out_left), o[0], o[1], o[2], o[3]);
        let q = _mm256_min_epi32(_mm256_max_epi32(q, self.lo), self.hi);
        _mm256_add_epi32(q, self.off)
    }

    /// Sixteen outputs of the sixteen int8 values in `x` and in `y`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn apply_16(&self, x: __m128i, y: __m128i) -> __m128i {
        let lo = self.apply(x, y);
        let hi = self.apply(_mm_unpackhi_epi64(x, x), _mm_unpackhi_epi64(y, y));
        narrow_16(lo, hi)
    }
}

#[target_feature(enable = "avx2,fma")]
fn arith_i8_avx2(p: &ArithI8, a: &Operand<'_>, b: &Operand<'_>, out: &mut [i8]) {
    let k = Arith8::new(p);
    let n = out.len();
    let mut i = 0;
    while i + 16 <= n {
        let v = k.apply_16(a.load(i), b.load(i));
        let o = &mut out[i..i + 16];
        // SAFETY: o has 16 bytes.
        unsafe { _mm_storeu_si128(o.as_mut_ptr() as *mut __m128i, v) };
        i += 16;
    }
    if i < n {
        store_16(k.apply_16(a.load_tail(i), b.load_tail(i)), &mut out[i..]);
    }
}

// ------------------------------------------------------------------------------ float unary

/// Float unary operators: [`crate::kernels::elementwise::unary_loops`] compiled for AVX-512 or AVX2, which the compiler
/// vectorizes 16 or 8 lanes wide. The same arithmetic in the same order (Rust never contracts
/// to FMA), so the results are the portable loop's, bit for bit.
#[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
pub(crate) fn unary_f32(
    isa: Isa,
    op: crate::kernels::elementwise::UnaryOp,
    input: &[f32],
    out: &mut [f32],
) {
    if isa == Isa::Avx512Vnni {
        // SAFETY: Avx512Vnni is only chosen when the CPU has AVX-512 F/BW/VL (`available`).
        unsafe { unary_f32_avx512(op, input, out) }
    } else {
        // SAFETY: only called for an available x86 ISA (`has_elementwise`), all of which
        // include AVX2 and FMA.
        unsafe { unary_f32_avx2(op, input, out) }
    }
}

/// `out[j * rows + i] = input[i * cols + j]` for `rows` 2 to 4 (`cols = input.len() / rows`):
/// the transpose of a `[rows, cols]` matrix with few rows.
#[cfg(feature = "ops-shape")]
pub(crate) fn interleave_u32(input: &[u32], rows: usize, out: &mut [u32]) {
    assert!(input.len() == out.len() && input.len().is_multiple_of(rows));
    let cols = input.len() / rows;
    match rows {
        // SAFETY (all three): only called for Isa::Avx512Vnni, chosen when the CPU has
        // AVX-512 F (`has_transpose_few_rows_32`).
        2 => unsafe { interleave_u32_avx512::<2>(input, cols, out) },
        // SAFETY: as above.
        3 => unsafe { interleave_u32_avx512::<3>(input, cols, out) },
        // SAFETY: as above.
        4 => unsafe { interleave_u32_avx512::<4>(input, cols, out) },
        _ => unreachable!(),
    }
}

/// [`interleave_u32`] of `R` rows: per 16 columns, `R` output vectors, each lane taking its
/// column of its row by one masked permute per row.
#[cfg(feature = "ops-shape")]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
fn interleave_u32_avx512<const R: usize>(input: &[u32], cols: usize, out: &mut [u32]) {
    assert!(input.len() == R * cols && out.len() == R * cols);
    // Lane l of output vector v is output position 16v + l of the step: column (16v + l) / R
    // of row (16v + l) % R.
    let mut idx = [_mm512_setzero_si512(); R];
    let mut masks = [[0 as __mmask16; R]; R];
    for (v, (idx, masks)) in idx.iter_mut().zip(&mut masks).enumerate() {
        let mut cols_of = [0i32; 16];
        for (l, col) in cols_of.iter_mut().enumerate() {
            let p = 16 * v + l;
            *col = (p / R) as i32;
            masks[p % R] |= 1 << l;
        }
        // SAFETY: 16 i32.
        *idx = unsafe { _mm512_loadu_si512(cols_of.as_ptr() as *const __m512i) };
    }
    let (src, dst) = (input.as_ptr(), out.as_mut_ptr());
    let mut j = 0;
    while j + 16 <= cols {
        let mut rows = [_mm512_setzero_si512(); R];
        for (i, r) in rows.iter_mut().enumerate() {
            // SAFETY: columns j..j + 16 <= cols of row i.
            *r = unsafe { _mm512_loadu_si512(src.add(i * cols + j) as *const __m512i) };
        }
        for v in 0..R {
            let mut o = _mm512_setzero_si512();
            for (i, &r) in rows.iter().enumerate() {
                o = _mm512_mask_permutexvar_epi32(o, masks[v][i], idx[v], r);
            }
            // SAFETY: output positions R * j + 16v.. + 16 <= R * (j + 16) <= R * cols.
            unsafe { _mm512_storeu_si512(dst.add(R * j + 16 * v) as *mut __m512i, o) };
        }
        j += 16;
    }
    for j in j..cols {
        for i in 0..R {
            out[j * R + i] = input[i * cols + j];
        }
    }
}

#[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn unary_f32_avx512(op: crate::kernels::elementwise::UnaryOp, input: &[f32], out: &mut [f32]) {
    crate::kernels::elementwise::unary_loops(op, input, out)
}

#[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
#[target_feature(enable = "avx2,fma")]
fn unary_f32_avx2(op: crate::kernels::elementwise::UnaryOp, input: &[f32], out: &mut [f32]) {
    crate::kernels::elementwise::unary_loops(op, input, out)
}

// ------------------------------------------------------------------------------ QUANTIZE

/// QUANTIZE of float32 `input` to `to` (`out`: `input.len()` values, little-endian), bit-exact
/// with the scalar `quantize_f32`: the same IEEE division `x / scale`, the same
/// `round_half_away` (truncate, add or subtract one when the exact remainder is at least a half;
/// `|q| >= 2^23` and NaN unchanged), the same float addition of the zero point, NaN to 0, the
/// clamp to the type's range in float, then an exact conversion.
pub(crate) fn quantize_f32(
    isa: Isa,
    input: &[f32],
    scale: f32,
    zero_point: i32,
    to: QuantizeTo,
    out: &mut [u8],
) {
    let (lo, hi) = match to {
        QuantizeTo::I8 => (-128.0, 127.0),
        QuantizeTo::U8 => (0.0, 255.0),
        QuantizeTo::I16 => (-32768.0, 32767.0),
    };
    let k = QuantParams {
        scale,
        z: zero_point as f32,
        lo,
        hi,
    };
    if isa == Isa::Avx512Vnni {
        // SAFETY: Avx512Vnni is only chosen when the CPU has AVX-512 F/BW/VL (`available`).
        unsafe { quantize_f32_avx512(&k, input, to, out) }
    } else {
        // SAFETY: only called for an available x86 ISA (`has_elementwise`), all of which
        // include AVX2 and FMA.
        unsafe { quantize_f32_avx2(&k, input, to, out) }
    }
}

struct QuantParams {
    scale: f32,
    z: f32,
    lo: f32,
    hi: f32,
}

/// Sixteen quantized values (i32, in `[lo, hi]`) of sixteen floats.
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn quantize_16(k: &QuantParams, x: __m512) -> __m512i {
    let q = _mm512_div_ps(x, _mm512_set1_ps(k.scale));
    // round_half_away: NaN and |q| >= 2^23 are kept.
    let keep = _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(_mm512_abs_ps(q), _mm512_set1_ps(8_388_608.0));
    let t = _mm512_cvtepi32_ps(_mm512_cvttps_epi32(q));
    let d = _mm512_sub_ps(q, t);
    let one = _mm512_set1_ps(1.0);
    let up = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(d, _mm512_set1_ps(0.5));
    let down = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(d, _mm512_set1_ps(-0.5));
    let r = _mm512_mask_add_ps(t, up, t, one);
    let r = _mm512_mask_sub_ps(r, down, r, one);
    let r = _mm512_mask_mov_ps(r, keep, q);
    let r = _mm512_add_ps(r, _mm512_set1_ps(k.z));
    let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(r, r);
    let r = _mm512_min_ps(_mm512_max_ps(r, _mm512_set1_ps(k.lo)), _mm512_set1_ps(k.hi));
    let r = _mm512_mask_mov_ps(r, nan, _mm512_setzero_ps());
    _mm512_cvttps_epi32(r)
}

#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
fn quantize_f32_avx512(k: &QuantParams, input: &[f32], to: QuantizeTo, out: &mut [u8]) {
    let size = if to == QuantizeTo::I16 { 2 } else { 1 };
    let n = input.len();
    assert!(out.len() == n * size);
    // Sixteen values to 16 or 32 bytes at `o` (truncating, as `v as i8` etc.; the values are
    // in the type's range anyway).
    // SAFETY (callers): `o` has room for 16 values of the output type.
    let store = |v: __m512i, o: *mut u8| unsafe {
        match to {
            QuantizeTo::I8 | QuantizeTo::U8 => {
                _mm_storeu_si128(o as *mut __m128i, _mm512_cvtepi32_epi8(v))
            }
            QuantizeTo::I16 => _mm256_storeu_si256(o as *mut __m256i, _mm512_cvtepi32_epi16(v)),
        }
    };
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: i + 16 <= n: sixteen floats of input, 16 * size bytes of out.
        unsafe {
            let x = _mm512_loadu_ps(input.as_ptr().add(i));
            store(quantize_16(k, x), out.as_mut_ptr().add(i * size));
        }
        i += 16;
    }
    if i < n {
        let mut x = [0f32; 16];
        x[..n - i].copy_from_slice(&input[i..]);
        let mut o = [0u8; 32];
        // SAFETY: x has sixteen floats, o 32 bytes.
        unsafe { store(quantize_16(k, _mm512_loadu_ps(x.as_ptr())), o.as_mut_ptr()) };
        out[i * size..].copy_from_slice(&o[..(n - i) * size]);
    }
}

/// [`quantize_16`] on eight lanes.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn quantize_8(k: &QuantParams, x: __m256) -> __m256i {
    let q = _mm256_div_ps(x, _mm256_set1_ps(k.scale));
    let abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0), q);
    let keep = _mm256_cmp_ps::<_CMP_NLT_UQ>(abs, _mm256_set1_ps(8_388_608.0));
    let t = _mm256_cvtepi32_ps(_mm256_cvttps_epi32(q));
    let d = _mm256_sub_ps(q, t);
    let one = _mm256_set1_ps(1.0);
    let up = _mm256_and_ps(_mm256_cmp_ps::<_CMP_GE_OQ>(d, _mm256_set1_ps(0.5)), one);
    let down = _mm256_and_ps(_mm256_cmp_ps::<_CMP_LE_OQ>(d, _mm256_set1_ps(-0.5)), one);
    // t + 1, t - 1 or t + 0 (the same sums as the scalar `t + 1.0`, `t - 1.0`, `t`; the
    // `up`/`down` lanes exclude each other).
    let r = _mm256_sub_ps(_mm256_add_ps(t, up), down);
    let r = _mm256_blendv_ps(r, q, keep);
    let r = _mm256_add_ps(r, _mm256_set1_ps(k.z));
    let nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(r, r);
    let r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(k.lo)), _mm256_set1_ps(k.hi));
    let r = _mm256_andnot_ps(nan, r);
    _mm256_cvttps_epi32(r)
}

#[target_feature(enable = "avx2,fma")]
fn quantize_f32_avx2(k: &QuantParams, input: &[f32], to: QuantizeTo, out: &mut [u8]) {
    let size = if to == QuantizeTo::I16 { 2 } else { 1 };
    let n = input.len();
    assert!(out.len() == n * size);
    // Sixteen values (two vectors in the type's range) to 16 or 32 bytes at `o`.
    // SAFETY (callers): `o` has room for 16 values of the output type.
    let store = |v0: __m256i, v1: __m256i, o: *mut u8| unsafe {
        match to {
            QuantizeTo::I8 => _mm_storeu_si128(o as *mut __m128i, narrow_16(v0, v1)),
            QuantizeTo::U8 => {
                let p = _mm256_permute4x64_epi64(_mm256_packs_epi32(v0, v1), 0b11_01_10_00);
                let v = _mm_packus_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
                _mm_storeu_si128(o as *mut __m128i, v)
            }
            QuantizeTo::I16 => {
                let p = _mm256_permute4x64_epi64(_mm256_packs_epi32(v0, v1), 0b11_01_10_00);
                _mm256_storeu_si256(o as *mut __m256i, p)
            }
        }
    };
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: i + 16 <= n: sixteen floats of input, 16 * size bytes of out.
        unsafe {
            let x0 = _mm256_loadu_ps(input.as_ptr().add(i));
            let x1 = _mm256_loadu_ps(input.as_ptr().add(i + 8));
            store(
                quantize_8(k, x0),
                quantize_8(k, x1),
                out.as_mut_ptr().add(i * size),
            );
        }
        i += 16;
    }
    if i < n {
        let mut x = [0f32; 16];
        x[..n - i].copy_from_slice(&input[i..]);
        let mut o = [0u8; 32];
        // SAFETY: x has sixteen floats, o 32 bytes.
        unsafe {
            let v0 = quantize_8(k, _mm256_loadu_ps(x.as_ptr()));
            let v1 = quantize_8(k, _mm256_loadu_ps(x.as_ptr().add(8)));
            store(v0, v1, o.as_mut_ptr());
        }
        out[i * size..].copy_from_slice(&o[..(n - i) * size]);
    }
}

// ------------------------------------------------------------------------ int8 depthwise

/// One output pixel of an int8 depthwise convolution: `taps[t]` is the input pixel of tap `t`
/// (`usize::MAX` for padding).
pub(crate) fn dw_i8_pixel(isa: Isa, dw: &DwI8, input: &[i8], taps: &[usize], out: &mut [i8]) {
    debug_assert!(isa != Isa::Portable && isa != Isa::Avx512Vnni);
    // SAFETY: DwI8 exists only when AVX2 is available (module invariant).
    unsafe { dw_i8_pixel_avx2(dw, input, taps, out) }
}

/// Output rows `oys` of an int8 depthwise convolution (AVX-512 layout, `DwI8::pack_avx512`)
/// into `out` (rows of `out_w * c`), from one batch `input` (`[in_h, in_w, c]`).
pub(crate) fn dw_i8_rows(
    dw: &DwI8,
    input: &[i8],
    dims: [usize; 5],
    geometry: [usize; 6],
    oys: Range<usize>,
    out: &mut [i8],
    scratch: &mut [i32],
) {
    assert!(dw.isa == Isa::Avx512Vnni && dims[2] * dims[3] == dw.taps);
    assert!(
        scratch.len() >= dw.scratch_i32(),
        "depthwise scratch too short"
    );
    let [in_h, in_w, k_h, k_w, out_w] = dims;
    let [stride_h, stride_w, dil_h, dil_w, pad_top, pad_left] = geometry;
    if let Some(dw3) = &dw.dw3 {
        if [k_h, k_w, dil_h, dil_w] == [3, 3, 1, 1] {
            // Its output stage's fused constants (the first words of `scratch`), then the ring.
            let (head, ring) = scratch.split_at_mut(super::fused_cache_scratch(dw.isa, &dw3.rq));
            let cache = match super::fused_cache_in(head, head.len()) {
                Some(cache) => {
                    fused_cache(&dw3.rq, cache);
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
    let cache = match super::fused_cache_in(scratch, super::fused_cache_scratch(dw.isa, &dw.rq)) {
        Some(cache) => {
            fused_cache(&dw.rq, cache);
            &*cache
        }
        None => &[],
    };
    // SAFETY: Avx512Vnni is only chosen when the CPU has AVX-512 F/BW/VL/VNNI (`available`).
    unsafe { dw_i8_rows_avx512(dw, input, dims, geometry, oys, out, cache) }
}

/// Bytes of the 3x3 kernel's ring: three interleaved input rows and a padding row of
/// [`DW3_STRIP`] units of 256 bytes.
const DW3_RING_BYTES: usize = 4 * DW3_STRIP * 256;

/// One call of the 3x3 kernel: output rows `oys` (`out_w` pixels of `c` channels) from one
/// batch `input` (`[in_h, in_w, c]`), with the fused constants of `dw3.rq` in `cache`.
struct Dw3Call<'a> {
    dw3: &'a Dw3,
    c: usize,
    /// The input zero point (padding reads it).
    zero_point: i8,
    input: &'a [i8],
    in_hw: [usize; 2],
    out_w: usize,
    stride: [usize; 2],
    /// Top and left.
    pad: [usize; 2],
    oys: Range<usize>,
    cache: &'a [i32],
}

/// A 3x3 int8 depthwise convolution without dilation ([`Dw3`]) into `out` (rows `k.oys` of
/// `out_w * c`), per 64-lane block ([`dw3x3_block`]). `ring` ([`DW3_RING_BYTES`], 64-byte
/// aligned) holds three interleaved input rows and a row of padding.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
fn dw3x3_i8_rows_avx512(k: &Dw3Call, out: &mut [i8], ring: &mut [i8]) {
    let (c, [in_h, in_w]) = (k.c, k.in_hw);
    let blocks = c.div_ceil(64);
    assert!(c > 0 && k.stride[0] > 0 && k.stride[1] > 0);
    assert!(k.input.len() >= in_h * in_w * c && out.len() >= k.oys.len() * k.out_w * c);
    assert!(k.dw3.w.len() == blocks * 768 && k.dw3.rq.bias.len() == blocks * 64);
    assert!(ring.len() == DW3_RING_BYTES && ring.as_ptr().align_offset(64) == 0);
    // The padding row: the zero point offset to unsigned.
    ring[3 * DW3_STRIP * 256..].fill(k.zero_point ^ i8::MIN);
    // Stride 1: one ring unit of four columns per lane group serves two output units (not for
    // narrow rows that leave the last unit part empty, where the dropped pixels cost more than
    // the interleaving saved).
    let share =
        |ppu: usize| k.stride[1] == 1 && (k.out_w.is_multiple_of(2 * ppu) || k.out_w >= 16 * ppu);
    // The output stage's form, a copy of the block each (without per-vector checks of it).
    let form = match k.dw3.stage {
        Some(_) if k.dw3.rq.clamp => DW3_U_CLAMP,
        Some(_) => DW3_U,
        None => DW3_RQ16,
    };
    for b in 0..blocks {
        let ppu = if b + 1 == blocks { k.dw3.tail_ppu } else { 1 };
        let (ring, share) = (ring.as_mut_ptr(), share(ppu));
        // SAFETY: this function's features; the asserts above are the blocks' requirements,
        // and the form is the stage's.
        unsafe {
            match form {
                DW3_U => dw3x3_block_of::<DW3_U>(k, b, out, ring, ppu, share),
                DW3_U_CLAMP => dw3x3_block_of::<DW3_U_CLAMP>(k, b, out, ring, ppu, share),
                _ => dw3x3_block_of::<DW3_RQ16>(k, b, out, ring, ppu, share),
            }
        }
    }
}

/// Output stage forms of [`dw3x3_block`]: [`Rq16`] (any stage), or [`RqU16`] (`Dw3::stage`)
/// without or with a clamp to the activation range.
const DW3_RQ16: u8 = 0;
const DW3_U: u8 = 1;
const DW3_U_CLAMP: u8 = 2;

/// [`dw3x3_block`] with the output stage of the form `FORM`.
///
/// # Safety
/// As [`dw3x3_block`]; `FORM` is that of `k.dw3` (see [`dw3x3_i8_rows_avx512`]).
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn dw3x3_block_of<const FORM: u8>(
    k: &Dw3Call,
    b: usize,
    out: &mut [i8],
    ring: *mut i8,
    ppu: usize,
    share: bool,
) {
    // The block's output stage, as concrete arrays (Options left the parameters as phis, whose
    // multiplies then compiled as 64-bit ones).
    let p0 = 64 * b;
    if FORM == DW3_RQ16 {
        let mut rq = [const { None::<Rq16> }; 4];
        for (j, r) in rq.iter_mut().enumerate() {
            *r = Some(Rq16::load_cached(&k.dw3.rq, k.cache, p0 + 16 * j));
        }
        let rq = rq.map(Option::unwrap);
        let start = core::array::from_fn(|j| rq[j].bias);
        // SAFETY: the caller's contract.
        return unsafe {
            dw3x3_block_ppu(k, b, out, ring, ppu, share, start, |j, acc| {
                rq[j].apply_i32(acc)
            })
        };
    }
    let st = k
        .dw3
        .stage
        .as_ref()
        .expect("the unsigned-product form without its stage");
    let mut rq = [const { None::<RqU16> }; 4];
    for (j, r) in rq.iter_mut().enumerate() {
        *r = Some(RqU16::load(st, &k.dw3.rq, p0 + 16 * j));
    }
    let rq = rq.map(Option::unwrap);
    let start = core::array::from_fn(|j| rq[j].bias);
    let clamp = FORM == DW3_U_CLAMP;
    // SAFETY: the caller's contract.
    unsafe {
        dw3x3_block_ppu(k, b, out, ring, ppu, share, start, |j, acc| {
            rq[j].apply(acc, clamp)
        })
    }
}

/// [`dw3x3_block`] for `ppu` pixels per unit (shared units with `share` and one).
///
/// # Safety
/// As [`dw3x3_block`].
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn dw3x3_block_ppu(
    k: &Dw3Call,
    b: usize,
    out: &mut [i8],
    ring: *mut i8,
    ppu: usize,
    share: bool,
    start: [__m512i; 4],
    rq: impl Fn(usize, __m512i) -> __m512i + Copy,
) {
    // SAFETY: the caller's contract.
    unsafe {
        match (ppu, share) {
            (1, true) => dw3x3_block::<1, true>(k, b, out, ring, start, rq),
            (1, false) => dw3x3_block::<1, false>(k, b, out, ring, start, rq),
            (2, true) => dw3x3_block::<2, true>(k, b, out, ring, start, rq),
            (2, false) => dw3x3_block::<2, false>(k, b, out, ring, start, rq),
            (_, true) => dw3x3_block::<4, true>(k, b, out, ring, start, rq),
            (_, false) => dw3x3_block::<4, false>(k, b, out, ring, start, rq),
        }
    }
}

/// 16 lanes of a [`Dw3Stage`] in registers (see there for why it is exact).
struct RqU16 {
    /// `bias + 2^31`, the accumulators' start.
    bias: __m512i,
    m2: __m512i,
    /// The odd lanes' `2 m` in the low halves of the 64-bit lanes.
    m2_odd: __m512i,
    add_even: __m512i,
    add_odd: __m512i,
    e: __m512i,
    act_min: __m512i,
    act_max: __m512i,
}

impl RqU16 {
    /// Positions `p..p + 16` of `st` (with the activation range of `rq`).
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    fn load(st: &Dw3Stage, rq: &Requant, p: usize) -> RqU16 {
        assert!(p + 16 <= st.bias.len() && p + 16 <= st.add.len());
        assert!(p + 16 <= st.m2.len() && p + 16 <= st.e.len());
        // SAFETY: 16 values from p of each array (asserted).
        let (bias, m2, e, a0, a1) = unsafe {
            let ld = |v: *const u8| _mm512_loadu_si512(v as *const __m512i);
            (
                ld(st.bias.as_ptr().add(p) as *const u8),
                ld(st.m2.as_ptr().add(p) as *const u8),
                ld(st.e.as_ptr().add(p) as *const u8),
                ld(st.add.as_ptr().add(p) as *const u8),
                ld(st.add.as_ptr().add(p + 8) as *const u8),
            )
        };
        let even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
        let odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
        RqU16 {
            bias,
            m2,
            m2_odd: _mm512_shuffle_epi32::<0xF5>(m2),
            add_even: _mm512_permutex2var_epi64(a0, even, a1),
            add_odd: _mm512_permutex2var_epi64(a0, odd, a1),
            e,
            act_min: _mm512_set1_epi32(rq.act_min),
            act_max: _mm512_set1_epi32(rq.act_max),
        }
    }

    /// The requantized values of `y = acc + bias + 2^31` as 32-bit lanes (offset added,
    /// clamped to the activation range with `clamp`, else to be saturated to int8).
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    fn apply(&self, y: __m512i, clamp: bool) -> __m512i {
        let even = _mm512_add_epi64(_mm512_mul_epu32(y, self.m2), self.add_even);
        // The odd lanes to the low halves by a shuffle (port 5), as in Rq16::apply_i32.
        let y_odd = _mm512_shuffle_epi32::<0xF5>(y);
        let odd = _mm512_add_epi64(_mm512_mul_epu32(y_odd, self.m2_odd), self.add_odd);
        // The high halves, the even lanes' moved down: (p + K) >> 31 - 1.
        let v = _mm512_mask_shuffle_epi32::<0xF5>(odd, 0x5555, even);
        // + 1 - [x < 0], then the second shift.
        let v = _mm512_srav_epi32(_mm512_add_epi32(v, _mm512_srli_epi32::<31>(y)), self.e);
        if clamp {
            _mm512_min_epi32(_mm512_max_epi32(v, self.act_min), self.act_max)
        } else {
            v
        }
    }
}

/// Block `b` (64 lanes: `PPU` output pixels of `64 / PPU` channels) of [`dw3x3_i8_rows_avx512`].
///
/// Per strip of [`DW3_STRIP`] units (`PPU` pixels side by side), each input row is interleaved
/// once into ring row `iy % 3`: for the pixel of lane `l` of unit `u`, the bytes `[in(x),
/// in(x + 1), in(x + 2), in(x + 2)]` (`x` its window's first column; offset to unsigned,
/// padding columns the zero point), by the unpacks of [`dw_quads_block`], so lanes are in the
/// layout's position order. Each interleaved row then serves every output row whose window
/// covers it: an output unit takes one load and `vpdpbusd` per kernel row and 16 lanes, the
/// requantization (parameters loaded once per block) and the packs back to lane order.
///
/// # Safety
/// The CPU has AVX-512 F/BW/VL/VNNI; the sizes asserted by [`dw3x3_i8_rows_avx512`] hold,
/// `b` is a block of `k.dw3` whose pixels' channels fit `64 / PPU` lanes (all blocks for
/// `PPU == 1`, the last for `k.dw3.tail_ppu`), `ring` is [`DW3_RING_BYTES`] writable and
/// 64-byte aligned bytes whose padding row is filled.
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn dw3x3_block<const PPU: usize, const SHARE: bool>(
    k: &Dw3Call,
    b: usize,
    out: &mut [i8],
    ring: *mut i8,
    start: [__m512i; 4],
    rq: impl Fn(usize, __m512i) -> __m512i,
) {
    let (c, [in_h, in_w], out_w) = (k.c, k.in_hw, k.out_w);
    let [stride_h, stride_w] = k.stride;
    let [pad_top, pad_left] = k.pad;
    // Channels per pixel in this block.
    let n = (c - 64 * b).min(64 / PPU);
    let mask: __mmask64 = if n == 64 { !0 } else { (1u64 << n) - 1 };
    let flip = _mm512_set1_epi8(i8::MIN);
    let zp = _mm512_set1_epi8(k.zero_point);
    // The block's `n` channels at column x of input row iy in the low 64 / PPU bytes (the
    // zero point outside the input; x may have wrapped below zero).
    let chunk = |iy: usize, x: usize| -> __m512i {
        if x >= in_w {
            return zp;
        }
        // SAFETY: pixel (iy, x) has c bytes (iy < in_h, x < in_w; input length asserted by
        // the caller); the mask keeps the load to channels 64 b..64 b + n.
        unsafe {
            let p = k.input.as_ptr().add((iy * in_w + x) * c + 64 * b);
            match PPU {
                1 => _mm512_maskz_loadu_epi8(mask, p),
                2 => _mm512_castsi256_si512(_mm256_maskz_loadu_epi8(mask as __mmask32, p)),
                _ => _mm512_castsi128_si512(_mm_maskz_loadu_epi8(mask as __mmask16, p)),
            }
        }
    };
    // The unit's pixels' columns base + step p + t of row iy (before the padding), offset to
    // unsigned.
    let taps = |iy: usize, base: usize, step: usize, t: usize| -> __m512i {
        let col = |p: usize| (base + step * p + t).wrapping_sub(pad_left);
        let v = match PPU {
            1 => chunk(iy, col(0)),
            2 => _mm512_inserti64x4::<1>(
                chunk(iy, col(0)),
                _mm512_castsi512_si256(chunk(iy, col(1))),
            ),
            _ => {
                let v = _mm512_inserti32x4::<1>(
                    chunk(iy, col(0)),
                    _mm512_castsi512_si128(chunk(iy, col(1))),
                );
                let v = _mm512_inserti32x4::<2>(v, _mm512_castsi512_si128(chunk(iy, col(2))));
                _mm512_inserti32x4::<3>(v, _mm512_castsi512_si128(chunk(iy, col(3))))
            }
        };
        _mm512_xor_si512(v, flip)
    };
    // The four vectors of one ring unit from taps a0..a3 (lane order as `dw_quads_block`).
    let store = |slot: usize, q: usize, [lo01, hi01, lo23, hi23]: [__m512i; 4]| {
        let v = [
            _mm512_unpacklo_epi16(lo01, lo23),
            _mm512_unpackhi_epi16(lo01, lo23),
            _mm512_unpacklo_epi16(hi01, hi23),
            _mm512_unpackhi_epi16(hi01, hi23),
        ];
        for (j, v) in v.into_iter().enumerate() {
            // SAFETY: unit q < DW3_STRIP of ring row slot < 3 (the caller's contract).
            unsafe {
                _mm512_store_si512(
                    ring.add((slot * DW3_STRIP + q) * 256 + 64 * j) as *mut __m512i,
                    v,
                )
            };
        }
    };
    // Interleaves input row iy, ring units q0..q0 + qn, into ring row slot.
    let interleave = |iy: usize, q0: usize, qn: usize, slot: usize| {
        if SHARE && PPU == 1 {
            // Four columns from 2 q - pad_left; the next unit's first two are this one's last
            // two, so their unpacks too.
            let x0 = 2 * q0;
            let (a0, a1) = (taps(iy, x0, 0, 0), taps(iy, x0, 0, 1));
            let mut pair01 = [_mm512_unpacklo_epi8(a0, a1), _mm512_unpackhi_epi8(a0, a1)];
            for q in 0..qn {
                let x = x0 + 2 * q + 2;
                let (a2, a3) = (taps(iy, x, 0, 0), taps(iy, x, 0, 1));
                let pair23 = [_mm512_unpacklo_epi8(a2, a3), _mm512_unpackhi_epi8(a2, a3)];
                store(slot, q, [pair01[0], pair01[1], pair23[0], pair23[1]]);
                pair01 = pair23;
            }
            return;
        }
        if SHARE {
            // Lane group p: four columns from 2 PPU q + 2 p - pad_left.
            for q in 0..qn {
                let base = 2 * PPU * (q0 + q);
                // (Calls rather than an array map, whose closure was not inlined.)
                let a = [
                    taps(iy, base, 2, 0),
                    taps(iy, base, 2, 1),
                    taps(iy, base, 2, 2),
                    taps(iy, base, 2, 3),
                ];
                let (lo01, hi01) = (
                    _mm512_unpacklo_epi8(a[0], a[1]),
                    _mm512_unpackhi_epi8(a[0], a[1]),
                );
                let (lo23, hi23) = (
                    _mm512_unpacklo_epi8(a[2], a[3]),
                    _mm512_unpackhi_epi8(a[2], a[3]),
                );
                store(slot, q, [lo01, hi01, lo23, hi23]);
            }
            return;
        }
        for q in 0..qn {
            let base = (q0 + q) * PPU * stride_w;
            let (a0, a1, a2) = (
                taps(iy, base, stride_w, 0),
                taps(iy, base, stride_w, 1),
                taps(iy, base, stride_w, 2),
            );
            let (lo01, hi01) = (_mm512_unpacklo_epi8(a0, a1), _mm512_unpackhi_epi8(a0, a1));
            let (lo2, hi2) = (_mm512_unpacklo_epi8(a2, a2), _mm512_unpackhi_epi8(a2, a2));
            store(slot, q, [lo01, hi01, lo2, hi2]);
        }
    };
    // SAFETY: block b's 768 weights (the caller's contract).
    let wp = unsafe { k.dw3.w.as_ptr().add(b * 768) };
    let w: [[__m512i; 4]; 3] = core::array::from_fn(|ky| {
        core::array::from_fn(|j| {
            // SAFETY: as above.
            unsafe { _mm512_loadu_si512(wp.add((ky * 4 + j) * 64) as *const __m512i) }
        })
    });
    // Shared units: the second pixel's window is bytes 1-3 of each lane.
    let mut w = [w; 2];
    if SHARE {
        for v in w[1].as_flattened_mut() {
            *v = _mm512_slli_epi32::<8>(*v);
        }
    }
    // Output units per ring unit; pixels per ring unit.
    let per = if SHARE { 2 } else { 1 };
    let ring_units = out_w.div_ceil(per * PPU);
    let mut q0 = 0;
    while q0 < ring_units {
        let qn = (ring_units - q0).min(DW3_STRIP);
        // Input row iy is in ring row iy % 3 once interleaved; rows below `next` are.
        let mut next = 0;
        for oy in k.oys.clone() {
            // Ring row 3 is the padding row.
            let mut slot = [3usize; 3];
            for (ky, s) in slot.iter_mut().enumerate() {
                let iy = (oy * stride_h + ky).wrapping_sub(pad_top);
                if iy >= in_h {
                    continue;
                }
                if oy == k.oys.start || iy >= next {
                    interleave(iy, q0, qn, iy % 3);
                    next = iy + 1;
                }
                *s = iy % 3;
            }
            let row = (oy - k.oys.start) * out_w;
            for q in 0..qn {
                let mut acc = [start; 2];
                for (ky, &s) in slot.iter().enumerate() {
                    // SAFETY: unit q < DW3_STRIP of ring row s <= 3.
                    let r = unsafe { ring.add((s * DW3_STRIP + q) * 256) };
                    for j in 0..4 {
                        // SAFETY: as above (bytes 64 j..64 j + 64 of the unit, aligned).
                        let x = unsafe { _mm512_load_si512(r.add(64 * j) as *const __m512i) };
                        for h in 0..per {
                            acc[h][j] = _mm512_dpbusd_epi32(acc[h][j], x, w[h][ky][j]);
                        }
                    }
                }
                for (h, acc) in acc.iter().enumerate().take(per) {
                    // The unit's first pixel; shared units of several pixels hold every other
                    // one.
                    let (ox, spacing) = if SHARE {
                        (2 * PPU * (q0 + q) + h, 2)
                    } else {
                        ((q0 + q) * PPU, 1)
                    };
                    if ox >= out_w {
                        break;
                    }
                    let mut r = [_mm512_setzero_si512(); 4];
                    for (j, r) in r.iter_mut().enumerate() {
                        *r = rq(j, acc[j]);
                    }
                    let v = _mm512_packs_epi16(
                        _mm512_packs_epi32(r[0], r[1]),
                        _mm512_packs_epi32(r[2], r[3]),
                    );
                    // SAFETY: pixel (oy, ox) is in `out` (ox < out_w).
                    unsafe { dw3x3_store::<PPU>(k, b, out, row, ox, spacing, mask, v) };
                }
            }
        }
        q0 += qn;
    }
}

/// Stores the requantized unit `v` of block `b`: the block's channels of its `PPU` pixels
/// from column `ox`, `spacing` apart, those in the row, of the output row starting at pixel
/// `row`.
///
/// # Safety
/// The CPU has AVX-512 F/BW/VL; `ox < k.out_w`, and pixels `row..row + k.out_w` have `k.c`
/// bytes each in `out`; `mask` keeps channels `64 b..` within `k.c`.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
unsafe fn dw3x3_store<const PPU: usize>(
    k: &Dw3Call,
    b: usize,
    out: &mut [i8],
    row: usize,
    ox: usize,
    spacing: usize,
    mask: __mmask64,
    v: __m512i,
) {
    let c = k.c;
    let parts: [__m128i; 4] = if PPU == 4 {
        [
            _mm512_castsi512_si128(v),
            _mm512_extracti32x4_epi32::<1>(v),
            _mm512_extracti32x4_epi32::<2>(v),
            _mm512_extracti32x4_epi32::<3>(v),
        ]
    } else {
        [_mm_setzero_si128(); 4]
    };
    for (p, part) in parts.into_iter().enumerate().take(PPU) {
        let x = ox + spacing * p;
        if p > 0 && x >= k.out_w {
            break;
        }
        // SAFETY: pixel row + x is in the row (x < out_w, the caller's contract), and the
        // masks keep the stores to channels 64 b..64 b + n of it.
        unsafe {
            let o = out.as_mut_ptr().add((row + x) * c + 64 * b);
            match PPU {
                1 => _mm512_mask_storeu_epi8(o, mask, v),
                2 if p == 0 => {
                    _mm256_mask_storeu_epi8(o, mask as __mmask32, _mm512_castsi512_si256(v))
                }
                2 => {
                    _mm256_mask_storeu_epi8(o, mask as __mmask32, _mm512_extracti64x4_epi64::<1>(v))
                }
                _ => _mm_mask_storeu_epi8(o, mask as __mmask16, part),
            }
        }
    }
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
        return super::for_each_window_run(input, c, dims, geometry, oys, |ptrs, at, n| {
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
        return super::for_each_window_run(input, c, dims, geometry, oys, |ptrs, at, n| {
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
    super::for_each_window_run(input, c, dims, geometry, oys, |ptrs, at, n| {
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

/// One output pixel in blocks of 16 channels.
#[target_feature(enable = "avx2,fma")]
fn dw_i8_pixel_avx2(dw: &DwI8, input: &[i8], taps: &[usize], out: &mut [i8]) {
    let c = dw.c;
    assert!(taps.len() == dw.taps && out.len() == c);
    let pairs = dw.taps.div_ceil(2);
    let off = _mm256_set1_epi16(dw.input_offset);
    let load = |t: usize, ch: usize| -> __m256i {
        let Some(&px) = taps.get(t) else {
            return _mm256_setzero_si256();
        };
        if px == usize::MAX {
            return _mm256_setzero_si256();
        }
        let start = px * c + ch;
        let v = if ch + 16 <= c {
            let s = &input[start..start + 16];
            // SAFETY: s has 16 bytes.
            unsafe { _mm_loadu_si128(s.as_ptr() as *const __m128i) }
        } else {
            let mut tmp = [0i8; 16];
            tmp[..c - ch].copy_from_slice(&input[start..start + c - ch]);
            // SAFETY: tmp has 16 bytes.
            unsafe { _mm_loadu_si128(tmp.as_ptr() as *const __m128i) }
        };
        _mm256_add_epi16(_mm256_cvtepi8_epi16(v), off)
    };
    for cb in 0..c.div_ceil(16) {
        let ch = cb * 16;
        let w = &dw.w[cb * pairs * 32..(cb + 1) * pairs * 32];
        let mut lo = _mm256_setzero_si256();
        let mut hi = _mm256_setzero_si256();
        for pr in 0..pairs {
            let x0 = load(2 * pr, ch);
            let x1 = load(2 * pr + 1, ch);
            let wp = &w[pr * 32..pr * 32 + 32];
            // SAFETY: wp has 32 i16 (two 256-bit vectors).
            let (wl, wh) = unsafe {
                (
                    _mm256_loadu_si256(wp.as_ptr() as *const __m256i),
                    _mm256_loadu_si256(wp.as_ptr().add(16) as *const __m256i),
                )
            };
            lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(x0, x1), wl));
            hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(x0, x1), wh));
        }
        // lo = channels 0-3 | 8-11, hi = 4-7 | 12-15.
        let a0 = _mm256_permute2x128_si256(lo, hi, 0x20);
        let a1 = _mm256_permute2x128_si256(lo, hi, 0x31);
        let v = narrow_16(
            Rq8::load(&dw.rq, ch).apply(a0),
            Rq8::load(&dw.rq, ch + 8).apply(a1),
        );
        let end = (ch + 16).min(c);
        store_16(v, &mut out[ch..end]);
    }
}

// ------------------------------------------------------------------------------ float

#[inline]
#[target_feature(enable = "avx2,fma")]
fn activate(v: __m256, act: Activation) -> __m256 {
    match act {
        Activation::Relu => _mm256_max_ps(v, _mm256_setzero_ps()),
        Activation::Relu6 => {
            _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(6.0))
        }
        Activation::ReluN1To1 => {
            _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-1.0)), _mm256_set1_ps(1.0))
        }
        // Tanh is applied by the caller (scalar).
        Activation::None | Activation::Tanh => v,
    }
}

/// `tile[r][j] = act(bias[j] + rows[r] · b[:, j])` for one 16-channel panel `b` (`[k][16]`).
pub(crate) fn tile_f32(
    isa: Isa,
    rows: &[&[f32]],
    b: &[f32],
    bias: &[f32],
    act: Activation,
    tile: &mut [[f32; NR_F32]; MR_F32],
) {
    debug_assert!(isa != Isa::Portable);
    let _ = isa;
    let k = b.len() / NR_F32;
    assert!(bias.len() == NR_F32);
    let ptrs = super::f32_row_ptrs(rows, k);
    macro_rules! dispatch {
        ($f:ident, $($n:literal)*) => {
            match rows.len() {
                // SAFETY: the ISA's features are available (module invariant, `available`);
                // every row has `k` values and `b` has `k * 16` (asserted above).
                $($n => unsafe { $f::<$n>(&ptrs, b.as_ptr(), k, bias, act, tile) },)*
                _ => unreachable!(),
            }
        };
    }
    dispatch!(tile_f32_avx2, 1 2 3 4 5 6)
}

/// Every panel of one block of `rows` GEMM rows with AVX-512, stored straight into `out`:
/// `out[r * n + j] = act(bias[j] + A[r] · B[:, j])` (Tanh left to the caller), where row `r`
/// of `A` is given by `segs`: segment `s` holds reduction indices `koff..koff + seg_len` at
/// `srcs[source][offset..]` (reduction indices in no segment are zero). `b` is packed in
/// groups of four panels (`[group][k][64]`, the last group narrower, see `GemmF32::pack`) and
/// `bias` padded to whole panels. A group is a tile of up to 6 rows x 64 channels: 24
/// independent multiply-add chains keep both FMA units busy with one weight load per 6
/// multiply-adds; the last partial panel goes through masked stores.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_rows_f32_avx512(
    srcs: [&[f32]; 3],
    segs: &[SegF32],
    seg_len: usize,
    rows: usize,
    b: &[f32],
    bias: &[f32],
    n: usize,
    k: usize,
    act: Activation,
    out: &mut [f32],
) {
    let panels = n.div_ceil(NR_F32);
    assert!(b.len() >= panels * k * NR_F32 && bias.len() >= panels * NR_F32);
    assert!(n > 0 && (1..=MR_F32).contains(&rows) && out.len() >= rows * n);
    assert!(segs.len() <= MAX_SEGS_F32);
    for seg in segs {
        assert!(seg.koff + seg_len <= k);
    }
    let lhs = (srcs, segs, seg_len, rows);
    let (b, bias, out) = (b.as_ptr(), bias.as_ptr(), out.as_mut_ptr());
    // The row pointers live in an array sized for the segments (initializing room for
    // MAX_SEGS_F32 on every block costs as much as a small block's multiply-adds).
    match segs.len() {
        // SAFETY: `b`, `bias` and `out` as asserted above.
        0 | 1 => unsafe { gemm_rows_f32_avx512_segs::<1>(lhs, b, bias, n, k, act, out) },
        // SAFETY: as above.
        2..=4 => unsafe { gemm_rows_f32_avx512_segs::<4>(lhs, b, bias, n, k, act, out) },
        // SAFETY: as above.
        _ => unsafe { gemm_rows_f32_avx512_segs::<MAX_SEGS_F32>(lhs, b, bias, n, k, act, out) },
    }
}

/// Left-hand sides up to this size may be swept once per group of output channels by
/// [`gemm_direct_f32_avx512`].
const DIRECT_LHS_L2_BYTES: usize = 512 << 10;
/// Weights up to this size stay in L1 without help.
const DIRECT_RHS_L1_BYTES: usize = 32 << 10;

/// [`gemm_rows_f32_avx512`] for rows `ms` of a matrix in place (row `m` is
/// `data[m * stride..][..k]`), all row blocks in one call: `out` starts at row `ms.start`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_direct_f32_avx512(
    data: &[f32],
    stride: usize,
    ms: Range<usize>,
    b: &[f32],
    bias: &[f32],
    n: usize,
    k: usize,
    act: Activation,
    out: &mut [f32],
) {
    let panels = n.div_ceil(NR_F32);
    assert!(b.len() >= panels * k * NR_F32 && bias.len() >= panels * NR_F32);
    assert!(n > 0 && out.len() >= ms.len() * n);
    if ms.is_empty() {
        return;
    }
    assert!((ms.end - 1) * stride + k <= data.len());
    let koffs = [0usize];
    let (b, bias) = (b.as_ptr(), bias.as_ptr());
    // Weights bigger than L1 with a left-hand side that stays in L2: the rows are swept once
    // per group of 64 channels, so the group's weights stay in L1 across the row blocks
    // (else every row block reads all the weights; sweeping per group when they fit L1
    // anyway only writes the output in partial lines).
    let group_outer = ms.len() > MR_F32
        && ms.len() * k * 4 <= DIRECT_LHS_L2_BYTES
        && k * n * 4 > DIRECT_RHS_L1_BYTES;
    if !group_outer {
        // Row blocks at a fixed stride: no row pointers to build per block and no prefetch
        // check in the innermost loop (the K=16 1x1 layers of MobileNetV2's block 4.6 -> 4.3
        // us).
        let base = [data[ms.start * stride..].as_ptr()];
        let lhs = StridedLhs {
            bases: &base,
            koffs: &koffs,
            seg_len: k,
            stride,
            row0: 0,
        };
        // SAFETY: only called for Isa::Avx512Vnni, chosen when the CPU has AVX-512 F/VL; rows
        // of the block have k floats each ((ms.end - 1) * stride + k <= data.len(), asserted
        // above), `b` and `bias` cover every panel and `out` has `ms.len() * n` floats
        // (asserted).
        unsafe { direct_blocks_f32(lhs, ms.len(), b, bias, n, k, act, out.as_mut_ptr()) };
        return;
    }
    for g in 0..panels.div_ceil(GROUP_F32) {
        // The next group's weights (one 64-byte line per panel and reduction index) are
        // prefetched into L2 while this group's later row blocks run, spread evenly over them
        // (at most one per reduction index): else the first row block of every group waits on
        // L3 for them (the 7x7 layers of MobileNetV2 have 1.2-1.6 MB of weights for 49 rows).
        let next_p = (g + 1) * GROUP_F32;
        let next_lines = panels.saturating_sub(next_p).min(GROUP_F32) * k;
        let nblocks = ms.len().div_ceil(MR_F32);
        let mut m0 = ms.start;
        while m0 < ms.end {
            let block = (m0 - ms.start) / MR_F32;
            let per = next_lines.div_ceil(nblocks.max(2) - 1).clamp(1, k);
            let pf_first = (block.saturating_sub(1) * per).min(next_lines);
            let pf = if block == 0 || pf_first >= next_lines {
                (b, 0, 1)
            } else {
                // SAFETY: a next group exists (next_lines > 0), and line pf_first < next_lines
                // of it is within its k * g * 16 floats of `b`.
                let at = unsafe { b.add(next_p * k * NR_F32 + pf_first * NR_F32) };
                (at, (next_lines - pf_first).min(per), k / per)
            };
            let rows = (ms.end - m0).min(MR_F32);
            let mut ptrs = [[data.as_ptr(); MR_F32]; 1];
            for (r, p) in ptrs[0].iter_mut().enumerate().take(rows) {
                *p = data[(m0 + r) * stride..].as_ptr();
            }
            let lhs = (&ptrs[..], &koffs[..], k);
            let o = out[(m0 - ms.start) * n..].as_mut_ptr();
            let groups = g..g + 1;
            macro_rules! dispatch {
                ($($n:literal)*) => {
                    match rows {
                        // SAFETY: only called for Isa::Avx512Vnni, chosen when the CPU has
                        // AVX-512 F/VL; rows m0..m0 + rows have k floats each ((ms.end - 1) *
                        // stride + k <= data.len(), asserted above), `b` and `bias` cover
                        // every panel and `o` is followed by `rows * n` floats of `out`
                        // (asserted).
                        $($n => unsafe {
                            gemm_rows_f32_avx512_mr::<$n, _>(lhs, b, bias, n, k, act, o, groups, pf)
                        },)*
                        _ => unreachable!(),
                    }
                };
            }
            dispatch!(1 2 3 4 5 6);
            m0 += MR_F32;
        }
    }
}

/// The row blocks of [`gemm_direct_f32_avx512`] without the groups outer, in one function
/// compiled for AVX-512 so the full blocks' tile kernel inlines into the loop.
///
/// # Safety
/// AVX-512 F/VL; `lhs` rows `0..rows` readable for `k` floats each; `b`, `bias` as
/// [`gemm_rows_f32_avx512_mr`]; `out` writable for `rows * n` floats.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
unsafe fn direct_blocks_f32(
    mut lhs: StridedLhs<'_>,
    rows: usize,
    b: *const f32,
    bias: *const f32,
    n: usize,
    k: usize,
    act: Activation,
    out: *mut f32,
) {
    let all = 0..usize::MAX;
    while lhs.row0 + MR_F32 <= rows {
        // SAFETY: the contract, for rows row0..row0 + MR_F32.
        unsafe {
            let o = out.add(lhs.row0 * n);
            gemm_rows_f32_avx512_mr::<MR_F32, _>(
                lhs,
                b,
                bias,
                n,
                k,
                act,
                o,
                all.clone(),
                (b, 0, 1),
            );
        }
        lhs.row0 += MR_F32;
    }
    let o = out.wrapping_add(lhs.row0 * n);
    macro_rules! dispatch {
        ($($n:literal)*) => {
            match rows - lhs.row0 {
                0 => {}
                // SAFETY: the contract, for the last rows.
                $($n => unsafe {
                    gemm_rows_f32_avx512_mr::<$n, _>(lhs, b, bias, n, k, act, o, all, (b, 0, 1))
                },)*
                _ => unreachable!(),
            }
        };
    }
    dispatch!(1 2 3 4 5);
}

/// Rows of the tall tiles of [`gemm_strided_f32_avx512`] for one or two panels (12 x 16:
/// 12 accumulators, 12 x 32: 24), where the 6-row tile has too few independent multiply-add
/// chains to hide their latency and broadcasts one input per one or two multiply-adds.
pub(crate) const TALL_MR_F32: usize = 12;

/// Rows up to which one panel goes in one tile (16 accumulators) rather than two: short
/// output rows of a convolution, one call each (MobileNetV2 block's 16-pixel rows of its 3x3
/// stride-2 layer: 3.1 -> 2.9 us; longer runs were no faster or slower with 16-row tiles).
pub(crate) const TALL1_MR_F32: usize = 16;

/// [`gemm_rows_f32_avx512`] for `rows` rows at a fixed stride, all row blocks in one call:
/// segment `s` (first reduction index `segs[s].0`) of row `r` is
/// `data[segs[s].1 + r * stride..][..seg_len]`; `out` starts at row 0. Up to two panels (wider
/// outputs take [`gemm_direct_f32_avx512`] or the gathered blocks), in tiles of up to
/// [`TALL_MR_F32`] rows, the rows split evenly over them (one panel of up to
/// [`TALL1_MR_F32`] rows in one tile).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_strided_f32_avx512(
    data: &[f32],
    segs: &[(usize, usize)],
    seg_len: usize,
    stride: usize,
    rows: usize,
    b: &[f32],
    bias: &[f32],
    n: usize,
    k: usize,
    act: Activation,
    out: &mut [f32],
) {
    let panels = n.div_ceil(NR_F32);
    assert!(b.len() >= panels * k * NR_F32 && bias.len() >= panels * NR_F32);
    assert!(n > 0 && n <= 2 * NR_F32 && out.len() >= rows * n && segs.len() <= MAX_SEGS_F32);
    if rows == 0 {
        return;
    }
    let mut bases = [data.as_ptr(); MAX_SEGS_F32];
    let mut koffs = [0usize; MAX_SEGS_F32];
    for ((&(koff, at), base), ko) in segs.iter().zip(&mut bases).zip(&mut koffs) {
        assert!(koff + seg_len <= k);
        // Every row's segment is inside `data` (checked by the slicing).
        *base = data[at..at + (rows - 1) * stride + seg_len].as_ptr();
        *ko = koff;
    }
    let mut lhs = StridedLhs {
        bases: &bases[..segs.len()],
        koffs: &koffs[..segs.len()],
        seg_len,
        stride,
        row0: 0,
    };
    let (b, bias) = (b.as_ptr(), bias.as_ptr());
    if n <= NR_F32 && (TALL_MR_F32 + 1..=TALL1_MR_F32).contains(&rows) {
        let (o, none) = (out.as_mut_ptr(), (b, 0, 1));
        macro_rules! dispatch {
            ($($n:literal)*) => {
                match rows {
                    // SAFETY: as below, for all the rows in one tile of one panel.
                    $($n => unsafe {
                        gemm_group_f32::<$n, 1, _>(lhs, b, bias, n, 0, act, o, none)
                    },)*
                    _ => unreachable!(),
                }
            };
        }
        dispatch!(13 14 15 16);
        return;
    }
    // Blocks of `per` or `per + 1` rows (the first `extra`): no short last tile.
    let blocks = rows.div_ceil(TALL_MR_F32);
    let (per, extra) = (rows / blocks, rows % blocks);
    for block in 0..blocks {
        let here = per + usize::from(block < extra);
        let o = out[lhs.row0 * n..].as_mut_ptr();
        macro_rules! dispatch {
            ($($n:literal)*) => {
                match here {
                    // SAFETY: only called for Isa::Avx512Vnni, chosen when the CPU has AVX-512
                    // F/VL; rows row0..row0 + here of every segment have seg_len floats in
                    // `data` (row0 + here <= rows, sliced above) and their weights are within
                    // `k` (asserted), `b` and `bias` cover every panel (n <= 32, asserted)
                    // and `o` is followed by `here * n` floats of `out` (asserted).
                    $($n => unsafe { tall_f32::<$n>(lhs, b, bias, n, act, o) },)*
                    _ => unreachable!(),
                }
            };
        }
        dispatch!(1 2 3 4 5 6 7 8 9 10 11 12);
        lhs.row0 += here;
    }
}

/// One tile of up to two panels (all of them), `MR` rows.
///
/// # Safety
/// As [`gemm_rows_f32_avx512_mr`], with `n <= 32`.
#[inline(always)]
unsafe fn tall_f32<const MR: usize>(
    lhs: StridedLhs<'_>,
    b: *const f32,
    bias: *const f32,
    n: usize,
    act: Activation,
    out: *mut f32,
) {
    let none = (b, 0, 1);
    // SAFETY: the caller's contract; one group of one or two panels starts at `b`.
    unsafe {
        if n > NR_F32 {
            gemm_group_f32::<MR, 2, _>(lhs, b, bias, n, 0, act, out, none)
        } else {
            gemm_group_f32::<MR, 1, _>(lhs, b, bias, n, 0, act, out, none)
        }
    }
}

/// [`gemm_rows_f32_avx512`] after its checks on `b`, `bias`, `out` and the segments' `koff`:
/// resolves (and checks) every row of up to `S` segments to a pointer.
///
/// # Safety
/// `b` readable for `panels * k * 16` floats, `bias` for `panels * 16`, `out` writable for
/// `rows * n` (`panels = n.div_ceil(16)`); `segs.len() <= S`, every `koff + seg_len <= k`.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_rows_f32_avx512_segs<const S: usize>(
    (srcs, segs, seg_len, rows): ([&[f32]; 3], &[SegF32], usize, usize),
    b: *const f32,
    bias: *const f32,
    n: usize,
    k: usize,
    act: Activation,
    out: *mut f32,
) {
    let mut ptrs = [[core::ptr::null::<f32>(); MR_F32]; S];
    let mut koffs = [0usize; S];
    for ((seg, ptrs), koff) in segs.iter().zip(&mut ptrs).zip(&mut koffs) {
        *koff = seg.koff;
        for (&(src, at), ptr) in seg.rows[..rows].iter().zip(ptrs.iter_mut()) {
            *ptr = srcs[src as usize][at..at + seg_len].as_ptr();
        }
    }
    let lhs = (&ptrs[..segs.len()], &koffs[..segs.len()], seg_len);
    macro_rules! dispatch {
        ($($n:literal)*) => {
            match rows {
                // SAFETY: only called for Isa::Avx512Vnni, chosen when the CPU has AVX-512
                // F/VL; every segment's first `rows` pointers have `seg_len` readable floats
                // (sliced above) and its B rows are within `k`, `b` and `bias` cover every
                // panel and `out` every row of `n` (the caller's contract).
                $($n => unsafe {
                    gemm_rows_f32_avx512_mr::<$n, _>(
                        lhs, b, bias, n, k, act, out, 0..usize::MAX, (b, 0, 1)
                    )
                },)*
                _ => unreachable!(),
            }
        };
    }
    dispatch!(1 2 3 4 5 6)
}

/// The left-hand side of a row block: row pointers and first reduction index of each segment,
/// and the segments' length.
type LhsF32<'a> = (&'a [[*const f32; MR_F32]], &'a [usize], usize);

/// The left-hand side of a tile of `MR` rows as segments of `seg_len` consecutive floats per
/// row, each at a first reduction index: how [`gemm_group_f32`] finds its rows.
trait TileLhs<const MR: usize>: Copy {
    /// Whether tiles of this source take the `pf` prefetch hint (else its check, in the
    /// innermost loop, is compiled out).
    const PREFETCH: bool;
    fn segs(&self) -> usize;
    fn seg_len(&self) -> usize;
    /// Segment `s`'s first reduction index and row pointers.
    ///
    /// # Safety
    /// `s < self.segs()`; the rows' pointers are then readable for `seg_len` floats (each
    /// implementation's contract).
    unsafe fn seg(&self, s: usize) -> (usize, [*const f32; MR]);
}

/// Row pointers per segment (`MR <= MR_F32`): rows anywhere (gathered, padding, in place).
impl<const MR: usize> TileLhs<MR> for LhsF32<'_> {
    const PREFETCH: bool = true;
    #[inline(always)]
    fn segs(&self) -> usize {
        self.0.len().min(self.1.len())
    }
    #[inline(always)]
    fn seg_len(&self) -> usize {
        self.2
    }
    #[inline(always)]
    unsafe fn seg(&self, s: usize) -> (usize, [*const f32; MR]) {
        (self.1[s], core::array::from_fn(|r| self.0[s][r]))
    }
}

/// Rows at a fixed stride: segment `s` of row `r` starts at `bases[s] + (row0 + r) * stride`
/// (one output row of a convolution, or a matrix in place), so a tile's rows cost no
/// per-row bookkeeping and any number of them fit.
#[derive(Clone, Copy)]
struct StridedLhs<'a> {
    bases: &'a [*const f32],
    koffs: &'a [usize],
    seg_len: usize,
    stride: usize,
    row0: usize,
}

impl<const MR: usize> TileLhs<MR> for StridedLhs<'_> {
    const PREFETCH: bool = false;
    #[inline(always)]
    fn segs(&self) -> usize {
        self.bases.len().min(self.koffs.len())
    }
    #[inline(always)]
    fn seg_len(&self) -> usize {
        self.seg_len
    }
    #[inline(always)]
    unsafe fn seg(&self, s: usize) -> (usize, [*const f32; MR]) {
        // SAFETY: rows row0..row0 + MR of every segment are within the slice `bases[s]`
        // points into ([`gemm_strided_f32_avx512`] checks them before making the tile).
        let at = |r: usize| unsafe { self.bases[s].add((self.row0 + r) * self.stride) };
        (self.koffs[s], core::array::from_fn(at))
    }
}

/// # Safety
/// AVX-512 F/VL; for every segment `s`, its first `MR` row pointers readable for `seg_len`
/// floats and `koffs[s] + seg_len <= k`; `b` readable for `panels * k * 16`,
/// `bias` for `panels * 16`, `out` writable for `MR * n` (`panels = n.div_ceil(16)`).
/// Computes the panels of groups `groups` (of four panels; the last may be narrower).
/// `pf` is a prefetch hint: `pf.1` cache lines (16 floats apart) from `pf.0` into L2.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
unsafe fn gemm_rows_f32_avx512_mr<const MR: usize, L: TileLhs<MR>>(
    lhs: L,
    b: *const f32,
    bias: *const f32,
    n: usize,
    k: usize,
    act: Activation,
    out: *mut f32,
    groups: Range<usize>,
    pf: (*const f32, usize, usize),
) {
    let panels = n.div_ceil(NR_F32);
    // (`groups` may be `0..usize::MAX`, all of them.)
    let mut p = groups.start.saturating_mul(GROUP_F32);
    while p < panels.min(groups.end.saturating_mul(GROUP_F32)) {
        let g = (panels - p).min(GROUP_F32);
        // SAFETY: the group of panels p..p + g starts at p * k * 16 floats of `b` and has
        // k * g * 16 (GemmF32::pack); its bias and output columns are within the caller's.
        unsafe {
            let (bg, bias) = (b.add(p * k * NR_F32), bias.add(p * NR_F32));
            let (o, c0) = (out.add(p * NR_F32), p * NR_F32);
            match g {
                4 => gemm_group_f32::<MR, 4, L>(lhs, bg, bias, n, c0, act, o, pf),
                3 => gemm_group_f32::<MR, 3, L>(lhs, bg, bias, n, c0, act, o, pf),
                2 => gemm_group_f32::<MR, 2, L>(lhs, bg, bias, n, c0, act, o, pf),
                _ => gemm_group_f32::<MR, 1, L>(lhs, bg, bias, n, c0, act, o, pf),
            }
        }
        p += g;
    }
}

/// One `MR` x `G * 16` tile: output channels `c0..c0 + G * 16` (the existing ones) of `MR`
/// rows.
///
/// # Safety
/// As [`gemm_rows_f32_avx512_mr`], for the group's weights `[k][G * 16]` at `bg`, its bias
/// (`G * 16` floats) and `out` pointing at channel `c0` of the first row; prefetches `pf.1`
/// lines from `pf.0` (a hint: one per reduction index up to `pf.1`).
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
unsafe fn gemm_group_f32<const MR: usize, const G: usize, L: TileLhs<MR>>(
    lhs: L,
    bg: *const f32,
    bias: *const f32,
    n: usize,
    c0: usize,
    act: Activation,
    out: *mut f32,
    (pf, pf_lines, pf_step): (*const f32, usize, usize),
) {
    let (mut pf_i, mut pf_next) = (0, 0);
    let cols = G * NR_F32;
    let mut acc = [[_mm512_setzero_ps(); G]; MR];
    let seg_len = lhs.seg_len();
    for s in 0..lhs.segs() {
        // SAFETY: reduction indices koff..koff + seg_len are within k: rows koff.. of the
        // group's [k][G * 16] weights; every row pointer has seg_len floats (the contract).
        unsafe {
            let (koff, rows) = lhs.seg(s);
            let bs = bg.add(koff * cols);
            for kk in 0..seg_len {
                if L::PREFETCH && koff + kk == pf_next && pf_i < pf_lines {
                    _mm_prefetch::<_MM_HINT_T1>(pf.wrapping_add(pf_i * NR_F32) as *const i8);
                    pf_i += 1;
                    pf_next += pf_step;
                }
                let mut w = [_mm512_setzero_ps(); G];
                for (h, w) in w.iter_mut().enumerate() {
                    *w = _mm512_loadu_ps(bs.add(kk * cols + h * NR_F32));
                }
                for (r, acc) in acc.iter_mut().enumerate() {
                    let a = _mm512_set1_ps(*rows[r].add(kk));
                    for (acc, w) in acc.iter_mut().zip(&w) {
                        *acc = _mm512_fmadd_ps(a, *w, *acc);
                    }
                }
            }
        }
    }
    // Masks, bias and clamp bounds first, so the stores below unroll over registers (the
    // accumulators stay in registers instead of going through the stack).
    let mut lanes = [0xFFFF as __mmask16; G];
    let mut bv = [_mm512_setzero_ps(); G];
    for (h, (lanes, bv)) in lanes.iter_mut().zip(&mut bv).enumerate() {
        let cn = n - (c0 + h * NR_F32);
        if cn < NR_F32 {
            *lanes = ((1u32 << cn) - 1) as __mmask16;
        }
        // SAFETY: bias has the group's G * 16 floats.
        *bv = unsafe { _mm512_loadu_ps(bias.add(h * NR_F32)) };
    }
    let clamp = !matches!(act, Activation::None | Activation::Tanh);
    let (lo, hi) = clamp512(act);
    for (r, acc) in acc.iter().enumerate() {
        for h in 0..G {
            let mut v = _mm512_add_ps(acc[h], bv[h]);
            if clamp {
                v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
            }
            // SAFETY: the mask keeps each store to the row's channels c0 + 16h..
            // min(c0 + 16h + 16, n) (the caller's contract).
            unsafe { _mm512_mask_storeu_ps(out.add(r * n + h * NR_F32), lanes[h], v) };
        }
    }
}

/// Lower and upper bounds that clamp to `act` (Relu, Relu6, ReluN1To1; `max` first, so NaN
/// becomes the lower bound as in [`activate512`]).
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
fn clamp512(act: Activation) -> (__m512, __m512) {
    let (lo, hi) = match act {
        Activation::Relu => (0.0, f32::INFINITY),
        Activation::Relu6 => (0.0, 6.0),
        Activation::ReluN1To1 => (-1.0, 1.0),
        Activation::None | Activation::Tanh => (f32::NEG_INFINITY, f32::INFINITY),
    };
    (_mm512_set1_ps(lo), _mm512_set1_ps(hi))
}

#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
fn activate512(v: __m512, act: Activation) -> __m512 {
    let zero = _mm512_setzero_ps();
    match act {
        Activation::Relu => _mm512_max_ps(v, zero),
        Activation::Relu6 => _mm512_min_ps(_mm512_max_ps(v, zero), _mm512_set1_ps(6.0)),
        Activation::ReluN1To1 => {
            _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-1.0)), _mm512_set1_ps(1.0))
        }
        // Tanh is applied by the caller (scalar).
        Activation::None | Activation::Tanh => v,
    }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn tile_f32_avx2<const MR: usize>(
    rows: &[*const f32; MR_F32],
    b: *const f32,
    k: usize,
    bias: &[f32],
    act: Activation,
    tile: &mut [[f32; NR_F32]; MR_F32],
) {
    let mut acc = [[_mm256_setzero_ps(); 2]; MR];
    for kk in 0..k {
        // SAFETY: kk < k: b has k * 16 floats and every row k (checked by the caller).
        unsafe {
            let bp = b.add(kk * NR_F32);
            let b0 = _mm256_loadu_ps(bp);
            let b1 = _mm256_loadu_ps(bp.add(8));
            for (r, acc) in acc.iter_mut().enumerate() {
                let av = _mm256_broadcast_ss(&*rows[r].add(kk));
                acc[0] = _mm256_fmadd_ps(av, b0, acc[0]);
                acc[1] = _mm256_fmadd_ps(av, b1, acc[1]);
            }
        }
    }
    // SAFETY: bias has 16 floats; tile rows have 16.
    unsafe {
        let bias0 = _mm256_loadu_ps(bias.as_ptr());
        let bias1 = _mm256_loadu_ps(bias.as_ptr().add(8));
        for (r, acc) in acc.iter().enumerate() {
            let t = tile[r].as_mut_ptr();
            _mm256_storeu_ps(t, activate(_mm256_add_ps(acc[0], bias0), act));
            _mm256_storeu_ps(t.add(8), activate(_mm256_add_ps(acc[1], bias1), act));
        }
    }
}

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

/// Output pixels of a row that one pass over a 16-channel block covers when the input fits in
/// L2. Stride 2 reads the input lines of a pass one per pixel (a pixel's channels are far
/// apart): shorter passes get the other blocks' lines while still in L2 (measured on
/// MobileNetV2's 112x112x96 stride-2 layer: 16 pixels 15% faster than 32).
const DW_RUN: usize = 16;

/// Input bytes (one batch) above which [`dw3x3_f32_rows_avx512`] passes over [`DW_RUN_BIG`]
/// pixels instead: such an input comes mostly from L3, which streams whole pixels
/// (consecutive lines) faster than one line per pixel.
const DW_BIG_INPUT: usize = 2 << 20;

/// Pass length for inputs above [`DW_BIG_INPUT`]: one group of four pixels, so all channel
/// blocks of its input pixels are read back to back (MobileNetV2's 113x113x96 stride-2 layer,
/// 4.9 MB: about 8% faster than 16; its layers with inputs in L2 are 2-10% slower with 4,
/// which reloads the weights per group).
const DW_RUN_BIG: usize = 4;

/// The nine weights and the bias of channels `cb..` (`mask`: the lanes below `c - cb`) of a 3x3
/// depthwise layer, for the kernels that keep them in registers.
#[inline]
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
fn dw3x3_block_weights(dw: &DwF32, cb: usize, mask: __mmask16) -> ([__m512; 9], __m512) {
    let (c, cp) = (dw.c, dw.cp);
    assert!(cb < c && mask == lanes16(c - cb));
    assert!(dw.taps == 9 && dw.w.len() >= 9 * cp && cp >= c && dw.bias.len() >= c);
    let mut w = [_mm512_setzero_ps(); 9];
    for (t, w) in w.iter_mut().enumerate() {
        // SAFETY: lanes below c - cb (asserted): within tap t's cp weights.
        *w = unsafe { _mm512_maskz_loadu_ps(mask, dw.w.as_ptr().add(t * cp + cb)) };
    }
    // SAFETY: lanes below c - cb: within the bias' c floats.
    let bias = unsafe { _mm512_maskz_loadu_ps(mask, dw.bias.as_ptr().add(cb)) };
    (w, bias)
}

/// [`dw_f32_rows`] for 3x3 kernels without dilation, strides other than 1 ([`dw3x3_f32_cols`]
/// takes stride 1): for each 16-channel block of a run of
/// output pixels, the nine weights and the bias stay in registers, so each multiply-add
/// loads one input vector (the generic path loads the weight too and builds nine tap
/// pointers per pixel); taps outside the input are skipped (columns only at the row's ends).
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
fn dw3x3_f32_rows_avx512(
    dw: &DwF32,
    input: &[f32],
    [in_h, in_w, _, _, out_w]: [usize; 5],
    [stride_h, stride_w, _, _, pad_top, pad_left]: [usize; 6],
    oys: Range<usize>,
    out: &mut [f32],
) {
    let (c, cp) = (dw.c, dw.cp);
    assert!(c > 0 && input.len() >= in_h * in_w * c && out.len() >= oys.len() * out_w * c);
    assert!(dw.taps == 9 && dw.w.len() >= 9 * cp && cp >= c && dw.bias.len() >= c);
    let clamp = !matches!(dw.act, Activation::None | Activation::Tanh);
    let (lo, hi) = clamp512(dw.act);
    let (inp, op) = (input.as_ptr(), out.as_mut_ptr());
    let y0 = oys.start;
    let run = if in_h * in_w * c * 4 > DW_BIG_INPUT {
        DW_RUN_BIG
    } else {
        DW_RUN
    };
    // Bottom rows first: the layer before wrote this input top to bottom, so when it does not
    // fit in L2 its last rows are the ones still there (MobileNetV2's 112x112x96 stride-2
    // layer, 4.8 MB: 20% faster than top down).
    for oy in oys.rev() {
        // Start of each kernel row's input row, None above or below the input.
        let mut rows = [None; 3];
        for (ky, r) in rows.iter_mut().enumerate() {
            let y = (oy * stride_h + ky).wrapping_sub(pad_top);
            if y < in_h {
                *r = Some(y * in_w * c);
            }
        }
        let orow = (oy - y0) * out_w * c;
        let mut ox0 = 0;
        while ox0 < out_w {
            // The first run also takes the pixels whose windows start left of the input, so
            // the later runs split no group of four.
            let lead = if ox0 == 0 {
                pad_left.div_ceil(stride_w)
            } else {
                0
            };
            let ox1 = (ox0 + lead + run).min(out_w);
            let mut cb = 0;
            while cb < c {
                let mask = lanes16(c - cb);
                let (w, bias) = dw3x3_block_weights(dw, cb, mask);
                let mut ox = ox0;
                while ox < ox1 {
                    let x0 = (ox * stride_w).wrapping_sub(pad_left);
                    // Four pixels whose windows start inside the row (fewer at the row's
                    // end: the others are computed, not stored): four independent chains,
                    // input columns shared between neighbouring windows loaded once; columns
                    // right of the input (padding) are zero.
                    let n = (ox1 - ox).min(4);
                    if x0 < in_w {
                        let cols = in_w - x0;
                        let quad = match (stride_w, cols >= 3 * stride_w + 3) {
                            // SAFETY: columns x0..x0 + min(cols, 3 * stride + 3) of every
                            // valid row are inside the input; lanes below c - cb.
                            (1, true) => Some(unsafe {
                                dw3x3_quad::<1, false>(inp, &rows, x0 * c + cb, c, cols, mask, &w)
                            }),
                            // SAFETY: as above.
                            (1, false) => Some(unsafe {
                                dw3x3_quad::<1, true>(inp, &rows, x0 * c + cb, c, cols, mask, &w)
                            }),
                            // SAFETY: as above.
                            (2, true) => Some(unsafe {
                                dw3x3_quad::<2, false>(inp, &rows, x0 * c + cb, c, cols, mask, &w)
                            }),
                            // SAFETY: as above.
                            (2, false) => Some(unsafe {
                                dw3x3_quad::<2, true>(inp, &rows, x0 * c + cb, c, cols, mask, &w)
                            }),
                            _ => None,
                        };
                        if let Some(quad) = quad {
                            for (j, acc) in quad.into_iter().enumerate().take(n) {
                                let mut v = _mm512_add_ps(acc, bias);
                                if clamp {
                                    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
                                }
                                let o = orow + (ox + j) * c + cb;
                                // SAFETY: output pixel (oy, ox + j) of this block, ox + j <
                                // ox1 <= out_w; lanes below c - cb.
                                unsafe { _mm512_mask_storeu_ps(op.add(o), mask, v) };
                            }
                            ox += n;
                            continue;
                        }
                    }
                    let inside = x0 < in_w && in_w - x0 >= 3;
                    let mut acc = _mm512_setzero_ps();
                    for (ky, r) in rows.iter().enumerate() {
                        let Some(r) = *r else { continue };
                        if inside {
                            // SAFETY: pixels x0..x0 + 3 of input row y are inside the input;
                            // lanes below c - cb stay within each pixel's channels.
                            unsafe {
                                let p = inp.add(r + x0 * c + cb);
                                let a = _mm512_maskz_loadu_ps(mask, p);
                                acc = _mm512_fmadd_ps(a, w[ky * 3], acc);
                                let a = _mm512_maskz_loadu_ps(mask, p.add(c));
                                acc = _mm512_fmadd_ps(a, w[ky * 3 + 1], acc);
                                let a = _mm512_maskz_loadu_ps(mask, p.add(2 * c));
                                acc = _mm512_fmadd_ps(a, w[ky * 3 + 2], acc);
                            }
                        } else {
                            for kx in 0..3 {
                                let x = x0.wrapping_add(kx);
                                if x < in_w {
                                    // SAFETY: pixel (y, x) is inside the input; lanes as
                                    // above.
                                    let a = unsafe {
                                        _mm512_maskz_loadu_ps(mask, inp.add(r + x * c + cb))
                                    };
                                    acc = _mm512_fmadd_ps(a, w[ky * 3 + kx], acc);
                                }
                            }
                        }
                    }
                    let mut v = _mm512_add_ps(acc, bias);
                    if clamp {
                        v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
                    }
                    // SAFETY: output pixel (oy, ox) of this block, lanes below c - cb.
                    unsafe { _mm512_mask_storeu_ps(op.add(orow + ox * c + cb), mask, v) };
                    ox += 1;
                }
                cb += 16;
            }
            ox0 = ox1;
        }
    }
}

/// Output pixels side by side in one column strip of [`dw3x3_f32_cols`].
const DW_STRIP: usize = 4;

/// Output rows of one walk of [`dw3x3_f32_cols`]: a walk of all rows strides through far apart
/// input rows, which the hardware prefetchers do not follow (measured: twice as slow on
/// 112x112x32); 8 rows cost two extra input rows per eight and keep the band's rows in L2.
const DW_BAND: usize = 8;

/// Output rows of one band of [`Dw3Walk::bands`]: three rows of four pixels are twelve
/// accumulators, which with the nine weights and six input vectors fill the registers.
const DW_BAND3: usize = 3;

/// Input bytes (one batch) up to which [`dw3x3_f32_cols`] goes by [`Dw3Walk::bands`]. When the
/// rows are a multiple of 4 KiB long and the output a multiple of 4 KiB from the input (greedy
/// planning places equal-sized tensors so), a walk down a column strip loads input rows right
/// after storing output rows with the same addresses modulo 4 KiB: 4K aliasing with the
/// pending stores, and all of the walk's lines on the same few L1 sets. MobileNetV2 block's
/// 16x16x64 layer took 5.8 us so and 3.8 with its output moved by 2 KiB; bands, which store
/// after all their loads, 3.7 either way. Also measured: MobileNetV2's 14x14 and 7x7 layers
/// 5-12% faster with bands, 28x28x192 (602 KB) the same; the 56x56x144 and 112x112x32 layers
/// (1.6-1.8 MB) 10-15% slower (bands reload two of every five input rows).
const DW_BANDS_INPUT: usize = 1 << 20;

/// [`dw_f32_rows`] for 3x3 kernels with stride 1, no dilation: the output is cut into strips
/// of [`DW_STRIP`] pixels; per strip and 16-channel block the nine weights stay in registers
/// while the walk goes down [`DW_BAND`] output rows, and each input row is loaded once per
/// strip (six vectors) and multiply-added into the three output rows it feeds (three
/// rotating accumulator sets). So an output pixel costs 1.5 loads for its nine multiply-adds
/// instead of 4.5 ([`dw3x3_f32_rows_avx512`]), and the input lines go from L2 to L1 about
/// once instead of once per output row. Inputs up to [`DW_BANDS_INPUT`] go by bands of
/// [`DW_BAND3`] rows instead ([`Dw3Walk::bands`]).
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
fn dw3x3_f32_cols(
    dw: &DwF32,
    input: &[f32],
    [in_h, in_w, _, _, out_w]: [usize; 5],
    [_, _, _, _, pad_top, pad_left]: [usize; 6],
    oys: Range<usize>,
    out: &mut [f32],
) {
    let (c, cp) = (dw.c, dw.cp);
    assert!(c > 0 && input.len() >= in_h * in_w * c && out.len() >= oys.len() * out_w * c);
    assert!(dw.taps == 9 && dw.w.len() >= 9 * cp && cp >= c && dw.bias.len() >= c);
    if oys.is_empty() {
        return;
    }
    let clamp = !matches!(dw.act, Activation::None | Activation::Tanh);
    let (lo, hi) = clamp512(dw.act);
    let g = Dw3Walk {
        inp: input.as_ptr(),
        op: out.as_mut_ptr(),
        in_h,
        in_w,
        c,
        out_row: out_w * c,
        pad_top,
        oys: oys.clone(),
        clamp,
        lo,
        hi,
    };
    if in_h * in_w * c * 4 <= DW_BANDS_INPUT {
        // SAFETY: this function's features; `g` is made for these arguments.
        return unsafe { g.bands(dw, out_w, pad_left, oys) };
    }
    let mut band = oys.start;
    while band < oys.end {
        let rows = band..(band + DW_BAND).min(oys.end);
        let mut ox = 0;
        while ox < out_w {
            let np = (out_w - ox).min(DW_STRIP);
            let mut cb = 0;
            while cb < c {
                let mask = lanes16(c - cb);
                let wb = dw3x3_block_weights(dw, cb, mask);
                let (s, inside) = g.strip(ox, np, pad_left, cb, mask, wb);
                // SAFETY: this function's features; the strip is as `walk` needs (`inside` as
                // `strip` found it).
                unsafe {
                    if inside {
                        g.walk::<false>(rows.clone(), &s);
                    } else {
                        g.walk::<true>(rows.clone(), &s);
                    }
                }
                cb += 16;
            }
            ox += np;
        }
        band = rows.end;
    }
}

/// The geometry of one [`dw3x3_f32_cols`] call: input `[in_h, in_w, c]` at `inp`, output
/// rows `oys` (of `out_row` floats) at `op`.
struct Dw3Walk {
    inp: *const f32,
    op: *mut f32,
    in_h: usize,
    in_w: usize,
    c: usize,
    out_row: usize,
    pad_top: usize,
    oys: Range<usize>,
    clamp: bool,
    lo: __m512,
    hi: __m512,
}

/// One strip of [`Dw3Walk`]: output pixels `ox..ox + np`, whose first window starts at input
/// column `x0` (wrapping: left of the input), channels `cb..` of `mask`, the nine weights
/// `w` and the bias.
#[derive(Clone, Copy)]
struct Dw3Strip {
    x0: usize,
    ox: usize,
    np: usize,
    cb: usize,
    mask: __mmask16,
    w: [__m512; 9],
    bias: __m512,
}

impl Dw3Walk {
    /// The strip of `np` (at most [`DW_STRIP`]) output columns from `ox` in the 16-channel
    /// block `cb` (lanes `mask`, weights and bias `wb` of [`dw3x3_block_weights`]), and whether
    /// all its `DW_STRIP + 2` input columns are inside the input (then the kernels skip the
    /// per-column checks).
    #[inline]
    fn strip(
        &self,
        ox: usize,
        np: usize,
        pad_left: usize,
        cb: usize,
        mask: __mmask16,
        (w, bias): ([__m512; 9], __m512),
    ) -> (Dw3Strip, bool) {
        let x0 = ox.wrapping_sub(pad_left);
        let inside = ox >= pad_left && x0 + DW_STRIP + 2 <= self.in_w;
        let s = Dw3Strip {
            x0,
            ox,
            np,
            cb,
            mask,
            w,
            bias,
        };
        (s, inside)
    }

    /// The six input vectors of input row `y` (wrapping: above or below the input
    /// gives None) from the strip's column `x0`; columns outside the input are zero (checked
    /// only when `EDGE`).
    ///
    /// # Safety
    /// AVX-512 F/VL; `s` as in [`Dw3Walk::walk`].
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
    unsafe fn row<const EDGE: bool>(
        &self,
        y: usize,
        s: &Dw3Strip,
    ) -> Option<[__m512; DW_STRIP + 2]> {
        if y >= self.in_h {
            return None;
        }
        let mut a = [_mm512_setzero_ps(); DW_STRIP + 2];
        for (col, a) in a.iter_mut().enumerate() {
            let x = s.x0.wrapping_add(col);
            if !EDGE || x < self.in_w {
                // SAFETY: pixel (y, x) is inside the input (y < in_h checked, x by the
                // contract or just above); lanes below c - cb.
                let p = unsafe { self.inp.add((y * self.in_w + x) * self.c + s.cb) };
                // SAFETY: as above.
                *a = unsafe { _mm512_maskz_loadu_ps(s.mask, p) };
            }
        }
        Some(a)
    }

    /// Adds kernel row `ky` over the input row `a` to the four pixels of `acc`.
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
    fn fma(a: &[__m512; DW_STRIP + 2], s: &Dw3Strip, ky: usize, acc: &mut [__m512; DW_STRIP]) {
        for (j, acc) in acc.iter_mut().enumerate() {
            for kx in 0..3 {
                *acc = _mm512_fmadd_ps(a[j + kx], s.w[ky * 3 + kx], *acc);
            }
        }
    }

    /// Stores the strip's pixels of `acc` (bias included), clamped, at output row `oy`, and
    /// restarts `acc` at the bias.
    ///
    /// # Safety
    /// AVX-512 F/VL; `oy` in `oys`; `s` as in [`Dw3Walk::walk`].
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
    unsafe fn store(&self, acc: &mut [__m512; DW_STRIP], oy: usize, s: &Dw3Strip) {
        for (j, &v) in acc.iter().enumerate().take(s.np) {
            let v = if self.clamp {
                _mm512_min_ps(_mm512_max_ps(v, self.lo), self.hi)
            } else {
                v
            };
            let o = (oy - self.oys.start) * self.out_row + (s.ox + j) * self.c + s.cb;
            // SAFETY: pixel (oy, ox + j) of the output rows oys; lanes below c - cb.
            unsafe { _mm512_mask_storeu_ps(self.op.add(o), s.mask, v) };
        }
        *acc = [s.bias; DW_STRIP];
    }

    /// Input row of kernel row 0 for output row `oy` (wrapping above the input).
    #[inline]
    fn y_of(&self, oy: usize) -> usize {
        oy.wrapping_sub(self.pad_top)
    }

    /// Input row `oy + 2` (less `pad_top`) completes output row `oy` (`a`) and feeds rows `oy + 1`
    /// (`b`) and `oy + 2` (`d`).
    ///
    /// # Safety
    /// As [`Dw3Walk::walk`], `oy` in `oys`.
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
    unsafe fn step<const EDGE: bool>(
        &self,
        oy: usize,
        s: &Dw3Strip,
        [a, b, d]: [&mut [__m512; DW_STRIP]; 3],
    ) {
        // SAFETY: the contract.
        unsafe {
            if let Some(r) = self.row::<EDGE>(self.y_of(oy).wrapping_add(2), s) {
                Self::fma(&r, s, 2, a);
                Self::fma(&r, s, 1, b);
                Self::fma(&r, s, 0, d);
            }
            self.store(a, oy, s);
        }
    }

    /// Every output row of `rows` in bands of [`DW_BAND3`] rows: per band and 16-channel
    /// block, the strips left to right, each computing all of the band's rows of its
    /// [`DW_STRIP`] pixels before storing them (see [`dw3x3_f32_cols`] for when).
    ///
    /// # Safety
    /// AVX-512 F/VL; `self` made by [`dw3x3_f32_cols`] for `dw`, `out_w` and `pad_left`,
    /// `rows` in `self.oys`.
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
    unsafe fn bands(&self, dw: &DwF32, out_w: usize, pad_left: usize, rows: Range<usize>) {
        let c = self.c;
        let mut band = rows.start;
        while band < rows.end {
            let oys = band..(band + DW_BAND3).min(rows.end);
            let mut cb = 0;
            while cb < c {
                let mask = lanes16(c - cb);
                let wb = dw3x3_block_weights(dw, cb, mask);
                let mut ox = 0;
                while ox < out_w {
                    let np = (out_w - ox).min(DW_STRIP);
                    let (s, inside) = self.strip(ox, np, pad_left, cb, mask, wb);
                    // SAFETY: the contract; the strip is as `band` needs (`inside` as `strip`
                    // found it).
                    unsafe {
                        if inside {
                            self.band::<false>(oys.clone(), &s);
                        } else {
                            self.band::<true>(oys.clone(), &s);
                        }
                    }
                    ox += np;
                }
                cb += 16;
            }
            band = oys.end;
        }
    }

    /// One strip of up to [`DW_BAND3`] output rows `oys`: its `oys.len() + 2` input rows are
    /// each loaded once and multiply-added into every row they feed; the stores come after
    /// all loads.
    ///
    /// # Safety
    /// As [`Dw3Walk::walk`], `oys.len() <= DW_BAND3`.
    #[inline]
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
    unsafe fn band<const EDGE: bool>(&self, oys: Range<usize>, s: &Dw3Strip) {
        let n = oys.len();
        let y0 = self.y_of(oys.start);
        let mut acc = [[s.bias; DW_STRIP]; DW_BAND3];
        for i in 0..DW_BAND3 + 2 {
            if i >= n + 2 {
                break;
            }
            // SAFETY: the contract.
            let Some(r) = (unsafe { self.row::<EDGE>(y0.wrapping_add(i), s) }) else {
                continue;
            };
            // Input row i is kernel row i - j of output row j.
            for (j, acc) in acc.iter_mut().enumerate().take(n) {
                if i >= j && i - j < 3 {
                    Self::fma(&r, s, i - j, acc);
                }
            }
        }
        for (j, acc) in acc.iter_mut().enumerate().take(n) {
            // SAFETY: the contract; oys.start + j < oys.end.
            unsafe { self.store(acc, oys.start + j, s) };
        }
    }

    /// One strip down the output rows `rows`: every input row is loaded once and
    /// multiply-added into each output row it feeds (accumulators rotate, so the loops are
    /// unrolled by their count).
    ///
    /// # Safety
    /// AVX-512 F/VL; `s.ox + s.np <= out_w`, `s.x0 = s.ox - pad_left` (wrapping), lanes
    /// of `s.mask` below `c - s.cb`; when not `EDGE`, columns `x0..x0 + 6` inside
    /// the input.
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
    unsafe fn walk<const EDGE: bool>(&self, rows: Range<usize>, s: &Dw3Strip) {
        let (o0, o1) = (rows.start, rows.end);
        let y0 = self.y_of(o0);
        // SAFETY (all calls below): the contract; output rows stored are in o0..o1.
        unsafe {
            let (mut a, mut b, mut d) =
                ([s.bias; DW_STRIP], [s.bias; DW_STRIP], [s.bias; DW_STRIP]);
            if let Some(r) = self.row::<EDGE>(y0, s) {
                Self::fma(&r, s, 0, &mut a);
            }
            if let Some(r) = self.row::<EDGE>(y0.wrapping_add(1), s) {
                Self::fma(&r, s, 1, &mut a);
                Self::fma(&r, s, 0, &mut b);
            }
            let mut oy = o0;
            while oy + 3 <= o1 {
                self.step::<EDGE>(oy, s, [&mut a, &mut b, &mut d]);
                self.step::<EDGE>(oy + 1, s, [&mut b, &mut d, &mut a]);
                self.step::<EDGE>(oy + 2, s, [&mut d, &mut a, &mut b]);
                oy += 3;
            }
            if oy < o1 {
                self.step::<EDGE>(oy, s, [&mut a, &mut b, &mut d]);
            }
            if oy + 1 < o1 {
                self.step::<EDGE>(oy + 1, s, [&mut b, &mut d, &mut a]);
            }
        }
    }
}

/// [`dw_f32_rows`] compiled for AVX-512, so the pixel kernel inlines into the window loop.
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
fn dw_f32_rows_avx512(
    dw: &DwF32,
    input: &[f32],
    dims: [usize; 5],
    geometry: [usize; 6],
    oys: Range<usize>,
    out: &mut [f32],
) {
    let c = dw.c;
    super::for_each_window_ptrs(input, c, dims, geometry, oys, |ptrs, at| {
        // SAFETY: this function's features; for_each_window_ptrs gives c readable elements at
        // every non-null pointer.
        unsafe { dw_f32_pixel_avx512(dw, ptrs, &mut out[at..at + c]) };
    });
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
unsafe fn dw3x3_quad<const S: usize, const EDGE: bool>(
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
unsafe fn dw_f32_pixel_avx512(dw: &DwF32, ptrs: &[*const f32; DW_MAX_TAPS + 1], out: &mut [f32]) {
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

#[target_feature(enable = "avx2,fma")]
fn dw_f32_pixel_avx2(dw: &DwF32, input: &[f32], taps: &[usize], out: &mut [f32]) {
    let (c, cp) = (dw.c, dw.cp);
    assert!(taps.len() == dw.taps && out.len() == c && dw.w.len() == dw.taps * cp);
    for cb in 0..cp / 8 {
        let ch = cb * 8;
        let full = ch + 8 <= c;
        let mut acc = _mm256_setzero_ps();
        for (t, &px) in taps.iter().enumerate() {
            if px == usize::MAX {
                continue;
            }
            let start = px * c + ch;
            let x = if full {
                let s = &input[start..start + 8];
                // SAFETY: s has 8 floats.
                unsafe { _mm256_loadu_ps(s.as_ptr()) }
            } else {
                let mut tmp = [0f32; 8];
                tmp[..c - ch].copy_from_slice(&input[start..start + c - ch]);
                // SAFETY: tmp has 8 floats.
                unsafe { _mm256_loadu_ps(tmp.as_ptr()) }
            };
            let w = &dw.w[t * cp + ch..t * cp + ch + 8];
            // SAFETY: w has 8 floats.
            let wv = unsafe { _mm256_loadu_ps(w.as_ptr()) };
            acc = _mm256_fmadd_ps(x, wv, acc);
        }
        let bias = &dw.bias[ch..ch + 8];
        // SAFETY: bias has 8 floats.
        let v = activate(
            _mm256_add_ps(acc, unsafe { _mm256_loadu_ps(bias.as_ptr()) }),
            dw.act,
        );
        if full {
            let o = &mut out[ch..ch + 8];
            // SAFETY: o has 8 floats.
            unsafe { _mm256_storeu_ps(o.as_mut_ptr(), v) };
        } else {
            let mut tmp = [0f32; 8];
            // SAFETY: tmp has 8 floats.
            unsafe { _mm256_storeu_ps(tmp.as_mut_ptr(), v) };
            out[ch..c].copy_from_slice(&tmp[..c - ch]);
        }
    }
}

// ------------------------------------------------------------------ float Winograd F(2x2, 3x3)

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

/// The mask of the first `min(n, 16)` lanes.
#[inline]
fn lanes16(n: usize) -> __mmask16 {
    if n >= 16 {
        0xFFFF
    } else {
        ((1u32 << n) - 1) as __mmask16
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

/// The parameters [`Rq16::load`] and [`Rq8::load`] derive for channels `c..c + 16`, for the
/// tests to compare with [`Mbqm::new`] and [`Requant::fused_add`].
#[cfg(test)]
pub(crate) struct Derived {
    /// `[left, right, mask, thr]` per channel (zero in the fused form).
    pub(crate) stages: [[i32; 16]; 4],
    /// The fused form's constant and `e - 1` per channel, in channel order.
    pub(crate) add: [i64; 16],
    pub(crate) rshift: [i32; 16],
    /// `add` and `rshift` through [`fused_cache`] and [`Rq16::load_cached`] (fused form only).
    pub(crate) cached: Option<([i64; 16], [i32; 16])>,
    /// [`Rq8::load`]'s `[left, right, mask, thr]` of the same channels (both halves).
    pub(crate) stages_8: [[i32; 16]; 4],
}

/// [`Derived`] of channels `c..c + 16`; `None` without AVX-512.
#[cfg(test)]
pub(crate) fn derived(rq: &Requant, c: usize) -> Option<Derived> {
    if !available(Isa::Avx512Vnni) {
        return None;
    }
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
    fn run(rq: &Requant, c: usize) -> Derived {
        // SAFETY (transmutes): vectors and integer arrays of the same size, any bits valid.
        let v16 = |v: __m512i| unsafe { core::mem::transmute::<__m512i, [i32; 16]>(v) };
        let v64 = |v: __m512i| unsafe { core::mem::transmute::<__m512i, [i64; 8]>(v) };
        let v8 = |v: __m256i| unsafe { core::mem::transmute::<__m256i, [i32; 8]>(v) };
        let in_order = |p: &Rq16| -> [i64; 16] {
            let (even, odd) = (v64(p.add_even), v64(p.add_odd));
            core::array::from_fn(|i| if i % 2 == 0 { even[i / 2] } else { odd[i / 2] })
        };
        let p = Rq16::load(rq, c);
        let cached = rq.fused.then(|| {
            let mut cache = vec![0; rq.shift.len() / 16 * FUSED_CACHE_WORDS];
            fused_cache(rq, &mut cache);
            let q = Rq16::load_cached(rq, &cache, c);
            (in_order(&q), v16(q.rshift))
        });
        let (h0, h1) = (Rq8::load(rq, c), Rq8::load(rq, c + 8));
        let both = |a: __m256i, b: __m256i| {
            let (a, b) = (v8(a), v8(b));
            core::array::from_fn(|i| if i < 8 { a[i] } else { b[i - 8] })
        };
        Derived {
            stages: [v16(p.left), v16(p.right), v16(p.mask), v16(p.thr)],
            add: in_order(&p),
            rshift: v16(p.rshift),
            cached,
            stages_8: [
                both(h0.left, h1.left),
                both(h0.right, h1.right),
                both(h0.mask, h1.mask),
                both(h0.thr, h1.thr),
            ],
        }
    }
    // SAFETY: AVX-512 F/BW/VL are available (checked above).
    Some(unsafe { run(rq, c) })
}
