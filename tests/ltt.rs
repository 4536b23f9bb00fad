//! LTT directory traces: the real 2004 sample against its reference
//! listings, the checksum vectors, round trips, the tricky traces of the
//! spec's section 6, and damage sweeps.

mod common;

use assert_cmd::Command;
use polytrace::formats::ltt::{
    dump::dump,
    eventdefs::{self, Arch},
    keys, open_trace,
    reader::{Trace, Trailer},
    writer::{Config, LttWriter},
    LttReader,
};
use polytrace::input::Input;
use polytrace::model::{
    EventType, ExtraValue, Field, FieldType, FormatId, Header, Item, MetricDesc, MetricValues,
    Sample, Semantics, Timestamp, TraceReader, TraceWriter, Units, Value, ValueType,
};
use polytrace::{Diagnostic, Severity};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn smp() -> PathBuf {
    common::corpus().join("ltt/smp_example")
}

fn xz(path: &Path) -> String {
    let out = std::process::Command::new("xz")
        .arg("-dc")
        .arg(path)
        .output()
        .expect("xz is installed");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

fn dump_dir(dir: &Path, no_framing: bool) -> (String, Vec<Diagnostic>) {
    let t = Trace::open(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut out = Vec::new();
    let d = dump(&t, no_framing, &mut out).unwrap();
    (String::from_utf8(out).unwrap(), d)
}

fn salvaged(d: &[Diagnostic]) -> usize {
    d.iter()
        .filter(|x| x.severity == Severity::Salvaged)
        .count()
}

// ------------------------------------------------------------ the sample

#[test]
fn smp_example_dump_is_the_reference_listing() {
    let expected = xz(&common::corpus().join("ltt/smp_example.dump.txt.xz"));
    let (actual, diags) = dump_dir(&smp(), false);
    assert_eq!(salvaged(&diags), 0, "{diags:?}");
    if let Some(d) = common::first_diff(&expected, &actual) {
        panic!("listing differs: {d}");
    }
    assert_eq!(actual.lines().count(), 173_157);
    assert_eq!(actual.matches("(cpu/0)").count(), 85_917);
    assert_eq!(actual.matches("(cpu/1)").count(), 87_240);
    assert_eq!(actual.matches("core.time_heartbeat:").count(), 2);
}

#[test]
fn smp_example_cli_dump_matches_and_no_framing_drops_framing() {
    let expected = xz(&common::corpus().join("ltt/smp_example.dump.txt.xz"));
    let out = Command::new(common::bin())
        .args(["dump"])
        .arg(smp())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout == expected.as_bytes(), "CLI listing differs");
    let out = Command::new(common::bin())
        .args(["dump", "--no-framing"])
        .arg(smp())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let nf = String::from_utf8(out.stdout).unwrap();
    let want: Vec<&str> = expected
        .lines()
        .filter(|l| {
            !l.starts_with("core.block_start:")
                && !l.starts_with("core.block_end:")
                && !l.starts_with("core.time_heartbeat:")
        })
        .collect();
    assert_eq!(nf.lines().collect::<Vec<_>>(), want);
}

/// LTTV's own 2004 reader: same ids, names and per-file order; times equal
/// except for one event off by 1 ns (LTTV used doubles).
#[test]
fn smp_example_agrees_with_lttv_2004() {
    let lttv = xz(&common::corpus().join("ltt/smp_example.lttv2004.txt.xz"));
    let t = Trace::open(&smp()).unwrap();
    let mut diags = Vec::new();
    let mut ours: Vec<(String, u16, String, i64)> = Vec::new();
    for mut c in t.cursors() {
        let rel = t.files[c.file_idx].rel.clone();
        while let Some(e) = c.next(&t, &mut diags) {
            let info = t.info(e.id).unwrap();
            ours.push((rel.clone(), e.id, info.name.clone(), e.time));
        }
    }
    let theirs: Vec<(String, u16, String, i64)> = lttv
        .lines()
        .filter(|l| l.starts_with('/'))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let rel = f[0].rsplit_once("smp_example/").unwrap().1.to_string();
            let (s, ns) = f[3].split_once('.').unwrap();
            let time = s.parse::<i64>().unwrap() * 1_000_000_000 + ns.parse::<i64>().unwrap();
            (rel, f[1].parse().unwrap(), f[2].to_string(), time)
        })
        .collect();
    assert_eq!(ours.len(), theirs.len());
    assert_eq!(ours.len(), 173_157);
    let mut off_by_one = 0;
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!((&a.0, a.1, &a.2), (&b.0, b.1, &b.2));
        match (a.3 - b.3).abs() {
            0 => {}
            1 => off_by_one += 1,
            d => panic!("{a:?} vs {b:?}: {d} ns apart"),
        }
    }
    assert_eq!(off_by_one, 1);
}

#[test]
fn smp_example_structure() {
    let t = Trace::open(&smp()).unwrap();
    assert_eq!(t.facilities.len(), 1);
    assert_eq!(t.facilities[0].checksum, 0x0658_8858);
    assert_eq!(t.facilities[0].events.len(), 22);
    assert_eq!(t.bases, vec![Some(0)]);
    // Era-A trailers: block_end at B − T.
    for (f, trailer) in [("cpu/0", 225_716u32), ("cpu/1", 201_865)] {
        let b = std::fs::read(smp().join(f)).unwrap();
        let tr = u32::from_le_bytes(b[b.len() - 4..].try_into().unwrap());
        assert_eq!(tr, trailer);
        let e = b.len() - tr as usize;
        assert_eq!(u16::from_le_bytes([b[e], b[e + 1]]), 18);
    }
    let h = LttReader::new(open_trace(&Input::resolve(&smp()).unwrap()).unwrap());
    let hd = h.header();
    assert_eq!(hd.extras.u64(keys::BLOCK_SIZE), Some(1_000_000));
    assert_eq!(hd.extras.str(keys::ARCH), Some("ILP32"));
    assert_eq!(
        hd.extras.str(keys::DESCRIPTION),
        Some("This is just a test")
    );
    assert_eq!(hd.host.as_deref(), Some("thales.casi.polymtl.ca"));
}

/// Every item of a stream, as text (items have no `PartialEq`).
fn items_one_by_one(mut r: Box<dyn TraceReader>) -> Vec<String> {
    let mut v = Vec::new();
    while let Some(it) = r.next_item().unwrap() {
        v.push(format!("{it:?}"));
        r.recycle(it);
    }
    v
}

/// The same stream in runs of `max` (`next_batch`), each run given back
/// (`recycle_batch`: the reader refills its events in place), with a
/// `next_item` between runs now and then.
fn items_in_runs(mut r: Box<dyn TraceReader>, max: usize) -> Vec<String> {
    let mut v = Vec::new();
    let mut run = Vec::new();
    for k in 0.. {
        let more = r.next_batch(&mut run, max).unwrap();
        assert!(run.len() <= max);
        v.extend(run.iter().map(|it| format!("{it:?}")));
        r.recycle_batch(&mut run);
        assert!(run.is_empty());
        if !more {
            break;
        }
        if k % 5 == 4 {
            match r.next_item().unwrap() {
                Some(it) => {
                    v.push(format!("{it:?}"));
                    r.recycle(it);
                }
                None => break,
            }
        }
    }
    assert!(r.next_item().unwrap().is_none());
    v
}

/// Runs of items are the items one by one: the LTT reader's own runs
/// (events decoded into recycled ones in place), and through the stages a
/// conversion into a timeline adds (framing left out, raw clocks dropped).
#[test]
fn runs_of_items_are_the_items_one_by_one() {
    use polytrace::options::{ReadOptions, WriteOptions};
    let open = || {
        polytrace::formats::get(FormatId::Ltt)
            .open(&Input::resolve(&smp()).unwrap(), &ReadOptions::default())
            .unwrap()
    };
    let to = polytrace::formats::get(FormatId::Timeline);
    let adapted = || polytrace::pipeline::adapt(open(), to, &WriteOptions::default()).0;
    let one = items_one_by_one(open());
    // 22 event types, then every event, framing included.
    assert_eq!(one.len(), 22 + 173_157);
    let one_adapted = items_one_by_one(adapted());
    assert_eq!(one_adapted.len(), 18 + 173_151);
    for max in [1, 7, 256, 1000] {
        assert!(items_in_runs(open(), max) == one, "runs of {max} differ");
        assert!(
            items_in_runs(adapted(), max) == one_adapted,
            "adapted runs of {max} differ"
        );
    }
}

#[test]
fn checksum_vectors() {
    let dir = common::corpus().join("ltt/checksum-vectors");
    for (f, want) in [
        ("v1.xml", 0xe8b7_be43u32),
        ("v2.xml", 0x9da4_a484),
        ("v3.xml", 0x26d9_2121),
        ("v4.xml", 0x1f52_2231),
    ] {
        let src = std::fs::read(dir.join(f)).unwrap();
        let fs = eventdefs::parse_file(&src, f).unwrap();
        assert_eq!(fs[0].checksum, want, "{f}");
    }
    let core = std::fs::read(smp().join("eventdefs/core.xml")).unwrap();
    assert_eq!(
        eventdefs::parse_file(&core, "core.xml").unwrap()[0].checksum,
        0x0658_8858
    );
    // Tolerant dialect: quoted sizes, upper-case names and XML comments
    // change nothing that is hashed.
    let v3 = "<!-- c --><FACILITY Name=\"f\">\n <Event name='e'>\n  <struct>\n   <field name=x><UINT SIZE=\"4\"/></field>\n  </struct>\n </Event>\n</FACILITY>";
    assert_eq!(
        eventdefs::parse_file(v3.as_bytes(), "v3").unwrap()[0].checksum,
        0x26d9_2121
    );
}

// ------------------------------------------------------------ round trips

fn copy_through(src: &Path, dst: &Path, cfg: Option<Config>) -> polytrace::model::LossReport {
    let mut r = LttReader::new(open_trace(&Input::resolve(src).unwrap()).unwrap());
    let header = r.header().clone();
    let cfg = cfg.unwrap_or_else(|| Config::from_options(&header, &Default::default()));
    let mut w = LttWriter::create(dst, &header, cfg).unwrap();
    while let Some(it) = r.next_item().unwrap() {
        w.write_item(&it).unwrap();
    }
    Box::new(w).finish().unwrap()
}

fn same_tree(a: &Path, b: &Path) {
    let list = |d: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        let mut v: Vec<(PathBuf, Vec<u8>)> = walkdir::WalkDir::new(d)
            .into_iter()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_file())
            .map(|e| {
                (
                    e.path().strip_prefix(d).unwrap().to_path_buf(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let (x, y) = (list(a), list(b));
    assert_eq!(
        x.iter().map(|p| &p.0).collect::<Vec<_>>(),
        y.iter().map(|p| &p.0).collect::<Vec<_>>()
    );
    for (p, q) in x.iter().zip(&y) {
        assert!(p.1 == q.1, "{} differs", p.0.display());
    }
}

#[test]
fn smp_example_round_trip_and_second_write_is_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    let loss = copy_through(&smp(), &a, None);
    assert!(!loss.has_loss(), "{loss}");
    assert_eq!(loss.written.get("events"), Some(&173_151));
    assert_eq!(dump_dir(&a, true).0, dump_dir(&smp(), true).0);
    // eventdefs copied byte for byte
    assert_eq!(
        std::fs::read(a.join("eventdefs/core.xml")).unwrap(),
        std::fs::read(smp().join("eventdefs/core.xml")).unwrap()
    );
    copy_through(&a, &b, None);
    same_tree(&a, &b);
    // tar.gz both ways, deterministic
    let z1 = tmp.path().join("t1.tar.gz");
    let z2 = tmp.path().join("t2.tar.gz");
    copy_through(&a, &z1, None);
    let (l, _) = {
        let o = open_trace(&Input::resolve(&z1).unwrap()).unwrap();
        let mut out = Vec::new();
        let d = dump(&o.trace, true, &mut out).unwrap();
        (String::from_utf8(out).unwrap(), d)
    };
    assert_eq!(l, dump_dir(&smp(), true).0);
    copy_through(&z1, &z2, None);
    assert!(std::fs::read(&z1).unwrap() == std::fs::read(&z2).unwrap());
    // the CLI detects the archive
    let (code, out, err) = common::pt(&["dump", "--no-framing"], &[&z1]);
    assert_eq!(code, 0, "{err}");
    assert!(out == l);
}

#[test]
fn cli_convert_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    Command::new(common::bin())
        .args(["convert", "--to", "ltt", "-o"])
        .arg(&a)
        .arg(smp())
        .assert()
        .code(0);
    assert_eq!(dump_dir(&a, true).0, dump_dir(&smp(), true).0);
    let b = tmp.path().join("b");
    Command::new(common::bin())
        .args(["convert", "--to", "ltt", "--ltt-block-size", "4096", "-o"])
        .arg(&b)
        .arg(&a)
        .assert()
        .code(0);
    assert_eq!(std::fs::metadata(b.join("cpu/0")).unwrap().len() % 4096, 0);
    assert_eq!(dump_dir(&b, true).0, dump_dir(&smp(), true).0);
}

// ------------------------------------------------------------ builders

/// A stream with LTT event definitions (as if read from an LTT trace).
struct LttSrc {
    header: Header,
    items: Vec<Item>,
}

impl LttSrc {
    /// `defs`: (file name, xml, base).
    fn new(defs: &[(&str, &str, u32)]) -> LttSrc {
        let mut header = Header::new(FormatId::Ltt, "2.0");
        let mut files = vec![];
        let mut facs = vec![];
        let mut items = vec![];
        for (name, xml, base) in defs {
            files.push(ExtraValue::List(vec![
                ExtraValue::Str(name.to_string()),
                ExtraValue::Bytes(xml.as_bytes().to_vec()),
            ]));
            for f in eventdefs::parse_file(xml.as_bytes(), name).unwrap() {
                facs.push(ExtraValue::List(vec![
                    ExtraValue::Str(f.name.clone()),
                    ExtraValue::U64(f.checksum as u64),
                    ExtraValue::U64(*base as u64),
                    ExtraValue::Str(name.to_string()),
                ]));
                for (i, e) in f.events.iter().enumerate() {
                    let id = base + i as u32;
                    let mut et = EventType::new(id, &f.name, &e.name, vec![]);
                    et.extras.set(keys::EVENT_ID, ExtraValue::U64(id as u64));
                    items.push(Item::EventType(Arc::new(et)));
                }
            }
        }
        header.extras.set(keys::EVENTDEFS, ExtraValue::List(files));
        header.extras.set(keys::FACILITIES, ExtraValue::List(facs));
        LttSrc { header, items }
    }
    fn ev(&mut self, id: u32, time: i64, cpu: u32, fields: Vec<Value>) {
        self.items.push(common::event(time, id, Some(cpu), fields));
    }
    fn write(&self, dir: &Path, cfg: Config) -> polytrace::Result<polytrace::model::LossReport> {
        write_items(dir, &self.header, &self.items, cfg)
    }
}

fn write_items(
    dir: &Path,
    header: &Header,
    items: &[Item],
    cfg: Config,
) -> polytrace::Result<polytrace::model::LossReport> {
    let mut w = LttWriter::create(dir, header, cfg)?;
    for it in items {
        w.write_item(it)?;
    }
    Box::new(w).finish()
}

fn cfg(block_size: u32) -> Config {
    Config {
        block_size,
        ..Config::default()
    }
}

/// Hand-built binary pieces.
struct Hand {
    big: bool,
}

impl Hand {
    fn n(&self, v: u64, size: usize) -> Vec<u8> {
        let b = if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        if self.big {
            b[8 - size..].to_vec()
        } else {
            b[..size].to_vec()
        }
    }
    fn ev(&self, id: u16, ts: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = self.n(id as u64, 2);
        v.extend(self.n(ts as u64, 4));
        v.extend_from_slice(payload);
        v
    }
    fn stamp(&self, sec: u32, nsec: u32, c: u64) -> Vec<u8> {
        let mut v = self.n(sec as u64, 4);
        v.extend(self.n(nsec as u64, 4));
        v.extend(self.n(c, 8));
        v
    }
    /// A heartbeat with a payload consistent with counter = ns.
    fn hb(&self, c: u64) -> Vec<u8> {
        self.ev(
            19,
            c as u32,
            &self.stamp((c / 1_000_000_000) as u32, (c % 1_000_000_000) as u32, c),
        )
    }
    /// One block; `start`/`end` are (sec, nsec, counter).
    fn block(
        &self,
        b: usize,
        start: (u32, u32, u64),
        end: (u32, u32, u64),
        body: &[Vec<u8>],
        conv: Trailer,
    ) -> Vec<u8> {
        let mut p = self.stamp(start.0, start.1, start.2);
        p.extend(self.n(0, 4));
        let mut v = self.ev(17, start.2 as u32, &p);
        for e in body {
            v.extend_from_slice(e);
        }
        let e = v.len();
        let mut p = self.stamp(end.0, end.1, end.2);
        p.extend(self.n(0, 4));
        v.extend(self.ev(18, end.2 as u32, &p));
        assert!(v.len() + 4 <= b, "test block overflows");
        v.resize(b - 4, 0);
        let t = match conv {
            Trailer::EraA => b - e,
            Trailer::EraB => b - 4 - e - 26,
            Trailer::Literal => e,
        };
        v.extend(self.n(t as u64, 4));
        v
    }
    /// A block whose counter is ns since the epoch (ratio 1).
    fn nsblock(&self, b: usize, c0: u64, c1: u64, body: &[Vec<u8>]) -> Vec<u8> {
        let s = |c: u64| ((c / 1_000_000_000) as u32, (c % 1_000_000_000) as u32, c);
        self.block(b, s(c0), s(c1), body, Trailer::EraA)
    }
}

/// Write a hand-made trace: system.xml, eventdefs (loaded at the given
/// bases through control/facilities), and tracefiles.
fn hand_trace(
    dir: &Path,
    big: bool,
    b: usize,
    arch: &str,
    defs: &[(&str, &str, u32)],
    files: &[(&str, Vec<u8>)],
) {
    let h = Hand { big };
    for d in ["info", "eventdefs", "control", "cpu"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    std::fs::write(
        dir.join("info/system.xml"),
        format!(
            "<system node_name=\"t\" cpu=\"8\" arch_size=\"{arch}\" endian=\"{}\" ltt_block_size=\"{b}\">test</system>",
            if big { "BIG_ENDIAN" } else { "LITTLE_ENDIAN" }
        ),
    )
    .unwrap();
    let mut loads = vec![];
    for (name, xml, base) in defs {
        std::fs::write(dir.join("eventdefs").join(name), xml).unwrap();
        for f in eventdefs::parse_file(xml.as_bytes(), name).unwrap() {
            let mut p = f.name.as_bytes().to_vec();
            p.push(0);
            p.extend(h.n(f.checksum as u64, 4));
            p.extend(h.n(*base as u64, 4));
            loads.push(h.ev(0, 0, &p));
        }
    }
    if !loads.is_empty() {
        std::fs::write(dir.join("control/facilities"), h.nsblock(b, 0, 0, &loads)).unwrap();
    }
    for (name, data) in files {
        std::fs::write(dir.join(name), data).unwrap();
    }
}

const H_XML: &str = "<facility name=h><description>d</description><event name=ev><description>d</description></event><event name=v><description>d</description><struct><field name=x><uint size=4/></field></struct></event></facility>";

// ------------------------------------------------------------ 6.2 block edges

const BYTES_XML: &str = "<facility name=\"blob\"><description>d</description><event name=\"b\"><description>d</description><struct><field name=\"data\"><sequence lengthsize=4><uint size=1/></sequence></field></struct></event></facility>";

fn blob(n: usize) -> Vec<Value> {
    vec![Value::List(vec![Value::U64(7); n])]
}

#[test]
fn block_edges() {
    let tmp = tempfile::tempdir().unwrap();
    let b = 200u32;
    // Largest legal payload (B − 62 = 138 = 4 + 134): block_end ends at B − 4.
    let mut s = LttSrc::new(&[("blob.xml", BYTES_XML, 20)]);
    s.ev(20, 1_000, 0, blob(134));
    let d = tmp.path().join("max");
    s.write(&d, cfg(b)).unwrap();
    let f = std::fs::read(d.join("cpu/0")).unwrap();
    assert_eq!(f.len(), 200);
    assert_eq!(u32::from_le_bytes(f[196..200].try_into().unwrap()), 30);
    let (l, diags) = dump_dir(&d, true);
    assert_eq!(salvaged(&diags), 0);
    assert!(l.starts_with("blob.b: 0.000001000 (cpu/0) { data = [ 7, 7,"));

    // One byte more is an error naming the event.
    let mut s = LttSrc::new(&[("blob.xml", BYTES_XML, 20)]);
    s.ev(20, 1_000, 0, blob(135));
    let e = s.write(&tmp.path().join("over"), cfg(b)).unwrap_err();
    assert!(e.to_string().contains("blob.b"), "{e}");

    // Second event fits exactly, then one byte more moves to a new block.
    for (n, blocks) in [(124usize, 1u64), (125, 2)] {
        let mut s = LttSrc::new(&[("blob.xml", BYTES_XML, 20)]);
        s.ev(20, 1_000, 0, blob(0));
        s.ev(20, 2_000, 0, blob(n));
        let d = tmp.path().join(format!("two{n}"));
        s.write(&d, cfg(b)).unwrap();
        assert_eq!(
            std::fs::metadata(d.join("cpu/0")).unwrap().len(),
            200 * blocks
        );
        let (l, diags) = dump_dir(&d, false);
        assert_eq!(salvaged(&diags), 0);
        assert_eq!(l.matches("blob.b:").count(), 2);
        assert_eq!(l.matches("block_start:").count() as u64, blocks + 1);
    }

    // B = 56: blocks that hold only framing.
    let h = Hand { big: false };
    let d = tmp.path().join("b56");
    let blk = h.nsblock(56, 5_000, 6_000, &[]);
    assert_eq!(&blk[52..], &30u32.to_le_bytes());
    let mut two = blk.clone();
    two.extend(h.nsblock(56, 7_000, 8_000, &[]));
    hand_trace(&d, false, 56, "ILP32", &[], &[("cpu/0", two)]);
    let (l, diags) = dump_dir(&d, false);
    assert_eq!(salvaged(&diags), 0);
    assert_eq!(
        l,
        "builtin.block_start: 0.000005000 (cpu/0) { seconds = 0, nanoseconds = 5000, cycle_count = 5000, block_id = 0 }\n\
         builtin.block_end: 0.000006000 (cpu/0) { seconds = 0, nanoseconds = 6000, cycle_count = 6000, block_id = 0 }\n\
         builtin.block_start: 0.000007000 (cpu/0) { seconds = 0, nanoseconds = 7000, cycle_count = 7000, block_id = 0 }\n\
         builtin.block_end: 0.000008000 (cpu/0) { seconds = 0, nanoseconds = 8000, cycle_count = 8000, block_id = 0 }\n"
    );
}

// ------------------------------------------------------------ 6.3 heartbeats

const W: u64 = 1 << 32;

/// A little-endian ILP32 trace of 400-byte blocks with `H_XML`'s events
/// and one tracefile, `cpu/0`.
fn h_trace(dir: &Path, cpu0: Vec<u8>) {
    hand_trace(
        dir,
        false,
        400,
        "ILP32",
        &[("h.xml", H_XML, 20)],
        &[("cpu/0", cpu0)],
    );
}

#[test]
fn heartbeat_only_stretches() {
    let tmp = tempfile::tempdir().unwrap();
    let h = Hand { big: false };
    let c0 = 1_000_000_000u64;
    let x = |c: u64, v: u32| h.ev(21, c as u32, &v.to_le_bytes());
    // (a) heartbeats 2^32 − 1 apart over 5·2^32, then one event: wrap counting alone.
    let mut body: Vec<Vec<u8>> = (1..=5).map(|k| h.hb(c0 + k * (W - 1))).collect();
    let last = c0 + 5 * (W - 1) + 10;
    body.push(x(last, 1));
    let d = tmp.path().join("a");
    h_trace(&d, h.nsblock(400, c0, last, &body));
    let (l, diags) = dump_dir(&d, false);
    assert_eq!(salvaged(&diags), 0, "{diags:?}");
    let times: Vec<&str> = l
        .lines()
        .filter(|l| l.contains("(cpu/0)"))
        .map(|l| l.split(' ').nth(1).unwrap())
        .collect();
    let want: Vec<String> = std::iter::once(c0)
        .chain((1..=5).map(|k| c0 + k * (W - 1)))
        .chain([last, last])
        .map(|c| Timestamp(c as i64).to_string())
        .collect();
    assert_eq!(times, want);
    assert!(l.contains(&format!(
        "h.v: {} (cpu/0) {{ x = 1 }}",
        Timestamp(last as i64)
    )));

    // (b) a heartbeat 3·2^32 after the start: only its payload can resync.
    let hb = c0 + 3 * W + 5;
    let ev = hb + 7;
    let body = vec![h.hb(hb), x(ev, 2)];
    let d = tmp.path().join("b");
    h_trace(&d, h.nsblock(400, c0, ev, &body));
    let (l, _) = dump_dir(&d, true);
    assert_eq!(
        l,
        format!("h.v: {} (cpu/0) {{ x = 2 }}\n", Timestamp(ev as i64))
    );

    // (c) inconsistent payloads (low word differs) are ignored.
    let mut bad = h.ev(19, (c0 + 100) as u32, &h.stamp(0, 0, c0 + W + 5));
    bad.truncate(22);
    let body = vec![bad, x(c0 + 200, 3)];
    let d = tmp.path().join("c");
    h_trace(&d, h.nsblock(400, c0, c0 + 200, &body));
    let (l, _) = dump_dir(&d, false);
    assert!(l.contains(&format!("builtin.time_heartbeat: {} (cpu/0) {{ seconds = 0, nanoseconds = 0, cycle_count = {} }}", Timestamp((c0 + 100) as i64), c0 + W + 5)), "{l}");
    assert!(l.contains(&format!(
        "h.v: {} (cpu/0) {{ x = 3 }}",
        Timestamp((c0 + 200) as i64)
    )));

    // The writer inserts heartbeats so no gap reaches 2^32, and they resync.
    let mut s = LttSrc::new(&[("h.xml", H_XML, 20)]);
    s.ev(21, 1_000, 0, vec![Value::U64(1)]);
    s.ev(21, 1_000 + 5 * W as i64 + 3, 0, vec![Value::U64(2)]);
    let d = tmp.path().join("w");
    s.write(&d, cfg(400)).unwrap();
    let (l, _) = dump_dir(&d, false);
    assert_eq!(l.matches("time_heartbeat").count(), 5);
    assert!(l.contains(&format!(
        "h.v: {} (cpu/0) {{ x = 2 }}",
        Timestamp(1_000 + 5 * W as i64 + 3)
    )));
    // Heartbeats when the block is full move the event to a new block instead.
    let d = tmp.path().join("w2");
    s.write(&d, cfg(100)).unwrap();
    assert_eq!(dump_dir(&d, true).0.lines().count(), 2);
}

// ------------------------------------------------------------ 6.4 wraps

#[test]
fn wrap_boundaries() {
    let tmp = tempfile::tempdir().unwrap();
    let h = Hand { big: false };
    let c0 = 3 * W + 0xFFFF_FFF0;
    let c1 = 4 * W + 0x10;
    let x = |ts: u32, v: u32| h.ev(21, ts, &v.to_le_bytes());
    let body = vec![x(0xFFFF_FFFF, 1), x(0, 2), x(0, 3), x(0x10, 4)];
    // T0 = 1 s, T1 = T0 + (C1 − C0): ratio 1.
    let b1 = h.block(
        400,
        (1, 0, c0),
        (1, (c1 - c0) as u32, c1),
        &body,
        Trailer::EraA,
    );
    // first event equal to low32(C0): no wrap
    let b2 = h.block(
        400,
        (2, 0, c0),
        (2, 100, c0 + 100),
        &[x(c0 as u32, 5)],
        Trailer::EraA,
    );
    let mut f = b1;
    f.extend(b2);
    let d = tmp.path().join("w");
    h_trace(&d, f);
    let (l, diags) = dump_dir(&d, true);
    assert_eq!(salvaged(&diags), 0);
    assert_eq!(
        l,
        "h.v: 1.000000015 (cpu/0) { x = 1 }\n\
         h.v: 1.000000016 (cpu/0) { x = 2 }\n\
         h.v: 1.000000016 (cpu/0) { x = 3 }\n\
         h.v: 1.000000032 (cpu/0) { x = 4 }\n\
         h.v: 2.000000000 (cpu/0) { x = 5 }\n"
    );
    let t = Trace::open(&d).unwrap();
    let mut c = t.cursors().pop().unwrap();
    let mut dg = vec![];
    let counters: Vec<u64> = std::iter::from_fn(|| c.next(&t, &mut dg))
        .map(|e| e.counter)
        .collect();
    assert_eq!(
        &counters[..6],
        &[c0, 4 * W - 1, 4 * W, 4 * W, 4 * W + 0x10, c1]
    );
}

// ------------------------------------------------------------ 6.5 endian twin, 6.12 arch

const TWIN_XML: &str = "<facility name=tw>\n <description>twin</description>\n <event name=e><description>d</description><struct>\n  <field name=m><int size=medium/></field>\n  <field name=l><uint size=long/></field>\n  <field name=s><int size=short/></field>\n  <field name=f><float size=4/></field>\n  <field name=d><float size=long/></field>\n  <field name=q><sequence lengthsize=medium><uint size=2/></sequence></field>\n  <field name=k><enum size=long><label name=A/><label name=B value=5/><label name=C/></enum></field>\n </struct></event>\n <event name=empty><description>no payload</description></event>\n</facility>\n";

fn twin(base: u32) -> LttSrc {
    let mut s = LttSrc::new(&[("tw.xml", TWIN_XML, base)]);
    for i in 0..20 {
        s.ev(
            base,
            1_000_000_000_000 + i * 1_000,
            0,
            vec![
                Value::I64(-5 - i),
                Value::U64(4_000_000_000),
                Value::I64(-2),
                Value::F32(1.5),
                Value::F64(0.1),
                Value::List(vec![Value::U64(1), Value::U64(2), Value::U64(3)]),
                Value::Enum(6),
            ],
        );
        s.ev(base + 1, 1_000_000_000_000 + i * 1_000 + 500, 0, vec![]);
    }
    s
}

#[test]
fn big_endian_twin_and_arch_extremes() {
    let tmp = tempfile::tempdir().unwrap();
    let s = twin(20);
    let mut dumps = vec![];
    let mut sizes = vec![];
    for (name, big, arch) in [
        ("be64", true, Arch::Lp64),
        ("le32", false, Arch::Ilp32),
        ("lp32", false, Arch::Lp32),
        ("ilp64", true, Arch::Ilp64),
    ] {
        let d = tmp.path().join(name);
        let c = Config {
            block_size: 256,
            big_endian: big,
            arch,
            trailer: Trailer::EraA,
        };
        s.write(&d, c).unwrap();
        let f = std::fs::read(d.join("cpu/0")).unwrap();
        assert!(f.len() > 256, "multi-block");
        let tr = &f[252..256];
        let t = if big {
            u32::from_be_bytes(tr.try_into().unwrap())
        } else {
            u32::from_le_bytes(tr.try_into().unwrap())
        };
        assert!((30..=230).contains(&t), "{name}: trailer {t}");
        let (l, diags) = dump_dir(&d, true);
        assert_eq!(salvaged(&diags), 0);
        dumps.push(l);
        sizes.push(f.len());
    }
    assert!(dumps.iter().all(|d| d == &dumps[0]));
    assert!(dumps[0].starts_with("tw.e: 1000.000000000 (cpu/0) { m = -5, l = 4000000000, s = -2, f = 1.5, d = 0.1, q = [ 1, 2, 3 ], k = C }\ntw.empty: 1000.000000500 (cpu/0)\n"));
    // ILP64 payloads are larger than LP32 ones, so more blocks.
    assert!(sizes[3] > sizes[2]);
    // A facility ending exactly at id 65535.
    let d = tmp.path().join("top");
    twin(65534).write(&d, cfg(256)).unwrap();
    assert_eq!(dump_dir(&d, true).0, dumps[0]);
    // One past is refused by the writer.
    let e = twin(65535).write(&tmp.path().join("past"), cfg(256));
    assert!(e.is_err());
    // The same XML with arch UNKNOWN cannot be read (medium/long used).
    let h = Hand { big: false };
    let d = tmp.path().join("unk");
    hand_trace(
        &d,
        false,
        256,
        "UNKNOWN",
        &[("tw.xml", TWIN_XML, 20)],
        &[("cpu/0", h.nsblock(256, 0, 0, &[]))],
    );
    assert!(Trace::open(&d).is_err());
}

// ------------------------------------------------------------ 6.6 unions

const UNION_XML: &str = "<facility name=u>\n <description>unions</description>\n <event name=e1><description>d</description><struct>\n   <field name=a><union typecodesize=1><field name=x><uint size=1/></field><field name=s><string/></field></union></field>\n   <field name=b><union typecodesize=2><field name=x><int size=4/></field><field name=y><float size=8/></field></union></field>\n   <field name=c><union typecodesize=short><field name=x><uint size=2/></field></union></field>\n   <field name=q><sequence lengthsize=1><union typecodesize=1><field name=n><uint size=1/></field><field name=t><string/></field></union></sequence></field>\n </struct></event>\n</facility>\n";

#[test]
fn unions() {
    let tmp = tempfile::tempdir().unwrap();
    let un = |t: u64, v: Value| Value::Union(vec![Value::U64(t), v]);
    let mut s = LttSrc::new(&[("u.xml", UNION_XML, 20)]);
    for big in [false, true] {
        s.items.truncate(1);
        s.ev(
            20,
            5_000,
            0,
            vec![
                un(1, Value::Str("hi".into())),
                un(1, Value::F64(2.5)),
                un(0, Value::U64(7)),
                Value::List(vec![un(0, Value::U64(3)), un(1, Value::Str("z".into()))]),
            ],
        );
        let d = tmp.path().join(format!("u{big}"));
        s.write(
            &d,
            Config {
                big_endian: big,
                block_size: 1000,
                ..Config::default()
            },
        )
        .unwrap();
        let (l, diags) = dump_dir(&d, true);
        assert_eq!(salvaged(&diags), 0);
        assert_eq!(
            l,
            "u.e1: 0.000005000 (cpu/0) { a = { s = \"hi\" }, b = { y = 2.5 }, c = { x = 7 }, q = [ { n = 3 }, { t = \"z\" } ] }\n"
        );
        // model values come back as written
        let mut r = LttReader::new(open_trace(&Input::resolve(&d).unwrap()).unwrap());
        let mut evs = vec![];
        while let Some(it) = r.next_item().unwrap() {
            if let Item::Event(e) = it {
                if e.type_id == 20 {
                    evs.push(e);
                }
            }
        }
        assert_eq!(evs[0].fields[0], un(1, Value::Str("hi".into())));
    }

    // tag = number of members: decode error, rest of the block lost, next block fine.
    let h = Hand { big: false };
    let xml = "<facility name=u><description>d</description><event name=e><description>d</description><struct><field name=a><union typecodesize=1><field name=x><uint size=1/></field><field name=s><string/></field></union></field></struct></event></facility>";
    let ok = |c: u64| h.ev(20, c as u32, &[0, 9]);
    let bad = |c: u64| h.ev(20, c as u32, &[2, 9]);
    let s1 = |c: u64| h.ev(20, c as u32, b"\x01x\0");
    let mut f = h.nsblock(200, 1_000, 1_040, &[ok(1_010), bad(1_020), ok(1_030)]);
    f.extend(h.nsblock(200, 2_000, 2_040, &[s1(2_010)]));
    let d = tmp.path().join("bad");
    hand_trace(
        &d,
        false,
        200,
        "ILP32",
        &[("u.xml", xml, 20)],
        &[("cpu/0", f)],
    );
    let (l, diags) = dump_dir(&d, true);
    assert_eq!(
        l,
        "u.e: 0.000001010 (cpu/0) { a = { x = 9 } }\nu.e: 0.000002010 (cpu/0) { a = { s = \"x\" } }\n"
    );
    assert_eq!(salvaged(&diags), 1);
    assert!(diags.iter().any(|x| x.msg.contains("union tag 2")));
    let (l, _) = dump_dir(&d, false);
    let ends = l
        .lines()
        .filter(|x| x.contains("block_end") && x.contains("(cpu/0)"));
    assert_eq!(ends.count(), 1, "the bad block's block_end is not listed");
    // The CLI reports it with exit code 1.
    Command::new(common::bin())
        .arg("dump")
        .arg(&d)
        .assert()
        .code(1);
}

// ------------------------------------------------------------ 6.7 nesting

const NEST_XML: &str = "<facility name=n>\n <description>nested</description>\n <event name=e><description>d</description><struct>\n   <field name=ss><sequence lengthsize=1><sequence lengthsize=2><string/></sequence></sequence></field>\n   <field name=z><sequence lengthsize=4><uint size=4/></sequence></field>\n   <field name=as><array size=2><string/></array></field>\n   <field name=o><typeref name=outer/></field>\n </struct></event>\n <type name=outer><struct><field name=arr><array size=2><typeref name=inner/></array></field></struct></type>\n <type name=inner><struct><field name=v><int size=2/></field></struct></type>\n</facility>\n";

#[test]
fn nested_variable_types() {
    let tmp = tempfile::tempdir().unwrap();
    let st = |s: &str| Value::Str(s.into());
    let mut s = LttSrc::new(&[("n.xml", NEST_XML, 20)]);
    s.ev(
        20,
        7,
        0,
        vec![
            Value::List(vec![
                Value::List(vec![st("a"), st("b")]),
                Value::List(vec![]),
                Value::List(vec![st("c\"\n")]),
            ]),
            Value::List(vec![]),
            Value::List(vec![st("p"), st("q")]),
            Value::Struct(vec![Value::List(vec![
                Value::Struct(vec![Value::I64(-1)]),
                Value::Struct(vec![Value::I64(2)]),
            ])]),
        ],
    );
    let d = tmp.path().join("n");
    s.write(&d, cfg(500)).unwrap();
    let (l, _) = dump_dir(&d, true);
    assert_eq!(
        l,
        "n.e: 0.000000007 (cpu/0) { ss = [ [ \"a\", \"b\" ], [ ], [ \"c\\\"\\n\" ] ], z = [ ], as = [ \"p\", \"q\" ], o = { arr = [ { v = -1 }, { v = 2 } ] } }\n"
    );
}

// ------------------------------------------------------------ 6.8 sparse cpus

fn timeline_src(events: &[(i64, u32)]) -> (Header, Vec<Item>) {
    let h = Header::new(FormatId::Timeline, "A2");
    let mut items = vec![Item::EventType(Arc::new(EventType::new(
        1,
        "app",
        "tick",
        vec![Field::new("n", FieldType::Uint(4))],
    )))];
    for (i, (t, cpu)) in events.iter().enumerate() {
        items.push(common::event(*t, 1, Some(*cpu), vec![Value::U64(i as u64)]));
    }
    (h, items)
}

/// `items` written as an LTT trace into `d` and listed, which must be clean.
fn written_listing(d: &Path, h: &Header, items: &[Item]) -> String {
    write_items(d, h, items, cfg(1000)).unwrap();
    let (l, diags) = dump_dir(d, true);
    assert!(diags.is_empty(), "{diags:?}");
    l
}

#[test]
fn sparse_cpus() {
    let tmp = tempfile::tempdir().unwrap();
    let evs: Vec<(i64, u32)> = [0u32, 1, 2, 4, 6, 7]
        .iter()
        .enumerate()
        .map(|(i, &c)| (1_000 + 10 * i as i64, c))
        .collect();
    let (h, items) = timeline_src(&evs);
    let d = tmp.path().join("s");
    write_items(&d, &h, &items, cfg(100)).unwrap();
    let sys = std::fs::read_to_string(d.join("info/system.xml")).unwrap();
    assert!(sys.contains("cpu=\"8\""), "{sys}");
    let (before, _) = dump_dir(&d, false);
    assert_eq!(before.matches("app.tick").count(), 6);
    assert!(before.contains("app.tick: 0.000001050 (cpu/7) { n = 5 }"));
    std::fs::write(d.join("cpu/x"), b"junk").unwrap();
    std::fs::copy(d.join("cpu/7"), d.join("cpu/07")).unwrap();
    std::fs::write(d.join("cpu/3"), b"").unwrap();
    let mut six = std::fs::read(d.join("cpu/6")).unwrap();
    six.extend_from_slice(&[1; 10]);
    std::fs::write(d.join("cpu/6"), six).unwrap();
    // A trailing partial block is damage (issue 16): refused unless salvaged.
    let e = Trace::open(&d).err().unwrap().to_string();
    assert!(e.contains("cpu/6: byte 100: trailing partial block"), "{e}");
    let t = Trace::open_with(&d, true).unwrap();
    let mut out = Vec::new();
    let diags = dump(&t, false, &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), before);
    let msgs: Vec<&str> = diags.iter().map(|d| d.msg.as_str()).collect();
    assert!(
        msgs.iter().filter(|m| m.contains("canonical")).count() == 2,
        "{msgs:?}"
    );
    assert!(msgs.iter().any(|m| m.contains("partial block")));
    assert_eq!(
        std::fs::metadata(d.join("control/interrupts"))
            .unwrap()
            .len(),
        0
    );
}

// ------------------------------------------------------------ 6.9 facility versions

#[test]
fn facility_versions_and_fallback() {
    let tmp = tempfile::tempdir().unwrap();
    let v1 = "<facility name=\"net\">\n  <description>v1</description>\n  <event name=\"send\">\n    <description>d</description>\n    <struct><field name=\"len\"><uint size=4/></field></struct>\n  </event>\n</facility>\n";
    let v2 = "<facility name=\"net\">\n  <description>v2</description>\n  <event name=\"send\">\n    <description>d</description>\n    <struct><field name=\"len\"><uint size=4/></field>\n    <field name=kind><enum size=1><label name=LOW value=2/><label name=MID/><label name=HIGH value=10/></enum></field>\n    <field name=dir><enum size=1>IN OUT</enum></field></struct>\n  </event>\n</facility>\n";
    let ck2 = eventdefs::parse_file(v2.as_bytes(), "x").unwrap()[0].checksum;
    let f2 = format!("net.{ck2:08x}.xml");
    let mut s = LttSrc::new(&[("net.xml", v1, 20), (&f2, v2, 21)]);
    s.ev(20, 100, 0, vec![Value::U64(1)]);
    s.ev(
        21,
        200,
        0,
        vec![Value::U64(2), Value::Enum(3), Value::Enum(1)],
    );
    s.ev(20, 300, 0, vec![Value::U64(3)]);
    s.ev(
        21,
        400,
        0,
        vec![Value::U64(4), Value::Enum(4), Value::Enum(0)],
    );
    let d = tmp.path().join("v");
    s.write(&d, cfg(80)).unwrap();
    // two facility_loads do not fit one 80-byte block
    assert_eq!(
        std::fs::metadata(d.join("control/facilities"))
            .unwrap()
            .len(),
        160
    );
    let (l, diags) = dump_dir(&d, false);
    assert!(diags.is_empty(), "{diags:?}");
    let ck1 = eventdefs::parse_file(v1.as_bytes(), "x").unwrap()[0].checksum;
    assert!(l.contains(&format!("builtin.facility_load: 0.000000100 (control/facilities) {{ name = \"net\", checksum = {ck1}, base_code = 20 }}")));
    assert!(l.contains(&format!(
        "{{ name = \"net\", checksum = {ck2}, base_code = 21 }}"
    )));
    let (l, _) = dump_dir(&d, true);
    assert_eq!(
        l,
        "net.send: 0.000000100 (cpu/0) { len = 1 }\n\
         net.send: 0.000000200 (cpu/0) { len = 2, kind = MID, dir = OUT }\n\
         net.send: 0.000000300 (cpu/0) { len = 3 }\n\
         net.send: 0.000000400 (cpu/0) { len = 4, kind = 4, dir = IN }\n"
    );
    // eventdefs copied under their names
    assert_eq!(
        std::fs::read_to_string(d.join("eventdefs").join(&f2)).unwrap(),
        v2
    );

    // No facilities file, two XML files: consecutive bases from 0, with a warning.
    let h = Hand { big: false };
    let a = "<facility name=a><description>d</description><event name=facility_load><description>d</description><struct><field name=name><string/></field><field name=checksum><uint size=4/></field><field name=base_code><uint size=4/></field></struct></event><event name=x><description>d</description></event></facility>";
    let b = "<facility name=b><description>d</description><event name=y><description>d</description><struct><field name=v><uint size=1/></field></struct></event></facility>";
    let d = tmp.path().join("fb");
    let blk = h.nsblock(100, 10, 30, &[h.ev(1, 15, &[]), h.ev(2, 20, &[9])]);
    hand_trace(&d, false, 100, "ILP32", &[], &[("cpu/0", blk)]);
    std::fs::write(d.join("eventdefs/a.xml"), a).unwrap();
    std::fs::write(d.join("eventdefs/b.xml"), b).unwrap();
    let (l, diags) = dump_dir(&d, true);
    assert_eq!(
        l,
        "a.x: 0.000000015 (cpu/0)\nb.y: 0.000000020 (cpu/0) { v = 9 }\n"
    );
    assert!(diags
        .iter()
        .any(|x| x.msg.contains("consecutive base codes")));
}

// ------------------------------------------------------------ 6.10 trailers

#[test]
fn trailer_conventions() {
    let tmp = tempfile::tempdir().unwrap();
    let evs: Vec<(i64, u32)> = (0..15).map(|i| (10_000 + i * 100, 0)).collect();
    let (h, items) = timeline_src(&evs);
    let mut dumps = vec![];
    let mut files = vec![];
    for (n, conv) in [
        ("a", Trailer::EraA),
        ("b", Trailer::EraB),
        ("l", Trailer::Literal),
    ] {
        let d = tmp.path().join(n);
        let c = Config {
            block_size: 128,
            trailer: conv,
            ..Config::default()
        };
        write_items(&d, &h, &items, c).unwrap();
        let (l, diags) = dump_dir(&d, false);
        assert_eq!(salvaged(&diags), 0);
        dumps.push(l);
        files.push(std::fs::read(d.join("cpu/0")).unwrap());
    }
    assert_eq!(dumps[0], dumps[1]);
    assert_eq!(dumps[0], dumps[2]);
    assert_ne!(files[0], files[1]);
    assert_ne!(files[0], files[2]);
    assert_eq!(files[0].len(), 3 * 128);
    // Corrupt the trailer of block 2 of 3: only block 2 is lost.
    let d = tmp.path().join("a");
    let mut f = files[0].clone();
    f[252..256].copy_from_slice(&[0xff; 4]);
    std::fs::write(d.join("cpu/0"), &f).unwrap();
    let (l, diags) = dump_dir(&d, false);
    assert_eq!(salvaged(&diags), 1);
    // block 2 held events n = 7..=13 and the framing with block_id 1
    let lost: Vec<String> = (7..=13).map(|n| format!("{{ n = {n} }}")).collect();
    let kept: Vec<&str> = dumps[0]
        .lines()
        .filter(|x| !x.contains("block_id = 1 }") && !lost.iter().any(|n| x.ends_with(n.as_str())))
        .collect();
    assert_eq!(kept.len(), dumps[0].lines().count() - 9);
    assert_eq!(l.lines().collect::<Vec<_>>(), kept);
}

// ------------------------------------------------------------ 6.11 clocks

#[test]
fn degenerate_clocks() {
    let tmp = tempfile::tempdir().unwrap();
    let h = Hand { big: false };
    let x = |ts: u32, v: u32| h.ev(21, ts, &v.to_le_bytes());
    let b = 100;
    let mut f = Vec::new();
    // C1 = C0: every event at T0; block_end at T1.
    f.extend(h.block(b, (1, 0, 500), (2, 0, 500), &[x(500, 1)], Trailer::EraA));
    // T1 < T0: lost.
    f.extend(h.block(b, (3, 0, 600), (2, 0, 700), &[x(650, 2)], Trailer::EraA));
    // nanoseconds ≥ 1e9: lost.
    f.extend(h.block(
        b,
        (3, 1_000_000_000, 600),
        (4, 0, 700),
        &[x(650, 3)],
        Trailer::EraA,
    ));
    // microseconds in the nsec field, as in the sample: read as is.
    f.extend(h.block(
        b,
        (1_467_637_903, 312_859, 1000),
        (1_467_637_904, 312_859, 2000),
        &[x(1500, 4)],
        Trailer::EraA,
    ));
    let d = tmp.path().join("c");
    hand_trace(
        &d,
        false,
        b,
        "ILP32",
        &[("h.xml", H_XML, 20)],
        &[("cpu/0", f)],
    );
    let (l, diags) = dump_dir(&d, false);
    assert_eq!(salvaged(&diags), 2, "{diags:?}");
    let lines: Vec<&str> = l.lines().filter(|l| l.contains("cpu/0")).collect();
    assert_eq!(lines.len(), 6);
    assert_eq!(lines[1], "h.v: 1.000000000 (cpu/0) { x = 1 }");
    assert!(lines[2].starts_with("builtin.block_end: 2.000000000"));
    assert_eq!(lines[4], "h.v: 1467637903.500312859 (cpu/0) { x = 4 }");

    // A nanosecond counter round-trips exactly, whatever the times.
    let times = [
        1_234_567_890_123_456_789i64,
        1_234_567_890_123_456_790,
        1_234_567_999_000_000_001,
    ];
    let (hd, items) = timeline_src(&times.iter().map(|&t| (t, 0)).collect::<Vec<_>>());
    let d = tmp.path().join("ns");
    write_items(&d, &hd, &items, cfg(1000)).unwrap();
    let mut r = LttReader::new(open_trace(&Input::resolve(&d).unwrap()).unwrap());
    let mut got = vec![];
    while let Some(it) = r.next_item().unwrap() {
        if let Item::Event(e) = it {
            if e.type_id >= 20 {
                got.push(e.time.0);
                assert_eq!(e.raw_clock, Some(e.time.0 as u64));
            }
        }
    }
    assert_eq!(got, times);
}

// ------------------------------------------------------------ other sources

#[test]
fn samples_become_metric_events() {
    let tmp = tempfile::tempdir().unwrap();
    let h = Header::new(FormatId::Pcp, "3");
    let m = MetricDesc::new(
        7,
        "kernel.all.load",
        ValueType::F64,
        Semantics::Instant,
        Units::NONE,
    );
    let s = MetricDesc::new(
        8,
        "hinv.name",
        ValueType::String,
        Semantics::Discrete,
        Units::NONE,
    );
    let items = vec![
        Item::Metric(Arc::new(m)),
        Item::Metric(Arc::new(s)),
        Item::Sample(Sample {
            time: Timestamp(5_000_000_000),
            raw_clock: None,
            metrics: vec![
                MetricValues {
                    metric: 7,
                    values: Ok(vec![(1, Value::F64(0.25)), (5, Value::F64(1.5))]),
                },
                MetricValues {
                    metric: 8,
                    values: Ok(vec![(-1, Value::Str("box".into()))]),
                },
                MetricValues {
                    metric: 9,
                    values: Err(-12345),
                },
            ],
            extras: Default::default(),
        }),
        Item::Mark(polytrace::model::Mark {
            time: Timestamp(6_000_000_000),
            extras: Default::default(),
        }),
    ];
    let d = tmp.path().join("m");
    let loss = write_items(&d, &h, &items, cfg(1000)).unwrap();
    assert_eq!(loss.written.get("events"), Some(&3));
    assert!(loss.dropped.keys().any(|(w, _)| w == "marks"));
    let (l, _) = dump_dir(&d, true);
    assert_eq!(
        l,
        "metric.kernel_all_load: 5.000000000 (cpu/0) { instance = 1, value = 0.25 }\n\
         metric.kernel_all_load: 5.000000000 (cpu/0) { instance = 5, value = 1.5 }\n\
         metric.hinv_name: 5.000000000 (cpu/0) { instance = -1, value = \"box\" }\n"
    );
    let xml = std::fs::read_to_string(d.join("eventdefs/metric.xml")).unwrap();
    assert!(xml.contains("<event name=\"kernel_all_load\">"));
}

#[test]
fn late_event_types_get_a_new_facility_version() {
    let tmp = tempfile::tempdir().unwrap();
    let (h, mut items) = timeline_src(&[(100, 0)]);
    items.push(Item::EventType(Arc::new(EventType::new(
        2,
        "app",
        "late",
        vec![Field::new("s", FieldType::String)],
    ))));
    items.push(common::event(200, 2, Some(0), vec![Value::Str("x".into())]));
    let d = tmp.path().join("l");
    assert_eq!(
        written_listing(&d, &h, &items),
        "app.tick: 0.000000100 (cpu/0) { n = 0 }\napp.late: 0.000000200 (cpu/0) { s = \"x\" }\n"
    );
    assert_eq!(std::fs::read_dir(d.join("eventdefs")).unwrap().count(), 2);
}

// ------------------------------------------------------------ bad input

fn copy_smp(dst: &Path) {
    for sub in common::SMP_FILES {
        let p = dst.join(sub);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, std::fs::read(smp().join(sub)).unwrap()).unwrap();
    }
}

fn try_dump(dir: &Path) -> Option<usize> {
    let t = Trace::open(dir).ok()?;
    let mut sink = std::io::sink();
    let mut counting = Counting(0, &mut sink);
    dump(&t, false, &mut counting).ok()?;
    Some(counting.0)
}

struct Counting<'a>(usize, &'a mut dyn std::io::Write);
impl std::io::Write for Counting<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0 += b.iter().filter(|&&c| c == b'\n').count();
        self.1.write(b)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn truncation_and_bit_flip_sweep() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("t");
    copy_smp(&d);
    let full = common::full();
    for name in ["cpu/0", "cpu/1", "info/system.xml", "eventdefs/core.xml"] {
        let orig = std::fs::read(smp().join(name)).unwrap();
        let len = orig.len();
        let step = if full {
            (len / 400).max(1)
        } else {
            (len / 5).max(1)
        };
        let mut positions: Vec<usize> = (0..len).step_by(step).collect();
        if name.starts_with("cpu") {
            positions.extend([0, 1, 5, 6, 25, 26, 27, len - 4, len - 1]);
            let e = len - u32::from_le_bytes(orig[len - 4..].try_into().unwrap()) as usize;
            positions.extend([e, e + 1, e + 6, e + 14, e + 21]);
        }
        for &p in &positions {
            // truncation
            let path = d.join(name);
            std::fs::write(&path, &orig[..p]).unwrap();
            let _ = try_dump(&d);
            // bit flips
            for bit in if full {
                vec![0u8, 3, 7]
            } else {
                vec![p as u8 % 8]
            } {
                let mut m = orig.clone();
                m[p] ^= 1 << bit;
                std::fs::write(&path, &m).unwrap();
                let _ = try_dump(&d);
            }
        }
        std::fs::write(d.join(name), &orig).unwrap();
    }
    assert_eq!(try_dump(&d), Some(173_157));
}

#[test]
fn positioned_errors() {
    let tmp = tempfile::tempdir().unwrap();
    // missing system.xml
    let d = tmp.path().join("nosys");
    copy_smp(&d);
    std::fs::remove_file(d.join("info/system.xml")).unwrap();
    let e = Trace::open(&d).err().unwrap().to_string();
    assert!(e.contains("system.xml"), "{e}");
    Command::new(common::bin())
        .args(["dump", "--from", "ltt"])
        .arg(&d)
        .assert()
        .code(2);
    // malformed XML, positioned
    let d = tmp.path().join("badxml");
    copy_smp(&d);
    std::fs::write(
        d.join("eventdefs/core.xml"),
        "<facility name=core>\n<event name=x>\n</facility>",
    )
    .unwrap();
    let e = Trace::open(&d).err().unwrap().to_string();
    assert!(e.contains("core.xml") && e.contains("byte"), "{e}");
    Command::new(common::bin())
        .arg("dump")
        .arg(&d)
        .assert()
        .code(2);
    // unknown id: the rest of the block is lost, reported, exit 1
    let d = tmp.path().join("unk");
    copy_smp(&d);
    let mut f = std::fs::read(d.join("cpu/1")).unwrap();
    f[26] = 0x99;
    std::fs::write(d.join("cpu/1"), f).unwrap();
    let (l, diags) = dump_dir(&d, false);
    assert!(diags
        .iter()
        .any(|x| x.msg.contains("unknown event id") && x.pos.offset == Some(26)));
    assert_eq!(l.matches("(cpu/1)").count(), 1);
    Command::new(common::bin())
        .arg("dump")
        .arg(&d)
        .assert()
        .code(1);
}

#[cfg(unix)]
#[test]
fn file_names_never_escape_the_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("t");
    copy_smp(&d);
    // a symlinked cpu file pointing elsewhere is ignored
    std::os::unix::fs::symlink(smp().join("cpu/0"), d.join("cpu/5")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", d.join("eventdefs/evil.xml")).unwrap();
    let (l, diags) = dump_dir(&d, false);
    assert_eq!(l.lines().count(), 173_157);
    assert!(diags.iter().filter(|x| x.msg.contains("symlink")).count() >= 2);
    // a tar.gz whose member climbs out is refused
    let z = tmp.path().join("evil.tar.gz");
    {
        let f = std::fs::File::create(&z).unwrap();
        let gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        let mut ar = tar::Builder::new(gz);
        let data = b"x";
        let mut h = tar::Header::new_gnu();
        h.set_size(1);
        h.set_mode(0o644);
        // set the name bytes directly: the builder refuses `..` itself
        h.as_gnu_mut().unwrap().name[..9].copy_from_slice(b"../escape");
        h.set_cksum();
        ar.append(&h, &data[..]).unwrap();
        ar.into_inner().unwrap().finish().unwrap();
    }
    let e = open_trace(&Input::resolve(&z).unwrap())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("escapes"), "{e}");
    assert!(!tmp.path().join("escape").exists());
}

#[test]
fn bookmarks_are_kept_and_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("t");
    copy_smp(&d);
    let bm = "<bookmarks>\n<location name=\"boot\" time=\"1467637903.5\">first</location>\n<location name=b cpu=1 start_cycle=152895982 end_cycle=152895990/>\n</bookmarks>\n";
    std::fs::write(d.join("info/bookmarks.xml"), bm).unwrap();
    let out = tmp.path().join("o");
    copy_through(&d, &out, None);
    assert_eq!(
        std::fs::read_to_string(out.join("info/bookmarks.xml")).unwrap(),
        bm
    );
    std::fs::write(
        d.join("info/bookmarks.xml"),
        "<bookmarks><location name=x time=abc/></bookmarks>",
    )
    .unwrap();
    let e = Trace::open(&d).err().unwrap().to_string();
    assert!(e.contains("bookmarks.xml"), "{e}");
}

#[test]
fn random_xml_never_panics() {
    use proptest::prelude::*;
    let core = std::fs::read(smp().join("eventdefs/core.xml")).unwrap();
    let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases: if common::full() { 20_000 } else { 500 },
        ..Default::default()
    });
    runner
        .run(
            &(0..core.len(), any::<u8>(), 0..core.len()),
            |(at, byte, cut)| {
                let mut m = core.clone();
                m[at] = byte;
                m.truncate(cut.max(at + 1));
                if let Ok(fs) = eventdefs::parse_file(&m, "x") {
                    for f in &fs {
                        for e in &f.events {
                            if let Some(p) = &e.payload {
                                let _ = eventdefs::resolve(f, p, Arch::Ilp32);
                            }
                        }
                    }
                }
                let _ = polytrace::formats::ltt::system::parse(&m);
                Ok(())
            },
        )
        .unwrap();
}

/// Spec 5.13 control facility and the merge order of 5.15: equal times go
/// control/facilities, interrupts, processes, other control files, then
/// cpu files in numeric order.
#[test]
fn control_files_and_merge_rank() {
    let tmp = tempfile::tempdir().unwrap();
    let h = Hand { big: true };
    let ctl = "<facility name=control><description>d</description>\
<event name=interrupt><description>d</description><struct><field name=number><uint size=4/></field><field name=count><uint size=4/></field><field name=controller><string/></field><field name=name><string/></field></struct></event>\
<event name=process><description>d</description><struct><field name=name><string/></field><field name=pid><uint size=4/></field>\
<field name=state><enum size=4><label name=Running value=0/><label name=WaitInterruptible value=1/><label name=WaitUninterruptible value=2/><label name=Zombie value=3/><label name=Traced value=4/><label name=Paging value=5/></enum></field></struct></event></facility>";
    let mut irq = h.n(14, 4);
    irq.extend(h.n(3, 4));
    irq.extend_from_slice(b"XT-PIC\0ide0\0");
    let mut pr = b"init\0".to_vec();
    pr.extend(h.n(1, 4));
    pr.extend(h.n(3, 4));
    let b = 200;
    let files = [
        (
            "control/interrupts",
            h.nsblock(b, 100, 100, &[h.ev(20, 100, &irq)]),
        ),
        (
            "control/processes",
            h.nsblock(b, 100, 100, &[h.ev(21, 100, &pr)]),
        ),
        ("control/zz", h.nsblock(b, 100, 100, &[])),
        ("cpu/10", h.nsblock(b, 100, 100, &[])),
        ("cpu/2", h.nsblock(b, 100, 100, &[])),
    ];
    let d = tmp.path().join("c");
    hand_trace(&d, true, b, "LP64", &[("control.xml", ctl, 20)], &files);
    let (l, diags) = dump_dir(&d, false);
    assert_eq!(salvaged(&diags), 0, "{diags:?}");
    let order: Vec<String> = l
        .lines()
        .filter(|x| x.contains(": 0.000000100 "))
        .map(|x| {
            let (name, rest) = x.split_once(": ").unwrap();
            let file = rest.split_once('(').unwrap().1.split_once(')').unwrap().0;
            format!("{file} {name}")
        })
        .collect();
    assert_eq!(
        order,
        [
            "control/interrupts builtin.block_start",
            "control/interrupts control.interrupt",
            "control/interrupts builtin.block_end",
            "control/processes builtin.block_start",
            "control/processes control.process",
            "control/processes builtin.block_end",
            "control/zz builtin.block_start",
            "control/zz builtin.block_end",
            "cpu/2 builtin.block_start",
            "cpu/2 builtin.block_end",
            "cpu/10 builtin.block_start",
            "cpu/10 builtin.block_end",
        ]
    );
    assert!(l.contains("control.interrupt: 0.000000100 (control/interrupts) { number = 14, count = 3, controller = \"XT-PIC\", name = \"ide0\" }"));
    assert!(l.contains("control.process: 0.000000100 (control/processes) { name = \"init\", pid = 1, state = Zombie }"));
    // a conversion keeps the events in their control files
    let out = tmp.path().join("o");
    copy_through(&d, &out, None);
    let (l2, _) = dump_dir(&out, true);
    assert_eq!(l2, dump_dir(&d, true).0);
    assert!(l2.contains("(control/processes)"));
}

#[test]
fn reissued_event_type_reuses_its_facility() {
    let tmp = tempfile::tempdir().unwrap();
    let (h, mut items) = timeline_src(&[(100, 0)]);
    let again = items[0].clone();
    items.push(again);
    items.push(common::event(200, 1, Some(0), vec![Value::U64(9)]));
    let d = tmp.path().join("r");
    assert_eq!(
        written_listing(&d, &h, &items),
        "app.tick: 0.000000100 (cpu/0) { n = 0 }\napp.tick: 0.000000200 (cpu/0) { n = 9 }\n"
    );
    assert_eq!(std::fs::read_dir(d.join("eventdefs")).unwrap().count(), 1);
}
