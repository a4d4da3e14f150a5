//! The int8 output stage of the fast kernels: per-channel requantization parameters packed
//! for the vector kernels, and the scratch for the fused form's derived constants.

use super::*;

/// i32 words per 16 channels of the fused form's derived constants (`x86::fused_cache`).
pub(super) const FUSED_CACHE_WORDS: usize = 48;

/// i32 words per 16 channels of the AVX2 unsigned-product form's derived constants
/// (`x86::unsigned_cache`).
pub(super) const UNSIGNED_CACHE_WORDS: usize = 96;

/// Scratch words for the fused form's constants of `rq` (`padded` channels) with `isa`: none
/// unless AVX-512 uses the fused form, or AVX2 (or AVX-VNNI) its unsigned-product form
/// ([`Requant::unsigned`]); 15 more than the constants, for [`fused_cache_in`] to align them.
pub(super) fn fused_cache_scratch(isa: Isa, rq: &Requant) -> usize {
    if isa == Isa::Avx512Vnni && rq.fused {
        rq.bias.len() / 16 * FUSED_CACHE_WORDS + 15
    } else if matches!(isa, Isa::Avx2 | Isa::AvxVnni) && rq.unsigned {
        rq.bias.len() / 16 * UNSIGNED_CACHE_WORDS + 15
    } else {
        0
    }
}

/// The 64-byte-aligned words of `scratch` (`words` from [`fused_cache_scratch`]) for the fused
/// form's constants (whole cache lines: a 64-byte load across two lines costs two), or `None`
/// when there are none.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(super) fn fused_cache_in(scratch: &mut [i32], words: usize) -> Option<&mut [i32]> {
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
    /// Whether the AVX2 kernels' unsigned-product form of the fused requantization
    /// (`x86::RqU8`) is exact for the accumulators of the kernel this was packed for (set by
    /// [`Requant::allow_unsigned`]).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) unsigned: bool,
}

impl Requant {
    /// `padded` channels (zeros past `q`'s), with `bias_eff(c)` as the folded bias.
    pub(super) fn new(
        q: &OutputStage,
        padded: usize,
        bias_eff: impl Fn(usize) -> i32,
    ) -> Option<Requant> {
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
            unsigned: false,
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

    /// Enables the AVX2 unsigned-product form (`x86::RqU8`) where it is exact for every
    /// accumulator of magnitude at most `acc_bound` (before the bias): the fused form, every
    /// multiplier non-negative, an activation range inside int8's, and `|x m| + |K| + 2^32 <
    /// 2^62` for `|x| <= |bias| + acc_bound` (`K` = [`Requant::fused_add`]). Padding channels
    /// (multiplier and shift zero) have no outputs to be exact for.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(super) fn allow_unsigned(&mut self, acc_bound: i64) {
        let in_int8 = -128 <= self.act_min && self.act_max <= 127;
        self.unsigned = self.fused
            && in_int8
            && (0..self.bias.len()).all(|c| {
                let (m, s) = (self.mult[c], i32::from(self.shift[c]));
                if m == 0 && s == 0 {
                    return true;
                }
                let x = (i128::from(self.bias[c]).abs() + i128::from(acc_bound)).min(1 << 31);
                let k = Self::fused_add(-s, self.out_offset);
                m >= 0 && s <= -1 && x * i128::from(m) + k.abs() + (1 << 32) < 1 << 62
            });
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
    pub(super) fn new(mult: i32, shift: i32) -> Option<Mbqm> {
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
