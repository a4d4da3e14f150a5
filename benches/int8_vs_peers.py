#!/usr/bin/env python3
"""Int8 accuracy of litecvt against ONNX Runtime's and TensorFlow's quantizers on real pretrained models.

    python3 benches/int8_vs_peers.py [--litecvt target/release/litecvt] [--only ID,ID]
        [--samples 16] [--held-out 16] [--min-snr 30] [--ort-memory-gb 3] [--cache target/real-models]
        [--tf-python /tmp/tfenv/bin/python] [--tf-timeout 900]
        [--work target/int8-vs-peers] [--markdown FILE] [--json FILE]

The models, their wheels and their input generators are those of scripts/real_models.py (imported,
not copied; models are downloaded into its cache, never committed). For each model:
  1. data: SAMPLES calibration samples (seeds 1..SAMPLES, written where `litecvt convert
     --calibration DIR` reads them: DIR/sample_SSS.npy, one subdirectory per input for several
     inputs) and HELD_OUT held-out samples (seeds 1000000+j, never used for calibration), all from
     the model's own generators; dynamic dimensions fixed with --input-shape as real_models.py does;
  2. reference: the float ONNX model run with ONNX Runtime on the held-out samples;
  3. litecvt full int8 (`--quantize int8 --calibration DIR`), run with `litecvt run`;
  4. litecvt int8 weights-only (`--quantize int8`);
  5. litecvt full int8 with `--min-snr MIN_SNR --accept-snr-miss` (automatic mixed precision);
  6. ONNX Runtime static quantization (quant_pre_process, then quantize_static: QDQ, per-channel,
     QInt8 activations and weights, same calibration samples) for MinMax, Entropy and Percentile,
     run with ONNX Runtime. ORT's quantizer gets the model as litecvt sees it: dynamic dimensions
     fixed, --input-value inputs made initializers, opset raised to 13 when older (per-channel QDQ
     needs it); pre-processing falls back to no symbolic shape inference, then to none; a
     quantize_static failure is retried once with QDQDisableWeightAdjustForInt32Bias; calibration is
     fed in groups (CalibStridedMinMax) only when all samples' intermediate tensors would exceed
     --ort-memory-gb; a "quantized" model without any quantized op counts as a failure;
  7. ONNX Runtime dynamic quantization (quantize_dynamic, QInt8 weights), the weights-only peer;
  8. with --tf-python (a Python with benches/tflite_requirements.txt; this script's own environment
     stays TensorFlow-free: the step runs this file with --tflite-worker there): onnx2tf turns the
     model ORT's quantizer gets (step 6's fixed-shape ONNX file, node names made valid TensorFlow
     scope names; simplified by onnxsim, as onnx2tf does) into a channels-last SavedModel, and TensorFlow's TFLiteConverter writes a float
     file (the layout check: it must match ONNX Runtime's float output), a dynamic-range file
     (Optimize.DEFAULT without data: the weights-only peer) and a full int8 file (Optimize.DEFAULT with
     the same calibration samples as representative_dataset, float I/O, TensorFlow's float fallback).
     LiteRT (its default CPU path, the XNNPACK delegate) runs them on the held-out samples, inputs transposed into the
     SavedModel's layout and outputs back (the permutation is found from the shapes, channels-last
     first). A model onnx2tf cannot convert is reported with onnx2tf's last error; where the float
     file is under 40 dB from ONNX Runtime's output, the TFLite columns are shown but not compared.
Accuracy: SNR (dB) of each output against the float reference, the worst output per held-out
sample (capped at 100 dB: an exact output would count as infinite), averaged in dB over the
held-out samples (the lowest sample also reported). A model whose
float conversion fails is skipped; a step that fails is reported and the others go on.
"litecvt − best peer" compares litecvt's full int8 with the better of ORT static (its best method)
and TFLite full int8; litecvt's weights-only int8 is compared with TFLite's dynamic range.
Writes its files under WORK/<model id>/; prints a Markdown table (also --markdown, --json).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import logging
import math
import os
import re
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np
from tflite_worker import StepError, last_error_line  # also run alone, in TensorFlow's environment

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


rm = _load("real_models", ROOT / "scripts" / "real_models.py")
snr_db = _load("quant_vs_ort", ROOT / "benches" / "quant_vs_ort.py").snr_db

HELD_OUT_SEED = 1_000_000
ORT_METHODS = ("MinMax", "Entropy", "Percentile")
# Ops that show that ONNX Runtime's quantizer quantized something.
ORT_QUANT_OPS = ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "ConvInteger", "MatMulInteger",
                 "DynamicQuantizeLSTM", "DynamicQuantizeMatMul", "MatMulIntegerToFloat")


WORK_PREFIX = [""]


def short(e: object, n: int = 500) -> str:
    """A one-line error message (the exception's type when it has none), without the work directory."""
    s = " ".join(str(e).split()) or type(e).__name__
    # ONNX Runtime's errors: drop the status prefix and the C++ source location.
    s = re.sub(r"^\[ONNXRuntimeError\] : \d+ : ", "", s)
    s = re.sub(r"\S*onnxruntime_src/\S+:\d+ (?:[\w:<>&*, ]+?\([^)]*\) )?", "", s)
    if WORK_PREFIX[0]:
        s = s.replace(WORK_PREFIX[0], "")
    return s if len(s) <= n else s[:n] + "…"


def where(e: BaseException) -> str:
    """short(e) and the function that raised it (for errors inside ONNX Runtime's quantizer)."""
    tb = traceback.extract_tb(e.__traceback__)
    return short(e) + (f" (in {tb[-1].name})" if tb and "onnxruntime" in tb[-1].filename else "")


@contextlib.contextmanager
def quiet():
    """ORT's quantizer prints its progress to stdout: keep it out of the report."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


# ---------------------------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------------------------
# A sample whose output is exact (both outputs 0, a saturated score) has an infinite SNR: it
# counts as this many dB in the mean, or one such sample would make any mean infinite.
SNR_CAP_DB = 100.0


def score(refs: list[dict], outs: list[dict]) -> dict:
    """refs, outs: {output name: array} per held-out sample. The worst output's SNR per sample
    (at most SNR_CAP_DB); its mean in dB over the samples and its minimum."""
    per = []
    for ref, out in zip(refs, outs):
        worst = float("inf")
        for name, r in ref.items():
            if name not in out:
                raise StepError(f"output {name} missing")
            o = np.asarray(out[name])
            if o.size != r.size:
                raise StepError(f"output {name}: {o.shape} vs reference {r.shape}")
            worst = min(worst, snr_db(r, o.reshape(r.shape).astype(np.float64)))
        per.append(min(worst, SNR_CAP_DB))
    return dict(snr=float(np.mean(per)), snr_min=float(np.min(per)), snr_per_sample=per)


# ---------------------------------------------------------------------------------------------
# litecvt
# ---------------------------------------------------------------------------------------------
def litecvt_convert(args, m, model: Path, out: Path, extra: list) -> float:
    report = out.with_suffix(".json")
    r, dt = rm.run([args.litecvt, "convert", model, "-o", out, *rm.shape_args(m), *extra, "--report", report])
    if r.returncode != 0:
        raise StepError(rm.litecvt_error(r))
    return dt


def float_nodes(lite: Path) -> int | None:
    try:
        q = json.loads(lite.with_suffix(".json").read_text()).get("quantization", {})
        return len(q.get("float_nodes", []))
    except (OSError, ValueError):
        return None


def litecvt_outputs(args, m, lite: Path, held_files: list[list[Path]], outdir: Path, names) -> list[dict]:
    outs = []
    for j, files in enumerate(held_files):
        d = outdir / f"h{j}"
        r, _ = rm.run([args.litecvt, "run", lite, *rm.input_args(m, files), "--output-dir", d])
        if r.returncode != 0:
            raise StepError("litecvt run: " + rm.litecvt_error(r))
        o = {}
        for name in names:
            f = d / (re.sub(r"[/:]", "_", name) + ".npy")
            if f.exists():
                o[name] = np.load(f)
        outs.append(o)
    return outs


# ---------------------------------------------------------------------------------------------
# ONNX Runtime
# ---------------------------------------------------------------------------------------------
def feeds(m, arrays) -> dict:
    """ORT feeds for the models given to ORT's quantizer (their frozen inputs are initializers)."""
    return {name: a for (name, _, _), a in zip(m["inputs"], arrays)}


def fixed_shape_model(model: Path, m, dst: Path) -> str | None:
    """Writes the model with its inputs' dynamic dimensions fixed to the shapes litecvt gets with
    --input-shape (lets ORT's pre-processing and quantizer see static shapes), the inputs litecvt
    freezes with --input-value made initializers (ORT's pre-processing then folds what they decide,
    e.g. Silero's If on the sample rate, as litecvt does), upgraded to opset 13 if older
    (per-channel QDQ needs DequantizeLinear's axis, opset 13; ORT's quantizer does not upgrade by
    itself). Returns a note about the upgrade, if any."""
    import onnx
    from onnx import numpy_helper, version_converter

    p = onnx.load(str(model))
    note = None
    for i in list(p.graph.input):
        if i.name in m.get("frozen", {}):
            p.graph.input.remove(i)
            p.graph.initializer.append(numpy_helper.from_array(np.asarray(m["frozen"][i.name]), i.name))
    opset = max((o.version for o in p.opset_import if o.domain in ("", "ai.onnx")), default=13)
    if opset < 13:
        try:
            p = version_converter.convert_version(p, 13)
            note = f"upgraded from opset {opset} to 13 for ORT's per-channel QDQ"
        except Exception as e:  # noqa: BLE001
            note = f"opset {opset}; the upgrade to 13 failed ({short(e, 100)})"
    shapes = {name: shape for name, shape, _ in m["inputs"] if shape}
    for i in p.graph.input:
        dims = i.type.tensor_type.shape.dim
        shape = shapes.get(i.name)
        if shape and len(dims) == len(shape):
            for d, v in zip(dims, shape):
                d.Clear()
                d.dim_value = v
    onnx.save(p, str(dst))
    return note


def ort_preprocess(src: Path, dst: Path) -> tuple[Path, str]:
    from onnxruntime.quantization.shape_inference import quant_pre_process

    try:
        with quiet():
            quant_pre_process(str(src), str(dst))
        return dst, "pre-processed"
    except Exception as e:  # noqa: BLE001 - symbolic shape inference fails on some graphs
        first = short(e, 100)
    try:
        with quiet():
            quant_pre_process(str(src), str(dst), skip_symbolic_shape=True)
        return dst, f"pre-processed without symbolic shape inference ({first})"
    except Exception as e:  # noqa: BLE001
        return src, f"not pre-processed ({short(e, 100)})"


def activation_bytes(model: Path) -> int:
    """Bytes of the float tensors one inference produces (static shapes only), as ORT's calibrators
    keep them for every sample they are given at once."""
    import onnx
    from onnx import shape_inference

    p = onnx.load(str(model))
    try:
        p = shape_inference.infer_shapes(p)
    except Exception:  # noqa: BLE001 - what pre-processing inferred is enough
        pass
    total = 0
    for v in list(p.graph.value_info) + list(p.graph.output):
        t = v.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else 0 for d in t.shape.dim]
        if t.elem_type == onnx.TensorProto.FLOAT and all(dims):
            total += int(np.prod(dims, dtype=np.int64)) * 4
    return total


def ort_stride(n: int, per_sample: int, budget: float) -> int:
    """Samples per collect_data call: all of them (ORT's default) unless their intermediate tensors
    exceed the budget, then the largest divisor of n that fits (CalibStridedMinMax needs one)."""
    if n * per_sample <= budget:
        return n
    return max([d for d in range(1, n + 1) if n % d == 0 and d * per_sample <= budget] or [1])


def ort_static(model: Path, out: Path, m, calib: list, method: str, stride: int) -> tuple[float, str | None]:
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat,
                                          QuantType, quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.data = [feeds(m, arrays) for arrays in calib]
            self.set_range(0, len(self.data))

        def __len__(self):
            return len(self.data)

        def set_range(self, start_index, end_index):
            self.it = iter(self.data[start_index:end_index])

        def get_next(self):
            return next(self.it, None)

    # CalibStridedMinMax (which every calibrator honours) feeds the samples in groups; MinMax does not
    # depend on it, Entropy and Percentile do (their histograms grow), so only when memory needs it.
    strided = dict(CalibStridedMinMax=stride) if stride < len(calib) else {}

    def quantize(extra):
        t = time.time()
        with quiet():
            quantize_static(str(model), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                            calibrate_method=getattr(CalibrationMethod, method),
                            extra_options=dict(**strided, **extra))
        return time.time() - t

    try:
        return quantize({}), None
    except Exception as e:  # noqa: BLE001
        # ORT 1.31 fails in _adjust_weight_scale_for_int32_bias on some models (magika): its own
        # switch for that step is the workaround a user would reach for.
        first = e
    try:
        return quantize(dict(QDQDisableWeightAdjustForInt32Bias=True)), (
            f"with QDQDisableWeightAdjustForInt32Bias=True (without: {where(first)[:200]})")
    except Exception:  # noqa: BLE001
        raise first from None


def ort_dynamic(model: Path, out: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with quiet():
        quantize_dynamic(str(model), str(out), weight_type=QuantType.QInt8)


def ort_outputs(model: Path, m, held: list) -> list[dict]:
    """A model written by ORT's quantizer, run on the held-out samples; raises if it has no
    quantized op (its output would be the float model's)."""
    import onnx
    import onnxruntime as ort

    ops = [n.op_type for n in onnx.load(str(model), load_external_data=False).graph.node]
    if not any(op in ORT_QUANT_OPS or op.startswith("QLinear") for op in ops):
        raise StepError("nothing quantized (no op ORT's quantizer handles, outside subgraphs)")
    so = ort.SessionOptions()
    so.log_severity_level = 4
    s = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return [dict(zip(names, s.run(None, feeds(m, arrays)))) for arrays in held]


# ---------------------------------------------------------------------------------------------
# TensorFlow's converter, through onnx2tf (runs in TensorFlow's environment: --tf-python)
# ---------------------------------------------------------------------------------------------
TFLITE_VARIANTS = ("float", "dynamic", "int8")
# Below this, TensorFlow's float file differs from the ONNX model: its int8 files are not compared.
TFLITE_FLOAT_MIN_SNR = 40.0


def tflite_versions(tf_python: str) -> dict | str:
    """The TensorFlow environment's versions, or why it cannot be used."""
    code = ("import json, importlib.metadata as m; import tensorflow, onnx2tf, ai_edge_litert, onnxsim; "
            "print(json.dumps({p: m.version(p) for p in "
            "('tensorflow', 'onnx2tf', 'onnxsim', 'ai-edge-litert', 'onnx')}))")
    try:
        r = subprocess.run([tf_python, "-c", code], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return short(e, 200)
    if r.returncode != 0:
        return last_error_line(r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


def tflite_peer(args, work: Path, fixed: Path, m, calib_files: list, held_files: list, refs: list) -> dict:
    """TensorFlow's converter on the fixed-shape ONNX model (via onnx2tf): float, dynamic-range and
    full int8 (same calibration samples, float I/O), each scored like the others."""
    d = work / "tflite"
    d.mkdir()
    job = dict(dir=str(d), onnx=str(fixed), timeout=args.tf_timeout,
               inputs=[dict(name=name, shape=list(a.shape)) for (name, _, _), a in
                       zip(m["inputs"], [np.load(f) for f in held_files[0]])],
               outputs=[dict(name=name, shape=list(a.shape)) for name, a in refs[0].items()],
               calibration=[[str(f) for f in files] for files in calib_files],
               held_out=[[str(f) for f in files] for files in held_files])
    (d / "job.json").write_text(json.dumps(job, indent=1))
    t = time.time()
    try:
        r = subprocess.run([args.tf_python, str(Path(__file__).resolve().parent / "tflite_worker.py"), str(d / "job.json")],
                           capture_output=True, text=True, timeout=2 * args.tf_timeout + 600)
    except subprocess.TimeoutExpired:
        return dict(error=f"timed out after {2 * args.tf_timeout + 600} s")
    (d / "worker.log").write_text(r.stdout + r.stderr)
    try:
        res = json.loads((d / "result.json").read_text())
    except (OSError, ValueError):
        return dict(error="TensorFlow step: " + last_error_line(r.stdout + r.stderr))
    res["seconds"] = round(time.time() - t, 1)
    names = list(refs[0])
    for variant in TFLITE_VARIANTS:
        v = res.get(variant)
        if not v or "outputs" not in v:
            continue
        try:
            outs = [{name: np.load(f) for name, f in zip(names, row)} for row in v.pop("outputs")]
            v.update(score(refs, outs))
        except StepError as e:
            v["error"] = short(e)
    return res


# ---------------------------------------------------------------------------------------------
# One model
# ---------------------------------------------------------------------------------------------
def bench_model(m, args, cache: Path) -> dict:
    work = args.work / m["id"]
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    res = dict(id=m["id"], package=f"{m['pkg']}=={m['ver']}", model=Path(m["member"]).name,
               inputs=len(m["inputs"]))
    t0 = time.time()
    model = rm.model_file(cache, m["id"])

    # 1. Data.
    calib_dir = work / "calibration"
    calib, calib_files = [], []
    for s in range(1, args.samples + 1):
        arrays = rm.make_inputs(m, cache, s)
        rm.write_calibration(m, calib_dir, s, arrays)
        calib.append(arrays)
        calib_files.append([(calib_dir / name if len(m["inputs"]) > 1 else calib_dir) / f"sample_{s:03d}.npy"
                            for name, _, _ in m["inputs"]])
    held, held_files = [], []
    for j in range(args.held_out):
        arrays = rm.make_inputs(m, cache, HELD_OUT_SEED + j)
        files = []
        for i, a in enumerate(arrays):
            f = work / "held_out" / f"h{j}_input_{i}.npy"
            f.parent.mkdir(exist_ok=True)
            np.save(f, a)
            files.append(f)
        held.append(arrays)
        held_files.append(files)

    # 2. Reference, and litecvt's float file (a model whose float conversion fails is skipped).
    refs = [rm.ort_reference(model, m, arrays) for arrays in held]
    names = list(refs[0])
    flt = work / "float.lite"
    try:
        litecvt_convert(args, m, model, flt, [])
    except StepError as e:
        res.update(status="skipped", error=f"float conversion fails: {e}")
        return res
    res["status"] = "ok"
    try:
        res["float"] = score(refs, litecvt_outputs(args, m, flt, held_files, work / "float_out", names))
    except StepError as e:
        res["float"] = dict(error=short(e))

    # 3-5. litecvt.
    variants = (("litecvt_int8", ["--quantize", "int8", "--calibration", calib_dir]),
                ("litecvt_min_snr", ["--quantize", "int8", "--calibration", calib_dir,
                                     "--min-snr", str(args.min_snr), "--accept-snr-miss"]),
                ("litecvt_int8w", ["--quantize", "int8"]))
    for key, extra in variants:
        lite = work / f"{key}.lite"
        try:
            dt = litecvt_convert(args, m, model, lite, extra)
            r = dict(seconds=round(dt, 2), bytes=lite.stat().st_size)
            if key != "litecvt_int8w":
                r["float_nodes"] = float_nodes(lite)
            r.update(score(refs, litecvt_outputs(args, m, lite, held_files, work / f"{key}_out", names)))
        except (StepError, subprocess.TimeoutExpired) as e:
            r = dict(error=short(e))
        res[key] = r
        print(f"    {key}: {fmt_snr(r)}" + (f" ({r['seconds']} s)" if "seconds" in r else ""), flush=True)

    # 6. ONNX Runtime static, each calibration method, on the pre-processed fixed-shape model.
    fixed = work / "fixed.onnx"
    note = fixed_shape_model(model, m, fixed)
    if note:
        res["ort_opset"] = note
    t = time.time()
    pre, how = ort_preprocess(fixed, work / "ort_pre.onnx")
    pre_seconds = time.time() - t
    res["ort_preprocess"] = how
    per_sample = activation_bytes(pre)
    stride = ort_stride(len(calib), per_sample, args.ort_memory_gb * 2**30)
    res["ort_activation_mb_per_sample"] = round(per_sample / 2**20, 1)
    if stride < len(calib):
        res["ort_calibration_stride"] = stride
    static = {}
    for method in ORT_METHODS:
        out = work / f"ort_static_{method.lower()}.onnx"
        try:
            dt, how = ort_static(pre, out, m, calib, method, stride)
            r = dict(seconds=round(dt + (pre_seconds if method == "MinMax" else 0.0), 2))
            if how:
                r["note"] = how
            try:
                r.update(score(refs, ort_outputs(out, m, held)))
            except Exception as e:  # noqa: BLE001
                r = dict(error=where(e) + (f"; quantized {how}" if how else ""))
        except Exception as e:  # noqa: BLE001 - ORT's quantizer fails on some graphs
            r = dict(error=where(e))
        static[method] = r
        print(f"    ort_static {method}: {fmt_snr(r)}", flush=True)
    res["ort_static"] = static
    ok = {k: v for k, v in static.items() if "snr" in v}
    if ok:
        best = max(ok, key=lambda k: ok[k]["snr"])
        res["ort_static_best"] = dict(method=best, **ok[best])

    # 7. ONNX Runtime dynamic (weights-only peer).
    out = work / "ort_dynamic.onnx"
    try:
        ort_dynamic(pre, out)
        r = score(refs, ort_outputs(out, m, held))
    except Exception as e:  # noqa: BLE001
        r = dict(error=where(e))
    res["ort_dynamic"] = r
    print(f"    ort_dynamic: {fmt_snr(r)}", flush=True)

    # 8. TensorFlow's converter (via onnx2tf): full int8 and dynamic-range.
    if args.tf_versions is not None:
        r = tflite_peer(args, work, fixed, m, calib_files, held_files, refs)
        res["tflite"] = r
        for variant in TFLITE_VARIANTS:
            v = r.get(variant) or dict(error=r.get("error", "?"))
            print(f"    tflite {variant}: {fmt_snr(v)}", flush=True)

    # TensorFlow's quantized files count only when its float file matches ONNX Runtime's output:
    # otherwise they measure onnx2tf's conversion, not TensorFlow's quantizer.
    tfl = res.get("tflite", {})
    tfl_ok = tfl.get("float", {}).get("snr", -math.inf) >= TFLITE_FLOAT_MIN_SNR
    peers = {"ORT static": res.get("ort_static_best", {}).get("snr"),
             "TFLite": tfl.get("int8", {}).get("snr") if tfl_ok else None}
    peers = {k: v for k, v in peers.items() if v is not None}
    a = res["litecvt_int8"].get("snr")
    if a is not None and peers:
        best = max(peers, key=peers.get)
        res["best_peer"] = best
        res["litecvt_minus_best_peer"] = a - peers[best]
    a, b = res["litecvt_int8w"].get("snr"), tfl.get("dynamic", {}).get("snr") if tfl_ok else None
    if a is not None and b is not None:
        res["litecvt_int8w_minus_tflite_dynamic"] = a - b
    res["seconds"] = round(time.time() - t0, 1)
    return res


# ---------------------------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------------------------
def fmt_db(x) -> str:
    if x is None:
        return "—"
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    return f"{x:.1f}".replace("-0.0", "0.0")


def fmt_err(e: str, n: int = 160) -> str:
    return short(e, n).replace("|", "\\|")


def fmt_snr(r: dict | None) -> str:
    if not r:
        return "—"
    if "snr" not in r:
        return "fails: " + fmt_err(r.get("error", "?"))
    s = fmt_db(r["snr"])
    return s if len(r["snr_per_sample"]) < 2 else f"{s} (min {fmt_db(r['snr_min'])})"


def fmt_static(res: dict) -> str:
    st = res.get("ort_static", {})
    best = res.get("ort_static_best")
    if not best:
        errs = {fmt_err(v.get("error", "?"), 120) for v in st.values()}
        return "fails: " + "; ".join(sorted(errs))
    others = ", ".join(f"{k} {fmt_db(v['snr'])}" if "snr" in v else f"{k} fails"
                       for k, v in st.items() if k != best["method"])
    return f"{fmt_snr(best)} {best['method']}" + (f" ({others})" if others else "")


def fmt_seconds(res: dict) -> str:
    a = res.get("litecvt_int8", {}).get("seconds")
    b = res.get("litecvt_min_snr", {}).get("seconds")
    c = res.get("ort_static", {}).get("MinMax", {}).get("seconds")
    f = (lambda x: "—" if x is None else f"{x:.1f}")
    return f"{f(a)} (min-snr {f(b)}) / {f(c)}"


def fmt_diff(d) -> str:
    return "—" if d is None or math.isinf(d) else ("±0.0" if abs(d) < 0.05 else f"{d:+.1f}")


def fmt_tflite(res: dict, variant: str) -> str:
    t = res.get("tflite")
    if t is None:
        return "—"
    return fmt_snr(t.get(variant) or dict(error=t.get("error", "?")))


def markdown(results: list[dict], min_snr: float) -> str:
    lines = [f"| model | litecvt full int8 | litecvt --min-snr {min_snr:g} | ORT static (best method) | "
             "TFLite full int8 | litecvt − best peer | litecvt int8 weights-only | ORT dynamic | "
             "TFLite dynamic-range | litecvt weights-only − TFLite dynamic-range | convert seconds litecvt / ORT |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if r.get("status") != "ok":
            err = fmt_err(r.get("error", "?"), 300)
            lines.append(f"| {r['id']} | **{r.get('status')}**: {err} |" + " |" * 10)
            continue
        lines.append(f"| {r['id']} | {fmt_snr(r['litecvt_int8'])} | {fmt_snr(r['litecvt_min_snr'])} | "
                     f"{fmt_static(r)} | {fmt_tflite(r, 'int8')} | {fmt_diff(r.get('litecvt_minus_best_peer'))} | "
                     f"{fmt_snr(r['litecvt_int8w'])} | {fmt_snr(r['ort_dynamic'])} | {fmt_tflite(r, 'dynamic')} | "
                     f"{fmt_diff(r.get('litecvt_int8w_minus_tflite_dynamic'))} | {fmt_seconds(r)} |")
    return "\n".join(lines) + "\n"


def notes(results: list[dict]) -> list[str]:
    out, same = [], []
    for r in results:
        if r.get("status") != "ok":
            continue
        f = r.get("float", {})
        if "snr" in f and f["snr"] < 60:
            out.append(f"{r['id']}: litecvt's float file is only {fmt_db(f['snr'])} dB from ORT's float output "
                       "(a ceiling for its int8 columns)")
        elif "error" in f:
            out.append(f"{r['id']}: litecvt float run: {f['error']}")
        if r.get("ort_opset"):
            out.append(f"{r['id']}: the model given to ORT's quantizer was {r['ort_opset']}")
        if not r.get("ort_preprocess", "").startswith("pre-processed") or "without" in r.get("ort_preprocess", ""):
            out.append(f"{r['id']}: ORT quant_pre_process: {r['ort_preprocess']}")
        if r.get("ort_calibration_stride"):
            out.append(f"{r['id']}: ORT's calibrators fed {r['ort_calibration_stride']} samples at a time "
                       f"(CalibStridedMinMax; {r['ort_activation_mb_per_sample']:.0f} MB of intermediate tensors "
                       "per sample): Entropy and Percentile histograms depend on it")
        st = r.get("ort_static", {})
        for k, v in st.items():
            if v.get("note"):
                out.append(f"{r['id']}: ORT {k} quantized {v['note']}")
        if "snr" in st.get("Entropy", {}) and st["Entropy"].get("snr_per_sample") == st.get("MinMax", {}).get(
                "snr_per_sample"):
            same.append(r["id"])
        for k in ("litecvt_int8", "litecvt_min_snr"):
            n = r.get(k, {}).get("float_nodes")
            if n:
                out.append(f"{r['id']}: {k} keeps {n} node(s) float")
        t = r.get("tflite", {})
        n = t.get("int8", {}).get("float_ops")
        if n:
            out.append(f"{r['id']}: TFLite full int8 keeps {n} operator(s) float (its float fallback)")
        if t.get("renamed_nodes"):
            out.append(f"{r['id']}: {t['renamed_nodes']} ONNX node name(s) made valid TensorFlow scope names "
                       "for onnx2tf")
        ft = t.get("float", {})
        if "snr" in ft and ft["snr"] < TFLITE_FLOAT_MIN_SNR:
            out.append(f"{r['id']}: TensorFlow's float file is only {fmt_db(ft['snr'])} dB from ONNX Runtime's "
                       "float output (a conversion problem in onnx2tf): its TFLite columns are not compared")
    flt = [(r["id"], r["tflite"]["float"]["snr"]) for r in results
           if "snr" in r.get("tflite", {}).get("float", {})]
    if flt:
        out.append("TensorFlow's float file (onnx2tf, then TFLiteConverter) against ONNX Runtime's float output, "
                   "the check that the layouts are mapped right: "
                   + ", ".join(f"{i} {fmt_db(x)} dB" for i, x in flt) + ".")
    if same:
        out.append(f"ORT Entropy gives exactly MinMax's result on {', '.join(same)}: quantize_static's entropy "
                   "calibrator defaults to 128 histogram bins and 128 quantized bins, a single candidate threshold.")
    return out


def machine() -> dict:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    git = lambda *a: subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD") or "?"
    if git("status", "--porcelain", "--untracked-files=no"):
        commit += " (working tree modified)"
    import onnxruntime

    return dict(cpu=cpu, cores=os.cpu_count(), commit=commit, onnxruntime=onnxruntime.__version__)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--litecvt", type=Path, default=ROOT / "target" / "release" / "litecvt")
    ap.add_argument("--cache", type=Path, default=ROOT / "target" / "real-models",
                    help="real_models.py's cache of wheels and models (default target/real-models)")
    ap.add_argument("--work", type=Path, default=ROOT / "target" / "int8-vs-peers", help="work directory")
    ap.add_argument("--only", default="", help="comma-separated model ids: " + ", ".join(rm.BY_ID))
    ap.add_argument("--samples", type=int, default=16, help="calibration samples")
    ap.add_argument("--held-out", type=int, default=16,
                    help="held-out samples for the SNR (a model's per-sample SNR can swing by 20 dB: 4 are too few)")
    ap.add_argument("--min-snr", type=float, default=30.0, help="litecvt --min-snr budget (dB)")
    ap.add_argument("--ort-memory-gb", type=float, default=3.0,
                    help="feed ORT's calibrators fewer samples at a time when all of them would hold more "
                         "intermediate tensors than this (default 3)")
    ap.add_argument("--tf-python", help="a Python with tensorflow, onnx2tf and ai-edge-litert (see "
                    "benches/tflite_requirements.txt): adds TensorFlow's converter as a peer")
    ap.add_argument("--tf-timeout", type=int, default=900,
                    help="seconds for onnx2tf on one model, and for each TensorFlow conversion (default 900)")
    ap.add_argument("--markdown", type=Path, help="write the report (header, table, notes) here")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args()
    args.tf_versions = None
    tf_note = "no --tf-python given"
    if args.tf_python:
        v = tflite_versions(args.tf_python)
        if isinstance(v, dict):
            args.tf_versions = v
        else:
            tf_note = f"{args.tf_python} cannot import tensorflow, onnx2tf, onnxsim and ai_edge_litert ({v})"
    args.litecvt = args.litecvt.resolve()
    if not args.litecvt.exists():
        sys.exit(f"litecvt not found at {args.litecvt}: build it or pass --litecvt")
    args.work = args.work.resolve()
    WORK_PREFIX[0] = str(args.work) + "/"
    cache = args.cache.resolve()
    rm.CACHE_PREFIX[0] = str(cache / "models") + "/"
    ids = [s for s in args.only.split(",") if s] or list(rm.BY_ID)
    unknown = [i for i in ids if i not in rm.BY_ID]
    if unknown:
        sys.exit(f"unknown model id(s) {unknown}; known: {', '.join(rm.BY_ID)}")
    logging.getLogger().setLevel(logging.ERROR)  # ORT's quantizer warns a lot through the root logger
    import onnxruntime

    onnxruntime.set_default_logger_severity(4)  # its errors are caught and reported

    info = machine()
    info["litecvt_built"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(args.litecvt.stat().st_mtime))
    info["litecvt"] = str(args.litecvt)
    # A copy, so that a rebuild during the run cannot mix two binaries in one table.
    args.work.mkdir(parents=True, exist_ok=True)
    snapshot = args.work / "litecvt"
    shutil.copy2(args.litecvt, snapshot)
    args.litecvt = snapshot
    t0 = time.time()
    results = []
    for mid in ids:
        m = rm.BY_ID[mid]
        print(f"[{mid}] {m['pkg']}=={m['ver']} {m['member']}", flush=True)
        try:
            r = bench_model(m, args, cache)
        except Exception as e:  # noqa: BLE001 - one model must not stop the others
            r = dict(id=mid, package=f"{m['pkg']}=={m['ver']}", model=Path(m["member"]).name,
                     status="fail", error=f"{type(e).__name__}: {short(e, 300)}")
        results.append(r)
        if r.get("status") != "ok":
            print(f"    {r.get('status')}: {r.get('error')}", flush=True)
        else:
            print(f"    done in {r['seconds']} s", flush=True)
    total = time.time() - t0

    head = ["# litecvt int8 vs ONNX Runtime's quantizer on real models",
            "",
            f"litecvt {info['commit']} (binary built {info['litecvt_built']}); "
            f"onnxruntime {info['onnxruntime']}; CPU: {info['cpu']} "
            f"({info['cores']} logical cores); {args.samples} calibration samples, {args.held_out} held-out; "
            f"total {total:.0f} s.",
            "",
            "SNR in dB against the float ONNX model (ONNX Runtime) on held-out samples: the worst output per "
            "sample, mean over samples (min over samples). ORT static: quant_pre_process + quantize_static "
            "(QDQ, per-channel, QInt8/QInt8, same calibration samples), best of MinMax / Entropy / Percentile; "
            "ORT dynamic: "
            "quantize_dynamic (QInt8 weights). litecvt − best peer: "
            "litecvt full int8 minus the best of ORT static's best method and TFLite full int8. "
            "Seconds: litecvt full int8 conversion "
            f"(and with --min-snr {args.min_snr:g}) / ORT pre-processing + MinMax quantize_static.",
            ""]
    if args.tf_versions:
        v = args.tf_versions
        head[-1:-1] = [
            f"TFLite: onnx2tf {v['onnx2tf']} (with onnxsim {v['onnxsim']}) turns the fixed-shape ONNX model "
            "ORT's quantizer gets into a "
            f"SavedModel (channels-last), TensorFlow {v['tensorflow']}'s TFLiteConverter converts it: "
            "dynamic-range = Optimize.DEFAULT without data (int8 weights, hybrid kernels), full int8 = "
            "Optimize.DEFAULT with the same calibration samples as representative_dataset (float I/O, "
            "float fallback where TensorFlow has no int8 kernel); run with ai-edge-litert "
            f"{v['ai-edge-litert']} (its default CPU path, the XNNPACK delegate); inputs transposed to and outputs back from its layout.",
            ""]
    table = markdown(results, args.min_snr)
    tail = [f"- {n}" for n in notes(results)]
    if args.tf_versions is None:
        tail.append(f"- No TFLite-converter columns: {tf_note}.")
    skipped = [r["id"] for r in results if r.get("status") != "ok"]
    if skipped:
        tail.append(f"- Not compared: {', '.join(skipped)} (see the table).")
    text = "\n".join(head) + "\n" + table + "\n" + "\n".join(tail) + "\n"
    print()
    print(text)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(dict(samples=args.samples,
                                             held_out=args.held_out, min_snr=args.min_snr, seconds=round(total, 1),
                                             **info, tflite_versions=args.tf_versions, results=results),
                                        indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
