//! Memory-mapped inputs (timeline, MMV, LTT tracefiles): the same listing
//! whether the file is mapped or copied, and a clear error, not SIGBUS,
//! when another program truncates the file while it is being read.

mod common;
use common::{bin, corpus};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// An A2 timeline of 65,536 slots (4 MB), wrapped, written by our writer
/// from the corpus LTT trace.
fn big_a2(dir: &Path) -> PathBuf {
    let p = dir.join("big.timeline");
    common::output_ok(
        Command::new(bin())
            .args([
                "convert",
                "-q",
                "--to",
                "timeline",
                "--timeline-version",
                "A2",
            ])
            .args(["--entries", "65536", "-o"])
            .arg(&p)
            .arg(corpus().join("ltt/smp_example")),
    );
    assert_eq!(
        std::fs::metadata(&p).unwrap().len(),
        64 + 64 * 65536 + 1_000_000
    );
    p
}

/// Cut `path` to 64 KiB (inside the ring of `big_a2`'s file).
fn cut_to_64k(path: &Path) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(64 * 1024)
        .unwrap();
}

/// `cmd` started with its inputs mapped (`POLYTRACE_NO_MMAP` unset) and its
/// stderr piped, for [`fails_with_2`].
fn spawn_mapped(cmd: &mut Command) -> std::process::Child {
    cmd.env_remove("POLYTRACE_NO_MMAP")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait for `child`, which must exit 2; its stderr.
fn fails_with_2(mut child: std::process::Child) -> String {
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(2), "status {st:?}, stderr: {err}");
    err
}

/// `dump` of `input` (mapped), with `victim` cut to 64 KB once the first
/// listing bytes arrive (the dump then waits on the full pipe); the exit-2
/// error text and how many listing lines came out.
fn dump_cut_midway(input: &Path, victim: &Path) -> (String, usize) {
    let mut child = spawn_mapped(
        Command::new(bin())
            .arg("dump")
            .arg(input)
            .stdout(Stdio::piped()),
    );
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 4096];
    stdout.read_exact(&mut first).unwrap();
    cut_to_64k(victim);
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    let err = fails_with_2(child);
    let lines = first.iter().chain(&rest).filter(|&&b| b == b'\n').count();
    (err, lines)
}

fn dump(path: &Path, no_mmap: bool) -> std::process::Output {
    let mut c = Command::new(bin());
    c.arg("dump").arg(path).env_remove("POLYTRACE_NO_MMAP");
    if no_mmap {
        c.env("POLYTRACE_NO_MMAP", "1");
    }
    c.output().unwrap()
}

#[test]
fn mapped_and_copied_inputs_list_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let tl = big_a2(dir.path());
    let mapped = dump(&tl, false);
    let copied = dump(&tl, true);
    assert!(mapped.status.success() && copied.status.success());
    assert!(mapped.stdout.len() > 4_000_000);
    assert!(mapped.stdout == copied.stdout, "listings differ");
    // Through stdin (spooled to a temporary file, then mapped) as well.
    let piped = common::output_ok(
        Command::new(bin())
            .args(["dump", "-"])
            .stdin(std::fs::File::open(&tl).unwrap()),
    );
    assert!(piped.stdout == mapped.stdout, "stdin listing differs");
    // An MMV file large enough to be mapped (400 KB, written by our writer
    // from a PCP testsuite archive), against mmvdump too.
    let Some(ts) = common::pcp_testsuite() else {
        return;
    };
    let mmv = dir.path().join("big.mmv");
    common::output_ok(
        Command::new(bin())
            .args(["convert", "-q", "--to", "mmv", "-o"])
            .arg(&mmv)
            .arg(ts.join("archives/20180102")),
    );
    assert!(std::fs::metadata(&mmv).unwrap().len() >= 1 << 16);
    let (a, b) = (dump(&mmv, false), dump(&mmv, true));
    assert!(a.status.success() && a.stdout == b.stdout);
    if let Some(peer) = common::peer("mmvdump") {
        let p = Command::new(peer).arg(&mmv).output().unwrap();
        assert!(p.stdout == a.stdout, "mmvdump differs");
    }
}

#[test]
fn truncated_while_mapped_is_an_error_not_sigbus() {
    let dir = tempfile::tempdir().unwrap();
    let tl = big_a2(dir.path());
    // The listing is written in 1 MB pieces into a 64 KB pipe: once the
    // first bytes arrive, the dump waits in the middle of the ring.
    let (err, lines) = dump_cut_midway(&tl, &tl);
    let name = tl.display().to_string();
    assert!(
        err.starts_with(&format!("polytrace: error: {name}: byte ")),
        "{err}"
    );
    common::assert_has(&err, "the file shrank while it was being read");
    // The listing stopped: the whole ring would be 65,537 lines.
    assert!(lines < 65_537, "{lines} lines");
}

/// A conversion that meets the truncation removes its staging: nothing is
/// written. The timeline is merged with KPI lines from a pipe that we hold
/// open, so the conversion waits (staging made, timeline mapped and read
/// only at its first entry) until we have cut the file and closed the pipe.
#[test]
fn truncated_while_converting_leaves_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let tl = big_a2(dir.path());
    let out = dir.path().join("out.ltt");
    let mut child = spawn_mapped(
        Command::new(bin())
            // The timeline carries its dates (written from LTT): no --tsc-hz,
            // which would be refused as changing nothing.
            .args(["convert"])
            .arg(&tl)
            .args(["-", "--to", "ltt", "-o"])
            .arg(&out)
            .stdin(Stdio::piped()),
    );
    let mut stdin = child.stdin.take().unwrap();
    // One dlt-convert line, earlier than every timeline entry (2016-07-04).
    std::io::Write::write_all(
        &mut stdin,
        b"0 2016/07/04 13:10:00.000000    5071082 005 ECU1 PROC PROC log info V 2 [NEW 1;0;/sbin/init]\n",
    )
    .unwrap();
    let staging = || {
        std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(".out.ltt.polytrace-")
            })
    };
    // Wait for the staging directory (a bound, not a timing assertion).
    let t0 = std::time::Instant::now();
    while !staging() {
        assert!(
            t0.elapsed().as_secs() < 120,
            "no staging directory appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    cut_to_64k(&tl);
    drop(stdin);
    let err = fails_with_2(child);
    common::assert_has(&err, "the file shrank while it was being read");
    assert!(!out.exists());
    assert!(!staging(), "staging left behind");
}

/// A file cut before it is read is refused by the size checks made before
/// any entry is used (no map over a short file is ever read past its end).
#[test]
fn cut_before_reading_is_refused_by_the_size_check() {
    let dir = tempfile::tempdir().unwrap();
    let tl = big_a2(dir.path());
    cut_to_64k(&tl);
    let out = dir.path().join("out.ltt");
    let args = ["convert", "--from", "timeline", "--to", "ltt", "-o"];
    let err = common::pt_exit(2, &args, &[&out, &tl]);
    common::assert_has(&err, "does not fit the file of 65536 bytes");
    assert!(!out.exists());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

/// A copy of the corpus LTT trace: its two tracefiles (1 MB each) are
/// mapped, its empty control files read.
fn smp_copy(dir: &Path) -> PathBuf {
    let src = corpus().join("ltt/smp_example");
    let dst = dir.join("smp");
    for sub in ["info", "eventdefs", "control", "cpu"] {
        std::fs::create_dir_all(dst.join(sub)).unwrap();
        for e in std::fs::read_dir(src.join(sub)).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dst.join(sub).join(e.file_name())).unwrap();
        }
    }
    dst
}

#[test]
fn ltt_mapped_and_copied_list_and_convert_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let smp = smp_copy(dir.path());
    let (mapped, copied) = (dump(&smp, false), dump(&smp, true));
    assert!(mapped.status.success() && copied.status.success());
    assert_eq!(mapped.stdout.len(), 14_896_841);
    assert!(mapped.stdout == copied.stdout, "listings differ");
    let convert = |out: &Path, no_mmap: bool| {
        let mut c = Command::new(bin());
        c.args(["convert", "-q", "--to", "timeline", "-o"])
            .arg(out)
            .arg(&smp)
            .env_remove("POLYTRACE_NO_MMAP");
        if no_mmap {
            c.env("POLYTRACE_NO_MMAP", "1");
        }
        assert!(c.status().unwrap().success());
        std::fs::read(out).unwrap()
    };
    let a = convert(&dir.path().join("a.timeline"), false);
    let b = convert(&dir.path().join("b.timeline"), true);
    assert!(a.len() > 11_000_000 && a == b, "timelines differ");
}

#[test]
fn ltt_tracefile_truncated_while_mapped_is_an_error_not_sigbus() {
    let dir = tempfile::tempdir().unwrap();
    let smp = smp_copy(dir.path());
    // The 15 MB listing goes into a 64 KB pipe: once its first bytes
    // arrive, the dump waits in the first 64 KB of each tracefile's block.
    let cpu1 = smp.join("cpu/1");
    let (err, lines) = dump_cut_midway(&smp, &cpu1);
    assert!(
        err.starts_with(&format!("polytrace: error: {}: byte ", cpu1.display())),
        "{err}"
    );
    common::assert_has(&err, "the file shrank while it was being read");
    // The listing stopped (173,157 lines when whole).
    assert!(lines < 173_157, "{lines} lines");
}
