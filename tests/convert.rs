//! Any → any: every reader into every writer, each output read back by
//! polytrace and accepted by the real peer tool where one exists.
mod common;

use common::pt;
use std::path::Path;
use std::process::Command;

const TARGETS: [&str; 6] = ["kpi", "dlt", "mmv", "pcp", "ltt", "timeline"];

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
        "dlt" => dlt_peer_count(out),
        _ => None,
    }
}

/// The pairs that stop: the source has nothing the target can hold, so
/// `convert` exits 2 naming what is missing and writes nothing.
const REFUSED: [(&str, &str, &str); 3] = [
    ("mmv", "kpi", "no process data for KPI lines"),
    ("ltt", "kpi", "no process data for KPI lines"),
    ("timeline", "kpi", "no process data for KPI lines"),
];

#[test]
fn every_reader_into_every_writer() {
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut table = String::new();
    for (src, input) in common::sources() {
        for dst in TARGETS {
            let out = dir.path().join(format!("{src}-to-{dst}"));
            let mut args = vec!["convert", "-q", "--to", dst];
            let run = |args: &[&str]| pt(&[args, &["-o"]].concat(), &[&out, &input]);
            if src == "timeline" && matches!(dst, "pcp" | "dlt") {
                // Cycles have no date: refused without --time-origin (and
                // --tsc-hz), nothing written; then converted with them.
                let (code, _, err) = run(&args);
                if code != 2 || !err.contains("--time-origin") || out.exists() {
                    failures.push(format!("{src} -> {dst}: no origin: exit {code}: {err}"));
                }
                args.extend(["--tsc-hz", "2.5e9", "--time-origin", "2026-11-22T03:43:55Z"]);
            }
            let (code, _, err) = run(&args);
            let exists = out.exists() || out.with_extension("meta").exists();
            let refused = REFUSED.iter().find(|(s, d, _)| *s == src && *d == dst);
            table.push_str(&format!(
                "{src:>8} -> {dst:<8} {}\n",
                if code == 2 { "refused" } else { "written" }
            ));
            if let Some((_, _, why)) = refused {
                // Exit 2, the reason and the input named, nothing left.
                if code != 2 || !err.contains(why) || !err.contains(&*input.to_string_lossy()) {
                    failures.push(format!(
                        "{src} -> {dst}: want exit 2 ({why}), got {code}: {err}"
                    ));
                }
                if exists {
                    failures.push(format!("{src} -> {dst}: refused but left an output"));
                }
                continue;
            }
            // 0 = done (format-inherent loss summarised), 1 = salvaged.
            if code > 1 {
                failures.push(format!("{src} -> {dst}: convert exit {code}: {err}"));
                continue;
            }
            let nonempty = out.is_dir()
                || std::fs::metadata(&out).is_ok_and(|m| m.len() > 0)
                || out.with_extension("meta").exists();
            if !nonempty {
                failures.push(format!("{src} -> {dst}: empty or missing output"));
                continue;
            }
            let (rc, _, err) = pt(&["info", "--from", dst], &[&out]);
            if rc != 0 {
                failures.push(format!("{src} -> {dst}: read back exit {rc}: {err}"));
            }
            if let Some((ok, msg)) = peer_accepts(dst, &out) {
                if !ok {
                    failures.push(format!("{src} -> {dst}: peer rejects: {msg}"));
                }
            }
        }
    }
    eprint!("{table}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(table.matches("refused").count(), REFUSED.len(), "{table}");
}

/// dlt-convert must list every record of a `.dlt` polytrace wrote, with the
/// same count polytrace's own listing has.
fn dlt_peer_count(out: &Path) -> Option<(bool, String)> {
    let t = common::peer("dlt-convert")?;
    let o = Command::new(t).arg("-a").arg(out).output().unwrap();
    let theirs = o.stdout.iter().filter(|&&b| b == b'\n').count();
    let ours = Command::new(common::bin())
        .arg("dump")
        .arg(out)
        .output()
        .unwrap()
        .stdout
        .iter()
        .filter(|&&b| b == b'\n')
        .count();
    Some((
        o.status.success() && theirs == ours && theirs > 0,
        format!(
            "dlt-convert exit {:?}, {theirs} lines, ours {ours}: {}",
            o.status.code(),
            String::from_utf8_lossy(&o.stderr)
        ),
    ))
}

#[test]
fn nothing_to_write_is_an_error_and_leaves_nothing() {
    let (dir, live) = common::scratch_and_corpus("pcp/live_v3");
    // An empty window (--begin past the end) into PCP: exit 2, no archive.
    let out = dir.path().join("empty");
    let err = common::pt_exit(
        2,
        &[
            "convert",
            "--to",
            "pcp",
            "--begin",
            "2100-01-01T00:00:00Z",
            "-o",
        ],
        &[&out, &live],
    );
    assert!(
        err.contains("nothing to write in") && err.contains("--begin/--end"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // The same for every writer, and for DLT from a source with only
    // definitions in the window.
    for to in ["kpi", "dlt", "mmv", "ltt", "timeline"] {
        let out = dir.path().join(format!("empty-{to}"));
        let (code, _, err) = pt(
            &["convert", "--to", to, "--end", "1970-01-02T00:00:00Z", "-o"],
            &[&out, &live],
        );
        assert_eq!(code, 2, "{to}: {err}");
        assert!(err.contains("nothing to write"), "{to}: {err}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // Data the archive cannot hold (one untyped DLT message: an annotation)
    // is no archive either: pmdumplog rejects one without records.
    use polytrace::formats::dlt::layout::{put_record, RecordSpec};
    let mut rec = Vec::new();
    put_record(
        &mut rec,
        &RecordSpec {
            secs: 1_700_000_000,
            usecs: 0,
            ecu: *b"ECU1",
            mcnt: 0,
            session: 1,
            tmsp: 1,
            msin: 0x41,
            noar: 1,
            apid: *b"APP\0",
            ctid: *b"CTX\0",
            // Type info 0x8000 (a string coding, no type): not typed, kept
            // as an annotation.
            payload: &[0, 0x80, 0, 0, 1, 2],
        },
    );
    let src = dir.path().join("untyped.dlt");
    std::fs::write(&src, &rec).unwrap();
    let out = dir.path().join("untyped");
    let (code, _, err) = pt(&["convert", "--to", "pcp", "-o"], &[&out, &src]);
    assert_eq!(code, 2, "{err}");
    common::assert_has(&err, "nothing to write as a PCP archive in");
    std::fs::remove_file(&src).unwrap();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // A batch over a mixed tree: what has no process data is skipped, with
    // its reason, and the rest converts.
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    common::copy_corpus("mmv/research_v1.mmv", &tree.join("a.mmv"));
    common::copy_corpus("kpi/B-buf400.dlt", &tree.join("b.dlt"));
    let outdir = dir.path().join("out");
    let err = common::pt_exit(0, &["convert", "--to", "kpi", "-o"], &[&outdir, &tree]);
    assert!(
        err.lines().any(|l| l.starts_with("skipped")
            && l.contains("a.mmv")
            && l.contains("no process data")),
        "{err}"
    );
    common::assert_has(&err, "1 ok, 0 salvaged, 0 failed, 1 skipped");
    assert!(!outdir.join("a.kpi").exists());
    assert!(outdir.join("b.kpi").exists());
}

#[test]
fn instance_names_survive_in_an_ltt_trace() {
    // Indom membership travels as indom.indom_<id> events, so a KPI capture
    // written as LTT keeps its process names and drops nothing (the DLT
    // ticks ride in the self-description with their meaning).
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("kpi.ltt");
    let src = common::corpus().join("kpi/kpi-capture.convert-a.txt");
    let err = common::pt_exit(0, &["convert", "--to", "ltt", "-o"], &[&out, &src]);
    let drops: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("polytrace: dropped:"))
        .collect();
    assert!(drops.is_empty(), "{err}");
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

/// The writer's own thread changes nothing: every source into a few
/// writers gives the same files with `POLYTRACE_WRITER_THREAD=0`, apart
/// from the PCP label's process id.
#[test]
fn the_writer_thread_writes_the_same_files() {
    let dir = tempfile::tempdir().unwrap();
    for (name, src) in common::sources() {
        // (DLT is left out: its session id is the writer's process id.)
        for to in ["pcp", "ltt", "timeline"] {
            let mut outs = Vec::new();
            for threads in ["1", "0"] {
                let out = dir.path().join(format!("{name}-{to}-{threads}.out"));
                // Dates for the cycles-only timeline (a dated input refuses
                // --time-origin and --tsc-hz: they would change nothing).
                let place: &[&str] = if name == "timeline" && to != "timeline" {
                    &[
                        "--time-origin",
                        "2020-01-01T00:00:00Z",
                        "--tsc-hz",
                        "2000000000",
                    ]
                } else {
                    &[]
                };
                let (code, _, err) = common::outcome(
                    Command::new(common::bin())
                        .env("POLYTRACE_WRITER_THREAD", threads)
                        .args(["convert", "-q"])
                        .args(place)
                        .arg(&src)
                        .args(["--to", to, "-o"])
                        .arg(&out),
                );
                assert!(code <= 1, "{name} -> {to}: exit {code}: {err}");
                outs.push(out);
            }
            let files = |p: &Path| -> Vec<(String, Vec<u8>)> {
                let mut v: Vec<(String, Vec<u8>)> = if p.is_dir() {
                    walkdir::WalkDir::new(p)
                        .sort_by_file_name()
                        .into_iter()
                        .filter_map(|e| e.ok())
                        .filter(|e| e.file_type().is_file())
                        .map(|e| {
                            let rel = e.path().strip_prefix(p).unwrap().display().to_string();
                            (rel, std::fs::read(e.path()).unwrap())
                        })
                        .collect()
                } else if p.exists() {
                    vec![(String::new(), std::fs::read(p).unwrap())]
                } else {
                    // A PCP archive: base.0, base.meta, base.index.
                    let base = p.file_name().unwrap().to_string_lossy().into_owned();
                    let mut m: Vec<(String, Vec<u8>)> = std::fs::read_dir(p.parent().unwrap())
                        .unwrap()
                        .filter_map(|e| e.ok())
                        .filter(|e| {
                            let n = e.file_name().to_string_lossy().into_owned();
                            n.starts_with(&format!("{base}."))
                        })
                        .map(|e| {
                            let n = e.file_name().to_string_lossy().into_owned();
                            let mut b = std::fs::read(e.path()).unwrap();
                            // The label's pid (bytes 8..12) is the writer's own.
                            if b.len() >= 12 {
                                b[8..12].fill(0);
                            }
                            (n[base.len()..].to_string(), b)
                        })
                        .collect();
                    m.sort();
                    m
                };
                v.sort_by(|a, b| a.0.cmp(&b.0));
                v
            };
            let (a, b) = (files(&outs[0]), files(&outs[1]));
            assert!(!a.is_empty(), "{name} -> {to}: no output");
            assert_eq!(a.len(), b.len(), "{name} -> {to}: file lists differ");
            for (x, y) in a.iter().zip(&b) {
                assert!(
                    x == y,
                    "{name} -> {to}: {} differs between the two runs",
                    x.0
                );
            }
        }
    }
}
