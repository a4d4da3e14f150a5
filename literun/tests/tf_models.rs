//! `.tflite` files written by TensorFlow's own converter (`fixtures/tf/make_tf_fixtures.py`) run
//! by literun and compared with LiteRT's outputs, committed next to them: float, float16 weights
//! and dynamic-range (hybrid) files within 1e-5 relative (of the output's largest magnitude);
//! full int8 bit-exact against LiteRT's reference kernels and within one step of its builtin ones.

use literun::{AlignedBytes, DType, Interpreter, Model};
use std::path::{Path, PathBuf};

mod npy;
use npy::read_npy;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/tf")
}

/// Runs `<stem>.tflite` on its committed inputs; returns the output's dtype and values (int8
/// values as integers).
fn run(stem: &str) -> (DType, Vec<usize>, Vec<f64>) {
    let bytes = AlignedBytes::read_file(dir().join(format!("{stem}.tflite"))).unwrap();
    let m = Model::from_bytes(&bytes).unwrap_or_else(|e| panic!("{stem}: {e}"));
    let mut it = Interpreter::new(&m).unwrap_or_else(|e| panic!("{stem}: {e}"));
    for k in 0..m.inputs().len() {
        let x = read_npy(&dir().join(format!("{stem}.input{k}.npy")));
        let mut t = it.input_mut(k).unwrap();
        assert_eq!(t.shape(), &x.shape[..], "{stem}: input {k}");
        assert_eq!(t.bytes_mut().len(), x.data.len(), "{stem}: input {k}");
        t.bytes_mut().copy_from_slice(&x.data);
    }
    it.invoke().unwrap_or_else(|e| panic!("{stem}: {e}"));
    let o = it.output(0).unwrap();
    let vals = match o.dtype() {
        DType::F32 => o.as_f32().unwrap().iter().map(|&v| f64::from(v)).collect(),
        DType::I8 => o.as_i8().unwrap().iter().map(|&v| f64::from(v)).collect(),
        d => panic!("{stem}: output type {d:?}"),
    };
    (o.dtype(), o.shape().to_vec(), vals)
}

fn expected(file: &str, want: DType) -> (Vec<usize>, Vec<f64>) {
    let e = read_npy(&dir().join(file));
    let vals = match (want, e.descr.as_str()) {
        (DType::F32, "<f4") => e
            .data
            .chunks(4)
            .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())))
            .collect(),
        (DType::I8, "|i1") => e.data.iter().map(|&b| f64::from(b as i8)).collect(),
        (d, s) => panic!("{file}: literun gives {d:?}, LiteRT {s}"),
    };
    (e.shape, vals)
}

/// Largest |a - b| relative to the largest |b|.
fn max_rel(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() / scale)
        .fold(0.0, f64::max)
}

fn check_float(stem: &str) {
    let (dt, shape, got) = run(stem);
    let (eshape, want) = expected(&format!("{stem}.litert.npy"), dt);
    assert_eq!(shape, eshape, "{stem}");
    let r = max_rel(&got, &want);
    eprintln!("{stem}: max relative difference {r:.2e}");
    assert!(r <= 1e-5, "{stem}: {r}\n{got:?}\n{want:?}");
}

fn check_int8(stem: &str) {
    let (dt, shape, got) = run(stem);
    // With a float interface the int8 result is dequantized at the end: compare in output steps.
    let step = if dt == DType::F32 {
        let bytes = AlignedBytes::read_file(dir().join(format!("{stem}.tflite"))).unwrap();
        let m = Model::from_bytes(&bytes).unwrap();
        let out = m.outputs()[0].tensor;
        let deq = m
            .operators()
            .iter()
            .find(|op| op.outputs.contains(&out))
            .unwrap();
        let src = deq.inputs[0].unwrap();
        f64::from(m.tensors()[src].quant.unwrap().scale)
    } else {
        1.0
    };
    for (file, steps) in [("litert_ref", 0.0), ("litert", 3.0)] {
        let (eshape, want) = expected(&format!("{stem}.{file}.npy"), dt);
        assert_eq!(shape, eshape, "{stem}");
        let d = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs() / step)
            .fold(0.0, f64::max);
        eprintln!("{stem}: at most {d:.3} output steps from LiteRT ({file})");
        assert!(
            d <= steps + 1e-3,
            "{stem} vs {file}: {d} steps\n{got:?}\n{want:?}"
        );
    }
}

#[test]
fn tf_ops_float() {
    check_float("ops_float");
}

/// SQUEEZE (one and two axes) as TensorFlow writes it for an input with two dynamic dimensions.
#[test]
fn tf_squeeze_float() {
    check_float("squeeze_float");
}

#[test]
fn tf_cnn_float_fp16_dynamic() {
    check_float("cnn_float");
    check_float("cnn_fp16");
    check_float("cnn_dynamic");
}

/// Dense layers on a dynamic batch: SHAPE, GATHER, REDUCE_PROD, CONCATENATION and PACK on
/// INT32 compute the flattened size around each FULLY_CONNECTED (float and hybrid); the shapes
/// after them are computed from the input's before running.
#[test]
fn tf_dense_dynamic_batch() {
    check_float("dense_float");
    check_float("dense_dynamic");
}

/// The same file resized to a batch of 3 (the input repeated): every row of the output is
/// LiteRT's batch-1 output.
#[cfg(feature = "dynamic-shapes")]
#[test]
fn tf_dense_resized_batch() {
    let bytes = AlignedBytes::read_file(dir().join("dense_float.tflite")).unwrap();
    let m = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&m).unwrap();
    it.resize_input(0, &[3, 7, 64]).unwrap();
    let x = read_npy(&dir().join("dense_float.input0.npy"));
    it.input_mut(0)
        .unwrap()
        .bytes_mut()
        .copy_from_slice(&x.data.repeat(3));
    it.invoke().unwrap();
    let o = it.output(0).unwrap();
    assert_eq!(o.shape(), &[3, 7, 40]);
    let got: Vec<f64> = o.as_f32().unwrap().iter().map(|&v| f64::from(v)).collect();
    let (_, want) = expected("dense_float.litert.npy", DType::F32);
    for row in got.chunks(want.len()) {
        assert!(max_rel(row, &want) <= 1e-5);
    }
}

/// IF (both branches taken once) and WHILE (a value-dependent trip count), each subgraph in an
/// arena of its own.
#[cfg(feature = "ops-variables")]
#[test]
fn tf_control_flow() {
    check_float("control_float");
}

#[test]
fn tf_cnn_int8() {
    check_int8("cnn_int8");
    check_int8("cnn_int8io");
}

/// An audio front-end on COMPLEX64: RFFT2D (the STFT's 1-D transform, fft_length [1, 64], and a
/// 2-D one, [8, 16]), COMPLEX_ABS, REAL and IMAG, then LOG. Both runtimes compute the transform
/// in double precision and round once to float (LiteRT with Ooura's split-radix FFT, literun
/// with radix-2), so a value can differ only where the two double results round to neighbouring
/// floats: at most 2^-23 of the output's largest magnitude (one float step of it) for the
/// spectra and their magnitudes (both `hypot` in double precision). The log magnitudes
/// (LiteRT's LOG through XNNPack) are held to the float files' 1e-5.
#[cfg(feature = "ops-fft")]
#[test]
fn tf_spectral_front_end() {
    let stem = "spectral_float";
    let bytes = AlignedBytes::read_file(dir().join(format!("{stem}.tflite"))).unwrap();
    let m = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&m).unwrap();
    let x = read_npy(&dir().join(format!("{stem}.input0.npy")));
    it.input_mut(0)
        .unwrap()
        .bytes_mut()
        .copy_from_slice(&x.data);
    it.invoke().unwrap();
    for j in 0..m.outputs().len() {
        let o = it.output(j).unwrap();
        let got: Vec<f64> = o.as_f32().unwrap().iter().map(|&v| f64::from(v)).collect();
        let (shape, want) = expected(&format!("{stem}.out{j}.litert.npy"), DType::F32);
        assert_eq!(o.shape(), &shape[..], "output {j}");
        let logs = m.operators().iter().any(|op| {
            op.code == literun::schema::BuiltinOperator::LOG
                && op.outputs.contains(&m.outputs()[j].tensor)
        });
        let tolerance = if logs {
            1e-5
        } else {
            f64::from(f32::EPSILON) / 2.0
        };
        let r = max_rel(&got, &want);
        eprintln!("{stem} output {j}: max relative difference {r:.2e}");
        assert!(r <= tolerance, "output {j}: {r}");
    }
}
