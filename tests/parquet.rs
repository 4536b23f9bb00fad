//! `--to parquet`, proven by the real readers: DuckDB's values equal
//! `pmrep -u -r -o csv`'s row for row; the events tables hold one row per
//! event of LTTV's own listing and per message of `dlt-convert`; pyarrow
//! finds the schema docs/parquet.md documents in every file; datasets are
//! added to, never rewritten; `info --stats` extremes and their times equal
//! a hand computation over pmrep's values. DuckDB and pyarrow come from
//! the project's virtual environment (scripts/install-peers.sh).
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{duckdb, venv_python};

fn convert(input: &Path, out: &Path, args: &[&str]) {
    let o = Command::new(common::bin())
        .arg("convert")
        .arg(input)
        .arg("-o")
        .arg(out)
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "convert {} failed: {}",
        input.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn testsuite(name: &str) -> Option<PathBuf> {
    common::pcp_testsuite().map(|t| t.join("archives").join(name))
}

/// pmrep's raw values (`-u -r`, UTC, microseconds) of `metrics`:
/// (time, `metric-instance` column) → value text.
fn pmrep(archive: &Path, metrics: &[String]) -> Option<BTreeMap<(String, String), String>> {
    let tool = common::peer("pmrep")?;
    let mut cmd = Command::new(tool);
    if Path::new("/usr/bin/python3").exists() {
        cmd.env("PCP_PYTHON_PROG", "/usr/bin/python3");
    }
    let o = common::output_ok(
        cmd.arg("-a")
            .arg(archive)
            .args(["-u", "-r", "-o", "csv", "-Z", "UTC", "-P", "9", "-I"])
            .args(["-f", "%Y-%m-%dT%H:%M:%S.%f"])
            .args(metrics),
    );
    let mut r = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(&o.stdout[..]);
    let mut rows = r.records().map(|x| x.unwrap());
    let hdr: Vec<String> = rows.next().unwrap().iter().map(str::to_string).collect();
    let mut out = BTreeMap::new();
    for row in rows {
        for (j, v) in row.iter().enumerate().skip(1) {
            if !v.is_empty() {
                out.insert((row[0].to_string(), hdr[j].clone()), v.to_string());
            }
        }
    }
    Some(out)
}

/// `metric-instance name` → `metric-instance` (up to the first space).
fn first_word(col: &str) -> String {
    col.split(' ').next().unwrap_or(col).to_string()
}

/// The five non-discrete metrics with the most rows (pmrep repeats a
/// discrete metric's last value where none was recorded); their values,
/// read back by DuckDB, equal pmrep's, row for row and cell for cell.
fn five_metrics_equal_pmrep(archive: &Path) -> Option<usize> {
    let py = venv_python()?;
    common::peer("pmrep")?;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("a.parquet");
    convert(archive, &out, &[]);
    let o = out.display();
    let metrics: Vec<String> = duckdb(
        &py,
        &format!(
            "SELECT metric FROM '{o}' WHERE semantics <> 'discrete' AND value_str IS NULL \
             GROUP BY metric ORDER BY count(*) DESC, metric LIMIT 5"
        ),
    )
    .into_iter()
    .map(|r| r[0].clone())
    .collect();
    assert_eq!(metrics.len(), 5, "{}", archive.display());
    let list = metrics
        .iter()
        .map(|m| format!("'{m}'"))
        .collect::<Vec<_>>()
        .join(",");
    let rows = duckdb(
        &py,
        &format!(
            "SELECT strftime(time, '%Y-%m-%dT%H:%M:%S.%f'), metric, instance, \
             coalesce(CAST(value_i64 AS VARCHAR), CAST(value_f64 AS VARCHAR), value_str) \
             FROM '{o}' WHERE metric IN ({list}) ORDER BY time, metric, instance"
        ),
    );
    let mut ours = BTreeMap::new();
    for r in rows {
        let col = if r[2].is_empty() {
            r[1].clone()
        } else {
            first_word(&format!("{}-{}", r[1], r[2]))
        };
        assert!(
            ours.insert((r[0].clone(), col), r[3].clone()).is_none(),
            "two values for one cell"
        );
    }
    // Cells by metric and the first word of the instance name, which PCP
    // keeps unique in an instance domain: pmrep names an instance by the
    // name it has last (a pid reused by another process), this table by
    // the name it had at the time.
    let theirs: BTreeMap<(String, String), String> = pmrep(archive, &metrics)?
        .into_iter()
        .map(|((t, c), v)| ((t, first_word(&c)), v))
        .collect();
    let times = |m: &BTreeMap<(String, String), String>| -> BTreeSet<String> {
        m.keys().map(|k| k.0.clone()).collect()
    };
    assert_eq!(
        times(&ours),
        times(&theirs),
        "{}: the rows' times differ from pmrep's",
        archive.display()
    );
    // Instances the archive never named are numbers here and absent from
    // pmrep; every other cell is in both, with the same value.
    let cols: BTreeSet<&String> = theirs.keys().map(|k| &k.1).collect();
    let named: BTreeMap<_, _> = ours.iter().filter(|((_, c), _)| cols.contains(c)).collect();
    // pmrep leaves out a value whose instance the archive's instance
    // domain does not name at that time (pmdumplog prints `???`); those
    // cells are checked against pmdumplog instead.
    let mut unnamed = 0;
    for ((t, c), v) in &named {
        if theirs.contains_key(&(t.clone(), c.clone())) {
            continue;
        }
        let (metric, inst) = c.split_once('-').unwrap();
        let id: i64 = inst.parse().unwrap();
        let dump = Command::new(common::peer("pmdumplog")?)
            // The minute of the value.
            .args([
                "-Z",
                "UTC",
                "-S",
                &format!("@{}00", t[..17].replace('T', " ")),
            ])
            .args(["-T", &format!("@{}59", t[..17].replace('T', " "))])
            .arg(archive)
            .arg(metric)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&dump.stdout);
        assert!(
            text.contains(&format!("inst [{id} or ???] value {v}\n")),
            "{} at {t}: {c} = {v} is neither in pmrep's output nor an unnamed instance",
            archive.display()
        );
        unnamed += 1;
    }
    assert_eq!(
        named.len() - unnamed,
        theirs.len(),
        "{}: cells differ from pmrep's",
        archive.display()
    );
    for ((t, c), v) in &named {
        let Some(pv) = theirs.get(&(t.clone(), c.clone())) else {
            continue;
        };
        assert!(
            common::same_as_pmrep(v, pv),
            "{} at {t}: {c} = {v}, pmrep says {pv}",
            archive.display()
        );
    }
    Some(named.len())
}

#[test]
fn live_v3_five_metrics_equal_pmrep() {
    let a = common::corpus().join("pcp/live_v3");
    if let Some(n) = five_metrics_equal_pmrep(&a) {
        assert!(n >= 5 * 7, "{n}");
    }
}

/// The testsuite archive `name` (if installed): over 1000 values agree.
fn testsuite_five_metrics_equal_pmrep(name: &str) {
    let Some(a) = testsuite(name) else {
        return;
    };
    if let Some(n) = five_metrics_equal_pmrep(&a) {
        assert!(n > 1000, "{n}");
    }
}

#[test]
fn testsuite_20180102_five_metrics_equal_pmrep() {
    testsuite_five_metrics_equal_pmrep("20180102");
}

#[test]
fn testsuite_bozo_five_metrics_equal_pmrep() {
    testsuite_five_metrics_equal_pmrep("bozo-20170904");
}

/// LTTV's own listing of smp_example: events per type (its framing,
/// block_start/block_end/time_heartbeat, left out as the export leaves it).
fn lttv_counts() -> BTreeMap<String, u64> {
    let xz = common::corpus().join("ltt/smp_example.lttv2004.txt.xz");
    let o = common::output_ok(Command::new("xz").arg("-dc").arg(&xz));
    let mut m = BTreeMap::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 || !f[0].contains("/cpu/") {
            continue;
        }
        if matches!(f[2], "block_start" | "block_end" | "time_heartbeat") {
            continue;
        }
        *m.entry(format!("core.{}", f[2])).or_default() += 1;
    }
    m
}

#[test]
fn smp_example_events_one_row_per_event_with_typed_fields() {
    let Some(py) = venv_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("smp.parquet");
    convert(&common::corpus().join("ltt/smp_example"), &out, &[]);
    let ev = dir.path().join("smp.events.parquet");
    let e = ev.display();
    let rows = duckdb(
        &py,
        &format!("SELECT type, count(*) FROM '{e}' GROUP BY type ORDER BY type"),
    );
    let ours: BTreeMap<String, u64> = rows
        .iter()
        .map(|r| (r[0].clone(), r[1].parse().unwrap()))
        .collect();
    let lttv = lttv_counts();
    assert_eq!(ours, lttv);
    assert_eq!(lttv.values().sum::<u64>(), 173_151);
    // The first system call (the reference listing: cpu/0 at
    // 1467637903.000355469, syscall_id = 8, address = 134523838), its
    // fields typed: BIGINT in the integer map, nothing in the others.
    let first = duckdb(
        &py,
        &format!(
            "SELECT epoch_ns(time), cpu, stream, fields_i64['syscall_id'], fields_i64['address'], \
             typeof(fields_i64['syscall_id']), cardinality(fields_str), cardinality(fields_f64) \
             FROM '{e}' WHERE type = 'core.syscall_entry' ORDER BY time LIMIT 1"
        ),
    );
    assert_eq!(
        first,
        [[
            "1467637903000355469",
            "0",
            "cpu/0",
            "8",
            "134523838",
            "BIGINT",
            "0",
            "0"
        ]]
    );
    // An enum field: its number, and its label beside it.
    let soft = duckdb(
        &py,
        &format!(
            "SELECT fields_str['event_sub_id'], fields_i64['event_data'] FROM '{e}' \
             WHERE type = 'core.soft_irq' ORDER BY time LIMIT 2"
        ),
    );
    assert_eq!(
        soft,
        [
            ["TRACE_EV_SOFT_IRQ_SOFT_IRQ", "0"],
            ["TRACE_EV_SOFT_IRQ_TASKLET_HI_ACTION", "3222450064"]
        ]
    );
    // No samples in an LTT trace: the samples table is there, empty.
    let n = duckdb(&py, &format!("SELECT count(*) FROM '{}'", out.display()));
    assert_eq!(n, [["0"]]);
}

/// `dlt-convert -a`: one line per message, the header then the payload.
fn dlt_convert_lines(dlt: &Path) -> Option<Vec<String>> {
    let lines = common::dlt_convert_a_lines(dlt)?;
    Some(lines.into_iter().filter(|l| !l.trim().is_empty()).collect())
}

#[test]
fn dlt_capture_one_row_per_log_message_with_arguments() {
    let Some(py) = venv_python() else {
        return;
    };
    let input = common::corpus().join("dlt/testfile.dlt");
    let Some(lines) = dlt_convert_lines(&input) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.parquet");
    convert(&input, &out, &[]);
    let e = dir.path().join("t.events.parquet");
    let e = e.display();
    // Every verbose log message of dlt-convert's listing is a row of its
    // APID.CTID, arguments in order.
    // Rows come in time order (a .dlt holds arrival order): the listing's
    // lines, stably sorted by their storage time.
    let mut log: Vec<&String> = lines.iter().filter(|l| l.contains(" log ")).collect();
    let stamp = |l: &str| -> String { l.split_whitespace().skip(1).take(2).collect() };
    log.sort_by_key(|l| stamp(l));
    assert!(log.len() >= 40, "{}", log.len());
    // One row per message: the log messages and the non-verbose ones;
    // control messages are the format's framing.
    let control = lines.iter().filter(|l| l.contains(" control ")).count();
    let all = duckdb(&py, &format!("SELECT count(*) FROM '{e}'"));
    assert_eq!(all, [[(lines.len() - control).to_string()]]);
    let rows = duckdb(
        &py,
        &format!(
            "SELECT host, type, \
             coalesce(CAST(fields_i64['arg0'] AS VARCHAR), CAST(fields_f64['arg0'] AS VARCHAR), fields_str['arg0'], ''), \
             cardinality(fields_i64) + cardinality(fields_f64) + cardinality(fields_str) \
             FROM read_parquet('{e}', file_row_number = true) WHERE type LIKE 'LOG.%' \
             ORDER BY file_row_number"
        ),
    );
    assert_eq!(rows.len(), log.len(), "one row per log message");
    for (r, l) in rows.iter().zip(&log) {
        let w: Vec<&str> = l.split_whitespace().collect();
        // "... ECU1 LOG- TES1 log info V 1 [Hello BMW]"
        let at = w.iter().position(|x| *x == "log").unwrap();
        assert_eq!(r[0], w[at - 3].trim_end_matches('-'), "{l}");
        assert_eq!(
            r[1],
            format!(
                "{}.{}",
                w[at - 2].trim_end_matches('-'),
                w[at - 1].trim_end_matches('-')
            ),
            "{l}"
        );
        let nargs: usize = w[at + 3].parse().unwrap();
        assert_eq!(r[3], nargs.to_string(), "{l}");
        let payload = l.split_once('[').map_or("", |x| x.1).trim_end_matches(']');
        if nargs == 1 && !r[2].starts_with("0x") {
            let p = payload.trim();
            assert!(
                common::same_as_pmrep(&r[2], p) || p.starts_with(&r[2]),
                "{l}: arg0 {}",
                r[2]
            );
        }
    }
}

/// The schema tables of docs/parquet.md: (column, Arrow type) in order.
fn documented(table: &str) -> Vec<(String, String)> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/parquet.md"))
            .unwrap();
    let start = doc.find(&format!("## {table} table")).unwrap();
    let body = &doc[start..];
    let end = body[3..].find("\n## ").map_or(body.len(), |e| e + 3);
    body[..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let c: Vec<&str> = l.split('|').map(str::trim).collect();
            let ty = c[2].trim_matches('`').split("`,").next().unwrap();
            (c[1].trim_matches('`').to_string(), ty.to_string())
        })
        .collect()
}

/// (column, type) of every file under `dir` as pyarrow reads it.
fn pyarrow_schemas(py: &Path, dir: &Path) -> Vec<(PathBuf, Vec<(String, String)>)> {
    let script = r#"
import sys, pathlib, pyarrow.parquet as pq
for p in sorted(pathlib.Path(sys.argv[1]).rglob("*.parquet")):
    s = pq.read_schema(p)
    print(p, "\t".join(f"{f.name}={f.type}" for f in s), sep="\t")
"#;
    let o = common::output_ok(Command::new(py).args(["-c", script]).arg(dir));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            // pyarrow names a map's column after its type: left out.
            let l = l
                .replace(" ('fields_i64')", "")
                .replace(" ('fields_f64')", "");
            let l = l.replace(" ('fields_str')", "");
            let mut f = l.split('\t');
            let p = PathBuf::from(f.next().unwrap());
            let cols = f
                .map(|c| {
                    let (n, t) = c.split_once('=').unwrap();
                    (n.to_string(), t.to_string())
                })
                .collect();
            (p, cols)
        })
        .collect()
}

/// pyarrow's name of a documented type.
fn arrow_name(doc: &str) -> String {
    match doc {
        "dictionary<int32, string>" => "dictionary<values=string, indices=int32, ordered=0>".into(),
        "map<string, int64>" => "map<string, int64>".into(),
        other => other.to_string(),
    }
}

#[test]
fn pyarrow_finds_the_documented_schema_in_every_file() {
    let Some(py) = venv_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let inputs = [
        ("pcp/live_v3", "pcp"),
        ("ltt/smp_example", "ltt"),
        ("dlt/testfile.dlt", "dlt"),
        ("kpi/kpi-capture.dlt", "kpi"),
    ];
    for (i, name) in inputs {
        convert(
            &common::corpus().join(i),
            &dir.path().join(format!("{name}.parquet")),
            &[],
        );
    }
    let samples: Vec<(String, String)> = documented("Samples")
        .into_iter()
        .map(|(n, t)| (n, arrow_name(&t)))
        .collect();
    let events: Vec<(String, String)> = documented("Events")
        .into_iter()
        .map(|(n, t)| (n, arrow_name(&t)))
        .collect();
    assert_eq!(samples.len(), 10);
    assert_eq!(events.len(), 10);
    let files = pyarrow_schemas(&py, dir.path());
    assert!(files.len() >= 7, "{files:?}");
    for (p, cols) in files {
        let want = if p.to_string_lossy().ends_with(".events.parquet") {
            &events
        } else {
            &samples
        };
        assert_eq!(&cols, want, "{}", p.display());
    }
}

/// A tree of archives (copies of their members: the walk of `convert DIR`
/// does not follow symbolic links).
fn three_hosts(dir: &Path, names: &[&str]) -> Option<PathBuf> {
    let src = dir.join("in");
    std::fs::create_dir_all(&src).unwrap();
    for n in names {
        let base = if n.starts_with("pcp/") {
            common::corpus().join(n)
        } else {
            testsuite(n)?
        };
        let parent = base.parent().unwrap();
        let stem = base.file_name().unwrap().to_string_lossy().into_owned();
        for e in std::fs::read_dir(parent).unwrap() {
            let e = e.unwrap();
            let f = e.file_name().to_string_lossy().into_owned();
            if f.starts_with(&format!("{stem}.")) {
                std::fs::copy(e.path(), src.join(&f)).unwrap();
            }
        }
    }
    Some(src)
}

fn files_with_inodes(root: &Path) -> BTreeMap<PathBuf, (u64, std::time::SystemTime)> {
    use std::os::unix::fs::MetadataExt;
    let mut m = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let md = e.metadata().unwrap();
            if md.is_dir() {
                stack.push(e.path());
            } else {
                m.insert(
                    e.path().strip_prefix(root).unwrap().to_path_buf(),
                    (md.ino(), md.modified().unwrap()),
                );
            }
        }
    }
    m
}

#[test]
fn dataset_is_hive_partitioned_and_only_added_to() {
    let Some(py) = venv_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let Some(first) = three_hosts(dir.path(), &["pcp/live_v3", "20180102"]) else {
        return;
    };
    let ds = dir.path().join("ds");
    let run = |input: &Path| {
        common::output_ok(
            Command::new(common::bin())
                .arg("convert")
                .arg(input)
                .args(["--to", "parquet", "-o"])
                .arg(&ds),
        );
    };
    run(&first);
    let before = files_with_inodes(&ds);
    let names: Vec<String> = before
        .keys()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| n.starts_with("host=")
            && n.contains("/date=")
            && n.ends_with("/part-0.parquet")),
        "{names:?}"
    );
    // The third host in a later run, into the same dataset.
    let d2 = tempfile::tempdir().unwrap();
    let Some(second) = three_hosts(d2.path(), &["dm-io"]) else {
        return;
    };
    run(&second);
    let after = files_with_inodes(&ds);
    for (p, v) in &before {
        assert_eq!(after.get(p), Some(v), "{} was rewritten", p.display());
    }
    assert!(after.len() > before.len());
    // Every file one schema; the hosts as partitions.
    let g = ds.display();
    let hosts = duckdb(
        &py,
        &format!(
            "SELECT host, count(DISTINCT metric) > 0, max(value_f64) IS NOT NULL \
             FROM read_parquet('{g}/**/*.parquet', hive_partitioning = true) \
             GROUP BY host ORDER BY host"
        ),
    );
    assert_eq!(hosts.len(), 3, "{hosts:?}");
    // The same input again: new files beside the old ones, none replaced.
    run(&second);
    let again = files_with_inodes(&ds);
    for (p, v) in &after {
        assert_eq!(again.get(p), Some(v), "{} was rewritten", p.display());
    }
    assert!(again.keys().any(|p| p.ends_with("part-1.parquet")));
}

/// `info --stats --json` figures of one metric.
fn stats(input: &Path, metric: &str) -> serde_json::Value {
    let o = common::output_ok(
        Command::new(common::bin())
            .arg("info")
            .arg(input)
            .args(["--stats", "--json", "--metric", metric]),
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Min, max and the first time each was seen, by hand from pmrep's raw
/// values (`-u -r`), against `info --stats`.
fn extremes_equal_pmrep(archive: &Path, metric: &str) -> Option<usize> {
    let theirs = pmrep(archive, &[metric.to_string()])?;
    // column → (min, time, max, time), rows in time order.
    let mut hand: BTreeMap<String, (f64, String, f64, String)> = BTreeMap::new();
    for ((t, c), v) in &theirs {
        let v: f64 = v.parse().unwrap();
        let e = hand
            .entry(c.clone())
            .or_insert((v, t.clone(), v, t.clone()));
        if v < e.0 {
            (e.0, e.1) = (v, t.clone());
        }
        if v > e.2 {
            (e.2, e.3) = (v, t.clone());
        }
    }
    let j = stats(archive, metric);
    let mut checked = 0;
    for m in j["metrics"].as_array().unwrap() {
        let col = match m["instance_name"].as_str() {
            Some(i) => format!("{metric}-{i}"),
            None => metric.to_string(),
        };
        let Some(&(min, ref tmin, max, ref tmax)) = hand.get(&col) else {
            continue;
        };
        let us = |epoch: &str| -> String {
            // "SECONDS.NNNNNNNNN" → pmrep's UTC text with microseconds.
            let (s, f) = epoch.split_once('.').unwrap();
            let secs: i64 = s.parse().unwrap();
            let days = secs.div_euclid(86400);
            let sod = secs.rem_euclid(86400);
            let (y, mo, d) = civil(days);
            format!(
                "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{}",
                sod / 3600,
                sod / 60 % 60,
                sod % 60,
                &f[..6]
            )
        };
        assert!(
            common::same_as_pmrep(&m["min"].to_string(), &min.to_string()),
            "{col}"
        );
        assert!(
            common::same_as_pmrep(&m["max"].to_string(), &max.to_string()),
            "{col}"
        );
        assert_eq!(&us(m["min_time"].as_str().unwrap()), tmin, "{col} min");
        assert_eq!(&us(m["max_time"].as_str().unwrap()), tmax, "{col} max");
        checked += 1;
    }
    Some(checked)
}

/// Days since the epoch → (year, month, day).
fn civil(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + (m <= 2) as i64, m, d)
}

#[test]
fn stats_extremes_and_their_times_equal_pmrep_live_v3() {
    let a = common::corpus().join("pcp/live_v3");
    for m in ["kernel.all.load", "mem.util.free"] {
        if let Some(n) = extremes_equal_pmrep(&a, m) {
            assert!(n >= 1, "{m}: nothing compared");
        }
    }
}

#[test]
fn stats_extremes_and_their_times_equal_pmrep_bozo() {
    let Some(a) = testsuite("bozo-20170904") else {
        return;
    };
    for m in ["kernel.all.load", "mem.util.free", "kernel.percpu.cpu.user"] {
        if let Some(n) = extremes_equal_pmrep(&a, m) {
            assert!(n >= 1, "{m}: nothing compared");
        }
    }
}

#[test]
fn stats_answers_when_and_top() {
    // The peak rate of a counter and when; the busiest second of events;
    // --top lists instances and intervals.
    let a = common::corpus().join("pcp/live_v3");
    let o = common::output_ok(Command::new(common::bin()).arg("info").arg(&a).args([
        "--stats",
        "--json",
        "--top",
        "2",
        "--metric",
        "kernel.all.load",
    ]));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let top = &j["top"][0];
    assert_eq!(top["metric"], "kernel.all.load");
    assert_eq!(top["instances"].as_array().unwrap().len(), 2);
    for m in j["metrics"].as_array().unwrap() {
        let iv = m["top_intervals"].as_array().unwrap();
        assert_eq!(iv.len(), 2);
        assert_eq!(iv[0]["value"], m["max"]);
        assert_eq!(iv[0]["time"], m["max_time"]);
        assert!(m["p50"].as_f64().unwrap() <= m["p99"].as_f64().unwrap());
    }
    let o = Command::new(common::bin())
        .arg("info")
        .arg(common::corpus().join("ltt/smp_example"))
        .args(["--stats", "--json"])
        .output()
        .unwrap();
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // LTTV's listing, counted by hand per whole second.
    let xz = common::corpus().join("ltt/smp_example.lttv2004.txt.xz");
    let text = Command::new("xz")
        .arg("-dc")
        .arg(&xz)
        .output()
        .unwrap()
        .stdout;
    let mut per: BTreeMap<(String, String), u64> = BTreeMap::new();
    for line in String::from_utf8_lossy(&text).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 4 && f[0].contains("/cpu/") && f[2] == "irq_entry" {
            let sec = f[3].split('.').next().unwrap().to_string();
            *per.entry((f[2].to_string(), sec)).or_default() += 1;
        }
    }
    let (best, n) = per
        .iter()
        .max_by_key(|(k, v)| (**v, std::cmp::Reverse(*k)))
        .unwrap();
    let e = common::stats_event(&j, "core.irq_entry");
    assert_eq!(e["busiest_second"]["count"], *n);
    assert_eq!(
        e["busiest_second"]["second"],
        format!("{}.000000000", best.1)
    );
}

#[test]
fn stats_peak_rate_of_a_counter_equals_pmrep() {
    // The highest increase per second between consecutive raw values, by
    // hand from pmrep's values, and the interval it happened in.
    let a = common::corpus().join("pcp/live_v3");
    let m = "kernel.all.cpu.user";
    let Some(theirs) = pmrep(&a, &[m.to_string()]) else {
        return;
    };
    let v: Vec<(&String, f64)> = theirs
        .iter()
        .map(|((t, _), v)| (t, v.parse().unwrap()))
        .collect();
    let j = stats(&a, m);
    let s = &j["metrics"][0];
    let secs = |t: &str| -> f64 {
        // Seconds within the day are enough: the archive spans seconds.
        let hms = &t[11..];
        let f: Vec<f64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
        f[0] * 3600.0 + f[1] * 60.0 + f[2]
    };
    let best = v
        .windows(2)
        .map(|w| ((w[1].1 - w[0].1) / (secs(w[1].0) - secs(w[0].0)), w[1].0))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .unwrap();
    let peak = s["peak_rate"].as_f64().unwrap();
    // pmrep's times have microseconds, ours nanoseconds.
    assert!(
        (peak - best.0).abs() <= 1e-3 * best.0,
        "{peak} vs {}",
        best.0
    );
    let at = s["peak_rate_time"].as_str().unwrap();
    let us = &at[at.find('.').unwrap() + 1..][..6];
    assert!(best.1.ends_with(us), "{at} vs {}", best.1);
}
