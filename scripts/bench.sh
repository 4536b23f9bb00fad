#!/usr/bin/env bash
# The conversion table of docs/performance.md, in one run:
# every row times polytrace and its reference on the same input, runs
# alternating (ours, reference, ours, …), and prints the medians, the
# ratio and the peak RSS of each. Inputs are built in a temporary directory
# (removed at the end); a row whose reference tool or input is missing is
# skipped, saying so. Then the allocations per converted item
# (`cargo bench --bench allocs`).
#
#   scripts/bench.sh                 # the table, RUNS=5 runs per side
#   RUNS=9 scripts/bench.sh          # more runs
#   ONLY='dump' scripts/bench.sh     # only the rows whose label matches
#   scripts/bench.sh dlt pcp …       # instead: the per-format benchmarks
#                                    # scripts/bench-<name>.sh
#
# Every command's standard output goes to a file in the temporary
# directory (truncated before each run), conversions write their output
# there too, and `cat` of the input into such a file is the reference for
# "the speed of the bytes". Compressed PCP inputs are decompressed first,
# so both sides read the same plain bytes; the PCP dump row reads the
# archive as shipped (one xz volume), where the held listing matters.
set -euo pipefail
cd "$(dirname "$0")"
if (($#)); then
    for f in "$@"; do
        echo "== bench-$f"
        bash "./bench-$f.sh"
    done
    exit 0
fi
cd ..
command -v python3 >/dev/null || { echo "bench.sh needs python3" >&2; exit 2; }
cargo build --release --quiet
WORK=$(mktemp -d "${TMPDIR:-/tmp}/polytrace-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), runs per side: ${RUNS:-5}"
PT=target/release/polytrace WORK=$WORK RUNS=${RUNS:-5} python3 - <<'PY'
import os, re, shutil, statistics, subprocess, sys, time, glob

PT = os.path.abspath(os.environ["PT"])
W = os.environ["WORK"]
RUNS = int(os.environ["RUNS"])
ONLY = os.environ.get("ONLY")
TIME = os.access("/usr/bin/time", os.X_OK)
if not TIME:
    print("(no /usr/bin/time: peak RSS not measured)")
CORPUS = os.path.abspath("testdata")
TS = "/var/lib/pcp/testsuite/archives"


def sh(*cmd, **kw):
    subprocess.run(cmd, check=True, **kw)


def clean(patterns):
    for p in patterns:
        for f in glob.glob(p):
            if os.path.isdir(f):
                shutil.rmtree(f)
            else:
                os.unlink(f)


def run_once(cmd, out, cleanup, anon=False, direct=False):
    """Wall seconds, peak RSS (KiB) and, if asked, peak RssAnon (KiB,
    sampled every 0.5 ms) of one run; stdout to `out`. The peak RSS comes
    from GNU time around the command: a process started from this script
    would count this script's own memory in its peak (Linux keeps the
    high-water mark across exec). `direct`: the command alone, no GNU time
    (whose own start adds the same milliseconds to both sides of a short
    run), no peak RSS."""
    clean(cleanup)
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    null = os.open(os.devnull, os.O_WRONLY)
    acts = [(os.POSIX_SPAWN_DUP2, fd, 1), (os.POSIX_SPAWN_DUP2, null, 2)]
    rss_file = os.path.join(W, "rss")
    timed = TIME and not direct
    full = (["/usr/bin/time", "-f", "%M", "-o", rss_file] if timed else []) + cmd
    t0 = time.perf_counter()
    pid = os.posix_spawnp(full[0], full, os.environ, file_actions=acts)
    os.close(fd)
    os.close(null)
    peak = 0
    while True:
        flags = os.WNOHANG if anon else 0
        got, status, ru = os.wait4(pid, flags)
        if got == pid:
            break
        try:
            target = pid
            if timed:
                # The command is GNU time's child.
                with open(f"/proc/{pid}/task/{pid}/children") as c:
                    kids = c.read().split()
                if not kids:
                    time.sleep(0.0002)
                    continue
                target = int(kids[0])
            with open(f"/proc/{target}/status") as s:
                for line in s:
                    if line.startswith("RssAnon:"):
                        peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
        time.sleep(0.0005)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{cmd[0]} exited {code}: {' '.join(cmd)}")
    rss = 0
    if timed:
        with open(rss_file) as f:
            rss = int(f.read().split()[-1])
    return wall, rss, peak


def row(work, ours, ref, ref_name, cleanup=(), anon=False, note=None, direct=False):
    if ONLY and not re.search(ONLY, work):
        return
    if shutil.which(ref[0]) is None:
        print(f"| {work} | skipped: {ref[0]} not installed | | | |", flush=True)
        return
    out = os.path.join(W, "stdout")
    a, b = [], []
    n = ""
    # A run of a few milliseconds needs more pairs for a stable median.
    runs = max(RUNS, 21) if direct else RUNS
    try:
        for _ in range(runs):
            a.append(run_once(ours, out, cleanup, direct=direct))
            if note and not n:
                n = f" ({note()})"
            b.append(run_once(ref, out, cleanup, direct=direct))
        extra = ""
        if anon:
            anons = [run_once(ours, out, cleanup, anon=True)[2] for _ in range(3)]
            extra = f", RssAnon {max(anons) / 1024:.1f} MB"
    except RuntimeError as e:
        print(f"| {work} | failed: {e} | | | |", flush=True)
        return
    ma = statistics.median(x[0] for x in a)
    mb = statistics.median(x[0] for x in b)
    ra = max(x[1] for x in a) / 1024
    rb = max(x[1] for x in b) / 1024
    r = ma / mb
    verdict = f"{r:.2f}× the reference" if r >= 1 else f"{1 / r:.2f}× faster"
    mem = "–" if direct else f"{ra:.1f} MB{extra} / {rb:.1f} MB"
    d = 4 if direct else 3
    # The spread of our runs: on a virtual machine, where the host puts the
    # two CPUs can change a two-thread run's time from one run to the next.
    lo = min(x[0] for x in a)
    hi = max(x[0] for x in a)
    print(f"| {work}{n} | {ma:.{d}f} s ({lo:.{d}f}–{hi:.{d}f}) | {ref_name} {mb:.{d}f} s | "
          f"{r:.2f} ({verdict}) | {mem} |", flush=True)


def size(paths):
    return sum(os.path.getsize(p) for p in paths)


def mb(n):
    return f"{n / 1e6:.0f} MB"


# --- inputs -----------------------------------------------------------
def plain_archive(name):
    """A decompressed copy of a testsuite archive in WORK; None if absent."""
    members = glob.glob(os.path.join(TS, name + ".*"))
    if not members:
        return None
    d = os.path.join(W, "plain")
    os.makedirs(d, exist_ok=True)
    for m in members:
        base = os.path.basename(m)
        if base.endswith(".xz"):
            with open(os.path.join(d, base[:-3]), "wb") as f:
                sh("xz", "-dc", m, stdout=f)
        else:
            shutil.copy(m, d)
    return os.path.join(d, name)


def members(base):
    return sorted(glob.glob(base + ".*"))


print("| work | polytrace, median (fastest–slowest run) | reference | ratio | peak RSS (ours / reference) |")
print("| --- | --- | --- | --- | --- |", flush=True)

pidstat = plain_archive("pcp-pidstat-process-args")
bozo = plain_archive("bozo-20170904")
o = lambda n: os.path.join(W, n)

for name, base in (("pcp-pidstat-process-args", pidstat), ("bozo-20170904", bozo)):
    if base is None:
        print(f"| PCP → PCP rewrite, `{name}` | skipped: PCP testsuite archives not installed | | | |")
        continue
    row(f"PCP → PCP rewrite, `{name}` ({mb(size(members(base)))})",
        [PT, "convert", "-q", base, "--to", "pcp", "-o", o("rw")],
        ["pmlogextract", base, o("px")], "`pmlogextract`",
        cleanup=[o("rw.*"), o("px.*")])

# Parquet export of the largest testsuite archive, against pmlogextract
# rewriting it (issue 40: within 2x, peak RSS <= 100 MB); the note gives
# the Parquet size beside the archive's.
if pidstat is not None:
    row(f"PCP → Parquet, `pcp-pidstat-process-args` ({mb(size(members(pidstat)))})",
        [PT, "convert", "-q", pidstat, "--to", "parquet", "-o", o("pq.parquet")],
        ["pmlogextract", pidstat, o("px")], "`pmlogextract`",
        cleanup=[o("pq.parquet"), o("pq.events.parquet"), o("px.*")],
        note=lambda: f"Parquet {os.path.getsize(o('pq.parquet')) / 1e6:.1f} MB")
    clean([o("pq.parquet"), o("px.*")])
else:
    print("| PCP → Parquet | skipped: PCP testsuite archives not installed | | | |")

# 100 MB of DLT: the corpus capture concatenated 167 times.
dlt = o("kpi-capture-x167.dlt")
with open(os.path.join(CORPUS, "kpi/kpi-capture.dlt"), "rb") as f:
    one = f.read()
with open(dlt, "wb") as f:
    for _ in range(167):
        f.write(one)
row(f"DLT → PCP, kpi-capture × 167 ({mb(os.path.getsize(dlt))})",
    [PT, "convert", "-q", dlt, "--to", "pcp", "-o", o("dp")],
    ["cat", dlt], "`cat`", cleanup=[o("dp.*")],
    note=lambda: f"`.meta` {os.path.getsize(o('dp.meta')) / 1e3:.0f} kB")
clean([o("dp.*")])

if pidstat is not None:
    row(f"PCP pidstat → LTT ({mb(size(members(pidstat)))})",
        [PT, "convert", "-q", pidstat, "--to", "ltt", "-o", o("pl.ltt")],
        ["cat"] + members(pidstat), "`cat`", cleanup=[o("pl.ltt")])
else:
    print("| PCP pidstat → LTT | skipped: PCP testsuite archives not installed | | | |")

smp = os.path.join(CORPUS, "ltt/smp_example")
smp_files = sorted(p for p in glob.glob(smp + "/**", recursive=True) if os.path.isfile(p))
row(f"LTT `smp_example` → timeline ({mb(size(smp_files))})",
    [PT, "convert", "-q", smp, "--to", "timeline", "-o", o("st.timeline")],
    ["cat"] + smp_files, "`cat`", cleanup=[o("st.timeline")])
# The same, timed directly: a run of milliseconds where GNU time's start
# would add the same to both sides (issue 18's ≤ 10× `cat` is meant so).
row(f"LTT `smp_example` → timeline ({mb(size(smp_files))}), timed directly",
    [PT, "convert", "-q", smp, "--to", "timeline", "-o", o("st.timeline")],
    ["cat"] + smp_files, "`cat`", cleanup=[o("st.timeline")], direct=True)

# A 1M-slot A2 timeline (68 MB) written by our writer: smp_example merged
# 9 times (1.56 M events into the ring).
a2 = o("a2-1M.timeline")
sh(PT, "convert", "-q", *([smp] * 9), "--to", "timeline", "--timeline-version", "A2",
   "--entries", "1048576", "-o", a2)
row(f"timeline A2 dump ({mb(os.path.getsize(a2))})",
    [PT, "dump", a2], ["cat", a2], "`cat`", anon=True)

# A batch of 16 independent inputs: every core against one at a time.
batch = o("batch")
for i in range(8):
    os.makedirs(batch, exist_ok=True)
    shutil.copy(os.path.join(CORPUS, "kpi/kpi-capture.dlt"), os.path.join(batch, f"c{i}.dlt"))
    shutil.copytree(smp, os.path.join(batch, f"s{i}"))
row("`convert DIR --to pcp`, 16 inputs (8 × kpi-capture.dlt, 8 × smp_example)",
    [PT, "convert", "-q", batch, "--to", "pcp", "-o", o("bo")],
    ["env", "POLYTRACE_JOBS=1", PT, "convert", "-q", batch, "--to", "pcp", "-o", o("bo")],
    "same, `POLYTRACE_JOBS=1`", cleanup=[o("bo")])

flags = ["-a", "-e", "-h", "-I", "-M", "-xxx", "-Z", "UTC"]
# Perfetto against the Chrome JSON export of the same input: time (the
# Chrome export is the reference) and bytes (the protobuf at most a quarter).
def perfetto_rows(label, inputs, raw_bytes=None):
    pf, cj = o("t.perfetto-trace"), o("t.json")
    sizes = {}

    def note():
        sh(PT, "convert", "-q", *inputs, "--to", "chrome-json", "-o", cj, "--force")
        sizes["p"], sizes["c"] = os.path.getsize(pf), os.path.getsize(cj)
        s = f"{mb(sizes['p'])} vs JSON {mb(sizes['c'])}, {sizes['p'] / sizes['c']:.3f} of it"
        if raw_bytes:
            s += f"; {sizes['p'] / raw_bytes:.2f}× the input"
        return s
    row(f"{label} → Perfetto, against → Chrome JSON",
        [PT, "convert", "-q", *inputs, "--to", "perfetto", "-o", pf, "--force"],
        [PT, "convert", "-q", *inputs, "--to", "chrome-json", "-o", cj, "--force"],
        "Chrome JSON export", cleanup=[pf, cj], note=note)
    clean([pf, cj])


perfetto_rows(f"LTT `smp_example` × 30 ({mb(30 * size(smp_files))})", [smp] * 30)
if bozo is not None:
    perfetto_rows(f"PCP `bozo-20170904` ({mb(size(members(bozo)))})", [bozo],
                  raw_bytes=size(members(bozo)))
else:
    print("| PCP `bozo-20170904` → Perfetto | skipped: PCP testsuite archives not installed | | | |")

shipped = os.path.join(TS, "bozo-20170904")
if os.path.exists(shipped + ".meta"):
    row("PCP dump `bozo-20170904` (as shipped: xz volume)",
        [PT, "dump", shipped], ["pmdumplog"] + flags + [shipped], "`pmdumplog`")
    row("PCP dump `bozo-20170904` (decompressed)",
        [PT, "dump", bozo], ["pmdumplog"] + flags + [bozo], "`pmdumplog`")
else:
    print("| PCP dump `bozo-20170904` | skipped: PCP testsuite archives not installed | | | |")
PY
echo
echo "allocations per converted item:"
cargo bench --quiet --bench allocs 2>/dev/null | sed 's/^/    /'
