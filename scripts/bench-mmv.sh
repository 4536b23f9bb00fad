#!/usr/bin/env bash
# Benchmark polytrace's MMV dump/read against PCP's mmvdump on the largest
# known MMV file (testsuite large-parfait, 650 KB, 11,420 values).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
P=$PWD/target/release/polytrace
MMVDUMP=${MMVDUMP:-/var/lib/pcp/pmdas/mmv/mmvdump}
N=${N:-50}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
xz -dc /var/lib/pcp/testsuite/mmv/large-parfait.xz > "$tmp/large-parfait"
cd "$tmp"

loop() { # name, command...
    local name=$1; shift
    local t0 t1
    t0=$(date +%s.%N)
    for _ in $(seq "$N"); do "$@" > /dev/null; done
    t1=$(date +%s.%N)
    echo "$(echo "($t1 - $t0) / $N" | bc -l)"
}
rss() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }

a=$(loop mmvdump "$MMVDUMP" large-parfait)
b=$(loop polytrace "$P" dump large-parfait)
c=$(loop common "$P" dump --style common large-parfait)
rm -f rt.mmv
d=$(loop convert "$P" convert -q --force large-parfait --to mmv -o rt.mmv)
printf 'mmvdump large-parfait:            %.4f s  peak RSS %s KB\n' "$a" "$(rss "$MMVDUMP" large-parfait)"
printf 'polytrace dump (mmvdump style):   %.4f s  peak RSS %s KB  ratio %.2f\n' "$b" "$(rss "$P" dump large-parfait)" "$(echo "$b / $a" | bc -l)"
printf 'polytrace dump --style common:    %.4f s  peak RSS %s KB\n' "$c" "$(rss "$P" dump --style common large-parfait)"
printf 'polytrace convert mmv -> mmv:     %.4f s\n' "$d"
cmp large-parfait rt.mmv && echo "round trip: byte-identical"
