//! Runs the committed converted fixture models (`literun/examples/models/*.lite`) on the committed
//! fixture inputs and checks the outputs against committed expected outputs: bit-exact for the
//! full-int8 models, within 1e-6 relative for the float ones. The expected outputs were written by
//! literun on x86-64 (`examples/models/make.sh`), so running this test on another target (CI runs
//! it under `qemu-aarch64`, with and without dotprod) proves that target computes the same numbers.

use literun::{AlignedBytes, DType, Interpreter, Model};
use std::path::{Path, PathBuf};

mod npy;
use npy::read_npy;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// Runs `models/<model>.lite` on `input` and compares with `models/<model>.expected.npy`, on one
/// thread and (feature `threads`) on two to four, which must give the same numbers.
fn check(model: &str, input: &str, exact: bool) {
    check_on(model, input, exact, 1);
    #[cfg(feature = "threads")]
    for threads in 2..=4 {
        check_on(model, input, exact, threads);
    }
}

fn check_on(model: &str, input: &str, exact: bool, threads: usize) {
    let dir = root().join("examples/models");
    let bytes = AlignedBytes::read_file(dir.join(format!("{model}.lite"))).unwrap();
    let m = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&m).unwrap();
    #[cfg(feature = "threads")]
    {
        it = it.with_threads(threads).unwrap();
    }
    assert_eq!(it.threads(), threads, "{model}");
    let x = read_npy(&root().join(input));
    {
        let mut t = it.input_mut(0).unwrap();
        assert_eq!(t.shape(), &x.shape[..], "{model}: input shape");
        assert_eq!(t.dtype(), DType::F32);
        assert_eq!(x.descr, "<f4");
        t.bytes_mut().copy_from_slice(&x.data);
    }
    it.invoke().unwrap();
    let want = read_npy(&dir.join(format!("{model}.expected.npy")));
    let out = it.output(0).unwrap();
    assert_eq!(out.shape(), &want.shape[..], "{model}: output shape");
    if exact {
        assert_eq!(out.bytes(), &want.data[..], "{model}: not bit-exact");
        return;
    }
    assert_eq!(want.descr, "<f4");
    let got = out.as_f32().unwrap();
    let want: Vec<f32> = want
        .data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let scale = want.iter().fold(0f32, |a, &b| a.max(b.abs())).max(1e-30);
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        let rel = (g - w).abs() / scale;
        assert!(rel <= 1e-6, "{model}[{i}]: got {g}, want {w} (rel {rel:e})");
    }
}

#[test]
fn digits_cnn_float() {
    check("digits_cnn", "../fixtures/digits_cnn.input.npy", false);
}

#[test]
fn digits_cnn_int8_bit_exact() {
    check("digits_cnn.int8", "../fixtures/digits_cnn.input.npy", true);
}

#[test]
fn mobilenetv2_block_float() {
    check(
        "mobilenetv2_block",
        "../fixtures/mobilenetv2_block.input.npy",
        false,
    );
}

#[test]
fn mobilenetv2_block_int8_bit_exact() {
    check(
        "mobilenetv2_block.int8",
        "../fixtures/mobilenetv2_block.input.npy",
        true,
    );
}

#[test]
fn attention_block_float() {
    check(
        "attention_block",
        "../fixtures/attention_block.input.npy",
        false,
    );
}

#[test]
fn attention_block_int8_bit_exact() {
    check(
        "attention_block.int8",
        "../fixtures/attention_block.input.npy",
        true,
    );
}

/// Per-channel quantization parameters are read in place from an aligned model (no copy of
/// thousands of scales and zero points), with the values of the file.
#[test]
fn per_channel_quantization_is_borrowed_from_the_model() {
    use std::borrow::Cow;
    let bytes = AlignedBytes::read_file(root().join("examples/models/mobilenetv2_block.int8.lite"))
        .unwrap();
    let m = Model::from_bytes(&bytes).unwrap();
    let per_channel: Vec<_> = m
        .tensors()
        .iter()
        .filter_map(|t| t.qparams.as_ref())
        .filter(|q| !q.is_per_tensor())
        .collect();
    assert!(!per_channel.is_empty());
    for q in per_channel {
        assert!(matches!(q.scales, Cow::Borrowed(_)));
        assert!(matches!(q.zero_points, Cow::Borrowed(_)));
        assert!(q.scales.iter().all(|&s| s.is_finite() && s > 0.0));
        assert_eq!(q.zero_points.len(), q.scales.len());
        assert!(bytes
            .as_ptr_range()
            .contains(&(q.scales.as_ptr() as *const u8)));
    }
}

/// The outputs of `models/<model>.lite` on `input` after `invokes` invokes on `threads` threads
/// (each invoke's outputs must equal the first's).
#[cfg(feature = "threads")]
fn outputs_after(model: &str, input: &str, threads: usize, invokes: usize) -> Vec<u8> {
    let bytes =
        AlignedBytes::read_file(root().join(format!("examples/models/{model}.lite"))).unwrap();
    let m = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&m).unwrap().with_threads(threads).unwrap();
    let x = read_npy(&root().join(input));
    let mut first: Option<Vec<u8>> = None;
    for i in 0..invokes {
        it.input_mut(0)
            .unwrap()
            .bytes_mut()
            .copy_from_slice(&x.data);
        it.invoke().unwrap();
        let out = it.output(0).unwrap().bytes().to_vec();
        match &first {
            Some(f) => assert_eq!(&out, f, "{model} on {threads} threads, invoke {i}"),
            None => first = Some(out),
        }
    }
    first.unwrap()
}

/// The worker threads persist across invokes (with pauses long enough for them to fall
/// asleep), several interpreters run their own workers at once, and each stops cleanly when
/// its interpreter is dropped: the numbers stay those of one thread throughout.
#[cfg(feature = "threads")]
#[test]
fn workers_across_invokes_and_interpreters() {
    let cases = [
        (
            "mobilenetv2_block",
            "../fixtures/mobilenetv2_block.input.npy",
        ),
        (
            "mobilenetv2_block.int8",
            "../fixtures/mobilenetv2_block.input.npy",
        ),
    ];
    for (model, input) in cases {
        let want = outputs_after(model, input, 1, 1);
        std::thread::scope(|s| {
            let runs: Vec<_> = (2..=4)
                .map(|threads| s.spawn(move || outputs_after(model, input, threads, 40)))
                .collect();
            for r in runs {
                assert_eq!(r.join().unwrap(), want, "{model}");
            }
        });
        // Invokes far apart: the workers park in between and must wake for the next one.
        let bytes =
            AlignedBytes::read_file(root().join(format!("examples/models/{model}.lite"))).unwrap();
        let m = Model::from_bytes(&bytes).unwrap();
        let mut it = Interpreter::new(&m).unwrap().with_threads(2).unwrap();
        let x = read_npy(&root().join(input));
        for _ in 0..3 {
            it.input_mut(0)
                .unwrap()
                .bytes_mut()
                .copy_from_slice(&x.data);
            it.invoke().unwrap();
            assert_eq!(it.output(0).unwrap().bytes(), &want[..], "{model}");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}
