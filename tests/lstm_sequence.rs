//! `--lstm sequence`: ONNX LSTMs written as UNIDIRECTIONAL_SEQUENCE_LSTM. The first invoke of a
//! fresh interpreter gives onnxruntime's outputs; the state then carries on to the next invoke
//! (streaming, as TensorFlow's own files behave); an LSTM the option cannot write exactly is
//! refused naming the node, never unrolled instead.

use litecvt::convert::{convert_bytes, convert_file, ConvertOptions};
use litecvt::import::builder::{attr, ftensor, Attr, OnnxBuilder};
use litecvt::import::LstmMode;
use litecvt::npy::{self, NpyArray};
use litecvt::runtime::run_lite;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn sequence() -> ConvertOptions {
    ConvertOptions {
        lstm: LstmMode::Sequence,
        ..Default::default()
    }
}

/// Fixtures `--lstm sequence` refuses, and what the error must say.
const REFUSED: &[(&str, &str)] = &[
    (
        "lstm_forward",
        "output Y_c ('output_2') is not supported with --lstm sequence",
    ),
    (
        "lstm_reverse_states",
        "initial_h must be absent or constant zeros",
    ),
    (
        "lstm_bidirectional_layout1",
        "output Y_c ('output_2') is not supported",
    ),
];

/// The fixture's stored onnxruntime outputs (`.expected.npy`, `.expected_<i>.npy`).
fn stored_outputs(model: &Path) -> Vec<NpyArray> {
    let stem = model.with_extension("");
    let mut v = vec![npy::read(&stem.with_extension("expected.npy")).unwrap()];
    for i in 1.. {
        let p = stem.with_extension(format!("expected_{i}.npy"));
        if !p.exists() {
            break;
        }
        v.push(npy::read(&p).unwrap());
    }
    v
}

fn max_rel_err(a: &[f32], b: &[f32]) -> f32 {
    let scale = b.iter().fold(1e-6f32, |m, x| m.max(x.abs()));
    a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs())) / scale
}

#[test]
fn lstm_fixtures_match_onnxruntime_on_the_first_invoke() {
    let mut models: Vec<PathBuf> = ["fixtures/ops", "fixtures/zoo"]
        .iter()
        .flat_map(|d| std::fs::read_dir(root().join(d)).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("lstm_") && name.ends_with(".onnx") && !name.contains(".dynamic")
        })
        .collect();
    models.sort();
    assert!(models.len() >= 7, "{models:?}");
    for model in &models {
        let name = model.file_stem().unwrap().to_string_lossy().to_string();
        let result = convert_file(model, &sequence());
        if let Some((_, why)) = REFUSED.iter().find(|(n, _)| *n == name) {
            let e = format!("{:#}", result.expect_err("refused"));
            assert!(e.contains("'/rnn/LSTM' (LSTM): ") && e.contains(why), "{e}");
            continue;
        }
        let conv = result.unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let fused = conv.ops_after.get("UNIDIRECTIONAL_SEQUENCE_LSTM").copied();
        assert!(fused.unwrap_or(0) >= 1, "{name}: {:?}", conv.ops_after);
        assert!(!conv.ops_after.contains_key("LOGISTIC"), "{name}: unrolled");
        assert!(
            conv.warnings.iter().any(|w| w.contains("variable tensors")),
            "{name}: {:?}",
            conv.warnings
        );
        let stem = model.with_extension("");
        let input = npy::read(&stem.with_extension("input.npy")).unwrap();
        let ours = run_lite(&conv.bytes, &name, &[(None, input)]).unwrap();
        let want = stored_outputs(model);
        assert_eq!(ours.len(), want.len(), "{name}");
        for ((oname, got), want) in ours.iter().zip(&want) {
            assert_eq!(got.shape, want.shape, "{name} {oname}");
            let e = max_rel_err(&got.to_f32(), &want.to_f32());
            assert!(e <= 1e-5, "{name} {oname}: max rel error {e:.2e}");
        }
    }
}

const T: usize = 5;
const BATCH: usize = 2;
const INPUT: usize = 3;
const HIDDEN: usize = 4;

/// `Y, Y_h = LSTM(X)` over `steps` steps (layout 0, forward), with fixed pseudo-random weights.
fn lstm_model(steps: usize) -> OnnxBuilder {
    lstm_model_with(steps, "forward", 0)
}

/// [`lstm_model`] in `direction` with `layout`.
fn lstm_model_with(steps: usize, direction: &'static str, layout: i64) -> OnnxBuilder {
    let values = |n: usize, seed: usize| -> Vec<f32> {
        (0..n)
            .map(|i| (((i * 37 + seed * 11) % 23) as f32 - 11.0) * 0.05)
            .collect()
    };
    let dirs = if direction == "bidirectional" { 2 } else { 1 };
    let (g4, d) = (4 * HIDDEN as i64, dirs as usize);
    let x = match layout {
        0 => [steps as i64, BATCH as i64, INPUT as i64],
        _ => [BATCH as i64, steps as i64, INPUT as i64],
    };
    let mut b = OnnxBuilder::new(14);
    b.input("x", &x)
        .init(ftensor(
            "w",
            &[dirs, g4, INPUT as i64],
            values(d * 4 * HIDDEN * INPUT, 1),
        ))
        .init(ftensor(
            "r",
            &[dirs, g4, HIDDEN as i64],
            values(d * 4 * HIDDEN * HIDDEN, 2),
        ))
        .init(ftensor("b", &[dirs, 2 * g4], values(d * 8 * HIDDEN, 3)))
        .node(
            "LSTM",
            "lstm",
            &["x", "w", "r", "b"],
            &["y", "y_h"],
            vec![
                ("hidden_size", Attr::I(HIDDEN as i64)),
                ("direction", Attr::S(direction)),
                ("layout", Attr::I(layout)),
            ],
        );
    b.output("y").output("y_h");
    b
}

fn input(steps: usize, seed: f32) -> Vec<f32> {
    (0..steps * BATCH * INPUT)
        .map(|i| ((i as f32 * 0.7 + seed).sin()) * 1.5)
        .collect()
}

#[test]
fn the_state_carries_on_to_the_next_invoke() {
    let streamed = convert_bytes(&lstm_model(T).bytes(), "lstm.onnx", &sequence()).unwrap();
    // The reference: the unrolled LSTM over both chunks as one sequence.
    let whole = convert_bytes(
        &lstm_model(2 * T).bytes(),
        "lstm2.onnx",
        &Default::default(),
    )
    .unwrap();
    let (first, second) = (input(T, 0.0), input(T, 1.0));
    let joined = [first.clone(), second.clone()].concat();
    let x = NpyArray::f32(vec![2 * T, BATCH, INPUT], joined);
    let want = run_lite(&whole.bytes, "whole", &[(None, x)]).unwrap();
    let want_y = want[0].1.to_f32();

    let bytes = literun::AlignedBytes::from_slice(&streamed.bytes);
    let model = literun::Model::from_bytes(&bytes).unwrap();
    let mut it = literun::Interpreter::new(&model).unwrap();
    let step = BATCH * HIDDEN;
    for (k, chunk) in [first, second].iter().enumerate() {
        it.input_mut(0).unwrap().copy_from_f32(chunk).unwrap();
        it.invoke().unwrap();
        let y = it.output(0).unwrap().as_f32().unwrap().to_vec();
        let expect = &want_y[k * T * step..(k + 1) * T * step];
        let e = max_rel_err(&y, expect);
        assert!(e <= 1e-5, "invoke {k}: Y differs by {e:.2e}");
        let y_h = it.output(1).unwrap().as_f32().unwrap().to_vec();
        assert_eq!(y_h, y[(T - 1) * step..], "invoke {k}: Y_h is Y's last step");
        if k == 1 {
            // Not what a fresh interpreter gives on the second chunk alone.
            let x = NpyArray::f32(vec![T, BATCH, INPUT], chunk.clone());
            let fresh = run_lite(&streamed.bytes, "fresh", &[(None, x)]).unwrap();
            assert!(max_rel_err(&y, &fresh[0].1.to_f32()) > 1e-2);
        }
    }
}

#[test]
fn reverse_and_bidirectional_lstms_match_the_unrolled_ones_on_the_first_invoke() {
    for direction in ["reverse", "bidirectional"] {
        for layout in [0, 1] {
            let b = lstm_model_with(T, direction, layout);
            let fused = convert_bytes(&b.bytes(), "lstm.onnx", &sequence()).unwrap();
            let ops = &fused.ops_after;
            let want_ops = if direction == "bidirectional" { 2 } else { 1 };
            assert_eq!(
                ops.get("UNIDIRECTIONAL_SEQUENCE_LSTM"),
                Some(&want_ops),
                "{ops:?}"
            );
            let unrolled = convert_bytes(&b.bytes(), "lstm.onnx", &Default::default()).unwrap();
            let shape = match layout {
                0 => vec![T, BATCH, INPUT],
                _ => vec![BATCH, T, INPUT],
            };
            let x = [(None, NpyArray::f32(shape, input(T, 0.5)))];
            let got = run_lite(&fused.bytes, "fused", &x).unwrap();
            let want = run_lite(&unrolled.bytes, "unrolled", &x).unwrap();
            for ((name, g), (_, w)) in got.iter().zip(&want) {
                assert_eq!(g.shape, w.shape, "{direction} layout {layout} {name}");
                let e = max_rel_err(&g.to_f32(), &w.to_f32());
                assert!(e <= 1e-5, "{direction} layout {layout} {name}: {e:.2e}");
            }
        }
    }
}

#[test]
fn lstms_the_option_cannot_write_exactly_are_refused() {
    let err = |edit: &dyn Fn(&mut OnnxBuilder)| {
        let mut b = lstm_model(T);
        edit(&mut b);
        let e = convert_bytes(&b.bytes(), "lstm.onnx", &sequence()).unwrap_err();
        format!("{e:#}")
    };
    for (what, edit, want) in [
        (
            "input_forget",
            Box::new(|b: &mut OnnxBuilder| {
                b.g.node[0].attribute.push(attr("input_forget", Attr::I(1)))
            }) as Box<dyn Fn(&mut OnnxBuilder)>,
            "input_forget=1 is not supported",
        ),
        (
            "clip",
            Box::new(|b: &mut OnnxBuilder| b.g.node[0].attribute.push(attr("clip", Attr::F(3.0)))),
            "clip",
        ),
        (
            "initial_h",
            Box::new(|b: &mut OnnxBuilder| {
                b.init(ftensor(
                    "h0",
                    &[1, BATCH as i64, HIDDEN as i64],
                    vec![0.5; 8],
                ));
                b.g.node[0].input.extend(["".into(), "h0".into()]);
            }),
            "initial_h must be absent or constant zeros",
        ),
        (
            "peepholes",
            Box::new(|b: &mut OnnxBuilder| {
                b.init(ftensor("p", &[1, 3 * HIDDEN as i64], vec![0.1; 12]));
                b.g.node[0]
                    .input
                    .extend(["".into(), "".into(), "".into(), "p".into()]);
            }),
            "peephole weights (input P) are not supported",
        ),
        (
            "Y_c",
            Box::new(|b: &mut OnnxBuilder| {
                b.g.node[0].output.push("y_c".into());
                b.output("y_c");
            }),
            "output Y_c ('y_c') is not supported",
        ),
    ] {
        let e = err(&*edit);
        assert!(
            e.contains("'lstm' (LSTM): ") && e.contains(want),
            "{what}: {e}"
        );
    }
}

#[test]
fn full_int8_calibrates_each_sample_from_zero_state() {
    use litecvt::quantize::calibrate::{ArraySample, Method};
    use litecvt::quantize::QuantizeMode;
    let zoo = root().join("fixtures/zoo");
    let x = npy::read(&zoo.join("lstm_2layer.input.npy")).unwrap();
    let convert = |copies: usize| {
        let samples = vec![ArraySample::Positional(vec![x.clone()]); copies];
        let opts = ConvertOptions {
            quantize: Some(QuantizeMode::Int8Full),
            calibration_arrays: Some(samples),
            calibration_method: Some(Method::MinMax),
            ..sequence()
        };
        convert_file(&zoo.join("lstm_2layer.onnx"), &opts).unwrap()
    };
    let once = convert(1);
    assert!(once.ops_after.contains_key("UNIDIRECTIONAL_SEQUENCE_LSTM"));
    assert!(once.ops_after.contains_key("QUANTIZE") && once.ops_after.contains_key("DEQUANTIZE"));
    // The same sample again changes nothing: it does not continue the first one's sequence.
    assert!(convert(3).bytes == once.bytes);
    let got = run_lite(&once.bytes, "int8", &[(None, x.clone())]).unwrap();
    let want = npy::read(&zoo.join("lstm_2layer.expected.npy")).unwrap();
    let e = max_rel_err(&got[0].1.to_f32(), &want.to_f32());
    assert!(e <= 0.02, "int8 differs from onnxruntime by {e:.2e}");
}
