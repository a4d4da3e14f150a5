#!/usr/bin/env python3
"""Full-int8 conversion time of ResNet18 against ONNX Runtime's static quantizer, same samples.

    python3 benches/convert_time_vs_ort.py --litecvt target/release/litecvt [--size 224] [--samples 100]
        [--baseline OTHER_LITECVT]

Generates ResNet18 (random weights, `compare_runtimes.py`'s generator) and N random calibration
samples, then runs, alternately and `--rounds` times: `litecvt convert --quantize int8
--calibration DIR`, and ONNX Runtime's `quant_pre_process` + `quantize_static` (QDQ, per-channel
int8 weights, int8 activations, MinMax) in a child Python. Prints wall and CPU seconds of each
(children's user + system time) and their ratios. With `--baseline`, another litecvt binary (e.g.
main's) runs in the same rounds, and its file is compared with `--litecvt`'s byte for byte.
"""
from __future__ import annotations

import argparse
import importlib.util
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

ORT_SCRIPT = """
import glob, sys, numpy as np, onnx
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
from onnxruntime.quantization.shape_inference import quant_pre_process
model, calib, work = sys.argv[1:4]
quant_pre_process(model, work + '/pre.onnx', skip_symbolic_shape=True)
name = onnx.load(work + '/pre.onnx').graph.input[0].name
class Samples(CalibrationDataReader):
    def __init__(self):
        self.files = iter(sorted(glob.glob(calib + '/*.npy')))
    def get_next(self):
        f = next(self.files, None)
        return None if f is None else {name: np.load(f)}
quantize_static(work + '/pre.onnx', work + '/q.onnx', Samples(), quant_format=QuantFormat.QDQ,
                per_channel=True, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
"""


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str]) -> tuple[float, float]:
    t, c = time.time(), children_cpu()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.time() - t, children_cpu() - c


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--litecvt", default=str(ROOT / "target/release/litecvt"))
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--baseline", help="another litecvt binary to time in the same rounds")
    args = ap.parse_args()
    spec = importlib.util.spec_from_file_location("compare_runtimes", ROOT / "benches/compare_runtimes.py")
    cr = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cr)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = work / "resnet18.onnx"
        cr.make_resnet18(model, args.size)
        calib = work / "calibration"
        calib.mkdir()
        rng = np.random.default_rng(0)
        for i in range(args.samples):
            np.save(calib / f"{i:04}.npy", rng.standard_normal((1, 3, args.size, args.size)).astype(np.float32))
        print(f"ResNet18 {args.size}x{args.size}, {args.samples} calibration samples")
        for r in range(args.rounds):
            convert = lambda exe, out: timed([exe, "convert", str(model), "-o", str(work / out),
                                              "--quantize", "int8", "--calibration", str(calib)])
            lc = convert(args.litecvt, "r18.lite")
            ort = timed([sys.executable, "-c", ORT_SCRIPT, str(model), str(calib), str(work)])
            line = (f"round {r}: litecvt {lc[0]:.1f} s wall, {lc[1]:.1f} s CPU | ONNX Runtime {ort[0]:.1f} s wall, "
                    f"{ort[1]:.1f} s CPU | litecvt / ORT: wall {lc[0] / ort[0]:.2f}, CPU {lc[1] / ort[1]:.2f}")
            if args.baseline:
                base = convert(args.baseline, "r18_baseline.lite")
                same = (work / "r18.lite").read_bytes() == (work / "r18_baseline.lite").read_bytes()
                line += (f" | baseline {base[0]:.1f} s wall, {base[1]:.1f} s CPU, / ORT: wall {base[0] / ort[0]:.2f}, "
                         f"CPU {base[1] / ort[1]:.2f}; files {'identical' if same else 'DIFFER'}")
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
