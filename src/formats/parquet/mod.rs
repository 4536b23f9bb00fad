//! Parquet export: a long ("tidy") table of samples, one row per value,
//! and a table of events, for SQL engines that read Parquet (DuckDB,
//! Spark, Trino). Streamed in bounded row groups with the `parquet`
//! crate's file writer (no arrow); strings dictionary-encoded from their
//! interned ids, pages zstd-compressed.
//! See docs/parquet.md.
//!
//! - `schema`: the two tables' columns (the documented schema).
//! - `table`: one Parquet file being written: rows gather in column
//!   batches of fixed size, the writer closes row groups at its bounds.
//! - `writer`: the trace writer: one file pair, or with `convert DIR`
//!   one pair per host and day of a Hive-partitioned dataset.

pub mod schema;
pub mod table;
pub mod writer;

use crate::formats::format::{rules, AbsoluteTime, Export, FormatInfo, Rule};
use crate::model::FormatId;

pub const INFO: FormatInfo = FormatInfo::export(
    FormatId::Parquet,
    "Parquet tables of samples (one row per value) and events, for DuckDB and Spark (export only)",
    WRITES,
)
.with_absolute_time(AbsoluteTime::Needed);

/// What the two tables hold (docs/parquet.md).
pub const WRITES: &[Rule] = &rules! {
    kept(Events, "one row per event in OUT.events.parquet, fields typed in three maps"),
    kept(Samples, "one row per metric, instance and time"),
    some_degraded(Samples, "u64 values", "unsigned values above 2^63-1", "no int64 holds them: value_f64 (nearest double) and value_str (exact)"),
    some_dropped(Samples, "metric error codes", "per-metric error codes", "a value row has no place for them"),
    some_dropped(Samples, "event-record values", "event records", "not a row value (chrome-json and ctf carry them)"),
    kept(Metrics, "as the metric, units and semantics columns"),
    kept(Indoms, "instance names in the instance column"),
    dropped_all(Help, "the tables have no place for them"),
    dropped_all(Labels, "the tables have no place for them (the host is a column)"),
    kept(Marks, "as events of type `mark`"),
    kept(Annotations, "as events of type `annotation` (text in fields_str)"),
};

/// The format: its declaration and its writer.
pub const FORMAT: Export = Export {
    info: &INFO,
    create: |req| {
        Ok(Box::new(writer::ParquetWriter::new(
            req.out, req.header, req.opts,
        )?))
    },
    dataset: true,
};
