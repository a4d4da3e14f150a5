//! The int16 ADD/SUB/MUL fast path against the scalar kernel.

use super::*;
use crate::kernels::elementwise::{binary_quantized, BinaryI8, Broadcast, Q8};

impl Rng {
    fn i16s(&mut self, n: usize) -> Vec<i16> {
        (0..n).map(|_| (self.u() >> 48) as i16).collect()
    }
}

/// Every int16 value as `a`, against random partners and the extremes as `b` (and the other
/// way round): every value meets each input's rescaling, the ties of its roundings included.
fn all_values_with(rng: &mut Rng) -> (Vec<i16>, Vec<i16>) {
    let a: Vec<i16> = (0..65536).map(|i| (i as u16) as i16).collect();
    let mut b = rng.i16s(65536);
    for (i, v) in [i16::MIN, i16::MAX, 0, 1, -1, i16::MIN + 1]
        .into_iter()
        .enumerate()
    {
        b[i * 997] = v;
    }
    (a, b)
}

/// The fast path and the scalar kernel on the same operands (of the broadcast `bc`): equal.
fn check(isa: Isa, p: &BinaryI8, bc: &Broadcast, a: &[i16], b: &[i16], what: &str) {
    let f = ArithI16::new(isa, p).unwrap_or_else(|| panic!("{isa:?} {what}: no vector form"));
    let mut want = vec![0i16; bc.output_len()];
    let mut got = vec![0i16; bc.output_len()];
    binary_quantized::<i16>(p, bc, a, b, &mut want);
    arith_i16(&f, p, bc, a, b, &mut got, &mut scratch_for(1, 1));
    if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
        panic!(
            "{isa:?} {what} {p:?}: at {i} got {} want {} (of {} outputs)",
            got[i],
            want[i],
            want.len()
        );
    }
}

/// ADD/SUB/MUL from random scales (ratios up to 2^±20 between inputs and output, activation
/// clamps): every int16 value as either input, in both orders, then odd lengths (tails, less
/// than one vector) at odd offsets.
#[test]
fn arith_i16_matches_scalar_for_random_scales() {
    let mut rng = Rng(29);
    for isa in isas().into_iter().filter(|&i| has_arith_i16(i)) {
        let mut vector = 0;
        for case in 0..30 {
            let scale = |rng: &mut Rng| {
                let e = match case % 3 {
                    0 => rng.below(4) as i32 - 12,
                    1 => rng.below(40) as i32 - 30,
                    _ => rng.below(16) as i32 - 16,
                };
                (1.0 + rng.below(1000) as f32 / 1000.0) * 2f32.powi(e)
            };
            let q = |rng: &mut Rng| Q8 {
                scale: scale(rng),
                zero_point: 0,
            };
            let (qa, qb, qo) = (q(&mut rng), q(&mut rng), q(&mut rng));
            let range = match case % 4 {
                0 | 1 => (-32768, 32767),
                2 => (0, 32767),
                _ => {
                    let lo = -32768 + rng.below(30000) as i32;
                    (lo, lo + rng.below((32767 - lo) as usize + 1) as i32)
                }
            };
            let p = match case % 3 {
                0 => BinaryI8::mul_i16(qa, qb, qo, range),
                k => match BinaryI8::add_sub(qa, qb, qo, range, k == 2, true) {
                    Some(p) => p,
                    None => continue,
                },
            };
            if ArithI16::new(isa, &p).is_none() {
                continue;
            }
            vector += 1;
            let what = format!("case {case}");
            let (a, b) = all_values_with(&mut rng);
            let bc = Broadcast::new(&[65536], &[65536]).unwrap();
            check(isa, &p, &bc, &a, &b, &what);
            check(isa, &p, &bc, &b, &a, &what);
            for _ in 0..10 {
                let n = [0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 100][rng.below(11)] + rng.below(3) * 64;
                let at = rng.below(16);
                let (a, b) = (rng.i16s(n + at), rng.i16s(n + at));
                let bc = Broadcast::new(&[n], &[n]).unwrap();
                check(
                    isa,
                    &p,
                    &bc,
                    &a[at..],
                    &b[at..],
                    &format!("{what} n {n} at {at}"),
                );
            }
        }
        // Scales from calibration ranges always have the vector form.
        assert!(vector >= 25, "{isa:?}: {vector}");
    }
}

/// Parameters at the edges of what TFLite produces, built directly: input multipliers from 0
/// to `i32::MAX` with shifts down to -31, output multipliers with shifts from -31 to +31 (left
/// shifts whose products wrap, as the reference's `x * (1 << left)`), and saturation at both
/// ends of int16.
#[test]
fn arith_i16_matches_scalar_for_extreme_multipliers() {
    let mut rng = Rng(31);
    let in_mults = [
        0,
        1 << 30,
        i32::MAX,
        (1 << 30) + 1,
        0x5555_5555,
        0x7fff_0000,
        0x4000_ffff,
    ];
    for isa in isas().into_iter().filter(|&i| has_arith_i16(i)) {
        for case in 0..24 {
            let mult = |rng: &mut Rng| match rng.below(3) {
                0 => in_mults[rng.below(in_mults.len())],
                _ => (1 << 30) + rng.below(1 << 30) as i32,
            };
            let shift = [0, -1, -31, -15, 31, 1, 15, -2][case % 8];
            let out_mult = if case % 5 == 0 {
                i32::MAX
            } else {
                mult(&mut rng)
            };
            let range = if case % 2 == 0 {
                (-32768, 32767)
            } else {
                (-1000, 1000)
            };
            let ops = [
                BinaryI8::AddSub {
                    sub: case % 3 == 1,
                    in1_offset: 0,
                    in2_offset: 0,
                    left_shift: 15,
                    in1_mult: mult(&mut rng),
                    in1_shift: -(rng.below(32) as i32),
                    in2_mult: mult(&mut rng),
                    in2_shift: -(rng.below(3) as i32),
                    out_mult,
                    out_shift: shift,
                    out_offset: 0,
                    act_min: range.0,
                    act_max: range.1,
                },
                BinaryI8::Mul {
                    in1_offset: 0,
                    in2_offset: 0,
                    out_mult,
                    out_shift: shift,
                    out_offset: 0,
                    act_min: range.0,
                    act_max: range.1,
                },
            ];
            for p in ops {
                let (a, b) = all_values_with(&mut rng);
                let bc = Broadcast::new(&[65536], &[65536]).unwrap();
                check(isa, &p, &bc, &a, &b, &format!("case {case}"));
            }
        }
    }
}

/// The broadcasts of an int16 LayerNorm (a per-row mean or scale over the last axis, a
/// per-channel affine) and others: runs of the innermost dimension (contiguous or one repeated
/// value), one value for the whole output, short rows (the scalar kernel), for ADD, SUB and
/// MUL.
#[test]
fn arith_i16_matches_scalar_on_broadcasts() {
    let mut rng = Rng(37);
    let q = |scale| Q8 {
        scale,
        zero_point: 0,
    };
    let full = (-32768, 32767);
    let shapes: [(&[usize], &[usize]); 10] = [
        (&[1, 32, 64], &[1, 32, 1]),
        (&[1, 32, 1], &[1, 32, 64]),
        (&[1, 32, 64], &[64]),
        (&[2, 5, 40], &[40]),
        (&[3, 4, 20], &[4, 1]),
        (&[2, 1, 17], &[3, 17]),
        (&[2, 3, 33], &[]),
        (&[], &[2, 3, 7]),
        (&[4, 1], &[1, 40]),
        (&[5, 3], &[5, 1]),
    ];
    for isa in isas().into_iter().filter(|&i| has_arith_i16(i)) {
        let ops = [
            BinaryI8::add_sub(q(3e-4), q(1e-4), q(5e-4), full, false, true).unwrap(),
            BinaryI8::add_sub(q(3e-4), q(2.9e-4), q(2e-4), full, true, true).unwrap(),
            BinaryI8::mul_i16(q(1.2e-4), q(5.2e-5), q(1.1e-4), full),
        ];
        for p in &ops {
            for (sa, sb) in shapes {
                let bc = Broadcast::new(sa, sb).unwrap();
                let (a, b) = (rng.i16s(sa.iter().product()), rng.i16s(sb.iter().product()));
                check(isa, p, &bc, &a, &b, &format!("{sa:?} {sb:?}"));
            }
        }
    }
}

/// Operators the vector kernels do not reproduce keep the scalar kernel.
#[test]
fn arith_i16_refuses_what_it_does_not_reproduce() {
    let q = |scale, zero_point| Q8 { scale, zero_point };
    for isa in isas().into_iter().filter(|&i| has_arith_i16(i)) {
        let add = BinaryI8::add_sub(
            q(0.1, 0),
            q(0.1, 0),
            q(0.1, 0),
            (-32768, 32767),
            false,
            true,
        )
        .unwrap();
        assert!(ArithI16::new(isa, &add).is_some());
        // Int8's left shift, a zero point, MAXIMUM, a clamp outside int16.
        let int8 =
            BinaryI8::add_sub(q(0.1, 0), q(0.1, 0), q(0.1, 0), (-128, 127), false, false).unwrap();
        let offset = BinaryI8::mul_i16(q(0.1, 3), q(0.1, 0), q(0.1, 0), (-32768, 32767));
        let wide = BinaryI8::mul_i16(q(0.1, 0), q(0.1, 0), q(0.1, 0), (-40000, 32767));
        for p in [int8, offset, wide, BinaryI8::MaxMin { max: true }] {
            assert!(ArithI16::new(isa, &p).is_none(), "{isa:?} {p:?}");
        }
    }
    assert!(ArithI16::new(Isa::Portable, &BinaryI8::MaxMin { max: true }).is_none());
}
