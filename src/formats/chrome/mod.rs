//! Chrome trace-event JSON (the Trace Event Format's JSON Object form), for
//! Perfetto UI, chrome://tracing, speedscope and the like. Export only.
//! See docs/chrome.md.
//!
//! - `json`: timestamps, strings and typed values as JSON text.
//! - `pairs`: which event types open and close a duration.
//! - `writer`: tracks, pairing, counters and the streamed output.

pub mod json;
pub mod pairs;
pub mod writer;

use crate::error::Result;
use crate::formats::format::{Caps, Format, FormatInfo};
use crate::input::Input;
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
};

impl Format for ChromeFormat {
    fn info(&self) -> &'static FormatInfo {
        &INFO
    }
    fn detect(&self, _: &Input) -> u8 {
        0
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
