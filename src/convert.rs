//! The conversion pipeline: ONNX file → IR → passes → TFLite FlatBuffer bytes.

use crate::export::tflite::{self, ExportOptions};
use crate::import::{self, ImportOptions};
use crate::ir::Graph;
use crate::passes::{self, layout, PassSelection, PipelineOptions, PipelineReport};
use crate::quantize::calibrate::{self, InputSpec, Method};
use crate::quantize::report::{self, LayerError};
use crate::quantize::{self, FullInt8Options, QuantSummary, QuantizeMode, Ranges};
use anyhow::bail;
use anyhow::{Context, Result};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Options of `litecvt convert`.
#[derive(Clone, Debug, Default)]
pub struct ConvertOptions {
    /// Static shapes for inputs with dynamic dimensions, by input name.
    pub input_shapes: HashMap<String, Vec<usize>>,
    /// Inputs frozen to constant values, by input name (`--input-value`).
    pub input_values: HashMap<String, Vec<f64>>,
    /// Rank-4 inputs and outputs in NHWC (no transposes at the edges).
    pub nhwc_io: bool,
    /// Which optional optimizations run.
    pub passes: PassSelection,
    /// `--quantize`: `None` keeps float32.
    pub quantize: Option<QuantizeMode>,
    /// Representative data for full int8 (`--calibration`).
    pub calibration: Option<PathBuf>,
    pub calibration_method: Option<Method>,
    pub int8: FullInt8Options,
    /// Show a progress bar while calibrating.
    pub progress: bool,
    /// Full int8: keep layers in float until every output's SNR vs float reaches this.
    pub min_snr_db: Option<f64>,
    /// Preprocessing of image calibration data.
    pub images: calibrate::ImageOptions,
}

/// What a conversion produced and did.
#[derive(Clone, Debug)]
pub struct Conversion {
    pub bytes: Vec<u8>,
    /// ONNX op types and counts in the source.
    pub ops_before: BTreeMap<String, usize>,
    /// TFLite builtin names and counts in the result.
    pub ops_after: BTreeMap<String, usize>,
    pub arena_bytes: usize,
    pub weight_bytes: usize,
    pub seconds: f64,
    /// What each pass did.
    pub pipeline: PipelineReport,
    /// Warnings about the source model (e.g. NaN constants), one line each.
    pub warnings: Vec<String>,
    /// What quantization did and what it cost (quantized conversions only).
    pub quantization: Option<QuantReport>,
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
    /// Nodes `--min-snr` left in float, in the order they were chosen.
    pub kept_float_for_snr: Vec<String>,
}

/// How many nodes `--min-snr` may move back to float before giving up.
const MAX_KEPT_FLOAT: usize = 16;

/// Samples used to measure per-layer error (all activations of these are held at once).
const ERROR_SAMPLES: usize = 8;

/// Writes the graph, then plans its arena with literun's planner (on the written file, so the
/// plan covers exactly the tensors a runtime sees) and writes it again with the plan stored as
/// `OfflineMemoryAllocation` metadata.
fn export_graph(graph: &Graph, label: &str) -> Result<Vec<u8>> {
    let mut opts = ExportOptions {
        description: format!("litecvt {}", env!("CARGO_PKG_VERSION")),
        memory_plan: None,
    };
    let first = tflite::export(graph, &opts).with_context(|| label.to_string())?;
    let aligned = literun::AlignedBytes::from_slice(&first);
    let model = literun::Model::from_bytes(&aligned)
        .map_err(|e| anyhow::anyhow!("{label}: written model does not verify: {e}"))?;
    let plan = model
        .memory_plan()
        .map_err(|e| anyhow::anyhow!("{label}: cannot plan the arena: {e}"))?;
    let Some(offsets) = plan.to_offline_metadata() else {
        // An arena beyond 2 GiB cannot be described in TFLite Micro's i32 layout.
        return Ok(first);
    };
    opts.memory_plan = Some(offsets);
    tflite::export(graph, &opts).with_context(|| label.to_string())
}

fn input_specs(graph: &Graph, opts: &ConvertOptions) -> Vec<InputSpec> {
    graph
        .inputs
        .iter()
        .map(|&t| {
            let shape = graph.tensors[t].shape.clone();
            let nchw_shape = (opts.nhwc_io && shape.len() == 4)
                .then(|| vec![shape[0], shape[3], shape[1], shape[2]]);
            InputSpec {
                name: graph.tensors[t].name.clone(),
                shape,
                nchw_shape,
                integer: graph.tensors[t].dtype == crate::ir::DType::I32,
            }
        })
        .collect()
}

/// Quantizes the lowered float graph as `opts` asks.
fn quantize_graph(
    graph: &mut Graph,
    label: &str,
    opts: &ConvertOptions,
) -> Result<Option<QuantReport>> {
    // An already-quantized model's parameters (never written on float tensors).
    let model = quantize::qdq::take(graph);
    // A QDQ model converts to full int8 with its own parameters unless asked otherwise (fp16);
    // a dynamic-quantized one to int8 weights-only.
    let mode = match opts.quantize {
        None | Some(QuantizeMode::Int8Weights) if model.is_static() => Some(QuantizeMode::Int8Full),
        None if !model.is_empty() => Some(QuantizeMode::Int8Weights),
        m => m,
    };
    let Some(mode) = mode else {
        if opts.int8.io_type == quantize::IoType::Integer {
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
    let full_only = opts.int8.io_type == quantize::IoType::Integer
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
        QuantizeMode::Fp16 => quantize::fp16_weights(graph),
        QuantizeMode::Int8Weights => {
            let mut s = quantize::int8_weights_with(graph, &model);
            if !model.is_empty() {
                s.mode = "int8 weights-only (the model's int8 weights)".into();
            }
            s
        }
        QuantizeMode::Int8Full if opts.calibration.is_none() && model.is_static() => {
            let mut int8 = opts.int8.clone();
            int8.qdq = model;
            let mut summary = quantize::full_int8(graph, &Ranges::new(), &int8)
                .with_context(|| label.to_string())?;
            summary.mode = "int8 (the QDQ model's parameters)".into();
            return Ok(Some(QuantReport {
                summary,
                calibration_samples: 0,
                error_samples: 0,
                outputs: vec![],
                layers: vec![],
                kept_float_for_snr: vec![],
            }));
        }
        QuantizeMode::Int8Full | QuantizeMode::Int16x8 => {
            let activations = if mode == QuantizeMode::Int16x8 {
                quantize::weights::Activations::Int16
            } else {
                quantize::weights::Activations::Int8
            };
            let data = opts
                .calibration
                .as_ref()
                .ok_or_else(|| anyhow::anyhow!("full int8 needs --calibration DATA"))?;
            let samples = calibrate::load(data, &input_specs(graph, opts), &opts.images)?;
            let float = export_graph(graph, label)?;
            let method = opts.calibration_method.unwrap_or(Method::MinMax);
            let ranges = calibrate::collect_ranges(&float, &samples, method, opts.progress)
                .with_context(|| format!("{label}: calibration"))?;
            let ranges: Ranges = ranges
                .into_iter()
                .enumerate()
                .filter_map(|(i, r)| r.map(|r| (i, r)))
                .filter(|&(i, _)| i < graph.tensors.len())
                .collect();
            let few = &samples[..samples.len().min(ERROR_SAMPLES)];
            let measure = |what: Result<Vec<LayerError>>| {
                what.with_context(|| format!("{label}: measuring quantization error"))
            };
            let float_graph = graph.clone();
            let reference = report::FloatOutputs::new(&float, few)
                .with_context(|| format!("{label}: measuring quantization error"))?;
            // One full-int8 attempt with `extra` nodes kept in float: the quantized graph, what
            // quantization did, and the quantized file's outputs' error against the float file.
            let attempt =
                |extra: &[String]| -> Result<(Graph, QuantSummary, Vec<u8>, Vec<LayerError>)> {
                    let mut g = float_graph.clone();
                    let mut int8 = opts.int8.clone();
                    int8.activations = activations;
                    // int16x8 is calibrated: an int8 QDQ model's parameters do not apply.
                    if activations == quantize::weights::Activations::Int8 {
                        int8.qdq = model.clone();
                    }
                    int8.exclude_nodes.extend(extra.iter().cloned());
                    let summary = quantize::full_int8(&mut g, &ranges, &int8)
                        .with_context(|| label.to_string())?;
                    let bytes = export_graph(&g, label)?;
                    let outputs = measure(report::output_errors(&reference, &bytes, few))?;
                    Ok((g, summary, bytes, outputs))
                };
            let worst = |outputs: &[LayerError]| {
                outputs
                    .iter()
                    .map(|o| o.snr_db)
                    .fold(f64::INFINITY, f64::min)
            };
            let mut kept_float: Vec<String> = Vec::new();
            let mut best = attempt(&kept_float)?;
            if let Some(budget) = opts.min_snr_db {
                // Sensitivity: the output SNR with each layer alone left in float; the layers
                // that help most go back to float first, until the budget is met.
                let mut gains = Vec::new();
                if worst(&best.3) < budget {
                    for name in quantize::mixed::candidates(&float_graph) {
                        let (_, _, _, outputs) = attempt(std::slice::from_ref(&name))?;
                        gains.push((worst(&outputs), name));
                    }
                }
                gains.sort_by(|a, b| b.0.total_cmp(&a.0));
                for (_, name) in gains.into_iter().take(MAX_KEPT_FLOAT) {
                    if worst(&best.3) >= budget {
                        break;
                    }
                    kept_float.push(name);
                    best = attempt(&kept_float)?;
                }
            }
            let (g, mut summary, quantized, outputs) = best;
            if model.is_static() {
                summary.mode = "int8 (the QDQ model's parameters, calibration elsewhere)".into();
            }
            *graph = g;
            let layers = measure(report::layer_errors(&float, &quantized, few))?;
            return Ok(Some(QuantReport {
                summary,
                calibration_samples: samples.len(),
                error_samples: few.len(),
                outputs,
                layers,
                kept_float_for_snr: kept_float,
            }));
        }
    };
    Ok(Some(QuantReport {
        summary,
        calibration_samples: 0,
        error_samples: 0,
        outputs: vec![],
        layers: vec![],
        kept_float_for_snr: vec![],
    }))
}

/// Counts the ONNX op types of a model file (for the summary).
fn onnx_op_histogram(bytes: &[u8]) -> BTreeMap<String, usize> {
    use prost::Message;
    let mut h = BTreeMap::new();
    if let Ok(m) = tract_onnx::pb::ModelProto::decode(bytes) {
        for n in m.graph.iter().flat_map(|g| &g.node) {
            *h.entry(n.op_type.clone()).or_insert(0) += 1;
        }
    }
    h
}

/// Converts an ONNX file.
pub fn convert_file(path: &Path, opts: &ConvertOptions) -> Result<Conversion> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    convert_bytes(&bytes, &path.display().to_string(), opts)
}

/// Converts ONNX bytes; `label` names the source in errors.
pub fn convert_bytes(bytes: &[u8], label: &str, opts: &ConvertOptions) -> Result<Conversion> {
    let start = Instant::now();
    let import_opts = ImportOptions {
        input_shapes: opts.input_shapes.clone(),
        input_values: opts.input_values.clone(),
    };
    let mut graph = import::import_onnx_bytes(bytes, label, &import_opts)?;
    let warnings = passes::nonfinite_constant_warnings(&graph);
    let pipeline = passes::run_pipeline(
        &mut graph,
        &PipelineOptions {
            passes: opts.passes.clone(),
            layout: layout::LayoutOptions {
                nhwc_io: opts.nhwc_io,
            },
        },
    )
    .with_context(|| label.to_string())?;
    let quantization = quantize_graph(&mut graph, label, opts)?;
    let weight_bytes = graph.const_bytes();
    let out = export_graph(&graph, label)?;

    // Check the result the way a device would, and learn its arena size.
    let aligned = literun::AlignedBytes::from_slice(&out);
    let model = literun::Model::from_bytes(&aligned)
        .map_err(|e| anyhow::anyhow!("{label}: written model does not verify: {e}"))?;
    let interp = literun::Interpreter::new(&model)
        .map_err(|e| anyhow::anyhow!("{label}: written model cannot be prepared: {e}"))?;
    debug_assert!(model.memory_plan().is_ok_and(|p| p.stored));
    let mut ops_after = BTreeMap::new();
    for op in model.operators() {
        *ops_after.entry(op.name()).or_insert(0) += 1;
    }
    Ok(Conversion {
        ops_before: onnx_op_histogram(bytes),
        ops_after,
        arena_bytes: interp.arena_bytes(),
        weight_bytes,
        seconds: start.elapsed().as_secs_f64(),
        bytes: out,
        pipeline,
        warnings,
        quantization,
    })
}
