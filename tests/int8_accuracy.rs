//! What makes full int8 survive trained models: float-exact rewrites before calibration (a
//! per-channel scale after a ReLU moved into the conv), empirical bias correction, the
//! `--min-snr` search and its honest failure, and calibration with non-float inputs.

mod common;

use common::noise;
use litecvt::convert::{convert_bytes, Conversion, ConvertOptions};
use litecvt::import::builder::{ftensor, OnnxBuilder};
use litecvt::npy::{self, NpyArray, NpyData};
use litecvt::passes::PassSelection;
use litecvt::quantize::QuantizeMode;
use litecvt::runtime::{error_stats, run_lite};
use std::path::Path;

/// Two blocks of Conv3x3 → ReLU → per-channel Mul → per-channel Add (batch norm after the
/// activation, as some U-Nets are exported). Channel c of each conv is scaled by 1/s[c] and the
/// Mul multiplies by s[c], s spanning 5e-4 to 31: the conv outputs' raw ranges span five orders
/// of magnitude while the normalised ones are alike.
fn relu_then_scale_model() -> Vec<u8> {
    let c = 8usize;
    let s: Vec<f32> = (0..c)
        .map(|i| 5e-4f32 * (31.0f32 / 5e-4).powf(i as f32 / (c - 1) as f32))
        .collect();
    let mut b = OnnxBuilder::new(13);
    b.input("input", &[1, 3, 16, 16]);
    let mut x = "input".to_string();
    let mut cin = 3usize;
    for k in 0..2 {
        let mut w = noise(c * cin * 9, 10 + k);
        for (i, v) in w.iter_mut().enumerate() {
            *v /= s[i / (cin * 9)];
        }
        let names = [
            format!("w{k}"),
            format!("b{k}"),
            format!("s{k}"),
            format!("t{k}"),
        ];
        b.init(ftensor(&names[0], &[c as i64, cin as i64, 3, 3], w));
        let bias: Vec<f32> = noise(c, 20 + k)
            .iter()
            .zip(&s)
            .map(|(v, s)| v / s)
            .collect();
        b.init(ftensor(&names[1], &[c as i64], bias));
        b.init(ftensor(&names[2], &[1, c as i64, 1, 1], s.clone()));
        b.init(ftensor(&names[3], &[1, c as i64, 1, 1], noise(c, 30 + k)));
        let (conv, relu, mul, add) = (
            format!("conv{k}"),
            format!("relu{k}"),
            format!("mul{k}"),
            if k == 1 {
                "output".to_string()
            } else {
                format!("add{k}")
            },
        );
        b.node(
            "Conv",
            &conv,
            &[&x, &names[0], &names[1]],
            &[&conv],
            vec![
                ("pads", litecvt::import::builder::Attr::Is(vec![1, 1, 1, 1])),
                (
                    "kernel_shape",
                    litecvt::import::builder::Attr::Is(vec![3, 3]),
                ),
            ],
        );
        b.node("Relu", &relu, &[&conv], &[&relu], vec![]);
        b.node("Mul", &mul, &[&relu, &names[2]], &[&mul], vec![]);
        b.node("Add", &add, &[&mul, &names[3]], &[&add], vec![]);
        x = add;
        cin = c;
    }
    b.output("output");
    b.bytes()
}

/// `n` samples of shape `shape` in `dir`, one `.npy` each.
fn write_samples(dir: &Path, shape: &[usize], n: usize, seed: u32) {
    let len: usize = shape.iter().product();
    for k in 0..n {
        let v = noise(len, seed + k as u32)
            .iter()
            .map(|x| x * 4.0)
            .collect();
        npy::write(
            &dir.join(format!("{k:03}.npy")),
            &NpyArray::f32(shape.to_vec(), v),
        )
        .unwrap();
    }
}

fn run(bytes: &[u8], input: &NpyArray) -> Vec<f32> {
    run_lite(bytes, "model", &[(None, input.clone())]).expect("runs")[0]
        .1
        .to_f32()
}

fn convert(model: &[u8], opts: &ConvertOptions) -> Conversion {
    convert_bytes(model, "model.onnx", opts).unwrap_or_else(|e| panic!("{e:#}"))
}

fn all_passes_but(name: &str) -> PassSelection {
    PassSelection::Only(
        litecvt::passes::optimization_names()
            .into_iter()
            .filter(|&n| n != name)
            .map(String::from)
            .collect(),
    )
}

fn full_int8(calibration: &Path) -> ConvertOptions {
    ConvertOptions {
        quantize: Some(QuantizeMode::Int8Full),
        calibration: Some(calibration.to_path_buf()),
        ..Default::default()
    }
}

#[test]
fn a_scale_after_relu_moves_into_the_conv_and_int8_keeps_the_small_channels() {
    let model = relu_then_scale_model();
    let float = convert(&model, &ConvertOptions::default());
    // The two Muls are gone (their scales are in the convs); the Adds stay.
    assert_eq!(float.ops_after.get("MUL"), None, "{:?}", float.ops_after);
    let unrewritten = convert(
        &model,
        &ConvertOptions {
            passes: all_passes_but("fold_channel_scale"),
            ..Default::default()
        },
    );
    assert!(
        unrewritten.ops_after.contains_key("MUL"),
        "{:?}",
        unrewritten.ops_after
    );
    let dir = tempfile::tempdir().unwrap();
    write_samples(dir.path(), &[1, 3, 16, 16], 16, 1);
    let input = NpyArray::f32(
        vec![1, 3, 16, 16],
        noise(768, 99).iter().map(|x| x * 4.0).collect(),
    );
    let reference = run(&unrewritten.bytes, &input);
    // Float-exact: the same outputs up to float rounding.
    let s = error_stats(&run(&float.bytes, &input), &reference);
    assert!(s.snr_db > 100.0, "rewritten float model: SNR {}", s.snr_db);
    let mut opts = full_int8(dir.path());
    let with = convert(&model, &opts);
    opts.passes = all_passes_but("fold_channel_scale");
    let without = convert(&model, &opts);
    let (snr_with, snr_without) = (
        error_stats(&run(&with.bytes, &input), &reference).snr_db,
        error_stats(&run(&without.bytes, &input), &reference).snr_db,
    );
    println!("full int8: {snr_with:.1} dB with the rewrite, {snr_without:.1} dB without");
    assert!(snr_with > 30.0, "{snr_with}");
    assert!(snr_with > snr_without + 10.0, "{snr_with} vs {snr_without}");
}

/// HardSwish → Mul(s) → Add(t) → Conv1x1 → Mul(s2) → Conv3x3 (padded): PP-LCNet's learnable
/// affine blocks.
fn affine_before_conv_model() -> Vec<u8> {
    use litecvt::import::builder::Attr;
    let c = 6usize;
    let ci = c as i64;
    let mut b = OnnxBuilder::new(14);
    b.input("input", &[1, ci, 8, 8]);
    b.init(ftensor(
        "s",
        &[1, ci, 1, 1],
        (0..c).map(|i| 0.3 + i as f32).collect(),
    ));
    b.init(ftensor("t", &[1, ci, 1, 1], noise(c, 3)));
    b.init(ftensor("w1", &[ci, ci, 1, 1], noise(c * c, 4)));
    b.init(ftensor("b1", &[ci], noise(c, 5)));
    b.init(ftensor("s2", &[1], vec![1.7]));
    b.init(ftensor("w2", &[ci, ci, 3, 3], noise(c * c * 9, 6)));
    b.node("HardSwish", "hs", &["input"], &["hs"], vec![])
        .node("Mul", "mul", &["hs", "s"], &["mul"], vec![])
        .node("Add", "add", &["mul", "t"], &["add"], vec![])
        .node("Conv", "pw", &["add", "w1", "b1"], &["pw"], vec![])
        .node("Mul", "mul2", &["pw", "s2"], &["mul2"], vec![])
        .node(
            "Conv",
            "conv",
            &["mul2", "w2"],
            &["output"],
            vec![
                ("pads", Attr::Is(vec![1, 1, 1, 1])),
                ("kernel_shape", Attr::Is(vec![3, 3])),
            ],
        )
        .output("output");
    b.bytes()
}

#[test]
fn an_affine_a_conv_reads_folds_into_it_exactly() {
    let model = affine_before_conv_model();
    let folded = convert(&model, &ConvertOptions::default());
    let plain = convert(
        &model,
        &ConvertOptions {
            passes: all_passes_but("fold_input_affine"),
            ..Default::default()
        },
    );
    // The Mul and Add before the 1x1 conv and the Mul before the padded 3x3 conv are gone (the
    // last Mul folds into the 1x1 conv's outputs, the others into the conv reading them).
    assert_eq!(folded.ops_after.get("MUL"), None, "{:?}", folded.ops_after);
    assert_eq!(folded.ops_after.get("ADD"), None, "{:?}", folded.ops_after);
    assert!(plain.ops_after.contains_key("MUL"), "{:?}", plain.ops_after);
    let input = NpyArray::f32(
        vec![1, 6, 8, 8],
        noise(384, 8).iter().map(|x| x * 8.0).collect(),
    );
    let s = error_stats(&run(&folded.bytes, &input), &run(&plain.bytes, &input));
    assert!(s.snr_db > 100.0, "folded vs not: SNR {}", s.snr_db);
}

/// HardSwish → Mul(s) → Add(t) → Conv3x3 with padding: the Add cannot fold (padding reads
/// zeros, not t), so it becomes Add(t / s) before a Mul that folds into the conv.
#[test]
fn a_scale_before_a_shift_still_folds_into_a_padded_conv() {
    use litecvt::import::builder::Attr;
    let c = 4usize;
    let ci = c as i64;
    let mut b = OnnxBuilder::new(14);
    b.input("input", &[1, ci, 8, 8]);
    b.init(ftensor("s", &[1], vec![0.1]));
    b.init(ftensor("t", &[1, ci, 1, 1], noise(c, 3)));
    b.init(ftensor("w", &[ci, ci, 3, 3], noise(c * c * 9, 6)));
    b.node("HardSwish", "hs", &["input"], &["hs"], vec![])
        .node("Mul", "mul", &["hs", "s"], &["mul"], vec![])
        .node("Add", "add", &["mul", "t"], &["add"], vec![])
        .node(
            "Conv",
            "conv",
            &["add", "w"],
            &["output"],
            vec![
                ("pads", Attr::Is(vec![1, 1, 1, 1])),
                ("kernel_shape", Attr::Is(vec![3, 3])),
            ],
        )
        .output("output");
    let model = b.bytes();
    let folded = convert(&model, &ConvertOptions::default());
    let plain = convert(
        &model,
        &ConvertOptions {
            passes: all_passes_but("fold_input_affine"),
            ..Default::default()
        },
    );
    assert_eq!(folded.ops_after.get("MUL"), None, "{:?}", folded.ops_after);
    assert_eq!(
        folded.ops_after.get("ADD"),
        Some(&1),
        "{:?}",
        folded.ops_after
    );
    assert_eq!(
        plain.ops_after.get("MUL"),
        Some(&1),
        "{:?}",
        plain.ops_after
    );
    let input = NpyArray::f32(
        vec![1, ci as usize, 8, 8],
        noise(c * 64, 8).iter().map(|x| x * 8.0).collect(),
    );
    let s = error_stats(&run(&folded.bytes, &input), &run(&plain.bytes, &input));
    assert!(s.snr_db > 100.0, "folded vs not: SNR {}", s.snr_db);
}

#[test]
fn min_snr_that_cannot_be_met_fails_naming_the_best_reached_unless_accepted() {
    let model = litecvt::import::builder::deep_cnn_with_channels(4, 16);
    let dir = tempfile::tempdir().unwrap();
    write_samples(dir.path(), &[1, 16, 32, 32], 8, 7);
    let mut opts = full_int8(dir.path());
    opts.min_snr_db = Some(400.0);
    let e =
        convert_bytes(&model, "deep.onnx", &opts).expect_err("an unreachable budget is an error");
    let msg = format!("{e:#}");
    assert!(
        msg.contains("deep.onnx") && msg.contains("--min-snr 400") && msg.contains("dB"),
        "{msg}"
    );
    opts.accept_snr_miss = true;
    let c = convert(&model, &opts);
    let q = c.quantization.unwrap();
    assert!(q.outputs[0].snr_db < 400.0);
    // The search moved layers to int16 or float on the way.
    assert!(!q.kept_float_for_snr.is_empty() || !q.int16_for_snr.is_empty());
}

#[test]
fn bias_correction_never_makes_the_output_worse() {
    let model = litecvt::import::builder::deep_cnn_with_channels(6, 16);
    let dir = tempfile::tempdir().unwrap();
    write_samples(dir.path(), &[1, 16, 32, 32], 8, 3);
    let mut opts = full_int8(dir.path());
    let with = convert(&model, &opts).quantization.unwrap();
    opts.no_bias_correction = true;
    let without = convert(&model, &opts).quantization.unwrap();
    let (a, b) = (with.outputs[0].snr_db, without.outputs[0].snr_db);
    println!(
        "bias correction: {a:.2} dB ({} layers) vs {b:.2} dB without",
        with.bias_corrected.len()
    );
    assert!(a >= b, "{a} < {b}");
    if let Some(before) = with.snr_before_bias_correction {
        assert!((before - b).abs() < 1e-9, "{before} vs {b}");
        assert!(!with.bias_corrected.is_empty());
    }
}

#[test]
fn bool_inputs_pass_through_calibration() {
    // y = Where(mask, x, 0) * 2
    let mut b = OnnxBuilder::new(13);
    b.input("x", &[1, 16]);
    b.typed_input("mask", &[1, 16], 9);
    b.init(ftensor("zero", &[1], vec![0.0]))
        .init(ftensor("two", &[1], vec![2.0]))
        .node("Where", "sel", &["mask", "x", "zero"], &["sel"], vec![])
        .node("Mul", "mul", &["sel", "two"], &["output"], vec![])
        .output("output");
    let dir = tempfile::tempdir().unwrap();
    for (name, data) in [
        ("x", NpyArray::f32(vec![4, 16], noise(64, 5))),
        (
            "mask",
            NpyArray {
                shape: vec![4, 16],
                data: NpyData::Bool((0..64).map(|i| i % 3 != 0).collect()),
            },
        ),
    ] {
        std::fs::create_dir(dir.path().join(name)).unwrap();
        npy::write(&dir.path().join(name).join("all.npy"), &data).unwrap();
    }
    let c = convert(&b.bytes(), &full_int8(dir.path()));
    let q = c.quantization.unwrap();
    assert_eq!(q.calibration_samples, 4);
    assert!(q.outputs[0].snr_db > 30.0, "{}", q.outputs[0].snr_db);
    // A value that is not a bool is an error naming the file.
    npy::write(
        &dir.path().join("mask").join("all.npy"),
        &NpyArray::f32(vec![4, 16], vec![0.5; 64]),
    )
    .unwrap();
    let e =
        convert_bytes(&b.bytes(), "m.onnx", &full_int8(dir.path())).expect_err("0.5 is not a bool");
    assert!(format!("{e:#}").contains("all.npy"), "{e:#}");
}

/// Conv3x3 → LeakyRelu → Max(x, -0.4) → MaxPool → Conv1x1, the first conv's output channels
/// scaled from 1e-2 to 10 (openWakeWord's embedding model has these blocks).
fn leaky_clamp_pool_model() -> Vec<u8> {
    let (c, cin) = (8usize, 3usize);
    let s: Vec<f32> = (0..c)
        .map(|i| 1e-2f32 * 1000f32.powf(i as f32 / (c - 1) as f32))
        .collect();
    let mut b = OnnxBuilder::new(13);
    b.input("input", &[1, cin as i64, 16, 16]);
    let mut w = noise(c * cin * 9, 3);
    for (i, v) in w.iter_mut().enumerate() {
        *v *= s[i / (cin * 9)];
    }
    b.init(ftensor("w0", &[c as i64, cin as i64, 3, 3], w));
    b.init(ftensor("b0", &[c as i64], noise(c, 4)));
    b.init(ftensor("floor", &[1, 1, 1, 1], vec![-0.4]));
    let mut w1 = noise(4 * c, 5);
    for (i, v) in w1.iter_mut().enumerate() {
        *v /= s[i % c];
    }
    b.init(ftensor("w1", &[4, c as i64, 1, 1], w1));
    use litecvt::import::builder::Attr;
    b.node(
        "Conv",
        "conv0",
        &["input", "w0", "b0"],
        &["conv0"],
        vec![("pads", Attr::Is(vec![1, 1, 1, 1]))],
    );
    b.node(
        "LeakyRelu",
        "leaky",
        &["conv0"],
        &["leaky"],
        vec![("alpha", Attr::F(0.2))],
    );
    b.node("Max", "clamp", &["leaky", "floor"], &["clamp"], vec![]);
    b.node(
        "MaxPool",
        "pool",
        &["clamp"],
        &["pool"],
        vec![
            ("kernel_shape", Attr::Is(vec![2, 2])),
            ("strides", Attr::Is(vec![2, 2])),
        ],
    );
    b.node("Conv", "conv1", &["pool", "w1"], &["output"], vec![]);
    b.output("output");
    b.bytes()
}

/// Full int8 of `model` (input [1, 3, 16, 16]) with and without equalization, calibrated on
/// samples from `seed`, and each file's SNR against float on a held-out input from `input_seed`.
fn with_and_without_equalization(
    model: &[u8],
    seed: u32,
    input_seed: u32,
) -> (Conversion, f32, f32) {
    let float = convert(model, &ConvertOptions::default());
    let dir = tempfile::tempdir().unwrap();
    write_samples(dir.path(), &[1, 3, 16, 16], 16, seed);
    let input = NpyArray::f32(
        vec![1, 3, 16, 16],
        noise(768, input_seed).iter().map(|x| x * 4.0).collect(),
    );
    let reference = run(&float.bytes, &input);
    let mut opts = full_int8(dir.path());
    let with = convert(model, &opts);
    opts.no_equalize = true;
    let without = convert(model, &opts);
    let (snr_with, snr_without) = (
        error_stats(&run(&with.bytes, &input), &reference).snr_db,
        error_stats(&run(&without.bytes, &input), &reference).snr_db,
    );
    (with, snr_with, snr_without)
}

#[test]
fn equalization_crosses_leaky_relu_clamps_and_pooling() {
    let (with, snr_with, snr_without) =
        with_and_without_equalization(&leaky_clamp_pool_model(), 7, 77);
    let equalized = &with.quantization.as_ref().unwrap().equalized;
    assert_eq!(equalized.len(), 1, "{equalized:?}");
    println!("full int8: {snr_with:.1} dB equalized, {snr_without:.1} dB not");
    // The clamp's bound moves with each channel's scale, or the equalized model would be wrong.
    assert!(snr_with > 30.0, "{snr_with}");
    assert!(snr_with > snr_without + 6.0, "{snr_with} vs {snr_without}");
}

#[test]
fn a_hard_sigmoid_after_a_conv_folds_its_slope_and_offset_into_the_conv() {
    // PP-LCNet's squeeze-excite gate: Conv1x1 → HardSigmoid(0.2, 0.5) → Mul with the features.
    let mut b = OnnxBuilder::new(13);
    b.input("input", &[1, 8, 4, 4]);
    b.init(ftensor("w", &[8, 8, 1, 1], noise(64, 11)));
    b.init(ftensor("b", &[8], noise(8, 12)));
    use litecvt::import::builder::Attr;
    b.node("Conv", "se_conv", &["input", "w", "b"], &["logits"], vec![]);
    b.node(
        "HardSigmoid",
        "gate",
        &["logits"],
        &["gate"],
        vec![("alpha", Attr::F(0.2)), ("beta", Attr::F(0.5))],
    );
    b.node("Mul", "scale", &["input", "gate"], &["output"], vec![]);
    b.output("output");
    let model = b.bytes();
    let folded = convert(&model, &ConvertOptions::default());
    let unfolded = convert(
        &model,
        &ConvertOptions {
            passes: all_passes_but("fold_channel_scale"),
            ..Default::default()
        },
    );
    // Only the gated MUL is left; the clip stays as MAXIMUM/MINIMUM.
    assert_eq!(
        folded.ops_after.get("MUL"),
        Some(&1),
        "{:?}",
        folded.ops_after
    );
    assert_eq!(folded.ops_after.get("ADD"), None, "{:?}", folded.ops_after);
    assert_eq!(
        unfolded.ops_after.get("MUL"),
        Some(&2),
        "{:?}",
        unfolded.ops_after
    );
    let input = NpyArray::f32(
        vec![1, 8, 4, 4],
        noise(128, 13).iter().map(|x| x * 20.0).collect(),
    );
    let s = error_stats(&run(&folded.bytes, &input), &run(&unfolded.bytes, &input));
    assert!(s.snr_db > 100.0, "folded gate: SNR {}", s.snr_db);
}

/// Conv 1x1 → ×8 (a stride) → + anchors spanning 0..2000: a detector's box decoding. Without
/// `conv`, the decoding alone of a 4-channel input (no layer with weights).
fn box_decoding_model(conv: bool) -> Vec<u8> {
    let mut b = OnnxBuilder::new(13);
    b.input("input", &[1, if conv { 3 } else { 4 }, 8, 8]);
    let anchors: Vec<f32> = (0..4 * 64).map(|i| i as f32 * 7.8).collect();
    b.init(ftensor("stride", &[1], vec![8.0]));
    b.init(ftensor("anchors", &[1, 4, 8, 8], anchors));
    let mut x = "input";
    if conv {
        b.init(ftensor("w", &[4, 3, 1, 1], noise(12, 41)));
        b.init(ftensor("b", &[4], noise(4, 42)));
        b.node("Conv", "head", &["input", "w", "b"], &["distances"], vec![]);
        x = "distances";
    }
    b.node(
        "Mul",
        "scale_by_stride",
        &[x, "stride"],
        &["scaled"],
        vec![],
    );
    b.node(
        "Add",
        "add_anchors",
        &["scaled", "anchors"],
        &["output"],
        vec![],
    );
    b.output("output");
    b.bytes()
}

#[test]
fn box_decoding_after_the_last_conv_runs_in_float() {
    let dir = tempfile::tempdir().unwrap();
    write_samples(dir.path(), &[1, 3, 8, 8], 8, 1);
    let model = box_decoding_model(true);
    let float = convert(&model, &ConvertOptions::default());
    let q = convert(&model, &full_int8(dir.path()));
    let floated: Vec<&str> = q
        .quantization
        .as_ref()
        .unwrap()
        .summary
        .float_nodes
        .iter()
        .map(|n| n.0.as_str())
        .collect();
    // (The stride folds into the conv.)
    assert!(floated.contains(&"add_anchors"), "{floated:?}");
    // In int8 the sum would be rounded again on its 0..2000 range (steps of ~8); from the
    // conv's int8 output (steps of ~0.01, times 8) it is far finer.
    let input = NpyArray::f32(
        vec![1, 3, 8, 8],
        noise(192, 99).iter().map(|x| x * 4.0).collect(),
    );
    let s = error_stats(&run(&q.bytes, &input), &run(&float.bytes, &input));
    assert!(s.max_abs < 1.0, "max abs error {}", s.max_abs);

    // A model with no layer with weights keeps its arithmetic int8.
    let dir4 = tempfile::tempdir().unwrap();
    write_samples(dir4.path(), &[1, 4, 8, 8], 8, 1);
    let q = convert(&box_decoding_model(false), &full_int8(dir4.path()));
    let s = &q.quantization.as_ref().unwrap().summary;
    assert!(s.float_nodes.is_empty(), "{:?}", s.float_nodes);
}

/// Conv3x3 → HardSwish → depthwise Conv3x3 → Conv1x1, the first conv's output channels scaled
/// from 0.05 to 50 and the depthwise weights by the inverse (a batch norm folded into the
/// layer before a HardSwish, as in PP-LCNet).
fn hard_swish_spread_model() -> Vec<u8> {
    use litecvt::import::builder::Attr;
    let (c, cin) = (8usize, 3usize);
    let s: Vec<f32> = (0..c)
        .map(|i| 0.05f32 * 1000f32.powf(i as f32 / (c - 1) as f32))
        .collect();
    let mut b = OnnxBuilder::new(14);
    b.input("input", &[1, cin as i64, 16, 16]);
    let mut w = noise(c * cin * 9, 13);
    for (i, v) in w.iter_mut().enumerate() {
        *v *= s[i / (cin * 9)];
    }
    b.init(ftensor("w0", &[c as i64, cin as i64, 3, 3], w));
    b.init(ftensor("b0", &[c as i64], noise(c, 14)));
    let mut wd = noise(c * 9, 15);
    for (i, v) in wd.iter_mut().enumerate() {
        *v /= s[i / 9].max(1.0);
    }
    b.init(ftensor("wd", &[c as i64, 1, 3, 3], wd));
    b.init(ftensor("w1", &[4, c as i64, 1, 1], noise(4 * c, 16)));
    let pads = || vec![("pads", Attr::Is(vec![1, 1, 1, 1]))];
    b.node("Conv", "conv0", &["input", "w0", "b0"], &["conv0"], pads());
    b.node("HardSwish", "hswish", &["conv0"], &["hswish"], vec![]);
    let mut dw = pads();
    dw.push(("group", Attr::I(c as i64)));
    b.node("Conv", "dw", &["hswish", "wd"], &["dw"], dw);
    b.node("Conv", "conv1", &["dw", "w1"], &["output"], vec![]);
    b.output("output");
    b.bytes()
}

#[test]
fn equalization_crosses_hard_swish_through_a_gate_of_the_scaled_input() {
    let (with, snr_with, snr_without) =
        with_and_without_equalization(&hard_swish_spread_model(), 21, 99);
    let equalized = &with.quantization.as_ref().unwrap().equalized;
    assert!(
        equalized.iter().any(|t| t.contains("hswish")),
        "{equalized:?}"
    );
    println!("full int8: {snr_with:.1} dB equalized across HardSwish, {snr_without:.1} dB not");
    // The floor and the gate's clip are what int8 saturation does: the file has neither.
    for clamp in ["MAXIMUM", "MINIMUM"] {
        assert!(!with.ops_after.contains_key(clamp), "{:?}", with.ops_after);
    }
    assert_eq!(with.ops_after.get("MUL"), Some(&1), "{:?}", with.ops_after);
    // The gate reads the scaled input with each channel's slope; a wrong slope or floor would
    // show here as a large error, not a small one.
    assert!(snr_with > 30.0, "{snr_with}");
    assert!(snr_with > snr_without + 6.0, "{snr_with} vs {snr_without}");
}

/// A dense layer → SiLU → dense layer on [1, T, C] rows (a transformer's feed-forward block):
/// the gated rewrite needs image tensors and leaves these as they are.
#[test]
fn a_silu_between_dense_layers_on_rows_still_converts() {
    let (t, c) = (6usize, 8usize);
    let mut b = OnnxBuilder::new(13);
    b.input("input", &[1, t as i64, c as i64]);
    let spread: Vec<f32> = (0..c).map(|i| 0.05 * 400f32.powf(i as f32 / 7.0)).collect();
    let mut w0 = noise(c * c, 31);
    for (i, v) in w0.iter_mut().enumerate() {
        *v *= spread[i % c];
    }
    b.init(ftensor("w0", &[c as i64, c as i64], w0));
    b.init(ftensor("w1", &[c as i64, 4], noise(c * 4, 32)));
    b.node("MatMul", "fc0", &["input", "w0"], &["h"], vec![]);
    b.node("Sigmoid", "sig", &["h"], &["s"], vec![]);
    b.node("Mul", "silu", &["h", "s"], &["a"], vec![]);
    b.node("MatMul", "fc1", &["a", "w1"], &["output"], vec![]);
    b.output("output");
    let model = b.bytes();
    let float = convert(&model, &ConvertOptions::default());
    let dir = tempfile::tempdir().unwrap();
    write_samples(dir.path(), &[1, t, c], 16, 33);
    let input = NpyArray::f32(vec![1, t, c], noise(t * c, 34));
    let int8 = convert(&model, &full_int8(dir.path()));
    let snr = error_stats(&run(&int8.bytes, &input), &run(&float.bytes, &input)).snr_db;
    assert!(snr > 20.0, "{snr}");
}

/// A normalisation over the middle axis of [1, 32, 8] (which the LayerNorm recognizer, last axis
/// only, does not take), written from the moments as jax2tf writes JAX's LayerNorm:
/// `v = max(Σx²/k − (Σx/k)², 0)`, `(x − m) / sqrt(v + eps)`. Each column's mean (0.5 to 1) is
/// far larger than its spread (standard deviations 0.05 to 0.13), as after magika's embedding.
fn moments_normalization_model() -> Vec<u8> {
    let (k, c) = (32i64, 8usize);
    let mut b = OnnxBuilder::new(13);
    b.input("input", &[1, k, c as i64]);
    let spread: Vec<f32> = (0..c).map(|i| 0.04 + 0.01 * i as f32).collect();
    let offset: Vec<f32> = (0..c).map(|i| 0.5 + 0.07 * i as f32).collect();
    b.init(ftensor("spread", &[c as i64], spread));
    b.init(ftensor("offset", &[c as i64], offset));
    b.init(ftensor("inv_k", &[], vec![1.0 / k as f32]));
    b.init(ftensor("zero", &[], vec![0.0]));
    b.init(ftensor("eps", &[], vec![1e-6]));
    b.init(litecvt::import::builder::itensor("axis", &[1], vec![1]));
    let keep = || vec![("keepdims", litecvt::import::builder::Attr::I(0))];
    b.node("Mul", "spread", &["input", "spread"], &["xs"], vec![]);
    b.node("Add", "offset", &["xs", "offset"], &["x"], vec![]);
    b.node("ReduceSum", "sum", &["x", "axis"], &["s"], keep());
    b.node("Mul", "mean", &["s", "inv_k"], &["m"], vec![]);
    b.node("Mul", "square", &["x", "x"], &["x2"], vec![]);
    b.node("ReduceSum", "sum_sq", &["x2", "axis"], &["s2"], keep());
    b.node("Mul", "mean_sq", &["s2", "inv_k"], &["e2"], vec![]);
    b.node("Mul", "mean_squared", &["m", "m"], &["mm"], vec![]);
    b.node("Sub", "moments", &["e2", "mm"], &["v"], vec![]);
    b.node("Max", "clamp", &["v", "zero"], &["vc"], vec![]);
    b.node("Unsqueeze", "var_row", &["vc", "axis"], &["vr"], vec![]);
    b.node("Add", "add_eps", &["vr", "eps"], &["ve"], vec![]);
    b.node("Sqrt", "std", &["ve"], &["sd"], vec![]);
    b.node("Reciprocal", "rstd", &["sd"], &["r"], vec![]);
    b.node("Unsqueeze", "mean_row", &["m", "axis"], &["mr"], vec![]);
    b.node("Sub", "center", &["x", "mr"], &["d"], vec![]);
    b.node("Mul", "normalize", &["d", "r"], &["output"], vec![]);
    b.output("output");
    b.bytes()
}

/// Conv1x1 → SiLU (as `x · Sigmoid(x)`) → Conv1x1, the first conv's outputs spread evenly over
/// [-16, 8] (a negative bias, as batch norm leaves many YOLO pre-activations).
fn silu_negative_tail_model() -> Vec<u8> {
    let (c, cin) = (8usize, 3usize);
    let mut b = OnnxBuilder::new(13);
    b.input("input", &[1, cin as i64, 8, 8]);
    let w0: Vec<f32> = (0..c * cin)
        .map(|i| if i % cin == (i / cin) % cin { 6.0 } else { 0.0 })
        .collect();
    b.init(ftensor("w0", &[c as i64, cin as i64, 1, 1], w0));
    b.init(ftensor("b0", &[c as i64], vec![-4.0; c]));
    b.init(ftensor("w1", &[4, c as i64, 1, 1], noise(4 * c, 41)));
    b.node("Conv", "conv0", &["input", "w0", "b0"], &["pre"], vec![]);
    b.node("Sigmoid", "sig", &["pre"], &["gate"], vec![]);
    b.node("Mul", "silu", &["pre", "gate"], &["act"], vec![]);
    b.node("Conv", "conv1", &["act", "w1"], &["output"], vec![]);
    b.output("output");
    b.bytes()
}

#[test]
fn a_variance_from_the_moments_is_taken_as_the_mean_squared_deviation() {
    let model = moments_normalization_model();
    let float = convert(&model, &ConvertOptions::default());
    let dir = tempfile::tempdir().unwrap();
    write_samples(dir.path(), &[1, 32, 8], 16, 41);
    let input = NpyArray::f32(
        vec![1, 32, 8],
        noise(256, 42).iter().map(|x| x * 4.0).collect(),
    );
    let reference = run(&float.bytes, &input);
    let mut opts = full_int8(dir.path());
    let with = convert(&model, &opts);
    opts.passes = all_passes_but("center_variance");
    let without = convert(&model, &opts);
    let (snr_with, snr_without) = (
        error_stats(&run(&with.bytes, &input), &reference).snr_db,
        error_stats(&run(&without.bytes, &input), &reference).snr_db,
    );
    println!("full int8: {snr_with:.1} dB centered, {snr_without:.1} dB from the moments");
    assert!(snr_with > 30.0, "{snr_with}");
    assert!(snr_with > snr_without + 10.0, "{snr_with} vs {snr_without}");
}

#[test]
fn a_silu_input_spends_no_steps_on_the_tail_silu_flattens() {
    let model = silu_negative_tail_model();
    let float = convert(&model, &ConvertOptions::default());
    let dir = tempfile::tempdir().unwrap();
    write_samples(dir.path(), &[1, 3, 8, 8], 16, 42);
    let mut opts = full_int8(dir.path());
    opts.calibration_method = Some(litecvt::quantize::calibrate::Method::Auto);
    let int8 = convert(&model, &opts);
    let aligned = literun::AlignedBytes::from_slice(&int8.bytes);
    let lite = literun::Model::from_bytes(&aligned).unwrap();
    let pre = lite
        .tensors()
        .iter()
        .find(|t| t.name == "pre")
        .expect("pre");
    let q = pre.qparams.as_ref().expect("int8");
    let lowest = q.scales[0] * (-128.0 - q.zero_points[0] as f32);
    // The calibration samples reach -16; below about -4 SiLU's output is within 0.08 of zero.
    assert!(lowest > -10.0, "SiLU input range starts at {lowest}");
    let input = NpyArray::f32(
        vec![1, 3, 8, 8],
        noise(192, 99).iter().map(|x| x * 4.0).collect(),
    );
    let reference = run(&float.bytes, &input);
    let snr = error_stats(&run(&int8.bytes, &input), &reference).snr_db;
    opts.calibration_method = Some(litecvt::quantize::calibrate::Method::MinMax);
    let minmax = convert(&model, &opts);
    let snr_minmax = error_stats(&run(&minmax.bytes, &input), &reference).snr_db;
    println!(
        "full int8: {snr:.1} dB with the SiLU input from {lowest:.2}, {snr_minmax:.1} min/max"
    );
    assert!(snr > 30.0 && snr >= snr_minmax, "{snr} vs {snr_minmax}");
}
