//! Writer for A2 (2016 prototype, readable by Snabb's `dump()`) and M3
//! (mainline). Entries go to the file at their slot's offset as they come,
//! in runs of consecutive slots; the header and the string table (held in
//! memory, only its used part) are written at `finish`, which sizes the
//! file. Slots never written and the table's unused tail are never
//! written at all: they read as zeros (holes in the file where the file
//! system has them), so memory stays flat and a ring much larger than the
//! data costs neither memory nor writing.
//!
//! A stream read from a timeline file of the same layout and ring size is
//! written back slot for slot (string table, raw msg_ids, ip, aux, `next`,
//! mask), so A2 → A2 and M3 → M3 reproduce the file. Anything else is logged
//! as Snabb's logger would: sequential slots, wrapping, interned strings.

use super::keys;
use super::layout::{
    placeholders, Layout, A_DEFAULT_ENTRIES, A_DEFAULT_STRINGS, ENTRY_SIZE, HEADER_SIZE,
    M_DEFAULT_ENTRIES, M_DEFAULT_STRINGS, M_MAGIC, M_UNKNOWN_MSGID, PRIORITIES,
};
use crate::error::{Error, Result};
use crate::formats::format::note_dropped;
use crate::model::{
    Event, EventType, EventTypeId, ExtraValue, FieldType, FormatId, Header, IndomId, InstId, Item,
    LossReport, MetricDesc, MetricId, Sample, TraceWriter, Value,
};
use crate::options::WriteOptions;
use crate::output::OutTarget;
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;

/// Largest ring we build in memory (1 GiB of entries).
const MAX_ENTRIES: u64 = 1 << 24;
/// Largest string table (M: its size is a u32; A: offsets are 16 bits anyway).
const MAX_STRINGS: u64 = 1 << 28;
/// 2^63: floats at or beyond it do not fit an i64.
const I64_RANGE: f64 = 9_223_372_036_854_775_808.0;
/// Smallest ring the writer sizes to the data (no `--entries`).
const AUTO_MIN_ENTRIES: u64 = 1024;
/// Default priority of events that have none: `trace` (occasional events).
const DEFAULT_PRIORITY: usize = 4;

/// A string arg the string table had no room for (read back as "").
const NO_STRING: u64 = u64::MAX;

/// How the events of one source type are written.
#[derive(Clone)]
struct TypeMap {
    /// A: packed msg_id (without per-event raw override); M: msgid.
    id: u64,
    /// A: (cat_off, msg_off) decoded as Snabb's dump does, to validate raw ids.
    offs: (u64, u64),
    /// Which fields become args, in order.
    arg_fields: Vec<usize>,
    /// Fields that could not be written (non-numeric, beyond the arg count).
    lost_fields: usize,
    /// None: events of this type are dropped (reason).
    drop: Option<&'static str>,
    /// A2: the format and priority written (a type without them gets some).
    written: Option<(String, &'static str)>,
}

/// What an entry needs of its type (copied, so no borrow of the type map
/// is held while the entry is written).
#[derive(Clone, Copy)]
struct Msg {
    id: u64,
    offs: (u64, u64),
    lost_fields: usize,
    drop: Option<&'static str>,
}

impl TypeMap {
    /// The numeric args (a prefix of `arg_fields`): the ones a format or
    /// spec names; text args follow them unnamed.
    fn numeric_args<'a>(&'a self, t: &'a EventType) -> impl Iterator<Item = usize> + 'a {
        self.arg_fields
            .iter()
            .copied()
            .take_while(|&i| t.fields[i].ty.is_numeric())
    }
    fn msg(&self) -> Msg {
        Msg {
            id: self.id,
            offs: self.offs,
            lost_fields: self.lost_fields,
            drop: self.drop,
        }
    }
}

/// Entries gathered before one write: consecutive slots from `first`.
const RUN_ENTRIES: usize = 4096;

/// Where the file's bytes go: a file written at offsets (the staged
/// output), or memory for stdout.
enum Sink {
    File(File),
    Mem(Vec<u8>),
}

impl Sink {
    fn write_at(&mut self, off: u64, b: &[u8]) -> std::io::Result<()> {
        match self {
            Sink::File(f) => std::os::unix::fs::FileExt::write_all_at(f, b, off),
            Sink::Mem(v) => {
                let (o, e) = (off as usize, off as usize + b.len());
                if v.len() < e {
                    v.resize(e, 0);
                }
                v[o..e].copy_from_slice(b);
                Ok(())
            }
        }
    }
}

/// Event type ids are small in practice: a table indexed by id, with a map
/// for the rare large one.
struct TypeTable {
    small: Vec<Option<TypeMap>>,
    large: HashMap<EventTypeId, TypeMap>,
}

const SMALL_IDS: usize = 1 << 16;

impl TypeTable {
    fn get(&self, id: EventTypeId) -> Option<&TypeMap> {
        match self.small.get(id as usize) {
            Some(t) => t.as_ref(),
            None if id as usize >= SMALL_IDS => self.large.get(&id),
            None => None,
        }
    }
    fn insert(&mut self, id: EventTypeId, tm: TypeMap) {
        let i = id as usize;
        if i < SMALL_IDS {
            if self.small.len() <= i {
                self.small.resize(i + 1, None);
            }
            self.small[i] = Some(tm);
        } else {
            self.large.insert(id, tm);
        }
    }
}

pub struct TimelineWriter {
    out: OutTarget,
    sink: Sink,
    /// Entries of consecutive slots from `run_first`, not yet written.
    run: Vec<u8>,
    run_first: usize,
    layout: Layout,
    n: usize,
    strings_start: usize,
    /// The string table's used part (the rest of its `table_cap` bytes are
    /// zeros, never held).
    strings: Vec<u8>,
    table_cap: usize,
    str_used: usize,
    intern: HashMap<Vec<u8>, usize>,
    preserve: bool,
    header_next: Option<u64>,
    mask: u64,
    magic32: u32,
    minor: u16,
    cursor: u64,
    /// Slots written, when the file is rewritten slot for slot (`preserve`).
    used: Vec<bool>,
    types: TypeTable,
    metrics: HashMap<MetricId, MetricDesc>,
    inst_names: HashMap<(IndomId, InstId), String>,
    sample_types: HashMap<(MetricId, InstId), Msg>,
    written: u64,
    /// Events written without some of their fields (one loss line).
    lost_field_events: u64,
    loss: LossReport,
    /// The source's raw clock counts cycles (`model::keys::RAW_CLOCK`): it
    /// goes into the tsc field. Any other (DLT 0.1 ms ticks, unknown) does
    /// not; the tsc is then the time in nanoseconds.
    raw_is_cycles: bool,
    /// What a reader needs to give back the source's types and samples
    /// (`describe`); None when the file is rewritten slot for slot.
    desc: Option<Desc>,
    /// Ring sized to the data: it doubles, up to this many entries (the
    /// layout's default ring), before it wraps. 0 = fixed size.
    grow_to: usize,
}

/// The self-description gathered while writing (written at `finish`).
struct Desc {
    source: String,
    time_base: crate::model::TimeBase,
    /// (message id as written, the source's event type, reduced to the
    /// fields that became args).
    types: Vec<(u64, EventType)>,
    /// (message id, metric, instance) of sample messages.
    samples: Vec<(u64, MetricId, InstId)>,
    first_time: Option<i64>,
    /// The TSC rate the source measured (a recording's `record.tsc_hz`)
    /// and the epoch ns of TSC 0 from its anchor, so that the raw cycles
    /// in the tsc field read back on the recording's time axis.
    clock: Option<(f64, Option<i64>)>,
}

/// The source's TSC rate and the epoch time of TSC 0, where it has them.
fn source_clock(x: &crate::model::Extras) -> Option<(f64, Option<i64>)> {
    use crate::model::keys;
    let hz = x.f64(keys::TSC_HZ).filter(|h| h.is_finite() && *h > 0.0)?;
    let anchor = match x.get(keys::TSC_ANCHOR) {
        Some(ExtraValue::List(l)) => match l.as_slice() {
            [ExtraValue::U64(raw), ExtraValue::I64(t)] => {
                Some(t.saturating_sub((*raw as f64 * 1e9 / hz) as i64))
            }
            _ => None,
        },
        _ => None,
    };
    Some((hz, anchor))
}

fn sanitize_word(s: &str) -> String {
    let w: String = s.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    w
}

/// An event name for a mainline spec: words of letters and digits joined by
/// `_` (A formats such as `breath $n start` become `breath_n_start`).
fn event_word(s: &str) -> String {
    let w: Vec<String> = s
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect();
    if w.is_empty() {
        "event".into()
    } else {
        w.join("_")
    }
}

fn sanitize_name(s: &str) -> String {
    // No separators of the spec line inside category/event names.
    s.chars()
        .map(|c| {
            if c.is_whitespace() || matches!(c, '.' | '|' | ':' | ',') {
                '_'
            } else {
                c
            }
        })
        .collect()
}

impl TimelineWriter {
    pub fn new(out: &OutTarget, header: &Header, opts: &WriteOptions) -> Result<TimelineWriter> {
        let layout = match opts
            .timeline_version
            .as_deref()
            .map(|s| s.to_ascii_uppercase())
            .as_deref()
        {
            None | Some("A2") => Layout::A2,
            Some("M3") => Layout::M3,
            Some(v) => {
                return Err(Error::Usage(format!(
                    "--timeline-version {v}: polytrace writes A2 or M3"
                )))
            }
        };
        let hx = &header.extras;
        let src_same = header.source == FormatId::Timeline
            && hx.str(keys::LAYOUT) == Some(layout.name())
            && hx.u64(keys::ENTRIES).is_some();
        let src_entries = hx.u64(keys::ENTRIES);
        let preserve = src_same && opts.entries.is_none_or(|e| Some(e) == src_entries);
        let (def_n, def_s) = match layout {
            Layout::A2 => (A_DEFAULT_ENTRIES, A_DEFAULT_STRINGS),
            _ => (M_DEFAULT_ENTRIES, M_DEFAULT_STRINGS),
        };
        // Without --entries the ring starts small and grows with the data
        // (next power of two ≥ the entries, at least 1024, at most the
        // layout's default), so 42 events do not make a 64 MB file.
        let auto = !preserve && opts.entries.is_none();
        let n = if preserve {
            src_entries.unwrap_or(def_n)
        } else {
            opts.entries.unwrap_or(AUTO_MIN_ENTRIES.min(def_n))
        };
        if n == 0 || n > MAX_ENTRIES {
            return Err(Error::Usage(format!(
                "--entries {n}: must be between 1 and {MAX_ENTRIES}"
            )));
        }
        if layout == Layout::A2 && !n.is_power_of_two() {
            return Err(Error::Usage(format!(
                "--entries {n}: the A2 ring size must be a power of two (Snabb wraps with index & (N-1))"
            )));
        }
        let sbytes = if preserve {
            hx.u64(keys::STRINGS_BYTES)
                .unwrap_or(def_s)
                .min(MAX_STRINGS)
        } else {
            def_s
        };
        let n = n as usize;
        let strings_start = HEADER_SIZE + n * ENTRY_SIZE;
        let sink = match out {
            OutTarget::Path(p) => Sink::File(File::create(p).map_err(|e| Error::io(p, e))?),
            OutTarget::Stdout => Sink::Mem(Vec::new()),
        };
        let mut w = TimelineWriter {
            out: out.clone(),
            sink,
            run: Vec::new(),
            run_first: 0,
            layout,
            n,
            strings_start,
            strings: Vec::new(),
            table_cap: sbytes as usize,
            str_used: 0,
            intern: HashMap::new(),
            preserve,
            header_next: None,
            mask: 0xffff,
            magic32: 0,
            minor: 0,
            cursor: 0,
            // Only a file rewritten slot for slot looks slots up.
            used: if preserve { vec![false; n] } else { Vec::new() },
            types: TypeTable {
                small: Vec::new(),
                large: HashMap::new(),
            },
            metrics: HashMap::new(),
            inst_names: HashMap::new(),
            sample_types: HashMap::new(),
            written: 0,
            lost_field_events: 0,
            loss: LossReport::default(),
            raw_is_cycles: hx
                .str(crate::model::keys::RAW_CLOCK)
                .is_some_and(crate::model::keys::is_cycle_counter),
            desc: (!preserve).then(|| Desc {
                source: header.source.name().into(),
                time_base: header.time_base.clone(),
                types: Vec::new(),
                samples: Vec::new(),
                first_time: None,
                clock: source_clock(hx),
            }),
            grow_to: if auto { def_n as usize } else { 0 },
        };
        if preserve {
            if let Some(t) = hx.bytes(keys::STRINGS) {
                let k = t.len().min(sbytes as usize);
                if k < t.len() {
                    w.loss
                        .degrade("string table", "longer than its declared size: truncated");
                }
                let t = t[..k].to_vec();
                w.str_used = k;
                // Existing strings can be found again by content.
                w.index_table(&t);
                w.strings = t;
            }
            w.header_next = hx.u64(keys::NEXT);
            if layout == Layout::A2 {
                w.mask = hx.u64(keys::PRIORITY_MASK).unwrap_or(0xffff);
                w.magic32 = hx.u64(keys::MAGIC32).unwrap_or(0) as u32;
            } else {
                w.minor = hx.u64(keys::MINOR).unwrap_or(0) as u16;
            }
            w.cursor = w.header_next.unwrap_or(0) % n as u64;
        }
        Ok(w)
    }

    fn index_table(&mut self, t: &[u8]) {
        let step = if self.layout == Layout::A2 { 1 } else { 16 };
        let mut off = 0;
        while off < t.len() {
            let end = t[off..]
                .iter()
                .position(|&b| b == 0)
                .map_or(t.len(), |p| off + p);
            if end > off {
                self.intern.entry(t[off..end].to_vec()).or_insert(off);
            }
            off = end + 1;
            if step > 1 {
                off = off.div_ceil(step) * step;
            }
        }
    }

    /// Intern a string; None when the table is full.
    fn intern(&mut self, s: &[u8]) -> Option<usize> {
        if let Some(&o) = self.intern.get(s) {
            return Some(o);
        }
        let align = if self.layout == Layout::A2 { 1 } else { 16 };
        let off = self.str_used.div_ceil(align) * align;
        if off + s.len() + 1 > self.table_cap {
            return None;
        }
        // Alignment padding, then the string and its NUL.
        self.strings.resize(off, 0);
        self.strings.extend_from_slice(s);
        self.strings.push(0);
        self.str_used = off + s.len() + 1;
        self.intern.insert(s.to_vec(), off);
        Some(off)
    }

    /// The NUL-terminated string at `off` in the table (the zeros past
    /// the used part included); None past the table.
    fn table_str(&self, off: usize) -> Option<&[u8]> {
        if off >= self.table_cap {
            return None;
        }
        let s = self.strings.get(off..).unwrap_or(&[]);
        match s.iter().position(|&b| b == 0) {
            Some(end) => Some(&s[..end]),
            // Unterminated in the used part: the zeros after it end it.
            None if self.strings.len() < self.table_cap => Some(s),
            None => None,
        }
    }

    /// The fields written as args: the numeric ones in order, then the
    /// strings (each stored as its string-table offset, so a command line
    /// or a message text survives; the format shows only the numbers, so
    /// Snabb's dump prints what it always printed).
    fn arg_fields(t: &EventType, max: usize) -> (Vec<usize>, usize) {
        let pick = |want: fn(&FieldType) -> bool| {
            t.fields
                .iter()
                .enumerate()
                .filter(move |(_, f)| want(&f.ty))
                .map(|(i, _)| i)
        };
        let args: Vec<usize> = pick(FieldType::is_numeric)
            .chain(pick(|ty| matches!(ty, FieldType::String)))
            .take(max)
            .collect();
        let lost = t.fields.len() - args.len();
        (args, lost)
    }

    fn map_type(&mut self, t: &EventType) -> TypeMap {
        let max = self.layout.max_args();
        let (arg_fields, lost_fields) = Self::arg_fields(t, max);
        let mut tm = TypeMap {
            id: 0,
            offs: (0, 0),
            arg_fields,
            lost_fields,
            drop: None,
            written: None,
        };
        match self.layout {
            Layout::A2 => self.map_type_a(t, &mut tm),
            _ => self.map_type_m(t, &mut tm),
        }
        tm
    }

    fn map_type_a(&mut self, t: &EventType, tm: &mut TypeMap) {
        let fmt: Vec<u8> = match &t.format {
            Some(f) => f.clone().into_bytes(),
            None => {
                let mut f = t.name.clone();
                for i in tm.numeric_args(t) {
                    let w = sanitize_word(&t.fields[i].name);
                    f.push_str(" $");
                    f.push_str(if w.is_empty() { "arg" } else { &w });
                }
                f.into_bytes()
            }
        };
        let ph = placeholders(&fmt);
        let fmt = if ph.len() > 4 {
            // Snabb's dump aborts on a 5th placeholder: make the extra ones
            // literal text (their values are not stored anyway).
            self.loss.degrade(
                "event types",
                "placeholders beyond the 4th made literal (A2 stores 4 args)",
            );
            let mut f = fmt.clone();
            for &(a, _) in ph[4..].iter().rev() {
                f.remove(a);
            }
            f
        } else {
            fmt
        };
        if t.extras.str(keys::SPEC).is_some() {
            self.loss.degrade(
                "event types",
                "mainline spec (level, rate, attributes) has no A2 form: category and event kept",
            );
        }
        let known = |p: &str| PRIORITIES.iter().position(|&n| !n.is_empty() && n == p);
        // A priority that went through M3 comes back from its attribute.
        let from_attr = t.extras.str(keys::ATTRS).and_then(|a| {
            a.split_whitespace()
                .find_map(|kv| kv.strip_prefix("priority="))
                .and_then(known)
        });
        let prio = t
            .priority
            .as_deref()
            .and_then(known)
            .or(from_attr)
            .unwrap_or(DEFAULT_PRIORITY);
        tm.written = Some((String::from_utf8_lossy(&fmt).into_owned(), PRIORITIES[prio]));
        // A type read from this very layout keeps its offsets when the table
        // still holds its strings there.
        if self.preserve {
            if let (Some(c), Some(m)) = (t.extras.u64(keys::CAT_OFF), t.extras.u64(keys::MSG_OFF)) {
                if self.table_str(c as usize) == Some(t.category.as_bytes())
                    && self.table_str(m as usize) == Some(&fmt[..])
                {
                    tm.offs = (c, m);
                    tm.id = (c << 40) | (m << 16) | (1 << prio);
                    return;
                }
            }
        }
        let c = self.intern(t.category.as_bytes());
        let m = self.intern(&fmt);
        match (c, m) {
            (Some(c), Some(m)) if c < 0x10000 && m < 0x10000 => {
                tm.offs = (c as u64, m as u64);
                // Packed as Snabb's dumper decodes it, so the intended
                // category shows (Snabb's own define() lost it, spec 3.4).
                tm.id = ((c as u64) << 40) | ((m as u64) << 16) | (1 << prio);
            }
            (Some(_), Some(_)) => {
                tm.drop = Some("string offset beyond 64 KiB cannot be packed in msg_id")
            }
            _ => tm.drop = Some("string table full"),
        }
    }

    fn map_type_m(&mut self, t: &EventType, tm: &mut TypeMap) {
        let spec: Vec<u8> = match t.extras.str(keys::SPEC) {
            Some(s) => s.as_bytes().to_vec(),
            None => {
                let mut s = format!("5,9|{}.{}", sanitize_name(&t.category), event_word(&t.name));
                // M has no priorities: keep the name as an attribute.
                if let Some(p) = &t.priority {
                    let w = sanitize_word(p);
                    if !w.is_empty() {
                        s.push_str(" priority=");
                        s.push_str(&w);
                    }
                }
                s.push(':');
                for (k, i) in tm.numeric_args(t).enumerate() {
                    let w = sanitize_word(&t.fields[i].name);
                    s.push(' ');
                    if w.is_empty() {
                        s.push_str(&format!("arg{k}"));
                    } else {
                        s.push_str(&w);
                    }
                }
                let mut desc = Vec::new();
                if let Some(f) = &t.format {
                    desc.push(f.clone());
                }
                if let Some(d) = &t.description {
                    desc.push(d.clone());
                }
                for d in desc {
                    s.push('\n');
                    s.push_str(&d);
                }
                s.trim_end().as_bytes().to_vec()
            }
        };
        if t.name == "unknown" && t.category == "?" && t.extras.u64(keys::MSG_ID) == Some(0xffff) {
            tm.id = M_UNKNOWN_MSGID as u64;
            return;
        }
        if self.preserve {
            if let Some(id) = t.extras.u64(keys::MSG_ID) {
                if self.table_str(id as usize * 16) == Some(&spec[..]) {
                    tm.id = id;
                    return;
                }
            }
        }
        match self.intern(&spec) {
            Some(off) if off / 16 < M_UNKNOWN_MSGID as usize => tm.id = (off / 16) as u64,
            _ => {
                // As Snabb does when its table is full.
                self.loss.degrade(
                    "event types",
                    "string table full: events written with msgid 0xFFFF",
                );
                tm.id = M_UNKNOWN_MSGID as u64;
            }
        }
    }

    /// Double the ring (not past `grow_to`): the entries keep their slots,
    /// the string table moves up behind the larger entry area.
    fn grow(&mut self) {
        let n = (self.n * 2).min(self.grow_to);
        // Slots sit at fixed offsets: nothing written moves (the table is
        // written at the end).
        self.strings_start = HEADER_SIZE + n * ENTRY_SIZE;
        self.n = n;
    }

    /// Pick the slot for the next entry.
    fn slot_for(&mut self, want: Option<u64>) -> Option<usize> {
        if self.preserve {
            if let Some(s) = want {
                let s = s as usize;
                if s < self.n && !self.used[s] {
                    return Some(s);
                }
            }
            // Fall back to the next free slot from the cursor.
            for _ in 0..self.n {
                let s = (self.cursor % self.n as u64) as usize;
                self.cursor += 1;
                if !self.used[s] {
                    return Some(s);
                }
            }
            return None;
        }
        if self.cursor == self.n as u64 && self.n < self.grow_to {
            self.grow();
        }
        // Slots are taken in order (the ring grows only when it is full):
        // a slot is taken again once the ring has gone round.
        let again = self.cursor >= self.n as u64;
        let s = self.ring_slot(self.cursor);
        self.cursor += 1;
        if again {
            self.loss.drop_item(
                "events",
                "overwritten: the ring keeps only the newest entries",
            );
        }
        Some(s)
    }

    /// The slot of the `k`th entry: a mask for the usual power-of-two
    /// ring (a division per entry shows).
    #[inline]
    fn ring_slot(&self, k: u64) -> usize {
        let n = self.n as u64;
        (if n.is_power_of_two() {
            k & (n - 1)
        } else {
            k % n
        }) as usize
    }

    /// An A2 arg: integers as they are (the usual case inline, tested
    /// first, not by a jump over every kind of value), the rest out of line.
    #[inline]
    fn arg_u64(&mut self, v: &Value) -> u64 {
        if let Value::U64(x) = *v {
            return x;
        }
        match *v {
            Value::I64(x) | Value::Enum(x) if x >= 0 => x as u64,
            _ => self.arg_u64_rest(v),
        }
    }

    #[inline(never)]
    fn arg_u64_rest(&mut self, v: &Value) -> u64 {
        match *v {
            Value::U64(x) => x,
            Value::I64(x) | Value::Enum(x) => {
                if x < 0 {
                    self.loss
                        .degrade("event args", "negative value stored as two's complement");
                }
                x as u64
            }
            Value::F32(_) | Value::F64(_) => {
                let f = v.as_f64().unwrap_or(0.0);
                if f.fract() != 0.0 || !f.is_finite() || (f == 0.0 && f.is_sign_negative()) {
                    self.loss
                        .degrade("event args", "fraction truncated to an integer");
                } else if !(-(I64_RANGE)..I64_RANGE).contains(&f) {
                    self.loss
                        .degrade("event args", "beyond the 64-bit integer range: saturated");
                }
                if f < 0.0 {
                    self.loss
                        .degrade("event args", "negative value stored as two's complement");
                }
                // Signed, so a reader that knows the type gets negatives back.
                (f as i64) as u64
            }
            Value::Str(ref t) => self.string_arg(t),
            _ => 0,
        }
    }

    /// A string arg: its offset in the string table (each text stored
    /// once); `NO_STRING` when the table is full.
    fn string_arg(&mut self, t: &str) -> u64 {
        match self.intern(t.as_bytes()) {
            Some(off) => off as u64,
            None => {
                self.loss
                    .degrade("event args", "string table full: string args left empty");
                NO_STRING
            }
        }
    }

    fn arg_f64(&mut self, v: &Value) -> f64 {
        if let Value::Str(t) = v {
            // Offsets are far below 2^53: exact as a double.
            return self.string_arg(t) as f64;
        }
        let f = v.as_f64().unwrap_or(0.0);
        let exact = match *v {
            Value::U64(x) => f as u64 == x && f < 18446744073709551616.0,
            Value::I64(x) | Value::Enum(x) => f as i64 == x && f < 9223372036854775808.0,
            _ => true,
        };
        if !exact {
            self.loss
                .degrade("event args", "integer beyond 2^53 rounded to a double (M3)");
        }
        f
    }

    /// Write the run of consecutive entries gathered so far.
    fn flush_run(&mut self) -> Result<()> {
        if self.run.is_empty() {
            return Ok(());
        }
        let off = (HEADER_SIZE + self.run_first * ENTRY_SIZE) as u64;
        let r = self.sink.write_at(off, &self.run);
        self.run.clear();
        r.map_err(|e| self.io_err(e))
    }

    fn io_err(&self, e: std::io::Error) -> Error {
        match &self.out {
            OutTarget::Path(p) => Error::io(p, e),
            OutTarget::Stdout => Error::io("<stdout>", e),
        }
    }

    /// Queue an entry for its slot: a slot that does not continue the
    /// current run (the ring wrapped, a preserved slot) starts a new one.
    fn push_entry(&mut self, slot: usize, e: &[u64; ENTRY_SIZE / 8]) -> Result<()> {
        let next = self.run_first + self.run.len() / ENTRY_SIZE;
        if !self.run.is_empty() && (slot != next || self.run.len() >= RUN_ENTRIES * ENTRY_SIZE) {
            self.flush_run()?;
        }
        if self.run.is_empty() {
            self.run_first = slot;
            self.run.reserve(RUN_ENTRIES * ENTRY_SIZE);
        }
        // Word by word into the run (an entry built on the stack and
        // copied whole would be read back before its stores settle).
        let at = self.run.len();
        self.run.resize(at + ENTRY_SIZE, 0);
        for (d, w) in self.run[at..].chunks_exact_mut(8).zip(e) {
            d.copy_from_slice(&w.to_le_bytes());
        }
        Ok(())
    }

    fn put_entry(
        &mut self,
        tm: Msg,
        values: &[&Value],
        ev_extras: &crate::model::Extras,
        raw_clock: Option<u64>,
        time_ns: i64,
        cpu: Option<u32>,
    ) -> Result<()> {
        if let Some(why) = tm.drop {
            self.loss.drop_item("events", why);
            return Ok(());
        }
        // Counted here, reported at `finish` (a loss line per event is a
        // search of the report's keys).
        self.lost_field_events += (tm.lost_fields > 0) as u64;
        // Most events carry no extras (only a timeline source has them):
        // no key is looked up then.
        let none = ev_extras.is_empty();
        let xu = |k: &str| if none { None } else { ev_extras.u64(k) };
        let Some(slot) = self.slot_for(xu(keys::SLOT)) else {
            self.loss.drop_item("events", "no free ring slot");
            return Ok(());
        };
        if self.preserve {
            self.used[slot] = true;
        }
        let raw_args: Option<&[ExtraValue]> = match self.preserve && !none {
            true => match ev_extras.get(keys::ARGS) {
                Some(ExtraValue::List(l)) => Some(l),
                _ => None,
            },
            false => None,
        };
        let max = self.layout.max_args();
        let raw_clock = raw_clock.filter(|_| self.raw_is_cycles);
        // Both layouts are eight little-endian 64-bit words.
        let mut e = [0u64; ENTRY_SIZE / 8];
        match self.layout {
            Layout::A2 => {
                let mut tsc = raw_clock.unwrap_or(time_ns.max(0) as u64);
                if tsc == 0 {
                    // tsc 0 marks an unwritten slot.
                    self.loss
                        .degrade("events", "zero timestamp stored as 1 cycle");
                    tsc = 1;
                }
                let mut msg_id = tm.id;
                if let Some(raw) = xu(keys::MSG_ID) {
                    if self.preserve && ((raw >> 40) & 0xffff, (raw >> 16) & 0xffff) == tm.offs {
                        msg_id = raw;
                    }
                }
                let aux = xu(keys::AUX).map(|a| a as u32).unwrap_or_else(|| {
                    match (xu(keys::CORE), xu(keys::NUMA)) {
                        (Some(c), n) => (c as u32 & 0xfff) | ((n.unwrap_or(0) as u32 & 0xf) << 12),
                        _ => cpu.unwrap_or(0) & 0xfff,
                    }
                });
                let res = xu(keys::RESERVED).unwrap_or(0) as u32;
                e[0] = tsc;
                e[1] = xu(keys::IP).unwrap_or(0);
                e[2] = aux as u64 | (res as u64) << 32;
                e[3] = msg_id;
                for (k, w) in e[4..4 + max].iter_mut().enumerate() {
                    let v = match &raw_args {
                        Some(l) => match l.get(k) {
                            Some(ExtraValue::U64(x)) => *x,
                            _ => 0,
                        },
                        None => match values.get(k) {
                            Some(v) => self.arg_u64(v),
                            None => 0,
                        },
                    };
                    *w = v;
                }
            }
            _ => {
                let tsc_bits = match xu(keys::TSC_BITS) {
                    Some(b) if self.preserve => b,
                    _ => {
                        let c = raw_clock.unwrap_or(time_ns.max(0) as u64);
                        let t = c as f64;
                        if t as u64 != c {
                            self.loss
                                .degrade("events", "tsc beyond 2^53 rounded to a double (M3)");
                        }
                        if t == 0.0 {
                            self.loss
                                .degrade("events", "zero timestamp stored as 1 cycle");
                            1.0f64.to_bits()
                        } else {
                            t.to_bits()
                        }
                    }
                };
                if xu(keys::IP).is_some_and(|ip| ip != 0) {
                    self.loss
                        .degrade("events", "A2 ip (logger return address) has no M3 field");
                }
                let cn = xu(keys::CORE_NUMA).map(|v| v as u16).unwrap_or_else(|| {
                    match (xu(keys::CORE), xu(keys::NUMA)) {
                        (Some(c), n) => (c as u16 & 0xff) | ((n.unwrap_or(0) as u16 & 0xf) << 12),
                        _ => (cpu.unwrap_or(0) & 0xff) as u16,
                    }
                });
                let res = xu(keys::RESERVED).unwrap_or(0) as u32;
                e[0] = tsc_bits;
                e[1] = tm.id as u16 as u64 | (cn as u64) << 16 | (res as u64) << 32;
                for (k, w) in e[2..2 + max].iter_mut().enumerate() {
                    let v: f64 = match &raw_args {
                        Some(l) => match l.get(k) {
                            Some(ExtraValue::F64(x)) => *x,
                            Some(ExtraValue::U64(x)) => *x as f64,
                            _ => 0.0,
                        },
                        None => match values.get(k) {
                            Some(v) => self.arg_f64(v),
                            None => 0.0,
                        },
                    };
                    *w = v.to_bits();
                }
            }
        }
        self.push_entry(slot, &e)?;
        self.written += 1;
        Ok(())
    }

    #[inline]
    fn write_event(&mut self, ev: &Event) -> Result<()> {
        let Some(tm) = self.types.get(ev.type_id) else {
            self.loss.drop_item("events", "event type never defined");
            return Ok(());
        };
        // At most max_args() (≤ 6) args: gathered on the stack.
        const NO_VALUE: Value = Value::U64(0);
        let mut vals = [&NO_VALUE; 6];
        let mut k = 0;
        for v in tm.arg_fields.iter().filter_map(|&i| ev.fields.get(i)) {
            if k == vals.len() {
                break;
            }
            vals[k] = v;
            k += 1;
        }
        let msg = tm.msg();
        self.put_entry(msg, &vals[..k], &ev.extras, ev.raw_clock, ev.time.0, ev.cpu)
    }

    /// Samples: one message per (metric, instance) with `$value` (model §3).
    fn write_sample(&mut self, s: &Sample) -> Result<()> {
        if let Some(d) = &mut self.desc {
            d.first_time.get_or_insert(s.time.0);
        }
        for mv in &s.metrics {
            let Ok(vals) = &mv.values else {
                self.loss
                    .drop_item("sample values", "PCP error code has no timeline form");
                continue;
            };
            for (inst, v) in vals {
                if v.as_f64().is_none() {
                    self.loss.drop_item("sample values", "not numeric");
                    continue;
                }
                let key = (mv.metric, *inst);
                let tm = match self.sample_types.get(&key) {
                    Some(t) => *t,
                    None => {
                        let desc = self.metrics.get(&mv.metric);
                        let mname = desc.map_or_else(
                            || format!("metric{}", mv.metric),
                            |d| d.name().to_string(),
                        );
                        let iname = desc
                            .and_then(|d| d.indom)
                            .and_then(|ix| self.inst_names.get(&(ix, *inst)).cloned())
                            .or_else(|| (*inst >= 0).then(|| inst.to_string()));
                        let label = match &iname {
                            Some(i) => format!("{mname}[{i}]"),
                            None => mname.clone(),
                        };
                        let ty = crate::model::FieldType::Float(8);
                        let mut t = EventType::new(
                            0,
                            "metric",
                            &label,
                            vec![crate::model::Field::new("value", ty)],
                        );
                        t.format = Some(format!("{label} $value"));
                        t.priority = Some("app".into());
                        let tm = self.map_type(&t);
                        if let (Some(d), None) = (&mut self.desc, tm.drop) {
                            d.samples.push((tm.id, mv.metric, *inst));
                        }
                        self.sample_types.insert(key, tm.msg());
                        tm.msg()
                    }
                };
                self.put_entry(
                    tm,
                    &[v],
                    &crate::model::Extras::default(),
                    s.raw_clock,
                    s.time.0,
                    None,
                )?;
            }
        }
        Ok(())
    }

    /// Append the self-description to the string table: one string
    /// `polytrace:{json}` no entry refers to (Snabb's dump never shows it).
    /// It names the source's event types (name, category, format, priority,
    /// field names and types of the args), the metric and instance of each
    /// sample message with the metric descriptors and instance names, and
    /// what the tsc field holds; `reader` restores them.
    fn describe(&mut self) {
        let Some(d) = self.desc.take() else { return };
        if d.types.is_empty() && d.samples.is_empty() {
            return;
        }
        use crate::model::codec;
        use serde_json::{json, Value as J};
        let mut used: Vec<MetricId> = d.samples.iter().map(|s| s.1).collect();
        used.sort_unstable();
        used.dedup();
        let metrics: Vec<J> = used
            .iter()
            .filter_map(|m| self.metrics.get(m))
            .map(codec::metric_to_json)
            .collect();
        let mut indoms: HashMap<IndomId, Vec<crate::model::Instance>> = HashMap::new();
        for (_, m, inst) in &d.samples {
            let Some(ix) = self.metrics.get(m).and_then(|d| d.indom) else {
                continue;
            };
            let name = self.inst_names.get(&(ix, *inst)).cloned();
            let v = indoms.entry(ix).or_default();
            if !v.iter().any(|i| i.id == *inst) {
                v.push(crate::model::Instance {
                    id: *inst,
                    name: name.unwrap_or_else(|| inst.to_string()),
                });
            }
        }
        let mut indoms: Vec<(IndomId, Vec<crate::model::Instance>)> = indoms.into_iter().collect();
        indoms.sort_by_key(|x| x.0);
        let t0 = crate::model::Timestamp(d.first_time.unwrap_or(0));
        let mut j = json!({
            "source": d.source,
            "tb": codec::time_base_to_json(&d.time_base),
            "tsc": if self.raw_is_cycles { "raw" } else { "time" },
            "types": d.types.iter().map(|(id, t)| json!([id, codec::event_type_to_json(t)])).collect::<Vec<_>>(),
            "samples": d.samples.iter().map(|(id, m, i)| json!([id, m, i])).collect::<Vec<_>>(),
            "metrics": metrics,
            "indoms": indoms.into_iter().map(|(id, inst)| codec::indom_to_json(&crate::model::IndomUpdate {
                time: t0,
                id,
                kind: crate::model::IndomKind::Full,
                instances: inst,
                removed: vec![],
                extras: Default::default(),
            }, true)).collect::<Vec<_>>(),
        });
        if let (Some((hz, anchor)), true) = (d.clock, self.raw_is_cycles) {
            j["tsc_hz"] = json!(hz);
            if let Some(a) = anchor {
                j["tsc_anchor"] = json!(a);
            }
        }
        let text = format!("{}{j}", super::reader::DESC_MAGIC);
        // Its own string, never shared with one an entry refers to.
        self.intern.remove(text.as_bytes());
        if self.intern(text.as_bytes()).is_none() {
            self.loss.drop_item(
                "self-description",
                "string table full: types and samples read back as plain timeline messages",
            );
        }
    }

    fn header_bytes(&self) -> [u8; HEADER_SIZE] {
        let n = self.n as u64;
        let mut h = [0u8; HEADER_SIZE];
        match self.layout {
            Layout::A2 => {
                let next = self.header_next.unwrap_or(self.cursor % n);
                h[0..4].copy_from_slice(&self.magic32.to_le_bytes());
                h[8..16].copy_from_slice(&self.mask.to_le_bytes());
                h[16..24].copy_from_slice(&next.to_le_bytes());
                h[24..32].copy_from_slice(&(n - 1).to_le_bytes());
            }
            _ => {
                let log = (n * ENTRY_SIZE as u64) as u32;
                let sb = self.table_cap as u32;
                h[0..8].copy_from_slice(&M_MAGIC.to_le_bytes());
                h[8..10].copy_from_slice(&3u16.to_le_bytes());
                h[10..12].copy_from_slice(&self.minor.to_le_bytes());
                h[12..16].copy_from_slice(&log.to_le_bytes());
                h[16..20].copy_from_slice(&sb.to_le_bytes());
            }
        }
        h
    }

    /// The last entries, the header, the used part of the string table,
    /// and the file's full length (unwritten slots and the table's unused
    /// tail read as zeros).
    fn write_rest(&mut self) -> Result<()> {
        self.flush_run()?;
        let h = self.header_bytes();
        let strings = std::mem::take(&mut self.strings);
        let len = (self.strings_start + self.table_cap) as u64;
        let r = self
            .sink
            .write_at(0, &h)
            .and_then(|_| self.sink.write_at(self.strings_start as u64, &strings));
        r.map_err(|e| self.io_err(e))?;
        match &mut self.sink {
            Sink::File(f) => f.set_len(len).map_err(|e| self.io_err(e)),
            Sink::Mem(v) => {
                v.resize(len as usize, 0);
                let mut so = std::io::stdout().lock();
                so.write_all(v)
                    .and_then(|_| so.flush())
                    .map_err(|e| Error::io("<stdout>", e))
            }
        }
    }
}

impl TraceWriter for TimelineWriter {
    fn write_item(&mut self, item: &Item) -> Result<()> {
        match item {
            Item::EventType(t) => {
                let tm = self.map_type(t);
                if let (Some(d), None) = (&mut self.desc, tm.drop) {
                    // A re-issued type replaces its earlier description.
                    d.types.retain(|(id, x)| !(x.id == t.id && *id == tm.id));
                    if d.types.iter().any(|(id, _)| *id == tm.id) {
                        // One message: a reader sees the first type only.
                        self.loss.degrade(
                            "event types",
                            "same category, format and priority as another type: read back as that one",
                        );
                    }
                    let mut r = (**t).clone();
                    r.fields = tm.arg_fields.iter().map(|&i| t.fields[i].clone()).collect();
                    // What the message was logged with, where the type had none.
                    if let Some((f, p)) = &tm.written {
                        r.format.get_or_insert_with(|| f.clone());
                        r.priority.get_or_insert_with(|| p.to_string());
                    }
                    d.types.push((tm.id, r));
                }
                self.types.insert(t.id, tm);
                self.loss.wrote("event types", 1);
            }
            Item::Event(e) => self.write_event(e)?,
            Item::EventRun(r) => r.each_item(|it| self.write_item(it))?,
            Item::Metric(m) => {
                self.metrics.insert(m.id, (**m).clone());
            }
            Item::Indom(ix) => {
                for i in &ix.instances {
                    self.inst_names.insert((ix.id, i.id), i.name.clone());
                }
            }
            Item::Sample(s) => self.write_sample(s)?,
            Item::Help(_) | Item::Labels(_) | Item::Mark(_) | Item::Annotation(_) => {
                note_dropped(&mut self.loss, super::WRITES, item)
            }
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<LossReport> {
        self.describe();
        let written = self.written;
        self.write_rest()?;
        let mut loss = std::mem::take(&mut self.loss);
        if self.lost_field_events > 0 {
            *loss
                .degraded
                .entry((
                    "events".into(),
                    "fields beyond the timeline's arg count, or neither numbers nor text, dropped"
                        .into(),
                ))
                .or_default() += self.lost_field_events;
        }
        loss.wrote("events", written);
        Ok(loss)
    }
}
