//! Issue 37's numbered cases: options that do what they say, honest
//! times, messages that point to the fix. (The option × verb × target walk
//! is tests/options.rs; the eight mistakes are at the end of tests/ux.rs.)
mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{bin_under_test as bin, path_arg as s, pt_under_test as pt, td};

/// `record` of one sample into `out`: exit code and stderr.
fn record_one(out: &std::path::Path) -> (i32, String) {
    let (code, _, err) = pt(&[
        "record",
        "--samples",
        "1",
        "--interval",
        "100ms",
        "-o",
        &s(out),
    ]);
    (code, err)
}

// 1 -------------------------------------------------------------------

#[test]
fn record_takes_the_format_from_the_output_name() {
    let dir = tempfile::tempdir().unwrap();
    for (name, first) in [("r.csv", "time"), ("r.kpi", "")] {
        let out = dir.path().join(name);
        let (code, err) = record_one(&out);
        assert_eq!(code, 0, "{name}: {err}");
        assert!(out.is_file(), "{name}: not a file (an LTT directory?)");
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(
            text.starts_with(first),
            "{name}: {}",
            &text[..text.len().min(80)]
        );
    }
    // A .dlt is a DLT storage file.
    let out = dir.path().join("r.dlt");
    let (code, err) = record_one(&out);
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read(&out).unwrap().starts_with(b"DLT\x01"));
    // The usage line shows -o OUT as required.
    let (_, help, _) = pt(&["record", "--help"]);
    let usage = help.lines().find(|l| l.starts_with("Usage:")).unwrap();
    assert!(usage.contains("--output <OUT>"), "{usage}");
}

// 2 -------------------------------------------------------------------

#[test]
fn a_pcp_member_name_means_the_base_name() {
    let dir = tempfile::tempdir().unwrap();
    for member in ["out.meta", "out.index", "out.0"] {
        let sub = dir.path().join(member.replace('.', "_"));
        std::fs::create_dir(&sub).unwrap();
        let (code, _, err) = pt(&[
            "convert",
            &td("pcp/live_v2"),
            "--to",
            "pcp",
            "-o",
            &s(&sub.join(member)),
        ]);
        assert_eq!(code, 0, "{member}: {err}");
        let mut names: Vec<String> = std::fs::read_dir(&sub)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["out.0", "out.index", "out.meta"], "{member}");
    }
}

// 3 -------------------------------------------------------------------

fn first_epoch(info: &str) -> String {
    info.lines()
        .find_map(|l| l.strip_prefix("first:"))
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_default()
        .to_string()
}

#[test]
fn time_origin_places_only_undated_inputs() {
    let dlt = td("kpi/B-buf400.dlt");
    let (_, alone, _) = pt(&["info", &dlt]);
    // Merged with a cycles-only timeline, the DLT capture keeps its dates.
    let (code, merged, err) = pt(&[
        "info",
        &dlt,
        &td("timeline/a2-priorities.dat"),
        "--tsc-hz",
        "2.4e9",
        "--time-origin",
        "2030-01-01T00:00:00Z",
    ]);
    assert_eq!(code, 0, "{err}");
    // Its first message (framing aside, which a merge leaves out) is in
    // 2026, as alone; the timeline starts at the origin, in 2030.
    let (m, a) = (first_epoch(&merged), first_epoch(&alone));
    assert!(
        m.starts_with("1795319") && a.starts_with("1795319"),
        "{merged}\n{alone}"
    );
    let last = merged.lines().find(|l| l.starts_with("last:")).unwrap();
    assert!(last.contains("2030-01-01T00:00:00"), "{last}");
    // Alone, a dated input has nothing to place: refused, naming why.
    let (code, _, err) = pt(&["info", &dlt, "--time-origin", "2030-01-01T00:00:00Z"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--time-origin") && err.contains("relative time or cycles"),
        "{err}"
    );
}

// 5 -------------------------------------------------------------------

/// Run, read the first line of stdout, close the pipe; the run must end
/// quietly with 0.
fn head_1(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut r = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
    }
    let o = child.wait_with_output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_closed_pipe_ends_every_verb_quietly() {
    let big = td("kpi/kpi-capture.dlt");
    let ltt = td("ltt/smp_example");
    let runs: Vec<Vec<&str>> = vec![
        vec!["convert", "-q", &big, "--to", "csv", "-o", "-"],
        vec!["convert", "-q", &big, "--to", "kpi", "-o", "-"],
        vec!["convert", "-q", &ltt, "--to", "chrome-json", "-o", "-"],
        vec!["dump", "-q", &big],
        vec!["dump", "-q", "--style", "common", &ltt],
        vec!["info", "-q", "--stats", &big],
    ];
    for args in runs {
        let (code, err) = head_1(&args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert!(!err.contains("error"), "{args:?}: {err}");
    }
}

// 6 -------------------------------------------------------------------

#[test]
fn cycles_are_not_shown_as_seconds() {
    let tl = td("timeline/a2-priorities.dat");
    let (code, _, err) = pt(&["convert", &tl, "--to", "chrome-json", "-o", "-"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--tsc-hz"), "{err}");
    let (code, info, err) = pt(&["info", &tl]);
    assert_eq!(code, 0, "{err}");
    let first = info.lines().find(|l| l.starts_with("first:")).unwrap();
    assert!(first.ends_with(" cycles"), "{first}");
    assert!(first.contains("1891880793228"), "{first}");
    // The rate with a unit, in three spellings, gives one output.
    let outs: Vec<String> = ["2.4GHz", "2400MHz", "2.4e9"]
        .iter()
        .map(|hz| {
            let (code, out, err) = pt(&[
                "convert",
                &tl,
                "--tsc-hz",
                hz,
                "--to",
                "chrome-json",
                "-o",
                "-",
            ]);
            assert_eq!(code, 0, "{hz}: {err}");
            out
        })
        .collect();
    assert_eq!(outs[0], outs[1]);
    assert_eq!(outs[0], outs[2]);
}

// 7 -------------------------------------------------------------------

#[test]
fn a_recorded_timeline_keeps_its_clock_and_command_lines() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.timeline");
    // A process whose command line (dlt-kpi keeps argv[0]) is unlike any other.
    let name = format!("polytrace-cmdline-{}", std::process::id());
    let mut child = Command::new("bash")
        .args(["-c", &format!("exec -a {name} sleep 30")])
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::fs::read(format!("/proc/{}/cmdline", child.id()))
        .map_or(true, |c| !c.starts_with(name.as_bytes()))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "exec -a did not happen"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (code, _, err) = pt(&[
        "record",
        "--duration",
        "1s",
        "--interval",
        "250ms",
        "-o",
        &s(&out),
    ]);
    assert_eq!(code, 0, "{err}");
    // Read back without --tsc-hz: the recorded rate and anchor give dates.
    let (code, info, err) = pt(&["info", &s(&out)]);
    assert_eq!(code, 0, "{err}");
    let time = |k: &str| -> f64 {
        let l = info.lines().find(|l| l.starts_with(k)).unwrap();
        assert!(l.contains("T") && l.ends_with('Z'), "{l}");
        l.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    let span = time("last:") - time("first:");
    // A 1 s recording: its samples span 1 s within one interval.
    assert!((0.75..=1.25).contains(&span), "span {span} s:\n{info}");
    assert!(info.contains(" Hz"), "{info}");
    // The command line comes back as text in the process events.
    let (code, listing, err) = pt(&["dump", "--style", "common", &s(&out)]);
    child.kill().ok();
    child.wait().ok();
    assert_eq!(code, 0, "{err}");
    let (pid, cmd) = (
        format!(" pid={} ", child.id()),
        format!(" cmdline=\"{name}\""),
    );
    assert!(
        listing
            .lines()
            .any(|l| l.contains("kpi.NEW") && l.contains(&pid) && l.ends_with(&cmd)),
        "no kpi.NEW with{pid}and{cmd}"
    );
}

// 8 -------------------------------------------------------------------

#[test]
fn an_empty_window_says_where_the_data_is() {
    let pcp = td("pcp/live_v2");
    let (code, _, err) = pt(&["info", &pcp, "--begin", "2030-01-01T00:00:00Z"]);
    assert_eq!(code, 2, "{err}");
    // live_v2 runs 1795319114.675 .. 1795319121.675.
    assert!(err.contains("2026-11-22T"), "{err}");
    assert!(err.contains("--begin"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = pt(&[
        "convert",
        &pcp,
        "--begin",
        "2030-01-01T00:00:00Z",
        "-o",
        &s(&dir.path().join("x.csv")),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("2026-11-22T") && err.contains("runs from"),
        "{err}"
    );
    // A window between two samples: honest_options_rest.rs
    // (a_window_between_samples_names_the_nearest_data).
}

// 9 -------------------------------------------------------------------

#[test]
fn info_shows_dates_in_iso_8601_beside_the_epoch() {
    for stats in [&[][..], &["--stats"][..]] {
        let pcp = td("pcp/live_v2");
        let args = [&["info"][..], stats, &[pcp.as_str()][..]].concat();
        let (code, out, err) = pt(&args);
        assert_eq!(code, 0, "{err}");
        let first = out.lines().find(|l| l.starts_with("first:")).unwrap();
        assert!(first.contains("1795319114.675209000"), "{first}");
        assert!(
            first.contains("2026-11-22T03:45:14.675209") && first.ends_with('Z'),
            "{stats:?}: {first}"
        );
    }
    // A DLT file says which of its times it shows.
    let (_, out, _) = pt(&["info", &td("dlt/testfile.dlt")]);
    assert!(out.contains("storage time"), "{out}");
}

// 10 ------------------------------------------------------------------

#[test]
fn formats_says_export_only_and_help_lists_the_exports() {
    let (_, out, _) = pt(&["formats"]);
    let csv = out.lines().find(|l| l.starts_with("csv ")).unwrap();
    assert!(csv.contains("export"), "{csv}");
    assert!(out.contains("export only"), "{out}");
    let (_, help, _) = pt(&["--help"]);
    let about = help.split("Usage:").next().unwrap();
    for e in ["Chrome JSON", "CSV", "CTF"] {
        assert!(about.contains(e), "{about}");
    }
}

// 11 ------------------------------------------------------------------

#[test]
fn csv_columns_follow_the_metric_filters_in_order() {
    let (code, out, err) = pt(&[
        "convert",
        &td("pcp/live_v2"),
        "--metric",
        "mem.util.free",
        "--metric",
        "kernel.all.load",
        "--to",
        "csv",
        "-o",
        "-",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.lines().next().unwrap(),
        "time,mem.util.free,kernel.all.load[1 minute],kernel.all.load[5 minute],kernel.all.load[15 minute]"
    );
}

// 4: --rate for chrome-json -------------------------------------------

#[test]
fn rate_turns_chrome_json_counters_into_rates() {
    let pcp = td("pcp/live_v2");
    let (c1, raw, e1) = pt(&["convert", &pcp, "--to", "chrome-json", "-o", "-"]);
    let (c2, rate, e2) = pt(&["convert", &pcp, "--rate", "--to", "chrome-json", "-o", "-"]);
    assert_eq!((c1, c2), (0, 0), "{e1}{e2}");
    assert!(raw != rate, "--rate changed nothing");
    // mmv.live.ops is a counter: the rates are its differences per second.
    let series = |json: &str| -> Vec<(f64, f64)> {
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"] == "mmv.live.ops[w0]")
            .map(|e| {
                (
                    e["ts"].as_f64().unwrap(),
                    e["args"]["value"].as_f64().unwrap(),
                )
            })
            .collect()
    };
    let raw = series(&raw);
    let rate = series(&rate);
    assert!(raw.len() >= 3, "{raw:?}");
    let want: Vec<(f64, f64)> = raw
        .windows(2)
        .map(|w| (w[1].0, (w[1].1 - w[0].1) / ((w[1].0 - w[0].0) / 1e6)))
        .collect();
    assert_eq!(rate.len(), want.len(), "{rate:?} vs {want:?}");
    for (g, w) in rate.iter().zip(&want) {
        assert!(
            (g.0 - w.0).abs() < 1e-3 && (g.1 - w.1).abs() < 1e-6 * w.1.abs().max(1.0),
            "{rate:?} vs {want:?}"
        );
    }
}
