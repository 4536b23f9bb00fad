//! Snabb timeline snapshots: the 2016 prototype layout A2 (with Snabb's
//! `dump()` listings, byte for byte) and the mainline layouts M2/M3.
//! See `docs/timeline.md` and `docs/specs/timeline.md`.

pub mod dump;
pub mod layout;
pub mod numfmt;
pub mod reader;
pub mod writer;

use crate::error::{Diagnostic, Error, Result};
use crate::formats::format::{
    rules, CreateRequest, DumpRequest, Format, FormatInfo, Kind, RawClock, Rule,
};
use crate::input::{Bytes, Input, InputKind};
use crate::model::{FormatId, TraceReader, TraceWriter};
use crate::options::{DumpOptions, ReadOptions};
use std::io::Write;

/// Extras keys (header, event type and event).
pub mod keys {
    /// Header: "A2", "M2" or "M3".
    pub const LAYOUT: &str = "timeline.layout";
    /// Header: ring slots.
    pub const ENTRIES: &str = "timeline.entries";
    /// Header: string table size in bytes.
    pub const STRINGS_BYTES: &str = "timeline.strings_bytes";
    /// Header: the string table up to its last non-zero byte.
    pub const STRINGS: &str = "timeline.strings";
    /// Header: A priority mask (M2: the unused u16 field).
    pub const PRIORITY_MASK: &str = "timeline.priority_mask";
    /// Header: A `next`; M: the inferred write position.
    pub const NEXT: &str = "timeline.next";
    /// Header: A `last` (ring size − 1).
    pub const LAST: &str = "timeline.last";
    /// Header: A bytes 0..3 (the would-be magic, 0 in practice).
    pub const MAGIC32: &str = "timeline.magic32";
    /// Header: M minor version.
    pub const MINOR: &str = "timeline.minor";
    /// Event: raw msg_id (A: u64; M: u16 msgid). Type (M): the msgid.
    pub const MSG_ID: &str = "timeline.msg_id";
    /// Event: ring slot.
    pub const SLOT: &str = "timeline.slot";
    /// Event (A): the logger's return address.
    pub const IP: &str = "timeline.ip";
    /// Event (A): raw TSC_AUX.
    pub const AUX: &str = "timeline.aux";
    /// Event (M): raw core_numa u16.
    pub const CORE_NUMA: &str = "timeline.core_numa";
    /// Event: core and NUMA node as Snabb's dump/comment extract them.
    pub const CORE: &str = "timeline.core";
    pub const NUMA: &str = "timeline.numa";
    /// Event: the reserved u32 when non-zero.
    pub const RESERVED: &str = "timeline.reserved";
    /// Event: every stored arg, when args beyond the declared ones are non-zero.
    pub const ARGS: &str = "timeline.args";
    /// Event (M2): args are unreliable (logger bug, spec 4.7).
    pub const ARGS_UNRELIABLE: &str = "timeline.args_unreliable";
    /// Event (M3): raw tsc bits when the double is not a plain cycle count.
    pub const TSC_BITS: &str = "timeline.tsc_bits";
    /// Type (A): string offsets as Snabb's dump decodes them.
    pub const CAT_OFF: &str = "timeline.cat_off";
    pub const MSG_OFF: &str = "timeline.msg_off";
    /// Type (A): placeholder count when above 4.
    pub const PLACEHOLDERS: &str = "timeline.placeholders";
    /// Type (M): the event spec string verbatim, and its parts.
    pub const SPEC: &str = "timeline.spec";
    pub const LEVEL: &str = "timeline.level";
    pub const RATE: &str = "timeline.rate";
    pub const ATTRS: &str = "timeline.attrs";
}

pub struct TimelineFormat;

/// The whole input: a timeline is a snapshot read at random (the ring from
/// its oldest slot), so the file is memory-mapped where that is safe and
/// copied otherwise (`input::map`); the size that bounds every access is
/// the real file size, never one declared inside the file.
///
/// A file a `timeline-log` logger has mapped right now (its live tag) is
/// copied entry by entry instead, each entry checked against its own
/// timestamp (`timeline_log::consistent_copy_counted`): entries being
/// written are left out, never shown half-written. Returns how many.
fn read_all(input: &Input) -> Result<(Bytes, usize)> {
    let data = input.bytes(u64::MAX, "a timeline snapshot is a single file")?;
    let Some(file) = input.file().filter(|_| timeline_log::is_live(&data)) else {
        return Ok((data, 0));
    };
    let f = std::fs::File::open(file).map_err(|e| Error::io(file, e))?;
    // SAFETY: read through atomics only (consistent_copy_counted); the
    // logger never truncates its file.
    let map = unsafe { memmap2::Mmap::map(&f) }.map_err(|e| Error::io(file, e))?;
    let (copy, skipped) = timeline_log::consistent_copy_counted(&map);
    Ok((Bytes::Owned(copy), skipped))
}

/// The note for entries a live copy left out.
fn live_note(path: &std::path::Path, skipped: usize) -> Option<Diagnostic> {
    (skipped > 0).then(|| {
        Diagnostic::warning(
            crate::error::Position::new(path),
            format!(
                "live timeline: {skipped} entries being written while it was read were left out"
            ),
        )
    })
}

/// Detection score for raw bytes plus the real file length.
pub fn detect_bytes(probe: &[u8], file_len: u64) -> u8 {
    if layout::has_m_magic(probe) {
        return 100;
    }
    if layout::a_heuristic(probe, file_len) {
        // No magic in the A layout: a heuristic, so stay below real magic.
        // timeline-log's live tag may open the pad while a logger runs.
        let pad = |from: usize| probe.len() >= 64 && probe[from..64].iter().all(|&b| b == 0);
        let pad_zero = pad(32) || (timeline_log::is_live(probe) && pad(40));
        let magic_zero = probe[0..4] == [0, 0, 0, 0];
        return if pad_zero && magic_zero { 60 } else { 30 };
    }
    0
}

/// What this format is and can do (`polytrace formats`).
pub const INFO: FormatInfo = FormatInfo::native(
    FormatId::Timeline,
    "Snabb timeline snapshots (A2 prototype, mainline M2/M3)",
    &[Kind::Events],
    WRITES,
)
.with_raw_clock(RawClock::Native(crate::model::keys::CLOCK_TSC))
.undated();

/// A timeline holds messages with up to 4 (A2) or 6 (M3) args: numbers, or
/// text as string-table offsets.
pub const WRITES: &[Rule] = &rules! {
    kept(Events, "one message per event: category, `name $f1 $f2 …`"),
    some_degraded(Events, "events", "fields past the arg count, or neither numbers nor text", "fields beyond the timeline's arg count, or neither numbers nor text, dropped"),
    some_dropped(Events, "events", "the oldest, past the ring size", "overwritten: the ring keeps only the newest entries"),
    kept(Samples, "one `$value` message per metric and instance"),
    some_dropped(Samples, "sample values", "strings and other non-numbers", "not numeric"),
    some_degraded(Samples, "event args", "fractions", "fraction truncated to an integer"),
    some_degraded(Samples, "event args", "negative numbers", "negative value stored as two's complement"),
    kept(Metrics, "as message names"),
    kept(Indoms, "instance names in the message names"),
    dropped_all(Help, "no place in a timeline"),
    dropped_all(Labels, "no place in a timeline"),
    dropped_all(Marks, "no place in a timeline"),
    dropped_all(Annotations, "a timeline entry has no free text"),
};

impl Format for TimelineFormat {
    fn info(&self) -> &'static FormatInfo {
        &INFO
    }
    fn detect(&self, input: &Input) -> u8 {
        // The A layout is recognised partly by the file length.
        let Some(file) = input.file() else {
            return 0;
        };
        let len = std::fs::metadata(file).map_or(0, |m| m.len());
        detect_bytes(&input.probe, len)
    }
    fn near_miss(&self, input: &Input) -> Option<(u64, String)> {
        if input.kind != InputKind::File {
            return None;
        }
        let len = std::fs::metadata(&input.path).map_or(0, |m| m.len());
        layout::near_miss(&input.probe, len)
    }
    fn open(&self, input: &Input, opts: &ReadOptions) -> Result<Box<dyn TraceReader>> {
        let (data, _) = read_all(input)?;
        Ok(Box::new(reader::TimelineReader::from_bytes(
            &input.path,
            data,
            opts,
        )?))
    }
    fn writer(&self, req: CreateRequest) -> Result<Box<dyn TraceWriter>> {
        Ok(Box::new(writer::TimelineWriter::new(
            req.out, req.header, req.opts,
        )?))
    }
    fn listing(&self, req: DumpRequest, out: &mut dyn Write) -> Result<Vec<Diagnostic>> {
        let (input, ropts, dopts) = (req.input, req.ropts, req.dopts);
        if !dopts.window.is_open() || !dopts.select.is_empty() {
            return Err(Error::Usage(
                "Snabb's dump lists the ring as stored, each row's cycles counted from its neighbour: leaving rows out would change the others, so --begin/--end and the filters do not apply to it (use --style common)".into(),
            ));
        }
        let (data, skipped) = read_all(input)?;
        let mut diags = dump_bytes(&input.path, &data, ropts, dopts, out)?;
        diags.extend(live_note(&input.path, skipped));
        Ok(diags)
    }
}

/// Dump a snapshot held in memory (also used by the tests' fuzz sweep).
pub fn dump_bytes(
    path: &std::path::Path,
    data: &[u8],
    ropts: &ReadOptions,
    dopts: &DumpOptions,
    out: &mut dyn Write,
) -> Result<Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let snap = layout::Snapshot::parse(path, data, &mut diags)?;
    dump::dump(path, &snap, dopts, ropts.salvage, out, &mut diags)?;
    Ok(diags)
}
