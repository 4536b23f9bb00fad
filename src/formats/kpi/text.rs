//! KPI text lines: bare dataset lines (`NEW 21226;1;/usr/bin/x`) and the
//! lines `dlt-convert -a` / `dlt-receive -a` print (spec §5, §9.2).

use super::assemble::Assembler;
use super::dataset::{Kind, TRUNCATED_MARKER};
use super::grouper::{pack, Group, Grouper, DEFAULT_PAYLOAD_MAX};
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

/// A truncated duplicate can be cut anywhere, even before its first `;`
/// (`1... <<Message truncated, too long>>`, or just the marker).
fn is_cut_dataset(rest: &[u8]) -> bool {
    let Some(prefix) = rest.strip_suffix(TRUNCATED_MARKER) else {
        return false;
    };
    let mut parts = prefix.splitn(2, |&b| b == b';');
    let a = parts.next().unwrap_or_default();
    let b = parts.next().unwrap_or_default();
    a.iter().all(u8::is_ascii_digit) && b.iter().all(u8::is_ascii_digit)
}

fn starts_new_dataset(kind: Kind, rest: &[u8]) -> bool {
    if is_cut_dataset(rest) {
        return true;
    }
    // A dataset boundary is a space followed by `\d+;` (CHK) or `\d+;-?\d+;` (NEW).
    let digits = |s: &[u8]| s.iter().take_while(|b| b.is_ascii_digit()).count();
    let n = digits(rest);
    if n == 0 || rest.get(n) != Some(&b';') {
        return false;
    }
    if kind == Kind::Chk {
        return true;
    }
    let r = &rest[n + 1..];
    let r = r.strip_prefix(b"-").unwrap_or(r);
    let m = digits(r);
    m > 0 && r.get(m) == Some(&b';')
}

/// Split a text payload (`TYPE ds ds …`) into arguments. Returns the
/// arguments and whether a command-line boundary had to be guessed.
pub fn split_payload(payload: &[u8]) -> Option<(Vec<&[u8]>, bool)> {
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
    let mut guessed = false;
    match kind {
        Kind::Stp | Kind::Act | Kind::Irq => {
            args.extend(rest.split(|&b| b == b' ').filter(|s| !s.is_empty()));
        }
        Kind::New | Kind::Chk => {
            let mut start = 0;
            for i in 0..rest.len() {
                if rest[i] == b' ' {
                    if starts_new_dataset(kind, &rest[i + 1..]) {
                        args.push(&rest[start..i]);
                        start = i + 1;
                    } else {
                        // A space inside a command line: the boundary is a guess.
                        guessed = true;
                    }
                }
            }
            args.push(&rest[start..]);
        }
    }
    Some((args, guessed))
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
}

impl KpiTextReader {
    pub fn new(
        mut src: Box<dyn BufRead>,
        file: PathBuf,
        opts: &ReadOptions,
    ) -> Result<KpiTextReader> {
        // Peek the first non-empty line for the style (without consuming).
        let style = {
            let buf = src.fill_buf().map_err(|e| Error::io(&file, e))?;
            let (mut offset, mut line_no) = (0u64, 1u64);
            let mut first = None;
            for l in buf.split(|&b| b == b'\n') {
                if !l.iter().all(|b| b.is_ascii_whitespace()) {
                    first = Some(l);
                    break;
                }
                offset += l.len() as u64 + 1;
                line_no += 1;
            }
            match first.and_then(|l| line_style(l.strip_suffix(b"\r").unwrap_or(l))) {
                Some(s) => s,
                None if buf.is_empty() => {
                    return Err(Error::format(Position::at(&file, 0, None), "empty input: no KPI lines"))
                }
                None => {
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
        })
    }

    /// Datasets per type so far.
    pub fn counts(&self) -> &BTreeMap<String, u64> {
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
        while line.last().is_some_and(|&b| b == b'\n' || b == b'\r') {
            line.pop();
        }
        let res = self.line(&line);
        self.buf = line;
        self.offset += n as u64;
        self.line_no += 1;
        res.map(|_| true)
    }

    fn line(&mut self, line: &[u8]) -> Result<()> {
        if line.iter().all(|b| b.is_ascii_whitespace()) {
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
        let Some((args, guessed)) = split_payload(payload) else {
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
        if let Err(e) = self.asm.message(&args, time, raw, &mut out) {
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
    fn native_counts(&self) -> Vec<(String, u64)> {
        Kind::ALL
            .iter()
            .map(|k| {
                let n = self.asm.counts().get(k.name()).copied().unwrap_or(0);
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
        Some(k) => k == "dlt-0.1ms",
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
            let mut args: Vec<&[u8]> = vec![kind];
            args.extend(g.datasets[r].iter().map(|d| d.as_slice()));
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

impl<W: Write> TraceWriter for KpiTextWriter<W> {
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
