//! Model → `.dlt`. Two kinds of content (docs/dlt.md, "Writing"):
//!
//! - **KPI** (`kpi` NEW/STP/CHK events, `kpi.proc.*` and `kpi.irq.count`
//!   samples), shaped like dlt-kpi + libdlt output as dlt-receive stores it
//!   (spec §1.7, §3.7, §9.5): one `<TYPE> BEG` message, the datasets
//!   packed into verbose messages of string arguments up to the payload
//!   limit (1390 by default), one `<TYPE> END` message; htyp 0x3d, msin
//!   0x41, one 8-bit message counter over all KPI messages.
//! - **Everything else**: each event is one verbose log message whose
//!   arguments carry its fields with the closest DLT types (`args.rs`), and
//!   each sample value one message `[metric (instance) value]`. APID/CTID
//!   come from category/name through a collision-free shortening to 4
//!   characters ([`Ids`]); when that loses the name, a first string
//!   argument named `_event` (or `_metric`) holds it, which `dlt-convert -a`
//!   shows and polytrace's reader turns back into the category and name.
//!   The log level comes from the type's priority (DLT level or timeline
//!   priority), else info. Events read from a `.dlt` are written back
//!   verbatim from their original record, unless an id option is given.
//!
//! Storage header time: the item's time (for events read from a `.dlt`, the
//! original storage time). tmsp: the item's raw clock when that is a DLT
//! timestamp (0.1 ms ticks), else 0.1 ms ticks since the first item.
//! Messages written around KPI groups wait for the group being collected,
//! so the file stays in time order.

use super::args::{self, ArgSpec, Degraded};
use super::layout::{self, id_from, put_string_arg, RecordSpec};
use super::reader::{
    EVENT_ARG, METRIC_ARG, X_HTYP, X_MCNT, X_MSIN, X_NOAR, X_ORDER, X_RAW, X_SESSION, X_STORAGE,
    X_TYPE_INFO, X_UNITS, X_VERBOSE,
};
use crate::error::{Error, Result};
use crate::formats::kpi::grouper::{pack, tail_after, Group, Grouper, DEFAULT_PAYLOAD_MAX};
use crate::formats::kpi::text::{raw_clock_is_tmsp, X_APID, X_CTID, X_ECU};
use crate::model::*;
use crate::options::WriteOptions;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

/// msin of dlt-kpi messages: verbose, log, info.
const MSIN_KPI: u8 = 0x41;
/// Type argument: 4 type info + 2 length + 3 letters + NUL.
const TYPE_ARG: usize = 10;
/// Largest payload a u16 `len` allows after the 26 header bytes.
const PAYLOAD_HARD_MAX: usize = u16::MAX as usize - 26;
/// Records held back for ordering before they are written anyway.
const MAX_QUEUED: usize = 10_000;
/// Original records held to restore file order: at most this many, and
/// this many bytes (past either, the earliest goes out as if next).
const MAX_HELD: usize = 65_536;
const MAX_HELD_BYTES: usize = 16 << 20;
/// htyp bits a record may keep from its source (the rest are fixed).
const HTYP_KEEP: u8 = layout::HTYP_UEH | layout::HTYP_WEID | layout::HTYP_WSID | layout::HTYP_WTMS;

/// DLT log level (MTIN) of a priority name: DLT's own levels, then the
/// timeline priorities (error, warning, info; trace → debug; app, packet,
/// library → verbose).
pub fn level_of(priority: &str) -> Option<u8> {
    Some(match priority.to_ascii_lowercase().as_str() {
        "fatal" => 1,
        "error" => 2,
        "warn" | "warning" => 3,
        "info" => 4,
        "debug" | "trace" => 5,
        "verbose" | "app" | "packet" | "library" => 6,
        _ => return None,
    })
}

/// Collision-free 4-byte ids for names (APIDs per stream, CTIDs per APID).
///
/// A name of 1–4 printable ASCII characters is its own id (`-` or empty is
/// the all-NUL id). Longer names, and names whose id is taken by another
/// name, try in turn: the first 4 of their letters and digits; the first 3
/// plus the last; the first 2 plus two base-36 digits (`00`…`zz`); the
/// first plus three. The first name to ask gets the id, so the choice
/// depends on stream order only.
#[derive(Default)]
pub struct Ids {
    apids: HashMap<String, [u8; 4]>,
    apid_used: HashSet<[u8; 4]>,
    ctids: HashMap<([u8; 4], String), [u8; 4]>,
    ctid_used: HashSet<([u8; 4], [u8; 4])>,
}

fn exact_id(name: &str) -> Option<[u8; 4]> {
    if name.is_empty() || name == "-" {
        return Some([0; 4]);
    }
    (name.len() <= 4 && name.bytes().all(|b| b.is_ascii_graphic())).then(|| id_from(name))
}

fn candidates(name: &str) -> impl Iterator<Item = [u8; 4]> {
    let base: Vec<u8> = name.bytes().filter(|b| b.is_ascii_alphanumeric()).collect();
    let base = if base.is_empty() { b"X".to_vec() } else { base };
    let id = |v: &[u8]| {
        let mut a = [0u8; 4];
        for (d, s) in a.iter_mut().zip(v) {
            *d = *s;
        }
        a
    };
    const D: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let first = id(&base[..base.len().min(4)]);
    let mut three = base[..base.len().min(3)].to_vec();
    three.push(*base.last().unwrap_or(&b'X'));
    let b2 = base[..base.len().min(2)].to_vec();
    let b1 = base[0];
    let two = (0..36 * 36).map(move |n| {
        let mut v = b2.clone();
        v.resize(2, b'_');
        v.push(D[n / 36]);
        v.push(D[n % 36]);
        id(&v)
    });
    let three_digits =
        (0..36 * 36 * 36).map(move |n| id(&[b1, D[n / 1296], D[n / 36 % 36], D[n % 36]]));
    [first, id(&three)]
        .into_iter()
        .chain(two)
        .chain(three_digits)
}

fn pick(name: &str, taken: impl Fn(&[u8; 4]) -> bool) -> ([u8; 4], bool) {
    if let Some(id) = exact_id(name) {
        if !taken(&id) {
            return (id, true);
        }
    }
    match candidates(name).find(|c| !taken(c)) {
        Some(id) => (id, false),
        // 46,000+ names sharing a first letter: share an id.
        None => (candidates(name).next().unwrap_or([b'X', 0, 0, 0]), false),
    }
}

impl Ids {
    /// The APID of a category, and whether it is the category itself.
    pub fn apid(&mut self, category: &str) -> ([u8; 4], bool) {
        if let Some(id) = self.apids.get(category) {
            return (*id, exact_id(category) == Some(*id));
        }
        let (id, exact) = pick(category, |c| self.apid_used.contains(c));
        self.apids.insert(category.to_string(), id);
        self.apid_used.insert(id);
        (id, exact)
    }
    /// The CTID of a name under an APID, and whether it is the name itself.
    pub fn ctid(&mut self, apid: [u8; 4], name: &str) -> ([u8; 4], bool) {
        if let Some(id) = self.ctids.get(&(apid, name.to_string())) {
            return (*id, exact_id(name) == Some(*id));
        }
        let (id, exact) = pick(name, |c| self.ctid_used.contains(&(apid, *c)));
        self.ctids.insert((apid, name.to_string()), id);
        self.ctid_used.insert((apid, id));
        (id, exact)
    }
}

/// How the events of one type are written.
struct TypeOut {
    kpi: bool,
    nonverbose: bool,
    apid: [u8; 4],
    ctid: [u8; 4],
    msin: u8,
    /// `_event`/`_metric` argument and its value, when the ids lose the name.
    name_arg: Option<(ArgSpec, Value)>,
    args: Vec<ArgSpec>,
    /// Enum labels per field (enums other than bool are written as labels).
    labels: Vec<Option<Vec<(i64, String)>>>,
    what: String,
}

/// How the values of one metric are written.
struct MetricOut {
    apid: [u8; 4],
    ctid: [u8; 4],
    name: String,
    indom: Option<IndomId>,
    value: ArgSpec,
    kpi: bool,
}

pub struct DltWriter<W: Write> {
    out: W,
    name: PathBuf,
    grouper: Grouper,
    loss: LossReport,
    mcnt: u8,
    ecu: [u8; 4],
    apid: [u8; 4],
    ctid: [u8; 4],
    session: u32,
    /// An id option was given: rebuild every record with it.
    forced: bool,
    force_app: Option<[u8; 4]>,
    force_ctx: Option<[u8; 4]>,
    force_ecu: bool,
    force_session: bool,
    payload_max: usize,
    /// Emulate libdlt's truncated duplicates (`--dlt-truncated-tails`).
    tails: bool,
    tmsp_from_raw: bool,
    first_time: Option<Timestamp>,
    types: HashMap<EventTypeId, TypeOut>,
    metrics: HashMap<MetricId, MetricOut>,
    inst_names: HashMap<(IndomId, InstId), String>,
    ids: Ids,
    /// Message counters per context (general messages).
    ctx_mcnt: HashMap<([u8; 4], [u8; 4]), u8>,
    /// Records waiting for the KPI group being collected (time, bytes).
    queue: VecDeque<(Timestamp, Vec<u8>)>,
    /// Bytes of the records in `queue` (`--split SIZE` counts them).
    queued_bytes: u64,
    /// Bytes handed to `out` so far.
    flushed: u64,
    /// Original records by `dlt.order`, waiting for the ones before them
    /// (time, record), their bytes, and the next order to write.
    held: BTreeMap<u64, (Timestamp, Vec<u8>)>,
    held_bytes: usize,
    next_order: u64,
    /// Off once a second stream of orders shows (a merge carried through).
    restore: bool,
    records: u64,
    payload: Vec<u8>,
    rec: Vec<u8>,
}

impl<W: Write> DltWriter<W> {
    pub fn new(out: W, name: PathBuf, header: &Header, opts: &WriteOptions) -> DltWriter<W> {
        let session = opts
            .session_id
            .or_else(|| {
                header
                    .extras
                    .u64(X_SESSION)
                    .and_then(|s| u32::try_from(s).ok())
            })
            .unwrap_or_else(std::process::id);
        let force_app = opts.app_id.as_deref().map(id_from);
        let force_ctx = opts.ctx_id.as_deref().map(id_from);
        DltWriter {
            out,
            name,
            grouper: Grouper::new(),
            loss: LossReport::default(),
            mcnt: 0,
            ecu: id_from(
                opts.ecu
                    .as_deref()
                    .or(header.extras.str(X_ECU))
                    .unwrap_or("ECU1"),
            ),
            apid: force_app.unwrap_or(*b"PROC"),
            ctid: force_ctx.unwrap_or(*b"PROC"),
            session,
            forced: opts.ecu.is_some()
                || opts.app_id.is_some()
                || opts.ctx_id.is_some()
                || opts.session_id.is_some(),
            force_app,
            force_ctx,
            force_ecu: opts.ecu.is_some(),
            force_session: opts.session_id.is_some(),
            payload_max: opts
                .dlt_payload_max
                .unwrap_or(DEFAULT_PAYLOAD_MAX)
                .clamp(TYPE_ARG + 8, PAYLOAD_HARD_MAX),
            tails: opts.dlt_truncated_tails,
            tmsp_from_raw: raw_clock_is_tmsp(header),
            first_time: None,
            types: HashMap::new(),
            metrics: HashMap::new(),
            inst_names: HashMap::new(),
            ids: Ids::default(),
            ctx_mcnt: HashMap::new(),
            queue: VecDeque::new(),
            queued_bytes: 0,
            flushed: 0,
            held: BTreeMap::new(),
            held_bytes: 0,
            next_order: 0,
            restore: true,
            records: 0,
            payload: Vec::with_capacity(DEFAULT_PAYLOAD_MAX),
            rec: Vec::with_capacity(1 << 16),
        }
    }

    fn tmsp(&mut self, time: Timestamp, raw: Option<u64>) -> u32 {
        let first = *self.first_time.get_or_insert(time);
        match raw {
            Some(r) if self.tmsp_from_raw => r as u32,
            _ => ((time.0 - first.0).max(0) / 100_000) as u32,
        }
    }

    fn storage_time(time: Timestamp) -> (u32, i32) {
        let secs = time.secs().clamp(0, u32::MAX as i64) as u32;
        (secs, (time.subsec_nanos() / 1000) as i32)
    }

    // -------------------------------------------------------------- KPI

    fn kpi_message(&mut self, time: Timestamp, tmsp: u32, args: &[&[u8]]) {
        self.payload.clear();
        for a in args {
            put_string_arg(&mut self.payload, a);
        }
        let (secs, usecs) = Self::storage_time(time);
        layout::put_record(
            &mut self.rec,
            &RecordSpec {
                secs,
                usecs,
                ecu: self.ecu,
                mcnt: self.mcnt,
                session: self.session,
                tmsp,
                msin: MSIN_KPI,
                noar: args.len() as u8,
                apid: self.apid,
                ctid: self.ctid,
                payload: &self.payload,
            },
        );
        self.mcnt = self.mcnt.wrapping_add(1);
        self.records += 1;
    }

    fn group(&mut self, mut g: Group) -> Result<()> {
        let tmsp = self.tmsp(g.time, g.raw_clock);
        let kind = g.kind.as_bytes();
        // A dataset must fit with the type argument into one message.
        let max_ds = self.payload_max - TYPE_ARG - 7;
        for d in g.datasets.iter_mut() {
            if d.len() > max_ds {
                d.truncate(max_ds);
                self.loss.degrade(
                    &format!("{} datasets", g.kind),
                    "longer than a message can hold: cut to fit",
                );
            }
        }
        self.kpi_message(g.time, tmsp, &[kind, b"BEG"]);
        for r in pack(&g.datasets, self.payload_max) {
            let tail = if self.tails {
                tail_after(&g.datasets, &r, self.payload_max)
            } else {
                None
            };
            // pack() bounds the count by payload size; noar is a u8.
            let chunks: Vec<&[Vec<u8>]> = g.datasets[r].chunks(254).collect();
            for (i, chunk) in chunks.iter().enumerate() {
                let mut args: Vec<&[u8]> = Vec::with_capacity(chunk.len() + 2);
                args.push(kind);
                args.extend(chunk.iter().map(|d| d.as_slice()));
                // The duplicate only where libdlt's split is, and noar allows.
                if let Some(t) = tail.as_deref().filter(|_| i + 1 == chunks.len()) {
                    if args.len() < 255 {
                        args.push(t);
                    }
                }
                self.kpi_message(g.time, tmsp, &args);
            }
        }
        self.kpi_message(g.time, tmsp, &[kind, b"END"]);
        self.loss
            .wrote(&format!("{} datasets", g.kind), g.datasets.len() as u64);
        self.flush_rec()
    }

    /// Write groups, each preceded by the queued records older than it
    /// (the grouper hands a group over only when the next one starts).
    fn emit(&mut self, groups: Vec<Group>) -> Result<()> {
        for g in groups {
            while self.queue.front().is_some_and(|(t, _)| *t < g.time) {
                if let Some((_, r)) = self.queue.pop_front() {
                    self.queued_bytes -= r.len() as u64;
                    self.rec.extend_from_slice(&r);
                }
            }
            self.group(g)?;
        }
        if self.grouper.pending_time().is_none() || self.queue.len() > MAX_QUEUED {
            self.unqueue();
        }
        self.flush_rec()
    }

    // -------------------------------------------------------------- other

    /// A finished record in `self.rec[start..]`: written now, or held
    /// while a KPI group is being collected.
    fn place(&mut self, start: usize, time: Timestamp) -> Result<()> {
        self.records += 1;
        if self.grouper.pending_time().is_some() {
            let r = self.rec.split_off(start);
            self.queued_bytes += r.len() as u64;
            self.queue.push_back((time, r));
            if self.queue.len() > MAX_QUEUED {
                return self.emit(Vec::new());
            }
            return Ok(());
        }
        self.flush_rec()
    }

    /// An original record: written in file order (`dlt.order`), held
    /// while records before it are still to come. Items of a merge (a
    /// `source` extra) and orders that start again are written as they come.
    fn original(&mut self, raw: &[u8], time: Timestamp, x: &Extras) -> Result<()> {
        let order = x
            .u64(X_ORDER)
            .filter(|_| self.restore && x.get(crate::model::keys::SOURCE).is_none());
        match order {
            Some(n) if n >= self.next_order && !self.held.contains_key(&n) => {
                self.held_bytes += raw.len();
                self.held.insert(n, (time, raw.to_vec()));
                self.release(false)
            }
            _ => {
                if order.is_some() {
                    self.restore = false;
                    self.release(true)?;
                }
                let start = self.rec.len();
                self.rec.extend_from_slice(raw);
                self.place(start, time)
            }
        }
    }

    /// Held records whose turn has come (all of them with `all`).
    fn release(&mut self, all: bool) -> Result<()> {
        while let Some((&n, _)) = self.held.first_key_value() {
            let full = self.held.len() > MAX_HELD || self.held_bytes > MAX_HELD_BYTES;
            if !(all || full || n == self.next_order) {
                break;
            }
            let Some((_, (time, r))) = self.held.pop_first() else {
                break;
            };
            self.held_bytes -= r.len();
            self.next_order = n + 1;
            let start = self.rec.len();
            self.rec.extend_from_slice(&r);
            self.place(start, time)?;
        }
        Ok(())
    }

    fn next_mcnt(&mut self, apid: [u8; 4], ctid: [u8; 4]) -> u8 {
        let c = self.ctx_mcnt.entry((apid, ctid)).or_insert(0);
        let v = *c;
        *c = c.wrapping_add(1);
        v
    }

    fn define_type(&mut self, t: &EventType) {
        let kpi = Grouper::is_kpi_type(t);
        let from_dlt = t.extras.get(X_VERBOSE).is_some();
        let byte_seq = |ft: &FieldType| match ft {
            FieldType::Bytes => true,
            FieldType::Sequence { elem, .. } | FieldType::Array { elem, .. } => {
                matches!(**elem, FieldType::Uint(1))
            }
            _ => false,
        };
        let nonverbose = match t.extras.bool(X_VERBOSE) {
            Some(v) => !v,
            // The reader's shape, also after a trip through another format.
            None => {
                t.fields.len() == 2
                    && t.fields[0].name == "message_id"
                    && t.fields[0].ty == FieldType::Uint(4)
                    && t.fields[1].name == "payload"
                    && byte_seq(&t.fields[1].ty)
            }
        };
        let level = t.priority.as_deref().and_then(level_of).unwrap_or(4);
        let msin = match t.extras.u64(X_MSIN) {
            Some(m) => m as u8,
            None => (level << 4) | (!nonverbose as u8),
        };
        let (apid, ctid, name_arg) = if t.category == "metric" {
            let (a, c, _) = self.metric_ids(&t.name);
            (a, c, Some(name_arg(METRIC_ARG, &t.name)))
        } else {
            let (a, ea) = self.ids.apid(&t.category);
            let (c, ec) = self.ids.ctid(a, &t.name);
            let a = self.force_app.unwrap_or(a);
            let c = self.force_ctx.unwrap_or(c);
            let exact = ea && ec && self.force_app.is_none() && self.force_ctx.is_none();
            let arg = (!exact && !nonverbose)
                .then(|| name_arg(EVENT_ARG, &format!("{}.{}", t.category, t.name)));
            (a, c, arg)
        };
        let list = |k: &str| match t.extras.get(k) {
            Some(ExtraValue::List(v)) if v.len() == t.fields.len() => Some(v.clone()),
            _ => None,
        };
        let tis = list(X_TYPE_INFO).filter(|_| from_dlt);
        let units = list(X_UNITS);
        let mut specs = Vec::new();
        let mut labels = Vec::new();
        for (i, f) in t.fields.iter().enumerate() {
            let ti = match tis.as_ref().and_then(|v| v.get(i)) {
                Some(ExtraValue::U64(ti)) => *ti as u32,
                _ => args::type_info_for(&f.ty),
            };
            let unit = match units.as_ref().and_then(|v| v.get(i)) {
                Some(ExtraValue::Str(u)) if !u.is_empty() => Some(u.clone()),
                _ => None,
            };
            let positional = f.name == format!("arg{i}");
            specs.push(ArgSpec {
                ti,
                name: (!positional).then(|| f.name.clone()),
                unit,
            });
            labels.push(match &f.ty {
                FieldType::Enum { labels, .. } if ti & layout::TI_STRG != 0 => Some(labels.clone()),
                _ => None,
            });
        }
        self.types.insert(
            t.id,
            TypeOut {
                kpi,
                nonverbose,
                apid,
                ctid,
                msin,
                name_arg,
                args: specs,
                labels,
                what: format!("{}.{} events", t.category, t.name),
            },
        );
    }

    /// APID from a metric name's first component, CTID from the rest.
    fn metric_ids(&mut self, name: &str) -> ([u8; 4], [u8; 4], bool) {
        let (head, rest) = name.split_once('.').unwrap_or((name, name));
        let (a, _) = self.ids.apid(head);
        let (c, _) = self.ids.ctid(a, rest);
        (
            self.force_app.unwrap_or(a),
            self.force_ctx.unwrap_or(c),
            false,
        )
    }

    fn define_metric(&mut self, m: &Arc<MetricDesc>) {
        let name = m.name().to_string();
        let kpi = Grouper::is_kpi_metric(&name);
        let (apid, ctid, _) = if kpi {
            ([0; 4], [0; 4], false)
        } else {
            self.metric_ids(&name)
        };
        let ti = match m.vtype {
            ValueType::I32 => layout::TI_SINT | 3,
            ValueType::U32 => layout::TI_UINT | 3,
            ValueType::I64 => layout::TI_SINT | 4,
            ValueType::U64 => layout::TI_UINT | 4,
            ValueType::F32 => layout::TI_FLOA | 3,
            ValueType::F64 => layout::TI_FLOA | 4,
            ValueType::Aggregate => layout::TI_RAWD,
            _ => layout::TI_STRG,
        };
        let unit = m.units.pcp_str();
        self.metrics.insert(
            m.id,
            MetricOut {
                apid,
                ctid,
                name,
                indom: m.indom,
                value: ArgSpec {
                    ti,
                    name: Some("value".into()),
                    unit: (!unit.is_empty() && ti & layout::TI_STRG == 0).then_some(unit),
                },
                kpi,
            },
        );
    }

    fn indom(&mut self, u: &IndomUpdate) {
        u.apply_to(&mut DomainNames(u.id, &mut self.inst_names));
    }

    /// Header fields of a general record.
    #[allow(clippy::too_many_arguments)]
    fn put_general(
        &mut self,
        time: Timestamp,
        raw: Option<u64>,
        x: Option<&Extras>,
        apid: [u8; 4],
        ctid: [u8; 4],
        msin: u8,
        noar: u8,
    ) -> usize {
        let get = |k: &str| x.and_then(|x| x.u64(k));
        let tmsp = self.tmsp(time, raw);
        let storage = x
            .and_then(|x| x.i64(X_STORAGE))
            .map(Timestamp)
            .unwrap_or(time);
        let (secs, usecs) = Self::storage_time(storage);
        let ecu = match x.and_then(|x| x.str(X_ECU)) {
            Some(e) if !self.force_ecu => id_from(e),
            _ => self.ecu,
        };
        let session = match get(X_SESSION) {
            Some(s) if !self.force_session => s as u32,
            _ => self.session,
        };
        let mcnt = match get(X_MCNT) {
            Some(m) => m as u8,
            None => self.next_mcnt(apid, ctid),
        };
        // Keep the source's choice of header extras (a file without
        // session ids or timestamps stays so); ours have all of them.
        let mut htyp = get(X_HTYP).map_or(HTYP_KEEP, |h| h as u8 & HTYP_KEEP);
        if !self.force_session && get(X_SESSION).is_none() && get(X_HTYP).is_some() {
            htyp &= !layout::HTYP_WSID;
        }
        if raw.is_none() && get(X_HTYP).is_some() {
            htyp &= !layout::HTYP_WTMS;
        }
        if htyp & layout::HTYP_UEH == 0 && (apid != [0; 4] || ctid != [0; 4] || msin & 1 != 0) {
            htyp |= layout::HTYP_UEH;
        }
        let start = self.rec.len();
        layout::put_record_flags(
            &mut self.rec,
            htyp,
            &RecordSpec {
                secs,
                usecs,
                ecu,
                mcnt,
                session,
                tmsp,
                msin,
                noar,
                apid,
                ctid,
                payload: &self.payload,
            },
        );
        start
    }

    fn event(&mut self, e: &Event) -> Result<()> {
        let Some(t) = self.types.get(&e.type_id) else {
            self.loss.drop_item("events", "event of an undefined type");
            return Ok(());
        };
        if t.kpi {
            let groups = self.grouper.item(&Item::Event(e.clone()), &mut self.loss);
            return self.emit(groups);
        }
        if !self.forced {
            if let Some(raw) = e.extras.bytes(X_RAW) {
                if layout::check_headers(raw).ok() == Some(raw.len()) {
                    self.loss.wrote("messages (original DLT records)", 1);
                    return self.original(raw, e.time, &e.extras);
                }
            }
        }
        let (apid, ctid, msin) = (t.apid, t.ctid, t.msin);
        self.payload.clear();
        let mut noar = 0usize;
        let mut cut = false;
        let mut as_text = false;
        let mut as_label = false;
        let what = t.what.clone();
        if t.nonverbose {
            let id = match e.fields.first() {
                Some(Value::U64(v)) => *v as u32,
                Some(Value::I64(v)) => *v as u32,
                _ => 0,
            };
            self.payload.extend_from_slice(&id.to_le_bytes());
            let body = match e.fields.get(1) {
                Some(Value::Bytes(b)) => b.clone(),
                Some(Value::List(xs)) => {
                    xs.iter().map(|x| x.as_i128().unwrap_or(0) as u8).collect()
                }
                _ => Vec::new(),
            };
            let room = PAYLOAD_HARD_MAX - 4;
            cut = body.len() > room;
            self.payload
                .extend_from_slice(&body[..body.len().min(room)]);
        } else {
            if let Some((spec, v)) = &t.name_arg {
                args::put(&mut self.payload, spec, v, None);
                noar += 1;
            }
            for (i, v) in e.fields.iter().enumerate() {
                if noar == 255 {
                    cut = true;
                    break;
                }
                let spec = t.args.get(i).cloned().unwrap_or(ArgSpec {
                    ti: layout::TI_STRG,
                    name: None,
                    unit: None,
                });
                let label = t.labels.get(i).and_then(|l| l.as_ref()).and_then(|ls| {
                    let n = v.as_i128()?;
                    ls.iter()
                        .find(|(k, _)| *k as i128 == n)
                        .map(|(_, l)| l.as_str())
                });
                let before = self.payload.len();
                as_label |= label.is_some();
                match args::put(&mut self.payload, &spec, v, label) {
                    Some(Degraded::AsText) => as_text = true,
                    Some(Degraded::Cut) => cut = true,
                    None => {}
                }
                if self.payload.len() > PAYLOAD_HARD_MAX {
                    self.payload.truncate(before);
                    cut = true;
                    break;
                }
                noar += 1;
            }
        }
        if cut {
            self.loss.degrade(
                &what,
                "more than a DLT message holds (255 arguments, 64 KiB): cut to fit",
            );
        }
        if as_text {
            self.loss
                .degrade(&what, "arrays and structs written as their text");
        }
        if as_label {
            self.loss
                .degrade(&what, "enum values written as their label strings");
        }
        if e.cpu.is_some() {
            self.loss
                .degrade("events", "their CPU is not kept: DLT messages have none");
        }
        let noar = if t.nonverbose {
            e.extras.u64(X_NOAR).unwrap_or(0) as u8
        } else {
            noar as u8
        };
        let start = self.put_general(e.time, e.raw_clock, Some(&e.extras), apid, ctid, msin, noar);
        self.loss.wrote("messages", 1);
        self.place(start, e.time)
    }

    fn sample(&mut self, s: &Sample) -> Result<()> {
        let mut kpi: Vec<MetricValues> = Vec::new();
        for mv in &s.metrics {
            let Some(m) = self.metrics.get(&mv.metric) else {
                self.loss
                    .drop_item("values", "value of an undefined metric");
                continue;
            };
            if m.kpi {
                kpi.push(mv.clone());
                continue;
            }
            let vals = match &mv.values {
                Ok(v) => v,
                Err(_) => {
                    self.loss.drop_item(
                        &format!("{} error codes", m.name),
                        "DLT messages carry values, not PCP error codes",
                    );
                    continue;
                }
            };
            let (apid, ctid, indom) = (m.apid, m.ctid, m.indom);
            let name = Value::Str(m.name.clone());
            let spec = m.value.clone();
            let what = format!("{} values", m.name);
            for (inst, v) in vals {
                if matches!(v, Value::Events(_)) {
                    self.loss
                        .drop_item(&what, "event records are not written as DLT messages");
                    continue;
                }
                self.payload.clear();
                args::put(&mut self.payload, &name_arg(METRIC_ARG, "").0, &name, None);
                let mut noar = 2u8;
                if *inst != PM_IN_NULL {
                    let iname = indom
                        .and_then(|d| self.inst_names.get(&(d, *inst)))
                        .cloned()
                        .unwrap_or_else(|| inst.to_string());
                    let spec = ArgSpec {
                        ti: layout::TI_STRG,
                        name: Some("instance".into()),
                        unit: None,
                    };
                    args::put(&mut self.payload, &spec, &Value::Str(iname), None);
                    noar += 1;
                }
                if args::put(&mut self.payload, &spec, v, None).is_some() {
                    self.loss
                        .degrade(&what, "written as text or cut to fit a DLT message");
                }
                let start = self.put_general(s.time, s.raw_clock, None, apid, ctid, 0x41, noar);
                self.loss.wrote("messages (sample values)", 1);
                self.place(start, s.time)?;
            }
        }
        if !kpi.is_empty() {
            let k = Sample {
                time: s.time,
                raw_clock: s.raw_clock,
                metrics: kpi,
                extras: s.extras.clone(),
            };
            let groups = self.grouper.item(&Item::Sample(k), &mut self.loss);
            self.emit(groups)?;
        }
        Ok(())
    }

    fn note(&mut self, a: &Annotation) -> Result<()> {
        if !self.forced {
            if let Some(raw) = a.extras.bytes(X_RAW) {
                if layout::check_headers(raw).ok() == Some(raw.len()) {
                    self.loss.wrote("annotations (original DLT records)", 1);
                    return self.original(raw, a.time, &a.extras);
                }
            }
        }
        let mut text = a.text.as_bytes();
        let max = PAYLOAD_HARD_MAX - 7;
        if text.len() > max {
            text = &text[..max];
            self.loss
                .degrade("annotations", "longer than a message can hold: cut to fit");
        }
        self.payload.clear();
        put_string_arg(&mut self.payload, text);
        let msin = a
            .extras
            .u64(X_MSIN)
            .map(|m| (m as u8) | layout::MSIN_VERB)
            .unwrap_or(MSIN_KPI);
        let apid = self
            .force_app
            .unwrap_or_else(|| id_from(a.extras.str(X_APID).unwrap_or("POLY")));
        let ctid = self
            .force_ctx
            .unwrap_or_else(|| id_from(a.extras.str(X_CTID).unwrap_or("NOTE")));
        let start = self.put_general(a.time, a.raw_clock, Some(&a.extras), apid, ctid, msin, 1);
        self.loss.wrote("annotations", 1);
        self.place(start, a.time)
    }

    fn flush_rec(&mut self) -> Result<()> {
        if self.rec.len() >= 1 << 15 {
            self.out
                .write_all(&self.rec)
                .map_err(|e| Error::io(&self.name, e))?;
            self.flushed += self.rec.len() as u64;
            self.rec.clear();
        }
        Ok(())
    }

    /// Every queued record after the others, in order.
    fn unqueue(&mut self) {
        for (_, r) in std::mem::take(&mut self.queue) {
            self.rec.extend_from_slice(&r);
        }
        self.queued_bytes = 0;
    }
}

/// The `_event`/`_metric` first argument.
fn name_arg(marker: &str, value: &str) -> (ArgSpec, Value) {
    (
        ArgSpec {
            ti: layout::TI_STRG,
            name: Some(marker.into()),
            unit: None,
        },
        Value::Str(value.into()),
    )
}

impl<W: Write + Send> TraceWriter for DltWriter<W> {
    /// Records written, held in `rec` or queued: what the file holds once
    /// finished, but for a KPI group still being collected.
    fn bytes_written(&self) -> Option<u64> {
        Some(self.flushed + self.rec.len() as u64 + self.queued_bytes + self.held_bytes as u64)
    }
    fn write_item(&mut self, item: &Item) -> Result<()> {
        match item {
            Item::EventType(t) => {
                self.define_type(t);
                self.grouper.item(item, &mut self.loss);
                Ok(())
            }
            Item::Metric(m) => {
                self.define_metric(m);
                self.grouper.item(item, &mut self.loss);
                Ok(())
            }
            Item::Indom(u) => {
                self.indom(u);
                self.grouper.item(item, &mut self.loss);
                Ok(())
            }
            Item::Help(h) => {
                // The kpi.* help is implied by the KPI datasets; other help
                // has no place in a DLT message.
                let kpi = match h.target {
                    HelpTarget::Metric(id) => self.metrics.get(&id).is_some_and(|m| m.kpi),
                    HelpTarget::Indom(d) => {
                        self.metrics.values().any(|m| m.kpi && m.indom == Some(d))
                    }
                };
                if !kpi {
                    self.loss
                        .drop_item("help texts", "DLT messages have no help text");
                }
                Ok(())
            }
            Item::Labels(_) => {
                self.loss
                    .drop_item("label sets", "DLT messages have no labels");
                Ok(())
            }
            Item::Event(e) => self.event(e),
            Item::EventRun(r) => r.each_item(|it| self.write_item(it)),
            Item::Sample(s) => self.sample(s),
            Item::Annotation(a) => self.note(a),
            Item::Mark(_) => {
                self.loss.drop_item("marks", "DLT files have no marks");
                Ok(())
            }
        }
    }

    fn finish(mut self: Box<Self>) -> Result<LossReport> {
        self.release(true)?;
        let groups = self.grouper.finish(&mut self.loss);
        self.emit(groups)?;
        self.unqueue();
        if self.records == 0 {
            return Err(Error::nothing_to_write(
                "nothing to write as DLT",
                "no event, sample value or annotation",
            ));
        }
        let rec = std::mem::take(&mut self.rec);
        self.out
            .write_all(&rec)
            .map_err(|e| Error::io(&self.name, e))?;
        self.out.flush().map_err(|e| Error::io(&self.name, e))?;
        Ok(std::mem::take(&mut self.loss))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_exact_when_they_can_be_and_never_collide() {
        let mut ids = Ids::default();
        assert_eq!(ids.apid("LOG"), (*b"LOG\0", true));
        assert_eq!(ids.apid("-"), ([0; 4], true));
        let (core, exact) = ids.apid("core");
        assert_eq!((core, exact), (*b"core", true));
        let (a, e) = ids.ctid(core, "irq_entry");
        assert_eq!((a, e), (*b"irqe", false));
        let (b, _) = ids.ctid(core, "irq_exit");
        assert_eq!(b, *b"irqt");
        let (c, _) = ids.ctid(core, "irq_else");
        assert_eq!(c, *b"ir00");
        // Asked again: the same id. Another APID scope: free again.
        assert_eq!(ids.ctid(core, "irq_exit").0, *b"irqt");
        let (kern, _) = ids.apid("kernel");
        assert_eq!(kern, *b"kern");
        assert_eq!(ids.ctid(kern, "irq_exit").0, *b"irqe");
        // A name that is its own id but taken by a longer one.
        let (x, e) = ids.apid("kern");
        assert!(!e && x != kern, "{x:?}");
        let mut seen = HashSet::new();
        for i in 0..3000 {
            let (id, _) = ids.ctid(core, &format!("event_{i}"));
            assert!(seen.insert(id), "{i}: {id:?} twice");
        }
    }

    #[test]
    fn levels_from_priorities() {
        assert_eq!(level_of("warn"), Some(3));
        assert_eq!(level_of("warning"), Some(3));
        assert_eq!(level_of("trace"), Some(5));
        assert_eq!(level_of("library"), Some(6));
        assert_eq!(level_of("whatever"), None);
    }
}
