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

use crate::formats::format::{rules, Export, FormatInfo, Rule};
use crate::model::FormatId;

/// What this format is and can do (`polytrace formats`).
pub const INFO: FormatInfo = FormatInfo::export(
    FormatId::Csv,
    "CSV tables of samples (like pmrep -o csv) and events (export only)",
    WRITES,
)
.with_text_output();

/// What the CSV tables hold with the default options (`docs/csv.md`).
pub const WRITES: &[Rule] = &rules! {
    dropped_all(Events, "the samples table has no place for them (--events writes an events table)"),
    kept(Samples, "one row per time, one column per metric and instance"),
    some_degraded(Samples, "metric error codes", "per-metric error codes", "a CSV cell has no place for them: left empty"),
    some_dropped(Samples, "event-record values", "event records", "not a cell value (chrome-json and ctf carry them)"),
    kept(Metrics, "as column names"),
    kept(Indoms, "instance names in the column names"),
    dropped_all(Help, "CSV has no place for them"),
    dropped_all(Labels, "CSV has no place for them"),
    dropped_all(Marks, "a CSV table has no place for them"),
    dropped_all(Annotations, "the samples table has no place for them (--events lists them)"),
};

/// The format: its declaration and its writer.
pub const FORMAT: Export = Export {
    info: &INFO,
    create: |req| {
        Ok(Box::new(writer::CsvWriter::new(
            req.out, req.header, req.opts,
        )?))
    },
    dataset: false,
};
