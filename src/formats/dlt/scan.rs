//! Record framing over a byte stream, with resynchronisation.
//!
//! One pass, no seeks: a large buffer is refilled as records are consumed
//! (a record is at most 16 + 65535 bytes). On damage (no pattern, bad
//! version bits, a length shorter than the headers) the scanner searches
//! for the next `DLT\x01` whose headers are consistent *and* whose record
//! is followed by another pattern or by the end of the file, so a
//! `DLT\x01` inside a payload is not taken for a record. Every skip is
//! reported with its offset. Without salvage the first damage is an error.

use super::layout::{self, Head, Msg, MAX_RECORD, MIN_RECORD, PATTERN, PATTERN_V2};
use crate::error::{Diagnostic, Error, Position, Result};
use std::io::Read;
use std::path::PathBuf;

const BUF_LEN: usize = 1 << 20;

/// The headers of every record of `r`, in order, for a pass that needs
/// nothing else: one check and a few loads per record, where the
/// [`Scanner`] makes a whole [`Msg`] (the reader's pre-scan of a 100 MB
/// file took as long as a twelfth of its conversion). Only an input of
/// whole, well-formed records is walked to its end (true): at the first
/// record [`layout::check_headers`] refuses, a record cut by the end, or a
/// read error, it stops and returns false, and the caller reads the input
/// again with a [`Scanner`], whose rules for damage (resynchronisation,
/// salvage) then decide what the records are. Up to that point both give
/// the same records.
pub fn walk_heads<R: Read>(r: R, f: impl FnMut(&Head)) -> bool {
    walk_heads_until(r, None, f).whole
}

/// How [`walk_heads_until`] ended.
pub struct Walk {
    /// Every record walked was whole and acceptable, and so was what
    /// followed them up to where the walk ended.
    pub whole: bool,
    /// The walk stopped at the `stop` offset (a record starts there).
    pub stopped: bool,
}

/// [`walk_heads`] from where `r` is, stopping before the record that
/// starts `stop` bytes further on, if one does (a walk that steps over
/// that offset goes on to the end).
pub fn walk_heads_until<R: Read>(mut r: R, stop: Option<u64>, mut f: impl FnMut(&Head)) -> Walk {
    let mut buf = vec![0u8; BUF_LEN];
    let (mut pos, mut end) = (0usize, 0usize);
    // Offset of buf[0] from where the walk began.
    let mut base = 0u64;
    let mut eof = false;
    loop {
        while let Some(b) = buf.get(pos..end).filter(|b| b.len() >= MIN_RECORD) {
            if stop == Some(base + pos as u64) {
                return Walk {
                    whole: true,
                    stopped: true,
                };
            }
            let Some(total) = layout::record_len(b) else {
                return Walk {
                    whole: false,
                    stopped: false,
                };
            };
            // The record must end where the next begins (or the file
            // ends): else the scanner decides (a length running past the
            // next storage header, damage after the record).
            match b.get(total..total + 4) {
                Some(next) if next == PATTERN => {}
                Some(_) => {
                    return Walk {
                        whole: false,
                        stopped: false,
                    }
                }
                None if eof && b.len() == total => {}
                None if eof && b.len() > total => {
                    return Walk {
                        whole: false,
                        stopped: false,
                    }
                }
                None => break,
            }
            f(&Head::read(&b[..total]));
            pos += total;
        }
        if eof {
            // Bytes left over are a cut record or damage.
            return Walk {
                whole: pos == end,
                stopped: pos == end && stop == Some(base + pos as u64),
            };
        }
        // A record is at most MAX_RECORD < BUF_LEN bytes: it fits once
        // what was walked is dropped.
        buf.copy_within(pos..end, 0);
        base += pos as u64;
        end -= pos;
        pos = 0;
        loop {
            match r.read(&mut buf[end..]) {
                Ok(0) => eof = true,
                Ok(n) => end += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    return Walk {
                        whole: false,
                        stopped: false,
                    }
                }
            }
            break;
        }
    }
}

/// Where in `b` the first record that is followed by another (or by the
/// end of `b` when `b` ends the file) starts: a place to begin walking a
/// file in the middle. A `DLT\x01` inside a payload may pass this test
/// too; the walk from the start tells (it lands there or not).
pub fn record_start(b: &[u8], ends_file: bool) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = b.get(from..)?.windows(4).position(|w| w == PATTERN) {
        let at = from + i;
        if let Some(total) = layout::record_len(&b[at..]) {
            let next = at + total;
            if b.get(next..next + 4) == Some(&PATTERN[..]) || (ends_file && next == b.len()) {
                return Some(at);
            }
        }
        from = at + 1;
    }
    None
}

/// What an error at damage says of the rest of the input.
fn beyond_text(n: u64) -> String {
    match n {
        1 => "1 record lies beyond the damage (--salvage keeps it)".into(),
        n => format!("{n} records lie beyond the damage (--salvage keeps them)"),
    }
}

pub struct Scanner<R: Read> {
    r: R,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    /// File offset of `buf[0]`.
    base: u64,
    eof: bool,
    path: PathBuf,
    salvage: bool,
    /// Records yielded so far.
    pub count: u64,
    pub diags: Vec<Diagnostic>,
    done: bool,
}

impl<R: Read> Scanner<R> {
    pub fn new(r: R, path: PathBuf, salvage: bool) -> Scanner<R> {
        Scanner {
            r,
            buf: vec![0; BUF_LEN],
            pos: 0,
            end: 0,
            base: 0,
            eof: false,
            path,
            salvage,
            count: 0,
            diags: Vec::new(),
            done: false,
        }
    }

    /// Offset of the next unread byte.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Make at least `need` bytes available from `pos` unless the input
    /// ends first. Returns the bytes available.
    fn fill(&mut self, need: usize) -> Result<usize> {
        while self.end - self.pos < need && !self.eof {
            if self.pos > 0 && (self.end == self.buf.len() || self.pos >= self.buf.len() / 2) {
                self.buf.copy_within(self.pos..self.end, 0);
                self.base += self.pos as u64;
                self.end -= self.pos;
                self.pos = 0;
            }
            if self.end == self.buf.len() {
                // `need` never exceeds MAX_RECORD + 4 < BUF_LEN.
                break;
            }
            match self.r.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(&self.path, e)),
            }
        }
        Ok(self.end - self.pos)
    }

    fn pos_at(&self, offset: u64) -> Position {
        Position::at(&self.path, offset, Some(self.count))
    }

    /// Damage at the current position: an error, or (salvage) a search for
    /// the next acceptable record. Returns false when the input ended.
    fn damage(&mut self, why: String) -> Result<bool> {
        let start = self.offset();
        if !self.salvage {
            let at = self.pos_at(start);
            let beyond = self.count_beyond(why.clone())?;
            self.done = true;
            return Err(Error::format(at, format!("{why}; {}", beyond_text(beyond))));
        }
        self.damage_from(start, start + 1, why)
    }

    /// How many records a resynchronising read finds after the damage at
    /// the position (what an error without salvage leaves behind).
    fn count_beyond(&mut self, why: String) -> Result<u64> {
        self.salvage = true;
        let diags = self.diags.len();
        let start = self.offset();
        let mut n = 0;
        if self.damage_from(start, start + 1, why)? {
            while self.next_msg()?.is_some() {
                n += 1;
            }
        }
        self.diags.truncate(diags);
        self.salvage = false;
        Ok(n)
    }

    /// Skip from byte `start` (where the damage is; the search begins at
    /// `from`, within the buffer) to the next acceptable record, reporting
    /// the range skipped. Returns false when the input ended.
    fn damage_from(&mut self, start: u64, from: u64, why: String) -> Result<bool> {
        self.pos += (from - self.offset()) as usize;
        loop {
            let avail = self.fill(MIN_RECORD)?;
            if avail < MIN_RECORD {
                // No record can start here any more.
                let skipped = self.offset() + avail as u64 - start;
                self.pos = self.end;
                self.diags.push(Diagnostic::salvaged(
                    self.pos_at(start),
                    format!(
                        "{why}; skipped {skipped} bytes to the end of the file (no further record)"
                    ),
                ));
                return Ok(false);
            }
            let b = &self.buf[self.pos..self.end];
            let hit = b.windows(4).position(|w| w == PATTERN);
            match hit {
                None => {
                    // Keep the last 3 bytes: a pattern may straddle the refill.
                    self.pos = self.end - 3;
                    if self.eof {
                        self.pos = self.end;
                        let skipped = self.offset() - start;
                        self.diags.push(Diagnostic::salvaged(
                            self.pos_at(start),
                            format!("{why}; skipped {skipped} bytes to the end of the file (no further record)"),
                        ));
                        return Ok(false);
                    }
                    self.fill(MIN_RECORD + 3)?;
                }
                Some(i) => {
                    self.pos += i;
                    if self.candidate_ok()? {
                        let skipped = self.offset() - start;
                        self.diags.push(Diagnostic::salvaged(
                            self.pos_at(start),
                            format!(
                                "{why}; skipped {skipped} bytes, resynchronised at byte {}",
                                self.offset()
                            ),
                        ));
                        return Ok(true);
                    }
                    self.pos += 1;
                }
            }
        }
    }

    /// Is the pattern at `pos` the start of a plausible record? Its headers
    /// must be consistent and the record must be followed by a pattern or
    /// the end of the file (a record cut by the end of file is accepted
    /// and reported as cut by `next`).
    fn candidate_ok(&mut self) -> Result<bool> {
        let avail = self.fill(MIN_RECORD)?;
        if avail < MIN_RECORD {
            return Ok(false);
        }
        let total = match layout::check_headers(&self.buf[self.pos..self.end]) {
            Ok(t) => t,
            Err(_) => return Ok(false),
        };
        let avail = self.fill(total + 4)?;
        if avail <= total {
            return Ok(self.eof);
        }
        if avail < total + 4 {
            return Ok(false);
        }
        let next = &self.buf[self.pos + total..self.pos + total + 4];
        Ok(next == PATTERN)
    }

    /// The next record, or None at the end of the input.
    pub fn next_msg(&mut self) -> Result<Option<Msg<'_>>> {
        if self.done {
            return Ok(None);
        }
        // Nearly always: an acceptable record wholly in the buffer, the
        // next one's pattern right after it.
        let b = &self.buf[self.pos..self.end];
        if let Some(total) = layout::record_len(b) {
            if b.get(total..total + 4) == Some(&PATTERN[..]) {
                return Ok(self.take(total));
            }
        }
        loop {
            let avail = self.fill(MIN_RECORD)?;
            if avail == 0 {
                self.done = true;
                return Ok(None);
            }
            if avail < MIN_RECORD {
                if self.buf[self.pos..self.end].starts_with(&PATTERN) || avail < 4 {
                    return self.cut(avail, MIN_RECORD);
                }
                if !self.damage("no storage header pattern DLT\\x01".into())? {
                    self.done = true;
                    return Ok(None);
                }
                continue;
            }
            match layout::check_headers(&self.buf[self.pos..self.end]) {
                Err(why) if self.offset() == 0 && self.buf[..self.end].starts_with(&PATTERN_V2) => {
                    // A protocol-v2 file is not a damaged v1 file: refused
                    // whole, whatever the verb.
                    self.done = true;
                    return Err(Error::format(self.pos_at(0), why));
                }
                Err(why) => {
                    if !self.damage(why)? {
                        self.done = true;
                        return Ok(None);
                    }
                }
                Ok(total) => {
                    debug_assert!(total <= MAX_RECORD);
                    let avail = self.fill(total + 4)?;
                    let whole = avail >= total;
                    let next_ok = whole
                        && (avail == total
                            || self.buf[self.pos + total..self.end].starts_with(&PATTERN));
                    if whole && next_ok {
                        return Ok(self.take(total));
                    }
                    // The record does not end where another begins: a
                    // length running past the next storage header (a
                    // record cut short, a storage header without its
                    // message) when a record starts inside it.
                    if let Some(at) = self.record_inside(total.min(avail))? {
                        let start = self.offset();
                        let why = if whole {
                            format!(
                                "message length {} runs past the storage header at byte {at}",
                                total - layout::STORAGE_LEN
                            )
                        } else {
                            format!(
                                "record cut short: {} of {total} bytes before the storage header at byte {at}",
                                at - start
                            )
                        };
                        if !self.salvage {
                            let pos = self.pos_at(start);
                            let beyond = self.count_beyond_at(at, why.clone())?;
                            self.done = true;
                            return Err(Error::format(
                                pos,
                                format!("{why}; {}", beyond_text(beyond)),
                            ));
                        }
                        let kept = (at - start) as usize;
                        let hl = layout::STORAGE_LEN
                            + layout::headers_len(self.buf[self.pos + layout::STORAGE_LEN]);
                        if kept >= hl {
                            // Its headers are whole: listed with the payload
                            // present, as dlt-convert lists it.
                            self.diags.push(Diagnostic::salvaged(
                                self.pos_at(start),
                                format!("{why}; kept cut there ({kept} of {total} bytes)"),
                            ));
                            self.pos += kept;
                            self.count += 1;
                            let b = &self.buf[self.pos - kept..self.pos];
                            return Ok(Msg::parse_cut(start, b));
                        }
                        if !self.damage_from(start, at, why)? {
                            self.done = true;
                            return Ok(None);
                        }
                        continue;
                    }
                    if !whole {
                        return self.cut(avail, total);
                    }
                    return Ok(self.take(total));
                }
            }
        }
    }

    /// [`Self::count_beyond`] for damage that ends at byte `at`.
    fn count_beyond_at(&mut self, at: u64, why: String) -> Result<u64> {
        self.salvage = true;
        let diags = self.diags.len();
        let start = self.offset();
        let mut n = 0;
        if self.damage_from(start, at, why)? {
            while self.next_msg()?.is_some() {
                n += 1;
            }
        }
        self.diags.truncate(diags);
        self.salvage = false;
        Ok(n)
    }

    /// The offset of the first plausible record (see [`Self::candidate_ok`])
    /// starting within the `len` bytes after the position, the position
    /// itself excluded; the position is left unchanged.
    fn record_inside(&mut self, len: usize) -> Result<Option<u64>> {
        // Everything a candidate check can look at, loaded first: the
        // checks then never move the buffer under the record.
        self.fill(len + MAX_RECORD + 4)?;
        let start = self.pos;
        let mut from = 1;
        let mut found = None;
        while from < len {
            let upto = (start + len + 3).min(self.end);
            let Some(i) = self.buf[start + from..upto]
                .windows(4)
                .position(|w| w == PATTERN)
            else {
                break;
            };
            if from + i >= len {
                break;
            }
            self.pos = start + from + i;
            if self.candidate_ok()? {
                found = Some(self.offset());
                break;
            }
            from += i + 1;
        }
        self.pos = start;
        Ok(found)
    }

    /// The record of `total` bytes at the position, wholly in the buffer.
    fn take(&mut self, total: usize) -> Option<Msg<'_>> {
        let off = self.offset();
        let start = self.pos;
        self.pos += total;
        self.count += 1;
        Msg::parse(off, &self.buf[start..start + total])
    }

    /// The input ends inside a record.
    fn cut(&mut self, have: usize, want: usize) -> Result<Option<Msg<'_>>> {
        let off = self.offset();
        self.done = true;
        self.pos = self.end;
        let msg = format!("truncated final record: {have} of {want} bytes present");
        if self.salvage {
            self.diags.push(Diagnostic::salvaged(self.pos_at(off), msg));
            Ok(None)
        } else {
            Err(Error::format(self.pos_at(off), msg))
        }
    }
}
