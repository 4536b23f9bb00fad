//! Timestamps: nanoseconds since the Unix epoch, plus how to read them;
//! the time specs the CLI accepts and the civil-calendar arithmetic the
//! listings share.

use std::fmt;

/// Nanoseconds since the Unix epoch (or since an unknown origin when the
/// header's [`TimeBase`] says the time is relative or cycles-only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub const ZERO: Timestamp = Timestamp(0);
    pub fn from_secs_nanos(sec: i64, nsec: u32) -> Timestamp {
        Timestamp(
            sec.saturating_mul(1_000_000_000)
                .saturating_add(nsec as i64),
        )
    }
    pub fn from_secs_micros(sec: i64, usec: u32) -> Timestamp {
        Timestamp::from_secs_nanos(sec, usec.saturating_mul(1000))
    }
    pub fn secs(self) -> i64 {
        self.0.div_euclid(1_000_000_000)
    }
    pub fn subsec_nanos(self) -> u32 {
        self.0.rem_euclid(1_000_000_000) as u32
    }
    pub fn nanos(self) -> i64 {
        self.0
    }
}

impl fmt::Display for Timestamp {
    /// `SECONDS.NNNNNNNNN`, exact.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:09}", self.secs(), self.subsec_nanos())
    }
}

impl Timestamp {
    /// RFC 3339 in UTC with all nine fraction digits:
    /// `2026-11-22T03:43:55.000312859Z` (export formats' absolute times).
    pub fn write_rfc3339<W: fmt::Write + ?Sized>(self, w: &mut W) -> fmt::Result {
        let secs = self.secs();
        let (y, m, d) = civil_from_days(secs.div_euclid(86400));
        let sod = secs.rem_euclid(86400);
        write!(
            w,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:09}Z",
            sod / 3600,
            sod / 60 % 60,
            sod % 60,
            self.subsec_nanos()
        )
    }
    pub fn rfc3339(self) -> String {
        let mut s = String::with_capacity(30);
        let _ = self.write_rfc3339(&mut s);
        s
    }
}

/// How the timestamps of a stream relate to wall-clock time.
#[derive(Debug, Clone, PartialEq)]
pub enum TimeBase {
    /// Real epoch time.
    Absolute,
    /// Time since an unknown origin (bare KPI lines: 0 = first group).
    Relative { origin: String },
    /// Only a cycle counter is known; timestamps are cycles converted with
    /// `hz` (if given) and placed after `anchor` (if given), else at 0.
    Cycles {
        hz: Option<f64>,
        anchor: Option<Timestamp>,
    },
}

impl TimeBase {
    pub fn is_absolute(&self) -> bool {
        matches!(self, TimeBase::Absolute)
    }
    pub fn describe(&self) -> String {
        match self {
            TimeBase::Absolute => "absolute (epoch)".into(),
            TimeBase::Relative { origin } => format!("relative to {origin}"),
            TimeBase::Cycles { hz, anchor } => {
                let mut s = "cycles only".to_string();
                if let Some(hz) = hz {
                    s += &format!(", {hz} Hz");
                }
                if let Some(a) = anchor {
                    s += &format!(", anchored at {a}");
                }
                s
            }
        }
    }
}

// ------------------------------------------------------------ time specs

/// One bound of a time window (`--begin`, `--end`, `--at`), as written.
/// Relative forms are resolved against the trace's start and end
/// ([`TimeSpec::resolve`]); absolute ones are already epoch times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeSpec {
    /// An epoch time: RFC 3339 with a zone, without one (local time as `TZ`
    /// says, like PCP), or epoch seconds.
    At(Timestamp),
    /// `+DURATION`: nanoseconds after the start of the trace.
    FromStart(i64),
    /// `-DURATION`: nanoseconds before the end of the trace.
    FromEnd(i64),
    /// `@HH:MM[:SS[.frac]]`: nanoseconds after local midnight of the trace's
    /// first day (pmdumplog's form).
    TimeOfDay(i64),
}

const SPEC_FORMS: &str = "RFC 3339 (2026-11-22T03:43:55Z; no zone = local time), epoch seconds, \
+DURATION from the start, -DURATION from the end, or @HH:MM[:SS] on the first day";

impl TimeSpec {
    /// Parse any of the forms; errors name the accepted ones.
    pub fn parse(s: &str) -> std::result::Result<TimeSpec, String> {
        let s = s.trim();
        let dur = |d: &str| {
            parse_duration(d)
                .ok()
                .and_then(|ns| i64::try_from(ns).ok())
                .ok_or_else(|| format!("bad duration in {s:?} (want e.g. +10s, -1m30s, +250ms)"))
        };
        if let Some(d) = s.strip_prefix('+') {
            return dur(d).map(TimeSpec::FromStart);
        }
        if let Some(d) = s.strip_prefix('-') {
            return dur(d).map(TimeSpec::FromEnd);
        }
        if let Some(t) = s.strip_prefix('@') {
            return parse_time_of_day(t)
                .map(TimeSpec::TimeOfDay)
                .ok_or_else(|| {
                    format!("bad time of day {s:?} (want @HH:MM, @HH:MM:SS or @HH:MM:SS.frac)")
                });
        }
        let b = s.as_bytes();
        if b.len() >= 10 && b[4] == b'-' && b[7] == b'-' {
            return parse_rfc3339(s).map(TimeSpec::At);
        }
        parse_epoch(s)
            .map(TimeSpec::At)
            .map_err(|_| format!("bad time {s:?}: want {SPEC_FORMS}"))
    }

    /// Parse a time that needs no trace to resolve (`--tsc-anchor`).
    pub fn parse_absolute(s: &str) -> std::result::Result<Timestamp, String> {
        match TimeSpec::parse(s)? {
            TimeSpec::At(t) => Ok(t),
            _ => Err(format!(
                "{s:?}: an absolute time is needed here (RFC 3339 or epoch seconds)"
            )),
        }
    }

    pub fn is_absolute(self) -> bool {
        matches!(self, TimeSpec::At(_))
    }

    /// The epoch time this spec names in a trace from `start` to `end`.
    /// `None` when the spec needs a bound that is not known.
    pub fn resolve(self, start: Option<Timestamp>, end: Option<Timestamp>) -> Option<Timestamp> {
        match self {
            TimeSpec::At(t) => Some(t),
            TimeSpec::FromStart(ns) => Some(Timestamp(start?.0.saturating_add(ns))),
            TimeSpec::FromEnd(ns) => Some(Timestamp(end?.0.saturating_sub(ns))),
            TimeSpec::TimeOfDay(ns) => {
                let s = start?;
                let (y, m, d, _) = local_civil(s.secs())?;
                let midnight = local_to_epoch(y, m, d, 0, 0, 0)?;
                Some(Timestamp(
                    midnight.saturating_mul(1_000_000_000).saturating_add(ns),
                ))
            }
        }
    }
}

impl fmt::Display for TimeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dur = |ns: i64| {
            let frac = format!("{:09}", ns % 1_000_000_000);
            let frac = frac.trim_end_matches('0');
            if frac.is_empty() {
                format!("{}s", ns / 1_000_000_000)
            } else {
                format!("{}.{frac}s", ns / 1_000_000_000)
            }
        };
        match *self {
            TimeSpec::At(t) => write!(f, "{t}"),
            TimeSpec::FromStart(ns) => write!(f, "+{}", dur(ns)),
            TimeSpec::FromEnd(ns) => write!(f, "-{}", dur(ns)),
            TimeSpec::TimeOfDay(ns) => {
                let s = ns / 1_000_000_000;
                write!(
                    f,
                    "@{:02}:{:02}:{:02}.{:09}",
                    s / 3600,
                    s / 60 % 60,
                    s % 60,
                    ns % 1_000_000_000
                )
            }
        }
    }
}

/// A time window `[begin, end]` as given; either bound may be open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeWindow {
    pub begin: Option<TimeSpec>,
    pub end: Option<TimeSpec>,
}

/// A window resolved to epoch times (open bounds stay `None`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bounds {
    pub begin: Option<Timestamp>,
    pub end: Option<Timestamp>,
}

impl Bounds {
    pub fn contains(&self, t: Timestamp) -> bool {
        self.begin.is_none_or(|b| t >= b) && self.end.is_none_or(|e| t <= e)
    }
    pub fn is_open(&self) -> bool {
        self.begin.is_none() && self.end.is_none()
    }
}

impl TimeWindow {
    pub fn new(begin: Option<TimeSpec>, end: Option<TimeSpec>) -> TimeWindow {
        TimeWindow { begin, end }
    }
    pub fn is_open(&self) -> bool {
        self.begin.is_none() && self.end.is_none()
    }
    fn specs(&self) -> impl Iterator<Item = TimeSpec> {
        self.begin.into_iter().chain(self.end)
    }
    /// Some bound counts from the end of the trace.
    pub fn needs_end(&self) -> bool {
        self.specs().any(|s| matches!(s, TimeSpec::FromEnd(_)))
    }
    /// Some bound counts from the start of the trace (or its first day).
    pub fn needs_start(&self) -> bool {
        self.specs()
            .any(|s| matches!(s, TimeSpec::FromStart(_) | TimeSpec::TimeOfDay(_)))
    }

    /// `--begin` after `--end` is an error wherever it can be seen without
    /// the trace: both absolute, both from the start, both from the end,
    /// both times of day.
    pub fn check(&self) -> std::result::Result<(), String> {
        let (Some(b), Some(e)) = (self.begin, self.end) else {
            return Ok(());
        };
        let after = match (b, e) {
            (TimeSpec::At(x), TimeSpec::At(y)) => x > y,
            (TimeSpec::FromStart(x), TimeSpec::FromStart(y)) => x > y,
            (TimeSpec::FromEnd(x), TimeSpec::FromEnd(y)) => x < y,
            (TimeSpec::TimeOfDay(x), TimeSpec::TimeOfDay(y)) => x > y,
            _ => false,
        };
        if after {
            return Err(format!("--begin {b} is after --end {e}"));
        }
        Ok(())
    }

    /// Resolve against the trace's start and end; errors when a needed
    /// bound is unknown or when begin comes after end.
    pub fn resolve(
        &self,
        start: Option<Timestamp>,
        end: Option<Timestamp>,
    ) -> std::result::Result<Bounds, String> {
        self.check()?;
        let one = |s: Option<TimeSpec>| -> std::result::Result<Option<Timestamp>, String> {
            let Some(s) = s else { return Ok(None) };
            s.resolve(start, end).map(Some).ok_or_else(|| match s {
                TimeSpec::FromEnd(_) => format!("{s}: the end of the trace is not known"),
                _ => format!("{s}: the start of the trace is not known (it has no data)"),
            })
        };
        let b = Bounds {
            begin: one(self.begin)?,
            end: one(self.end)?,
        };
        if let (Some(x), Some(y)) = (b.begin, b.end) {
            if x > y {
                return Err(format!(
                    "--begin {} ({x}) is after --end {} ({y})",
                    self.begin.map(|s| s.to_string()).unwrap_or_default(),
                    self.end.map(|s| s.to_string()).unwrap_or_default()
                ));
            }
        }
        Ok(b)
    }
}

/// A window applied to a stream: resolved as soon as the start is known
/// (given, or the first data item's time).
#[derive(Debug, Clone)]
pub struct WindowClock {
    window: TimeWindow,
    end: Option<Timestamp>,
    bounds: Option<Bounds>,
}

impl WindowClock {
    /// `start`/`end`: the trace's, where known. A bound counted from the end
    /// needs `end`; one counted from the start waits for the first item.
    pub fn new(
        window: TimeWindow,
        start: Option<Timestamp>,
        end: Option<Timestamp>,
    ) -> std::result::Result<WindowClock, String> {
        window.check()?;
        if window.needs_end() && end.is_none() {
            return Err(
                "a time counted from the end (-DURATION) needs the trace's end, which this input cannot give (stdin?)"
                    .into(),
            );
        }
        let mut c = WindowClock {
            window,
            end,
            bounds: None,
        };
        if let Some(s) = start {
            c.bounds = Some(window.resolve(Some(s), end)?);
        } else if !window.needs_start() {
            c.bounds = Some(window.resolve(None, end)?);
        }
        Ok(c)
    }
    /// Is time `t` of a data item inside? The first call fixes the start.
    pub fn contains(&mut self, t: Timestamp) -> std::result::Result<bool, String> {
        let b = match self.bounds {
            Some(b) => b,
            None => {
                let b = self.window.resolve(Some(t), self.end)?;
                self.bounds = Some(b);
                b
            }
        };
        Ok(b.contains(t))
    }
    pub fn bounds(&self) -> Option<Bounds> {
        self.bounds
    }
}

fn parse_time_of_day(s: &str) -> Option<i64> {
    let mut parts = s.splitn(3, ':');
    let h: i64 = digits(parts.next()?)?;
    let m: i64 = digits(parts.next()?)?;
    let (sec, ns) = match parts.next() {
        None => (0, 0),
        Some(x) => {
            let (ip, fp) = x.split_once('.').unwrap_or((x, ""));
            (digits(ip)?, frac_ns(fp)?)
        }
    };
    if h > 23 || m > 59 || sec > 60 {
        return None;
    }
    Some((h * 3600 + m * 60 + sec) * 1_000_000_000 + ns)
}

fn digits(s: &str) -> Option<i64> {
    if s.is_empty() || s.len() > 18 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Nanoseconds of a decimal fraction's digits (up to 9).
fn frac_ns(fp: &str) -> Option<i64> {
    if fp.len() > 9 || !fp.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut frac = String::from(fp);
    while frac.len() < 9 {
        frac.push('0');
    }
    frac.parse().ok()
}

fn parse_epoch(s: &str) -> std::result::Result<Timestamp, String> {
    let bad = || format!("bad epoch time {s:?}");
    let (ip, fp) = s.split_once('.').unwrap_or((s, ""));
    let sec = digits(ip).ok_or_else(bad)?;
    let ns = frac_ns(fp).ok_or_else(bad)?;
    sec.checked_mul(1_000_000_000)
        .and_then(|v| v.checked_add(ns))
        .map(Timestamp)
        .ok_or_else(bad)
}

// ------------------------------------------------------------ local time

extern "C" {
    fn tzset();
}

/// Local civil time of epoch seconds as `TZ` says: (year, month, day,
/// seconds into the day).
pub fn local_civil(secs: i64) -> Option<(i64, u32, u32, i64)> {
    let t = libc::time_t::try_from(secs).ok()?;
    // SAFETY: tzset reads TZ; tm is plain data that localtime_r fills in.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let ok = unsafe {
        tzset();
        !libc::localtime_r(&t, &mut tm).is_null()
    };
    ok.then(|| {
        (
            tm.tm_year as i64 + 1900,
            (tm.tm_mon + 1) as u32,
            tm.tm_mday as u32,
            (tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec) as i64,
        )
    })
}

/// Offset of local time from UTC at epoch second `secs`, in seconds.
pub fn local_offset(secs: i64) -> Option<i64> {
    let (y, m, d, sod) = local_civil(secs)?;
    Some(days_from_civil(y, m, d) * 86400 + sod - secs)
}

/// Epoch seconds of a local civil time (libc mktime, daylight saving
/// decided by the zone rules).
pub fn local_to_epoch(y: i64, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> Option<i64> {
    // SAFETY: tm is plain data; mktime reads and normalises it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    tm.tm_year = i32::try_from(y - 1900).ok()?;
    tm.tm_mon = mo as i32 - 1;
    tm.tm_mday = d as i32;
    tm.tm_hour = h as i32;
    tm.tm_min = mi as i32;
    tm.tm_sec = s as i32;
    tm.tm_isdst = -1;
    let t = unsafe {
        tzset();
        libc::mktime(&mut tm)
    };
    // -1 is an error (and 1969-12-31T23:59:59, a time no trace asks for).
    if t == -1 {
        return None;
    }
    Some(t as i64)
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// (year, month, day) of days since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `YYYY-MM-DD[(T| )HH:MM[:SS[.frac]]][Z|±HH:MM]`; no zone = local time.
fn parse_rfc3339(s: &str) -> std::result::Result<Timestamp, String> {
    let bad = || {
        format!(
            "bad RFC 3339 time {s:?} (want e.g. 2026-11-22T03:43:55.5Z, or no zone for local time)"
        )
    };
    let num = |r: std::ops::Range<usize>| -> std::result::Result<i64, String> {
        s.get(r)
            .filter(|t| t.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|t| t.parse().ok())
            .ok_or_else(bad)
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let b = s.as_bytes();
    let (mut h, mut mi, mut se, mut ns) = (0, 0, 0, 0i64);
    let mut rest = &s[10..];
    if !rest.is_empty() {
        if !(b[10] == b'T' || b[10] == b't' || b[10] == b' ') || s.len() < 16 || b[13] != b':' {
            return Err(bad());
        }
        h = num(11..13)?;
        mi = num(14..16)?;
        rest = &s[16..];
        if let Some(r) = rest.strip_prefix(':') {
            se = num(17..19)?;
            rest = &r[2.min(r.len())..];
            if let Some(r) = rest.strip_prefix('.') {
                let n = r.bytes().take_while(|c| c.is_ascii_digit()).count();
                ns = frac_ns(&r[..n]).filter(|_| n > 0).ok_or_else(bad)?;
                rest = &r[n..];
            }
        }
    }
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return Err(bad());
    }
    let offset_s: Option<i64> = match rest {
        "" => None,
        "Z" | "z" => Some(0),
        _ if rest.len() == 6
            && (rest.starts_with('+') || rest.starts_with('-'))
            && &rest[3..4] == ":" =>
        {
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            let oh = num(s.len() - 5..s.len() - 3)?;
            let om = num(s.len() - 2..s.len())?;
            Some(sign * (oh * 3600 + om * 60))
        }
        _ => return Err(bad()),
    };
    let secs = match offset_s {
        Some(off) => {
            days_from_civil(y, mo as u32, d as u32) * 86400 + h * 3600 + mi * 60 + se - off
        }
        // No zone: local time, as PCP reads such times.
        None => local_to_epoch(y, mo as u32, d as u32, h as u32, mi as u32, se as u32)
            .ok_or_else(|| format!("{s:?}: not a valid local time"))?,
    };
    secs.checked_mul(1_000_000_000)
        .and_then(|v| v.checked_add(ns))
        .map(Timestamp)
        .ok_or_else(bad)
}

/// `10s`, `1.5s`, `250ms`, `2m`, `1h30m`, `500us`, `100ns` → nanoseconds.
pub fn parse_duration(s: &str) -> std::result::Result<u64, String> {
    let bad = || format!("bad duration {s:?} (want e.g. 10s, 250ms, 1m30s)");
    if s.is_empty() {
        return Err(bad());
    }
    let mut total: f64 = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let n = rest
            .bytes()
            .take_while(|c| c.is_ascii_digit() || *c == b'.')
            .count();
        if n == 0 {
            return Err(bad());
        }
        let v: f64 = rest[..n].parse().map_err(|_| bad())?;
        rest = &rest[n..];
        let u = rest.bytes().take_while(|c| c.is_ascii_alphabetic()).count();
        let mult = match &rest[..u] {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" | "" => 1e9,
            "m" | "min" => 60e9,
            "h" => 3600e9,
            _ => return Err(bad()),
        };
        rest = &rest[u..];
        total += v * mult;
    }
    if !total.is_finite() || !(0.0..=1e19).contains(&total) {
        return Err(bad());
    }
    Ok(total.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_specs() {
        assert_eq!(
            TimeSpec::parse("2026-11-22T03:43:55Z").unwrap(),
            TimeSpec::At(Timestamp(1_795_319_035_000_000_000))
        );
        assert_eq!(
            TimeSpec::parse("2026-11-22T04:43:55.5+01:00").unwrap(),
            TimeSpec::At(Timestamp(1_795_319_035_500_000_000))
        );
        assert_eq!(
            TimeSpec::parse("1795319035.25").unwrap(),
            TimeSpec::At(Timestamp(1_795_319_035_250_000_000))
        );
        assert_eq!(
            TimeSpec::parse("+1m30s").unwrap(),
            TimeSpec::FromStart(90_000_000_000)
        );
        assert_eq!(
            TimeSpec::parse("+250ms").unwrap(),
            TimeSpec::FromStart(250_000_000)
        );
        assert_eq!(
            TimeSpec::parse("-2s").unwrap(),
            TimeSpec::FromEnd(2_000_000_000)
        );
        assert_eq!(
            TimeSpec::parse("@03:45:16.5").unwrap(),
            TimeSpec::TimeOfDay((3 * 3600 + 45 * 60 + 16) * 1_000_000_000 + 500_000_000)
        );
        assert_eq!(
            TimeSpec::parse("@23:59").unwrap(),
            TimeSpec::TimeOfDay((23 * 3600 + 59 * 60) * 1_000_000_000)
        );
        for bad in [
            "",
            "+",
            "-",
            "+5x",
            "2026-13-01T00:00:00Z",
            "12:00",
            "1.2.3",
            "@24:00",
            "@12",
            "@12:60",
            "2026-11-22T03:43:55+0100",
            "2026-11-22X03:43:55Z",
        ] {
            assert!(TimeSpec::parse(bad).is_err(), "{bad}");
        }
    }

    /// The same instant with and without a zone differs exactly by the
    /// local offset libc reports for it, whatever `TZ` is.
    #[test]
    fn zoneless_times_are_local() {
        let z = TimeSpec::parse("2026-07-01T12:00:00Z").unwrap();
        let l = TimeSpec::parse("2026-07-01T12:00:00").unwrap();
        let (TimeSpec::At(z), TimeSpec::At(l)) = (z, l) else {
            panic!("absolute")
        };
        let off = local_offset(l.secs()).unwrap();
        assert_eq!(z.0 - l.0, off * 1_000_000_000);
        let TimeSpec::At(d) = TimeSpec::parse("2026-07-01").unwrap() else {
            panic!("absolute")
        };
        assert_eq!(local_civil(d.secs()).unwrap(), (2026, 7, 1, 0));
    }

    #[test]
    fn windows_resolve_and_refuse_begin_after_end() {
        let p = |s| TimeSpec::parse(s).unwrap();
        let w = |b, e| TimeWindow::new(Some(p(b)), Some(p(e)));
        assert!(w("+5s", "+2s").check().is_err());
        assert!(w("-2s", "-5s").check().is_err());
        assert!(w("@10:00", "@09:00").check().is_err());
        assert!(w("100", "50").check().is_err());
        assert!(w("+2s", "+5s").check().is_ok());
        assert!(w("-5s", "-2s").check().is_ok());
        let (s, e) = (Timestamp(100_000_000_000), Timestamp(110_000_000_000));
        let b = w("+2s", "-3s").resolve(Some(s), Some(e)).unwrap();
        assert_eq!(b.begin, Some(Timestamp(102_000_000_000)));
        assert_eq!(b.end, Some(Timestamp(107_000_000_000)));
        // Mixed forms are compared once resolved.
        assert!(w("+8s", "-3s").resolve(Some(s), Some(e)).is_err());
        // A bound that needs the end cannot be resolved without it.
        assert!(w("+1s", "-1s").resolve(Some(s), None).is_err());
        assert!(TimeWindow::new(None, Some(p("-1s"))).needs_end());
        assert!(!w("+1s", "100").needs_end());
    }

    #[test]
    fn time_of_day_is_on_the_first_local_day() {
        let start = Timestamp::from_secs_nanos(1_795_319_114, 676_543_893);
        let (y, m, d, _) = local_civil(start.secs()).unwrap();
        let midnight = local_to_epoch(y, m, d, 0, 0, 0).unwrap();
        let t = TimeSpec::parse("@01:02:03").unwrap();
        assert_eq!(
            t.resolve(Some(start), None),
            Some(Timestamp((midnight + 3723) * 1_000_000_000))
        );
    }

    #[test]
    fn civil_dates_round_trip() {
        for days in [-719_468i64, -1, 0, 1, 10_957, 20_779, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(20_779), (2026, 11, 22));
    }

    #[test]
    fn rfc3339_text_reads_back() {
        let t = Timestamp(1_795_319_035_000_312_859);
        assert_eq!(t.rfc3339(), "2026-11-22T03:43:55.000312859Z");
        assert_eq!(TimeSpec::parse(&t.rfc3339()).unwrap(), TimeSpec::At(t));
        assert_eq!(Timestamp(-1).rfc3339(), "1969-12-31T23:59:59.999999999Z");
    }
}
