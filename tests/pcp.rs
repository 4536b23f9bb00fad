//! PCP archives: reader, writer, listings and check, proven against the
//! corpus references and PCP's own pmdumplog / pmlogcheck.

mod common;

use assert_cmd::Command;
use std::path::{Path, PathBuf};
use std::process::Command as Proc;
use std::sync::Mutex;

fn corpus_pcp() -> PathBuf {
    common::corpus().join("pcp")
}

/// The testsuite file `rel`, if the testsuite is installed.
fn testsuite(rel: &str) -> Option<PathBuf> {
    common::pcp_testsuite().map(|t| t.join(rel))
}

fn polytrace() -> Command {
    Command::new(common::bin())
}

fn run_ok(args: &[&str]) -> Vec<u8> {
    let out = polytrace().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "polytrace {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

// ------------------------------------------------------------ corpus references

#[test]
fn values_listing_matches_exactdump_byte_for_byte() {
    for v in ["live_v2", "live_v3"] {
        let base = corpus_pcp().join(v);
        let got = run_ok(&["dump", "--style", "values", base.to_str().unwrap()]);
        let want = std::fs::read(corpus_pcp().join(format!("{v}.exactdump.txt"))).unwrap();
        common::assert_same(v, &want, &got);
    }
}

#[test]
fn native_listing_matches_pmdumplog_reference_byte_for_byte() {
    for v in ["live_v2", "live_v3"] {
        let base = corpus_pcp().join(v);
        let got = run_ok(&["dump", base.to_str().unwrap()]);
        let want = std::fs::read(corpus_pcp().join(format!("{v}.pmdumplog.txt"))).unwrap();
        common::assert_same(v, &want, &got);
    }
}

#[test]
fn any_member_name_resolves_the_archive() {
    let want = std::fs::read(corpus_pcp().join("live_v3.exactdump.txt")).unwrap();
    for m in ["live_v3.meta", "live_v3.0", "live_v3.index"] {
        let p = corpus_pcp().join(m);
        let got = run_ok(&["dump", "--style", "values", p.to_str().unwrap()]);
        assert!(got == want, "via {m}");
    }
}

/// Per-metric error codes print with PCP's own messages: every code that
/// `pmerr -l` knows, and the errno range, against `pmerr CODE`.
#[test]
fn error_messages_match_pmerr() {
    let Some(pmerr) = common::peer("pmerr") else {
        return;
    };
    let list = Proc::new(&pmerr).arg("-l").output().unwrap();
    let mut codes: Vec<i32> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    assert!(codes.len() > 60, "pmerr -l listed {} codes", codes.len());
    codes.extend(-133..0);
    let args: Vec<String> = codes.iter().map(|c| c.to_string()).collect();
    let out = Proc::new(&pmerr).args(&args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let want: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_once(" Text: ").map(|x| x.1))
        .collect();
    assert_eq!(want.len(), codes.len(), "pmerr output:\n{text}");
    for (code, want) in codes.iter().zip(want) {
        assert_eq!(
            polytrace::formats::pcp::dump::err_str(*code),
            want,
            "code {code}"
        );
    }
}

/// Copy live_v3 with members compressed in every way we support.
#[test]
fn compressed_and_mixed_members() {
    use std::io::Write;
    let want = std::fs::read(corpus_pcp().join("live_v3.exactdump.txt")).unwrap();
    let src = corpus_pcp();
    let cases: [(&str, &str, &str); 4] = [
        (".xz", ".gz", ""),
        (".bz2", "", ".xz"),
        (".gz", ".bz2", ".gz"),
        (".lzma", "", ""),
    ];
    for (i, (dsuf, msuf, isuf)) in cases.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        for (member, suf) in [("0", dsuf), ("meta", msuf), ("index", isuf)] {
            let raw = std::fs::read(src.join(format!("live_v3.{member}"))).unwrap();
            let out = dir.path().join(format!("a.{member}{suf}"));
            let bytes: Vec<u8> = match *suf {
                ".xz" => {
                    let mut e = liblzma::write::XzEncoder::new(Vec::new(), 6);
                    e.write_all(&raw).unwrap();
                    e.finish().unwrap()
                }
                ".lzma" => {
                    let opts = liblzma::stream::LzmaOptions::new_preset(6).unwrap();
                    let s = liblzma::stream::Stream::new_lzma_encoder(&opts).unwrap();
                    let mut e = liblzma::write::XzEncoder::new_stream(Vec::new(), s);
                    e.write_all(&raw).unwrap();
                    e.finish().unwrap()
                }
                ".bz2" => {
                    let mut e =
                        bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
                    e.write_all(&raw).unwrap();
                    e.finish().unwrap()
                }
                ".gz" => {
                    let mut e =
                        flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                    e.write_all(&raw).unwrap();
                    e.finish().unwrap()
                }
                _ => raw,
            };
            std::fs::write(out, bytes).unwrap();
        }
        let base = dir.path().join("a");
        let got = run_ok(&["dump", "--style", "values", base.to_str().unwrap()]);
        assert!(got == want, "case {i} ({dsuf} {msuf} {isuf})");
        // A compressed member named directly is detected too.
        let m = dir.path().join(format!("a.0{dsuf}"));
        let got = run_ok(&["dump", "--style", "values", m.to_str().unwrap()]);
        assert!(got == want, "case {i} via member");
    }
}

// ------------------------------------------------------------ round trips with PCP's tools

const DUMP_FLAGS: [&str; 11] = [
    "-d", "-i", "-e", "-h", "-I", "-M", "-m", "-l", "-xxx", "-Z", "UTC",
];
/// Without values: for the sets whose value listing takes pmdumplog long.
const META_FLAGS: [&str; 9] = ["-d", "-i", "-e", "-h", "-I", "-l", "-xxx", "-Z", "UTC"];

fn pmdumplog(tool: &Path, flags: &[&str], arch: &Path) -> String {
    let out = Proc::new(tool).args(flags).arg(arch).output().unwrap();
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    s
}

fn pmlogcheck_lines(tool: &Path, arch: &Path) -> Vec<String> {
    let out = Proc::new(tool).arg(arch).output().unwrap();
    let name = arch.display().to_string();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let mut v: Vec<String> = text.lines().map(|l| l.replace(&name, "ARCH")).collect();
    v.sort();
    v.dedup();
    v
}

/// archive -> polytrace -> archive; returns a failure message or None.
fn round_trip(set: &str, full_values: bool, extra: &[&str]) -> Option<String> {
    let ts = common::pcp_testsuite()?;
    let dumplog = common::peer("pmdumplog")?;
    let check = common::peer("pmlogcheck")?;
    let src = ts.join("archives").join(set);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rt");
    let mut args = vec![
        "convert".to_string(),
        "-q".into(),
        src.display().to_string(),
        "--to".into(),
        "pcp".into(),
        "-o".into(),
        out.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let r = Proc::new(common::bin()).args(&args).output().unwrap();
    // With --salvage a damaged set converts with exit 1.
    let salvaged = extra.contains(&"--salvage") && r.status.code() == Some(1);
    if !r.status.success() && !salvaged {
        return Some(format!(
            "{set}: convert failed: {}",
            String::from_utf8_lossy(&r.stderr)
        ));
    }
    let flags: &[&str] = if full_values {
        &DUMP_FLAGS
    } else {
        &META_FLAGS
    };
    let a = pmdumplog(&dumplog, flags, &src);
    let b = pmdumplog(&dumplog, flags, &out);
    if a != b {
        return Some(format!(
            "{set}: pmdumplog differs: {}",
            common::first_diff(&a, &b).unwrap_or_default()
        ));
    }
    if full_values {
        let ca = pmlogcheck_lines(&check, &src);
        let new: Vec<String> = pmlogcheck_lines(&check, &out)
            .into_iter()
            .filter(|l| !ca.contains(l))
            .collect();
        if !new.is_empty() {
            return Some(format!("{set}: pmlogcheck reports new problems: {new:?}"));
        }
    }
    None
}

/// Run `f` over `sets` on two threads; collect failures.
fn parallel(sets: &[&'static str], f: fn(&str) -> Option<String>) -> Vec<String> {
    let next = Mutex::new(0usize);
    let fails = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = {
                    let mut n = next.lock().unwrap();
                    *n += 1;
                    *n - 1
                };
                let Some(set) = sets.get(i) else { break };
                if let Some(msg) = f(set) {
                    fails.lock().unwrap().push(msg);
                }
            });
        }
    });
    fails.into_inner().unwrap()
}

/// Every compressed (except the three giants, which run in the full sweep),
/// multi-volume, v3, event-record and no-index set, plus a few oddities.
const DEFAULT_SETS: [&str; 44] = [
    // compressed (xz, one bz2), some with compressed .meta / .index
    "20190628.04.03",
    "20190628.06.31",
    "coverage",
    "dstat-diskfarm",
    "dstat-disks",
    "pcp-atop",
    "pcp-atop-boot",
    "pcp-atop-nvidia",
    "pcp-atop-threads",
    "pcp-dstat",
    "pcp-free-tera",
    "pcp-hotatop",
    "pcp-pidstat-timezone",
    "pcp-ps",
    "pcp-ss",
    "small",
    "value-test",
    "zero_disk_activity",
    "multi-xz/20150508.11.44",
    "multi-xz/20150508.11.46",
    "multi-xz/20150508.11.57",
    "multi-xz-1k/20150508.11.44",
    "multi-xz-1k/20150508.11.46",
    "multi-xz-1k/20150508.11.57",
    // multi-volume
    "ok-mv-bar",
    "ok-mv-bigbin",
    "ok-mv-foo",
    "ok-mv-interp",
    // no index
    "ok-noti-bigbin",
    "ok-noti-interp",
    // v3, event records (EVENT and HIGHRES_EVENT), marks
    "omnibus_v2",
    "omnibus_v3",
    "omnibus-nomark_v2",
    "omnibus-nomark_v3",
    "eventrec",
    "eventrec-old",
    "foo+",
    "pyapi",
    // v1 conversions (block type 0, FLOAT in place), unsorted instances
    "bozo.client_v2",
    "960624.08.17_v2",
    "rattle",
    "count-mark",
    "20180102",
    // instance names that are not UTF-8
    "procpid-encode2",
];

/// Compressed sets whose full value listing takes pmdumplog 15-80 s: the
/// default run compares their metadata listing; the full sweep everything.
const HEAVY_COMPRESSED: [&str; 5] = [
    "20130706",
    "20180606",
    "20201109",
    "pcp-pidstat-process-states",
    "pcp-zeroconf",
];

#[test]
fn round_trip_default_subset_pmdumplog_identical() {
    if common::pcp_testsuite().is_none() {
        return;
    }
    let mut fails = parallel(&DEFAULT_SETS, |s| round_trip(s, true, &[]));
    fails.extend(parallel(&HEAVY_COMPRESSED, |s| round_trip(s, false, &[])));
    assert!(
        fails.is_empty(),
        "{} failures:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

#[test]
fn round_trip_multi_volume_split_and_v3_rewrite() {
    if common::pcp_testsuite().is_none() {
        return;
    }
    // v3 written from v3 with small volumes: same listing apart from the
    // temporal index, which -a is not asked for here.
    let fails = parallel(&["omnibus_v3", "ok-mv-foo"], |s| {
        round_trip(s, true, &["--volume-size", "600"])
    });
    assert!(fails.is_empty(), "{}", fails.join("\n"));
    let ts = common::pcp_testsuite().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mv");
    polytrace()
        .args(["convert", "-q"])
        .arg(ts.join("archives/ok-mv-foo"))
        .args(["--to", "pcp", "--volume-size", "600", "-o"])
        .arg(&out)
        .assert()
        .success();
    assert!(dir.path().join("mv.1").exists(), "volume split expected");
}

/// pmdumplog -m text of a v3 rewrite equals the v2 original once the v3
/// nanosecond digits (always 000) are cut back to microseconds.
fn v2_as_v3(set: &str) -> Option<String> {
    let ts = common::pcp_testsuite()?;
    let dumplog = common::peer("pmdumplog")?;
    let src = ts.join("archives").join(set);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("v3");
    let r = Proc::new(common::bin())
        .args(["convert", "-q"])
        .arg(&src)
        .args(["--to", "pcp", "--pcp-version", "3", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    if !r.status.success() {
        return Some(format!("{set}: convert failed"));
    }
    let flags = ["-m", "-M", "-Z", "UTC"];
    let a = pmdumplog(&dumplog, &flags, &src);
    let b = pmdumplog(&dumplog, &flags, &out);
    let b: String = b
        .lines()
        .map(|l| {
            let bs = l.as_bytes();
            // "HH:MM:SS.nnnnnnnnn ..." at line start
            if bs.len() >= 18 && bs[2] == b':' && bs[8] == b'.' && &l[15..18] == "000" {
                format!("{}{}\n", &l[..15], &l[18..])
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    if a != b {
        return Some(format!(
            "{set}: v3 values differ: {}",
            common::first_diff(&a, &b).unwrap_or_default()
        ));
    }
    None
}

#[test]
fn v2_written_as_v3_keeps_every_value() {
    if common::pcp_testsuite().is_none() {
        return;
    }
    let fails = parallel(
        &["ok-mv-foo", "omnibus-nomark_v2", "rattle", "small"],
        v2_as_v3,
    );
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

#[test]
fn corpus_round_trip_is_pmdumplog_identical() {
    let (Some(dumplog), Some(check)) = (common::peer("pmdumplog"), common::peer("pmlogcheck"))
    else {
        return;
    };
    for v in ["live_v2", "live_v3"] {
        let src = corpus_pcp().join(v);
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("rt");
        common::convert(&src, "pcp", &out, &["-q"]);
        let a = pmdumplog(&dumplog, &DUMP_FLAGS, &src);
        let b = pmdumplog(&dumplog, &DUMP_FLAGS, &out);
        assert!(
            a == b,
            "{v}: {}",
            common::first_diff(&a, &b).unwrap_or_default()
        );
        let c = Proc::new(&check).arg(&out).output().unwrap();
        assert!(
            c.status.success() && c.stdout.is_empty(),
            "{v}: pmlogcheck complains"
        );
    }
}

// ------------------------------------------------------------ other sources

#[test]
fn writer_accepts_metrics_and_events_from_another_format() {
    use polytrace::formats;
    use polytrace::model::*;
    use polytrace::options::WriteOptions;
    use polytrace::output::OutTarget;
    use std::sync::Arc;
    let mut h = Header::new(FormatId::Kpi, "1");
    h.host = Some("box".into());
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("kpi");
    let f = formats::get(FormatId::Pcp);
    let mut w = f
        .create(&OutTarget::Path(base.clone()), &h, &WriteOptions::default())
        .unwrap();
    let pmid = (40u32 << 22) | (1 << 10) | 2;
    let indom = (40u32 << 22) | 7;
    let mut md = MetricDesc::new(
        pmid,
        "kpi.cpu.load",
        ValueType::F64,
        Semantics::Instant,
        Units::NONE,
    );
    md.indom = Some(indom);
    md.help_short = Some("load per cpu".into());
    let single = MetricDesc::new(
        pmid + 1,
        "kpi.rss",
        ValueType::U64,
        Semantics::Instant,
        Units::bytes(),
    );
    let t0 = Timestamp::from_secs_nanos(1_795_319_114, 5);
    let items = vec![
        Item::EventType(Arc::new(EventType::new(1, "kpi", "start", vec![]))),
        Item::Metric(Arc::new(md)),
        Item::Metric(Arc::new(single)),
        Item::Indom(IndomUpdate {
            time: t0,
            id: indom,
            kind: IndomKind::Full,
            instances: vec![
                Instance {
                    id: 0,
                    name: "cpu0".into(),
                },
                Instance {
                    id: 1,
                    name: "cpu1".into(),
                },
            ],
            removed: vec![],
            extras: Extras::default(),
        }),
        Item::Sample(Sample {
            time: t0,
            raw_clock: None,
            metrics: vec![
                MetricValues {
                    metric: pmid,
                    values: Ok(vec![(0, Value::F64(0.25)), (1, Value::F64(1.5))]),
                },
                MetricValues {
                    metric: pmid + 1,
                    values: Ok(vec![(-1, Value::U64(123456))]),
                },
            ],
            extras: Extras::default(),
        }),
        common::event(t0.0, 1, None, vec![]),
        Item::Sample(Sample {
            time: Timestamp(t0.0 + 1_000_000_000),
            raw_clock: None,
            metrics: vec![MetricValues {
                metric: pmid + 1,
                values: Ok(vec![(-1, Value::U64(123999))]),
            }],
            extras: Extras::default(),
        }),
    ];
    for it in &items {
        w.write_item(it).unwrap();
    }
    let loss = w.finish().unwrap();
    // Two samples and one result of event records.
    assert_eq!(loss.written.get("results"), Some(&3));
    assert_eq!(loss.written.get("events"), Some(&1));
    assert!(!loss.has_loss(), "{loss}");
    // Our own reader sees the values back.
    let vals = run_ok(&["dump", "--style", "values", base.to_str().unwrap()]);
    let vals = String::from_utf8(vals).unwrap();
    common::assert_has(&vals, "1795319114.000000005 40.1.2 1 5 1.5\n");
    common::assert_has(&vals, "1795319115.000000005 40.1.3 -1 3 123999\n");
    let (Some(dumplog), Some(check)) = (common::peer("pmdumplog"), common::peer("pmlogcheck"))
    else {
        return;
    };
    let d = pmdumplog(&dumplog, &["-a", "-Z", "UTC"], &base);
    assert!(d.contains("inst [1 or \"cpu1\"] value 1.5"), "{d}");
    assert!(d.contains("40.1.3 (kpi.rss): value 123999"), "{d}");
    common::assert_has(
        &d,
        "(trace.kpi.start.records[0 or \"all\"]): 1 event record",
    );
    let c = Proc::new(&check).arg(&base).output().unwrap();
    assert!(
        c.status.success() && c.stdout.is_empty(),
        "pmlogcheck: {}",
        String::from_utf8_lossy(&c.stdout)
    );
}

// ------------------------------------------------------------ damage

/// Expected `polytrace check` outcome per badarchives/ set:
/// E = positioned error (exit 2, message names a byte offset),
/// W = warnings only (exit 0, at least one warning), O = clean.
const BAD: [(&str, char); 49] = [
    ("20180608.04.23-01", 'E'), // index damage (issue 16, docs/pcp.md)
    ("541380", 'E'),
    ("951127.23.01", 'E'),
    ("960624.08.17", 'E'),
    ("ace", 'E'),
    ("archive-20141125-000009", 'W'),
    ("archive-20150417.131733", 'E'),
    ("babylon.percpu", 'E'),
    ("babylon.pmview", 'E'),
    ("badlabel-0", 'O'),
    ("badlabel-1", 'E'),
    ("badlabel-2", 'E'),
    ("badlen-0", 'O'),
    ("badlen-1", 'E'),
    ("badlen-10", 'E'),
    ("badlen-11", 'E'),
    ("badlen-2", 'E'),
    ("badlen-3", 'E'),
    ("badlen-4", 'E'),
    ("badlen-5", 'E'),
    ("badlen-6", 'E'),
    ("badlen-7", 'E'),
    ("badlen-8", 'E'),
    ("badlen-9", 'E'),
    ("badlog-1", 'E'),
    ("badlog-2", 'O'),
    ("badlog-3", 'W'),
    ("badlog-4", 'W'),
    ("badmeta-1", 'E'), // index damage (issue 16, docs/pcp.md)
    ("badmeta-2", 'W'),
    ("badmeta-3", 'E'),
    ("badmeta-4", 'E'),
    ("badmeta-5", 'E'),
    ("badmeta-6", 'W'),
    ("badmeta-7", 'W'),
    ("badti-1", 'E'), // index damage (issue 16, docs/pcp.md)
    ("badti-2", 'W'),
    ("badti-3", 'E'), // index damage (issue 16, docs/pcp.md)
    ("badti-4", 'E'), // index damage (issue 16, docs/pcp.md)
    ("bigace", 'E'),
    ("bozo-vm-disk", 'W'),
    ("bozo.client", 'E'),
    ("bug", 'E'),
    ("corrupted_labelset", 'E'),
    ("empty", 'E'),
    ("err_v1", 'E'),
    ("logsummary-bug", 'E'), // U32 value in a value block, as pmlogcheck
    ("ok-truncbin", 'E'),
    ("old611", 'W'),
];

#[test]
fn badarchives_give_positioned_errors_or_warnings() {
    let Some(ts) = common::pcp_testsuite() else {
        return;
    };
    let mut fails = Vec::new();
    for (set, want) in BAD {
        let p = ts.join("badarchives").join(set);
        let out = polytrace().arg("check").arg(&p).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        let code = out.status.code();
        let ok = match want {
            'E' => code == Some(2) && err.contains(": byte "),
            'W' => code == Some(0) && err.contains("warning:"),
            _ => code == Some(0) && !err.contains("warning:"),
        };
        if !ok {
            fails.push(format!("{set}: want {want}, got exit {code:?}: {err}"));
        }
        // The reader (dump) must not panic either.
        let d = polytrace()
            .args(["dump", "--style", "values"])
            .arg(&p)
            .output()
            .unwrap();
        if !matches!(d.status.code(), Some(0) | Some(2)) {
            fails.push(format!("{set}: dump exit {:?}", d.status.code()));
        }
    }
    // The pseudo-set of two corrupted .meta files: an error, not a panic.
    let p = ts.join("badarchives/bozo.client_v2.meta.bad.1");
    let out = polytrace().arg("check").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

#[test]
fn salvage_keeps_every_record_before_the_damage() {
    let Some(src) = testsuite("badarchives/ok-truncbin") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s");
    polytrace()
        .arg("convert")
        .arg(&src)
        .args(["--salvage", "--to", "pcp", "-o"])
        .arg(&out)
        .assert()
        .code(1)
        .stderr(predicates::str::contains("byte 204456, record 417"));
    // Without --salvage: positioned error, exit 2, nothing written.
    let out2 = dir.path().join("n");
    polytrace()
        .arg("convert")
        .arg(&src)
        .args(["--to", "pcp", "-o"])
        .arg(&out2)
        .assert()
        .code(2);
    assert!(!dir.path().join("n.meta").exists());
    let vals = run_ok(&["dump", "--style", "values", out.to_str().unwrap()]);
    let n = String::from_utf8(vals).unwrap();
    let times: std::collections::BTreeSet<&str> =
        n.lines().filter_map(|l| l.split(' ').next()).collect();
    assert_eq!(times.len(), 416, "every one of the 416 intact results");
    if let Some(check) = common::peer("pmlogcheck") {
        assert!(Proc::new(check).arg(&out).status().unwrap().success());
    }
}

// ------------------------------------------------------- listing vs pmdumplog

/// The flags whose output `polytrace dump` reproduces.
const LISTING_FLAGS: [&str; 9] = ["-a", "-e", "-h", "-I", "-M", "-xxx", "-Z", "UTC", "--"];

/// Sets whose listing differs from pmdumplog, and why (the full sweep
/// checks that exactly these differ).
const LISTING_KNOWN: [(&str, &str); 2] = [
    (
        "binning",
        "same listing, but its last index entry points past the end of the volume: \
         damage, exit 2 where pmdumplog exits 0 (issue 16, docs/pcp.md)",
    ),
    (
        "procpid-encode2",
        "instance names that are not UTF-8 (listed lossily)",
    ),
];

/// `polytrace dump SET` against pmdumplog; None when identical.
fn listing_diff(set: &str) -> Option<String> {
    let ts = common::pcp_testsuite()?;
    let dumplog = common::peer("pmdumplog")?;
    let src = ts.join("archives").join(set);
    let want = Proc::new(&dumplog)
        .args(LISTING_FLAGS)
        .arg(&src)
        .output()
        .unwrap();
    let got = Proc::new(common::bin())
        .arg("dump")
        .arg(&src)
        .output()
        .unwrap();
    // Both fail on a damaged set; then the listings up to the damage agree.
    if want.status.success() != got.status.success() {
        return Some(format!(
            "{set}: pmdumplog exit {:?}, polytrace exit {:?}: {}",
            want.status.code(),
            got.status.code(),
            String::from_utf8_lossy(&got.stderr)
        ));
    }
    if want.stdout != got.stdout {
        return Some(format!(
            "{set}: {}",
            common::first_diff(
                &String::from_utf8_lossy(&want.stdout),
                &String::from_utf8_lossy(&got.stdout)
            )
            .unwrap_or_default()
        ));
    }
    None
}

/// The listing equals pmdumplog's on compressed (one xz volume of 42 MB,
/// several xz volumes, xz metadata, a cut-short xz volume), no-index and
/// event-record sets, and on those that pin libpcp's orders: a metric's
/// several names (20180102, foo+) and same-time instance-domain records
/// (bigace_v2).
#[test]
fn listing_matches_pmdumplog_on_testsuite_sets() {
    let sets = [
        "bozo-20170904",
        "20180102",
        "foo+",
        "bigace_v2",
        "20190628.04.03",
        "pcp-pidstat-timezone",
        "multi-xz/20150508.11.44",
        "multi-xz/20150508.11.46",
        "multi-corrupted/20150508.11.50",
        "ok-noti-bigbin",
        "eventrec",
        "eventrec-old",
        "ok-mv-bar",
    ];
    let fails = parallel(&sets, listing_diff);
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

/// Help text that is not UTF-8 is listed as stored, as pmdumplog does.
#[test]
fn non_utf8_help_text_is_listed_as_stored() {
    let Some((dumplog, dir)) = common::peer_and_scratch("pmdumplog") else {
        return;
    };
    for m in ["0", "index", "meta"] {
        let mut b = std::fs::read(corpus_pcp().join(format!("live_v3.{m}"))).unwrap();
        if m == "meta" {
            // Same length, so every record stays well framed.
            let (from, to) = (b"command name".as_slice(), b"command n\xc9me".as_slice());
            let mut n = 0;
            while let Some(at) = b.windows(from.len()).position(|w| w == from) {
                b[at..at + to.len()].copy_from_slice(to);
                n += 1;
            }
            assert!(n > 0);
        }
        std::fs::write(dir.path().join(format!("a.{m}")), b).unwrap();
    }
    let base = dir.path().join("a");
    let want = Proc::new(&dumplog)
        .args(LISTING_FLAGS)
        .arg(&base)
        .output()
        .unwrap();
    let got = run_ok(&["dump", base.to_str().unwrap()]);
    assert!(got.windows(2).any(|w| w == b"n\xc9"));
    assert!(got == want.stdout);
}

/// A damaged xz stream in the middle of the last volume (decoded in the
/// background): exit 2 naming the member, or with --salvage exit 1 and the
/// listing of every record decoded before the damage.
#[test]
fn damaged_xz_volume_is_reported_and_salvaged() {
    use std::io::Write;
    let Some(src) = testsuite("archives/chartqa1") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // One plain volume, built from the source's three.
    let plain = dir.path().join("p");
    common::convert(&src, "pcp", &plain, &["-q"]);
    let full = run_ok(&["dump", plain.to_str().unwrap()]);
    let raw = std::fs::read(dir.path().join("p.0")).unwrap();
    let mut e = liblzma::write::XzEncoder::new(Vec::new(), 0);
    e.write_all(&raw).unwrap();
    let mut xz = e.finish().unwrap();
    let mid = xz.len() / 2;
    for b in &mut xz[mid..mid + 16] {
        *b ^= 0x5a;
    }
    std::fs::remove_file(dir.path().join("p.0")).unwrap();
    std::fs::write(dir.path().join("p.0.xz"), &xz).unwrap();
    let err = common::pt_exit(2, &["dump"], &[&plain]);
    assert!(
        err.contains("p.0.xz: byte ") && err.contains(", record "),
        "{err}"
    );
    let (code, got, err) = common::pt(&["dump", "--salvage"], &[&plain]);
    assert_eq!(code, 1, "{err}");
    let got = got.into_bytes();
    let records = |b: &[u8]| b.windows(7).filter(|w| w == b" bytes]").count();
    assert!(records(&got) > 0 && records(&got) < records(&full));
    // The label's "ending" differs (the end is unreadable); from the first
    // record to the last one printed, the salvaged listing is the full one.
    let first = |b: &[u8]| b.windows(2).position(|w| w == b"\n[").unwrap();
    let last = got.windows(2).rposition(|w| w == b"\n[").unwrap();
    let body = &got[first(&got)..last];
    assert!(full[first(&full)..].starts_with(body));
}

// ------------------------------------------------------------ full sweep

/// All 211 good sets (POLYTRACE_FULL=1): read, round-trip, compare.
#[test]
fn full_sweep_all_testsuite_sets() {
    if !common::full() {
        return;
    }
    let Some(root) = testsuite("archives") else {
        return;
    };
    let mut sets: Vec<String> = Vec::new();
    for e in walkdir::WalkDir::new(&root).max_depth(2) {
        let e = e.unwrap();
        let n = e.file_name().to_string_lossy().to_string();
        for suf in [".meta", ".meta.xz", ".meta.bz2", ".meta.gz"] {
            if let Some(b) = n.strip_suffix(suf) {
                let rel = e
                    .path()
                    .parent()
                    .unwrap()
                    .strip_prefix(&root)
                    .unwrap()
                    .join(b);
                sets.push(rel.display().to_string());
            }
        }
    }
    sets.sort();
    sets.dedup();
    assert_eq!(sets.len(), 211);
    let leaked: Vec<&'static str> = sets
        .into_iter()
        .filter(|s| s != "multi-corrupted/20150508.11.50") // truncated on purpose
        .map(|s| &*Box::leak(s.into_boxed_str()))
        .collect();
    // binning's index points past the end of its volume: damage (issue 16).
    let mut fails = parallel(&leaked, |s| {
        round_trip(s, true, if s == "binning" { &["--salvage"] } else { &[] })
    });
    let mut differ: Vec<String> = parallel(&leaked, listing_diff)
        .into_iter()
        .map(|m| m.split(':').next().unwrap_or("").to_string())
        .collect();
    differ.sort();
    let mut known: Vec<String> = LISTING_KNOWN.iter().map(|k| k.0.to_string()).collect();
    known.sort();
    if differ != known {
        fails.push(format!("listings differ on {differ:?}, expected {known:?}"));
    }
    eprintln!(
        "{} of {} sets round-trip identically",
        leaked.len() - fails.len(),
        leaked.len()
    );
    assert!(
        fails.is_empty(),
        "{} failures:\n{}",
        fails.len(),
        fails.join("\n")
    );
}
