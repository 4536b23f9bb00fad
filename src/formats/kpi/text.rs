//! KPI text lines: bare dataset lines (`NEW 21226;1;/usr/bin/x`) and the
//! lines `dlt-convert -a` / `dlt-receive -a` print (spec §5, §9.2).

use super::assemble::Assembler;
use super::dataset::Kind;
use super::grouper::{pack, tail_after, Group, Grouper, DEFAULT_PAYLOAD_MAX};
use super::truncated;
use crate::error::{Diagnostic, Error, Position, Result};
use crate::model::time::{civil_from_days, days_from_civil};
use crate::model::*;
use crate::options::ReadOptions;
use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// Extras keys on the header.
pub const X_STYLE: &str = "kpi.style";
pub const X_ECU: &str = "dlt.ecu";
pub const X_APID: &str = "dlt.apid";
pub const X_CTID: &str = "dlt.ctid";
/// KPI events and samples from a `.dlt`: the storage-header time (ns) of
/// the message the event came from, or of the group's BEG message for a
/// sample.
pub const X_STORAGE: &str = "dlt.storage_ns";

/// Which text form a line (or a file) is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// `TYPE dataset dataset …`
    Bare,
    /// `[idx] YYYY/MM/DD HH:MM:SS.uuuuuu tmsp mcnt ECU APID CTID type subtype V noar [payload]`
    Convert,
}

/// The header fields of a `dlt-convert -a` line.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvertLine<'a> {
    pub index: Option<u64>,
    pub time: Timestamp,
    pub tmsp: Option<u32>,
    pub mcnt: u8,
    pub ecu: &'a str,
    pub apid: &'a str,
    pub ctid: &'a str,
    pub noar: u32,
    pub payload: &'a [u8],
}

fn parse_date_time(date: &str, time: &str) -> Option<Timestamp> {
    let d: Vec<&str> = date.split('/').collect();
    if d.len() != 3 {
        return None;
    }
    let (y, mo, da): (i64, u32, u32) = (d[0].parse().ok()?, d[1].parse().ok()?, d[2].parse().ok()?);
    let (hms, us) = time.split_once('.')?;
    let t: Vec<&str> = hms.split(':').collect();
    if t.len() != 3 || us.len() != 6 || !(1..=12).contains(&mo) || !(1..=31).contains(&da) {
        return None;
    }
    let (h, mi, s): (i64, i64, i64) = (t[0].parse().ok()?, t[1].parse().ok()?, t[2].parse().ok()?);
    let us: u32 = us.parse().ok()?;
    let secs = days_from_civil(y, mo, da) * 86400 + h * 3600 + mi * 60 + s;
    Some(Timestamp::from_secs_micros(secs, us))
}

/// Parse a `dlt-convert -a` (or `dlt-receive -a`, no index) line.
pub fn parse_convert_line(line: &[u8]) -> Option<ConvertLine<'_>> {
    let open = line.iter().position(|&b| b == b'[')?;
    let close = line.iter().rposition(|&b| b == b']')?;
    if close < open {
        return None;
    }
    let head = std::str::from_utf8(&line[..open]).ok()?;
    let toks: Vec<&str> = head.split_whitespace().collect();
    let (index, rest) = if toks.first()?.contains('/') {
        (None, &toks[..])
    } else {
        (Some(toks[0].parse().ok()?), &toks[1..])
    };
    // date time tmsp mcnt ecu apid ctid type [subtype] V|N noar
    if rest.len() < 10 || rest.len() > 11 {
        return None;
    }
    let time = parse_date_time(rest[0], rest[1])?;
    let tmsp = if rest[2] == "----------" {
        None
    } else {
        Some(rest[2].parse().ok()?)
    };
    let mcnt = rest[3].parse().ok()?;
    let n = rest.len();
    if rest[n - 2] != "V" && rest[n - 2] != "N" {
        return None;
    }
    Some(ConvertLine {
        index,
        time,
        tmsp,
        mcnt,
        ecu: rest[4],
        apid: rest[5],
        ctid: rest[6],
        noar: rest[n - 1].parse().ok()?,
        payload: &line[open + 1..close],
    })
}

/// Split a text payload (`TYPE ds ds …`) into arguments. `noar` is the
/// argument count of a `dlt-convert -a` line, when there is one: it settles
/// where libdlt's truncated duplicate starts (`truncated::tail_start`).
/// Returns the arguments and whether a command-line boundary had to be
/// guessed.
pub fn split_payload(payload: &[u8], noar: Option<u32>) -> Option<(Vec<&[u8]>, bool)> {
    let sp = payload.iter().position(|&b| b == b' ');
    let (ty, rest) = match sp {
        Some(i) => (&payload[..i], &payload[i + 1..]),
        None => (payload, &payload[payload.len()..]),
    };
    let kind = Kind::parse(ty)?;
    let mut args = vec![ty];
    if rest.is_empty() {
        return Some((args, false));
    }
    if rest == b"BEG" || rest == b"END" {
        args.push(rest);
        return Some((args, false));
    }
    // The duplicate is always the last argument, and its marker holds
    // spaces: take it off first.
    let want = noar.and_then(|n| (n as usize).checked_sub(1));
    let (body, tail, mut guessed) = match truncated::tail_start(kind, rest, want) {
        Some((0, g)) => (&rest[..0], Some(rest), g),
        Some((s, g)) => (&rest[..s - 1], Some(&rest[s..]), g),
        None => (rest, None, false),
    };
    if !body.is_empty() {
        match kind {
            Kind::Stp | Kind::Act | Kind::Irq => {
                args.extend(body.split(|&b| b == b' ').filter(|s| !s.is_empty()));
            }
            Kind::New | Kind::Chk => {
                let mut start = 0;
                for i in 0..body.len() {
                    if body[i] == b' ' {
                        if truncated::starts_dataset(kind, &body[i + 1..]) {
                            args.push(&body[start..i]);
                            start = i + 1;
                        } else {
                            // A space inside a command line: the boundary is a guess.
                            guessed = true;
                        }
                    }
                }
                args.push(&body[start..]);
            }
        }
    }
    args.extend(tail);
    Some((args, guessed))
}

/// The text of a libdlt diagnostic line, `[ 1051.734029]~DLT~31602~WARNING  ~text`
/// (libdlt's `dlt_vlog`: uptime, `DLT`, pid, level): dlt-convert prints
/// these into its own stdout, so they land inside captured listings.
pub fn libdlt_diagnostic(line: &[u8]) -> Option<&[u8]> {
    let r = line.strip_prefix(b"[")?;
    let r = r.trim_ascii_start();
    let n = r.iter().take_while(|b| b.is_ascii_digit()).count();
    let r = r[n..].strip_prefix(b".").filter(|_| n > 0)?;
    let n = r.iter().take_while(|b| b.is_ascii_digit()).count();
    let r = r[n..].strip_prefix(b"]~DLT~").filter(|_| n > 0)?;
    let r = r.trim_ascii_start();
    let n = r.iter().take_while(|b| b.is_ascii_digit()).count();
    let r = r[n..].strip_prefix(b"~").filter(|_| n > 0)?;
    let n = r.iter().take_while(|b| b.is_ascii_uppercase()).count();
    let r = r[n..]
        .trim_ascii_start()
        .strip_prefix(b"~")
        .filter(|_| n > 0)?;
    Some(r)
}

/// What a libdlt diagnostic in a listing says about the listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Libdlt {
    /// Nothing about the data (skipped, counted).
    Other,
    /// dlt-convert could not read a record to its end ("Cannot read payload
    /// data from file of size N!", "Cannot read extended header from
    /// file!", …: a cut last record or a length past the end). The next
    /// line is that record, printed with a partial or stale payload.
    ReadFailed,
    /// dlt-convert's first pass met a record it rejects ("Plausibility
    /// check failed…") and listed nothing from there on.
    Stopped,
}

fn libdlt_kind(text: &[u8]) -> Libdlt {
    if text.starts_with(b"Cannot read ") {
        Libdlt::ReadFailed
    } else if text.starts_with(b"Plausibility check failed") {
        Libdlt::Stopped
    } else {
        Libdlt::Other
    }
}

/// The first line that is neither blank nor a libdlt diagnostic: its
/// byte offset, line number (from 1) and style, if it has one.
fn first_line(buf: &[u8]) -> Option<(u64, u64, Option<Style>)> {
    let (mut offset, mut line_no) = (0u64, 1u64);
    for l in buf.split(|&b| b == b'\n') {
        let t = l.strip_suffix(b"\r").unwrap_or(l);
        if !t.iter().all(|b| b.is_ascii_whitespace()) && libdlt_diagnostic(t).is_none() {
            return Some((offset, line_no, line_style(t)));
        }
        offset += l.len() as u64 + 1;
        line_no += 1;
    }
    None
}

/// Style of a file's text (its first KPI or dlt-convert line), if any.
pub fn text_style(buf: &[u8]) -> Option<Style> {
    first_line(buf).and_then(|f| f.2)
}

/// Style of a line, if it is a KPI text line at all.
pub fn line_style(line: &[u8]) -> Option<Style> {
    let first = line.split(|&b| b == b' ').next()?;
    if Kind::parse(first).is_some() {
        return Some(Style::Bare);
    }
    parse_convert_line(line).map(|_| Style::Convert)
}

/// Text that begins like a `dlt-convert -a` line (index, then a
/// `YYYY/MM/DD` date) but whose first line does not parse: cut inside
/// line 1 (the file ends there) or damaged.
pub fn near_miss(probe: &[u8], probe_max: usize) -> Option<(u64, String)> {
    let start = probe.iter().position(|b| !b.is_ascii_whitespace())?;
    let line = &probe[start..];
    let nl = line.iter().position(|&b| b == b'\n');
    let first = &line[..nl.unwrap_or(line.len())];
    let mut parts = first.split(|&b| b == b' ').filter(|s| !s.is_empty());
    let index = parts.next()?;
    let date = parts.next()?;
    let like = !index.is_empty()
        && index.iter().all(u8::is_ascii_digit)
        && date.len() == 10
        && date[4] == b'/'
        && date[7] == b'/'
        && date
            .iter()
            .enumerate()
            .all(|(i, b)| i == 4 || i == 7 || b.is_ascii_digit());
    if !like {
        return None;
    }
    let end = (start + first.len()) as u64;
    Some(if nl.is_none() && probe.len() < probe_max {
        (
            end,
            format!("dlt-convert -a text whose file ends inside line 1, after {end} bytes"),
        )
    } else {
        (
            start as u64,
            "dlt-convert -a text, but line 1 does not parse".to_string(),
        )
    })
}

pub struct KpiTextReader {
    header: Header,
    src: Box<dyn BufRead>,
    file: PathBuf,
    style: Style,
    asm: Assembler,
    queue: VecDeque<Item>,
    buf: Vec<u8>,
    line_no: u64,
    offset: u64,
    done: bool,
    salvage: bool,
    app: String,
    ctx: String,
    other_lines: u64,
    guessed: u64,
    mismatched: u64,
    diags: Vec<Diagnostic>,
    warned: usize,
    /// libdlt diagnostic lines skipped, and the first one (line, text).
    libdlt_lines: u64,
    first_libdlt: Option<(u64, String)>,
    /// With --salvage, the line after a cut-record diagnostic is skipped.
    skip_next: bool,
}

impl KpiTextReader {
    pub fn new(
        mut src: Box<dyn BufRead>,
        file: PathBuf,
        opts: &ReadOptions,
    ) -> Result<KpiTextReader> {
        // Peek the first line that is not blank and not a libdlt
        // diagnostic for the style (without consuming).
        let style = {
            let buf = src.fill_buf().map_err(|e| Error::io(&file, e))?;
            match first_line(buf) {
                Some((_, _, Some(s))) => s,
                None if buf.is_empty() => {
                    return Err(Error::format(Position::at(&file, 0, None), "empty input: no KPI lines"))
                }
                None => {
                    return Err(Error::format(
                        Position::at(&file, 0, None),
                        "no KPI lines: only blank lines and libdlt diagnostics",
                    ))
                }
                Some((offset, line_no, None)) => {
                    return Err(Error::format(
                        Position::at(&file, offset, Some(line_no)),
                        "not KPI text: the first line is neither a KPI dataset line (NEW/STP/ACT/CHK/IRQ) nor a dlt-convert -a line",
                    ))
                }
            }
        };
        let style_name = match style {
            Style::Bare => "bare",
            Style::Convert => "dlt-convert",
        };
        let mut header = Header::new(FormatId::Kpi, style_name);
        header
            .extras
            .set(X_STYLE, ExtraValue::Str(style_name.into()));
        header.extras.set(
            super::schema::X_PAGE_SIZE,
            ExtraValue::U64(opts.page_size.unwrap_or(4096)),
        );
        header.time_base = match style {
            Style::Bare => TimeBase::Relative {
                origin: "line order: bare KPI lines carry no time (item n at n ns)".into(),
            },
            Style::Convert => TimeBase::Absolute,
        };
        if style == Style::Convert {
            header.timezone = Some("UTC".into());
            // dlt-convert -a lines carry the message's tmsp as raw clock.
            header.extras.set(
                crate::model::keys::RAW_CLOCK,
                ExtraValue::Str(crate::model::keys::CLOCK_DLT.into()),
            );
        }
        Ok(KpiTextReader {
            header,
            src,
            file,
            style,
            asm: Assembler::new(),
            queue: VecDeque::new(),
            buf: Vec::with_capacity(4096),
            line_no: 0,
            offset: 0,
            done: false,
            salvage: opts.salvage,
            app: opts.kpi_app.clone().unwrap_or_else(|| "PROC".into()),
            ctx: opts.kpi_ctx.clone().unwrap_or_else(|| "PROC".into()),
            other_lines: 0,
            guessed: 0,
            mismatched: 0,
            diags: Vec::new(),
            warned: 0,
            libdlt_lines: 0,
            first_libdlt: None,
            skip_next: false,
        })
    }

    /// Datasets per type so far.
    pub fn counts(&self) -> BTreeMap<String, u64> {
        self.asm.counts()
    }

    /// Position of the current line: for KPI text a record is a line,
    /// counted from 1 as editors and `sed -n Np` count them.
    fn pos(&self) -> Position {
        Position::at(&self.file, self.offset, Some(self.line_no + 1))
    }

    fn bad_line(&mut self, msg: String) -> Result<()> {
        if self.salvage {
            self.diags.push(Diagnostic::salvaged(
                self.pos(),
                format!("{msg}; line skipped"),
            ));
            Ok(())
        } else {
            Err(Error::format(self.pos(), msg))
        }
    }

    /// `pos`: the line that raised them, or none for the totals at the end.
    fn drain_warnings(&mut self, pos: Position) {
        for w in self.asm.warnings.drain(..) {
            // Sanity flags can be many; keep the first 100 and count the rest.
            if self.warned < 100 {
                self.diags.push(Diagnostic::warning(pos.clone(), w));
            }
            self.warned += 1;
        }
    }

    fn read_line(&mut self) -> Result<bool> {
        self.buf.clear();
        let n = self
            .src
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| Error::io(&self.file, e))?;
        if n == 0 {
            return Ok(false);
        }
        let mut line = std::mem::take(&mut self.buf);
        // dlt-convert ends every line with a newline: without one, the
        // listing was cut inside its last line.
        let cut = line.last() != Some(&b'\n');
        while line.last().is_some_and(|&b| b == b'\n' || b == b'\r') {
            line.pop();
        }
        let res = if cut
            && self.style == Style::Convert
            && !line.iter().all(|b| b.is_ascii_whitespace())
        {
            self.bad_line(
                "the listing ends inside its last line (no newline at its end): the last record is cut"
                    .into(),
            )
        } else {
            self.line(&line)
        };
        self.buf = line;
        self.offset += n as u64;
        self.line_no += 1;
        res.map(|_| true)
    }

    fn line(&mut self, line: &[u8]) -> Result<()> {
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            return Ok(());
        }
        if let Some(text) = libdlt_diagnostic(line) {
            self.libdlt_lines += 1;
            if self.first_libdlt.is_none() {
                self.first_libdlt = Some((self.line_no, String::from_utf8_lossy(text).into()));
            }
            let kind = libdlt_kind(text);
            let msg = match kind {
                Libdlt::Other => return Ok(()),
                Libdlt::ReadFailed => format!(
                    "dlt-convert could not read a record of the .dlt it listed (libdlt: {:?}): that file is cut inside its last record (or a length runs past its end), and the next line is the record with a partial or stale payload",
                    String::from_utf8_lossy(text)
                ),
                Libdlt::Stopped => format!(
                    "dlt-convert rejected a record of the .dlt it listed (libdlt: {:?}) and listed nothing from there on: the listing is incomplete",
                    String::from_utf8_lossy(text)
                ),
            };
            if !self.salvage {
                return Err(Error::format(self.pos(), msg));
            }
            let what = if kind == Libdlt::ReadFailed {
                self.skip_next = true;
                "; that line skipped"
            } else {
                ""
            };
            self.diags
                .push(Diagnostic::salvaged(self.pos(), format!("{msg}{what}")));
            return Ok(());
        }
        if std::mem::take(&mut self.skip_next) {
            return Ok(());
        }
        let (payload, time, raw, noar) = match self.style {
            Style::Bare => (line, Timestamp(self.line_no as i64), None, None),
            Style::Convert => match parse_convert_line(line) {
                Some(c) => {
                    if c.apid.trim_end_matches('-') != self.app.trim_end_matches('-')
                        || c.ctid.trim_end_matches('-') != self.ctx.trim_end_matches('-')
                    {
                        self.other_lines += 1;
                        return Ok(());
                    }
                    if self.header.extras.get(X_ECU).is_none() {
                        self.header.extras.set(X_ECU, ExtraValue::Str(c.ecu.into()));
                    }
                    (c.payload, c.time, c.tmsp.map(u64::from), Some(c.noar))
                }
                None => return self.bad_line("not a dlt-convert -a line".into()),
            },
        };
        let Some((args, guessed)) = split_payload(payload, noar) else {
            let show: String = String::from_utf8_lossy(&payload[..payload.len().min(40)]).into();
            return self.bad_line(format!("not a KPI message: {show:?}"));
        };
        if guessed {
            self.guessed += 1;
        }
        if let Some(n) = noar {
            if n as usize != args.len() {
                self.mismatched += 1;
                self.diags.push(Diagnostic::warning(
                    self.pos(),
                    format!(
                        "guessed dataset boundaries give {} arguments, the line says {n}",
                        args.len()
                    ),
                ));
            }
        }
        let mut out = Vec::new();
        if let Err(e) = self.asm.message(&args, time, raw, None, &mut out) {
            return self.bad_line(e);
        }
        self.queue.extend(out);
        self.drain_warnings(self.pos());
        Ok(())
    }
}

impl TraceReader for KpiTextReader {
    fn header(&self) -> &Header {
        &self.header
    }
    fn next_item(&mut self) -> Result<Option<Item>> {
        loop {
            if let Some(it) = self.queue.pop_front() {
                return Ok(Some(it));
            }
            if self.done {
                return Ok(None);
            }
            if !self.read_line()? {
                self.done = true;
                let mut out = Vec::new();
                self.asm.finish(&mut out);
                self.queue.extend(out);
                self.drain_warnings(Position::new(&self.file));
                if self.warned > 100 {
                    self.diags.push(Diagnostic::warning(
                        Position::new(&self.file),
                        format!("{} more data warnings not shown", self.warned - 100),
                    ));
                }
                if self.asm.truncated() > 0 {
                    self.diags.push(Diagnostic::warning(
                        Position::new(&self.file),
                        format!(
                            "dropped {} truncated duplicate datasets (libdlt split marker)",
                            self.asm.truncated()
                        ),
                    ));
                }
                if let Some((line, text)) = &self.first_libdlt {
                    self.diags.push(Diagnostic::warning(
                        Position::new(&self.file),
                        format!(
                            "skipped {} libdlt diagnostic lines (`[uptime]~DLT~pid~LEVEL~text`, printed by dlt-convert into its listing; the first, line {}: {text:?})",
                            self.libdlt_lines,
                            line + 1
                        ),
                    ));
                }
                if self.other_lines > 0 {
                    self.diags.push(Diagnostic::warning(
                        Position::new(&self.file),
                        format!(
                            "skipped {} lines that are not {}/{} KPI messages",
                            self.other_lines, self.app, self.ctx
                        ),
                    ));
                }
            }
        }
    }
    fn diagnostics(&self) -> &[Diagnostic] {
        &self.diags
    }
    fn recycle(&mut self, item: Item) {
        self.asm.recycle(item);
    }

    fn native_counts(&self) -> Vec<(String, u64)> {
        Kind::ALL
            .iter()
            .map(|k| {
                let n = self.asm.count(*k);
                (format!("{} datasets", k.name()), n)
            })
            .collect()
    }
}

// ------------------------------------------------------------------ writer

/// True when the items' raw clock is a DLT header timestamp (0.1 ms ticks
/// since boot): said by the header, or KPI text (whose raw clock is the
/// tmsp column) and DLT files that predate the key. The recorder (source
/// `kpi` too) names its TSC instead.
pub fn raw_clock_is_tmsp(header: &Header) -> bool {
    match header.extras.str(crate::model::keys::RAW_CLOCK) {
        Some(k) => k == crate::model::keys::CLOCK_DLT,
        None => matches!(header.source, FormatId::Kpi | FormatId::Dlt),
    }
}

/// Writes KPI lines: `dlt-convert -a` style when the source has absolute
/// time (so times survive), bare lines otherwise.
pub struct KpiTextWriter<W: Write> {
    out: W,
    name: PathBuf,
    style: Style,
    grouper: Grouper,
    loss: LossReport,
    index: u64,
    mcnt: u8,
    ecu: String,
    app: String,
    ctx: String,
    line: Vec<u8>,
    payload_max: usize,
    tails: bool,
    tmsp_from_raw: bool,
    first_time: Option<Timestamp>,
}

impl<W: Write> KpiTextWriter<W> {
    pub fn new(
        out: W,
        name: PathBuf,
        header: &Header,
        opts: &crate::options::WriteOptions,
    ) -> KpiTextWriter<W> {
        let style = match opts.kpi_style.as_deref() {
            Some("bare") => Style::Bare,
            Some(_) => Style::Convert,
            None if header.time_base.is_absolute() => Style::Convert,
            None => Style::Bare,
        };
        let pad = |s: &str| -> String {
            let mut s: String = s.chars().take(4).collect();
            while s.len() < 4 {
                s.push('-');
            }
            s
        };
        KpiTextWriter {
            out,
            name,
            style,
            grouper: Grouper::new(),
            loss: LossReport::default(),
            index: 0,
            mcnt: 0,
            ecu: pad(opts
                .ecu
                .as_deref()
                .or(header.extras.str(X_ECU))
                .unwrap_or("ECU1")),
            app: pad(opts.app_id.as_deref().unwrap_or("PROC")),
            ctx: pad(opts.ctx_id.as_deref().unwrap_or("PROC")),
            line: Vec::with_capacity(2048),
            payload_max: opts.dlt_payload_max.unwrap_or(DEFAULT_PAYLOAD_MAX),
            // Bare lines carry no argument count to find a tail by, and
            // no libdlt message ever made them: tails only in -a lines.
            tails: opts.dlt_truncated_tails && style == Style::Convert,
            // DLT and KPI text sources carry tmsp (0.1 ms ticks) as their raw
            // clock; the recorder (source kpi too) carries a TSC.
            tmsp_from_raw: raw_clock_is_tmsp(header),
            first_time: None,
        }
    }

    fn io(&self, e: std::io::Error) -> Error {
        Error::io(&self.name, e)
    }

    fn message(&mut self, g: &Group, args: &[&[u8]]) -> Result<()> {
        self.line.clear();
        if self.style == Style::Convert {
            let t = g.time;
            let (y, mo, d) = civil_from_days(t.secs().div_euclid(86400));
            let sod = t.secs().rem_euclid(86400);
            let tmsp = if self.tmsp_from_raw {
                g.raw_clock.map(|r| r as u32)
            } else {
                let first = *self.first_time.get_or_insert(t);
                Some(((t.0 - first.0).max(0) / 100_000) as u32)
            };
            let tm = match tmsp {
                Some(v) => format!("{v:>10}"),
                None => "----------".into(),
            };
            write!(
                self.line,
                "{} {y:04}/{mo:02}/{d:02} {:02}:{:02}:{:02}.{:06} {tm} {:03} {} {} {} log info V {} [",
                self.index,
                sod / 3600,
                sod % 3600 / 60,
                sod % 60,
                t.subsec_nanos() / 1000,
                self.mcnt,
                self.ecu,
                self.app,
                self.ctx,
                args.len()
            )
            .map_err(|e| Error::io(&self.name, e))?;
        }
        for (i, a) in args.iter().enumerate() {
            if i > 0 {
                self.line.push(b' ');
            }
            // dlt-convert prints CR and LF as spaces; keep lines whole.
            self.line.extend(
                a.iter()
                    .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b }),
            );
        }
        if self.style == Style::Convert {
            self.line.push(b']');
        }
        self.line.push(b'\n');
        self.index += 1;
        self.mcnt = self.mcnt.wrapping_add(1);
        let line = std::mem::take(&mut self.line);
        let r = self.out.write_all(&line).map_err(|e| self.io(e));
        self.line = line;
        r
    }

    fn group(&mut self, g: Group) -> Result<()> {
        let kind = g.kind.as_bytes();
        self.message(&g, &[kind, b"BEG"])?;
        for r in pack(&g.datasets, self.payload_max) {
            let tail = if self.tails {
                tail_after(&g.datasets, &r, self.payload_max)
            } else {
                None
            };
            let mut args: Vec<&[u8]> = vec![kind];
            args.extend(g.datasets[r].iter().map(|d| d.as_slice()));
            args.extend(tail.as_deref());
            self.message(&g, &args)?;
        }
        self.message(&g, &[kind, b"END"])?;
        self.loss
            .wrote(&format!("{} datasets", g.kind), g.datasets.len() as u64);
        Ok(())
    }
}

impl<W: Write> KpiTextWriter<W> {
    pub fn write(&mut self, item: &Item) -> Result<()> {
        for g in self.grouper.item(item, &mut self.loss) {
            self.group(g)?;
        }
        Ok(())
    }
    pub fn close(&mut self) -> Result<LossReport> {
        for g in self.grouper.finish(&mut self.loss) {
            self.group(g)?;
        }
        self.out.flush().map_err(|e| self.io(e))?;
        Ok(std::mem::take(&mut self.loss))
    }
}

impl<W: Write + Send> TraceWriter for KpiTextWriter<W> {
    fn write_item(&mut self, item: &Item) -> Result<()> {
        self.write(item)
    }
    /// No group at all is an error: an empty KPI file is nothing a reader
    /// (ours or dlt-convert's) accepts.
    fn finish(mut self: Box<Self>) -> Result<LossReport> {
        let loss = self.close()?;
        if self.index == 0 {
            return Err(Error::nothing_to_write(
                "no process data for KPI lines",
                "it has no proc.* metrics and no process events \
                 (kpi NEW/STP/CHK, fork/exit, control/processes)",
            ));
        }
        Ok(loss)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::kpi::dataset::TRUNCATED_MARKER;

    /// Every type, every cut position: the arguments split back from the
    /// text dlt-convert prints (arguments joined by spaces) are the
    /// arguments of the message, truncated duplicate included.
    #[test]
    fn text_split_finds_the_truncated_duplicate_at_every_cut() {
        let cases: [(&str, &[&str], &str); 7] = [
            (
                "NEW",
                &[
                    "1;0;/sbin/init",
                    "14460;14454;proc with spaces; and;semicolons 1",
                ],
                "14466;0;perl-title; with spaces;and;semis 1",
            ),
            ("NEW", &["21;1;sleep 5"], "22;21;sleep 50 0"),
            (
                "CHK",
                &["20994;sleep", "20996;perl"],
                "20998;perl-title; with spaces;and;semis 126",
            ),
            ("CHK", &["7;a b 12", "8;c"], "9;d e 10;f"),
            (
                "ACT",
                &["14273;370;25380;668;16944326;0"],
                "1234567;4000;123456789;123456789;123456789012;0",
            ),
            (
                "IRQ",
                &["24;cpu0:1;cpu1:0;"],
                "31;cpu0:318104;cpu1:2;cpu2:3;cpu3:4;cpu4:5;cpu5:6;cpu6:7;cpu7:529828;cpu8:1;",
            ),
            ("STP", &["14402"], "1437112"),
        ];
        for (ty, before, next) in cases {
            for k in 0..next.len() {
                let mut dup = next.as_bytes()[..k].to_vec();
                dup.extend_from_slice(TRUNCATED_MARKER);
                let mut args: Vec<&[u8]> = vec![ty.as_bytes()];
                args.extend(before.iter().map(|d| d.as_bytes()));
                args.push(&dup);
                let text = args.join(&b' ');
                let (got, _) = split_payload(&text, Some(args.len() as u32)).unwrap();
                assert_eq!(
                    got,
                    args,
                    "{ty} cut after {k} bytes: {}",
                    String::from_utf8_lossy(&text)
                );
                // A message holding nothing but the duplicate.
                let alone = [ty.as_bytes(), &dup].join(&b' ');
                let (got, _) = split_payload(&alone, Some(2)).unwrap();
                assert_eq!(got, vec![ty.as_bytes(), &dup[..]]);
            }
        }
    }

    #[test]
    fn libdlt_diagnostic_lines() {
        let d = |s: &str| {
            libdlt_diagnostic(s.as_bytes()).map(|t| String::from_utf8_lossy(t).into_owned())
        };
        assert_eq!(
            d("[ 1051.734029]~DLT~31602~WARNING  ~Cannot read payload data from file of size 1366!").as_deref(),
            Some("Cannot read payload data from file of size 1366!")
        );
        assert_eq!(
            d("[  768.246477]~DLT~ 4626~INFO     ~Configured buffer size to [400 bytes]")
                .as_deref(),
            Some("Configured buffer size to [400 bytes]")
        );
        assert_eq!(d("[12172.239566]~DLT~19146~ERROR~x").as_deref(), Some("x"));
        for not in [
            "[ 1051.734029]~DLX~31602~WARNING  ~x",
            "[ 1051]~DLT~31602~WARNING  ~x",
            "[ 1051.734029]~DLT~~WARNING  ~x",
            "[ 1051.734029]~DLT~31602~  ~x",
            "0 2026/11/22 03:43:57.331662    5070923 000 ECU1 PROC PROC log info V 2 [IRQ BEG]",
            "IRQ BEG",
        ] {
            assert_eq!(d(not), None, "{not}");
        }
        assert_eq!(
            libdlt_kind(b"Cannot read extended header from file!"),
            Libdlt::ReadFailed
        );
        assert_eq!(
            libdlt_kind(b"Plausibility check failed. Complete message size too short! (-23)"),
            Libdlt::Stopped
        );
        assert_eq!(
            libdlt_kind(b"not enough minimum space to store data"),
            Libdlt::Other
        );
    }
}
