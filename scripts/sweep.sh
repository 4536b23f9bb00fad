#!/usr/bin/env bash
# The damage sweep (tests/sweep.rs): truncations, bit flips, byte overwrites
# and hostile length fields over every corpus input, through dump, info and
# convert --to ltt/pcp, each run limited to 10 s and judged on panics, hangs,
# peak RSS over 256 MB, outputs over 4x and exit 0 on a detectable cut.
# First the hostile LTT archives (tests/tar_input.rs: sparse members, hard
# and symbolic links, FIFO members, gzip bombs, multi-member gzip, signals)
# and the inputs that can be read only once (tests/fifo_input.rs: FIFOs and
# process substitution).
#
#   scripts/sweep.sh            the short sampled form (also in cargo test)
#   scripts/sweep.sh --full     the long run (about 8,000 variants)
#   options: --seed N (random choices), --jobs N (parallel runs, default 2)
set -euo pipefail
cd "$(dirname "$0")/.."
seed=16
jobs=2
full=
while [ $# -gt 0 ]; do
    case "$1" in
        --full) full=1 ;;
        --seed) seed=$2; shift ;;
        --jobs) jobs=$2; shift ;;
        *) echo "usage: $0 [--full] [--seed N] [--jobs N]" >&2; exit 2 ;;
    esac
    shift
done
export POLYTRACE_SWEEP_SEED=$seed POLYTRACE_SWEEP_JOBS=$jobs
if [ -n "$full" ]; then export POLYTRACE_FULL=1; fi
cargo test --release --test tar_input --test fifo_input
exec cargo test --release --test sweep -- --nocapture
