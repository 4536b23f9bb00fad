//! k-way merge of several inputs (any formats) into one time-ordered stream.
//!
//! Each input keeps one timed item in hand; the earliest (ties: input order)
//! goes next, so memory stays flat whatever the inputs' sizes. Definitions
//! without a time pass as soon as they are read, ahead of their input's
//! later data. Every data item gets a `source` extra naming its input.
//!
//! Ids are re-mapped where inputs clash; the policy (`docs/model.md`):
//! - metrics are one metric by (first) name: the same name with the same
//!   type, semantics and units in several inputs is merged (the first
//!   input's pmID, its instance domain shared); the same name with another
//!   type, semantics or units is a clash: one warning, the first definition
//!   kept, the later input's values of it dropped (pmlogextract would
//!   abort, or with `-x` drop the metric altogether);
//! - a metric new by name keeps its pmID unless another input already uses
//!   it; then it gets a free item number in its domain;
//! - instance domains shared by merged metrics are merged: the membership is
//!   the union of each input's current one (an instance id named
//!   differently by two inputs: the first name is kept, one warning);
//!   an indom only one input uses passes as it is (deltas stay deltas);
//! - event types with the same `category.name` and fields are one type;
//!   the same name with other fields stays a type of its own (one warning);
//!   clashing ids are re-numbered;
//! - help and labels go with their (re-mapped) metric or indom; the first
//!   input's text wins where two inputs give one for the same target.

use crate::error::{Diagnostic, Error, Position, Result};
use crate::model::*;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

/// One input of a merge.
pub struct MergeInput {
    pub reader: Box<dyn TraceReader>,
    /// Its name in `source` extras (file name or `--label`).
    pub label: String,
}

struct Src {
    reader: Box<dyn TraceReader>,
    label: String,
    /// The next timed item, not yet re-mapped.
    head: Option<Item>,
    done: bool,
}

/// Per merged indom: each contributing input's membership.
#[derive(Default)]
struct SharedIndom {
    members: Vec<(usize, BTreeMap<InstId, String>)>,
}

#[derive(Default)]
struct Ids {
    types: HashMap<(usize, EventTypeId), EventTypeId>,
    type_defs: HashMap<EventTypeId, Arc<EventType>>,
    types_by_name: HashMap<(String, String), Vec<EventTypeId>>,
    next_type: EventTypeId,
    /// (input, pmID) → merged pmID; None = dropped (clash).
    metrics: HashMap<(usize, MetricId), Option<MetricId>>,
    metric_defs: HashMap<MetricId, Arc<MetricDesc>>,
    metrics_by_name: HashMap<String, MetricId>,
    indoms: HashMap<(usize, IndomId), IndomId>,
    used_indoms: HashSet<IndomId>,
    /// Merged indoms some metric uses.
    metric_indoms: HashSet<IndomId>,
    shared: HashMap<IndomId, SharedIndom>,
    help_done: HashSet<(HelpTarget, bool)>,
    labels_done: HashSet<(LabelTarget, InstId, String)>,
}

pub struct Merge {
    header: Header,
    srcs: Vec<Src>,
    ids: Ids,
    queue: VecDeque<Item>,
    diags: Vec<Diagnostic>,
    warned: HashSet<String>,
}

/// Can streams in these time bases share one time axis?
fn comparable(tb: &TimeBase) -> bool {
    match tb {
        TimeBase::Absolute => true,
        TimeBase::Cycles { hz, anchor } => hz.is_some() && anchor.is_some(),
        TimeBase::Relative { .. } => false,
    }
}

impl Merge {
    pub fn new(inputs: Vec<MergeInput>) -> Result<Merge> {
        if inputs.is_empty() {
            return Err(Error::Usage("nothing to merge".into()));
        }
        let first = inputs[0].reader.header().clone();
        let same_base = inputs
            .iter()
            .all(|i| i.reader.header().time_base == first.time_base);
        if !same_base {
            for i in &inputs {
                let tb = &i.reader.header().time_base;
                if !comparable(tb) {
                    return Err(Error::Usage(format!(
                        "{}: its time is {} while other inputs differ, so there is no common time axis; \
                         give --tsc-hz and --tsc-anchor (or --time-origin) to place it, or merge it separately",
                        i.label,
                        tb.describe()
                    )));
                }
            }
        }
        let mut header = first.clone();
        let same_format = inputs
            .iter()
            .all(|i| i.reader.header().source == first.source);
        if same_format {
            // pmlogextract's rule: the highest version of the inputs.
            header.version = inputs
                .iter()
                .map(|i| i.reader.header().version.clone())
                .max()
                .unwrap_or_default();
        }
        header.start = inputs.iter().filter_map(|i| i.reader.header().start).min();
        // Only what every input says alike describes the merged stream.
        header.extras.retain(|k, v| {
            inputs[1..]
                .iter()
                .all(|i| i.reader.header().extras.get(k) == Some(v))
        });
        if !same_base {
            header.time_base = TimeBase::Absolute;
        }
        header.extras.set(
            keys::MERGE_SOURCES,
            ExtraValue::List(
                inputs
                    .iter()
                    .map(|i| ExtraValue::Str(i.label.clone()))
                    .collect(),
            ),
        );
        let srcs = inputs
            .into_iter()
            .map(|i| Src {
                reader: i.reader,
                label: i.label,
                head: None,
                done: false,
            })
            .collect();
        Ok(Merge {
            header,
            srcs,
            ids: Ids::default(),
            queue: VecDeque::new(),
            diags: Vec::new(),
            warned: HashSet::new(),
        })
    }

    /// One warning per clash, positioned at the input that brought it.
    fn warn_once(&mut self, s: usize, key: String, msg: String) {
        if self.warned.insert(key) {
            let pos = Position::new(self.srcs[s].label.as_str());
            self.diags.push(Diagnostic::warning(pos, msg));
        }
    }

    /// Pull from input `s` until it has a timed item in hand; untimed
    /// definitions go out on the way.
    fn fill(&mut self, s: usize) -> Result<()> {
        while self.srcs[s].head.is_none() && !self.srcs[s].done {
            match self.srcs[s].reader.next_item()? {
                None => {
                    self.srcs[s].done = true;
                    let d = self.srcs[s].reader.diagnostics().to_vec();
                    self.diags.extend(d);
                }
                Some(item) if item.time().is_some() => self.srcs[s].head = Some(item),
                Some(item) => self.emit(s, item),
            }
        }
        Ok(())
    }

    /// An event of input `s` with the merged type id and its source tag.
    fn event(&mut self, s: usize, e: &mut Event) {
        e.type_id = (self.ids.types.get(&(s, e.type_id)).copied()).unwrap_or(e.type_id);
        self.tag(s, &mut e.extras);
    }

    /// Re-map one item of input `s` and queue what it becomes.
    fn emit(&mut self, s: usize, item: Item) {
        match item {
            Item::EventType(t) => self.event_type(s, t),
            Item::Metric(m) => self.metric(s, m),
            Item::Indom(u) => self.indom(s, u),
            Item::Help(mut h) => {
                h.target = match h.target {
                    HelpTarget::Metric(p) => match self.ids.metrics.get(&(s, p)) {
                        Some(Some(n)) => HelpTarget::Metric(*n),
                        Some(None) => return,
                        None => HelpTarget::Metric(p),
                    },
                    HelpTarget::Indom(i) => HelpTarget::Indom(self.indom_id(s, i)),
                };
                if self.ids.help_done.insert((h.target, h.oneline)) {
                    self.queue.push_back(Item::Help(h));
                }
            }
            Item::Labels(mut l) => {
                l.target = match l.target {
                    LabelTarget::Item(p) => match self.ids.metrics.get(&(s, p)) {
                        Some(Some(n)) => LabelTarget::Item(*n),
                        Some(None) => return,
                        None => LabelTarget::Item(p),
                    },
                    LabelTarget::Indom(i) => LabelTarget::Indom(self.indom_id(s, i)),
                    LabelTarget::Instances(i) => LabelTarget::Instances(self.indom_id(s, i)),
                    t => t,
                };
                if self
                    .ids
                    .labels_done
                    .insert((l.target, l.inst, l.json.clone()))
                {
                    self.queue.push_back(Item::Labels(l));
                }
            }
            Item::Event(mut e) => {
                self.event(s, &mut e);
                self.queue.push_back(Item::Event(e));
            }
            Item::EventRun(mut r) => {
                self.event(s, &mut r.event);
                self.queue.push_back(Item::EventRun(r));
            }
            Item::Sample(mut smp) => {
                let ids = &self.ids;
                smp.metrics
                    .retain_mut(|mv| match ids.metrics.get(&(s, mv.metric)) {
                        Some(Some(n)) => {
                            mv.metric = *n;
                            true
                        }
                        Some(None) => false,
                        None => true,
                    });
                for mv in &mut smp.metrics {
                    if let Ok(vals) = &mut mv.values {
                        for (_, v) in vals.iter_mut() {
                            if let Value::Events(recs) = v {
                                for r in recs {
                                    for p in &mut r.params {
                                        if let Some(Some(n)) = ids.metrics.get(&(s, p.metric)) {
                                            p.metric = *n;
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                if smp.metrics.is_empty() {
                    return;
                }
                self.tag(s, &mut smp.extras);
                self.queue.push_back(Item::Sample(smp));
            }
            Item::Mark(mut m) => {
                self.tag(s, &mut m.extras);
                self.queue.push_back(Item::Mark(m));
            }
            Item::Annotation(mut a) => {
                self.tag(s, &mut a.extras);
                self.queue.push_back(Item::Annotation(a));
            }
        }
    }

    fn tag(&self, s: usize, x: &mut Extras) {
        x.set(keys::SOURCE, ExtraValue::Str(self.srcs[s].label.clone()));
    }

    fn event_type(&mut self, s: usize, t: Arc<EventType>) {
        let key = (t.category.clone(), t.name.clone());
        if let Some(&id) = self.ids.types.get(&(s, t.id)) {
            // Re-issued by the same input: same merged id, new content.
            let same = self
                .ids
                .type_defs
                .get(&id)
                .is_some_and(|d| **d == EventType { id, ..(*t).clone() });
            if !same {
                self.define_type(id, &t);
            }
            return;
        }
        let same = self.ids.types_by_name.get(&key).and_then(|ids| {
            ids.iter().copied().find(|id| {
                self.ids
                    .type_defs
                    .get(id)
                    .is_some_and(|d| d.fields == t.fields && d.framing == t.framing)
            })
        });
        let id = match same {
            Some(id) => {
                self.ids.types.insert((s, t.id), id);
                return;
            }
            None => {
                if self.ids.types_by_name.contains_key(&key) {
                    self.warn_once(
                        s,
                        format!("type {}.{}", t.category, t.name),
                        format!(
                            "merge: event type {}.{} of {} has other fields than in an earlier input: kept as a type of its own",
                            t.category, t.name, self.srcs[s].label
                        ),
                    );
                }
                if self.ids.type_defs.contains_key(&t.id) {
                    while self.ids.type_defs.contains_key(&self.ids.next_type) {
                        self.ids.next_type += 1;
                    }
                    self.ids.next_type
                } else {
                    t.id
                }
            }
        };
        self.ids.types.insert((s, t.id), id);
        self.ids.types_by_name.entry(key).or_default().push(id);
        self.define_type(id, &t);
    }

    fn define_type(&mut self, id: EventTypeId, t: &Arc<EventType>) {
        let def = if t.id == id {
            t.clone()
        } else {
            Arc::new(EventType {
                id,
                ..(**t).clone()
            })
        };
        self.ids.type_defs.insert(id, def.clone());
        self.queue.push_back(Item::EventType(def));
    }

    /// The merged id of input `s`'s indom `i` (allocated on first sight).
    fn indom_id(&mut self, s: usize, i: IndomId) -> IndomId {
        if let Some(&m) = self.ids.indoms.get(&(s, i)) {
            return m;
        }
        let mut m = i;
        while self.ids.used_indoms.contains(&m) {
            m = (m & !0x3f_ffff) | ((m + 1) & 0x3f_ffff);
        }
        self.ids.used_indoms.insert(m);
        self.ids.indoms.insert((s, i), m);
        m
    }

    fn metric(&mut self, s: usize, m: Arc<MetricDesc>) {
        if let Some(prev) = self.ids.metrics.get(&(s, m.id)).copied() {
            // Re-issued (more names): pass it on under the merged id.
            if let Some(id) = prev {
                let indom = m.indom.map(|i| self.indom_id(s, i));
                let d = MetricDesc {
                    id,
                    indom,
                    ..(*m).clone()
                };
                if self.ids.metric_defs.get(&id).map(|x| **x != d) != Some(false) {
                    let d = Arc::new(d);
                    self.ids.metric_defs.insert(id, d.clone());
                    self.queue.push_back(Item::Metric(d));
                }
            }
            return;
        }
        let name = m.name().to_string();
        if let Some(&id) = self.ids.metrics_by_name.get(&name) {
            let Some(first) = self.ids.metric_defs.get(&id).cloned() else {
                return;
            };
            if first.vtype == m.vtype && first.sem == m.sem && first.units == m.units {
                self.ids.metrics.insert((s, m.id), Some(id));
                match (first.indom, m.indom) {
                    (Some(fi), Some(mi)) => {
                        let prev = self.ids.indoms.get(&(s, mi)).copied();
                        if let Some(prev) = prev.filter(|p| self.ids.metric_indoms.contains(p)) {
                            if prev != fi {
                                self.warn_once(
                        s,
                                    format!("indom {name}"),
                                    format!(
                                        "merge: metric {name} of {} uses an instance domain already merged elsewhere; its instances are listed there",
                                        self.srcs[s].label
                                    ),
                                );
                            }
                        } else {
                            // Seen only in help or labels so far: bind it now.
                            self.ids.indoms.insert((s, mi), fi);
                        }
                    }
                    (None, None) => {}
                    _ => {
                        self.warn_once(
                        s,
                            format!("metric {name}"),
                            format!(
                                "merge: metric {name} of {} is singular in one input and has instances in another: the first definition is kept, {}'s values of it are dropped",
                                self.srcs[s].label, self.srcs[s].label
                            ),
                        );
                        self.ids.metrics.insert((s, m.id), None);
                    }
                }
                return;
            }
            self.warn_once(
                        s,
                format!("metric {name}"),
                format!(
                    "merge: metric {name} of {} has type {:?}, semantics {:?}, units \"{}\" where an earlier input has {:?}, {:?}, \"{}\": the first definition is kept, {}'s values of it are dropped",
                    self.srcs[s].label,
                    m.vtype,
                    m.sem,
                    m.units.pcp_str(),
                    first.vtype,
                    first.sem,
                    first.units.pcp_str(),
                    self.srcs[s].label
                ),
            );
            self.ids.metrics.insert((s, m.id), None);
            return;
        }
        let id = self.free_pmid(m.id);
        let indom = m.indom.map(|i| self.indom_id(s, i));
        if let Some(i) = indom {
            self.ids.metric_indoms.insert(i);
        }
        let d = Arc::new(MetricDesc {
            id,
            indom,
            ..(*m).clone()
        });
        self.ids.metrics.insert((s, m.id), Some(id));
        self.ids.metrics_by_name.insert(name, id);
        self.ids.metric_defs.insert(id, d.clone());
        self.queue.push_back(Item::Metric(d));
    }

    /// `p` if free, else the next free item number in its domain.
    fn free_pmid(&self, p: MetricId) -> MetricId {
        if !self.ids.metric_defs.contains_key(&p) {
            return p;
        }
        let domain = p >> 22;
        let mut k = p & 0x3f_ffff;
        loop {
            k = (k + 1) & 0x3f_ffff;
            let c = (domain << 22) | k;
            if !self.ids.metric_defs.contains_key(&c) || c == p {
                return c;
            }
        }
    }

    fn indom(&mut self, s: usize, mut u: IndomUpdate) {
        let m = self.indom_id(s, u.id);
        u.id = m;
        let sh = self.ids.shared.entry(m).or_default();
        let k = match sh.members.iter().position(|x| x.0 == s) {
            Some(k) => k,
            None => {
                sh.members.push((s, BTreeMap::new()));
                sh.members.len() - 1
            }
        };
        let mine = &mut sh.members[k].1;
        u.apply_to(mine);
        if sh.members.len() == 1 {
            self.queue.push_back(Item::Indom(u));
            return;
        }
        // Shared by several inputs: the union, the first input's names first.
        let mut union: BTreeMap<InstId, String> = BTreeMap::new();
        let mut clash = None;
        for (_, mem) in &sh.members {
            for (id, n) in mem {
                match union.get(id) {
                    Some(x) if x != n => clash = Some(*id),
                    Some(_) => {}
                    None => {
                        union.insert(*id, n.clone());
                    }
                }
            }
        }
        if let Some(id) = clash {
            self.warn_once(
                        s,
                format!("inst {m} {id}"),
                format!(
                    "merge: instance {id} of instance domain {m} is named differently by two inputs; the first name is kept"
                ),
            );
        }
        self.queue.push_back(Item::Indom(IndomUpdate {
            time: u.time,
            id: m,
            kind: IndomKind::Full,
            instances: union
                .into_iter()
                .map(|(id, name)| Instance { id, name })
                .collect(),
            removed: Vec::new(),
            extras: Extras::default(),
        }));
    }
}

impl TraceReader for Merge {
    fn header(&self) -> &Header {
        &self.header
    }
    fn next_item(&mut self) -> Result<Option<Item>> {
        loop {
            if let Some(it) = self.queue.pop_front() {
                return Ok(Some(it));
            }
            for s in 0..self.srcs.len() {
                self.fill(s)?;
            }
            if !self.queue.is_empty() {
                continue;
            }
            let next = (0..self.srcs.len())
                .filter_map(|s| {
                    self.srcs[s]
                        .head
                        .as_ref()
                        .and_then(Item::time)
                        .map(|t| (t, s))
                })
                .min();
            let Some((_, s)) = next else {
                return Ok(None);
            };
            if let Some(item) = self.srcs[s].head.take() {
                self.emit(s, item);
            }
        }
    }
    fn diagnostics(&self) -> &[Diagnostic] {
        &self.diags
    }
    fn native_counts(&self) -> Vec<(String, u64)> {
        self.srcs
            .iter()
            .flat_map(|s| {
                s.reader
                    .native_counts()
                    .into_iter()
                    .map(|(k, v)| (format!("{}: {k}", s.label), v))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(label: &str, items: Vec<Item>) -> MergeInput {
        MergeInput {
            reader: Box::new(VecReader::new(Trace {
                header: Header::new(FormatId::Pcp, "3"),
                items,
            })),
            label: label.into(),
        }
    }

    fn metric(id: MetricId, name: &str, vtype: ValueType, indom: Option<IndomId>) -> Item {
        let mut d = MetricDesc::new(id, name, vtype, Semantics::Instant, Units::NONE);
        d.indom = indom;
        Item::Metric(Arc::new(d))
    }

    fn sample(t: i64, m: MetricId, v: u64) -> Item {
        Item::Sample(Sample {
            time: Timestamp(t),
            raw_clock: None,
            metrics: vec![MetricValues {
                metric: m,
                values: Ok(vec![(PM_IN_NULL, Value::U64(v))]),
            }],
            extras: Extras::default(),
        })
    }

    fn all(m: &mut Merge) -> Vec<Item> {
        let mut v = Vec::new();
        while let Some(i) = m.next_item().unwrap() {
            v.push(i);
        }
        v
    }

    #[test]
    fn time_order_tags_and_pmid_policy() {
        let a = input(
            "a",
            vec![
                metric(10, "x", ValueType::U64, None),
                metric(11, "y", ValueType::U64, None),
                sample(1, 10, 1),
                sample(5, 11, 5),
            ],
        );
        let b = input(
            "b",
            vec![
                // Same name, same type: one metric (a's pmID).
                metric(20, "x", ValueType::U64, None),
                // New name on a pmID a already uses: re-numbered.
                metric(10, "z", ValueType::U64, None),
                // Same name, other type: kept from a, b's values dropped.
                metric(12, "y", ValueType::F64, None),
                sample(2, 20, 2),
                sample(3, 10, 3),
                sample(4, 12, 4),
            ],
        );
        let mut m = Merge::new(vec![a, b]).unwrap();
        let items = all(&mut m);
        let data: Vec<(i64, MetricId, String)> = items
            .iter()
            .filter_map(|i| match i {
                Item::Sample(s) => Some((
                    s.time.0,
                    s.metrics[0].metric,
                    s.extras.str(keys::SOURCE).unwrap().to_string(),
                )),
                _ => None,
            })
            .collect();
        let z = items
            .iter()
            .find_map(|i| match i {
                Item::Metric(d) if d.name() == "z" => Some(d.id),
                _ => None,
            })
            .unwrap();
        assert_ne!(z, 10);
        assert_eq!(
            data,
            vec![
                (1, 10, "a".into()),
                (2, 10, "b".into()),
                (3, z, "b".into()),
                (5, 11, "a".into())
            ]
        );
        assert_eq!(m.diagnostics().len(), 1, "{:?}", m.diagnostics());
        assert!(m.diagnostics()[0].msg.contains("metric y"));
    }

    #[test]
    fn shared_indoms_are_the_union() {
        let ind = |t, insts: &[(i32, &str)]| {
            let instances = insts.iter().map(|(i, n)| Instance::new(*i, *n)).collect();
            Item::Indom(IndomUpdate::new(
                Timestamp(t),
                7,
                IndomKind::Full,
                instances,
            ))
        };
        let a = input(
            "a",
            vec![
                metric(1, "m", ValueType::U64, Some(7)),
                ind(1, &[(1, "one")]),
            ],
        );
        let b = input(
            "b",
            vec![metric(2, "m", ValueType::U64, Some(9)), {
                let Item::Indom(mut u) = ind(2, &[(2, "two")]) else {
                    unreachable!()
                };
                u.id = 9;
                Item::Indom(u)
            }],
        );
        let mut m = Merge::new(vec![a, b]).unwrap();
        let last = all(&mut m)
            .into_iter()
            .filter_map(|i| match i {
                Item::Indom(u) => Some(u),
                _ => None,
            })
            .last()
            .unwrap();
        assert_eq!(last.id, 7);
        assert_eq!(last.instances.len(), 2);
    }

    #[test]
    fn event_types_unify_by_name_and_fields_and_renumber_on_clash() {
        use crate::model::{Field, FieldType};
        let ty = |id, name: &str, fields: Vec<Field>| {
            Item::EventType(Arc::new(EventType::new(id, "core", name, fields)))
        };
        let ev = |t, ty| {
            Item::Event(Event {
                time: Timestamp(t),
                raw_clock: None,
                type_id: ty,
                cpu: None,
                stream: None,
                fields: vec![],
                extras: Extras::default(),
            })
        };
        let f = |n: &str| vec![Field::new(n, FieldType::Uint(4))];
        let a = input(
            "a",
            vec![
                ty(0, "irq", f("irq")),
                ty(1, "tick", vec![]),
                ev(1, 0),
                ev(3, 1),
            ],
        );
        let b = input(
            "b",
            vec![
                // Same name and fields as a's type 0: the same type.
                ty(5, "irq", f("irq")),
                // Same name, other fields: a type of its own, new id.
                ty(0, "tick", f("n")),
                ev(2, 5),
                ev(4, 0),
            ],
        );
        let mut m = Merge::new(vec![a, b]).unwrap();
        let items = all(&mut m);
        let types: Vec<(EventTypeId, String, usize)> = items
            .iter()
            .filter_map(|i| match i {
                Item::EventType(t) => Some((t.id, t.name.clone(), t.fields.len())),
                _ => None,
            })
            .collect();
        assert_eq!(types.len(), 3, "{types:?}");
        let b_tick = types.iter().find(|t| t.1 == "tick" && t.2 == 1).unwrap().0;
        assert!(b_tick != 0 && b_tick != 1, "{types:?}");
        let evs: Vec<(i64, EventTypeId)> = items
            .iter()
            .filter_map(|i| match i {
                Item::Event(e) => Some((e.time.0, e.type_id)),
                _ => None,
            })
            .collect();
        assert_eq!(evs, vec![(1, 0), (2, 0), (3, 1), (4, b_tick)]);
        assert_eq!(m.diagnostics().len(), 1, "{:?}", m.diagnostics());
        assert!(m.diagnostics()[0].msg.contains("core.tick"));
        assert_eq!(m.diagnostics()[0].pos.file, std::path::PathBuf::from("b"));
    }

    #[test]
    fn relative_time_refuses_to_merge_with_absolute() {
        let mut h = Header::new(FormatId::Kpi, "1");
        h.time_base = TimeBase::Relative {
            origin: "first group".into(),
        };
        let rel = MergeInput {
            reader: Box::new(VecReader::new(Trace {
                header: h,
                items: vec![],
            })),
            label: "bare.kpi".into(),
        };
        let err = Merge::new(vec![input("a", vec![]), rel])
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("bare.kpi") && err.contains("--time-origin"),
            "{err}"
        );
    }
}
