#!/bin/bash
# Benchmark: `polytrace dump` (pmdumplog-style listing) against `pmdumplog -a`
# on the two large testsuite archives; prints wall time, ratio and peak RSS.
# Usage: scripts/bench-pcp.sh [RUNS]   (default 1 run each; median if more)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-1}
TS=/var/lib/pcp/testsuite/archives
cargo build --release --quiet
PT=target/release/polytrace

# run CMD... -> prints "seconds maxrss_kb" of the median run
measure() {
    local tf; tf=$(mktemp)
    local res=()
    for _ in $(seq "$RUNS"); do
        /usr/bin/time -f "%e %M" -o "$tf" "$@" > /dev/null 2>&1 || true
        res+=("$(cat "$tf")")
    done
    rm -f "$tf"
    printf '%s\n' "${res[@]}" | sort -n | sed -n "$(( (RUNS + 1) / 2 ))p"
}

printf '%-28s %10s %10s %8s %12s %12s\n' archive pmdumplog polytrace ratio "peer RSS" "our RSS"
for set in bozo-20170904 pcp-pidstat-process-args; do
    a="$TS/$set"
    read -r pt pm <<<"$(measure pmdumplog -a "$a")"
    read -r ot om <<<"$(measure "$PT" dump "$a")"
    ratio=$(awk -v p="$pt" -v o="$ot" 'BEGIN { printf "%.1fx", (o > 0 ? p / o : 0) }')
    printf '%-28s %9ss %9ss %8s %10s kB %10s kB\n' "$set" "$pt" "$ot" "$ratio" "$pm" "$om"
done
# Values-only listing for reference (one line per value).
for set in bozo-20170904 pcp-pidstat-process-args; do
    read -r vt vm <<<"$(measure "$PT" dump --style values "$TS/$set")"
    printf '%-28s values listing: %ss, %s kB\n' "$set" "$vt" "$vm"
done
