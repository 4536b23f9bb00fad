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

/// A bound of a time window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TimeSpec {
    At(Timestamp),
    /// Nanoseconds after the first data item.
    After(i64),
}

impl TimeSpec {
    /// RFC 3339 (`2026-11-22T03:43:55Z`, fractions and offsets allowed),
    /// epoch seconds (`1795335421.5`), or `+DURATION` (`+10s`, `+1m30s`, `+250ms`).
    pub fn parse(s: &str) -> std::result::Result<TimeSpec, String> {
        if let Some(d) = s.strip_prefix('+') {
            return parse_duration(d).map(|ns| TimeSpec::After(ns as i64));
        }
        if s.contains('T') || (s.contains('-') && s.len() >= 10 && !s.starts_with('-')) {
            return parse_rfc3339(s).map(TimeSpec::At);
        }
        parse_epoch(s).map(TimeSpec::At)
    }
}

fn parse_epoch(s: &str) -> std::result::Result<Timestamp, String> {
    let bad = || format!("bad time {s:?}: want RFC 3339, epoch seconds or +DURATION");
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let (ip, fp) = body.split_once('.').unwrap_or((body, ""));
    if ip.is_empty() || !ip.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    if !fp.bytes().all(|b| b.is_ascii_digit()) || fp.len() > 9 {
        return Err(bad());
    }
    let sec: i64 = ip.parse().map_err(|_| bad())?;
    let mut frac = String::from(fp);
    while frac.len() < 9 {
        frac.push('0');
    }
    let ns: i64 = frac.parse().map_err(|_| bad())?;
    let total = sec
        .checked_mul(1_000_000_000)
        .and_then(|v| v.checked_add(ns))
        .ok_or_else(bad)?;
    Ok(Timestamp(if neg { -total } else { total }))
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

fn parse_rfc3339(s: &str) -> std::result::Result<Timestamp, String> {
    let bad = || format!("bad RFC 3339 time {s:?} (want e.g. 2026-11-22T03:43:55.5Z)");
    let b = s.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !(b[10] == b'T' || b[10] == b' ') {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| -> std::result::Result<i64, String> {
        s.get(r)
            .filter(|t| t.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|t| t.parse().ok())
            .ok_or_else(bad)
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return Err(bad());
    }
    let mut rest = &s[19..];
    let mut ns = 0i64;
    if let Some(r) = rest.strip_prefix('.') {
        let n = r.bytes().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 || n > 9 {
            return Err(bad());
        }
        let mut frac = r[..n].to_string();
        while frac.len() < 9 {
            frac.push('0');
        }
        ns = frac.parse().map_err(|_| bad())?;
        rest = &r[n..];
    }
    let offset_s: i64 = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && (rest.starts_with('+') || rest.starts_with('-')) => {
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            let oh = num(s.len() - 5..s.len() - 3)?;
            let om = num(s.len() - 2..s.len())?;
            sign * (oh * 3600 + om * 60)
        }
        _ => return Err(bad()),
    };
    let days = days_from_civil(y, mo as u32, d as u32);
    let secs = days * 86400 + h * 3600 + mi * 60 + se - offset_s;
    Ok(Timestamp(secs * 1_000_000_000 + ns))
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
            TimeSpec::After(90_000_000_000)
        );
        assert_eq!(
            TimeSpec::parse("+250ms").unwrap(),
            TimeSpec::After(250_000_000)
        );
        for bad in [
            "",
            "+",
            "+5x",
            "2026-13-01T00:00:00Z",
            "12:00",
            "1.2.3",
            "2026-11-22T03:43:55",
        ] {
            assert!(TimeSpec::parse(bad).is_err(), "{bad}");
        }
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
