//! `.dlt` → model. KPI messages (APID/CTID `PROC`/`PROC` unless
//! `--kpi-app`/`--kpi-ctx` say otherwise) go through the shared KPI
//! [`Assembler`]. Every other message becomes a typed event (docs/dlt.md,
//! "Reading into the model"):
//!
//! - one event type per APID, CTID, `msin` and argument signature (type
//!   info, VARI name and unit of each argument): category = APID, name =
//!   CTID (`-` where the id is empty or there is no extended header),
//!   priority = the log level; fields from the verbose arguments (see
//!   `args.rs`); a first string argument named `_event` (`category.name`)
//!   or `_metric` (a metric name), as polytrace's DLT writer puts it, names
//!   the type instead and is not a field;
//! - non-verbose messages: fields `message_id` (u32) and `payload` (bytes);
//! - control messages are framing: shown by `info`, never converted into
//!   another format's data;
//! - every event carries its ECU, message counter, session id, tmsp,
//!   storage time, header flags and the whole original record in extras,
//!   so `.dlt → .dlt` writes it back verbatim;
//! - a verbose payload that cannot be typed (unsupported argument types,
//!   damage) becomes an [`Annotation`] holding its `dlt-convert -a` text.
//!
//! Time (spec §6): an item's time is `tmsp + offset`, with offset =
//! min(storage time − tmsp) over the lifecycle (boot of one ECU) the
//! message belongs to (`lifecycle.rs`; found by a header-only pre-scan of
//! the file). `raw_clock` keeps tmsp (0.1 ms ticks). Messages without WTMS
//! get their storage time. From stdin (no pre-scan) each lifecycle's first
//! timestamped message fixes its offset.

use super::args::{self, Arg};
use super::layout::{self, id_from, id_text, Head, Msg};
use super::lifecycle;
use super::scan::{walk_heads, Scanner};
use super::text;
use crate::error::{Diagnostic, Position, Result};
use crate::formats::kpi::assemble::Assembler;
use crate::formats::kpi::dataset::Kind;
use crate::formats::kpi::text::{X_APID, X_CTID, X_ECU};
use crate::input::Input;
use crate::model::*;
use crate::options::ReadOptions;
use std::collections::{HashMap, VecDeque};
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

/// Extras keys of annotations made from non-KPI messages (and of the header).
pub const X_MCNT: &str = "dlt.mcnt";
pub const X_SESSION: &str = "dlt.session";
pub const X_MSIN: &str = "dlt.msin";
pub const X_TMSP: &str = "dlt.tmsp";
/// The whole original record (storage header included).
pub const X_RAW: &str = "dlt.raw";
/// Arrival position: the number of messages read before this one that
/// also became an event or annotation with `dlt.raw` (0, 1, 2, … with no
/// gap), so a DLT writer fed them in time order (through LTT) can put the
/// records back in file order.
pub const X_ORDER: &str = "dlt.order";
pub use crate::formats::kpi::text::X_STORAGE;
/// Header: the offset (ns) added to tmsp × 100 µs for the first lifecycle.
pub const X_OFFSET: &str = "dlt.time_offset_ns";
/// Events: the record's `htyp` (which header extras it had).
pub const X_HTYP: &str = "dlt.htyp";
/// Non-verbose events: the extended header's argument count (daemons put
/// 1 in control messages).
pub const X_NOAR: &str = "dlt.noar";
/// Event types: verbose (true) or non-verbose (false) messages.
pub const X_VERBOSE: &str = "dlt.verbose";
/// Event types: the type-info word of each field's argument, in order.
pub const X_TYPE_INFO: &str = "dlt.type_info";
/// Event types: the unit of each field's argument ("" where none).
pub const X_UNITS: &str = "dlt.units";
/// First-argument names that carry the event's category and name
/// (`category.name`) or a metric name; written by polytrace's DLT writer.
pub const EVENT_ARG: &str = "_event";
pub const METRIC_ARG: &str = "_metric";

/// Event type ids of general messages start here (KPI uses 1–3).
const FIRST_TYPE: EventTypeId = 1000;
/// Distinct event types kept apart before all further ones share one
/// "too many signatures" type (a bound on what a file can make us hold).
const MAX_TYPES: usize = 100_000;

/// The header fields every message's item keeps (counter, session,
/// timestamp, storage time, header type).
fn header_extras(x: &mut Extras, m: &Msg) {
    x.set(X_MCNT, ExtraValue::U64(m.mcnt as u64));
    if let Some(s) = m.session {
        x.set(X_SESSION, ExtraValue::U64(s as u64));
    }
    if let Some(t) = m.tmsp {
        x.set(X_TMSP, ExtraValue::U64(t as u64));
    }
    x.set(X_STORAGE, ExtraValue::I64(storage_ns(m)));
    x.set(X_HTYP, ExtraValue::U64(m.htyp as u64));
}

fn storage_ns(m: &Msg) -> i64 {
    (m.secs as i64) * 1_000_000_000 + (m.usecs as i64) * 1000
}

fn id_value(b: &[u8; 4]) -> ExtraValue {
    ExtraValue::Str(String::from_utf8_lossy(id_text(b)).into())
}

/// `(category, name)` from a first argument named `_event` (value
/// `category.name`) or `_metric` (value: a metric name).
fn naming_arg(a: &Arg) -> Option<(String, String)> {
    let Value::Str(v) = &a.value else { return None };
    match a.name? {
        n if n == EVENT_ARG.as_bytes() => {
            let (c, n) = v.split_once('.')?;
            (!c.is_empty() && !n.is_empty()).then(|| (c.to_string(), n.to_string()))
        }
        n if n == METRIC_ARG.as_bytes() && !v.is_empty() => Some(("metric".into(), v.clone())),
        _ => None,
    }
}

/// What the pre-scan finds: each lifecycle's time offset (ns, by number
/// − 1; see `lifecycle.rs`) and the ECU and session of the first KPI
/// message (else of the first message).
#[derive(Debug, Default, PartialEq)]
struct Prescan {
    offsets: Vec<Option<i64>>,
    ecu: Option<[u8; 4]>,
    session: Option<u32>,
}

/// The pre-scan's state over the records so far.
struct Prescanning {
    p: Prescan,
    kpi: ([u8; 4], [u8; 4]),
    idx: u64,
    kpi_seen: bool,
    lifecycles: lifecycle::Tracker,
}

impl Prescanning {
    fn new(kpi: ([u8; 4], [u8; 4])) -> Prescanning {
        Prescanning {
            p: Prescan::default(),
            kpi,
            idx: 0,
            kpi_seen: false,
            lifecycles: lifecycle::Tracker::default(),
        }
    }

    /// The pre-scan's result: each lifecycle's offset chosen.
    fn finish(mut self) -> Prescan {
        self.p.offsets = self.lifecycles.listed.iter().map(|l| l.offset()).collect();
        self.p
    }

    #[inline]
    fn record(&mut self, h: &Head) {
        let p = &mut self.p;
        // The first KPI message's ids, else the first message's.
        if !self.kpi_seen {
            let is_kpi = h.ids == Some(self.kpi);
            if is_kpi || self.idx == 0 {
                p.ecu = Some(h.ecu);
                p.session = h.session;
                self.kpi_seen = is_kpi;
            }
        }
        self.lifecycles.step(h.ecu, h.storage_ns(), h.tmsp);
        self.idx += 1;
    }
}

/// The header-only pre-scan: one pass (lifecycles are found in file
/// order, so the file is not split between threads).
fn prescan(input: &Input, salvage: bool, kpi: ([u8; 4], [u8; 4])) -> Result<Prescan> {
    // Headers alone while the records are whole and well-formed (a file
    // as the daemon writes it); else the scanner's framing decides.
    let mut fast = Prescanning::new(kpi);
    if walk_heads(super::open_raw(input)?, |h| fast.record(h)) {
        return Ok(fast.finish());
    }
    prescan_records(input, salvage, kpi)
}

/// The pre-scan over the records as the main pass frames them.
fn prescan_records(input: &Input, salvage: bool, kpi: ([u8; 4], [u8; 4])) -> Result<Prescan> {
    let mut p = Prescanning::new(kpi);
    let mut sc = Scanner::new(super::open_raw(input)?, input.path.clone(), salvage);
    // Damage is reported by the main pass; here it just ends the scan.
    while let Ok(Some(m)) = sc.next_msg() {
        p.record(&Head::of(&m));
    }
    Ok(p.finish())
}

struct State {
    path: PathBuf,
    /// Each lifecycle's time offset, from the pre-scan (empty on a stream).
    offsets: Vec<Option<i64>>,
    /// Lifecycles restarted (of an ECU seen before), up to the last
    /// message read.
    restarts: u64,
    app: [u8; 4],
    ctx: [u8; 4],
    asm: Assembler,
    /// The items of the messages read, in order: taken in runs by
    /// `next_batch` (one copy), else through `queue` one by one.
    staged: Vec<Item>,
    queue: VecDeque<Item>,
    /// Scratch of `message` (allocations reused between messages).
    args: Vec<&'static [u8]>,
    header: Header,
    diags: Vec<Diagnostic>,
    kpi_msgs: u64,
    other_msgs: u64,
    bad_kpi: u64,
    warned: usize,
    text: Vec<u8>,
    /// Last KPI message counter and session (spec §9.1: gaps mean loss).
    last_mcnt: Option<(u8, Option<u32>)>,
    mcnt_gaps: u64,
    lost_msgs: u64,
    /// Storage time of the last BEG per KPI type.
    beg_storage: [Option<i64>; 5],
    /// Event types of general messages by signature (see `type_key`).
    types: HashMap<Vec<u8>, EventTypeId>,
    key: Vec<u8>,
    log_msgs: u64,
    nonverbose_msgs: u64,
    control_msgs: u64,
    /// The next `dlt.order`.
    order: u64,
    undecoded: u64,
    /// Verbose messages whose payload ends before their last argument.
    short_args: u64,
    /// Each ECU's lifecycles, and the message filters (`--ecu`, `--app`, …).
    lifecycles: lifecycle::Tracker,
    sel: MessageSelect,
    scratch: Vec<u8>,
    /// Messages the filters left out.
    filtered: u64,
}

impl State {
    /// The item time: tmsp placed by its lifecycle's offset (the pre-scan's;
    /// on a stream, its first timestamped message's), else storage time.
    fn time_of(&self, lc: u32, m: &Msg) -> (Timestamp, Option<u64>) {
        let Some(t) = m.tmsp else {
            return (Timestamp(storage_ns(m)), None);
        };
        let off = self
            .offsets
            .get(lc as usize - 1)
            .copied()
            .flatten()
            .or_else(|| self.lifecycles.get(lc).and_then(|l| l.first_est))
            .unwrap_or_else(|| (storage_ns(m) - t as i64 * 100_000).max(0));
        (Timestamp(off + t as i64 * 100_000), Some(t as u64))
    }

    fn message(&mut self, idx: u64, m: &Msg) {
        let step = self.lifecycles.step(m.ecu_id(), storage_ns(m), m.tmsp);
        self.restarts += step.restart as u64;
        let lc = step.number;
        let (time, raw) = self.time_of(lc, m);
        if !self.sel.is_empty() && !lifecycle::selected(&self.sel, m, lc, &mut self.scratch) {
            self.filtered += 1;
            return;
        }
        let is_kpi = m
            .ext
            .is_some_and(|e| e.apid == self.app && e.ctid == self.ctx);
        if is_kpi {
            let mut args = crate::model::reuse_vec(std::mem::take(&mut self.args));
            if layout::string_args(m, &mut args)
                && args.first().is_some_and(|a| Kind::parse(a).is_some())
            {
                self.kpi_msgs += 1;
                self.check_mcnt(idx, m);
                let stored = storage_ns(m);
                if args.len() == 2 && args[1] == b"BEG" {
                    if let Some(k) = Kind::parse(args[0]) {
                        self.beg_storage[k.index()] = Some(stored);
                    }
                }
                // Appended where they wait (taken out and put back, the
                // vector was dropped empty once per message).
                let from = self.staged.len();
                // Events get the message's storage time from the assembler.
                if let Err(e) = (self.asm).message(&args, time, raw, Some(stored), &mut self.staged)
                {
                    self.warn(m.offset, idx, e);
                }
                self.args = crate::model::reuse_vec(args);
                for it in &mut self.staged[from..] {
                    // Only samples take a storage time here (a call per
                    // item looked at each event).
                    if let Item::Sample(s) = it {
                        Self::mark_storage(&self.beg_storage, s);
                    }
                }
                if !self.asm.warnings.is_empty() {
                    for w in std::mem::take(&mut self.asm.warnings) {
                        self.warn(m.offset, idx, w);
                    }
                }
                return;
            }
            self.args = crate::model::reuse_vec(args);
            self.bad_kpi += 1;
            self.warn(
                m.offset,
                idx,
                "message with the KPI ids is not a KPI message (arguments are not strings, or the first is not NEW/STP/ACT/CHK/IRQ); kept as a log event".into(),
            );
        }
        self.general(idx, m, time, raw);
    }

    /// A message that is not KPI: a typed event, or an annotation when its
    /// payload cannot be typed.
    fn general(&mut self, idx: u64, m: &Msg, time: Timestamp, raw: Option<u64>) {
        self.other_msgs += 1;
        let control = m.ext.is_some_and(|e| e.mstp() == layout::TYPE_CONTROL);
        let mut argv: Vec<Arg> = Vec::new();
        let fields: Vec<Value> = if m.verbose() {
            let decoded = args::decode(m, &mut argv);
            self.short_args += matches!(decoded, Ok(false)) as u64;
            if let Err(why) = decoded {
                self.undecoded += 1;
                self.warn(
                    m.offset,
                    idx,
                    format!("verbose payload not typed ({why}): kept as an annotation"),
                );
                return self.annotation(m, time, raw);
            }
            argv.iter().map(|a| a.value.clone()).collect()
        } else {
            if m.payload.len() < 4 {
                self.undecoded += 1;
                self.warn(
                    m.offset,
                    idx,
                    "non-verbose payload shorter than its message id: kept as an annotation".into(),
                );
                return self.annotation(m, time, raw);
            }
            let mut c = layout::Cursor::new(m.payload, m.msbf());
            let id = c.u32().unwrap_or(0);
            vec![Value::U64(id as u64), Value::Bytes(m.payload[4..].to_vec())]
        };
        if control {
            self.control_msgs += 1;
        } else if m.verbose() {
            self.log_msgs += 1;
        } else {
            self.nonverbose_msgs += 1;
        }
        // A naming first argument (`_event`/`_metric`) is not a field.
        let named = argv.first().and_then(naming_arg);
        let skip = named.is_some() as usize;
        let type_id = self.type_of(m, &argv, named, control);
        let mut x = Extras::default();
        x.set(X_ECU, id_value(&m.ecu_id()));
        header_extras(&mut x, m);
        if let Some(e) = m.ext.filter(|e| !e.verbose()) {
            x.set(X_NOAR, ExtraValue::U64(e.noar as u64));
        }
        x.set(X_RAW, ExtraValue::Bytes(m.raw.to_vec()));
        x.set(X_ORDER, ExtraValue::U64(self.order));
        self.order += 1;
        self.staged.push(Item::Event(Event {
            time,
            raw_clock: raw,
            type_id,
            cpu: None,
            stream: None,
            fields: fields.into_iter().skip(skip).collect(),
            extras: x,
        }));
    }

    /// The event type of a general message, defined on first use.
    fn type_of(
        &mut self,
        m: &Msg,
        argv: &[Arg],
        named: Option<(String, String)>,
        control: bool,
    ) -> EventTypeId {
        let ext = m.ext;
        let k = &mut self.key;
        k.clear();
        k.push(m.verbose() as u8);
        k.push(ext.is_some() as u8);
        if let Some(e) = ext {
            k.push(e.msin);
            k.extend_from_slice(&e.apid);
            k.extend_from_slice(&e.ctid);
        }
        if let Some((c, n)) = &named {
            k.extend_from_slice(c.as_bytes());
            k.push(0xff);
            k.extend_from_slice(n.as_bytes());
            k.push(0xff);
        }
        for a in argv {
            k.extend_from_slice(&a.ti.to_le_bytes());
            if matches!(a.ty, FieldType::Array { .. } | FieldType::Struct(_)) {
                // Dimensions and members are not in the type info.
                k.extend_from_slice(format!("{:?}", a.ty).as_bytes());
            }
            k.extend_from_slice(a.name.unwrap_or_default());
            k.push(0xff);
            k.extend_from_slice(a.unit.unwrap_or_default());
            k.push(0xff);
        }
        if let Some(&id) = self.types.get(k.as_slice()) {
            return id;
        }
        if self.types.len() >= MAX_TYPES {
            // A file with absurdly many signatures: the rest share the
            // last type's id (their fields may then differ from it).
            return FIRST_TYPE + MAX_TYPES as EventTypeId - 1;
        }
        let id = FIRST_TYPE + self.types.len() as EventTypeId;
        self.types.insert(k.clone(), id);
        let text_of = |b: &[u8]| {
            let t = String::from_utf8_lossy(b).into_owned();
            if t.is_empty() {
                "-".to_string()
            } else {
                t
            }
        };
        let (category, name) = named.unwrap_or_else(|| match ext {
            Some(e) if e.apid[0] != 0 || e.ctid[0] != 0 => {
                (text_of(id_text(&e.apid)), text_of(id_text(&e.ctid)))
            }
            _ => ("-".into(), "-".into()),
        });
        let skip = argv.first().and_then(naming_arg).is_some() as usize;
        let mut fields: Vec<Field> = Vec::new();
        let mut tis = Vec::new();
        let mut units = Vec::new();
        if m.verbose() {
            for (i, a) in argv.iter().enumerate().skip(skip) {
                let mut fname = match a.name {
                    Some(n) if !n.is_empty() => String::from_utf8_lossy(n).into_owned(),
                    _ => format!("arg{}", i - skip),
                };
                if fields.iter().any(|f| f.name == fname) {
                    fname = format!("{fname}_{}", i - skip);
                }
                fields.push(Field::new(&fname, a.ty.clone()));
                tis.push(ExtraValue::U64(a.ti as u64));
                units.push(ExtraValue::Str(
                    String::from_utf8_lossy(a.unit.unwrap_or_default()).into_owned(),
                ));
            }
        } else {
            fields.push(Field::new("message_id", FieldType::Uint(4)));
            fields.push(Field::new("payload", FieldType::Bytes));
        }
        let mut t = EventType::new(id, &category, &name, fields);
        t.framing = control;
        if control {
            let (_, sub) = text::type_names(m.ext.map_or(0, |e| e.msin));
            t.extras.set(
                crate::model::keys::FRAMING_KIND,
                ExtraValue::Str(format!("DLT {} control messages", sub.trim())),
            );
        }
        t.extras.set(X_VERBOSE, ExtraValue::Bool(m.verbose()));
        if let Some(e) = ext {
            t.extras.set(X_MSIN, ExtraValue::U64(e.msin as u64));
            let (ty, sub) = text::type_names(e.msin);
            t.description = Some(format!("DLT {ty} {sub} message").replace("  ", " "));
            if e.mstp() == layout::TYPE_LOG {
                t.priority = text::LOG_LEVELS
                    .get(e.mtin() as usize)
                    .filter(|l| !l.is_empty())
                    .map(|l| l.to_string());
            }
        } else {
            t.description = Some("DLT message without extended header".into());
        }
        if !tis.is_empty() {
            t.extras.set(X_TYPE_INFO, ExtraValue::List(tis));
        }
        if units
            .iter()
            .any(|u| !matches!(u, ExtraValue::Str(s) if s.is_empty()))
        {
            t.extras.set(X_UNITS, ExtraValue::List(units));
        }
        self.staged.push(Item::EventType(Arc::new(t)));
        id
    }

    fn annotation(&mut self, m: &Msg, time: Timestamp, raw: Option<u64>) {
        self.text.clear();
        text::payload(m, &mut self.text);
        let mut x = Extras::default();
        x.set(X_ECU, id_value(&m.ecu_id()));
        if let Some(e) = m.ext {
            x.set(X_APID, id_value(&e.apid));
            x.set(X_CTID, id_value(&e.ctid));
            x.set(X_MSIN, ExtraValue::U64(e.msin as u64));
        }
        header_extras(&mut x, m);
        x.set(X_RAW, ExtraValue::Bytes(m.raw.to_vec()));
        x.set(X_ORDER, ExtraValue::U64(self.order));
        self.order += 1;
        self.staged.push(Item::Annotation(Annotation {
            time,
            raw_clock: raw,
            text: String::from_utf8_lossy(&self.text).into_owned(),
            extras: x,
        }));
    }

    /// dlt-kpi's messages share one 8-bit counter per context: a jump
    /// means messages were lost (a new session restarts the count).
    fn check_mcnt(&mut self, idx: u64, m: &Msg) {
        if let Some((last, sess)) = self.last_mcnt {
            let expect = last.wrapping_add(1);
            if sess == m.session && m.mcnt != expect {
                let lost = m.mcnt.wrapping_sub(expect) as u64;
                self.mcnt_gaps += 1;
                self.lost_msgs += lost;
                self.warn(
                    m.offset,
                    idx,
                    format!(
                        "KPI message counter jumps from {last} to {}: about {lost} messages lost",
                        m.mcnt
                    ),
                );
            }
        }
        self.last_mcnt = Some((m.mcnt, m.session));
    }

    /// Attach the storage time of a sample: the group BEG's (of
    /// `beg_storage`, apart from `self` so that `staged` can be walked;
    /// the assembler emits samples at END). Recycled items may hold an
    /// earlier one: set or drop.
    fn mark_storage(beg_storage: &[Option<i64>; 5], s: &mut Sample) {
        let beg = s
            .extras
            .str(crate::formats::kpi::schema::X_KIND)
            .and_then(|k| Kind::parse(k.as_bytes()))
            .and_then(|k| beg_storage[k.index()]);
        match beg {
            Some(t) => s.extras.set_i64(X_STORAGE, t),
            None => {
                s.extras.remove(X_STORAGE);
            }
        }
    }

    fn warn(&mut self, offset: u64, idx: u64, msg: String) {
        // Data warnings can be many; keep the first 100.
        if self.warned < 100 {
            self.diags.push(Diagnostic::warning(
                Position::at(&self.path, offset, Some(idx)),
                msg,
            ));
        }
        self.warned += 1;
    }

    fn finish(&mut self) {
        let mut out = Vec::new();
        self.asm.finish(&mut out);
        for it in &mut out {
            if let Item::Sample(s) = it {
                Self::mark_storage(&self.beg_storage, s);
            }
        }
        self.staged.append(&mut out);
        // Totals over the whole file (datasets flagged, groups left open):
        // no one record to point at.
        let p = Position::new(&self.path);
        for w in std::mem::take(&mut self.asm.warnings) {
            if self.warned < 100 {
                self.diags.push(Diagnostic::warning(p.clone(), w));
            }
            self.warned += 1;
        }
        if self.warned > 100 {
            self.diags.push(Diagnostic::warning(
                p.clone(),
                format!("{} more data warnings not shown", self.warned - 100),
            ));
        }
        if self.asm.truncated() > 0 {
            self.diags.push(Diagnostic::warning(
                p.clone(),
                format!(
                    "dropped {} truncated duplicate datasets (libdlt split marker)",
                    self.asm.truncated()
                ),
            ));
        }
        if self.short_args > 0 {
            self.diags.push(Diagnostic::warning(
                p.clone(),
                format!(
                    "{} verbose messages announce more arguments than their payload holds: typed by the whole arguments present (what dlt-convert lists)",
                    self.short_args
                ),
            ));
        }
        if self.undecoded > 0 {
            self.diags.push(Diagnostic::warning(
                p,
                format!(
                    "{} messages could not be typed: kept as annotations (their dlt-convert -a text)",
                    self.undecoded
                ),
            ));
        }
    }
}

pub struct DltReader {
    sc: Scanner<Box<dyn Read>>,
    st: State,
    idx: u64,
    done: bool,
    /// File length, for progress (None on a stream).
    len: Option<u64>,
    /// `State::restarts` of the items given last (see `restarts`).
    given_restarts: u64,
}

impl DltReader {
    pub fn open(input: &Input, opts: &ReadOptions) -> Result<DltReader> {
        let app = id_from(opts.kpi_app.as_deref().unwrap_or("PROC"));
        let ctx = id_from(opts.kpi_ctx.as_deref().unwrap_or("PROC"));
        let pre = if input.file().is_some() {
            prescan(input, opts.salvage, (app, ctx))?
        } else {
            Prescan::default()
        };
        let offsets = pre.offsets;
        let mut header = Header::new(FormatId::Dlt, "1");
        header.time_base = TimeBase::Absolute;
        // Items keep the message's tmsp (0.1 ms ticks since boot) as raw clock.
        header.extras.set(
            crate::model::keys::RAW_CLOCK,
            ExtraValue::Str(crate::model::keys::CLOCK_DLT.into()),
        );
        if let Some(Some(o)) = offsets.first() {
            header.extras.set(X_OFFSET, ExtraValue::I64(*o));
        }
        if let Some(e) = pre.ecu {
            header.extras.set(X_ECU, id_value(&e));
        }
        if let Some(s) = pre.session {
            header.extras.set(X_SESSION, ExtraValue::U64(s as u64));
        }
        let sc = Scanner::new(super::open_raw(input)?, input.path.clone(), opts.salvage);
        Ok(DltReader {
            sc,
            st: State {
                path: input.path.clone(),
                offsets,
                restarts: 0,
                app,
                ctx,
                asm: Assembler::new(),
                staged: Vec::new(),
                queue: VecDeque::new(),
                args: Vec::with_capacity(64),
                header,
                diags: Vec::new(),
                kpi_msgs: 0,
                other_msgs: 0,
                bad_kpi: 0,
                warned: 0,
                text: Vec::with_capacity(4096),
                last_mcnt: None,
                mcnt_gaps: 0,
                lost_msgs: 0,
                beg_storage: Default::default(),
                types: HashMap::new(),
                key: Vec::with_capacity(256),
                log_msgs: 0,
                nonverbose_msgs: 0,
                control_msgs: 0,
                order: 0,
                undecoded: 0,
                short_args: 0,
                lifecycles: lifecycle::Tracker::default(),
                sel: opts.messages.clone(),
                scratch: Vec::new(),
                filtered: 0,
            },
            idx: 0,
            done: false,
            given_restarts: 0,
            len: input
                .file()
                .and_then(|f| std::fs::metadata(f).ok())
                .map(|m| m.len()),
        })
    }

    /// The next message's items into the queue, or the end of the input.
    fn next_message(&mut self) -> Result<()> {
        match self.sc.next_msg() {
            Ok(Some(m)) => {
                self.st.message(self.idx, &m);
                self.idx += 1;
            }
            Ok(None) => {
                self.done = true;
                self.st.diags.append(&mut self.sc.diags);
                self.st.finish();
            }
            Err(e) => {
                self.done = true;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Datasets per KPI type so far.
    pub fn counts(&self) -> std::collections::BTreeMap<String, u64> {
        self.st.asm.counts()
    }
}

impl TraceReader for DltReader {
    fn header(&self) -> &Header {
        &self.st.header
    }

    fn progress(&self) -> Option<(u64, u64)> {
        self.len.map(|len| (self.sc.offset().min(len), len))
    }

    fn next_item(&mut self) -> Result<Option<Item>> {
        loop {
            if let Some(it) = self.st.queue.pop_front() {
                // What waits in the queue and `staged` is of the last
                // message's lifecycle (a run ends at a restart).
                self.given_restarts = self.st.restarts;
                return Ok(Some(it));
            }
            if !self.st.staged.is_empty() {
                self.st.queue.extend(self.st.staged.drain(..));
                continue;
            }
            if self.done {
                return Ok(None);
            }
            self.next_message()?;
        }
    }

    /// The items of as many messages as fit in `max`, copied in one go
    /// (an item passed up by `next_item` is moved at every stage). A run
    /// ends before the items of a message that restarts a lifecycle
    /// (see [`TraceReader::restarts`]).
    fn next_batch(&mut self, out: &mut Vec<Item>, max: usize) -> Result<bool> {
        let start = out.len();
        let want = out.len() + max;
        // Items left in the queue by `next_item` come first.
        while out.len() < want {
            match self.st.queue.pop_front() {
                Some(it) => out.push(it),
                None => break,
            }
        }
        loop {
            let room = want - out.len();
            let staged = &mut self.st.staged;
            if staged.len() > room {
                out.extend(staged.drain(..room));
                self.given_restarts = self.st.restarts;
                return Ok(true);
            }
            out.append(staged);
            if out.len() > start {
                self.given_restarts = self.st.restarts;
            }
            if out.len() == want {
                return Ok(true);
            }
            if self.done {
                return Ok(false);
            }
            let before = self.st.restarts;
            self.next_message()?;
            if self.st.restarts != before && out.len() > start {
                // The new lifecycle's items start the next run.
                return Ok(true);
            }
        }
    }

    fn restarts(&self) -> u64 {
        self.given_restarts
    }

    fn diagnostics(&self) -> &[Diagnostic] {
        &self.st.diags
    }

    /// The KPI datasets of one message as one run.
    fn event_runs(&mut self) -> bool {
        self.st.asm.runs = true;
        true
    }
    fn recycle(&mut self, item: Item) {
        self.st.asm.recycle(item);
    }

    fn recycle_batch(&mut self, items: &mut Vec<Item>) {
        self.st.asm.recycle_batch(items);
    }

    fn native_counts(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = Kind::ALL
            .iter()
            .map(|k| {
                let n = self.st.asm.count(*k);
                (format!("{} datasets", k.name()), n)
            })
            .collect();
        v.push(("KPI messages".into(), self.st.kpi_msgs));
        v.push(("verbose log messages".into(), self.st.log_msgs));
        v.push(("non-verbose messages".into(), self.st.nonverbose_msgs));
        v.push(("control messages".into(), self.st.control_msgs));
        v.push(("untyped messages".into(), self.st.undecoded));
        v.push(("event types".into(), self.st.types.len() as u64));
        v.push(("KPI counter gaps".into(), self.st.mcnt_gaps));
        v.push(("KPI messages lost (by counter)".into(), self.st.lost_msgs));
        if !self.st.sel.is_empty() {
            v.push(("messages left out by the filters".into(), self.st.filtered));
        }
        // Each ECU's lifecycles (docs/dlt.md, "Lifecycles"): number, ECU,
        // first and last storage time, and the message count as the value.
        for l in &self.st.lifecycles.listed {
            v.push((
                format!(
                    "lifecycle {} {} {} .. {} messages",
                    l.number,
                    String::from_utf8_lossy(id_text(&l.ecu)),
                    Timestamp(l.first_ns).rfc3339(),
                    Timestamp(l.last_ns).rfc3339()
                ),
                l.messages,
            ));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records with every mix of header parts, KPI and other ids, tmsp
    /// running on or jumping back past a boot, then (in most files) one
    /// kind of damage somewhere: the header walk with its fallback finds
    /// what the pre-scan over the scanner's records finds, with and
    /// without salvage, and walks every undamaged file to its end itself.
    #[test]
    fn header_walk_prescan_matches_the_scanner_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.dlt");
        let kpi = (*b"PROC", *b"PROC");
        let mut rng = crate::model::TestRng(0x2545_f491_4f6c_dd1d);
        let mut walked = 0;
        for case in 0..400 {
            let mut file = Vec::new();
            let mut tmsp = rng.below(1 << 20) as u32;
            for _ in 0..rng.below(60) {
                tmsp = match rng.below(10) {
                    0 => tmsp.saturating_sub(400_000 + rng.below(800_000) as u32),
                    1 => tmsp.saturating_sub(rng.below(100) as u32),
                    _ => tmsp.saturating_add(rng.below(5000) as u32),
                };
                let ids = [*b"PROC", *b"APP1", *b"\0\0\0\0"];
                let payload: Vec<u8> = (0..rng.below(40)).map(|_| rng.next() as u8).collect();
                layout::put_record_flags(
                    &mut file,
                    rng.next() as u8,
                    &layout::RecordSpec {
                        secs: 1_700_000_000 + rng.below(1000) as u32,
                        usecs: rng.below(1_000_000) as i32,
                        ecu: ids[rng.below(3) as usize],
                        mcnt: rng.next() as u8,
                        session: rng.next() as u32,
                        tmsp,
                        msin: rng.next() as u8,
                        noar: 1,
                        apid: ids[rng.below(2) as usize],
                        ctid: ids[rng.below(2) as usize],
                        payload: &payload,
                    },
                );
            }
            let damaged = case % 4 != 0 && !file.is_empty();
            if damaged {
                let at = rng.below(file.len() as u64) as usize;
                match rng.below(4) {
                    // A stray byte, a broken pattern or length, a cut end.
                    0 => file.insert(at, rng.next() as u8),
                    1 => file[at] ^= 1 << rng.below(8),
                    2 => file.truncate(at),
                    _ => file.extend_from_slice(&b"DLT\x01\0\0"[..1 + at % 6]),
                }
            }
            std::fs::write(&path, &file).unwrap();
            let input = Input::resolve(&path).unwrap();
            if !damaged {
                let mut n = 0;
                assert!(walk_heads(&file[..], |_| n += 1), "case {case}");
                assert!(n > 0 || file.is_empty());
                walked += 1;
            }
            for salvage in [false, true] {
                let got = prescan(&input, salvage, kpi).unwrap();
                let want = prescan_records(&input, salvage, kpi).unwrap();
                assert_eq!(got, want, "case {case}, salvage {salvage}");
            }
        }
        assert!(walked >= 100);
    }

    /// Asked for runs of events, the reader gives a KPI message's events as
    /// one run that stands for exactly the events it gives otherwise, in
    /// their place among the other items (instance updates before and
    /// after, samples, other messages' events), its items recycled as the
    /// convert loop does (a run's buffers reused for a message of another
    /// length): the capture and a capture with cut-off datasets.
    #[test]
    fn runs_of_events_stand_for_the_events() {
        let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/kpi");
        for name in ["kpi-capture.dlt", "B-buf400.dlt"] {
            let input = Input::resolve(&corpus.join(name)).unwrap();
            let opts = ReadOptions::default();
            let read = |runs: bool| {
                let mut r = DltReader::open(&input, &opts).unwrap();
                if runs {
                    assert!(r.event_runs());
                }
                let (mut got, mut batch, mut seen) = (Vec::new(), Vec::new(), 0);
                loop {
                    let more = r.next_batch(&mut batch, 64).unwrap();
                    for it in &batch {
                        match it {
                            Item::EventRun(run) => {
                                seen += 1;
                                assert!(
                                    !run.is_empty() && run.cells.len() % run.width as usize == 0
                                );
                                run.each_item(|e| {
                                    got.push(format!("{e:?}"));
                                    Ok::<(), ()>(())
                                })
                                .unwrap();
                            }
                            it => got.push(format!("{it:?}")),
                        }
                    }
                    r.recycle_batch(&mut batch);
                    if !more {
                        return (got, seen);
                    }
                }
            };
            let (want, none) = read(false);
            let (got, runs) = read(true);
            assert_eq!(none, 0);
            assert!(runs >= 10, "{name}: {runs} runs");
            assert!(
                got == want,
                "{name}: {} items from runs, {} without",
                got.len(),
                want.len()
            );
        }
    }

    /// Runs give what item by item gives, with the two ways mixed, in runs
    /// shorter and longer than a message's items.
    #[test]
    fn runs_give_what_items_one_by_one_give() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/kpi/kpi-capture.dlt");
        let input = Input::resolve(&path).unwrap();
        let opts = ReadOptions::default();
        let show = |it: &Item| format!("{it:?}");
        let mut r = DltReader::open(&input, &opts).unwrap();
        let mut want = Vec::new();
        while let Some(it) = r.next_item().unwrap() {
            want.push(show(&it));
        }
        assert!(want.len() > 1000, "{} items", want.len());
        for max in [1, 5, 64, 4096] {
            let mut r = DltReader::open(&input, &opts).unwrap();
            let (mut got, mut run) = (Vec::new(), Vec::new());
            for k in 0.. {
                if k % 3 == 2 {
                    match r.next_item().unwrap() {
                        Some(it) => got.push(show(&it)),
                        None => break,
                    }
                    continue;
                }
                let more = r.next_batch(&mut run, max).unwrap();
                assert!(run.len() <= max, "{} items for at most {max}", run.len());
                got.extend(run.drain(..).map(|it| show(&it)));
                if !more {
                    break;
                }
            }
            assert!(
                got == want,
                "runs of {max}: {} items, {} one by one",
                got.len(),
                want.len()
            );
        }
    }
}
