//! Int8 DEPTHWISE_CONV_2D (depth multiplier 1) over packed weights ([`DwI8`]), with the
//! 3x3 ring kernel's parameters ([`Dw3`]).

use super::*;

/// Ring units (of 1, 2 or 4 output pixels, or twice that when one unit serves two) per strip
/// of the int8 3x3 depthwise ring kernel, whose ring of interleaved input rows (three rows and a
/// padding row, 256 bytes per unit and row) should stay in L1.
pub(crate) const DW3_STRIP: usize = 32;

/// i32 words of that ring, plus 15 to align it to 64 bytes.
const DW3_RING_WORDS: usize = 4 * DW3_STRIP * 64 + 15;

/// Constant int8 depthwise weights (`[1, KH, KW, C]`, depth multiplier 1), packed as pairs of
/// taps interleaved per 16 channels for `vpmaddwd`.
#[derive(Clone, Debug)]
pub struct DwI8 {
    pub(crate) isa: Isa,
    pub(crate) c: usize,
    pub(crate) taps: usize,
    /// x86 AVX2 and AVX-VNNI: block `cb` of 16 channels, tap pair `t`: 32 i16 at `(cb * pairs +
    /// t) * 32`, with `input_offset * sum(w)` in `rq`'s bias;
    /// AVX-512: blocks of 32 channels (see [`DwI8::pack_avx512`]).
    /// NEON: tap `t`, channel `ch` at `t * cp + ch` (`cp`: channels padded to 16).
    pub(crate) w: Vec<i16>,
    /// AVX-512 with 64 or more channels: the `vpdpbusd` layout of [`DwI8::pack_avx512_quads`]
    /// (then `w` is empty and `rq` is in that layout's channel order).
    pub(crate) w8: Vec<i8>,
    /// The `w8` layout holds channels `0..32` twice (`c <= 32`): two output pixels per block.
    pub(crate) pairs: bool,
    /// AVX-512 with nine taps: the layout of the 3x3 kernel (used for 3x3 windows without
    /// dilation).
    pub(crate) dw3: Option<Box<Dw3>>,
    pub(crate) rq: Requant,
    pub(crate) input_offset: i16,
}

impl DwI8 {
    pub fn pack(
        isa: Isa,
        filter: &[i8],
        taps: usize,
        c: usize,
        bias: Option<&[i32]>,
        q: &OutputStage,
    ) -> Option<DwI8> {
        if isa == Isa::Portable
            || !isa.available()
            || taps == 0
            || taps > DW_MAX_TAPS
            || c == 0
            || filter.len() != taps * c
            || q.multipliers.len() != c
            || q.single_rounding
            || !(-255..=255).contains(&q.input_offset)
        {
            return None;
        }
        if isa == Isa::Avx512Vnni {
            // The zero point must be a byte for the unsigned offset input.
            let bytes = (-127..=128).contains(&q.input_offset);
            let mut dw = if bytes && c >= 64 {
                Self::pack_avx512_quads(filter, taps, c, bias, q)?
            } else if bytes && c <= 32 {
                Self::pack_avx512_pairs(filter, taps, c, bias, q)?
            } else {
                Self::pack_avx512(filter, taps, c, bias, q)?
            };
            if bytes && taps == 9 {
                dw.dw3 = Dw3::pack(filter, c, bias, q).map(Box::new);
            }
            return Some(dw);
        }
        let blocks = c.div_ceil(16);
        if isa.neon() {
            let rq = Requant::new(q, blocks * 16, |ch| bias.map_or(0, |b| b[ch]))?;
            let cp = blocks * 16;
            let mut w = vec![0i16; taps * cp];
            for t in 0..taps {
                for ch in 0..c {
                    w[t * cp + ch] = i16::from(filter[t * c + ch]);
                }
            }
            return Some(DwI8 {
                isa,
                c,
                taps,
                w,
                rq,
                w8: Vec::new(),
                dw3: None,
                pairs: false,
                input_offset: q.input_offset as i16,
            });
        }
        // x86 AVX2: padding taps read the input zero point, so `input_offset * sum(w)` joins
        // the bias and the kernel adds nothing per tap. The output stage is in the order the
        // kernel's accumulators hold the channels ([`avx2_pos`]).
        let padded = blocks * 16;
        let at = |p: usize| Some(avx2_pos(p)).filter(|&ch| ch < c);
        let qp = OutputStage {
            multipliers: (0..padded)
                .map(|p| at(p).map_or(1 << 30, |ch| q.multipliers[ch]))
                .collect(),
            shifts: (0..padded)
                .map(|p| at(p).map_or(-1, |ch| q.shifts[ch]))
                .collect(),
            ..q.clone()
        };
        let mut rq = Requant::new(&qp, padded, |p| {
            at(p).map_or(0, |ch| {
                let wsum: i32 = (0..taps).map(|t| i32::from(filter[t * c + ch])).sum();
                bias.map_or(0, |b| b[ch])
                    .wrapping_add(q.input_offset.wrapping_mul(wsum))
            })
        })?;
        // Each product is of an input value or the zero point (at most 255 in magnitude) and
        // a weight.
        rq.allow_unsigned(taps as i64 * 256 * 128);
        let w = interleave_tap_pairs(filter, taps, c, 16);
        Some(DwI8 {
            isa,
            c,
            taps,
            w,
            rq,
            w8: Vec::new(),
            dw3: None,
            pairs: false,
            input_offset: q.input_offset as i16,
        })
    }

    /// The AVX-512 layout: [`interleave_tap_pairs`] in blocks of 32 channels. Padding taps read
    /// the input zero point, so `input_offset * sum(w)` joins the bias and the kernel adds
    /// nothing per tap.
    fn pack_avx512(
        filter: &[i8],
        taps: usize,
        c: usize,
        bias: Option<&[i32]>,
        q: &OutputStage,
    ) -> Option<DwI8> {
        let blocks = c.div_ceil(32);
        let w = interleave_tap_pairs(filter, taps, c, 32);
        let rq = Requant::new(q, blocks * 32, |ch| {
            let wsum: i32 = (0..taps).map(|t| i32::from(filter[t * c + ch])).sum();
            bias.map_or(0, |b| b[ch])
                .wrapping_add(q.input_offset.wrapping_mul(wsum))
        })?;
        Some(DwI8 {
            isa: Isa::Avx512Vnni,
            c,
            taps,
            w,
            rq,
            w8: Vec::new(),
            dw3: None,
            pairs: false,
            input_offset: q.input_offset as i16,
        })
    }

    /// Where channel `ch` of a 64-channel block sits in the `vpdpbusd` layout: accumulator `j`
    /// (of four), 128-bit lane `l`, 32-bit lane `i` hold channel `16 l + 4 j + i` (the order
    /// `vpunpck{l,h}bw` then `vpunpck{l,h}wd` leave four taps' channels in), at position
    /// `16 j + 4 l + i` of the block. The map is its own inverse.
    fn quad_pos(ch: usize) -> usize {
        let (b, r) = (ch / 64 * 64, ch % 64);
        let (l, j, i) = (r / 16, r % 16 / 4, r % 4);
        b + 16 * j + 4 * l + i
    }

    /// The requantization of a `vpdpbusd` layout, whose kernel offsets the input to unsigned
    /// (`x + 128`): `(input_offset - 128) * sum(w)` joins the bias, and the parameters are in
    /// position order, `at(p)` being the channel at position `p` of `padded` (None: unused, a
    /// harmless stage whose outputs are never stored).
    fn unsigned_requant(
        filter: &[i8],
        taps: usize,
        c: usize,
        bias: Option<&[i32]>,
        q: &OutputStage,
        padded: usize,
        at: impl Fn(usize) -> Option<usize>,
    ) -> Option<Requant> {
        let qp = OutputStage {
            multipliers: (0..padded)
                .map(|p| at(p).map_or(1 << 30, |ch| q.multipliers[ch]))
                .collect(),
            shifts: (0..padded)
                .map(|p| at(p).map_or(-1, |ch| q.shifts[ch]))
                .collect(),
            ..q.clone()
        };
        let off = q.input_offset - 128;
        Requant::new(&qp, padded, |p| {
            at(p).map_or(0, |ch| {
                let wsum: i32 = (0..taps).map(|t| i32::from(filter[t * c + ch])).sum();
                bias.map_or(0, |b| b[ch])
                    .wrapping_add(off.wrapping_mul(wsum))
            })
        })
    }

    /// The AVX-512 layout for 64 or more channels: blocks of 64 channels, groups of four taps
    /// (missing taps zero) as four 64-byte vectors per group, vector `j` holding the four taps'
    /// weights of the channels at positions `16 j..16 j + 16` of [`Self::quad_pos`] (byte `t`
    /// of a 32-bit lane is tap `4 q + t` of group `q`). The kernel offsets the input to
    /// unsigned (`x + 128`; padding taps read the zero point + 128), so `(input_offset - 128) *
    /// sum(w)` joins the bias; the requantization parameters are stored in position order.
    fn pack_avx512_quads(
        filter: &[i8],
        taps: usize,
        c: usize,
        bias: Option<&[i32]>,
        q: &OutputStage,
    ) -> Option<DwI8> {
        let (blocks, quads) = (c.div_ceil(64), taps.div_ceil(4));
        let padded = blocks * 64;
        let mut w8 = vec![0i8; blocks * quads * 256];
        for ch in 0..c {
            let pos = Self::quad_pos(ch);
            let (b, j, lane) = (pos / 64, pos % 64 / 16, pos % 16);
            for t in 0..taps {
                let (qd, byte) = (t / 4, t % 4);
                w8[((b * quads + qd) * 4 + j) * 64 + lane * 4 + byte] = filter[t * c + ch];
            }
        }
        let at = |pos: usize| Some(Self::quad_pos(pos)).filter(|&ch| ch < c);
        let rq = Self::unsigned_requant(filter, taps, c, bias, q, padded, at)?;
        Some(DwI8 {
            isa: Isa::Avx512Vnni,
            c,
            taps,
            w: Vec::new(),
            w8,
            dw3: None,
            pairs: false,
            rq,
            input_offset: q.input_offset as i16,
        })
    }

    /// [`Self::pack_avx512_quads`] for `c <= 32` channels: those of a second output pixel take
    /// channels `32..64` of the block, with the same weights and parameters.
    fn pack_avx512_pairs(
        filter: &[i8],
        taps: usize,
        c: usize,
        bias: Option<&[i32]>,
        q: &OutputStage,
    ) -> Option<DwI8> {
        let src = |ch: usize| Some(ch % 32).filter(|&s| s < c);
        let f64: Vec<i8> = (0..taps * 64)
            .map(|i| src(i % 64).map_or(0, |s| filter[i / 64 * c + s]))
            .collect();
        let b64: Vec<i32> = (0..64)
            .map(|ch| src(ch).map_or(0, |s| bias.map_or(0, |b| b[s])))
            .collect();
        let q64 = OutputStage {
            multipliers: (0..64)
                .map(|ch| src(ch).map_or(1 << 30, |s| q.multipliers[s]))
                .collect(),
            shifts: (0..64)
                .map(|ch| src(ch).map_or(-1, |s| q.shifts[s]))
                .collect(),
            ..q.clone()
        };
        let mut dw = Self::pack_avx512_quads(&f64, taps, 64, Some(&b64), &q64)?;
        dw.c = c;
        dw.pairs = true;
        Some(dw)
    }

    pub fn bytes(&self) -> usize {
        let dw3 = self.dw3.as_ref().map_or(0, |d| {
            d.w.len() + d.rq.bytes() + d.stage.as_ref().map_or(0, Dw3Stage::bytes)
        });
        self.w.len() * 2 + self.w8.len() + dw3 + self.rq.bytes()
    }

    /// Keeps only the layout that windows of `kh x kw` with dilation `dil` run: the 3x3 ring
    /// kernel's ([`Dw3`]) for 3x3 windows without dilation, else the general one. Each is
    /// the size of the filter, so keeping both would double the prepacked weights.
    pub fn for_window(mut self, kh: usize, kw: usize, dil: [usize; 2]) -> DwI8 {
        if [kh, kw, dil[0], dil[1]] == [3, 3, 1, 1] && self.dw3.is_some() {
            self.w = Vec::new();
            self.w8 = Vec::new();
        } else {
            self.dw3 = None;
        }
        self
    }

    /// i32 words of scratch the AVX-512 kernels use: the fused form's constants, derived once
    /// per call (`x86::fused_cache`) rather than per pixel; for the 3x3 kernel those of its
    /// own output stage, then its ring of interleaved input rows (`DW3_RING_WORDS`).
    pub fn scratch_i32(&self) -> usize {
        let dw3 = self
            .dw3
            .as_ref()
            .map_or(0, |d| fused_cache_scratch(self.isa, &d.rq) + DW3_RING_WORDS);
        fused_cache_scratch(self.isa, &self.rq).max(dw3)
    }
}

/// Int8 3x3 depthwise weights for the AVX-512 ring kernel (`x86::dw3x3_i8_rows_avx512`), which
/// interleaves each input row once as `[in(x), in(x + 1), in(x + 2), *]` per channel (offset
/// to unsigned) and takes one `vpdpbusd` per kernel row.
///
/// Blocks of 64 lanes in the channel order of [`DwI8::quad_pos`]: lane (byte) `i` of block `b`
/// is channel `64 b + i`, except in the last block, whose channels fill 16 or 32 lanes when
/// they fit ([`Dw3::tail_ppu`] pixels side by side: lane `i` is channel `64 b + i % (64 /
/// tail_ppu)`).
#[derive(Clone, Debug)]
pub(crate) struct Dw3 {
    /// Block `b`, kernel row `ky`, vector `j` (64 bytes at `((b * 3 + ky) * 4 + j) * 64`): the
    /// row's three weights as bytes 0-2 of each 32-bit lane (byte 3 zero) of the lanes at
    /// positions `16 j..16 j + 16` ([`DwI8::quad_pos`]).
    pub(crate) w: Vec<i8>,
    /// The output stage in position order, with `(input_offset - 128) * sum(w)` in the bias
    /// (padding reads the zero point, so the kernel adds nothing for it).
    pub(crate) rq: Requant,
    /// Output pixels per 64 lanes of the last block: 1, 2 or 4.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // (read by the x86 kernel only)
    pub(crate) tail_ppu: usize,
    /// `rq` in the unsigned-product form, where it applies.
    pub(crate) stage: Option<Dw3Stage>,
}

/// A fused output stage ([`Requant::fused`]) as `x86::RqU16` computes it, per position.
///
/// With `x` the accumulator plus bias, `m` the multiplier, `e >= 1` the right shift and `K =
/// Requant::fused_add(e, off)`, the fused form is `((p + K) >> 31 - [x < 0]) >> e` with `p = x
/// m` (`[p < 0] = [x < 0]` for `m > 0`; for `m = 0` both give the offset). With `y = x ^ 2^31`
/// (`x + 2^31` as unsigned, what accumulating from `bias + 2^31` leaves) the 32x32-bit unsigned
/// product `y * 2m = 2p + 2^32 m`, so `T = y * 2m + (2K - 2^32 (m + 1))` is `2 (p + K) - 2^32`
/// (modulo 2^64, exact as `|p + K| + 2^32 < 2^62`, checked here from the bias and the largest
/// 3x3 sum), whose high half is `(p + K) >> 31 - 1`; adding the top bit of `y` (`1 - [x < 0]`)
/// gives the first shift's result, then `>> e`: nine vector operations per 16 outputs where
/// `x86::Rq16` takes eleven (the sign's correction moves from two 64-bit compares and masked
/// adds to one 32-bit shift and add, and the offset to unsigned into the bias).
#[derive(Clone, Debug)]
pub(crate) struct Dw3Stage {
    /// `bias + 2^31` (wrapping).
    pub(crate) bias: Vec<i32>,
    /// `2 m` as unsigned.
    pub(crate) m2: Vec<u32>,
    /// `2K - 2^32 (m + 1)` modulo 2^64.
    pub(crate) add: Vec<i64>,
    pub(crate) e: Vec<u32>,
}

impl Dw3Stage {
    fn new(rq: &Requant) -> Option<Dw3Stage> {
        if !rq.fused {
            return None;
        }
        let n = rq.bias.len();
        let mut st = Dw3Stage {
            bias: Vec::with_capacity(n),
            m2: Vec::with_capacity(n),
            add: Vec::with_capacity(n),
            e: Vec::with_capacity(n),
        };
        for p in 0..n {
            let (m, e, bias) = (rq.mult[p], -i32::from(rq.shift[p]), rq.bias[p]);
            if m < 0 || e < 1 {
                return None;
            }
            let k = Requant::fused_add(e, rq.out_offset);
            // |x| <= |bias| + 9 * 255 * 128 (nine taps of unsigned input times int8 weights).
            let x_max = (i128::from(bias).abs() + 9 * 255 * 128).min(1 << 31);
            if x_max * i128::from(m) + k.abs() + (1 << 32) >= 1 << 62 {
                return None;
            }
            st.bias.push(bias.wrapping_add(i32::MIN));
            st.m2.push(2 * m as u32);
            st.add.push((2 * k - ((i128::from(m) + 1) << 32)) as i64);
            st.e.push(e as u32);
        }
        Some(st)
    }

    fn bytes(&self) -> usize {
        self.bias.len() * 4 + self.m2.len() * 4 + self.add.len() * 8 + self.e.len() * 4
    }
}

impl Dw3 {
    fn pack(filter: &[i8], c: usize, bias: Option<&[i32]>, q: &OutputStage) -> Option<Dw3> {
        let blocks = c.div_ceil(64);
        let last = c - 64 * (blocks - 1);
        let tail_ppu = match last {
            ..=16 => 4,
            17..=32 => 2,
            _ => 1,
        };
        // The channel at position p (None for unused lanes).
        let at = |p: usize| {
            let (b, lane) = (p / 64, DwI8::quad_pos(p % 64));
            let width = if b + 1 == blocks { 64 / tail_ppu } else { 64 };
            Some(64 * b + lane % width).filter(|&ch| ch < c)
        };
        let padded = blocks * 64;
        let mut w = vec![0i8; blocks * 768];
        for p in 0..padded {
            let Some(ch) = at(p) else { continue };
            let (b, j, lane) = (p / 64, p % 64 / 16, p % 16);
            for t in 0..9 {
                w[((b * 3 + t / 3) * 4 + j) * 64 + lane * 4 + t % 3] = filter[t * c + ch];
            }
        }
        let rq = DwI8::unsigned_requant(filter, 9, c, bias, q, padded, at)?;
        Some(Dw3 {
            w,
            stage: Dw3Stage::new(&rq),
            rq,
            tail_ppu,
        })
    }
}

/// The channel at position `p` of the AVX2 depthwise output stage: in each block of 16, the
/// order `vpunpck{l,h}wd` of two taps' widened channels leave the accumulators in (channels
/// 0-3, 8-11 in the first, 4-7, 12-15 in the second; [`interleave_tap_pairs`]). Its own
/// inverse.
fn avx2_pos(p: usize) -> usize {
    let r = p % 16;
    p - r + [0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15][r]
}

/// Depthwise weights for `vpmaddwd` / `vpdpwssd` in blocks of `block` (16 or 32) channels: tap
/// pair `pr` of block `cb` as `2 * block` i16 at `(cb * pairs + pr) * 2 * block`, in the order
/// `vpunpcklwd` / `vpunpckhwd` put two taps' channels (128-bit lane `l` holds channels
/// `8l..8l + 4` of the low half and `8l + 4..8l + 8` of the high half, as (tap0, tap1) pairs).
/// Missing taps and channels are zero.
fn interleave_tap_pairs(filter: &[i8], taps: usize, c: usize, block: usize) -> Vec<i16> {
    let (blocks, pairs, lanes) = (c.div_ceil(block), taps.div_ceil(2), block / 8);
    let at = |t: usize, ch: usize| -> i16 {
        if t < taps && ch < c {
            i16::from(filter[t * c + ch])
        } else {
            0
        }
    };
    let mut w = vec![0i16; blocks * pairs * 2 * block];
    for cb in 0..blocks {
        for pr in 0..pairs {
            let dst = &mut w[(cb * pairs + pr) * 2 * block..][..2 * block];
            for (half, base) in [(0usize, 0usize), (1, 4)] {
                for lane in 0..lanes {
                    for i in 0..4 {
                        let ch = cb * block + lane * 8 + base + i;
                        let o = half * block + lane * 8 + 2 * i;
                        dst[o] = at(2 * pr, ch);
                        dst[o + 1] = at(2 * pr + 1, ch);
                    }
                }
            }
        }
    }
    w
}

/// Int8 DEPTHWISE_CONV_2D (depth multiplier 1) through [`DwI8`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn depthwise_i8(
    dw: &DwI8,
    input: &[i8],
    in_shape: [usize; 4],
    k_hw: [usize; 2],
    p: &DepthwiseParams,
    output: &mut [i8],
    out_shape: [usize; 4],
    workers: &mut Workers,
) {
    #[cfg(target_arch = "x86_64")]
    {
        let geometry = [in_shape[1], in_shape[2], k_hw[0], k_hw[1], out_shape[2]];
        depthwise_rows(
            input,
            in_shape,
            k_hw,
            output,
            out_shape,
            workers,
            |inb, oys, o, cache| x86::dw_i8_rows(dw, inb, geometry, dw_geometry(p), oys, o, cache),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    depthwise_pixels(
        input,
        in_shape,
        k_hw,
        p,
        output,
        out_shape,
        workers,
        |inb, taps, o| {
            #[cfg(target_arch = "aarch64")]
            aarch64::dw_i8_pixel(dw.isa, dw, inb, taps, o);
            #[cfg(not(target_arch = "aarch64"))]
            let _ = (inb, taps, o);
        },
    );
}
