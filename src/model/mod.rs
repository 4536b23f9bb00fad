//! The shared trace model: a [`Header`] followed by a stream of [`Item`]s.
//!
//! Every reader produces this stream and every writer consumes it, so any
//! format converts into any other. Definitions (event types, metric
//! descriptors, instance domains, help, labels) always come before the first
//! data item that uses them, and may be re-issued later (an indom's
//! membership changes, a facility gets a second version). See `docs/model.md`
//! for the reasoning and the cross-format mapping table.

mod cells;
pub mod codec;
mod extras;
mod hash;
mod loss;
mod render;
pub mod select;
pub mod time;
mod types;
pub mod wire;

pub use cells::{Cell, CellIter, Cells};
pub(crate) use extras::key_order;
pub use extras::{key_eq, keys, same_address, ExtraKey, ExtraValue, Extras};
pub use hash::{IntHasher, IntMap, IntSet};
pub use loss::LossReport;
pub use select::{CpuList, Glob, ItemFilter, Level, MessageKeys, MessageSelect, Selection};
pub use time::{Bounds, TimeBase, TimeSpec, TimeWindow, Timestamp, WindowClock};
pub use types::{Field, FieldType};

use std::sync::Arc;

/// Which format a stream came from (also the CLI's format names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FormatId {
    Kpi,
    Dlt,
    Mmv,
    Pcp,
    Ltt,
    Timeline,
    ChromeJson,
    Csv,
    Ctf,
    Parquet,
    Perfetto,
}

impl FormatId {
    pub const ALL: [FormatId; 11] = [
        FormatId::Kpi,
        FormatId::Dlt,
        FormatId::Mmv,
        FormatId::Pcp,
        FormatId::Ltt,
        FormatId::Timeline,
        FormatId::ChromeJson,
        FormatId::Csv,
        FormatId::Ctf,
        FormatId::Parquet,
        FormatId::Perfetto,
    ];
    pub fn name(self) -> &'static str {
        match self {
            FormatId::Kpi => "kpi",
            FormatId::Dlt => "dlt",
            FormatId::Mmv => "mmv",
            FormatId::Pcp => "pcp",
            FormatId::Ltt => "ltt",
            FormatId::Timeline => "timeline",
            FormatId::ChromeJson => "chrome-json",
            FormatId::Csv => "csv",
            FormatId::Ctf => "ctf",
            FormatId::Parquet => "parquet",
            FormatId::Perfetto => "perfetto",
        }
    }
    pub fn from_name(s: &str) -> Option<FormatId> {
        FormatId::ALL.iter().copied().find(|f| f.name() == s)
    }
}

impl std::fmt::Display for FormatId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Stream header: what the source is and how its time is to be read.
#[derive(Debug, Clone)]
pub struct Header {
    pub source: FormatId,
    /// Format version as the source states it ("2", "3", "A2", "M3", …).
    pub version: String,
    /// Host name of the traced system, where known.
    pub host: Option<String>,
    /// Time zone of the source (PCP label), where known.
    pub timezone: Option<String>,
    /// Free-form system description (LTT system.xml attributes, uname, …).
    pub system: Vec<(String, String)>,
    pub time_base: TimeBase,
    /// Start time of the trace, if the source states one.
    pub start: Option<Timestamp>,
    pub extras: Extras,
}

impl Header {
    pub fn new(source: FormatId, version: impl Into<String>) -> Header {
        Header {
            source,
            version: version.into(),
            host: None,
            timezone: None,
            system: Vec::new(),
            time_base: TimeBase::Absolute,
            start: None,
            extras: Extras::default(),
        }
    }
}

/// One element of the stream.
#[derive(Debug, Clone)]
pub enum Item {
    // --- definitions ---
    EventType(Arc<EventType>),
    Metric(Arc<MetricDesc>),
    Indom(IndomUpdate),
    Help(Help),
    Labels(LabelSet),
    // --- data ---
    Event(Event),
    /// Events of one type that share all but their field values (the
    /// datasets of one KPI message): given only to a consumer that asked
    /// ([`TraceReader::event_runs`]). Boxed: an item is moved about whole,
    /// and a run in place would make every item a third larger.
    EventRun(Box<EventRun>),
    Sample(Sample),
    Mark(Mark),
    Annotation(Annotation),
}

impl Item {
    /// Time of a data item (definitions carry no time except indoms/labels).
    pub fn time(&self) -> Option<Timestamp> {
        match self {
            Item::Event(e) => Some(e.time),
            Item::EventRun(r) => Some(r.event.time),
            Item::Sample(s) => Some(s.time),
            Item::Mark(m) => Some(m.time),
            Item::Annotation(a) => Some(a.time),
            Item::Indom(i) => Some(i.time),
            Item::Labels(l) => l.time,
            _ => None,
        }
    }
    /// The event, or what a run's events share (its first event's time,
    /// type, stream and extras; no field values).
    #[inline]
    pub fn event_head(&self) -> Option<&Event> {
        match self {
            Item::Event(e) => Some(e),
            Item::EventRun(r) => Some(&r.event),
            _ => None,
        }
    }
    pub fn is_data(&self) -> bool {
        matches!(
            self,
            Item::Event(_)
                | Item::EventRun(_)
                | Item::Sample(_)
                | Item::Mark(_)
                | Item::Annotation(_)
        )
    }
}

// ---------------------------------------------------------------- events

/// Identifier of an event type within one stream (model-local).
pub type EventTypeId = u32;

/// An event type: LTT facility event, timeline message, KPI record kind, …
#[derive(Debug, Clone, PartialEq)]
pub struct EventType {
    pub id: EventTypeId,
    pub name: String,
    /// Facility (LTT), category (timeline), "kpi" for KPI.
    pub category: String,
    pub description: Option<String>,
    /// Timeline priority name or level, where the source has one.
    pub priority: Option<String>,
    /// Format string with `$name` placeholders (timeline), if any.
    pub format: Option<String>,
    pub fields: Vec<Field>,
    /// The source format's own bookkeeping (LTT block start/end, heartbeats,
    /// facility loads, …): shown by that format's listings, never converted
    /// into another format's data (a target regenerates its own).
    pub framing: bool,
    pub extras: Extras,
}

impl EventType {
    pub fn new(id: EventTypeId, category: &str, name: &str, fields: Vec<Field>) -> EventType {
        EventType {
            id,
            name: name.to_string(),
            category: category.to_string(),
            description: None,
            priority: None,
            format: None,
            fields,
            framing: false,
            extras: Extras::default(),
        }
    }
}

/// One event occurrence.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Event {
    pub time: Timestamp,
    /// Raw clock value the time came from (TSC cycles, LTT counter, DLT ticks).
    pub raw_clock: Option<u64>,
    pub type_id: EventTypeId,
    pub cpu: Option<u32>,
    /// Tracefile / stream the event came from (LTT "cpu/0", "control/processes").
    pub stream: Option<String>,
    /// One value per field of the type, in order.
    pub fields: Vec<Value>,
    pub extras: Extras,
}

/// Several events in one item: the same time, raw clock, type, CPU, stream
/// and extras (those of `event`, whose `fields` stay empty), each with its
/// own `width` field values, one event's after the other in `cells`. The
/// events of one KPI message are such a run: carried as one item, they
/// cost one item's way through the stages, the hand-over and the writer's
/// bookkeeping instead of one each, and their values are bytes appended
/// and copied whole rather than values built one by one (docs/model.md,
/// "Runs of events"). A run stands for its events in order, no more:
/// [`EventRun::each_item`] gives them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EventRun {
    pub event: Event,
    /// Field values per event (at least 1).
    pub width: u32,
    pub cells: Cells,
}

impl From<EventRun> for Item {
    fn from(r: EventRun) -> Item {
        Item::EventRun(Box::new(r))
    }
}

impl EventRun {
    /// Events in the run.
    pub fn len(&self) -> usize {
        self.cells.len() / (self.width.max(1) as usize)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Each event of the run as an [`Item::Event`], in order: for a
    /// consumer that takes runs as their events (one event built per run,
    /// its buffers reused from event to event).
    pub fn each_item<E>(
        &self,
        mut f: impl FnMut(&Item) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let w = self.width.max(1) as usize;
        let mut item = Item::Event(Event {
            fields: Vec::with_capacity(w),
            ..self.event.clone_head()
        });
        let mut cells = self.cells.iter();
        for _ in 0..self.len() {
            if let Item::Event(e) = &mut item {
                e.fields.clear();
                e.fields.extend(cells.by_ref().take(w).map(Cell::to_value));
            }
            f(&item)?;
        }
        Ok(())
    }
}

/// Items an item stands for: a run of events counts its events (at least
/// one), any other item one. What waits for ordering is counted in these,
/// so that runs ([`EventRun`]) wait no longer than their events would.
pub fn events_in(item: &Item) -> usize {
    match item {
        Item::EventRun(r) => r.len().max(1),
        _ => 1,
    }
}

/// The next item of `reader`, a run's events one by one (through
/// `pending`): for a consumer that takes items one at a time and has no
/// use for runs.
pub fn next_plain(
    reader: &mut dyn TraceReader,
    pending: &mut std::collections::VecDeque<Item>,
) -> crate::Result<Option<Item>> {
    loop {
        if let Some(it) = pending.pop_front() {
            return Ok(Some(it));
        }
        match reader.next_item()? {
            Some(Item::EventRun(r)) => {
                let _ = r.each_item(|it| {
                    pending.push_back(it.clone());
                    Ok::<(), ()>(())
                });
            }
            other => return Ok(other),
        }
    }
}

impl Event {
    /// The event without its field values.
    pub fn clone_head(&self) -> Event {
        Event {
            time: self.time,
            raw_clock: self.raw_clock,
            type_id: self.type_id,
            cpu: self.cpu,
            stream: self.stream.clone(),
            fields: Vec::new(),
            extras: self.extras.clone(),
        }
    }
}

/// A field or metric value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    I64(i64),
    U64(u64),
    F32(f32),
    F64(f64),
    Str(String),
    /// Byte strings that are not UTF-8, raw payloads, PCP aggregates.
    Bytes(Vec<u8>),
    /// Enum value (labels live in the type).
    Enum(i64),
    /// Fixed array or sequence elements.
    List(Vec<Value>),
    /// Struct members in declaration order.
    Struct(Vec<Value>),
    /// Union: which member was chosen (if known) and its value; LTT unions
    /// carry every member at the same offset, so all are kept.
    Union(Vec<Value>),
    /// PCP PM_TYPE_EVENT / HIGHRES_EVENT value: a list of event records.
    Events(Vec<EventRecord>),
}

impl Value {
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::I64(v) | Value::Enum(v) => Some(v as f64),
            Value::U64(v) => Some(v as f64),
            Value::F32(v) => Some(v as f64),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }
    pub fn as_i128(&self) -> Option<i128> {
        match *self {
            Value::I64(v) | Value::Enum(v) => Some(v as i128),
            Value::U64(v) => Some(v as i128),
            _ => None,
        }
    }
}

/// One record of a PCP event array.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    pub time: Timestamp,
    pub flags: u32,
    pub params: Vec<EventParam>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EventParam {
    pub metric: MetricId,
    pub value: Value,
}

// ---------------------------------------------------------------- metrics

/// PCP pmID (domain:cluster:item packed as PCP packs it) or a model-assigned id.
pub type MetricId = u32;
/// PCP instance domain id (domain:serial packed) or a model-assigned id.
pub type IndomId = u32;
/// Instance identifier; PM_IN_NULL (-1) for singular metrics.
pub type InstId = i32;
pub const PM_IN_NULL: InstId = -1;

/// Pack a PCP pmID (domain 9 bits, cluster 12, item 10).
pub const fn pmid(domain: u32, cluster: u32, item: u32) -> MetricId {
    (domain & 0x1ff) << 22 | (cluster & 0xfff) << 10 | (item & 0x3ff)
}

/// Pack a PCP instance domain id (domain 9 bits, serial 22).
pub const fn indom_id(domain: u32, serial: u32) -> IndomId {
    (domain & 0x1ff) << 22 | (serial & 0x3fffff)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueType {
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
    String,
    Aggregate,
    Event,
    HighresEvent,
    /// PCP PM_TYPE_NOSUPPORT and friends, kept by number for fidelity.
    Other(i32),
}

impl ValueType {
    /// The PCP PM_TYPE_* number.
    pub fn pcp_code(self) -> i32 {
        match self {
            ValueType::I32 => 0,
            ValueType::U32 => 1,
            ValueType::I64 => 2,
            ValueType::U64 => 3,
            ValueType::F32 => 4,
            ValueType::F64 => 5,
            ValueType::String => 6,
            ValueType::Aggregate => 7,
            ValueType::Event => 9,
            ValueType::HighresEvent => 10,
            ValueType::Other(n) => n,
        }
    }
    pub fn from_pcp_code(n: i32) -> ValueType {
        match n {
            0 => ValueType::I32,
            1 => ValueType::U32,
            2 => ValueType::I64,
            3 => ValueType::U64,
            4 => ValueType::F32,
            5 => ValueType::F64,
            6 => ValueType::String,
            7 => ValueType::Aggregate,
            9 => ValueType::Event,
            10 => ValueType::HighresEvent,
            n => ValueType::Other(n),
        }
    }
    pub fn is_numeric(self) -> bool {
        matches!(
            self,
            ValueType::I32
                | ValueType::U32
                | ValueType::I64
                | ValueType::U64
                | ValueType::F32
                | ValueType::F64
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Semantics {
    Counter,
    Instant,
    Discrete,
    /// PCP number kept where it is none of the above (e.g. 0 from python MMV).
    Other(u32),
}

impl Semantics {
    pub fn pcp_code(self) -> u32 {
        match self {
            Semantics::Counter => 1,
            Semantics::Instant => 3,
            Semantics::Discrete => 4,
            Semantics::Other(n) => n,
        }
    }
    pub fn from_pcp_code(n: u32) -> Semantics {
        match n {
            1 => Semantics::Counter,
            3 => Semantics::Instant,
            4 => Semantics::Discrete,
            n => Semantics::Other(n),
        }
    }
}

/// PCP pmUnits: dimensions and scales, plus the pad/extra byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Units {
    pub dim_space: i8,
    pub dim_time: i8,
    pub dim_count: i8,
    pub scale_space: u8,
    pub scale_time: u8,
    pub scale_count: i8,
    pub pad: u8,
}

impl Units {
    pub const NONE: Units = Units {
        dim_space: 0,
        dim_time: 0,
        dim_count: 0,
        scale_space: 0,
        scale_time: 0,
        scale_count: 0,
        pad: 0,
    };
    /// Pack as PCP's 32-bit pmUnits word (little-endian-host bitfield order).
    pub fn to_word(self) -> u32 {
        ((self.dim_space as u8 as u32 & 0xf) << 28)
            | ((self.dim_time as u8 as u32 & 0xf) << 24)
            | ((self.dim_count as u8 as u32 & 0xf) << 20)
            | ((self.scale_space as u32 & 0xf) << 16)
            | ((self.scale_time as u32 & 0xf) << 12)
            | ((self.scale_count as u8 as u32 & 0xf) << 8)
            | self.pad as u32
    }
    pub fn from_word(w: u32) -> Units {
        fn s4(v: u32) -> i8 {
            (((v & 0xf) as i8) << 4) >> 4
        }
        Units {
            dim_space: s4(w >> 28),
            dim_time: s4(w >> 24),
            dim_count: s4(w >> 20),
            scale_space: ((w >> 16) & 0xf) as u8,
            scale_time: ((w >> 12) & 0xf) as u8,
            scale_count: s4(w >> 8),
            pad: (w & 0xff) as u8,
        }
    }
    pub const fn count() -> Units {
        Units {
            dim_count: 1,
            ..Units::NONE
        }
    }
    pub const fn bytes() -> Units {
        Units {
            dim_space: 1,
            ..Units::NONE
        }
    }
    /// Space dimension with a PCP space scale (0 bytes, 1 KiB, 2 MiB, …).
    pub const fn space(scale: u8) -> Units {
        Units {
            dim_space: 1,
            scale_space: scale,
            ..Units::NONE
        }
    }
    /// The text PCP's `pmUnitsStr` gives (pmdumplog and mmvdump print it).
    pub fn pcp_str(self) -> String {
        let space = match self.scale_space {
            0 => "byte".to_string(),
            1 => "Kbyte".into(),
            2 => "Mbyte".into(),
            3 => "Gbyte".into(),
            4 => "Tbyte".into(),
            5 => "Pbyte".into(),
            6 => "Ebyte".into(),
            7 => "Zbyte".into(),
            8 => "Ybyte".into(),
            n => format!("space-{n}"),
        };
        let time = match self.scale_time {
            0 => "nanosec".to_string(),
            1 => "microsec".into(),
            2 => "millisec".into(),
            3 => "sec".into(),
            4 => "min".into(),
            5 => "hour".into(),
            n => format!("time-{n}"),
        };
        let count = match self.scale_count {
            0 => "count".to_string(),
            1 => "count x 10".into(),
            n => format!("count x 10^{n}"),
        };
        let dims = [
            (self.dim_space, &space),
            (self.dim_time, &time),
            (self.dim_count, &count),
        ];
        let term = |s: &str, d: i8| {
            if d.abs() == 1 {
                s.to_string()
            } else {
                format!("{s}^{}", d.abs())
            }
        };
        let mut parts: Vec<String> = dims
            .iter()
            .filter(|(d, _)| *d > 0)
            .map(|(d, s)| term(s, *d))
            .collect();
        if dims.iter().any(|(d, _)| *d < 0) {
            parts.push("/".into());
            parts.extend(
                dims.iter()
                    .filter(|(d, _)| *d < 0)
                    .map(|(d, s)| term(s, *d)),
            );
        }
        if parts.is_empty() {
            return match self.scale_count {
                0 => String::new(),
                1 => "x 10".into(),
                n => format!("x 10^{n}"),
            };
        }
        parts.join(" ")
    }
    /// Time dimension with a PCP time scale (0 ns, 1 µs, 2 ms, 3 s, …).
    pub const fn time(scale: u8) -> Units {
        Units {
            dim_time: 1,
            scale_time: scale,
            ..Units::NONE
        }
    }
}

/// A metric descriptor.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricDesc {
    pub id: MetricId,
    /// All names of the metric (PCP allows several per pmID); first is primary.
    pub names: Vec<String>,
    pub vtype: ValueType,
    pub sem: Semantics,
    pub units: Units,
    pub indom: Option<IndomId>,
    pub help_short: Option<String>,
    pub help_long: Option<String>,
    pub extras: Extras,
}

impl MetricDesc {
    pub fn new(id: MetricId, name: &str, vtype: ValueType, sem: Semantics, units: Units) -> Self {
        MetricDesc {
            id,
            names: vec![name.to_string()],
            vtype,
            sem,
            units,
            indom: None,
            help_short: None,
            help_long: None,
            extras: Extras::default(),
        }
    }
    pub fn name(&self) -> &str {
        self.names.first().map(String::as_str).unwrap_or("")
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    pub id: InstId,
    pub name: String,
}

impl Instance {
    pub fn new(id: InstId, name: impl Into<String>) -> Self {
        Instance {
            id,
            name: name.into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndomKind {
    /// The complete membership from `time` on.
    Full,
    /// Changes against the previous membership: instances listed with a
    /// name are added, those in `removed` are gone.
    Delta,
}

impl IndomKind {
    /// A first membership is a full one; later ones are changes.
    pub fn full_if(first: bool) -> Self {
        if first {
            IndomKind::Full
        } else {
            IndomKind::Delta
        }
    }
}

/// Instance domain membership at a time.
#[derive(Debug, Clone, PartialEq)]
pub struct IndomUpdate {
    pub time: Timestamp,
    pub id: IndomId,
    pub kind: IndomKind,
    pub instances: Vec<Instance>,
    /// Removed instance ids (Delta only).
    pub removed: Vec<InstId>,
    pub extras: Extras,
}

/// Instance names by id, as a reader of indom updates keeps them.
pub trait Membership {
    fn clear_all(&mut self);
    fn remove_id(&mut self, id: InstId);
    fn insert_name(&mut self, id: InstId, name: &str);
}

macro_rules! membership_map {
    ($($map:ident),*) => {$(
        impl Membership for std::collections::$map<InstId, String> {
            fn clear_all(&mut self) {
                self.clear();
            }
            fn remove_id(&mut self, id: InstId) {
                self.remove(&id);
            }
            fn insert_name(&mut self, id: InstId, name: &str) {
                self.insert(id, name.to_string());
            }
        }
    )*};
}

membership_map!(HashMap, BTreeMap);

/// The names of domain `.0` in a map of the names of all domains, as a
/// [`Membership`] (what an update of that domain applies to).
pub struct DomainNames<'a>(
    pub IndomId,
    pub &'a mut std::collections::HashMap<(IndomId, InstId), String>,
);

impl Membership for DomainNames<'_> {
    fn clear_all(&mut self) {
        let id = self.0;
        self.1.retain(|(i, _), _| *i != id);
    }
    fn remove_id(&mut self, inst: InstId) {
        self.1.remove(&(self.0, inst));
    }
    fn insert_name(&mut self, inst: InstId, name: &str) {
        self.1.insert((self.0, inst), name.to_string());
    }
}

impl IndomUpdate {
    /// Bring `names` to the membership from `time` on: a full update
    /// replaces it, a delta removes then adds (a re-added id is renamed).
    pub fn apply_to(&self, names: &mut impl Membership) {
        if self.kind == IndomKind::Full {
            names.clear_all();
        }
        for r in &self.removed {
            names.remove_id(*r);
        }
        for i in &self.instances {
            names.insert_name(i.id, &i.name);
        }
    }

    /// `instances` at `time`, nothing removed, no extras.
    pub fn new(time: Timestamp, id: IndomId, kind: IndomKind, instances: Vec<Instance>) -> Self {
        IndomUpdate {
            time,
            id,
            kind,
            instances,
            removed: Vec::new(),
            extras: Extras::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HelpTarget {
    Metric(MetricId),
    Indom(IndomId),
}

/// Help text (PCP TEXT record, MMV help strings, LTT descriptions).
#[derive(Debug, Clone, PartialEq)]
pub struct Help {
    pub target: HelpTarget,
    /// true = one-line help, false = full help text.
    pub oneline: bool,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LabelTarget {
    Context,
    Domain(u32),
    Cluster(u32),
    Item(MetricId),
    Indom(IndomId),
    Instances(IndomId),
}

/// One label set (PCP LABEL record entry, MMV label).
#[derive(Debug, Clone, PartialEq)]
pub struct LabelSet {
    pub time: Option<Timestamp>,
    pub target: LabelTarget,
    /// Instance for `Instances` sets, PM_IN_NULL otherwise.
    pub inst: InstId,
    /// The JSON text exactly as stored (PCP keeps name/value offsets into it).
    pub json: String,
    pub labels: Vec<Label>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    pub name: String,
    /// JSON value text ("\"x\"", "42", "true").
    pub value: String,
    pub flags: u32,
}

/// Values for one metric in a sample.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricValues {
    pub metric: MetricId,
    /// Ok: (instance, value) pairs (empty = no value); Err: PCP error code.
    pub values: Result<Vec<(InstId, Value)>, i32>,
}

/// A sample: a timestamp plus values for (metric, instance).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub time: Timestamp,
    pub raw_clock: Option<u64>,
    pub metrics: Vec<MetricValues>,
    pub extras: Extras,
}

/// A discontinuity marker (PCP mark record, LTT/recorder restart).
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub time: Timestamp,
    pub extras: Extras,
}

/// A free-text note attached to a time (LTT bookmark, DLT log line, …).
#[derive(Debug, Clone, PartialEq)]
pub struct Annotation {
    pub time: Timestamp,
    pub raw_clock: Option<u64>,
    pub text: String,
    pub extras: Extras,
}

#[cfg(test)]
mod tests {
    use super::{utf8, Units};

    #[test]
    fn utf8_takes_ascii_and_utf8_and_refuses_the_rest() {
        assert_eq!(utf8(b""), Some(""));
        assert_eq!(utf8(b"/usr/bin/sleep 10"), Some("/usr/bin/sleep 10"));
        assert_eq!(
            utf8("caf\u{e9} \u{1f600}".as_bytes()),
            Some("caf\u{e9} \u{1f600}")
        );
        // A lone continuation byte, a cut sequence, an overlong NUL.
        for bad in [&b"ab\x80"[..], b"\xe2\x82", b"\xc0\x80"] {
            assert_eq!(utf8(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn units_text_like_pmunitsstr() {
        let u = |w| Units::from_word(w).pcp_str();
        assert_eq!(u(0x1001_0000), "Kbyte");
        assert_eq!(u(0x0010_0000), "count");
        assert_eq!(u(0x0100_1000), "microsec");
        assert_eq!(u(0), "");
        assert_eq!(u(0x1f00_3000), "byte / sec");
        assert_eq!(u(0x0000_0100), "x 10");
        assert_eq!(u(0x0010_0f00), "count x 10^-1");
    }
}

// ---------------------------------------------------------------- streams

/// A stream being read: the header plus a pull iterator of items.
pub trait TraceReader {
    fn header(&self) -> &Header;
    /// The next item, `Ok(None)` at the end. In salvage mode a reader stops
    /// (or skips) at damage and records a diagnostic instead of failing.
    fn next_item(&mut self) -> crate::Result<Option<Item>>;
    /// Problems met so far (skips, salvage stops, warnings).
    fn diagnostics(&self) -> &[crate::Diagnostic] {
        &[]
    }
    /// Counts in the format's own terms (KPI datasets per type, PCP records
    /// per type, …) for `info`; valid once the stream has been read.
    fn native_counts(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
    /// Input bytes consumed so far and in all, for a progress display; None
    /// where a reader cannot tell cheaply. Called every few thousand items.
    fn progress(&self) -> Option<(u64, u64)> {
        None
    }
    /// The format's own reader, not read yet, for a writer of the same
    /// format that copies what needs no change instead of decoding and
    /// encoding it ([`TraceWriter::copy_verbatim`]). Stages leave this
    /// None (the default): a copy happens only when nothing that needs or
    /// changes items stands between reader and writer.
    fn verbatim(&mut self) -> Option<&mut dyn std::any::Any> {
        None
    }
    /// An item the writer is done with, given back so the reader can reuse
    /// its buffers (fields, values, extras) for a later item instead of
    /// allocating new ones. Stages pass it to their inner reader. The
    /// default drops it.
    fn recycle(&mut self, item: Item) {
        drop(item);
    }
    /// Up to `max` next items appended to `out`, for a caller that takes
    /// them in runs (the convert loop): one call per run through the
    /// stages instead of one per item. False once the stream has ended
    /// (what was appended, if anything, is its last); it may append fewer
    /// than `max`, even none, and return true. The items are exactly those
    /// `next_item` would give; on an error the items before it are
    /// appended. The default gives one item (from `next_item`): large
    /// items (wide samples) are best written one by one while they are in
    /// the cache; a reader of small items gives runs.
    fn next_batch(&mut self, out: &mut Vec<Item>, max: usize) -> crate::Result<bool> {
        if max == 0 {
            return Ok(true);
        }
        match self.next_item()? {
            Some(item) => {
                out.push(item);
                Ok(true)
            }
            None => Ok(false),
        }
    }
    /// [`Self::recycle`] for every item of `items`, left empty.
    fn recycle_batch(&mut self, items: &mut Vec<Item>) {
        for item in items.drain(..) {
            self.recycle(item);
        }
    }
    /// Input bytes done, kept up to date in a shared counter by a reader
    /// that a writer copies without items ([`Self::verbatim`]: nobody can
    /// ask `progress()` then), and the total; None where there is none.
    fn progress_shared(&self) -> Option<(std::sync::Arc<std::sync::atomic::AtomicU64>, u64)> {
        None
    }
    /// Clock restarts (boot cycles begun after the first) up to the items
    /// given last. A reader whose clock can restart (DLT: tmsp counts from
    /// each boot) ends a run of [`Self::next_batch`] before the first item
    /// after a restart, so the count read after a call holds for every
    /// item it gave. Stages that pass items through pass it on; time
    /// ordering (`stages::reorder`) never moves an item across a restart.
    /// 0 where the clock never restarts.
    fn restarts(&self) -> u64 {
        0
    }
    /// A time-ordering stage (`stages::Reorder`), outermost, hands its
    /// ordering to the caller before the first item: from then on it
    /// passes its inner reader's items on as they come, with their clock
    /// restarts, and the caller puts them in the order it would have
    /// (`wire::Ordered`): a window of `.0` ns, at most `.1` waiting. None
    /// from any other reader.
    fn take_ordering(&mut self) -> Option<(i64, usize)> {
        None
    }
    /// From now on, give events that share all but their field values as
    /// one [`Item::EventRun`] where this reader can (the KPI assembler:
    /// the datasets of one message); true if it will. Asked before the
    /// first item, by a caller whose writer takes runs. A stage passes the
    /// question on only if it handles runs as it does their events; the
    /// default says no.
    fn event_runs(&mut self) -> bool {
        false
    }
}

/// `b` as text when it is UTF-8. ASCII, nearly all the text of traces, is
/// recognised a word at a time without the UTF-8 decoder (a cost per
/// string that showed on command lines and names decoded by the million).
#[inline]
pub fn utf8(b: &[u8]) -> Option<&str> {
    if b.is_ascii() {
        // SAFETY: ASCII bytes are UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(b) })
    } else {
        std::str::from_utf8(b).ok()
    }
}

/// Text bytes as a value: UTF-8 text when valid, bytes otherwise (DLT
/// string arguments, command lines).
pub fn text_value(b: &[u8]) -> Value {
    match utf8(b) {
        Some(s) => Value::Str(s.to_string()),
        None => Value::Bytes(b.to_vec()),
    }
}

/// An empty vector of another element type (or lifetime) that keeps
/// `v`'s allocation when the two have the same layout: the standard
/// library's in-place collect reuses it. Readers keep scratch lists of
/// borrowed data between calls this way, and writers their buffers.
pub fn reuse_vec<T, U>(mut v: Vec<T>) -> Vec<U> {
    v.clear();
    v.into_iter().map(|_| unreachable!("empty")).collect()
}

/// A stream being written. `finish` flushes and returns what was lost.
pub trait TraceWriter: Send {
    fn write_item(&mut self, item: &Item) -> crate::Result<()>;
    /// Copy `reader`'s stream without items when the writer can (see
    /// [`TraceReader::verbatim`]); the number of data items copied, or None
    /// to be fed items as usual.
    fn copy_verbatim(&mut self, _reader: &mut dyn TraceReader) -> crate::Result<Option<u64>> {
        Ok(None)
    }
    /// Bytes of output so far, buffered ones included, where the writer
    /// keeps count (`--split SIZE`); None: look at the files.
    fn bytes_written(&self) -> Option<u64> {
        None
    }
    /// Whether the writer writes an [`Item::EventRun`] faster than its
    /// events one by one (every writer takes runs: the others write each
    /// event of one).
    fn takes_runs(&self) -> bool {
        false
    }
    fn finish(self: Box<Self>) -> crate::Result<LossReport>;
}

/// An in-memory trace collected from a stream, for writers that need it
/// (MMV snapshot, sorting). The exception, not the rule.
#[derive(Debug, Clone)]
pub struct Trace {
    pub header: Header,
    pub items: Vec<Item>,
}

impl Trace {
    pub fn collect(reader: &mut dyn TraceReader) -> crate::Result<Trace> {
        let header = reader.header().clone();
        let mut items = Vec::new();
        while let Some(it) = reader.next_item()? {
            items.push(it);
        }
        Ok(Trace { header, items })
    }
}

/// A small xorshift generator for the randomized tests: the same cases on
/// every run.
#[cfg(test)]
pub(crate) struct TestRng(pub u64);

#[cfg(test)]
impl TestRng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A reader that gives real runs (the default `next_batch` gives one
/// item), for the tests of stages that take runs.
#[cfg(test)]
pub struct Runs(pub VecReader);

#[cfg(test)]
impl TraceReader for Runs {
    fn header(&self) -> &Header {
        self.0.header()
    }
    fn next_item(&mut self) -> crate::Result<Option<Item>> {
        self.0.next_item()
    }
    fn next_batch(&mut self, out: &mut Vec<Item>, max: usize) -> crate::Result<bool> {
        for _ in 0..max {
            match self.0.next_item()? {
                Some(it) => out.push(it),
                None => return Ok(false),
            }
        }
        Ok(true)
    }
}

/// A reader over an in-memory trace (tests, writers that re-read).
pub struct VecReader {
    header: Header,
    items: std::vec::IntoIter<Item>,
}

impl VecReader {
    pub fn new(trace: Trace) -> VecReader {
        VecReader {
            header: trace.header,
            items: trace.items.into_iter(),
        }
    }
}

impl TraceReader for VecReader {
    fn header(&self) -> &Header {
        &self.header
    }
    fn next_item(&mut self) -> crate::Result<Option<Item>> {
        Ok(self.items.next())
    }
}
