//! Events as PCP event records, reversibly.
//!
//! Each model event type becomes one `PM_TYPE_HIGHRES_EVENT` metric
//! `trace.<category>.<type>.records` (pmID 454.<cluster>.0, one cluster per
//! type) and each of its fields one parameter metric
//! `trace.<category>.<type>.<field>` (454.<cluster>.<1 + field index>) with
//! a descriptor of the field's type. Every event is one record (flags
//! POINT, nanosecond time) with one parameter per field, plus
//! `trace.event.raw_clock` and `trace.event.extra.<key>` parameters for
//! its raw clock and extras. The instance of a record value is the event's
//! stream (CPU or tracefile) in the indom 454.0, whose per-instance labels
//! `{"cpu":N,"stream":"…"}` say exactly which.
//!
//! Self-description (`selfdesc.rs`): the long help text of each record
//! metric ends with `polytrace-event-type: {JSON}` (category, name,
//! description, priority, format, the field type tree, extras), the one of
//! each shared parameter with `polytrace-extra: {JSON}`, and the one of the
//! indom 454.0 with `polytrace-header: {JSON}` (source format, system
//! description, extras). Our reader turns these metrics back into the
//! original event types and events; other tools see ordinary PCP event
//! records (`pmdumplog -a` prints each parameter as `name: value`).
//!
//! Consecutive events go into one result (at the latest event's time) as
//! long as their original order can be restored by a stable sort on time:
//! an event that is earlier than the batch's last one, or at the same time
//! but of another (type, stream), starts a new result.

use super::data::decode_typed;
use super::layout::*;
use super::meta::{MetaRec, TextRec};
use super::selfdesc;
use crate::model::*;
use serde_json::{json, Value as J};
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;
use std::sync::Arc;

/// PMDA domain of polytrace's event-record metrics (private range; 452 is
/// KPI, 453 the `events.*` counters).
pub const DOMAIN: u32 = 454;
/// The event streams (CPUs, tracefiles) instance domain.
pub const STREAM_INDOM: u32 = indom_id(DOMAIN, 0);
/// Cluster of the parameters every event type shares (raw clock, extras).
const SHARED_CLUSTER: u32 = 4095;
pub const RAW_CLOCK_PMID: u32 = pmid(DOMAIN, SHARED_CLUSTER, 0);
/// Item numbers go up to 1023: item 0 is the record metric.
const MAX_FIELDS: usize = 1023;

pub const TYPE_TAG: &str = "polytrace-event-type: ";
pub const EXTRA_TAG: &str = "polytrace-extra: ";
pub const HEADER_TAG: &str = "polytrace-header: ";

const ROOT: &str = "trace";
/// The node of the shared parameters under `trace.`.
const SHARED_NODE: &str = "event";
/// Name components are cut to this many characters.
const MAX_NODE: usize = 64;

/// PM_EVENT_FLAG_POINT.
const FLAG_POINT: u32 = 0x1;
/// A result is closed after this many records or bytes…
const BATCH_RECORDS: usize = 4096;
const BATCH_BYTES: usize = 256 << 10;
/// …or when its events span more than this (so result times stay close to
/// the events they hold).
const BATCH_SPAN_NS: i64 = 1_000_000_000;
/// A value block's length has 24 bits.
const MAX_VLEN: usize = 0x00ff_ffff;

/// Where a field's value goes: a parameter of a PCP type, or a string
/// holding the JSON of a composite value.
#[derive(Debug, Clone)]
enum Slot {
    Scalar(i32),
    Json,
}

fn slot_of(t: &FieldType) -> Slot {
    match t {
        FieldType::Int(1 | 2 | 4) => Slot::Scalar(0),
        FieldType::Int(_) => Slot::Scalar(2),
        FieldType::Uint(1 | 2 | 4) => Slot::Scalar(1),
        FieldType::Uint(_) => Slot::Scalar(3),
        FieldType::Enum { size, .. } if *size <= 4 => Slot::Scalar(1),
        FieldType::Enum { .. } => Slot::Scalar(2),
        FieldType::Float(4) => Slot::Scalar(4),
        FieldType::Float(_) => Slot::Scalar(5),
        FieldType::String => Slot::Scalar(6),
        FieldType::Bytes => Slot::Scalar(7),
        _ => Slot::Json,
    }
}

/// A PCP name component: letters, digits and `_`, starting with a letter.
fn node(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_NODE)
        .collect();
    if !out.starts_with(|c: char| c.is_ascii_alphabetic()) {
        out.insert(0, 'x');
    }
    out
}

/// `base`, or `base_2`, `base_3`, … whichever `used` does not hold yet.
fn unique(base: String, used: &mut HashSet<String>) -> String {
    let mut n = base.clone();
    let mut k = 2;
    while used.contains(&n) {
        n = format!("{base}_{k}");
        k += 1;
    }
    used.insert(n.clone());
    n
}

struct TypeEnc {
    record: MetricId,
    slots: Vec<Slot>,
    fields: Vec<FieldType>,
    label: String,
}

/// Kinds of extras values, each with its own parameter metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum XKind {
    U64,
    I64,
    F64,
    Bool,
    Str,
    Bytes,
    List,
}

const XKIND_COUNT: usize = XKind::List as usize + 1;

impl XKind {
    fn of(v: &ExtraValue) -> XKind {
        match v {
            ExtraValue::U64(_) => XKind::U64,
            ExtraValue::I64(_) => XKind::I64,
            ExtraValue::F64(_) => XKind::F64,
            ExtraValue::Bool(_) => XKind::Bool,
            ExtraValue::Str(_) => XKind::Str,
            ExtraValue::Bytes(_) => XKind::Bytes,
            ExtraValue::List(_) => XKind::List,
        }
    }
    fn name(self) -> &'static str {
        match self {
            XKind::U64 => "u64",
            XKind::I64 => "i64",
            XKind::F64 => "f64",
            XKind::Bool => "bool",
            XKind::Str => "string",
            XKind::Bytes => "bytes",
            XKind::List => "list",
        }
    }
    fn parse(s: &str) -> Option<XKind> {
        [
            XKind::U64,
            XKind::I64,
            XKind::F64,
            XKind::Bool,
            XKind::Str,
            XKind::Bytes,
            XKind::List,
        ]
        .into_iter()
        .find(|k| k.name() == s)
    }
    fn pcp_type(self) -> i32 {
        match self {
            XKind::U64 => 3,
            XKind::I64 => 2,
            XKind::F64 => 5,
            XKind::Bool => 1,
            XKind::Str | XKind::List => 6,
            XKind::Bytes => 7,
        }
    }
}

/// Per record metric: per stream instance, the record count and records.
type Sets = Vec<(MetricId, Vec<(InstId, u32, Vec<u8>)>)>;
/// Per record metric: per stream instance, an event array payload.
pub type Arrays = Vec<(MetricId, Vec<(InstId, Vec<u8>)>)>;

/// The event arrays of one result: per record metric, per stream instance,
/// the records so far.
#[derive(Default)]
struct Batch {
    sets: Sets,
    records: usize,
    bytes: usize,
    first: i64,
    last: Option<(MetricId, InstId, i64)>,
}

/// One result's worth of event arrays, ready to be framed by the writer.
pub struct EventResult {
    /// Metadata to write first: labels and instance domain of new streams.
    pub meta: Vec<Item>,
    /// The latest event time in the result.
    pub time: Timestamp,
    /// (record metric, [(instance, HIGHRES_EVENT array payload)]).
    pub sets: Arrays,
}

/// Writer side: event types and events into metric definitions and
/// results of event arrays.
pub struct EventEncoder {
    header: Header,
    types: HashMap<EventTypeId, TypeEnc, BuildHasherDefault<IntHasher>>,
    next_cluster: u32,
    cat_nodes: HashMap<String, String>,
    used_cat_nodes: HashSet<String>,
    /// Type nodes used per category node.
    used_type_nodes: HashMap<String, HashSet<String>>,
    streams: HashMap<(Option<u32>, Option<String>), InstId>,
    /// The last stream looked up, to spare a key copy per event.
    last_stream: Option<(Option<u32>, Option<String>, InstId)>,
    /// Time of the first stream added since the last result, and the
    /// labels of the streams added.
    new_streams: Option<i64>,
    new_labels: Vec<LabelSet>,
    /// Time of the last instance-domain record: each is later than the one
    /// before (libpcp keeps one record per indom and time).
    indom_time: Option<i64>,
    stream_names: HashSet<String>,
    instances: Vec<Instance>,
    /// Parameter per extras key, by kind (looked up by `&str`: no key is
    /// built per event; events whose keys differ from the last event's
    /// look here, and SipHash showed in profiles).
    extras: [HashMap<String, MetricId, BuildHasherDefault<IntHasher>>; XKIND_COUNT],
    /// How many extras parameters exist (their item numbers).
    extras_count: usize,
    /// The parameters of the last event's extras, in order: events of one
    /// source mostly carry the same keys, found here without a lookup or
    /// an allocation.
    last_extras: Vec<(String, XKind, Option<MetricId>)>,
    /// The last event's extras and their parameters as encoded: the events
    /// of one message share them (a KPI dataset list: five of an event's
    /// nine parameters), and are then copied, not encoded again. Empty at
    /// first, which is what an event without extras encodes to.
    tail_extras: Extras,
    tail: Vec<u8>,
    tail_params: u32,
    /// Buffers of written results, for the next ones.
    spare_payloads: Vec<Vec<u8>>,
    spare_lists: Vec<Vec<(InstId, u32, Vec<u8>)>>,
    spare_sets: Vec<Sets>,
    extra_ids: Vec<Option<MetricId>>,
    extra_nodes: HashSet<String>,
    raw_clock: bool,
    started: bool,
    /// Results closed so far: the first holds only the first event, so
    /// the archive starts at the first event's time.
    results: u64,
    batch: Batch,
    pub loss: LossReport,
    /// Events encoded: counted here and put in `loss` once at the end (a
    /// keyed count per event showed in profiles).
    pub written: u64,
}

fn desc(id: MetricId, name: String, vtype: i32, indom: Option<IndomId>) -> MetricDesc {
    let mut d = MetricDesc::new(
        id,
        &name,
        ValueType::from_pcp_code(vtype),
        Semantics::Instant,
        Units::NONE,
    );
    d.indom = indom;
    d
}

impl EventEncoder {
    pub fn new(header: &Header) -> EventEncoder {
        EventEncoder {
            header: header.clone(),
            types: HashMap::default(),
            next_cluster: 0,
            cat_nodes: HashMap::new(),
            used_cat_nodes: [SHARED_NODE.to_string()].into_iter().collect(),
            used_type_nodes: HashMap::new(),
            streams: HashMap::new(),
            last_stream: None,
            new_streams: None,
            new_labels: Vec::new(),
            indom_time: None,
            stream_names: HashSet::new(),
            instances: Vec::new(),
            extras: Default::default(),
            extras_count: 0,
            last_extras: Vec::new(),
            tail_extras: Extras::default(),
            tail: Vec::new(),
            tail_params: 0,
            spare_payloads: Vec::new(),
            spare_lists: Vec::new(),
            spare_sets: Vec::new(),
            extra_ids: Vec::new(),
            extra_nodes: HashSet::new(),
            raw_clock: false,
            started: false,
            results: 0,
            batch: Batch::default(),
            loss: LossReport::default(),
            written: 0,
        }
    }

    /// The format the events come from (through a PCP rewrite: the one
    /// they were first converted from).
    fn source(&self) -> String {
        self.header
            .extras
            .str(selfdesc::SOURCE_KEY)
            .map_or_else(|| self.header.source.name().to_string(), str::to_string)
    }

    /// The stream indom's help, carrying the source header, once.
    fn start(&mut self, out: &mut Vec<Item>) {
        if self.started {
            return;
        }
        self.started = true;
        out.push(Item::Help(Help {
            target: HelpTarget::Indom(STREAM_INDOM),
            oneline: true,
            text: "streams (CPUs, tracefiles) of the trace.* event records".into(),
        }));
        out.push(Item::Help(Help {
            target: HelpTarget::Indom(STREAM_INDOM),
            oneline: false,
            text: format!(
                "The CPU or tracefile each event came from, converted by polytrace from the {} \
                 format. The labels cpu and stream of each instance say which.\n\n{HEADER_TAG}{}",
                self.source(),
                selfdesc::header_json(&self.header)
            ),
        }));
    }

    /// Define the metrics of an event type (a re-definition of an id gets
    /// new metrics). Pushes the items the writer must write.
    pub fn define(&mut self, t: &EventType, out: &mut Vec<Item>) {
        self.start(out);
        if self.next_cluster >= SHARED_CLUSTER {
            self.loss
                .drop_item("event types", "more than 4095 event types in one archive");
            self.types.remove(&t.id);
            return;
        }
        let cluster = self.next_cluster;
        self.next_cluster += 1;
        let cat = match self.cat_nodes.get(&t.category) {
            Some(c) => c.clone(),
            None => {
                let c = unique(node(&t.category), &mut self.used_cat_nodes);
                self.cat_nodes.insert(t.category.clone(), c.clone());
                c
            }
        };
        let used = self.used_type_nodes.entry(cat.clone()).or_default();
        let tnode = unique(node(&t.name), used);
        let prefix = format!("{ROOT}.{cat}.{tnode}");
        let label = format!("{}.{}", t.category, t.name);
        let record = pmid(DOMAIN, cluster, 0);
        let mut d = desc(record, format!("{prefix}.records"), 10, Some(STREAM_INDOM));
        d.help_short = Some(
            match t.description.as_deref().and_then(|s| s.lines().next()) {
                Some(first) if !first.trim().is_empty() => {
                    format!("{label} events: {}", first.trim())
                }
                _ => format!("{label} events"),
            },
        );
        d.help_long = Some(format!(
            "Events {label}, converted by polytrace from the {} format: one record per event, \
             one parameter per field.{}\n\n{TYPE_TAG}{}",
            self.source(),
            t.description
                .as_deref()
                .map(|s| format!("\n{s}"))
                .unwrap_or_default(),
            selfdesc::event_type_json(t)
        ));
        out.push(Item::Metric(Arc::new(d)));
        let mut fnodes: HashSet<String> = ["records".to_string()].into_iter().collect();
        let mut slots = Vec::new();
        let mut fields = Vec::new();
        for (i, f) in t.fields.iter().enumerate() {
            if i >= MAX_FIELDS {
                self.loss.degrade(
                    &format!("{label} events"),
                    "fields past the 1023rd are not written (PCP item numbers)",
                );
                break;
            }
            let slot = slot_of(&f.ty);
            let vtype = match slot {
                Slot::Scalar(t) => t,
                Slot::Json => 6,
            };
            let fnode = unique(node(&f.name), &mut fnodes);
            let mut d = desc(
                pmid(DOMAIN, cluster, i as u32 + 1),
                format!("{prefix}.{fnode}"),
                vtype,
                None,
            );
            d.help_short = Some(format!(
                "field {} of {label} ({}{})",
                f.name,
                f.ty.kind_name(),
                if matches!(slot, Slot::Json) {
                    ", as JSON"
                } else {
                    ""
                }
            ));
            d.help_long = f.description.clone();
            out.push(Item::Metric(Arc::new(d)));
            slots.push(slot);
            fields.push(f.ty.clone());
        }
        self.types.insert(
            t.id,
            TypeEnc {
                record,
                slots,
                fields,
                label,
            },
        );
    }

    /// The instance of an event's stream, if it has one already.
    fn find_stream(&mut self, e: &Event) -> Option<InstId> {
        if let Some((c, s, i)) = &self.last_stream {
            if *c == e.cpu && s.as_deref() == e.stream.as_deref() {
                return Some(*i);
            }
        }
        let key = (e.cpu, e.stream.clone());
        let i = *self.streams.get(&key)?;
        self.last_stream = Some((key.0, key.1, i));
        Some(i)
    }

    /// A new stream instance; its labels and the instance domain are
    /// written before the result that first uses it (see [`Self::take`]).
    fn add_stream(&mut self, e: &Event) -> InstId {
        let id = self.instances.len() as InstId;
        let key = (e.cpu, e.stream.clone());
        self.last_stream = Some((key.0, key.1.clone(), id));
        self.streams.insert(key, id);
        let base = match (&e.stream, e.cpu) {
            (Some(s), _) if !s.is_empty() => s.clone(),
            (_, Some(c)) => format!("cpu{c}"),
            _ => "all".into(),
        };
        let name = unique(base, &mut self.stream_names);
        self.instances.push(Instance { id, name });
        let mut o = serde_json::Map::new();
        if let Some(c) = e.cpu {
            o.insert("cpu".into(), json!(c));
        }
        if let Some(s) = &e.stream {
            o.insert("stream".into(), json!(s));
        }
        let labels = o
            .iter()
            .map(|(k, v)| Label {
                name: k.clone(),
                value: v.to_string(),
                flags: PM_LABEL_INSTANCES as u32,
            })
            .collect::<Vec<_>>();
        if !labels.is_empty() {
            self.new_labels.push(LabelSet {
                time: None,
                target: LabelTarget::Instances(STREAM_INDOM),
                inst: id,
                json: J::Object(o).to_string(),
                labels,
            });
        }
        self.new_streams.get_or_insert(e.time.0);
        id
    }

    fn shared_param(
        &mut self,
        what: J,
        name: &str,
        vtype: i32,
        help: String,
        out: &mut Vec<Item>,
    ) -> MetricId {
        let item = self.extras_count as u32 + 1;
        let id = if what.get("raw_clock").is_some() {
            RAW_CLOCK_PMID
        } else {
            pmid(DOMAIN, SHARED_CLUSTER, item)
        };
        let mut d = desc(id, format!("{ROOT}.{SHARED_NODE}.{name}"), vtype, None);
        d.help_short = Some(help);
        d.help_long = Some(format!("Written by polytrace.\n\n{EXTRA_TAG}{what}"));
        out.push(Item::Metric(Arc::new(d)));
        id
    }

    fn extra_param(&mut self, key: &str, kind: XKind, out: &mut Vec<Item>) -> Option<MetricId> {
        if let Some(&id) = self.extras[kind as usize].get(key) {
            return Some(id);
        }
        // Items 1..1023 of the shared cluster.
        if self.extras_count >= MAX_FIELDS {
            self.loss
                .drop_item("event extras", "more than 1023 extras keys in one archive");
            return None;
        }
        let mut used = std::mem::take(&mut self.extra_nodes);
        let n = unique(format!("extra.{}", node(key)), &mut used);
        self.extra_nodes = used;
        let id = self.shared_param(
            json!({ "key": key, "kind": kind.name() }),
            &n,
            kind.pcp_type(),
            format!("extra {key} of the events ({})", kind.name()),
            out,
        );
        self.extras[kind as usize].insert(key.to_string(), id);
        self.extras_count += 1;
        Some(id)
    }

    /// Add an event. A result that must be closed first is returned; the
    /// metadata the event needs is pushed to `out` (write it after that
    /// result).
    pub fn event(&mut self, e: &Event, out: &mut Vec<Item>) -> Option<EventResult> {
        self.event_with(e, out, |rec, te, loss| {
            put_fields(rec, te, e.fields.iter(), loss)
        })
    }

    /// [`Self::event`] of `e` with the field values `put` writes as the
    /// parameters of their type (how many): `e`'s own, or for an event of
    /// a run (`e` the run's) that event's cells.
    fn event_with(
        &mut self,
        e: &Event,
        out: &mut Vec<Item>,
        put: impl FnOnce(&mut Vec<u8>, &TypeEnc, &mut LossReport) -> u32,
    ) -> Option<EventResult> {
        let Some(te) = self.types.get(&e.type_id) else {
            self.loss.drop_item("events", "event of an undefined type");
            return None;
        };
        let record = te.record;
        let found = self.find_stream(e);
        let inst = found.unwrap_or(self.instances.len() as InstId);
        let t = e.time.0;
        let b = &self.batch;
        let close = match b.last {
            None => false,
            Some((p, i, last)) => {
                self.results == 0
                    || t < last
                    || (t == last && (p, i) != (record, inst))
                    || t - b.first > BATCH_SPAN_NS
                    || b.records >= BATCH_RECORDS
                    || b.bytes >= BATCH_BYTES
            }
        };
        let done = if close { self.take() } else { None };
        if found.is_none() {
            self.add_stream(e);
        }
        if e.raw_clock.is_some() && !self.raw_clock {
            self.raw_clock = true;
            self.shared_param(
                json!({ "raw_clock": true }),
                "raw_clock",
                3,
                "raw clock value of the event (see the record.raw_clock header extra)".into(),
                out,
            );
        }
        let same_tail = e.extras.same_bits(&self.tail_extras);
        let mut ids = std::mem::take(&mut self.extra_ids);
        ids.clear();
        if !same_tail {
            for (n, (k, v)) in e.extras.iter().enumerate() {
                let kind = XKind::of(v);
                // An entry maps a key to its parameter, whichever event left
                // it: a match is right even past the last event's keys.
                let id = match self.last_extras.get(n) {
                    Some((lk, lkind, id)) if *lkind == kind && crate::model::key_eq(lk, k) => *id,
                    _ => {
                        let id = self.extra_param(k, kind, out);
                        // Overwrite entry n in place: its key text keeps its buffer.
                        match self.last_extras.get_mut(n) {
                            Some(slot) => {
                                slot.0.clear();
                                slot.0.push_str(k);
                                slot.1 = kind;
                                slot.2 = id;
                            }
                            None => self.last_extras.push((k.to_string(), kind, id)),
                        }
                        id
                    }
                };
                ids.push(id);
            }
        }
        // The record is encoded straight into the batch's payload for
        // (record, instance): no second copy.
        let b = &mut self.batch;
        let k = match b.sets.iter().position(|(p, _)| *p == record) {
            Some(k) => k,
            None => {
                let list = self.spare_lists.pop().unwrap_or_default();
                b.sets.push((record, list));
                b.sets.len() - 1
            }
        };
        let set = &mut b.sets[k].1;
        let j = match set.iter().position(|(i, _, _)| *i == inst) {
            Some(j) => j,
            None => {
                // Room for the record count, filled in by `take`.
                let mut v = self.spare_payloads.pop().unwrap_or_default();
                v.extend_from_slice(&[0u8; 4]);
                set.push((inst, 0, v));
                set.len() - 1
            }
        };
        let rec = &mut set[j].2;
        let start = rec.len();
        rec.extend_from_slice(&e.time.secs().to_be_bytes());
        rec.extend_from_slice(&(e.time.subsec_nanos() as i64).to_be_bytes());
        rec.extend_from_slice(&FLAG_POINT.to_be_bytes());
        let np_at = rec.len();
        rec.extend_from_slice(&0u32.to_be_bytes());
        let te = &self.types[&e.type_id];
        let mut np = put(rec, te, &mut self.loss);
        if let Some(r) = e.raw_clock {
            put_num(rec, RAW_CLOCK_PMID, 3, r.to_be_bytes());
            np += 1;
        }
        if same_tail {
            rec.extend_from_slice(&self.tail);
            np += self.tail_params;
        } else {
            let from = rec.len();
            let np0 = np;
            for (id, v) in ids.iter().zip(e.extras.values()) {
                if let Some(id) = id {
                    put_extra(rec, *id, v);
                    np += 1;
                }
            }
            self.tail.clear();
            self.tail.extend_from_slice(&rec[from..]);
            self.tail_params = np - np0;
            self.tail_extras.copy_from(&e.extras);
        }
        self.extra_ids = ids;
        rec[np_at..np_at + 4].copy_from_slice(&np.to_be_bytes());
        let len = rec.len() - start;
        if len + 8 > MAX_VLEN {
            self.loss
                .drop_item("events", "event larger than a PCP value block (16 MB)");
            rec.truncate(start);
            // An entry (and a set) made for this record alone goes again.
            if set[j].1 == 0 {
                let (_, _, mut v) = set.remove(j);
                v.clear();
                self.spare_payloads.push(v);
                if set.is_empty() {
                    let (_, list) = b.sets.remove(k);
                    self.spare_lists.push(list);
                }
            }
            return done;
        }
        set[j].1 += 1;
        if b.last.is_none() {
            b.first = t;
        }
        b.last = Some((record, inst, t));
        b.records += 1;
        b.bytes += len;
        self.written += 1;
        done
    }

    /// The next of the `rows` events of run `r` left (their values next
    /// in `cells`), as [`Self::event`] would encode them one by one, until
    /// one closes a result or makes metadata (into `out`): how many were
    /// taken, and the closed result. The first is encoded as any event; the
    /// others share its type, stream, result entry and encoded extras, so
    /// each costs its fields and a copy of those extras.
    pub fn event_rows(
        &mut self,
        r: &EventRun,
        cells: &mut CellIter,
        mut rows: usize,
        out: &mut Vec<Item>,
    ) -> (usize, Option<EventResult>) {
        let e = &r.event;
        let w = r.width as usize;
        if rows == 0 {
            return (0, None);
        }
        let before = out.len();
        // The next event's values come next whatever becomes of this one
        // (an event of an undefined type is dropped before its values are
        // read).
        let mut first = cells.clone();
        for _ in 0..w {
            cells.next();
        }
        let done = self.event_with(e, out, |rec, te, loss| {
            put_fields(rec, te, first.by_ref().take(w), loss)
        });
        rows -= 1;
        if done.is_some() || out.len() != before {
            return (1, done);
        }
        // Where the first went: the last record of the batch, in the
        // entry of its record metric and stream instance, with the extras
        // the encoder encoded last (else the run goes event by event).
        let Some((record, inst, t)) = self.batch.last else {
            return (1, None);
        };
        let Some(te) = self.types.get(&e.type_id) else {
            return (1, None);
        };
        if t != e.time.0 || te.record != record || !e.extras.same_bits(&self.tail_extras) {
            return (1, None);
        }
        let b = &mut self.batch;
        let Some(k) = b.sets.iter().position(|(p, _)| *p == record) else {
            return (1, None);
        };
        let set = &mut b.sets[k].1;
        let Some(j) = set.iter().position(|(i, n, _)| *i == inst && *n > 0) else {
            return (1, None);
        };
        let (_, count, rec) = &mut set[j];
        let mut taken = 1;
        for _ in 0..rows {
            // Same time, record and instance as the last: a result closes
            // only at its size bounds, and the event then goes the whole
            // way (`event_with` closes it).
            if self.results == 0 || b.records >= BATCH_RECORDS || b.bytes >= BATCH_BYTES {
                break;
            }
            let start = rec.len();
            let mut h = [0u8; 20];
            h[..8].copy_from_slice(&e.time.secs().to_be_bytes());
            h[8..16].copy_from_slice(&(e.time.subsec_nanos() as i64).to_be_bytes());
            h[16..].copy_from_slice(&FLAG_POINT.to_be_bytes());
            rec.extend_from_slice(&h);
            let np_at = rec.len();
            rec.extend_from_slice(&0u32.to_be_bytes());
            let mut np = put_fields(rec, te, cells.by_ref().take(w), &mut self.loss);
            if let Some(r) = e.raw_clock {
                put_num(rec, RAW_CLOCK_PMID, 3, r.to_be_bytes());
                np += 1;
            }
            rec.extend_from_slice(&self.tail);
            np += self.tail_params;
            rec[np_at..np_at + 4].copy_from_slice(&np.to_be_bytes());
            taken += 1;
            let len = rec.len() - start;
            if len + 8 > MAX_VLEN {
                self.loss
                    .drop_item("events", "event larger than a PCP value block (16 MB)");
                rec.truncate(start);
                continue;
            }
            *count += 1;
            b.records += 1;
            b.bytes += len;
            self.written += 1;
        }
        (taken, None)
    }

    /// A result the writer has written: its buffers serve later results.
    pub fn recycle(&mut self, r: EventResult) {
        let mut sets = r.sets;
        for (_, mut list) in sets.drain(..) {
            for (_, mut v) in list.drain(..) {
                if self.spare_payloads.len() < 64 {
                    v.clear();
                    self.spare_payloads.push(v);
                }
            }
            if self.spare_lists.len() < 64 {
                self.spare_lists.push(crate::model::reuse_vec(list));
            }
        }
        if self.spare_sets.len() < 4 {
            self.spare_sets.push(crate::model::reuse_vec(sets));
        }
    }

    /// Close the current result, if any.
    pub fn take(&mut self) -> Option<EventResult> {
        let next = Batch {
            sets: self.spare_sets.pop().unwrap_or_default(),
            ..Batch::default()
        };
        let b = std::mem::replace(&mut self.batch, next);
        let (_, _, mut time) = b.last?;
        self.results += 1;
        let mut meta = Vec::new();
        if let Some(first) = self.new_streams.take() {
            let t = self.indom_time.map_or(first, |last| first.max(last + 1));
            self.indom_time = Some(t);
            time = time.max(t);
            for mut l in std::mem::take(&mut self.new_labels) {
                l.time = Some(Timestamp(t));
                meta.push(Item::Labels(l));
            }
            meta.push(Item::Indom(IndomUpdate {
                time: Timestamp(t),
                id: STREAM_INDOM,
                kind: IndomKind::Full,
                instances: self.instances.clone(),
                removed: vec![],
                extras: Extras::default(),
            }));
        }
        Some(EventResult {
            meta,
            time: Timestamp(time),
            sets: b
                .sets
                .into_iter()
                .map(|(p, insts)| {
                    (
                        p,
                        insts
                            .into_iter()
                            .map(|(i, n, mut v)| {
                                v[..4].copy_from_slice(&n.to_be_bytes());
                                (i, v)
                            })
                            .collect(),
                    )
                })
                .collect(),
        })
    }
}

fn pmid_cluster(p: MetricId) -> u32 {
    (p >> 10) & 0xfff
}

fn pmid_item(p: MetricId) -> u32 {
    p & 0x3ff
}

/// One parameter: pmid, type and length word, payload padded to 4 (with a
/// NUL after strings).
/// A field value as the event encoder takes it: an event's value, or a
/// cell of a run.
trait FieldValue {
    /// As a parameter of the scalar PCP type `t`; false when it had to be
    /// cut to fit.
    fn put_scalar(&self, b: &mut Vec<u8>, pid: MetricId, t: i32) -> bool;
    /// As the JSON of a composite field of type `t`.
    fn json(&self, t: &FieldType) -> J;
}

impl FieldValue for &Value {
    fn put_scalar(&self, b: &mut Vec<u8>, pid: MetricId, t: i32) -> bool {
        put_scalar(b, pid, t, self)
    }
    fn json(&self, t: &FieldType) -> J {
        selfdesc::value_json(self, t)
    }
}

impl FieldValue for Cell<'_> {
    #[inline]
    fn put_scalar(&self, b: &mut Vec<u8>, pid: MetricId, t: i32) -> bool {
        put_cell(b, pid, t, *self)
    }
    fn json(&self, t: &FieldType) -> J {
        selfdesc::value_json(&self.to_value(), t)
    }
}

/// An event's field values (its own, or the next `width` cells of a run:
/// all are read, so the next event's come next) as the parameters of
/// type `te`; how many.
fn put_fields<V: FieldValue>(
    rec: &mut Vec<u8>,
    te: &TypeEnc,
    values: impl Iterator<Item = V>,
    loss: &mut LossReport,
) -> u32 {
    let mut np = 0u32;
    let mut bad = false;
    let cluster = pmid_cluster(te.record);
    for (i, v) in values.enumerate() {
        let pid = pmid(DOMAIN, cluster, i as u32 + 1);
        let ok = match te.slots.get(i) {
            Some(Slot::Scalar(t)) => v.put_scalar(rec, pid, *t),
            Some(Slot::Json) => {
                let s = v.json(&te.fields[i]).to_string();
                put_param(rec, pid, 6, s.as_bytes(), true);
                true
            }
            None => {
                bad = true;
                continue;
            }
        };
        if !ok {
            loss.degrade(
                &format!("{} events", te.label),
                "a value did not fit its field type; written cut to the type",
            );
        }
        np += 1;
    }
    if bad {
        loss.drop_item(
            &format!("{} event values", te.label),
            "more values than the type has fields",
        );
    }
    np
}

fn put_param(b: &mut Vec<u8>, pid: MetricId, t: i32, pay: &[u8], nul: bool) {
    let len = 4 + pay.len() + nul as usize;
    // The NUL and the padding to 4 bytes are zeros alike.
    let zeros = (4 - (pay.len() + nul as usize) % 4) % 4 + nul as usize;
    b.reserve(16 + pay.len());
    let mut head = [0u8; 8];
    head[..4].copy_from_slice(&pid.to_be_bytes());
    head[4..].copy_from_slice(&(((t as u32) << 24) | (len as u32 & 0x00ff_ffff)).to_be_bytes());
    b.extend_from_slice(&head);
    b.extend_from_slice(pay);
    // Zeros (up to 4 wanted) cut back to those wanted: a fixed copy, not a
    // call.
    let end = b.len() + zeros;
    b.extend_from_slice(&[0u8; 8]);
    b.truncate(end);
}

/// [`put_param`] for a number of 4 or 8 bytes (no padding): one
/// fixed-size copy, inline (most parameters of every event).
#[inline]
fn put_num<const N: usize>(b: &mut Vec<u8>, pid: MetricId, t: i32, pay: [u8; N]) {
    let mut w = [0u8; 16];
    w[..4].copy_from_slice(&pid.to_be_bytes());
    w[4..8].copy_from_slice(&(((t as u32) << 24) | (4 + N as u32)).to_be_bytes());
    w[8..8 + N].copy_from_slice(&pay);
    b.extend_from_slice(&w[..8 + N]);
}

fn int_of(c: Cell) -> Option<i128> {
    match c {
        Cell::I64(x) | Cell::Enum(x) => Some(x as i128),
        Cell::U64(x) => Some(x as i128),
        Cell::F32(x) => Some(x as i128),
        Cell::F64(x) => Some(x as i128),
        Cell::Str(_) | Cell::Bytes(_) => None,
    }
}

fn f64_of(c: Cell) -> Option<f64> {
    match c {
        Cell::I64(x) | Cell::Enum(x) => Some(x as f64),
        Cell::U64(x) => Some(x as f64),
        Cell::F32(x) => Some(x as f64),
        Cell::F64(x) => Some(x),
        Cell::Str(_) | Cell::Bytes(_) => None,
    }
}

/// A scalar field value as a parameter of PCP type `t`; false when it had
/// to be cut to fit.
fn put_scalar(b: &mut Vec<u8>, pid: MetricId, t: i32, v: &Value) -> bool {
    match v.as_cell() {
        Some(c) => put_cell(b, pid, t, c),
        // A nested value in a scalar's place: zero, or its text.
        None => {
            match t {
                0..=5 => {
                    put_cell(b, pid, t, Cell::I64(0));
                }
                6 | 7 => put_param(b, pid, t, v.text().as_bytes(), t == 6),
                _ => {}
            }
            false
        }
    }
}

/// [`put_scalar`] of a cell.
#[inline]
fn put_cell(b: &mut Vec<u8>, pid: MetricId, t: i32, c: Cell) -> bool {
    // The kinds KPI events have (64-bit numbers, text) as they are; the
    // others through the checks below.
    match (t, c) {
        (0, Cell::I64(x)) => {
            // A 32-bit int field (KPI's pids) from a 64-bit number.
            put_num(b, pid, 0, (x as u32).to_be_bytes());
            return i32::try_from(x).is_ok();
        }
        (2, Cell::I64(x)) => {
            put_num(b, pid, 2, x.to_be_bytes());
            return true;
        }
        (3, Cell::U64(x)) => {
            put_num(b, pid, 3, x.to_be_bytes());
            return true;
        }
        (6, Cell::Str(s)) => {
            put_param(b, pid, 6, s, true);
            return true;
        }
        _ => {}
    }
    match t {
        0..=3 => {
            let x = int_of(c);
            let n = x.unwrap_or(0);
            let fits = match t {
                0 => i32::try_from(n).is_ok(),
                1 => u32::try_from(n).is_ok(),
                2 => i64::try_from(n).is_ok(),
                _ => u64::try_from(n).is_ok(),
            };
            match t {
                0 | 1 => put_num(b, pid, t, (n as u32).to_be_bytes()),
                _ => put_num(b, pid, t, (n as u64).to_be_bytes()),
            }
            fits && x.is_some() && !matches!(c, Cell::F32(_) | Cell::F64(_))
        }
        4 => {
            let x = f64_of(c);
            put_num(b, pid, 4, (x.unwrap_or(0.0) as f32).to_be_bytes());
            x.is_some() && !matches!(c, Cell::F64(_))
        }
        5 => {
            let x = f64_of(c);
            put_num(b, pid, 5, x.unwrap_or(0.0).to_be_bytes());
            x.is_some()
        }
        6 | 7 => match c {
            Cell::Str(s) | Cell::Bytes(s) => {
                put_param(b, pid, t, s, t == 6);
                true
            }
            _ => {
                let s = c.to_value().text();
                put_param(b, pid, t, s.as_bytes(), t == 6);
                false
            }
        },
        _ => false,
    }
}

fn put_extra(b: &mut Vec<u8>, id: MetricId, v: &ExtraValue) {
    match v {
        ExtraValue::U64(x) => put_num(b, id, 3, x.to_be_bytes()),
        ExtraValue::I64(x) => put_num(b, id, 2, x.to_be_bytes()),
        ExtraValue::F64(x) => put_num(b, id, 5, x.to_be_bytes()),
        ExtraValue::Bool(x) => put_num(b, id, 1, (*x as u32).to_be_bytes()),
        ExtraValue::Str(s) => put_param(b, id, 6, s.as_bytes(), true),
        ExtraValue::Bytes(x) => put_param(b, id, 7, x, false),
        ExtraValue::List(_) => put_param(
            b,
            id,
            6,
            selfdesc::extra_json(v).to_string().as_bytes(),
            true,
        ),
    }
}

// ------------------------------------------------------------ reading

enum Role {
    Field(MetricId, usize),
    RawClock,
    Extra(String, XKind),
}

struct TypeDec {
    id: EventTypeId,
    fields: Vec<FieldType>,
}

/// Reader side: recognises the metrics [`EventEncoder`] wrote (by their
/// self-description) and turns their records back into events.
pub struct EventDecoder {
    types: HashMap<MetricId, TypeDec>,
    /// Event type items, by the record metric they replace.
    defs: HashMap<MetricId, EventType>,
    roles: HashMap<MetricId, Role>,
    streams: HashMap<InstId, (Option<u32>, Option<String>)>,
    header: Option<J>,
}

fn tagged<'a>(text: &'a str, tag: &str) -> Option<&'a str> {
    text.rfind(tag).map(|i| &text[i + tag.len()..])
}

impl EventDecoder {
    /// True for the help text of the stream's instance domain, which holds
    /// the source description of an archive polytrace wrote event records
    /// into: `from_meta` finds nothing in metadata without one.
    pub fn marks_events(t: &TextRec) -> bool {
        t.ttype & PM_TEXT_HELP != 0 && t.ttype & PM_TEXT_INDOM != 0 && t.ident == STREAM_INDOM
    }

    /// The decoder of an archive's metadata, if polytrace wrote event
    /// records into it.
    pub fn from_meta(recs: &[(u64, MetaRec)]) -> Option<EventDecoder> {
        let mut descs: HashMap<MetricId, i32> = HashMap::new();
        let mut helps: HashMap<MetricId, &str> = HashMap::new();
        let mut header = None;
        for (_, r) in recs {
            match r {
                MetaRec::Desc(d) if pmid_domain(d.pmid) == DOMAIN => {
                    descs.insert(d.pmid, d.vtype);
                }
                MetaRec::Text(t) if t.ttype & PM_TEXT_HELP != 0 => {
                    if t.ttype & PM_TEXT_INDOM != 0 {
                        if t.ident == STREAM_INDOM {
                            header = tagged(&t.text, HEADER_TAG)
                                .and_then(|s| serde_json::from_str::<J>(s).ok());
                        }
                    } else if pmid_domain(t.ident) == DOMAIN {
                        helps.insert(t.ident, &t.text);
                    }
                }
                _ => {}
            }
        }
        header.as_ref()?;
        let mut dec = EventDecoder {
            types: HashMap::new(),
            defs: HashMap::new(),
            roles: HashMap::new(),
            streams: HashMap::new(),
            header,
        };
        let mut ids: HashSet<EventTypeId> = HashSet::new();
        let mut next_id = 0;
        let mut records: Vec<MetricId> = descs.keys().copied().collect();
        records.sort_unstable();
        for p in records {
            let help = helps.get(&p).copied().unwrap_or("");
            if pmid_cluster(p) == SHARED_CLUSTER {
                let Some(j) =
                    tagged(help, EXTRA_TAG).and_then(|s| serde_json::from_str::<J>(s).ok())
                else {
                    continue;
                };
                if j.get("raw_clock").is_some() {
                    dec.roles.insert(p, Role::RawClock);
                } else if let (Some(k), Some(kind)) = (
                    j.get("key").and_then(J::as_str),
                    j.get("kind").and_then(J::as_str).and_then(XKind::parse),
                ) {
                    dec.roles.insert(p, Role::Extra(k.to_string(), kind));
                }
                continue;
            }
            if pmid_item(p) != 0 || !matches!(descs[&p], 9 | 10) {
                continue;
            }
            let Some(mut t) = tagged(help, TYPE_TAG)
                .and_then(|s| serde_json::from_str::<J>(s).ok())
                .and_then(|j| selfdesc::event_type_from(&j))
            else {
                continue;
            };
            // Ids are model-local: a re-defined id gets a fresh one.
            if !ids.insert(t.id) {
                while ids.contains(&next_id) {
                    next_id += 1;
                }
                t.id = next_id;
                ids.insert(t.id);
            }
            let fields: Vec<FieldType> = t.fields.iter().map(|f| f.ty.clone()).collect();
            for i in 0..fields.len().min(MAX_FIELDS) {
                dec.roles.insert(
                    pmid(DOMAIN, pmid_cluster(p), i as u32 + 1),
                    Role::Field(p, i),
                );
            }
            dec.types.insert(p, TypeDec { id: t.id, fields });
            dec.defs.insert(p, t);
        }
        for (_, r) in recs {
            if let MetaRec::Label(l) = r {
                if l.ltype == PM_LABEL_INSTANCES && l.ident == STREAM_INDOM {
                    for s in &l.sets {
                        let j: J = serde_json::from_slice(&s.json).unwrap_or(J::Null);
                        let cpu = j
                            .get("cpu")
                            .and_then(J::as_u64)
                            .and_then(|c| u32::try_from(c).ok());
                        let stream = j.get("stream").and_then(J::as_str).map(str::to_string);
                        dec.streams.insert(s.inst as InstId, (cpu, stream));
                    }
                }
            }
        }
        Some(dec)
    }

    /// Put the saved source description onto the archive's header.
    pub fn apply_header(&self, h: &mut Header) {
        if let Some(j) = &self.header {
            selfdesc::apply_header(j, h);
        }
    }

    /// The items a metadata record becomes: the event type for a record
    /// metric, nothing for the other metadata of the encoding, `None` for
    /// records this decoder does not own.
    pub fn items_of(&self, r: &MetaRec) -> Option<Vec<Item>> {
        match r {
            MetaRec::Desc(d) => {
                if let Some(t) = self.defs.get(&d.pmid) {
                    return Some(vec![Item::EventType(Arc::new(t.clone()))]);
                }
                self.roles.contains_key(&d.pmid).then(Vec::new)
            }
            MetaRec::Text(t) => {
                let own = if t.ttype & PM_TEXT_INDOM != 0 {
                    t.ident == STREAM_INDOM
                } else {
                    self.owns(t.ident)
                };
                own.then(Vec::new)
            }
            MetaRec::InDom(i) => (i.indom == STREAM_INDOM).then(Vec::new),
            MetaRec::Label(l) => (l.ident == STREAM_INDOM
                && matches!(l.ltype, PM_LABEL_INSTANCES | PM_LABEL_INDOM))
            .then(Vec::new),
        }
    }

    fn owns(&self, p: MetricId) -> bool {
        self.defs.contains_key(&p) || self.roles.contains_key(&p)
    }

    /// True for a record metric this decoder turns into events.
    pub fn is_record(&self, p: MetricId) -> bool {
        self.types.contains_key(&p)
    }

    /// Decode one event array (the payload of a HIGHRES_EVENT or EVENT
    /// value block) of record metric `p` at instance `inst`.
    pub fn decode(
        &self,
        p: MetricId,
        vtype: i32,
        inst: InstId,
        pay: &[u8],
        out: &mut Vec<Event>,
    ) -> Result<(), String> {
        let Some(td) = self.types.get(&p) else {
            return Ok(());
        };
        let highres = vtype == 10;
        let (cpu, stream) = self.streams.get(&inst).cloned().unwrap_or((None, None));
        let short = || "event array shorter than its record count".to_string();
        let n = bei32(pay, 0).ok_or_else(short)?;
        if n < 0 {
            return Err(format!("negative event record count {n}"));
        }
        let mut o = 4;
        for k in 0..n {
            let time = if highres {
                let s = be64(pay, o).ok_or_else(short)? as i64;
                let ns = be64(pay, o + 8).ok_or_else(short)? as i64;
                o += 16;
                Timestamp(s.saturating_mul(1_000_000_000).saturating_add(ns))
            } else {
                let s = bei32(pay, o).ok_or_else(short)? as i64;
                let us = bei32(pay, o + 4).ok_or_else(short)? as i64;
                o += 8;
                Timestamp(s.saturating_mul(1_000_000_000).saturating_add(us * 1000))
            };
            let flags = be32(pay, o).ok_or_else(short)?;
            let np = bei32(pay, o + 4).ok_or_else(short)?;
            o += 8;
            if flags & EVENT_FLAG_MISSED != 0 {
                continue;
            }
            if np < 0 {
                return Err(format!("record {k}: negative parameter count {np}"));
            }
            let mut fields: Vec<Option<Value>> = vec![None; td.fields.len()];
            let mut raw_clock = None;
            let mut extras = Extras::default();
            for _ in 0..np {
                let pid = be32(pay, o).ok_or_else(short)?;
                let w = be32(pay, o + 4).ok_or_else(short)?;
                let t = (w >> 24) as i32;
                let len = (w & 0x00ff_ffff) as usize;
                if len < 4 {
                    return Err(format!("record {k}: parameter length {len}"));
                }
                let body = pay
                    .get(o + 8..o + 4 + len)
                    .ok_or_else(|| format!("record {k}: parameter past the array's end"))?;
                o += 4 + len.div_ceil(4) * 4;
                let v = decode_typed(t, body);
                match self.roles.get(&pid) {
                    Some(Role::Field(rp, i)) if *rp == p => {
                        // A value that does not read as its type stays as stored.
                        fields[*i] = Some(natural(v.clone(), &td.fields[*i]).unwrap_or(v));
                    }
                    Some(Role::RawClock) => {
                        if let Value::U64(x) = v {
                            raw_clock = Some(x);
                        }
                    }
                    Some(Role::Extra(key, kind)) => {
                        if let Some(x) = extra_of(v, *kind) {
                            extras.set(key.clone(), x);
                        }
                    }
                    _ => {}
                }
            }
            out.push(Event {
                time,
                raw_clock,
                type_id: td.id,
                cpu,
                stream: stream.clone(),
                fields: fields.into_iter().map_while(|v| v).collect(),
                extras,
            });
        }
        Ok(())
    }
}

fn int_of_value(v: &Value) -> Option<i128> {
    v.as_cell().and_then(int_of)
}

/// A decoded parameter as the value variant its field type has in the
/// model (integers by signedness, enums, composites from their JSON).
fn natural(v: Value, t: &FieldType) -> Option<Value> {
    Some(match (t, v) {
        (FieldType::Int(_), v) => Value::I64(int_of_value(&v)? as i64),
        (FieldType::Uint(_), v) => Value::U64(int_of_value(&v)? as u64),
        (FieldType::Enum { .. }, v) => Value::Enum(int_of_value(&v)? as i64),
        (FieldType::Float(4), Value::F32(x)) => Value::F32(x),
        (FieldType::Float(_), Value::F64(x)) => Value::F64(x),
        (FieldType::String | FieldType::Bytes, v @ (Value::Str(_) | Value::Bytes(_))) => v,
        (_, Value::Str(s)) => {
            let j: J = serde_json::from_str(&s).ok()?;
            selfdesc::value_from(&j, t)?
        }
        _ => return None,
    })
}

fn extra_of(v: Value, kind: XKind) -> Option<ExtraValue> {
    Some(match (kind, v) {
        (XKind::U64, Value::U64(x)) => ExtraValue::U64(x),
        (XKind::I64, Value::I64(x)) => ExtraValue::I64(x),
        (XKind::F64, Value::F64(x)) => ExtraValue::F64(x),
        (XKind::Bool, Value::U64(x)) => ExtraValue::Bool(x != 0),
        (XKind::Str, Value::Str(s)) => ExtraValue::Str(s),
        (XKind::Str, Value::Bytes(b)) => ExtraValue::Str(String::from_utf8_lossy(&b).into()),
        (XKind::Bytes, Value::Bytes(b)) => ExtraValue::Bytes(b),
        (XKind::Bytes, Value::Str(s)) => ExtraValue::Bytes(s.into_bytes()),
        (XKind::List, Value::Str(s)) => selfdesc::extra_from(&serde_json::from_str(&s).ok()?)?,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoder_for(t: &EventType) -> EventDecoder {
        let p = pmid(DOMAIN, 0, 0);
        let mut roles = HashMap::new();
        for i in 0..t.fields.len() {
            roles.insert(pmid(DOMAIN, 0, i as u32 + 1), Role::Field(p, i));
        }
        roles.insert(RAW_CLOCK_PMID, Role::RawClock);
        roles.insert(
            pmid(DOMAIN, SHARED_CLUSTER, 1),
            Role::Extra("kpi.group".into(), XKind::U64),
        );
        roles.insert(
            pmid(DOMAIN, SHARED_CLUSTER, 2),
            Role::Extra("kpi.kind".into(), XKind::Str),
        );
        let mut types = HashMap::new();
        types.insert(
            p,
            TypeDec {
                id: t.id,
                fields: t.fields.iter().map(|f| f.ty.clone()).collect(),
            },
        );
        let mut streams = HashMap::new();
        streams.insert(0, (Some(3), Some("cpu/3".to_string())));
        EventDecoder {
            types,
            defs: HashMap::new(),
            roles,
            streams,
            header: None,
        }
    }

    /// The events of `results`, decoded in order.
    fn decode_all<'a>(
        dec: &EventDecoder,
        results: impl IntoIterator<Item = &'a EventResult>,
    ) -> Vec<Event> {
        let mut got = Vec::new();
        for r in results {
            for (p, insts) in &r.sets {
                for (inst, pay) in insts {
                    dec.decode(*p, 10, *inst, pay, &mut got).unwrap();
                }
            }
        }
        got
    }

    /// A number into a 32-bit int parameter keeps its low 32 bits and says
    /// whether it fit, whatever the cell's kind (the 64-bit signed kind,
    /// KPI's pids, goes its own short way).
    #[test]
    fn numbers_into_32_bit_ints_keep_their_low_bits_and_say_if_they_fit() {
        let pid = pmid(DOMAIN, 3, 1);
        for (c, want, fits) in [
            (Cell::I64(7), 7u32, true),
            (Cell::I64(-2), (-2i32) as u32, true),
            (Cell::I64(i32::MAX as i64 + 1), 0x8000_0000, false),
            (Cell::I64(i64::MIN + 5), 5, false),
            (Cell::U64(9), 9, true),
            (Cell::U64(1 << 32), 0, false),
            (Cell::Enum(3), 3, true),
            (Cell::F64(2.0), 2, false),
        ] {
            let mut b = Vec::new();
            assert_eq!(put_cell(&mut b, pid, 0, c), fits, "{c:?}");
            let mut w = pid.to_be_bytes().to_vec();
            w.extend_from_slice(&(8u32).to_be_bytes());
            w.extend_from_slice(&want.to_be_bytes());
            assert_eq!(b, w, "{c:?}");
        }
    }

    /// An event too large for a value block is dropped and said so; the
    /// events around it are written as if it had not been there, in their
    /// arrays (it was encoded in place into its array's payload).
    #[test]
    fn an_event_too_large_is_dropped_and_the_others_kept() {
        let t = EventType::new(5, "core", "x", vec![Field::new("s", FieldType::String)]);
        // The large one is of another type: its array would hold it alone.
        let big = EventType::new(6, "core", "y", vec![Field::new("s", FieldType::String)]);
        let ev = |ns: i64, s: String| Event {
            time: Timestamp(1_795_319_035_000_000_000 + ns),
            raw_clock: None,
            type_id: if s.len() > 1 { 6 } else { 5 },
            cpu: None,
            stream: None,
            fields: vec![Value::Str(s)],
            extras: Extras::default(),
        };
        let huge = "x".repeat(MAX_VLEN);
        let mut meta = Vec::new();
        // Alone in its result (its array made for it goes again), and
        // after an event of the same array.
        for before in [false, true] {
            let mut enc = EventEncoder::new(&Header::new(FormatId::Ltt, "2.2"));
            enc.define(&t, &mut meta);
            enc.define(&big, &mut meta);
            let mut want = Vec::new();
            let mut results = Vec::new();
            if before {
                results.extend(enc.event(&ev(0, "a".into()), &mut meta));
                want.push(ev(0, "a".into()));
            }
            results.extend(enc.event(&ev(1, huge.clone()), &mut meta));
            assert!(enc.loss.has_loss(), "the large event was not reported");
            results.extend(enc.event(&ev(1, "b".into()), &mut meta));
            want.push(ev(1, "b".into()));
            results.extend(enc.take());
            let dec = decoder_for(&t);
            let mut got = Vec::new();
            for r in &results {
                for (p, insts) in &r.sets {
                    for (inst, pay) in insts {
                        let n = got.len();
                        dec.decode(*p, 10, *inst, pay, &mut got).unwrap();
                        assert!(got.len() > n, "an empty event array was written");
                    }
                }
            }
            // (The test decoder names every stream cpu/3: compare the rest.)
            let key = |e: &Event| (e.time, e.fields.clone());
            assert_eq!(
                got.iter().map(key).collect::<Vec<_>>(),
                want.iter().map(key).collect::<Vec<_>>(),
                "before: {before}"
            );
        }
    }

    /// Events carrying the same extras as the one before get a copy of its
    /// encoded extras; any difference (a value, a key more or less, none)
    /// encodes them anew.
    #[test]
    fn each_event_keeps_its_own_extras() {
        let t = EventType::new(5, "core", "x", vec![Field::new("a", FieldType::Uint(4))]);
        let x = |group: Option<u64>, kind: Option<&str>| {
            let mut e = Extras::default();
            if let Some(g) = group {
                e.set("kpi.group", ExtraValue::U64(g));
            }
            if let Some(k) = kind {
                e.set("kpi.kind", ExtraValue::Str(k.into()));
            }
            e
        };
        let seq = [
            x(Some(9), None),
            x(Some(9), None),
            x(Some(10), None),
            x(Some(10), Some("NEW")),
            x(Some(10), Some("NEW")),
            x(Some(10), Some("STP")),
            x(None, None),
            x(Some(9), None),
        ];
        let mut enc = EventEncoder::new(&Header::new(FormatId::Ltt, "2.2"));
        let mut meta = Vec::new();
        enc.define(&t, &mut meta);
        let mut results = Vec::new();
        for (i, extras) in seq.iter().enumerate() {
            let e = Event {
                time: Timestamp(1_795_319_035_000_000_000 + i as i64),
                raw_clock: None,
                type_id: 5,
                cpu: None,
                stream: None,
                fields: vec![Value::U64(i as u64)],
                extras: extras.clone(),
            };
            results.extend(enc.event(&e, &mut meta));
        }
        results.extend(enc.take());
        let got = decode_all(&decoder_for(&t), &results);
        let got: Vec<_> = got.iter().map(|e| e.extras.clone()).collect();
        assert_eq!(got, seq.to_vec());
    }

    #[test]
    fn events_round_trip_and_damage_is_an_error() {
        let t = EventType::new(
            5,
            "core",
            "x",
            vec![
                Field::new("a", FieldType::Uint(1)),
                Field::new("b", FieldType::Int(8)),
                Field::new("s", FieldType::String),
                Field::new(
                    "l",
                    FieldType::Sequence {
                        len: Box::new(FieldType::Uint(1)),
                        elem: Box::new(FieldType::Float(8)),
                    },
                ),
            ],
        );
        let mut extras = Extras::default();
        extras.set("kpi.group", ExtraValue::U64(9));
        let ev = |ns: i64| Event {
            time: Timestamp(1_795_319_035_000_000_000 + ns),
            raw_clock: Some(u64::MAX - 1),
            type_id: 5,
            cpu: Some(3),
            stream: Some("cpu/3".into()),
            fields: vec![
                Value::U64(255),
                Value::I64(i64::MIN),
                Value::Str("é".into()),
                Value::List(vec![Value::F64(0.1), Value::F64(-2.5e300)]),
            ],
            extras: extras.clone(),
        };
        let mut enc = EventEncoder::new(&Header::new(FormatId::Ltt, "2.2"));
        let mut meta = Vec::new();
        enc.define(&t, &mut meta);
        // The first result holds the first event alone.
        assert!(enc.event(&ev(0), &mut meta).is_none());
        let first = enc.event(&ev(1), &mut meta).expect("first result closed");
        assert!(enc.event(&ev(1), &mut meta).is_none());
        let second = enc.take().unwrap();
        assert!(!enc.loss.has_loss(), "{}", enc.loss);
        let dec = decoder_for(&t);
        let got = decode_all(&dec, [&first, &second]);
        assert_eq!(got, vec![ev(0), ev(1), ev(1)]);
        // A cut array is a positioned error upstream, never a panic.
        let pay = &second.sets[0].1[0].1;
        for cut in [3, 20, 40, pay.len() - 1] {
            let mut out = Vec::new();
            assert!(dec
                .decode(second.sets[0].0, 10, 0, &pay[..cut], &mut out)
                .is_err());
        }
    }
}
