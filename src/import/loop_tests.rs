//! ONNX `Loop` → WHILE: a counted loop reading a value of the outer graph runs in literun as
//! ONNX defines it, scan outputs included when the number of iterations is a constant; loops
//! WHILE cannot express are refused naming the node.

use super::builder::{ftensor, itensor, typed_value_info, value_info, OnnxBuilder as B};
use crate::convert::{convert_bytes, ConvertOptions};
use crate::npy::NpyArray;
use tract_onnx::pb::{AttributeProto, GraphProto, NodeProto, TensorProto};

fn node(op: &str, ins: &[&str], out: &str) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        name: format!("/{out}"),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: vec![out.into()],
        ..Default::default()
    }
}

/// How the test Loop is built.
#[derive(Clone, Copy)]
struct Spec {
    /// Body values stacked per iteration (scan outputs): `h_out` (`[1, 3]` float) or `i`.
    scans: &'static [&'static str],
    /// The trip count: "m" (the constant 4), "m_in" (a graph input) or "" (none).
    trip: &'static str,
    /// The condition input: "" (none), "yes" (the constant true) or "go" (a graph input).
    cond: &'static str,
    /// The body's condition is `i < 2` instead of its condition input passed through.
    stops_early: bool,
}

const COUNTED: Spec = Spec {
    scans: &[],
    trip: "m",
    cond: "",
    stops_early: false,
};

/// Body `h = h * u + 1` (u read from the outer graph), `cond_out = cond_in` (or `i < 2`),
/// plus the scan outputs of `spec`.
fn body(spec: Spec) -> GraphProto {
    let mut output = vec![
        typed_value_info("cond_out", &[], &[], 9),
        value_info("h_out", &[Some(1), Some(3)], &[]),
    ];
    output.extend(spec.scans.iter().map(|&s| value_info(s, &[], &[])));
    let cond = if spec.stops_early {
        node("Less", &["i", "two"], "cond_out")
    } else {
        node("Identity", &["cond_in"], "cond_out")
    };
    GraphProto {
        node: vec![
            node("Mul", &["h_in", "u"], "hu"),
            node("Add", &["hu", "one"], "h_out"),
            cond,
        ],
        input: vec![
            typed_value_info("i", &[], &[], 7),
            typed_value_info("cond_in", &[], &[], 9),
            value_info("h_in", &[Some(1), Some(3)], &[]),
        ],
        output,
        initializer: vec![
            ftensor("one", &[1], vec![1.0]),
            itensor("two", &[], vec![2]),
        ],
        ..Default::default()
    }
}

/// `y, scans... = Loop(M = 4, cond, h0 = x)` with `u = x + 0` computed outside.
fn counted_loop(spec: Spec) -> B {
    let mut b = B::new(13);
    b.input("x", &[1, 3])
        .init(itensor("m", &[], vec![4]))
        .init(TensorProto {
            name: "yes".into(),
            data_type: 9,
            int32_data: vec![1],
            ..Default::default()
        })
        .init(ftensor("zero", &[1], vec![0.0]))
        .node("Add", "u", &["x", "zero"], &["u"], vec![]);
    if spec.trip == "m_in" {
        b.typed_input("m_in", &[], 7);
    }
    if spec.cond == "go" {
        b.typed_input("go", &[], 9);
    }
    let mut outputs = vec!["y".to_string()];
    outputs.extend((0..spec.scans.len()).map(|k| format!("scan{k}")));
    b.g.node.push(NodeProto {
        op_type: "Loop".into(),
        name: "loop0".into(),
        input: vec![spec.trip.into(), spec.cond.into(), "x".into()],
        output: outputs.clone(),
        attribute: vec![AttributeProto {
            name: "body".into(),
            r#type: tract_onnx::pb::attribute_proto::AttributeType::Graph as i32,
            g: Some(body(spec)),
            ..Default::default()
        }],
        ..Default::default()
    });
    for o in &outputs {
        b.output(o);
    }
    b
}

/// Converts `b`, runs it in literun on `x` and returns the outputs and the TFLite op counts.
fn convert_and_run(b: &B, x: &[f32]) -> (Vec<NpyArray>, std::collections::BTreeMap<String, usize>) {
    let conv = convert_bytes(&b.bytes(), "model.onnx", &ConvertOptions::default()).unwrap();
    let inputs = vec![(Some("x".to_string()), NpyArray::f32(vec![1, 3], x.to_vec()))];
    let out = crate::runtime::run_lite(&conv.bytes, "model.lite", &inputs).unwrap();
    let ops = conv
        .ops_after
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
    (out.into_iter().map(|(_, a)| a).collect(), ops)
}

/// h after each of the 4 iterations of `h = h * u + 1` from `h = u`.
fn iterates(x: &[f32]) -> Vec<Vec<f32>> {
    let mut h = x.to_vec();
    (0..4)
        .map(|_| {
            h = h.iter().zip(x).map(|(h, u)| h * u + 1.0).collect();
            h.clone()
        })
        .collect()
}

#[test]
fn a_counted_loop_runs_its_body_m_times() {
    let x = [0.5f32, -1.0, 2.0];
    let (out, ops) = convert_and_run(&counted_loop(COUNTED), &x);
    assert_eq!(ops.get("WHILE"), Some(&1), "{ops:?}");
    assert_eq!(out[0].to_f32(), iterates(&x)[3]);
}

#[test]
fn scan_outputs_stack_each_iterations_value() {
    let x = [0.5f32, -1.0, 2.0];
    for cond in ["", "yes"] {
        let spec = Spec {
            scans: &["h_out", "i"],
            cond,
            ..COUNTED
        };
        let (out, ops) = convert_and_run(&counted_loop(spec), &x);
        assert_eq!(ops.get("WHILE"), Some(&1), "{ops:?}");
        let rows = iterates(&x);
        assert_eq!(out[0].to_f32(), rows[3]);
        assert_eq!(out[1].shape, vec![4, 1, 3]);
        assert_eq!(out[1].to_f32(), rows.concat());
        // The iteration counter, an int64 scalar, stacks into int32 [4] (int64 is narrowed).
        assert_eq!(out[2].shape, vec![4]);
        assert_eq!(out[2].to_f32(), vec![0.0, 1.0, 2.0, 3.0]);
    }
}

#[test]
fn loops_while_cannot_express_are_refused_naming_the_node() {
    let err = |spec: Spec| format!("{:#}", counted_loop(spec).import().unwrap_err());
    let scanned = Spec {
        scans: &["h_out"],
        ..COUNTED
    };
    let need = "'loop0' (Loop): 1 scan output(s) (values stacked per iteration) need the number \
                of iterations at conversion";
    let e = err(Spec {
        trip: "m_in",
        ..scanned
    });
    assert!(
        e.contains(need) && e.contains("the trip count M is not a constant"),
        "{e}"
    );
    let e = err(Spec {
        cond: "go",
        ..scanned
    });
    assert!(
        e.contains(need) && e.contains("the condition input is not the constant"),
        "{e}"
    );
    let e = err(Spec {
        cond: "yes",
        stops_early: true,
        ..scanned
    });
    assert!(
        e.contains("'loop0' (Loop): ") && e.contains("the body computes its condition"),
        "{e}"
    );
    let e = err(Spec {
        trip: "",
        ..COUNTED
    });
    assert!(
        e.contains("'loop0' (Loop): neither a trip count nor a condition"),
        "{e}"
    );
}
