//! The machine failing is an error, never damage: out of file descriptors
//! or memory ends the run with exit 2 and nothing written. Also what a
//! run leaves for the next one (stale staging) and how `record` ends on
//! SIGHUP.

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Convert the corpus LTT trace to Chrome JSON at `o`, with a resource
/// limit set in the child.
fn limited(resource: libc::__rlimit_resource_t, limit: u64, o: &Path) -> Option<Output> {
    let input = common::testdata().join("ltt/smp_example");
    let mut c = Command::new(common::bin_under_test());
    c.arg("convert")
        .arg(input)
        .args(["--to", "chrome-json", "-q", "-o"])
        .arg(o);
    // SAFETY: setrlimit is async-signal-safe; nothing else runs in the child.
    unsafe {
        c.pre_exec(move || {
            let r = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(resource, &r) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    // Too little to even start the program: nothing to judge.
    c.output().ok()
}

fn staging_left(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".polytrace-"))
        .collect()
}

/// Every descriptor limit from too few to enough: exit 0 with the whole
/// output, or exit 2 with nothing; never "salvaged" (exit 1), never a
/// claim that the input holds nothing.
#[test]
fn out_of_file_descriptors_is_an_error_not_damage() {
    let dir = tempfile::tempdir().unwrap();
    let mut codes = Vec::new();
    for n in 4..=20u64 {
        let o = dir.path().join(format!("x{n}.json"));
        let Some(out) = limited(libc::RLIMIT_NOFILE, n, &o) else {
            continue;
        };
        let err = String::from_utf8_lossy(&out.stderr);
        let code = out.status.code();
        codes.push((n, code));
        match code {
            Some(0) => assert!(o.is_file(), "limit {n}: exit 0 without output"),
            Some(2) => {
                assert!(!o.exists(), "limit {n}: exit 2 but {} written", o.display());
                assert!(!err.contains("nothing to write"), "limit {n}: {err}");
                assert!(!err.contains("salvaged"), "limit {n}: {err}");
            }
            _ => panic!("limit {n}: exit {code:?}: {err}"),
        }
        assert!(staging_left(dir.path()).is_empty(), "limit {n}");
    }
    assert!(codes.iter().any(|(_, c)| *c == Some(2)), "{codes:?}");
    assert!(codes.iter().any(|(_, c)| *c == Some(0)), "{codes:?}");
}

/// Address-space limits from too small to enough: exit 0 or exit 2 with
/// nothing written; never an abort (134) or a panic (101).
#[test]
fn out_of_memory_is_an_error_not_an_abort() {
    let dir = tempfile::tempdir().unwrap();
    let mut codes = Vec::new();
    // Below its own size and a few MB of libraries and stack the program
    // cannot even be loaded (it dies before main).
    let least = (std::fs::metadata(common::bin()).unwrap().len() >> 20) + 6;
    for mb in (least.max(8)..=least.max(8) + 32).step_by(2) {
        let o = dir.path().join(format!("v{mb}.json"));
        let Some(out) = limited(libc::RLIMIT_AS, mb << 20, &o) else {
            continue;
        };
        let err = String::from_utf8_lossy(&out.stderr);
        let code = out.status.code();
        if code == Some(127) && err.contains("error while loading shared libraries") {
            continue;
        }
        codes.push((mb, code));
        match code {
            Some(0) => assert!(o.is_file(), "{mb} MB: exit 0 without output"),
            Some(2) => assert!(!o.exists(), "{mb} MB: exit 2 but output written"),
            _ => panic!("{mb} MB: exit {code:?} ({:?}): {err}", out.status),
        }
    }
    assert!(codes.iter().any(|(_, c)| *c == Some(2)), "{codes:?}");
}

/// Staging a killed run left beside the output goes with the next write
/// to that output, and the run says so.
#[test]
fn stale_staging_is_removed_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    // A process id that no longer exists: a child that has ended.
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let stale = dir.path().join(format!(".out.csv.polytrace-{pid}-AbCdEf"));
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("out.csv"), vec![b'x'; 4096]).unwrap();
    let o = dir.path().join("out.csv");
    let src = common::testdata().join("kpi/kpi-capture.dlt");
    let err = common::exit_under_test(0, &["convert", "--to", "csv", "-o"], &[&o, &src]);
    assert!(!stale.exists());
    let name = stale.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        err.lines()
            .any(|l| l.contains("removed") && l.contains(&name)),
        "{err}"
    );
    // Staging of a live process is left alone.
    let live = dir
        .path()
        .join(format!(".out.csv.polytrace-{}-XyZ", std::process::id()));
    std::fs::create_dir(&live).unwrap();
    common::exit_under_test(
        0,
        &["convert", "--to", "csv", "--force", "-q", "-o"],
        &[&o, &src],
    );
    assert!(live.is_dir());
}

/// SIGHUP (a closed terminal) saves the recording as SIGINT does.
#[test]
fn record_saves_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("r.csv");
    let child = Command::new(common::bin_under_test())
        .args(["record", "--interval", "20ms", "--to", "csv", "-o"])
        .arg(&o)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(600));
    // SAFETY: signals our own child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGHUP);
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{:?}: {err}", out.status);
    assert!(err.contains("stopped by SIGHUP"), "{err}");
    let text = std::fs::read_to_string(&o).unwrap();
    assert!(text.lines().count() > 1, "{text}");
    assert!(staging_left(dir.path()).is_empty());
}
