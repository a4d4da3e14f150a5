//! NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss and GatherElements through literun
//! against direct evaluations of their ONNX definitions.

use super::builder::{ftensor, Attr as A, OnnxBuilder as B};
use crate::convert::{convert_bytes, ConvertOptions};
use crate::npy::{NpyArray, NpyData};

fn run(b: &B, inputs: Vec<(&str, NpyArray)>) -> Vec<(String, NpyArray)> {
    let conv = convert_bytes(&b.bytes(), "model.onnx", &ConvertOptions::default()).unwrap();
    let named: Vec<(Option<String>, NpyArray)> = inputs
        .into_iter()
        .map(|(n, a)| (Some(n.to_string()), a))
        .collect();
    crate::runtime::run_lite(&conv.bytes, "model.lite", &named).unwrap()
}

fn i64s(shape: Vec<usize>, v: Vec<i64>) -> NpyArray {
    NpyArray {
        shape,
        data: NpyData::I64(v),
    }
}

fn close(got: f32, want: f32) -> bool {
    (got - want).abs() <= 1e-5 + 1e-5 * want.abs()
}

#[test]
fn nll_loss_weights_ignores_and_averages() {
    // x [N=2, C=3, D=2]; targets [2, 2] with class 1 ignored.
    let x: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 2.0).collect();
    let t = vec![0i64, 2, 1, 2];
    let w = [0.5f32, 2.0, 1.5];
    for (reduction, ignore) in [("mean", Some(1)), ("sum", None), ("none", Some(2))] {
        let mut attrs = vec![("reduction", A::S(reduction))];
        if let Some(ii) = ignore {
            attrs.push(("ignore_index", A::I(ii)));
        }
        let mut b = B::new(22);
        b.input("x", &[2, 3, 2])
            .typed_input("t", &[2, 2], 7)
            .init(ftensor("w", &[3], w.to_vec()))
            .node(
                "NegativeLogLikelihoodLoss",
                "nll",
                &["x", "t", "w"],
                &["loss"],
                attrs,
            )
            .output("loss");
        let out = run(
            &b,
            vec![
                ("x", NpyArray::f32(vec![2, 3, 2], x.clone())),
                ("t", i64s(vec![2, 2], t.clone())),
            ],
        );
        let mut losses = Vec::new();
        let mut weights = Vec::new();
        for nn in 0..2 {
            for d in 0..2 {
                let c = t[nn * 2 + d];
                let wt = if Some(c) == ignore {
                    0.0
                } else {
                    w[c as usize]
                };
                losses.push(-x[(nn * 3 + c as usize) * 2 + d] * wt);
                weights.push(wt);
            }
        }
        let got = out[0].1.to_f32();
        match reduction {
            "none" => {
                assert_eq!(out[0].1.shape, vec![2, 2]);
                for (g, w) in got.iter().zip(&losses) {
                    assert!(close(*g, *w), "{g} vs {w}");
                }
            }
            _ => {
                let sum: f32 = losses.iter().sum();
                let want = if reduction == "sum" {
                    sum
                } else {
                    sum / weights.iter().sum::<f32>()
                };
                assert!(out[0].1.shape.is_empty(), "{:?}", out[0].1.shape);
                assert!(close(got[0], want), "{reduction}: {} vs {want}", got[0]);
            }
        }
    }
}

#[test]
fn softmax_cross_entropy_over_many_axes_gives_its_log_probabilities() {
    // Scores [N=1, C=3, 2, 2, 1, 1, 1]: rank 7, flattened for the class axis.
    let s: Vec<f32> = (0..12).map(|i| ((i * 7) % 5) as f32 - 1.5).collect();
    let t = vec![0i64, 1, 2, 1];
    let mut b = B::new(13);
    b.input("s", &[1, 3, 2, 2, 1, 1, 1])
        .typed_input("t", &[1, 2, 2, 1, 1, 1], 7)
        .node(
            "SoftmaxCrossEntropyLoss",
            "sce",
            &["s", "t"],
            &["loss", "log_prob"],
            vec![("reduction", A::S("mean"))],
        )
        .output("loss")
        .output("log_prob");
    let out = run(
        &b,
        vec![
            ("s", NpyArray::f32(vec![1, 3, 2, 2, 1, 1, 1], s.clone())),
            ("t", i64s(vec![1, 2, 2, 1, 1, 1], t.clone())),
        ],
    );
    let mut log_prob = vec![0.0f32; 12];
    let mut total = 0.0;
    for d in 0..4 {
        let col: Vec<f32> = (0..3).map(|c| s[c * 4 + d]).collect();
        let max = col.iter().cloned().fold(f32::MIN, f32::max);
        let lse = max + col.iter().map(|v| (v - max).exp()).sum::<f32>().ln();
        for c in 0..3 {
            log_prob[c * 4 + d] = col[c] - lse;
        }
        total -= log_prob[t[d] as usize * 4 + d];
    }
    assert!(close(out[0].1.to_f32()[0], total / 4.0));
    assert_eq!(out[1].1.shape, vec![1, 3, 2, 2, 1, 1, 1]);
    for (g, w) in out[1].1.to_f32().iter().zip(&log_prob) {
        assert!(close(*g, *w), "{g} vs {w}");
    }
}

#[test]
fn gather_elements_picks_along_an_axis_with_negative_indices() {
    // data [3, 3], indices [2, 2] along axis 1: the data cut to its first 2 rows.
    let data: Vec<f32> = (1..=9).map(|v| v as f32).collect();
    let idx = vec![0i64, -1, 2, 1];
    let mut b = B::new(13);
    b.input("d", &[3, 3])
        .typed_input("i", &[2, 2], 7)
        .node(
            "GatherElements",
            "ge",
            &["d", "i"],
            &["y"],
            vec![("axis", A::I(1))],
        )
        .output("y");
    let out = run(
        &b,
        vec![
            ("d", NpyArray::f32(vec![3, 3], data)),
            ("i", i64s(vec![2, 2], idx)),
        ],
    );
    // Row 0: columns 0 and 2 → 1, 3; row 1: columns 2 and 1 → 6, 5.
    assert_eq!(out[0].1.to_f32(), vec![1.0, 3.0, 6.0, 5.0]);
}
