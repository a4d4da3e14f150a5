#!/usr/bin/env bash
# Builds literun's C static library and examples/c/main.c with the system C compiler, then runs it
# on the committed fixture models and checks the outputs (int8 bit-exact, float within 1e-6).
#   examples/c/run.sh [--release]
set -euo pipefail
cd "$(dirname "$0")/../.."
PROFILE=debug
FLAGS=()
if [ "${1:-}" = "--release" ]; then PROFILE=release; FLAGS=(--release); fi
TARGET_DIR=${CARGO_TARGET_DIR:-target}
cargo build -p literun-capi "${FLAGS[@]}"
OUT="$TARGET_DIR/c-example"
mkdir -p "$OUT"
# The libraries a Rust staticlib needs on Linux (`--print native-static-libs`).
${CC:-cc} -std=c99 -O2 -Wall -Wextra -Werror -pedantic -Iliterun-capi/include examples/c/main.c \
  "$TARGET_DIR/$PROFILE/libliterun_capi.a" -lpthread -ldl -lm -o "$OUT/literun_c"
M=literun/examples/models
"$OUT/literun_c" $M/digits_cnn.int8.lite fixtures/digits_cnn.input.npy $M/digits_cnn.int8.expected.npy
"$OUT/literun_c" $M/mobilenetv2_block.lite fixtures/mobilenetv2_block.input.npy $M/mobilenetv2_block.expected.npy 1e-6
