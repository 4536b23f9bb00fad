//! pmdumplog-style listing: the output of
//! `pmdumplog -a -e -h -I -M -xxx -Z UTC ARCHIVE` (PCP 6.0.3), rebuilt from
//! the archive. Times are always printed in UTC.

use super::archive::{Members, Rec, RecordReader};
use super::data::{self, RawVal};
use super::layout::*;
use super::meta::{Desc, InDomRec, LabelRec, MetaRec};
use super::reader::{load_meta, VolumeWalker};
use crate::error::{Diagnostic, Error, Position, Result};
use crate::pipeline::civil_from_days;
use std::collections::HashMap;
use std::io::Write;

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

/// C `%.{prec}g`.
pub fn fmt_g(x: f64, prec: usize) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    let p = prec.max(1);
    let s = format!("{:.*e}", p - 1, x);
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        let mut m = mant.to_string();
        if m.contains('.') {
            while m.ends_with('0') {
                m.pop();
            }
            if m.ends_with('.') {
                m.pop();
            }
        }
        format!(
            "{m}e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.unsigned_abs()
        )
    } else {
        let dec = (p as i32 - 1 - exp).max(0) as usize;
        let mut m = format!("{:.*}", dec, x);
        if m.contains('.') {
            while m.ends_with('0') {
                m.pop();
            }
            if m.ends_with('.') {
                m.pop();
            }
        }
        m
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

/// A multiply-shift hasher for the small integer keys of the listing's hot
/// lookups (SipHash showed up in profiles).
#[derive(Default, Clone, Copy)]
pub struct IntHasher(u64);

impl std::hash::Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(5) ^ *b as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u32(&mut self, i: u32) {
        self.0 = (self.0.rotate_left(5) ^ i as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_i32(&mut self, i: i32) {
        self.write_u32(i as u32);
    }
}

type IntMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<IntHasher>>;

/// (record index, inst -> position, position of the last hit).
type InstCache = (usize, IntMap<i32, usize>, usize);

/// Instance list (id, name) of one indom at one time.
type InstList = Vec<(i32, String)>;

struct Ctx {
    v: Version,
    start: Stamp,
    descs: IntMap<u32, Desc>,
    /// Per indom: records in time order (full instance lists, sorted).
    indoms: IntMap<u32, Vec<(Stamp, InstList)>>,
    inst_cache: IntMap<u32, InstCache>,
    name_cache: IntMap<u32, String>,
}

impl Ctx {
    fn frac(&self, s: Stamp) -> String {
        match self.v {
            Version::V3 => format!("{:09}", s.nsec),
            Version::V2 => format!("{:06}", s.nsec / 1000),
        }
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
    /// Name of `inst` in the indom record in force at `t`. A per-indom
    /// lookup table of the current record is cached (results come in time
    /// order, so it rarely changes).
    fn inst_name(&mut self, indom: u32, t: Stamp, inst: i32) -> Option<&str> {
        let recs = self.indoms.get(&indom)?;
        let idx = recs.partition_point(|(s, _)| *s <= t).saturating_sub(1);
        let list = &recs.get(idx)?.1;
        // Values usually follow the indom's own order: try the slot after
        // the previous hit before hashing.
        if let Some((i, _, last)) = self.inst_cache.get_mut(&indom) {
            if *i == idx {
                let k = last.wrapping_add(1);
                if list.get(k).is_some_and(|(x, _)| *x == inst) {
                    *last = k;
                    return list.get(k).map(|(_, n)| n.as_str());
                }
            }
        }
        let hit = matches!(self.inst_cache.get(&indom), Some((i, _, _)) if *i == idx);
        if !hit {
            let map: IntMap<i32, usize> = recs
                .get(idx)?
                .1
                .iter()
                .enumerate()
                .rev()
                .map(|(k, (i, _))| (*i, k))
                .collect();
            self.inst_cache.insert(indom, (idx, map, usize::MAX));
        }
        let e = self.inst_cache.get_mut(&indom)?;
        let k = *e.1.get(&inst)?;
        e.2 = k;
        list.get(k).map(|(_, n)| n.as_str())
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
    let m = match -code - 12345 {
        5 => Some("Metric not supported by this version of monitored application"),
        6 => Some("Missing metric value(s)"),
        12 => Some("Unknown metric name"),
        13 => Some("Unknown or illegal metric identifier"),
        14 => Some("Unknown or illegal instance domain identifier"),
        15 => Some("Unknown or illegal instance identifier"),
        16 => Some("Illegal pmUnits specification"),
        17 => Some("Impossible value or scale conversion"),
        18 => Some("Truncation in value conversion"),
        19 => Some("Negative value in conversion to unsigned"),
        20 => Some("Explicit instance identifier(s) required"),
        33 => Some("Metric not defined in the PCP archive log"),
        34 => Some("Instance domain identifier not defined in the PCP archive log"),
        35 => Some("Instance identifier not defined in the PCP archive log"),
        41 => Some("No pmcd agent for domain of request"),
        42 => Some("No permission to perform requested operation"),
        44 => Some("Try again. Information not currently available"),
        52 => Some("Unknown or illegal metric type"),
        66 => Some("PMDA is currently fenced and unable to respond to requests"),
        8999 => Some("Functionality not yet implemented"),
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
        (0, RawVal::Insitu(w)) => {
            let _ = write!(o, "{}", w as i32);
        }
        (1, RawVal::Insitu(w)) => {
            let _ = write!(o, "{w}");
        }
        (4, RawVal::Insitu(w)) => o.push_str(&fmt_g(f32::from_bits(w) as f64, 8)),
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
            match t {
                0 => match u32v(p) {
                    Some(v) => {
                        let _ = write!(o, "{}", v as i32);
                    }
                    None => aggregate(o, p),
                },
                1 => match u32v(p) {
                    Some(v) => {
                        let _ = write!(o, "{v}");
                    }
                    None => aggregate(o, p),
                },
                2 => match u64v(p) {
                    Some(v) => {
                        let _ = write!(o, "{}", v as i64);
                    }
                    None => aggregate(o, p),
                },
                3 => match u64v(p) {
                    Some(v) => {
                        let _ = write!(o, "{v}");
                    }
                    None => aggregate(o, p),
                },
                4 => match u32v(p) {
                    Some(v) => o.push_str(&fmt_g(f32::from_bits(v) as f64, 8)),
                    None => aggregate(o, p),
                },
                5 => match u64v(p) {
                    Some(v) => o.push_str(&fmt_g(f64::from_bits(v), 16)),
                    None => aggregate(o, p),
                },
                6 => {
                    let e = p.iter().position(|&c| c == 0).unwrap_or(p.len());
                    o.push('"');
                    o.push_str(&String::from_utf8_lossy(&p[..e]));
                    o.push('"');
                }
                _ => aggregate(o, p),
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
        let Ok(mut rr) = RecordReader::open_opt(path, true) else {
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

fn read_index(m: &Members, v: Version) -> Vec<(Stamp, i32, u64, u64)> {
    let mut out = Vec::new();
    let Some(p) = &m.index else {
        return out;
    };
    let Ok(mut rr) = RecordReader::open(p) else {
        return out;
    };
    if rr.label().is_err() {
        return out;
    }
    let Ok(b) = rr.rest(1 << 32) else {
        return out;
    };
    let es = if v == Version::V2 { 20 } else { 32 };
    for e in b.chunks_exact(es) {
        let Some(s) = get_stamp(v, e, 0) else {
            continue;
        };
        let ts = v.ts_len();
        let vol = bei32(e, ts).unwrap_or(0);
        let (mo, d) = if v == Version::V2 {
            (
                be32(e, ts + 4).unwrap_or(0) as u64,
                be32(e, ts + 8).unwrap_or(0) as u64,
            )
        } else {
            (be64(e, ts + 4).unwrap_or(0), be64(e, ts + 12).unwrap_or(0))
        };
        out.push((s, vol, mo, d));
    }
    out
}

/// Write the pmdumplog-style listing.
pub fn native_dump(m: Members, salvage: bool, out: &mut dyn Write) -> Result<Vec<Diagnostic>> {
    use std::fmt::Write as _;
    let mut diags = Vec::new();
    let mf = load_meta(&m, salvage, &mut diags)?;
    let v = mf.label.version;
    let mut c = Ctx {
        v,
        start: mf.label.start,
        descs: IntMap::default(),
        indoms: IntMap::default(),
        inst_cache: IntMap::default(),
        name_cache: IntMap::default(),
    };
    let mut desc_keys = Vec::new();
    let mut indom_keys = Vec::new();
    type RawKey = (bool, Vec<(i32, Option<String>)>);
    let mut raw_seen: HashMap<u32, Vec<(Stamp, RawKey)>> = HashMap::new();
    for (_, r) in &mf.recs {
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
                // libpcp drops a record identical (sorted) to another one
                // with the same timestamp.
                let mut rawkey: Vec<(i32, Option<String>)> = i.entries.clone();
                rawkey.sort_by_key(|x| x.0);
                let rawkey = (i.rtype == TYPE_INDOM_DELTA, rawkey);
                let seen = raw_seen.entry(i.indom).or_default();
                if seen.iter().any(|(s, k)| *s == i.stamp && *k == rawkey) {
                    continue;
                }
                seen.push((i.stamp, rawkey));
                let list = c.indoms.entry(i.indom).or_default();
                let mut cur: Vec<(i32, String)> = if i.rtype == TYPE_INDOM_DELTA {
                    let mut cur = list.last().map(|x| x.1.clone()).unwrap_or_default();
                    for (id, n) in &i.entries {
                        cur.retain(|(x, _)| x != id);
                        if let Some(n) = n {
                            cur.push((*id, n.clone()));
                        }
                    }
                    cur
                } else {
                    i.entries
                        .iter()
                        .map(|(id, n)| (*id, n.clone().unwrap_or_default()))
                        .collect()
                };
                cur.sort_by_key(|x| x.0);
                let pos = list.partition_point(|(s, _)| *s <= i.stamp);
                list.insert(pos, (i.stamp, cur));
            }
            _ => {}
        }
    }
    let index = read_index(&m, v);
    let wr = |o: &mut dyn Write, s: &str| -> Result<()> {
        o.write_all(s.as_bytes())
            .map_err(|e| Error::io("<stdout>", e))
    };
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
    match archive_end(&m, v, &index) {
        Some(e) => {
            let (dd, hms, y) = civil(e.sec);
            let _ = writeln!(o, "    ending     {dd} {hms}.{} {y:4} {}", c.frac(e), e.sec);
        }
        None => o.push_str("    ending     UNKNOWN\n"),
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
    wr(out, &o)?;
    o.clear();
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
    wr(out, &o)?;
    o.clear();
    // Help text: PMID then InDom, by ident, one-line before full.
    o.push_str("\nMetric Help Text in the Log ...\n");
    let mut texts: Vec<(i32, u32, i32, &str)> = mf
        .recs
        .iter()
        .filter_map(|(_, r)| match r {
            MetaRec::Text(t) => Some((
                if t.ttype & PM_TEXT_INDOM != 0 { 1 } else { 0 },
                t.ident,
                if t.ttype & PM_TEXT_ONELINE != 0 { 0 } else { 1 },
                t.text.as_str(),
            )),
            _ => None,
        })
        .collect();
    texts.sort_by_key(|x| (x.0, x.1, x.2));
    texts.dedup_by_key(|x| (x.0, x.1, x.2));
    for (kind, ident, class, text) in texts {
        if kind == 0 {
            let _ = write!(o, "PMID: {}", pmid_str(ident));
        } else {
            let _ = write!(o, "InDom: {}", indom_str(ident));
        }
        if class == 0 {
            let _ = writeln!(o, " [{text}]");
        } else {
            let _ = writeln!(o, "\n{text}");
        }
    }
    wr(out, &o)?;
    o.clear();
    // On-disk instance domains, in file order.
    o.push_str("\nInstance Domains on-disk ...\n");
    for (_, r) in &mf.recs {
        if let MetaRec::InDom(InDomRec {
            rtype,
            stamp,
            indom,
            entries,
            ..
        }) = r
        {
            let _ = write!(o, "{} InDom: {}", c.stamp(*stamp), indom_str(*indom));
            if *rtype == TYPE_INDOM_DELTA {
                o.push_str(" delta");
            }
            let _ = writeln!(o, " {} instances", entries.len());
            for (id, n) in entries {
                match (rtype, n) {
                    (&TYPE_INDOM_DELTA, None) => {
                        let _ = writeln!(o, "   del {id}");
                    }
                    (&TYPE_INDOM_DELTA, Some(n)) => {
                        let _ = writeln!(o, "   add {id} or \"{n}\"");
                    }
                    (_, n) => {
                        let _ = writeln!(o, "   {id} or \"{}\"", n.as_deref().unwrap_or(""));
                    }
                }
            }
        }
        if o.len() > 1 << 16 {
            wr(out, &o)?;
            o.clear();
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
            wr(out, &o)?;
            o.clear();
        }
    }
    // Temporal index.
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
    wr(out, &o)?;
    o.clear();
    // Results.
    let mut w = VolumeWalker::new(m, mf.label.clone());
    loop {
        match w.next_record(&mut diags) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) if salvage => {
                diags.push(Diagnostic::salvaged(pos_of(&e), format!("stopped: {e}")));
                break;
            }
            Err(e) => {
                wr(out, &o)?;
                return Err(e);
            }
        }
        let r = match w.parse() {
            Ok(r) => r,
            Err(e) if salvage => {
                diags.push(Diagnostic::salvaged(pos_of(&e), format!("stopped: {e}")));
                break;
            }
            Err(e) => {
                wr(out, &o)?;
                return Err(e);
            }
        };
        let _ = writeln!(o, "\n[{} bytes]", w.buf.len());
        o.push_str(&c.stamp(r.stamp));
        if r.vsets.is_empty() {
            o.push_str("  <mark>\n");
        } else {
            let n = r.vsets.len();
            let _ = writeln!(o, " {n} metric{}", if n > 1 { "s" } else { "" });
        }
        for vs in &r.vsets {
            let p = pmid_str(vs.pmid);
            if !c.name_cache.contains_key(&vs.pmid) {
                let n = c.names(vs.pmid);
                c.name_cache.insert(vs.pmid, n);
            }
            let names = c.name_cache[&vs.pmid].clone();
            if vs.numval == 0 {
                let _ = writeln!(o, "    {p} ({names}): No values returned!");
                continue;
            }
            if vs.numval < 0 {
                let _ = writeln!(o, "    {p} ({names}): {}", err_str(vs.numval));
                continue;
            }
            let (t, indom) = match c.descs.get(&vs.pmid) {
                Some(d) => (d.vtype, d.indom),
                None => (if vs.valfmt == 0 { 0 } else { 7 }, PM_INDOM_NULL),
            };
            for (j, (inst, raw)) in vs.vals.iter().enumerate() {
                if t == 9 || t == 10 {
                    let _ = write!(o, "    {p} ({names}");
                    if indom != PM_INDOM_NULL {
                        match c.inst_name(indom, r.stamp, *inst) {
                            Some(nm) => {
                                let _ = write!(o, "[{inst} or \"{nm}\"])");
                            }
                            None => {
                                let _ = write!(o, "[{inst} or ???])");
                            }
                        }
                    } else {
                        o.push(')');
                    }
                    o.push_str(": ");
                    match raw {
                        RawVal::Block(_, pay) => print_events(&mut o, &c, pay, t == 10),
                        RawVal::Insitu(_) => o.push('\n'),
                    }
                    continue;
                }
                if j == 0 {
                    let _ = write!(o, "    {p} ({names}):");
                    if vs.numval > 1 {
                        o.push_str("\n       ");
                    }
                } else {
                    o.push_str("       ");
                }
                if indom != PM_INDOM_NULL {
                    match c.inst_name(indom, r.stamp, *inst) {
                        Some(nm) => {
                            let _ = write!(o, " inst [{inst} or \"{nm}\"]");
                        }
                        None => {
                            let _ = write!(o, " inst [{inst} or ???]");
                        }
                    }
                }
                o.push_str(" value ");
                print_value(&mut o, t, *raw);
                o.push('\n');
            }
        }
        if o.len() > 1 << 16 {
            wr(out, &o)?;
            o.clear();
        }
    }
    wr(out, &o)?;
    Ok(diags)
}

fn pos_of(e: &Error) -> Position {
    match e {
        Error::Format { pos, .. } => pos.clone(),
        _ => Position::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn g_format_like_c() {
        assert_eq!(fmt_g(5.333333492279053, 8), "5.3333335");
        assert_eq!(fmt_g(0.97_f32 as f64, 8), "0.97000003");
        assert_eq!(fmt_g(1.5, 8), "1.5");
        assert_eq!(fmt_g(0.0, 16), "0");
        assert_eq!(fmt_g(1e20, 16), "1e+20");
        assert_eq!(fmt_g(1.25e-7, 8), "1.25e-07");
        assert_eq!(fmt_g(123456789.0, 8), "1.2345679e+08");
        assert_eq!(fmt_g(0.8333333333333334, 16), "0.8333333333333334");
    }
}
