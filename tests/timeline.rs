//! Snabb timeline: dumps against Snabb's own listings, decoding against the
//! recorded ground truth, writer round trips, damaged-input sweeps.

mod common;

use assert_cmd::Command;
use polytrace::formats;
use polytrace::formats::timeline::{self, keys, reader::TimelineReader};
use polytrace::input::Input;
use polytrace::model::{
    Event, EventType, ExtraValue, Field, FieldType, FormatId, Header, Item, Trace, TraceReader,
    TraceWriter, Value, VecReader,
};
use polytrace::options::{DumpOptions, ReadOptions, WriteOptions};
use polytrace::output::OutTarget;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn tl_dir() -> PathBuf {
    common::corpus().join("timeline")
}

fn dats() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(tl_dir())
        .expect("corpus timeline/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "dat"))
        .collect();
    v.sort();
    assert!(v.len() >= 7, "corpus timeline/ has {} .dat files", v.len());
    v
}

fn stem(p: &Path) -> String {
    p.file_stem().unwrap().to_string_lossy().into_owned()
}

/// Each corpus sample, its stem, and its reference listing
/// `STEM.dump-VERSION.txt` from Snabb `version` if there is one.
fn with_reference(version: &str) -> Vec<(PathBuf, String, Option<PathBuf>)> {
    dats()
        .into_iter()
        .map(|dat| {
            let s = stem(&dat);
            let r = tl_dir().join(format!("{s}.dump-{version}.txt"));
            (dat, s, r.exists().then_some(r))
        })
        .collect()
}

fn run_dump(args: &[&str], file: &Path) -> (Vec<u8>, i32) {
    let out = Command::new(common::bin())
        .arg("dump")
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    (out.stdout, out.status.code().unwrap_or(-1))
}

fn assert_same(what: &str, expected: &[u8], actual: &[u8]) {
    if expected != actual {
        let d = common::first_diff(
            &String::from_utf8_lossy(expected),
            &String::from_utf8_lossy(actual),
        );
        panic!("{what}: differs: {d:?}");
    }
}

fn dump_mem(path: &Path, data: &[u8], d: &DumpOptions) -> Vec<u8> {
    let mut out = Vec::new();
    timeline::dump_bytes(path, data, &ReadOptions::default(), d, &mut out).unwrap();
    out
}

/// The default listing of the timeline file at `p`.
fn listing_of(p: &Path) -> String {
    let data = std::fs::read(p).unwrap();
    String::from_utf8(dump_mem(p, &data, &DumpOptions::default())).unwrap()
}

/// Assert `listing` has `count` lines, line `i` being `line` for each pair
/// of `want`.
fn assert_lines(listing: &str, count: usize, want: &[(usize, &str)]) {
    let lines: Vec<&str> = listing.lines().collect();
    assert_eq!(lines.len(), count, "{listing}");
    for &(i, line) in want {
        assert_eq!(lines[i], line, "line {i}");
    }
}

#[test]
fn default_dump_is_snabb_9501c6050_byte_for_byte() {
    let mut n = 0;
    for (dat, s, r) in with_reference("9501c6050") {
        let Some(r) = r else {
            assert!(s.starts_with('v'), "{s}: A sample without its reference");
            continue;
        };
        let (out, rc) = run_dump(&[], &dat);
        assert_eq!(rc, 0, "{s}");
        assert_same(&s, &std::fs::read(&r).unwrap(), &out);
        n += 1;
        let r10 = tl_dir().join(format!("{s}.dump-9501c6050-max10.txt"));
        if r10.exists() {
            let (out, _) = run_dump(&["--max", "10"], &dat);
            assert_same(&format!("{s} max10"), &std::fs::read(&r10).unwrap(), &out);
            // Snabb's off-by-one: 11 rows.
            assert_eq!(out.split(|&b| b == b'\n').count() - 2, 11);
        }
    }
    assert_eq!(n, 5, "A2 samples with a 9501c6050 reference");
}

/// Ring size and the number of written slots from the ground truth.
fn ring_and_logged(s: &str) -> (usize, usize) {
    let data = std::fs::read(tl_dir().join(format!("{s}.dat"))).unwrap();
    let last = u64::from_le_bytes(data[24..32].try_into().unwrap()) as usize;
    let calls = std::fs::read_to_string(tl_dir().join(format!("{s}.calls.tsv"))).unwrap();
    let logged = calls
        .lines()
        .skip(1)
        .filter(|l| l.split('\t').nth(1) == Some("logged"))
        .count();
    (last + 1, logged.min(last + 1))
}

#[test]
fn newest_first_matches_snabb_7629b0f6b() {
    let mut exact = 0;
    for (dat, s, r) in with_reference("7629b0f6b") {
        let Some(r) = r else {
            continue;
        };
        if tl_dir().join(format!("{s}.dump-7629b0f6b.stderr")).exists() {
            // Snabb hung (empty ring): ours terminates with the header row.
            let (out, rc) = run_dump(&["--newest-first"], &dat);
            assert_eq!(rc, 0);
            assert_eq!(out, timeline::dump::HEADER_NEWEST, "{s}");
            let (out, _) = run_dump(&["--newest-first", "--unwritten-slots"], &dat);
            assert_eq!(out, timeline::dump::HEADER_NEWEST, "{s}");
            continue;
        }
        let reference = std::fs::read(&r).unwrap();
        // Compatibility mode: every row Snabb printed, byte for byte.
        let (out, rc) = run_dump(&["--newest-first", "--unwritten-slots"], &dat);
        assert_eq!(rc, 0);
        assert_same(&format!("{s} --unwritten-slots"), &reference, &out);
        exact += 1;
        // Default newest-first: the same rows without those for unwritten
        // slots (one line each, at the end of Snabb's listing).
        let (n, written) = ring_and_logged(&s);
        let text = String::from_utf8(reference.clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let keep = lines.len() - (n - written);
        for l in &lines[keep..] {
            // Unwritten slots print string 0 twice: "<cat> <cat>".
            assert!(l.starts_with("0    0 "), "{s}: {l}");
        }
        let mut expected = lines[..keep].join("\n");
        expected.push('\n');
        let (out, _) = run_dump(&["--newest-first"], &dat);
        assert_same(&format!("{s} --newest-first"), expected.as_bytes(), &out);
        let r10 = tl_dir().join(format!("{s}.dump-7629b0f6b-max10.txt"));
        if r10.exists() {
            let (out, _) = run_dump(&["--newest-first", "--max", "10"], &dat);
            assert_same(
                &format!("{s} nf max10"),
                &std::fs::read(&r10).unwrap(),
                &out,
            );
        }
    }
    assert_eq!(exact, 4);
}

fn read_all(path: &Path, opts: &ReadOptions) -> (Header, Vec<Arc<EventType>>, Vec<Event>) {
    let data = std::fs::read(path).unwrap();
    let mut r = TimelineReader::from_bytes(path, data, opts).unwrap();
    let h = r.header().clone();
    let (mut types, mut evs) = (Vec::new(), Vec::new());
    while let Some(it) = r.next_item().unwrap() {
        match it {
            Item::EventType(t) => {
                assert_eq!(
                    t.id as usize,
                    types.len(),
                    "type ids dense, defined before use"
                );
                types.push(t)
            }
            Item::Event(e) => {
                assert!(
                    (e.type_id as usize) < types.len(),
                    "type defined before use"
                );
                evs.push(e)
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    (h, types, evs)
}

struct Call {
    slot: usize,
    category: String,
    what: String,
    format: String,
    args: Vec<f64>,
}

fn calls(s: &str) -> Vec<Call> {
    let t = std::fs::read_to_string(tl_dir().join(format!("{s}.calls.tsv"))).unwrap();
    let mainline = t.lines().next().unwrap().contains("\tevent\t");
    t.lines()
        .skip(1)
        .filter_map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            if c[1] != "logged" {
                return None;
            }
            let argtxt = if mainline { c[5] } else { c[6] };
            Some(Call {
                slot: c[2].parse().unwrap(),
                category: c[3].into(),
                what: c[4].into(),
                format: if mainline {
                    String::new()
                } else {
                    c[5].replace("\\n", "\n").replace("\\t", "\t")
                },
                args: argtxt
                    .split(',')
                    .filter(|a| !a.is_empty())
                    .map(|a| a.parse().unwrap())
                    .collect(),
            })
        })
        .collect()
}

/// The entries a ring of `n` slots holds after these calls, oldest first.
fn survivors(c: Vec<Call>, n: usize) -> Vec<Call> {
    let k = c.len().saturating_sub(n);
    c.into_iter().skip(k).collect()
}

#[test]
fn m3_decodes_to_the_recorded_calls() {
    let p = tl_dir().join("v3-small-wrapped.dat");
    let (h, types, evs) = read_all(&p, &ReadOptions::default());
    assert_eq!(h.version, "M3");
    assert_eq!(h.extras.u64(keys::NEXT), Some(950), "inferred head");
    let want = survivors(calls("v3-small-wrapped"), 1024);
    assert_eq!(evs.len(), want.len());
    for (e, c) in evs.iter().zip(&want) {
        let t = &types[e.type_id as usize];
        assert_eq!(e.extras.u64(keys::SLOT), Some(c.slot as u64));
        assert_eq!(
            (t.category.as_str(), t.name.as_str()),
            (c.category.as_str(), c.what.as_str())
        );
        let got: Vec<f64> = e.fields.iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(got.len(), t.fields.len());
        assert_eq!(&got[..], &c.args[..got.len()], "slot {}", c.slot);
        assert!(e.extras.get(keys::ARGS_UNRELIABLE).is_none());
    }
}

#[test]
fn a2_decodes_to_the_recorded_calls() {
    for s in [
        "a2-small-wrapped",
        "a2-multiline",
        "a2-priorities",
        "a2-unwrapped",
    ] {
        let data = std::fs::read(tl_dir().join(format!("{s}.dat"))).unwrap();
        let n = (u64::from_le_bytes(data[24..32].try_into().unwrap()) + 1) as usize;
        let (h, types, evs) = read_all(&tl_dir().join(format!("{s}.dat")), &ReadOptions::default());
        assert_eq!(h.version, "A2");
        assert!(matches!(
            h.time_base,
            polytrace::model::TimeBase::Cycles { hz: None, .. }
        ));
        let want = survivors(calls(s), n);
        assert_eq!(evs.len(), want.len(), "{s}");
        let first_cat = want.first().map(|c| c.category.clone()).unwrap_or_default();
        for (e, c) in evs.iter().zip(&want) {
            let t = &types[e.type_id as usize];
            assert_eq!(e.extras.u64(keys::SLOT), Some(c.slot as u64), "{s}");
            assert_eq!(t.format.as_deref(), Some(c.format.as_str()), "{s}");
            assert_eq!(t.priority.as_deref(), Some(c.what.as_str()), "{s}");
            // Snabb's decoding: the category is the first string interned.
            let expect_cat = if s == "a2-multiline" {
                "ml"
            } else {
                &first_cat
            };
            assert_eq!(t.category, expect_cat, "{s}");
            let raw = e.extras.u64(keys::MSG_ID).unwrap();
            assert_eq!((raw >> 16) & 0xffff, t.extras.u64(keys::MSG_OFF).unwrap());
            for (k, v) in e.fields.iter().enumerate() {
                let Value::U64(v) = v else { panic!() };
                let a = c.args.get(k).copied().unwrap_or(0.0);
                if a >= 0.0 && a.fract() == 0.0 {
                    assert_eq!(*v as f64, a, "{s} slot {} arg {k}", c.slot);
                }
            }
        }
    }
}

fn unescape(s: &str) -> String {
    s.replace("\\n", "\n").replace("\\t", "\t")
}

#[test]
fn m2_and_m3_field_values_match_rawfields() {
    for s in ["v2-small-wrapped", "v3-small-wrapped"] {
        let p = tl_dir().join(format!("{s}.dat"));
        let (_h, types, evs) = read_all(&p, &ReadOptions::default());
        let raw = std::fs::read_to_string(tl_dir().join(format!("{s}.rawfields.tsv"))).unwrap();
        let mut by_slot = std::collections::HashMap::new();
        for e in &evs {
            by_slot.insert(e.extras.u64(keys::SLOT).unwrap(), e);
        }
        let mut checked = 0;
        for l in raw.lines().skip(2) {
            let c: Vec<&str> = l.split('\t').collect();
            let slot: u64 = c[0].parse().unwrap();
            let tsc: f64 = c[1].parse().unwrap();
            let Some(e) = by_slot.get(&slot) else {
                assert_eq!(tsc, 0.0, "{s}: written slot {slot} not decoded");
                continue;
            };
            let t = &types[e.type_id as usize];
            assert_eq!(e.raw_clock.unwrap() as f64, tsc, "{s} {slot}");
            assert_eq!(e.extras.u64(keys::MSG_ID).unwrap().to_string(), c[2]);
            assert_eq!(e.extras.u64(keys::CORE).unwrap().to_string(), c[4]);
            assert_eq!(e.extras.u64(keys::NUMA).unwrap().to_string(), c[5]);
            let args: Vec<f64> = c[7].split(',').map(|a| a.parse().unwrap()).collect();
            let mut got: Vec<f64> = e.fields.iter().map(|v| v.as_f64().unwrap()).collect();
            if let Some(ExtraValue::List(l)) = e.extras.get(keys::ARGS) {
                got = l
                    .iter()
                    .map(|v| match v {
                        ExtraValue::F64(f) => *f,
                        ExtraValue::U64(u) => *u as f64,
                        _ => panic!(),
                    })
                    .collect();
            }
            got.resize(6, 0.0);
            assert_eq!(got, args, "{s} slot {slot}");
            assert_eq!(t.extras.str(keys::SPEC), Some(unescape(c[8]).as_str()));
            if s.starts_with("v2") {
                assert_eq!(e.extras.bool(keys::ARGS_UNRELIABLE), Some(true));
            }
            checked += 1;
        }
        assert_eq!(checked, 1024, "{s}");
    }
    // The M2 logger bug as the spec describes it, against the ground truth.
    let (_h, types, evs) = read_all(
        &tl_dir().join("v2-small-wrapped.dat"),
        &ReadOptions::default(),
    );
    let want = survivors(calls("v2-small-wrapped"), 1024);
    assert_eq!(evs.len(), want.len());
    for (e, c) in evs.iter().zip(&want) {
        assert_eq!(types[e.type_id as usize].name, c.what);
        if c.args.len() == 6 {
            let g: Vec<f64> = e.fields.iter().map(|v| v.as_f64().unwrap()).collect();
            assert_eq!(g[0], 0.0);
            assert_eq!(g[1..3], c.args[1..3]);
            assert_eq!(g[3], c.args[4]);
            assert_eq!(g[4], c.args[5]);
        }
    }
}

fn convert(src: &Path, dst: &Path, wopts: &WriteOptions) -> polytrace::model::LossReport {
    let f = formats::get(FormatId::Timeline);
    let input = Input::resolve(src).unwrap();
    let mut r = f.open(&input, &ReadOptions::default()).unwrap();
    let mut w = f
        .create(&OutTarget::Path(dst.to_path_buf()), r.header(), wopts)
        .unwrap();
    while let Some(it) = r.next_item().unwrap() {
        w.write_item(&it).unwrap();
    }
    w.finish().unwrap()
}

#[test]
fn same_layout_round_trips_reproduce_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    for dat in dats() {
        let s = stem(&dat);
        let v = if s.starts_with("v2") {
            continue;
        } else if s.starts_with('v') {
            "M3"
        } else {
            "A2"
        };
        let w = WriteOptions {
            timeline_version: Some(v.into()),
            ..Default::default()
        };
        let one = tmp.path().join(format!("{s}.1.dat"));
        let two = tmp.path().join(format!("{s}.2.dat"));
        let loss = convert(&dat, &one, &w);
        assert!(!loss.has_loss(), "{s}: {loss}");
        convert(&one, &two, &w);
        let (orig, a, b) = (
            std::fs::read(&dat).unwrap(),
            std::fs::read(&one).unwrap(),
            std::fs::read(&two).unwrap(),
        );
        assert!(a == b, "{s}: second round trip differs");
        assert!(orig == a, "{s}: written file differs from Snabb's");
        for d in [
            DumpOptions::default(),
            DumpOptions {
                newest_first: true,
                ..Default::default()
            },
        ] {
            assert_same(&s, &dump_mem(&dat, &orig, &d), &dump_mem(&one, &a, &d));
        }
    }
}

#[test]
fn cross_layout_conversions_keep_the_entries() {
    let tmp = tempfile::tempdir().unwrap();
    // A2 → M3 → A2 (fresh rings): same events, same order, same args.
    let src = tl_dir().join("a2-small-wrapped.dat");
    let m3 = tmp.path().join("x.m3");
    let a2 = tmp.path().join("x.a2");
    let mut w = WriteOptions {
        timeline_version: Some("M3".into()),
        entries: Some(1024),
        ..Default::default()
    };
    let loss = convert(&src, &m3, &w);
    assert!(loss.dropped.is_empty(), "{loss}");
    assert!(
        loss.degraded.keys().all(|(_, why)| why.contains(" ip ")),
        "{loss}"
    );
    w.timeline_version = Some("A2".into());
    convert(&m3, &a2, &w);
    let (_, t0, e0) = read_all(&src, &ReadOptions::default());
    let (h1, t1, e1) = read_all(&m3, &ReadOptions::default());
    let (_, t2, e2) = read_all(&a2, &ReadOptions::default());
    // Priorities survive M3 as a `priority=` attribute.
    let pr = |t: &[Arc<EventType>]| -> Vec<Option<String>> {
        t.iter().map(|t| t.priority.clone()).collect()
    };
    assert_eq!(pr(&t0), pr(&t2));
    assert_eq!(h1.version, "M3");
    assert_eq!((e0.len(), e1.len(), e2.len()), (1024, 1024, 1024));
    for ((a, b), c) in e0.iter().zip(&e1).zip(&e2) {
        assert_eq!(a.raw_clock, b.raw_clock);
        assert_eq!(a.raw_clock, c.raw_clock);
        let va: Vec<f64> = a.fields.iter().map(|v| v.as_f64().unwrap()).collect();
        let vb: Vec<f64> = b.fields.iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(va, vb);
        assert_eq!(
            t0[a.type_id as usize].category,
            t1[b.type_id as usize].category
        );
        assert_eq!(a.extras.u64(keys::CORE), c.extras.u64(keys::CORE));
    }
    // The A2 written from M3 dumps the oldest → newest rows Snabb printed
    // for the original (message text apart: the format went through a spec).
    let d0 = String::from_utf8(dump_mem(
        &src,
        &std::fs::read(&src).unwrap(),
        &DumpOptions::default(),
    ))
    .unwrap();
    let d2 = String::from_utf8(dump_mem(
        &a2,
        &std::fs::read(&a2).unwrap(),
        &DumpOptions::default(),
    ))
    .unwrap();
    let cols = |s: &str| -> Vec<String> { s.lines().map(|l| l[..27].to_string()).collect() };
    assert_eq!(cols(&d0), cols(&d2));
}

/// Events from another format: the dump shows their category and message
/// (Snabb's own writer would have shown the first string as category).
/// A timeline writer of `entries` slots into `p`.
fn timeline_writer(p: &Path, h: &Header, entries: u64) -> Box<dyn TraceWriter> {
    let opts = WriteOptions {
        entries: Some(entries),
        ..Default::default()
    };
    formats::get(FormatId::Timeline)
        .create(&OutTarget::Path(p.to_path_buf()), h, &opts)
        .unwrap()
}

#[test]
fn foreign_events_dump_with_their_category() {
    let mut h = Header::new(FormatId::Kpi, "1");
    h.time_base = polytrace::model::TimeBase::Absolute;
    let mut items = Vec::new();
    let mut t0 = EventType::new(
        0,
        "engine",
        "breath",
        vec![Field::new("n", FieldType::Uint(4))],
    );
    t0.priority = Some("app".into());
    let t1 = EventType::new(
        1,
        "app",
        "pulled",
        vec![
            Field::new("pkts", FieldType::Uint(8)),
            Field::new("name", FieldType::String),
            Field::new("bytes_total", FieldType::Int(8)),
        ],
    );
    items.push(Item::EventType(Arc::new(t0)));
    items.push(Item::EventType(Arc::new(t1)));
    for i in 0..20u64 {
        let (type_id, fields) = if i % 2 == 0 {
            (0, vec![Value::U64(i)])
        } else {
            (
                1,
                vec![
                    Value::U64(i * 10),
                    Value::Str("x".into()),
                    Value::I64(-(i as i64)),
                ],
            )
        };
        items.push(common::event(
            1_000 + i as i64 * 100,
            type_id,
            Some(1),
            fields,
        ));
    }
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("f.dat");
    let mut w = timeline_writer(&p, &h, 16);
    let mut r = VecReader::new(Trace { header: h, items });
    while let Some(it) = r.next_item().unwrap() {
        w.write_item(&it).unwrap();
    }
    let loss = w.finish().unwrap();
    assert_eq!(loss.written.get("events"), Some(&20));
    assert_eq!(loss.dropped.values().sum::<u64>(), 4, "{loss}");
    // The text field is an arg too (a string-table offset), not a loss.
    assert!(
        !loss.degraded.keys().any(|(_, why)| why.contains("dropped")),
        "{loss}"
    );
    let data = std::fs::read(&p).unwrap();
    assert_eq!(data.len(), 64 + 16 * 64 + 1_000_000);
    assert_lines(
        &listing_of(&p),
        17,
        &[
            (1, "0    1         <start> engine           breath n(4)"),
            (2, "0    1             100 app              pulled pkts(50) bytestotal(1.844674407371e+19)"),
            (16, "0    1             100 app              pulled pkts(190) bytestotal(1.844674407371e+19)"),
        ],
    );
    // Priority bits: app (default-less type: trace) as Snabb packs them.
    let (_, types, events) = read_all(&p, &ReadOptions::default());
    let pr: Vec<_> = types.iter().map(|t| t.priority.clone().unwrap()).collect();
    assert_eq!(pr, vec!["app", "trace"]);
    // The text comes back from its offset, after the numeric fields.
    let pulled = types.iter().find(|t| t.name == "pulled").unwrap();
    let got: Vec<&Vec<Value>> = events
        .iter()
        .filter(|e| e.type_id == pulled.id)
        .map(|e| &e.fields)
        .collect();
    assert_eq!(got.len(), 8);
    for f in got {
        assert_eq!(f.len(), 3, "{f:?}");
        assert_eq!(f[2], Value::Str("x".into()), "{f:?}");
        assert!(matches!(f[1], Value::I64(x) if x < 0), "{f:?}");
    }
}

#[test]
fn tsc_options_place_cycles_on_the_epoch() {
    let p = tl_dir().join("a2-unwrapped.dat");
    let (h0, _, e0) = read_all(&p, &ReadOptions::default());
    assert_eq!(h0.time_base.describe(), "cycles only");
    let anchor = polytrace::model::Timestamp(1_700_000_000_000_000_000);
    let o = ReadOptions {
        tsc_hz: Some(2e9),
        tsc_anchor: Some(anchor),
        ..Default::default()
    };
    let (h, _, e) = read_all(&p, &o);
    assert!(h.time_base.describe().contains("2000000000 Hz"));
    let tsc = e0[0].raw_clock.unwrap();
    assert_eq!(e[0].time.0, anchor.0 + (tsc as f64 / 2.0) as i64);
    assert_eq!(e0[0].time.0, tsc as i64);
}

#[test]
fn detection() {
    let f = formats::get(FormatId::Timeline);
    for dat in dats() {
        let i = Input::resolve(&dat).unwrap();
        let score = f.detect(&i);
        if stem(&dat).starts_with('v') {
            assert_eq!(score, 100);
        } else {
            assert!(score > 0 && score < 100, "{score}");
        }
        assert_eq!(formats::detect(&i).unwrap().id(), FormatId::Timeline);
    }
    // Arbitrary garbage is never claimed.
    let mut x: u64 = 0x9e3779b97f4a7c15;
    for len in [0usize, 8, 64, 100, 4096, 70_000] {
        for _ in 0..50 {
            let v: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            assert_eq!(timeline::detect_bytes(&v, len as u64), 0);
        }
    }
    assert_eq!(
        timeline::detect_bytes(b"numa core cycles category message\n", 35),
        0
    );
}

fn a_header(last: u64) -> Vec<u8> {
    let mut h = vec![0u8; 64];
    h[8..16].copy_from_slice(&0xffffu64.to_le_bytes());
    h[24..32].copy_from_slice(&last.to_le_bytes());
    h
}

/// A 64-byte ring entry: cycle count `tsc`, the message word `msg`
/// (string offset << 16 | priority bits) at byte `msg_at` (24 in the A2
/// layout, 16 in A1), then `args` from byte 32.
fn entry(tsc: u64, msg_at: usize, msg: u64, args: &[u64]) -> Vec<u8> {
    let mut e = vec![0u8; 64];
    e[0..8].copy_from_slice(&tsc.to_le_bytes());
    e[msg_at..msg_at + 8].copy_from_slice(&msg.to_le_bytes());
    for (k, a) in args.iter().enumerate() {
        e[32 + 8 * k..40 + 8 * k].copy_from_slice(&a.to_le_bytes());
    }
    e
}

#[test]
fn bad_headers_are_positioned_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, Vec<u8>, u64)> = vec![
        (
            "huge A ring",
            {
                let mut v = a_header((1 << 40) - 1);
                v.resize(4096, 0);
                v
            },
            24,
        ),
        (
            "not a power of two",
            {
                let mut v = a_header(999);
                v.resize(70_000, 0);
                v
            },
            24,
        ),
        (
            "huge M sizes",
            {
                let mut v = vec![0u8; 128];
                v[0..8].copy_from_slice(&0xa3ff7223441d0001u64.to_le_bytes());
                v[8] = 3;
                v[12..16].copy_from_slice(&0xffff_ffc0u32.to_le_bytes());
                v[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
                v
            },
            12,
        ),
        (
            "M major 4",
            {
                let mut v = vec![0u8; 128];
                v[0..8].copy_from_slice(&0xa3ff7223441d0001u64.to_le_bytes());
                v[8] = 4;
                v
            },
            8,
        ),
    ];
    for (what, bytes, off) in cases {
        let p = tmp.path().join("bad.dat");
        std::fs::write(&p, &bytes).unwrap();
        let e = TimelineReader::from_bytes(&p, bytes.clone(), &ReadOptions::default())
            .err()
            .unwrap_or_else(|| panic!("{what}: accepted"));
        match e {
            polytrace::Error::Format { pos, .. } => assert_eq!(pos.offset, Some(off), "{what}"),
            e => panic!("{what}: {e}"),
        }
        let out = Command::new(common::bin())
            .args(["dump", "--from", "timeline"])
            .arg(&p)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{what}");
    }
}

#[test]
fn string_offset_outside_the_table() {
    // One slot, 16-byte table; the entry's message offset points past it.
    let mut v = a_header(0);
    v.extend_from_slice(&entry(5, 24, (100 << 16) | 0x10, &[]));
    v.extend_from_slice(b"cat\0\0\0\0\0\0\0\0\0\0\0\0\0");
    let (_tmp, p) = common::scratch_file("s.dat", &v);
    let (_, rc) = run_dump(&[], &p);
    assert_eq!(rc, 2);
    let (out, rc) = run_dump(&["--salvage"], &p);
    assert_eq!(rc, 1);
    assert_eq!(out, timeline::dump::HEADER_FINAL);
    common::pt_exit(1, &["check", "--salvage"], &[&p]);
    common::pt_exit(2, &["check"], &[&p]);
}

#[test]
fn fifth_placeholder_prints_fallback_and_warns() {
    let mut v = a_header(1);
    let fmt = b"a $a $b\nsecond $c $d $e";
    v.extend_from_slice(&entry(7, 24, (4 << 16) | 0x10, &[1, 2, 3, 4]));
    v.extend_from_slice(&[0u8; 64]);
    v.extend_from_slice(b"cat\0");
    v.extend_from_slice(fmt);
    v.extend_from_slice(&[0u8; 32]);
    let (_tmp, p) = common::scratch_file("c.dat", &v);
    let (code, stdout, stderr) = common::pt(&["dump"], &[&p]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        "numa core       cycles category         message\n\
         0    0         <start> cat              a a(1) b(2)\nsecond c(3) d(4) e(?)\n"
    );
    assert!(stderr.contains("more than 4 placeholders"));
}

/// Truncations and bit flips of every corpus file: never a panic, never a
/// hang, in the reader and in every dump mode.
#[test]
fn damaged_inputs_sweep() {
    let modes = [
        DumpOptions::default(),
        DumpOptions {
            newest_first: true,
            ..Default::default()
        },
        DumpOptions {
            newest_first: true,
            unwritten_slots: true,
            max: Some(50),
            ..Default::default()
        },
    ];
    let flips = if common::full() { 2000 } else { 60 };
    let mut x: u64 = 0x2545f4914f6cdd1d;
    let mut rnd = |m: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % m as u64) as usize
    };
    for dat in dats() {
        let orig = std::fs::read(&dat).unwrap();
        let len = orig.len();
        let mut variants: Vec<Vec<u8>> = Vec::new();
        for cut in [
            0,
            1,
            7,
            8,
            63,
            64,
            65,
            127,
            128,
            4096,
            65_600,
            len / 2,
            len - 1,
        ] {
            variants.push(orig[..cut.min(len)].to_vec());
        }
        // Header bits, then random bits over entries and strings.
        for bit in 0..64 * 8 {
            if bit % 6 == 0 || common::full() {
                let mut v = orig.clone();
                v[bit / 8] ^= 1 << (bit % 8);
                variants.push(v);
            }
        }
        for _ in 0..flips {
            let mut v = orig.clone();
            let p = rnd(len);
            v[p] ^= 1 << rnd(8);
            // Also poke a msg_id so string offsets go wild.
            let slot = rnd(((len - 64) / 64).clamp(1, 1024));
            let o = 64 + slot * 64 + 24 + rnd(8);
            if o < len {
                v[o] = rnd(256) as u8;
            }
            variants.push(v);
        }
        for v in variants {
            for salvage in [false, true] {
                let ro = ReadOptions {
                    salvage,
                    ..Default::default()
                };
                for d in &modes {
                    let _ = timeline::dump_bytes(&dat, &v, &ro, d, &mut std::io::sink());
                }
                if let Ok(mut r) = TimelineReader::from_bytes(&dat, v.clone(), &ro) {
                    let mut k = 0;
                    while let Ok(Some(_)) = r.next_item() {
                        k += 1;
                        assert!(k < 10_000_000);
                    }
                }
            }
        }
    }
}

/// Samples become one message per (metric, instance) with `$value`.
#[test]
fn samples_become_value_messages() {
    use polytrace::model::{
        IndomKind, IndomUpdate, Instance, MetricDesc, MetricValues, Sample, Semantics, Timestamp,
        Units, ValueType,
    };
    let h = Header::new(FormatId::Pcp, "3");
    let mut m = MetricDesc::new(
        7,
        "kernel.all.load",
        ValueType::F64,
        Semantics::Instant,
        Units::NONE,
    );
    m.indom = Some(3);
    let s = MetricDesc::new(
        8,
        "kernel.uname.release",
        ValueType::String,
        Semantics::Discrete,
        Units::NONE,
    );
    let mut items = vec![
        Item::Metric(Arc::new(m)),
        Item::Metric(Arc::new(s)),
        Item::Indom(IndomUpdate {
            time: Timestamp(0),
            id: 3,
            kind: IndomKind::Full,
            instances: vec![
                Instance {
                    id: 1,
                    name: "1 minute".into(),
                },
                Instance {
                    id: 5,
                    name: "5 minute".into(),
                },
            ],
            removed: vec![],
            extras: Default::default(),
        }),
    ];
    for k in 0..2i64 {
        items.push(Item::Sample(Sample {
            time: Timestamp(1_000_000 + k * 500),
            raw_clock: None,
            metrics: vec![
                MetricValues {
                    metric: 7,
                    values: Ok(vec![(1, Value::F64(2.0 + k as f64)), (5, Value::F64(0.5))]),
                },
                MetricValues {
                    metric: 8,
                    values: Ok(vec![(-1, Value::Str("6.1".into()))]),
                },
            ],
            extras: Default::default(),
        }));
    }
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("s.dat");
    let mut w = timeline_writer(&p, &h, 8);
    for it in &items {
        w.write_item(it).unwrap();
    }
    let loss = w.finish().unwrap();
    assert_eq!(
        loss.dropped
            .get(&("sample values".into(), "not numeric".into())),
        Some(&2)
    );
    assert!(loss
        .degraded
        .keys()
        .any(|(_, why)| why.contains("fraction")));
    assert_eq!(
        listing_of(&p),
        "numa core       cycles category         message\n\
         0    0         <start> metric           kernel.all.load[1 minute] value(2)\n\
         0    0               0 metric           kernel.all.load[5 minute] value(0)\n\
         0    0             500 metric           kernel.all.load[1 minute] value(3)\n\
         0    0               0 metric           kernel.all.load[5 minute] value(0)\n"
    );
}

#[test]
fn mainline_listing() {
    let p = tl_dir().join("v3-small-wrapped.dat");
    // Slot 950 (the inferred head) is the oldest entry: "six" with 1..5, 247.
    assert_lines(
        &listing_of(&p),
        1025,
        &[
            (1, "0    0         <start> selftest         six app=demo a(1) b(2) c(3) d(4) e(5) f(247)"),
            (1024, "0    0            1796 selftest         five app=demo a(400) b(400) c(400) d(400) e(400)"),
        ],
    );
}

#[test]
fn a1_entry_shape_is_flagged() {
    // A1: msg_id at offset 16 with the plain priority number 4 (trace).
    let mut v = a_header(1);
    v.extend_from_slice(&entry(9, 16, (4 << 16) | 4, &[]));
    v.extend_from_slice(&[0u8; 64]);
    v.extend_from_slice(b"cat\0msg\0");
    let p = Path::new("a1.dat");
    let mut out = Vec::new();
    let d = timeline::dump_bytes(
        p,
        &v,
        &ReadOptions::default(),
        &DumpOptions::default(),
        &mut out,
    )
    .unwrap();
    assert!(d.iter().any(|d| d.msg.contains("A1")), "{d:?}");
    // A2 samples are not flagged.
    let a2 = tl_dir().join("a2-priorities.dat");
    let data = std::fs::read(&a2).unwrap();
    let d = timeline::dump_bytes(
        &a2,
        &data,
        &ReadOptions::default(),
        &DumpOptions::default(),
        &mut Vec::new(),
    )
    .unwrap();
    assert!(d.is_empty(), "{d:?}");
}

#[test]
fn cli_convert_strict_and_options() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tl_dir().join("a2-priorities.dat");
    // `convert --to timeline EXTRA… -o OUT SRC`, which must exit `code`.
    let to_timeline = |code: i32, extra: &[&str], out: &Path| {
        let args = [&["convert", "--to", "timeline"], extra, &["-o"]].concat();
        common::pt_exit(code, &args, &[out, &src])
    };
    // A2 → M3 loses the per-entry ip: --strict refuses and writes nothing.
    let out = tmp.path().join("x.m3");
    let m3 = ["--timeline-version", "M3", "--entries", "64", "--strict"];
    common::assert_has(&to_timeline(2, &m3, &out), "ip");
    assert!(!out.exists());
    // A2 → A2 is lossless: --strict passes and the file is Snabb's.
    let same = tmp.path().join("x.dat");
    to_timeline(0, &["--strict"], &same);
    assert_eq!(std::fs::read(&same).unwrap(), std::fs::read(&src).unwrap());
    // A non-power-of-two A2 ring is refused.
    let bad = tmp.path().join("y.dat");
    to_timeline(2, &["--entries", "1000"], &bad);
    assert!(!bad.exists());
}

/// A ring smaller than the stream wraps: the writer puts entries at their
/// slot's offset in runs, so a wrapped ring is written over itself. Each
/// of the newest N entries must sit in slot i mod N with the bytes of entry
/// i of an unwrapped ring of the same stream, the string table must be the
/// same, unwritten slots zero, and the file exactly header + ring + table.
#[test]
fn wrapped_ring_keeps_the_newest_entries_in_their_slots() {
    let (tmp, src) = common::scratch_and_corpus("ltt/smp_example");
    let u64_at = |d: &[u8], o: usize| u64::from_le_bytes(d[o..o + 8].try_into().unwrap());
    for (layout, n) in [("A2", 1024usize), ("M3", 1000), ("A2", 65536)] {
        let conv = |name: &str, entries: Option<usize>| {
            let out = tmp.path().join(name);
            let mut c = Command::new(common::bin());
            c.args([
                "convert",
                "-q",
                "--to",
                "timeline",
                "--timeline-version",
                layout,
            ]);
            if let Some(e) = entries {
                c.args(["--entries", &e.to_string()]);
            }
            c.arg("-o").arg(&out).arg(&src).assert().success();
            std::fs::read(&out).unwrap()
        };
        let big = conv(&format!("big-{layout}-{n}"), None);
        let small = conv(&format!("small-{layout}-{n}"), Some(n));
        let ring = |d: &[u8]| -> usize {
            match layout {
                "A2" => u64_at(d, 24) as usize + 1,
                _ => u32::from_le_bytes(d[12..16].try_into().unwrap()) as usize / 64,
            }
        };
        let (nb, ns) = (ring(&big), ring(&small));
        assert_eq!(ns, n);
        assert_eq!(small.len(), 64 + n * 64 + 1_000_000, "{layout} {n}");
        let slot = |d: &[u8], i: usize| d[64 + i * 64..128 + i * 64].to_vec();
        // The big ring is unwritten after its last entry (tsc 0 / 0.0).
        let total = (0..nb)
            .take_while(|&i| u64_at(&big, 64 + i * 64) != 0)
            .count();
        assert!(total > n, "{layout}: {total} entries");
        assert!((total..nb).all(|i| slot(&big, i).iter().all(|&b| b == 0)));
        for i in total - n..total {
            assert!(
                slot(&small, i % n) == slot(&big, i),
                "{layout} {n}: entry {i} is not in slot {}",
                i % n
            );
        }
        assert_eq!(
            &small[64 + n * 64..],
            &big[64 + nb * 64..],
            "{layout}: string table"
        );
        if layout == "A2" {
            assert_eq!(u64_at(&small, 16) as usize, total % n, "next");
        }
    }
}

/// `--extract` on timeline messages: the text is the message as the
/// native listing shows it (`warning a(1)`), and the series equal the
/// numbers of that listing (Snabb's own dump, computed independently).
#[test]
fn extract_takes_values_from_timeline_messages() {
    let t = common::corpus().join("timeline");
    let listing = std::fs::read_to_string(t.join("a2-priorities.dump-9501c6050.txt")).unwrap();
    // Per message kind (the letter before `:`), the a(N) values in order.
    let mut want: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for l in listing.lines().skip(1) {
        let msg = l.split_whitespace().skip(4).collect::<Vec<_>>().join(" ");
        if let (Some(k), Some(a)) = (msg.split(':').next(), msg.split(" a(").nth(1)) {
            want.entry(k.to_string())
                .or_default()
                .push(a.split(')').next().unwrap().to_string());
        }
    }
    assert_eq!(want.len(), 4, "{want:?}");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.csv");
    let o = Command::cargo_bin("polytrace")
        .unwrap()
        .args(["convert", "--quiet", "--tsc-hz", "1GHz", "-o"])
        .arg(&out)
        .args(["--extract", r"prio.*=a\((?P<a>[0-9]+)\)"])
        .arg(t.join("a2-priorities.dat"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    let mut rd = csv::Reader::from_reader(text.as_bytes());
    let hdr: Vec<String> = rd.headers().unwrap().iter().map(str::to_string).collect();
    let rows: Vec<Vec<String>> = rd
        .records()
        .map(|r| r.unwrap().iter().map(str::to_string).collect())
        .collect();
    let mut got: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (i, h) in hdr.iter().enumerate().skip(1) {
        // prio.W__warning__a.a: the kind is the letter after `prio.`.
        let kind = h.strip_prefix("prio.").unwrap()[..1].to_string();
        assert!(h.ends_with(".a"), "{h}");
        got.insert(
            kind,
            rows.iter()
                .map(|r| r[i].clone())
                .filter(|c| !c.is_empty())
                .collect(),
        );
    }
    assert_eq!(got, want);
}
