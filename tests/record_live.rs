//! `record --to mmv --live NAME`: the file under $PCP_TMP_DIR/mmv is
//! updated while recording (read by mmvdump twice), removed at the end,
//! and the options that do not apply are refused.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn polytrace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_polytrace"))
}

/// The value lines of an mmvdump listing for `metric`.
fn values(dump: &str, metric: &str) -> Vec<String> {
    dump.lines()
        .filter(|l| l.contains(&format!("] {metric}")) && l.contains(" = "))
        .map(|l| l.split_once(" = ").unwrap().1.to_string())
        .collect()
}

#[test]
fn live_file_updates_in_place_and_goes_at_the_end() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("mmv/reclive");
    let child = polytrace()
        .args(["record", "--to", "mmv", "--live", "reclive"])
        .args(["--duration", "3s", "--interval", "200ms", "-q"])
        .env("PCP_TMP_DIR", tmp.path())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !file.exists() {
        assert!(t0.elapsed() < Duration::from_secs(10), "no live file");
        std::thread::sleep(Duration::from_millis(20));
    }
    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(&bytes[0..4], b"MMV\0");
    // Complete when visible: g2 = g1, both set.
    let g1 = u64::from_ne_bytes(bytes[8..16].try_into().unwrap());
    assert!(g1 != 0 && bytes[8..16] == bytes[16..24]);
    if let Some(tool) = common::peer("mmvdump") {
        let dump = || {
            let out = common::output_ok(Command::new(&tool).arg(&file));
            String::from_utf8(out.stdout).unwrap()
        };
        let one = dump();
        std::thread::sleep(Duration::from_millis(700));
        let two = dump();
        for m in ["kernel.all.cpu.user", "kernel.all.load", "mem.util.free"] {
            assert!(!values(&one, m).is_empty(), "no {m} in\n{one}");
        }
        assert!(
            one.contains("kpi.proc.rss["),
            "no per-process values:\n{one}"
        );
        // Counters move between scans: the interrupt total at least.
        let (a, b) = (
            values(&one, "kernel.all.intr"),
            values(&two, "kernel.all.intr"),
        );
        assert_ne!(a, b, "kernel.all.intr did not change");
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!file.exists(), "the live file is removed at the end");
    // No staging file left either.
    assert_eq!(
        std::fs::read_dir(tmp.path().join("mmv")).unwrap().count(),
        0
    );
}

#[test]
fn options_that_do_not_apply_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        vec!["--live", "x", "--samples", "1"],
        vec!["--to", "pcp", "--live", "x", "--samples", "1"],
        vec![
            "--to",
            "mmv",
            "--live",
            "x",
            "-o",
            "out.mmv",
            "--samples",
            "1",
        ],
        vec!["--to", "mmv", "--live", "x", "--force", "--samples", "1"],
        vec![
            "--to",
            "mmv",
            "--live",
            "x",
            "--mmv-version",
            "2",
            "--samples",
            "1",
        ],
        vec!["--to", "mmv", "--live", "bad-name", "--samples", "1"],
    ] {
        let out = polytrace()
            .arg("record")
            .args(&args)
            .env("PCP_TMP_DIR", tmp.path())
            .current_dir(tmp.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("live") || err.contains("NAME"),
            "{args:?}: {err}"
        );
    }
    assert!(!tmp.path().join("mmv").exists(), "nothing written");
}

#[test]
fn another_running_producers_file_is_not_replaced() {
    // An MMV file of a running process (this test's) under the same name.
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("mmv/taken");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let mut b = mmv_values::Builder::at(&file);
    b.metric::<mmv_values::U64>(
        "x",
        mmv_values::Semantics::Instant,
        mmv_values::Units::NONE,
        "",
    );
    let _m = b.start().unwrap();
    let before = std::fs::read(&file).unwrap();
    let out = polytrace()
        .args(["record", "--to", "mmv", "--live", "taken", "--samples", "1"])
        .env("PCP_TMP_DIR", tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("still running"));
    assert_eq!(std::fs::read(&file).unwrap(), before);
}
