//! Items in a compact byte form, for handing them from the thread that reads
//! to the thread that writes.
//!
//! An item keeps its data in several small heap blocks (fields, extras,
//! text). Handed over as it is, every block is filled on one CPU, read on
//! the other and then reused on the first, so each crosses between the two
//! caches twice, in no order a prefetcher can follow. How much that costs
//! depends on where the host puts the two CPUs: the same 100 MB DLT → PCP
//! conversion took 0.43 s in one run and 1.2 s in the next (docs/model.md,
//! "Two threads"). Bytes written in order and read in order cross once, and
//! each thread keeps reusing items that stay in its own cache.
//!
//! The hot items have a byte form: events, samples, instance-domain updates
//! and annotations whose values are numbers or text. Every other item
//! (definitions, marks, nested values) travels whole beside the bytes, at
//! its place in the stream. The form lives only inside one process: native
//! byte order, no version.

use super::*;
use crate::error::{Error, Result};
use std::collections::HashMap;

// Item tags.
const EVENT: u8 = 0;
const SAMPLE: u8 = 1;
const INDOM: u8 = 2;
const NOTE: u8 = 3;
const WHOLE: u8 = 4;
const RUN: u8 = 5;

/// On an item tag: a record that stands alone (see [`WireEncoder::push_lone`]).
const LONE: u8 = 0x80;

/// Bytes of an event's fixed part.
const EVENT_HEAD: usize = 30;

// Value tags: those of a run's cells (`model::cells`), whose bytes go as
// they are; Value and ExtraValue share the scalar and text ones, and
// extras add booleans.
use super::cells::{BYTES, ENUM, F32, F64, I64, STR, U64};
const BOOL: u8 = 7;

/// Extras keys one hand-off can number; past that, items travel whole.
const MAX_KEYS: usize = u16::MAX as usize;

/// Items on their way from the reading thread to the writing thread.
#[derive(Debug, Default)]
pub struct WireBatch {
    bytes: Vec<u8>,
    /// Items without a byte form, in stream order.
    whole: Vec<Item>,
    /// Extras keys first numbered in this batch, in number order.
    keys: Vec<ExtraKey>,
    items: usize,
}

impl WireBatch {
    /// Items in the batch.
    pub fn len(&self) -> usize {
        self.items
    }
    pub fn is_empty(&self) -> bool {
        self.items == 0
    }
    /// Bytes the batch holds (items sent whole not counted).
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }
    /// Give back memory beyond `bytes` that one huge item left behind, so
    /// that a reused batch stays about its usual size.
    pub fn shrink_to(&mut self, bytes: usize) {
        if self.bytes.capacity() > bytes {
            self.bytes.shrink_to(bytes);
        }
    }
    /// The items sent whole, for the reader to reuse once the writer is
    /// done with them; the rest of a written batch is empty already.
    pub fn whole_mut(&mut self) -> &mut Vec<Item> {
        &mut self.whole
    }
}

/// The item has no byte form: it travels whole.
struct Whole;
type Enc = std::result::Result<(), Whole>;

/// The reading side: puts items into batches.
#[derive(Debug, Default)]
pub struct WireEncoder {
    /// Every key numbered so far (the decoder learns them batch by batch).
    keys: Vec<ExtraKey>,
    by_name: HashMap<String, u16>,
    /// The key number last used at each extras position: items of one
    /// source carry the same keys, so this is nearly always right.
    recent: Vec<u16>,
    /// The extras of the last item of each kind: the items of one message
    /// (a KPI dataset list, a DLT message) share them, and then only a mark
    /// travels (the decoder's item still has them).
    last_extras: [Extras; 6],
    /// Instead of `last_extras`, when that item's extras were stamped: its
    /// stamp (an item with the same stamp has the same extras; no copy of
    /// them is kept for the first event of each KPI message).
    last_stamp: [Option<u64>; 6],
    /// The item being put stands alone (`push_lone`).
    lone: u8,
}

/// In place of an extras count: the same extras as the previous item of
/// this kind.
const SAME_EXTRAS: u16 = u16::MAX;

fn put_u32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_ne_bytes());
}
fn put_u64(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_ne_bytes());
}
fn put_len(b: &mut Vec<u8>, n: usize) -> Enc {
    put_u32(b, u32::try_from(n).map_err(|_| Whole)?);
    Ok(())
}
fn put_bytes(b: &mut Vec<u8>, s: &[u8]) -> Enc {
    put_len(b, s.len())?;
    b.extend_from_slice(s);
    Ok(())
}
fn put_opt_u64(b: &mut Vec<u8>, v: Option<u64>) {
    match v {
        Some(v) => {
            b.push(1);
            put_u64(b, v);
        }
        None => b.push(0),
    }
}

/// A number: its tag and eight bytes, in one copy.
#[inline]
fn put_cell(b: &mut Vec<u8>, tag: u8, x: u64) {
    let mut a = [0u8; 9];
    a[0] = tag;
    a[1..].copy_from_slice(&x.to_ne_bytes());
    b.extend_from_slice(&a);
}

/// Text or bytes: tag, length, the bytes.
#[inline]
fn put_text(b: &mut Vec<u8>, tag: u8, s: &[u8]) -> Enc {
    let n = u32::try_from(s.len()).map_err(|_| Whole)?;
    let mut a = [0u8; 5];
    a[0] = tag;
    a[1..].copy_from_slice(&n.to_ne_bytes());
    b.extend_from_slice(&a);
    b.extend_from_slice(s);
    Ok(())
}

fn put_value(b: &mut Vec<u8>, v: &Value) -> Enc {
    match v {
        Value::I64(x) => put_cell(b, I64, *x as u64),
        Value::U64(x) => put_cell(b, U64, *x),
        Value::F32(x) => put_cell(b, F32, x.to_bits() as u64),
        Value::F64(x) => put_cell(b, F64, x.to_bits()),
        Value::Enum(x) => put_cell(b, ENUM, *x as u64),
        Value::Str(s) => put_text(b, STR, s.as_bytes())?,
        Value::Bytes(x) => put_text(b, BYTES, x)?,
        Value::List(_) | Value::Struct(_) | Value::Union(_) | Value::Events(_) => {
            return Err(Whole)
        }
    }
    Ok(())
}

fn put_extra(b: &mut Vec<u8>, v: &ExtraValue) -> Enc {
    match v {
        ExtraValue::U64(x) => put_cell(b, U64, *x),
        ExtraValue::I64(x) => put_cell(b, I64, *x as u64),
        ExtraValue::F64(x) => put_cell(b, F64, x.to_bits()),
        ExtraValue::Bool(x) => put_cell(b, BOOL, *x as u64),
        ExtraValue::Str(s) => put_text(b, STR, s.as_bytes())?,
        ExtraValue::Bytes(x) => put_text(b, BYTES, x)?,
        ExtraValue::List(_) => return Err(Whole),
    }
    Ok(())
}

/// Values a sample may have and still travel as bytes.
const NARROW_VALUES: usize = 256;

fn narrow(s: &Sample) -> bool {
    let mut n = 0;
    for m in &s.metrics {
        n += m.values.as_ref().map_or(1, Vec::len);
        if n > NARROW_VALUES {
            return false;
        }
    }
    true
}

impl WireEncoder {
    pub fn new() -> WireEncoder {
        WireEncoder::default()
    }

    /// Append `item` to `batch`. An item without a byte form moves into
    /// the batch, an empty event left in its place; the caller gives the
    /// items back to their reader either way (their buffers are reused).
    pub fn push(&mut self, item: &mut Item, batch: &mut WireBatch) {
        self.lone = 0;
        self.put(item, batch);
    }

    /// [`Self::push`] of an item that may reach the writer at another place
    /// among the items of its kind than it was put at (a time-ordering
    /// window lets it overtake them, or them it): its extras are sent whole
    /// and are not the ones a later item's same-extras mark refers to, and
    /// the decoder gives it in an item of its own, so the items put with
    /// `push` decode as if it were not there.
    pub fn push_lone(&mut self, item: &mut Item, batch: &mut WireBatch) {
        self.lone = LONE;
        self.put(item, batch);
        self.lone = 0;
    }

    fn put(&mut self, item: &mut Item, batch: &mut WireBatch) {
        let start = batch.bytes.len();
        batch.items += 1;
        let done = match &*item {
            Item::Event(e) => self.event(e, None, batch),
            Item::EventRun(r) => self.event(&r.event, Some((r.width, &r.cells)), batch),
            // A wide sample's values lie in a few long lists that the
            // writer reads in order: it costs less whole than decoded.
            Item::Sample(s) if narrow(s) => self.sample(s, batch),
            Item::Indom(u) => self.indom(u, batch),
            Item::Annotation(a) => self.note(a, batch),
            _ => Err(Whole),
        };
        if let Err(Whole) = done {
            // Keys numbered on the way stay numbered: the batch sends them.
            batch.bytes.truncate(start);
            batch.bytes.push(WHOLE);
            let item = std::mem::replace(item, Item::Event(Event::default()));
            batch.whole.push(item);
        }
    }

    fn key(
        &mut self,
        pos: usize,
        key: &ExtraKey,
        batch: &mut WireBatch,
    ) -> std::result::Result<u16, Whole> {
        let name: &str = key;
        if let Some(&n) = self.recent.get(pos) {
            if self.keys.get(n as usize).is_some_and(|k| key_eq(k, name)) {
                return Ok(n);
            }
        }
        let n = match self.by_name.get(name) {
            Some(&n) => n,
            None => {
                if self.keys.len() >= MAX_KEYS {
                    return Err(Whole);
                }
                let n = self.keys.len() as u16;
                self.keys.push(key.clone());
                batch.keys.push(key.clone());
                self.by_name.insert(name.to_string(), n);
                n
            }
        };
        if self.recent.len() <= pos {
            self.recent.resize(pos + 1, u16::MAX);
        }
        self.recent[pos] = n;
        Ok(n)
    }

    /// The extras of an item of kind `tag`, last in its byte form (nothing
    /// after them can fail, so `last_extras` stays true to the decoder).
    fn extras(&mut self, tag: u8, x: &Extras, batch: &mut WireBatch) -> Enc {
        let entries = x.entries();
        let n = u16::try_from(entries.len())
            .ok()
            .filter(|n| *n != SAME_EXTRAS)
            .ok_or(Whole)?;
        let t = tag as usize;
        let same = self.lone == 0
            && match self.last_stamp[t] {
                Some(s) => x.stamp() == s,
                None => x.same_bits(&self.last_extras[t]),
            };
        if same {
            batch.bytes.extend_from_slice(&SAME_EXTRAS.to_ne_bytes());
            return Ok(());
        }
        batch.bytes.extend_from_slice(&n.to_ne_bytes());
        for (pos, (k, v)) in entries.iter().enumerate() {
            let id = self.key(pos, k, batch)?;
            batch.bytes.extend_from_slice(&id.to_ne_bytes());
            put_extra(&mut batch.bytes, v)?;
        }
        if self.lone != 0 {
            return Ok(());
        }
        match x.stamp() {
            0 => {
                self.last_extras[t].copy_from(x);
                self.last_stamp[t] = None;
            }
            s => self.last_stamp[t] = Some(s),
        }
        Ok(())
    }

    /// An event, or a run of events (`e` the run's, with the width and
    /// the values of the run: their bytes go as they are).
    fn event(&mut self, e: &Event, run: Option<(u32, &Cells)>, batch: &mut WireBatch) -> Enc {
        let b = &mut batch.bytes;
        let tag = if run.is_some() { RUN } else { EVENT };
        // The fixed part in one copy: tag, which options are present,
        // time, raw clock, type, cpu, field count.
        let mut h = [0u8; EVENT_HEAD];
        h[0] = tag | self.lone;
        h[1] = e.raw_clock.is_some() as u8
            | (e.cpu.is_some() as u8) << 1
            | (e.stream.is_some() as u8) << 2;
        h[2..10].copy_from_slice(&e.time.0.to_ne_bytes());
        h[10..18].copy_from_slice(&e.raw_clock.unwrap_or(0).to_ne_bytes());
        h[18..22].copy_from_slice(&e.type_id.to_ne_bytes());
        h[22..26].copy_from_slice(&e.cpu.unwrap_or(0).to_ne_bytes());
        let n = run.map_or(e.fields.len(), |(_, c)| c.len());
        let n = u32::try_from(n).map_err(|_| Whole)?;
        h[26..30].copy_from_slice(&n.to_ne_bytes());
        b.extend_from_slice(&h);
        if let Some(s) = &e.stream {
            put_text(b, STR, s.as_bytes())?;
        }
        match run {
            Some((w, cells)) => {
                put_u32(b, w);
                put_bytes(b, cells.bytes())?;
            }
            None => {
                for v in &e.fields {
                    put_value(b, v)?;
                }
            }
        }
        self.extras(tag, &e.extras, batch)
    }

    fn sample(&mut self, s: &Sample, batch: &mut WireBatch) -> Enc {
        let b = &mut batch.bytes;
        b.push(SAMPLE | self.lone);
        put_u64(b, s.time.0 as u64);
        put_opt_u64(b, s.raw_clock);
        put_len(b, s.metrics.len())?;
        for m in &s.metrics {
            put_u32(b, m.metric);
            match &m.values {
                Ok(vs) => {
                    b.push(0);
                    put_len(b, vs.len())?;
                    for (inst, v) in vs {
                        put_u32(b, *inst as u32);
                        put_value(b, v)?;
                    }
                }
                Err(code) => {
                    b.push(1);
                    put_u32(b, *code as u32);
                }
            }
        }
        self.extras(SAMPLE, &s.extras, batch)
    }

    fn indom(&mut self, u: &IndomUpdate, batch: &mut WireBatch) -> Enc {
        let b = &mut batch.bytes;
        b.push(INDOM | self.lone);
        put_u64(b, u.time.0 as u64);
        put_u32(b, u.id);
        b.push(matches!(u.kind, IndomKind::Delta) as u8);
        put_len(b, u.instances.len())?;
        for i in &u.instances {
            put_u32(b, i.id as u32);
            put_bytes(b, i.name.as_bytes())?;
        }
        put_len(b, u.removed.len())?;
        for r in &u.removed {
            put_u32(b, *r as u32);
        }
        self.extras(INDOM, &u.extras, batch)
    }

    fn note(&mut self, a: &Annotation, batch: &mut WireBatch) -> Enc {
        let b = &mut batch.bytes;
        b.push(NOTE | self.lone);
        put_u64(b, a.time.0 as u64);
        put_opt_u64(b, a.raw_clock);
        put_bytes(b, a.text.as_bytes())?;
        self.extras(NOTE, &a.extras, batch)
    }
}

/// Records waiting to be put in time order on their way to the writer:
/// the order of `stages::Reorder` (see there), for items that are encoded
/// as they come. Held as records (some 70 bytes each) rather than as items
/// (120 bytes and a few heap blocks each), the items go back to their
/// reader at once, while they are still in this CPU's cache: x167.dlt ->
/// PCP spent 0.09 s of its 0.74 s of CPU on its items waiting in `Reorder`.
///
/// Records that come in order (not older than the last one that waits in
/// order) wait in a queue and are encoded with [`WireEncoder::push`]: they
/// leave in the order they were put, so a same-extras mark still refers to
/// the record of its kind before it. Any other record (it leaves at once,
/// ahead of records put before it, or waits apart to be merged in) is
/// encoded with [`WireEncoder::push_lone`].
#[derive(Debug)]
pub struct Ordered {
    window: i64,
    cap: usize,
    newest: Option<Timestamp>,
    seq: u64,
    /// The records that came in order, their bytes from `head` on.
    queue: WireBatch,
    head: usize,
    /// Time, arrival, end in `queue.bytes` and events (a run's count) of
    /// each.
    queue_keys: std::collections::VecDeque<(Timestamp, u64, usize, usize)>,
    /// The items of those that travel whole, by arrival.
    queue_whole: std::collections::VecDeque<(u64, Item)>,
    /// The first `ready` of `queue_keys` have left but are not in the
    /// output yet: they go in one copy ([`Self::settle`]).
    ready: usize,
    /// The others, by time and arrival: their bytes and whole item in
    /// `late` (freed slots in `free`).
    heap: std::collections::BinaryHeap<std::cmp::Reverse<(Timestamp, u64, usize, usize)>>,
    late: Vec<(Vec<u8>, Option<Item>)>,
    free: Vec<usize>,
    scratch: WireBatch,
    /// Events waiting (a run counts its events): what the cap bounds.
    events: usize,
}

impl Ordered {
    /// Records leave once the newest time seen is `window` past theirs,
    /// or when more than `cap` wait.
    pub fn new(window: i64, cap: usize) -> Ordered {
        Ordered {
            window,
            cap: cap.max(1),
            newest: None,
            seq: 0,
            queue: WireBatch::default(),
            head: 0,
            queue_keys: Default::default(),
            queue_whole: Default::default(),
            ready: 0,
            heap: Default::default(),
            late: Vec::new(),
            free: Vec::new(),
            scratch: WireBatch::default(),
            events: 0,
        }
    }

    /// Records waiting.
    pub fn waiting(&self) -> usize {
        self.queue_keys.len() - self.ready + self.heap.len()
    }

    fn settled(&self, t: Timestamp) -> bool {
        self.newest
            .is_some_and(|n| n.0.saturating_sub(t.0) >= self.window)
    }

    /// Take `item` in, encoded with `enc`: it waits, or it goes into `out`
    /// at once; then what became ready leaves into `out`. The item is left
    /// for its reader to reuse, as after [`WireEncoder::push`].
    pub fn accept(&mut self, enc: &mut WireEncoder, item: &mut Item, out: &mut WireBatch) {
        let Some(t) = item.time() else {
            // Definitions without a time pass at once.
            self.settle(out);
            enc.push_lone(item, out);
            return;
        };
        if self.newest.is_none_or(|n| t > n) {
            self.newest = Some(t);
        }
        self.seq += 1;
        let w = events_in(item);
        let first = self.queue_keys.get(self.ready).is_none_or(|r| t < r.0)
            && self.heap.peek().is_none_or(|h| t < h.0 .0);
        if self.settled(t) && first {
            // It would leave first anyway.
            self.settle(out);
            enc.push_lone(item, out);
        } else if self.queue_keys.back().is_none_or(|b| b.0 <= t) {
            enc.push(item, &mut self.queue);
            if !self.queue.keys.is_empty() {
                out.keys.append(&mut self.queue.keys);
            }
            // Nearly always none: an item moved about on the stack for
            // nothing was a fifth of this function.
            if let Some(it) = self.queue.whole.pop() {
                self.queue_whole.push_back((self.seq, it));
            }
            self.queue_keys
                .push_back((t, self.seq, self.queue.bytes.len(), w));
            self.events += w;
        } else {
            self.scratch.bytes.clear();
            enc.push_lone(item, &mut self.scratch);
            out.keys.append(&mut self.scratch.keys);
            let slot = match self.free.pop() {
                Some(i) => i,
                None => {
                    self.late.push(Default::default());
                    self.late.len() - 1
                }
            };
            let (bytes, whole) = &mut self.late[slot];
            std::mem::swap(bytes, &mut self.scratch.bytes);
            if !self.scratch.whole.is_empty() {
                *whole = self.scratch.whole.pop();
            }
            self.heap.push(std::cmp::Reverse((t, self.seq, slot, w)));
            self.events += w;
        }
        self.leave(out, false);
    }

    /// All that waits leaves into `out`, in order, and the next record
    /// starts a new cycle (a clock restart; the end of the input).
    pub fn flush(&mut self, out: &mut WireBatch) {
        self.leave(out, true);
        self.settle(out);
        self.newest = None;
    }

    /// The records that have left into `out`: to be called before `out`
    /// is looked at or sent.
    pub fn settle(&mut self, out: &mut WireBatch) {
        if self.ready == 0 {
            return;
        }
        let (_, last, end, _) = self.queue_keys[self.ready - 1];
        out.bytes
            .extend_from_slice(&self.queue.bytes[self.head..end]);
        out.items += self.ready;
        while self.queue_whole.front().is_some_and(|w| w.0 <= last) {
            if let Some((_, it)) = self.queue_whole.pop_front() {
                out.whole.push(it);
            }
        }
        self.queue_keys.drain(..self.ready);
        self.ready = 0;
        self.head = end;
        if self.queue_keys.is_empty() {
            self.queue.bytes.clear();
            self.head = 0;
        } else if self.head > (1 << 20) && self.head * 2 > self.queue.bytes.len() {
            // A queue that never empties is moved down now and then.
            self.queue.bytes.drain(..self.head);
            let h = self.head;
            for k in self.queue_keys.iter_mut() {
                k.2 -= h;
            }
            self.head = 0;
        }
    }

    /// The earliest waiting records leave while they are ready (or all of
    /// them): a record of the queue is counted in `ready`, one from the
    /// heap goes into `out` after those.
    fn leave(&mut self, out: &mut WireBatch, all: bool) {
        loop {
            let q = self.queue_keys.get(self.ready).map(|k| (k.0, k.1));
            let h = self.heap.peek().map(|r| (r.0 .0, r.0 .1));
            let (t, from_queue) = match (q, h) {
                (Some(q), Some(h)) => (q.0.min(h.0), q < h),
                (Some(q), None) => (q.0, true),
                (None, Some(h)) => (h.0, false),
                (None, None) => break,
            };
            if !(all || self.settled(t) || self.events > self.cap) {
                break;
            }
            if from_queue {
                self.events -= self.queue_keys[self.ready].3;
                self.ready += 1;
            } else if let Some(std::cmp::Reverse((_, _, slot, w))) = self.heap.pop() {
                self.events -= w;
                self.settle(out);
                let (bytes, whole) = &mut self.late[slot];
                out.bytes.extend_from_slice(bytes);
                out.items += 1;
                if whole.is_some() {
                    out.whole.extend(whole.take());
                }
                bytes.clear();
                self.free.push(slot);
            }
        }
    }
}

/// A batch that does not decode: only a bug in this module can cause it.
fn damaged(at: usize) -> Error {
    Error::Unsupported(format!(
        "internal error: the items handed to the writer thread do not decode at byte {at}"
    ))
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let s = self
            .b
            .get(self.at..self.at.saturating_add(n))
            .ok_or_else(|| damaged(self.at))?;
        self.at += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        let s = self.take(2)?;
        Ok(u16::from_ne_bytes([s[0], s[1]]))
    }
    fn u32(&mut self) -> Result<u32> {
        let s = self.take(4)?;
        Ok(u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u64(&mut self) -> Result<u64> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_ne_bytes(a))
    }
    fn opt_u64(&mut self) -> Result<Option<u64>> {
        Ok(match self.u8()? {
            0 => None,
            _ => Some(self.u64()?),
        })
    }
    fn len(&mut self) -> Result<usize> {
        Ok(self.u32()? as usize)
    }
    fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.len()?;
        self.take(n)
    }
    fn str(&mut self) -> Result<&'a str> {
        let at = self.at;
        crate::model::utf8(self.bytes()?).ok_or_else(|| damaged(at))
    }
}

/// `s` into `slot`, in the buffer it has.
fn set_string(slot: &mut String, s: &str) {
    slot.clear();
    slot.push_str(s);
}

/// Text buffers of values that became numbers, for values that become
/// text: a decoded item's values change kind from item to item (wide PCP
/// samples mix text and numbers), and a buffer freed for one and allocated
/// for the next would cost an allocation per value.
const SPARE_TEXTS: usize = 4096;

fn keep_text(pool: &mut Vec<String>, s: String) {
    if pool.len() < SPARE_TEXTS {
        pool.push(s);
    }
}

fn spare(pool: &mut Vec<String>, v: Value) {
    if let Value::Str(s) = v {
        keep_text(pool, s);
    }
}

/// `s` into the text a value already has (None), else into a pooled
/// buffer for a new value (Some).
fn text_into(old: Option<&mut String>, s: &str, pool: &mut Vec<String>) -> Option<String> {
    match old {
        Some(t) => {
            set_string(t, s);
            None
        }
        None => {
            let mut t = pool.pop().unwrap_or_default();
            set_string(&mut t, s);
            Some(t)
        }
    }
}

/// [`text_into`] for bytes (rare: no pool).
fn bytes_into(old: Option<&mut Vec<u8>>, s: &[u8]) -> Option<Vec<u8>> {
    match old {
        Some(t) => {
            t.clear();
            t.extend_from_slice(s);
            None
        }
        None => Some(s.to_vec()),
    }
}

/// Write the number `x` of kind `tag` into `slot` if the slot holds a
/// number of that kind (most values keep their kind from item to item).
#[inline]
fn set_in_place(tag: u8, x: u64, slot: &mut Value) -> bool {
    match (tag, slot) {
        (I64, Value::I64(y)) | (ENUM, Value::Enum(y)) => *y = x as i64,
        (U64, Value::U64(y)) => *y = x,
        _ => return false,
    }
    true
}

fn get_value(c: &mut Cursor, slot: &mut Value, pool: &mut Vec<String>) -> Result<()> {
    // A number of the kind the slot holds (most values): tag and value
    // read with one bounds check, written in place.
    if let Some(&[tag, b0, b1, b2, b3, b4, b5, b6, b7]) = c.b.get(c.at..c.at + 9) {
        let x = u64::from_ne_bytes([b0, b1, b2, b3, b4, b5, b6, b7]);
        if !set_in_place(tag, x, slot) {
            return get_value_any(c, slot, pool);
        }
        c.at += 9;
        return Ok(());
    }
    get_value_any(c, slot, pool)
}

fn get_value_any(c: &mut Cursor, slot: &mut Value, pool: &mut Vec<String>) -> Result<()> {
    let at = c.at;
    let tag = c.u8()?;
    let new = match tag {
        STR => {
            let old = match slot {
                Value::Str(t) => Some(t),
                _ => None,
            };
            match text_into(old, c.str()?, pool) {
                Some(t) => Value::Str(t),
                None => return Ok(()),
            }
        }
        BYTES => {
            let old = match slot {
                Value::Bytes(t) => Some(t),
                _ => None,
            };
            match bytes_into(old, c.bytes()?) {
                Some(t) => Value::Bytes(t),
                None => return Ok(()),
            }
        }
        _ => {
            let x = c.u64()?;
            if set_in_place(tag, x, slot) {
                return Ok(());
            }
            match tag {
                I64 => Value::I64(x as i64),
                U64 => Value::U64(x),
                F32 => Value::F32(f32::from_bits(x as u32)),
                F64 => Value::F64(f64::from_bits(x)),
                ENUM => Value::Enum(x as i64),
                _ => return Err(damaged(at)),
            }
        }
    };
    spare(pool, std::mem::replace(slot, new));
    Ok(())
}

/// `n` values into `vs`, reusing the values (and text buffers) it has.
fn get_values(c: &mut Cursor, vs: &mut Vec<Value>, n: usize, pool: &mut Vec<String>) -> Result<()> {
    if vs.len() > n {
        for v in vs.drain(n..) {
            spare(pool, v);
        }
    }
    for i in 0..n {
        match vs.get_mut(i) {
            Some(slot) => get_value(c, slot, pool)?,
            None => {
                let mut v = Value::I64(0);
                get_value(c, &mut v, pool)?;
                vs.push(v);
            }
        }
    }
    Ok(())
}

fn get_extra(c: &mut Cursor, slot: &mut ExtraValue, pool: &mut Vec<String>) -> Result<()> {
    let at = c.at;
    let new = match c.u8()? {
        STR => {
            let old = match slot {
                ExtraValue::Str(t) => Some(t),
                _ => None,
            };
            match text_into(old, c.str()?, pool) {
                Some(t) => ExtraValue::Str(t),
                None => return Ok(()),
            }
        }
        BYTES => {
            let old = match slot {
                ExtraValue::Bytes(t) => Some(t),
                _ => None,
            };
            match bytes_into(old, c.bytes()?) {
                Some(t) => ExtraValue::Bytes(t),
                None => return Ok(()),
            }
        }
        tag => {
            let x = c.u64()?;
            match tag {
                U64 => ExtraValue::U64(x),
                I64 => ExtraValue::I64(x as i64),
                F64 => ExtraValue::F64(f64::from_bits(x)),
                BOOL => ExtraValue::Bool(x != 0),
                _ => return Err(damaged(at)),
            }
        }
    };
    spare_extra(pool, std::mem::replace(slot, new));
    Ok(())
}

/// Lists of values put aside by key, so that the decoded item takes the
/// one of its key: the values of one event type (or one kind of sample)
/// keep their kinds and lengths from item to item, where one list for all
/// would change kinds and lengths at every change of key (KPI CHK, NEW and
/// STP events alternate, and so do samples of processes and of IRQs), a
/// value and a text buffer going to the pool and another coming back each
/// time.
#[derive(Debug)]
struct Shelf<T> {
    /// The key of the list in the decoded item.
    cur: u32,
    /// Lists of other keys, one per key.
    others: Vec<(u32, T)>,
}

impl<T> Default for Shelf<T> {
    fn default() -> Self {
        Shelf {
            cur: 0,
            others: Vec::new(),
        }
    }
}

/// Keys a shelf keeps lists for; past that, lists are refilled in place.
const SHELF_KEYS: usize = 64;

impl<T: Default> Shelf<T> {
    /// Put `list` (of the current key) aside and give it the list of `key`,
    /// if that key had one (else an empty one).
    #[inline]
    fn switch(&mut self, list: &mut T, key: u32) {
        if key == self.cur {
            return;
        }
        match self.others.iter().position(|(k, _)| *k == key) {
            Some(i) => {
                let (k, other) = &mut self.others[i];
                std::mem::swap(list, other);
                *k = self.cur;
            }
            None if self.others.len() < SHELF_KEYS => {
                self.others.push((self.cur, std::mem::take(list)));
            }
            None => {}
        }
        self.cur = key;
    }
}

/// The items a decoder fills again for each record, with the lists they
/// keep by key.
#[derive(Debug)]
struct Slots {
    /// Field lists of other event types than the decoded event's, and
    /// metric lists of samples of other first metrics than the decoded
    /// sample's (see [`Shelf`]).
    fields: Shelf<Vec<Value>>,
    metrics: Shelf<Vec<MetricValues>>,
    event: Item,
    run: Item,
    sample: Item,
    indom: Item,
    note: Item,
}

impl Default for Slots {
    fn default() -> Slots {
        Slots {
            fields: Shelf::default(),
            metrics: Shelf::default(),
            event: Item::Event(Event::default()),
            run: Item::EventRun(Box::default()),
            sample: Item::Sample(Sample {
                time: Timestamp::ZERO,
                raw_clock: None,
                metrics: Vec::new(),
                extras: Extras::default(),
            }),
            indom: Item::Indom(IndomUpdate {
                time: Timestamp::ZERO,
                id: 0,
                kind: IndomKind::Full,
                instances: Vec::new(),
                removed: Vec::new(),
                extras: Extras::default(),
            }),
            note: Item::Annotation(Annotation {
                time: Timestamp::ZERO,
                raw_clock: None,
                text: String::new(),
                extras: Extras::default(),
            }),
        }
    }
}

/// The writing side: gives back the items of a batch, one at a time, in
/// items of its own that it fills again for each.
#[derive(Debug, Default)]
pub struct WireDecoder {
    keys: Vec<ExtraKey>,
    texts: Vec<String>,
    lists: Vec<Vec<(InstId, Value)>>,
    /// Items of records put with `push`: a same-extras mark refers to the
    /// extras the slot of its kind holds.
    main: Slots,
    /// Items of records put with `push_lone`, apart, so that they leave
    /// `main` as it was.
    lone: Slots,
}

impl WireDecoder {
    pub fn new() -> WireDecoder {
        WireDecoder::default()
    }

    /// Each item of `batch`, in order, to `f`. The batch is left empty but
    /// for the items sent whole ([`WireBatch::whole_mut`]), which go back
    /// to their reader.
    pub fn each(
        &mut self,
        batch: &mut WireBatch,
        mut f: impl FnMut(&Item) -> Result<()>,
    ) -> Result<()> {
        self.keys.append(&mut batch.keys);
        let mut c = Cursor {
            b: &batch.bytes,
            at: 0,
        };
        let mut whole = batch.whole.iter();
        while c.at < c.b.len() {
            let at = c.at;
            let tag = c.u8()?;
            let slots = match tag & LONE {
                0 => &mut self.main,
                _ => &mut self.lone,
            };
            match tag & !LONE {
                EVENT => {
                    if let Item::Event(e) = &mut slots.event {
                        let fields = Fields::Values(&mut slots.fields);
                        get_event(&mut c, e, fields, &self.keys, &mut self.texts)?;
                    }
                    f(&slots.event)?;
                }
                RUN => {
                    if let Item::EventRun(r) = &mut slots.run {
                        let fields = Fields::Run(&mut r.width, &mut r.cells);
                        get_event(&mut c, &mut r.event, fields, &self.keys, &mut self.texts)?;
                        if r.width == 0 || r.cells.len() % r.width as usize != 0 {
                            return Err(damaged(at));
                        }
                    }
                    f(&slots.run)?;
                }
                SAMPLE => {
                    if let Item::Sample(s) = &mut slots.sample {
                        let shelf = &mut slots.metrics;
                        get_sample(
                            &mut c,
                            s,
                            &self.keys,
                            &mut self.texts,
                            &mut self.lists,
                            shelf,
                        )?;
                    }
                    f(&slots.sample)?;
                }
                INDOM => {
                    if let Item::Indom(u) = &mut slots.indom {
                        get_indom(&mut c, u, &self.keys, &mut self.texts)?;
                    }
                    f(&slots.indom)?;
                }
                NOTE => {
                    if let Item::Annotation(a) = &mut slots.note {
                        a.time = Timestamp(c.u64()? as i64);
                        a.raw_clock = c.opt_u64()?;
                        set_string(&mut a.text, c.str()?);
                        get_extras(&mut c, &mut a.extras, &self.keys, &mut self.texts)?;
                    }
                    f(&slots.note)?;
                }
                WHOLE if tag == WHOLE => {
                    let item = whole.next().ok_or_else(|| damaged(at))?;
                    f(item)?;
                }
                _ => return Err(damaged(at)),
            }
        }
        batch.bytes.clear();
        batch.items = 0;
        Ok(())
    }
}

fn spare_extra(pool: &mut Vec<String>, v: ExtraValue) {
    if let ExtraValue::Str(s) = v {
        keep_text(pool, s);
    }
}

/// The extras of an item into `x`. Entries are matched by key, not by
/// position, so that an entry the previous item had and this one has not
/// (a KPI group's start) moves no text value to a number's place.
fn get_extras(
    c: &mut Cursor,
    x: &mut Extras,
    keys: &[ExtraKey],
    pool: &mut Vec<String>,
) -> Result<()> {
    let n = c.u16()?;
    if n == SAME_EXTRAS {
        return Ok(());
    }
    let entries = x.entries_mut();
    for i in 0..n as usize {
        let at = c.at;
        let key = keys.get(c.u16()? as usize).ok_or_else(|| damaged(at))?;
        if entries.get(i).is_some_and(|(k, _)| !key_eq(k, key)) {
            // Both lists are in key order: entries before this key's are
            // gone; if it has none, a new entry goes here.
            match entries[i..].iter().position(|(k, _)| key_eq(k, key)) {
                Some(j) => {
                    for (_, v) in entries.drain(i..i + j) {
                        spare_extra(pool, v);
                    }
                }
                None => entries.insert(i, (key.clone(), ExtraValue::Bool(false))),
            }
        }
        match entries.get_mut(i) {
            Some((_, v)) => get_extra(c, v, pool)?,
            None => {
                let mut v = ExtraValue::Bool(false);
                get_extra(c, &mut v, pool)?;
                entries.push((key.clone(), v));
            }
        }
    }
    if entries.len() > n as usize {
        for (_, v) in entries.drain(n as usize..) {
            spare_extra(pool, v);
        }
    }
    // Items that follow with the same extras keep these as they are: the
    // writer then knows them by their stamp.
    x.restamp();
    Ok(())
}

/// Where a decoded event's values go: its fields (their lists kept by
/// type), or a run's width and cells.
enum Fields<'a> {
    Values(&'a mut Shelf<Vec<Value>>),
    Run(&'a mut u32, &'a mut Cells),
}

fn get_event(
    c: &mut Cursor,
    e: &mut Event,
    mut fields: Fields,
    keys: &[ExtraKey],
    pool: &mut Vec<String>,
) -> Result<()> {
    // The tag is read; the rest of the fixed part in one bounds check.
    let h = c.take(EVENT_HEAD - 1)?;
    let u64_at = |i: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&h[i - 1..i + 7]);
        u64::from_ne_bytes(a)
    };
    let u32_at = |i: usize| u32::from_ne_bytes([h[i - 1], h[i], h[i + 1], h[i + 2]]);
    let flags = h[0];
    e.time = Timestamp(u64_at(2) as i64);
    e.raw_clock = (flags & 1 != 0).then(|| u64_at(10));
    e.type_id = u32_at(18);
    if let Fields::Values(shelf) = &mut fields {
        shelf.switch(&mut e.fields, e.type_id);
    }
    e.cpu = (flags & 2 != 0).then(|| u32_at(22));
    let n = u32_at(26) as usize;
    if flags & 4 != 0 {
        let at = c.at;
        if c.u8()? != STR {
            return Err(damaged(at));
        }
        let s = c.str()?;
        match &mut e.stream {
            Some(t) => set_string(t, s),
            None => e.stream = Some(s.to_string()),
        }
    } else {
        e.stream = None;
    }
    match fields {
        Fields::Run(w, cells) => {
            *w = c.u32()?;
            let at = c.at;
            if !cells.set_bytes(c.bytes()?, n) {
                return Err(damaged(at));
            }
        }
        Fields::Values(_) => get_values(c, &mut e.fields, n, pool)?,
    }
    get_extras(c, &mut e.extras, keys, pool)
}

/// Value lists of metrics a decoded sample no longer has, for the metrics
/// of a later one (samples differ in their metrics).
const SPARE_LISTS: usize = 1024;

fn spare_list(
    lists: &mut Vec<Vec<(InstId, Value)>>,
    texts: &mut Vec<String>,
    mut l: Vec<(InstId, Value)>,
) {
    for (_, v) in l.drain(..) {
        spare(texts, v);
    }
    if lists.len() < SPARE_LISTS {
        lists.push(l);
    }
}

fn get_sample(
    c: &mut Cursor,
    s: &mut Sample,
    keys: &[ExtraKey],
    texts: &mut Vec<String>,
    lists: &mut Vec<Vec<(InstId, Value)>>,
    shelf: &mut Shelf<Vec<MetricValues>>,
) -> Result<()> {
    s.time = Timestamp(c.u64()? as i64);
    s.raw_clock = c.opt_u64()?;
    let n = c.len()?;
    // Samples are told apart by their first metric (the next word).
    let first = c.b.get(c.at..c.at + 4).filter(|_| n > 0);
    let key = first.map_or(u32::MAX, |w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]));
    shelf.switch(&mut s.metrics, key);
    if s.metrics.len() > n {
        for m in s.metrics.drain(n..) {
            if let Ok(l) = m.values {
                spare_list(lists, texts, l);
            }
        }
    }
    for i in 0..n {
        if s.metrics.len() <= i {
            s.metrics.push(MetricValues {
                metric: 0,
                values: Ok(lists.pop().unwrap_or_default()),
            });
        }
        let m = &mut s.metrics[i];
        m.metric = c.u32()?;
        match c.u8()? {
            0 => {
                let k = c.len()?;
                if m.values.is_err() {
                    m.values = Ok(lists.pop().unwrap_or_default());
                }
                if let Ok(vs) = &mut m.values {
                    if vs.len() > k {
                        for (_, v) in vs.drain(k..) {
                            spare(texts, v);
                        }
                    }
                    for j in 0..k {
                        // The instance and a number of the kind the slot
                        // holds (most values): read with one bounds check.
                        if let (Some((id, v)), Some(w)) = (vs.get_mut(j), c.b.get(c.at..c.at + 13))
                        {
                            let x = u64::from_ne_bytes([
                                w[5], w[6], w[7], w[8], w[9], w[10], w[11], w[12],
                            ]);
                            if set_in_place(w[4], x, v) {
                                *id = InstId::from_ne_bytes([w[0], w[1], w[2], w[3]]);
                                c.at += 13;
                                continue;
                            }
                        }
                        let inst = c.u32()? as InstId;
                        match vs.get_mut(j) {
                            Some((id, v)) => {
                                *id = inst;
                                get_value(c, v, texts)?;
                            }
                            None => {
                                let mut v = Value::I64(0);
                                get_value(c, &mut v, texts)?;
                                vs.push((inst, v));
                            }
                        }
                    }
                }
            }
            _ => {
                let code = c.u32()? as i32;
                if let Ok(l) = std::mem::replace(&mut m.values, Err(code)) {
                    spare_list(lists, texts, l);
                }
            }
        }
    }
    get_extras(c, &mut s.extras, keys, texts)
}

fn get_indom(
    c: &mut Cursor,
    u: &mut IndomUpdate,
    keys: &[ExtraKey],
    pool: &mut Vec<String>,
) -> Result<()> {
    u.time = Timestamp(c.u64()? as i64);
    u.id = c.u32()?;
    u.kind = match c.u8()? {
        0 => IndomKind::Full,
        _ => IndomKind::Delta,
    };
    let n = c.len()?;
    // Names of instances this update has fewer of wait in the pool (full
    // updates and deltas alternate).
    if u.instances.len() > n {
        for i in u.instances.drain(n..) {
            keep_text(pool, i.name);
        }
    }
    for i in 0..n {
        let id = c.u32()? as InstId;
        let name = c.str()?;
        match u.instances.get_mut(i) {
            Some(inst) => {
                inst.id = id;
                set_string(&mut inst.name, name);
            }
            None => {
                let mut t = pool.pop().unwrap_or_default();
                set_string(&mut t, name);
                u.instances.push(Instance { id, name: t });
            }
        }
    }
    let n = c.len()?;
    u.removed.clear();
    for _ in 0..n {
        u.removed.push(c.u32()? as InstId);
    }
    get_extras(c, &mut u.extras, keys, pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extras(pairs: Vec<(ExtraKey, ExtraValue)>) -> Extras {
        let mut x = Extras::default();
        for (k, v) in pairs {
            x.set(k, v);
        }
        x
    }

    fn event(t: i64, fields: Vec<Value>, x: Extras) -> Item {
        Item::Event(Event {
            time: Timestamp(t),
            raw_clock: (t % 2 == 0).then_some(t as u64 * 3),
            type_id: 7,
            cpu: (t % 3 == 0).then_some(t as u32),
            stream: (t % 4 == 0).then(|| format!("cpu/{t}")),
            fields,
            extras: x,
        })
    }

    /// A run of events of time `t`, `width` of `values` each.
    fn run(t: i64, width: u32, values: &[Value], x: Extras) -> Item {
        let mut cells = Cells::default();
        for v in values {
            assert!(cells.push_value(v));
        }
        let Item::Event(event) = event(t, vec![], x) else {
            unreachable!("an event")
        };
        Item::from(EventRun {
            event,
            width,
            cells,
        })
    }

    fn sample(t: i64, metrics: Vec<MetricValues>) -> Item {
        Item::Sample(Sample {
            time: Timestamp(t),
            raw_clock: None,
            metrics,
            extras: Extras::default(),
        })
    }

    fn values(metric: MetricId, vs: Vec<(InstId, Value)>) -> MetricValues {
        MetricValues {
            metric,
            values: Ok(vs),
        }
    }

    /// Items of every kind, with values that change kind from item to item
    /// (the decoder reuses its items), shared and changing extras, and items
    /// that have no byte form.
    fn items() -> Vec<Item> {
        let kpi = extras(vec![
            ("kpi.kind".into(), ExtraValue::Str("CHK".into())),
            ("kpi.group".into(), ExtraValue::U64(4)),
        ]);
        let mut out = vec![
            Item::EventType(Arc::new(EventType {
                id: 7,
                name: "e".into(),
                category: "c".into(),
                description: None,
                priority: None,
                format: None,
                fields: vec![],
                framing: false,
                extras: Extras::default(),
            })),
            event(
                1,
                vec![Value::I64(-5), Value::Str("one".into())],
                kpi.clone(),
            ),
            // The same extras: only a mark travels.
            event(
                2,
                vec![Value::I64(6), Value::Str("two".into())],
                kpi.clone(),
            ),
            event(
                3,
                vec![
                    Value::U64(u64::MAX),
                    Value::F32(1.5),
                    Value::F64(f64::MIN_POSITIVE),
                    Value::Enum(-1),
                    Value::Bytes(vec![0, 255, 1]),
                ],
                extras(vec![
                    ("kpi.kind".into(), ExtraValue::Str("NEW".into())),
                    ("a.bool".into(), ExtraValue::Bool(true)),
                    ("a.f".into(), ExtraValue::F64(-0.25)),
                    ("a.i".into(), ExtraValue::I64(i64::MIN)),
                    ("a.bytes".into(), ExtraValue::Bytes(vec![9; 3])),
                    // A key built at run time, not a constant.
                    (ExtraKey::Owned(format!("x.{}", 1)), ExtraValue::U64(1)),
                ]),
            ),
            // Extras equal as numbers but not to the bit: both travel.
            event(
                7,
                vec![],
                extras(vec![("a.f".into(), ExtraValue::F64(-0.0))]),
            ),
            event(
                8,
                vec![],
                extras(vec![("a.f".into(), ExtraValue::F64(0.0))]),
            ),
            // Fewer fields and extras than the event before.
            event(4, vec![Value::Str("four".into())], Extras::default()),
            // A nested value: the event travels whole.
            event(5, vec![Value::List(vec![Value::I64(1)])], kpi.clone()),
            event(6, vec![], kpi.clone()),
            // Runs: the extras of the event before are not theirs to mark,
            // nor theirs the event's; values of every kind, another width.
            run(6, 2, &[Value::I64(1), Value::Str("a".into())], kpi.clone()),
            run(
                6,
                2,
                &[
                    Value::I64(2),
                    Value::Str("b".into()),
                    Value::U64(3),
                    Value::Bytes(vec![0xff]),
                ],
                kpi.clone(),
            ),
            run(
                7,
                3,
                &[Value::F32(0.5), Value::F64(-1.0), Value::Enum(2)],
                Extras::default(),
            ),
            event(7, vec![], kpi.clone()),
            sample(
                10,
                vec![
                    values(1, vec![(0, Value::Str("a".into())), (1, Value::U64(2))]),
                    MetricValues {
                        metric: 2,
                        values: Err(-12345),
                    },
                    values(3, vec![]),
                ],
            ),
            // Text where numbers were and the other way round; a metric less.
            sample(
                11,
                vec![
                    values(1, vec![(0, Value::U64(3)), (1, Value::Str("b".into()))]),
                    values(2, vec![(PM_IN_NULL, Value::F64(2.5))]),
                ],
            ),
            // Wide: travels whole.
            sample(
                12,
                vec![values(
                    4,
                    (0..NARROW_VALUES as InstId + 1)
                        .map(|i| (i, Value::U64(i as u64)))
                        .collect(),
                )],
            ),
            Item::Indom(IndomUpdate {
                time: Timestamp(13),
                id: 99,
                kind: IndomKind::Full,
                instances: vec![
                    Instance {
                        id: 1,
                        name: "one".into(),
                    },
                    Instance {
                        id: 2,
                        name: "two".into(),
                    },
                ],
                removed: vec![],
                extras: Extras::default(),
            }),
            Item::Indom(IndomUpdate {
                time: Timestamp(14),
                id: 99,
                kind: IndomKind::Delta,
                instances: vec![],
                removed: vec![1],
                extras: kpi.clone(),
            }),
            Item::Annotation(Annotation {
                time: Timestamp(15),
                raw_clock: Some(1),
                text: "note".into(),
                extras: kpi,
            }),
            Item::Mark(Mark {
                time: Timestamp(16),
                extras: Extras::default(),
            }),
        ];
        // Enough events to fill more than one batch below.
        for t in 20..40 {
            out.push(event(t, vec![Value::I64(t)], Extras::default()));
        }
        out
    }

    /// The "same extras" mark after stamped extras is sent for the same
    /// stamp only: unstamped extras with the contents of the last stamped
    /// ones, or other stamped ones, travel in full (the encoder keeps no
    /// copy of stamped extras); after unstamped ones, equal contents are
    /// the same. Every item comes out as it went in.
    #[test]
    fn stamped_extras_are_marked_same_by_their_stamp_only() {
        let a = || extras(vec![("k".into(), ExtraValue::U64(1))]);
        let mut x = a();
        x.restamp();
        let mut y = a();
        y.copy_from(&x);
        let mut z = extras(vec![("k".into(), ExtraValue::U64(2))]);
        z.restamp();
        let cases = vec![
            (x.clone(), false),
            (y, true),
            (a(), false),
            (a(), true),
            // Contents equal to the last unstamped: the same, as before.
            (x.clone(), true),
            (z, false),
            // Equal to extras sent before z, not to z.
            (a(), false),
            (Extras::default(), false),
            (x, false),
        ];
        let mut enc = WireEncoder::new();
        let mut dec = WireDecoder::new();
        let mut batch = WireBatch::default();
        let mut want = Vec::new();
        for (i, (e, same)) in cases.into_iter().enumerate() {
            let mut item = event(i as i64 + 1, vec![], e);
            want.push(format!("{item:?}"));
            let before = batch.byte_len();
            enc.push(&mut item, &mut batch);
            let mark = batch.bytes[batch.byte_len() - 2..] == SAME_EXTRAS.to_ne_bytes();
            assert_eq!(mark, same, "item {i}");
            assert!(batch.byte_len() > before);
        }
        let mut got = Vec::new();
        dec.each(&mut batch, |item| {
            got.push(format!("{item:?}"));
            Ok(())
        })
        .unwrap();
        assert_eq!(got, want);
    }

    #[test]
    fn every_item_comes_out_as_it_went_in_and_in_order() {
        let want: Vec<String> = items().iter().map(|i| format!("{i:?}")).collect();
        let mut enc = WireEncoder::new();
        let mut dec = WireDecoder::new();
        let mut got = Vec::new();
        let mut whole_back = 0;
        let mut run = items();
        // Batches of 5 items: the key table and the "same extras" mark
        // carry over from batch to batch.
        for chunk in run.chunks_mut(5) {
            let mut batch = WireBatch::default();
            for item in chunk.iter_mut() {
                enc.push(item, &mut batch);
            }
            assert_eq!(batch.len(), chunk.len());
            dec.each(&mut batch, |item| {
                got.push(format!("{item:?}"));
                Ok(())
            })
            .unwrap();
            assert_eq!(batch.byte_len(), 0, "a written batch comes back empty");
            whole_back += batch.whole_mut().len();
        }
        assert_eq!(got, want);
        // The EventType, the nested event, the wide sample and the mark.
        assert_eq!(whole_back, 4, "items sent whole come back to their reader");
    }

    #[test]
    fn items_with_a_byte_form_stay_with_the_reader() {
        let mut enc = WireEncoder::new();
        let mut batch = WireBatch::default();
        let mut run = items();
        for item in run.iter_mut() {
            enc.push(item, &mut batch);
        }
        let before: Vec<String> = items().iter().map(|i| format!("{i:?}")).collect();
        let after: Vec<String> = run.iter().map(|i| format!("{i:?}")).collect();
        let empty = format!("{:?}", Item::Event(Event::default()));
        for (b, a) in before.iter().zip(&after) {
            assert!(a == b || *a == empty, "changed: {b} -> {a}");
        }
        assert_eq!(after.iter().filter(|a| **a == empty).count(), 4);
    }

    #[test]
    fn a_damaged_batch_is_an_error_not_a_panic() {
        let mut enc = WireEncoder::new();
        let mut run = items();
        let mut whole = WireBatch::default();
        for item in run.iter_mut() {
            enc.push(item, &mut whole);
        }
        // Cut anywhere: a cut between two items decodes the items before
        // it, a cut inside one is an error; none panics.
        let mut errors = 0;
        for cut in 1..whole.bytes.len() {
            let mut batch = WireBatch {
                bytes: whole.bytes[..cut].to_vec(),
                whole: whole.whole.clone(),
                keys: whole.keys.clone(),
                items: whole.items,
            };
            let mut n = 0;
            match WireDecoder::new().each(&mut batch, |_| {
                n += 1;
                Ok(())
            }) {
                Ok(()) => assert!(n < whole.items, "cut at {cut}: all items decoded"),
                Err(e) => {
                    assert!(e.to_string().contains("do not decode at byte"), "{e}");
                    errors += 1;
                }
            }
        }
        assert!(
            errors > whole.bytes.len() / 2,
            "only {errors} cuts were errors"
        );
        let mut batch = WireBatch {
            bytes: vec![WHOLE],
            ..WireBatch::default()
        };
        assert!(WireDecoder::new().each(&mut batch, |_| Ok(())).is_err());
    }

    /// Random runs of events of a few types and samples of a few shapes,
    /// with values whose kinds and counts change within a type or shape
    /// too, and extras that come and go: every item comes out as it went
    /// in (the decoder's lists put aside by type and first metric, and its
    /// read of a sample's numbers in one check, are right whatever came
    /// before).
    #[test]
    fn random_items_come_out_as_they_went_in() {
        let mut rng = crate::model::TestRng(0x9e37_79b9_7f4a_7c15);
        let mut rnd = move |n: u64| rng.below(n);
        let value = |r: &mut dyn FnMut(u64) -> u64| match r(8) {
            0 => Value::I64(r(1000) as i64 - 500),
            1 => Value::U64(r(u64::MAX)),
            2 => Value::Enum(r(9) as i64),
            3 => Value::F64(r(100) as f64 / 8.0),
            4 => Value::F32(r(100) as f32 / 4.0),
            5 => Value::Bytes(vec![r(256) as u8; r(5) as usize]),
            _ => Value::Str("é".repeat(r(4) as usize) + &r(100).to_string()),
        };
        let mut enc = WireEncoder::new();
        let mut dec = WireDecoder::new();
        let (mut want, mut got) = (Vec::new(), Vec::new());
        for round in 0..400 {
            let mut batch = WireBatch::default();
            for _ in 0..rnd(40) {
                let mut x = Extras::default();
                for k in ["kpi.kind", "kpi.group", "a"] {
                    if rnd(3) > 0 {
                        x.set(k, ExtraValue::U64(rnd(3)));
                    }
                }
                // Kinds mostly stay per field or metric, as a source's do.
                let stable = rnd(4) > 0;
                let mut item = if rnd(4) > 0 {
                    let t = rnd(5) as u32;
                    let fields = (0..(t + rnd(2) as u32))
                        .map(|i| match (stable, i % 3) {
                            (true, 0) => Value::I64(rnd(100) as i64),
                            (true, 1) => Value::Str(format!("cmd {}", rnd(9))),
                            (true, _) => Value::U64(rnd(100)),
                            _ => value(&mut rnd),
                        })
                        .collect();
                    Item::Event(Event {
                        time: Timestamp(round * 100 + rnd(100) as i64),
                        raw_clock: (rnd(2) == 0).then(|| rnd(1000)),
                        type_id: t,
                        cpu: (rnd(3) == 0).then_some(1),
                        stream: (rnd(3) == 0).then(|| "cpu/1".to_string()),
                        fields,
                        extras: x,
                    })
                } else {
                    let first = rnd(3) as u32 * 10;
                    let metrics = (0..1 + rnd(3) as u32)
                        .map(|m| MetricValues {
                            metric: first + m,
                            values: if rnd(10) == 0 {
                                Err(-12345)
                            } else {
                                Ok((0..rnd(6 + first as u64))
                                    .map(|i| {
                                        let v = if stable {
                                            Value::U64(rnd(1 << 40))
                                        } else {
                                            value(&mut rnd)
                                        };
                                        (i as InstId - 1 + 8 * rnd(3) as InstId, v)
                                    })
                                    .collect())
                            },
                        })
                        .collect();
                    Item::Sample(Sample {
                        time: Timestamp(round),
                        raw_clock: None,
                        metrics,
                        extras: x,
                    })
                };
                want.push(format!("{item:?}"));
                enc.push(&mut item, &mut batch);
            }
            dec.each(&mut batch, |item| {
                got.push(format!("{item:?}"));
                Ok(())
            })
            .unwrap();
        }
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "item {i}");
        }
    }
}
