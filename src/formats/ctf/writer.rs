//! The CTF writer: model items into event classes and data streams, the
//! metadata at finish. Memory is one packet buffer per open stream plus the
//! class table and the current instance names; nothing grows with the
//! number of events.

use super::encode::{encode, put_str, Flags};
use super::metadata::{self, Declared};
use super::packet::{Stream, SC_CPU, SC_OTHER};
use super::types::{self, CField, CType};
use crate::error::{Error, Result};
use crate::formats::format::note_dropped;
use crate::model::{
    keys, Annotation, Event, EventType, EventTypeId, Header, IndomId, IndomKind, IndomUpdate,
    InstId, Item, LossReport, Mark, MetricDesc, MetricId, Sample, TraceWriter, PM_IN_NULL,
};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Default packet size (bytes): large enough that the per-packet header
/// is noise, small enough that one buffer per CPU stays cheap.
pub const PACKET_BYTES: usize = 256 * 1024;
/// Most stream instances open at once (one file and buffer each).
pub const MAX_STREAMS: usize = 512;
/// Most streams one source stream may spill into when its items go back
/// in time (see `stream_for`).
pub const MAX_SPILLS: usize = 16;

/// Names of the classes the writer makes for non-event items.
pub const MARK: &str = "polytrace.mark";
pub const ANNOTATION: &str = "polytrace.annotation";
pub const METRIC_ERROR: &str = "polytrace.metric_error";
/// Prefix of the per-metric value event classes.
pub const METRIC_PREFIX: &str = "metric.";
/// Streams of items without a CPU: events and annotations, samples and marks.
const MAIN: &str = "main";
const METRICS: &str = "metrics";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Special {
    Mark,
    Annotation,
    MetricError,
}

/// A model-level event class; declared in a stream class on first use.
struct Class {
    name: String,
    fields: Vec<CField>,
    /// CTF id in stream class 0 (CPU) and 1 (other), once used there.
    ids: [Option<u32>; 2],
    /// Metrics: the value's class and the instance domain (instance
    /// fields lead the payload when there is one).
    metric: Option<(CType, Option<IndomId>)>,
}

/// Where an item goes: a CPU's stream or a named one.
#[derive(Debug, Clone, Copy)]
enum Key<'a> {
    Cpu(u32),
    Named(&'a str),
}

pub struct Config {
    pub packet_bytes: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            packet_bytes: PACKET_BYTES,
        }
    }
}

pub struct CtfWriter {
    dir: PathBuf,
    header: Header,
    cfg: Config,
    uuid: [u8; 16],
    classes: Vec<Class>,
    /// Declaration order: (class index, stream class).
    declared: Vec<(usize, u32)>,
    next_id: [u32; 2],
    type_class: HashMap<EventTypeId, usize>,
    metric_class: HashMap<MetricId, usize>,
    metric_names: HashMap<MetricId, String>,
    special: HashMap<Special, usize>,
    streams: Vec<Stream>,
    /// Streams of a CPU / a name: the primary first, then its spills.
    by_cpu: HashMap<u32, Vec<usize>>,
    by_name: HashMap<String, Vec<usize>>,
    /// Fast path: cpu → primary stream index.
    cpu_primary: Vec<Option<usize>>,
    used_class: [bool; 2],
    instances: HashMap<IndomId, HashMap<InstId, String>>,
    loss: LossReport,
    scratch: Vec<u8>,
    written: u64,
}

/// 16 bytes that differ per run (a version-4 UUID): mixes the clock, the
/// pid and the process's hash seed; no date or host goes into it.
fn new_uuid(dir: &Path) -> [u8; 16] {
    use std::hash::{BuildHasher, Hash, Hasher};
    let s = std::collections::hash_map::RandomState::new();
    let mut out = [0u8; 16];
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        let mut h = s.build_hasher();
        i.hash(&mut h);
        std::process::id().hash(&mut h);
        dir.hash(&mut h);
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
            .hash(&mut h);
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    out[6] = (out[6] & 0x0f) | 0x40;
    out[8] = (out[8] & 0x3f) | 0x80;
    out
}

impl CtfWriter {
    pub fn create(dir: &Path, header: &Header, cfg: Config) -> Result<CtfWriter> {
        std::fs::create_dir(dir).map_err(|e| Error::io(dir, e))?;
        Ok(CtfWriter {
            dir: dir.to_path_buf(),
            header: header.clone(),
            cfg,
            uuid: new_uuid(dir),
            classes: Vec::new(),
            declared: Vec::new(),
            next_id: [0, 0],
            type_class: HashMap::new(),
            metric_class: HashMap::new(),
            metric_names: HashMap::new(),
            special: HashMap::new(),
            streams: Vec::new(),
            by_cpu: HashMap::new(),
            by_name: HashMap::new(),
            cpu_primary: Vec::new(),
            used_class: [false, false],
            instances: HashMap::new(),
            loss: LossReport::default(),
            scratch: Vec::with_capacity(1024),
            written: 0,
        })
    }

    fn add_class(
        &mut self,
        name: String,
        fields: Vec<CField>,
        metric: Option<(CType, Option<IndomId>)>,
    ) -> usize {
        self.classes.push(Class {
            name,
            fields,
            ids: [None, None],
            metric,
        });
        self.classes.len() - 1
    }

    fn define_type(&mut self, t: &EventType) {
        let name = if t.category.is_empty() {
            t.name.clone()
        } else {
            format!("{}.{}", t.category, t.name)
        };
        let mut used = HashSet::new();
        let fields: Vec<CField> = t
            .fields
            .iter()
            .map(|f| types::member(&f.name, types::from_field_type(&f.ty), &mut used))
            .collect();
        // A re-issued type keeps its class when nothing changed.
        if let Some(&ci) = self.type_class.get(&t.id) {
            let c = &self.classes[ci];
            if c.name == name && c.fields == fields {
                return;
            }
        }
        let ci = self.add_class(name, fields, None);
        self.type_class.insert(t.id, ci);
    }

    fn define_metric(&mut self, m: &MetricDesc) {
        let name = format!("{METRIC_PREFIX}{}", m.name());
        let has_indom = m.indom.is_some();
        let vt = types::from_value_type(m.vtype);
        let mut used = HashSet::new();
        let mut fields = Vec::new();
        if has_indom {
            fields.push(types::member("instance", CType::signed(4), &mut used));
            fields.push(types::member("instance_name", CType::Str, &mut used));
        }
        fields.push(types::member("value", vt.clone(), &mut used));
        self.metric_names.insert(m.id, m.name().to_string());
        self.loss.degrade(
            "metric descriptors",
            "semantics, units and help have no place in CTF 1.8 (type and instances kept)",
        );
        if let Some(&ci) = self.metric_class.get(&m.id) {
            let c = &self.classes[ci];
            if c.name == name && c.fields == fields {
                return;
            }
        }
        let ci = self.add_class(name, fields, Some((vt, m.indom)));
        self.metric_class.insert(m.id, ci);
    }

    fn special_class(&mut self, s: Special) -> usize {
        if let Some(&ci) = self.special.get(&s) {
            return ci;
        }
        let mut used = HashSet::new();
        let (name, fields) = match s {
            Special::Mark => (MARK, vec![]),
            Special::Annotation => (
                ANNOTATION,
                vec![types::member("text", CType::Str, &mut used)],
            ),
            Special::MetricError => (
                METRIC_ERROR,
                vec![
                    types::member("metric", CType::Str, &mut used),
                    types::member("pmid", CType::unsigned(4), &mut used),
                    types::member("code", CType::signed(4), &mut used),
                ],
            ),
        };
        let ci = self.add_class(name.to_string(), fields, None);
        self.special.insert(s, ci);
        ci
    }

    /// The CTF id of class `ci` in stream class `sc`, declaring it there first.
    fn class_id(&mut self, ci: usize, sc: u32) -> u32 {
        if let Some(id) = self.classes[ci].ids[sc as usize] {
            return id;
        }
        let id = self.next_id[sc as usize];
        self.next_id[sc as usize] += 1;
        self.classes[ci].ids[sc as usize] = Some(id);
        self.declared.push((ci, sc));
        id
    }

    fn open_stream(&mut self, key: Key, spill: usize) -> Result<usize> {
        let (sc, cpu, base) = match key {
            Key::Cpu(c) => (SC_CPU, Some(c), format!("cpu{c}")),
            Key::Named(n) => {
                let clean: String = n
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || c == '-' {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect();
                (SC_OTHER, None, clean)
            }
        };
        let mut name = if spill == 0 {
            base
        } else {
            format!("{base}.spill{spill}")
        };
        // Distinct source names may clean up alike: keep the files apart.
        while name == "metadata"
            || self
                .streams
                .iter()
                .any(|s| s.path.file_name() == Some(name.as_ref()))
        {
            name.push('_');
        }
        let instance = self.streams.len() as u64;
        let s = Stream::create(
            self.dir.join(&name),
            &self.uuid,
            sc,
            instance,
            cpu,
            self.cfg.packet_bytes,
        )?;
        self.used_class[sc as usize] = true;
        self.streams.push(s);
        let i = self.streams.len() - 1;
        match key {
            Key::Cpu(c) => {
                self.by_cpu.entry(c).or_default().push(i);
                if spill == 0 && (c as usize) < 4096 {
                    if self.cpu_primary.len() <= c as usize {
                        self.cpu_primary.resize(c as usize + 1, None);
                    }
                    self.cpu_primary[c as usize] = Some(i);
                }
            }
            Key::Named(n) => self.by_name.entry(n.to_string()).or_default().push(i),
        }
        Ok(i)
    }

    /// The stream an item of `key` at `ts` goes to, and the time to write.
    /// A stream never goes back in time (readers merge streams by time and
    /// expect each to be ordered), so an item earlier than its stream's
    /// last one goes to a spill stream of the same key whose last item is
    /// not later; past MAX_SPILLS of them the time is clamped (reported).
    fn stream_for(&mut self, key: Key, ts: u64) -> Result<(usize, u64)> {
        if let Key::Cpu(c) = key {
            if let Some(Some(i)) = self.cpu_primary.get(c as usize) {
                if self.streams[*i].last_ts <= ts {
                    return Ok((*i, ts));
                }
            }
        }
        let list = match key {
            Key::Cpu(c) => self.by_cpu.get(&c),
            Key::Named(n) => self.by_name.get(n),
        };
        let Some(list) = list else {
            if self.streams.len() >= MAX_STREAMS && !matches!(key, Key::Named(MAIN)) {
                self.loss.degrade(
                    "events",
                    "more streams than the writer keeps open: written to the main stream",
                );
                return self.stream_for(Key::Named("main"), ts);
            }
            return Ok((self.open_stream(key, 0)?, ts));
        };
        if let Some(&i) = list.iter().find(|&&i| self.streams[i].last_ts <= ts) {
            return Ok((i, ts));
        }
        let (n, first) = (list.len(), list[0]);
        if n <= MAX_SPILLS && self.streams.len() < MAX_STREAMS {
            return Ok((self.open_stream(key, n)?, ts));
        }
        self.loss.degrade(
            "events",
            "earlier than every open stream of its source: time clamped",
        );
        Ok((first, self.streams[first].last_ts))
    }

    /// Start an event of class `ci`: choose its stream, then put the event
    /// header and context into `scratch`. The caller appends the payload
    /// and calls `end`.
    fn begin(
        &mut self,
        ci: usize,
        key: Key,
        time: i64,
        raw_clock: Option<u64>,
        what: &str,
    ) -> Result<(usize, u64)> {
        let ts = if time < 0 {
            self.loss
                .degrade(what, "time before the clock's origin: clamped to it");
            0
        } else {
            time as u64
        };
        let (si, ts) = self.stream_for(key, ts)?;
        let id = self.class_id(ci, self.streams[si].class);
        let b = &mut self.scratch;
        b.clear();
        b.extend_from_slice(&id.to_le_bytes());
        b.extend_from_slice(&ts.to_le_bytes());
        match raw_clock {
            Some(r) => {
                b.push(1);
                b.extend_from_slice(&r.to_le_bytes());
            }
            None => b.push(0),
        }
        Ok((si, ts))
    }

    fn end(&mut self, (si, ts): (usize, u64), what: &str, fl: Flags) -> Result<()> {
        if fl.any() {
            self.report(what, fl);
        }
        self.streams[si].push(ts, &self.scratch, self.cfg.packet_bytes)?;
        self.written += 1;
        self.loss.wrote(what, 1);
        Ok(())
    }

    fn report(&mut self, what: &str, fl: Flags) {
        if fl.mismatch {
            self.loss.degrade(
                what,
                "a value does not match its field type: zero/empty written",
            );
        }
        if fl.range {
            self.loss
                .degrade(what, "an integer outside its field's range: low bits kept");
        }
        if fl.nul {
            self.loss
                .degrade(what, "a string with a NUL byte: cut at the NUL");
        }
        if fl.length {
            self.loss.degrade(
                what,
                "an array of another length than declared: cut or zero-padded",
            );
        }
    }

    fn write_event(&mut self, e: &Event) -> Result<()> {
        let Some(&ci) = self.type_class.get(&e.type_id) else {
            self.loss.drop_item("events", "event type never defined");
            return Ok(());
        };
        let key = match (e.cpu, &e.stream) {
            (Some(c), _) => Key::Cpu(c),
            (None, Some(s)) => Key::Named(s),
            (None, None) => Key::Named(MAIN),
        };
        let at = self.begin(ci, key, e.time.0, e.raw_clock, "events")?;
        let mut fl = Flags::default();
        let fields = &self.classes[ci].fields;
        if e.fields.len() != fields.len() {
            fl.mismatch = true;
        }
        for (i, f) in fields.iter().enumerate() {
            encode(&mut self.scratch, &f.ty, e.fields.get(i), &mut fl);
        }
        self.end(at, "events", fl)
    }

    fn write_sample(&mut self, s: &Sample) -> Result<()> {
        for mv in &s.metrics {
            let vals = match &mv.values {
                Ok(v) => v,
                Err(code) => {
                    let ci = self.special_class(Special::MetricError);
                    let what = "metric error codes";
                    let at = self.begin(ci, Key::Named(METRICS), s.time.0, s.raw_clock, what)?;
                    let mut fl = Flags::default();
                    let name = self.metric_names.get(&mv.metric).map_or("", String::as_str);
                    put_str(&mut self.scratch, name.as_bytes(), &mut fl);
                    self.scratch.extend_from_slice(&mv.metric.to_le_bytes());
                    self.scratch.extend_from_slice(&code.to_le_bytes());
                    self.end(at, what, fl)?;
                    continue;
                }
            };
            let Some(&ci) = self.metric_class.get(&mv.metric) else {
                self.loss
                    .drop_item("sample values", "metric never described");
                continue;
            };
            for (inst, v) in vals {
                let what = "sample values";
                let at = self.begin(ci, Key::Named(METRICS), s.time.0, s.raw_clock, what)?;
                let mut fl = Flags::default();
                let Some((vt, indom)) = &self.classes[ci].metric else {
                    continue;
                };
                match indom {
                    Some(d) => {
                        self.scratch.extend_from_slice(&inst.to_le_bytes());
                        let name = self
                            .instances
                            .get(d)
                            .and_then(|m| m.get(inst))
                            .map_or("", String::as_str);
                        put_str(&mut self.scratch, name.as_bytes(), &mut fl);
                    }
                    None if *inst != PM_IN_NULL => self.loss.degrade(
                        what,
                        "an instance of a metric without instance domain: instance not kept",
                    ),
                    None => {}
                }
                encode(&mut self.scratch, vt, Some(v), &mut fl);
                self.end(at, what, fl)?;
            }
        }
        Ok(())
    }

    fn update_indom(&mut self, u: &IndomUpdate) {
        let m = self.instances.entry(u.id).or_default();
        if u.kind == IndomKind::Full {
            m.clear();
        }
        for r in &u.removed {
            m.remove(r);
        }
        for i in &u.instances {
            m.insert(i.id, i.name.clone());
        }
        self.loss.degrade(
            "indom updates",
            "kept as the instance_name of each value, not as an event of its own",
        );
    }

    fn write_annotation(&mut self, a: &Annotation) -> Result<()> {
        let ci = self.special_class(Special::Annotation);
        let at = self.begin(ci, Key::Named(MAIN), a.time.0, a.raw_clock, "annotations")?;
        let mut fl = Flags::default();
        put_str(&mut self.scratch, a.text.as_bytes(), &mut fl);
        self.end(at, "annotations", fl)
    }

    fn write_mark(&mut self, m: &Mark) -> Result<()> {
        let ci = self.special_class(Special::Mark);
        let at = self.begin(ci, Key::Named(METRICS), m.time.0, None, "marks")?;
        self.end(at, "marks", Flags::default())
    }
}

impl TraceWriter for CtfWriter {
    fn write_item(&mut self, item: &Item) -> Result<()> {
        match item {
            Item::EventType(t) => self.define_type(t),
            Item::Metric(m) => self.define_metric(m),
            Item::Indom(u) => self.update_indom(u),
            Item::Help(_) | Item::Labels(_) => note_dropped(&mut self.loss, super::WRITES, item),
            Item::Event(e) => self.write_event(e)?,
            Item::EventRun(r) => r.each_item(|it| self.write_item(it))?,
            Item::Sample(s) => self.write_sample(s)?,
            Item::Mark(m) => self.write_mark(m)?,
            Item::Annotation(a) => self.write_annotation(a)?,
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<LossReport> {
        if self.written == 0 {
            // A CTF trace without data streams is no trace to babeltrace2.
            return Err(Error::nothing_to_write(
                "nothing to write",
                "the input has no events, samples, marks or annotations",
            ));
        }
        for s in &mut self.streams {
            s.finish()?;
        }
        let decl: Vec<Declared> = self
            .declared
            .iter()
            .map(|&(ci, sc)| {
                let c = &self.classes[ci];
                Declared {
                    name: &c.name,
                    id: c.ids[sc as usize].unwrap_or(0),
                    stream_id: sc,
                    fields: &c.fields,
                }
            })
            .collect();
        let raw = self.header.extras.str(keys::RAW_CLOCK);
        let text = metadata::write(&self.header, &self.uuid, raw, self.used_class, &decl);
        let p = self.dir.join("metadata");
        std::fs::write(&p, text).map_err(|e| Error::io(&p, e))?;
        let mut loss = std::mem::take(&mut self.loss);
        loss.wrote("streams", self.streams.len() as u64);
        Ok(loss)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EventType, Extras, Field, FieldType, FormatId, Timestamp, Value};
    use std::sync::Arc;

    fn run(items: Vec<Item>, packet_bytes: usize) -> (tempfile::TempDir, LossReport) {
        let dir = tempfile::tempdir().unwrap();
        let h = Header::new(FormatId::Ltt, "t");
        let mut w = Box::new(
            CtfWriter::create(&dir.path().join("o"), &h, Config { packet_bytes }).unwrap(),
        );
        for it in &items {
            w.write_item(it).unwrap();
        }
        let loss = w.finish().unwrap();
        (dir, loss)
    }

    fn ev(t: i64, cpu: Option<u32>) -> Item {
        Item::Event(Event {
            time: Timestamp(t),
            raw_clock: None,
            type_id: 1,
            cpu,
            stream: None,
            fields: vec![Value::U64(7)],
            extras: Extras::default(),
        })
    }

    fn ty() -> Item {
        Item::EventType(Arc::new(EventType::new(
            1,
            "c",
            "n",
            vec![Field::new("x", FieldType::Uint(4))],
        )))
    }

    #[test]
    fn too_many_cpus_fall_back_to_main_without_looping() {
        let mut items = vec![ty()];
        items.extend((0..MAX_STREAMS as u32 + 10).map(|c| ev(1, Some(c))));
        let (dir, loss) = run(items, 4096);
        let n = std::fs::read_dir(dir.path().join("o")).unwrap().count();
        // MAX_STREAMS CPU files, `main` and the metadata.
        assert_eq!(n, MAX_STREAMS + 2);
        assert_eq!(loss.written.get("events"), Some(&(MAX_STREAMS as u64 + 10)));
        assert!(loss
            .degraded
            .keys()
            .any(|(_, why)| why.contains("main stream")));
    }

    #[test]
    fn going_back_in_time_spills_then_clamps() {
        let mut items = vec![ty()];
        // Each event is earlier than every one before it.
        items.extend((0..MAX_SPILLS as i64 + 3).map(|k| ev(1000 - k, Some(0))));
        let (dir, loss) = run(items, 4096);
        let n = std::fs::read_dir(dir.path().join("o")).unwrap().count();
        assert_eq!(n, 1 + MAX_SPILLS + 1, "cpu0, its spills, metadata");
        let clamped = loss
            .degraded
            .iter()
            .find(|((_, why), _)| why.contains("clamped"))
            .map(|(_, n)| *n);
        assert_eq!(clamped, Some(2));
    }

    #[test]
    fn packets_stay_within_their_size() {
        let mut items = vec![ty()];
        items.extend((0..1000).map(|k| ev(k, Some(0))));
        let (dir, _) = run(items, 1024);
        let b = std::fs::read(dir.path().join("o/cpu0")).unwrap();
        // 84 bytes of header and context, events of 12 + 1 + 4 bytes.
        let per = (1024 - 84) / 17;
        let packets = 1000usize.div_ceil(per);
        assert_eq!(b.len(), 1000 * 17 + packets * 84);
    }
}
