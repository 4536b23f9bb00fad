//! Conversion stages on every verb: filters, time specs, merge, split and
//! statistics, checked against the real PCP tools where they have an
//! equivalent (pmdumplog's -S/-T and metric arguments, pmlogextract,
//! pmlogcheck) and against the inputs themselves where they do not.
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn pt() -> Command {
    let mut c = Command::new(common::bin());
    c.env("TZ", "UTC");
    c
}

fn corpus_pcp(name: &str) -> PathBuf {
    common::corpus().join("pcp").join(name)
}

fn run(c: &mut Command) -> Output {
    c.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The stdout of `VERB P ARGS…` (`dump`, `info`).
fn pt_stdout(verb: &str, p: &Path, args: &[&str]) -> String {
    text(&run(pt().arg(verb).arg(p).args(args)).stdout)
}

/// The count on the line of `info` that begins with `key`, if any.
fn info_count(info: &str, key: &str) -> Option<u64> {
    info.lines()
        .find(|l| l.trim_start().starts_with(key))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse().ok())
}

/// pmdumplog's listing flags (what `polytrace dump` reproduces).
const FLAGS: [&str; 8] = ["-a", "-e", "-h", "-I", "-M", "-xxx", "-Z", "UTC"];

// ------------------------------------------------ native listing subsets

/// `dump ARCHIVE --metric … --begin … --end …` is byte for byte
/// `pmdumplog -a … -S … -T … ARCHIVE metric…` on testsuite archives (v2,
/// xz-compressed, event records) and the v3 corpus archive, with each time
/// form pmdumplog shares with us.
#[test]
fn pcp_subset_listing_matches_pmdumplog() {
    let Some(dumplog) = common::peer("pmdumplog") else {
        return;
    };
    let Some(ts) = common::pcp_testsuite() else {
        return;
    };
    let a = ts.join("archives");
    // (archive, -S, -T, metrics); ours take the same text.
    let cases: Vec<(PathBuf, &str, &str, Vec<&str>)> = vec![
        (a.join("20041125"), "+60s", "-120s", vec!["kernel.all"]),
        (a.join("bigace_v2"), "@05:05", "@05:08", vec!["kernel.all"]),
        (
            a.join("pcp-pidstat-timezone"),
            "2018-06-20 09:48:00",
            "2018-06-20 09:51:00",
            vec!["kernel.all", "kernel.all.load"],
        ),
        (
            a.join("eventrec"),
            "+1s",
            "-2s",
            vec!["sample.event", "sample.bin"],
        ),
        (
            corpus_pcp("live_v3"),
            "+1s",
            "-2s",
            vec!["mem.util.free", "kernel.all.load", "hinv", "proc"],
        ),
        (
            corpus_pcp("live_v2"),
            "@03:45:16",
            "@03:45:18",
            vec!["kernel.all"],
        ),
    ];
    let mut fails = Vec::new();
    for (arch, s, t, metrics) in cases {
        let want = run(Command::new(&dumplog)
            .args(FLAGS)
            .args(["-S", s, "-T", t])
            .arg(&arch)
            .args(&metrics));
        assert!(want.status.success(), "{}", text(&want.stderr));
        let mut c = pt();
        c.arg("dump").arg(&arch).args(["--begin", s, "--end", t]);
        for m in &metrics {
            c.args(["--metric", m]);
        }
        let got = run(&mut c);
        let name = arch.file_name().unwrap().to_string_lossy().into_owned();
        if !got.status.success() {
            fails.push(format!(
                "{name}: exit {:?}: {}",
                got.status,
                text(&got.stderr)
            ));
        } else if want.stdout != got.stdout {
            fails.push(format!(
                "{name} -S {s} -T {t} {metrics:?}: {}",
                common::first_diff(&text(&want.stdout), &text(&got.stdout)).unwrap_or_default()
            ));
        }
        // The subset is a real cut: fewer results than the whole listing.
        let all = run(Command::new(&dumplog).args(FLAGS).arg(&arch));
        assert!(
            want.stdout.len() < all.stdout.len(),
            "{name}: window cut nothing"
        );
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

/// An instance filter cuts each result down to the instances it names, and
/// the record sizes follow (pmdumplog has no such option: the values must
/// be the whole listing's values of that instance).
#[test]
fn pcp_instance_filter_cuts_values_and_sizes() {
    let arch = corpus_pcp("live_v3");
    let values = |extra: &[&str]| -> (Vec<String>, String) {
        let o = run(pt()
            .arg("dump")
            .arg(&arch)
            .args(["--metric", "kernel.all.load"])
            .args(extra));
        assert!(o.status.success(), "{}", text(&o.stderr));
        let s = text(&o.stdout);
        let v = s
            .lines()
            .filter_map(|l| l.split_once("inst [5 or \"5 minute\"] value "))
            .map(|x| x.1.to_string())
            .collect();
        (v, s)
    };
    let (whole, _) = values(&[]);
    let (cut, listing) = values(&["--instance", "5 minute"]);
    assert_eq!(whole.len(), 7);
    assert_eq!(cut, whole);
    // The metadata sections stay whole, as pmdumplog's do.
    let results = listing.split("\nTemporal Index\n").nth(1).unwrap();
    assert!(!results.contains("1 minute"), "{results}");
    // v3: 24 bytes of framing, 8 + 4 for the set, 8 + 8 for one float
    // value and its block.
    assert_eq!(results.matches("[52 bytes]").count(), 7, "{results}");
}

/// `dump --begin` keeps the native style (it used to switch silently).
#[test]
fn native_dump_with_a_window_stays_native() {
    let out = run(pt()
        .arg("dump")
        .arg(corpus_pcp("live_v3"))
        .args(["--begin", "+2s"]));
    assert!(out.status.success());
    assert!(text(&out.stdout).starts_with("Note: timezone set to \"TZ=UTC\""));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
}

/// Listings that cannot be cut faithfully refuse, saying why; none
/// switches to another style.
#[test]
fn native_listings_that_cannot_be_cut_refuse() {
    for (rel, args, why) in [
        ("mmv/research_v1.mmv", ["--metric", "x"], "snapshot"),
        ("timeline/a2-unwrapped.dat", ["--begin", "+1s"], "ring"),
        (
            "kpi/kpi-capture.dlt",
            ["--event", "kpi.NEW"],
            "whole messages",
        ),
        ("pcp/live_v3", ["--event", "x"], "no events"),
    ] {
        let input = common::corpus().join(rel);
        let out = run(pt().arg("dump").arg(&input).args(args));
        assert_eq!(out.status.code(), Some(2), "{}", input.display());
        assert!(out.stdout.is_empty());
        let e = text(&out.stderr);
        assert!(e.contains(why) && e.contains("--style common"), "{e}");
    }
    // A filter of what the input cannot hold is refused before any listing.
    let out = run(pt()
        .arg("dump")
        .arg(common::corpus().join("ltt/smp_example"))
        .args(["--metric", "x"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let e = text(&out.stderr);
    assert!(
        e.contains("--metric") && e.contains("applies to inputs with metrics"),
        "{e}"
    );
}

/// The LTT listing under `--event`, `--cpu` and a window is the common
/// listing's events, line for line.
#[test]
fn ltt_listing_subset_matches_the_common_listing() {
    let t = common::corpus().join("ltt/smp_example");
    let args = [
        "--begin",
        "+1s",
        "--end",
        "+1.5s",
        "--event",
        "core.syscall*",
        "--event",
        "core.irq_entry",
        "--cpu",
        "1",
    ];
    let native = pt_stdout("dump", &t, &args);
    let common_l = pt_stdout("dump", &t, &[&args[..], &["--style", "common"]].concat());
    let a: Vec<(String, String)> = native
        .lines()
        .map(|l| {
            let mut w = l.split_whitespace();
            let name = w.next().unwrap().trim_end_matches(':').to_string();
            (w.next().unwrap().to_string(), name)
        })
        .collect();
    let b: Vec<(String, String)> = common_l
        .lines()
        .filter(|l| l.contains(" event "))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w[0].to_string(), w[2].to_string())
        })
        .collect();
    assert!(a.len() > 100, "{}", a.len());
    assert_eq!(a, b);
    assert!(native.lines().all(|l| l.contains("(cpu/1)")));
    assert!(native
        .lines()
        .all(|l| l.starts_with("core.syscall") || l.starts_with("core.irq_entry")));
}

/// The DLT listing under a window: the lines of the whole listing whose
/// storage time is inside, with their own message numbers.
#[test]
fn dlt_listing_window_keeps_whole_lines() {
    let f = common::corpus().join("kpi/kpi-capture.dlt");
    let whole = pt_stdout("dump", &f, &[]);
    let second = [
        "--begin",
        "2026-11-22T03:44:05Z",
        "--end",
        "2026-11-22T03:44:05.999999Z",
    ];
    let cut = pt_stdout("dump", &f, &second);
    let want: Vec<&str> = whole
        .lines()
        .filter(|l| l.contains("2026/11/22 03:44:05."))
        .collect();
    let got: Vec<&str> = cut.lines().collect();
    assert!(!want.is_empty());
    assert_eq!(got, want);
}

// ------------------------------------------------------------ time specs

#[test]
fn begin_after_end_is_an_error() {
    let a = corpus_pcp("live_v3");
    for (b, e) in [
        ("+5s", "+2s"),
        ("-2s", "-5s"),
        ("@03:45:18", "@03:45:16"),
        ("+6s", "-3s"),
    ] {
        for verb in ["info", "dump"] {
            let out = run(pt().arg(verb).arg(&a).args(["--begin", b, "--end", e]));
            assert_eq!(out.status.code(), Some(2), "{verb} {b} {e}");
            common::assert_has(&text(&out.stderr), "is after --end");
        }
    }
}

/// A time without a zone is local time as `TZ` says (a POSIX zone string,
/// so no zone database is needed); `@HH:MM` is on the first local day.
#[test]
fn zoneless_times_are_local() {
    let a = corpus_pcp("live_v3");
    let info = |tz: &str, b: &str, e: &str| {
        let out = run(Command::new(common::bin())
            .env("TZ", tz)
            .arg("info")
            .arg(&a)
            .args(["--begin", b, "--end", e]));
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let utc = info("UTC", "2026-11-22T03:45:16Z", "2026-11-22T03:45:18Z");
    assert!(utc.contains("samples        2"), "{utc}");
    assert_eq!(
        info("XXX-1", "2026-11-22T04:45:16", "2026-11-22T04:45:18"),
        utc
    );
    assert_eq!(info("XXX-1", "2026-11-22 04:45:16", "@04:45:18"), utc);
    assert_eq!(info("UTC", "@03:45:16", "1795319118"), utc);
    // Read as UTC, the local times are an hour after the trace: an empty
    // window, refused with the trace's span.
    let out = run(Command::new(common::bin())
        .env("TZ", "UTC")
        .arg("info")
        .arg(&a)
        .args([
            "--begin",
            "2026-11-22T04:45:16",
            "--end",
            "2026-11-22T04:45:18",
        ]));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("the trace runs from"),
        "{}",
        text(&out.stderr)
    );
}

/// `--at` takes every time form (it refused `+2s` before).
#[test]
fn at_takes_relative_times() {
    let dir = tempfile::tempdir().unwrap();
    let a = corpus_pcp("live_v3");
    let mk = |at: &str, name: &str| {
        let out = dir.path().join(name);
        let o = run(pt()
            .args(["convert", "-q", "--to", "mmv", "--at", at, "-o"])
            .arg(&out)
            .arg(&a));
        assert!(o.status.success(), "--at {at}: {}", text(&o.stderr));
        std::fs::read(&out).unwrap()
    };
    // Label start 03:45:14.676543893; the end is 03:45:21.676906453.
    let rel = mk("+2.5s", "rel.mmv");
    let abs = mk("2026-11-22T03:45:17.176543893Z", "abs.mmv");
    let from_end = mk("-4.50036256s", "end.mmv");
    let last = mk("-0s", "last.mmv");
    // The files differ only in the writer's pid (bytes 32..36 of the header).
    let body = |b: Vec<u8>| [&b[..32], &b[36..]].concat();
    let (rel, abs, from_end, last) = (body(rel), body(abs), body(from_end), body(last));
    assert!(
        rel == abs,
        "+2.5s and its absolute time give other snapshots"
    );
    assert!(
        from_end == abs,
        "-4.5s from the end and its absolute time differ"
    );
    assert!(rel != last, "+2.5s is the last sample");
}

// --------------------------------------------------------------- filters

/// Definitions nothing selected are not written: converting with
/// `--metric kernel.all` gives an archive holding those 3 metrics only,
/// whose values pmdumplog lists as it lists them in the original.
#[test]
fn metric_filter_writes_only_what_it_selects() {
    let Some((dumplog, dir)) = common::peer_and_scratch("pmdumplog") else {
        return;
    };
    let out = dir.path().join("k");
    let a = corpus_pcp("live_v3");
    let o = run(pt()
        .args([
            "convert",
            "-q",
            "--to",
            "pcp",
            "--metric",
            "kernel.all",
            "-o",
        ])
        .arg(&out)
        .arg(&a));
    assert!(o.status.success(), "{}", text(&o.stderr));
    // The descriptors in the archive (pminfo would add the global derived
    // metrics).
    let descs = text(&run(Command::new(&dumplog).arg("-d").arg(&out)).stdout);
    let names: BTreeSet<&str> = descs
        .lines()
        .filter_map(|l| l.strip_prefix("PMID: "))
        .map(|l| l.split_once(" (").unwrap().1.trim_end_matches(')'))
        .collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "kernel.all.cpu.user",
            "kernel.all.cpu.idle",
            "kernel.all.load"
        ])
    );
    let listing = |p: &Path| {
        // Without offsets: the cut archive starts at its first kept result.
        text(
            &run(Command::new(&dumplog)
                .args(["-m", "-Z", "UTC"])
                .arg(p)
                .arg("kernel.all"))
            .stdout,
        )
    };
    assert_eq!(listing(&out), listing(&a));
    // Only the indom kernel.all.load uses went with it.
    let indoms = text(&run(Command::new(&dumplog).args(["-i", "-Z", "UTC"]).arg(&out)).stdout);
    assert_eq!(indoms.matches("InDom:").count(), 1, "{indoms}");
}

/// The same filters on `info`: events by name and CPU.
#[test]
fn event_and_cpu_filters_on_info() {
    let t = common::corpus().join("ltt/smp_example");
    let irq_entry_on_0 = [
        "--event",
        "core.irq_*",
        "--exclude-event",
        "core.irq_exit",
        "--cpu",
        "0",
    ];
    let out = pt_stdout("info", &t, &irq_entry_on_0);
    let lines: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("events by type"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert_eq!(lines.len(), 1, "{out}");
    assert!(lines[0].contains("core.irq_entry"), "{out}");
    // Against the listing: irq_entry lines of cpu/0.
    let all = pt_stdout("dump", &t, &[]);
    let n = all
        .lines()
        .filter(|l| l.starts_with("core.irq_entry:") && l.contains("(cpu/0)"))
        .count();
    assert!(lines[0].ends_with(&format!(" {n}")), "{out} vs {n}");
}

// ----------------------------------------------------------------- merge

/// Merging live_v2 and live_v3 into PCP lists the same values as
/// pmlogextract's merge. One policy difference is allowed: instance domains
/// shared by both inputs are merged (the union), so a value of an
/// instance the other input's latest record lacks still has its name
/// where pmlogextract's output says `or ???`.
#[test]
fn pcp_merge_matches_pmlogextract() {
    let (Some(dumplog), Some(extract), Some(check)) = (
        common::peer("pmdumplog"),
        common::peer("pmlogextract"),
        common::peer("pmlogcheck"),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ours = dir.path().join("ours");
    let theirs = dir.path().join("theirs");
    let (v2, v3) = (corpus_pcp("live_v2"), corpus_pcp("live_v3"));
    let o = run(pt()
        .args(["convert", "-q", "--to", "pcp", "-o"])
        .arg(&ours)
        .arg(&v2)
        .arg(&v3));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(run(Command::new(&extract).arg(&v2).arg(&v3).arg(&theirs))
        .status
        .success());
    assert!(run(Command::new(&check).arg(&ours)).status.success());
    let values = |p: &Path| {
        text(
            &run(Command::new(&dumplog)
                .args(["-m", "-Z", "UTC", "-xxx"])
                .arg(p))
            .stdout,
        )
    };
    let (a, b) = (values(&ours), values(&theirs));
    assert_eq!(a.lines().count(), b.lines().count());
    assert_eq!(
        a.matches("metrics\n").count() + a.matches("metric\n").count(),
        18
    );
    let mut named = 0;
    for (x, y) in a.lines().zip(b.lines()) {
        if x != y {
            // Ours names the instance; theirs does not know it then.
            let (head, tail) = y
                .split_once(" or ???]")
                .unwrap_or_else(|| panic!("{x}\n{y}"));
            assert!(x.starts_with(head) && x.ends_with(tail), "{x}\n{y}");
            named += 1;
        }
    }
    assert!(named <= 3, "{named} lines differ");
}

/// Merging an LTT trace, a .dlt and a timeline into LTT keeps every event,
/// in time order, each tagged with its source (the timeline has only
/// cycles: its TSC rate and anchor place it).
#[test]
fn ltt_dlt_timeline_merge_into_ltt() {
    let c = common::corpus();
    let ltt = c.join("ltt/smp_example");
    let dlt = c.join("kpi/kpi-capture.dlt");
    let tl = c.join("timeline/a2-small-wrapped.dat");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.ltt");
    // Without a rate and an anchor the timeline has no place on the axis.
    let o = run(pt()
        .args(["convert", "--to", "ltt", "-o"])
        .arg(&out)
        .arg(&ltt)
        .arg(&tl));
    assert_eq!(o.status.code(), Some(2));
    common::assert_has(&text(&o.stderr), "--tsc-hz");
    let o = run(pt()
        .args(["convert", "--to", "ltt", "--tsc-hz", "2.4e9"])
        .args(["--tsc-anchor", "2026-11-22T03:44:00Z", "-o"])
        .arg(&out)
        .arg(&ltt)
        .arg(&dlt)
        .arg(&tl));
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    // The .dlt's daemon log lines are typed events now and its control
    // messages framing: nothing is dropped. Its messages reach the file in
    // arrival order; they are put in time order, so nothing is clamped.
    assert!(!err.contains("dropped:"), "{err}");
    assert!(!err.contains("clamped"), "{err}");
    // Every event of each input is there, under its source.
    let merged = pt_stdout("dump", &out, &["--style", "common"]);
    let mut by_source: BTreeMap<String, u64> = BTreeMap::new();
    let mut last = String::new();
    for l in merged.lines().filter(|l| l.contains(" event ")) {
        let t = l.split_whitespace().next().unwrap().to_string();
        // Fixed-width fractions: text order is time order within a second count.
        assert!(
            (t.len(), &t) >= (last.len(), &last),
            "not in time order: {last} then {t}"
        );
        last = t;
        if let Some(src) = l.split(" source=").nth(1) {
            *by_source
                .entry(src.trim_matches('"').to_string())
                .or_default() += 1;
        }
    }
    let ltt_events = info_count(&pt_stdout("info", &ltt, &[]), "events ").unwrap();
    assert_eq!(ltt_events, 173_151);
    assert_eq!(by_source["smp_example"], ltt_events);
    assert_eq!(by_source["a2-small-wrapped.dat"], 1024);
    // The .dlt: its KPI events, its control messages, and each sample value
    // as a metric event.
    let d = pt_stdout("info", &dlt, &[]);
    let field = |k: &str| info_count(&d, k).unwrap_or(0);
    let values: u64 = d
        .lines()
        .skip_while(|l| !l.starts_with("values by metric"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| l.split_whitespace().last().unwrap().parse::<u64>().unwrap())
        .sum();
    // Its control messages too: LTT carries them (the reversible encoding).
    assert_eq!(
        by_source["kpi-capture.dlt"],
        field("events ") + field("framing events ") + values
    );
}

// ----------------------------------------------------------------- split

/// `--split 2s` of the 7 s corpus archive: 4 archives pmlogcheck accepts,
/// whose values (as pmdumplog lists them) are the original's.
#[test]
fn split_by_duration_gives_valid_pieces_with_all_values() {
    let (Some(dumplog), Some(check)) = (common::peer("pmdumplog"), common::peer("pmlogcheck"))
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("piece");
    let a = corpus_pcp("live_v3");
    let o = run(pt()
        .args(["convert", "--to", "pcp", "--split", "2s", "-o"])
        .arg(&out)
        .arg(&a));
    assert!(o.status.success(), "{}", text(&o.stderr));
    common::assert_has(&text(&o.stderr), "wrote 4 pieces");
    let pieces: Vec<PathBuf> = (0..4)
        .map(|k| dir.path().join(format!("piece.{k:03}")))
        .collect();
    assert!(!dir.path().join("piece.004.meta").exists());
    let values = |p: &Path| {
        let s = text(&run(Command::new(&dumplog).args(["-m", "-Z", "UTC"]).arg(p)).stdout);
        s.lines().skip(2).map(str::to_string).collect::<Vec<_>>()
    };
    let mut union = Vec::new();
    for p in &pieces {
        let c = run(Command::new(&check).arg(p));
        assert!(c.status.success(), "{}: {}", p.display(), text(&c.stderr));
        let v = values(p);
        assert!(
            v.iter().any(|l| l.contains(" metric")),
            "{} is empty",
            p.display()
        );
        union.extend(v);
    }
    assert_eq!(union, values(&a));
}

/// `--split SIZE` cuts by bytes; every piece reads on its own.
#[test]
fn split_by_size_and_into_other_formats() {
    let dir = tempfile::tempdir().unwrap();
    let a = corpus_pcp("live_v3");
    let out = dir.path().join("s");
    let o = run(pt()
        .args(["convert", "-q", "--to", "pcp", "--split", "30k", "-o"])
        .arg(&out)
        .arg(&a));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let n = (0..20)
        .filter(|k| dir.path().join(format!("s.{k:03}.meta")).exists())
        .count();
    assert!((3..9).contains(&n), "{n} pieces");
    // LTT pieces: every event once.
    let t = common::corpus().join("ltt/smp_example");
    let out = dir.path().join("l");
    let o = run(pt()
        .args(["convert", "-q", "--to", "ltt", "--split", "5s", "-o"])
        .arg(&out)
        .arg(&t));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let lines = |p: &Path| {
        pt_stdout("dump", p, &["--no-framing"])
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let mut union = Vec::new();
    for k in 0..4 {
        union.extend(lines(&dir.path().join(format!("l.{k:03}"))));
    }
    let whole = lines(&t);
    assert_eq!(union.len(), whole.len());
    // Nothing to split into a stream.
    let o = run(pt()
        .args(["convert", "--to", "kpi", "--split", "1s", "-o", "-"])
        .arg(&t));
    assert_eq!(o.status.code(), Some(2));
}

// ----------------------------------------------------------------- stats

/// `info --stats --json` of live_v3 against a hand computation from
/// `pmdumplog -a`: per metric and instance the count, min, max, mean and,
/// for counters, the rate.
#[test]
fn stats_json_agree_with_pmdumplog() {
    let Some(dumplog) = common::peer("pmdumplog") else {
        return;
    };
    let a = corpus_pcp("live_v3");
    let listing = text(
        &run(Command::new(&dumplog)
            .args(["-a", "-Z", "UTC", "-xxx"])
            .arg(&a))
        .stdout,
    );
    // Semantics per name, from the descriptors.
    let mut sem: BTreeMap<String, String> = BTreeMap::new();
    let mut cur = String::new();
    for l in listing.lines() {
        if let Some(r) = l.strip_prefix("PMID: ") {
            cur = r
                .split_once(" (")
                .unwrap()
                .1
                .trim_end_matches(')')
                .to_string();
        } else if let Some(r) = l.trim().strip_prefix("Semantics: ") {
            sem.insert(
                cur.clone(),
                r.split_whitespace().next().unwrap().to_string(),
            );
        }
    }
    // Values per (metric, instance): (offset seconds, value or None).
    type Series = BTreeMap<(String, Option<i64>), Vec<(f64, Option<f64>)>>;
    let mut series: Series = BTreeMap::new();
    let results = listing.split("\nTemporal Index\n").nth(1).unwrap();
    let (mut t, mut metric) = (0.0f64, String::new());
    let mut add = |m: &str, inst: Option<i64>, v: &str, t: f64| {
        let v = v.trim();
        let num = if v.starts_with('"') {
            None
        } else {
            Some(v.parse::<f64>().unwrap())
        };
        series
            .entry((m.to_string(), inst))
            .or_default()
            .push((t, num));
    };
    for l in results.lines() {
        if l.contains(" 2026 (") {
            let off = l
                .split_once(" 2026 (")
                .unwrap()
                .1
                .split_once(')')
                .unwrap()
                .0;
            t = off.parse().unwrap();
        } else if l.starts_with("    ") && !l.starts_with("        ") {
            let (name, rest) = l.split_once(" (").unwrap().1.split_once("):").unwrap();
            metric = name.to_string();
            if let Some(v) = rest.strip_prefix(" value ") {
                add(&metric, None, v, t);
            } else if let Some(r) = rest.strip_prefix(" inst [") {
                let (id, r) = r.split_once(" or").unwrap();
                add(
                    &metric,
                    Some(id.parse().unwrap()),
                    r.split_once("] value ").unwrap().1,
                    t,
                );
            }
        } else if let Some(r) = l.trim_start().strip_prefix("inst [") {
            let (id, r) = r.split_once(" or").unwrap();
            add(
                &metric,
                Some(id.parse().unwrap()),
                r.split_once("] value ").unwrap().1,
                t,
            );
        }
    }
    let out = run(pt().arg("info").arg(&a).args(["--stats", "--json"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ms = j["metrics"].as_array().unwrap();
    assert_eq!(ms.len(), series.len());
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0);
    let mut checked = 0;
    for m in ms {
        let key = (
            m["metric"].as_str().unwrap().to_string(),
            m["instance"].as_i64(),
        );
        let s = &series[&key];
        assert_eq!(m["count"].as_u64().unwrap(), s.len() as u64, "{key:?}");
        let nums: Vec<(f64, f64)> = s.iter().filter_map(|(t, v)| v.map(|v| (*t, v))).collect();
        if nums.is_empty() {
            assert!(m["min"].is_null() && m["mean"].is_null(), "{key:?}");
            continue;
        }
        let min = nums.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
        let max = nums.iter().map(|x| x.1).fold(f64::NEG_INFINITY, f64::max);
        let mean = nums.iter().map(|x| x.1).sum::<f64>() / nums.len() as f64;
        assert!(close(m["min"].as_f64().unwrap(), min), "{key:?} min");
        assert!(close(m["max"].as_f64().unwrap(), max), "{key:?} max");
        assert!(close(m["mean"].as_f64().unwrap(), mean), "{key:?} mean");
        if sem[&key.0] == "counter" && nums.len() > 1 {
            let inc: f64 = nums
                .windows(2)
                .map(|w| {
                    if w[1].1 >= w[0].1 {
                        w[1].1 - w[0].1
                    } else {
                        w[1].1
                    }
                })
                .sum();
            let rate = inc / (nums[nums.len() - 1].0 - nums[0].0);
            assert!(close(m["rate"].as_f64().unwrap(), rate), "{key:?} rate");
        } else {
            assert!(m["rate"].is_null(), "{key:?}");
        }
        checked += 1;
    }
    assert!(checked > 100, "{checked}");
    assert_eq!(j["sources"][0]["items"].as_u64(), Some(9));
}

/// Event statistics: per type count and events per second over the span;
/// per CPU span and the largest gaps.
#[test]
fn stats_for_events() {
    let t = common::corpus().join("ltt/smp_example");
    let out = run(pt().arg("info").arg(&t).args(["--stats", "--json"]));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let span = j["span_s"].as_f64().unwrap();
    assert!((19.9..20.1).contains(&span), "{span}");
    let total: u64 = j["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["count"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 173_157);
    let cpus = j["cpus"].as_array().unwrap();
    assert_eq!(cpus.len(), 2);
    let n: Vec<u64> = cpus.iter().map(|c| c["items"].as_u64().unwrap()).collect();
    assert_eq!(n, vec![85_917, 87_240]);
    for c in cpus {
        let gaps = c["gaps"].as_array().unwrap();
        assert!(!gaps.is_empty() && gaps.len() <= 3);
        assert!(gaps[0]["seconds"].as_f64() >= gaps[gaps.len() - 1]["seconds"].as_f64());
    }
    let sc = common::stats_event(&j, "core.syscall_entry");
    let per_s = sc["per_s"].as_f64().unwrap();
    assert!((per_s - sc["count"].as_f64().unwrap() / span).abs() < 1e-9);
}

/// The KPI listing is re-rendered from the model, so `--event` and a window
/// apply to it as to the common listing: only STP groups, up to the end.
#[test]
fn kpi_listing_takes_event_filters_and_a_window() {
    let f = common::corpus().join("kpi/kpi-capture.convert-a.txt");
    let args = ["--event", "kpi.STP", "--end", "+20s"];
    let out = run(pt().arg("dump").arg("-q").arg(&f).args(args));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.lines().count() > 10);
    assert!(s.lines().all(|l| l.contains("[STP ")), "{s}");
    // 03:43:57.33 is the first data item: +20s ends before 03:44:17.34.
    assert!(s
        .lines()
        .all(|l| l.contains(" 03:43:5") || l.contains(" 03:44:0") || l.contains(" 03:44:1")));
    let events = info_count(&pt_stdout("info", &f, &args), "events ").unwrap() as usize;
    let datasets: usize = s
        .lines()
        .filter(|l| !l.contains("[STP BEG]") && !l.contains("[STP END]"))
        .map(|l| {
            l.rsplit_once("[STP ")
                .unwrap()
                .1
                .trim_end_matches(']')
                .split(' ')
                .count()
        })
        .sum();
    assert_eq!(datasets, events);
}

/// `--merge DIR` merges every trace of a directory, as naming them does.
#[test]
fn merge_over_a_directory() {
    let Some((dumplog, dir)) = common::peer_and_scratch("pmdumplog") else {
        return;
    };
    let inputs = dir.path().join("in");
    std::fs::create_dir(&inputs).unwrap();
    for a in ["live_v2", "live_v3"] {
        for m in ["0", "meta", "index"] {
            let name = format!("{a}.{m}");
            std::fs::copy(corpus_pcp(&name), inputs.join(&name)).unwrap();
        }
    }
    std::fs::write(inputs.join("README"), "not a trace\n").unwrap();
    let (by_dir, by_name) = (dir.path().join("d"), dir.path().join("n"));
    let o = run(pt()
        .args(["convert", "--merge", "--to", "pcp", "-o"])
        .arg(&by_dir)
        .arg(&inputs));
    assert!(o.status.success(), "{}", text(&o.stderr));
    common::assert_has(&text(&o.stderr), "README: not a trace");
    let o = run(pt()
        .args(["convert", "-q", "--to", "pcp", "-o"])
        .arg(&by_name)
        .arg(inputs.join("live_v2"))
        .arg(inputs.join("live_v3")));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let values =
        |p: &Path| text(&run(Command::new(&dumplog).args(["-m", "-Z", "UTC"]).arg(p)).stdout);
    assert_eq!(values(&by_dir), values(&by_name));
    // Labels name the inputs in the items' source.
    let l = text(
        &run(pt()
            .arg("info")
            .args(["--stats", "--json"])
            .arg(inputs.join("live_v2"))
            .arg(inputs.join("live_v3")))
        .stdout,
    );
    let j: serde_json::Value = serde_json::from_str(&l).unwrap();
    let names: Vec<&str> = j["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["live_v2", "live_v3"]);
}
