//! Deterministic mutation corpus: every fixture, converted in every mode, is corrupted thousands
//! of ways (bit flips, byte and 32-bit field overwrites with edge values, truncations); literun
//! must answer `Ok` or `Err` for each — never panic. The ONNX importer gets the same treatment.

use litecvt::convert::{convert_bytes, convert_file, ConvertOptions};
use litecvt::quantize::QuantizeMode;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A small deterministic generator (PCG-style LCG), so every failure is reproducible by index.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }
}

const EDGE_WORDS: [u32; 8] = [
    0,
    1,
    0xFFFF_FFFF,
    0x7FFF_FFFF,
    0x8000_0000,
    0x0000_FFFF,
    0x7F80_0000, // +inf as f32
    0x7FC0_0000, // NaN as f32
];

/// One corrupted copy of `good`: the mutation kind and position come from `rng`.
fn mutate(good: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut bad = good.to_vec();
    match rng.next() % 4 {
        0 => {
            for _ in 0..1 + rng.next() % 4 {
                let i = rng.next() % bad.len();
                bad[i] ^= 1 << (rng.next() % 8);
            }
        }
        1 => {
            let i = rng.next() % bad.len();
            bad[i] = rng.next() as u8;
        }
        2 => {
            // A 4-byte aligned field (offsets, lengths, indices, shapes, scales) set to an edge value.
            let i = (rng.next() % (bad.len() / 4)) * 4;
            let w = EDGE_WORDS[rng.next() % EDGE_WORDS.len()];
            bad[i..i + 4].copy_from_slice(&w.to_le_bytes());
        }
        _ => bad.truncate(rng.next() % bad.len()),
    }
    bad
}

/// Verifies, prepares and runs `bytes` with every input filled; any outcome but a panic is fine.
fn run_untrusted(bytes: &[u8]) {
    let a = literun::AlignedBytes::from_slice(bytes);
    let Ok(model) = literun::Model::from_bytes(&a) else {
        return;
    };
    let Ok(mut it) = literun::Interpreter::new(&model) else {
        return;
    };
    for i in 0..it.inputs().len() {
        if let Ok(mut t) = it.input_mut(i) {
            t.bytes_mut().fill(0x3F);
        }
    }
    let _ = it.invoke();
    for k in 0..it.outputs().len() {
        let _ = it.output(k);
    }
}

fn models() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let fixtures = [
        ("digits_cnn", "digits"),
        ("mobilenetv2_block", "mobilenetv2_block"),
        ("attention_block", "attention_block"),
    ];
    for (name, calib) in fixtures {
        let model = root().join("fixtures").join(format!("{name}.onnx"));
        for (mode, q, c) in [
            ("float", None, None),
            ("fp16", Some(QuantizeMode::Fp16), None),
            ("int8w", Some(QuantizeMode::Int8Weights), None),
            ("int8", Some(QuantizeMode::Int8Full), Some(calib)),
        ] {
            let opts = ConvertOptions {
                quantize: q,
                calibration: c.map(|c| root().join("calibration").join(c)),
                ..Default::default()
            };
            let conv = convert_file(&model, &opts).expect("fixture converts");
            out.push((format!("{name} {mode}"), conv.bytes));
        }
    }
    out
}

#[test]
fn corrupted_model_files_never_panic_literun() {
    const PER_MODEL: usize = 160;
    let mut panics = Vec::new();
    for (name, good) in models() {
        run_untrusted(&good);
        let mut rng = Rng(0x5EED ^ good.len() as u64);
        for case in 0..PER_MODEL {
            let bad = mutate(&good, &mut rng);
            if catch_unwind(AssertUnwindSafe(|| run_untrusted(&bad))).is_err() {
                panics.push(format!("{name} case {case}"));
            }
        }
    }
    assert!(panics.is_empty(), "literun panicked on: {panics:?}");
}

#[test]
fn corrupted_onnx_files_never_panic_the_converter() {
    const PER_MODEL: usize = 100;
    let mut panics = Vec::new();
    for name in [
        "digits_cnn",
        "mobilenetv2_block",
        "attention_block",
        "ops/conv_basic",
        // already-quantized: the default conversion is full int8 / int8 weights-only
        "qdq/qat_cnn",
        "qdq/digits_cnn.s8s8_pc",
        "qdq/digits_cnn.dynamic",
    ] {
        let good = std::fs::read(root().join("fixtures").join(format!("{name}.onnx"))).unwrap();
        let mut rng = Rng(0x0DD ^ good.len() as u64);
        for case in 0..PER_MODEL {
            let bad = mutate(&good, &mut rng);
            let r = catch_unwind(AssertUnwindSafe(|| {
                let _ = convert_bytes(&bad, "fuzz.onnx", &ConvertOptions::default());
            }));
            if r.is_err() {
                panics.push(format!("{name} case {case}"));
            }
        }
    }
    assert!(panics.is_empty(), "the converter panicked on: {panics:?}");
}

/// Every input the ONNX fuzz target (`fuzz/fuzz_targets/onnx.rs`) crashed on, named after the bug:
/// the converter must answer with an error that names the file.
#[test]
fn onnx_fuzz_regressions() {
    let dir = root().join("tests/data/fuzz_onnx");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let data = std::fs::read(&p).unwrap();
        let label = p.file_name().unwrap().to_string_lossy().into_owned();
        eprintln!("{}", p.display());
        if let Err(e) = convert_bytes(&data, &label, &ConvertOptions::default()) {
            let msg = format!("{e:#}");
            eprintln!("  {msg}");
            assert!(msg.contains(&label), "error without the file name: {msg}");
        }
        n += 1;
    }
    assert!(n > 0);
}
