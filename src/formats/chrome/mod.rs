//! Chrome trace-event JSON (the Trace Event Format's JSON Object form), for
//! Perfetto UI, chrome://tracing, speedscope and the like. Export only.
//! See docs/chrome.md.
//!
//! - `json`: timestamps, strings and typed values as JSON text.
//! - `writer`: tracks, pairing, counters and the streamed output.

pub mod json;
pub mod writer;

use crate::formats::format::{rules, Export, FormatInfo, Rule};
use crate::formats::pairs::tracks::{
    ERROR_CODES_DROPPED, MARKS_AS_INSTANTS, NOTES_AS_INSTANTS, STRINGS_AS_INSTANTS,
};
use crate::model::FormatId;

/// What this format is and can do (`polytrace formats`).
pub const INFO: FormatInfo = FormatInfo::export(
    FormatId::ChromeJson,
    "Chrome trace-event JSON for Perfetto UI / chrome://tracing (export only)",
    WRITES,
)
.with_text_output();

/// What a Chrome trace-event file holds (`docs/chrome.md`).
pub const WRITES: &[Rule] = &rules! {
    kept(Events, "slices (entry/exit pairs) and instants on per-CPU tracks"),
    kept(Samples, "counter tracks per metric and instance"),
    ERROR_CODES_DROPPED,
    some_dropped(Samples, "metric values", "NaN and infinities", "NaN or infinite: no JSON number"),
    STRINGS_AS_INSTANTS,
    some_dropped(Samples, "metric values", "aggregates and event records", "aggregate or compound value: not a counter (CTF or PCP carry it)"),
    kept(Metrics, "as counter track names"),
    kept(Indoms, "instance names in the counter series"),
    dropped_all(Help, "Chrome trace JSON has no place for them"),
    dropped_all(Labels, "Chrome trace JSON has no place for them"),
    MARKS_AS_INSTANTS,
    NOTES_AS_INSTANTS,
};

/// The format: its declaration and its writer.
pub const FORMAT: Export = Export {
    info: &INFO,
    create: |req| Ok(Box::new(writer::ChromeWriter::new(req.out, req.header)?)),
    dataset: false,
};
