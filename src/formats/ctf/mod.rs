//! CTF 1.8 export: a trace directory (TSDL `metadata` + one binary data
//! stream per CPU or source stream) that babeltrace2 and Trace Compass
//! read. Export only. See docs/ctf.md for the mapping and its decisions.

pub mod encode;
pub mod metadata;
pub mod packet;
pub mod types;
pub mod writer;

use crate::formats::format::{rules, Export, FormatInfo, RawClock, Rule};
use crate::model::FormatId;

/// What this format is and can do (`polytrace formats`).
pub const INFO: FormatInfo = FormatInfo::export(
    FormatId::Ctf,
    "CTF 1.8 trace directory for babeltrace2 / Trace Compass (export only)",
    WRITES,
)
// The clock says whether it is absolute; raw counters travel in
// `raw_clock`, named in `env.raw_clock`.
.with_raw_clock(RawClock::Carried);

/// What a CTF 1.8 trace holds.
pub const WRITES: &[Rule] = &rules! {
    kept(Events, "one event class per type, typed fields"),
    kept(Samples, "metric.<name> events"),
    degraded(Metrics, "metric descriptors", "semantics, units and help have no place in CTF 1.8 (type and instances kept)"),
    degraded(Indoms, "indom updates", "kept as the instance_name of each value, not as an event of its own"),
    dropped_all(Help, "no place in CTF 1.8 metadata"),
    dropped_all(Labels, "no place in CTF 1.8 metadata"),
    kept(Marks, "mark events"),
    kept(Annotations, "annotation events"),
};

/// The format: its declaration and its writer.
pub const FORMAT: Export = Export {
    info: &INFO,
    create: |req| {
        let path = req.path("a CTF trace is a directory: give -o DIR")?;
        let config = writer::Config::default();
        Ok(Box::new(writer::CtfWriter::create(
            path, req.header, config,
        )?))
    },
    dataset: false,
};
