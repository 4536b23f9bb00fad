//! The loss report every writer fills: what was written, degraded, dropped.

use std::collections::BTreeMap;
use std::fmt;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct LossReport {
    /// Items written, by kind ("events", "samples", "metric descriptors", …).
    pub written: BTreeMap<String, u64>,
    /// (what, reason) → count: written but with less fidelity.
    pub degraded: BTreeMap<(String, String), u64>,
    /// (what, reason) → count: not written at all.
    pub dropped: BTreeMap<(String, String), u64>,
}

impl LossReport {
    pub fn wrote(&mut self, what: &str, n: u64) {
        *self.written.entry(what.to_string()).or_default() += n;
    }
    pub fn degrade(&mut self, what: &str, reason: &str) {
        *self
            .degraded
            .entry((what.to_string(), reason.to_string()))
            .or_default() += 1;
    }
    pub fn drop_item(&mut self, what: &str, reason: &str) {
        *self
            .dropped
            .entry((what.to_string(), reason.to_string()))
            .or_default() += 1;
    }
    pub fn has_loss(&self) -> bool {
        !self.dropped.is_empty() || !self.degraded.is_empty()
    }
    pub fn has_drops(&self) -> bool {
        !self.dropped.is_empty()
    }
    pub fn merge(&mut self, other: &LossReport) {
        for (k, v) in &other.written {
            *self.written.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &other.degraded {
            *self.degraded.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &other.dropped {
            *self.dropped.entry(k.clone()).or_default() += v;
        }
    }
}

impl fmt::Display for LossReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let written: Vec<String> = self
            .written
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect();
        writeln!(
            f,
            "written: {}",
            if written.is_empty() {
                "nothing".to_string()
            } else {
                written.join(", ")
            }
        )?;
        for ((what, why), n) in &self.degraded {
            writeln!(f, "degraded: {n} {what}: {why}")?;
        }
        for ((what, why), n) in &self.dropped {
            writeln!(f, "dropped: {n} {what}: {why}")?;
        }
        Ok(())
    }
}
