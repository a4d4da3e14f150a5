#!/usr/bin/env python3
"""The ONNX backend conformance tests through litecvt: never silently wrong.

    python3 scripts/onnx_backend_suite.py [--litecvt target/debug/litecvt] [--jobs 2]
        [--suites node,simple,pytorch-converted,pytorch-operator] [--only REGEX]
        [--json results.json] [--markdown table.md]
        [--check scripts/onnx_backend_suite.expected.json] [--write-expected FILE]

The tests are the ones the installed `onnx` package defines (scripts/onnx_backend_suite.requirements.txt
pins it): `onnx/backend/test/data/{simple,pytorch-converted,pytorch-operator}/test_*/` ship inside the
wheel; the `node` tests (one per operator case, `model.onnx` + `test_data_set_*/{input,output}_N.pb`)
no longer do, so they are generated once from the wheel's own case definitions
(`onnx.backend.test.case.node`, the same code and random seeds ONNX uses to write them) into
CACHE/onnx-VERSION/node.

Each test: `litecvt convert model.onnx` (inputs with dynamic dimensions get the test data's shape with
--input-shape), `litecvt inspect --json` for the converted model's inputs, then `litecvt run` on every
data set, and each output compared with the expected one as ONNX's backend tests do (same shape,
|got - want| <= atol + rtol * |want| with rtol 1e-3, atol 1e-5, NaN equal to NaN; integer and bool
outputs exactly). Outcomes, worst first:
  crash     litecvt died from a signal or a Rust panic, or took longer than --timeout
  wrong     converted and ran, but an output has the wrong shape or values (or is missing)
  run-error converted, but `litecvt run` failed
  refused   `litecvt convert` failed with an error message (the message is recorded)
  pass      every output of every data set matches

--check EXPECTED.json fails (exit 1) on any crash, wrong or run-error result, and on any test listed in
EXPECTED.json's "pass" that does not pass now; tests that newly pass are reported (refresh the file with
--write-expected). --json writes every result, --markdown the counts per suite and per operator.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parent.parent
SUITES = ("node", "simple", "pytorch-converted", "pytorch-operator")
STATUSES = ("pass", "refused", "run-error", "wrong", "crash")
FAILING = ("run-error", "wrong", "crash")
RTOL, ATOL = 1e-3, 1e-5
# Larger frozen inputs would not fit a command-line argument.
FREEZE_MAX_ELEMENTS = 2000
# Rust's exit code after a panic in the main thread.
PANIC_EXIT = 101


def default_litecvt():
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / "litecvt"


# ---------------------------------------------------------------------------------------------
# The test data
# ---------------------------------------------------------------------------------------------
def generate_node_tests(dest):
    """Writes the node tests the installed onnx defines to DEST/node/test_*, as its
    `backend-test-tools generate-data` writes the model tests (same serialization)."""
    import types

    import onnx.backend.test.case.node as node_cases
    import onnx.backend.test.cmd_tools as cmd_tools

    cmd_tools.model_test = types.SimpleNamespace(collect_testcases=node_cases.collect_testcases)
    cmd_tools.generate_data(argparse.Namespace(output=str(dest)))


def suite_dirs(suites, cache):
    """suite -> directory of its test_* folders (the wheel's, or generated into CACHE)."""
    wheel = Path(onnx.__file__).resolve().parent / "backend" / "test" / "data"
    out = {}
    for s in suites:
        if (wheel / s).is_dir() and any((wheel / s).glob("test_*")):
            out[s] = wheel / s
            continue
        if s != "node":
            sys.exit(f"onnx {onnx.__version__} has no '{s}' backend tests in {wheel}")
        generated = cache / f"onnx-{onnx.__version__}"
        done = generated / "node.complete"
        if not done.exists():
            print(f"generating the node tests of onnx {onnx.__version__} into {generated} ...", flush=True)
            tmp = cache / f"onnx-{onnx.__version__}.partial"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            generate_node_tests(tmp)
            shutil.rmtree(generated, ignore_errors=True)
            tmp.rename(generated)
            done.write_text(f"{sum(1 for _ in (generated / 'node').iterdir())}\n")
        out[s] = generated / "node"
    return out


def read_value(path, type_proto):
    """A .pb test value as a numpy array, or None for a sequence/map/optional value."""
    if not type_proto.HasField("tensor_type"):
        return None
    t = onnx.TensorProto()
    t.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(t)


def data_sets(test_dir, graph_inputs, graph_outputs):
    """[(inputs, outputs)] per test_data_set_N, values None where not a tensor."""
    out = []
    numbered = lambda p: int(re.search(r"(\d+)\.pb$", p.name).group(1))  # noqa: E731
    for ds in sorted(test_dir.glob("test_data_set_*"), key=lambda p: int(p.name.rsplit("_", 1)[1])):
        ins = sorted(ds.glob("input_*.pb"), key=numbered)
        outs = sorted(ds.glob("output_*.pb"), key=numbered)
        inputs = [read_value(p, graph_inputs[i].type) if i < len(graph_inputs) else None
                  for i, p in enumerate(ins)]
        outputs = [read_value(p, graph_outputs[i].type) if i < len(graph_outputs) else None
                   for i, p in enumerate(outs)]
        out.append((inputs, outputs))
    return out


# ---------------------------------------------------------------------------------------------
# One test
# ---------------------------------------------------------------------------------------------
class Outcome(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


def litecvt(binary, args, timeout):
    """Runs litecvt; raises Outcome('crash') on a signal, a panic or a timeout, returns
    (ok, stdout, error message)."""
    try:
        p = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Outcome("crash", f"litecvt {args[0]}: no result after {timeout} s")
    err = p.stderr.strip()
    if p.returncode < 0:
        raise Outcome("crash", f"litecvt {args[0]}: killed by signal {-p.returncode}: {err[-300:]}")
    if p.returncode == PANIC_EXIT or "panicked at" in err:
        raise Outcome("crash", f"litecvt {args[0]}: panic: {err[-500:]}")
    message = err[len("error: "):] if err.startswith("error: ") else err
    return p.returncode == 0, p.stdout, " ".join(message.split())


def dynamic(type_proto):
    shape = type_proto.tensor_type.shape if type_proto.HasField("tensor_type") else None
    if shape is None or not type_proto.tensor_type.HasField("shape"):
        return True
    return any(not d.HasField("dim_value") for d in shape.dim)


def npy_ready(a):
    """The array as litecvt reads it (.npy dtypes it knows), or None."""
    if a.dtype in (np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8, np.int8,
                   np.int16, np.bool_):
        return np.asarray(a, order="C")
    return None


def compare(name, got, want):
    """None if GOT matches WANT, else what differs."""
    if got.shape != want.shape:
        return f"output '{name}': shape {list(got.shape)}, expected {list(want.shape)}"
    if want.dtype == np.bool_ or np.issubdtype(want.dtype, np.integer):
        if not np.array_equal(got.astype(np.int64), want.astype(np.int64)):
            bad = int(np.sum(got.astype(np.int64) != want.astype(np.int64)))
            return f"output '{name}': {bad} of {want.size} values differ"
        return None
    if not np.issubdtype(want.dtype, np.floating):
        return f"output '{name}': expected values of type {want.dtype} cannot be compared"
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    nan = np.isnan(w)
    if not np.array_equal(nan, np.isnan(g)):
        return f"output '{name}': NaN where none is expected, or a value where NaN is"
    g, w = g[~nan], w[~nan]
    inf = np.isinf(w)
    if not np.array_equal(g[inf], w[inf]):
        return f"output '{name}': infinities differ"
    g, w = g[~inf], w[~inf]
    err = np.abs(g - w)
    bad = err > ATOL + RTOL * np.abs(w)
    if bad.any():
        return (f"output '{name}': {int(bad.sum())} of {want.size} values off, max abs error "
                f"{float(err.max()):.3g}")
    return None


def run_test(binary, suite, test_dir, timeout, freeze):
    name = f"{suite}/{test_dir.name}"
    model = onnx.load(str(test_dir / "model.onnx"), load_external_data=False)
    ops = sorted({(n.domain + "." if n.domain not in ("", "ai.onnx") else "") + n.op_type
                  for n in model.graph.node})
    result = {"name": name, "suite": suite, "ops": ops}
    t0 = time.time()
    try:
        status, message = check(binary, test_dir, model, timeout, freeze, result)
    except Outcome as o:
        status, message = o.status, o.message
    # Messages name the model file and the work directory: keep them readable and stable.
    for key in ("message", "refused_with_inputs_frozen"):
        text = message if key == "message" else result.get(key)
        if text:
            text = text.replace(str(test_dir / "model.onnx"), "model.onnx")
            text = re.sub(r"\S*/onnx-suite-[^/\s]*/", "", text)
            if key == "message":
                message = text
            else:
                result[key] = text
    result.update(status=status, message=message, seconds=round(time.time() - t0, 3))
    return result


def frozen_inputs(graph_inputs, sets):
    """[(name, "v0,v1,...")] for every input but the first, when each has one value in all data
    sets and few enough elements for a command line; [] if any cannot be frozen."""
    out = []
    for i, vi in enumerate(graph_inputs[1:], start=1):
        values = [ins[i] if i < len(ins) else None for ins, _ in sets]
        first = values[0] if values else None
        if first is None or any(v is None or not np.array_equal(v, first, equal_nan=True) for v in values):
            return []
        if first.size == 0 or first.size > FREEZE_MAX_ELEMENTS or npy_ready(first) is None:
            return []
        if first.dtype == np.bool_ or np.issubdtype(first.dtype, np.integer):
            text = ",".join(str(int(x)) for x in first.reshape(-1))
        else:
            text = ",".join(repr(float(x)) for x in first.reshape(-1))
        out.append((vi.name, text))
    return out


def check(binary, test_dir, model, timeout, freeze, result):
    """(status, message) of one test; result["frozen"] names the inputs frozen to their test
    values when the model converts only with them frozen."""
    initializers = {i.name for i in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in initializers]
    graph_outputs = list(model.graph.output)
    sets = data_sets(test_dir, graph_inputs, graph_outputs)
    with tempfile.TemporaryDirectory(prefix="onnx-suite-") as tmp:
        work = Path(tmp)
        lite = work / "model.lite"
        args = ["convert", str(test_dir / "model.onnx"), "-o", str(lite)]
        if sets:
            for i, vi in enumerate(graph_inputs):
                value = sets[0][0][i] if i < len(sets[0][0]) else None
                if value is not None and dynamic(vi.type):
                    args += ["--input-shape", f"{vi.name}={','.join(str(d) for d in value.shape)}"]
        ok, _, message = litecvt(binary, args, timeout)
        if not ok and freeze:
            freezable = frozen_inputs(graph_inputs, sets)
            if freezable:
                values = [f"{n}={v}" for n, v in freezable]
                ok, _, frozen_message = litecvt(
                    binary, args + [a for v in values for a in ("--input-value", v)], timeout)
                if not ok:
                    result["refused_with_inputs_frozen"] = frozen_message
                if ok:
                    result["frozen"] = [n for n, _ in freezable]
        if not ok:
            return "refused", message
        ok, out, message = litecvt(binary, ["inspect", "--json", str(lite)], timeout)
        if not ok:
            return "run-error", f"inspect: {message}"
        info = json.loads(out)
        by_name = {vi.name: i for i, vi in enumerate(graph_inputs)}
        for n, (inputs, outputs) in enumerate(sets):
            args = ["run", str(lite), "--output-dir", str(work / f"out{n}")]
            for inp in info["inputs"]:
                if inp["name"] not in by_name:
                    return "wrong", f"converted model input '{inp['name']}' is no ONNX input"
                i = by_name[inp["name"]]
                value = inputs[i] if i < len(inputs) else None
                ready = npy_ready(value) if value is not None else None
                if ready is None:
                    return "run-error", (f"input '{inp['name']}': test value of type "
                                         f"{'non-tensor' if value is None else value.dtype} cannot be fed")
                path = work / f"in{n}_{i}.npy"
                np.save(path, ready)
                args += ["--input", f"{inp['name']}={path}"]
            ok, _, message = litecvt(binary, args, timeout)
            if not ok:
                return "run-error", message
            produced = {o["name"] for o in info["outputs"]}
            for k, want in enumerate(outputs):
                oname = graph_outputs[k].name if k < len(graph_outputs) else f"#{k}"
                if want is None:
                    return "run-error", f"output '{oname}': expected value is not a tensor"
                if oname not in produced:
                    return "wrong", (f"output '{oname}' missing from the converted model "
                                     f"(outputs: {', '.join(sorted(produced))})")
                got = np.load(work / f"out{n}" / (re.sub(r"[/:\\]", "_", oname) + ".npy"))
                diff = compare(oname, got, want)
                if diff:
                    return "wrong", (f"data set {n}: " if len(sets) > 1 else "") + diff
        return "pass", ""


# ---------------------------------------------------------------------------------------------
# Reports
# ---------------------------------------------------------------------------------------------
def counts(results):
    c = Counter(r["status"] for r in results)
    return {s: c.get(s, 0) for s in STATUSES}


def frozen_passes(results):
    return sum(1 for r in results if r["status"] == "pass" and r.get("frozen"))


def markdown(results, meta):
    lines = [f"# ONNX backend tests of onnx {meta['onnx']} through litecvt", "",
             "Written by `scripts/onnx_backend_suite.py --markdown` (see docs/reliability.md); outputs "
             f"compared with rtol {RTOL:g}, atol {ATOL:g}. A refused test that converts with its other "
             "inputs frozen to the test's values (`--input-value`) is run that way.", "",
             "| suite | tests | " + " | ".join(STATUSES) + " | pass with inputs frozen |",
             "|---|---:|" + "---:|" * (len(STATUSES) + 1)]
    by_suite = defaultdict(list)
    for r in results:
        by_suite[r["suite"]].append(r)
    for s in SUITES:
        if s in by_suite:
            c = counts(by_suite[s])
            lines.append(f"| {s} | {len(by_suite[s])} | " + " | ".join(str(c[k]) for k in STATUSES)
                         + f" | {frozen_passes(by_suite[s])} |")
    c = counts(results)
    lines.append(f"| all | {len(results)} | " + " | ".join(str(c[k]) for k in STATUSES)
                 + f" | {frozen_passes(results)} |")
    bad = [r for r in results if r["status"] in FAILING]
    if bad:
        lines += ["", "Failures:", ""]
        lines += [f"- `{r['name']}` ({r['status']}): {r['message']}" for r in bad]
    node = [r for r in results if r["suite"] == "node"]
    if node:
        lines += ["", "Node tests per operator (tests of one node; those of several, mostly ONNX's function "
                  "expansions `*_expanded`, are counted together; the first refusal message is shown):", "",
                  "| operator | tests | pass | refused | other | refusal |", "|---|---:|---:|---:|---:|---|"]
        per_op = defaultdict(list)
        for r in node:
            per_op[r["ops"][0] if len(r["ops"]) == 1 else "(several operators)"].append(r)
        for op in sorted(per_op, key=str.lower):
            rs = per_op[op]
            c = counts(rs)
            refusal = next((r["message"] for r in rs if r["status"] == "refused"), "")
            refusal = refusal.replace("|", "\\|")
            if len(refusal) > 140:
                refusal = refusal[:137] + "..."
            other = len(rs) - c["pass"] - c["refused"]
            lines.append(f"| {op} | {len(rs)} | {c['pass']} | {c['refused']} | {other} | {refusal} |")
    return "\n".join(lines) + "\n"


def check_expected(results, expected_path):
    """Problems against the expectations file, and tests that newly pass."""
    expected = json.loads(expected_path.read_text())
    by_name = {r["name"]: r for r in results}
    problems = [f"{r['name']}: {r['status']}: {r['message']}" for r in results if r["status"] in FAILING]
    must_pass = set(expected.get("pass", []))
    for name in sorted(must_pass):
        r = by_name.get(name)
        if r is not None and r["status"] != "pass":
            problems.append(f"{name}: expected to pass, now {r['status']}: {r['message']}")
    newly = sorted(r["name"] for r in results if r["status"] == "pass" and r["name"] not in must_pass)
    if expected.get("onnx") and expected["onnx"] != onnx.__version__:
        print(f"note: {expected_path} was written with onnx {expected['onnx']}, this is {onnx.__version__}")
    return problems, newly


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--litecvt", type=Path, default=None, help="litecvt binary (default: CARGO_TARGET_DIR/debug)")
    ap.add_argument("--cache", type=Path, default=ROOT / "target" / "onnx-backend",
                    help="where the generated node tests go (default target/onnx-backend)")
    ap.add_argument("--suites", default=",".join(SUITES), help="comma-separated (default: all four)")
    ap.add_argument("--only", default="", help="only tests whose SUITE/NAME matches this regex")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="tests run in parallel")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per litecvt command")
    ap.add_argument("--no-freeze", action="store_true",
                    help="do not retry a refused model with its other inputs frozen to the test values")
    ap.add_argument("--json", type=Path, help="write every result here")
    ap.add_argument("--markdown", type=Path, help="write the counts (per suite, per operator) here")
    ap.add_argument("--check", type=Path, help="expectations file: fail on regressions")
    ap.add_argument("--write-expected", type=Path, help="write an expectations file from this run")
    args = ap.parse_args()
    binary = (args.litecvt or default_litecvt()).resolve()
    if not binary.exists():
        sys.exit(f"litecvt not found at {binary}: build it (cargo build --bin litecvt) or pass --litecvt")
    suites = [s for s in args.suites.split(",") if s]
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        sys.exit(f"unknown suite(s) {unknown}; known: {', '.join(SUITES)}")
    only = re.compile(args.only) if args.only else None

    t0 = time.time()
    tests = []
    for suite, d in suite_dirs(suites, args.cache.resolve()).items():
        for t in sorted(d.glob("test_*")):
            if (t / "model.onnx").exists() and (only is None or only.search(f"{suite}/{t.name}")):
                tests.append((suite, t))
    print(f"{len(tests)} tests, {args.jobs} at a time, litecvt {binary}", flush=True)
    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(run_test, binary, s, t, args.timeout, not args.no_freeze) for s, t in tests]
        for f in concurrent.futures.as_completed(futures):
            r = f.result()
            results.append(r)
            if r["status"] in FAILING:
                print(f"  {r['status']:9} {r['name']}: {r['message']}", flush=True)
    results.sort(key=lambda r: (SUITES.index(r["suite"]), r["name"]))
    meta = {"onnx": onnx.__version__, "rtol": RTOL, "atol": ATOL, "seconds": round(time.time() - t0, 1)}
    table = markdown(results, meta)
    print(table.split("\n\nNode tests per operator")[0].rstrip())
    print(f"({meta['seconds']} s)")
    if args.json:
        args.json.write_text(json.dumps({**meta, "results": results}, indent=1) + "\n")
    if args.markdown:
        args.markdown.write_text(table)
    if args.write_expected:
        passing = sorted(r["name"] for r in results if r["status"] == "pass")
        args.write_expected.write_text(json.dumps(
            {"onnx": onnx.__version__, "rtol": RTOL, "atol": ATOL, "pass": passing}, indent=1) + "\n")
    if args.check:
        problems, newly = check_expected(results, args.check)
        if newly:
            print(f"{len(newly)} test(s) pass that {args.check} does not list (refresh it with "
                  f"--write-expected): {', '.join(newly[:20])}{' ...' if len(newly) > 20 else ''}")
        if problems:
            print(f"FAILED: {len(problems)} problem(s):")
            for p in problems:
                print(f"  {p}")
            return 1
        print("OK: no crash, wrong or run-error result, every expected pass passes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
