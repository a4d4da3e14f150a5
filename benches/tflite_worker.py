#!/usr/bin/env python3
"""TensorFlow's side of benches/int8_vs_peers.py, run in TensorFlow's environment (`--tf-python`):

    TF_PYTHON benches/tflite_worker.py JOB.json

converts one ONNX model with onnx2tf and TensorFlow's converter (float, dynamic range, full int8
on the job's calibration samples), runs each file with LiteRT on the held-out samples and writes
their outputs (in the ONNX model's layout) and `result.json` into the job's directory.
"""
from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

TFLITE_VARIANTS = ("float", "dynamic", "int8")


class StepError(Exception):
    pass


# onnx2tf checks its conversion of 3-channel image models on this file, looked up in its working
# directory and downloaded when absent: the benchmark writes one calibration sample there.
ONNX2TF_SAMPLE_FILE = "calibration_image_sample_data_20x128x128x3_float32.npy"


def layout_perm(onnx_shape: list, tf_shape: list) -> tuple | None:
    """The permutation p with tf_shape[i] == onnx_shape[p[i]]: channels last first (what onnx2tf
    does to NCHW/NCW tensors), then none, then any other; None when none fits."""
    n = len(onnx_shape)
    if len(tf_shape) != n:
        return None
    last = (0, *range(2, n), 1) if n >= 3 else tuple(range(n))
    others = itertools.permutations(range(n)) if n <= 6 else ()
    for p in itertools.chain([last, tuple(range(n))], others):
        if all(t in (None, -1) or t == onnx_shape[i] for t, i in zip(tf_shape, p)):
            return tuple(p)
    return None


def last_error_line(log: str) -> str:
    """The last exception message in a log (onnx2tf prints its own and TensorFlow's tracebacks)."""
    log = re.sub(r"\x1b\[[0-9;]*m", "", log)
    lines = [ln.strip() for ln in log.splitlines()]
    hits = [k for k, ln in enumerate(lines) if re.match(r"^[\w.]*(Error|Exception|Exit)\b.*:", ln)]
    if not hits:
        return next((ln for ln in reversed(lines) if ln), "no output")
    k = hits[-1]
    if lines[k].endswith("(type TFOpLambda)."):  # Keras names the layer; the reason follows
        k_next = next((n for n in range(k + 1, len(lines)) if lines[n]), None)
        if k_next is not None:
            return lines[k] + " " + lines[k_next].split(" for '{{node")[0]
    return lines[k]


def tflite_worker(job_file: Path) -> int:
    """Converts one model with onnx2tf and TensorFlow's converter, runs the files with LiteRT on
    the held-out samples and writes their outputs (in the ONNX model's layout) and a result file."""
    job = json.loads(job_file.read_text())
    out = Path(job["dir"])
    result: dict = {}
    result_file = out / "result.json"

    def done(**kw) -> int:
        result.update(kw)
        result_file.write_text(json.dumps(result, indent=1))
        return 0

    import onnx
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    # onnx2tf's TensorFlow scope names allow [A-Za-z0-9_./>-] only (Paddle's exports use '@').
    model = onnx.load(job["onnx"])
    renamed = 0
    for node in model.graph.node:
        name = re.sub(r"[^A-Za-z0-9_./>-]", "_", node.name)
        renamed += name != node.name
        node.name = name
    src = out / "model.onnx"
    onnx.save(model, str(src))
    if renamed:
        result["renamed_nodes"] = renamed
    first = np.load(job["calibration"][0][0])
    if first.ndim == 4:
        np.save(out / ONNX2TF_SAMPLE_FILE, first.transpose(0, 2, 3, 1))
    saved = out / "saved_model"
    # onnx2tf simplifies the model with the `onnxsim` command first (its static shapes are what many
    # models need): the environment's own scripts come first on PATH.
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    t = time.time()
    try:
        r = subprocess.run([sys.executable, "-m", "onnx2tf", "-i", str(src), "-o", str(saved), "-osd", "-n"],
                           cwd=out, capture_output=True, text=True, timeout=job["timeout"], env=env)
        log = r.stdout + r.stderr
        ok = r.returncode == 0 and (saved / "saved_model.pb").exists()
    except subprocess.TimeoutExpired:
        return done(error=f"onnx2tf: timed out after {job['timeout']} s")
    (out / "onnx2tf.log").write_text(log)
    if not ok:
        return done(error="onnx2tf: " + last_error_line(log))
    result["onnx2tf_seconds"] = round(time.time() - t, 2)

    onnx_in = [(i["name"], i["shape"]) for i in job["inputs"]]
    in_names: list = []  # the signature's input names, in the ONNX model's input order
    in_perm: list = []
    out_perm: list = []

    def norm(name: str) -> str:
        return re.sub(r"[^a-z0-9]", "_", name.lower())

    def signature(runner):
        """The signature's inputs in the ONNX model's input order, with the layout each needs."""
        details = runner.get_input_details()
        keys = list(details)
        by_norm = {norm(k): k for k in keys}
        names = [by_norm.get(norm(n)) for n, _ in onnx_in]
        if None in names:
            if len(keys) != len(onnx_in):
                raise StepError(f"signature inputs {keys} vs ONNX inputs {[n for n, _ in onnx_in]}")
            names = keys
        perms = []
        for key, (name, shape) in zip(names, onnx_in):
            p = layout_perm(shape, list(details[key]["shape"]))
            if p is None:
                raise StepError(f"input {name} {shape}: no layout gives {list(details[key]['shape'])}")
            perms.append(p)
        return names, perms, [details[k]["dtype"] for k in names]

    def tf_inputs(files, names, perms, dtypes) -> dict:
        return {k: np.load(f).transpose(p).astype(d) for f, k, p, d in zip(files, names, perms, dtypes)}

    def output_keys(outs: dict) -> list:
        keys = list(outs)
        numbered = [k for k in keys if re.fullmatch(r"output_\d+", k)]
        if len(numbered) == len(keys):
            return sorted(keys, key=lambda k: int(k.split("_")[1]))
        return keys

    def run(lite: Path, variant: str) -> list:
        interp = Interpreter(model_path=str(lite))
        runner = interp.get_signature_runner()
        names, perms, dtypes = signature(runner)
        if not in_perm:
            in_names.extend(names)
            in_perm.extend(perms)
        files = []
        for j, held in enumerate(job["held_out"]):
            outs = runner(**tf_inputs(held, names, perms, dtypes))
            keys = output_keys(outs)
            if len(keys) != len(job["outputs"]):
                raise StepError(f"{len(keys)} outputs, the ONNX model has {len(job['outputs'])}")
            row = []
            for k, (key, o) in enumerate(zip(keys, job["outputs"])):
                a = np.asarray(outs[key])
                if not out_perm or len(out_perm) <= k:
                    p = layout_perm(o["shape"], list(a.shape))
                    out_perm.append(p)
                p = out_perm[k]
                if p is not None and a.ndim == len(p):
                    a = a.transpose(np.argsort(p))
                f = out / f"{variant}_h{j}_o{k}.npy"
                np.save(f, a)
                row.append(str(f))
            files.append(row)
        return files

    def float_ops(lite: Path) -> int:
        """Operators (DEQUANTIZE and QUANTIZE aside) that compute in float in a quantized file."""
        interp = Interpreter(model_path=str(lite))
        tensors = {t["index"]: t for t in interp.get_tensor_details()}
        n = 0
        for op in interp._get_ops_details():  # noqa: SLF001 - LiteRT's only list of operators
            if op["op_name"] in ("DEQUANTIZE", "QUANTIZE"):
                continue
            if any(tensors[i]["dtype"] == np.float32 for i in op["outputs"] if i in tensors):
                n += 1
        return n

    for variant in TFLITE_VARIANTS:
        r: dict = {}
        try:
            conv = tf.lite.TFLiteConverter.from_saved_model(str(saved))
            if variant != "float":
                conv.optimizations = [tf.lite.Optimize.DEFAULT]
            if variant == "int8":
                if not in_perm:
                    raise StepError("the float file did not run: no input layout")

                def dataset():
                    for files in job["calibration"]:
                        arrays = [np.load(f).transpose(p) for f, p in zip(files, in_perm)]
                        yield dict(zip(in_names, arrays))

                conv.representative_dataset = dataset
            t = time.time()
            data = conv.convert()
            r["seconds"] = round(time.time() - t, 2)
            lite = out / f"{variant}.tflite"
            lite.write_bytes(data)
            r["bytes"] = len(data)
            if variant == "int8":
                r["float_ops"] = float_ops(lite)
            r["outputs"] = run(lite, variant)
            r["inputs"] = [dict(key=k, perm=list(p)) for k, p in zip(in_names, in_perm)]
            r["output_perms"] = [list(p) if p else None for p in out_perm]
        except Exception as e:  # noqa: BLE001 - TensorFlow's converter and LiteRT fail in many ways
            r = dict(error=" ".join(str(e).split())[:400] or type(e).__name__)
        result[variant] = r
    return done()


if __name__ == "__main__":
    sys.exit(tflite_worker(Path(sys.argv[1])))
