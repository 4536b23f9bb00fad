//! Events → per-type counters, for metrics-only writers (PCP archive, MMV).

use crate::error::Result;
use crate::model::*;
use std::collections::BTreeMap;

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

use super::derive::pcp_name_part;

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
                        let id = pmid(EVENT_COUNTER_DOMAIN, next_item >> 10, next_item & 0x3ff);
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
                        .degrade("events", crate::formats::mmv::EVENTS_AS_COUNTERS);
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
    pass_to_inner!(described);
}
