//! What `polytrace info` counts.

use crate::error::Result;
use crate::model::*;
use std::collections::BTreeMap;

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
    let mut types: BTreeMap<EventTypeId, (String, bool)> = BTreeMap::new();
    let mut names: BTreeMap<MetricId, String> = BTreeMap::new();
    let mut pending = std::collections::VecDeque::new();
    while let Some(item) = next_plain(reader, &mut pending)? {
        let kind = match &item {
            Item::EventType(t) => {
                types.insert(t.id, (format!("{}.{}", t.category, t.name), t.framing));
                "event types"
            }
            Item::Metric(m) => {
                names.insert(m.id, m.name().to_string());
                "metrics"
            }
            Item::Indom(_) => "indom updates",
            Item::Help(_) => "help texts",
            Item::Labels(_) => "label sets",
            // `next_plain` gives a run's events one by one.
            Item::EventRun(_) => continue,
            Item::Event(e) => {
                let (n, framing) = types
                    .get(&e.type_id)
                    .cloned()
                    .unwrap_or_else(|| ("?".into(), false));
                *info.events_by_type.entry(n).or_default() += 1;
                // Bookkeeping of the format, counted apart from the data.
                if framing {
                    "framing events"
                } else {
                    "events"
                }
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

// ------------------------------------------------------------ --stats

/// Figures for `polytrace info --stats` (also its `--json` form).
#[derive(Debug, Default, serde::Serialize)]
pub struct Stats {
    /// Epoch time of the first and last data item (`SECONDS.NNNNNNNNN`).
    pub first: Option<String>,
    pub last: Option<String>,
    /// The same as times, for a listing in the source's time base.
    #[serde(skip)]
    pub first_last: Option<(Timestamp, Timestamp)>,
    /// Seconds from the first to the last data item.
    pub span_s: f64,
    pub metrics: Vec<MetricStats>,
    pub events: Vec<EventStats>,
    /// Per CPU (events that have one).
    pub cpus: Vec<SpanStats>,
    /// Per source: the `source` of merged inputs, else the input itself.
    pub sources: Vec<SpanStats>,
    /// `--top N`: per metric, its busiest instances.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub top: Vec<TopInstances>,
}

/// One metric and instance.
#[derive(Debug, Default, serde::Serialize)]
pub struct MetricStats {
    pub metric: String,
    /// Instance id (absent for singular metrics) and name where known.
    pub instance: Option<i32>,
    pub instance_name: Option<String>,
    pub semantics: String,
    pub count: u64,
    /// Numeric values only (strings, aggregates and event records are
    /// counted, not summed).
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub mean: Option<f64>,
    /// Counters: increase per second from the first to the last value; a
    /// decrease counts as a reset (the new value is the increase).
    pub rate: Option<f64>,
    /// Values that were PCP error codes instead.
    pub errors: u64,
    /// When the minimum and the maximum were first seen (epoch
    /// `SECONDS.NNNNNNNNN`, as `first`).
    pub min_time: Option<String>,
    pub max_time: Option<String>,
    /// Percentiles by nearest rank (counters: of their rates between
    /// consecutive values), from a log-bucket sketch: within 1 % of the
    /// true value, exact where a bucket holds one value ([`Sketch`]).
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    /// Counters: the highest increase per second between two consecutive
    /// values (a decrease is a reset, no rate), and the interval.
    pub peak_rate: Option<f64>,
    pub peak_rate_from: Option<String>,
    pub peak_rate_time: Option<String>,
    /// `--top N`: the N intervals with the highest value (counters: rate),
    /// highest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub top_intervals: Vec<TopInterval>,
}

/// One interval of `--top`: a value at `time` (a counter's rate over
/// `from`..`time`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct TopInterval {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    pub time: String,
    pub value: f64,
}

/// `--top N`: the busiest instances of one metric (highest mean; counters:
/// highest mean rate), busiest first.
#[derive(Debug, Default, serde::Serialize)]
pub struct TopInstances {
    pub metric: String,
    pub instances: Vec<TopInstance>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct TopInstance {
    pub instance: Option<i32>,
    pub instance_name: Option<String>,
    /// Mean value, or a counter's mean rate per second.
    pub value: f64,
}

/// One second of an event type (`--top`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct BusySecond {
    /// Start of the second (epoch `SECONDS.NNNNNNNNN`).
    pub second: String,
    pub count: u64,
}

#[derive(Debug, Default, serde::Serialize)]
pub struct EventStats {
    /// `category.name`.
    pub event: String,
    pub count: u64,
    /// Count over the trace's span (absent when the span is 0).
    pub per_s: Option<f64>,
    pub framing: bool,
    /// The whole second (from the epoch) with the most events of the type.
    pub busiest_second: Option<BusySecond>,
    /// `--top N`: the N busiest seconds, busiest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub top_seconds: Vec<BusySecond>,
}

/// Span and gaps of one CPU or source.
#[derive(Debug, Default, serde::Serialize)]
pub struct SpanStats {
    pub name: String,
    pub items: u64,
    pub first: String,
    pub last: String,
    pub span_s: f64,
    /// The largest intervals between consecutive items (at most 3, largest
    /// first): where each starts and how long it is.
    pub gaps: Vec<Gap>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Gap {
    pub after: String,
    pub seconds: f64,
}

/// Relative accuracy of the percentile sketch.
pub const SKETCH_ACCURACY: f64 = 0.01;

/// A log-bucket quantile sketch (the DDSketch idea): a value `v > 0` falls
/// in bucket `ceil(log_g v)`, `g = (1 + a) / (1 - a)`, so any value of a
/// bucket is within `a` (1 %) of the bucket's middle; negative values
/// mirror, zero has a bucket of its own. Memory is one entry per bucket
/// met (a few hundred cover 1e-9..1e12), whatever the number of values.
/// Each bucket keeps the smallest and largest value it took: a bucket of
/// one distinct value (counts, states) gives that value exactly.
#[derive(Default)]
pub struct Sketch {
    bins: BTreeMap<(u8, i32), Bin>,
    n: u64,
}

struct Bin {
    n: u64,
    min: f64,
    max: f64,
}

fn gamma() -> f64 {
    (1.0 + SKETCH_ACCURACY) / (1.0 - SKETCH_ACCURACY)
}

impl Sketch {
    fn key(v: f64) -> (u8, i32) {
        if v == 0.0 {
            return (1, 0);
        }
        let i = (v.abs().ln() / gamma().ln()).ceil() as i32;
        if v > 0.0 {
            (2, i)
        } else {
            (0, -i)
        }
    }
    pub fn add(&mut self, v: f64) {
        if v.is_nan() {
            return;
        }
        self.n += 1;
        let b = self.bins.entry(Self::key(v)).or_insert(Bin {
            n: 0,
            min: v,
            max: v,
        });
        b.n += 1;
        b.min = b.min.min(v);
        b.max = b.max.max(v);
    }
    /// The value of nearest rank `ceil(q * n)` (q in 0..=1).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0;
        for (&(sign, i), b) in &self.bins {
            seen += b.n;
            if seen >= rank {
                if b.min == b.max || sign == 1 {
                    return Some(b.min);
                }
                let g = gamma();
                let mag = 2.0 * g.powi(i.abs()) / (g + 1.0);
                let mid = if sign == 2 { mag } else { -mag };
                return Some(mid.clamp(b.min, b.max));
            }
        }
        None
    }
}

/// The `n` largest of what is offered, largest first (ties: earliest).
struct TopN<T> {
    n: usize,
    items: Vec<(f64, T)>,
}

impl<T> TopN<T> {
    fn new(n: usize) -> TopN<T> {
        TopN {
            n,
            items: Vec::new(),
        }
    }
    fn offer(&mut self, v: f64, t: impl FnOnce() -> T) {
        if self.n == 0 || v.is_nan() {
            return;
        }
        if self.items.len() == self.n {
            match self.items.last() {
                Some((low, _)) if v > *low => {
                    self.items.pop();
                }
                _ => return,
            }
        }
        let at = self.items.partition_point(|(x, _)| *x >= v);
        self.items.insert(at, (v, t()));
    }
}

struct Acc {
    count: u64,
    num: u64,
    min: f64,
    max: f64,
    min_t: Timestamp,
    max_t: Timestamp,
    sum: f64,
    first: Option<(Timestamp, f64)>,
    last: Option<(Timestamp, f64)>,
    increase: f64,
    errors: u64,
    sketch: Sketch,
    peak: Option<(f64, Timestamp, Timestamp)>,
    top: TopN<(Option<Timestamp>, Timestamp)>,
}

impl Acc {
    fn new(top: usize) -> Acc {
        Acc {
            count: 0,
            num: 0,
            min: 0.0,
            max: 0.0,
            min_t: Timestamp::default(),
            max_t: Timestamp::default(),
            sum: 0.0,
            first: None,
            last: None,
            increase: 0.0,
            errors: 0,
            sketch: Sketch::default(),
            peak: None,
            top: TopN::new(top),
        }
    }

    fn add(&mut self, t: Timestamp, v: Option<f64>, counter: bool) {
        self.count += 1;
        let Some(v) = v else { return };
        if self.num == 0 {
            self.min = v;
            self.max = v;
            self.min_t = t;
            self.max_t = t;
            self.first = Some((t, v));
        }
        self.num += 1;
        // The first time an extreme is reached is when it happened.
        if v < self.min {
            self.min = v;
            self.min_t = t;
        }
        if v > self.max {
            self.max = v;
            self.max_t = t;
        }
        self.sum += v;
        if let Some((t0, p)) = self.last {
            self.increase += if v >= p { v - p } else { v };
            let dt = secs(t.0 - t0.0);
            if counter && v >= p && dt > 0.0 {
                let r = (v - p) / dt;
                if self.peak.is_none_or(|(best, _, _)| r > best) {
                    self.peak = Some((r, t0, t));
                }
                self.top.offer(r, || (Some(t0), t));
                // A counter's percentiles are of its rates: its raw values
                // only grow.
                self.sketch.add(r);
            }
        }
        if !counter {
            self.sketch.add(v);
            self.top.offer(v, || (None, t));
        }
        self.last = Some((t, v));
    }
}

#[derive(Default)]
struct SpanAcc {
    items: u64,
    first: Option<Timestamp>,
    last: Option<Timestamp>,
    gaps: Vec<(i64, Timestamp)>,
}

impl SpanAcc {
    fn add(&mut self, t: Timestamp) {
        self.items += 1;
        if let Some(l) = self.last {
            let d = t.0 - l.0;
            if d > 0 && (self.gaps.len() < 3 || d > self.gaps[2].0) {
                self.gaps.push((d, l));
                self.gaps.sort_by_key(|g| std::cmp::Reverse(g.0));
                self.gaps.truncate(3);
            }
        }
        self.first.get_or_insert(t);
        self.last = Some(self.last.map_or(t, |l| l.max(t)));
    }
    fn done(self, name: String) -> SpanStats {
        let (f, l) = (
            self.first.unwrap_or_default(),
            self.last.unwrap_or_default(),
        );
        SpanStats {
            name,
            items: self.items,
            first: f.to_string(),
            last: l.to_string(),
            span_s: secs(l.0 - f.0),
            gaps: self
                .gaps
                .into_iter()
                .map(|(d, at)| Gap {
                    after: at.to_string(),
                    seconds: secs(d),
                })
                .collect(),
        }
    }
}

fn secs(ns: i64) -> f64 {
    ns as f64 / 1e9
}

/// Events of one type: the count, and per whole second (the stream comes
/// in time order, so one second is counted at a time).
struct EvAcc {
    count: u64,
    cur: Option<(i64, u64)>,
    best: Option<(i64, u64)>,
    top: TopN<i64>,
}

impl EvAcc {
    fn new(top: usize) -> EvAcc {
        EvAcc {
            count: 0,
            cur: None,
            best: None,
            top: TopN::new(top),
        }
    }
    fn add(&mut self, t: Timestamp) {
        self.count += 1;
        let sec = t.0.div_euclid(1_000_000_000);
        match &mut self.cur {
            Some((s, n)) if *s == sec => *n += 1,
            _ => {
                self.close();
                self.cur = Some((sec, 1));
            }
        }
    }
    fn close(&mut self) {
        if let Some((s, n)) = self.cur.take() {
            if self.best.is_none_or(|(_, b)| n > b) {
                self.best = Some((s, n));
            }
            self.top.offer(n as f64, || s);
        }
    }
}

fn busy(sec: i64, count: u64) -> BusySecond {
    BusySecond {
        second: Timestamp(sec.saturating_mul(1_000_000_000)).to_string(),
        count,
    }
}

/// Read the stream through and gather the figures; `top` > 0 also lists
/// the busiest instances, intervals and seconds (`--top N`).
pub fn stats(reader: &mut dyn TraceReader, top: usize) -> Result<Stats> {
    let mut metrics: BTreeMap<MetricId, std::sync::Arc<MetricDesc>> = BTreeMap::new();
    let mut inst_names: BTreeMap<(IndomId, InstId), String> = BTreeMap::new();
    let mut series: BTreeMap<(MetricId, InstId), Acc> = BTreeMap::new();
    let mut types: BTreeMap<EventTypeId, (String, bool)> = BTreeMap::new();
    let mut events: BTreeMap<(String, bool), EvAcc> = BTreeMap::new();
    let mut cpus: BTreeMap<u32, SpanAcc> = BTreeMap::new();
    let mut sources: BTreeMap<String, SpanAcc> = BTreeMap::new();
    let whole = reader.header().source.to_string();
    let (mut first, mut last): (Option<Timestamp>, Option<Timestamp>) = (None, None);
    let mut pending = std::collections::VecDeque::new();
    while let Some(item) = next_plain(reader, &mut pending)? {
        match &item {
            Item::Metric(m) => {
                metrics.insert(m.id, m.clone());
            }
            Item::EventType(t) => {
                types.insert(t.id, (format!("{}.{}", t.category, t.name), t.framing));
            }
            Item::Indom(u) => {
                for i in &u.instances {
                    inst_names.insert((u.id, i.id), i.name.clone());
                }
            }
            Item::Sample(s) => {
                for mv in &s.metrics {
                    match &mv.values {
                        Err(_) => {
                            series
                                .entry((mv.metric, PM_IN_NULL))
                                .or_insert_with(|| Acc::new(top))
                                .errors += 1;
                        }
                        Ok(vals) => {
                            let counter = metrics
                                .get(&mv.metric)
                                .is_some_and(|d| d.sem == Semantics::Counter);
                            for (inst, v) in vals {
                                series
                                    .entry((mv.metric, *inst))
                                    .or_insert_with(|| Acc::new(top))
                                    .add(s.time, v.as_f64(), counter);
                            }
                        }
                    }
                }
            }
            // `next_plain` gives a run's events one by one.
            Item::EventRun(_) => continue,
            Item::Event(e) => {
                let k = types
                    .get(&e.type_id)
                    .cloned()
                    .unwrap_or_else(|| ("?".into(), false));
                events
                    .entry(k)
                    .or_insert_with(|| EvAcc::new(top))
                    .add(e.time);
                if let Some(c) = e.cpu {
                    cpus.entry(c).or_default().add(e.time);
                }
            }
            _ => {}
        }
        if let Some(t) = item.time().filter(|_| item.is_data()) {
            first = Some(first.map_or(t, |f| f.min(t)));
            last = Some(last.map_or(t, |l| l.max(t)));
            let src = match &item {
                Item::Event(e) => &e.extras,
                Item::Sample(s) => &s.extras,
                Item::Mark(m) => &m.extras,
                Item::Annotation(a) => &a.extras,
                _ => unreachable!("data items only"),
            }
            .str(keys::SOURCE)
            .unwrap_or(&whole);
            match sources.get_mut(src) {
                Some(a) => a.add(t),
                None => {
                    let mut a = SpanAcc::default();
                    a.add(t);
                    sources.insert(src.to_string(), a);
                }
            }
        }
    }
    let span = match (first, last) {
        (Some(f), Some(l)) => l.0 - f.0,
        _ => 0,
    };
    let mut st = Stats {
        first: first.map(|t| t.to_string()),
        last: last.map(|t| t.to_string()),
        first_last: first.zip(last),
        span_s: secs(span),
        ..Default::default()
    };
    let ts = |t: Timestamp| Some(t.to_string());
    // Per metric: (instance, name, mean or mean rate) for `--top`.
    let mut busiest: BTreeMap<String, Vec<TopInstance>> = BTreeMap::new();
    for ((id, inst), a) in series {
        let d = metrics.get(&id);
        let counter = d.is_some_and(|d| d.sem == Semantics::Counter);
        let rate = match (counter, a.first, a.last) {
            (true, Some((t0, _)), Some((t1, _))) if t1 > t0 => Some(a.increase / secs(t1.0 - t0.0)),
            _ => None,
        };
        st.metrics.push(MetricStats {
            metric: d.map_or_else(|| format!("pmid {id}"), |d| d.name().to_string()),
            instance: (inst != PM_IN_NULL).then_some(inst),
            instance_name: d
                .and_then(|d| d.indom)
                .and_then(|i| inst_names.get(&(i, inst)).cloned()),
            semantics: d.map_or("?".into(), |d| format!("{:?}", d.sem).to_lowercase()),
            count: a.count,
            min: (a.num > 0).then_some(a.min),
            max: (a.num > 0).then_some(a.max),
            mean: (a.num > 0).then(|| a.sum / a.num as f64),
            rate,
            errors: a.errors,
            min_time: (a.num > 0).then(|| a.min_t.to_string()),
            max_time: (a.num > 0).then(|| a.max_t.to_string()),
            p50: a.sketch.quantile(0.50),
            p95: a.sketch.quantile(0.95),
            p99: a.sketch.quantile(0.99),
            peak_rate: a.peak.map(|p| p.0),
            peak_rate_from: a.peak.and_then(|p| ts(p.1)),
            peak_rate_time: a.peak.and_then(|p| ts(p.2)),
            top_intervals: a
                .top
                .items
                .iter()
                .map(|&(value, (from, time))| TopInterval {
                    from: from.map(|t| t.to_string()),
                    time: time.to_string(),
                    value,
                })
                .collect(),
        });
        if top > 0 {
            let m = st.metrics.last().expect("pushed above");
            let v = if counter { m.rate } else { m.mean };
            if let Some(value) = v {
                busiest
                    .entry(m.metric.clone())
                    .or_default()
                    .push(TopInstance {
                        instance: m.instance,
                        instance_name: m.instance_name.clone(),
                        value,
                    });
            }
        }
    }
    for (metric, mut list) in busiest {
        list.sort_by(|a, b| b.value.total_cmp(&a.value));
        list.truncate(top);
        st.top.push(TopInstances {
            metric,
            instances: list,
        });
    }
    for ((name, framing), mut a) in events {
        a.close();
        st.events.push(EventStats {
            event: name,
            count: a.count,
            per_s: (span > 0).then(|| a.count as f64 / secs(span)),
            framing,
            busiest_second: a.best.map(|(s, n)| busy(s, n)),
            top_seconds: a
                .top
                .items
                .iter()
                .map(|&(n, s)| busy(s, n as u64))
                .collect(),
        });
    }
    st.cpus = cpus
        .into_iter()
        .map(|(c, a)| a.done(format!("cpu {c}")))
        .collect();
    st.sources = sources.into_iter().map(|(n, a)| a.done(n)).collect();
    st.metrics
        .sort_by(|a, b| (&a.metric, a.instance).cmp(&(&b.metric, b.instance)));
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sketch_within_one_percent_and_exact_for_few_values() {
        let mut s = Sketch::default();
        for v in 1..=1000 {
            s.add(v as f64);
        }
        for (q, want) in [(0.5, 500.0), (0.95, 950.0), (0.99, 990.0)] {
            let got = s.quantile(q).unwrap();
            assert!((got - want).abs() <= want * SKETCH_ACCURACY, "{q}: {got}");
        }
        let mut d = Sketch::default();
        for v in [0.0, 0.0, 3.0, 3.0, 3.0, 7.0, -2.0] {
            d.add(v);
        }
        assert_eq!(d.quantile(0.5), Some(3.0));
        assert_eq!(d.quantile(0.0), Some(-2.0));
        assert_eq!(d.quantile(1.0), Some(7.0));
        assert_eq!(d.quantile(0.25), Some(0.0));
    }

    #[test]
    fn top_keeps_the_largest_in_order() {
        let mut t = TopN::new(3);
        for (i, v) in [5.0, 1.0, 9.0, 7.0, 9.0, 2.0].into_iter().enumerate() {
            t.offer(v, || i);
        }
        let got: Vec<(f64, usize)> = t.items;
        assert_eq!(got, vec![(9.0, 2), (9.0, 4), (7.0, 3)]);
    }
}
