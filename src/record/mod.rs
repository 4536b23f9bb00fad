//! `polytrace record`: sample /proc as dlt-kpi does (processes, IRQs) plus
//! PCP-named system metrics, stamp every record with CLOCK_REALTIME and the
//! CPU cycle counter, and write the stream through any format's writer.
//!
//! The writer is created when the recording ends (or when the in-memory
//! buffer is full, or at once for stdout) so that the header can carry the
//! counter rate measured at the start *and* at the end. See docs/record.md.

pub mod clock;
pub mod live;
pub mod procfs;
pub mod sampler;
pub mod signal;
pub mod sysmetrics;

use crate::error::{Error, Result};
use crate::formats;
use crate::model::*;
use crate::options::WriteOptions;
use crate::output::{OutTarget, Staged};
use sampler::{Config, Sampler, Stats};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

/// Header extras keys (namespace `record.`), defined with the model.
pub use crate::model::keys::{
    CHECK_INTERVAL_NS as X_CHECK_INTERVAL_NS, CLK_TCK as X_CLK_TCK, INTERVAL_NS as X_INTERVAL_NS,
    NCPU as X_NCPU, RAW_CLOCK as X_CLOCK, SCANS as X_SCANS, STOPPED_BY as X_STOPPED_BY,
    TSC_ANCHOR as X_TSC_ANCHOR, TSC_HZ as X_TSC_HZ, TSC_HZ_END as X_TSC_HZ_END,
    TSC_HZ_START as X_TSC_HZ_START,
};

/// When to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// After this many ns (scans at 0, I, 2I, … while ≤ the duration).
    Duration(u64),
    /// After this many intervals (N + 1 scans: the first is the baseline).
    Intervals(u64),
    /// Only on SIGINT / SIGTERM / SIGHUP.
    Signal,
}

#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// Output path; `-` = stdout (text formats only).
    pub output: PathBuf,
    pub to: FormatId,
    pub force: bool,
    pub wopts: WriteOptions,
    pub interval_ns: u64,
    pub check_interval_ns: u64,
    pub stop: Stop,
    /// Bytes of items held in memory before the writer must be started.
    pub buffer_limit: usize,
    pub quiet: bool,
    /// Write the common listing instead of `to`'s format.
    pub listing: bool,
}

#[derive(Debug, Default)]
pub struct RecordOutcome {
    pub loss: LossReport,
    pub outputs: Vec<PathBuf>,
    pub stats: Stats,
    /// The signal that ended the recording, if any.
    pub signal: Option<i32>,
    /// The header was written before the end calibration was known.
    pub streamed: bool,
}

/// Rough heap size of an item, to bound the buffer.
fn approx_size(it: &Item) -> usize {
    match it {
        Item::Sample(s) => {
            64 + s
                .metrics
                .iter()
                .map(|m| 32 + m.values.as_ref().map(|v| v.len() * 40).unwrap_or(0))
                .sum::<usize>()
        }
        Item::Event(e) => {
            128 + e
                .fields
                .iter()
                .map(|f| match f {
                    Value::Str(s) => 32 + s.len(),
                    _ => 32,
                })
                .sum::<usize>()
        }
        Item::Indom(u) => 96 + u.instances.iter().map(|i| 40 + i.name.len()).sum::<usize>(),
        _ => 256,
    }
}

/// Calibration and identity facts that go into the header.
#[derive(Debug, Clone, Default)]
struct Calib {
    start_pair: Option<clock::ClockPair>,
    hz_start: Option<f64>,
    hz_end: Option<f64>,
    hz_whole: Option<f64>,
    first_time: Option<Timestamp>,
    first_raw: Option<u64>,
    scans: u64,
    stopped_by: Option<String>,
}

fn uname() -> Vec<(String, String)> {
    // SAFETY: uname fills the zeroed struct; fields are NUL-terminated.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return Vec::new();
    }
    let s = |f: &[libc::c_char]| {
        let b: Vec<u8> = f
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        String::from_utf8_lossy(&b).into_owned()
    };
    vec![
        ("node_name".into(), s(&u.nodename)),
        ("domainname".into(), s(&u.domainname)),
        ("kernel_name".into(), s(&u.sysname)),
        ("kernel_release".into(), s(&u.release)),
        ("kernel_version".into(), s(&u.version)),
        ("machine".into(), s(&u.machine)),
    ]
}

fn build_header(cfg: &Config, opts: &RecordOptions, cal: &Calib) -> Header {
    let mut h = Header::new(
        FormatId::Kpi,
        concat!("polytrace-record ", env!("CARGO_PKG_VERSION")),
    );
    let mut system = uname();
    h.host = system
        .iter()
        .find(|(k, _)| k == "node_name")
        .map(|(_, v)| v.clone());
    // LTT system.xml attribute names, so an LTT writer can use them as is.
    system.push(("cpu".into(), cfg.ncpu.to_string()));
    system.push((
        "arch_size".into(),
        if cfg!(target_pointer_width = "64") {
            "LP64"
        } else {
            "ILP32"
        }
        .into(),
    ));
    system.push((
        "endian".into(),
        if cfg!(target_endian = "little") {
            "LITTLE_ENDIAN"
        } else {
            "BIG_ENDIAN"
        }
        .into(),
    ));
    system.push(("operating_system".into(), "Linux".into()));
    h.system = system;
    h.time_base = TimeBase::Absolute;
    h.start = cal.first_time;
    let x = &mut h.extras;
    if let Some(name) = clock::counter_name() {
        x.set(X_CLOCK, ExtraValue::Str(name.into()));
    }
    if let Some(hz) = cal.hz_whole.or(cal.hz_start) {
        x.set(X_TSC_HZ, ExtraValue::F64(hz));
    }
    if let Some(hz) = cal.hz_start {
        x.set(X_TSC_HZ_START, ExtraValue::F64(hz));
    }
    if let Some(hz) = cal.hz_end {
        x.set(X_TSC_HZ_END, ExtraValue::F64(hz));
    }
    if let (Some(t), Some(r)) = (cal.first_time, cal.first_raw) {
        x.set(
            X_TSC_ANCHOR,
            ExtraValue::List(vec![ExtraValue::U64(r), ExtraValue::I64(t.0)]),
        );
    }
    x.set(X_INTERVAL_NS, ExtraValue::U64(opts.interval_ns));
    x.set(X_CHECK_INTERVAL_NS, ExtraValue::U64(opts.check_interval_ns));
    x.set(X_NCPU, ExtraValue::U64(cfg.ncpu as u64));
    x.set(X_CLK_TCK, ExtraValue::U64(cfg.clk_tck));
    x.set(
        crate::formats::kpi::schema::X_PAGE_SIZE,
        ExtraValue::U64(cfg.page_size),
    );
    if cal.scans > 0 {
        x.set(X_SCANS, ExtraValue::U64(cal.scans));
    }
    if let Some(s) = &cal.stopped_by {
        x.set(X_STOPPED_BY, ExtraValue::Str(s.clone()));
    }
    h
}

/// Where items go: held back until the header is complete, then a writer.
enum Sink {
    Pending { items: Vec<Item>, bytes: usize },
    Live(Live),
}

/// A started writer, fed through the same adapters `convert` uses (events
/// become per-type counters for the metric-only PCP and MMV writers).
struct Live {
    writer: Box<dyn TraceWriter>,
    queue: Rc<RefCell<VecDeque<Item>>>,
    chain: Box<dyn TraceReader>,
    adapter_loss: Option<Rc<RefCell<LossReport>>>,
}

/// A reader over items pushed in by the recorder; empty = `None` for now.
struct QueueReader {
    header: Header,
    queue: Rc<RefCell<VecDeque<Item>>>,
}

impl TraceReader for QueueReader {
    fn header(&self) -> &Header {
        &self.header
    }
    fn next_item(&mut self) -> Result<Option<Item>> {
        Ok(self.queue.borrow_mut().pop_front())
    }
}

impl Live {
    fn new(writer: Box<dyn TraceWriter>, header: Header, to: FormatId, listing: bool) -> Live {
        let queue: Rc<RefCell<VecDeque<Item>>> = Rc::default();
        let reader = Box::new(QueueReader {
            header,
            queue: queue.clone(),
        });
        let (chain, adapter_loss): (Box<dyn TraceReader>, _) =
            // MMV holds no events (a PCP archive takes them as event records).
            if !listing && to == FormatId::Mmv {
                let ec = crate::stages::EventCounters::wrap(reader);
                let loss = ec.loss.clone();
                (Box::new(ec), Some(loss))
            } else {
                (reader, None)
            };
        Live {
            writer,
            queue,
            chain,
            adapter_loss,
        }
    }

    fn feed(&mut self, items: impl IntoIterator<Item = Item>) -> Result<()> {
        self.queue.borrow_mut().extend(items);
        while let Some(it) = self.chain.next_item()? {
            self.writer.write_item(&it)?;
        }
        Ok(())
    }

    fn finish(self) -> Result<LossReport> {
        let mut loss = self.writer.finish()?;
        if let Some(l) = self.adapter_loss {
            loss.merge(&l.borrow());
        }
        Ok(loss)
    }
}

struct Out {
    staged: Option<Staged>,
    target: OutTarget,
    sink: Sink,
}

impl Out {
    fn start(&mut self, cfg: &Config, opts: &RecordOptions, cal: &Calib) -> Result<()> {
        if let Sink::Pending { items, .. } = &mut self.sink {
            let items = std::mem::take(items);
            let header = build_header(cfg, opts, cal);
            let w: Box<dyn TraceWriter> = if opts.listing {
                Box::new(ListingWriter::new(&self.target, header.clone())?)
            } else {
                formats::get(opts.to).create(&self.target, &header, &opts.wopts)?
            };
            let mut live = Live::new(w, header, opts.to, opts.listing);
            live.feed(items)?;
            self.sink = Sink::Live(live);
        }
        Ok(())
    }

    fn push(
        &mut self,
        items: &mut Vec<Item>,
        cfg: &Config,
        opts: &RecordOptions,
        cal: &Calib,
    ) -> Result<()> {
        match &mut self.sink {
            Sink::Pending { items: held, bytes } => {
                *bytes += items.iter().map(approx_size).sum::<usize>();
                held.append(items);
                if *bytes > opts.buffer_limit {
                    self.start(cfg, opts, cal)?;
                }
            }
            Sink::Live(live) => live.feed(items.drain(..))?,
        }
        Ok(())
    }
}

fn status_line(quiet: bool) -> Option<indicatif::ProgressBar> {
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = indicatif::ProgressBar::new_spinner();
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{spinner} recording {elapsed} {msg}")
    {
        pb.set_style(style);
    }
    pb.enable_steady_tick(Duration::from_millis(200));
    Some(pb)
}

/// Sleep until monotonic `deadline_ns`, in short slices so a signal ends
/// the wait promptly. Returns false if a stop was requested.
fn sleep_until(deadline_ns: i64) -> bool {
    loop {
        if signal::stop_requested() {
            return false;
        }
        let now = clock::monotonic_ns();
        if now >= deadline_ns {
            return true;
        }
        let left = (deadline_ns - now) as u64;
        std::thread::sleep(Duration::from_nanos(left.min(50_000_000)));
    }
}

/// The sampling clock: tick k is due `k × interval` after the start.
struct Ticks {
    t0: i64,
    k: u64,
    interval_ns: u64,
    stop: Stop,
}

impl Ticks {
    fn start(opts: &RecordOptions) -> Self {
        Ticks {
            t0: clock::monotonic_ns(),
            k: 0,
            interval_ns: opts.interval_ns,
            stop: opts.stop,
        }
    }

    /// Sleep until the next tick. Err when there is none: the stop
    /// condition reached (`"duration"`, `"samples"`), or None when a stop
    /// was requested during the sleep.
    fn wait(&mut self) -> std::result::Result<(), Option<&'static str>> {
        self.k += 1;
        // Skip ticks we overran rather than bursting to catch up.
        let elapsed = (clock::monotonic_ns() - self.t0).max(0) as u64;
        self.k = self.k.max(elapsed / self.interval_ns + 1);
        let next = self.k.saturating_mul(self.interval_ns);
        match self.stop {
            Stop::Duration(d) if next > d => return Err(Some("duration")),
            Stop::Intervals(n) if self.k > n => return Err(Some("samples")),
            _ => {}
        }
        if sleep_until(self.t0 + next as i64) {
            Ok(())
        } else {
            Err(None)
        }
    }
}

/// Record until the stop condition, then write and commit the output.
pub fn record(opts: &RecordOptions) -> Result<RecordOutcome> {
    let fmt = formats::get(opts.to);
    let mut caps = fmt.caps();
    if opts.listing {
        caps.write = true;
        caps.text_output = true;
    }
    if !caps.write {
        return Err(formats::not_implemented(opts.to, "writing"));
    }
    if opts.interval_ns < 1_000_000 {
        return Err(Error::Usage("--interval must be at least 1ms".into()));
    }
    // A FIFO or character device is written into as stdout would be
    // (text formats), never replaced; `Staged` refuses it for the others.
    let into_node = caps.text_output && crate::output::is_stream_node(&opts.output);
    let _redirect = if into_node {
        let dev = std::fs::OpenOptions::new()
            .write(true)
            .open(&opts.output)
            .map_err(|e| Error::io(&opts.output, e))?;
        Some(crate::output::StdoutTo::redirect(&dev).map_err(|e| Error::io(&opts.output, e))?)
    } else {
        None
    };
    let to_stdout = opts.output.as_os_str() == "-" || into_node;
    let (staged, target) = if to_stdout {
        if !caps.text_output {
            return Err(Error::Usage(format!(
                "the {} format is binary: give -o FILE, not stdout",
                opts.to
            )));
        }
        (None, OutTarget::Stdout)
    } else {
        let s = Staged::new(&opts.output, &[], opts.force, opts.to.name())?;
        let p = s.path();
        (Some(s), OutTarget::Path(p))
    };
    signal::install().map_err(|e| Error::io("sigaction", e))?;

    let mut cal = Calib::default();
    if let Some((pair, hz)) = clock::calibrate(20) {
        cal.start_pair = Some(pair);
        cal.hz_start = Some(hz);
    }
    let mut sampler = Sampler::new(Config::system(opts.check_interval_ns));
    let cfg = sampler.config().clone();
    let mut out = Out {
        staged,
        target,
        sink: Sink::Pending {
            items: sampler.definitions(),
            bytes: 0,
        },
    };
    // Stdout is for watching live: no holding back.
    let mut outcome = RecordOutcome::default();
    let pb = status_line(opts.quiet);
    let mut ticks = Ticks::start(opts);
    let mut items = Vec::new();
    let stopped_by;
    loop {
        sampler.scan(&mut items);
        if cal.first_time.is_none() {
            cal.first_time = items.iter().find_map(|i| i.time().filter(|_| i.is_data()));
            cal.first_raw = items.iter().find_map(|i| match i {
                Item::Sample(s) => s.raw_clock,
                Item::Event(e) => e.raw_clock,
                _ => None,
            });
            if to_stdout {
                out.start(&cfg, opts, &cal)?;
            }
        }
        out.push(&mut items, &cfg, opts, &cal)?;
        if let Some(pb) = &pb {
            let s = &sampler.stats;
            pb.set_message(format!(
                "{} scans, {} processes, {} NEW, {} STP",
                s.scans, s.processes, s.new, s.stp
            ));
        }
        if signal::stop_requested() {
            stopped_by = None;
            break;
        }
        if let Err(why) = ticks.wait() {
            stopped_by = why;
            break;
        }
    }
    let sig = signal::which();
    outcome.signal = (sig != 0).then_some(sig);
    cal.stopped_by = Some(match (stopped_by, sig) {
        (Some(s), _) => s.to_string(),
        (None, libc::SIGINT) => "SIGINT".into(),
        (None, libc::SIGTERM) => "SIGTERM".into(),
        (None, libc::SIGHUP) => "SIGHUP".into(),
        (None, n) => format!("signal {n}"),
    });
    cal.scans = sampler.stats.scans;
    if let Some((end_a, hz)) = clock::calibrate(20) {
        cal.hz_end = Some(hz);
        if let Some(a) = cal.start_pair {
            cal.hz_whole = clock::rate(a, end_a);
        }
    }
    if let Some(pb) = &pb {
        pb.finish_and_clear();
    }
    outcome.streamed = matches!(out.sink, Sink::Live(_));
    if outcome.streamed {
        // The header is out already: the end calibration goes in a note.
        let mut extras = Extras::default();
        for (k, v) in [(X_TSC_HZ, cal.hz_whole), (X_TSC_HZ_END, cal.hz_end)] {
            if let Some(v) = v {
                extras.set(k, ExtraValue::F64(v));
            }
        }
        let text = format!(
            "recording ended ({}); counter rate over the whole run {} Hz, at the end {} Hz",
            cal.stopped_by.as_deref().unwrap_or("?"),
            cal.hz_whole
                .map(|v| format!("{v:.0}"))
                .unwrap_or("-".into()),
            cal.hz_end.map(|v| format!("{v:.0}")).unwrap_or("-".into()),
        );
        items.push(Item::Annotation(Annotation {
            time: Timestamp(clock::realtime_ns().max(cal.first_time.map(|t| t.0).unwrap_or(0))),
            raw_clock: clock::read_counter(),
            text,
            extras,
        }));
        out.push(&mut items, &cfg, opts, &cal)?;
    } else {
        out.start(&cfg, opts, &cal)?;
    }
    let Sink::Live(live) = out.sink else {
        unreachable!("started above")
    };
    outcome.loss = live.finish()?;
    outcome.stats = sampler.stats.clone();
    if let Some(staged) = out.staged {
        if opts.wopts.strict && outcome.loss.has_loss() {
            return Err(Error::Strict(format!(
                "nothing written; the {} writer would lose data:\n{}",
                opts.to, outcome.loss
            )));
        }
        outcome.outputs = staged.commit()?;
    }
    Ok(outcome)
}

/// The loss report, one line per reason: a recording to a narrow format
/// (KPI) drops dozens of system metrics for the same reason.
pub fn loss_summary(loss: &LossReport) -> Vec<String> {
    use std::collections::BTreeMap;
    let mut lines = vec![loss.to_string().lines().next().unwrap_or("").to_string()];
    for (verb, map) in [("degraded", &loss.degraded), ("dropped", &loss.dropped)] {
        let mut by_reason: BTreeMap<&str, (u64, Vec<&str>)> = BTreeMap::new();
        for ((what, why), n) in map {
            let e = by_reason.entry(why.as_str()).or_default();
            e.0 += n;
            e.1.push(what.as_str());
        }
        for (why, (n, whats)) in by_reason {
            let mut list = whats.iter().take(3).copied().collect::<Vec<_>>().join(", ");
            if whats.len() > 3 {
                list += &format!(" and {} more kinds", whats.len() - 3);
            }
            lines.push(format!("{verb}: {n} items ({list}): {why}"));
        }
    }
    lines
}

/// `--listing`: the common listing of the recorded stream. It needs the
/// whole stream (the listing is made by a reader), so items are held until
/// `finish`.
struct ListingWriter {
    out: Box<dyn std::io::Write + Send>,
    path: String,
    header: Header,
    items: Vec<Item>,
}

impl ListingWriter {
    fn new(target: &OutTarget, header: Header) -> Result<ListingWriter> {
        let (out, path): (Box<dyn std::io::Write + Send>, String) = match target {
            OutTarget::Stdout => (Box::new(std::io::stdout()), "<stdout>".into()),
            OutTarget::Path(p) => (
                Box::new(std::fs::File::create(p).map_err(|e| Error::io(p, e))?),
                p.display().to_string(),
            ),
        };
        Ok(ListingWriter {
            out,
            path,
            header,
            items: Vec::new(),
        })
    }
}

impl TraceWriter for ListingWriter {
    fn write_item(&mut self, item: &Item) -> Result<()> {
        self.items.push(item.clone());
        Ok(())
    }
    fn finish(mut self: Box<Self>) -> Result<LossReport> {
        let n = self.items.len() as u64;
        let mut r = VecReader::new(Trace {
            header: self.header.clone(),
            items: std::mem::take(&mut self.items),
        });
        let mut w = std::io::BufWriter::new(&mut self.out);
        crate::listing::dump_common(&mut r, &mut w)?;
        use std::io::Write;
        w.flush().map_err(|e| Error::io(&self.path, e))?;
        let mut loss = LossReport::default();
        loss.wrote("items", n);
        Ok(loss)
    }
}
