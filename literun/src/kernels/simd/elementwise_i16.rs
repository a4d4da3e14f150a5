//! Int16 (16x8) ADD/SUB/MUL in vectors: the operators of an int16 LayerNorm (centring by the
//! row mean, scaling by the row's reciprocal deviation, the affine), bit-exact with the scalar
//! kernel ([`crate::kernels::elementwise::BinaryI8::eval_i32`]).

use super::*;

/// Whether `isa` has [`arith_i16`]'s vector kernels: AVX2 and up, and NEON.
pub(crate) fn has_arith_i16(isa: Isa) -> bool {
    has_elementwise(isa) || (cfg!(target_arch = "aarch64") && isa.neon())
}

/// An int16 ADD/SUB or MUL for the vector kernels (every zero point is 0 in int16), then the
/// output stage `clamp(MBQM(raw, out), act_min, act_max)`.
///
/// ADD/SUB: each input's rescaling is `s = RDBPOT(SRDHM(x << 15, m), right)` (TFLite's general
/// int16 kernel, left shift 15), `raw = s1 ± s2`. The high multiply of `x << 15` by `m` is
/// `floor((x m + 2^15) / 2^16)` (`SRDHM(a, m) = floor((a m + 2^30) / 2^31)` for every `a` when
/// `m != i32::MIN`), which x86 computes in 32-bit lanes from `m = mh 2^16 + ml`: `x mh + ((x ml
/// + 2^15) >> 16)`, with `x mh` and `x (ml - 2^15)` by `vpmaddwd` and `x 2^15` by a shift (see
/// [`ArithI16::split1`]); NEON has the high multiply itself (`sqrdmulh`).
/// MUL: `raw = x * y` (at most 2^30).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ArithI16 {
    pub(crate) isa: Isa,
    pub(crate) op: ArithOp,
    /// ADD/SUB: `[m >> 16, (m & 0xffff) ^ 0x8000]` of input 1's multiplier `m` (in `0..2^31`):
    /// the high part below 2^15 and the low part minus 2^15 as a signed 16-bit value, each in
    /// the low half of a 32-bit lane whose high half is zero, as `vpmaddwd` multiplies it.
    pub(crate) split1: [i32; 2],
    pub(crate) split2: [i32; 2],
    /// ADD/SUB: the inputs' multipliers and right shifts.
    pub(crate) in1: Mbqm,
    pub(crate) in2: Mbqm,
    pub(crate) out: Mbqm,
    pub(crate) act_min: i32,
    pub(crate) act_max: i32,
}

impl ArithI16 {
    /// The vector form of an int16 ADD/SUB or MUL. `None` for another operator, when `isa` has
    /// no such kernel, or outside what the kernels reproduce exactly (the scalar kernel then
    /// runs): zero offsets, ADD/SUB's left shift of 15 with input multipliers in `0..2^31` and
    /// shifts in `-31..=0`, an output shift in TFLite's range, a clamp inside int16.
    pub(crate) fn new(isa: Isa, p: &crate::kernels::elementwise::BinaryI8) -> Option<ArithI16> {
        use crate::kernels::elementwise::BinaryI8;
        if !has_arith_i16(isa) {
            return None;
        }
        let clamp_ok = |lo: i32, hi: i32| -32768 <= lo && lo <= hi && hi <= 32767;
        let split = |m: i32| [m >> 16, (m & 0xffff) ^ 0x8000];
        let input = |m: i32, shift: i32| {
            if m < 0 || shift > 0 {
                return None;
            }
            Mbqm::new(m, shift)
        };
        match *p {
            BinaryI8::AddSub {
                sub,
                in1_offset: 0,
                in2_offset: 0,
                left_shift: 15,
                in1_mult,
                in1_shift,
                in2_mult,
                in2_shift,
                out_mult,
                out_shift,
                out_offset: 0,
                act_min,
                act_max,
            } if clamp_ok(act_min, act_max) => Some(ArithI16 {
                isa,
                op: if sub { ArithOp::Sub } else { ArithOp::Add },
                split1: split(in1_mult),
                split2: split(in2_mult),
                in1: input(in1_mult, in1_shift)?,
                in2: input(in2_mult, in2_shift)?,
                out: Mbqm::new(out_mult, out_shift)?,
                act_min,
                act_max,
            }),
            BinaryI8::Mul {
                in1_offset: 0,
                in2_offset: 0,
                out_mult,
                out_shift,
                out_offset: 0,
                act_min,
                act_max,
            } if clamp_ok(act_min, act_max) => {
                let unused = Mbqm::new(0, 0)?;
                Some(ArithI16 {
                    isa,
                    op: ArithOp::Mul,
                    split1: [0; 2],
                    split2: [0; 2],
                    in1: unused,
                    in2: unused,
                    out: Mbqm::new(out_mult, out_shift)?,
                    act_min,
                    act_max,
                })
            }
            _ => None,
        }
    }
}

/// Int16 ADD/SUB/MUL: the vector kernel on runs of the output (as [`arith_i8`]: the whole
/// output, split over the workers, when each input has its shape or is one value, else rows of
/// at least 16 elements, each input contiguous or one value repeated: a LayerNorm's per-row
/// mean and scale, its per-channel affine), else the scalar kernel (`portable`, the same
/// operator).
pub(crate) fn arith_i16(
    f: &ArithI16,
    portable: &crate::kernels::elementwise::BinaryI8,
    bc: &crate::kernels::elementwise::Broadcast,
    a: &[i16],
    b: &[i16],
    out: &mut [i16],
    workers: &mut Workers,
) {
    #[cfg(target_arch = "x86_64")]
    if arith_runs(bc, a, b, out, workers, |ra, rb, o| {
        x86::arith_i16(f, ra, rb, o)
    }) {
        return;
    }
    #[cfg(target_arch = "aarch64")]
    if arith_runs(bc, a, b, out, workers, |ra, rb, o| {
        aarch64::arith_i16(f, ra, rb, o)
    }) {
        return;
    }
    let _ = (f, workers);
    crate::kernels::elementwise::binary_quantized::<i16>(portable, bc, a, b, out)
}
