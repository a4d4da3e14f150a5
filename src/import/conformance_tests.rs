//! Cases from ONNX's backend conformance tests (scripts/onnx_backend_suite.py) that converted
//! to wrong results or failed at run time: each now converts exactly or is refused with a
//! message naming the node and the reason.

use super::builder::{ftensor, itensor, Attr as A, OnnxBuilder as B};
use super::*;
use crate::convert::{convert_bytes, ConvertOptions};
use crate::npy::{NpyArray, NpyData};
use tract_onnx::pb::TensorProto;

fn out_shape(g: &ir::Graph, i: usize) -> Vec<usize> {
    g.tensors[g.outputs[i]].shape.clone()
}

fn refusal(b: &B) -> String {
    format!("{:#}", b.import().unwrap_err())
}

fn conversion_refusal(b: &B) -> String {
    let err = convert_bytes(&b.bytes(), "model.onnx", &ConvertOptions::default()).unwrap_err();
    format!("{err:#}")
}

fn bool_tensor(name: &str, v: bool) -> TensorProto {
    TensorProto {
        name: name.into(),
        data_type: 9,
        int32_data: vec![v as i32],
        ..Default::default()
    }
}

/// Converts `b` and runs it with literun on `inputs` (by name); the outputs in order.
fn run(b: &B, inputs: Vec<(&str, NpyArray)>) -> Vec<(String, NpyArray)> {
    let conv = convert_bytes(&b.bytes(), "model.onnx", &ConvertOptions::default()).unwrap();
    let named: Vec<(Option<String>, NpyArray)> = inputs
        .into_iter()
        .map(|(n, a)| (Some(n.to_string()), a))
        .collect();
    crate::runtime::run_lite(&conv.bytes, "model.lite", &named).unwrap()
}

#[test]
fn flatten_counts_a_negative_axis_from_the_end() {
    let flatten = |axis: i64| {
        let mut b = B::new(13);
        b.input("a", &[2, 3, 4, 5])
            .node(
                "Flatten",
                "flat",
                &["a"],
                &["b"],
                vec![("axis", A::I(axis))],
            )
            .output("b");
        b
    };
    for (axis, want) in [
        (-1, [24, 5]),
        (-2, [6, 20]),
        (-3, [2, 60]),
        (-4, [1, 120]),
        (0, [1, 120]),
        (1, [2, 60]),
        (4, [120, 1]),
    ] {
        let g = flatten(axis).import().unwrap();
        assert_eq!(out_shape(&g, 0), want, "axis {axis}");
    }
    for axis in [-5, 5] {
        let err = refusal(&flatten(axis));
        assert!(err.contains("node 'flat' (Flatten): axis"), "{err}");
    }
}

#[test]
fn layernorm_decomposed_with_a_negative_flatten_axis_imports() {
    // How ONNX's function body writes LayerNormalization(axis=-1): Flatten(X, axis=-1) to
    // [outer, inner], normalize over the last axis, reshape back.
    let mut b = B::new(18);
    b.input("x", &[2, 3, 4])
        .init(itensor("shape", &[3], vec![2, 3, 4]))
        .node("Flatten", "flat", &["x"], &["x2"], vec![("axis", A::I(-1))])
        .node("Relu", "relu", &["x2"], &["r"], vec![])
        .node("Reshape", "back", &["r", "shape"], &["y"], vec![])
        .output("y");
    let g = b.import().unwrap();
    assert_eq!(out_shape(&g, 0), vec![2, 3, 4]);
}

#[test]
fn training_batchnorm_is_refused() {
    let bn = |opset: i64, outs: &[&str], attrs: Vec<(&'static str, A)>| {
        let mut b = B::new(opset);
        b.input("x", &[1, 2, 3, 3])
            .weights("s", &[2])
            .weights("b", &[2])
            .weights("m", &[2])
            .init(ftensor("v", &[2], vec![1.0, 1.0]))
            .node(
                "BatchNormalization",
                "bn",
                &["x", "s", "b", "m", "v"],
                outs,
                attrs,
            );
        for o in outs {
            b.output(o);
        }
        b
    };
    let err = refusal(&bn(
        15,
        &["y", "rm", "rv"],
        vec![("training_mode", A::I(1))],
    ));
    assert!(
        err.contains("'bn' (BatchNormalization): training_mode=1"),
        "{err}"
    );
    // training_mode=1 with only Y requested still normalizes with the batch statistics.
    let err = refusal(&bn(15, &["y"], vec![("training_mode", A::I(1))]));
    assert!(err.contains("training_mode=1"), "{err}");
    // Opsets 7-13: asking for the statistics outputs is training mode.
    let err = refusal(&bn(9, &["y", "mean", "var"], vec![]));
    assert!(err.contains("training-mode output 'mean'"), "{err}");
    // Inference mode imports.
    assert!(bn(15, &["y"], vec![("training_mode", A::I(0))])
        .import()
        .is_ok());
    assert!(bn(9, &["y"], vec![]).import().is_ok());
    // Converting training as inference uses the running statistics and drops the extra outputs.
    let opts = ImportOptions {
        training_as_inference: true,
        ..Default::default()
    };
    let b = bn(15, &["y", "rm", "rv"], vec![("training_mode", A::I(1))]);
    let g = import_onnx_bytes(&b.bytes(), "model.onnx", &opts).unwrap();
    assert_eq!(g.outputs.len(), 1);
    assert_eq!(g.nodes[0].op.name(), "BatchNorm");
}

#[test]
fn dropout_in_training_mode_is_refused_unless_it_keeps_everything() {
    let dropout = |ratio: Option<f32>, training: Option<bool>| {
        let mut b = B::new(13);
        b.input("x", &[2, 3]);
        let mut ins = vec!["x", "", ""];
        if let Some(r) = ratio {
            b.init(ftensor("r", &[], vec![r]));
            ins[1] = "r";
        }
        if let Some(t) = training {
            b.init(bool_tensor("t", t));
            ins[2] = "t";
        }
        b.node("Dropout", "drop", &ins, &["y"], vec![]).output("y");
        b
    };
    let err = refusal(&dropout(Some(0.75), Some(true)));
    assert!(
        err.contains("'drop' (Dropout): training_mode is true with ratio 0.75")
            && err.contains("--training-as-inference"),
        "{err}"
    );
    let opts = ImportOptions {
        training_as_inference: true,
        ..Default::default()
    };
    let b = dropout(Some(0.75), Some(true));
    assert!(import_onnx_bytes(&b.bytes(), "model.onnx", &opts).is_ok());
    // The default ratio is 0.5.
    let err = refusal(&dropout(None, Some(true)));
    assert!(err.contains("ratio 0.5"), "{err}");
    // Ratio 0 keeps every element; inference mode is the identity.
    for (ratio, training) in [
        (Some(0.0), Some(true)),
        (Some(0.5), Some(false)),
        (None, None),
    ] {
        let g = dropout(ratio, training).import().unwrap();
        assert!(
            g.nodes.iter().all(|n| n.op.name() == "Reshape"),
            "{ratio:?}"
        );
    }
    // A run-time training_mode cannot be checked.
    let mut b = B::new(13);
    b.input("x", &[2, 3])
        .typed_input("t", &[], 9)
        .node("Dropout", "drop", &["x", "", "t"], &["y"], vec![])
        .output("y");
    let err = refusal(&b);
    assert!(
        err.contains("training_mode (input 2) must be constant"),
        "{err}"
    );
}

#[test]
fn resize_with_a_scale_giving_a_fractional_size_is_refused() {
    let resize = |scale: f32, coords: &'static str| {
        let mut b = B::new(13);
        b.input("x", &[1, 1, 2, 4])
            .init(ftensor("scales", &[4], vec![1.0, 1.0, scale, scale]))
            .node(
                "Resize",
                "rs",
                &["x", "", "scales"],
                &["y"],
                vec![
                    ("mode", A::S("linear")),
                    ("coordinate_transformation_mode", A::S(coords)),
                ],
            )
            .output("y");
        b
    };
    // 2 × 0.6 = 1.2 and 4 × 0.6 = 2.4: ONNX maps coordinates with 0.6, TFLite with 1/2.
    for coords in ["half_pixel", "align_corners", "asymmetric"] {
        let err = refusal(&resize(0.6, coords));
        assert!(
            err.contains("'rs' (Resize): scale 0.6") && err.contains("fractional size"),
            "{err}"
        );
    }
    let g = resize(0.5, "half_pixel").import().unwrap();
    assert_eq!(out_shape(&g, 0), vec![1, 1, 1, 2]);
    let g = resize(1.5, "half_pixel").import().unwrap();
    assert_eq!(out_shape(&g, 0), vec![1, 1, 3, 6]);
}

#[test]
fn zero_element_tensors_are_refused_at_conversion() {
    // Shape with start > end: an empty constant as the graph output.
    let mut b = B::new(15);
    b.input("x", &[3, 4, 5])
        .node(
            "Shape",
            "shape",
            &["x"],
            &["y"],
            vec![("start", A::I(3)), ("end", A::I(1))],
        )
        .output("y");
    let err = conversion_refusal(&b);
    assert!(
        err.contains("model.onnx: graph output 'y' has no elements (shape [0])"),
        "{err}"
    );
    // A Slice whose start is past the end: an empty run-time tensor.
    let slice = |output: &str| {
        let mut b = B::new(13);
        b.input("x", &[20, 10, 5])
            .init(itensor("starts", &[1], vec![1000]))
            .init(itensor("ends", &[1], vec![1000]))
            .init(itensor("axes", &[1], vec![1]))
            .node(
                "Slice",
                "slice",
                &["x", "starts", "ends", "axes"],
                &["s"],
                vec![],
            )
            .node("Relu", "relu", &["s"], &["y"], vec![])
            .output(output);
        b
    };
    let err = conversion_refusal(&slice("y"));
    assert!(
        err.contains("graph output 'y' has no elements (shape [20, 0, 5])"),
        "{err}"
    );
    // An empty piece that a Concat drops is fine (ONNX's RotaryEmbedding function does this).
    let mut b = B::new(13);
    b.input("x", &[2, 4])
        .init(itensor("split", &[2], vec![4, 0]))
        .node(
            "Split",
            "split",
            &["x", "split"],
            &["a", "b"],
            vec![("axis", A::I(1))],
        )
        .node(
            "Concat",
            "cat",
            &["a", "b"],
            &["y"],
            vec![("axis", A::I(1))],
        )
        .output("y");
    let x: Vec<f32> = (0..8).map(|v| v as f32).collect();
    let out = run(&b, vec![("x", NpyArray::f32(vec![2, 4], x.clone()))]);
    assert_eq!((out[0].1.shape.clone(), out[0].1.to_f32()), (vec![2, 4], x));
    // An empty constant that folds away is fine: Concat([], x-shaped values).
    let mut b = B::new(13);
    b.input("x", &[2, 3])
        .init(itensor("empty", &[0], vec![]))
        .init(itensor("dims", &[2], vec![3, 2]))
        .node(
            "Concat",
            "cat",
            &["empty", "dims"],
            &["shape"],
            vec![("axis", A::I(0))],
        )
        .node("Reshape", "reshape", &["x", "shape"], &["y"], vec![])
        .output("y");
    let g = b.import().unwrap();
    assert_eq!(out_shape(&g, 0), vec![3, 2]);
}

#[test]
fn a_static_zero_dimension_is_not_called_dynamic() {
    let mut b = B::new(13);
    b.input("x", &[0, 3])
        .node("Relu", "relu", &["x"], &["y"], vec![])
        .output("y");
    let err = refusal(&b);
    assert!(
        err.contains("input 'x' has a zero dimension in [0, 3]") && !err.contains("dynamic"),
        "{err}"
    );
}

#[test]
fn gather_wraps_negative_run_time_indices() {
    let mut b = B::new(13);
    b.input("data", &[5, 2])
        .typed_input("indices", &[4], 7)
        .node(
            "Gather",
            "gather",
            &["data", "indices"],
            &["y"],
            vec![("axis", A::I(0))],
        )
        .output("y");
    let data: Vec<f32> = (0..10).map(|v| v as f32).collect();
    let out = run(
        &b,
        vec![
            ("data", NpyArray::f32(vec![5, 2], data)),
            (
                "indices",
                NpyArray {
                    shape: vec![4],
                    data: NpyData::I64(vec![0, -1, 3, -5]),
                },
            ),
        ],
    );
    assert_eq!(out[0].1.shape, vec![4, 2]);
    assert_eq!(
        out[0].1.to_f32(),
        vec![0., 1., 8., 9., 6., 7., 0., 1.],
        "rows 0, 4, 3, 0"
    );
}

#[test]
fn an_identity_transpose_keeps_the_input_name() {
    let mut b = B::new(13);
    b.input("data", &[2, 3, 4])
        .node(
            "Transpose",
            "t",
            &["data"],
            &["transposed"],
            vec![("perm", A::Is(vec![0, 1, 2]))],
        )
        .output("transposed");
    let data: Vec<f32> = (0..24).map(|v| v as f32).collect();
    let out = run(
        &b,
        vec![("data", NpyArray::f32(vec![2, 3, 4], data.clone()))],
    );
    assert_eq!(out[0].0, "transposed");
    assert_eq!(out[0].1.to_f32(), data);
}

#[test]
fn depth_to_space_and_space_to_depth_move_blocks_as_onnx_defines() {
    let (n, c, h, w, b) = (1usize, 8usize, 2usize, 3usize, 2usize);
    let x: Vec<f32> = (0..n * c * h * w).map(|v| v as f32).collect();
    let at = |c_: usize, y: usize, x_: usize, (hh, ww): (usize, usize)| (c_ * hh + y) * ww + x_;
    for mode in ["DCR", "CRD"] {
        let mut m = B::new(13);
        m.input("x", &[1, 8, 2, 3])
            .node(
                "DepthToSpace",
                "d2s",
                &["x"],
                &["y"],
                vec![("blocksize", A::I(2)), ("mode", A::S(mode))],
            )
            .output("y");
        let out = run(&m, vec![("x", NpyArray::f32(vec![1, 8, 2, 3], x.clone()))]);
        let depth = c / (b * b);
        assert_eq!(out[0].1.shape, vec![1, depth, h * b, w * b]);
        let mut want = vec![0.0; x.len()];
        for d in 0..depth {
            for y in 0..h * b {
                for x_ in 0..w * b {
                    let (i, j) = (y % b, x_ % b);
                    let src = if mode == "DCR" {
                        (i * b + j) * depth + d
                    } else {
                        d * b * b + i * b + j
                    };
                    want[at(d, y, x_, (h * b, w * b))] = x[at(src, y / b, x_ / b, (h, w))];
                }
            }
        }
        assert_eq!(out[0].1.to_f32(), want, "{mode}");
    }
    // SpaceToDepth of [1, 2, 4, 6] with blocksize 2, in both channel orders (mode: opset 25).
    let (c, h, w) = (2usize, 4usize, 6usize);
    let x: Vec<f32> = (0..c * h * w).map(|v| v as f32).collect();
    for mode in ["DCR", "CRD"] {
        let mut m = B::new(25);
        m.input("x", &[1, 2, 4, 6])
            .node(
                "SpaceToDepth",
                "s2d",
                &["x"],
                &["y"],
                vec![("blocksize", A::I(2)), ("mode", A::S(mode))],
            )
            .output("y");
        let out = run(&m, vec![("x", NpyArray::f32(vec![1, 2, 4, 6], x.clone()))]);
        assert_eq!(out[0].1.shape, vec![1, c * b * b, h / b, w / b]);
        let mut want = vec![0.0; x.len()];
        for ch in 0..c {
            for y in 0..h {
                for x_ in 0..w {
                    let block = (y % b) * b + x_ % b;
                    let oc = if mode == "DCR" {
                        block * c + ch
                    } else {
                        ch * b * b + block
                    };
                    want[at(oc, y / b, x_ / b, (h / b, w / b))] = x[at(ch, y, x_, (h, w))];
                }
            }
        }
        assert_eq!(out[0].1.to_f32(), want, "{mode}");
    }
}

#[test]
fn castlike_casts_to_the_second_inputs_type() {
    let mut b = B::new(15);
    b.input("x", &[2, 2])
        .init(itensor("like", &[1], vec![0]))
        .node("CastLike", "cast", &["x", "like"], &["y"], vec![])
        .output("y");
    let out = run(
        &b,
        vec![("x", NpyArray::f32(vec![2, 2], vec![1.7, -2.2, 3.0, 0.4]))],
    );
    // int64 narrows to int32 in the converted model; ONNX casts float to int by truncation.
    assert_eq!(out[0].1.data, NpyData::I32(vec![1, -2, 3, 0]));
    // Already the type: nothing to do.
    let mut b = B::new(15);
    b.input("x", &[2, 2])
        .init(ftensor("like", &[1], vec![0.0]))
        .node("CastLike", "cast", &["x", "like"], &["y"], vec![])
        .node("Relu", "relu", &["y"], &["z"], vec![])
        .output("z");
    let g = b.import().unwrap();
    assert_eq!(g.nodes.len(), 1);
}

#[test]
fn composite_reductions_sum_what_onnx_says() {
    let x = vec![1.0f32, -2.0, 3.0, 0.5, 4.0, -1.5];
    let rows = |f: &dyn Fn(&[f32]) -> f32| -> Vec<f32> { x.chunks(3).map(f).collect() };
    let cases: [(&str, Vec<f32>); 4] = [
        ("ReduceSumSquare", rows(&|r| r.iter().map(|v| v * v).sum())),
        ("ReduceL1", rows(&|r| r.iter().map(|v| v.abs()).sum())),
        (
            "ReduceL2",
            rows(&|r| r.iter().map(|v| v * v).sum::<f32>().sqrt()),
        ),
        (
            "ReduceLogSum",
            rows(&|r| r.iter().map(|v| v.abs()).sum::<f32>().ln()),
        ),
    ];
    for (op, want) in cases {
        let mut b = B::new(13);
        // ReduceLogSum of |x|: its sums must be positive.
        let input = if op == "ReduceLogSum" { "a" } else { "x" };
        b.input("x", &[2, 3])
            .node("Abs", "abs", &["x"], &["a"], vec![])
            .node(
                op,
                "reduce",
                &[input],
                &["y"],
                vec![("axes", A::Is(vec![1])), ("keepdims", A::I(0))],
            )
            .output("y");
        let out = run(&b, vec![("x", NpyArray::f32(vec![2, 3], x.clone()))]);
        assert_eq!(out[0].1.shape, vec![2], "{op}");
        for (g, w) in out[0].1.to_f32().iter().zip(&want) {
            assert!((g - w).abs() <= 1e-6 * w.abs().max(1.0), "{op}: {g} vs {w}");
        }
    }
    // A reduction over no axes that must leave its input alone is refused, not guessed.
    let mut b = B::new(18);
    b.input("x", &[2, 3])
        .node(
            "ReduceL2",
            "reduce",
            &["x"],
            &["y"],
            vec![("noop_with_empty_axes", A::I(1))],
        )
        .output("y");
    let err = refusal(&b);
    assert!(err.contains("noop_with_empty_axes=1"), "{err}");
}

#[test]
fn ceil_and_round_half_to_even() {
    let x = vec![
        -2.5f32, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4, 2.6, -2.6, 0.49999997, 8388609.0, -0.0,
    ];
    for (op, f) in [
        ("Ceil", f32::ceil as fn(f32) -> f32),
        ("Round", f32::round_ties_even),
    ] {
        let mut b = B::new(13);
        b.input("x", &[12])
            .node(op, "r", &["x"], &["y"], vec![])
            .output("y");
        let out = run(&b, vec![("x", NpyArray::f32(vec![12], x.clone()))]);
        let want: Vec<f32> = x.iter().map(|&v| f(v)).collect();
        assert_eq!(out[0].1.to_f32(), want, "{op}");
    }
}

#[test]
fn rms_normalization_divides_by_the_root_mean_square() {
    let mut b = B::new(23);
    b.input("x", &[2, 3])
        .init(ftensor("scale", &[3], vec![1.0, 2.0, 0.5]))
        .node(
            "RMSNormalization",
            "rms",
            &["x", "scale"],
            &["y"],
            vec![("epsilon", A::F(1e-3))],
        )
        .output("y");
    let x = vec![1.0f32, -2.0, 3.0, 0.5, 4.0, -1.5];
    let out = run(&b, vec![("x", NpyArray::f32(vec![2, 3], x.clone()))]);
    let mut want = Vec::new();
    for row in x.chunks(3) {
        let rms = (row.iter().map(|v| v * v).sum::<f32>() / 3.0 + 1e-3).sqrt();
        want.extend(row.iter().zip([1.0, 2.0, 0.5]).map(|(v, s)| v / rms * s));
    }
    for (g, w) in out[0].1.to_f32().iter().zip(&want) {
        assert!((g - w).abs() <= 1e-6 * w.abs().max(1.0), "{g} vs {w}");
    }
}

#[test]
fn layernorm_mean_and_inv_std_dev_outputs() {
    let mut b = B::new(17);
    b.input("x", &[2, 3])
        .init(ftensor("scale", &[3], vec![1.0, 2.0, 0.5]))
        .init(ftensor("bias", &[3], vec![0.1, 0.0, -0.1]))
        .node(
            "LayerNormalization",
            "ln",
            &["x", "scale", "bias"],
            &["y", "mean", "inv_std"],
            vec![("epsilon", A::F(1e-3))],
        )
        .output("y")
        .output("mean")
        .output("inv_std");
    let x = vec![1.0f32, -2.0, 3.0, 0.5, 4.0, -1.5];
    let out = run(&b, vec![("x", NpyArray::f32(vec![2, 3], x.clone()))]);
    let (mut y, mut mean, mut inv) = (Vec::new(), Vec::new(), Vec::new());
    for row in x.chunks(3) {
        let m = row.iter().sum::<f32>() / 3.0;
        let var = row.iter().map(|v| (v - m) * (v - m)).sum::<f32>() / 3.0;
        let i = 1.0 / (var + 1e-3).sqrt();
        let params = [(1.0, 0.1), (2.0, 0.0), (0.5, -0.1)];
        y.extend(
            row.iter()
                .zip(params)
                .map(|(v, (s, b))| (v - m) * i * s + b),
        );
        mean.push(m);
        inv.push(i);
    }
    let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["y", "mean", "inv_std"]);
    assert_eq!(out[1].1.shape, vec![2, 1]);
    for (got, want) in out.iter().zip([y, mean, inv]) {
        for (g, w) in got.1.to_f32().iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                "{}: {g} vs {w}",
                got.0
            );
        }
    }
}

#[test]
fn trilu_keeps_a_triangle() {
    for (upper, k) in [(1, 0), (1, 1), (0, 0), (0, -1)] {
        let mut b = B::new(14);
        b.input("x", &[3, 4])
            .init(itensor("k", &[], vec![k]))
            .node(
                "Trilu",
                "t",
                &["x", "k"],
                &["y"],
                vec![("upper", A::I(upper))],
            )
            .output("y");
        let x: Vec<f32> = (1..=12).map(|v| v as f32).collect();
        let out = run(&b, vec![("x", NpyArray::f32(vec![3, 4], x.clone()))]);
        let want: Vec<f32> = (0..12)
            .map(|e| {
                let d = (e % 4) as i64 - (e / 4) as i64;
                let keep = if upper == 1 { d >= k } else { d <= k };
                if keep {
                    x[e]
                } else {
                    0.0
                }
            })
            .collect();
        assert_eq!(out[0].1.to_f32(), want, "upper {upper}, k {k}");
    }
}

#[test]
fn argmax_and_argmin_can_select_the_last_tied_index() {
    let x = vec![1.0f32, 3.0, 3.0, 0.0, 0.0, 2.0, 0.0, 1.0];
    for (op, last, want) in [
        ("ArgMax", 1, vec![2, 1]),
        ("ArgMax", 0, vec![1, 1]),
        ("ArgMin", 1, vec![3, 2]),
        ("ArgMin", 0, vec![3, 0]),
    ] {
        let mut b = B::new(13);
        b.input("x", &[2, 4])
            .node(
                op,
                "arg",
                &["x"],
                &["y"],
                vec![
                    ("axis", A::I(1)),
                    ("keepdims", A::I(0)),
                    ("select_last_index", A::I(last)),
                ],
            )
            .output("y");
        let out = run(&b, vec![("x", NpyArray::f32(vec![2, 4], x.clone()))]);
        let got: Vec<i64> = out[0].1.to_f32().iter().map(|&v| v as i64).collect();
        assert_eq!(got, want, "{op} select_last_index={last}");
    }
}

#[test]
fn lp_normalization_and_the_inference_dropout_mask() {
    let x = vec![1.0f32, -2.0, 3.0, 0.0, 0.0, 0.0];
    for p in [1, 2] {
        let mut b = B::new(13);
        b.input("x", &[2, 3])
            .node(
                "LpNormalization",
                "lp",
                &["x"],
                &["y"],
                vec![("p", A::I(p)), ("axis", A::I(1))],
            )
            .output("y");
        let out = run(&b, vec![("x", NpyArray::f32(vec![2, 3], x.clone()))]);
        let mut want = Vec::new();
        for row in x.chunks(3) {
            let norm = if p == 1 {
                row.iter().map(|v| v.abs()).sum::<f32>()
            } else {
                row.iter().map(|v| v * v).sum::<f32>().sqrt()
            };
            want.extend(row.iter().map(|v| if norm == 0.0 { 0.0 } else { v / norm }));
        }
        for (g, w) in out[0].1.to_f32().iter().zip(&want) {
            assert!((g - w).abs() <= 1e-6, "p {p}: {g} vs {w}");
        }
    }
    // Dropout's mask in inference mode keeps everything.
    let mut b = B::new(13);
    b.input("x", &[2, 3])
        .node("Dropout", "drop", &["x"], &["y", "mask"], vec![])
        .output("y")
        .output("mask");
    let out = run(&b, vec![("x", NpyArray::f32(vec![2, 3], x.clone()))]);
    assert_eq!(out[0].1.to_f32(), x);
    assert_eq!(out[1].1.data, NpyData::Bool(vec![true; 6]));
}

#[test]
fn isnan_isinf_and_hardmax() {
    let x = vec![
        1.0f32,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -3.0,
        3.0,
    ];
    for (op, attrs, want) in [
        ("IsNaN", vec![], [false, true, false, false, false, false]),
        ("IsInf", vec![], [false, false, true, true, false, false]),
        (
            "IsInf",
            vec![("detect_negative", A::I(0))],
            [false, false, true, false, false, false],
        ),
    ] {
        let mut b = B::new(20);
        b.input("x", &[6])
            .node(op, "is", &["x"], &["y"], attrs)
            .output("y");
        let out = run(&b, vec![("x", NpyArray::f32(vec![6], x.clone()))]);
        assert_eq!(out[0].1.data, NpyData::Bool(want.to_vec()), "{op}");
    }
    // Hardmax: the first of tied maxima.
    let mut b = B::new(13);
    b.input("x", &[2, 3])
        .node("Hardmax", "h", &["x"], &["y"], vec![("axis", A::I(1))])
        .output("y");
    let x = vec![1.0f32, 5.0, 5.0, -1.0, -3.0, -2.0];
    let out = run(&b, vec![("x", NpyArray::f32(vec![2, 3], x))]);
    assert_eq!(out[0].1.to_f32(), vec![0., 1., 0., 1., 0., 0.]);
}

#[test]
fn center_crop_pad_crops_and_pads_around_the_center() {
    // [3, 5] → [2, 8]: rows cropped by one (the extra one at the end), columns padded by 3
    // (1 before, 2 after).
    let mut b = B::new(18);
    b.input("x", &[3, 5])
        .init(itensor("shape", &[2], vec![2, 8]))
        .node("CenterCropPad", "ccp", &["x", "shape"], &["y"], vec![])
        .output("y");
    let x: Vec<f32> = (1..=15).map(|v| v as f32).collect();
    let out = run(&b, vec![("x", NpyArray::f32(vec![3, 5], x))]);
    assert_eq!(out[0].1.shape, vec![2, 8]);
    #[rustfmt::skip]
    let want = vec![
        0., 1., 2., 3., 4., 5., 0., 0.,
        0., 6., 7., 8., 9., 10., 0., 0.,
    ];
    assert_eq!(out[0].1.to_f32(), want);
}
