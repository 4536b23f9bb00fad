#!/usr/bin/env bash
# Benchmark the LTT reader/dump/writer on the real 2004 trace.
# No maintained LTT tool exists to compare with (LTTV 2004 does not build on
# current systems), so the yardstick is `xz -dc` of the reference listing:
# the cost of merely producing the same 15 MB of text.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
BIN=target/release/polytrace
SMP=testdata/ltt/smp_example
REF=testdata/ltt/smp_example.dump.txt.xz
N=${N:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

measure() { # label, command...
    local label=$1
    shift
    local best=999999 rss=0
    for _ in $(seq "$N"); do
        /usr/bin/time -f "%e %M" -o "$tmp/t" "$@" >/dev/null 2>&1
        read -r secs kb <"$tmp/t"
        best=$(awk -v a="$best" -v b="$secs" 'BEGIN{print (b<a)?b:a}')
        rss=$kb
    done
    echo "$label: best ${best}s of $N, peak RSS ${rss} KB" >&2
    echo "$best"
}

ours=$(measure "polytrace dump smp_example" "$BIN" dump "$SMP")
yard=$(measure "xz -dc reference listing" xz -dc "$REF")
measure "polytrace convert smp_example -> ltt" \
    sh -c "rm -rf '$tmp/o'; '$BIN' convert -q --to ltt -o '$tmp/o' '$SMP'" >/dev/null || \
measure "polytrace convert smp_example -> ltt" \
    sh -c "rm -rf '$tmp/o'; '$BIN' convert --to ltt -o '$tmp/o' '$SMP'" >/dev/null
awk -v a="$ours" -v b="$yard" 'BEGIN{ if (b > 0) printf "ratio dump / xz -dc: %.2f\n", a / b; else print "ratio: n/a" }'
