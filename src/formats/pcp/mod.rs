//! PCP archives v2/v3 (.meta, .0…, .index): reader, writer, pmdumplog-style
//! listing and structural check. Layout: see `docs/pcp.md` and the spec.

pub mod archive;
pub mod check;
pub mod data;
pub mod dump;
pub mod events;
pub mod index;
pub mod indoms;
pub mod layout;
pub mod meta;
pub mod reader;
pub mod selfdesc;
pub mod values;
pub mod writer;

use crate::error::{Diagnostic, Result};
use crate::formats::format::{
    rules, AbsoluteTime, Bounds, CreateRequest, DumpRequest, Format, FormatInfo, Kind, RawClock,
    Rule,
};
use crate::input::{archive_base_of, Input, InputKind};
use crate::model::{FormatId, TraceReader, TraceWriter};
use crate::options::ReadOptions;
use std::io::{Read, Write};

pub struct PcpFormat;

/// True when `b` starts with a PCP label (any version, so v1 is reported).
fn has_magic(b: &[u8]) -> bool {
    layout::be32(b, 4).is_some_and(|m| m & 0xffff_ff00 == layout::MAGIC_BASE)
}

/// What this format is and can do (`polytrace formats`).
pub const INFO: FormatInfo = FormatInfo::native(
    FormatId::Pcp,
    "PCP archives v2/v3 (.meta, .0…, .index)",
    // Every kind but annotations.
    Kind::ALL.split_at(7).0,
    WRITES,
)
.with_absolute_time(AbsoluteTime::Needed)
.with_raw_clock(RawClock::Carried);

/// A PCP archive holds everything but free text.
pub const WRITES: &[Rule] = &rules! {
    kept(Events, "PM_TYPE_HIGHRES_EVENT records, one metric per type, one parameter per field"),
    ANNOTATIONS,
    BACKWARDS,
};

/// Results of a source whose clock goes back (concatenated captures).
pub const BACKWARDS: Rule = Rule::some_degraded(
    Kind::Samples,
    "results",
    "earlier than the result before them",
    "time clamped to it (a PCP archive runs forward in time)",
);

/// The writer reports dropped annotations under this rule.
pub const ANNOTATIONS: Rule =
    Rule::dropped_all(Kind::Annotations, "PCP archives have no annotations");

impl Format for PcpFormat {
    fn info(&self) -> &'static FormatInfo {
        &INFO
    }
    fn detect(&self, input: &Input) -> u8 {
        if has_magic(&input.probe) {
            return 100;
        }
        let base = match input.kind {
            InputKind::ArchiveBase => Some(input.path.clone()),
            InputKind::File => archive_base_of(&input.path),
            _ => None,
        };
        // A compressed member or a base name: look at the .meta label.
        if let Some(base) = base {
            if let Ok(m) = archive::resolve(&base) {
                if let Ok(mut r) = archive::open_member(&m.meta) {
                    let mut b = [0u8; 8];
                    if r.read_exact(&mut b).is_ok() && has_magic(&b) {
                        return 100;
                    }
                }
                // A damaged archive (bad or empty .meta label) is still
                // ours when named by its base: report the damage positioned.
                if input.kind == InputKind::ArchiveBase {
                    return 60;
                }
            }
        }
        0
    }
    fn near_miss(&self, input: &Input) -> Option<(u64, String)> {
        // A label record cut inside its length word or magic.
        let p = &input.probe;
        if p.is_empty() || p.len() >= 8 {
            return None;
        }
        [layout::Version::V2, layout::Version::V3]
            .into_iter()
            .find(|v| {
                let mut start = (v.label_len() as u32).to_be_bytes().to_vec();
                start.extend_from_slice(&(layout::MAGIC_BASE | v.number()).to_be_bytes());
                start.starts_with(p)
            })
            .map(|v| {
                (
                    p.len() as u64,
                    format!(
                        "the file ends after {} bytes, inside a v{} label record of {} bytes",
                        p.len(),
                        v.number(),
                        v.label_len()
                    ),
                )
            })
    }
    fn open(&self, input: &Input, opts: &ReadOptions) -> Result<Box<dyn TraceReader>> {
        let m = reader::members_of(input)?;
        Ok(Box::new(reader::PcpReader::open(m, opts)?))
    }
    fn writer(&self, req: CreateRequest) -> Result<Box<dyn TraceWriter>> {
        let p = req.path("a PCP archive cannot be written to stdout: give -o BASENAME")?;
        Ok(Box::new(writer::PcpWriter::create(
            p, req.header, req.opts,
        )?))
    }
    /// The label's start and the last record's time (from the last index
    /// entry on): no pass over the data.
    fn time_bounds(&self, input: &Input, _opts: &ReadOptions, need_end: bool) -> Result<Bounds> {
        let m = reader::members_of(input)?;
        let (start, end) = dump::bounds(&m, need_end)?;
        Ok((Some(start), end))
    }
    fn check(&self, input: &Input, opts: &ReadOptions) -> Result<Vec<Diagnostic>> {
        check::check(reader::members_of(input)?, opts.salvage)
    }
    fn listing(&self, req: DumpRequest, out: &mut dyn Write) -> Result<Vec<Diagnostic>> {
        let (input, ropts, dopts) = (req.input, req.ropts, req.dopts);
        if dopts.values {
            let r = self.open(input, ropts)?;
            let end = if dopts.window.needs_end() {
                self.time_bounds(input, ropts, true)?.1
            } else {
                None
            };
            let mut r = crate::model::select::Subset::wrap(r, &dopts.window, &dopts.select, end)?;
            return values::write_values(r.as_mut(), out);
        }
        let subset = dump::Subset {
            window: dopts.window,
            select: Some(&dopts.select).filter(|s| !s.is_empty()),
        };
        dump::native_dump(reader::members_of(input)?, ropts.salvage, &subset, out)
    }
}
