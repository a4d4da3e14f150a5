//! literun's interpreter for Python: owns the model bytes it runs, and exposes tensors as bytes
//! (copies, or zero-copy numpy views) that `litecvt.Interpreter` gives their dtype and shape.

use numpy::ndarray::{ArrayView1, ArrayViewMut1};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyIndexError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyWeakrefMethods, PyWeakrefReference};
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

/// A literun interpreter together with the model and bytes it borrows. A model that cannot be
/// prepared with the shapes in its file but has inputs with -1 dimensions is held unprepared
/// until `resize_input` gives it shapes it can run with (LiteRT's `resize_tensor_input` before
/// `allocate_tensors`).
struct OwnedInterpreter {
    // Fields drop in declaration order: the interpreter (which borrows `resized` or `model`)
    // first, then the models (which borrow the bytes), then the bytes.
    interp: Option<literun::Interpreter<'static>>,
    /// The file's model with the input shapes given while it was unprepared.
    resized: Option<Pinned<literun::Model<'static>>>,
    model: Pinned<literun::Model<'static>>,
    _bytes: Pinned<literun::AlignedBytes>,
    /// Why the model is not prepared (while `interp` is `None`).
    unprepared: String,
    threads: usize,
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
        let (interp, unprepared) = match prepare(unsafe { model.get() }, threads) {
            Ok(i) => (Some(i), String::new()),
            Err(e) if has_dynamic_input(unsafe { model.get() }) => (None, e),
            Err(e) => return Err(e),
        };
        Ok(OwnedInterpreter {
            interp,
            resized: None,
            model,
            _bytes: bytes,
            unprepared,
            threads,
        })
    }

    /// The model being run: the file's, with the input shapes of the last resize.
    fn model(&self) -> &literun::Model<'_> {
        match &self.interp {
            Some(i) => i.model(),
            // SAFETY: the returned reference borrows `self`, which owns both models.
            None => unsafe { self.resized.as_ref().unwrap_or(&self.model).get() },
        }
    }

    /// The prepared interpreter, or why there is none.
    fn interp(&mut self) -> PyResult<&mut literun::Interpreter<'static>> {
        let why = &self.unprepared;
        self.interp.as_mut().ok_or_else(|| {
            PyRuntimeError::new_err(format!(
                "the model cannot run with its inputs' shapes ({why}); resize them with \
                 resize_tensor_input"
            ))
        })
    }

    /// Resizes input `position`. A prepared interpreter resizes and prepares again at once (an
    /// error leaves it as it was); an unprepared model takes the new shape and is prepared
    /// when it can be, else keeps the reason for `interp`.
    fn resize_input(&mut self, position: usize, shape: &[usize]) -> Result<(), String> {
        if let Some(i) = &mut self.interp {
            return i.resize_input(position, shape).map_err(|e| e.to_string());
        }
        // SAFETY: `base` borrows a model `self` owns; the resized model it makes borrows only
        // the bytes (not `base`), and the old `resized` is dropped below only after nothing
        // borrows it (there is no interpreter).
        let base = unsafe { self.resized.as_ref().unwrap_or(&self.model).get() };
        let new = Pinned::new(base.resized(position, shape).map_err(|e| e.to_string())?);
        // SAFETY: the interpreter is stored beside `new` (in `resized`) and dropped before it
        // (field order, and `resize_input` replaces `resized` only while there is none).
        match prepare(unsafe { new.get() }, self.threads) {
            Ok(i) => self.interp = Some(i),
            Err(e) => self.unprepared = e,
        }
        self.resized = Some(new);
        Ok(())
    }
}

fn prepare(
    model: &'static literun::Model<'static>,
    threads: usize,
) -> Result<literun::Interpreter<'static>, String> {
    literun::Interpreter::new(model)
        .and_then(|i| i.with_threads(threads.max(1)))
        .map_err(|e| e.to_string())
}

/// Whether an input of `model` has -1 dimensions (its shapes may be given at run time).
fn has_dynamic_input(model: &literun::Model<'_>) -> bool {
    model.inputs().iter().any(|i| {
        model.tensors()[i.tensor]
            .shape_signature
            .as_ref()
            .is_some_and(|s| s.contains(&-1))
    })
}

/// The literun interpreter behind `litecvt.Interpreter` (tensors by their index in the model).
/// Used from the Python thread that made it, as LiteRT's interpreter is (`unsendable`: literun's
/// interpreter keeps LSTM/SVDF state in cells, so it is `Send` but not `Sync`); `invoke` still
/// releases the GIL.
#[pyclass(name = "NativeInterpreter", module = "litecvt._litecvt", unsendable)]
pub struct NativeInterpreter {
    inner: OwnedInterpreter,
    signature_key: Option<String>,
    /// The arrays `tensor_view` returned, weakly: resizing may move the arena they view, so it
    /// is refused while any is alive (numpy views of them keep them alive).
    views: Vec<Py<PyWeakrefReference>>,
}

fn runtime_error(e: literun::Error) -> PyErr {
    PyRuntimeError::new_err(e.to_string())
}

impl NativeInterpreter {
    fn tensor_desc(&self, index: usize) -> PyResult<&literun::model::TensorDesc<'_>> {
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
            views: Vec::new(),
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
        d.set_item("shape_signature", t.shape_signature.clone())?;
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
            .interp()?
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

    /// Gives input `position` (its place among the inputs) the shape `shape` and prepares the
    /// model again for it: only dimensions the input's `shape_signature` marks -1 may change.
    /// Refused while an array `tensor_view` returned is alive (the arena may move).
    fn resize_input(&mut self, py: Python<'_>, position: usize, shape: Vec<usize>) -> PyResult<()> {
        if self.views.iter().any(|w| w.bind(py).upgrade().is_some()) {
            return Err(PyRuntimeError::new_err(
                "there is at least 1 reference to internal data in the interpreter in the form \
                 of a numpy array (from tensor()): drop it before resizing",
            ));
        }
        self.views.clear();
        self.inner
            .resize_input(position, &shape)
            .map_err(PyValueError::new_err)
    }

    /// Raises the reason when the model cannot run with its inputs' current shapes.
    fn allocate(&mut self) -> PyResult<()> {
        self.inner.interp().map(|_| ())
    }

    /// Restores every resource variable to its state before the first `invoke`.
    fn reset_variables(&mut self) {
        if let Some(i) = &mut self.inner.interp {
            i.reset_variables();
        }
    }

    /// Runs the model (without holding the GIL).
    fn invoke(&mut self, py: Python<'_>) -> PyResult<()> {
        let interp = self.inner.interp()?;
        py.detach(|| interp.invoke()).map_err(runtime_error)
    }

    /// A copy of tensor `index`'s bytes.
    fn tensor_bytes<'py>(
        &self,
        py: Python<'py>,
        index: usize,
    ) -> PyResult<Bound<'py, PyArray1<u8>>> {
        self.tensor_desc(index)?;
        let interp = self.inner.interp.as_ref().ok_or_else(|| {
            PyRuntimeError::new_err("the model cannot run with its inputs' shapes: resize them")
        })?;
        let t = interp.tensor(index).map_err(runtime_error)?;
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
                    .interp()?
                    .input_mut(position)
                    .map_err(runtime_error)?;
                let bytes = ArrayViewMut1::from(t.bytes_mut());
                // SAFETY: the bytes lie in the interpreter's arena, which is moved or freed
                // only by `resize_input` (refused while this array, recorded in `views`
                // below, is alive) and when the interpreter is dropped; the numpy array's
                // base (`owner`) keeps the interpreter alive as long as it.
                unsafe { PyArray1::borrow_from_array(&bytes, owner) }
            }
            None => {
                let t = this.inner.interp()?.tensor(index).map_err(runtime_error)?;
                let bytes = ArrayView1::from(t.bytes());
                // SAFETY: as above (arena, prepacked or model bytes, all owned by the
                // interpreter and never moved); `litecvt.Interpreter` marks this view
                // read-only.
                unsafe { PyArray1::borrow_from_array(&bytes, owner) }
            }
        };
        let py = slf.py();
        this.views.retain(|w| w.bind(py).upgrade().is_some());
        this.views
            .push(PyWeakrefReference::new(view.as_any())?.unbind());
        Ok(view)
    }
}
