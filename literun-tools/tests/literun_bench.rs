//! `literun-bench` end to end: a report a program can read, the weights' file pages given back
//! while preparing, and a clear error for a file that is not a model.

use literun_tools::bench::BenchReport;
use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn bench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_literun-bench"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn json_report_of_a_float_model() {
    let model = root().join("literun/examples/models/digits_cnn.lite");
    let input = root().join("fixtures/digits_cnn.input.npy");
    let out = bench(&[
        model.to_str().unwrap(),
        "--runs",
        "3",
        "--warmup",
        "1",
        "--input",
        input.to_str().unwrap(),
        "--json",
        "--profile",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: BenchReport = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((r.engine.as_str(), r.runs), ("literun", 3));
    assert_eq!(r.latencies_us.len(), 3);
    assert!(r.min_us <= r.median_us && r.median_us <= r.p90_us);
    assert_eq!(
        r.file_bytes as u64,
        std::fs::metadata(&model).unwrap().len()
    );
    assert!(r.arena_bytes > 0 && r.weights_bytes > 0);
    assert!(r.profile.iter().any(|(name, _, _)| name == "CONV_2D"));
    // Every operator that ran, once, slowest first, with its output shape.
    let ops = &r.operators;
    assert!(ops
        .iter()
        .any(|o| o.name == "CONV_2D" && o.output_shape.len() == 4));
    assert!(ops.windows(2).all(|w| w[0].median_us >= w[1].median_us));
    let mut idx: Vec<usize> = ops.iter().map(|o| o.index).collect();
    idx.sort_unstable();
    idx.dedup();
    assert_eq!(idx.len(), ops.len());
    let per_type: usize = r.profile.iter().map(|p| p.1).sum();
    assert!(!ops.is_empty() && ops.len() <= per_type);
    assert_eq!(r.process, "literun-bench");
    if cfg!(target_os = "linux") {
        let (start, peak) = (r.start_rss_bytes.unwrap(), r.peak_rss_bytes.unwrap());
        assert!(start > 0 && peak >= start);
    }
    // The dense layer's float weights span whole pages, which the SIMD kernels prepack.
    if cfg!(all(
        unix,
        any(target_arch = "x86_64", target_arch = "aarch64")
    )) && std::env::var("LITERUN_ISA").as_deref() != Ok("portable")
    {
        assert!(r.released_bytes >= 4096, "released {}", r.released_bytes);
        assert!(r.released_bytes <= r.file_bytes);
    }
}

#[test]
fn text_report_and_errors() {
    let model = root().join("literun/examples/models/digits_cnn.int8.lite");
    let out = bench(&[model.to_str().unwrap(), "--runs", "2"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for line in ["latency", "arena", "prepacked", "peak RSS"] {
        assert!(text.contains(line), "no '{line}' in\n{text}");
    }
    // Not a model: the error names the file, and the exit status says it failed.
    let not_model = root().join("fixtures/digits_cnn.input.npy");
    let out = bench(&[not_model.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("digits_cnn.input.npy"), "{err}");
    let out = bench(&[model.to_str().unwrap(), "--runs", "x"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--runs"));
}

#[test]
fn no_winograd_is_passed_to_literun_and_reported() {
    let model = root().join("literun/examples/models/digits_cnn.lite");
    let report = |extra: &[&str]| -> BenchReport {
        let mut args = vec![model.to_str().unwrap(), "--runs", "1", "--json"];
        args.extend_from_slice(extra);
        let out = bench(&args);
        assert!(out.status.success());
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let (with, without) = (report(&[]), report(&["--no-winograd"]));
    assert!(with.winograd && !without.winograd);
    // Winograd keeps the taps packed as the direct GEMM does (plus a zero bias for its GEMMs,
    // where it runs), never fewer bytes.
    assert!(without.prepacked_bytes <= with.prepacked_bytes);
    let out = bench(&[model.to_str().unwrap(), "--runs", "1", "--no-winograd"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("no Winograd"));
}
