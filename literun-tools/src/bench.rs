//! Latency and memory of one `.lite` model with literun (`literun-bench`, and `litecvt bench`
//! for `.lite` files).
//!
//! Timing covers `invoke` only: the model is loaded and prepared once, inputs are written once,
//! then `warmup` untimed and `runs` timed invocations follow. Inputs are the given `.npy` files,
//! or deterministic pseudo-random values (uniform in [-1, 1) for float inputs, the full range
//! for integer ones). The model file is mapped, and the pages of weights literun prepacks are
//! given back while it prepares, so the peak RSS holds the weights once.

use crate::mapped::ModelFile;
use crate::npy::NpyArray;
use anyhow::{anyhow, bail, Result};
use std::path::Path;
use std::time::Instant;

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub runs: usize,
    pub warmup: usize,
    pub threads: usize,
    /// Inputs by name or position; missing ones are filled with pseudo-random values.
    pub inputs: Vec<(Option<String>, NpyArray)>,
    /// Also time each operator (literun only; through `invoke_timed`).
    pub profile: bool,
    /// literun's [`literun::Options::winograd`].
    pub winograd: bool,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            runs: 100,
            warmup: 10,
            threads: 1,
            inputs: Vec::new(),
            profile: false,
            winograd: true,
        }
    }
}

/// Measured figures.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct BenchReport {
    pub engine: String,
    pub runs: usize,
    pub threads: usize,
    /// Per-run latencies in microseconds, in run order.
    pub latencies_us: Vec<f64>,
    pub median_us: f64,
    pub p90_us: f64,
    pub min_us: f64,
    pub mean_us: f64,
    /// Time on a CPU per `invoke`, averaged over the timed runs, of the thread that invoked: unlike the latencies, not stretched by the time other
    /// processes hold the CPU. Unix, single thread only (workers' time is not counted).
    #[serde(default)]
    pub cpu_mean_us: Option<f64>,
    pub file_bytes: usize,
    /// literun only (0 for tract).
    pub arena_bytes: usize,
    pub weights_bytes: usize,
    pub prepacked_bytes: usize,
    /// Peak resident set (`VmHWM`) of the process that ran the model, if the OS reports it.
    pub peak_rss_bytes: Option<usize>,
    /// Resident set of that process before it loaded the model (its code, libraries, heap).
    pub start_rss_bytes: Option<usize>,
    /// Which process that was (`literun-bench`, or `litecvt` when it ran the model itself).
    pub process: String,
    /// Pages of the mapped file given back: each prepacked weight's while preparing, then all
    /// that hold nothing literun reads at run time.
    pub released_bytes: usize,
    /// The fast kernels' instruction set (literun).
    pub isa: String,
    /// Whether literun could use Winograd ([`literun::Options::winograd`]; `--no-winograd`).
    #[serde(default = "yes")]
    pub winograd: bool,
    /// With `profile`: (operator name, count, median µs per run of all operators of that
    /// name), slowest first.
    pub profile: Vec<(String, usize, f64)>,
    /// With `profile`: every operator that runs, slowest first (which layer to look at).
    #[serde(default)]
    pub operators: Vec<OperatorTime>,
}

/// One operator's median time per run (`BenchReport::operators`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct OperatorTime {
    /// Index in the model's operator list.
    pub index: usize,
    pub name: String,
    /// Shape of its first output.
    pub output_shape: Vec<usize>,
    pub median_us: f64,
}

fn yes() -> bool {
    true
}

/// Nanoseconds the calling thread has spent on a CPU (`CLOCK_THREAD_CPUTIME_ID`, Unix), else
/// `None`.
pub fn thread_cpu_ns() -> Option<u64> {
    #[cfg(unix)]
    {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        Some(u64::try_from(t.tv_sec).ok()? * 1_000_000_000 + u64::try_from(t.tv_nsec).ok()?)
    }
    #[cfg(not(unix))]
    None
}

/// `VmHWM` (peak resident set) of this process in bytes (Linux), else `None`.
pub fn peak_rss_bytes() -> Option<usize> {
    rss_bytes("VmHWM:")
}

/// A `/proc/self/status` memory line (`VmHWM:`, `VmRSS:`) in bytes.
fn rss_bytes(key: &str) -> Option<usize> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    // Nearest rank.
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn summarize(engine: &str, threads: usize, lat: Vec<f64>) -> BenchReport {
    let mut sorted = lat.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let mean = if lat.is_empty() {
        0.0
    } else {
        lat.iter().sum::<f64>() / lat.len() as f64
    };
    BenchReport {
        engine: engine.to_string(),
        runs: lat.len(),
        threads,
        median_us: percentile(&sorted, 50.0),
        p90_us: percentile(&sorted, 90.0),
        min_us: sorted.first().copied().unwrap_or(0.0),
        mean_us: mean,
        cpu_mean_us: None,
        latencies_us: lat,
        file_bytes: 0,
        arena_bytes: 0,
        weights_bytes: 0,
        prepacked_bytes: 0,
        peak_rss_bytes: None,
        start_rss_bytes: None,
        process: String::new(),
        released_bytes: 0,
        isa: String::new(),
        winograd: true,
        profile: Vec::new(),
        operators: Vec::new(),
    }
}

/// Deterministic pseudo-random bytes of a tensor of `n` elements of `dtype`.
pub fn random_input(dtype: literun::DType, n: usize, seed: u64) -> Vec<u8> {
    let mut out = vec![0u8; n * dtype.size()];
    fill_random(dtype, &mut out, seed);
    out
}

/// Fills `out` (a tensor of `dtype`) with the values [`random_input`] gives for `seed`: uniform
/// in [-1, 1) for float, the full range for 8-bit types, zeros for indices and shapes (always
/// valid).
pub fn fill_random(dtype: literun::DType, out: &mut [u8], seed: u64) {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    match dtype {
        literun::DType::F32 => {
            for o in out.chunks_exact_mut(4) {
                o.copy_from_slice(
                    &((next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0).to_le_bytes(),
                );
            }
        }
        literun::DType::I8 | literun::DType::U8 | literun::DType::Bool => {
            out.iter_mut().for_each(|o| *o = (next() >> 56) as u8)
        }
        _ => out.fill(0),
    }
}

pub fn find_input<'a>(
    inputs: &'a [(Option<String>, NpyArray)],
    name: &str,
    pos: usize,
) -> Option<&'a NpyArray> {
    inputs
        .iter()
        .find(|(n, _)| n.as_deref() == Some(name))
        .or_else(|| inputs.get(pos).filter(|(n, _)| n.is_none()))
        .map(|(_, a)| a)
}

/// Benchmarks a `.lite` file with literun.
pub fn bench_lite(path: &Path, opts: &BenchOptions) -> Result<BenchReport> {
    let label = path.display().to_string();
    let start_rss = rss_bytes("VmRSS:");
    let file = ModelFile::open(path)?;
    let bytes = file.bytes();
    let model = literun::Model::from_bytes(bytes).map_err(|e| anyhow!("{label}: {e}"))?;
    file.set_constants(model.tensors().iter().filter_map(|t| t.data));
    let mut released = 0;
    let mut interp = literun::Interpreter::with_options_releasing(
        &model,
        literun::Options {
            winograd: opts.winograd,
            ..Default::default()
        },
        &mut |part| released += file.release(part),
    )
    .and_then(|i| i.with_threads(opts.threads))
    .map_err(|e| anyhow!("{label}: {e}"))?;
    // Prepared: of the file, literun now reads only the constants it did not copy.
    released += file.release_unread();
    // Each input is written straight into the interpreter before every run (the arena plan
    // reuses an input's memory once it is read, so an app does the same), from its .npy
    // array or regenerated from its seed: the benchmark holds no copy of its own.
    let infos = model.inputs().to_vec();
    let mut feeds: Vec<Feed<'_>> = Vec::with_capacity(infos.len());
    for (i, info) in infos.iter().enumerate() {
        let mut t = interp.input_mut(i).map_err(|e| anyhow!("{label}: {e}"))?;
        let feed = match find_input(&opts.inputs, info.name, i) {
            Some(a) => {
                if a.shape != info.shape {
                    bail!(
                        "{label}: input '{}' expects shape {:?}, got {:?}",
                        info.name,
                        info.shape,
                        a.shape
                    );
                }
                if !a.write_le_bytes(t.bytes_mut()) {
                    bail!("{label}: input '{}' has the wrong element type", info.name);
                }
                Feed::Npy(a)
            }
            None => Feed::Random(info.dtype, i as u64 + 1),
        };
        feeds.push(feed);
    }
    let refill = |interp: &mut literun::Interpreter<'_>| -> Result<()> {
        set_inputs(interp, &feeds).map_err(|e| anyhow!("{label}: {e}"))
    };
    for _ in 0..opts.warmup {
        refill(&mut interp)?;
        interp.invoke().map_err(|e| anyhow!("{label}: {e}"))?;
    }
    let mut lat = Vec::with_capacity(opts.runs);
    // The invoking thread's CPU time over the invocations only (None if unavailable).
    let mut cpu_ns = Some(0u64);
    for _ in 0..opts.runs {
        refill(&mut interp)?;
        let c0 = thread_cpu_ns();
        let t0 = Instant::now();
        interp.invoke().map_err(|e| anyhow!("{label}: {e}"))?;
        lat.push(t0.elapsed().as_secs_f64() * 1e6);
        cpu_ns = match (cpu_ns, c0, thread_cpu_ns()) {
            (Some(sum), Some(a), Some(b)) => Some(sum + b.saturating_sub(a)),
            _ => None,
        };
    }
    let cpu_mean_us = cpu_ns
        .filter(|_| opts.threads == 1 && opts.runs > 0)
        .map(|ns| ns as f64 / 1e3 / opts.runs as f64);
    let (profile, operators) = if opts.profile {
        profile_ops(&mut interp, &model, &feeds, opts.runs).map_err(|e| anyhow!("{label}: {e}"))?
    } else {
        Default::default()
    };
    let mut r = summarize("literun", opts.threads, lat);
    r.cpu_mean_us = cpu_mean_us;
    r.isa = interp.isa().name().to_string();
    r.winograd = opts.winograd;
    r.profile = profile;
    r.operators = operators;
    r.file_bytes = bytes.len();
    r.arena_bytes = interp.arena_bytes();
    r.prepacked_bytes = interp.prepacked_bytes();
    // (Not through `const_bytes`, whose error for a non-constant tensor formats its name: that
    // would read the released metadata back in.)
    r.weights_bytes = model
        .tensors()
        .iter()
        .filter_map(|t| t.data.map(<[u8]>::len))
        .sum();
    r.peak_rss_bytes = peak_rss_bytes();
    r.start_rss_bytes = start_rss;
    r.released_bytes = released;
    r.process = std::env::current_exe()
        .ok()
        .and_then(|p| Some(p.file_stem()?.to_string_lossy().into_owned()))
        .unwrap_or_default();
    Ok(r)
}

/// Where an input's values come from.
enum Feed<'a> {
    Npy(&'a NpyArray),
    /// [`fill_random`] of this type with this seed.
    Random(literun::DType, u64),
}

/// Writes `feeds` (in input order) into the interpreter's inputs.
fn set_inputs(interp: &mut literun::Interpreter<'_>, feeds: &[Feed<'_>]) -> literun::Result<()> {
    for (i, feed) in feeds.iter().enumerate() {
        let mut t = interp.input_mut(i)?;
        match *feed {
            // The length was checked when the feed was made.
            Feed::Npy(a) => {
                a.write_le_bytes(t.bytes_mut());
            }
            Feed::Random(dtype, seed) => fill_random(dtype, t.bytes_mut(), seed),
        }
    }
    Ok(())
}

/// Time per operator name (median over `runs` of the per-run sum), slowest first.
/// What `--profile` finds: the time per operator type (name, count, median µs per run) and
/// per operator.
type Profile = (Vec<(String, usize, f64)>, Vec<OperatorTime>);

fn profile_ops(
    interp: &mut literun::Interpreter<'_>,
    model: &literun::Model<'_>,
    feeds: &[Feed<'_>],
    runs: usize,
) -> literun::Result<Profile> {
    let ops = model.operators();
    let mut names: Vec<String> = Vec::new();
    let mut slot = Vec::with_capacity(ops.len());
    let mut count = Vec::new();
    for op in ops {
        let n = op.name();
        let i = names.iter().position(|x| *x == n).unwrap_or_else(|| {
            names.push(n);
            count.push(0);
            names.len() - 1
        });
        count[i] += 1;
        slot.push(i);
    }
    let mut per_run: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    // Room for every run up front: no allocation between an operator and its timestamp.
    let mut per_op: Vec<Vec<f64>> = (0..ops.len()).map(|_| Vec::with_capacity(runs)).collect();
    for _ in 0..runs {
        set_inputs(interp, feeds)?;
        let mut sums = vec![0f64; names.len()];
        let mut last = Instant::now();
        // Called after each operator that runs (PADs folded into their convolution do not).
        interp.invoke_timed(&mut |op| {
            let now = Instant::now();
            let us = (now - last).as_secs_f64() * 1e6;
            sums[slot[op]] += us;
            per_op[op].push(us);
            last = Instant::now();
        })?;
        for (v, s) in per_run.iter_mut().zip(sums) {
            v.push(s);
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        percentile(&v, 50.0)
    };
    let mut by_type: Vec<(String, usize, f64)> = names
        .into_iter()
        .zip(count)
        .zip(per_run)
        .map(|((n, c), v)| (n, c, median(v)))
        .collect();
    by_type.sort_by(|a, b| b.2.total_cmp(&a.2));
    let tensors = model.tensors();
    let mut operators: Vec<OperatorTime> = per_op
        .into_iter()
        .enumerate()
        .filter(|(_, v)| !v.is_empty())
        .map(|(index, v)| OperatorTime {
            index,
            name: ops[index].name(),
            output_shape: ops[index]
                .outputs
                .first()
                .and_then(|&t| tensors.get(t))
                .map(|t| t.shape.clone())
                .unwrap_or_default(),
            median_us: median(v),
        })
        .collect();
    operators.sort_by(|a, b| b.median_us.total_cmp(&a.median_us));
    Ok((by_type, operators))
}

/// Bytes in KiB or MiB for people.
pub fn human(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{:.2} MiB", bytes as f64 / (1 << 20) as f64)
    } else if bytes >= 1 << 10 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

/// The report as text: `label` names the model, `warmup` the untimed runs.
pub fn report_text(r: &BenchReport, label: &str, warmup: usize) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let isa = match (r.isa.is_empty(), r.winograd) {
        (true, _) => String::new(),
        (false, true) => format!(" {} kernels", r.isa),
        (false, false) => format!(" {} kernels, no Winograd", r.isa),
    };
    let plural = if r.threads == 1 { "" } else { "s" };
    let _ = writeln!(
        s,
        "{label} ({}{isa}, {} thread{plural}, {} runs after {warmup} warm-up)",
        r.engine, r.threads, r.runs
    );
    let _ = writeln!(
        s,
        "  latency   median {:.1} µs   p90 {:.1} µs   min {:.1} µs   mean {:.1} µs",
        r.median_us, r.p90_us, r.min_us, r.mean_us
    );
    if let Some(cpu) = r.cpu_mean_us {
        let _ = writeln!(
            s,
            "  on CPU    mean {cpu:.1} µs per invoke (the invoking thread's CPU time)"
        );
    }
    let _ = writeln!(s, "  file      {}", human(r.file_bytes));
    if r.engine == "literun" {
        let _ = writeln!(s, "  weights   {}", human(r.weights_bytes));
        let _ = writeln!(
            s,
            "  arena     {} ({} B)",
            human(r.arena_bytes),
            r.arena_bytes
        );
        let _ = writeln!(s, "  prepacked {}", human(r.prepacked_bytes));
        let _ = writeln!(
            s,
            "  released  {} of the mapped file (prepacked weights, and metadata not read at run time)",
            human(r.released_bytes)
        );
    }
    if let Some(rss) = r.peak_rss_bytes {
        let start = r
            .start_rss_bytes
            .map(|b| format!(", {} before loading the model", human(b)))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "  peak RSS  {} (VmHWM of {}{start})",
            human(rss),
            r.process
        );
    }
    if !r.profile.is_empty() {
        let total: f64 = r.profile.iter().map(|p| p.2).sum();
        let _ = writeln!(s, "  per operator type (median µs per run):");
        for (name, count, us) in &r.profile {
            let _ = writeln!(
                s,
                "    {name:<24} x{count:<4} {us:>10.1} µs  {:>5.1}%",
                100.0 * us / total.max(1e-9)
            );
        }
    }
    if !r.operators.is_empty() {
        let total: f64 = r.operators.iter().map(|o| o.median_us).sum();
        let shown = r.operators.len().min(SLOWEST_SHOWN);
        let _ = writeln!(
            s,
            "  slowest operators (median µs per run; {shown} of {}, all in --json):",
            r.operators.len()
        );
        for o in &r.operators[..shown] {
            let _ = writeln!(
                s,
                "    #{:<4} {:<24} out {:<20} {:>10.1} µs  {:>5.1}%",
                o.index,
                o.name,
                format!("{:?}", o.output_shape),
                o.median_us,
                100.0 * o.median_us / total.max(1e-9)
            );
        }
    }
    s
}

/// Operators the text report lists with `--profile`.
const SLOWEST_SHOWN: usize = 12;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_nearest_rank() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 5.0);
        assert_eq!(percentile(&v, 90.0), 9.0);
        assert_eq!(percentile(&v, 100.0), 10.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }

    #[test]
    fn random_inputs_are_deterministic_and_in_range() {
        let a = random_input(literun::DType::F32, 1000, 1);
        assert_eq!(a, random_input(literun::DType::F32, 1000, 1));
        let f: &[f32] = bytemuck::cast_slice(&a);
        assert!(f.iter().all(|v| (-1.0..1.0).contains(v)));
        assert!(f.iter().any(|&v| v < -0.5) && f.iter().any(|&v| v > 0.5));
    }
}
