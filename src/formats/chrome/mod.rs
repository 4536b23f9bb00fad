//! Chrome trace-event JSON (the Trace Event Format's JSON Object form), for
//! Perfetto UI, chrome://tracing, speedscope and the like. Export only.
//! See docs/chrome.md.
//!
//! - `json`: timestamps, strings and typed values as JSON text.
//! - `writer`: tracks, pairing, counters and the streamed output.

pub mod json;
pub mod writer;

use crate::error::Result;
use crate::formats::format::{AbsoluteTime, Caps, Format, FormatInfo, Kind, RawClock, Rule};
use crate::model::{FormatId, Header, TraceWriter};
use crate::options::WriteOptions;
use crate::output::OutTarget;

pub struct ChromeFormat;

/// What this format is and can do (`polytrace formats`).
pub const INFO: FormatInfo = FormatInfo {
    id: FormatId::ChromeJson,
    caps: Caps {
        read: false,
        write: true,
        dump: false,
        text_output: true,
    },
    describe: "Chrome trace-event JSON for Perfetto UI / chrome://tracing (export only)",
    absolute_time: AbsoluteTime::NotNeeded,
    raw_clock: RawClock::None,
    reads: &[],
    writes: WRITES,
    undated: false,
};

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
    Rule::dropped(
        Kind::Help,
        "help texts",
        "Chrome trace JSON has no place for them",
    ),
    Rule::dropped(
        Kind::Labels,
        "label sets",
        "Chrome trace JSON has no place for them",
    ),
    Rule::kept(Kind::Marks, "instants on a marks track"),
    Rule::kept(Kind::Annotations, "instants on a notes track"),
];

impl Format for ChromeFormat {
    fn info(&self) -> &'static FormatInfo {
        &INFO
    }
    fn create(
        &self,
        out: &OutTarget,
        header: &Header,
        _opts: &WriteOptions,
    ) -> Result<Box<dyn TraceWriter>> {
        Ok(Box::new(writer::ChromeWriter::new(out, header)?))
    }
}
