"""The `litecvt` Python package: conversion through the API, literun's Interpreter against LiteRT's
on the same files (float within 1e-5, int8 bit-exact with LiteRT's reference kernels), errors, and
the `litecvt` script. Run from a checkout (the fixtures are read from it):

    pip install . pytest onnx ai-edge-litert && pytest python/tests
"""

from __future__ import annotations

import gc
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import litecvt

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
MAIN_FIXTURES = ["digits_cnn", "mobilenetv2_block", "attention_block"]
CALIBRATION = {"digits_cnn": "digits", "mobilenetv2_block": "mobilenetv2_block",
               "attention_block": "attention_block"}


def litert(model: bytes, reference: bool = False, xnnpack: bool = False):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    resolver = (
        OpResolverType.BUILTIN_REF
        if reference
        else OpResolverType.AUTO
        if xnnpack
        else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    )
    interp = Interpreter(
        model_content=model, num_threads=1, experimental_op_resolver_type=resolver
    )
    interp.allocate_tensors()
    return interp


def run(interp, x: np.ndarray) -> list[np.ndarray]:
    """The app code LiteRT documents, unchanged for either interpreter."""
    interp.allocate_tensors()
    inp = interp.get_input_details()[0]
    if inp["dtype"] != np.float32:
        scale, zero_point = inp["quantization"]
        x = np.clip(np.round(x / scale) + zero_point, -128, 127).astype(inp["dtype"])
    if list(inp["shape"]) != list(x.shape):  # NHWC model fed NCHW data
        x = x.transpose(0, 2, 3, 1)
    interp.set_tensor(inp["index"], x)
    interp.invoke()
    return [interp.get_tensor(o["index"]) for o in interp.get_output_details()]


def fixture_input(name: str) -> np.ndarray:
    return np.load(FIXTURES / f"{name}.input.npy").astype(np.float32)


def calibration_samples(name: str) -> list[np.ndarray]:
    return [np.load(p) for p in sorted((ROOT / "calibration" / name).glob("*.npy"))]


def assert_float_close(ours: np.ndarray, theirs: np.ndarray) -> None:
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    err = np.max(np.abs(ours - theirs)) / max(np.max(np.abs(theirs)), 1e-6)
    assert err <= 1e-5, err


def test_version_and_script():
    assert litecvt.__version__
    script = shutil.which("litecvt")
    assert script, "the litecvt script is not on PATH"
    out = subprocess.run([script, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"litecvt {litecvt.__version__}"
    bad = subprocess.run([script, "no-such-command"], capture_output=True, text=True)
    assert bad.returncode == 2 and "no-such-command" in bad.stderr


def test_script_converts(tmp_path):
    out = tmp_path / "digits.lite"
    subprocess.run(
        [shutil.which("litecvt"), "convert", str(FIXTURES / "digits_cnn.onnx"), "-o", str(out)],
        check=True,
        capture_output=True,
    )
    assert out.read_bytes() == litecvt.convert(FIXTURES / "digits_cnn.onnx")


@pytest.mark.parametrize("quantize", [None, "fp16", "int8"])
@pytest.mark.parametrize("name", MAIN_FIXTURES)
def test_float_interface_matches_litert(name, quantize):
    model = litecvt.convert(FIXTURES / f"{name}.onnx", quantize=quantize)
    x = fixture_input(name)
    ours = run(litecvt.Interpreter(model_content=model), x)
    # Weights-only files: literun's hybrid kernels quantize a pointwise convolution's input per
    # pixel, as LiteRT's default XNNPACK delegate does (its builtin kernels, per image).
    theirs = run(litert(model, xnnpack=quantize == "int8"), x)
    for a, b in zip(ours, theirs):
        assert_float_close(a, b)


@pytest.mark.parametrize("io_type", ["float", "int8"])
@pytest.mark.parametrize("name", MAIN_FIXTURES)
def test_full_int8_with_a_generator_is_bit_exact_with_litert_reference(name, io_type):
    def representative_dataset():
        for sample in calibration_samples(CALIBRATION[name]):
            yield [sample]

    model = litecvt.convert(
        FIXTURES / f"{name}.onnx",
        quantize="int8",
        representative_dataset=representative_dataset,
        io_type=io_type,
    )
    x = fixture_input(name)
    ours = run(litecvt.Interpreter(model_path=None, model_content=model), x)
    theirs = run(litert(model, reference=True), x)
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_representative_dicts_batches_and_paths_give_the_same_model(tmp_path):
    samples = calibration_samples("digits")[:16]
    by_list = litecvt.convert(
        FIXTURES / "digits_cnn.onnx", quantize="int8", representative_dataset=[[s] for s in samples]
    )
    by_dict = litecvt.convert(
        (FIXTURES / "digits_cnn.onnx").read_bytes(),
        quantize="int8",
        representative_dataset=lambda: ({"input": s} for s in samples),
    )
    batch = np.concatenate([s.reshape(1, 1, 8, 8) for s in samples])
    by_batch = litecvt.convert(
        str(FIXTURES / "digits_cnn.onnx"), quantize="int8", representative_dataset=[[batch]]
    )
    assert by_list == by_dict == by_batch
    calib = tmp_path / "calib"
    calib.mkdir()
    for i, s in enumerate(samples):
        np.save(calib / f"{i:04}.npy", s)
    out = tmp_path / "cli.lite"
    subprocess.run(
        [shutil.which("litecvt"), "convert", str(FIXTURES / "digits_cnn.onnx"), "-o", str(out),
         "--quantize", "int8", "--calibration", str(calib)],
        check=True,
        capture_output=True,
    )
    assert out.read_bytes() == by_list


def test_onnx_model_proto_output_file_and_report(tmp_path):
    onnx = pytest.importorskip("onnx")
    proto = onnx.load(str(FIXTURES / "mobilenetv2_block.onnx"))
    out = tmp_path / "m.lite"
    data, report = litecvt.convert(
        proto,
        out,
        quantize="int8",
        representative_dataset=[[s] for s in calibration_samples("mobilenetv2_block")],
        report=True,
    )
    assert out.read_bytes() == data
    assert report["bytes"] == len(data) and report["tflite_ops"]
    q = report["quantization"]
    assert q["calibration_samples"] > 0 and q["outputs"] and q["layers"]
    converter = litecvt.Converter(proto, quantize="fp16")
    assert converter.convert() == litecvt.convert(proto, quantize="fp16")
    assert converter.report["quantization"]["mode"]


def test_details_match_litert():
    samples = calibration_samples("digits")
    model = litecvt.convert(
        FIXTURES / "digits_cnn.onnx",
        quantize="int8",
        representative_dataset=[[s] for s in samples],
        io_type="int8",
    )
    ours, theirs = litecvt.Interpreter(model_content=model), litert(model, reference=True)
    for a, b in zip(
        ours.get_input_details() + ours.get_output_details(),
        theirs.get_input_details() + theirs.get_output_details(),
    ):
        assert a["name"] == b["name"] and a["index"] == b["index"]
        np.testing.assert_array_equal(a["shape"], b["shape"])
        np.testing.assert_array_equal(a["shape_signature"], b["shape_signature"])
        assert a["dtype"] == b["dtype"]
        assert a["quantization"][1] == b["quantization"][1]
        assert np.isclose(a["quantization"][0], b["quantization"][0], rtol=1e-7)
        qa, qb = a["quantization_parameters"], b["quantization_parameters"]
        np.testing.assert_allclose(qa["scales"], qb["scales"], rtol=1e-7)
        np.testing.assert_array_equal(qa["zero_points"], qb["zero_points"])
        assert qa["quantized_dimension"] == qb["quantized_dimension"]
    assert ours.get_signature_list() == theirs.get_signature_list()


def test_signature_runner_matches_litert():
    model = litecvt.convert(FIXTURES / "attention_block.onnx")
    x = fixture_input("attention_block")
    ours = litecvt.Interpreter(model_content=model).get_signature_runner()
    theirs = litert(model).get_signature_runner()
    (name,) = ours.get_input_details()
    a, b = ours(**{name: x}), theirs(**{name: x})
    assert a.keys() == b.keys()
    for k in a:
        assert_float_close(a[k], b[k])


def test_tensor_views_are_zero_copy_and_keep_the_interpreter_alive(tmp_path):
    path = tmp_path / "digits.lite"
    litecvt.convert(FIXTURES / "digits_cnn.onnx", path)
    interp = litecvt.Interpreter(model_path=path, num_threads=2)
    inp = interp.get_input_details()[0]["index"]
    out = interp.get_output_details()[0]["index"]
    x = fixture_input("digits_cnn")
    interp.tensor(inp)()[...] = x  # fills the input in place
    interp.invoke()
    view = interp.tensor(out)()
    expected = interp.get_tensor(out)
    assert not view.flags.writeable and not view.flags.owndata
    with pytest.raises(ValueError):
        view[...] = 0
    del interp
    gc.collect()
    np.testing.assert_array_equal(view, expected)
    assert_float_close(expected, np.load(FIXTURES / "digits_cnn.expected.npy").astype(np.float32))


def test_the_interpreter_keeps_its_own_copy_of_the_model():
    content = bytearray(litecvt.convert(FIXTURES / "digits_cnn.onnx"))
    interp = litecvt.Interpreter(model_content=content)
    content[:] = bytes(len(content))  # the caller's buffer may change or go away
    del content
    gc.collect()
    x = fixture_input("digits_cnn")
    expected = np.load(FIXTURES / "digits_cnn.expected.npy").astype(np.float32)
    for _ in range(2):
        (y,) = run(interp, x)
        assert_float_close(y, expected)


def test_interpreter_errors():
    model = litecvt.convert(FIXTURES / "digits_cnn.onnx")
    interp = litecvt.Interpreter(model_content=model)
    inp = interp.get_input_details()[0]
    with pytest.raises(ValueError, match="FLOAT64"):
        interp.set_tensor(inp["index"], np.zeros(inp["shape"]))
    with pytest.raises(ValueError, match="dimension"):
        interp.set_tensor(inp["index"], np.zeros((1, 2), np.float32))
    with pytest.raises(ValueError, match="not an input"):
        interp.set_tensor(interp.get_output_details()[0]["index"], np.zeros(1, np.float32))
    with pytest.raises(ValueError, match="only -1 dimensions"):
        interp.resize_tensor_input(inp["index"], [4, 1, 8, 8])
    interp.resize_tensor_input(inp["index"], list(inp["shape"]))
    with pytest.raises(ValueError):
        litecvt.Interpreter(model_content=b"not a model")
    with pytest.raises(ValueError):
        litecvt.Interpreter()


def test_resize_tensor_input_runs_a_dynamic_length_model_as_litert():
    tf_dir = FIXTURES / "tf"
    interp = litecvt.Interpreter(model_path=tf_dir / "dynamic_length.tflite")
    (inp,) = interp.get_input_details()
    np.testing.assert_array_equal(inp["shape_signature"], [1, -1])
    out = interp.get_output_details()[0]["index"]
    # As stored ([1, 1]) the first convolution (filter 5, VALID) cannot run: resize first.
    with pytest.raises(RuntimeError, match="resize"):
        interp.allocate_tensors()
    with pytest.raises(RuntimeError, match="resize"):
        interp.invoke()
    for n in (64, 203, 64):
        interp.resize_tensor_input(inp["index"], [1, n], strict=True)
        interp.allocate_tensors()
        assert list(interp.get_input_details()[0]["shape"]) == [1, n]
        interp.set_tensor(inp["index"], np.load(tf_dir / f"dynamic_length.len{n}.input0.npy"))
        interp.invoke()
        assert_float_close(interp.get_tensor(out), np.load(tf_dir / f"dynamic_length.len{n}.litert.npy"))
    # Only the -1 dimension may change; a refused resize leaves the interpreter as it was.
    with pytest.raises(ValueError, match="only -1 dimensions"):
        interp.resize_tensor_input(inp["index"], [2, 64])
    with pytest.raises(ValueError, match="not an input"):
        interp.resize_tensor_input(out, [1, 3])
    assert list(interp.get_input_details()[0]["shape"]) == [1, 64]
    # The arena may move: not while a view of it is alive.
    view = interp.tensor(inp["index"])()
    with pytest.raises(RuntimeError, match="reference"):
        interp.resize_tensor_input(inp["index"], [1, 203])
    del view
    gc.collect()
    interp.resize_tensor_input(inp["index"], [1, 203])


def test_reset_all_variables_restarts_a_streaming_model():
    tf_dir = FIXTURES / "tf"
    frames = np.load(tf_dir / "streaming_state.input0.npy")
    want = np.load(tf_dir / "streaming_state.litert.npy")
    interp = litecvt.Interpreter(model_path=tf_dir / "streaming_state.tflite")
    inp = interp.get_input_details()[0]["index"]
    out = interp.get_output_details()[0]["index"]

    def run_steps(count):
        for x, w in zip(frames[:count], want[:count]):
            interp.set_tensor(inp, x)
            interp.invoke()
            assert_float_close(interp.get_tensor(out), w)

    run_steps(len(frames))
    interp.reset_all_variables()
    run_steps(5)


def test_lstm_sequence_streams_its_state_as_litert():
    zoo = FIXTURES / "zoo"
    x = np.load(zoo / "lstm_2layer.input.npy").astype(np.float32)
    with pytest.warns(UserWarning, match="variable tensors"):
        data = litecvt.convert(zoo / "lstm_2layer.onnx", lstm="sequence")
    ours, theirs = litecvt.Interpreter(model_content=data), litert(data)
    ours.allocate_tensors()

    def invoke(interp):
        interp.set_tensor(interp.get_input_details()[0]["index"], x)
        interp.invoke()
        return interp.get_tensor(interp.get_output_details()[0]["index"])

    first = invoke(ours)
    assert_float_close(first, invoke(theirs))
    assert_float_close(first, np.load(zoo / "lstm_2layer.expected.npy"))
    # The next invoke continues the sequence in both runtimes.
    second = invoke(ours)
    assert_float_close(second, invoke(theirs))
    assert np.max(np.abs(second - first)) > 1e-6
    theirs.reset_all_variables()
    assert_float_close(invoke(theirs), first)


def test_conversion_errors_name_the_node():
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Erf", ["x"], ["y"], name="my_erf_node")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(litecvt.ConversionError, match="my_erf_node") as e:
        litecvt.convert(model)
    assert "Erf" in str(e.value)
    assert isinstance(e.value, ValueError)
    with pytest.raises(litecvt.ConversionError, match="shape"):
        litecvt.convert(
            FIXTURES / "digits_cnn.onnx",
            quantize="int8",
            representative_dataset=[[np.zeros((1, 3), np.float32)]],
        )
    with pytest.raises(litecvt.ConversionError, match="input 'nope'"):
        litecvt.convert(
            FIXTURES / "digits_cnn.onnx",
            quantize="int8",
            representative_dataset=[{"nope": np.zeros((1, 1, 8, 8), np.float32)}],
        )
    with pytest.raises(litecvt.ConversionError, match="int16x8"):
        litecvt.convert(FIXTURES / "digits_cnn.onnx", quantize="int16x8")
