//! Compress, OneHot, ReverseSequence, EyeLike, 1-D MatMul operands and LpPool through literun
//! against their ONNX definitions.

use super::builder::{ftensor, Attr as A, OnnxBuilder as B};
use crate::convert::{convert_bytes, ConvertOptions};
use crate::npy::{NpyArray, NpyData};
use tract_onnx::pb::TensorProto;

fn bool_tensor(name: &str, v: &[bool]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: vec![v.len() as i64],
        data_type: 9,
        int32_data: v.iter().map(|&b| i32::from(b)).collect(),
        ..Default::default()
    }
}

fn run(b: &B, inputs: Vec<(&str, NpyArray)>) -> Vec<NpyArray> {
    let conv = convert_bytes(&b.bytes(), "model.onnx", &ConvertOptions::default()).unwrap();
    let named: Vec<(Option<String>, NpyArray)> = inputs
        .into_iter()
        .map(|(n, a)| (Some(n.to_string()), a))
        .collect();
    let out = crate::runtime::run_lite(&conv.bytes, "model.lite", &named).unwrap();
    out.into_iter().map(|(_, a)| a).collect()
}

#[test]
fn compress_and_one_hot_select_by_constant_masks() {
    let x: Vec<f32> = (0..6).map(|v| v as f32).collect();
    let mut b = B::new(11);
    b.input("x", &[3, 2])
        .init(bool_tensor("c", &[true, false, true, true]))
        .node(
            "Compress",
            "rows",
            &["x", "c"],
            &["r"],
            vec![("axis", A::I(0))],
        )
        .node("Compress", "flat", &["x", "c"], &["f"], vec![])
        .output("r")
        .output("f");
    let out = run(&b, vec![("x", NpyArray::f32(vec![3, 2], x))]);
    assert_eq!(out[0].shape, vec![2, 2]);
    assert_eq!(out[0].to_f32(), vec![0.0, 1.0, 4.0, 5.0]);
    assert_eq!(out[1].to_f32(), vec![0.0, 2.0, 3.0]);

    let mut b = B::new(11);
    b.typed_input("i", &[4], 7)
        .init(ftensor("depth", &[], vec![3.0]))
        .init(ftensor("values", &[2], vec![-1.0, 5.0]))
        .node(
            "OneHot",
            "oh",
            &["i", "depth", "values"],
            &["y"],
            vec![("axis", A::I(0))],
        )
        .output("y");
    let idx = NpyArray {
        shape: vec![4],
        data: NpyData::I64(vec![0, 2, -1, 3]),
    };
    let out = run(&b, vec![("i", idx)]);
    // Axis 0: y[k, j] is on where index j is k; -1 is the last class, 3 none.
    assert_eq!(out[0].shape, vec![3, 4]);
    #[rustfmt::skip]
    let want = vec![
        5.0, -1.0, -1.0, -1.0,
        -1.0, -1.0, -1.0, -1.0,
        -1.0, 5.0, 5.0, -1.0,
    ];
    assert_eq!(out[0].to_f32(), want);
}

#[test]
fn eye_like_vector_matmul_and_lp_pool() {
    let mut b = B::new(13);
    b.input("v", &[3])
        .input("m", &[2, 3, 2])
        .input("e", &[2, 3])
        .node("MatMul", "vm", &["v", "m"], &["vm"], vec![])
        .node("EyeLike", "eye", &["e"], &["eye"], vec![("k", A::I(1))])
        .node(
            "LpPool",
            "lp",
            &["m"],
            &["lp"],
            vec![
                ("kernel_shape", A::Is(vec![2])),
                ("pads", A::Is(vec![1, 0])),
                ("p", A::I(3)),
            ],
        )
        .output("vm")
        .output("eye")
        .output("lp");
    let v = vec![1.0f32, -2.0, 0.5];
    let m: Vec<f32> = (0..12).map(|i| i as f32 - 5.0).collect();
    let out = run(
        &b,
        vec![
            ("v", NpyArray::f32(vec![3], v.clone())),
            ("m", NpyArray::f32(vec![2, 3, 2], m.clone())),
            ("e", NpyArray::f32(vec![2, 3], vec![0.0; 6])),
        ],
    );
    // [3] x [2, 3, 2] -> [2, 2].
    let mut want = Vec::new();
    for batch in 0..2 {
        for col in 0..2 {
            want.push(
                (0..3)
                    .map(|k| v[k] * m[batch * 6 + k * 2 + col])
                    .sum::<f32>(),
            );
        }
    }
    assert_eq!(out[0].shape, vec![2, 2]);
    assert_eq!(out[0].to_f32(), want);
    assert_eq!(out[1].to_f32(), vec![0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
    // LpPool p=3 over windows of 2 along the last axis, one zero in front: [0, x0], [x0, x1].
    assert_eq!(out[2].shape, vec![2, 3, 2]);
    for (i, g) in out[2].to_f32().iter().enumerate() {
        let (row, second) = (i / 2, i % 2 == 1);
        let mut sum = m[row * 2].abs().powi(3);
        if second {
            sum += m[row * 2 + 1].abs().powi(3);
        }
        let want = sum.powf(1.0 / 3.0);
        assert!((g - want).abs() <= 1e-5 * want.max(1.0), "{g} vs {want}");
    }
}

#[test]
fn reverse_sequence_reverses_each_entrys_first_steps() {
    // [batch 3, time 3]: lengths 0, 2, 3 along the time axis 1.
    let x: Vec<f32> = (0..9).map(|v| v as f32).collect();
    let mut b = B::new(10);
    b.input("x", &[3, 3])
        .init(super::builder::itensor("lens", &[3], vec![0, 2, 3]))
        .node(
            "ReverseSequence",
            "rev",
            &["x", "lens"],
            &["y"],
            vec![("time_axis", A::I(1)), ("batch_axis", A::I(0))],
        )
        .output("y");
    let out = run(&b, vec![("x", NpyArray::f32(vec![3, 3], x))]);
    assert_eq!(
        out[0].to_f32(),
        vec![0.0, 1.0, 2.0, 4.0, 3.0, 5.0, 8.0, 7.0, 6.0]
    );
}
