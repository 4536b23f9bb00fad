//! The columns of the two tables (docs/parquet.md lists them). One schema
//! per table for every input, so that the files of a dataset read as one.

use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use std::sync::Arc;

/// Strings that repeat row after row (names, units): Arrow dictionary
/// arrays, written as Parquet dictionary pages.
fn dict() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

fn time() -> Field {
    Field::new(
        "time",
        DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
        false,
    )
}

/// The samples table: one row per value of a metric and instance at a time.
pub fn samples() -> SchemaRef {
    Arc::new(Schema::new(vec![
        time(),
        Field::new("source", dict(), false),
        Field::new("host", dict(), true),
        Field::new("metric", dict(), false),
        Field::new("instance", dict(), true),
        Field::new("value_f64", DataType::Float64, true),
        Field::new("value_i64", DataType::Int64, true),
        Field::new("value_str", DataType::Utf8, true),
        Field::new("units", dict(), false),
        Field::new("semantics", dict(), false),
    ]))
}

/// `MAP<string, value>` as Arrow's map builder makes it (`key`, `value`).
pub fn map_of(value: DataType) -> DataType {
    DataType::Map(
        Arc::new(Field::new(
            "entries",
            DataType::Struct(Fields::from(vec![
                Field::new("key", DataType::Utf8, false),
                Field::new("value", value, true),
            ])),
            false,
        )),
        false,
    )
}

/// The events table: one row per event, mark and annotation.
pub fn events() -> SchemaRef {
    Arc::new(Schema::new(vec![
        time(),
        Field::new("source", dict(), false),
        Field::new("host", dict(), true),
        Field::new("type", dict(), false),
        Field::new("cpu", DataType::Int32, true),
        Field::new("pid", DataType::Int64, true),
        Field::new("stream", dict(), true),
        Field::new("fields_i64", map_of(DataType::Int64), false),
        Field::new("fields_f64", map_of(DataType::Float64), false),
        Field::new("fields_str", map_of(DataType::Utf8), false),
    ]))
}
