//! CSV export: samples as a table (one row per timestamp, one column per
//! metric[instance], like `pmrep -o csv`), events as a second table with
//! `--events`. RFC 4180 through the `csv` crate. See docs/csv.md.
//!
//! - `glob`: `--columns` patterns.
//! - `spool`: rows wait in a temporary file until the columns are known.
//! - `writer`: the two tables.

pub mod glob;
pub mod spool;
pub mod writer;

use crate::error::Result;
use crate::formats::format::{Caps, Format, FormatInfo};
use crate::input::Input;
use crate::model::{FormatId, Header, TraceWriter};
use crate::options::WriteOptions;
use crate::output::OutTarget;

pub struct CsvFormat;

/// What this format is and can do (`polytrace formats`).
pub const INFO: FormatInfo = FormatInfo {
    id: FormatId::Csv,
    caps: Caps {
        read: false,
        write: true,
        dump: false,
        text_output: true,
    },
    describe: "CSV tables of samples (like pmrep -o csv) and events (export only)",
};

impl Format for CsvFormat {
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
        opts: &WriteOptions,
    ) -> Result<Box<dyn TraceWriter>> {
        Ok(Box::new(writer::CsvWriter::new(out, header, opts)?))
    }
}
