//! Honest time: no writer invents a date. Sources with relative time (bare
//! KPI lines) or cycles only (timeline files) go into targets that need
//! dates only with `--time-origin` (and `--tsc-hz` for cycles); raw clocks
//! are never taken for another clock.
mod common;

use common::pt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Nothing at all beside `out`'s name in `dir` (no staging leftovers).
fn nothing_written(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("out") || n.contains(".polytrace-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

const BARE: &[u8] = b"NEW 1;0;/sbin/init\nNEW 2;1;/bin/sh\nACT 1;2;3;4;5;6\nSTP 2\n";

/// `BARE` as `dir/bare.kpi`.
fn bare_kpi(dir: &Path) -> PathBuf {
    let src = dir.join("bare.kpi");
    std::fs::write(&src, BARE).unwrap();
    src
}

/// The archive's first timestamp as `pmdumplog -L` prints it (`commencing`).
fn commencing(base: &Path) -> Option<String> {
    let tool = common::peer("pmdumplog")?;
    let o = Command::new(tool)
        .args(["-L", "-Z", "UTC"])
        .arg(base)
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&o.stdout).into_owned();
    s.lines()
        .find_map(|l| l.trim().strip_prefix("commencing "))
        .map(str::to_string)
}

/// First data time of a trace as `polytrace info` reports it.
fn first(p: &Path, extra: &[&str]) -> String {
    let mut args = vec!["info"];
    args.extend_from_slice(extra);
    let (code, out, err) = pt(&args, &[p]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .find_map(|l| l.strip_prefix("first:"))
        // The epoch value (an ISO 8601 date follows it).
        .and_then(|s| s.split_whitespace().next())
        .map(str::to_string)
        .unwrap_or_default()
}

/// The archive `out` starts at 2026-11-22T03:43:55.5Z for polytrace and,
/// where installed, for pmdumplog.
fn starts_at_the_origin(out: &Path) {
    assert_eq!(first(out, &[]), "1795319035.500000000");
    if let Some(c) = commencing(out) {
        assert_eq!(c, "Sun Nov 22 03:43:55.500000000 2026");
    }
}

#[test]
fn bare_kpi_into_date_targets_needs_an_origin() {
    let dir = tempfile::tempdir().unwrap();
    let (src, out) = (bare_kpi(dir.path()), dir.path().join("out"));
    for (to, extra) in [
        ("pcp", None),
        ("dlt", None),
        ("kpi", Some(["--kpi-style", "dlt"])),
    ] {
        let mut args = vec!["convert", "--to", to];
        if let Some(x) = extra {
            args.extend_from_slice(&x);
        }
        args.push("-o");
        let (code, _, err) = pt(&args, &[&out, &src]);
        assert_eq!(code, 2, "--to {to}: {err}");
        assert!(
            err.contains("bare.kpi")
                && err.contains(&format!("the {to} format needs dates"))
                && err.contains("relative time only")
                && err.contains("--time-origin TIME"),
            "{err}"
        );
        nothing_written(dir.path());
    }
    // Bare lines stay bare lines without an origin: nothing is invented.
    let (code, text, err) = pt(&["convert", "--to", "kpi", "-o", "-"], &[&src]);
    assert_eq!(code, 0, "{err}");
    assert!(text.starts_with("NEW BEG\nNEW 1;0;/sbin/init\n"), "{text}");
}

#[test]
fn with_an_origin_the_archive_starts_at_it() {
    let dir = tempfile::tempdir().unwrap();
    let (src, out) = (bare_kpi(dir.path()), dir.path().join("out"));
    let origin = ["-q", "--time-origin", "2026-11-22T03:43:55.5Z"];
    common::convert(&src, "pcp", &out, &origin);
    starts_at_the_origin(&out);
    // The items keep their spacing (line order: 1 ns apart).
    let (_, listing, _) = pt(&["dump", "--style", "common"], &[&out]);
    common::assert_has(
        &listing,
        "1795319035.500000001 event kpi.NEW pid=2 ppid=1 cmdline=\"/bin/sh\"",
    );
}

#[test]
fn timeline_cycles_need_a_rate_and_an_origin() {
    let (dir, src) = common::scratch_and_corpus("timeline/a2-priorities.dat");
    let out = dir.path().join("out");
    let err = common::pt_exit(2, &["convert", "--to", "pcp", "-o"], &[&out, &src]);
    assert!(
        err.contains("a2-priorities.dat")
            && err.contains("TSC cycles only")
            && err.contains("--tsc-hz HZ")
            && err.contains("--time-origin TIME"),
        "{err}"
    );
    nothing_written(dir.path());
    // An origin alone does not make cycles a time axis.
    let err = common::pt_exit(
        2,
        &[
            "convert",
            "--to",
            "pcp",
            "--time-origin",
            "1795319035.5",
            "-o",
        ],
        &[&out, &src],
    );
    assert!(err.contains("--time-origin needs --tsc-hz"), "{err}");
    nothing_written(dir.path());
    let rate_and_origin = ["-q", "--tsc-hz", "2.5e9", "--time-origin", "1795319035.5"];
    common::convert(&src, "pcp", &out, &rate_and_origin);
    starts_at_the_origin(&out);
    // The entries keep their spacing at the given rate: the same listing
    // as the timeline read with the same options.
    let want = common::common_events(
        &src,
        &["--tsc-hz", "2.5e9", "--time-origin", "1795319035.5"],
    );
    assert_eq!(want.len(), 42);
    assert_eq!(common::common_events(&out, &[]), want);
    assert!(
        want[0].starts_with("1795319035.500000000 event "),
        "{}",
        want[0]
    );
}

#[test]
fn dlt_ticks_are_not_taken_for_tsc_cycles() {
    // A .dlt's raw clock is 0.1 ms ticks since boot; a timeline stores TSC
    // cycles. The ticks are left out, so the timeline's cycles are the
    // nanoseconds of the messages' time, not 5,070,923 "cycles".
    let (dir, src) = common::scratch_and_corpus("kpi/kpi-capture.dlt");
    let out = dir.path().join("out.tl");
    common::pt_exit(
        0,
        &["convert", "-q", "--to", "timeline", "-o"],
        &[&out, &src],
    );
    // The tsc holds the messages' nanoseconds, and the file says so: it
    // reads back with the original dates (the first item is the daemon's
    // first message, as `info` says), with no --tsc-hz to give.
    let f = first(&out, &[]);
    assert!(f.starts_with("1795319033.2717"), "{f}");
}
