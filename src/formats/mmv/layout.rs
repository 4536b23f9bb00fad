//! MMV on-disk structures (PCP `mmv_dev.h`) and a bounds-checked parser.
//!
//! Files are in host byte order; every multi-byte field is read with
//! `from_ne_bytes`. Offsets in the file are absolute. Nothing here indexes
//! the input without a bounds check: every read goes through [`Bytes`].

use crate::error::{Diagnostic, Error, Position, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub const MAGIC: &[u8; 4] = b"MMV\0";
pub const HDR_SIZE: u64 = 40;
pub const TOC_SIZE: u64 = 16;
pub const INDOM_SIZE: u64 = 32;
pub const INST1_SIZE: u64 = 80;
pub const INST2_SIZE: u64 = 24;
pub const METRIC1_SIZE: u64 = 104;
pub const METRIC2_SIZE: u64 = 48;
pub const VALUE_SIZE: u64 = 32;
pub const STRING_SIZE: u64 = 256;
pub const LABEL_SIZE: u64 = 256;
pub const NAMEMAX: usize = 64;
pub const STRINGMAX: usize = 256;
pub const LABELMAX: usize = 244;

pub const TOC_INDOMS: i32 = 1;
pub const TOC_INSTANCES: i32 = 2;
pub const TOC_METRICS: i32 = 3;
pub const TOC_VALUES: i32 = 4;
pub const TOC_STRINGS: i32 = 5;
pub const TOC_LABELS: i32 = 6;

pub const FLAG_NOPREFIX: u32 = 0x1;
pub const FLAG_PROCESS: u32 = 0x2;
pub const FLAG_SENTINEL: u32 = 0x4;

pub const TYPE_NOSUPPORT: i32 = -1;
pub const TYPE_I32: i32 = 0;
pub const TYPE_U32: i32 = 1;
pub const TYPE_I64: i32 = 2;
pub const TYPE_U64: i32 = 3;
pub const TYPE_FLOAT: i32 = 4;
pub const TYPE_DOUBLE: i32 = 5;
pub const TYPE_STRING: i32 = 6;
pub const TYPE_ELAPSED: i32 = 9;

pub const LABEL_CLUSTER: u32 = 0x08;
pub const LABEL_INDOM: u32 = 0x04;
pub const LABEL_ITEM: u32 = 0x10;
pub const LABEL_INSTANCES: u32 = 0x20;
pub const LABEL_OPTIONAL: u32 = 0x80;

/// The PCP domain number of the MMV PMDA.
pub const MMV_DOMAIN: u32 = 70;

pub fn inst_size(version: i32) -> u64 {
    if version == 1 {
        INST1_SIZE
    } else {
        INST2_SIZE
    }
}

pub fn metric_size(version: i32) -> u64 {
    if version == 1 {
        METRIC1_SIZE
    } else {
        METRIC2_SIZE
    }
}

/// Bounds-checked native-endian reads over the whole file.
#[derive(Clone, Copy)]
pub struct Bytes<'a>(pub &'a [u8]);

impl<'a> Bytes<'a> {
    pub fn len(&self) -> u64 {
        self.0.len() as u64
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn slice(&self, off: u64, len: u64) -> Option<&'a [u8]> {
        let end = off.checked_add(len)?;
        if end > self.len() {
            return None;
        }
        self.0.get(off as usize..end as usize)
    }
    pub fn u32(&self, off: u64) -> Option<u32> {
        let s = self.slice(off, 4)?;
        Some(u32::from_ne_bytes(s.try_into().ok()?))
    }
    pub fn i32(&self, off: u64) -> Option<i32> {
        self.u32(off).map(|v| v as i32)
    }
    pub fn u64(&self, off: u64) -> Option<u64> {
        let s = self.slice(off, 8)?;
        Some(u64::from_ne_bytes(s.try_into().ok()?))
    }
    pub fn i64(&self, off: u64) -> Option<i64> {
        self.u64(off).map(|v| v as i64)
    }
    /// The C string at `off`, stopping at NUL, at `max` bytes or at the end
    /// of the file, whichever comes first.
    pub fn cstr(&self, off: u64, max: usize) -> &'a [u8] {
        let Some(rest) = (off <= self.len()).then(|| &self.0[off as usize..]) else {
            return &[];
        };
        let rest = &rest[..rest.len().min(max)];
        match rest.iter().position(|&b| b == 0) {
            Some(n) => &rest[..n],
            None => rest,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct DiskHeader {
    pub version: i32,
    pub g1: u64,
    pub g2: u64,
    pub tocs: i32,
    pub flags: u32,
    pub process: i32,
    pub cluster: i32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Toc {
    pub ty: i32,
    pub count: i32,
    pub offset: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DiskIndom {
    pub off: u64,
    pub serial: u32,
    pub count: u32,
    pub first: u64,
    pub short: u64,
    pub long: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DiskInst {
    pub off: u64,
    pub indom: u64,
    pub pad: u32,
    pub internal: i32,
    pub name: Vec<u8>,
    /// v2/v3: STRINGS offset of the name (0 in v1).
    pub name_off: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DiskMetric {
    pub off: u64,
    pub name: Vec<u8>,
    pub name_off: u64,
    pub item: u32,
    pub mtype: i32,
    pub sem: i32,
    pub dim: u32,
    pub indom: i32,
    pub pad: u32,
    pub short: u64,
    pub long: u64,
}

impl DiskMetric {
    pub fn has_indom(&self) -> bool {
        self.indom != 0 && self.indom != -1
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct DiskValue {
    pub off: u64,
    /// The 8 value bytes as a native u64.
    pub raw: u64,
    pub extra: i64,
    pub metric: u64,
    pub inst: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DiskLabel {
    pub off: u64,
    pub flags: u32,
    pub identity: u32,
    pub internal: i32,
    pub payload: Vec<u8>,
}

/// A parsed MMV file. Entries keep their offsets so a writer can lay the
/// file out again exactly.
#[derive(Debug, Clone, Default)]
pub struct MmvFile {
    pub header: Option<DiskHeader>,
    pub size: u64,
    pub toc: Vec<Toc>,
    pub indoms: Vec<DiskIndom>,
    pub insts: Vec<DiskInst>,
    pub metrics: Vec<DiskMetric>,
    pub values: Vec<DiskValue>,
    /// STRINGS section: (offset, payload up to NUL).
    pub strings: Vec<(u64, Vec<u8>)>,
    pub labels: Vec<DiskLabel>,
    pub string_at: HashMap<u64, usize>,
    pub indom_at: HashMap<u64, usize>,
    pub inst_at: HashMap<u64, usize>,
    pub metric_at: HashMap<u64, usize>,
}

impl MmvFile {
    pub fn hdr(&self) -> &DiskHeader {
        self.header.as_ref().expect("parse sets the header")
    }
    pub fn version(&self) -> i32 {
        self.header.as_ref().map(|h| h.version).unwrap_or(1)
    }
    pub fn string(&self, off: u64) -> Option<&[u8]> {
        self.string_at
            .get(&off)
            .and_then(|&i| self.strings.get(i))
            .map(|(_, s)| s.as_slice())
    }
    pub fn section(&self, ty: i32) -> Option<&Toc> {
        self.toc.iter().find(|t| t.ty == ty)
    }
}

/// Bad-input reporting: an error, or with salvage a diagnostic and go on.
pub struct Ctx<'a> {
    pub file: PathBuf,
    pub salvage: bool,
    pub diags: &'a mut Vec<Diagnostic>,
}

impl Ctx<'_> {
    pub fn pos(&self, off: u64, rec: Option<u64>) -> Position {
        Position::at(&self.file, off, rec)
    }
    /// Damage that salvage can skip past.
    pub fn bad(&mut self, off: u64, rec: Option<u64>, msg: String) -> Result<()> {
        if self.salvage {
            self.diags
                .push(Diagnostic::salvaged(self.pos(off, rec), msg));
            Ok(())
        } else {
            Err(Error::format(self.pos(off, rec), msg))
        }
    }
    /// Damage nothing can be read past.
    pub fn fatal(&self, off: u64, rec: Option<u64>, msg: String) -> Error {
        Error::format(self.pos(off, rec), msg)
    }
}

fn section_name(ty: i32) -> &'static str {
    match ty {
        TOC_INDOMS => "INDOMS",
        TOC_INSTANCES => "INSTANCES",
        TOC_METRICS => "METRICS",
        TOC_VALUES => "VALUES",
        TOC_STRINGS => "STRINGS",
        TOC_LABELS => "LABELS",
        _ => "unknown",
    }
}

/// Parse the header only (magic, version, byte order): shared by the dump.
pub fn parse_header(b: Bytes<'_>, file: &Path) -> Result<DiskHeader> {
    let pos = |off| Position::at(file, off, None);
    if b.len() < HDR_SIZE {
        return Err(Error::format(
            pos(b.len()),
            format!(
                "truncated MMV header: the file has {} bytes, a header needs {HDR_SIZE}",
                b.len()
            ),
        ));
    }
    let magic = b.slice(0, 4).unwrap_or_default();
    if magic != MAGIC {
        return Err(Error::format(
            pos(0),
            format!("bad MMV magic {magic:02x?} (expected \"MMV\\0\")"),
        ));
    }
    let version = b.i32(4).unwrap_or(0);
    if !(1..=3).contains(&version) {
        let swapped = version.swap_bytes();
        let msg = if (1..=3).contains(&swapped) {
            format!(
                "MMV file written in the other byte order (version word {:#010x} is version {swapped} byte-swapped): MMV files are in the producer's host byte order and this {} host cannot read it",
                version as u32,
                if cfg!(target_endian = "little") { "little-endian" } else { "big-endian" }
            )
        } else {
            format!("unsupported MMV version {version} (1, 2 and 3 are known)")
        };
        return Err(Error::format(pos(4), msg));
    }
    Ok(DiskHeader {
        version,
        g1: b.u64(8).unwrap_or(0),
        g2: b.u64(16).unwrap_or(0),
        tocs: b.i32(24).unwrap_or(0),
        flags: b.u32(28).unwrap_or(0),
        process: b.i32(32).unwrap_or(0),
        cluster: b.i32(36).unwrap_or(0),
    })
}

/// Parse a whole MMV file. Without salvage any inconsistency is a positioned
/// error; with salvage bad entries are skipped and recorded in `diags`.
pub fn parse(
    data: &[u8],
    file: &Path,
    salvage: bool,
    diags: &mut Vec<Diagnostic>,
) -> Result<MmvFile> {
    let b = Bytes(data);
    let hdr = parse_header(b, file)?;
    let mut cx = Ctx {
        file: file.to_path_buf(),
        salvage,
        diags,
    };
    if hdr.g1 == 0 || hdr.g1 != hdr.g2 {
        cx.bad(
            8,
            None,
            format!(
                "MMV file is still being written (generation g1={} g2={}; the PMDA ignores it until g1 = g2 != 0)",
                hdr.g1, hdr.g2
            ),
        )?;
    }
    let version = hdr.version;
    let mut f = MmvFile {
        size: b.len(),
        ..MmvFile::default()
    };
    // The TOC: it must fit, and have at least METRICS and VALUES.
    if hdr.tocs < 2 {
        return Err(cx.fatal(
            24,
            None,
            format!("bad TOC count {} (at least 2 needed)", hdr.tocs),
        ));
    }
    let toc_end = (hdr.tocs as u64)
        .checked_mul(TOC_SIZE)
        .and_then(|n| n.checked_add(HDR_SIZE));
    let ntocs = match toc_end {
        Some(end) if end <= b.len() => hdr.tocs as u64,
        _ => {
            let fit = (b.len().saturating_sub(HDR_SIZE)) / TOC_SIZE;
            cx.bad(
                b.len(),
                None,
                format!(
                    "truncated TOC: {} entries need {} bytes, the file has {}",
                    hdr.tocs,
                    toc_end.map(|e| e.to_string()).unwrap_or("too many".into()),
                    b.len()
                ),
            )?;
            fit
        }
    };
    let first_section = HDR_SIZE + ntocs * TOC_SIZE;
    for i in 0..ntocs {
        let at = HDR_SIZE + i * TOC_SIZE;
        let ty = b.i32(at).unwrap_or(0);
        let count = b.i32(at + 4).unwrap_or(0);
        let offset = b.u64(at + 8).unwrap_or(0);
        let entsize = match ty {
            TOC_INDOMS => INDOM_SIZE,
            TOC_INSTANCES => inst_size(version),
            TOC_METRICS => metric_size(version),
            TOC_VALUES => VALUE_SIZE,
            TOC_STRINGS => STRING_SIZE,
            TOC_LABELS if version >= 3 => LABEL_SIZE,
            TOC_LABELS => {
                cx.bad(
                    at,
                    Some(i),
                    format!("TOC[{i}]: a LABELS section in a version {version} file (v3 only)"),
                )?;
                continue;
            }
            _ => {
                cx.bad(at, Some(i), format!("TOC[{i}]: unknown section type {ty}"))?;
                continue;
            }
        };
        if f.toc.iter().any(|t| t.ty == ty) {
            cx.bad(
                at,
                Some(i),
                format!("TOC[{i}]: second {} section", section_name(ty)),
            )?;
            continue;
        }
        if count < 0 {
            cx.bad(
                at + 4,
                Some(i),
                format!("TOC[{i}]: negative {} count {count}", section_name(ty)),
            )?;
            continue;
        }
        let mut count = count;
        if count > 0 && offset < first_section {
            cx.bad(
                at + 8,
                Some(i),
                format!(
                    "TOC[{i}]: {} section offset {offset} lies inside the header/TOC (first section byte is {first_section})",
                    section_name(ty)
                ),
            )?;
            continue;
        }
        let end = (count as u64)
            .checked_mul(entsize)
            .and_then(|n| n.checked_add(offset));
        if end.is_none_or(|e| e > b.len()) {
            let fit = if offset > b.len() {
                0
            } else {
                ((b.len() - offset) / entsize).min(count as u64)
            };
            cx.bad(
                at + 8,
                Some(i),
                format!(
                    "TOC[{i}]: {} section of {count} entries of {entsize} bytes at offset {offset} does not fit in the file ({} bytes)",
                    section_name(ty),
                    b.len()
                ),
            )?;
            count = fit as i32;
        }
        f.toc.push(Toc { ty, count, offset });
    }
    for ty in [TOC_METRICS, TOC_VALUES] {
        if f.section(ty).is_none() {
            cx.bad(
                24,
                None,
                format!("no {} section in the TOC", section_name(ty)),
            )?;
        }
    }

    // STRINGS first: other sections refer to it.
    if let Some(t) = f.section(TOC_STRINGS).cloned() {
        for k in 0..t.count as u64 {
            let off = t.offset + k * STRING_SIZE;
            let s = b.cstr(off, STRINGMAX).to_vec();
            f.string_at.insert(off, f.strings.len());
            f.strings.push((off, s));
        }
    }
    let string_ref = |f: &MmvFile, cx: &mut Ctx, at: u64, rec: u64, off: u64, what: &str| {
        if off == 0 {
            return Ok(None);
        }
        match f.string(off) {
            Some(s) => Ok(Some(s.to_vec())),
            None => cx
                .bad(
                    at,
                    Some(rec),
                    format!("{what}: offset {off} is not a STRINGS entry"),
                )
                .map(|_| None),
        }
    };

    if let Some(t) = f.section(TOC_INDOMS).cloned() {
        for k in 0..t.count as u64 {
            let off = t.offset + k * INDOM_SIZE;
            let d = DiskIndom {
                off,
                serial: b.u32(off).unwrap_or(0),
                count: b.u32(off + 4).unwrap_or(0),
                first: b.u64(off + 8).unwrap_or(0),
                short: b.u64(off + 16).unwrap_or(0),
                long: b.u64(off + 24).unwrap_or(0),
            };
            let mut ok = true;
            for (fo, so, what) in [(16, d.short, "short help"), (24, d.long, "long help")] {
                if so != 0 && f.string(so).is_none() {
                    ok = false;
                    cx.bad(
                        off + fo,
                        Some(k),
                        format!(
                            "indom {} {what}: offset {so} is not a STRINGS entry",
                            d.serial
                        ),
                    )?;
                }
            }
            if f.indoms.iter().any(|x| x.serial == d.serial) {
                ok = false;
                cx.bad(off, Some(k), format!("duplicate indom serial {}", d.serial))?;
            }
            if ok {
                f.indom_at.insert(off, f.indoms.len());
                f.indoms.push(d);
            }
        }
    }

    if let Some(t) = f.section(TOC_INSTANCES).cloned() {
        let isz = inst_size(version);
        for k in 0..t.count as u64 {
            let off = t.offset + k * isz;
            let indom = b.u64(off).unwrap_or(0);
            let (name, name_off) = if version == 1 {
                (b.cstr(off + 16, NAMEMAX).to_vec(), 0)
            } else {
                let no = b.u64(off + 16).unwrap_or(0);
                match f.string(no) {
                    Some(s) => (s.to_vec(), no),
                    None => {
                        cx.bad(
                            off + 16,
                            Some(k),
                            format!("instance {k}: name offset {no} is not a STRINGS entry"),
                        )?;
                        continue;
                    }
                }
            };
            if !f.indom_at.contains_key(&indom) {
                cx.bad(
                    off,
                    Some(k),
                    format!("instance {k}: indom offset {indom} is not an INDOMS entry"),
                )?;
                continue;
            }
            f.inst_at.insert(off, f.insts.len());
            f.insts.push(DiskInst {
                off,
                indom,
                pad: b.u32(off + 8).unwrap_or(0),
                internal: b.i32(off + 12).unwrap_or(0),
                name,
                name_off,
            });
        }
    }
    // Each indom's instance run must lie in INSTANCES and belong to it.
    {
        let isz = inst_size(version);
        let mut keep = Vec::new();
        for (k, d) in f.indoms.iter().enumerate() {
            let mut ok = true;
            for j in 0..d.count as u64 {
                let io = d.first.wrapping_add(j * isz);
                match f.inst_at.get(&io).and_then(|&i| f.insts.get(i)) {
                    Some(inst) if inst.indom == d.off => {}
                    _ => {
                        ok = false;
                        break;
                    }
                }
            }
            if !ok {
                cx.bad(
                    d.off + 8,
                    Some(k as u64),
                    format!(
                        "indom {}: {} instances from offset {} are not its INSTANCES entries",
                        d.serial, d.count, d.first
                    ),
                )?;
            }
            keep.push(ok);
        }
        if keep.iter().any(|k| !k) {
            let mut it = keep.iter();
            f.indoms.retain(|_| *it.next().unwrap_or(&true));
            f.indom_at = f
                .indoms
                .iter()
                .enumerate()
                .map(|(i, d)| (d.off, i))
                .collect();
            let live: std::collections::HashSet<u64> = f.indoms.iter().map(|d| d.off).collect();
            f.insts.retain(|i| live.contains(&i.indom));
            f.inst_at = f
                .insts
                .iter()
                .enumerate()
                .map(|(i, d)| (d.off, i))
                .collect();
        }
    }

    if let Some(t) = f.section(TOC_METRICS).cloned() {
        let msz = metric_size(version);
        for k in 0..t.count as u64 {
            let off = t.offset + k * msz;
            let base = if version == 1 { off + 64 } else { off + 8 };
            let (name, name_off) = if version == 1 {
                let n = b.cstr(off, NAMEMAX);
                if n.len() >= NAMEMAX {
                    cx.bad(off, Some(k), format!("metric {k}: name not NUL-terminated"))?;
                }
                (n[..n.len().min(NAMEMAX - 1)].to_vec(), 0)
            } else {
                let no = b.u64(off).unwrap_or(0);
                match f.string(no) {
                    Some(s) => (s.to_vec(), no),
                    None => {
                        cx.bad(
                            off,
                            Some(k),
                            format!("metric {k}: name offset {no} is not a STRINGS entry"),
                        )?;
                        continue;
                    }
                }
            };
            let m = DiskMetric {
                off,
                name,
                name_off,
                item: b.u32(base).unwrap_or(0),
                mtype: b.i32(base + 4).unwrap_or(0),
                sem: b.i32(base + 8).unwrap_or(0),
                dim: b.u32(base + 12).unwrap_or(0),
                indom: b.i32(base + 16).unwrap_or(0),
                pad: b.u32(base + 20).unwrap_or(0),
                short: b.u64(base + 24).unwrap_or(0),
                long: b.u64(base + 32).unwrap_or(0),
            };
            let what = format!("metric {}", String::from_utf8_lossy(&m.name));
            if string_ref(
                &f,
                &mut cx,
                base + 24,
                k,
                m.short,
                &format!("{what} short help"),
            )?
            .is_none()
                && m.short != 0
            {
                continue;
            }
            if string_ref(
                &f,
                &mut cx,
                base + 32,
                k,
                m.long,
                &format!("{what} long help"),
            )?
            .is_none()
                && m.long != 0
            {
                continue;
            }
            if m.has_indom() && !f.indoms.iter().any(|d| d.serial == m.indom as u32) {
                cx.bad(
                    base + 16,
                    Some(k),
                    format!("{what}: indom serial {} is not in INDOMS", m.indom),
                )?;
                continue;
            }
            f.metric_at.insert(off, f.metrics.len());
            f.metrics.push(m);
        }
    }

    if let Some(t) = f.section(TOC_VALUES).cloned() {
        for k in 0..t.count as u64 {
            let off = t.offset + k * VALUE_SIZE;
            let v = DiskValue {
                off,
                raw: b.u64(off).unwrap_or(0),
                extra: b.i64(off + 8).unwrap_or(0),
                metric: b.u64(off + 16).unwrap_or(0),
                inst: b.u64(off + 24).unwrap_or(0),
            };
            let Some(m) = f.metric_at.get(&v.metric).and_then(|&i| f.metrics.get(i)) else {
                cx.bad(
                    off + 16,
                    Some(k),
                    format!(
                        "value {k}: metric offset {} is not a METRICS entry",
                        v.metric
                    ),
                )?;
                continue;
            };
            if m.has_indom() {
                let ok = f
                    .inst_at
                    .get(&v.inst)
                    .and_then(|&i| f.insts.get(i))
                    .and_then(|i| f.indom_at.get(&i.indom))
                    .and_then(|&d| f.indoms.get(d))
                    .is_some_and(|d| d.serial == m.indom as u32);
                if !ok {
                    cx.bad(
                        off + 24,
                        Some(k),
                        format!(
                            "value {k}: instance offset {} is not an INSTANCES entry of indom {}",
                            v.inst, m.indom
                        ),
                    )?;
                    continue;
                }
            }
            if m.mtype == TYPE_STRING && f.string(v.extra as u64).is_none() {
                cx.bad(
                    off + 8,
                    Some(k),
                    format!(
                        "value {k}: string offset {} is not a STRINGS entry",
                        v.extra
                    ),
                )?;
                continue;
            }
            f.values.push(v);
        }
    }

    if let Some(t) = f.section(TOC_LABELS).cloned() {
        for k in 0..t.count as u64 {
            let off = t.offset + k * LABEL_SIZE;
            let payload = b.cstr(off + 12, LABELMAX);
            if payload.len() >= LABELMAX {
                cx.bad(
                    off + 12,
                    Some(k),
                    format!("label {k}: payload not NUL-terminated"),
                )?;
                continue;
            }
            f.labels.push(DiskLabel {
                off,
                flags: b.u32(off).unwrap_or(0),
                identity: b.u32(off + 4).unwrap_or(0),
                internal: b.i32(off + 8).unwrap_or(0),
                payload: payload.to_vec(),
            });
        }
    }
    f.header = Some(hdr);
    Ok(f)
}
