//! LTT directory traces (the 2003–2005 "new LTT trace format"): XML event
//! definitions, per-CPU tracefiles of fixed-size blocks. See docs/ltt.md
//! and docs/specs/ltt.md (section 5 is what this implements).

pub mod dump;
pub mod eventdefs;
pub mod layout;
pub mod paths;
pub mod reader;
pub mod selfdesc;
pub mod system;
pub mod writer;
pub mod xml;

use crate::error::{Diagnostic, Error, Result};
use crate::formats::format::{
    rules, Bounds, CreateRequest, DumpRequest, Format, FormatInfo, Kind, RawClock, Rule,
};
use crate::input::{Input, InputKind};
use crate::model::{Event, FormatId, Header, Item, TraceReader, TraceWriter, Value};
use crate::options::{ReadOptions, WriteOptions};
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
    _tmp: Option<writer::Unpacked>,
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
            let shown = input.path.display().to_string();
            open_unpacked(
                writer::unpack_tar_gz(&input.path, &shown, salvage)?,
                salvage,
            )
        }
        // stdin, copied to a file: a .tar.gz is the one way a trace fits a pipe.
        InputKind::Stdin if input.probe.starts_with(&[0x1f, 0x8b]) => {
            let file = input.file().ok_or_else(|| {
                Error::Usage("<stdin>: an LTT .tar.gz on stdin must be spooled first".into())
            })?;
            open_unpacked(writer::unpack_tar_gz(file, "<stdin>", salvage)?, salvage)
        }
        _ => Err(Error::Usage(format!(
            "{}: an LTT trace is a directory (or a .tar.gz of one)",
            input.name()
        ))),
    }
}

/// Open the trace in an unpacked archive; the unpacking's diagnostics come
/// first.
fn open_unpacked(mut tmp: writer::Unpacked, salvage: bool) -> Result<Opened> {
    let root = writer::tar_root(tmp.path());
    let mut trace = Trace::open_with(&root, salvage)?;
    let mut diags = std::mem::take(&mut tmp.diags);
    diags.append(&mut trace.diags);
    trace.diags = diags;
    Ok(Opened {
        trace,
        _tmp: Some(tmp),
    })
}

/// What this format is and can do (`polytrace formats`).
pub const INFO: FormatInfo = FormatInfo::native(
    FormatId::Ltt,
    "LTT directory traces (2003-2005) with XML event definitions",
    &[Kind::Events],
    WRITES,
)
// Read: the LTT cycle counter. Written: the self-description carries
// any raw clock with its meaning (`LttFormat::raw_clock`); only
// `--ltt-plain` keeps LTT cycles alone.
.with_raw_clock(RawClock::Native(crate::model::keys::CLOCK_LTT));

/// What an LTT trace holds: typed events, and (unless `--ltt-plain`) the
/// `polytrace` self-description that gives a non-LTT stream back exactly.
pub const WRITES: &[Rule] = &rules! {
    kept(Events, "facility events, one facility per category"),
    kept(Samples, "metric.<name> events {instance, value}"),
    some_dropped(Samples, "sample values", "error codes, with --ltt-plain", "error code instead of a value"),
    kept(Metrics, "as the event types of their values"),
    kept(Indoms, "indom.indom_<id> events"),
    kept(Help, "in the polytrace self-description"),
    some_dropped(Help, "help texts", "with --ltt-plain", "not representable in LTT"),
    kept(Labels, "in the polytrace self-description"),
    some_dropped(Labels, "label sets", "with --ltt-plain", "not representable in LTT"),
    kept(Marks, "in the polytrace self-description"),
    some_dropped(Marks, "marks", "with --ltt-plain", "not representable in LTT"),
    kept(Annotations, "in the polytrace self-description"),
    some_dropped(Annotations, "annotations", "with --ltt-plain", "not representable in LTT"),
};

impl Format for LttFormat {
    fn info(&self) -> &'static FormatInfo {
        &INFO
    }
    fn raw_clock(&self, opts: &WriteOptions) -> RawClock {
        if opts.ltt_plain {
            RawClock::Native(crate::model::keys::CLOCK_LTT)
        } else {
            RawClock::Carried
        }
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
    fn writer(&self, req: CreateRequest) -> Result<Box<dyn TraceWriter>> {
        let path = req.path("an LTT trace is a directory: give -o DIR (or DIR.tar.gz)")?;
        let cfg = writer::Config::from_options(req.header, req.opts);
        let w = writer::LttWriter::create(path, req.header, cfg)?;
        Ok(Box::new(if req.opts.ltt_plain {
            w
        } else {
            w.describing()?
        }))
    }
    fn listing(&self, req: DumpRequest, out: &mut dyn Write) -> Result<Vec<Diagnostic>> {
        let o = open_trace_with(req.input, req.ropts.salvage)?;
        let d = req.dopts;
        dump::dump_subset(&o.trace, d.no_framing, &d.window, &d.select, out)
    }
    /// The first and last blocks of each tracefile hold the bounds.
    fn time_bounds(&self, input: &Input, _opts: &ReadOptions, _need_end: bool) -> Result<Bounds> {
        let o = open_trace(input)?;
        let (a, b) = o.trace.time_span();
        Ok((
            a.map(crate::model::Timestamp),
            b.map(crate::model::Timestamp),
        ))
    }
}

/// The model stream of a trace: header, event types, then events merged by
/// time. A trace polytrace wrote from another format gives back that
/// format's stream instead (`selfdesc`).
pub struct LttReader {
    opened: Opened,
    header: Header,
    pending: VecDeque<Item>,
    merge: Option<Merge>,
    diags: Vec<Diagnostic>,
    restore: Option<selfdesc::Restore>,
    /// Events the writer is done with (`recycle`).
    /// Events the writer is done with (`recycle`), as items: a run of
    /// them is refilled in place (`next_batch`).
    spare: Vec<Item>,
}

impl LttReader {
    pub fn new(opened: Opened) -> LttReader {
        let t = &opened.trace;
        let mut diags = t.diags.clone();
        let restore = selfdesc::Restore::open(t, &mut diags);
        let (header, pending) = match &restore {
            Some(r) => (r.header.clone(), VecDeque::new()),
            None => (
                t.header(),
                t.event_types()
                    .into_iter()
                    .map(|e| Item::EventType(std::sync::Arc::new(e)))
                    .collect(),
            ),
        };
        LttReader {
            opened,
            header,
            pending,
            merge: None,
            diags,
            restore,
            spare: Vec::new(),
        }
    }

    /// The stream polytrace wrote into the trace, item by item.
    fn next_restored(&mut self) -> Result<Option<Item>> {
        let t = &self.opened.trace;
        let Some(r) = &mut self.restore else {
            return Ok(None);
        };
        let merge = match &mut self.merge {
            Some(m) => m,
            None => self.merge.insert(Merge::new(t, &mut self.diags)),
        };
        loop {
            if let Some(it) = r.out.pop_front() {
                return Ok(Some(it));
            }
            let Some((ci, ev)) = merge.next(t, &mut self.diags) else {
                r.finish(t, &mut self.diags);
                return Ok(r.out.pop_front());
            };
            let cur = &merge.cursors[ci];
            r.event(
                t,
                cur.file_idx,
                ev.id,
                ev.time,
                ev.counter,
                &cur.buf[ev.start..ev.end],
                &mut self.diags,
            );
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
        if self.restore.is_some() {
            return self.next_restored();
        }
        let mut e = match self.spare.pop() {
            Some(Item::Event(e)) => e,
            _ => Event::default(),
        };
        Ok(match self.fill_event(&mut e)? {
            true => Some(Item::Event(e)),
            false => None,
        })
    }
    /// Events in a run, each decoded into a recycled one in place: the
    /// run the writer gave back (`recycle_batch`) is the next one, with
    /// no event moved (an event is some 100 bytes; moving it right after
    /// its fields were written costs more than decoding it).
    fn next_batch(&mut self, out: &mut Vec<Item>, max: usize) -> Result<bool> {
        // Definitions, and a restored stream (its samples can be wide),
        // item by item.
        if !self.pending.is_empty() || self.restore.is_some() {
            if max == 0 {
                return Ok(true);
            }
            return Ok(match self.next_item()? {
                Some(it) => {
                    out.push(it);
                    true
                }
                None => false,
            });
        }
        let start = out.len();
        if start == 0 && !self.spare.is_empty() {
            std::mem::swap(out, &mut self.spare);
            if out.len() > max {
                self.spare.extend(out.drain(max..));
            }
        }
        let mut n = start;
        while n - start < max {
            if n == out.len() {
                let it = self.spare.pop();
                out.push(it.unwrap_or_else(|| Item::Event(Event::default())));
            }
            let r = match &mut out[n] {
                Item::Event(e) => self.fill_event(e),
                other => {
                    *other = Item::Event(Event::default());
                    continue;
                }
            };
            match r {
                Ok(true) => n += 1,
                Ok(false) | Err(_) => {
                    // Unfilled events go back to the pool.
                    self.spare.extend(out.drain(n..));
                    return r.map(|_| false);
                }
            }
        }
        self.spare.extend(out.drain(n..));
        Ok(true)
    }
    fn diagnostics(&self) -> &[Diagnostic] {
        &self.diags
    }
    fn recycle(&mut self, item: Item) {
        if matches!(item, Item::Event(_)) && self.spare.len() < SPARE_EVENTS {
            self.spare.push(item);
        }
    }
    fn recycle_batch(&mut self, items: &mut Vec<Item>) {
        if self.spare.is_empty() {
            // The whole run at once, refilled in place by `next_batch`
            // (definitions in it are replaced there).
            std::mem::swap(&mut self.spare, items);
            items.clear();
            return;
        }
        for item in items.drain(..) {
            self.recycle(item);
        }
    }
}

/// Written events kept for reuse at most (`recycle`).
const SPARE_EVENTS: usize = 1024;

impl LttReader {
    /// The next event of the trace (not a restored stream), merged by time,
    /// decoded into `e` (a recycled event: its lists are refilled); false
    /// at the end.
    #[inline]
    fn fill_event(&mut self, e: &mut Event) -> Result<bool> {
        let t = &self.opened.trace;
        let merge = match &mut self.merge {
            Some(m) => m,
            None => self.merge.insert(Merge::new(t, &mut self.diags)),
        };
        loop {
            let Some(ci) = merge.next_index(t, &mut self.diags) else {
                return Ok(false);
            };
            let cur = &merge.cursors[ci];
            let Some(ev) = cur.head() else {
                return Ok(false);
            };
            let Some(info) = t.info(ev.id) else { continue };
            let tf = &t.files[cur.file_idx];
            let payload = &cur.buf[ev.start..ev.end];
            e.fields.clear();
            let plain = info
                .scalars
                .as_deref()
                .is_some_and(|f| layout::decode_scalars_into(f, payload, t.bo, &mut e.fields));
            if !plain {
                e.fields.clear();
                if let Some(ty) = &info.ty {
                    let mut at = 0;
                    let v = layout::decode(ty, payload, &mut at, t.bo)
                        .map_err(|e| Error::format(crate::error::Position::new(&tf.path), e.msg))?;
                    match (ty, v) {
                        (eventdefs::Ty::Struct(_), Value::Struct(v)) => e.fields = v,
                        (_, v) => e.fields.push(v),
                    }
                }
            }
            e.time = crate::model::Timestamp(ev.time);
            e.raw_clock = Some(ev.counter);
            e.type_id = ev.id as u32;
            e.cpu = tf.cpu;
            match &mut e.stream {
                Some(s) => {
                    s.clear();
                    s.push_str(&tf.rel);
                }
                None => e.stream = Some(tf.rel.clone()),
            }
            e.extras.clear();
            return Ok(true);
        }
    }
}
