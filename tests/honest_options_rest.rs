//! Issue 37's cases 6, 7, 8 and 11, second part: CTF refuses cycles
//! without a rate, a recorded timeline keeps command lines, relative empty
//! windows name the nearest data, CSV columns in pmrep's order.
mod common;

use std::process::Command;

use common::{path_arg as s, pt_under_test as pt, td};

// 6 -------------------------------------------------------------------

#[test]
fn every_target_with_seconds_refuses_cycles_without_a_rate() {
    let tl = td("timeline/a2-small-wrapped.dat");
    let dir = tempfile::tempdir().unwrap();
    for to in ["ctf", "perfetto", "parquet", "chrome-json", "csv"] {
        let out = dir.path().join(format!("x.{to}"));
        let (code, _, err) = pt(&["convert", &tl, "--to", to, "-o", &s(&out)]);
        assert_eq!(code, 2, "--to {to}: {err}");
        assert!(err.contains("--tsc-hz"), "--to {to}: {err}");
        assert!(!out.exists(), "--to {to} wrote {}", out.display());
    }
    // With the rate, CTF is written.
    let out = dir.path().join("rated.ctf");
    let (code, _, err) = pt(&[
        "convert",
        &tl,
        "--tsc-hz",
        "2.4GHz",
        "--to",
        "ctf",
        "-o",
        &s(&out),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.join("metadata").is_file());
}

// 8 -------------------------------------------------------------------

#[test]
fn a_window_between_samples_names_the_nearest_data() {
    // live_v2 runs 1795319114.675209 .. 03:45:21.675, samples 1 s apart:
    // each window (absolute, from the start, from the end) falls between
    // 03:45:15.696528 and 03:45:16.696471.
    let pcp = td("pcp/live_v2");
    let windows = [
        ("1795319115.8", "1795319115.9"),
        ("+1.1s", "+1.2s"),
        ("-5.9s", "-5.8s"),
    ];
    for (begin, end) in windows {
        for verb in ["info", "convert"] {
            let mut args = vec![verb, &pcp, "--begin", begin, "--end", end];
            if verb == "convert" {
                args.extend(["--to", "csv", "-o", "-"]);
            }
            let (code, _, err) = pt(&args);
            let what = format!("{verb} --begin {begin} --end {end}");
            assert_eq!(code, 2, "{what}: {err}");
            assert!(
                err.contains("nearest")
                    && err.contains("03:45:15.696528")
                    && err.contains("03:45:16.696471"),
                "{what}: {err}"
            );
        }
    }
}

// 11 ------------------------------------------------------------------

/// The CSV header's columns, named as pmrep names them (`name-instance`).
fn our_header(archive: &str, metric: &str) -> Vec<String> {
    let (code, out, err) = pt(&[
        "convert", archive, "--metric", metric, "--to", "csv", "-o", "-",
    ]);
    assert_eq!(code, 0, "{err}");
    let head = out.lines().next().unwrap_or_default();
    head.split(',')
        .skip(1)
        .map(
            |c| match c.strip_suffix(']').and_then(|c| c.split_once('[')) {
                Some((m, i)) => format!("{m}-{i}"),
                None => c.to_string(),
            },
        )
        .collect()
}

#[test]
fn csv_columns_within_a_metric_come_in_pmrep_order() {
    // pmrep -u -r -o csv -a testdata/pcp/live_v3 kernel.all.cpu prints
    // user before idle (the archive defines idle first).
    let v3 = td("pcp/live_v3");
    assert_eq!(
        our_header(&v3, "kernel.all.cpu"),
        ["kernel.all.cpu.user", "kernel.all.cpu.idle"]
    );
    let Some(pmrep) = common::peer("pmrep") else {
        return;
    };
    let mut cases = vec![(v3, "kernel.all.cpu")];
    if let Some(ts) = common::pcp_testsuite() {
        let a = |n: &str| s(&ts.join("archives").join(n));
        cases.extend([
            (a("bozo-20170904"), "kernel.all.cpu"),
            (a("20180127.08.40"), "kernel.all.cpu"),
            (a("archive-goodred-20150417"), "kernel.all.cpu"),
            (a("naslog"), "network.interface.in"),
            (a("all-irix-6.5.25"), "kernel.percpu.cpu"),
            (a("bozo-20170904"), "mem.util"),
        ]);
    }
    // pmpython runs the first python3 on PATH; pmrep needs the system one.
    let path = format!(
        "/usr/bin:/bin:{}",
        std::env::var("PATH").unwrap_or_default()
    );
    for (archive, metric) in cases {
        let o = Command::new(&pmrep)
            .env("PATH", &path)
            .args(["-u", "-r", "-o", "csv", "-a", &archive, metric])
            .output()
            .unwrap();
        assert!(o.status.success(), "pmrep {archive} {metric}");
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let theirs: Vec<String> = text
            .lines()
            .next()
            .unwrap_or_default()
            .split(',')
            .skip(1)
            .map(|c| c.trim_matches('"').to_string())
            .collect();
        let ours = our_header(&archive, metric);
        // pmrep also lists metrics that never had a value; compare the
        // order of the columns both show.
        let both: Vec<&String> = theirs.iter().filter(|c| ours.contains(c)).collect();
        let ours: Vec<&String> = ours.iter().filter(|c| theirs.contains(c)).collect();
        assert!(!both.is_empty(), "{archive} {metric}: no column in common");
        assert_eq!(ours, both, "{archive} {metric}");
    }
}
