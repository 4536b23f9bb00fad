//! The Perfetto writer: one `TracePacket` at a time, each encoded into one
//! reused scratch buffer and appended to the output as field 1 of `Trace`.
//! Tracks, pairing and counters follow the Chrome JSON export (the same
//! rules, `formats::pairs`), so both show the same slices; decisions are in
//! docs/perfetto.md.

use super::layout::*;
use super::wire::{self, Oversize};
use crate::error::{Error, Result};
use crate::formats::chrome::json::write_value;
use crate::formats::dlt::reader::X_RAW;
use crate::formats::kpi::text::{X_CTID, X_ECU};
use crate::formats::pairs::tracks::{
    annotation_name, is_counter_value, Describe, Layout, SliceExport, Track,
};
use crate::formats::pairs::{slice_end, Edge, Pairing, Point, Slices, Span, TrackKey};
use crate::model::*;
use crate::options::WriteOptions;
use crate::output::ChunkedWriter;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Interned strings kept before the tables are dropped and the sequence's
/// incremental state is cleared (bounded memory on long streams).
pub const INTERN_LIMIT: usize = 8192;

/// The trace clock's 0 is this long before the first item's time.
const BOOT_MARGIN_NS: i64 = 1_000_000_000;

/// The packet sequence of a single input (and of the first of several).
const SEQ_ID: u64 = 1;

/// Where packets go: the output file (one input), or a buffer the
/// several-input writer moves into the file after each item.
enum Sink {
    File(ChunkedWriter<Box<dyn Write + Send>>),
    Buffer(Vec<u8>),
}

/// Which machine a writer's packets are, with several inputs.
#[derive(Debug, Clone, PartialEq)]
enum Role {
    /// One input: no machine fields (the output of a single input).
    Only,
    /// The first input: the host machine (no `machine_id`, which Perfetto
    /// reads as 0), its clock snapshot sets the trace's clock.
    Host { name: String },
    /// Any other input: `machine_id` on every packet, its clocks tied to
    /// the host's by a `remote_clock_sync` (see docs/perfetto.md).
    Remote { id: u32, name: String },
}

/// The type facts only Perfetto uses: the Android log priority of a type
/// with a log level or timeline priority.
type TypeInfo = crate::formats::pairs::TypeInfo<Option<u64>>;

pub struct Series {
    name: String,
    /// Where string values and event records go (instants).
    track: Track,
    /// The counter track of numeric values (made on the first one).
    counter_uuid: Option<u64>,
    /// `--rate`: the previous (time, value) of a counter-semantics metric.
    prev: Option<(i64, f64)>,
}

#[derive(Default)]
struct Counts {
    slices: u64,
    running: u64,
    instants: u64,
    counters: u64,
    logs: u64,
    descriptors: u64,
    resets: u64,
}

/// A hasher for the interning tables' short strings: eight bytes a step
/// (SipHash, and a byte a step, showed in profiles). Unkeyed, as
/// `IntHasher`: the tables hold at most [`INTERN_LIMIT`] strings, so keys
/// crafted to collide slow a lookup down, within that bound.
#[derive(Default, Clone, Copy)]
struct StrHasher(u64);

impl std::hash::Hasher for StrHasher {
    fn finish(&self) -> u64 {
        // The full product folded: every bit reaches the bucket bits.
        let p = (self.0 as u128).wrapping_mul(0x243f_6a88_85a3_08d3);
        (p as u64) ^ ((p >> 64) as u64)
    }
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes(c.try_into().expect("eight bytes"));
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            let w = u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59);
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
        }
    }
}

/// Interned strings of one kind (names, categories, annotation names).
#[derive(Default)]
struct Table {
    ids: HashMap<Box<str>, u64, std::hash::BuildHasherDefault<StrHasher>>,
}

/// The interned ids of an event type's category, name and field names,
/// each filled where the interner gave it, valid while `generation` is the
/// interner's: a repeat event then looks nothing up.
#[derive(Default)]
struct TypeIids {
    generation: u64,
    cat: Option<u64>,
    name: Option<u64>,
    fields: Vec<Option<u64>>,
}

/// The id of `s` from `slot`, or from the interner (then kept in `slot`).
fn cached(slot: Option<&mut Option<u64>>, intern: &mut Interner, kind: u8, s: &str) -> u64 {
    match slot {
        Some(x) => *x.get_or_insert_with(|| intern.get(kind, s)),
        None => intern.get(kind, s),
    }
}

/// The interning state of the sequence.
struct Interner {
    names: Table,
    cats: Table,
    args: Table,
    /// Enum labels (debug annotation string values).
    labels: Table,
    next: u64,
    /// Bumped whenever the tables are dropped (for [`TypeIids`]).
    generation: u64,
    /// The next packet must clear the incremental state (first packet, or
    /// the tables were dropped).
    clear: bool,
    /// InternedData entries the packet being built defines, per kind.
    new_names: Vec<u8>,
    new_cats: Vec<u8>,
    new_args: Vec<u8>,
    new_labels: Vec<u8>,
}

impl Interner {
    fn new() -> Interner {
        Interner {
            names: Table::default(),
            cats: Table::default(),
            args: Table::default(),
            labels: Table::default(),
            next: 1,
            generation: 1,
            clear: true,
            new_names: Vec::new(),
            new_cats: Vec::new(),
            new_args: Vec::new(),
            new_labels: Vec::new(),
        }
    }

    fn len(&self) -> usize {
        self.names.ids.len() + self.cats.ids.len() + self.args.ids.len() + self.labels.ids.len()
    }

    /// Start a packet: drop the tables when they are full.
    fn begin(&mut self) -> bool {
        self.new_names.clear();
        self.new_cats.clear();
        self.new_args.clear();
        self.new_labels.clear();
        if self.len() >= INTERN_LIMIT {
            self.names.ids.clear();
            self.cats.ids.clear();
            self.args.ids.clear();
            self.labels.ids.clear();
            self.next = 1;
            self.generation += 1;
            self.clear = true;
            return true;
        }
        false
    }

    fn get(&mut self, kind: u8, s: &str) -> u64 {
        let (t, out) = match kind {
            0 => (&mut self.names, &mut self.new_names),
            1 => (&mut self.cats, &mut self.new_cats),
            2 => (&mut self.args, &mut self.new_args),
            _ => (&mut self.labels, &mut self.new_labels),
        };
        if let Some(&id) = t.ids.get(s) {
            return id;
        }
        let id = self.next;
        self.next += 1;
        t.ids.insert(s.into(), id);
        // EventName, EventCategory, DebugAnnotationName and InternedString
        // share a layout.
        let field = match kind {
            0 => ID_NAMES,
            1 => ID_CATEGORIES,
            2 => ID_ANNOTATION_NAMES,
            _ => ID_ANNOTATION_STRINGS,
        };
        wire::put_varint(out, wire::key(field, wire::WireType::Len));
        let body = wire::varint_len(id) + 1 + wire::varint_len(s.len() as u64) + s.len() + 1;
        wire::put_varint(out, body as u64);
        wire::varint_field(out, IE_IID, id);
        wire::str_field(out, IE_NAME, s);
        id
    }
}

/// A slice edge, instant or counter value to encode.
enum Kind {
    Begin,
    End,
    Instant,
}

pub struct PerfettoWriter {
    out: Sink,
    path: Arc<PathBuf>,
    role: Role,
    /// This writer's `trusted_packet_sequence_id`.
    seq_id: u64,
    /// Track uuids are `n * stride + offset` (n = 1, 2, ...): unique across
    /// the machines of one trace, `n` itself for a single input.
    uuid_stride: u64,
    uuid_offset: u64,
    header: Header,
    rate: bool,
    /// The packet being built (cleared, never shrunk).
    pkt: Vec<u8>,
    /// Text of a value that has no protobuf type of its own (reused).
    text: Vec<u8>,
    /// A log line's message (reused).
    logbuf: Vec<u8>,
    /// A prefixed annotation name (reused).
    argname: String,
    intern: Interner,
    /// Interned ids per event type of the stream (see [`TypeIids`]).
    iids: IntMap<EventTypeId, TypeIids>,
    started: bool,
    /// The source time that is 0 on the trace clock (see `start`).
    boot_zero: i64,
    next_uuid: u64,
    p: Pairing<Option<u64>>,
    lay: Layout<Series>,
    /// Process descriptors written: pid -> uuid.
    procs: HashMap<i64, u64>,
    /// A log line's tag (reused).
    tagbuf: String,
    counts: Counts,
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::io(path, e)
}

impl From<Oversize> for Error {
    fn from(o: Oversize) -> Error {
        Error::Usage(format!(
            "a Perfetto message of {} bytes is over the 2^28-byte limit of its length field",
            o.0
        ))
    }
}

/// The Android log priority of a DLT log level or timeline priority.
pub fn log_priority(p: &str) -> Option<u64> {
    Some(match p {
        "fatal" => PRIO_FATAL,
        "error" => PRIO_ERROR,
        "warn" | "warning" => PRIO_WARN,
        "info" | "app" => PRIO_INFO,
        "debug" | "packet" | "library" => PRIO_DEBUG,
        "verbose" | "trace" => PRIO_VERBOSE,
        _ => return None,
    })
}

impl PerfettoWriter {
    pub fn new(path: &Path, header: &Header, opts: &WriteOptions) -> Result<PerfettoWriter> {
        let out = Sink::File(ChunkedWriter::new(create_file(path, header)?));
        Ok(PerfettoWriter::with_sink(out, path, header, opts))
    }

    fn with_sink(out: Sink, path: &Path, header: &Header, opts: &WriteOptions) -> PerfettoWriter {
        PerfettoWriter {
            out,
            path: Arc::new(path.to_path_buf()),
            role: Role::Only,
            seq_id: SEQ_ID,
            uuid_stride: 1,
            uuid_offset: 0,
            header: header.clone(),
            rate: opts.rate,
            pkt: Vec::with_capacity(4096),
            text: Vec::new(),
            logbuf: Vec::new(),
            argname: String::new(),
            intern: Interner::new(),
            iids: IntMap::default(),
            started: false,
            boot_zero: 0,
            next_uuid: 0,
            p: Pairing::default(),
            lay: Layout::new(header.source),
            procs: HashMap::new(),
            tagbuf: String::new(),
            counts: Counts::default(),
        }
    }

    // ------------------------------------------------------------ packets

    /// Append the packet in `self.pkt` to the output as `Trace.packet`.
    fn flush_packet(&mut self) -> Result<()> {
        let mut head = [0u8; 11];
        let mut n = 0;
        head[n] = wire::key(TRACE_PACKET, wire::WireType::Len) as u8;
        n += 1;
        let mut len = self.pkt.len() as u64;
        while len >= 0x80 {
            head[n] = (len as u8) | 0x80;
            len >>= 7;
            n += 1;
        }
        head[n] = len as u8;
        n += 1;
        match &mut self.out {
            Sink::File(f) => {
                let p = self.path.clone();
                f.write_all(&head[..n]).map_err(io_err(&p))?;
                f.write_all(&self.pkt).map_err(io_err(&p))
            }
            Sink::Buffer(b) => {
                b.extend_from_slice(&head[..n]);
                b.extend_from_slice(&self.pkt);
                Ok(())
            }
        }
    }

    /// A packet of one `field` (at `ts`), whose body `f` writes.
    fn packet(
        &mut self,
        ts: Option<u64>,
        field: u32,
        f: impl FnOnce(&mut Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        self.packet_head(ts)?;
        wire::nested::<Error>(&mut self.pkt, field, f)?;
        self.flush_packet()
    }

    /// Move the packets buffered so far into `out` (several inputs).
    fn drain_into(&mut self, out: &mut impl Write) -> Result<()> {
        if let Sink::Buffer(b) = &mut self.out {
            if !b.is_empty() {
                out.write_all(b).map_err(io_err(&self.path))?;
                b.clear();
            }
        }
        Ok(())
    }

    /// The fields every packet starts with. Every packet needs the
    /// sequence's incremental state (its packet defaults say which clock
    /// `ts` is in); the first packet, and the first after the interning
    /// tables are dropped, clears it and sets the defaults (again: a clear
    /// drops them). See docs/perfetto.md, "Time".
    fn packet_head(&mut self, ts: Option<u64>) -> Result<()> {
        self.pkt.clear();
        wire::varint_field(&mut self.pkt, P_SEQUENCE_ID, self.seq_id);
        if let Role::Remote { id, .. } = self.role {
            wire::varint_field(&mut self.pkt, P_MACHINE_ID, id as u64);
        }
        if let Some(t) = ts {
            wire::varint_field(&mut self.pkt, P_TIMESTAMP, t);
        }
        let mut flags = SEQ_NEEDS_INCREMENTAL_STATE;
        if self.intern.clear {
            self.intern.clear = false;
            flags |= SEQ_INCREMENTAL_STATE_CLEARED;
            wire::nested::<Error>(&mut self.pkt, P_TRACE_PACKET_DEFAULTS, |b| {
                wire::varint_field(b, TPD_TIMESTAMP_CLOCK_ID, CLOCK_BOOTTIME);
                Ok(())
            })?;
        }
        wire::varint_field(&mut self.pkt, P_SEQUENCE_FLAGS, flags);
        Ok(())
    }

    /// The first packet: the clock snapshot that says how the timestamps
    /// read (see docs/perfetto.md, "Time"). The trace clock (BOOTTIME)
    /// starts a second before the first item, so packet timestamps are
    /// small varints (five bytes for a day, not nine for an epoch date);
    /// the snapshot ties that axis to REALTIME, the source's own time, in
    /// which log lines are stamped and dates are shown.
    fn start(&mut self, first: Timestamp) -> Result<()> {
        if self.started {
            return Ok(());
        }
        self.started = true;
        self.boot_zero = first.0.saturating_sub(BOOT_MARGIN_NS);
        let boot = self.ns(first);
        let real = self.realtime(first);
        let clocks = |b: &mut Vec<u8>| {
            for (id, t) in [(CLOCK_BOOTTIME, boot), (CLOCK_REALTIME, real)] {
                wire::nested::<Error>(b, CS_CLOCKS, |b| {
                    wire::varint_field(b, CLK_ID, id);
                    wire::varint_field(b, CLK_TIMESTAMP, t);
                    Ok(())
                })?;
            }
            Ok(())
        };
        let name = match &self.role {
            Role::Only => None,
            Role::Host { name } | Role::Remote { name, .. } => Some(name.clone()),
        };
        if let Role::Remote { .. } = self.role {
            // Perfetto's trace processor would let a clock snapshot on
            // another machine take over the trace's clock; a remote clock
            // sync only ties this machine's clocks to the host's. Two equal
            // rounds: offset 0, the inputs share one time axis.
            self.packet(None, P_REMOTE_CLOCK_SYNC, |b| {
                for _ in 0..2 {
                    wire::nested::<Error>(b, RCS_SYNCED_CLOCKS, |b| {
                        wire::nested::<Error>(b, SC_CLIENT_CLOCKS, clocks)?;
                        wire::nested::<Error>(b, SC_HOST_CLOCKS, clocks)
                    })?;
                }
                Ok(())
            })?;
        } else {
            let dated = self.header.time_base.is_absolute();
            self.packet(Some(boot), P_CLOCK_SNAPSHOT, |b| {
                clocks(b)?;
                if dated {
                    wire::varint_field(b, CS_PRIMARY_CLOCK, CLOCK_REALTIME);
                }
                Ok(())
            })?;
        }
        if let Some(name) = name {
            self.packet(None, P_SYSTEM_INFO, |b| {
                wire::str_field(b, SI_MACHINE_NAME, &name);
                Ok(())
            })?;
        }
        Ok(())
    }

    /// A time as a packet timestamp (trace clock): nanoseconds, exact. A
    /// time more than the margin before the first item cannot be written;
    /// it is clamped to the trace's start and reported.
    fn ns(&mut self, t: Timestamp) -> u64 {
        let d = t.0.saturating_sub(self.boot_zero);
        if d < 0 {
            self.lay.loss.degrade(
                "timestamps",
                "over a second before the first item: written at the trace's start",
            );
            return 0;
        }
        d as u64
    }

    /// A time on REALTIME (log lines): the source's own time.
    fn realtime(&mut self, t: Timestamp) -> u64 {
        if t.0 < 0 {
            self.lay
                .loss
                .degrade("timestamps", "before 0 on a relative clock: written as 0");
            return 0;
        }
        t.0 as u64
    }

    /// Finish a TrackEvent packet: the interned data it defines. `self.pkt` already holds the head and the event.
    fn finish_event_packet(&mut self) -> Result<()> {
        let i = &self.intern;
        if !(i.new_names.is_empty()
            && i.new_cats.is_empty()
            && i.new_args.is_empty()
            && i.new_labels.is_empty())
        {
            wire::nested::<Error>(&mut self.pkt, P_INTERNED_DATA, |b| {
                b.extend_from_slice(&i.new_cats);
                b.extend_from_slice(&i.new_names);
                b.extend_from_slice(&i.new_args);
                b.extend_from_slice(&i.new_labels);
                Ok(())
            })?;
        }
        self.flush_packet()
    }

    /// A TrackEvent packet of `kind` on `track`, named `name`, with the
    /// fields of `ty` (then of `ty2`, prefixed `exit.`) as annotations.
    /// `of`: the stream's event type `ty` is (its category, fields and,
    /// for an instant, name), whose interned ids are then kept.
    #[allow(clippy::too_many_arguments)]
    fn track_event(
        &mut self,
        kind: Kind,
        t: Timestamp,
        track: u64,
        name: &str,
        cats: (&str, bool),
        args: (&EventType, &[Value]),
        exit_args: Option<(&EventType, &[Value])>,
        of: Option<EventTypeId>,
    ) -> Result<()> {
        if self.intern.begin() {
            self.counts.resets += 1;
        }
        let ts = self.ns(t);
        self.packet_head(Some(ts))?;
        let Self {
            pkt,
            intern,
            text,
            argname,
            iids,
            ..
        } = self;
        let mut ids = of.map(|id| {
            let e = iids.entry(id).or_default();
            if e.generation != intern.generation {
                e.generation = intern.generation;
                e.cat = None;
                e.name = None;
                e.fields.clear();
                e.fields.resize(args.0.fields.len(), None);
            }
            e
        });
        // In the interner's order: category, "unmatched", name, fields.
        let cat = cached(ids.as_mut().map(|e| &mut e.cat), intern, 1, cats.0);
        let unmatched = cats.1.then(|| intern.get(1, "unmatched"));
        let name_iid = match kind {
            Kind::End => None,
            Kind::Begin => Some(intern.get(0, name)),
            Kind::Instant => Some(cached(ids.as_mut().map(|e| &mut e.name), intern, 0, name)),
        };
        let ty = match kind {
            Kind::Begin => TYPE_SLICE_BEGIN,
            Kind::End => TYPE_SLICE_END,
            Kind::Instant => TYPE_INSTANT,
        };
        // Annotation names are interned before the event is encoded (the
        // interner and the packet are separate buffers).
        let with_args = !matches!(kind, Kind::End);
        let slots = ids.map(|e| &mut e.fields[..]);
        wire::nested::<Error>(pkt, P_TRACK_EVENT, |b| {
            wire::varint_field(b, TE_TYPE, ty);
            wire::varint_field(b, TE_TRACK_UUID, track);
            if let Some(n) = name_iid {
                wire::varint_field(b, TE_NAME_IID, n);
            }
            if with_args {
                wire::varint_field(b, TE_CATEGORY_IIDS, cat);
                if let Some(u) = unmatched {
                    wire::varint_field(b, TE_CATEGORY_IIDS, u);
                }
                annotations(b, intern, text, argname, args, "", slots)?;
                if let Some(exit) = exit_args {
                    annotations(b, intern, text, argname, exit, "exit.", None)?;
                }
            }
            Ok(())
        })?;
        self.finish_event_packet()
    }

    /// An instant the writer makes itself (metric strings, event records,
    /// marks, annotations): of no event type of the stream.
    fn own_instant(
        &mut self,
        t: Timestamp,
        track: u64,
        name: &str,
        cat: &str,
        args: (&EventType, &[Value]),
    ) -> Result<()> {
        self.track_event(
            Kind::Instant,
            t,
            track,
            name,
            (cat, false),
            args,
            None,
            None,
        )?;
        self.counts.instants += 1;
        Ok(())
    }

    /// A counter value on counter track `uuid`.
    fn counter_event(&mut self, t: Timestamp, uuid: u64, v: CounterValue) -> Result<()> {
        if self.intern.begin() {
            self.counts.resets += 1;
        }
        let ts = self.ns(t);
        self.packet_head(Some(ts))?;
        wire::nested::<Error>(&mut self.pkt, P_TRACK_EVENT, |b| {
            wire::varint_field(b, TE_TYPE, TYPE_COUNTER);
            wire::varint_field(b, TE_TRACK_UUID, uuid);
            match v {
                CounterValue::Int(x) => wire::int_field(b, TE_COUNTER_VALUE, x),
                CounterValue::Double(x) => wire::double_field(b, TE_DOUBLE_COUNTER_VALUE, x),
            }
            Ok(())
        })?;
        self.finish_event_packet()?;
        self.counts.counters += 1;
        Ok(())
    }

    /// An android_log packet with one LogEvent.
    fn log(&mut self, t: Timestamp, tr: Track, prio: u64, tag: &str, msg: &str) -> Result<()> {
        let boot = self.ns(t);
        let ts = self.realtime(t);
        self.packet(Some(boot), P_ANDROID_LOG, |b| {
            wire::nested::<Error>(b, AL_EVENTS, |b| {
                wire::int_field(b, LE_PID, tr.pid);
                wire::int_field(b, LE_TID, tr.tid);
                wire::varint_field(b, LE_TIMESTAMP, ts);
                wire::str_field(b, LE_TAG, tag);
                wire::varint_field(b, LE_PRIO, prio);
                wire::str_field(b, LE_MESSAGE, msg);
                Ok(())
            })
        })?;
        self.counts.logs += 1;
        Ok(())
    }

    // ------------------------------------------------------------ tracks

    fn uuid(&mut self) -> u64 {
        self.next_uuid += 1;
        self.next_uuid * self.uuid_stride + self.uuid_offset
    }

    /// A process descriptor for `pid` named `name` (again on a rename).
    fn process(&mut self, pid: i64, name: &str) -> Result<u64> {
        let (uuid, new) = match self.procs.get(&pid) {
            Some(&u) => (u, false),
            None => (self.uuid(), true),
        };
        if new {
            self.procs.insert(pid, uuid);
        }
        self.packet(None, P_TRACK_DESCRIPTOR, |b| {
            wire::varint_field(b, TD_UUID, uuid);
            wire::nested::<Error>(b, TD_PROCESS, |b| {
                wire::int_field(b, PD_PID, pid);
                wire::str_field(b, PD_PROCESS_NAME, name);
                Ok(())
            })
        })?;
        self.counts.descriptors += 1;
        Ok(uuid)
    }

    /// A thread descriptor (`pid`, `tid`) under the process of `pid`.
    fn thread(
        &mut self,
        uuid: u64,
        pid: i64,
        tid: i64,
        name: &str,
        rank: Option<i64>,
    ) -> Result<()> {
        let parent = self.procs.get(&pid).copied();
        self.packet(None, P_TRACK_DESCRIPTOR, |b| {
            wire::varint_field(b, TD_UUID, uuid);
            if let Some(p) = parent {
                wire::varint_field(b, TD_PARENT_UUID, p);
            }
            wire::nested::<Error>(b, TD_THREAD, |b| {
                wire::int_field(b, THD_PID, pid);
                wire::int_field(b, THD_TID, tid);
                wire::str_field(b, THD_THREAD_NAME, name);
                Ok(())
            })?;
            if let Some(r) = rank {
                wire::int_field(b, TD_SIBLING_ORDER_RANK, r);
            }
            Ok(())
        })?;
        self.counts.descriptors += 1;
        Ok(())
    }

    /// A counter track named `name` under the process of `pid`.
    fn counter_track(&mut self, pid: i64, name: &str, unit: &str) -> Result<u64> {
        let uuid = self.uuid();
        let parent = self.procs.get(&pid).copied();
        self.packet(None, P_TRACK_DESCRIPTOR, |b| {
            wire::varint_field(b, TD_UUID, uuid);
            if let Some(p) = parent {
                wire::varint_field(b, TD_PARENT_UUID, p);
            }
            wire::str_field(b, TD_NAME, name);
            wire::nested::<Error>(b, TD_COUNTER, |b| {
                if !unit.is_empty() {
                    wire::str_field(b, CD_UNIT_NAME, unit);
                }
                Ok(())
            })
        })?;
        self.counts.descriptors += 1;
        Ok(uuid)
    }

    /// An event with a log level or priority as a log line: tag `APID:CTID`
    /// (DLT) or the category, the message the field values as text.
    fn log_line(&mut self, e: &Event, ti: &TypeInfo, home: usize, prio: u64) -> Result<()> {
        let mut tag = std::mem::take(&mut self.tagbuf);
        tag.clear();
        tag.push_str(&ti.ty.category);
        let dlt = e.extras.str(X_ECU).is_some();
        if dlt {
            tag.push(':');
            tag.push_str(&ti.ty.name);
        }
        let mut msg = std::mem::take(&mut self.logbuf);
        msg.clear();
        // A DLT record kept whole: its payload as `dlt-convert -a` prints it.
        let raw = e
            .extras
            .bytes(X_RAW)
            .and_then(|r| crate::formats::dlt::layout::Msg::parse(0, r));
        match raw {
            Some(m) => crate::formats::dlt::text::payload(&m, &mut msg),
            None => log_message(&mut msg, &ti.ty, &e.fields, dlt),
        }
        let tr = self.lay.tracks[home];
        let text = String::from_utf8_lossy(&msg);
        let r = self.log(e.time, tr, prio, &tag, &text);
        drop(text);
        self.tagbuf = tag;
        self.logbuf = msg;
        r
    }

    fn close(&mut self) -> Result<()> {
        self.end_pairs()?;
        let p = self.path.clone();
        match &mut self.out {
            Sink::File(f) => f.flush().map_err(io_err(&p)),
            Sink::Buffer(_) => Ok(()),
        }
    }

    /// What was written, with the counts of the loss report.
    fn report(&mut self) -> LossReport {
        let c = &self.counts;
        let wrote = [
            ("slices (paired entry/exit)", c.slices),
            ("running slices (from schedchange)", c.running),
            ("instants", c.instants),
            ("counter values", c.counters),
            ("log lines (android_log)", c.logs),
            ("track descriptors", c.descriptors),
        ];
        self.report_counts(&wrote)
    }
}

/// A counter value as Perfetto takes it.
#[derive(Clone, Copy)]
enum CounterValue {
    Int(i64),
    Double(f64),
}

/// Types of the annotations the writer makes itself (built once).
fn pid_type() -> &'static EventType {
    static T: std::sync::OnceLock<EventType> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        EventType::new(
            0,
            "sched",
            "running",
            vec![Field::new("pid", FieldType::Int(8))],
        )
    })
}

fn value_type() -> &'static EventType {
    static T: std::sync::OnceLock<EventType> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        EventType::new(
            0,
            "metric",
            "value",
            vec![Field::new("value", FieldType::String)],
        )
    })
}

fn annotation_type() -> &'static EventType {
    static T: std::sync::OnceLock<EventType> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        EventType::new(
            0,
            "annotation",
            "annotation",
            vec![
                Field::new("text", FieldType::String),
                Field::new("ctid", FieldType::String),
            ],
        )
    })
}

/// The fields of an event as typed debug annotations, names interned
/// (their ids kept in `slots`, one per field of `ty`, where given).
fn annotations(
    b: &mut Vec<u8>,
    intern: &mut Interner,
    text: &mut Vec<u8>,
    pname: &mut String,
    (ty, values): (&EventType, &[Value]),
    prefix: &str,
    mut slots: Option<&mut [Option<u64>]>,
) -> Result<()> {
    for (i, v) in values.iter().enumerate() {
        let f = ty.fields.get(i);
        let iid = match (f, prefix.is_empty()) {
            (Some(f), true) => {
                let slot = slots.as_mut().and_then(|s| s.get_mut(i));
                cached(slot, intern, 2, &f.name)
            }
            _ => {
                // Prefixed or unnamed: built once per field, rare.
                pname.clear();
                pname.push_str(prefix);
                match f {
                    Some(f) => pname.push_str(&f.name),
                    None => {
                        use std::fmt::Write as _;
                        let _ = write!(pname, "field{i}");
                    }
                }
                intern.get(2, pname)
            }
        };
        wire::nested::<Error>(b, TE_DEBUG_ANNOTATIONS, |b| {
            wire::varint_field(b, DA_NAME_IID, iid);
            match v {
                Value::I64(x) => wire::int_field(b, DA_INT, *x),
                Value::U64(x) => wire::varint_field(b, DA_UINT, *x),
                Value::F32(x) => wire::double_field(b, DA_DOUBLE, *x as f64),
                Value::F64(x) => wire::double_field(b, DA_DOUBLE, *x),
                Value::Str(s) => wire::str_field(b, DA_STRING, s),
                Value::Enum(x) => {
                    let label = match f.map(|f| &f.ty) {
                        Some(FieldType::Enum { labels, .. }) => {
                            labels.iter().find(|(n, _)| n == x).map(|(_, l)| l.as_str())
                        }
                        _ => None,
                    };
                    match label {
                        // Labels repeat: interned, as names are.
                        Some(l) => wire::varint_field(b, DA_STRING_IID, intern.get(3, l)),
                        None => wire::int_field(b, DA_INT, *x),
                    }
                }
                // Bytes and compound values: their JSON text, as the Chrome
                // export shows them.
                other => {
                    text.clear();
                    let _ = write_value(text, other, f.map(|f| &f.ty));
                    wire::bytes_field(b, DA_STRING, text);
                }
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// A log line's message: the field values as text, separated by spaces
/// (as `dlt-convert -a` prints DLT arguments), strings as they are; a
/// timeline message is its format with the `$name` placeholders filled in.
fn log_message(out: &mut Vec<u8>, ty: &EventType, fields: &[Value], dlt: bool) {
    let put = |out: &mut Vec<u8>, v: &Value| match v {
        Value::Str(s) => out.extend_from_slice(s.as_bytes()),
        other => {
            let mut t = String::new();
            other.push_text(&mut t);
            out.extend_from_slice(t.as_bytes());
        }
    };
    if !dlt && ty.name.contains('$') {
        for (i, w) in ty.name.split(' ').enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            match w
                .strip_prefix('$')
                .and_then(|n| ty.fields.iter().position(|f| f.name == n))
                .and_then(|k| fields.get(k))
            {
                Some(v) => put(out, v),
                None => out.extend_from_slice(w.as_bytes()),
            }
        }
        return;
    }
    if !dlt {
        out.extend_from_slice(ty.name.as_bytes());
    }
    for v in fields {
        if !out.is_empty() {
            out.push(b' ');
        }
        put(out, v);
    }
}

impl Describe for PerfettoWriter {
    type Series = Series;

    fn layout(&mut self) -> &mut Layout<Series> {
        &mut self.lay
    }

    fn new_series(&mut self, track: Track, name: String) -> Series {
        Series {
            name,
            track,
            counter_uuid: None,
            prev: None,
        }
    }

    /// Perfetto orders processes itself: no sort key.
    fn describe_process(&mut self, pid: i64, name: &str, _: Option<i64>) -> Result<()> {
        self.process(pid, name).map(drop)
    }

    fn describe_thread(
        &mut self,
        pid: i64,
        tid: i64,
        name: &str,
        rank: Option<i64>,
    ) -> Result<u64> {
        let uuid = self.uuid();
        self.thread(uuid, pid, tid, name, rank)?;
        Ok(uuid)
    }

    /// The same uuids again: the descriptors are renamed in place.
    fn rename(&mut self, t: Track, name: &str) -> Result<()> {
        self.process(t.pid, name)?;
        self.thread(t.id, t.pid, t.pid, name, None)
    }

    /// pid 0 is the kernel's swapper to Perfetto: a group of its own.
    fn idle_group(&mut self) -> Result<i64> {
        self.group("idle (pid 0)", None)
    }
}

impl SliceExport for PerfettoWriter {
    const RULES: &'static [crate::formats::format::Rule] = super::WRITES;

    fn first_time(&mut self, t: Timestamp) -> Result<()> {
        self.start(t)
    }

    fn finish_export(&mut self) -> Result<LossReport> {
        self.close()?;
        Ok(self.report())
    }

    fn type_extra(&mut self, t: &EventType) -> Option<u64> {
        // A redefined type: its kept ids may name other strings.
        self.iids.remove(&t.id);
        t.priority.as_deref().and_then(log_priority)
    }

    fn placed_event(&mut self, e: &Event, ti: &TypeInfo, home: usize) -> Result<()> {
        if let Some(p) = ti.extra {
            self.log_line(e, ti, home, p)?;
        }
        self.paired_event(e, ti, home)
    }

    fn value(&mut self, m: MetricId, inst: InstId, v: &Value, t: Timestamp) -> Result<()> {
        if !is_counter_value(v) {
            return self.other_value(m, inst, v, t);
        }
        let counter = self.lay.metrics.get(&m).is_some_and(|mi| mi.counter);
        let as_rate = self.rate && counter;
        let se = self.series(m, inst)?;
        let uuid = match se.counter_uuid {
            Some(u) => u,
            None => {
                let (pid, name) = (se.track.pid, se.name.clone());
                let units = self
                    .lay
                    .metrics
                    .get(&m)
                    .map(|mi| mi.units.clone())
                    .unwrap_or_default();
                let unit = match (as_rate, units.is_empty()) {
                    (false, _) => units,
                    (true, true) => "/ sec".into(),
                    (true, false) => format!("{units} / sec"),
                };
                let u = self.counter_track(pid, &name, &unit)?;
                self.lay.series_mut(m, inst).expect("made").counter_uuid = Some(u);
                u
            }
        };
        let cv = if as_rate {
            let x = v.as_f64().unwrap_or(0.0);
            let se = self.lay.series_mut(m, inst).expect("made");
            let prev = se.prev.replace((t.0, x));
            // The first value, a counter that went down (reset or wrap) or
            // no time between: no rate to show.
            match prev {
                Some((t0, x0)) if t.0 > t0 && x >= x0 => {
                    CounterValue::Double((x - x0) / ((t.0 - t0) as f64 / 1e9))
                }
                _ => return Ok(()),
            }
        } else {
            match *v {
                Value::I64(x) | Value::Enum(x) => CounterValue::Int(x),
                Value::U64(x) => match i64::try_from(x) {
                    Ok(x) => CounterValue::Int(x),
                    Err(_) => CounterValue::Double(x as f64),
                },
                Value::F32(x) => CounterValue::Double(x as f64),
                Value::F64(x) => CounterValue::Double(x),
                _ => unreachable!("numeric arm"),
            }
        };
        self.counter_event(t, uuid, cv)
    }

    fn string_value(&mut self, m: MetricId, inst: InstId, s: &str, t: Timestamp) -> Result<()> {
        let se = self.series(m, inst)?;
        let (uuid, name) = (se.track.id, se.name.clone());
        let vals = [Value::Str(s.to_string())];
        self.own_instant(t, uuid, &name, "metric", (value_type(), &vals))
    }

    fn event_record(&mut self, m: MetricId, inst: InstId, rec: &EventRecord) -> Result<()> {
        let se = self.series(m, inst)?;
        let (uuid, name) = (se.track.id, se.name.clone());
        // Parameters as annotations named after their metric.
        let mut fields = vec![Field::new("flags", FieldType::Uint(4))];
        let mut vals = vec![Value::U64(rec.flags as u64)];
        for p in &rec.params {
            fields.push(Field::new(
                &self.lay.metric_name(p.metric),
                FieldType::String,
            ));
            vals.push(p.value.clone());
        }
        let ty = EventType::new(0, "event record", &name, fields);
        self.own_instant(rec.time, uuid, &name, "event record", (&ty, &vals))
    }

    fn mark(&mut self, m: &Mark) -> Result<()> {
        let track = self.place(TrackKey::Marks)?;
        let uuid = self.lay.tracks[track].id;
        self.own_instant(m.time, uuid, "mark", "mark", (value_type(), &[]))
    }

    fn annotation(&mut self, a: &Annotation) -> Result<()> {
        let track = self.annotation_track(a)?;
        let uuid = self.lay.tracks[track].id;
        let mut vals = vec![Value::Str(a.text.clone())];
        if let Some(c) = a.extras.str(X_CTID) {
            vals.push(Value::Str(c.to_string()));
        }
        self.own_instant(
            a.time,
            uuid,
            annotation_name(&a.text),
            "annotation",
            (annotation_type(), &vals),
        )
    }
}

impl Slices for PerfettoWriter {
    type Extra = Option<u64>;

    fn pairing(&mut self) -> &mut Pairing<Option<u64>> {
        &mut self.p
    }

    fn track(&mut self, key: TrackKey) -> Result<usize> {
        self.place(key)
    }

    fn instant(&mut self, i: Point<'_>) -> Result<()> {
        let uuid = self.lay.tracks[i.track].id;
        self.track_event(
            Kind::Instant,
            i.time,
            uuid,
            &i.ty.name,
            (&i.ty.category, i.unmatched),
            (i.ty, i.fields),
            None,
            Some(i.ty.id),
        )?;
        self.counts.instants += 1;
        Ok(())
    }

    /// A slice from an entry and its exit: its begin and end, written when
    /// the exit is read (the trace processor sorts by time).
    fn slice(&mut self, s: Span<'_, Option<u64>>) -> Result<()> {
        let end = slice_end(s.open, s.close, &mut self.lay.loss);
        let uuid = self.lay.tracks[s.track].id;
        let ty = &s.ty.ty;
        let exit = (!s.close.fields.is_empty()).then_some((&*s.close_ti.ty, &s.close.fields[..]));
        let (cat, args) = ((ty.category.as_str(), false), (&**ty, &s.open.fields[..]));
        self.track_event(
            Kind::Begin,
            s.open.time,
            uuid,
            s.name,
            cat,
            args,
            exit,
            Some(ty.id),
        )?;
        self.track_event(Kind::End, end, uuid, "", ("", false), (ty, &[]), None, None)?;
        self.counts.slices += 1;
        Ok(())
    }

    /// One edge of a running slice on the CPU's "running" track.
    fn run_edge(&mut self, e: Edge) -> Result<()> {
        let uuid = self.lay.tracks[e.track].id;
        let pid_ty = pid_type();
        if e.begin {
            let label = self.p.run_label(e.cpu, self.lay.process_label(e.pid));
            let pid_val = [Value::I64(e.pid)];
            self.track_event(
                Kind::Begin,
                e.at,
                uuid,
                &label,
                ("sched", false),
                (pid_ty, &pid_val),
                None,
                None,
            )?;
            self.counts.running += 1;
        } else {
            self.track_event(
                Kind::End,
                e.at,
                uuid,
                "",
                ("", false),
                (pid_ty, &[]),
                None,
                None,
            )?;
        }
        Ok(())
    }
}

/// Check the time base, then create the output file.
fn create_file(path: &Path, header: &Header) -> Result<Box<dyn Write + Send>> {
    if let TimeBase::Cycles { hz: None, .. } = header.time_base {
        return Err(Error::Usage(
            "a Perfetto trace has nanosecond timestamps and this source has TSC cycles only: \
             give --tsc-hz HZ (as for --to pcp)"
                .into(),
        ));
    }
    Ok(Box::new(
        std::fs::File::create(path).map_err(|e| Error::io(path, e))?,
    ))
}

/// The writer for `header`: one input as it is; a merged stream of several
/// inputs (`keys::MERGE_SOURCES`) one machine per input.
pub fn create(path: &Path, header: &Header, opts: &WriteOptions) -> Result<Box<dyn TraceWriter>> {
    let mut labels: Vec<&str> = Vec::new();
    if let Some(ExtraValue::List(l)) = header.extras.get(keys::MERGE_SOURCES) {
        for v in l {
            // Inputs of one label cannot be told apart: one machine.
            if let ExtraValue::Str(s) = v {
                if !labels.contains(&s.as_str()) {
                    labels.push(s);
                }
            }
        }
    }
    if labels.len() < 2 {
        return Ok(Box::new(PerfettoWriter::new(path, header, opts)?));
    }
    let out = ChunkedWriter::new(create_file(path, header)?);
    let n = labels.len() as u64;
    let machines = labels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut w = PerfettoWriter::with_sink(Sink::Buffer(Vec::new()), path, header, opts);
            w.role = match i {
                0 => Role::Host {
                    name: l.to_string(),
                },
                _ => Role::Remote {
                    id: i as u32,
                    name: l.to_string(),
                },
            };
            w.seq_id = i as u64 + 1;
            w.uuid_stride = n;
            w.uuid_offset = i as u64;
            w
        })
        .collect();
    Ok(Box::new(MachinesWriter {
        out,
        path: path.to_path_buf(),
        by_label: labels
            .iter()
            .enumerate()
            .map(|(i, l)| (l.to_string(), i))
            .collect(),
        machines,
        started: false,
    }))
}

/// Several inputs: one [`PerfettoWriter`] per input (a machine, with its
/// own sequence, interning, tracks and clocks), each data item given to its
/// input's by the `source` extra, definitions to all; their whole packets
/// go into the file in item order.
struct MachinesWriter {
    out: ChunkedWriter<Box<dyn Write + Send>>,
    path: PathBuf,
    machines: Vec<PerfettoWriter>,
    by_label: HashMap<String, usize>,
    started: bool,
}

impl MachinesWriter {
    fn machine_of(&self, x: &Extras) -> usize {
        x.str(keys::SOURCE)
            .and_then(|s| self.by_label.get(s))
            .copied()
            .unwrap_or(0)
    }

    fn write_to(&mut self, m: usize, item: &Item) -> Result<()> {
        self.machines[m].write_item(item)?;
        self.machines[m].drain_into(&mut self.out)
    }
}

impl TraceWriter for MachinesWriter {
    fn write_item(&mut self, item: &Item) -> Result<()> {
        if !self.started && item.is_data() {
            if let Some(t) = item.time() {
                // Every machine on the one time axis, from the first item.
                self.started = true;
                for m in &mut self.machines {
                    m.lay.origin = Some(t);
                    m.start(t)?;
                    m.drain_into(&mut self.out)?;
                }
            }
        }
        let m = match item {
            Item::EventType(_) | Item::Metric(_) | Item::Indom(_) => {
                for m in 0..self.machines.len() {
                    self.write_to(m, item)?;
                }
                return Ok(());
            }
            // Dropped: counted once.
            Item::Help(_) | Item::Labels(_) => 0,
            Item::Event(e) => self.machine_of(&e.extras),
            Item::EventRun(r) => self.machine_of(&r.event.extras),
            Item::Sample(s) => self.machine_of(&s.extras),
            Item::Mark(k) => self.machine_of(&k.extras),
            Item::Annotation(a) => self.machine_of(&a.extras),
        };
        self.write_to(m, item)
    }

    fn finish(mut self: Box<Self>) -> Result<LossReport> {
        if !self.started {
            return Err(Error::nothing_to_write(
                "nothing to write",
                "the inputs have no events, samples, marks or annotations",
            ));
        }
        let mut loss = LossReport::default();
        for m in &mut self.machines {
            m.close_pairs()?;
            m.drain_into(&mut self.out)?;
            loss.merge(&m.report());
        }
        loss.wrote("machines (one per input)", self.machines.len() as u64);
        self.out.flush().map_err(|e| Error::io(&self.path, e))?;
        Ok(loss)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_clears_when_the_tables_are_full() {
        let mut i = Interner::new();
        assert!(i.clear, "the first packet clears the state");
        assert!(!i.begin());
        let a = i.get(0, "syscall");
        assert_eq!(i.get(0, "syscall"), a, "a name is interned once");
        assert!(
            !i.new_names.is_empty(),
            "and defined in the packet that uses it"
        );
        let c = i.get(1, "core");
        assert_ne!(a, c);
        i.clear = false;
        // One packet's worth of new names fills the tables.
        let mut n = 0;
        while i.len() < INTERN_LIMIT {
            i.get(0, &format!("name {n}"));
            n += 1;
        }
        // Full: the next packet drops the tables and clears the state.
        assert!(i.begin());
        assert!(i.clear);
        assert_eq!(i.len(), 0);
        assert!(i.new_names.is_empty());
        let again = i.get(0, "syscall");
        assert_eq!(again, 1, "ids start over");
        assert!(!i.new_names.is_empty(), "redefined after the clear");
    }

    #[test]
    fn priorities() {
        assert_eq!(log_priority("fatal"), Some(PRIO_FATAL));
        assert_eq!(log_priority("warn"), Some(PRIO_WARN));
        assert_eq!(log_priority("warning"), Some(PRIO_WARN));
        assert_eq!(log_priority("trace"), Some(PRIO_VERBOSE));
        assert_eq!(log_priority("packet"), Some(PRIO_DEBUG));
        assert_eq!(log_priority("off"), None);
    }
}
