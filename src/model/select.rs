//! What the filters select (`--event`, `--metric`, `--instance`, `--cpu`
//! and their `--exclude-…` counterparts), and the item filter that applies
//! a selection to a stream. It lives with the model so that a format's
//! native listing can apply the very same rules as the `Filter` stage.
//!
//! Rules (also in `docs/model.md`):
//! - `--event` and `--metric` *select*: once either is given, only the
//!   events and metric values they name are kept (their union), and
//!   annotations go too. Without them every event and value is kept.
//! - `--instance` and `--cpu` *narrow*: `--instance` keeps only metric values
//!   of matching instances (singular values have no instance, so they go),
//!   `--cpu` keeps only events on the listed CPUs (events without a CPU go).
//! - `--exclude-…` removes what it matches, after the above; values and
//!   events that lack what it tests (no instance, no CPU) stay.
//! - Marks (discontinuities) always stay.
//! - Definitions that nothing selected are not passed on: event types,
//!   metric descriptors, their help and labels, instance domains no kept
//!   metric uses, instances that are not selected.

use super::*;
use std::collections::{HashMap, HashSet, VecDeque};

/// A shell-style pattern: `*` any run of characters (dots included), `?`
/// one character, `[abc]`/`[a-z]`/`[!x]` a class; anything else literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob(String);

impl Glob {
    pub fn new(p: &str) -> Glob {
        Glob(p.to_string())
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
    pub fn is_literal(&self) -> bool {
        !self.0.contains(['*', '?', '['])
    }
    pub fn matches(&self, s: &str) -> bool {
        glob_match(self.0.as_bytes(), s.as_bytes())
    }
    /// PCP-style: the pattern names the metric or one of its ancestors
    /// (`kernel.all` selects `kernel.all.load`, as pmdumplog's metric
    /// arguments do).
    pub fn matches_subtree(&self, name: &str) -> bool {
        self.matches(name)
            || name
                .match_indices('.')
                .any(|(k, _)| self.matches(&name[..k]))
    }
}

/// Iterative glob with single-star backtracking (linear for `*`-only patterns).
fn glob_match(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() {
            match p[pi] {
                b'*' => {
                    star = Some((pi, si));
                    pi += 1;
                    continue;
                }
                b'?' => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                b'[' => {
                    if let Some((ok, next)) = class(&p[pi..], s[si]) {
                        if ok {
                            pi += next;
                            si += 1;
                            continue;
                        }
                    } else if s[si] == b'[' {
                        pi += 1;
                        si += 1;
                        continue;
                    }
                }
                c if c == s[si] => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, ss)) => {
                pi = sp + 1;
                si = ss + 1;
                star = Some((sp, ss + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Does `c` match the class at the start of `p` (`[…]`)? Also the class's
/// length. `None` when `p` holds no closed class (then `[` is literal).
fn class(p: &[u8], c: u8) -> Option<(bool, usize)> {
    let mut i = 1;
    let neg = matches!(p.get(1), Some(b'!' | b'^'));
    if neg {
        i += 1;
    }
    let mut hit = false;
    let mut first = true;
    while i < p.len() {
        if p[i] == b']' && !first {
            return Some((hit != neg, i + 1));
        }
        first = false;
        if i + 2 < p.len() && p[i + 1] == b'-' && p[i + 2] != b']' {
            hit |= (p[i]..=p[i + 2]).contains(&c);
            i += 3;
        } else {
            hit |= p[i] == c;
            i += 1;
        }
    }
    None
}

/// A CPU list: `0,2-3,7`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuList(pub Vec<(u32, u32)>);

impl CpuList {
    pub fn parse(s: &str) -> std::result::Result<CpuList, String> {
        let bad = || format!("bad CPU list {s:?} (want e.g. 0,2-3)");
        let mut v = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            let a: u32 = a.trim().parse().map_err(|_| bad())?;
            let b: u32 = b.trim().parse().map_err(|_| bad())?;
            if a > b {
                return Err(bad());
            }
            v.push((a, b));
        }
        Ok(CpuList(v))
    }
    pub fn contains(&self, cpu: u32) -> bool {
        self.0.iter().any(|&(a, b)| (a..=b).contains(&cpu))
    }
}

/// What to keep. Empty = everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// `category.name` of event types.
    pub events: Vec<Glob>,
    pub exclude_events: Vec<Glob>,
    /// Metric names; a pattern also selects the subtree below what it names.
    pub metrics: Vec<Glob>,
    pub exclude_metrics: Vec<Glob>,
    /// Instance names (the whole name or its first word) or ids.
    pub instances: Vec<Glob>,
    pub exclude_instances: Vec<Glob>,
    pub cpus: Option<CpuList>,
    pub exclude_cpus: Option<CpuList>,
}

impl Selection {
    pub fn is_empty(&self) -> bool {
        *self == Selection::default()
    }
    /// `--event` or `--metric` was given: only what they name is kept.
    pub fn selects(&self) -> bool {
        !self.events.is_empty() || !self.metrics.is_empty()
    }
    /// Options about events themselves were given (`--event`, `--cpu`, …).
    pub fn names_events(&self) -> bool {
        !self.events.is_empty()
            || !self.exclude_events.is_empty()
            || self.cpus.is_some()
            || self.exclude_cpus.is_some()
    }
    /// Options about metrics themselves were given.
    pub fn names_metrics(&self) -> bool {
        !self.metrics.is_empty()
            || !self.exclude_metrics.is_empty()
            || !self.instances.is_empty()
            || !self.exclude_instances.is_empty()
    }
    /// Anything that touches events.
    pub fn filters_events(&self) -> bool {
        self.selects()
            || !self.exclude_events.is_empty()
            || self.cpus.is_some()
            || self.exclude_cpus.is_some()
    }
    /// Anything that touches metric values or their definitions.
    pub fn filters_metrics(&self) -> bool {
        self.selects()
            || !self.exclude_metrics.is_empty()
            || !self.instances.is_empty()
            || !self.exclude_instances.is_empty()
    }
    pub fn filters_instances(&self) -> bool {
        !self.instances.is_empty() || !self.exclude_instances.is_empty()
    }
    /// Is an event type (`category.name`) kept?
    pub fn event_name(&self, full: &str) -> bool {
        let inc = if self.selects() {
            self.events.iter().any(|g| g.matches(full))
        } else {
            true
        };
        inc && !self.exclude_events.iter().any(|g| g.matches(full))
    }
    pub fn event_type(&self, t: &EventType) -> bool {
        self.event_name(&format!("{}.{}", t.category, t.name))
    }
    /// Is a metric with one of these names kept?
    pub fn metric_names<'a>(&self, names: impl IntoIterator<Item = &'a str> + Clone) -> bool {
        let any = |gs: &[Glob]| {
            names
                .clone()
                .into_iter()
                .any(|n| gs.iter().any(|g| g.matches_subtree(n)))
        };
        let inc = if self.selects() {
            any(&self.metrics)
        } else {
            true
        };
        inc && !any(&self.exclude_metrics)
    }
    /// Is an instance kept? `name` is None where the name is not known.
    pub fn instance(&self, id: InstId, name: Option<&str>) -> bool {
        if id == PM_IN_NULL {
            return self.instances.is_empty();
        }
        let mut idbuf = itoa::Buffer::new();
        let ids = idbuf.format(id);
        let hit = |gs: &[Glob]| {
            gs.iter().any(|g| {
                g.matches(ids)
                    || name.is_some_and(|n| {
                        g.matches(n) || n.split_once(' ').is_some_and(|(w, _)| g.matches(w))
                    })
            })
        };
        (self.instances.is_empty() || hit(&self.instances)) && !hit(&self.exclude_instances)
    }
    /// Is an event on this CPU kept?
    pub fn cpu(&self, cpu: Option<u32>) -> bool {
        match cpu {
            None => self.cpus.is_none(),
            Some(c) => {
                self.cpus.as_ref().is_none_or(|l| l.contains(c))
                    && !self.exclude_cpus.as_ref().is_some_and(|l| l.contains(c))
            }
        }
    }
}

/// A DLT log level (`msin`'s MTIN of a log message): 1 fatal … 6 verbose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Level(pub u8);

impl Level {
    pub const NAMES: [&'static str; 6] = ["fatal", "error", "warn", "info", "debug", "verbose"];
    pub fn parse(s: &str) -> std::result::Result<Level, String> {
        let t = s.trim().to_ascii_lowercase();
        Level::NAMES
            .iter()
            .position(|n| *n == t || (t == "warning" && *n == "warn"))
            .map(|i| Level(i as u8 + 1))
            .ok_or_else(|| format!("bad level {s:?} (one of: {})", Level::NAMES.join(", ")))
    }
}

/// A payload regular expression (`--grep`); equal when the patterns are.
#[derive(Debug, Clone)]
pub struct Grep(pub regex::bytes::Regex);

impl PartialEq for Grep {
    fn eq(&self, o: &Grep) -> bool {
        self.0.as_str() == o.0.as_str()
    }
}
impl Eq for Grep {}

impl Grep {
    /// An invalid expression is a usage error showing where it fails.
    pub fn parse(s: &str) -> std::result::Result<Grep, String> {
        regex::bytes::Regex::new(s)
            .map(Grep)
            .map_err(|e| format!("bad --grep expression: {e}"))
    }
}

/// Which messages of a message log (DLT) to keep: `--ecu`, `--app`,
/// `--ctx`, `--level`, `--grep`, `--lifecycle`. Applied per message,
/// before a message becomes items (so `--app PROC` keeps KPI data too),
/// by the reader and by the native listing alike; every criterion given
/// must hold. Empty = every message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageSelect {
    pub ecus: Vec<Glob>,
    pub apps: Vec<Glob>,
    pub ctxs: Vec<Glob>,
    /// At or above this level (log messages only: others have none).
    pub level: Option<Level>,
    /// On the payload as `dlt-convert -a` shows it.
    pub grep: Option<Grep>,
    /// Lifecycle number (1-based, in file order; see docs/dlt.md).
    pub lifecycle: Option<u32>,
}

/// What [`MessageSelect`] tests of one message (ids cut at the first NUL;
/// `None` where the message has no extended header).
#[derive(Debug, Clone, Copy)]
pub struct MessageKeys<'a> {
    pub ecu: &'a [u8],
    pub app: Option<&'a [u8]>,
    pub ctx: Option<&'a [u8]>,
    /// The log level; `None` for messages that are not log messages.
    pub level: Option<Level>,
    pub lifecycle: u32,
}

impl MessageSelect {
    pub fn is_empty(&self) -> bool {
        *self == MessageSelect::default()
    }
    /// Does the test need the payload text ([`MessageSelect::text`])?
    pub fn needs_text(&self) -> bool {
        self.grep.is_some()
    }
    /// Everything but `--grep`.
    pub fn keys(&self, k: &MessageKeys<'_>) -> bool {
        let id = |gs: &[Glob], v: Option<&[u8]>| {
            gs.is_empty()
                || v.is_some_and(|v| {
                    let s = String::from_utf8_lossy(v);
                    gs.iter().any(|g| g.matches(&s))
                })
        };
        id(&self.ecus, Some(k.ecu))
            && id(&self.apps, k.app)
            && id(&self.ctxs, k.ctx)
            && self
                .level
                .is_none_or(|max| k.level.is_some_and(|l| l <= max))
            && self.lifecycle.is_none_or(|n| n == k.lifecycle)
    }
    /// `--grep` on the payload text.
    pub fn text(&self, payload: &[u8]) -> bool {
        self.grep.as_ref().is_none_or(|g| g.0.is_match(payload))
    }
}

/// Pending definitions are passed on regardless past this many (a stream
/// that never names who uses them must not grow memory without bound).
const PENDING_CAP: usize = 1 << 16;

/// Applies a [`Selection`] to a stream, item by item.
pub struct ItemFilter {
    sel: Selection,
    ev: bool,
    met: bool,
    kept_types: HashSet<EventTypeId>,
    /// Every metric seen: kept or not, and its indom.
    metrics: HashMap<MetricId, (bool, Option<IndomId>)>,
    /// Indoms some kept metric uses / some metric uses.
    used_indoms: HashSet<IndomId>,
    known_indoms: HashSet<IndomId>,
    /// Instance names per indom, for deltas and values.
    inst_names: HashMap<IndomId, HashMap<InstId, String>>,
    /// Indom definitions not yet claimed by any metric.
    pending: Vec<(IndomId, Item)>,
    /// Items kept and dropped, for reports.
    pub dropped: u64,
}

impl ItemFilter {
    pub fn new(sel: Selection) -> ItemFilter {
        ItemFilter {
            ev: sel.filters_events(),
            met: sel.filters_metrics(),
            sel,
            kept_types: HashSet::new(),
            metrics: HashMap::new(),
            used_indoms: HashSet::new(),
            known_indoms: HashSet::new(),
            inst_names: HashMap::new(),
            pending: Vec::new(),
            dropped: 0,
        }
    }

    pub fn selection(&self) -> &Selection {
        &self.sel
    }

    fn metric_kept(&self, id: MetricId) -> bool {
        self.metrics.get(&id).is_some_and(|m| m.0)
    }

    fn inst_kept(&self, indom: Option<IndomId>, inst: InstId) -> bool {
        let name = indom
            .and_then(|i| self.inst_names.get(&i))
            .and_then(|m| m.get(&inst))
            .map(String::as_str);
        self.sel.instance(inst, name)
    }

    /// Feed one item; what is kept goes to `out` (an indom definition may
    /// be held until the metric that uses it is seen). An item dropped
    /// whole is returned, so that its reader can reuse its buffers.
    pub fn push(&mut self, item: Item, out: &mut VecDeque<Item>) -> Option<Item> {
        let keep = match &item {
            Item::EventType(t) => {
                let k = !self.ev || self.sel.event_type(t);
                if k {
                    self.kept_types.insert(t.id);
                } else {
                    self.kept_types.remove(&t.id);
                }
                k
            }
            Item::Event(_) | Item::EventRun(_) => item.event_head().is_some_and(|e| {
                !self.ev || (self.kept_types.contains(&e.type_id) && self.sel.cpu(e.cpu))
            }),
            Item::Annotation(_) => !self.sel.selects(),
            Item::Mark(_) => true,
            _ if !self.met => true,
            Item::Metric(m) => {
                // Under --instance a singular metric has nothing to keep.
                let k = (self.sel.instances.is_empty() || m.indom.is_some())
                    && self.sel.metric_names(m.names.iter().map(String::as_str));
                let (id, indom) = (m.id, m.indom);
                self.metrics.insert(id, (k, indom));
                if let Some(i) = indom {
                    self.known_indoms.insert(i);
                    if k && self.used_indoms.insert(i) {
                        // What waited for this indom follows the descriptor
                        // (still before any value of it).
                        out.push_back(item);
                        self.release(i, out);
                        return None;
                    }
                }
                k
            }
            Item::Help(h) => match h.target {
                HelpTarget::Metric(id) => self.metric_kept(id),
                HelpTarget::Indom(i) => {
                    self.indom_def(i, item, out);
                    return None;
                }
            },
            Item::Labels(l) => match l.target {
                LabelTarget::Context => true,
                LabelTarget::Item(id) => self.metric_kept(id),
                LabelTarget::Domain(d) => {
                    self.metrics.iter().any(|(id, (k, _))| *k && id >> 22 == d)
                }
                LabelTarget::Cluster(c) => self.metrics.iter().any(|(id, (k, _))| {
                    *k && (id & !0x3ff == c & !0x3ff || (c < 4096 && (id >> 10) & 0xfff == c))
                }),
                LabelTarget::Indom(i) => {
                    self.indom_def(i, item, out);
                    return None;
                }
                LabelTarget::Instances(i) => {
                    if self.sel.filters_instances() && !self.inst_kept(Some(i), l.inst) {
                        self.dropped += 1;
                        return None;
                    }
                    {
                        self.indom_def(i, item, out);
                        return None;
                    }
                }
            },
            Item::Indom(u) => {
                let names = self.inst_names.entry(u.id).or_default();
                u.apply_to(names);
                let id = u.id;
                let item = if self.sel.filters_instances() {
                    let Item::Indom(mut u) = item else {
                        unreachable!()
                    };
                    let sel = &self.sel;
                    u.instances.retain(|i| sel.instance(i.id, Some(&i.name)));
                    let was = self.inst_names.get(&id);
                    // A removed instance was kept if its name (before this
                    // update) was selected; unknown ones go through.
                    u.removed.retain(|r| {
                        was.and_then(|m| m.get(r))
                            .is_none_or(|n| sel.instance(*r, Some(n)))
                    });
                    Item::Indom(u)
                } else {
                    item
                };
                {
                    self.indom_def(id, item, out);
                    return None;
                }
            }
            Item::Sample(s) => {
                if s.metrics.iter().all(|mv| {
                    self.metric_kept(mv.metric)
                        && (!self.sel.filters_instances()
                            || mv.values.as_ref().map_or(true, |v| {
                                let indom = self.metrics.get(&mv.metric).and_then(|m| m.1);
                                v.iter().all(|(i, _)| self.inst_kept(indom, *i))
                            }))
                }) {
                    true
                } else {
                    let Item::Sample(mut s) = item else {
                        unreachable!()
                    };
                    s.metrics.retain(|mv| self.metric_kept(mv.metric));
                    if self.sel.filters_instances() {
                        for mv in &mut s.metrics {
                            let indom = self.metrics.get(&mv.metric).and_then(|m| m.1);
                            if let Ok(v) = &mut mv.values {
                                let names = indom.and_then(|i| self.inst_names.get(&i));
                                v.retain(|(i, _)| {
                                    let n = names.and_then(|m| m.get(i)).map(String::as_str);
                                    self.sel.instance(*i, n)
                                });
                            }
                        }
                        // A metric whose every value went is not selected here.
                        s.metrics
                            .retain(|mv| mv.values.as_ref().map_or(true, |v| !v.is_empty()));
                    }
                    if s.metrics.is_empty() {
                        self.dropped += 1;
                        return None;
                    }
                    out.push_back(Item::Sample(s));
                    return None;
                }
            }
        };
        if keep {
            out.push_back(item);
            None
        } else {
            self.dropped += 1;
            Some(item)
        }
    }

    /// A definition of indom `i`: passed on if a kept metric uses it,
    /// dropped if only dropped metrics do, held until one is seen otherwise.
    fn indom_def(&mut self, i: IndomId, item: Item, out: &mut VecDeque<Item>) {
        if self.used_indoms.contains(&i) {
            out.push_back(item);
        } else if self.known_indoms.contains(&i) {
            self.dropped += 1;
        } else {
            self.pending.push((i, item));
            if self.pending.len() > PENDING_CAP {
                for (_, it) in self.pending.drain(..) {
                    out.push_back(it);
                }
            }
        }
    }

    fn release(&mut self, i: IndomId, out: &mut VecDeque<Item>) {
        let mut k = 0;
        while k < self.pending.len() {
            if self.pending[k].0 == i {
                out.push_back(self.pending.remove(k).1);
            } else {
                k += 1;
            }
        }
    }

    /// At the end of the stream: definitions no metric ever claimed go.
    pub fn finish(&mut self) {
        self.dropped += self.pending.len() as u64;
        self.pending.clear();
    }
}

/// A time window and a selection applied to a reader: what a format's
/// listing rendered from the model uses (the `Window` and `Filter` stages
/// do the same for `convert`, `info` and the common listing).
pub struct Subset {
    inner: Box<dyn TraceReader>,
    clock: Option<WindowClock>,
    filter: ItemFilter,
    queue: VecDeque<Item>,
    done: bool,
}

impl Subset {
    /// `end`: the trace's end, needed when a bound counts from it.
    pub fn wrap(
        inner: Box<dyn TraceReader>,
        window: &TimeWindow,
        sel: &Selection,
        end: Option<Timestamp>,
    ) -> crate::Result<Box<dyn TraceReader>> {
        if window.is_open() && sel.is_empty() {
            return Ok(inner);
        }
        let clock = if window.is_open() {
            None
        } else {
            Some(
                WindowClock::new(*window, inner.header().start, end)
                    .map_err(crate::Error::Usage)?,
            )
        };
        Ok(Box::new(Subset {
            inner,
            clock,
            filter: ItemFilter::new(sel.clone()),
            queue: VecDeque::new(),
            done: false,
        }))
    }
}

impl TraceReader for Subset {
    fn header(&self) -> &Header {
        self.inner.header()
    }
    fn next_item(&mut self) -> crate::Result<Option<Item>> {
        loop {
            if let Some(it) = self.queue.pop_front() {
                return Ok(Some(it));
            }
            if self.done {
                return Ok(None);
            }
            let Some(it) = self.inner.next_item()? else {
                self.filter.finish();
                self.done = true;
                continue;
            };
            if let (Some(c), true) = (self.clock.as_mut(), it.is_data()) {
                let t = it.time().unwrap_or_default();
                if !c.contains(t).map_err(crate::Error::Usage)? {
                    self.inner.recycle(it);
                    continue;
                }
            }
            if let Some(dropped) = self.filter.push(it, &mut self.queue) {
                self.inner.recycle(dropped);
            }
        }
    }
    fn diagnostics(&self) -> &[crate::Diagnostic] {
        self.inner.diagnostics()
    }
    fn native_counts(&self) -> Vec<(String, u64)> {
        self.inner.native_counts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        let g = Glob::new;
        assert!(g("kernel.*").matches("kernel.all.load"));
        assert!(g("*.load").matches("kernel.all.load"));
        assert!(g("k?rnel").matches("kernel"));
        assert!(g("cpu[0-3]").matches("cpu2"));
        assert!(!g("cpu[0-3]").matches("cpu4"));
        assert!(g("cpu[!0]").matches("cpu1"));
        assert!(g("a[b").matches("a[b"));
        assert!(!g("kernel").matches("kernel.all"));
        assert!(g("kernel.all").matches_subtree("kernel.all.cpu.user"));
        assert!(!g("kernel.al").matches_subtree("kernel.all.cpu.user"));
        assert!(g("*").matches(""));
        assert!(g("a*b*c").matches("axxbyyc"));
        assert!(!g("a*b*c").matches("axxbyy"));
    }

    #[test]
    fn cpu_lists() {
        let l = CpuList::parse("0,2-3").unwrap();
        assert!(l.contains(0) && l.contains(3) && !l.contains(1) && !l.contains(4));
        assert!(CpuList::parse("3-1").is_err());
        assert!(CpuList::parse("x").is_err());
    }

    fn run(sel: Selection, items: Vec<Item>) -> Vec<Item> {
        let mut f = ItemFilter::new(sel);
        let mut out = VecDeque::new();
        for it in items {
            let _ = f.push(it, &mut out);
        }
        f.finish();
        out.into_iter().collect()
    }

    fn metric(id: MetricId, name: &str, indom: Option<IndomId>) -> Item {
        let mut d = MetricDesc::new(id, name, ValueType::U64, Semantics::Instant, Units::NONE);
        d.indom = indom;
        Item::Metric(Arc::new(d))
    }

    fn indom(id: IndomId, insts: &[(i32, &str)]) -> Item {
        let instances = insts.iter().map(|(i, n)| Instance::new(*i, *n)).collect();
        Item::Indom(IndomUpdate::new(
            Timestamp(0),
            id,
            IndomKind::Full,
            instances,
        ))
    }

    fn sample(vals: Vec<(MetricId, Vec<(InstId, u64)>)>) -> Item {
        Item::Sample(Sample {
            time: Timestamp(1),
            raw_clock: None,
            metrics: vals
                .into_iter()
                .map(|(m, v)| MetricValues {
                    metric: m,
                    values: Ok(v.into_iter().map(|(i, x)| (i, Value::U64(x))).collect()),
                })
                .collect(),
            extras: Extras::default(),
        })
    }

    #[test]
    fn metric_subtree_and_instances_prune_definitions_and_values() {
        let items = vec![
            metric(1, "kernel.all.load", Some(7)),
            metric(2, "mem.util.free", None),
            metric(3, "disk.dev.read", Some(8)),
            indom(7, &[(1, "1 minute"), (5, "5 minute")]),
            indom(8, &[(0, "vda")]),
            Item::Help(Help {
                target: HelpTarget::Metric(2),
                oneline: true,
                text: "free".into(),
            }),
            sample(vec![
                (1, vec![(1, 10), (5, 50)]),
                (2, vec![(PM_IN_NULL, 9)]),
            ]),
            sample(vec![(2, vec![(PM_IN_NULL, 8)])]),
        ];
        let sel = Selection {
            metrics: vec![Glob::new("kernel")],
            instances: vec![Glob::new("5")],
            ..Default::default()
        };
        let out = run(sel, items);
        let kinds: Vec<String> = out
            .iter()
            .map(|i| match i {
                Item::Metric(m) => format!("metric {}", m.name()),
                Item::Indom(u) => format!("indom {} {}", u.id, u.instances.len()),
                Item::Sample(s) => format!(
                    "sample {:?}",
                    s.metrics
                        .iter()
                        .map(|m| (m.metric, m.values.as_ref().unwrap().len()))
                        .collect::<Vec<_>>()
                ),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            kinds,
            ["metric kernel.all.load", "indom 7 1", "sample [(1, 1)]"]
        );
    }

    #[test]
    fn events_by_name_and_cpu_and_annotations_go_under_a_selection() {
        let ty = |id, n: &str| Item::EventType(Arc::new(EventType::new(id, "core", n, vec![])));
        let ev = |ty, cpu| {
            Item::Event(Event {
                time: Timestamp(1),
                raw_clock: None,
                type_id: ty,
                cpu,
                stream: None,
                fields: vec![],
                extras: Extras::default(),
            })
        };
        let note = Item::Annotation(Annotation {
            time: Timestamp(1),
            raw_clock: None,
            text: "x".into(),
            extras: Extras::default(),
        });
        let items = vec![
            ty(1, "syscall_entry"),
            ty(2, "irq_entry"),
            ev(1, Some(0)),
            ev(1, Some(1)),
            ev(2, Some(1)),
            ev(1, None),
            note.clone(),
        ];
        let sel = Selection {
            events: vec![Glob::new("core.sys*")],
            cpus: Some(CpuList::parse("1").unwrap()),
            ..Default::default()
        };
        let out = run(sel, items.clone());
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(matches!(&out[1], Item::Event(e) if e.cpu == Some(1) && e.type_id == 1));
        // An exclusion alone keeps what it does not name, annotations too.
        let sel = Selection {
            exclude_events: vec![Glob::new("core.irq_entry")],
            ..Default::default()
        };
        let out = run(sel, items);
        assert_eq!(out.len(), 5, "{out:?}");
    }
}
