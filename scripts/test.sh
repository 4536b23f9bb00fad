#!/usr/bin/env bash
# The test command: install the peer tools if missing, then run the whole suite.
#   scripts/test.sh            default suite (a few minutes)
#   scripts/test.sh --full     also the long sweeps (every PCP testsuite archive, …)
# In CI (CI=true) a missing peer tool is a failure, not a skip.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--full" ]]; then
    export POLYTRACE_FULL=1
    shift
fi

viewer=${POLYTRACE_VIEWER_DIR:-/usr/local/lib/polytrace-viewer}/node_modules
if ! command -v pmdumplog >/dev/null || ! command -v dlt-convert >/dev/null || ! command -v dlt-viewer >/dev/null \
    || [[ ! -x /var/lib/pcp/pmdas/mmv/mmvdump ]] || ! command -v chromium >/dev/null \
    || [[ ! -f $viewer/speedscope/package.json || ! -f $viewer/playwright-core/package.json ]] \
    || ! "${POLYTRACE_VENV:-/usr/local/lib/polytrace-venv}/bin/python3" -c "import duckdb, pyarrow" 2>/dev/null \
    || { [[ -n ${POLYTRACE_FULL:-} ]] && ! "${POLYTRACE_VENV:-/usr/local/lib/polytrace-venv}/bin/python3" -c "import pyspark" 2>/dev/null; }; then
    if [[ $(id -u) -eq 0 ]]; then
        bash scripts/install-peers.sh
    else
        sudo --preserve-env=POLYTRACE_FULL,POLYTRACE_VENV bash scripts/install-peers.sh
    fi
fi
if [[ "${CI:-}" == "true" ]]; then
    export POLYTRACE_REQUIRE_PEERS=1
fi

cargo fmt --all -- --check
cargo clippy --release --all-targets -q -- -D warnings
cargo test --release "$@"
# The corpus files are under the size from which a conversion gives its
# writer a thread of its own; the cross-format tests run again with it.
POLYTRACE_WRITER_THREAD=1 cargo test --release -q --test convert --test roundtrip \
    --test damage --test stages --test dlt --test pcp_write "$@"
# Spark reads a three-host dataset; its GROUP BY equals DuckDB's.
if [[ -n ${POLYTRACE_FULL:-} ]]; then
    bash scripts/spark-check.sh
fi
