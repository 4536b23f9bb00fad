#!/usr/bin/env bash
# Spark reads a polytrace Parquet dataset and agrees with DuckDB: three
# hosts' PCP archives (the repository's live_v3, the PCP testsuite's
# 20180102 and dm-io) go into one Hive-partitioned dataset with
# `convert DIR --to parquet`, then PySpark (local mode) and DuckDB each run
#   SELECT host, count(*), max(value_f64) ... WHERE metric = M GROUP BY host
# for a few metrics; the results must be equal. Needs the virtual
# environment of scripts/install-peers.sh with pyspark (POLYTRACE_FULL=1
# bash scripts/install-peers.sh) and a Java runtime. Run by
# `scripts/test.sh --full`; exit 0 when equal, 1 when not, 2 when a tool
# or input is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${POLYTRACE_VENV:-/usr/local/lib/polytrace-venv}
PY=$VENV/bin/python3
TS=/var/lib/pcp/testsuite/archives
for need in "$TS/20180102.meta" "$TS/dm-io.meta"; do
    [[ -e $need ]] || { echo "spark-check: $need missing (pcp-testsuite)" >&2; exit 2; }
done
"$PY" -c "import pyspark, duckdb" 2>/dev/null || { echo "spark-check: no pyspark/duckdb in $VENV" >&2; exit 2; }
command -v java >/dev/null || { echo "spark-check: no java" >&2; exit 2; }
cargo build --release --quiet
WORK=$(mktemp -d "${TMPDIR:-/tmp}/polytrace-spark.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/in"
for base in testdata/pcp/live_v3 "$TS/20180102" "$TS/dm-io"; do
    for m in "$base".{meta,index,0}*; do
        cp "$m" "$WORK/in/"
    done
done
target/release/polytrace convert -q "$WORK/in" --to parquet -o "$WORK/ds"
"$PY" - "$WORK/ds" <<'PY'
import sys, duckdb
from pyspark.sql import SparkSession
ds = sys.argv[1]
# The issue's query, then every metric of every host.
queries = [
    "SELECT host, max(value_f64) FROM {t} WHERE metric = 'kernel.all.load' GROUP BY host",
    "SELECT host, metric, count(*) AS n, count(instance) AS ni, max(value_f64) AS fmax, "
    "max(value_i64) AS imax, count(value_str) AS ns FROM {t} GROUP BY host, metric",
]
src = f"read_parquet('{ds}/**/*.parquet', hive_partitioning = true)"
spark = (SparkSession.builder.master("local[2]").appName("polytrace-spark-check")
         .config("spark.sql.legacy.parquet.nanosAsLong", "true")
         .config("spark.ui.enabled", "false").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
spark.read.parquet(ds).createOrReplaceTempView("samples")
duck, sp = [], []
for q in queries:
    duck += sorted(tuple(r) for r in duckdb.sql(q.format(t=src)).fetchall())
    sp += sorted(tuple(r) for r in spark.sql(q.format(t="samples")).collect())
spark.stop()
hosts = {r[0] for r in duck}
print(f"spark-check: {len(hosts)} hosts, {len(duck)} result rows")
for r in duck[:len(hosts)]:
    print("  ", *r)
if len(hosts) < 3:
    print("spark-check: fewer than 3 hosts", file=sys.stderr); sys.exit(1)
if duck != sp:
    print("spark-check: Spark differs from DuckDB:", file=sys.stderr)
    for a, b in zip(duck, sp):
        if a != b:
            print("  duckdb", a, "\n  spark ", b, file=sys.stderr)
    sys.exit(1)
print("spark-check: Spark's GROUP BY equals DuckDB's")
PY
