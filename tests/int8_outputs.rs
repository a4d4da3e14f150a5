//! What full int8 does with a model's outputs: a score that stays float (computed in float from
//! its quantized input) is also compared with its threshold in float, so the decision is the
//! float model's for the score the file gives; a LayerNorm in int16 keeps its accuracy on inputs
//! whose statistics pass the calibration samples'.

mod common;

use common::noise;
use litecvt::convert::{convert_bytes, ConvertOptions};
use litecvt::import::builder::{ftensor, Attr, OnnxBuilder};
use litecvt::npy::{self, NpyArray, NpyData};
use litecvt::quantize::QuantizeMode;
use litecvt::runtime::run_lite;

/// score = Sigmoid(x · W), fire = score >= 0.302. In int8 the comparison would read the score
/// rounded to its int8 step and could fire for a score just under the threshold.
fn scored_model() -> Vec<u8> {
    let mut b = OnnxBuilder::new(13);
    b.input("x", &[1, 16]);
    b.init(ftensor("w", &[16, 32], noise(16 * 32, 3)))
        .init(ftensor("t", &[1], vec![0.302]))
        .node("MatMul", "dense", &["x", "w"], &["logit"], vec![])
        .node("Sigmoid", "sigmoid", &["logit"], &["score"], vec![])
        .node("GreaterOrEqual", "ge", &["score", "t"], &["fire"], vec![])
        .output("score")
        .output("fire");
    b.bytes()
}

#[test]
fn a_threshold_on_a_float_score_is_compared_in_float() {
    let dir = tempfile::tempdir().unwrap();
    for k in 0..16u32 {
        let v = noise(16, 100 + k).iter().map(|x| x * 4.0).collect();
        npy::write(
            &dir.path().join(format!("{k:03}.npy")),
            &NpyArray::f32(vec![1, 16], v),
        )
        .unwrap();
    }
    let opts = ConvertOptions {
        quantize: Some(QuantizeMode::Int8Full),
        calibration: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let c = convert_bytes(&scored_model(), "model.onnx", &opts).unwrap_or_else(|e| panic!("{e:#}"));
    let q = c.quantization.as_ref().expect("full int8");
    assert!(
        q.summary
            .float_nodes
            .iter()
            .any(|(n, _, why)| n == "ge" && why == "compares values that stay float"),
        "{:?}",
        q.summary.float_nodes
    );
    assert!(q.summary.quantized_nodes > 0, "the dense layer runs int8");
    // Every decision is the float comparison of the score the file gives.
    let (mut fired, mut held) = (0, 0);
    for k in 0..64u32 {
        let x = NpyArray::f32(
            vec![1, 16],
            noise(16, 500 + k).iter().map(|v| v * 4.0).collect(),
        );
        let out = run_lite(&c.bytes, "model", &[(None, x)]).expect("runs");
        let score = out[0].1.to_f32();
        let NpyData::Bool(fire) = &out[1].1.data else {
            panic!("fire is not bool: {:?}", out[1].1.shape)
        };
        for (s, f) in score.iter().zip(fire) {
            assert_eq!(*f, *s >= 0.302, "score {s}");
            if *f {
                fired += 1;
            } else {
                held += 1;
            }
        }
    }
    assert!(fired > 0 && held > 0, "{fired} fired, {held} held");
}

/// y = LayerNorm(x) over the last axis of [1, 8, 32], as PyTorch exports it (ReduceMean, Sub,
/// Pow, ReduceMean, Add, Sqrt, Div, Mul, Add).
fn layernorm_model() -> Vec<u8> {
    let mut b = OnnxBuilder::new(13);
    b.input("x", &[1, 8, 32]);
    let axes = || vec![("axes", Attr::Is(vec![-1]))];
    b.init(ftensor("two", &[], vec![2.0]))
        .init(ftensor("eps", &[], vec![1e-5]))
        .init(ftensor(
            "gamma",
            &[32],
            noise(32, 7).iter().map(|v| 1.0 + v).collect(),
        ))
        .init(ftensor("beta", &[32], noise(32, 8)))
        .node("ReduceMean", "mean", &["x"], &["m"], axes())
        .node("Sub", "center", &["x", "m"], &["c"], vec![])
        .node("Pow", "square", &["c", "two"], &["c2"], vec![])
        .node("ReduceMean", "var", &["c2"], &["v"], axes())
        .node("Add", "var_eps", &["v", "eps"], &["ve"], vec![])
        .node("Sqrt", "std", &["ve"], &["sd"], vec![])
        .node("Div", "normalize", &["c", "sd"], &["n"], vec![])
        .node("Mul", "scale", &["n", "gamma"], &["s"], vec![])
        .node("Add", "shift", &["s", "beta"], &["y"], vec![])
        .output("y");
    b.bytes()
}

fn snr_db(reference: &[f32], y: &[f32]) -> f64 {
    let signal: f64 = reference.iter().map(|&r| (r as f64).powi(2)).sum();
    let noise: f64 = reference
        .iter()
        .zip(y)
        .map(|(&r, &v)| (r as f64 - v as f64).powi(2))
        .sum();
    10.0 * (signal / noise).log10()
}

/// A row's variance scales the whole row: clipped at the calibration samples' largest (or its
/// reciprocal square root at their smallest), every value of a held-out row with a wider (or
/// narrower) spread is off by the same factor. The variance stays float and the row scale's
/// int16 range leaves room, so rows wider and narrower than every calibration row, whose values
/// lie within the calibrated range, keep the int16 LayerNorm's accuracy.
#[test]
fn an_int16_layernorm_holds_rows_wider_and_narrower_than_the_calibration_samples() {
    let dir = tempfile::tempdir().unwrap();
    // Calibration rows: uniform in [-2, 2] (variance about 1.3) with one value at +-3.
    for k in 0..16u32 {
        let mut v: Vec<f32> = noise(8 * 32, 100 + k).iter().map(|v| v * 4.0).collect();
        for (r, row) in v.chunks_mut(32).enumerate() {
            row[(r * 5 + k as usize) % 32] = if r % 2 == 0 { 3.0 } else { -3.0 };
        }
        let x = NpyArray::f32(vec![1, 8, 32], v);
        npy::write(&dir.path().join(format!("{k:03}.npy")), &x).unwrap();
    }
    let model = layernorm_model();
    let float = convert_bytes(&model, "model.onnx", &Default::default()).unwrap();
    let opts = ConvertOptions {
        quantize: Some(QuantizeMode::Int8Full),
        calibration: Some(dir.path().to_path_buf()),
        layernorm_int16: true,
        ..Default::default()
    };
    let q = convert_bytes(&model, "model.onnx", &opts).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(q.quantization.as_ref().unwrap().layernorm_int16 > 0);
    let typical: Vec<f32> = noise(8 * 32, 900).iter().map(|v| v * 4.0).collect();
    // Values near +-2.8: a variance about 6 times the calibration rows'.
    let wide: Vec<f32> = noise(8 * 32, 901)
        .iter()
        .enumerate()
        .map(|(i, v)| {
            if i % 2 == 0 {
                2.7 + v * 0.2
            } else {
                -2.7 + v * 0.2
            }
        })
        .collect();
    // A third of the calibration rows' variance.
    let narrow: Vec<f32> = typical.iter().map(|v| v * 0.6).collect();
    for (what, v) in [("typical", typical), ("wide", wide), ("narrow", narrow)] {
        let x = NpyArray::f32(vec![1, 8, 32], v);
        let run = |bytes: &[u8]| {
            run_lite(bytes, "model", &[(None, x.clone())]).unwrap()[0]
                .1
                .to_f32()
        };
        let snr = snr_db(&run(&float.bytes), &run(&q.bytes));
        assert!(snr > 40.0, "{what} rows: {snr:.1} dB");
    }
}
