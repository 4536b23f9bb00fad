#!/usr/bin/env bash
# Install the real peer tools polytrace is checked against (Debian packages):
# PCP 6.0.3 (pmdumplog, pmlogcheck, mmvdump, pmrep) with its testsuite
# archives, dlt-tools (dlt-convert), babeltrace2, Chromium; and from npm a
# Trace Event Format viewer (speedscope) with playwright-core to drive it
# headless, in $POLYTRACE_VIEWER_DIR (default /usr/local/lib/polytrace-viewer).
# man-db renders `polytrace man` pages in the tests. Perfetto's generated
# Python bindings (PyPI `perfetto` with `protobuf`) go into a virtual
# environment in $POLYTRACE_VENV (default /usr/local/lib/polytrace-venv),
# whose python /usr/local/bin/perfetto-python runs for the tests (a script,
# not a link: a linked venv python does not find its environment).
# Does nothing when all are present.
#
# pcp's maintainer scripts call systemctl when one exists; where PID 1 is not
# systemd that call fails and leaves dpkg half-configured. A no-op systemctl
# first on PATH avoids it; a failed install is finished with
# `dpkg --configure -a`, which is what actually leaves the tools usable.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
PKGS=(pcp pcp-testsuite python3-pcp python3-venv dlt-daemon dlt-tools dlt-viewer babeltrace2 xz-utils bzip2 gzip chromium man-db groff-base)
# Node.js from Debian only where the machine has none of its own.
command -v node >/dev/null && command -v npm >/dev/null || PKGS+=(nodejs npm)
VIEWER_DIR=${POLYTRACE_VIEWER_DIR:-/usr/local/lib/polytrace-viewer}
VIEWER_PKGS=(speedscope@1.25.0 playwright-core@1.65.1)
VENV=${POLYTRACE_VENV:-/usr/local/lib/polytrace-venv}
PY_PKGS=(perfetto==0.59.1 protobuf==7.36.2 duckdb==2.0.1 pyarrow==26.0.1)

missing=()
for p in "${PKGS[@]}"; do
    if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

shim=$(mktemp -d)
trap 'rm -rf "$shim"' EXIT
printf '#!/bin/sh\nexit 0\n' >"$shim/systemctl"
chmod +x "$shim/systemctl"
export PATH="$shim:$PATH"

if ((${#missing[@]})); then
    echo "install-peers: installing ${missing[*]}" >&2
    apt-get update -qq
    if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
        echo "install-peers: apt-get reported a failure; finishing configuration" >&2
    fi
fi
dpkg --configure -a >/dev/null

if [[ ! -f $VIEWER_DIR/node_modules/speedscope/dist/release/index.html ||
    ! -f $VIEWER_DIR/node_modules/playwright-core/package.json ]]; then
    echo "install-peers: installing ${VIEWER_PKGS[*]} into $VIEWER_DIR" >&2
    mkdir -p "$VIEWER_DIR"
    npm install --prefix "$VIEWER_DIR" --no-audit --no-fund --loglevel=error "${VIEWER_PKGS[@]}" >/dev/null
fi

# Python peers in the virtual environment: Perfetto's bindings read the
# Perfetto export, DuckDB and pyarrow the Parquet export; with
# POLYTRACE_FULL (scripts/test.sh --full) also PySpark and a Java runtime
# from Debian for scripts/spark-check.sh.
if [[ -n ${POLYTRACE_FULL:-} ]]; then
    PY_PKGS+=(pyspark==4.3.0)
    if ! command -v java >/dev/null; then
        apt-get install -y -qq --no-install-recommends default-jre-headless >/dev/null
    fi
fi
[[ -x $VENV/bin/python3 ]] || { dpkg-query -W python3-venv >/dev/null 2>&1 || apt-get install -y -qq python3-venv >/dev/null; python3 -m venv "$VENV"; }
py_missing=()
for p in "${PY_PKGS[@]}"; do
    "$VENV/bin/python3" -c "import importlib.metadata as m, sys; sys.exit(m.version('${p%%==*}') != '${p##*==}')" 2>/dev/null ||
        py_missing+=("$p")
done
if ((${#py_missing[@]})); then
    echo "install-peers: installing ${py_missing[*]} into $VENV" >&2
    "$VENV/bin/pip" install -q "${py_missing[@]}"
fi
printf '#!/bin/sh\nexec "%s/bin/python" "$@"\n' "$VENV" >/usr/local/bin/perfetto-python
chmod +x /usr/local/bin/perfetto-python

# Prove the tools run, not just that packages are marked installed.
pmdumplog -l /var/lib/pcp/testsuite/archives/omnibus_v3 >/dev/null
command -v pmlogcheck pmrep dlt-convert dlt-viewer babeltrace2 chromium node man >/dev/null
test -x /var/lib/pcp/pmdas/mmv/mmvdump
perfetto-python -c 'from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace'
NODE_PATH=$VIEWER_DIR/node_modules node -e "require('playwright-core'); require.resolve('speedscope/package.json')"
"$VENV/bin/python3" -c "import duckdb, pyarrow"
[[ -z ${POLYTRACE_FULL:-} ]] || { "$VENV/bin/python3" -c "import pyspark" && java -version 2>/dev/null; }
echo "install-peers: ok" >&2
