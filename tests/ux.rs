//! A new user's first hour (issue 17): stdin, messages, output names and
//! sizes, thin binaries, completions, man pages, progress on a terminal.
mod common;

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn pt() -> Command {
    Command::new(common::bin())
}

fn corpus(rel: &str) -> PathBuf {
    common::corpus().join(rel)
}

fn stderr_of(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `polytrace ARGS -` with `file`'s bytes on stdin.
fn via_stdin(args: &[&str], file: &Path) -> std::process::Output {
    pt().args(args)
        .arg("-")
        .pipe_stdin(file)
        .unwrap()
        .output()
        .unwrap()
}

// ------------------------------------------------------------------ stdin

#[test]
fn binary_formats_on_stdin_dump_exactly_as_from_the_file() {
    for rel in [
        "timeline/a2-priorities.dat",
        "timeline/a2-small-wrapped.dat",
        "timeline/v3-small-wrapped.dat",
        "timeline/v2-small-wrapped.dat",
        "kpi/kpi-capture.dlt",
        "kpi/B-buf400.dlt",
    ] {
        let f = corpus(rel);
        let from_file = pt().arg("dump").arg(&f).output().unwrap();
        assert_eq!(from_file.status.code(), Some(0), "{rel}");
        for args in [&["dump"][..], &["dump", "--style", "common"]] {
            let from_file = pt().args(args).arg(&f).output().unwrap();
            let piped = via_stdin(args, &f);
            assert_eq!(piped.status.code(), Some(0), "{rel}: {}", stderr_of(&piped));
            assert!(
                piped.stdout == from_file.stdout,
                "{rel} {args:?}: stdin listing differs from the file's: {:?}",
                common::first_diff(
                    &String::from_utf8_lossy(&from_file.stdout),
                    &String::from_utf8_lossy(&piped.stdout)
                )
            );
        }
    }
    // The case: 43 lines, as Snabb's own dump of the file.
    let piped = via_stdin(
        &["dump", "--from", "timeline"],
        &corpus("timeline/a2-priorities.dat"),
    );
    let reference = std::fs::read(corpus("timeline/a2-priorities.dump-9501c6050.txt")).unwrap();
    assert_eq!(piped.stdout, reference);
    assert_eq!(String::from_utf8_lossy(&piped.stdout).lines().count(), 43);
}

#[test]
fn mmv_on_stdin_lists_the_same_values() {
    let f = corpus("mmv/research_v2.mmv");
    let from_file = pt().arg("dump").arg(&f).output().unwrap();
    let piped = via_stdin(&["dump"], &f);
    assert_eq!(piped.status.code(), Some(0), "{}", stderr_of(&piped));
    // mmvdump's first line names the file: `<stdin>` here.
    let body = |o: &[u8]| {
        String::from_utf8_lossy(o)
            .lines()
            .skip(1)
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(body(&piped.stdout), body(&from_file.stdout));
    assert!(String::from_utf8_lossy(&piped.stdout).starts_with("MMV file   = <stdin>"));
}

#[test]
fn convert_from_stdin_writes_what_the_file_would() {
    let dir = tempfile::tempdir().unwrap();
    for (rel, from) in [
        ("timeline/a2-priorities.dat", Some("timeline")),
        ("timeline/v3-small-wrapped.dat", None),
        ("kpi/kpi-capture.dlt", None),
    ] {
        let f = corpus(rel);
        let a = dir.path().join("a.ltt");
        let b = dir.path().join("b.ltt");
        let mut from_args = vec!["convert", "--to", "ltt"];
        if let Some(x) = from {
            from_args.extend(["--from", x]);
        }
        pt().args(&from_args)
            .arg(&f)
            .arg("-o")
            .arg(&a)
            .assert()
            .code(0);
        let mut piped = from_args.clone();
        piped.extend(["-o", b.to_str().unwrap()]);
        let o = via_stdin(&piped, &f);
        assert_eq!(o.status.code(), Some(0), "{rel}: {}", stderr_of(&o));
        let list = |p: &Path| pt().arg("dump").arg(p).output().unwrap().stdout;
        assert!(list(&a) == list(&b), "{rel}: stdin conversion differs");
        assert!(!list(&a).is_empty());
        std::fs::remove_dir_all(&a).unwrap();
        std::fs::remove_dir_all(&b).unwrap();
    }
}

#[test]
fn ltt_tar_gz_on_stdin_reads_as_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.tar.gz");
    pt().args(["convert", "-q", "--to", "ltt"])
        .arg(corpus("kpi/kpi-capture.dlt"))
        .arg("-o")
        .arg(&t)
        .assert()
        .code(0);
    let from_file = pt().arg("dump").arg(&t).output().unwrap();
    let piped = via_stdin(&["dump"], &t);
    assert_eq!(piped.status.code(), Some(0), "{}", stderr_of(&piped));
    assert!(!from_file.stdout.is_empty());
    assert!(piped.stdout == from_file.stdout);
}

#[test]
fn pcp_on_stdin_is_refused_clearly() {
    let o = via_stdin(&["dump"], &corpus("pcp/live_v2.meta"));
    assert_eq!(o.status.code(), Some(2));
    let e = stderr_of(&o);
    assert!(e.contains("cannot come through stdin"), "{e}");
    assert!(e.contains("base name"), "{e}");
    assert!(o.stdout.is_empty());
}

#[test]
fn kpi_text_on_stdin_still_streams() {
    // A live pipe: a bad second line is reported while stdin is still
    // open; a reader that first copied stdin to a file would wait for EOF.
    use std::io::Write;
    let mut child = std::process::Command::new(common::bin())
        .args(["convert", "-", "--to", "kpi", "-o", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"NEW 1;0;/sbin/init\nACT 1;2;3\n").unwrap();
    stdin.flush().unwrap();
    // Safety net only (no timing is asserted): should polytrace wait for
    // EOF after all, close stdin after a minute so the test ends and fails.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let guard = std::thread::spawn(move || {
        if rx.recv_timeout(std::time::Duration::from_secs(60)).is_err() {
            drop(stdin);
            return true;
        }
        drop(stdin);
        false
    });
    let out = child.wait_with_output().unwrap();
    let _ = tx.send(());
    let waited_for_eof = guard.join().unwrap();
    assert!(!waited_for_eof, "polytrace waited for the end of stdin");
    assert_eq!(out.status.code(), Some(2));
    let e = stderr_of(&out);
    common::assert_has(&e, "<stdin>: byte 19, record 2: bad ACT dataset");
}

// --------------------------------------------------------------- messages

#[test]
fn missing_input_is_one_clear_message() {
    let o = pt().args(["info", "/nonexistent/x.dlt"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr_of(&o),
        "polytrace: error: /nonexistent/x.dlt: No such file or directory (os error 2)\n"
    );
}

/// A directory this process cannot create anything in: as root (permission
/// bits do not stop root) /sys, which refuses new entries to everyone.
fn unwritable_dir(tmp: &Path) -> PathBuf {
    if unsafe { libc::geteuid() } == 0 {
        return PathBuf::from("/sys");
    }
    use std::os::unix::fs::PermissionsExt;
    let d = tmp.join("ro");
    std::fs::create_dir(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o555)).unwrap();
    d
}

#[test]
fn unwritable_output_directory_names_the_target_once() {
    let tmp = tempfile::tempdir().unwrap();
    let target = unwritable_dir(tmp.path()).join("polytrace-test-x.ltt");
    let e = common::pt_exit(
        2,
        &["convert", "--to", "ltt", "-o"],
        &[&target, &corpus("kpi/kpi-capture.dlt")],
    );
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.starts_with(&format!(
            "polytrace: error: {}: cannot write in ",
            target.display()
        )),
        "{e}"
    );
    assert!(!e.contains(".polytrace-"), "staging path leaked: {e}");
    assert!(!target.exists());
}

#[test]
fn kpi_records_are_one_based_lines() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.kpi");
    std::fs::write(&f, b"NEW 1;0;/sbin/init\nACT 1;2;3\nSTP 1\n").unwrap();
    let e = common::pt_exit(2, &["dump"], &[&f]);
    // Line 2 starts at byte 19.
    common::assert_has(&e, "bad.kpi: byte 19, record 2: bad ACT dataset");
    // Salvage names the same line.
    let e = common::pt_exit(1, &["info", "--salvage"], &[&f]);
    common::assert_has(&e, "byte 19, record 2: bad ACT");
    // A first line that is not KPI: after two blank lines it is line 3.
    let g = dir.path().join("notkpi.kpi");
    std::fs::write(&g, b"\n\nhello world\n").unwrap();
    let o = pt()
        .args(["info", "--from", "kpi"])
        .arg(&g)
        .output()
        .unwrap();
    common::assert_has(&stderr_of(&o), "byte 2, record 3: not KPI text");
}

#[test]
fn aggregate_warnings_carry_no_fake_position() {
    for verb in [&["info"][..], &["dump", "--style", "common"]] {
        let e = common::pt_exit(0, verb, &[&corpus("kpi/kpi-capture.dlt")]);
        assert!(!e.contains("byte 0, record 0"), "{e}");
        let flagged = e
            .lines()
            .find(|l| l.contains("datasets flagged"))
            .unwrap_or_else(|| panic!("{e}"));
        assert!(
            flagged.starts_with(&format!(
                "polytrace: warning: {}: 33 datasets flagged",
                corpus("kpi/kpi-capture.dlt").display()
            )),
            "{flagged}"
        );
    }
}

#[test]
fn quiet_silences_loss_lines_and_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.mmv");
    // Without -q the loss report and the reader's warnings are there ...
    let loud = pt()
        .args(["convert", "--to", "kpi", "-o"])
        .arg(dir.path().join("loud.kpi"))
        .arg(corpus("kpi/kpi-capture.dlt"))
        .output()
        .unwrap();
    common::assert_has(&stderr_of(&loud), "dropped: 8 DLTD.INTM events");
    // ... with -q nothing, on every verb.
    for args in [
        vec!["convert", "-q", "--to", "mmv", "-o", out.to_str().unwrap()],
        vec!["-q", "info"],
        vec!["dump", "-q"],
        vec!["check", "-q"],
    ] {
        let e = common::pt_exit(0, &args, &[&corpus("kpi/kpi-capture.dlt")]);
        assert_eq!(e, "", "{args:?}");
    }
    let help = pt().args(["convert", "--help"]).output().unwrap();
    let h = String::from_utf8_lossy(&help.stdout);
    assert!(h.contains("no warnings, no loss report"), "{h}");
}

// ---------------------------------------------------------- output names

fn copy(rel: &str, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(corpus(rel), to).unwrap();
}

#[test]
fn batch_outputs_replace_known_extensions() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("in");
    copy("kpi/kpi-capture.dlt", &src.join("capture.dlt"));
    copy("kpi/B-buf400.dlt", &src.join("sub/B-buf400.dlt"));
    std::fs::write(src.join("x.kpi"), b"NEW 1;0;/sbin/init\nSTP 1\n").unwrap();
    let out = dir.path().join("out");
    common::convert(&src, "kpi", &out, &["-q"]);
    for f in ["capture.kpi", "sub/B-buf400.kpi", "x.kpi"] {
        assert!(out.join(f).is_file(), "{f}");
    }
    // PCP: base names (bare KPI lines have no dates: left out here).
    std::fs::remove_file(src.join("x.kpi")).unwrap();
    let pcp = dir.path().join("pcp");
    common::convert(&src, "pcp", &pcp, &["-q"]);
    for f in ["capture.meta", "capture.0", "sub/B-buf400.meta"] {
        assert!(pcp.join(f).is_file(), "{f}");
    }
    assert!(!pcp.join("sub/B-buf400.dlt.meta").exists());
}

#[test]
fn batch_names_that_would_collide_keep_their_extension() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("in");
    copy("kpi/kpi-capture.dlt", &src.join("a.dlt"));
    std::fs::write(src.join("a.kpi"), b"NEW 1;0;/sbin/init\nSTP 1\n").unwrap();
    let out = dir.path().join("out");
    common::pt_exit(0, &["convert", "-q", "--to", "kpi", "-o"], &[&out, &src]);
    assert!(out.join("a.dlt.kpi").is_file());
    assert!(out.join("a.kpi.kpi").is_file());
}

/// A batch converts several inputs at once (one per core, `POLYTRACE_JOBS`):
/// the outputs, the messages on stderr, their order, the summary and the
/// exit code are those of a one-at-a-time run.
#[test]
fn parallel_batch_gives_the_same_outputs_and_summary_as_one_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("in");
    copy("kpi/kpi-capture.dlt", &src.join("a/capture.dlt"));
    copy("kpi/B-buf400.dlt", &src.join("a/B-buf400.dlt"));
    copy("mmv/research_v2.mmv", &src.join("b/research.mmv"));
    copy("timeline/a2-small-wrapped.dat", &src.join("b/ring.dat"));
    copy("timeline/v2-small-wrapped.dat", &src.join("b/v2.dat"));
    for m in ["0", "index", "meta"] {
        copy(
            &format!("pcp/live_v3.{m}"),
            &src.join(format!("c/live.{m}")),
        );
    }
    std::fs::write(src.join("c/notes.txt"), b"not a trace\n").unwrap();
    std::fs::write(src.join("x.kpi"), b"NEW 1;0;/sbin/init\nSTP 1\n").unwrap();
    // A DLT file cut inside its last message: an error for this input.
    let dlt = std::fs::read(corpus("kpi/B-buf400.dlt")).unwrap();
    std::fs::write(src.join("cut.dlt"), &dlt[..dlt.len() - 7]).unwrap();
    let run = |jobs: &str| {
        let out = dir.path().join(format!("out{jobs}"));
        let o = pt()
            .args(["convert", "--to", "ltt", "-o"])
            .arg(&out)
            .arg(&src)
            .env("POLYTRACE_JOBS", jobs)
            .output()
            .unwrap();
        let err = stderr_of(&o).replace(&out.display().to_string(), "OUT");
        let mut files = Vec::new();
        for e in walkdir::WalkDir::new(&out).sort_by_file_name() {
            let e = e.unwrap();
            // A directory output's manifest names its inode: not output.
            let manifest = e
                .file_name()
                .to_string_lossy()
                .ends_with(".manifest.polytrace");
            if e.file_type().is_file() && !manifest {
                let rel = e.path().strip_prefix(&out).unwrap().display().to_string();
                files.push((rel, std::fs::read(e.path()).unwrap()));
            }
        }
        (o.status.code(), err, files)
    };
    let (code1, err1, files1) = run("1");
    let (code4, err4, files4) = run("4");
    assert_eq!(code1, Some(3), "{err1}");
    assert!(err1.contains("failed     cut.dlt"), "{err1}");
    assert!(err1.contains("skipped    c/notes.txt"), "{err1}");
    assert!(err1.contains(" ok, 0 salvaged, 1 failed, "), "{err1}");
    // Two inputs report warnings: their lines come in input order.
    let (a, b) = (err1.find("a/capture.dlt: "), err1.find("b/v2.dat: M2 file"));
    assert!(a.is_some() && b.is_some() && a < b, "{err1}");
    assert_eq!(code4, code1);
    assert_eq!(err4, err1);
    assert!(files1.len() > 10, "{}", files1.len());
    let names = |f: &[(String, Vec<u8>)]| f.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&files4), names(&files1));
    for ((n, a), (_, b)) in files1.iter().zip(&files4) {
        assert!(a == b, "{n} differs");
    }
}

#[test]
fn batch_never_rereads_its_own_output_tree() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("in");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("x.kpi"), b"NEW 1;0;/sbin/init\nSTP 1\n").unwrap();
    std::fs::write(src.join("y.kpi"), b"CHK 2;(kthreadd)\n").unwrap();
    let out = src.join("out");
    for run in 0..2 {
        let e = common::pt_exit(
            0,
            &["convert", "--to", "mmv", "--force", "-o"],
            &[&out, &src],
        );
        assert!(
            e.contains("2 ok, 0 salvaged, 0 failed, 0 skipped"),
            "run {run}: {e}"
        );
        assert!(!e.contains("out/"), "run {run}: {e}");
    }
    let mut files: Vec<String> = walkdir::WalkDir::new(&out)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().strip_prefix(&out).unwrap().display().to_string())
        .collect();
    files.sort();
    assert_eq!(files, ["x.mmv", "y.mmv"]);
}

#[test]
fn output_parents_are_created_and_removed_on_failure() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("newdir/sub/out.kpi");
    pt().args(["convert", "-q"])
        .arg(corpus("kpi/kpi-capture.dlt"))
        .arg("-o")
        .arg(&out)
        .assert()
        .code(0);
    assert!(out.is_file());
    // A failed conversion leaves nothing behind, not even the folders.
    let bad = dir.path().join("bad.kpi");
    std::fs::write(&bad, b"NEW 1;0;/sbin/init\nACT 1;2;3\n").unwrap();
    let deeper = dir.path().join("other/deeper/x.kpi");
    common::pt_exit(2, &["convert", "-o"], &[&deeper, &bad]);
    assert!(!dir.path().join("other").exists());
}

#[test]
fn output_extension_implies_the_target_format() {
    let dir = tempfile::tempdir().unwrap();
    for (name, fmt) in [
        ("y.kpi", "kpi"),
        ("y.dlt", "dlt"),
        ("y.mmv", "mmv"),
        ("y.ltt", "ltt"),
    ] {
        let out = dir.path().join(name);
        common::pt_exit(
            0,
            &["convert", "-q", "-o"],
            &[&out, &corpus("kpi/kpi-capture.dlt")],
        );
        let info = pt().arg("info").arg(&out).output().unwrap();
        let s = String::from_utf8_lossy(&info.stdout);
        assert!(s.contains(&format!("format:    {fmt} ")), "{name}: {s}");
    }
    // PCP archives are base names: --to stays required, and says why.
    for name in ["archive", "archive.meta"] {
        let e = common::pt_exit(
            2,
            &["convert", "-o"],
            &[&dir.path().join(name), &corpus("kpi/kpi-capture.dlt")],
        );
        assert!(
            e.contains("--to FORMAT is required") && e.contains("--to pcp"),
            "{e}"
        );
        assert!(!dir.path().join(name).exists());
    }
    // A batch writes a folder: its name implies nothing, --to is required.
    let src = dir.path().join("in");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("x.kpi"), b"STP 1\n").unwrap();
    let e = common::pt_exit(2, &["convert", "-o"], &[&dir.path().join("out.kpi"), &src]);
    common::assert_has(&e, "--to FORMAT is required when converting a directory");
}

// --------------------------------------------------------- timeline ring

/// Ring entries of an A2/M3 file we wrote: (file size − header − strings) / 64.
fn ring_entries(p: &Path) -> u64 {
    (std::fs::metadata(p).unwrap().len() - 64 - 1_000_000) / 64
}

#[test]
fn timeline_ring_is_sized_to_the_data() {
    let dir = tempfile::tempdir().unwrap();
    // 42 events: the smallest ring.
    let small = dir.path().join("small.timeline");
    let kpi = dir.path().join("a.kpi");
    let mut lines = String::new();
    for pid in 1..=21 {
        lines.push_str(&format!("NEW {pid};0;/bin/x\nSTP {pid}\n"));
    }
    std::fs::write(&kpi, lines).unwrap();
    pt().args(["convert", "-q"])
        .arg(&kpi)
        .arg("-o")
        .arg(&small)
        .assert()
        .code(0);
    assert_eq!(ring_entries(&small), 1024);
    // A larger input: the next power of two above its entries, none lost.
    for layout in ["A2", "M3"] {
        let big = dir.path().join(format!("big-{layout}.timeline"));
        let args = ["convert", "--timeline-version", layout, "-o"];
        let e = common::pt_exit(0, &args, &[&big, &corpus("kpi/kpi-capture.dlt")]);
        assert!(!e.contains("overwritten"), "{e}");
        let n = ring_entries(&big);
        let listed = pt().arg("dump").arg(&big).output().unwrap().stdout;
        // Header row plus one row per entry (the dump stops at the first empty slot).
        let entries = String::from_utf8_lossy(&listed).lines().count() as u64 - 1;
        assert!(entries > 1024, "{layout}: {entries}");
        assert_eq!(n, entries.next_power_of_two(), "{layout}");
    }
    // --entries decides when given.
    let fixed = dir.path().join("fixed.timeline");
    pt().args(["convert", "-q", "--entries", "4096"])
        .arg(&kpi)
        .arg("-o")
        .arg(&fixed)
        .assert()
        .code(0);
    assert_eq!(ring_entries(&fixed), 4096);
}

// ------------------------------------------------------------ thin binaries

fn thin(name: &str) -> Command {
    Command::new(match name {
        "dump" => env!("CARGO_BIN_EXE_polytrace-dump"),
        "convert" => env!("CARGO_BIN_EXE_polytrace-convert"),
        _ => env!("CARGO_BIN_EXE_polytrace-record"),
    })
}

#[test]
fn thin_binaries_are_their_own_commands() {
    let o = thin("dump").arg("--help").output().unwrap();
    let h = String::from_utf8_lossy(&o.stdout);
    assert!(h.contains("Usage: polytrace-dump [OPTIONS] <INPUT>"), "{h}");
    assert!(!h.contains("polytrace-dump dump"), "{h}");
    let o = thin("convert").arg("--version").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("polytrace-convert {}\n", env!("CARGO_PKG_VERSION"))
    );
    let o = thin("record").arg("--help").output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("Usage: polytrace-record [OPTIONS]"));
    // And they run: the usage line shown is the one that works.
    let o = thin("dump")
        .arg(corpus("timeline/a2-priorities.dat"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 43);
    // A wrong option is an error of that command, exit 2.
    let o = thin("convert").arg("--bogus").output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    common::assert_has(&stderr_of(&o), "polytrace-convert");
}

// ------------------------------------------------- completions, man pages

#[test]
fn bash_completion_completes_subcommands() {
    let o = pt().args(["completions", "bash"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("polytrace.bash");
    std::fs::write(&script, &o.stdout).unwrap();
    let n = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .status()
        .unwrap();
    assert!(n.success(), "bash -n rejects the script");
    // What bash does on `polytrace con<TAB>`: call the registered function.
    let complete = |words: &str, cword: usize| {
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source '{}'; COMP_WORDS=({words}); COMP_CWORD={cword}; \
                 COMP_LINE=\"${{COMP_WORDS[*]}}\"; COMP_POINT=${{#COMP_LINE}}; \
                 f=$(complete -p polytrace | sed -E 's/.*-F ([^ ]+) .*/\\1/'); \
                 \"$f\" polytrace \"${{COMP_WORDS[$COMP_CWORD]}}\" \"${{COMP_WORDS[$((COMP_CWORD-1))]}}\"; \
                 printf '%s\\n' \"${{COMPREPLY[@]}}\"",
                script.display()
            ))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(complete("polytrace con", 1), "convert\n");
    // Format names complete after --to.
    let to = complete("polytrace convert --to pc", 3);
    assert_eq!(to, "pcp\n");
}

#[test]
fn zsh_and_fish_completions_are_generated() {
    for (shell, marker) in [
        ("zsh", "#compdef polytrace"),
        ("fish", "complete -c polytrace"),
    ] {
        let o = pt().args(["completions", shell]).output().unwrap();
        assert_eq!(o.status.code(), Some(0));
        let s = String::from_utf8_lossy(&o.stdout);
        assert!(s.contains(marker), "{shell}");
        assert!(s.contains("convert"), "{shell}");
    }
}

#[test]
fn man_page_renders() {
    let Some((man, dir)) = common::peer_and_scratch("man") else {
        return;
    };
    for topic in [None, Some("convert"), Some("dump")] {
        let mut cmd = pt();
        cmd.arg("man");
        if let Some(t) = topic {
            cmd.arg(t);
        }
        let roff = cmd.output().unwrap();
        assert_eq!(roff.status.code(), Some(0));
        let page = dir.path().join("page.1");
        std::fs::write(&page, &roff.stdout).unwrap();
        // `polytrace man convert | man -l -`, with a file for stdin.
        let out = std::process::Command::new(&man)
            .args(["-l", "-"])
            .stdin(std::fs::File::open(&page).unwrap())
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .env("MANWIDTH", "80")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let name = match topic {
            None => "polytrace".to_string(),
            Some(t) => format!("polytrace-{t}"),
        };
        assert!(text.contains("NAME"), "{text}");
        assert!(text.contains(&name), "{text}");
        if topic == Some("convert") {
            assert!(text.contains("--to"), "{text}");
        }
    }
    let o = pt().args(["man", "nosuch"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}

// ---------------------------------------------------------------- progress

/// Run polytrace with stderr on a pseudo-terminal; return what it drew there.
fn stderr_on_a_terminal(args: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    use std::io::Read;
    use std::os::fd::{FromRawFd, OwnedFd};
    let (mut master, mut slave) = (0, 0);
    let ws = libc::winsize {
        ws_row: 24,
        ws_col: 120,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &ws,
        )
    };
    assert_eq!(rc, 0, "openpty");
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut child = std::process::Command::new(common::bin())
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::from(slave))
        .spawn()
        .unwrap();
    // Read until the last slave fd closes (EIO on Linux), in a thread so a
    // full pty buffer cannot stall the child.
    let reader = std::thread::spawn(move || {
        let mut f = std::fs::File::from(master);
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match f.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => all.extend_from_slice(&buf[..n]),
            }
        }
        all
    });
    let status = child.wait().unwrap();
    let text = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
    (status.code(), text)
}

/// A DLT file of `n` copies of the corpus capture (a storage file is a
/// sequence of records, so copies concatenate into a valid file).
fn big_dlt(dir: &Path, n: usize) -> PathBuf {
    let one = std::fs::read(corpus("kpi/kpi-capture.dlt")).unwrap();
    let p = dir.join("big.dlt");
    std::fs::write(&p, one.repeat(n)).unwrap();
    p
}

/// The byte counts a progress bar showed, in order ("1.23 MiB/34.32 MiB").
fn bar_positions(text: &str, name: &str) -> Vec<String> {
    text.split(['\r', '\n'])
        .filter(|frame| frame.contains(name) && frame.contains('['))
        .filter_map(|frame| {
            let after = &frame[frame.rfind(']')? + 1..];
            Some(after.split('/').next()?.trim().to_string())
        })
        .collect()
}

#[test]
fn progress_bar_names_the_file_and_moves_on_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let big = big_dlt(dir.path(), 40);
    let out = dir.path().join("big.kpi");
    let (code, text) = stderr_on_a_terminal(&[
        "convert".as_ref(),
        big.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{text}");
    let shown = bar_positions(&text, "big.dlt");
    let mut distinct = shown.clone();
    distinct.dedup();
    assert!(
        distinct.len() >= 2,
        "the bar should move: {shown:?}\n{}",
        text.escape_debug()
    );
    assert!(text.contains("ETA"), "{}", text.escape_debug());
    // The bar is cleared before the loss report.
    assert!(
        text.contains("polytrace: written:"),
        "{}",
        text.escape_debug()
    );

    // A batch names the file being converted.
    let src = dir.path().join("in");
    std::fs::create_dir(&src).unwrap();
    std::fs::rename(&big, src.join("big.dlt")).unwrap();
    std::fs::write(src.join("small.kpi"), b"NEW 1;0;/sbin/init\nSTP 1\n").unwrap();
    let (code, text) = stderr_on_a_terminal(&[
        "convert".as_ref(),
        "--to".as_ref(),
        "kpi".as_ref(),
        src.as_os_str(),
        "-o".as_ref(),
        dir.path().join("out").as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("1/2 big.dlt ["), "{}", text.escape_debug());
    let moved = bar_positions(&text, "1/2 big.dlt");
    let mut distinct = moved.clone();
    distinct.dedup();
    assert!(distinct.len() >= 2, "{moved:?}");
}

/// A PCP -> PCP conversion is a verbatim record copy, done inside the
/// writer without items: the bar still moves (the reader's shared byte
/// counter, read by a ticker thread).
#[test]
fn progress_bar_moves_during_a_verbatim_pcp_copy() {
    let Some(ts) = common::pcp_testsuite() else {
        return;
    };
    // Decompressed: the reader counts a compressed volume's bytes only at
    // its end, and the copy must last a few of the ticker's 100 ms.
    let dir = tempfile::tempdir().unwrap();
    let name = "pcp-pidstat-process-args";
    for ext in ["0", "meta", "index"] {
        let plain = ts.join(format!("archives/{name}.{ext}"));
        let xz = ts.join(format!("archives/{name}.{ext}.xz"));
        let to = dir.path().join(format!("{name}.{ext}"));
        if plain.exists() {
            std::fs::copy(&plain, &to).unwrap();
        } else {
            let out = std::process::Command::new("xz")
                .arg("-dc")
                .arg(&xz)
                .output()
                .expect("xz");
            assert!(out.status.success(), "xz -dc {}", xz.display());
            std::fs::write(&to, out.stdout).unwrap();
        }
    }
    let src = dir.path().join(name);
    let out = dir.path().join("copy");
    let (code, text) = stderr_on_a_terminal(&[
        "convert".as_ref(),
        src.as_os_str(),
        "--to".as_ref(),
        "pcp".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{text}");
    let shown = bar_positions(&text, "pcp-pidstat-process-args");
    let mut distinct = shown.clone();
    distinct.dedup();
    distinct.retain(|p| !p.starts_with("0 B"));
    assert!(
        !distinct.is_empty(),
        "the bar should move during the copy: {shown:?}\n{}",
        text.escape_debug()
    );
}

#[test]
fn no_progress_when_stderr_is_not_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let big = big_dlt(dir.path(), 10);
    let e = common::pt_exit(0, &["convert", "-o"], &[&dir.path().join("big.kpi"), &big]);
    assert!(
        !e.contains('\r') && !e.contains("ETA") && !e.contains('\x1b'),
        "{e:?}"
    );
    // Only the reader's warnings and the loss report: every line is ours.
    assert!(e.lines().all(|l| l.starts_with("polytrace: ")), "{e}");
    // -q on a terminal: nothing at all.
    let (code, text) = stderr_on_a_terminal(&[
        "convert".as_ref(),
        "-q".as_ref(),
        big.as_os_str(),
        "-o".as_ref(),
        dir.path().join("q.kpi").as_os_str(),
    ]);
    assert_eq!(code, Some(0));
    assert_eq!(text, "");
}

// -------------------------------------------------------------------- help

/// `polytrace convert --help` at 100 columns, pinned. After a change to the
/// options, review and accept the new text with `INSTA_UPDATE=always`.
#[test]
fn convert_help_groups_its_options() {
    let o = pt()
        .args(["convert", "--help"])
        .env("COLUMNS", "100")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let help = String::from_utf8_lossy(&o.stdout).into_owned();
    // The groups, general ones first, then one per format.
    let headings: Vec<&str> = help
        .lines()
        .filter(|l| l.ends_with(':') && !l.starts_with(' '))
        .collect();
    let pos = |h: &str| headings.iter().position(|x| *x == h);
    // Input, Time window, Filters, Merging, Output, then one per format.
    for (a, b) in [
        ("Input:", "Time window:"),
        ("Time window:", "Filters:"),
        ("Filters:", "Merging:"),
        ("Merging:", "Output:"),
    ] {
        assert!(
            pos(a) < pos(b) && pos(a).is_some(),
            "{a} before {b}: {headings:?}"
        );
    }
    // Headings from the option declaration (src/cli/optspec.rs): each
    // names the target its options apply to.
    for h in [
        "PCP output (--to pcp):",
        "MMV output (--to mmv):",
        "Timeline output (--to timeline):",
        "DLT output (--to dlt, --to kpi):",
        "KPI output (--to kpi):",
        "LTT output (--to ltt):",
        "CSV output (--to csv):",
    ] {
        assert!(pos(h) > pos("Output:"), "{h}: {headings:?}");
    }
    // A format's options sit under its heading.
    let block = |h: &str| {
        help.split(&format!("\n{h}\n"))
            .nth(1)
            .and_then(|rest| rest.split("\n\n").next())
            .unwrap_or("")
            .to_string()
    };
    assert!(block("PCP output (--to pcp):").contains("--pcp-version"));
    assert!(block("DLT and KPI input:").contains("--kpi-app"));
    assert!(block("DLT output (--to dlt, --to kpi):").contains("--out-ecu"));
    assert!(block("Filters:").contains("--app"));
    assert!(block("Timeline output (--to timeline):").contains("--entries"));
    assert!(block("Output:").contains("[possible values: kpi,"));
    insta::assert_snapshot!("convert_help", help);
}

#[test]
fn check_and_info_offer_only_what_they_use() {
    let help = |verb: &str| {
        let o = pt().args([verb, "--help"]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let check = help("check");
    for absent in [
        "--begin",
        "--end",
        "--to",
        "--tsc-hz",
        "--page-size",
        "--style",
    ] {
        assert!(!check.contains(absent), "check offers {absent}");
    }
    for present in ["--from", "--salvage", "--kpi-app"] {
        assert!(check.contains(present), "check lacks {present}");
    }
    let info = help("info");
    // Whole option names: `--top` is not `--to`.
    let offers = |text: &str, opt: &str| {
        text.split(|c: char| c.is_whitespace() || ",=[]".contains(c))
            .any(|w| w == opt)
    };
    for absent in ["--to", "--output", "--style", "--max", "--strict"] {
        assert!(!offers(&info, absent), "info offers {absent}");
    }
    assert!(offers(&info, "--top"), "info lacks --top");
    // Refused, not ignored.
    pt().args(["check", "--begin", "+1s"])
        .arg(corpus("kpi/kpi-capture.dlt"))
        .assert()
        .code(2);
}

// ------------------------------------------------- eight mistakes (issue 37)

/// The eight deliberate mistakes of issue 37: each message names the
/// problem and the fix.
#[test]
fn eight_mistakes_get_messages_that_point_to_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let out = |n: &str| dir.path().join(n);
    let pcp = corpus("pcp/live_v2");
    let text = out("notes.txt");
    std::fs::write(&text, "a,b,c\n1,2,3\n").unwrap();
    let adir = out("adir");
    std::fs::create_dir(&adir).unwrap();
    let cases: Vec<(Vec<std::ffi::OsString>, &[&str])> = vec![
        // 1. A format name mistyped.
        (
            vec![
                "convert".into(),
                pcp.clone().into(),
                "--to".into(),
                "perfeto".into(),
                "-o".into(),
                out("x").into(),
            ],
            &["perfeto", "did you mean perfetto"],
        ),
        // 2. Half of the name.
        (
            vec![
                "convert".into(),
                pcp.clone().into(),
                "--to".into(),
                "json".into(),
                "-o".into(),
                out("x").into(),
            ],
            &["json", "did you mean", "chrome-json"],
        ),
        // 3. A file that is no trace: what was tried, no --from advice.
        (
            vec!["info".into(), text.clone().into()],
            &["not a trace", "not dlt", "not kpi", "line 1"],
        ),
        // 4. A mistyped PCP base name.
        (
            vec!["info".into(), corpus("pcp/live-v2").into()],
            &["live-v2", "did you mean", "live_v2"],
        ),
        // 5. A directory as -o.
        (
            vec![
                "convert".into(),
                pcp.clone().into(),
                "-o".into(),
                adir.clone().into(),
            ],
            &["is a directory", "--to FORMAT", "NAME"],
        ),
        // 6. An option of another target.
        (
            vec![
                "convert".into(),
                pcp.clone().into(),
                "--kpi-style".into(),
                "bare".into(),
                "-o".into(),
                out("y.csv").into(),
            ],
            &["--kpi-style", "applies to --to kpi"],
        ),
        // 7. A DLT write-side id taken for a filter.
        (
            vec![
                "convert".into(),
                corpus("dlt/testfile.dlt").into(),
                "--app-id".into(),
                "LOG".into(),
                "-o".into(),
                out("z.csv").into(),
            ],
            &["--out-app-id", "applies to --to dlt", "--app selects"],
        ),
        // 8. Cycles into a target that shows seconds.
        (
            vec![
                "convert".into(),
                corpus("timeline/a2-priorities.dat").into(),
                "-o".into(),
                out("t.json").into(),
            ],
            &["TSC cycles", "--tsc-hz"],
        ),
    ];
    for (args, want) in cases {
        let o = pt().args(&args).output().unwrap();
        let err = stderr_of(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        for w in want {
            assert!(err.contains(w), "{args:?}: {w:?} not in: {err}");
        }
        assert!(!err.contains("give --from"), "{args:?}: {err}");
    }
    assert!(!out("x").exists() && !out("y.csv").exists() && !out("z.csv").exists());
}
