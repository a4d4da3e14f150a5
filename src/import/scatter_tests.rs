//! ScatterElements, ScatterND and GatherND through literun against their ONNX definitions.

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

fn i64s(shape: Vec<usize>, v: Vec<i64>) -> NpyArray {
    NpyArray {
        shape,
        data: NpyData::I64(v),
    }
}

#[test]
fn scatter_elements_writes_and_reduces_along_an_axis() {
    let data = vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    // Row 0 updates columns 2 and 0; row 1 column -1 (2) twice.
    let idx = vec![2i64, 0, -1, -1];
    let upd = vec![10.0f32, 20.0, 30.0, 40.0];
    for (reduction, want) in [
        ("none", None),
        ("add", Some(vec![21.0, 2.0, 13.0, 4.0, 5.0, 76.0])),
        ("mul", Some(vec![20.0, 2.0, 30.0, 4.0, 5.0, 7200.0])),
        ("max", Some(vec![20.0, 2.0, 10.0, 4.0, 5.0, 40.0])),
        ("min", Some(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])),
    ] {
        let mut b = B::new(18);
        b.input("x", &[2, 3])
            .typed_input("i", &[2, 2], 7)
            .input("u", &[2, 2])
            .node(
                "ScatterElements",
                "sc",
                &["x", "i", "u"],
                &["y"],
                vec![("axis", A::I(1)), ("reduction", A::S(reduction))],
            )
            .output("y");
        let got = run(
            &b,
            vec![
                ("x", NpyArray::f32(vec![2, 3], data.clone())),
                ("i", i64s(vec![2, 2], idx.clone())),
                ("u", NpyArray::f32(vec![2, 2], upd.clone())),
            ],
        );
        match want {
            Some(w) => assert_eq!(got, w, "{reduction}"),
            // Repeated indices without a reduction are undefined: only check the others.
            None => assert_eq!(got[..5], [20.0, 2.0, 10.0, 4.0, 5.0], "{reduction}"),
        }
    }
}

#[test]
fn scatter_nd_replaces_slices_at_index_tuples() {
    // data [2, 2, 2]; updates of whole rows at (1, 0) and (0, -1).
    let data: Vec<f32> = (0..8).map(|v| v as f32).collect();
    let mut b = B::new(18);
    b.input("x", &[2, 2, 2])
        .typed_input("i", &[2, 2], 7)
        .input("u", &[2, 2])
        .node("ScatterND", "sc", &["x", "i", "u"], &["y"], vec![])
        .output("y");
    let got = run(
        &b,
        vec![
            ("x", NpyArray::f32(vec![2, 2, 2], data)),
            ("i", i64s(vec![2, 2], vec![1, 0, 0, -1])),
            ("u", NpyArray::f32(vec![2, 2], vec![-1.0, -2.0, -3.0, -4.0])),
        ],
    );
    assert_eq!(got, vec![0.0, 1.0, -3.0, -4.0, -1.0, -2.0, 6.0, 7.0]);
}

#[test]
fn gather_nd_reads_slices_at_index_tuples_per_batch() {
    // data [2 batches, 2, 2]; batch_dims 1: batch 0 reads row 1, batch 1 row -2 (0).
    let data: Vec<f32> = (0..8).map(|v| v as f32).collect();
    let mut b = B::new(13);
    b.input("x", &[2, 2, 2])
        .typed_input("i", &[2, 1], 7)
        .node(
            "GatherND",
            "g",
            &["x", "i"],
            &["y"],
            vec![("batch_dims", A::I(1))],
        )
        .output("y");
    let got = run(
        &b,
        vec![
            ("x", NpyArray::f32(vec![2, 2, 2], data)),
            ("i", i64s(vec![2, 1], vec![1, -2])),
        ],
    );
    assert_eq!(got, vec![2.0, 3.0, 4.0, 5.0]);
}
