#!/usr/bin/env bash
# Benchmark the CTF export: smp_example and a 30x larger LTT trace -> CTF,
# time and peak RSS, next to babeltrace2's own CTF -> text time on the CTF
# we wrote. The 30x trace is smp_example as written by polytrace's LTT
# writer (counter = ns since the epoch), each CPU's tracefile repeated 30
# times, copy k moved k * 5 * 2^32 ns later by rewriting the time stamps of
# its block_start/block_end (events keep their low 32 counter bits):
# 2 CPUs, 5,194,530 data events, 10.7 minutes of trace.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
BIN=$PWD/target/release/polytrace
SMP=testdata/ltt/smp_example
N=${N:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

B=1000000
"$BIN" convert -q --to ltt --ltt-block-size $B -o "$tmp/smp1" "$SMP"
cp -r "$tmp/smp1" "$tmp/smp30"
for c in 0 1; do
    perl -e '
        use strict;
        my ($B, $n, $in, $out) = @ARGV;
        open(my $fh, "<:raw", $in) or die "$in: $!";
        local $/; my $d = <$fh>; close $fh;
        my $blocks = length($d) / $B;
        open(my $oh, ">:raw", $out) or die "$out: $!";
        for my $k (0 .. $n - 1) {
            my $c = $d;
            for my $i (0 .. $blocks - 1) {
                my $o = $i * $B;
                # Era-A trailer: block size minus the block_end offset.
                my $trailer = unpack("V", substr($c, $o + $B - 4, 4));
                for my $at ($o, $o + $B - $trailer) {
                    # id u16, low counter u32, sec u32, nsec u32, counter u64, index u32
                    my $cnt = unpack("Q<", substr($c, $at + 14, 8)) + $k * 5 * 4294967296;
                    my $sec = ($cnt - $cnt % 1000000000) / 1000000000;
                    substr($c, $at + 6, 16) = pack("VVQ<", $sec, $cnt % 1000000000, $cnt);
                    my $idx = unpack("V", substr($c, $at + 22, 4));
                    substr($c, $at + 22, 4) = pack("V", $idx + $k * $blocks);
                }
            }
            print $oh $c;
        }
        close $oh;
    ' $B 30 "$tmp/smp1/cpu/$c" "$tmp/smp30/cpu/$c"
done

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

for t in smp_example:"$SMP" smp_example_x30:"$tmp/smp30"; do
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
