//! The columns of the two tables (docs/parquet.md lists them). One schema
//! per table for every input, so that the files of a dataset read as one.
//! Written in Parquet's schema language; the root keeps the name arrow-rs
//! gives it, so files read the same whichever writer made them.

use parquet::schema::parser::parse_message_type;
use parquet::schema::types::{SchemaDescPtr, SchemaDescriptor};
use std::sync::Arc;

/// The samples table: one row per value of a metric and instance at a time.
const SAMPLES: &str = "message arrow_schema {
    required int64 time (TIMESTAMP(NANOS, true));
    required binary source (STRING);
    optional binary host (STRING);
    required binary metric (STRING);
    optional binary instance (STRING);
    optional double value_f64;
    optional int64 value_i64;
    optional binary value_str (STRING);
    required binary units (STRING);
    required binary semantics (STRING);
}";

/// The events table: one row per event, mark and annotation; the fields
/// in three `MAP<string, value>` columns.
const EVENTS: &str = "message arrow_schema {
    required int64 time (TIMESTAMP(NANOS, true));
    required binary source (STRING);
    optional binary host (STRING);
    required binary type (STRING);
    optional int32 cpu;
    optional int64 pid;
    optional binary stream (STRING);
    required group fields_i64 (MAP) {
        repeated group entries { required binary key (STRING); optional int64 value; }
    }
    required group fields_f64 (MAP) {
        repeated group entries { required binary key (STRING); optional double value; }
    }
    required group fields_str (MAP) {
        repeated group entries { required binary key (STRING); optional binary value (STRING); }
    }
}";

fn parse(text: &str) -> SchemaDescPtr {
    let t = parse_message_type(text).expect("the tables' schemas parse");
    Arc::new(SchemaDescriptor::new(Arc::new(t)))
}

pub fn samples() -> SchemaDescPtr {
    parse(SAMPLES)
}

pub fn events() -> SchemaDescPtr {
    parse(EVENTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_columns() {
        let s = samples();
        assert_eq!(s.num_columns(), 10);
        assert_eq!(s.column(4).max_def_level(), 1);
        let e = events();
        // Three maps of key and value.
        assert_eq!(e.num_columns(), 13);
        let key = e.column(7);
        assert_eq!(key.path().string(), "fields_i64.entries.key");
        assert_eq!((key.max_def_level(), key.max_rep_level()), (1, 1));
        assert_eq!(e.column(8).max_def_level(), 2);
    }
}
