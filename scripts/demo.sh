#!/usr/bin/env bash
# The main job on a fresh machine: build, record a few seconds of /proc, dump the result.
#   scripts/demo.sh [SECONDS] [FORMAT]     (defaults: 5 s, kpi text lines)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
fmt=${2:-kpi}
cargo build --release -q
out=$(mktemp -d)/demo
target/release/polytrace record --duration "${secs}s" --interval 1s --to "$fmt" -o "$out"
target/release/polytrace info "$out"
target/release/polytrace dump "$out" | head -n 40
echo "(trace kept at $out)"
