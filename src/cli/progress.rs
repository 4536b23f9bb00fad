//! Progress on stderr, only when stderr is a terminal (and not `-q`): the
//! current file of a batch, and a byte-based bar with an ETA from readers
//! that can tell how far they are ([`TraceReader::progress`]).

use crate::model::{Header, Item, TraceReader};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressFinish, ProgressStyle};
use std::io::IsTerminal;

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

/// Passes items through and moves `bar` over `[base, base + span)` as the
/// reader reports its bytes consumed.
pub struct ProgressReader {
    inner: Box<dyn TraceReader>,
    bar: ProgressBar,
    base: u64,
    span: u64,
    since: u32,
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
            bar: bar.clone(),
            base,
            span,
            since: 0,
        })
    }

    fn update(&self) {
        if let Some((done, total)) = self.inner.progress() {
            let part = if total == 0 {
                self.span
            } else {
                (self.span as u128 * done.min(total) as u128 / total as u128) as u64
            };
            self.bar.set_position(self.base + part);
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
    fn progress(&self) -> Option<(u64, u64)> {
        self.inner.progress()
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
