//! `litecvt bench`: latency and memory of one model file, with literun (`.lite`) or tract
//! (`.onnx`, the float reference a user might otherwise pick).
//!
//! Timing covers `invoke` (literun) or `run` (tract) only: the model is loaded and prepared
//! once, inputs are written once, then `warmup` untimed and `runs` timed invocations follow.
//! Inputs are the given `.npy` files, or deterministic pseudo-random values (uniform in
//! [-1, 1) for float inputs, the full range for integer ones).
//!
//! A `.lite` file runs in `literun-bench` (from `literun-tools`) when it is beside `litecvt`, or
//! at the path in `LITERUN_BENCH`, and built from the same sources: that process holds literun
//! and the model only, so its peak RSS is what an app pays, where `litecvt` itself starts with
//! ~8 MiB of tract's code and start-up data. Otherwise it runs here, and the report names
//! `litecvt` as the process measured. (docs/performance.md, "Peak RSS", builds a static
//! `literun-bench`, as a device binary would be, and points `LITERUN_BENCH` at it.)

pub use literun_tools::bench::{
    find_input, human, peak_rss_bytes, random_input, report_text, summarize, BenchOptions,
    BenchReport,
};

use crate::npy::NpyData;
use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Benchmarks a `.lite` file with literun: in `literun-bench` when it is beside this executable
/// and built with it (see the module notes), else in this process. `inputs` are the
/// `[NAME=]FILE.npy` arguments that `opts.inputs` were read from.
pub fn bench_lite(path: &Path, opts: &BenchOptions, inputs: &[String]) -> Result<BenchReport> {
    match lean_runner()? {
        Some(runner) => bench_lite_in(&runner, path, opts, inputs),
        None => literun_tools::bench::bench_lite(path, opts),
    }
}

/// The `literun-bench` to run in: the one `LITERUN_BENCH` names (an error if it cannot run or
/// was built from other sources), else the one beside this executable if it is there and built
/// from the same literun sources (a stale one would measure an older literun).
fn lean_runner() -> Result<Option<PathBuf>> {
    if let Some(path) = std::env::var_os("LITERUN_BENCH") {
        let runner = PathBuf::from(path);
        return match build_id(&runner) {
            Some(id) if id == literun_tools::BUILD_ID => Ok(Some(runner)),
            Some(_) => bail!(
                "LITERUN_BENCH={}: built from other sources than this litecvt (rebuild both)",
                runner.display()
            ),
            None => bail!("LITERUN_BENCH={}: cannot run it", runner.display()),
        };
    }
    let Ok(me) = std::env::current_exe() else {
        return Ok(None);
    };
    let runner = me.with_file_name(format!("literun-bench{}", std::env::consts::EXE_SUFFIX));
    Ok((build_id(&runner).as_deref() == Some(literun_tools::BUILD_ID)).then_some(runner))
}

/// What `runner --build-id` prints, if it runs.
fn build_id(runner: &Path) -> Option<String> {
    let out = std::process::Command::new(runner)
        .arg("--build-id")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Runs `literun-bench --json` and reads its report.
fn bench_lite_in(
    runner: &Path,
    path: &Path,
    opts: &BenchOptions,
    inputs: &[String],
) -> Result<BenchReport> {
    let mut cmd = std::process::Command::new(runner);
    cmd.arg(path)
        .args(["--runs", &opts.runs.to_string()])
        .args(["--warmup", &opts.warmup.to_string()])
        .args(["--threads", &opts.threads.to_string()])
        .arg("--json");
    for i in inputs {
        cmd.args(["--input", i]);
    }
    if opts.profile {
        cmd.arg("--profile");
    }
    if !opts.winograd {
        cmd.arg("--no-winograd");
    }
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {}", runner.display()))?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr).trim());
    }
    serde_json::from_slice(&out.stdout)
        .with_context(|| format!("{} printed an unreadable report", runner.display()))
}

/// Benchmarks an ONNX file with tract (optimized plan, one thread).
pub fn bench_onnx_tract(path: &Path, opts: &BenchOptions) -> Result<BenchReport> {
    use tract_onnx::prelude::*;
    use tract_onnx::tract_hir::infer::Factoid;
    let label = path.display().to_string();
    let file_bytes = std::fs::metadata(path)
        .with_context(|| format!("cannot read {label}"))?
        .len() as usize;
    let mut model = tract_onnx::onnx()
        .model_for_path(path)
        .map_err(|e| anyhow!("tract cannot load {label}: {e}"))?;
    let n_inputs = model.input_outlets()?.len();
    let mut values = TVec::new();
    for i in 0..n_inputs {
        let name = model.node(model.input_outlets()?[i].node).name.clone();
        let t: Tensor = match find_input(&opts.inputs, &name, i) {
            Some(a) => match &a.data {
                NpyData::F32(v) => {
                    tract_ndarray::ArrayD::from_shape_vec(a.shape.clone(), v.clone())?.into()
                }
                NpyData::I64(v) => {
                    tract_ndarray::ArrayD::from_shape_vec(a.shape.clone(), v.clone())?.into()
                }
                _ => bail!("{label}: input '{name}': only float32/int64 inputs for tract"),
            },
            None => {
                let fact = model.input_fact(i)?;
                let shape: Vec<usize> = fact
                    .shape
                    .dims()
                    .map(|d| {
                        d.concretize()
                            .and_then(|d| d.to_i64().ok())
                            .and_then(|d| usize::try_from(d).ok())
                    })
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        anyhow!("{label}: input '{name}' has no static shape; give --input")
                    })?;
                let n: usize = shape.iter().product();
                let bytes = random_input(literun::DType::F32, n, i as u64 + 1);
                let v: Vec<f32> = bytemuck::cast_slice(&bytes).to_vec();
                tract_ndarray::ArrayD::from_shape_vec(shape, v)?.into()
            }
        };
        model = model
            .with_input_fact(i, InferenceFact::dt_shape(t.datum_type(), t.shape()))
            .map_err(|e| anyhow!("tract: input {i}: {e}"))?;
        values.push(t.into_tvalue());
    }
    let runnable = crate::runtime::prepare_tract(model, &label)?;
    for _ in 0..opts.warmup {
        runnable
            .run(values.clone())
            .map_err(|e| anyhow!("tract failed on {label}: {e}"))?;
    }
    let mut lat = Vec::with_capacity(opts.runs);
    for _ in 0..opts.runs {
        let inputs = values.clone();
        let t0 = Instant::now();
        let out = runnable
            .run(inputs)
            .map_err(|e| anyhow!("tract failed on {label}: {e}"))?;
        lat.push(t0.elapsed().as_secs_f64() * 1e6);
        drop(out);
    }
    let mut r = summarize("tract", 1, lat);
    r.file_bytes = file_bytes;
    r.peak_rss_bytes = peak_rss_bytes();
    r.process = "litecvt".into();
    Ok(r)
}
