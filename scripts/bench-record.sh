#!/usr/bin/env bash
# CPU cost of `polytrace record` per sampling interval, against dlt-kpi at
# the same interval on the same machine (target: ours <= 0.5x dlt-kpi).
#
#   scripts/bench-record.sh            # 100 ms interval, 20 s each
#   INTERVAL_MS=1000 DURATION=30 scripts/bench-record.sh
#
# dlt-kpi needs a running dlt-daemon: a private one is started on its own
# FIFO directory and TCP port and stopped at the end. Both tools run in
# turn (not at once), each under /usr/bin/time -v; CPU = user + sys.
set -euo pipefail
cd "$(dirname "$0")/.."

INTERVAL_MS=${INTERVAL_MS:-100}
DURATION=${DURATION:-20}
PORT=${PORT:-$((34000 + RANDOM % 1000))}

cargo build --release --quiet
BIN=$PWD/target/release/polytrace
WORK=$(mktemp -d /tmp/bench-record.XXXXXX)
DAEMON_PID=
cleanup() {
    if [ -n "$DAEMON_PID" ]; then kill "$DAEMON_PID" 2>/dev/null || true; fi
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"; [ -n "${KEEP:-}" ] && echo "kept $WORK"
}
trap cleanup EXIT

# "user sys maxrss_kb" from a /usr/bin/time -v log.
parse_time() {
    awk -F': ' '/User time/ {u=$2} /System time/ {s=$2}
                /Maximum resident/ {m=$2} END {print u, s, m}' "$1"
}

intervals=$(( DURATION * 1000 / INTERVAL_MS ))
echo "interval ${INTERVAL_MS} ms, ${DURATION} s each (${intervals} intervals)"
echo "processes now: $(ls -d /proc/[0-9]* | wc -l), CPUs: $(nproc), load: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- polytrace record (KPI text if writable, else the common listing)
if "$BIN" formats | awk '$1=="kpi" && $3=="yes" {found=1} END {exit !found}'; then
    OUTARGS=(--to kpi -o "$WORK/rec.kpi")
    what="--to kpi"
else
    OUTARGS=(--listing -o "$WORK/rec.txt")
    what="--listing"
fi
/usr/bin/time -v -o "$WORK/ours.time" "$BIN" record -q --interval "${INTERVAL_MS}ms" \
    --duration "${DURATION}s" "${OUTARGS[@]}" || [ $? -eq 1 ] # 1 = KPI dropped system metrics
read -r ou os om < <(parse_time "$WORK/ours.time")
ours=$(echo "$ou + $os" | bc -l)
printf "polytrace record %-10s cpu %6.2f s (user %s, sys %s)  %7.3f ms/interval  peak RSS %s kB\n" \
    "$what" "$ours" "$ou" "$os" "$(echo "$ours * 1000 / $intervals" | bc -l)" "$om"

# ---- dlt-kpi
if ! command -v dlt-kpi >/dev/null || ! command -v dlt-daemon >/dev/null; then
    echo "dlt-kpi or dlt-daemon not installed: measured polytrace alone"
    exit 0
fi
mkdir -p "$WORK/pipes"
dlt-daemon -t "$WORK/pipes" -p "$PORT" >"$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!
sleep 1
if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
    echo "dlt-daemon did not start (see below): measured polytrace alone"
    cat "$WORK/daemon.log"
    exit 0
fi
cat >"$WORK/kpi.conf" <<EOF
process_interval = ${INTERVAL_MS}
irq_interval = ${INTERVAL_MS}
check_interval = 10000
log_level = 4
EOF
# dlt-kpi stops on SIGTERM after its current sleep; timeout sends it.
DLT_PIPE_DIR="$WORK/pipes" DLT_DAEMON_TCP_PORT=$PORT /usr/bin/time -v -o "$WORK/kpi.time" \
    timeout -s TERM "${DURATION}" dlt-kpi -c "$WORK/kpi.conf" >"$WORK/kpi.log" 2>&1 || true
read -r ku ks km < <(parse_time "$WORK/kpi.time")
theirs=$(echo "$ku + $ks" | bc -l)
printf "dlt-kpi 2.18.8              cpu %6.2f s (user %s, sys %s)  %7.3f ms/interval  peak RSS %s kB\n" \
    "$theirs" "$ku" "$ks" "$(echo "$theirs * 1000 / $intervals" | bc -l)" "$km"
if [ "$(echo "$theirs > 0" | bc -l)" = 1 ]; then
    printf "ratio polytrace / dlt-kpi: %.3f (target <= 0.5)\n" "$(echo "$ours / $theirs" | bc -l)"
fi
