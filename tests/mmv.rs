//! PCP MMV: reader, writer and dump against the corpus references, the PCP
//! testsuite files and the real `mmvdump`.
mod common;

use assert_cmd::Command;
use polytrace::formats::{self, mmv};
use polytrace::input::Input;
use polytrace::model::*;
use polytrace::options::WriteOptions;
use polytrace::output::OutTarget;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const CORPUS: [&str; 3] = ["research_v1", "research_v2", "research_py_v1"];
const TESTSUITE: [&str; 3] = ["KeyboardReader", "large-parfait", "pytest"];

fn corpus_mmv() -> PathBuf {
    common::corpus().join("mmv")
}

fn v3_dir() -> PathBuf {
    common::testdata().join("mmv")
}

/// The three PCP testsuite MMV files, decompressed into `dir` under their
/// own names (mmvdump prints the name as given).
fn testsuite_files(dir: &Path) -> Vec<PathBuf> {
    let Some(ts) = common::pcp_testsuite() else {
        return vec![];
    };
    TESTSUITE
        .iter()
        .map(|n| {
            let mut data = Vec::new();
            let f = std::fs::File::open(ts.join("mmv").join(format!("{n}.xz"))).unwrap();
            liblzma::read::XzDecoder::new(f)
                .read_to_end(&mut data)
                .unwrap();
            let p = dir.join(n);
            std::fs::write(&p, data).unwrap();
            p
        })
        .collect()
}

fn ours_dump(dir: &Path, name: &str) -> (i32, String) {
    let out = Command::new(common::bin())
        .current_dir(dir)
        .args(["dump", name])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn mmvdump(tool: &Path, dir: &Path, name: &str) -> (i32, String) {
    let (code, out, _) =
        common::outcome(std::process::Command::new(tool).current_dir(dir).arg(name));
    (code, out)
}

/// Drop the value of ELAPSED lines with an open interval (it depends on now).
fn mask_open_intervals(s: &str) -> String {
    s.lines()
        .map(|l| {
            if l.contains("(value=") && !l.contains("/extra=0)") {
                let (a, b) = l.split_once(" = ").unwrap();
                let (_, c) = b.split_once(" (").unwrap();
                format!("{a} = <now> ({c}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

fn read_trace(p: &Path) -> (Trace, Vec<polytrace::Diagnostic>) {
    let input = Input::resolve(p).unwrap();
    let f = formats::get(FormatId::Mmv);
    assert_eq!(f.detect(&input), 100);
    let mut r = f.open(&input, &Default::default()).unwrap();
    let t = Trace::collect(r.as_mut()).unwrap();
    let d = r.diagnostics().to_vec();
    (t, d)
}

fn write_trace(t: &Trace, p: &Path, opts: &WriteOptions) -> LossReport {
    let f = formats::get(FormatId::Mmv);
    let mut w = f
        .create(&OutTarget::Path(p.to_path_buf()), &t.header, opts)
        .unwrap();
    for it in &t.items {
        w.write_item(it).unwrap();
    }
    w.finish().unwrap()
}

// ------------------------------------------------------------------ dump

/// The items of one kind, by reference: `items_of!(t.items, Item::Help)`.
macro_rules! items_of {
    ($items:expr, $kind:path) => {
        $items
            .iter()
            .filter_map(|i| match i {
                $kind(x) => Some(x),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
}

#[test]
fn dump_reproduces_corpus_mmvdump_byte_for_byte() {
    for n in CORPUS {
        let want = std::fs::read_to_string(corpus_mmv().join(format!("{n}.mmvdump.txt"))).unwrap();
        let (rc, got) = ours_dump(&corpus_mmv(), &format!("{n}.mmv"));
        assert_eq!(rc, 0, "{n}");
        assert!(got == want, "{n}: {:?}", common::first_diff(&want, &got));
    }
}

#[test]
fn dump_equals_real_mmvdump_on_testsuite_and_v3() {
    let Some((tool, tmp)) = common::peer_and_scratch("mmvdump") else {
        return;
    };
    let mut n = 0;
    for p in testsuite_files(tmp.path()) {
        let name = p.file_name().unwrap().to_str().unwrap();
        let (rc1, want) = mmvdump(&tool, tmp.path(), name);
        let (rc2, got) = ours_dump(tmp.path(), name);
        assert_eq!((rc1, rc2), (0, 0), "{name}");
        assert!(got == want, "{name}: {:?}", common::first_diff(&want, &got));
        n += 1;
    }
    if common::pcp_testsuite().is_some() {
        assert_eq!(n, 3);
    }
    // v3 (labels, open ELAPSED interval) written by the real libpcp_mmv.
    let (rc1, want) = mmvdump(&tool, &v3_dir(), "research_v3.mmv");
    let (rc2, got) = ours_dump(&v3_dir(), "research_v3.mmv");
    assert_eq!((rc1, rc2), (0, 0));
    let (want, got) = (mask_open_intervals(&want), mask_open_intervals(&got));
    assert!(got == want, "{:?}", common::first_diff(&want, &got));
    assert!(
        want.contains("= <now> (value=0/extra=-"),
        "the open interval is exercised"
    );
    // and the stored reference agrees too
    let stored = std::fs::read_to_string(v3_dir().join("research_v3.mmvdump.txt")).unwrap();
    assert_eq!(mask_open_intervals(&stored), got);
}

// ------------------------------------------------------------------ reader

#[test]
fn reader_maps_research_v1_onto_the_model() {
    let (t, _) = read_trace(&corpus_mmv().join("research_v1.mmv"));
    let h = &t.header;
    assert_eq!(h.source, FormatId::Mmv);
    assert_eq!(h.version, "1");
    assert_eq!(h.extras.u64(mmv::keys::FLAGS), Some(0));
    assert_eq!(h.extras.i64(mmv::keys::CLUSTER), Some(11));
    assert_eq!(h.extras.i64(mmv::keys::PID), Some(14376));
    assert_eq!(h.extras.u64(mmv::keys::G1), Some(7710836545507018266));
    // creation time = g1 >> 32 seconds, low word microseconds
    let g1 = 7710836545507018266u64;
    let start = Timestamp::from_secs_micros((g1 >> 32) as i64, (g1 & 0xffff_ffff) as u32);
    assert_eq!(h.start, Some(start));
    let metrics = items_of!(t.items, Item::Metric);
    assert_eq!(metrics.len(), 8);
    let req = metrics[0];
    assert_eq!(req.name(), "requests");
    // pmid = domain 70, cluster 11, item 1
    assert_eq!(req.id, (70 << 22) | (11 << 10) | 1);
    assert_eq!(req.vtype, ValueType::U64);
    assert_eq!(req.sem, Semantics::Counter);
    assert_eq!(req.units, Units::count());
    assert_eq!(req.help_short.as_deref(), Some("request counter"));
    assert_eq!(
        req.help_long.as_deref(),
        Some("total requests seen since start")
    );
    assert_eq!(
        req.extras.str(mmv::keys::PMDA_NAME),
        Some("mmv.research_v1.mmv.requests")
    );
    let busy = metrics[5];
    assert_eq!(busy.name(), "busy");
    assert_eq!(
        busy.vtype,
        ValueType::I64,
        "ELAPSED is served as a 64-bit counter"
    );
    assert_eq!(busy.units, Units::time(1));
    assert_eq!(busy.extras.i64(mmv::keys::TYPE), Some(9));
    let indom = items_of!(t.items, Item::Indom)[0];
    assert_eq!(indom.kind, IndomKind::Full);
    assert_eq!(indom.id, (70 << 22) | (11 << 11) | 1);
    let names: Vec<(i32, &str)> = indom
        .instances
        .iter()
        .map(|i| (i.id, i.name.as_str()))
        .collect();
    assert_eq!(names, [(0, "zero"), (1, "one"), (7, "seven")]);
    let helps = items_of!(t.items, Item::Help);
    assert_eq!(helps.len(), 2);
    assert_eq!(helps[0].text, "short indom help");
    let samples = items_of!(t.items, Item::Sample);
    assert_eq!(samples.len(), 1);
    assert_eq!(samples[0].time, start);
    let val = |name: &str| {
        let id = metrics.iter().find(|m| m.name() == name).unwrap().id;
        samples[0]
            .metrics
            .iter()
            .find(|m| m.metric == id)
            .unwrap()
            .values
            .clone()
            .unwrap()
    };
    assert_eq!(val("requests"), [(PM_IN_NULL, Value::U64(12345))]);
    assert_eq!(
        val("queue.depth"),
        [(0, Value::I64(-3)), (1, Value::I64(7)), (7, Value::I64(17))]
    );
    assert_eq!(val("temperature"), [(PM_IN_NULL, Value::F64(36.6))]);
    assert_eq!(val("ratio"), [(PM_IN_NULL, Value::F32(0.25))]);
    assert_eq!(val("status")[1], (1, Value::Str("running".into())));
    assert_eq!(val("bytes")[2], (7, Value::U64(4098)));
    assert_eq!(val("signed64"), [(PM_IN_NULL, Value::I64(-9_000_000_000))]);
    assert_eq!(val("busy"), [(PM_IN_NULL, Value::I64(0))]);
}

#[test]
fn reader_maps_v3_labels_and_open_interval() {
    let (t, diags) = read_trace(&v3_dir().join("research_v3.mmv"));
    assert_eq!(t.header.version, "3");
    assert_eq!(t.header.extras.u64(mmv::keys::FLAGS), Some(1));
    let labels = items_of!(t.items, Item::Labels);
    assert_eq!(labels.len(), 5);
    assert_eq!(labels[0].target, LabelTarget::Cluster(13));
    assert_eq!(labels[0].json, r#"{"app":"research"}"#);
    assert_eq!(labels[0].labels[0].name, "app");
    assert_eq!(labels[0].labels[0].value, r#""research""#);
    assert_eq!(
        labels[1].target,
        LabelTarget::Indom((70 << 22) | (13 << 11) | 2)
    );
    assert_eq!(
        labels[2].target,
        LabelTarget::Item((70 << 22) | (13 << 10) | 1)
    );
    assert_eq!(labels[2].labels[0].flags, 0x90, "ITEM | OPTIONAL");
    assert_eq!(labels[2].labels[0].value, "42");
    assert_eq!(labels[4].inst, 200);
    assert_eq!(labels[4].labels[0].value, "true");
    assert!(
        diags.iter().any(|d| d.msg.contains("interval open")),
        "the open ELAPSED interval is reported: {diags:?}"
    );
}

#[test]
fn sentinel_values_read_as_no_value() {
    // research_v2 has the SENTINEL flag; set one u64 value to all-ones.
    let mut data = std::fs::read(corpus_mmv().join("research_v2.mmv")).unwrap();
    data[656..664].fill(0xff); // the `requests` value
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("s.mmv");
    std::fs::write(&p, &data).unwrap();
    let (t, _) = read_trace(&p);
    let s = items_of!(t.items, Item::Sample)[0];
    assert_eq!(s.metrics[0].values, Ok(vec![]), "sentinel = no value");
    assert_eq!(s.metrics[1].values.as_ref().unwrap().len(), 3);
}

// ------------------------------------------------------------------ round trips

/// The corpus MMV files.
fn corpus_files() -> Vec<PathBuf> {
    (CORPUS.iter())
        .map(|n| corpus_mmv().join(format!("{n}.mmv")))
        .collect()
}

fn all_inputs(tmp: &Path) -> Vec<PathBuf> {
    let mut v = corpus_files();
    v.extend(testsuite_files(tmp));
    v.push(v3_dir().join("research_v3.mmv"));
    v
}

#[test]
fn mmv_to_mmv_round_trip_gives_the_same_mmvdump_listing() {
    let tool = common::peer("mmvdump");
    let tmp = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut identical = 0;
    let inputs = all_inputs(tmp.path());
    for p in &inputs {
        let name = p.file_name().unwrap().to_str().unwrap();
        let o = out.path().join(name);
        common::convert(p, "mmv", &o, &[]);
        let a = std::fs::read(p).unwrap();
        let b = std::fs::read(&o).unwrap();
        if a == b {
            identical += 1;
        }
        let (rc, want) = ours_dump(p.parent().unwrap(), name);
        assert_eq!(rc, 0);
        let (rc, got) = ours_dump(out.path(), name);
        assert_eq!(rc, 0);
        let (want, got) = (mask_open_intervals(&want), mask_open_intervals(&got));
        assert!(got == want, "{name}: {:?}", common::first_diff(&want, &got));
        if let Some(tool) = &tool {
            let (rc1, want) = mmvdump(tool, p.parent().unwrap(), name);
            let (rc2, got) = mmvdump(tool, out.path(), name);
            assert_eq!((rc1, rc2), (0, 0), "{name}");
            let (want, got) = (mask_open_intervals(&want), mask_open_intervals(&got));
            assert!(got == want, "{name}: {:?}", common::first_diff(&want, &got));
        }
    }
    // All but research_v3 (libpcp leaves uninitialised bytes after each label
    // payload's NUL) come back byte-identical.
    assert_eq!(identical, inputs.len() - 1);
}

/// Strip the recorded layout so the writer must lay the file out itself:
/// the result must match what libpcp_mmv itself wrote.
fn strip_layout(t: &mut Trace) {
    use mmv::keys::*;
    for k in [TOC, SIZE, STRINGS, TRAILER] {
        t.header.extras.remove(k);
    }
    for it in &mut t.items {
        match it {
            Item::Metric(m) => {
                Arc::make_mut(m).extras.remove(OFFSET);
            }
            Item::Indom(u) => {
                u.extras.remove(OFFSET);
            }
            Item::Sample(s) => {
                s.extras.remove(VALUES);
            }
            _ => {}
        }
    }
}

#[test]
fn default_layout_is_libpcp_mmv_layout() {
    let out = tempfile::tempdir().unwrap();
    let mut files = corpus_files();
    files.push(v3_dir().join("research_v3.mmv"));
    for p in files {
        let name = p.file_name().unwrap().to_str().unwrap();
        let (mut t, _) = read_trace(&p);
        strip_layout(&mut t);
        let o = out.path().join(name);
        let loss = write_trace(&t, &o, &WriteOptions::default());
        assert!(!loss.has_loss(), "{name}: {loss}");
        let (_, want) = ours_dump(p.parent().unwrap(), name);
        let (_, got) = ours_dump(out.path(), name);
        let (want, got) = (mask_open_intervals(&want), mask_open_intervals(&got));
        assert!(got == want, "{name}: {:?}", common::first_diff(&want, &got));
        if name != "research_v3.mmv" {
            assert_eq!(
                std::fs::read(&p).unwrap(),
                std::fs::read(&o).unwrap(),
                "{name}"
            );
        }
    }
}

// ------------------------------------------------------------------ writer

fn desc(id: u32, name: &str, t: ValueType, sem: Semantics, units: Units) -> MetricDesc {
    MetricDesc::new(id, name, t, sem, units)
}

/// A model with every MMV type, semantics, a spread of units, an indom,
/// help, labels and one value per (metric, instance).
fn every_type_trace(source: FormatId) -> Trace {
    let mut header = Header::new(source, "x");
    header.start = Some(Timestamp::from_secs_micros(1_700_000_000, 250));
    let t = Timestamp::from_secs_micros(1_700_000_000, 250);
    let indom = 77;
    let mut items = vec![Item::Indom(IndomUpdate {
        time: t,
        id: indom,
        kind: IndomKind::Full,
        instances: vec![
            Instance {
                id: 5,
                name: "five".into(),
            },
            Instance {
                id: 9,
                name: "nine".into(),
            },
        ],
        removed: vec![],
        extras: Extras::default(),
    })];
    let bps = Units {
        dim_space: 1,
        dim_time: -1,
        scale_space: 2,
        scale_time: 3,
        ..Units::NONE
    };
    let mut elapsed = desc(
        8,
        "app.busy",
        ValueType::I64,
        Semantics::Counter,
        Units::time(1),
    );
    elapsed.extras.set(mmv::keys::TYPE, ExtraValue::I64(9));
    let mut metrics = vec![
        desc(
            1,
            "app.i32",
            ValueType::I32,
            Semantics::Instant,
            Units::NONE,
        ),
        desc(
            2,
            "app.u32",
            ValueType::U32,
            Semantics::Counter,
            Units::count(),
        ),
        desc(
            3,
            "app.i64",
            ValueType::I64,
            Semantics::Discrete,
            Units::bytes(),
        ),
        desc(4, "app.u64", ValueType::U64, Semantics::Counter, bps),
        desc(
            5,
            "app.float",
            ValueType::F32,
            Semantics::Instant,
            Units::time(2),
        ),
        desc(
            6,
            "app.double",
            ValueType::F64,
            Semantics::Other(0),
            Units::time(3),
        ),
        desc(
            7,
            "app.string",
            ValueType::String,
            Semantics::Discrete,
            Units::NONE,
        ),
        elapsed,
    ];
    metrics[1].indom = Some(indom);
    metrics[1].help_short = Some("per-thing count".into());
    metrics[1].help_long = Some("a longer help text".into());
    let vals: Vec<Vec<(InstId, Value)>> = vec![
        vec![(PM_IN_NULL, Value::I64(-2_000_000_000))],
        vec![(5, Value::U64(4_000_000_000)), (9, Value::U64(7))],
        vec![(PM_IN_NULL, Value::I64(-9_000_000_000))],
        vec![(PM_IN_NULL, Value::U64(u64::MAX - 1))],
        vec![(PM_IN_NULL, Value::F32(1.5))],
        vec![(PM_IN_NULL, Value::F64(-2.25e10))],
        vec![(PM_IN_NULL, Value::Str("hello mmv".into()))],
        vec![(PM_IN_NULL, Value::I64(123_456))],
    ];
    for m in &metrics {
        items.push(Item::Metric(Arc::new(m.clone())));
    }
    items.push(Item::Help(Help {
        target: HelpTarget::Indom(indom),
        oneline: true,
        text: "things".into(),
    }));
    items.push(Item::Sample(Sample {
        time: t,
        raw_clock: None,
        metrics: metrics
            .iter()
            .zip(vals)
            .map(|(m, v)| MetricValues {
                metric: m.id,
                values: Ok(v),
            })
            .collect(),
        extras: Extras::default(),
    }));
    Trace { header, items }
}

fn expected_lines() -> Vec<&'static str> {
    vec![
        "] app.i32 = -2000000000",
        "] app.u32[5 or \"five\"] = 4000000000",
        "] app.u32[9 or \"nine\"] = 7",
        "] app.i64 = -9000000000",
        "] app.u64 = 18446744073709551614",
        "] app.float = 1.500000",
        "] app.double = -22500000000.000000",
        "] app.string = \"hello mmv\"",
        "] app.busy = 123456 (value=123456/extra=0)",
        "units=Mbyte / sec",
        "units=millisec",
        "units=byte",
        "sem=? (0x0)",
        "sem=discrete (0x4)",
        "type=elapsed (0x9)",
        "shorttext=per-thing count",
        "helptext=a longer help text",
        "shorttext=things",
    ]
}

#[test]
fn writer_every_type_and_version_accepted_by_mmvdump() {
    let tool = common::peer("mmvdump");
    let tmp = tempfile::tempdir().unwrap();
    for (forced, flags, labels) in [
        (None, 0u64, false),
        (Some(1), 0x1, false),
        (Some(2), 0x2, false),
        (Some(3), 0x4, false),
        (None, 0x7, true),
    ] {
        let mut t = every_type_trace(FormatId::Mmv);
        t.header
            .extras
            .set(mmv::keys::FLAGS, ExtraValue::U64(flags));
        t.header.extras.set(mmv::keys::CLUSTER, ExtraValue::I64(42));
        if labels {
            t.items.push(Item::Labels(LabelSet {
                time: None,
                target: LabelTarget::Item(2),
                inst: PM_IN_NULL,
                json: r#"{"role":"test"}"#.into(),
                labels: vec![Label {
                    name: "role".into(),
                    value: r#""test""#.into(),
                    flags: 0,
                }],
            }));
            t.items.push(Item::Labels(LabelSet {
                time: None,
                target: LabelTarget::Instances(77),
                inst: 9,
                json: r#"{"n":9}"#.into(),
                labels: vec![Label {
                    name: "n".into(),
                    value: "9".into(),
                    flags: 0x80,
                }],
            }));
        }
        let name = format!("t{}_{flags}.mmv", forced.unwrap_or(0));
        let p = tmp.path().join(&name);
        let opts = WriteOptions {
            mmv_version: forced,
            ..Default::default()
        };
        let loss = write_trace(&t, &p, &opts);
        assert!(!loss.has_loss(), "{name}: {loss}");
        let version = forced.unwrap_or(if labels { 3 } else { 1 });
        let (rc, ours) = ours_dump(tmp.path(), &name);
        assert_eq!(rc, 0, "{name}");
        assert!(
            ours.contains(&format!("Version    = {version}\n")),
            "{name}"
        );
        assert!(ours.contains("Cluster    = 42\n"));
        for l in expected_lines() {
            assert!(ours.contains(l), "{name}: missing {l:?} in\n{ours}");
        }
        if labels {
            assert!(ours.contains("] {\"role\":\"test\"}\n        flags=0x10, identity=0x2\n"));
            assert!(ours.contains(
                "] {\"n\":9}\n        flags=0xa0, identity=0x4d\n        internal=0x9\n"
            ));
        }
        if let Some(tool) = &tool {
            let (rc, theirs) = mmvdump(tool, tmp.path(), &name);
            assert_eq!(rc, 0, "mmvdump rejected {name}:\n{theirs}");
            assert!(
                theirs == ours,
                "{name}: {:?}",
                common::first_diff(&theirs, &ours)
            );
        }
        // and we read back what we wrote
        let (back, _) = read_trace(&p);
        let s = items_of!(back.items, Item::Sample)[0];
        assert_eq!(s.metrics.len(), 8);
        assert_eq!(
            s.metrics[6].values,
            Ok(vec![(PM_IN_NULL, Value::Str("hello mmv".into()))])
        );
    }
}

#[test]
fn writer_picks_v2_for_long_names_and_v3_for_labels() {
    let tmp = tempfile::tempdir().unwrap();
    let mut t = every_type_trace(FormatId::Pcp);
    if let Item::Indom(u) = &mut t.items[0] {
        u.instances[0].name = "i".repeat(70);
    }
    let p = tmp.path().join("v2.mmv");
    write_trace(&t, &p, &WriteOptions::default());
    let (back, _) = read_trace(&p);
    assert_eq!(back.header.version, "2");
    t.items.push(Item::Labels(LabelSet {
        time: None,
        target: LabelTarget::Cluster(0),
        inst: PM_IN_NULL,
        json: r#"{"a":1}"#.into(),
        labels: vec![Label {
            name: "a".into(),
            value: "1".into(),
            flags: 0,
        }],
    }));
    let p = tmp.path().join("v3.mmv");
    write_trace(&t, &p, &WriteOptions::default());
    let (back, _) = read_trace(&p);
    assert_eq!(back.header.version, "3");
    // forcing v1 truncates the long name and says so
    let p = tmp.path().join("v1.mmv");
    let loss = write_trace(
        &t,
        &p,
        &WriteOptions {
            mmv_version: Some(1),
            ..Default::default()
        },
    );
    assert!(
        loss.to_string()
            .contains("degraded: 1 instance names: truncated"),
        "{loss}"
    );
    assert!(
        loss.to_string().contains("labels need MMV version 3"),
        "{loss}"
    );
}

#[test]
fn writer_takes_the_last_sample_or_the_one_at() {
    let tmp = tempfile::tempdir().unwrap();
    let mut header = Header::new(FormatId::Pcp, "3");
    header.start = Some(Timestamp::from_secs_nanos(100, 0));
    let d = desc(1, "x.y", ValueType::U64, Semantics::Counter, Units::count());
    let mut items = vec![Item::Metric(Arc::new(d))];
    for (s, v) in [(100, 1u64), (101, 2), (102, 3)] {
        items.push(Item::Sample(Sample {
            time: Timestamp::from_secs_nanos(s, 0),
            raw_clock: None,
            metrics: vec![MetricValues {
                metric: 1,
                values: Ok(vec![(PM_IN_NULL, Value::U64(v))]),
            }],
            extras: Extras::default(),
        }));
    }
    items.push(common::event(
        Timestamp::from_secs_nanos(101, 0).0,
        0,
        None,
        vec![],
    ));
    let t = Trace { header, items };
    let value_of = |p: &Path| {
        let (b, _) = read_trace(p);
        b.items
            .iter()
            .find_map(|i| match i {
                Item::Sample(s) => Some(s.metrics[0].values.clone().unwrap()[0].1.clone()),
                _ => None,
            })
            .unwrap()
    };
    let p = tmp.path().join("last.mmv");
    let loss = write_trace(&t, &p, &WriteOptions::default());
    assert_eq!(value_of(&p), Value::U64(3));
    let r = loss.to_string();
    assert!(r.contains("dropped: 1 events"), "{r}");
    assert!(r.contains("dropped: 2 samples"), "{r}");
    let p = tmp.path().join("at.mmv");
    write_trace(
        &t,
        &p,
        &WriteOptions {
            at: Some(Timestamp::from_secs_nanos(101, 500)),
            ..Default::default()
        },
    );
    assert_eq!(value_of(&p), Value::U64(2));
    // the generation word is the snapshot time
    let (b, _) = read_trace(&p);
    assert_eq!(b.header.start, Some(Timestamp::from_secs_nanos(101, 0)));
}

#[test]
fn writer_renames_what_the_pmda_would_skip_and_marks_missing_values() {
    let tmp = tempfile::tempdir().unwrap();
    let mut t = every_type_trace(FormatId::Pcp);
    // a name with '-' and one starting with a digit
    for it in &mut t.items {
        if let Item::Metric(m) = it {
            let m = Arc::make_mut(m);
            if m.id == 1 {
                m.names = vec!["my-app.value".into()];
            }
            if m.id == 3 {
                m.names = vec!["9lives".into()];
            }
        }
        if let Item::Sample(s) = it {
            // no value for u32[nine]
            if let Ok(v) = &mut s.metrics[1].values {
                v.pop();
            }
        }
    }
    let p = tmp.path().join("names.mmv");
    let loss = write_trace(&t, &p, &WriteOptions::default());
    let r = loss.to_string();
    assert!(r.contains("degraded: 2 metric names: renamed"), "{r}");
    assert!(r.contains("SENTINEL"), "{r}");
    let (back, _) = read_trace(&p);
    let names: Vec<String> = back
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Metric(m) => Some(m.name().to_string()),
            _ => None,
        })
        .collect();
    assert!(names.contains(&"my_app.value".to_string()), "{names:?}");
    assert!(names.contains(&"m9lives".to_string()), "{names:?}");
    assert_eq!(back.header.extras.u64(mmv::keys::FLAGS), Some(4));
    let s = items_of!(back.items, Item::Sample)[0];
    assert_eq!(
        s.metrics[1].values,
        Ok(vec![(5, Value::U64(4_000_000_000))])
    );
    if let Some(tool) = common::peer("mmvdump") {
        let (rc, out) = mmvdump(&tool, tmp.path(), "names.mmv");
        assert_eq!(rc, 0, "{out}");
        common::assert_has(&out, "app.u32[9 or \"nine\"] = 4294967295\n");
    }
}

#[test]
fn writer_output_is_generation_complete() {
    let tmp = tempfile::tempdir().unwrap();
    let t = every_type_trace(FormatId::Pcp);
    let p = tmp.path().join("g.mmv");
    write_trace(&t, &p, &WriteOptions::default());
    let b = std::fs::read(&p).unwrap();
    let g1 = u64::from_ne_bytes(b[8..16].try_into().unwrap());
    let g2 = u64::from_ne_bytes(b[16..24].try_into().unwrap());
    assert_ne!(g1, 0);
    assert_eq!(g1, g2);
    assert_eq!(g1, (1_700_000_000u64 << 32) | 250);
}

// ------------------------------------------------------------------ bad input

/// `polytrace VERB [--salvage] P`: exit code, stdout and stderr.
fn run_verb(verb: &str, p: &Path, salvage: bool) -> (i32, String, String) {
    let args = [verb, "--salvage"];
    common::pt(&args[..1 + salvage as usize], &[p])
}

fn run_dump(p: &Path, salvage: bool) -> (i32, String, String) {
    run_verb("dump", p, salvage)
}

fn run_check(p: &Path, salvage: bool) -> (i32, String) {
    let (code, _, err) = run_verb("check", p, salvage);
    (code, err)
}

fn patched(tmp: &Path, name: &str, f: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let mut d = std::fs::read(corpus_mmv().join("research_v2.mmv")).unwrap();
    f(&mut d);
    let p = tmp.join(name);
    std::fs::write(&p, d).unwrap();
    p
}

#[test]
fn bad_input_gives_positioned_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let put64 =
        |d: &mut Vec<u8>, at: usize, v: u64| d[at..at + 8].copy_from_slice(&v.to_ne_bytes());
    let put32 =
        |d: &mut Vec<u8>, at: usize, v: u32| d[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    let cases: Vec<(PathBuf, &str)> = vec![
        // TOC[2] (metrics) offset past the end
        (
            patched(tmp.path(), "toc_off.mmv", |d| put64(d, 72 + 8, 1 << 40)),
            "byte 80",
        ),
        // TOC[3] (values) count that does not fit
        (
            patched(tmp.path(), "count.mmv", |d| put32(d, 88 + 4, 100_000)),
            "byte 96",
        ),
        // a metric's name offset pointing into VALUES, not STRINGS
        (
            patched(tmp.path(), "str_off.mmv", |d| put64(d, 224, 656)),
            "byte 224",
        ),
        // a string value's offset pointing at a metric entry
        (
            patched(tmp.path(), "val_str.mmv", |d| put64(d, 848 + 8, 224)),
            "byte 856",
        ),
        // instance indom pointer to nowhere
        (
            patched(tmp.path(), "inst.mmv", |d| put64(d, 152, 12345)),
            "byte 152",
        ),
        // TOC count larger than the file
        (
            patched(tmp.path(), "tocs.mmv", |d| put32(d, 24, 1_000_000)),
            "TOC",
        ),
    ];
    for (p, pos) in &cases {
        let (rc, err) = run_check(p, false);
        assert_eq!(rc, 2, "{}: {err}", p.display());
        assert!(err.contains(pos), "{}: want {pos:?} in {err}", p.display());
        let (rc, _) = run_check(p, true);
        assert_eq!(rc, 1, "salvage keeps the good part: {}", p.display());
        let (rc, _, _) = run_dump(p, false);
        assert_eq!(rc, 2, "{}", p.display());
    }
}

#[test]
fn generation_mismatch_and_foreign_byte_order() {
    let tmp = tempfile::tempdir().unwrap();
    let p = patched(tmp.path(), "gen.mmv", |d| d[16..24].fill(0));
    let (rc, err) = run_check(&p, false);
    assert_eq!(rc, 2);
    assert!(err.contains("still being written"), "{err}");
    let (rc, err) = run_check(&p, true);
    assert_eq!(rc, 1, "{err}");
    assert!(err.contains("still being written"), "{err}");
    // mmvdump's own listing stops at the mismatch, as ours does
    let (rc, out, _) = run_dump(&p, false);
    assert_eq!(rc, 2);
    common::assert_has(&out, "Generated2 = 0\nMismatched generation numbers");

    let p = patched(tmp.path(), "be.mmv", |d| {
        let v = i32::from_ne_bytes(d[4..8].try_into().unwrap());
        d[4..8].copy_from_slice(&v.swap_bytes().to_ne_bytes());
    });
    let (rc, err) = run_check(&p, false);
    assert_eq!(rc, 2);
    assert!(err.contains("other byte order"), "{err}");
    assert!(err.contains("byte 4"), "{err}");
}

#[test]
fn truncation_sweep_never_panics() {
    let tmp = tempfile::tempdir().unwrap();
    let mut files = corpus_files();
    files.push(v3_dir().join("research_v3.mmv"));
    for p in testsuite_files(tmp.path()) {
        // large-parfait (650 KB) only in the long sweep
        if !p.ends_with("large-parfait") || common::full() {
            files.push(p);
        }
    }
    let mut prefixes = 0;
    for p in files {
        let data = std::fs::read(&p).unwrap();
        let step = if data.len() > 100_000 { 61 } else { 1 };
        for n in (0..data.len()).step_by(step) {
            let cut = &data[..n];
            for salvage in [false, true] {
                if let Ok(r) = mmv::reader::open(&p, cut, salvage) {
                    let mut r: Box<dyn TraceReader> = Box::new(r);
                    while let Ok(Some(_)) = r.next_item() {}
                }
            }
            let mut sink = Vec::new();
            let _ = mmv::dump::mmvdump("x", cut, &mut sink);
            prefixes += 1;
        }
        // the full file reads cleanly without salvage
        assert!(
            mmv::reader::open(&p, &data, false).is_ok(),
            "{}",
            p.display()
        );
    }
    assert!(prefixes > 20_000, "{prefixes}");
}

#[test]
fn detect_and_info() {
    let p = corpus_mmv().join("research_v2.mmv");
    let out = Command::new(common::bin())
        .arg("info")
        .arg(&p)
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("format:    mmv (version 2)"), "{s}");
}

/// The real MMV PMDA (as a DSO in a local pminfo context) serves our files
/// as `mmv.<file>.<metric>` with the written values.
#[test]
fn mmv_pmda_serves_written_files() {
    let Some(pminfo) = common::peer("pminfo") else {
        return;
    };
    let dso = Path::new("/var/lib/pcp/pmdas/mmv/pmda_mmv.so");
    if !dso.exists() {
        eprintln!("skipping: no MMV PMDA DSO");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("mmv")).unwrap();
    let t = every_type_trace(FormatId::Pcp);
    write_trace(
        &t,
        &tmp.path().join("mmv").join("snap"),
        &WriteOptions::default(),
    );
    let (mut v3, _) = read_trace(&v3_dir().join("research_v3.mmv"));
    strip_layout(&mut v3);
    write_trace(
        &v3,
        &tmp.path().join("mmv").join("r3"),
        &WriteOptions::default(),
    );
    let root = tmp.path().join("root");
    std::fs::write(&root, "root {\n\tmmv\t70:*:*\n}\n").unwrap();
    // pminfo in a local context with only the MMV PMDA, reading tmp/mmv.
    let pminfo_mmv = |args: &[&str]| {
        let out = std::process::Command::new(&pminfo)
            .env("PCP_TMP_DIR", tmp.path())
            .arg("-n")
            .arg(&root)
            .args(["-L", "-K", "clear", "-K"])
            .arg(format!("add,70,{},mmv_init", dso.display()))
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let values = [
        "mmv.snap.app.i32\n    value -2000000000\n",
        "mmv.snap.app.u32\n    inst [5 or \"five\"] value 4000000000\n    inst [9 or \"nine\"] value 7\n",
        "mmv.snap.app.u64\n    value 18446744073709551614\n",
        "mmv.snap.app.string\n    value \"hello mmv\"\n",
        "mmv.snap.app.busy\n    value 123456\n",
        "mmv.snap.app.double\n    value -22500000000\n",
        // NOPREFIX file: no file name in the metric names
        "mmv.research3.hits\n    inst [100 or \"alpha\"] value 1234\n",
        "mmv.research3.name\n    value \"research app\"\n",
        "mmv.control.files\n    value 2\n",
    ];
    common::assert_has_all("pminfo -f mmv", &pminfo_mmv(&["-f", "mmv"]), &values);
    // v3 labels as the PMDA serves them (merged with context labels)
    let labels = [
        "\"app\":\"research\"",
        "\"shardset\":\"main\"",
        "\"unit_hint\":42",
        "inst [100 or \"alpha\"] labels {",
        "\"zone\":\"east\"",
        "\"primary\":true",
    ];
    let hits = pminfo_mmv(&["-l", "mmv.research3.hits"]);
    common::assert_has_all("pminfo -l", &hits, &labels);
}
