//! The native module of the `litecvt` Python package (`litecvt._litecvt`): the command line, the
//! converter and the literun interpreter. The Python package (`litecvt/`) wraps these in the
//! conventions of TFLite's converter and interpreter.

mod interpreter;

use litecvt::cli::ConvertArgs;
use litecvt::npy::{NpyArray, NpyData};
use litecvt::quantize::calibrate::ArraySample;
use numpy::{PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::path::PathBuf;

create_exception!(
    _litecvt,
    ConversionError,
    PyValueError,
    "A model could not be converted; the message is the command line's (file, node, op)."
);

/// Runs the `litecvt` command line with `argv` (the first item is the program name) and returns
/// its exit code.
#[pyfunction]
fn main(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.detach(|| litecvt::cli::status_with_args(argv))
}

/// The package version (the litecvt crate's).
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// One representative array as calibration reads it (float32, int32/int64 token ids, bool).
fn npy_array(a: &Bound<'_, PyAny>) -> PyResult<NpyArray> {
    let err = || {
        PyValueError::new_err(
            "representative data: each input must be a numpy array of float32, int32, int64 \
             or bool",
        )
    };
    let data = if let Ok(a) = a.cast::<PyArrayDyn<f32>>() {
        NpyData::F32(a.to_vec().map_err(|_| err())?)
    } else if let Ok(a) = a.cast::<PyArrayDyn<i64>>() {
        NpyData::I64(a.to_vec().map_err(|_| err())?)
    } else if let Ok(a) = a.cast::<PyArrayDyn<i32>>() {
        NpyData::I32(a.to_vec().map_err(|_| err())?)
    } else if let Ok(a) = a.cast::<PyArrayDyn<bool>>() {
        NpyData::Bool(a.to_vec().map_err(|_| err())?)
    } else {
        return Err(err());
    };
    let shape = a
        .cast::<numpy::PyUntypedArray>()
        .map_err(|_| err())?
        .shape()
        .to_vec();
    Ok(NpyArray { shape, data })
}

/// A representative sample: a dict (input name → array) or a sequence (arrays in input order).
fn array_sample(item: &Bound<'_, PyAny>) -> PyResult<ArraySample> {
    if let Ok(d) = item.cast::<PyDict>() {
        let named = d
            .iter()
            .map(|(k, v)| Ok((k.extract::<String>()?, npy_array(&v)?)))
            .collect::<PyResult<_>>()?;
        return Ok(ArraySample::Named(named));
    }
    let arrays = item
        .try_iter()?
        .map(|a| npy_array(&a?))
        .collect::<PyResult<_>>()?;
    Ok(ArraySample::Positional(arrays))
}

/// Converts ONNX bytes; `label` names the model in errors. Returns the converted file's bytes
/// and the JSON report of `litecvt convert --report`. The options are `litecvt convert`'s
/// (`--quantize` ... `--exclude-op`); `samples` are representative inputs for full int8.
#[pyfunction]
#[pyo3(signature = (
    model, label, *, quantize=None, samples=None, input_shapes=vec![], input_values=vec![],
    nhwc_io=false, calibration_method=None, io_type="float".to_string(), min_snr=None,
    accept_snr_miss=false, exclude=vec![], exclude_op=vec![], strict_int8=false,
    per_tensor_dense=false, no_bias_correction=false, no_weight_rounding=false,
    no_equalize=false, layernorm_int16=false, training_as_inference=false, passes=None, no_optimize=false,
    lstm="unrolled".to_string()
))]
#[allow(clippy::too_many_arguments)]
fn convert<'py>(
    py: Python<'py>,
    model: &[u8],
    label: String,
    quantize: Option<String>,
    samples: Option<Vec<Bound<'py, PyAny>>>,
    input_shapes: Vec<String>,
    input_values: Vec<String>,
    nhwc_io: bool,
    calibration_method: Option<String>,
    io_type: String,
    min_snr: Option<f64>,
    accept_snr_miss: bool,
    exclude: Vec<String>,
    exclude_op: Vec<String>,
    strict_int8: bool,
    per_tensor_dense: bool,
    no_bias_correction: bool,
    no_weight_rounding: bool,
    no_equalize: bool,
    layernorm_int16: bool,
    training_as_inference: bool,
    passes: Option<String>,
    no_optimize: bool,
    lstm: String,
) -> PyResult<(Bound<'py, PyBytes>, String)> {
    let arrays = samples
        .map(|s| s.iter().map(array_sample).collect::<PyResult<Vec<_>>>())
        .transpose()?;
    let mut args = ConvertArgs::new(PathBuf::from(&label), PathBuf::new());
    args.quantize = quantize;
    args.input_shapes = input_shapes;
    args.input_values = input_values;
    args.nhwc_io = nhwc_io;
    args.calibration_method = calibration_method;
    args.io_type = io_type;
    args.min_snr = min_snr;
    args.accept_snr_miss = accept_snr_miss;
    args.exclude = exclude;
    args.exclude_op = exclude_op;
    args.strict_int8 = strict_int8;
    args.per_tensor_dense = per_tensor_dense;
    args.no_bias_correction = no_bias_correction;
    args.no_weight_rounding = no_weight_rounding;
    args.no_equalize = no_equalize;
    args.layernorm_int16 = layernorm_int16;
    args.training_as_inference = training_as_inference;
    args.passes = passes;
    args.no_optimize = no_optimize;
    args.lstm = lstm;
    let result = py.detach(|| {
        let opts = litecvt::cli::convert_options(&args, arrays)?;
        let c = litecvt::convert::convert_bytes(model, &label, &opts)?;
        let report = c.report_json(&label, "").to_string();
        anyhow::Ok((c.bytes, report))
    });
    match result {
        Ok((bytes, report)) => Ok((PyBytes::new(py, &bytes), report)),
        Err(e) => Err(ConversionError::new_err(format!("{e:#}"))),
    }
}

#[pymodule]
fn _litecvt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(main, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(convert, m)?)?;
    m.add("ConversionError", m.py().get_type::<ConversionError>())?;
    m.add_class::<interpreter::NativeInterpreter>()?;
    Ok(())
}
