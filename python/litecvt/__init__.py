"""litecvt: convert ONNX models to TFLite-compatible files and run them with literun.

    import litecvt
    lite_model = litecvt.convert("model.onnx", quantize="int8",
                                 representative_dataset=representative_dataset)
    interpreter = litecvt.Interpreter(model_content=lite_model)

`convert` follows TFLite's converter conventions (a `representative_dataset` generator for full
int8), `Interpreter` the LiteRT interpreter's methods. See docs/python.md.
"""

from ._convert import ConversionError, Converter, convert
from ._litecvt import version as _version
from .interpreter import Interpreter, SignatureRunner

__version__: str = _version()

__all__ = [
    "ConversionError",
    "Converter",
    "Interpreter",
    "SignatureRunner",
    "__version__",
    "convert",
]
