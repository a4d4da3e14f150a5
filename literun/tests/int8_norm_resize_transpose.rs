//! Int8 SQUARED_DIFFERENCE, RSQRT and the LayerNorm chain they form, RESIZE and TRANSPOSE_CONV
//! against the float kernels on the dequantized values (the bounds of `int8_kernels.rs`), with
//! hand-computed cases and the parameters literun refuses.
mod common;

use common::int8::*;
use common::{opts, ModelBuilder, F};
use literun::schema::{self as s, BuiltinOperator as B, TensorType};
use literun::{AlignedBytes, Interpreter, Model};

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
