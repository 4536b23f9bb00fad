//! Model items → KPI groups (BEG, datasets, END). Shared by the KPI text
//! writer and the DLT writer.

use super::dataset::{Dataset, Kind};
use super::schema::{self, X_BEG_RAW, X_BEG_TIME, X_GROUP};
use super::truncated;
use crate::model::*;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

/// One group: written as `<kind> BEG`, the datasets in messages, `<kind> END`.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub kind: &'static str,
    pub time: Timestamp,
    pub raw_clock: Option<u64>,
    pub datasets: Vec<Vec<u8>>,
}

/// Default libdlt payload limit (`DLT_LOG_MSG_BUF_LEN`).
pub const DEFAULT_PAYLOAD_MAX: usize = 1390;

/// Split datasets into messages as libdlt does: the type argument takes 10
/// bytes, each dataset `len + 7`; a message takes datasets until the next one
/// would not fit. A dataset that never fits gets a message of its own.
pub fn pack(datasets: &[Vec<u8>], payload_max: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut used = 10;
    for (i, d) in datasets.iter().enumerate() {
        let need = d.len() + 7;
        if i > start && used + need > payload_max {
            out.push(start..i);
            start = i;
            used = 10;
        }
        used += need;
    }
    if start < datasets.len() {
        out.push(start..datasets.len());
    }
    out
}

/// The truncated duplicate libdlt ≥ 2.18.4 ends message `r` of `pack`
/// with (spec §3.7): a cut copy of the dataset that did not fit, when at
/// least 42 bytes were left.
pub fn tail_after(datasets: &[Vec<u8>], r: &Range<usize>, payload_max: usize) -> Option<Vec<u8>> {
    let next = datasets.get(r.end)?;
    let used: usize = 10
        + datasets[r.clone()]
            .iter()
            .map(|d| d.len() + 7)
            .sum::<usize>();
    truncated::duplicate_for(next, payload_max.checked_sub(used)?)
}

#[derive(Debug)]
struct Pending {
    key: (Kind, Option<u64>, Timestamp),
    group: Group,
}

#[derive(Debug, Default)]
pub struct Grouper {
    /// Event type id → KPI kind (NEW/STP/CHK) or None for other events.
    types: HashMap<EventTypeId, Option<Kind>>,
    type_names: HashMap<EventTypeId, String>,
    metrics: HashMap<MetricId, Arc<MetricDesc>>,
    irq_names: HashMap<InstId, (String, u32)>,
    pending: Option<Pending>,
}

fn int_of(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::I64(x) | Value::Enum(x) => Some(*x),
        Value::U64(x) => i64::try_from(*x).ok(),
        _ => None,
    }
}

fn bytes_of(v: Option<&Value>) -> Option<Vec<u8>> {
    match v? {
        Value::Str(s) => Some(s.as_bytes().to_vec()),
        Value::Bytes(b) => Some(b.clone()),
        _ => None,
    }
}

/// Parse an instance name `NAME:cpuN` of `kpi.irq`.
fn parse_irq_instance(name: &str) -> Option<(String, u32)> {
    let (irq, cpu) = name.rsplit_once(":cpu")?;
    Some((irq.to_string(), cpu.parse().ok()?))
}

impl Grouper {
    pub fn new() -> Grouper {
        Grouper::default()
    }

    /// Time of the group being collected, if any: items written around
    /// the groups wait for it so the output stays in time order.
    pub fn pending_time(&self) -> Option<Timestamp> {
        self.pending.as_ref().map(|p| p.group.time)
    }

    /// True for the event types the grouper turns into NEW/STP/CHK
    /// datasets (category `kpi`).
    pub fn is_kpi_type(t: &EventType) -> bool {
        t.category == "kpi"
            && Kind::parse(t.name.as_bytes())
                .is_some_and(|k| matches!(k, Kind::New | Kind::Stp | Kind::Chk))
    }

    /// True for the metrics ACT and IRQ datasets carry.
    pub fn is_kpi_metric(name: &str) -> bool {
        matches!(
            name,
            "kpi.proc.cpu"
                | "kpi.proc.rss"
                | "kpi.proc.ctxsw"
                | "kpi.proc.io_bytes"
                | "kpi.proc.io_wait"
                | "kpi.irq.count"
        )
    }

    fn flush(&mut self, out: &mut Vec<Group>) {
        if let Some(p) = self.pending.take() {
            out.push(p.group);
        }
    }

    fn push_dataset(
        &mut self,
        kind: Kind,
        group: Option<u64>,
        time: Timestamp,
        raw: Option<u64>,
        ds: Vec<u8>,
        out: &mut Vec<Group>,
    ) {
        // Without a group id, consecutive datasets of one kind at one time
        // form a group.
        let key = (
            kind,
            group,
            if group.is_some() { Timestamp(0) } else { time },
        );
        if self.pending.as_ref().map(|p| p.key) != Some(key) {
            self.flush(out);
            self.pending = Some(Pending {
                key,
                group: Group {
                    kind: kind.name(),
                    time,
                    raw_clock: raw,
                    datasets: vec![],
                },
            });
        }
        if let Some(p) = self.pending.as_mut() {
            p.group.datasets.push(ds);
        }
    }

    pub fn item(&mut self, item: &Item, loss: &mut LossReport) -> Vec<Group> {
        let mut out = Vec::new();
        match item {
            Item::EventRun(r) => {
                let _ = r.each_item(|it| {
                    out.extend(self.item(it, loss));
                    Ok::<(), ()>(())
                });
            }
            Item::EventType(t) => {
                let kind = if Self::is_kpi_type(t) {
                    Kind::parse(t.name.as_bytes())
                } else {
                    None
                };
                self.types.insert(t.id, kind);
                self.type_names
                    .insert(t.id, format!("{}.{}", t.category, t.name));
            }
            Item::Metric(m) => {
                self.metrics.insert(m.id, m.clone());
            }
            Item::Indom(u) => {
                let is_irq = self
                    .metrics
                    .values()
                    .any(|m| m.name() == "kpi.irq.count" && m.indom == Some(u.id))
                    || u.id == schema::IRQ_INDOM;
                if is_irq {
                    for i in &u.instances {
                        if let Some(p) = parse_irq_instance(&i.name) {
                            self.irq_names.insert(i.id, p);
                        }
                    }
                }
            }
            // The kpi.* help is the schema's own: implied by the lines.
            Item::Help(h) => {
                let own = match h.target {
                    HelpTarget::Metric(m) => self
                        .metrics
                        .get(&m)
                        .is_some_and(|d| d.name().starts_with("kpi.")),
                    HelpTarget::Indom(i) => i == schema::IRQ_INDOM || i == schema::PROC_INDOM,
                };
                if !own {
                    loss.drop_item("help texts", "KPI lines have no help text");
                }
            }
            Item::Labels(_) => loss.drop_item("label sets", "KPI lines have no labels"),
            Item::Event(e) => {
                let group = e.extras.u64(X_GROUP);
                match self.types.get(&e.type_id).copied().flatten() {
                    Some(kind) => {
                        let pid = int_of(e.fields.first());
                        let ds = match (kind, pid) {
                            (Kind::New, Some(pid)) => {
                                match (int_of(e.fields.get(1)), bytes_of(e.fields.get(2))) {
                                    (Some(ppid), Some(cmdline)) => Some(Dataset::New {
                                        pid,
                                        ppid,
                                        cmdline: cmdline.into(),
                                    }),
                                    _ => None,
                                }
                            }
                            (Kind::Stp, Some(pid)) => Some(Dataset::Stp { pid }),
                            (Kind::Chk, Some(pid)) => {
                                bytes_of(e.fields.get(1)).map(|cmdline| Dataset::Chk {
                                    pid,
                                    cmdline: cmdline.into(),
                                })
                            }
                            _ => None,
                        };
                        match ds {
                            Some(d) => {
                                // The group is stamped with its BEG message's time.
                                let t = e.extras.i64(X_BEG_TIME).map(Timestamp).unwrap_or(e.time);
                                let r = e.extras.u64(X_BEG_RAW).or(e.raw_clock);
                                self.push_dataset(kind, group, t, r, d.render(), &mut out)
                            }
                            None => loss.drop_item(
                                &format!("kpi.{} events", kind.name()),
                                "fields do not match the KPI layout",
                            ),
                        }
                    }
                    None => {
                        let n = self
                            .type_names
                            .get(&e.type_id)
                            .cloned()
                            .unwrap_or_else(|| "unknown".into());
                        loss.drop_item(
                            &format!("{n} events"),
                            "KPI lines carry only NEW/STP/CHK events",
                        );
                    }
                }
            }
            Item::Sample(s) => self.sample(s, loss, &mut out),
            Item::Mark(_) => loss.drop_item("marks", "KPI lines have no marks"),
            Item::Annotation(_) => loss.drop_item("annotations", "KPI lines have no annotations"),
        }
        out
    }

    fn sample(&mut self, s: &Sample, loss: &mut LossReport, out: &mut Vec<Group>) {
        let group = s.extras.u64(X_GROUP);
        let mut act: Vec<(InstId, [Option<i64>; 5])> = Vec::new();
        let mut irq: Vec<(String, Vec<(u32, u64)>)> = Vec::new();
        for mv in &s.metrics {
            let name = self
                .metrics
                .get(&mv.metric)
                .map(|m| m.name().to_string())
                .unwrap_or_default();
            let col = match name.as_str() {
                "kpi.proc.cpu" => Some(0),
                "kpi.proc.rss" => Some(1),
                "kpi.proc.ctxsw" => Some(2),
                "kpi.proc.io_bytes" => Some(3),
                "kpi.proc.io_wait" => Some(4),
                _ => None,
            };
            let Ok(vals) = &mv.values else {
                loss.drop_item(
                    &format!("{name} error values"),
                    "KPI lines have no error codes",
                );
                continue;
            };
            if let Some(c) = col {
                for (inst, v) in vals {
                    let x = int_of(Some(v)).or_else(|| v.as_f64().map(|f| f.round() as i64));
                    if !matches!(v, Value::I64(_) | Value::U64(_)) {
                        loss.degrade(&format!("{name} values"), "rounded to an integer");
                    }
                    let row = match act.iter_mut().find(|(i, _)| i == inst) {
                        Some(r) => r,
                        None => {
                            act.push((*inst, [None; 5]));
                            act.last_mut().expect("just pushed")
                        }
                    };
                    row.1[c] = x;
                }
            } else if name == "kpi.irq.count" {
                for (inst, v) in vals {
                    let (Some((irq_name, cpu)), Some(n)) =
                        (self.irq_names.get(inst).cloned(), int_of(Some(v)))
                    else {
                        loss.drop_item("kpi.irq.count values", "instance is not NAME:cpuN");
                        continue;
                    };
                    match irq.iter_mut().find(|(n2, _)| *n2 == irq_name) {
                        Some(r) => r.1.push((cpu, n as u64)),
                        None => irq.push((irq_name, vec![(cpu, n as u64)])),
                    }
                }
            } else {
                loss.drop_item(
                    &format!(
                        "{} values",
                        if name.is_empty() {
                            "unknown metric"
                        } else {
                            &name
                        }
                    ),
                    "KPI lines carry only kpi.proc.* and kpi.irq.count",
                );
            }
        }
        for (pid, cols) in act {
            let mut v = [0i64; 5];
            for (i, c) in cols.iter().enumerate() {
                match c {
                    Some(x) => v[i] = *x,
                    None => loss.degrade("ACT datasets", "a column had no value; written as 0"),
                }
            }
            let d = Dataset::Act {
                pid: pid as i64,
                values: v,
            };
            self.push_dataset(Kind::Act, group, s.time, s.raw_clock, d.render(), out);
        }
        for (name, counts) in irq {
            let d = Dataset::Irq {
                name: name.into(),
                counts: counts.into(),
            };
            self.push_dataset(Kind::Irq, group, s.time, s.raw_clock, d.render(), out);
        }
    }

    pub fn finish(&mut self, _loss: &mut LossReport) -> Vec<Group> {
        let mut out = Vec::new();
        self.flush(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_follows_libdlt_sizes() {
        // 10 + 3 × (100 + 7) = 331 fits in 400; a fourth does not.
        let ds: Vec<Vec<u8>> = (0..5).map(|_| vec![b'x'; 100]).collect();
        assert_eq!(pack(&ds, 400), vec![0..3, 3..5]);
        assert_eq!(pack(&ds, 1390), vec![0..5]);
        // An oversize dataset still gets a message of its own.
        let big = vec![vec![b'y'; 2000], vec![b'z'; 5]];
        assert_eq!(pack(&big, 1390), vec![0..1, 1..2]);
    }

    #[test]
    fn tails_fill_the_split_messages() {
        let ds: Vec<Vec<u8>> = (0..5).map(|i| vec![b'a' + i; 100]).collect();
        // 400 − 331 = 69 bytes free: 27 bytes of the next dataset + marker.
        let t = tail_after(&ds, &(0..3), 400).unwrap();
        assert_eq!(&t[..28], b"ddddddddddddddddddddddddddd.");
        assert_eq!(6 + t.len() + 1, 69);
        // The last message has nothing after it; 40 free bytes are too few.
        assert_eq!(tail_after(&ds, &(3..5), 400), None);
        assert_eq!(tail_after(&ds, &(0..3), 331 + 41), None);
    }
}
