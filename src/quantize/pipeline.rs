//! Quantization as the pipeline it is, sequenced here: calibrate the float file → quantize
//! (emit int8 / int16 ops) → correct biases → measure → choose precision (`--min-snr`). Each
//! stage lives in its own module; this one only runs them in order and reports.

use super::calibrate::{CalibrationSource, ImageOptions, InputSpec, Method, Sample};
use super::report::{self, FloatOutputs, LayerError};
use super::{
    bias_correction, clip_ranges, downstream, equalize, equalize_gated, float_islands, layernorm16,
    lstm_cell, mixed, qdq, range_stats, saturating_clamps, weight_rounding, weights,
};
use super::{FullInt8Options, IoType, QuantSummary, QuantizeMode, Ranges};
use crate::export;
use crate::ir::Graph;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::time::Instant;

pub use super::quantizer::{Attempt, Precision, Quantizer};

/// What the quantization stages need from `litecvt convert`'s options.
#[derive(Clone, Debug)]
pub struct QuantizeOptions<'a> {
    /// `--quantize`: `None` keeps float32 (unless the model is already quantized).
    pub mode: Option<QuantizeMode>,
    /// Representative data for full int8 (`--calibration`, or arrays in memory).
    pub calibration: Option<CalibrationSource<'a>>,
    /// How ranges are chosen; `None`: per model, whichever of min/max and the per-tensor
    /// choice (`Method::Auto`) gives the better output.
    pub method: Option<Method>,
    pub int8: &'a FullInt8Options,
    /// The model's inputs as calibration data is read for them.
    pub inputs: Vec<InputSpec>,
    pub images: &'a ImageOptions,
    /// Show a progress bar while calibrating.
    pub progress: bool,
    /// Keep layers in float until every output's SNR vs float reaches this (dB).
    pub min_snr_db: Option<f64>,
    /// Write the best file found even when `min_snr_db` is not reached (else an error).
    pub accept_snr_miss: bool,
    /// Empirical bias correction of conv/dense layers on the calibration data.
    pub bias_correction: bool,
    /// Error-compensating (GPTQ) rounding of conv/dense weights on the calibration data.
    pub weight_rounding: bool,
    /// Keep LayerNorms with int16 activations even where the output does not gain the choice
    /// margin (they are tried in every full int8 conversion but a strict one).
    pub layernorm_int16: bool,
    /// Cross-layer equalization of the tensors between conv/dense layers before calibrating.
    pub equalize: bool,
}

/// Quantization summary with the measured error.
#[derive(Clone, Debug, Serialize)]
pub struct QuantReport {
    #[serde(flatten)]
    pub summary: QuantSummary,
    pub calibration_samples: usize,
    /// Samples the errors below were measured on.
    pub error_samples: usize,
    /// End-to-end error of each output, quantized vs the float file.
    pub outputs: Vec<LayerError>,
    /// Per int8 tensor, worst first.
    pub layers: Vec<LayerError>,
    /// How activation ranges were chosen (`--calibration-method`, or the better of two).
    pub calibration_method: String,
    /// Nodes `--min-snr` left in float, in the order they were chosen.
    pub kept_float_for_snr: Vec<String>,
    /// Nodes `--min-snr` moved to int16 activations (int16x8), in the order they were chosen.
    pub int16_for_snr: Vec<String>,
    /// Unrolled LSTM/GRU layers run with int16 activations (as TFLite's integer LSTM), their
    /// gates' LOGISTIC and TANH in float.
    pub recurrent_int16: usize,
    /// Ops of LayerNorms run with int16 activations (where that measurably helped), and those
    /// of them with no 16x8 kernel run in float (squared difference, reciprocal square root).
    pub layernorm_int16: usize,
    pub layernorm_float: usize,
    /// Tensors between two layers whose channels cross-layer equalization balanced.
    pub equalized: Vec<String>,
    /// Layers (by output tensor) whose bias empirical bias correction changed.
    pub bias_corrected: Vec<String>,
    /// How many conv/dense layers kept error-compensating weight rounding.
    pub rounded_weight_layers: usize,
    /// Output SNR (worst output, dB) before bias correction, where it ran.
    pub snr_before_bias_correction: Option<f64>,
    /// With `--min-snr`: the worst output's SNR on the calibration samples the search did not
    /// measure (`validation_samples` of them), where there were enough.
    pub validation_snr_db: Option<f64>,
    pub validation_samples: usize,
    /// Output SNR (worst output, dB) with only the weights rounded to int8 and activations
    /// float: what the weights alone cost.
    pub weights_only_snr_db: Option<f64>,
    /// Seconds each stage took, in order (calibration, range choice, bias correction, ...).
    pub stage_seconds: Vec<(String, f64)>,
}

impl QuantReport {
    fn without_measurements(summary: QuantSummary) -> QuantReport {
        QuantReport {
            summary,
            calibration_samples: 0,
            error_samples: 0,
            outputs: vec![],
            layers: vec![],
            calibration_method: String::new(),
            kept_float_for_snr: vec![],
            int16_for_snr: vec![],
            recurrent_int16: 0,
            layernorm_int16: 0,
            layernorm_float: 0,
            equalized: vec![],
            bias_corrected: vec![],
            rounded_weight_layers: 0,
            snr_before_bias_correction: None,
            validation_snr_db: None,
            validation_samples: 0,
            weights_only_snr_db: None,
            stage_seconds: vec![],
        }
    }
}

/// How many times the plain conversion's quantizations the `--min-snr` search may make...
const SEARCH_ATTEMPT_FACTOR: usize = 4;

/// ...or, for a model doing at most this many multiply-adds per sample (each attempt then takes
/// well under a second), as many as its exhaustive search needs.
const SMALL_MODEL_WORK: f64 = 50e6;

/// Samples used to measure error (all activations of these are held at once).
const ERROR_SAMPLES: usize = 8;

/// How much better (dB, on the error samples) a range method after the first, or rounded
/// weights, must make the output to be chosen: the error samples are few, and a choice that
/// wins on them by less is as likely noise (a 4-class classifier's SNR on 8 samples swings by
/// several dB between held-out inputs).
pub(super) const CHOICE_MARGIN_DB: f64 = 0.5;

/// The largest share of the model's constants that nodes between float ops may hold to be kept
/// float in full int8 (an audio front-end's STFT basis: about a fifth).
const MAX_FLOAT_ISLAND_SHARE: f64 = 0.25;

/// Calibration samples beyond the error samples that weight rounding needs to fit on them alone.
const MIN_FIT_SAMPLES: usize = 4;

/// Weight rounding learns each layer's `H` from at most this many samples (1024 input patches
/// each; `H` is damped): its cost grows with every sample, and ResNet18 at 224 with 100
/// calibration samples spent 48 of its 64 s fitting on the 92 beyond the error samples.
const MAX_FIT_SAMPLES: usize = 8;

/// The lowest SNR over a model's outputs.
pub fn worst_snr(outputs: &[LayerError]) -> f64 {
    outputs
        .iter()
        .map(|o| o.snr_db)
        .fold(f64::INFINITY, f64::min)
}

/// A per-sample SNR counted at most this high (an error-free sample's is infinite).
const SAMPLE_SNR_CAP_DB: f64 = 100.0;

/// What `--min-snr` holds a model to: the lower of [`worst_snr`] (each output's error pooled
/// over the samples, so loud samples weigh most) and the mean over the samples of each sample's
/// worst output SNR in dB (every input weighs the same; a per-sample SNR counts at most
/// [`SAMPLE_SNR_CAP_DB`]). A budget met by both holds whichever way the user measures it: a
/// voice-activity model met 30 dB pooled on its calibration samples and averaged 26.9 dB per
/// held-out input.
pub fn budget_snr(outputs: &[LayerError]) -> f64 {
    let samples = outputs
        .iter()
        .map(|o| o.sample_snr_db.len())
        .min()
        .unwrap_or(0);
    if samples == 0 {
        return worst_snr(outputs);
    }
    let per_sample_mean = (0..samples)
        .map(|k| {
            outputs
                .iter()
                .map(|o| o.sample_snr_db[k])
                .fold(f64::INFINITY, f64::min)
                .min(SAMPLE_SNR_CAP_DB)
        })
        .sum::<f64>()
        / samples as f64;
    worst_snr(outputs).min(per_sample_mean)
}

/// Quantizes the lowered float graph as `opts` asks.
pub fn quantize_graph(
    graph: &mut Graph,
    label: &str,
    opts: &QuantizeOptions<'_>,
) -> Result<Option<QuantReport>> {
    // An already-quantized model's parameters (never written on float tensors).
    let model = qdq::take(graph);
    // A QDQ model converts to full int8 with its own parameters unless asked otherwise (fp16);
    // a dynamic-quantized one to int8 weights-only.
    let mode = match opts.mode {
        None | Some(QuantizeMode::Int8Weights) if model.is_static() => Some(QuantizeMode::Int8Full),
        None if !model.is_empty() => Some(QuantizeMode::Int8Weights),
        m => m,
    };
    let Some(mode) = mode else {
        if opts.int8.io_type == IoType::Integer {
            bail!(
                "--io-type int8 needs full int8: --quantize int8 --calibration DATA, or a QDQ \
                 model"
            );
        }
        return Ok(None);
    };
    let full = matches!(mode, QuantizeMode::Int8Full | QuantizeMode::Int16x8);
    if opts.calibration.is_some() && !full {
        bail!("--calibration is only used with --quantize int8 or int16x8");
    }
    if mode == QuantizeMode::Int16x8 && opts.calibration.is_none() {
        bail!("--quantize int16x8 needs --calibration DATA (activation ranges)");
    }
    let full_only = opts.int8.io_type == IoType::Integer
        || opts.int8.strict
        || !opts.int8.exclude_nodes.is_empty()
        || !opts.int8.exclude_ops.is_empty();
    if full_only && !full {
        bail!(
            "--io-type int8, --strict-int8 and --exclude(-op) need full int8: --quantize int8 \
             --calibration DATA, or a QDQ model"
        );
    }
    let summary = match mode {
        QuantizeMode::Fp16 => super::fp16_weights(graph),
        QuantizeMode::Int8Weights => {
            let mut s = super::int8_weights_with(graph, &model);
            if !model.is_empty() {
                s.mode = "int8 weights-only (the model's int8 weights)".into();
            }
            s
        }
        QuantizeMode::Int8Full if opts.calibration.is_none() && model.is_static() => {
            let mut int8 = opts.int8.clone();
            int8.qdq = model;
            let mut summary = super::full_int8(graph, &Ranges::new(), &int8)
                .with_context(|| label.to_string())?;
            summary.mode = "int8 (the QDQ model's parameters)".into();
            summary
        }
        QuantizeMode::Int8Full | QuantizeMode::Int16x8 => {
            return calibrated(graph, label, opts, mode, model).map(Some);
        }
    };
    Ok(Some(QuantReport::without_measurements(summary)))
}

/// Whether rounding the weights with error compensation can gain the choice margin. Were the
/// weights' and the activations' errors independent, it would gain at most what removing the
/// weights' share of the noise gives, `10^(-weights_alone/10)` of the quantized file's
/// `10^(-quantized/10)`; they are not quite (the captcha detector gained 0.69 dB where that
/// estimate says 0.45), so the estimate gets `ROUNDING_GAIN_ALLOWANCE` times the room. ResNet18
/// at 224: 52.1 dB alone against 39.1, an estimate of 0.22 dB, not tried.
fn rounding_can_pay(weights_alone: f64, quantized: f64) -> bool {
    let share = 10f64.powf((quantized - weights_alone) / 10.0);
    share.is_nan()
        || share >= 1.0
        || -10.0 * (1.0 - share).log10() * ROUNDING_GAIN_ALLOWANCE > CHOICE_MARGIN_DB
}

/// How much more than the independent-errors estimate weight rounding is allowed to gain.
const ROUNDING_GAIN_ALLOWANCE: f64 = 2.0;

/// Rounds the float graph's weights with error compensation (the layers' input statistics from
/// `fit`) and keeps the result (in `q` and `best`) if the quantized model with `best`'s precision
/// is measurably better on the error samples; returns how many layers were rounded that way (0
/// when not kept).
fn keep_rounded_weights(
    q: &mut Quantizer<'_>,
    best: &mut Attempt,
    fit: &[Sample],
) -> Result<usize> {
    let mut g = q.float_graph.clone();
    let fixed = weight_rounding::round_weights(&mut g, q.float_runs, fit)
        .with_context(|| format!("{}: rounding weights", q.label))?;
    if fixed.is_empty() {
        return Ok(0);
    }
    let previous = q.int8.qdq.constants.clone();
    q.int8
        .qdq
        .constants
        .extend(fixed.iter().map(|(&t, p)| (t, p.clone())));
    let attempt = q.attempt_with(&g, &best.precision)?;
    if attempt.worst_snr() > best.worst_snr() + CHOICE_MARGIN_DB {
        *best = attempt;
        q.replace_float_graph(g);
        Ok(fixed.len())
    } else {
        q.int8.qdq.constants = previous;
        Ok(0)
    }
}

/// Checks a `--min-snr` result on calibration samples the search did not measure (when there
/// are at least `MIN_FIT_SAMPLES`): a budget met on the error samples alone may not hold on
/// other inputs (a classifier's output near its decision boundary moves with a few layers'
/// rounding). Where it falls short there, the search goes on once, with up to `allowed` more
/// quantizations, toward the error samples' SNR raised by the shortfall (at most
/// `MAX_RAISE_DB`), and its result is kept if it does better on those samples. Returns the SNR
/// on them.
fn validate(
    q: &mut Quantizer<'_>,
    best: &mut Attempt,
    budget: f64,
    others: &[Sample],
    allowed: usize,
) -> Result<Option<f64>> {
    const MAX_RAISE_DB: f64 = 6.0;
    if others.len() < MIN_FIT_SAMPLES {
        return Ok(None);
    }
    let reference = FloatOutputs::new(q.float_runs, others)?;
    let check = |a: &Attempt| -> Result<f64> {
        Ok(budget_snr(&report::output_errors(
            &reference, &a.bytes, others,
        )?))
    };
    let mut snr = check(best)?;
    if snr < budget {
        // What the error samples must gain for the others to gain the shortfall.
        let raised = best.budget_snr().max(budget) + (budget - snr).min(MAX_RAISE_DB);
        q.attempt_limit = Some(q.attempts.get() + allowed);
        // The biases stay as they are: those of the result being checked.
        let (retry, _) = mixed::search(q, best.clone(), raised, &|_, _| Ok(None))?;
        let retried = check(&retry)?;
        if retried > snr {
            *best = retry;
            snr = retried;
        }
    }
    Ok(Some(snr))
}

/// Keeps the nodes between ops that stay float in float too (in `q` and `best`) if the model is
/// measurably better so on the error samples.
fn keep_float_between_float_ops(q: &mut Quantizer<'_>, best: &mut Attempt) -> Result<()> {
    let stays_float = float_islands::float_values(&q.float_graph, &best.summary);
    let between = float_islands::between_float_ops(&q.float_graph, &stays_float);
    // Full int8 is asked for size: the nodes kept float may not hold much of the weights.
    if between.is_empty()
        || float_islands::constant_share(&q.float_graph, &between) > MAX_FLOAT_ISLAND_SHARE
    {
        return Ok(());
    }
    q.int8.between_float = between;
    let attempt = q.attempt(&best.precision)?;
    if attempt.worst_snr() > best.worst_snr() + CHOICE_MARGIN_DB {
        *best = attempt;
    } else {
        q.int8.between_float.clear();
    }
    Ok(())
}

/// Wall-clock seconds of the pipeline's stages, for the report.
struct Stages {
    last: Instant,
    done: Vec<(String, f64)>,
}

impl Stages {
    fn new() -> Stages {
        Stages {
            last: Instant::now(),
            done: vec![],
        }
    }

    /// Ends the stage called `name`.
    fn mark(&mut self, name: &str) {
        let now = Instant::now();
        let secs = (now - self.last).as_secs_f64();
        self.done
            .push((name.to_string(), (secs * 1000.0).round() / 1000.0));
        self.last = now;
    }

    fn done(self) -> Vec<(String, f64)> {
        self.done
    }
}

/// A way to choose every tensor's range: the method, whether it judges a range by the
/// downstream-weighted error, and the percentile no range reaches beyond on either side.
#[derive(Clone, Copy, Debug, PartialEq)]
struct RangeChoice {
    method: Method,
    downstream: bool,
    tail_cap: Option<f64>,
}

/// The percentile the tail-capped range candidate stops at on either side: 1 value in 10⁵
/// (16 samples of a 416x416 detector's first layers: a few hundred values per tensor).
const TAIL_CAP_PERCENTILE: f64 = 99.999;

/// Full int8 / int16x8 from calibration data.
fn calibrated(
    graph: &mut Graph,
    label: &str,
    opts: &QuantizeOptions<'_>,
    mode: QuantizeMode,
    model: qdq::Annotations,
) -> Result<QuantReport> {
    let activations = if mode == QuantizeMode::Int16x8 {
        weights::Activations::Int16
    } else {
        weights::Activations::Int8
    };
    let data = opts
        .calibration
        .ok_or_else(|| anyhow::anyhow!("full int8 needs --calibration DATA"))?;
    let mut stages = Stages::new();
    let samples = data.load(&opts.inputs, opts.images)?;
    let mut float = export::planned_tflite(graph, label)?;
    // Precondition: float-exact rewrites that make ranges quantizable (not for a QDQ model,
    // whose parameters belong to its own weights).
    let mut equalized = vec![];
    if opts.equalize && !model.is_static() {
        let few = &samples[..samples.len().min(ERROR_SAMPLES)];
        equalized = equalize::equalize(graph, &float, few)
            .with_context(|| format!("{label}: equalizing"))?;
        // Float-exact, so the HardSwish outputs it measures are the same in `float`.
        equalized.extend(
            equalize_gated::equalize_gated(graph, &float, few)
                .with_context(|| format!("{label}: equalizing across HardSwish and SiLU"))?,
        );
        if !equalized.is_empty() {
            float = export::planned_tflite(graph, label)?;
        }
    }
    // The float file's interpreters serve calibration, weight rounding and the report.
    let float_aligned = super::observe::aligned(&float);
    let float_model =
        literun::Model::from_bytes(&float_aligned).map_err(|e| anyhow::anyhow!("{label}: {e}"))?;
    let float_runs = super::observe::KeptInterpreters::new(&float_model);
    // Candidate range choices.
    let choice = |method, downstream| RangeChoice {
        method,
        downstream,
        tail_cap: None,
    };
    let mut methods = match opts.method {
        Some(m) => vec![choice(m, true)],
        None => vec![choice(Method::MinMax, false), choice(Method::Auto, true)],
    };
    let histogram = methods.iter().any(|c| c.method != Method::MinMax);
    // Tensor indices of the file are the graph's.
    let weights = downstream::channel_weights(graph);
    let silu_inputs = downstream::silu_inputs(graph);
    let few = &samples[..samples.len().min(ERROR_SAMPLES)];
    let bounded = clip_ranges::bounded_by_name(graph);
    // Bias correction's float statistics and the float outputs the quantized files are measured
    // against come from calibration's runs of the float file.
    let mut float_means = if opts.bias_correction && !model.is_static() {
        bias_correction::FloatMeans::new(graph, &float, &bounded)?
    } else {
        None
    };
    let mut outputs = FloatOutputs::collector(float_runs.model(), few.len());
    let means_read = float_means
        .as_ref()
        .map(|m| m.observed())
        .unwrap_or_default();
    let means_read = |t: usize| means_read.get(t).copied().unwrap_or(false);
    let output_tensors = outputs.tensors().to_vec();
    let wanted = |t: usize| output_tensors.contains(&t) || means_read(t);
    let ordered_samples = match float_means {
        Some(_) => bias_correction::samples_used(&samples).len(),
        None => few.len(),
    };
    let mut seen = |k: usize, t: usize, v: &[f32]| {
        outputs.add(k, t, v);
        if let Some(means) = float_means.as_mut().filter(|_| means_read(t)) {
            means.add(t, v);
        }
    };
    let ordered = range_stats::Ordered {
        samples: ordered_samples,
        wanted: &wanted,
        f: &mut seen,
    };
    let stats = range_stats::collect_stats_kept(
        &float_runs,
        &samples,
        histogram,
        &weights,
        &silu_inputs,
        opts.progress,
        Some(ordered),
    )
    .with_context(|| format!("{label}: calibration"))?;
    let reference = outputs.finish();
    stages.mark("calibration");
    if opts.method.is_none() && stats.has_downstream_weights() {
        // The weighted error sees only the next layer; some models do better judged by the
        // tensor's own error, so the unweighted choice is measured too.
        methods.push(choice(Method::Auto, false));
    }
    if opts.method.is_none() {
        // A range that is best for its tensor's own error can still be too wide for the model's
        // output: the rare largest values of a deep network's activations cost less, clipped,
        // than every other value's coarser rounding through the layers after (the YOLOX-style
        // captcha detector: 28.8 -> 30.7 dB on held-out inputs).
        methods.push(RangeChoice {
            tail_cap: Some(TAIL_CAP_PERCENTILE),
            ..choice(Method::Auto, true)
        });
    }
    let ranges_by = |c: RangeChoice| -> Ranges {
        let mut ranges: Ranges = stats
            .ranges(c.method, c.downstream, c.tail_cap)
            .into_iter()
            .enumerate()
            .filter_map(|(i, r)| r.map(|r| (i, r)))
            .filter(|&(i, _)| i < graph.tensors.len())
            .collect();
        clip_ranges::narrow(graph, &mut ranges);
        ranges
    };
    let mut int8 = opts.int8.clone();
    int8.activations = activations;
    int8.weight_cache = Some(Default::default());
    // An unrolled LSTM/GRU's cell runs 16x8, as TFLite's integer LSTM kernel keeps its gates
    // and cell state in int16: in int8 each time step's rounding feeds the next one.
    let recurrent =
        if activations == weights::Activations::Int8 && !model.is_static() && !opts.int8.strict {
            let mut nodes = graph.recurrent_nodes.clone();
            for name in lstm_cell::written_out_cells(graph) {
                if !nodes.contains(&name) {
                    nodes.push(name);
                }
            }
            nodes
        } else {
            vec![]
        };
    // Int16 LayerNorms are tried in every calibrated full int8 conversion but a strict one: with
    // literun's vector int16 ADD/SUB/MUL they cost a 2-layer encoder (d = 64) about 8% more time
    // than int8 ones (the DEQUANTIZE/QUANTIZE around their float ops), for 1 to 4 dB.
    let layernorm =
        if activations == weights::Activations::Int8 && !model.is_static() && !opts.int8.strict {
            layernorm16::candidates(graph)
        } else {
            Default::default()
        };
    // Mixed precision's int16 tensors take min/max ranges: 16 bits need no clipping.
    if activations == weights::Activations::Int8
        && (opts.min_snr_db.is_some() || !recurrent.is_empty() || !layernorm.int16.is_empty())
    {
        let mut int16_ranges = ranges_by(choice(Method::MinMax, false));
        layernorm16::widen_row_scales(graph, &layernorm, &mut int16_ranges);
        int8.int16_ranges = Some(std::sync::Arc::new(int16_ranges));
    }
    int8.int16_nodes.extend(recurrent.iter().cloned());
    // int16x8 is calibrated: an int8 QDQ model's parameters do not apply.
    if activations == weights::Activations::Int8 {
        int8.qdq = model.clone();
    }
    let mut q = Quantizer {
        label,
        float_graph: graph.clone(),
        float_bytes: &float,
        float_runs: &float_runs,
        ranges: ranges_by(methods[0]),
        int8,
        reference,
        samples: few,
        bounded: bounded.clone(),
        attempts: Default::default(),
        attempt_limit: None,
        original: None,
    };
    // Without a method given, the better of the candidates on the error samples.
    let choose_ranges = |q: &mut Quantizer<'_>| -> Result<(Attempt, RangeChoice)> {
        q.ranges = ranges_by(methods[0]);
        let mut best = q.attempt(&Precision::default())?;
        let mut method = methods[0];
        for &m in &methods[1..] {
            let previous = std::mem::replace(&mut q.ranges, ranges_by(m));
            let attempt = q.attempt(&Precision::default())?;
            if attempt.worst_snr() > best.worst_snr() + CHOICE_MARGIN_DB {
                best = attempt;
                method = m;
            } else {
                q.ranges = previous;
            }
        }
        Ok((best, method))
    };
    let (mut best, mut method) = choose_ranges(&mut q)?;
    stages.mark("range choice");
    // Nodes sandwiched between float ops, kept float where that measurably helps.
    if !opts.int8.strict {
        keep_float_between_float_ops(&mut q, &mut best)?;
    }
    // Error-compensating weight rounding, kept only where it measurably helps.
    let mut rounded_layers = 0;
    let rounding = opts.weight_rounding && !model.is_static();
    // The rounding is judged on the error samples, so it learns the inputs' statistics from the
    // other calibration samples where there are enough of them (else it would be judged on the
    // data it fitted).
    let rest = &samples[few.len()..];
    let fit = if rest.len() >= MIN_FIT_SAMPLES {
        &rest[..rest.len().min(MAX_FIT_SAMPLES)]
    } else {
        &samples[..samples.len().min(MAX_FIT_SAMPLES)]
    };
    // Bias correction changes the float graph's biases for every later attempt; it is kept only
    // where it measurably helps.
    let correct_biases = |q: &Quantizer<'_>, best: &Attempt| match &float_means {
        Some(means) => bias_correction::correct(q, best, &samples, means.clone())
            .with_context(|| label.to_string()),
        None => Ok(None),
    };
    let mut corrected = correct_biases(&q, &best)?;
    // The LayerNorms in int16 against the int8 ones, each with its own range choice and bias
    // correction (magika's second LayerNorm gains only with its biases corrected).
    let layernorm_int16 = match layernorm16::keep_if_better(
        &mut q,
        (&mut best, &mut corrected),
        &layernorm,
        opts.layernorm_int16,
        choose_ranges,
        correct_biases,
    )? {
        Some(m) => {
            method = m;
            layernorm
        }
        None => Default::default(),
    };
    let (mut bias_corrected, mut snr_before) = (vec![], None);
    if let Some((graph, n, attempt)) = corrected {
        snr_before = Some(best.worst_snr());
        q.replace_float_graph(graph);
        best = attempt;
        bias_corrected = n;
    }
    stages.mark("float islands and bias correction");
    // What the weights alone cost bounds what rounding them better can gain.
    let weights_alone = |q: &Quantizer<'_>| -> Result<f64> {
        let errors = report::weights_only_errors(
            &q.float_graph,
            label,
            &q.reference,
            few,
            q.int8.weight_cache.as_deref(),
        )
        .with_context(|| format!("{label}: measuring the weights' share of the error"))?;
        Ok(worst_snr(&errors))
    };
    let mut weights_only = None;
    // After bias correction, so rounded weights are judged against the best plain-rounded file.
    if rounding {
        let alone = weights_alone(&q)?;
        weights_only = Some(alone);
        if rounding_can_pay(alone, best.worst_snr()) {
            rounded_layers = keep_rounded_weights(&mut q, &mut best, fit)?;
        }
        stages.mark("weight rounding");
    }
    let mut validation = None;
    // Biases corrected again change what the weights alone cost (measured again for the report).
    let mut rebiased_after_weights = false;
    if let Some(budget) = opts.min_snr_db {
        // The search may make SEARCH_ATTEMPT_FACTOR times the quantizations the plain
        // conversion made (a small model enough for its exhaustive search): --min-snr costs a
        // bounded multiple of a plain conversion, not minutes.
        let made = q.attempts.get();
        let mut allowed = made * SEARCH_ATTEMPT_FACTOR;
        if mixed::work_per_sample(&q.float_graph) <= SMALL_MODEL_WORK {
            allowed = allowed.max(mixed::EXHAUSTIVE_ATTEMPTS);
        }
        q.attempt_limit = Some(made + allowed);
        let mut corrected_for = best.precision.clone();
        let corrected_for_plain = !bias_corrected.is_empty() && rounded_layers == 0;
        let rebias = |q: &Quantizer<'_>, attempt: &Attempt| match &float_means {
            Some(means) if corrected_for_plain => {
                bias_correction::correct_for_precision(q, attempt, &samples, means.clone())
            }
            _ => Ok(None),
        };
        let (searched, rebiased) = mixed::search(&mut q, best, budget, &rebias)?;
        best = searched;
        rebiased_after_weights = rebiased.is_some();
        if let Some((layers, precision)) = rebiased {
            bias_corrected = layers;
            corrected_for = precision;
        }
        stages.mark("mixed-precision search");
        // The biases were corrected for the plain file's int8 activations.
        if let Some(means) = float_means.as_ref().filter(|_| {
            best.precision != corrected_for && !bias_corrected.is_empty() && rounded_layers == 0
        }) {
            if let Some((graph, layers, attempt)) =
                bias_correction::correct_for_precision(&q, &best, &samples, means.clone())?
            {
                q.replace_float_graph(graph);
                best = attempt;
                bias_corrected = layers;
                rebiased_after_weights = true;
            }
            stages.mark("bias correction for the search's precision");
        }
        if best.budget_snr() >= budget {
            validation = validate(
                &mut q,
                &mut best,
                budget,
                &samples[few.len()..],
                allowed / 2,
            )
            .with_context(|| format!("{label}: checking --min-snr on other samples"))?;
            stages.mark("check on other samples");
        }
        // With int16 activations where the search put them, the weights' share of the error
        // grows: rounding them with error compensation may pay now where it did not before.
        if rounding
            && rounded_layers == 0
            && best.budget_snr() < budget
            && weights_only.is_none_or(|alone| rounding_can_pay(alone, best.worst_snr()))
        {
            rounded_layers = keep_rounded_weights(&mut q, &mut best, fit)?;
            stages.mark("weight rounding after the search");
        }
        let reached = validation.map_or(best.budget_snr(), |v| v.min(best.budget_snr()));
        if reached < budget && !opts.accept_snr_miss {
            bail!(
                "{label}: --min-snr {budget}: the best quantized model reached {reached:.1} dB{} \
                 (with {} layer(s) in float and {} in int16); lower the budget, add \
                 representative calibration data, or pass --accept-snr-miss to write it anyway",
                match validation {
                    Some(v) if v < best.budget_snr() => format!(
                        " on calibration samples the search did not measure ({:.1} on those \
                         it did)",
                        best.budget_snr()
                    ),
                    _ => String::new(),
                },
                best.precision.float.len(),
                best.precision.int16.len()
            );
        }
    }
    let Attempt {
        graph: g,
        mut summary,
        bytes,
        outputs,
        precision,
    } = best;
    if model.is_static() {
        summary.mode = "int8 (the QDQ model's parameters, calibration elsewhere)".into();
    }
    *graph = g;
    // Measured with them (the same values): the measurements match tensors by name.
    if saturating_clamps::drop_saturating_clamps(graph) > 0 {
        graph.remove_dead();
    }
    // Measured again where rounded weights or biases corrected again replaced the float graph's.
    let weights_only = match weights_only {
        _ if model.is_static() => None,
        Some(alone) if rounded_layers == 0 && !rebiased_after_weights => Some(alone),
        _ => Some(weights_alone(&q)?),
    };
    let layers = report::layer_errors(q.float_runs, &bytes, few, &q.bounded)
        .with_context(|| format!("{label}: measuring quantization error"))?;
    stages.mark("report");
    Ok(QuantReport {
        summary,
        calibration_samples: samples.len(),
        error_samples: few.len(),
        calibration_method: {
            let mut name = method.method.name();
            if method.downstream
                && histogram
                && stats.has_downstream_weights()
                && method.method != Method::MinMax
            {
                name.push_str(", downstream-weighted");
            }
            if let Some(p) = method.tail_cap {
                name.push_str(&format!(", tails capped at the {p} percentile"));
            }
            name
        },
        outputs,
        layers,
        kept_float_for_snr: precision.float,
        int16_for_snr: precision.int16,
        recurrent_int16: recurrent.len(),
        layernorm_int16: layernorm_int16.int16.len(),
        layernorm_float: layernorm_int16.float.len(),
        equalized,
        bias_corrected,
        rounded_weight_layers: rounded_layers,
        snr_before_bias_correction: snr_before,
        validation_snr_db: validation,
        validation_samples: if validation.is_some() {
            samples.len() - few.len()
        } else {
            0
        },
        weights_only_snr_db: weights_only,
        stage_seconds: stages.done(),
    })
}
