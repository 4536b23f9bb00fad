#!/usr/bin/env bash
# Run every benchmark (or the named ones): scripts/bench.sh [dlt pcp timeline ltt mmv record ctf export]
# Each prints polytrace's time, the peer tool's time on the same input, the
# ratio and peak RSS. Long: the PCP one runs pmdumplog on large archives.
set -euo pipefail
cd "$(dirname "$0")"
fmts=("$@")
((${#fmts[@]})) || fmts=(dlt timeline ltt mmv record pcp ctf export)
for f in "${fmts[@]}"; do
    echo "== bench-$f"
    bash "./bench-$f.sh"
done
