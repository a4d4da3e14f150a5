#!/usr/bin/env python3
"""Latency of literun against LiteRT, ONNX Runtime and tract on the same models, in one run.

    /work/pyenv/bin/python benches/compare_runtimes.py --litecvt target/release/litecvt \
        [--models mobilenetv2_block,mnv2_224,convnet_112] [--rounds 5] [--runs 20]

For every model (the fixtures, plus generated ones with random weights: a MobileNetV2 (width
1.0 at 224x224 `mnv2_224` and 112x112 `mnv2_112`, width 0.35 at 96x96 `mnv2_035_96`), a ResNet18 at
112x112 (`resnet18_112`), a conv-heavy 3x3 CNN at 112x112 (`convnet_112`) and a 2-layer transformer
encoder (d=64, 4 heads, seq 32: `encoder_2l`)) it
  - converts the ONNX file with `litecvt convert` to float and to full int8 (calibrated on
    calibration/<model> for the fixtures, on random samples for the generated models);
  - quantizes the ONNX file with ONNX Runtime's `quantize_static` (QDQ, per-channel, MinMax,
    int8 activations and weights, the same calibration samples);
  - measures, single thread, batch 1, the same input for everyone:
      literun   `litecvt bench FILE.lite --json` (times `invoke` only); with --portable also
                its reference kernels (LITERUN_ISA=portable: the kernels before the SIMD work)
      LiteRT    ai-edge-litert `Interpreter(num_threads=1)`, XNNPack on (default delegates) and
                off (BUILTIN_WITHOUT_DEFAULT_DELEGATES), times `invoke()` only; in this process,
                so `--xnnpack-isa avx2` (see xnnpack_isa.py) restricts XNNPack to its AVX2
                kernels before any interpreter exists (`--literun-isa avx2` is literun's own,
                separate switch)
      ORT       onnxruntime, 1 intra-op thread, sequential, float ONNX and the QDQ model,
                times `run()` (includes copying the input/output, a few µs)
      tract     `litecvt bench FILE.onnx --json` (tract 0.23 optimized plan, times `run`)
    interleaved: each round runs every engine on every file `--runs` times, so drifts in clock
    speed or load hit all of them alike. `litecvt bench` is a new process every round, so it
    first warms up for ~0.1 s; the in-process engines stay warm between rounds. Reports median and p90 over all rounds, the ratio of
    each engine's median to literun's on the same file, and the arena bytes of literun and
    LiteRT (span of LiteRT's non-constant tensor addresses with its builtin kernels). Also each
    engine's time on a CPU per run (literun: `cpu_mean_us`; LiteRT: `time.thread_time_ns`
    around each `invoke`): on a machine other
    processes share, the latency of a run longer than the scheduler's time slice counts their
    turns too, the time on a CPU does not.
Writes the raw numbers to --json-out if given.
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

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = {
    "mobilenetv2_block": ("fixtures/mobilenetv2_block.onnx", "calibration/mobilenetv2_block"),
    "digits_cnn": ("fixtures/digits_cnn.onnx", "calibration/digits"),
    "attention_block": ("fixtures/attention_block.onnx", "calibration/attention_block"),
}
CALIBRATION_SAMPLES = 16


# ---------------------------------------------------------------- generated models

def _conv(nodes, inits, rng, name, x, cin, cout, k, stride, group=1, act=True):
    import onnx.helper as h
    from onnx import numpy_helper as nh

    fan_in = cin // group * k * k
    w = (rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
    b = (rng.standard_normal(cout) * 0.05).astype(np.float32)
    inits += [nh.from_array(w, f"{name}.w"), nh.from_array(b, f"{name}.b")]
    pad = k // 2
    nodes.append(h.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [f"{name}.conv"], name=name,
                             kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4,
                             group=group))
    if not act:
        return f"{name}.conv"
    nodes.append(h.make_node("Clip", [f"{name}.conv", "zero", "six"], [f"{name}.out"],
                             name=f"{name}.relu6"))
    return f"{name}.out"


def _finish(nodes, inits, rng, x, cin, classes, size, name, path):
    import onnx
    import onnx.helper as h
    from onnx import TensorProto
    from onnx import numpy_helper as nh

    nodes.append(h.make_node("GlobalAveragePool", [x], ["pool"]))
    nodes.append(h.make_node("Flatten", ["pool"], ["flat"], axis=1))
    w = (rng.standard_normal((cin, classes)) * np.sqrt(1.0 / cin)).astype(np.float32)
    inits += [nh.from_array(w, "fc.w"), nh.from_array(np.zeros(classes, np.float32), "fc.b")]
    nodes.append(h.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"]))
    inits += [nh.from_array(np.array(0, np.float32), "zero"),
              nh.from_array(np.array(6, np.float32), "six")]
    g = h.make_graph(nodes, name, [h.make_tensor_value_info("input", TensorProto.FLOAT,
                                                            [1, 3, size, size])],
                     [h.make_tensor_value_info("logits", TensorProto.FLOAT, [1, classes])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, str(path))


def _divisible(v: float, d: int = 8) -> int:
    """torchvision's `_make_divisible`: channels rounded to a multiple of 8, never 10% below."""
    r = max(d, int(v + d / 2) // d * d)
    return r + d if r < 0.9 * v else r


def make_mobilenetv2(path: Path, size: int, width: float = 1.0) -> None:
    """MobileNetV2 (inverted residuals, ReLU6, PyTorch's symmetric padding) at width multiplier
    `width` (channels as torchvision rounds them), random weights (BatchNorm already folded:
    conv + bias)."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    stem = _divisible(32 * width)
    x = _conv(nodes, inits, rng, "stem", "input", 3, stem, 3, 2)
    cin = stem
    i = 0
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)]:
        c = _divisible(c * width)
        for j in range(n):
            stride = s if j == 0 else 1
            hid = cin * t
            y = x
            if t != 1:
                y = _conv(nodes, inits, rng, f"b{i}.expand", y, cin, hid, 1, 1)
            y = _conv(nodes, inits, rng, f"b{i}.dw", y, hid, hid, 3, stride, group=hid)
            y = _conv(nodes, inits, rng, f"b{i}.project", y, hid, c, 1, 1, act=False)
            if stride == 1 and cin == c:
                import onnx.helper as h
                nodes.append(h.make_node("Add", [x, y], [f"b{i}.add"]))
                y = f"b{i}.add"
            x, cin, i = y, c, i + 1
    x = _conv(nodes, inits, rng, "head", x, cin, 1280, 1, 1)
    _finish(nodes, inits, rng, x, 1280, 1000, size, "mobilenetv2", path)


def make_mobilenetv2_035(path: Path, size: int) -> None:
    make_mobilenetv2(path, size, 0.35)


def make_resnet18(path: Path, size: int) -> None:
    """ResNet18 (basic blocks, ReLU, 1x1 stride-2 shortcuts, the 3x3 max-pool stem), random
    weights with BatchNorm folded; 1000 classes."""
    import onnx.helper as h
    rng = np.random.default_rng(3)
    nodes, inits = [], []

    def conv(name, x, cin, cout, k, stride, relu=True):
        y = _conv(nodes, inits, rng, name, x, cin, cout, k, stride, act=False)
        if relu:
            nodes.append(h.make_node("Relu", [y], [f"{name}.relu"]))
            return f"{name}.relu"
        return y

    x = conv("stem", "input", 3, 64, 7, 2)
    nodes.append(h.make_node("MaxPool", [x], ["stem.pool"], kernel_shape=[3, 3], strides=[2, 2],
                             pads=[1, 1, 1, 1]))
    x, cin = "stem.pool", 64
    for stage, c in enumerate([64, 128, 256, 512]):
        for b in range(2):
            stride = 2 if stage > 0 and b == 0 else 1
            p = f"s{stage}b{b}"
            y = conv(f"{p}.c1", x, cin, c, 3, stride)
            y = conv(f"{p}.c2", y, c, c, 3, 1, relu=False)
            short = conv(f"{p}.down", x, cin, c, 1, stride, relu=False) if stride != 1 or cin != c else x
            nodes.append(h.make_node("Add", [y, short], [f"{p}.add"]))
            nodes.append(h.make_node("Relu", [f"{p}.add"], [f"{p}.out"]))
            x, cin = f"{p}.out", c
    _finish(nodes, inits, rng, x, cin, 1000, size, "resnet18", path)


def make_convnet(path: Path, size: int) -> None:
    """Conv-heavy: 3x3 convolutions, 64 channels at size/2, 128 at size/4."""
    rng = np.random.default_rng(1)
    nodes, inits = [], []
    x = _conv(nodes, inits, rng, "stem", "input", 3, 32, 3, 2)
    cin = 32
    for i, (c, s) in enumerate([(64, 1), (64, 1), (64, 1), (128, 2), (128, 1), (128, 1)]):
        x = _conv(nodes, inits, rng, f"c{i}", x, cin, c, 3, s)
        cin = c
    _finish(nodes, inits, rng, x, cin, 10, size, "convnet", path)


ENC_D, ENC_HEADS, ENC_SEQ, ENC_FF = 64, 4, 32, 256


def make_encoder(path: Path, layers: int) -> None:
    """Transformer encoder, post-norm like PyTorch's default: `layers` layers of self-attention
    (d=64, 4 heads, seq 32, the head split as Reshape/Transpose and two batched MatMuls),
    LayerNorm written out (ReduceMean/Sub/Pow/Sqrt/Div, as older exporters), a 256-wide GELU
    (Erf form) feed-forward block; random weights. Input [1, 32, 64]."""
    import onnx
    from onnx import TensorProto, helper as h, numpy_helper as nh

    d, heads, seq, ff = ENC_D, ENC_HEADS, ENC_SEQ, ENC_FF
    rng = np.random.default_rng(2)
    nodes, inits = [], []

    def const(name, arr):
        inits.append(nh.from_array(np.asarray(arr), name))
        return name

    def node(op, ins, out, **kw):
        nodes.append(h.make_node(op, ins, [out], name=out, **kw))
        return out

    def linear(x, cin, cout, p):
        w = const(p + "_w", (rng.standard_normal((cin, cout)) / np.sqrt(cin)).astype(np.float32))
        b = const(p + "_b", (rng.standard_normal(cout) * 0.1).astype(np.float32))
        return node("Add", [node("MatMul", [x, w], p + "_mm"), b], p + "_out")

    def layer_norm(x, p):
        m = node("ReduceMean", [x], p + "_m", axes=[-1], keepdims=1)
        c = node("Sub", [x, m], p + "_c")
        sq = node("Pow", [c, const(p + "_two", np.float32(2.0))], p + "_sq")
        v = node("ReduceMean", [sq], p + "_v", axes=[-1], keepdims=1)
        s = node("Sqrt", [node("Add", [v, const(p + "_eps", np.float32(1e-5))], p + "_ve")], p + "_s")
        n = node("Div", [c, s], p + "_n")
        g = const(p + "_g", (1 + 0.1 * rng.standard_normal(d)).astype(np.float32))
        b = const(p + "_b", (0.1 * rng.standard_normal(d)).astype(np.float32))
        return node("Add", [node("Mul", [n, g], p + "_ng"), b], p + "_out")

    def gelu(x, p):
        e = node("Erf", [node("Div", [x, const(p + "_r2", np.float32(np.sqrt(2)))], p + "_dv")], p + "_erf")
        y = node("Mul", [x, node("Add", [e, const(p + "_one", np.float32(1))], p + "_e1")], p + "_xm")
        return node("Mul", [y, const(p + "_half", np.float32(0.5))], p + "_out")

    split = const("split_heads", np.array([1, seq, heads, d // heads], np.int64))
    merge = const("merge_heads", np.array([1, seq, d], np.int64))
    x = "input"
    for i in range(layers):
        p = f"l{i}"
        q, k, v = (linear(x, d, d, f"{p}_{t}") for t in "qkv")

        def heads_of(t, perm):
            return node("Transpose", [node("Reshape", [t, split], t + "_r")], t + "_t", perm=perm)

        qh, kt, vh = heads_of(q, [0, 2, 1, 3]), heads_of(k, [0, 2, 3, 1]), heads_of(v, [0, 2, 1, 3])
        scale = const(p + "_scale", np.float32(1 / np.sqrt(d // heads)))
        att = node("Softmax", [node("Mul", [node("MatMul", [qh, kt], p + "_qk"), scale], p + "_sc")],
                   p + "_att", axis=-1)
        o = node("Transpose", [node("MatMul", [att, vh], p + "_av")], p + "_avt", perm=[0, 2, 1, 3])
        o = linear(node("Reshape", [o, merge], p + "_merged"), d, d, p + "_o")
        x = layer_norm(node("Add", [x, o], p + "_res1"), p + "_ln1")
        f = linear(gelu(linear(x, d, ff, p + "_f1"), p + "_gelu"), ff, d, p + "_f2")
        x = layer_norm(node("Add", [x, f], p + "_res2"), p + "_ln2")
    graph = h.make_graph(nodes, "encoder", [h.make_tensor_value_info("input", TensorProto.FLOAT, [1, seq, d])],
                         [h.make_tensor_value_info(x, TensorProto.FLOAT, [1, seq, d])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


# name: (generator, its size argument, input shape)
GENERATED = {
    "mnv2_224": (make_mobilenetv2, 224, (1, 3, 224, 224)),
    "mnv2_112": (make_mobilenetv2, 112, (1, 3, 112, 112)),
    "convnet_112": (make_convnet, 112, (1, 3, 112, 112)),
    "mnv2_035_96": (make_mobilenetv2_035, 96, (1, 3, 96, 96)),
    "resnet18_112": (make_resnet18, 112, (1, 3, 112, 112)),
    "encoder_2l": (make_encoder, 2, (1, ENC_SEQ, ENC_D)),
}


# ---------------------------------------------------------------- engines

def run(cmd: list[str]) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
    return p.stdout


class LiteCvtBench:
    """`litecvt bench --json`: literun on .lite files, tract on .onnx files.

    Each measurement is a new process, while the in-process engines (LiteRT, ORT) stay warm
    from one round to the next; so every process first warms up for about `WARMUP_S` (caches,
    branch predictors, page faults, clock), the number of runs taken from a first probe."""

    WARMUP_S = 0.1

    def __init__(self, litecvt: str, path: Path, input_npy: Path, runs: int, isa: str | None = None):
        self.cmd = [litecvt, "bench", str(path), "--input", str(input_npy), "--json"]
        self.runs = runs
        self.warmup: int | None = None
        self.env = dict(os.environ)
        if isa:
            self.env["LITERUN_ISA"] = isa
        self.last = None

    def _run(self, runs: int, warmup: int) -> dict:
        cmd = [*self.cmd, "--runs", str(runs), "--warmup", str(warmup)]
        p = subprocess.run(cmd, capture_output=True, text=True, env=self.env)
        if p.returncode != 0:
            sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
        return json.loads(p.stdout)

    def measure(self) -> list[float]:
        if self.warmup is None:
            probe = float(np.median(self._run(3, 3)["latencies_us"]))
            self.warmup = int(min(10_000, max(3, self.WARMUP_S * 1e6 / max(probe, 1.0))))
        self.last = self._run(self.runs, self.warmup)
        self.cpu_mean_us = self.last.get("cpu_mean_us")
        return self.last["latencies_us"]


class LiteRtBench:
    def __init__(self, path: Path, x: np.ndarray, runs: int, xnnpack: bool):
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        kind = OpResolverType.AUTO if xnnpack else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        self.it = Interpreter(model_path=str(path), num_threads=1,
                              experimental_op_resolver_type=kind)
        self.it.allocate_tensors()
        d = self.it.get_input_details()[0]
        if d["dtype"] != np.float32:
            x = np.clip(np.round(x / d["quantization"][0]) + d["quantization"][1], -128, 127)
        self.it.set_tensor(d["index"], x.astype(d["dtype"]).reshape(d["shape"]))
        self.runs = runs
        for _ in range(3):
            self.it.invoke()

    def measure(self) -> list[float]:
        out = []
        cpu = 0
        for _ in range(self.runs):
            c0 = time.thread_time_ns()
            t0 = time.perf_counter_ns()
            self.it.invoke()
            out.append((time.perf_counter_ns() - t0) / 1e3)
            cpu += time.thread_time_ns() - c0
        self.cpu_mean_us = cpu / 1e3 / self.runs
        return out


def litert_arena_bytes(path: Path) -> int | None:
    """LiteRT's arena for `path` (builtin kernels): the span of the addresses of its
    non-constant tensors after `allocate_tensors` (constants point into the model buffer)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_path=str(path), num_threads=1,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    it.invoke()
    model_bytes = Path(path).read_bytes()
    spans = []
    for t in it.get_tensor_details():
        try:
            a = it.tensor(t["index"])()
        except ValueError:
            continue
        if a.nbytes == 0:
            continue
        spans.append((a.ctypes.data, a.nbytes))
    if not spans:
        return None
    # Arena tensors lie near the input tensor; constants point into the model buffer (far
    # away, or recognisable by their bytes).
    base = it.tensor(it.get_input_details()[0]["index"])().ctypes.data
    near = [(a, n) for a, n in spans if abs(a - base) < (64 << 20)]
    # Drop constants: their bytes equal a slice of the model file.
    arena = []
    for a, n in near:
        arr = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * n).from_address(a))
        if n >= 16 and model_bytes.find(arr.tobytes()) >= 0:
            continue
        arena.append((a, n))
    lo = min(a for a, _ in arena)
    hi = max(a + n for a, n in arena)
    return hi - lo


class OrtBench:
    def __init__(self, path: Path, x: np.ndarray, runs: int):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.s = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        self.feed = {self.s.get_inputs()[0].name: x}
        self.runs = runs
        for _ in range(3):
            self.s.run(None, self.feed)

    def measure(self) -> list[float]:
        out = []
        for _ in range(self.runs):
            t0 = time.perf_counter_ns()
            self.s.run(None, self.feed)
            out.append((time.perf_counter_ns() - t0) / 1e3)
        return out


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


# ---------------------------------------------------------------- main

def stats(v: list[float]) -> tuple[float, float]:
    a = np.sort(np.array(v))
    p90 = a[min(len(a) - 1, int(np.ceil(0.9 * len(a))) - 1)]
    return float(np.median(a)), float(p90)


def fmt_us(us: float) -> str:
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.0f} µs"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--litecvt", default=str(ROOT / "target/release/litecvt"))
    ap.add_argument("--models", default="mobilenetv2_block,digits_cnn,mnv2_224,convnet_112")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=20, help="invocations per engine per round")
    ap.add_argument("--work", help="keep converted files here (default: a temporary directory)")
    ap.add_argument("--json-out")
    ap.add_argument("--no-tract", action="store_true")
    ap.add_argument("--no-ort", action="store_true")
    ap.add_argument("--variants", default="float,int8", help="float, int8 or both")
    ap.add_argument("--literun-isa", help="LITERUN_ISA for literun (e.g. avx2 on an AVX-512 machine)")
    ap.add_argument("--xnnpack-isa", choices=["avx2", "avx512vnni"],
                    help="restrict LiteRT's XNNPack to this ISA's kernels (e.g. avx2 on an AVX-512 "
                         "machine; independent of --literun-isa)")
    ap.add_argument("--portable", action="store_true",
                    help="also run literun's portable (reference) kernels (LITERUN_ISA=portable)")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.xnnpack_isa:
        # Before the first interpreter: XNNPack reads its flags once per process.
        from xnnpack_isa import force_xnnpack_isa

        found, kept = force_xnnpack_isa(args.xnnpack_isa)
        print(f"XNNPack restricted to {args.xnnpack_isa}: arch_flags {found:#x} -> {kept:#x}",
              file=sys.stderr)

    tmp = tempfile.TemporaryDirectory()
    work = Path(args.work or tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    benches: list[tuple[str, str, str, object]] = []  # (model, variant, engine, bench)
    arenas: dict[tuple[str, str], dict[str, int | None]] = {}
    for name in args.models.split(","):
        rng = np.random.default_rng(7)
        if name in FIXTURES:
            onnx_path, calib_dir = (ROOT / p for p in FIXTURES[name])
            x = np.load(ROOT / f"fixtures/{Path(onnx_path).stem}.input.npy").astype(np.float32)
            calib_files = sorted(calib_dir.glob("*.npy"))[:CALIBRATION_SAMPLES]
            calib = [np.load(f).astype(np.float32) for f in calib_files]
            calib_arg = calib_dir
        elif name in GENERATED:
            make, size, shape = GENERATED[name]
            onnx_path = work / f"{name}.onnx"
            if not onnx_path.exists():
                make(onnx_path, size)
            x = rng.standard_normal(shape).astype(np.float32)
            calib_dir = work / f"{name}_calib"
            calib_dir.mkdir(exist_ok=True)
            calib = [rng.standard_normal(shape).astype(np.float32)
                     for _ in range(CALIBRATION_SAMPLES)]
            for i, c in enumerate(calib):
                np.save(calib_dir / f"{i:04}.npy", c)
            calib_arg = calib_dir
        else:
            sys.exit(f"unknown model {name}; known: {', '.join([*FIXTURES, *GENERATED])}")
        x_npy = work / f"{name}.input.npy"
        np.save(x_npy, x)
        f32 = work / f"{name}.f32.lite"
        i8 = work / f"{name}.int8.lite"
        if not f32.exists():
            run([args.litecvt, "convert", str(onnx_path), "-o", str(f32)])
        variants = args.variants.split(",")
        if "int8" in variants and not i8.exists():
            run([args.litecvt, "convert", str(onnx_path), "-o", str(i8), "--quantize", "int8",
                 "--calibration", str(calib_arg)])
        qdq = work / f"{name}.qdq.onnx"
        if not args.no_ort and "int8" in variants and not qdq.exists():
            ort_quantize(onnx_path, calib, qdq)
        for variant, lite in (("float", f32), ("int8", i8)):
            if variant not in variants:
                continue
            benches.append((name, variant, "literun",
                            LiteCvtBench(args.litecvt, lite, x_npy, args.runs, args.literun_isa)))
            if args.portable:
                benches.append((name, variant, "literun portable",
                                LiteCvtBench(args.litecvt, lite, x_npy, max(1, args.runs // 4), "portable")))
            benches.append((name, variant, "LiteRT+XNNPack", LiteRtBench(lite, x, args.runs, True)))
            benches.append((name, variant, "LiteRT builtin", LiteRtBench(lite, x, args.runs, False)))
            try:
                lr = litert_arena_bytes(lite)
            except Exception as e:  # noqa: BLE001 - a figure we report when we can
                print(f"note: LiteRT arena of {lite.name}: {e}", file=sys.stderr)
                lr = None
            arenas[(name, variant)] = {"LiteRT": lr}
        if not args.no_ort:
            if "float" in variants:
                benches.append((name, "float", "ORT", OrtBench(Path(onnx_path), x, args.runs)))
            if "int8" in variants:
                benches.append((name, "int8", "ORT (QDQ)", OrtBench(qdq, x, args.runs)))
        if not args.no_tract and "float" in variants:
            benches.append((name, "float", "tract", LiteCvtBench(args.litecvt, Path(onnx_path), x_npy, args.runs)))

    samples: dict[tuple[str, str, str], list[float]] = {}
    cpu_means: dict[tuple[str, str, str], list[float]] = {}
    for r in range(args.rounds):
        for model, variant, engine, b in benches:
            samples.setdefault((model, variant, engine), []).extend(b.measure())
            cpu = getattr(b, "cpu_mean_us", None)
            if cpu is not None:
                cpu_means.setdefault((model, variant, engine), []).append(cpu)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    for model, variant, engine, b in benches:
        if engine == "literun":
            arenas[(model, variant)]["literun"] = b.last["arena_bytes"]
            arenas[(model, variant)]["literun_prepacked"] = b.last["prepacked_bytes"]
            arenas[(model, variant)]["literun_peak_rss"] = b.last["peak_rss_bytes"]
            arenas[(model, variant)]["file"] = b.last["file_bytes"]

    print(f"\nsingle thread, batch 1; {args.rounds} rounds x {args.runs} runs per engine, interleaved; "
          f"literun ISA: {args.literun_isa or 'best'}, XNNPack ISA: {args.xnnpack_isa or 'best'}\n")
    print(f"| model | variant | engine | median | p90 | median vs literun |")
    print(f"|---|---|---|---|---|---|")
    rows = []
    for model, variant, engine, _ in benches:
        med, p90 = stats(samples[(model, variant, engine)])
        base = stats(samples[(model, variant, "literun")])[0]
        ratio = med / base
        rows.append({"model": model, "variant": variant, "engine": engine, "median_us": med,
                     "p90_us": p90, "ratio_vs_literun": ratio})
        print(f"| {model} | {variant} | {engine} | {fmt_us(med)} | {fmt_us(p90)} | {ratio:.2f}x |")
    print("\n(ratio > 1: that engine is slower than literun)\n")
    if cpu_means:
        # The latencies above include the time other processes hold the CPU (a run longer
        # than the scheduler's slice on a busy machine is stretched several-fold); the time
        # on a CPU of the thread that invoked is not.
        print("time on a CPU per run (median over the rounds of each round's mean):\n")
        print("| model | variant | engine | on CPU | vs literun |")
        print("|---|---|---|---|---|")
        for model, variant, engine, _ in benches:
            c = cpu_means.get((model, variant, engine))
            base = cpu_means.get((model, variant, "literun"))
            if not c or not base or not np.median(base) > 0:
                continue
            med, ref = float(np.median(c)), float(np.median(base))
            for row in rows:
                if (row["model"], row["variant"], row["engine"]) == (model, variant, engine):
                    row["cpu_mean_us"] = med
            print(f"| {model} | {variant} | {engine} | {fmt_us(med)} | {med / ref:.2f}x |")
        print()
    print("| model | variant | literun arena | LiteRT arena | literun prepacked | file | literun peak RSS |")
    print("|---|---|---|---|---|---|---|")
    for (model, variant), a in arenas.items():
        lr = a.get("LiteRT")
        rss = a.get("literun_peak_rss")
        print(f"| {model} | {variant} | {a.get('literun')} | {lr if lr is not None else 'n/a'} | "
              f"{a.get('literun_prepacked')} | {a.get('file')} | {rss} |")
    # Float vs int8 of literun itself.
    print()
    for model in dict.fromkeys(m for m, _, _, _ in benches):
        if (model, "int8", "literun") not in samples or (model, "float", "literun") not in samples:
            continue
        f = stats(samples[(model, "float", "literun")])[0]
        q = stats(samples[(model, "int8", "literun")])[0]
        print(f"literun {model}: int8 is {f / q:.2f}x faster than float")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({
            "literun_isa": args.literun_isa, "xnnpack_isa": args.xnnpack_isa, "rows": rows, "arenas": {
            f"{m}/{v}": a for (m, v), a in arenas.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
