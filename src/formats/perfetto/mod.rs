//! Perfetto's native trace format (protobuf `Trace` of `TracePacket`s), for
//! Perfetto UI and its trace processor. Export only. See docs/perfetto.md.
//!
//! - `wire`: protobuf wire encoding (varints, keys, patched lengths).
//! - `layout`: the field numbers of the messages written.
//! - `writer`: tracks, slices, counters, logs, interning, one packet at a time.

pub mod layout;
pub mod wire;
pub mod writer;

use crate::formats::format::{Export, FormatInfo, Kind, Rule};
use crate::model::FormatId;

/// What this format is and can do (`polytrace formats`).
pub const INFO: FormatInfo = FormatInfo::export(
    FormatId::Perfetto,
    "Perfetto protobuf trace for Perfetto UI / trace processor (export only)",
    WRITES,
);

/// What a Perfetto trace holds (`docs/perfetto.md`).
pub const WRITES: &[Rule] = &[
    Rule::kept(
        Kind::Events,
        "slices (entry/exit pairs) and instants on process/thread tracks, fields as typed annotations; log-level events also as log lines",
    ),
    Rule::some_degraded(
        Kind::Events,
        "timestamps",
        "times over a second before the first item",
        "over a second before the first item: written at the trace's start",
    ),
    Rule::some_degraded(
        Kind::Events,
        "timestamps",
        "negative relative times",
        "before 0 on a relative clock: written as 0",
    ),
    Rule::some_degraded(
        Kind::Events,
        "durations",
        "exits before their entries",
        "exit earlier than its entry: duration 0",
    ),
    Rule::some_dropped(
        Kind::Events,
        "events",
        "events of undefined types",
        "event of an undefined type (no name to show)",
    ),
    Rule::kept(
        Kind::Samples,
        "counter tracks per metric and instance (raw values; --rate: rates of counters)",
    ),
    Rule::some_dropped(
        Kind::Samples,
        "metric values",
        "per-metric error codes",
        "PCP error code instead of a value",
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
        "aggregates",
        "aggregate or compound value: not a counter (CTF or PCP carry it)",
    ),
    Rule::kept(Kind::Metrics, "as counter track names and units"),
    Rule::kept(Kind::Indoms, "instance names in the counter track names"),
    Rule::dropped_all(Kind::Help, "no place for them in a Perfetto trace",
    ),
    Rule::dropped_all(Kind::Labels, "no place for them in a Perfetto trace",
    ),
    Rule::kept(Kind::Marks, "instants on a marks track"),
    Rule::kept(Kind::Annotations, "instants on a notes track"),
];

/// The format: its declaration and its writer.
pub const FORMAT: Export = Export {
    info: &INFO,
    create: |req| {
        let p = req.path("a Perfetto trace is binary: give -o FILE.perfetto-trace")?;
        writer::create(p, req.header, req.opts)
    },
    dataset: false,
};
