"""Type stubs of the native module (python/src): the Rust side of `litecvt`."""

from typing import Any, Optional, Sequence

import numpy as np

class ConversionError(ValueError): ...

def main(argv: list[str]) -> int: ...
def version() -> str: ...
def convert(
    model: bytes,
    label: str,
    *,
    quantize: Optional[str] = None,
    samples: Optional[Sequence[Any]] = None,
    input_shapes: list[str] = ...,
    input_values: list[str] = ...,
    nhwc_io: bool = False,
    calibration_method: Optional[str] = None,
    io_type: str = "float",
    min_snr: Optional[float] = None,
    accept_snr_miss: bool = False,
    exclude: list[str] = ...,
    exclude_op: list[str] = ...,
    strict_int8: bool = False,
    per_tensor_dense: bool = False,
    no_bias_correction: bool = False,
    no_weight_rounding: bool = False,
    no_equalize: bool = False,
    training_as_inference: bool = False,
    passes: Optional[str] = None,
    no_optimize: bool = False,
) -> tuple[bytes, str]: ...

class NativeInterpreter:
    signature_key: Optional[str]
    def __init__(
        self,
        model_path: Optional[str] = None,
        model_content: Optional[bytes] = None,
        num_threads: int = 1,
    ) -> None: ...
    def input_indices(self) -> list[int]: ...
    def output_indices(self) -> list[int]: ...
    def input_names(self) -> list[str]: ...
    def output_names(self) -> list[str]: ...
    def tensor_count(self) -> int: ...
    def tensor_details(self, index: int) -> dict[str, Any]: ...
    def set_tensor_bytes(self, index: int, data: np.ndarray) -> None: ...
    def invoke(self) -> None: ...
    def tensor_bytes(self, index: int) -> np.ndarray: ...
    def tensor_view(self, index: int) -> np.ndarray: ...
