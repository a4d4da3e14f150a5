//! Differential tests: every fixture model is converted, run by literun, and compared with tract
//! running the original ONNX (float: max relative error ≤ 1e-4).

use litecvt::convert::{convert_file, ConvertOptions};
use litecvt::npy::{self, NpyArray};
use litecvt::passes::PassSelection;
use litecvt::runtime::{error_stats, run_lite, run_onnx_tract};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const TOLERANCE: f32 = 1e-4;

/// Models the converter must reject, and a word the error must contain.
const EXPECTED_UNSUPPORTED: &[(&str, &str)] = &[("erf", "Erf")];

/// Models that convert but whose literun run is not yet supported: (name, why). Each entry is a
/// known gap, listed so the rest of the zoo stays checked; remove entries as they are fixed.
const KNOWN_GAPS: &[(&str, &str)] = &[];

/// Models tract cannot run or gets wrong, checked against the outputs stored next to them
/// (onnxruntime's, or for batch-first RNNs, which onnxruntime lacks, onnxruntime's on the
/// equivalent layout-0 model): (name, why).
const STORED_REFERENCE: &[(&str, &str)] = &[
    (
        "lstm_reverse_states",
        "tract 0.21 differs from onnxruntime on a reverse LSTM with initial states",
    ),
    (
        "lstm_bidirectional_layout1",
        "tract cannot translate a batch-first (layout=1) LSTM",
    ),
    (
        "lstm_reverse_layout1",
        "tract cannot translate a batch-first (layout=1) LSTM",
    ),
    (
        "gru_reverse_layout1",
        "tract differs from onnxruntime on a batch-first (layout=1) GRU",
    ),
    ("attention_gqa", "tract 0.21 has no Attention (opset 23)"),
    ("loop_recurrence", "tract cannot translate Loop"),
    ("loop_until", "tract cannot translate Loop"),
    ("loop_scan", "tract cannot translate Loop"),
];

/// The stored expected outputs of a fixture (`<stem>.expected.npy`, `<stem>.expected_<i>.npy`).
fn stored_outputs(model: &Path) -> Result<Vec<NpyArray>, String> {
    let stem = model.with_extension("");
    let mut v =
        vec![npy::read(&stem.with_extension("expected.npy")).map_err(|e| format!("{e:#}"))?];
    for i in 1.. {
        let p = stem.with_extension(format!("expected_{i}.npy"));
        if !p.exists() {
            break;
        }
        v.push(npy::read(&p).map_err(|e| format!("{e:#}"))?);
    }
    Ok(v)
}

/// Models tract cannot run, checked against an equivalent model instead.
fn reference_model(model: &Path) -> PathBuf {
    match model.file_stem().and_then(|s| s.to_str()) {
        // tract rejects training-mode BatchNormalization; the inference export has the same weights.
        Some("digits_cnn_training") => model.with_file_name("digits_cnn.onnx"),
        _ => model.to_path_buf(),
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn inputs_for(model: &Path) -> Vec<NpyArray> {
    let stem = model.with_extension("");
    let mut v = vec![npy::read(&stem.with_extension("input.npy")).expect("fixture input")];
    let second = stem.with_extension("input2.npy");
    if second.exists() {
        v.push(npy::read(&second).expect("fixture input2"));
    }
    v
}

fn options_for(name: &str) -> ConvertOptions {
    let mut input_shapes = HashMap::new();
    if name == "dynamic" {
        input_shapes.insert("input".to_string(), vec![1, 4, 6, 6]);
    }
    ConvertOptions {
        input_shapes,
        // The training-mode export is converted as its inference form (refused otherwise).
        training_as_inference: name == "digits_cnn_training",
        ..Default::default()
    }
}

/// Converts and compares one model; Err describes the failure.
fn check(model: &Path, nhwc_io: bool) -> Result<f32, String> {
    check_with(model, nhwc_io, PassSelection::All)
}

fn check_with(model: &Path, nhwc_io: bool, passes: PassSelection) -> Result<f32, String> {
    let name = model.file_stem().unwrap().to_string_lossy().to_string();
    let mut opts = options_for(&name);
    opts.nhwc_io = nhwc_io;
    opts.passes = passes;
    let conv = convert_file(model, &opts).map_err(|e| format!("convert: {e:#}"))?;
    let inputs = inputs_for(model);
    let reference = if STORED_REFERENCE.iter().any(|(n, _)| *n == name) {
        stored_outputs(model)?
    } else {
        run_onnx_tract(&reference_model(model), &inputs).map_err(|e| format!("tract: {e:#}"))?
    };
    let lite_inputs: Vec<(Option<String>, NpyArray)> = inputs
        .iter()
        .map(|a| {
            let a = if nhwc_io && a.shape.len() == 4 {
                to_nhwc(a)
            } else {
                a.clone()
            };
            (None, a)
        })
        .collect();
    let ours = run_lite(&conv.bytes, &name, &lite_inputs).map_err(|e| format!("literun: {e:#}"))?;
    if ours.len() != reference.len() {
        return Err(format!(
            "{} outputs, tract has {}",
            ours.len(),
            reference.len()
        ));
    }
    let mut worst = 0f32;
    for ((oname, a), r) in ours.iter().zip(&reference) {
        let a = if nhwc_io && a.shape.len() == 4 {
            to_nchw(a)
        } else {
            a.clone()
        };
        if a.shape != r.shape {
            return Err(format!(
                "output '{oname}' shape {:?}, tract {:?}",
                a.shape, r.shape
            ));
        }
        let s = error_stats(&a.to_f32(), &r.to_f32());
        worst = worst.max(s.max_rel);
        if s.max_rel.is_nan() || s.max_rel > TOLERANCE {
            return Err(format!(
                "output '{oname}': max rel error {:.3e} (max abs {:.3e})",
                s.max_rel, s.max_abs
            ));
        }
    }
    Ok(worst)
}

fn permute4(a: &NpyArray, perm: [usize; 4]) -> NpyArray {
    let s = &a.shape;
    let v = a.to_f32();
    let shape: Vec<usize> = perm.iter().map(|&p| s[p]).collect();
    let strides = [s[1] * s[2] * s[3], s[2] * s[3], s[3], 1];
    let mut out = Vec::with_capacity(v.len());
    for i0 in 0..shape[0] {
        for i1 in 0..shape[1] {
            for i2 in 0..shape[2] {
                for i3 in 0..shape[3] {
                    let idx = [i0, i1, i2, i3];
                    let mut src = 0;
                    for d in 0..4 {
                        src += idx[d] * strides[perm[d]];
                    }
                    out.push(v[src]);
                }
            }
        }
    }
    NpyArray::f32(shape, out)
}

fn to_nhwc(a: &NpyArray) -> NpyArray {
    permute4(a, [0, 2, 3, 1])
}

fn to_nchw(a: &NpyArray) -> NpyArray {
    permute4(a, [0, 3, 1, 2])
}

fn run_all(models: Vec<PathBuf>, nhwc_io: bool) {
    let mut failures = Vec::new();
    let mut passed = 0;
    for model in &models {
        let name = model.file_stem().unwrap().to_string_lossy().to_string();
        if KNOWN_GAPS.iter().any(|(n, _)| *n == name) {
            continue;
        }
        if let Some((_, word)) = EXPECTED_UNSUPPORTED.iter().find(|(n, _)| *n == name) {
            match convert_file(model, &options_for(&name)) {
                Ok(_) => failures.push(format!("{name}: converted, but should be rejected")),
                Err(e) if format!("{e:#}").contains(word) => passed += 1,
                Err(e) => failures.push(format!("{name}: error does not name {word}: {e:#}")),
            }
            continue;
        }
        match check(model, nhwc_io) {
            Ok(_) => passed += 1,
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} passed, {} failed:\n{}",
        passed,
        failures.len(),
        failures.join("\n")
    );
    assert!(passed > 0, "no fixture was checked");
}

#[test]
fn main_fixtures_match_tract() {
    let models = [
        "digits_cnn",
        "mobilenetv2_block",
        "attention_block",
        "digits_cnn_training",
    ]
    .iter()
    .map(|n| root().join("fixtures").join(format!("{n}.onnx")))
    .collect();
    run_all(models, false);
}

#[test]
fn main_fixtures_match_tract_with_nhwc_io() {
    let models = ["digits_cnn", "mobilenetv2_block"]
        .iter()
        .map(|n| root().join("fixtures").join(format!("{n}.onnx")))
        .collect();
    run_all(models, true);
}

#[test]
fn op_zoo_matches_tract() {
    let mut models: Vec<PathBuf> = std::fs::read_dir(root().join("fixtures/ops"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    models.sort();
    run_all(models, false);
}

#[test]
fn block_moves_are_one_op_each_with_nhwc_io() {
    // DepthToSpace CRD (PixelShuffle): its channel GATHER folds into the convolution's weights.
    for (model, ops) in [
        ("depth_to_space_crd", ["CONV_2D", "DEPTH_TO_SPACE"]),
        ("depth_to_space_dcr", ["CONV_2D", "DEPTH_TO_SPACE"]),
        ("space_to_depth", ["CONV_2D", "SPACE_TO_DEPTH"]),
    ] {
        let conv = convert_file(
            &root().join(format!("fixtures/ops/{model}.onnx")),
            &ConvertOptions {
                nhwc_io: true,
                ..Default::default()
            },
        )
        .expect("converts");
        let got: Vec<_> = conv.ops_after.keys().map(|k| k.to_string()).collect();
        assert_eq!(got, ops, "{model}");
    }
}

#[test]
fn plain_cnn_has_no_transpose_and_one_op_per_layer() {
    let conv = convert_file(
        &root().join("fixtures/mobilenetv2_block.onnx"),
        &ConvertOptions {
            nhwc_io: true,
            ..Default::default()
        },
    )
    .expect("converts");
    assert!(
        !conv.ops_after.contains_key("TRANSPOSE"),
        "ops: {:?}",
        conv.ops_after
    );
    let conv = convert_file(
        &root().join("fixtures/digits_cnn.onnx"),
        &ConvertOptions::default(),
    )
    .expect("converts");
    // The interface keeps NCHW, but with one input channel NCHW → NHWC only moves a unit axis:
    // a RESHAPE at the input, and no TRANSPOSE anywhere.
    assert!(
        !conv.ops_after.contains_key("TRANSPOSE"),
        "ops: {:?}",
        conv.ops_after
    );
    assert_eq!(
        conv.ops_after.get("RESHAPE"),
        Some(&2),
        "input reshape and flatten: {:?}",
        conv.ops_after
    );
}

#[test]
fn conversion_is_deterministic() {
    let path = root().join("fixtures/mobilenetv2_block.onnx");
    let a = convert_file(&path, &ConvertOptions::default())
        .unwrap()
        .bytes;
    let b = convert_file(&path, &ConvertOptions::default())
        .unwrap()
        .bytes;
    assert_eq!(a, b);
}

#[test]
fn batchnorm_and_activations_fold_into_the_layers() {
    let conv = convert_file(
        &root().join("fixtures/mobilenetv2_block.onnx"),
        &ConvertOptions {
            nhwc_io: true,
            ..Default::default()
        },
    )
    .expect("converts");
    let h = &conv.ops_after;
    // 7 convs (5 regular, 2 depthwise), one ADD for the residual, no BN/activation/bias ops left.
    assert_eq!(h.get("CONV_2D"), Some(&5), "ops: {h:?}");
    assert_eq!(h.get("DEPTHWISE_CONV_2D"), Some(&2), "ops: {h:?}");
    assert_eq!(h.get("ADD"), Some(&1), "ops: {h:?}");
    assert_eq!(h.get("FULLY_CONNECTED"), Some(&1), "ops: {h:?}");
    for gone in ["MUL", "RELU6", "RELU", "TRANSPOSE"] {
        assert!(!h.contains_key(gone), "{gone} left over: {h:?}");
    }
}

#[test]
fn training_mode_export_converts_like_the_inference_export() {
    let a = convert_file(
        &root().join("fixtures/digits_cnn.onnx"),
        &ConvertOptions::default(),
    )
    .unwrap();
    let training = root().join("fixtures/digits_cnn_training.onnx");
    let b = convert_file(&training, &options_for("digits_cnn_training")).unwrap();
    assert_eq!(a.ops_after, b.ops_after);
    // Without --training-as-inference its training-mode nodes are refused, each named.
    let err = format!(
        "{:#}",
        convert_file(&training, &ConvertOptions::default()).unwrap_err()
    );
    assert!(
        err.contains("'/bn1/BatchNormalization' (BatchNormalization): training_mode=1")
            && err.contains("--training-as-inference"),
        "{err}"
    );
}

#[test]
fn unoptimized_conversion_is_still_correct_and_larger() {
    // `--no-optimize` is a debugging aid: the result must still be right, only bigger.
    for name in ["mobilenetv2_block", "attention_block", "digits_cnn"] {
        let model = root().join("fixtures").join(format!("{name}.onnx"));
        check_with(&model, false, PassSelection::None).unwrap_or_else(|e| panic!("{name}: {e}"));
        let count = |passes| {
            let opts = ConvertOptions {
                passes,
                ..Default::default()
            };
            let c = convert_file(&model, &opts).unwrap();
            c.ops_after.values().sum::<usize>()
        };
        assert!(
            count(PassSelection::None) > count(PassSelection::All),
            "{name}: optimizations removed nothing"
        );
    }
}

#[test]
fn pass_selection_rejects_unknown_names() {
    let err = PassSelection::parse_list("prune,nope")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("nope") && err.contains("fold_batchnorm"),
        "{err}"
    );
    assert!(PassSelection::parse_list("prune, fold_batchnorm").is_ok());
}

/// TFLite op histogram of a fixture converted with default options.
fn ops_of(rel: &str) -> std::collections::BTreeMap<String, usize> {
    convert_file(
        &root().join("fixtures").join(rel),
        &ConvertOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{rel}: {e:#}"))
    .ops_after
    .into_iter()
    .collect()
}

#[test]
fn decomposed_layernorm_becomes_one_layernorm() {
    let h = ops_of("attention_block.onnx");
    for gone in ["POW", "SQRT", "DIV"] {
        assert!(!h.contains_key(gone), "{gone} left over: {h:?}");
    }
    // 39 before the LayerNorm passes; both LayerNorms' gamma/beta fold into the next dense layer.
    assert!(h.values().sum::<usize>() <= 35, "ops: {h:?}");
    for name in ["layernorm_decomposed", "layernorm_decomposed_recip"] {
        let h = ops_of(&format!("ops/{name}.onnx"));
        assert_eq!(h.get("MEAN"), Some(&2), "{name}: {h:?}");
        assert_eq!(h.get("RSQRT"), Some(&1), "{name}: {h:?}");
        for gone in ["POW", "SQRT", "DIV"] {
            assert!(!h.contains_key(gone), "{name}: {gone} left over: {h:?}");
        }
    }
    // gamma and beta went into the dense layer: only the normalisation's own MUL is left.
    let h = ops_of("ops/layernorm_dense.onnx");
    assert_eq!(h.get("MUL"), Some(&1), "{h:?}");
    assert_eq!(h.get("ADD"), Some(&1), "{h:?}");
    // Over a non-last axis the chain is not a LayerNorm op: it stays as written.
    let h = ops_of("ops/layernorm_decomposed_axis1.onnx");
    assert_eq!(h.get("POW"), Some(&1), "{h:?}");
}

#[test]
fn swish_patterns_become_single_activations() {
    for name in ["silu", "silu_swapped"] {
        let h = ops_of(&format!("ops/{name}.onnx"));
        let want = [("LOGISTIC".to_string(), 1), ("MUL".to_string(), 1)];
        assert_eq!(h, want.into_iter().collect(), "{name}");
    }
    for name in [
        "hard_swish_decomposed",
        "hardswish_clip_div",
        "hardswish_clip_x_div",
        "hardswish_sixth_first",
    ] {
        let h = ops_of(&format!("ops/{name}.onnx"));
        let want = [("HARD_SWISH".to_string(), 1)];
        assert_eq!(h, want.into_iter().collect(), "{name}");
    }
    // Division by 5: hard-swish times 6/5.
    let h = ops_of("ops/hardswish_clip_div5.onnx");
    let want = [("HARD_SWISH".to_string(), 1), ("MUL".to_string(), 1)];
    assert_eq!(h, want.into_iter().collect());
}

#[test]
fn explicit_pads_fold_into_convs_and_max_pools_only_when_exact() {
    let has_pad = |h: &std::collections::BTreeMap<String, usize>| {
        h.contains_key("PAD") || h.contains_key("PADV2")
    };
    for name in [
        "pad_conv",
        "pad_conv_tf_stride2",
        "pad_depthwise",
        "pad_maxpool_relu",
    ] {
        let h = ops_of(&format!("ops/{name}.onnx"));
        assert!(!has_pad(&h), "{name}: {h:?}");
    }
    // Not foldable: non-zero value, zeros counted by an average, zeros that can win a max, and
    // a padding TFLite's SAME does not express.
    for name in [
        "pad_conv_value",
        "pad_avgpool",
        "pad_maxpool",
        "pad_conv_stride2",
    ] {
        let h = ops_of(&format!("ops/{name}.onnx"));
        assert!(has_pad(&h), "{name}: {h:?}");
    }
}

#[test]
fn transformers_keep_only_the_transposes_the_math_needs() {
    // Four heads: q, k, v must bring the head axis in front of the sequence for BATCH_MATMUL,
    // and the merged heads must go back; nothing else moves data.
    let h = ops_of("attention_block.onnx");
    assert_eq!(h.get("TRANSPOSE"), Some(&4), "{h:?}");
    // One head: the head split and merge only move a unit axis, so they are reshapes.
    let h = ops_of("ops/attention_single_head.onnx");
    assert!(!h.contains_key("TRANSPOSE"), "{h:?}");
    assert_eq!(h.get("BATCH_MATMUL"), Some(&2), "{h:?}");
}

#[test]
fn deep_cnn_converts_to_one_conv_per_layer() {
    // Conv + BatchNorm + Relu ×30: every BatchNorm and Relu folds into its conv.
    let model = litecvt::import::builder::deep_cnn(30);
    let c =
        litecvt::convert::convert_bytes(&model, "deep_cnn", &ConvertOptions::default()).unwrap();
    assert_eq!(c.ops_after.get("CONV_2D"), Some(&30), "{:?}", c.ops_after);
    let total: usize = c.ops_after.values().sum();
    // + MEAN, FULLY_CONNECTED and the NCHW input/output edges.
    assert!(total <= 33, "{:?}", c.ops_after);
}

#[test]
fn nan_constants_are_named_in_a_warning() {
    use litecvt::import::builder::{ftensor, OnnxBuilder};
    let mut b = OnnxBuilder::new(13);
    b.input("input", &[1, 4])
        .init(ftensor(
            "bad_offset",
            &[4],
            vec![0.0, f32::NAN, 1.0, f32::INFINITY],
        ))
        .node("Add", "add", &["input", "bad_offset"], &["output"], vec![])
        .output("output");
    let c = litecvt::convert::convert_bytes(&b.bytes(), "m.onnx", &ConvertOptions::default())
        .expect("NaN constants are legal");
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert!(c.warnings[0].contains("bad_offset"), "{:?}", c.warnings);
}

/// The converter stores its arena plan as TFLite Micro's `OfflineMemoryAllocation` metadata;
/// literun uses it (same size as planning itself), and rejects a plan whose live tensors
/// overlap.
#[test]
fn stored_memory_plan_is_used_and_verified() {
    let model = root().join("fixtures/mobilenetv2_block.onnx");
    let conv = convert_file(&model, &ConvertOptions::default()).expect("converts");
    let bytes = literun::AlignedBytes::from_slice(&conv.bytes);
    let m = literun::Model::from_bytes(&bytes).unwrap();
    let plan = m.memory_plan().unwrap();
    assert!(plan.stored);
    let stored = m.stored_plan().unwrap().unwrap();
    assert_eq!(stored.len(), m.tensors().len());
    assert_eq!(m.arena_bytes().unwrap(), conv.arena_bytes);
    assert_eq!(
        literun::Interpreter::new(&m).unwrap().arena_bytes(),
        conv.arena_bytes
    );

    // Tamper: every planned tensor at offset 0 (the words follow [1, 0, n] in the file).
    let mut header = vec![1i32, 0, stored.len() as i32];
    header.extend(&stored);
    let needle: Vec<u8> = header.iter().flat_map(|v| v.to_le_bytes()).collect();
    let at = conv
        .bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("plan words in the file");
    let mut bad = conv.bytes.clone();
    for (i, &o) in stored.iter().enumerate() {
        if o >= 0 {
            let p = at + 12 + 4 * i;
            bad[p..p + 4].copy_from_slice(&0i32.to_le_bytes());
        }
    }
    let bad = literun::AlignedBytes::from_slice(&bad);
    let m = literun::Model::from_bytes(&bad).unwrap();
    let e = literun::Interpreter::new(&m)
        .err()
        .expect("overlapping plan accepted");
    assert!(e.to_string().contains("overlap"), "{e}");
}
