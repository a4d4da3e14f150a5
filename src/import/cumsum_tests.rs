//! ONNX CumSum → TFLite CUMSUM: every combination of `exclusive` and `reverse`, a negative
//! axis, int32 data, and the refusals.

use super::builder::{itensor, Attr as A, OnnxBuilder as B};
use crate::convert::{convert_bytes, ConvertOptions};
use crate::npy::{NpyArray, NpyData};

/// numpy's cumsum along axis 1 of a [rows, cols] array, with ONNX's flags.
fn cumsum_rows(x: &[f32], cols: usize, exclusive: bool, reverse: bool) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    for row in x.chunks(cols).enumerate() {
        let (r, v) = row;
        let mut acc = 0.0;
        let order: Vec<usize> = if reverse {
            (0..cols).rev().collect()
        } else {
            (0..cols).collect()
        };
        for j in order {
            if exclusive {
                out[r * cols + j] = acc;
                acc += v[j];
            } else {
                acc += v[j];
                out[r * cols + j] = acc;
            }
        }
    }
    out
}

fn cumsum_model(exclusive: i64, reverse: i64, axis: i64) -> B {
    let mut b = B::new(14);
    b.input("x", &[2, 5])
        .init(itensor("axis", &[], vec![axis]))
        .node(
            "CumSum",
            "cs",
            &["x", "axis"],
            &["y"],
            vec![("exclusive", A::I(exclusive)), ("reverse", A::I(reverse))],
        )
        .output("y");
    b
}

#[test]
fn cumsum_follows_onnx_for_every_flag() {
    let x: Vec<f32> = (0..10).map(|v| v as f32 * 0.5 - 2.0).collect();
    for (exclusive, reverse) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
        let b = cumsum_model(exclusive, reverse, -1);
        let conv = convert_bytes(&b.bytes(), "model.onnx", &ConvertOptions::default()).unwrap();
        assert_eq!(
            conv.ops_after.get("CUMSUM"),
            Some(&1),
            "{:?}",
            conv.ops_after
        );
        let inputs = vec![(Some("x".into()), NpyArray::f32(vec![2, 5], x.clone()))];
        let out = crate::runtime::run_lite(&conv.bytes, "model.lite", &inputs).unwrap();
        let want = cumsum_rows(&x, 5, exclusive == 1, reverse == 1);
        assert_eq!(
            out[0].1.to_f32(),
            want,
            "exclusive {exclusive} reverse {reverse}"
        );
    }
}

#[test]
fn int32_cumsum_runs_in_int32() {
    let mut b = B::new(14);
    b.typed_input("x", &[3], 6)
        .init(itensor("axis", &[], vec![0]))
        .node("CumSum", "cs", &["x", "axis"], &["y"], vec![])
        .output("y");
    let conv = convert_bytes(&b.bytes(), "model.onnx", &ConvertOptions::default()).unwrap();
    let inputs = vec![(
        Some("x".into()),
        NpyArray {
            shape: vec![3],
            data: NpyData::I32(vec![1, 2, 3]),
        },
    )];
    let out = crate::runtime::run_lite(&conv.bytes, "model.lite", &inputs).unwrap();
    assert_eq!(out[0].1.data, NpyData::I32(vec![1, 3, 6]));
}

#[test]
fn cumsum_refusals_name_the_node_and_the_reason() {
    let err = |b: B| format!("{:#}", b.import().unwrap_err());
    let e = err(cumsum_model(2, 0, 0));
    assert!(e.contains("'cs' (CumSum): exclusive must be 0 or 1"), "{e}");
    let e = err(cumsum_model(0, 0, 2));
    assert!(e.contains("'cs' (CumSum)") && e.contains("axis"), "{e}");
    let mut b = B::new(14);
    b.input("x", &[2, 5])
        .input("axis", &[])
        .node("CumSum", "cs", &["x", "axis"], &["y"], vec![])
        .output("y");
    let e = err(b);
    assert!(
        e.contains("'cs' (CumSum): axis (input 1) must be constant"),
        "{e}"
    );
}
