//! The AVX-512 VNNI int8 GEMM tile with its requantization fused in: the accumulators go from
//! registers to output bytes.

use super::*;

/// Independent accumulator chains over the `k` groups for a tile of `mr` rows (`wide`: 32
/// channels, else 16). `vpdpbusd` adds into its accumulator with a latency of about five
/// cycles, so a tile with fewer accumulators than that (one row of a dense layer: two) waits
/// on each; summing alternate groups into separate accumulators, added at the end, keeps
/// about six in flight, with at most 16 accumulator registers.
pub(crate) const fn rq512_chains(mr: usize, wide: bool) -> usize {
    let per_group = if wide { 2 * mr } else { mr };
    let want = 6usize.div_ceil(per_group);
    let cap = 8 / mr;
    let c = if want < cap { want } else { cap };
    if c >= 4 {
        4
    } else if c >= 2 {
        2
    } else {
        1
    }
}

/// The AVX-512 VNNI tile with its requantization: `out[r * stride + j] = requant(sum_g
/// a[r * groups + g] · b[g][j])` for `r < rows`, `j < cn`, channel `c0 + j` of `rq` (`fused`:
/// [`fused_cache`] of `rq`, with the fused form). The accumulators go from registers to bytes;
/// nothing else is written.
/// `narrow` (for `cn <= 16`) sums the first 16 channels only, half the multiply-adds.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
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
    narrow: bool,
) {
    assert!((1..=8).contains(&rows) && a.len() >= groups * 8 && b.len() >= groups * 128);
    assert!((1..=32).contains(&cn) && c0 + 32 <= rq.bias.len() && (!narrow || cn <= 16));
    assert!(out.len() >= (rows - 1) * stride + cn);
    macro_rules! dispatch {
        ($wide:literal, $($n:literal)*) => {
            match rows {
                // SAFETY: only called for Isa::Avx512Vnni, chosen when the CPU has AVX-512
                // F/BW/VL/VNNI (`available`); `a` has rows of `groups` words and `b`
                // `groups * 128` bytes, and `out` holds every (row, channel) stored (asserted);
                // the narrow tile (`false`) only for `cn <= 16` (asserted).
                $($n => unsafe {
                    tile_rq_i8_avx512vnni::<$n, $wide, { rq512_chains($n, $wide) }>(
                        a.as_ptr(), groups, b.as_ptr(), groups, rq, fused, c0, cn,
                        out.as_mut_ptr(), stride)
                },)*
                _ => unreachable!(),
            }
        };
    }
    if narrow {
        dispatch!(false, 1 2 3 4 5 6 7 8)
    } else {
        dispatch!(true, 1 2 3 4 5 6 7 8)
    }
}

/// # Safety
/// AVX-512 F/BW/VL/VNNI; `a` readable for `(MR - 1) * row_stride + groups` words, `b` for
/// `groups * 128` bytes, `rq`'s arrays for channels `c0..c0 + 32`, and `out` writable at
/// `r * stride + j` for `r < MR`, `j < cn <= 32` (`cn <= 16` unless `WIDE`: the narrow tile
/// sums the first 16 channels only). `MR * CH <= 8`.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn tile_rq_i8_avx512vnni<const MR: usize, const WIDE: bool, const CH: usize>(
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
    assert!(c0 + 32 <= rq.bias.len() && MR * CH <= 8 && CH >= 1);
    // SAFETY: channels c0..c0 + 32 of the bias (asserted).
    let (bias0, bias1) = unsafe {
        (
            _mm512_loadu_si512(rq.bias.as_ptr().add(c0) as *const __m512i),
            _mm512_loadu_si512(rq.bias.as_ptr().add(c0 + 16) as *const __m512i),
        )
    };
    // Chain `s` of row `r` at `acc[s * MR + r]`: chain 0 starts from the bias (wrapping, as
    // `acc + bias` would), the others from zero; chain `s` takes the groups `g` with `g % CH
    // == s` (the last `groups % CH` go to chain 0). Wrapping i32 sums in any order are the
    // same sum, so the result is that of one chain.
    let z = _mm512_setzero_si512();
    let mut acc = [[z; 2]; 8];
    for acc in acc.iter_mut().take(MR) {
        *acc = [bias0, bias1];
    }
    // Group `g` into chain `s`.
    let step = |acc: &mut [[__m512i; 2]; 8], g: usize, s: usize| {
        // SAFETY: g < groups (the callers), so the 128 bytes at b + 128 g and the words
        // a[r * row_stride + g], r < MR, are in bounds (the caller's contract).
        unsafe {
            let bp = b.add(g * 128);
            let b0 = _mm512_loadu_si512(bp as *const __m512i);
            let ap = a.add(g);
            if WIDE {
                let b1 = _mm512_loadu_si512(bp.add(64) as *const __m512i);
                for r in 0..MR {
                    let av = _mm512_set1_epi32(*ap.add(r * row_stride));
                    let acc = &mut acc[s * MR + r];
                    acc[0] = _mm512_dpbusd_epi32(acc[0], av, b0);
                    acc[1] = _mm512_dpbusd_epi32(acc[1], av, b1);
                }
            } else {
                for r in 0..MR {
                    let av = _mm512_set1_epi32(*ap.add(r * row_stride));
                    let acc = &mut acc[s * MR + r];
                    acc[0] = _mm512_dpbusd_epi32(acc[0], av, b0);
                }
            }
        }
    };
    let mut g = 0;
    while g + CH <= groups {
        for s in 0..CH {
            step(&mut acc, g + s, s);
        }
        g += CH;
    }
    while g < groups {
        step(&mut acc, g, 0);
        g += 1;
    }
    for s in 1..CH {
        for r in 0..MR {
            acc[r][0] = _mm512_add_epi32(acc[r][0], acc[s * MR + r][0]);
            if WIDE {
                acc[r][1] = _mm512_add_epi32(acc[r][1], acc[s * MR + r][1]);
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
    for (r, acc) in acc.iter().enumerate().take(MR) {
        // SAFETY: row r's channels 0..min(cn, 16) are writable (the caller's contract).
        unsafe { _mm_mask_storeu_epi8(out.add(r * stride), lanes(cn), p.apply_biased(acc[0])) };
    }
    if WIDE && cn > 16 {
        let p = Rq16::load_cached(rq, fused, c0 + 16);
        for (r, acc) in acc.iter().enumerate().take(MR) {
            // SAFETY: row r's channels 16..cn are writable (the caller's contract).
            unsafe {
                let v = p.apply_biased(acc[1]);
                _mm_mask_storeu_epi8(out.add(r * stride + 16), lanes(cn - 16), v)
            };
        }
    }
}
