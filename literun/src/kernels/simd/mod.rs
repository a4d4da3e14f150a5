//! Fast paths for the operators where the time goes: int8 and float CONV_2D (1x1 as a GEMM, any
//! other size through an im2col row buffer), DEPTHWISE_CONV_2D (depth multiplier 1, any kernel,
//! stride, dilation and padding) and FULLY_CONNECTED; on x86-64 also int8 ADD/SUB and QUANTIZE
//! from float32 (no weights: chosen per operator like the others, bit-exact with the scalar
//! kernels).
//!
//! Everything here is chosen once, when the interpreter is prepared: [`Isa::detect`] picks the
//! best instruction set the CPU has, and the `pack_*` functions re-lay the constant weights for
//! it (counted in `Interpreter::prepacked_bytes`). At run time the drivers below walk the output
//! in tiles and call the ISA's micro-kernels (`x86.rs`: AVX2, AVX-VNNI, AVX-512; `aarch64.rs`:
//! NEON, and `sdot` where the CPU has it). Operators whose weights are not constant, grouped convolutions and depth multipliers
//! other than 1 keep the portable kernels.
//!
//! # Exactness
//! The int8 paths compute the same integers as the portable kernels: the accumulation is exact
//! (wrapping i32 arithmetic is associative), padding taps read the input zero point (which
//! contributes `w * (zp - zp) = 0`, as the reference's skipped taps), `input_offset * sum(w)`
//! and the bias are folded into one per-channel constant, and the requantization reproduces
//! `MultiplyByQuantizedMultiplier` bit for bit (see `x86::Rq8`). Float paths reorder the
//! sums (and fuse multiply-adds), so they agree with the portable kernels to ~1e-6 relative.
// The fast paths exist for x86-64 and aarch64: elsewhere `Isa::detect` is always `Portable`,
// these functions are never reached, and their SIMD calls compile away.
#![cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    allow(unused_variables, unused_mut, dead_code)
)]

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

use super::conv::Conv2dParams;
use super::depthwise_conv::DepthwiseParams;
use super::Activation;
use crate::quant::OutputStage;

#[cfg(target_arch = "aarch64")]
pub mod aarch64;
#[cfg(target_arch = "x86_64")]
pub mod x86;

/// Whether this target has fast kernels at all (x86-64 and aarch64): elsewhere the interpreter
/// leaves them, and the packing code, out of the build.
pub(crate) const FAST_KERNELS: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

/// The instruction set the fast kernels use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isa {
    /// The portable kernels only.
    Portable,
    /// x86-64 AVX2 + FMA.
    Avx2,
    /// AVX2 + FMA + AVX-VNNI (256-bit `vpdpbusd`).
    AvxVnni,
    /// AVX-512 F/BW/VL + VNNI (512-bit `vpdpbusd`).
    Avx512Vnni,
    /// aarch64 NEON (Advanced SIMD).
    Neon,
    /// NEON + the dot-product instructions (`sdot`, Armv8.2 `dotprod`).
    NeonDot,
}

impl Isa {
    /// The best instruction set this CPU supports.
    pub fn detect() -> Isa {
        for isa in [
            Isa::Avx512Vnni,
            Isa::AvxVnni,
            Isa::Avx2,
            Isa::NeonDot,
            Isa::Neon,
        ] {
            if isa.available() {
                return isa;
            }
        }
        Isa::Portable
    }

    /// Whether this CPU can run `self`'s kernels.
    pub fn available(self) -> bool {
        match self {
            Isa::Portable => true,
            #[cfg(target_arch = "x86_64")]
            _ => x86::available(self),
            #[cfg(target_arch = "aarch64")]
            _ => aarch64::available(self),
            #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
            _ => false,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::AvxVnni => "avx-vnni",
            Isa::Avx512Vnni => "avx512-vnni",
            Isa::Neon => "neon",
            Isa::NeonDot => "neon-dot",
        }
    }

    /// Rows of the int8 GEMM tile.
    fn mr_i8(self) -> usize {
        match self {
            Isa::Avx512Vnni => 8,
            Isa::AvxVnni => 6,
            _ => 4,
        }
    }

    /// Columns (output channels) of the int8 GEMM tile.
    fn nr_i8(self) -> usize {
        match self {
            Isa::Avx512Vnni => 32,
            _ => 16,
        }
    }

    /// Bytes of `k` per 32-bit lane in the int8 tile: 4 with `vpdpbusd` and `sdot`, 2 with
    /// `vpmaddwd` and NEON's `vmull_s16`.
    fn kg_i8(self) -> usize {
        match self {
            Isa::Avx512Vnni | Isa::AvxVnni | Isa::NeonDot => 4,
            _ => 2,
        }
    }

    /// Whether the int8 GEMM's left-hand side is offset to unsigned (`vpdpbusd` multiplies
    /// unsigned by signed bytes; `sdot` is signed by signed).
    fn vnni(self) -> bool {
        matches!(self, Isa::Avx512Vnni | Isa::AvxVnni)
    }

    /// Whether `self` is one of the aarch64 ISAs.
    fn neon(self) -> bool {
        matches!(self, Isa::Neon | Isa::NeonDot)
    }
}

/// i32 words per 16 channels of the fused form's derived constants (`x86::fused_cache`).
const FUSED_CACHE_WORDS: usize = 48;

/// Scratch words for the fused form's constants of `rq` (`padded` channels) with `isa`: none
/// unless AVX-512 uses the fused form; 15 more than the constants, for [`fused_cache_in`] to
/// align them.
fn fused_cache_scratch(isa: Isa, rq: &Requant) -> usize {
    if isa == Isa::Avx512Vnni && rq.fused {
        rq.bias.len() / 16 * FUSED_CACHE_WORDS + 15
    } else {
        0
    }
}

/// The 64-byte-aligned words of `scratch` (`words` from [`fused_cache_scratch`]) for the fused
/// form's constants (whole cache lines: a 64-byte load across two lines costs two), or `None`
/// when there are none.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn fused_cache_in(scratch: &mut [i32], words: usize) -> Option<&mut [i32]> {
    if words == 0 {
        return None;
    }
    assert!(
        scratch.len() >= words,
        "scratch too short for the fused form's constants"
    );
    // (At most 15 for a 4-byte-aligned pointer.)
    let skip = scratch.as_ptr().align_offset(64).min(15);
    Some(&mut scratch[skip..words - 15 + skip])
}

/// Requantization parameters, one entry per output channel, padded to whole tiles.
///
/// Only what cannot be derived is stored (9 bytes per channel; the interpreter holds these for
/// its whole life, one entry per output channel of every int8 convolution): the vector kernels
/// derive the left and right shifts and the rounding masks from `shift` where they load a block
/// of channels (`x86::Rq16::load`, `x86::Rq8::load`), and the AVX-512 GEMM and depthwise
/// kernels the fused form's 64-bit constants once per call, into their scratch
/// (`x86::fused_cache`, 12 bytes per channel of the operator running).
#[derive(Clone, Debug)]
pub(crate) struct Requant {
    /// `bias + input_offset * sum(w)` (and `- 128 * sum(w)` on the VNNI paths, whose input
    /// is offset to unsigned).
    pub(crate) bias: Vec<i32>,
    pub(crate) mult: Vec<i32>,
    /// `shift` as in [`OutputStage`], in `-31..=31` (checked by [`Mbqm::new`]); padding
    /// channels 0.
    pub(crate) shift: Vec<i8>,
    pub(crate) out_offset: i32,
    pub(crate) act_min: i32,
    pub(crate) act_max: i32,
    pub(crate) single_rounding: bool,
    /// Whether any channel shifts left (a multiplier above one).
    pub(crate) any_left: bool,
    /// Whether the one-rounding form of the AVX-512 requantization (`x86::Rq16`) applies:
    /// every channel shifts right by `e >= 1` and its [`Requant::fused_add`] fits (and double
    /// rounding, whole 16-channel blocks).
    pub(crate) fused: bool,
    /// Whether the activation range is narrower than int8's (else the saturating narrowing to
    /// int8 is the clamp).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) clamp: bool,
}

impl Requant {
    /// `padded` channels (zeros past `q`'s), with `bias_eff(c)` as the folded bias.
    fn new(q: &OutputStage, padded: usize, bias_eff: impl Fn(usize) -> i32) -> Option<Requant> {
        let n = q.multipliers.len();
        let mut r = Requant {
            bias: vec![0; padded],
            mult: vec![0; padded],
            shift: vec![0; padded],
            out_offset: q.output_offset,
            act_min: q.act_min,
            act_max: q.act_max,
            single_rounding: q.single_rounding,
            any_left: false,
            fused: !q.single_rounding && padded.is_multiple_of(16),
            clamp: !(q.act_min == -128 && q.act_max == 127),
        };
        for c in 0..n {
            let s = q.shifts[c];
            // Multipliers or shifts the vector form cannot reproduce keep the portable kernel.
            let m = Mbqm::new(q.multipliers[c], s)?;
            r.bias[c] = bias_eff(c);
            r.mult[c] = m.mult;
            r.any_left |= m.left > 0;
            r.shift[c] = s as i8;
            // |x * m| < 2^62, so |x * m + add - 2^31| < 2^63 when |add| < 2^62.
            let e = m.right;
            r.fused &= m.left == 0 && e >= 1 && Self::fused_add(e, q.output_offset).abs() < 1 << 62;
        }
        Some(r)
    }

    /// The constant of the fused form (`x86::Rq16`) for a right shift by `e` and output offset
    /// `off`: `2^30 + 2^(30 + e) + off * 2^(31 + e)`, which the kernels compute as `2^30 + ((1 +
    /// 2 off) * 2^31) << (e - 1)` in 64-bit lanes.
    pub(crate) fn fused_add(e: i32, off: i32) -> i128 {
        (1i128 << 30) + (1i128 << (30 + e)) + (i128::from(off) << (31 + e))
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.bias.len() * 4 + self.mult.len() * 4 + self.shift.len()
    }

    /// Scalar requantization of channel `c` (exactly [`OutputStage::apply`] with the folded
    /// bias).
    #[inline]
    pub(crate) fn apply(&self, acc: i32, c: usize) -> i8 {
        let x = acc.wrapping_add(self.bias[c]);
        let scaled = if self.single_rounding {
            crate::quant::multiply_by_quantized_multiplier_single_rounding(
                x,
                self.mult[c],
                i32::from(self.shift[c]),
            )
        } else {
            crate::quant::multiply_by_quantized_multiplier(
                x,
                self.mult[c],
                i32::from(self.shift[c]),
            )
        };
        scaled
            .saturating_add(self.out_offset)
            .clamp(self.act_min, self.act_max) as i8
    }
}

/// Constant int8 weights `[N, K]` packed for the int8 GEMM of one ISA.
#[derive(Clone, Debug)]
pub struct GemmI8 {
    pub(crate) isa: Isa,
    pub(crate) n: usize,
    pub(crate) k: usize,
    /// Groups of `kg` values of `k` (the last one zero-padded).
    pub(crate) groups: usize,
    /// Panel `p`, group `g`, channel `j`, byte `t` at `((p * groups + g) * nr + j) * kg + t`.
    pub(crate) b: Vec<i8>,
    pub(crate) rq: Requant,
}

impl GemmI8 {
    /// Packs `weights` (`n` rows of `k`) with `bias` and the output stage `q` (whose
    /// `input_offset` is folded into the bias). `None` when `isa` has no int8 GEMM here.
    pub fn pack(
        isa: Isa,
        weights: &[i8],
        n: usize,
        k: usize,
        bias: Option<&[i32]>,
        q: &OutputStage,
    ) -> Option<GemmI8> {
        if isa == Isa::Portable
            || !isa.available()
            || weights.len() != n * k
            || q.multipliers.len() != n
            || n == 0
            || k == 0
        {
            return None;
        }
        let (nr, kg) = (isa.nr_i8(), isa.kg_i8());
        let groups = k.div_ceil(kg);
        let panels = n.div_ceil(nr);
        let mut b = vec![0i8; panels * groups * nr * kg];
        for p in 0..panels {
            for g in 0..groups {
                for j in 0..nr {
                    let ch = p * nr + j;
                    if ch >= n {
                        continue;
                    }
                    for t in 0..kg {
                        let kk = g * kg + t;
                        if kk < k {
                            b[((p * groups + g) * nr + j) * kg + t] = weights[ch * k + kk];
                        }
                    }
                }
            }
        }
        let off = q.input_offset - if isa.vnni() { 128 } else { 0 };
        let rq = Requant::new(q, panels * nr, |c| {
            let wsum: i32 = weights[c * k..(c + 1) * k]
                .iter()
                .map(|&v| i32::from(v))
                .sum();
            bias.map_or(0, |b| b[c])
                .wrapping_add(off.wrapping_mul(wsum))
        })?;
        Some(GemmI8 {
            isa,
            n,
            k,
            groups,
            b,
            rq,
        })
    }

    /// Bytes held (packed weights and per-channel parameters).
    pub fn bytes(&self) -> usize {
        self.b.len() + self.rq.bytes()
    }

    /// i32 words of the scratch [`Self::run`] needs: the packed rows, then (AVX-512 with the
    /// fused form) the derived requantization constants of every channel.
    pub fn scratch_i32(&self) -> usize {
        self.groups * self.isa.mr_i8() + self.fused_cache_words()
    }

    /// Words of the fused form's constants, derived once per [`Self::run`] (`x86::fused_cache`)
    /// rather than in every tile: the derivation costs a few instructions per 16 channels,
    /// which a tile of few rows and a short `k` notices.
    fn fused_cache_words(&self) -> usize {
        fused_cache_scratch(self.isa, &self.rq)
    }

    /// `out[m - ms.start, :] = requant(rows.row(m) · W^T)` for `m` in `ms` (`out` has rows of
    /// `n`). `row_buf` holds `k` values (for gathered rows), `a_buf` [`Self::scratch_i32`].
    pub(crate) fn run(
        &self,
        ms: Range<usize>,
        rows: &Rows<'_, i8>,
        row_buf: &mut [i8],
        a_buf: &mut [i32],
        out: &mut [i8],
    ) {
        let (mr, nr, kg) = (self.isa.mr_i8(), self.isa.nr_i8(), self.isa.kg_i8());
        let n = self.n;
        let (a_buf, scratch) = a_buf.split_at_mut(self.groups * mr);
        // (Only the AVX-512 tile reads it: empty elsewhere.)
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
        let cache: &[i32] = match fused_cache_in(scratch, self.fused_cache_words()) {
            #[cfg(target_arch = "x86_64")]
            Some(cache) => {
                x86::fused_cache(&self.rq, cache);
                cache
            }
            _ => &[],
        };
        let mut tile = [[0i32; 32]; 8];
        let (base, m_count) = (ms.start, ms.end);
        let mut m0 = base;
        while m0 < m_count {
            let rows_here = (m_count - m0).min(mr);
            self.pack_rows(rows, m0, rows_here, row_buf, a_buf);
            for p in 0..n.div_ceil(nr) {
                let b = &self.b[p * self.groups * nr * kg..(p + 1) * self.groups * nr * kg];
                let c0 = p * nr;
                let cn = (n - c0).min(nr);
                let at = (m0 - base) * n + c0;
                #[cfg(target_arch = "x86_64")]
                if self.isa == Isa::Avx512Vnni {
                    x86::tile_rq_i8_avx512(
                        rows_here,
                        a_buf,
                        b,
                        self.groups,
                        &self.rq,
                        cache,
                        c0,
                        cn,
                        &mut out[at..],
                        n,
                    );
                    continue;
                }
                tile_i8(self.isa, rows_here, a_buf, b, self.groups, &mut tile);
                requant_tile(
                    self.isa,
                    &self.rq,
                    c0,
                    &tile,
                    rows_here,
                    cn,
                    &mut out[at..],
                    n,
                );
            }
            m0 += mr;
        }
    }
}

impl GemmI8 {
    /// Packs rows `m0..m0 + count` of `rows` as rows `0..count` of `a_buf`
    /// ([`pack_row_i8`]). With `vpdpbusd`, contiguous rows of a multiple of four bytes are one
    /// block already in the packed layout (one offset-to-unsigned copy for the whole tile),
    /// and with AVX-512 an im2col row is gathered straight into its packed form.
    #[inline]
    fn pack_rows(
        &self,
        rows: &Rows<'_, i8>,
        m0: usize,
        count: usize,
        row_buf: &mut [i8],
        a_buf: &mut [i32],
    ) {
        #[cfg(target_arch = "x86_64")]
        if self.isa.vnni() {
            match rows {
                Rows::Direct { data, stride } if *stride == self.k && self.k.is_multiple_of(4) => {
                    let block = &data[m0 * self.k..(m0 + count) * self.k];
                    return x86::pack_row_vnni(block, &mut a_buf[..count * self.groups]);
                }
                Rows::Conv {
                    input,
                    in_hwc,
                    k_hw,
                    out_w,
                    p,
                    pad,
                } if self.isa == Isa::Avx512Vnni => {
                    let conv = x86::ConvRows {
                        input,
                        in_hwc: *in_hwc,
                        k_hw: *k_hw,
                        out_w: *out_w,
                        p,
                        pad: *pad,
                    };
                    return x86::pack_conv_rows_vnni512(&conv, m0, count, self.groups, a_buf);
                }
                _ => {}
            }
        }
        for r in 0..count {
            let row = rows.row(m0 + r, row_buf);
            pack_row_i8(self.isa, &row[..self.k], r, self.groups, a_buf);
        }
    }
}

/// Where the rows of a GEMM's left-hand side come from.
pub(crate) enum Rows<'a, T> {
    /// Row `m` is `data[m * stride..][..k]`.
    Direct { data: &'a [T], stride: usize },
    /// Row `m` is the receptive field of output pixel `m` of a convolution (im2col), in the
    /// filter's `[KH, KW, C]` order, padding taps filled with `pad`.
    Conv {
        input: &'a [T],
        in_hwc: [usize; 3],
        k_hw: [usize; 2],
        out_w: usize,
        p: Conv2dParams,
        pad: T,
    },
}

impl<T: Copy> Rows<'_, T> {
    #[inline]
    pub(crate) fn row<'s>(&'s self, m: usize, buf: &'s mut [T]) -> &'s [T] {
        match self {
            Rows::Direct { data, stride } => &data[m * stride..],
            Rows::Conv {
                input,
                in_hwc: [in_h, in_w, c],
                k_hw: [k_h, k_w],
                out_w,
                p,
                pad,
            } => {
                let (oy, ox) = (m / out_w, m % out_w);
                let mut o = 0;
                let x0 = (ox * p.stride_w).wrapping_sub(p.pad_left);
                // Whether the window's columns are one contiguous run of input pixels (then a
                // row of the window is one copy: few channels make many tiny copies otherwise).
                let contiguous = p.dilation_w == 1 && x0 < *in_w && *in_w - x0 >= *k_w;
                for ky in 0..*k_h {
                    let y = (oy * p.stride_h + ky * p.dilation_h).wrapping_sub(p.pad_top);
                    if contiguous && y < *in_h {
                        let (i, n) = ((y * in_w + x0) * c, k_w * c);
                        buf[o..o + n].copy_from_slice(&input[i..i + n]);
                        o += n;
                        continue;
                    }
                    for kx in 0..*k_w {
                        let x = (ox * p.stride_w + kx * p.dilation_w).wrapping_sub(p.pad_left);
                        let dst = &mut buf[o..o + c];
                        if y < *in_h && x < *in_w {
                            let i = (y * in_w + x) * c;
                            dst.copy_from_slice(&input[i..i + c]);
                        } else {
                            dst.fill(*pad);
                        }
                        o += c;
                    }
                }
                &buf[..o]
            }
        }
    }
}

/// Writes `row` as row `r` of the packed left-hand side, `groups` 32-bit words per row (`kg`
/// bytes per word: unsigned `x + 128` for `vpdpbusd`, four signed bytes for `sdot`, two
/// sign-extended i16 for `vpmaddwd` and NEON).
/// Rows are contiguous, so packing is a vectorizable copy.
#[inline]
fn pack_row_i8(isa: Isa, row: &[i8], r: usize, groups: usize, a_buf: &mut [i32]) {
    let dst = &mut a_buf[r * groups..(r + 1) * groups];
    if isa.kg_i8() == 4 && !isa.vnni() {
        // Four signed bytes (`sdot`), the last word zero-padded.
        let mut chunks = row.chunks_exact(4);
        for (d, c) in dst.iter_mut().zip(&mut chunks) {
            *d = i32::from_le_bytes([c[0] as u8, c[1] as u8, c[2] as u8, c[3] as u8]);
        }
        let rem = chunks.remainder();
        if !rem.is_empty() {
            let mut b = [0u8; 4];
            for (d, &s) in b.iter_mut().zip(rem) {
                *d = s as u8;
            }
            dst[row.len() / 4] = i32::from_le_bytes(b);
        }
    } else if isa.vnni() {
        // The VNNI ISAs (`vpdpbusd`) exist on x86-64 only.
        #[cfg(target_arch = "x86_64")]
        x86::pack_row_vnni(row, dst);
    } else {
        let mut chunks = row.chunks_exact(2);
        for (d, c) in dst.iter_mut().zip(&mut chunks) {
            *d = (u32::from(c[0] as i16 as u16) | (u32::from(c[1] as i16 as u16) << 16)) as i32;
        }
        if let [x] = chunks.remainder() {
            dst[row.len() / 2] = i32::from(*x as i16 as u16);
        }
    }
}

/// `tile[r][j] = sum_g a[g, r] · b[g, j]` for `r < rows`.
#[inline]
fn tile_i8(isa: Isa, rows: usize, a: &[i32], b: &[i8], groups: usize, tile: &mut [[i32; 32]; 8]) {
    #[cfg(target_arch = "x86_64")]
    x86::tile_i8(isa, rows, a, b, groups, tile);
    #[cfg(target_arch = "aarch64")]
    aarch64::tile_i8(isa, rows, a, b, groups, tile);
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = (isa, rows, a, b, groups, tile);
        unreachable!("no int8 GEMM for this ISA");
    }
}

/// [`requant_row`] for the first `rows` rows of `tile`, row `r` at `out[r * stride..]` (the
/// AVX-512 GEMM requantizes inside its tile instead: `x86::tile_rq_i8_avx512`).
#[inline]
#[allow(clippy::too_many_arguments)]
fn requant_tile(
    isa: Isa,
    rq: &Requant,
    c0: usize,
    tile: &[[i32; 32]; 8],
    rows: usize,
    cn: usize,
    out: &mut [i8],
    stride: usize,
) {
    // (Single rounding, LiteRT's int8 FULLY_CONNECTED, in vectors with AVX-512 only.)
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Portable && (!rq.single_rounding || isa == Isa::Avx512Vnni) {
        x86::requant_tile(isa, rq, c0, &tile[..rows], cn, out, stride);
        return;
    }
    for (r, acc) in tile.iter().enumerate().take(rows) {
        requant_row(isa, rq, c0, acc, &mut out[r * stride..r * stride + cn]);
    }
}

/// Requantizes `out.len()` channels starting at `c0` from `acc`.
#[inline]
fn requant_row(isa: Isa, rq: &Requant, c0: usize, acc: &[i32; 32], out: &mut [i8]) {
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Portable && (!rq.single_rounding || isa == Isa::Avx512Vnni) {
        let cn = out.len();
        x86::requant_tile(isa, rq, c0, core::slice::from_ref(acc), cn, out, 0);
        return;
    }
    let _ = isa;
    for (j, o) in out.iter_mut().enumerate() {
        *o = rq.apply(acc[j], c0 + j);
    }
}

// ------------------------------------------------------------------ elementwise int8 / QUANTIZE

/// Whether `isa` has the vector elementwise kernels below (the x86-64 ones; aarch64 and the
/// portable build keep the scalar kernels).
pub(crate) fn has_elementwise(isa: Isa) -> bool {
    cfg!(target_arch = "x86_64") && matches!(isa, Isa::Avx2 | Isa::AvxVnni | Isa::Avx512Vnni)
}

/// One `MultiplyByQuantizedMultiplier` (double rounding) with a per-tensor multiplier, as the
/// vector kernels apply it (see `x86::Rq8`): left shift, high multiply, rounding shift.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mbqm {
    pub(crate) mult: i32,
    pub(crate) left: i32,
    pub(crate) right: i32,
    /// `(1 << right) - 1` and its half.
    pub(crate) mask: i32,
    pub(crate) thr: i32,
}

impl Mbqm {
    /// `None` where the vector form is not exact: a multiplier of `i32::MIN` (never produced by
    /// `QuantizeMultiplier`) or a shift outside TFLite's range.
    fn new(mult: i32, shift: i32) -> Option<Mbqm> {
        if mult == i32::MIN || !(-31..=31).contains(&shift) {
            return None;
        }
        let right = (-shift).max(0);
        let mask = ((1i64 << right) - 1) as i32;
        Some(Mbqm {
            mult,
            left: shift.max(0),
            right,
            mask,
            thr: mask >> 1,
        })
    }
}

/// Which int8 arithmetic an [`ArithI8`] does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ArithOp {
    Add,
    Sub,
    Mul,
}

/// An int8 ADD/SUB or MUL for the vector kernels, then the output stage (`MBQM(raw, out)`, the
/// output offset, the clamp). ADD/SUB ([`crate::kernels::elementwise::AddSubTables`]) compute
/// each input's rescaling instead of looking it up: `s = MBQM((x + off) << left_shift, in_mult,
/// in_shift)` (the table entries), `raw = s1 ± s2`. MUL: `raw = (x + off1) * (y + off2)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ArithI8 {
    pub(crate) isa: Isa,
    pub(crate) op: ArithOp,
    pub(crate) off1: i32,
    pub(crate) off2: i32,
    /// ADD/SUB: `[m >> 11, m & 2047]` of each input multiplier: with the inputs' left shift of 20,
    /// `SRDHM(v << 20, m) = floor((v m + 2^10) / 2^11) = v (m >> 11) + ((v (m & 2047) + 2^10)
    /// >> 11)`, every term inside i32 for `|v| < 2^9` (`v` = stored value + offset).
    pub(crate) split1: [i32; 2],
    pub(crate) split2: [i32; 2],
    pub(crate) in1: Mbqm,
    pub(crate) in2: Mbqm,
    pub(crate) out: Mbqm,
    pub(crate) out_offset: i32,
    pub(crate) act_min: i32,
    pub(crate) act_max: i32,
}

impl ArithI8 {
    /// An int8 ADD/SUB. `None` when `isa` has no such kernel or the parameters are outside what it reproduces
    /// exactly (the scalar kernel then runs): input multipliers below one, shifts in TFLite's
    /// range, offsets of int8 zero points and a clamp range inside int8.
    pub(crate) fn new(isa: Isa, t: &crate::kernels::elementwise::AddSubTables) -> Option<ArithI8> {
        if !has_elementwise(isa)
            || t.in1_shift > 0
            || t.in2_shift > 0
            || t.left_shift != 20
            || t.in1_mult < 0
            || t.in2_mult < 0
            || !(-255..=255).contains(&t.in1_offset)
            || !(-255..=255).contains(&t.in2_offset)
            || !(-128..=127).contains(&t.out_offset)
            || !(-128 <= t.act_min && t.act_min <= t.act_max && t.act_max <= 127)
        {
            return None;
        }
        Some(ArithI8 {
            isa,
            op: if t.sub { ArithOp::Sub } else { ArithOp::Add },
            off1: t.in1_offset,
            off2: t.in2_offset,
            split1: [t.in1_mult >> 11, t.in1_mult & 2047],
            split2: [t.in2_mult >> 11, t.in2_mult & 2047],
            in1: Mbqm::new(t.in1_mult, t.in1_shift)?,
            in2: Mbqm::new(t.in2_mult, t.in2_shift)?,
            out: Mbqm::new(t.out_mult, t.out_shift)?,
            out_offset: t.out_offset,
            act_min: t.act_min,
            act_max: t.act_max,
        })
    }

    /// An int8 MUL ([`crate::kernels::elementwise::BinaryI8::Mul`]). `None` for another
    /// operator, when `isa` has no such kernel, or outside what it reproduces exactly: offsets
    /// of int8 zero points (so the product fits 17 bits), a shift in TFLite's range, a clamp
    /// inside int8.
    pub(crate) fn mul(isa: Isa, p: &crate::kernels::elementwise::BinaryI8) -> Option<ArithI8> {
        let crate::kernels::elementwise::BinaryI8::Mul {
            in1_offset,
            in2_offset,
            out_mult,
            out_shift,
            out_offset,
            act_min,
            act_max,
        } = *p
        else {
            return None;
        };
        let exact = (-255..=255).contains(&in1_offset)
            && (-255..=255).contains(&in2_offset)
            && (-128..=127).contains(&out_offset)
            && -128 <= act_min
            && act_min <= act_max
            && act_max <= 127;
        if !(has_elementwise(isa) && exact) {
            return None;
        }
        let unused = Mbqm::new(0, 0)?;
        Some(ArithI8 {
            isa,
            op: ArithOp::Mul,
            off1: in1_offset,
            off2: in2_offset,
            split1: [0; 2],
            split2: [0; 2],
            in1: unused,
            in2: unused,
            out: Mbqm::new(out_mult, out_shift)?,
            out_offset,
            act_min,
            act_max,
        })
    }
}

/// Int8 ADD/SUB/MUL: the vector kernel on runs of the output (the whole output when each input has
/// its shape or is one value, else rows of at least 16 elements: the innermost dimension, whose
/// inputs are contiguous or one value repeated), else the scalar kernel (`portable`, the same
/// operator, for ADD/SUB as tables).
pub(crate) fn arith_i8(
    f: &ArithI8,
    portable: &crate::kernels::elementwise::BinaryI8,
    bc: &crate::kernels::elementwise::Broadcast,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
) {
    #[cfg(target_arch = "x86_64")]
    if bc.apply_runs(a, b, out, 16, |ra, rb, o| x86::arith_i8(f, ra, rb, o)) {
        return;
    }
    let _ = f;
    crate::kernels::elementwise::binary_quantized::<i8>(portable, bc, a, b, out)
}

/// The output type of a vector QUANTIZE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QuantizeTo {
    I8,
    U8,
    I16,
}

/// QUANTIZE float32 to `to` (stored little-endian in `out`), bit-exact with
/// [`crate::kernels::elementwise::quantize_f32`] over the type's full range; as that, it stops
/// at the shorter of `input` and `out`. `false` (nothing done) when `isa` has no such kernel.
pub(crate) fn quantize_f32(
    isa: Isa,
    input: &[f32],
    scale: f32,
    zero_point: i32,
    to: QuantizeTo,
    out: &mut [u8],
) -> bool {
    let size = if to == QuantizeTo::I16 { 2 } else { 1 };
    if !has_elementwise(isa) {
        return false;
    }
    let n = input.len().min(out.len() / size);
    let (input, out) = (&input[..n], &mut out[..n * size]);
    #[cfg(target_arch = "x86_64")]
    x86::quantize_f32(isa, input, scale, zero_point, to, out);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (input, scale, zero_point, out);
    true
}

/// Whether [`transpose_few_rows_32`] does this TRANSPOSE (`size`-byte values): batches of
/// `[rows, cols]` matrices with 2 to 4 rows (NCHW -> NHWC with up to 4 channels), 32-bit
/// values, AVX-512.
#[cfg(feature = "ops-shape")]
pub(crate) fn has_transpose_few_rows_32(
    isa: Isa,
    in_shape: &[usize],
    perm: &[usize],
    size: usize,
) -> bool {
    cfg!(target_arch = "x86_64")
        && isa == Isa::Avx512Vnni
        && size == 4
        && crate::kernels::shape_ops::batched_2d(in_shape, perm)
            .is_some_and(|(_, rows, cols)| (2..=4).contains(&rows) && cols > 1)
}

/// TRANSPOSE of 32-bit values when [`has_transpose_few_rows_32`]: each output row interleaves
/// one value of every input row, 16 columns per vector step (the scalar loop moves one value
/// at a time: 0.9 us for MobileNetV2 block's 3x32x32 input). `false` (nothing done) otherwise.
#[cfg(feature = "ops-shape")]
pub(crate) fn transpose_few_rows_32(
    isa: Isa,
    in_shape: &[usize],
    perm: &[usize],
    input: &[u32],
    out: &mut [u32],
) -> bool {
    if !has_transpose_few_rows_32(isa, in_shape, perm, 4) {
        return false;
    }
    let Some((batches, rows, cols)) = crate::kernels::shape_ops::batched_2d(in_shape, perm) else {
        return false;
    };
    let len = batches * rows * cols;
    if input.len() < len || out.len() < len {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    for (i, o) in input[..len]
        .chunks_exact(rows * cols)
        .zip(out[..len].chunks_exact_mut(rows * cols))
    {
        x86::interleave_u32(i, rows, o);
    }
    true
}

/// Float unary operators (RELU, LOGISTIC, TANH, EXP, ...) at this ISA's vector width, bit-exact
/// with [`crate::kernels::elementwise::unary_f32`] (which vectorizes at the baseline width
/// elsewhere). `false` (nothing done) when `isa` has no such kernel.
#[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
pub(crate) fn unary_f32(
    isa: Isa,
    op: crate::kernels::elementwise::UnaryOp,
    input: &[f32],
    out: &mut [f32],
) -> bool {
    if !has_elementwise(isa) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    x86::unary_f32(isa, op, input, out);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (op, input, out);
    true
}

/// Scratch of the fast kernels, sized once by the interpreter ([`Fast::scratch`]).
#[derive(Debug, Default)]
pub(crate) struct FastScratch {
    pub(crate) i8s: Vec<i8>,
    pub(crate) i32s: Vec<i32>,
    pub(crate) f32s: Vec<f32>,
}

/// Int8 CONV_2D (groups 1) through [`GemmI8`]: 1x1 stride 1 reads the input rows in place,
/// anything else gathers one im2col row at a time.
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d_i8(
    g: &GemmI8,
    input: &[i8],
    in_shape: [usize; 4],
    filter_shape: [usize; 4],
    p: &Conv2dParams,
    input_offset: i32,
    output: &mut [i8],
    out_shape: [usize; 4],
    workers: &mut [FastScratch],
) {
    let [batches, in_h, in_w, in_c] = in_shape;
    let [_, out_h, out_w, out_c] = out_shape;
    let m = out_h * out_w;
    for b in 0..batches {
        let inb = &input[b * in_h * in_w * in_c..(b + 1) * in_h * in_w * in_c];
        let outb = &mut output[b * m * out_c..(b + 1) * m * out_c];
        let rows = conv_rows(inb, in_shape, filter_shape, p, out_w, (-input_offset) as i8);
        let work = m * out_c * g.k;
        for_row_blocks(m, g.isa.mr_i8(), out_c, work, outb, workers, |ms, o, s| {
            g.run(ms, &rows, &mut s.i8s, &mut s.i32s, o)
        });
    }
}

/// Multiply-accumulates below which an operator stays on one thread (a thread start costs
/// about as much as this many).
#[cfg(all(feature = "threads", not(test)))]
const PARALLEL_MIN_WORK: usize = 1 << 17;
#[cfg(all(feature = "threads", test))]
const PARALLEL_MIN_WORK: usize = 1;

/// Runs `f(rows, out_block, scratch)` over rows `0..m_count` of `row_len` outputs each: on the
/// calling thread, or (feature `threads`, several `workers`, enough `work`) split into one
/// contiguous block per worker, each a multiple of `align` rows, so every output is computed
/// exactly as on one thread.
fn for_row_blocks<T: Send>(
    m_count: usize,
    align: usize,
    row_len: usize,
    work: usize,
    out: &mut [T],
    workers: &mut [FastScratch],
    f: impl Fn(Range<usize>, &mut [T], &mut FastScratch) + Sync,
) {
    if workers.is_empty() {
        return;
    }
    #[cfg(feature = "threads")]
    {
        let align = align.max(1);
        let blocks = workers.len().min(m_count / align);
        if blocks > 1 && work >= PARALLEL_MIN_WORK {
            let per = m_count.div_ceil(blocks).div_ceil(align) * align;
            let f = &f;
            std::thread::scope(|scope| {
                let mut rest = &mut out[..m_count * row_len];
                let mut m0 = 0;
                let mut ws = workers.iter_mut();
                while m0 < m_count {
                    let m1 = (m0 + per).min(m_count);
                    let (block, tail) =
                        core::mem::take(&mut rest).split_at_mut((m1 - m0) * row_len);
                    rest = tail;
                    let Some(w) = ws.next() else { break };
                    if m1 == m_count {
                        f(m0..m1, block, w); // the last block on this thread
                    } else {
                        scope.spawn(move || f(m0..m1, block, w));
                    }
                    m0 = m1;
                }
            });
            return;
        }
    }
    let _ = (align, row_len, work);
    f(0..m_count, out, &mut workers[0]);
}

fn conv_rows<'a, T: Copy>(
    input: &'a [T],
    [_, in_h, in_w, in_c]: [usize; 4],
    [_, k_h, k_w, _]: [usize; 4],
    p: &Conv2dParams,
    out_w: usize,
    pad: T,
) -> Rows<'a, T> {
    let pointwise = k_h == 1
        && k_w == 1
        && p.stride_h == 1
        && p.stride_w == 1
        && p.pad_top == 0
        && p.pad_left == 0;
    if pointwise {
        Rows::Direct {
            data: input,
            stride: in_c,
        }
    } else {
        Rows::Conv {
            input,
            in_hwc: [in_h, in_w, in_c],
            k_hw: [k_h, k_w],
            out_w,
            p: *p,
            pad,
        }
    }
}

/// Int8 FULLY_CONNECTED through [`GemmI8`].
pub(crate) fn fully_connected_i8(
    g: &GemmI8,
    input: &[i8],
    batches: usize,
    output: &mut [i8],
    workers: &mut [FastScratch],
) {
    let rows = Rows::Direct {
        data: input,
        stride: g.k,
    };
    let work = batches * g.n * g.k;
    for_row_blocks(
        batches,
        g.isa.mr_i8(),
        g.n,
        work,
        output,
        workers,
        |ms, o, s| g.run(ms, &rows, &mut s.i8s, &mut s.i32s, o),
    );
}

/// Largest kernel (taps) of the fast depthwise paths.
pub(crate) const DW_MAX_TAPS: usize = 64;

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
    /// x86 AVX2: block `cb` of 16 channels, tap pair `t`: 32 i16 at `(cb * pairs + t) * 32`;
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
        let rq = Requant::new(q, blocks * 16, |ch| bias.map_or(0, |b| b[ch]))?;
        if isa.neon() {
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

/// Calls `f(oy, ox, taps)` per output pixel with the input pixel index of every tap
/// (`usize::MAX` for padding).
#[inline]
fn for_each_window(
    in_hw: [usize; 2],
    k_hw: [usize; 2],
    out_rows: Range<usize>,
    out_w: usize,
    [stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left]: [usize; 6],
    mut f: impl FnMut(usize, usize, &[usize]),
) {
    let [in_h, in_w] = in_hw;
    let [k_h, k_w] = k_hw;
    let mut taps = [usize::MAX; DW_MAX_TAPS];
    let taps = &mut taps[..k_h * k_w];
    for oy in out_rows {
        for ox in 0..out_w {
            for ky in 0..k_h {
                let y = (oy * stride_h + ky * dilation_h).wrapping_sub(pad_top);
                for kx in 0..k_w {
                    let x = (ox * stride_w + kx * dilation_w).wrapping_sub(pad_left);
                    taps[ky * k_w + kx] = if y < in_h && x < in_w {
                        y * in_w + x
                    } else {
                        usize::MAX
                    };
                }
            }
            f(oy, ox, taps);
        }
    }
}

/// Calls `pixel(ptrs, at)` for every output pixel of rows `oys` of a depthwise window over one
/// batch `input` (`[in_h, in_w, c]`): `ptrs[t]` points to the `c` elements of tap `t`'s input
/// pixel, or is null for padding, and `ptrs[k_h * k_w..]` are null; `at` is the pixel's offset
/// in the rows' output (`c` per pixel from `oys.start`). `dims` = `[in_h, in_w, k_h, k_w,
/// out_w]`, `geometry` as [`dw_geometry`]. Windows inside the input take their taps' addresses
/// as one base plus fixed offsets; the others check every tap.
// Only the x86 AVX-512 depthwise kernels take tap pointers so far.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[inline]
fn for_each_window_ptrs<T>(
    input: &[T],
    c: usize,
    [in_h, in_w, k_h, k_w, out_w]: [usize; 5],
    [stride_h, stride_w, dil_h, dil_w, pad_top, pad_left]: [usize; 6],
    oys: Range<usize>,
    mut pixel: impl FnMut(&[*const T; DW_MAX_TAPS + 1], usize),
) {
    let taps = k_h * k_w;
    assert!(taps <= DW_MAX_TAPS && c > 0 && input.len() >= in_h * in_w * c);
    // The taps' offsets from the window's first pixel, in elements.
    let mut offset = [0usize; DW_MAX_TAPS];
    for ky in 0..k_h {
        for kx in 0..k_w {
            offset[ky * k_w + kx] = (ky * dil_h * in_w + kx * dil_w) * c;
        }
    }
    let span_w = (k_w - 1) * dil_w + 1;
    let span_h = (k_h - 1) * dil_h + 1;
    let x_inside =
        |ox: usize| ox * stride_w >= pad_left && ox * stride_w - pad_left + span_w <= in_w;
    let mut ptrs = [core::ptr::null::<T>(); DW_MAX_TAPS + 1];
    let base = input.as_ptr();
    let y0 = oys.start;
    for oy in oys {
        let y_inside = oy * stride_h >= pad_top && oy * stride_h - pad_top + span_h <= in_h;
        for ox in 0..out_w {
            if y_inside && x_inside(ox) {
                let first = ((oy * stride_h - pad_top) * in_w + ox * stride_w - pad_left) * c;
                for (p, &o) in ptrs.iter_mut().zip(&offset[..taps]) {
                    // first + o is the start of an input pixel: the window is inside the input
                    // (whose length is asserted above).
                    *p = base.wrapping_add(first + o);
                }
            } else {
                for ky in 0..k_h {
                    let y = (oy * stride_h + ky * dil_h).wrapping_sub(pad_top);
                    for kx in 0..k_w {
                        let x = (ox * stride_w + kx * dil_w).wrapping_sub(pad_left);
                        ptrs[ky * k_w + kx] = if y < in_h && x < in_w {
                            base.wrapping_add((y * in_w + x) * c)
                        } else {
                            core::ptr::null()
                        };
                    }
                }
            }
            pixel(&ptrs, ((oy - y0) * out_w + ox) * c);
        }
    }
}

/// [`for_each_window_ptrs`] by runs: `run(ptrs, at, count)` covers `count` consecutive output
/// pixels of one row from offset `at` (`c` outputs each). When `count > 1` the windows are all
/// inside the input and pixel `k`'s tap `t` is at `ptrs[t] + k * stride_w * c`; the edge
/// pixels come one at a time (`count == 1`, null pointers for padding).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[inline]
fn for_each_window_run<T>(
    input: &[T],
    c: usize,
    [in_h, in_w, k_h, k_w, out_w]: [usize; 5],
    [stride_h, stride_w, dil_h, dil_w, pad_top, pad_left]: [usize; 6],
    oys: Range<usize>,
    mut run: impl FnMut(&[*const T; DW_MAX_TAPS + 1], usize, usize),
) {
    let taps = k_h * k_w;
    assert!(taps <= DW_MAX_TAPS && c > 0 && input.len() >= in_h * in_w * c);
    let mut offset = [0usize; DW_MAX_TAPS];
    for ky in 0..k_h {
        for kx in 0..k_w {
            offset[ky * k_w + kx] = (ky * dil_h * in_w + kx * dil_w) * c;
        }
    }
    let span_w = (k_w - 1) * dil_w + 1;
    let span_h = (k_h - 1) * dil_h + 1;
    // The interior columns: ox * stride_w >= pad_left and ox * stride_w - pad_left + span_w <=
    // in_w.
    let ox_lo = pad_left.div_ceil(stride_w).min(out_w);
    let ox_hi = if in_w + pad_left >= span_w {
        ((in_w + pad_left - span_w) / stride_w + 1).clamp(ox_lo, out_w)
    } else {
        ox_lo
    };
    let mut ptrs = [core::ptr::null::<T>(); DW_MAX_TAPS + 1];
    let base = input.as_ptr();
    let y0 = oys.start;
    for oy in oys {
        let y_inside = oy * stride_h >= pad_top && oy * stride_h - pad_top + span_h <= in_h;
        let mut ox = 0;
        while ox < out_w {
            let at = ((oy - y0) * out_w + ox) * c;
            if y_inside && ox == ox_lo && ox_hi > ox_lo {
                let first = ((oy * stride_h - pad_top) * in_w + ox * stride_w - pad_left) * c;
                for (p, &o) in ptrs.iter_mut().zip(&offset[..taps]) {
                    // first + o is the start of an input pixel: the window is inside the input
                    // (whose length is asserted above), and so are the run's next ones.
                    *p = base.wrapping_add(first + o);
                }
                run(&ptrs, at, ox_hi - ox_lo);
                ox = ox_hi;
                continue;
            }
            for ky in 0..k_h {
                let y = (oy * stride_h + ky * dil_h).wrapping_sub(pad_top);
                for kx in 0..k_w {
                    let x = (ox * stride_w + kx * dil_w).wrapping_sub(pad_left);
                    ptrs[ky * k_w + kx] = if y < in_h && x < in_w {
                        base.wrapping_add((y * in_w + x) * c)
                    } else {
                        core::ptr::null()
                    };
                }
            }
            run(&ptrs, at, 1);
            ox += 1;
        }
    }
}

fn dw_geometry(p: &DepthwiseParams) -> [usize; 6] {
    [
        p.stride_h,
        p.stride_w,
        p.dilation_h,
        p.dilation_w,
        p.pad_top,
        p.pad_left,
    ]
}

/// Runs `rows(input_batch, out_rows, out_block)` over the output rows of a depthwise
/// convolution (per batch), split over the `workers` ([`for_row_blocks`]).
fn depthwise_rows<T: Send + Sync>(
    input: &[T],
    in_shape: [usize; 4],
    k_hw: [usize; 2],
    output: &mut [T],
    out_shape: [usize; 4],
    workers: &mut [FastScratch],
    rows: impl Fn(&[T], Range<usize>, &mut [T], &mut [i32]) + Sync,
) {
    let [batches, in_h, in_w, c] = in_shape;
    let [_, out_h, out_w, _] = out_shape;
    let work = out_h * out_w * c * k_hw[0] * k_hw[1];
    for b in 0..batches {
        let inb = &input[b * in_h * in_w * c..(b + 1) * in_h * in_w * c];
        let outb = &mut output[b * out_h * out_w * c..(b + 1) * out_h * out_w * c];
        for_row_blocks(out_h, 1, out_w * c, work, outb, workers, |oys, block, s| {
            rows(inb, oys, block, &mut s.i32s)
        });
    }
}

/// Runs `pixel(input_batch, taps, out_pixel)` for every output pixel of a depthwise convolution
/// ([`depthwise_rows`], [`for_each_window`]).
#[allow(clippy::too_many_arguments)]
fn depthwise_pixels<T: Send + Sync>(
    input: &[T],
    in_shape: [usize; 4],
    k_hw: [usize; 2],
    p: &DepthwiseParams,
    output: &mut [T],
    out_shape: [usize; 4],
    workers: &mut [FastScratch],
    pixel: impl Fn(&[T], &[usize], &mut [T]) + Sync,
) {
    let [_, in_h, in_w, c] = in_shape;
    let out_w = out_shape[2];
    depthwise_rows(
        input,
        in_shape,
        k_hw,
        output,
        out_shape,
        workers,
        |inb, oys, block, _| {
            let y0 = oys.start;
            for_each_window(
                [in_h, in_w],
                k_hw,
                oys,
                out_w,
                dw_geometry(p),
                |oy, ox, taps| {
                    let at = ((oy - y0) * out_w + ox) * c;
                    pixel(inb, taps, &mut block[at..at + c]);
                },
            );
        },
    );
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
    workers: &mut [FastScratch],
) {
    let isa = dw.isa;
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512Vnni {
        let geometry = [in_shape[1], in_shape[2], k_hw[0], k_hw[1], out_shape[2]];
        return depthwise_rows(
            input,
            in_shape,
            k_hw,
            output,
            out_shape,
            workers,
            |inb, oys, o, cache| x86::dw_i8_rows(dw, inb, geometry, dw_geometry(p), oys, o, cache),
        );
    }
    depthwise_pixels(
        input,
        in_shape,
        k_hw,
        p,
        output,
        out_shape,
        workers,
        |inb, taps, o| {
            #[cfg(target_arch = "x86_64")]
            x86::dw_i8_pixel(isa, dw, inb, taps, o);
            #[cfg(target_arch = "aarch64")]
            aarch64::dw_i8_pixel(isa, dw, inb, taps, o);
            #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
            let _ = (isa, inb, taps, o);
        },
    );
}

/// Constant float weights `[N, K]` packed in panels of 16 output channels (`[panel][k][16]`;
/// with AVX-512 in groups of [`GROUP_F32`] panels, `[group][k][64]`).
#[derive(Clone, Debug)]
pub struct GemmF32 {
    pub(crate) isa: Isa,
    pub(crate) n: usize,
    pub(crate) k: usize,
    pub(crate) b: Vec<f32>,
    pub(crate) bias: Vec<f32>,
    pub(crate) act: Activation,
}

/// Rows of the float GEMM tile.
pub(crate) const MR_F32: usize = 6;
/// Output channels of a float GEMM panel.
pub(crate) const NR_F32: usize = 16;
/// Panels of one AVX-512 float GEMM tile (6 rows x 64 channels: 24 accumulators).
pub(crate) const GROUP_F32: usize = 4;
/// Most kernel rows (KH) of a convolution whose receptive field the AVX-512 float GEMM reads
/// in place, one segment per kernel row (more: gathered im2col rows, one segment).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) const MAX_SEGS_F32: usize = 16;

/// Where a row of one segment of the AVX-512 float GEMM lives.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SrcF32 {
    /// The operator's input (the convolution's input, the dense operator's rows).
    Data,
    /// The gathered row buffers.
    Buf,
    /// A run of padding values.
    Pad,
}

/// One segment of the left-hand side of an AVX-512 float GEMM row block: reduction indices
/// `koff..koff + seg_len` of row `r` are `seg_len` consecutive floats at `rows[r]` (source,
/// offset).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
pub(crate) struct SegF32 {
    pub(crate) koff: usize,
    pub(crate) rows: [(SrcF32, usize); MR_F32],
}

impl GemmF32 {
    pub fn pack(
        isa: Isa,
        weights: &[f32],
        n: usize,
        k: usize,
        bias: Option<&[f32]>,
        act: Activation,
    ) -> Option<GemmF32> {
        if isa == Isa::Portable || !isa.available() || weights.len() != n * k || n == 0 || k == 0 {
            return None;
        }
        let panels = n.div_ceil(NR_F32);
        // AVX-512 interleaves groups of GROUP_F32 panels (`[group][k][width * 16]`, the last
        // group narrower) so its 6 x 64 tile reads one weight stream; other ISAs read one
        // panel at a time. Either way panel `p`'s group starts at `group_start * k * 16`.
        let group = if isa == Isa::Avx512Vnni { GROUP_F32 } else { 1 };
        let mut b = vec![0f32; panels * k * NR_F32];
        for p in 0..panels {
            let g0 = p / group * group;
            let width = (panels - g0).min(group);
            for kk in 0..k {
                for j in 0..NR_F32 {
                    let ch = p * NR_F32 + j;
                    if ch < n {
                        let at = g0 * k * NR_F32 + (kk * width + p - g0) * NR_F32 + j;
                        b[at] = weights[ch * k + kk];
                    }
                }
            }
        }
        let mut bv = vec![0f32; panels * NR_F32];
        if let Some(bias) = bias {
            bv[..n].copy_from_slice(&bias[..n]);
        }
        Some(GemmF32 {
            isa,
            n,
            k,
            b,
            bias: bv,
            act,
        })
    }

    pub fn bytes(&self) -> usize {
        (self.b.len() + self.bias.len()) * 4
    }

    /// f32 scratch of [`Self::run`] (row buffers for gathered rows, then a run of padding).
    pub fn scratch_f32(&self) -> usize {
        (MR_F32 + 1) * self.k
    }

    /// `out[m - ms.start, :] = act(rows.row(m) · W^T + bias)` for `m` in `ms`.
    pub(crate) fn run(
        &self,
        ms: Range<usize>,
        rows: &Rows<'_, f32>,
        row_bufs: &mut [f32],
        out: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        if self.isa == Isa::Avx512Vnni {
            return self.run_avx512(ms, rows, row_bufs, out);
        }
        let (n, k) = (self.n, self.k);
        let (base, m_count) = (ms.start, ms.end);
        let mut m0 = base;
        let mut tile = [[0f32; NR_F32]; MR_F32];
        while m0 < m_count {
            let rows_here = (m_count - m0).min(MR_F32);
            let mut bufs = row_bufs[..MR_F32 * k].chunks_exact_mut(k);
            let mut rs: [&[f32]; MR_F32] = [&[]; MR_F32];
            for (r, slot) in rs.iter_mut().enumerate().take(rows_here) {
                let buf = bufs.next().unwrap_or_default();
                *slot = &rows.row(m0 + r, buf)[..k];
            }
            // Writes panel `p` of the tile to the output rows.
            let mut store = |p: usize, tile: &[[f32; NR_F32]; MR_F32]| {
                let c0 = p * NR_F32;
                let cn = (n - c0).min(NR_F32);
                for (r, t) in tile.iter().enumerate().take(rows_here) {
                    let at = (m0 - base + r) * n + c0;
                    let o = &mut out[at..at + cn];
                    o.copy_from_slice(&t[..cn]);
                    if self.act == Activation::Tanh {
                        for v in o.iter_mut() {
                            *v = self.act.apply(*v);
                        }
                    }
                }
            };
            let panel = |p: usize| &self.b[p * k * NR_F32..(p + 1) * k * NR_F32];
            let bias = |p: usize| &self.bias[p * NR_F32..(p + 1) * NR_F32];
            let panels = n.div_ceil(NR_F32);
            let mut p = 0;
            while p < panels {
                #[cfg(target_arch = "x86_64")]
                x86::tile_f32(
                    self.isa,
                    &rs[..rows_here],
                    panel(p),
                    bias(p),
                    self.act,
                    &mut tile,
                );
                #[cfg(target_arch = "aarch64")]
                aarch64::tile_f32(
                    self.isa,
                    &rs[..rows_here],
                    panel(p),
                    bias(p),
                    self.act,
                    &mut tile,
                );
                store(p, &tile);
                p += 1;
            }
            m0 += MR_F32;
        }
    }

    /// [`Self::run`] with AVX-512: a convolution's receptive field is read in place, one
    /// segment per kernel row (`KW * C` contiguous input floats when the window's columns
    /// lie inside the input), so only windows that cross the left or right edge are gathered
    /// and kernel rows above or below the input are skipped when no row of the block needs
    /// them.
    #[cfg(target_arch = "x86_64")]
    fn run_avx512(
        &self,
        ms: Range<usize>,
        rows: &Rows<'_, f32>,
        scratch: &mut [f32],
        out: &mut [f32],
    ) {
        let (n, k) = (self.n, self.k);
        let o = &mut out[..ms.len() * n];
        match *rows {
            // Rows in place at a fixed stride, without the segments' per-block bookkeeping.
            Rows::Direct { data, stride } => gemm_packed_direct_f32_avx512(
                &self.b, &self.bias, n, k, self.act, data, stride, ms, o,
            ),
            // Up to two panels (tall tiles): windows in place at a fixed stride per output
            // row. Wider outputs keep the gathered 6-row blocks across output rows (no gain
            // measured from the strided path there, and no short tiles at row ends).
            Rows::Conv { ref p, k_hw, .. }
                if p.dilation_w == 1 && k_hw[0] <= MAX_SEGS_F32 && n <= 2 * NR_F32 =>
            {
                self.conv_avx512(ms, rows, o)
            }
            Rows::Conv { .. } => self.gathered_avx512(ms, rows, scratch, o),
        }
        if self.act == Activation::Tanh {
            for v in o.iter_mut() {
                *v = self.act.apply(*v);
            }
        }
    }

    /// [`Self::run_avx512`] for a convolution with dilation 1 across and up to two panels:
    /// each output row's pixels whose windows lie inside the input columns read their kernel
    /// rows in place at a fixed stride ([`x86::gemm_strided_f32_avx512`], kernel rows above
    /// or below the input skipped); a pixel at the left or right edge reads the kernel
    /// columns inside the input the same way, alone.
    #[cfg(target_arch = "x86_64")]
    fn conv_avx512(&self, ms: Range<usize>, rows: &Rows<'_, f32>, out: &mut [f32]) {
        let Rows::Conv {
            input,
            in_hwc: [in_h, in_w, c],
            k_hw: [k_h, k_w],
            out_w,
            ref p,
            ..
        } = *rows
        else {
            unreachable!()
        };
        let (n, k, sw, pl) = (self.n, self.k, p.stride_w, p.pad_left);
        // Output columns lo..hi have their windows inside the input's columns.
        let lo = pl.div_ceil(sw);
        let hi = match (in_w + pl).checked_sub(k_w) {
            Some(span) => span / sw + 1,
            None => 0,
        };
        // Pixels m..end of one output row, kernel columns `kx` of each (inside the input):
        // every kernel row inside the input is a segment at a fixed stride.
        let strided = |m: usize, end: usize, kx: Range<usize>, out: &mut [f32]| {
            let (oy, ox) = (m / out_w, m % out_w);
            let mut segs = [(0, 0); MAX_SEGS_F32];
            let mut count = 0;
            for ky in (0..k_h).filter(|_| !kx.is_empty()) {
                let y = (oy * p.stride_h + ky * p.dilation_h).wrapping_sub(p.pad_top);
                if y < in_h {
                    let x = ox * sw + kx.start - pl;
                    segs[count] = ((ky * k_w + kx.start) * c, (y * in_w + x) * c);
                    count += 1;
                }
            }
            let (b, bias, act) = (&self.b, &self.bias, self.act);
            let (segs, seg_len, rows) = (&segs[..count], kx.len() * c, end - m);
            x86::gemm_strided_f32_avx512(
                input,
                segs,
                seg_len,
                sw * c,
                rows,
                b,
                bias,
                n,
                k,
                act,
                out,
            );
        };
        let mut m = ms.start;
        while m < ms.end {
            let (row, ox) = (m - m % out_w, m % out_w);
            let o = &mut out[(m - ms.start) * n..];
            if (lo..hi).contains(&ox) {
                let end = (row + hi.min(out_w)).min(ms.end);
                strided(m, end, 0..k_w, &mut o[..(end - m) * n]);
                m = end;
            } else {
                // A pixel at the left or right edge alone, reading the kernel columns inside
                // the input (a narrow tile of one row costs less than gathering a block).
                let kx_lo = pl.saturating_sub(ox * sw).min(k_w);
                let kx_hi = (in_w + pl).saturating_sub(ox * sw).clamp(kx_lo, k_w);
                strided(m, m + 1, kx_lo..kx_hi, &mut o[..n]);
                m += 1;
            }
        }
    }

    /// [`Self::run_avx512`] for rows that are not at a fixed stride, in blocks of `MR_F32`:
    /// each block's receptive fields as segments ([`conv_segments`]) or gathered rows.
    #[cfg(target_arch = "x86_64")]
    fn gathered_avx512(
        &self,
        ms: Range<usize>,
        rows: &Rows<'_, f32>,
        scratch: &mut [f32],
        out: &mut [f32],
    ) {
        let (n, k) = (self.n, self.k);
        let (bufs, pads) = scratch[..(MR_F32 + 1) * k].split_at_mut(MR_F32 * k);
        let unset = SegF32 {
            koff: 0,
            rows: [(SrcF32::Pad, 0); MR_F32],
        };
        let mut segs = [unset; MAX_SEGS_F32];
        let mut m0 = ms.start;
        let mut filled = false;
        while m0 < ms.end {
            let here = (ms.end - m0).min(MR_F32);
            let (data, count, seg_len) = match *rows {
                Rows::Direct { .. } => unreachable!("rows in place take the other paths"),
                Rows::Conv {
                    input,
                    in_hwc,
                    k_hw,
                    out_w,
                    ref p,
                    pad,
                } if p.dilation_w == 1 && k_hw[0] <= MAX_SEGS_F32 => {
                    if !filled {
                        pads.fill(pad);
                        filled = true;
                    }
                    let seg_len = k_hw[1] * in_hwc[2];
                    let count = conv_segments(
                        input, in_hwc, k_hw, out_w, p, pad, m0, here, bufs, k, &mut segs,
                    );
                    (input, count, seg_len)
                }
                Rows::Conv { input, .. } => {
                    for (r, row) in segs[0].rows.iter_mut().enumerate().take(here) {
                        rows.row(m0 + r, &mut bufs[r * k..(r + 1) * k]);
                        *row = (SrcF32::Buf, r * k);
                    }
                    (input, 1, k)
                }
            };
            let o = &mut out[(m0 - ms.start) * n..(m0 - ms.start + here) * n];
            x86::gemm_rows_f32_avx512(
                [data, bufs, pads],
                &segs[..count],
                seg_len,
                here,
                &self.b,
                &self.bias,
                n,
                k,
                self.act,
                o,
            );
            m0 += MR_F32;
        }
    }
}

/// Fills `segs` with the receptive fields of output pixels `m0..m0 + here` of a convolution
/// (dilation 1 across), one segment per kernel row that some pixel of the block reads inside
/// the input: in place where the window's columns are inside the input, else gathered into
/// row `r`'s buffer (`bufs[r * k..]`, at the kernel row's place), and [`SrcF32::Pad`] for a
/// pixel whose kernel row is above or below the input. Returns the number of segments.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
fn conv_segments(
    input: &[f32],
    [in_h, in_w, c]: [usize; 3],
    [k_h, k_w]: [usize; 2],
    out_w: usize,
    p: &Conv2dParams,
    pad: f32,
    m0: usize,
    here: usize,
    bufs: &mut [f32],
    k: usize,
    segs: &mut [SegF32; MAX_SEGS_F32],
) -> usize {
    let seg_len = k_w * c;
    // Per row: top input row of the window (wrapping below 0) and left input column.
    let mut at = [(0usize, 0usize); MR_F32];
    for (r, a) in at.iter_mut().enumerate().take(here) {
        let (oy, ox) = ((m0 + r) / out_w, (m0 + r) % out_w);
        *a = (
            (oy * p.stride_h).wrapping_sub(p.pad_top),
            (ox * p.stride_w).wrapping_sub(p.pad_left),
        );
    }
    let mut count = 0;
    for ky in 0..k_h {
        let seg = &mut segs[count];
        seg.koff = ky * seg_len;
        let mut live = false;
        for (r, &(y0, x0)) in at.iter().enumerate().take(here) {
            let y = y0.wrapping_add(ky * p.dilation_h);
            if y >= in_h {
                seg.rows[r] = (SrcF32::Pad, 0);
                continue;
            }
            live = true;
            if x0 < in_w && in_w - x0 >= k_w {
                seg.rows[r] = (SrcF32::Data, (y * in_w + x0) * c);
                continue;
            }
            let o = r * k + ky * seg_len;
            for (kx, dst) in bufs[o..o + seg_len].chunks_exact_mut(c).enumerate() {
                let x = x0.wrapping_add(kx);
                if x < in_w {
                    let i = (y * in_w + x) * c;
                    dst.copy_from_slice(&input[i..i + c]);
                } else {
                    dst.fill(pad);
                }
            }
            seg.rows[r] = (SrcF32::Buf, o);
        }
        if live {
            count += 1;
        }
    }
    count
}

/// The first-element pointers of a float tile's rows, checking what the tile kernels read:
/// 1 to `MR_F32` rows of at least `k` values each.
#[cfg(target_arch = "x86_64")]
pub(crate) fn f32_row_ptrs(rows: &[&[f32]], k: usize) -> [*const f32; MR_F32] {
    assert!(!rows.is_empty() && rows.len() <= MR_F32);
    assert!(rows.iter().all(|r| r.len() >= k));
    let mut ptrs = [core::ptr::null::<f32>(); MR_F32];
    for (p, r) in ptrs.iter_mut().zip(rows) {
        *p = r.as_ptr();
    }
    ptrs
}

/// Float CONV_2D (groups 1) through [`GemmF32`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d_f32(
    g: &GemmF32,
    input: &[f32],
    in_shape: [usize; 4],
    filter_shape: [usize; 4],
    p: &Conv2dParams,
    output: &mut [f32],
    out_shape: [usize; 4],
    workers: &mut [FastScratch],
) {
    let [batches, in_h, in_w, in_c] = in_shape;
    let [_, out_h, out_w, out_c] = out_shape;
    let m = out_h * out_w;
    for b in 0..batches {
        let inb = &input[b * in_h * in_w * in_c..(b + 1) * in_h * in_w * in_c];
        let outb = &mut output[b * m * out_c..(b + 1) * m * out_c];
        let rows = conv_rows(inb, in_shape, filter_shape, p, out_w, 0.0);
        let work = m * out_c * g.k;
        for_row_blocks(m, MR_F32, out_c, work, outb, workers, |ms, o, s| {
            g.run(ms, &rows, &mut s.f32s, o)
        });
    }
}

/// `out[m - ms.start, :] = act(data[m * stride..][..k] · Wᵀ + bias)` for `m` in `ms`, with
/// `W` (`n x k`) packed as [`GemmF32::b`] (AVX-512): the rows are read in place at a fixed
/// stride, in one loop over the row blocks (1x1 convolutions, dense, Winograd); up to two
/// panels take the strided path's taller tiles.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_packed_direct_f32_avx512(
    b: &[f32],
    bias: &[f32],
    n: usize,
    k: usize,
    act: Activation,
    data: &[f32],
    stride: usize,
    ms: Range<usize>,
    out: &mut [f32],
) {
    if n <= 2 * NR_F32 {
        let (rows, at) = (ms.len(), ms.start * stride);
        x86::gemm_strided_f32_avx512(data, &[(0, at)], k, stride, rows, b, bias, n, k, act, out);
    } else {
        x86::gemm_direct_f32_avx512(data, stride, ms, b, bias, n, k, act, out);
    }
}

/// Tiles of one Winograd chunk: their transformed inputs and products (four positions each)
/// stay in L2 between the transforms and the GEMMs (12, 18, 24 and 36 ran the convnet equally
/// fast; fewer keep the scratch small).
pub(crate) const WINO_TILES: usize = 24;

/// Fewest 2x2 output tiles per image for which Winograd beats the direct convolution: it
/// builds its transformed weights on every call, which the tiles must amortize (measured on
/// 128 and 256 channels, single thread: 1.5x slower at 16 tiles, even at 25, 1.6x faster at 49).
pub const WINO_MIN_TILES: usize = 32;

/// Constant float weights of a 3x3, stride 1, dilation 1 CONV_2D for Winograd F(2x2, 3x3)
/// (AVX-512). A 2x2 output tile costs 16 multiply-adds per channel pair instead of 36;
/// transforms are additions (and halvings) only, so results stay within the float tolerance
/// of the direct convolution.
///
/// The nine taps `g[:, ky, kx, :]` are kept as they are, each packed for the float GEMM: as
/// many bytes as the file's weights. The transformed weights `U = G g Gᵀ` (16/9 of them) are
/// built at run time, one row of four positions at a time, into `4 * cin * cout` floats of
/// scratch: a linear combination of the packed taps, so they come out packed. Keeping all
/// sixteen instead would hold 7/9 of the weights more for the model's lifetime (1.2 MiB on a
/// convnet of 1.8 MiB of weights), for the ~1% of a layer's time the transform takes.
#[derive(Clone, Debug)]
pub struct WinoF32 {
    pub(crate) cin: usize,
    pub(crate) cout: usize,
    /// Tap `3 * ky + kx` in [`GemmF32`]'s packed layout (`cout` outputs, `cin` deep), at
    /// `tap * tap_len()`.
    pub(crate) taps: Vec<f32>,
    /// Bias padded to whole 16-channel panels.
    pub(crate) bias: Vec<f32>,
    /// The GEMMs' bias (the products have none; the output transform adds `bias`).
    pub(crate) zeros: Vec<f32>,
    pub(crate) act: Activation,
}

impl WinoF32 {
    /// `filter` is `[cout, 3, 3, cin]`. `None` unless the ISA is AVX-512 and both channel
    /// counts are large enough for the GEMMs to outweigh the transforms.
    pub fn pack(
        isa: Isa,
        filter: &[f32],
        cout: usize,
        cin: usize,
        bias: Option<&[f32]>,
        act: Activation,
    ) -> Option<WinoF32> {
        if isa != Isa::Avx512Vnni
            || !isa.available()
            || cin < 16
            || cout < 16
            || filter.len() != cout * 9 * cin
        {
            return None;
        }
        let tap_len = cout.div_ceil(NR_F32) * NR_F32 * cin;
        let mut taps = Vec::with_capacity(9 * tap_len);
        let mut w = vec![0f32; cout * cin];
        for tap in 0..9 {
            for (o, row) in w.chunks_exact_mut(cin).enumerate() {
                row.copy_from_slice(&filter[(o * 9 + tap) * cin..][..cin]);
            }
            let g = GemmF32::pack(isa, &w, cout, cin, None, Activation::None)?;
            debug_assert_eq!(g.b.len(), tap_len);
            taps.extend_from_slice(&g.b);
        }
        let mut bv = vec![0f32; cout.div_ceil(NR_F32) * NR_F32];
        if let Some(b) = bias {
            bv[..cout].copy_from_slice(&b[..cout]);
        }
        Some(WinoF32 {
            cin,
            cout,
            taps,
            zeros: vec![0f32; bv.len()],
            bias: bv,
            act,
        })
    }

    pub fn bytes(&self) -> usize {
        (self.taps.len() + self.bias.len() + self.zeros.len()) * 4
    }

    /// Floats of one packed tap: whole 16-channel panels, `cin` deep.
    fn tap_len(&self) -> usize {
        self.taps.len() / 9
    }

    /// f32 scratch of [`conv2d_wino_f32`]: one row of four positions' transformed weights,
    /// and a chunk's transformed inputs and products at those positions.
    pub fn scratch_f32(&self) -> usize {
        4 * (self.tap_len() + WINO_TILES * (self.cin + self.cout))
    }
}

/// Float CONV_2D (3x3, stride 1, dilation 1, groups 1) through [`WinoF32`]: output rows in
/// blocks of whole 2x2 tile rows per worker; per row `r` of the 4x4 transformed tile, its four
/// positions' weights are built, then the tiles go through in chunks of [`WINO_TILES`]: input
/// transform, four GEMMs, and the output transform's share of row `r` added to the output.
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d_wino_f32(
    wf: &WinoF32,
    input: &[f32],
    in_shape: [usize; 4],
    p: &Conv2dParams,
    output: &mut [f32],
    out_shape: [usize; 4],
    workers: &mut [FastScratch],
) {
    let [batches, in_h, in_w, in_c] = in_shape;
    let [_, out_h, out_w, out_c] = out_shape;
    assert!(in_c == wf.cin && out_c == wf.cout);
    let (cin, cout, len) = (wf.cin, wf.cout, wf.tap_len());
    let tw = out_w.div_ceil(2);
    let (xs_in, xs_out) = (WINO_TILES * cin, WINO_TILES * cout);
    for b in 0..batches {
        let inb = &input[b * in_h * in_w * cin..(b + 1) * in_h * in_w * cin];
        let outb = &mut output[b * out_h * out_w * cout..(b + 1) * out_h * out_w * cout];
        let work = out_h * out_w * cout * 9 * cin;
        for_row_blocks(out_h, 2, out_w * cout, work, outb, workers, |rows, o, s| {
            let (u, rest) = s.f32s[..wf.scratch_f32()].split_at_mut(4 * len);
            let (v, m) = rest.split_at_mut(4 * xs_in);
            let ty0 = rows.start / 2;
            let tiles = (rows.end.div_ceil(2) - ty0) * tw;
            #[cfg(not(target_arch = "x86_64"))]
            let _ = (&u, &v, &m, tiles, inb, p, len, xs_out);
            #[cfg(target_arch = "x86_64")]
            for r in 0..4 {
                x86::wino_weights_f32(&wf.taps, len, r, u);
                let mut t0 = 0;
                while t0 < tiles {
                    let chunk = (tiles - t0).min(WINO_TILES);
                    x86::wino_input_f32(
                        inb,
                        [in_h, in_w, cin],
                        [p.pad_top, p.pad_left],
                        [tw, ty0],
                        t0..t0 + chunk,
                        r,
                        v,
                    );
                    for c in 0..4 {
                        // Positions (0 or 3, 0 or 3) are taps as they are.
                        let b = match (r % 3, c % 3) {
                            (0, 0) => &wf.taps[(2 * r + 2 * (c / 3)) * len..][..len],
                            _ => &u[c * len..(c + 1) * len],
                        };
                        gemm_packed_direct_f32_avx512(
                            b,
                            &wf.zeros,
                            cout,
                            cin,
                            Activation::None,
                            &v[c * cin..chunk * 4 * cin],
                            4 * cin,
                            0..chunk,
                            &mut m[c * xs_out..c * xs_out + chunk * cout],
                        );
                    }
                    x86::wino_output_f32(
                        m,
                        xs_out,
                        cout,
                        &wf.bias,
                        wf.act,
                        [out_w, tw, ty0],
                        rows.clone(),
                        t0..t0 + chunk,
                        r,
                        o,
                    );
                    t0 += chunk;
                }
            }
            if wf.act == Activation::Tanh {
                for v in o[..rows.len() * out_w * cout].iter_mut() {
                    *v = wf.act.apply(*v);
                }
            }
        });
    }
}

/// Float FULLY_CONNECTED through [`GemmF32`].
pub(crate) fn fully_connected_f32(
    g: &GemmF32,
    input: &[f32],
    batches: usize,
    output: &mut [f32],
    workers: &mut [FastScratch],
) {
    let rows = Rows::Direct {
        data: input,
        stride: g.k,
    };
    let work = batches * g.n * g.k;
    for_row_blocks(batches, MR_F32, g.n, work, output, workers, |ms, o, s| {
        g.run(ms, &rows, &mut s.f32s, o)
    });
}

/// Constant float depthwise weights (depth multiplier 1), channels padded to 8.
#[derive(Clone, Debug)]
pub struct DwF32 {
    pub(crate) isa: Isa,
    pub(crate) c: usize,
    pub(crate) cp: usize,
    pub(crate) taps: usize,
    /// Tap `t`, channel `ch` at `t * cp + ch`.
    pub(crate) w: Vec<f32>,
    pub(crate) bias: Vec<f32>,
    pub(crate) act: Activation,
}

impl DwF32 {
    pub fn pack(
        isa: Isa,
        filter: &[f32],
        taps: usize,
        c: usize,
        bias: Option<&[f32]>,
        act: Activation,
    ) -> Option<DwF32> {
        if isa == Isa::Portable
            || !isa.available()
            || taps == 0
            || taps > DW_MAX_TAPS
            || c == 0
            || filter.len() != taps * c
        {
            return None;
        }
        let cp = c.div_ceil(8) * 8;
        let mut w = vec![0f32; taps * cp];
        for t in 0..taps {
            w[t * cp..t * cp + c].copy_from_slice(&filter[t * c..(t + 1) * c]);
        }
        let mut bv = vec![0f32; cp];
        if let Some(b) = bias {
            bv[..c].copy_from_slice(&b[..c]);
        }
        Some(DwF32 {
            isa,
            c,
            cp,
            taps,
            w,
            bias: bv,
            act,
        })
    }

    pub fn bytes(&self) -> usize {
        (self.w.len() + self.bias.len()) * 4
    }
}

/// Float DEPTHWISE_CONV_2D (depth multiplier 1) through [`DwF32`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn depthwise_f32(
    dw: &DwF32,
    input: &[f32],
    in_shape: [usize; 4],
    k_hw: [usize; 2],
    p: &DepthwiseParams,
    output: &mut [f32],
    out_shape: [usize; 4],
    workers: &mut [FastScratch],
) {
    let isa = dw.isa;
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512Vnni {
        let dims = [in_shape[1], in_shape[2], k_hw[0], k_hw[1], out_shape[2]];
        return depthwise_rows(
            input,
            in_shape,
            k_hw,
            output,
            out_shape,
            workers,
            |inb, oys, o, _| {
                let at = oys.len() * out_shape[2] * in_shape[3];
                x86::dw_f32_rows(dw, inb, dims, dw_geometry(p), oys, o);
                if dw.act == Activation::Tanh {
                    for v in o[..at].iter_mut() {
                        *v = dw.act.apply(*v);
                    }
                }
            },
        );
    }
    depthwise_pixels(
        input,
        in_shape,
        k_hw,
        p,
        output,
        out_shape,
        workers,
        |inb, taps, o| {
            #[cfg(target_arch = "x86_64")]
            x86::dw_f32_pixel(isa, dw, inb, taps, o);
            #[cfg(target_arch = "aarch64")]
            aarch64::dw_f32_pixel(isa, dw, inb, taps, o);
            #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
            let _ = (isa, inb, taps, &o);
            if dw.act == Activation::Tanh {
                for v in o.iter_mut() {
                    *v = dw.act.apply(*v);
                }
            }
        },
    );
}

#[cfg(test)]
mod tests {
    //! Every fast path against the portable kernel on random shapes (odd sizes, padding,
    //! strides, dilation), for every ISA this CPU has: int8 bit-exact, float within 1e-5.
    use super::*;
    use crate::kernels::{conv, depthwise_conv, fully_connected};
    use crate::quant::quantize_multiplier;

    struct Rng(u64);
    impl Rng {
        fn u(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.u() % n as u64) as usize
        }
        fn i8s(&mut self, n: usize) -> Vec<i8> {
            (0..n).map(|_| (self.u() >> 56) as i8).collect()
        }
        fn f32s(&mut self, n: usize) -> Vec<f32> {
            (0..n)
                .map(|_| (self.u() >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
                .collect()
        }
        fn stage(&mut self, n: usize, k: usize, single: bool) -> OutputStage {
            let mut multipliers = Vec::new();
            let mut shifts = Vec::new();
            for _ in 0..n {
                // Typical conv scales (acc ~ 2^15 * k -> int8), and some above 1.
                let e = -(self.below(14) as i32) - 4 - (k as f64).log2() as i32 / 2;
                let real = (1.0 + self.below(1000) as f64 / 1000.0) * 2f64.powi(e);
                let real = if self.below(20) == 0 {
                    real * 4096.0
                } else {
                    real
                };
                let (m, s) = quantize_multiplier(real);
                multipliers.push(m);
                shifts.push(s);
            }
            let act_min = -128 + self.below(2) as i32 * (self.below(100) as i32);
            OutputStage {
                input_offset: -((self.u() >> 56) as i8 as i32),
                output_offset: (self.u() >> 56) as i8 as i32,
                multipliers,
                shifts,
                act_min,
                act_max: 127 - self.below(2) as i32 * (self.below(60) as i32),
                single_rounding: single,
            }
        }
    }

    fn isas() -> Vec<Isa> {
        [
            Isa::Avx2,
            Isa::AvxVnni,
            Isa::Avx512Vnni,
            Isa::Neon,
            Isa::NeonDot,
        ]
        .into_iter()
        .filter(|i| i.available())
        .collect()
    }

    /// The ISAs the tests above run: on aarch64 NEON at least (it is part of the base
    /// architecture), so the NEON paths are always compared with the portable kernels there.
    #[test]
    fn tested_isas() {
        let all = isas();
        #[cfg(feature = "std")]
        std::eprintln!(
            "fast paths tested here: {all:?}, detected {:?}",
            Isa::detect()
        );
        if cfg!(target_arch = "aarch64") {
            assert!(all.contains(&Isa::Neon));
            assert!(Isa::detect() == Isa::NeonDot || Isa::detect() == Isa::Neon);
        }
    }

    /// Scratch of three workers: with the `threads` feature every case runs split over three
    /// threads (the tests' work threshold is 0), so the split must not change any output.
    fn scratch_for(k: usize, i32s: usize) -> Vec<FastScratch> {
        let one = || FastScratch {
            i8s: vec![0; k],
            i32s: vec![0; i32s],
            f32s: vec![0.0; (MR_F32 + 1) * k],
        };
        vec![one(), one(), one()]
    }

    #[test]
    fn requant_matches_scalar_on_extreme_accumulators() {
        let mut rng = Rng(99);
        for isa in isas() {
            for i in 0..600 {
                let mut q = rng.stage(32, 1, false);
                for s in q.shifts.iter_mut() {
                    // A third of the cases with right shifts only (no channel shifts left), a
                    // third shifting right by 1..=23 (the fused AVX-512 form; larger shifts only
                    // have it with small output offsets).
                    *s = match i % 3 {
                        0 => rng.below(62) as i32 - 31,
                        1 => -(rng.below(32) as i32),
                        _ => -1 - rng.below(23) as i32,
                    };
                }
                if i % 6 == 5 {
                    // Output offsets far outside int8's (the fused form's constant grows with
                    // them; it falls back where it would not fit).
                    q.output_offset = (rng.u() as i32) >> rng.below(32);
                }
                let rq = Requant::new(&q, 32, |c| [0, i32::MAX, i32::MIN, -7][c % 4]).unwrap();
                if i % 3 == 2 && i % 6 != 5 {
                    assert!(rq.fused, "fused form expected: {q:?}");
                }
                let mut acc = [0i32; 32];
                for a in acc.iter_mut() {
                    *a = match rng.below(4) {
                        0 => rng.u() as i32,
                        1 => (rng.u() as i32) >> rng.below(32),
                        2 => [i32::MIN, i32::MAX, 0, -1, 1][rng.below(5)],
                        // Ties of the rounding shift.
                        _ => (rng.below(1000) as i32 - 500) << 10 | 1 << 9,
                    };
                }
                let mut got = [0i8; 32];
                requant_row(isa, &rq, 0, &acc, &mut got);
                for j in 0..32 {
                    assert_eq!(
                        got[j],
                        rq.apply(acc[j], j),
                        "{isa:?} lane {j} acc {}",
                        acc[j]
                    );
                }
            }
        }
    }

    /// The parameters the vector kernels derive from `shift` (x86 `Rq16::load`, `Rq8::load`)
    /// are `Mbqm::new`'s and the fused form's constants as stored before (`2^30 + 2^(30 + e) +
    /// off * 2^(31 + e)` with `e - 1`), for every shift and output offsets up to i32's range;
    /// and the fused form applies exactly where it did.
    #[test]
    fn derived_requant_params_match() {
        let offsets = [
            0,
            -1,
            1,
            -128,
            127,
            -7,
            1000,
            -70_000,
            1 << 20,
            -(1 << 24),
            i32::MAX,
            i32::MIN,
        ];
        let mut rng = Rng(7);
        for &off in &offsets {
            for pattern in 0..66 {
                // 63 uniform shifts, then shifts right only (mixed), then every shift mixed.
                let n: usize = if pattern % 2 == 0 { 32 } else { 27 };
                let shifts: Vec<i32> = (0..n)
                    .map(|c| match pattern {
                        0..=62 => pattern - 31,
                        63 => -1 - ((c as i32 * 7) % 31),
                        64 => -1 - rng.below(31) as i32,
                        _ => rng.below(63) as i32 - 31,
                    })
                    .collect();
                let q = OutputStage {
                    input_offset: 0,
                    output_offset: off,
                    multipliers: (0..n).map(|c| (1 << 30) + c as i32 * 12345).collect(),
                    shifts: shifts.clone(),
                    act_min: -128,
                    act_max: 127,
                    single_rounding: false,
                };
                let rq = Requant::new(&q, 32, |_| 0).unwrap();
                let old_add =
                    |e: i32| (1i128 << 30) + (1i128 << (30 + e)) + (i128::from(off) << (31 + e));
                let fused = shifts
                    .iter()
                    .all(|&s| s <= -1 && old_add(-s).abs() < 1i128 << 62);
                assert_eq!(rq.fused, fused, "off {off} shifts {shifts:?}");
                #[cfg(target_arch = "x86_64")]
                for c0 in [0, 16] {
                    let Some(d) = x86::derived(&rq, c0) else {
                        continue;
                    };
                    for i in 0..16 {
                        let c = c0 + i;
                        if c >= n {
                            continue;
                        }
                        let m = Mbqm::new(q.multipliers[c], shifts[c]).unwrap();
                        let want = [m.left, m.right, m.mask, m.thr];
                        for (k, w) in want.iter().enumerate() {
                            assert_eq!(
                                d.stages_8[k][i], *w,
                                "Rq8 {k} off {off} shift {}",
                                shifts[c]
                            );
                            if !fused {
                                assert_eq!(d.stages[k][i], *w, "Rq16 {k} shift {}", shifts[c]);
                            }
                        }
                        if fused {
                            let e = m.right;
                            assert_eq!(i128::from(d.add[i]), old_add(e), "off {off} e {e}");
                            assert_eq!(d.rshift[i], e - 1, "off {off} e {e}");
                            let (add, rshift) = d.cached.unwrap();
                            assert_eq!((add[i], rshift[i]), (d.add[i], d.rshift[i]), "cached");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn conv_i8_matches_portable() {
        let mut rng = Rng(1);
        for isa in isas() {
            for case in 0..60usize {
                let k = [1, 1, 3, 3, 5, 2][case % 6];
                let (kh, kw) = if case.is_multiple_of(7) {
                    (k, 1)
                } else {
                    (k, k)
                };
                let stride = 1 + rng.below(2);
                let dil = if case.is_multiple_of(9) { 2 } else { 1 };
                let cin = 1 + rng.below(40);
                let cout = 1 + rng.below(70);
                let (h, w) = (kh * dil + rng.below(9), kw * dil + rng.below(9));
                let pad = if rng.below(2) == 0 {
                    0
                } else {
                    (kh - 1) * dil / 2
                };
                let oh = (h + 2 * pad - (kh - 1) * dil - 1) / stride + 1;
                let ow = (w + 2 * pad - (kw - 1) * dil - 1) / stride + 1;
                let batches = 1 + rng.below(2);
                let is = [batches, h, w, cin];
                let fs = [cout, kh, kw, cin];
                let os = [batches, oh, ow, cout];
                let input = rng.i8s(is.iter().product());
                let filter = rng.i8s(fs.iter().product());
                let bias: Vec<i32> = (0..cout).map(|_| rng.u() as i32 >> 12).collect();
                let bias = if case.is_multiple_of(5) {
                    None
                } else {
                    Some(&bias[..])
                };
                let q = rng.stage(cout, kh * kw * cin, false);
                let p = Conv2dParams {
                    stride_h: stride,
                    stride_w: stride,
                    dilation_h: dil,
                    dilation_w: dil,
                    pad_top: pad,
                    pad_left: pad,
                    activation: Activation::None,
                };
                let mut want = vec![0i8; os.iter().product()];
                conv::conv2d_i8(&input, is, &filter, fs, bias, &p, &q, &mut want, os);
                let kk = kh * kw * cin;
                let g = GemmI8::pack(isa, &filter, cout, kk, bias, &q).unwrap();
                let mut s = scratch_for(kk, g.scratch_i32());
                let mut got = vec![0i8; want.len()];
                conv2d_i8(&g, &input, is, fs, &p, q.input_offset, &mut got, os, &mut s);
                assert_eq!(got, want, "{isa:?} case {case}: {is:?} {fs:?} {p:?}");
            }
        }
    }

    #[test]
    fn fully_connected_i8_matches_portable() {
        let mut rng = Rng(2);
        for isa in isas() {
            for case in 0..40usize {
                let (b, k, n) = (1 + rng.below(9), 1 + rng.below(300), 1 + rng.below(80));
                let input = rng.i8s(b * k);
                let weights = rng.i8s(n * k);
                let bias: Vec<i32> = (0..n).map(|_| rng.u() as i32 >> 10).collect();
                let q = rng.stage(n, k, case.is_multiple_of(2));
                let mut want = vec![0i8; b * n];
                fully_connected::fully_connected_i8(
                    &input,
                    b,
                    k,
                    &weights,
                    n,
                    Some(&bias),
                    &q,
                    &mut want,
                );
                let g = GemmI8::pack(isa, &weights, n, k, Some(&bias), &q).unwrap();
                let mut s = scratch_for(k, g.scratch_i32());
                let mut got = vec![0i8; b * n];
                fully_connected_i8(&g, &input, b, &mut got, &mut s);
                assert_eq!(got, want, "{isa:?} case {case}: b {b} k {k} n {n}");
            }
        }
    }

    fn dw_case(
        rng: &mut Rng,
        case: usize,
    ) -> ([usize; 4], [usize; 4], [usize; 4], DepthwiseParams) {
        let k = [3, 3, 3, 5, 1, 2][case % 6];
        // Some non-square windows: 2, 3, 6 and 7 taps (every count of taps modulo 4).
        let (kh, kw) = match case % 8 {
            3 => (1, 2),
            5 => (3, 1),
            7 if case % 16 == 7 => (2, 3),
            7 => (1, 7),
            _ => (k, k),
        };
        let stride = 1 + case % 2;
        let dil = if case.is_multiple_of(11) { 2 } else { 1 };
        // Up to 200 channels: several 64-channel blocks of the AVX-512 layout, odd tails;
        // rows up to ~93 pixels wide.
        let c = 1 + rng.below(if case % 3 == 1 { 200 } else { 100 });
        let wide = if case % 5 == 4 { 90 } else { 10 };
        let (h, w) = (kh * dil + rng.below(10), kw * dil + rng.below(wide));
        let pad = if case.is_multiple_of(3) {
            0
        } else {
            (kh.max(kw) - 1) * dil / 2 + rng.below(2)
        };
        let oh = (h + 2 * pad - (kh - 1) * dil - 1) / stride + 1;
        let ow = (w + 2 * pad - (kw - 1) * dil - 1) / stride + 1;
        let p = DepthwiseParams {
            stride_h: stride,
            stride_w: stride,
            dilation_h: dil,
            dilation_w: dil,
            pad_top: pad,
            pad_left: pad.min(1),
            depth_multiplier: 1,
            activation: [Activation::None, Activation::Relu6, Activation::Relu][case % 3],
        };
        let b = 1 + case % 2;
        ([b, h, w, c], [1, kh, kw, c], [b, oh, ow, c], p)
    }

    /// The int8 depthwise kernel packed for `isa` against the portable one, bit for bit.
    #[allow(clippy::too_many_arguments)]
    fn check_depthwise_i8(
        isa: Isa,
        input: &[i8],
        is: [usize; 4],
        filter: &[i8],
        fs: [usize; 4],
        bias: &[i32],
        p: &DepthwiseParams,
        q: &OutputStage,
        os: [usize; 4],
        what: &str,
    ) {
        let c = is[3];
        let mut want = vec![0i8; os.iter().product()];
        let mut acc = vec![0i32; c];
        depthwise_conv::depthwise_conv2d_i8(
            input,
            is,
            filter,
            fs,
            Some(bias),
            p,
            q,
            &mut acc,
            &mut want,
            os,
        );
        let dw = DwI8::pack(isa, filter, fs[1] * fs[2], c, Some(bias), q).unwrap();
        let mut got = vec![0i8; want.len()];
        let mut s = scratch_for(0, dw.scratch_i32());
        depthwise_i8(&dw, input, is, [fs[1], fs[2]], p, &mut got, os, &mut s);
        assert_eq!(got, want, "{what} {p:?}");
    }

    #[test]
    fn depthwise_i8_matches_portable() {
        let mut rng = Rng(3);
        for isa in isas() {
            for case in 0..60usize {
                let (is, fs, os, p) = dw_case(&mut rng, case);
                let c = is[3];
                let input = rng.i8s(is.iter().product());
                let filter = rng.i8s(fs.iter().product());
                let bias: Vec<i32> = (0..c).map(|_| rng.u() as i32 >> 14).collect();
                let q = rng.stage(c, fs[1] * fs[2], false);
                let what = format!("{isa:?} case {case}: {is:?} {fs:?}");
                check_depthwise_i8(isa, &input, is, &filter, fs, &bias, &p, &q, os, &what);
            }
        }
    }

    /// 3x3 windows (the AVX-512 ring kernel, without dilation): channel counts around the 16-,
    /// 32- and 64-channel blocks, odd and even rows wider than a strip of `DW3_STRIP` units,
    /// padding of 0-2 on every side (unequal), stride 1 and 2, right shifts only (the fused and
    /// unsigned-product forms) or some left shifts, activation clamps, random input zero
    /// points, biases near the i32 limits, several row blocks.
    #[test]
    fn depthwise3x3_i8_matches_portable() {
        let mut rng = Rng(7);
        let cs = [1, 8, 16, 24, 31, 32, 40, 64, 72, 136, 144, 200];
        for isa in isas() {
            for case in 0..72usize {
                let c = cs[case % cs.len()];
                let stride = if case % 5 == 4 { 2 } else { 1 };
                let (h, w) = (
                    1 + rng.below(9),
                    1 + rng.below(if case % 3 == 0 || case % 4 == 0 {
                        150
                    } else {
                        20
                    }),
                );
                let [pt, pl, pb, pr] = [0; 4].map(|_| rng.below(3));
                if h + pt + pb < 3 || w + pl + pr < 3 {
                    continue;
                }
                let (oh, ow) = (
                    (h + pt + pb - 3) / stride + 1,
                    (w + pl + pr - 3) / stride + 1,
                );
                let p = DepthwiseParams {
                    stride_h: stride,
                    stride_w: stride,
                    dilation_h: 1,
                    dilation_w: 1,
                    pad_top: pt,
                    pad_left: pl,
                    depth_multiplier: 1,
                    activation: Activation::None,
                };
                let b = 1 + case % 2;
                let (is, fs, os) = ([b, h, w, c], [1, 3, 3, c], [b, oh, ow, c]);
                let input = rng.i8s(is.iter().product());
                let filter = rng.i8s(9 * c);
                // Some biases near the i32 limits: the unsigned-product form's bound fails for
                // some channels (then the whole stage takes Rq16) or holds near its edge.
                let big = case % 7 == 6;
                let bias: Vec<i32> = (0..c)
                    .map(|_| match rng.u() as i32 {
                        // (Sums may wrap, as in the reference.)
                        b if big && b < 0 => i32::MIN + (b & 0xF_FFFF),
                        b if big => i32::MAX - (b & 0xF_FFFF),
                        b => b >> 14,
                    })
                    .collect();
                let mut q = rng.stage(c, 9, false);
                if case % 3 != 0 {
                    // Right shifts only: the fused requantization.
                    for ch in 0..c {
                        // With the big biases, multipliers near 2^31 and shifts to 17, for which
                        // the unsigned-product form fails its bound with large output offsets.
                        let top = if big && rng.below(2) == 0 {
                            999_999
                        } else {
                            rng.below(1000) * 1000
                        };
                        let real = (1.0 + top as f64 / 1e6) / 64.0;
                        let e = rng.below(if big { 12 } else { 6 });
                        let (m, sh) = quantize_multiplier(real / (1 << e) as f64);
                        (q.multipliers[ch], q.shifts[ch]) = (m, sh);
                    }
                }
                let what = format!("{isa:?} case {case}: {is:?} {os:?}");
                check_depthwise_i8(isa, &input, is, &filter, fs, &bias, &p, &q, os, &what);
            }
        }
    }

    fn close(got: &[f32], want: &[f32], what: &str) {
        let peak = want.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
        for (i, (a, b)) in got.iter().zip(want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 * peak.max(b.abs()),
                "{what} at {i}: {a} vs {b}"
            );
        }
    }

    /// [`close`] with an error bound of at least 1e-5 absolute: a few outputs of small sums
    /// may cancel to near zero, where the relative error of the summation order is large.
    fn close_abs(got: &[f32], want: &[f32], what: &str) {
        let peak = want.iter().fold(1f32, |m, v| m.max(v.abs()));
        for (i, (a, b)) in got.iter().zip(want).enumerate() {
            assert!((a - b).abs() <= 1e-5 * peak, "{what} at {i}: {a} vs {b}");
        }
    }

    /// A float convolution of random input, filter and bias (`fs`, `p`) through the packed
    /// kernel for `isa`, against the portable one, compared by `cmp` (`close` or `close_abs`).
    #[allow(clippy::too_many_arguments)]
    fn check_conv_f32(
        rng: &mut Rng,
        isa: Isa,
        is: [usize; 4],
        fs: [usize; 4],
        os: [usize; 4],
        p: &Conv2dParams,
        cmp: fn(&[f32], &[f32], &str),
        what: &str,
    ) {
        let input = rng.f32s(is.iter().product());
        let filter = rng.f32s(fs.iter().product());
        let bias = rng.f32s(fs[0]);
        let mut want = vec![0f32; os.iter().product()];
        conv::conv2d_f32(&input, is, &filter, fs, Some(&bias), p, &mut want, os);
        let kk = fs[1] * fs[2] * fs[3];
        let g = GemmF32::pack(isa, &filter, fs[0], kk, Some(&bias), p.activation).unwrap();
        let mut s = scratch_for(kk, 8);
        let mut got = vec![0f32; want.len()];
        conv2d_f32(&g, &input, is, fs, p, &mut got, os, &mut s);
        cmp(&got, &want, &format!("{isa:?} {what} {is:?} {fs:?} {p:?}"));
    }

    /// A dense layer (`b` rows of `k`, `n` outputs, with a bias or without) of random values
    /// through the packed kernel for `isa`, against the portable one, compared by `cmp`.
    #[allow(clippy::too_many_arguments)]
    fn check_fc_f32(
        rng: &mut Rng,
        isa: Isa,
        [b, k, n]: [usize; 3],
        with_bias: bool,
        act: Activation,
        cmp: fn(&[f32], &[f32], &str),
        what: &str,
    ) {
        let x = rng.f32s(b * k);
        let wts = rng.f32s(n * k);
        let bias = with_bias.then(|| rng.f32s(n));
        let mut want = vec![0f32; b * n];
        let bias = bias.as_deref();
        fully_connected::fully_connected_f32(&x, b, k, &wts, n, bias, act, &mut want);
        let g = GemmF32::pack(isa, &wts, n, k, bias, act).unwrap();
        let mut s = scratch_for(k, 8);
        let mut got = vec![0f32; b * n];
        fully_connected_f32(&g, &x, b, &mut got, &mut s);
        cmp(&got, &want, &format!("{isa:?} {what} {b}x{k}x{n}"));
    }

    #[test]
    fn conv_and_fc_f32_match_portable() {
        let mut rng = Rng(4);
        for isa in isas() {
            for case in 0..40usize {
                let k = [1, 3, 1, 5, 2][case % 5];
                let stride = 1 + rng.below(2);
                let (cin, cout) = (1 + rng.below(30), 1 + rng.below(40));
                let (h, w) = (k + rng.below(8), k + rng.below(8));
                let pad = if case.is_multiple_of(2) { 0 } else { k / 2 };
                let oh = (h + 2 * pad - k) / stride + 1;
                let ow = (w + 2 * pad - k) / stride + 1;
                let is = [1 + case % 2, h, w, cin];
                let fs = [cout, k, k, cin];
                let os = [is[0], oh, ow, cout];
                let act = [
                    Activation::None,
                    Activation::Relu,
                    Activation::Relu6,
                    Activation::ReluN1To1,
                    Activation::Tanh,
                ][case % 5];
                let p = Conv2dParams {
                    stride_h: stride,
                    stride_w: stride,
                    pad_top: pad,
                    pad_left: pad,
                    activation: act,
                    ..Default::default()
                };
                let what = format!("conv case {case}");
                check_conv_f32(&mut rng, isa, is, fs, os, &p, close, &what);
                let kk = k * k * cin;

                let (b, n) = (1 + rng.below(7), 1 + rng.below(50) + case % 2 * 100);
                let what = format!("fc case {case}");
                check_fc_f32(&mut rng, isa, [b, kk, n], false, act, close, &what);
            }
        }
    }

    /// Float convolutions on the shapes the AVX-512 path reads in place or gathers: kernel
    /// height and width apart, dilation, strides up to 3, top/left padding up to the kernel
    /// size (rows and columns wholly in the padding) with any implied bottom/right padding,
    /// channel counts across one to several 64-channel groups with a partial last panel, and
    /// kernels taller than the in-place limit.
    #[test]
    fn conv_f32_windows_match_portable() {
        let mut rng = Rng(6);
        for isa in isas() {
            for case in 0..60usize {
                let tall = case % 20 == 19;
                let kh = if tall {
                    MAX_SEGS_F32 + 1
                } else {
                    1 + rng.below(5)
                };
                let kw = 1 + rng.below(5);
                let (dh, dw) = (1 + rng.below(2), 1 + (case % 3) / 2);
                let (sh, sw) = (1 + rng.below(3), 1 + rng.below(3));
                let (pt, pl) = (rng.below(kh + 1), rng.below(kw + 1));
                let (pb, pr) = (rng.below(kh + 1), rng.below(kw + 1));
                let (ekh, ekw) = ((kh - 1) * dh + 1, (kw - 1) * dw + 1);
                let h = (ekh + rng.below(9)).saturating_sub(pt + pb).max(1);
                let w = (ekw + rng.below(9)).saturating_sub(pl + pr).max(1);
                if h + pt + pb < ekh || w + pl + pr < ekw {
                    continue;
                }
                let oh = (h + pt + pb - ekh) / sh + 1;
                let ow = (w + pl + pr - ekw) / sw + 1;
                let cin = 1 + rng.below(20);
                let cout = [
                    1 + rng.below(16),
                    17 + rng.below(60),
                    64,
                    65 + rng.below(90),
                ][case % 4];
                let is = [1 + case % 2, h, w, cin];
                let fs = [cout, kh, kw, cin];
                let os = [is[0], oh, ow, cout];
                let act = [Activation::Relu6, Activation::None, Activation::Tanh][case % 3];
                let p = Conv2dParams {
                    stride_h: sh,
                    stride_w: sw,
                    dilation_h: dh,
                    dilation_w: dw,
                    pad_top: pt,
                    pad_left: pl,
                    activation: act,
                };
                let what = format!("conv case {case}");
                check_conv_f32(&mut rng, isa, is, fs, os, &p, close, &what);
            }
        }
    }

    /// Float convolutions and dense layers through the strided AVX-512 path: outputs wide
    /// enough for several tall tiles and a remainder (rows not a multiple of any tile
    /// height), output channels around one and two panels and beyond, small odd reduction
    /// sizes, padding on every side (pixels gathered at the left and right edges, kernel rows
    /// skipped at the top and bottom), strides 1 and 2, two batches, every activation.
    #[test]
    fn conv_f32_strided_matches_portable() {
        let mut rng = Rng(8);
        let acts = [
            Activation::None,
            Activation::Relu,
            Activation::Relu6,
            Activation::ReluN1To1,
            Activation::Tanh,
        ];
        for isa in isas() {
            for case in 0..80usize {
                let cout = [1, 8, 16, 17, 24, 32, 33, 48, 70][case % 9];
                let act = acts[case % 5];
                let (kh, kw) = (1 + rng.below(3), 1 + rng.below(3));
                let (sh, sw) = (1 + rng.below(2), 1 + rng.below(2));
                let (pt, pl) = (rng.below(kh), rng.below(kw));
                let (pb, pr) = (rng.below(kh), rng.below(kw));
                let h = kh + rng.below(6);
                let w = kw + rng.below(60);
                let oh = (h + pt + pb - kh) / sh + 1;
                let ow = (w + pl + pr - kw) / sw + 1;
                let cin = 1 + rng.below(5);
                let is = [1 + case % 2, h, w, cin];
                let fs = [cout, kh, kw, cin];
                let os = [is[0], oh, ow, cout];
                let p = Conv2dParams {
                    stride_h: sh,
                    stride_w: sw,
                    pad_top: pt,
                    pad_left: pl,
                    activation: act,
                    ..Default::default()
                };
                let what = format!("conv case {case}");
                check_conv_f32(&mut rng, isa, is, fs, os, &p, close_abs, &what);

                // Dense rows (the 1x1 path) at a stride of k.
                let (b, k) = (1 + rng.below(40), 1 + rng.below(40));
                let what = format!("fc case {case}");
                check_fc_f32(&mut rng, isa, [b, k, cout], true, act, close_abs, &what);
            }
        }
    }

    /// Winograd F(2x2, 3x3) against the portable convolution: odd and even output sizes
    /// (partial tiles), padding 0-2 on each side (tiles reaching past every edge), output
    /// channels across partial and whole 64-channel groups, several chunks of tiles, two
    /// batches; on CPUs without AVX-512 `pack` declines.
    #[test]
    fn conv_wino_f32_matches_portable() {
        let mut rng = Rng(7);
        for isa in isas() {
            for case in 0..40usize {
                let (cin, cout) = (16 + rng.below(40), 16 + rng.below(140));
                let filter = rng.f32s(cout * 9 * cin);
                let bias = rng.f32s(cout);
                let act = [Activation::Relu6, Activation::None, Activation::Tanh][case % 3];
                let Some(wf) = WinoF32::pack(isa, &filter, cout, cin, Some(&bias), act) else {
                    assert!(isa != Isa::Avx512Vnni);
                    continue;
                };
                let (pt, pl, pb, pr) = (rng.below(3), rng.below(3), rng.below(3), rng.below(3));
                let h = (1 + rng.below(if case % 4 == 0 { 30 } else { 9 }))
                    .max(3usize.saturating_sub(pt + pb));
                let w = (1 + rng.below(13)).max(3usize.saturating_sub(pl + pr));
                let (oh, ow) = (h + pt + pb - 2, w + pl + pr - 2);
                let is = [1 + case % 2, h, w, cin];
                let fs = [cout, 3, 3, cin];
                let os = [is[0], oh, ow, cout];
                let p = Conv2dParams {
                    pad_top: pt,
                    pad_left: pl,
                    activation: act,
                    ..Default::default()
                };
                let input = rng.f32s(is.iter().product());
                let mut want = vec![0f32; os.iter().product()];
                conv::conv2d_f32(&input, is, &filter, fs, Some(&bias), &p, &mut want, os);
                let one = || FastScratch {
                    f32s: vec![0.0; wf.scratch_f32()],
                    ..Default::default()
                };
                let mut s = vec![one(), one(), one()];
                let mut got = vec![0f32; want.len()];
                conv2d_wino_f32(&wf, &input, is, &p, &mut got, os, &mut s);
                close(
                    &got,
                    &want,
                    &format!("{isa:?} wino case {case} {is:?} {os:?} {p:?}"),
                );
            }
        }
    }

    #[test]
    fn depthwise_f32_matches_portable() {
        let mut rng = Rng(5);
        for isa in isas() {
            for case in 0..40usize {
                let (is, fs, os, p) = dw_case(&mut rng, case);
                let c = is[3];
                let input = rng.f32s(is.iter().product());
                let filter = rng.f32s(fs.iter().product());
                let bias = rng.f32s(c);
                let mut want = vec![0f32; os.iter().product()];
                depthwise_conv::depthwise_conv2d_f32(
                    &input,
                    is,
                    &filter,
                    fs,
                    Some(&bias),
                    &p,
                    &mut want,
                    os,
                );
                let dw =
                    DwF32::pack(isa, &filter, fs[1] * fs[2], c, Some(&bias), p.activation).unwrap();
                let mut got = vec![0f32; want.len()];
                depthwise_f32(
                    &dw,
                    &input,
                    is,
                    [fs[1], fs[2]],
                    &p,
                    &mut got,
                    os,
                    &mut scratch_for(0, 0),
                );
                close(&got, &want, &format!("{isa:?} dw case {case}"));
            }
        }
    }

    /// The 3x3 float paths (no dilation) on small and odd shapes: inputs down to 1x1, every
    /// stride pair of 1 and 2, padding 0-1 on each side, channel tails, output widths not a
    /// multiple of the strip, batches, rows split over workers.
    #[test]
    fn depthwise3x3_f32_matches_portable() {
        let mut rng = Rng(23);
        for isa in isas() {
            for case in 0..300usize {
                let (sh, sw) = [(1, 1), (2, 2), (1, 2), (2, 1)][case % 4];
                let (pt, pl) = (rng.below(2), rng.below(2));
                let (pb, pr) = (rng.below(2), rng.below(2));
                let wide = if case % 7 == 6 { 40 } else { 9 };
                // Padded sizes of at least 3 (one window); a few inputs above 2 MiB (the
                // stride-2 kernel's pass length for inputs beyond L2) and a few stride-1 ones
                // above 1 MiB (x86's column walk; smaller ones go by bands).
                let big = case % 75 == 74;
                let cols = case % 50 == 12 && (sh, sw) == (1, 1);
                let (h, w, c) = if big {
                    (90 + rng.below(20), 90 + rng.below(20), 70 + rng.below(20))
                } else if cols {
                    (40 + rng.below(9), 40 + rng.below(9), 170 + rng.below(30))
                } else {
                    (
                        (1 + rng.below(12)).max(3 - pt - pb),
                        (1 + rng.below(wide)).max(3 - pl - pr),
                        1 + rng.below(if case % 5 == 0 { 70 } else { 40 }),
                    )
                };
                let b = 1 + rng.below(3) * (case % 3 == 0) as usize;
                let (oh, ow) = ((h + pt + pb - 3) / sh + 1, (w + pl + pr - 3) / sw + 1);
                let p = DepthwiseParams {
                    stride_h: sh,
                    stride_w: sw,
                    dilation_h: 1,
                    dilation_w: 1,
                    pad_top: pt,
                    pad_left: pl,
                    depth_multiplier: 1,
                    activation: [Activation::None, Activation::Relu6, Activation::Relu][case % 3],
                };
                let (is, os) = ([b, h, w, c], [b, oh, ow, c]);
                let input = rng.f32s(is.iter().product());
                let filter = rng.f32s(9 * c);
                let bias = rng.f32s(c);
                let mut want = vec![0f32; os.iter().product()];
                depthwise_conv::depthwise_conv2d_f32(
                    &input,
                    is,
                    &filter,
                    [1, 3, 3, c],
                    Some(&bias),
                    &p,
                    &mut want,
                    os,
                );
                let dw = DwF32::pack(isa, &filter, 9, c, Some(&bias), p.activation).unwrap();
                let mut got = vec![0f32; want.len()];
                // One worker and three (rows split).
                for workers in [1, 3] {
                    let mut s = scratch_for(0, 0);
                    s.truncate(workers);
                    depthwise_f32(&dw, &input, is, [3, 3], &p, &mut got, os, &mut s);
                    close(
                        &got,
                        &want,
                        &format!("{isa:?} dw3x3 case {case} {is:?} {os:?} {p:?}"),
                    );
                }
            }
        }
    }

    /// Int8 ADD/SUB: every (x, y) pair of int8 values for random parameter sets (extreme scale
    /// ratios, zero points, activation clamps, ADD and SUB) against the scalar `eval_i32`, then
    /// random lengths (tails, less than one vector) and offsets against the portable kernel.
    #[test]
    fn mul_i8_matches_scalar_on_every_input_pair() {
        use crate::kernels::elementwise::{BinaryI8, Broadcast};
        let mut rng = Rng(17);
        let all_a: Vec<i8> = (0..65536).map(|i| (i >> 8) as u8 as i8).collect();
        let all_b: Vec<i8> = (0..65536).map(|i| i as u8 as i8).collect();
        let bc_all = Broadcast::new(&[65536], &[65536]).unwrap();
        for isa in isas().into_iter().filter(|&i| has_elementwise(i)) {
            for case in 0..24 {
                // Multipliers with shifts from -20 to +10 (a product scale above one shifts left).
                let out_shift = rng.below(31) as i32 - 20;
                let out_mult = (1 << 30) + rng.below(1 << 30) as i32;
                let zp = |rng: &mut Rng| (rng.u() >> 56) as i8 as i32;
                let (act_min, act_max) = match case % 3 {
                    0 => (-128, 127),
                    1 => (zp(&mut rng).max(-128), 127),
                    _ => {
                        let lo = -128 + rng.below(100) as i32;
                        (lo, lo + rng.below((127 - lo) as usize + 1) as i32)
                    }
                };
                let p = BinaryI8::Mul {
                    in1_offset: -zp(&mut rng),
                    in2_offset: -zp(&mut rng),
                    out_mult,
                    out_shift,
                    out_offset: zp(&mut rng),
                    act_min,
                    act_max,
                };
                let f = ArithI8::mul(isa, &p).unwrap();
                let mut got = vec![0i8; 65536];
                arith_i8(&f, &p, &bc_all, &all_a, &all_b, &mut got);
                for i in 0..65536 {
                    let (x, y) = (i32::from(all_a[i]), i32::from(all_b[i]));
                    assert_eq!(
                        i32::from(got[i]),
                        p.eval_i32(x, y),
                        "{isa:?} case {case} {p:?}: x {x} y {y}"
                    );
                }
                // Odd lengths (tails) and a broadcast scalar.
                let n = 37 + rng.below(40);
                let a = rng.i8s(n);
                let b = rng.i8s(1);
                let bc = Broadcast::new(&[n], &[1]).unwrap();
                let mut got = vec![0i8; n];
                arith_i8(&f, &p, &bc, &a, &b, &mut got);
                for i in 0..n {
                    let want = p.eval_i32(i32::from(a[i]), i32::from(b[0]));
                    assert_eq!(i32::from(got[i]), want, "{isa:?} case {case} broadcast");
                }
            }
        }
    }

    #[test]
    fn arith_i8_matches_scalar() {
        use crate::kernels::elementwise::{binary_quantized, BinaryI8, Broadcast, Q8};
        let mut rng = Rng(7);
        let all_a: Vec<i8> = (0..65536).map(|i| (i >> 8) as u8 as i8).collect();
        let all_b: Vec<i8> = (0..65536).map(|i| i as u8 as i8).collect();
        let bc_all = Broadcast::new(&[65536], &[65536]).unwrap();
        for isa in isas().into_iter().filter(|&i| has_elementwise(i)) {
            let mut vector = 0;
            for case in 0..24 {
                let scale = |rng: &mut Rng| {
                    let e = match case % 4 {
                        0 => rng.below(8) as i32 - 8,
                        1 => rng.below(40) as i32 - 30,
                        _ => rng.below(16) as i32 - 10,
                    };
                    (1.0 + rng.below(1000) as f32 / 1000.0) * 2f32.powi(e)
                };
                let zp = |rng: &mut Rng| (rng.u() >> 56) as i8 as i32;
                let (qa, qb, qo) = (
                    Q8 {
                        scale: scale(&mut rng),
                        zero_point: zp(&mut rng),
                    },
                    Q8 {
                        scale: scale(&mut rng),
                        zero_point: zp(&mut rng),
                    },
                    Q8 {
                        scale: scale(&mut rng),
                        zero_point: zp(&mut rng),
                    },
                );
                let range = match case % 3 {
                    0 => (-128, 127),
                    1 => (qo.zero_point.max(-128), 127),
                    _ => {
                        let lo = -128 + rng.below(100) as i32;
                        (lo, lo + rng.below((127 - lo) as usize + 1) as i32)
                    }
                };
                let sub = case % 2 == 1;
                let Some(p) = BinaryI8::add_sub(qa, qb, qo, range, sub, false) else {
                    continue;
                };
                let tables = p.clone().with_tables();
                let BinaryI8::AddSubTables(t) = &tables else {
                    unreachable!()
                };
                let Some(f) = ArithI8::new(isa, t) else {
                    continue;
                };
                vector += 1;
                let mut got = vec![0i8; 65536];
                arith_i8(&f, &tables, &bc_all, &all_a, &all_b, &mut got);
                for i in 0..65536 {
                    let want = p.eval_i32(i32::from(all_a[i]), i32::from(all_b[i]));
                    assert_eq!(
                        i32::from(got[i]),
                        want,
                        "{isa:?} case {case} {qa:?} {qb:?} {qo:?} {range:?} sub {sub}: \
                         x {} y {}",
                        all_a[i],
                        all_b[i]
                    );
                }
                for _ in 0..20 {
                    let n = [0, 1, 7, 15, 16, 17, 31, 33, 100][rng.below(9)] + rng.below(3) * 64;
                    let at = rng.below(16);
                    let a = rng.i8s(n + at);
                    let b = rng.i8s(n + at);
                    let bc = Broadcast::new(&[n], &[n]).unwrap();
                    let mut want = vec![0i8; n + at];
                    let mut got = vec![0i8; n + at];
                    binary_quantized::<i8>(&tables, &bc, &a[at..], &b[at..], &mut want[at..]);
                    arith_i8(&f, &tables, &bc, &a[at..], &b[at..], &mut got[at..]);
                    assert_eq!(got, want, "{isa:?} case {case} n {n} at {at}");
                }
            }
            // Most parameter sets take the vector kernel.
            assert!(vector >= 12, "{isa:?}: {vector}");
            // Broadcasts: runs of the innermost dimension (contiguous or one repeated value),
            // one value for the whole output, and short rows (the scalar kernel).
            let p = BinaryI8::add_sub(
                Q8 {
                    scale: 0.05,
                    zero_point: 3,
                },
                Q8 {
                    scale: 0.02,
                    zero_point: -7,
                },
                Q8 {
                    scale: 0.06,
                    zero_point: 1,
                },
                (-128, 127),
                false,
                false,
            )
            .unwrap();
            let tables = p.clone().with_tables();
            let BinaryI8::AddSubTables(t) = &tables else {
                unreachable!()
            };
            let f = ArithI8::new(isa, t).unwrap();
            let shapes: [(&[usize], &[usize]); 8] = [
                (&[3, 5], &[5]),
                (&[3, 4, 20], &[4, 1]),
                (&[2, 1, 17], &[3, 17]),
                (&[2, 3, 33], &[]),
                (&[], &[2, 3, 7]),
                (&[1], &[1]),
                (&[4, 1], &[1, 40]),
                (&[5, 16], &[5, 16]),
            ];
            for (sa, sb) in shapes {
                let bc = Broadcast::new(sa, sb).unwrap();
                let (a, b) = (rng.i8s(sa.iter().product()), rng.i8s(sb.iter().product()));
                let mut want = vec![0i8; bc.output_len()];
                let mut got = vec![0i8; bc.output_len()];
                bc.apply(&a, &b, &mut want, |x, y| p.eval(x, y));
                arith_i8(&f, &tables, &bc, &a, &b, &mut got);
                assert_eq!(got, want, "{isa:?} {sa:?} {sb:?}");
            }
        }
    }

    /// QUANTIZE: NaN, infinities, huge and tiny values, exact ties, random bit patterns and
    /// random values in range, for int8, uint8 and int16, against the scalar kernel.
    /// TRANSPOSE of 32-bit values with 2 to 4 rows (NCHW -> NHWC and the 2-D and 3-D forms,
    /// dimensions of size 1 between), column counts around the 16-column step (tails, fewer
    /// than one step), several batches, against the portable transpose; other permutations
    /// and row counts are refused.
    #[test]
    #[cfg(feature = "ops-shape")]
    fn transpose_few_rows_32_matches_portable() {
        use crate::kernels::shape_ops::transpose;
        let mut rng = Rng(29);
        for isa in isas() {
            for case in 0..200usize {
                let rows = 2 + case % 3;
                let (h, w) = (1 + rng.below(9), 1 + rng.below(40));
                let b = 1 + rng.below(3) * usize::from(case % 4 == 0);
                let (shape, perm): (Vec<usize>, Vec<usize>) = match case % 4 {
                    0 | 1 => (vec![b, rows, h, w], vec![0, 2, 3, 1]),
                    2 => (vec![rows, h * w], vec![1, 0]),
                    _ => (vec![b, rows, 1, h * w], vec![0, 3, 2, 1]),
                };
                let n: usize = shape.iter().product();
                let input: Vec<u32> = (0..n).map(|_| rng.u() as u32).collect();
                let mut want = vec![0u32; n];
                transpose(&input, &shape, &perm, &mut want);
                let mut got = vec![0u32; n];
                let done = transpose_few_rows_32(isa, &shape, &perm, &input, &mut got);
                let what = format!("{isa:?} case {case} {shape:?} {perm:?}");
                assert_eq!(done, isa == Isa::Avx512Vnni && h * w > 1, "{what}");
                if done {
                    assert_eq!(got, want, "{what}");
                }
            }
            // Not few rows, not a transpose of rows and columns, not 32-bit.
            assert!(!has_transpose_few_rows_32(
                isa,
                &[1, 5, 4, 4],
                &[0, 2, 3, 1],
                4
            ));
            assert!(!has_transpose_few_rows_32(
                isa,
                &[2, 3, 4, 4],
                &[1, 0, 2, 3],
                4
            ));
            assert!(!has_transpose_few_rows_32(
                isa,
                &[1, 3, 4, 4],
                &[0, 2, 3, 1],
                2
            ));
        }
    }

    #[test]
    #[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
    fn unary_f32_matches_portable_bit_for_bit() {
        use crate::kernels::elementwise::{unary_f32 as portable, UnaryOp as U};
        let mut x = vec![
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            f32::MAX,
            f32::MIN,
            1e-45,
            88.7,
            -103.5,
            0.624_999_9,
            -0.625,
        ];
        // Odd length, so the vector loops have tails.
        x.extend((0..1001).map(|i| (i as f32 - 500.0) * 0.173));
        let mut want = vec![0.0; x.len()];
        let mut got = vec![0.0; x.len()];
        for isa in isas().into_iter().filter(|&i| has_elementwise(i)) {
            for op in [
                U::Relu,
                U::Relu6,
                U::LeakyRelu { alpha: 0.1 },
                U::HardSwish,
                U::Exp,
                U::Logistic,
                U::Tanh,
                U::Abs,
                U::Square,
            ] {
                portable(op, &x, &mut want);
                assert!(unary_f32(isa, op, &x, &mut got));
                for i in 0..x.len() {
                    assert!(
                        got[i].to_bits() == want[i].to_bits(),
                        "{isa:?} {op:?}({}) = {}, portable {}",
                        x[i],
                        got[i],
                        want[i]
                    );
                }
            }
        }
    }

    #[test]
    fn quantize_f32_matches_scalar() {
        use crate::kernels::elementwise::quantize_f32 as scalar;
        let mut rng = Rng(11);
        for isa in isas().into_iter().filter(|&i| has_elementwise(i)) {
            for (case, &scale) in [
                1.0f32,
                0.5,
                0.003_921_569,
                0.017_455_87,
                1.0 / 3.0,
                1e-30,
                1e-45,
                3e38,
                f32::INFINITY,
                0.0,
            ]
            .iter()
            .enumerate()
            {
                let mut x = vec![
                    f32::NAN,
                    -f32::NAN,
                    f32::INFINITY,
                    f32::NEG_INFINITY,
                    0.0,
                    -0.0,
                    f32::MAX,
                    f32::MIN,
                    f32::MIN_POSITIVE,
                    1e-45,
                    8_388_607.5,
                    -8_388_607.5,
                    8_388_608.0,
                    16_777_217.0,
                    0.499_999_97,
                    -0.499_999_97,
                    2e9,
                    -2e9,
                ];
                // Ties k + 1/2 of x / scale (exact where scale is a power of two).
                for k in -300..300 {
                    x.push((k as f32 + 0.5) * scale);
                    x.push(k as f32 * scale);
                }
                for _ in 0..2000 {
                    x.push(f32::from_bits(rng.u() as u32));
                    x.push((rng.u() as i32 >> rng.below(32)) as f32 * scale / 64.0);
                }
                let n = x.len();
                for zp in [0, -128, 127, -3, 255, 32767, -32768] {
                    for at in [0, 1, 5] {
                        let m = n - at - rng.below(20);
                        let x = &x[at..at + m];
                        let mut want = vec![0i8; m];
                        scalar(x, scale, zp, (-128, 127), &mut want, |v| v as i8);
                        let mut got = vec![0u8; m];
                        assert!(quantize_f32(isa, x, scale, zp, QuantizeTo::I8, &mut got));
                        let want: Vec<u8> = want.iter().map(|&v| v as u8).collect();
                        assert_eq!(got, want, "{isa:?} int8 case {case} zp {zp}");
                        let mut want = vec![0u8; m];
                        scalar(x, scale, zp, (0, 255), &mut want, |v| v as u8);
                        assert!(quantize_f32(isa, x, scale, zp, QuantizeTo::U8, &mut got));
                        assert_eq!(got, want, "{isa:?} uint8 case {case} zp {zp}");
                        let mut want = vec![0i16; m];
                        scalar(x, scale, zp, (-32768, 32767), &mut want, |v| v as i16);
                        let want: Vec<u8> = want.iter().flat_map(|v| v.to_le_bytes()).collect();
                        let mut got = vec![0u8; 2 * m];
                        assert!(quantize_f32(isa, x, scale, zp, QuantizeTo::I16, &mut got));
                        assert_eq!(got, want, "{isa:?} int16 case {case} zp {zp}");
                    }
                }
            }
            // Lengths that differ: the shorter one, as the scalar kernel.
            let mut o = [9u8; 5];
            assert!(quantize_f32(
                isa,
                &[1.0; 4],
                1.0,
                0,
                QuantizeTo::I16,
                &mut o
            ));
            assert_eq!(o, [1, 0, 1, 0, 9]);
            assert!(quantize_f32(isa, &[1.0; 2], 1.0, 0, QuantizeTo::I8, &mut o));
            assert_eq!(o, [1, 1, 1, 0, 9]);
        }
    }
}
