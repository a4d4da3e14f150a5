//! Importer robustness: malformed, truncated, cyclic and oversized models are errors naming what
//! is wrong, never panics; every fixture imports, also with its attributes, data and wiring
//! mutated.

use super::builder::{ftensor, itensor, value_info, Attr as A, OnnxBuilder as B};
use super::*;
use prost::Message;
use tract_onnx::pb::{tensor_shape_proto::dimension::Value as Dim, type_proto, ModelProto};

#[test]
fn garbage_and_truncated_bytes_are_errors() {
    let mut b = B::new(13);
    b.input("x", &[1, 4])
        .weights("w", &[4, 4])
        .node("MatMul", "mm", &["x", "w"], &["y"], vec![])
        .output("y");
    let bytes = b.bytes();
    assert!(b.import().is_ok());
    for cut in [1, 5, bytes.len() / 2, bytes.len() - 1] {
        let r = import_onnx_bytes(&bytes[..cut], "model.onnx", &ImportOptions::default());
        assert!(r.is_err(), "cut at {cut}");
        assert!(r.unwrap_err().to_string().starts_with("model.onnx: "));
    }
    let mut seed = 12345u32;
    for len in [0, 1, 7, 100, 1000] {
        let junk: Vec<u8> = (0..len)
            .map(|_| {
                seed = seed.wrapping_mul(1103515245).wrapping_add(12345);
                (seed >> 16) as u8
            })
            .collect();
        assert!(import_onnx_bytes(&junk, "junk.onnx", &ImportOptions::default()).is_err());
    }
    // Flipping bytes never panics.
    for i in 0..bytes.len() {
        let mut m = bytes.clone();
        m[i] ^= 0xA5;
        let _ = import_onnx_bytes(&m, "model.onnx", &ImportOptions::default());
    }
}

#[test]
fn missing_initializer_is_named() {
    let mut b = B::new(13);
    b.input("x", &[1, 2, 4, 4])
        .node(
            "Conv",
            "/layer1/Conv",
            &["x", "conv.weight"],
            &["y"],
            vec![],
        )
        .output("y");
    let err = b.import().unwrap_err().to_string();
    assert!(
        err.contains("node '/layer1/Conv' (Conv): input 'conv.weight' is not produced"),
        "{err}"
    );
    // Runtime weights are refused.
    let mut b = B::new(13);
    b.input("x", &[1, 2, 4, 4])
        .input("w", &[3, 2, 3, 3])
        .node("Conv", "/layer1/Conv", &["x", "w"], &["y"], vec![])
        .output("y");
    let err = b.import().unwrap_err().to_string();
    assert_eq!(
        err,
        "model.onnx: node '/layer1/Conv' (Conv): weights must be constant"
    );
}

#[test]
fn cycles_are_errors() {
    let mut b = B::new(13);
    b.input("x", &[1, 4])
        .node("Add", "a", &["x", "c"], &["b"], vec![])
        .node("Relu", "r", &["b"], &["c"], vec![])
        .output("c");
    let err = b.import().unwrap_err().to_string();
    assert!(err.contains("cycle"), "{err}");
}

#[test]
fn wrong_attribute_type_is_an_error() {
    let mut b = B::new(13);
    b.input("x", &[1, 4])
        .node("Softmax", "sm", &["x"], &["y"], vec![("axis", A::F(1.0))])
        .output("y");
    let err = b.import().unwrap_err().to_string();
    assert!(
        err.contains("node 'sm' (Softmax): attribute 'axis' must be INT, got FLOAT"),
        "{err}"
    );
}

#[test]
fn huge_shapes_are_errors() {
    let mut b = B::new(13);
    b.input("x", &[1, 4])
        .init(itensor("s", &[3], vec![1 << 40, 1 << 40, 1 << 40]))
        .node("ConstantOfShape", "cos", &["s"], &["c"], vec![])
        .node("Add", "add", &["x", "c"], &["y"], vec![])
        .output("y");
    assert!(b.import().is_err());
    let mut b = B::new(13);
    b.input("x", &[1, 4])
        .init(itensor("r", &[2], vec![1 << 30, 1 << 30]))
        .node("Tile", "tile", &["x", "r"], &["y"], vec![])
        .output("y");
    assert!(b.import().is_err());
    let mut b = B::new(13);
    b.g.input
        .push(value_info("x", &[Some(1 << 40), Some(1 << 40)], &[]));
    b.node("Relu", "r", &["x"], &["y"], vec![]).output("y");
    assert!(b.import().is_err());
    // An initializer claiming more elements than it holds.
    let mut b = B::new(13);
    let mut t = ftensor("w", &[1 << 20, 1 << 20], vec![1.0; 4]);
    t.dims = vec![1 << 20, 1 << 20];
    b.input("x", &[1, 4])
        .init(t)
        .node("Add", "add", &["x", "w"], &["y"], vec![])
        .output("y");
    let err = b.import().unwrap_err().to_string();
    assert!(
        err.contains("node 'add' (Add)") && err.contains("'w'"),
        "{err}"
    );
}

/// Every fixture imports (the op zoo, the CNNs, the attention block).
#[test]
fn fixtures_import() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    for dir in [root.clone(), root.join("ops")] {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "onnx") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut failures = Vec::new();
    for p in &files {
        let mut opts = ImportOptions::default();
        if p.file_stem().is_some_and(|s| s == "dynamic") {
            opts.input_shapes.insert("input".into(), vec![1, 4, 6, 6]);
        }
        opts.training_as_inference = p.file_stem().is_some_and(|s| s == "digits_cnn_training");
        if let Err(e) = import_onnx(p, &opts) {
            failures.push(format!("{e:#}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Structured fuzzing: the fixtures with attributes, initializer data and dims, input shapes and
/// node wiring mutated to extreme values must import or fail, never panic.
#[test]
fn mutated_fixtures_never_panic() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut files: Vec<_> = [root.clone(), root.join("ops")]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|rd| rd.flatten().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "onnx"))
        .collect();
    files.sort();
    let extremes = [
        0i64,
        -1,
        1,
        2,
        -2,
        3,
        1 << 40,
        -(1 << 40),
        i64::MAX,
        i64::MIN,
        7,
    ];
    let mut seed = 0x2545F491u64;
    let mut rnd = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let opts = ImportOptions::default();
    for p in &files {
        let bytes = std::fs::read(p).unwrap();
        let model = ModelProto::decode(bytes.as_slice()).unwrap();
        for _ in 0..40 {
            let mut m = model.clone();
            let g = m.graph.as_mut().unwrap();
            for _ in 0..1 + rnd(3) {
                match rnd(6) {
                    0 | 1 if !g.node.is_empty() => {
                        let k = rnd(g.node.len());
                        let node = &mut g.node[k];
                        if !node.attribute.is_empty() {
                            let j = rnd(node.attribute.len());
                            let a = &mut node.attribute[j];
                            a.i = extremes[rnd(extremes.len())];
                            for v in a.ints.iter_mut() {
                                if rnd(2) == 0 {
                                    *v = extremes[rnd(extremes.len())];
                                }
                            }
                            if rnd(4) == 0 {
                                a.ints.push(extremes[rnd(extremes.len())]);
                            }
                            if rnd(4) == 0 {
                                a.r#type = rnd(15) as i32;
                            }
                            a.f = [0.0, -1.0, f32::NAN, f32::INFINITY, 1e30][rnd(5)];
                        }
                    }
                    2 if !g.initializer.is_empty() => {
                        let k = rnd(g.initializer.len());
                        let t = &mut g.initializer[k];
                        if t.data_type == 7 {
                            let n = t.int64_data.len().max(t.raw_data.len() / 8);
                            t.raw_data.clear();
                            t.int64_data = (0..n).map(|_| extremes[rnd(extremes.len())]).collect();
                        } else if !t.dims.is_empty() {
                            let j = rnd(t.dims.len());
                            t.dims[j] = extremes[rnd(extremes.len())];
                        }
                    }
                    3 => {
                        if let Some(d) = g.input.first_mut().and_then(|i| i.r#type.as_mut()) {
                            if let Some(type_proto::Value::TensorType(tt)) = d.value.as_mut() {
                                if let Some(s) = tt.shape.as_mut() {
                                    if !s.dim.is_empty() {
                                        let j = rnd(s.dim.len());
                                        s.dim[j].value =
                                            Some(Dim::DimValue(extremes[rnd(extremes.len())]));
                                    }
                                }
                            }
                        }
                    }
                    4 if !g.node.is_empty() => {
                        let k = rnd(g.node.len());
                        let node = &mut g.node[k];
                        if !node.input.is_empty() && rnd(2) == 0 {
                            let j = rnd(node.input.len());
                            node.input[j] = String::new();
                        } else {
                            node.output.push("extra".into());
                        }
                    }
                    _ => {
                        for nd in g.node.iter_mut() {
                            if nd.op_type == "Constant" {
                                for a in nd.attribute.iter_mut() {
                                    if let Some(t) = a.t.as_mut() {
                                        t.raw_data.clear();
                                        t.float_data.clear();
                                        let n: i64 = t.dims.iter().product::<i64>().clamp(0, 64);
                                        t.int64_data =
                                            (0..n).map(|_| extremes[rnd(extremes.len())]).collect();
                                        t.data_type = 7;
                                    }
                                }
                            }
                        }
                    }
                }
            }
            let _ = import_onnx_bytes(&m.encode_to_vec(), "fuzz.onnx", &opts);
        }
    }
}
