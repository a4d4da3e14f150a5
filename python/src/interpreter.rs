//! literun's interpreter for Python: owns the model bytes it runs, and exposes tensors as bytes
//! (copies, or zero-copy numpy views) that `litecvt.Interpreter` gives their dtype and shape.

use numpy::ndarray::{ArrayView1, ArrayViewMut1};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyIndexError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::ptr::NonNull;

/// A heap value that references with any lifetime may borrow: a `Box` whose contents the owner
/// frees in `Drop`, after every borrower (see [`OwnedInterpreter`]'s field order).
struct Pinned<T>(NonNull<T>);

impl<T> Pinned<T> {
    fn new(value: T) -> Pinned<T> {
        Pinned(NonNull::from(Box::leak(Box::new(value))))
    }

    /// The value for as long as the caller keeps `self` alive.
    ///
    /// # Safety
    /// The reference must not be used after `self` is dropped.
    unsafe fn get(&self) -> &'static T {
        // SAFETY: the pointer came from `Box::leak` and is freed only in `Drop`; the caller
        // promises no use of the reference after that.
        unsafe { self.0.as_ref() }
    }
}

impl<T> Drop for Pinned<T> {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `Box::leak` in `new` and is freed once, here.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

// SAFETY: a `Pinned<T>` owns its `T` exactly as a `Box<T>` does.
unsafe impl<T: Send> Send for Pinned<T> {}
// SAFETY: as for `Box<T>`: shared access to the `Pinned` gives only shared access to the `T`.
unsafe impl<T: Sync> Sync for Pinned<T> {}

/// A literun interpreter together with the model and bytes it borrows.
struct OwnedInterpreter {
    // Fields drop in declaration order: the interpreter (which borrows the model) first, then
    // the model (which borrows the bytes), then the bytes.
    interp: literun::Interpreter<'static>,
    model: Pinned<literun::Model<'static>>,
    _bytes: Pinned<literun::AlignedBytes>,
}

impl OwnedInterpreter {
    fn new(bytes: literun::AlignedBytes, threads: usize) -> Result<OwnedInterpreter, String> {
        let bytes = Pinned::new(bytes);
        // SAFETY: the model is stored beside `bytes` and dropped before it (field order), and
        // on the error path the model is never built.
        let model =
            literun::Model::from_bytes(unsafe { bytes.get() }).map_err(|e| e.to_string())?;
        let model = Pinned::new(model);
        // SAFETY: the interpreter is stored beside `model` and dropped before it (field order);
        // on the error paths no interpreter outlives this function.
        let interp = literun::Interpreter::new(unsafe { model.get() })
            .and_then(|i| i.with_threads(threads.max(1)))
            .map_err(|e| e.to_string())?;
        Ok(OwnedInterpreter {
            interp,
            model,
            _bytes: bytes,
        })
    }

    fn model(&self) -> &literun::Model<'static> {
        // SAFETY: the returned reference borrows `self`, which owns the model.
        unsafe { self.model.get() }
    }
}

/// The literun interpreter behind `litecvt.Interpreter` (tensors by their index in the model).
#[pyclass(name = "NativeInterpreter", module = "litecvt._litecvt")]
pub struct NativeInterpreter {
    inner: OwnedInterpreter,
    signature_key: Option<String>,
}

fn runtime_error(e: literun::Error) -> PyErr {
    PyRuntimeError::new_err(e.to_string())
}

impl NativeInterpreter {
    fn tensor_desc(&self, index: usize) -> PyResult<&literun::model::TensorDesc<'static>> {
        let tensors = self.inner.model().tensors();
        tensors.get(index).ok_or_else(|| {
            PyIndexError::new_err(format!(
                "tensor index {index} out of range (the model has {} tensors)",
                tensors.len()
            ))
        })
    }

    fn input_position(&self, index: usize) -> Option<usize> {
        self.inner
            .model()
            .inputs()
            .iter()
            .position(|i| i.tensor == index)
    }
}

#[pymethods]
impl NativeInterpreter {
    #[new]
    #[pyo3(signature = (model_path=None, model_content=None, num_threads=1))]
    fn new(
        model_path: Option<std::path::PathBuf>,
        model_content: Option<&[u8]>,
        num_threads: usize,
    ) -> PyResult<NativeInterpreter> {
        let bytes = match (model_path, model_content) {
            (Some(p), None) => literun::AlignedBytes::read_file(&p)
                .map_err(|e| PyValueError::new_err(e.to_string()))?,
            (None, Some(c)) => literun::AlignedBytes::from_slice(c),
            _ => {
                return Err(PyValueError::new_err(
                    "give exactly one of model_path and model_content",
                ))
            }
        };
        let signature_key = literun::schema::root_as_model(&bytes)
            .ok()
            .and_then(|m| m.signature_defs())
            .and_then(|s| s.iter().next())
            .map(|s| s.signature_key().unwrap_or("serving_default").to_string());
        let inner = OwnedInterpreter::new(bytes, num_threads)
            .map_err(|e| PyValueError::new_err(format!("cannot load the model: {e}")))?;
        Ok(NativeInterpreter {
            inner,
            signature_key,
        })
    }

    /// Tensor indices of the inputs, in order.
    fn input_indices(&self) -> Vec<usize> {
        self.inner
            .model()
            .inputs()
            .iter()
            .map(|i| i.tensor)
            .collect()
    }

    /// Tensor indices of the outputs, in order.
    fn output_indices(&self) -> Vec<usize> {
        self.inner
            .model()
            .outputs()
            .iter()
            .map(|i| i.tensor)
            .collect()
    }

    /// Signature names of the inputs (tensor names without a SignatureDef).
    fn input_names(&self) -> Vec<String> {
        let inputs = self.inner.model().inputs();
        inputs.iter().map(|i| i.name.to_string()).collect()
    }

    /// Signature names of the outputs (tensor names without a SignatureDef).
    fn output_names(&self) -> Vec<String> {
        let outputs = self.inner.model().outputs();
        outputs.iter().map(|i| i.name.to_string()).collect()
    }

    /// The key of the model's first SignatureDef, if it has one.
    #[getter]
    fn signature_key(&self) -> Option<String> {
        self.signature_key.clone()
    }

    /// Tensor count of subgraph 0.
    fn tensor_count(&self) -> usize {
        self.inner.model().tensors().len()
    }

    /// Name, shape, element type and quantization of tensor `index` (a dict).
    fn tensor_details<'py>(&self, py: Python<'py>, index: usize) -> PyResult<Bound<'py, PyDict>> {
        let t = self.tensor_desc(index)?;
        let d = PyDict::new(py);
        d.set_item("name", t.name)?;
        d.set_item("index", index)?;
        d.set_item("shape", t.shape.clone())?;
        d.set_item("dtype", t.dtype.name())?;
        let (scale, zero_point) = t.quant.map_or((0.0, 0), |q| (q.scale, q.zero_point));
        d.set_item("scale", scale)?;
        d.set_item("zero_point", zero_point)?;
        let (scales, zero_points, dim) = match &t.qparams {
            Some(q) => (
                q.scales.to_vec(),
                q.zero_points.to_vec(),
                q.quantized_dimension,
            ),
            None => (vec![], vec![], 0),
        };
        d.set_item("scales", scales)?;
        d.set_item("zero_points", zero_points)?;
        d.set_item("quantized_dimension", dim)?;
        Ok(d)
    }

    /// Copies `data` (the raw bytes of an array of the input's dtype and size) into input tensor
    /// `index`.
    fn set_tensor_bytes(&mut self, index: usize, data: PyReadonlyArray1<'_, u8>) -> PyResult<()> {
        let position = self.input_position(index).ok_or_else(|| {
            PyValueError::new_err(format!("tensor {index} is not an input of the model"))
        })?;
        let data = data.as_slice()?;
        let mut t = self
            .inner
            .interp
            .input_mut(position)
            .map_err(runtime_error)?;
        let dst = t.bytes_mut();
        if dst.len() != data.len() {
            return Err(PyValueError::new_err(format!(
                "input tensor {index}: {} bytes given, the tensor holds {}",
                data.len(),
                dst.len()
            )));
        }
        dst.copy_from_slice(data);
        Ok(())
    }

    /// Runs the model (without holding the GIL).
    fn invoke(&mut self, py: Python<'_>) -> PyResult<()> {
        let interp = &mut self.inner.interp;
        py.detach(|| interp.invoke()).map_err(runtime_error)
    }

    /// A copy of tensor `index`'s bytes.
    fn tensor_bytes<'py>(
        &self,
        py: Python<'py>,
        index: usize,
    ) -> PyResult<Bound<'py, PyArray1<u8>>> {
        self.tensor_desc(index)?;
        let t = self.inner.interp.tensor(index).map_err(runtime_error)?;
        Ok(PyArray1::from_slice(py, t.bytes()))
    }

    /// Tensor `index`'s bytes in place, as a numpy array whose base keeps this interpreter
    /// alive; writable for inputs. Its contents change with every `invoke`.
    fn tensor_view<'py>(
        slf: Bound<'py, NativeInterpreter>,
        index: usize,
    ) -> PyResult<Bound<'py, PyArray1<u8>>> {
        let owner = slf.clone().into_any();
        let mut this = slf.borrow_mut();
        this.tensor_desc(index)?;
        let view = match this.input_position(index) {
            Some(position) => {
                let mut t = this
                    .inner
                    .interp
                    .input_mut(position)
                    .map_err(runtime_error)?;
                let bytes = ArrayViewMut1::from(t.bytes_mut());
                // SAFETY: the bytes lie in the interpreter's arena, allocated once when it was
                // built and never moved or freed before the interpreter is dropped; the
                // numpy array's base (`owner`) keeps the interpreter alive as long as it.
                unsafe { PyArray1::borrow_from_array(&bytes, owner) }
            }
            None => {
                let t = this.inner.interp.tensor(index).map_err(runtime_error)?;
                let bytes = ArrayView1::from(t.bytes());
                // SAFETY: as above (arena, prepacked or model bytes, all owned by the
                // interpreter and never moved); `litecvt.Interpreter` marks this view
                // read-only.
                unsafe { PyArray1::borrow_from_array(&bytes, owner) }
            }
        };
        Ok(view)
    }
}
