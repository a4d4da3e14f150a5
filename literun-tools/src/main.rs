//! `literun-bench MODEL.lite`: latency and memory of a model run by literun, in a process that
//! holds nothing else (no converter), so its peak RSS is what an app pays. Small enough to copy
//! to a phone or board (`cargo build --release -p literun-tools --target aarch64-linux-android`).

use anyhow::{anyhow, bail, Context, Result};
use literun_tools::bench::{bench_lite, report_text, BenchOptions};
use literun_tools::npy;
use std::path::{Path, PathBuf};

const USAGE: &str = "usage: literun-bench MODEL.lite [--runs N] [--warmup N] [--threads N] \
[--input [NAME=]FILE.npy]... [--no-winograd] [--profile] [--json]";

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut model: Option<PathBuf> = None;
    let mut opts = BenchOptions::default();
    let mut json = false;
    let number = |flag: &str, v: Option<String>| -> Result<usize> {
        let v = v.ok_or_else(|| anyhow!("{flag} needs a value\n{USAGE}"))?;
        v.parse()
            .with_context(|| format!("{flag}: '{v}' is not a number"))
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--runs" => opts.runs = number("--runs", args.next())?.max(1),
            "--warmup" => opts.warmup = number("--warmup", args.next())?,
            "--threads" => opts.threads = number("--threads", args.next())?.max(1),
            "--input" => {
                let spec = args
                    .next()
                    .ok_or_else(|| anyhow!("--input needs [NAME=]FILE.npy\n{USAGE}"))?;
                opts.inputs.push(match spec.split_once('=') {
                    Some((name, file)) => (Some(name.to_string()), npy::read(Path::new(file))?),
                    None => (None, npy::read(Path::new(&spec))?),
                });
            }
            "--profile" => opts.profile = true,
            "--no-winograd" => opts.winograd = false,
            "--json" => json = true,
            "--build-id" => {
                println!("{}", literun_tools::BUILD_ID);
                return Ok(());
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            _ if a.starts_with('-') => bail!("unknown option {a}\n{USAGE}"),
            _ if model.is_none() => model = Some(PathBuf::from(a)),
            _ => bail!("one model at a time\n{USAGE}"),
        }
    }
    let model = model.ok_or_else(|| anyhow!("{USAGE}"))?;
    let r = bench_lite(&model, &opts)?;
    if json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        print!(
            "{}",
            report_text(&r, &model.display().to_string(), opts.warmup)
        );
    }
    Ok(())
}
