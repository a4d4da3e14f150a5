//! New input shapes: the model's tensor shapes recomputed for them, operator by operator.

use super::{element_count, Model, MAX_TENSOR_BYTES};
use crate::error::{format, invalid, Error, Result};

impl<'a> Model<'a> {
    /// This model with input `input` of shape `dims`, and every tensor after it given the shape
    /// its operator computes from the new input shapes. Only dimensions the input's
    /// `shape_signature` marks -1 may change; an operator whose output shape literun cannot
    /// compute is an error when its input shapes change. The interpreter's preparation checks
    /// the result like any model.
    pub fn resized(&self, input: usize, dims: &[usize]) -> Result<Model<'a>> {
        self.resized_inputs(&[(input, dims)])
    }

    /// [`resized`](Self::resized) for several inputs at once (inputs an operator needs the same
    /// size, e.g. two batch dimensions, must change together).
    pub fn resized_inputs(&self, new: &[(usize, &[usize])]) -> Result<Model<'a>> {
        let mut model = self.clone();
        model.resized = true;
        for &(input, dims) in new {
            let info = self.inputs.get(input).ok_or_else(|| {
                Error::Tensor(format!(
                    "no input {input} (model has {})",
                    self.inputs.len()
                ))
            })?;
            let t = &self.tensors[info.tensor];
            let signature = t.shape_signature.as_deref();
            let fixed = |a: usize| match signature {
                Some(s) => s.get(a) != Some(&-1),
                None => true,
            };
            if dims.len() != t.shape.len()
                || dims
                    .iter()
                    .zip(&t.shape)
                    .enumerate()
                    .any(|(a, (d, s))| d != s && fixed(a))
            {
                return Err(Error::Tensor(format!(
                    "input {input} '{}' cannot take shape {dims:?}: its shape is {:?} with \
                     signature {:?} (only -1 dimensions may change)",
                    info.name, t.shape, signature
                )));
            }
            set_shape(&mut model, info.tensor, dims)?;
        }
        // Integer values known before running, by tensor: SHAPE's and what is computed from
        // them (the file's shapes after a RESHAPE to such values are placeholders).
        let mut values: Vec<Option<Vec<i64>>> = Vec::new();
        values.resize(self.tensors.len(), None);
        for (index, op) in self.ops.iter().enumerate() {
            let changed = op.code == crate::schema::BuiltinOperator::SHAPE
                || op.inputs.iter().flatten().any(|&i| {
                    model.tensors[i].shape != self.tensors[i].shape || values[i].is_some()
                });
            if !changed {
                continue;
            }
            let inferred = crate::ops::infer_output_shapes(&model.tensors, &values, index, op)?;
            let shapes = inferred.shapes;
            if let (Some(v), Some(&o)) = (inferred.values, op.outputs.first()) {
                values[o] = Some(v);
            }
            for (j, &o) in op.outputs.iter().enumerate() {
                match shapes.iter().find(|(k, _)| *k == j) {
                    Some((_, shape)) => set_shape(&mut model, o, shape)?,
                    None => {
                        return Err(crate::model::op_err(
                            index,
                            op,
                            "cannot compute its output shape for new input shapes",
                        ))
                    }
                }
            }
        }
        for list in [&mut model.inputs, &mut model.outputs] {
            for info in list.iter_mut() {
                info.shape.clone_from(&model.tensors[info.tensor].shape);
            }
        }
        Ok(model)
    }
}

/// Gives tensor `t` of `model` the shape `dims` (its element and byte counts with it).
fn set_shape(model: &mut Model<'_>, t: usize, dims: &[usize]) -> Result<()> {
    let desc = &mut model.tensors[t];
    if desc.data.is_some() {
        return Err(invalid!(
            "constant tensor {t} '{}' cannot change shape",
            desc.name
        ));
    }
    let elements = element_count(dims)
        .filter(|&n| {
            n.checked_mul(desc.dtype.size())
                .is_some_and(|b| b <= MAX_TENSOR_BYTES)
        })
        .ok_or_else(|| invalid!("tensor {t} '{}': shape {dims:?} is too large", desc.name))?;
    desc.shape = dims.to_vec();
    desc.elements = elements;
    desc.bytes = elements * desc.dtype.size();
    Ok(())
}
