//! KPI text lines: the datasets dlt-kpi logs (NEW, STP, ACT, CHK, IRQ with
//! BEG/END groups), bare or as `dlt-convert -a` prints them. The dataset and
//! group logic (`assemble`, `grouper`) is shared with the DLT format.

pub mod assemble;
pub mod dataset;
pub mod grouper;
pub mod schema;
pub mod text;
pub mod truncated;

use crate::error::{Diagnostic, Error, Result};
use crate::formats::format::{Caps, Format, FormatInfo};
use crate::input::{Input, InputKind};
use crate::model::{FormatId, Header, TraceReader, TraceWriter};
use crate::options::{DumpOptions, ReadOptions, WriteOptions};
use crate::output::OutTarget;
use std::io::Write;
use text::{KpiTextReader, KpiTextWriter, Style};

pub struct KpiFormat;

impl KpiFormat {
    pub fn open_text(&self, input: &Input, opts: &ReadOptions) -> Result<KpiTextReader> {
        if !matches!(input.kind, InputKind::File | InputKind::Stdin) {
            return Err(Error::Usage(format!(
                "{}: KPI text is read from a file or stdin",
                input.name()
            )));
        }
        KpiTextReader::new(input.open_stream()?, input.path.clone(), opts)
    }
}

/// What this format is and can do (`polytrace formats`).
pub const INFO: FormatInfo = FormatInfo {
    id: FormatId::Kpi,
    caps: Caps {
        read: true,
        write: true,
        dump: true,
        text_output: true,
    },
    describe: "dlt-kpi text lines (bare datasets or dlt-convert -a lines)",
};

impl Format for KpiFormat {
    fn info(&self) -> &'static FormatInfo {
        &INFO
    }
    fn detect(&self, input: &Input) -> u8 {
        match text::text_style(&input.probe) {
            Some(Style::Bare) => 90,
            Some(Style::Convert) => 60,
            None => 0,
        }
    }
    fn open(&self, input: &Input, opts: &ReadOptions) -> Result<Box<dyn TraceReader>> {
        Ok(Box::new(self.open_text(input, opts)?))
    }
    fn create(
        &self,
        out: &OutTarget,
        header: &Header,
        opts: &WriteOptions,
    ) -> Result<Box<dyn TraceWriter>> {
        match out {
            OutTarget::Stdout => Ok(Box::new(KpiTextWriter::new(
                std::io::BufWriter::with_capacity(1 << 16, std::io::stdout()),
                "<stdout>".into(),
                header,
                opts,
            ))),
            OutTarget::Path(p) => {
                let f = std::fs::File::create(p).map_err(|e| Error::io(p, e))?;
                Ok(Box::new(KpiTextWriter::new(
                    std::io::BufWriter::with_capacity(1 << 16, f),
                    p.clone(),
                    header,
                    opts,
                )))
            }
        }
    }
    /// The native listing is the lines re-rendered from the model, in the
    /// input's own style: what `convert --to kpi` would write.
    fn dump(
        &self,
        input: &Input,
        ropts: &ReadOptions,
        dopts: &DumpOptions,
        out: &mut dyn Write,
    ) -> Result<Vec<Diagnostic>> {
        if dopts.select.names_metrics()
            || dopts.select.cpus.is_some()
            || dopts.select.exclude_cpus.is_some()
        {
            return Err(crate::Error::Usage(
                "a KPI line holds one dataset whole (an ACT line is five metrics of one process): --metric/--instance/--cpu do not apply to the KPI listing; --event kpi.NEW (STP, CHK) and --begin/--end do (or use --style common)".into(),
            ));
        }
        let end = if dopts.window.needs_end() {
            if input.kind == InputKind::Stdin {
                return Err(crate::Error::Usage(
                    "-DURATION counts from the end: it needs a file, not stdin".into(),
                ));
            }
            self.time_bounds(input, ropts, true)?.1
        } else {
            None
        };
        let r: Box<dyn TraceReader> = Box::new(self.open_text(input, ropts)?);
        let mut r = crate::model::select::Subset::wrap(r, &dopts.window, &dopts.select, end)?;
        let header = r.header().clone();
        let mut w = KpiTextWriter::new(out, "<stdout>".into(), &header, &WriteOptions::default());
        while let Some(item) = r.next_item()? {
            w.write(&item)?;
        }
        w.close()?;
        Ok(r.diagnostics().to_vec())
    }
}
