//! `--to perfetto`: every output decoded by a small protobuf decoder of the
//! test's own and checked against the rules of Perfetto's docs (declared
//! tracks, balanced and nested slices, interned ids and sequence flags,
//! counter-only counter tracks); the slices, instants and counter samples
//! compared with the Chrome JSON export of the same input; the log lines of
//! DLT inputs compared with `dlt-convert -a`; and every output parsed by
//! Perfetto's own generated Python bindings.
mod common;

use serde_json::Value as Json;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

// ------------------------------------------------------------ decoding

#[derive(Debug, Clone, Copy)]
enum F<'a> {
    V(u64),
    I64(u64),
    B(&'a [u8]),
}

fn varint(b: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    for i in 0..10 {
        let x = b[*at];
        *at += 1;
        v |= ((x & 0x7f) as u64) << (7 * i);
        if x & 0x80 == 0 {
            return v;
        }
    }
    panic!("varint over 10 bytes");
}

/// The fields of one message, in order.
fn fields(b: &[u8]) -> Vec<(u32, F<'_>)> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < b.len() {
        let key = varint(b, &mut at);
        let (field, wt) = ((key >> 3) as u32, key & 7);
        assert!(field > 0, "field number 0");
        let v = match wt {
            0 => F::V(varint(b, &mut at)),
            1 => {
                let v = u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
                at += 8;
                F::I64(v)
            }
            2 => {
                let n = varint(b, &mut at) as usize;
                assert!(at + n <= b.len(), "length {n} past the end");
                at += n;
                F::B(&b[at - n..at])
            }
            _ => panic!("wire type {wt} not written by polytrace"),
        };
        out.push((field, v));
    }
    out
}

fn v(f: &F) -> u64 {
    match f {
        F::V(x) => *x,
        other => panic!("not a varint: {other:?}"),
    }
}

fn b<'a>(f: &F<'a>) -> &'a [u8] {
    match f {
        F::B(x) => x,
        other => panic!("not length-delimited: {other:?}"),
    }
}

fn s(f: &F) -> String {
    String::from_utf8(b(f).to_vec()).expect("UTF-8 string")
}

#[derive(Debug, Clone, PartialEq)]
enum Arg {
    Int(i64),
    Uint(u64),
    Double(f64),
    Str(String),
}

#[derive(Debug, Clone)]
struct Slice {
    track: String,
    name: String,
    cats: String,
    begin: u64,
    end: u64,
}

#[derive(Debug, Clone)]
struct Instant {
    track: String,
    name: String,
    cats: String,
    ts: u64,
    args: Vec<(String, Arg)>,
}

#[derive(Debug, Clone)]
struct Log {
    ts: u64,
    pid: i64,
    tid: i64,
    tag: String,
    prio: u64,
    msg: String,
}

#[derive(Default, Debug)]
struct Decoded {
    slices: Vec<Slice>,
    instants: Vec<Instant>,
    /// (counter track name, ts, value)
    counters: Vec<(String, u64, f64)>,
    logs: Vec<Log>,
    /// Incremental-state clears seen (the first included).
    clears: usize,
    dated: bool,
    /// REALTIME minus the trace clock, from the clock snapshot (or the
    /// remote clock sync of a machine other than the first).
    offset: i64,
    /// The one sequence id, and the machine id of the packets (0: none).
    seq: u64,
    machine: u64,
    /// Track uuids declared.
    uuids: Vec<u64>,
    /// `SystemInfo.machine_name`, where written.
    machine_name: Option<String>,
    /// The earliest TrackEvent or log packet time, read as Perfetto's trace
    /// processor reads it, on REALTIME (nanoseconds since the epoch).
    first_realtime: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
enum TrackKind {
    Process(i64),
    Thread(i64, i64),
    Counter,
    Plain,
}

#[derive(Debug, Clone)]
struct TrackInfo {
    kind: TrackKind,
    name: String,
}

/// A slice edge: time, packet index, begin?, name, categories.
type Edge = (u64, usize, bool, String, String);

/// Decode a trace and check it against the rules of Perfetto's docs; every
/// broken rule panics with the packet's index.
fn decode_and_check(data: &[u8]) -> Decoded {
    let mut d = Decoded::default();
    let mut tracks: HashMap<u64, TrackInfo> = HashMap::new();
    // Interning tables: kind (field number in InternedData) -> iid -> text.
    let mut tables: HashMap<u32, HashMap<u64, String>> = HashMap::new();
    let mut seen_clear = false;
    let mut seq: Option<u64> = None;
    // Per track: (ts, packet index, begin?, name, cats) of slice edges.
    let mut edges: BTreeMap<u64, Vec<Edge>> = BTreeMap::new();
    let mut counter_last: HashMap<u64, u64> = HashMap::new();
    // The clocks the clock snapshot (or remote clock sync) ties together,
    // and the sequence's TracePacketDefaults.timestamp_clock_id (dropped by
    // an incremental-state clear, as Perfetto drops the defaults then).
    let mut snapshot: HashMap<u64, i64> = HashMap::new();
    let mut defaults: Option<Option<u64>> = None;
    for (idx, (field, pf)) in fields(data).into_iter().enumerate() {
        assert_eq!(field, 1, "Trace has only packets (field 1)");
        let p = fields(b(&pf));
        let get = |n: u32| p.iter().find(|(f, _)| *f == n).map(|(_, x)| *x);
        let sq = get(10).map(|x| v(&x)).expect("trusted_packet_sequence_id");
        assert_ne!(sq, 0, "packet {idx}: sequence id 0");
        assert_eq!(*seq.get_or_insert(sq), sq, "packet {idx}: one sequence");
        let machine = get(98).map(|x| v(&x)).unwrap_or(0);
        if idx == 0 {
            d.machine = machine;
        }
        assert_eq!(machine, d.machine, "packet {idx}: one machine");
        if let Some(si) = get(45) {
            let n = fields(b(&si))
                .iter()
                .find(|(f, _)| *f == 17)
                .map(|(_, x)| s(x));
            d.machine_name = n;
        }
        if let Some(rc) = get(107) {
            // Another machine's clocks, tied to the host's: client and host
            // snapshots alike (one time axis), before anything else.
            assert_eq!(idx, 0, "the remote clock sync comes first");
            let snap = |x: &F| -> HashMap<u64, i64> {
                fields(b(x))
                    .into_iter()
                    .map(|(_, c)| {
                        let cf = fields(b(&c));
                        let g = |n: u32| cf.iter().find(|(f, _)| *f == n).map(|(_, x)| v(x));
                        (g(1).unwrap(), g(2).unwrap() as i64)
                    })
                    .collect()
            };
            let rounds = fields(b(&rc));
            assert_eq!(rounds.len(), 2, "two rounds: an offset needs both");
            for (_, r) in &rounds {
                let sc = fields(b(r));
                let client = snap(&sc.iter().find(|(f, _)| *f == 2).unwrap().1);
                let host = snap(&sc.iter().find(|(f, _)| *f == 3).unwrap().1);
                assert_eq!(client, host, "offset 0 between the machines");
                d.offset = client[&1] - client[&6];
                snapshot = client;
            }
        }
        let ts = get(8).map(|x| v(&x));
        let flags = get(13).map(|x| v(&x)).unwrap_or(0);
        if flags & 1 != 0 {
            tables.clear();
            seen_clear = true;
            d.clears += 1;
            defaults = None;
        } else if defaults.is_some() {
            // TracePacketDefaults "require that any future packet emitted on
            // the same sequence specifies SEQ_NEEDS_INCREMENTAL_STATE".
            assert!(
                flags & 2 != 0,
                "packet {idx}: after TracePacketDefaults without SEQ_NEEDS_INCREMENTAL_STATE"
            );
        }
        if let Some(tpd) = get(59) {
            let clock = fields(b(&tpd))
                .iter()
                .find(|(f, _)| *f == 58)
                .map(|(_, x)| v(x));
            defaults = Some(clock);
        }
        if let Some(id) = get(12) {
            assert!(seen_clear, "packet {idx}: interned data before any clear");
            for (kind, e) in fields(b(&id)) {
                let ef = fields(b(&e));
                let iid = ef.iter().find(|(f, _)| *f == 1).map(|(_, x)| v(x)).unwrap();
                let text = ef.iter().find(|(f, _)| *f == 2).map(|(_, x)| s(x)).unwrap();
                let t = tables.entry(kind).or_default();
                if let Some(old) = t.insert(iid, text.clone()) {
                    assert_eq!(old, text, "packet {idx}: iid {iid} redefined");
                }
            }
        }
        let lookup = |kind: u32, iid: u64| -> String {
            tables
                .get(&kind)
                .and_then(|t| t.get(&iid))
                .unwrap_or_else(|| panic!("packet {idx}: iid {iid} (kind {kind}) not defined"))
                .clone()
        };
        if let Some(cs) = get(6) {
            assert_eq!(idx, 0, "the clock snapshot comes first");
            let mut clocks = HashMap::new();
            for (f, x) in fields(b(&cs)) {
                if f == 2 {
                    assert_eq!(v(&x), 1, "primary clock REALTIME");
                    d.dated = true;
                } else {
                    let cf = fields(b(&x));
                    let id = cf.iter().find(|(f, _)| *f == 1).map(|(_, x)| v(x)).unwrap();
                    let t = cf.iter().find(|(f, _)| *f == 2).map(|(_, x)| v(x)).unwrap();
                    clocks.insert(id, t as i64);
                }
            }
            assert_eq!(
                ts.map(|t| t as i64),
                Some(clocks[&6]),
                "snapshot at its BOOTTIME"
            );
            d.offset = clocks[&1] - clocks[&6];
            snapshot = clocks;
        } else if let Some(t) = ts {
            // The clock a timestamp is read in: the packet's
            // timestamp_clock_id, else the sequence defaults'. Without
            // either, trace processors before 2026 read BOOTTIME and later
            // ones the snapshot's primary clock (REALTIME for a dated
            // source): polytrace must leave no packet to that difference.
            let clock = get(58)
                .map(|x| v(&x))
                .or(defaults.flatten())
                .unwrap_or_else(|| panic!("packet {idx}: timestamp in no stated clock"));
            let (Some(&at), Some(&real)) = (snapshot.get(&clock), snapshot.get(&1)) else {
                panic!("packet {idx}: clock {clock} not tied to REALTIME by a snapshot")
            };
            if get(11).is_some() || get(39).is_some() {
                let rt = t as i64 - at + real;
                d.first_realtime = Some(d.first_realtime.map_or(rt, |f| f.min(rt)));
            }
        }
        if let Some(td) = get(60) {
            let tf = fields(b(&td));
            let g = |n: u32| tf.iter().find(|(f, _)| *f == n).map(|(_, x)| *x);
            let uuid = v(&g(1).expect("uuid"));
            d.uuids.push(uuid);
            if let Some(parent) = g(5) {
                assert!(
                    tracks.contains_key(&v(&parent)),
                    "packet {idx}: parent declared first"
                );
            }
            let (kind, name) = if let Some(pr) = g(3) {
                let pf = fields(b(&pr));
                let pid = pf.iter().find(|(f, _)| *f == 1).map(|(_, x)| v(x)).unwrap();
                let n = pf.iter().find(|(f, _)| *f == 6).map(|(_, x)| s(x)).unwrap();
                (TrackKind::Process(pid as i64), n)
            } else if let Some(th) = g(4) {
                let tf = fields(b(&th));
                let pid = tf.iter().find(|(f, _)| *f == 1).map(|(_, x)| v(x)).unwrap();
                let tid = tf.iter().find(|(f, _)| *f == 2).map(|(_, x)| v(x)).unwrap();
                let n = tf.iter().find(|(f, _)| *f == 5).map(|(_, x)| s(x)).unwrap();
                // A thread's parent is its process's track.
                let parent = g(5).map(|x| v(&x)).expect("thread track has a parent");
                assert_eq!(
                    tracks[&parent].kind,
                    TrackKind::Process(pid as i64),
                    "packet {idx}: thread under its own process"
                );
                (TrackKind::Thread(pid as i64, tid as i64), n)
            } else if g(8).is_some() {
                (TrackKind::Counter, s(&g(2).expect("counter name")))
            } else {
                (TrackKind::Plain, g(2).map(|x| s(&x)).unwrap_or_default())
            };
            if let Some(old) = tracks.get(&uuid) {
                assert_eq!(
                    std::mem::discriminant(&old.kind),
                    std::mem::discriminant(&kind),
                    "packet {idx}: track {uuid} changes kind"
                );
            }
            tracks.insert(uuid, TrackInfo { kind, name });
        }
        if let Some(te) = get(11) {
            assert!(
                flags & 2 != 0,
                "packet {idx}: TrackEvent without SEQ_NEEDS_INCREMENTAL_STATE"
            );
            assert!(
                seen_clear,
                "packet {idx}: TrackEvent before the state is cleared"
            );
            let ts = ts.expect("TrackEvent packet has a timestamp");
            let ef = fields(b(&te));
            let g = |n: u32| ef.iter().find(|(f, _)| *f == n).map(|(_, x)| *x);
            let ty = v(&g(9).expect("type"));
            let uuid = v(&g(11).expect("track_uuid"));
            let tr = tracks
                .get(&uuid)
                .unwrap_or_else(|| panic!("packet {idx}: track {uuid} not declared"))
                .clone();
            let is_counter = tr.kind == TrackKind::Counter;
            assert_eq!(
                ty == 4,
                is_counter,
                "packet {idx}: counters on counter tracks only, and only counters there"
            );
            let name = g(10).map(|x| lookup(2, v(&x)));
            let cats: Vec<String> = ef
                .iter()
                .filter(|(f, _)| *f == 3)
                .map(|(_, x)| lookup(1, v(x)))
                .collect();
            let mut args = Vec::new();
            for (_, a) in ef.iter().filter(|(f, _)| *f == 4) {
                let af = fields(b(a));
                let mut an = None;
                let mut av = None;
                for (f, x) in &af {
                    match f {
                        1 => an = Some(lookup(3, v(x))),
                        3 => av = Some(Arg::Uint(v(x))),
                        4 => av = Some(Arg::Int(v(x) as i64)),
                        5 => match x {
                            F::I64(bits) => av = Some(Arg::Double(f64::from_bits(*bits))),
                            _ => panic!("double is fixed64"),
                        },
                        6 => av = Some(Arg::Str(s(x))),
                        17 => av = Some(Arg::Str(lookup(29, v(x)))),
                        other => panic!("annotation field {other}"),
                    }
                }
                args.push((an.expect("annotation name"), av.expect("annotation value")));
            }
            match ty {
                1 | 2 => edges.entry(uuid).or_default().push((
                    ts,
                    idx,
                    ty == 1,
                    name.clone().unwrap_or_default(),
                    cats.join(","),
                )),
                3 => d.instants.push(Instant {
                    track: tr.name.clone(),
                    name: name.expect("instant has a name"),
                    cats: cats.join(","),
                    ts,
                    args,
                }),
                4 => {
                    let val = match (g(30), g(44)) {
                        (Some(x), None) => v(&x) as i64 as f64,
                        (None, Some(F::I64(bits))) => f64::from_bits(bits),
                        other => panic!("packet {idx}: one counter value, got {other:?}"),
                    };
                    let last = counter_last.entry(uuid).or_insert(0);
                    assert!(ts >= *last, "packet {idx}: counter time goes back");
                    *last = ts;
                    d.counters.push((tr.name.clone(), ts, val));
                }
                other => panic!("packet {idx}: event type {other}"),
            }
        }
        if let Some(al) = get(39) {
            for (_, e) in fields(b(&al)) {
                let lf = fields(b(&e));
                let g = |n: u32| lf.iter().find(|(f, _)| *f == n).map(|(_, x)| *x);
                let l = Log {
                    ts: v(&g(5).expect("log timestamp")),
                    pid: v(&g(2).unwrap()) as i64,
                    tid: v(&g(3).unwrap()) as i64,
                    tag: s(&g(6).unwrap()),
                    prio: v(&g(7).unwrap()),
                    msg: g(8).map(|x| s(&x)).unwrap_or_default(),
                };
                assert_eq!(
                    Some(l.ts as i64 - d.offset),
                    ts.map(|t| t as i64),
                    "packet {idx}: log time (REALTIME) is the packet's"
                );
                // Beside its track: the pid/tid of a declared thread.
                assert!(
                    tracks
                        .values()
                        .any(|t| t.kind == TrackKind::Thread(l.pid, l.tid)),
                    "packet {idx}: log line of an undeclared thread"
                );
                d.logs.push(l);
            }
        }
    }
    d.seq = seq.unwrap_or(0);
    // Slices: as the trace processor reads them (sorted by time, ties in
    // file order), every end closes the slice its own begin opened.
    for (uuid, mut es) in edges {
        // Pairs in file order: an end closes the last open begin.
        let mut partner: HashMap<usize, usize> = HashMap::new();
        let mut st: Vec<usize> = Vec::new();
        for (_, idx, begin, _, _) in &es {
            if *begin {
                st.push(*idx);
            } else {
                let o = st.pop().expect("end without begin");
                partner.insert(*idx, o);
            }
        }
        assert!(st.is_empty(), "track {uuid}: {} slices never end", st.len());
        es.sort_by_key(|e| (e.0, e.1));
        let mut stack: Vec<(usize, u64, String, String)> = Vec::new();
        for (ts, idx, begin, name, cats) in es {
            if begin {
                stack.push((idx, ts, name, cats));
            } else {
                let (bi, bts, name, cats) = stack.pop().expect("balanced");
                assert_eq!(
                    partner[&idx], bi,
                    "track {uuid}: slices do not nest (end at {ts} closes another slice)"
                );
                d.slices.push(Slice {
                    track: tracks[&uuid].name.clone(),
                    name,
                    cats,
                    begin: bts,
                    end: ts,
                });
            }
        }
    }
    d
}

// ------------------------------------------------------------ running

fn bin_run(args: &[&str], input: &Path, out: &Path) -> String {
    let _ = std::fs::remove_file(out);
    let args = [&["convert"], args, &["-o"]].concat();
    common::pt_exit(0, &args, &[out, input])
}

fn extra_args(input: &Path) -> Vec<&'static str> {
    if input.extension().is_some_and(|x| x == "dat") {
        vec!["--tsc-hz", "2400000000"]
    } else {
        vec![]
    }
}

fn corpus_inputs() -> Vec<PathBuf> {
    let mut v = common::corpus_files(&[
        "ltt/smp_example",
        "pcp/live_v3",
        "pcp/live_v2",
        "kpi/kpi-capture.dlt",
        "kpi/kpi-capture.convert-a.txt",
        "dlt/testfile.dlt",
        "mmv/research_v2.mmv",
    ]);
    v.extend(
        common::timeline_snapshots()
            .into_iter()
            // No entries: nothing to write for either export.
            .filter(|p| !p.to_string_lossy().contains("empty")),
    );
    v
}

fn perfetto(input: &Path, dir: &Path) -> (Vec<u8>, PathBuf) {
    let out = dir.join(format!(
        "{}.perfetto-trace",
        input.file_name().unwrap().to_string_lossy()
    ));
    let mut args = vec!["--to", "perfetto"];
    args.extend(extra_args(input));
    bin_run(&args, input, &out);
    (std::fs::read(&out).unwrap(), out)
}

// ------------------------------------------------------------ Chrome side

#[derive(Default)]
struct ChromeView {
    slices: Vec<(String, String, String, i64, i64)>,
    instants: Vec<(String, String, String, i64)>,
    counters: Vec<(String, i64, f64)>,
    origin: i64,
}

fn chrome(input: &Path, dir: &Path) -> Option<ChromeView> {
    let out = dir.join("trace.json");
    let mut args = vec!["--to", "chrome-json"];
    args.extend(extra_args(input));
    let _ = std::fs::remove_file(&out);
    let o = Command::new(common::bin())
        .arg("convert")
        .arg(input)
        .args(&args)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    if o.status.code() != Some(0) {
        return None;
    }
    let j: Json = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let ns = |x: &Json| (x.as_f64().unwrap() * 1000.0).round() as i64;
    let mut thread_names: HashMap<(i64, i64), String> = HashMap::new();
    let evs = j["traceEvents"].as_array().unwrap();
    for e in evs {
        if e["ph"] == "M" && e["name"] == "thread_name" {
            thread_names.insert(
                (e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap()),
                e["args"]["name"].as_str().unwrap().to_string(),
            );
        }
    }
    let mut cv = ChromeView {
        origin: j["otherData"]["origin_ns"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap(),
        ..ChromeView::default()
    };
    // Open B events per (pid, tid): name, category, time.
    type Opened = Vec<(String, String, i64)>;
    let mut open: HashMap<(i64, i64), Opened> = HashMap::new();
    for e in evs {
        let key = (
            e["pid"].as_i64().unwrap_or(0),
            e["tid"].as_i64().unwrap_or(0),
        );
        let track = || thread_names.get(&key).cloned().unwrap_or_default();
        let name = e["name"].as_str().unwrap_or("").to_string();
        let cat = e["cat"].as_str().unwrap_or("").to_string();
        match e["ph"].as_str().unwrap() {
            "X" => {
                let t = ns(&e["ts"]);
                cv.slices.push((track(), name, cat, t, t + ns(&e["dur"])));
            }
            "B" => open.entry(key).or_default().push((name, cat, ns(&e["ts"]))),
            "E" => {
                let (n, c, t) = open.get_mut(&key).unwrap().pop().unwrap();
                cv.slices.push((track(), n, c, t, ns(&e["ts"])));
            }
            "i" => cv.instants.push((track(), name, cat, ns(&e["ts"]))),
            "C" => cv
                .counters
                .push((name, ns(&e["ts"]), e["args"]["value"].as_f64().unwrap())),
            _ => {}
        }
    }
    Some(cv)
}

// ------------------------------------------------------------ tests

/// Assert `ours` and `theirs` hold the same KIND rows in any order; ours,
/// sorted.
fn same_rows<T: PartialOrd + std::fmt::Debug>(
    what: &str,
    kind: &str,
    mut ours: Vec<T>,
    mut theirs: Vec<T>,
) -> Vec<T> {
    ours.sort_by(|a, b| a.partial_cmp(b).unwrap());
    theirs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(ours.len(), theirs.len(), "{what}: {kind} count");
    assert!(ours == theirs, "{what}: {kind}s differ, first: {:?}", {
        ours.iter().zip(&theirs).find(|(a, b)| a != b)
    });
    ours
}

/// Every corpus output keeps the rules, and holds what the Chrome JSON
/// export of the same input holds.
#[test]
fn rules_hold_and_chrome_json_agrees() {
    let dir = tempfile::tempdir().unwrap();
    for input in corpus_inputs() {
        let what = input.display().to_string();
        let (data, _) = perfetto(&input, dir.path());
        let d = decode_and_check(&data);
        assert!(
            d.clears >= 1,
            "{what}: the sequence's incremental state is cleared"
        );
        let cv = chrome(&input, dir.path()).expect("Chrome JSON export");
        let rel = |t: u64| t as i64 + d.offset - cv.origin;

        let ps = same_rows(
            &what,
            "slice",
            slice_rows(&d, d.offset - cv.origin),
            cv.slices.clone(),
        );
        let pi: Vec<_> = d
            .instants
            .iter()
            .map(|i| (i.track.clone(), i.name.clone(), i.cats.clone(), rel(i.ts)))
            .collect();
        let pi = same_rows(&what, "instant", pi, cv.instants.clone());

        let mut pc: Vec<_> = d
            .counters
            .iter()
            .map(|(n, t, v)| (n.clone(), rel(*t), *v))
            .collect();
        let mut cc = cv.counters.clone();
        pc.sort_by(|a, b| a.partial_cmp(b).unwrap());
        cc.sort_by(|a, b| a.partial_cmp(b).unwrap());
        assert_eq!(pc.len(), cc.len(), "{what}: counter sample count");
        for (a, b) in pc.iter().zip(&cc) {
            assert_eq!((&a.0, a.1), (&b.0, b.1), "{what}: counter sample");
            // Chrome writes a 32-bit float's shortest text, Perfetto its
            // exact value as a double.
            let tol = 1e-7 * a.2.abs().max(1.0);
            assert!(
                (a.2 - b.2).abs() <= tol,
                "{what}: {} at {}: {} vs {}",
                a.0,
                a.1,
                a.2,
                b.2
            );
        }
        eprintln!(
            "{what}: {} slices, {} instants, {} counter samples, {} log lines, {} bytes",
            ps.len(),
            pi.len(),
            pc.len(),
            d.logs.len(),
            data.len()
        );
    }
}

/// smp_example: the system calls and interrupts are slices, typed fields
/// are annotations, and the trace is dated.
#[test]
fn ltt_slices_and_annotations() {
    let dir = tempfile::tempdir().unwrap();
    let (data, _) = perfetto(&common::corpus().join("ltt/smp_example"), dir.path());
    let d = decode_and_check(&data);
    assert!(d.dated, "an LTT trace is dated: REALTIME primary clock");
    let count = |n: &str| d.slices.iter().filter(|s| s.name.starts_with(n)).count();
    assert!(count("syscall") > 1000, "syscall slices");
    assert!(count("irq") > 10_000, "irq slices");
    let running = d.slices.iter().filter(|s| s.cats == "sched").count();
    assert!(running > 900, "running slices from schedchange: {running}");
    // An enum label is an interned string, an int an int.
    let soft = d
        .instants
        .iter()
        .find(|i| i.name == "soft_irq")
        .expect("soft_irq instants");
    assert!(
        soft.args
            .iter()
            .any(|(_, a)| matches!(a, Arg::Str(s) if s.starts_with("TRACE_EV_"))),
        "{:?}",
        soft.args
    );
    assert!(
        d.instants
            .iter()
            .flat_map(|i| &i.args)
            .any(|(_, a)| matches!(a, Arg::Uint(_) | Arg::Int(_))),
        "integer annotations"
    );
}

/// Nanoseconds since the epoch of a CSV time (`2016-07-04T13:11:43.000320682Z`),
/// by the proleptic Gregorian calendar.
fn epoch_ns(text: &str) -> i64 {
    let n = |r: std::ops::Range<usize>| text[r].parse::<i64>().unwrap();
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    let (h, mi, sec, frac) = (n(11..13), n(14..16), n(17..19), n(20..29));
    assert_eq!(&text[29..], "Z", "{text}");
    // Days from 1970-01-01: whole years, then months of the year, then days.
    let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let mut days: i64 = (1970..y).map(|y| if leap(y) { 366 } else { 365 }).sum();
    let month_days = [
        31,
        if leap(y) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    days += month_days[..(m - 1) as usize].iter().sum::<i64>() + d - 1;
    ((days * 24 + h) * 60 + mi) * 60 * 1_000_000_000 + sec * 1_000_000_000 + frac
}

/// Dated sources: every packet's time is in a clock the clock snapshot ties
/// to REALTIME (checked in `decode_and_check`), and the first event, read
/// as the trace processor reads it, is the time the CSV export prints and
/// the Chrome JSON export's origin plus its first `ts`.
#[test]
fn dated_times_read_as_csv_and_chrome_json_show_them() {
    // 1467637903 s: Python's datetime(2016, 7, 4, 13, 11, 43, tzinfo=utc).
    assert_eq!(
        epoch_ns("2016-07-04T13:11:43.000320682Z"),
        1_467_637_903_000_320_682
    );
    let dir = tempfile::tempdir().unwrap();
    let c = common::corpus();
    for input in [
        c.join("ltt/smp_example"),
        c.join("dlt/testfile.dlt"),
        c.join("pcp/live_v3"),
        c.join("kpi/kpi-capture.dlt"),
    ] {
        let what = input.display().to_string();
        let (data, _) = perfetto(&input, dir.path());
        let d = decode_and_check(&data);
        assert!(d.dated, "{what}: REALTIME primary clock");
        let first = d.first_realtime.expect("events");
        let csv = dir.path().join("t.csv");
        let _ = std::fs::remove_file(dir.path().join("t.events.csv"));
        bin_run(&["--to", "csv", "--events"], &input, &csv);
        let mut times = Vec::new();
        for f in [csv.clone(), dir.path().join("t.events.csv")] {
            let Ok(text) = std::fs::read_to_string(&f) else {
                continue;
            };
            times.extend(
                text.lines()
                    .skip(1)
                    .map(|l| l.split(',').next().unwrap().to_string()),
            );
        }
        let csv_first = times.iter().min().expect("CSV rows");
        assert_eq!(
            first,
            epoch_ns(csv_first),
            "{what}: first event vs CSV {csv_first}"
        );
        let cv = chrome(&input, dir.path()).expect("Chrome JSON export");
        let chrome_first = cv
            .slices
            .iter()
            .map(|s| s.3)
            .chain(cv.instants.iter().map(|i| i.3))
            .chain(cv.counters.iter().map(|c| c.1))
            .min()
            .unwrap();
        assert_eq!(
            first,
            cv.origin + chrome_first,
            "{what}: first event vs Chrome JSON"
        );
        eprintln!("{what}: first event {csv_first}");
    }
}

/// DLT log messages: one log line each, as `dlt-convert -a` prints them
/// (APID/CTID, level, payload text).
#[test]
fn dlt_log_lines_equal_dlt_convert() {
    let Some((dc, dir)) = common::peer_and_scratch("dlt-convert") else {
        return;
    };
    for name in ["dlt/testfile.dlt", "kpi/kpi-capture.dlt"] {
        let input = common::corpus().join(name);
        let (data, _) = perfetto(&input, dir.path());
        let d = decode_and_check(&data);
        let o = Command::new(&dc).arg("-a").arg(&input).output().unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        let prio = |l: &str| match l {
            "fatal" => 7,
            "error" => 6,
            "warn" => 5,
            "info" => 4,
            "debug" => 3,
            "verbose" => 2,
            _ => panic!("level {l}"),
        };
        let mut want = Vec::new();
        for line in text.lines() {
            // idx date time tmsp cnt ECU APID CTID type level V|N n [payload]
            let Some(open) = line.find(" [") else {
                continue;
            };
            let w: Vec<&str> = line[..open].split_whitespace().collect();
            if w.len() != 12 || w[8] != "log" || w[6] == "PROC" {
                continue; // control messages; KPI messages become counters
            }
            let id = |x: &str| x.trim_end_matches('-').to_string();
            let payload = line[open + 2..].strip_suffix(']').unwrap();
            want.push((
                format!("{}:{}", id(w[6]), id(w[7])),
                prio(w[9]),
                payload.trim_end().to_string(),
            ));
        }
        let got: Vec<_> = d
            .logs
            .iter()
            .map(|l| (l.tag.clone(), l.prio, l.msg.trim_end().to_string()))
            .collect();
        assert!(!want.is_empty(), "{name}: dlt-convert shows log messages");
        assert_eq!(got.len(), want.len(), "{name}: log line count");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "{name}");
        }
    }
}

/// Timeline events with a priority are log lines too, tagged with their
/// category, the message with its arguments filled in.
#[test]
fn timeline_messages_are_log_lines() {
    let dir = tempfile::tempdir().unwrap();
    let (data, _) = perfetto(
        &common::corpus().join("timeline/a2-priorities.dat"),
        dir.path(),
    );
    let d = decode_and_check(&data);
    assert_eq!(d.logs.len(), 42, "every entry has a priority");
    let errors = d.logs.iter().filter(|l| l.prio == 6).count();
    let warnings = d.logs.iter().filter(|l| l.prio == 5).count();
    assert_eq!((errors, warnings), (9, 8));
    assert!(d.logs.iter().all(|l| l.tag == "prio"));
    assert!(
        d.logs.iter().all(|l| !l.msg.contains('$')),
        "placeholders filled"
    );
}

/// Cycles without a rate: refused, naming --tsc-hz; nothing written.
#[test]
fn cycles_need_tsc_hz_and_stdout_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.pftrace");
    let cycles = common::corpus().join("timeline/a2-priorities.dat");
    let err = common::pt_exit(2, &["convert", "-o"], &[&out, &cycles]);
    common::assert_has(&err, "--tsc-hz");
    assert!(!out.exists());
    let live = common::corpus().join("pcp/live_v3");
    let (code, stdout, err) = common::pt(&["convert", "--to", "perfetto", "-o", "-"], &[&live]);
    assert_eq!(code, 2, "{err}");
    assert!(stdout.is_empty());
}

/// Perfetto's own generated Python bindings parse every corpus output.
#[test]
fn perfetto_python_bindings_parse_every_output() {
    // scripts/install-peers.sh links its virtual environment's python.
    let Some((python, dir)) = common::peer_and_scratch("perfetto-python") else {
        return;
    };
    let mut paths = Vec::new();
    for input in corpus_inputs() {
        let (_, p) = perfetto(&input, dir.path());
        paths.push(p);
    }
    let lines = python_parse(&python, &paths);
    assert_eq!(lines.lines().count(), paths.len());
}

/// Perfetto's Python bindings parse each trace, find no field unknown to
/// the schema and re-encode it to exactly its size; one line per trace.
fn python_parse(python: &Path, paths: &[PathBuf]) -> String {
    let script = r#"
import sys
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from google.protobuf.unknown_fields import UnknownFieldSet
for path in sys.argv[1:]:
    t = pb.Trace()
    data = open(path, 'rb').read()
    t.ParseFromString(data)
    assert len(t.packet) > 0, path
    # Nothing unknown to the schema: every field polytrace writes is known.
    def walk(m):
        assert len(UnknownFieldSet(m)) == 0, (path, type(m).__name__)
        for f, v in m.ListFields():
            if f.message_type is None:
                continue
            for x in (v if f.is_repeated else [v]):
                walk(x)
    for p in t.packet:
        walk(p)
    # The bindings' own encoding is the same size: the file is canonical.
    assert len(t.SerializeToString()) == len(data), path
    print(path, len(t.packet))
"#;
    let o = common::output_ok(Command::new(python).arg("-c").arg(script).args(paths));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `--rate`: a counter-semantics metric becomes its rate per second,
/// computed from the raw values the default output carries; an
/// instant-semantics one stays as it is.
#[test]
fn rate_turns_counters_into_rates() {
    let (dir, input) = common::scratch_and_corpus("pcp/live_v3");
    let raw = dir.path().join("raw.perfetto-trace");
    let rate = dir.path().join("rate.perfetto-trace");
    bin_run(&["--to", "perfetto"], &input, &raw);
    bin_run(&["--to", "perfetto", "--rate"], &input, &rate);
    let raw = decode_and_check(&std::fs::read(&raw).unwrap());
    let rate = decode_and_check(&std::fs::read(&rate).unwrap());
    let series = |d: &Decoded, n: &str| -> Vec<(u64, f64)> {
        d.counters
            .iter()
            .filter(|c| c.0 == n)
            .map(|c| (c.1, c.2))
            .collect()
    };
    // kernel.all.cpu.user is a counter (PCP semantics), mem.util.free not.
    let r = series(&raw, "kernel.all.cpu.user");
    let q = series(&rate, "kernel.all.cpu.user");
    assert!(r.len() >= 3, "{r:?}");
    assert_eq!(q.len(), r.len() - 1, "no rate for the first value");
    for (k, (t, v)) in q.iter().enumerate() {
        let (t0, v0) = r[k];
        let (t1, v1) = r[k + 1];
        assert_eq!(*t, t1);
        let want = (v1 - v0) / ((t1 - t0) as f64 / 1e9);
        assert!(
            (v - want).abs() <= 1e-9 * want.abs().max(1.0),
            "{v} vs {want}"
        );
    }
    assert_eq!(
        series(&raw, "mem.util.free"),
        series(&rate, "mem.util.free"),
        "instant metrics unchanged"
    );
}

/// The packets of each machine (`machine_id`, 0 where absent) as a trace
/// of their own, in file order.
fn split_machines(data: &[u8]) -> BTreeMap<u64, Vec<u8>> {
    let mut out: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for (field, pf) in fields(data) {
        assert_eq!(field, 1, "Trace has only packets (field 1)");
        let p = b(&pf);
        let m = fields(p)
            .iter()
            .find(|(f, _)| *f == 98)
            .map(|(_, x)| v(x))
            .unwrap_or(0);
        let t = out.entry(m).or_default();
        t.push(0x0a);
        let mut n = p.len() as u64;
        while n >= 0x80 {
            t.push((n as u8) | 0x80);
            n >>= 7;
        }
        t.push(n as u8);
        t.extend_from_slice(p);
    }
    out
}

type SliceRow = (String, String, String, i64, i64);

/// The slices as (track, name, categories, begin, end), times shifted.
fn slice_rows(d: &Decoded, shift: i64) -> Vec<SliceRow> {
    let t = |x: u64| x as i64 + shift;
    d.slices
        .iter()
        .map(|s| {
            (
                s.track.clone(),
                s.name.clone(),
                s.cats.clone(),
                t(s.begin),
                t(s.end),
            )
        })
        .collect()
}
type InstantRow = (String, String, String, i64);
type CounterRow = (String, i64, u64);
type LogRow = (u64, String, u64, String);

/// What a user sees of one input, times on REALTIME (the clock the inputs
/// share), each list sorted: slices, instants, counter values (exact
/// bits), log lines.
fn seen(d: &Decoded) -> (Vec<SliceRow>, Vec<InstantRow>, Vec<CounterRow>, Vec<LogRow>) {
    let rt = |t: u64| t as i64 + d.offset;
    let mut sl = slice_rows(d, d.offset);
    let mut ins: Vec<_> = d
        .instants
        .iter()
        .map(|i| (i.track.clone(), i.name.clone(), i.cats.clone(), rt(i.ts)))
        .collect();
    let mut cs: Vec<_> = d
        .counters
        .iter()
        .map(|(n, t, v)| (n.clone(), rt(*t), v.to_bits()))
        .collect();
    let mut ls: Vec<_> = d
        .logs
        .iter()
        .map(|l| (l.ts, l.tag.clone(), l.prio, l.msg.clone()))
        .collect();
    sl.sort();
    ins.sort();
    cs.sort();
    ls.sort();
    (sl, ins, cs, ls)
}

/// `convert a b c --to perfetto`: each input is a machine of its own (the
/// first the host, without `machine_id`; the others 1, 2), named after the
/// input, with its own sequence, interning, tracks and clock tie; each
/// machine's packets keep the rules on their own and show what converting
/// that input alone shows.
#[test]
fn several_inputs_are_one_machine_each() {
    let dir = tempfile::tempdir().unwrap();
    let c = common::corpus();
    let inputs = [
        c.join("ltt/smp_example"),
        c.join("dlt/testfile.dlt"),
        c.join("pcp/live_v3"),
    ];
    let out = dir.path().join("all.perfetto-trace");
    let mut paths: Vec<&Path> = vec![&out];
    paths.extend(inputs.iter().map(PathBuf::as_path));
    let stderr = common::pt_exit(0, &["convert", "--to", "perfetto", "-o"], &paths);
    assert!(stderr.contains("3 machines (one per input)"), "{stderr}");
    let data = std::fs::read(&out).unwrap();
    let parts = split_machines(&data);
    assert_eq!(parts.keys().copied().collect::<Vec<_>>(), [0, 1, 2]);
    let mut seqs = std::collections::HashSet::new();
    let mut uuids = std::collections::HashSet::new();
    let mut packets = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        let label = input.file_name().unwrap().to_string_lossy().into_owned();
        let d = decode_and_check(&parts[&(i as u64)]);
        assert_eq!(d.machine, i as u64);
        assert_eq!(d.machine_name.as_deref(), Some(label.as_str()));
        assert!(seqs.insert(d.seq), "{label}: a sequence of its own");
        let own: std::collections::HashSet<u64> = d.uuids.iter().copied().collect();
        for u in &own {
            assert!(
                uuids.insert(*u),
                "{label}: track uuid {u} of another machine"
            );
        }
        assert!(
            d.clears >= 1,
            "{label}: its sequence's incremental state is cleared"
        );
        if i == 0 {
            assert!(d.dated, "the host's clock snapshot: REALTIME primary");
        }
        let (alone, _) = perfetto(input, dir.path());
        let a = seen(&decode_and_check(&alone));
        let m = seen(&d);
        assert_eq!(
            (m.0.len(), m.1.len(), m.2.len(), m.3.len()),
            (a.0.len(), a.1.len(), a.2.len(), a.3.len()),
            "{label}: slices, instants, counter values, log lines as alone"
        );
        for (same, what) in [
            (m.0 == a.0, "slices"),
            (m.1 == a.1, "instants"),
            (m.2 == a.2, "counter values"),
            (m.3 == a.3, "log lines"),
        ] {
            assert!(same, "{label}: {what} differ from converting it alone");
        }
        eprintln!(
            "{label}: machine {i}, {} slices, {} instants, {} counter values, {} log lines",
            m.0.len(),
            m.1.len(),
            m.2.len(),
            m.3.len()
        );
        packets.push(fields(&parts[&(i as u64)]).len());
    }
    assert!(packets.iter().all(|&n| n > 2), "{packets:?}");

    // Perfetto's own bindings: the file parses with nothing unknown, and
    // each packet's machine_id and sequence are those of its input.
    let Some(python) = common::peer("perfetto-python") else {
        return;
    };
    python_parse(&python, std::slice::from_ref(&out));
    let script = r#"
import sys, collections
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
t = pb.Trace()
t.ParseFromString(open(sys.argv[1], 'rb').read())
n = collections.Counter()
seq = {}
for p in t.packet:
    n[p.machine_id] += 1
    assert seq.setdefault(p.machine_id, p.trusted_packet_sequence_id) == p.trusted_packet_sequence_id
    if p.HasField('system_info'):
        print('name', p.machine_id, p.system_info.machine_name)
for m in sorted(n):
    print('packets', m, n[m], seq[m])
"#;
    let o = Command::new(&python)
        .arg("-c")
        .arg(script)
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let mut want = String::new();
    for (i, input) in inputs.iter().enumerate() {
        let label = input.file_name().unwrap().to_string_lossy();
        want.push_str(&format!("name {i} {label}\n"));
    }
    for (i, n) in packets.iter().enumerate() {
        want.push_str(&format!("packets {i} {n} {}\n", i + 1));
    }
    assert_eq!(text, want);
}
