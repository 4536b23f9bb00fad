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
    /// Seconds from the first to the last data item.
    pub span_s: f64,
    pub metrics: Vec<MetricStats>,
    pub events: Vec<EventStats>,
    /// Per CPU (events that have one).
    pub cpus: Vec<SpanStats>,
    /// Per source: the `source` of merged inputs, else the input itself.
    pub sources: Vec<SpanStats>,
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
}

#[derive(Debug, Default, serde::Serialize)]
pub struct EventStats {
    /// `category.name`.
    pub event: String,
    pub count: u64,
    /// Count over the trace's span (absent when the span is 0).
    pub per_s: Option<f64>,
    pub framing: bool,
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

#[derive(Default)]
struct Acc {
    count: u64,
    num: u64,
    min: f64,
    max: f64,
    sum: f64,
    first: Option<(Timestamp, f64)>,
    last: Option<(Timestamp, f64)>,
    increase: f64,
    errors: u64,
}

impl Acc {
    fn add(&mut self, t: Timestamp, v: Option<f64>) {
        self.count += 1;
        let Some(v) = v else { return };
        if self.num == 0 {
            self.min = v;
            self.max = v;
            self.first = Some((t, v));
        }
        self.num += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += v;
        if let Some((_, p)) = self.last {
            self.increase += if v >= p { v - p } else { v };
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

/// Read the stream through and gather the figures.
pub fn stats(reader: &mut dyn TraceReader) -> Result<Stats> {
    let mut metrics: BTreeMap<MetricId, std::sync::Arc<MetricDesc>> = BTreeMap::new();
    let mut inst_names: BTreeMap<(IndomId, InstId), String> = BTreeMap::new();
    let mut series: BTreeMap<(MetricId, InstId), Acc> = BTreeMap::new();
    let mut types: BTreeMap<EventTypeId, (String, bool)> = BTreeMap::new();
    let mut events: BTreeMap<(String, bool), u64> = BTreeMap::new();
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
                            series.entry((mv.metric, PM_IN_NULL)).or_default().errors += 1;
                        }
                        Ok(vals) => {
                            for (inst, v) in vals {
                                series
                                    .entry((mv.metric, *inst))
                                    .or_default()
                                    .add(s.time, v.as_f64());
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
                *events.entry(k).or_default() += 1;
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
        span_s: secs(span),
        ..Default::default()
    };
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
        });
    }
    for ((name, framing), count) in events {
        st.events.push(EventStats {
            event: name,
            count,
            per_s: (span > 0).then(|| count as f64 / secs(span)),
            framing,
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
