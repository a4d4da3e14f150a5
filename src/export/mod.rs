//! Writers: IR → model file bytes.

pub mod tflite;
mod versions;

use crate::ir::Graph;
use anyhow::{Context, Result};

/// Writes the graph with its arena planned by literun's planner (on the written file, so the
/// plan covers exactly the tensors a runtime sees) and stored as `OfflineMemoryAllocation`
/// metadata. The file is written once with room for the plan ([`tflite::PLAN_PLACEHOLDER`]),
/// planned, and the plan and its name written into that room: the bytes a write with the plan
/// gives, without writing every constant a second time. `label` names the source in errors.
pub fn planned_tflite(graph: &Graph, label: &str) -> Result<Vec<u8>> {
    let mut opts = tflite::ExportOptions {
        description: format!("litecvt {}", env!("CARGO_PKG_VERSION")),
        memory_plan: None,
        reserve_plan: true,
    };
    let mut file = tflite::export(graph, &opts).with_context(|| label.to_string())?;
    let (offsets, room) = {
        // Read in place where the allocator gave it 16-byte aligned (large buffers always are).
        let copy;
        let aligned: &[u8] = if file.as_ptr().align_offset(16) == 0 {
            &file
        } else {
            copy = literun::AlignedBytes::from_slice(&file);
            &copy
        };
        let model = literun::Model::from_bytes(aligned)
            .map_err(|e| anyhow::anyhow!("{label}: written model does not verify: {e}"))?;
        let plan = model
            .memory_plan()
            .map_err(|e| anyhow::anyhow!("{label}: cannot plan the arena: {e}"))?;
        (plan.to_offline_metadata(), reserved_room(aligned))
    };
    opts.reserve_plan = false;
    let Some(offsets) = offsets else {
        // An arena beyond 2 GiB cannot be described in TFLite Micro's i32 layout.
        return tflite::export(graph, &opts).with_context(|| label.to_string());
    };
    match room {
        Some((name, data)) if data.len() == offsets.len() * 4 => {
            let plan = literun::plan::OFFLINE_PLAN_METADATA.as_bytes();
            file[name.start..name.end].copy_from_slice(plan);
            for (o, v) in file[data].chunks_exact_mut(4).zip(&offsets) {
                o.copy_from_slice(&v.to_le_bytes());
            }
            Ok(file)
        }
        // Not found where it was written: the plan is written with the whole file again.
        _ => {
            opts.memory_plan = Some(offsets);
            tflite::export(graph, &opts).with_context(|| label.to_string())
        }
    }
}

/// Where in `file` the reserved plan's metadata name and its buffer's bytes are.
fn reserved_room(file: &[u8]) -> Option<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    let opts = flatbuffers::VerifierOptions {
        max_tables: usize::MAX,
        max_apparent_size: usize::MAX,
        ..Default::default()
    };
    let root = literun::schema::root_as_model_with_opts(&opts, file).ok()?;
    let entry = root
        .metadata()?
        .iter()
        .find(|m| m.name() == Some(tflite::PLAN_PLACEHOLDER))?;
    let data = root
        .buffers()?
        .iter()
        .nth(entry.buffer() as usize)?
        .data()?
        .bytes();
    let name = entry.name()?.as_bytes();
    let at = |s: &[u8]| s.as_ptr() as usize - file.as_ptr() as usize;
    Some((
        at(name)..at(name) + name.len(),
        at(data)..at(data) + data.len(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Activation, BinaryOp, ConstData, DType, Node, Op};

    /// Three ADDs of a constant in a row: tensors the plan gives memory and one it does not.
    fn chain() -> Graph {
        let mut g = Graph::default();
        let x = g.add_tensor("x", vec![1, 4, 4, 3], DType::F32);
        g.inputs.push(x);
        let k = g.add_const("k", ConstData::from_f32(&[3], vec![0.5, -1.0, 2.0]));
        let mut prev = x;
        for i in 0..3 {
            let y = g.add_tensor(format!("y{i}"), vec![1, 4, 4, 3], DType::F32);
            g.nodes.push(Node {
                name: format!("add{i}"),
                op: Op::Binary {
                    op: BinaryOp::Add,
                    activation: Activation::None,
                },
                inputs: vec![prev, k],
                outputs: vec![y],
            });
            prev = y;
        }
        g.outputs.push(prev);
        g
    }

    #[test]
    fn the_plan_written_into_its_room_gives_the_bytes_of_a_write_with_it() {
        let g = chain();
        let planned = planned_tflite(&g, "t").unwrap();
        // Written without a plan, planned, and written again with it.
        let mut opts = tflite::ExportOptions {
            description: format!("litecvt {}", env!("CARGO_PKG_VERSION")),
            ..Default::default()
        };
        let first = literun::AlignedBytes::from_slice(&tflite::export(&g, &opts).unwrap());
        let plan = literun::Model::from_bytes(&first)
            .unwrap()
            .memory_plan()
            .unwrap()
            .to_offline_metadata()
            .unwrap();
        assert!(plan[3..].iter().any(|&o| o > 0) && plan[3..].contains(&-1));
        opts.memory_plan = Some(plan.clone());
        assert!(planned == tflite::export(&g, &opts).unwrap());
        // Read back as the stored plan.
        let planned = literun::AlignedBytes::from_slice(&planned);
        let model = literun::Model::from_bytes(&planned).unwrap();
        assert_eq!(model.stored_plan().unwrap(), Some(plan[3..].to_vec()));
    }
}
