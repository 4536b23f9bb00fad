//! The Chrome trace-event writer: the JSON Object form, one event per line,
//! streamed through a bounded buffer. Decisions (tracks, pairing, time) are
//! in docs/chrome.md.

use super::json::{write_f64, write_int, write_str, write_us, write_value};
use crate::error::{Error, Result};
use crate::formats::format::note_dropped;
use crate::formats::kpi::text::{X_APID, X_CTID, X_ECU};
use crate::formats::pairs::{Open, Pairing, Slices, TrackKey, TypeInfo};
use crate::model::*;
use crate::output::{ChunkedWriter, OutTarget};
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

/// Synthetic pids and tids (CPU groups, metrics, ECUs) start here, far above
/// any real PID (Linux caps them at 2^22), so the two never collide.
const SYNTHETIC_BASE: i64 = 1 << 30;

/// A pid/tid pair: one horizontal track in a viewer.
#[derive(Debug, Clone, Copy)]
struct Track {
    pid: i64,
    tid: i64,
}

struct MetricInfo {
    name: String,
    indom: Option<IndomId>,
    /// Instances are PIDs: values go to the process's track.
    pid_keyed: bool,
}

struct Series {
    /// The counter name as a JSON string literal (escaped once).
    name_json: String,
    track: Track,
    last_str: Option<String>,
}

#[derive(Default)]
struct Counts {
    durations: u64,
    running: u64,
    instants: u64,
    counters: u64,
    metadata: u64,
}

pub struct ChromeWriter {
    out: ChunkedWriter<Box<dyn Write + Send>>,
    /// Shared, so error mapping on each line costs no allocation.
    path: Arc<PathBuf>,
    header: Header,
    first_line: bool,
    origin: Option<Timestamp>,
    p: Pairing<()>,
    tracks: Vec<Track>,
    by_key: HashMap<TrackKey, usize>,
    by_name: HashMap<String, usize>,
    groups: HashMap<String, i64>,
    proc_names: HashMap<i64, String>,
    next_syn: i64,
    keybuf: String,
    namebuf: String,
    metrics: HashMap<MetricId, MetricInfo>,
    indoms: HashMap<IndomId, HashMap<InstId, String>>,
    series: HashMap<(MetricId, InstId), Series>,
    counts: Counts,
    loss: LossReport,
}

fn io_err(path: &std::path::Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::io(path, e)
}

type Out = ChunkedWriter<Box<dyn Write + Send>>;

/// An event's name: text to quote, or JSON made once per series.
enum Name<'a> {
    Text(&'a str),
    Json(&'a str),
}

/// What every event line has after its name.
struct At<'a> {
    cat: &'a str,
    ts: i64,
    /// `X` events only.
    dur: Option<i64>,
    tr: Track,
}

impl<'a> At<'a> {
    fn new(cat: &'a str, ts: i64, tr: Track) -> At<'a> {
        At {
            cat,
            ts,
            dur: None,
            tr,
        }
    }
}

/// An event line up to and including `"args":{`; `ph` is the phase as
/// JSON text (with an instant's scope: `"i","s":"t"`).
fn write_head<W: Write + ?Sized>(
    w: &mut W,
    ph: &[u8],
    name: Name<'_>,
    at: &At<'_>,
) -> std::io::Result<()> {
    w.write_all(b"{\"ph\":")?;
    w.write_all(ph)?;
    w.write_all(b",\"name\":")?;
    match name {
        Name::Text(t) => write_str(w, t)?,
        Name::Json(j) => w.write_all(j.as_bytes())?,
    }
    w.write_all(b",\"cat\":")?;
    write_str(w, at.cat)?;
    w.write_all(b",\"ts\":")?;
    write_us(w, at.ts)?;
    if let Some(d) = at.dur {
        w.write_all(b",\"dur\":")?;
        write_us(w, d)?;
    }
    w.write_all(b",\"pid\":")?;
    write_int(w, at.tr.pid)?;
    w.write_all(b",\"tid\":")?;
    write_int(w, at.tr.tid)?;
    w.write_all(b",\"args\":{")
}

/// Phases as `write_head` takes them.
const INSTANT: &[u8] = b"\"i\",\"s\":\"t\"";

impl ChromeWriter {
    pub fn new(out: &OutTarget, header: &Header) -> Result<ChromeWriter> {
        let (sink, path): (Box<dyn Write + Send>, PathBuf) = match out {
            OutTarget::Stdout => (Box::new(std::io::stdout()), "<stdout>".into()),
            OutTarget::Path(p) => (
                Box::new(std::fs::File::create(p).map_err(|e| Error::io(p, e))?),
                p.clone(),
            ),
        };
        let w = ChromeWriter {
            out: ChunkedWriter::new(sink),
            path: Arc::new(path),
            header: header.clone(),
            first_line: true,
            origin: None,
            p: Pairing::default(),
            tracks: Vec::new(),
            by_key: HashMap::new(),
            by_name: HashMap::new(),
            groups: HashMap::new(),
            proc_names: HashMap::new(),
            next_syn: SYNTHETIC_BASE,
            keybuf: String::new(),
            namebuf: String::new(),
            metrics: HashMap::new(),
            indoms: HashMap::new(),
            series: HashMap::new(),
            counts: Counts::default(),
            loss: LossReport::default(),
        };
        Ok(w)
    }

    // ------------------------------------------------------------ lines

    /// Start one event line (the array's separator included).
    fn line(&mut self) -> std::io::Result<&mut Out> {
        if self.first_line {
            // The opening is written with the first event, so an input with
            // nothing to write leaves nothing, even on stdout.
            self.first_line = false;
            self.out.write_all(b"{\"traceEvents\":[\n")?;
        } else {
            self.out.write_all(b",\n")?;
        }
        Ok(&mut self.out)
    }

    /// One event line, written by `f`; an I/O error names the output.
    fn emit(&mut self, f: impl FnOnce(&mut Out) -> std::io::Result<()>) -> Result<()> {
        let r = self.line().and_then(f);
        r.map_err(io_err(&self.path))
    }

    fn rel(&self, t: Timestamp) -> i64 {
        t.0.saturating_sub(self.origin.unwrap_or(t).0)
    }

    /// A metadata (`M`) line whose args `f` writes.
    fn meta_line(
        &mut self,
        what: &str,
        pid: i64,
        tid: i64,
        f: impl FnOnce(&mut Out) -> std::io::Result<()>,
    ) -> Result<()> {
        self.emit(|w| {
            w.write_all(b"{\"ph\":\"M\",\"name\":")?;
            write_str(w, what)?;
            w.write_all(b",\"pid\":")?;
            write_int(w, pid)?;
            w.write_all(b",\"tid\":")?;
            write_int(w, tid)?;
            w.write_all(b",\"args\":{")?;
            f(w)?;
            w.write_all(b"}}")
        })?;
        self.counts.metadata += 1;
        Ok(())
    }

    fn meta(&mut self, what: &str, pid: i64, tid: i64, key: &str, value: &str) -> Result<()> {
        self.meta_line(what, pid, tid, |w| {
            write_str(w, key)?;
            w.write_all(b":")?;
            write_str(w, value)
        })
    }

    fn meta_int(&mut self, what: &str, pid: i64, tid: i64, v: i64) -> Result<()> {
        self.meta_line(what, pid, tid, |w| {
            w.write_all(b"\"sort_index\":")?;
            write_int(w, v)
        })
    }

    // ------------------------------------------------------------ tracks

    fn syn(&mut self) -> i64 {
        self.next_syn += 1;
        self.next_syn
    }

    /// A synthetic process named `name` (created, and named, once).
    fn group(&mut self, name: &str, sort: Option<i64>) -> Result<i64> {
        if let Some(&p) = self.groups.get(name) {
            return Ok(p);
        }
        let pid = self.syn();
        self.groups.insert(name.to_string(), pid);
        self.meta("process_name", pid, pid, "name", name)?;
        if let Some(s) = sort {
            self.meta_int("process_sort_index", pid, pid, s)?;
        }
        Ok(pid)
    }

    fn new_track(&mut self, pid: i64, tid: i64, thread: &str, sort: Option<i64>) -> Result<usize> {
        self.meta("thread_name", pid, tid, "name", thread)?;
        if let Some(s) = sort {
            self.meta_int("thread_sort_index", pid, tid, s)?;
        }
        self.tracks.push(Track { pid, tid });
        Ok(self.tracks.len() - 1)
    }

    fn cpu_word(&self) -> &'static str {
        if self.header.source == FormatId::Timeline {
            "core"
        } else {
            "CPU"
        }
    }

    fn cpu_group(&mut self) -> Result<i64> {
        let name = if self.header.source == FormatId::Timeline {
            "cores"
        } else {
            "CPUs"
        };
        self.group(name, Some(-1))
    }

    fn process_label(&self, pid: i64) -> String {
        match self.proc_names.get(&pid) {
            Some(n) => n.clone(),
            None if pid == 0 => "idle (pid 0)".into(),
            None => format!("pid {pid}"),
        }
    }

    /// Name (or rename) a real process.
    fn name_process(&mut self, pid: i64, name: &str) -> Result<()> {
        if self.proc_names.get(&pid).is_some_and(|n| n == name) {
            return Ok(());
        }
        self.proc_names.insert(pid, name.to_string());
        if self.by_key.contains_key(&TrackKey::Process(pid)) {
            self.meta("process_name", pid, pid, "name", name)?;
            self.meta("thread_name", pid, pid, "name", name)?;
        }
        Ok(())
    }

    fn track(&mut self, key: TrackKey) -> Result<usize> {
        if let Some(&t) = self.by_key.get(&key) {
            return Ok(t);
        }
        let word = self.cpu_word();
        let t = match key {
            TrackKey::Cpu(c) => {
                let pid = self.cpu_group()?;
                let tid = self.syn();
                self.new_track(pid, tid, &format!("{word} {c}"), Some(3 * c as i64))?
            }
            TrackKey::CpuRun(c) => {
                let pid = self.cpu_group()?;
                let tid = self.syn();
                self.new_track(
                    pid,
                    tid,
                    &format!("{word} {c} running"),
                    Some(3 * c as i64 + 1),
                )?
            }
            TrackKey::CpuUnknown(c) => {
                let pid = self.cpu_group()?;
                let tid = self.syn();
                let n = format!("{word} {c}, process not yet known");
                self.new_track(pid, tid, &n, Some(3 * c as i64 + 2))?
            }
            TrackKey::Idle(c) => {
                if !self.groups.contains_key("\0idle") {
                    self.groups.insert("\0idle".into(), 0);
                    self.meta("process_name", 0, 0, "name", "idle (pid 0)")?;
                }
                let tid = self.syn();
                self.new_track(0, tid, &format!("idle on {word} {c}"), Some(c as i64))?
            }
            TrackKey::Process(p) => {
                let label = self.process_label(p);
                self.meta("process_name", p, p, "name", &label)?;
                self.new_track(p, p, &label, None)?
            }
            TrackKey::Metric(m) => {
                let name = self
                    .metrics
                    .get(&m)
                    .map(|i| i.name.clone())
                    .unwrap_or_else(|| format!("metric {m}"));
                let pid = self.syn();
                self.meta("process_name", pid, pid, "name", &name)?;
                self.new_track(pid, pid, &name, None)?
            }
            TrackKey::Marks | TrackKey::Notes => {
                let name = if key == TrackKey::Marks {
                    "marks"
                } else {
                    "annotations"
                };
                let pid = self.group(name, None)?;
                let tid = self.syn();
                self.new_track(pid, tid, name, None)?
            }
        };
        self.by_key.insert(key, t);
        Ok(t)
    }

    /// A track keyed by text: thread `thread` of the process named `ga`
    /// followed by `gb` (two parts, so callers need not allocate).
    fn named_track(&mut self, ga: &str, gb: &str, thread: &str) -> Result<usize> {
        self.keybuf.clear();
        self.keybuf.push_str(ga);
        self.keybuf.push_str(gb);
        self.keybuf.push('\0');
        self.keybuf.push_str(thread);
        if let Some(&t) = self.by_name.get(self.keybuf.as_str()) {
            return Ok(t);
        }
        let key = self.keybuf.clone();
        let pid = self.group(&format!("{ga}{gb}"), None)?;
        let tid = self.syn();
        let t = self.new_track(pid, tid, thread, None)?;
        self.by_name.insert(key, t);
        Ok(t)
    }

    /// Where an event belongs when it is not part of a duration.
    fn home(&mut self, e: &Event, ti: &TypeInfo<()>) -> Result<usize> {
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
            return self.track(TrackKey::Process(p));
        }
        if let Some(c) = e.cpu {
            return self.track(TrackKey::Cpu(c));
        }
        if let Some(ecu) = e.extras.str(X_ECU) {
            let apid = e.extras.str(X_APID).unwrap_or("-");
            return self.named_track("ECU ", ecu, apid);
        }
        let src = self.header.source.name();
        if let Some(s) = &e.stream {
            return self.named_track(src, " streams", s);
        }
        self.named_track(src, " events", &ti.ty.category)
    }

    // ------------------------------------------------------------ events

    fn event(&mut self, e: &Event) -> Result<()> {
        let Some(ti) = self.p.begin_event(e) else {
            self.loss
                .drop_item("events", "event of an undefined type (no name to show)");
            return Ok(());
        };
        let home = self.home(e, &ti)?;
        self.paired_event(e, &ti, home)
    }

    // ------------------------------------------------------------ samples

    fn define_metric(&mut self, m: &MetricDesc) {
        let name = m.name().to_string();
        let pid_keyed =
            m.indom.is_some() && (name.starts_with("kpi.proc.") || name.starts_with("proc."));
        self.metrics.insert(
            m.id,
            MetricInfo {
                name,
                indom: m.indom,
                pid_keyed,
            },
        );
        // A redefinition may change names or instance domain.
        self.series.retain(|(id, _), _| *id != m.id);
    }

    fn indom(&mut self, u: &IndomUpdate) {
        let gone = crate::formats::pairs::update_instance_names(&mut self.indoms, u);
        // Instances that left: their series end (memory follows the live set).
        if !gone.is_empty() {
            let metrics = &self.metrics;
            self.series.retain(|(m, inst), _| {
                !(metrics.get(m).is_some_and(|mi| mi.indom == Some(u.id)) && gone.contains(inst))
            });
        }
    }

    fn series(&mut self, m: MetricId, inst: InstId) -> Result<&mut Series> {
        if !self.series.contains_key(&(m, inst)) {
            let (mname, indom, pid_keyed) = match self.metrics.get(&m) {
                Some(mi) => (mi.name.clone(), mi.indom, mi.pid_keyed),
                None => (format!("metric {m}"), None, false),
            };
            let iname = indom
                .and_then(|d| self.indoms.get(&d))
                .and_then(|n| n.get(&inst))
                .cloned();
            let (track, name) = if pid_keyed && inst >= 0 {
                if let Some(n) = &iname {
                    if !self.proc_names.contains_key(&(inst as i64)) {
                        self.name_process(inst as i64, n)?;
                    }
                }
                (self.track(TrackKey::Process(inst as i64))?, mname)
            } else {
                let t = self.track(TrackKey::Metric(m))?;
                let name = if inst == PM_IN_NULL {
                    mname
                } else {
                    match &iname {
                        Some(n) => format!("{mname}[{n}]"),
                        None => format!("{mname}[{inst}]"),
                    }
                };
                (t, name)
            };
            let name_json = serde_json::to_string(&name).expect("a string serialises");
            self.series.insert(
                (m, inst),
                Series {
                    name_json,
                    track: self.tracks[track],
                    last_str: None,
                },
            );
        }
        Ok(self.series.get_mut(&(m, inst)).expect("inserted above"))
    }

    fn sample(&mut self, s: &Sample) -> Result<()> {
        let ts = self.rel(s.time);
        for mv in &s.metrics {
            let vals = match &mv.values {
                Ok(v) => v,
                Err(_) => {
                    self.loss
                        .drop_item("metric values", "PCP error code instead of a value");
                    continue;
                }
            };
            for (inst, v) in vals {
                self.value(mv.metric, *inst, v, ts)?;
            }
        }
        Ok(())
    }

    fn value(&mut self, m: MetricId, inst: InstId, v: &Value, ts: i64) -> Result<()> {
        match v {
            Value::I64(_) | Value::U64(_) | Value::Enum(_) | Value::F32(_) | Value::F64(_) => {
                if v.as_f64().is_some_and(|x| !x.is_finite()) {
                    self.loss
                        .drop_item("metric values", "NaN or infinite: no JSON number");
                    return Ok(());
                }
                let se = self.series(m, inst)?;
                let (tr, name) = (se.track, std::mem::take(&mut se.name_json));
                let at = At::new("metric", ts, tr);
                let r = self.emit(|w| {
                    write_head(w, b"\"C\"", Name::Json(&name), &at)?;
                    w.write_all(b"\"value\":")?;
                    match *v {
                        Value::I64(x) | Value::Enum(x) => write_int(w, x)?,
                        Value::U64(x) => write_int(w, x)?,
                        Value::F32(x) => write!(w, "{x:?}")?,
                        Value::F64(x) => write_f64(w, x)?,
                        _ => unreachable!("numeric arm"),
                    }
                    w.write_all(b"}}")
                });
                self.series
                    .get_mut(&(m, inst))
                    .expect("made above")
                    .name_json = name;
                r?;
                self.counts.counters += 1;
            }
            Value::Str(s) => {
                let se = self.series(m, inst)?;
                if se.last_str.as_deref() == Some(s.as_str()) {
                    self.loss.degrade(
                        "string metric values",
                        "written as instants where the value changes; repeats left out",
                    );
                    return Ok(());
                }
                se.last_str = Some(s.clone());
                let (tr, name) = (se.track, se.name_json.clone());
                let at = At::new("metric", ts, tr);
                self.emit(|w| {
                    write_head(w, INSTANT, Name::Json(&name), &at)?;
                    w.write_all(b"\"value\":")?;
                    write_str(w, s)?;
                    w.write_all(b"}}")
                })?;
                self.counts.instants += 1;
            }
            Value::Events(recs) => {
                for rec in recs {
                    self.event_record(m, inst, rec)?;
                }
            }
            _ => self.loss.drop_item(
                "metric values",
                "aggregate or compound value: not a counter (CTF or PCP carry it)",
            ),
        }
        Ok(())
    }

    /// One record of a PCP event array: an instant with its parameters.
    fn event_record(&mut self, m: MetricId, inst: InstId, rec: &EventRecord) -> Result<()> {
        let ts = self.rel(rec.time);
        let se = self.series(m, inst)?;
        let (tr, name) = (se.track, se.name_json.clone());
        let params: Vec<(String, &Value)> = rec
            .params
            .iter()
            .map(|p| {
                let n = self
                    .metrics
                    .get(&p.metric)
                    .map(|i| i.name.clone())
                    .unwrap_or_else(|| format!("metric {}", p.metric));
                (n, &p.value)
            })
            .collect();
        let at = At::new("event record", ts, tr);
        self.emit(|w| {
            write_head(w, INSTANT, Name::Json(&name), &at)?;
            write!(w, "\"flags\":{},\"params\":[", rec.flags)?;
            for (i, (n, v)) in params.iter().enumerate() {
                if i > 0 {
                    w.write_all(b",")?;
                }
                w.write_all(b"[")?;
                write_str(w, n)?;
                w.write_all(b",")?;
                write_value(w, v, None)?;
                w.write_all(b"]")?;
            }
            w.write_all(b"]}}")
        })?;
        self.counts.instants += 1;
        Ok(())
    }

    // ------------------------------------------------------------ others

    fn mark(&mut self, m: &Mark) -> Result<()> {
        let track = self.track(TrackKey::Marks)?;
        let at = At::new("mark", self.rel(m.time), self.tracks[track]);
        // A global instant: a line across the whole view.
        self.emit(|w| {
            write_head(w, b"\"i\",\"s\":\"g\"", Name::Text("mark"), &at)?;
            w.write_all(b"}}")
        })?;
        self.counts.instants += 1;
        Ok(())
    }

    fn annotation(&mut self, a: &Annotation) -> Result<()> {
        let track = match a.extras.str(X_ECU) {
            Some(ecu) => {
                let apid = a.extras.str(X_APID).unwrap_or("-");
                self.named_track("ECU ", ecu, apid)?
            }
            None => self.track(TrackKey::Notes)?,
        };
        let at = At::new("annotation", self.rel(a.time), self.tracks[track]);
        // The name is the start of the text (a viewer's label); all of it is in args.
        let name = match a.text.char_indices().nth(80) {
            Some((i, _)) => &a.text[..i],
            None => a.text.as_str(),
        };
        let ctid = a.extras.str(X_CTID);
        self.emit(|w| {
            write_head(w, INSTANT, Name::Text(name), &at)?;
            w.write_all(b"\"text\":")?;
            write_str(w, &a.text)?;
            if let Some(c) = ctid {
                w.write_all(b",\"ctid\":")?;
                write_str(w, c)?;
            }
            w.write_all(b"}}")
        })?;
        self.counts.instants += 1;
        Ok(())
    }

    fn close(&mut self) -> Result<()> {
        if self.origin.is_none() {
            // Metadata alone is no trace: say so rather than write an empty one.
            return Err(Error::nothing_to_write(
                "nothing to write",
                "the input has no events, samples, marks or annotations",
            ));
        }
        self.close_pairs()?;
        let mut other: Vec<(String, String)> = vec![
            (
                "generator".into(),
                format!("polytrace {}", env!("CARGO_PKG_VERSION")),
            ),
            ("source_format".into(), self.header.source.to_string()),
            ("source_version".into(), self.header.version.clone()),
            ("time_base".into(), self.header.time_base.describe()),
        ];
        if let Some(h) = &self.header.host {
            other.push(("host".into(), h.clone()));
        }
        if let Some(o) = self.origin {
            // ts 0 is this instant of the source's clock.
            other.push(("origin_ns".into(), o.0.to_string()));
            if self.header.time_base.is_absolute() {
                other.push(("origin_utc".into(), o.rfc3339()));
            }
        }
        other.push((
            "unmatched_entries".into(),
            self.p.unmatched_open.to_string(),
        ));
        other.push(("unmatched_exits".into(), self.p.unmatched_close.to_string()));
        for (k, v) in &self.header.system {
            other.push((format!("system.{k}"), v.clone()));
        }
        let p = self.path.clone();
        (|| {
            let w = &mut self.out;
            w.write_all(b"\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{")?;
            for (i, (k, v)) in other.iter().enumerate() {
                if i > 0 {
                    w.write_all(b",")?;
                }
                write_str(w, k)?;
                w.write_all(b":")?;
                write_str(w, v)?;
            }
            w.write_all(b"}}\n")?;
            w.flush()
        })()
        .map_err(io_err(&p))
    }
}

/// `"name":value` for each field (with `prefix` on names); the count written.
fn write_fields<W: Write + ?Sized>(
    w: &mut W,
    ty: &EventType,
    values: &[Value],
    prefix: &str,
) -> std::io::Result<usize> {
    let mut n = 0;
    for (i, v) in values.iter().enumerate() {
        if n > 0 {
            w.write_all(b",")?;
        }
        let f = ty.fields.get(i);
        match f {
            Some(f) if prefix.is_empty() => write_str(w, &f.name)?,
            Some(f) => write_str(w, &format!("{prefix}{}", f.name))?,
            None => write_str(w, &format!("{prefix}field{i}"))?,
        }
        w.write_all(b":")?;
        write_value(w, v, f.map(|f| &f.ty))?;
        n += 1;
    }
    Ok(n)
}

impl Slices for ChromeWriter {
    type Extra = ();

    fn pairing(&mut self) -> &mut Pairing<()> {
        &mut self.p
    }

    fn track(&mut self, key: TrackKey) -> Result<usize> {
        ChromeWriter::track(self, key)
    }

    /// An instant event on `track`, its fields as args.
    fn instant(
        &mut self,
        time: Timestamp,
        ty: &EventType,
        fields: &[Value],
        track: usize,
        unmatched: bool,
    ) -> Result<()> {
        let cat = if unmatched {
            format!("{},unmatched", ty.category).into()
        } else {
            std::borrow::Cow::Borrowed(ty.category.as_str())
        };
        let at = At::new(&cat, self.rel(time), self.tracks[track]);
        self.emit(|w| {
            write_head(w, INSTANT, Name::Text(&ty.name), &at)?;
            write_fields(w, ty, fields, "")?;
            w.write_all(b"}}")
        })?;
        self.counts.instants += 1;
        Ok(())
    }

    /// An `X` event from an entry and its exit.
    fn slice(
        &mut self,
        open: &Open,
        close: &Event,
        close_ti: &TypeInfo<()>,
        track: usize,
    ) -> Result<()> {
        let Some(oti) = self.p.types.get(&open.type_id).cloned() else {
            return Ok(());
        };
        self.namebuf.clear();
        self.namebuf
            .push_str(&self.p.stems[open.stem as usize].name);
        if let Some(v) = oti.id_field.and_then(|i| open.fields.get(i)) {
            self.namebuf.push(' ');
            v.push_text(&mut self.namebuf);
        }
        let name = std::mem::take(&mut self.namebuf);
        let ts = self.rel(open.time);
        let mut dur = close.time.0.saturating_sub(open.time.0);
        if dur < 0 {
            self.loss
                .degrade("durations", "exit earlier than its entry: duration 0");
            dur = 0;
        }
        let at = At {
            dur: Some(dur),
            ..At::new(&oti.ty.category, ts, self.tracks[track])
        };
        let r = self.emit(|w| {
            write_head(w, b"\"X\"", Name::Text(&name), &at)?;
            let n = write_fields(w, &oti.ty, &open.fields, "")?;
            if !close.fields.is_empty() {
                if n > 0 {
                    w.write_all(b",")?;
                }
                write_fields(w, &close_ti.ty, &close.fields, "exit.")?;
            }
            w.write_all(b"}}")
        });
        self.namebuf = name;
        r?;
        self.counts.durations += 1;
        Ok(())
    }

    /// One edge of a running slice on the CPU's "running" track: `B` when a
    /// process is switched in, `E` when it is switched out. Begin/end pairs
    /// (not `X`) because slices touch: an `E` and the next `B` carry the
    /// same timestamp text, so no viewer's float `ts + dur` can make them
    /// overlap.
    fn run_edge(&mut self, c: u32, pid: i64, at: Timestamp, begin: bool) -> Result<()> {
        let track = self.track(TrackKey::CpuRun(c))?;
        let tr = self.tracks[track];
        let label = if begin {
            let l = self.process_label(pid);
            if let Some(r) = self.p.cpus.get_mut(&c) {
                r.label.clone_from(&l);
            }
            l
        } else {
            // The end names the slice as its begin did.
            self.p
                .cpus
                .get(&c)
                .map(|r| r.label.clone())
                .unwrap_or_else(|| self.process_label(pid))
        };
        let at = At::new("sched", self.rel(at), tr);
        self.emit(|w| {
            let ph: &[u8] = if begin { b"\"B\"" } else { b"\"E\"" };
            write_head(w, ph, Name::Text(&label), &at)?;
            w.write_all(b"\"pid\":")?;
            write_int(w, pid)?;
            w.write_all(b"}}")
        })?;
        if begin {
            self.counts.running += 1;
        }
        Ok(())
    }
}

impl TraceWriter for ChromeWriter {
    fn write_item(&mut self, item: &Item) -> Result<()> {
        if self.origin.is_none() && item.is_data() {
            self.origin = item.time();
        }
        match item {
            Item::EventType(t) => {
                self.p.define_type(t, ());
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
            Item::Help(_) | Item::Labels(_) => {
                note_dropped(&mut self.loss, super::WRITES, item);
                Ok(())
            }
            Item::Event(e) => self.event(e),
            Item::EventRun(r) => r.each_item(|it| self.write_item(it)),
            Item::Sample(s) => self.sample(s),
            Item::Mark(m) => self.mark(m),
            Item::Annotation(a) => self.annotation(a),
        }
    }

    fn finish(mut self: Box<Self>) -> Result<LossReport> {
        self.close()?;
        let c = &self.counts;
        let mut loss = std::mem::take(&mut self.loss);
        self.p.report(
            &mut loss,
            &[
                ("durations (X, paired entry/exit)", c.durations),
                ("running slices (X, from schedchange)", c.running),
                ("instants (i)", c.instants),
                ("counter values (C)", c.counters),
                ("metadata (M)", c.metadata),
            ],
        );
        Ok(loss)
    }
}
