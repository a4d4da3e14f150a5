use super::{Command, ConvertArgs};

/// `println!` that ignores a closed stdout (`litecvt ... | head` must not panic).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}
use crate::bench::human;
use crate::convert::{convert_file, ConvertOptions};
use crate::import::LstmMode;
use crate::npy::{self, NpyArray};
use crate::passes::PassSelection;
use crate::quantize::calibrate::{ArraySample, ImageOptions, Method};
use crate::quantize::{FullInt8Options, IoType, QuantizeMode};
use crate::runtime::{error_stats, run_lite, run_onnx_tract};
use anyhow::{anyhow, bail, Context, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub fn run(cmd: Command) -> Result<()> {
    match cmd {
        Command::Convert(args) => convert(&args),
        Command::Inspect { model, json } => inspect(&model, json),
        Command::Run {
            model,
            inputs,
            named,
            output_dir,
            dump_tensors,
        } => run_model(
            &model,
            &inputs,
            &named,
            &output_dir,
            dump_tensors.as_deref(),
        ),
        Command::Compare {
            onnx,
            lite,
            inputs,
            named,
        } => compare(&onnx, &lite, &inputs, &named),
        Command::Bench {
            model,
            threads,
            runs,
            warmup,
            inputs,
            json,
            profile,
            no_winograd,
        } => {
            let opts = crate::bench::BenchOptions {
                runs: runs.max(1),
                warmup,
                threads: threads.max(1),
                inputs: Vec::new(),
                profile,
                winograd: !no_winograd,
            };
            bench(&model, opts, &inputs, json)
        }
    }
}

/// `litecvt bench`: `opts` without its inputs, which are read here from `inputs`.
fn bench(
    path: &Path,
    mut opts: crate::bench::BenchOptions,
    inputs: &[String],
    json: bool,
) -> Result<()> {
    for s in inputs {
        match s.split_once('=') {
            Some((name, file)) => opts
                .inputs
                .push((Some(name.to_string()), npy::read(Path::new(file))?)),
            None => opts.inputs.push((None, npy::read(Path::new(s))?)),
        }
    }
    let onnx = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"));
    let r = if onnx {
        crate::bench::bench_onnx_tract(path, &opts)?
    } else {
        crate::bench::bench_lite(path, &opts, inputs)?
    };
    if json {
        outln!("{}", serde_json::to_string(&r)?);
    } else {
        let text = crate::bench::report_text(&r, &path.display().to_string(), opts.warmup);
        outln!("{}", text.trim_end());
    }
    Ok(())
}

/// `NAME=A,B,...` options (`--input-shape`, `--input-value`) by name; `form` shows the syntax in
/// errors, `what` names one item.
fn parse_named_lists<T: std::str::FromStr>(
    flag: &str,
    form: &str,
    what: &str,
    specs: &[String],
) -> Result<HashMap<String, Vec<T>>> {
    let mut map = HashMap::new();
    for s in specs {
        let (name, items) = s
            .rsplit_once('=')
            .ok_or_else(|| anyhow!("{flag} '{s}': expected {form}"))?;
        let items = items
            .split(',')
            .map(|v| {
                v.trim()
                    .parse::<T>()
                    .map_err(|_| anyhow!("{flag} '{s}': '{v}' is not {what}"))
            })
            .collect::<Result<Vec<_>>>()?;
        map.insert(name.to_string(), items);
    }
    Ok(map)
}

fn parse_shapes(specs: &[String]) -> Result<HashMap<String, Vec<usize>>> {
    parse_named_lists("--input-shape", "NAME=D0,D1,...", "a dimension", specs)
}

fn parse_values(specs: &[String]) -> Result<HashMap<String, Vec<f64>>> {
    parse_named_lists("--input-value", "NAME=V0,V1,...", "a number", specs)
}

/// The conversion options `args` ask for; `arrays`, representative samples held in memory,
/// stand for `--calibration` where it is not given.
pub fn convert_options(
    args: &ConvertArgs,
    arrays: Option<Vec<ArraySample>>,
) -> Result<ConvertOptions> {
    let calibrated = args.calibration.is_some() || arrays.is_some();
    let passes = match (&args.passes, args.no_optimize) {
        (Some(list), _) => PassSelection::parse_list(list)?,
        (None, true) => PassSelection::None,
        (None, false) => PassSelection::All,
    };
    let quantize = match (args.quantize.as_deref(), calibrated) {
        (None, _) => None,
        (Some("fp16"), _) => Some(QuantizeMode::Fp16),
        (Some("int16x8"), _) => Some(QuantizeMode::Int16x8),
        (Some("int8"), false) => Some(QuantizeMode::Int8Weights),
        (Some("int8"), true) => Some(QuantizeMode::Int8Full),
        (Some(m), _) => bail!("--quantize {m}: expected fp16, int8 or int16x8"),
    };
    // The integer interface is the activations' type.
    let io_type = match (args.io_type.as_str(), quantize) {
        ("float", _) => IoType::Float,
        ("int16", Some(QuantizeMode::Int16x8)) | ("int8", Some(QuantizeMode::Int8Full)) => {
            IoType::Integer
        }
        ("int8", None | Some(QuantizeMode::Int8Weights)) => IoType::Integer,
        (t, _) => bail!(
            "--io-type {t} does not match --quantize {}: int8 goes with int8, int16 with \
             int16x8",
            args.quantize.as_deref().unwrap_or("(none)")
        ),
    };
    Ok(ConvertOptions {
        input_shapes: parse_shapes(&args.input_shapes)?,
        input_values: parse_values(&args.input_values)?,
        nhwc_io: args.nhwc_io,
        training_as_inference: args.training_as_inference,
        lstm: match args.lstm.as_str() {
            "unrolled" => LstmMode::Unrolled,
            "sequence" => LstmMode::Sequence,
            other => bail!("--lstm: '{other}' is not unrolled or sequence"),
        },
        passes,
        quantize,
        calibration: args.calibration.clone(),
        calibration_arrays: arrays,
        calibration_method: args
            .calibration_method
            .as_deref()
            .map(Method::parse)
            .transpose()?,
        int8: FullInt8Options {
            io_type,
            strict: args.strict_int8,
            exclude_nodes: args.exclude.clone(),
            exclude_ops: args.exclude_op.clone(),
            per_tensor_dense: args.per_tensor_dense,
            ..Default::default()
        },
        progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        min_snr_db: args.min_snr,
        accept_snr_miss: args.accept_snr_miss,
        no_bias_correction: args.no_bias_correction,
        no_weight_rounding: args.no_weight_rounding,
        layernorm_int16: args.layernorm_int16,
        no_equalize: args.no_equalize,
        images: ImageOptions {
            mean: args.mean.clone(),
            std: args.std.clone(),
            resize: match args.resize.as_deref() {
                None => None,
                Some([h, w]) => Some([*h, *w]),
                Some(_) => bail!("--resize expects H,W"),
            },
        },
    })
}

fn convert(args: &ConvertArgs) -> Result<()> {
    let (model, output) = (args.model.as_path(), args.output.as_path());
    let opts = convert_options(args, None)?;
    let c = convert_file(model, &opts)?;
    for w in &c.warnings {
        eprintln!("warning: {}: {w}", model.display());
    }
    crate::util::write_atomic(output, &c.bytes)?;
    let hist = |h: &std::collections::BTreeMap<String, usize>| {
        h.iter()
            .map(|(k, v)| format!("{k}×{v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let onnx_size = std::fs::metadata(model)
        .map(|m| m.len() as usize)
        .unwrap_or(0);
    outln!("converted {} → {}", model.display(), output.display());
    outln!(
        "  ONNX ops   ({:>3}): {}",
        c.ops_before.values().sum::<usize>(),
        hist(&c.ops_before)
    );
    outln!(
        "  TFLite ops ({:>3}): {}",
        c.ops_after.values().sum::<usize>(),
        hist(&c.ops_after)
    );
    outln!(
        "  size: {} (ONNX {}), weights {}, arena {}, {:.0} ms",
        human(c.bytes.len()),
        human(onnx_size),
        human(c.weight_bytes),
        human(c.arena_bytes),
        c.seconds * 1000.0
    );
    if let Some(q) = &c.quantization {
        print_quantization(q, args.verbose);
    }
    if args.verbose {
        print_passes(&c.pipeline);
    }
    if let Some(path) = &args.report {
        let report = c.report_json(&model.display().to_string(), &output.display().to_string());
        let text = serde_json::to_string_pretty(&report)?;
        crate::util::write_atomic(path, text.as_bytes())?;
    }
    Ok(())
}

fn print_quantization(q: &crate::convert::QuantReport, verbose: bool) {
    let s = &q.summary;
    outln!(
        "  quantized ({}): {} node(s); weights {} → {}; {} QUANTIZE, {} DEQUANTIZE",
        s.mode,
        s.quantized_nodes,
        human(s.weight_bytes_before),
        human(s.weight_bytes_after),
        s.quantize_ops,
        s.dequantize_ops
    );
    if !s.float_nodes.is_empty() {
        outln!("  left in float ({}):", s.float_nodes.len());
        for (name, op, why) in &s.float_nodes {
            outln!("    '{name}' ({op}): {why}");
        }
    }
    if !s.notes.is_empty() {
        outln!("  the model's quantization, adjusted ({}):", s.notes.len());
        for n in &s.notes {
            outln!("    {n}");
        }
    }
    if !q.equalized.is_empty() {
        outln!(
            "  cross-layer equalization: {} tensor(s){}",
            q.equalized.len(),
            if verbose {
                format!(": {}", q.equalized.join(", "))
            } else {
                String::new()
            }
        );
    }
    if q.rounded_weight_layers > 0 {
        outln!(
            "  weights of {} layer(s) rounded with error compensation (GPTQ)",
            q.rounded_weight_layers
        );
    }
    if let Some(before) = q.snr_before_bias_correction {
        outln!(
            "  bias correction: {} layer(s) (output SNR {:.1} dB without it)",
            q.bias_corrected.len(),
            before
        );
    }
    if q.recurrent_int16 > 0 {
        outln!(
            "  LSTM/GRU cells with int16 activations and float gate functions: {} layer(s)",
            q.recurrent_int16
        );
    }
    if q.layernorm_int16 > 0 {
        outln!(
            "  LayerNorms with int16 activations: {} op(s), {} without a 16x8 kernel in float",
            q.layernorm_int16,
            q.layernorm_float
        );
    }
    if !q.int16_for_snr.is_empty() {
        outln!(
            "  int16 activations to meet --min-snr ({}): {}",
            q.int16_for_snr.len(),
            q.int16_for_snr.join(", ")
        );
    }
    if !q.kept_float_for_snr.is_empty() {
        outln!(
            "  kept in float to meet --min-snr: {}",
            q.kept_float_for_snr.join(", ")
        );
    }
    if q.calibration_samples > 0 {
        outln!(
            "  calibrated on {} sample(s) (ranges: {}); error vs float measured on {}:",
            q.calibration_samples,
            q.calibration_method,
            q.error_samples
        );
        for o in &q.outputs {
            let per_sample = &o.sample_snr_db;
            let worst = if per_sample.len() > 1 {
                // An error-free sample (infinite SNR) counts as float32's own rounding level.
                const ERROR_FREE_DB: f64 = 150.0;
                let mean = per_sample.iter().map(|s| s.min(ERROR_FREE_DB)).sum::<f64>()
                    / per_sample.len() as f64;
                let min = per_sample.iter().copied().fold(f64::INFINITY, f64::min);
                format!(" (per sample: mean {mean:.1}, lowest {min:.1} dB)")
            } else {
                String::new()
            };
            outln!(
                "    output '{}': SNR {:.1} dB{worst}, max abs error {:.3e}",
                o.tensor,
                o.snr_db,
                o.max_abs_error
            );
        }
        if let Some(v) = q.validation_snr_db {
            outln!(
                "    on {} other calibration sample(s), which the --min-snr search did not \
                 measure: SNR {v:.1} dB",
                q.validation_samples
            );
        }
        if let Some(w) = q.weights_only_snr_db {
            outln!("    int8 weights alone (activations float): SNR {w:.1} dB");
        }
        if verbose && !q.stage_seconds.is_empty() {
            let stages: Vec<String> = q
                .stage_seconds
                .iter()
                .map(|(name, secs)| format!("{name} {secs:.1} s"))
                .collect();
            outln!("    stages: {}", stages.join(", "));
        }
        let shown = if verbose {
            q.layers.len()
        } else {
            q.layers.len().min(5)
        };
        if shown > 0 {
            outln!("    worst layers:");
        }
        for l in &q.layers[..shown] {
            outln!(
                "      {:<40} {:<18} SNR {:>6.1} dB  max abs {:.3e}",
                l.tensor,
                l.op,
                l.snr_db,
                l.max_abs_error
            );
        }
    }
}

fn print_passes(p: &crate::passes::PipelineReport) {
    outln!(
        "  passes ({} nodes → {}, constants {} → {}):",
        p.nodes_before,
        p.nodes_after,
        human(p.const_bytes_before),
        human(p.const_bytes_after)
    );
    outln!(
        "    {:<18} {:>4} {:>8} {:>7} {:>12} {:>8}",
        "pass",
        "runs",
        "rewrites",
        "nodes",
        "const bytes",
        "ms"
    );
    for r in &p.passes {
        outln!(
            "    {:<18} {:>4} {:>8} {:>+7} {:>+12} {:>8.2}",
            r.pass,
            r.runs,
            r.rewrites,
            r.nodes_delta,
            r.const_bytes_delta,
            r.millis
        );
    }
    let hist = |h: &std::collections::BTreeMap<String, usize>| {
        h.iter()
            .map(|(k, v)| format!("{k}×{v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    outln!("  IR ops after import: {}", hist(&p.ir_ops_before));
    outln!("  IR ops after passes: {}", hist(&p.ir_ops_after));
    if p.transposes_left > 0 {
        outln!("  transposes the layout needs: {}", p.transposes_left);
    }
}

fn load_lite(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

fn inspect(path: &Path, json: bool) -> Result<()> {
    let bytes = load_lite(path)?;
    let label = path.display().to_string();
    let aligned = literun::AlignedBytes::from_slice(&bytes);
    let model = literun::Model::from_bytes(&aligned).map_err(|e| anyhow!("{label}: {e}"))?;
    // A file literun cannot prepare (an op it lacks) is still described.
    let prepared = literun::Interpreter::new(&model);
    let arena = prepared.as_ref().ok().map(|i| i.arena_bytes());
    let runnable = prepared.as_ref().err().map(|e| e.to_string());
    let signature = |t: usize| model.tensors()[t].shape_signature.clone();
    let io = |list: &[literun::TensorInfo]| {
        list.iter()
            .map(|i| {
                serde_json::json!({"name": i.name, "tensor_name": model.tensors()[i.tensor].name,
                "tensor": i.tensor, "shape": i.shape, "shape_signature": signature(i.tensor),
                "dtype": i.dtype.name()})
            })
            .collect::<Vec<_>>()
    };
    let tensors: Vec<_> = model
        .tensors()
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let quant = t.qparams.as_ref().map(|q| {
                serde_json::json!({"scale": q.scales, "zero_point": q.zero_points,
                    "quantized_dimension": q.quantized_dimension})
            });
            serde_json::json!({
                "index": i, "name": t.name, "shape": t.shape,
                "shape_signature": t.shape_signature, "dtype": t.dtype.name(),
                "constant_bytes": model.const_bytes(i).map(|b| b.len()).unwrap_or(0),
                "quantization": quant,
            })
        })
        .collect();
    let ops: Vec<_> = model
        .operators()
        .iter()
        .map(|o| serde_json::json!({"op": o.name(), "inputs": o.inputs, "outputs": o.outputs}))
        .collect();
    let weights: usize = (0..model.tensors().len())
        .filter_map(|i| model.const_bytes(i).ok())
        .map(|b| b.len())
        .sum();
    let summary = serde_json::json!({
        "file": label, "bytes": bytes.len(), "weights_bytes": weights, "arena_bytes": arena,
        "literun_cannot_run": runnable,
        "inputs": io(model.inputs()), "outputs": io(model.outputs()), "operators": ops, "tensors": tensors,
    });
    if json {
        outln!("{}", serde_json::to_string_pretty(&summary)?);
        return Ok(());
    }
    outln!(
        "{label}: {} ({} weights, arena {})",
        human(bytes.len()),
        human(weights),
        arena.map_or("unknown".to_string(), human)
    );
    if let Some(why) = &runnable {
        outln!("  literun cannot run this file: {why}");
    }
    let quant = |t: usize| match &model.tensors()[t].qparams {
        Some(q) if q.scales.len() == 1 => {
            format!(
                " (scale {:.6e}, zero point {})",
                q.scales[0],
                q.zero_points.first().unwrap_or(&0)
            )
        }
        Some(q) => format!(
            " ({} per-channel scales on axis {})",
            q.scales.len(),
            q.quantized_dimension
        ),
        None => String::new(),
    };
    // The shape signature when it has dynamic (-1) dimensions; the tensor's own name when the
    // signature key differs (LiteRT shows the tensor name).
    let dynamic = |t: usize| {
        model.tensors()[t]
            .shape_signature
            .clone()
            .filter(|s| s.contains(&-1))
    };
    let line = |what: &str, i: &literun::TensorInfo| {
        let t = &model.tensors()[i.tensor];
        let signature = dynamic(i.tensor).map_or(String::new(), |s| format!(" (signature {s:?})"));
        let tensor = if t.name != i.name && !t.name.is_empty() {
            format!(", tensor {}", t.name)
        } else {
            String::new()
        };
        format!(
            "  {what} {} {:?}{signature} {}{}{tensor}",
            i.name,
            i.shape,
            i.dtype.name(),
            quant(i.tensor)
        )
    };
    for i in model.inputs() {
        outln!("{}", line("input ", i));
    }
    for o in model.outputs() {
        outln!("{}", line("output", o));
    }
    if model.inputs().iter().any(|i| dynamic(i.tensor).is_some()) {
        outln!("  (`litecvt run` gives an input with -1 dimensions the shape of the data given)");
    }
    outln!("  operators ({}):", model.operators().len());
    for (i, o) in model.operators().iter().enumerate() {
        let name = |t: &Option<usize>| match t {
            Some(t) => model.tensors()[*t].name.to_string(),
            None => "-".to_string(),
        };
        let ins: Vec<_> = o.inputs.iter().map(name).collect();
        let outs: Vec<_> = o.outputs.iter().map(|&t| name(&Some(t))).collect();
        outln!(
            "    {i:>3} {}  ({}) → ({})",
            o.name(),
            ins.join(", "),
            outs.join(", ")
        );
    }
    Ok(())
}

/// Reads `NAME=FILE` and positional inputs.
fn read_inputs(
    positional: &[PathBuf],
    named: &[String],
) -> Result<Vec<(Option<String>, NpyArray)>> {
    if !positional.is_empty() && !named.is_empty() {
        bail!("give inputs either by name (--input NAME=FILE) or by position, not both");
    }
    let mut out = Vec::new();
    for p in positional {
        out.push((None, npy::read(p)?));
    }
    for s in named {
        let (name, file) = s
            .split_once('=')
            .ok_or_else(|| anyhow!("--input '{s}': expected NAME=FILE"))?;
        out.push((Some(name.to_string()), npy::read(Path::new(file))?));
    }
    Ok(out)
}

/// A file name for an output: its name with path separators and colons replaced.
pub fn output_file_name(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c == '/' || c == ':' || c == '\\' {
                '_'
            } else {
                c
            }
        })
        .collect();
    s.push_str(".npy");
    s
}

fn run_model(
    path: &Path,
    positional: &[PathBuf],
    named: &[String],
    dir: &Path,
    dump: Option<&Path>,
) -> Result<()> {
    let inputs = read_inputs(positional, named)?;
    let bytes = load_lite(path)?;
    let outputs =
        crate::runtime::run_lite_dumping(&bytes, &path.display().to_string(), &inputs, dump)?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (name, array) in &outputs {
        let file = dir.join(output_file_name(name));
        npy::write(&file, array)?;
        outln!("{name} {:?} → {}", array.shape, file.display());
    }
    Ok(())
}

/// Output values as floats; int8 and int16 outputs are dequantized with their tensor's
/// parameters.
fn dequantized(model: &literun::Model<'_>, name: &str, a: &NpyArray) -> Vec<f32> {
    let q = model
        .outputs()
        .iter()
        .find(|o| o.name == name)
        .and_then(|o| model.tensors()[o.tensor].qparams.clone());
    match (&a.data, q) {
        (crate::npy::NpyData::I8(_) | crate::npy::NpyData::I16(_), Some(q))
            if q.is_per_tensor() =>
        {
            let (s, z) = q.channel(0);
            a.to_f32()
                .iter()
                .map(|&x| (x as i64 - z) as f32 * s)
                .collect()
        }
        _ => a.to_f32(),
    }
}

fn compare(onnx: &Path, lite: &Path, positional: &[PathBuf], named: &[String]) -> Result<()> {
    let inputs = read_inputs(positional, named)?;
    let bytes = load_lite(lite)?;
    let ours = run_lite(&bytes, &lite.display().to_string(), &inputs)?;
    // tract takes inputs positionally: order the named ones like the model's inputs.
    let aligned = literun::AlignedBytes::from_slice(&bytes);
    let model = literun::Model::from_bytes(&aligned).map_err(|e| anyhow!("{e}"))?;
    let mut ordered = Vec::new();
    for (i, info) in model.inputs().iter().enumerate() {
        let a = inputs
            .iter()
            .find(|(n, _)| n.as_deref() == Some(info.name))
            .or_else(|| inputs.get(i).filter(|(n, _)| n.is_none()))
            .ok_or_else(|| anyhow!("no value for input '{}'", info.name))?;
        ordered.push(a.1.clone());
    }
    // The reference: tract on an ONNX model, or literun on another .lite/.tflite file.
    let is_flatbuffer = onnx
        .extension()
        .is_some_and(|e| e == "lite" || e == "tflite");
    let reference: Vec<NpyArray> = if is_flatbuffer {
        let other = load_lite(onnx)?;
        run_lite(&other, &onnx.display().to_string(), &inputs)?
            .into_iter()
            .map(|(_, a)| a)
            .collect()
    } else {
        run_onnx_tract(onnx, &ordered)?
    };
    if reference.len() != ours.len() {
        bail!(
            "{} has {} outputs, {} has {}",
            onnx.display(),
            reference.len(),
            lite.display(),
            ours.len()
        );
    }
    outln!(
        "{:<24} {:>12} {:>12} {:>9} {:>5}",
        "output",
        "max abs err",
        "max rel err",
        "SNR dB",
        "top1"
    );
    for ((name, a), r) in ours.iter().zip(&reference) {
        if a.shape != r.shape {
            bail!(
                "output '{name}': shape {:?} differs from the reference's {:?}",
                a.shape,
                r.shape
            );
        }
        let s = error_stats(&dequantized(&model, name, a), &r.to_f32());
        outln!(
            "{:<24} {:>12.3e} {:>12.3e} {:>9.1} {:>5}",
            name,
            s.max_abs,
            s.max_rel,
            s.snr_db,
            if s.top1_agree { "yes" } else { "no" }
        );
    }
    Ok(())
}
