//! Writing the `polytrace` self-description of a non-LTT stream (see
//! `super::super::selfdesc` for the records and `docs/ltt.md`).
//!
//! Definitions without a time (event types, metrics, help, labels) wait in
//! a queue and are written right before the next data item, in its
//! tracefile and at its time, so a reader meets them in stream order. Event
//! types and metrics are repeated in every other tracefile before their
//! first use there (a reader dedupes them by serial), so a merge by time
//! can never hand out an event before its definition.

use super::*;
use crate::model::codec;
use crate::model::IntHasher;
use crate::model::{Event, IndomUpdate, Item, Sample};
use selfdesc::{Defaults, EV_DATA, EV_DEFINE, EV_EVENT, EV_HEADER, EV_SAMPLE};
use serde_json::{Map, Value as J};
use std::collections::HashSet;
use std::hash::BuildHasherDefault;
use std::sync::Arc;

#[derive(Clone)]
pub(super) enum Def {
    Type(Arc<EventType>),
    Metric(Arc<MetricDesc>),
}

enum Queued {
    Def(Key, u64, Def),
    /// A help text or label set (its name in the loss report): its record
    /// text is in `Describe::qtext`, up to this end offset.
    Text(&'static str, usize),
}

pub(super) struct Describe {
    /// LTT ids of the facility's events.
    base: u16,
    queue: Vec<Queued>,
    /// Record texts of the queued help texts and label sets, one after
    /// another (written when queued, so the items can go back to the reader).
    qtext: String,
    /// Text of the record being written (kept for its allocation).
    jtext: String,
    /// Instance name of the membership event being written (kept too).
    name: String,
    next_serial: u64,
    /// Latest definition of each key, with its serial.
    latest: HashMap<Key, (u64, Def)>,
    /// (tracefile, serial) already written.
    in_file: HashSet<(FileKey, u64)>,
    defaults: Option<Defaults>,
    /// Extras of the last event per (tracefile, LTT id).
    last_x: HashMap<(FileKey, u16), crate::model::Extras>,
    scratch: Vec<u8>,
    /// Per metric, what its sample values need (see `Slot`).
    slots: HashMap<u32, Slot, BuildHasherDefault<IntHasher>>,
    /// A sample's record text, its values' payloads one after another, and
    /// per value its LTT id and end offset in `vals`.
    text: String,
    vals: Vec<u8>,
    spans: Vec<(u16, usize)>,
}

fn set(j: &mut Map<String, J>, k: &str, v: J) {
    j.insert(k.to_string(), v);
}

/// Largest text per record event in a block of `b` bytes: the event must
/// fit beside block_start, block_end and the trailer (62 bytes), with its
/// `more` byte and NUL.
fn chunk_max(b: u32) -> usize {
    (b as usize).saturating_sub(64)
}

impl LttWriter {
    pub(super) fn start_describe(&mut self) -> Result<()> {
        if chunk_max(self.cfg.block_size) < 4 {
            return Err(Error::Usage(format!(
                "--ltt-block-size {}: too small for the self-description records (at least 68 bytes)",
                self.cfg.block_size
            )));
        }
        let base = self.next_base;
        self.add_fac(selfdesc::facility(), base)?;
        self.copied
            .push(("polytrace.xml".into(), selfdesc::XML.as_bytes().to_vec()));
        self.sd = Some(Describe {
            base: base as u16,
            queue: Vec::new(),
            qtext: String::new(),
            jtext: String::new(),
            name: String::new(),
            next_serial: 0,
            latest: HashMap::new(),
            in_file: HashSet::new(),
            defaults: None,
            last_x: HashMap::new(),
            scratch: Vec::new(),
            slots: HashMap::default(),
            text: String::new(),
            vals: Vec::new(),
            spans: Vec::new(),
        });
        Ok(())
    }

    /// A (re-)definition: queued until the next data item.
    pub(super) fn describe_def(&mut self, key: Key, def: Def) {
        let Some(sd) = &mut self.sd else { return };
        let n = sd.next_serial;
        sd.next_serial += 1;
        if let Key::Metric(m) = key {
            sd.slots.remove(&m);
        }
        sd.latest.insert(key, (n, def.clone()));
        sd.queue.push(Queued::Def(key, n, def));
    }

    pub(super) fn describe_item(&mut self, item: &Item) -> Result<()> {
        match item {
            Item::Event(e) => self.describe_event(e),
            Item::EventRun(r) => r.each_item(|it| self.describe_item(it)),
            Item::Sample(s) => self.describe_sample(s),
            Item::Indom(u) => self.describe_indom(u),
            Item::Help(_) | Item::Labels(_) => {
                if let Some(sd) = &mut self.sd {
                    match item {
                        Item::Help(h) => json::help(&mut sd.qtext, h),
                        Item::Labels(l) => json::labels(&mut sd.qtext, l),
                        _ => {}
                    }
                    sd.queue.push(Queued::Text(kind_name(item), sd.qtext.len()));
                }
                Ok(())
            }
            Item::Mark(_) | Item::Annotation(_) => {
                let t = item.time().map_or(0, |t| t.0);
                if !in_range(t) {
                    self.loss
                        .drop_item(kind_name(item), "time outside the LTT range (1970..2106)");
                    return Ok(());
                }
                let fkey = FileKey::Cpu(0);
                self.seal()?;
                self.flush_queue(&fkey, t as u64)?;
                let c = self.counter_for(&fkey, t as u64);
                self.record(&fkey, EV_DATA, c, &codec::item_to_json(item).to_string())?;
                self.loss.wrote(kind_name(item), 1);
                Ok(())
            }
            Item::EventType(_) | Item::Metric(_) => Ok(()),
        }
    }

    /// Write `text` as one record (several events when it is longer than
    /// a block holds) of kind `kind` into `fkey` at `counter`.
    fn record(&mut self, fkey: &FileKey, kind: u16, counter: u64, text: &str) -> Result<()> {
        let Some(sd) = &self.sd else { return Ok(()) };
        let id = sd.base + kind;
        let max = chunk_max(self.cfg.block_size);
        // The record's events are built in a buffer kept for it.
        let saved = std::mem::replace(&mut self.payload, std::mem::take(&mut self.rec_payload));
        let mut rest = text;
        loop {
            let mut cut = rest.len().min(max);
            while !rest.is_char_boundary(cut) {
                cut -= 1;
            }
            let (part, tail) = rest.split_at(cut);
            self.payload.clear();
            self.payload.push(u8::from(!tail.is_empty()));
            self.payload.extend_from_slice(part.as_bytes());
            self.payload.push(0);
            self.put(fkey, id, counter)?;
            self.loss.wrote("self-description records", 1);
            if tail.is_empty() {
                break;
            }
            rest = tail;
        }
        self.rec_payload = std::mem::replace(&mut self.payload, saved);
        Ok(())
    }

    /// Write the queued definitions into `fkey` before a data item at `time`.
    fn flush_queue(&mut self, fkey: &FileKey, time: u64) -> Result<()> {
        let Some(sd) = &mut self.sd else {
            return Ok(());
        };
        if sd.queue.is_empty() {
            return Ok(());
        }
        // Both buffers go back emptied, keeping their allocations.
        let mut queue = std::mem::take(&mut sd.queue);
        let qtext = std::mem::take(&mut sd.qtext);
        let c = self.counter_for(fkey, time);
        let mut from = 0;
        let mut res = Ok(());
        for q in queue.drain(..) {
            res = match q {
                Queued::Def(key, n, def) => self.write_def(fkey, c, key, n, &def),
                Queued::Text(what, end) => {
                    let r = self.record(fkey, EV_DEFINE, c, &qtext[from..end]);
                    from = end;
                    self.loss.wrote(what, 1);
                    r
                }
            };
            if res.is_err() {
                break;
            }
        }
        if let Some(sd) = &mut self.sd {
            queue.clear();
            sd.queue = queue;
            sd.qtext = qtext;
            sd.qtext.clear();
        }
        res
    }

    fn write_def(&mut self, fkey: &FileKey, c: u64, key: Key, n: u64, def: &Def) -> Result<()> {
        // A definition whose type could not be given an LTT id (dropped).
        let Some(Target::Event { id, .. }) = self.map.get(&key) else {
            return Ok(());
        };
        let id = *id;
        let Some(sd) = &mut self.sd else {
            return Ok(());
        };
        let mut text = std::mem::take(&mut sd.jtext);
        text.clear();
        match def {
            Def::Type(t) => {
                let mut j = codec::item_to_json(&Item::EventType(t.clone()));
                if let J::Object(m) = &mut j {
                    set(m, "ltt", J::from(id));
                    set(m, "n", J::from(n));
                }
                text.push_str(&j.to_string());
            }
            Def::Metric(m) => json::metric(&mut text, m, id, n),
        }
        let r = self.record(fkey, EV_DEFINE, c, &text);
        if let Some(sd) = &mut self.sd {
            sd.jtext = text;
        }
        r?;
        if let Some(sd) = &mut self.sd {
            sd.in_file.insert((fkey.clone(), n));
        }
        Ok(())
    }

    /// The latest definition of `key` is in `fkey` (written again if not).
    fn ensure_def(&mut self, fkey: &FileKey, c: u64, key: Key) -> Result<()> {
        let Some(sd) = &self.sd else { return Ok(()) };
        let Some((n, def)) = sd.latest.get(&key).cloned() else {
            return Ok(());
        };
        if sd.in_file.contains(&(fkey.clone(), n)) {
            return Ok(());
        }
        self.write_def(fkey, c, key, n, &def)
    }

    fn describe_event(&mut self, e: &Event) -> Result<()> {
        self.seal()?;
        let key = Key::Type(e.type_id);
        let (id, ty) = match self.map.get(&key) {
            Some(Target::Event { id, ty, .. }) => (*id, ty.clone()),
            Some(_) => return Ok(()),
            None => {
                self.loss.drop_item("events", "event type never defined");
                return Ok(());
            }
        };
        let Some(sd) = &self.sd else { return Ok(()) };
        let model = match sd.latest.get(&key) {
            Some((_, Def::Type(t))) => t.clone(),
            _ => {
                self.loss.drop_item("events", "event type never defined");
                return Ok(());
            }
        };
        if !in_range(e.time.0) {
            self.loss
                .drop_item("events", "time outside the LTT range (1970..2106)");
            return Ok(());
        }
        let time = e.time.0 as u64;
        let fkey = match e.stream.as_deref().and_then(stream_key) {
            Some(k) => k,
            None => FileKey::Cpu(e.cpu.unwrap_or(0)),
        };
        // Field values the payload cannot carry exactly travel in the record.
        let mut payload = std::mem::take(&mut self.payload);
        payload.clear();
        // A merged stream's source also goes into the visible `source` field.
        let tag = self
            .tag_source
            .then(|| e.extras.str(crate::model::keys::SOURCE).unwrap_or(""));
        let exact = match encode_fields(ty.as_deref(), &e.fields, tag, self.bo, &mut payload) {
            Ok(()) => self.decodes_to(ty.as_deref(), &payload, &model, &e.fields),
            Err(_) => {
                payload.clear();
                let ph: Vec<Value> = model.fields.iter().map(|f| placeholder(&f.ty)).collect();
                if encode_fields(ty.as_deref(), &ph, tag, self.bo, &mut payload).is_err() {
                    self.payload = payload;
                    self.loss
                        .drop_item("events", "field values do not match the event type");
                    return Ok(());
                }
                false
            }
        };
        let exact = if self.fits(payload.len()) {
            exact
        } else {
            // Too large for one block: the values travel in the (chunked)
            // record, LTT readers see placeholders.
            payload.clear();
            let ph: Vec<Value> = model.fields.iter().map(|f| placeholder(&f.ty)).collect();
            if encode_fields(ty.as_deref(), &ph, tag, self.bo, &mut payload).is_err()
                || !self.fits(payload.len())
            {
                self.payload = payload;
                return Err(werr(
                    &self.target,
                    format!(
                        "event type {}.{} does not fit in a block of {} bytes",
                        model.category, model.name, self.cfg.block_size
                    ),
                ));
            }
            self.loss.degrade(
                "events",
                "payload larger than an LTT block: values kept in the polytrace record, placeholders in the event",
            );
            false
        };
        self.flush_queue(&fkey, time)?;
        let c = self.counter_for(&fkey, time);
        self.ensure_def(&fkey, c, key)?;
        let c = self.counter_for(&fkey, time);
        let file_cpu = match fkey {
            FileKey::Cpu(n) => Some(n),
            FileKey::Control(_) => None,
        };
        let rel = fkey.rel();
        let Some(sd) = &mut self.sd else {
            return Ok(());
        };
        let d = *sd.defaults.get_or_insert(Defaults {
            raw_counter: e.raw_clock == Some(c),
            cpu_file: e.cpu == file_cpu,
            stream_file: e.stream.as_deref() == Some(rel.as_str()),
        });
        let mut p = Map::new();
        if c != time {
            set(&mut p, "t", J::from(e.time.0));
        }
        let raw_default = d.raw_counter.then_some(c);
        if e.raw_clock != raw_default {
            set(&mut p, "raw", e.raw_clock.map_or(J::Null, J::from));
        }
        let cpu_default = if d.cpu_file { file_cpu } else { None };
        if e.cpu != cpu_default {
            set(&mut p, "cpu", e.cpu.map_or(J::Null, J::from));
        }
        let stream_default = d.stream_file.then_some(rel.as_str());
        if e.stream.as_deref() != stream_default {
            set(
                &mut p,
                "stream",
                e.stream.as_deref().map_or(J::Null, J::from),
            );
        }
        let last = sd.last_x.entry((fkey.clone(), id)).or_default();
        if *last != e.extras {
            let ch: Map<String, J> = e
                .extras
                .iter()
                .filter(|(k, v)| last.get(k) != Some(v))
                .map(|(k, v)| (k.to_string(), codec::extra_to_json(v)))
                .collect();
            let gone: Vec<J> = last
                .keys()
                .filter(|k| e.extras.get(k).is_none())
                .map(J::from)
                .collect();
            if !ch.is_empty() {
                set(&mut p, "x", J::Object(ch));
            }
            if !gone.is_empty() {
                set(&mut p, "x-", J::Array(gone));
            }
            *last = e.extras.clone();
        }
        if !exact {
            set(&mut p, "f", codec::values_to_json(&e.fields));
        }
        if !p.is_empty() {
            set(&mut p, "ltt", J::from(id));
            self.record(&fkey, EV_EVENT, c, &J::Object(p).to_string())?;
        }
        self.payload = payload;
        self.put(&fkey, id, c)?;
        self.loss.wrote("events", 1);
        Ok(())
    }

    /// True when `payload` decodes (and restores) to exactly `fields`.
    fn decodes_to(
        &mut self,
        ty: Option<&Ty>,
        payload: &[u8],
        model: &EventType,
        fields: &[Value],
    ) -> bool {
        let mut got = match ty {
            None => vec![],
            Some(t) => {
                let mut at = 0;
                match layout::decode(t, payload, &mut at, self.bo) {
                    Ok(Value::Struct(v)) if matches!(t, Ty::Struct(_)) => v,
                    Ok(v) => vec![v],
                    Err(_) => return false,
                }
            }
        };
        // The `source` field of a merged stream is not one of the model's.
        if self.tag_source && got.len() == fields.len() + 1 {
            got.pop();
        }
        got.len() == fields.len()
            && got
                .into_iter()
                .zip(&model.fields)
                .map(|(v, f)| selfdesc::restore(v, &f.ty))
                .zip(fields)
                .all(|(a, b)| codec::same_value(&a, b))
    }

    fn describe_sample(&mut self, s: &Sample) -> Result<()> {
        use std::collections::hash_map::Entry;
        use std::fmt::Write as _;
        self.seal()?;
        if !in_range(s.time.0) {
            self.loss
                .drop_item("samples", "time outside the LTT range (1970..2106)");
            return Ok(());
        }
        let time = s.time.0 as u64;
        let fkey = FileKey::Cpu(0);
        self.flush_queue(&fkey, time)?;
        let c0 = self.counter_for(&fkey, time);
        let Some(sd) = &mut self.sd else {
            return Ok(());
        };
        // Scratch space kept in the writer (this runs once per sample, its
        // loops once per value): taken out here, put back at the end.
        let mut text = std::mem::take(&mut sd.text);
        let mut vals = std::mem::take(&mut sd.vals);
        let mut spans = std::mem::take(&mut sd.spans);
        let mut slots = std::mem::take(&mut sd.slots);
        text.clear();
        vals.clear();
        spans.clear();
        // The record's text is written directly.
        text.push_str("{\"m\":[");
        let mut overrides = Map::new();
        let mut index = 0usize;
        // A merged stream's `source` field follows each value.
        let tag = self
            .tag_source
            .then(|| s.extras.str(crate::model::keys::SOURCE).unwrap_or(""));
        let tag_len = tag.map_or(0, |t| t.len() + 1);
        let (bo, block) = (self.bo, self.cfg.block_size as usize);
        for mv in &s.metrics {
            let slot = match slots.entry(mv.metric) {
                Entry::Occupied(o) => o.into_mut(),
                Entry::Vacant(e) => {
                    let key = Key::Metric(mv.metric);
                    let layout = match self.map.get(&key) {
                        Some(Target::Event {
                            id, ty: Some(t), ..
                        }) => match &**t {
                            Ty::Struct(f) if f.len() == 2 || (self.tag_source && f.len() == 3) => {
                                Some((*id, f[1].1.clone()))
                            }
                            _ => None,
                        },
                        _ => None,
                    };
                    let Some((id, vty)) = layout else {
                        self.loss.drop_item("sample values", "metric never defined");
                        continue;
                    };
                    let Some(vt) = self.metrics.get(&mv.metric).map(|m| m.vtype) else {
                        self.loss.drop_item("sample values", "metric never defined");
                        continue;
                    };
                    // Cached only once the definition is in this tracefile.
                    self.ensure_def(&fkey, c0, key)?;
                    e.insert(Slot {
                        id,
                        fast: Fast::of(vt, &vty),
                        vty,
                        vt,
                    })
                }
            };
            if !text.ends_with('[') {
                text.push(',');
            }
            match &mv.values {
                Err(code) => {
                    let _ = write!(text, "[{},null,{code}]", mv.metric);
                }
                Ok(vs) => {
                    // `[metric,count]`, without the formatting machinery.
                    let mut num = itoa::Buffer::new();
                    text.push('[');
                    text.push_str(num.format(mv.metric));
                    text.push(',');
                    text.push_str(num.format(vs.len()));
                    text.push(']');
                    for (inst, v) in vs {
                        let start = vals.len();
                        bo.put_uint(&mut vals, *inst as u32 as u64, 4);
                        // instance (4 bytes) + value + source
                        let ok = slot.fast.encode(v, bo, &mut vals)
                            && HDR + (vals.len() - start) + tag_len + 2 * FRAME + 4 <= block;
                        if !ok {
                            vals.truncate(start + 4);
                            if !self.general_value(slot, v, tag_len, &mut vals)? {
                                set(&mut overrides, &index.to_string(), codec::value_to_json(v));
                            }
                        }
                        if let Some(t) = tag {
                            put_str(&mut vals, t);
                        }
                        spans.push((slot.id, vals.len()));
                        index += 1;
                    }
                }
            }
        }
        text.push(']');
        let c = self.counter_for(&fkey, time);
        if c != time {
            let _ = write!(text, ",\"t\":{}", s.time.0);
        }
        if let Some(r) = s.raw_clock {
            let _ = write!(text, ",\"raw\":{r}");
        }
        if !s.extras.is_empty() {
            let _ = write!(text, ",\"x\":{}", codec::extras_to_json(&s.extras));
        }
        if !overrides.is_empty() {
            let _ = write!(text, ",\"v\":{}", J::Object(overrides));
        }
        text.push('}');
        self.record(&fkey, EV_SAMPLE, c, &text)?;
        self.put_all(&fkey, c, &vals, &spans)?;
        self.loss.wrote("samples", 1);
        if let Some(sd) = &mut self.sd {
            sd.text = text;
            sd.vals = vals;
            sd.spans = spans;
            sd.slots = slots;
        }
        Ok(())
    }

    /// Encode `v` by the general rule: as written when it comes back
    /// exactly and its event fits in a block (true), else the field's
    /// placeholder (false: the value travels in the record).
    fn general_value(
        &mut self,
        slot: &Slot,
        v: &Value,
        tag_len: usize,
        out: &mut Vec<u8>,
    ) -> Result<bool> {
        let wire = selfdesc::metric_wire(slot.vt, v);
        let (exact, fits) =
            self.metric_exact(&slot.vty, slot.vt, wire.as_ref().unwrap_or(v), v, tag_len);
        if !fits {
            self.loss.degrade(
                "sample values",
                "larger than an LTT block: kept in the polytrace record, empty in the metric event",
            );
        }
        if exact && fits {
            // The scratch buffer holds the value as encoded.
            if let Some(sd) = &self.sd {
                out.extend_from_slice(&sd.scratch);
            }
            return Ok(true);
        }
        let ph = placeholder(&selfdesc::metric_field(slot.vt));
        if layout::encode(&slot.vty, &ph, self.bo, out).is_err() {
            return Err(werr(
                &self.target,
                "internal: placeholder value not encodable",
            ));
        }
        Ok(false)
    }

    /// Does an event of `len` payload bytes fit in a block?
    fn fits(&self, len: usize) -> bool {
        HDR + len + 2 * FRAME + 4 <= self.cfg.block_size as usize
    }

    /// Does the wire value encode and come back as `orig`, and does its
    /// event fit in a block?
    fn metric_exact(
        &mut self,
        vty: &Ty,
        vt: ValueType,
        wire: &Value,
        orig: &Value,
        extra: usize,
    ) -> (bool, bool) {
        let bo = self.bo;
        let b = self.cfg.block_size as usize;
        let Some(sd) = &mut self.sd else {
            return (false, true);
        };
        let buf = &mut sd.scratch;
        buf.clear();
        if layout::encode(vty, wire, bo, buf).is_err() {
            return (false, true);
        }
        // instance (4 bytes) + value
        let fits = HDR + 4 + buf.len() + extra + 2 * FRAME + 4 <= b;
        (decodes_back(vty, vt, buf, orig, bo), fits)
    }

    fn describe_indom(&mut self, u: &IndomUpdate) -> Result<()> {
        let key = self.indom_type(u.id);
        self.seal()?;
        if !in_range(u.time.0) {
            self.loss.drop_item(
                "instance domain updates",
                "time outside the LTT range (1970..2106)",
            );
            return Ok(());
        }
        let Some(Target::Event { id, .. }) = self.map.get(&key) else {
            self.loss
                .drop_item("instance domain updates", "no event type for it");
            return Ok(());
        };
        let id = *id;
        let time = u.time.0 as u64;
        let fkey = FileKey::Cpu(0);
        self.flush_queue(&fkey, time)?;
        let c = self.counter_for(&fkey, time);
        // A name with a NUL would end early in an LTT string, one longer
        // than a block does not fit: all names go in the record then.
        let max = (self.cfg.block_size as usize).saturating_sub(62 + 4 + 1 + 1);
        let names = u
            .instances
            .iter()
            .any(|i| i.name.contains('\0') || i.name.len() > max);
        let Some(sd) = &mut self.sd else {
            return Ok(());
        };
        let mut text = std::mem::take(&mut sd.jtext);
        text.clear();
        json::indom_head(&mut text, u, id, names);
        let r = self.record(&fkey, EV_DEFINE, c, &text);
        if let Some(sd) = &mut self.sd {
            sd.jtext = text;
        }
        r?;
        // One set of fields, its name buffer reused for every instance (and
        // kept for the next update).
        let name = self
            .sd
            .as_mut()
            .map(|sd| std::mem::take(&mut sd.name))
            .unwrap_or_default();
        let mut f = [Value::I64(0), Value::U64(1), Value::Str(name)];
        for i in &u.instances {
            f[0] = Value::I64(i.id as i64);
            let Value::Str(name) = &mut f[2] else {
                continue;
            };
            name.clear();
            name.extend(i.name.split('\0'));
            if name.len() > max {
                let mut cut = max;
                while !name.is_char_boundary(cut) {
                    cut -= 1;
                }
                name.truncate(cut);
                self.loss.degrade(
                    "instance names",
                    "longer than an LTT block: kept in the polytrace record, cut in the indom event",
                );
            }
            self.write_event(key, c as i64, None, Some(0), &f, None)?;
        }
        if let (Some(sd), [_, _, Value::Str(name)]) = (&mut self.sd, f) {
            sd.name = name;
        }
        for r in &u.removed {
            let f = [
                Value::I64(*r as i64),
                Value::U64(0),
                Value::Str(String::new()),
            ];
            self.write_event(key, c as i64, None, Some(0), &f, None)?;
        }
        self.loss.wrote("instance domain updates", 1);
        Ok(())
    }

    /// Before the files are closed: the rest of the queue, and the header
    /// record in `control/polytrace`.
    pub(super) fn finish_describe(&mut self) -> Result<()> {
        if self.sd.is_none() {
            return Ok(());
        }
        let cpu0 = FileKey::Cpu(0);
        let last = self
            .files
            .get(&cpu0)
            .map_or(self.min_time.unwrap_or(0), |f| f.cur);
        self.flush_queue(&cpu0, last)?;
        let defaults = self
            .sd
            .as_ref()
            .and_then(|s| s.defaults)
            .unwrap_or_default();
        let j = serde_json::json!({
            "polytrace": selfdesc::VERSION,
            "header": codec::header_to_json(&self.header),
            "defaults": defaults.to_json(),
        });
        let key = FileKey::Control(selfdesc::CONTROL_FILE.into());
        let t = self.min_time.unwrap_or(0);
        self.record(&key, EV_HEADER, t, &j.to_string())
    }
}

/// What a sample's values of one metric need, kept per metric until the
/// metric is defined again.
struct Slot {
    /// LTT id of its `metric.*` events.
    id: u16,
    /// Layout of the value field.
    vty: Ty,
    vt: ValueType,
    fast: Fast,
}

/// Values whose exact return shows without a decode: a number of the
/// metric's own type that its field holds whole, a string without a NUL.
/// Anything else takes the general check (`metric_exact`).
#[derive(Clone, Copy)]
enum Fast {
    Int(u8),
    Uint(u8),
    F32,
    F64,
    Str,
    No,
}

impl Fast {
    fn of(vt: ValueType, vty: &Ty) -> Fast {
        match (vt, vty) {
            (ValueType::I32, Ty::Int(4)) => Fast::Int(4),
            (ValueType::I64, Ty::Int(8)) => Fast::Int(8),
            (ValueType::U32, Ty::Uint(4)) => Fast::Uint(4),
            (ValueType::U64, Ty::Uint(8)) => Fast::Uint(8),
            (ValueType::F32, Ty::Float(4)) => Fast::F32,
            (ValueType::F64, Ty::Float(8)) => Fast::F64,
            (ValueType::String, Ty::Str) => Fast::Str,
            _ => Fast::No,
        }
    }

    /// Append `v` as `layout::encode` would, if it comes back exactly.
    #[inline]
    fn encode(self, v: &Value, bo: Bo, out: &mut Vec<u8>) -> bool {
        match (self, v) {
            (Fast::Int(n), Value::I64(x)) if n == 8 || *x as i32 as i64 == *x => {
                bo.put_uint(out, *x as u64, n)
            }
            (Fast::Uint(n), Value::U64(x)) if n == 8 || *x <= u32::MAX as u64 => {
                bo.put_uint(out, *x, n)
            }
            (Fast::F32, Value::F32(x)) => bo.put_uint(out, x.to_bits() as u64, 4),
            (Fast::F64, Value::F64(x)) => bo.put_uint(out, x.to_bits(), 8),
            (Fast::Str, Value::Str(x)) if !x.as_bytes().contains(&0) => {
                out.extend_from_slice(x.as_bytes());
                out.push(0);
            }
            _ => return false,
        }
        true
    }
}

/// Does the encoded value `buf` decode whole, and restore to `orig`?
fn decodes_back(vty: &Ty, vt: ValueType, buf: &[u8], orig: &Value, bo: Bo) -> bool {
    let mut at = 0;
    match layout::decode(vty, buf, &mut at, bo) {
        Ok(got) if at == buf.len() => {
            selfdesc::metric_unwire(vt, got).is_ok_and(|b| codec::same_value(&b, orig))
        }
        _ => false,
    }
}

/// A string as `layout::encode` writes it: cut at a NUL, NUL-terminated.
fn put_str(out: &mut Vec<u8>, s: &str) {
    let b = s.as_bytes();
    out.extend_from_slice(&b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]);
    out.push(0);
}

fn in_range(t: i64) -> bool {
    t >= 0 && t / 1_000_000_000 <= u32::MAX as i64
}

fn kind_name(item: &Item) -> &'static str {
    match item {
        Item::Help(_) => "help texts",
        Item::Labels(_) => "label sets",
        Item::Mark(_) => "marks",
        Item::Annotation(_) => "annotations",
        _ => "items",
    }
}

/// A value of type `t` written where the real one travels in a record.
fn placeholder(t: &FieldType) -> Value {
    match t {
        FieldType::Int(_) => Value::I64(0),
        FieldType::Uint(_) => Value::U64(0),
        FieldType::Float(4) => Value::F32(0.0),
        FieldType::Float(_) => Value::F64(0.0),
        FieldType::String => Value::Str(String::new()),
        FieldType::Bytes => Value::Bytes(Vec::new()),
        FieldType::Enum { .. } => Value::Enum(0),
        // Bounded: an absurd array length fails to encode anyway.
        FieldType::Array { len, elem } => Value::List(
            (0..(*len).min(1 << 16))
                .map(|_| placeholder(elem))
                .collect(),
        ),
        FieldType::Sequence { .. } => Value::List(Vec::new()),
        FieldType::Struct(fs) => Value::Struct(fs.iter().map(|f| placeholder(&f.ty)).collect()),
        FieldType::Union(fs) => Value::Union(vec![
            Value::U64(0),
            fs.first().map_or(Value::U64(0), |f| placeholder(&f.ty)),
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast rule agrees with the general one (encode, decode, restore,
    /// compare) on edge values of every type it covers, and writes the
    /// same bytes; it takes every common value, so it is really used.
    #[test]
    fn fast_exactness_agrees_with_decoding() {
        let s = |x: &str| Value::Str(x.to_string());
        let values = [
            Value::I64(0),
            Value::I64(-1),
            Value::I64(i32::MIN as i64),
            Value::I64(i32::MAX as i64),
            Value::I64(i32::MIN as i64 - 1),
            Value::I64(i32::MAX as i64 + 1),
            Value::I64(i64::MIN),
            Value::I64(i64::MAX),
            Value::U64(0),
            Value::U64(u32::MAX as u64),
            Value::U64(u32::MAX as u64 + 1),
            Value::U64(u64::MAX),
            Value::F32(1.5),
            Value::F32(-0.0),
            Value::F32(f32::NAN),
            Value::F64(0.1),
            Value::F64(-0.0),
            Value::F64(f64::from_bits(0x7ff8_0000_0000_0001)),
            Value::Enum(3),
            s(""),
            s("cmd --flag é"),
            s("a\0b"),
            Value::Bytes(vec![0xff, 0xfe]),
        ];
        let types = [
            (ValueType::I32, Ty::Int(4)),
            (ValueType::U32, Ty::Uint(4)),
            (ValueType::I64, Ty::Int(8)),
            (ValueType::U64, Ty::Uint(8)),
            (ValueType::F32, Ty::Float(4)),
            (ValueType::F64, Ty::Float(8)),
            (ValueType::String, Ty::Str),
        ];
        for big in [false, true] {
            let bo = Bo { big };
            for (vt, vty) in &types {
                let fast = Fast::of(*vt, vty);
                assert!(!matches!(fast, Fast::No), "{vt:?}");
                for v in &values {
                    let mut general = Vec::new();
                    let exact = layout::encode(vty, v, bo, &mut general).is_ok()
                        && decodes_back(vty, *vt, &general, v, bo);
                    let mut out = Vec::new();
                    let took = fast.encode(v, bo, &mut out);
                    if took {
                        assert!(exact, "{vt:?} {v:?}: fast rule took an inexact value");
                        assert_eq!(out, general, "{vt:?} {v:?}");
                    } else {
                        assert!(out.is_empty(), "{vt:?} {v:?}: wrote without taking");
                    }
                    // Only non-UTF-8 bytes may be exact yet left to the decode.
                    if !matches!(v, Value::Bytes(_)) {
                        assert_eq!(took, exact, "{vt:?} {v:?}");
                    }
                }
            }
        }
        // Types the rule does not know go the general way.
        assert!(matches!(Fast::of(ValueType::Aggregate, &Ty::Str), Fast::No));
        assert!(matches!(Fast::of(ValueType::I32, &Ty::Int(8)), Fast::No));
    }
}
