//! `--rate` for exports that take values as they come (Chrome JSON, CTF):
//! each counter becomes its rate per second, as CSV's `--rate` writes it.

use crate::error::Result;
use crate::model::*;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Counters → rates per second: (value − previous) / seconds between them.
/// The first value of each counter and instance, a counter that went down
/// (reset or wrap) and a repeat at the same time give no rate and are left
/// out, as an empty CSV cell.
pub struct Rates {
    inner: Box<dyn TraceReader>,
    counters: HashSet<MetricId>,
    prev: HashMap<(MetricId, InstId), (i64, f64)>,
}

impl Rates {
    pub fn wrap(inner: Box<dyn TraceReader>) -> Rates {
        Rates {
            inner,
            counters: HashSet::new(),
            prev: HashMap::new(),
        }
    }

    fn rate(&mut self, metric: MetricId, inst: InstId, t: i64, v: &Value) -> Option<Value> {
        let now = v.as_f64()?;
        let (t0, v0) = self.prev.insert((metric, inst), (t, now))?;
        if t <= t0 || now < v0 {
            return None;
        }
        Some(Value::F64((now - v0) / ((t - t0) as f64 / 1e9)))
    }
}

impl TraceReader for Rates {
    fn next_item(&mut self) -> Result<Option<Item>> {
        let Some(item) = self.inner.next_item()? else {
            return Ok(None);
        };
        Ok(Some(match item {
            Item::Metric(m) if m.sem == Semantics::Counter && m.vtype.is_numeric() => {
                self.counters.insert(m.id);
                let mut d = (*m).clone();
                d.sem = Semantics::Instant;
                d.vtype = ValueType::F64;
                // Per second: one time dimension less.
                if d.units.dim_time == 0 {
                    d.units.scale_time = 3;
                }
                d.units.dim_time -= 1;
                Item::Metric(Arc::new(d))
            }
            Item::Sample(mut s) => {
                let t = s.time.0;
                for mv in &mut s.metrics {
                    if !self.counters.contains(&mv.metric) {
                        continue;
                    }
                    let metric = mv.metric;
                    if let Ok(values) = &mut mv.values {
                        let old = std::mem::take(values);
                        for (inst, v) in old {
                            if let Some(r) = self.rate(metric, inst, t, &v) {
                                values.push((inst, r));
                            }
                        }
                    }
                }
                Item::Sample(s)
            }
            other => other,
        }))
    }
    pass_to_inner!(described, restarts);
}
