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

/// Count `n` of (what, reason) (none: no entry); the maps hold a few keys,
/// searched in place.
fn bump(m: &mut BTreeMap<(String, String), u64>, what: &str, reason: &str, n: u64) {
    if n == 0 {
        return;
    }
    match m.iter_mut().find(|((w, r), _)| w == what && r == reason) {
        Some((_, c)) => *c += n,
        None => {
            m.insert((what.to_string(), reason.to_string()), n);
        }
    }
}

impl LossReport {
    // Counted per item on hot paths: a key is copied only the first time.
    pub fn wrote(&mut self, what: &str, n: u64) {
        match self.written.get_mut(what) {
            Some(c) => *c += n,
            None => {
                self.written.insert(what.to_string(), n);
            }
        }
    }
    pub fn degrade(&mut self, what: &str, reason: &str) {
        bump(&mut self.degraded, what, reason, 1);
    }
    pub fn drop_item(&mut self, what: &str, reason: &str) {
        bump(&mut self.dropped, what, reason, 1);
    }
    /// `n` items degraded at once (none: nothing noted).
    pub fn degrade_n(&mut self, what: &str, reason: &str, n: u64) {
        bump(&mut self.degraded, what, reason, n);
    }
    /// `n` items dropped at once (none: nothing noted).
    pub fn drop_n(&mut self, what: &str, reason: &str, n: u64) {
        bump(&mut self.dropped, what, reason, n);
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

/// Loss entries of one reason and one kind of item, summed: what a loss
/// line reports (once per kind, never once per metric or event type).
fn summarise(map: &BTreeMap<(String, String), u64>) -> Vec<String> {
    // (reason, kind) → (total, [(subject, n)]); the kind is the last word
    // of "what" ("values", "events"), the subject what comes before it.
    type Subjects<'a> = (u64, Vec<(&'a str, u64)>);
    let mut groups: BTreeMap<(&str, &str), Subjects> = BTreeMap::new();
    for ((what, why), n) in map {
        let (subject, kind) = match what.rsplit_once(' ') {
            Some((s, k)) => (s, k),
            None => ("", what.as_str()),
        };
        let g = groups.entry((why.as_str(), kind)).or_default();
        g.0 += n;
        g.1.push((subject, *n));
    }
    let mut lines: Vec<(String, String)> = groups
        .into_iter()
        .map(|((why, kind), (total, mut subjects))| {
            let what = match subjects.as_slice() {
                [("", _)] => format!("{total} {kind}"),
                [(s, _)] => format!("{total} {s} {kind}"),
                _ => {
                    subjects.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
                    let mut list: Vec<String> = subjects
                        .iter()
                        .take(3)
                        .map(|(s, n)| format!("{s} {n}"))
                        .collect();
                    if subjects.len() > 3 {
                        list.push(format!("{} more", subjects.len() - 3));
                    }
                    format!(
                        "{total} {kind} of {} kinds ({})",
                        subjects.len(),
                        list.join(", ")
                    )
                }
            };
            (what, why.to_string())
        })
        .collect();
    lines.sort();
    lines
        .into_iter()
        .map(|(what, why)| format!("{what}: {why}"))
        .collect()
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
        for l in summarise(&self.degraded) {
            writeln!(f, "degraded: {l}")?;
        }
        for l in summarise(&self.dropped) {
            writeln!(f, "dropped: {l}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::LossReport;

    /// Counts of n are n counts of one, and none notes nothing.
    #[test]
    fn counts_of_n_are_n_counts_of_one() {
        let (mut one, mut n) = (LossReport::default(), LossReport::default());
        for _ in 0..3 {
            one.drop_item("values", "why");
            one.degrade("results", "clamped");
        }
        n.drop_n("values", "why", 3);
        n.degrade_n("results", "clamped", 2);
        n.degrade_n("results", "clamped", 1);
        n.drop_n("samples", "why", 0);
        n.degrade_n("events", "why", 0);
        assert_eq!(n, one);
    }

    #[test]
    fn one_line_per_reason_and_kind() {
        let mut l = LossReport::default();
        for (what, n) in [
            ("a.x values", 7),
            ("b.y values", 9),
            ("c values", 2),
            ("d values", 2),
        ] {
            for _ in 0..n {
                l.drop_item(what, "KPI lines carry only kpi.*");
            }
        }
        l.drop_item("annotations", "no free text");
        l.degrade("core.x events", "cut");
        let s = l.to_string();
        assert_eq!(
            s,
            "written: nothing\n\
             degraded: 1 core.x events: cut\n\
             dropped: 1 annotations: no free text\n\
             dropped: 20 values of 4 kinds (b.y 9, a.x 7, c 2, 1 more): KPI lines carry only kpi.*\n"
        );
    }
}
