//! Format registry: one module per format, each implementing [`Format`].
//! Detection goes by content; `--from`/`--to` override it.

use crate::error::{Error, Result};
use crate::input::{Input, InputKind};
use crate::model::FormatId;

pub use format::{not_implemented, Caps, Format, FormatInfo};

pub mod chrome;
pub mod csv;
pub mod ctf;
pub mod dlt;
pub mod format;
pub mod kpi;
pub mod ltt;
pub mod mmv;
pub mod pcp;
pub mod timeline;

static KPI: kpi::KpiFormat = kpi::KpiFormat;
static DLT: dlt::DltFormat = dlt::DltFormat;
static MMV: mmv::MmvFormat = mmv::MmvFormat;
static PCP: pcp::PcpFormat = pcp::PcpFormat;
static LTT: ltt::LttFormat = ltt::LttFormat;
static TIMELINE: timeline::TimelineFormat = timeline::TimelineFormat;
static CTF: ctf::CtfFormat = ctf::CtfFormat;
static CHROME: chrome::ChromeFormat = chrome::ChromeFormat;
static CSV: csv::CsvFormat = csv::CsvFormat;

/// Every format, in `polytrace formats` order.
pub fn all() -> [&'static dyn Format; 9] {
    [&KPI, &DLT, &MMV, &PCP, &LTT, &TIMELINE, &CHROME, &CSV, &CTF]
}

pub fn get(id: FormatId) -> &'static dyn Format {
    all()
        .into_iter()
        .find(|f| f.id() == id)
        .expect("every FormatId is registered")
}

/// Pick the format of `input` by content.
pub fn detect(input: &Input) -> Result<&'static dyn Format> {
    let best = all()
        .into_iter()
        .map(|f| (f.detect(input), f))
        .max_by_key(|(score, _)| *score);
    match best {
        Some((score, f)) if score > 0 => Ok(f),
        _ => {
            let msg = match input.kind {
                InputKind::File if input.probe.is_empty() => "empty file: no format to detect",
                InputKind::Stdin if input.probe.is_empty() => "empty input on stdin",
                InputKind::Stdin => {
                    "unrecognised format on stdin (give --from; binary formats need a file)"
                }
                InputKind::Dir => "directory is not an LTT trace (no info/system.xml)",
                _ => "unrecognised format (give --from to choose one)",
            };
            Err(Error::Detect {
                path: input.path.clone(),
                msg: msg.into(),
            })
        }
    }
}
