#!/usr/bin/env bash
# Benchmark the export writers on smp_example (173,151 events) and on the
# same trace repeated 30 times (5.19 M events, 60 MB of cpu files): time,
# CPU time and peak RSS of `convert --to chrome-json` and `--to csv --events`.
# The two sizes show whether memory follows the input (it must not).
# Usage: scripts/bench-export.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
cargo build --release -q
BIN=target/release/polytrace
SMP=testdata/ltt/smp_example
WORK=$(mktemp -d /tmp/bench-export.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# smp_example x30: each cpu file is one 1,000,000-byte block; copy k gets
# its block_start/block_end seconds moved by 21 s x k (the trace spans 20 s)
# and block_id k, so the copies follow each other in time.
cp -r "$SMP" "$WORK/x30"
chmod -R u+w "$WORK/x30"
python3 - "$SMP" "$WORK/x30" 30 <<'PY'
import os, struct, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
B = 1_000_000
for cpu in os.listdir(os.path.join(src, "cpu")):
    block = open(os.path.join(src, "cpu", cpu), "rb").read()
    assert len(block) == B
    end = B - struct.unpack_from("<I", block, B - 4)[0]
    assert struct.unpack_from("<H", block, 0)[0] == 17  # block_start
    assert struct.unpack_from("<H", block, end)[0] == 18  # block_end
    out = bytearray()
    for k in range(n):
        b = bytearray(block)
        for off in (6, end + 6):  # payload: u32 sec, u32 nsec, u64 cycles, u32 id
            struct.pack_into("<I", b, off, struct.unpack_from("<I", b, off)[0] + 21 * k)
            struct.pack_into("<I", b, off + 16, k)
        out += b
    open(os.path.join(dst, "cpu", cpu), "wb").write(out)
PY
"$BIN" info "$WORK/x30" | sed -n 's/^  events *\([0-9]*\)/x30: \1 events/p' >&2

measure() { # label, command... : best wall of $RUNS, its CPU time, peak RSS
    local label=$1
    shift
    local best="" cpu="" rss=0
    for _ in $(seq "$RUNS"); do
        rm -rf "$WORK/out"*
        /usr/bin/time -f "%e %U %S %M" -o "$WORK/t" "$@" >/dev/null 2>&1
        read -r secs user sys kb <"$WORK/t"
        if [[ -z $best ]] || awk -v a="$secs" -v b="$best" 'BEGIN{exit !(a<b)}'; then
            best=$secs
            cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN{printf "%.2f", u+s}')
        fi
        ((kb > rss)) && rss=$kb
    done
    local size
    size=$(cat "$WORK"/out* | wc -c)
    printf '%-20s best %6ss wall of %s, %5ss CPU, peak RSS %6d KB, output %d bytes\n' \
        "$label" "$best" "$RUNS" "$cpu" "$rss" "$size"
}

for size in x1 x30; do
    src=$SMP
    [[ $size == x30 ]] && src=$WORK/x30
    measure "chrome-json $size" "$BIN" convert -q "$src" --to chrome-json -o "$WORK/out.json"
    measure "csv --events $size" "$BIN" convert -q "$src" --to csv --events -o "$WORK/out.csv"
done
