//! The Parquet trace writer: samples to `OUT.parquet` (one row per value),
//! events, marks and annotations to `OUT.events.parquet` (written only if
//! there are any). With `WriteOptions::dataset` (`convert DIR`), rows go to
//! one file pair per host and UTC day, `samples/host=H/date=D/part.parquet`
//! and `events/…` under the staging directory, which the pipeline adds to
//! the dataset (`Staged::commit_dataset`). docs/parquet.md.

use super::schema;
use super::table::{EventCols, Interner, Props, SampleCols, Table, EVENTS_KINDS, SAMPLES_KINDS};
use crate::error::{Error, Result};
use crate::formats::kpi::text::X_ECU;
use crate::model::*;
use crate::options::WriteOptions;
use crate::output::OutTarget;
use parquet::schema::types::SchemaDescPtr;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// `OUT.parquet` → `OUT.events.parquet` (`OUT` → `OUT.events.parquet`).
pub fn events_path(out: &Path) -> PathBuf {
    crate::formats::csv::writer::events_path(out, "parquet")
}

/// The staging subfolders of a dataset's two tables.
pub const DATASET_SAMPLES: &str = "samples";
pub const DATASET_EVENTS: &str = "events";

/// Hive's name for a partition without a value (Spark reads it as null).
pub const NO_HOST: &str = "__HIVE_DEFAULT_PARTITION__";

/// A partition value as Hive escapes it: anything but letters, digits and
/// `._-` as `%XX`, so a host name never makes a path of its own.
pub fn hive_escape(v: &str) -> String {
    if v.is_empty() {
        return NO_HOST.into();
    }
    let mut o = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            o.push(b as char);
        } else {
            let _ = write!(o, "%{b:02X}");
        }
    }
    o
}

/// `YYYY-MM-DD` (UTC) of day number `day` since the epoch.
pub fn date_of_day(day: i64) -> String {
    let mut s = String::new();
    let _ = Timestamp(day.saturating_mul(NS_PER_DAY)).write_rfc3339(&mut s);
    s.truncate(10);
    s
}

const NS_PER_DAY: i64 = 86_400_000_000_000;

#[inline]
fn inst_key(indom: IndomId, inst: InstId) -> u64 {
    (indom as u64) << 32 | inst as u32 as u64
}

#[derive(Clone, Copy)]
struct MetricInfo {
    name: u32,
    units: u32,
    sem: u32,
    indom: Option<IndomId>,
}

/// A metric, and the instances of its last values with their interned
/// names, by position: a metric's next sample mostly lists the same
/// instances in the same order, so a row costs a comparison, not a lookup.
struct MetricState {
    info: MetricInfo,
    insts: Vec<(InstId, Option<u32>)>,
}

struct TypeInfo {
    name: u32,
    fields: Vec<String>,
    /// Enum labels per field (none for other fields).
    labels: Vec<Option<Vec<(i64, String)>>>,
    /// The field that holds the process id, if the type has one.
    pid: Option<usize>,
}

/// One file pair: the whole output, or one host and day of a dataset.
struct Part {
    samples_path: PathBuf,
    events_path: PathBuf,
    samples: Option<Table>,
    events: Option<Table>,
    scols: SampleCols,
    ecols: EventCols,
    srows: usize,
    erows: usize,
}

impl Part {
    fn new(samples_path: PathBuf, events_path: PathBuf) -> Part {
        Part {
            samples_path,
            events_path,
            samples: None,
            events: None,
            scols: SampleCols::default(),
            ecols: EventCols::default(),
            srows: 0,
            erows: 0,
        }
    }
}

struct Shared {
    props: Props,
    batch: usize,
    sschema: SchemaDescPtr,
    eschema: SchemaDescPtr,
}

impl Shared {
    fn samples_table(&self, path: &Path) -> Result<Table> {
        Table::new(path, self.sschema.clone(), SAMPLES_KINDS, &self.props)
    }
    fn flush_samples(&self, p: &mut Part, names: &Interner) -> Result<()> {
        if p.srows == 0 {
            return Ok(());
        }
        if p.samples.is_none() {
            p.samples = Some(self.samples_table(&p.samples_path)?);
        }
        p.srows = 0;
        p.scols
            .write(p.samples.as_mut().expect("opened above"), names)
    }
    fn flush_events(&self, p: &mut Part, names: &Interner) -> Result<()> {
        if p.erows == 0 {
            return Ok(());
        }
        if p.events.is_none() {
            p.events = Some(Table::new(
                &p.events_path,
                self.eschema.clone(),
                EVENTS_KINDS,
                &self.props,
            )?);
        }
        p.erows = 0;
        p.ecols
            .write(p.events.as_mut().expect("opened above"), names)
    }
}

pub struct ParquetWriter {
    sh: Shared,
    names: Interner,
    /// `Some(staging dir)` when writing a dataset.
    dataset: Option<PathBuf>,
    parts: Vec<Part>,
    by_key: HashMap<(Option<u32>, i64), usize>,
    last_key: Option<((Option<u32>, i64), usize)>,
    source: u32,
    host: Option<u32>,
    /// Metric id → its slot in `metric_states`.
    metrics: IntMap<MetricId, usize>,
    metric_states: Vec<MetricState>,
    /// The metrics of the last sample by position, with their slots: a
    /// lookup only where a sample lists other metrics than the one before.
    sample_metrics: Vec<(MetricId, usize)>,
    /// (indom << 32 | instance) → interned instance name.
    inst: IntMap<u64, u32>,
    types: IntMap<EventTypeId, TypeInfo>,
    /// The last item-level source/host text and its id (DLT ECUs, merged
    /// sources): one comparison per row instead of a lookup.
    last_src: Option<(String, u32)>,
    last_host: Option<(String, u32)>,
    last_stream: Option<(String, u32)>,
    ty_annotation: u32,
    ty_mark: u32,
    text: String,
    sample_rows: u64,
    event_rows: u64,
    loss: LossReport,
}

impl ParquetWriter {
    pub fn new(out: &OutTarget, header: &Header, opts: &WriteOptions) -> Result<ParquetWriter> {
        let OutTarget::Path(path) = out else {
            return Err(Error::Usage(
                "the parquet format is binary: give -o FILE, not stdout".into(),
            ));
        };
        let props = Props::default();
        let batch = props.batch_rows();
        let sh = Shared {
            props,
            batch,
            sschema: schema::samples(),
            eschema: schema::events(),
        };
        let mut names = Interner::default();
        let source = names.id(opts
            .source
            .as_deref()
            .unwrap_or_else(|| header.source.name()));
        let host = header
            .host
            .as_deref()
            .or(header.extras.str(X_ECU))
            .filter(|h| !h.is_empty())
            .map(|h| names.id(h));
        let ty_annotation = names.id("annotation");
        let ty_mark = names.id("mark");
        let (dataset, parts) = if opts.dataset {
            (Some(path.clone()), Vec::new())
        } else {
            let mut p = Part::new(path.clone(), events_path(path));
            // The samples table is always there, even with no rows: OUT is
            // what the user named.
            p.samples = Some(sh.samples_table(path)?);
            (None, vec![p])
        };
        Ok(ParquetWriter {
            sh,
            names,
            dataset,
            parts,
            by_key: HashMap::new(),
            last_key: None,
            source,
            host,
            metrics: IntMap::default(),
            metric_states: Vec::new(),
            sample_metrics: Vec::new(),
            inst: IntMap::default(),
            types: IntMap::default(),
            last_src: None,
            last_host: None,
            last_stream: None,
            ty_annotation,
            ty_mark,
            text: String::new(),
            sample_rows: 0,
            event_rows: 0,
            loss: LossReport::default(),
        })
    }

    fn cached(names: &mut Interner, cache: &mut Option<(String, u32)>, s: &str) -> u32 {
        if let Some((t, id)) = cache {
            if t == s {
                return *id;
            }
        }
        let id = names.id(s);
        *cache = Some((s.to_string(), id));
        id
    }

    fn source_of(&mut self, x: &Extras) -> u32 {
        match x.str(keys::SOURCE) {
            Some(s) => Self::cached(&mut self.names, &mut self.last_src, s),
            None => self.source,
        }
    }

    fn host_of(&mut self, x: &Extras) -> Option<u32> {
        match x.str(X_ECU).filter(|h| !h.is_empty()) {
            Some(h) => Some(Self::cached(&mut self.names, &mut self.last_host, h)),
            None => self.host,
        }
    }

    /// The file pair rows of `host` at time `t` go to.
    fn part(&mut self, host: Option<u32>, t: i64) -> usize {
        let Some(stage) = &self.dataset else {
            return 0;
        };
        let key = (host, t.div_euclid(NS_PER_DAY));
        if let Some((k, i)) = self.last_key {
            if k == key {
                return i;
            }
        }
        let i = match self.by_key.get(&key) {
            Some(&i) => i,
            None => {
                let h = host.map_or(NO_HOST.to_string(), |h| hive_escape(self.names.name(h)));
                let rel = PathBuf::from(format!("host={h}"))
                    .join(format!("date={}", date_of_day(key.1)))
                    .join("part.parquet");
                self.parts.push(Part::new(
                    stage.join(DATASET_SAMPLES).join(&rel),
                    stage.join(DATASET_EVENTS).join(&rel),
                ));
                self.by_key.insert(key, self.parts.len() - 1);
                self.parts.len() - 1
            }
        };
        self.last_key = Some((key, i));
        i
    }

    fn define_metric(&mut self, m: &MetricDesc) {
        let sem = match m.sem {
            Semantics::Counter => "counter".to_string(),
            Semantics::Instant => "instant".into(),
            Semantics::Discrete => "discrete".into(),
            Semantics::Other(n) => format!("other-{n}"),
        };
        let info = MetricInfo {
            name: self.names.id(m.name()),
            units: self.names.id(&m.units.pcp_str()),
            sem: self.names.id(&sem),
            indom: m.indom,
        };
        // A metric defined again starts afresh (its indom may differ).
        let state = MetricState {
            info,
            insts: Vec::new(),
        };
        match self.metrics.get(&m.id) {
            Some(&slot) => self.metric_states[slot] = state,
            None => {
                self.metrics.insert(m.id, self.metric_states.len());
                self.metric_states.push(state);
            }
        }
    }

    fn indom(&mut self, u: &IndomUpdate) {
        // Names are kept for every instance ever seen: a value of an
        // instance that left keeps the name it had.
        let mut renamed = false;
        for i in &u.instances {
            let id = self.names.id(&i.name);
            renamed |= self
                .inst
                .insert(inst_key(u.id, i.id), id)
                .is_some_and(|old| old != id);
        }
        // An instance given a new name: the names remembered by position
        // may be stale (rare: instance ids are seldom reused).
        if renamed {
            for m in &mut self.metric_states {
                m.insts.clear();
            }
        }
    }

    fn define_type(&mut self, t: &EventType) {
        let name = self.names.id(&format!("{}.{}", t.category, t.name));
        let fields: Vec<String> = t.fields.iter().map(|f| f.name.clone()).collect();
        let labels = t
            .fields
            .iter()
            .map(|f| match &f.ty {
                FieldType::Enum { labels, .. } => Some(labels.clone()),
                _ => None,
            })
            .collect();
        let pid = fields.iter().position(|n| n == "pid");
        self.types.insert(
            t.id,
            TypeInfo {
                name,
                fields,
                labels,
                pid,
            },
        );
    }

    fn sample(&mut self, s: &Sample) -> Result<()> {
        let t = s.time.0;
        let src = self.source_of(&s.extras);
        let host = self.host_of(&s.extras);
        let pi = self.part(host, t);
        for (pos, mv) in s.metrics.iter().enumerate() {
            let vals = match &mv.values {
                Ok(v) => v,
                Err(_) => {
                    self.loss
                        .drop_item("metric error codes", "a value row has no place for them");
                    continue;
                }
            };
            let slot = match self.sample_metrics.get(pos) {
                Some(&(id, slot)) if id == mv.metric => slot,
                _ => {
                    let Some(&slot) = self.metrics.get(&mv.metric) else {
                        self.loss
                            .drop_item("metric values", "value of an undefined metric (no name)");
                        continue;
                    };
                    // (Filled up to `pos` with this metric: every use
                    // compares the id first.)
                    if pos >= self.sample_metrics.len() {
                        self.sample_metrics.resize(pos + 1, (mv.metric, slot));
                    }
                    self.sample_metrics[pos] = (mv.metric, slot);
                    slot
                }
            };
            let ms = &mut self.metric_states[slot];
            let mi = ms.info;
            // Rows of this metric not yet in the columns of runs.
            let mut pending = 0;
            for (k, (inst, v)) in vals.iter().enumerate() {
                let iname = match ms.insts.get(k) {
                    Some(&(i, n)) if i == *inst => n,
                    _ => {
                        let n = instance_name(&mut self.names, &mut self.inst, mi.indom, *inst);
                        if k < ms.insts.len() {
                            ms.insts[k] = (*inst, n);
                        } else {
                            ms.insts.push((*inst, n));
                        }
                        n
                    }
                };
                let p = &mut self.parts[pi];
                let c = &mut p.scols;
                let vals = &mut c.values;
                match v {
                    Value::I64(x) | Value::Enum(x) => vals.push_i64(*x),
                    Value::U64(x) => match i64::try_from(*x) {
                        Ok(x) => vals.push_i64(x),
                        Err(_) => {
                            vals.push_f64_str(*x as f64, itoa::Buffer::new().format(*x));
                            self.loss.degrade(
                                "u64 values",
                                "no int64 holds them: value_f64 (nearest double) and value_str (exact)",
                            );
                        }
                    },
                    Value::F32(x) => vals.push_f64(*x as f64),
                    Value::F64(x) => vals.push_f64(*x),
                    Value::Str(x) => vals.push_str(x),
                    Value::Events(_) => {
                        self.loss.drop_item(
                            "event-record values",
                            "not a row value (chrome-json and ctf carry them)",
                        );
                        continue;
                    }
                    other => {
                        self.text.clear();
                        push_value_text(other, &mut self.text);
                        vals.push_str(&self.text);
                    }
                }
                c.instance.push(iname);
                pending += 1;
                p.srows += 1;
                self.sample_rows += 1;
                if p.srows >= self.sh.batch {
                    row_runs(c, t, src, host, &mi, pending);
                    pending = 0;
                    self.sh.flush_samples(p, &self.names)?;
                }
            }
            row_runs(&mut self.parts[pi].scols, t, src, host, &mi, pending);
        }
        Ok(())
    }

    /// Begin an event row; the caller fills the three maps' entries and
    /// calls [`Self::end_event`].
    fn begin_event(
        &mut self,
        t: i64,
        x: &Extras,
        ty: u32,
        cpu: Option<u32>,
        pid: Option<i64>,
        stream: Option<&str>,
    ) -> usize {
        let src = self.source_of(x);
        let host = self.host_of(x);
        let stream = stream.map(|s| Self::cached(&mut self.names, &mut self.last_stream, s));
        let pi = self.part(host, t);
        let c = &mut self.parts[pi].ecols;
        c.head.time.push(Some(t));
        c.head.source.push(Some(src));
        c.head.host.push(host);
        c.head.name.push(Some(ty));
        c.cpu.append_option(cpu.and_then(|c| i32::try_from(c).ok()));
        c.pid.append_option(pid);
        c.stream.push(stream);
        pi
    }

    fn end_event(&mut self, pi: usize) -> Result<()> {
        let p = &mut self.parts[pi];
        let c = &mut p.ecols;
        c.fi64.end_row();
        c.ff64.end_row();
        c.fstr.end_row();
        p.erows += 1;
        self.event_rows += 1;
        if p.erows >= self.sh.batch {
            self.sh.flush_events(p, &self.names)?;
        }
        Ok(())
    }

    fn event(&mut self, e: &Event) -> Result<()> {
        let Some(ti) = self.types.get(&e.type_id) else {
            self.loss
                .drop_item("events", "event of an undefined type (no name)");
            return Ok(());
        };
        let ty = ti.name;
        let pid = ti.pid.and_then(|i| match e.fields.get(i) {
            Some(Value::I64(v)) => Some(*v),
            Some(Value::U64(v)) => i64::try_from(*v).ok(),
            _ => None,
        });
        let pi = self.begin_event(e.time.0, &e.extras, ty, e.cpu, pid, e.stream.as_deref());
        let ti = self.types.get(&e.type_id).expect("looked up above");
        let c = &mut self.parts[pi].ecols;
        let mut name_buf = String::new();
        for (i, v) in e.fields.iter().enumerate() {
            let name: &str = match ti.fields.get(i) {
                Some(n) => n,
                None => {
                    name_buf.clear();
                    let _ = write!(name_buf, "field{i}");
                    &name_buf
                }
            };
            match v {
                Value::I64(x) => {
                    c.fi64.insert(name, *x);
                }
                Value::Enum(x) => {
                    c.fi64.insert(name, *x);
                    // The label too, where the type names it (LTT lists it).
                    let label =
                        ti.labels.get(i).and_then(Option::as_ref).and_then(|ls| {
                            ls.iter().find(|(n, _)| n == x).map(|(_, l)| l.as_str())
                        });
                    if let Some(l) = label {
                        c.fstr.insert(name, l);
                    }
                }
                Value::U64(x) => match i64::try_from(*x) {
                    Ok(x) => {
                        c.fi64.insert(name, x);
                    }
                    Err(_) => {
                        c.ff64.insert(name, *x as f64);
                        c.fstr.insert(name, itoa::Buffer::new().format(*x));
                    }
                },
                Value::F32(x) => {
                    c.ff64.insert(name, *x as f64);
                }
                Value::F64(x) => {
                    c.ff64.insert(name, *x);
                }
                Value::Str(s) => {
                    c.fstr.insert(name, s);
                }
                other => {
                    self.text.clear();
                    push_value_text(other, &mut self.text);
                    c.fstr.insert(name, &self.text);
                }
            }
        }
        self.end_event(pi)
    }

    fn annotation(&mut self, a: &Annotation) -> Result<()> {
        let pi = self.begin_event(a.time.0, &a.extras, self.ty_annotation, None, None, None);
        let c = &mut self.parts[pi].ecols;
        c.fstr.insert("text", &a.text);
        self.end_event(pi)
    }

    fn mark(&mut self, m: &Mark) -> Result<()> {
        let pi = self.begin_event(m.time.0, &m.extras, self.ty_mark, None, None, None);
        self.end_event(pi)
    }
}

/// The interned name of instance `inst` of a metric of `indom` (none for
/// a singular value; the number as text where the source never named it).
fn instance_name(
    names: &mut Interner,
    known: &mut IntMap<u64, u32>,
    indom: Option<IndomId>,
    inst: InstId,
) -> Option<u32> {
    if inst == PM_IN_NULL {
        return None;
    }
    let key = inst_key(indom.unwrap_or(u32::MAX), inst);
    Some(
        *known
            .entry(key)
            .or_insert_with(|| names.id(itoa::Buffer::new().format(inst))),
    )
}

/// The columns a sample's rows of one metric share, as one run of `n`.
fn row_runs(c: &mut SampleCols, t: i64, src: u32, host: Option<u32>, mi: &MetricInfo, n: u32) {
    c.head.time.push_n(Some(t), n);
    c.head.source.push_n(Some(src), n);
    c.head.host.push_n(host, n);
    c.head.name.push_n(Some(mi.name), n);
    c.units.push_n(Some(mi.units), n);
    c.semantics.push_n(Some(mi.sem), n);
}

/// A value that is no plain number or text, as text: bytes as `0x…` hex,
/// lists and structs as the common listing shows them.
fn push_value_text(v: &Value, out: &mut String) {
    match v {
        Value::Bytes(b) => {
            out.push_str("0x");
            for x in b {
                let _ = write!(out, "{x:02x}");
            }
        }
        other => other.push_text(out),
    }
}

impl TraceWriter for ParquetWriter {
    fn write_item(&mut self, item: &Item) -> Result<()> {
        match item {
            Item::EventType(t) => {
                self.define_type(t);
                Ok(())
            }
            Item::Metric(m) => {
                self.define_metric(m);
                Ok(())
            }
            Item::Indom(u) => {
                self.indom(u);
                Ok(())
            }
            Item::Help(_) => {
                self.loss
                    .drop_item("help texts", "the tables have no place for them");
                Ok(())
            }
            Item::Labels(_) => {
                self.loss.drop_item(
                    "label sets",
                    "the tables have no place for them (the host is a column)",
                );
                Ok(())
            }
            Item::Sample(s) => self.sample(s),
            Item::Event(e) => self.event(e),
            Item::EventRun(r) => r.each_item(|it| self.write_item(it)),
            Item::Annotation(a) => self.annotation(a),
            Item::Mark(m) => self.mark(m),
        }
    }

    fn finish(mut self: Box<Self>) -> Result<LossReport> {
        let parts = std::mem::take(&mut self.parts);
        for mut p in parts {
            self.sh.flush_samples(&mut p, &self.names)?;
            self.sh.flush_events(&mut p, &self.names)?;
            if let Some(t) = p.samples.take() {
                t.close(&self.names)?;
            }
            if let Some(t) = p.events.take() {
                t.close(&self.names)?;
            }
        }
        let mut loss = std::mem::take(&mut self.loss);
        loss.wrote("Parquet sample rows", self.sample_rows);
        loss.wrote("Parquet event rows", self.event_rows);
        Ok(loss)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_names() {
        assert_eq!(hive_escape("bozo.localdomain"), "bozo.localdomain");
        assert_eq!(hive_escape("a/b=c d"), "a%2Fb%3Dc%20d");
        assert_eq!(hive_escape(""), NO_HOST);
        assert_eq!(date_of_day(0), "1970-01-01");
        assert_eq!(date_of_day(17533), "2018-01-02");
        assert_eq!(date_of_day(-1), "1969-12-31");
    }
}
