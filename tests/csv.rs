//! `--to csv`: values compared with pmrep's own CSV (`pmrep -a ARCHIVE -u
//! -r -o csv`, raw and not interpolated) for the same metric, instance and
//! time; the options; RFC 4180 quoting; the events table.
mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

type Table = (Vec<String>, Vec<Vec<String>>);

fn read_csv(text: &[u8], delim: u8) -> Table {
    let mut r = csv::ReaderBuilder::new()
        .has_headers(false)
        .delimiter(delim)
        .from_reader(text);
    let mut rows: Vec<Vec<String>> = r
        .records()
        .map(|x| x.unwrap().iter().map(str::to_string).collect())
        .collect();
    assert!(!rows.is_empty(), "no header line");
    let header = rows.remove(0);
    (header, rows)
}

fn convert(code: i32, input: &Path, dir: &Path, name: &str, args: &[&str]) -> (PathBuf, String) {
    let out = dir.join(name);
    let (got, _, err) = common::outcome(
        Command::new(common::bin())
            .arg("convert")
            .arg(input)
            .args(["--to", "csv", "-o"])
            .arg(&out)
            .args(args),
    );
    assert_eq!(
        got,
        code,
        "convert {} --to csv {args:?}: {err}",
        input.display()
    );
    (out, err)
}

fn ours(input: &Path, args: &[&str]) -> Table {
    let dir = tempfile::tempdir().unwrap();
    let (out, _) = convert(0, input, dir.path(), "out.csv", args);
    read_csv(&std::fs::read(out).unwrap(), b',')
}

/// pmrep's CSV for `metrics` of `archive`: `-u` (every recorded value, no
/// interpolation), `-r` (raw counters) unless `rate`; times in UTC with
/// microseconds so rows can be matched.
fn pmrep(archive: &Path, metrics: &[String], rate: bool) -> Option<Table> {
    let tool = common::peer("pmrep")?;
    let mut cmd = Command::new(tool);
    // pmrep runs under the interpreter pcp.conf names; the system one has
    // the pcp module even where another python3 comes first on PATH.
    if Path::new("/usr/bin/python3").exists() {
        cmd.env("PCP_PYTHON_PROG", "/usr/bin/python3");
    }
    cmd.arg("-a")
        .arg(archive)
        .args(["-u", "-o", "csv", "-Z", "UTC"]);
    cmd.args(["-f", "%Y-%m-%dT%H:%M:%S.%f", "-P", "9", "-I"]);
    if !rate {
        cmd.arg("-r");
    }
    let o = common::output_ok(cmd.args(metrics));
    Some(read_csv(&o.stdout, b','))
}

/// `metric[instance]` (ours) → `metric-instance` (pmrep).
fn pmrep_name(col: &str) -> String {
    match col.strip_suffix(']').and_then(|c| c.split_once('[')) {
        Some((m, i)) => format!("{m}-{i}"),
        None => col.to_string(),
    }
}

fn metric_of(col: &str) -> &str {
    col.split_once('[').map_or(col, |(m, _)| m)
}

/// Discrete metrics of an archive (pmrep repeats their last value).
fn discrete(archive: &Path, metrics: &[String]) -> BTreeSet<String> {
    let Some(pminfo) = common::peer("pminfo") else {
        return BTreeSet::new();
    };
    let o = Command::new(pminfo)
        .arg("-d")
        .arg("-a")
        .arg(archive)
        .args(metrics)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let mut out = BTreeSet::new();
    let mut name = String::new();
    for line in text.lines() {
        if !line.starts_with(' ') && !line.is_empty() {
            name = line.trim().to_string();
        } else if line.contains("Semantics: discrete") {
            out.insert(name.clone());
        }
    }
    out
}

struct Compared {
    equal: usize,
    carried: usize,
}

/// Every value we wrote equals pmrep's for the same column and time; every
/// value pmrep has where we have none is a discrete metric's last value
/// repeated; both have the same rows; our columns are pmrep's, except
/// instances the archive never named (pmrep cannot show those).
fn compare_with_pmrep(archive: &Path, rate: bool) -> Option<Compared> {
    let args: &[&str] = if rate { &["--rate"] } else { &[] };
    let (hdr, rows) = ours(archive, args);
    let metrics: Vec<String> = hdr[1..]
        .iter()
        .map(|c| metric_of(c).to_string())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let (phdr, prows) = pmrep(archive, &metrics, rate)?;
    let discrete = discrete(archive, &metrics);
    let pcol: HashMap<&str, usize> = phdr
        .iter()
        .enumerate()
        .map(|(i, h)| (h.as_str(), i))
        .collect();
    let prow: HashMap<&str, &Vec<String>> = prows.iter().map(|r| (r[0].as_str(), r)).collect();
    let times: Vec<&str> = rows.iter().map(|r| &r[0][..26]).collect();
    let ptimes: Vec<&str> = prows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(
        times,
        ptimes,
        "{}: rows differ from pmrep's",
        archive.display()
    );
    let mut c = Compared {
        equal: 0,
        carried: 0,
    };
    let mut last: HashMap<&str, &str> = HashMap::new();
    for col in &hdr[1..] {
        if !pcol.contains_key(pmrep_name(col).as_str()) {
            let inst = col
                .strip_suffix(']')
                .and_then(|c| c.split_once('['))
                .map(|x| x.1);
            assert!(
                inst.is_some_and(|i| i.parse::<i64>().is_ok()),
                "{}: column {col} is not in pmrep's output (only unnamed instances may be missing)",
                archive.display()
            );
        }
    }
    for r in &rows {
        let p = prow[&r[0][..26]];
        for (j, col) in hdr.iter().enumerate().skip(1) {
            let Some(&pj) = pcol.get(pmrep_name(col).as_str()) else {
                continue;
            };
            let (v, pv) = (r[j].as_str(), p[pj].as_str());
            if !v.is_empty() {
                assert!(
                    common::same_as_pmrep(v, pv),
                    "{} at {}: {col} = {v:?}, pmrep says {pv:?}",
                    archive.display(),
                    r[0]
                );
                c.equal += 1;
                last.insert(col.as_str(), v);
            } else if !pv.is_empty() {
                // pmrep repeats the last value of a discrete metric in a
                // record that does not hold it; we write what was recorded.
                assert!(
                    discrete.contains(metric_of(col)),
                    "{} at {}: pmrep has {col} = {pv:?}, we have nothing",
                    archive.display(),
                    r[0]
                );
                assert!(
                    last.get(col.as_str())
                        .is_some_and(|l| common::same_as_pmrep(l, pv)),
                    "{} at {}: pmrep's {col} = {pv:?} is not our last value {:?}",
                    archive.display(),
                    r[0],
                    last.get(col.as_str())
                );
                c.carried += 1;
            }
        }
    }
    Some(c)
}

fn testsuite(name: &str) -> Option<PathBuf> {
    common::pcp_testsuite().map(|t| t.join("archives").join(name))
}

/// [`compare_with_pmrep`] on the testsuite archive `name`, if installed.
fn testsuite_vs_pmrep(name: &str, rate: bool) -> Option<Compared> {
    compare_with_pmrep(&testsuite(name)?, rate)
}

#[test]
fn live_v3_equals_pmrep_raw() {
    let Some(c) = compare_with_pmrep(&common::corpus().join("pcp/live_v3"), false) else {
        return;
    };
    // 9 records, 439 columns with values (numbers and strings).
    assert!(c.equal > 1800, "{}", c.equal);
    assert!(c.carried > 0, "pmcd.* are discrete and logged twice");
}

#[test]
fn changeinst_equals_pmrep_raw() {
    // Instances come and go (sample.bin, network interfaces), marks between.
    let Some(c) = testsuite_vs_pmrep("changeinst", false) else {
        return;
    };
    assert!(c.equal >= 90, "{}", c.equal);
}

#[test]
fn dyninsts_equals_pmrep_raw() {
    // disk instances appear during the recording.
    let Some(c) = testsuite_vs_pmrep("dyninsts", false) else {
        return;
    };
    assert_eq!(c.equal, 118);
    assert_eq!(c.carried, 0);
}

#[test]
fn live_v3_rates_equal_pmrep_rates() {
    let Some(c) = compare_with_pmrep(&common::corpus().join("pcp/live_v3"), true) else {
        return;
    };
    assert!(c.equal > 1000, "{}", c.equal);
}

#[test]
fn columns_units_and_delimiter() {
    let (dir, a) = common::scratch_and_corpus("pcp/live_v3");
    let args = [
        "--columns",
        "mem.util.free,kernel.all.load[1 m*,mmv.live.*",
        "--units-row",
        "--delimiter",
        ";",
    ];
    let (out, _) = convert(0, &a, dir.path(), "sel.csv", &args);
    let (hdr, rows) = read_csv(&std::fs::read(&out).unwrap(), b';');
    // Pattern order first, then the metrics in the order pmrep prints
    // them (`pmrep -a live_v3 mmv.live`).
    assert_eq!(
        hdr,
        [
            "time",
            "mem.util.free",
            "kernel.all.load[1 minute]",
            "mmv.live.ops[w0]",
            "mmv.live.ops[worker-with-a-rather-long-name-that-exceeds-the-sixty-four-byte-limit]",
            "mmv.live.busy",
            "mmv.live.phase",
            "mmv.live.gauge",
            "mmv.live.small",
            "mmv.live.delta",
        ]
    );
    assert_eq!(
        rows[0],
        ["UTC", "Kbyte", "", "count", "count", "microsec", "", "", "", ""]
    );
    // The two pmcd-only records have none of these columns: no row.
    assert_eq!(rows.len(), 1 + 7);
    assert_eq!(rows[1][0], "2026-11-22T03:45:14.697627590Z");
    assert_eq!(rows[1][1], "23104728");
    assert_eq!(rows[1][2], "1.5");
}

#[test]
fn strings_are_quoted_as_rfc4180() {
    // KPI command lines hold spaces, semicolons and quotes.
    let (dir, input) = common::scratch_and_corpus("kpi/kpi-capture.dlt");
    let (out, _) = convert(
        0,
        &input,
        dir.path(),
        "k.csv",
        &["--events", "--delimiter", ";"],
    );
    let ev = dir.path().join("k.events.csv");
    let text = std::fs::read(&ev).unwrap();
    let (hdr, rows) = read_csv(&text, b';');
    // One column per field: the KPI process fields, the log message's argument.
    assert_eq!(
        hdr,
        ["time", "category", "name", "cpu", "pid", "ppid", "cmdline", "arg0"]
    );
    let info = info_counts(&input);
    let kpi_events = info["events"] as usize;
    // Non-KPI DLT messages are typed log events (counted in "events");
    // only untyped ones would be annotations.
    let notes = info.get("annotations").copied().unwrap_or(0) as usize;
    assert_eq!(rows.len(), kpi_events + notes);
    let perl = rows
        .iter()
        .find(|r| r[6].contains("perl-title; with spaces;and;semis"))
        .expect("the perl $0 rewrite is in the capture");
    assert_eq!(perl[1..3], ["kpi", "NEW"], "{perl:?}");
    assert!(perl[4].parse::<u32>().is_ok(), "{perl:?}");
    // Such a field is quoted in the file, as RFC 4180 wants.
    let raw = String::from_utf8_lossy(&text);
    assert!(
        raw.contains(";\"perl-title; with spaces;and;semis"),
        "semicolon fields must be quoted"
    );
    let samples = std::fs::read(out).unwrap();
    let (shdr, srows) = read_csv(&samples, b';');
    assert_eq!(shdr[0], "time");
    assert!(shdr.iter().any(|h| h.starts_with("kpi.proc.cpu[")));
    assert!(!srows.is_empty());
}

/// `polytrace info` item counts by kind.
fn info_counts(input: &Path) -> BTreeMap<String, u64> {
    let (code, text, err) = common::pt(&["info"], &[input]);
    assert_eq!(code, 0, "{err}");
    let mut out = BTreeMap::new();
    let mut in_items = false;
    for line in text.lines() {
        if line == "items:" {
            in_items = true;
            continue;
        }
        if !line.starts_with("  ") {
            in_items = false;
        }
        if in_items {
            let (k, v) = line.trim().rsplit_once(' ').unwrap();
            out.insert(k.trim().to_string(), v.parse().unwrap());
        }
    }
    out
}

/// The events table of `convert INPUT --to csv --events -o DIR/STEM.csv`,
/// which must exit 0.
fn events_table(input: &Path, dir: &Path, stem: &str) -> Table {
    convert(0, input, dir, &format!("{stem}.csv"), &["--events"]);
    let events = std::fs::read(dir.join(format!("{stem}.events.csv"))).unwrap();
    read_csv(&events, b',')
}

#[test]
fn ltt_events_table_one_row_per_event() {
    let (dir, input) = common::scratch_and_corpus("ltt/smp_example");
    let (hdr, rows) = events_table(&input, dir.path(), "smp");
    // One column per field name, in the order the types were defined.
    assert_eq!(
        hdr,
        [
            "time",
            "category",
            "name",
            "cpu",
            "syscall_id",
            "address",
            "trap_id",
            "irq_id",
            "kernel",
            "out",
            "in",
            "out_state",
            "event_sub_id",
            "event_data",
            "event_data1",
            "event_data2",
            "file_name",
            "event_sdata"
        ]
    );
    let col = |n: &str| hdr.iter().position(|h| h == n).unwrap();
    // Framing (block_start/end, heartbeats) is not data.
    assert_eq!(rows.len() as u64, info_counts(&input)["events"]);
    let first_irq = rows.iter().find(|r| r[2] == "irq_entry").unwrap();
    assert_eq!(first_irq[0], "2016-07-04T13:11:43.000378859Z");
    assert_eq!(first_irq[1..4], ["core", "irq_entry", "1"]);
    assert_eq!(
        (&first_irq[col("irq_id")], &first_irq[col("kernel")]),
        (&"0".to_string(), &"0".to_string())
    );
    // The cells of fields the type does not have stay empty.
    assert_eq!(
        first_irq.iter().filter(|c| !c.is_empty()).count(),
        6,
        "{first_irq:?}"
    );
    let fs = rows.iter().find(|r| r[2] == "file_system").unwrap();
    assert!(
        fs[col("event_sub_id")].starts_with("TRACE_EV_FILE_SYSTEM_"),
        "{fs:?}"
    );
    assert!(!fs[col("file_name")].is_empty(), "{fs:?}");
    // No samples in an LTT trace: the samples table is its header alone.
    let samples = std::fs::read_to_string(dir.path().join("smp.csv")).unwrap();
    assert_eq!(samples, "time\n");
    // Nothing else was left beside the outputs (no spool, no staging).
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["smp.csv", "smp.events.csv"]);
}

#[test]
fn one_event_type_gets_a_column_per_field() {
    // The timeline's v3 sample after --end keeps only... all its types;
    // a2-unwrapped has a single message type.
    let (dir, input) = common::scratch_and_corpus("timeline/a2-unwrapped.dat");
    // TSC cycles need a rate to be seconds (1 GHz: one per ns).
    convert(
        0,
        &input,
        dir.path(),
        "t.csv",
        &["--events", "--tsc-hz", "1e9"],
    );
    let (hdr, rows) = read_csv(
        &std::fs::read(dir.path().join("t.events.csv")).unwrap(),
        b',',
    );
    assert_eq!(hdr, ["time", "category", "name", "cpu", "i", "n"]);
    assert_eq!(rows.len(), 100);
    // Cycles only: seconds on the source's own axis, never a date.
    assert!(!rows[0][0].contains('T'), "{:?}", rows[0]);
    assert_eq!(rows[0][4..], ["1", "100"]);
}

#[test]
fn events_without_a_file_name_are_refused() {
    let input = common::corpus().join("ltt/smp_example");
    let (code, out, err) = common::pt(
        &["convert", "--to", "csv", "-o", "-", "--events"],
        &[&input],
    );
    assert_eq!(code, 2, "{err}");
    common::assert_has(&err, "-o FILE");
    assert!(out.is_empty());
}

#[test]
fn events_only_input_needs_the_events_option() {
    // An LTT trace has no samples: without --events there is nothing to
    // write, and a header alone is no table.
    let input = common::corpus().join("ltt/smp_example");
    let (code, out, err) = common::pt(&["convert", "--to", "csv", "-o", "-"], &[&input]);
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty());
    assert!(err.contains("nothing to write"), "{err}");
    assert!(err.contains("173151 events need --events"), "{err}");
    // Nor when --columns selects nothing: no file is left behind.
    let (dir, a) = common::scratch_and_corpus("pcp/live_v3");
    let (out, err) = convert(2, &a, dir.path(), "none.csv", &["--columns", "no.such.*"]);
    assert!(err.contains("--columns"), "{err}");
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn bad_delimiters_are_usage_errors() {
    let input = common::corpus().join("pcp/live_v3");
    for d in ["\"", "ab", "\n"] {
        let o = Command::new(common::bin())
            .arg("convert")
            .arg(&input)
            .args(["--to", "csv", "-o", "-", "--delimiter", d])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{d:?}");
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn batch_counts_an_input_without_samples_as_skipped() {
    // A timeline holds events only: nothing for the CSV table, which is
    // "nothing to write" (skipped), not a failed input.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("in");
    std::fs::create_dir_all(&src).unwrap();
    let c = common::corpus();
    std::fs::copy(c.join("mmv/research_v2.mmv"), src.join("r.mmv")).unwrap();
    std::fs::copy(c.join("timeline/a2-priorities.dat"), src.join("events.dat")).unwrap();
    let out = dir.path().join("out");
    let err = common::pt_exit(0, &["convert", "--to", "csv", "-o"], &[&out, &src]);
    common::assert_has(&err, "1 ok, 0 salvaged, 0 failed, 1 skipped");
    assert!(
        err.lines().any(|l| l.starts_with("skipped")
            && l.contains("events.dat")
            && l.contains("--events")),
        "{err}"
    );
    assert!(out.join("r.csv").is_file());
    assert!(!out.join("events.csv").exists());
}
