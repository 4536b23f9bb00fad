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
    Event, EventType, ExtraValue, Extras, Field, FieldType, FormatId, Header, Item, TimeBase,
    Timestamp, TraceReader, Value,
};
use crate::options::ReadOptions;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Most per-entry diagnostics kept (the rest are counted in the last one).
const MAX_DIAGS: usize = 20;

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
}

/// Cycles to model time: `anchor + tsc / hz` (nanoseconds), or the raw
/// cycle count as nanoseconds when no frequency is given.
pub fn tsc_to_time(tsc: f64, hz: Option<f64>, anchor: Option<Timestamp>) -> Timestamp {
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
            pending: VecDeque::new(),
            diags,
            skipped: 0,
            salvage: opts.salvage,
            hz: opts.tsc_hz,
            anchor: opts.tsc_anchor,
        })
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
        let key = ((coff << 16) | moff, msg_id & 0xff);
        let mut newtype = None;
        let nph = placeholders(fmt);
        let nfields = nph.len().min(4);
        let type_id = match self.types.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.types.len() as u32;
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
            time: tsc_to_time(tsc as f64, self.hz, self.anchor),
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
        let (type_id, nfields) = match self.types.get(&(msgid as u64, 0)) {
            Some(&id) => (id, self.type_arity(msgid)?),
            None => {
                let id = self.types.len() as u32;
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
            time: tsc_to_time(tsc_f, self.hz, self.anchor),
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
                return Ok(None);
            };
            self.pos += 1;
            match self.decode(slot as usize) {
                Ok((t, ev)) => {
                    if let Some(t) = t {
                        self.pending.push_back(Item::EventType(Arc::new(t)));
                    }
                    self.pending.push_back(Item::Event(ev));
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
