//! DLT storage files (.dlt, protocol v1): any application's log messages,
//! and dlt-kpi's messages as KPI data (spec kpi-dlt.md §4–§6, §9). See
//! docs/dlt.md.
//!
//! - `layout`: binary structures, header checks, record writer helpers.
//! - `scan`: record framing with resynchronisation and damage reports.
//! - `text`: the `dlt-convert -a`/`-s` rendering.
//! - `dump`: the native listing.
//! - `lifecycle`: each ECU's boots, and the message filters.
//! - `args`: verbose arguments ↔ typed fields.
//! - `reader` / `writer`: model conversion; KPI through the shared KPI
//!   assembler and grouper, every other message as a typed event.

pub mod args;
pub mod dump;
pub mod layout;
pub mod lifecycle;
pub mod reader;
pub mod scan;
pub mod text;
pub mod writer;

use crate::error::{Diagnostic, Error, Result};
use crate::formats::format::{
    buffered_file, rules, AbsoluteTime, CreateRequest, DumpRequest, Format, FormatInfo, Kind,
    RawClock, Rule,
};
use crate::formats::kpi::{KPI_EVENTS, KPI_SAMPLES};
use crate::input::Input;
use crate::model::{FormatId, TraceReader, TraceWriter};
use crate::options::ReadOptions;
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
pub const INFO: FormatInfo = FormatInfo::native(
    FormatId::Dlt,
    "DLT storage files (.dlt): log messages (typed events) and dlt-kpi data",
    &[
        Kind::Events,
        Kind::Samples,
        Kind::Metrics,
        Kind::Indoms,
        Kind::Help,
        Kind::Annotations,
    ],
    WRITES,
)
.with_absolute_time(AbsoluteTime::Needed)
.with_raw_clock(RawClock::Native(crate::model::keys::CLOCK_DLT));

/// KPI data is grouped as KPI lines are; every other event, value and
/// annotation becomes a verbose log message of its own.
pub const WRITES: &[Rule] = &rules! {
    KPI_EVENTS,
    kept(Events, "one verbose log message each: APID from the category, CTID from the name, fields as typed arguments"),
    some_degraded(Events, "events", "events with a CPU", "their CPU is not kept: DLT messages have none"),
    some_degraded(Events, "events", "enum fields", "enum values written as their label strings"),
    some_degraded(Events, "events", "array and struct fields", "arrays and structs written as their text"),
    some_degraded(Events, "events", "over 255 fields or 64 KiB", "more than a DLT message holds (255 arguments, 64 KiB): cut to fit"),
    KPI_SAMPLES,
    kept(Samples, "one log message per value: metric name, instance name, typed value"),
    some_dropped(Samples, "error codes", "per-metric error codes", "DLT messages carry values, not PCP error codes"),
    some_degraded(Samples, "values", "values without a DLT type", "written as text or cut to fit a DLT message"),
    some_degraded(Samples, "datasets", "KPI datasets over the payload limit", "longer than a message can hold: cut to fit"),
    kept(Metrics, "by name in each value message"),
    kept(Indoms, "instance names in each value message"),
    kept(Help, "the kpi.* help is implied by the datasets").from(Kpi, Dlt),
    some_dropped(Help, "help texts", "help of other metrics", "DLT messages have no help text"),
    dropped_all(Labels, "DLT messages have no labels"),
    dropped_all(Marks, "DLT files have no marks"),
    kept(Annotations, "as log messages"),
    some_degraded(Annotations, "annotations", "longer than a message", "longer than a message can hold: cut to fit"),
};

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
    fn writer(&self, req: CreateRequest) -> Result<Box<dyn TraceWriter>> {
        let p = req.path("the dlt format is binary: give -o FILE, not stdout")?;
        let out = buffered_file(p)?;
        Ok(Box::new(writer::DltWriter::new(
            out,
            p.clone(),
            req.header,
            req.opts,
        )))
    }
    fn listing(&self, req: DumpRequest, out: &mut dyn Write) -> Result<Vec<Diagnostic>> {
        dump::dump(req.input, req.ropts, req.dopts, out)
    }
}
