//! Progress on stderr, only when stderr is a terminal (and not `-q`): the
//! current file of a batch, and a byte-based bar with an ETA from readers
//! that can tell how far they are ([`TraceReader::progress`]).

use crate::model::{Header, Item, TraceReader};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressFinish, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Items between two looks at the reader's position: cheap enough to be
/// invisible, often enough for a smooth bar.
const POLL_EVERY: u32 = 4096;

/// A bar of `total` bytes, drawn on stderr only if it is a terminal.
pub fn bar(total: u64, quiet: bool) -> ProgressBar {
    let target = if quiet || !std::io::stderr().is_terminal() {
        ProgressDrawTarget::hidden()
    } else {
        ProgressDrawTarget::stderr()
    };
    // Cleared however the run ends, so an error message starts on a clean line.
    let pb =
        ProgressBar::with_draw_target(Some(total), target).with_finish(ProgressFinish::AndClear);
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} (ETA {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb
}

/// A batch's bar: the bytes of the inputs finished, plus the part done of
/// each input in flight (one slot per worker); its message names the
/// first input still in flight (the one the summary waits for).
pub struct BatchBar {
    pub bar: ProgressBar,
    done: AtomicU64,
    parts: Vec<AtomicU64>,
    /// Per slot: the input converting there, `usize::MAX` when idle.
    current: Vec<AtomicUsize>,
    labels: Vec<String>,
}

impl BatchBar {
    /// `labels`: the message for each input, in input order.
    pub fn new(bar: ProgressBar, slots: usize, labels: Vec<String>) -> Arc<BatchBar> {
        Arc::new(BatchBar {
            bar,
            done: AtomicU64::new(0),
            parts: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            current: (0..slots).map(|_| AtomicUsize::new(usize::MAX)).collect(),
            labels,
        })
    }

    fn show(&self) {
        let parts: u64 = self.parts.iter().map(|p| p.load(Ordering::Relaxed)).sum();
        self.bar
            .set_position(self.done.load(Ordering::Relaxed) + parts);
    }

    fn name_first(&self) {
        let first = self.current.iter().map(|c| c.load(Ordering::Relaxed)).min();
        if let Some(l) = first.and_then(|i| self.labels.get(i)) {
            self.bar.set_message(l.clone());
        }
    }

    /// Input `i` starts converting in `slot`.
    pub fn start_input(&self, slot: usize, i: usize) {
        self.current[slot].store(i, Ordering::Relaxed);
        self.name_first();
    }

    /// The input in `slot` is done: its whole size counts.
    pub fn finish_input(&self, slot: usize, size: u64) {
        self.parts[slot].store(0, Ordering::Relaxed);
        self.current[slot].store(usize::MAX, Ordering::Relaxed);
        self.done.fetch_add(size, Ordering::Relaxed);
        self.name_first();
        self.show();
    }
}

/// Where a [`ProgressReader`] reports.
#[derive(Clone)]
enum Target {
    /// `[base, base + span)` of one bar.
    Bar(ProgressBar, u64),
    /// One worker's slot of a batch's bar.
    Batch(Arc<BatchBar>, usize),
}

/// Passes items through and moves its bar over a span of `span` bytes as
/// the reader reports its bytes consumed.
pub struct ProgressReader {
    inner: Box<dyn TraceReader>,
    target: Target,
    span: u64,
    since: u32,
    /// Moves the bar while a writer copies the reader verbatim.
    ticker: Option<Ticker>,
}

impl ProgressReader {
    /// Wrap `inner`; nothing to do (and no wrapper) when the bar is hidden.
    pub fn wrap(
        inner: Box<dyn TraceReader>,
        bar: &ProgressBar,
        base: u64,
        span: u64,
    ) -> Box<dyn TraceReader> {
        if bar.is_hidden() {
            return inner;
        }
        Box::new(ProgressReader {
            inner,
            target: Target::Bar(bar.clone(), base),
            span,
            since: 0,
            ticker: None,
        })
    }

    /// Wrap `inner` for one input of a batch, reporting in `slot`.
    pub fn wrap_batch(
        inner: Box<dyn TraceReader>,
        batch: &Arc<BatchBar>,
        slot: usize,
        span: u64,
    ) -> Box<dyn TraceReader> {
        if batch.bar.is_hidden() {
            return inner;
        }
        Box::new(ProgressReader {
            inner,
            target: Target::Batch(batch.clone(), slot),
            span,
            since: 0,
            ticker: None,
        })
    }

    fn update(&self) {
        if let Some((done, total)) = self.inner.progress() {
            show(&self.target, self.span, done, total);
        }
    }
}

/// Put `done` of `total` input bytes on the bar.
fn show(target: &Target, span: u64, done: u64, total: u64) {
    let part = if total == 0 {
        span
    } else {
        (span as u128 * done.min(total) as u128 / total as u128) as u64
    };
    match target {
        Target::Bar(bar, base) => bar.set_position(base + part),
        Target::Batch(b, slot) => {
            b.parts[*slot].store(part, Ordering::Relaxed);
            b.show();
        }
    }
}

/// A thread that reads a reader's shared byte counter ten times a second
/// while a writer copies that reader without items; stopped (at once, not
/// at its next look) when the [`ProgressReader`] goes.
struct Ticker {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Ticker {
    /// None when no thread can be started: the bar then stands still.
    fn start(target: Target, span: u64, counter: Arc<AtomicU64>, total: u64) -> Option<Ticker> {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let halt = stop.clone();
        let thread = std::thread::Builder::new().spawn(move || {
            while !halt.load(Ordering::Relaxed) {
                // Nothing copied yet (or no copy after all): leave the bar.
                let done = counter.load(Ordering::Relaxed);
                if done > 0 {
                    show(&target, span, done, total);
                }
                std::thread::park_timeout(std::time::Duration::from_millis(100));
            }
        });
        Some(Ticker {
            stop,
            thread: thread.ok()?,
        })
    }
}

impl Drop for ProgressReader {
    fn drop(&mut self) {
        if let Some(t) = self.ticker.take() {
            t.stop.store(true, Ordering::Relaxed);
            t.thread.thread().unpark();
            let _ = t.thread.join();
        }
    }
}

impl TraceReader for ProgressReader {
    fn header(&self) -> &Header {
        self.inner.header()
    }
    fn next_item(&mut self) -> crate::Result<Option<Item>> {
        self.since += 1;
        if self.since >= POLL_EVERY {
            self.since = 0;
            self.update();
        }
        self.inner.next_item()
    }
    fn diagnostics(&self) -> &[crate::Diagnostic] {
        self.inner.diagnostics()
    }
    fn native_counts(&self) -> Vec<(String, u64)> {
        self.inner.native_counts()
    }
    fn recycle(&mut self, item: Item) {
        self.inner.recycle(item);
    }
    fn progress(&self) -> Option<(u64, u64)> {
        self.inner.progress()
    }
    fn verbatim(&mut self) -> Option<&mut dyn std::any::Any> {
        let shared = self.inner.progress_shared();
        let v = self.inner.verbatim();
        if let (true, Some((counter, total)), None) = (v.is_some(), shared, &self.ticker) {
            self.ticker = Ticker::start(self.target.clone(), self.span, counter, total);
        }
        v
    }
    fn progress_shared(&self) -> Option<(Arc<AtomicU64>, u64)> {
        self.inner.progress_shared()
    }
}

/// Size on disk of an input's files (a directory's files, an archive's members).
pub fn input_size(input: &crate::input::Input) -> u64 {
    match input.file() {
        Some(f) => std::fs::metadata(f).map_or(0, |m| m.len()),
        None => input
            .member_paths()
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum(),
    }
}
