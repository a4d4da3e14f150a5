//! What full int8 does with a model's outputs: a score that stays float (computed in float from
//! its quantized input) is also compared with its threshold in float, so the decision is the
//! float model's for the score the file gives.

mod common;

use common::noise;
use litecvt::convert::{convert_bytes, ConvertOptions};
use litecvt::import::builder::{ftensor, OnnxBuilder};
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
