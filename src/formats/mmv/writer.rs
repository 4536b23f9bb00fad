//! Model stream → one MMV file (a snapshot).
//!
//! The writer keeps the latest state (descriptors, indom membership, help,
//! labels, the last value per metric at or before `--at`) and lays the file
//! out in `finish`. The layout is libpcp_mmv's (`mmv_init`), unless the
//! stream came from an MMV file whose recorded layout (offsets in extras)
//! still fits the content: then that layout is reused so the round trip
//! is exact. Either way the result is re-parsed and checked before it is
//! written, and g2 is written last.

use super::keys::*;
use super::layout::*;
use super::reader::generation_of;
use crate::error::{Error, Result};
use crate::formats::format::note_dropped;
use crate::model::*;
use crate::options::WriteOptions;
use crate::output::OutTarget;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub fn create(
    out: &OutTarget,
    header: &Header,
    opts: &WriteOptions,
) -> Result<Box<dyn TraceWriter>> {
    let path = match out {
        OutTarget::Path(p) => p.clone(),
        _ => {
            return Err(Error::Usage(
                "the mmv format is binary: give -o FILE, not stdout".into(),
            ))
        }
    };
    if let Some(v) = opts.mmv_version {
        if !(1..=3).contains(&v) {
            return Err(Error::Usage(format!(
                "--mmv-version {v}: MMV versions are 1, 2 and 3"
            )));
        }
    }
    Ok(Box::new(MmvWriter {
        path,
        src: header.clone(),
        opts: opts.clone(),
        metrics: Vec::new(),
        metric_idx: HashMap::new(),
        indoms: Vec::new(),
        indom_idx: HashMap::new(),
        help: HashMap::new(),
        labels: Vec::new(),
        values: HashMap::new(),
        value_extras: None,
        snap_time: None,
        superseded: 0,
        loss: LossReport::default(),
    }))
}

struct MmvWriter {
    path: PathBuf,
    src: Header,
    opts: WriteOptions,
    metrics: Vec<Arc<MetricDesc>>,
    metric_idx: HashMap<MetricId, usize>,
    indoms: Vec<IndomUpdate>,
    indom_idx: HashMap<IndomId, usize>,
    help: HashMap<(HelpTarget, bool), String>,
    labels: Vec<LabelSet>,
    /// Latest values per metric at or before the snapshot time.
    values: HashMap<MetricId, Result<Vec<(InstId, Value)>, i32>>,
    /// `mmv.values` of the sample that supplied the values, if it was one.
    value_extras: Option<Extras>,
    snap_time: Option<Timestamp>,
    superseded: u64,
    loss: LossReport,
}

impl MmvWriter {
    fn after_at(&self, t: Timestamp) -> bool {
        self.opts.at.is_some_and(|at| t > at)
    }
}

impl TraceWriter for MmvWriter {
    fn write_item(&mut self, item: &Item) -> Result<()> {
        match item {
            Item::Metric(d) => {
                if let Some(&i) = self.metric_idx.get(&d.id) {
                    self.metrics[i] = d.clone();
                } else {
                    self.metric_idx.insert(d.id, self.metrics.len());
                    self.metrics.push(d.clone());
                }
            }
            Item::Indom(u) => {
                if self.after_at(u.time) {
                    return Ok(());
                }
                match self.indom_idx.get(&u.id) {
                    Some(&i) => {
                        let cur = &mut self.indoms[i];
                        match u.kind {
                            IndomKind::Full => *cur = u.clone(),
                            IndomKind::Delta => {
                                cur.instances.retain(|x| {
                                    !u.removed.contains(&x.id)
                                        && !u.instances.iter().any(|n| n.id == x.id)
                                });
                                cur.instances.extend(u.instances.iter().cloned());
                                cur.time = u.time;
                            }
                        }
                    }
                    None => {
                        self.indom_idx.insert(u.id, self.indoms.len());
                        let mut u = u.clone();
                        u.kind = IndomKind::Full;
                        self.indoms.push(u);
                    }
                }
            }
            Item::Help(h) => {
                self.help.insert((h.target, h.oneline), h.text.clone());
            }
            Item::Labels(l) => {
                if l.time.is_some_and(|t| self.after_at(t)) {
                    return Ok(());
                }
                self.labels.push(l.clone());
            }
            Item::Sample(s) => {
                if self.after_at(s.time) {
                    self.loss
                        .drop_item("samples", "after the --at snapshot time");
                    return Ok(());
                }
                if self.snap_time.is_some() {
                    self.superseded += 1;
                }
                for mv in &s.metrics {
                    self.values.insert(mv.metric, mv.values.clone());
                }
                self.value_extras = (s.extras.get(VALUES).is_some()
                    || s.extras.get(ELAPSED_EXTRA).is_some())
                .then(|| s.extras.clone());
                self.snap_time = Some(s.time);
            }
            // A run of events counts its events.
            Item::Event(_) | Item::EventRun(_) => self.loss.drop_n(
                "events",
                "MMV holds a metric snapshot, not events",
                crate::model::events_in(item) as u64,
            ),
            Item::EventType(_) => self
                .loss
                .drop_item("event types", "MMV holds a metric snapshot, not events"),
            Item::Mark(_) | Item::Annotation(_) => {
                note_dropped(&mut self.loss, super::WRITES, item)
            }
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<LossReport> {
        // One snapshot: earlier samples are not in the file.
        self.loss.drop_n(
            "samples",
            "MMV holds one snapshot (the last sample, or the one at --at)",
            self.superseded,
        );
        let content = self.build_content();
        let default = serialize(&default_plan(&content))?;
        let mut bytes = default;
        if let Some(plan) = preserved_plan(&content, &self.src) {
            if let Ok(b) = serialize(&plan) {
                if same_content(&b, &bytes) {
                    bytes = b;
                }
            }
        }
        // Self-check: what we write must parse cleanly.
        let mut diags = Vec::new();
        parse(&bytes, &self.path, false, &mut diags).map_err(|e| {
            Error::Unsupported(format!(
                "internal error: the MMV writer produced a bad file: {e}"
            ))
        })?;
        write_file(&self.path, &bytes)?;
        self.loss
            .wrote("metric descriptors", content.metrics.len() as u64);
        self.loss
            .wrote("instance domains", content.indoms.len() as u64);
        self.loss.wrote("values", content.values.len() as u64);
        if !content.labels.is_empty() {
            self.loss.wrote("labels", content.labels.len() as u64);
        }
        self.loss.wrote("samples", 1);
        Ok(self.loss)
    }
}

/// Write with g2 = 0, then set g2 = g1 as the very last step, so a PMDA
/// mapping the file meanwhile sees it as "still being written".
fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let io = |e| Error::io(path, e);
    let mut f = std::fs::File::create(path).map_err(io)?;
    let mut first = bytes.to_vec();
    if let Some(g2) = first.get_mut(16..24) {
        g2.fill(0);
    }
    // Readers on this host map the page cache, which sees the writes in
    // program order: no fsync is needed for the ordering (and the CLI renames
    // the staged file into place afterwards anyway).
    f.write_all(&first).map_err(io)?;
    f.seek(SeekFrom::Start(16)).map_err(io)?;
    f.write_all(bytes.get(16..24).unwrap_or_default())
        .map_err(io)?;
    f.flush().map_err(io)?;
    Ok(())
}

// ------------------------------------------------------------ content

struct CIndom {
    serial: u32,
    insts: Vec<(InstId, Vec<u8>)>,
    short: Option<Vec<u8>>,
    long: Option<Vec<u8>>,
    extras: Extras,
}

struct CMetric {
    name: Vec<u8>,
    item: u32,
    mtype: i32,
    sem: i32,
    dim: u32,
    indom_raw: i32,
    indom: Option<usize>,
    pad: u32,
    short: Option<Vec<u8>>,
    long: Option<Vec<u8>>,
    extras: Extras,
}

struct CValue {
    metric: usize,
    /// Position of the instance within its indom.
    inst: Option<usize>,
    raw: u64,
    extra: i64,
    string: Option<Vec<u8>>,
}

struct CLabel {
    flags: u32,
    identity: u32,
    internal: i32,
    payload: Vec<u8>,
}

struct Content {
    version: i32,
    flags: u32,
    cluster: i32,
    pid: i32,
    g1: u64,
    indoms: Vec<CIndom>,
    metrics: Vec<CMetric>,
    values: Vec<CValue>,
    labels: Vec<CLabel>,
    /// Source VALUES entries: (metric offset, instance offset) →
    /// (value offset, raw, extra).
    slots: HashMap<(u64, u64), (u64, u64, i64)>,
}

fn mmv_type(d: &MetricDesc) -> Option<i32> {
    let raw = d.extras.i64(TYPE);
    Some(match d.vtype {
        ValueType::I64 if raw == Some(TYPE_ELAPSED as i64) => TYPE_ELAPSED,
        ValueType::I32 => TYPE_I32,
        ValueType::U32 => TYPE_U32,
        ValueType::I64 => TYPE_I64,
        ValueType::U64 => TYPE_U64,
        ValueType::F32 => TYPE_FLOAT,
        ValueType::F64 => TYPE_DOUBLE,
        ValueType::String => TYPE_STRING,
        _ => return None,
    })
}

/// Make a metric name the MMV PMDA accepts: letters, digits, `_` and `.`,
/// starting with a letter (also the recorder's live MMV names).
pub fn sanitize(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !s.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) {
        s.insert(0, 'm');
    }
    s
}

fn truncate(s: &str, max: usize) -> Vec<u8> {
    let b = s.as_bytes();
    b[..b.len().min(max)].to_vec()
}

fn value_i64(v: &Value) -> Option<i64> {
    match v {
        Value::I64(x) | Value::Enum(x) => Some(*x),
        Value::U64(x) => i64::try_from(*x).ok(),
        Value::F32(x) => Some(*x as i64),
        Value::F64(x) => Some(*x as i64),
        _ => None,
    }
}

fn value_u64(v: &Value) -> Option<u64> {
    match v {
        Value::U64(x) => Some(*x),
        Value::I64(x) | Value::Enum(x) => u64::try_from(*x).ok(),
        Value::F32(x) if *x >= 0.0 => Some(*x as u64),
        Value::F64(x) if *x >= 0.0 => Some(*x as u64),
        _ => None,
    }
}

impl MmvWriter {
    fn build_content(&mut self) -> Content {
        let from_mmv = self.src.source == FormatId::Mmv;
        let hx = &self.src.extras;
        let loss = &mut self.loss;

        // Metrics we can represent.
        let mut chosen: Vec<(Arc<MetricDesc>, i32)> = Vec::new();
        for d in &self.metrics {
            match mmv_type(d) {
                Some(t) => chosen.push((d.clone(), t)),
                None => loss.drop_item(
                    "metric descriptors",
                    "type not representable in MMV (aggregate/event/unsupported)",
                ),
            }
        }

        // Indoms: those the metrics use (all of them when the source is MMV).
        let used: HashSet<IndomId> = chosen.iter().filter_map(|(d, _)| d.indom).collect();
        let mut indom_pos: HashMap<IndomId, usize> = HashMap::new();
        let mut indoms: Vec<CIndom> = Vec::new();
        let mut serials = HashSet::new();
        let mut pending = Vec::new();
        for u in &self.indoms {
            if !(used.contains(&u.id) || from_mmv && u.extras.u64(SERIAL).is_some()) {
                continue;
            }
            let want = u
                .extras
                .u64(SERIAL)
                .filter(|_| from_mmv)
                .and_then(|s| u32::try_from(s).ok())
                .or(Some(u.id & 0x7ff).filter(|&s| s != 0));
            let serial = match want {
                Some(s) if serials.insert(s) => s,
                _ => {
                    pending.push(indoms.len());
                    0
                }
            };
            let name_max = if self.opts.mmv_version == Some(1) {
                NAMEMAX - 1
            } else {
                STRINGMAX - 1
            };
            let mut insts = Vec::new();
            for i in &u.instances {
                if i.name.len() > name_max {
                    loss.degrade("instance names", "truncated to the MMV name limit");
                }
                insts.push((i.id, truncate(&i.name, name_max)));
            }
            let help = |one: bool| {
                self.help
                    .get(&(HelpTarget::Indom(u.id), one))
                    .map(|t| truncate(t, STRINGMAX - 1))
            };
            indom_pos.insert(u.id, indoms.len());
            indoms.push(CIndom {
                serial,
                insts,
                short: help(true),
                long: help(false),
                extras: u.extras.clone(),
            });
        }
        let mut next = 1u32;
        for k in pending {
            while serials.contains(&next) {
                next += 1;
            }
            serials.insert(next);
            indoms[k].serial = next;
        }

        // Metric entries.
        let mut metrics: Vec<CMetric> = Vec::new();
        let mut metric_pos: HashMap<MetricId, usize> = HashMap::new();
        let mut items = HashSet::new();
        let mut pending = Vec::new();
        let mut names = HashSet::new();
        let name_max = if self.opts.mmv_version == Some(1) {
            NAMEMAX - 1
        } else {
            STRINGMAX - 1
        };
        for (d, t) in &chosen {
            let indom = match d.indom {
                Some(id) => match indom_pos.get(&id) {
                    Some(&p) => Some(p),
                    None => {
                        loss.drop_item(
                            "metric descriptors",
                            "its instance domain was never defined",
                        );
                        continue;
                    }
                },
                None => None,
            };
            let mut name = sanitize(d.name());
            if name != d.name() {
                loss.degrade(
                    "metric names",
                    "renamed: the MMV PMDA skips names that are not letters, digits, '_' and '.' starting with a letter",
                );
            }
            if name.len() > name_max {
                loss.degrade("metric names", "truncated to the MMV name limit");
                name.truncate(name_max);
            }
            let base = name.clone();
            let mut n = 2;
            while !names.insert(name.clone()) {
                loss.degrade(
                    "metric names",
                    "renamed: the MMV PMDA skips duplicate names",
                );
                name = format!("{base}_{n}");
                n += 1;
            }
            let want = d
                .extras
                .u64(ITEM)
                .filter(|_| from_mmv)
                .and_then(|i| u32::try_from(i).ok())
                .or(Some(d.id & 0x3ff).filter(|&i| i <= 0x3ff));
            let item = match want {
                Some(i) if items.insert(i) => i,
                _ => {
                    pending.push(metrics.len());
                    0
                }
            };
            // Raw sem/dim from an MMV source, as long as the model agrees.
            let (mut sem, mut dim) = (d.sem.pcp_code() as i32, d.units.to_word());
            if let (Some(rs), Some(rd)) = (d.extras.i64(SEM), d.extras.u64(DIM)) {
                if *t == TYPE_ELAPSED
                    || (Semantics::from_pcp_code(rs as u32) == d.sem
                        && Units::from_word(rd as u32) == d.units)
                {
                    sem = rs as i32;
                    dim = rd as u32;
                }
            }
            let help = |one: bool, own: &Option<String>| {
                self.help
                    .get(&(HelpTarget::Metric(d.id), one))
                    .or(own.as_ref())
                    .map(|t| truncate(t, STRINGMAX - 1))
            };
            let indom_raw = match indom {
                Some(p) => indoms[p].serial as i32,
                None => match d.extras.i64(INDOM) {
                    Some(-1) => -1,
                    _ => 0,
                },
            };
            metric_pos.insert(d.id, metrics.len());
            metrics.push(CMetric {
                name: name.into_bytes(),
                item,
                mtype: *t,
                sem,
                dim,
                indom_raw,
                indom,
                pad: d.extras.u64(PAD).unwrap_or(0) as u32,
                short: help(true, &d.help_short),
                long: help(false, &d.help_long),
                extras: d.extras.clone(),
            });
        }
        let mut next = 0u32;
        for k in pending {
            while items.contains(&next) {
                next += 1;
            }
            if next > 0x3ff {
                loss.degrade(
                    "metric items",
                    "more than 1024 metrics: the PMDA skips items above 1023",
                );
            }
            items.insert(next);
            metrics[k].item = next;
        }

        // Header fields.
        let mut flags = if from_mmv {
            hx.u64(FLAGS).unwrap_or(0) as u32
        } else {
            0
        };
        let cluster = if from_mmv {
            hx.i64(CLUSTER).unwrap_or(0) as i32
        } else {
            0
        };

        // Values, in libpcp order: per metric, per instance of its indom.
        let mut raw_src: HashMap<(u64, u64), (u64, u64, i64)> = HashMap::new();
        if let Some(ExtraValue::List(l)) = self.value_extras.as_ref().and_then(|e| e.get(VALUES)) {
            for v in l {
                if let ExtraValue::List(f) = v {
                    if let [ExtraValue::U64(o), ExtraValue::U64(m), ExtraValue::U64(i), ExtraValue::U64(r), ExtraValue::I64(x)] =
                        f.as_slice()
                    {
                        raw_src.insert((*m, *i), (*o, *r, *x));
                    }
                }
            }
        }
        let mut open: HashMap<(MetricId, InstId), i64> = HashMap::new();
        if let Some(ExtraValue::List(l)) = self
            .value_extras
            .as_ref()
            .and_then(|e| e.get(ELAPSED_EXTRA))
        {
            for v in l {
                if let ExtraValue::List(f) = v {
                    if let [ExtraValue::U64(m), ExtraValue::I64(i), ExtraValue::I64(x)] =
                        f.as_slice()
                    {
                        open.insert((*m as MetricId, *i as InstId), *x);
                    }
                }
            }
        }
        let mut values = Vec::new();
        let mut missing = 0u64;
        for (mi, (d, _)) in chosen
            .iter()
            .filter(|(d, _)| metric_pos.contains_key(&d.id))
            .enumerate()
        {
            let m = &metrics[mi];
            let vals: Vec<(InstId, Value)> = match self.values.get(&d.id) {
                Some(Ok(v)) => v.clone(),
                Some(Err(_)) => {
                    loss.degrade("values", "PCP error code written as 'no value'");
                    Vec::new()
                }
                None => Vec::new(),
            };
            let slots: Vec<(Option<usize>, InstId)> = match m.indom {
                Some(p) => indoms[p]
                    .insts
                    .iter()
                    .enumerate()
                    .map(|(k, (id, _))| (Some(k), *id))
                    .collect(),
                None => vec![(None, PM_IN_NULL)],
            };
            let mut taken = vec![false; vals.len()];
            // Singular metrics take their first value whatever its instance.
            let key = |i: InstId| if m.indom.is_some() { i } else { PM_IN_NULL };
            let mut by_inst: HashMap<InstId, std::collections::VecDeque<usize>> = HashMap::new();
            for (k, (i, _)) in vals.iter().enumerate() {
                by_inst.entry(key(*i)).or_default().push_back(k);
            }
            for (pos, inst) in slots {
                let v = match by_inst.get_mut(&key(inst)).and_then(|q| q.pop_front()) {
                    Some(k) => {
                        taken[k] = true;
                        vals.get(k).map(|(_, v)| v)
                    }
                    None => None,
                };
                let src_key = (
                    m.extras.u64(OFFSET).unwrap_or(u64::MAX),
                    match (m.indom, pos) {
                        (Some(p), Some(k)) => match indoms[p].extras.get(INST_OFFSETS) {
                            Some(ExtraValue::List(l)) => match l.get(k) {
                                Some(ExtraValue::U64(o)) => *o,
                                _ => u64::MAX,
                            },
                            _ => u64::MAX,
                        },
                        _ => 0,
                    },
                );
                let src = if from_mmv {
                    raw_src.get(&src_key).map(|&(_, r, x)| (r, x))
                } else {
                    None
                };
                let mut cv = CValue {
                    metric: mi,
                    inst: pos,
                    raw: 0,
                    extra: 0,
                    string: None,
                };
                match v {
                    // The source MMV file had no VALUES entry here: keep it so.
                    None if from_mmv && !raw_src.is_empty() && src.is_none() => continue,
                    None => {
                        missing += 1;
                        cv.raw = match m.mtype {
                            TYPE_FLOAT => f32::NAN.to_bits() as u64,
                            TYPE_DOUBLE => f64::NAN.to_bits(),
                            TYPE_STRING => 0,
                            _ => u64::MAX,
                        };
                        if m.mtype == TYPE_STRING {
                            cv.string = Some(Vec::new());
                        }
                    }
                    Some(v) => {
                        fill_value(&mut cv, m.mtype, v, loss);
                        if m.mtype == TYPE_ELAPSED {
                            cv.extra = open.get(&(d.id, inst)).copied().unwrap_or(0);
                        }
                    }
                }
                // Keep the producer's raw bytes where they mean the same value.
                if let Some((r, x)) = src {
                    match m.mtype {
                        TYPE_STRING => {
                            cv.raw = r;
                        }
                        TYPE_ELAPSED if r == cv.raw || (v.is_none() && r == u64::MAX) => {
                            cv.raw = r;
                            cv.extra = x;
                        }
                        _ => {}
                    }
                }
                values.push(cv);
            }
            let extra = taken.iter().filter(|t| !**t).count();
            loss.drop_n(
                "values",
                "instance not in the metric's instance domain at the snapshot",
                extra as u64,
            );
        }
        if missing > 0 && flags & FLAG_SENTINEL == 0 {
            // Without SENTINEL a missing value would read as a real 0/-1.
            flags |= FLAG_SENTINEL;
            loss.degrade(
                "values",
                "missing values written as SENTINEL 'no value' markers (SENTINEL flag set)",
            );
        }

        // Labels.
        let mut labels = Vec::new();
        for ls in &self.labels {
            let (ty, identity, internal) = match ls.target {
                LabelTarget::Cluster(c) => (
                    LABEL_CLUSTER,
                    if from_mmv { c } else { cluster as u32 },
                    PM_IN_NULL,
                ),
                LabelTarget::Item(id) => match metric_pos.get(&id) {
                    Some(&p) => (LABEL_ITEM, metrics[p].item, PM_IN_NULL),
                    None => {
                        loss.drop_item("labels", "label of a metric not written");
                        continue;
                    }
                },
                LabelTarget::Indom(id) | LabelTarget::Instances(id) => match indom_pos.get(&id) {
                    Some(&p) => {
                        if matches!(ls.target, LabelTarget::Indom(_)) {
                            (LABEL_INDOM, indoms[p].serial, PM_IN_NULL)
                        } else {
                            (LABEL_INSTANCES, indoms[p].serial, ls.inst)
                        }
                    }
                    None => {
                        loss.drop_item("labels", "label of an instance domain not written");
                        continue;
                    }
                },
                LabelTarget::Context | LabelTarget::Domain(_) => {
                    for _ in &ls.labels {
                        loss.drop_item("labels", "context/domain labels have no MMV equivalent");
                    }
                    continue;
                }
            };
            for l in &ls.labels {
                let ok_name = {
                    let mut c = l.name.chars();
                    c.next().is_some_and(|c| c.is_ascii_alphabetic())
                        && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
                };
                let payload = format!(
                    "{{{}:{}}}",
                    serde_json::to_string(&l.name).unwrap_or_default(),
                    l.value
                );
                if !ok_name || payload.len() >= LABELMAX {
                    loss.drop_item(
                        "labels",
                        "label name not accepted by MMV or label longer than 243 bytes",
                    );
                    continue;
                }
                labels.push(CLabel {
                    flags: ty | (l.flags & LABEL_OPTIONAL),
                    identity,
                    internal,
                    payload: payload.into_bytes(),
                });
            }
        }

        // Version: forced, else the smallest that fits (never below an MMV
        // source's own version, so a round trip keeps it).
        let long_name = metrics.iter().any(|m| m.name.len() >= NAMEMAX)
            || indoms
                .iter()
                .any(|d| d.insts.iter().any(|(_, n)| n.len() >= NAMEMAX));
        let need = if !labels.is_empty() {
            3
        } else if long_name {
            2
        } else {
            1
        };
        let src_version = if from_mmv {
            hx.u64(VERSION).unwrap_or(1) as i32
        } else {
            1
        };
        let version = match self.opts.mmv_version {
            Some(v) => v as i32,
            None => need.max(src_version.clamp(1, 3)),
        };
        if version < 3 && !labels.is_empty() {
            for _ in &labels {
                loss.drop_item("labels", "labels need MMV version 3");
            }
            labels.clear();
        }
        if version == 1 && long_name {
            // Only reachable when --mmv-version 1 was forced.
            for m in &mut metrics {
                if m.name.len() >= NAMEMAX {
                    m.name.truncate(NAMEMAX - 1);
                    loss.degrade("metric names", "truncated to 63 bytes for MMV version 1");
                }
            }
            for d in &mut indoms {
                for (_, n) in &mut d.insts {
                    if n.len() >= NAMEMAX {
                        n.truncate(NAMEMAX - 1);
                        loss.degrade("instance names", "truncated to 63 bytes for MMV version 1");
                    }
                }
            }
        }

        let snap = self
            .opts
            .at
            .or(self.snap_time)
            .or(self.src.start)
            .unwrap_or_else(|| {
                let d = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default();
                Timestamp::from_secs_nanos(d.as_secs() as i64, d.subsec_nanos())
            });
        let g1 = match (from_mmv, hx.u64(G1), hx.u64(G2)) {
            (true, Some(g1), Some(g2)) if g1 != 0 && g1 == g2 => g1,
            _ => generation_of(snap),
        };
        let pid = if from_mmv {
            hx.i64(PID).unwrap_or(0) as i32
        } else {
            std::process::id() as i32
        };
        Content {
            version,
            flags,
            cluster,
            pid,
            g1,
            indoms,
            metrics,
            values,
            labels,
            slots: raw_src,
        }
    }
}

fn fill_value(cv: &mut CValue, mtype: i32, v: &Value, loss: &mut LossReport) {
    let mut bad = |what: &str| loss.degrade("values", what);
    match mtype {
        TYPE_I32 => {
            let x = value_i64(v).unwrap_or_else(|| {
                bad("value not convertible to the metric's type, written as 0");
                0
            });
            let y = x.clamp(i32::MIN as i64, i32::MAX as i64);
            if x != y {
                bad("value clamped to the 32-bit range");
            }
            cv.raw = y as i32 as u32 as u64;
        }
        TYPE_U32 => {
            let x = value_u64(v).unwrap_or_else(|| {
                bad("value not convertible to the metric's type, written as 0");
                0
            });
            let y = x.min(u32::MAX as u64);
            if x != y {
                bad("value clamped to the 32-bit range");
            }
            cv.raw = y;
        }
        TYPE_I64 | TYPE_ELAPSED => {
            cv.raw = value_i64(v).unwrap_or_else(|| {
                bad("value not convertible to the metric's type, written as 0");
                0
            }) as u64;
        }
        TYPE_U64 => {
            cv.raw = value_u64(v).unwrap_or_else(|| {
                bad("value not convertible to the metric's type, written as 0");
                0
            });
        }
        TYPE_FLOAT => {
            let x = match v {
                Value::F32(x) => *x,
                o => o.as_f64().map(|f| f as f32).unwrap_or_else(|| {
                    bad("value not convertible to the metric's type, written as 0");
                    0.0
                }),
            };
            cv.raw = x.to_bits() as u64;
        }
        TYPE_DOUBLE => {
            cv.raw = v
                .as_f64()
                .unwrap_or_else(|| {
                    bad("value not convertible to the metric's type, written as 0");
                    0.0
                })
                .to_bits();
        }
        TYPE_STRING => {
            let s = match v {
                Value::Str(s) => s.clone(),
                Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
                o => o.text(),
            };
            // mmv_set_string keeps at most 254 bytes.
            if s.len() > STRINGMAX - 2 {
                bad("string value truncated to 254 bytes");
            }
            let b = truncate(&s, STRINGMAX - 2);
            cv.raw = b.len() as u64;
            cv.string = Some(b);
        }
        _ => {}
    }
}

// ------------------------------------------------------------ layout

struct Plan {
    version: i32,
    flags: u32,
    cluster: i32,
    pid: i32,
    g1: u64,
    size: u64,
    toc: Vec<(i32, i32, u64)>,
    indoms: Vec<(u64, u32, u32, u64, u64, u64)>,
    /// (offset, indom offset, internal, v1 name, v2 name offset)
    insts: Vec<(u64, u64, i32, Vec<u8>, u64)>,
    metrics: Vec<PMetric>,
    /// (offset, raw, extra, metric offset, instance offset)
    values: Vec<(u64, u64, i64, u64, u64)>,
    strings: Vec<(u64, Vec<u8>)>,
    labels: Vec<(u64, u32, u32, i32, Vec<u8>)>,
    /// Bytes after the last section (kept from an MMV source).
    trailer: Option<(u64, Vec<u8>)>,
}

/// The offset of a help text kept in `extras` under `key` (0: none), its
/// text placed there among `strings`; None when offset and text disagree.
fn help_off(
    strings: &mut Vec<(u64, Vec<u8>)>,
    extras: &Extras,
    key: &str,
    text: &Option<Vec<u8>>,
) -> Option<u64> {
    let o = extras.u64(key)?;
    match text {
        Some(s) if o != 0 => {
            strings.push((o, s.clone()));
            Some(o)
        }
        None if o == 0 => Some(0),
        _ => None,
    }
}

struct PMetric {
    off: u64,
    name: Vec<u8>,
    name_off: u64,
    item: u32,
    mtype: i32,
    sem: i32,
    dim: u32,
    indom: i32,
    pad: u32,
    short: u64,
    long: u64,
}

impl Plan {
    /// The labels of `c`, one after another from `at`.
    fn push_labels(&mut self, c: &Content, at: u64) {
        for (k, l) in c.labels.iter().enumerate() {
            self.labels.push((
                at + k as u64 * LABEL_SIZE,
                l.flags,
                l.identity,
                l.internal,
                l.payload.clone(),
            ));
        }
    }
}

impl PMetric {
    /// Metric `m` at `off`, its name at `name_off`, its (short, long) help
    /// texts at `help` (0: none).
    fn of(m: &CMetric, off: u64, name_off: u64, help: (u64, u64)) -> PMetric {
        PMetric {
            off,
            name: m.name.clone(),
            name_off,
            item: m.item,
            mtype: m.mtype,
            sem: m.sem,
            dim: m.dim,
            indom: m.indom_raw,
            pad: m.pad,
            short: help.0,
            long: help.1,
        }
    }
}

fn plan_base(c: &Content) -> Plan {
    Plan {
        version: c.version,
        flags: c.flags,
        cluster: c.cluster,
        pid: c.pid,
        g1: c.g1,
        size: 0,
        toc: Vec::new(),
        indoms: Vec::new(),
        insts: Vec::new(),
        metrics: Vec::new(),
        values: Vec::new(),
        strings: Vec::new(),
        labels: Vec::new(),
        trailer: None,
    }
}

/// libpcp_mmv's `mmv_init` layout.
fn default_plan(c: &Content) -> Plan {
    let v = c.version;
    let isz = inst_size(v);
    let msz = metric_size(v);
    let ninst: usize = c.indoms.iter().map(|d| d.insts.len()).sum();
    let mut nstrings = 0usize;
    if v >= 2 {
        nstrings += ninst + c.metrics.len();
    }
    nstrings += c.values.iter().filter(|x| x.string.is_some()).count();
    nstrings += c
        .metrics
        .iter()
        .map(|m| m.short.is_some() as usize + m.long.is_some() as usize)
        .sum::<usize>();
    nstrings += c
        .indoms
        .iter()
        .map(|d| d.short.is_some() as usize + d.long.is_some() as usize)
        .sum::<usize>();
    let mut tocs = 2;
    if !c.indoms.is_empty() {
        tocs += 2;
    }
    if nstrings > 0 {
        tocs += 1;
    }
    if !c.labels.is_empty() {
        tocs += 1;
    }
    let indoms_off = HDR_SIZE + TOC_SIZE * tocs;
    let inst_off = indoms_off + INDOM_SIZE * c.indoms.len() as u64;
    let metrics_off = inst_off + isz * ninst as u64;
    let values_off = metrics_off + msz * c.metrics.len() as u64;
    let strings_off = values_off + VALUE_SIZE * c.values.len() as u64;
    let labels_off = strings_off + STRING_SIZE * nstrings as u64;
    let mut p = plan_base(c);
    p.size = labels_off + LABEL_SIZE * c.labels.len() as u64;
    if !c.indoms.is_empty() {
        p.toc.push((TOC_INDOMS, c.indoms.len() as i32, indoms_off));
        p.toc.push((TOC_INSTANCES, ninst as i32, inst_off));
    }
    p.toc
        .push((TOC_METRICS, c.metrics.len() as i32, metrics_off));
    p.toc.push((TOC_VALUES, c.values.len() as i32, values_off));
    if nstrings > 0 {
        p.toc.push((TOC_STRINGS, nstrings as i32, strings_off));
    }
    if !c.labels.is_empty() {
        p.toc.push((TOC_LABELS, c.labels.len() as i32, labels_off));
    }
    let mut next_str = strings_off;
    let mut strs: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut add = |s: &[u8]| {
        let o = next_str;
        strs.push((o, s.to_vec()));
        next_str += STRING_SIZE;
        o
    };
    // Instances (and their v2 name strings first).
    let mut inst_first = Vec::new();
    let mut io = inst_off;
    let mut inst_offs: Vec<Vec<u64>> = Vec::new();
    for (k, d) in c.indoms.iter().enumerate() {
        inst_first.push(io);
        let mut offs = Vec::new();
        for (id, name) in &d.insts {
            let no = if v >= 2 { add(name) } else { 0 };
            p.insts.push((
                io,
                indoms_off + k as u64 * INDOM_SIZE,
                *id,
                name.clone(),
                no,
            ));
            offs.push(io);
            io += isz;
        }
        inst_offs.push(offs);
    }
    let mut name_offs = Vec::new();
    for m in &c.metrics {
        name_offs.push(if v >= 2 { add(&m.name) } else { 0 });
    }
    let mut vo = values_off;
    for x in &c.values {
        let extra = match &x.string {
            Some(s) => add(s) as i64,
            None => x.extra,
        };
        let inst = match (c.metrics[x.metric].indom, x.inst) {
            (Some(d), Some(k)) => inst_offs[d][k],
            _ => 0,
        };
        p.values
            .push((vo, x.raw, extra, metrics_off + x.metric as u64 * msz, inst));
        vo += VALUE_SIZE;
    }
    for (k, m) in c.metrics.iter().enumerate() {
        let short = m.short.as_deref().map(&mut add).unwrap_or(0);
        let long = m.long.as_deref().map(&mut add).unwrap_or(0);
        let off = metrics_off + k as u64 * msz;
        p.metrics
            .push(PMetric::of(m, off, name_offs[k], (short, long)));
    }
    for (k, d) in c.indoms.iter().enumerate() {
        let short = d.short.as_deref().map(&mut add).unwrap_or(0);
        let long = d.long.as_deref().map(&mut add).unwrap_or(0);
        p.indoms.push((
            indoms_off + k as u64 * INDOM_SIZE,
            d.serial,
            d.insts.len() as u32,
            inst_first[k],
            short,
            long,
        ));
    }
    p.strings = strs;
    p.push_labels(c, labels_off);
    p
}

fn list_u64(x: &Extras, key: &str) -> Option<Vec<u64>> {
    match x.get(key)? {
        ExtraValue::List(l) => l
            .iter()
            .map(|e| match e {
                ExtraValue::U64(v) => Some(*v),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// The source MMV file's own layout, from the offsets the reader recorded.
/// `None` when anything is missing; the caller verifies the result.
fn preserved_plan(c: &Content, h: &Header) -> Option<Plan> {
    if h.source != FormatId::Mmv || h.extras.u64(VERSION)? as i32 != c.version {
        return None;
    }
    let x = &h.extras;
    let mut p = plan_base(c);
    p.size = x.u64(SIZE)?;
    let ExtraValue::List(toc) = x.get(TOC)? else {
        return None;
    };
    for t in toc {
        let ExtraValue::List(f) = t else { return None };
        let [ExtraValue::I64(ty), ExtraValue::I64(n), ExtraValue::U64(o)] = f.as_slice() else {
            return None;
        };
        p.toc.push((*ty as i32, *n as i32, *o));
    }
    if let Some(t) = x.bytes(TRAILER) {
        p.trailer = Some((p.size.checked_sub(t.len() as u64)?, t.to_vec()));
    }
    let sec = |ty: i32| p.toc.iter().find(|t| t.0 == ty).copied();
    if let Some((_, n, o)) = sec(TOC_STRINGS) {
        let strs = match x.get(STRINGS) {
            Some(ExtraValue::List(l)) => l.clone(),
            _ => Vec::new(),
        };
        if strs.len() != n as usize {
            return None;
        }
        for (k, s) in strs.iter().enumerate() {
            let ExtraValue::Bytes(b) = s else { return None };
            p.strings.push((o + k as u64 * STRING_SIZE, b.clone()));
        }
    }
    let mut inst_offs: Vec<Vec<u64>> = Vec::new();
    let mut indom_offs = Vec::new();
    for d in &c.indoms {
        let off = d.extras.u64(OFFSET)?;
        let first = d.extras.u64(FIRST)?;
        let offs = list_u64(&d.extras, INST_OFFSETS)?;
        if offs.len() != d.insts.len() {
            return None;
        }
        let noffs = list_u64(&d.extras, INST_NAME_OFFSETS).unwrap_or_default();
        for (k, (id, name)) in d.insts.iter().enumerate() {
            let no = if c.version >= 2 {
                let no = *noffs.get(k)?;
                p.strings.push((no, name.clone()));
                no
            } else {
                0
            };
            p.insts.push((offs[k], off, *id, name.clone(), no));
        }
        let short = help_off(&mut p.strings, &d.extras, HELP_SHORT_OFF, &d.short)?;
        let long = help_off(&mut p.strings, &d.extras, HELP_LONG_OFF, &d.long)?;
        p.indoms
            .push((off, d.serial, d.insts.len() as u32, first, short, long));
        inst_offs.push(offs);
        indom_offs.push(off);
    }
    let mut metric_offs = Vec::new();
    for m in &c.metrics {
        let off = m.extras.u64(OFFSET)?;
        let name_off = if c.version >= 2 {
            let no = m.extras.u64(NAME_OFF)?;
            p.strings.push((no, m.name.clone()));
            no
        } else {
            0
        };
        let short = help_off(&mut p.strings, &m.extras, HELP_SHORT_OFF, &m.short)?;
        let long = help_off(&mut p.strings, &m.extras, HELP_LONG_OFF, &m.long)?;
        p.metrics.push(PMetric::of(m, off, name_off, (short, long)));
        metric_offs.push(off);
    }
    // VALUES: recorded (metric, instance) → (value offset, string slot).
    let (_, nvals, _) = sec(TOC_VALUES)?;
    if nvals as usize != c.values.len() {
        return None;
    }
    let mut used = BTreeSet::new();
    for v in &c.values {
        let m = &c.metrics[v.metric];
        let moff = metric_offs[v.metric];
        let ioff = match (m.indom, v.inst) {
            (Some(d), Some(k)) => inst_offs[d][k],
            _ => 0,
        };
        let &(voff, _, sextra) = c.slots.get(&(moff, ioff))?;
        if !used.insert(voff) {
            return None;
        }
        let extra = match &v.string {
            Some(s) => {
                p.strings.push((sextra as u64, s.clone()));
                sextra
            }
            None => v.extra,
        };
        p.values.push((voff, v.raw, extra, moff, ioff));
    }
    if let Some((_, n, o)) = sec(TOC_LABELS) {
        if n as usize != c.labels.len() {
            return None;
        }
        p.push_labels(c, o);
    } else if !c.labels.is_empty() {
        return None;
    }
    Some(p)
}

/// Lay a plan out in bytes (g2 = g1 already; `write_file` orders the
/// writes). Any entry outside the planned size is an error.
fn serialize(p: &Plan) -> Result<Vec<u8>> {
    let too_big = || Error::Unsupported("MMV layout does not fit".into());
    if p.size > (1 << 31) {
        return Err(too_big());
    }
    let mut b = vec![0u8; p.size as usize];
    fn put(b: &mut [u8], off: u64, bytes: &[u8]) -> Result<()> {
        let end = off
            .checked_add(bytes.len() as u64)
            .filter(|&e| e <= b.len() as u64)
            .ok_or_else(|| Error::Unsupported("MMV layout entry outside the file".into()))?;
        b[off as usize..end as usize].copy_from_slice(bytes);
        Ok(())
    }
    fn cstr(s: &[u8], width: usize) -> Vec<u8> {
        let mut v = vec![0u8; width];
        let n = s.len().min(width - 1);
        v[..n].copy_from_slice(&s[..n]);
        v
    }
    put(&mut b, 0, MAGIC)?;
    put(&mut b, 4, &p.version.to_ne_bytes())?;
    put(&mut b, 8, &p.g1.to_ne_bytes())?;
    put(&mut b, 16, &p.g1.to_ne_bytes())?;
    put(&mut b, 24, &(p.toc.len() as i32).to_ne_bytes())?;
    put(&mut b, 28, &p.flags.to_ne_bytes())?;
    put(&mut b, 32, &p.pid.to_ne_bytes())?;
    put(&mut b, 36, &p.cluster.to_ne_bytes())?;
    for (k, (ty, n, o)) in p.toc.iter().enumerate() {
        let at = HDR_SIZE + k as u64 * TOC_SIZE;
        put(&mut b, at, &ty.to_ne_bytes())?;
        put(&mut b, at + 4, &n.to_ne_bytes())?;
        put(&mut b, at + 8, &o.to_ne_bytes())?;
    }
    for (o, s) in &p.strings {
        put(&mut b, *o, &cstr(s, STRINGMAX))?;
    }
    for &(o, serial, count, first, short, long) in &p.indoms {
        put(&mut b, o, &serial.to_ne_bytes())?;
        put(&mut b, o + 4, &count.to_ne_bytes())?;
        put(&mut b, o + 8, &first.to_ne_bytes())?;
        put(&mut b, o + 16, &short.to_ne_bytes())?;
        put(&mut b, o + 24, &long.to_ne_bytes())?;
    }
    for (o, indom, internal, name, name_off) in &p.insts {
        put(&mut b, *o, &indom.to_ne_bytes())?;
        put(&mut b, o + 8, &0u32.to_ne_bytes())?;
        put(&mut b, o + 12, &internal.to_ne_bytes())?;
        if p.version == 1 {
            put(&mut b, o + 16, &cstr(name, NAMEMAX))?;
        } else {
            put(&mut b, o + 16, &name_off.to_ne_bytes())?;
        }
    }
    for m in &p.metrics {
        let base = if p.version == 1 {
            put(&mut b, m.off, &cstr(&m.name, NAMEMAX))?;
            m.off + 64
        } else {
            put(&mut b, m.off, &m.name_off.to_ne_bytes())?;
            m.off + 8
        };
        put(&mut b, base, &m.item.to_ne_bytes())?;
        put(&mut b, base + 4, &m.mtype.to_ne_bytes())?;
        put(&mut b, base + 8, &m.sem.to_ne_bytes())?;
        put(&mut b, base + 12, &m.dim.to_ne_bytes())?;
        put(&mut b, base + 16, &m.indom.to_ne_bytes())?;
        put(&mut b, base + 20, &m.pad.to_ne_bytes())?;
        put(&mut b, base + 24, &m.short.to_ne_bytes())?;
        put(&mut b, base + 32, &m.long.to_ne_bytes())?;
    }
    for &(o, raw, extra, metric, inst) in &p.values {
        put(&mut b, o, &raw.to_ne_bytes())?;
        put(&mut b, o + 8, &extra.to_ne_bytes())?;
        put(&mut b, o + 16, &metric.to_ne_bytes())?;
        put(&mut b, o + 24, &inst.to_ne_bytes())?;
    }
    if let Some((o, t)) = &p.trailer {
        put(&mut b, *o, t)?;
    }
    for (o, flags, identity, internal, payload) in &p.labels {
        put(&mut b, *o, &flags.to_ne_bytes())?;
        put(&mut b, o + 4, &identity.to_ne_bytes())?;
        put(&mut b, o + 8, &internal.to_ne_bytes())?;
        put(&mut b, o + 12, &cstr(payload, LABELMAX))?;
    }
    Ok(b)
}

type Canon = (
    Vec<u64>,
    Vec<(u32, Vec<(i32, Vec<u8>)>, Option<Vec<u8>>, Option<Vec<u8>>)>,
    Vec<(
        Vec<u8>,
        u32,
        i32,
        i32,
        u32,
        i32,
        u32,
        Option<Vec<u8>>,
        Option<Vec<u8>>,
    )>,
    Vec<(usize, Option<i32>, u64, i64, Option<Vec<u8>>)>,
    Vec<(u32, u32, i32, Vec<u8>)>,
);

/// Layout-independent content of a parsed file.
fn canon(f: &MmvFile) -> Canon {
    let h = f.hdr();
    let s = |o: u64| (o != 0).then(|| f.string(o).map(<[u8]>::to_vec)).flatten();
    let isz = inst_size(h.version);
    let indoms = f
        .indoms
        .iter()
        .map(|d| {
            let insts = (0..d.count as u64)
                .filter_map(|j| f.inst_at.get(&d.first.wrapping_add(j * isz)))
                .filter_map(|&i| f.insts.get(i))
                .map(|i| (i.internal, i.name.clone()))
                .collect();
            (d.serial, insts, s(d.short), s(d.long))
        })
        .collect();
    let metrics = f
        .metrics
        .iter()
        .map(|m| {
            (
                m.name.clone(),
                m.item,
                m.mtype,
                m.sem,
                m.dim,
                m.indom,
                m.pad,
                s(m.short),
                s(m.long),
            )
        })
        .collect();
    let mut values: Vec<_> = f
        .values
        .iter()
        .filter_map(|v| {
            let mi = *f.metric_at.get(&v.metric)?;
            let m = f.metrics.get(mi)?;
            let inst = if m.has_indom() {
                Some(f.insts.get(*f.inst_at.get(&v.inst)?)?.internal)
            } else {
                None
            };
            let (extra, string) = if m.mtype == TYPE_STRING {
                (0, Some(f.string(v.extra as u64)?.to_vec()))
            } else {
                (v.extra, None)
            };
            Some((mi, inst, v.raw, extra, string))
        })
        .collect();
    values.sort();
    let labels = f
        .labels
        .iter()
        .map(|l| (l.flags, l.identity, l.internal, l.payload.clone()))
        .collect();
    (
        vec![
            h.version as u64,
            h.flags as u64,
            h.cluster as u64,
            h.process as u64,
            h.g1,
            h.g2,
        ],
        indoms,
        metrics,
        values,
        labels,
    )
}

/// Do two files hold the same content (ignoring layout)?
fn same_content(a: &[u8], b: &[u8]) -> bool {
    let p = Path::new("<mmv writer>");
    let (mut da, mut db) = (Vec::new(), Vec::new());
    match (parse(a, p, false, &mut da), parse(b, p, false, &mut db)) {
        (Ok(fa), Ok(fb)) => canon(&fa) == canon(&fb),
        _ => false,
    }
}
