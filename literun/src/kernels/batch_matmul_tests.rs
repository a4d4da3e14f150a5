//! Tests of `batch_matmul`: hand-computed products, broadcasting over batch dimensions, and the
//! int8 kernel against the reference loop.

use super::*;
use alloc::vec;
use alloc::vec::Vec;

fn rand_vec(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1664525).wrapping_add(1013904223);
            (s >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
        })
        .collect()
}

/// Transposes the last two dims of a row-major tensor.
fn transpose_last2(x: &[f32], shape: &[usize]) -> (Vec<f32>, Vec<usize>) {
    let r = shape.len();
    let (p, q) = (shape[r - 2], shape[r - 1]);
    let mut out = vec![0.0; x.len()];
    for bch in 0..x.len() / (p * q) {
        for i in 0..p {
            for j in 0..q {
                out[bch * p * q + j * p + i] = x[bch * p * q + i * q + j];
            }
        }
    }
    let mut s = shape.to_vec();
    s.swap(r - 2, r - 1);
    (out, s)
}

/// Naive: explicit multi-index broadcasting (f64 accumulation).
fn naive(l: &[f32], ls: &[usize], r: &[f32], rs: &[usize], os: &[usize]) -> Vec<f32> {
    let or = os.len();
    let (m, k, n) = (ls[ls.len() - 2], ls[ls.len() - 1], rs[rs.len() - 1]);
    let total: usize = os.iter().product();
    let mut out = vec![0.0; total];
    for (flat, o) in out.iter_mut().enumerate() {
        let mut idx = vec![0; or];
        let mut rem = flat;
        for d in (0..or).rev() {
            idx[d] = rem % os[d];
            rem /= os[d];
        }
        let (i, j) = (idx[or - 2], idx[or - 1]);
        let offset = |shape: &[usize], mat: usize| {
            let nb = shape.len() - 2;
            let mut off = 0;
            for d in 0..nb {
                let oi = idx[or - 2 - nb + d];
                let c = if shape[d] == 1 { 0 } else { oi };
                off = off * shape[d] + c;
            }
            off * mat
        };
        let lo = offset(ls, m * k);
        let ro = offset(rs, k * n);
        let mut s = 0.0f64;
        for kk in 0..k {
            s += l[lo + i * k + kk] as f64 * r[ro + kk * n + j] as f64;
        }
        *o = s as f32;
    }
    out
}

#[test]
fn hand_computed_2x2() {
    let a = [1.0, 2.0, 3.0, 4.0];
    let b = [5.0, 6.0, 7.0, 8.0];
    let mut o = [0.0; 4];
    batch_matmul_f32(&a, &[2, 2], &b, &[2, 2], false, false, &mut o, &[2, 2]);
    assert_eq!(o, [19.0, 22.0, 43.0, 50.0]);
    batch_matmul_f32(&a, &[2, 2], &b, &[2, 2], true, false, &mut o, &[2, 2]);
    assert_eq!(o, [26.0, 30.0, 38.0, 44.0]);
    batch_matmul_f32(&a, &[2, 2], &b, &[2, 2], false, true, &mut o, &[2, 2]);
    assert_eq!(o, [17.0, 23.0, 39.0, 53.0]);
    batch_matmul_f32(&a, &[2, 2], &b, &[2, 2], true, true, &mut o, &[2, 2]);
    assert_eq!(o, [23.0, 31.0, 34.0, 46.0]);
}

fn check(ls: &[usize], rs: &[usize], os: &[usize]) {
    let l = rand_vec(ls.iter().product(), 1 + ls.len() as u32);
    let r = rand_vec(rs.iter().product(), 77 + rs.len() as u32);
    let want = naive(&l, ls, &r, rs, os);
    for adj_x in [false, true] {
        for adj_y in [false, true] {
            let (lx, lxs) = if adj_x {
                transpose_last2(&l, ls)
            } else {
                (l.clone(), ls.to_vec())
            };
            let (ry, rys) = if adj_y {
                transpose_last2(&r, rs)
            } else {
                (r.clone(), rs.to_vec())
            };
            let mut out = vec![f32::NAN; want.len()];
            batch_matmul_f32(&lx, &lxs, &ry, &rys, adj_x, adj_y, &mut out, os);
            for (i, (a, b)) in out.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                    "adj {adj_x} {adj_y} at {i}: {a} vs {b}"
                );
            }
        }
    }
}

#[test]
fn broadcast_different_ranks() {
    // [2,1,3,4] x [5,4,2] -> [2,5,3,2]
    check(&[2, 1, 3, 4], &[5, 4, 2], &[2, 5, 3, 2]);
    check(&[5, 3, 4], &[2, 1, 4, 2], &[2, 5, 3, 2]);
}

#[test]
fn plain_batched_and_rank2() {
    check(&[3, 4, 5], &[3, 5, 2], &[3, 4, 2]);
    check(&[4, 5], &[5, 3], &[4, 3]);
    check(&[4, 5], &[2, 3, 5, 3], &[2, 3, 4, 3]);
}

#[test]
fn rank6_broadcast() {
    check(
        &[2, 1, 2, 1, 2, 3],
        &[1, 2, 1, 2, 3, 2],
        &[2, 2, 2, 2, 2, 2],
    );
}

#[test]
fn empty_k_gives_zero() {
    let mut o = [9.0; 6];
    batch_matmul_f32(&[], &[2, 0], &[], &[0, 3], false, false, &mut o, &[2, 3]);
    assert_eq!(o, [0.0; 6]);
    let mut o = [9.0; 6];
    batch_matmul_f32(&[], &[2, 0], &[], &[3, 0], false, true, &mut o, &[2, 3]);
    assert_eq!(o, [0.0; 6]);
}

/// The reference's loop: every product accumulated in order, operands read in place.
#[allow(clippy::too_many_arguments)]
fn reference_i8(
    lhs: &[i8],
    lhs_shape: &[usize],
    rhs: &[i8],
    rhs_shape: &[usize],
    adj_x: bool,
    adj_y: bool,
    rhs_offset: i32,
    q: &crate::quant::OutputStage,
    out_shape: &[usize],
) -> Vec<i8> {
    let mut output = vec![0i8; out_shape.iter().product()];
    let (m, k, n) = dims(
        lhs.len(),
        lhs_shape,
        rhs.len(),
        rhs_shape,
        adj_x,
        adj_y,
        output.len(),
        out_shape,
    )
    .unwrap();
    let lo = q.input_offset;
    for_each_batch(
        lhs_shape,
        rhs_shape,
        out_shape,
        m * k,
        k * n,
        |la, ra, oo| {
            for i in 0..m {
                for j in 0..n {
                    let mut acc = 0i32;
                    for kk in 0..k {
                        let x = if adj_x {
                            lhs[la + kk * m + i]
                        } else {
                            lhs[la + i * k + kk]
                        };
                        let y = if adj_y {
                            rhs[ra + j * k + kk]
                        } else {
                            rhs[ra + kk * n + j]
                        };
                        acc = acc.wrapping_add((i32::from(x) + lo) * (i32::from(y) + rhs_offset));
                    }
                    output[oo + i * n + j] = q.apply(acc, 0);
                }
            }
        },
    );
    output
}

#[test]
fn int8_matches_the_reference_loop() {
    let mut seed = 7u32;
    let mut next = move || {
        seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
        seed >> 8
    };
    let shapes: [(&[usize], &[usize], &[usize]); 6] = [
        (&[3, 5, 17], &[3, 17, 6], &[3, 5, 6]),
        (&[1, 1], &[1, 1], &[1, 1]),
        (&[2, 4, 64], &[64, 9], &[2, 4, 9]),
        (&[2, 1, 3, 33], &[4, 33, 2], &[2, 4, 3, 2]),
        (&[7, 40], &[40, 31], &[7, 31]),
        (&[2, 3, 2, 5, 8], &[1, 3, 1, 8, 5], &[2, 3, 2, 5, 5]),
    ];
    for (ls, rs, os) in shapes {
        for (adj_x, adj_y) in [(false, false), (true, false), (false, true), (true, true)] {
            // The shapes above are for no adjoint; swap the last two dims where adjoint.
            let swap = |s: &[usize], adj: bool| {
                let mut s = s.to_vec();
                let r = s.len();
                if adj {
                    s.swap(r - 1, r - 2);
                }
                s
            };
            let (ls, rs) = (swap(ls, adj_x), swap(rs, adj_y));
            let lhs: Vec<i8> = (0..ls.iter().product()).map(|_| next() as i8).collect();
            let rhs: Vec<i8> = (0..rs.iter().product()).map(|_| next() as i8).collect();
            for (lo, ro, mult, shift) in [
                (0, 0, 1 << 30, -7),
                (128, -127, 1_518_500_250, -16),
                (-127, 128, 2_000_000_000, -17),
                (5, 3, 1 << 30, -9),
            ] {
                let q = crate::quant::OutputStage {
                    input_offset: lo,
                    output_offset: -3,
                    multipliers: vec![mult],
                    shifts: vec![shift],
                    act_min: -128,
                    act_max: 127,
                    single_rounding: false,
                };
                let want = reference_i8(&lhs, &ls, &rhs, &rs, adj_x, adj_y, ro, &q, os);
                let (ni8, ni32) = BmmI8Scratch::sizes(&ls, &rs, adj_x, adj_y);
                let mut i8s = vec![0i8; ni8];
                let mut i32s = vec![0i32; ni32];
                let mut got = vec![0i8; want.len()];
                batch_matmul_i8(
                    &lhs,
                    &ls,
                    &rhs,
                    &rs,
                    adj_x,
                    adj_y,
                    ro,
                    &q,
                    &mut BmmI8Scratch {
                        i8s: &mut i8s,
                        sums: &mut i32s,
                    },
                    &mut got,
                    os,
                );
                assert_eq!(
                    got, want,
                    "{ls:?} x {rs:?} adj {adj_x} {adj_y} offsets {lo} {ro}"
                );
                // Not all saturated: the case checks something.
                assert!(
                    got.iter().any(|&v| v != 127 && v != -128),
                    "{ls:?} {lo} {ro}"
                );
            }
        }
    }
}
