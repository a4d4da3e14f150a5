//! Quantized (int8 and int16) binary operators: ADD/SUB (directly or through tables), MUL and
//! SQUARED_DIFFERENCE, with TFLite's reference rounding.

use super::*;

/// Scale and zero point of a per-tensor quantized 8-bit tensor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Q8 {
    pub scale: f32,
    pub zero_point: i32,
}

/// Prepared parameters of an int8 ADD, SUB, MUL or SQUARED_DIFFERENCE (TFLite's
/// `ArithmeticParams`); ADD, SUB, MUL, MAXIMUM and MINIMUM also serve int16 (16x8 models).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BinaryI8 {
    /// ADD/SUB: inputs shifted left by `left_shift` (20; 15 for int16), rescaled to twice the larger input
    /// scale, summed, rescaled to the output.
    AddSub {
        sub: bool,
        in1_offset: i32,
        in2_offset: i32,
        left_shift: i32,
        in1_mult: i32,
        in1_shift: i32,
        in2_mult: i32,
        in2_shift: i32,
        out_mult: i32,
        out_shift: i32,
        out_offset: i32,
        act_min: i32,
        act_max: i32,
    },
    /// Int16 ADD/SUB on LiteRT's power-of-two path (`pot_scale_int16`, every scale a power of
    /// two, see [`BinaryI8::add_sub_pot`]): one input divided by `2^in_shift` (rounded to nearest,
    /// ties away from zero), the other taken as it is, then summed (or subtracted) and clamped.
    AddSubPot {
        sub: bool,
        in1_shift: i32,
        in2_shift: i32,
        act_min: i32,
        act_max: i32,
    },
    /// SQUARED_DIFFERENCE: inputs shifted left by 7, rescaled to twice the larger input scale,
    /// subtracted, squared, rescaled to the output (every multiplier below one).
    SquaredDifference {
        in1_offset: i32,
        in2_offset: i32,
        in1_mult: i32,
        in1_shift: i32,
        in2_mult: i32,
        in2_shift: i32,
        out_mult: i32,
        out_shift: i32,
        out_offset: i32,
    },
    /// Int8 ADD/SUB with each input's rescaled value looked up (from [`BinaryI8::with_tables`]).
    AddSubTables(alloc::boxed::Box<AddSubTables>),
    /// MAXIMUM / MINIMUM: the larger / smaller stored value (all three tensors share their
    /// quantization).
    MaxMin { max: bool },
    /// MUL: `(x1 - z1) * (x2 - z2)` rescaled by `s1 * s2 / s_out`.
    Mul {
        in1_offset: i32,
        in2_offset: i32,
        out_mult: i32,
        out_shift: i32,
        out_offset: i32,
        act_min: i32,
        act_max: i32,
    },
}

/// An int8 ADD/SUB as tables: an 8-bit input takes 256 values, so each input's rescaling
/// (shift, multiply, round) is looked up, the same numbers as computing it; only the rescaling of
/// the sum is left per element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddSubTables {
    /// Rescaled input 1 / input 2 (negated for SUB), indexed by `stored + 128`.
    pub t1: [i32; 256],
    pub t2: [i32; 256],
    /// The parameters the tables were computed from (for kernels that compute them instead).
    pub sub: bool,
    pub in1_offset: i32,
    pub in2_offset: i32,
    pub left_shift: i32,
    pub in1_mult: i32,
    pub in1_shift: i32,
    pub in2_mult: i32,
    pub in2_shift: i32,
    pub out_mult: i32,
    pub out_shift: i32,
    pub out_offset: i32,
    pub act_min: i32,
    pub act_max: i32,
}

impl BinaryI8 {
    /// An int8 ADD/SUB as [`AddSubTables`] (other operators unchanged).
    pub fn with_tables(self) -> BinaryI8 {
        let BinaryI8::AddSub {
            sub,
            in1_offset,
            in2_offset,
            left_shift,
            in1_mult,
            in1_shift,
            in2_mult,
            in2_shift,
            out_mult,
            out_shift,
            out_offset,
            act_min,
            act_max,
        } = self
        else {
            return self;
        };
        let table = |off: i32, m: i32, sh: i32, neg: bool| {
            let mut t = [0i32; 256];
            for (i, v) in t.iter_mut().enumerate() {
                let s = mbqm_lt1((off - 128 + i as i32) * (1 << left_shift), m, sh);
                *v = if neg { s.wrapping_neg() } else { s };
            }
            t
        };
        BinaryI8::AddSubTables(alloc::boxed::Box::new(AddSubTables {
            t1: table(in1_offset, in1_mult, in1_shift, false),
            t2: table(in2_offset, in2_mult, in2_shift, sub),
            sub,
            in1_offset,
            in2_offset,
            left_shift,
            in1_mult,
            in1_shift,
            in2_mult,
            in2_shift,
            out_mult,
            out_shift,
            out_offset,
            act_min,
            act_max,
        }))
    }

    /// TFLite add.cc / sub.cc `PrepareGeneralSubOp`: `None` when a multiplier is out of range.
    /// `int16`: the general int16 kernel (`pot_scale_int16` false), which shifts by 15.
    pub fn add_sub(
        a: Q8,
        b: Q8,
        out: Q8,
        range: (i32, i32),
        sub: bool,
        int16: bool,
    ) -> Option<BinaryI8> {
        let left_shift = if int16 { 15 } else { 20 };
        let twice_max = 2.0 * f64::from(a.scale.max(b.scale));
        let r1 = f64::from(a.scale) / twice_max;
        let r2 = f64::from(b.scale) / twice_max;
        let ro = twice_max / f64::from((1 << left_shift) as f32 * out.scale);
        let (in1_mult, in1_shift) = quantize_multiplier_smaller_than_one(r1)?;
        let (in2_mult, in2_shift) = quantize_multiplier_smaller_than_one(r2)?;
        let (out_mult, out_shift) = quantize_multiplier(ro);
        if out_mult == 0 {
            return None;
        }
        Some(BinaryI8::AddSub {
            sub,
            in1_offset: -a.zero_point,
            in2_offset: -b.zero_point,
            left_shift,
            in1_mult,
            in1_shift,
            in2_mult,
            in2_shift,
            out_mult,
            out_shift,
            out_offset: out.zero_point,
            act_min: range.0,
            act_max: range.1,
        })
    }

    /// TFLite add.cc / sub.cc on int16 with `pot_scale_int16` when every scale is a power of
    /// two (LiteRT's `CheckedLog2`, [`crate::quant::checked_log2`]): the power-of-two
    /// exponents `(e1, e2, e_out)`. `Err` names what LiteRT refuses: it shifts one input at
    /// most, and only to the right; shifts past 15 bits are refused here too (LiteRT divides
    /// an `int16_t` by `2^exponent` in 16 bits, where those are not defined).
    pub fn add_sub_pot(
        exponents: (i32, i32, i32),
        range: (i32, i32),
        sub: bool,
    ) -> Result<BinaryI8, &'static str> {
        let (s1, s2) = (exponents.0 - exponents.2, exponents.1 - exponents.2);
        if s1 != 0 && s2 != 0 {
            return Err("both inputs' scales differ from the output's (LiteRT shifts one input)");
        }
        if s1 > 0 || s2 > 0 {
            return Err("an input scale is larger than the output's (LiteRT only shifts right)");
        }
        if s1 < -15 || s2 < -15 {
            return Err("an input scale is more than 2^15 times smaller than the output's");
        }
        Ok(BinaryI8::AddSubPot {
            sub,
            in1_shift: -s1,
            in2_shift: -s2,
            act_min: range.0,
            act_max: range.1,
        })
    }

    /// TFLite squared_difference.cc `Prepare` (int8): `None` when a multiplier is not below one
    /// (TFLite aborts on a CHECK there), i.e. unless `s_out > (2 max(s1, s2))^2 / 2^14`.
    pub fn squared_difference(a: Q8, b: Q8, out: Q8) -> Option<BinaryI8> {
        const LEFT_SHIFT: i32 = 7;
        let twice_max = f64::from(2.0 * a.scale.max(b.scale));
        let r1 = f64::from(a.scale) / twice_max;
        let r2 = f64::from(b.scale) / twice_max;
        let ro = twice_max * twice_max / f64::from((1 << (2 * LEFT_SHIFT)) as f32 * out.scale);
        let (in1_mult, in1_shift) = quantize_multiplier_smaller_than_one(r1)?;
        let (in2_mult, in2_shift) = quantize_multiplier_smaller_than_one(r2)?;
        let (out_mult, out_shift) = quantize_multiplier_smaller_than_one(ro)?;
        Some(BinaryI8::SquaredDifference {
            in1_offset: -a.zero_point,
            in2_offset: -b.zero_point,
            in1_mult,
            in1_shift,
            in2_mult,
            in2_shift,
            out_mult,
            out_shift,
            out_offset: out.zero_point,
        })
    }

    /// TFLite mul.cc: `real = s1 * s2 / s_out` (in double).
    pub fn mul(a: Q8, b: Q8, out: Q8, range: (i32, i32)) -> BinaryI8 {
        let real = f64::from(a.scale) * f64::from(b.scale) / f64::from(out.scale);
        let (out_mult, out_shift) = quantize_multiplier(real);
        BinaryI8::Mul {
            in1_offset: -a.zero_point,
            in2_offset: -b.zero_point,
            out_mult,
            out_shift,
            out_offset: out.zero_point,
            act_min: range.0,
            act_max: range.1,
        }
    }

    /// Int16 MUL: as [`BinaryI8::mul`], but with `s1 * s2 / s_out` computed in f32 (mul.cc
    /// multiplies the float scales; measured against ai-edge-litert 2.3.0, where the double
    /// product's multiplier rounds some int16 products the other way).
    pub fn mul_i16(a: Q8, b: Q8, out: Q8, range: (i32, i32)) -> BinaryI8 {
        let real = f64::from(a.scale * b.scale / out.scale);
        let (out_mult, out_shift) = quantize_multiplier(real);
        BinaryI8::Mul {
            in1_offset: -a.zero_point,
            in2_offset: -b.zero_point,
            out_mult,
            out_shift,
            out_offset: out.zero_point,
            act_min: range.0,
            act_max: range.1,
        }
    }

    /// One output value.
    #[inline]
    pub fn eval(&self, x: i8, y: i8) -> i8 {
        self.eval_i32(i32::from(x), i32::from(y)) as i8
    }

    /// One output value of stored values `x`, `y` (int8 or int16), in the output type's range.
    #[inline]
    pub fn eval_i32(&self, x: i32, y: i32) -> i32 {
        match *self {
            BinaryI8::AddSub {
                sub,
                in1_offset,
                in2_offset,
                left_shift,
                in1_mult,
                in1_shift,
                in2_mult,
                in2_shift,
                out_mult,
                out_shift,
                out_offset,
                act_min,
                act_max,
            } => {
                let v1 = (in1_offset + x) * (1 << left_shift);
                let v2 = (in2_offset + y) * (1 << left_shift);
                let s1 = mbqm_lt1(v1, in1_mult, in1_shift);
                let s2 = mbqm_lt1(v2, in2_mult, in2_shift);
                let raw = if sub { s1 - s2 } else { s1 + s2 };
                let o = mbqm(raw, out_mult, out_shift).saturating_add(out_offset);
                o.clamp(act_min, act_max)
            }
            BinaryI8::AddSubPot {
                sub,
                in1_shift,
                in2_shift,
                act_min,
                act_max,
            } => {
                let s1 = rounding_divide_by_pot(x, in1_shift);
                let s2 = rounding_divide_by_pot(y, in2_shift);
                // LiteRT saturates to int16, then clamps to the activation range inside it.
                let raw = if sub { s1 - s2 } else { s1 + s2 };
                raw.clamp(act_min, act_max)
            }
            BinaryI8::AddSubTables(ref t) => {
                let raw = t.t1[(x + 128) as usize & 255] + t.t2[(y + 128) as usize & 255];
                let o = mbqm(raw, t.out_mult, t.out_shift).saturating_add(t.out_offset);
                o.clamp(t.act_min, t.act_max)
            }
            BinaryI8::MaxMin { max } => {
                if max {
                    x.max(y)
                } else {
                    x.min(y)
                }
            }
            BinaryI8::SquaredDifference {
                in1_offset,
                in2_offset,
                in1_mult,
                in1_shift,
                in2_mult,
                in2_shift,
                out_mult,
                out_shift,
                out_offset,
            } => {
                let v1 = (in1_offset + x) * (1 << 7);
                let v2 = (in2_offset + y) * (1 << 7);
                let d = mbqm_lt1(v1, in1_mult, in1_shift) - mbqm_lt1(v2, in2_mult, in2_shift);
                let o = mbqm_lt1(d.wrapping_mul(d), out_mult, out_shift).saturating_add(out_offset);
                o.clamp(-128, 127)
            }
            BinaryI8::Mul {
                in1_offset,
                in2_offset,
                out_mult,
                out_shift,
                out_offset,
                act_min,
                act_max,
            } => {
                let p = (in1_offset + x) * (in2_offset + y);
                let o = mbqm(p, out_mult, out_shift).saturating_add(out_offset);
                o.clamp(act_min, act_max)
            }
        }
    }
}

/// `out = a (op) b` for int8 or int16 with broadcasting.
pub fn binary_quantized<T: crate::kernels::Quantized>(
    p: &BinaryI8,
    bc: &Broadcast,
    a: &[T],
    b: &[T],
    out: &mut [T],
) {
    let f = |x: T, y: T| T::saturate(p.eval_i32(x.get(), y.get()));
    // One loop per operator: inside each, the inlined `eval_i32` knows which operator it is,
    // so the per-element work is the arithmetic alone.
    match *p {
        BinaryI8::AddSub { .. } => bc.apply(a, b, out, f),
        BinaryI8::AddSubPot { .. } => bc.apply(a, b, out, f),
        BinaryI8::AddSubTables(ref t) => {
            // The parameters in locals, so the loop keeps them in registers.
            let (t1, t2) = (&t.t1, &t.t2);
            let (m, sh, off, lo, hi) =
                (t.out_mult, t.out_shift, t.out_offset, t.act_min, t.act_max);
            bc.apply(a, b, out, |x, y| {
                let raw = t1[(x.get() + 128) as usize & 255] + t2[(y.get() + 128) as usize & 255];
                T::saturate(mbqm(raw, m, sh).saturating_add(off).clamp(lo, hi))
            })
        }
        BinaryI8::Mul { .. } => bc.apply(a, b, out, f),
        BinaryI8::MaxMin { .. } => bc.apply(a, b, out, f),
        BinaryI8::SquaredDifference { .. } => bc.apply(a, b, out, f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[allow(unused_imports)]
    use alloc::{vec, vec::Vec};

    #[test]
    fn int8_add_and_sub_tables_give_the_direct_values() {
        let q = |scale: f32, zero_point: i32| Q8 { scale, zero_point };
        let n = 4096;
        let a: Vec<i8> = (0..n).map(|i| (i * 37 % 256) as u8 as i8).collect();
        let b: Vec<i8> = (0..n).map(|i| (i * 101 % 256) as u8 as i8).collect();
        let bc = Broadcast::new(&[n], &[n]).unwrap();
        for sub in [false, true] {
            let p = BinaryI8::add_sub(q(0.05, -3), q(0.02, 7), q(0.06, 1), (-128, 127), sub, false)
                .unwrap();
            let tables = p.clone().with_tables();
            assert!(matches!(tables, BinaryI8::AddSubTables(_)));
            let mut out = vec![0i8; n];
            binary_quantized::<i8>(&tables, &bc, &a, &b, &mut out);
            for i in 0..n {
                assert_eq!(out[i], p.eval(a[i], b[i]), "{sub} {i}");
            }
        }
    }

    #[test]
    fn int16_add_and_mul_match_litert() {
        let q = |scale: f32| Q8 {
            scale,
            zero_point: 0,
        };
        let full = (-32768, 32767);
        // ADD with equal scales is exact (the int16 kernel shifts by 15, not 20).
        let add = BinaryI8::add_sub(q(0.01), q(0.01), q(0.01), full, false, true).unwrap();
        assert!(matches!(add, BinaryI8::AddSub { left_shift: 15, .. }));
        assert_eq!(add.eval_i32(1000, 2000), 3000);
        assert_eq!(add.eval_i32(30000, 30000), 32767);
        // A product LiteRT rounds up (11662.4999 exactly): its multiplier comes from the f32
        // product of the scales (attention fixture, layer norm).
        let mul = BinaryI8::mul_i16(
            q(0.000_116_044_23),
            q(5.197_110_3e-5),
            q(0.000_112_865_25),
            full,
        );
        assert_eq!(mul.eval_i32(13301, 16409), 11663);
        let mut out = [0i16; 2];
        let bc = Broadcast::new(&[2], &[1]).unwrap();
        binary_quantized::<i16>(&mul, &bc, &[13301, -13301], &[16409], &mut out);
        assert_eq!(out, [11663, -11663]); // ties away from zero
    }

    #[test]
    fn squared_difference_needs_a_small_output_multiplier() {
        let q = |scale, zero_point| Q8 { scale, zero_point };
        assert!(BinaryI8::squared_difference(q(0.5, 0), q(0.5, 0), q(0.5, 0)).is_some());
        // (2 * 1)^2 / 2^14 = 1/4096: the output scale must exceed it.
        assert!(BinaryI8::squared_difference(q(1.0, 0), q(1.0, 0), q(1.0 / 4096.0, 0)).is_none());
        assert!(BinaryI8::squared_difference(q(1.0, 0), q(1.0, 0), q(1.0 / 4000.0, 0)).is_some());
    }
}
