//! `--to chrome-json`: every corpus input parsed back with serde_json and
//! counted per phase against `polytrace info`; smp_example's system-call
//! and interrupt durations; and a real Trace Event Format viewer
//! (speedscope, headless Chromium) loading the files.
mod common;

use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

fn inputs() -> Vec<PathBuf> {
    let mut v = common::corpus_files(&[
        "kpi/kpi-capture.convert-a.txt",
        "kpi/B-buf400.convert-a.txt",
        "kpi/kpi-capture.dlt",
        "kpi/B-buf400.dlt",
        "mmv/research_v1.mmv",
        "mmv/research_v2.mmv",
        "mmv/research_py_v1.mmv",
        "pcp/live_v2",
        "pcp/live_v3",
        "ltt/smp_example",
    ]);
    v.extend(common::timeline_snapshots());
    v
}

struct Out {
    json: Value,
    text: String,
    stderr: String,
}

fn convert(input: &Path, dir: &Path) -> Out {
    let out = dir.join("trace.json");
    let _ = std::fs::remove_file(&out);
    let o = Command::new(common::bin())
        .arg("convert")
        .arg(input)
        // TSC cycles need a rate to become microseconds (1 GHz: one per ns).
        .args(if input.extension().is_some_and(|x| x == "dat") {
            &["--tsc-hz", "1e9"][..]
        } else {
            &[]
        })
        .args(["--to", "chrome-json", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{}: {stderr}", input.display());
    let text = std::fs::read_to_string(&out).unwrap();
    let json: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: not JSON: {e}", input.display()));
    Out { json, text, stderr }
}

/// What `polytrace info` counts: items by kind, events by type, values by metric.
#[derive(Default)]
struct Info {
    items: BTreeMap<String, u64>,
    events: BTreeMap<String, u64>,
    values: BTreeMap<String, u64>,
    first: String,
    time_base: String,
}

fn info(input: &Path) -> Info {
    let (code, text, err) = common::pt(&["info"], &[input]);
    assert_eq!(code, 0, "{err}");
    let mut i = Info::default();
    let mut section = "";
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("first:") {
            // The epoch value (an ISO 8601 date follows it).
            i.first = rest.split_whitespace().next().unwrap_or("").to_string();
        }
        if let Some(rest) = line.strip_prefix("time base:") {
            i.time_base = rest.trim().to_string();
        }
        if !line.starts_with("  ") {
            section = match line {
                "items:" => "items",
                "events by type:" => "events",
                "values by metric:" => "values",
                _ => "",
            };
            continue;
        }
        let Some((k, v)) = line.trim().rsplit_once(' ') else {
            continue;
        };
        let (k, v) = (k.trim().to_string(), v.parse::<u64>().unwrap());
        match section {
            "items" => i.items.insert(k, v),
            "events" => i.events.insert(k, v),
            "values" => i.values.insert(k, v),
            _ => None,
        };
    }
    i
}

/// `<what>: N <label>` counts in the loss report on stderr.
fn reported(stderr: &str, prefix: &str, label: &str) -> u64 {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("polytrace: "))
        .filter_map(|l| l.strip_prefix(prefix))
        .filter_map(|l| l.trim().split_once(' '))
        .filter(|(_, rest)| rest.starts_with(label))
        .map(|(n, _)| n.parse::<u64>().unwrap())
        .sum()
}

fn events(j: &Value) -> &Vec<Value> {
    j["traceEvents"].as_array().expect("traceEvents array")
}

fn count(j: &Value, f: impl Fn(&Value) -> bool) -> u64 {
    events(j).iter().filter(|e| f(e)).count() as u64
}

fn ph(e: &Value) -> &str {
    e["ph"].as_str().unwrap()
}

fn cat(e: &Value) -> &str {
    e["cat"].as_str().unwrap_or("")
}

/// Is a trace event a source event written as an instant (not a metric
/// value, note or mark)?
fn event_instant(e: &Value) -> bool {
    ph(e) == "i" && !matches!(cat(e), "metric" | "annotation" | "mark" | "event record")
}

#[test]
fn every_corpus_input_parses_and_counts_match_info() {
    let dir = tempfile::tempdir().unwrap();
    for input in inputs() {
        let name = input.display().to_string();
        let inf = info(&input);
        let data: u64 = ["events", "samples", "marks", "annotations"]
            .iter()
            .filter_map(|k| inf.items.get(*k))
            .sum();
        if data == 0 {
            // Nothing to write is an error, and nothing is left behind.
            let out = dir.path().join("empty.json");
            let o = Command::new(common::bin())
                .arg("convert")
                .arg(&input)
                .args(["--tsc-hz", "1e9", "--to", "chrome-json", "-o"])
                .arg(&out)
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(2), "{name}");
            assert!(String::from_utf8_lossy(&o.stderr).contains("nothing to write"));
            assert!(!out.exists(), "{name}");
            continue;
        }
        let o = convert(&input, dir.path());
        let j = &o.json;
        assert_eq!(j["displayTimeUnit"], "ns", "{name}");
        for e in events(j) {
            let p = ph(e);
            assert!(
                matches!(p, "M" | "X" | "B" | "E" | "i" | "C"),
                "{name}: {e}"
            );
            if p != "M" {
                assert!(
                    e["ts"].is_number() && e["pid"].is_i64() && e["tid"].is_i64(),
                    "{e}"
                );
            }
            if p == "X" {
                assert!(e["dur"].as_f64().unwrap() >= 0.0, "{e}");
            }
        }
        let item = |k: &str| inf.items.get(k).copied().unwrap_or(0);
        let (x, b, end) = (
            count(j, |e| ph(e) == "X"),
            count(j, |e| ph(e) == "B"),
            count(j, |e| ph(e) == "E"),
        );
        // Every event is an instant or one half of a duration.
        assert_eq!(
            2 * x + count(j, event_instant),
            item("events"),
            "{name}: events"
        );
        // Running slices come from schedchange: one per switch plus the
        // process running on each CPU before its first one.
        let switches = inf.events.get("core.schedchange").copied().unwrap_or(0);
        assert_eq!(b, end, "{name}");
        let cpus_switching = count(j, |e| {
            ph(e) == "M"
                && e["args"]["name"]
                    .as_str()
                    .is_some_and(|n| n.ends_with(" running"))
        });
        assert_eq!(b, switches + cpus_switching, "{name}");
        assert_eq!(switches > 0, cpus_switching > 0, "{name}");
        // Every metric value is a counter value, a string instant, a string
        // repeat left out (degraded) or reported dropped.
        let values: u64 = inf.values.values().sum();
        let metric_instants = count(j, |e| ph(e) == "i" && cat(e) == "metric");
        assert_eq!(
            count(j, |e| ph(e) == "C")
                + metric_instants
                + reported(&o.stderr, "degraded:", "string metric values")
                + reported(&o.stderr, "dropped:", "metric values"),
            values,
            "{name}: values"
        );
        assert_eq!(
            count(j, |e| cat(e) == "annotation"),
            item("annotations"),
            "{name}"
        );
        assert_eq!(count(j, |e| cat(e) == "mark"), item("marks"), "{name}");
        // Time: relative to the first item, the absolute origin only when
        // the source has one (never an invented date).
        let other = &j["otherData"];
        let absolute = inf.time_base.starts_with("absolute");
        assert_eq!(
            other["origin_utc"].is_string(),
            absolute && !inf.first.is_empty(),
            "{name}"
        );
        let framing = item("framing events") > 0;
        if !inf.first.is_empty()
            && !framing
            && !name.contains(".dlt")
            && !name.contains("convert-a")
        {
            // Readers that deliver in time order start at info's first item
            // (framing aside: it is not data, smp_example's test checks it).
            // Epoch seconds with nine digits, or cycles (= ns at 1 GHz).
            let origin = other["origin_ns"].as_str().unwrap();
            assert_eq!(origin, inf.first.replace('.', ""), "{name}");
        }
    }
}

#[test]
fn one_event_per_line_in_the_object_form() {
    let dir = tempfile::tempdir().unwrap();
    let o = convert(&common::corpus().join("kpi/B-buf400.dlt"), dir.path());
    let lines: Vec<&str> = o.text.lines().collect();
    assert_eq!(lines[0], "{\"traceEvents\":[");
    let end = lines
        .iter()
        .position(|l| *l == "],")
        .expect("array end line");
    assert_eq!(lines[end + 1], "\"displayTimeUnit\":\"ns\",");
    assert!(lines[end + 2].starts_with("\"otherData\":{"));
    // Each line inside the array is one complete event.
    for l in &lines[1..end] {
        let v: Value = serde_json::from_str(l.strip_suffix(',').unwrap_or(l)).unwrap();
        assert!(v["ph"].is_string(), "{l}");
    }
    assert_eq!(end - 1, events(&o.json).len());
}

/// The first irq_entry/irq_exit pair of smp_example (cpu 1, irq 0), from
/// its LTT listing: entry 1467637903.000378859, exit .000390729; the first
/// data item (the trace's origin) is cpu 0's syscall_exit at .000320682.
#[test]
fn smp_example_syscall_and_irq_durations() {
    let (dir, input) = common::scratch_and_corpus("ltt/smp_example");
    let o = convert(&input, dir.path());
    let j = &o.json;
    let inf = info(&input);
    let n = |k: &str| inf.events[k];
    assert_eq!(
        j["otherData"]["origin_utc"],
        "2016-07-04T13:11:43.000320682Z"
    );
    assert!(o.text.contains(
        "{\"ph\":\"X\",\"name\":\"irq 0\",\"cat\":\"core\",\"ts\":58.177,\"dur\":11.870,"
    ));
    let xs = |stem: &str| {
        count(j, |e| {
            ph(e) == "X"
                && e["name"]
                    .as_str()
                    .is_some_and(|s| s.split(' ').next() == Some(stem))
        })
    };
    let unmatched = |name: &str| count(j, |e| e["name"] == name && cat(e) == "core,unmatched");
    // Interrupts pair on their CPU: all of them.
    assert_eq!(xs("irq"), n("core.irq_entry"));
    assert_eq!(xs("irq"), n("core.irq_exit"));
    assert_eq!(unmatched("irq_entry") + unmatched("irq_exit"), 0);
    assert_eq!(xs("trap"), 20);
    // System calls pair per process: those in flight when tracing started
    // or stopped stay unmatched, as instants with all their fields.
    let sys = xs("syscall");
    assert_eq!(sys + unmatched("syscall_entry"), n("core.syscall_entry"));
    assert_eq!(sys + unmatched("syscall_exit"), n("core.syscall_exit"));
    assert!(sys > 1900, "{sys}");
    assert!(unmatched("syscall_entry") <= 30 && unmatched("syscall_exit") <= 30);
    assert_eq!(
        j["otherData"]["unmatched_entries"],
        unmatched("syscall_entry").to_string()
    );
    // Where they live: interrupts on the CPU tracks, system calls on the
    // (real) process tracks, named by number.
    let cpus_pid = events(j)
        .iter()
        .find(|e| ph(e) == "M" && e["args"]["name"] == "CPUs")
        .unwrap()["pid"]
        .clone();
    let unknown: Vec<&Value> = events(j)
        .iter()
        .filter(|e| {
            ph(e) == "M"
                && e["args"]["name"]
                    .as_str()
                    .is_some_and(|n| n.ends_with("process not yet known"))
        })
        .map(|e| &e["tid"])
        .collect();
    assert_eq!(unknown.len(), 2);
    for e in events(j).iter().filter(|e| ph(e) == "X") {
        let name = e["name"].as_str().unwrap();
        if name.starts_with("irq ") {
            assert_eq!(e["pid"], cpus_pid, "{e}");
            assert!(e["args"]["irq_id"].is_u64());
        } else if name.starts_with("syscall ") {
            assert!(e["args"]["syscall_id"].is_u64());
            // Before a CPU's first schedchange the process is not known yet.
            let real = e["pid"].as_i64().unwrap() < 1 << 30;
            assert!(real || unknown.contains(&&e["tid"]), "{e}");
        }
    }
    assert!(count(j, |e| ph(e) == "X" && e["name"] == "syscall 4") > 0);
    // Durations nest on every track, so a viewer can stack them.
    let mut by_track: HashMap<(i64, i64), Vec<(i64, i64)>> = HashMap::new();
    for e in events(j).iter().filter(|e| ph(e) == "X") {
        let us = |v: &Value| (v.as_f64().unwrap() * 1000.0).round() as i64;
        let ts = us(&e["ts"]);
        by_track
            .entry((e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap()))
            .or_default()
            .push((ts, ts + us(&e["dur"])));
    }
    for (track, mut spans) in by_track {
        spans.sort_by_key(|&(s, e)| (s, -e));
        let mut open: Vec<i64> = Vec::new();
        for (s, e) in spans {
            while open.last().is_some_and(|&end| end <= s) {
                open.pop();
            }
            if let Some(&end) = open.last() {
                assert!(
                    e <= end,
                    "{track:?}: [{s}, {e}] overlaps a span ending at {end}"
                );
            }
            open.push(e);
        }
    }
}

#[test]
fn counters_and_processes_from_kpi() {
    let (dir, input) = common::scratch_and_corpus("kpi/kpi-capture.dlt");
    let o = convert(&input, dir.path());
    let j = &o.json;
    // kpi.proc.* values sit on their process's track, named from NEW/CHK.
    let cpu = events(j)
        .iter()
        .find(|e| ph(e) == "C" && e["name"] == "kpi.proc.cpu")
        .unwrap();
    let pid = cpu["pid"].as_i64().unwrap();
    assert!(pid < 1 << 30);
    assert!(events(j).iter().any(|e| ph(e) == "M"
        && e["name"] == "process_name"
        && e["pid"] == pid
        && !e["args"]["name"].as_str().unwrap().starts_with("pid ")));
    // IRQ counts: one series per instance on the metric's own track.
    let irq: Vec<&Value> = events(j)
        .iter()
        .filter(|e| ph(e) == "C" && e["name"].as_str().unwrap().starts_with("kpi.irq.count["))
        .collect();
    assert_eq!(irq.len() as u64, info(&input).values["kpi.irq.count"]);
    assert!(irq.iter().all(|e| e["pid"] == irq[0]["pid"]));
    // Non-KPI DLT messages (typed log events, category = APID): on their
    // ECU track.
    let note = events(j).iter().find(|e| cat(e) == "DLTD").unwrap();
    assert!(events(j).iter().any(|e| ph(e) == "M"
        && e["name"] == "process_name"
        && e["pid"] == note["pid"]
        && e["args"]["name"] == "ECU ECU1"));
}

#[test]
fn cycle_time_has_no_date() {
    let (dir, input) = common::scratch_and_corpus("timeline/a2-small-wrapped.dat");
    let o = convert(&input, dir.path());
    let other = &o.json["otherData"];
    assert!(other.get("origin_utc").is_none());
    assert!(
        other["time_base"]
            .as_str()
            .is_some_and(|t| t.starts_with("cycles only")),
        "{other}"
    );
    // breath start/end pair per core.
    assert_eq!(
        count(&o.json, |e| ph(e) == "X" && e["name"] == "breath"),
        341
    );
}

// ---------------------------------------------------------------- viewer

/// The speedscope + playwright-core install of scripts/install-peers.sh.
fn viewer() -> Option<(PathBuf, PathBuf)> {
    let dir = std::env::var_os("POLYTRACE_VIEWER_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/local/lib/polytrace-viewer"))
        .join("node_modules");
    let node = common::peer("node")?;
    common::peer("chromium")?;
    let ok = dir.join("speedscope/dist/release/index.html").is_file()
        && dir.join("playwright-core/package.json").is_file();
    if !ok {
        if std::env::var_os("POLYTRACE_REQUIRE_PEERS").is_some() {
            panic!(
                "the trace viewer (speedscope, playwright-core) is required (CI) but not in {}; run scripts/install-peers.sh",
                dir.display()
            );
        }
        eprintln!("skipping: trace viewer not installed in {}", dir.display());
        return None;
    }
    Some((node, dir))
}

/// Open `trace` in speedscope; what the page shows and exports.
fn view(trace: &Path) -> Option<Value> {
    let (node, modules) = viewer()?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/viewer/speedscope.mjs");
    let o = common::output_ok(
        Command::new("timeout")
            .arg("300")
            .arg(node)
            .arg(script)
            .arg(trace)
            .env("NODE_PATH", modules),
    );
    Some(serde_json::from_slice(&o.stdout).unwrap())
}

/// Durations (X, and B/E pairs) per track, as speedscope should load them.
fn expected_frames(j: &Value) -> BTreeMap<(i64, i64), u64> {
    let mut m = BTreeMap::new();
    for e in events(j).iter().filter(|e| matches!(ph(e), "X" | "B")) {
        *m.entry((e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap()))
            .or_insert(0) += 1;
    }
    m
}

fn check_viewer(input: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let o = convert(input, dir.path());
    let Some(seen) = view(&dir.path().join("trace.json")) else {
        return;
    };
    let want = expected_frames(&o.json);
    // One profile per track with durations: the toolbar's "(1/N)".
    assert_eq!(seen["toolbar_profiles"], want.len() as u64, "{seen}");
    let mut got = BTreeMap::new();
    for p in seen["profiles"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        let num = |key: &str| -> i64 {
            let at = name.rfind(key).unwrap() + key.len();
            name[at..]
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        got.insert((num("(pid "), num("tid ")), p["opens"].as_u64().unwrap());
    }
    assert_eq!(got, want, "frames the viewer opened per track");
    // The viewer matched every begin with its end: no warning of its own
    // (WebGL driver chatter of the headless GPU aside).
    let complaints: Vec<&str> = seen["logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .filter(|l| !l.contains("GL Driver Message"))
        .collect();
    assert!(complaints.is_empty(), "{complaints:#?}");
}

#[test]
fn viewer_loads_smp_example() {
    check_viewer(&common::corpus().join("ltt/smp_example"));
}

#[test]
fn viewer_loads_timeline() {
    check_viewer(&common::corpus().join("timeline/a2-small-wrapped.dat"));
}
