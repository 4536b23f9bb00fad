#!/usr/bin/env bash
# Benchmark: `polytrace dump` against `dlt-convert -a` on a ~100 MB .dlt of
# KPI messages (kpi-capture.dlt concatenated 167 times, built in /tmp).
# Prints the median wall and CPU time of each, the ratio, and peak RSS.
# RUNS=N to change the number of runs (default 5); KEEP=1 keeps the file.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-5}
SRC=testdata/kpi/kpi-capture.dlt
BIG=${TMPDIR:-/tmp}/polytrace-bench-dlt.$$.dlt
[ -f "$SRC" ] || { echo "missing $SRC" >&2; exit 2; }
command -v dlt-convert >/dev/null || { echo "dlt-convert not installed" >&2; exit 2; }

cargo build --release --quiet
PT=target/release/polytrace

for _ in $(seq 167); do cat "$SRC"; done >"$BIG"
[ "${KEEP:-0}" = 1 ] || trap 'rm -f "$BIG"' EXIT
echo "input: $BIG, $(stat -c %s "$BIG") bytes"

# Same output first (the point of the comparison).
if ! cmp -s <(TZ=UTC "$PT" dump "$BIG") <(TZ=UTC dlt-convert -a "$BIG"); then
    echo "WARNING: outputs differ" >&2
fi

# run NAME CMD...: RUNS runs, output to /dev/null; prints median wall,
# median user+sys and max RSS.
run() {
    local name=$1
    shift
    local t
    t=$(mktemp)
    for _ in $(seq "$RUNS"); do
        TZ=UTC /usr/bin/time -f "%e %U %S %M" -a -o "$t" "$@" >/dev/null
    done
    sort -n "$t" | awk -v name="$name" '
        { wall[NR] = $1; cpu[NR] = $2 + $3; if ($4 > rss) rss = $4 }
        END {
            n = asort(cpu)
            m = int((NR + 1) / 2)
            printf "%-12s wall median %.3f s  cpu median %.3f s  peak RSS %.1f MB\n",
                name, wall[m], cpu[m], rss / 1024
            print wall[m], cpu[m] > "/dev/stderr"
        }' 2>"$t.med"
    cat "$t.med" >>"$RESULTS"
    rm -f "$t" "$t.med"
}

RESULTS=$(mktemp)
run polytrace "$PT" dump "$BIG"
run dlt-convert dlt-convert -a "$BIG"
awk 'NR == 1 { w = $1; c = $2 } NR == 2 {
        printf "ratio (dlt-convert / polytrace): wall %.1fx, cpu %.1fx\n", $1 / w, $2 / c }' "$RESULTS"
rm -f "$RESULTS"
