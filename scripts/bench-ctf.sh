#!/usr/bin/env bash
# Benchmark the CTF export: smp_example and a 30x larger LTT trace -> CTF,
# time and peak RSS, next to babeltrace2's own CTF -> text time on the CTF
# we wrote. The 30x trace holds 30 copies of each CPU's tracefile as 60
# CPUs (5,194,530 data events; tracefiles are self-contained, so copies
# need no rewriting, and system.xml is told the CPU count).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
BIN=$PWD/target/release/polytrace
SMP=../shared/corpus/ltt/smp_example
N=${N:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cp -r "$SMP" "$tmp/smp30"
for k in $(seq 1 29); do
    cp "$SMP/cpu/0" "$tmp/smp30/cpu/$((2 * k))"
    cp "$SMP/cpu/1" "$tmp/smp30/cpu/$((2 * k + 1))"
done
sed -i 's/cpu="2"/cpu="60"/' "$tmp/smp30/info/system.xml"

measure() { # label, command...
    local label=$1
    shift
    local best=999999 rss=0 cpu=0
    for _ in $(seq "$N"); do
        /usr/bin/time -f "%e %M %U %S" -o "$tmp/t" "$@" >/dev/null 2>&1
        read -r secs kb us ss <"$tmp/t"
        if awk -v a="$best" -v b="$secs" 'BEGIN{exit !(b<a)}'; then
            best=$secs
            cpu=$(awk -v u="$us" -v s="$ss" 'BEGIN{printf "%.2f", u + s}')
        fi
        rss=$kb
    done
    echo "$label: best ${best}s wall (${cpu}s CPU) of $N, peak RSS ${rss} KB"
}

for t in smp_example:"$SMP" smp30:"$tmp/smp30"; do
    name=${t%%:*}
    src=${t#*:}
    measure "polytrace convert $name -> ctf" \
        sh -c "rm -rf '$tmp/o'; '$BIN' convert -q --to ctf -o '$tmp/o' '$src'"
    rm -rf "$tmp/o"
    "$BIN" convert -q --to ctf -o "$tmp/o" "$src"
    echo "  CTF written: $(du -sk "$tmp/o" | cut -f1) KB, $(ls "$tmp/o" | wc -l) files"
    if command -v babeltrace2 >/dev/null; then
        measure "babeltrace2 $name.ctf -> text" babeltrace2 "$tmp/o"
        echo "  babeltrace2 lines: $(babeltrace2 "$tmp/o" | wc -l)"
    fi
done
