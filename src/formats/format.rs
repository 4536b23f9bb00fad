//! What every format implements: the [`Format`] trait and its one
//! declaration, [`FormatInfo`]. Kept apart from the registry (`mod.rs`) so
//! that format folders depend on this file and the registry on them, never
//! the other way round.

use crate::error::{Diagnostic, Error, Result};
use crate::input::Input;
use crate::model::{FormatId, Header, Timestamp, TraceReader, TraceWriter};
use crate::options::{DumpOptions, ReadOptions, WriteOptions};
use crate::output::OutTarget;
use std::io::Write;

/// What a format implementation can do in this build.
#[derive(Debug, Clone, Copy, Default)]
pub struct Caps {
    pub read: bool,
    pub write: bool,
    pub dump: bool,
    /// The writer writes text and may go to stdout.
    pub text_output: bool,
}

/// A format's one declaration: its name, what it can do, one line about it.
#[derive(Debug, Clone, Copy)]
pub struct FormatInfo {
    pub id: FormatId,
    pub caps: Caps,
    /// One line for `polytrace formats`.
    pub describe: &'static str,
}

/// One format: reader, writer and native listing.
pub trait Format: Sync {
    fn info(&self) -> &'static FormatInfo;
    fn id(&self) -> FormatId {
        self.info().id
    }
    fn caps(&self) -> Caps {
        self.info().caps
    }
    fn describe(&self) -> &'static str {
        self.info().describe
    }
    /// How sure we are that `input` is this format: 0 = no, 100 = magic matched.
    fn detect(&self, input: &Input) -> u8;
    fn open(&self, input: &Input, opts: &ReadOptions) -> Result<Box<dyn TraceReader>> {
        let _ = (input, opts);
        Err(not_implemented(self.id(), "reading"))
    }
    /// Create a writer. `header` is the source stream's header.
    fn create(
        &self,
        out: &OutTarget,
        header: &Header,
        opts: &WriteOptions,
    ) -> Result<Box<dyn TraceWriter>> {
        let _ = (out, header, opts);
        Err(not_implemented(self.id(), "writing"))
    }
    /// The native-style listing (pmdumplog, mmvdump, Snabb's dump, …).
    /// Returns the diagnostics met (salvage ones make the exit code 1).
    fn dump(
        &self,
        input: &Input,
        ropts: &ReadOptions,
        dopts: &DumpOptions,
        out: &mut dyn Write,
    ) -> Result<Vec<Diagnostic>> {
        let _ = (input, ropts, dopts, out);
        Err(not_implemented(self.id(), "dumping"))
    }
    /// The trace's start and, with `need_end`, its end: what `+DURATION`
    /// and `-DURATION` count from. The start is the header's (PCP label,
    /// MMV creation time) or the first data item's time, the end the
    /// latest data item's. The default reads the stream (up to the first
    /// data item when the end is not needed); formats that know their
    /// bounds cheaply say so.
    fn time_bounds(
        &self,
        input: &Input,
        opts: &ReadOptions,
        need_end: bool,
    ) -> Result<(Option<Timestamp>, Option<Timestamp>)> {
        let mut r = self.open(input, opts)?;
        let mut start = r.header().start;
        let mut end: Option<Timestamp> = None;
        while let Some(item) = r.next_item()? {
            let Some(t) = item.time().filter(|_| item.is_data()) else {
                continue;
            };
            start.get_or_insert(t);
            if !need_end {
                break;
            }
            end = Some(end.map_or(t, |e| e.max(t)));
        }
        Ok((start, end))
    }
    /// Structural validation. The default reads every item.
    fn check(&self, input: &Input, opts: &ReadOptions) -> Result<Vec<Diagnostic>> {
        let mut r = self.open(input, opts)?;
        while r.next_item()?.is_some() {}
        Ok(r.diagnostics().to_vec())
    }
}

pub fn not_implemented(id: FormatId, what: &str) -> Error {
    Error::Unsupported(format!(
        "{what} the {id} format is not implemented yet in this build (see `polytrace formats`)"
    ))
}
