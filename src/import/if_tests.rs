//! Importer tests of ONNX `If`: constant conditions take their branch, run-time ones are errors.

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

#[test]
fn if_with_a_runtime_condition_is_a_clear_error() {
    let mut b = B::new(13);
    b.input("x", &[1, 4]);
    let mut c = value_info("c", &[], &[]);
    if let Some(type_proto::Value::TensorType(t)) = c.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.elem_type = 9; // bool
    }
    b.g.input.push(c);
    b.g.node.push(if_node(
        "if0",
        "c",
        "y",
        branch("Relu", "x", "t"),
        branch("Sigmoid", "x", "e"),
    ));
    b.output("y");
    let err = b.import().unwrap_err().to_string();
    assert!(
        err.contains("'if0' (If): the condition is computed at run time"),
        "{err}"
    );
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
