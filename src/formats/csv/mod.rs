//! CSV export: samples as a table (one row per timestamp, one column per
//! metric[instance], like `pmrep -o csv`), events as a second table with
//! `--events`. RFC 4180 through the `csv` crate. See docs/csv.md.
//!
//! - `glob`: `--columns` patterns.
//! - `spool`: rows wait in a temporary file until the columns are known.
//! - `writer`: the two tables.

pub mod glob;
pub mod spool;
pub mod writer;

use crate::error::Result;
use crate::formats::format::{AbsoluteTime, Caps, Format, FormatInfo, Kind, RawClock, Rule};
use crate::model::{FormatId, Header, TraceWriter};
use crate::options::WriteOptions;
use crate::output::OutTarget;

pub struct CsvFormat;

/// What this format is and can do (`polytrace formats`).
pub const INFO: FormatInfo = FormatInfo {
    id: FormatId::Csv,
    caps: Caps {
        read: false,
        write: true,
        dump: false,
        text_output: true,
    },
    describe: "CSV tables of samples (like pmrep -o csv) and events (export only)",
    absolute_time: AbsoluteTime::NotNeeded,
    raw_clock: RawClock::None,
    reads: &[],
    writes: WRITES,
    undated: false,
};

/// What the CSV tables hold with the default options (`docs/csv.md`).
pub const WRITES: &[Rule] = &[
    Rule::dropped(
        Kind::Events,
        "events",
        "the samples table has no place for them (--events writes an events table)",
    ),
    Rule::kept(
        Kind::Samples,
        "one row per time, one column per metric and instance",
    ),
    Rule::some_degraded(
        Kind::Samples,
        "metric error codes",
        "per-metric error codes",
        "a CSV cell has no place for them: left empty",
    ),
    Rule::some_dropped(
        Kind::Samples,
        "event-record values",
        "event records",
        "not a cell value (chrome-json and ctf carry them)",
    ),
    Rule::kept(Kind::Metrics, "as column names"),
    Rule::kept(Kind::Indoms, "instance names in the column names"),
    Rule::dropped(Kind::Help, "help texts", "CSV has no place for them"),
    Rule::dropped(Kind::Labels, "label sets", "CSV has no place for them"),
    Rule::dropped(Kind::Marks, "marks", "a CSV table has no place for them"),
    Rule::dropped(
        Kind::Annotations,
        "annotations",
        "the samples table has no place for them (--events lists them)",
    ),
];

impl Format for CsvFormat {
    fn info(&self) -> &'static FormatInfo {
        &INFO
    }
    fn create(
        &self,
        out: &OutTarget,
        header: &Header,
        opts: &WriteOptions,
    ) -> Result<Box<dyn TraceWriter>> {
        Ok(Box::new(writer::CsvWriter::new(out, header, opts)?))
    }
}
