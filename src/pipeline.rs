//! Operations shared by the subcommands: open with detection, time windows,
//! convert, the common listing and `info`.

use crate::error::{Diagnostic, Error, Result, Severity};
use crate::formats::{self, Format};
use crate::input::Input;
use crate::model::*;
use crate::options::WriteOptions;
use crate::output::{OutTarget, Staged};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Resolve the format of an input: `--from` wins, else detection.
pub fn format_of(input: &Input, from: Option<FormatId>) -> Result<&'static dyn Format> {
    match from {
        Some(id) => Ok(formats::get(id)),
        None => formats::detect(input),
    }
}

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

/// A reader that keeps only data items inside `[begin, end]`. Definitions
/// always pass, so writers still see every definition before use.
pub struct Window {
    inner: Box<dyn TraceReader>,
    begin: Option<TimeSpec>,
    end: Option<TimeSpec>,
    first: Option<Timestamp>,
}

impl Window {
    pub fn wrap(
        inner: Box<dyn TraceReader>,
        begin: Option<TimeSpec>,
        end: Option<TimeSpec>,
    ) -> Box<dyn TraceReader> {
        if begin.is_none() && end.is_none() {
            return inner;
        }
        Box::new(Window {
            inner,
            begin,
            end,
            first: None,
        })
    }
    fn resolve(&self, t: TimeSpec) -> Timestamp {
        match t {
            TimeSpec::At(ts) => ts,
            TimeSpec::After(ns) => Timestamp(self.first.unwrap_or_default().0.saturating_add(ns)),
        }
    }
}

impl TraceReader for Window {
    fn header(&self) -> &Header {
        self.inner.header()
    }
    fn next_item(&mut self) -> Result<Option<Item>> {
        loop {
            let Some(item) = self.inner.next_item()? else {
                return Ok(None);
            };
            if !item.is_data() {
                return Ok(Some(item));
            }
            let t = item.time().unwrap_or_default();
            if self.first.is_none() {
                self.first = Some(t);
            }
            if let Some(b) = self.begin {
                if t < self.resolve(b) {
                    continue;
                }
            }
            if let Some(e) = self.end {
                if t > self.resolve(e) {
                    continue;
                }
            }
            return Ok(Some(item));
        }
    }
    fn diagnostics(&self) -> &[Diagnostic] {
        self.inner.diagnostics()
    }
    fn native_counts(&self) -> Vec<(String, u64)> {
        self.inner.native_counts()
    }
}

/// What one conversion did.
#[derive(Debug, Default)]
pub struct ConvertOutcome {
    pub loss: LossReport,
    pub diagnostics: Vec<Diagnostic>,
    pub outputs: Vec<PathBuf>,
}

impl ConvertOutcome {
    /// Salvaged input or dropped data: exit code 1.
    pub fn lossy(&self) -> bool {
        self.loss.has_drops()
            || self
                .diagnostics
                .iter()
                .any(|d| d.severity == Severity::Salvaged)
    }
}

/// Where `convert` writes.
#[derive(Debug, Clone)]
pub enum Dest<'a> {
    Path { path: &'a Path, force: bool },
    Stdout,
}

/// Stream `reader` into a new output of format `to`.
pub fn convert(
    reader: Box<dyn TraceReader>,
    inputs: &[PathBuf],
    to: &dyn Format,
    dest: Dest<'_>,
    wopts: &WriteOptions,
) -> Result<ConvertOutcome> {
    let caps = to.caps();
    if !caps.write {
        return Err(formats::not_implemented(to.id(), "writing"));
    }
    let mut reader = reader;
    let header = reader.header().clone();
    let mut out = ConvertOutcome::default();
    // Metric-only targets take events as per-type counters.
    let mut adapter_loss = None;
    if matches!(to.id(), FormatId::Pcp | FormatId::Mmv) {
        let ec = EventCounters::wrap(reader);
        adapter_loss = Some(ec.loss.clone());
        reader = Box::new(ec);
    }
    match dest {
        Dest::Stdout => {
            if !caps.text_output {
                return Err(Error::Usage(format!(
                    "the {} format is binary: give -o FILE, not stdout",
                    to.id()
                )));
            }
            let mut w = to.create(&OutTarget::Stdout, &header, wopts)?;
            while let Some(item) = reader.next_item()? {
                w.write_item(&item)?;
            }
            out.loss = w.finish()?;
        }
        Dest::Path { path, force } => {
            let staged = Staged::new(path, inputs, force)?;
            let mut w = to.create(&OutTarget::Path(staged.path()), &header, wopts)?;
            while let Some(item) = reader.next_item()? {
                w.write_item(&item)?;
            }
            out.loss = w.finish()?;
            if wopts.strict && out.loss.has_loss() {
                return Err(Error::Strict(format!(
                    "nothing written; the {} writer would lose data:\n{}",
                    to.id(),
                    out.loss
                )));
            }
            out.outputs = staged.commit()?;
        }
    }
    if let Some(l) = adapter_loss {
        out.loss.merge(&l.borrow());
    }
    out.diagnostics = reader.diagnostics().to_vec();
    Ok(out)
}

// ------------------------------------------------------------ common listing

fn fmt_value(v: &Value, out: &mut String) {
    use std::fmt::Write as _;
    match v {
        Value::I64(x) => write!(out, "{x}").unwrap(),
        Value::U64(x) => write!(out, "{x}").unwrap(),
        Value::F32(x) => write!(out, "{x:?}").unwrap(),
        Value::F64(x) => write!(out, "{x:?}").unwrap(),
        Value::Enum(x) => write!(out, "{x}").unwrap(),
        Value::Str(s) => write!(out, "{s:?}").unwrap(),
        Value::Bytes(b) => {
            out.push_str("0x");
            for x in b {
                write!(out, "{x:02x}").unwrap();
            }
        }
        Value::List(xs) | Value::Struct(xs) | Value::Union(xs) => {
            out.push(if matches!(v, Value::List(_)) {
                '['
            } else {
                '{'
            });
            for (i, x) in xs.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                fmt_value(x, out);
            }
            out.push(if matches!(v, Value::List(_)) {
                ']'
            } else {
                '}'
            });
        }
        Value::Events(recs) => write!(out, "<{} event records>", recs.len()).unwrap(),
    }
}

/// Render one value as the common listing does.
pub fn value_text(v: &Value) -> String {
    let mut s = String::new();
    fmt_value(v, &mut s);
    s
}

/// The common listing: one line per item, the same for every format.
pub fn dump_common(reader: &mut dyn TraceReader, out: &mut dyn Write) -> Result<()> {
    let io = |e| Error::io("<stdout>", e);
    let h = reader.header().clone();
    writeln!(
        out,
        "# source {} version {} time {}",
        h.source,
        h.version,
        h.time_base.describe()
    )
    .map_err(io)?;
    if let Some(host) = &h.host {
        writeln!(out, "# host {host}").map_err(io)?;
    }
    for (k, v) in &h.system {
        writeln!(out, "# system {k}={v}").map_err(io)?;
    }
    for (k, v) in &h.extras.0 {
        writeln!(out, "# extra {k}={v}").map_err(io)?;
    }
    let mut types: BTreeMap<EventTypeId, std::sync::Arc<EventType>> = BTreeMap::new();
    let mut names: BTreeMap<MetricId, String> = BTreeMap::new();
    let mut line = String::with_capacity(256);
    while let Some(item) = reader.next_item()? {
        line.clear();
        use std::fmt::Write as _;
        match &item {
            Item::EventType(t) => {
                write!(line, "type {} {}.{} (", t.id, t.category, t.name).unwrap();
                for (i, f) in t.fields.iter().enumerate() {
                    if i > 0 {
                        line.push_str(", ");
                    }
                    write!(line, "{}: {}", f.name, f.ty.kind_name()).unwrap();
                }
                line.push(')');
                types.insert(t.id, t.clone());
            }
            Item::Metric(m) => {
                write!(
                    line,
                    "metric {} {} {:?} {:?} units=0x{:08x}",
                    m.id,
                    m.names.join(","),
                    m.vtype,
                    m.sem,
                    m.units.to_word()
                )
                .unwrap();
                if let Some(i) = m.indom {
                    write!(line, " indom={i}").unwrap();
                }
                names.insert(m.id, m.name().to_string());
            }
            Item::Indom(u) => {
                write!(
                    line,
                    "{} indom {} {:?} {} instances",
                    u.time,
                    u.id,
                    u.kind,
                    u.instances.len()
                )
                .unwrap();
                for i in &u.instances {
                    write!(line, " [{} {:?}]", i.id, i.name).unwrap();
                }
                for r in &u.removed {
                    write!(line, " -{r}").unwrap();
                }
            }
            Item::Help(hp) => write!(
                line,
                "help {:?} oneline={} {:?}",
                hp.target, hp.oneline, hp.text
            )
            .unwrap(),
            Item::Labels(l) => {
                write!(line, "labels {:?} inst={} {}", l.target, l.inst, l.json).unwrap()
            }
            Item::Event(e) => {
                let (cat, name) = types
                    .get(&e.type_id)
                    .map(|t| (t.category.as_str(), t.name.as_str()))
                    .unwrap_or(("?", "?"));
                write!(line, "{} event {cat}.{name}", e.time).unwrap();
                if let Some(c) = e.cpu {
                    write!(line, " cpu={c}").unwrap();
                }
                if let Some(s) = &e.stream {
                    write!(line, " stream={s}").unwrap();
                }
                let t = types.get(&e.type_id);
                for (i, v) in e.fields.iter().enumerate() {
                    let fname = t
                        .and_then(|t| t.fields.get(i))
                        .map(|f| f.name.as_str())
                        .unwrap_or("?");
                    write!(line, " {fname}=").unwrap();
                    fmt_value(v, &mut line);
                }
            }
            Item::Sample(s) => {
                write!(line, "{} sample", s.time).unwrap();
                for mv in &s.metrics {
                    let n = names.get(&mv.metric).map(String::as_str).unwrap_or("?");
                    match &mv.values {
                        Err(code) => write!(line, " {n}=ERR({code})").unwrap(),
                        Ok(vals) => {
                            for (inst, v) in vals {
                                if *inst == PM_IN_NULL {
                                    write!(line, " {n}=").unwrap();
                                } else {
                                    write!(line, " {n}[{inst}]=").unwrap();
                                }
                                fmt_value(v, &mut line);
                            }
                        }
                    }
                }
            }
            Item::Mark(m) => write!(line, "{} mark", m.time).unwrap(),
            Item::Annotation(a) => write!(line, "{} note {:?}", a.time, a.text).unwrap(),
        }
        line.push('\n');
        out.write_all(line.as_bytes()).map_err(io)?;
    }
    Ok(())
}

/// Counts for `polytrace info`.
#[derive(Debug, Default)]
pub struct Info {
    pub items: BTreeMap<&'static str, u64>,
    pub events_by_type: BTreeMap<String, u64>,
    pub values_by_metric: BTreeMap<String, u64>,
    pub first: Option<Timestamp>,
    pub last: Option<Timestamp>,
}

pub fn info(reader: &mut dyn TraceReader) -> Result<Info> {
    let mut info = Info::default();
    let mut types: BTreeMap<EventTypeId, String> = BTreeMap::new();
    let mut names: BTreeMap<MetricId, String> = BTreeMap::new();
    while let Some(item) = reader.next_item()? {
        let kind = match &item {
            Item::EventType(t) => {
                types.insert(t.id, format!("{}.{}", t.category, t.name));
                "event types"
            }
            Item::Metric(m) => {
                names.insert(m.id, m.name().to_string());
                "metrics"
            }
            Item::Indom(_) => "indom updates",
            Item::Help(_) => "help texts",
            Item::Labels(_) => "label sets",
            Item::Event(e) => {
                let n = types.get(&e.type_id).cloned().unwrap_or_else(|| "?".into());
                *info.events_by_type.entry(n).or_default() += 1;
                "events"
            }
            Item::Sample(s) => {
                for mv in &s.metrics {
                    let n = names.get(&mv.metric).cloned().unwrap_or_else(|| "?".into());
                    let k = mv.values.as_ref().map(|v| v.len() as u64).unwrap_or(0);
                    *info.values_by_metric.entry(n).or_default() += k;
                }
                "samples"
            }
            Item::Mark(_) => "marks",
            Item::Annotation(_) => "annotations",
        };
        *info.items.entry(kind).or_default() += 1;
        if let Some(t) = item.time().filter(|_| item.is_data()) {
            info.first = Some(info.first.map_or(t, |f| f.min(t)));
            info.last = Some(info.last.map_or(t, |l| l.max(t)));
        }
    }
    Ok(info)
}

// ------------------------------------------------------- events → counters

/// PCP domain of the `events.<category>.<name>` counters (private-use).
pub const EVENT_COUNTER_DOMAIN: u32 = 453;

/// For metrics-only writers (PCP archive, MMV): each event type becomes a
/// counter `events.<category>.<name>` and each event a sample of its running
/// count (design/model.md §3). The events themselves are consumed; the
/// adapter's own loss report says so.
pub struct EventCounters {
    inner: Box<dyn TraceReader>,
    counters: BTreeMap<EventTypeId, (MetricId, u64)>,
    names: BTreeMap<EventTypeId, String>,
    queue: std::collections::VecDeque<Item>,
    used_names: std::collections::BTreeSet<String>,
    /// What the adaptation degraded; shared so `convert` can report it.
    pub loss: std::rc::Rc<std::cell::RefCell<LossReport>>,
}

/// A PCP-acceptable metric name component: letters, digits, `_`.
fn pcp_name_part(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !out.starts_with(|c: char| c.is_ascii_alphabetic()) {
        out.insert(0, 'e');
    }
    out
}

impl EventCounters {
    pub fn wrap(inner: Box<dyn TraceReader>) -> EventCounters {
        EventCounters {
            inner,
            counters: BTreeMap::new(),
            names: BTreeMap::new(),
            queue: Default::default(),
            used_names: Default::default(),
            loss: Default::default(),
        }
    }
}

impl TraceReader for EventCounters {
    fn header(&self) -> &Header {
        self.inner.header()
    }
    fn next_item(&mut self) -> Result<Option<Item>> {
        loop {
            if let Some(it) = self.queue.pop_front() {
                return Ok(Some(it));
            }
            let Some(item) = self.inner.next_item()? else {
                return Ok(None);
            };
            match item {
                Item::EventType(t) => {
                    let mut name = format!(
                        "events.{}.{}",
                        pcp_name_part(&t.category),
                        pcp_name_part(&t.name)
                    );
                    // A second facility version reuses the name: keep them apart.
                    let base = name.clone();
                    let mut n = 2;
                    while self.used_names.contains(&name) {
                        name = format!("{base}_{n}");
                        n += 1;
                    }
                    self.used_names.insert(name.clone());
                    self.names.insert(t.id, name);
                }
                Item::Event(e) => {
                    let next_item = self.counters.len() as u32;
                    let Some(name) = self.names.get(&e.type_id).cloned() else {
                        self.loss
                            .borrow_mut()
                            .drop_item("events", "event of an undefined type");
                        continue;
                    };
                    let entry = self.counters.entry(e.type_id).or_insert_with(|| {
                        let id = crate::formats::kpi::schema::pmid(
                            EVENT_COUNTER_DOMAIN,
                            next_item >> 10,
                            next_item & 0x3ff,
                        );
                        let mut d = MetricDesc::new(
                            id,
                            &name,
                            ValueType::U64,
                            Semantics::Counter,
                            Units::count(),
                        );
                        d.help_short = Some(format!("number of {name} events so far"));
                        self.queue.push_back(Item::Metric(std::sync::Arc::new(d)));
                        (id, 0)
                    });
                    entry.1 += 1;
                    let (id, count) = *entry;
                    self.loss
                        .borrow_mut()
                        .degrade("events", "written as per-type counters events.*");
                    self.queue.push_back(Item::Sample(Sample {
                        time: e.time,
                        raw_clock: e.raw_clock,
                        metrics: vec![MetricValues {
                            metric: id,
                            values: Ok(vec![(PM_IN_NULL, Value::U64(count))]),
                        }],
                        extras: Extras::default(),
                    }));
                }
                other => return Ok(Some(other)),
            }
        }
    }
    fn diagnostics(&self) -> &[Diagnostic] {
        self.inner.diagnostics()
    }
    fn native_counts(&self) -> Vec<(String, u64)> {
        self.inner.native_counts()
    }
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
}
