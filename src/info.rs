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
    while let Some(item) = reader.next_item()? {
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
