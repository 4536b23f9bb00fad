#!/bin/bash
# Benchmark: conversions into PCP archives against their references, as
# medians of alternating runs (wall and CPU seconds, ratio polytrace/peer):
#   - PCP -> PCP of pcp-pidstat-process-args and bozo-20170904 (testsuite
#     archives, decompressed into a temporary directory first) against
#     `pmlogextract` of the same copy;
#   - a 100 MB .dlt (the corpus KPI capture concatenated 167 times) -> PCP
#     against `cat` of the same file, with the .meta size as a share of the
#     input.
# Usage: scripts/bench-pcp-convert.sh [RUNS]   (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
TS=/var/lib/pcp/testsuite/archives
CAPTURE=testdata/kpi/kpi-capture.dlt
cargo build --release --quiet
PT=$PWD/target/release/polytrace
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# time1 CMD... -> "wall cpu" of one run (output files are removed before);
# wall from the shell's microsecond clock (cat takes a few milliseconds).
time1() {
    local tf="$WORK/time" t0 t1
    t0=$EPOCHREALTIME
    /usr/bin/time -f "%U %S" -o "$tf" "$@" > /dev/null 2>&1 || true
    t1=$EPOCHREALTIME
    awk -v a="$t0" -v b="$t1" '{ printf "%.4f %.2f", b - a, $1 + $2 }' "$tf"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# row NAME CLEAN_GLOB -- OURS... -- PEER...: alternate the two, RUNS times.
row() {
    local name=$1 clean=$2; shift 2
    local ours=() peer=()
    shift # --
    while [ "$1" != -- ]; do ours+=("$1"); shift; done
    shift
    peer=("$@")
    local ow=() oc=() pw=() pc=()
    for _ in $(seq "$RUNS"); do
        rm -f $clean
        read -r w c <<<"$(time1 "${ours[@]}")"; ow+=("$w"); oc+=("$c")
        rm -f $clean
        read -r w c <<<"$(time1 "${peer[@]}")"; pw+=("$w"); pc+=("$c")
    done
    local mow moc mpw mpc
    mow=$(printf '%s\n' "${ow[@]}" | median); moc=$(printf '%s\n' "${oc[@]}" | median)
    mpw=$(printf '%s\n' "${pw[@]}" | median); mpc=$(printf '%s\n' "${pc[@]}" | median)
    awk -v n="$name" -v ow="$mow" -v oc="$moc" -v pw="$mpw" -v pc="$mpc" 'BEGIN {
        printf "%-46s %7.3fs %7.2fs %9.3fs %7.2fs %8.2fx %8.2fx\n", n, ow, oc, pw, pc,
            (pw > 0 ? ow / pw : 0), (pc > 0 ? oc / pc : 0) }'
}

printf '%-46s %8s %8s %10s %8s %9s %9s\n' work "wall" "cpu" "peer wall" "cpu" "wall/peer" "cpu/peer"
for set in pcp-pidstat-process-args bozo-20170904; do
    for f in "$TS/$set".*; do
        b=$(basename "$f")
        case $b in
            *.xz) xz -dc "$f" > "$WORK/${b%.xz}" ;;
            *) cp "$f" "$WORK/$b" ;;
        esac
    done
    row "PCP->PCP $set (pmlogextract)" "$WORK/out.* $WORK/ext.*" \
        -- "$PT" convert -q "$WORK/$set" -o "$WORK/out" --to pcp \
        -- pmlogextract "$WORK/$set" "$WORK/ext"
    rm -f "$WORK/$set".* "$WORK"/out.* "$WORK"/ext.*
done

for _ in $(seq 167); do cat "$CAPTURE"; done > "$WORK/big.dlt"
row "100 MB .dlt -> PCP (cat)" "$WORK/out.*" \
    -- "$PT" convert -q "$WORK/big.dlt" -o "$WORK/out" --to pcp \
    -- cat "$WORK/big.dlt"
"$PT" convert -q "$WORK/big.dlt" -o "$WORK/out" --to pcp --force
awk -v m="$(stat -c %s "$WORK/out.meta")" -v i="$(stat -c %s "$WORK/big.dlt")" \
    'BEGIN { printf "100 MB .dlt -> PCP: .meta %d bytes = %.2f%% of the input\n", m, 100 * m / i }'
