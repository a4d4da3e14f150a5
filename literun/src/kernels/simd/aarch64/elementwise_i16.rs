//! Int16 ADD/SUB/MUL ([`ArithI16`]) on 4 32-bit lanes, eight values per step.

use super::*;
use crate::kernels::elementwise::Run;

/// `out[i] = a[i] ± b[i]` (or `*`) for an int16 ADD/SUB (MUL), bit-exact with the scalar
/// kernel (`BinaryI8::eval_i32`):
/// - `SaturatingRoundingDoublingHighMul` is `sqrdmulh` (`(2 a m + 2^31) >> 32`, saturating the
///   one overflowing product, `i32::MIN * i32::MIN`, as the reference does);
/// - `RoundingDivideByPOT(x, e)` is `srshl` by `-e` (which rounds halves up) of `x - 1` for
///   negative `x` when `e > 0` (so halves round away from zero; saturating, and `i32::MIN` has
///   nothing to round);
/// - the output's left shift wraps (`sshl`), as the reference's `x * (1 << left)`.
pub(crate) fn arith_i16(p: &ArithI16, a: Run<'_, i16>, b: Run<'_, i16>, out: &mut [i16]) {
    let n = out.len();
    let (Some(a), Some(b)) = (Operand16::new(a, n), Operand16::new(b, n)) else {
        return;
    };
    // SAFETY: ArithI16 exists only for an available ISA (`has_arith_i16`): on aarch64 NEON.
    unsafe { arith_i16_neon(p, &a, &b, out) }
}

/// An int16 operand of [`arith_i16`]: `n` values, or one value repeated (as eight copies).
enum Operand16<'a> {
    Slice(&'a [i16]),
    Repeat([i16; 8]),
}

impl Operand16<'_> {
    /// `None` for a slice shorter than `n`.
    fn new(r: Run<'_, i16>, n: usize) -> Option<Operand16<'_>> {
        Some(match r {
            Run::Slice(s) => Operand16::Slice(s.get(..n)?),
            Run::Repeat(v) => Operand16::Repeat([v; 8]),
        })
    }

    /// Eight values from `i` (`i + 8 <= n`).
    #[inline]
    #[target_feature(enable = "neon")]
    fn load(&self, i: usize) -> int16x8_t {
        let s: &[i16] = match self {
            Operand16::Slice(s) => &s[i..i + 8],
            Operand16::Repeat(v) => v,
        };
        // SAFETY: s has 8 values.
        unsafe { vld1q_s16(s.as_ptr()) }
    }

    /// The values from `i` to `n` (fewer than eight), zeros after.
    #[inline]
    #[target_feature(enable = "neon")]
    fn load_tail(&self, i: usize) -> int16x8_t {
        let mut tmp = [0i16; 8];
        match self {
            Operand16::Slice(s) => {
                let m = (s.len() - i).min(8);
                tmp[..m].copy_from_slice(&s[i..i + m]);
            }
            Operand16::Repeat(v) => tmp = *v,
        }
        // SAFETY: tmp has 8 values.
        unsafe { vld1q_s16(tmp.as_ptr()) }
    }
}

/// The parameters of [`arith_i16_neon`] in registers: each stage's multiplier and negated
/// right shift.
struct ArithN {
    op: ArithOp,
    in1: [int32x4_t; 2],
    in2: [int32x4_t; 2],
    out_left: int32x4_t,
    out: [int32x4_t; 2],
    lo: int32x4_t,
    hi: int32x4_t,
}

/// `RoundingDivideByPOT(x, -neg_e)` (see [`arith_i16`]).
#[inline]
#[target_feature(enable = "neon")]
fn rdbpot(x: int32x4_t, neg_e: int32x4_t) -> int32x4_t {
    // -1 in the lanes where x < 0 and e > 0 (`neg_e` then has its sign bit set).
    let fixup = vshrq_n_s32::<31>(vandq_s32(x, neg_e));
    vrshlq_s32(vqaddq_s32(x, fixup), neg_e)
}

impl ArithN {
    #[inline]
    #[target_feature(enable = "neon")]
    fn new(p: &ArithI16) -> ArithN {
        let stage = |m: &Mbqm| [vdupq_n_s32(m.mult), vdupq_n_s32(-m.right)];
        ArithN {
            op: p.op,
            in1: stage(&p.in1),
            in2: stage(&p.in2),
            out_left: vdupq_n_s32(p.out.left),
            out: stage(&p.out),
            lo: vdupq_n_s32(p.act_min),
            hi: vdupq_n_s32(p.act_max),
        }
    }

    /// Four outputs (as i32, in the int16 range) of `raw`.
    #[inline]
    #[target_feature(enable = "neon")]
    fn output(&self, raw: int32x4_t) -> int32x4_t {
        let q = vqrdmulhq_s32(vshlq_s32(raw, self.out_left), self.out[0]);
        let q = rdbpot(q, self.out[1]);
        vminq_s32(vmaxq_s32(q, self.lo), self.hi)
    }

    /// Eight outputs of the eight int16 values in `x` and in `y`.
    #[inline]
    #[target_feature(enable = "neon")]
    fn apply(&self, x: int16x8_t, y: int16x8_t) -> int16x8_t {
        let (raw_lo, raw_hi) = if self.op == ArithOp::Mul {
            (
                vmull_s16(vget_low_s16(x), vget_low_s16(y)),
                vmull_high_s16(x, y),
            )
        } else {
            // RDBPOT(SRDHM(v << 15, m), right): |v << 15| <= 2^30.
            let rescale = |v: int32x4_t, s: &[int32x4_t; 2]| {
                rdbpot(vqrdmulhq_s32(vshlq_n_s32::<15>(v), s[0]), s[1])
            };
            let s1 = |v| rescale(v, &self.in1);
            let s2 = |v| rescale(v, &self.in2);
            let (x0, x1) = (vmovl_s16(vget_low_s16(x)), vmovl_high_s16(x));
            let (y0, y1) = (vmovl_s16(vget_low_s16(y)), vmovl_high_s16(y));
            if self.op == ArithOp::Sub {
                (vsubq_s32(s1(x0), s2(y0)), vsubq_s32(s1(x1), s2(y1)))
            } else {
                (vaddq_s32(s1(x0), s2(y0)), vaddq_s32(s1(x1), s2(y1)))
            }
        };
        let lo = vqmovn_s32(self.output(raw_lo));
        vqmovn_high_s32(lo, self.output(raw_hi))
    }
}

#[target_feature(enable = "neon")]
fn arith_i16_neon(p: &ArithI16, a: &Operand16<'_>, b: &Operand16<'_>, out: &mut [i16]) {
    let k = ArithN::new(p);
    let n = out.len();
    let mut i = 0;
    while i + 8 <= n {
        let v = k.apply(a.load(i), b.load(i));
        let o = &mut out[i..i + 8];
        // SAFETY: o has 8 values.
        unsafe { vst1q_s16(o.as_mut_ptr(), v) };
        i += 8;
    }
    if i < n {
        let v = k.apply(a.load_tail(i), b.load_tail(i));
        let mut tmp = [0i16; 8];
        // SAFETY: tmp has 8 values.
        unsafe { vst1q_s16(tmp.as_mut_ptr(), v) };
        out[i..].copy_from_slice(&tmp[..n - i]);
    }
}
