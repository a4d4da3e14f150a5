"""`litecvt.convert` and `litecvt.Converter`: the converter library, called in process."""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from . import _litecvt

ConversionError = _litecvt.ConversionError

#: A representative sample: arrays in model input order, or input name -> array.
Sample = Union[Sequence[Any], Mapping[str, Any]]
#: TFLite's convention: a callable returning an iterable of samples, or the iterable itself.
RepresentativeDataset = Union[Callable[[], Iterable[Sample]], Iterable[Sample]]


def _model_bytes(model: Any) -> tuple[bytes, str]:
    """The ONNX bytes of `model` and the label errors name it by."""
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        with open(path, "rb") as f:
            return f.read(), path
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), "<bytes>"
    if hasattr(model, "SerializeToString"):
        graph = getattr(model, "graph", None)
        name = getattr(graph, "name", "") or "onnx.ModelProto"
        return model.SerializeToString(), f"<{name}>"
    raise TypeError(
        f"model must be a path, bytes or an onnx.ModelProto, not {type(model).__name__}"
    )


def _array(value: Any) -> np.ndarray:
    """One input of a representative sample as calibration reads it."""
    a = np.asarray(value)
    if a.dtype == np.bool_:
        return np.ascontiguousarray(a)
    if np.issubdtype(a.dtype, np.integer):
        return np.ascontiguousarray(a, dtype=np.int64)
    return np.ascontiguousarray(a, dtype=np.float32)


def _samples(dataset: RepresentativeDataset) -> list[Any]:
    items = dataset() if callable(dataset) else dataset
    samples: list[Any] = []
    for item in items:
        if isinstance(item, Mapping):
            samples.append({str(k): _array(v) for k, v in item.items()})
        elif isinstance(item, np.ndarray):
            samples.append([_array(item)])
        else:
            samples.append([_array(v) for v in item])
    return samples


def _named_lists(flag: str, values: Optional[Mapping[str, Any]]) -> list[str]:
    """`{"x": (1, 3, 8, 8)}` as the command line's `x=1,3,8,8`."""
    out = []
    for name, v in (values or {}).items():
        items = np.atleast_1d(np.asarray(v)).ravel().tolist()
        if not items:
            raise ValueError(f"{flag}: no values for '{name}'")
        out.append(f"{name}=" + ",".join(str(x) for x in items))
    return out


def _names(value: Union[None, str, Iterable[str]]) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v for v in value.split(",") if v]
    return [str(v) for v in value]


def _write_atomic(path: Union[str, os.PathLike], data: bytes) -> None:
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".litecvt-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def convert(
    model: Any,
    output: Union[None, str, os.PathLike] = None,
    *,
    quantize: Optional[str] = None,
    representative_dataset: Optional[RepresentativeDataset] = None,
    input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
    input_values: Optional[Mapping[str, Any]] = None,
    nhwc_io: bool = False,
    calibration_method: Optional[str] = None,
    io_type: str = "float",
    min_snr: Optional[float] = None,
    accept_snr_miss: bool = False,
    exclude: Union[None, str, Iterable[str]] = None,
    exclude_op: Union[None, str, Iterable[str]] = None,
    strict_int8: bool = False,
    per_tensor_dense: bool = False,
    bias_correction: bool = True,
    weight_rounding: bool = True,
    equalize: bool = True,
    layernorm_int16: bool = False,
    training_as_inference: bool = False,
    passes: Union[None, str, Iterable[str]] = None,
    optimize: bool = True,
    lstm: str = "unrolled",
    report: bool = False,
) -> Any:
    """Converts an ONNX model to a .lite (TFLite-compatible) file, as `litecvt convert` does.

    Args:
        model: a path to an .onnx file, its bytes, or an `onnx.ModelProto`.
        output: where to write the file too (atomically); the bytes are returned either way.
        quantize: None (float32), "fp16" (float16 weights), "int8" (int8 weights only; with a
            `representative_dataset`, int8 weights and activations) or "int16x8" (int16
            activations, int8 weights; needs a `representative_dataset`).
        representative_dataset: calibration samples for full int8, in TFLite's convention: a
            callable returning an iterable (e.g. a generator function), or an iterable, whose
            items are lists of arrays in model input order or dicts input name -> array. An
            array is one sample or a batch along its first axis; images in NCHW may feed an
            NHWC input (`nhwc_io=True`).
        input_shapes: static shapes for inputs with dynamic dimensions, by input name.
        input_values: inputs frozen to constant values, by input name.
        nhwc_io: keep rank-4 inputs and outputs in NHWC (no transposes).
        calibration_method: "minmax", "percentile[:P]", "mse", "entropy" or "auto"; None: the
            better of minmax and auto on the samples.
        io_type: "float", "int8" (full int8) or "int16" (int16x8): the model's interface type.
        min_snr: keep the costliest layers in int16 or float until every output's SNR against
            the float model reaches this many dB (pooled over the calibration samples and
            averaged per sample in dB).
        accept_snr_miss: with `min_snr`, return the best model even when it misses the budget.
        exclude: ONNX node names to keep in float (full int8).
        exclude_op: IR op types to keep in float (full int8), e.g. ["Softmax"].
        strict_int8: fail if any op has to stay float (full int8).
        per_tensor_dense: per-tensor dense weights (TFLite runtimes older than 2.13).
        bias_correction, weight_rounding, equalize: the full-int8 refinements (on by default).
        layernorm_int16: keep LayerNorms with int16 activations even where the output does not
            gain (`--layernorm-int16`; by default they are tried and kept where the output's SNR
            improves by 0.5 dB, and `strict_int8` keeps them int8).
        training_as_inference: convert training-mode BatchNormalization/Dropout as inference.
        passes: run only these optional passes (names as `litecvt convert -v` prints them).
        optimize: False runs only the passes a valid file needs.
        lstm: "unrolled" (per-step ops; every invoke starts from the LSTM's initial state, as
            ONNX does) or "sequence" (one UNIDIRECTIONAL_SEQUENCE_LSTM per LSTM direction, for an
            LSTM with zero initial state and Y_c unused: a smaller file for long sequences, whose
            state persists across invokes; reset it between independent sequences, e.g.
            LiteRT's `reset_all_variables()`).
        report: also return the conversion report (what `litecvt convert --report` writes).

    Returns:
        The file's bytes, or `(bytes, report)` with `report=True`: a dict with the op
        histograms, sizes, what each pass did and, when quantized, the per-layer errors.

    Raises:
        ConversionError: the model cannot be converted (the message names file, node and op).
    """
    onnx_bytes, label = _model_bytes(model)
    samples = None if representative_dataset is None else _samples(representative_dataset)
    pass_list = _names(passes)
    data, report_json = _litecvt.convert(
        onnx_bytes,
        label,
        quantize=quantize,
        samples=samples,
        input_shapes=_named_lists("input_shapes", input_shapes),
        input_values=_named_lists("input_values", input_values),
        nhwc_io=nhwc_io,
        calibration_method=calibration_method,
        io_type=io_type,
        min_snr=min_snr,
        accept_snr_miss=accept_snr_miss,
        exclude=_names(exclude),
        exclude_op=_names(exclude_op),
        strict_int8=strict_int8,
        per_tensor_dense=per_tensor_dense,
        no_bias_correction=not bias_correction,
        no_weight_rounding=not weight_rounding,
        no_equalize=not equalize,
        layernorm_int16=layernorm_int16,
        training_as_inference=training_as_inference,
        passes=",".join(pass_list) if passes is not None else None,
        no_optimize=not optimize and passes is None,
        lstm=lstm,
    )
    summary = json.loads(report_json)
    for w in summary.get("warnings", []):
        warnings.warn(f"{label}: {w}", stacklevel=2)
    if output is not None:
        _write_atomic(output, data)
        summary["output"] = os.fspath(output)
    return (data, summary) if report else data


class Converter:
    """A conversion configured by attributes, in the manner of `tf.lite.TFLiteConverter`.

        converter = litecvt.Converter("model.onnx")
        converter.quantize = "int8"
        converter.representative_dataset = representative_dataset
        lite_model = converter.convert()
        converter.report["quantization"]["outputs"]   # per-output SNR vs float

    Every keyword of `litecvt.convert` is an attribute (same name and default).
    """

    def __init__(self, model: Any, **options: Any) -> None:
        self.model = model
        self.quantize: Optional[str] = None
        self.representative_dataset: Optional[RepresentativeDataset] = None
        self.input_shapes: Optional[Mapping[str, Sequence[int]]] = None
        self.input_values: Optional[Mapping[str, Any]] = None
        self.nhwc_io = False
        self.calibration_method: Optional[str] = None
        self.io_type = "float"
        self.min_snr: Optional[float] = None
        self.accept_snr_miss = False
        self.exclude: Union[None, str, Iterable[str]] = None
        self.exclude_op: Union[None, str, Iterable[str]] = None
        self.strict_int8 = False
        self.per_tensor_dense = False
        self.bias_correction = True
        self.weight_rounding = True
        self.equalize = True
        self.layernorm_int16 = False
        self.training_as_inference = False
        self.passes: Union[None, str, Iterable[str]] = None
        self.optimize = True
        self.lstm = "unrolled"
        #: The report of the last `convert()` (None before).
        self.report: Optional[dict] = None
        for name, value in options.items():
            if not hasattr(self, name) or name in ("model", "report"):
                raise TypeError(f"Converter has no option '{name}'")
            setattr(self, name, value)

    @classmethod
    def from_onnx(cls, model: Any, **options: Any) -> "Converter":
        """A converter for `model` (path, bytes or `onnx.ModelProto`)."""
        return cls(model, **options)

    def convert(self, output: Union[None, str, os.PathLike] = None) -> bytes:
        """Converts; returns the file's bytes and keeps the report in `self.report`."""
        options = {k: v for k, v in vars(self).items() if k not in ("model", "report")}
        data, self.report = convert(self.model, output, report=True, **options)
        return data
