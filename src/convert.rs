//! The conversion pipeline: ONNX file → IR → passes → TFLite FlatBuffer bytes.

use crate::export::tflite::{self, ExportOptions};
use crate::import::{self, ImportOptions};
use crate::passes::{self, layout, PassSelection, PipelineOptions, PipelineReport};
use anyhow::{Context, Result};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Instant;

/// Options of `litecvt convert`.
#[derive(Clone, Debug, Default)]
pub struct ConvertOptions {
    /// Static shapes for inputs with dynamic dimensions, by input name.
    pub input_shapes: HashMap<String, Vec<usize>>,
    /// Rank-4 inputs and outputs in NHWC (no transposes at the edges).
    pub nhwc_io: bool,
    /// Which optional optimizations run.
    pub passes: PassSelection,
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
    let weight_bytes = graph.const_bytes();
    let out = tflite::export(
        &graph,
        &ExportOptions {
            description: format!("litecvt {}", env!("CARGO_PKG_VERSION")),
        },
    )
    .with_context(|| label.to_string())?;

    // Check the result the way a device would, and learn its arena size.
    let aligned = literun::AlignedBytes::from_slice(&out);
    let model = literun::Model::from_bytes(&aligned)
        .map_err(|e| anyhow::anyhow!("{label}: written model does not verify: {e}"))?;
    let interp = literun::Interpreter::new(&model)
        .map_err(|e| anyhow::anyhow!("{label}: written model cannot be prepared: {e}"))?;
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
    })
}
