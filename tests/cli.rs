//! CLI behaviour: exit codes, messages, atomic output, formats matrix.
mod common;

use assert_cmd::Command;
use predicates::prelude::*;

fn pt() -> Command {
    Command::new(common::bin())
}

#[test]
fn formats_matrix_marks_unimplemented() {
    let out = pt().arg("formats").output().unwrap();
    assert!(out.status.success());
    let s = String::from_utf8(out.stdout).unwrap();
    let kpi = s.lines().find(|l| l.starts_with("kpi ")).unwrap();
    assert!(kpi.contains("yes"), "{kpi}");
    for name in [
        "kpi",
        "dlt",
        "mmv",
        "pcp",
        "ltt",
        "timeline",
        "chrome-json",
        "csv",
        "ctf",
        "perfetto",
    ] {
        let line = s
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} missing in\n{s}"));
        let implemented = line.contains("yes");
        assert_eq!(
            !implemented,
            line.contains("[not implemented yet]"),
            "{line}"
        );
    }
}

#[test]
fn garbage_file_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("garbage.bin");
    std::fs::write(&g, b"\x7fELF\x02\x01garbage that is no trace\n").unwrap();
    pt().arg("dump").arg(&g).assert().code(2).stderr(
        predicate::str::contains("garbage.bin")
            .and(predicate::str::contains("unrecognised format")),
    );
}

#[test]
fn empty_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let e = dir.path().join("empty.kpi");
    std::fs::write(&e, b"").unwrap();
    pt().arg("info")
        .arg(&e)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("empty.kpi").and(predicate::str::contains("empty file")));
    // Forcing the format still gives a clear positioned error.
    pt().args(["info", "--from", "kpi"])
        .arg(&e)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("byte 0"));
}

#[test]
fn bad_line_is_positioned_and_salvage_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.kpi");
    std::fs::write(&f, b"NEW 1;0;/sbin/init\nACT 1;2;3\nSTP 1\n").unwrap();
    pt().arg("info")
        .arg(&f)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("byte 19, record 2:"));
    let out = pt().args(["info", "--salvage"]).arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("STP datasets                   1"), "{s}");
}

#[test]
fn directory_of_mixed_files_converts_what_it_can() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("in");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::write(src.join("a.kpi"), b"NEW 1;0;/sbin/init\nSTP 1\n").unwrap();
    std::fs::write(src.join("sub/b.kpi"), b"CHK 2;(kthreadd)\n").unwrap();
    std::fs::write(src.join("notes.md"), b"# not a trace\n").unwrap();
    std::fs::write(src.join("broken.kpi"), b"ACT 1;2\n").unwrap();
    let out_dir = dir.path().join("out");
    // One file failed: exit 3 (batch with failed inputs), with the summary table.
    let err = common::pt_exit(3, &["convert", "--to", "kpi", "-o"], &[&out_dir, &src]);
    assert!(err.contains("failed     broken.kpi"), "{err}");
    assert!(err.contains("skipped    notes.md"), "{err}");
    common::assert_has(&err, "2 ok, 0 salvaged, 1 failed, 1 skipped");
    assert!(out_dir.join("a.kpi").is_file());
    assert!(out_dir.join("sub/b.kpi").is_file());
    // Stage directories never stay behind.
    let leftovers: Vec<_> = walkdir::WalkDir::new(&out_dir)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".polytrace-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn output_never_overwrites_input_and_needs_force() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("a.kpi");
    std::fs::write(&f, b"NEW 1;0;/sbin/init\n").unwrap();
    pt().args(["convert", "--to", "kpi", "--force", "-o"])
        .arg(&f)
        .arg(&f)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("refusing to overwrite an input"));
    assert_eq!(std::fs::read(&f).unwrap(), b"NEW 1;0;/sbin/init\n");
    let o = dir.path().join("o.kpi");
    std::fs::write(&o, b"old").unwrap();
    pt().args(["convert", "--to", "kpi", "-o"])
        .arg(&o)
        .arg(&f)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--force"));
    assert_eq!(std::fs::read(&o).unwrap(), b"old");
    pt().args(["convert", "--to", "kpi", "--force", "-q", "-o"])
        .arg(&o)
        .arg(&f)
        .assert()
        .code(0);
    assert_eq!(
        std::fs::read(&o).unwrap(),
        b"NEW BEG\nNEW 1;0;/sbin/init\nNEW END\n"
    );
}

#[test]
fn closed_stdout_exits_zero() {
    // `polytrace dump big | head -1`: the broken pipe is not an error.
    let cap = common::corpus().join("kpi/kpi-capture.convert-a.txt");
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "{} dump {} 2>&1 | head -c 10 >/dev/null; echo ${{PIPESTATUS[0]}}",
            common::bin().display(),
            cap.display()
        ))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
}

#[test]
fn time_window_keeps_only_data_inside() {
    let cap = common::corpus().join("kpi/kpi-capture.convert-a.txt");
    let out = pt()
        .args(["info", "--begin", "2026-11-22T03:44:00Z", "--end", "+10s"])
        .arg(&cap)
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("first:     1795319040."), "{s}");
    let last: f64 = s
        .lines()
        .find(|l| l.starts_with("last:"))
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    // +10s counts from the first data item of the input (03:43:57.33).
    assert!(last <= 1795319047.34, "{s}");
}

#[test]
fn thin_binaries_run_the_same_code() {
    let dump = std::path::PathBuf::from(env!("CARGO_BIN_EXE_polytrace-dump"));
    let out = std::process::Command::new(dump)
        .arg("-")
        .arg("--style")
        .arg("common")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(b"STP 42\n")?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("event kpi.STP pid=42"));
}

#[test]
fn batch_groups_archive_members_into_one_input() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("in");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    for ext in ["0", "meta", "index"] {
        for (name, sub) in [("live_v2", "sub"), ("live_v3", "")] {
            std::fs::copy(
                common::corpus().join(format!("pcp/{name}.{ext}")),
                src.join(sub).join(format!("{name}.{ext}")),
            )
            .unwrap();
        }
    }
    let out_dir = dir.path().join("out");
    let err = common::pt_exit(0, &["convert", "--to", "pcp", "-o"], &[&out_dir, &src]);
    // Three member files each, one input each.
    common::assert_has(&err, "2 ok, 0 salvaged, 0 failed, 0 skipped");
    assert!(err.contains("ok         sub/live_v2\n"), "{err}");
    for f in [
        "sub/live_v2.meta",
        "sub/live_v2.0",
        "live_v3.meta",
        "live_v3.0",
    ] {
        assert!(out_dir.join(f).is_file(), "{f} missing");
    }
}
