//! Which event types open and close a duration, and the stacks that match
//! them (rules in docs/chrome.md). Both slice exports (Chrome JSON and
//! Perfetto) pair through [`Slices`], so they show the same slices; each
//! keeps only its encoding.
//!
//! A type opens a duration when its name (timeline `$placeholders` left
//! out) ends in `_entry`, `_start` or `_begin` (or the same as a word), and
//! closes one when it ends in `_exit` or `_end`; the two pair when they share
//! the category and the stem (`syscall_entry` / `syscall_exit`, `breath $n
//! start` / `breath end`). Matching is last-in first-out per key, so the
//! durations on one track always nest.

pub mod tracks;

use crate::error::Result;
use crate::model::{
    Event, EventType, EventTypeId, FieldType, LossReport, MetricId, Timestamp, Value,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Open,
    Close,
}

const SUFFIXES: [(&str, Side); 5] = [
    ("entry", Side::Open),
    ("start", Side::Open),
    ("begin", Side::Open),
    ("exit", Side::Close),
    ("end", Side::Close),
];

/// The stem and side of a type name that opens or closes a duration.
pub fn classify(name: &str) -> Option<(String, Side)> {
    // Timeline formats name their arguments inline: `breath $n start`.
    let mut words = String::with_capacity(name.len());
    for w in name.split_whitespace().filter(|w| !w.starts_with('$')) {
        if !words.is_empty() {
            words.push(' ');
        }
        words.push_str(w);
    }
    for (suf, side) in SUFFIXES {
        let Some(head) = words.strip_suffix(suf) else {
            continue;
        };
        let stem = match head.strip_suffix(['_', ' ']) {
            Some(s) if !s.is_empty() => s,
            _ => continue,
        };
        return Some((stem.to_string(), side));
    }
    None
}

/// Stems whose durations belong to the running process rather than the
/// CPU (a process can block in a system call or a page fault and resume on
/// another CPU; interrupts cannot).
pub fn per_process(stem: &str) -> bool {
    matches!(stem, "syscall" | "trap")
}

/// An opened duration waiting for its close.
#[derive(Debug, Clone)]
pub struct Open {
    pub type_id: u32,
    pub stem: u32,
    pub time: Timestamp,
    pub fields: Vec<Value>,
    /// Track index where the entry itself happened (for an unmatched one).
    pub home: usize,
}

/// At most this many open durations per key: deeper nesting is damage, and
/// the oldest is then written as unmatched so memory stays bounded.
pub const MAX_DEPTH: usize = 256;

/// Tracks with a small key; name-keyed ones (ECU/APID, streams,
/// categories) are each writer's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrackKey {
    /// Events on a CPU (or timeline core).
    Cpu(u32),
    /// Who runs on a CPU (slices from schedchange).
    CpuRun(u32),
    /// Durations of the process that runs on a CPU before its first
    /// schedchange says which one it is.
    CpuUnknown(u32),
    /// The idle task (pid 0), one per CPU.
    Idle(u32),
    Process(i64),
    Metric(MetricId),
    Marks,
    Notes,
}

/// Where a pair is matched: per track, or per process for stems that
/// follow the process (system calls, traps).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PairKey {
    Track(usize),
    Process(i64),
    Idle(u32),
    Unknown(u32),
}

/// What a writer knows of an event type; `extra` is the writer's own.
#[derive(Clone)]
pub struct TypeInfo<X> {
    pub ty: Arc<EventType>,
    pub role: Option<(u32, Side)>,
    /// Field `pid`: the event belongs to that process's track.
    pub pid_field: Option<usize>,
    /// Field naming the process (`cmdline`), with `pid_field`.
    pub name_field: Option<usize>,
    /// Field `<stem>_id` of an opening type: names the duration.
    pub id_field: Option<usize>,
    /// A scheduler switch: fields (outgoing pid, incoming pid).
    pub sched: Option<(usize, usize)>,
    pub extra: X,
}

pub struct Stem {
    pub name: String,
    pub open: bool,
    pub close: bool,
    pub per_process: bool,
}

/// Per-CPU scheduling state (from schedchange events).
#[derive(Default)]
pub struct CpuRun {
    pub first: Timestamp,
    pub last: Timestamp,
    pub current: Option<i64>,
    /// Name of the running slice open on this CPU.
    pub label: String,
}

/// The pairing state of one writer.
pub struct Pairing<X> {
    pub types: HashMap<EventTypeId, TypeInfo<X>>,
    pub stems: Vec<Stem>,
    stem_ids: HashMap<(String, String), u32>,
    pub has_sched: bool,
    pub cpus: BTreeMap<u32, CpuRun>,
    pub stacks: BTreeMap<PairKey, Vec<Open>>,
    /// Field vectors of closed entries, reused for the next ones.
    spare: Vec<Vec<Value>>,
    /// A slice's name (reused).
    namebuf: String,
    pub unmatched_open: u64,
    pub unmatched_close: u64,
}

impl<X> Default for Pairing<X> {
    fn default() -> Self {
        Pairing {
            types: HashMap::new(),
            stems: Vec::new(),
            stem_ids: HashMap::new(),
            has_sched: false,
            cpus: BTreeMap::new(),
            stacks: BTreeMap::new(),
            spare: Vec::new(),
            namebuf: String::new(),
            unmatched_open: 0,
            unmatched_close: 0,
        }
    }
}

impl<X> Pairing<X> {
    /// Count what a writer wrote (`(what, n)`, none left out) and the
    /// entries and exits left unpaired, into `loss`.
    pub fn report(&self, loss: &mut crate::model::LossReport, wrote: &[(&str, u64)]) {
        for &(what, n) in wrote {
            if n > 0 {
                loss.wrote(what, n);
            }
        }
        let unmatched = self.unmatched_open + self.unmatched_close;
        if unmatched > 0 {
            loss.wrote(
                "unmatched entries/exits (instants, category \"unmatched\")",
                unmatched,
            );
        }
    }
}

impl<X: Clone> Pairing<X> {
    /// Learn an event type: its pairing role and the fields that place it.
    pub fn define_type(&mut self, t: &Arc<EventType>, extra: X) {
        let field = |n: &str| t.fields.iter().position(|f| f.name == n);
        let is_int = |i: usize| {
            matches!(
                t.fields[i].ty,
                FieldType::Int(_) | FieldType::Uint(_) | FieldType::Enum { .. }
            )
        };
        let role = classify(&t.name).map(|(stem, side)| {
            let key = (t.category.clone(), stem.clone());
            let next = self.stems.len() as u32;
            let id = *self.stem_ids.entry(key).or_insert(next);
            if id == next {
                self.stems.push(Stem {
                    per_process: per_process(&stem),
                    name: stem,
                    open: false,
                    close: false,
                });
            }
            let s = &mut self.stems[id as usize];
            match side {
                Side::Open => s.open = true,
                Side::Close => s.close = true,
            }
            (id, side)
        });
        let id_field = role.and_then(|(id, side)| {
            (side == Side::Open)
                .then(|| field(&format!("{}_id", self.stems[id as usize].name)))
                .flatten()
        });
        let pid_field = field("pid").filter(|&i| is_int(i));
        let name_field = pid_field.and(field("cmdline").or_else(|| field("comm")));
        let sched = match t.name.as_str() {
            "schedchange" => field("out").zip(field("in")),
            "sched_switch" => field("prev_pid").zip(field("next_pid")),
            _ => None,
        }
        .filter(|&(o, i)| is_int(o) && is_int(i));
        self.has_sched |= sched.is_some();
        self.types.insert(
            t.id,
            TypeInfo {
                ty: t.clone(),
                role,
                pid_field,
                name_field,
                id_field,
                sched,
                extra,
            },
        );
    }

    /// The type of `e` (None: undefined) after noting its CPU's time span.
    pub fn begin_event(&mut self, e: &Event) -> Option<TypeInfo<X>> {
        let ti = self.types.get(&e.type_id).cloned()?;
        if let Some(c) = e.cpu {
            let r = self.cpus.entry(c).or_insert_with(|| CpuRun {
                first: e.time,
                ..CpuRun::default()
            });
            r.last = r.last.max(e.time);
        }
        Some(ti)
    }

    /// The type of an entry, with the name of its slice in `name`: the
    /// stem and, where the entry has a `<stem>_id` field, its value
    /// (`syscall 4`). None: the type is gone.
    pub fn slice_type(&self, open: &Open, name: &mut String) -> Option<TypeInfo<X>> {
        let oti = self.types.get(&open.type_id).cloned()?;
        name.clear();
        name.push_str(&self.stems[open.stem as usize].name);
        if let Some(v) = oti.id_field.and_then(|i| open.fields.get(i)) {
            name.push(' ');
            v.push_text(name);
        }
        Some(oti)
    }

    /// The label of the running slice `pid` begins on CPU `c` (kept, for an
    /// end that names its slice).
    pub fn run_label(&mut self, c: u32, label: String) -> String {
        if let Some(r) = self.cpus.get_mut(&c) {
            r.label.clone_from(&label);
        }
        label
    }

    fn pair_key(&self, e: &Event, stem: u32, home: usize) -> PairKey {
        if !(self.stems[stem as usize].per_process && self.has_sched) {
            return PairKey::Track(home);
        }
        let Some(c) = e.cpu else {
            return PairKey::Track(home);
        };
        match self.cpus.get(&c).and_then(|r| r.current) {
            Some(0) => PairKey::Idle(c),
            Some(p) => PairKey::Process(p),
            None => PairKey::Unknown(c),
        }
    }
}

/// An instant to write: an event's time, type and fields on `track`
/// (`unmatched`: an entry or exit without its other half).
pub struct Point<'a> {
    pub time: Timestamp,
    pub ty: &'a EventType,
    pub fields: &'a [Value],
    pub track: usize,
    pub unmatched: bool,
}

impl<'a> Point<'a> {
    pub fn new(
        time: Timestamp,
        ty: &'a EventType,
        fields: &'a [Value],
        track: usize,
        unmatched: bool,
    ) -> Point<'a> {
        Point {
            time,
            ty,
            fields,
            track,
            unmatched,
        }
    }
}

/// A slice to write: an entry (`open`, of type `ty`) and the exit that
/// closes it (`close`, of type `close_ti`), named `name`, on `track`.
pub struct Span<'a, X> {
    pub open: &'a Open,
    pub ty: &'a TypeInfo<X>,
    pub name: &'a str,
    pub close: &'a Event,
    pub close_ti: &'a TypeInfo<X>,
    pub track: usize,
}

/// An edge of the running slice of process `pid` on CPU `cpu`'s "running"
/// track `track`: its begin (switched in) or end (switched out).
#[derive(Debug, Clone, Copy)]
pub struct Edge {
    pub track: usize,
    pub cpu: u32,
    pub pid: i64,
    pub at: Timestamp,
    pub begin: bool,
}

/// The end of a slice from `open` closed by `close`: an exit earlier than
/// its entry (a clock step) ends it where it starts, reported.
pub fn slice_end(open: &Open, close: &Event, loss: &mut LossReport) -> Timestamp {
    if close.time < open.time {
        loss.degrade("durations", "exit earlier than its entry: duration 0");
        return open.time;
    }
    close.time
}

/// A writer that shows paired events as slices: the pairing is shared, the
/// encoding (instants, slices, running-slice edges) is the writer's.
pub trait Slices {
    type Extra: Clone;
    fn pairing(&mut self) -> &mut Pairing<Self::Extra>;
    fn track(&mut self, key: TrackKey) -> Result<usize>;
    fn instant(&mut self, i: Point<'_>) -> Result<()>;
    /// A slice from an entry and its exit.
    fn slice(&mut self, s: Span<'_, Self::Extra>) -> Result<()>;
    /// One edge of a running slice.
    fn run_edge(&mut self, e: Edge) -> Result<()>;

    /// An edge of the running slice of `pid` on CPU `c`.
    fn run(&mut self, c: u32, pid: i64, at: Timestamp, begin: bool) -> Result<()> {
        let track = self.track(TrackKey::CpuRun(c))?;
        self.run_edge(Edge {
            track,
            cpu: c,
            pid,
            at,
            begin,
        })
    }

    /// After the writer's own handling of `e` (placed on `home`): scheduler
    /// switches, pairing, or an instant.
    fn paired_event(&mut self, e: &Event, ti: &TypeInfo<Self::Extra>, home: usize) -> Result<()> {
        if let Some(sw) = ti.sched {
            self.sched_switch(e, sw)?;
        }
        if let Some((stem, side)) = ti.role {
            let s = &self.pairing().stems[stem as usize];
            if s.open && s.close {
                return self.pair(e, ti, stem, side, home);
            }
        }
        self.instant(Point::new(e.time, &ti.ty, &e.fields, home, false))
    }

    fn key_track(&mut self, key: PairKey) -> Result<usize> {
        match key {
            PairKey::Track(t) => Ok(t),
            PairKey::Process(p) => self.track(TrackKey::Process(p)),
            PairKey::Idle(c) => self.track(TrackKey::Idle(c)),
            PairKey::Unknown(c) => self.track(TrackKey::CpuUnknown(c)),
        }
    }

    fn pair(
        &mut self,
        e: &Event,
        ti: &TypeInfo<Self::Extra>,
        stem: u32,
        side: Side,
        home: usize,
    ) -> Result<()> {
        let p = self.pairing();
        let key = p.pair_key(e, stem, home);
        match side {
            Side::Open => {
                let mut fields = p.spare.pop().unwrap_or_default();
                fields.clone_from(&e.fields);
                let stack = p.stacks.entry(key).or_default();
                stack.push(Open {
                    type_id: e.type_id,
                    stem,
                    time: e.time,
                    fields,
                    home,
                });
                if stack.len() > MAX_DEPTH {
                    let oldest = stack.remove(0);
                    self.unmatched_open(oldest)?;
                }
                Ok(())
            }
            Side::Close => {
                let found = p
                    .stacks
                    .get(&key)
                    .and_then(|s| s.iter().rposition(|o| o.stem == stem));
                let Some(i) = found else {
                    p.unmatched_close += 1;
                    return self.instant(Point::new(e.time, &ti.ty, &e.fields, home, true));
                };
                let stack = p.stacks.get_mut(&key).expect("found above");
                // Entries above the match never closed: nesting is kept by
                // writing them as unmatched, not by guessing their end.
                let above: Vec<Open> = stack.drain(i + 1..).collect();
                // An emptied stack is kept for the key's next entry: no
                // allocation per slice (keys are tracks and processes).
                let open = stack.pop().expect("index i exists");
                for o in above {
                    self.unmatched_open(o)?;
                }
                let track = self.key_track(key)?;
                let p = self.pairing();
                let mut name = std::mem::take(&mut p.namebuf);
                let r = match p.slice_type(&open, &mut name) {
                    Some(oti) => self.slice(Span {
                        open: &open,
                        ty: &oti,
                        name: &name,
                        close: e,
                        close_ti: ti,
                        track,
                    }),
                    None => Ok(()),
                };
                self.pairing().namebuf = name;
                r?;
                self.pairing().spare.push(open.fields);
                Ok(())
            }
        }
    }

    fn unmatched_open(&mut self, o: Open) -> Result<()> {
        let p = self.pairing();
        p.unmatched_open += 1;
        if let Some(ti) = p.types.get(&o.type_id).cloned() {
            self.instant(Point::new(o.time, &ti.ty, &o.fields, o.home, true))?;
        }
        self.pairing().spare.push(o.fields);
        Ok(())
    }

    /// schedchange: close the outgoing process's running slice on this CPU
    /// and open the incoming one's.
    fn sched_switch(&mut self, e: &Event, (o, i): (usize, usize)) -> Result<()> {
        let Some(c) = e.cpu else {
            return Ok(());
        };
        let get = |k: usize| {
            e.fields
                .get(k)
                .and_then(Value::as_i128)
                .and_then(|v| i64::try_from(v).ok())
        };
        let (Some(out), Some(inn)) = (get(o), get(i)) else {
            return Ok(());
        };
        let r = self
            .pairing()
            .cpus
            .get(&c)
            .expect("cpu entry made by event()");
        let (cur, first) = (r.current, r.first);
        if cur.is_none() {
            // Until now the process on this CPU was unknown: it was `out`,
            // running since the CPU's first event.
            self.run(c, out, first, true)?;
            let p = self.pairing();
            if let Some(mut opens) = p.stacks.remove(&PairKey::Unknown(c)) {
                let key = if out == 0 {
                    PairKey::Idle(c)
                } else {
                    PairKey::Process(out)
                };
                let dest = p.stacks.entry(key).or_default();
                opens.append(dest);
                *dest = opens;
            }
        }
        self.run(c, cur.unwrap_or(out), e.time, false)?;
        self.run(c, inn, e.time, true)?;
        let r = self
            .pairing()
            .cpus
            .get_mut(&c)
            .expect("cpu entry made by event()");
        r.current = Some(inn);
        Ok(())
    }

    /// At the end: processes still running ran until their CPU's last
    /// event; entries never exited (still in a system call when tracing
    /// stopped) are written as unmatched.
    fn close_pairs(&mut self) -> Result<()> {
        let open: Vec<(u32, i64, Timestamp)> = self
            .pairing()
            .cpus
            .iter()
            .filter_map(|(c, r)| r.current.map(|p| (*c, p, r.last)))
            .collect();
        for (c, p, last) in open {
            self.run(c, p, last, false)?;
        }
        let stacks = std::mem::take(&mut self.pairing().stacks);
        for (_, opens) in stacks {
            for o in opens {
                self.unmatched_open(o)?;
            }
        }
        Ok(())
    }
}

/// Apply an instance-domain update to the instance names both slice exports
/// keep per domain; the instances that left, whose series end.
pub fn update_instance_names(
    indoms: &mut HashMap<crate::model::IndomId, HashMap<crate::model::InstId, String>>,
    u: &crate::model::IndomUpdate,
) -> Vec<crate::model::InstId> {
    use crate::model::IndomKind;
    let names = indoms.entry(u.id).or_default();
    let mut gone = Vec::new();
    match u.kind {
        IndomKind::Full => {
            let keep: std::collections::HashSet<_> = u.instances.iter().map(|i| i.id).collect();
            gone.extend(names.keys().filter(|k| !keep.contains(k)));
            names.clear();
        }
        IndomKind::Delta => gone.extend(&u.removed),
    }
    for g in &gone {
        names.remove(g);
    }
    for i in &u.instances {
        names.insert(i.id, i.name.clone());
    }
    gone
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_pair() {
        let c = classify;
        assert_eq!(c("syscall_entry"), Some(("syscall".into(), Side::Open)));
        assert_eq!(c("syscall_exit"), Some(("syscall".into(), Side::Close)));
        assert_eq!(c("soft_irq_entry"), Some(("soft_irq".into(), Side::Open)));
        assert_eq!(c("breath $n start"), Some(("breath".into(), Side::Open)));
        assert_eq!(c("breath end"), Some(("breath".into(), Side::Close)));
        assert_eq!(c("breath_end"), Some(("breath".into(), Side::Close)));
        assert_eq!(c("commit_begin"), Some(("commit".into(), Side::Open)));
        // Not a suffix of a word, or nothing before it.
        assert_eq!(c("backend"), None);
        assert_eq!(c("end"), None);
        assert_eq!(c("_exit"), None);
        assert_eq!(c("soft_irq"), None);
        assert_eq!(c("schedchange"), None);
    }
}
