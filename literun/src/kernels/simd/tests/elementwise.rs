//! The elementwise fast paths against the scalar kernels.

use super::*;

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
            arith_i8(
                &f,
                &p,
                &bc_all,
                &all_a,
                &all_b,
                &mut got,
                &mut scratch_for(1, 1),
            );
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
            arith_i8(&f, &p, &bc, &a, &b, &mut got, &mut scratch_for(1, 1));
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
            arith_i8(
                &f,
                &tables,
                &bc_all,
                &all_a,
                &all_b,
                &mut got,
                &mut scratch_for(1, 1),
            );
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
                arith_i8(
                    &f,
                    &tables,
                    &bc,
                    &a[at..],
                    &b[at..],
                    &mut got[at..],
                    &mut scratch_for(1, 1),
                );
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
            arith_i8(&f, &tables, &bc, &a, &b, &mut got, &mut scratch_for(1, 1));
            assert_eq!(got, want, "{isa:?} {sa:?} {sb:?}");
        }
    }
}

/// TRANSPOSE of two dimensions above rows that stay (`[a, b, c] -> [b, a, c]`, with batch
/// and size-1 dimensions around, bytes and 32-bit values), against the portable transpose;
/// rows under 16 bytes and other permutations are refused.
#[test]
#[cfg(feature = "ops-shape")]
fn transpose_rows_matches_portable() {
    use crate::kernels::shape_ops::transpose;
    let mut rng = Rng(41);
    for isa in isas() {
        for case in 0..120usize {
            let size = if case % 2 == 0 { 4 } else { 1 };
            let (a, b, c) = (1 + rng.below(9), 1 + rng.below(6), 1 + rng.below(40));
            let (shape, perm): (Vec<usize>, Vec<usize>) = match case % 3 {
                0 => (vec![1, a, b, c], vec![0, 2, 1, 3]),
                1 => (vec![a, b, c], vec![1, 0, 2]),
                _ => (vec![a, 1, b, c / 2 + 1, 2], vec![2, 1, 0, 3, 4]),
            };
            let n: usize = shape.iter().product();
            let input: Vec<u8> = (0..n * size).map(|_| rng.u() as u8).collect();
            let mut want = vec![0u8; n * size];
            if size == 4 {
                let i: Vec<u32> = input
                    .chunks_exact(4)
                    .map(|v| u32::from_ne_bytes([v[0], v[1], v[2], v[3]]))
                    .collect();
                let mut w = vec![0u32; n];
                transpose(&i, &shape, &perm, &mut w);
                want = w.iter().flat_map(|v| v.to_ne_bytes()).collect();
            } else {
                transpose(&input, &shape, &perm, &mut want);
            }
            let mut got = vec![0u8; n * size];
            let done = transpose_rows(isa, &shape, &perm, size, &input, &mut got);
            let what = format!("{isa:?} case {case} {shape:?} {perm:?} size {size}");
            let row = n / (a * b) * size;
            let swaps = a > 1 && b > 1;
            assert_eq!(done, isa != Isa::Portable && swaps && row >= 16, "{what}");
            if done {
                assert_eq!(got, want, "{what}");
            }
        }
        assert!(!has_transpose_rows(isa, &[4, 5, 6], &[2, 1, 0], 4));
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
#[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
fn gelu_f32_matches_portable() {
    use crate::kernels::elementwise::gelu_f32 as portable;
    let mut x = vec![
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        f32::MAX,
        f32::MIN,
        1e-45,
        -16.0,
        -20.0,
    ];
    // Odd length, so the vector loops have tails.
    x.extend((0..1001).map(|i| (i as f32 - 500.0) * 0.0317));
    let mut want = vec![0.0; x.len()];
    let mut got = vec![0.0; x.len()];
    for isa in isas().into_iter().filter(|&i| has_elementwise(i)) {
        for approximate in [false, true] {
            portable(approximate, &x, &mut want);
            assert!(gelu_f32(isa, approximate, &x, &mut got));
            // Fused multiply-adds: a few ulp apart (absolutely, where exp underflows). The
            // exact form's kernels reduce its exponential differently from the portable one:
            // each within 1e-5 relative of the exact value (the GELU contract), and within
            // 6e-6 of each other (the vector kernels round `-a^2/2` once: up to 4.4e-6 off
            // the exact value in the far tail, the portable one 8e-7).
            let rel = if approximate { 1e-6 } else { 6e-6 };
            for i in 0..x.len() {
                let close = (got[i] - want[i]).abs() <= rel * want[i].abs() + 1e-37;
                assert!(
                    close || got[i] == want[i] || (got[i].is_nan() && want[i].is_nan()),
                    "{isa:?} gelu({}, {approximate}) = {}, portable {}",
                    x[i],
                    got[i],
                    want[i]
                );
            }
        }
    }
}

#[test]
#[cfg(all(feature = "ops-softmax", feature = "ops-float"))]
fn softmax_f32_matches_portable() {
    use crate::kernels::softmax::softmax_f32_fast as portable;
    let mut rng = Rng(5);
    for isa in isas().into_iter().filter(|&i| has_elementwise(i)) {
        for depth in [1, 7, 16, 32, 45, 100] {
            let x: Vec<f32> = (0..3 * depth)
                .map(|_| rng.u() as i32 as f32 / 1e8)
                .collect();
            let (mut want, mut got) = (vec![0.0; x.len()], vec![0.0; x.len()]);
            portable(&x, 3, depth, 1.3, &mut want);
            assert!(softmax_f32(isa, &x, 3, depth, 1.3, &mut got));
            // `exp` in fused multiply-adds: within a few ulp of the portable loops.
            for (g, w) in got.iter().zip(&want) {
                let tol = 1e-6 * w.abs() + 1e-37;
                assert!((g - w).abs() <= tol, "{isa:?} depth {depth}: {g} vs {w}");
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
                    let mut w = scratch_for(1, 1);
                    assert!(quantize_f32(
                        isa,
                        x,
                        scale,
                        zp,
                        QuantizeTo::I8,
                        &mut got,
                        &mut w
                    ));
                    let want: Vec<u8> = want.iter().map(|&v| v as u8).collect();
                    assert_eq!(got, want, "{isa:?} int8 case {case} zp {zp}");
                    let mut want = vec![0u8; m];
                    scalar(x, scale, zp, (0, 255), &mut want, |v| v as u8);
                    let mut w = scratch_for(1, 1);
                    assert!(quantize_f32(
                        isa,
                        x,
                        scale,
                        zp,
                        QuantizeTo::U8,
                        &mut got,
                        &mut w
                    ));
                    assert_eq!(got, want, "{isa:?} uint8 case {case} zp {zp}");
                    let mut want = vec![0i16; m];
                    scalar(x, scale, zp, (-32768, 32767), &mut want, |v| v as i16);
                    let want: Vec<u8> = want.iter().flat_map(|v| v.to_le_bytes()).collect();
                    let mut got = vec![0u8; 2 * m];
                    let mut w = scratch_for(1, 1);
                    assert!(quantize_f32(
                        isa,
                        x,
                        scale,
                        zp,
                        QuantizeTo::I16,
                        &mut got,
                        &mut w
                    ));
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
            &mut o,
            &mut scratch_for(1, 1)
        ));
        assert_eq!(o, [1, 0, 1, 0, 9]);
        let mut w = scratch_for(1, 1);
        assert!(quantize_f32(
            isa,
            &[1.0; 2],
            1.0,
            0,
            QuantizeTo::I8,
            &mut o,
            &mut w
        ));
        assert_eq!(o, [1, 1, 1, 0, 9]);
    }
}

/// Float ADD, SUB and MUL with each fused activation: the portable kernel's values bit for
/// bit (NaNs and infinities among the inputs), split over the tests' three workers; a
/// broadcast input takes the portable kernel.
#[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
#[test]
fn binary_f32_matches_portable() {
    use crate::kernels::elementwise::{binary_f32 as portable, BinaryOp, Broadcast};
    let mut rng = Rng(15);
    for isa in isas() {
        for (case, op) in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul]
            .into_iter()
            .enumerate()
        {
            for act in [
                Activation::None,
                Activation::Relu,
                Activation::Relu6,
                Activation::Tanh,
            ] {
                let n = 1 + rng.below(700);
                let mut a = rng.f32s(n);
                let b: Vec<f32> = rng.f32s(n).iter().map(|v| v * 8.0).collect();
                for i in (0..n).step_by(41) {
                    a[i] = [f32::NAN, f32::INFINITY, -0.0][i % 3];
                }
                for b in [&b[..], &b[..1]] {
                    let bc = Broadcast::new(&[n], &[b.len()]).unwrap();
                    let mut want = vec![0f32; n];
                    portable(op, &bc, &a, b, act, &mut want);
                    let mut got = vec![0f32; n];
                    binary_f32(isa, op, act, &bc, &a, b, &mut got, &mut scratch_for(1, 1));
                    let same = got
                        .iter()
                        .zip(&want)
                        .all(|(x, y)| x.to_bits() == y.to_bits());
                    assert!(
                        same,
                        "{isa:?} case {case} {op:?} {act:?} n {n} b {}",
                        b.len()
                    );
                }
            }
        }
    }
}

/// TRANSPOSE of 2-4 rows (NCHW -> NHWC of a few channels) split over the tests' three workers:
/// the portable kernel's output for 1-, 2- and 4-byte values, batches, odd lengths.
#[cfg(feature = "ops-shape")]
#[test]
fn transpose_few_rows_split_matches_portable() {
    use crate::kernels::shape_ops::transpose;
    let mut rng = Rng(18);
    for case in 0..60 {
        let (b, rows, cols) = (1 + case % 2, 2 + case % 3, 2 + rng.below(300));
        let (shape, perm) = ([b, rows, cols], [0, 2, 1]);
        assert!(has_transpose_few_rows_split(&shape, &perm, 1));
        let input: Vec<u32> = (0..b * rows * cols).map(|_| rng.u() as u32).collect();
        let mut want = vec![0u32; input.len()];
        transpose(&input, &shape, &perm, &mut want);
        let mut got = vec![0u32; input.len()];
        let mut w = scratch_for(1, 1);
        assert!(transpose_few_rows_split(
            &shape, &perm, &input, &mut got, &mut w
        ));
        assert_eq!(got, want, "case {case}");
        let bytes: Vec<u8> = input.iter().map(|&v| v as u8).collect();
        let mut want = vec![0u8; bytes.len()];
        transpose(&bytes, &shape, &perm, &mut want);
        let mut got = vec![0u8; bytes.len()];
        assert!(transpose_few_rows_split(
            &shape, &perm, &bytes, &mut got, &mut w
        ));
        assert_eq!(got, want, "case {case} bytes");
    }
    // Five rows, or one column: the portable kernel's.
    assert!(!has_transpose_few_rows_split(&[1, 5, 9], &[0, 2, 1], 1));
    assert!(!has_transpose_few_rows_split(&[1, 3, 9], &[0, 2, 1], 8));
}
