//! The convert driver: open with detection, run the stages, write, commit.

use crate::error::{Diagnostic, Error, Result, Severity};
use crate::formats::{self, Format};
use crate::input::Input;
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
    if reader.header().source != to.id() {
        reader = Box::new(crate::stages::Unframe::wrap(reader));
    }
    let mut adapter_loss = None;
    if matches!(to.id(), FormatId::Pcp | FormatId::Mmv) {
        let ec = crate::stages::EventCounters::wrap(reader);
        adapter_loss = Some(ec.loss.clone());
        reader = Box::new(ec);
    }
    (reader, adapter_loss)
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
            while let Some(item) = reader.next_item()? {
                w.write_item(&item)?;
            }
            out.loss = w.finish()?;
        }
        Dest::Path { path, force } => {
            let staged = Staged::new(path, inputs, force)?;
            let mut w = to.create(&OutTarget::Path(staged.path()), &header, wopts)?;
            while let Some(item) = reader.next_item()? {
                w.write_item(&item)?;
            }
            out.loss = w.finish()?;
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
    if let Some(l) = adapter_loss {
        out.loss.merge(&l.borrow());
    }
    out.diagnostics = reader.diagnostics().to_vec();
    Ok(out)
}
