#!/usr/bin/env python3
"""Make LiteRT's XNNPack (ai-edge-litert) choose kernels for a narrower x86 instruction set than
the CPU has, e.g. its AVX2+FMA kernels on an AVX-512 VNNI machine, to compare literun's AVX2
kernels (`LITERUN_ISA=avx2`) with XNNPack's on the same CPU.

XNNPack picks every kernel from one word of architecture flags, `arch_flags`, in its static
`hardware_config`, which `xnn_init_hardware_config()` fills once per process from cpuinfo; the
per-operator kernel tables are filled lazily from it when an operator of that kind is first
created. `force_xnnpack_isa("avx2")` fills it first, then clears every flag above AVX2 (on
x86-64, bits 0-7 are SSE2, SSSE3, SSE4.1, AVX, F16C, FMA3, AVX2; the bits from 8 up are
AVX-512, AVX-VNNI and, bit 20, AMX): from then on, every XNNPack kernel created in this process is one
an AVX2 CPU would run. It must run before the process creates its first interpreter with
XNNPack; it refuses (raises) when the flags were already filled by someone else.

The library is not stripped: the local symbols (`xnn_init_hardware_config`, `hardware_config`,
its once-guard) are looked up by name with `nm`, never at fixed addresses, and checked against
what the running process shows (the load base against an exported symbol, the returned pointer
against `hardware_config`, the flags against the bits every x86-64 sets) before anything is
written. Any mismatch raises `XnnpackIsaError`: a newer ai-edge-litert may lay things out
differently, and then this module must be revisited, not trusted.

Check it on a model (the same model in three child processes: XNNPack as shipped, forced to
`--isa`, and forced again, so the timing is interleaved; prints times on a CPU and the SNR of
the forced outputs against the shipped ones):

    python3 benches/xnnpack_isa.py --isa avx2 MODEL.lite [--runs 200]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
import time
from pathlib import Path

LIBRARY = "libpywrap_litert_common.so"
# The `arch_flags` bits (x86-64) to keep for each instruction-set level.
# `avx512vnni` keeps everything below AMX (bit 20): on a Xeon with AMX, XNNPack's int8 GEMMs as on
# one without it, to compare with literun's AVX-512 VNNI kernels.
KEEP_FLAGS = {"avx2": 0xFF, "avx512vnni": (1 << 20) - 1}
ALWAYS_SET = 0x3  # SSE and SSE2: every x86-64 has them.
AVX2_FMA3 = (1 << 7) | (1 << 6)
ARCH_FLAGS_OFFSET = 8  # struct xnn_hardware_config: uint32 uarch, then uint64 arch_flags

_forced: tuple[str, int, int] | None = None  # (isa, flags found, flags kept)


class XnnpackIsaError(RuntimeError):
    pass


def _loaded_library() -> tuple[str, int]:
    """Path and load base of the XNNPack-carrying library in this process."""
    import ai_edge_litert.interpreter  # noqa: F401 - loads the library

    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[5].endswith("/" + LIBRARY) and int(fields[2], 16) == 0:
            return fields[5], int(fields[0].split("-")[0], 16)
    raise XnnpackIsaError(f"{LIBRARY} is not mapped in this process (ai-edge-litert changed?)")


def _symbols(path: str, dynamic: bool = False) -> dict[str, tuple[str, int]]:
    cmd = ["nm", "--defined-only", *(["-D"] if dynamic else []), path]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise XnnpackIsaError(f"`{' '.join(cmd)}` failed: {e}") from e
    table = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            table.setdefault(parts[2], (parts[1], int(parts[0], 16)))
    return table


def force_xnnpack_isa(isa: str) -> tuple[int, int]:
    """Restrict XNNPack in this process to `isa`'s kernels; returns (flags found, flags kept).
    Idempotent for the same `isa`."""
    global _forced
    if isa not in KEEP_FLAGS:
        raise XnnpackIsaError(f"unknown ISA {isa!r}; known: {', '.join(KEEP_FLAGS)}")
    if _forced is not None:
        if _forced[0] != isa:
            raise XnnpackIsaError(f"XNNPack already forced to {_forced[0]} in this process")
        return _forced[1:]
    path, base = _loaded_library()

    # The load base, checked against an exported function as the dynamic loader resolves it.
    exported = [(n, v) for n, (k, v) in _symbols(path, dynamic=True).items() if k == "T"]
    if not exported:
        raise XnnpackIsaError(f"{path}: no exported function to check the load base with")
    name, value = exported[0]
    resolved = ctypes.cast(getattr(ctypes.CDLL(path), name), ctypes.c_void_p).value
    if resolved != base + value:
        raise XnnpackIsaError(f"{path}: load base {base:#x} does not match {name} at {resolved:#x}")

    local = _symbols(path)
    need = ["xnn_init_hardware_config", "hardware_config", "hardware_guard", "xnn_init_generation"]
    missing = [n for n in need if n not in local]
    if missing:
        raise XnnpackIsaError(f"{path}: symbols not found: {', '.join(missing)} "
                              "(a stripped or restructured ai-edge-litert)")
    if local["xnn_init_hardware_config"][0] not in "tT":
        raise XnnpackIsaError("xnn_init_hardware_config is not a function")

    # `xnn_init_once_impl` runs the initializer while the guard differs from the generation.
    guard = ctypes.c_uint32.from_address(base + local["hardware_guard"][1]).value
    generation = ctypes.c_uint32.from_address(base + local["xnn_init_generation"][1]).value
    if guard == generation:
        raise XnnpackIsaError("XNNPack's hardware config is already initialised in this process: "
                              "force the ISA before creating any interpreter")

    init = ctypes.CFUNCTYPE(ctypes.c_void_p)(base + local["xnn_init_hardware_config"][1])
    config = init()
    if config != base + local["hardware_config"][1]:
        raise XnnpackIsaError(f"xnn_init_hardware_config returned {config}, "
                              f"not hardware_config at {base + local['hardware_config'][1]:#x}")
    flags = ctypes.c_uint64.from_address(config + ARCH_FLAGS_OFFSET)
    found = flags.value
    if found & ALWAYS_SET != ALWAYS_SET or found >> 32:
        raise XnnpackIsaError(f"arch_flags {found:#x} do not look like x86-64 flags")
    if found & AVX2_FMA3 != AVX2_FMA3:
        raise XnnpackIsaError(f"this CPU has no AVX2+FMA3 for XNNPack (arch_flags {found:#x})")
    flags.value = found & KEEP_FLAGS[isa]
    _forced = (isa, found, flags.value)
    return _forced[1:]


# ---------------------------------------------------------------- check on a model

def _child(model: str, isa: str | None, runs: int, out_npy: str) -> None:
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    found = kept = None
    if isa:
        found, kept = force_xnnpack_isa(isa)
    it = Interpreter(model_path=model, num_threads=1)
    it.allocate_tensors()
    d = it.get_input_details()[0]
    x = np.random.default_rng(7).standard_normal(d["shape"]).astype(np.float32)
    if d["dtype"] != np.float32:
        scale, zp = d["quantization"]
        x = np.clip(np.round(x / scale) + zp, -128, 127)
    it.set_tensor(d["index"], x.astype(d["dtype"]))
    for _ in range(max(3, runs // 10)):
        it.invoke()
    cpu = []
    for _ in range(runs):
        c0 = time.thread_time_ns()
        it.invoke()
        cpu.append((time.thread_time_ns() - c0) / 1e3)
    o = it.get_output_details()[0]
    y = it.get_tensor(o["index"]).astype(np.float64)
    if o["dtype"] != np.float32:
        scale, zp = o["quantization"]
        y = (y - zp) * scale
    np.save(out_npy, y)
    print(json.dumps({"cpu_median_us": float(np.median(cpu)), "flags_found": found,
                      "flags_kept": kept}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?")
    ap.add_argument("--isa", default="avx2", choices=sorted(KEEP_FLAGS))
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child-isa", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.model, args.child_isa, args.runs, args.out)
        return 0
    if not args.model:
        found, kept = force_xnnpack_isa(args.isa)
        print(f"arch_flags {found:#x} -> {kept:#x}")
        return 0

    import tempfile

    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        for label, isa in (("shipped", None), (args.isa, args.isa), (args.isa + " again", args.isa)):
            out = f"{tmp}/{len(results)}.npy"
            cmd = [sys.executable, __file__, args.model, "--child", "--runs", str(args.runs),
                   "--out", out, *(["--child-isa", isa] if isa else [])]
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
            results[label] = (json.loads(p.stdout.splitlines()[-1]), np.load(out))
        ref = results["shipped"][1]
        for label, (r, y) in results.items():
            noise = float(np.sum((y - ref) ** 2))
            snr = float("inf") if noise == 0 else 10 * np.log10(float(np.sum(ref ** 2)) / noise)
            flags = "" if r["flags_found"] is None else \
                f", arch_flags {r['flags_found']:#x} -> {r['flags_kept']:#x}"
            print(f"{label}: {r['cpu_median_us']:.1f} µs on a CPU per invoke (median), "
                  f"SNR against shipped {snr:.1f} dB{flags}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
