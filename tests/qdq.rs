//! Already-quantized ONNX models (fixtures/qdq/, made by fixtures/make_qdq.py): QDQ models from
//! onnxruntime's `quantize_static` and a PyTorch-style QAT model convert to full int8 with *their*
//! scales and agree with onnxruntime running them; dynamic-quantized models convert to int8
//! weights-only with their int8 weights. (LiteRT agreement: tests/interop/litert_check.py --qdq.)

use litecvt::convert::{convert_file, Conversion, ConvertOptions};
use litecvt::npy::{self, NpyArray, NpyData};
use litecvt::runtime::{error_stats, run_lite};
use prost::Message;
use std::collections::HashMap;
use std::path::PathBuf;
use tract_onnx::pb::ModelProto;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn qdq(file: &str) -> PathBuf {
    root().join("fixtures/qdq").join(file)
}

fn convert_with(file: &str, opts: &ConvertOptions) -> Conversion {
    convert_file(&qdq(file), opts).unwrap_or_else(|e| panic!("{file}: {e:#}"))
}

fn convert(file: &str) -> Conversion {
    convert_with(file, &ConvertOptions::default())
}

/// `<model>.data.npz`: held-out inputs `x`, the float model's outputs and onnxruntime's output
/// for each quantized variant.
fn data(model: &str) -> HashMap<String, NpyArray> {
    npy::read_npz(&qdq(&format!("{model}.data.npz")))
        .unwrap()
        .into_iter()
        .collect()
}

/// Runs the file on every sample of `x` (batch along axis 0); all outputs, concatenated.
fn run_all(bytes: &[u8], x: &NpyArray) -> Vec<f32> {
    let per: usize = x.shape[1..].iter().product();
    let xs = x.to_f32();
    let mut shape = x.shape.clone();
    shape[0] = 1;
    let mut out = Vec::new();
    for i in 0..x.shape[0] {
        let one = NpyArray::f32(shape.clone(), xs[i * per..(i + 1) * per].to_vec());
        let r = run_lite(bytes, "model", &[(None, one)]).expect("runs");
        out.extend(r[0].1.to_f32());
    }
    out
}

/// The scale of the int8 tensor the file's (float) output is dequantized from.
fn output_step(bytes: &[u8]) -> f32 {
    let aligned = literun::AlignedBytes::from_slice(bytes);
    let model = literun::Model::from_bytes(&aligned).unwrap();
    let out = model.outputs()[0].tensor;
    let op = model
        .operators()
        .iter()
        .find(|o| o.outputs.contains(&out))
        .expect("output producer");
    assert_eq!(op.name(), "DEQUANTIZE");
    let q = model.tensors()[op.inputs[0].unwrap()]
        .qparams
        .clone()
        .unwrap();
    q.scales[0]
}

/// (max |ours - ORT| in output steps, SNR of ours vs the float model in dB).
fn agreement(model: &str, variant: &str, c: &Conversion) -> (f32, f32) {
    let d = data(model);
    let ours = run_all(&c.bytes, &d["x"]);
    let ort = d[variant].to_f32();
    let float = d["float"].to_f32();
    assert_eq!(ours.len(), ort.len());
    let step = output_step(&c.bytes);
    let steps = error_stats(&ours, &ort).max_abs / step;
    (steps, error_stats(&ours, &float).snr_db)
}

fn ops(c: &Conversion, name: &str) -> usize {
    c.ops_after.get(name).copied().unwrap_or(0)
}

/// Static QDQ models: full int8 by default (no calibration), integer-only between the edges
/// for the CNNs, within a few output steps of onnxruntime and ≥ 20 dB from the float model.
#[test]
fn qdq_models_agree_with_onnxruntime_running_them() {
    // (model, variant, max output steps from ORT). Measured: 1, 1, 2, 2, 1, 2, 2. The uint8
    // weights of u8u8 are requantized symmetric (TFLite needs zero point 0), so ORT computes
    // with other weights there.
    let cases = [
        ("digits_cnn", "s8s8_pc", 2.0),
        ("digits_cnn", "u8s8_pt", 2.0),
        ("digits_cnn", "u8u8_pt", 4.0),
        ("mobilenetv2_block", "s8s8_pc", 2.0),
        ("mobilenetv2_block", "u8s8_pt", 2.0),
        ("attention_block", "s8s8_pc", 2.0),
        ("attention_block", "u8s8_pt", 2.0),
        // QOperator format (QLinearConv, QGemm, QLinearAdd, QLinearSoftmax...), rewritten to QDQ.
        // Measured 1, 1, 3: onnxruntime runs these with its own integer kernels (QLinearSoftmax
        // with a table, QLinearAdd/Mul in fixed point), which round differently from TFLite's.
        ("digits_cnn", "qoperator", 2.0),
        ("mobilenetv2_block", "qoperator", 2.0),
        ("attention_block", "qoperator", 3.0),
    ];
    for (model, variant, max_steps) in cases {
        let c = convert(&format!("{model}.{variant}.onnx"));
        let q = c.quantization.as_ref().expect("quantized by default");
        assert_eq!(q.calibration_samples, 0);
        let (steps, snr) = agreement(model, variant, &c);
        println!(
            "{model}.{variant}: {steps:.2} output steps from ORT, SNR vs float {snr:.1} dB; \
             ops {:?}; float nodes {}; notes {:?}",
            c.ops_after,
            q.summary.float_nodes.len(),
            q.summary.notes
        );
        assert!(
            steps <= max_steps + 1e-3,
            "{model}.{variant}: {steps} steps"
        );
        assert!(snr >= 20.0, "{model}.{variant}: SNR {snr}");
        if model != "attention_block" {
            assert_eq!(ops(&c, "QUANTIZE"), 1, "{:?}", c.ops_after);
            assert_eq!(ops(&c, "DEQUANTIZE"), 1, "{:?}", c.ops_after);
            assert!(
                q.summary.float_nodes.is_empty(),
                "{:?}",
                q.summary.float_nodes
            );
        }
    }
}

#[test]
fn qat_model_agrees_with_onnxruntime_and_the_float_model() {
    let c = convert("qat_cnn.onnx");
    let (steps, snr) = agreement("qat_cnn", "qat", &c);
    println!(
        "qat_cnn: {steps:.2} steps from ORT, SNR vs float {snr:.1} dB, {:?}",
        c.ops_after
    );
    assert!(steps <= 2.0 + 1e-3, "{steps}");
    assert!(snr >= 20.0, "{snr}");
    assert_eq!(ops(&c, "QUANTIZE"), 1);
    assert_eq!(ops(&c, "DEQUANTIZE"), 1);
    assert!(c.quantization.unwrap().summary.notes.is_empty());
}

/// Top-1 accuracy (%) over the digits test split of a converted digits model.
fn digits_accuracy(c: &Conversion) -> f64 {
    let d = data("digits_cnn");
    let logits = run_all(&c.bytes, &d["x"]);
    let NpyData::I64(y) = &d["y"].data else {
        panic!("labels are int64")
    };
    let correct = y
        .iter()
        .enumerate()
        .filter(|(i, &label)| {
            let row = &logits[i * 10..(i + 1) * 10];
            let best = (0..10).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap();
            best as i64 == label
        })
        .count();
    correct as f64 * 100.0 / y.len() as f64
}

#[test]
fn digits_accuracy_stays_within_budget() {
    let float: f64 = std::fs::read_to_string(root().join("fixtures/digits_cnn.accuracy.txt"))
        .unwrap()
        .trim()
        .parse::<f64>()
        .unwrap()
        * 100.0;
    for v in ["s8s8_pc", "u8s8_pt", "u8u8_pt", "qoperator", "dynamic"] {
        let acc = digits_accuracy(&convert(&format!("digits_cnn.{v}.onnx")));
        println!("digits_cnn.{v}: top-1 {acc:.2}% (float {float:.2}%)");
        assert!(acc >= float - 1.0, "{v}: {acc} vs {float}");
    }
}

/// Initializers of an ONNX file by name, as f32 (scales) or i64 (integers).
fn onnx_model(file: &str) -> ModelProto {
    ModelProto::decode(std::fs::read(qdq(file)).unwrap().as_slice()).unwrap()
}

fn init_values(m: &ModelProto, name: &str) -> Option<(Vec<f32>, i32)> {
    let t = m
        .graph
        .as_ref()?
        .initializer
        .iter()
        .find(|t| t.name == name)?;
    let v: Vec<f32> = match t.data_type {
        1 if !t.raw_data.is_empty() => t
            .raw_data
            .chunks(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        1 => t.float_data.clone(),
        2 if !t.raw_data.is_empty() => t.raw_data.iter().map(|&b| b as f32).collect(),
        3 if !t.raw_data.is_empty() => t.raw_data.iter().map(|&b| b as i8 as f32).collect(),
        _ => t.int32_data.iter().map(|&b| b as f32).collect(),
    };
    Some((v, t.data_type))
}

/// An int32 initializer's values.
fn init_i32(m: &ModelProto, name: &str) -> Option<Vec<i32>> {
    let t = m
        .graph
        .as_ref()?
        .initializer
        .iter()
        .find(|t| t.name == name)?;
    if t.data_type != 6 {
        return None;
    }
    Some(if t.raw_data.is_empty() {
        t.int32_data.clone()
    } else {
        t.raw_data
            .chunks(4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    })
}

/// The parameters in our file are the model's: every activation QuantizeLinear's scale and zero
/// point (uint8 shifted by -128) on the tensor of the same name, every weight's scales.
#[test]
fn scales_and_zero_points_are_the_models() {
    for file in [
        "digits_cnn.s8s8_pc.onnx",
        "digits_cnn.u8s8_pt.onnx",
        "mobilenetv2_block.s8s8_pc.onnx",
        "mobilenetv2_block.u8s8_pt.onnx",
        "qat_cnn.onnx",
    ] {
        let c = convert(file);
        let aligned = literun::AlignedBytes::from_slice(&c.bytes);
        let lite = literun::Model::from_bytes(&aligned).unwrap();
        let by_name: HashMap<&str, &literun::model::TensorDesc> =
            lite.tensors().iter().map(|t| (t.name, t)).collect();
        let m = onnx_model(file);
        let g = m.graph.as_ref().unwrap();
        let (mut acts, mut weights) = (0, 0);
        let weight_scales: Vec<Vec<f32>> = lite
            .tensors()
            .iter()
            .filter(|t| t.data.is_some())
            .filter_map(|t| t.qparams.as_ref().map(|q| q.scales.to_vec()))
            .collect();
        // The int8 values of the constant with these scales, sorted (the layout permutes them).
        let sorted_values = |scales: &[f32]| -> Option<Vec<i8>> {
            let t = lite.tensors().iter().find(|t| {
                t.dtype == literun::DType::I8
                    && t.data.is_some()
                    && t.qparams.as_ref().is_some_and(|q| q.scales == scales)
            })?;
            let mut v: Vec<i8> = t.data?.iter().map(|&b| b as i8).collect();
            v.sort();
            Some(v)
        };
        for n in g.node.iter().filter(|n| n.op_type == "QuantizeLinear") {
            let (scale, _) = init_values(&m, &n.input[1]).unwrap();
            let (zp, zt) = init_values(&m, &n.input[2]).unwrap();
            let shift = if zt == 2 { 128.0 } else { 0.0 };
            if g.initializer.iter().any(|t| t.name == n.input[0]) {
                // QAT weight fake-quant: the scales of some int8 constant.
                assert!(weight_scales.contains(&scale), "{file}: {}", n.input[0]);
                weights += 1;
                continue;
            }
            // Activations keep their ONNX names (the graph input and output become the
            // QUANTIZE/DEQUANTIZE edges and are looked up through them).
            let int8_name = format!("{}/int8", n.input[0]);
            let Some(t) = by_name
                .get(n.input[0].as_str())
                .filter(|t| t.qparams.is_some())
                .or_else(|| by_name.get(int8_name.as_str()))
            else {
                continue;
            };
            let q = t
                .qparams
                .as_ref()
                .unwrap_or_else(|| panic!("{file}: '{}' is not int8", n.input[0]));
            assert_eq!(q.scales, scale, "{file}: '{}'", n.input[0]);
            assert_eq!(
                q.zero_points[0] as f32,
                zp[0] - shift,
                "{file}: '{}'",
                n.input[0]
            );
            acts += 1;
        }
        let int32_constants: Vec<Vec<i32>> = lite
            .tensors()
            .iter()
            .filter(|t| t.dtype == literun::DType::I32 && t.data.is_some())
            .map(|t| {
                t.data
                    .unwrap()
                    .chunks(4)
                    .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect()
            })
            .collect();
        let mut biases = 0;
        for n in g.node.iter().filter(|n| n.op_type == "DequantizeLinear") {
            // int32 biases: the same values (their scale, input × weight, is recomputed).
            if let Some(b) = init_i32(&m, &n.input[0]) {
                assert!(
                    int32_constants.contains(&b),
                    "{file}: bias '{}'",
                    n.input[0]
                );
                biases += 1;
                continue;
            }
            let Some((_, 3)) = init_values(&m, &n.input[0]) else {
                continue;
            };
            let (scale, _) = init_values(&m, &n.input[1]).unwrap();
            assert!(
                weight_scales.contains(&scale),
                "{file}: weight '{}' scales {:?} not in the file",
                n.input[0],
                &scale[..scale.len().min(4)]
            );
            // ... and exactly the model's int8 values.
            let (q, _) = init_values(&m, &n.input[0]).unwrap();
            let mut q: Vec<i8> = q.iter().map(|&x| x as i8).collect();
            q.sort();
            assert_eq!(sorted_values(&scale), Some(q), "{file}: '{}'", n.input[0]);
            weights += 1;
        }
        println!(
            "{file}: {acts} activation and {weights} weight parameter sets, {biases} int32 biases \
             checked"
        );
        assert!(acts >= 3 && weights >= 3, "{file}: {acts} / {weights}");
    }
}

/// uint8 weights (asymmetric) cannot be TFLite conv/dense weights: requantized, and said so.
#[test]
fn asymmetric_weights_are_requantized_and_reported() {
    let c = convert("digits_cnn.u8u8_pt.onnx");
    let notes = c.quantization.unwrap().summary.notes;
    assert!(notes.iter().any(|n| n.contains("requantized")), "{notes:?}");
}

/// `--io-type int8`: integer interface with the model's input/output parameters; dequantized,
/// the int8 output is the float-interface output.
#[test]
fn int8_interface_works_without_calibration() {
    let float_io = convert("digits_cnn.s8s8_pc.onnx");
    let mut opts = ConvertOptions::default();
    opts.int8.io_type = litecvt::quantize::IoType::Integer;
    let int_io = convert_with("digits_cnn.s8s8_pc.onnx", &opts);
    assert_eq!(ops(&int_io, "QUANTIZE") + ops(&int_io, "DEQUANTIZE"), 0);
    let aligned = literun::AlignedBytes::from_slice(&int_io.bytes);
    let lite = literun::Model::from_bytes(&aligned).unwrap();
    let input_q = lite.tensors()[lite.inputs()[0].tensor]
        .qparams
        .clone()
        .unwrap();
    // The QDQ model's input parameters: scale 1/255, zero point -128.
    assert_eq!(input_q.zero_points, vec![-128]);
    assert!((input_q.scales[0] - 1.0 / 255.0).abs() < 1e-9);
    let out_q = lite.tensors()[lite.outputs()[0].tensor]
        .qparams
        .clone()
        .unwrap();
    let input = npy::read(&root().join("fixtures/digits_cnn.input.npy")).unwrap();
    let outs = run_lite(&int_io.bytes, "m", &[(None, input.clone())]).unwrap();
    let NpyData::I8(q) = &outs[0].1.data else {
        panic!("int8 output")
    };
    let (s, z) = out_q.channel(0);
    let deq: Vec<f32> = q.iter().map(|&v| (v as i64 - z) as f32 * s).collect();
    let r = run_lite(&float_io.bytes, "m", &[(None, input)]).unwrap();
    assert_eq!(deq, r[0].1.to_f32());
}

/// Dynamic-quantized models: hybrid conv/dense kernels with the model's int8 weights (per-tensor
/// symmetric, as quantize_dynamic writes them), float activations, close to onnxruntime.
#[test]
fn dynamic_models_convert_to_int8_weights_only() {
    for model in ["digits_cnn", "mobilenetv2_block", "attention_block"] {
        let file = format!("{model}.dynamic.onnx");
        let c = convert(&file);
        let q = c.quantization.as_ref().unwrap();
        assert!(
            q.summary.mode.contains("weights-only"),
            "{}",
            q.summary.mode
        );
        assert!(q.summary.notes.is_empty(), "{:?}", q.summary.notes);
        assert_eq!(ops(&c, "QUANTIZE"), 0, "{:?}", c.ops_after);
        // Every conv/dense layer reads int8 weights directly (hybrid).
        let aligned = literun::AlignedBytes::from_slice(&c.bytes);
        let lite = literun::Model::from_bytes(&aligned).unwrap();
        let mut hybrid = 0;
        for op in lite.operators() {
            if matches!(
                op.name().as_str(),
                "CONV_2D" | "DEPTHWISE_CONV_2D" | "FULLY_CONNECTED"
            ) {
                let w = &lite.tensors()[op.inputs[1].unwrap()];
                assert_eq!(w.dtype, literun::DType::I8, "{file}: {}", op.name());
                hybrid += 1;
            }
        }
        // The int8 weights and scales are the model's.
        let m = onnx_model(&file);
        // (A per-tensor scale is repeated per output channel for the hybrid convs, which LiteRT
        // reads per channel.)
        let lite_scales: Vec<Vec<f32>> = lite
            .tensors()
            .iter()
            .filter_map(|t| t.qparams.as_ref().map(|q| q.scales.to_vec()))
            .collect();
        for t in &m.graph.as_ref().unwrap().initializer {
            if t.name.ends_with("_scale") && t.data_type == 1 {
                let (s, _) = init_values(&m, &t.name).unwrap();
                let found = lite_scales
                    .iter()
                    .any(|l| *l == s || (s.len() == 1 && l.iter().all(|&x| x == s[0])));
                assert!(found, "{file}: '{}'", t.name);
            }
        }
        let d = data(model);
        let ours = run_all(&c.bytes, &d["x"]);
        let vs_ort = error_stats(&ours, &d["dynamic"].to_f32()).snr_db;
        let vs_float = error_stats(&ours, &d["float"].to_f32()).snr_db;
        println!(
            "{file}: {hybrid} hybrid layers; SNR vs ORT {vs_ort:.1} dB, vs float {vs_float:.1} dB"
        );
        assert!(hybrid >= 3);
        assert!(vs_ort >= 25.0, "{file}: {vs_ort}");
        assert!(vs_float >= 20.0, "{file}: {vs_float}");
    }
}

/// With calibration data, the tensors the QDQ model leaves in float are calibrated too: the
/// attention block becomes integer-only between its edges, with the model's parameters kept.
#[test]
fn calibration_fills_the_float_islands() {
    let plain = convert("attention_block.s8s8_pc.onnx");
    let opts = ConvertOptions {
        quantize: Some(litecvt::quantize::QuantizeMode::Int8Full),
        calibration: Some(root().join("calibration/attention_block")),
        ..Default::default()
    };
    let calibrated = convert_with("attention_block.s8s8_pc.onnx", &opts);
    let (fp, fc) = (
        plain.quantization.unwrap().summary.float_nodes.len(),
        calibrated
            .quantization
            .as_ref()
            .unwrap()
            .summary
            .float_nodes
            .len(),
    );
    println!("attention float nodes: {fp} without calibration, {fc} with");
    assert!(fp > 0 && fc < fp, "{fp} → {fc}");
    let (steps, snr) = agreement("attention_block", "s8s8_pc", &calibrated);
    println!("calibrated: {steps:.2} steps from ORT, SNR vs float {snr:.1} dB");
    assert!(snr >= 20.0, "{snr}");
}

/// quantize_dynamic turns an LSTM into com.microsoft DynamicQuantizeLSTM: it converts as the
/// standard LSTM on the dequantized weights, unrolled into hybrid FULLY_CONNECTED layers (the
/// recurrent weights quantized once and shared by every time step), close to onnxruntime.
#[test]
fn dynamic_quantized_lstm_converts_to_hybrid_layers() {
    let c = convert("lstm_2layer.dynamic.onnx");
    let q = c.quantization.as_ref().unwrap();
    assert!(
        q.summary.mode.contains("weights-only"),
        "{}",
        q.summary.mode
    );
    assert_eq!(ops(&c, "DEQUANTIZE"), 0, "{:?}", c.ops_after);
    let aligned = literun::AlignedBytes::from_slice(&c.bytes);
    let lite = literun::Model::from_bytes(&aligned).unwrap();
    let fcs: Vec<_> = lite
        .operators()
        .iter()
        .filter(|op| op.name() == "FULLY_CONNECTED")
        .collect();
    assert!(fcs.len() > 20, "{} FULLY_CONNECTED", fcs.len());
    // The model's int8 weights are used as they are; weights ONNX Runtime left float stay
    // float where they are small (as TFLite's dynamic-range quantization leaves them).
    for op in &fcs {
        let w = &lite.tensors()[op.inputs[1].unwrap()];
        let elements: usize = w.shape.iter().product();
        if elements >= 1024 {
            assert_eq!(w.dtype, literun::DType::I8, "{}", w.name);
        }
    }
    assert!(
        fcs.iter()
            .filter(|op| lite.tensors()[op.inputs[1].unwrap()].dtype == literun::DType::I8)
            .count()
            > 20
    );
    let d = data("lstm_2layer");
    let ours = run_all(&c.bytes, &d["x"]);
    let vs_ort = error_stats(&ours, &d["dynamic"].to_f32()).snr_db;
    let vs_float = error_stats(&ours, &d["float"].to_f32()).snr_db;
    println!("lstm_2layer.dynamic: SNR vs ORT {vs_ort:.1} dB, vs float {vs_float:.1} dB");
    assert!(vs_ort >= 30.0, "{vs_ort}");
    assert!(vs_float >= 30.0, "{vs_float}");
}
