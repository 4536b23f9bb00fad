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
    let mut reader = reader;
    let mut out = ConvertOutcome::default();
    // Writers never invent a date: a source without one needs --time-origin.
    if to.info().absolute_time.needed(wopts) && !crate::stages::origin::has_dates(reader.header()) {
        let input = inputs
            .first()
            .map(PathBuf::as_path)
            .unwrap_or(Path::new("-"));
        return Err(crate::stages::origin::no_dates_error(
            reader.header(),
            input,
            to.id().name(),
        ));
    }
    let source = reader.header().source;
    // Another format's framing is never data (its writer makes its own),
    // and its raw clocks reach the writer only if they mean what it takes.
    let mut stripped = None;
    if source != to.id() {
        reader = Box::new(crate::stages::Unframe::wrap(reader));
        let (r, s) = crate::stages::RawClocks::wrap(
            reader,
            formats::get(source).info().raw_clock,
            to.info().raw_clock,
        );
        reader = r;
        stripped = s;
    }
    let header = reader.header().clone();
    // MMV holds no events: it takes them as per-type counters (a PCP
    // archive holds them as event records).
    let mut adapter_loss = None;
    if to.id() == FormatId::Mmv {
        let ec = crate::stages::EventCounters::wrap(reader);
        adapter_loss = Some(ec.loss.clone());
        reader = Box::new(ec);
    }
    let input = inputs
        .first()
        .cloned()
        .unwrap_or_else(|| PathBuf::from("-"));
    let strict = |loss: &LossReport| -> Result<()> {
        // An empty file is no conversion (design/model.md §5).
        if source != to.id() && loss.written.values().all(|&n| n == 0) {
            return Err(Error::Usage(format!(
                "{}: nothing to write: the {} format holds none of what this {source} \
                 source has; nothing written\n{}",
                input.display(),
                to.id(),
                loss
            )));
        }
        if wopts.strict && loss.has_loss() {
            return Err(Error::Strict(format!(
                "nothing written; the {} writer would lose data:\n{}",
                to.id(),
                loss
            )));
        }
        Ok(())
    };
    let run = |reader: &mut Box<dyn TraceReader>, target: &OutTarget| -> Result<LossReport> {
        let mut w = to.create(target, &header, wopts)?;
        while let Some(item) = reader.next_item()? {
            w.write_item(&item)?;
        }
        let mut loss = w.finish()?;
        if let Some(l) = &adapter_loss {
            loss.merge(&l.borrow());
        }
        if let Some(s) = stripped.as_ref().filter(|s| s.count.get() > 0) {
            loss.dropped
                .insert(("raw clocks".into(), s.why.into()), s.count.get());
        }
        Ok(loss)
    };
    match dest {
        Dest::Stdout => {
            if !caps.text_output {
                return Err(Error::Usage(format!(
                    "the {} format is binary: give -o FILE, not stdout",
                    to.id()
                )));
            }
            if wopts.strict {
                // Held in a file until the loss is known: nothing reaches
                // stdout if the conversion is refused.
                let tmp = tempfile::NamedTempFile::new().map_err(|e| Error::io("<tmp>", e))?;
                out.loss = run(&mut reader, &OutTarget::Path(tmp.path().to_path_buf()))?;
                strict(&out.loss)?;
                let mut f =
                    std::fs::File::open(tmp.path()).map_err(|e| Error::io(tmp.path(), e))?;
                std::io::copy(&mut f, &mut std::io::stdout().lock())
                    .map_err(|e| Error::io("<stdout>", e))?;
            } else {
                out.loss = run(&mut reader, &OutTarget::Stdout)?;
                strict(&out.loss)?;
            }
        }
        Dest::Path { path, force } => {
            let staged = Staged::new(path, inputs, force)?;
            out.loss = run(&mut reader, &OutTarget::Path(staged.path()))?;
            strict(&out.loss)?;
            out.outputs = staged.commit()?;
        }
    }
    out.diagnostics = reader.diagnostics().to_vec();
    Ok(out)
}
