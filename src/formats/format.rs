//! What every format implements: the [`Format`] trait and its one
//! declaration, [`FormatInfo`]. Kept apart from the registry (`mod.rs`) so
//! that format folders depend on this file and the registry on them, never
//! the other way round.

use crate::error::{Diagnostic, Error, Result};
use crate::input::Input;
use crate::model::{FormatId, Header, TraceReader, TraceWriter};
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

/// Whether a format's writer needs absolute (epoch) time. A source with
/// relative or cycle time goes into such a writer only with `--time-origin`
/// (and `--tsc-hz` for cycles): writers never invent a date.
#[derive(Debug, Clone, Copy)]
pub enum AbsoluteTime {
    /// Relative and cycle times are carried as they are.
    NotNeeded,
    /// Timestamps are dates (PCP archive labels and results, DLT storage time).
    Needed,
    /// Only with some write options (KPI `--kpi-style dlt` lines).
    NeededWhen(fn(&WriteOptions) -> bool),
}

impl AbsoluteTime {
    pub fn needed(self, opts: &WriteOptions) -> bool {
        match self {
            AbsoluteTime::NotNeeded => false,
            AbsoluteTime::Needed => true,
            AbsoluteTime::NeededWhen(f) => f(opts),
        }
    }
}

/// What the `raw_clock` of a format's items means (the `keys::RAW_CLOCK`
/// names), so that no writer takes one clock for another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawClock {
    /// No raw clock: the reader gives none, the writer uses none.
    None,
    /// The reader gives, and the writer takes, raw clocks of this meaning
    /// (`tsc`, `dlt-0.1ms`, `ltt-cycles`, …); raw clocks of any other
    /// meaning are left out before the writer sees them.
    Native(&'static str),
    /// The writer keeps raw clocks of any meaning and records which.
    Carried,
}

/// A format's one declaration: its name, what it can do, one line about it.
#[derive(Debug, Clone, Copy)]
pub struct FormatInfo {
    pub id: FormatId,
    pub caps: Caps,
    /// One line for `polytrace formats`.
    pub describe: &'static str,
    /// Whether the writer needs absolute time.
    pub absolute_time: AbsoluteTime,
    /// The meaning of the format's raw clocks.
    pub raw_clock: RawClock,
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
