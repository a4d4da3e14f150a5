#!/usr/bin/env python3
"""Runs the models dumped by `LITERUN_DUMP_DIR=dir cargo test -p literun --test int8_kernels
--test int8_batch_matmul --test int8_norm_resize_transpose`
with LiteRT (pip `ai-edge-litert`) and compares with literun's outputs.

int8 outputs: reports the count of differing elements and the largest difference (in steps);
float outputs: the largest absolute and relative difference. Exit status 1 if an int8 model
differs by more than --max-steps or a float model by more than --rtol.

Everything is bit-exact with `--max-steps 0` against LiteRT's builtin kernels (the default) except
the 4-D int8 MEAN over H, W (one step on some outputs), where literun follows the reference kernel.
`--ref` uses LiteRT's reference kernels instead; they differ from literun only on int8 SUM (the
reference reads int8 data as uint8).
"""
import argparse
import glob
import json
import os
import sys

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--max-steps", type=int, default=1)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument(
        "--xnnpack",
        action="store_true",
        help="keep LiteRT's default XNNPACK delegate (default: builtin kernels only)",
    )
    ap.add_argument(
        "--ref",
        action="store_true",
        help="use LiteRT's reference kernels (BUILTIN_REF) instead of its optimized builtins",
    )
    ap.add_argument("--only", default="", help="only files whose name contains this")
    a = ap.parse_args()
    if a.xnnpack:
        resolver = OpResolverType.AUTO
    elif a.ref:
        resolver = OpResolverType.BUILTIN_REF
    else:
        resolver = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    bad = 0
    for path in sorted(glob.glob(os.path.join(a.dir, "*.tflite"))):
        if a.only not in os.path.basename(path):
            continue
        meta = json.load(open(path[:-7] + ".json"))
        it = Interpreter(model_path=path, experimental_op_resolver_type=resolver)
        it.allocate_tensors()
        for d, x in zip(it.get_input_details(), meta["inputs"]):
            it.set_tensor(d["index"], np.array(x, dtype=d["dtype"]).reshape(d["shape"]))
        it.invoke()
        od = it.get_output_details()[0]
        got = it.get_tensor(od["index"]).reshape(-1)
        ours = np.array(meta["output"], dtype=got.dtype)
        name = os.path.basename(path)
        if meta["dtype"] == "int8":
            diff = np.abs(got.astype(np.int32) - ours.astype(np.int32))
            n = int((diff > 0).sum())
            print(f"{name}: int8 {n}/{diff.size} differ, max {int(diff.max())} steps")
            bad += int(diff.max() > a.max_steps)
        else:
            with np.errstate(invalid="ignore"):
                d = np.where(got == ours, 0.0, np.abs(got - ours))
            rel = float((d / np.maximum(np.abs(got), 1e-3)).max())
            print(f"{name}: float max abs {float(d.max()):.3g} rel {rel:.3g}")
            bad += int(rel > a.rtol)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
