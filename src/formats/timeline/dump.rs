//! Snabb's `dump()` listings (spec 3.8 and 3.9), rendered straight from the
//! snapshot bytes (no model round trip: a 1M-entry dump must be fast).

use super::layout::{
    parse_mspec, placeholders, u16_at, u32_at, u64_at, Layout, Snapshot, M_UNKNOWN_MSGID,
};
use super::numfmt::{digit_count, g14_f64, g14_u64, push_u64, u64_digits_into};
use crate::error::{Diagnostic, Error, Position, Result};
use crate::options::DumpOptions;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;

pub const HEADER_FINAL: &[u8] = b"numa core       cycles category         message\n";
pub const HEADER_NEWEST: &[u8] = b"numa core      -cycles category         message\n";
const FLUSH_AT: usize = 1 << 20;

/// Texts of a row are copied in fixed strides of this many bytes from
/// copies padded to a multiple of it: a fixed-size copy is two vector moves
/// inline, where a copy of a piece's own length was a `memcpy` call, five
/// or six per row (a quarter of a 1M-row dump's instructions).
const STRIDE: usize = 32;

/// `s` padded with zeros to a whole number of strides (at least one).
struct Padded {
    bytes: Vec<u8>,
    len: usize,
}

impl Padded {
    fn new(s: &[u8]) -> Self {
        let mut bytes = s.to_vec();
        bytes.resize(s.len().div_ceil(STRIDE).max(1) * STRIDE, 0);
        Padded {
            bytes,
            len: s.len(),
        }
    }
    /// Copy into `dst` at `at` (room for [`Padded::room`] bytes there);
    /// returns the position after the text.
    #[inline]
    fn put(&self, dst: &mut [u8], at: usize) -> usize {
        if let Ok(one) = <&[u8; STRIDE]>::try_from(&self.bytes[..]) {
            // Most texts are one stride: one copy, no loop.
            dst[at..at + STRIDE].copy_from_slice(one);
        } else {
            for (k, c) in self.bytes.chunks_exact(STRIDE).enumerate() {
                let d = at + k * STRIDE;
                dst[d..d + STRIDE].copy_from_slice(c);
            }
        }
        at + self.len
    }
    fn room(&self) -> usize {
        self.bytes.len()
    }
}

/// A message as the texts around its placeholders: `texts[0]`, the value
/// of argument 0, `texts[1]`, the value of argument 1, …; a text after an
/// argument starts with its `)`, the last ends with the row's newline
/// (fewer, longer copies a row). Placeholders past the 4 stored arguments
/// print `?` (Snabb's dump crashes there).
struct Template {
    texts: Vec<Padded>,
    /// Placeholders beyond the stored args.
    overflow: bool,
    /// Bytes a row of it may write past its message's start, strides
    /// included.
    room: usize,
    /// The string offset of the category the message was first met with,
    /// and that category's column followed by `texts[0]`: one copy for both
    /// in the rows where the message keeps its category (as a Snabb
    /// message does).
    head_cat: usize,
    head: Padded,
    /// [`Template::room`] for a row written with `head`.
    head_room: usize,
}

/// Room for an argument's value: 20 digits, or `%.14g` of a larger one
/// (at most 20 bytes).
const ARG_ROOM: usize = 32;

/// The template of the message `fmt`, its head fused with the category
/// column `cat` (at string offset `cat_off`).
fn template(fmt: &[u8], nargs: usize, cat_off: usize, cat: &Padded) -> Template {
    let (mut texts, mut text) = (Vec::new(), Vec::new());
    let mut pos = 0;
    for (a, b) in placeholders(fmt) {
        text.extend_from_slice(&fmt[pos..a]);
        text.extend_from_slice(&fmt[a + 1..b]);
        text.push(b'(');
        texts.push(Padded::new(&text));
        text.clear();
        text.push(b')');
        pos = b;
    }
    text.extend_from_slice(&fmt[pos..]);
    text.push(b'\n');
    texts.push(Padded::new(&text));
    let args = texts.len() - 1;
    let room = texts.iter().map(Padded::room).sum::<usize>() + args * ARG_ROOM;
    let mut head = cat.bytes[..cat.len].to_vec();
    head.extend_from_slice(&texts[0].bytes[..texts[0].len]);
    let head = Padded::new(&head);
    let head_room = room - texts[0].room() + head.room();
    Template {
        overflow: args > nargs,
        texts,
        room,
        head_cat: cat_off,
        head,
        head_room,
    }
}

/// The output buffer with its flush policy.
struct Out<'w> {
    buf: Vec<u8>,
    /// Where the row being rendered starts in `buf`.
    row_start: usize,
    w: &'w mut dyn Write,
}

impl Out<'_> {
    fn maybe_flush(&mut self) -> Result<()> {
        if self.buf.len() >= FLUSH_AT {
            self.flush()?;
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        self.w
            .write_all(&self.buf)
            .map_err(|e| Error::io("<output>", e))?;
        self.buf.clear();
        self.row_start = 0;
        Ok(())
    }
}

fn pad_left_int(v: u64, buf: &mut Vec<u8>) {
    // C "%-4d " for small non-negative values.
    let start = buf.len();
    push_u64(v, buf);
    let w = buf.len() - start;
    for _ in w..4 {
        buf.push(b' ');
    }
    buf.push(b' ');
}

fn right12(field: &[u8], buf: &mut Vec<u8>) {
    for _ in field.len()..12 {
        buf.push(b' ');
    }
    buf.extend_from_slice(field);
    buf.push(b' ');
}

fn left16(field: &[u8], buf: &mut Vec<u8>) {
    buf.extend_from_slice(field);
    for _ in field.len()..16 {
        buf.push(b' ');
    }
    buf.push(b' ');
}

#[derive(Clone, Copy)]
enum Cycles {
    Start,
    U(u64),
    F(f64),
}

fn cycles_field(c: &Cycles, tmp: &mut Vec<u8>) {
    tmp.clear();
    match c {
        Cycles::Start => tmp.extend_from_slice(b"<start>"),
        Cycles::U(v) => g14_u64(*v, tmp),
        Cycles::F(v) => g14_f64(*v, tmp),
    }
}

/// What is listed, and how.
#[derive(Clone, Copy)]
struct Listing<'s, 'a> {
    path: &'s Path,
    snap: &'s Snapshot<'a>,
    dopts: &'s DumpOptions,
}

/// Dump any timeline snapshot.
pub fn dump(
    path: &Path,
    snap: &Snapshot,
    dopts: &DumpOptions,
    salvage: bool,
    out: &mut dyn Write,
    diags: &mut Vec<Diagnostic>,
) -> Result<()> {
    let mut o = Out {
        buf: Vec::with_capacity(FLUSH_AT + 64 * 1024),
        row_start: 0,
        w: out,
    };
    let l = Listing { path, snap, dopts };
    let r = match snap.layout {
        Layout::A2 => dump_a(&l, &mut o, diags),
        _ => dump_m(&l, &mut o, diags),
    };
    if r.is_err() {
        // Drop the partial row the damaged entry started.
        o.buf.truncate(o.row_start);
    }
    match r {
        Ok(()) => {}
        Err(e @ Error::Format { .. }) if salvage => {
            if let Error::Format { pos, msg } = e {
                diags.push(Diagnostic::salvaged(
                    pos,
                    format!("{msg}; listing stopped here"),
                ));
            }
        }
        Err(e) => {
            // Keep what was printed before the damage, as Snabb's dump would.
            let _ = o.flush();
            return Err(e);
        }
    }
    o.flush()?;
    o.w.flush().map_err(|e| Error::io("<output>", e))
}

struct ACtx<'s, 'a> {
    snap: &'s Snapshot<'a>,
    path: &'s Path,
    /// String offset → 1 + index into the arenas (0: not loaded yet, so
    /// the tables come zeroed from the allocator: a fill of 2 × 256 kB a
    /// thread showed in a dump's start).
    cat_idx: Vec<u32>,
    msg_idx: Vec<u32>,
    /// Categories padded to 16 columns and a space.
    cats: Vec<Padded>,
    msgs: Vec<Template>,
    overflow: BTreeSet<usize>,
    tmp: Vec<u8>,
}

impl<'s, 'a> ACtx<'s, 'a> {
    /// A context with nothing loaded yet (one per thread that formats rows).
    fn new(snap: &'s Snapshot<'a>, path: &'s Path) -> Self {
        ACtx {
            snap,
            path,
            cat_idx: vec![0; 65536],
            msg_idx: vec![0; 65536],
            cats: Vec::new(),
            msgs: Vec::new(),
            overflow: BTreeSet::new(),
            tmp: Vec::with_capacity(32),
        }
    }
}

impl ACtx<'_, '_> {
    fn bad_string(&self, slot: usize, off: usize, what: &str) -> Error {
        Error::format(
            Position::at(
                self.path,
                self.snap.entry_offset(slot) + 24,
                Some(slot as u64),
            ),
            format!(
                "{what} string offset {off} is outside the string table of {} bytes",
                self.snap.strings().len()
            ),
        )
    }

    fn cat(&mut self, slot: usize, off: usize) -> Result<usize> {
        if self.cat_idx[off] == 0 {
            let s = self
                .snap
                .cstr(off)
                .ok_or_else(|| self.bad_string(slot, off, "category"))?;
            let mut v = Vec::with_capacity(s.len().max(16) + 1);
            left16(s, &mut v);
            self.cats.push(Padded::new(&v));
            self.cat_idx[off] = self.cats.len() as u32;
        }
        Ok(self.cat_idx[off] as usize - 1)
    }

    /// The template of the message at `off`, made (its head fused with
    /// the category `ci`, at `cat_off`) when first met.
    fn msg(&mut self, slot: usize, off: usize, cat_off: usize, ci: usize) -> Result<usize> {
        if self.msg_idx[off] == 0 {
            let s = self
                .snap
                .cstr(off)
                .ok_or_else(|| self.bad_string(slot, off, "message"))?;
            let t = template(s, 4, cat_off, &self.cats[ci]);
            if t.overflow {
                self.overflow.insert(off);
            }
            self.msgs.push(t);
            self.msg_idx[off] = self.msgs.len() as u32;
        }
        Ok(self.msg_idx[off] as usize - 1)
    }

    /// Format the row of `slot` into `buf` from `at` on, over what `buf`
    /// holds there (it grows when short; the caller truncates it to the
    /// returned end): the texts go in fixed strides ([`STRIDE`]). Inlined
    /// into its loops: the call's frame cost a fifth of a row.
    #[inline(always)]
    fn row(&mut self, slot: usize, cyc: Cycles, buf: &mut Vec<u8>, at: usize) -> Result<usize> {
        let e = self.snap.entry(slot);
        let aux = u32_at(e, 16);
        let msg_id = u64_at(e, 24);
        let cat_off = ((msg_id >> 40) & 0xffff) as usize;
        let msg_off = ((msg_id >> 16) & 0xffff) as usize;
        // The message's template, when its head holds this category
        // (looked up first otherwise, so a bad category offset is reported
        // before a bad message offset).
        let known = self.msg_idx[msg_off] as usize;
        let (mi, ci) = match known.checked_sub(1) {
            Some(mi) if self.msgs[mi].head_cat == cat_off => (mi, None),
            _ => {
                let ci = self.cat(slot, cat_off)?;
                (self.msg(slot, msg_off, cat_off, ci)?, Some(ci))
            }
        };
        let msg = &self.msgs[mi];
        let room = match ci {
            None => msg.head_room,
            Some(ci) => self.cats[ci].room() + msg.room,
        };
        let need = at + PRE + room;
        if buf.len() < need {
            buf.resize(need + 4096, 0);
        }
        // Fixed columns "%-4d %-4d %12s ", written where they go.
        let pre: &mut [u8; PRE] = (&mut buf[at..at + PRE]).try_into().expect("PRE bytes");
        pre.fill(b' ');
        put_digits(((aux >> 12) & 0xf) as u64, &mut pre[..]);
        put_digits((aux & 0xff) as u64, &mut pre[5..]);
        let len = match cyc {
            Cycles::U(v) if v < 1_000_000_000_000 => {
                // Right-aligned in the 12 columns that end at 22.
                u64_digits_into(v, &mut pre[10..22]);
                23
            }
            Cycles::U(v) if v < 100_000_000_000_000 => {
                // Wider than its 12 columns.
                10 + put_digits(v, &mut pre[10..]) + 1
            }
            c => {
                cycles_field(&c, &mut self.tmp);
                let w = self.tmp.len().min(40);
                let mut len = 10 + 12usize.saturating_sub(w);
                pre[len..len + w].copy_from_slice(&self.tmp[..w]);
                len += w;
                len + 1
            }
        };
        let mut at = match ci {
            None => msg.head.put(buf, at + len),
            Some(ci) => {
                let at = self.cats[ci].put(buf, at + len);
                msg.texts[0].put(buf, at)
            }
        };
        for (k, text) in msg.texts[1..].iter().enumerate() {
            if k < 4 {
                let v = u64_at(e, 32 + 8 * k);
                if v < 100_000_000_000_000 {
                    at += put_digits(v, &mut buf[at..at + 20]);
                } else {
                    self.tmp.clear();
                    g14_u64(v, &mut self.tmp);
                    let w = self.tmp.len().min(ARG_ROOM);
                    buf[at..at + w].copy_from_slice(&self.tmp[..w]);
                    at += w;
                }
            } else {
                buf[at] = b'?';
                at += 1;
            }
            at = text.put(buf, at);
        }
        Ok(at)
    }
}

/// The fixed columns' room: up to 63 bytes are used (an `Cycles` field of
/// up to 40 characters overflowing its 12 columns).
const PRE: usize = 64;

/// The decimal digits of `v` at the start of `dst`, written in place;
/// returns their count. Not through a buffer on the stack: a wide copy read
/// right after the byte stores that built it stalls the load (the store
/// cannot be forwarded), and three of those a row cost as much as the rest
/// of the row.
#[inline(always)]
fn put_digits(v: u64, dst: &mut [u8]) -> usize {
    // Most columns and arguments are one digit (numa, core, ids).
    if v < 10 {
        dst[0] = b'0' + v as u8;
        return 1;
    }
    let n = digit_count(v);
    u64_digits_into(v, &mut dst[..n]);
    n
}

fn dump_a(l: &Listing, o: &mut Out, diags: &mut Vec<Diagnostic>) -> Result<()> {
    let Listing { path, snap, dopts } = *l;
    let n = snap.n;
    let mut cx = ACtx::new(snap, path);
    let prev = |i: usize| snap.tsc_raw((i + n - 1) % n);
    let mut rows: u64 = 0;
    let res = (|| -> Result<()> {
        if !dopts.newest_first {
            o.buf.extend_from_slice(HEADER_FINAL);
            return dump_a_final(l, o, &mut cx.overflow);
        }
        o.buf.extend_from_slice(HEADER_NEWEST);
        let Some(newest) = a_newest_7629(snap) else {
            // Empty ring: Snabb's 7629b0f6b loops forever; we print the
            // header row only.
            return Ok(());
        };
        // Rows go into `text` over what it holds (its length is kept, so
        // its bytes are zeroed once), handed to the output by the megabyte.
        let (mut text, mut at) = (Vec::new(), 0);
        for j in 0..n {
            let i = (newest + n - j) % n;
            let t = snap.tsc_raw(i);
            if t == 0 && !dopts.unwritten_slots {
                continue;
            }
            if dopts.max.is_some_and(|m| rows > m) {
                break;
            }
            match cx.row(i, Cycles::U(t.wrapping_sub(prev(i))), &mut text, at) {
                Ok(end) => at = end,
                Err(e) => {
                    o.buf.extend_from_slice(&text[..at]);
                    o.row_start = o.buf.len();
                    return Err(e);
                }
            }
            rows += 1;
            if at >= FLUSH_AT {
                o.buf.extend_from_slice(&text[..at]);
                o.maybe_flush()?;
                at = 0;
            }
        }
        o.buf.extend_from_slice(&text[..at]);
        Ok(())
    })();
    for moff in &cx.overflow {
        diags.push(Diagnostic::warning(
            Position::at(path, (snap.strings_start + moff) as u64, None),
            format!(
                "message at string offset {moff} has more than 4 placeholders: Snabb's dump aborts here; printed name(?) for the extra ones"
            ),
        ));
    }
    res
}

/// Rows per piece of the final listing: each piece is formatted on its own
/// (a row needs only its slot and the one before), so two threads format
/// while this one writes, in order.
const CHUNK_ROWS: usize = 8192;
/// Pieces formatted ahead of the writer: bounds memory (about 0.6 MB each).
const CHUNKS_AHEAD: usize = 4;

/// One formatted piece: its text, the template offsets with too many
/// placeholders first met in it, and why it stopped early (an unwritten
/// slot ends the listing; a bad string offset is an error).
struct Chunk {
    k: usize,
    /// The text is `text[..len]`.
    text: Vec<u8>,
    len: usize,
    overflow: Vec<usize>,
    stop: Option<Option<Error>>,
}

/// Snabb's final dump (spec 3.8): from the oldest slot, each row's cycles
/// counted from the slot before it, until an unwritten slot or `--max`.
fn dump_a_final(l: &Listing, o: &mut Out, overflow: &mut BTreeSet<usize>) -> Result<()> {
    let Listing { path, snap, dopts } = *l;
    let n = snap.n;
    let oldest = snap.a_oldest_snabb();
    // Snabb stops once the row count exceeds max: max + 1 rows.
    let limit = dopts.max.map_or(n, |m| {
        n.min(usize::try_from(m).unwrap_or(usize::MAX).saturating_add(1))
    });
    let chunks = limit.div_ceil(CHUNK_ROWS);
    o.flush()?;
    let workers = std::thread::available_parallelism()
        .map_or(1, |p| p.get())
        .clamp(1, 2)
        .min(chunks.max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let stopped = std::sync::atomic::AtomicBool::new(false);
    let (buf_tx, buf_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    for _ in 0..CHUNKS_AHEAD {
        let _ = buf_tx.send(Vec::new());
    }
    let buf_rx = std::sync::Mutex::new(buf_rx);
    std::thread::scope(|sc| -> Result<()> {
        let (res_tx, res_rx) = std::sync::mpsc::channel::<Chunk>();
        for _ in 0..workers {
            let (res_tx, buf_rx, next, stopped) = (res_tx.clone(), &buf_rx, &next, &stopped);
            sc.spawn(move || {
                let mut cx = ACtx::new(snap, path);
                loop {
                    // A free buffer first, then a piece: pieces are handed
                    // out in order, so the one the writer waits for always
                    // has a buffer.
                    let got = buf_rx.lock().map(|r| r.recv());
                    let Ok(Ok(mut text)) = got else { break };
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if k >= chunks || stopped.load(std::sync::atomic::Ordering::SeqCst) {
                        break;
                    }
                    let (stop, new, len) = cx.piece(k, oldest, limit, &mut text);
                    if stop.is_some() {
                        stopped.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                    let piece = Chunk {
                        k,
                        text,
                        len,
                        overflow: new,
                        stop,
                    };
                    if res_tx.send(piece).is_err() {
                        break;
                    }
                }
            });
        }
        drop(res_tx);
        let mut pending: std::collections::BTreeMap<usize, Chunk> = Default::default();
        let mut written = 0;
        let out = (|| -> Result<()> {
            while written < chunks {
                let p = match pending.remove(&written) {
                    Some(p) => p,
                    None => match res_rx.recv() {
                        Ok(p) => {
                            pending.insert(p.k, p);
                            continue;
                        }
                        Err(_) => {
                            return Err(Error::Unsupported("formatting thread failed".into()))
                        }
                    },
                };
                written += 1;
                overflow.extend(&p.overflow);
                o.w.write_all(&p.text[..p.len])
                    .map_err(|e| Error::io("<output>", e))?;
                match p.stop {
                    Some(Some(e)) => return Err(e),
                    Some(None) => return Ok(()),
                    None => {}
                }
                let _ = buf_tx.send(p.text);
            }
            Ok(())
        })();
        // Let the helpers finish: no more buffers, no more pieces.
        stopped.store(true, std::sync::atomic::Ordering::SeqCst);
        drop(buf_tx);
        out
    })
}

impl ACtx<'_, '_> {
    /// Format rows `k * CHUNK_ROWS ..` of the final listing into `buf`
    /// from its start, over what it holds (a buffer comes back with its
    /// length, so its bytes are zeroed once, not for each piece); returns
    /// why it stopped early, the overflowing templates it met first and the
    /// end of the text.
    fn piece(
        &mut self,
        k: usize,
        oldest: usize,
        limit: usize,
        buf: &mut Vec<u8>,
    ) -> (Option<Option<Error>>, Vec<usize>, usize) {
        let n = self.snap.n;
        let mut at = 0;
        let before: BTreeSet<usize> = std::mem::take(&mut self.overflow);
        let mut stop = None;
        let first = k * CHUNK_ROWS;
        // The slot and the tsc before it carried from row to row: a
        // division a row for the ring's wrap showed in profiles.
        let mut i = (oldest + first) % n;
        let mut prev = self.snap.tsc_raw(i.checked_sub(1).unwrap_or(n - 1));
        for j in first..limit.min(first + CHUNK_ROWS) {
            let t = self.snap.tsc_raw(i);
            if t == 0 {
                stop = Some(None);
                break;
            }
            let c = if j == 0 {
                Cycles::Start
            } else {
                Cycles::U(t.wrapping_sub(prev))
            };
            match self.row(i, c, buf, at) {
                Ok(end) => at = end,
                Err(e) => {
                    stop = Some(Some(e));
                    break;
                }
            }
            prev = t;
            i = if i + 1 == n { 0 } else { i + 1 };
        }
        let new: Vec<usize> = self.overflow.iter().copied().collect();
        self.overflow.extend(before);
        (stop, new, at)
    }
}

/// Newest slot as 7629b0f6b finds it: from slot 0 move forward while the
/// next tsc is not smaller. Snabb never terminates when no tsc ever drops;
/// we return None for an empty ring and the last slot otherwise.
pub fn a_newest_7629(snap: &Snapshot) -> Option<usize> {
    let n = snap.n;
    let mut i = 0;
    for _ in 0..n {
        let nx = (i + 1) % n;
        if snap.tsc_raw(i) <= snap.tsc_raw(nx) {
            i = nx;
        } else {
            return Some(i);
        }
    }
    if (0..n).any(|s| snap.tsc_raw(s) != 0) {
        Some(n - 1)
    } else {
        None
    }
}

/// Category, message head and `" name("` per arg of one mainline event.
type MRender = (Vec<u8>, Vec<u8>, Vec<Vec<u8>>);

/// polytrace's own listing of mainline files (Snabb has no dumper for them):
/// the same columns as the final A dump; message = event name, attributes,
/// then `arg(value)` for each declared argument.
fn dump_m(l: &Listing, o: &mut Out, diags: &mut Vec<Diagnostic>) -> Result<()> {
    let Listing { path, snap, dopts } = *l;
    let m3 = snap.layout == Layout::M3;
    if !m3 {
        diags.push(Diagnostic::warning(
            Position::new(path),
            "M2 file: args are unreliable (Snabb 95872b165's logger stores arg0 = 0, loses the 4th value, shifts the 5th/6th into arg3/arg4 and leaves garbage in arg5)",
        ));
    }
    o.buf.extend_from_slice(if dopts.newest_first {
        HEADER_NEWEST
    } else {
        HEADER_FINAL
    });
    let mut order = snap.order();
    if dopts.newest_first {
        order.reverse();
    }
    let mut specs: std::collections::HashMap<u16, MRender> = std::collections::HashMap::new();
    let mut tmp = Vec::new();
    let tsc_diff = |a: usize, b: usize| -> Cycles {
        let (x, y) = (snap.tsc_raw(a), snap.tsc_raw(b));
        if m3 {
            Cycles::F(f64::from_bits(x) - f64::from_bits(y))
        } else {
            Cycles::U(x.wrapping_sub(y))
        }
    };
    for (k, &slot) in order.iter().enumerate() {
        if dopts.max.is_some_and(|m| k as u64 > m) {
            break;
        }
        let slot = slot as usize;
        o.row_start = o.buf.len();
        let e = snap.entry(slot);
        let msgid = u16_at(e, 8);
        let cn = u16_at(e, 10);
        pad_left_int(((cn >> 12) & 0xf) as u64, &mut o.buf);
        pad_left_int((cn & 0xff) as u64, &mut o.buf);
        // Oldest-first: gap from the previous (older) row; newest-first: gap
        // to the next (older) row; the oldest entry shows <start>.
        let older = if dopts.newest_first {
            order.get(k + 1)
        } else if k > 0 {
            order.get(k - 1)
        } else {
            None
        };
        let c = match older {
            Some(&p) => tsc_diff(slot, p as usize),
            None => Cycles::Start,
        };
        cycles_field(&c, &mut tmp);
        right12(&tmp, &mut o.buf);
        if msgid == M_UNKNOWN_MSGID {
            left16(b"?", &mut o.buf);
            o.buf
                .extend_from_slice(b"unknown event (string table was full)\n");
            o.maybe_flush()?;
            continue;
        }
        if let std::collections::hash_map::Entry::Vacant(ve) = specs.entry(msgid) {
            let off = msgid as usize * 16;
            let s = snap.cstr(off).ok_or_else(|| {
                Error::format(
                    Position::at(path, snap.entry_offset(slot) + 8, Some(slot as u64)),
                    format!(
                        "msgid {msgid} (string offset {off}) is outside the string table of {} bytes",
                        snap.strings().len()
                    ),
                )
            })?;
            let sp = parse_mspec(s);
            let mut msg = sp.event.clone().into_bytes();
            if !sp.attrs.is_empty() {
                msg.push(b' ');
                msg.extend_from_slice(sp.attrs.as_bytes());
            }
            let args = sp
                .args
                .iter()
                .take(6)
                .map(|a| {
                    let mut v = b" ".to_vec();
                    v.extend_from_slice(a.as_bytes());
                    v.push(b'(');
                    v
                })
                .collect();
            ve.insert((sp.category.into_bytes(), msg, args));
        }
        if let Some((cat, msg, args)) = specs.get(&msgid) {
            left16(cat, &mut o.buf);
            o.buf.extend_from_slice(msg);
            for (i, a) in args.iter().enumerate() {
                o.buf.extend_from_slice(a);
                let raw = u64_at(e, 16 + 8 * i);
                if m3 {
                    g14_f64(f64::from_bits(raw), &mut o.buf);
                } else {
                    g14_u64(raw, &mut o.buf);
                }
                o.buf.push(b')');
            }
        }
        o.buf.push(b'\n');
        o.maybe_flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    impl ACtx<'_, '_> {
        /// The row written from the entry's strings as they stand (no
        /// template, no strides): one `extend_from_slice` per text, the
        /// reference of the test below.
        fn row_plain(&mut self, slot: usize, cyc: Cycles, buf: &mut Vec<u8>) -> Result<()> {
            let e = self.snap.entry(slot);
            let aux = u32_at(e, 16);
            let msg_id = u64_at(e, 24);
            let cat = self.snap.cstr(((msg_id >> 40) & 0xffff) as usize).unwrap();
            let fmt = self.snap.cstr(((msg_id >> 16) & 0xffff) as usize).unwrap();
            pad_left_int(((aux >> 12) & 0xf) as u64, buf);
            pad_left_int((aux & 0xff) as u64, buf);
            cycles_field(&cyc, &mut self.tmp);
            right12(&self.tmp.clone(), buf);
            left16(cat, buf);
            let mut pos = 0;
            for (k, (a, b)) in placeholders(fmt).into_iter().enumerate() {
                buf.extend_from_slice(&fmt[pos..a]);
                buf.extend_from_slice(&fmt[a + 1..b]);
                buf.push(b'(');
                if k < 4 {
                    g14_u64(u64_at(e, 32 + 8 * k), buf);
                } else {
                    buf.push(b'?');
                }
                buf.push(b')');
                pos = b;
            }
            buf.extend_from_slice(&fmt[pos..]);
            buf.push(b'\n');
            Ok(())
        }
    }

    /// Rows of random entries (categories and messages of every length
    /// around the strides, up to six placeholders, values of every digit
    /// count and past 10^14, cycles of every width and `<start>`) written
    /// one after another over a reused buffer give what one
    /// `extend_from_slice` per text gives.
    #[test]
    fn strided_rows_are_the_plain_rows() {
        let mut rng = crate::model::TestRng(0x2545_f491_4f6c_dd1d);
        let mut rnd = |n: u64| rng.below(n);
        let n = 512usize;
        let mut strings = vec![0u8];
        let mut offs = Vec::new();
        for _ in 0..60 {
            offs.push(strings.len());
            let len = rnd(100) as usize;
            for _ in 0..len {
                let c = match rnd(12) {
                    0 => b'$',
                    1 => b' ',
                    2 => b'(',
                    _ => b'a' + rnd(26) as u8,
                };
                strings.push(c);
            }
            strings.push(0);
        }
        let mut data = vec![0u8; 64 + n * 64];
        data[24..32].copy_from_slice(&(n as u64 - 1).to_le_bytes());
        let big = |r: &mut dyn FnMut(u64) -> u64| match r(4) {
            0 => r(10),
            1 => r(1 << 20),
            2 => r(200_000_000_000_000),
            _ => u64::MAX - r(1000),
        };
        for s in 0..n {
            let e = &mut data[64 + s * 64..128 + s * 64];
            let tsc = 1 + s as u64 * rnd(3) * 10u64.pow(rnd(16) as u32);
            e[0..8].copy_from_slice(&tsc.to_le_bytes());
            let aux = (rnd(16) << 12 | rnd(256)) as u32;
            e[16..20].copy_from_slice(&aux.to_le_bytes());
            let cat = offs[rnd(offs.len() as u64) as usize] as u64;
            let msg = offs[rnd(offs.len() as u64) as usize] as u64;
            let id = cat << 40 | msg << 16 | 2;
            e[24..32].copy_from_slice(&id.to_le_bytes());
            for k in 0..4 {
                e[32 + 8 * k..40 + 8 * k].copy_from_slice(&big(&mut rnd).to_le_bytes());
            }
        }
        data.extend_from_slice(&strings);
        let path = Path::new("t.dat");
        let snap = Snapshot::parse(path, &data, &mut Vec::new()).unwrap();
        let mut cx = ACtx::new(&snap, path);
        let (mut got, mut want) = (vec![0xaa; 100], Vec::new());
        let mut at = 0;
        for s in 0..n {
            let c = match s % 7 {
                0 => Cycles::Start,
                1 => Cycles::U(u64::MAX - s as u64),
                _ => Cycles::U(snap.tsc_raw(s)),
            };
            cx.row_plain(s, c, &mut want).unwrap();
            at = cx.row(s, c, &mut got, at).unwrap();
        }
        got.truncate(at);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want)
        );
    }
}
