//! Views of the model's input, output and intermediate tensors while an interpreter holds them, and
//! the interpreter's accessors that give them.
// With some `ops-*` features off, helpers only the left-out operators use are unused; without
// `error-details`, values only error messages mention.
#![cfg_attr(
    not(all(feature = "all-ops", feature = "error-details")),
    allow(
        dead_code,
        unused_imports,
        unused_variables,
        unused_macros,
        unreachable_code
    )
)]

use crate::error::format;
use crate::model::{DType, TensorInfo};
use crate::ops::buffers::Loc;

use crate::error::{Error, Result};

/// A read-only view of a tensor.
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    pub(crate) name: &'a str,
    pub(crate) shape: &'a [usize],
    pub(crate) dtype: DType,
    pub(crate) data: &'a [u8],
}

/// A writable view of a model input.
#[derive(Debug)]
pub struct TensorMut<'a> {
    pub(crate) name: &'a str,
    pub(crate) shape: &'a [usize],
    pub(crate) dtype: DType,
    pub(crate) data: &'a mut [u8],
}

pub(crate) fn typed<T: bytemuck::Pod>(data: &[u8], dtype: DType, want: DType) -> Result<&[T]> {
    if dtype != want {
        return Err(Error::Tensor(format!(
            "tensor is {}, not {}",
            dtype.name(),
            want.name()
        )));
    }
    bytemuck::try_cast_slice(data).map_err(|_| Error::Misaligned)
}

pub(crate) fn typed_mut<T: bytemuck::Pod>(
    data: &mut [u8],
    dtype: DType,
    want: DType,
) -> Result<&mut [T]> {
    if dtype != want {
        return Err(Error::Tensor(format!(
            "tensor is {}, not {}",
            dtype.name(),
            want.name()
        )));
    }
    bytemuck::try_cast_slice_mut(data).map_err(|_| Error::Misaligned)
}

macro_rules! accessors {
    ($($name:ident, $name_mut:ident: $t:ty = $dt:expr;)*) => {
        impl<'a> TensorRef<'a> {$(
            #[doc = concat!("The data as `", stringify!($t), "` (error if the type differs).")]
            pub fn $name(&self) -> Result<&'a [$t]> { typed(self.data, self.dtype, $dt) }
        )*}
        impl<'a> TensorMut<'a> {$(
            #[doc = concat!("The data as `", stringify!($t), "` (error if the type differs).")]
            pub fn $name(&self) -> Result<&[$t]> { typed(self.data, self.dtype, $dt) }
            #[doc = concat!("The data as mutable `", stringify!($t), "`.")]
            pub fn $name_mut(&mut self) -> Result<&mut [$t]> { typed_mut(self.data, self.dtype, $dt) }
        )*}
    };
}

accessors! {
    as_f32, as_f32_mut: f32 = DType::F32;
    as_i32, as_i32_mut: i32 = DType::I32;
    as_i64, as_i64_mut: i64 = DType::I64;
    as_u8, as_u8_mut: u8 = DType::U8;
    as_i8, as_i8_mut: i8 = DType::I8;
    as_bool, as_bool_mut: u8 = DType::Bool;
}

#[cfg(feature = "ops-fft")]
impl<'a> TensorRef<'a> {
    /// The data of a COMPLEX64 tensor as `[real, imaginary]` pairs (error if the type differs).
    pub fn as_complex64(&self) -> Result<&'a [[f32; 2]]> {
        typed(self.data, self.dtype, DType::Complex64)
    }
}

#[cfg(feature = "ops-fft")]
impl TensorMut<'_> {
    /// The data of a COMPLEX64 tensor as `[real, imaginary]` pairs (error if the type differs).
    pub fn as_complex64(&self) -> Result<&[[f32; 2]]> {
        typed(self.data, self.dtype, DType::Complex64)
    }

    /// The data of a COMPLEX64 tensor as mutable `[real, imaginary]` pairs.
    pub fn as_complex64_mut(&mut self) -> Result<&mut [[f32; 2]]> {
        typed_mut(self.data, self.dtype, DType::Complex64)
    }
}

impl<'a> TensorRef<'a> {
    /// Name (signature name for model inputs/outputs when present).
    pub fn name(&self) -> &'a str {
        self.name
    }
    pub fn shape(&self) -> &'a [usize] {
        self.shape
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Raw little-endian bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.data
    }
}

impl TensorMut<'_> {
    pub fn name(&self) -> &str {
        self.name
    }
    pub fn shape(&self) -> &[usize] {
        self.shape
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Raw little-endian bytes.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.data
    }
    /// Copies `values` in (error if the type or length differs).
    pub fn copy_from_f32(&mut self, values: &[f32]) -> Result<()> {
        let d = self.as_f32_mut()?;
        if d.len() != values.len() {
            return Err(Error::Tensor(format!(
                "expected {} values, got {}",
                d.len(),
                values.len()
            )));
        }
        d.copy_from_slice(values);
        Ok(())
    }
}

/// The interpreter's inputs and outputs, and its other tensors by index.
impl<'m> super::Interpreter<'m> {
    /// Model inputs.
    pub fn inputs(&self) -> &[TensorInfo<'m>] {
        self.model.inputs()
    }

    /// Model outputs.
    pub fn outputs(&self) -> &[TensorInfo<'m>] {
        self.model.outputs()
    }

    pub(super) fn tensor_bytes(&self, t: usize) -> &[u8] {
        match self.locs[t] {
            Loc::Empty => &[],
            Loc::Const => self.model.tensors()[t].data.unwrap_or(&[]),
            Loc::Arena { off, len } => &self.arena.bytes()[off..off + len],
            Loc::Packed { off, len } => {
                &bytemuck::cast_slice::<u128, u8>(&self.packed)[off..off + len]
            }
        }
    }

    /// Input `i` for writing. Write every input before each [`Interpreter::invoke`](Self::invoke): the memory
    /// plan lets later tensors reuse an input's bytes once its last reader has run, so after an
    /// invoke the inputs no longer hold what was written.
    pub fn input_mut(&mut self, i: usize) -> Result<TensorMut<'_>> {
        let info = self.model.inputs().get(i).ok_or_else(|| {
            Error::Tensor(format!(
                "no input {i} (model has {})",
                self.model.inputs().len()
            ))
        })?;
        let data: &mut [u8] = match self.locs[info.tensor] {
            Loc::Arena { off, len } => &mut self.arena.bytes_mut()[off..off + len],
            _ => &mut [],
        };
        Ok(TensorMut {
            name: info.name,
            shape: &info.shape,
            dtype: info.dtype,
            data,
        })
    }

    /// Input `i` as `f32` for writing.
    pub fn input_f32_mut(&mut self, i: usize) -> Result<&mut [f32]> {
        let info = self
            .model
            .inputs()
            .get(i)
            .ok_or_else(|| Error::Tensor(format!("no input {i}")))?;
        let dtype = info.dtype;
        let data: &mut [u8] = match self.locs[info.tensor] {
            Loc::Arena { off, len } => &mut self.arena.bytes_mut()[off..off + len],
            _ => &mut [],
        };
        typed_mut(data, dtype, DType::F32)
    }

    /// The input called `name`: its signature key or its tensor's name in the file (see
    /// [`Model::input_index`](crate::Model::input_index)).
    pub fn input_by_name(&mut self, name: &str) -> Result<TensorMut<'_>> {
        let i = self
            .model
            .input_index(name)
            .ok_or_else(|| Error::Tensor(format!("no input named {name:?}")))?;
        self.input_mut(i)
    }

    /// Output `i` (valid after [`invoke`](Self::invoke)).
    pub fn output(&self, i: usize) -> Result<TensorRef<'_>> {
        let info = self.model.outputs().get(i).ok_or_else(|| {
            Error::Tensor(format!(
                "no output {i} (model has {})",
                self.model.outputs().len()
            ))
        })?;
        Ok(TensorRef {
            name: info.name,
            shape: &info.shape,
            dtype: info.dtype,
            data: self.tensor_bytes(info.tensor),
        })
    }

    /// The output called `name`: its signature key or its tensor's name in the file (see
    /// [`Model::output_index`](crate::Model::output_index)).
    pub fn output_by_name(&self, name: &str) -> Result<TensorRef<'_>> {
        let i = self
            .model
            .output_index(name)
            .ok_or_else(|| Error::Tensor(format!("no output named {name:?}")))?;
        self.output(i)
    }

    /// Any tensor of subgraph 0 by index (intermediate values may have been overwritten; a
    /// constant dequantized only for kernels that prepacked it is not kept and reads as empty).
    pub fn tensor(&self, t: usize) -> Result<TensorRef<'_>> {
        let d = self
            .model
            .tensors()
            .get(t)
            .ok_or_else(|| Error::Tensor(format!("no tensor {t}")))?;
        Ok(TensorRef {
            name: d.name,
            shape: &d.shape,
            dtype: d.dtype,
            data: self.tensor_bytes(t),
        })
    }
}
