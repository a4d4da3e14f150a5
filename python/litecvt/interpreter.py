"""`litecvt.Interpreter`: literun with the LiteRT (`ai_edge_litert.interpreter.Interpreter`,
`tflite_runtime.interpreter.Interpreter`) interface, so an app switches by changing one import.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from . import _litecvt

_DTYPES = {
    "FLOAT32": np.float32,
    "FLOAT16": np.float16,
    "INT32": np.int32,
    "INT64": np.int64,
    "BOOL": np.bool_,
    "INT8": np.int8,
    "UINT8": np.uint8,
    "INT16": np.int16,
    "COMPLEX64": np.complex64,
    # A resource variable's handle: the variable's id, an int32 as LiteRT stores it.
    "RESOURCE": np.int32,
}


class Interpreter:
    """Runs a .lite/.tflite model with literun.

    Args:
        model_path: path of the model file.
        model_content: the model's bytes (instead of a path).
        num_threads: threads for the convolution, dense and depthwise kernels (results are the
            same as with one thread).

    Other LiteRT constructor arguments (`experimental_delegates`,
    `experimental_op_resolver_type`, ...) are accepted and ignored: literun has one set of
    kernels, bit-exact with LiteRT's reference kernels for integer models.

    Tensors are prepared when the interpreter is made; `allocate_tensors()` is accepted for
    compatibility. `get_tensor` returns a copy, `tensor(i)()` a view into the interpreter's
    memory: writable for inputs, read-only otherwise, and (as in LiteRT) only meaningful until
    the next `invoke`, which reuses memory between tensors.
    """

    def __init__(
        self,
        model_path: Union[None, str, os.PathLike] = None,
        model_content: Optional[bytes] = None,
        num_threads: Optional[int] = 1,
        **unused_litert_options: Any,
    ) -> None:
        if (model_path is None) == (model_content is None):
            raise ValueError("give exactly one of model_path and model_content")
        self._native = _litecvt.NativeInterpreter(
            model_path=None if model_path is None else os.fspath(model_path),
            model_content=None if model_content is None else bytes(model_content),
            num_threads=max(1, num_threads or 1),
        )
        self._inputs = list(self._native.input_indices())
        self._outputs = list(self._native.output_indices())
        self._read_details()

    def _read_details(self) -> None:
        self._details = [self._native.tensor_details(i) for i in range(self._native.tensor_count())]

    # -- details ---------------------------------------------------------------------------

    def _tensor_details(self, index: int) -> dict:
        self._check_index(index)
        d = self._details[index]
        shape = np.array(d["shape"], dtype=np.int32)
        signature = d["shape_signature"]
        return {
            "name": d["name"],
            "index": index,
            "shape": shape,
            "shape_signature": shape.copy()
            if signature is None
            else np.array(signature, dtype=np.int32),
            "dtype": _DTYPES[d["dtype"]],
            "quantization": (float(d["scale"]), int(d["zero_point"])),
            "quantization_parameters": {
                "scales": np.array(d["scales"], dtype=np.float32),
                "zero_points": np.array(d["zero_points"], dtype=np.int32),
                "quantized_dimension": int(d["quantized_dimension"]),
            },
            "sparsity_parameters": {},
        }

    def _check_index(self, index: int) -> None:
        if not 0 <= index < len(self._details):
            raise ValueError(
                f"tensor index {index} out of range (the model has {len(self._details)} tensors)"
            )

    def get_input_details(self) -> list[dict]:
        """One dict per input: name, index, shape, shape_signature, dtype, quantization
        (scale, zero_point), quantization_parameters and sparsity_parameters, as LiteRT."""
        return [self._tensor_details(i) for i in self._inputs]

    def get_output_details(self) -> list[dict]:
        """One dict per output, as `get_input_details`."""
        return [self._tensor_details(i) for i in self._outputs]

    def get_tensor_details(self) -> list[dict]:
        """One dict per tensor of the model."""
        return [self._tensor_details(i) for i in range(len(self._details))]

    # -- running ---------------------------------------------------------------------------

    def allocate_tensors(self) -> None:
        """literun plans and allocates when the model is loaded and when an input is resized;
        this raises `RuntimeError` when the model cannot run with its inputs' current shapes (a
        file whose dynamic dimensions need `resize_tensor_input` first)."""
        self._native.allocate()

    def resize_tensor_input(
        self, input_index: int, tensor_size: Sequence[int], strict: bool = False
    ) -> None:
        """Gives input tensor `input_index` the shape `tensor_size` and prepares the model again
        for it (shapes, memory plan), as LiteRT's `resize_tensor_input` + `allocate_tensors`.

        Only dimensions the input's `shape_signature` marks -1 may change, whatever `strict`
        says (literun does not re-shape a model's fixed dimensions; convert with
        `input_shapes=` for that). Inputs must be set again afterwards. Raises `ValueError` for
        a shape the model cannot take (the interpreter is then unchanged), and `RuntimeError`
        while a view from `tensor()` is alive (the memory it views may move). A file that
        cannot run with the shapes it stores (a dynamic length stored as 1) loads unprepared:
        resize its inputs, then `allocate_tensors()` says whether it can run."""
        if input_index not in self._inputs:
            raise ValueError(f"tensor {input_index} is not an input of the model")
        shape = [int(d) for d in tensor_size]
        if any(d < 0 for d in shape):
            raise ValueError(f"negative dimension in {shape}")
        self._native.resize_input(self._inputs.index(input_index), shape)
        self._read_details()

    def reset_all_variables(self) -> None:
        """Restores the model's resource variables to their state before the first `invoke`
        (the next `invoke` runs the initialisation again): a streaming model starts over."""
        self._native.reset_variables()

    def set_tensor(self, tensor_index: int, value: Any) -> None:
        """Copies `value` into input `tensor_index`; its dtype and shape must be the input's."""
        self._check_index(tensor_index)
        if tensor_index not in self._inputs:
            raise ValueError(f"tensor {tensor_index} is not an input of the model")
        d = self._details[tensor_index]
        dtype = np.dtype(_DTYPES[d["dtype"]])
        value = np.asarray(value)
        if value.dtype != dtype:
            raise ValueError(
                f"Cannot set tensor: got value of type {value.dtype.name.upper()} but expected "
                f"type {d['dtype']} for input {tensor_index}, name: {d['name']}"
            )
        if list(value.shape) != list(d["shape"]):
            raise ValueError(
                f"Cannot set tensor: dimension mismatch: got {list(value.shape)}, expected "
                f"{list(d['shape'])} for input {tensor_index}, name: {d['name']}"
            )
        raw = np.ascontiguousarray(value).reshape(-1).view(np.uint8)
        self._native.set_tensor_bytes(tensor_index, raw)

    def invoke(self) -> None:
        """Runs the model (the GIL is released meanwhile)."""
        self._native.invoke()

    def get_tensor(self, tensor_index: int, subgraph_index: int = 0) -> np.ndarray:
        """A copy of tensor `tensor_index` (outputs are valid after `invoke`)."""
        if subgraph_index != 0:
            raise ValueError("literun runs subgraph 0 only")
        self._check_index(tensor_index)
        d = self._details[tensor_index]
        raw = self._native.tensor_bytes(tensor_index)
        return raw.view(_DTYPES[d["dtype"]]).reshape(d["shape"])

    def tensor(self, tensor_index: int) -> Callable[[], np.ndarray]:
        """A function returning a numpy view of tensor `tensor_index` in place (no copy).

        Writable for inputs (`interpreter.tensor(i)()[...] = x` fills an input), read-only
        otherwise. The view keeps the interpreter alive; read outputs after `invoke` and
        do not hold views across the next `invoke` (memory is reused between tensors)."""
        self._check_index(tensor_index)
        d = self._details[tensor_index]
        writable = tensor_index in self._inputs

        def view() -> np.ndarray:
            raw = self._native.tensor_view(tensor_index)
            if not writable:
                raw.flags.writeable = False
            return raw.view(_DTYPES[d["dtype"]]).reshape(d["shape"])

        return view

    # -- signatures ------------------------------------------------------------------------

    def get_signature_list(self) -> dict:
        """`{key: {"inputs": [...], "outputs": [...]}}` for the model's SignatureDef ({} if it
        has none)."""
        key = self._native.signature_key
        if key is None:
            return {}
        return {
            key: {
                "inputs": list(self._native.input_names()),
                "outputs": list(self._native.output_names()),
            }
        }

    def get_signature_runner(self, signature_key: Optional[str] = None) -> "SignatureRunner":
        """A callable running the model with keyword inputs, returning a dict of outputs."""
        key = self._native.signature_key
        if key is None:
            raise ValueError("the model has no SignatureDef")
        if signature_key not in (None, key):
            raise ValueError(f"no signature '{signature_key}' (the model has '{key}')")
        return SignatureRunner(self)


class SignatureRunner:
    """Runs an `Interpreter` by signature names: `runner(x=array)` -> `{"y": array}`."""

    def __init__(self, interpreter: Interpreter) -> None:
        self._interpreter = interpreter
        native = interpreter._native
        self._inputs = dict(zip(native.input_names(), interpreter._inputs))
        self._outputs = dict(zip(native.output_names(), interpreter._outputs))

    def get_input_details(self) -> dict:
        """Input name -> details (as `Interpreter.get_input_details` items)."""
        return {n: self._interpreter._tensor_details(i) for n, i in self._inputs.items()}

    def get_output_details(self) -> dict:
        """Output name -> details."""
        return {n: self._interpreter._tensor_details(i) for n, i in self._outputs.items()}

    def allocate_tensors(self) -> None:
        """Accepted for compatibility (nothing to do)."""

    def __call__(self, **inputs: Any) -> dict:
        missing = set(self._inputs) - set(inputs)
        unknown = set(inputs) - set(self._inputs)
        if missing or unknown:
            raise ValueError(
                f"signature inputs are {sorted(self._inputs)}; "
                f"missing {sorted(missing)}, unknown {sorted(unknown)}"
            )
        for name, value in inputs.items():
            self._interpreter.set_tensor(self._inputs[name], value)
        self._interpreter.invoke()
        return {n: self._interpreter.get_tensor(i) for n, i in self._outputs.items()}
