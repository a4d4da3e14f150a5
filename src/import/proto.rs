//! Decoding ONNX protobuf pieces: TensorProto → `ConstData`, typed attribute access, dtypes.

use crate::ir::{ConstData, DType};
use ndarray::{ArrayD, IxDyn};
use tract_onnx::pb::{attribute_proto::AttributeType, NodeProto, TensorProto};

/// Largest element count of any tensor the importer accepts (shapes beyond are errors).
pub const MAX_ELEMENTS: usize = 1 << 32;
/// Largest value accepted for a size-like attribute (kernel, stride, pad, repeat...).
pub const MAX_ATTR: i64 = 1 << 31;

// ONNX TensorProto.DataType values.
pub const ONNX_FLOAT: i32 = 1;
pub const ONNX_UINT8: i32 = 2;
pub const ONNX_INT8: i32 = 3;
pub const ONNX_UINT16: i32 = 4;
pub const ONNX_INT16: i32 = 5;
pub const ONNX_INT32: i32 = 6;
pub const ONNX_INT64: i32 = 7;
pub const ONNX_BOOL: i32 = 9;
pub const ONNX_FLOAT16: i32 = 10;
pub const ONNX_DOUBLE: i32 = 11;
pub const ONNX_UINT32: i32 = 12;
pub const ONNX_UINT64: i32 = 13;

/// The name of an ONNX element type, for messages.
pub fn onnx_type_name(t: i32) -> String {
    tract_onnx::pb::tensor_proto::DataType::try_from(t)
        .map(|d| d.as_str_name().to_string())
        .unwrap_or_else(|_| format!("type {t}"))
}

/// The IR dtype a runtime ONNX tensor of element type `t` has.
pub fn runtime_dtype(t: i32) -> Result<DType, String> {
    Ok(match t {
        ONNX_FLOAT => DType::F32,
        ONNX_FLOAT16 => DType::F16,
        ONNX_INT32 => DType::I32,
        ONNX_INT64 => DType::I64,
        ONNX_INT8 => DType::I8,
        ONNX_UINT8 => DType::U8,
        ONNX_BOOL => DType::Bool,
        _ => {
            return Err(format!(
                "element type {} is not supported",
                onnx_type_name(t)
            ))
        }
    })
}

/// The IR dtype of an ONNX Cast's `to` (double narrows to float32).
pub fn cast_dtype(t: i32) -> Result<DType, String> {
    match t {
        ONNX_DOUBLE => Ok(DType::F32),
        _ => runtime_dtype(t),
    }
}

/// Checked product of a shape, bounded by [`MAX_ELEMENTS`].
pub fn checked_elements(shape: &[usize]) -> Result<usize, String> {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= MAX_ELEMENTS)
        .ok_or_else(|| format!("shape {shape:?} is too large"))
}

fn array<T>(shape: &[usize], v: Vec<T>) -> Result<ArrayD<T>, String> {
    ArrayD::from_shape_vec(IxDyn(shape), v).map_err(|e| format!("bad tensor data: {e}"))
}

/// Decodes little-endian fixed-size elements from `raw`.
fn from_raw<T, const N: usize>(
    raw: &[u8],
    count: usize,
    f: impl Fn([u8; N]) -> T,
) -> Result<Vec<T>, String> {
    if raw.len() != count.checked_mul(N).ok_or("tensor too large")? {
        return Err(format!(
            "raw_data has {} bytes, expected {} ({} elements of {} bytes)",
            raw.len(),
            count * N,
            count,
            N
        ));
    }
    Ok(raw
        .chunks_exact(N)
        .map(|c| {
            let mut b = [0u8; N];
            b.copy_from_slice(c);
            f(b)
        })
        .collect())
}

fn typed<S: Copy, T>(
    data: &[S],
    count: usize,
    field: &str,
    f: impl Fn(S) -> T,
) -> Result<Vec<T>, String> {
    if data.len() != count {
        return Err(format!(
            "{field} has {} elements, expected {count}",
            data.len()
        ));
    }
    Ok(data.iter().map(|&v| f(v)).collect())
}

/// Decodes a TensorProto's values. FLOAT16 and DOUBLE become F32; narrow unsigned/16-bit integer
/// types become I64.
pub fn decode_tensor(t: &TensorProto) -> Result<ConstData, String> {
    if t.data_location == Some(1) || !t.external_data.is_empty() {
        return Err(format!(
            "tensor '{}' stores its data in an external file, which is not supported; \
             save the model with the weights embedded",
            t.name
        ));
    }
    if t.segment.is_some() {
        return Err(format!(
            "tensor '{}' is segmented, which is not supported",
            t.name
        ));
    }
    let shape = t
        .dims
        .iter()
        .map(|&d| {
            usize::try_from(d)
                .map_err(|_| format!("tensor '{}' has negative dimension {d}", t.name))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let n = checked_elements(&shape).map_err(|e| format!("tensor '{}': {e}", t.name))?;
    let raw = !t.raw_data.is_empty() || n == 0;
    let r = &t.raw_data;
    let ctx = |e: String| format!("tensor '{}' ({}): {e}", t.name, onnx_type_name(t.data_type));
    let data = match t.data_type {
        ONNX_FLOAT => ConstData::F32(array(
            &shape,
            if raw {
                from_raw(r, n, f32::from_le_bytes)
            } else {
                typed(&t.float_data, n, "float_data", |v| v)
            }
            .map_err(ctx)?,
        )?),
        ONNX_DOUBLE => ConstData::F32(array(
            &shape,
            if raw {
                from_raw(r, n, |b| f64::from_le_bytes(b) as f32)
            } else {
                typed(&t.double_data, n, "double_data", |v| v as f32)
            }
            .map_err(ctx)?,
        )?),
        ONNX_FLOAT16 => ConstData::F32(array(
            &shape,
            if raw {
                from_raw(r, n, |b| half::f16::from_le_bytes(b).to_f32())
            } else {
                typed(&t.int32_data, n, "int32_data", |v| {
                    half::f16::from_bits(v as u16).to_f32()
                })
            }
            .map_err(ctx)?,
        )?),
        ONNX_INT8 => ConstData::I8(array(
            &shape,
            if raw {
                from_raw(r, n, |b: [u8; 1]| b[0] as i8)
            } else {
                typed(&t.int32_data, n, "int32_data", |v| v as i8)
            }
            .map_err(ctx)?,
        )?),
        ONNX_UINT8 => ConstData::U8(array(
            &shape,
            if raw {
                from_raw(r, n, |b: [u8; 1]| b[0])
            } else {
                typed(&t.int32_data, n, "int32_data", |v| v as u8)
            }
            .map_err(ctx)?,
        )?),
        ONNX_BOOL => ConstData::Bool(array(
            &shape,
            if raw {
                from_raw(r, n, |b: [u8; 1]| b[0] != 0)
            } else {
                typed(&t.int32_data, n, "int32_data", |v| v != 0)
            }
            .map_err(ctx)?,
        )?),
        ONNX_INT32 => ConstData::I32(array(
            &shape,
            if raw {
                from_raw(r, n, i32::from_le_bytes)
            } else {
                typed(&t.int32_data, n, "int32_data", |v| v)
            }
            .map_err(ctx)?,
        )?),
        ONNX_INT64 => ConstData::I64(array(
            &shape,
            if raw {
                from_raw(r, n, i64::from_le_bytes)
            } else {
                typed(&t.int64_data, n, "int64_data", |v| v)
            }
            .map_err(ctx)?,
        )?),
        ONNX_INT16 => ConstData::I64(array(
            &shape,
            if raw {
                from_raw(r, n, |b| i16::from_le_bytes(b) as i64)
            } else {
                typed(&t.int32_data, n, "int32_data", |v| v as i16 as i64)
            }
            .map_err(ctx)?,
        )?),
        ONNX_UINT16 => ConstData::I64(array(
            &shape,
            if raw {
                from_raw(r, n, |b| u16::from_le_bytes(b) as i64)
            } else {
                typed(&t.int32_data, n, "int32_data", |v| v as u16 as i64)
            }
            .map_err(ctx)?,
        )?),
        ONNX_UINT32 => ConstData::I64(array(
            &shape,
            if raw {
                from_raw(r, n, |b| u32::from_le_bytes(b) as i64)
            } else {
                typed(&t.uint64_data, n, "uint64_data", |v| v as u32 as i64)
            }
            .map_err(ctx)?,
        )?),
        ONNX_UINT64 => ConstData::I64(array(
            &shape,
            if raw {
                from_raw(r, n, |b| u64::from_le_bytes(b) as i64)
            } else {
                typed(&t.uint64_data, n, "uint64_data", |v| v as i64)
            }
            .map_err(ctx)?,
        )?),
        other => {
            return Err(format!(
                "tensor '{}' has unsupported element type {}",
                t.name,
                onnx_type_name(other)
            ))
        }
    };
    Ok(data)
}

/// Typed access to a node's attributes; wrong types are errors.
pub struct Attrs<'a> {
    node: &'a NodeProto,
}

impl<'a> Attrs<'a> {
    pub fn new(node: &'a NodeProto) -> Self {
        Attrs { node }
    }

    fn get(
        &self,
        name: &str,
        want: AttributeType,
    ) -> Result<Option<&'a tract_onnx::pb::AttributeProto>, String> {
        let Some(a) = self.node.attribute.iter().find(|a| a.name == name) else {
            return Ok(None);
        };
        if a.r#type != want as i32 && a.r#type != AttributeType::Undefined as i32 {
            let got = AttributeType::try_from(a.r#type)
                .map(|t| t.as_str_name().to_string())
                .unwrap_or_else(|_| format!("type {}", a.r#type));
            return Err(format!(
                "attribute '{name}' must be {}, got {got}",
                want.as_str_name()
            ));
        }
        Ok(Some(a))
    }

    pub fn has(&self, name: &str) -> bool {
        self.node.attribute.iter().any(|a| a.name == name)
    }

    pub fn int(&self, name: &str) -> Result<Option<i64>, String> {
        Ok(self.get(name, AttributeType::Int)?.map(|a| a.i))
    }

    pub fn int_or(&self, name: &str, default: i64) -> Result<i64, String> {
        Ok(self.int(name)?.unwrap_or(default))
    }

    pub fn float(&self, name: &str) -> Result<Option<f32>, String> {
        Ok(self.get(name, AttributeType::Float)?.map(|a| a.f))
    }

    pub fn float_or(&self, name: &str, default: f32) -> Result<f32, String> {
        Ok(self.float(name)?.unwrap_or(default))
    }

    pub fn string(&self, name: &str) -> Result<Option<String>, String> {
        self.get(name, AttributeType::String)?
            .map(|a| {
                String::from_utf8(a.s.clone())
                    .map_err(|_| format!("attribute '{name}' is not valid UTF-8"))
            })
            .transpose()
    }

    pub fn string_or(&self, name: &str, default: &str) -> Result<String, String> {
        Ok(self.string(name)?.unwrap_or_else(|| default.to_string()))
    }

    pub fn ints(&self, name: &str) -> Result<Option<Vec<i64>>, String> {
        Ok(self.get(name, AttributeType::Ints)?.map(|a| a.ints.clone()))
    }

    pub fn strings(&self, name: &str) -> Result<Option<Vec<String>>, String> {
        self.get(name, AttributeType::Strings)?
            .map(|a| {
                a.strings
                    .iter()
                    .map(|s| {
                        String::from_utf8(s.clone())
                            .map_err(|_| format!("attribute '{name}' is not valid UTF-8"))
                    })
                    .collect()
            })
            .transpose()
    }

    pub fn floats(&self, name: &str) -> Result<Option<Vec<f32>>, String> {
        Ok(self
            .get(name, AttributeType::Floats)?
            .map(|a| a.floats.clone()))
    }

    pub fn tensor(&self, name: &str) -> Result<Option<&'a TensorProto>, String> {
        match self.get(name, AttributeType::Tensor)? {
            None => Ok(None),
            Some(a) => {
                a.t.as_ref()
                    .map(Some)
                    .ok_or_else(|| format!("attribute '{name}' has no tensor"))
            }
        }
    }
}

/// A size-like integer (kernel, stride, pad...) as usize, bounded by [`MAX_ATTR`].
pub fn size_value(v: i64, what: &str) -> Result<usize, String> {
    if (0..=MAX_ATTR).contains(&v) {
        Ok(v as usize)
    } else {
        Err(format!("{what} {v} is out of range"))
    }
}

/// Like [`size_value`], for every element.
pub fn size_values(v: &[i64], what: &str) -> Result<Vec<usize>, String> {
    v.iter().map(|&x| size_value(x, what)).collect()
}

/// A tensor dimension as usize, bounded by [`MAX_ELEMENTS`].
pub fn dim_value(v: i64, what: &str) -> Result<usize, String> {
    if (0..=MAX_ELEMENTS as i64).contains(&v) {
        Ok(v as usize)
    } else {
        Err(format!("{what} {v} is out of range"))
    }
}

/// Like [`dim_value`], for every element.
pub fn dim_values(v: &[i64], what: &str) -> Result<Vec<usize>, String> {
    v.iter().map(|&x| dim_value(x, what)).collect()
}

/// Normalizes a possibly negative axis for a tensor of `rank`.
pub fn norm_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r).contains(&a) {
        Ok(a as usize)
    } else {
        Err(format!("axis {axis} out of range for rank {rank}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(dt: i32, dims: &[i64]) -> TensorProto {
        TensorProto {
            name: "w".into(),
            data_type: dt,
            dims: dims.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn decodes_raw_and_typed() {
        let mut a = t(ONNX_FLOAT, &[2]);
        a.raw_data = [1.5f32, -2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(
            decode_tensor(&a).unwrap(),
            ConstData::from_f32(&[2], vec![1.5, -2.0])
        );
        let mut b = t(ONNX_INT64, &[]);
        b.int64_data = vec![7];
        assert_eq!(
            decode_tensor(&b).unwrap(),
            ConstData::from_i64(&[], vec![7])
        );
        let mut h = t(ONNX_FLOAT16, &[1]);
        h.raw_data = half::f16::from_f32(0.5).to_le_bytes().to_vec();
        assert_eq!(
            decode_tensor(&h).unwrap(),
            ConstData::from_f32(&[1], vec![0.5])
        );
        let mut d = t(ONNX_DOUBLE, &[1]);
        d.double_data = vec![2.25];
        assert_eq!(
            decode_tensor(&d).unwrap(),
            ConstData::from_f32(&[1], vec![2.25])
        );
        let mut bo = t(ONNX_BOOL, &[2]);
        bo.raw_data = vec![1, 0];
        assert_eq!(decode_tensor(&bo).unwrap().to_i64_vec(), vec![1, 0]);
    }

    #[test]
    fn rejects_bad_sizes_without_allocating() {
        let mut a = t(ONNX_FLOAT, &[1 << 40, 1 << 30]);
        a.raw_data = vec![0; 8];
        assert!(decode_tensor(&a).is_err());
        let mut b = t(ONNX_FLOAT, &[3]);
        b.raw_data = vec![0; 8];
        assert!(decode_tensor(&b)
            .unwrap_err()
            .contains("raw_data has 8 bytes"));
        let c = t(ONNX_FLOAT, &[-1]);
        assert!(decode_tensor(&c).is_err());
        let mut e = t(ONNX_FLOAT, &[1]);
        e.data_location = Some(1);
        assert!(decode_tensor(&e).unwrap_err().contains("external"));
        let s = t(8, &[1]);
        assert!(decode_tensor(&s).unwrap_err().contains("STRING"));
    }
}
