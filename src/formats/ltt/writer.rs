//! Writing LTT trace directories (spec 5.1–5.13, "Writer" items): era-A
//! trailers, zero padding, heartbeats so no gap reaches 2^32 counts, the
//! counter = nanoseconds since the epoch (so times round-trip exactly),
//! facility_load events in control/facilities, bases from 20.

use super::eventdefs::{self, Arch, Facility, Ty};
use super::layout::{self, Bo, FRAME, HDR, HEARTBEAT, ID_BLOCK_END, ID_BLOCK_START, ID_HEARTBEAT};
use super::reader::Trailer;
use super::{keys, paths, selfdesc, system};
use crate::error::{Error, Position, Result};
use crate::formats::format::note_dropped;
use crate::model::{
    EventType, ExtraValue, FieldType, Header, Item, LossReport, MetricDesc, TraceWriter, Value,
    ValueType,
};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What `append` bridging a time gap costs readers (the loss report's line).
const RESYNC_BRIDGED: &str =
    "time gap bridged by one resync heartbeat (readers before 2005 misplace the events after it)";

mod describe;
mod json;
/// Largest block size the writer takes over from an LTT source (16 MiB;
/// the era's traces used 1,000,000 at most).
pub const MAX_INHERITED_BLOCK: u64 = 16 << 20;

/// Writer settings.
#[derive(Debug, Clone)]
pub struct Config {
    pub block_size: u32,
    pub big_endian: bool,
    pub arch: Arch,
    /// Always EraA in normal use; the others exist for tests (spec 6.10).
    pub trailer: Trailer,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            block_size: 100_000,
            big_endian: false,
            arch: Arch::Lp64,
            trailer: Trailer::EraA,
        }
    }
}

impl Config {
    /// From the options, else the source's settings (LTT), else defaults.
    pub fn from_options(h: &Header, o: &crate::options::WriteOptions) -> Config {
        let mut c = Config::default();
        // The source's block size is a size read from a file: inherited
        // only up to MAX_INHERITED_BLOCK (every tracefile holds a block in
        // memory), else the default. An explicit option is taken as given.
        let inherited = h
            .extras
            .u64(keys::BLOCK_SIZE)
            .filter(|&b| b <= MAX_INHERITED_BLOCK);
        if let Some(b) = o.ltt_block_size.or(inherited) {
            c.block_size = b.clamp(layout::MIN_BLOCK as u64, u32::MAX as u64) as u32;
        }
        if let Some(e) = h.extras.str(keys::ENDIAN) {
            c.big_endian = e.eq_ignore_ascii_case("BIG_ENDIAN");
        }
        if let Some(a) = h.extras.str(keys::ARCH) {
            let a = Arch::parse(a);
            if a != Arch::Unknown {
                c.arch = a;
            }
        }
        c
    }
}

pub fn is_tar_gz_name(p: &Path) -> bool {
    let n = p
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    n.ends_with(".tar.gz") || n.ends_with(".tgz")
}

/// Unpacked bytes allowed per byte of archive (plus [`UNPACK_SLACK`]): LTT
/// tracefiles compress well, but not by more than this; a gzip bomb stops
/// here instead of filling the temporary directory.
pub const UNPACK_RATIO: u64 = 256;
/// Unpacked bytes allowed on top of [`UNPACK_RATIO`] times the archive.
pub const UNPACK_SLACK: u64 = 64 << 20;

/// The top-level trace directories the reader opens; members elsewhere are
/// not unpacked.
const USED_DIRS: [&str; 4] = ["info", "eventdefs", "control", "cpu"];

/// Whether the LTT reader would read the member at `rel`: a file directly
/// in one of [`USED_DIRS`], at the archive's top level or under one
/// top directory (see [`tar_root`]).
fn used_member(rel: &Path) -> bool {
    let c: Vec<_> = rel.components().map(|c| c.as_os_str()).collect();
    let at = |i: usize| c.len() == i + 2 && USED_DIRS.iter().any(|d| c[i] == *d);
    at(0) || at(1)
}

/// An unpacked archive: a 0700 temporary directory, registered with the
/// signal cleanup and removed on drop.
pub struct Unpacked {
    dir: PathBuf,
    /// Warnings and damage found while unpacking, named `archive:member`.
    pub diags: Vec<crate::error::Diagnostic>,
}

impl Unpacked {
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Unpacked {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        crate::cleanup::unregister(&self.dir);
    }
}

/// Unpack the members the LTT reader uses from a .tar.gz (concatenated
/// gzip members are read as one stream, as GNU tar does) into a private
/// temporary directory. Plain files, GNU sparse files and hard links to an
/// earlier unpacked member are unpacked; entries that would land outside
/// the directory are an error; symlinks, devices and FIFOs among the used
/// members are damage (`salvage`: a salvaged diagnostic, else an error).
/// Messages name `shown:member`, never the temporary path.
pub fn unpack_tar_gz(path: &Path, shown: &str, salvage: bool) -> Result<Unpacked> {
    use crate::error::Diagnostic;
    let f = File::open(path).map_err(|e| Error::io(path, e))?;
    let archive_len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let cap = archive_len
        .saturating_mul(UNPACK_RATIO)
        .saturating_add(UNPACK_SLACK);
    let dir = crate::cleanup::register_new(|| {
        let t = tempfile::Builder::new()
            .prefix(".polytrace-tar-")
            .tempdir()
            .map_err(|e| Error::io(path, e))?;
        let d = t.keep();
        std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .map_err(|e| Error::io(&d, e))?;
        Ok::<_, Error>(d)
    })?;
    crate::error::alias_path(&dir, shown);
    let mut un = Unpacked {
        dir,
        diags: Vec::new(),
    };
    let member = |rel: &Path| PathBuf::from(format!("{shown}:{}", rel.display()));
    let mut ar = tar::Archive::new(flate2::read::MultiGzDecoder::new(std::io::BufReader::new(
        f,
    )));
    let entries = ar.entries().map_err(|e| Error::io(shown, e))?;
    let mut unpacked: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
    let mut written = 0u64;
    for (i, ent) in entries.enumerate() {
        let mut ent = ent.map_err(|e| Error::io(shown, e))?;
        let rel = ent.path().map_err(|e| Error::io(shown, e))?.into_owned();
        let pos = Position {
            file: member(&rel),
            offset: None,
            record: Some(i as u64),
        };
        if !paths::is_safe_relative(&rel) {
            return Err(Error::format(
                pos,
                "archive member escapes the trace directory",
            ));
        }
        let dst = un.dir.join(&rel);
        let kind = ent.header().entry_type();
        if kind.is_dir() {
            std::fs::create_dir_all(&dst).map_err(|e| Error::io(&dst, e))?;
            continue;
        }
        if !used_member(&rel) {
            // pax/GNU extension headers are consumed by the tar crate; what
            // reaches here is an entry the reader would not open.
            un.diags.push(Diagnostic::warning(
                pos,
                "not part of an LTT trace; not unpacked",
            ));
            continue;
        }
        let refuse = |un: &mut Unpacked, pos: Position, what: String| -> Result<()> {
            if !salvage {
                return Err(Error::format(
                    pos,
                    format!("{what}; --salvage reads the trace without it"),
                ));
            }
            un.diags
                .push(Diagnostic::salvaged(pos, format!("{what}; not read")));
            Ok(())
        };
        if let Some(p) = dst.parent() {
            std::fs::create_dir_all(p).map_err(|e| Error::io(p, e))?;
        }
        match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous | tar::EntryType::GNUSparse => {
                // A hard link to an earlier member must not be written through.
                if unpacked.contains(&rel) {
                    std::fs::remove_file(&dst).map_err(|e| Error::io(&dst, e))?;
                }
                let mut out = File::create(&dst).map_err(|e| Error::io(&dst, e))?;
                let n = std::io::copy(
                    &mut std::io::Read::take(&mut ent, cap - written + 1),
                    &mut out,
                )
                .map_err(|e| Error::io(&dst, e))?;
                written += n;
                if written > cap {
                    return Err(Error::format(
                        pos,
                        format!(
                            "unpacking exceeds {cap} bytes ({UNPACK_RATIO} times the archive's \
                             size plus {} MiB); unpack it and give the directory",
                            UNPACK_SLACK >> 20
                        ),
                    ));
                }
                unpacked.insert(rel);
            }
            tar::EntryType::Link => {
                let target = ent
                    .link_name()
                    .map_err(|e| Error::io(shown, e))?
                    .map(|t| t.into_owned());
                match target {
                    // A file archived twice: the second is a link to itself.
                    Some(t) if t == rel && unpacked.contains(&t) => {}
                    Some(t) if paths::is_safe_relative(&t) && unpacked.contains(&t) => {
                        // A later member replaces an earlier one, as tar does.
                        if unpacked.contains(&rel) {
                            std::fs::remove_file(&dst).map_err(|e| Error::io(&dst, e))?;
                        }
                        std::fs::hard_link(un.dir.join(&t), &dst)
                            .map_err(|e| Error::io(&dst, e))?;
                        unpacked.insert(rel);
                    }
                    t => {
                        let t = t.map(|t| t.display().to_string()).unwrap_or_default();
                        refuse(
                            &mut un,
                            pos,
                            format!("hard link to {t}, which is not an earlier unpacked member"),
                        )?
                    }
                }
            }
            other => {
                let what = match other {
                    tar::EntryType::Symlink => "a symlink",
                    tar::EntryType::Char => "a character device",
                    tar::EntryType::Block => "a block device",
                    tar::EntryType::Fifo => "a FIFO",
                    _ => "not a regular file",
                };
                refuse(
                    &mut un,
                    pos,
                    format!("{what}; only regular files, sparse files and hard links are read"),
                )?
            }
        }
    }
    Ok(un)
}

/// The trace root inside an unpacked archive: the directory holding
/// info/system.xml (the top level, or its single subdirectory).
pub fn tar_root(dir: &Path) -> PathBuf {
    if dir.join("info/system.xml").is_file() {
        return dir.to_path_buf();
    }
    if let Ok(rd) = std::fs::read_dir(dir) {
        let subs: Vec<PathBuf> = rd
            .flatten()
            .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
            .map(|e| e.path())
            .collect();
        if subs.len() == 1 {
            return subs[0].clone();
        }
    }
    dir.to_path_buf()
}

/// Limit a name to `[A-Za-z_][A-Za-z0-9_]*` (spec 5.11).
pub fn sanitize(s: &str) -> String {
    sanitized(s).into_owned()
}

/// Append `s` sanitized to `o`: its range there.
fn sanitize_into(o: &mut String, s: &str) -> std::ops::Range<usize> {
    let at = o.len();
    if s.bytes().next().is_none_or(|b| b.is_ascii_digit()) {
        o.push('_');
    }
    o.extend(s.chars().map(|c| {
        if c.is_ascii_alphanumeric() || c == '_' {
            c
        } else {
            '_'
        }
    }));
    at..o.len()
}

/// [`sanitize`], borrowing a name that needs no change.
fn sanitized(s: &str) -> Cow<'_, str> {
    let clean = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    if s.bytes().all(clean) && s.bytes().next().is_some_and(|b| !b.is_ascii_digit()) {
        return Cow::Borrowed(s);
    }
    // Sized once: a leading '_' and one byte per character at most.
    let mut o = String::with_capacity(s.len() + 1);
    sanitize_into(&mut o, s);
    Cow::Owned(o)
}

/// A facility as written.
struct WFac {
    /// As parsed (a source's, or a generated one with other than scalar
    /// fields), else its name and checksum only (see `direct_facility`):
    /// its text is in `copied`.
    fac: Facility,
    /// The events' names of a facility kept without its events, each
    /// after a '\n'.
    names: String,
    base: u32,
    /// Resolved payload layout per event (shared: events of one layout,
    /// such as every metric of a value type, hold the same).
    tys: Vec<Option<Arc<Ty>>>,
}

impl WFac {
    fn event_name(&self, i: usize) -> &str {
        match self.fac.events.get(i) {
            Some(e) => &e.name,
            None => self.names.split('\n').nth(i + 1).unwrap_or(""),
        }
    }
}

/// How a model event type is written.
#[derive(Clone)]
enum Target {
    Event {
        id: u16,
        ty: Option<Arc<Ty>>,
        /// Its facility in `facs` and its event there (for its name).
        fac: usize,
        ev: usize,
    },
    /// Framing and facility_load of an LTT source: regenerated, not copied.
    Framing,
    /// facility_load found in a cpu file of the source.
    FacilityLoad,
}

/// Key of a generated event type: a model event type or a metric.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Key {
    Type(u32),
    Metric(u32),
    /// Membership changes of an instance domain (`indom.indom_<id>` events).
    Indom(u32),
}

/// A generated event type not yet given an id: names sanitized as the
/// eventdefs file will hold them.
struct Pending {
    key: Key,
    category: Cow<'static, str>,
    /// Its name's range in `LttWriter::pnames`.
    name: std::ops::Range<usize>,
    description: DescFrom,
    fields: Fields,
}

/// Where a generated event type's description comes from: written into
/// the eventdefs text from there (not kept as a string of its own).
enum DescFrom {
    /// Its help text, else its name.
    Metric(Arc<MetricDesc>),
    /// Its description, else its name.
    Type(Arc<EventType>),
    /// The membership events of an instance domain.
    Indom(u32),
}

impl DescFrom {
    /// The description as the eventdefs text holds it: no entity decoding
    /// on read, so markup characters become spaces.
    fn write(&self, o: &mut String) {
        use std::fmt::Write as _;
        let text = match self {
            DescFrom::Metric(m) => m.help_short.as_deref().unwrap_or(m.name()),
            DescFrom::Type(t) => t.description.as_deref().unwrap_or(&t.name),
            DescFrom::Indom(id) => {
                let _ = write!(o, "membership of instance domain {id}");
                return;
            }
        };
        o.extend(text.chars().map(|c| match c {
            '<' | '>' | '&' => ' ',
            c => c,
        }));
    }
}

/// Field names (sanitized) and types of a generated event type (the
/// common lists are constants: no allocation per metric).
type Fields = Cow<'static, [(Cow<'static, str>, FieldType)]>;

/// The fields of a metric's events of value field `vt` (a merged stream's
/// add `source`).
fn metric_fields(vt: FieldType, tag_source: bool) -> Fields {
    type F = (Cow<'static, str>, FieldType);
    macro_rules! with {
        ($t:expr) => {{
            const L: &[F] = &[
                (Cow::Borrowed("instance"), FieldType::Int(4)),
                (Cow::Borrowed("value"), $t),
            ];
            L
        }};
    }
    let fixed: Option<&'static [F]> = match vt {
        FieldType::Int(4) => Some(with!(FieldType::Int(4))),
        FieldType::Int(8) => Some(with!(FieldType::Int(8))),
        FieldType::Uint(4) => Some(with!(FieldType::Uint(4))),
        FieldType::Uint(8) => Some(with!(FieldType::Uint(8))),
        FieldType::Float(4) => Some(with!(FieldType::Float(4))),
        FieldType::Float(8) => Some(with!(FieldType::Float(8))),
        FieldType::String => Some(with!(FieldType::String)),
        FieldType::Bytes => Some(with!(FieldType::Bytes)),
        _ => None,
    };
    match fixed {
        Some(f) if !tag_source => Cow::Borrowed(f),
        _ => {
            let mut v = vec![
                (Cow::Borrowed("instance"), FieldType::Int(4)),
                (Cow::Borrowed("value"), vt),
            ];
            if tag_source {
                v.push((Cow::Borrowed(SOURCE_FIELD), FieldType::String));
            }
            Cow::Owned(v)
        }
    }
}

/// The fields of an instance domain's membership events.
const INDOM_FIELDS: &[(Cow<'static, str>, FieldType)] = &[
    (Cow::Borrowed("instance"), FieldType::Int(4)),
    (Cow::Borrowed("present"), FieldType::Uint(1)),
    (Cow::Borrowed("name"), FieldType::String),
];

/// The node and resolved layout of a constant field list (`metric_fields`,
/// `INDOM_FIELDS`): built once, shared by every event type that has it.
struct Layout {
    fields: &'static [(Cow<'static, str>, FieldType)],
    node: Option<eventdefs::TypeNode>,
    ty: Option<Arc<Ty>>,
}

#[derive(PartialEq, Eq, PartialOrd, Ord, Clone, Debug, Hash)]
enum FileKey {
    Control(String),
    Cpu(u32),
}

impl FileKey {
    fn rel(&self) -> String {
        match self {
            FileKey::Control(n) => format!("control/{n}"),
            FileKey::Cpu(n) => format!("cpu/{n}"),
        }
    }
}

/// One tracefile being written, one block at a time.
struct FileW {
    path: PathBuf,
    out: BufWriter<File>,
    block: Vec<u8>,
    open: bool,
    index: u32,
    cur: u64,
    /// Bytes of 2^32-spaced heartbeats this file may still spend: earned by
    /// the events written, so a time gap (a damaged timestamp, a sparse
    /// source) can never make the output grow faster than the data does.
    hb_budget: u64,
}

/// Heartbeat bytes every tracefile may spend before its events have earned
/// any: 64 heartbeats, a gap of 4.6 minutes at nanosecond counters.
const HB_ALLOWANCE: u64 = 64 * HEARTBEAT as u64;

pub struct LttWriter {
    target: PathBuf,
    dir: PathBuf,
    tar_tmp: Option<tempfile::TempDir>,
    cfg: Config,
    bo: Bo,
    header: Header,
    facs: Vec<WFac>,
    /// Raw eventdefs files copied from an LTT source.
    copied: Vec<(String, Vec<u8>)>,
    source_ids: HashMap<u16, (usize, usize)>,
    map: HashMap<Key, Target>,
    pending: Vec<Pending>,
    /// Names of the pending types, one after another (one buffer, not a
    /// string per metric).
    pnames: String,
    /// Layouts of the constant field lists met so far.
    layouts: Vec<Layout>,
    metrics: HashMap<u32, Arc<MetricDesc>>,
    files: BTreeMap<FileKey, FileW>,
    next_base: u32,
    loss: LossReport,
    min_time: Option<u64>,
    max_cpu: Option<u32>,
    payload: Vec<u8>,
    /// Payload buffer of the self-description records.
    rec_payload: Vec<u8>,
    /// Self-description of a non-LTT stream (the `polytrace` facility).
    sd: Option<describe::Describe>,
    /// A merged stream: each event type gets a last string field `source`
    /// naming the input each event came from.
    tag_source: bool,
}

/// The field that names an event's input in a trace written from a merge.
pub const SOURCE_FIELD: &str = "source";

fn werr(path: &Path, msg: impl Into<String>) -> Error {
    Error::format(Position::new(path), msg)
}

impl LttWriter {
    /// Create the trace at `target` (a directory, or a `.tar.gz` of one).
    pub fn create(target: &Path, header: &Header, cfg: Config) -> Result<LttWriter> {
        let (dir, tar_tmp) = if is_tar_gz_name(target) {
            // The tree is built beside the archive, which is inside the
            // conversion's staging directory, so a signal's cleanup removes
            // it with the staging; in the system's temporary directory it
            // was left there. `finish` removes it before the commit, which
            // moves all the staging holds into place.
            let parent = target
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let tmp = tempfile::Builder::new()
                .prefix(".ltt-tree-")
                .tempdir_in(parent)
                .map_err(|e| Error::io(target, e))?;
            let stem = target
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("trace")
                .trim_end_matches(".tar.gz")
                .trim_end_matches(".tgz")
                .to_string();
            (
                tmp.path()
                    .join(if stem.is_empty() { "trace" } else { &stem }),
                Some(tmp),
            )
        } else {
            (target.to_path_buf(), None)
        };
        // One level at a time, not `create_dir_all`: in a staging directory
        // that a signal's cleanup has just removed, that would make the
        // staging directory again, and it would be left behind.
        for p in std::iter::once(dir.clone())
            .chain(["info", "eventdefs", "control", "cpu"].map(|sub| dir.join(sub)))
        {
            match std::fs::create_dir(&p) {
                Err(e) if !(e.kind() == std::io::ErrorKind::AlreadyExists && p.is_dir()) => {
                    return Err(Error::io(&p, e))
                }
                _ => {}
            }
        }
        let mut w = LttWriter {
            target: target.to_path_buf(),
            dir,
            tar_tmp,
            bo: Bo {
                big: cfg.big_endian,
            },
            cfg,
            header: header.clone(),
            facs: Vec::new(),
            copied: Vec::new(),
            source_ids: HashMap::new(),
            map: HashMap::new(),
            pending: Vec::new(),
            pnames: String::new(),
            layouts: Vec::new(),
            metrics: HashMap::new(),
            files: BTreeMap::new(),
            next_base: 20,
            loss: LossReport::default(),
            min_time: None,
            max_cpu: None,
            payload: Vec::new(),
            rec_payload: Vec::new(),
            sd: None,
            tag_source: header
                .extras
                .get(crate::model::keys::MERGE_SOURCES)
                .is_some(),
        };
        w.load_source_facilities()?;
        Ok(w)
    }

    /// Carry a non-LTT stream exactly with the `polytrace` facility
    /// (`selfdesc`; `convert` does unless `--ltt-plain`). Without it the
    /// writer makes the era's plain layout. No effect for an LTT source,
    /// whose definitions are copied as they are.
    /// A stream that came from LTT through another format (its eventdefs
    /// ride in the header) is written as the LTT trace it was.
    pub fn describing(mut self) -> Result<LttWriter> {
        if self.sd.is_none()
            && self.header.source != crate::model::FormatId::Ltt
            && self.header.extras.get(keys::EVENTDEFS).is_none()
        {
            self.start_describe()?;
        }
        Ok(self)
    }

    /// An LTT source: reuse its eventdefs (byte for byte) and base codes.
    fn load_source_facilities(&mut self) -> Result<()> {
        let Some(ExtraValue::List(files)) = self.header.extras.get(keys::EVENTDEFS).cloned() else {
            return Ok(());
        };
        let mut bases: HashMap<(String, u32), u32> = HashMap::new();
        if let Some(ExtraValue::List(fl)) = self.header.extras.get(keys::FACILITIES) {
            for f in fl {
                if let ExtraValue::List(v) = f {
                    if let (
                        Some(ExtraValue::Str(n)),
                        Some(ExtraValue::U64(ck)),
                        Some(ExtraValue::U64(b)),
                    ) = (v.first(), v.get(1), v.get(2))
                    {
                        bases.insert((n.clone(), *ck as u32), *b as u32);
                    }
                }
            }
        }
        for f in files {
            let ExtraValue::List(v) = f else { continue };
            let (Some(ExtraValue::Str(name)), Some(ExtraValue::Bytes(raw))) = (v.first(), v.get(1))
            else {
                continue;
            };
            if !paths::is_safe_relative(Path::new(name)) || name.contains('/') {
                return Err(werr(
                    &self.target,
                    format!("eventdefs file name {name:?} refused"),
                ));
            }
            let fs = eventdefs::parse_file(raw, name)
                .map_err(|e| werr(&self.target, format!("source eventdefs {name}: {}", e.msg)))?;
            for fac in fs {
                let Some(&base) = bases.get(&(fac.name.clone(), fac.checksum)) else {
                    continue;
                };
                self.add_fac(fac, base)?;
            }
            self.copied.push((name.clone(), raw.clone()));
        }
        for (fi, f) in self.facs.iter().enumerate() {
            for i in 0..f.fac.events.len() {
                self.source_ids
                    .insert((f.base as usize + i) as u16, (fi, i));
            }
        }
        Ok(())
    }

    fn add_fac(&mut self, fac: Facility, base: u32) -> Result<usize> {
        let mut tys = Vec::new();
        for ev in &fac.events {
            tys.push(match &ev.payload {
                Some(p) => Some(Arc::new(
                    eventdefs::resolve(&fac, p, self.cfg.arch).map_err(|m| {
                        werr(&self.target, format!("{}.{}: {m}", fac.name, ev.name))
                    })?,
                )),
                None => None,
            });
        }
        self.add_resolved(fac, base, tys, String::new())
    }

    /// [`Self::add_fac`] with the layouts resolved already (one per event),
    /// and the events' names when `fac` is kept without its events.
    fn add_resolved(
        &mut self,
        fac: Facility,
        base: u32,
        tys: Vec<Option<Arc<Ty>>>,
        names: String,
    ) -> Result<usize> {
        let end = base as u64 + tys.len() as u64;
        if end > 65536 {
            return Err(werr(
                &self.target,
                format!("facility {} does not fit below id 65536", fac.name),
            ));
        }
        self.next_base = self.next_base.max(end as u32);
        self.facs.push(WFac {
            fac,
            names,
            base,
            tys,
        });
        Ok(self.facs.len() - 1)
    }

    fn define_type(&mut self, et: &std::sync::Arc<EventType>) {
        let key = Key::Type(et.id);
        if et.extras.bool(keys::BUILTIN) == Some(true) {
            let id = et.extras.u64(keys::EVENT_ID).unwrap_or(0);
            let t = if id == layout::ID_FACILITY_LOAD as u64 {
                Target::FacilityLoad
            } else {
                Target::Framing
            };
            self.map.insert(key, t);
            return;
        }
        if let Some(id) = et.extras.u64(keys::EVENT_ID) {
            if let Some(&(fi, ei)) = u16::try_from(id).ok().and_then(|i| self.source_ids.get(&i)) {
                let f = &self.facs[fi];
                if f.fac.name == et.category && f.fac.events[ei].name == et.name {
                    self.map.insert(
                        key,
                        Target::Event {
                            id: id as u16,
                            ty: f.tys[ei].clone(),
                            fac: fi,
                            ev: ei,
                        },
                    );
                    return;
                }
            }
        }
        self.pending.retain(|p| p.key != key);
        self.map.remove(&key);
        self.describe_def(key, describe::Def::Type(et.clone()));
        self.pending.push(Pending {
            key,
            category: Cow::Owned(sanitized(&et.category).into_owned()),
            name: sanitize_into(&mut self.pnames, &et.name),
            description: DescFrom::Type(et.clone()),
            fields: Cow::Owned(
                et.fields
                    .iter()
                    .map(|f| (Cow::Owned(sanitized(&f.name).into_owned()), f.ty.clone()))
                    .chain(
                        self.tag_source
                            .then_some((Cow::Borrowed(SOURCE_FIELD), FieldType::String)),
                    )
                    .collect(),
            ),
        });
    }

    fn define_metric(&mut self, m: &std::sync::Arc<MetricDesc>) {
        let key = Key::Metric(m.id);
        self.metrics.insert(m.id, m.clone());
        let vt = match m.vtype {
            ValueType::Event | ValueType::HighresEvent | ValueType::Other(_)
                if self.sd.is_none() =>
            {
                self.map.remove(&key);
                return;
            }
            t => selfdesc::metric_field(t),
        };
        self.pending.retain(|p| p.key != key);
        self.map.remove(&key);
        self.describe_def(key, describe::Def::Metric(m.clone()));
        let fields = metric_fields(vt, self.tag_source);
        self.pending.push(Pending {
            key,
            category: Cow::Borrowed("metric"),
            name: sanitize_into(&mut self.pnames, m.name()),
            description: DescFrom::Metric(m.clone()),
            fields,
        });
    }

    /// Instance domains travel as events `indom.indom_<id>` {instance,
    /// present, name}: one per instance added (present = 1) or removed (0),
    /// so instance names survive in an LTT trace.
    fn write_indom(&mut self, u: &crate::model::IndomUpdate) -> Result<()> {
        let key = self.indom_type(u.id);
        for i in &u.instances {
            let fields = [
                Value::I64(i.id as i64),
                Value::U64(1),
                Value::Str(i.name.clone()),
            ];
            self.write_event(key, u.time.0, None, Some(0), &fields, None)?;
        }
        for r in &u.removed {
            let fields = [
                Value::I64(*r as i64),
                Value::U64(0),
                Value::Str(String::new()),
            ];
            self.write_event(key, u.time.0, None, Some(0), &fields, None)?;
        }
        Ok(())
    }

    /// The event type of an indom's membership events, defined on first use.
    fn indom_type(&mut self, id: u32) -> Key {
        let key = Key::Indom(id);
        if !self.map.contains_key(&key) && !self.pending.iter().any(|p| p.key == key) {
            self.pending.push(Pending {
                key,
                category: Cow::Borrowed("indom"),
                name: {
                    use std::fmt::Write as _;
                    let at = self.pnames.len();
                    let _ = write!(self.pnames, "indom_{id}");
                    at..self.pnames.len()
                },
                description: DescFrom::Indom(id),
                fields: Cow::Borrowed(INDOM_FIELDS),
            });
        }
        key
    }

    /// Turn pending types into facilities (one per category, a new version
    /// when the name exists already) and give them bases.
    fn seal(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut pending = std::mem::take(&mut self.pending);
        let pnames = std::mem::take(&mut self.pnames);
        let name = |p: &Pending| &pnames[p.name.clone()];
        // Per facility, its types (indices into `pending`). Types of one
        // category share a facility unless their names clash (same name,
        // another layout): a clash opens another facility of that name, so
        // every event keeps its name (and names within a facility differ).
        let mut groups: Vec<Vec<usize>> = Vec::new();
        {
            let mut names: Vec<HashSet<&str>> = Vec::new();
            for (i, p) in pending.iter().enumerate() {
                let at = groups.iter().zip(&names).position(|(g, n)| {
                    pending[g[0]].category == p.category && !n.contains(name(p))
                });
                match at {
                    Some(k) => {
                        groups[k].push(i);
                        names[k].insert(name(p));
                    }
                    None => {
                        groups.push(vec![i]);
                        names.push(HashSet::from([name(p)]));
                    }
                }
            }
        }
        for ix in groups {
            let cat = pending[ix[0]].category.clone();
            let types = ix.iter().map(|&i| &pending[i]);
            let xml = facility_xml(&cat, &self.header.source, &pnames, types);
            let (mut fac, tys) = match self.direct_facility(&cat, &pnames, &pending, &ix)? {
                Some((f, tys, names)) => (f, Some((tys, names))),
                None => {
                    let mut fs = eventdefs::parse_file(xml.as_bytes(), "").map_err(|e| {
                        werr(
                            &self.target,
                            format!("generated eventdefs for {cat}: {}", e.msg),
                        )
                    })?;
                    let Some(fac) = fs.pop() else { continue };
                    (fac, None)
                }
            };
            // The same definitions again (a re-issued type): reuse the
            // facility, since a (name, checksum) pair is loaded only once.
            if let Some(fi) = self
                .facs
                .iter()
                .position(|f| f.fac.name == fac.name && f.fac.checksum == fac.checksum)
            {
                for (i, &k) in ix.iter().enumerate() {
                    let f = &self.facs[fi];
                    self.map.insert(
                        pending[k].key,
                        Target::Event {
                            id: (f.base as usize + i) as u16,
                            ty: f.tys[i].clone(),
                            fac: fi,
                            ev: i,
                        },
                    );
                }
                continue;
            }
            let versions = self.facs.iter().filter(|f| f.fac.name == cat).count()
                + self
                    .copied
                    .iter()
                    .filter(|(n, _)| n.strip_suffix(".xml") == Some(cat.as_ref()))
                    .count();
            let file = if versions == 0 {
                format!("{cat}.xml")
            } else {
                format!("{cat}.{:08x}.xml", fac.checksum)
            };
            fac.file = file.clone();
            let base = self.next_base;
            let fi = match tys {
                Some((tys, names)) => self.add_resolved(fac, base, tys, names)?,
                None => self.add_fac(fac, base)?,
            };
            self.copied.push((file, xml.into_bytes()));
            for (i, &k) in ix.iter().enumerate() {
                let f = &self.facs[fi];
                self.map.insert(
                    pending[k].key,
                    Target::Event {
                        id: (base as usize + i) as u16,
                        ty: f.tys[i].clone(),
                        fac: fi,
                        ev: i,
                    },
                );
            }
        }
        // Kept for their allocations (nothing is pending now).
        pending.clear();
        self.pending = pending;
        self.pnames = pnames;
        self.pnames.clear();
        Ok(())
    }

    /// The facility [`facility_xml`] defines for the pending types `ix`,
    /// with their layouts, built without parsing the text back when every
    /// field is a scalar (metrics, instance domains, most event types);
    /// None otherwise. Built, it holds the events' names (taken from
    /// `pending`) and the checksum: the writer needs no more of a facility
    /// it generated (the payload nodes of the constant field lists are
    /// built once, in `layouts`).
    #[allow(clippy::type_complexity)]
    fn direct_facility(
        &mut self,
        cat: &str,
        pnames: &str,
        pending: &[Pending],
        ix: &[usize],
    ) -> Result<Option<(Facility, Vec<Option<Arc<Ty>>>, String)>> {
        if !ix.iter().all(|&k| {
            pending[k]
                .fields
                .iter()
                .all(|(_, t)| scalar_kind(t).is_some())
        }) {
            return Ok(None);
        }
        let no_types = Facility {
            name: String::new(),
            description: None,
            events: Vec::new(),
            types: HashMap::new(),
            checksum: 0,
            file: String::new(),
        };
        let resolve = |node: &Option<eventdefs::TypeNode>| -> Result<Option<Arc<Ty>>> {
            node.as_ref()
                .map(|n| {
                    eventdefs::resolve(&no_types, n, self.cfg.arch)
                        .map(Arc::new)
                        .map_err(|m| werr(&self.target, format!("{cat}: {m}")))
                })
                .transpose()
        };
        // Per type, its layout: constant lists from `layouts`, others built here.
        enum Src {
            Shared(usize),
            Own(usize),
        }
        let mut own: Vec<(Option<eventdefs::TypeNode>, Option<Arc<Ty>>)> = Vec::new();
        let mut new_layouts = Vec::new();
        let mut srcs = Vec::with_capacity(ix.len());
        for &k in ix {
            let fields = &pending[k].fields;
            let found = match fields {
                Cow::Borrowed(f) => self
                    .layouts
                    .iter()
                    .chain(&new_layouts)
                    .position(|l: &Layout| std::ptr::eq(l.fields, *f)),
                Cow::Owned(_) => None,
            };
            let src = match (found, fields) {
                (Some(i), _) => Src::Shared(i),
                (None, Cow::Borrowed(f)) => {
                    let node = scalar_node(f);
                    let ty = resolve(&node)?;
                    new_layouts.push(Layout {
                        fields: f,
                        node,
                        ty,
                    });
                    Src::Shared(self.layouts.len() + new_layouts.len() - 1)
                }
                (None, Cow::Owned(f)) => {
                    let node = scalar_node(f);
                    let ty = resolve(&node)?;
                    own.push((node, ty));
                    Src::Own(own.len() - 1)
                }
            };
            srcs.push(src);
        }
        self.layouts.append(&mut new_layouts);
        let layout = |s: &Src| match *s {
            Src::Shared(i) => (&self.layouts[i].node, &self.layouts[i].ty),
            Src::Own(i) => (&own[i].0, &own[i].1),
        };
        let events = ix
            .iter()
            .zip(&srcs)
            .map(|(&k, s)| (&pnames[pending[k].name.clone()], layout(s).0.as_ref()));
        let checksum = eventdefs::checksum_of(cat, events)
            .map_err(|m| werr(&self.target, format!("generated eventdefs for {cat}: {m}")))?;
        let tys = srcs.iter().map(|s| layout(s).1.clone()).collect();
        // The events' names in one string, each behind its own '\n' (a
        // sanitized name has none): a string per event is what this saves.
        let mut names = String::new();
        for &k in ix {
            names.push('\n');
            names.push_str(&pnames[pending[k].name.clone()]);
        }
        let fac = Facility {
            name: cat.to_string(),
            description: None,
            events: Vec::new(),
            types: HashMap::new(),
            checksum,
            file: String::new(),
        };
        Ok(Some((fac, tys, names)))
    }

    fn ensure_file(&mut self, key: &FileKey) -> Result<()> {
        if !self.files.contains_key(key) {
            let path = self.dir.join(key.rel());
            let f = File::create(&path).map_err(|e| Error::io(&path, e))?;
            self.files.insert(
                key.clone(),
                FileW {
                    path,
                    out: BufWriter::with_capacity(1 << 16, f),
                    block: Vec::with_capacity(self.cfg.block_size as usize),
                    open: false,
                    index: 0,
                    cur: 0,
                    hb_budget: HB_ALLOWANCE,
                },
            );
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn write_event(
        &mut self,
        key: Key,
        time: i64,
        stream: Option<&str>,
        cpu: Option<u32>,
        fields: &[Value],
        source: Option<&str>,
    ) -> Result<()> {
        self.seal()?;
        // The target is borrowed, not cloned: this runs once per event.
        let (id, ty, name) = match self.map.get(&key) {
            None => {
                self.loss.drop_item("events", "event type never defined");
                return Ok(());
            }
            Some(Target::Framing) => return Ok(()),
            Some(Target::FacilityLoad) if stream == Some("control/facilities") => return Ok(()),
            Some(Target::FacilityLoad) => {
                self.loss.drop_item(
                    "events",
                    "facility_load in a cpu file (regenerated in control/facilities)",
                );
                return Ok(());
            }
            Some(Target::Event { id, ty, fac, ev }) => (*id, ty, (*fac, *ev)),
        };
        if time < 0 || time / 1_000_000_000 > u32::MAX as i64 {
            self.loss
                .drop_item("events", "time outside the LTT range (1970..2106)");
            return Ok(());
        }
        self.payload.clear();
        let tag = self.tag_source.then(|| source.unwrap_or(""));
        let enc = encode_fields(ty.as_deref(), fields, tag, self.bo, &mut self.payload);
        if enc.is_err() {
            self.loss
                .drop_item("events", "field values do not match the event type");
            return Ok(());
        }
        let b = self.cfg.block_size as usize;
        if HDR + self.payload.len() + 2 * FRAME + 4 > b {
            let f = &self.facs[name.0];
            return Err(werr(
                &self.target,
                format!(
                    "event {}.{} ({} payload bytes) does not fit in a block of {b} bytes (largest payload {})",
                    f.fac.name,
                    f.event_name(name.1),
                    self.payload.len(),
                    b - 62
                ),
            ));
        }
        let fkey = match stream.and_then(stream_key) {
            Some(k) => k,
            None => FileKey::Cpu(cpu.unwrap_or(0)),
        };
        let (_, clamped) = self.put(&fkey, id, time as u64)?;
        if clamped {
            self.loss.degrade(
                "events",
                "earlier than the previous event of its tracefile: time clamped",
            );
        }
        self.loss.wrote("events", 1);
        Ok(())
    }

    /// The counter an event at `time` gets in tracefile `fkey`: never
    /// earlier than the previous event of its block.
    fn counter_for(&self, fkey: &FileKey, time: u64) -> u64 {
        match self.files.get(fkey) {
            Some(f) if f.open && time < f.cur => f.cur,
            _ => time,
        }
    }

    /// The tracefile `fkey` open for events at `time`: the counter they get.
    fn open_at(&mut self, fkey: &FileKey, time: u64) -> Result<u64> {
        if let FileKey::Cpu(n) = *fkey {
            self.max_cpu = Some(self.max_cpu.map_or(n, |m| m.max(n)));
        }
        let counter = self.counter_for(fkey, time);
        self.ensure_file(fkey)?;
        Ok(counter)
    }

    /// Append `self.payload` as event `id` to tracefile `fkey` at `time`;
    /// returns the counter written and whether `time` had to be clamped.
    fn put(&mut self, fkey: &FileKey, id: u16, time: u64) -> Result<(u64, bool)> {
        let counter = self.open_at(fkey, time)?;
        let Some(f) = self.files.get_mut(fkey) else {
            return Err(werr(&self.target, "internal: tracefile missing"));
        };
        if append(f, &self.payload, counter, id, self.bo, &self.cfg)? {
            self.loss.degrade("events", RESYNC_BRIDGED);
        }
        self.min_time = Some(self.min_time.map_or(counter, |m| m.min(counter)));
        Ok((counter, counter != time))
    }

    /// Append events to tracefile `fkey` at `time`, as `put` does one by
    /// one: event `spans[i].0` with the payload `bytes[spans[i-1].1..spans[i].1]`.
    fn put_all(
        &mut self,
        fkey: &FileKey,
        time: u64,
        bytes: &[u8],
        spans: &[(u16, usize)],
    ) -> Result<()> {
        if spans.is_empty() {
            return Ok(());
        }
        let counter = self.open_at(fkey, time)?;
        let Some(f) = self.files.get_mut(fkey) else {
            return Err(werr(&self.target, "internal: tracefile missing"));
        };
        let mut start = 0;
        for &(id, end) in spans {
            if append(f, &bytes[start..end], counter, id, self.bo, &self.cfg)? {
                self.loss.degrade("events", RESYNC_BRIDGED);
            }
            start = end;
        }
        self.min_time = Some(self.min_time.map_or(counter, |m| m.min(counter)));
        self.loss.wrote("events", spans.len() as u64);
        Ok(())
    }

    fn write_sample(&mut self, s: &crate::model::Sample) -> Result<()> {
        self.seal()?;
        for mv in &s.metrics {
            let Ok(vals) = &mv.values else {
                self.loss
                    .drop_item("sample values", "error code instead of a value");
                continue;
            };
            if !self.map.contains_key(&Key::Metric(mv.metric)) {
                self.loss
                    .drop_item("sample values", "metric type not representable in LTT");
                continue;
            }
            for (inst, v) in vals {
                let fields = [Value::I64(*inst as i64), v.clone()];
                self.write_event(
                    Key::Metric(mv.metric),
                    s.time.0,
                    None,
                    Some(0),
                    &fields,
                    s.extras.str(crate::model::keys::SOURCE),
                )?;
            }
        }
        Ok(())
    }

    fn write_facilities_file(&mut self) -> Result<()> {
        let key = FileKey::Control("facilities".into());
        self.ensure_file(&key)?;
        let t = self.min_time.unwrap_or(0);
        let mut order: Vec<usize> = (0..self.facs.len()).collect();
        order.sort_by_key(|&i| self.facs[i].base);
        let b = self.cfg.block_size as usize;
        for i in order {
            let f = &self.facs[i];
            let mut p = Vec::new();
            p.extend_from_slice(f.fac.name.as_bytes());
            p.push(0);
            self.bo.put_uint(&mut p, f.fac.checksum as u64, 4);
            self.bo.put_uint(&mut p, f.base as u64, 4);
            if HDR + p.len() + 2 * FRAME + 4 > b {
                return Err(werr(
                    &self.target,
                    format!(
                        "facility_load of {} does not fit in a block of {b} bytes",
                        f.fac.name
                    ),
                ));
            }
            let Some(fw) = self.files.get_mut(&key) else {
                break;
            };
            append(fw, &p, t, layout::ID_FACILITY_LOAD, self.bo, &self.cfg)?;
        }
        Ok(())
    }
}

/// Encode an event's field values by its payload layout.
/// `tag`: a merged stream's source name, written into the type's last
/// field `source` (`SOURCE_FIELD`) when it has one beyond `fields`.
fn encode_fields(
    ty: Option<&Ty>,
    fields: &[Value],
    tag: Option<&str>,
    bo: Bo,
    out: &mut Vec<u8>,
) -> std::result::Result<(), String> {
    match ty {
        None => Ok(()),
        Some(Ty::Struct(fs))
            if tag.is_some()
                && fs.len() == fields.len() + 1
                && fs.last().is_some_and(|f| f.0 == SOURCE_FIELD) =>
        {
            let src = Value::Str(tag.unwrap_or("").to_string());
            fs.iter()
                .zip(fields.iter().chain(std::iter::once(&src)))
                .try_for_each(|((_, t), v)| layout::encode(t, v, bo, out))
        }
        Some(Ty::Struct(fs)) => {
            if fs.len() != fields.len() {
                Err(format!(
                    "{} fields given for {} members",
                    fields.len(),
                    fs.len()
                ))
            } else {
                fs.iter()
                    .zip(fields)
                    .try_for_each(|((_, t), v)| layout::encode(t, v, bo, out))
            }
        }
        Some(t) => match fields.first() {
            Some(v) => layout::encode(t, v, bo, out),
            None => Err("missing payload value".into()),
        },
    }
}

fn put_stamp(o: &mut Vec<u8>, bo: Bo, counter: u64) {
    bo.put_uint(o, counter / 1_000_000_000, 4);
    bo.put_uint(o, counter % 1_000_000_000, 4);
    bo.put_uint(o, counter, 8);
}

fn start_block(f: &mut FileW, counter: u64, bo: Bo) {
    f.block.clear();
    bo.put_uint(&mut f.block, ID_BLOCK_START as u64, 2);
    bo.put_uint(&mut f.block, counter & 0xFFFF_FFFF, 4);
    put_stamp(&mut f.block, bo, counter);
    bo.put_uint(&mut f.block, f.index as u64, 4);
    f.cur = counter;
    f.open = true;
}

fn close_block(f: &mut FileW, bo: Bo, cfg: &Config) -> Result<()> {
    if !f.open {
        return Ok(());
    }
    let b = cfg.block_size as usize;
    let e = f.block.len();
    bo.put_uint(&mut f.block, ID_BLOCK_END as u64, 2);
    bo.put_uint(&mut f.block, f.cur & 0xFFFF_FFFF, 4);
    put_stamp(&mut f.block, bo, f.cur);
    bo.put_uint(&mut f.block, f.index as u64, 4);
    f.block.resize(b - 4, 0);
    let trailer = match cfg.trailer {
        Trailer::EraA => b - e,
        Trailer::EraB => b - 4 - (e + FRAME),
        Trailer::Literal => e,
    };
    bo.put_uint(&mut f.block, trailer as u64, 4);
    f.out
        .write_all(&f.block)
        .map_err(|er| Error::io(&f.path, er))?;
    f.index = f.index.wrapping_add(1);
    f.open = false;
    Ok(())
}

/// Append one event, opening and closing blocks as needed. A gap of 2^32
/// counts or more is bridged by heartbeats 2^32 - 1 apart (what every reader
/// of the era understands) while the file's heartbeat budget lasts; past it,
/// by one heartbeat carrying the event's full counter (spec 5.5 rule 3), so
/// the bytes written stay bounded by the events, not by the time they span.
/// Returns true when such a resync heartbeat was written.
#[inline]
fn append(
    f: &mut FileW,
    payload: &[u8],
    counter: u64,
    id: u16,
    bo: Bo,
    cfg: &Config,
) -> Result<bool> {
    // The common case, inline: another event at the counter of the
    // previous one, with room in the open block (what `append_any` does then).
    let b = cfg.block_size as usize;
    if f.open && counter == f.cur && f.block.len() + HDR + payload.len() + FRAME + 4 <= b {
        put_event(f, payload, counter, id, bo, b);
        return Ok(false);
    }
    append_any(f, payload, counter, id, bo, cfg)
}

/// The event header and payload, into the open block.
#[inline]
fn put_event(f: &mut FileW, payload: &[u8], counter: u64, id: u16, bo: Bo, b: usize) {
    bo.put_uint(&mut f.block, id as u64, 2);
    bo.put_uint(&mut f.block, counter & 0xFFFF_FFFF, 4);
    f.block.extend_from_slice(payload);
    f.cur = counter;
    f.hb_budget = f
        .hb_budget
        .saturating_add((HDR + payload.len()) as u64)
        .min(HB_ALLOWANCE.max(b as u64));
}

/// [`append`] in every case.
fn append_any(
    f: &mut FileW,
    payload: &[u8],
    counter: u64,
    id: u16,
    bo: Bo,
    cfg: &Config,
) -> Result<bool> {
    let b = cfg.block_size as usize;
    let room = |f: &FileW, n: usize| f.block.len() + n + FRAME + 4 <= b;
    if !f.open {
        start_block(f, counter, bo);
    }
    let mut resync = false;
    let gap = counter.saturating_sub(f.cur);
    if gap >= 1 << 32 {
        let needed = (gap / ((1 << 32) - 1)).saturating_mul(HEARTBEAT as u64);
        let spaced = needed <= f.hb_budget;
        if spaced {
            f.hb_budget -= needed;
        }
        while counter.saturating_sub(f.cur) >= 1 << 32 {
            if !room(f, HEARTBEAT) {
                close_block(f, bo, cfg)?;
                start_block(f, counter, bo);
                break;
            }
            let hb = if spaced {
                f.cur + (1 << 32) - 1
            } else {
                resync = true;
                counter
            };
            put_heartbeat(f, hb, bo);
        }
    }
    if !room(f, HDR + payload.len()) {
        close_block(f, bo, cfg)?;
        start_block(f, counter, bo);
    }
    put_event(f, payload, counter, id, bo, b);
    Ok(resync)
}

fn put_heartbeat(f: &mut FileW, hb: u64, bo: Bo) {
    bo.put_uint(&mut f.block, ID_HEARTBEAT as u64, 2);
    bo.put_uint(&mut f.block, hb & 0xFFFF_FFFF, 4);
    put_stamp(&mut f.block, bo, hb);
    f.cur = hb;
}

impl TraceWriter for LttWriter {
    fn write_item(&mut self, item: &Item) -> Result<()> {
        match item {
            Item::EventType(et) => self.define_type(et),
            Item::Metric(m) => self.define_metric(m),
            Item::EventRun(r) => r.each_item(|it| self.write_item(it))?,
            _ if self.sd.is_some() => self.describe_item(item)?,
            Item::Event(e) => self.write_event(
                Key::Type(e.type_id),
                e.time.0,
                e.stream.as_deref(),
                e.cpu,
                &e.fields,
                e.extras.str(crate::model::keys::SOURCE),
            )?,
            Item::Sample(s) => self.write_sample(s)?,
            Item::Indom(u) => self.write_indom(u)?,
            Item::Help(_) | Item::Labels(_) | Item::Mark(_) | Item::Annotation(_) => {
                note_dropped(&mut self.loss, super::WRITES, item)
            }
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<LossReport> {
        self.seal()?;
        self.finish_describe()?;
        let (bo, cfg) = (self.bo, self.cfg.clone());
        for f in self.files.values_mut() {
            close_block(f, bo, &cfg)?;
            f.out.flush().map_err(|e| Error::io(&f.path, e))?;
        }
        self.write_facilities_file()?;
        if let Some(f) = self.files.get_mut(&FileKey::Control("facilities".into())) {
            close_block(f, bo, &cfg)?;
            f.out.flush().map_err(|e| Error::io(&f.path, e))?;
        }
        for n in ["interrupts", "processes"] {
            self.ensure_file(&FileKey::Control(n.into()))?;
        }
        for (name, raw) in &self.copied {
            let p = self.dir.join("eventdefs").join(name);
            std::fs::write(&p, raw).map_err(|e| Error::io(&p, e))?;
        }
        let h = &self.header;
        let cpu = self.max_cpu.map_or(1, |m| m as u64 + 1);
        let vals = |k: &str| -> String {
            match k {
                "cpu" => cpu.to_string(),
                "arch_size" => cfg.arch.name().to_string(),
                "endian" => if cfg.big_endian {
                    "BIG_ENDIAN"
                } else {
                    "LITTLE_ENDIAN"
                }
                .to_string(),
                "ltt_major_version" => "2".into(),
                "ltt_minor_version" => "0".into(),
                "ltt_block_size" => cfg.block_size.to_string(),
                k => h
                    .system
                    .iter()
                    .find(|(n, _)| n == k)
                    .map(|(_, v)| v.clone())
                    .or_else(|| (k == "node_name").then(|| h.host.clone()).flatten())
                    .unwrap_or_else(|| "unknown".into()),
            }
        };
        let desc = match &self.sd {
            // Said in words for LTT readers; the exact header is in control/polytrace.
            Some(_) => format!(
                "Converted by polytrace from a {} stream (version {}); time base: {}. The polytrace facility carries that stream exactly.",
                h.source,
                h.version,
                h.time_base.describe()
            ),
            None => h.extras.str(keys::DESCRIPTION).unwrap_or("").to_string(),
        };
        let sx = system::write(&vals, &desc);
        let p = self.dir.join("info/system.xml");
        std::fs::write(&p, sx).map_err(|e| Error::io(&p, e))?;
        if let Some(b) = h.extras.bytes(keys::BOOKMARKS) {
            let p = self.dir.join("info/bookmarks.xml");
            std::fs::write(&p, b).map_err(|e| Error::io(&p, e))?;
        }
        drop(std::mem::take(&mut self.files));
        if let Some(tmp) = self.tar_tmp.take() {
            write_tar_gz(&self.dir, &self.target)?;
            drop(tmp);
        }
        Ok(std::mem::take(&mut self.loss))
    }
}

/// Pack `dir` (inside `root`) into a .tar.gz at `target`, deterministically
/// (sorted names, zero mtimes) so that a second write is byte-identical.
fn write_tar_gz(dir: &Path, target: &Path) -> Result<()> {
    let out = File::create(target).map_err(|e| Error::io(target, e))?;
    let gz = flate2::write::GzEncoder::new(BufWriter::new(out), flate2::Compression::default());
    let mut ar = tar::Builder::new(gz);
    let mut entries: Vec<PathBuf> = walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .filter_map(|e| e.ok())
        .map(|e| e.into_path())
        .collect();
    entries.sort();
    for p in entries {
        // Entries at the top level of the archive, so its bytes do not
        // depend on the archive's own name.
        let rel = p.strip_prefix(dir).unwrap_or(&p).to_path_buf();
        if rel.as_os_str().is_empty() {
            continue;
        }
        let md = std::fs::metadata(&p).map_err(|e| Error::io(&p, e))?;
        let mut h = tar::Header::new_gnu();
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        if md.is_dir() {
            h.set_entry_type(tar::EntryType::Directory);
            h.set_mode(0o755);
            h.set_size(0);
            h.set_cksum();
            ar.append_data(&mut h, &rel, std::io::empty())
                .map_err(|e| Error::io(target, e))?;
        } else {
            h.set_entry_type(tar::EntryType::Regular);
            h.set_mode(0o644);
            h.set_size(md.len());
            h.set_cksum();
            let f = File::open(&p).map_err(|e| Error::io(&p, e))?;
            ar.append_data(&mut h, &rel, f)
                .map_err(|e| Error::io(target, e))?;
        }
    }
    let gz = ar.into_inner().map_err(|e| Error::io(target, e))?;
    let mut w = gz.finish().map_err(|e| Error::io(target, e))?;
    w.flush().map_err(|e| Error::io(target, e))?;
    Ok(())
}

fn stream_key(s: &str) -> Option<FileKey> {
    if let Some(n) = s.strip_prefix("cpu/") {
        return paths::canonical_cpu(n).map(FileKey::Cpu);
    }
    if let Some(n) = s.strip_prefix("control/") {
        if n != "facilities"
            && n != selfdesc::CONTROL_FILE
            && !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Some(FileKey::Control(n.to_string()));
        }
    }
    None
}

fn size_of(n: u8) -> u8 {
    match n {
        1 | 2 | 4 | 8 => n,
        _ => 8,
    }
}

fn type_xml(t: &FieldType, o: &mut String) {
    use std::fmt::Write as _;
    // Writing into a String cannot fail.
    let _ = match t {
        FieldType::Int(n) => write!(o, "<int size={}/>", size_of(*n)),
        FieldType::Uint(n) => write!(o, "<uint size={}/>", size_of(*n)),
        FieldType::Float(n) => write!(o, "<float size={}/>", if *n == 4 { 4 } else { 8 }),
        FieldType::String => write!(o, "<string/>"),
        FieldType::Bytes => write!(o, "<sequence lengthsize=4><uint size=1/></sequence>"),
        FieldType::Enum { size, labels } => {
            let _ = write!(o, "<enum size={}>", size_of(*size));
            for (v, l) in labels {
                let _ = write!(o, "<label name=\"{}\" value={v}/>", sanitized(l));
            }
            write!(o, "</enum>")
        }
        FieldType::Array { len, elem } => {
            let _ = write!(o, "<array size={len}>");
            type_xml(elem, o);
            write!(o, "</array>")
        }
        FieldType::Sequence { len, elem } => {
            let n = match **len {
                FieldType::Int(n) | FieldType::Uint(n) => size_of(n),
                _ => 4,
            };
            let _ = write!(o, "<sequence lengthsize={n}>");
            type_xml(elem, o);
            write!(o, "</sequence>")
        }
        FieldType::Struct(fs) | FieldType::Union(fs) => {
            let union = matches!(t, FieldType::Union(_));
            o.push_str(if union {
                "<union typecodesize=4>"
            } else {
                "<struct>"
            });
            for f in fs {
                let _ = write!(o, "<field name=\"{}\">", sanitized(&f.name));
                type_xml(&f.ty, o);
                o.push_str("</field>");
            }
            write!(o, "{}", if union { "</union>" } else { "</struct>" })
        }
    };
}

/// The eventdefs text of a generated facility `cat` of `types`.
fn facility_xml<'a>(
    cat: &str,
    source: &dyn std::fmt::Display,
    pnames: &str,
    types: impl Iterator<Item = &'a Pending>,
) -> String {
    use std::fmt::Write as _;
    let mut xml = String::new();
    let _ = write!(
        xml,
        "<facility name=\"{cat}\">\n  <description>Generated by polytrace from a {source} stream</description>\n"
    );
    for p in types {
        let _ = write!(
            xml,
            "  <event name=\"{}\">\n    <description>",
            &pnames[p.name.clone()]
        );
        p.description.write(&mut xml);
        xml.push_str("</description>\n");
        if !p.fields.is_empty() {
            xml.push_str("    <struct>\n");
            for (fname, ft) in p.fields.iter() {
                let _ = write!(xml, "      <field name=\"{fname}\">");
                type_xml(ft, &mut xml);
                xml.push_str("</field>\n");
            }
            xml.push_str("    </struct>\n");
        }
        xml.push_str("  </event>\n");
    }
    xml.push_str("</facility>\n");
    xml
}

/// The eventdefs node of a scalar field type (as its text parses), None
/// for the others.
fn scalar_kind(t: &FieldType) -> Option<eventdefs::Kind> {
    use eventdefs::{Kind, SizeTok, TypeNode};
    let size = |n: u8| SizeTok::from_bytes(size_of(n));
    Some(match t {
        FieldType::Int(n) => Kind::Int(size(*n)),
        FieldType::Uint(n) => Kind::Uint(size(*n)),
        FieldType::Float(4) => Kind::Float(SizeTok::B4),
        FieldType::Float(_) => Kind::Float(SizeTok::B8),
        FieldType::String => Kind::String,
        FieldType::Bytes => Kind::Sequence {
            lensize: SizeTok::B4,
            elem: Box::new(TypeNode {
                kind: Kind::Uint(SizeTok::B1),
                format: None,
            }),
        },
        _ => return None,
    })
}

/// The payload node of scalar `fields` (a struct of them; None without
/// fields), as `facility_xml`'s text parses.
fn scalar_node(fields: &[(Cow<'static, str>, FieldType)]) -> Option<eventdefs::TypeNode> {
    use eventdefs::{FieldDef, Kind, TypeNode};
    if fields.is_empty() {
        return None;
    }
    let fields = fields
        .iter()
        .filter_map(|(name, t)| {
            Some(FieldDef {
                name: name.to_string(),
                description: None,
                ty: TypeNode {
                    kind: scalar_kind(t)?,
                    format: None,
                },
            })
        })
        .collect();
    Some(TypeNode {
        kind: Kind::Struct(fields),
        format: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(names: &mut String, name: &str, desc: &str, fields: Fields) -> Pending {
        let mut et = EventType::new(0, "cat", name, Vec::new());
        et.description = Some(desc.to_string());
        Pending {
            key: Key::Type(0),
            category: Cow::Borrowed("cat"),
            name: sanitize_into(names, name),
            description: DescFrom::Type(Arc::new(et)),
            fields,
        }
    }

    #[test]
    fn sanitized_names() {
        for (a, b) in [
            ("", "_"),
            ("ok_1", "ok_1"),
            ("1a", "_1a"),
            ("disk.dev.read", "disk_dev_read"),
            ("é-x", "__x"),
            ("٣", "_"),
        ] {
            assert_eq!(sanitize(a), b, "{a:?}");
            assert_eq!(matches!(sanitized(a), Cow::Borrowed(_)), a == b, "{a:?}");
            let mut o = String::from("x");
            let r = sanitize_into(&mut o, a);
            assert_eq!(&o[r], b);
        }
    }

    /// An event too large for a block is refused with its type's name, also
    /// when its facility was generated without keeping its events.
    #[test]
    fn too_large_event_names_its_type() {
        use crate::model::{Extras, MetricValues, Sample, Semantics, Timestamp, Units};
        let tmp = tempfile::tempdir().unwrap();
        let h = Header::new(crate::model::FormatId::Pcp, "3");
        let cfg = Config {
            block_size: 512,
            ..Config::default()
        };
        let mut w = LttWriter::create(&tmp.path().join("t"), &h, cfg).unwrap();
        for (id, name) in [(7, "disk.dev.name"), (8, "disk.dev.other")] {
            let m = MetricDesc::new(
                id,
                name,
                ValueType::String,
                Semantics::Instant,
                Units::default(),
            );
            w.write_item(&Item::Metric(Arc::new(m))).unwrap();
        }
        let s = Sample {
            time: Timestamp(1_000_000_000),
            raw_clock: None,
            metrics: vec![MetricValues {
                metric: 8,
                values: Ok(vec![(0, Value::Str("x".repeat(1000)))]),
            }],
            extras: Extras::default(),
        };
        let e = w.write_item(&Item::Sample(s)).unwrap_err().to_string();
        assert!(
            e.contains("event metric.disk_dev_other (1005 payload bytes)"),
            "{e}"
        );
    }

    /// A facility built directly has the event names and checksum its
    /// eventdefs text parses to, and the layouts of the parsed payloads,
    /// for every scalar field type, constant and built field lists, and
    /// the names and texts generated types can have; other types are left
    /// to the parse.
    #[test]
    fn direct_facility_is_the_parsed_one() {
        let tmp = tempfile::tempdir().unwrap();
        let h = Header::new(crate::model::FormatId::Pcp, "3");
        let mut w = LttWriter::create(&tmp.path().join("t"), &h, Config::default()).unwrap();
        let scalars = [
            FieldType::Int(1),
            FieldType::Int(2),
            FieldType::Int(4),
            FieldType::Int(8),
            FieldType::Int(3),
            FieldType::Uint(1),
            FieldType::Uint(8),
            FieldType::Uint(0),
            FieldType::Float(4),
            FieldType::Float(8),
            FieldType::Float(2),
            FieldType::String,
            FieldType::Bytes,
        ];
        let f = |n: &'static str, t: &FieldType| (Cow::Borrowed(n), t.clone());
        let n = &mut String::new();
        let one = Cow::Owned(vec![f("instance", &FieldType::Int(4))]);
        let text = "multi\nline // not a comment /* nor this */ \"quoted\" 'x'";
        let mut ps = vec![
            pending(
                n,
                "disk.dev.read",
                "Help <b>&amp; more</b>",
                Cow::Borrowed(&[]),
            ),
            pending(n, "9lives", "", one),
            pending(n, "indom_3", "m", Cow::Borrowed(INDOM_FIELDS)),
            pending(n, "é ü", text, Cow::Borrowed(&[])),
        ];
        for (i, t) in scalars.iter().enumerate() {
            let three = vec![
                f("instance", &FieldType::Int(4)),
                f("value", t),
                f("source", t),
            ];
            ps.push(pending(n, &format!("m{i}"), "d", Cow::Owned(three)));
            ps.push(pending(
                n,
                &format!("c{i}"),
                "",
                metric_fields(t.clone(), false),
            ));
            ps.push(pending(
                n,
                &format!("d{i}"),
                "",
                metric_fields(t.clone(), true),
            ));
        }
        let ix: Vec<usize> = (0..ps.len()).collect();
        let mut shared = Vec::new();
        for round in 0..2 {
            let xml = facility_xml("cat", &crate::model::FormatId::Pcp, n, ps.iter());
            let parsed = eventdefs::parse_file(xml.as_bytes(), "")
                .unwrap()
                .pop()
                .unwrap();
            let (direct, tys, names) = w.direct_facility("cat", n, &ps, &ix).unwrap().unwrap();
            assert_eq!(direct.name, parsed.name);
            assert_eq!(direct.checksum, parsed.checksum, "round {round}");
            let want: String = parsed
                .events
                .iter()
                .map(|e| format!("\n{}", e.name))
                .collect();
            assert_eq!(names, want);
            let want: Vec<Option<Ty>> = parsed
                .events
                .iter()
                .map(|e| {
                    e.payload
                        .as_ref()
                        .map(|p| eventdefs::resolve(&parsed, p, Config::default().arch).unwrap())
                })
                .collect();
            let got: Vec<Option<Ty>> = tys.iter().map(|t| t.as_deref().cloned()).collect();
            assert_eq!(got, want);
            shared.push(w.layouts.len());
        }
        // The constant lists' layouts were built once: the second round
        // found them all (8 lists of metrics and instance domains at least).
        assert!(shared[0] >= 8);
        assert_eq!(shared[0], shared[1]);

        let nested = FieldType::Array {
            len: 2,
            elem: Box::new(FieldType::Int(4)),
        };
        let ps = vec![pending(n, "a", "b", Cow::Owned(vec![f("v", &nested)]))];
        assert!(w.direct_facility("cat", n, &ps, &[0]).unwrap().is_none());
    }
}
