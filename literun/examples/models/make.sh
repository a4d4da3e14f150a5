#!/usr/bin/env bash
# Regenerates the converted fixture models and their expected outputs (literun on the host, x86-64):
#   literun/examples/models/make.sh [path/to/litecvt]
# The files are committed: literun's `fixture_models` test, the firmware example and the C example
# use them without needing the converter. Expected outputs are literun's own results, so the test
# proves other targets (aarch64 under qemu) compute the same numbers as x86-64.
set -euo pipefail
cd "$(dirname "$0")/../../.."
LITECVT=${1:-target/debug/litecvt}
OUT=literun/examples/models
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for m in digits_cnn mobilenetv2_block attention_block; do
  cal=calibration/${m%_cnn}
  [ -d "$cal" ] || cal=calibration/$m
  "$LITECVT" convert "fixtures/$m.onnx" -o "$OUT/$m.lite" >/dev/null
  "$LITECVT" convert "fixtures/$m.onnx" -o "$OUT/$m.int8.lite" --quantize int8 --calibration "$cal" >/dev/null
  for v in "$m" "$m.int8"; do
    "$LITECVT" run "$OUT/$v.lite" "fixtures/$m.input.npy" --output-dir "$TMP/$v" >/dev/null
    cp "$TMP/$v/output.npy" "$OUT/$v.expected.npy"
  done
done
chmod 644 "$OUT"/*.lite "$OUT"/*.npy
ls -l "$OUT"
