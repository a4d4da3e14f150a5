//! Writers: IR → model file bytes.

pub mod tflite;
mod versions;

use crate::ir::Graph;
use anyhow::{Context, Result};

/// Writes the graph, then plans its arena with literun's planner (on the written file, so the
/// plan covers exactly the tensors a runtime sees) and writes it again with the plan stored as
/// `OfflineMemoryAllocation` metadata. `label` names the source in errors.
pub fn planned_tflite(graph: &Graph, label: &str) -> Result<Vec<u8>> {
    let mut opts = tflite::ExportOptions {
        description: format!("litecvt {}", env!("CARGO_PKG_VERSION")),
        memory_plan: None,
    };
    let first = tflite::export(graph, &opts).with_context(|| label.to_string())?;
    // Read in place where the allocator gave it 16-byte aligned (large buffers always are).
    let copy;
    let aligned: &[u8] = if first.as_ptr().align_offset(16) == 0 {
        &first
    } else {
        copy = literun::AlignedBytes::from_slice(&first);
        &copy
    };
    let model = literun::Model::from_bytes(aligned)
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
