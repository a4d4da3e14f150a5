#!/usr/bin/env python3
"""Interop check: models written by `litecvt` must run in the official LiteRT (TFLite) interpreter and
give the same results as `literun`.

    pip install -r tests/interop/requirements.txt
    python3 tests/interop/litert_check.py --litecvt target/debug/litecvt [--fixtures fixtures] [--workdir DIR]

For every fixture model (fixtures/{digits_cnn,mobilenetv2_block,attention_block}.onnx, every
fixtures/ops/*.onnx and every fixtures/zoo/*.onnx):

  1. litecvt convert MODEL.onnx -o W/name.lite [extra args, e.g. --input-shape for the dynamic model]
  2. litecvt run W/name.lite --input input=X.npy [--input input2=X2.npy] --output-dir W/name.out/
     (writes one <output_name>.npy per output; '/' and ':' in names are replaced by '_')
  3. load W/name.lite in ai_edge_litert's Interpreter (fallback: tflite_runtime), feed the same inputs
     (ONNX NCHW layout as stored in the .npy; an NHWC model input is fed the transposed array), and compare
     every output with literun's: max|a-b| / max(max|b|, 1e-6) <= --tol (1e-5) for floats, exact for ints.

`--modes float,fp16,int8w,int8` also checks the quantized conversions (int8w: weights only, hybrid
kernels, checked against LiteRT's default XNNPACK delegate whose per-row input quantization they
follow; int8: full integer, calibrated on calibration/<model> or on the op's own test input). Full int8
is bit-exact against LiteRT's reference kernels (`--resolver ref`); against its optimized kernels,
`--int8-steps N` allows N output quantization steps where those round ties differently, and
`--int8-min-snr DB` accepts larger differences when literun and LiteRT still agree to DB, or to 3 dB
better than literun's output agrees with the float model where quantization itself costs more (a
one-step tie difference in an early layer of a deep model grows through the later ones). Beyond
those, an output equal to what LiteRT's own reference kernels compute passes (their optimized kernels
then differ from their reference ones as much: an int8 LayerNorm and softmax amplify a tie). `--modes int16x8,int16x8io`
checks int16 activations with int8 weights the same way (both allowances apply to int16 outputs too).
Where a float op's output is quantized again inside the model (a QUANTIZE after a float island, or a
hybrid layer reading it: weights-only files, LSTM gates left float in int16x8), the two runtimes'
float kernels (~1e-7 apart) can round that value across a quantization step in one runtime only, with
no integer kernel differing: such files pass at `--float-requantized-min-snr` (50 dB) agreement.

`--modes lstmseq` converts the models named *lstm* with `--lstm sequence` (UNIDIRECTIONAL_SEQUENCE_LSTM,
whose state starts at zero in a fresh interpreter): LiteRT must also match onnxruntime's stored outputs
(`--ort-tol`, 1e-4), and the models in LSTM_SEQUENCE_REFUSED must be refused naming the reason.

Models in EXPECTED_UNSUPPORTED must instead make `litecvt convert` exit non-zero with a message that
names the op. Prints one line per model and a final "N passed, N failed" line; exits 1 on any failure.
For information, the difference between LiteRT and onnxruntime's reference (<name>.expected.npy) is shown
too (not gated: float kernels legitimately differ from onnxruntime by more than 1e-5 in places).

`--qdq` checks the already-quantized models of fixtures/qdq/ (fixtures/make_qdq.py) instead, in their
default conversion (modes qdq, qdqio): QDQ models become full int8 with their own parameters (bit-exact
against `--resolver ref`), dynamic-quantized ones int8 weights-only.

`--self-test` checks only the LiteRT half (no litecvt needed): it builds two tiny .tflite files with the
flatbuffers schema bundled in ai_edge_litert (one with a SignatureDef, one without) and runs them.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

MAIN_MODELS = ["digits_cnn", "mobilenetv2_block", "attention_block"]

# model name -> op that the converter must name in its error message
EXPECTED_UNSUPPORTED = {
    "erf": "Erf",  # standalone Erf has no TFLite builtin (Erf inside the GELU pattern is fine)
}

# extra `litecvt convert` arguments per model
CONVERT_ARGS = {
    "dynamic": ["--input-shape", "input=1,4,6,6"],  # symbolic batch dim 'N'
}

# quantization modes: name -> extra `litecvt convert` arguments ("{calib}" = calibration data)
MODES = {
    "float": [],
    "fp16": ["--quantize", "fp16"],
    "int8w": ["--quantize", "int8"],  # weights only: hybrid kernels
    "int8": ["--quantize", "int8", "--calibration", "{calib}"],  # full integer
    "int8io": ["--quantize", "int8", "--calibration", "{calib}", "--io-type", "int8"],  # integer I/O too
    # int16 activations, int8 weights (ops without a 16x8 kernel stay float)
    "int16x8": ["--quantize", "int16x8", "--calibration", "{calib}"],
    "int16x8io": ["--quantize", "int16x8", "--calibration", "{calib}", "--io-type", "int16"],
    # already-quantized models (--qdq): the default conversion is full int8 with the model's
    # parameters (QDQ) or int8 weights-only (dynamic)
    "qdq": [],
    "qdqio": ["--io-type", "int8"],
    # LSTMs as UNIDIRECTIONAL_SEQUENCE_LSTM (models named *lstm* only): one invoke of a fresh
    # interpreter must also match onnxruntime (--ort-tol), since the state starts at zero
    "lstmseq": ["--lstm", "sequence"],
}

# model name -> what the error must name when `--lstm sequence` refuses the model's LSTM
# (its cell state Y_c is an output, or its initial state is not zero)
LSTM_SEQUENCE_REFUSED = {
    "lstm_forward": "Y_c",
    "lstm_reverse_states": "initial_h",
    "lstm_bidirectional_layout1": "Y_c",
}

# calibration data of the main fixtures (the op zoo calibrates on its own test input)
CALIBRATION = {n: ROOT / "calibration" / d for n, d in
               [("digits_cnn", "digits"), ("mobilenetv2_block", "mobilenetv2_block"),
                ("attention_block", "attention_block")]}

# integer outputs are compared exactly
INT_KINDS = "iub"


# ------------------------------------------------------------------------------------------------
# LiteRT side
# ------------------------------------------------------------------------------------------------
def load_interpreter_cls():
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        return Interpreter, OpResolverType, "ai_edge_litert"
    except ImportError:
        from tflite_runtime.interpreter import Interpreter, OpResolverType  # type: ignore

        return Interpreter, OpResolverType, "tflite_runtime"


def sanitize(name: str) -> str:
    """How literun names an output file: the tensor name with '/' and ':' replaced by '_'."""
    return name.replace("/", "_").replace(":", "_")


def make_interpreter(path: Path, resolver: str, notes: list | None = None):
    Interpreter, OpResolverType, _ = load_interpreter_cls()
    kind = {
        "builtin": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,  # optimized kernels, no XNNPACK
        "ref": OpResolverType.BUILTIN_REF,  # reference kernels
        "auto": OpResolverType.AUTO,  # default (XNNPACK delegate where possible)
    }[resolver]
    try:
        return Interpreter(model_path=str(path), num_threads=1, experimental_op_resolver_type=kind)
    except ValueError as e:
        # LiteRT's reference resolver registers DEPTH_TO_SPACE at version 1 only, though its int8
        # form is version 2 (op_version.cc; the builtin resolver registers both, and the reference
        # kernel takes int8): a copy that says version 1 runs with the reference kernels.
        if resolver != "ref" or "'DEPTH_TO_SPACE' version '2'" not in str(e):
            raise
        if notes is not None:
            notes.append("DEPTH_TO_SPACE run as version 1 (LiteRT's reference resolver has no version 2)")
        return Interpreter(model_path=str(depth_to_space_v1(path)), num_threads=1,
                           experimental_op_resolver_type=kind)


def depth_to_space_v1(path: Path) -> Path:
    """A copy of the .tflite file whose DEPTH_TO_SPACE operator code says version 1."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as s

    m = s.ModelT.InitFromPackedBuf(bytearray(path.read_bytes()), 0)
    for code in m.operatorCodes:
        if max(code.builtinCode, code.deprecatedBuiltinCode) == s.BuiltinOperator.DEPTH_TO_SPACE:
            code.version = 1
    b = flatbuffers.Builder(0)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    out = path.with_suffix(".d2s_v1.tflite")
    out.write_bytes(bytes(b.Output()))
    return out


def _adapt_layout(arr: np.ndarray, want_shape, want_dtype, name: str, notes: list, quant=None):
    """Feed the stored (ONNX/NCHW) array; transpose to NHWC only if that is what the model declares."""
    want_shape = tuple(int(d) for d in want_shape)
    if arr.shape != want_shape:
        if arr.ndim == 4 and arr.transpose(0, 2, 3, 1).shape == want_shape:
            arr = arr.transpose(0, 2, 3, 1)
            notes.append(f"input {name} fed as NHWC")
        elif arr.size == int(np.prod(want_shape)) and arr.squeeze().shape == np.empty(want_shape).squeeze().shape:
            arr = arr.reshape(want_shape)
        else:
            raise ValueError(f"input {name!r}: model wants shape {list(want_shape)}, data has {list(arr.shape)}")
    if np.dtype(want_dtype) in (np.int8, np.int16) and arr.dtype.kind == "f" and quant and quant[0] > 0:
        # an int8/int16 model input (--io-type): quantize as literun's `run` does (ties away from
        # zero, as TFLite's QUANTIZE; np.round would round them to even)
        scale, zp = quant
        info = np.iinfo(want_dtype)
        v = arr / np.float32(scale)
        v = np.sign(v) * np.floor(np.abs(v) + 0.5)
        return np.ascontiguousarray(np.clip(v + zp, info.min, info.max).astype(want_dtype))
    if np.dtype(want_dtype) != arr.dtype:
        if np.dtype(want_dtype).kind != arr.dtype.kind:
            raise ValueError(f"input {name!r}: model wants {np.dtype(want_dtype)}, data is {arr.dtype} "
                             "(quantized I/O is not handled by this check)")
        arr = arr.astype(want_dtype)
    return np.ascontiguousarray(arr)


def run_litert(path: Path, feeds: dict[str, np.ndarray], resolver: str = "builtin"):
    """Run a .tflite/.lite file. Returns (outputs: dict name -> array, notes: list[str]).

    Uses the first SignatureDef when there is one (inputs/outputs by signature name), otherwise the
    subgraph's inputs by name (falling back to order) and outputs by tensor name.
    """
    notes: list[str] = []
    interp = make_interpreter(path, resolver, notes)
    feed_names = list(feeds)
    sigs = interp.get_signature_list()
    if sigs:
        key = next(iter(sigs))
        runner = interp.get_signature_runner(key)
        in_det = runner.get_input_details()  # name -> details
        names = list(in_det)
        if set(names) == set(feed_names):
            mapping = {n: n for n in names}
        elif len(names) == len(feed_names):
            mapping = dict(zip(names, feed_names))
            notes.append(f"signature inputs {names} mapped by position")
        else:
            raise ValueError(f"signature inputs {names} vs data {feed_names}")
        args = {n: _adapt_layout(feeds[mapping[n]], in_det[n]["shape"], in_det[n]["dtype"], n, notes,
                                 in_det[n].get("quantization")) for n in names}
        outs = runner(**args)
        return {k: np.asarray(v) for k, v in outs.items()}, notes
    in_det = interp.get_input_details()
    for d in in_det:
        interp.resize_tensor_input(d["index"], d["shape"])
    interp.allocate_tensors()
    det_names = [d["name"] for d in in_det]
    if set(det_names) == set(feed_names):
        order = det_names
    elif len(det_names) == len(feed_names):
        order = feed_names
        notes.append(f"inputs {det_names} mapped by position")
    else:
        raise ValueError(f"model inputs {det_names} vs data {feed_names}")
    for d, fname in zip(in_det, order):
        interp.set_tensor(d["index"], _adapt_layout(feeds[fname], d["shape"], d["dtype"], d["name"], notes,
                                                    d.get("quantization")))
    interp.invoke()
    return {d["name"]: np.array(interp.get_tensor(d["index"])) for d in interp.get_output_details()}, notes


# ------------------------------------------------------------------------------------------------
# comparison
# ------------------------------------------------------------------------------------------------
def max_rel_err(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        same = np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(a[~np.isnan(a)], b[~np.isnan(b)])
        return 0.0 if same else float("inf")
    return float(np.max(np.abs(a - b), initial=0.0) / max(float(np.max(np.abs(b), initial=0.0)), 1e-6))


def compare(got: np.ndarray, ref: np.ndarray, tol: float):
    """Returns (ok, err, message). got = LiteRT, ref = literun."""
    if got.shape != ref.shape:
        if got.size == ref.size and got.squeeze().shape == ref.squeeze().shape:
            got = got.reshape(ref.shape)
        else:
            return False, float("inf"), f"shape {list(got.shape)} (LiteRT) vs {list(ref.shape)} (literun)"
    if got.dtype.kind in INT_KINDS or ref.dtype.kind in INT_KINDS:
        if got.dtype.kind in INT_KINDS and ref.dtype.kind in INT_KINDS:
            bad = int(np.sum(got.astype(np.int64) != ref.astype(np.int64)))
            return bad == 0, float(bad), "" if bad == 0 else f"{bad} integer elements differ"
        return False, float("inf"), f"dtype {got.dtype} (LiteRT) vs {ref.dtype} (literun)"
    err = max_rel_err(got, ref)
    return err <= tol, err, "" if err <= tol else f"max rel err {err:.3g} > {tol:g}"


# ------------------------------------------------------------------------------------------------
# driver
# ------------------------------------------------------------------------------------------------
def discover(fixtures: Path):
    models = []
    for n in MAIN_MODELS:
        p = fixtures / f"{n}.onnx"
        if p.exists():
            models.append((n, p))
        else:
            print(f"warning: {p} not found", file=sys.stderr)
    for p in sorted((fixtures / "ops").glob("*.onnx")):
        models.append((p.stem, p))
    for p in sorted((fixtures / "zoo").glob("*.onnx")):
        models.append((p.stem, p))
    return models


def discover_qdq(fixtures: Path):
    """fixtures/qdq/*.onnx (made by fixtures/make_qdq.py), except the float reference models."""
    return [(f"qdq_{p.stem}", p) for p in sorted((fixtures / "qdq").glob("*.onnx"))
            if not p.stem.endswith(".float")]


def input_files(model: Path):
    """input.npy -> graph input 'input', input2.npy -> 'input2', ...; zoo models name the files after
    their graph inputs (<name>.<input>.npy)."""
    stem = model.with_suffix("")
    feeds = {}
    if model.parent.name == "zoo":
        for f in sorted(model.parent.glob(f"{model.stem}.*.npy")):
            key = f.name[len(model.stem) + 1:-len(".npy")]
            if not key.startswith("expected"):
                feeds[key] = f
        return feeds
    for f in sorted(model.parent.glob(f"{model.stem}.input*.npy")):
        m = re.fullmatch(re.escape(model.stem) + r"\.(input\d*)\.npy", f.name)
        if m:
            feeds[m.group(1)] = f
    if "input" not in feeds:
        # fixtures/qdq/<model>.<variant>.onnx reads <model>'s input (fixtures/ or fixtures/qdq/)
        base = model.name.split(".")[0]
        for d in (model.parent, model.parent.parent):
            if (d / f"{base}.input.npy").exists():
                feeds["input"] = d / f"{base}.input.npy"
                break
    if "input" not in feeds:
        raise FileNotFoundError(f"{stem}.input.npy missing")
    return dict(sorted(feeds.items(), key=lambda kv: (len(kv[0]), kv[0])))


def run_cmd(cmd, timeout):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr, time.time() - t0
    except subprocess.TimeoutExpired as e:
        return -999, e.stdout or "", f"timed out after {timeout}s", time.time() - t0


def indent(text: str, n=400) -> str:
    text = text.strip()
    if len(text) > n * 4:
        text = text[: n * 2] + "\n...\n" + text[-n * 2 :]
    return "\n".join("      | " + line for line in text.splitlines()) if text else "      | (no output)"


def calibration_for(name, model, work):
    if name in CALIBRATION:
        return CALIBRATION[name]
    if model.with_suffix(".calib.npz").exists():  # zoo models ship a realistic calibration set
        return model.with_suffix(".calib.npz")
    npz = work / f"{name}.calib.npz"
    np.savez(npz, **{k: np.load(f) for k, f in input_files(model).items()})
    return npz


def output_steps(lite: Path) -> dict:
    """Output name -> scale of the int8 tensor its DEQUANTIZE reads (one quantization step)."""
    interp = make_interpreter(lite, "ref")
    by_index = {d["index"]: d for d in interp.get_tensor_details()}
    steps = {}
    for op in interp._get_ops_details():  # noqa: SLF001 - the public API has no op list
        if op["op_name"] == "DEQUANTIZE" and len(op["inputs"]) == 1:
            src, out = by_index.get(int(op["inputs"][0])), by_index.get(int(op["outputs"][0]))
            if src and out and src["quantization"][0] > 0:
                steps[out["name"]] = float(src["quantization"][0])
    return steps


HYBRID_CAPABLE = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "BATCH_MATMUL"}


def requantized_float_values(lite: Path) -> bool:
    """Whether a value a float op computed is quantized again inside the model: a QUANTIZE of a
    float op's output, or a hybrid layer (float input, int8 weights, the input quantized at run
    time) reading one. literun's and LiteRT's float kernels differ by ~1e-7, so such a value
    can round across a quantization step in one runtime and not the other, and later layers
    carry the step on: the two can differ without any integer kernel differing."""
    interp = make_interpreter(lite, "ref")
    by_index = {d["index"]: d for d in interp.get_tensor_details()}
    ops = interp._get_ops_details()  # noqa: SLF001 - the public API has no op list
    producer = {int(o): op["op_name"] for op in ops for o in op["outputs"]}
    for op in ops:
        if not len(op["inputs"]):
            continue
        x = int(op["inputs"][0])
        src = producer.get(x)
        if src is None or src == "DEQUANTIZE" or by_index[x]["dtype"] != np.float32:
            continue
        hybrid = (op["op_name"] in HYBRID_CAPABLE and len(op["inputs"]) > 1
                  and int(op["inputs"][1]) >= 0 and by_index[int(op["inputs"][1])]["dtype"] == np.int8)
        if op["op_name"] == "QUANTIZE" or hybrid:
            return True
    return False


def output_quantization(lite: Path) -> dict:
    """Output name -> (scale, zero point) of int8 and int16 outputs."""
    interp = make_interpreter(lite, "ref")
    return {d["name"]: (float(d["quantization"][0]), int(d["quantization"][1]))
            for d in interp.get_output_details() if d["dtype"] in (np.int8, np.int16)}


def snr_db(ref: np.ndarray, test: np.ndarray) -> float:
    r, t = ref.astype(np.float64), test.astype(np.float64).reshape(ref.shape)
    return 10 * np.log10(max(float(np.sum(r * r)), 1e-30) / max(float(np.sum((t - r) ** 2)), 1e-30))


def quantization_snr(model: Path, lname: str, literun_out: np.ndarray, quant: dict) -> float | None:
    """SNR of literun's (dequantized) output against the float model's (onnxruntime's
    <name>.expected.npy), for the model's first output: how much quantization itself costs."""
    exp = model.with_suffix("").parent / f"{model.stem}.expected.npy"
    if not exp.exists():
        return None
    ref = np.load(exp)
    out = literun_out.astype(np.float64)
    if lname in quant:
        scale, zp = quant[lname]
        out = (out - zp) * scale
    if out.size != ref.size:
        return None
    if out.shape != ref.shape and out.ndim == 4 and out.transpose(0, 3, 1, 2).shape == ref.shape:
        out = out.transpose(0, 3, 1, 2)
    return snr_db(ref, out.reshape(ref.shape))


def output_zero_points(lite: Path) -> dict:
    """Output name -> zero point of int8 and int16 outputs."""
    interp = make_interpreter(lite, "ref")
    return {d["name"]: int(d["quantization"][1]) for d in interp.get_output_details()
            if d["dtype"] in (np.int8, np.int16)}


def check_model(name, model, litecvt, work, args, mode="float"):
    """Returns (ok: bool, status: str, err: float|None, detail: str)."""
    lite = work / f"{name}.{mode}.lite"
    extra = [a.replace("{calib}", str(calibration_for(name, model, work))) if "{calib}" in a else a
             for a in MODES[mode]]
    conv = litecvt + ["convert", str(model), "-o", str(lite)] + CONVERT_ARGS.get(name, []) + extra
    rc, out, err, _ = run_cmd(conv, args.timeout)

    refused = EXPECTED_UNSUPPORTED.get(name) or (LSTM_SEQUENCE_REFUSED.get(name) if mode == "lstmseq" else None)
    if refused:
        op = refused
        text = out + err
        if rc == 0:
            return False, "FAIL", None, f"expected `litecvt convert` to reject {op}, but it succeeded"
        if rc == -999:
            return False, "FAIL", None, "convert timed out\n" + indent(err)
        if not re.search(rf"\b{re.escape(op)}\b", text, flags=re.IGNORECASE):
            return False, "FAIL", None, f"convert failed (exit {rc}) but its message does not name {op}:\n" + indent(text)
        first = next((line for line in (err or out).splitlines() if op.lower() in line.lower()), "").strip()
        return True, "XFAIL", None, f"rejected as expected: {first[:160]}"

    if rc != 0 or not lite.exists():
        return False, "FAIL", None, f"`{shlex.join(conv)}` exited {rc}\n" + indent(err or out)

    feeds_files = input_files(model)
    outdir = work / f"{name}.{mode}.out"
    if outdir.exists():
        shutil.rmtree(outdir)
    outdir.mkdir(parents=True)
    run = litecvt + ["run", str(lite)]
    for k, f in feeds_files.items():
        run += ["--input", f"{k}={f}"]
    run += ["--output-dir", str(outdir)]
    rc, out, err, _ = run_cmd(run, args.timeout)
    if rc != 0:
        return False, "FAIL", None, f"`{shlex.join(run)}` exited {rc}\n" + indent(err or out)
    literun_outs = {f.stem: np.load(f) for f in sorted(outdir.glob("*.npy"))}
    if not literun_outs:
        return False, "FAIL", None, f"literun wrote no .npy into {outdir}"

    feeds = {k: np.load(f) for k, f in feeds_files.items()}
    # litecvt's weights-only files have per-channel hybrid convolutions, whose float input
    # literun quantizes as LiteRT's default XNNPACK delegate does (a pointwise convolution per
    # pixel, not per image as LiteRT's builtin and reference kernels): checked against XNNPACK.
    try:
        lrt, notes = run_litert(lite, feeds, "auto" if mode == "int8w" else args.resolver)
    except Exception as e:  # noqa: BLE001 - any interpreter error is a failure of the written model
        msg = str(e).strip()
        return False, "FAIL", None, "LiteRT could not load/run the model:\n" + indent(msg)

    # pair LiteRT outputs with literun's files by (sanitized) name
    pairs, problems = [], []
    if len(lrt) != len(literun_outs):
        problems.append(f"{len(lrt)} LiteRT outputs {sorted(lrt)} vs {len(literun_outs)} literun files "
                        f"{sorted(literun_outs)}")
    unmatched = dict(literun_outs)
    lrt_left = {}
    for lname, arr in lrt.items():
        key = sanitize(lname)
        if key in unmatched:
            pairs.append((lname, arr, unmatched.pop(key)))
        else:
            lrt_left[lname] = arr
    if lrt_left and len(lrt_left) == 1 and len(unmatched) == 1:
        (lname, arr), (_, ref) = next(iter(lrt_left.items())), next(iter(unmatched.items()))
        notes.append(f"output {lname!r} paired with literun's {next(iter(unmatched))}.npy")
        pairs.append((lname, arr, ref))
    elif lrt_left:
        problems.append(f"LiteRT outputs {sorted(lrt_left)} have no literun file (have {sorted(unmatched)})")

    full_int8 = ((mode.startswith("int8") and mode != "int8w") or mode.startswith("int16x8")
                 or (mode.startswith("qdq") and ".dynamic" not in name))
    steps = output_steps(lite) if (full_int8 and args.int8_steps > 0) else {}
    zero_points = output_zero_points(lite)
    requantized = None  # computed on the first mismatch
    lrt_ref = None  # LiteRT's reference kernels' outputs, run on the first mismatch
    worst = 0.0
    for lname, arr, ref in pairs:
        ok, e, msg = compare(arr, ref, args.tol)
        fallback = msg
        if not ok and args.int8_steps > 0 and arr.dtype == ref.dtype and arr.dtype in (np.int8, np.int16):
            n = int(np.max(np.abs(arr.astype(np.int64).reshape(ref.shape) - ref.astype(np.int64)), initial=0))
            ok = n <= args.int8_steps
            msg = "" if ok else f"{msg}; int8 outputs differ by {n} > {args.int8_steps}"
        elif not ok and lname in steps:
            # LiteRT's optimized int8 kernels round some ties differently from its reference
            # kernels (which literun matches exactly): allow a few output quantization steps.
            diff = float(np.max(np.abs(arr.astype(np.float64).reshape(ref.shape) - ref), initial=0.0))
            n = diff / steps[lname]
            ok = n <= args.int8_steps + 1e-3
            msg = "" if ok else f"{msg}; {n:.2f} output steps > {args.int8_steps}"
            if ok:
                notes.append(f"{lname}: {n:.0f} int8 step(s) from literun")
        if not ok and args.float_requantized_min_snr > 0:
            if requantized is None:
                requantized = requantized_float_values(lite)
            if requantized:
                zp = zero_points.get(lname, 0)
                a = arr.astype(np.float64).reshape(ref.shape) - zp
                r = ref.astype(np.float64) - zp
                snr = 10 * np.log10(max(float(np.sum(r * r)), 1e-30) / max(float(np.sum((a - r) ** 2)), 1e-30))
                if snr >= args.float_requantized_min_snr:
                    ok = True
                    notes.append(f"{lname}: {fallback.strip('; ')}, but a float op's output is quantized "
                                 f"again in the model and the runtimes agree to {snr:.1f} dB")
                    msg = ""
        if not ok and args.int8_min_snr > 0 and full_int8:
            # In deep models a one-step tie difference early on (e.g. in XNNPACK's convolutions) grows
            # through later layers; require instead that the two runtimes agree far better than int8
            # agrees with float: to --int8-min-snr, or where quantization itself costs more, to 3 dB
            # better than literun's output agrees with the float model.
            zp = zero_points.get(lname, 0)
            a = arr.astype(np.float64).reshape(ref.shape) - zp
            r = ref.astype(np.float64) - zp
            snr = snr_db(r, a)
            need = args.int8_min_snr
            qsnr = quantization_snr(model, lname, ref, output_quantization(lite)) if len(pairs) == 1 else None
            if qsnr is not None:
                need = min(need, qsnr + 3.0)
            ok = snr >= need
            why = f"quantization itself {qsnr:.1f} dB" if qsnr is not None else ""
            if ok:
                notes.append(f"{lname}: {fallback.strip('; ')}, but SNR {snr:.1f} dB >= {need:.1f} {why}".rstrip())
            else:
                msg = f"{msg}; SNR {snr:.1f} dB < {need:.1f} {why}".rstrip()
        if not ok and full_int8 and args.resolver != "ref":
            # LiteRT's optimized kernels can differ from its own reference kernels by more than
            # the allowances (a tie rounded differently early, grown through an int8 LayerNorm
            # and softmax): literun is right when it is what the reference kernels compute.
            if lrt_ref is None:
                lrt_ref, _ = run_litert(lite, feeds, "ref")
            want = lrt_ref.get(lname)
            if want is not None and compare(np.asarray(want), ref, args.tol)[0]:
                ok = True
                notes.append(f"{lname}: {msg.strip('; ')}, but equal to LiteRT's reference kernels' output "
                             f"(exact for ints, {args.tol:g} for floats), which differ from its optimized "
                             f"ones as much")
        worst = max(worst, e)
        if not ok:
            problems.append(f"output {lname!r}: {msg}")

    if mode == "lstmseq":
        # The state starts at zero in a fresh interpreter: every output is onnxruntime's.
        for lname, arr in lrt.items():
            key = sanitize(lname)
            suffix = key[len("output"):] if key.startswith("output") else None
            exp = model.parent / f"{model.stem}.expected{suffix}.npy" if suffix is not None else None
            if exp is None or not exp.exists():
                problems.append(f"output {lname!r}: no onnxruntime reference {exp}")
                continue
            e = max_rel_err(np.asarray(arr, dtype=np.float64).reshape(np.load(exp).shape), np.load(exp))
            if not e <= args.ort_tol:
                problems.append(f"output {lname!r}: LiteRT differs from onnxruntime by {e:.2e} > {args.ort_tol:g}")

    # informational: LiteRT vs onnxruntime reference (first output)
    info = ""
    exp = model.with_suffix("").parent / f"{model.stem}.expected.npy"
    if exp.exists() and pairs:
        ref_ort = np.load(exp)
        first = pairs[0][1]
        if "output" in lrt:
            first = lrt["output"]
        if first.size == ref_ort.size and first.dtype.kind == "f" and ref_ort.dtype.kind == "f":
            if first.shape != ref_ort.shape and first.ndim == 4 and first.transpose(0, 3, 1, 2).shape == ref_ort.shape:
                first = first.transpose(0, 3, 1, 2)
            if first.shape == ref_ort.shape:
                info = f"  (vs onnxruntime {max_rel_err(first, ref_ort):.1e})"
    detail = "; ".join(notes)
    if problems:
        return False, "FAIL", worst, "\n".join("      " + p for p in problems) + (f"\n      ({detail})" if detail else "")
    return True, "PASS", worst, (detail + info).strip()


def self_test(args) -> int:
    """Exercise the LiteRT half on hand-built .tflite files (no litecvt needed)."""
    import flatbuffers

    try:
        from ai_edge_litert import schema_py_generated as s
    except ImportError:
        print("self-test needs ai_edge_litert (it bundles the TFLite schema)")
        return 1

    def build(with_signature: bool) -> bytes:
        # output = relu(input + input2) ; output_1 = input * input  (ADD with fused RELU, MUL)
        m = s.ModelT()
        m.version = 3
        codes = []
        for op in (s.BuiltinOperator.ADD, s.BuiltinOperator.MUL):
            oc = s.OperatorCodeT()
            oc.builtinCode = op
            oc.deprecatedBuiltinCode = op
            oc.version = 1
            codes.append(oc)
        m.operatorCodes = codes
        m.buffers = [s.BufferT() for _ in range(5)]
        shape = [1, 4, 6, 6]
        tensors = []
        for i, n in enumerate(["input", "input2", "output", "/mul/Mul_output:0"]):
            t = s.TensorT()
            t.shape = shape
            t.type = s.TensorType.FLOAT32
            t.buffer = i + 1
            t.name = n
            tensors.append(t)
        add = s.OperatorT()
        add.opcodeIndex, add.inputs, add.outputs = 0, [0, 1], [2]
        add.builtinOptionsType = s.BuiltinOptions.AddOptions
        add.builtinOptions = s.AddOptionsT()
        add.builtinOptions.fusedActivationFunction = s.ActivationFunctionType.RELU
        mul = s.OperatorT()
        mul.opcodeIndex, mul.inputs, mul.outputs = 1, [0, 0], [3]
        mul.builtinOptionsType = s.BuiltinOptions.MulOptions
        mul.builtinOptions = s.MulOptionsT()
        sg = s.SubGraphT()
        sg.tensors, sg.inputs, sg.outputs, sg.operators, sg.name = tensors, [0, 1], [2, 3], [add, mul], "main"
        m.subgraphs = [sg]
        if with_signature:
            sig = s.SignatureDefT()
            sig.signatureKey = "serving_default"
            sig.subgraphIndex = 0
            sig.inputs = [s.TensorMapT(), s.TensorMapT()]
            sig.outputs = [s.TensorMapT(), s.TensorMapT()]
            for tm, (nm, idx) in zip(sig.inputs + sig.outputs,
                                     [("input", 0), ("input2", 1), ("output", 2), ("/mul/Mul_output:0", 3)]):
                tm.name, tm.tensorIndex = nm, idx
            m.signatureDefs = [sig]
        b = flatbuffers.Builder(1024)
        b.Finish(m.Pack(b), file_identifier=b"TFL3")
        return bytes(b.Output())

    rng = np.random.default_rng(0)
    feeds = {"input": rng.standard_normal((1, 4, 6, 6)).astype(np.float32),
             "input2": rng.standard_normal((1, 4, 6, 6)).astype(np.float32)}
    want = {"output": np.maximum(feeds["input"] + feeds["input2"], 0), "_mul_Mul_output_0": feeds["input"] ** 2}
    _, _, which = load_interpreter_cls()
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        for sig in (True, False):
            path = Path(d) / f"selftest_{'sig' if sig else 'nosig'}.tflite"
            path.write_bytes(build(sig))
            outs, notes = run_litert(path, feeds, args.resolver)
            for name, arr in outs.items():
                ok, err, msg = compare(arr, want[sanitize(name)], args.tol)
                failures += not ok
                print(f"self-test {'signature' if sig else 'no signature':13s} {name:20s} "
                      f"{'PASS' if ok else 'FAIL'} max_rel_err={err:.2e} {msg}")
            if len(outs) != 2:
                failures += 1
                print(f"self-test: expected 2 outputs, got {sorted(outs)}")
    print(f"LiteRT half OK ({which})" if not failures else f"{failures} self-test failures")
    return 1 if failures else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--litecvt", help="path to the litecvt binary (or a quoted command, e.g. 'cargo run -q --')")
    ap.add_argument("--fixtures", default=str(ROOT / "fixtures"), help="fixtures directory (default: %(default)s)")
    ap.add_argument("--workdir", help="where .lite files and outputs go (default: a temporary dir, removed after)")
    ap.add_argument("--only", default="", help="comma-separated model names (or regexes) to check")
    ap.add_argument("--float-requantized-min-snr", type=float, default=50.0,
                    help="where a float op's output is quantized again (a QUANTIZE, or a hybrid layer reading it), "
                         "accept outputs agreeing to this SNR in dB: float kernels differ by ~1e-7 and a "
                         "quantizer can round that across a step (0: off; default %(default)g)")
    ap.add_argument("--tol", type=float, default=1e-5, help="max relative error for float outputs (default %(default)g)")
    ap.add_argument("--ort-tol", type=float, default=1e-4,
                    help="mode lstmseq: max relative error of LiteRT's outputs against onnxruntime's (default %(default)g)")
    ap.add_argument("--resolver", choices=["builtin", "ref", "auto"], default="builtin",
                    help="LiteRT kernels: builtin (optimized, no XNNPACK; default), ref (reference kernels), "
                         "auto (with the XNNPACK delegate)")
    ap.add_argument("--int8-steps", type=int, default=0,
                    help="full int8: allow this many output quantization steps between LiteRT and "
                         "literun (LiteRT's optimized kernels round some ties unlike its reference "
                         "kernels, which literun matches exactly; default %(default)s)")
    ap.add_argument("--int8-min-snr", type=float, default=0.0,
                    help="full int8: an output off by more than --int8-steps still passes when its SNR "
                         "against LiteRT is at least this (dB; tie differences accumulate in deep models)")
    ap.add_argument("--modes", default="float",
                    help=f"comma-separated conversion modes to check: {', '.join(MODES)} (default %(default)s)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per litecvt invocation")
    ap.add_argument("--self-test", action="store_true", help="only test the LiteRT half on hand-built models")
    ap.add_argument("--qdq", action="store_true",
                    help="check the already-quantized models of fixtures/qdq/ instead (modes qdq,qdqio: the "
                         "default conversion, full int8 with the model's parameters or int8 weights-only)")
    args = ap.parse_args()

    if args.self_test:
        return self_test(args)
    if not args.litecvt:
        ap.error("--litecvt is required (or use --self-test)")
    litecvt = shlex.split(args.litecvt)
    if len(litecvt) == 1:
        exe = shutil.which(litecvt[0]) or litecvt[0]
        if not Path(exe).exists():
            ap.error(f"litecvt binary not found: {litecvt[0]}")
        litecvt = [str(Path(exe).resolve())]

    fixtures = Path(args.fixtures).resolve()
    models = discover_qdq(fixtures) if args.qdq else discover(fixtures)
    if args.qdq and args.modes == "float":
        args.modes = "qdq,qdqio"
    if args.only:
        pats = [p for p in args.only.split(",") if p]
        models = [(n, p) for n, p in models if any(re.fullmatch(pat, n) for pat in pats)]
    if not models:
        print("no models selected")
        return 1

    tmp = None
    if args.workdir:
        work = Path(args.workdir).resolve()
        work.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="litert_check_")
        work = Path(tmp.name)

    _, _, which = load_interpreter_cls()
    print(f"litecvt: {shlex.join(litecvt)}\ninterpreter: {which} ({args.resolver} kernels)\nworkdir: {work}\n")
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        ap.error(f"unknown mode(s) {unknown}; known: {', '.join(MODES)}")
    passed = failed = 0
    width = max(len(n) for n, _ in models) + max(len(m) for m in modes) + 1
    for mode, (name, model) in [(m, nm) for m in modes for nm in models]:
        if mode == "qdqio" and name.endswith(".dynamic"):
            continue  # dynamic-quantized models convert to int8 weights-only: float interface
        if mode == "lstmseq" and "lstm" not in name:
            continue  # the option changes nothing without an LSTM
        try:
            ok, status, err, detail = check_model(name, model, litecvt, work, args, mode)
        except Exception as e:  # noqa: BLE001
            ok, status, err, detail = False, "FAIL", None, f"{type(e).__name__}: {e}"
        errs = "-" if err is None else f"{err:.2e}"
        line = f"{name + ' ' + mode:{width}s}  {status:5s}  max_rel_err={errs:9s}"
        if ok:
            passed += 1
            print(line + (f"  {detail}" if detail else ""))
        else:
            failed += 1
            print(line)
            for dl in detail.splitlines():
                print(dl if dl.startswith(" ") else "      " + dl)
        sys.stdout.flush()
    print(f"\n{passed} passed, {failed} failed")
    if tmp is not None:
        tmp.cleanup()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
