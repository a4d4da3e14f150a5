//! literun's speed, per kernel and per fixture model, with tract running the same float ONNX
//! model in the same run as the peer (`cargo bench --bench literun`; one thread).
//!
//! Kernels: one-operator ONNX models (MobileNet-sized shapes) converted with `--nhwc-io`, so the
//! `.lite` holds that operator alone, in float32 and in full int8 with int8 inputs and outputs
//! (calibrated on 8 random samples). Models: the converted fixtures in `literun/examples/models/`. Each benchmark times
//! writing the inputs and one `invoke`, or one tract `run` (which takes its input by value).
//! The LiteRT comparison, which needs Python, is `benches/compare_runtimes.py`.
//! `LITERUN_BENCH_DUMP=DIR` also writes the kernel models there (to profile one with
//! `literun-bench FILE --profile`, or under `perf`).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use litecvt::bench::random_input;
use litecvt::convert::{convert_bytes, ConvertOptions};
use litecvt::import::builder::{Attr, OnnxBuilder};
use litecvt::npy::{self, NpyArray};
use litecvt::quantize::{FullInt8Options, IoType, QuantizeMode};
use std::path::PathBuf;
use tract_onnx::prelude::*;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Deterministic values in [-1, 1) (`litecvt bench`'s pseudo-random float inputs).
fn values(n: usize, seed: u64) -> Vec<f32> {
    random_input(literun::DType::F32, n, seed)
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// A one-operator model: `name`, its input shape (NCHW), and the ONNX bytes.
struct Kernel {
    name: &'static str,
    input: Vec<i64>,
    onnx: Vec<u8>,
}

fn conv(name: &'static str, c: i64, hw: i64, o: i64, k: i64, stride: i64, group: i64) -> Kernel {
    let mut b = OnnxBuilder::new(13);
    b.input("x", &[1, c, hw, hw]).output("y");
    let w: Vec<f32> = values((o * (c / group) * k * k) as usize, 7)
        .iter()
        .map(|v| v * 0.2)
        .collect();
    b.init(litecvt::import::builder::ftensor(
        "w",
        &[o, c / group, k, k],
        w,
    ));
    b.weights("b", &[o]);
    let p = k / 2;
    b.node(
        "Conv",
        "conv",
        &["x", "w", "b"],
        &["c"],
        vec![
            ("kernel_shape", Attr::Is(vec![k, k])),
            ("strides", Attr::Is(vec![stride, stride])),
            ("pads", Attr::Is(vec![p, p, p, p])),
            ("group", Attr::I(group)),
        ],
    );
    b.node("Relu", "relu", &["c"], &["y"], vec![]);
    Kernel {
        name,
        input: vec![1, c, hw, hw],
        onnx: b.bytes(),
    }
}

fn kernels() -> Vec<Kernel> {
    let mut v = vec![
        conv("conv1x1_64to128_28", 64, 28, 128, 1, 1, 1),
        conv("conv3x3_32to64_56", 32, 56, 64, 3, 1, 1),
        conv("conv3x3s2_3to32_224", 3, 224, 32, 3, 2, 1),
        conv("depthwise3x3_144_56", 144, 56, 144, 3, 1, 144),
        conv("depthwise3x3s2_96_112", 96, 112, 96, 3, 2, 96),
    ];
    // Dense 1280 -> 1000 (MobileNetV2's classifier).
    let mut b = OnnxBuilder::new(13);
    b.input("x", &[1, 1280]).output("y");
    let w: Vec<f32> = values(1280 * 1000, 3).iter().map(|v| v * 0.05).collect();
    b.init(litecvt::import::builder::ftensor("w", &[1000, 1280], w));
    b.weights("b", &[1000]);
    b.node(
        "Gemm",
        "fc",
        &["x", "w", "b"],
        &["y"],
        vec![("transB", Attr::I(1))],
    );
    v.push(Kernel {
        name: "dense_1280to1000",
        input: vec![1, 1280],
        onnx: b.bytes(),
    });
    // Residual ADD of two activations.
    let mut b = OnnxBuilder::new(13);
    b.input("x", &[1, 32, 56, 56]).output("y");
    b.node("Relu", "r", &["x"], &["r"], vec![]);
    b.node("Sigmoid", "s", &["x"], &["s"], vec![]);
    b.node("Add", "add", &["r", "s"], &["y"], vec![]);
    v.push(Kernel {
        name: "relu_sigmoid_add_32_56",
        input: vec![1, 32, 56, 56],
        onnx: b.bytes(),
    });
    v
}

/// Times literun on `lite`: writing deterministic inputs (the arena reuses their memory, so an
/// app writes them before every `invoke`), then `invoke`.
fn time_literun(c: &mut Criterion, group: &str, id: &str, lite: &[u8]) {
    let bytes = literun::AlignedBytes::from_slice(lite);
    let model = literun::Model::from_bytes(&bytes).expect("verifies");
    let mut it = literun::Interpreter::new(&model).expect("prepares");
    let feeds: Vec<Vec<u8>> = (0..model.inputs().len())
        .map(|i| {
            let mut t = it.input_mut(i).unwrap();
            let n = t.bytes_mut().len() / t.dtype().size();
            random_input(t.dtype(), n, i as u64 + 1)
        })
        .collect();
    let mut g = c.benchmark_group(group);
    g.bench_function(
        BenchmarkId::new(format!("literun {}", it.isa().name()), id),
        |b| {
            b.iter(|| {
                for (i, f) in feeds.iter().enumerate() {
                    it.input_mut(i).unwrap().bytes_mut().copy_from_slice(f);
                }
                it.invoke().unwrap()
            })
        },
    );
    g.finish();
}

fn time_tract(c: &mut Criterion, group: &str, id: &str, onnx: &[u8], input: &[usize]) {
    let model = tract_onnx::onnx()
        .model_for_read(&mut std::io::Cursor::new(onnx))
        .unwrap()
        .with_input_fact(0, f32::fact(input).into())
        .unwrap()
        .into_optimized()
        .unwrap()
        .into_runnable()
        .unwrap();
    let n = input.iter().product();
    let x: Tensor = tract_ndarray::ArrayD::from_shape_vec(input.to_vec(), values(n, 1))
        .unwrap()
        .into();
    let mut g = c.benchmark_group(group);
    g.bench_function(BenchmarkId::new("tract", id), |b| {
        b.iter(|| model.run(tvec!(x.clone().into_tvalue())).unwrap())
    });
    g.finish();
}

fn kernel_benches(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    for k in kernels() {
        let float = ConvertOptions {
            nhwc_io: true,
            ..Default::default()
        };
        let f32_lite = convert_bytes(&k.onnx, k.name, &float)
            .expect("converts")
            .bytes;
        let shape: Vec<usize> = k.input.iter().map(|&d| d as usize).collect();
        let calib = dir.path().join(format!("{}.npy", k.name));
        let n: usize = shape.iter().product();
        let mut batch = vec![8];
        batch.extend(&shape[1..]);
        npy::write(&calib, &NpyArray::f32(batch, values(8 * n, 5))).unwrap();
        let int8 = ConvertOptions {
            nhwc_io: true,
            quantize: Some(QuantizeMode::Int8Full),
            calibration: Some(calib),
            int8: FullInt8Options {
                io_type: IoType::Integer,
                ..Default::default()
            },
            ..Default::default()
        };
        let i8_lite = convert_bytes(&k.onnx, k.name, &int8)
            .expect("quantizes")
            .bytes;
        if let Some(dir) = std::env::var_os("LITERUN_BENCH_DUMP") {
            // The files, to profile one with `literun-bench --profile` or `perf`.
            let dir = PathBuf::from(dir);
            std::fs::write(dir.join(format!("{}.f32.lite", k.name)), &f32_lite).unwrap();
            std::fs::write(dir.join(format!("{}.int8.lite", k.name)), &i8_lite).unwrap();
        }
        time_literun(c, "kernel float", k.name, &f32_lite);
        time_tract(c, "kernel float", k.name, &k.onnx, &shape);
        time_literun(c, "kernel int8", k.name, &i8_lite);
    }
}

fn model_benches(c: &mut Criterion) {
    let models = root().join("literun/examples/models");
    for name in ["digits_cnn", "mobilenetv2_block", "attention_block"] {
        for variant in ["", ".int8"] {
            let lite = std::fs::read(models.join(format!("{name}{variant}.lite"))).unwrap();
            let group = if variant.is_empty() {
                "model float"
            } else {
                "model int8"
            };
            time_literun(c, group, name, &lite);
        }
        let onnx = std::fs::read(root().join(format!("fixtures/{name}.onnx"))).unwrap();
        let input = npy::read(&root().join(format!("fixtures/{name}.input.npy"))).unwrap();
        time_tract(c, "model float", name, &onnx, &input.shape);
    }
}

criterion_group! {
    name = literun_benches;
    config = Criterion::default().sample_size(20).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2));
    targets = kernel_benches, model_benches
}
criterion_main!(literun_benches);
