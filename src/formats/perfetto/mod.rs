//! Perfetto's native trace format (protobuf `Trace` of `TracePacket`s), for
//! Perfetto UI and its trace processor. Export only. See docs/perfetto.md.
//!
//! - `wire`: protobuf wire encoding (varints, keys, patched lengths).
//! - `layout`: the field numbers of the messages written.
//! - `writer`: tracks, slices, counters, logs, interning, one packet at a time.

pub mod layout;
pub mod wire;
pub mod writer;

use crate::formats::format::{rules, Export, FormatInfo, Rule};
use crate::formats::pairs::tracks::{
    ERROR_CODES_DROPPED, MARKS_AS_INSTANTS, NOTES_AS_INSTANTS, STRINGS_AS_INSTANTS,
};
use crate::model::FormatId;

/// What this format is and can do (`polytrace formats`).
pub const INFO: FormatInfo = FormatInfo::export(
    FormatId::Perfetto,
    "Perfetto protobuf trace for Perfetto UI / trace processor (export only)",
    WRITES,
);

/// What a Perfetto trace holds (`docs/perfetto.md`).
pub const WRITES: &[Rule] = &rules! {
    kept(Events, "slices (entry/exit pairs) and instants on process/thread tracks, fields as typed annotations; log-level events also as log lines"),
    some_degraded(Events, "timestamps", "times over a second before the first item", "over a second before the first item: written at the trace's start"),
    some_degraded(Events, "timestamps", "negative relative times", "before 0 on a relative clock: written as 0"),
    some_degraded(Events, "durations", "exits before their entries", "exit earlier than its entry: duration 0"),
    some_dropped(Events, "events", "events of undefined types", "event of an undefined type (no name to show)"),
    kept(Samples, "counter tracks per metric and instance (raw values; --rate: rates of counters)"),
    ERROR_CODES_DROPPED,
    STRINGS_AS_INSTANTS,
    some_dropped(Samples, "metric values", "aggregates", "aggregate or compound value: not a counter (CTF or PCP carry it)"),
    kept(Metrics, "as counter track names and units"),
    kept(Indoms, "instance names in the counter track names"),
    dropped_all(Help, "no place for them in a Perfetto trace"),
    dropped_all(Labels, "no place for them in a Perfetto trace"),
    MARKS_AS_INSTANTS,
    NOTES_AS_INSTANTS,
};

/// The format: its declaration and its writer.
pub const FORMAT: Export = Export {
    info: &INFO,
    create: |req| {
        let p = req.path("a Perfetto trace is binary: give -o FILE.perfetto-trace")?;
        writer::create(p, req.header, req.opts)
    },
    dataset: false,
};
