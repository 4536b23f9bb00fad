//! Format registry: one module per format, each implementing [`Format`].
//! Detection goes by content; `--from`/`--to` override it.

use crate::error::{Diagnostic, Error, Result};
use crate::input::{Input, InputKind};
use crate::model::{FormatId, Header, TraceReader, TraceWriter};
use crate::options::{DumpOptions, ReadOptions, WriteOptions};
use crate::output::OutTarget;
use std::io::Write;

pub mod dlt;
pub mod kpi;
pub mod ltt;
pub mod mmv;
pub mod pcp;
pub mod timeline;

/// What a format implementation can do in this build.
#[derive(Debug, Clone, Copy, Default)]
pub struct Caps {
    pub read: bool,
    pub write: bool,
    pub dump: bool,
    /// The writer writes text and may go to stdout.
    pub text_output: bool,
}

/// One format: reader, writer and native listing.
pub trait Format: Sync {
    fn id(&self) -> FormatId;
    fn caps(&self) -> Caps;
    /// One line for `polytrace formats`.
    fn describe(&self) -> &'static str;
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

/// A format known by name only (export-only writers still to come).
struct Planned(FormatId, &'static str);

impl Format for Planned {
    fn id(&self) -> FormatId {
        self.0
    }
    fn caps(&self) -> Caps {
        Caps::default()
    }
    fn describe(&self) -> &'static str {
        self.1
    }
    fn detect(&self, _: &Input) -> u8 {
        0
    }
}

static KPI: kpi::KpiFormat = kpi::KpiFormat;
static DLT: dlt::DltFormat = dlt::DltFormat;
static MMV: mmv::MmvFormat = mmv::MmvFormat;
static PCP: pcp::PcpFormat = pcp::PcpFormat;
static LTT: ltt::LttFormat = ltt::LttFormat;
static TIMELINE: timeline::TimelineFormat = timeline::TimelineFormat;
static CHROME: Planned = Planned(
    FormatId::ChromeJson,
    "Chrome trace-event JSON (export only, planned)",
);
static CSV: Planned = Planned(
    FormatId::Csv,
    "CSV of samples and events (export only, planned)",
);

/// Every format, in `polytrace formats` order.
pub fn all() -> [&'static dyn Format; 8] {
    [&KPI, &DLT, &MMV, &PCP, &LTT, &TIMELINE, &CHROME, &CSV]
}

pub fn get(id: FormatId) -> &'static dyn Format {
    all()
        .into_iter()
        .find(|f| f.id() == id)
        .expect("every FormatId is registered")
}

/// Pick the format of `input` by content.
pub fn detect(input: &Input) -> Result<&'static dyn Format> {
    let best = all()
        .into_iter()
        .map(|f| (f.detect(input), f))
        .max_by_key(|(score, _)| *score);
    match best {
        Some((score, f)) if score > 0 => Ok(f),
        _ => {
            let msg = match input.kind {
                InputKind::File if input.probe.is_empty() => "empty file: no format to detect",
                InputKind::Stdin if input.probe.is_empty() => "empty input on stdin",
                InputKind::Stdin => {
                    "unrecognised format on stdin (give --from; binary formats need a file)"
                }
                InputKind::Dir => "directory is not an LTT trace (no info/system.xml)",
                _ => "unrecognised format (give --from to choose one)",
            };
            Err(Error::Detect {
                path: input.path.clone(),
                msg: msg.into(),
            })
        }
    }
}
