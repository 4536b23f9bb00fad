#!/bin/bash
# Benchmark: `polytrace dump` (pmdumplog-style listing) against `pmdumplog -a`
# on the two large testsuite archives; prints wall time, ratio and peak RSS.
# Usage: scripts/bench-pcp.sh [RUNS]   (default 1 run each; median if more)
# pmdumplog -a on pcp-pidstat-process-args takes minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-1}
TS=/var/lib/pcp/testsuite/archives
cargo build --release --quiet
PT=target/release/polytrace

# run CMD... -> prints "wall_s maxrss_kb cpu_s" of the median run (by wall time).
# CPU time (user+sys) is reported too: on a shared machine wall time mostly
# measures the other jobs.
measure() {
    local tf; tf=$(mktemp)
    local res=()
    for _ in $(seq "$RUNS"); do
        /usr/bin/time -f "%e %M %U %S" -o "$tf" "$@" > /dev/null 2>&1 || true
        res+=("$(awk '{ printf "%s %s %.2f", $1, $2, $3 + $4 }' "$tf")")
    done
    rm -f "$tf"
    printf '%s\n' "${res[@]}" | sort -n | sed -n "$(( (RUNS + 1) / 2 ))p"
}

printf '%-26s %18s %18s %14s %11s %11s\n' archive "pmdumplog wall/cpu" "polytrace wall/cpu" "ratio wall/cpu" "peer RSS" "our RSS"
for set in bozo-20170904 pcp-pidstat-process-args; do
    a="$TS/$set"
    read -r pt pm pc <<<"$(measure pmdumplog -a "$a")"
    read -r ot om oc <<<"$(measure "$PT" dump "$a")"
    ratio=$(awk -v p="$pt" -v o="$ot" -v pc="$pc" -v oc="$oc" \
        'BEGIN { printf "%.1fx/%.1fx", (o > 0 ? p / o : 0), (oc > 0 ? pc / oc : 0) }')
    printf '%-26s %8ss/%7ss %8ss/%7ss %14s %8s kB %8s kB\n' "$set" "$pt" "$pc" "$ot" "$oc" "$ratio" "$pm" "$om"
done
# The floor: decoding the xz data volume alone (`xz -dc`), which any listing
# of these archives must do once.
for set in bozo-20170904 pcp-pidstat-process-args; do
    read -r xt xm xc <<<"$(measure xz -dc "$TS/$set.0.xz")"
    printf '%-26s xz -dc of the data volume: %ss wall, %ss cpu\n' "$set" "$xt" "$xc"
done
# Values-only listing for reference (one line per value).
for set in bozo-20170904 pcp-pidstat-process-args; do
    read -r vt vm vc <<<"$(measure "$PT" dump --style values "$TS/$set")"
    printf '%-26s values listing: %ss wall, %ss cpu, %s kB\n' "$set" "$vt" "$vc" "$vm"
done
