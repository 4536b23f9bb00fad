//! PCP MMV memory-mapped value files v1/v2/v3: reader, writer and an
//! `mmvdump`-identical listing. See `docs/mmv.md`.

pub mod dump;
pub mod layout;
pub mod reader;
pub mod writer;

use crate::error::{Diagnostic, Error, Position, Result};
use crate::formats::format::{rules, CreateRequest, DumpRequest, Format, FormatInfo, Kind, Rule};
use crate::input::{Bytes, Input};
use crate::model::{FormatId, TraceReader, TraceWriter};
use crate::options::ReadOptions;
use std::io::Write;

/// Extras keys (namespaced `mmv.`). Header: version, flags, cluster, pid,
/// g1, g2, size, toc, strings. Indom / metric: serial, item, type, sem, dim,
/// indom, pad and the entry offsets. Sample: values (raw value records).
pub mod keys {
    pub const VERSION: &str = "mmv.version";
    pub const FLAGS: &str = "mmv.flags";
    pub const CLUSTER: &str = "mmv.cluster";
    pub const PID: &str = "mmv.pid";
    pub const G1: &str = "mmv.g1";
    pub const G2: &str = "mmv.g2";
    /// File size in bytes.
    pub const SIZE: &str = "mmv.size";
    /// TOC entries in order: [type, count, offset].
    pub const TOC: &str = "mmv.toc";
    /// Every STRINGS slot's payload, in file order.
    pub const STRINGS: &str = "mmv.strings";
    /// Bytes after the end of the last section (up to 64 KiB), if any.
    pub const TRAILER: &str = "mmv.trailer";
    pub const SERIAL: &str = "mmv.serial";
    /// Offset of the entry itself (indom, metric).
    pub const OFFSET: &str = "mmv.offset";
    /// Indom: offset of its first instance.
    pub const FIRST: &str = "mmv.first";
    pub const INST_OFFSETS: &str = "mmv.inst_offsets";
    pub const INST_NAME_OFFSETS: &str = "mmv.inst_name_offsets";
    pub const HELP_SHORT_OFF: &str = "mmv.help_short_off";
    pub const HELP_LONG_OFF: &str = "mmv.help_long_off";
    pub const ITEM: &str = "mmv.item";
    /// Raw MMV type code (9 = ELAPSED, which the model shows as I64 µs counter).
    pub const TYPE: &str = "mmv.type";
    pub const SEM: &str = "mmv.sem";
    pub const DIM: &str = "mmv.dim";
    /// Raw indom serial field of a metric (0 or -1 = none).
    pub const INDOM: &str = "mmv.indom";
    pub const PAD: &str = "mmv.pad";
    pub const NAME_OFF: &str = "mmv.name_off";
    /// The name the MMV PMDA serves: `mmv.<file>.<metric>` (or `mmv.<metric>`).
    pub const PMDA_NAME: &str = "mmv.pmda_name";
    /// Sample: [offset, metric offset, instance offset, raw value, extra] per
    /// VALUES entry in file order.
    pub const VALUES: &str = "mmv.values";
    /// Sample: [metric id, instance, extra] for each ELAPSED value whose
    /// `extra` is not 0 (an interval still open), independent of layout.
    pub const ELAPSED_EXTRA: &str = "mmv.elapsed_extra";
}

pub struct MmvFormat;

/// Whole-file read: MMV files are small snapshots (the largest known is
/// under 1 MB), made to be memory-mapped; a file is mapped where that is
/// safe (`input::map`), and absurd sizes are refused rather than read.
const MAX_FILE: u64 = 1 << 31;

fn read_all(input: &Input) -> Result<Bytes> {
    input.bytes(MAX_FILE, "is a directory or archive, not a stream")
}

/// What this format is and can do (`polytrace formats`).
pub const INFO: FormatInfo = FormatInfo::native(
    FormatId::Mmv,
    "PCP MMV memory-mapped value files v1/v2/v3",
    &[
        Kind::Samples,
        Kind::Metrics,
        Kind::Indoms,
        Kind::Help,
        Kind::Labels,
    ],
    WRITES,
);

/// MMV is one snapshot of metrics.
pub const WRITES: &[Rule] = &rules! {
    degraded(Events, "events", EVENTS_AS_COUNTERS),
    some_dropped(Samples, "samples", "all but the last (or the one at --at)", "MMV holds one snapshot (the last sample, or the one at --at)"),
    some_degraded(Samples, "values", "missing values", "missing values written as SENTINEL 'no value' markers (SENTINEL flag set)"),
    some_degraded(Metrics, "metric names", "names the MMV PMDA would skip", "renamed: the MMV PMDA skips names that are not letters, digits, '_' and '.' starting with a letter"),
    some_degraded(Indoms, "instance names", "long names", "truncated to the MMV name limit"),
    some_dropped(Labels, "labels", "context and domain labels", "context/domain labels have no MMV equivalent"),
    dropped_all(Marks, "MMV has no discontinuity markers"),
    dropped_all(Annotations, "MMV has no annotations"),
};

/// How events reach MMV (the `EventCounters` stage reports it so).
pub const EVENTS_AS_COUNTERS: &str = "written as per-type counters events.*";

impl Format for MmvFormat {
    fn info(&self) -> &'static FormatInfo {
        &INFO
    }
    fn detect(&self, input: &Input) -> u8 {
        if input.file().is_some() && input.probe.starts_with(layout::MAGIC) {
            100
        } else {
            0
        }
    }
    fn near_miss(&self, input: &Input) -> Option<(u64, String)> {
        let p = &input.probe;
        (!p.is_empty() && p.len() < layout::MAGIC.len() && layout::MAGIC.starts_with(p)).then(
            || {
                (
                    p.len() as u64,
                    format!(
                        "the file ends after {} bytes, inside the \"MMV\\0\" magic",
                        p.len()
                    ),
                )
            },
        )
    }
    fn open(&self, input: &Input, opts: &ReadOptions) -> Result<Box<dyn TraceReader>> {
        let data = read_all(input)?;
        Ok(Box::new(reader::open(&input.path, &data, opts.salvage)?))
    }
    fn writer(&self, req: CreateRequest) -> Result<Box<dyn TraceWriter>> {
        writer::create(req.out, req.header, req.opts)
    }
    fn listing(&self, req: DumpRequest, out: &mut dyn Write) -> Result<Vec<Diagnostic>> {
        let (input, ropts, dopts) = (req.input, req.ropts, req.dopts);
        if !dopts.window.is_open() || !dopts.select.is_empty() {
            return Err(Error::Usage(
                "an MMV file is one snapshot, and mmvdump lists its sections as stored: --begin/--end and the filters do not apply to that listing (use --style common)".into(),
            ));
        }
        let data = read_all(input)?;
        let name = input.path.to_string_lossy().into_owned();
        let status = dump::mmvdump(&name, &data, out).map_err(|e| Error::io("<stdout>", e))?;
        if let Err((off, msg)) = status {
            let pos = Position::at(&input.path, off, None);
            if ropts.salvage {
                return Ok(vec![Diagnostic::salvaged(pos, msg)]);
            }
            return Err(Error::format(pos, msg));
        }
        // mmvdump is lenient; report what the strict reader finds too.
        let mut diags = Vec::new();
        layout::parse(&data, &input.path, ropts.salvage, &mut diags)?;
        Ok(diags)
    }
}
