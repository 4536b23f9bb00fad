//! The convert driver: open with detection, run the stages, write, commit.

use crate::error::{Diagnostic, Error, Result, Severity};
use crate::formats::{self, Format};
use crate::input::{Input, InputKind};
use crate::model::*;
use crate::options::WriteOptions;
use crate::output::{OutTarget, Staged};
use std::path::{Path, PathBuf};

/// Resolve the format of an input: `--from` wins, else detection.
pub fn format_of(input: &Input, from: Option<FormatId>) -> Result<&'static dyn Format> {
    match from {
        Some(id) => Ok(formats::get(id)),
        None => formats::detect(input),
    }
}

/// Resolve a command-line input and its format. Stdin stays a stream for a
/// format that reads one (KPI text, possibly a live pipe); for any other it
/// is first copied to a temporary file, so that it reads exactly as a file
/// with the same bytes would.
pub fn resolve_input(path: &Path, from: Option<FormatId>) -> Result<(Input, &'static dyn Format)> {
    let mut input = Input::resolve(path)?;
    if input.kind == InputKind::Stdin {
        let streams = match from {
            Some(id) => formats::get(id).reads_stream(),
            None => formats::detect(&input).is_ok_and(|f| f.reads_stream()),
        };
        if !streams {
            input.spool_stdin()?;
        }
    }
    let fmt = format_of(&input, from)?;
    Ok((input, fmt))
}

/// What one conversion did.
#[derive(Debug, Default)]
pub struct ConvertOutcome {
    pub loss: LossReport,
    pub diagnostics: Vec<Diagnostic>,
    pub outputs: Vec<PathBuf>,
}

impl ConvertOutcome {
    /// Damaged input, salvaged prefix written: exit code 1. What the target
    /// cannot hold is not damage; it is reported, and `--strict` refuses it.
    pub fn salvaged(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == Severity::Salvaged)
    }
}

/// Where `convert` writes.
#[derive(Debug, Clone)]
pub enum Dest<'a> {
    Path { path: &'a Path, force: bool },
    Stdout,
}

/// What adapting loses, shared with the adapter that fills it in.
pub type SharedLoss = std::rc::Rc<std::cell::RefCell<LossReport>>;

/// The stages every conversion into `to` needs: another format's framing
/// is never data (its writer makes its own), and metric-only targets take
/// events as per-type counters.
pub fn adapt(
    reader: Box<dyn TraceReader>,
    to: &dyn Format,
) -> (Box<dyn TraceReader>, Option<SharedLoss>) {
    let mut reader = reader;
    let source = reader.header().source;
    if source != to.id() {
        reader = Box::new(crate::stages::Unframe::wrap(reader));
        // A .dlt holds messages in arrival order, not clock order; another
        // format gets them in time order (a DLT target keeps the file's).
        if source == FormatId::Dlt {
            reader = Box::new(crate::stages::Reorder::wrap(reader));
        }
    }
    let mut adapter_loss = None;
    if matches!(to.id(), FormatId::Pcp | FormatId::Mmv) {
        let ec = crate::stages::EventCounters::wrap(reader);
        adapter_loss = Some(ec.loss.clone());
        reader = Box::new(ec);
    }
    // KPI lines from any process data (proc.* metrics, process events).
    if to.id() == FormatId::Kpi {
        let k = crate::stages::KpiFromProc::wrap(reader);
        adapter_loss = Some(k.loss.clone());
        reader = Box::new(k);
    }
    (reader, adapter_loss)
}

/// Pass every item on; returns how many data items the writer received.
fn feed(reader: &mut dyn TraceReader, w: &mut dyn TraceWriter) -> Result<u64> {
    let mut data = 0u64;
    while let Some(item) = reader.next_item()? {
        data += item.is_data() as u64;
        w.write_item(&item)?;
    }
    Ok(data)
}

/// Nothing to write is an error, not an empty file that no reader accepts.
fn nothing_check(data: u64) -> Result<()> {
    if data == 0 {
        return Err(Error::nothing_to_write(
            "nothing to write",
            "no data item (event, sample, mark or annotation) reached the writer: \
             the input has none, or none falls inside --begin/--end",
        ));
    }
    Ok(())
}

/// Name the input in a [`Error::NothingToWrite`] ("… in FILE: why").
pub fn name_input(e: Error, input: &str) -> Error {
    match e {
        Error::NothingToWrite { what, why } => Error::NothingToWrite {
            what: format!("{what} in {input}"),
            why,
        },
        e => e,
    }
}

/// Stream `reader` into a new output of format `to`.
pub fn convert(
    reader: Box<dyn TraceReader>,
    inputs: &[PathBuf],
    to: &dyn Format,
    dest: Dest<'_>,
    wopts: &WriteOptions,
) -> Result<ConvertOutcome> {
    let caps = to.caps();
    if !caps.write {
        return Err(formats::not_implemented(to.id(), "writing"));
    }
    let header = reader.header().clone();
    let mut out = ConvertOutcome::default();
    let (mut reader, adapter_loss) = adapt(reader, to);
    match dest {
        Dest::Stdout => {
            if !caps.text_output {
                return Err(Error::Usage(format!(
                    "the {} format is binary: give -o FILE, not stdout",
                    to.id()
                )));
            }
            let mut w = to.create(&OutTarget::Stdout, &header, wopts)?;
            nothing_check(feed(reader.as_mut(), w.as_mut())?)?;
            out.loss = w.finish()?;
            if let Some(l) = &adapter_loss {
                out.loss.merge(&l.borrow());
            }
        }
        Dest::Path { path, force } => {
            let staged = Staged::new(path, inputs, force)?;
            // A writer refuses (NothingToWrite) when none of the data suits
            // its format; the staged output is then dropped unseen.
            let written = (|| {
                let mut w = to.create(&OutTarget::Path(staged.path()), &header, wopts)?;
                nothing_check(feed(reader.as_mut(), w.as_mut())?)?;
                w.finish()
            })();
            out.loss = written.map_err(|e| staged.relabel(e))?;
            // What the stages adapted counts as loss too (--strict sees it).
            if let Some(l) = &adapter_loss {
                out.loss.merge(&l.borrow());
            }
            if wopts.strict && out.loss.has_loss() {
                return Err(Error::Strict(format!(
                    "nothing written; the {} writer would lose data:\n{}",
                    to.id(),
                    out.loss
                )));
            }
            out.outputs = staged.commit()?;
        }
    }
    out.diagnostics = reader.diagnostics().to_vec();
    Ok(out)
}
