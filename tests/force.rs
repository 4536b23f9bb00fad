//! `--force` and what is at `-o`: over every write path (convert, batch
//! convert, split, record), every target kind (a file, a directory, a
//! multi-file archive) and every kind of thing at `-o`, nothing polytrace
//! did not write is ever removed, and the exit code says what happened.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// What is at a path: enough to tell that it is still the same thing.
#[derive(Debug, PartialEq, Clone)]
enum Node {
    File(Vec<u8>),
    Dir,
    Link(PathBuf),
    Fifo,
    CharDev(u64),
}

/// Every entry under `root` (not following links).
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Node> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(root).min_depth(1) {
        let e = e.unwrap();
        let md = std::fs::symlink_metadata(e.path()).unwrap();
        let ft = md.file_type();
        let node = if ft.is_symlink() {
            Node::Link(std::fs::read_link(e.path()).unwrap())
        } else if ft.is_dir() {
            Node::Dir
        } else if ft.is_fifo() {
            Node::Fifo
        } else if ft.is_char_device() {
            Node::CharDev(md.rdev())
        } else {
            Node::File(std::fs::read(e.path()).unwrap())
        };
        out.insert(e.path().strip_prefix(root).unwrap().to_path_buf(), node);
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Path_ {
    Convert,
    Batch,
    Split,
    Record,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// One text file (streams into a FIFO or device).
    File,
    /// A directory (CTF).
    Dir,
    /// Several files under a base name (PCP archive).
    Multi,
}

impl Kind {
    fn to(self) -> &'static str {
        match self {
            Kind::File => "csv",
            Kind::Dir => "ctf",
            Kind::Multi => "pcp",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum At {
    File,
    /// A regular file, without --force.
    FileNoForce,
    ForeignDir,
    DirHoldingInput,
    InputsParent,
    Input,
    Fifo,
    Device,
    DanglingLink,
    DanglingLinkNoForce,
}

/// The scene: `in/sub/in.dlt` (the input, beside `keep.txt`), and at `o`
/// the thing under test. Returns the `-o` path.
fn scene(w: &Path, at: At) -> Option<PathBuf> {
    let sub = w.join("in/sub");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::copy(
        common::testdata().join("kpi/kpi-capture.dlt"),
        sub.join("in.dlt"),
    )
    .unwrap();
    std::fs::write(sub.join("keep.txt"), b"keep").unwrap();
    let o = w.join("o");
    Some(match at {
        At::File | At::FileNoForce => {
            std::fs::write(&o, b"precious").unwrap();
            o
        }
        At::ForeignDir => {
            std::fs::create_dir(&o).unwrap();
            std::fs::write(o.join("notes.txt"), b"mine").unwrap();
            o
        }
        At::DirHoldingInput => sub,
        At::InputsParent => w.join("in"),
        At::Input => sub.join("in.dlt"),
        At::Fifo => {
            let c = std::ffi::CString::new(o.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid C path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
            o
        }
        At::Device => {
            if !is_root() {
                return None;
            }
            let c = std::ffi::CString::new(o.as_os_str().as_encoded_bytes()).unwrap();
            // The null device's numbers (1, 3): writing into it is harmless.
            // SAFETY: a valid C path.
            let r = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
            if r != 0 {
                return None;
            }
            o
        }
        At::DanglingLink | At::DanglingLinkNoForce => {
            std::os::unix::fs::symlink(w.join("nowhere"), &o).unwrap();
            o
        }
    })
}

fn force(at: At) -> bool {
    !matches!(at, At::FileNoForce | At::DanglingLinkNoForce)
}

/// The exit code each case must end with, and whether the thing at `-o`
/// is replaced.
fn expected(path: Path_, kind: Kind, at: At) -> (i32, bool) {
    match path {
        // Pieces are `O.000`, ...: what is at `O` itself is never a target.
        Path_::Split => (0, false),
        // The tree goes into OUTDIR, which is made if missing and never
        // replaced: a directory is written into, anything else refused.
        Path_::Batch => match at {
            At::ForeignDir | At::DirHoldingInput | At::InputsParent => (0, false),
            _ => (2, false),
        },
        Path_::Convert | Path_::Record => {
            let input_related = matches!(at, At::DirHoldingInput | At::InputsParent | At::Input);
            match at {
                At::FileNoForce | At::DanglingLinkNoForce => (2, false),
                At::File | At::DanglingLink => (0, kind != Kind::Multi),
                // record has no input: these are foreign directories then.
                _ if input_related && path == Path_::Record && at != At::Input => (2, false),
                // A record's `-o in.dlt` is a plain file it may replace.
                At::Input if path == Path_::Record => (0, kind != Kind::Multi),
                At::Fifo | At::Device if kind == Kind::File => (0, false),
                _ => (2, false),
            }
        }
    }
}

fn run(path: Path_, kind: Kind, at: At, w: &Path, o: &Path) -> Output {
    let mut c = Command::new(common::bin_under_test());
    let input = w.join("in/sub/in.dlt");
    match path {
        Path_::Convert => {
            c.arg("convert").arg(&input);
        }
        Path_::Split => {
            c.arg("convert").arg(&input).args(["--split", "1m"]);
        }
        Path_::Batch => {
            c.arg("convert").arg(w.join("in"));
        }
        Path_::Record => {
            c.args(["record", "--samples", "1", "--interval", "10ms"]);
        }
    }
    c.args(["--to", kind.to(), "-q", "-o"]).arg(o);
    if force(at) {
        c.arg("--force");
    }
    let streams = matches!(path, Path_::Convert | Path_::Record);
    if kind == Kind::File && at == At::Fifo && streams {
        // Someone reads the FIFO, or the writer would wait for ever.
        let rx = read_fifo(o);
        let out = c.output().unwrap();
        if out.status.code() == Some(0) {
            match rx.recv_timeout(std::time::Duration::from_secs(10)) {
                Ok(n) => assert!(n > 0, "nothing came through the FIFO"),
                Err(_) => panic!("nothing was written into the FIFO"),
            }
        } else {
            // Unblock the reader.
            let _ = std::fs::OpenOptions::new().write(true).open(o);
        }
        return out;
    }
    c.output().unwrap()
}

/// Read a FIFO on another thread; its length comes back on the channel
/// (never, if nothing opens the FIFO to write: the thread is then left).
fn read_fifo(p: &Path) -> std::sync::mpsc::Receiver<usize> {
    let (tx, rx) = std::sync::mpsc::channel();
    let p = p.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(std::fs::read(p).map(|b| b.len()).unwrap_or(0));
    });
    rx
}

#[test]
fn force_never_removes_what_polytrace_did_not_write() {
    let paths = [Path_::Convert, Path_::Batch, Path_::Split, Path_::Record];
    let kinds = [Kind::File, Kind::Dir, Kind::Multi];
    let ats = [
        At::File,
        At::FileNoForce,
        At::ForeignDir,
        At::DirHoldingInput,
        At::InputsParent,
        At::Input,
        At::Fifo,
        At::Device,
        At::DanglingLink,
        At::DanglingLinkNoForce,
    ];
    let mut failures = Vec::new();
    let mut ran = 0;
    for path in paths {
        for kind in kinds {
            for at in ats {
                // Batch and split read a tree or cut pieces: -o is never
                // the input file itself there.
                if at == At::Input && matches!(path, Path_::Batch) {
                    continue;
                }
                let dir = tempfile::tempdir().unwrap();
                let w = dir.path();
                let Some(o) = scene(w, at) else {
                    eprintln!("skipping {at:?}: not root");
                    continue;
                };
                let before = snapshot(w);
                let out = run(path, kind, at, w, &o);
                ran += 1;
                let after = snapshot(w);
                let err = String::from_utf8_lossy(&out.stderr);
                let case = format!("{path:?} --to {} -o {at:?}", kind.to());
                let (code, replaced) = expected(path, kind, at);
                if out.status.code() != Some(code) {
                    failures.push(format!(
                        "{case}: exit {:?}, want {code}: {err}",
                        out.status.code()
                    ));
                }
                if code == 2 && !err.contains(&o.display().to_string()) {
                    failures.push(format!("{case}: the refusal does not name -o: {err}"));
                }
                let o_rel = o.strip_prefix(w).unwrap();
                for (p, node) in &before {
                    if replaced && p.starts_with(o_rel) {
                        continue;
                    }
                    if after.get(p) != Some(node) {
                        failures.push(format!("{case}: {} was changed or removed", p.display()));
                    }
                }
                if replaced && matches!(after.get(o_rel), None | Some(Node::Link(_))) {
                    failures.push(format!("{case}: -o was not written"));
                }
                if let Some(stray) = after
                    .keys()
                    .find(|p| {
                        p.to_string_lossy().contains(".polytrace-") && !before.contains_key(*p)
                    })
                    .filter(|p| !p.to_string_lossy().ends_with(".manifest.polytrace"))
                {
                    failures.push(format!("{case}: left {}", stray.display()));
                }
            }
        }
    }
    assert!(ran >= 100, "only {ran} cases ran");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `convert INPUT ARGS… -q -o O`, which must exit with `code`; its stderr.
fn convert(code: i32, args: &[&str], input: &Path, o: &Path) -> String {
    let (got, _, err) = common::outcome(
        Command::new(common::bin_under_test())
            .arg("convert")
            .arg(input)
            .args(args)
            .args(["-q", "-o"])
            .arg(o),
    );
    assert_eq!(got, code, "convert {args:?} -o {}: {err}", o.display());
    err
}

/// A directory output polytrace wrote is replaced by `--force` with an
/// output of the same kind, and by nothing else: not by another kind, not
/// once anything was added to it, not when it is the input.
#[test]
fn force_replaces_only_a_previous_output_of_the_same_kind() {
    let (dir, src) = common::scratch_and_corpus("kpi/kpi-capture.dlt");
    let l = dir.path().join("trace");
    convert(0, &["--to", "ltt"], &src, &l);
    let first = snapshot(&l);
    // Same kind: replaced.
    convert(0, &["--to", "ltt", "--force"], &src, &l);
    let second = snapshot(&l);
    assert_eq!(
        second.keys().collect::<Vec<_>>(),
        first.keys().collect::<Vec<_>>()
    );
    // Another kind: refused.
    let err = convert(2, &["--to", "ctf", "--force"], &src, &l);
    common::assert_has(&err, "not ctf");
    // The input itself (an LTT trace read back into LTT): refused.
    convert(2, &["--to", "ltt", "--force"], &l, &l);
    assert_eq!(snapshot(&l), second);
    // Something added that polytrace did not write: refused, kept.
    std::fs::write(l.join("cpu/notes.txt"), b"mine").unwrap();
    let err = convert(2, &["--to", "ltt", "--force"], &src, &l);
    common::assert_has(&err, "cpu/notes.txt");
    assert_eq!(std::fs::read(l.join("cpu/notes.txt")).unwrap(), b"mine");
    // A directory of the same shape polytrace did not write: refused.
    let copy = dir.path().join("copy");
    common::output_ok(Command::new("cp").arg("-r").arg(&l).arg(&copy));
    std::fs::remove_file(copy.join("cpu/notes.txt")).unwrap();
    let err = convert(2, &["--to", "ltt", "--force"], &src, &copy);
    common::assert_has(&err, "did not write");
}

/// A text output into a FIFO carries the same bytes as into a file.
#[test]
fn text_output_streams_into_a_fifo() {
    let (dir, src) = common::scratch_and_corpus("kpi/kpi-capture.dlt");
    let f = dir.path().join("f.json");
    convert(0, &["--to", "chrome-json"], &src, &f);
    let fifo = dir.path().join("p");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let rx = read_fifo(&fifo);
    convert(0, &["--to", "chrome-json", "--force"], &src, &fifo);
    let n = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("nothing was written into the FIFO");
    assert_eq!(n as u64, std::fs::metadata(&f).unwrap().len());
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
}
