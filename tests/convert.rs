//! Any → any: every reader into every writer, each output read back by
//! polytrace and accepted by the real peer tool where one exists.
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn sources() -> Vec<(&'static str, PathBuf)> {
    let c = common::corpus();
    vec![
        ("kpi", c.join("kpi/kpi-capture.convert-a.txt")),
        ("dlt", c.join("kpi/kpi-capture.dlt")),
        ("mmv", c.join("mmv/research_v2.mmv")),
        ("pcp", c.join("pcp/live_v3")),
        ("ltt", c.join("ltt/smp_example")),
        ("timeline", c.join("timeline/a2-small-wrapped.dat")),
    ]
}

const TARGETS: [&str; 6] = ["kpi", "dlt", "mmv", "pcp", "ltt", "timeline"];

fn run(cmd: &mut Command) -> (i32, String) {
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The peer tool's verdict on an output, where a peer exists.
fn peer_accepts(fmt: &str, out: &Path) -> Option<(bool, String)> {
    let check = |tool: &str, args: &[&str]| -> Option<(bool, String)> {
        let t = common::peer(tool)?;
        let o = Command::new("timeout")
            .arg("60")
            .arg(t)
            .args(args)
            .arg(out)
            .output()
            .unwrap();
        let msg = String::from_utf8_lossy(&o.stderr).into_owned();
        // libpcp reports some archive botches on stderr with exit 0.
        Some((o.status.success() && !msg.contains("Botch"), msg))
    };
    match fmt {
        "pcp" => {
            let (ok, msg) = check("pmlogcheck", &[])?;
            if !ok {
                return Some((false, msg));
            }
            check("pmdumplog", &["-a"])
        }
        "mmv" => check("mmvdump", &[]),
        "dlt" => check("dlt-convert", &["-a"]),
        _ => None,
    }
}

#[test]
fn every_reader_into_every_writer() {
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (src, input) in sources() {
        for dst in TARGETS {
            let out = dir.path().join(format!("{src}-to-{dst}"));
            let mut args = vec!["convert", "-q", "--to", dst];
            if src == "timeline" && matches!(dst, "pcp" | "dlt") {
                // Cycles have no date: refused without --time-origin (and
                // --tsc-hz), nothing written; then converted with them.
                let (code, err) = run(Command::new(common::bin())
                    .args(&args)
                    .arg("-o")
                    .arg(&out)
                    .arg(&input));
                if code != 2 || !err.contains("--time-origin") || out.exists() {
                    failures.push(format!("{src} -> {dst}: no origin: exit {code}: {err}"));
                }
                args.extend(["--tsc-hz", "2.5e9", "--time-origin", "2026-11-22T03:43:55Z"]);
            }
            let (code, err) = run(Command::new(common::bin())
                .args(&args)
                .arg("-o")
                .arg(&out)
                .arg(&input));
            // A target that holds none of the source: an error, no file.
            if code == 2 && err.contains("nothing to write") && !out.exists() {
                continue;
            }
            // 0 = nothing lost, 1 = something dropped (listed on stderr).
            if code > 1 {
                failures.push(format!("{src} -> {dst}: convert exit {code}: {err}"));
                continue;
            }
            if code == 1 && !err.contains("dropped") {
                failures.push(format!("{src} -> {dst}: exit 1 without a drop list: {err}"));
            }
            let readable = out.exists()
                && std::fs::metadata(&out)
                    .map(|m| m.is_dir() || m.len() > 0)
                    .unwrap_or(false)
                || out.with_extension("meta").exists();
            if readable {
                let (rc, err) = run(Command::new(common::bin())
                    .args(["info", "--from", dst])
                    .arg(&out));
                if rc != 0 {
                    failures.push(format!("{src} -> {dst}: read back exit {rc}: {err}"));
                }
            }
            if let Some((ok, msg)) = peer_accepts(dst, &out) {
                let empty = !readable;
                // An empty .dlt (nothing KPI-like in the source) is not a dlt-convert input.
                let tolerated = empty && dst == "dlt";
                if !ok && !tolerated {
                    failures.push(format!("{src} -> {dst}: peer rejects: {msg}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn instance_names_survive_in_an_ltt_trace() {
    // Indom membership travels as indom.indom_<id> events, so a KPI capture
    // written as LTT keeps its process names and drops nothing but the DLT
    // ticks (an LTT counter is another clock).
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("kpi.ltt");
    let src = common::corpus().join("kpi/kpi-capture.convert-a.txt");
    let (code, err) = run(Command::new(common::bin())
        .args(["convert", "--to", "ltt", "-o"])
        .arg(&out)
        .arg(&src));
    assert_eq!(code, 0, "{err}");
    let drops: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("polytrace: dropped:"))
        .collect();
    assert_eq!(
        drops,
        ["polytrace: dropped: 9724 raw clocks: the format's raw clock is another clock: derived from the time instead"],
        "{err}"
    );
    let o = Command::new(common::bin())
        .args(["dump", "--no-framing"])
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.lines().any(|l| l.starts_with("indom.")
            && l.contains("instance = 14466, present = 1, name = \"14466 perl-title; with spaces;and;semis 1\"")),
        "no indom event for pid 14466"
    );
}
