//! DLT storage files (.dlt, protocol v1): any application's log messages,
//! and dlt-kpi's messages as KPI data (spec kpi-dlt.md §4–§6, §9). See
//! docs/dlt.md.
//!
//! - `layout`: binary structures, header checks, record writer helpers.
//! - `scan`: record framing with resynchronisation and damage reports.
//! - `text`: the `dlt-convert -a`/`-s` rendering.
//! - `dump`: the native listing.
//! - `args`: verbose arguments ↔ typed fields.
//! - `reader` / `writer`: model conversion; KPI through the shared KPI
//!   assembler and grouper, every other message as a typed event.

pub mod args;
pub mod dump;
pub mod layout;
pub mod reader;
pub mod scan;
pub mod text;
pub mod writer;

use crate::error::{Diagnostic, Error, Result};
use crate::formats::format::{AbsoluteTime, Caps, Format, FormatInfo, Kind, RawClock, Rule};
use crate::input::Input;
use crate::model::{FormatId, Header, TraceReader, TraceWriter};
use crate::options::{DumpOptions, ReadOptions, WriteOptions};
use crate::output::OutTarget;
use std::io::{Read, Write};

pub struct DltFormat;

/// The input as an unbuffered byte stream: the scanner does its own
/// buffering, so a file is read with no BufReader in between.
pub(crate) fn open_raw(input: &Input) -> Result<Box<dyn Read>> {
    match input.file() {
        Some(file) => {
            let f = std::fs::File::open(file).map_err(|e| Error::io(&input.path, e))?;
            Ok(Box::new(f))
        }
        None => Ok(Box::new(input.open_stream()?)),
    }
}

/// What this format is and can do (`polytrace formats`).
pub const INFO: FormatInfo = FormatInfo {
    id: FormatId::Dlt,
    caps: Caps {
        read: true,
        write: true,
        dump: true,
        text_output: false,
    },
    describe: "DLT storage files (.dlt): log messages (typed events) and dlt-kpi data",
    absolute_time: AbsoluteTime::Needed,
    raw_clock: RawClock::Native("dlt-0.1ms"),
    reads: &[
        Kind::Events,
        Kind::Samples,
        Kind::Metrics,
        Kind::Indoms,
        Kind::Help,
        Kind::Annotations,
    ],
    writes: WRITES,
    undated: false,
};

/// The DLT writer groups as KPI lines do; annotations become log messages.
pub const WRITES: &[Rule] = &[
    Rule::kept(Kind::Events, "NEW/STP/CHK datasets in their groups")
        .from(&[FormatId::Kpi, FormatId::Dlt]),
    Rule::some_dropped(
        Kind::Events,
        "events",
        "all but kpi NEW/STP/CHK",
        "KPI lines carry only NEW/STP/CHK events",
    ),
    Rule::kept(
        Kind::Samples,
        "kpi.proc.* as ACT, kpi.irq.count as IRQ datasets",
    )
    .from(&[FormatId::Kpi, FormatId::Dlt]),
    Rule::some_dropped(
        Kind::Samples,
        "values",
        "all but kpi.proc.* and kpi.irq.count",
        "KPI lines carry only kpi.proc.* and kpi.irq.count",
    ),
    Rule::some_dropped(
        Kind::Samples,
        "error values",
        "per-metric error codes",
        "KPI lines have no error codes",
    ),
    Rule::some_degraded(
        Kind::Samples,
        "values",
        "non-integers",
        "rounded to an integer",
    ),
    Rule::kept(Kind::Metrics, "implied by the dataset kinds"),
    Rule::kept(Kind::Indoms, "process and IRQ names in the datasets"),
    Rule::kept(Kind::Help, "the kpi.* help is implied by the lines")
        .from(&[FormatId::Kpi, FormatId::Dlt]),
    Rule::some_dropped(
        Kind::Help,
        "help texts",
        "help of other metrics",
        "KPI lines have no help text",
    ),
    Rule::dropped(Kind::Labels, "label sets", "KPI lines have no labels"),
    Rule::dropped(Kind::Marks, "marks", "DLT KPI files have no marks"),
    Rule::kept(Kind::Annotations, "as log messages"),
];

impl Format for DltFormat {
    fn info(&self) -> &'static FormatInfo {
        &INFO
    }
    fn detect(&self, input: &Input) -> u8 {
        let p = &input.probe;
        if p.len() >= layout::MIN_RECORD && layout::check_headers(p).is_ok() {
            100
        } else if p.starts_with(&layout::PATTERN) || p.starts_with(&layout::PATTERN_V2) {
            80
        } else if (1..p.len().saturating_sub(layout::MIN_RECORD))
            .any(|i| p[i..].starts_with(&layout::PATTERN) && layout::check_headers(&p[i..]).is_ok())
        {
            // Damaged start (garbage before the first record): --salvage
            // reads it.
            50
        } else {
            0
        }
    }
    fn near_miss(&self, input: &Input) -> Option<(u64, String)> {
        let p = &input.probe;
        let cut = !p.is_empty() && p.len() < layout::PATTERN.len();
        (cut && (layout::PATTERN.starts_with(p) || layout::PATTERN_V2.starts_with(p))).then(|| {
            (
                p.len() as u64,
                format!(
                    "the file ends after {} bytes, inside the storage header's \"DLT\\x01\" pattern",
                    p.len()
                ),
            )
        })
    }
    fn open(&self, input: &Input, opts: &ReadOptions) -> Result<Box<dyn TraceReader>> {
        Ok(Box::new(reader::DltReader::open(input, opts)?))
    }
    fn create(
        &self,
        out: &OutTarget,
        header: &Header,
        opts: &WriteOptions,
    ) -> Result<Box<dyn TraceWriter>> {
        match out {
            OutTarget::Stdout => Err(Error::Usage(
                "the dlt format is binary: give -o FILE, not stdout".into(),
            )),
            OutTarget::Path(p) => {
                let f = std::fs::File::create(p).map_err(|e| Error::io(p, e))?;
                Ok(Box::new(writer::DltWriter::new(
                    std::io::BufWriter::with_capacity(1 << 16, f),
                    p.clone(),
                    header,
                    opts,
                )))
            }
        }
    }
    fn dump(
        &self,
        input: &Input,
        ropts: &ReadOptions,
        dopts: &DumpOptions,
        out: &mut dyn Write,
    ) -> Result<Vec<Diagnostic>> {
        dump::dump(input, ropts, dopts, out)
    }
}
