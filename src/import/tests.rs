//! Importer tests on small hand-built ONNX models and on the fixtures.

use super::builder::{attr, ftensor, itensor, value_info, Attr as A, OnnxBuilder as B};
use super::*;
use crate::ir::{Graph, Op, PoolKind, ReduceOp, UnaryOp};

fn ops(g: &Graph) -> Vec<&'static str> {
    g.nodes.iter().map(|n| n.op.name()).collect()
}

fn out_shape(g: &Graph, i: usize) -> Vec<usize> {
    g.tensors[g.outputs[i]].shape.clone()
}

#[test]
fn conv_bn_relu_flatten_gemm() {
    let mut b = B::new(13);
    b.input("input", &[1, 1, 8, 8])
        .weights("conv.weight", &[4, 1, 3, 3])
        .weights("conv.bias", &[4])
        .weights("bn.scale", &[4])
        .weights("bn.bias", &[4])
        .weights("bn.mean", &[4])
        .init(ftensor("bn.var", &[4], vec![1.0; 4]))
        .weights("fc.weight", &[10, 64])
        .weights("fc.bias", &[10])
        .node(
            "Conv",
            "/conv/Conv",
            &["input", "conv.weight", "conv.bias"],
            &["c"],
            vec![
                ("pads", A::Is(vec![1, 1, 1, 1])),
                ("strides", A::Is(vec![2, 2])),
            ],
        )
        .node(
            "BatchNormalization",
            "/bn/BN",
            &["c", "bn.scale", "bn.bias", "bn.mean", "bn.var"],
            &["n"],
            vec![("epsilon", A::F(1e-3))],
        )
        .node("Relu", "/relu", &["n"], &["r"], vec![])
        .node("Flatten", "/flatten", &["r"], &["f"], vec![])
        .node("Dropout", "/drop", &["f"], &["d"], vec![])
        .node(
            "Gemm",
            "/fc/Gemm",
            &["d", "fc.weight", "fc.bias"],
            &["output"],
            vec![("transB", A::I(1))],
        )
        .output("output");
    let g = b.import().unwrap();
    assert_eq!(
        ops(&g),
        vec!["Conv2d", "BatchNorm", "Relu", "Reshape", "FullyConnected"]
    );
    assert_eq!(g.tensors[g.inputs[0]].name, "input");
    assert_eq!(g.tensors[g.outputs[0]].name, "output");
    assert_eq!(out_shape(&g, 0), vec![1, 10]);
    match &g.nodes[0].op {
        Op::Conv2d { pads, strides, .. } => {
            assert_eq!(*pads, [1, 1, 1, 1]);
            assert_eq!(*strides, [2, 2]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(g.shape(g.nodes[0].outputs[0]), &[1, 4, 4, 4]);
    assert_eq!(g.shape(g.nodes[3].outputs[0]), &[1, 64]);
    // Gemm with transB=1: the weights are B itself.
    assert_eq!(g.shape(g.nodes[4].inputs[1]), &[10, 64]);
    assert_eq!(g.shape(g.nodes[4].inputs[2]), &[10]);
}

#[test]
fn gemm_transb0_alpha_beta_and_matmul() {
    let mut b = B::new(13);
    b.input("x", &[2, 3])
        .init(ftensor("w", &[3, 2], vec![1., 2., 3., 4., 5., 6.]))
        .init(ftensor("c", &[2], vec![1., -1.]))
        .node(
            "Gemm",
            "g",
            &["x", "w", "c"],
            &["y"],
            vec![("alpha", A::F(2.0)), ("beta", A::F(3.0))],
        )
        .node("MatMul", "m", &["y", "w2"], &["z"], vec![])
        .init(ftensor("w2", &[2, 4], vec![0.5; 8]))
        .output("z");
    let g = b.import().unwrap();
    assert_eq!(ops(&g), vec!["FullyConnected", "FullyConnected"]);
    let w = g.const_data(g.nodes[0].inputs[1]).unwrap();
    assert_eq!(w.shape(), vec![2, 3]);
    assert_eq!(w.to_f32_vec(), vec![2., 6., 10., 4., 8., 12.]);
    let bias = g.const_data(g.nodes[0].inputs[2]).unwrap();
    assert_eq!(bias.to_f32_vec(), vec![3., -3.]);
    assert_eq!(out_shape(&g, 0), vec![2, 4]);
}

#[test]
fn same_upper_pads() {
    let mut b = B::new(13);
    b.input("x", &[1, 2, 6, 6])
        .weights("w", &[3, 2, 3, 3])
        .node(
            "Conv",
            "conv",
            &["x", "w"],
            &["y"],
            vec![
                ("auto_pad", A::S("SAME_UPPER")),
                ("strides", A::Is(vec![2, 2])),
            ],
        )
        .output("y");
    let g = b.import().unwrap();
    match &g.nodes[0].op {
        Op::Conv2d { pads, .. } => assert_eq!(*pads, [0, 0, 1, 1]),
        other => panic!("{other:?}"),
    }
    assert_eq!(out_shape(&g, 0), vec![1, 3, 3, 3]);
    // SAME_LOWER puts the extra padding first.
    b.g.node[0].attribute[0] = attr("auto_pad", A::S("SAME_LOWER"));
    let g = b.import().unwrap();
    match &g.nodes[0].op {
        Op::Conv2d { pads, .. } => assert_eq!(*pads, [1, 1, 0, 0]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn pytorch_shape_subgraph_folds_to_one_reshape() {
    let mut b = B::new(13);
    b.input("x", &[2, 3, 4, 5])
        .node("Shape", "/Shape", &["x"], &["s"], vec![])
        .node(
            "Constant",
            "/Constant",
            &[],
            &["zero"],
            vec![("value", A::T(itensor("", &[], vec![0])))],
        )
        .node(
            "Gather",
            "/Gather",
            &["s", "zero"],
            &["n"],
            vec![("axis", A::I(0))],
        )
        .node(
            "Constant",
            "/Constant_1",
            &[],
            &["axes"],
            vec![("value", A::T(itensor("", &[1], vec![0])))],
        )
        .node("Unsqueeze", "/Unsqueeze", &["n", "axes"], &["nu"], vec![])
        .node(
            "Constant",
            "/Constant_2",
            &[],
            &["m1"],
            vec![("value", A::T(itensor("", &[1], vec![-1])))],
        )
        .node(
            "Concat",
            "/Concat",
            &["nu", "m1"],
            &["shape"],
            vec![("axis", A::I(0))],
        )
        .node("Reshape", "/Reshape", &["x", "shape"], &["y"], vec![])
        .output("y");
    let g = b.import().unwrap();
    assert_eq!(ops(&g), vec!["Reshape"]);
    assert_eq!(g.nodes[0].op, Op::Reshape { shape: vec![2, 60] });
    assert_eq!(g.tensors[g.outputs[0]].name, "y");
}

#[test]
fn dynamic_input_needs_a_shape() {
    let mut b = B::new(13);
    b.g.input
        .push(value_info("x", &[None, Some(3), Some(4)], &["N"]));
    b.node("Relu", "relu", &["x"], &["y"], vec![]).output("y");
    let err = b.import().unwrap_err().to_string();
    assert!(
        err.contains(
            "input 'x' has a dynamic dimension 0 ('N'); give its shape with --input-shape x=1,3,4"
        ),
        "{err}"
    );
    let mut opts = ImportOptions::default();
    opts.input_shapes.insert("x".into(), vec![2, 3, 4]);
    let g = import_onnx_bytes(&b.bytes(), "model.onnx", &opts).unwrap();
    assert_eq!(out_shape(&g, 0), vec![2, 3, 4]);
    // Contradicting a static dim.
    opts.input_shapes.insert("x".into(), vec![2, 5, 4]);
    let err = import_onnx_bytes(&b.bytes(), "model.onnx", &opts)
        .unwrap_err()
        .to_string();
    assert!(err.contains("static dimension 1 = 3"), "{err}");
    // Unknown input name.
    let mut opts = ImportOptions::default();
    opts.input_shapes.insert("nope".into(), vec![1]);
    let err = import_onnx_bytes(&b.bytes(), "model.onnx", &opts)
        .unwrap_err()
        .to_string();
    assert!(err.contains("'nope'") && err.contains("'x'"), "{err}");
}

#[test]
fn all_unsupported_ops_listed_at_once() {
    let mut b = B::new(13);
    b.input("x", &[1, 4])
        .node("Acos", "/m/Acos", &["x"], &["a"], vec![])
        .node("Relu", "/m/Relu", &["a"], &["a2"], vec![]) // downstream: skipped silently
        .node("Asin", "/m/Asin", &["x"], &["b"], vec![])
        .node(
            "TopK",
            "/m/TopK",
            &["x", "k"],
            &["c", "ci"],
            vec![("largest", A::I(0))],
        )
        .init(itensor("k", &[1], vec![2]))
        .node("Erf", "/m/Erf", &["x"], &["e"], vec![])
        .output("a2")
        .output("b")
        .output("c")
        .output("e");
    let err = b.import().unwrap_err().to_string();
    assert!(
        err.starts_with("model.onnx: 3 unsupported ops (Acos×1, Asin×1, TopK×1): "),
        "{err}"
    );
    assert!(err.ends_with(" (1 node after them not checked)"), "{err}");
    assert!(err.contains("'/m/Acos' (Acos)"), "{err}");
    assert!(err.contains("'/m/Asin' (Asin)"), "{err}");
    assert!(err.contains("'/m/TopK' (TopK): largest=0"), "{err}");
    assert!(!err.contains("Relu") && !err.contains("Erf"), "{err}");
}

/// A chain of ops the importer lacks (ddddocr's dynamic-quantized CRNN had DynamicQuantizeLinear →
/// ConvInteger → ... and a com.microsoft DynamicQuantizeLSTM): the error must name all of them, not
/// only the first of the chain, including nodes of another domain, and count the known ones it
/// skipped.
#[test]
fn unsupported_ops_after_an_unsupported_op_are_listed_too() {
    let mut b = B::new(13);
    b.input("x", &[1, 4])
        .node("Acos", "h0", &["x"], &["xh"], vec![])
        .node("Det", "det0", &["xh"], &["m"], vec![])
        .node("Cast", "cast0", &["m"], &["mf"], vec![("to", A::I(1))])
        .node("Relu", "relu0", &["mf"], &["r"], vec![]);
    for i in 0..5 {
        b.node(
            "MelWeightMatrix",
            &format!("mw{i}"),
            &["xh", "xh"],
            &[&format!("c{i}")],
            vec![],
        );
        b.output(&format!("c{i}"));
    }
    b.g.node.push(tract_onnx::pb::NodeProto {
        op_type: "DynamicQuantizeLSTM".into(),
        domain: "com.microsoft".into(),
        name: "lstm0".into(),
        input: vec!["r".into()],
        output: vec!["h".into()],
        ..Default::default()
    });
    b.output("h");
    let err = b.import().unwrap_err().to_string();
    assert!(
        err.starts_with(
            "model.onnx: 8 unsupported ops (Acos×1, Det×1, MelWeightMatrix×5, \
             DynamicQuantizeLSTM×1): 'h0' (Acos): operator is not supported; 'det0' (Det): \
             operator is not supported (its input comes from an unsupported op); "
        ),
        "{err}"
    );
    // At most three per op type, then a count.
    assert!(
        err.contains("'mw2' (MelWeightMatrix)") && !err.contains("'mw3'"),
        "{err}"
    );
    assert!(err.contains("; 2 more MelWeightMatrix"), "{err}");
    assert!(
        err.contains("'lstm0' (DynamicQuantizeLSTM): operator domain 'com.microsoft'"),
        "{err}"
    );
    // Cast and Relu are known: skipped, counted.
    assert!(err.ends_with(" (2 nodes after them not checked)"), "{err}");
    assert!(
        !err.contains("'cast0'") && !err.contains("'relu0'"),
        "{err}"
    );
}

#[test]
fn standalone_erf_imports() {
    let mut b = B::new(13);
    b.input("x", &[1, 4])
        .node("Erf", "/m/Erf", &["x"], &["y"], vec![])
        .output("y");
    let g = b.import().unwrap();
    assert_eq!(g.nodes[0].op, Op::Unary(UnaryOp::Erf));
}

#[test]
fn unsorted_nodes_are_sorted() {
    let mut b = B::new(13);
    b.input("x", &[1, 4])
        .node("Relu", "second", &["a"], &["y"], vec![])
        .node("Neg", "first", &["x"], &["a"], vec![])
        .output("y");
    let g = b.import().unwrap();
    assert_eq!(ops(&g), vec!["Neg", "Relu"]);
}

#[test]
fn aliased_and_constant_outputs_get_their_own_tensor() {
    let mut b = B::new(13);
    b.input("x", &[1, 4])
        .node("Identity", "id", &["x"], &["y"], vec![])
        .node(
            "Constant",
            "k",
            &[],
            &["k"],
            vec![("value", A::T(ftensor("", &[2], vec![1., 2.])))],
        )
        .output("y")
        .output("k");
    let g = b.import().unwrap();
    assert_eq!(ops(&g), vec!["Reshape", "Reshape"]);
    assert_eq!(g.tensors[g.outputs[0]].name, "y");
    assert_eq!(g.tensors[g.outputs[1]].name, "k");
    assert_eq!(g.nodes[0].inputs, vec![g.inputs[0]]);
}

#[test]
fn pools_reduce_and_misc_ops() {
    let mut b = B::new(13);
    b.input("x", &[1, 2, 6, 6])
        .node(
            "MaxPool",
            "mp",
            &["x"],
            &["p"],
            vec![
                ("kernel_shape", A::Is(vec![3, 3])),
                ("strides", A::Is(vec![2, 2])),
                ("ceil_mode", A::I(1)),
            ],
        )
        .node(
            "AveragePool",
            "ap",
            &["x"],
            &["q"],
            vec![
                ("kernel_shape", A::Is(vec![3, 3])),
                ("pads", A::Is(vec![1, 1, 1, 1])),
                ("count_include_pad", A::I(1)),
            ],
        )
        .node("GlobalAveragePool", "gap", &["q"], &["r"], vec![])
        .node(
            "ReduceMax",
            "rm",
            &["x"],
            &["s"],
            vec![("axes", A::Is(vec![-1, 1])), ("keepdims", A::I(0))],
        )
        .output("p")
        .output("r")
        .output("s");
    let g = b.import().unwrap();
    assert_eq!(
        ops(&g),
        vec!["MaxPool", "Pad", "AveragePool", "ReduceMean", "ReduceMax"]
    );
    match &g.nodes[0].op {
        Op::Pool2d { pads, kind, .. } => {
            assert_eq!(*kind, PoolKind::Max);
            assert_eq!(*pads, [0, 0, 1, 1]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(out_shape(&g, 0), vec![1, 2, 3, 3]);
    assert_eq!(out_shape(&g, 1), vec![1, 2, 1, 1]);
    assert_eq!(
        g.nodes[4].op,
        Op::Reduce {
            op: ReduceOp::Max,
            axes: vec![1, 3],
            keep_dims: false
        }
    );
    assert_eq!(out_shape(&g, 2), vec![1, 6]);
}

#[test]
fn resize_mapping() {
    let mk = |coord: &'static str, mode: &'static str, nearest: &'static str| {
        let mut b = B::new(13);
        b.input("x", &[1, 2, 4, 4])
            .init(ftensor("scales", &[4], vec![1., 1., 2., 2.]))
            .node(
                "Resize",
                "rs",
                &["x", "", "scales"],
                &["y"],
                vec![
                    ("coordinate_transformation_mode", A::S(coord)),
                    ("mode", A::S(mode)),
                    ("nearest_mode", A::S(nearest)),
                ],
            )
            .output("y");
        b.import()
    };
    let g = mk("asymmetric", "nearest", "floor").unwrap();
    assert_eq!(out_shape(&g, 0), vec![1, 2, 8, 8]);
    assert!(matches!(
        g.nodes[0].op,
        Op::Resize {
            mode: crate::ir::ResizeMode::Nearest,
            coords: crate::ir::ResizeCoords::Asymmetric,
            ..
        }
    ));
    assert!(mk("pytorch_half_pixel", "linear", "floor").is_ok());
    assert!(mk("align_corners", "linear", "floor").is_ok());
    let err = mk("half_pixel", "nearest", "round_prefer_floor")
        .unwrap_err()
        .to_string();
    assert!(err.contains("round_prefer_floor"), "{err}");
    assert!(mk("asymmetric", "cubic", "floor").is_err());
}

#[test]
fn slice_gather_split_squeeze() {
    let mut b = B::new(13);
    b.input("x", &[1, 4, 6])
        .init(itensor("st", &[2], vec![-1, 0]))
        .init(itensor("en", &[2], vec![i64::MIN, i64::MAX]))
        .init(itensor("ax", &[2], vec![2, 1]))
        .init(itensor("sp", &[2], vec![-1, 2]))
        .node(
            "Slice",
            "sl",
            &["x", "st", "en", "ax", "sp"],
            &["a"],
            vec![],
        )
        .init(itensor("i", &[], vec![-1]))
        .node("Gather", "ga", &["x", "i"], &["b"], vec![("axis", A::I(1))])
        .init(itensor("split", &[2], vec![1, 3]))
        .node(
            "Split",
            "spl",
            &["x", "split"],
            &["c", "d"],
            vec![("axis", A::I(1))],
        )
        .init(itensor("sq", &[1], vec![0]))
        .node("Squeeze", "sq", &["d", "sq"], &["e"], vec![])
        .output("a")
        .output("b")
        .output("c")
        .output("e");
    let g = b.import().unwrap();
    assert_eq!(out_shape(&g, 0), vec![1, 2, 6]);
    assert_eq!(out_shape(&g, 1), vec![1, 6]);
    assert_eq!(out_shape(&g, 2), vec![1, 1, 6]);
    assert_eq!(out_shape(&g, 3), vec![3, 6]);
    let gi = &g.nodes[1];
    assert_eq!(g.const_data(gi.inputs[1]).unwrap().to_i64_vec(), vec![3]);
}

#[test]
fn conv1d_is_reshaped_conv2d() {
    let mut b = B::new(13);
    b.input("x", &[1, 2, 10])
        .weights("w", &[3, 2, 3])
        .node(
            "Conv",
            "c",
            &["x", "w"],
            &["y"],
            vec![("pads", A::Is(vec![1, 1]))],
        )
        .output("y");
    let g = b.import().unwrap();
    assert_eq!(ops(&g), vec!["Reshape", "Conv2d", "Reshape"]);
    assert_eq!(out_shape(&g, 0), vec![1, 3, 10]);
}

/// An LSTM [seq 3, batch 1, input 2] → hidden 2 with the given extra inputs and attributes.
fn lstm_model(extra: &[&str], attrs: Vec<(&str, A)>, seq_lens: Option<Vec<i64>>) -> B {
    let mut b = B::new(14);
    b.input("x", &[3, 1, 2])
        .weights("W", &[1, 8, 2])
        .weights("R", &[1, 8, 2])
        .weights("B", &[1, 16]);
    let mut ins = vec!["x", "W", "R", "B"];
    if let Some(l) = seq_lens {
        b.init(super::builder::itensor("lens", &[1], l));
        ins.push("lens");
    }
    ins.extend(extra);
    b.node("LSTM", "/lstm/LSTM", &ins, &["y", "yh", "yc"], attrs)
        .output("y")
        .output("yh");
    b
}

#[test]
fn lstm_unrolls_into_tflite_ops() {
    let g = lstm_model(&[], vec![("hidden_size", A::I(2))], Some(vec![3]))
        .import()
        .unwrap();
    let ops = ops(&g);
    for want in [
        "FullyConnected",
        "Split",
        "Sigmoid",
        "Tanh",
        "Mul",
        "Add",
        "Concat",
    ] {
        assert!(ops.contains(&want), "{want} missing: {ops:?}");
    }
    // No recurrent product at the first step (zero state): one input projection + 2 steps.
    assert_eq!(ops.iter().filter(|&&o| o == "FullyConnected").count(), 3);
    assert_eq!(out_shape(&g, 0), [3, 1, 1, 2]);
    assert_eq!(out_shape(&g, 1), [1, 1, 2]);
}

#[test]
fn lstm_rejects_what_it_cannot_unroll() {
    let err = |b: B| b.import().unwrap_err().to_string();
    let e = err(lstm_model(&[], vec![], Some(vec![2])));
    assert!(
        e.contains("'/lstm/LSTM' (LSTM)") && e.contains("sequence_lens"),
        "{e}"
    );
    let e = err(lstm_model(&[], vec![("clip", A::F(3.0))], None));
    assert!(e.contains("(LSTM)") && e.contains("clip"), "{e}");
    let e = err(lstm_model(&[], vec![("direction", A::S("sideways"))], None));
    assert!(e.contains("(LSTM)") && e.contains("sideways"), "{e}");
    let e = err(lstm_model(&[], vec![("hidden_size", A::I(5))], None));
    assert!(e.contains("hidden_size 5"), "{e}");
}

#[test]
fn runtime_comparison_where_and_topk_import() {
    let mut b = B::new(13);
    b.input("x", &[2, 5])
        .init(super::builder::ftensor("zero", &[], vec![0.0]))
        .init(super::builder::itensor("k", &[1], vec![2]))
        .node("Greater", "/gt", &["x", "zero"], &["m"], vec![])
        .node("Not", "/not", &["m"], &["nm"], vec![])
        .node("Where", "/where", &["nm", "zero", "x"], &["y"], vec![])
        .node("TopK", "/topk", &["y", "k"], &["v", "i"], vec![])
        .output("v")
        .output("i");
    let g = b.import().unwrap();
    assert_eq!(ops(&g), ["Greater", "Not", "Where", "TopK"]);
    // int64 indices are narrowed to int32.
    assert_eq!(g.tensors[g.outputs[1]].dtype, crate::ir::DType::I32);
    assert_eq!(out_shape(&g, 1), [2, 2]);
    let mut b = B::new(13);
    b.input("x", &[2, 5])
        .init(super::builder::itensor("k", &[1], vec![6]))
        .node("TopK", "/topk", &["x", "k"], &["v", "i"], vec![])
        .output("v");
    let e = b.import().unwrap_err().to_string();
    assert!(e.contains("'/topk' (TopK)") && e.contains("K = 6"), "{e}");
}

#[test]
fn long_sequences_concatenate_in_groups() {
    let seq = 600;
    let mut b = B::new(14);
    b.input("x", &[seq, 1, 1])
        .weights("W", &[1, 3, 1])
        .weights("R", &[1, 3, 1])
        .node(
            "GRU",
            "/gru/GRU",
            &["x", "W", "R"],
            &["y"],
            vec![("hidden_size", A::I(1))],
        )
        .output("y");
    let g = b.import().unwrap();
    let widest = g
        .nodes
        .iter()
        .filter(|n| matches!(n.op, Op::Concat { .. }))
        .map(|n| n.inputs.len())
        .max()
        .unwrap();
    assert!(widest <= 512, "a CONCATENATION has {widest} inputs");
    assert_eq!(out_shape(&g, 0), [seq as usize, 1, 1, 1]);
}

#[test]
fn frozen_inputs_become_constants() {
    let mut b = B::new(13);
    b.input("x", &[1, 4])
        .input("gain", &[4])
        .node("Unsqueeze", "/u", &["gain", "axes"], &["g2"], vec![])
        .init(itensor("axes", &[1], vec![0]))
        .node("Mul", "/mul", &["x", "g2"], &["y"], vec![])
        .output("y");
    // Without a value, both inputs stay.
    assert_eq!(b.import().unwrap().inputs.len(), 2);
    let mut opts = ImportOptions::default();
    opts.input_values.insert("gain".into(), vec![2.0]);
    let g = import_onnx_bytes(&b.bytes(), "model.onnx", &opts).unwrap();
    assert_eq!(g.inputs.len(), 1);
    let gain = g.tensors.iter().find(|t| t.name == "gain").unwrap();
    assert_eq!(gain.data.as_ref().unwrap().to_f32_vec(), vec![2.0; 4]);
    // Wrong count and unknown names are errors naming the input.
    opts.input_values.insert("gain".into(), vec![1.0, 2.0, 3.0]);
    let err = import_onnx_bytes(&b.bytes(), "model.onnx", &opts)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--input-value gain: 3 values for shape [4]"),
        "{err}"
    );
    let mut opts = ImportOptions::default();
    opts.input_values.insert("sr".into(), vec![16000.0]);
    let err = import_onnx_bytes(&b.bytes(), "model.onnx", &opts)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--input-value names 'sr'") && err.contains("'gain'"),
        "{err}"
    );
}
