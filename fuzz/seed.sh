#!/usr/bin/env bash
# Build the seed corpora of the fuzz targets (fuzz/corpus/<target>/) from the
# project's real-file corpus: the files themselves where they are small, and
# small valid traces that polytrace converts from them. LTT and PCP seeds are
# containers of several files (see src/harness.rs).
# Usage: fuzz/seed.sh [CORPUS_DIR]   (default: the repository's testdata/)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
src=${1:-$repo/testdata}
[ -d "$src" ] || { echo "no corpus at $src" >&2; exit 2; }
cargo build --release --quiet --manifest-path "$repo/Cargo.toml" --bin polytrace
pt=$repo/target/release/polytrace
out=$here/corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in kpi dlt mmv pcp ltt timeline; do mkdir -p "$out/$t"; done

# u32 little-endian as 4 raw bytes
le32() { local n=$1; printf "\\x$(printf %02x $((n & 255)))\\x$(printf %02x $((n >> 8 & 255)))\\x$(printf %02x $((n >> 16 & 255)))\\x$(printf %02x $((n >> 24 & 255)))"; }
# pack OUT DIR NAME...: a container of DIR/NAME files under their names
pack() {
    local dst=$1 dir=$2; shift 2
    { printf 'PTFZ1\n'
      for n in "$@"; do
          printf '%s\0' "$n"; le32 "$(stat -c %s "$dir/$n")"; cat "$dir/$n"
      done; } > "$dst"
}
conv() { "$pt" convert -q --force "$@"; }

# KPI text and DLT storage files
cp "$src/kpi/B-buf400.convert-a.txt" "$out/kpi/b-buf400.txt"
head -c 20000 "$src/kpi/kpi-capture.convert-a.txt" > "$out/kpi/capture-head.txt"
conv "$src/kpi/B-buf400.dlt" --to kpi --kpi-style bare -o "$out/kpi/b-buf400-bare.kpi"
cp "$src/kpi/B-buf400.dlt" "$out/dlt/b-buf400.dlt"
conv "$src/kpi/kpi-capture.dlt" --end +10s --to dlt -o "$out/dlt/capture-10s.dlt"
conv "$src/mmv/research_v1.mmv" --to dlt -o "$out/dlt/from-mmv.dlt"

# MMV
for f in "$src"/mmv/*.mmv; do cp "$f" "$out/mmv/"; done
conv "$src/kpi/B-buf400.dlt" --to mmv --mmv-version 3 -o "$out/mmv/from-dlt-v3.mmv"

# Timeline (the format's string area makes every file about 1 MB)
cp "$src/timeline/a2-multiline.dat" "$out/timeline/"
cp "$src/timeline/v3-small-wrapped.dat" "$out/timeline/"
conv "$src/kpi/B-buf400.dlt" --to timeline --timeline-version M3 --entries 64 -o "$out/timeline/from-dlt-m3.dat"

# PCP archives (base name a)
for v in live_v2 live_v3; do
    mkdir -p "$tmp/$v"
    for m in meta 0 index; do cp "$src/pcp/$v.$m" "$tmp/$v/a.$m"; done
    pack "$out/pcp/$v" "$tmp/$v" a.meta a.0 a.index
done
mkdir -p "$tmp/p2"
conv "$src/kpi/B-buf400.dlt" --to pcp --pcp-version 2 -o "$tmp/p2/a"
pack "$out/pcp/from-dlt-v2" "$tmp/p2" a.meta a.0 a.index

# LTT trace directories, small blocks
ltt_seed() {
    local name=$1; shift
    conv "$@" --to ltt -o "$tmp/$name"
    (cd "$tmp/$name" && find . -type f | sed 's|^\./||' | sort) > "$tmp/$name.list"
    # shellcheck disable=SC2046
    pack "$out/ltt/$name" "$tmp/$name" $(cat "$tmp/$name.list")
}
ltt_seed smp-head "$src/ltt/smp_example" --end +0.05s --ltt-block-size 2048
ltt_seed dlt-small "$src/kpi/B-buf400.dlt" --ltt-block-size 1024
ltt_seed mmv-small "$src/mmv/research_v2.mmv" --ltt-block-size 512
for t in kpi dlt mmv pcp ltt timeline; do
    printf '%-9s %3d seeds, %8d bytes\n' "$t" "$(ls "$out/$t" | wc -l)" "$(cat "$out/$t"/* | wc -c)"
done
