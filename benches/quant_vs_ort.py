#!/usr/bin/env python3
"""Full-int8 accuracy of litecvt against ONNX Runtime's static quantization, same calibration data.

    python3 benches/quant_vs_ort.py --litecvt target/release/litecvt

    python3 benches/quant_vs_ort.py --models mnv2_035_96,mnv2_112,resnet18_112,encoder_2l

For each realistic fixture (MobileNetV2-style block, attention block; or, with --models, the
random-weight models benches/compare_runtimes.py generates: MobileNetV2-0.35 at 96x96, MobileNetV2
at 112x112, ResNet18 at 112x112, a 2-layer transformer encoder, calibrated and measured on
standard-normal inputs, 24 and 9):
  - litecvt: `convert --quantize int8 --calibration calibration/<model>` (minmax), run with literun;
  - ONNX Runtime: `quantize_static` (QDQ format, per-channel weights, MinMax, int8 activations and
    weights, same samples), run with onnxruntime;
and reports the SNR (dB) of each quantized output against the float model's output (onnxruntime,
float) on held-out inputs: both tools calibrate on the first 24 samples of calibration/<model>,
and are measured on the other 8 plus the fixture's test input. Prints a table; exits 1 if litecvt's SNR is below ONNX Runtime's by more than
0.5 dB on any model.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODELS = [("mobilenetv2_block", "mobilenetv2_block"), ("attention_block", "attention_block")]
HELD_OUT_GENERATED = 9


def snr_db(ref: np.ndarray, test: np.ndarray) -> float:
    noise = float(np.sum((ref.astype(np.float64) - test) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(float(np.sum(ref.astype(np.float64) ** 2)) / noise)


CALIBRATION_SAMPLES = 24


def ort_quantize(model: Path, calib: list[np.ndarray], out: Path) -> None:
    import onnxruntime as ort
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat,
                                          QuantType, quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    name = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).get_inputs()[0].name

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter({name: x} for x in calib)

        def get_next(self):
            return next(self.it, None)

    pre = out.with_suffix(".pre.onnx")
    quant_pre_process(str(model), str(pre), skip_symbolic_shape=True)
    quantize_static(str(pre), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    calibrate_method=CalibrationMethod.MinMax)


def run_ort(model: Path, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    s = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    return s.run(None, {s.get_inputs()[0].name: x})[0]


def run_literun(litecvt: str, lite: Path, x: np.ndarray, work: Path) -> np.ndarray:
    np.save(work / "x.npy", x)
    out = work / f"{lite.stem}.out"  # one directory per model: it holds the last run's outputs only
    subprocess.run([litecvt, "run", str(lite), str(work / "x.npy"), "--output-dir", str(out)],
                   check=True, capture_output=True)
    return np.load(next(out.glob("*.npy")))


def model_and_data(name: str, work: Path) -> tuple[Path, list[np.ndarray], list[np.ndarray]]:
    """The ONNX file, calibration samples and held-out inputs of a fixture or a generated model."""
    fixtures = dict(MODELS)
    if name in fixtures:
        files = sorted((ROOT / "calibration" / fixtures[name]).glob("*.npy"))
        held_out = [np.load(f) for f in files[CALIBRATION_SAMPLES:]]
        held_out.append(np.load(ROOT / "fixtures" / f"{name}.input.npy"))
        return ROOT / "fixtures" / f"{name}.onnx", [np.load(f) for f in files[:CALIBRATION_SAMPLES]], held_out
    from compare_runtimes import GENERATED

    if name not in GENERATED:
        sys.exit(f"unknown model {name}; known: {', '.join([*fixtures, *GENERATED])}")
    make, size, shape = GENERATED[name]
    model = work / f"{name}.onnx"
    make(model, size)
    rng = np.random.default_rng(7)
    samples = [rng.standard_normal(shape).astype(np.float32)
               for _ in range(CALIBRATION_SAMPLES + HELD_OUT_GENERATED)]
    return model, samples[:CALIBRATION_SAMPLES], samples[CALIBRATION_SAMPLES:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--litecvt", default=str(ROOT / "target/release/litecvt"))
    ap.add_argument("--models", default=",".join(m for m, _ in MODELS),
                    help="fixtures and/or benches/compare_runtimes.py's generated models (comma separated)")
    ap.add_argument("extra", nargs="*", help="extra `litecvt convert` arguments, e.g. -- --calibration-method mse")
    args = ap.parse_args()
    worse = 0
    print(f"{'model':20s} {'litecvt int8 SNR':>17s} {'ORT QDQ SNR':>12s}  (dB vs float, mean over held-out inputs)")
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        for name in args.models.split(","):
            model, calib, held_out = model_and_data(name, work)
            np.save(work / f"{name}.calib.npy", np.concatenate(calib))
            lite = work / f"{name}.lite"
            subprocess.run([args.litecvt, "convert", str(model), "-o", str(lite), "--quantize", "int8",
                            "--calibration", str(work / f"{name}.calib.npy")] + args.extra,
                           check=True, capture_output=True)
            qdq = work / f"{name}.qdq.onnx"
            ort_quantize(model, calib, qdq)
            ours, theirs = [], []
            for x in held_out:
                ref = run_ort(model, x)
                ours.append(snr_db(ref, run_literun(args.litecvt, lite, x, work).reshape(ref.shape)))
                theirs.append(snr_db(ref, run_ort(qdq, x)))
            a, b = float(np.mean(ours)), float(np.mean(theirs))
            print(f"{name:20s} {a:17.1f} {b:12.1f}")
            worse += a < b - 0.5
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
