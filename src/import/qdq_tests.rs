//! Importer tests of already-quantized models (`qdq.rs`): QDQ pairs, their errors, QOperator ops.

use super::builder::{ftensor, Attr as A, OnnxBuilder as B};

fn i8tensor(name: &str, dims: &[i64], v: Vec<i8>) -> tract_onnx::pb::TensorProto {
    tract_onnx::pb::TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: 3,
        raw_data: v.iter().map(|&x| x as u8).collect(),
        ..Default::default()
    }
}

fn u8tensor(name: &str, dims: &[i64], v: Vec<u8>) -> tract_onnx::pb::TensorProto {
    tract_onnx::pb::TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: 2,
        raw_data: v,
        ..Default::default()
    }
}

/// input → Q/DQ (uint8) → Conv(DQ(int8 weights, per channel)) → output, at `opset`.
fn qdq_conv(opset: i64, q_attrs: Vec<(&'static str, A)>) -> B {
    let mut b = B::new(opset);
    b.input("input", &[1, 2, 4, 4])
        .init(ftensor("s", &[], vec![0.02]))
        .init(u8tensor("z", &[], vec![128]))
        .init(i8tensor("wq", &[3, 2, 1, 1], vec![-128, 1, 2, 3, 4, 127]))
        .init(ftensor("ws", &[3], vec![0.5, 0.25, 0.125]))
        .init(i8tensor("wz", &[3], vec![0, 0, 0]))
        .node(
            "QuantizeLinear",
            "q",
            &["input", "s", "z"],
            &["xq"],
            q_attrs,
        )
        .node("DequantizeLinear", "dq", &["xq", "s", "z"], &["x"], vec![])
        .node(
            "DequantizeLinear",
            "wdq",
            &["wq", "ws", "wz"],
            &["w"],
            vec![("axis", A::I(0))],
        )
        .node("Conv", "conv", &["x", "w"], &["output"], vec![]);
    b.output("output");
    b
}

#[test]
fn qdq_pairs_become_annotations_in_every_opset_form() {
    for (opset, attrs) in [
        (13, vec![]),
        (19, vec![("saturate", A::I(1))]),
        (21, vec![("output_dtype", A::I(2))]),
    ] {
        let g = qdq_conv(opset, attrs).import().unwrap();
        // The pair is gone (its QUANTIZE is dead); the input carries the parameters, int8 domain.
        let conv = g.nodes.iter().find(|n| n.name == "conv").unwrap();
        let x = conv.inputs[0];
        assert_eq!(g.tensors[x].name, "input");
        let q = g.tensors[x].quant.clone().unwrap();
        assert_eq!((q.scale, q.zero_point), (vec![0.02], vec![0]));
        // The weight: float values (q - zp) * scale per output channel, annotated.
        let w = &g.tensors[conv.inputs[1]];
        assert_eq!(
            w.data.as_ref().unwrap().to_f32_vec(),
            vec![-64.0, 0.5, 0.5, 0.75, 0.5, 15.875]
        );
        let wq = w.quant.clone().unwrap();
        assert_eq!((wq.scale, wq.axis), (vec![0.5, 0.25, 0.125], 0));
    }
}

#[test]
fn qdq_errors_name_the_node_and_what_is_wrong() {
    let err = |b: &B| format!("{:#}", b.import().unwrap_err());
    // A zero scale.
    let mut bad = B::new(13);
    bad.input("input", &[1, 2])
        .init(ftensor("s0", &[], vec![0.0]))
        .node("QuantizeLinear", "q", &["input", "s0"], &["xq"], vec![])
        .node("DequantizeLinear", "dq", &["xq", "s0"], &["output"], vec![]);
    bad.output("output");
    let e = err(&bad);
    assert!(
        e.contains("'q' (QuantizeLinear)") && e.contains("positive"),
        "{e}"
    );
    // Per-axis scales whose count does not match the axis.
    let mut bad = B::new(13);
    bad.input("input", &[1, 2])
        .init(i8tensor("wq", &[2, 2], vec![1, 2, 3, 4]))
        .init(ftensor("ws", &[3], vec![1.0, 1.0, 1.0]))
        .node(
            "DequantizeLinear",
            "wdq",
            &["wq", "ws"],
            &["w"],
            vec![("axis", A::I(0))],
        )
        .node("MatMul", "mm", &["input", "w"], &["output"], vec![]);
    bad.output("output");
    let e = err(&bad);
    assert!(
        e.contains("'wdq' (DequantizeLinear)") && e.contains("3 scales"),
        "{e}"
    );
    // An integer value read by something other than DequantizeLinear.
    let mut bad = B::new(13);
    bad.input("input", &[1, 2])
        .init(ftensor("s", &[], vec![0.1]))
        .node("QuantizeLinear", "q", &["input", "s"], &["xq"], vec![])
        .node("Relu", "relu", &["xq"], &["output"], vec![]);
    bad.output("output");
    let e = err(&bad);
    assert!(
        e.contains("'relu' (Relu)") && e.contains("QuantizeLinear"),
        "{e}"
    );
    // A graph output that is the integer value.
    let mut bad = B::new(13);
    bad.input("input", &[1, 2])
        .init(ftensor("s", &[], vec![0.1]))
        .node("QuantizeLinear", "q", &["input", "s"], &["output"], vec![]);
    bad.output("output");
    let e = err(&bad);
    assert!(e.contains("'output'") && e.contains("integer"), "{e}");
    // Blocked quantization (opset 21).
    let mut bad = B::new(21);
    bad.input("input", &[1, 2])
        .init(i8tensor("wq", &[2, 2], vec![1, 2, 3, 4]))
        .init(ftensor("ws", &[2, 1], vec![1.0, 1.0]))
        .node(
            "DequantizeLinear",
            "wdq",
            &["wq", "ws"],
            &["w"],
            vec![("axis", A::I(1)), ("block_size", A::I(2))],
        )
        .node("MatMul", "mm", &["input", "w"], &["output"], vec![]);
    bad.output("output");
    let e = err(&bad);
    assert!(
        e.contains("'wdq' (DequantizeLinear)") && e.contains("block_size"),
        "{e}"
    );
}

#[test]
fn unsupported_qoperator_ops_say_how_to_get_a_qdq_model() {
    let mut b = B::new(13);
    b.input("input", &[1, 2])
        .init(ftensor("s", &[], vec![0.1]))
        .init(u8tensor("z", &[], vec![128]))
        .node("QuantizeLinear", "q", &["input", "s", "z"], &["xq"], vec![])
        .node(
            "QLinearReduceMean",
            "mean_quant",
            &["xq", "s", "z", "s", "z"],
            &["yq"],
            vec![],
        )
        .node(
            "DequantizeLinear",
            "dq",
            &["yq", "s", "z"],
            &["output"],
            vec![],
        );
    b.output("output");
    let e = format!("{:#}", b.import().unwrap_err());
    assert!(
        e.contains("'mean_quant' (QLinearReduceMean)") && e.contains("QuantFormat.QDQ"),
        "{e}"
    );
}
