#!/usr/bin/env bash
# The main job on a fresh machine: build, record a few seconds of /proc, dump the result.
#   scripts/demo.sh [SECONDS] [FORMAT]
# Default: 5 s into the recorder's default format (an LTT trace directory,
# which holds every event and sample). With FORMAT (kpi, dlt, mmv, pcp,
# timeline) what that format cannot carry is listed as dropped (exit 1).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
cargo build --release -q
out=$(mktemp -d)/demo
rc=0
target/release/polytrace record --duration "${secs}s" --interval 1s ${2:+--to "$2"} -o "$out" || rc=$?
if ((rc > 1)); then exit "$rc"; fi
target/release/polytrace info "$out"
target/release/polytrace dump "$out" | head -n 40
echo "(trace kept at $out)"
