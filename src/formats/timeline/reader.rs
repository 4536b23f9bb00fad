//! Model reader: one EventType per distinct message, one Event per written
//! slot in ring order (oldest first).

use super::keys;
use super::layout::{
    a_priority, parse_mspec, placeholders, u16_at, u32_at, u64_at, AHeader, Layout, MHeader,
    Snapshot, M_UNKNOWN_MSGID, PRIORITIES,
};
use crate::error::{Diagnostic, Error, Position, Result};
use crate::input::Bytes;
use crate::model::{
    Event, EventType, ExtraValue, Extras, Field, FieldType, FormatId, Header, Item, MetricValues,
    Sample, TimeBase, Timestamp, TraceReader, Value, ValueType,
};
use crate::options::ReadOptions;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Most per-entry diagnostics kept (the rest are counted in the last one).
const MAX_DIAGS: usize = 20;

/// Prefix of the string polytrace's writer appends to the string table of a
/// file written from another stream (no entry refers to it, so Snabb never
/// shows it); JSON follows (docs/timeline.md, "Self-description").
pub const DESC_MAGIC: &str = "polytrace:";

/// A polytrace-written file's self-description, as the reader uses it.
struct Desc {
    /// By message key: the source's event type.
    types: HashMap<(u64, u64), Arc<EventType>>,
    /// By message key: (metric, instance, value type) of sample messages.
    samples: HashMap<(u64, u64), (u32, i32, ValueType)>,
    /// The tsc field holds the source's time in nanoseconds, not cycles.
    tsc_is_time: bool,
}

/// The message key the reader groups entries by, from a written msg_id.
fn key_of(layout: Layout, id: u64) -> (u64, u64) {
    match layout {
        Layout::A2 => (
            (((id >> 40) & 0xffff) << 16) | ((id >> 16) & 0xffff),
            id & 0xff,
        ),
        _ => (id, 0),
    }
}

/// Find and read the self-description; the items it defines go to `items`.
fn read_desc(
    layout: Layout,
    table: &[u8],
    header: &mut Header,
    items: &mut VecDeque<Item>,
) -> std::result::Result<Option<Desc>, String> {
    use crate::model::codec;
    let magic = DESC_MAGIC.as_bytes();
    let start = (0..table.len())
        .filter(|&i| i == 0 || table[i - 1] == 0)
        .find(|&i| table[i..].starts_with(magic));
    let Some(start) = start else { return Ok(None) };
    let body = &table[start + magic.len()..];
    let end = body.iter().position(|&b| b == 0).unwrap_or(body.len());
    let j: serde_json::Value =
        serde_json::from_slice(&body[..end]).map_err(|e| format!("self-description: {e}"))?;
    let list = |k: &str| -> std::result::Result<&Vec<serde_json::Value>, String> {
        j.get(k)
            .and_then(|v| v.as_array())
            .ok_or_else(|| format!("self-description: no {k}"))
    };
    let mut d = Desc {
        types: HashMap::new(),
        samples: HashMap::new(),
        tsc_is_time: j.get("tsc").and_then(|v| v.as_str()) == Some("time"),
    };
    let mut vtypes = HashMap::new();
    for m in list("metrics")? {
        let m = codec::metric_from_json(m)?;
        vtypes.insert(m.id, m.vtype);
        items.push_back(Item::Metric(Arc::new(m)));
    }
    for u in list("indoms")? {
        items.push_back(Item::Indom(codec::indom_from_json(u)?));
    }
    for t in list("types")? {
        let (Some(id), Some(t)) = (t.get(0).and_then(|v| v.as_u64()), t.get(1)) else {
            return Err("self-description: bad type entry".into());
        };
        let t = codec::event_type_from_json(t)?;
        d.types
            .entry(key_of(layout, id))
            .or_insert_with(|| Arc::new(t));
    }
    for e in list("samples")? {
        let v = |k: usize| e.get(k).and_then(|v| v.as_i64());
        let (Some(id), Some(m), Some(i)) = (v(0), v(1), v(2)) else {
            return Err("self-description: bad sample entry".into());
        };
        let (m, i) = (m as u32, i as i32);
        let vt = vtypes.get(&m).copied().unwrap_or(ValueType::F64);
        d.samples
            .entry(key_of(layout, id as u64))
            .or_insert((m, i, vt));
    }
    // A recording's TSC rate (and TSC 0's date), unless --tsc-hz says
    // otherwise: the cycles then read back on the recording's time axis.
    if let TimeBase::Cycles { hz, anchor } = &mut header.time_base {
        if hz.is_none() {
            if let Some(h) = j.get("tsc_hz").and_then(|v| v.as_f64()) {
                *hz = Some(h);
                if anchor.is_none() {
                    *anchor = j
                        .get("tsc_anchor")
                        .and_then(|v| v.as_i64())
                        .map(crate::model::Timestamp);
                }
            }
        }
    }
    if d.tsc_is_time {
        if let Some(tb) = j.get("tb") {
            header.time_base = codec::time_base_from_json(tb)?;
        }
        header.extras.remove(crate::model::keys::RAW_CLOCK);
        header.system.retain(|(k, _)| k != "time");
    }
    if let Some(src) = j.get("source").and_then(|v| v.as_str()) {
        header.system.push((
            "written from".into(),
            format!("a {src} stream by polytrace"),
        ));
    }
    Ok(Some(d))
}

/// An arg (A: u64, M3: f64) as a value of `t`'s kind.
fn arg_as(v: &Value, t: &FieldType) -> Value {
    // A2 stores numbers as u64: floats and signed values as two's complement.
    let (u, f) = match *v {
        Value::U64(b) => (b, b as i64 as f64),
        Value::F64(x) => (x as u64, x),
        _ => return v.clone(),
    };
    let i = match *v {
        Value::U64(b) => b as i64,
        _ => f as i64,
    };
    match t {
        FieldType::Int(_) => Value::I64(i),
        FieldType::Uint(_) => Value::U64(u),
        FieldType::Float(4) => Value::F32(f as f32),
        FieldType::Float(_) => Value::F64(f),
        FieldType::Enum { .. } => Value::Enum(i),
        _ => v.clone(),
    }
}

/// A string arg: the text at the offset the arg holds (the writer's
/// `NO_STRING`, or an offset outside the table, reads as "").
fn string_arg(snap: &Snapshot<'_>, v: &Value) -> Value {
    let off = match *v {
        Value::U64(b) => b,
        Value::F64(x) => x as u64,
        _ => return v.clone(),
    };
    let text = usize::try_from(off)
        .ok()
        .and_then(|o| snap.cstr(o))
        .unwrap_or_default();
    Value::Str(String::from_utf8_lossy(text).into_owned())
}

fn metric_kind(vt: ValueType) -> FieldType {
    match vt {
        ValueType::I32 | ValueType::I64 => FieldType::Int(8),
        ValueType::U32 | ValueType::U64 => FieldType::Uint(8),
        ValueType::F32 => FieldType::Float(4),
        _ => FieldType::Float(8),
    }
}

pub struct TimelineReader {
    path: PathBuf,
    /// The snapshot, memory-mapped where that is safe (`input::map`).
    data: Bytes,
    layout: Layout,
    n: usize,
    strings_start: usize,
    strings_end: usize,
    a: Option<AHeader>,
    m: Option<MHeader>,
    header: Header,
    order: Vec<u32>,
    pos: usize,
    types: HashMap<(u64, u64), u32>,
    pending: VecDeque<Item>,
    diags: Vec<Diagnostic>,
    skipped: u64,
    salvage: bool,
    hz: Option<f64>,
    anchor: Option<Timestamp>,
    desc: Option<Desc>,
    /// Native type ids of sample messages: (metric, instance, value type).
    sample_ids: HashMap<u32, (u32, i32, ValueType)>,
    restored: HashMap<u32, Arc<EventType>>,
    next_id: u32,
    /// A sample being gathered from consecutive messages with one tsc.
    acc: Option<Sample>,
}

/// Cycles to model time: `anchor + tsc / hz` (nanoseconds), or the raw
/// cycle count as nanoseconds when no frequency is given. Integer
/// arithmetic, so a 64-bit count keeps every bit (an f64 would not past
/// 2^53); a fractional rate falls back to doubles.
pub fn tsc_to_time(tsc: u64, hz: Option<f64>, anchor: Option<Timestamp>) -> Timestamp {
    let ns: i128 = match hz {
        Some(hz) if hz > 0.0 && hz.fract() == 0.0 && hz < u64::MAX as f64 => {
            tsc as i128 * 1_000_000_000 / hz as i128
        }
        Some(hz) if hz > 0.0 && hz.is_finite() => {
            let f = tsc as f64 * 1e9 / hz;
            if f.is_finite() {
                f as i128
            } else {
                0
            }
        }
        _ => tsc as i128,
    };
    let t = ns + anchor.map_or(0, |a| a.0) as i128;
    Timestamp(t.clamp(i64::MIN as i128, i64::MAX as i128) as i64)
}

/// The same for an M3 tsc, stored as a double.
fn tsc_f_to_time(tsc: f64, hz: Option<f64>, anchor: Option<Timestamp>) -> Timestamp {
    if (0.0..18446744073709551616.0).contains(&tsc) && tsc.fract() == 0.0 {
        return tsc_to_time(tsc as u64, hz, anchor);
    }
    let ns = match hz {
        Some(hz) if hz > 0.0 => tsc * 1e9 / hz,
        _ => tsc,
    };
    let ns = if ns.is_finite() { ns as i64 } else { 0 };
    Timestamp(ns.saturating_add(anchor.map_or(0, |a| a.0)))
}

impl TimelineReader {
    pub fn from_bytes(
        path: &Path,
        data: impl Into<Bytes>,
        opts: &ReadOptions,
    ) -> Result<TimelineReader> {
        let data: Bytes = data.into();
        let mut diags = Vec::new();
        let (layout, n, ss, se, a, m, order) = {
            let s = Snapshot::parse(path, &data, &mut diags)?;
            (
                s.layout,
                s.n,
                s.strings_start,
                s.strings_end,
                s.a,
                s.m,
                s.order(),
            )
        };
        let mut header = Header::new(FormatId::Timeline, layout.name());
        header.time_base = TimeBase::Cycles {
            hz: opts.tsc_hz,
            anchor: opts.tsc_anchor,
        };
        header.system.push((
            "time".into(),
            "entries carry TSC cycles only; --tsc-hz and --tsc-anchor place them on the epoch"
                .into(),
        ));
        let x = &mut header.extras;
        // Every entry's raw clock is its TSC (M3: the double as a count).
        x.set(
            crate::model::keys::RAW_CLOCK,
            ExtraValue::Str(crate::model::keys::CLOCK_TSC.into()),
        );
        x.set(keys::LAYOUT, ExtraValue::Str(layout.name().into()));
        x.set(keys::ENTRIES, ExtraValue::U64(n as u64));
        x.set(keys::STRINGS_BYTES, ExtraValue::U64((se - ss) as u64));
        let table = &data[ss..se];
        let used = table.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
        x.set(keys::STRINGS, ExtraValue::Bytes(table[..used].to_vec()));
        if let Some(h) = a {
            x.set(keys::PRIORITY_MASK, ExtraValue::U64(h.priority_mask));
            x.set(keys::NEXT, ExtraValue::U64(h.next));
            x.set(keys::LAST, ExtraValue::U64(h.last));
            x.set(keys::MAGIC32, ExtraValue::U64(h.magic32 as u64));
        }
        if let Some(h) = m {
            x.set(keys::MINOR, ExtraValue::U64(h.minor as u64));
            if layout == Layout::M2 {
                x.set(keys::PRIORITY_MASK, ExtraValue::U64(h.priority_mask as u64));
                diags.push(Diagnostic::warning(
                    Position::new(path),
                    "M2 file: args are unreliable (the 95872b165 logger stores arg0 = 0, loses the 4th value, shifts the 5th/6th into arg3/arg4 and leaves garbage in arg5); events carry timeline.args_unreliable",
                ));
            }
            // The head is not stored in M files: inferred from timestamps.
            let s = Snapshot {
                data: &data,
                layout,
                n,
                strings_start: ss,
                strings_end: se,
                a,
                m,
            };
            if let Some(h) = s.m_newest() {
                x.set(keys::NEXT, ExtraValue::U64(((h + 1) % n.max(1)) as u64));
            }
        }
        let mut pending = VecDeque::new();
        let desc = match read_desc(layout, &data[ss..se], &mut header, &mut pending) {
            Ok(d) => d,
            Err(m) => {
                diags.push(Diagnostic::warning(
                    Position::new(path),
                    format!("{m}; read as a plain timeline"),
                ));
                pending.clear();
                None
            }
        };
        let next_id = desc
            .as_ref()
            .and_then(|d| d.types.values().map(|t| t.id).max())
            .map_or(0, |m| m.saturating_add(1));
        // --tsc-hz, else the rate the file records (self-description).
        let (hz, anchor) = match header.time_base {
            TimeBase::Cycles { hz, anchor } => (hz, anchor),
            _ => (opts.tsc_hz, opts.tsc_anchor),
        };
        Ok(TimelineReader {
            path: path.to_path_buf(),
            data,
            layout,
            n,
            strings_start: ss,
            strings_end: se,
            a,
            m,
            header,
            order,
            pos: 0,
            types: HashMap::new(),
            pending,
            diags,
            skipped: 0,
            salvage: opts.salvage,
            hz,
            anchor,
            desc,
            sample_ids: HashMap::new(),
            restored: HashMap::new(),
            next_id,
            acc: None,
        })
    }

    /// A type id for a new message key: the source's type or a sample
    /// message from the self-description, else a fresh id. Returns (id,
    /// restored type, arg count) where known.
    fn described(&mut self, key: (u64, u64)) -> Option<(u32, Option<EventType>, usize)> {
        let d = self.desc.as_ref()?;
        if let Some(t) = d.types.get(&key) {
            let t = t.clone();
            self.types.insert(key, t.id);
            self.restored.insert(t.id, t.clone());
            return Some((t.id, Some((*t).clone()), t.fields.len()));
        }
        let s = *d.samples.get(&key)?;
        let id = self.fresh_id();
        self.types.insert(key, id);
        self.sample_ids.insert(id, s);
        Some((id, None, 1))
    }

    /// `described` for a new key; for a known one, its restored arity.
    fn described_or_known(
        &mut self,
        key: (u64, u64),
        known: Option<u32>,
    ) -> Option<(u32, Option<EventType>, usize)> {
        match known {
            None => self.described(key),
            Some(id) => self
                .restored
                .get(&id)
                .map(|t| (id, None, t.fields.len()))
                .or_else(|| self.sample_ids.contains_key(&id).then_some((id, None, 1))),
        }
    }

    fn fresh_id(&mut self) -> u32 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// The event as the source had it (self-description), or a value of a
    /// sample being gathered.
    fn restore(&mut self, mut ev: Event) {
        let Some(d) = &self.desc else {
            self.pending.push_back(Item::Event(ev));
            return;
        };
        let tsc = ev.raw_clock.unwrap_or(0);
        if d.tsc_is_time {
            ev.time = Timestamp(tsc.min(i64::MAX as u64) as i64);
            ev.raw_clock = None;
        }
        if let Some(&(m, inst, vt)) = self.sample_ids.get(&ev.type_id) {
            let v = ev
                .fields
                .first()
                .map_or(Value::U64(0), |v| arg_as(v, &metric_kind(vt)));
            if self.acc.as_ref().is_some_and(|s| s.time != ev.time) {
                self.flush_sample();
            }
            let s = self.acc.get_or_insert_with(|| Sample {
                time: ev.time,
                raw_clock: ev.raw_clock,
                metrics: Vec::new(),
                extras: Extras::default(),
            });
            match s.metrics.last_mut() {
                Some(MetricValues {
                    metric,
                    values: Ok(vals),
                }) if *metric == m => vals.push((inst, v)),
                _ => s.metrics.push(MetricValues {
                    metric: m,
                    values: Ok(vec![(inst, v)]),
                }),
            }
            return;
        }
        self.flush_sample();
        if let Some(t) = self.restored.get(&ev.type_id) {
            let snap = self.snap();
            ev.fields = ev
                .fields
                .iter()
                .zip(&t.fields)
                .map(|(v, f)| match f.ty {
                    FieldType::String => string_arg(&snap, v),
                    _ => arg_as(v, &f.ty),
                })
                .collect();
        }
        self.pending.push_back(Item::Event(ev));
    }

    fn flush_sample(&mut self) {
        if let Some(s) = self.acc.take() {
            self.pending.push_back(Item::Sample(s));
        }
    }

    fn snap(&self) -> Snapshot<'_> {
        Snapshot {
            data: &self.data,
            layout: self.layout,
            n: self.n,
            strings_start: self.strings_start,
            strings_end: self.strings_end,
            a: self.a,
            m: self.m,
        }
    }

    fn bad(&self, slot: usize, field_off: u64, msg: String) -> Error {
        Error::format(
            Position::at(
                &self.path,
                self.snap().entry_offset(slot) + field_off,
                Some(slot as u64),
            ),
            msg,
        )
    }

    /// Decode one slot into (maybe a new type, the event).
    fn decode(&mut self, slot: usize) -> Result<(Option<EventType>, Event)> {
        match self.layout {
            Layout::A2 => self.decode_a(slot),
            _ => self.decode_m(slot),
        }
    }

    fn decode_a(&mut self, slot: usize) -> Result<(Option<EventType>, Event)> {
        let snap = self.snap();
        let e = snap.entry(slot);
        let tsc = u64_at(e, 0);
        let ip = u64_at(e, 8);
        let aux = u32_at(e, 16);
        let reserved = u32_at(e, 20);
        let msg_id = u64_at(e, 24);
        let args: Vec<u64> = (0..4).map(|k| u64_at(e, 32 + 8 * k)).collect();
        // Decoded exactly as Snabb's dumper does (spec 3.4).
        let coff = (msg_id >> 40) & 0xffff;
        let moff = (msg_id >> 16) & 0xffff;
        let key = ((coff << 16) | moff, msg_id & 0xff);
        let known = self.types.get(&key).copied();
        let described = self.described_or_known(key, known);
        let fresh = (known.is_none() && described.is_none()).then(|| self.fresh_id());
        let snap = self.snap();
        let tlen = snap.strings().len();
        let cat = snap.cstr(coff as usize).ok_or_else(|| {
            self.bad(
                slot,
                24,
                format!(
                    "category string offset {coff} is outside the string table of {tlen} bytes"
                ),
            )
        })?;
        let fmt = snap.cstr(moff as usize).ok_or_else(|| {
            self.bad(
                slot,
                24,
                format!("message string offset {moff} is outside the string table of {tlen} bytes"),
            )
        })?;
        let mut newtype = None;
        let nph = placeholders(fmt);
        let mut nfields = nph.len().min(4);
        if let Some((_, _, n)) = described {
            nfields = n.min(4);
        }
        let type_id = match (known, described, fresh) {
            (_, Some((id, t, _)), _) => {
                newtype = t;
                id
            }
            (Some(id), None, _) => id,
            (None, None, fresh) => {
                let id = fresh.unwrap_or(u32::MAX);
                let fmt_s = String::from_utf8_lossy(fmt).into_owned();
                let first = fmt_s.lines().next().unwrap_or("").to_string();
                let fields = nph
                    .iter()
                    .take(4)
                    .map(|&(a, b)| {
                        Field::new(&String::from_utf8_lossy(&fmt[a + 1..b]), FieldType::Uint(8))
                    })
                    .collect();
                let mut t = EventType::new(
                    id,
                    &String::from_utf8_lossy(cat),
                    if first.is_empty() { "(empty)" } else { &first },
                    fields,
                );
                t.format = Some(fmt_s);
                t.priority = a_priority(msg_id).map(|p| PRIORITIES[p].to_string());
                t.extras.set(keys::CAT_OFF, ExtraValue::U64(coff));
                t.extras.set(keys::MSG_OFF, ExtraValue::U64(moff));
                if nph.len() > 4 {
                    t.extras
                        .set(keys::PLACEHOLDERS, ExtraValue::U64(nph.len() as u64));
                }
                self.types.insert(key, id);
                newtype = Some(t);
                id
            }
        };
        let mut x = Extras::default();
        x.set(keys::MSG_ID, ExtraValue::U64(msg_id));
        x.set(keys::SLOT, ExtraValue::U64(slot as u64));
        x.set(keys::IP, ExtraValue::U64(ip));
        x.set(keys::AUX, ExtraValue::U64(aux as u64));
        x.set(keys::CORE, ExtraValue::U64((aux & 0xff) as u64));
        x.set(keys::NUMA, ExtraValue::U64(((aux >> 12) & 0xf) as u64));
        if reserved != 0 {
            x.set(keys::RESERVED, ExtraValue::U64(reserved as u64));
        }
        if args[nfields..].iter().any(|&v| v != 0) {
            x.set(
                keys::ARGS,
                ExtraValue::List(args.iter().map(|&v| ExtraValue::U64(v)).collect()),
            );
        }
        let ev = Event {
            time: tsc_to_time(tsc, self.hz, self.anchor),
            raw_clock: Some(tsc),
            type_id,
            cpu: Some(aux & 0xfff),
            stream: None,
            fields: args[..nfields].iter().map(|&v| Value::U64(v)).collect(),
            extras: x,
        };
        Ok((newtype, ev))
    }

    fn decode_m(&mut self, slot: usize) -> Result<(Option<EventType>, Event)> {
        let m3 = self.layout == Layout::M3;
        let snap = self.snap();
        let e = snap.entry(slot);
        let tsc_bits = u64_at(e, 0);
        let msgid = u16_at(e, 8);
        let cn = u16_at(e, 10);
        let reserved = u32_at(e, 12);
        let raw: Vec<u64> = (0..6).map(|k| u64_at(e, 16 + 8 * k)).collect();
        let mut newtype = None;
        let key = (msgid as u64, 0);
        let known = self.types.get(&key).copied();
        let described = self.described_or_known(key, known);
        let fresh = (known.is_none() && described.is_none()).then(|| self.fresh_id());
        let snap = self.snap();
        let (type_id, nfields) = match (known, described, fresh) {
            (_, Some((id, t, n)), _) => {
                newtype = t;
                (id, n.min(6))
            }
            (Some(id), None, _) => (id, self.type_arity(msgid)?),
            (None, None, fresh) => {
                let id = fresh.unwrap_or(u32::MAX);
                let t = if msgid == M_UNKNOWN_MSGID {
                    let mut t = EventType::new(id, "?", "unknown", vec![]);
                    t.description =
                        Some("msgid 0xFFFF: the string table was full when it was defined".into());
                    t
                } else {
                    let off = msgid as usize * 16;
                    let s = snap.cstr(off).ok_or_else(|| {
                        self.bad(
                            slot,
                            8,
                            format!(
                                "msgid {msgid} (string offset {off}) is outside the string table of {} bytes",
                                snap.strings().len()
                            ),
                        )
                    })?;
                    let sp = parse_mspec(s);
                    let ty = if m3 {
                        FieldType::Float(8)
                    } else {
                        FieldType::Uint(8)
                    };
                    let fields = sp
                        .args
                        .iter()
                        .take(6)
                        .map(|a| Field::new(a, ty.clone()))
                        .collect();
                    let mut t = EventType::new(id, &sp.category, &sp.event, fields);
                    let mut f = sp.event.clone();
                    for a in sp.args.iter().take(6) {
                        f.push_str(" $");
                        f.push_str(a);
                    }
                    t.format = Some(f);
                    if !sp.description.is_empty() {
                        t.description = Some(sp.description.clone());
                    }
                    let spec = String::from_utf8_lossy(s).into_owned();
                    if let Some(p) = spec.split_once('|').map(|(p, _)| p.to_string()) {
                        t.priority = Some(p);
                    }
                    t.extras.set(keys::SPEC, ExtraValue::Str(spec));
                    if let Some(l) = sp.level {
                        t.extras.set(keys::LEVEL, ExtraValue::U64(l as u64));
                    }
                    if let Some(r) = sp.rate {
                        t.extras.set(keys::RATE, ExtraValue::U64(r as u64));
                    }
                    if !sp.attrs.is_empty() {
                        t.extras.set(keys::ATTRS, ExtraValue::Str(sp.attrs.clone()));
                    }
                    t
                };
                let mut t = t;
                t.extras.set(keys::MSG_ID, ExtraValue::U64(msgid as u64));
                self.types.insert((msgid as u64, 0), id);
                let nf = t.fields.len();
                newtype = Some(t);
                (id, nf)
            }
        };
        let tsc_f = if m3 {
            f64::from_bits(tsc_bits)
        } else {
            tsc_bits as f64
        };
        let raw_clock = if m3 {
            (0.0..1.8e19).contains(&tsc_f).then_some(tsc_f as u64)
        } else {
            Some(tsc_bits)
        };
        let mut x = Extras::default();
        x.set(keys::MSG_ID, ExtraValue::U64(msgid as u64));
        x.set(keys::SLOT, ExtraValue::U64(slot as u64));
        x.set(keys::CORE_NUMA, ExtraValue::U64(cn as u64));
        x.set(keys::CORE, ExtraValue::U64((cn & 0xff) as u64));
        x.set(keys::NUMA, ExtraValue::U64(((cn >> 12) & 0xf) as u64));
        if reserved != 0 {
            x.set(keys::RESERVED, ExtraValue::U64(reserved as u64));
        }
        if m3 && raw_clock.is_none_or(|c| c as f64 != tsc_f) {
            x.set(keys::TSC_BITS, ExtraValue::U64(tsc_bits));
        }
        if !m3 {
            x.set(keys::ARGS_UNRELIABLE, ExtraValue::Bool(true));
        }
        let val = |b: u64| {
            if m3 {
                Value::F64(f64::from_bits(b))
            } else {
                Value::U64(b)
            }
        };
        if raw[nfields..].iter().any(|&v| v != 0) {
            x.set(
                keys::ARGS,
                ExtraValue::List(
                    raw.iter()
                        .map(|&b| {
                            if m3 {
                                ExtraValue::F64(f64::from_bits(b))
                            } else {
                                ExtraValue::U64(b)
                            }
                        })
                        .collect(),
                ),
            );
        }
        let ev = Event {
            time: tsc_f_to_time(tsc_f, self.hz, self.anchor),
            raw_clock,
            type_id,
            cpu: Some((cn & 0xff) as u32),
            stream: None,
            fields: raw[..nfields].iter().map(|&b| val(b)).collect(),
            extras: x,
        };
        Ok((newtype, ev))
    }

    fn type_arity(&self, msgid: u16) -> Result<usize> {
        if msgid == M_UNKNOWN_MSGID {
            return Ok(0);
        }
        let snap = self.snap();
        Ok(snap
            .cstr(msgid as usize * 16)
            .map_or(0, |s| parse_mspec(s).args.len().min(6)))
    }
}

impl TraceReader for TimelineReader {
    fn header(&self) -> &Header {
        &self.header
    }

    fn next_item(&mut self) -> Result<Option<Item>> {
        loop {
            if let Some(it) = self.pending.pop_front() {
                return Ok(Some(it));
            }
            let Some(&slot) = self.order.get(self.pos) else {
                if self.acc.is_some() {
                    self.flush_sample();
                    continue;
                }
                return Ok(None);
            };
            self.pos += 1;
            match self.decode(slot as usize) {
                Ok((t, ev)) => {
                    if let Some(t) = t {
                        self.flush_sample();
                        self.pending.push_back(Item::EventType(Arc::new(t)));
                    }
                    self.restore(ev);
                }
                Err(Error::Format { pos, msg }) if self.salvage => {
                    self.skipped += 1;
                    if self.diags.len() < MAX_DIAGS {
                        self.diags
                            .push(Diagnostic::salvaged(pos, format!("{msg}; entry skipped")));
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn diagnostics(&self) -> &[Diagnostic] {
        &self.diags
    }
}
