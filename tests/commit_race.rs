//! A multi-file output is committed as one unit: eight runs with `--force`
//! and different options, at once, to one PCP base name or one
//! `OUT.csv` + `OUT.events.csv` pair, always leave one run's complete set.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn exe() -> PathBuf {
    std::env::var_os("POLYTRACE_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(common::bin)
}

const TRIALS: usize = 20;
const WRITERS: usize = 8;

/// Options that make each writer's output differ.
const VARIANTS: [&[&str]; 4] = [
    &[],
    &["--exclude-metric", "kpi.proc.*"],
    &["--exclude-metric", "kpi.irq.*"],
    &["--exclude-metric", "kpi.proc.rss"],
];

fn convert(to: &str, extra: &[&str], variant: &[&str], o: &Path) -> Command {
    let mut c = Command::new(exe());
    c.arg("convert")
        .arg(common::testdata().join("kpi/B-buf400.dlt"))
        .args(["--to", to, "-q", "--force"])
        .args(extra)
        .args(variant)
        .arg("-o")
        .arg(o);
    c
}

/// The members' bytes, in member order.
fn members(base: &Path, suffixes: &[&str]) -> Vec<Vec<u8>> {
    suffixes
        .iter()
        .map(|s| {
            let mut p = base.as_os_str().to_owned();
            p.push(s);
            std::fs::read(PathBuf::from(p)).unwrap_or_default()
        })
        .collect()
}

/// A PCP archive's members each start with a label that carries the
/// writing process's id (bytes 8..12): the same in the three members of
/// one run. Returned apart, the members without it.
fn split_pid(to: &str, mut m: Vec<Vec<u8>>) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut pids = Vec::new();
    if to == "pcp" {
        for b in &mut m {
            if b.len() >= 12 {
                pids.push(b[8..12].to_vec());
                b[8..12].fill(0);
            }
        }
    }
    (m, pids)
}

fn race(to: &str, extra: &[&str], name: &str, suffixes: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    // What each variant writes alone.
    let refs: Vec<Vec<Vec<u8>>> = VARIANTS
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let o = dir.path().join(format!("ref{i}{name}"));
            let out = convert(to, extra, v, &o).output().unwrap();
            assert!(out.status.success(), "{out:?}");
            let base = dir.path().join(format!("ref{i}"));
            split_pid(to, members(&base, suffixes)).0
        })
        .collect();
    for (i, r) in refs.iter().enumerate() {
        for (j, s) in refs.iter().enumerate().skip(i + 1) {
            assert!(r != s, "variants {i} and {j} write the same output");
        }
    }
    let mut mixed = Vec::new();
    for trial in 0..TRIALS {
        let o = dir.path().join(format!("out{name}"));
        let kids: Vec<_> = (0..WRITERS)
            .map(|k| {
                convert(to, extra, VARIANTS[k % VARIANTS.len()], &o)
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut k in kids {
            let st = k.wait().unwrap();
            assert_eq!(st.code(), Some(0), "trial {trial}");
        }
        let (got, pids) = split_pid(to, members(&dir.path().join("out"), suffixes));
        if !refs.contains(&got) || pids.windows(2).any(|w| w[0] != w[1]) {
            mixed.push(trial);
        }
        if to == "pcp" && trial == 0 {
            if let Some(pmdumplog) = common::peer("pmdumplog") {
                let out = Command::new(pmdumplog)
                    .arg("-a")
                    .arg(dir.path().join("out"))
                    .output()
                    .unwrap();
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(out.status.success() && !err.contains("Corrupt"), "{err}");
            }
        }
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".polytrace-"))
            .collect();
        assert!(left.is_empty(), "trial {trial} left {left:?}");
    }
    assert!(
        mixed.is_empty(),
        "{} of {TRIALS} trials left a mix of runs' members: {mixed:?}",
        mixed.len()
    );
}

#[test]
fn concurrent_pcp_writers_leave_one_runs_archive() {
    race("pcp", &[], "", &[".meta", ".0", ".index"]);
}

#[test]
fn concurrent_csv_writers_leave_one_runs_pair() {
    race("csv", &["--events"], ".csv", &[".csv", ".events.csv"]);
}
