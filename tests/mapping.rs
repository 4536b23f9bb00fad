//! The mapping table (`polytrace formats --mapping`) against what real
//! conversions of the corpus report: every loss line is a declared rule of
//! the target, and every rule that always applies shows up when the input
//! has that kind of item. docs/mapping.md carries the table verbatim
//! (tests/docs.rs).
mod common;

use polytrace::formats::{self, Fate, FormatInfo, Kind, RawClock};
use polytrace::model::FormatId;
use std::path::PathBuf;
use std::process::Command;

fn sources() -> Vec<(FormatId, PathBuf)> {
    let c = common::corpus();
    vec![
        (FormatId::Kpi, c.join("kpi/kpi-capture.convert-a.txt")),
        (FormatId::Dlt, c.join("kpi/kpi-capture.dlt")),
        (FormatId::Mmv, c.join("mmv/research_v2.mmv")),
        (FormatId::Pcp, c.join("pcp/live_v3")),
        (FormatId::Ltt, c.join("ltt/smp_example")),
        (FormatId::Timeline, c.join("timeline/a2-small-wrapped.dat")),
    ]
}

/// One loss line: (dropped?, the "what" part, the reason).
fn loss_lines(err: &str) -> Vec<(bool, String, String)> {
    err.lines()
        .map(|l| l.strip_prefix("polytrace: ").unwrap_or(l))
        .filter_map(|l| {
            let (drop, rest) = if let Some(r) = l.strip_prefix("dropped: ") {
                (true, r)
            } else {
                (false, l.strip_prefix("degraded: ")?)
            };
            // "N what: why" — the why may hold ": " itself, the what not.
            let (what, why) = rest.split_once(": ")?;
            Some((drop, what.to_string(), why.to_string()))
        })
        .collect()
}

/// The noun of a loss line's what: `7 disk.dev.read values` and
/// `136 values of 23 kinds (…)` both report `values`.
fn noun_matches(what: &str, noun: &str) -> bool {
    let what = what.split_once(" of ").map_or(what, |x| x.0);
    what.ends_with(&format!(" {noun}"))
}

/// Item counts of an input, as `polytrace info` gives them.
fn kinds_present(input: &PathBuf) -> Vec<Kind> {
    let out = Command::new(common::bin())
        .arg("info")
        .arg(input)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    Kind::ALL
        .into_iter()
        .filter(|k| {
            text.lines().any(|l| {
                l.strip_prefix("  ")
                    .and_then(|l| l.strip_prefix(k.info_name()))
                    .is_some_and(|rest| {
                        rest.starts_with(' ') && rest.trim().parse::<u64>().is_ok_and(|n| n > 0)
                    })
            })
        })
        .collect()
}

fn info(id: FormatId) -> &'static FormatInfo {
    formats::get(id).info()
}

#[test]
fn declared_table_agrees_with_real_conversions() {
    let dir = tempfile::tempdir().unwrap();
    let targets: Vec<FormatId> = FormatId::ALL
        .into_iter()
        .filter(|&f| info(f).caps.write)
        .collect();
    let mut fails = Vec::new();
    for (src, input) in sources() {
        let s = info(src);
        let present = kinds_present(&input);
        assert!(!present.is_empty(), "{}", input.display());
        for s_kind in &present {
            assert!(
                s.reads.contains(s_kind),
                "{src} reads {s_kind:?} undeclared"
            );
        }
        for &dst in &targets {
            let d = info(dst);
            let out = dir.path().join(format!("{src}-{dst}"));
            let mut cmd = Command::new(common::bin());
            cmd.args(["convert", "--to", dst.name()]);
            // Only the timeline input has no dates (the KPI one has):
            // --time-origin on a dated input is refused.
            // (A timeline keeps cycles as cycles: nothing to place.)
            if s.undated && src == FormatId::Timeline && dst != FormatId::Timeline {
                cmd.args(["--tsc-hz", "2.5e9", "--time-origin", "1795319035"]);
            }
            let o = cmd.arg("-o").arg(&out).arg(&input).output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr).into_owned();
            let code = o.status.code().unwrap_or(-1);
            // KPI lines refuse a source without process data in their own words.
            let nothing = code == 2
                && (err.contains("nothing to write")
                    || err.contains("no process data for KPI lines"));
            if code != 0 && !nothing {
                fails.push(format!("{src} -> {dst}: exit {code}: {err}"));
                continue;
            }
            let lines = loss_lines(&err);
            if src == dst {
                if !lines.is_empty() {
                    fails.push(format!("{src} -> {dst}: same format lost {lines:?}"));
                }
                continue;
            }
            let rules: Vec<_> = d.writes.iter().filter(|r| r.applies_to(src)).collect();
            // (a) Every loss line is a declared rule (or the raw-clock rule).
            for (drop, what, why) in &lines {
                let declared = rules.iter().any(|r| {
                    r.reason() == Some(why.as_str())
                        && r.is_drop() == *drop
                        && noun_matches(what, r.what)
                });
                let clock = *drop && noun_matches(what, "raw clocks") && {
                    let m = match s.raw_clock {
                        RawClock::Native(m) => Some(m),
                        _ => None,
                    };
                    matches!(formats::raw_clock_fate(m, d.raw_clock),
                            Fate::Dropped(w) if w == why)
                };
                // DLT control messages, left out by the framing stage.
                let framing = formats::format::DLT_CONTROL_DROPPED;
                let control = *drop
                    && framing.applies_to(src)
                    && dst != FormatId::Ltt
                    && framing.reason() == Some(why.as_str())
                    && noun_matches(what, framing.what);
                if !declared && !clock && !control {
                    fails.push(format!(
                        "{src} -> {dst}: undeclared {}: {what}: {why}",
                        if *drop { "drop" } else { "degradation" }
                    ));
                }
            }
            // (b) Every rule that always applies shows when the kind is there
            // (a writer refusing to write nothing may say why in its own words).
            for r in rules.iter().filter(|_| !(nothing && lines.is_empty())) {
                let always = matches!(r.fate, Fate::Degraded(_) | Fate::Dropped(_));
                if !always || !present.contains(&r.kind) {
                    continue;
                }
                let seen = lines.iter().any(|(drop, what, why)| {
                    Some(why.as_str()) == r.reason()
                        && *drop == r.is_drop()
                        && noun_matches(what, r.what)
                });
                if !seen {
                    fails.push(format!(
                        "{src} -> {dst}: declared but not reported: {} {}: {:?}",
                        r.kind.name(),
                        r.what,
                        r.fate
                    ));
                }
            }
        }
    }
    assert!(
        fails.is_empty(),
        "{} problems:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

#[test]
fn mapping_table_has_every_pair() {
    let out = common::output_ok(Command::new(common::bin()).args(["formats", "--mapping"]));
    let table = String::from_utf8(out.stdout).unwrap();
    assert_eq!(table, formats::mapping_markdown());
    // Every pair of a readable and a writable format has its row.
    for r in FormatId::ALL.into_iter().filter(|&f| info(f).caps.read) {
        for w in FormatId::ALL.into_iter().filter(|&f| info(f).caps.write) {
            assert!(table.contains(&format!("\n| {r} | {w} | ")), "{r} -> {w}");
        }
    }
}
