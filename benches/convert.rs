//! Converter speed: a 100-layer CNN (float), and full int8 of the MobileNetV2-style fixture with
//! 100 calibration samples. `cargo bench --bench convert`.

use criterion::{criterion_group, criterion_main, Criterion};
use litecvt::convert::{convert_bytes, convert_file, ConvertOptions};
use litecvt::import::builder::deep_cnn;
use litecvt::npy::{self, NpyArray};
use litecvt::quantize::QuantizeMode;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn benches(c: &mut Criterion) {
    let model = deep_cnn(100);
    let opts = ConvertOptions::default();
    // Sanity: every conv becomes one CONV_2D with its BatchNorm and Relu folded in.
    let conv = convert_bytes(&model, "deep_cnn", &opts).expect("converts");
    assert_eq!(conv.ops_after.get("CONV_2D"), Some(&100));
    let mut g = c.benchmark_group("convert");
    g.sample_size(10);
    g.bench_function("deep_cnn_100_layers_float", |b| {
        b.iter(|| convert_bytes(&model, "deep_cnn", &opts).unwrap())
    });

    // 100 calibration samples: the fixture's 32, repeated.
    let dir = tempfile::tempdir().unwrap();
    let mut v = Vec::new();
    for i in 0..100 {
        let f = root().join(format!("calibration/mobilenetv2_block/{:04}.npy", i % 32));
        v.extend(npy::read(&f).unwrap().to_f32());
    }
    let batch = dir.path().join("calib.npy");
    npy::write(&batch, &NpyArray::f32(vec![100, 3, 32, 32], v)).unwrap();
    let int8 = ConvertOptions {
        quantize: Some(QuantizeMode::Int8Full),
        calibration: Some(batch),
        ..Default::default()
    };
    let mobilenet = root().join("fixtures/mobilenetv2_block.onnx");
    g.bench_function("mobilenetv2_block_full_int8_100_samples", |b| {
        b.iter(|| convert_file(&mobilenet, &int8).unwrap())
    });
    g.finish();
}

criterion_group!(convert, benches);
criterion_main!(convert);
