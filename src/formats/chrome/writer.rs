//! The Chrome trace-event writer: the JSON Object form, one event per line,
//! streamed through a bounded buffer. Decisions (tracks, pairing, time) are
//! in docs/chrome.md.

use super::json::{write_f64, write_int, write_str, write_us, write_value};
use crate::error::{Error, Result};
use crate::formats::kpi::text::X_CTID;
use crate::formats::pairs::tracks::{
    annotation_name, is_counter_value, Describe, Layout, SliceExport, Track,
};
use crate::formats::pairs::{slice_end, Edge, Pairing, Point, Slices, Span, TrackKey, TypeInfo};
use crate::model::*;
use crate::output::{ChunkedWriter, OutTarget};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

pub struct Series {
    /// The counter name as a JSON string literal (escaped once).
    name_json: String,
    track: Track,
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
    p: Pairing<()>,
    lay: Layout<Series>,
    counts: Counts,
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
            p: Pairing::default(),
            lay: Layout::new(header.source),
            counts: Counts::default(),
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
        t.0.saturating_sub(self.lay.origin.unwrap_or(t).0)
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

    fn close(&mut self) -> Result<()> {
        self.end_pairs()?;
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
        if let Some(o) = self.lay.origin {
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

impl Describe for ChromeWriter {
    type Series = Series;

    fn layout(&mut self) -> &mut Layout<Series> {
        &mut self.lay
    }

    fn new_series(&mut self, track: Track, name: String) -> Series {
        Series {
            name_json: serde_json::to_string(&name).expect("a string serialises"),
            track,
        }
    }

    fn describe_process(&mut self, pid: i64, name: &str, sort: Option<i64>) -> Result<()> {
        self.meta("process_name", pid, pid, "name", name)?;
        if let Some(s) = sort {
            self.meta_int("process_sort_index", pid, pid, s)?;
        }
        Ok(())
    }

    fn describe_thread(
        &mut self,
        pid: i64,
        tid: i64,
        name: &str,
        sort: Option<i64>,
    ) -> Result<u64> {
        self.meta("thread_name", pid, tid, "name", name)?;
        if let Some(s) = sort {
            self.meta_int("thread_sort_index", pid, tid, s)?;
        }
        Ok(0)
    }

    fn rename(&mut self, t: Track, name: &str) -> Result<()> {
        self.meta("process_name", t.pid, t.pid, "name", name)?;
        self.meta("thread_name", t.pid, t.tid, "name", name)
    }

    /// The idle task keeps pid 0, named once.
    fn idle_group(&mut self) -> Result<i64> {
        if !self.lay.groups.contains_key("\0idle") {
            self.lay.groups.insert("\0idle".into(), 0);
            self.meta("process_name", 0, 0, "name", "idle (pid 0)")?;
        }
        Ok(0)
    }
}

impl SliceExport for ChromeWriter {
    const RULES: &'static [crate::formats::format::Rule] = super::WRITES;

    fn type_extra(&mut self, _: &EventType) {}

    fn finish_export(&mut self) -> Result<LossReport> {
        self.report()
    }

    fn placed_event(&mut self, e: &Event, ti: &TypeInfo<()>, home: usize) -> Result<()> {
        self.paired_event(e, ti, home)
    }

    fn value(&mut self, m: MetricId, inst: InstId, v: &Value, t: Timestamp) -> Result<()> {
        if !is_counter_value(v) {
            return self.other_value(m, inst, v, t);
        }
        if v.as_f64().is_some_and(|x| !x.is_finite()) {
            self.lay
                .loss
                .drop_item("metric values", "NaN or infinite: no JSON number");
            return Ok(());
        }
        let ts = self.rel(t);
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
        self.lay.series_mut(m, inst).expect("made above").name_json = name;
        r?;
        self.counts.counters += 1;
        Ok(())
    }

    fn string_value(&mut self, m: MetricId, inst: InstId, s: &str, t: Timestamp) -> Result<()> {
        let ts = self.rel(t);
        let se = self.series(m, inst)?;
        let (tr, name) = (se.track, se.name_json.clone());
        let at = At::new("metric", ts, tr);
        self.emit(|w| {
            write_head(w, INSTANT, Name::Json(&name), &at)?;
            w.write_all(b"\"value\":")?;
            write_str(w, s)?;
            w.write_all(b"}}")
        })?;
        self.counts.instants += 1;
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
            .map(|p| (self.lay.metric_name(p.metric), &p.value))
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

    fn mark(&mut self, m: &Mark) -> Result<()> {
        let track = self.place(TrackKey::Marks)?;
        let at = At::new("mark", self.rel(m.time), self.lay.tracks[track]);
        // A global instant: a line across the whole view.
        self.emit(|w| {
            write_head(w, b"\"i\",\"s\":\"g\"", Name::Text("mark"), &at)?;
            w.write_all(b"}}")
        })?;
        self.counts.instants += 1;
        Ok(())
    }

    fn annotation(&mut self, a: &Annotation) -> Result<()> {
        let track = self.annotation_track(a)?;
        let at = At::new("annotation", self.rel(a.time), self.lay.tracks[track]);
        // The name is the start of the text; all of it is in args.
        let name = annotation_name(&a.text);
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
}

impl Slices for ChromeWriter {
    type Extra = ();

    fn pairing(&mut self) -> &mut Pairing<()> {
        &mut self.p
    }

    fn track(&mut self, key: TrackKey) -> Result<usize> {
        self.place(key)
    }

    /// An instant event on its track, its fields as args.
    fn instant(&mut self, i: Point<'_>) -> Result<()> {
        let cat = if i.unmatched {
            format!("{},unmatched", i.ty.category).into()
        } else {
            std::borrow::Cow::Borrowed(i.ty.category.as_str())
        };
        let at = At::new(&cat, self.rel(i.time), self.lay.tracks[i.track]);
        self.emit(|w| {
            write_head(w, INSTANT, Name::Text(&i.ty.name), &at)?;
            write_fields(w, i.ty, i.fields, "")?;
            w.write_all(b"}}")
        })?;
        self.counts.instants += 1;
        Ok(())
    }

    /// An `X` event from an entry and its exit.
    fn slice(&mut self, s: Span<'_, ()>) -> Result<()> {
        let ts = self.rel(s.open.time);
        let dur = slice_end(s.open, s.close, &mut self.lay.loss)
            .0
            .saturating_sub(s.open.time.0);
        let at = At {
            dur: Some(dur),
            ..At::new(&s.ty.ty.category, ts, self.lay.tracks[s.track])
        };
        self.emit(|w| {
            write_head(w, b"\"X\"", Name::Text(s.name), &at)?;
            let n = write_fields(w, &s.ty.ty, &s.open.fields, "")?;
            if !s.close.fields.is_empty() {
                if n > 0 {
                    w.write_all(b",")?;
                }
                write_fields(w, &s.close_ti.ty, &s.close.fields, "exit.")?;
            }
            w.write_all(b"}}")
        })?;
        self.counts.durations += 1;
        Ok(())
    }

    /// One edge of a running slice on the CPU's "running" track: `B` when a
    /// process is switched in, `E` when it is switched out. Begin/end pairs
    /// (not `X`) because slices touch: an `E` and the next `B` carry the
    /// same timestamp text, so no viewer's float `ts + dur` can make them
    /// overlap.
    fn run_edge(&mut self, e: Edge) -> Result<()> {
        let tr = self.lay.tracks[e.track];
        let label = if e.begin {
            self.p.run_label(e.cpu, self.lay.process_label(e.pid))
        } else {
            // The end names the slice as its begin did.
            self.p
                .cpus
                .get(&e.cpu)
                .map(|r| r.label.clone())
                .unwrap_or_else(|| self.lay.process_label(e.pid))
        };
        let at = At::new("sched", self.rel(e.at), tr);
        self.emit(|w| {
            let ph: &[u8] = if e.begin { b"\"B\"" } else { b"\"E\"" };
            write_head(w, ph, Name::Text(&label), &at)?;
            w.write_all(b"\"pid\":")?;
            write_int(w, e.pid)?;
            w.write_all(b"}}")
        })?;
        if e.begin {
            self.counts.running += 1;
        }
        Ok(())
    }
}

impl ChromeWriter {
    /// The trace's end, then what was written, for the loss report.
    fn report(&mut self) -> Result<LossReport> {
        self.close()?;
        let c = &self.counts;
        let wrote = [
            ("durations (X, paired entry/exit)", c.durations),
            ("running slices (X, from schedchange)", c.running),
            ("instants (i)", c.instants),
            ("counter values (C)", c.counters),
            ("metadata (M)", c.metadata),
        ];
        Ok(self.report_counts(&wrote))
    }
}
