#!/usr/bin/env bash
# Proof with the real pmcd and its MMV PMDA (run as root; tests/pmcd_check.rs
# runs it in CI):
#  1. examples/mmv_counter: `pminfo -f mmv.NAME.count` read twice a second
#     apart shows a larger value the second time, and mmv.NAME.phase a text;
#  2. `polytrace record --to mmv --live NAME --duration 5s`: `pminfo -f
#     mmv.NAME` lists the recorder's metrics, with values that change
#     between two reads.
# pmcd is started if it is not running (and then stopped at the end).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $(id -u) -ne 0 ]]; then
    echo "pmcd-check: needs root (it starts pmcd)" >&2
    exit 77
fi
for t in pminfo /etc/init.d/pmcd; do
    command -v "$t" >/dev/null || { echo "pmcd-check: $t not installed" >&2; exit 77; }
done
cargo build --release -q --bin polytrace --example mmv_counter
bin=$PWD/target/release/polytrace
counter=$PWD/target/release/examples/mmv_counter

# The PMDA reads $PCP_TMP_DIR from pcp.conf; the producers must agree.
unset PCP_TMP_DIR
tmp_dir=$(. /etc/pcp.conf 2>/dev/null; echo "${PCP_TMP_DIR:-/var/lib/pcp/tmp}")
mkdir -p "$tmp_dir/mmv"

scratch=$(mktemp -d)
started=0
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    # A producer killed above cannot remove its own file.
    rm -f "$tmp_dir/mmv/ptcheck_counter_$$" "$tmp_dir/mmv/ptcheck_live_$$"
    if [[ $started -eq 1 ]]; then
        /etc/init.d/pmcd stop >/dev/null 2>&1 || true
    fi
    rm -rf "$scratch"
}
trap cleanup EXIT

# The init script asks systemd when it can; there is none here.
printf '#!/bin/sh\nexit 0\n' >"$scratch/systemctl"
chmod +x "$scratch/systemctl"
export PATH=$scratch:$PATH
mkdir -p /run/pcp

if ! pminfo -f pmcd.version >/dev/null 2>&1; then
    grep -q '^mmv' /etc/pcp/pmcd/pmcd.conf || (cd /var/lib/pcp/pmdas/mmv && ./Install </dev/null)
    /etc/init.d/pmcd start >/dev/null
    started=1
fi
for _ in $(seq 50); do
    pminfo -f pmcd.version >/dev/null 2>&1 && break
    sleep 0.2
done
pminfo -f pmcd.version >/dev/null || { echo "pmcd-check: pmcd did not start" >&2; exit 1; }

# Wait until `pminfo -f METRIC` shows a value (the PMDA rescans its
# directory when it changes).
wait_value() {
    for _ in $(seq 50); do
        if pminfo -f "$1" 2>/dev/null | grep -q 'value'; then return 0; fi
        sleep 0.2
    done
    echo "pmcd-check: no value for $1" >&2
    pminfo -f "$1" >&2 || true
    return 1
}
value_of() { pminfo -f "$1" | awk '$1 == "value" { print $2; exit }'; }

# 1. The MMV API's example.
name=ptcheck_counter_$$
"$counter" "$name" 5 2>/dev/null &
pids+=($!)
wait_value "mmv.$name.count"
a=$(value_of "mmv.$name.count")
sleep 1
b=$(value_of "mmv.$name.count")
echo "mmv.$name.count: $a, a second later $b"
[[ $b -gt $a ]] || { echo "pmcd-check: the counter did not grow" >&2; exit 1; }
phase=$(pminfo -f "mmv.$name.phase" | awk '$1 == "value" { $1 = ""; print; exit }')
echo "mmv.$name.phase:$phase"
[[ $phase == *counting* ]] || { echo "pmcd-check: unexpected phase" >&2; exit 1; }
# Let it end by itself: it removes its file (PROCESS flag) on the way out.
wait "${pids[-1]}"
[[ ! -e $tmp_dir/mmv/$name ]] || { echo "pmcd-check: $name left behind" >&2; exit 1; }

# 2. Live recording.
name=ptcheck_live_$$
"$bin" record --to mmv --live "$name" --duration 5s --interval 500ms -q &
pids+=($!)
wait_value "mmv.$name.kernel.all.cpu.user"
one=$(pminfo -f "mmv.$name")
sleep 1.2
two=$(pminfo -f "mmv.$name")
metrics=$(grep -c "^mmv\.$name\." <<<"$one")
echo "mmv.$name: $metrics metrics"
for m in kernel.all.cpu.user kernel.all.load kpi.proc.rss; do
    grep -q "^mmv\.$name\.$m\$" <<<"$one" || { echo "pmcd-check: no mmv.$name.$m" >&2; exit 1; }
done
[[ $(grep -c 'value' <<<"$one") -gt 10 ]] || { echo "pmcd-check: too few values" >&2; exit 1; }
[[ "$one" != "$two" ]] || { echo "pmcd-check: values did not change" >&2; exit 1; }
grep -A1 "^mmv\.$name\.kernel.all.cpu.user\$" <<<"$one"
grep -A1 "^mmv\.$name\.kernel.all.cpu.user\$" <<<"$two"
wait "${pids[-1]}"
echo "pmcd-check: ok"
