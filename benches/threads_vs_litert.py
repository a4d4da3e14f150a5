"""literun on 1 and 2 threads against LiteRT (XNNPack, the default delegate) on 1 and 2 threads,
on the same .lite files, interleaved in one run.

    python3 benches/threads_vs_litert.py --litecvt target/release/litecvt \
        [--models literun/examples/models/mobilenetv2_block.lite,mnv2_112,convnet_112] \
        [--threads 1,2] [--rounds 5] [--runs 50] [--literun-isa avx2] [--xnnpack-isa avx2]

A model is a .lite file, or the name of a model `compare_runtimes.py` generates (converted here
to float and int8 with `litecvt convert`). For every file and thread count:
  literun  `litecvt bench FILE --threads N --json` (times `invoke` only, after a warm-up of
           about 0.1 s: each measurement is a new process)
  LiteRT   ai-edge-litert `Interpreter(num_threads=N)`, default delegates (XNNPack), times
           `invoke()` only; in this process, so `--xnnpack-isa avx2` (see xnnpack_isa.py)
           restricts XNNPack to its AVX2 kernels before any interpreter exists
`--literun-isa` sets LITERUN_ISA for literun; the two switches are independent.
Each round runs every engine on every file and thread count `--runs` times, so drifts in clock
speed or load hit all alike. Prints the median over all rounds, and the ratios that matter on a
shared machine: each engine's 2-thread time over its 1-thread time, and literun over LiteRT at
the same thread count.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_runtimes as cr  # noqa: E402


class LiteRt:
    def __init__(self, path: Path, threads: int, runs: int):
        from ai_edge_litert.interpreter import Interpreter

        self.it = Interpreter(model_path=str(path), num_threads=threads)
        self.it.allocate_tensors()
        d = self.it.get_input_details()[0]
        x = np.random.default_rng(7).standard_normal(d["shape"]).astype(np.float32)
        if d["dtype"] != np.float32:
            scale, zp = d["quantization"]
            x = np.clip(np.round(x / scale) + zp, -128, 127)
        self.it.set_tensor(d["index"], x.astype(d["dtype"]))
        self.runs = runs
        for _ in range(3):
            self.it.invoke()

    def measure(self) -> list[float]:
        out = []
        for _ in range(self.runs):
            t0 = time.perf_counter_ns()
            self.it.invoke()
            out.append((time.perf_counter_ns() - t0) / 1e3)
        return out


class Literun:
    WARMUP_S = 0.1

    def __init__(self, litecvt: str, path: Path, threads: int, runs: int, isa: str | None = None):
        self.cmd = [litecvt, "bench", str(path), "--json", "--threads", str(threads)]
        self.runs = runs
        self.warmup: int | None = None
        self.env = dict(os.environ)
        if isa:
            self.env["LITERUN_ISA"] = isa

    def _run(self, runs: int, warmup: int) -> list[float]:
        cmd = [*self.cmd, "--runs", str(runs), "--warmup", str(warmup)]
        p = subprocess.run(cmd, capture_output=True, text=True, env=self.env)
        if p.returncode != 0:
            sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
        return json.loads(p.stdout)["latencies_us"]

    def measure(self) -> list[float]:
        if self.warmup is None:
            probe = float(np.median(self._run(3, 3)))
            self.warmup = int(min(10_000, max(3, self.WARMUP_S * 1e6 / max(probe, 1.0))))
        return self._run(self.runs, self.warmup)


def lite_files(name: str, litecvt: str, work: Path) -> list[tuple[str, Path]]:
    """(label, file) pairs for a model argument."""
    if name in cr.GENERATED:
        make, size, shape = cr.GENERATED[name]
        onnx_path = work / f"{name}.onnx"
        if not onnx_path.exists():
            make(onnx_path, size)
        calib = work / f"{name}_calib"
        calib.mkdir(exist_ok=True)
        rng = np.random.default_rng(7)
        for i in range(cr.CALIBRATION_SAMPLES):
            np.save(calib / f"{i:04}.npy", rng.standard_normal(shape).astype(np.float32))
        f32, i8 = work / f"{name}.f32.lite", work / f"{name}.int8.lite"
        if not f32.exists():
            cr.run([litecvt, "convert", str(onnx_path), "-o", str(f32)])
        if not i8.exists():
            cr.run([litecvt, "convert", str(onnx_path), "-o", str(i8), "--quantize", "int8",
                    "--calibration", str(calib)])
        return [(f"{name} float", f32), (f"{name} int8", i8)]
    path = Path(name)
    if not path.exists():
        sys.exit(f"{name}: neither a file nor one of {', '.join(cr.GENERATED)}")
    return [(path.name, path)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--litecvt", default=str(cr.ROOT / "target/release/litecvt"))
    default = ",".join(str(p) for p in sorted((cr.ROOT / "literun/examples/models").glob("*.lite")))
    ap.add_argument("--models", default=default + ",mnv2_112,convnet_112")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=50, help="invocations per engine per round")
    ap.add_argument("--work", help="keep converted files here (default: a temporary directory)")
    ap.add_argument("--json-out")
    ap.add_argument("--literun-isa", help="LITERUN_ISA for literun (e.g. avx2 on an AVX-512 machine)")
    ap.add_argument("--xnnpack-isa", choices=["avx2", "avx512vnni"],
                    help="restrict LiteRT's XNNPack to this ISA's kernels (independent of --literun-isa)")
    args = ap.parse_args()
    if args.xnnpack_isa:
        # Before the first interpreter: XNNPack reads its flags once per process.
        from xnnpack_isa import force_xnnpack_isa

        found, kept = force_xnnpack_isa(args.xnnpack_isa)
        print(f"XNNPack restricted to {args.xnnpack_isa}: arch_flags {found:#x} -> {kept:#x}",
              file=sys.stderr)

    tmp = tempfile.TemporaryDirectory()
    work = Path(args.work or tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    threads = [int(t) for t in args.threads.split(",")]
    names = [n for n in args.models.split(",") if n]
    files = [f for name in names for f in lite_files(name, args.litecvt, work)]
    benches = []
    for label, path in files:
        for n in threads:
            benches.append((label, "literun", n, Literun(args.litecvt, path, n, args.runs,
                                                         args.literun_isa)))
            benches.append((label, "LiteRT+XNNPack", n, LiteRt(path, n, args.runs)))
    samples: dict[tuple[str, str, int], list[float]] = {}
    per_round: dict[tuple[str, str, int], list[float]] = {}
    for r in range(args.rounds):
        for label, engine, n, b in benches:
            v = b.measure()
            samples.setdefault((label, engine, n), []).extend(v)
            per_round.setdefault((label, engine, n), []).append(float(np.median(v)))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    for title, stat in (("median", np.median), ("10th percentile", lambda v: np.percentile(v, 10))):
        print(f"\nbatch 1; {args.rounds} rounds x {args.runs} runs per engine and thread count, "
              f"interleaved; literun ISA: {args.literun_isa or 'best'}, XNNPack ISA: "
              f"{args.xnnpack_isa or 'best'}; {title}, µs\n")
        table(files, threads, {k: float(stat(v)) for k, v in samples.items()})
    print("\n(ratios < 1: the first is faster; the 10th percentile is closer to an unloaded machine)")
    if args.json_out:
        med = {k: float(np.median(v)) for k, v in samples.items()}
        rows = [{"model": label,
                 "median_us": {f"{e} {n}": med[(label, e, n)]
                               for e in ("literun", "LiteRT+XNNPack") for n in threads},
                 "round_medians_us": {f"{e} {n}": per_round[(label, e, n)]
                                      for e in ("literun", "LiteRT+XNNPack") for n in threads}}
                for label, _ in files]
        Path(args.json_out).write_text(json.dumps(rows, indent=1))
    return 0


def us(v: float) -> str:
    return f"{v:.1f}" if v < 100 else f"{v:.0f}"


def table(files: list[tuple[str, Path]], threads: list[int], med: dict) -> None:
    hdr = " | ".join(f"literun {n}T | XNNPack {n}T" for n in threads)
    print(f"| model | {hdr} | literun {threads[-1]}T/{threads[0]}T | XNNPack {threads[-1]}T/{threads[0]}T | "
          + " | ".join(f"literun/XNNPack {n}T" for n in threads) + " |")
    print("|---" * (1 + 2 * len(threads) + 2 + len(threads)) + "|")
    for label, _ in files:
        cells = []
        for n in threads:
            cells += [us(med[(label, "literun", n)]), us(med[(label, "LiteRT+XNNPack", n)])]
        lo, hi = threads[0], threads[-1]
        scale_l = med[(label, "literun", hi)] / med[(label, "literun", lo)]
        scale_x = med[(label, "LiteRT+XNNPack", hi)] / med[(label, "LiteRT+XNNPack", lo)]
        vs = [med[(label, "literun", n)] / med[(label, "LiteRT+XNNPack", n)] for n in threads]
        print(f"| {label} | {' | '.join(cells)} | {scale_l:.2f} | {scale_x:.2f} | "
              + " | ".join(f"{v:.2f}" for v in vs) + " |")


if __name__ == "__main__":
    sys.exit(main())
