//! Int8 and hybrid kernels against the float kernels.
//!
//! Each case builds the same one-operator model twice: in int8 (activations with per-tensor
//! parameters, weights per channel) and in float with the *dequantized* int8 values. Both see
//! exactly the same real numbers, so the int8 result may differ from the float one only by the
//! output requantization. TFLite rounds twice (`SaturatingRoundingDoublingHighMul` to an
//! integer, then `RoundingDivideByPOT` by at least 2 when the multiplier is below 1/2): at most
//! a quarter step plus half a step, so the bound is 0.76 steps (0.5 for the table-based
//! activations and softmax, which round once in float). TFLite's optimized 4-D MEAN over H, W
//! also rounds its zero-point correction to an integer (another half step): bound 1.26.
//! An off-by-one in any output stage exceeds these bounds somewhere.
mod common;

use common::int8::*;
use common::{opts, ModelBuilder, F};
use literun::schema::{self as s, BuiltinOperator as B, TensorType};
use literun::{Interpreter, Model};

struct ConvCase {
    is: [usize; 4],
    fs: [usize; 4],
    depthwise: bool,
    same: bool,
    stride: usize,
    dilation: usize,
    act: i8,
    seed: u64,
}

fn conv_case(c: ConvCase) {
    let mut r = Rng(c.seed);
    let nin: usize = c.is.iter().product();
    let nf: usize = c.fs.iter().product();
    let oc = if c.depthwise { c.fs[3] } else { c.fs[0] };
    let xq = r.i8s(nin);
    let (xs, xz) = (0.03f32, 5i64);
    let wq = r.i8s(nf);
    let wscales: Vec<f32> = (0..oc).map(|i| 0.002 + 0.001 * i as f32).collect();
    let bq: Vec<i32> = (0..oc).map(|_| (r.f() * 3000.0) as i32).collect();
    let chan = |i: usize| if c.depthwise { i % oc } else { i / (nf / oc) };
    let wf: Vec<f32> = wq
        .iter()
        .enumerate()
        .map(|(i, &v)| v as f32 * wscales[chan(i)])
        .collect();
    let bf: Vec<f32> = bq
        .iter()
        .enumerate()
        .map(|(i, &v)| (v as f64 * xs as f64 * wscales[i] as f64) as f32)
        .collect();
    let xf = deq(&xq, xs, xz);
    let (code, tag, o) = if c.depthwise {
        use s::DepthwiseConv2DOptions as O;
        (
            B::DEPTHWISE_CONV_2D,
            2u8,
            vec![
                F::I8(O::VT_PADDING, if c.same { 0 } else { 1 }),
                F::I32(O::VT_STRIDE_W, c.stride as i32),
                F::I32(O::VT_STRIDE_H, c.stride as i32),
                F::I32(O::VT_DEPTH_MULTIPLIER, (c.fs[3] / c.is[3]) as i32),
                F::I8(O::VT_FUSED_ACTIVATION_FUNCTION, c.act),
                F::I32(O::VT_DILATION_W_FACTOR, c.dilation as i32),
                F::I32(O::VT_DILATION_H_FACTOR, c.dilation as i32),
            ],
        )
    } else {
        use s::Conv2DOptions as O;
        (
            B::CONV_2D,
            1u8,
            vec![
                F::I8(O::VT_PADDING, if c.same { 0 } else { 1 }),
                F::I32(O::VT_STRIDE_W, c.stride as i32),
                F::I32(O::VT_STRIDE_H, c.stride as i32),
                F::I8(O::VT_FUSED_ACTIVATION_FUNCTION, c.act),
                F::I32(O::VT_DILATION_W_FACTOR, c.dilation as i32),
                F::I32(O::VT_DILATION_H_FACTOR, c.dilation as i32),
            ],
        )
    };
    let out_dim = |n: usize, k: usize| {
        let eff = (k - 1) * c.dilation + 1;
        if c.same {
            n.div_ceil(c.stride)
        } else {
            (n - eff) / c.stride + 1
        }
    };
    let os = [
        c.is[0] as i32,
        out_dim(c.is[1], c.fs[1]) as i32,
        out_dim(c.is[2], c.fs[2]) as i32,
        oc as i32,
    ];
    let is: Vec<i32> = c.is.iter().map(|&v| v as i32).collect();
    let fsh: Vec<i32> = c.fs.iter().map(|&v| v as i32).collect();
    let build = |q: bool, out: (f32, i64), hybrid: bool| {
        let mut m = ModelBuilder::new();
        let x = act(&mut m, q, "x", &is, (xs, xz));
        let (w, b) = if q || hybrid {
            let w = m.const_i8("w", &fsh, &wq);
            let qd = if c.depthwise { 3 } else { 0 };
            m.quant(w, &wscales, &vec![0; oc], qd);
            let b = if hybrid {
                m.const_f32("b", &[oc as i32], &bf)
            } else {
                let b = m.const_i32("b", &[oc as i32], &bq);
                let bs: Vec<f32> = wscales.iter().map(|&w| w * xs).collect();
                m.quant(b, &bs, &vec![0; oc], 0);
                b
            };
            (w, b)
        } else {
            (
                m.const_f32("w", &fsh, &wf),
                m.const_f32("b", &[oc as i32], &bf),
            )
        };
        let y = act(&mut m, q, "y", &os, out);
        m.op(code, &[x, w, b], &[y], opts(tag, o.clone()));
        m.finish(&[x], &[y])
    };
    let want = run_f32(&build(false, (0.0, 0), false), &[&xf]);
    let (lo, hi) = range(&want);
    let (os_, oz) = qparams(lo, hi);
    let got = run_i8(&build(true, (os_, oz), false), &[&xq]);
    check(
        if c.depthwise { "depthwise" } else { "conv" },
        &got,
        os_,
        oz,
        &want,
        0.76,
    );

    // Hybrid: float input (any values), int8 filter. Error bound: the input quantization
    // (half a step of max|x|/127 per value, times sum |w|) plus float rounding.
    let xh = r.f32s(nin, 2.0);
    let href = run_f32(&build(false, (0.0, 0), false), &[&xh]);
    let hgot = run_f32(&build(false, (0.0, 0), true), &[&xh]);
    let max_abs = xh.iter().fold(0.0f32, |a, &v| a.max(v.abs()));
    let (hlo, hhi) = range(&xh);
    let step = max_abs / 127.0f32.max(1.0);
    let astep = (hhi.max(0.0) - hlo.min(0.0)) / 255.0;
    let taps = if c.depthwise {
        c.fs[1] * c.fs[2]
    } else {
        c.fs[1] * c.fs[2] * c.fs[3]
    };
    let max_w = wf.iter().fold(0.0f32, |a, &v| a.max(v.abs()));
    let bound = step.max(astep) * 0.5 * max_w * taps as f32 * 1.01 + 1e-4;
    let mut exact_match = 0;
    for (i, (a, b)) in hgot.iter().zip(&href).enumerate() {
        assert!(
            (a - b).abs() <= bound,
            "hybrid {}: element {i}: {a} vs {b} (bound {bound})",
            if c.depthwise { "depthwise" } else { "conv" }
        );
        exact_match += usize::from(a == b);
    }
    // Hybrid is not just the float kernel.
    assert!(exact_match < hgot.len());
}

#[test]
fn conv_int8_and_hybrid_match_float() {
    conv_case(ConvCase {
        is: [1, 7, 6, 3],
        fs: [4, 3, 3, 3],
        depthwise: false,
        same: true,
        stride: 2,
        dilation: 1,
        act: 0,
        seed: 1,
    });
    conv_case(ConvCase {
        is: [2, 6, 7, 5],
        fs: [3, 3, 2, 5],
        depthwise: false,
        same: false,
        stride: 1,
        dilation: 2,
        act: 1,
        seed: 2,
    });
    conv_case(ConvCase {
        is: [1, 5, 5, 4],
        fs: [6, 1, 1, 4],
        depthwise: false,
        same: true,
        stride: 1,
        dilation: 1,
        act: 3,
        seed: 3,
    });
}

#[test]
fn depthwise_int8_and_hybrid_match_float() {
    conv_case(ConvCase {
        is: [1, 6, 5, 3],
        fs: [1, 3, 3, 6],
        depthwise: true,
        same: true,
        stride: 1,
        dilation: 1,
        act: 0,
        seed: 4,
    });
    conv_case(ConvCase {
        is: [2, 7, 7, 4],
        fs: [1, 3, 3, 4],
        depthwise: true,
        same: true,
        stride: 2,
        dilation: 1,
        act: 3,
        seed: 5,
    });
    conv_case(ConvCase {
        is: [1, 8, 7, 2],
        fs: [1, 3, 2, 6],
        depthwise: true,
        same: false,
        stride: 1,
        dilation: 2,
        act: 1,
        seed: 6,
    });
}

fn fc_case(per_channel: bool, asym: bool, act_code: i8, seed: u64) {
    let mut r = Rng(seed);
    let (batches, ind, outd) = (3usize, 17usize, 5usize);
    let xq = r.i8s(batches * ind);
    let (xs, xz) = (0.05f32, -7i64);
    let wq = r.i8s(outd * ind);
    let wscales: Vec<f32> = if per_channel {
        (0..outd).map(|i| 0.01 + 0.003 * i as f32).collect()
    } else {
        vec![0.013]
    };
    let ws = |o: usize| wscales[if per_channel { o } else { 0 }];
    let wf: Vec<f32> = wq
        .iter()
        .enumerate()
        .map(|(i, &v)| v as f32 * ws(i / ind))
        .collect();
    let bq: Vec<i32> = (0..outd).map(|_| (r.f() * 500.0) as i32).collect();
    let bf: Vec<f32> = bq
        .iter()
        .enumerate()
        .map(|(o, &v)| (v as f64 * (xs * ws(o)) as f64) as f32)
        .collect();
    let xf = deq(&xq, xs, xz);
    use s::FullyConnectedOptions as O;
    let o = vec![
        F::I8(O::VT_FUSED_ACTIVATION_FUNCTION, act_code),
        F::Bool(O::VT_ASYMMETRIC_QUANTIZE_INPUTS, asym),
    ];
    let build = |q: bool, out: (f32, i64), hybrid: bool| {
        let mut m = ModelBuilder::new();
        let x = act(&mut m, q, "x", &[batches as i32, ind as i32], (xs, xz));
        let (w, b) = if q || hybrid {
            let w = m.const_i8("w", &[outd as i32, ind as i32], &wq);
            m.quant(w, &wscales, &vec![0; wscales.len()], 0);
            let b = if hybrid {
                m.const_f32("b", &[outd as i32], &bf)
            } else {
                let b = m.const_i32("b", &[outd as i32], &bq);
                let bs: Vec<f32> = (0..outd).map(|o| xs * ws(o)).collect();
                m.quant(b, &bs, &vec![0; outd], 0);
                b
            };
            (w, b)
        } else {
            (
                m.const_f32("w", &[outd as i32, ind as i32], &wf),
                m.const_f32("b", &[outd as i32], &bf),
            )
        };
        let y = act(&mut m, q, "y", &[batches as i32, outd as i32], out);
        m.op(B::FULLY_CONNECTED, &[x, w, b], &[y], opts(8, o.clone()));
        m.finish(&[x], &[y])
    };
    let want = run_f32(&build(false, (0.0, 0), false), &[&xf]);
    let (lo, hi) = range(&want);
    let (os_, oz) = qparams(lo, hi);
    let got = run_i8(&build(true, (os_, oz), false), &[&xq]);
    check("fully_connected", &got, os_, oz, &want, 0.76);

    let xh = r.f32s(batches * ind, 3.0);
    let href = run_f32(&build(false, (0.0, 0), false), &[&xh]);
    let hgot = run_f32(&build(false, (0.0, 0), true), &[&xh]);
    let max_w = wf.iter().fold(0.0f32, |a, &v| a.max(v.abs()));
    for b in 0..batches {
        let row = &xh[b * ind..(b + 1) * ind];
        let (l, h) = range(row);
        let step = if asym {
            (h.max(0.0) - l.min(0.0)) / 255.0
        } else {
            l.abs().max(h.abs()) / 127.0
        };
        let bound = step * 0.5 * max_w * ind as f32 * 1.01 + 1e-4;
        for o in 0..outd {
            let (a, w) = (hgot[b * outd + o], href[b * outd + o]);
            assert!(
                (a - w).abs() <= bound,
                "hybrid fc {b},{o}: {a} vs {w} (bound {bound})"
            );
        }
    }
}

#[test]
fn fully_connected_int8_and_hybrid_match_float() {
    fc_case(false, false, 0, 11);
    fc_case(true, false, 1, 12);
    fc_case(true, true, 3, 13);
    fc_case(false, true, 0, 14);
}

fn binary_case(code: B, tag: u8, seed: u64) {
    let mut r = Rng(seed);
    let (sa, sb) = ([2i32, 3, 4], [1i32, 3, 1]);
    let a = r.i8s(24);
    let b = r.i8s(3);
    let (qa, qb) = ((0.02f32, 3i64), (0.07f32, -20i64));
    let (af, bf) = (deq(&a, qa.0, qa.1), deq(&b, qb.0, qb.1));
    let build = |q: bool, out: (f32, i64)| {
        let mut m = ModelBuilder::new();
        let x = act(&mut m, q, "a", &sa, qa);
        let y = act(&mut m, q, "b", &sb, qb);
        let z = act(&mut m, q, "z", &sa, out);
        m.op(code, &[x, y], &[z], opts(tag, vec![F::I8(4, 0)]));
        m.finish(&[x, y], &[z])
    };
    let want = run_f32(&build(false, (0.0, 0)), &[&af, &bf]);
    let (lo, hi) = range(&want);
    let (os_, oz) = qparams(lo, hi);
    let got = run_i8(&build(true, (os_, oz)), &[&a, &b]);
    check(&format!("{code:?}"), &got, os_, oz, &want, 0.76);
}

#[test]
fn add_sub_mul_int8_broadcast_match_float() {
    binary_case(B::ADD, 11, 21);
    binary_case(B::SUB, 28, 22);
    binary_case(B::MUL, 21, 23);
}

#[test]
fn add_int8_hand_computed() {
    // 1.0 (q 10 @ 0.1) + 0.5 (q 5 @ 0.1) = 1.5 -> q 15 @ 0.1; with zp shifts.
    let mut m = ModelBuilder::new();
    let a = m.q("a", &[3], TensorType::INT8, 0.1, 0);
    let b = m.q("b", &[3], TensorType::INT8, 0.1, 0);
    let y = m.q("y", &[3], TensorType::INT8, 0.2, -1);
    m.op(B::ADD, &[a, b], &[y], opts(11, vec![F::I8(4, 0)]));
    let bytes = m.finish(&[a, b], &[y]);
    // 1.5/0.2 = 7.5 -> 8 (rounds up) - 1 = 7; -3.0/0.2 = -15 - 1 = -16; 25.4/0.2=127-1=126.
    let got = run_i8(&bytes, &[&[10, -20, 127], &[5, -10, 127]]);
    assert_eq!(got, vec![7, -16, 126]);
}

fn pool_case(max: bool, seed: u64) {
    let mut r = Rng(seed);
    let is = [1i32, 7, 7, 3];
    let x = r.i8s(147);
    let q = (0.04f32, -3i64);
    let xf = deq(&x, q.0, q.1);
    use s::Pool2DOptions as O;
    let o = vec![
        F::I8(O::VT_PADDING, 0),
        F::I32(O::VT_STRIDE_W, 2),
        F::I32(O::VT_STRIDE_H, 2),
        F::I32(O::VT_FILTER_WIDTH, 3),
        F::I32(O::VT_FILTER_HEIGHT, 3),
        F::I8(O::VT_FUSED_ACTIVATION_FUNCTION, 1),
    ];
    let build = |qq: bool| {
        let mut m = ModelBuilder::new();
        let a = act(&mut m, qq, "x", &is, q);
        let y = act(&mut m, qq, "y", &[1, 4, 4, 3], q);
        let code = if max {
            B::MAX_POOL_2D
        } else {
            B::AVERAGE_POOL_2D
        };
        m.op(code, &[a], &[y], opts(5, o.clone()));
        m.finish(&[a], &[y])
    };
    let want = run_f32(&build(false), &[&xf]);
    let got = run_i8(&build(true), &[&x]);
    // Max pooling is exact; average rounds to the nearest step.
    check("pool", &got, q.0, q.1, &want, if max { 0.0 } else { 0.5 });
}

#[test]
fn pools_int8_match_float() {
    pool_case(true, 31);
    pool_case(false, 32);
}

fn mean_case(shape: &[i32], axes: &[i32], keep: bool, seed: u64, steps: f32) {
    let mut r = Rng(seed);
    let n: i32 = shape.iter().product();
    let x = r.i8s(n as usize);
    let q = (0.05f32, 9i64);
    let xf = deq(&x, q.0, q.1);
    let mut oshape = Vec::new();
    for (d, &v) in shape.iter().enumerate() {
        if axes.contains(&(d as i32)) {
            if keep {
                oshape.push(1);
            }
        } else {
            oshape.push(v);
        }
    }
    let build = |qq: bool, out: (f32, i64)| {
        let mut m = ModelBuilder::new();
        let a = act(&mut m, qq, "x", shape, q);
        let ax = m.const_i32("axes", &[axes.len() as i32], axes);
        let y = act(&mut m, qq, "y", &oshape, out);
        m.op(B::MEAN, &[a, ax], &[y], opts(27, vec![F::Bool(4, keep)]));
        m.finish(&[a], &[y])
    };
    let want = run_f32(&build(false, (0.0, 0)), &[&xf]);
    let (lo, hi) = range(&want);
    let (os_, oz) = qparams(lo, hi);
    let got = run_i8(&build(true, (os_, oz)), &[&x]);
    check("mean", &got, os_, oz, &want, steps);
}

#[test]
fn mean_int8_matches_float() {
    mean_case(&[1, 5, 4, 6], &[1, 2], true, 41, 1.26);
    mean_case(&[2, 3, 4, 5], &[3], false, 42, 0.76);
    mean_case(&[2, 3, 7], &[0, 2], true, 43, 0.76);
}

fn unary_case(code: B, tag: u8, fields: Vec<F>, fixed_out: Option<(f32, i64)>, seed: u64) {
    let mut r = Rng(seed);
    let x: Vec<i8> = (-128..=127).map(|v| v as i8).collect();
    let _ = r.f();
    let q = (0.06f32, -10i64);
    let xf = deq(&x, q.0, q.1);
    let build = |qq: bool, out: (f32, i64)| {
        let mut m = ModelBuilder::new();
        let a = act(&mut m, qq, "x", &[256], q);
        let y = act(&mut m, qq, "y", &[256], out);
        let o = if fields.is_empty() {
            None
        } else {
            opts(tag, fields.clone())
        };
        m.op(code, &[a], &[y], o);
        m.finish(&[a], &[y])
    };
    let want = run_f32(&build(false, (0.0, 0)), &[&xf]);
    let (lo, hi) = range(&want);
    let out = fixed_out.unwrap_or_else(|| qparams(lo, hi));
    let got = run_i8(&build(true, out), &[&x]);
    check(&format!("{code:?}"), &got, out.0, out.1, &want, 0.76);
}

#[test]
fn activations_int8_match_float() {
    unary_case(B::LOGISTIC, 0, vec![], Some((1.0 / 256.0, -128)), 51);
    unary_case(B::TANH, 0, vec![], Some((1.0 / 128.0, 0)), 52);
    unary_case(B::HARD_SWISH, 0, vec![], None, 53);
    unary_case(B::RELU, 0, vec![], None, 54);
    unary_case(B::RELU6, 0, vec![], None, 55);
    unary_case(B::RELU_N1_TO_1, 0, vec![], None, 56);
    unary_case(B::RELU_0_TO_1, 0, vec![], None, 59);
    unary_case(
        B::LEAKY_RELU,
        75,
        vec![F::F32(s::LeakyReluOptions::VT_ALPHA, 0.2)],
        None,
        57,
    );
    unary_case(
        B::GELU,
        116,
        vec![F::Bool(s::GeluOptions::VT_APPROXIMATE, false)],
        None,
        58,
    );
}

#[test]
fn softmax_int8_matches_float() {
    let mut r = Rng(61);
    let x = r.i8s(30);
    let q = (0.1f32, 4i64);
    let xf = deq(&x, q.0, q.1);
    let out = (1.0f32 / 256.0, -128i64);
    let build = |qq: bool| {
        let mut m = ModelBuilder::new();
        let a = act(&mut m, qq, "x", &[3, 10], q);
        let y = act(&mut m, qq, "y", &[3, 10], out);
        m.op(
            B::SOFTMAX,
            &[a],
            &[y],
            opts(9, vec![F::F32(s::SoftmaxOptions::VT_BETA, 1.0)]),
        );
        m.finish(&[a], &[y])
    };
    let want = run_f32(&build(false), &[&xf]);
    let got = run_i8(&build(true), &[&x]);
    check("softmax", &got, out.0, out.1, &want, 0.51);
}

#[test]
fn copy_ops_int8_keep_values_and_pad_with_zero_point() {
    // PAD with the zero point, then CONCATENATION and RESHAPE with shared parameters.
    let mut m = ModelBuilder::new();
    let q = (0.5f32, -7i64);
    let x = m.q("x", &[1, 2, 2, 1], TensorType::INT8, q.0, q.1);
    let p = m.const_i32("p", &[4, 2], &[0, 0, 1, 0, 0, 1, 0, 0]);
    let y = m.q("y", &[1, 3, 3, 1], TensorType::INT8, q.0, q.1);
    m.op(B::PAD, &[x, p], &[y], None);
    let z = m.q("z", &[1, 3, 3, 2], TensorType::INT8, q.0, q.1);
    m.op(
        B::CONCATENATION,
        &[y, y],
        &[z],
        opts(10, vec![F::I32(s::ConcatenationOptions::VT_AXIS, 3)]),
    );
    let shape = m.const_i32("shape", &[1], &[18]);
    let w = m.q("w", &[18], TensorType::INT8, q.0, q.1);
    m.op(B::RESHAPE, &[z, shape], &[w], None);
    let bytes = m.finish(&[x], &[w]);
    let got = run_i8(&bytes, &[&[1, 2, 3, 4]]);
    assert_eq!(
        got,
        vec![-7, -7, -7, -7, -7, -7, 1, 1, 2, 2, -7, -7, 3, 3, 4, 4, -7, -7]
    );
    // Different output parameters on a copy operator are an error.
    let mut m = ModelBuilder::new();
    let x = m.q("x", &[4], TensorType::INT8, 0.5, 0);
    let shape = m.const_i32("shape", &[2], &[2, 2]);
    let y = m.q("y", &[2, 2], TensorType::INT8, 0.25, 0);
    m.op(B::RESHAPE, &[x, shape], &[y], None);
    let bytes = m.finish(&[x], &[y]);
    let model = Model::from_bytes(&bytes).unwrap();
    let e = Interpreter::new(&model).err().expect("accepted");
    assert!(e.to_string().contains("different quantization"), "{e}");
}

#[test]
fn mean_hw_int8_hand_computed() {
    // 2x2 window of q [1, 2, 3, 5] (zp 1, scale 0.5): reals 0, .5, 1, 2 -> mean 0.875.
    // Output scale 0.25, zp -3: TFLite's optimized path: bias = -3 - trunc(1*0.5/0.25 + 0.5) = -5,
    // multiplier 0.5 / (4 * 0.25) = 0.5: sum 11 * 0.5 = 5.5 -> 6, + bias = 1 (real 1.0).
    let mut m = ModelBuilder::new();
    let x = m.q("x", &[1, 2, 2, 1], TensorType::INT8, 0.5, 1);
    let ax = m.const_i32("axes", &[2], &[1, 2]);
    let y = m.q("y", &[1, 1, 1, 1], TensorType::INT8, 0.25, -3);
    m.op(B::MEAN, &[x, ax], &[y], opts(27, vec![F::Bool(4, true)]));
    let bytes = m.finish(&[x], &[y]);
    assert_eq!(run_i8(&bytes, &[&[1, 2, 3, 5]]), vec![1]);
    // The general path on the same data (keep_dims false): (11 - 4) * 0.5 / 4 / 0.25 = 3.5 -> 4
    // (ties upwards), -3 -> 1.
    let mut m = ModelBuilder::new();
    let x = m.q("x", &[1, 2, 2, 1], TensorType::INT8, 0.5, 1);
    let ax = m.const_i32("axes", &[2], &[1, 2]);
    let y = m.q("y", &[1, 1], TensorType::INT8, 0.25, -3);
    m.op(B::MEAN, &[x, ax], &[y], opts(27, vec![F::Bool(4, false)]));
    let bytes = m.finish(&[x], &[y]);
    assert_eq!(run_i8(&bytes, &[&[1, 2, 3, 5]]), vec![1]);
}

#[test]
fn softmax_int8_hand_computed() {
    // Two equal logits: p = 0.5 -> 128 / 256 -> q = 128 - 128 = 0; a much smaller third one.
    let mut m = ModelBuilder::new();
    let x = m.q("x", &[3], TensorType::INT8, 0.1, 0);
    let y = m.q("y", &[3], TensorType::INT8, 1.0 / 256.0, -128);
    m.op(B::SOFTMAX, &[x], &[y], opts(9, vec![F::F32(4, 1.0)]));
    let bytes = m.finish(&[x], &[y]);
    // exp(-12.7) * 128 ~ 0.0004 -> rounds to 0 -> -128.
    assert_eq!(run_i8(&bytes, &[&[100, 100, -27]]), vec![0, 0, -128]);
}

#[test]
fn maximum_minimum_int8_broadcast_match_float() {
    let mut r = Rng(131);
    let (sa, sb) = ([2i32, 3, 4], [3, 1]);
    let a = r.i8s(24);
    let b = r.i8s(3);
    let q = (0.05f32, -3i64);
    let (af, bf) = (deq(&a, q.0, q.1), deq(&b, q.0, q.1));
    for code in [B::MAXIMUM, B::MINIMUM] {
        let build = |qq: bool, out: (f32, i64)| {
            let mut m = ModelBuilder::new();
            let x = act(&mut m, qq, "a", &sa, q);
            let y = act(&mut m, qq, "b", &sb, q);
            let z = act(&mut m, qq, "z", &sa, out);
            m.op(code, &[x, y], &[z], None);
            m.finish(&[x, y], &[z])
        };
        let want = run_f32(&build(false, q), &[&af, &bf]);
        let got = run_i8(&build(true, q), &[&a, &b]);
        check(&format!("{code:?}"), &got, q.0, q.1, &want, 0.0);
        // Different output parameters would need a requantization TFLite does not do.
        expect_err(&build(true, (0.1, -3)), "same quantization");
    }
}

fn reduce_i8_case(code: B, shape: &[i32], axes: &[i32], keep: bool, seed: u64) {
    let mut r = Rng(seed);
    let n: i32 = shape.iter().product();
    let x = r.i8s(n as usize);
    let q = (0.05f32, 9i64);
    let xf = deq(&x, q.0, q.1);
    let rank = shape.len() as i32;
    let mut oshape = Vec::new();
    for (d, &v) in shape.iter().enumerate() {
        if axes.iter().any(|&a| (a + rank) % rank == d as i32) {
            if keep {
                oshape.push(1);
            }
        } else {
            oshape.push(v);
        }
    }
    let build = |qq: bool, out: (f32, i64)| {
        let mut m = ModelBuilder::new();
        let a = act(&mut m, qq, "x", shape, q);
        let ax = m.const_i32("axes", &[axes.len() as i32], axes);
        let y = act(&mut m, qq, "y", &oshape, out);
        m.op(code, &[a, ax], &[y], opts(27, vec![F::Bool(4, keep)]));
        m.finish(&[a], &[y])
    };
    let want = run_f32(&build(false, (0.0, 0)), &[&xf]);
    if code == B::SUM {
        let (lo, hi) = range(&want);
        let out = qparams(lo, hi);
        let got = run_i8(&build(true, out), &[&x]);
        check("sum", &got, out.0, out.1, &want, 0.76);
    } else {
        let got = run_i8(&build(true, q), &[&x]);
        check(&format!("{code:?}"), &got, q.0, q.1, &want, 0.0);
        expect_err(
            &build(true, (0.06, 9)),
            "same input and output quantization",
        );
    }
}

#[test]
fn reduce_max_min_sum_int8_match_float() {
    for code in [B::REDUCE_MAX, B::REDUCE_MIN, B::SUM] {
        reduce_i8_case(code, &[2, 3, 4, 5], &[1, 3], false, 141);
        reduce_i8_case(code, &[1, 5, 4, 6], &[1, 2], true, 142);
        reduce_i8_case(code, &[3, 7], &[-1], true, 143);
        reduce_i8_case(code, &[4, 6], &[0, 1], false, 144);
    }
}

/// LiteRT's builtin int8 SUM rounds in f32 and clamps: 100 + 100 with equal scales gives 200,
/// stored as 127 (its reference kernel wraps to -56, and misreads int8 data as uint8); 1.5
/// rounds half away from zero.
#[test]
fn sum_int8_hand_computed() {
    let mut m = ModelBuilder::new();
    let x = m.q("x", &[3, 2], TensorType::INT8, 0.5, 0);
    let ax = m.const_i32("axes", &[1], &[1]);
    let y = m.q("y", &[3], TensorType::INT8, 0.5, 0);
    m.op(B::SUM, &[x, ax], &[y], opts(27, vec![F::Bool(4, false)]));
    let bytes = m.finish(&[x], &[y]);
    assert_eq!(
        run_i8(&bytes, &[&[100, 100, -3, 1, 2, 1]]),
        vec![127, -2, 3]
    );
    let mut m = ModelBuilder::new();
    let x = m.q("x", &[3, 2], TensorType::INT8, 0.5, 0);
    let ax = m.const_i32("axes", &[1], &[1]);
    let y = m.q("y", &[3], TensorType::INT8, 1.0, 0);
    m.op(B::SUM, &[x, ax], &[y], opts(27, vec![F::Bool(4, false)]));
    let bytes = m.finish(&[x], &[y]);
    // (1 + 2) * 0.5 = 1.5 -> 2; (-1 - 2) * 0.5 = -1.5 -> -2.
    assert_eq!(run_i8(&bytes, &[&[1, 2, -1, -2, 0, 0]]), vec![2, -2, 0]);
}
