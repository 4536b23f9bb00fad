//! The tracks both slice exports (Chrome JSON, Perfetto) lay out alike:
//! groups of synthetic processes, CPU, process, metric and named tracks,
//! process names, counter series and where an event, a value or an
//! annotation goes (rules in docs/chrome.md). A writer says how it declares
//! a process or a thread track ([`Describe`]) and how it writes what goes
//! on them; the layout is here once, so both exports show the same tracks.

use super::{Slices, TrackKey, TypeInfo};
use crate::error::Result;
use crate::formats::format::{note_dropped, Kind, Rule};
use crate::formats::kpi::text::{X_APID, X_ECU};
use crate::model::*;
use std::collections::HashMap;

/// What both slice exports do alike with values and free text (rows of
/// their `WRITES` tables).
pub const ERROR_CODES_DROPPED: Rule = Rule::some_dropped(
    Kind::Samples,
    "metric values",
    "per-metric error codes",
    "PCP error code instead of a value",
);
pub const STRINGS_AS_INSTANTS: Rule = Rule::some_degraded(
    Kind::Samples,
    "string metric values",
    "strings",
    "written as instants where the value changes; repeats left out",
);
pub const MARKS_AS_INSTANTS: Rule = Rule::kept(Kind::Marks, "instants on a marks track");
pub const NOTES_AS_INSTANTS: Rule = Rule::kept(Kind::Annotations, "instants on a notes track");

/// Synthetic pids and tids (CPU groups, metrics, ECUs) start here, far above
/// any real PID (Linux caps them at 2^22) and within Perfetto's int32 pid.
pub const SYNTHETIC_BASE: i64 = 1 << 30;

/// A viewer track: thread `tid` of process `pid`; `id` is the writer's own
/// handle for it (Perfetto's track uuid; Chrome JSON names tracks by pid
/// and tid and leaves it 0).
#[derive(Debug, Clone, Copy)]
pub struct Track {
    pub pid: i64,
    pub tid: i64,
    pub id: u64,
}

pub struct MetricInfo {
    pub name: String,
    pub indom: Option<IndomId>,
    /// Instances are PIDs: values go to the process's track.
    pub pid_keyed: bool,
    pub counter: bool,
    pub units: String,
}

/// The tracks, process names and metric series of one writer; `S` is the
/// writer's own state per series (metric and instance).
pub struct Layout<S> {
    source: FormatId,
    /// The first data item's time.
    pub origin: Option<Timestamp>,
    pub loss: LossReport,
    pub tracks: Vec<Track>,
    by_key: HashMap<TrackKey, usize>,
    by_name: HashMap<String, usize>,
    /// Synthetic processes by name (and writer-private keys).
    pub groups: HashMap<String, i64>,
    proc_names: HashMap<i64, String>,
    next_syn: i64,
    keybuf: String,
    pub metrics: HashMap<MetricId, MetricInfo>,
    indoms: HashMap<IndomId, HashMap<InstId, String>>,
    /// Per series the writer's state and the last string value (repeats
    /// of it are left out).
    series: HashMap<(MetricId, InstId), (S, Option<String>)>,
}

impl<S> Layout<S> {
    /// The layout of a stream from `source` (which names CPUs "CPU" or,
    /// for a Snabb timeline, "core").
    pub fn new(source: FormatId) -> Layout<S> {
        Layout {
            source,
            origin: None,
            loss: LossReport::default(),
            tracks: Vec::new(),
            by_key: HashMap::new(),
            by_name: HashMap::new(),
            groups: HashMap::new(),
            proc_names: HashMap::new(),
            next_syn: SYNTHETIC_BASE,
            keybuf: String::new(),
            metrics: HashMap::new(),
            indoms: HashMap::new(),
            series: HashMap::new(),
        }
    }

    fn syn(&mut self) -> i64 {
        self.next_syn += 1;
        self.next_syn
    }

    fn timeline(&self) -> bool {
        self.source == FormatId::Timeline
    }

    /// The name shown for process `pid`.
    pub fn process_label(&self, pid: i64) -> String {
        match self.proc_names.get(&pid) {
            Some(n) => n.clone(),
            None if pid == 0 => "idle (pid 0)".into(),
            None => format!("pid {pid}"),
        }
    }

    /// A metric's name, instance domain and semantics; its series start over
    /// (a redefinition may change names or instance domain).
    pub fn define_metric(&mut self, m: &MetricDesc) {
        let name = m.name().to_string();
        let pid_keyed =
            m.indom.is_some() && (name.starts_with("kpi.proc.") || name.starts_with("proc."));
        self.metrics.insert(
            m.id,
            MetricInfo {
                name,
                indom: m.indom,
                pid_keyed,
                counter: m.sem == Semantics::Counter,
                units: m.units.pcp_str(),
            },
        );
        self.series.retain(|(id, _), _| *id != m.id);
    }

    /// Instance names; the series of instances that left end (memory
    /// follows the live set).
    pub fn indom(&mut self, u: &IndomUpdate) {
        let gone = super::update_instance_names(&mut self.indoms, u);
        if !gone.is_empty() {
            let metrics = &self.metrics;
            self.series.retain(|(m, inst), _| {
                !(metrics.get(m).is_some_and(|mi| mi.indom == Some(u.id)) && gone.contains(inst))
            });
        }
    }

    /// The writer's state of a series made by [`Describe::series`].
    pub fn series_mut(&mut self, m: MetricId, inst: InstId) -> Option<&mut S> {
        self.series.get_mut(&(m, inst)).map(|e| &mut e.0)
    }

    /// The name of metric `m` (for a metric without a definition, its id).
    pub fn metric_name(&self, m: MetricId) -> String {
        self.metrics
            .get(&m)
            .map(|i| i.name.clone())
            .unwrap_or_else(|| format!("metric {m}"))
    }
}

/// A value a counter track shows (numbers; enums as their number).
pub fn is_counter_value(v: &Value) -> bool {
    matches!(
        v,
        Value::I64(_) | Value::U64(_) | Value::Enum(_) | Value::F32(_) | Value::F64(_)
    )
}

/// A string value that repeats its series' last one is left out (reported
/// by the caller); a new one is kept as the last.
pub fn new_string(last: &mut Option<String>, s: &str) -> bool {
    if last.as_deref() == Some(s) {
        return false;
    }
    *last = Some(s.to_string());
    true
}

/// An annotation's name: the start of its text (a viewer's label).
pub fn annotation_name(text: &str) -> &str {
    match text.char_indices().nth(80) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

/// How a writer declares what the layout makes, and the layout's rules.
pub trait Describe {
    /// The writer's state per counter series.
    type Series;
    fn layout(&mut self) -> &mut Layout<Self::Series>;
    /// Process `pid` named `name` (again on a rename); `sort`: its place
    /// among processes, where the writer has one.
    fn describe_process(&mut self, pid: i64, name: &str, sort: Option<i64>) -> Result<()>;
    /// Thread track `tid` of `pid`; the writer's handle for it.
    fn describe_thread(&mut self, pid: i64, tid: i64, name: &str, sort: Option<i64>)
        -> Result<u64>;
    /// The real process of `t` (its own thread track) is now `name`.
    fn rename(&mut self, t: Track, name: &str) -> Result<()>;
    /// A new series' state, on `track`, named `name`.
    fn new_series(&mut self, track: Track, name: String) -> Self::Series;
    /// The process holding the idle task's tracks (pid 0 is the kernel's
    /// swapper, which some viewers treat specially).
    fn idle_group(&mut self) -> Result<i64>;

    /// A synthetic process named `name` (created, and named, once).
    fn group(&mut self, name: &str, sort: Option<i64>) -> Result<i64> {
        if let Some(&p) = self.layout().groups.get(name) {
            return Ok(p);
        }
        let l = self.layout();
        let pid = l.syn();
        l.groups.insert(name.to_string(), pid);
        self.describe_process(pid, name, sort)?;
        Ok(pid)
    }

    fn new_track(&mut self, pid: i64, tid: i64, name: &str, sort: Option<i64>) -> Result<usize> {
        let id = self.describe_thread(pid, tid, name, sort)?;
        let tracks = &mut self.layout().tracks;
        tracks.push(Track { pid, tid, id });
        Ok(tracks.len() - 1)
    }

    /// A track of the CPU group ("CPUs", or "cores" for a timeline).
    fn cpu_track(&mut self, name: std::fmt::Arguments<'_>, sort: i64) -> Result<usize> {
        let group = if self.layout().timeline() {
            "cores"
        } else {
            "CPUs"
        };
        let pid = self.group(group, Some(-1))?;
        let tid = self.layout().syn();
        self.new_track(pid, tid, &name.to_string(), Some(sort))
    }

    /// The track of `key`, declared on first use.
    fn place(&mut self, key: TrackKey) -> Result<usize> {
        if let Some(&t) = self.layout().by_key.get(&key) {
            return Ok(t);
        }
        let word = if self.layout().timeline() {
            "core"
        } else {
            "CPU"
        };
        let t = match key {
            TrackKey::Cpu(c) => self.cpu_track(format_args!("{word} {c}"), 3 * c as i64)?,
            TrackKey::CpuRun(c) => {
                self.cpu_track(format_args!("{word} {c} running"), 3 * c as i64 + 1)?
            }
            TrackKey::CpuUnknown(c) => self.cpu_track(
                format_args!("{word} {c}, process not yet known"),
                3 * c as i64 + 2,
            )?,
            TrackKey::Idle(c) => {
                let pid = self.idle_group()?;
                let tid = self.layout().syn();
                self.new_track(pid, tid, &format!("idle on {word} {c}"), Some(c as i64))?
            }
            TrackKey::Process(p) => {
                let label = self.layout().process_label(p);
                self.describe_process(p, &label, None)?;
                self.new_track(p, p, &label, None)?
            }
            TrackKey::Metric(m) => {
                let name = self.layout().metric_name(m);
                let pid = self.layout().syn();
                self.describe_process(pid, &name, None)?;
                self.new_track(pid, pid, &name, None)?
            }
            TrackKey::Marks | TrackKey::Notes => {
                let name = if key == TrackKey::Marks {
                    "marks"
                } else {
                    "annotations"
                };
                let pid = self.group(name, None)?;
                let tid = self.layout().syn();
                self.new_track(pid, tid, name, None)?
            }
        };
        self.layout().by_key.insert(key, t);
        Ok(t)
    }

    /// A track keyed by text: thread `thread` of the process named `ga`
    /// followed by `gb` (two parts, so callers need not allocate).
    fn named_track(&mut self, ga: &str, gb: &str, thread: &str) -> Result<usize> {
        let l = self.layout();
        l.keybuf.clear();
        l.keybuf.push_str(ga);
        l.keybuf.push_str(gb);
        l.keybuf.push('\0');
        l.keybuf.push_str(thread);
        if let Some(&t) = l.by_name.get(l.keybuf.as_str()) {
            return Ok(t);
        }
        let key = l.keybuf.clone();
        let pid = self.group(&format!("{ga}{gb}"), None)?;
        let tid = self.layout().syn();
        let t = self.new_track(pid, tid, thread, None)?;
        self.layout().by_name.insert(key, t);
        Ok(t)
    }

    /// Name (or rename) a real process.
    fn name_process(&mut self, pid: i64, name: &str) -> Result<()> {
        let l = self.layout();
        if l.proc_names.get(&pid).is_some_and(|n| n == name) {
            return Ok(());
        }
        l.proc_names.insert(pid, name.to_string());
        if let Some(&t) = l.by_key.get(&TrackKey::Process(pid)) {
            let tr = l.tracks[t];
            self.rename(tr, name)?;
        }
        Ok(())
    }

    /// Where an event belongs when it is not part of a duration.
    fn home<X>(&mut self, e: &Event, ti: &TypeInfo<X>) -> Result<usize> {
        if let Some(p) = ti
            .pid_field
            .and_then(|i| e.fields.get(i))
            .and_then(Value::as_i128)
            .and_then(|p| i64::try_from(p).ok())
        {
            if let Some(Value::Str(n)) = ti.name_field.and_then(|i| e.fields.get(i)) {
                if !n.is_empty() {
                    self.name_process(p, n)?;
                }
            }
            return self.place(TrackKey::Process(p));
        }
        if let Some(c) = e.cpu {
            return self.place(TrackKey::Cpu(c));
        }
        if let Some(ecu) = e.extras.str(X_ECU) {
            let apid = e.extras.str(X_APID).unwrap_or("-");
            return self.named_track("ECU ", ecu, apid);
        }
        let src = self.layout().source.name();
        if let Some(s) = &e.stream {
            return self.named_track(src, " streams", s);
        }
        self.named_track(src, " events", &ti.ty.category)
    }

    /// An annotation's track: its ECU's APID (DLT), else the notes track.
    fn annotation_track(&mut self, a: &Annotation) -> Result<usize> {
        match a.extras.str(X_ECU) {
            Some(ecu) => {
                let apid = a.extras.str(X_APID).unwrap_or("-");
                self.named_track("ECU ", ecu, apid)
            }
            None => self.place(TrackKey::Notes),
        }
    }

    /// The series of metric `m`, instance `inst`, made on first use: a
    /// process-keyed metric's values go to
    /// the process's track (named after the instance), any other to the
    /// metric's, named `metric[instance]`.
    fn series(&mut self, m: MetricId, inst: InstId) -> Result<&mut Self::Series> {
        if !self.layout().series.contains_key(&(m, inst)) {
            let l = self.layout();
            let (mname, indom, pid_keyed) = match l.metrics.get(&m) {
                Some(mi) => (mi.name.clone(), mi.indom, mi.pid_keyed),
                None => (format!("metric {m}"), None, false),
            };
            let iname = indom
                .and_then(|d| l.indoms.get(&d))
                .and_then(|n| n.get(&inst))
                .cloned();
            let (track, name) = if pid_keyed && inst >= 0 {
                if let Some(n) = &iname {
                    if !self.layout().proc_names.contains_key(&(inst as i64)) {
                        self.name_process(inst as i64, n)?;
                    }
                }
                (self.place(TrackKey::Process(inst as i64))?, mname)
            } else {
                let t = self.place(TrackKey::Metric(m))?;
                let name = match (inst == PM_IN_NULL, &iname) {
                    (true, _) => mname,
                    (false, Some(n)) => format!("{mname}[{n}]"),
                    (false, None) => format!("{mname}[{inst}]"),
                };
                (t, name)
            };
            let tr = self.layout().tracks[track];
            let s = self.new_series(tr, name);
            self.layout().series.insert((m, inst), (s, None));
        }
        Ok(self.layout().series_mut(m, inst).expect("inserted above"))
    }
}

/// A slice export: what the writer does with each kind of item; the
/// dispatch, the pairing and the layout are shared.
pub trait SliceExport: Describe + Slices {
    /// What the format keeps and drops (its `WRITES`).
    const RULES: &'static [Rule];
    /// The loss report, with what the writer wrote (`(what, n)`) and the
    /// entries and exits left unpaired.
    fn report_counts(&mut self, wrote: &[(&str, u64)]) -> LossReport {
        let mut loss = std::mem::take(&mut self.layout().loss);
        self.pairing().report(&mut loss, wrote);
        loss
    }

    /// At the end: running slices and open entries closed; an error if the
    /// stream had no data item (metadata alone is no trace).
    fn end_pairs(&mut self) -> Result<()> {
        if self.layout().origin.is_none() {
            return Err(crate::error::Error::nothing_to_write(
                "nothing to write",
                "the input has no events, samples, marks or annotations",
            ));
        }
        self.close_pairs()
    }

    /// At the end of the stream: what was written, for the loss report.
    fn finish_export(&mut self) -> Result<LossReport>;
    /// After the first data item's time is the origin.
    fn first_time(&mut self, _: Timestamp) -> Result<()> {
        Ok(())
    }
    /// The writer's own facts of an event type, kept with its pairing.
    fn type_extra(&mut self, t: &EventType) -> Self::Extra;
    /// One value of metric `m`, instance `inst`, at `t`.
    fn value(&mut self, m: MetricId, inst: InstId, v: &Value, t: Timestamp) -> Result<()>;
    /// An event after its track is known (`home`), before pairing.
    fn placed_event(&mut self, e: &Event, ti: &TypeInfo<Self::Extra>, home: usize) -> Result<()>;
    fn mark(&mut self, m: &Mark) -> Result<()>;
    fn annotation(&mut self, a: &Annotation) -> Result<()>;

    /// One item of the stream.
    fn item(&mut self, item: &Item) -> Result<()> {
        if self.layout().origin.is_none() && item.is_data() {
            if let Some(t) = item.time() {
                self.layout().origin = Some(t);
                self.first_time(t)?;
            }
        }
        match item {
            Item::EventType(t) => {
                let x = self.type_extra(t);
                self.pairing().define_type(t, x)
            }
            Item::Metric(m) => self.layout().define_metric(m),
            Item::Indom(u) => self.layout().indom(u),
            Item::Help(_) | Item::Labels(_) => {
                note_dropped(&mut self.layout().loss, Self::RULES, item)
            }
            Item::Event(e) => return self.event(e),
            Item::EventRun(r) => return r.each_item(|it| self.item(it)),
            Item::Sample(s) => return self.sample(s),
            Item::Mark(m) => return self.mark(m),
            Item::Annotation(a) => return self.annotation(a),
        }
        Ok(())
    }

    fn event(&mut self, e: &Event) -> Result<()> {
        let Some(ti) = self.pairing().begin_event(e) else {
            self.layout()
                .loss
                .drop_item("events", "event of an undefined type (no name to show)");
            return Ok(());
        };
        let home = self.home(e, &ti)?;
        self.placed_event(e, &ti, home)
    }

    fn sample(&mut self, s: &Sample) -> Result<()> {
        for mv in &s.metrics {
            let Ok(vals) = &mv.values else {
                self.layout()
                    .loss
                    .drop_item("metric values", "PCP error code instead of a value");
                continue;
            };
            for (inst, v) in vals {
                self.value(mv.metric, *inst, v, s.time)?;
            }
        }
        Ok(())
    }

    /// Values that are no counter: a string where it changes (`string`
    /// writes it), event records (`record`), aggregates dropped.
    fn other_value(&mut self, m: MetricId, inst: InstId, v: &Value, t: Timestamp) -> Result<()> {
        match v {
            Value::Str(s) => {
                self.series(m, inst)?;
                let l = self.layout();
                let last = &mut l.series.get_mut(&(m, inst)).expect("made above").1;
                if !new_string(last, s) {
                    self.layout().loss.degrade(
                        "string metric values",
                        "written as instants where the value changes; repeats left out",
                    );
                    return Ok(());
                }
                self.string_value(m, inst, s, t)
            }
            Value::Events(recs) => {
                for rec in recs {
                    self.event_record(m, inst, rec)?;
                }
                Ok(())
            }
            _ => {
                self.layout().loss.drop_item(
                    "metric values",
                    "aggregate or compound value: not a counter (CTF or PCP carry it)",
                );
                Ok(())
            }
        }
    }

    /// A string value of a series, where it changes (repeats are left out
    /// before).
    fn string_value(&mut self, m: MetricId, inst: InstId, s: &str, t: Timestamp) -> Result<()>;
    /// One record of a PCP event array.
    fn event_record(&mut self, m: MetricId, inst: InstId, rec: &EventRecord) -> Result<()>;
}

impl<T: SliceExport + Send> TraceWriter for T {
    fn write_item(&mut self, item: &Item) -> Result<()> {
        self.item(item)
    }

    fn finish(mut self: Box<Self>) -> Result<LossReport> {
        self.finish_export()
    }
}
