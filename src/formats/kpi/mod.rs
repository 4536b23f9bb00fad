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
use crate::formats::format::{
    buffered_file, rules, AbsoluteTime, CreateRequest, DumpRequest, Format, FormatInfo, Kind,
    RawClock, Rule,
};
use crate::input::{Input, InputKind};
use crate::model::{FormatId, TraceReader, TraceWriter};
use crate::options::{ReadOptions, WriteOptions};
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
pub const INFO: FormatInfo = FormatInfo::native(
    FormatId::Kpi,
    "dlt-kpi text lines (bare datasets or dlt-convert -a lines)",
    &[
        Kind::Events,
        Kind::Samples,
        Kind::Metrics,
        Kind::Indoms,
        Kind::Help,
    ],
    KPI_WRITES,
)
.with_text_output()
.with_absolute_time(AbsoluteTime::NeededWhen(|o| {
    o.kpi_style.as_deref() == Some("dlt")
}))
.with_raw_clock(RawClock::Native(crate::model::keys::CLOCK_DLT))
.undated();

/// KPI datasets from a KPI source (lines or DLT messages) stay datasets in
/// either KPI carrier.
pub const KPI_EVENTS: Rule = Rule::kept(Kind::Events, "NEW/STP/CHK datasets in their groups")
    .from(&[FormatId::Kpi, FormatId::Dlt]);
pub const KPI_SAMPLES: Rule = Rule::kept(
    Kind::Samples,
    "kpi.proc.* as ACT, kpi.irq.count as IRQ datasets",
)
.from(&[FormatId::Kpi, FormatId::Dlt]);

/// What KPI lines hold.
pub const KPI_WRITES: &[Rule] = &rules! {
    KPI_EVENTS,
    some_dropped(Events, "events", "all but kpi NEW/STP/CHK", "KPI lines carry only NEW/STP/CHK events"),
    KPI_SAMPLES,
    some_dropped(Samples, "values", "all but kpi.proc.* and kpi.irq.count", "KPI lines carry only kpi.proc.* and kpi.irq.count"),
    some_dropped(Samples, "error values", "per-metric error codes", "KPI lines have no error codes"),
    some_degraded(Samples, "values", "non-integers", "rounded to an integer"),
    some_degraded(Samples, "proc.*, hinv.ncpu and interrupt values", "process data of other sources", "turned into KPI datasets (dlt-kpi units)"),
    some_degraded(Samples, "KPI ACT cpu", "without system time", "the source has no proc.psinfo.stime: utime only"),
    some_degraded(Samples, "KPI ACT rss", "without resident size", "the source has no proc.psinfo.rss or proc.memory.rss: written as 0"),
    some_degraded(Samples, "KPI ACT ctx", "without context switches", "the source has no proc.psinfo.vctxsw/nvctxsw: written as 0"),
    some_degraded(Samples, "KPI ACT io", "without I/O counters", "the source has no proc.io.rchar/wchar or read_bytes/write_bytes: written as 0"),
    some_degraded(Samples, "KPI NEW ppid", "without parent pids", "the source has no proc.psinfo.ppid: written as 0"),
    some_degraded(Samples, "KPI ACT cpu", "without a CPU count", "the source has no hinv.ncpu: per mille of one CPU"),
    kept(Metrics, "implied by the dataset kinds"),
    kept(Indoms, "process and IRQ names in the datasets"),
    kept(Help, "the kpi.* help is implied by the lines").from(Kpi, Dlt),
    some_dropped(Help, "help texts", "help of other metrics", "KPI lines have no help text"),
    dropped_all(Labels, "KPI lines have no labels"),
    dropped_all(Marks, "KPI lines have no marks"),
    dropped_all(Annotations, "KPI lines have no annotations"),
};

impl Format for KpiFormat {
    fn info(&self) -> &'static FormatInfo {
        &INFO
    }
    fn reads_stream(&self) -> bool {
        true
    }
    fn detect(&self, input: &Input) -> u8 {
        match text::text_style(&input.probe) {
            Some(Style::Bare) => 90,
            Some(Style::Convert) => 60,
            None => 0,
        }
    }
    fn near_miss(&self, input: &Input) -> Option<(u64, String)> {
        text::near_miss(&input.probe, crate::input::PROBE_LEN)
    }
    fn open(&self, input: &Input, opts: &ReadOptions) -> Result<Box<dyn TraceReader>> {
        Ok(Box::new(self.open_text(input, opts)?))
    }
    fn writer(&self, req: CreateRequest) -> Result<Box<dyn TraceWriter>> {
        let (header, opts) = (req.header, req.opts);
        Ok(match req.out {
            OutTarget::Stdout => {
                let out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout());
                Box::new(KpiTextWriter::new(out, "<stdout>".into(), header, opts))
            }
            OutTarget::Path(p) => Box::new(KpiTextWriter::new(
                buffered_file(p)?,
                p.clone(),
                header,
                opts,
            )),
        })
    }
    /// The native listing is the lines re-rendered from the model, in the
    /// input's own style: what `convert --to kpi` would write.
    fn listing(&self, req: DumpRequest, out: &mut dyn Write) -> Result<Vec<Diagnostic>> {
        let (input, ropts, dopts) = (req.input, req.ropts, req.dopts);
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
