//! Opening a trace directory and walking its tracefiles block by block
//! (spec 5.1, 5.3–5.7), merged by time for the listing and for conversion.

use super::eventdefs::{self, Facility, Ty};
use super::layout::{self, Bo, FRAME, HDR, ID_BLOCK_END, ID_BLOCK_START, ID_HEARTBEAT};
use super::system::{self, SystemInfo};
use super::{keys, paths};
use crate::error::{Diagnostic, Error, Position, Result};
use crate::input::map::Bytes;
use crate::model::{EventType, ExtraValue, Extras, Field, FormatId, Header};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Which trailer convention located block_end (spec 5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trailer {
    /// block_end at B − T (era A, the sample, our writer).
    EraA,
    /// block_end at B − 4 − T − 26 (era B).
    EraB,
    /// block_end at T (the design text read literally).
    Literal,
}

/// One known event id.
#[derive(Debug, Clone)]
pub struct EvInfo {
    pub id: u16,
    /// Index into `Trace::facilities`; None for uncovered builtins.
    pub fac: Option<usize>,
    pub facility: String,
    pub name: String,
    pub description: Option<String>,
    pub ty: Option<Ty>,
    /// The payload's size when the type has a fixed one (no strings or
    /// sequences): the walk steps over it without visiting its fields.
    pub size: Option<usize>,
    /// The field types when the payload is only plain numbers
    /// (`layout::scalar_fields`).
    pub scalars: Option<Vec<Ty>>,
    pub builtin: bool,
}

/// A tracefile and its place in the merge order.
#[derive(Debug, Clone)]
pub struct TraceFile {
    /// Relative path, `cpu/0`, `control/facilities`.
    pub rel: String,
    pub path: PathBuf,
    pub len: u64,
    pub cpu: Option<u32>,
}

/// Everything known about a trace before its events are read.
pub struct Trace {
    pub dir: PathBuf,
    pub sys: SystemInfo,
    pub bo: Bo,
    pub facilities: Vec<Facility>,
    pub bases: Vec<Option<u32>>,
    pub events: Vec<EvInfo>,
    /// id → index into `events`, u32::MAX when unknown; as long as the
    /// largest known id needs (a full 65,536-entry table is 256 KB to fill
    /// at every open), ids past its end are unknown.
    pub table: Vec<u32>,
    pub files: Vec<TraceFile>,
    pub eventdefs_raw: Vec<(String, Vec<u8>)>,
    pub bookmarks: Option<Vec<u8>>,
    pub diags: Vec<Diagnostic>,
    /// `--salvage`: decode the whole events of a trailing partial block
    /// instead of refusing the trace.
    pub salvage: bool,
}

const NONE: u32 = u32::MAX;
/// Metadata files (XML) larger than this are refused rather than read.
const MAX_META: u64 = 64 << 20;

fn fmt_err(file: &Path, offset: Option<u64>, msg: impl Into<String>) -> Error {
    Error::format(
        Position {
            file: file.to_path_buf(),
            offset,
            record: None,
        },
        msg,
    )
}

fn read_meta(path: &Path) -> Result<Vec<u8>> {
    let md = std::fs::symlink_metadata(path).map_err(|e| Error::io(path, e))?;
    if !md.file_type().is_file() {
        return Err(fmt_err(
            path,
            None,
            "not a regular file (symlinks are refused)",
        ));
    }
    if md.len() > MAX_META {
        return Err(fmt_err(path, None, "file too large for a metadata file"));
    }
    std::fs::read(path).map_err(|e| Error::io(path, e))
}

/// Regular files (not symlinks) directly in `dir`, sorted by name, with a
/// warning for anything skipped.
fn list_dir(dir: &Path, diags: &mut Vec<Diagnostic>) -> Vec<(String, PathBuf, u64)> {
    let mut out = Vec::new();
    let Ok(md) = std::fs::symlink_metadata(dir) else {
        return out;
    };
    if !md.file_type().is_dir() {
        diags.push(Diagnostic::warning(
            Position::new(dir),
            "not a directory (symlinks are not followed); ignored",
        ));
        return out;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(name) = e.file_name().into_string() else {
            diags.push(Diagnostic::warning(
                Position::new(e.path()),
                "file name is not UTF-8; ignored",
            ));
            continue;
        };
        match e.file_type() {
            Ok(t) if t.is_file() => {
                let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                out.push((name, e.path(), len));
            }
            _ => diags.push(Diagnostic::warning(
                Position::new(e.path()),
                "not a regular file (symlinks are not followed); ignored",
            )),
        }
    }
    out.sort();
    out
}

/// The layout of a type as a run of fixed-size pieces and strings, for
/// checking that a facility's builtin event matches the builtin layout.
fn leaves(t: &Ty, out: &mut Vec<Option<usize>>) -> bool {
    match t {
        Ty::Str => out.push(None),
        Ty::Seq { .. } | Ty::Union { .. } => return false,
        Ty::Struct(f) => return f.iter().all(|(_, t)| leaves(t, out)),
        Ty::Array { len, elem } if elem.fixed_size().is_none() => {
            for _ in 0..(*len).min(64) {
                if !leaves(elem, out) {
                    return false;
                }
            }
            return *len <= 64;
        }
        t => {
            let n = t.fixed_size().unwrap_or(0);
            if let Some(Some(prev)) = out.last_mut() {
                *prev += n;
            } else {
                out.push(Some(n));
            }
        }
    }
    true
}

fn same_layout(a: &Ty, b: &Ty) -> bool {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    leaves(a, &mut x) && leaves(b, &mut y) && x == y
}

impl Trace {
    /// Open strictly: a cut tracefile is an error.
    pub fn open(dir: &Path) -> Result<Trace> {
        Trace::open_with(dir, false)
    }

    /// Open; with `salvage`, a trailing partial block is damage that is
    /// decoded as far as it goes (a salvaged diagnostic) instead of an error.
    pub fn open_with(dir: &Path, salvage: bool) -> Result<Trace> {
        let mut diags = Vec::new();
        let info_dir = dir.join("info");
        if !std::fs::symlink_metadata(&info_dir).is_ok_and(|m| m.file_type().is_dir()) {
            return Err(fmt_err(
                &info_dir,
                None,
                "missing info/ directory (symlinks are not followed)",
            ));
        }
        let sys_path = dir.join("info/system.xml");
        if std::fs::symlink_metadata(&sys_path).is_err() {
            return Err(fmt_err(&sys_path, None, "missing info/system.xml"));
        }
        let sys_raw = read_meta(&sys_path)?;
        let sys =
            system::parse(&sys_raw).map_err(|(o, m)| fmt_err(&sys_path, Some(o as u64), m))?;
        let bo = Bo {
            big: sys.big_endian,
        };
        let bookmarks_path = dir.join("info/bookmarks.xml");
        let bookmarks = if std::fs::symlink_metadata(&bookmarks_path).is_ok() {
            let b = read_meta(&bookmarks_path)?;
            system::check_bookmarks(&b)
                .map_err(|(o, m)| fmt_err(&bookmarks_path, Some(o as u64), m))?;
            Some(b)
        } else {
            None
        };
        for (name, path, _) in list_dir(&dir.join("info"), &mut diags) {
            if name != "system.xml" && name != "bookmarks.xml" {
                diags.push(Diagnostic::warning(
                    Position::new(path),
                    "unknown file ignored",
                ));
            }
        }

        // Event definitions, in (file name, position in file) order.
        let mut facilities = Vec::new();
        let mut eventdefs_raw = Vec::new();
        for (name, path, _) in list_dir(&dir.join("eventdefs"), &mut diags) {
            if !name.to_ascii_lowercase().ends_with(".xml") {
                diags.push(Diagnostic::warning(
                    Position::new(path),
                    "not an .xml file; ignored",
                ));
                continue;
            }
            let raw = read_meta(&path)?;
            let fs = eventdefs::parse_file(&raw, &name)
                .map_err(|e| fmt_err(&path, Some(e.offset as u64), e.msg))?;
            facilities.extend(fs);
            eventdefs_raw.push((name, raw));
        }

        // Tracefiles: control files by rank, then cpu files by number.
        let mut files = Vec::new();
        let mut control = list_dir(&dir.join("control"), &mut diags);
        let rank = |n: &str| match n {
            "facilities" => 0,
            "interrupts" => 1,
            "processes" => 2,
            _ => 3,
        };
        control.sort_by(|a, b| (rank(&a.0), &a.0).cmp(&(rank(&b.0), &b.0)));
        for (name, path, len) in control {
            files.push(TraceFile {
                rel: format!("control/{name}"),
                path,
                len,
                cpu: None,
            });
        }
        let mut cpus = Vec::new();
        for (name, path, len) in list_dir(&dir.join("cpu"), &mut diags) {
            match paths::canonical_cpu(&name) {
                Some(n) => {
                    if sys.cpu.is_some_and(|c| n >= c) {
                        diags.push(Diagnostic::warning(
                            Position::new(&path),
                            format!(
                                "cpu {n} is not below system.xml cpu={}",
                                sys.cpu.unwrap_or(0)
                            ),
                        ));
                    }
                    cpus.push((n, name, path, len));
                }
                None => diags.push(Diagnostic::warning(
                    Position::new(path),
                    "cpu file name is not a canonical decimal number; ignored",
                )),
            }
        }
        cpus.sort();
        for (n, name, path, len) in cpus {
            files.push(TraceFile {
                rel: format!("cpu/{name}"),
                path,
                len,
                cpu: Some(n),
            });
        }
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                let n = e.file_name();
                let known = ["info", "eventdefs", "control", "cpu"];
                if !known.iter().any(|k| n == *k) {
                    diags.push(Diagnostic::warning(
                        Position::new(e.path()),
                        "unknown entry ignored",
                    ));
                }
            }
        }
        // A tracefile is whole blocks: anything else is a cut or a damaged
        // block size, and the format can tell (issue 16, cases 2 and 3).
        for f in &files {
            let b = sys.block_size;
            let part = f.len % b;
            if part == 0 {
                continue;
            }
            let at = f.len - part;
            let msg = if f.len < b {
                format!(
                    "tracefile of {} bytes is shorter than one block (ltt_block_size {b} in \
                     info/system.xml): cut file or damaged block size",
                    f.len
                )
            } else {
                format!(
                    "trailing partial block: {part} bytes after {} whole blocks of {b} (cut file)",
                    f.len / b
                )
            };
            if !salvage {
                return Err(fmt_err(
                    &f.path,
                    Some(at),
                    format!("{msg}; --salvage keeps the events it holds"),
                ));
            }
            diags.push(Diagnostic::salvaged(
                Position::at(&f.path, at, Some(f.len / b)),
                format!("{msg}; its whole events are kept"),
            ));
        }

        let mut t = Trace {
            dir: dir.to_path_buf(),
            sys,
            bo,
            bases: vec![None; facilities.len()],
            facilities,
            events: Vec::new(),
            table: Vec::new(),
            files,
            eventdefs_raw,
            bookmarks,
            diags,
            salvage,
        };
        // Builtins first, so control/facilities can be walked.
        t.set_builtins_flat();
        let loads = t.read_facility_loads();
        t.assign_bases(&loads);
        t.build_table()?;
        Ok(t)
    }

    fn set_builtins_flat(&mut self) {
        self.events.clear();
        self.table.clear();
        for id in [0u16, 17, 18, 19] {
            self.push_builtin(id);
        }
    }

    fn push_builtin(&mut self, id: u16) {
        Self::set_index(&mut self.table, id, self.events.len() as u32);
        self.events.push(EvInfo {
            id,
            fac: None,
            facility: "builtin".into(),
            name: layout::builtin_name(id).unwrap_or("").into(),
            description: None,
            size: layout::builtin_type(id).and_then(|t| t.fixed_size()),
            scalars: layout::builtin_type(id).and_then(|t| layout::scalar_fields(&t)),
            ty: layout::builtin_type(id),
            builtin: true,
        });
    }

    /// facility_load events of control/facilities: (name, checksum, base).
    fn read_facility_loads(&mut self) -> Vec<(String, u32, u32)> {
        let mut out = Vec::new();
        let Some(idx) = self
            .files
            .iter()
            .position(|f| f.rel == "control/facilities")
        else {
            return out;
        };
        let mut diags = Vec::new();
        let mut cur = Cursor::new(self, idx);
        while let Some(ev) = cur.next(self, &mut diags) {
            if ev.id != layout::ID_FACILITY_LOAD {
                continue;
            }
            let p = &cur.buf[ev.start..ev.end];
            let Some(nul) = p.iter().position(|&c| c == 0) else {
                continue;
            };
            let name = String::from_utf8_lossy(&p[..nul]).into_owned();
            let (Some(ck), Some(base)) = (self.bo.u32(p, nul + 1), self.bo.u32(p, nul + 5)) else {
                continue;
            };
            out.push((name, ck, base));
        }
        self.diags.extend(diags);
        out
    }

    fn assign_bases(&mut self, loads: &[(String, u32, u32)]) {
        let fpath = self.dir.join("control/facilities");
        for (name, ck, base) in loads {
            let exact = self
                .facilities
                .iter()
                .position(|f| &f.name == name && f.checksum == *ck);
            let pick = exact.or_else(|| {
                let same: Vec<usize> = (0..self.facilities.len())
                    .filter(|&i| &self.facilities[i].name == name)
                    .collect();
                if same.len() == 1 {
                    self.diags.push(Diagnostic::warning(
                        Position::new(&fpath),
                        format!(
                            "facility_load {name} checksum {ck:#010x} does not match eventdefs \
                             ({:#010x}); matched by name",
                            self.facilities[same[0]].checksum
                        ),
                    ));
                    Some(same[0])
                } else {
                    None
                }
            });
            match pick {
                Some(i) if self.bases[i].is_none() => self.bases[i] = Some(*base),
                Some(_) => self.diags.push(Diagnostic::warning(
                    Position::new(&fpath),
                    format!("facility {name} {ck:#010x} loaded twice; first load kept"),
                )),
                None => self.diags.push(Diagnostic::warning(
                    Position::new(&fpath),
                    format!("facility_load {name} {ck:#010x} matches no eventdefs facility"),
                )),
            }
        }
        if self.bases.iter().all(Option::is_none) && !self.facilities.is_empty() {
            if self.facilities.len() > 1 {
                self.diags.push(Diagnostic::warning(
                    Position::new(self.dir.join("eventdefs")),
                    "no facility_load: facilities given consecutive base codes from 0 in file order",
                ));
            }
            let mut next = 0u32;
            for (i, f) in self.facilities.iter().enumerate() {
                self.bases[i] = Some(next);
                next = next.saturating_add(f.events.len() as u32);
            }
        } else {
            for (i, f) in self.facilities.iter().enumerate() {
                if self.bases[i].is_none() {
                    self.diags.push(Diagnostic::warning(
                        Position::new(self.dir.join("eventdefs").join(&f.file)),
                        format!(
                            "facility {} is never loaded; its events are unknown",
                            f.name
                        ),
                    ));
                }
            }
        }
    }

    fn build_table(&mut self) -> Result<()> {
        self.events.clear();
        self.table.clear();
        let arch = self.sys.arch;
        for (fi, f) in self.facilities.iter().enumerate() {
            let Some(base) = self.bases[fi] else { continue };
            let fpath = self.dir.join("eventdefs").join(&f.file);
            for (i, ev) in f.events.iter().enumerate() {
                let id = base as u64 + i as u64;
                if id > 65535 {
                    self.diags.push(Diagnostic::warning(
                        Position::new(&fpath),
                        format!("facility {} runs past id 65535; rest ignored", f.name),
                    ));
                    break;
                }
                let id = id as u16;
                if self.index_of(id) != NONE {
                    self.diags.push(Diagnostic::warning(
                        Position::new(&fpath),
                        format!(
                            "event id {id} of {}.{} already taken; ignored",
                            f.name, ev.name
                        ),
                    ));
                    continue;
                }
                let mut ty = match &ev.payload {
                    Some(p) => Some(eventdefs::resolve(f, p, arch).map_err(|m| {
                        fmt_err(&fpath, None, format!("{}.{}: {m}", f.name, ev.name))
                    })?),
                    None => None,
                };
                let builtin = layout::builtin_name(id).is_some();
                if let Some(bn) = layout::builtin_name(id) {
                    let flat = layout::builtin_type(id);
                    if ev.name != bn {
                        self.diags.push(Diagnostic::warning(
                            Position::new(&fpath),
                            format!(
                                "{}.{} sits on builtin id {id} ({bn}); the builtin wins",
                                f.name, ev.name
                            ),
                        ));
                        continue;
                    }
                    let ok = match (&ty, &flat) {
                        (Some(a), Some(b)) => same_layout(a, b),
                        _ => false,
                    };
                    if !ok {
                        self.diags.push(Diagnostic::warning(
                            Position::new(&fpath),
                            format!(
                                "{}.{} does not have the builtin layout; printed flat",
                                f.name, ev.name
                            ),
                        ));
                        ty = flat;
                    }
                }
                Self::set_index(&mut self.table, id, self.events.len() as u32);
                self.events.push(EvInfo {
                    id,
                    fac: Some(fi),
                    facility: f.name.clone(),
                    name: ev.name.clone(),
                    description: ev.description.clone(),
                    size: ty.as_ref().and_then(Ty::fixed_size),
                    scalars: ty.as_ref().and_then(layout::scalar_fields),
                    ty,
                    builtin,
                });
            }
        }
        for id in [0u16, 17, 18, 19] {
            if self.index_of(id) == NONE {
                self.push_builtin(id);
            }
        }
        Ok(())
    }

    fn index_of(&self, id: u16) -> u32 {
        self.table.get(id as usize).copied().unwrap_or(NONE)
    }

    fn set_index(table: &mut Vec<u32>, id: u16, i: u32) {
        let at = id as usize;
        if table.len() <= at {
            table.resize(at + 1, NONE);
        }
        table[at] = i;
    }

    pub fn info(&self, id: u16) -> Option<&EvInfo> {
        let i = *self.table.get(id as usize)?;
        self.events.get(i as usize)
    }

    /// The stream header.
    pub fn header(&self) -> Header {
        let maj = self.sys.get("ltt_major_version").unwrap_or("?");
        let min = self.sys.get("ltt_minor_version").unwrap_or("?");
        let mut h = Header::new(FormatId::Ltt, format!("{maj}.{min}"));
        h.host = self.sys.get("node_name").map(str::to_string);
        h.system = self.sys.attrs.clone();
        let mut x = Extras::default();
        // Events keep the reconstructed cycle counter as raw clock.
        x.set(
            crate::model::keys::RAW_CLOCK,
            ExtraValue::Str(crate::model::keys::CLOCK_LTT.into()),
        );
        x.set(keys::BLOCK_SIZE, ExtraValue::U64(self.sys.block_size));
        x.set(keys::ARCH, ExtraValue::Str(self.sys.arch.name().into()));
        x.set(
            keys::ENDIAN,
            ExtraValue::Str(
                if self.bo.big {
                    "BIG_ENDIAN"
                } else {
                    "LITTLE_ENDIAN"
                }
                .into(),
            ),
        );
        x.set(
            keys::DESCRIPTION,
            ExtraValue::Str(self.sys.description.clone()),
        );
        x.set(
            keys::EVENTDEFS,
            ExtraValue::List(
                self.eventdefs_raw
                    .iter()
                    .map(|(n, b)| {
                        ExtraValue::List(vec![
                            ExtraValue::Str(n.clone()),
                            ExtraValue::Bytes(b.clone()),
                        ])
                    })
                    .collect(),
            ),
        );
        x.set(
            keys::FACILITIES,
            ExtraValue::List(
                self.facilities
                    .iter()
                    .zip(&self.bases)
                    .map(|(f, b)| {
                        ExtraValue::List(vec![
                            ExtraValue::Str(f.name.clone()),
                            ExtraValue::U64(f.checksum as u64),
                            match b {
                                Some(b) => ExtraValue::U64(*b as u64),
                                None => ExtraValue::Str("unloaded".into()),
                            },
                            ExtraValue::Str(f.file.clone()),
                        ])
                    })
                    .collect(),
            ),
        );
        if let Some(b) = &self.bookmarks {
            x.set(keys::BOOKMARKS, ExtraValue::Bytes(b.clone()));
        }
        h.extras = x;
        h
    }

    /// One model event type per known id.
    pub fn event_types(&self) -> Vec<EventType> {
        self.events
            .iter()
            .map(|e| {
                let fields = match &e.ty {
                    Some(Ty::Struct(f)) => eventdefs::to_fields(f),
                    Some(t) => vec![Field::new("value", t.to_field_type())],
                    None => vec![],
                };
                let mut et = EventType::new(e.id as u32, &e.facility, &e.name, fields);
                et.description = e.description.clone();
                et.extras.set(keys::EVENT_ID, ExtraValue::U64(e.id as u64));
                et.extras.set(keys::BUILTIN, ExtraValue::Bool(e.builtin));
                et.framing = e.builtin;
                if let Some(fi) = e.fac {
                    et.extras.set(
                        keys::CHECKSUM,
                        ExtraValue::U64(self.facilities[fi].checksum as u64),
                    );
                }
                et
            })
            .collect()
    }

    /// Times of the earliest and latest events, from the first and last
    /// block of each tracefile only (each block carries its own time
    /// reference, so no pass over the trace is needed).
    pub fn time_span(&self) -> (Option<i64>, Option<i64>) {
        let mut diags = Vec::new();
        let (mut first, mut last): (Option<i64>, Option<i64>) = (None, None);
        for i in 0..self.files.len() {
            let mut c = Cursor::new(self, i);
            if let Some(e) = c.peek(self, &mut diags) {
                first = Some(first.map_or(e.time, |f| f.min(e.time)));
            }
            let mut c = Cursor::new(self, i);
            c.block = c.nblocks.saturating_sub(1);
            while let Some(e) = c.next(self, &mut diags) {
                last = Some(last.map_or(e.time, |l| l.max(e.time)));
            }
        }
        (first, last)
    }

    /// Cursors over every tracefile, in rank order.
    pub fn cursors(&self) -> Vec<Cursor> {
        (0..self.files.len())
            .map(|i| Cursor::new(self, i))
            .collect()
    }
}

/// One decoded event header within the current block of a cursor.
#[derive(Debug, Clone, Copy)]
pub struct RawEv {
    pub time: i64,
    pub counter: u64,
    pub id: u16,
    /// Payload range in the cursor's block buffer.
    pub start: usize,
    pub end: usize,
    /// Position in the file (merge tie-break).
    pub seq: u64,
}

/// Where the walk through the current block stands: its events are
/// decoded one at a time as they are asked for (a block of 1 MB holds some
/// 100,000 events; a table of them would be several times the block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    BlockStart,
    Events,
    BlockEnd,
    Done,
}

/// The current block's walk: its time reference and the position reached.
#[derive(Debug, Clone, Copy)]
struct Walk {
    /// Block number and its offset in the file (for positions).
    k: u64,
    off: u64,
    /// block_end's offset when `has_end`, else the end of a partial
    /// block's last whole event.
    e_off: usize,
    has_end: bool,
    t0: i64,
    t1: i64,
    c0: u64,
    c1: u64,
    /// (counts, ns) over which to interpolate.
    dc: u64,
    dt: u64,
    /// Counter of the last event, and the offset of the next one.
    cur: u64,
    p: usize,
    step: Step,
    /// No event of the block was lost so far.
    clean: bool,
}

impl Walk {
    fn interp(&self, cur: u64) -> i64 {
        if self.dc == 0 {
            return self.t0;
        }
        let n = cur - self.c0;
        // 64 bits when the product fits (always, within a block of a
        // real trace): the same quotient without a 128-bit division.
        let d = match n.checked_mul(self.dt) {
            Some(x) => (x / self.dc) as u128,
            None => n as u128 * self.dt as u128 / self.dc as u128,
        };
        i64::try_from(self.t0 as i128 + d as i128).unwrap_or(i64::MAX)
    }
}

/// The current block's bytes: a range of the tracefile mapped whole, or a
/// copy read from it.
pub enum Block {
    Copy(Vec<u8>),
    Mapped { map: Bytes, at: usize, len: usize },
}

impl std::ops::Deref for Block {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            Block::Copy(v) => v,
            Block::Mapped { map, at, len } => &map[*at..*at + *len],
        }
    }
}

/// Walks one tracefile block by block; holds one block in memory (a
/// mapped file's pages are released once their block is walked).
pub struct Cursor {
    pub file_idx: usize,
    file: Option<File>,
    nblocks: u64,
    /// Bytes of a trailing partial block to decode after the whole ones
    /// (salvage only), else 0.
    partial: u64,
    block: u64,
    /// (counts, ns) of the last whole block, to time a partial block that
    /// lost its block_end.
    rate: Option<(u64, u64)>,
    pub buf: Block,
    walk: Option<Walk>,
    /// The event `peek` returned, until `next` takes it.
    head: Option<RawEv>,
    seq: u64,
    /// Trailer conventions seen, for the mixed-convention warning.
    seen: Option<Trailer>,
    warned_mixed: bool,
}

impl Cursor {
    pub fn new(t: &Trace, idx: usize) -> Cursor {
        let f = &t.files[idx];
        let nblocks = f.len / t.sys.block_size;
        let partial = if t.salvage {
            f.len % t.sys.block_size
        } else {
            0
        };
        Cursor {
            file_idx: idx,
            file: None,
            nblocks,
            partial,
            block: 0,
            rate: None,
            buf: Block::Copy(Vec::new()),
            walk: None,
            head: None,
            seq: 0,
            seen: None,
            warned_mixed: false,
        }
    }

    /// Current event without advancing.
    #[inline]
    pub fn peek(&mut self, t: &Trace, diags: &mut Vec<Diagnostic>) -> Option<RawEv> {
        // Inline the usual case (the event is known); decoding the next one
        // is a call.
        if self.head.is_none() {
            self.fill(t, diags);
        }
        self.head
    }

    /// Decode the next event into `head`, reading blocks as needed; `head`
    /// stays None at the end of the file.
    fn fill(&mut self, t: &Trace, diags: &mut Vec<Diagnostic>) {
        loop {
            if self.step(t, diags) {
                return;
            }
            self.head = None;
            if !self.load_block(t, diags) {
                return;
            }
        }
    }

    /// [`Self::peek`] by reference.
    #[inline]
    fn peek_ref(&mut self, t: &Trace, diags: &mut Vec<Diagnostic>) -> Option<&RawEv> {
        if self.head.is_none() {
            self.fill(t, diags);
        }
        self.head.as_ref()
    }

    /// The event handed out last by [`Merge::next_index`] for this cursor.
    #[inline]
    pub fn head(&self) -> Option<&RawEv> {
        self.head.as_ref()
    }

    #[inline]
    pub fn next(&mut self, t: &Trace, diags: &mut Vec<Diagnostic>) -> Option<RawEv> {
        self.peek(t, diags);
        self.head.take()
    }

    /// Read and walk the next block; false at the end of the file.
    fn load_block(&mut self, t: &Trace, diags: &mut Vec<Diagnostic>) -> bool {
        self.walk = None;
        let last = self.block == self.nblocks && self.partial > 0;
        if self.block >= self.nblocks && !last {
            // Done with this file: give its block buffer (or map) back.
            self.buf = Block::Copy(Vec::new());
            self.file = None;
            return false;
        }
        let tf = &t.files[self.file_idx];
        // A partial block's buffer is what the file holds, never more.
        let b = if last {
            self.partial as usize
        } else {
            t.sys.block_size as usize
        };
        if last {
            self.partial = 0;
        }
        let k = self.block;
        self.block += 1;
        let off = k * t.sys.block_size;
        if self.file.is_none() {
            match File::open(&tf.path) {
                Ok(f) => {
                    // Mapped where that is safe (input::map): no block is
                    // copied, no buffer zeroed; else read block by block.
                    if let Some(m) = crate::input::map::map_file(&f, &tf.path) {
                        self.buf = Block::Mapped {
                            map: m,
                            at: 0,
                            len: 0,
                        };
                    }
                    self.file = Some(f);
                }
                Err(e) => {
                    diags.push(Diagnostic::io(
                        Position::new(&tf.path),
                        format!("cannot open: {e}"),
                        &e,
                    ));
                    self.nblocks = 0;
                    return false;
                }
            }
        }
        let rd = match &mut self.buf {
            Block::Mapped { map, at, len } => {
                map.release(*at..*at + *len);
                match usize::try_from(off + b as u64) {
                    Ok(end) if end <= map.len() => {
                        (*at, *len) = (end - b, b);
                        Ok(())
                    }
                    // Shorter than when the trace was opened.
                    _ => Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!("the file ends at byte {}", map.len()),
                    )),
                }
            }
            Block::Copy(buf) => {
                buf.resize(b, 0);
                match self.file.as_mut() {
                    Some(f) => f.seek(SeekFrom::Start(off)).and_then(|_| f.read_exact(buf)),
                    None => Ok(()),
                }
            }
        };
        if let Err(e) = rd {
            diags.push(Diagnostic::io(
                Position::at(&tf.path, off, Some(k)),
                format!("cannot read block: {e}"),
                &e,
            ));
            self.nblocks = 0;
            return false;
        }
        self.walk(t, k, off, last, diags);
        true
    }

    /// Where a partial block's block_end is, walking its events from the
    /// start; else the end of its last whole event.
    fn scan_partial(&self, t: &Trace) -> (usize, bool) {
        let (buf, bo) = (&self.buf, t.bo);
        let mut p = FRAME;
        loop {
            let Some(id) = bo.u16(buf, p) else {
                return (p, false);
            };
            if id == ID_BLOCK_END && p + FRAME <= buf.len() {
                return (p, true);
            }
            let end = match t.info(id).map(|i| &i.ty) {
                None => return (p, false),
                Some(None) => p + HDR,
                Some(Some(ty)) => match layout::skip(ty, buf, p + HDR, bo) {
                    Ok(e) => e,
                    Err(_) => return (p, false),
                },
            };
            if end > buf.len() || bo.u32(buf, p + 2).is_none() {
                return (p, false);
            }
            p = end;
        }
    }

    fn walk(&mut self, t: &Trace, k: u64, off: u64, partial: bool, diags: &mut Vec<Diagnostic>) {
        let tf = &t.files[self.file_idx];
        let bo = t.bo;
        let lost = |diags: &mut Vec<Diagnostic>, o: usize, m: String| {
            diags.push(Diagnostic::salvaged(
                Position::at(&tf.path, off + o as u64, Some(k)),
                format!("block {k} lost: {m}"),
            ));
        };
        if partial {
            if self.buf.len() < FRAME || bo.u16(&self.buf, 0) != Some(ID_BLOCK_START) {
                lost(
                    diags,
                    0,
                    "partial block does not begin with a whole block_start".into(),
                );
                return;
            }
            let (e, has_end) = self.scan_partial(t);
            return self.walk_events(t, k, off, e, has_end, diags);
        }
        let buf = &self.buf;
        let b = buf.len();
        let pos = |o: usize| Position::at(&tf.path, off + o as u64, Some(k));
        let trailer = bo.u32(buf, b - 4).unwrap_or(0) as usize;
        let ok =
            |e: usize| e >= FRAME && e + FRAME <= b - 4 && bo.u16(buf, e) == Some(ID_BLOCK_END);
        let cands = [
            (b.checked_sub(trailer), Trailer::EraA),
            (
                (b - 4)
                    .checked_sub(trailer)
                    .and_then(|x| x.checked_sub(FRAME)),
                Trailer::EraB,
            ),
            (Some(trailer), Trailer::Literal),
        ];
        let Some((e_off, conv)) = cands
            .iter()
            .find_map(|(e, c)| e.filter(|&e| ok(e)).map(|e| (e, *c)))
        else {
            lost(
                diags,
                b - 4,
                format!("trailer {trailer} matches no convention"),
            );
            return;
        };
        if let Some(s) = self.seen {
            if s != conv && !self.warned_mixed {
                self.warned_mixed = true;
                diags.push(Diagnostic::warning(
                    pos(b - 4),
                    "trailer conventions are mixed in this file",
                ));
            }
        }
        self.seen = Some(conv);
        if bo.u16(buf, 0) != Some(ID_BLOCK_START) {
            lost(diags, 0, "does not begin with block_start".into());
            return;
        }
        self.walk_events(t, k, off, e_off, true, diags);
    }

    /// Check the block's time reference and start the walk over the events
    /// between block_start and `e_off` (block_end's offset when `has_end`,
    /// else the end of a partial block's last whole event); `step` decodes
    /// them one by one.
    fn walk_events(
        &mut self,
        t: &Trace,
        k: u64,
        off: u64,
        e_off: usize,
        has_end: bool,
        diags: &mut Vec<Diagnostic>,
    ) {
        let tf = &t.files[self.file_idx];
        let bo = t.bo;
        let buf = &self.buf;
        let pos = |o: usize| Position::at(&tf.path, off + o as u64, Some(k));
        let lost = |diags: &mut Vec<Diagnostic>, o: usize, m: String| {
            diags.push(Diagnostic::salvaged(pos(o), format!("block {k} lost: {m}")));
        };
        let stamp = |at: usize| -> (u32, u32, u64, u32) {
            (
                bo.u32(buf, at).unwrap_or(0),
                bo.u32(buf, at + 4).unwrap_or(0),
                bo.u64(buf, at + 8).unwrap_or(0),
                bo.u32(buf, at + 16).unwrap_or(0),
            )
        };
        let (s0, n0, c0, id0) = stamp(HDR);
        let (s1, n1, c1, id1) = if has_end {
            stamp(e_off + HDR)
        } else {
            (s0, n0, c0, id0)
        };
        if n0 >= 1_000_000_000 || n1 >= 1_000_000_000 {
            lost(diags, HDR, "nanoseconds field >= 1e9".into());
            return;
        }
        let t0 = s0 as i64 * 1_000_000_000 + n0 as i64;
        let t1 = s1 as i64 * 1_000_000_000 + n1 as i64;
        if c1 < c0 {
            lost(
                diags,
                e_off,
                format!("block_end counter {c1} < block_start counter {c0}"),
            );
            return;
        }
        if t1 < t0 {
            lost(
                diags,
                e_off,
                "block_end time before block_start time".into(),
            );
            return;
        }
        if id0 != id1 {
            diags.push(Diagnostic::warning(
                pos(e_off),
                format!("block ids differ: {id0} vs {id1}"),
            ));
        }
        // (counts, ns) over which to interpolate. A partial block without
        // its block_end borrows the rate of the file's last whole block, or
        // takes one count per nanosecond (what this writer writes).
        let (dc, dt) = if has_end {
            (c1 - c0, (t1 - t0) as u64)
        } else {
            let r = self.rate.unwrap_or((1, 1));
            diags.push(Diagnostic::salvaged(
                pos(e_off),
                format!(
                    "partial block {k} has no block_end: times from {}",
                    if self.rate.is_some() {
                        "the rate of the block before"
                    } else {
                        "an assumed rate of one count per nanosecond"
                    }
                ),
            ));
            r
        };
        if has_end && dc > 0 {
            self.rate = Some((dc, dt));
        }
        self.walk = Some(Walk {
            k,
            off,
            e_off,
            has_end,
            t0,
            t1,
            c0,
            c1,
            dc,
            dt,
            cur: c0,
            p: FRAME,
            step: Step::BlockStart,
            clean: true,
        });
    }

    /// The next event of the current block (block_start, its events,
    /// block_end) into `head`; false when the block is done. Written in
    /// place, field by field: `head` is read right after, and a whole
    /// struct copied out of a return value stalls on its fresh stores.
    fn step(&mut self, t: &Trace, diags: &mut Vec<Diagnostic>) -> bool {
        let tf = &t.files[self.file_idx];
        let bo = t.bo;
        let Some(w) = self.walk.as_mut() else {
            return false;
        };
        let (k, off) = (w.k, w.off);
        let pos = |o: usize| Position::at(&tf.path, off + o as u64, Some(k));
        let (time, counter, id, start, end) = loop {
            match w.step {
                Step::BlockStart => {
                    w.step = Step::Events;
                    break (w.t0, w.c0, ID_BLOCK_START, HDR, FRAME);
                }
                Step::Events if w.p < w.e_off => {
                    let area = &self.buf[..w.e_off];
                    let p = w.p;
                    let (Some(id), Some(ts)) = (bo.u16(area, p), bo.u32(area, p + 2)) else {
                        diags.push(Diagnostic::salvaged(
                            pos(p),
                            format!("block {k} lost: event header crosses block_end"),
                        ));
                        w.clean = false;
                        w.step = Step::BlockEnd;
                        continue;
                    };
                    let Some(info) = t.info(id) else {
                        diags.push(Diagnostic::salvaged(
                            pos(p),
                            format!("unknown event id {id}; rest of block {k} skipped"),
                        ));
                        w.clean = false;
                        w.step = Step::BlockEnd;
                        continue;
                    };
                    let fixed = info
                        .size
                        .and_then(|n| (p + HDR).checked_add(n))
                        .filter(|&e| e <= area.len());
                    let end = match (&info.ty, fixed) {
                        (Some(_), Some(e)) => e,
                        // Variable size, or too short (skip names where).
                        (Some(ty), None) => match layout::skip(ty, area, p + HDR, bo) {
                            Ok(e) => e,
                            Err(e) => {
                                diags.push(Diagnostic::salvaged(
                                    pos(e.offset),
                                    format!(
                                        "{}.{}: {}; rest of block {k} skipped",
                                        info.facility, info.name, e.msg
                                    ),
                                ));
                                w.clean = false;
                                w.step = Step::BlockEnd;
                                continue;
                            }
                        },
                        (None, _) => p + HDR,
                    };
                    let mut cand = (w.cur & !0xFFFF_FFFF) | ts as u64;
                    if cand < w.cur {
                        cand = cand.saturating_add(1 << 32);
                    }
                    w.cur = cand;
                    if id == ID_HEARTBEAT {
                        if let Some(hc) = bo.u64(area, p + HDR + 8) {
                            if hc as u32 == ts && hc >= w.cur {
                                w.cur = hc;
                            }
                        }
                    }
                    w.p = end;
                    break (w.interp(w.cur), w.cur, id, p + HDR, end);
                }
                Step::Events => w.step = Step::BlockEnd,
                Step::BlockEnd => {
                    w.step = Step::Done;
                    if w.clean && w.has_end {
                        if w.cur > w.c1 {
                            diags.push(Diagnostic::warning(
                                pos(w.e_off),
                                "event counter beyond block_end's",
                            ));
                        }
                        break (w.t1, w.c1, ID_BLOCK_END, w.e_off + HDR, w.e_off + FRAME);
                    }
                }
                Step::Done => return false,
            }
        };
        let seq = self.seq;
        self.seq += 1;
        self.head = Some(RawEv {
            time,
            counter,
            id,
            start,
            end,
            seq,
        });
        true
    }
}

/// Merges the cursors of all tracefiles by (time, file rank, position).
pub struct Merge {
    pub cursors: Vec<Cursor>,
    heap: BinaryHeap<Reverse<(i64, usize, u64)>>,
    /// Cursor whose event was handed out last: it is re-queued on the next
    /// call, so that its payload stays valid until then.
    pending: Option<usize>,
}

impl Merge {
    pub fn new(t: &Trace, diags: &mut Vec<Diagnostic>) -> Merge {
        let mut cursors = t.cursors();
        let mut heap = BinaryHeap::new();
        for (i, c) in cursors.iter_mut().enumerate() {
            if let Some(e) = c.peek(t, diags) {
                heap.push(Reverse((e.time, i, e.seq)));
            }
        }
        Merge {
            cursors,
            heap,
            pending: None,
        }
    }

    /// Tracefile bytes read so far (whole blocks) and in all.
    pub fn progress(&self, t: &Trace) -> (u64, u64) {
        let total = t.files.iter().map(|f| f.len).sum();
        let done = self
            .cursors
            .iter()
            .map(|c| c.block.min(c.nblocks) * t.sys.block_size)
            .sum();
        (done, total)
    }

    /// The next event: (cursor index, event). The payload lives in
    /// `self.cursors[i].buf` until the next call.
    pub fn next(&mut self, t: &Trace, diags: &mut Vec<Diagnostic>) -> Option<(usize, RawEv)> {
        let i = self.next_index(t, diags)?;
        Some((i, self.cursors[i].head?))
    }

    /// [`Self::next`] without copying the event out: it is
    /// `self.cursors[i].head` (Some), until the next call.
    #[inline]
    pub fn next_index(&mut self, t: &Trace, diags: &mut Vec<Diagnostic>) -> Option<usize> {
        let i = match self.pending.take() {
            Some(i) => {
                // The event handed out last is done with.
                let c = &mut self.cursors[i];
                c.head = None;
                match c.peek_ref(t, diags) {
                    Some(e) => {
                        let key = Reverse((e.time, i, e.seq));
                        match self.heap.peek_mut() {
                            // Still the earliest (the usual case: events of
                            // one tracefile come in runs): no heap traffic.
                            Some(top) if key > *top => i,
                            None => i,
                            // Swap it in for the earliest (one sift, where a
                            // push and a pop take two).
                            Some(mut top) => std::mem::replace(&mut *top, key).0 .1,
                        }
                    }
                    None => self.heap.pop()?.0 .1,
                }
            }
            None => self.heap.pop()?.0 .1,
        };
        // Peeked when it was queued: the cursor's head is its event.
        self.cursors[i].head.as_ref()?;
        self.pending = Some(i);
        Some(i)
    }
}
