//! Importer tests of ONNX `If`: constant conditions take their branch, run-time ones become an
//! IF with two branch graphs.

use super::builder::{itensor, value_info, OnnxBuilder as B};
use crate::ir::{Op, UnaryOp};
use tract_onnx::pb::type_proto;

fn if_node(
    name: &str,
    cond: &str,
    out: &str,
    then_g: GraphProtoT,
    else_g: GraphProtoT,
) -> NodeProtoT {
    let g = |n: &str, g: GraphProtoT| tract_onnx::pb::AttributeProto {
        name: n.into(),
        r#type: tract_onnx::pb::attribute_proto::AttributeType::Graph as i32,
        g: Some(g),
        ..Default::default()
    };
    NodeProtoT {
        op_type: "If".into(),
        name: name.into(),
        input: vec![cond.into()],
        output: vec![out.into()],
        attribute: vec![g("then_branch", then_g), g("else_branch", else_g)],
        ..Default::default()
    }
}

type GraphProtoT = tract_onnx::pb::GraphProto;
type NodeProtoT = tract_onnx::pb::NodeProto;

/// One-node branch `op(x) -> out`, reading `x` from the enclosing graph.
fn branch(op: &str, x: &str, out: &str) -> GraphProtoT {
    GraphProtoT {
        node: vec![NodeProtoT {
            op_type: op.into(),
            name: format!("/{out}"),
            input: vec![x.into()],
            output: vec![out.into()],
            ..Default::default()
        }],
        output: vec![value_info(out, &[], &[])],
        ..Default::default()
    }
}

#[test]
fn if_with_a_constant_condition_imports_the_taken_branch() {
    for (cond, want) in [(1i64, UnaryOp::Relu), (0, UnaryOp::Sigmoid)] {
        let mut b = B::new(13);
        b.input("x", &[1, 4]).init(itensor("c", &[], vec![cond]));
        // `x2` is produced outside and read only inside the branches: it must be scheduled
        // before the If and kept alive.
        b.node("Neg", "neg", &["x"], &["x2"], vec![]);
        b.g.node.push(if_node(
            "if0",
            "c",
            "y",
            branch("Relu", "x2", "t"),
            branch("Sigmoid", "x2", "e"),
        ));
        b.output("y");
        let g = b.import().unwrap();
        // (The output, an alias of the branch's value, gets its own tensor through a Reshape.)
        let ops: Vec<&Op> = g
            .nodes
            .iter()
            .map(|n| &n.op)
            .filter(|o| !matches!(o, Op::Reshape { .. }))
            .collect();
        assert_eq!(ops.len(), 2, "{ops:?}");
        assert_eq!(*ops[0], Op::Unary(UnaryOp::Neg));
        assert_eq!(*ops[1], Op::Unary(want));
        assert_eq!(g.tensors[g.outputs[0]].shape, vec![1, 4]);
    }
}

/// `y = If(c, Relu(x), Sigmoid(x)) + 1` with a run-time bool `c`.
fn runtime_if() -> B {
    let mut b = B::new(13);
    b.input("x", &[1, 4]);
    let mut c = value_info("c", &[], &[]);
    if let Some(type_proto::Value::TensorType(t)) = c.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = 9; // bool
    }
    b.g.input.push(c);
    b.init(crate::import::builder::ftensor("one", &[1], vec![1.0]));
    b.g.node.push(if_node(
        "if0",
        "c",
        "y0",
        branch("Relu", "x", "t"),
        branch("Sigmoid", "x", "e"),
    ));
    b.node("Add", "add", &["y0", "one"], &["y"], vec![]);
    b.output("y");
    b
}

#[test]
fn if_with_a_runtime_condition_becomes_an_if_with_two_branch_graphs() {
    let g = runtime_if().import().unwrap();
    let node = g.nodes.iter().find(|n| n.op.name() == "If").expect("an If");
    let Op::If {
        then_branch,
        else_branch,
    } = &node.op
    else {
        unreachable!()
    };
    // The condition, then `x`, which both branches read and take as their one input.
    assert_eq!(node.inputs.len(), 2);
    assert_eq!(g.tensors[node.inputs[1]].name, "x");
    for (b, want) in [
        (then_branch, UnaryOp::Relu),
        (else_branch, UnaryOp::Sigmoid),
    ] {
        assert_eq!(b.inputs.len(), 1);
        assert_eq!(b.tensors[b.inputs[0]].shape, vec![1, 4]);
        assert_eq!(b.nodes[0].op, Op::Unary(want));
        assert_eq!(b.tensors[b.outputs[0]].shape, vec![1, 4]);
    }
}

#[test]
fn a_runtime_if_runs_the_branch_its_condition_picks() {
    use crate::convert::{convert_bytes, ConvertOptions};
    use crate::npy::{NpyArray, NpyData};
    let conv = convert_bytes(
        &runtime_if().bytes(),
        "model.onnx",
        &ConvertOptions::default(),
    )
    .unwrap();
    assert_eq!(conv.ops_after.get("IF"), Some(&1), "{:?}", conv.ops_after);
    let x = [-2.0f32, -0.5, 0.5, 2.0];
    for cond in [true, false] {
        let inputs = vec![
            (Some("x".to_string()), NpyArray::f32(vec![1, 4], x.to_vec())),
            (
                Some("c".to_string()),
                NpyArray {
                    shape: vec![],
                    data: NpyData::Bool(vec![cond]),
                },
            ),
        ];
        let out = crate::runtime::run_lite(&conv.bytes, "model.lite", &inputs).unwrap();
        let want: Vec<f32> = x
            .iter()
            .map(|&v| {
                1.0 + if cond {
                    v.max(0.0)
                } else {
                    1.0 / (1.0 + (-v).exp())
                }
            })
            .collect();
        let got = out[0].1.to_f32();
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-6, "cond {cond}: {got:?} vs {want:?}");
        }
    }
}

#[test]
fn an_unsupported_op_in_a_branch_is_named() {
    // A branch whose op is unsupported names the branch's node.
    let mut b = B::new(13);
    b.input("x", &[1, 4]).init(itensor("c", &[], vec![1]));
    b.g.node.push(if_node(
        "if0",
        "c",
        "y",
        branch("Acos", "x", "t"),
        branch("Sigmoid", "x", "e"),
    ));
    b.output("y");
    let err = b.import().unwrap_err().to_string();
    assert!(
        err.contains("'/t' (Acos): operator is not supported"),
        "{err}"
    );
}
