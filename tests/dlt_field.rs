//! DLT files from the field: the public captures of other DLT tools
//! (testdata/dlt, see its PROVENANCE.md) listed as dlt-convert lists them,
//! resynchronisation past the three kinds of damage field logs show,
//! every verbose argument kind typed in both byte orders, control
//! messages carried or reported, and ECUs without a clock.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    Command::new(common::bin())
        .env("TZ", "UTC")
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn dlt_dir() -> PathBuf {
    common::testdata().join("dlt")
}

/// The golden listing beside a capture: `X.dlt-convert-a.txt`.
fn golden_of(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push("-convert-a.txt");
    PathBuf::from(s)
}

/// dlt-convert -a, its libdlt log lines left out (tests/common).
fn dlt_convert(file: &Path) -> Option<Vec<u8>> {
    common::dlt_convert_a(file)
}

fn lines(b: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(b)
        .lines()
        .map(str::to_string)
        .collect()
}

/// A listing line without its message index (the index counts the lines
/// listed, so it shifts after a message lost to damage).
fn body(l: &str) -> &str {
    l.split_once(' ').map_or(l, |(_, b)| b)
}

// ------------------------------------------------------------ corpus

#[test]
fn every_capture_dlt_convert_reads_is_listed_as_it_lists_it() {
    let mut n = 0;
    for p in common::all_dlt_files() {
        let g = golden_of(&p);
        if !g.exists() {
            continue;
        }
        let o = run(&[&"dump", &p]);
        assert_eq!(o.status.code(), Some(0), "{}: {}", p.display(), stderr(&o));
        assert!(o.stderr.is_empty(), "{}: {}", p.display(), stderr(&o));
        common::golden(&g, &o.stdout);
        if let Some(theirs) = dlt_convert(&p) {
            assert!(
                theirs == o.stdout,
                "{}: differs from the live dlt-convert: {:?}",
                p.display(),
                common::first_diff(
                    &String::from_utf8_lossy(&theirs),
                    &String::from_utf8_lossy(&o.stdout)
                )
            );
        }
        n += 1;
    }
    // testdata/dlt's own files plus the KPI captures' goldens if named so.
    assert!(n >= 11, "{n} captures compared");
}

#[test]
fn version_0_standard_headers_are_read() {
    let p = dlt_dir().join("chipmunk/attachments.dlt");
    // The file's htyp has version bits 0 (and big-endian payloads).
    let b = std::fs::read(&p).unwrap();
    assert_eq!(b[16] >> 5, 0);
    let o = run(&[&"info", &p]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("events         9"), "{out}");
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
}

#[test]
fn what_dlt_convert_cannot_read_is_refused_clearly() {
    let v2 = dlt_dir().join("dlt-daemon/testfile-v2.dlt");
    let o = run(&[&"dump", &v2]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("DLT protocol v2 storage header (not supported)"),
        "{}",
        stderr(&o)
    );
    assert!(o.stdout.is_empty());
    // dlt-viewer's unit-test message has no storage header at all.
    let bare = dlt_dir().join("dlt-viewer/testfile.dlt");
    let o = run(&[&"dump", &bare]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unrecognised format"), "{}", stderr(&o));
}

// ------------------------------------------------------------ damage

struct Damaged {
    name: &'static str,
    bytes: Vec<u8>,
    /// Byte where the damage starts.
    at: usize,
    /// What stderr says about it.
    why: &'static str,
    /// Index of the original record the listing loses, if any.
    lost: Option<usize>,
}

/// The three patterns of field damage, made from an undamaged capture:
/// (a) a storage header with no message before record `k`, (b) record `k`'s
/// length running 30 bytes past the next storage header, (c) record `k`
/// cut to 19 bytes (inside its standard header), the next one right after.
fn damaged(orig: &[u8], k: usize) -> Vec<Damaged> {
    let offs = common::dlt_record_offsets(orig);
    let (o, next) = (offs[k], offs[k + 1]);
    let mut a = orig[..o].to_vec();
    a.extend_from_slice(&orig[o..o + 16]);
    a.extend_from_slice(&orig[o..]);
    let mut b = orig.to_vec();
    let len = u16::from_be_bytes([b[o + 18], b[o + 19]]) + 30;
    b[o + 18..o + 20].copy_from_slice(&len.to_be_bytes());
    let mut c = orig[..o + 19].to_vec();
    c.extend_from_slice(&orig[next..]);
    vec![
        Damaged {
            name: "a",
            bytes: a,
            at: o,
            why: "storage header with no message (another storage header follows it); skipped 16 bytes",
            lost: None,
        },
        Damaged {
            name: "b",
            bytes: b,
            at: o,
            why: "runs past the storage header",
            lost: None,
        },
        Damaged {
            name: "c",
            bytes: c,
            at: o,
            why: "skipped 19 bytes",
            lost: Some(k),
        },
    ]
}

#[test]
fn listings_resync_past_the_three_kinds_of_damage() {
    let tmp = tempfile::tempdir().unwrap();
    for (src, k) in [
        ("testfile.dlt", 20),
        ("testfile_extended.dlt", 50),
        ("chipmunk/attachments.dlt", 4),
        ("dlt-explorer/testfile_type_id_and_text.dlt", 30),
    ] {
        let orig = std::fs::read(dlt_dir().join(src)).unwrap();
        let whole = lines(&run(&[&"dump", &dlt_dir().join(src)]).stdout);
        for d in damaged(&orig, k) {
            let what = format!("{src} ({})", d.name);
            let p = tmp.path().join(format!("{}-{}.dlt", k, d.name));
            std::fs::write(&p, &d.bytes).unwrap();
            // dump and info go on past the damage, report it, exit 1.
            let o = run(&[&"dump", &p]);
            assert_eq!(o.status.code(), Some(1), "{what}: {}", stderr(&o));
            let e = stderr(&o);
            assert!(
                e.contains(&format!("byte {}, record {k}", d.at)) && e.contains(d.why),
                "{what}: {e}"
            );
            let ours = lines(&o.stdout);
            let want: Vec<&str> = whole
                .iter()
                .enumerate()
                .filter(|(i, _)| Some(*i) != d.lost)
                .map(|(_, l)| body(l))
                .collect();
            let got: Vec<&str> = ours.iter().map(|l| body(l)).collect();
            assert_eq!(got, want, "{what}");
            // Never fewer of the real messages than dlt-convert lists (its
            // lines made of the damage aside).
            if let Some(theirs) = dlt_convert(&p) {
                let real: Vec<String> = lines(&theirs)
                    .into_iter()
                    .filter(|l| want.contains(&body(l)))
                    .collect();
                for l in &real {
                    assert!(got.contains(&body(l)), "{what}: dlt-convert lists {l}");
                }
                assert!(got.len() >= real.len(), "{what}");
            }
            let o = run(&[&"info", &p]);
            assert_eq!(o.status.code(), Some(1), "{what}: {}", stderr(&o));
            // convert stops, says what lies beyond, writes nothing.
            let out = tmp.path().join(format!("{}-{}.csv", k, d.name));
            let o = run(&[&"convert", &p, &"--to", &"csv", &"--events", &"-o", &out]);
            assert_eq!(o.status.code(), Some(2), "{what}: {}", stderr(&o));
            // (b)'s record is kept, cut: it is the damage, not beyond it.
            let beyond = want.len() - k - (d.name == "b") as usize;
            assert!(
                stderr(&o).contains(&format!(
                    "{beyond} records lie beyond the damage (--salvage keeps them)"
                )),
                "{what}: {}",
                stderr(&o)
            );
            assert!(!out.exists());
            let o = run(&[
                &"convert",
                &"--salvage",
                &p,
                &"--to",
                &"csv",
                &"--events",
                &"-o",
                &out,
            ]);
            assert_eq!(o.status.code(), Some(1), "{what}: {}", stderr(&o));
            assert!(out.exists());
        }
    }
}

// ------------------------------------------------------------ typing

/// One verbose argument writer in either byte order.
struct Args {
    be: bool,
    b: Vec<u8>,
    n: u8,
}

impl Args {
    fn new(be: bool) -> Args {
        Args {
            be,
            b: Vec::new(),
            n: 0,
        }
    }
    fn u16(&mut self, v: u16) -> &mut Self {
        self.ordered(v.to_le_bytes(), v.to_be_bytes())
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.ordered(v.to_le_bytes(), v.to_be_bytes())
    }
    /// The bytes of the payload's byte order.
    fn ordered<const N: usize>(&mut self, le: [u8; N], be: [u8; N]) -> &mut Self {
        self.b.extend_from_slice(if self.be { &be } else { &le });
        self
    }
    /// Bytes of a number given little-endian, in the payload's order.
    fn num(&mut self, le: &[u8]) -> &mut Self {
        if self.be {
            self.b.extend(le.iter().rev());
        } else {
            self.b.extend_from_slice(le);
        }
        self
    }
    fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.b.extend_from_slice(b);
        self
    }
    /// A new argument of type info `ti`.
    fn arg(&mut self, ti: u32) -> &mut Self {
        self.n += 1;
        self.u32(ti)
    }
}

/// A storage record of a verbose log message (WEID, WTMS, UEH).
fn record(secs: u32, tmsp: u32, mcnt: u8, args: &Args, ctid: &[u8; 4]) -> Vec<u8> {
    let mut htyp = 0x20 | 0x01 | 0x04 | 0x10;
    if args.be {
        htyp |= 0x02;
    }
    let len = 4 + 4 + 4 + 10 + args.b.len();
    let mut r = b"DLT\x01".to_vec();
    r.extend_from_slice(&secs.to_le_bytes());
    r.extend_from_slice(&0i32.to_le_bytes());
    r.extend_from_slice(b"ECU1");
    r.push(htyp);
    r.push(mcnt);
    r.extend_from_slice(&(len as u16).to_be_bytes());
    r.extend_from_slice(b"ECU1");
    r.extend_from_slice(&tmsp.to_be_bytes());
    r.push(0x41);
    r.push(args.n);
    r.extend_from_slice(b"APP1");
    r.extend_from_slice(ctid);
    r.extend_from_slice(&args.b);
    r
}

/// Every scalar kind dlt-convert prints (bool, sint/uint 8–128, float
/// 16–128, ASCII and UTF-8 strings, raw, fixed point, names and units).
fn scalars(be: bool) -> Args {
    let mut a = Args::new(be);
    a.arg(0x11).raw(&[1]);
    a.arg(0x21).raw(&[0xfe]);
    a.arg(0x22).num(&(-300i16).to_le_bytes());
    a.arg(0x23).num(&(-70000i32).to_le_bytes());
    a.arg(0x24).num(&(-5_000_000_000i64).to_le_bytes());
    a.arg(0x25).num(&(-2i128).to_le_bytes());
    a.arg(0x41).raw(&[200]);
    a.arg(0x42).num(&60000u16.to_le_bytes());
    a.arg(0x43).num(&4_000_000_000u32.to_le_bytes());
    a.arg(0x44).num(&u64::MAX.to_le_bytes());
    a.arg(0x45).num(&(1u128 << 100).to_le_bytes());
    // 1.5 as binary16, 32, 64 and 128.
    a.arg(0x82).num(&0x3e00u16.to_le_bytes());
    a.arg(0x83).num(&1.5f32.to_le_bytes());
    a.arg(0x84).num(&(-2.25f64).to_le_bytes());
    a.arg(0x85).num(&(0x3fff_8000u128 << 96).to_le_bytes());
    a.arg(0x200).u16(6).raw(b"ascii\0");
    a.arg(0x8200).u16(6).raw("gr\u{fc}n\0".as_bytes());
    a.arg(0x400).u16(3).raw(&[1, 2, 255]);
    // Fixed point (raw 40, quantisation 0.5, offset 10).
    a.arg(0x1023)
        .num(&0.5f32.to_le_bytes())
        .num(&10i32.to_le_bytes())
        .num(&40i32.to_le_bytes());
    // Named with a unit, and a named string.
    a.arg(0x843)
        .u16(6)
        .u16(3)
        .raw(b"speed\0km\0")
        .num(&88u32.to_le_bytes());
    a.arg(0xa00).u16(3).u16(5).raw(b"name\0ok\0");
    a
}

/// Arrays and structs (dlt-convert does not print them).
fn composites(be: bool) -> Args {
    let mut a = Args::new(be);
    // uint16[2][3], named with a unit.
    a.arg(0x100 | 0x800 | 0x42)
        .u16(2)
        .u16(2)
        .u16(3)
        .u16(5)
        .u16(3)
        .raw(b"grid\0mm\0");
    for v in 1u16..=6 {
        a.num(&v.to_le_bytes());
    }
    // float32[2].
    a.arg(0x100 | 0x83).u16(1).u16(2);
    a.num(&0.25f32.to_le_bytes()).num(&(-4.0f32).to_le_bytes());
    // struct "pos" { x: sint32 = -7, label: "here", inner: struct { bool } }.
    a.arg(0x4000 | 0x800).u16(3).u16(4).raw(b"pos\0");
    a.u32(0x800 | 0x23)
        .u16(2)
        .u16(1)
        .raw(b"x\0\0")
        .num(&(-7i32).to_le_bytes());
    a.u32(0x800 | 0x200).u16(5).u16(6).raw(b"label\0here\0");
    a.u32(0x4000).u16(1).u32(0x11).raw(&[0]);
    a
}

#[test]
fn every_verbose_argument_kind_is_typed_in_both_byte_orders() {
    let tmp = tempfile::tempdir().unwrap();
    for be in [false, true] {
        let mut file = record(1_700_000_000, 10, 0, &scalars(be), b"SCAL");
        file.extend(record(1_700_000_001, 20, 1, &composites(be), b"COMP"));
        let p = tmp.path().join(format!("kinds-{be}.dlt"));
        std::fs::write(&p, &file).unwrap();
        // The scalar message is listed as dlt-convert lists it.
        let scal = tmp.path().join(format!("scalars-{be}.dlt"));
        std::fs::write(&scal, record(1_700_000_000, 10, 0, &scalars(be), b"SCAL")).unwrap();
        let o = run(&[&"dump", &scal]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        if let Some(theirs) = dlt_convert(&scal) {
            assert_eq!(
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&theirs),
                "big-endian {be}"
            );
        }
        // Both messages typed: no warning, two events, no annotation.
        let o = run(&[&"info", &p]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(o.stderr.is_empty(), "big-endian {be}: {}", stderr(&o));
        let info = String::from_utf8_lossy(&o.stdout);
        assert!(info.contains("events         2"), "{info}");
        assert!(!info.contains("annotations"), "{info}");
        // The values as the model holds them.
        let o = run(&[&"dump", &"--style", &"common", &p]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let text = String::from_utf8_lossy(&o.stdout);
        for want in [
            "-300",
            "-70000",
            "-5000000000",
            "60000",
            "4000000000",
            "18446744073709551615",
            "1.5",
            "-2.25",
            "\"ascii\"",
            "\"gr\u{fc}n\"",
            "speed=88",
            "name=\"ok\"",
            "arg18=40",
            "grid=[[1, 2, 3], [4, 5, 6]]",
            "[0.25, -4.0]",
            "pos={-7, \"here\", {0}}",
        ] {
            assert!(
                text.contains(want),
                "big-endian {be}: no {want:?} in\n{text}"
            );
        }
    }
}

#[test]
fn no_testdata_dlt_file_has_an_untyped_verbose_message() {
    let mut n = 0;
    for p in common::all_dlt_files() {
        let o = run(&[&"info", &p]);
        if o.status.code() == Some(2) {
            // Not a v1 storage file (v2, a bare message): refused above.
            continue;
        }
        let e = stderr(&o);
        assert!(!e.contains("not typed"), "{}: {e}", p.display());
        assert!(!e.contains("could not be typed"), "{}: {e}", p.display());
        n += 1;
    }
    assert!(n >= 12, "{n} files read");
}

#[test]
fn messages_announcing_more_arguments_than_they_hold_are_typed() {
    // A logger that counts one argument too many (seen in field logs):
    // dlt-convert lists the first; so do we, and type it.
    let mut a = Args::new(true);
    a.arg(0x200).u16(3).raw(b"hi\0");
    a.n = 2;
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("short.dlt");
    std::fs::write(&p, record(1_700_000_000, 1, 0, &a, b"SHRT")).unwrap();
    let o = run(&[&"dump", &p]);
    assert!(String::from_utf8_lossy(&o.stdout).ends_with("V 2 [hi ]\n"));
    if let Some(theirs) = dlt_convert(&p) {
        assert_eq!(o.stdout, theirs);
    }
    let o = run(&[&"info", &p]);
    assert_eq!(o.status.code(), Some(0));
    let e = stderr(&o);
    assert!(!e.contains("not typed"), "{e}");
    common::assert_has(
        &e,
        "1 verbose messages announce more arguments than their payload holds",
    );
}

// ------------------------------------------------------------ control

#[test]
fn control_messages_go_through_ltt_and_are_reported_where_dropped() {
    let tmp = tempfile::tempdir().unwrap();
    for src in ["testfile.dlt", "dlt-explorer/testfile_control_messages.dlt"] {
        let p = dlt_dir().join(src);
        let ltt = tmp.path().join("t.ltt");
        let back = tmp.path().join("back.dlt");
        let o = run(&[&"convert", &p, &"--to", &"ltt", &"-o", &ltt, &"--force"]);
        assert_eq!(o.status.code(), Some(0), "{src}: {}", stderr(&o));
        let o = run(&[&"convert", &ltt, &"--to", &"dlt", &"-o", &back, &"--force"]);
        assert_eq!(o.status.code(), Some(0), "{src}: {}", stderr(&o));
        // The same records, control messages included.
        assert_eq!(
            std::fs::read(&back).unwrap(),
            std::fs::read(&p).unwrap(),
            "{src}"
        );
        // A target without them says what it left out.
        let csv = tmp.path().join("t.csv");
        let o = run(&[
            &"convert",
            &p,
            &"--to",
            &"csv",
            &"--events",
            &"-o",
            &csv,
            &"--force",
        ]);
        let e = stderr(&o);
        assert!(
            e.contains("dropped: ")
                && e.contains(" DLT request control messages: framing of the source format"),
            "{src}: {e}"
        );
    }
}

// ------------------------------------------------------------ time

#[test]
fn an_ecu_without_a_clock_is_never_placed_before_the_epoch() {
    // testfile.dlt with the storage times of its first 40 records set to
    // 1970 (seconds since the ECU booted), as an ECU writes them before
    // it learns the date.
    let mut b = std::fs::read(dlt_dir().join("testfile.dlt")).unwrap();
    let offs = common::dlt_record_offsets(&b);
    for (i, &o) in offs.iter().take(40).enumerate() {
        b[o + 4..o + 8].copy_from_slice(&(3 + i as u32).to_le_bytes());
    }
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("undated.dlt");
    std::fs::write(&p, &b).unwrap();
    let o = run(&[&"info", &p]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let info = String::from_utf8_lossy(&o.stdout);
    // `info`'s seconds on the line `KEY: SECONDS …`.
    let secs = |key: &str| -> f64 {
        (info.lines().find_map(|l| l.strip_prefix(key)))
            .and_then(|v| v.split_whitespace().next())
            .unwrap()
            .parse()
            .unwrap()
    };
    let first = secs("first:");
    assert!(first >= 0.0, "{info}");
    // The dated records keep their dates (the file is from 2011).
    let last = secs("last:");
    assert!(last > 1.3e9, "{info}");
    // Nothing falls outside LTT's range.
    let ltt = tmp.path().join("u.ltt");
    let o = run(&[&"convert", &p, &"--to", &"ltt", &"-o", &ltt]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("outside"), "{}", stderr(&o));
}
