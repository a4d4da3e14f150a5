//! ONNX `Loop` → WHILE: a counted loop reading a value of the outer graph runs in literun as
//! ONNX defines it; loops WHILE cannot express are refused naming the node.

use super::builder::{ftensor, itensor, typed_value_info, value_info, OnnxBuilder as B};
use crate::convert::{convert_bytes, ConvertOptions};
use crate::npy::NpyArray;
use tract_onnx::pb::{AttributeProto, GraphProto, NodeProto};

fn node(op: &str, ins: &[&str], out: &str) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        name: format!("/{out}"),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: vec![out.into()],
        ..Default::default()
    }
}

/// Body `h = h * u + 1` (u read from the outer graph), `cond_out = cond_in`, plus `scan` extra
/// outputs of `h`.
fn body(scan: usize) -> GraphProto {
    let mut output = vec![
        typed_value_info("cond_out", &[], &[], 9),
        value_info("h_out", &[Some(1), Some(3)], &[]),
    ];
    output.extend((0..scan).map(|_| value_info("h_out", &[], &[])));
    GraphProto {
        node: vec![
            node("Mul", &["h_in", "u"], "hu"),
            node("Add", &["hu", "one"], "h_out"),
            node("Identity", &["cond_in"], "cond_out"),
        ],
        input: vec![
            typed_value_info("i", &[], &[], 7),
            typed_value_info("cond_in", &[], &[], 9),
            value_info("h_in", &[Some(1), Some(3)], &[]),
        ],
        output,
        initializer: vec![ftensor("one", &[1], vec![1.0])],
        ..Default::default()
    }
}

/// `y = Loop(M = 4, "", h0 = x)` with `u = x + 0` computed outside.
fn counted_loop(scan: usize, trip: bool) -> B {
    let mut b = B::new(13);
    b.input("x", &[1, 3])
        .init(itensor("m", &[], vec![4]))
        .init(ftensor("zero", &[1], vec![0.0]))
        .node("Add", "u", &["x", "zero"], &["u"], vec![]);
    b.g.node.push(NodeProto {
        op_type: "Loop".into(),
        name: "loop0".into(),
        input: vec![if trip { "m" } else { "" }.into(), "".into(), "x".into()],
        output: vec!["y".into()],
        attribute: vec![AttributeProto {
            name: "body".into(),
            r#type: tract_onnx::pb::attribute_proto::AttributeType::Graph as i32,
            g: Some(body(scan)),
            ..Default::default()
        }],
        ..Default::default()
    });
    b.output("y");
    b
}

#[test]
fn a_counted_loop_runs_its_body_m_times() {
    let conv = convert_bytes(
        &counted_loop(0, true).bytes(),
        "model.onnx",
        &ConvertOptions::default(),
    )
    .unwrap();
    assert_eq!(
        conv.ops_after.get("WHILE"),
        Some(&1),
        "{:?}",
        conv.ops_after
    );
    let x = vec![0.5f32, -1.0, 2.0];
    let inputs = vec![(Some("x".to_string()), NpyArray::f32(vec![1, 3], x.clone()))];
    let out = crate::runtime::run_lite(&conv.bytes, "model.lite", &inputs).unwrap();
    let want: Vec<f32> = x
        .iter()
        .map(|&u| (0..4).fold(u, |h, _| h * u + 1.0))
        .collect();
    assert_eq!(out[0].1.to_f32(), want);
}

#[test]
fn loops_while_cannot_express_are_refused_naming_the_node() {
    let err = |b: B| format!("{:#}", b.import().unwrap_err());
    let e = err(counted_loop(1, true));
    assert!(
        e.contains(
            "'loop0' (Loop): 1 scan output(s) (values stacked per iteration) are not supported"
        ),
        "{e}"
    );
    let e = err(counted_loop(0, false));
    assert!(
        e.contains("'loop0' (Loop): neither a trip count nor a condition"),
        "{e}"
    );
}
