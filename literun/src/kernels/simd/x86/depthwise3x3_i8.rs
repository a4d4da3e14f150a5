//! The AVX-512 int8 3x3 depthwise ring kernel: strips of output pixels over a ring of
//! interleaved input rows that stays in L1.

use super::*;

/// Bytes of the 3x3 kernel's ring: three interleaved input rows and a padding row of
/// [`DW3_STRIP`] units of 256 bytes.
pub(super) const DW3_RING_BYTES: usize = 4 * DW3_STRIP * 256;

/// One call of the 3x3 kernel: output rows `oys` (`out_w` pixels of `c` channels) from one
/// batch `input` (`[in_h, in_w, c]`), with the fused constants of `dw3.rq` in `cache`.
pub(super) struct Dw3Call<'a> {
    pub(super) dw3: &'a Dw3,
    pub(super) c: usize,
    /// The input zero point (padding reads it).
    pub(super) zero_point: i8,
    pub(super) input: &'a [i8],
    pub(super) in_hw: [usize; 2],
    pub(super) out_w: usize,
    pub(super) stride: [usize; 2],
    /// Top and left.
    pub(super) pad: [usize; 2],
    pub(super) oys: Range<usize>,
    pub(super) cache: &'a [i32],
}

/// A 3x3 int8 depthwise convolution without dilation ([`Dw3`]) into `out` (rows `k.oys` of
/// `out_w * c`), per 64-lane block ([`dw3x3_block`]). `ring` ([`DW3_RING_BYTES`], 64-byte
/// aligned) holds three interleaved input rows and a row of padding.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn dw3x3_i8_rows_avx512(k: &Dw3Call, out: &mut [i8], ring: &mut [i8]) {
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
