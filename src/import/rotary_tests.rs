//! RotaryEmbedding and SwiGLU through literun against their ONNX definitions.

use super::builder::{Attr as A, OnnxBuilder as B};
use crate::convert::{convert_bytes, ConvertOptions};
use crate::npy::{NpyArray, NpyData};

fn run(b: &B, inputs: Vec<(&str, NpyArray)>) -> Vec<f32> {
    let conv = convert_bytes(&b.bytes(), "model.onnx", &ConvertOptions::default()).unwrap();
    let named: Vec<(Option<String>, NpyArray)> = inputs
        .into_iter()
        .map(|(n, a)| (Some(n.to_string()), a))
        .collect();
    let out = crate::runtime::run_lite(&conv.bytes, "model.lite", &named).unwrap();
    out[0].1.to_f32()
}

fn close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 1e-6 + 1e-6 * w.abs(), "{g} vs {w}");
    }
}

#[test]
fn rotary_embedding_rotates_pairs_by_position() {
    // X [1, 1 head, 2 positions, 6]: the first 4 values rotate, as interleaved pairs, by the
    // angles of positions 3 and 0 in the caches; the last 2 are kept.
    let x: Vec<f32> = (0..12).map(|v| v as f32 * 0.25 - 1.0).collect();
    let angle = |p: usize, j: usize| (p as f32 + 1.0) * (j as f32 + 0.5);
    let cos: Vec<f32> = (0..8).map(|i| angle(i / 2, i % 2).cos()).collect();
    let sin: Vec<f32> = (0..8).map(|i| angle(i / 2, i % 2).sin()).collect();
    let mut b = B::new(23);
    b.input("x", &[1, 1, 2, 6])
        .input("cos", &[4, 2])
        .input("sin", &[4, 2])
        .typed_input("pos", &[1, 2], 7)
        .node(
            "RotaryEmbedding",
            "rope",
            &["x", "cos", "sin", "pos"],
            &["y"],
            vec![("interleaved", A::I(1)), ("rotary_embedding_dim", A::I(4))],
        )
        .output("y");
    let positions = [3usize, 0];
    let got = run(
        &b,
        vec![
            ("x", NpyArray::f32(vec![1, 1, 2, 6], x.clone())),
            ("cos", NpyArray::f32(vec![4, 2], cos.clone())),
            ("sin", NpyArray::f32(vec![4, 2], sin.clone())),
            (
                "pos",
                NpyArray {
                    shape: vec![1, 2],
                    data: NpyData::I64(vec![3, 0]),
                },
            ),
        ],
    );
    let mut want = x.clone();
    for (s, &p) in positions.iter().enumerate() {
        for j in 0..2 {
            let (x1, x2) = (x[s * 6 + 2 * j], x[s * 6 + 2 * j + 1]);
            let (c, sn) = (cos[p * 2 + j], sin[p * 2 + j]);
            want[s * 6 + 2 * j] = c * x1 - sn * x2;
            want[s * 6 + 2 * j + 1] = sn * x1 + c * x2;
        }
    }
    close(&got, &want);
}

#[test]
fn swiglu_gates_the_swish_of_a_with_b() {
    let a = vec![-2.0f32, -0.5, 0.0, 1.0, 3.0];
    let g = vec![0.5f32, 2.0, -1.0, 1.5, -0.25];
    let mut b = B::new(28);
    b.input("a", &[5])
        .input("b", &[5])
        .node(
            "SwiGLU",
            "sw",
            &["a", "b"],
            &["y"],
            vec![("alpha", A::F(0.5))],
        )
        .output("y");
    let got = run(
        &b,
        vec![
            ("a", NpyArray::f32(vec![5], a.clone())),
            ("b", NpyArray::f32(vec![5], g.clone())),
        ],
    );
    let want: Vec<f32> = a
        .iter()
        .zip(&g)
        .map(|(&x, &y)| x / (1.0 + (-0.5 * x).exp()) * y)
        .collect();
    close(&got, &want);
}
