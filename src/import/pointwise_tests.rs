//! The float functions written with IR ops (Celu, Softsign, ThresholdedRelu, Shrink, Swish,
//! Mish, Sign, Sinh, Cosh) and Sin/Cos through literun against their ONNX definitions.

use super::builder::{Attr as A, OnnxBuilder as B};
use crate::convert::{convert_bytes, ConvertOptions};
use crate::npy::NpyArray;

fn run_unary(op: &str, attrs: Vec<(&str, A)>, x: &[f32]) -> Vec<f32> {
    let mut b = B::new(22);
    b.input("x", &[x.len() as i64])
        .node(op, "f", &["x"], &["y"], attrs)
        .output("y");
    let conv = convert_bytes(&b.bytes(), "model.onnx", &ConvertOptions::default()).unwrap();
    let input = vec![(
        Some("x".to_string()),
        NpyArray::f32(vec![x.len()], x.to_vec()),
    )];
    let out = crate::runtime::run_lite(&conv.bytes, "model.lite", &input).unwrap();
    out[0].1.to_f32()
}

#[test]
fn elementwise_functions_follow_their_onnx_definitions() {
    let x = [-3.0f32, -1.5, -0.25, 0.0, 0.5, 1.5, 2.0, 4.0];
    let softplus = |v: f32| (1.0 + v.exp()).ln();
    type Case = (&'static str, Vec<(&'static str, A)>, fn(f32) -> f32);
    let cases: Vec<Case> = vec![
        ("Celu", vec![("alpha", A::F(2.0))], |v| {
            v.max(0.0) + (2.0 * ((v / 2.0).exp() - 1.0)).min(0.0)
        }),
        ("Softsign", vec![], |v| v / (1.0 + v.abs())),
        ("ThresholdedRelu", vec![("alpha", A::F(1.5))], |v| {
            if v > 1.5 {
                v
            } else {
                0.0
            }
        }),
        (
            "Shrink",
            vec![("lambd", A::F(1.5)), ("bias", A::F(0.5))],
            |v| {
                if v > 1.5 {
                    v - 0.5
                } else if v < -1.5 {
                    v + 0.5
                } else {
                    0.0
                }
            },
        ),
        ("Swish", vec![("alpha", A::F(0.5))], |v| {
            v / (1.0 + (-0.5 * v).exp())
        }),
        ("Sign", vec![], |v| {
            if v > 0.0 {
                1.0
            } else if v < 0.0 {
                -1.0
            } else {
                0.0
            }
        }),
        ("Sinh", vec![], f32::sinh),
        ("Cosh", vec![], f32::cosh),
        ("Sin", vec![], f32::sin),
        ("Cos", vec![], f32::cos),
    ];
    for (op, attrs, f) in cases {
        let got = run_unary(op, attrs, &x);
        for (&v, g) in x.iter().zip(&got) {
            let w = f(v);
            assert!(
                (g - w).abs() <= 1e-5 + 1e-5 * w.abs(),
                "{op}({v}): {g} vs {w}"
            );
        }
    }
    let got = run_unary("Mish", vec![], &x);
    for (&v, g) in x.iter().zip(&got) {
        let w = v * softplus(v).tanh();
        assert!(
            (g - w).abs() <= 1e-5 + 1e-5 * w.abs(),
            "Mish({v}): {g} vs {w}"
        );
    }
    let got = run_unary("Sign", vec![], &[f32::NAN, f32::NEG_INFINITY]);
    assert!(got[0].is_nan() && got[1] == -1.0, "{got:?}");
}
