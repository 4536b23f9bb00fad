//! LTT directory traces (the 2003–2005 "new LTT trace format"): XML event
//! definitions, per-CPU tracefiles of fixed-size blocks. See docs/ltt.md
//! and ../shared/specs/ltt.md (section 5 is what this implements).

pub mod dump;
pub mod eventdefs;
pub mod layout;
pub mod paths;
pub mod reader;
pub mod system;
pub mod writer;
pub mod xml;

use crate::error::{Diagnostic, Error, Result};
use crate::formats::format::{AbsoluteTime, Caps, Format, FormatInfo, Kind, RawClock, Rule};
use crate::input::{Input, InputKind};
use crate::model::{FormatId, Header, Item, TraceReader, TraceWriter, Value};
use crate::options::{DumpOptions, ReadOptions, WriteOptions};
use crate::output::OutTarget;
use reader::{Merge, Trace};
use std::collections::VecDeque;
use std::io::Write;

/// Extras keys (header: trace-wide; event types: per id).
pub mod keys {
    pub const BLOCK_SIZE: &str = "ltt.block_size";
    pub const ARCH: &str = "ltt.arch";
    pub const ENDIAN: &str = "ltt.endian";
    pub const DESCRIPTION: &str = "ltt.description";
    /// List of [file name, raw bytes] of eventdefs/*.xml.
    pub const EVENTDEFS: &str = "ltt.eventdefs";
    /// List of [name, checksum, base code (or "unloaded"), file].
    pub const FACILITIES: &str = "ltt.facilities";
    /// Raw info/bookmarks.xml.
    pub const BOOKMARKS: &str = "ltt.bookmarks";
    /// Event type: the LTT event id.
    pub const EVENT_ID: &str = "ltt.id";
    /// Event type: a builtin (framing / facility_load) event.
    pub const BUILTIN: &str = "ltt.builtin";
    /// Event type: checksum of its facility.
    pub const CHECKSUM: &str = "ltt.checksum";
}

pub struct LttFormat;

/// An opened trace directory (a .tar.gz is unpacked into `_tmp` first).
pub struct Opened {
    pub trace: Trace,
    _tmp: Option<tempfile::TempDir>,
}

/// Open strictly (a cut tracefile is an error).
pub fn open_trace(input: &Input) -> Result<Opened> {
    open_trace_with(input, false)
}

/// Open; `salvage` decodes what a cut tracefile still holds.
pub fn open_trace_with(input: &Input, salvage: bool) -> Result<Opened> {
    match input.kind {
        InputKind::Dir => Ok(Opened {
            trace: Trace::open_with(&input.path, salvage)?,
            _tmp: None,
        }),
        InputKind::File if writer::is_tar_gz_name(&input.path) => {
            let tmp = writer::unpack_tar_gz(&input.path)?;
            let root = writer::tar_root(tmp.path());
            Ok(Opened {
                trace: Trace::open_with(&root, salvage)?,
                _tmp: Some(tmp),
            })
        }
        // stdin, copied to a file: a .tar.gz is the one way a trace fits a pipe.
        InputKind::Stdin if input.probe.starts_with(&[0x1f, 0x8b]) => {
            let file = input.file().ok_or_else(|| {
                Error::Usage("<stdin>: an LTT .tar.gz on stdin must be spooled first".into())
            })?;
            let tmp = writer::unpack_tar_gz(file)?;
            let root = writer::tar_root(tmp.path());
            Ok(Opened {
                trace: Trace::open(&root)?,
                _tmp: Some(tmp),
            })
        }
        _ => Err(Error::Usage(format!(
            "{}: an LTT trace is a directory (or a .tar.gz of one)",
            input.name()
        ))),
    }
}

/// What this format is and can do (`polytrace formats`).
pub const INFO: FormatInfo = FormatInfo {
    id: FormatId::Ltt,
    caps: Caps {
        read: true,
        write: true,
        dump: true,
        text_output: false,
    },
    describe: "LTT directory traces (2003-2005) with XML event definitions",
    absolute_time: AbsoluteTime::NotNeeded,
    raw_clock: RawClock::Native("ltt-cycles"),
    reads: &[Kind::Events],
    writes: WRITES,
    undated: false,
};

/// What an LTT trace holds: typed events.
pub const WRITES: &[Rule] = &[
    Rule::kept(Kind::Events, "facility events, one facility per category"),
    Rule::kept(Kind::Samples, "metric.<name> events {instance, value}"),
    Rule::some_dropped(
        Kind::Samples,
        "sample values",
        "per-metric error codes",
        "error code instead of a value",
    ),
    Rule::kept(Kind::Metrics, "as the event types of their values"),
    Rule::kept(Kind::Indoms, "indom.indom_<id> events"),
    Rule::dropped(Kind::Help, "help texts", "not representable in LTT"),
    Rule::dropped(Kind::Labels, "label sets", "not representable in LTT"),
    Rule::dropped(Kind::Marks, "marks", "not representable in LTT"),
    Rule::dropped(Kind::Annotations, "annotations", "not representable in LTT"),
];

impl Format for LttFormat {
    fn info(&self) -> &'static FormatInfo {
        &INFO
    }
    fn detect(&self, input: &Input) -> u8 {
        match input.kind {
            InputKind::Dir if input.path.join("info/system.xml").is_file() => 100,
            InputKind::File
                if writer::is_tar_gz_name(&input.path)
                    && input.probe.starts_with(&[0x1f, 0x8b]) =>
            {
                60
            }
            // No name on stdin: gzip is the only compressed input we read.
            InputKind::Stdin if input.probe.starts_with(&[0x1f, 0x8b]) => 40,
            _ => 0,
        }
    }
    fn open(&self, input: &Input, opts: &ReadOptions) -> Result<Box<dyn TraceReader>> {
        let o = open_trace_with(input, opts.salvage)?;
        Ok(Box::new(LttReader::new(o)))
    }
    fn create(
        &self,
        out: &OutTarget,
        header: &Header,
        opts: &WriteOptions,
    ) -> Result<Box<dyn TraceWriter>> {
        let path = match out {
            OutTarget::Path(p) => p.clone(),
            OutTarget::Stdout => {
                return Err(Error::Usage(
                    "an LTT trace is a directory: give -o DIR (or DIR.tar.gz)".into(),
                ))
            }
        };
        let cfg = writer::Config::from_options(header, opts);
        Ok(Box::new(writer::LttWriter::create(&path, header, cfg)?))
    }
    fn dump(
        &self,
        input: &Input,
        ropts: &ReadOptions,
        dopts: &DumpOptions,
        out: &mut dyn Write,
    ) -> Result<Vec<Diagnostic>> {
        let o = open_trace_with(input, ropts.salvage)?;
        dump::dump_subset(
            &o.trace,
            dopts.no_framing,
            &dopts.window,
            &dopts.select,
            out,
        )
    }
    /// The first and last blocks of each tracefile hold the bounds.
    fn time_bounds(
        &self,
        input: &Input,
        _opts: &ReadOptions,
        _need_end: bool,
    ) -> Result<(
        Option<crate::model::Timestamp>,
        Option<crate::model::Timestamp>,
    )> {
        let o = open_trace(input)?;
        let (a, b) = o.trace.time_span();
        Ok((
            a.map(crate::model::Timestamp),
            b.map(crate::model::Timestamp),
        ))
    }
}

/// The model stream of a trace: header, event types, then events merged by time.
pub struct LttReader {
    opened: Opened,
    header: Header,
    pending: VecDeque<Item>,
    merge: Option<Merge>,
    diags: Vec<Diagnostic>,
}

impl LttReader {
    pub fn new(opened: Opened) -> LttReader {
        let t = &opened.trace;
        let header = t.header();
        let pending = t
            .event_types()
            .into_iter()
            .map(|e| Item::EventType(std::sync::Arc::new(e)))
            .collect();
        let diags = t.diags.clone();
        LttReader {
            opened,
            header,
            pending,
            merge: None,
            diags,
        }
    }
}

impl TraceReader for LttReader {
    fn header(&self) -> &Header {
        &self.header
    }
    fn progress(&self) -> Option<(u64, u64)> {
        let t = &self.opened.trace;
        Some(match &self.merge {
            Some(m) => m.progress(t),
            None => (0, t.files.iter().map(|f| f.len).sum()),
        })
    }
    fn next_item(&mut self) -> Result<Option<Item>> {
        if let Some(it) = self.pending.pop_front() {
            return Ok(Some(it));
        }
        let t = &self.opened.trace;
        let merge = match &mut self.merge {
            Some(m) => m,
            None => self.merge.insert(Merge::new(t, &mut self.diags)),
        };
        loop {
            let Some((ci, ev)) = merge.next(t, &mut self.diags) else {
                return Ok(None);
            };
            let Some(info) = t.info(ev.id) else { continue };
            let cur = &merge.cursors[ci];
            let tf = &t.files[cur.file_idx];
            let fields = match &info.ty {
                None => vec![],
                Some(ty) => {
                    let mut at = 0;
                    let v = layout::decode(ty, &cur.buf[ev.start..ev.end], &mut at, t.bo)
                        .map_err(|e| Error::format(crate::error::Position::new(&tf.path), e.msg))?;
                    match (ty, v) {
                        (eventdefs::Ty::Struct(_), Value::Struct(v)) => v,
                        (_, v) => vec![v],
                    }
                }
            };
            return Ok(Some(Item::Event(crate::model::Event {
                time: crate::model::Timestamp(ev.time),
                raw_clock: Some(ev.counter),
                type_id: ev.id as u32,
                cpu: tf.cpu,
                stream: Some(tf.rel.clone()),
                fields,
                extras: Default::default(),
            })));
        }
    }
    fn diagnostics(&self) -> &[Diagnostic] {
        &self.diags
    }
}
