//! Inputs that can be read only once (a FIFO, `<(…)`) read as the same
//! bytes from a file do: detected from the bytes read, never opened twice.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn exe() -> PathBuf {
    std::env::var_os("POLYTRACE_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(common::bin)
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// Run, failing after `secs` instead of hanging (a second open of a FIFO
/// that its writer has closed waits for ever).
fn run_within(cmd: &mut Command, secs: u64) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish in {secs} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// `args` over the file, then over a FIFO fed the same bytes once.
fn same_through_fifo(args: &[&str], file: &Path, out_of: impl Fn(&Output, &str) -> Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let direct = run_within(Command::new(exe()).args(args).arg(file), 30);
    assert!(direct.status.success(), "{direct:?}");
    let want = out_of(&direct, "d");
    let fifo = dir.path().join("p");
    mkfifo(&fifo);
    let (f, bytes) = (fifo.clone(), std::fs::read(file).unwrap());
    std::thread::spawn(move || {
        use std::io::Write;
        let mut w = std::fs::OpenOptions::new().write(true).open(f).unwrap();
        let _ = w.write_all(&bytes);
    });
    let piped = run_within(Command::new(exe()).args(args).arg(&fifo), 30);
    let err = String::from_utf8_lossy(&piped.stderr);
    assert!(piped.status.success(), "{err}");
    assert!(
        want == out_of(&piped, "p"),
        "{args:?}: the FIFO read differs from the file"
    );
}

#[test]
fn info_reads_a_fifo_once() {
    let file = common::testdata().join("kpi/B-buf400.dlt");
    same_through_fifo(&["info"], &file, |o, _| {
        // The first line names the input.
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        text.lines()
            .skip(1)
            .collect::<Vec<_>>()
            .join("\n")
            .into_bytes()
    });
}

#[test]
fn convert_reads_a_fifo_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    let file = common::testdata().join("kpi/kpi-capture.dlt");
    for to in ["csv", "pcp"] {
        let d = d.clone();
        let o = d.join(format!("o.{to}"));
        let args = [
            "convert",
            "--to",
            to,
            "-q",
            "--force",
            "-o",
            o.to_str().unwrap(),
        ];
        same_through_fifo(&args, &file, move |_, _| {
            let mut all = Vec::new();
            let mut names: Vec<_> = std::fs::read_dir(&d)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .collect();
            names.sort();
            for n in names.iter().filter(|n| n.is_file()) {
                let mut b = std::fs::read(n).unwrap();
                // A PCP label carries the writer's process id.
                if to == "pcp" && b.len() > 12 {
                    b[8..12].fill(0);
                }
                all.extend(b);
            }
            all
        });
    }
}
