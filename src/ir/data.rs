//! Element types and constant tensor data.

use ndarray::{ArrayD, IxDyn};

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    I32,
    I64,
    I8,
    /// Quantized 16-bit activations (int16x8); constants only as their quantized operands.
    I16,
    U8,
    Bool,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::I64 => 8,
            DType::F16 | DType::I16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F16 => "float16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::U8 => "uint8",
            DType::Bool => "bool",
        }
    }
}

/// The value of a constant tensor. Integers narrower than 64 bits that only index or shape things
/// are kept as i64 during import and narrowed to i32 by the exporter, as TFLite wants.
#[derive(Clone, Debug, PartialEq)]
pub enum ConstData {
    F32(ArrayD<f32>),
    F16(ArrayD<half::f16>),
    I32(ArrayD<i32>),
    I64(ArrayD<i64>),
    I8(ArrayD<i8>),
    I16(ArrayD<i16>),
    U8(ArrayD<u8>),
    Bool(ArrayD<bool>),
}

macro_rules! each {
    ($self:expr, $a:ident => $e:expr) => {
        match $self {
            ConstData::F32($a) => $e,
            ConstData::F16($a) => $e,
            ConstData::I32($a) => $e,
            ConstData::I64($a) => $e,
            ConstData::I8($a) => $e,
            ConstData::I16($a) => $e,
            ConstData::U8($a) => $e,
            ConstData::Bool($a) => $e,
        }
    };
}

#[allow(unused_macros)]
macro_rules! map_each {
    ($self:expr, $a:ident => $e:expr) => {
        match $self {
            ConstData::F32($a) => ConstData::F32($e),
            ConstData::F16($a) => ConstData::F16($e),
            ConstData::I32($a) => ConstData::I32($e),
            ConstData::I64($a) => ConstData::I64($e),
            ConstData::I8($a) => ConstData::I8($e),
            ConstData::I16($a) => ConstData::I16($e),
            ConstData::U8($a) => ConstData::U8($e),
            ConstData::Bool($a) => ConstData::Bool($e),
        }
    };
}

impl ConstData {
    pub fn dtype(&self) -> DType {
        match self {
            ConstData::F32(_) => DType::F32,
            ConstData::F16(_) => DType::F16,
            ConstData::I32(_) => DType::I32,
            ConstData::I64(_) => DType::I64,
            ConstData::I8(_) => DType::I8,
            ConstData::I16(_) => DType::I16,
            ConstData::U8(_) => DType::U8,
            ConstData::Bool(_) => DType::Bool,
        }
    }

    pub fn shape(&self) -> Vec<usize> {
        each!(self, a => a.shape().to_vec())
    }

    pub fn len(&self) -> usize {
        each!(self, a => a.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn scalar_f32(v: f32) -> ConstData {
        ConstData::F32(ArrayD::from_elem(IxDyn(&[]), v))
    }

    pub fn from_f32(shape: &[usize], v: Vec<f32>) -> ConstData {
        ConstData::F32(ArrayD::from_shape_vec(IxDyn(shape), v).expect("shape matches data"))
    }

    pub fn from_i64(shape: &[usize], v: Vec<i64>) -> ConstData {
        ConstData::I64(ArrayD::from_shape_vec(IxDyn(shape), v).expect("shape matches data"))
    }

    pub fn from_i32(shape: &[usize], v: Vec<i32>) -> ConstData {
        ConstData::I32(ArrayD::from_shape_vec(IxDyn(shape), v).expect("shape matches data"))
    }

    /// The values as f32 (integers converted), in row-major order.
    pub fn to_f32_vec(&self) -> Vec<f32> {
        match self {
            ConstData::F32(a) => a.iter().copied().collect(),
            ConstData::F16(a) => a.iter().map(|x| x.to_f32()).collect(),
            ConstData::I32(a) => a.iter().map(|&x| x as f32).collect(),
            ConstData::I64(a) => a.iter().map(|&x| x as f32).collect(),
            ConstData::I8(a) => a.iter().map(|&x| x as f32).collect(),
            ConstData::I16(a) => a.iter().map(|&x| x as f32).collect(),
            ConstData::U8(a) => a.iter().map(|&x| x as f32).collect(),
            ConstData::Bool(a) => a.iter().map(|&x| x as u8 as f32).collect(),
        }
    }

    /// The values as i64 (floats truncated), in row-major order.
    pub fn to_i64_vec(&self) -> Vec<i64> {
        match self {
            ConstData::F32(a) => a.iter().map(|&x| x as i64).collect(),
            ConstData::F16(a) => a.iter().map(|x| x.to_f32() as i64).collect(),
            ConstData::I32(a) => a.iter().map(|&x| x as i64).collect(),
            ConstData::I64(a) => a.iter().copied().collect(),
            ConstData::I8(a) => a.iter().map(|&x| x as i64).collect(),
            ConstData::I16(a) => a.iter().map(|&x| x as i64).collect(),
            ConstData::U8(a) => a.iter().map(|&x| x as i64).collect(),
            ConstData::Bool(a) => a.iter().map(|&x| x as i64).collect(),
        }
    }

    /// Converts to another element type (float→int truncates toward zero, as ONNX Cast does).
    pub fn cast(&self, to: DType) -> ConstData {
        let shape = self.shape();
        match to {
            DType::F32 => ConstData::from_f32(&shape, self.to_f32_vec()),
            DType::F16 => ConstData::F16(
                ArrayD::from_shape_vec(
                    IxDyn(&shape),
                    self.to_f32_vec()
                        .into_iter()
                        .map(half::f16::from_f32)
                        .collect(),
                )
                .expect("shape matches"),
            ),
            DType::I64 => ConstData::from_i64(&shape, self.to_i64_vec()),
            DType::I32 => ConstData::from_i32(
                &shape,
                self.to_i64_vec().into_iter().map(|x| x as i32).collect(),
            ),
            DType::I8 => ConstData::I8(
                ArrayD::from_shape_vec(
                    IxDyn(&shape),
                    self.to_i64_vec().into_iter().map(|x| x as i8).collect(),
                )
                .expect("shape matches"),
            ),
            DType::I16 => ConstData::I16(
                ArrayD::from_shape_vec(
                    IxDyn(&shape),
                    self.to_i64_vec().into_iter().map(|x| x as i16).collect(),
                )
                .expect("shape matches"),
            ),
            DType::U8 => ConstData::U8(
                ArrayD::from_shape_vec(
                    IxDyn(&shape),
                    self.to_i64_vec().into_iter().map(|x| x as u8).collect(),
                )
                .expect("shape matches"),
            ),
            DType::Bool => {
                let v = match self {
                    ConstData::F32(a) => a.iter().map(|&x| x != 0.0).collect(),
                    other => other.to_i64_vec().into_iter().map(|x| x != 0).collect(),
                };
                ConstData::Bool(ArrayD::from_shape_vec(IxDyn(&shape), v).expect("shape matches"))
            }
        }
    }

    /// Reorders axes: output axis i is input axis `perm[i]`.
    pub fn permute(&self, perm: &[usize]) -> ConstData {
        map_each!(self, a => a.view().permuted_axes(IxDyn(perm)).as_standard_layout().into_owned())
    }

    /// The rows (indices of axis 0) `rows` names, in that order.
    pub fn select_rows(&self, rows: &[usize]) -> ConstData {
        map_each!(self, a => a.select(ndarray::Axis(0), rows))
    }

    /// Same data, new shape (element count must match).
    pub fn reshape(&self, shape: &[usize]) -> ConstData {
        map_each!(self, a => a.as_standard_layout().into_owned().into_shape_with_order(IxDyn(shape)).expect("reshape keeps element count"))
    }

    /// Little-endian bytes in row-major order, as TFLite buffers store them.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        match self {
            ConstData::F32(a) => le_bytes(a, f32::to_le_bytes),
            ConstData::F16(a) => le_bytes(a, |x| x.to_bits().to_le_bytes()),
            ConstData::I32(a) => le_bytes(a, i32::to_le_bytes),
            ConstData::I64(a) => le_bytes(a, i64::to_le_bytes),
            ConstData::I8(a) => le_bytes(a, i8::to_le_bytes),
            ConstData::I16(a) => le_bytes(a, i16::to_le_bytes),
            ConstData::U8(a) => a.iter().copied().collect(),
            ConstData::Bool(a) => a.iter().map(|&x| x as u8).collect(),
        }
    }

    /// [`Self::to_le_bytes`], in place where the array's memory already is those bytes
    /// (contiguous, on a little-endian machine).
    pub fn as_le_bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        if cfg!(target_endian = "little") {
            let bytes: Option<&[u8]> = match self {
                ConstData::F32(a) => a.as_slice().map(bytemuck::cast_slice),
                ConstData::I32(a) => a.as_slice().map(bytemuck::cast_slice),
                ConstData::I64(a) => a.as_slice().map(bytemuck::cast_slice),
                ConstData::I8(a) => a.as_slice().map(bytemuck::cast_slice),
                ConstData::I16(a) => a.as_slice().map(bytemuck::cast_slice),
                ConstData::U8(a) => a.as_slice(),
                ConstData::F16(_) | ConstData::Bool(_) => None,
            };
            if let Some(b) = bytes {
                return std::borrow::Cow::Borrowed(b);
            }
        }
        std::borrow::Cow::Owned(self.to_le_bytes())
    }

    pub fn as_f32(&self) -> Option<&ArrayD<f32>> {
        match self {
            ConstData::F32(a) => Some(a),
            _ => None,
        }
    }

    /// True when every value is finite (always true for integers).
    pub fn all_finite(&self) -> bool {
        match self {
            ConstData::F32(a) => a.iter().all(|x| x.is_finite()),
            ConstData::F16(a) => a.iter().all(|x| x.is_finite()),
            _ => true,
        }
    }
}

/// Every value of `a` in logical (row-major) order, each as the `N` bytes `bytes` gives: one
/// allocation and a slice walk for the usual contiguous array (a 44 MiB model's weights are
/// written several times while quantizing).
fn le_bytes<T: Copy, const N: usize>(a: &ArrayD<T>, bytes: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    let mut out = vec![0u8; a.len() * N];
    match a.as_slice() {
        Some(values) => {
            for (o, &x) in out.chunks_exact_mut(N).zip(values) {
                o.copy_from_slice(&bytes(x));
            }
        }
        None => {
            for (o, &x) in out.chunks_exact_mut(N).zip(a.iter()) {
                o.copy_from_slice(&bytes(x));
            }
        }
    }
    out
}
