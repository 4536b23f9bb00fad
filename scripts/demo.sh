#!/usr/bin/env bash
# What polytrace is for, on this machine: record a few seconds of /proc into
# a PCP archive, read it (busiest processes, a few samples as a table, what
# the archive holds), and convert it into a file a trace viewer opens.
#
#   scripts/demo.sh [SECONDS]        (default 5)
#
# POLYTRACE=path/to/polytrace uses that binary instead of building one.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
if [[ -z ${POLYTRACE:-} ]]; then
    cargo build --release -q
    POLYTRACE=$PWD/target/release/polytrace
fi
pt=$POLYTRACE
dir=$(mktemp -d "${TMPDIR:-/tmp}/polytrace-demo.XXXXXX")
rec=$dir/rec
step() { printf '\n== %s\n' "$*"; }

step "Recording this machine for $secs s, one sample a second, into the PCP archive $rec"
"$pt" record -q --duration "${secs}s" --interval 1s -o "$rec"
ls "$dir"

step "What the archive holds (polytrace info $rec)"
"$pt" info "$rec" | sed '/^values by metric:/,$d'

step "Busiest processes: their share of all CPUs over the $secs s (kpi.proc.cpu)"
# One column per process (`kpi.proc.cpu[PID command line]`), one row per
# sample; a process that used no CPU in an interval has no value there.
"$pt" convert -q "$rec" --to csv --delimiter tab --columns 'kpi.proc.cpu' -o - |
    awk -F'\t' -v secs="$secs" '
        NR == 1 { for (i = 2; i <= NF; i++) name[i] = substr($i, 14, length($i) - 14); n = NF; next }
        { for (i = 2; i <= n; i++) if ($i != "") sum[i] += $i }
        END {
            for (i = 2; i <= n; i++) if (sum[i] > 0) printf "%6.1f %%  %s\n", sum[i] / secs / 10, name[i]
        }' |
    sort -rn | head -n 8 | { printf '%8s  %s\n' "CPU" "PID command"; cat; }

step "System samples as a table (CPU time in % of one CPU; the same CSV loads into pandas)"
"$pt" convert -q "$rec" --to csv --rate --delimiter tab \
    --columns 'kernel.all.cpu.user,kernel.all.cpu.sys,kernel.all.load[1 minute],mem.util.free' -o - |
    awk -F'\t' '
        NR == 1 { for (i = 2; i <= NF; i++) col[$i] = i
                  printf "%-10s %8s %8s %8s %12s\n", "time (UTC)", "user %", "sys %", "load 1m", "free MB"; next }
        { u = $(col["kernel.all.cpu.user"]); s = $(col["kernel.all.cpu.sys"])
          printf "%-10s %8s %8s %8s %12.0f\n", substr($1, 12, 8),
                 u == "" ? "-" : sprintf("%.1f", u / 10), s == "" ? "-" : sprintf("%.1f", s / 10),
                 $(col["kernel.all.load[1 minute]"]), $(col["mem.util.free"]) / 1024 }'

step "For a trace viewer: Chrome trace JSON, open it in https://ui.perfetto.dev or chrome://tracing"
"$pt" convert -q "$rec" -o "$dir/rec.json"
ls -l "$dir/rec.json"

step "Also readable by PCP's own tools, e.g.: pmlogsummary $rec kernel.all.load mem.util.free"
echo "(all files kept in $dir)"
