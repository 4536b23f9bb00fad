//! Chrome trace-event JSON (the Trace Event Format's JSON Object form), for
//! Perfetto UI, chrome://tracing, speedscope and the like. Export only.
//! See docs/chrome.md.
//!
//! - `json`: timestamps, strings and typed values as JSON text.
//! - `writer`: tracks, pairing, counters and the streamed output.

pub mod json;
pub mod writer;

use crate::formats::format::{Export, FormatInfo, Kind, Rule};
use crate::model::FormatId;

/// What this format is and can do (`polytrace formats`).
pub const INFO: FormatInfo = FormatInfo::export(
    FormatId::ChromeJson,
    "Chrome trace-event JSON for Perfetto UI / chrome://tracing (export only)",
    WRITES,
)
.with_text_output();

/// What a Chrome trace-event file holds (`docs/chrome.md`).
pub const WRITES: &[Rule] = &[
    Rule::kept(
        Kind::Events,
        "slices (entry/exit pairs) and instants on per-CPU tracks",
    ),
    Rule::kept(Kind::Samples, "counter tracks per metric and instance"),
    Rule::some_dropped(
        Kind::Samples,
        "metric values",
        "per-metric error codes",
        "PCP error code instead of a value",
    ),
    Rule::some_dropped(
        Kind::Samples,
        "metric values",
        "NaN and infinities",
        "NaN or infinite: no JSON number",
    ),
    Rule::some_degraded(
        Kind::Samples,
        "string metric values",
        "strings",
        "written as instants where the value changes; repeats left out",
    ),
    Rule::some_dropped(
        Kind::Samples,
        "metric values",
        "aggregates and event records",
        "aggregate or compound value: not a counter (CTF or PCP carry it)",
    ),
    Rule::kept(Kind::Metrics, "as counter track names"),
    Rule::kept(Kind::Indoms, "instance names in the counter series"),
    Rule::dropped_all(Kind::Help, "Chrome trace JSON has no place for them"),
    Rule::dropped_all(Kind::Labels, "Chrome trace JSON has no place for them"),
    Rule::kept(Kind::Marks, "instants on a marks track"),
    Rule::kept(Kind::Annotations, "instants on a notes track"),
];

/// The format: its declaration and its writer.
pub const FORMAT: Export = Export {
    info: &INFO,
    create: |req| Ok(Box::new(writer::ChromeWriter::new(req.out, req.header)?)),
    dataset: false,
};
