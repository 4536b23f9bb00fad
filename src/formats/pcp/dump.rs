//! pmdumplog-style listing: the output of
//! `pmdumplog -a -e -h -I -M -xxx -Z UTC ARCHIVE` (PCP 6.0.3), rebuilt from
//! the archive. Times are always printed in UTC.

use super::archive::{plain_size, Members, Rec, RecordReader, Spool};
use super::data::{self, RawVal};
use super::index::{index_entry_damage, read_index};
use super::layout::*;
use super::meta::{Desc, InDomRec, LabelRec, MetaRec, TextRec};
use super::reader::{load_meta, VolumeWalker};
use crate::cfmt::{fmt_g, push_g, push_int};
use crate::error::{Diagnostic, Error, Position, Result};
use crate::model::time::civil_from_days;
use crate::model::{Bounds, Selection, TimeWindow, Timestamp};
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

/// Bucket walk order of libpcp's chained hash table after inserting `keys`
/// in order (prepend on insert; grow when nodes/4 > size).
pub fn hash_order(keys: &[u32]) -> Vec<u32> {
    let mut size = 0usize;
    let mut nodes = 0usize;
    let mut buckets: Vec<Vec<u32>> = Vec::new(); // each chain head-first
    for &k in keys {
        nodes += 1;
        if size == 0 {
            size = 1;
            buckets = vec![Vec::new()];
        } else if nodes / 4 > size {
            let old = std::mem::take(&mut buckets);
            size *= 2;
            if !size.is_multiple_of(2) {
                size += 1;
            }
            if !size.is_multiple_of(3) {
                size += 2;
            }
            if !size.is_multiple_of(5) {
                size += 2;
            }
            buckets = vec![Vec::new(); size];
            for chain in old.iter().rev() {
                for &x in chain {
                    buckets[x as usize % size].insert(0, x);
                }
            }
        }
        buckets[k as usize % size].insert(0, k);
    }
    buckets.into_iter().flatten().collect()
}

/// Fraction of a second as the version stores it: ns (v3) or us (v2).
fn frac(v: Version, s: Stamp) -> String {
    match v {
        Version::V3 => format!("{:09}", s.nsec),
        Version::V2 => format!("{:06}", s.nsec / 1000),
    }
}

const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// (ctime "Www Mmm dd", "HH:MM:SS", year) in UTC.
fn civil(sec: i64) -> (String, String, i64) {
    let days = sec.div_euclid(86400);
    let rem = sec.rem_euclid(86400);
    let (y, m, d) = civil_from_days(days);
    let wd = (days + 4).rem_euclid(7) as usize;
    (
        format!("{} {} {:2}", DAYS[wd], MONTHS[(m - 1) as usize], d),
        format!("{:02}:{:02}:{:02}", rem / 3600, (rem / 60) % 60, rem % 60),
        y,
    )
}

use crate::model::IntMap;

/// Instance list (id, name) of one indom at one time.
type InstList<'a> = Vec<(i32, &'a str)>;

struct Ctx<'a> {
    v: Version,
    start: Stamp,
    descs: IntMap<u32, Desc>,
    /// Per indom: records in time order (full instance lists, sorted).
    indoms: IntMap<u32, Vec<(Stamp, InstList<'a>)>>,
    /// What `--metric`/`--instance` keep of each result (None: all).
    pick: Option<Pick>,
}

/// The metric and instance filters as pmdumplog applies its metric
/// arguments: the chosen pmIDs in argument order (a name above leaves
/// expands to the leaves below it, in libpcp's name-tree order), each
/// result cut down to them and listed in that order; a result that keeps
/// nothing is not listed.
struct Pick {
    /// pmID → place in the list; None: every pmID (only exclusions or an
    /// instance filter were given), in the record's order.
    order: Option<IntMap<u32, usize>>,
    excluded: IntMap<u32, ()>,
    sel: Selection,
}

impl Pick {
    fn wants(&self, pmid: u32) -> Option<usize> {
        if self.excluded.contains_key(&pmid) {
            return None;
        }
        match &self.order {
            Some(o) => o.get(&pmid).copied(),
            None => Some(0),
        }
    }
}

/// Every metric name of the archive (first binding wins) in the order
/// pmTraversePMNS walks libpcp's name tree: depth first, the children of a
/// node newest first (libpcp puts a new child at the front of the list).
fn pmns_leaves(recs: &[(u64, MetaRec)]) -> Vec<(String, u32)> {
    let NameTree {
        made,
        first: mut leaves,
        ..
    } = NameTree::of(recs);
    let key = |n: &str| -> Vec<std::cmp::Reverse<usize>> {
        prefixes(n)
            .map(|p| std::cmp::Reverse(made.get(p).copied().unwrap_or(0)))
            .collect()
    };
    leaves.sort_by_cached_key(|(n, _)| key(n));
    leaves
        .into_iter()
        .map(|(n, p)| (n.to_string(), p))
        .collect()
}

/// Build the pick from the selection; warnings for patterns that match
/// nothing, an error when no metric is left (as pmdumplog: "No metric
/// names can be translated, dump abandoned").
fn make_pick(
    recs: &[(u64, MetaRec)],
    sel: &Selection,
    meta: &std::path::Path,
    diags: &mut Vec<Diagnostic>,
) -> Result<Option<Pick>> {
    if sel.names_events() {
        return Err(Error::Usage(
            "a PCP archive holds no events: --event/--exclude-event/--cpu do not apply to its pmdumplog listing (--style common lists event records as values)".into(),
        ));
    }
    if !sel.filters_metrics() {
        return Ok(None);
    }
    let leaves = pmns_leaves(recs);
    let mut excluded: IntMap<u32, ()> = IntMap::default();
    for (n, p) in &leaves {
        if sel.exclude_metrics.iter().any(|g| g.matches_subtree(n)) {
            excluded.insert(*p, ());
        }
    }
    let order = if sel.metrics.is_empty() {
        None
    } else {
        let mut o: IntMap<u32, usize> = IntMap::default();
        for g in &sel.metrics {
            let mut hit = false;
            for (n, p) in &leaves {
                if g.matches_subtree(n) {
                    hit = true;
                    let k = o.len();
                    o.entry(*p).or_insert(k);
                }
            }
            if !hit {
                diags.push(Diagnostic::warning(
                    Position::new(meta),
                    format!("--metric {}: no such metric in the archive", g.as_str()),
                ));
            }
        }
        o.retain(|p, _| !excluded.contains_key(p));
        if o.is_empty() {
            return Err(Error::Usage(format!(
                "{}: no metric of the archive is selected (pmdumplog: \"No metric names can be translated, dump abandoned\")",
                meta.display()
            )));
        }
        Some(o)
    };
    Ok(Some(Pick {
        order,
        excluded,
        sel: sel.clone(),
    }))
}

impl<'a> Ctx<'a> {
    fn frac(&self, s: Stamp) -> String {
        frac(self.v, s)
    }
    fn sub(&self, s: Stamp) -> f64 {
        (s.sec - self.start.sec) as f64 + (s.nsec - self.start.nsec) as f64 / 1e9
    }
    /// dump_pmTimestamp with -xxx.
    fn stamp(&self, s: Stamp) -> String {
        let (dd, hms, y) = civil(s.sec);
        let off = self.sub(s);
        let off = match self.v {
            Version::V3 => format!("{off:.9}"),
            Version::V2 => format!("{off:.6}"),
        };
        format!("{dd} {hms}.{} {y:4} ({off}) {}", self.frac(s), s.sec)
    }
    fn names(&self, pmid: u32) -> String {
        match self.descs.get(&pmid) {
            Some(d) if !d.names.is_empty() => d.names.join(" or "),
            _ => "<noname>".into(),
        }
    }
    /// Instance list of the indom record in force at `t` (the first record
    /// when `t` precedes them all).
    /// Also the record's position (usize::MAX when there is none).
    fn inst_list(&self, indom: u32, t: Stamp) -> (usize, &[(i32, &'a str)]) {
        let Some(recs) = self.indoms.get(&indom) else {
            return (usize::MAX, &[]);
        };
        let idx = recs.partition_point(|(s, _)| *s <= t).saturating_sub(1);
        recs.get(idx)
            .map_or((usize::MAX, &[]), |x| (idx, x.1.as_slice()))
    }
}

fn type_str(t: i32) -> &'static str {
    match t {
        0 => "32-bit int",
        1 => "32-bit unsigned int",
        2 => "64-bit int",
        3 => "64-bit unsigned int",
        4 => "float",
        5 => "double",
        6 => "string",
        7 => "aggregate",
        8 => "static aggregate",
        9 => "event record array",
        10 => "highres event record array",
        _ => "???",
    }
}

fn sem_str(s: u32) -> &'static str {
    match s {
        1 => "counter",
        3 => "instant",
        4 => "discrete",
        _ => "???",
    }
}

/// pmErrStr for the codes archives carry.
pub fn err_str(code: i32) -> String {
    // PCP 6.0.3's own messages (as `pmerr -l` prints them).
    let m = match code {
        -12345 => Some("Generic error, already reported above"),
        -12346 => Some("Problems parsing PMNS definitions"),
        -12347 => Some("PMNS not accessible"),
        -12348 => Some("Attempt to reload the PMNS"),
        -12349 => Some("One-line or help text is not available"),
        -12350 => Some("Metric not supported by this version of monitored application"),
        -12351 => Some("Missing metric value(s)"),
        -12353 => Some("Timeout waiting for a response from PMCD"),
        -12354 => Some("Empty archive log file"),
        -12355 => Some("PMCD reset or configuration change"),
        -12357 => Some("Unknown metric name"),
        -12358 => Some("Unknown or illegal metric identifier"),
        -12359 => Some("Unknown or illegal instance domain identifier"),
        -12360 => Some("Unknown or illegal instance identifier"),
        -12397 => Some("Unknown or illegal metric type"),
        -12361 => Some("Illegal pmUnits specification"),
        -12362 => Some("Impossible value or scale conversion"),
        -12363 => Some("Truncation in value conversion"),
        -12364 => Some("Negative value in conversion to unsigned"),
        -12365 => Some("Explicit instance identifier(s) required"),
        -12366 => Some("IPC protocol failure"),
        -12414 => Some("TLS protocol failure"),
        -12368 => Some("IPC channel closed"),
        -12369 => Some("Operation requires context with host source of metrics"),
        -12370 => Some("End of PCP archive log"),
        -12371 => Some("Illegal mode specification"),
        -12372 => Some("Illegal label record at start of a PCP archive log file"),
        -12373 => Some("Corrupted record in a PCP archive log"),
        -12375 => Some("Missing PCP archive log file"),
        -12374 => Some("Operation requires context with archive source of metrics"),
        -12376 => Some("Attempt to use an illegal context"),
        -12377 => Some("NULL pmInDom with non-NULL instlist"),
        -12378 => Some("Metric not defined in the PCP archive log"),
        -12379 => Some("Instance domain identifier not defined in the PCP archive log"),
        -12380 => Some("Instance identifier not defined in the PCP archive log"),
        -12381 => Some("Missing profile - protocol botch"),
        -12386 => Some("No PMCD agent for domain of request"),
        -12387 => Some("No permission to perform requested operation"),
        -12388 => Some("PMCD connection limit for this host exceeded"),
        -12389 => Some("Try again. Information not currently available"),
        -12390 => Some("Already Connected"),
        -12391 => Some("Not Connected"),
        -12392 => Some("A non-null port name is required"),
        -12394 => Some("Metric name is not a leaf in PMNS"),
        -13394 => Some("PMDA is not yet ready to respond to requests"),
        -13393 => Some("PMDA is now responsive to requests"),
        -12442 => Some("Internal inconsistency detected or assertion failed"),
        -12443 => Some("Insufficient elements in list"),
        -12444 => Some("Result size exceeded"),
        -12445 => Some("QA fault injected"),
        -12398 => Some("Operation not supported for multi-threaded applications"),
        -12399 => Some("Container not found"),
        -12400 => Some("Bad input to pmstore"),
        -12401 => Some("Archives overlap in time"),
        -12402 => Some("Archives differ by host"),
        -12404 => Some("The type of a metric has changed in an archive"),
        -12405 => Some("The semantics of a metric has changed in an archive"),
        -12406 => Some("The instance domain of a metric has changed in an archive"),
        -12407 => Some("The units of a metric have changed in an archive"),
        -12408 => Some("PMCD requires a client certificate"),
        -12409 => Some("Derived metric definition failed"),
        -12410 => Some("No support for metric label metadata"),
        -12411 => Some("PMDA is currently fenced and unable to respond to requests"),
        -12412 => Some("Incorrect record type in an archive"),
        -12413 => Some("Archive feature not supported"),
        -21344 => Some("Functionality not yet implemented"),
        _ => None,
    };
    if let Some(m) = m {
        return m.to_string();
    }
    if (-4095..0).contains(&code) {
        return std::io::Error::from_raw_os_error(-code)
            .to_string()
            .split(" (os error")
            .next()
            .unwrap_or("")
            .to_string();
    }
    format!("No such PMAPI error code ({code})")
}

fn label_flags(f: u8) -> String {
    let mut s = match f & 0x3f {
        0x01 => "context",
        0x02 => "domain",
        0x04 => "indom",
        0x08 => "cluster",
        0x10 => "item",
        0x20 => "instances",
        _ => "unknown",
    }
    .to_string();
    // PCP names ITEM labels "pmid" in listings.
    if f & 0x3f == 0x10 {
        s = "pmid".into();
    }
    if f & 0x40 != 0 {
        s.push_str(",compound");
    }
    if f & 0x80 != 0 {
        s.push_str(",optional");
    }
    s
}

fn ident_str(ltype: i32, ident: u32) -> String {
    match ltype & !0xc0 {
        PM_LABEL_DOMAIN => format!("Domain {ident}"),
        PM_LABEL_INDOM | PM_LABEL_INSTANCES => format!("InDom {}", indom_str(ident)),
        PM_LABEL_CLUSTER => {
            let s = pmid_str(ident);
            format!("Cluster {}", s.rsplit_once('.').map(|x| x.0).unwrap_or(&s))
        }
        PM_LABEL_ITEM => format!("PMID {}", pmid_str(ident)),
        PM_LABEL_CONTEXT => "Context".into(),
        _ => String::new(),
    }
}

fn print_labelset(o: &mut String, l: &LabelRec) {
    use std::fmt::Write as _;
    let id = ident_str(l.ltype, l.ident);
    for s in &l.sets {
        let json = String::from_utf8_lossy(&s.json);
        if l.ltype & PM_LABEL_INSTANCES != 0 {
            let _ = writeln!(
                o,
                "    {id}[{}] labels ({} bytes): {json}",
                s.inst,
                s.json.len()
            );
        } else {
            let _ = writeln!(o, "    {id} labels ({} bytes): {json}", s.json.len());
        }
        for (i, x) in s.labels.iter().enumerate() {
            let _ = writeln!(
                o,
                "        [{i}] name({},{}) : value({},{}) [{}]",
                x.name_off,
                x.name_len,
                x.value_off,
                x.value_len,
                label_flags(x.flags)
            );
        }
    }
}

/// pmPrintValue for one decoded raw value.
fn print_value(o: &mut String, t: i32, raw: RawVal<'_>) {
    use std::fmt::Write as _;
    match (t, raw) {
        (0, RawVal::Insitu(w)) => push_int(o, w as i32),
        (1, RawVal::Insitu(w)) => push_int(o, w),
        (4, RawVal::Insitu(w)) => push_g(o, f32::from_bits(w) as f64, 8),
        (_, RawVal::Insitu(w)) => {
            // Aggregate/unknown in place: unsigned, float and hex views.
            let _ = write!(o, "{w}");
            let f = f32::from_bits(w);
            if !f.is_nan() {
                let _ = write!(o, " {}", fmt_g(f as f64, 8));
            }
            let _ = write!(o, " 0x{w:x}");
        }
        (_, RawVal::Block(vt, p)) => {
            // A block typed 0 is never byte-swapped by libpcp: its value is
            // read in host (little-endian) order.
            let le = vt == 0;
            let u64v = |p: &[u8]| -> Option<u64> {
                let a: [u8; 8] = p.get(..8)?.try_into().ok()?;
                Some(if le {
                    u64::from_le_bytes(a)
                } else {
                    u64::from_be_bytes(a)
                })
            };
            let u32v = |p: &[u8]| -> Option<u32> {
                let a: [u8; 4] = p.get(..4)?.try_into().ok()?;
                Some(if le {
                    u32::from_le_bytes(a)
                } else {
                    u32::from_be_bytes(a)
                })
            };
            // None: too short for its type, or of no type: the aggregate view.
            let typed = match t {
                0 => u32v(p).map(|v| push_int(o, v as i32)),
                1 => u32v(p).map(|v| push_int(o, v)),
                2 => u64v(p).map(|v| push_int(o, v as i64)),
                3 => u64v(p).map(|v| push_int(o, v)),
                4 => u32v(p).map(|v| push_g(o, f32::from_bits(v) as f64, 8)),
                5 => u64v(p).map(|v| push_g(o, f64::from_bits(v), 16)),
                6 => {
                    let e = p.iter().position(|&c| c == 0).unwrap_or(p.len());
                    o.push('"');
                    o.push_str(&String::from_utf8_lossy(&p[..e]));
                    o.push('"');
                    Some(())
                }
                _ => None,
            };
            if typed.is_none() {
                aggregate(o, p);
            }
        }
    }
}

/// pmPrintValue's aggregate rendering: u64/double/float views by length,
/// the text if printable, then the bytes in hex. Multi-byte views are in
/// host (little-endian) order as libpcp does a plain memcpy.
fn aggregate(o: &mut String, p: &[u8]) {
    use std::fmt::Write as _;
    let mut done = false;
    if p.len() == 8 {
        let a: [u8; 8] = p.try_into().unwrap_or([0; 8]);
        let _ = write!(o, "{}", u64::from_le_bytes(a));
        let d = f64::from_le_bytes(a);
        if !d.is_nan() {
            let _ = write!(o, " {}", fmt_g(d, 16));
        }
        done = true;
    }
    if p.len() == 4 {
        let a: [u8; 4] = p.try_into().unwrap_or([0; 4]);
        let f = f32::from_le_bytes(a);
        if !f.is_nan() {
            o.push_str(&fmt_g(f as f64, 8));
            done = true;
        }
    }
    if p.iter().all(|&c| (0x20..0x7f).contains(&c)) {
        if done {
            o.push(' ');
        }
        o.push('"');
        o.push_str(&String::from_utf8_lossy(p));
        o.push('"');
        done = true;
    }
    if done {
        o.push(' ');
    }
    o.push('[');
    for b in p {
        let _ = write!(o, "{b:02x}");
    }
    o.push(']');
}

fn print_events(o: &mut String, c: &Ctx, p: &[u8], highres: bool) {
    use std::fmt::Write as _;
    let mut pt = Vec::new();
    let Some(recs) = data::decode_events_typed(p, highres, &mut pt) else {
        o.push('\n');
        return;
    };
    // Raw parameter payloads are needed for exact printing: walk again.
    if recs.is_empty() {
        o.push_str("No event records\n");
        return;
    }
    let nmissed: i64 = recs
        .iter()
        .filter(|r| r.flags & EVENT_FLAG_MISSED != 0)
        .filter_map(|r| r.params.first().and_then(|x| x.value.as_i128()))
        .sum::<i128>() as i64;
    let _ = write!(o, "{}", recs.len());
    if nmissed > 0 {
        let _ = write!(o, " (and {nmissed} missed)");
    }
    if recs.len() as i64 + nmissed == 1 {
        o.push_str(" event record\n");
    } else {
        o.push_str(" event records\n");
    }
    let mut params = raw_params(p, highres).into_iter();
    for (r, rec) in recs.iter().enumerate() {
        let _ = write!(o, "        --- event record [{r}] timestamp ");
        let s = Stamp::from_ns(rec.time.0);
        let (dd, hms, y) = civil(s.sec);
        if highres {
            let _ = write!(o, "{hms}.{:09}", s.nsec);
        } else {
            let st = Stamp {
                sec: c.start.sec,
                nsec: c.start.nsec / 1000 * 1000,
            };
            let off = (s.sec - st.sec) as f64 + (s.nsec - st.nsec) as f64 / 1e9;
            let _ = write!(o, "{dd} {hms}.{:06} {y:4} ({off:.6})", s.nsec / 1000);
        }
        let missed = rec.flags & EVENT_FLAG_MISSED != 0;
        let np = if missed { 1 } else { rec.params.len() };
        let total = np + usize::from(rec.flags != 0);
        let rp: Vec<(u32, u8, &[u8])> = params.next().unwrap_or_default();
        if total == 0 {
            o.push_str(" ---\n\t          No parameters\n");
            continue;
        }
        let mut idx = 0;
        if rec.flags != 0 {
            let flags = rec.flags;
            let fs = if missed {
                "missed".to_string()
            } else {
                let mut v = Vec::new();
                for (b, n) in [
                    (1, "point"),
                    (2, "start"),
                    (4, "end"),
                    (8, "id"),
                    (16, "parent"),
                ] {
                    if flags & b != 0 {
                        v.push(n);
                    }
                }
                v.join(",")
            };
            let _ = writeln!(o, " flags 0x{flags:x} ({fs}) ---");
            idx = 1;
        }
        if missed {
            let n = rec
                .params
                .first()
                .and_then(|x| x.value.as_i128())
                .unwrap_or(0);
            let _ = writeln!(o, "        ==> {n} missed event records");
            continue;
        }
        for (pmid, pt, pay) in rp {
            if idx == 0 {
                o.push_str(" ---\n");
            }
            idx += 1;
            match c.descs.get(&pmid) {
                Some(d) if !d.names.is_empty() => {
                    let _ = write!(o, "        {} ({}):", pmid_str(pmid), d.names.join(" or "));
                }
                _ => {
                    let _ = write!(o, "        PMID: {}:", pmid_str(pmid));
                }
            }
            match c.descs.get(&pmid) {
                None => o.push_str(" pmLookupDesc: Metric not defined in the PCP archive log\n"),
                Some(d) => {
                    o.push_str(" value ");
                    let raw = if matches!(pt, 0 | 1) && pay.len() >= 4 {
                        RawVal::Insitu(be32(pay, 0).unwrap_or(0))
                    } else {
                        RawVal::Block(pt, pay)
                    };
                    print_value(o, d.vtype, raw);
                    o.push('\n');
                }
            }
        }
    }
}

/// Per event record: (pmid, type, payload) of each parameter.
fn raw_params(p: &[u8], highres: bool) -> Vec<Vec<(u32, u8, &[u8])>> {
    let mut out = Vec::new();
    let Some(n) = bei32(p, 0) else {
        return out;
    };
    let mut o = 4usize;
    for _ in 0..n.max(0) {
        o += if highres { 16 } else { 8 };
        let (Some(flags), Some(np)) = (be32(p, o), bei32(p, o + 4)) else {
            break;
        };
        o += 8;
        let mut v = Vec::new();
        if flags & EVENT_FLAG_MISSED == 0 {
            for _ in 0..np.max(0) {
                let (Some(pmid), Some(w)) = (be32(p, o), be32(p, o + 4)) else {
                    break;
                };
                let len = (w & 0xff_ffff) as usize;
                let pay = p.get(o + 8..o + 4 + len.max(4)).unwrap_or(&[]);
                v.push((pmid, (w >> 24) as u8, pay));
                o += 4 + len.div_ceil(4) * 4;
            }
        }
        out.push(v);
    }
    out
}

/// Time of the last record (for "ending"), scanning from the last index
/// entry when there is one.
fn archive_end(m: &Members, v: Version, index: &[(Stamp, i32, u64, u64)]) -> Option<Stamp> {
    // The last index entry may point past the last record (at end of file):
    // then scan the whole archive.
    scan_end(m, v, index.last().map(|e| (e.1, e.3))).or_else(|| scan_end(m, v, None))
}

fn scan_end(m: &Members, v: Version, from: Option<(i32, u64)>) -> Option<Stamp> {
    let mut end = None;
    for (vol, path) in &m.volumes {
        if let Some((fv, _)) = from {
            if (*vol as i32) < fv {
                continue;
            }
        }
        let Ok(mut rr) = RecordReader::open_in(m, path, true) else {
            continue;
        };
        if rr.label().is_err() {
            continue;
        }
        // Start at the last index entry of this volume, as libpcp does.
        if let Some((fv, off)) = from {
            if fv == *vol as i32 && rr.skip_to(off).is_err() {
                continue;
            }
        }
        let mut buf = Vec::new();
        while let Ok(Rec::Ok) = rr.next(&mut buf) {
            if let Some(s) = get_stamp(v, &buf, 4) {
                end = Some(s);
            }
        }
    }
    end
}

/// What of the archive to list: pmdumplog's `-S`/`-T` window and metric
/// arguments (plus instance filters).
#[derive(Default)]
pub struct Subset<'a> {
    pub window: TimeWindow,
    pub select: Option<&'a Selection>,
}

/// Write the pmdumplog-style listing.
pub fn native_dump(
    m: Members,
    salvage: bool,
    subset: &Subset<'_>,
    out: &mut dyn Write,
) -> Result<Vec<Diagnostic>> {
    use std::fmt::Write as _;
    let mut diags = Vec::new();
    // The "ending" time needs the last records before anything is printed:
    // decode those compressed volumes once, in the background, while the
    // metadata is prepared and the first values are formatted. The end scan
    // always reads the last volume, so that one starts at once.
    let mut m = m;
    let spool = |m: &mut Members, pick: &dyn Fn(u32) -> bool| {
        let paths: Vec<PathBuf> = m
            .volumes
            .iter()
            .filter(|(n, p)| pick(*n) && plain_size(p).is_none())
            .map(|x| x.1.clone())
            .collect();
        for p in paths {
            if let Some(sp) = Spool::start(&p) {
                m.spools.push((p, sp));
            }
        }
    };
    let last_vol = m.volumes.last().map(|x| x.0);
    spool(&mut m, &|n| Some(n) == last_vol);
    let mf = load_meta(&m, salvage, &mut diags)?;
    let v = mf.label.version;
    let (index, index_cut) = read_index(&m, v);
    // ...and so does every volume from the last index entry's on.
    let from_vol = index.last().map_or(i64::MAX, |e| e.1 as i64);
    spool(&mut m, &|n| n as i64 >= from_vol && Some(n) != last_vol);
    let pick = match subset.select {
        Some(sel) => make_pick(&mf.recs, sel, &m.meta, &mut diags)?,
        None => None,
    };
    // pmdumplog's -S/-T: from the label's start, to the archive's end.
    let bounds = if subset.window.is_open() {
        Bounds::default()
    } else {
        let start = Timestamp(mf.label.start.ns());
        let end = if subset.window.needs_end() {
            archive_end(&m, v, &index).map(|e| Timestamp(e.ns()))
        } else {
            None
        };
        subset
            .window
            .resolve(Some(start), end)
            .map_err(Error::Usage)?
    };
    let mut c = Ctx {
        v,
        start: mf.label.start,
        descs: IntMap::default(),
        indoms: IntMap::default(),
        pick,
    };
    let mut desc_keys = Vec::new();
    let mut indom_keys = Vec::new();
    // Per (indom, time): the records seen, with their position in the file,
    // which `tags` holds at the same place as the record's rebuilt list.
    let mut raw_seen: HashMap<(u32, Stamp), Vec<(&InDomRec, usize)>> = HashMap::new();
    let mut tags: IntMap<u32, Vec<usize>> = IntMap::default();
    for (serial, (_, r)) in mf.recs.iter().enumerate() {
        match r {
            MetaRec::Desc(d) => {
                match c.descs.entry(d.pmid) {
                    std::collections::hash_map::Entry::Vacant(e) => {
                        desc_keys.push(d.pmid);
                        let mut d = d.clone();
                        let mut seen = std::collections::HashSet::new();
                        d.names.retain(|n| seen.insert(n.clone()));
                        e.insert(d);
                    }
                    // A repeated descriptor only adds names libpcp has not seen.
                    std::collections::hash_map::Entry::Occupied(mut e) => {
                        for n in &d.names {
                            if !e.get().names.contains(n) {
                                e.get_mut().names.push(n.clone());
                            }
                        }
                    }
                }
            }
            MetaRec::InDom(i) => {
                if !c.indoms.contains_key(&i.indom) {
                    indom_keys.push(i.indom);
                }
                // A record identical (sorted) to an earlier one with the same
                // timestamp replaces it: libpcp unlinks the old one and links
                // the new one as the latest of that time.
                let same = raw_seen.entry((i.indom, i.stamp)).or_default();
                let list = c.indoms.entry(i.indom).or_default();
                let tag = tags.entry(i.indom).or_default();
                if let Some(k) = same.iter().position(|o| indom_key(o.0) == indom_key(i)) {
                    let old = same.remove(k).1;
                    if let Some(at) = tag.iter().position(|t| *t == old) {
                        tag.remove(at);
                        list.remove(at);
                    }
                }
                same.push((i, serial));
                let mut cur: InstList<'_> = if i.rtype == TYPE_INDOM_DELTA {
                    let mut cur = list.last().map(|x| x.1.clone()).unwrap_or_default();
                    for (id, n) in i.entries() {
                        cur.retain(|(x, _)| *x != id);
                        if let Some(n) = n {
                            cur.push((id, n));
                        }
                    }
                    cur
                } else {
                    i.entries().map(|(id, n)| (id, n.unwrap_or(""))).collect()
                };
                cur.sort_by_key(|x| x.0);
                let pos = list.partition_point(|(s, _)| *s <= i.stamp);
                list.insert(pos, (i.stamp, cur));
                tag.insert(pos, serial);
            }
            _ => {}
        }
    }
    order_names(&mf.recs, &mut c.descs);
    let mut o = String::new();
    o.push_str("Note: timezone set to \"TZ=UTC\"\n\n");
    // Label.
    let l = &mf.label;
    let _ = writeln!(o, "Log Label (Log Format Version {})", v.number());
    let _ = writeln!(o, "Performance metrics from host {}", l.hostname);
    let (dd, hms, y) = civil(l.start.sec);
    let _ = writeln!(
        o,
        "    commencing {dd} {hms}.{} {y:4} {}",
        c.frac(l.start),
        l.start.sec
    );
    let mut out = Sink {
        out,
        head: Some(std::mem::take(&mut o)),
        members: m.clone(),
        index: &index,
        v,
        held: Vec::new(),
        held_len: 0,
        spill: None,
        spilled: 0,
        no_spill: false,
    };
    if out.members.spools.is_empty() {
        out.write_head()?;
    }
    if !l.timezone.is_empty() {
        let _ = writeln!(o, "Archive timezone: {}", l.timezone);
    }
    if !l.zoneinfo.is_empty() {
        let _ = writeln!(o, "Archive zoneinfo: {}", l.zoneinfo);
    }
    if l.features != 0 {
        let _ = write!(o, "Archive features: 0x{:x}", l.features);
        let unk = l.features & 0x7fff_ffff;
        if unk != 0 {
            let _ = write!(o, " [unknown: 0x{unk:x}]");
        }
        o.push('\n');
    }
    let _ = writeln!(o, "PID for pmlogger: {}", l.pid);
    // Descriptors.
    o.push_str("\nDescriptions for Metrics in the Log ...\n");
    for p in hash_order(&desc_keys) {
        let d = &c.descs[&p];
        let _ = writeln!(o, "PMID: {} ({})", pmid_str(p), c.names(p));
        if d.vtype == -1 {
            o.push_str("    Data Type: Not Supported\n");
            continue;
        }
        let ts = type_str(d.vtype);
        let _ = write!(o, "    Data Type: {ts}");
        if ts == "???" {
            let _ = write!(o, " ({})", d.vtype);
        }
        let _ = writeln!(o, "  InDom: {} 0x{:x}", indom_str(d.indom), d.indom);
        let ss = sem_str(d.sem);
        let _ = write!(o, "    Semantics: {ss}");
        if ss == "???" {
            let _ = write!(o, " ({})", d.sem as i32);
        }
        let us = crate::model::Units::from_word(d.units).pcp_str();
        let _ = writeln!(o, "  Units: {}", if us.is_empty() { "none" } else { &us });
    }
    out.flush(&mut o, false)?;
    // Label sets: by time, then type order, then ident.
    o.push_str("\nMetric Labels in the Log ...\n");
    let mut labels: Vec<&LabelRec> = mf
        .recs
        .iter()
        .filter_map(|(_, r)| match r {
            MetaRec::Label(l) => Some(l),
            _ => None,
        })
        .collect();
    labels.sort_by_key(|l| l.stamp);
    let mut i = 0;
    while i < labels.len() {
        let t = labels[i].stamp;
        let j = labels[i..].partition_point(|l| l.stamp == t) + i;
        let _ = writeln!(o, "{}", c.stamp(t));
        for ty in [
            PM_LABEL_CONTEXT,
            PM_LABEL_DOMAIN,
            PM_LABEL_CLUSTER,
            PM_LABEL_ITEM,
            PM_LABEL_INDOM,
            PM_LABEL_INSTANCES,
        ] {
            let mut group: Vec<&LabelRec> = labels[i..j]
                .iter()
                .copied()
                .filter(|l| l.ltype == ty)
                .collect();
            group.sort_by_key(|l| l.ident);
            for l in group {
                print_labelset(&mut o, l);
            }
        }
        i = j;
    }
    out.flush(&mut o, false)?;
    // Help text: PMID then InDom, by ident, one-line before full.
    o.push_str("\nMetric Help Text in the Log ...\n");
    let mut texts: Vec<(i32, u32, i32, &TextRec)> = mf
        .recs
        .iter()
        .filter_map(|(_, r)| match r {
            MetaRec::Text(t) => Some((
                if t.ttype & PM_TEXT_INDOM != 0 { 1 } else { 0 },
                t.ident,
                if t.ttype & PM_TEXT_ONELINE != 0 { 0 } else { 1 },
                t,
            )),
            _ => None,
        })
        .collect();
    texts.sort_by_key(|x| (x.0, x.1, x.2));
    texts.dedup_by_key(|x| (x.0, x.1, x.2));
    for (kind, ident, class, t) in texts {
        if kind == 0 {
            let _ = write!(o, "PMID: {}", pmid_str(ident));
        } else {
            let _ = write!(o, "InDom: {}", indom_str(ident));
        }
        o.push_str(if class == 0 { " [" } else { "\n" });
        match &t.raw {
            // Text that is not UTF-8 goes out as stored, as pmdumplog does.
            Some(raw) => {
                out.flush(&mut o, false)?;
                out.put_bytes(raw)?;
            }
            None => o.push_str(&t.text),
        }
        o.push_str(if class == 0 { "]\n" } else { "\n" });
    }
    out.flush(&mut o, false)?;
    // On-disk instance domains, in file order.
    o.push_str("\nInstance Domains on-disk ...\n");
    for (_, r) in &mf.recs {
        if let MetaRec::InDom(i) = r {
            let _ = write!(o, "{} InDom: {}", c.stamp(i.stamp), indom_str(i.indom));
            if i.rtype == TYPE_INDOM_DELTA {
                o.push_str(" delta");
            }
            let _ = writeln!(o, " {} instances", i.len());
            for (id, n) in i.entries() {
                match (i.rtype, n) {
                    (TYPE_INDOM_DELTA, None) => {
                        let _ = writeln!(o, "   del {id}");
                    }
                    (TYPE_INDOM_DELTA, Some(n)) => {
                        let _ = writeln!(o, "   add {id} or \"{n}\"");
                    }
                    (_, n) => {
                        let _ = writeln!(o, "   {id} or \"{}\"", n.unwrap_or(""));
                    }
                }
            }
        }
        if o.len() > 1 << 16 {
            out.flush(&mut o, false)?;
        }
    }
    // Reconstructed instance domains, hash order, oldest first.
    o.push_str("\nInstance Domains in the Log ...\n");
    for k in hash_order(&indom_keys) {
        let _ = writeln!(o, "InDom: {}", indom_str(k));
        for (s, list) in &c.indoms[&k] {
            let _ = writeln!(o, "{} {} instances", c.stamp(*s), list.len());
            for (id, n) in list {
                let _ = writeln!(o, "   {id} or \"{n}\"");
            }
        }
        if o.len() > 1 << 16 {
            out.flush(&mut o, false)?;
        }
    }
    o.push_str("\nTemporal Index\n\t\t\t\t");
    if v == Version::V3 {
        o.push('\t');
    }
    o.push_str("\t\tLog Vol    end(meta)     end(log)\n");
    let meta_size = super::archive::plain_size(&m.meta).unwrap_or(mf.size);
    let mut last: Option<&(Stamp, i32, u64, u64)> = None;
    let mut log_size: Option<u64> = None;
    let short = |s: Stamp| {
        let (_, hms, _) = civil(s.sec);
        format!("{hms}.{}", c.frac(s))
    };
    for e in &index {
        let _ = writeln!(o, "{}\t  {:5}  {:11}  {:11}", c.stamp(e.0), e.1, e.2, e.3);
        if last.is_none_or(|p| p.1 != e.1) {
            let vp = m.volumes.iter().find(|(n, _)| *n as i64 == e.1 as i64);
            log_size = vp.and_then(|(_, p)| super::archive::plain_size(p));
            if vp.is_none() {
                let _ = writeln!(o, "\t\tWarning: file missing for log volume {}", e.1);
            }
        }
        if e.0.sec < 0 || !(0..=999_999_999).contains(&e.0.nsec) {
            let _ = writeln!(
                o,
                "\t\tError: illegal timestamp value ({} sec, {} nsec)",
                e.0.sec, e.0.nsec
            );
        }
        if let Some(ls) = log_size {
            if e.3 > ls {
                let _ = writeln!(o, "\t\tError: offset to log file past end of file ({ls})");
            }
        }
        if let Some(p) = last {
            if e.0 < p.0 {
                let _ = writeln!(
                    o,
                    "\t\tError: timestamp went backwards in time {} -> {}",
                    short(p.0),
                    short(e.0)
                );
            }
        }
        if e.2 > meta_size {
            let _ = writeln!(
                o,
                "\t\tError: offset to meta file past end of file ({meta_size})"
            );
        }
        if let Some(p) = last {
            if e.1 < p.1 {
                o.push_str("\t\tError: volume number decreased\n");
            }
            if e.1 == p.1 && e.2 < p.2 {
                o.push_str("\t\tError: offset to meta file decreased\n");
            }
            if e.1 == p.1 && e.3 < p.3 {
                o.push_str("\t\tError: offset to log file decreased\n");
            }
        }
        last = Some(e);
    }
    let index_err = index_cut.or_else(|| index_entry_damage(&m, v, &index, meta_size));
    out.flush(&mut o, false)?;
    // Results: records are read here, formatted in batches by two helper
    // threads, and written in order.
    let mut w = VolumeWalker::new(m, mf.label.clone());
    // Output buffers go back to the helpers once written: fresh
    // megabyte-sized strings cost page faults.
    let pool: std::sync::Mutex<Vec<String>> = Default::default();
    let stop = std::thread::scope(|sc| -> Result<Option<Error>> {
        let (work_tx, work_rx) = std::sync::mpsc::sync_channel::<(usize, Batch)>(4);
        let work_rx = std::sync::Arc::new(std::sync::Mutex::new(work_rx));
        let (res_tx, res_rx) = std::sync::mpsc::channel::<(usize, Formatted)>();
        for _ in 0..2 {
            let (work_rx, res_tx, c, pool) = (work_rx.clone(), res_tx.clone(), &c, &pool);
            sc.spawn(move || {
                let mut f = Fmt::default();
                loop {
                    let job = work_rx.lock().map(|r| r.recv());
                    let Ok(Ok((i, b))) = job else {
                        break;
                    };
                    let o = pool
                        .lock()
                        .ok()
                        .and_then(|mut p| p.pop())
                        .unwrap_or_default();
                    if res_tx.send((i, f.batch(c, v, &b, o))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(res_tx);
        let (mut sent, mut written, mut end) = (0usize, 0usize, false);
        let mut read_err = None;
        let mut done: std::collections::BTreeMap<usize, Formatted> = Default::default();
        loop {
            // Fewer batches in flight while the label waits for the decoder:
            // that output can only be held, and the decoder needs a core.
            let depth = if out.holding() { 2 } else { 4 };
            while !end && sent - written < depth {
                let (b, err, more) = read_batch(&mut w, &mut diags, v, bounds);
                if !b.recs.is_empty() {
                    if work_tx.send((sent, b)).is_err() {
                        return Err(Error::Unsupported("formatting thread failed".into()));
                    }
                    sent += 1;
                }
                if err.is_some() || !more {
                    read_err = err;
                    end = true;
                }
            }
            if written == sent {
                return Ok(read_err);
            }
            while !done.contains_key(&written) {
                let (i, f) = res_rx
                    .recv()
                    .map_err(|_| Error::Unsupported("formatting thread failed".into()))?;
                done.insert(i, f);
            }
            let Some(f) = done.remove(&written) else {
                continue;
            };
            written += 1;
            if let Some(t) = out.put(f.text)? {
                if let Ok(mut p) = pool.lock() {
                    p.push(t);
                }
            }
            if f.err.is_some() {
                return Ok(f.err);
            }
        }
    })?;
    if let Some(e) = stop {
        if !salvage {
            out.flush(&mut o, true)?;
            return Err(e);
        }
        diags.push(Diagnostic::salvaged(pos_of(&e), format!("stopped: {e}")));
    }
    out.flush(&mut o, true)?;
    // A damaged index does not stop the listing (the records are read in
    // order, not through it), but it is damage all the same.
    if let Some(e) = index_err {
        if !salvage {
            return Err(e);
        }
        diags.push(super::index::salvaged(e, &PathBuf::new()));
    }
    Ok(diags)
}

/// Records per batch: enough to amortise the hand-over, small enough to
/// keep both helpers busy.
const BATCH_RECORDS: usize = 16;

/// Result records read from the volumes, with where each one sits.
#[derive(Default)]
struct Batch {
    recs: Vec<(Vec<u8>, Position)>,
}

/// A batch's listing, and the error at the record where it stopped.
struct Formatted {
    text: String,
    err: Option<Error>,
}

/// Read up to [`BATCH_RECORDS`] records; a read error ends the batch. The
/// flag is false at the end of the archive, or of the window: as
/// pmdumplog, records before its start are skipped and the first one after
/// its end stops the listing.
fn read_batch(
    w: &mut VolumeWalker,
    diags: &mut Vec<Diagnostic>,
    v: Version,
    bounds: Bounds,
) -> (Batch, Option<Error>, bool) {
    let mut b = Batch::default();
    while b.recs.len() < BATCH_RECORDS {
        match w.next_record(diags) {
            Ok(true) => {
                if !bounds.is_open() {
                    // A record too short for a stamp is the formatter's error.
                    if let Some(s) = get_stamp(v, &w.buf, 4) {
                        let t = Timestamp(s.ns());
                        if bounds.end.is_some_and(|e| t > e) {
                            return (b, None, false);
                        }
                        if bounds.begin.is_some_and(|x| t < x) {
                            continue;
                        }
                    }
                }
                let pos = Position::at(w.path(), w.at.0, Some(w.at.2));
                b.recs.push((std::mem::take(&mut w.buf), pos));
            }
            Ok(false) => return (b, None, false),
            Err(e) => return (b, Some(e), false),
        }
    }
    (b, None, true)
}

/// One thread's formatting state: scratch lists and per-metric and
/// per-indom texts.
#[derive(Default)]
struct Fmt {
    sets: Vec<data::FlatVset>,
    vals: Vec<(i32, data::FlatVal)>,
    cut_vals: Vec<(i32, data::FlatVal)>,
    heads: IntMap<u32, MetricOut>,
    inst_text: IntMap<u32, InstTexts>,
}

impl Fmt {
    /// Format a batch into `o` (a recycled buffer).
    fn batch(&mut self, c: &Ctx<'_>, v: Version, b: &Batch, mut o: String) -> Formatted {
        o.clear();
        o.reserve(b.recs.iter().map(|r| r.0.len()).sum::<usize>() * 3);
        for (rec, pos) in &b.recs {
            let stamp = match data::parse_result_flat(v, rec, &mut self.sets, &mut self.vals) {
                Ok(s) => s,
                Err(m) => {
                    return Formatted {
                        text: o,
                        err: Some(Error::format(pos.clone(), m)),
                    }
                }
            };
            let size = match &c.pick {
                None => rec.len(),
                Some(p) => match self.cut(c, p, stamp) {
                    Some(n) => n,
                    None => continue,
                },
            };
            self.record(c, rec, stamp, size, &mut o);
        }
        Formatted { text: o, err: None }
    }

    /// Cut the parsed record down to what `p` keeps, in its order; the
    /// size pmdumplog reports for the cut result (do_size), or None when
    /// nothing is left. Marks always stay.
    fn cut(&mut self, c: &Ctx<'_>, p: &Pick, stamp: Stamp) -> Option<usize> {
        let head = if c.v == Version::V3 { 24 } else { 20 };
        if self.sets.is_empty() {
            return Some(head);
        }
        let insts = p.sel.filters_instances();
        let mut kept: Vec<(usize, data::FlatVset)> = Vec::new();
        self.cut_vals.clear();
        for vs in &self.sets {
            let Some(pos) = p.wants(vs.pmid) else {
                continue;
            };
            let first = self.cut_vals.len();
            if vs.numval > 0 {
                let n = vs.numval as usize;
                let vals = &self.vals[vs.first..vs.first + n];
                if insts {
                    let indom = c.descs.get(&vs.pmid).map_or(PM_INDOM_NULL, |d| d.indom);
                    let list = if indom == PM_INDOM_NULL {
                        &[][..]
                    } else {
                        c.inst_list(indom, stamp).1
                    };
                    let mut last = usize::MAX;
                    for (inst, fv) in vals {
                        let name = if indom == PM_INDOM_NULL {
                            None
                        } else {
                            find_inst(list, *inst, &mut last).map(|k| list[k].1)
                        };
                        // A singular metric's value has no instance.
                        let id = if indom == PM_INDOM_NULL {
                            crate::model::PM_IN_NULL
                        } else {
                            *inst
                        };
                        if p.sel.instance(id, name) {
                            self.cut_vals.push((*inst, *fv));
                        }
                    }
                    if self.cut_vals.len() == first {
                        continue;
                    }
                } else {
                    self.cut_vals.extend_from_slice(vals);
                }
            } else if insts && !p.sel.instances.is_empty() {
                // No values (or an error): nothing an instance filter selects.
                continue;
            }
            let numval = if vs.numval > 0 {
                (self.cut_vals.len() - first) as i32
            } else {
                vs.numval
            };
            kept.push((
                pos,
                data::FlatVset {
                    pmid: vs.pmid,
                    numval,
                    valfmt: vs.valfmt,
                    first,
                },
            ));
        }
        if kept.is_empty() {
            return None;
        }
        kept.sort_by_key(|k| k.0);
        let mut size = head;
        for (_, vs) in &kept {
            size += 8;
            if vs.numval > 0 {
                size += 4;
                for (_, fv) in &self.cut_vals[vs.first..vs.first + vs.numval as usize] {
                    size += 8;
                    if let data::FlatVal::Block(_, a, b) = fv {
                        size += ((b - a) as usize + 4).div_ceil(4) * 4;
                    }
                }
            }
        }
        self.sets.clear();
        self.sets.extend(kept.into_iter().map(|k| k.1));
        std::mem::swap(&mut self.vals, &mut self.cut_vals);
        Some(size)
    }

    /// Append the listing of the parsed record `rec`.
    fn record(&mut self, c: &Ctx<'_>, rec: &[u8], stamp: Stamp, size: usize, o: &mut String) {
        let (sets, vals, heads, inst_text) =
            (&self.sets, &self.vals, &mut self.heads, &mut self.inst_text);
        o.push_str("\n[");
        push_int(o, size);
        o.push_str(" bytes]\n");
        o.push_str(&c.stamp(stamp));
        match sets.len() {
            0 => o.push_str("  <mark>\n"),
            1 => o.push_str(" 1 metric\n"),
            n => {
                o.push(' ');
                push_int(o, n);
                o.push_str(" metrics\n");
            }
        }
        for vs in sets {
            let m = heads.entry(vs.pmid).or_insert_with(|| MetricOut {
                head: format!("    {} ({})", pmid_str(vs.pmid), c.names(vs.pmid)),
                desc: c.descs.get(&vs.pmid).map(|d| (d.vtype, d.indom)),
            });
            let head = m.head.as_str();
            if vs.numval <= 0 {
                o.push_str(head);
                if vs.numval == 0 {
                    o.push_str(": No values returned!\n");
                } else {
                    o.push_str(": ");
                    o.push_str(&err_str(vs.numval));
                    o.push('\n');
                }
                continue;
            }
            let (t, indom) = match m.desc {
                Some(d) => d,
                None => (if vs.valfmt == 0 { 0 } else { 7 }, PM_INDOM_NULL),
            };
            // Instance list in force, with each instance's ` inst [..] value `
            // text made once per indom record.
            let insts = if indom == PM_INDOM_NULL {
                None
            } else {
                let (ri, list) = c.inst_list(indom, stamp);
                let e = inst_text.entry(indom).or_insert_with(|| InstTexts {
                    rec: usize::MAX - 1,
                    ..Default::default()
                });
                if e.rec != ri {
                    e.rebuild(ri, list);
                }
                Some((list, &*e))
            };
            let mut last = usize::MAX;
            let n = vs.numval as usize;
            for (j, (inst, fv)) in vals[vs.first..vs.first + n].iter().enumerate() {
                let raw = fv.raw(rec);
                let k = insts.and_then(|(l, _)| find_inst(l, *inst, &mut last));
                if t == 9 || t == 10 {
                    // Event lines put the instance inside the head's parentheses.
                    o.push_str(&head[..head.len() - 1]);
                    match insts {
                        Some((l, _)) => push_inst(o, "[", *inst, k.map(|k| l[k].1), "])"),
                        None => o.push(')'),
                    }
                    o.push_str(": ");
                    match raw {
                        RawVal::Block(_, pay) => print_events(o, c, pay, t == 10),
                        RawVal::Insitu(_) => o.push('\n'),
                    }
                    continue;
                }
                if j == 0 {
                    o.push_str(head);
                    o.push(':');
                    if n > 1 {
                        o.push_str("\n       ");
                    }
                } else {
                    o.push_str("       ");
                }
                match (insts, k) {
                    (Some((_, texts)), Some(k)) => o.push_str(texts.get(k)),
                    (Some(_), None) => push_inst(o, " inst [", *inst, None, "] value "),
                    (None, _) => o.push_str(" value "),
                }
                print_value(o, t, raw);
                o.push('\n');
            }
        }
    }
}

/// Order each metric's names as pmNameAll does for an archive. libpcp builds
/// one name tree from every descriptor in file order (a new child goes to
/// the front of its parent's list), then chains the named nodes by a
/// pre-order walk, each pushed to the front. The outcome: at the first
/// component where two names differ, the one whose node was made earlier
/// comes first, and a name comes after its own descendants. A name already
/// bound to another metric is dropped (the first binding wins).
fn order_names(recs: &[(u64, MetaRec)], descs: &mut IntMap<u32, Desc>) {
    let NameTree { made, bound, .. } = NameTree::of(recs);
    let key = |n: &str| -> Vec<usize> {
        prefixes(n)
            .map(|p| made.get(p).copied().unwrap_or(usize::MAX))
            .collect()
    };
    for (pmid, d) in descs.iter_mut() {
        d.names.retain(|n| bound.get(n.as_str()) == Some(pmid));
        let mut keyed: Vec<(Vec<usize>, String)> =
            d.names.drain(..).map(|n| (key(&n), n)).collect();
        keyed.sort_by(|a, b| {
            let common = a.0.len().min(b.0.len());
            a.0[..common]
                .cmp(&b.0[..common])
                .then(b.0.len().cmp(&a.0.len()))
        });
        d.names = keyed.into_iter().map(|x| x.1).collect();
    }
}

/// libpcp's name tree of an archive's metric names, as its descriptors
/// bind them in record order.
struct NameTree<'a> {
    /// Each node (every prefix of a name) and when it was made.
    made: HashMap<&'a str, usize>,
    /// Each name and the metric it is bound to (the first binding wins).
    bound: HashMap<&'a str, u32>,
    /// The names bound, in the order of their first binding.
    first: Vec<(&'a str, u32)>,
}

impl<'a> NameTree<'a> {
    fn of(recs: &'a [(u64, MetaRec)]) -> NameTree<'a> {
        let mut t = NameTree {
            made: HashMap::new(),
            bound: HashMap::new(),
            first: Vec::new(),
        };
        for (_, r) in recs {
            let MetaRec::Desc(d) = r else { continue };
            for n in &d.names {
                for p in prefixes(n) {
                    let next = t.made.len();
                    t.made.entry(p).or_insert(next);
                }
                if !t.bound.contains_key(n.as_str()) {
                    t.bound.insert(n, d.pmid);
                    t.first.push((n, d.pmid));
                }
            }
        }
        t
    }
}

/// `a`, `a.b`, `a.b.c` for the name `a.b.c`: its nodes in the name tree.
fn prefixes(n: &str) -> impl Iterator<Item = &str> {
    n.match_indices('.')
        .map(|(k, _)| k)
        .chain(std::iter::once(n.len()))
        .map(move |k| &n[..k])
}

/// An indom record as libpcp compares them: kind and sorted entries.
fn indom_key(r: &InDomRec) -> (bool, Vec<(i32, Option<&str>)>) {
    let mut k: Vec<(i32, Option<&str>)> = r.entries().collect();
    k.sort_by_key(|x| x.0);
    (r.rtype == TYPE_INDOM_DELTA, k)
}

/// Output held back until the label's "ending" time is known: the first
/// [`HOLD_MEM`] bytes in memory, the rest in an unlinked temporary file
/// (page cache, not this process's memory), up to [`HOLD_CAP`] in all.
struct Sink<'a> {
    out: &'a mut dyn Write,
    /// The label up to its "ending" line, while not yet written.
    head: Option<String>,
    members: Members,
    index: &'a [(Stamp, i32, u64, u64)],
    v: Version,
    held: Vec<Vec<u8>>,
    held_len: usize,
    /// Held output that went past [`HOLD_MEM`]: it comes before `held`.
    spill: Option<std::fs::File>,
    spilled: u64,
    /// No temporary file could be written: hold in memory, as before.
    no_spill: bool,
}

/// Listing held in memory while the last volume is still being decoded
/// (the decoder runs at the speed of the formatting helpers, so the hold
/// grows with the volume): a few MB, so memory stays flat in the archive's
/// size and below pmdumplog's.
const HOLD_MEM: usize = 4 << 20;
/// All the listing held before waiting for the decoder: in the temporary
/// file, or in memory when there is no room for one.
const HOLD_CAP: usize = 64 << 20;
/// Bytes copied from the temporary file to the output at a time.
const SPILL_COPY: usize = 256 << 10;

impl Sink<'_> {
    fn write(&mut self, s: &[u8]) -> Result<()> {
        self.out.write_all(s).map_err(|e| Error::io("<stdout>", e))
    }

    fn holding(&self) -> bool {
        self.head.is_some()
    }

    /// Find the end of the archive (waiting for the decoder) and write the
    /// label's first lines, then everything held.
    fn write_head(&mut self) -> Result<()> {
        let Some(mut h) = self.head.take() else {
            return Ok(());
        };
        match archive_end(&self.members, self.v, self.index) {
            Some(e) => {
                let (dd, hms, y) = civil(e.sec);
                let _ = std::fmt::Write::write_fmt(
                    &mut h,
                    format_args!(
                        "    ending     {dd} {hms}.{} {y:4} {}\n",
                        frac(self.v, e),
                        e.sec
                    ),
                );
            }
            None => h.push_str("    ending     UNKNOWN\n"),
        }
        self.write(h.as_bytes())?;
        if let Some(mut f) = self.spill.take() {
            use std::io::{Read, Seek};
            let copy = |e: std::io::Error| {
                Error::io(
                    "<temporary file>",
                    std::io::Error::new(e.kind(), format!("reading back held listing: {e}")),
                )
            };
            f.seek(std::io::SeekFrom::Start(0)).map_err(copy)?;
            let mut buf = vec![0u8; SPILL_COPY];
            let mut left = self.spilled;
            while left > 0 {
                let want = (left as usize).min(buf.len());
                f.read_exact(&mut buf[..want]).map_err(copy)?;
                self.write(&buf[..want])?;
                left -= want as u64;
            }
            self.spilled = 0;
        }
        for h in std::mem::take(&mut self.held) {
            self.write(&h)?;
        }
        self.held_len = 0;
        Ok(())
    }

    /// Keep `b` while the head is pending: in memory up to [`HOLD_MEM`],
    /// then in the temporary file.
    fn hold(&mut self, b: Vec<u8>) {
        self.held_len += b.len();
        self.held.push(b);
        if self.held_len <= HOLD_MEM || self.no_spill {
            return;
        }
        if self.spill.is_none() {
            match tempfile::tempfile() {
                Ok(f) => self.spill = Some(f),
                Err(_) => {
                    self.no_spill = true;
                    return;
                }
            }
        }
        let Some(f) = self.spill.as_mut() else {
            return;
        };
        let mut moved = 0;
        for h in &self.held {
            if f.write_all(h).is_err() {
                // Only whole pieces count; the rest stays in memory.
                let _ = f.set_len(self.spilled);
                self.no_spill = true;
                break;
            }
            self.spilled += h.len() as u64;
            moved += 1;
        }
        let gone: usize = self.held.drain(..moved).map(|h| h.len()).sum();
        self.held_len -= gone;
    }

    /// Held so far, in memory and in the temporary file.
    fn held_total(&self) -> u64 {
        self.spilled + self.held_len as u64
    }

    /// Write (or hold) one finished piece of the listing; gives back the
    /// string when it was written, for reuse.
    fn put(&mut self, s: String) -> Result<Option<String>> {
        if self.head.is_some() {
            self.hold(s.into_bytes());
            self.flush(&mut String::new(), false)?;
            return Ok(None);
        }
        self.write(s.as_bytes())?;
        Ok(Some(s))
    }

    /// Write (or hold) bytes that may not be UTF-8.
    fn put_bytes(&mut self, b: &[u8]) -> Result<()> {
        if self.head.is_some() {
            self.hold(b.to_vec());
            return Ok(());
        }
        self.write(b)
    }

    /// Write `o` out and clear it; while the head is pending, keep it unless
    /// `all` or the hold limit is reached.
    fn flush(&mut self, o: &mut String, all: bool) -> Result<()> {
        if self.head.is_some() {
            // Held in pieces: one growing string would be copied on every
            // doubling.
            if !o.is_empty() {
                let cap = o.capacity().min(1 << 20);
                self.hold(std::mem::replace(o, String::with_capacity(cap)).into_bytes());
            }
            let decoded = self.members.spools.iter().all(|(_, sp)| sp.finished());
            if !all && !decoded && self.held_total() < HOLD_CAP as u64 {
                return Ok(());
            }
            return self.write_head();
        }
        self.write(o.as_bytes())?;
        o.clear();
        Ok(())
    }
}

/// ` inst [ID or "NAME"] value ` for each instance of one indom record, in
/// one string (indom records can change with every result).
#[derive(Default)]
struct InstTexts {
    rec: usize,
    text: String,
    ends: Vec<usize>,
}

impl InstTexts {
    fn rebuild(&mut self, rec: usize, list: &[(i32, &str)]) {
        self.rec = rec;
        self.text.clear();
        self.ends.clear();
        for (id, nm) in list {
            push_inst(&mut self.text, " inst [", *id, Some(nm), "] value ");
            self.ends.push(self.text.len());
        }
    }
    fn get(&self, k: usize) -> &str {
        let a = if k == 0 { 0 } else { self.ends[k - 1] };
        &self.text[a..self.ends[k]]
    }
}

/// Listing head (`    PMID (names)`) and descriptor facts of one metric,
/// built on first use: value sets outnumber records by ~300 to 1.
struct MetricOut {
    head: String,
    desc: Option<(i32, u32)>,
}

/// `{pre}{inst} or "{name}"{post}`, or `or ???` when the name is unknown.
fn push_inst(o: &mut String, pre: &str, inst: i32, name: Option<&str>, post: &str) {
    o.push_str(pre);
    push_int(o, inst);
    match name {
        Some(n) => {
            o.push_str(" or \"");
            o.push_str(n);
            o.push('"');
        }
        None => o.push_str(" or ???"),
    }
    o.push_str(post);
}

/// Position of `inst` in an id-sorted instance list. Values usually follow
/// the list's order, so the slot after the previous hit is tried first; with
/// duplicate ids the first one wins, as in libpcp.
fn find_inst(list: &[(i32, &str)], inst: i32, last: &mut usize) -> Option<usize> {
    let k = last.wrapping_add(1);
    let slot_ok = list.get(k).is_some_and(|x| x.0 == inst) && (k == 0 || list[k - 1].0 != inst);
    let k = if slot_ok {
        k
    } else {
        let k = list.partition_point(|x| x.0 < inst);
        if list.get(k)?.0 != inst {
            return None;
        }
        k
    };
    *last = k;
    Some(k)
}

fn pos_of(e: &Error) -> Position {
    match e {
        Error::Format { pos, .. } => pos.clone(),
        _ => Position::default(),
    }
}

/// The label's start and, with `need_end`, the time of the last record
/// (found from the last index entry on, as libpcp does).
pub fn bounds(m: &Members, need_end: bool) -> Result<(Timestamp, Option<Timestamp>)> {
    let mut rr = RecordReader::open(&m.meta)?;
    let label = rr.label()?;
    let start = Timestamp(label.start.ns());
    if !need_end {
        return Ok((start, None));
    }
    let (index, _) = read_index(m, label.version);
    Ok((
        start,
        archive_end(m, label.version, &index).map(|e| Timestamp(e.ns())),
    ))
}

#[cfg(test)]
mod sink_tests {
    use super::*;

    fn sink<'a>(out: &'a mut Vec<u8>, no_spill: bool) -> Sink<'a> {
        Sink {
            out,
            head: Some("head\n".into()),
            members: Members {
                base: PathBuf::from("x"),
                meta: PathBuf::from("x.meta"),
                index: None,
                volumes: Vec::new(),
                spools: Vec::new(),
            },
            index: &[],
            v: Version::V2,
            held: Vec::new(),
            held_len: 0,
            spill: None,
            spilled: 0,
            no_spill,
        }
    }

    /// Held output past the memory limit goes to the temporary file, and
    /// comes out after the head in the order it was put, as it does when
    /// everything is held in memory.
    #[test]
    fn held_listing_spills_past_the_memory_limit_in_order() {
        let pieces: Vec<Vec<u8>> = (0..40u8)
            .map(|i| vec![b'a' + i % 26; 300_000 + i as usize])
            .collect();
        let mut want = b"head\n    ending     UNKNOWN\n".to_vec();
        for p in &pieces {
            want.extend_from_slice(p);
        }
        for no_spill in [false, true] {
            let mut out = Vec::new();
            let mut s = sink(&mut out, no_spill);
            for p in &pieces {
                s.hold(p.clone());
                assert!(no_spill || s.held_len <= HOLD_MEM + 400_000);
            }
            assert_eq!(s.spilled > 0, !no_spill);
            assert_eq!(s.held_total(), want.len() as u64 - 28);
            s.write_head().unwrap();
            assert_eq!(s.held_total(), 0);
            drop(s);
            assert!(out == want, "no_spill {no_spill}");
        }
    }
}
