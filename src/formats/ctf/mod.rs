//! CTF 1.8 export: a trace directory (TSDL `metadata` + one binary data
//! stream per CPU or source stream) that babeltrace2 and Trace Compass
//! read. Export only. See docs/ctf.md for the mapping and its decisions.

pub mod encode;
pub mod metadata;
pub mod packet;
pub mod types;
pub mod writer;

use crate::error::{Error, Result};
use crate::formats::format::{Caps, Format, FormatInfo};
use crate::input::Input;
use crate::model::{FormatId, Header, TraceWriter};
use crate::options::WriteOptions;
use crate::output::OutTarget;

/// What this format is and can do (`polytrace formats`).
pub const INFO: FormatInfo = FormatInfo {
    id: FormatId::Ctf,
    caps: Caps {
        read: false,
        write: true,
        dump: false,
        text_output: false,
    },
    describe: "CTF 1.8 trace directory for babeltrace2 / Trace Compass (export only)",
};

pub struct CtfFormat;

impl Format for CtfFormat {
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
        let path = match out {
            OutTarget::Path(p) => p.clone(),
            OutTarget::Stdout => {
                return Err(Error::Usage(
                    "a CTF trace is a directory: give -o DIR".into(),
                ))
            }
        };
        Ok(Box::new(writer::CtfWriter::create(
            &path,
            header,
            writer::Config::default(),
        )?))
    }
}
