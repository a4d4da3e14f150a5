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

use common::{opts, ModelBuilder, F};
use literun::schema::{self as s, BuiltinOperator as B, TensorType};
use literun::{AlignedBytes, Interpreter, Model};

struct Rng(u64);
impl Rng {
    fn f(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn i8s(&mut self, n: usize) -> Vec<i8> {
        (0..n).map(|_| (self.f() * 127.9).floor() as i8).collect()
    }
    fn f32s(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.f() * scale).collect()
    }
}

/// Asymmetric int8 parameters covering `[lo, hi]` (and 0).
fn qparams(lo: f32, hi: f32) -> (f32, i64) {
    let (lo, hi) = (lo.min(0.0), hi.max(0.0));
    let scale = ((hi - lo) / 255.0).max(1e-6);
    let zp = (-128.0 - lo / scale).round().clamp(-128.0, 127.0) as i64;
    (scale, zp)
}

fn deq(q: &[i8], scale: f32, zp: i64) -> Vec<f32> {
    q.iter().map(|&v| scale * (v as i64 - zp) as f32).collect()
}

fn range(v: &[f32]) -> (f32, f32) {
    v.iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        })
}

/// With `LITERUN_DUMP_DIR` set, every model run here is written there (`<n>.tflite` and
/// `<n>.json` with the inputs and literun's output) for `tests/litert_compare.py`, which runs
/// the same files with LiteRT and reports the differences.
fn dump<T: std::fmt::Display>(bytes: &[u8], dtype: &str, inputs: &[Vec<String>], out: &[T]) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let Ok(dir) = std::env::var("LITERUN_DUMP_DIR") else {
        return;
    };
    let name = std::thread::current()
        .name()
        .unwrap_or("t")
        .replace("::", "_");
    let n = N.fetch_add(1, Ordering::SeqCst);
    let base = format!("{dir}/{name}_{n}");
    std::fs::write(format!("{base}.tflite"), bytes).unwrap();
    let ins: Vec<String> = inputs
        .iter()
        .map(|v| format!("[{}]", v.join(",")))
        .collect();
    let outs: Vec<String> = out.iter().map(|v| v.to_string()).collect();
    std::fs::write(
        format!("{base}.json"),
        format!(
            "{{\"dtype\":\"{dtype}\",\"inputs\":[{}],\"output\":[{}]}}",
            ins.join(","),
            outs.join(",")
        ),
    )
    .unwrap();
}

fn run_f32(bytes: &AlignedBytes, inputs: &[&[f32]]) -> Vec<f32> {
    let model = Model::from_bytes(bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    for (k, x) in inputs.iter().enumerate() {
        it.input_f32_mut(k).unwrap().copy_from_slice(x);
    }
    it.invoke().unwrap();
    let out = it.output(0).unwrap().as_f32().unwrap().to_vec();
    // JSON (as Python reads it) spells the non-finite values Infinity and NaN.
    let f = |x: &f32| {
        if x.is_nan() {
            "NaN".to_string()
        } else if x.is_infinite() {
            if *x > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
        } else {
            format!("{x:e}")
        }
    };
    let ins: Vec<Vec<String>> = inputs.iter().map(|v| v.iter().map(f).collect()).collect();
    let outs: Vec<String> = out.iter().map(f).collect();
    dump(bytes, "float32", &ins, &outs);
    out
}

fn run_i8(bytes: &AlignedBytes, inputs: &[&[i8]]) -> Vec<i8> {
    let model = Model::from_bytes(bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    for (k, x) in inputs.iter().enumerate() {
        it.input_mut(k)
            .unwrap()
            .as_i8_mut()
            .unwrap()
            .copy_from_slice(x);
    }
    it.invoke().unwrap();
    let out = it.output(0).unwrap().as_i8().unwrap().to_vec();
    let ins: Vec<Vec<String>> = inputs
        .iter()
        .map(|v| v.iter().map(|x| x.to_string()).collect())
        .collect();
    dump(bytes, "int8", &ins, &out);
    out
}

/// Asserts the dequantized int8 output is within `steps` output steps of the float output
/// (clamped to the representable range).
fn check(name: &str, got: &[i8], out_scale: f32, out_zp: i64, want: &[f32], steps: f32) {
    assert_eq!(got.len(), want.len());
    let lo = out_scale * (-128 - out_zp) as f32;
    let hi = out_scale * (127 - out_zp) as f32;
    let mut worst = 0.0f32;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let g = out_scale * (g as i64 - out_zp) as f32;
        let d = (g - w.clamp(lo, hi)).abs() / out_scale;
        worst = worst.max(d);
        assert!(
            d <= steps + 1e-3,
            "{name}: element {i}: int8 gives {g}, float {w} ({d} steps, scale {out_scale})"
        );
    }
    // The comparison must be able to fail: a wrong result is many steps off somewhere.
    assert!(worst.is_finite());
}

/// A tensor that is float or int8 depending on the model being built.
fn act(m: &mut ModelBuilder, q: bool, name: &str, shape: &[i32], p: (f32, i64)) -> i32 {
    if q {
        m.q(name, shape, TensorType::INT8, p.0, p.1)
    } else {
        m.f32(name, shape)
    }
}

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

/// Timing of hybrid against float kernels (run with `--release -- --ignored --nocapture`);
/// prints, never asserts on time.
#[test]
#[ignore]
fn hybrid_speed() {
    let mut r = Rng(99);
    let (is, fs) = ([1i32, 28, 28, 64], [64i32, 3, 3, 64]);
    let nf = (64 * 3 * 3 * 64) as usize;
    let wq = r.i8s(nf);
    let wf: Vec<f32> = wq.iter().map(|&v| v as f32 * 0.01).collect();
    let x = r.f32s(28 * 28 * 64, 1.0);
    use s::Conv2DOptions as O;
    let o = vec![
        F::I8(O::VT_PADDING, 0),
        F::I32(O::VT_STRIDE_W, 1),
        F::I32(O::VT_STRIDE_H, 1),
    ];
    for hybrid in [false, true] {
        let mut m = ModelBuilder::new();
        let xi = m.f32("x", &is);
        let w = if hybrid {
            let w = m.const_i8("w", &fs, &wq);
            m.quant(w, &[0.01], &[0], 0);
            w
        } else {
            m.const_f32("w", &fs, &wf)
        };
        let y = m.f32("y", &[1, 28, 28, 64]);
        m.op(B::CONV_2D, &[xi, w], &[y], opts(1, o.clone()));
        let bytes = m.finish(&[xi], &[y]);
        let model = Model::from_bytes(&bytes).unwrap();
        let mut it = Interpreter::new(&model).unwrap();
        it.input_f32_mut(0).unwrap().copy_from_slice(&x);
        it.invoke().unwrap();
        let t = std::time::Instant::now();
        for _ in 0..5 {
            it.invoke().unwrap();
        }
        println!("conv hybrid={hybrid}: {:?} per invoke", t.elapsed() / 5);
    }
}

/// Interpreter creation must fail (not panic) with a message containing `needle`.
fn expect_err(bytes: &AlignedBytes, needle: &str) {
    let model = Model::from_bytes(bytes).unwrap();
    let e = Interpreter::new(&model).err().expect("accepted");
    assert!(e.to_string().contains(needle), "{e}");
}

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

fn squared_difference_case(sa: &[i32], sb: &[i32], qa: (f32, i64), qb: (f32, i64), seed: u64) {
    let mut r = Rng(seed);
    let a = r.i8s(sa.iter().product::<i32>() as usize);
    let b = r.i8s(sb.iter().product::<i32>() as usize);
    let (af, bf) = (deq(&a, qa.0, qa.1), deq(&b, qb.0, qb.1));
    let so: Vec<i32> = {
        let n = sa.len().max(sb.len());
        (0..n)
            .map(|i| {
                let da = if i + sa.len() >= n {
                    sa[i + sa.len() - n]
                } else {
                    1
                };
                let db = if i + sb.len() >= n {
                    sb[i + sb.len() - n]
                } else {
                    1
                };
                da.max(db)
            })
            .collect()
    };
    let build = |q: bool, out: (f32, i64)| {
        let mut m = ModelBuilder::new();
        let x = act(&mut m, q, "a", sa, qa);
        let y = act(&mut m, q, "b", sb, qb);
        let z = act(&mut m, q, "z", &so, out);
        m.op(B::SQUARED_DIFFERENCE, &[x, y], &[z], None);
        m.finish(&[x, y], &[z])
    };
    let want = run_f32(&build(false, (0.0, 0)), &[&af, &bf]);
    let (lo, hi) = range(&want);
    let out = qparams(lo, hi * 0.9);
    let got = run_i8(&build(true, out), &[&a, &b]);
    // Each input is rescaled to units of u = 2 max(s_a, s_b) / 128 (half a unit of error each,
    // one unit on the difference d), so d^2 is off by up to (2|d| + 1) u^2; then the output
    // rounds twice (0.76 steps).
    let u = 2.0 * qa.0.max(qb.0) / 128.0;
    let max_d = want.iter().fold(0.0f32, |m, &v| m.max(v.sqrt())) / u + 1.0;
    let steps = 0.76 + (2.0 * max_d + 1.0) * u * u / out.0;
    check("squared_difference", &got, out.0, out.1, &want, steps);
}

#[test]
fn squared_difference_int8_matches_float() {
    squared_difference_case(&[2, 3, 4], &[2, 3, 4], (0.02, 3), (0.03, -5), 81);
    squared_difference_case(&[2, 3, 4], &[3, 1], (0.05, -128), (0.01, 10), 82);
    squared_difference_case(&[4], &[2, 1, 3, 4], (0.04, 0), (0.04, 0), 83);
}

/// The fast kernels' SQUARED_DIFFERENCE (a table of all input pairs) gives the portable
/// kernel's value for every pair, plain and broadcast.
#[test]
fn squared_difference_int8_fast_matches_portable_on_every_pair() {
    use literun::{Isa, Options};
    let run = |bytes: &AlignedBytes, isa: Isa, a: &[i8], b: &[i8]| -> Vec<i8> {
        let model = Model::from_bytes(bytes).unwrap();
        let mut it = Interpreter::with_options(&model, Options::with_isa(isa)).unwrap();
        it.input_mut(0)
            .unwrap()
            .as_i8_mut()
            .unwrap()
            .copy_from_slice(a);
        it.input_mut(1)
            .unwrap()
            .as_i8_mut()
            .unwrap()
            .copy_from_slice(b);
        it.invoke().unwrap();
        it.output(0).unwrap().as_i8().unwrap().to_vec()
    };
    for (qa, qb, qo) in [
        ((0.02, 3), (0.03, -5), (0.01, -128)),
        ((0.05, -128), (0.01, 127), (0.3, 20)),
    ] {
        // Plain: row x of `a` against every y of `b`; broadcast: [256, 1] against [256].
        for (sa, sb, so) in [
            (vec![65536], vec![65536], vec![65536]),
            (vec![256, 1], vec![256], vec![256, 256]),
        ] {
            let mut m = ModelBuilder::new();
            let x = m.q("a", &sa, TensorType::INT8, qa.0, qa.1);
            let y = m.q("b", &sb, TensorType::INT8, qb.0, qb.1);
            let z = m.q("z", &so, TensorType::INT8, qo.0, qo.1);
            m.op(B::SQUARED_DIFFERENCE, &[x, y], &[z], None);
            let bytes = m.finish(&[x, y], &[z]);
            let (a, b): (Vec<i8>, Vec<i8>) = if sa[0] == 65536 {
                (0..65536).map(|i: i32| ((i >> 8) as i8, i as i8)).unzip()
            } else {
                (
                    (0..256).map(|i: i32| i as i8).collect(),
                    (0..256).map(|i: i32| i as i8).collect(),
                )
            };
            let want = run(&bytes, Isa::Portable, &a, &b);
            let got = run(&bytes, Isa::detect(), &a, &b);
            assert_eq!(got, want, "{qa:?} {qb:?} {qo:?} {sa:?}");
            assert!(want.iter().any(|&v| v != want[0]));
        }
    }
}

#[test]
fn squared_difference_int8_hand_computed_and_bad_scales() {
    // Same scales 0.5 (u = 1/128): d = 128 * (x - y) * 0.5 exactly; out = d^2 / 2^14 / s_out.
    // (3 - 1) * 0.5 = 1 -> 1; (-4 - 0) * 0.5 = -2 -> 4; 0.5^2 = 0.25 -> 0.25/0.5 = 0.5 -> 1
    // (ties away from zero); out zp -100.
    let mut m = ModelBuilder::new();
    let x = m.q("a", &[3], TensorType::INT8, 0.5, 0);
    let y = m.q("b", &[3], TensorType::INT8, 0.5, 0);
    let z = m.q("z", &[3], TensorType::INT8, 0.5, -100);
    m.op(B::SQUARED_DIFFERENCE, &[x, y], &[z], None);
    let bytes = m.finish(&[x, y], &[z]);
    assert_eq!(
        run_i8(&bytes, &[&[3, -4, 1], &[1, 0, 0]]),
        vec![-98, -92, -99]
    );
    // An output scale too small for TFLite's output multiplier (< 1 required).
    let mut m = ModelBuilder::new();
    let x = m.q("a", &[3], TensorType::INT8, 1.0, 0);
    let y = m.q("b", &[3], TensorType::INT8, 1.0, 0);
    let z = m.q("z", &[3], TensorType::INT8, 1e-4, 0);
    m.op(B::SQUARED_DIFFERENCE, &[x, y], &[z], None);
    expect_err(&m.finish(&[x, y], &[z]), "too small");
}

#[test]
fn rsqrt_int8_matches_float() {
    // All 256 stored values (zero point -128: every input >= 0).
    let x: Vec<i8> = (-128..=127).map(|v| v as i8).collect();
    for (q, out) in [
        ((0.06f32, -128i64), (4.1f32 / 255.0, -128i64)),
        ((0.3, -128), (2.0 / 255.0, -100)),
        ((0.002, -128), (23.0 / 255.0, -128)),
    ] {
        let xf = deq(&x, q.0, q.1);
        let build = |qq: bool| {
            let mut m = ModelBuilder::new();
            let a = act(&mut m, qq, "x", &[256], q);
            let y = act(&mut m, qq, "y", &[256], out);
            m.op(B::RSQRT, &[a], &[y], None);
            m.finish(&[a], &[y])
        };
        let want = run_f32(&build(false), &[&xf]);
        let got = run_i8(&build(true), &[&x]);
        // rsqrt(0) = inf: TFLite gives the largest value.
        assert_eq!(got[0], 127);
        check("rsqrt", &got, out.0, out.1, &want, 0.76);
    }
}

#[test]
fn rsqrt_int8_hand_computed_and_negative_input() {
    // Input scale 0.25, output scale 1/64: stored 4 (1.0) -> 64, 16 (4.0) -> 32, 9 (2.25) ->
    // 42.67 -> 43, 1 (0.25 -> 2.0 -> 128) saturates, 0 -> 127; output zp 0.
    let mut m = ModelBuilder::new();
    let x = m.q("x", &[5], TensorType::INT8, 0.25, 0);
    let y = m.q("y", &[5], TensorType::INT8, 1.0 / 64.0, 0);
    m.op(B::RSQRT, &[x], &[y], None);
    let bytes = m.finish(&[x], &[y]);
    assert_eq!(
        run_i8(&bytes, &[&[4, 16, 9, 1, 0]]),
        vec![64, 32, 43, 127, 127]
    );
    // A negative real input fails the invocation (as in TFLite), it does not panic.
    let model = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    it.input_mut(0)
        .unwrap()
        .as_i8_mut()
        .unwrap()
        .copy_from_slice(&[4, 4, -1, 4, 4]);
    let e = it.invoke().expect_err("negative input accepted");
    assert!(e.to_string().contains("negative"), "{e}");
    // uint8 RSQRT has no TFLite kernel.
    let mut m = ModelBuilder::new();
    let x = m.q("x", &[5], TensorType::UINT8, 0.25, 0);
    let y = m.q("y", &[5], TensorType::UINT8, 1.0 / 64.0, 0);
    m.op(B::RSQRT, &[x], &[y], None);
    expect_err(&m.finish(&[x], &[y]), "not supported");
}

/// A LayerNorm as the converter lowers it (MEAN, SQUARED_DIFFERENCE, MEAN, ADD eps, RSQRT, SUB,
/// MUL, then gamma MUL and beta ADD) entirely in int8, with every activation's parameters
/// calibrated on the float model's own values.
#[test]
fn layer_norm_int8_chain_matches_float() {
    let mut r = Rng(91);
    let (shape, d) = ([2i32, 3, 8], 8usize);
    let n = 48usize;
    // Rows with different means and spreads.
    let xf0: Vec<f32> = (0..n)
        .map(|i| r.f() * (0.5 + (i / d) as f32 * 0.4) + (i / d) as f32 * 0.3 - 0.7)
        .collect();
    let qx = qparams(range(&xf0).0, range(&xf0).1);
    let xq: Vec<i8> = xf0
        .iter()
        .map(|&v| ((v / qx.0).round() as i64 + qx.1).clamp(-128, 127) as i8)
        .collect();
    let xf = deq(&xq, qx.0, qx.1);
    let gamma: Vec<f32> = (0..d).map(|i| 0.5 + 0.1 * i as f32).collect();
    let beta: Vec<f32> = (0..d).map(|i| -0.2 + 0.05 * i as f32).collect();
    let eps = 1e-3f32;
    // Constants in int8: symmetric-ish parameters with their own scales.
    let (gs, bs, es) = (1.3f32 / 127.0, 0.2f32 / 127.0, eps / 100.0);
    let gq: Vec<i8> = gamma.iter().map(|&v| (v / gs).round() as i8).collect();
    let bq: Vec<i8> = beta.iter().map(|&v| (v / bs).round() as i8).collect();
    let (gf, bf) = (deq(&gq, gs, 0), deq(&bq, bs, 0));
    let eq = -28i8; // (-28 + 128) * es = eps
                    // Tensor order: x, mean, sd, var, ve, r, c, y0, y1, y (the float model's indices match).
    let names = ["x", "mean", "sd", "var", "ve", "r", "c", "y0", "y1", "y"];
    let build = |q: Option<&[(f32, i64)]>| {
        let mut m = ModelBuilder::new();
        let mut t = Vec::new();
        let row = [2i32, 3, 1];
        for (k, name) in names.iter().enumerate() {
            let s: &[i32] = if matches!(k, 1 | 3 | 4 | 5) {
                &row
            } else {
                &shape
            };
            t.push(match q {
                Some(p) => m.q(name, s, TensorType::INT8, p[k].0, p[k].1),
                None => m.f32(name, s),
            });
        }
        let ax = m.const_i32("axes", &[1], &[-1]);
        let (e, g, b) = if q.is_some() {
            let e = m.const_i8("eps", &[1], &[eq]);
            m.quant(e, &[es], &[-128], 0);
            let g = m.const_i8("gamma", &[d as i32], &gq);
            m.quant(g, &[gs], &[0], 0);
            let b = m.const_i8("beta", &[d as i32], &bq);
            m.quant(b, &[bs], &[0], 0);
            (e, g, b)
        } else {
            (
                m.const_f32("eps", &[1], &[(eq as f32 + 128.0) * es]),
                m.const_f32("gamma", &[d as i32], &gf),
                m.const_f32("beta", &[d as i32], &bf),
            )
        };
        let keep = || opts(27, vec![F::Bool(4, true)]);
        let none = |tag| opts(tag, vec![F::I8(4, 0)]);
        m.op(B::MEAN, &[t[0], ax], &[t[1]], keep());
        m.op(B::SQUARED_DIFFERENCE, &[t[0], t[1]], &[t[2]], None);
        m.op(B::MEAN, &[t[2], ax], &[t[3]], keep());
        m.op(B::ADD, &[t[3], e], &[t[4]], none(11));
        m.op(B::RSQRT, &[t[4]], &[t[5]], None);
        m.op(B::SUB, &[t[0], t[1]], &[t[6]], none(28));
        m.op(B::MUL, &[t[6], t[5]], &[t[7]], none(21));
        m.op(B::MUL, &[t[7], g], &[t[8]], none(21));
        m.op(B::ADD, &[t[8], b], &[t[9]], none(11));
        m.finish(&[t[0]], &[t[9]])
    };
    // Calibrate every activation on the float model.
    let fbytes = build(None);
    let model = Model::from_bytes(&fbytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    it.input_f32_mut(0).unwrap().copy_from_slice(&xf);
    let mut ranges = vec![range(&xf); names.len()];
    it.invoke_observed(&mut |op, _, v| {
        ranges[op + 1] = range(v.as_f32().unwrap());
    })
    .unwrap();
    let mut params: Vec<(f32, i64)> = ranges.iter().map(|&(lo, hi)| qparams(lo, hi)).collect();
    params[0] = qx;
    let want = run_f32(&fbytes, &[&xf]);
    let got = run_i8(&build(Some(&params)), &[&xq]);
    // End to end through nine requantizations: a loose bound (worst 3.7 steps, mean 0.83 here;
    // the exact check is LiteRT's).
    let (os_, oz) = params[9];
    check("layer_norm", &got, os_, oz, &want, 5.0);
    let mean_err: f32 = got
        .iter()
        .zip(&want)
        .map(|(&g, &w)| (os_ * (g as i64 - oz) as f32 - w).abs())
        .sum::<f32>()
        / n as f32;
    assert!(mean_err < 1.5 * os_, "mean error {mean_err} (step {os_})");
}

fn resize_case(bilinear: bool, is: [i32; 4], ohw: [i32; 2], align: bool, half: bool, seed: u64) {
    let mut r = Rng(seed);
    let x = r.i8s(is.iter().product::<i32>() as usize);
    let q = (0.03f32, -4i64);
    let xf = deq(&x, q.0, q.1);
    let os = [is[0], ohw[0], ohw[1], is[3]];
    let (code, tag) = if bilinear {
        (B::RESIZE_BILINEAR, 15u8)
    } else {
        (B::RESIZE_NEAREST_NEIGHBOR, 74u8)
    };
    let fields = if bilinear {
        use s::ResizeBilinearOptions as O;
        vec![
            F::Bool(O::VT_ALIGN_CORNERS, align),
            F::Bool(O::VT_HALF_PIXEL_CENTERS, half),
        ]
    } else {
        use s::ResizeNearestNeighborOptions as O;
        vec![
            F::Bool(O::VT_ALIGN_CORNERS, align),
            F::Bool(O::VT_HALF_PIXEL_CENTERS, half),
        ]
    };
    let build = |qq: bool| {
        let mut m = ModelBuilder::new();
        let a = act(&mut m, qq, "x", &is, q);
        let size = m.const_i32("size", &[2], &ohw);
        let y = act(&mut m, qq, "y", &os, q);
        m.op(code, &[a, size], &[y], opts(tag, fields.clone()));
        m.finish(&[a], &[y])
    };
    let want = run_f32(&build(false), &[&xf]);
    let got = run_i8(&build(true), &[&x]);
    // Nearest copies values. Bilinear rounds once (half a step), but its positions and weights
    // are in 1/1024 pixels: an extra error of up to |scale_10 - 1024 scale| * out / 1024 pixels
    // times the largest neighbour difference (255 steps), plus the weight truncation.
    let steps = if bilinear {
        let pos_err = |i: i32, o: i32| {
            let (a, b) = if align && o > 1 {
                (i - 1, o - 1)
            } else {
                (i, o)
            };
            let s10 = ((1024 * a + b / 2) / b) as f32;
            (s10 - 1024.0 * a as f32 / b as f32).abs() * o as f32 / 1024.0
        };
        0.5 + 255.0 * (pos_err(is[1], ohw[0]) + pos_err(is[2], ohw[1]))
    } else {
        0.0
    };
    check(&format!("{code:?}"), &got, q.0, q.1, &want, steps);
}

#[test]
fn resize_int8_matches_float() {
    for bilinear in [true, false] {
        resize_case(bilinear, [1, 3, 4, 2], [6, 8], false, false, 101);
        resize_case(bilinear, [2, 4, 3, 3], [7, 5], true, false, 102);
        resize_case(bilinear, [1, 5, 5, 2], [8, 3], false, true, 103);
        resize_case(bilinear, [1, 6, 7, 1], [3, 4], false, false, 104);
    }
    resize_case(false, [1, 3, 3, 2], [7, 5], true, true, 105);
}

#[test]
fn resize_bilinear_int8_hand_computed_and_bad_params() {
    // [0, 3] and [0, -3] doubled in width: scale 1/2, x = 1 is 1.5 / -1.5 -> 2 / -2 (ties away
    // from zero); the last column repeats the edge.
    let mut m = ModelBuilder::new();
    let x = m.q("x", &[1, 1, 2, 2], TensorType::INT8, 0.1, 0);
    let size = m.const_i32("size", &[2], &[1, 4]);
    let y = m.q("y", &[1, 1, 4, 2], TensorType::INT8, 0.1, 0);
    m.op(B::RESIZE_BILINEAR, &[x, size], &[y], opts(15, vec![]));
    let bytes = m.finish(&[x], &[y]);
    assert_eq!(
        run_i8(&bytes, &[&[0, 0, 3, -3]]),
        vec![0, 0, 2, -2, 3, -3, 3, -3]
    );
    // Different output quantization: TFLite copies stored values, so this is refused.
    let mut m = ModelBuilder::new();
    let x = m.q("x", &[1, 1, 2, 2], TensorType::INT8, 0.1, 0);
    let size = m.const_i32("size", &[2], &[1, 4]);
    let y = m.q("y", &[1, 1, 4, 2], TensorType::INT8, 0.2, 0);
    m.op(B::RESIZE_NEAREST_NEIGHBOR, &[x, size], &[y], None);
    expect_err(&m.finish(&[x], &[y]), "same input and output quantization");
    // align_corners with half_pixel_centers (TFLite's bilinear Prepare refuses it).
    let mut m = ModelBuilder::new();
    let x = m.q("x", &[1, 1, 2, 2], TensorType::INT8, 0.1, 0);
    let size = m.const_i32("size", &[2], &[1, 4]);
    let y = m.q("y", &[1, 1, 4, 2], TensorType::INT8, 0.1, 0);
    use s::ResizeBilinearOptions as O;
    let o = vec![
        F::Bool(O::VT_ALIGN_CORNERS, true),
        F::Bool(O::VT_HALF_PIXEL_CENTERS, true),
    ];
    m.op(B::RESIZE_BILINEAR, &[x, size], &[y], opts(15, o));
    expect_err(&m.finish(&[x], &[y]), "cannot both");
}

#[allow(clippy::too_many_arguments)]
fn transpose_conv_case(
    is: [i32; 4],
    fs: [i32; 4],
    os: [i32; 4],
    same: bool,
    stride: i32,
    act_code: i8,
    per_channel: bool,
    seed: u64,
) {
    let mut r = Rng(seed);
    let oc = fs[0] as usize;
    let nf: usize = fs.iter().product::<i32>() as usize;
    let xq = r.i8s(is.iter().product::<i32>() as usize);
    let (xs, xz) = (0.04f32, -6i64);
    let wq = r.i8s(nf);
    let wscales: Vec<f32> = if per_channel {
        (0..oc).map(|i| 0.003 + 0.002 * i as f32).collect()
    } else {
        vec![0.004]
    };
    let ws = |o: usize| wscales[if per_channel { o } else { 0 }];
    let wf: Vec<f32> = wq
        .iter()
        .enumerate()
        .map(|(i, &v)| v as f32 * ws(i / (nf / oc)))
        .collect();
    let bq: Vec<i32> = (0..oc).map(|_| (r.f() * 2000.0) as i32).collect();
    let bf: Vec<f32> = bq
        .iter()
        .enumerate()
        .map(|(o, &v)| (v as f64 * xs as f64 * ws(o) as f64) as f32)
        .collect();
    let xf = deq(&xq, xs, xz);
    use s::TransposeConvOptions as O;
    let o = vec![
        F::I8(O::VT_PADDING, if same { 0 } else { 1 }),
        F::I32(O::VT_STRIDE_W, stride),
        F::I32(O::VT_STRIDE_H, stride),
        F::I8(O::VT_FUSED_ACTIVATION_FUNCTION, act_code),
    ];
    let build = |q: bool, out: (f32, i64)| {
        let mut m = ModelBuilder::new();
        let shape = m.const_i32("shape", &[4], &os);
        let x = act(&mut m, q, "x", &is, (xs, xz));
        let (w, b) = if q {
            let w = m.const_i8("w", &fs, &wq);
            m.quant(w, &wscales, &vec![0; wscales.len()], 0);
            let b = m.const_i32("b", &[oc as i32], &bq);
            let bs: Vec<f32> = (0..oc).map(|o| xs * ws(o)).collect();
            m.quant(b, &bs, &vec![0; oc], 0);
            (w, b)
        } else {
            (
                m.const_f32("w", &fs, &wf),
                m.const_f32("b", &[oc as i32], &bf),
            )
        };
        let y = act(&mut m, q, "y", &os, out);
        m.op(
            B::TRANSPOSE_CONV,
            &[shape, w, x, b],
            &[y],
            opts(49, o.clone()),
        );
        m.finish(&[x], &[y])
    };
    let want = run_f32(&build(false, (0.0, 0)), &[&xf]);
    let (lo, hi) = range(&want);
    let (os_, oz) = qparams(lo, hi);
    let got = run_i8(&build(true, (os_, oz)), &[&xq]);
    check("transpose_conv", &got, os_, oz, &want, 0.76);
}

#[test]
fn transpose_conv_int8_matches_float() {
    transpose_conv_case(
        [1, 3, 4, 3],
        [4, 3, 3, 3],
        [1, 6, 8, 4],
        true,
        2,
        0,
        true,
        111,
    );
    transpose_conv_case(
        [2, 4, 3, 2],
        [3, 2, 3, 2],
        [2, 5, 5, 3],
        false,
        1,
        1,
        true,
        112,
    );
    transpose_conv_case(
        [1, 3, 3, 5],
        [2, 4, 4, 5],
        [1, 8, 8, 2],
        false,
        2,
        3,
        false,
        113,
    );
    transpose_conv_case(
        [1, 5, 5, 4],
        [6, 3, 3, 4],
        [1, 15, 15, 6],
        true,
        3,
        0,
        true,
        114,
    );
}

#[test]
fn transpose_conv_int8_rounding_ties_and_bad_params() {
    // 1x1 filter, stride 1: out = (x - zp) * w * s_x * s_w / s_out with s_x s_w / s_out = 1/4:
    // (x - zp) * w in {10, -10, 6, -6, 2, -2} -> double rounding (ties away from zero) gives
    // 3, -3, 2, -2, 1, -1 (one rounding would give 3, -2, 2, -1, 1, 0).
    let build = |bias_zp: i64, out_t: TensorType| {
        let mut m = ModelBuilder::new();
        let shape = m.const_i32("shape", &[4], &[1, 1, 6, 1]);
        let x = m.q("x", &[1, 1, 6, 1], TensorType::INT8, 0.5, 3);
        let w = m.const_i8("w", &[1, 1, 1, 1], &[2]);
        m.quant(w, &[0.25], &[0], 0);
        let b = m.const_i32("b", &[1], &[0]);
        m.quant(b, &[0.125], &[bias_zp], 0);
        let y = m.q("y", &[1, 1, 6, 1], out_t, 0.5, 0);
        use s::TransposeConvOptions as O;
        let o = vec![
            F::I8(O::VT_PADDING, 1),
            F::I32(O::VT_STRIDE_W, 1),
            F::I32(O::VT_STRIDE_H, 1),
        ];
        m.op(B::TRANSPOSE_CONV, &[shape, w, x, b], &[y], opts(49, o));
        m.finish(&[x], &[y])
    };
    // (x - 3) * 2 = 10, -10, 6, -6, 2, -2 -> x = 8, -2, 6, 0, 4, 2.
    let got = run_i8(&build(0, TensorType::INT8), &[&[8, -2, 6, 0, 4, 2]]);
    assert_eq!(got, vec![3, -3, 2, -2, 1, -1]);
    expect_err(&build(5, TensorType::INT8), "zero point 0");
    expect_err(&build(0, TensorType::FLOAT32), "expected INT8");
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
