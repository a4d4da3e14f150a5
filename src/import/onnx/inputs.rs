//! Graph inputs: static shapes (`--input-shape`) and inputs frozen to constants (`--input-value`).

use super::Importer;
use crate::import::proto::{checked_elements, runtime_dtype};
use crate::import::ImportOptions;
use crate::ir::{ConstData, DType};
use anyhow::{anyhow, bail, Result};
use std::collections::HashSet;
use tract_onnx::pb::GraphProto;

/// The constant a frozen input (`--input-value`) becomes: the values, or one value repeated.
fn frozen_input(
    shape: &[usize],
    dtype: DType,
    values: &[f64],
) -> std::result::Result<ConstData, String> {
    let n: usize = shape.iter().product();
    let values: Vec<f64> = match values.len() {
        1 => vec![values[0]; n],
        len if len == n => values.to_vec(),
        len => return Err(format!("{len} values for shape {shape:?} ({n} elements)")),
    };
    let data = match dtype {
        DType::F32 | DType::F16 => {
            ConstData::from_f32(shape, values.iter().map(|&v| v as f32).collect())
        }
        DType::I64 | DType::I32 | DType::I8 | DType::I16 | DType::U8 | DType::Bool => {
            if let Some(v) = values.iter().find(|v| v.fract() != 0.0) {
                return Err(format!("{v} is not an integer, the input is {dtype:?}"));
            }
            ConstData::from_i64(shape, values.iter().map(|&v| v as i64).collect()).cast(dtype)
        }
    };
    Ok(data)
}

impl<'m> Importer<'m> {
    /// Adds the graph inputs (those that are not initializers) with static shapes.
    pub(super) fn inputs(&mut self, graph: &'m GraphProto, opts: &ImportOptions) -> Result<()> {
        let file = &self.file;
        let real: Vec<&str> = graph
            .input
            .iter()
            .map(|v| v.name.as_str())
            .filter(|n| !self.inits.contains_key(n))
            .collect();
        let mut unknown: Vec<(&str, &String)> = opts
            .input_shapes
            .keys()
            .map(|k| ("--input-shape", k))
            .chain(opts.input_values.keys().map(|k| ("--input-value", k)))
            .filter(|(_, k)| !real.contains(&k.as_str()))
            .collect();
        unknown.sort();
        if let Some((flag, k)) = unknown.first() {
            bail!(
                "{file}: {flag} names '{k}', which is not an input of the model; its \
                 inputs are: {}",
                real.iter()
                    .map(|n| format!("'{n}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let mut seen = HashSet::new();
        for v in &graph.input {
            if self.inits.contains_key(v.name.as_str()) {
                continue;
            }
            if !seen.insert(v.name.as_str()) {
                bail!("{file}: input '{}' is listed twice", v.name);
            }
            use tract_onnx::pb::tensor_shape_proto::dimension::Value as Dim;
            use tract_onnx::pb::type_proto::Value as Ty;
            let Some(Ty::TensorType(tt)) = v.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
                bail!(
                    "{file}: input '{}' is not a tensor (or has no type)",
                    v.name
                );
            };
            let dtype = runtime_dtype(tt.elem_type)
                .map_err(|e| anyhow!("{file}: input '{}': {e}", v.name))?;
            // None = dynamic (with its symbolic name, if any).
            let dims: Option<Vec<(Option<usize>, Option<String>)>> = tt.shape.as_ref().map(|s| {
                s.dim
                    .iter()
                    .map(|d| match &d.value {
                        Some(Dim::DimValue(x)) if *x >= 0 => (usize::try_from(*x).ok(), None),
                        Some(Dim::DimParam(p)) if !p.is_empty() => (None, Some(p.clone())),
                        _ => (None, None),
                    })
                    .collect()
            });
            let given = opts.input_shapes.get(&v.name);
            let shape: Vec<usize> = match (dims, given) {
                (None, None) => bail!(
                    "{file}: input '{}' has no shape; give it with --input-shape {}=1,3,224,224",
                    v.name,
                    v.name
                ),
                (None, Some(g)) => g.clone(),
                (Some(d), Some(g)) => {
                    if d.len() != g.len() {
                        bail!(
                            "{file}: input '{}' has rank {}, but the given shape {:?} has rank {}",
                            v.name,
                            d.len(),
                            g,
                            g.len()
                        );
                    }
                    for (i, ((s, _), &x)) in d.iter().zip(g).enumerate() {
                        if let Some(s) = s {
                            if *s != x {
                                bail!(
                                    "{file}: input '{}': the given shape {:?} contradicts the \
                                     model's static dimension {i} = {s}",
                                    v.name,
                                    g
                                );
                            }
                        }
                    }
                    g.clone()
                }
                (Some(d), None) => {
                    if let Some((i, (_, p))) = d.iter().enumerate().find(|(_, (s, _))| s.is_none())
                    {
                        let example = d
                            .iter()
                            .map(|(s, _)| s.unwrap_or(1).to_string())
                            .collect::<Vec<_>>()
                            .join(",");
                        let pname = p.as_ref().map(|p| format!(" ('{p}')")).unwrap_or_default();
                        bail!(
                            "{file}: input '{}' has a dynamic dimension {i}{pname}; give its \
                             shape with --input-shape {}={example}",
                            v.name,
                            v.name
                        );
                    }
                    d.iter().map(|(s, _)| s.unwrap_or(1)).collect()
                }
            };
            if shape.contains(&0) {
                bail!(
                    "{file}: input '{}' has a zero dimension in {shape:?}; zero-element \
                     tensors are not supported",
                    v.name
                );
            }
            checked_elements(&shape).map_err(|e| anyhow!("{file}: input '{}': {e}", v.name))?;
            if let Some(values) = opts.input_values.get(&v.name) {
                let data = frozen_input(&shape, dtype, values)
                    .map_err(|e| anyhow!("{file}: --input-value {}: {e}", v.name))?;
                let id = self.g.add_const(v.name.clone(), data);
                self.values.insert(v.name.clone(), id);
                continue;
            }
            let id = self.g.add_tensor(v.name.clone(), shape, dtype);
            self.g.inputs.push(id);
            self.values.insert(v.name.clone(), id);
        }
        Ok(())
    }
}
