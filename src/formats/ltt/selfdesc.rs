//! The `polytrace` facility: how an LTT trace written from another format
//! carries that stream exactly (docs/ltt.md, "Carrying another format").
//!
//! The data stays visible to any LTT reader: events as facility events,
//! samples as `metric.*` events, instance domains as `indom.*` events. What
//! those cannot say (pmIDs, types, units, help, labels, extras, raw clocks,
//! the original header and time base, event types as the source defined
//! them) travels as JSON text (`model::codec`) in the events of one more
//! facility, `polytrace`:
//!
//! | event | where | what |
//! | --- | --- | --- |
//! | `header` | `control/polytrace` | the source's header, the defaults below |
//! | `define` | before first use, in each tracefile that uses it | an event type or metric (with its LTT id), help, labels, an indom update (then its `indom.*` events) |
//! | `sample` | before its `metric.*` events | time, raw clock, extras, per metric the value count or error code |
//! | `event` | right before the event it completes | what differs from the defaults: exact time, raw clock, cpu, stream, changed extras, fields |
//! | `data` | at its time | a mark or an annotation |
//!
//! Each has the payload `{ more: uint1, text: string }`; a text longer than
//! a block continues in the next `polytrace` event of the same tracefile
//! (`more = 1`). The reader restores the original stream; LTT's own framing
//! and the carrier events are not part of it.

use super::eventdefs::{self, Facility, Ty};
use super::layout;
use super::reader::{Cursor, Trace};
use crate::error::{Diagnostic, Position};
use crate::model::codec;
use crate::model::{
    Event, EventType, Extras, FieldType, Header, IndomUpdate, Instance, Item, MetricValues, Sample,
    Timestamp, Value, ValueType,
};
use serde_json::Value as J;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

pub const FACILITY: &str = "polytrace";
/// Version of the self-description; a reader ignores (with a warning) a
/// trace whose major version it does not know.
pub const VERSION: u64 = 1;
/// Tracefile holding the header record.
pub const CONTROL_FILE: &str = "polytrace";

/// Positions of the events in the facility.
pub const EV_HEADER: u16 = 0;
pub const EV_DEFINE: u16 = 1;
pub const EV_SAMPLE: u16 = 2;
pub const EV_EVENT: u16 = 3;
pub const EV_DATA: u16 = 4;
pub const EVENTS: u16 = 5;

pub const XML: &str = r#"<facility name="polytrace">
  <description>polytrace self-description: the stream this trace was converted from, as JSON records (see polytrace's docs/ltt.md). A record longer than a block continues in the next polytrace event of the same tracefile (more = 1).</description>
  <event name="header">
    <description>The source's header and the defaults of the event records (control/polytrace).</description>
    <struct><field name="more"><uint size=1/></field><field name="text"><string/></field></struct>
  </event>
  <event name="define">
    <description>A definition: event type or metric with its LTT event id, help text, label set, or an instance domain update followed by its indom events.</description>
    <struct><field name="more"><uint size=1/></field><field name="text"><string/></field></struct>
  </event>
  <event name="sample">
    <description>A sample: its metric events follow in this tracefile.</description>
    <struct><field name="more"><uint size=1/></field><field name="text"><string/></field></struct>
  </event>
  <event name="event">
    <description>What the next event of this tracefile has beyond its payload.</description>
    <struct><field name="more"><uint size=1/></field><field name="text"><string/></field></struct>
  </event>
  <event name="data">
    <description>A mark or an annotation.</description>
    <struct><field name="more"><uint size=1/></field><field name="text"><string/></field></struct>
  </event>
</facility>
"#;

/// The facility as parsed from [`XML`] (its checksum identifies it).
pub fn facility() -> Facility {
    let mut fs = eventdefs::parse_file(XML.as_bytes(), "polytrace.xml")
        .unwrap_or_else(|e| unreachable!("built-in polytrace.xml: {}", e.msg));
    fs.remove(0)
}

/// The payload type of every `polytrace` event.
pub fn record_ty() -> Ty {
    Ty::Struct(vec![("more".into(), Ty::Uint(1)), ("text".into(), Ty::Str)])
}

/// The LTT id range of the `polytrace` facility of a trace, if it has the
/// one polytrace writes (same name and checksum, loaded).
pub fn ids(t: &Trace) -> Option<std::ops::Range<u16>> {
    let want = facility().checksum;
    t.facilities
        .iter()
        .zip(&t.bases)
        .find(|(f, b)| f.name == FACILITY && f.checksum == want && b.is_some())
        .and_then(|(_, b)| {
            let b = u16::try_from((*b)?).ok()?;
            Some(b..b.checked_add(EVENTS)?)
        })
}

/// Per-trace defaults the `event` records are relative to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Defaults {
    /// raw_clock = the LTT counter (else none).
    pub raw_counter: bool,
    /// cpu = the tracefile's cpu (else none).
    pub cpu_file: bool,
    /// stream = the tracefile's path (else none).
    pub stream_file: bool,
}

impl Defaults {
    pub fn to_json(self) -> J {
        serde_json::json!({
            "raw": if self.raw_counter { "counter" } else { "none" },
            "cpu": if self.cpu_file { "file" } else { "none" },
            "stream": if self.stream_file { "file" } else { "none" },
        })
    }
    fn from_json(j: Option<&J>) -> Defaults {
        let is = |k: &str, v: &str| j.and_then(|j| j.get(k)).and_then(J::as_str) == Some(v);
        Defaults {
            raw_counter: is("raw", "counter"),
            cpu_file: is("cpu", "file"),
            stream_file: is("stream", "file"),
        }
    }
}

/// A decoded value as the model type says it was: LTT has no byte-string
/// type, so `bytes` fields travel as sequences of uint1.
pub fn restore(v: Value, t: &FieldType) -> Value {
    match (v, t) {
        (Value::List(l), FieldType::Bytes) => {
            let mut b = Vec::with_capacity(l.len());
            for x in &l {
                match x {
                    Value::U64(n) if *n < 256 => b.push(*n as u8),
                    _ => return Value::List(l),
                }
            }
            Value::Bytes(b)
        }
        (Value::List(l), FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. }) => {
            Value::List(l.into_iter().map(|x| restore(x, elem)).collect())
        }
        (Value::Struct(l), FieldType::Struct(fs)) if l.len() == fs.len() => Value::Struct(
            l.into_iter()
                .zip(fs)
                .map(|(x, f)| restore(x, &f.ty))
                .collect(),
        ),
        (Value::Union(mut l), FieldType::Union(fs)) if l.len() == 2 => {
            if let Some(f) = match l[0] {
                Value::U64(tag) => fs.get(tag as usize),
                _ => None,
            } {
                let m = l.pop().unwrap_or(Value::U64(0));
                l.push(restore(m, &f.ty));
            }
            Value::Union(l)
        }
        (v, _) => v,
    }
}

/// The field a metric's values travel in (`metric.<name>` events).
pub fn metric_field(vt: ValueType) -> FieldType {
    match vt {
        ValueType::I32 => FieldType::Int(4),
        ValueType::U32 => FieldType::Uint(4),
        ValueType::I64 => FieldType::Int(8),
        ValueType::U64 => FieldType::Uint(8),
        ValueType::F32 => FieldType::Float(4),
        ValueType::F64 => FieldType::Float(8),
        ValueType::Aggregate => FieldType::Bytes,
        // Strings as they are; event records and unknown types as their
        // JSON text (`model::codec`).
        _ => FieldType::String,
    }
}

/// A value of a metric as its `metric.*` event carries it.
pub fn metric_wire(vt: ValueType, v: &Value) -> Option<Value> {
    match vt {
        ValueType::String => None,
        t if metric_field(t) == FieldType::String => {
            Some(Value::Str(codec::value_to_json(v).to_string()))
        }
        _ => None,
    }
}

/// Back from the `metric.*` event's value.
pub fn metric_unwire(vt: ValueType, v: Value) -> Result<Value, String> {
    match (vt, v) {
        (ValueType::String, v) => Ok(v),
        (t, Value::Str(s)) if metric_field(t) == FieldType::String => {
            let j: J = serde_json::from_str(&s).map_err(|e| format!("value JSON: {e}"))?;
            codec::value_from_json(&j)
        }
        (t, v) => Ok(restore(v, &metric_field(t))),
    }
}

// ------------------------------------------------------------ reading

/// What an LTT id stands for in a described trace.
#[derive(Clone)]
enum Role {
    Type(Arc<EventType>),
    Metric(u32, ValueType),
    Indom,
}

/// A record being completed by the events that follow it in one tracefile.
enum Open {
    Sample {
        sample: Sample,
        /// (metric, value count or error code) still to fill, in order.
        todo: VecDeque<(u32, Result<usize, i32>)>,
        /// Values of the current metric so far.
        cur: Vec<(crate::model::InstId, Value)>,
        overrides: HashMap<usize, Value>,
        index: usize,
    },
    Indom {
        update: IndomUpdate,
        ltt: u16,
        added: usize,
        removed: usize,
        names: Option<Vec<String>>,
    },
}

#[derive(Default)]
struct PerFile {
    /// Text of a record continued over several events.
    text: String,
    open: Option<Open>,
    /// The `event` record for the next event of this tracefile.
    patch: Option<(u16, J)>,
}

/// Rebuilds the original stream of a trace written by polytrace from
/// another format.
pub struct Restore {
    pub header: Header,
    ids: std::ops::Range<u16>,
    defaults: Defaults,
    roles: HashMap<u16, Role>,
    seen: HashSet<u64>,
    files: Vec<PerFile>,
    /// Extras of the last event per (tracefile, LTT id): `event` records
    /// give only what changed.
    last_x: HashMap<(usize, u16), Extras>,
    warned: HashSet<u16>,
    pub out: VecDeque<Item>,
}

fn record_text(p: &[u8]) -> Option<(bool, &str)> {
    let more = *p.first()?;
    let nul = p[1..].iter().position(|&c| c == 0)? + 1;
    Some((more != 0, std::str::from_utf8(&p[1..nul]).ok()?))
}

impl Restore {
    /// A `Restore` when the trace carries a polytrace self-description
    /// whose header can be read; warnings explain why not otherwise.
    pub fn open(t: &Trace, diags: &mut Vec<Diagnostic>) -> Option<Restore> {
        let ids = ids(t)?;
        let rel = format!("control/{CONTROL_FILE}");
        let warn = |diags: &mut Vec<Diagnostic>, m: String| {
            diags.push(Diagnostic::warning(
                Position::new(t.dir.join(&rel)),
                format!("{m}; the trace is read as plain LTT"),
            ))
        };
        let Some(idx) = t.files.iter().position(|f| f.rel == rel) else {
            warn(diags, "polytrace facility without its header file".into());
            return None;
        };
        let mut cur = Cursor::new(t, idx);
        let mut text = String::new();
        let mut local = Vec::new();
        let mut done = false;
        while let Some(ev) = cur.next(t, &mut local) {
            if ev.id != ids.start + EV_HEADER {
                continue;
            }
            let Some((more, s)) = record_text(&cur.buf[ev.start..ev.end]) else {
                break;
            };
            text.push_str(s);
            if !more {
                done = true;
                break;
            }
        }
        diags.extend(local);
        if !done {
            warn(diags, "no complete polytrace header record".into());
            return None;
        }
        let j: J = match serde_json::from_str(&text) {
            Ok(j) => j,
            Err(e) => {
                warn(diags, format!("polytrace header: {e}"));
                return None;
            }
        };
        let v = j.get("polytrace").and_then(J::as_u64).unwrap_or(0);
        if v != VERSION {
            warn(
                diags,
                format!("polytrace self-description version {v} unknown"),
            );
            return None;
        }
        let header = match j
            .get("header")
            .ok_or_else(|| "missing header".to_string())
            .and_then(codec::header_from_json)
        {
            Ok(h) => h,
            Err(e) => {
                warn(diags, format!("polytrace header: {e}"));
                return None;
            }
        };
        Some(Restore {
            header,
            ids,
            defaults: Defaults::from_json(j.get("defaults")),
            roles: HashMap::new(),
            seen: HashSet::new(),
            files: (0..t.files.len()).map(|_| PerFile::default()).collect(),
            last_x: HashMap::new(),
            warned: HashSet::new(),
            out: VecDeque::new(),
        })
    }

    /// Take one LTT event of file `fi` (payload `p`, LTT `time`/`counter`).
    #[allow(clippy::too_many_arguments)]
    pub fn event(
        &mut self,
        t: &Trace,
        fi: usize,
        id: u16,
        time: i64,
        counter: u64,
        p: &[u8],
        diags: &mut Vec<Diagnostic>,
    ) {
        let tf = &t.files[fi];
        let pos = || Position::new(&tf.path);
        let bad = |diags: &mut Vec<Diagnostic>, m: String| {
            diags.push(Diagnostic::salvaged(
                pos(),
                format!("polytrace record at {}: {m}; skipped", Timestamp(time)),
            ))
        };
        if self.ids.contains(&id) {
            let Some((more, s)) = record_text(p) else {
                bad(diags, "undecodable record".into());
                return;
            };
            let f = &mut self.files[fi];
            if f.text.len() + s.len() > MAX_RECORD {
                f.text.clear();
                bad(diags, "record longer than 1 GiB".into());
                return;
            }
            f.text.push_str(s);
            if more {
                return;
            }
            let text = std::mem::take(&mut f.text);
            let j: J = match serde_json::from_str(&text) {
                Ok(j) => j,
                Err(e) => return bad(diags, format!("JSON: {e}")),
            };
            if let Err(m) = self.record(fi, id - self.ids.start, time, j) {
                bad(diags, m);
            }
            return;
        }
        let Some(role) = self.roles.get(&id).cloned() else {
            if t.info(id).is_some_and(|i| !i.builtin) && self.warned.insert(id) {
                diags.push(Diagnostic::warning(
                    pos(),
                    format!(
                        "LTT event id {id} has no polytrace definition; its events are left out"
                    ),
                ));
            }
            return;
        };
        let fields = match t.info(id).and_then(|i| i.ty.as_ref()) {
            Some(ty) => {
                let mut at = 0;
                match layout::decode(ty, p, &mut at, t.bo) {
                    Ok(Value::Struct(v)) if matches!(ty, Ty::Struct(_)) => v,
                    Ok(v) => vec![v],
                    Err(e) => return bad(diags, e.msg),
                }
            }
            None => vec![],
        };
        let r = match role {
            Role::Type(et) => {
                self.model_event(t, fi, id, &et, time, counter, fields);
                Ok(())
            }
            Role::Metric(m, vt) => self.metric_value(fi, m, vt, fields),
            Role::Indom => self.indom_member(fi, id, fields),
        };
        if let Err(m) = r {
            bad(diags, m);
        }
    }

    /// Records left open at the end of the trace (damage).
    pub fn finish(&mut self, t: &Trace, diags: &mut Vec<Diagnostic>) {
        for (fi, f) in self.files.iter_mut().enumerate() {
            if f.open.take().is_some() || !f.text.is_empty() {
                diags.push(Diagnostic::salvaged(
                    Position::new(&t.files[fi].path),
                    "a polytrace record is incomplete at the end of the tracefile; left out",
                ));
            }
        }
    }

    fn record(&mut self, fi: usize, kind: u16, time: i64, j: J) -> Result<(), String> {
        let serial = j.get("n").and_then(J::as_u64);
        let ltt = j
            .get("ltt")
            .and_then(J::as_u64)
            .and_then(|v| u16::try_from(v).ok());
        match kind {
            EV_HEADER => Ok(()),
            EV_DEFINE => {
                let item = codec::item_from_json(&j)?;
                let first = serial.is_none_or(|n| self.seen.insert(n));
                match &item {
                    Item::EventType(et) => {
                        let l = ltt.ok_or("event type without its LTT id")?;
                        self.roles.insert(l, Role::Type(et.clone()));
                    }
                    Item::Metric(m) => {
                        let l = ltt.ok_or("metric without its LTT id")?;
                        self.roles.insert(l, Role::Metric(m.id, m.vtype));
                    }
                    Item::Indom(u) => {
                        let n = j.get("nadd").and_then(J::as_u64).unwrap_or(0) as usize;
                        let r = j.get("nrm").and_then(J::as_u64).unwrap_or(0) as usize;
                        let names = match j.get("names") {
                            Some(v) => Some(
                                v.as_array()
                                    .ok_or("names: want a list")?
                                    .iter()
                                    .map(|s| s.as_str().map(str::to_string))
                                    .collect::<Option<Vec<_>>>()
                                    .ok_or("names: want strings")?,
                            ),
                            None => None,
                        };
                        if n + r == 0 {
                            self.out.push_back(item);
                            return Ok(());
                        }
                        let l = ltt.ok_or("indom update without its LTT id")?;
                        self.roles.insert(l, Role::Indom);
                        self.set_open(
                            fi,
                            Open::Indom {
                                update: u.clone(),
                                ltt: l,
                                added: n,
                                removed: r,
                                names,
                            },
                        );
                        return Ok(());
                    }
                    _ => {}
                }
                if first {
                    self.out.push_back(item);
                }
                Ok(())
            }
            EV_SAMPLE => {
                let mut todo = VecDeque::new();
                for e in j
                    .get("m")
                    .and_then(J::as_array)
                    .ok_or("sample without metrics")?
                {
                    let e = e.as_array().ok_or("sample entry: want a list")?;
                    let m = e
                        .first()
                        .and_then(J::as_u64)
                        .and_then(|v| u32::try_from(v).ok())
                        .ok_or("sample entry: bad metric")?;
                    let what = match (e.get(1), e.get(2)) {
                        (Some(J::Null), Some(c)) => Err(c
                            .as_i64()
                            .and_then(|c| i32::try_from(c).ok())
                            .ok_or("sample entry: bad error code")?),
                        (Some(n), None) => {
                            Ok(n.as_u64().ok_or("sample entry: bad count")? as usize)
                        }
                        _ => return Err("sample entry: want [metric, count]".into()),
                    };
                    todo.push_back((m, what));
                }
                let mut overrides = HashMap::new();
                if let Some(o) = j.get("v").and_then(J::as_object) {
                    for (k, v) in o {
                        let k: usize = k.parse().map_err(|_| "bad override index")?;
                        overrides.insert(k, codec::value_from_json(v)?);
                    }
                }
                let sample = Sample {
                    time: Timestamp(j.get("t").and_then(J::as_i64).unwrap_or(time)),
                    raw_clock: j.get("raw").and_then(J::as_u64),
                    metrics: Vec::with_capacity(todo.len()),
                    extras: match j.get("x") {
                        Some(x) => codec::extras_from_json(x)?,
                        None => Extras::default(),
                    },
                };
                self.set_open(
                    fi,
                    Open::Sample {
                        sample,
                        todo,
                        cur: Vec::new(),
                        overrides,
                        index: 0,
                    },
                );
                self.advance(fi);
                Ok(())
            }
            EV_EVENT => {
                let l = ltt.ok_or("event record without its LTT id")?;
                if self.files[fi].patch.replace((l, j)).is_some() {
                    return Err("event record not followed by its event".into());
                }
                Ok(())
            }
            EV_DATA => {
                let item = codec::item_from_json(&j)?;
                self.out.push_back(item);
                Ok(())
            }
            k => Err(format!("unknown polytrace event {k}")),
        }
    }

    fn set_open(&mut self, fi: usize, o: Open) {
        // A record left open is damage the block reader already reported.
        self.files[fi].open = Some(o);
    }

    /// Fill metrics without values (none, or an error code) and complete
    /// the sample when nothing is left.
    fn advance(&mut self, fi: usize) {
        let f = &mut self.files[fi];
        let Some(Open::Sample {
            sample, todo, cur, ..
        }) = &mut f.open
        else {
            return;
        };
        while let Some(&(m, what)) = todo.front() {
            match what {
                Err(code) => sample.metrics.push(MetricValues {
                    metric: m,
                    values: Err(code),
                }),
                Ok(n) if cur.len() == n => sample.metrics.push(MetricValues {
                    metric: m,
                    values: Ok(std::mem::take(cur)),
                }),
                Ok(_) => return,
            }
            todo.pop_front();
        }
        if let Some(Open::Sample { sample, .. }) = f.open.take() {
            self.out.push_back(Item::Sample(sample));
        }
    }

    fn metric_value(
        &mut self,
        fi: usize,
        m: u32,
        vt: ValueType,
        fields: Vec<Value>,
    ) -> Result<(), String> {
        let Some(Open::Sample {
            todo,
            cur,
            overrides,
            index,
            ..
        }) = &mut self.files[fi].open
        else {
            return Err("metric event outside a sample".into());
        };
        if todo.front().map(|e| e.0) != Some(m) {
            self.files[fi].open = None;
            return Err("metric event does not match its sample record".into());
        }
        let mut it = fields.into_iter();
        let (Some(Value::I64(inst)), Some(v)) = (it.next(), it.next()) else {
            return Err("metric event without instance and value".into());
        };
        let v = match overrides.remove(index) {
            Some(v) => v,
            None => metric_unwire(vt, v)?,
        };
        *index += 1;
        cur.push((inst as i32, v));
        self.advance(fi);
        Ok(())
    }

    fn indom_member(&mut self, fi: usize, id: u16, fields: Vec<Value>) -> Result<(), String> {
        let f = &mut self.files[fi];
        let Some(Open::Indom {
            update,
            ltt,
            added,
            removed,
            names,
        }) = &mut f.open
        else {
            return Err("indom event outside an indom record".into());
        };
        if *ltt != id {
            f.open = None;
            return Err("indom event does not match its indom record".into());
        }
        let mut it = fields.into_iter();
        let (Some(Value::I64(inst)), Some(Value::U64(present)), Some(name)) =
            (it.next(), it.next(), it.next())
        else {
            return Err("indom event without instance, present, name".into());
        };
        if present != 0 && *added > 0 {
            let k = update.instances.len();
            let name = match (names.as_ref().and_then(|n| n.get(k)), name) {
                (Some(n), _) => n.clone(),
                (None, Value::Str(s)) => s,
                (None, Value::Bytes(b)) => String::from_utf8_lossy(&b).into_owned(),
                (None, v) => return Err(format!("indom name {v:?}")),
            };
            update.instances.push(Instance {
                id: inst as i32,
                name,
            });
            *added -= 1;
        } else if present == 0 && *added == 0 && *removed > 0 {
            update.removed.push(inst as i32);
            *removed -= 1;
        } else {
            f.open = None;
            return Err("indom events out of order".into());
        }
        if *added == 0 && *removed == 0 {
            if let Some(Open::Indom { update, .. }) = f.open.take() {
                self.out.push_back(Item::Indom(update));
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn model_event(
        &mut self,
        t: &Trace,
        fi: usize,
        id: u16,
        et: &EventType,
        time: i64,
        counter: u64,
        fields: Vec<Value>,
    ) {
        let tf = &t.files[fi];
        let d = self.defaults;
        let patch = match self.files[fi].patch.take() {
            Some((l, j)) if l == id => Some(j),
            _ => None,
        };
        let p = |k: &str| patch.as_ref().and_then(|j| j.get(k));
        let x = self.last_x.entry((fi, id)).or_default();
        if let Some(J::Object(ch)) = p("x") {
            for (k, v) in ch {
                if let Ok(v) = codec::extra_from_json(v) {
                    x.set(k.clone(), v);
                }
            }
        }
        if let Some(J::Array(rm)) = p("x-") {
            for k in rm.iter().filter_map(J::as_str) {
                x.remove(k);
            }
        }
        let fields = match p("f").map(codec::values_from_json) {
            Some(Ok(v)) => v,
            _ => fields
                .into_iter()
                .zip(&et.fields)
                .map(|(v, f)| restore(v, &f.ty))
                .collect(),
        };
        let ev = Event {
            time: Timestamp(p("t").and_then(J::as_i64).unwrap_or(time)),
            raw_clock: match p("raw") {
                Some(v) => v.as_u64(),
                None => d.raw_counter.then_some(counter),
            },
            type_id: et.id,
            cpu: match p("cpu") {
                Some(v) => v.as_u64().map(|c| c as u32),
                None if d.cpu_file => tf.cpu,
                None => None,
            },
            stream: match p("stream") {
                Some(v) => v.as_str().map(str::to_string),
                None if d.stream_file => Some(tf.rel.clone()),
                None => None,
            },
            fields,
            extras: x.clone(),
        };
        self.out.push_back(Item::Event(ev));
    }
}

/// A record's text is kept in memory until complete: bounded.
const MAX_RECORD: usize = 1 << 30;

#[cfg(test)]
mod tests {
    use super::*;

    /// Readers recognise the facility by this checksum: changing the XML's
    /// events is a new self-description version.
    #[test]
    fn facility_checksum_is_fixed() {
        let f = facility();
        assert_eq!(f.checksum, 0x8b82_e415);
        assert_eq!(f.events.len(), EVENTS as usize);
        assert_eq!(f.events[EV_EVENT as usize].name, "event");
    }

    #[test]
    fn bytes_come_back_from_uint1_sequences() {
        let l = Value::List(vec![Value::U64(1), Value::U64(255)]);
        assert_eq!(restore(l, &FieldType::Bytes), Value::Bytes(vec![1, 255]));
        let bad = Value::List(vec![Value::U64(256)]);
        assert_eq!(restore(bad.clone(), &FieldType::Bytes), bad);
        let v = Value::Str(codec::value_to_json(&Value::Events(vec![])).to_string());
        assert_eq!(
            metric_unwire(ValueType::Event, v).unwrap(),
            Value::Events(vec![])
        );
    }
}
