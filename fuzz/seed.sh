#!/usr/bin/env bash
# Seeds fuzz/corpus/model with literun's example models, and with every fixture converted by
# litecvt (float, fp16, int8 weights-only) when a litecvt binary is given: seed.sh [path/to/litecvt].
# Seeds fuzz/corpus/onnx with the fixture ONNX files up to 64 KB (op models, small main, zoo and QDQ
# models).
set -euo pipefail
cd "$(dirname "$0")/.."
out=fuzz/corpus/model
mkdir -p "$out"
cp literun/examples/models/*.lite "$out/"
if [ $# -ge 1 ]; then
  tmp=$(mktemp -d)
  for f in fixtures/*.onnx fixtures/ops/*.onnx; do
    n=$(basename "$f" .onnx)
    "$1" convert "$f" -o "$tmp/$n.lite" >/dev/null 2>&1 || continue
    "$1" convert "$f" -o "$tmp/$n.fp16.lite" --quantize fp16 >/dev/null 2>&1 || true
    "$1" convert "$f" -o "$tmp/$n.int8w.lite" --quantize int8 >/dev/null 2>&1 || true
  done
  cp "$tmp"/*.lite "$out/" 2>/dev/null || true
  rm -rf "$tmp"
fi
ls "$out" | wc -l
onnx=fuzz/corpus/onnx
mkdir -p "$onnx"
find fixtures/*.onnx fixtures/ops fixtures/zoo fixtures/qdq -name '*.onnx' -size -64k -exec cp {} "$onnx/" \;
ls "$onnx" | wc -l
