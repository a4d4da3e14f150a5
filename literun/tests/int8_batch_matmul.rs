//! Int8 and hybrid BATCH_MATMUL against the float kernel on the dequantized values (the bounds of
//! `int8_kernels.rs`), rounding ties, and the parameters literun refuses.
mod common;

use common::int8::*;
use common::{opts, ModelBuilder, F};
use literun::schema::{self as s, BuiltinOperator as B, TensorType};

/// `[.., M, K]` with the last two dims swapped when `adj`.
fn swap_last2(shape: &[i32], adj: bool) -> Vec<i32> {
    let mut s = shape.to_vec();
    if adj {
        let r = s.len();
        s.swap(r - 2, r - 1);
    }
    s
}

#[allow(clippy::too_many_arguments)]
fn bmm_case(
    ls: &[i32],
    rs: &[i32],
    os: &[i32],
    adj_x: bool,
    adj_y: bool,
    ql: (f32, i64),
    qr: (f32, i64),
    seed: u64,
) {
    let mut r = Rng(seed);
    let (ls, rs) = (swap_last2(ls, adj_x), swap_last2(rs, adj_y));
    let nl: i32 = ls.iter().product();
    let nr: i32 = rs.iter().product();
    let a = r.i8s(nl as usize);
    let b = r.i8s(nr as usize);
    let (af, bf) = (deq(&a, ql.0, ql.1), deq(&b, qr.0, qr.1));
    use s::BatchMatMulOptions as O;
    let o = vec![F::Bool(O::VT_ADJ_X, adj_x), F::Bool(O::VT_ADJ_Y, adj_y)];
    let build = |q: bool, out: (f32, i64)| {
        let mut m = ModelBuilder::new();
        let x = act(&mut m, q, "a", &ls, ql);
        let y = act(&mut m, q, "b", &rs, qr);
        let z = act(&mut m, q, "z", os, out);
        m.op(B::BATCH_MATMUL, &[x, y], &[z], opts(101, o.clone()));
        m.finish(&[x, y], &[z])
    };
    let want = run_f32(&build(false, (0.0, 0)), &[&af, &bf]);
    let (lo, hi) = range(&want);
    let (os_, oz) = qparams(lo * 0.8, hi * 0.8);
    let got = run_i8(&build(true, (os_, oz)), &[&a, &b]);
    check("batch_matmul", &got, os_, oz, &want, 0.76);
}

#[test]
fn batch_matmul_int8_matches_float() {
    bmm_case(
        &[2, 3, 5],
        &[2, 5, 4],
        &[2, 3, 4],
        false,
        false,
        (0.02, 3),
        (0.05, -9),
        71,
    );
    bmm_case(
        &[2, 1, 3, 6],
        &[4, 6, 2],
        &[2, 4, 3, 2],
        true,
        false,
        (0.03, -128),
        (0.01, 0),
        72,
    );
    bmm_case(
        &[3, 7],
        &[2, 7, 5],
        &[2, 3, 5],
        false,
        true,
        (0.015, 20),
        (0.04, 7),
        73,
    );
    bmm_case(
        &[2, 2, 4, 3],
        &[3, 2],
        &[2, 2, 4, 2],
        true,
        true,
        (0.05, -1),
        (0.02, 100),
        74,
    );
    // Large enough for LiteRT's optimized (ruy) path to use its real kernels.
    bmm_case(
        &[1, 24, 64],
        &[64, 40],
        &[1, 24, 40],
        false,
        false,
        (0.01, -5),
        (0.01, 2),
        75,
    );
    bmm_case(
        &[3, 17, 33],
        &[3, 33, 19],
        &[3, 17, 19],
        true,
        true,
        (0.01, 9),
        (0.02, 0),
        76,
    );
    // rhs [..., 1, K, N]: LiteRT folds the lhs batch into its rows.
    for (adj_x, adj_y) in [(false, false), (true, false), (false, true)] {
        let (ql, qr) = ((0.02, 1), (0.02, 3));
        bmm_case(
            &[2, 3, 4, 5],
            &[1, 5, 6],
            &[2, 3, 4, 6],
            adj_x,
            adj_y,
            ql,
            qr,
            77,
        );
    }
}

/// Rounding ties: out = acc / 4 for acc in {-10, -6, 10, 6, 2, -2}. LiteRT (builtin and
/// reference kernels) rounds twice, ties away from zero: -3, -2, 3, 2, 1, -1 (one rounding,
/// half up, as its FULLY_CONNECTED, would give -2, -1, 3, 2, 1, 0).
#[test]
fn batch_matmul_int8_rounding_ties() {
    let mut m = ModelBuilder::new();
    let x = m.q("a", &[6, 2], TensorType::INT8, 0.5, 0);
    let y = m.q("b", &[2, 1], TensorType::INT8, 0.5, 0);
    let z = m.q("z", &[6, 1], TensorType::INT8, 1.0, 0);
    m.op(B::BATCH_MATMUL, &[x, y], &[z], None);
    let bytes = m.finish(&[x, y], &[z]);
    let got = run_i8(
        &bytes,
        &[&[-5, -5, -3, -3, 5, 5, 3, 3, 1, 1, -1, -1], &[1, 1]],
    );
    assert_eq!(got, vec![-3, -2, 3, 2, 1, -1]);
    // The same with zero points on every tensor (rhs zp 3: stored 4 means 1).
    let mut m = ModelBuilder::new();
    let x = m.q("a", &[6, 2], TensorType::INT8, 0.5, -7);
    let y = m.q("b", &[2, 1], TensorType::INT8, 0.5, 3);
    let z = m.q("z", &[6, 1], TensorType::INT8, 1.0, 11);
    m.op(B::BATCH_MATMUL, &[x, y], &[z], None);
    let bytes = m.finish(&[x, y], &[z]);
    let got = run_i8(
        &bytes,
        &[
            &[-12, -12, -10, -10, -2, -2, -4, -4, -6, -6, -8, -8],
            &[4, 4],
        ],
    );
    assert_eq!(got, vec![8, 9, 14, 13, 12, 10]);
}

#[test]
fn batch_matmul_int8_rejects_bad_params() {
    // Per-channel rhs.
    let mut m = ModelBuilder::new();
    let x = m.q("a", &[2, 2], TensorType::INT8, 0.5, 0);
    let y = m.tensor("b", &[2, 2], TensorType::INT8);
    m.quant(y, &[0.5, 0.25], &[0, 0], 1);
    let z = m.q("z", &[2, 2], TensorType::INT8, 1.0, 0);
    m.op(B::BATCH_MATMUL, &[x, y], &[z], None);
    expect_err(&m.finish(&[x, y], &[z]), "per tensor");
    // No quantization on the output.
    let mut m = ModelBuilder::new();
    let x = m.q("a", &[2, 2], TensorType::INT8, 0.5, 0);
    let y = m.q("b", &[2, 2], TensorType::INT8, 0.5, 0);
    let z = m.tensor("z", &[2, 2], TensorType::INT8);
    m.op(B::BATCH_MATMUL, &[x, y], &[z], None);
    expect_err(&m.finish(&[x, y], &[z]), "quantization parameters");
    // Float output of int8 inputs.
    let mut m = ModelBuilder::new();
    let x = m.q("a", &[2, 2], TensorType::INT8, 0.5, 0);
    let y = m.q("b", &[2, 2], TensorType::INT8, 0.5, 0);
    let z = m.f32("z", &[2, 2]);
    m.op(B::BATCH_MATMUL, &[x, y], &[z], None);
    expect_err(&m.finish(&[x, y], &[z]), "expected INT8");
    // int8 lhs with a float rhs.
    let mut m = ModelBuilder::new();
    let x = m.q("a", &[2, 2], TensorType::INT8, 0.5, 0);
    let y = m.f32("b", &[2, 2]);
    let z = m.q("z", &[2, 2], TensorType::INT8, 1.0, 0);
    m.op(B::BATCH_MATMUL, &[x, y], &[z], None);
    expect_err(&m.finish(&[x, y], &[z]), "not supported");
    // Wrong output shape.
    let mut m = ModelBuilder::new();
    let x = m.q("a", &[2, 3], TensorType::INT8, 0.5, 0);
    let y = m.q("b", &[3, 4], TensorType::INT8, 0.5, 0);
    let z = m.q("z", &[2, 3], TensorType::INT8, 1.0, 0);
    m.op(B::BATCH_MATMUL, &[x, y], &[z], None);
    expect_err(&m.finish(&[x, y], &[z]), "shape");
}

#[allow(clippy::too_many_arguments)]
fn hybrid_bmm_case(
    ls: &[i32],
    rs: &[i32],
    os: &[i32],
    adj_x: bool,
    adj_y: bool,
    asym: bool,
    seed: u64,
) {
    let mut r = Rng(seed);
    let (ls, rs) = (swap_last2(ls, adj_x), swap_last2(rs, adj_y));
    let x = r.f32s(ls.iter().product::<i32>() as usize, 2.0);
    let wq = r.i8s(rs.iter().product::<i32>() as usize);
    let ws = 0.011f32;
    let wf: Vec<f32> = wq.iter().map(|&v| v as f32 * ws).collect();
    use s::BatchMatMulOptions as O;
    let o = vec![
        F::Bool(O::VT_ADJ_X, adj_x),
        F::Bool(O::VT_ADJ_Y, adj_y),
        F::Bool(O::VT_ASYMMETRIC_QUANTIZE_INPUTS, asym),
    ];
    let build = |hybrid: bool| {
        let mut m = ModelBuilder::new();
        let a = m.f32("a", &ls);
        let b = if hybrid {
            let b = m.const_i8("b", &rs, &wq);
            m.quant(b, &[ws], &[0], 0);
            b
        } else {
            m.const_f32("b", &rs, &wf)
        };
        let z = m.f32("z", os);
        m.op(B::BATCH_MATMUL, &[a, b], &[z], opts(101, o.clone()));
        m.finish(&[a], &[z])
    };
    let want = run_f32(&build(false), &[&x]);
    let got = run_f32(&build(true), &[&x]);
    // Each lhs row is quantized on its own: half a step of its range per value, times the
    // largest |w| and K.
    let k = ls[ls.len() - if adj_x { 2 } else { 1 }] as usize;
    let max_w = wf.iter().fold(0.0f32, |a, &v| a.max(v.abs()));
    let (lo, hi) = range(&x);
    let step = if asym {
        (hi.max(0.0) - lo.min(0.0)) / 255.0
    } else {
        lo.abs().max(hi.abs()) / 127.0
    };
    let bound = step * 0.5 * max_w * k as f32 * 1.01 + 1e-4;
    let mut exact = 0;
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= bound,
            "hybrid bmm {i}: {g} vs {w} (bound {bound})"
        );
        exact += usize::from(g == w);
    }
    assert!(exact < got.len(), "hybrid gave the float result");
}

#[test]
fn batch_matmul_hybrid_matches_float() {
    for asym in [false, true] {
        hybrid_bmm_case(&[2, 3, 5], &[5, 4], &[2, 3, 4], false, false, asym, 121);
        hybrid_bmm_case(&[3, 4, 5], &[3, 5, 2], &[3, 4, 2], true, true, asym, 122);
        hybrid_bmm_case(
            &[2, 1, 3, 6],
            &[4, 6, 2],
            &[2, 4, 3, 2],
            false,
            true,
            asym,
            123,
        );
        hybrid_bmm_case(&[6, 4, 5], &[5, 6], &[6, 4, 6], true, false, asym, 124);
        hybrid_bmm_case(
            &[2, 3, 4, 5],
            &[1, 5, 6],
            &[2, 3, 4, 6],
            false,
            false,
            asym,
            125,
        );
        hybrid_bmm_case(
            &[2, 3, 4, 5],
            &[1, 5, 6],
            &[2, 3, 4, 6],
            false,
            true,
            asym,
            126,
        );
    }
}

#[test]
fn batch_matmul_hybrid_rejects_what_litert_gets_wrong() {
    let build = |ls: &[i32], rs: &[i32], os: &[i32], scales: &[f32], zp: i64, constant: bool| {
        let mut m = ModelBuilder::new();
        let a = m.f32("a", ls);
        let n: i32 = rs.iter().product();
        let b = if constant {
            m.const_i8("b", rs, &vec![1; n as usize])
        } else {
            m.tensor("b", rs, TensorType::INT8)
        };
        m.quant(b, scales, &vec![zp; scales.len()], rs.len() as i32 - 1);
        let z = m.f32("z", os);
        m.op(B::BATCH_MATMUL, &[a, b], &[z], None);
        if constant {
            m.finish(&[a], &[z])
        } else {
            m.finish(&[a, b], &[z])
        }
    };
    // Two lhs batch dims above 1 (LiteRT reuses the wrong per-row scales there).
    let bytes = build(&[2, 3, 4, 5], &[5, 6], &[2, 3, 4, 6], &[0.1], 0, true);
    expect_err(&bytes, "more than one batch dimension");
    let bytes = build(&[4, 5], &[2, 3, 5, 6], &[2, 3, 4, 6], &[0.1], 0, true);
    expect_err(&bytes, "more than one batch dimension");
    // adj_x with an rhs [..., 1, K, N] (LiteRT quantizes the folded lhs along the wrong axis).
    let mut m = ModelBuilder::new();
    let a = m.f32("a", &[2, 3, 5, 4]);
    let b = m.const_i8("b", &[1, 5, 6], &[1; 30]);
    m.quant(b, &[0.1], &[0], 0);
    let z = m.f32("z", &[2, 3, 4, 6]);
    let o = vec![F::Bool(s::BatchMatMulOptions::VT_ADJ_X, true)];
    m.op(B::BATCH_MATMUL, &[a, b], &[z], opts(101, o));
    expect_err(&m.finish(&[a], &[z]), "adj_x");
    // Per-channel scales, a zero point, a dynamic rhs.
    let bytes = build(&[4, 5], &[5, 2], &[4, 2], &[0.1, 0.2], 0, true);
    expect_err(&bytes, "one scale");
    let bytes = build(&[4, 5], &[5, 2], &[4, 2], &[0.1], 3, true);
    expect_err(&bytes, "zero point 0");
    let bytes = build(&[4, 5], &[5, 2], &[4, 2], &[0.1], 0, false);
    expect_err(&bytes, "constant");
}
