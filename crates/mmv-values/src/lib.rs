//! Export live metrics through a PCP MMV file, as libpcp_mmv does: declare
//! every metric, instance domain and label first, then [`Builder::start`]
//! lays the file out once; updates are single stores into the mapping,
//! through typed handles. pmcd's MMV PMDA serves the values as
//! `mmv.NAME.METRIC`.
//!
//! ```no_run
//! use mmv_values::{Builder, Semantics, Units, U64, Str};
//! let mut b = Builder::new("myapp");
//! let hits = b.metric::<U64>("hits", Semantics::Counter, Units::count(), "requests served");
//! let phase = b.metric::<Str>("phase", Semantics::Discrete, Units::NONE, "what it is doing");
//! let mmv = b.start().unwrap();
//! let (hits, phase) = (mmv.value(hits), mmv.value(phase));
//! phase.set("serving");
//! hits.inc();
//! ```
//!
//! The file (layout of PCP's `mmv_dev.h`, host byte order): header, table
//! of contents, instance domains, instances, metrics, values, strings,
//! labels, in that order, as libpcp_mmv writes them. Version 1 unless a
//! metric or instance name needs 64 characters or more (then 2), 3 when
//! there are labels; [`Builder::version`] asks for a higher one.
//!
//! It is built under a hidden name in the same directory (the PMDA skips
//! names starting with `.`), its generation g2 is set equal to g1 last,
//! behind a Release fence, and only then is it renamed to its own name: the
//! PMDA never maps a part-made file, and a re-created file has a new
//! generation, so the PMDA reloads it.
//!
//! One writer per value: [`Value::add`] is a load and a store, not an
//! atomic read-modify-write (as libpcp_mmv's `mmv_inc`); use
//! [`Value::add_shared`] when several threads update the same value.

use memmap2::MmapMut;
use std::fs::OpenOptions;
use std::io;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

const HDR_SIZE: usize = 40;
const TOC_SIZE: usize = 16;
const INDOM_SIZE: usize = 32;
const INST1_SIZE: usize = 80;
const INST2_SIZE: usize = 24;
const METRIC1_SIZE: usize = 104;
const METRIC2_SIZE: usize = 48;
const VALUE_SIZE: usize = 32;
const STRING_SIZE: usize = 256;
const LABEL_SIZE: usize = 256;
/// Names shorter than this fit v1's in-place fields.
const NAMEMAX: usize = 64;
const LABELMAX: usize = 244;

const TOC_INDOMS: i32 = 1;
const TOC_INSTANCES: i32 = 2;
const TOC_METRICS: i32 = 3;
const TOC_VALUES: i32 = 4;
const TOC_STRINGS: i32 = 5;
const TOC_LABELS: i32 = 6;

/// Header flags.
pub const FLAG_NOPREFIX: u32 = 0x1;
pub const FLAG_PROCESS: u32 = 0x2;
pub const FLAG_SENTINEL: u32 = 0x4;

/// Label kinds (the LABELS section's flags).
pub const LABEL_CLUSTER: u32 = 0x08;
pub const LABEL_INDOM: u32 = 0x04;
pub const LABEL_ITEM: u32 = 0x10;
pub const LABEL_INSTANCES: u32 = 0x20;
pub const LABEL_OPTIONAL: u32 = 0x80;

#[derive(Debug)]
pub enum Error {
    Io(PathBuf, io::Error),
    /// A declaration the MMV format or the PMDA cannot take.
    Invalid(String),
    /// The path exists and is not an MMV file.
    NotMmv(PathBuf),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io(p, e) => write!(f, "{}: {e}", p.display()),
            Error::Invalid(s) => f.write_str(s),
            Error::NotMmv(p) => write!(
                f,
                "{}: exists and is not an MMV file; not replacing it",
                p.display()
            ),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// PCP semantics of a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Semantics {
    Counter = 1,
    Instant = 3,
    Discrete = 4,
}

/// A pmUnits word (dimensions and scales), as stored in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Units(pub u32);

impl Units {
    pub const NONE: Units = Units(0);
    /// dimSpace, dimTime, dimCount (signed 4 bits each) and their scales.
    pub const fn new(
        space: i8,
        time: i8,
        count: i8,
        s_space: u8,
        s_time: u8,
        s_count: i8,
    ) -> Units {
        Units(
            ((space as u32 & 0xf) << 28)
                | ((time as u32 & 0xf) << 24)
                | ((count as u32 & 0xf) << 20)
                | ((s_space as u32 & 0xf) << 16)
                | ((s_time as u32 & 0xf) << 12)
                | ((s_count as u32 & 0xf) << 8),
        )
    }
    pub const fn count() -> Units {
        Units::new(0, 0, 1, 0, 0, 0)
    }
    pub const fn bytes() -> Units {
        Units::new(1, 0, 0, 0, 0, 0)
    }
    pub const fn kbytes() -> Units {
        Units::new(1, 0, 0, 1, 0, 0)
    }
    pub const fn microseconds() -> Units {
        Units::new(0, 1, 0, 0, 1, 0)
    }
    pub const fn milliseconds() -> Units {
        Units::new(0, 1, 0, 0, 2, 0)
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A metric's value type (the marker types below).
pub trait Kind: sealed::Sealed {
    const CODE: i32;
}

macro_rules! kinds {
    ($($t:ident = $c:expr, $doc:expr;)*) => {$(
        #[doc = $doc]
        #[derive(Debug, Clone, Copy)]
        pub struct $t;
        impl sealed::Sealed for $t {}
        impl Kind for $t {
            const CODE: i32 = $c;
        }
    )*};
}

kinds! {
    I32 = 0, "32-bit signed integer.";
    U32 = 1, "32-bit unsigned integer.";
    I64 = 2, "64-bit signed integer.";
    U64 = 3, "64-bit unsigned integer.";
    F32 = 4, "Single-precision float.";
    F64 = 5, "Double-precision float.";
    Str = 6, "A string of at most 255 bytes.";
    Elapsed = 9, "A stopwatch in microseconds (PCP's ELAPSED type).";
}

/// An instance domain declared on a [`Builder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Indom(u32);

impl Indom {
    pub fn serial(self) -> u32 {
        self.0
    }
}

/// A metric declared on a [`Builder`]; [`Mmv::value`] and
/// [`Mmv::instance`] turn it into an update handle once the file exists.
#[derive(Debug)]
pub struct Decl<T> {
    index: usize,
    _t: PhantomData<T>,
}

impl<T> Clone for Decl<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Decl<T> {}

#[derive(Debug, Clone)]
struct MetricDef {
    name: String,
    item: u32,
    code: i32,
    sem: Semantics,
    units: Units,
    /// Index into `indoms`.
    indom: Option<usize>,
    short_help: String,
    long_help: String,
}

#[derive(Debug, Clone)]
struct IndomDef {
    serial: u32,
    instances: Vec<(i32, String)>,
    short_help: String,
    long_help: String,
}

#[derive(Debug, Clone)]
struct LabelDef {
    flags: u32,
    identity: u32,
    internal: i32,
    json: String,
}

/// Where `$PCP_TMP_DIR` is: the environment, else pcp.conf, else PCP's
/// default (`/var/lib/pcp/tmp`).
pub fn pcp_tmp_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("PCP_TMP_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let conf = std::env::var_os("PCP_CONF").map_or_else(|| "/etc/pcp.conf".into(), PathBuf::from);
    if let Ok(text) = std::fs::read_to_string(conf) {
        for line in text.lines() {
            if let Some(v) = line.strip_prefix("PCP_TMP_DIR=") {
                return PathBuf::from(v.trim());
            }
        }
    }
    PathBuf::from("/var/lib/pcp/tmp")
}

/// Declarations of one MMV file.
#[derive(Debug, Clone)]
pub struct Builder {
    path: PathBuf,
    cluster: u32,
    flags: u32,
    min_version: i32,
    metrics: Vec<MetricDef>,
    indoms: Vec<IndomDef>,
    labels: Vec<LabelDef>,
    errors: Vec<String>,
}

impl Builder {
    /// A file `$PCP_TMP_DIR/mmv/NAME` (or NAME itself when it starts with
    /// `/`, as libpcp_mmv does). The PMDA names its metrics
    /// `mmv.NAME.METRIC`, so NAME should be letters, digits and `_`.
    pub fn new(name: &str) -> Builder {
        let path = if name.starts_with('/') {
            PathBuf::from(name)
        } else {
            pcp_tmp_dir().join("mmv").join(name)
        };
        Builder::at(path)
    }

    /// A file at `path`.
    pub fn at(path: impl Into<PathBuf>) -> Builder {
        Builder {
            path: path.into(),
            cluster: 0,
            flags: 0,
            min_version: 1,
            metrics: Vec::new(),
            indoms: Vec::new(),
            labels: Vec::new(),
            errors: Vec::new(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The PMID cluster to ask the PMDA for (1..4095; 0 = its choice).
    pub fn cluster(&mut self, cluster: u32) -> &mut Self {
        if cluster > 4095 {
            self.errors.push(format!("cluster {cluster} is above 4095"));
        }
        self.cluster = cluster;
        self
    }

    /// Header flags ([`FLAG_PROCESS`]: the PMDA drops the file when this
    /// process is gone, and dropping the [`Mmv`] removes it; [`FLAG_NOPREFIX`];
    /// [`FLAG_SENTINEL`]).
    pub fn flags(&mut self, flags: u32) -> &mut Self {
        self.flags = flags;
        self
    }

    /// Write at least this version (1, 2 or 3).
    pub fn version(&mut self, v: i32) -> &mut Self {
        if !(1..=3).contains(&v) {
            self.errors.push(format!("MMV version {v}: 1, 2 or 3"));
        }
        self.min_version = v;
        self
    }

    /// An instance domain with its instances (internal id, external name)
    /// and help texts. Serials are numbered from 1 in declaration order.
    pub fn indom(&mut self, instances: &[(i32, &str)], short_help: &str, long_help: &str) -> Indom {
        let serial = self.indoms.len() as u32 + 1;
        let mut ids = std::collections::HashSet::new();
        for (id, name) in instances {
            if !ids.insert(*id) {
                self.errors.push(format!(
                    "instance id {id} twice in instance domain {serial}"
                ));
            }
            if name.is_empty() || name.len() >= STRING_SIZE {
                self.errors.push(format!(
                    "instance name {name:?}: 1 to {} bytes",
                    STRING_SIZE - 1
                ));
            }
        }
        self.indoms.push(IndomDef {
            serial,
            instances: instances.iter().map(|(i, n)| (*i, n.to_string())).collect(),
            short_help: short_help.into(),
            long_help: long_help.into(),
        });
        Indom(serial)
    }

    fn add<T: Kind>(
        &mut self,
        name: &str,
        indom: Option<Indom>,
        sem: Semantics,
        units: Units,
        short_help: &str,
        long_help: &str,
    ) -> Decl<T> {
        let index = self.metrics.len();
        let ok_name = !name.is_empty()
            && name.len() < STRING_SIZE
            && name.starts_with(|c: char| c.is_ascii_alphabetic())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        if !ok_name {
            self.errors.push(format!(
                "metric name {name:?}: a letter, then letters, digits, '_' and '.', under 256 bytes"
            ));
        }
        if self.metrics.iter().any(|m| m.name == name) {
            self.errors.push(format!("metric {name:?} declared twice"));
        }
        if index + 1 >= 1024 {
            self.errors
                .push("more than 1023 metrics in one file (items are 10 bits)".into());
        }
        let indom = indom.and_then(|i| {
            let k = (i.0 as usize)
                .checked_sub(1)
                .filter(|&k| k < self.indoms.len());
            if k.is_none() {
                self.errors
                    .push(format!("metric {name:?}: unknown instance domain {}", i.0));
            }
            k
        });
        for h in [short_help, long_help] {
            if h.len() >= STRING_SIZE {
                self.errors
                    .push(format!("metric {name:?}: help text over 255 bytes"));
            }
        }
        self.metrics.push(MetricDef {
            name: name.into(),
            item: index as u32 + 1,
            code: T::CODE,
            sem,
            units,
            indom,
            short_help: short_help.into(),
            long_help: long_help.into(),
        });
        Decl {
            index,
            _t: PhantomData,
        }
    }

    /// A metric with one value, with a one-line help text.
    pub fn metric<T: Kind>(
        &mut self,
        name: &str,
        sem: Semantics,
        units: Units,
        help: &str,
    ) -> Decl<T> {
        self.add(name, None, sem, units, help, "")
    }

    /// A metric with a value per instance of `indom`.
    pub fn metric_indom<T: Kind>(
        &mut self,
        name: &str,
        indom: Indom,
        sem: Semantics,
        units: Units,
        help: &str,
    ) -> Decl<T> {
        self.add(name, Some(indom), sem, units, help, "")
    }

    /// Set the long help text of a declared metric.
    pub fn long_help<T>(&mut self, d: Decl<T>, text: &str) -> &mut Self {
        if text.len() >= STRING_SIZE {
            self.errors.push("help text over 255 bytes".into());
        }
        self.metrics[d.index].long_help = text.into();
        self
    }

    fn label(&mut self, flags: u32, identity: u32, internal: i32, name: &str, json_value: &str) {
        let ok = name.starts_with(|c: char| c.is_ascii_alphabetic())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            self.errors.push(format!(
                "label name {name:?}: a letter, then letters, digits and '_'"
            ));
        }
        let json = format!("{{\"{name}\":{json_value}}}");
        if json.len() >= LABELMAX {
            self.errors
                .push(format!("label {json}: over {} bytes", LABELMAX - 1));
        }
        self.labels.push(LabelDef {
            flags,
            identity,
            internal,
            json,
        });
    }

    /// A label on the whole file (its cluster). `json_value` is a JSON
    /// value without insignificant whitespace: `"text"`, `42`, `true`.
    pub fn file_label(&mut self, name: &str, json_value: &str) -> &mut Self {
        let c = self.cluster;
        self.label(LABEL_CLUSTER, c, -1, name, json_value);
        self
    }
    pub fn indom_label(&mut self, indom: Indom, name: &str, json_value: &str) -> &mut Self {
        self.label(LABEL_INDOM, indom.0, -1, name, json_value);
        self
    }
    pub fn metric_label<T>(&mut self, d: Decl<T>, name: &str, json_value: &str) -> &mut Self {
        let item = self.metrics[d.index].item;
        self.label(LABEL_ITEM, item, -1, name, json_value);
        self
    }
    pub fn instance_label(
        &mut self,
        indom: Indom,
        inst: i32,
        name: &str,
        json_value: &str,
    ) -> &mut Self {
        self.label(LABEL_INSTANCES, indom.0, inst, name, json_value);
        self
    }

    /// The version the file will have.
    pub fn file_version(&self) -> i32 {
        let long = self.metrics.iter().any(|m| m.name.len() >= NAMEMAX)
            || self
                .indoms
                .iter()
                .any(|d| d.instances.iter().any(|(_, n)| n.len() >= NAMEMAX));
        let need = if !self.labels.is_empty() {
            3
        } else if long {
            2
        } else {
            1
        };
        need.max(self.min_version)
    }

    /// Lay the file out, write it under a hidden name, publish its
    /// generation and rename it into place. An existing MMV file of that
    /// name is replaced (the PMDA sees a new generation); any other file
    /// is refused.
    pub fn start(&self) -> Result<Mmv> {
        self.start_with(|_| {})
    }

    /// [`Builder::start`], with `init` setting first values through the
    /// handles before the file is published: readers never see the zeros.
    pub fn start_with(&self, init: impl FnOnce(&Mmv)) -> Result<Mmv> {
        if let Some(e) = self.errors.first() {
            return Err(Error::Invalid(e.clone()));
        }
        if self.metrics.is_empty() {
            return Err(Error::Invalid("no metrics declared".into()));
        }
        if self.path.exists() && !is_mmv_file(&self.path) {
            return Err(Error::NotMmv(self.path.clone()));
        }
        let lay = Plan::new(self);
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::Io(dir.to_path_buf(), e))?;
        }
        let tmp = staging_name(&self.path);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| Error::Io(tmp.clone(), e))?;
        let made = (|| {
            file.set_len(lay.len as u64)?;
            // SAFETY: our own new file, never truncated while mapped.
            let mut map = unsafe { MmapMut::map_mut(&file)? };
            let g1 = generation();
            lay.write(self, &mut map, g1);
            Ok((map, g1, file_id(&file.metadata()?)))
        })();
        let (map, g1, id) = match made {
            Ok(m) => m,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(Error::Io(self.path.clone(), e));
            }
        };
        let mmv = Mmv {
            inner: Arc::new(Inner {
                map,
                path: self.path.clone(),
                id,
                remove_on_drop: std::sync::atomic::AtomicBool::new(false),
            }),
            plan: Arc::new(lay),
            generation: g1,
        };
        init(&mmv);
        // Everything above must be visible before g2 says "complete".
        fence(Ordering::Release);
        // SAFETY: offset 16 of a page-aligned mapping: 8-aligned.
        unsafe { &*(mmv.inner.map.as_ptr().add(16) as *const AtomicU64) }
            .store(g1, Ordering::Release);
        if let Err(e) = std::fs::rename(&tmp, &self.path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::Io(self.path.clone(), e));
        }
        mmv.inner
            .remove_on_drop
            .store(self.flags & FLAG_PROCESS != 0, Ordering::Relaxed);
        Ok(mmv)
    }
}

/// Offsets of everything in the file.
#[derive(Debug)]
struct Plan {
    version: i32,
    len: usize,
    tocs: Vec<(i32, i32, usize)>,
    indoms_at: usize,
    insts_at: usize,
    /// First instance index of each indom.
    inst_first: Vec<usize>,
    metrics_at: usize,
    values_at: usize,
    /// First value index of each metric.
    value_first: Vec<usize>,
    strings_at: usize,
    labels_at: usize,
    n_values: usize,
    names: Vec<String>,
    codes: Vec<i32>,
    /// Instance ids of each metric's values (empty: singleton).
    inst_ids: Vec<Vec<i32>>,
    /// String slot of each metric's first STRING value.
    string_value_first: Vec<usize>,
}

impl Plan {
    fn new(b: &Builder) -> Plan {
        let version = b.file_version();
        let n_inst: usize = b.indoms.iter().map(|d| d.instances.len()).sum();
        let has_indoms = !b.indoms.is_empty();
        let n_values: usize = b
            .metrics
            .iter()
            .map(|m| m.indom.map_or(1, |i| b.indoms[i].instances.len()))
            .sum();
        let inst_size = if version == 1 { INST1_SIZE } else { INST2_SIZE };
        let metric_size = if version == 1 {
            METRIC1_SIZE
        } else {
            METRIC2_SIZE
        };
        // STRINGS slots, in libpcp_mmv's order.
        let mut n_strings = 0;
        if version > 1 {
            n_strings += n_inst + b.metrics.len();
        }
        let mut string_value_first = Vec::new();
        for m in &b.metrics {
            string_value_first.push(n_strings);
            if m.code == Str::CODE {
                n_strings += m.indom.map_or(1, |i| b.indoms[i].instances.len());
            }
        }
        for m in &b.metrics {
            n_strings += (!m.short_help.is_empty()) as usize + (!m.long_help.is_empty()) as usize;
        }
        for d in &b.indoms {
            n_strings += (!d.short_help.is_empty()) as usize + (!d.long_help.is_empty()) as usize;
        }
        let mut ntoc = 2;
        if has_indoms {
            ntoc += 2;
        }
        if n_strings > 0 {
            ntoc += 1;
        }
        if !b.labels.is_empty() {
            ntoc += 1;
        }
        let mut at = HDR_SIZE + TOC_SIZE * ntoc;
        let mut tocs = Vec::new();
        let indoms_at = at;
        let insts_at = indoms_at + INDOM_SIZE * b.indoms.len();
        if has_indoms {
            tocs.push((TOC_INDOMS, b.indoms.len() as i32, indoms_at));
            tocs.push((TOC_INSTANCES, n_inst as i32, insts_at));
            at = insts_at + inst_size * n_inst;
        }
        let metrics_at = at;
        tocs.push((TOC_METRICS, b.metrics.len() as i32, metrics_at));
        let values_at = metrics_at + metric_size * b.metrics.len();
        tocs.push((TOC_VALUES, n_values as i32, values_at));
        let strings_at = values_at + VALUE_SIZE * n_values;
        if n_strings > 0 {
            tocs.push((TOC_STRINGS, n_strings as i32, strings_at));
        }
        let labels_at = strings_at + STRING_SIZE * n_strings;
        if !b.labels.is_empty() {
            tocs.push((TOC_LABELS, b.labels.len() as i32, labels_at));
        }
        let len = labels_at + LABEL_SIZE * b.labels.len();
        let mut inst_first = Vec::new();
        let mut k = 0;
        for d in &b.indoms {
            inst_first.push(k);
            k += d.instances.len();
        }
        let mut value_first = Vec::new();
        let mut v = 0;
        let mut inst_ids = Vec::new();
        for m in &b.metrics {
            value_first.push(v);
            let ids: Vec<i32> = m.indom.map_or(Vec::new(), |i| {
                b.indoms[i].instances.iter().map(|(id, _)| *id).collect()
            });
            v += ids.len().max(1);
            inst_ids.push(ids);
        }
        Plan {
            version,
            len,
            tocs,
            indoms_at,
            insts_at,
            inst_first,
            metrics_at,
            values_at,
            value_first,
            strings_at,
            labels_at,
            n_values,
            names: b.metrics.iter().map(|m| m.name.clone()).collect(),
            codes: b.metrics.iter().map(|m| m.code).collect(),
            inst_ids,
            string_value_first,
        }
    }

    /// Fill the (zeroed) file, g2 left 0.
    fn write(&self, b: &Builder, f: &mut [u8], g1: u64) {
        let put =
            |f: &mut [u8], at: usize, bytes: &[u8]| f[at..at + bytes.len()].copy_from_slice(bytes);
        put(f, 0, b"MMV\0");
        put(f, 4, &self.version.to_ne_bytes());
        put(f, 8, &g1.to_ne_bytes());
        put(f, 24, &(self.tocs.len() as i32).to_ne_bytes());
        put(f, 28, &b.flags.to_ne_bytes());
        put(f, 32, &(std::process::id() as i32).to_ne_bytes());
        put(f, 36, &b.cluster.to_ne_bytes());
        for (k, (t, n, off)) in self.tocs.iter().enumerate() {
            let at = HDR_SIZE + TOC_SIZE * k;
            put(f, at, &t.to_ne_bytes());
            put(f, at + 4, &n.to_ne_bytes());
            put(f, at + 8, &(*off as u64).to_ne_bytes());
        }
        let v1 = self.version == 1;
        let inst_size = if v1 { INST1_SIZE } else { INST2_SIZE };
        let metric_size = if v1 { METRIC1_SIZE } else { METRIC2_SIZE };
        // String slots are handed out in libpcp_mmv's order.
        let next_string = std::cell::Cell::new(0usize);
        let string = |f: &mut [u8], s: &str| -> u64 {
            let at = self.strings_at + STRING_SIZE * next_string.get();
            next_string.set(next_string.get() + 1);
            f[at..at + s.len()].copy_from_slice(s.as_bytes());
            at as u64
        };
        // Instances (v2/v3 names first in STRINGS).
        let mut k = 0;
        for (di, d) in b.indoms.iter().enumerate() {
            let indom_at = (self.indoms_at + INDOM_SIZE * di) as u64;
            for (id, name) in &d.instances {
                let at = self.insts_at + inst_size * k;
                put(f, at, &indom_at.to_ne_bytes());
                put(f, at + 12, &id.to_ne_bytes());
                if v1 {
                    put(f, at + 16, name.as_bytes());
                } else {
                    let s = string(f, name);
                    put(f, at + 16, &s.to_ne_bytes());
                }
                k += 1;
            }
        }
        let mut metric_name_at = Vec::new();
        if !v1 {
            for m in &b.metrics {
                metric_name_at.push(string(f, &m.name));
            }
        }
        // One STRINGS slot per string value (reserved in Plan::new).
        for m in &b.metrics {
            if m.code == Str::CODE {
                next_string
                    .set(next_string.get() + m.indom.map_or(1, |i| b.indoms[i].instances.len()));
            }
        }
        for (mi, m) in b.metrics.iter().enumerate() {
            let at = self.metrics_at + metric_size * mi;
            let rest = if v1 {
                put(f, at, m.name.as_bytes());
                at + 64
            } else {
                put(f, at, &metric_name_at[mi].to_ne_bytes());
                at + 8
            };
            put(f, rest, &m.item.to_ne_bytes());
            put(f, rest + 4, &m.code.to_ne_bytes());
            put(f, rest + 8, &(m.sem as i32).to_ne_bytes());
            put(f, rest + 12, &m.units.0.to_ne_bytes());
            let serial = m.indom.map_or(u32::MAX, |i| b.indoms[i].serial);
            put(f, rest + 16, &serial.to_ne_bytes());
            let short = if m.short_help.is_empty() {
                0
            } else {
                string(f, &m.short_help)
            };
            let long = if m.long_help.is_empty() {
                0
            } else {
                string(f, &m.long_help)
            };
            put(f, rest + 24, &short.to_ne_bytes());
            put(f, rest + 32, &long.to_ne_bytes());
            // Its values.
            for j in 0..self.inst_ids[mi].len().max(1) {
                let vat = self.values_at + VALUE_SIZE * (self.value_first[mi] + j);
                put(f, vat + 16, &(at as u64).to_ne_bytes());
                if let Some(di) = m.indom {
                    let inst_at = self.insts_at + inst_size * (self.inst_first[di] + j);
                    put(f, vat + 24, &(inst_at as u64).to_ne_bytes());
                }
                if m.code == Str::CODE {
                    let slot = self.strings_at + STRING_SIZE * (self.string_value_first[mi] + j);
                    put(f, vat + 8, &(slot as i64).to_ne_bytes());
                }
            }
        }
        for (di, d) in b.indoms.iter().enumerate() {
            let at = self.indoms_at + INDOM_SIZE * di;
            put(f, at, &d.serial.to_ne_bytes());
            put(f, at + 4, &(d.instances.len() as u32).to_ne_bytes());
            let first = self.insts_at + inst_size * self.inst_first[di];
            put(f, at + 8, &(first as u64).to_ne_bytes());
            let short = if d.short_help.is_empty() {
                0
            } else {
                string(f, &d.short_help)
            };
            let long = if d.long_help.is_empty() {
                0
            } else {
                string(f, &d.long_help)
            };
            put(f, at + 16, &short.to_ne_bytes());
            put(f, at + 24, &long.to_ne_bytes());
        }
        for (k, l) in b.labels.iter().enumerate() {
            let at = self.labels_at + LABEL_SIZE * k;
            put(f, at, &l.flags.to_ne_bytes());
            let identity = if l.flags == LABEL_CLUSTER {
                b.cluster
            } else {
                l.identity
            };
            put(f, at + 4, &identity.to_ne_bytes());
            put(f, at + 8, &l.internal.to_ne_bytes());
            put(f, at + 12, l.json.as_bytes());
        }
    }
}

/// g1: creation time as seconds << 32 | microseconds, strictly increasing
/// within the process so two files made in one microsecond still differ.
fn generation() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let g = (d.as_secs() << 32) | d.subsec_micros() as u64;
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let want = g.max(last + 1);
        match LAST.compare_exchange(last, want, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return want,
            Err(x) => last = x,
        }
    }
}

fn is_mmv_file(p: &Path) -> bool {
    let mut h = [0u8; 4];
    std::fs::File::open(p)
        .and_then(|mut f| io::Read::read_exact(&mut f, &mut h))
        .is_ok()
        && &h == b"MMV\0"
}

/// `.NAME.PID.N.tmp` beside `path` (the PMDA skips dot files).
fn staging_name(path: &Path) -> PathBuf {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ))
}

#[cfg(unix)]
fn file_id(m: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}
#[cfg(not(unix))]
fn file_id(_: &std::fs::Metadata) -> (u64, u64) {
    (0, 0)
}

struct Inner {
    map: MmapMut,
    path: PathBuf,
    /// (device, inode) of our file: a newer file renamed over the same
    /// name is not ours to remove.
    id: (u64, u64),
    /// Set once the file is in place (a failed start removes nothing).
    remove_on_drop: std::sync::atomic::AtomicBool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // As mmv_stats_stop: a file tied to its process goes with it.
        let ours = std::fs::metadata(&self.path).is_ok_and(|m| file_id(&m) == self.id);
        if self.remove_on_drop.load(Ordering::Relaxed) && ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A started MMV file. Handles keep the mapping alive.
#[derive(Clone)]
pub struct Mmv {
    inner: Arc<Inner>,
    plan: Arc<Plan>,
    generation: u64,
}

impl Mmv {
    pub fn path(&self) -> &Path {
        &self.inner.path
    }
    pub fn version(&self) -> i32 {
        self.plan.version
    }
    /// g1 (= g2) of this file.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    fn handle<T: Kind>(&self, value_index: usize, mi: usize) -> Value<T> {
        let at = self.plan.values_at + VALUE_SIZE * value_index;
        let base = self.inner.map.as_ptr() as *mut u8;
        let string = if T::CODE == Str::CODE {
            let j = value_index - self.plan.value_first[mi];
            let slot = self.plan.strings_at + STRING_SIZE * (self.plan.string_value_first[mi] + j);
            // SAFETY: the slot lies inside the mapping (Plan::new).
            unsafe { base.add(slot) }
        } else {
            std::ptr::null_mut()
        };
        Value {
            // SAFETY: value records lie inside the mapping.
            ptr: unsafe { base.add(at) },
            string,
            _keep: Some(self.inner.clone()),
            _t: PhantomData,
        }
    }

    /// The handle of a metric without instances (of its first instance
    /// when it has some).
    pub fn value<T: Kind>(&self, d: Decl<T>) -> Value<T> {
        self.handle(self.plan.value_first[d.index], d.index)
    }

    /// The handle of instance `inst` (internal id) of a metric.
    pub fn instance<T: Kind>(&self, d: Decl<T>, inst: i32) -> Option<Value<T>> {
        let j = self.plan.inst_ids[d.index]
            .iter()
            .position(|&i| i == inst)?;
        Some(self.handle(self.plan.value_first[d.index] + j, d.index))
    }

    /// Look a value up by metric name (and instance id): a convenience; the
    /// type must match the declaration.
    pub fn lookup<T: Kind>(&self, name: &str, inst: Option<i32>) -> Option<Value<T>> {
        let mi = self.plan.names.iter().position(|n| n == name)?;
        if self.plan.codes[mi] != T::CODE {
            return None;
        }
        let d = Decl::<T> {
            index: mi,
            _t: PhantomData,
        };
        match inst {
            None if self.plan.inst_ids[mi].is_empty() => Some(self.value(d)),
            Some(i) => self.instance(d, i),
            None => None,
        }
    }

    /// Number of value records in the file.
    pub fn values(&self) -> usize {
        self.plan.n_values
    }
}

/// Where updates of a handle that was never started go (a no-op handle).
static SINK: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// An update handle: a pointer to one value record in the mapping.
pub struct Value<T> {
    ptr: *mut u8,
    /// STRING values: their STRINGS slot.
    string: *mut u8,
    _keep: Option<Arc<Inner>>,
    _t: PhantomData<T>,
}

impl<T> Clone for Value<T> {
    fn clone(&self) -> Self {
        Value {
            ptr: self.ptr,
            string: self.string,
            _keep: self._keep.clone(),
            _t: PhantomData,
        }
    }
}

// SAFETY: every access goes through atomics (numbers) or byte copies into
// the value's own slot; the mapping lives as long as any handle.
unsafe impl<T> Send for Value<T> {}
unsafe impl<T> Sync for Value<T> {}

impl<T: Kind> Value<T> {
    /// A handle whose updates go nowhere: instrumentation can stay in place
    /// when no file was started.
    pub fn noop() -> Value<T> {
        Value {
            ptr: SINK.as_ptr() as *mut u8,
            string: std::ptr::null_mut(),
            _keep: None,
            _t: PhantomData,
        }
    }
    #[inline(always)]
    fn w64(&self) -> &AtomicU64 {
        // SAFETY: value records are 8-aligned (offsets multiple of 8 in a
        // page-aligned mapping) and live while `_keep` does.
        unsafe { &*(self.ptr as *const AtomicU64) }
    }
    #[inline(always)]
    fn w32(&self) -> &AtomicU32 {
        // SAFETY: as w64.
        unsafe { &*(self.ptr as *const AtomicU32) }
    }
    #[inline(always)]
    fn extra(&self) -> &AtomicU64 {
        // SAFETY: as w64; `extra` is the record's second word (the sink has two).
        unsafe { &*(self.ptr.add(8) as *const AtomicU64) }
    }
}

impl<T: Kind> Value<T> {
    /// Mark the value as "no value" for files made with [`FLAG_SENTINEL`]:
    /// all eight value bytes 0xff (an empty text for strings). The PMDA
    /// serves a float or double marked so as NaN.
    pub fn set_none(&self) {
        if T::CODE == Str::CODE {
            if !self.string.is_null() {
                // SAFETY: the value's own STRING slot (see Value::<Str>::set).
                unsafe { std::ptr::write_bytes(self.string, 0, STRING_SIZE) };
                self.w64().store(0, Ordering::Relaxed);
            }
            return;
        }
        self.w64().store(u64::MAX, Ordering::Relaxed);
    }
}

/// The integer values: `$word` is the value slot's 64- or 32-bit word
/// (`$bits` its unsigned type).
macro_rules! int_value {
    ($t:ident, $v:ty, $word:ident, $bits:ty) => {
        impl Value<$t> {
            /// One store.
            #[inline(always)]
            pub fn set(&self, v: $v) {
                self.$word().store(v as $bits, Ordering::Relaxed);
            }
            /// A load and a store (one writer per value).
            #[inline(always)]
            pub fn add(&self, v: $v) {
                let w = self.$word();
                w.store(
                    (w.load(Ordering::Relaxed) as $v).wrapping_add(v) as $bits,
                    Ordering::Relaxed,
                );
            }
            #[inline(always)]
            pub fn inc(&self) {
                self.add(1)
            }
            /// An atomic add, for values several threads update.
            #[inline(always)]
            pub fn add_shared(&self, v: $v) {
                self.$word().fetch_add(v as $bits, Ordering::Relaxed);
            }
            pub fn get(&self) -> $v {
                self.$word().load(Ordering::Relaxed) as $v
            }
        }
    };
}
int_value!(U64, u64, w64, u64);
int_value!(I64, i64, w64, u64);
int_value!(U32, u32, w32, u32);
int_value!(I32, i32, w32, u32);

impl Value<F64> {
    #[inline(always)]
    pub fn set(&self, v: f64) {
        self.w64().store(v.to_bits(), Ordering::Relaxed);
    }
    pub fn get(&self) -> f64 {
        f64::from_bits(self.w64().load(Ordering::Relaxed))
    }
}

impl Value<F32> {
    #[inline(always)]
    pub fn set(&self, v: f32) {
        self.w32().store(v.to_bits(), Ordering::Relaxed);
    }
    pub fn get(&self) -> f32 {
        f32::from_bits(self.w32().load(Ordering::Relaxed))
    }
}

impl Value<Str> {
    /// Replace the text (at most 255 bytes; longer text is cut at a
    /// character boundary, and false returned). Not one store: a reader
    /// can see the slot mid-copy, as with libpcp_mmv's `mmv_set_string`.
    pub fn set(&self, s: &str) -> bool {
        if self.string.is_null() {
            return true;
        }
        let mut n = s.len().min(STRING_SIZE - 1);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        // SAFETY: the slot is STRING_SIZE bytes inside the mapping; only
        // this value's handles write it.
        unsafe {
            std::ptr::write_bytes(self.string, 0, STRING_SIZE);
            std::ptr::copy_nonoverlapping(s.as_ptr(), self.string, n);
        }
        // libpcp_mmv keeps the length in the value word.
        self.w64().store(n as u64, Ordering::Relaxed);
        n == s.len()
    }
}

impl Value<Elapsed> {
    fn now_us() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64)
    }
    /// Start an interval: `extra` holds minus the start time.
    pub fn start(&self) {
        self.extra()
            .store((-Self::now_us()) as u64, Ordering::Relaxed);
    }
    /// End it: the value grows by its length in one store.
    pub fn stop(&self) {
        let extra = self.extra().load(Ordering::Relaxed) as i64;
        if extra < 0 {
            let w = self.w64();
            let v = w.load(Ordering::Relaxed) as i64 + Self::now_us() + extra;
            w.store(v as u64, Ordering::Relaxed);
            self.extra().store(0, Ordering::Relaxed);
        }
    }
    /// Completed intervals, in microseconds.
    pub fn get(&self) -> i64 {
        self.w64().load(Ordering::Relaxed) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mmv-values-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }
    fn ne32(f: &[u8], at: usize) -> u32 {
        u32::from_ne_bytes(f[at..at + 4].try_into().unwrap())
    }
    fn ne64(f: &[u8], at: usize) -> u64 {
        u64::from_ne_bytes(f[at..at + 8].try_into().unwrap())
    }

    #[test]
    fn v1_singleton_layout_and_generation() {
        let d = dir("v1");
        let p = d.join("app");
        let mut b = Builder::at(&p);
        let c = b.metric::<U64>("count", Semantics::Counter, Units::count(), "n");
        let mmv = b.start().unwrap();
        mmv.value(c).add(41);
        mmv.value(c).inc();
        let f = std::fs::read(&p).unwrap();
        assert_eq!(&f[0..4], b"MMV\0");
        assert_eq!(ne32(&f, 4), 1);
        assert_ne!(ne64(&f, 8), 0);
        assert_eq!(ne64(&f, 8), ne64(&f, 16), "g2 = g1");
        // TOC: metrics, values, strings (the help text).
        assert_eq!(ne32(&f, 24), 3);
        let values_at = ne64(&f, 40 + 16 + 8) as usize;
        assert_eq!(ne64(&f, values_at), 42);
        // No staging file left behind.
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
    }

    #[test]
    fn recreated_file_gets_a_new_generation() {
        let d = dir("gen");
        let p = d.join("app");
        let mut b = Builder::at(&p);
        b.metric::<U64>("x", Semantics::Instant, Units::NONE, "");
        let g1 = b.start().unwrap().generation();
        let g2 = b.start().unwrap().generation();
        assert!(g2 > g1);
    }

    #[test]
    fn versions_follow_names_and_labels() {
        let mut b = Builder::at("/nonexistent/x");
        b.metric::<U64>("a", Semantics::Counter, Units::NONE, "");
        assert_eq!(b.file_version(), 1);
        b.metric::<U64>(&"b".repeat(70), Semantics::Counter, Units::NONE, "");
        assert_eq!(b.file_version(), 2);
        b.file_label("app", "\"t\"");
        assert_eq!(b.file_version(), 3);
    }

    #[test]
    fn refuses_bad_declarations_and_foreign_files() {
        let d = dir("bad");
        let p = d.join("app");
        std::fs::write(&p, b"keep me").unwrap();
        let mut b = Builder::at(&p);
        b.metric::<U64>("ok", Semantics::Counter, Units::NONE, "");
        assert!(matches!(b.start(), Err(Error::NotMmv(_))));
        assert_eq!(std::fs::read(&p).unwrap(), b"keep me");
        let mut b = Builder::at(d.join("other"));
        b.metric::<U64>("1bad", Semantics::Counter, Units::NONE, "");
        assert!(matches!(b.start(), Err(Error::Invalid(_))));
        let mut b = Builder::at(d.join("other"));
        b.metric::<U64>("dup", Semantics::Counter, Units::NONE, "");
        b.metric::<U64>("dup", Semantics::Counter, Units::NONE, "");
        assert!(b.start().is_err());
    }

    #[test]
    fn dropping_a_replaced_file_keeps_its_successor() {
        let d = dir("succ");
        let p = d.join("app");
        let mut b = Builder::at(&p);
        b.flags(FLAG_PROCESS);
        b.metric::<U64>("x", Semantics::Instant, Units::NONE, "");
        let old = b.start().unwrap();
        let new = b.start().unwrap();
        drop(old);
        assert!(p.exists(), "the newer file stays");
        drop(new);
        assert!(!p.exists(), "FLAG_PROCESS: gone with its Mmv");
    }

    #[test]
    fn noop_handles_do_nothing() {
        let v = Value::<U64>::noop();
        v.inc();
        Value::<Str>::noop().set("x");
        Value::<Elapsed>::noop().start();
    }

    #[test]
    fn strings_and_instances() {
        let d = dir("str");
        let p = d.join("app");
        let mut b = Builder::at(&p);
        let i = b.indom(&[(1, "one"), (7, "seven")], "ids", "");
        let s = b.metric_indom::<Str>("name", i, Semantics::Discrete, Units::NONE, "");
        let n = b.metric_indom::<I32>("depth", i, Semantics::Instant, Units::NONE, "");
        let mmv = b.start().unwrap();
        assert!(mmv.instance(s, 7).unwrap().set("hello"));
        assert!(!mmv.instance(s, 1).unwrap().set(&"é".repeat(200)));
        mmv.instance(n, 1).unwrap().set(-3);
        assert!(mmv.instance(n, 2).is_none());
        assert_eq!(mmv.lookup::<I32>("depth", Some(1)).unwrap().get(), -3);
        assert!(mmv.lookup::<U64>("depth", Some(1)).is_none());
        let f = std::fs::read(&p).unwrap();
        assert!(f.windows(6).any(|w| w == b"hello\0"));
    }
}
