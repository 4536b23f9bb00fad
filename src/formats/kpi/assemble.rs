//! KPI messages → model items. Shared by the KPI text reader and the DLT
//! reader. Group state is kept per type, since groups interleave (§3.1).

use super::dataset::{sanity_flags, Dataset, Kind};
use super::schema::{self, X_BEG_RAW, X_BEG_TIME, X_GROUP, X_KIND};
use super::truncated::{is_truncated_duplicate, Follow};
use crate::model::*;
use std::collections::{BTreeMap, HashMap};

/// An open ACT or IRQ group: values collect until END.
#[derive(Debug)]
struct Open {
    time: Timestamp,
    raw: Option<u64>,
    group: u64,
    act: Vec<(i64, [i64; 5])>,
    irq: Vec<(String, Vec<(u32, u64)>)>,
}

#[derive(Debug, Default)]
pub struct Assembler {
    defs_sent: bool,
    open: HashMap<Kind, Open>,
    /// Current `kpi.proc` membership: pid → command line.
    procs: HashMap<i64, Vec<u8>>,
    irq_ids: HashMap<(String, u32), InstId>,
    next_group: u64,
    counts: BTreeMap<String, u64>,
    truncated: u64,
    /// The truncated duplicate of each type waiting for its whole dataset.
    follow: Follow,
    /// Sanity flags (spec §9.4): count and first example per flag.
    flags: BTreeMap<&'static str, (u64, String)>,
    /// Problems in the data (bad datasets, sanity flags); not fatal.
    pub warnings: Vec<String>,
}

impl Assembler {
    pub fn new() -> Assembler {
        Assembler::default()
    }

    /// Datasets seen per type (truncated duplicates not counted).
    pub fn counts(&self) -> &BTreeMap<String, u64> {
        &self.counts
    }

    /// Truncated duplicates dropped so far.
    pub fn truncated(&self) -> u64 {
        self.truncated
    }

    fn defs(&mut self, time: Timestamp, out: &mut Vec<Item>) {
        if self.defs_sent {
            return;
        }
        self.defs_sent = true;
        out.extend(schema::definitions());
        for id in [schema::PROC_INDOM, schema::IRQ_INDOM] {
            out.push(Item::Indom(IndomUpdate {
                time,
                id,
                kind: IndomKind::Full,
                instances: vec![],
                removed: vec![],
                extras: Extras::default(),
            }));
        }
    }

    fn group_extras(kind: Kind, group: u64) -> Extras {
        let mut x = Extras::default();
        x.set(X_KIND, ExtraValue::Str(kind.name().into()));
        x.set(X_GROUP, ExtraValue::U64(group));
        x
    }

    /// One KPI message; `args[0]` is the type, sync messages are
    /// `[type, BEG|END]`. Truncated duplicates are dropped here.
    pub fn message(
        &mut self,
        args: &[&[u8]],
        time: Timestamp,
        raw_clock: Option<u64>,
        out: &mut Vec<Item>,
    ) -> Result<(), String> {
        let Some(first) = args.first() else {
            return Err("empty KPI message".into());
        };
        let kind = Kind::parse(first).ok_or_else(|| {
            format!(
                "not a KPI message: first argument {:?}",
                String::from_utf8_lossy(first)
            )
        })?;
        self.defs(time, out);
        if args.len() == 2 && (args[1] == b"BEG" || args[1] == b"END") {
            if let Some(w) = self.follow.sync(kind) {
                self.warnings.push(w);
            }
            if args[1] == b"BEG" {
                if self.open.contains_key(&kind) {
                    self.warnings.push(format!(
                        "{} BEG inside an open {} group: closing it",
                        kind.name(),
                        kind.name()
                    ));
                    self.close(kind, out);
                }
                self.open_group(kind, time, raw_clock);
            } else if self.open.contains_key(&kind) {
                self.close(kind, out);
            } else {
                self.warnings
                    .push(format!("{} END without BEG", kind.name()));
            }
            return Ok(());
        }
        if let Some(w) = self.follow.data(kind, &args[1..]) {
            self.warnings.push(w);
        }
        // Parse every dataset first so a bad one leaves no half-applied state.
        let mut parsed = Vec::with_capacity(args.len() - 1);
        let mut truncated = 0;
        for arg in &args[1..] {
            if is_truncated_duplicate(arg) {
                truncated += 1;
                continue;
            }
            parsed.push(Dataset::parse(kind, arg)?);
        }
        self.truncated += truncated;
        // Data outside a group (bare lines without sync messages) forms a
        // group of its own.
        let implicit = !self.open.contains_key(&kind);
        if implicit {
            self.open_group(kind, time, raw_clock);
        }
        let (group, beg_time, beg_raw) = {
            let o = &self.open[&kind];
            (o.group, o.time, o.raw)
        };
        let mut adds: Vec<Instance> = Vec::new();
        let mut irq_adds: Vec<Instance> = Vec::new();
        let mut removed: Vec<InstId> = Vec::new();
        let mut events: Vec<Item> = Vec::new();
        for ds in parsed {
            *self.counts.entry(kind.name().to_string()).or_default() += 1;
            for f in sanity_flags(&ds) {
                let e = self.flags.entry(f).or_insert_with(|| {
                    (
                        0,
                        format!("{} {}", kind.name(), String::from_utf8_lossy(&ds.render())),
                    )
                });
                e.0 += 1;
            }
            let ev = |type_id, fields| {
                let mut extras = Self::group_extras(kind, group);
                if beg_time != time {
                    extras.set(X_BEG_TIME, ExtraValue::I64(beg_time.0));
                }
                if beg_raw != raw_clock {
                    if let Some(r) = beg_raw {
                        extras.set(X_BEG_RAW, ExtraValue::U64(r));
                    }
                }
                Item::Event(Event {
                    time,
                    raw_clock,
                    type_id,
                    cpu: None,
                    stream: None,
                    fields,
                    extras,
                })
            };
            match ds {
                Dataset::New { pid, ppid, cmdline } => {
                    self.add_proc(pid, &cmdline, &mut adds);
                    events.push(ev(
                        schema::NEW_TYPE,
                        vec![Value::I64(pid), Value::I64(ppid), text_value(&cmdline)],
                    ));
                }
                Dataset::Stp { pid } => {
                    if self.procs.remove(&pid).is_some() {
                        if let Ok(id) = InstId::try_from(pid) {
                            removed.push(id);
                        }
                    }
                    events.push(ev(schema::STP_TYPE, vec![Value::I64(pid)]));
                }
                Dataset::Chk { pid, cmdline } => {
                    if !self.procs.contains_key(&pid) {
                        self.add_proc(pid, &cmdline, &mut adds);
                    }
                    events.push(ev(
                        schema::CHK_TYPE,
                        vec![Value::I64(pid), text_value(&cmdline)],
                    ));
                }
                Dataset::Act { pid, values } => {
                    if !self.procs.contains_key(&pid) {
                        // ACT for a process whose NEW we never saw.
                        self.add_proc(pid, b"", &mut adds);
                    }
                    if let Some(o) = self.open.get_mut(&kind) {
                        o.act.push((pid, values));
                    }
                }
                Dataset::Irq { name, counts } => {
                    for (cpu, _) in &counts {
                        let key = (name.clone(), *cpu);
                        if !self.irq_ids.contains_key(&key) {
                            let id = self.irq_ids.len() as InstId;
                            self.irq_ids.insert(key, id);
                            irq_adds.push(Instance {
                                id,
                                name: schema::irq_instance_name(&name, *cpu),
                            });
                        }
                    }
                    if let Some(o) = self.open.get_mut(&kind) {
                        o.irq.push((name, counts));
                    }
                }
            }
        }
        // One update per indom and message: PCP wants no two records for
        // one indom at one time.
        if !irq_adds.is_empty() {
            out.push(Item::Indom(IndomUpdate {
                time,
                id: schema::IRQ_INDOM,
                kind: IndomKind::Delta,
                instances: irq_adds,
                removed: vec![],
                extras: Extras::default(),
            }));
        }
        if !adds.is_empty() {
            out.push(Item::Indom(IndomUpdate {
                time,
                id: schema::PROC_INDOM,
                kind: IndomKind::Delta,
                instances: adds,
                removed: vec![],
                extras: Extras::default(),
            }));
        }
        out.extend(events);
        if !removed.is_empty() {
            out.push(Item::Indom(IndomUpdate {
                time,
                id: schema::PROC_INDOM,
                kind: IndomKind::Delta,
                instances: vec![],
                removed,
                extras: Extras::default(),
            }));
        }
        if implicit {
            self.close(kind, out);
        }
        Ok(())
    }

    /// Start a group of `kind` (numbered in order of opening).
    fn open_group(&mut self, kind: Kind, time: Timestamp, raw: Option<u64>) {
        let group = self.next_group;
        self.next_group += 1;
        self.open.insert(
            kind,
            Open {
                time,
                raw,
                group,
                act: vec![],
                irq: vec![],
            },
        );
    }

    fn add_proc(&mut self, pid: i64, cmdline: &[u8], adds: &mut Vec<Instance>) {
        let Ok(id) = InstId::try_from(pid) else {
            self.warnings.push(format!("pid {pid} out of range"));
            return;
        };
        self.procs.insert(pid, cmdline.to_vec());
        adds.retain(|i| i.id != id);
        adds.push(Instance {
            id,
            name: schema::proc_instance_name(pid, &String::from_utf8_lossy(cmdline)),
        });
    }

    /// Close the open group of `kind`, emitting its sample (ACT, IRQ).
    fn close(&mut self, kind: Kind, out: &mut Vec<Item>) {
        let Some(o) = self.open.remove(&kind) else {
            return;
        };
        let metrics = match kind {
            Kind::Act => {
                let mut cols: Vec<Vec<(InstId, Value)>> = vec![Vec::new(); 5];
                for (pid, v) in &o.act {
                    let inst = *pid as InstId;
                    for (c, col) in cols.iter_mut().enumerate() {
                        // cpu, io_bytes, io_wait are unsigned in dlt-kpi (%lu).
                        let val = if c == 1 || c == 2 {
                            Value::I64(v[c])
                        } else {
                            Value::U64(v[c] as u64)
                        };
                        col.push((inst, val));
                    }
                }
                if o.act.is_empty() {
                    vec![]
                } else {
                    schema::ACT_METRICS
                        .iter()
                        .zip(cols)
                        .map(|(m, vals)| MetricValues {
                            metric: *m,
                            values: Ok(vals),
                        })
                        .collect()
                }
            }
            Kind::Irq => {
                let vals: Vec<(InstId, Value)> = o
                    .irq
                    .iter()
                    .flat_map(|(name, counts)| {
                        counts.iter().filter_map(|(cpu, n)| {
                            self.irq_ids
                                .get(&(name.clone(), *cpu))
                                .map(|id| (*id, Value::U64(*n)))
                        })
                    })
                    .collect();
                if vals.is_empty() {
                    vec![]
                } else {
                    vec![MetricValues {
                        metric: schema::IRQ_COUNT,
                        values: Ok(vals),
                    }]
                }
            }
            _ => return,
        };
        if metrics.is_empty() {
            return;
        }
        out.push(Item::Sample(Sample {
            time: o.time,
            raw_clock: o.raw,
            metrics,
            extras: Self::group_extras(kind, o.group),
        }));
    }

    /// End of input: close groups left open (a cut capture).
    pub fn finish(&mut self, out: &mut Vec<Item>) {
        for k in Kind::ALL {
            if let Some(w) = self.follow.sync(k) {
                self.warnings.push(w);
            }
        }
        for (flag, (n, example)) in std::mem::take(&mut self.flags) {
            self.warnings
                .push(format!("{n} datasets flagged: {flag} (first: {example})"));
        }
        let mut kinds: Vec<Kind> = self.open.keys().copied().collect();
        kinds.sort();
        for k in kinds {
            self.warnings.push(format!(
                "{} group not closed by END at end of input",
                k.name()
            ));
            self.close(k, out);
        }
    }
}

/// Command lines are bytes; keep them as text when they are UTF-8.
pub fn text_value(b: &[u8]) -> Value {
    match std::str::from_utf8(b) {
        Ok(s) => Value::Str(s.to_string()),
        Err(_) => Value::Bytes(b.to_vec()),
    }
}
