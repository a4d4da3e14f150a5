//! The TFLite Micro builtins in `.tflite` files written by TensorFlow's own converter
//! (`fixtures/tf/make_tf_fixtures.py`), each output compared with LiteRT's (committed next to
//! the file): float within 1e-5 relative (of the output's largest magnitude), integer outputs
//! exactly (int8 against LiteRT's reference kernels, and within one step of its builtin ones).

use literun::{AlignedBytes, DType, Interpreter, Model};
use std::path::{Path, PathBuf};

mod npy;
use npy::read_npy;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/tf")
}

/// One output: its type, shape and values (integers as integers).
struct Out {
    dtype: DType,
    shape: Vec<usize>,
    vals: Vec<f64>,
}

/// Runs `<stem>.tflite` on its committed inputs; returns every output.
fn run(stem: &str) -> Vec<Out> {
    let bytes = AlignedBytes::read_file(dir().join(format!("{stem}.tflite"))).unwrap();
    let m = Model::from_bytes(&bytes).unwrap_or_else(|e| panic!("{stem}: {e}"));
    let mut it = Interpreter::new(&m).unwrap_or_else(|e| panic!("{stem}: {e}"));
    for k in 0..m.inputs().len() {
        let x = read_npy(&dir().join(format!("{stem}.input{k}.npy")));
        let mut t = it.input_mut(k).unwrap();
        assert_eq!(t.shape(), &x.shape[..], "{stem}: input {k}");
        t.bytes_mut().copy_from_slice(&x.data);
    }
    it.invoke().unwrap_or_else(|e| panic!("{stem}: {e}"));
    (0..m.outputs().len())
        .map(|j| {
            let o = it.output(j).unwrap();
            let vals = match o.dtype() {
                DType::F32 => o.as_f32().unwrap().iter().map(|&v| f64::from(v)).collect(),
                DType::I8 => o.as_i8().unwrap().iter().map(|&v| f64::from(v)).collect(),
                DType::I32 => o.as_i32().unwrap().iter().map(|&v| f64::from(v)).collect(),
                d => panic!("{stem}: output type {d:?}"),
            };
            Out {
                dtype: o.dtype(),
                shape: o.shape().to_vec(),
                vals,
            }
        })
        .collect()
}

/// LiteRT's output `j` of `n` (`kind` "litert" or "litert_ref"): shape and values.
fn expected(stem: &str, j: usize, n: usize, kind: &str, want: DType) -> (Vec<usize>, Vec<f64>) {
    let file = if n == 1 {
        format!("{stem}.{kind}.npy")
    } else {
        format!("{stem}.out{j}.{kind}.npy")
    };
    let e = read_npy(&dir().join(&file));
    let vals = match (want, e.descr.as_str()) {
        (DType::F32, "<f4") => e
            .data
            .chunks(4)
            .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())))
            .collect(),
        (DType::I32, "<i4") => e
            .data
            .chunks(4)
            .map(|c| f64::from(i32::from_le_bytes(c.try_into().unwrap())))
            .collect(),
        (DType::I8, "|i1") => e.data.iter().map(|&b| f64::from(b as i8)).collect(),
        (d, s) => panic!("{file}: literun gives {d:?}, LiteRT {s}"),
    };
    (e.shape, vals)
}

/// Checks every output of `stem` against LiteRT: float within 1e-5 relative; integer outputs
/// exactly (with `int8` and reference-kernel outputs, against those and within one step of the
/// builtin ones).
fn check(stem: &str, int8: bool) {
    let outs = run(stem);
    let n = outs.len();
    for (j, o) in outs.iter().enumerate() {
        // LiteRT's reference resolver lacks some operators and versions (int8 DEPTH_TO_SPACE,
        // ELU); such files have only the builtin kernels' outputs, matched exactly.
        let ref_file = if n == 1 {
            format!("{stem}.litert_ref.npy")
        } else {
            format!("{stem}.out0.litert_ref.npy")
        };
        let has_ref = int8 && dir().join(ref_file).exists();
        let kinds: &[(&str, f64)] = if has_ref {
            &[("litert_ref", 0.0), ("litert", 1.0)]
        } else {
            &[("litert", 0.0)]
        };
        for &(kind, steps) in kinds {
            let (shape, want) = expected(stem, j, n, kind, o.dtype);
            assert_eq!(o.shape, shape, "{stem} output {j}");
            let d = if o.dtype == DType::F32 {
                let scale = want.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
                let r = o
                    .vals
                    .iter()
                    .zip(&want)
                    .map(|(x, y)| (x - y).abs() / scale)
                    .fold(0.0, f64::max);
                assert!(r <= 1e-5, "{stem} output {j}: {r}\n{:?}\n{want:?}", o.vals);
                r
            } else {
                let d = o
                    .vals
                    .iter()
                    .zip(&want)
                    .map(|(x, y)| (x - y).abs())
                    .fold(0.0, f64::max);
                assert!(
                    d <= steps,
                    "{stem} output {j} vs {kind}: {d}\n{:?}\n{want:?}",
                    o.vals
                );
                d
            };
            eprintln!("{stem} output {j}: at most {d:.2e} from LiteRT ({kind})");
        }
    }
}

/// DEPTH_TO_SPACE, SPACE_TO_DEPTH, REVERSE_V2, SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND, UNPACK,
/// PACK and GATHER_ND.
#[test]
fn tf_layout_float() {
    check("layout_float", false);
}

/// The same in a full-integer file (int8 data movement with quantized arithmetic between).
#[test]
fn tf_layout_int8() {
    check("layout_int8", true);
}

/// SHAPE, FILL, ZEROS_LIKE, BROADCAST_ARGS (an INT32 output) and DYNAMIC_UPDATE_SLICE.
#[test]
fn tf_values_float() {
    check("values_float", false);
}

/// ELU, COS, SIN, FLOOR_DIV, FLOOR_MOD, ADD_N, CUMSUM, REDUCE_ALL and L2_NORMALIZATION.
#[test]
fn tf_math_float() {
    check("math_float", false);
}

/// CEIL and ROUND (halves to even).
#[test]
fn tf_rounding_float() {
    check("rounding_float", false);
}

/// Int8 L2_NORMALIZATION (behind a float ELU).
#[test]
fn tf_norm_int8() {
    check("norm_int8", true);
}

/// A Keras LSTM fused into UNIDIRECTIONAL_SEQUENCE_LSTM: its state carries over from one
/// invocation to the next as in LiteRT (the same input gives a new output each time).
#[test]
fn tf_lstm_float_state_persists() {
    let stem = "lstm_float";
    let bytes = AlignedBytes::read_file(dir().join(format!("{stem}.tflite"))).unwrap();
    let m = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&m).unwrap();
    let x = read_npy(&dir().join(format!("{stem}.input0.npy")));
    let mut previous: Vec<f32> = Vec::new();
    for step in 0..3 {
        it.input_mut(0)
            .unwrap()
            .bytes_mut()
            .copy_from_slice(&x.data);
        it.invoke().unwrap();
        let got: Vec<f64> = it
            .output(0)
            .unwrap()
            .as_f32()
            .unwrap()
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        let file = if step == 0 {
            format!("{stem}.litert.npy")
        } else {
            format!("{stem}.step{step}.litert.npy")
        };
        let e = read_npy(&dir().join(&file));
        let want: Vec<f64> = e
            .data
            .chunks(4)
            .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())))
            .collect();
        assert_eq!(it.output(0).unwrap().shape(), &e.shape[..]);
        let scale = want.iter().fold(0f64, |m, v| m.max(v.abs()));
        let r = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs() / scale)
            .fold(0.0, f64::max);
        eprintln!("{stem} invocation {step}: max relative difference {r:.2e}");
        assert!(
            r <= 1e-5,
            "{stem} invocation {step}: {r}\n{got:?}\n{want:?}"
        );
        let now = it.output(0).unwrap().as_f32().unwrap().to_vec();
        assert_ne!(now, previous, "the state must change the output");
        previous = now;
    }
    // `reset_variables` starts the sequence over: the first invocation's output again.
    let first = it.output(0).unwrap().as_f32().unwrap().to_vec();
    it.reset_variables();
    it.input_mut(0)
        .unwrap()
        .bytes_mut()
        .copy_from_slice(&x.data);
    it.invoke().unwrap();
    let again = it.output(0).unwrap().as_f32().unwrap().to_vec();
    assert_ne!(again, first);
    let e = read_npy(&dir().join(format!("{stem}.litert.npy")));
    let want: Vec<f32> = e
        .data
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    assert!(again
        .iter()
        .zip(&want)
        .all(|(a, b)| (a - b).abs() <= 1e-5 * scale));
}

/// A Keras LSTM in a full-integer file (TFLite's 8x8_16 integer LSTM, int8 interface): every
/// output of three invocations on the same input (the state carries over) equals LiteRT's
/// reference kernels' and its builtin kernels'.
#[test]
fn tf_lstm_int8_state_persists() {
    check_int8_lstm("lstm16_int8io");
}

/// The same file edited into a CIFG LSTM with peepholes (batch-major).
#[test]
fn tf_lstm_int8_cifg_peephole() {
    check_int8_lstm("lstm16_cifg_peephole_int8io");
}

/// The same file edited into a layer-normalized LSTM with a projection (16 cells to 12
/// outputs, with bias and clip), cell clip, two sequences, time-major.
#[test]
fn tf_lstm_int8_layer_norm_projection() {
    check_int8_lstm("lstm16_norm_projection_int8io");
}

fn check_int8_lstm(stem: &str) {
    let bytes = AlignedBytes::read_file(dir().join(format!("{stem}.tflite"))).unwrap();
    let m = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&m).unwrap_or_else(|e| panic!("{stem}: {e}"));
    let x = read_npy(&dir().join(format!("{stem}.input0.npy")));
    let mut previous: Vec<i8> = Vec::new();
    for step in 0..3 {
        it.input_mut(0)
            .unwrap()
            .bytes_mut()
            .copy_from_slice(&x.data);
        it.invoke().unwrap();
        let got = it.output(0).unwrap().as_i8().unwrap().to_vec();
        for kind in ["litert_ref", "litert"] {
            let file = if step == 0 {
                format!("{stem}.{kind}.npy")
            } else {
                format!("{stem}.step{step}.{kind}.npy")
            };
            let e = read_npy(&dir().join(&file));
            assert_eq!(it.output(0).unwrap().shape(), &e.shape[..]);
            let want: Vec<i8> = e.data.iter().map(|&b| b as i8).collect();
            let differ = got.iter().zip(&want).filter(|(a, b)| a != b).count();
            assert_eq!(
                got, want,
                "{stem} invocation {step} vs {kind}: {differ} values differ"
            );
        }
        assert_ne!(got, previous, "the state must change the output");
        previous = got;
    }
    // `reset_variables` starts the sequence over, as LiteRT's `reset_all_variables`.
    it.reset_variables();
    it.invoke().unwrap();
    let e = read_npy(&dir().join(format!("{stem}.litert_ref.npy")));
    let first: Vec<i8> = e.data.iter().map(|&b| b as i8).collect();
    assert_eq!(it.output(0).unwrap().as_i8().unwrap(), &first[..]);
}
