//! LTT traces given as a .tar.gz built by the system `tar` and `gzip`:
//! sparse members, hard links, refused members, gzip bombs, multi-member
//! gzip, and the unpacking directory under signals.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A scratch folder with a copy of smp_example (reshaped, e.g. into an
/// archive, by a shell script) and a private TMPDIR.
struct Scratch {
    _dir: tempfile::TempDir,
    root: PathBuf,
    tmp: PathBuf,
}

/// A scratch whose copy the shell `script`, run in its root, reshaped.
fn scratch(script: &str) -> Scratch {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let trace = root.join("smp_example");
    copy_dir(&common::testdata().join("ltt/smp_example"), &trace);
    let tmp = root.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    sh(&root, script);
    Scratch {
        _dir: dir,
        root,
        tmp,
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

fn sh(dir: &Path, script: &str) {
    let st = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(st.success(), "{script}");
}

/// `polytrace ARGS` in the scratch's root, with TMPDIR set to its own.
fn polytrace_in(s: &Scratch, args: &[&str]) -> Command {
    let mut cmd = Command::new(common::bin());
    cmd.args(args).current_dir(&s.root).env("TMPDIR", &s.tmp);
    cmd
}

/// `polytrace ARGS` ([`polytrace_in`]), which must exit with `code`:
/// stdout and stderr.
fn run(s: &Scratch, code: i32, args: &[&str]) -> (String, String) {
    exits(code, args, common::outcome(&mut polytrace_in(s, args)))
}

/// The stdout and stderr of an outcome whose exit code must be `code`.
fn exits(code: i32, args: &[&str], (got, out, err): (i32, String, String)) -> (String, String) {
    assert_eq!(got, code, "{args:?}: {err}");
    (out, err)
}

fn events(info: &str) -> u64 {
    info.lines()
        .find_map(|l| l.trim().strip_prefix("events").map(|v| v.trim()))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no events line in\n{info}"))
}

fn tmp_is_empty(s: &Scratch) {
    let left: Vec<_> = std::fs::read_dir(&s.tmp).unwrap().flatten().collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}

#[test]
fn sparse_archive_of_the_whole_trace_gives_every_event() {
    // Zero runs made holes, so `tar -S` stores the tracefiles as GNU
    // sparse members (a copy without holes is stored as plain files).
    let s = scratch(
        "for f in smp_example/cpu/* smp_example/control/*; do \
         cp --sparse=always $f $f.s && mv $f.s $f; done && tar -Sczf s.tar.gz smp_example",
    );
    let (dir_info, _) = run(&s, 0, &["info", "smp_example"]);
    assert_eq!(events(&dir_info), 173_151);
    let (out, e) = run(&s, 0, &["info", "s.tar.gz"]);
    assert_eq!(events(&out), 173_151, "{e}");
    tmp_is_empty(&s);
}

#[test]
fn hard_link_member_is_read_as_its_target() {
    // cpu/1 becomes a second name of cpu/0: tar stores it as a link member.
    let s = scratch(
        "rm smp_example/cpu/1 && ln smp_example/cpu/0 smp_example/cpu/1 \
         && tar -czf l.tar.gz smp_example",
    );
    let (dir_info, _) = run(&s, 0, &["info", "smp_example"]);
    let (out, e) = run(&s, 0, &["info", "l.tar.gz"]);
    assert_eq!(events(&out), events(&dir_info), "{e}");
}

#[test]
fn symlink_member_is_damage_named_by_archive_and_member() {
    let s = scratch(
        "rm smp_example/cpu/1 && ln -s 0 smp_example/cpu/1 && tar -czf y.tar.gz smp_example",
    );
    let (_, e) = run(&s, 2, &["info", "y.tar.gz"]);
    common::assert_has(&e, "y.tar.gz:smp_example/cpu/1");
    common::assert_has(&e, "symlink");
    assert!(!e.contains(s.tmp.to_str().unwrap()), "{e}");
    let out = s.root.join("o.json");
    let to_json = [
        "convert",
        "y.tar.gz",
        "--to",
        "chrome-json",
        "--salvage",
        "-o",
    ];
    let (_, e) = run(&s, 1, &[&to_json[..], &[out.to_str().unwrap()]].concat());
    assert_eq!(e.matches("y.tar.gz:smp_example/cpu/1").count(), 1, "{e}");
    tmp_is_empty(&s);
}

/// Run under a 200 MB file-size limit: a run that writes more is killed.
fn run_limited(s: &Scratch, code: i32, args: &[&str]) -> (String, String) {
    use std::os::unix::process::CommandExt;
    let mut cmd = polytrace_in(s, args);
    // SAFETY: setrlimit is async-signal-safe; the struct is a live local.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 200_000_000,
                rlim_max: 200_000_000,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    exits(code, args, common::outcome(&mut cmd))
}

#[test]
fn bomb_in_an_ignored_member_is_not_unpacked() {
    let s = scratch(
        "head -c 300000000 /dev/zero > smp_example/junk.bin && tar -czf b.tar.gz smp_example",
    );
    let (out, e) = run_limited(&s, 0, &["info", "b.tar.gz"]);
    assert_eq!(events(&out), 173_151);
    common::assert_has(&e, "b.tar.gz:smp_example/junk.bin");
    tmp_is_empty(&s);
}

#[test]
fn bomb_in_a_tracefile_stops_at_the_cap() {
    let s = scratch(
        // Only the bomb's bytes in the archive: 290 kB, so the cap is
        // 256 × 290 kB + 64 MiB, below the 300 MB the member holds.
        "rm smp_example/cpu/* smp_example/control/* \
         && head -c 300000000 /dev/zero > smp_example/cpu/7 && tar -czf b.tar.gz smp_example",
    );
    let (_, e) = run_limited(&s, 2, &["info", "b.tar.gz"]);
    common::assert_has(&e, "b.tar.gz:smp_example/cpu/7");
    common::assert_has(&e, "times the archive's size");
    tmp_is_empty(&s);
}

#[test]
fn multi_member_gzip_is_read_whole() {
    // The tar stream cut in two, each half its own gzip member.
    let s = scratch(
        "tar -cf m.tar smp_example && head -c 700000 m.tar | gzip -c > m.tar.gz \
         && tail -c +700001 m.tar | gzip -c >> m.tar.gz",
    );
    let (out, e) = run(&s, 0, &["info", "m.tar.gz"]);
    assert_eq!(events(&out), 173_151, "{e}");
}

#[test]
fn unpacking_directory_is_private_and_removed_on_sigterm() {
    // Incompressible data in a tracefile makes the unpacking take a while.
    let s = scratch(
        "head -c 150000000 /dev/urandom > smp_example/cpu/5 && tar -czf r.tar.gz smp_example",
    );
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        let mut child = polytrace_in(&s, &["info", "r.tar.gz"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        let seen = loop {
            let found = std::fs::read_dir(&s.tmp).unwrap().flatten().next();
            if let Some(d) = found {
                // The unpacked cpu/5 growing shows the unpacking under way.
                if std::fs::metadata(d.path().join("smp_example/cpu/5")).is_ok() {
                    break Some(d.path());
                }
            }
            if start.elapsed() > Duration::from_secs(30) || child.try_wait().unwrap().is_some() {
                break None;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        let dir = seen.expect("no unpacking directory seen while the run was alive");
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(child.id() as libc::pid_t, sig);
        }
        let st = child.wait().unwrap();
        assert_eq!(mode, 0o700, "mode of {}", dir.display());
        assert!(!st.success());
        tmp_is_empty(&s);
    }
}

#[test]
fn fifo_member_is_damage() {
    let s = scratch("mkfifo smp_example/cpu/3 && tar -czf f.tar.gz smp_example");
    let (_, e) = run(&s, 2, &["info", "f.tar.gz"]);
    common::assert_has(&e, "f.tar.gz:smp_example/cpu/3");
    common::assert_has(&e, "FIFO");
    let (out, e) = run(&s, 1, &["info", "--salvage", "f.tar.gz"]);
    assert_eq!(events(&out), 173_151);
    assert_eq!(e.matches("f.tar.gz:smp_example/cpu/3").count(), 1, "{e}");
    tmp_is_empty(&s);
}
