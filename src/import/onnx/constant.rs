//! Constant, ConstantOfShape and EyeLike.

use super::{bad, unsup, Importer, R};
use crate::import::fold;
use crate::import::proto::{cast_dtype, decode_tensor, dim_values, Attrs};
use crate::ir::ConstData;
use tract_onnx::pb::NodeProto;

impl Importer<'_> {
    pub(super) fn constant_of_shape(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let Some(shape) = self.const_ints(n, 0, "shape")? else {
            return bad("shape is required");
        };
        let shape = dim_values(&shape, "dimension")?;
        let value = match a.tensor("value")? {
            Some(t) => decode_tensor(t)?,
            None => ConstData::scalar_f32(0.0),
        };
        let c = fold::constant_of_shape(&shape, &value)?;
        let out = self.out0(n)?;
        self.out_const(out, c)
    }

    /// EyeLike: ones on the diagonal `k` of the input's [rows, columns] shape, zeros elsewhere,
    /// of type `dtype` (the input's by default). Only the input's shape matters: a constant.
    pub(super) fn eye_like(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let shape = self.shape(x);
        let [rows, cols] = shape[..] else {
            return bad(format!("input must be 2-D, got shape {shape:?}"));
        };
        let dtype = match a.int("dtype")? {
            Some(t) => match cast_dtype(t as i32) {
                Ok(d) => d,
                Err(e) => return unsup(e),
            },
            None => self.dtype(x),
        };
        let k = a.int_or("k", 0)?;
        let v: Vec<f32> = (0..rows as i64)
            .flat_map(|i| (0..cols as i64).map(move |j| f32::from(u8::from(j - i == k))))
            .collect();
        let out = self.out0(n)?;
        self.out_const(out, ConstData::from_f32(&shape, v).cast(dtype))
    }

    pub(super) fn constant(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let data = if let Some(t) = a.tensor("value")? {
            decode_tensor(t)?
        } else if let Some(f) = a.float("value_float")? {
            ConstData::scalar_f32(f)
        } else if let Some(v) = a.floats("value_floats")? {
            ConstData::from_f32(&[v.len()], v)
        } else if let Some(i) = a.int("value_int")? {
            ConstData::from_i64(&[], vec![i])
        } else if let Some(v) = a.ints("value_ints")? {
            ConstData::from_i64(&[v.len()], v)
        } else if a.has("value_string") || a.has("value_strings") {
            return unsup("string constants are not supported");
        } else if a.has("sparse_value") {
            return unsup("sparse constants are not supported");
        } else {
            return bad("no value attribute");
        };
        let out = self.out0(n)?;
        self.out_const(out, data)
    }
}
