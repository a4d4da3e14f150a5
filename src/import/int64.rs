//! Int64 → int32: TFLite kernels index, compare and gather with int32, and LiteRT has no int64
//! form of most of them. After import every int64 tensor becomes int32:
//!
//! - int64 graph inputs become int32 inputs (token ids and the like; the app passes int32, and
//!   `litecvt run` / calibration narrow int64 `.npy` data with a range check);
//! - int64 intermediate values (Cast to int64, ArgMax/ArgMin/TopK indices) are int32;
//! - int64 constants read by run-time ops are narrowed, and a value outside the int32 range is
//!   an error naming the constant and the node that reads it.

use crate::ir::{ConstData, DType, Graph, Op};
use anyhow::{bail, Result};

/// Narrows `g` in place; `file` names the model in errors.
pub fn narrow(g: &mut Graph, file: &str) -> Result<()> {
    // The subgraphs of IF and WHILE first: their inputs narrow with the values the op passes.
    for n in &mut g.nodes {
        for (_, sub) in n.op.subgraphs_mut() {
            narrow(sub, file)?;
        }
    }
    // Constants first, so an error names a reader.
    for n in &g.nodes {
        for &t in &n.inputs {
            let tensor = &g.tensors[t];
            let Some(ConstData::I64(a)) = tensor.data.as_deref() else {
                continue;
            };
            if let Some(v) = a.iter().find(|&&v| i32::try_from(v).is_err()) {
                bail!(
                    "{file}: node '{}' ({}): int64 constant '{}' holds {v}, outside the int32 \
                     range TFLite's kernels use (int64 values are narrowed to int32)",
                    n.name,
                    n.op.name(),
                    tensor.name
                );
            }
        }
    }
    for t in &mut g.tensors {
        if t.dtype != DType::I64 {
            continue;
        }
        if let Some(d) = &t.data {
            if d.to_i64_vec().iter().all(|&v| i32::try_from(v).is_ok()) {
                t.data = Some(d.cast(DType::I32).into());
                t.dtype = DType::I32;
            }
            // Out-of-range constants no op reads stay int64 (checked above for readers).
        } else {
            t.dtype = DType::I32;
        }
    }
    for n in &mut g.nodes {
        if let Op::Cast { to } = &mut n.op {
            if *to == DType::I64 {
                *to = DType::I32;
            }
            // int64 → int32 is now int32 → int32: a copy.
            if g.tensors[n.inputs[0]].dtype == *to {
                n.op = Op::Reshape {
                    shape: g.tensors[n.outputs[0]].shape.clone(),
                };
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Node;

    fn graph(values: Vec<i64>) -> Graph {
        let mut g = Graph::default();
        let x = g.add_tensor("ids", vec![3], DType::I64);
        let c = g.add_const("offset", ConstData::from_i64(&[3], values));
        let y = g.add_tensor("y", vec![3], DType::I64);
        g.nodes.push(Node {
            name: "add".into(),
            op: Op::Binary {
                op: crate::ir::BinaryOp::Add,
                activation: crate::ir::Activation::None,
            },
            inputs: vec![x, c],
            outputs: vec![y],
        });
        g.inputs.push(x);
        g.outputs.push(y);
        g
    }

    #[test]
    fn narrows_inputs_values_and_constants() {
        let mut g = graph(vec![1, -2, 3]);
        narrow(&mut g, "m.onnx").unwrap();
        assert!(g.tensors.iter().all(|t| t.dtype == DType::I32));
        assert_eq!(g.tensors[1].data.as_ref().unwrap().to_i64_vec(), [1, -2, 3]);
    }

    #[test]
    fn out_of_range_constant_is_an_error_naming_it() {
        let mut g = graph(vec![1, 1 << 40, 3]);
        let e = narrow(&mut g, "m.onnx").unwrap_err().to_string();
        assert!(
            e.contains("m.onnx") && e.contains("'offset'") && e.contains("'add'"),
            "{e}"
        );
        assert!(e.contains(&(1i64 << 40).to_string()), "{e}");
    }
}
