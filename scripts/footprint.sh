#!/usr/bin/env bash
# Footprint of literun on devices (docs/devices.md):
#  - a stripped aarch64 Linux binary (and the same std program without literun, to subtract) that runs the full-int8 MobileNetV2-style block
#    (literun/examples/mobilenet_int8.rs, profile min-size), run once under qemu to prove it works,
#    with default features and with only the kernels that model needs (the goal's build);
#  - the thumbv7em-none-eabihf firmware example (examples/firmware): flash and RAM by section, and
#    its "core" = flash minus the embedded model, input and expected output. The firmware builds
#    literun with only the kernels the digits model needs (`default-features = false` and a few
#    `ops-*` features, see examples/firmware/Cargo.toml and docs/devices.md);
#  - the arena bytes of each committed fixture model.
# `--check` fails when the aarch64 goal is missed: literun's share of the aarch64 binary (its size
# minus the same std program without literun) <= 300 KiB; `--check-firmware` (what .ci/run uses)
# also fails when the firmware core is over 64 KiB.
# Extra arguments after `--` go to both cargo builds (e.g. `-- --no-default-features --features ...`).
set -euo pipefail
cd "$(dirname "$0")/.."
CHECK=0
FW_CHECK=0
if [ "${1:-}" = "--check" ]; then CHECK=1; shift; fi
if [ "${1:-}" = "--check-firmware" ]; then CHECK=1; FW_CHECK=1; shift; fi
[ "${1:-}" = "--" ] && shift
T=${CARGO_TARGET_DIR:-target}
A64_GOAL=$((300 * 1024))
FW_GOAL=$((64 * 1024))
fail=0
# Bytes of the sections loaded into memory (code, read-only data, data, unwind tables...): the
# file size moves in 64 KiB steps on aarch64 (segment alignment), this does not.
loaded() {
  readelf -SW "$1" | awk '$0 ~ /^ *\[ *[0-9]+\]/ {sub(/^ *\[ *[0-9]+\] */, ""); if ($7 ~ /A/ && $2 != "NOBITS") print $5}' |
    while read -r h; do echo $((16#$h)); done | awk '{s += $1} END {print s}'
}

# The kernels the int8 MobileNet needs (QUANTIZE, TRANSPOSE, PAD, CONV_2D, DEPTHWISE_CONV_2D, ADD,
# MEAN, FULLY_CONNECTED, DEQUANTIZE), one thread: what an app that runs this model links, as
# TFLite's selective build (~380 KB for arm64) is measured. The goal applies to this build; the
# default features (every kernel, threads) are reported too.
MOBILENET_FEATURES="std,error-details,offline-plan,ops-int8,ops-conv,ops-depthwise-conv"
MOBILENET_FEATURES="$MOBILENET_FEATURES,ops-fully-connected,ops-elementwise,ops-reduce,ops-pad,ops-shape"
MOBILENET_FEATURES="$MOBILENET_FEATURES,ops-reshape,ops-quantize"
dir="$T/aarch64-unknown-linux-gnu/min-size/examples"
model=$(stat -c %s literun/examples/models/mobilenetv2_block.int8.lite)
emb=$((model + $(stat -c %s fixtures/mobilenetv2_block.input.npy) + $(stat -c %s literun/examples/models/mobilenetv2_block.int8.expected.npy)))
# literun's share of the aarch64 example built with cargo arguments "$@" (prints, sets $share).
aarch64_share() {
  cargo build -q -p literun --example mobilenet_int8 --example std_baseline \
    --target aarch64-unknown-linux-gnu --profile min-size "$@"
  aarch64-linux-gnu-strip "$dir/mobilenet_int8" "$dir/std_baseline"
  qemu-aarch64 -L /usr/aarch64-linux-gnu "$dir/mobilenet_int8" >/dev/null
  local a64 a64l basel
  a64=$(stat -c %s "$dir/mobilenet_int8")
  a64l=$(loaded "$dir/mobilenet_int8")
  basel=$(loaded "$dir/std_baseline")
  share=$((a64l - basel - emb))
  echo "  file $a64 bytes ($((a64 / 1024)) KiB), loaded sections $a64l bytes; std alone (std_baseline) loaded" \
    "$basel bytes ($((basel / 1024)) KiB); embedded model+input+expected $emb; literun's share: $share bytes ($((share / 1024)) KiB)"
}
echo "aarch64 mobilenet_int8 (stripped, std, dynamic glibc), default features (every kernel, threads):"
aarch64_share "$@"
echo "aarch64 mobilenet_int8 with the MobileNet's kernels only (--no-default-features --features $MOBILENET_FEATURES):"
aarch64_share --no-default-features --features "$MOBILENET_FEATURES"
echo "  goal: literun's share <= 300 KiB"
[ "$share" -le "$A64_GOAL" ] || { echo "  OVER the aarch64 goal"; fail=1; }

cargo build -q -p literun-firmware --target thumbv7em-none-eabihf --profile min-size "$@"
fw="$T/thumbv7em-none-eabihf/min-size/literun-firmware"
# name size (hex) of every allocated section.
sections=$(readelf -SW "$fw" | awk '$0 ~ /^ *\[ *[0-9]+\]/ {sub(/^ *\[ *[0-9]+\] */, ""); print $1, $5}')
sec() { local h; h=$(echo "$sections" | awk -v n="$1" '$1 == n {print $2}' | head -1); echo $((16#${h:-0})); }
text=$(sec .text); rodata=$(sec .rodata); data=$(sec .data); bss=$(sec .bss); vt=$(sec .vector_table)
flash=$((vt + text + rodata + data))
embedded=$(( $(stat -c %s literun/examples/models/digits_cnn.int8.lite) + $(stat -c %s fixtures/digits_cnn.input.npy) + $(stat -c %s literun/examples/models/digits_cnn.int8.expected.npy) ))
core=$((flash - embedded))
echo "thumbv7em firmware: flash $flash bytes (.text $text, .rodata $rodata, .data $data, vectors $vt);" \
  "embedded model+input+expected $embedded; core $core bytes ($((core / 1024)) KiB); goal core <= 64 KiB"
echo "  RAM: .bss+.data $((bss + data)) bytes (4 KiB static arena, 16 KiB heap for preparing, stack not included)"
[ "$core" -le "$FW_GOAL" ] || { echo "  OVER the firmware goal"; [ "$FW_CHECK" = 0 ] || fail=1; }

echo "arena bytes of the fixture models:"
cargo run -q -p literun --example arena -- literun/examples/models/*.lite
if [ "$CHECK" = 1 ] && [ "$fail" = 1 ]; then exit 1; fi
