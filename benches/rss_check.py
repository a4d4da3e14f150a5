#!/usr/bin/env python3
"""Checks the memory target of the speed issue on .lite files: the peak RSS of `literun-bench`
running a model is at most the file's size + literun's arena + 2 MiB.

    python3 benches/rss_check.py --bench PATH/TO/literun-bench FILE.lite [FILE.lite ...]

Use a static `literun-bench` as a device binary would be built (docs/performance.md, "Peak RSS"):
    cargo build --profile runner -p literun-tools --bin literun-bench --target x86_64-unknown-linux-musl
Prints one row per file and exits 1 if any is over.
"""
import argparse
import json
import subprocess
import sys

MIB = 1 << 20


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", required=True, help="the literun-bench binary")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    over = 0
    w = max(len(m) for m in args.models)
    print(f"{'model':<{w}} {'peak RSS':>9} {'budget':>9}  (MiB; budget = file + arena + 2)")
    for m in args.models:
        out = subprocess.run([args.bench, m, "--runs", str(args.runs), "--warmup", "1", "--json"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            print(f"{m}: literun-bench failed: {out.stderr.strip()}")
            over += 1
            continue
        r = json.loads(out.stdout)
        peak, budget = r["peak_rss_bytes"], r["file_bytes"] + r["arena_bytes"] + 2 * MIB
        ok = peak is not None and peak <= budget
        over += not ok
        print(f"{m:<{w}} {peak / MIB:>9.2f} {budget / MIB:>9.2f}  {'ok' if ok else 'OVER'}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
