//! Importers: ONNX protobuf → IR (with ONNX semantics, static shapes, constants folded).

#[cfg(test)]
mod attention_tests;
pub mod builder;
#[cfg(test)]
mod conformance_tests;
#[cfg(test)]
mod cumsum_tests;
mod fold;
mod functions;
#[cfg(test)]
mod if_tests;
mod int64;
#[cfg(test)]
mod loop_tests;
#[cfg(test)]
mod loss_tests;
mod onnx;
#[cfg(test)]
mod pointwise_tests;
mod proto;
#[cfg(test)]
mod qdq_tests;
#[cfg(test)]
mod remainder_tests;
#[cfg(test)]
mod robustness_tests;
#[cfg(test)]
mod rotary_tests;
#[cfg(test)]
mod scatter_tests;
#[cfg(test)]
mod selection_tests;
#[cfg(test)]
mod tests;

use crate::ir;
use anyhow::Context;
use std::collections::HashMap;
use std::path::Path;

/// Options for [`import_onnx`].
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Static shapes for inputs with dynamic dimensions (`--input-shape name=1,3,224,224`).
    pub input_shapes: HashMap<String, Vec<usize>>,
    /// Inputs frozen to constant values (`--input-value sr=16000`): they leave the model's
    /// interface and fold into the graph (e.g. resolving an `If` on a sample rate).
    pub input_values: HashMap<String, Vec<f64>>,
    /// Convert a model exported in training mode as its inference form: BatchNormalization
    /// with the running statistics (its training-only outputs dropped), Dropout as the
    /// identity. Without it such nodes are refused: their training results cannot be
    /// reproduced.
    pub training_as_inference: bool,
    /// How LSTM nodes are written (`--lstm`).
    pub lstm: LstmMode,
}

/// How ONNX LSTM nodes are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LstmMode {
    /// Unrolled over the sequence into per-step cells of ops every runtime has; each invoke
    /// starts from the node's initial state, as ONNX does.
    #[default]
    Unrolled,
    /// One UNIDIRECTIONAL_SEQUENCE_LSTM per LSTM: a smaller file for long sequences, whose state
    /// lives in variable tensors that persist across invokes (streaming, as TensorFlow's own
    /// files behave). LSTMs starting from zero state only, whose Y_c is unused.
    Sequence,
}

/// Reads and imports an ONNX file. Errors name the file (and the node and op type, where one is
/// at fault); unsupported ops are all listed in one error.
pub fn import_onnx(path: &Path, opts: &ImportOptions) -> anyhow::Result<ir::Graph> {
    let label = path.display().to_string();
    let bytes = std::fs::read(path).with_context(|| format!("{label}: cannot read the file"))?;
    import_onnx_bytes(&bytes, &label, opts)
}

/// Imports an ONNX model from memory; `file_label` names it in errors.
pub fn import_onnx_bytes(
    bytes: &[u8],
    file_label: &str,
    opts: &ImportOptions,
) -> anyhow::Result<ir::Graph> {
    let mut g = onnx::import_bytes(bytes, file_label, opts)?;
    int64::narrow(&mut g, file_label)?;
    Ok(g)
}
