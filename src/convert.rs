//! The conversion pipeline: ONNX file → IR → passes → TFLite FlatBuffer bytes.

use crate::export;
use crate::import::{self, ImportOptions, LstmMode};
use crate::ir::Graph;
use crate::passes::{self, layout, PassSelection, PipelineOptions, PipelineReport};
use crate::quantize::calibrate::{self, InputSpec, Method};
use crate::quantize::pipeline::{self, QuantizeOptions};
use crate::quantize::{FullInt8Options, QuantizeMode};
use anyhow::{Context, Result};
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
    /// Convert training-mode BatchNormalization and Dropout as their inference forms
    /// (`--training-as-inference`; [`ImportOptions::training_as_inference`]).
    pub training_as_inference: bool,
    /// How LSTM nodes are written (`--lstm`; [`LstmMode`]).
    pub lstm: LstmMode,
    /// Which optional optimizations run.
    pub passes: PassSelection,
    /// `--quantize`: `None` keeps float32.
    pub quantize: Option<QuantizeMode>,
    /// Representative data for full int8 (`--calibration`).
    pub calibration: Option<PathBuf>,
    /// Representative data for full int8 held in memory (the Python API's
    /// `representative_dataset`); used when `calibration` is `None`.
    pub calibration_arrays: Option<Vec<calibrate::ArraySample>>,
    pub calibration_method: Option<Method>,
    pub int8: FullInt8Options,
    /// Show a progress bar while calibrating.
    pub progress: bool,
    /// Full int8: keep layers in float until every output's SNR vs float reaches this.
    pub min_snr_db: Option<f64>,
    /// Write the best file found when `min_snr_db` is missed (else the conversion fails).
    pub accept_snr_miss: bool,
    /// Full int8: skip empirical bias correction.
    pub no_bias_correction: bool,
    /// Full int8: round weights to nearest instead of error-compensating rounding.
    pub no_weight_rounding: bool,
    /// Full int8: try LayerNorms with int16 activations (always with `min_snr_db`).
    pub layernorm_int16: bool,
    /// Full int8: skip cross-layer equalization.
    pub no_equalize: bool,
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

pub use crate::quantize::pipeline::QuantReport;

impl Conversion {
    /// The JSON report of `litecvt convert --report` (`model` and `output` name the files).
    pub fn report_json(&self, model: &str, output: &str) -> serde_json::Value {
        serde_json::json!({
            "model": model,
            "output": output,
            "onnx_ops": self.ops_before,
            "tflite_ops": self.ops_after,
            "bytes": self.bytes.len(),
            "weight_bytes": self.weight_bytes,
            "arena_bytes": self.arena_bytes,
            "seconds": self.seconds,
            "warnings": self.warnings,
            "pipeline": self.pipeline,
            "quantization": self.quantization,
        })
    }
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
                kind: match graph.tensors[t].dtype {
                    crate::ir::DType::I32 => calibrate::InputKind::Integer,
                    crate::ir::DType::Bool => calibrate::InputKind::Bool,
                    _ => calibrate::InputKind::Float,
                },
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
    let q = QuantizeOptions {
        mode: opts.quantize,
        calibration: match (&opts.calibration, &opts.calibration_arrays) {
            (Some(path), _) => Some(calibrate::CalibrationSource::Path(path)),
            (None, Some(arrays)) => Some(calibrate::CalibrationSource::Arrays(arrays)),
            (None, None) => None,
        },
        method: opts.calibration_method,
        int8: &opts.int8,
        inputs: input_specs(graph, opts),
        images: &opts.images,
        progress: opts.progress,
        min_snr_db: opts.min_snr_db,
        accept_snr_miss: opts.accept_snr_miss,
        bias_correction: !opts.no_bias_correction,
        weight_rounding: !opts.no_weight_rounding,
        layernorm_int16: opts.layernorm_int16,
        equalize: !opts.no_equalize,
    };
    pipeline::quantize_graph(graph, label, &q)
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

/// What a file with UNIDIRECTIONAL_SEQUENCE_LSTMs (`--lstm sequence`) does differently from
/// the ONNX model: it keeps their state across invokes.
fn lstm_state_warning(g: &Graph) -> Option<String> {
    fn count(g: &Graph) -> usize {
        g.nodes
            .iter()
            .map(|n| {
                let own = usize::from(matches!(n.op, crate::ir::Op::SequenceLstm { .. }));
                own + n
                    .op
                    .subgraphs()
                    .iter()
                    .map(|(_, s)| count(s))
                    .sum::<usize>()
            })
            .sum()
    }
    let n = count(g);
    (n > 0).then(|| {
        format!(
            "{n} LSTM(s) written as UNIDIRECTIONAL_SEQUENCE_LSTM (--lstm sequence): the file keeps \
             their state (h, c) in variable tensors from one invoke to the next, so the first \
             invoke matches the ONNX model and later ones continue the sequence; reset the state \
             between independent sequences (LiteRT: reset_all_variables(); literun: a new \
             Interpreter)"
        )
    })
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
        training_as_inference: opts.training_as_inference,
        lstm: opts.lstm,
    };
    let mut graph = import::import_onnx_bytes(bytes, label, &import_opts)?;
    let mut warnings = passes::nonfinite_constant_warnings(&graph);
    warnings.extend(lstm_state_warning(&graph));
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
    let out = export::planned_tflite(&graph, label)?;

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
