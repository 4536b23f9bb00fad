//! CLI behaviour: exit codes, messages, atomic output, formats matrix.
mod common;

use assert_cmd::Command;
use polytrace::model::FormatId;

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
    for name in FormatId::ALL.map(FormatId::name) {
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
    let (_dir, g) =
        common::scratch_file("garbage.bin", b"\x7fELF\x02\x01garbage that is no trace\n");
    let err = common::pt_exit(2, &["dump"], &[&g]);
    common::assert_has_all(
        "dump garbage.bin",
        &err,
        &["garbage.bin", "unrecognised format"],
    );
}

#[test]
fn empty_file_is_an_error() {
    let (_dir, e) = common::scratch_file("empty.kpi", b"");
    let err = common::pt_exit(2, &["info"], &[&e]);
    common::assert_has_all("info empty.kpi", &err, &["empty.kpi", "empty file"]);
    // Forcing the format still gives a clear positioned error.
    let err = common::pt_exit(2, &["info", "--from", "kpi"], &[&e]);
    common::assert_has(&err, "byte 0");
}

#[test]
fn bad_line_is_positioned_and_salvage_keeps_the_rest() {
    let (_dir, f) = common::scratch_file("bad.kpi", b"NEW 1;0;/sbin/init\nACT 1;2;3\nSTP 1\n");
    common::assert_has(&common::pt_exit(2, &["info"], &[&f]), "byte 19, record 2:");
    let (code, s, err) = common::pt(&["info", "--salvage"], &[&f]);
    assert_eq!(code, 1, "{err}");
    common::assert_has(&s, "STP datasets                   1");
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
    let (dir, f) = common::scratch_file("a.kpi", b"NEW 1;0;/sbin/init\n");
    let force = ["convert", "--to", "kpi", "--force", "-o"];
    let err = common::pt_exit(2, &force, &[&f, &f]);
    common::assert_has(&err, "refusing to overwrite an input");
    assert_eq!(std::fs::read(&f).unwrap(), b"NEW 1;0;/sbin/init\n");
    let o = dir.path().join("o.kpi");
    std::fs::write(&o, b"old").unwrap();
    let err = common::pt_exit(2, &["convert", "--to", "kpi", "-o"], &[&o, &f]);
    common::assert_has(&err, "--force");
    assert_eq!(std::fs::read(&o).unwrap(), b"old");
    let quiet_force = ["convert", "--to", "kpi", "--force", "-q", "-o"];
    common::pt_exit(0, &quiet_force, &[&o, &f]);
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
