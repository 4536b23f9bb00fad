//! Issue 37's cases 6, 7, 8 and 11, second part: CTF refuses cycles
//! without a rate, a recorded timeline keeps command lines, relative empty
//! windows name the nearest data, CSV columns in pmrep's order.
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The binary under test (POLYTRACE_TEST_BIN runs these against another
/// build, e.g. to see them fail on an older one).
fn bin() -> PathBuf {
    std::env::var_os("POLYTRACE_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(common::bin)
}

fn pt(args: &[&str]) -> (i32, String, String) {
    common::outcome(Command::new(bin()).args(args))
}

fn td(rel: &str) -> String {
    common::testdata().join(rel).to_string_lossy().into_owned()
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

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
fn a_relative_empty_window_names_the_nearest_data() {
    // live_v2 starts at 1795319114.675209 with samples 1 s apart:
    // +1.1s .. +1.2s falls between 03:45:15.696528 and 03:45:16.696471.
    let pcp = td("pcp/live_v2");
    for verb in ["info", "convert"] {
        let mut args = vec![verb, &pcp, "--begin", "+1.1s", "--end", "+1.2s"];
        if verb == "convert" {
            args.extend(["--to", "csv", "-o", "-"]);
        }
        let (code, _, err) = pt(&args);
        assert_eq!(code, 2, "{verb}: {err}");
        assert!(
            err.contains("nearest")
                && err.contains("03:45:15.696528")
                && err.contains("03:45:16.696471"),
            "{verb}: {err}"
        );
    }
    // Counted from the end: -5.9s .. -5.8s before 03:45:21.675 is the same gap.
    let (code, _, err) = pt(&["info", &pcp, "--begin", "-5.9s", "--end", "-5.8s"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("03:45:15.696528") && err.contains("03:45:16.696471"),
        "{err}"
    );
}
