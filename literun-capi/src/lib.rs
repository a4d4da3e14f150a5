//! The C API of literun. The header `include/literun.h` is generated from this file by cbindgen
//! (`LITERUN_BLESS=1 cargo test -p literun-capi` rewrites it; the test fails when it drifts).
//!
//! Every function checks its pointers for null, returns a status instead of panicking (a panic,
//! which would be a bug in literun, is caught and returned as `LITERUN_STATUS_PANIC`), and records a
//! message for [`literun_last_error`].

#![allow(clippy::missing_safety_doc)] // the safety contract of each function is in its C doc.

use std::cell::RefCell;
use std::ffi::{c_char, c_void, CStr, CString};
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use literun::{AlignedBytes, DType, Error, Interpreter, Model, TensorInfo};

/// Largest tensor rank (length of `LiterunTensorInfo::dims`).
pub const LITERUN_MAX_RANK: usize = 8;

/// What a call returned. `LITERUN_STATUS_OK` is 0; every other value is an error, described by
/// `literun_last_error()`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiterunStatus {
    Ok = 0,
    /// A pointer argument was NULL.
    NullArgument = 1,
    /// The bytes are not a valid model.
    InvalidModel = 2,
    /// The model uses operators literun does not implement.
    Unsupported = 3,
    /// An index, size or element type does not match the model.
    BadArgument = 4,
    /// An operator failed while preparing or running.
    Runtime = 5,
    /// literun panicked (a bug): the interpreter should not be used any more.
    Panic = 6,
}

/// Element type of a tensor.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiterunDtype {
    Float32 = 1,
    Float16 = 2,
    Int32 = 3,
    Int64 = 4,
    Bool = 5,
    Int8 = 6,
    Uint8 = 7,
    Int16 = 8,
    /// Two float32 per element, real then imaginary part.
    Complex64 = 9,
}

/// A model input or output.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LiterunTensorInfo {
    /// NUL-terminated name (signature name when the model has one); valid as long as the
    /// interpreter.
    pub name: *const c_char,
    pub dtype: LiterunDtype,
    /// Number of dimensions; `dims[0..rank]` are the sizes.
    pub rank: usize,
    pub dims: [usize; LITERUN_MAX_RANK],
    /// Size of the data in bytes (elements x element size).
    pub bytes: usize,
    /// Quantization of int8/uint8 tensors (`real = scale * (q - zero_point)`); 0 and 0 otherwise.
    pub scale: f32,
    pub zero_point: i32,
}

/// A loaded model and its interpreter (opaque).
pub struct LiterunInterpreter {
    // `interp` borrows `*model`, which borrows `bytes`: `interp` is dropped first, then `model`
    // (in `Drop`), then the fields.
    interp: ManuallyDrop<Interpreter<'static>>,
    model: *mut Model<'static>,
    #[allow(dead_code)]
    bytes: AlignedBytes,
    input_names: Vec<CString>,
    output_names: Vec<CString>,
}

impl Drop for LiterunInterpreter {
    fn drop(&mut self) {
        // SAFETY: `interp` is never used again; `model` came from `Box::into_raw` and nothing
        // borrows it once `interp` is gone.
        unsafe {
            ManuallyDrop::drop(&mut self.interp);
            drop(Box::from_raw(self.model));
        }
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(msg: impl Into<Vec<u8>>) {
    let mut v: Vec<u8> = msg.into();
    v.retain(|&b| b != 0);
    let c = CString::new(v).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

type Res<T> = Result<T, (LiterunStatus, String)>;

fn from_err(e: Error) -> (LiterunStatus, String) {
    let status = match e {
        Error::InvalidModel(_) | Error::Misaligned => LiterunStatus::InvalidModel,
        Error::Unsupported(_) => LiterunStatus::Unsupported,
        Error::Tensor(_) => LiterunStatus::BadArgument,
        Error::Op { .. } | Error::Io(_) => LiterunStatus::Runtime,
    };
    (status, e.to_string())
}

fn null(what: &str) -> (LiterunStatus, String) {
    (LiterunStatus::NullArgument, format!("{what} is NULL"))
}

/// Runs `f`, turning errors and panics into a status and the thread's last error.
fn guard(f: impl FnOnce() -> Res<()>) -> LiterunStatus {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => LiterunStatus::Ok,
        Ok(Err((status, msg))) => {
            set_error(msg);
            status
        }
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            set_error(format!("literun panicked (a bug, please report it): {msg}"));
            LiterunStatus::Panic
        }
    }
}

fn names(infos: &[TensorInfo<'_>]) -> Vec<CString> {
    infos
        .iter()
        .map(|t| CString::new(t.name.replace('\0', "")).unwrap_or_default())
        .collect()
}

fn dtype(d: DType) -> LiterunDtype {
    match d {
        DType::F32 => LiterunDtype::Float32,
        DType::F16 => LiterunDtype::Float16,
        DType::I32 => LiterunDtype::Int32,
        DType::I64 => LiterunDtype::Int64,
        DType::Bool => LiterunDtype::Bool,
        DType::I8 => LiterunDtype::Int8,
        DType::U8 => LiterunDtype::Uint8,
        DType::I16 => LiterunDtype::Int16,
        // A resource handle holds the variable's id as an int32 (as in LiteRT).
        DType::Resource => LiterunDtype::Int32,
        DType::Complex64 => LiterunDtype::Complex64,
    }
}

/// A new shape for a model input, for `literun_interpreter_create_with_shapes`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LiterunInputShape {
    /// The input's index.
    pub index: usize,
    /// Number of dimensions; `dims[0..rank]` are the sizes.
    pub rank: usize,
    pub dims: [usize; LITERUN_MAX_RANK],
}

/// Loads a model and prepares an interpreter for it.
///
/// The `len` bytes at `model` are **copied** into 16-byte-aligned memory owned by the
/// interpreter, so `model` may be freed (and need not be aligned) once this returns. On success
/// `*out` is a new interpreter to free with `literun_interpreter_destroy`; on error `*out` is NULL.
#[no_mangle]
pub unsafe extern "C" fn literun_interpreter_create(
    model: *const u8,
    len: usize,
    out: *mut *mut LiterunInterpreter,
) -> LiterunStatus {
    literun_interpreter_create_with_shapes(model, len, ptr::null(), 0, out)
}

/// `literun_interpreter_create`, with the `count` inputs in `shapes` given new shapes before the
/// model is prepared (only dimensions an input's shape signature marks -1 may change). For models
/// stored with a placeholder size (1) in a dynamic dimension that they cannot be prepared with,
/// e.g. a `[1, -1]` waveform read by a convolution wider than 1.
#[no_mangle]
pub unsafe extern "C" fn literun_interpreter_create_with_shapes(
    model: *const u8,
    len: usize,
    shapes: *const LiterunInputShape,
    count: usize,
    out: *mut *mut LiterunInterpreter,
) -> LiterunStatus {
    guard(|| {
        if out.is_null() {
            return Err(null("out"));
        }
        *out = ptr::null_mut();
        if model.is_null() {
            return Err(null("model"));
        }
        let bytes = AlignedBytes::from_slice(std::slice::from_raw_parts(model, len));
        // SAFETY: the slice points into `bytes`' heap buffer, which does not move and lives as
        // long as the interpreter (see the field order and `Drop`).
        let view: &'static [u8] = &*(&*bytes as *const [u8]);
        if shapes.is_null() && count > 0 {
            return Err(null("shapes"));
        }
        let shapes: &[LiterunInputShape] = if count == 0 {
            &[]
        } else {
            std::slice::from_raw_parts(shapes, count)
        };
        let mut new = Vec::with_capacity(shapes.len());
        for s in shapes {
            let dims = s.dims.get(..s.rank).ok_or_else(|| {
                (
                    LiterunStatus::BadArgument,
                    format!("rank {} is over {LITERUN_MAX_RANK}", s.rank),
                )
            })?;
            new.push((s.index, dims));
        }
        let mut file = Model::from_bytes(view).map_err(from_err)?;
        if !new.is_empty() {
            file = file.resized_inputs(&new).map_err(|e| match e {
                Error::Tensor(m) => (LiterunStatus::BadArgument, m),
                e => from_err(e),
            })?;
        }
        let m = Box::into_raw(Box::new(file));
        // SAFETY: `m` is freed only in `Drop`, after the interpreter.
        let interp = match Interpreter::new(&*m) {
            Ok(i) => i,
            Err(e) => {
                drop(Box::from_raw(m));
                return Err(from_err(e));
            }
        };
        let it = LiterunInterpreter {
            input_names: names(interp.inputs()),
            output_names: names(interp.outputs()),
            interp: ManuallyDrop::new(interp),
            model: m,
            bytes,
        };
        *out = Box::into_raw(Box::new(it));
        Ok(())
    })
}

/// Frees an interpreter (NULL is ignored).
#[no_mangle]
pub unsafe extern "C" fn literun_interpreter_destroy(interpreter: *mut LiterunInterpreter) {
    if !interpreter.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(interpreter))));
    }
}

/// Number of model inputs (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn literun_input_count(interpreter: *const LiterunInterpreter) -> usize {
    interpreter
        .as_ref()
        .map_or(0, |it| it.interp.inputs().len())
}

/// Number of model outputs (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn literun_output_count(interpreter: *const LiterunInterpreter) -> usize {
    interpreter
        .as_ref()
        .map_or(0, |it| it.interp.outputs().len())
}

/// Bytes of the activation arena the interpreter allocated (0 for NULL).
#[no_mangle]
pub unsafe extern "C" fn literun_arena_bytes(interpreter: *const LiterunInterpreter) -> usize {
    interpreter.as_ref().map_or(0, |it| it.interp.arena_bytes())
}

fn info(
    t: &TensorInfo<'_>,
    name: &CString,
    desc: &literun::model::TensorDesc<'_>,
) -> LiterunTensorInfo {
    let mut dims = [0usize; LITERUN_MAX_RANK];
    for (d, &s) in dims.iter_mut().zip(&t.shape) {
        *d = s;
    }
    let (scale, zero_point) = desc
        .quant
        .map_or((0.0, 0), |q| (q.scale, q.zero_point as i32));
    LiterunTensorInfo {
        name: name.as_ptr(),
        dtype: dtype(t.dtype),
        rank: t.shape.len().min(LITERUN_MAX_RANK),
        dims,
        bytes: t.shape.iter().product::<usize>() * t.dtype.size(),
        scale,
        zero_point,
    }
}

unsafe fn tensor_info(
    interpreter: *const LiterunInterpreter,
    index: usize,
    out: *mut LiterunTensorInfo,
    output: bool,
) -> LiterunStatus {
    guard(|| {
        let it = interpreter.as_ref().ok_or_else(|| null("interpreter"))?;
        if out.is_null() {
            return Err(null("out"));
        }
        let (infos, names) = if output {
            (it.interp.outputs(), &it.output_names)
        } else {
            (it.interp.inputs(), &it.input_names)
        };
        let t = infos.get(index).ok_or_else(|| {
            let what = if output { "output" } else { "input" };
            (
                LiterunStatus::BadArgument,
                format!("no {what} {index} (the model has {})", infos.len()),
            )
        })?;
        let desc = &it.interp.model().tensors()[t.tensor];
        // `write`: whatever the caller's memory holds is not read (it may not be a valid enum).
        out.write(info(t, &names[index], desc));
        Ok(())
    })
}

/// Describes input `index` into `*out`.
#[no_mangle]
pub unsafe extern "C" fn literun_input_info(
    interpreter: *const LiterunInterpreter,
    index: usize,
    out: *mut LiterunTensorInfo,
) -> LiterunStatus {
    tensor_info(interpreter, index, out, false)
}

/// Describes output `index` into `*out`.
#[no_mangle]
pub unsafe extern "C" fn literun_output_info(
    interpreter: *const LiterunInterpreter,
    index: usize,
    out: *mut LiterunTensorInfo,
) -> LiterunStatus {
    tensor_info(interpreter, index, out, true)
}

unsafe fn tensor_index(
    interpreter: *const LiterunInterpreter,
    name: *const c_char,
    out: *mut usize,
    output: bool,
) -> LiterunStatus {
    guard(|| {
        let it = interpreter.as_ref().ok_or_else(|| null("interpreter"))?;
        if name.is_null() || out.is_null() {
            return Err(null("name or out"));
        }
        let name = CStr::from_ptr(name).to_string_lossy();
        let model = it.interp.model();
        let (found, what) = if output {
            (model.output_index(&name), "output")
        } else {
            (model.input_index(&name), "input")
        };
        *out = found.ok_or_else(|| {
            (
                LiterunStatus::BadArgument,
                format!("no {what} named {name:?}"),
            )
        })?;
        Ok(())
    })
}

/// Sets `*out` to the index of the input called `name` (NUL-terminated): its signature key
/// (`"input_1"`) or its tensor's name in the file (`"serving_default_input_1:0"`, as LiteRT
/// shows it).
#[no_mangle]
pub unsafe extern "C" fn literun_input_index(
    interpreter: *const LiterunInterpreter,
    name: *const c_char,
    out: *mut usize,
) -> LiterunStatus {
    tensor_index(interpreter, name, out, false)
}

/// Sets `*out` to the index of the output called `name` (NUL-terminated): its signature key or
/// its tensor's name in the file.
#[no_mangle]
pub unsafe extern "C" fn literun_output_index(
    interpreter: *const LiterunInterpreter,
    name: *const c_char,
    out: *mut usize,
) -> LiterunStatus {
    tensor_index(interpreter, name, out, true)
}

/// Gives input `index` the shape `dims[0..rank]` and prepares the model again for it (LiteRT's
/// `ResizeInputTensor` then `AllocateTensors`). Only dimensions the input's shape signature marks
/// -1 may change; on error the interpreter is unchanged. Inputs must be set again afterwards,
/// and `literun_input_info`/`literun_output_info` describe the new shapes.
#[no_mangle]
pub unsafe extern "C" fn literun_resize_input(
    interpreter: *mut LiterunInterpreter,
    index: usize,
    dims: *const usize,
    rank: usize,
) -> LiterunStatus {
    guard(|| {
        let it = interpreter.as_mut().ok_or_else(|| null("interpreter"))?;
        if dims.is_null() && rank > 0 {
            return Err(null("dims"));
        }
        if rank > LITERUN_MAX_RANK {
            return Err((
                LiterunStatus::BadArgument,
                format!("rank {rank} is over {LITERUN_MAX_RANK}"),
            ));
        }
        let dims: &[usize] = if rank == 0 {
            &[]
        } else {
            std::slice::from_raw_parts(dims, rank)
        };
        it.interp.resize_input(index, dims).map_err(|e| match e {
            Error::Tensor(m) => (LiterunStatus::BadArgument, m),
            e => from_err(e),
        })
    })
}

/// Copies `bytes` bytes from `data` into input `index`; `bytes` must be the input's size
/// (`LiterunTensorInfo::bytes`), the data in its element type, little-endian, row-major.
#[no_mangle]
pub unsafe extern "C" fn literun_set_input(
    interpreter: *mut LiterunInterpreter,
    index: usize,
    data: *const c_void,
    bytes: usize,
) -> LiterunStatus {
    guard(|| {
        let it = interpreter.as_mut().ok_or_else(|| null("interpreter"))?;
        if data.is_null() {
            return Err(null("data"));
        }
        let mut t = it.interp.input_mut(index).map_err(from_err)?;
        let dst = t.bytes_mut();
        if dst.len() != bytes {
            return Err((
                LiterunStatus::BadArgument,
                format!("input {index} has {} bytes, got {bytes}", dst.len()),
            ));
        }
        dst.copy_from_slice(std::slice::from_raw_parts(data.cast::<u8>(), bytes));
        Ok(())
    })
}

/// Runs the model on the current inputs.
#[no_mangle]
pub unsafe extern "C" fn literun_invoke(interpreter: *mut LiterunInterpreter) -> LiterunStatus {
    guard(|| {
        let it = interpreter.as_mut().ok_or_else(|| null("interpreter"))?;
        it.interp.invoke().map_err(from_err)
    })
}

/// Restores the model's state to what it was before the first `literun_invoke` (LiteRT's
/// `reset_all_variables`): resource variables forget their values and the subgraphs that
/// initialise them run again on the next invoke, so a streaming model starts its sequence over.
/// Does nothing for a model without state.
#[no_mangle]
pub unsafe extern "C" fn literun_reset_variables(
    interpreter: *mut LiterunInterpreter,
) -> LiterunStatus {
    guard(|| {
        let it = interpreter.as_mut().ok_or_else(|| null("interpreter"))?;
        it.interp.reset_variables();
        Ok(())
    })
}

/// Sets the most passes of WHILE bodies one `literun_invoke` may run (all WHILE operators
/// together); past it the invoke fails with `LITERUN_STATUS_RUNTIME`. Default 1,000,000: a file
/// whose loop condition never turns false cannot keep `literun_invoke` from returning.
#[no_mangle]
pub unsafe extern "C" fn literun_set_max_while_iterations(
    interpreter: *mut LiterunInterpreter,
    max_iterations: u64,
) -> LiterunStatus {
    guard(|| {
        let it = interpreter.as_mut().ok_or_else(|| null("interpreter"))?;
        it.interp.set_max_while_iterations(max_iterations);
        Ok(())
    })
}

/// Copies output `index` (valid after `literun_invoke`) into `dst`, which has room for `bytes`
/// bytes; `bytes` must be the output's size.
#[no_mangle]
pub unsafe extern "C" fn literun_get_output(
    interpreter: *const LiterunInterpreter,
    index: usize,
    dst: *mut c_void,
    bytes: usize,
) -> LiterunStatus {
    guard(|| {
        let it = interpreter.as_ref().ok_or_else(|| null("interpreter"))?;
        if dst.is_null() {
            return Err(null("dst"));
        }
        let t = it.interp.output(index).map_err(from_err)?;
        let src = t.bytes();
        if src.len() != bytes {
            return Err((
                LiterunStatus::BadArgument,
                format!("output {index} has {} bytes, got {bytes}", src.len()),
            ));
        }
        ptr::copy_nonoverlapping(src.as_ptr(), dst.cast::<u8>(), bytes);
        Ok(())
    })
}

/// Sets `*data` and `*bytes` to output `index`'s data inside the interpreter, without copying.
/// The pointer is valid until the next `literun_invoke` or `literun_interpreter_destroy`.
#[no_mangle]
pub unsafe extern "C" fn literun_output_data(
    interpreter: *const LiterunInterpreter,
    index: usize,
    data: *mut *const c_void,
    bytes: *mut usize,
) -> LiterunStatus {
    guard(|| {
        let it = interpreter.as_ref().ok_or_else(|| null("interpreter"))?;
        if data.is_null() || bytes.is_null() {
            return Err(null("data or bytes"));
        }
        let t = it.interp.output(index).map_err(from_err)?;
        *data = t.bytes().as_ptr().cast();
        *bytes = t.bytes().len();
        Ok(())
    })
}

/// The message of the last error on this thread (empty if none). Valid until the next failing
/// call on this thread.
#[no_mangle]
pub extern "C" fn literun_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// A static name for a status value, e.g. `"LITERUN_STATUS_INVALID_MODEL"` (`"?"` for a value
/// that is not a status).
#[no_mangle]
pub extern "C" fn literun_status_name(status: i32) -> *const c_char {
    let s: &'static CStr = match status {
        0 => c"LITERUN_STATUS_OK",
        1 => c"LITERUN_STATUS_NULL_ARGUMENT",
        2 => c"LITERUN_STATUS_INVALID_MODEL",
        3 => c"LITERUN_STATUS_UNSUPPORTED",
        4 => c"LITERUN_STATUS_BAD_ARGUMENT",
        5 => c"LITERUN_STATUS_RUNTIME",
        6 => c"LITERUN_STATUS_PANIC",
        _ => c"?",
    };
    s.as_ptr()
}

/// literun's version, e.g. `"0.1.0"`.
#[no_mangle]
pub extern "C" fn literun_version() -> *const c_char {
    const V: &CStr =
        match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
            Ok(c) => c,
            Err(_) => c"",
        };
    V.as_ptr()
}
