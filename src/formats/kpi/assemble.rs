//! KPI messages → model items. Shared by the KPI text reader and the DLT
//! reader. Group state is kept per type, since groups interleave (§3.1).

use super::dataset::{sanity_flags, Dataset, IrqCounts, Kind};
use super::schema::{self, X_BEG_RAW, X_BEG_TIME, X_GROUP, X_KIND};
use super::text::X_STORAGE;
use super::truncated::{is_truncated_duplicate, Follow};
use crate::model::*;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;

/// An open ACT or IRQ group: values collect until END.
#[derive(Debug)]
struct Open {
    time: Timestamp,
    raw: Option<u64>,
    group: u64,
    act: Vec<(i64, [i64; 5])>,
    /// IRQ instance and count, in dataset order.
    irq: Vec<(InstId, u64)>,
}

/// What the events of one KPI message share.
struct EventAt {
    time: Timestamp,
    raw_clock: Option<u64>,
    kind: Kind,
    group: u64,
    /// Where the group began, when not at this message.
    beg_time: Option<i64>,
    beg_raw: Option<u64>,
    /// The container's storage time of the message (`dlt.storage_ns`).
    stored: Option<i64>,
}

/// What [`Assembler::group_extras`] does with the storage time: events
/// carry their message's (set here), samples their group BEG's (set by
/// the DLT reader, which knows it).
#[derive(Clone, Copy, Debug)]
enum Stored {
    Leave,
    Set(Option<i64>),
}

/// The keys [`Assembler::group_extras`] sets: the group's kind and
/// number, where it began (when not at this item), the storage time.
#[derive(Clone, Copy, Debug)]
struct GroupKeys {
    kind: Kind,
    group: u64,
    beg_time: Option<i64>,
    beg_raw: Option<u64>,
    stored: Stored,
}

impl GroupKeys {
    /// A group's keys at its start, the storage time left as it is.
    fn at_start(kind: Kind, group: u64) -> GroupKeys {
        GroupKeys {
            kind,
            group,
            beg_time: None,
            beg_raw: None,
            stored: Stored::Leave,
        }
    }
}

/// The extras say where the group began: `kpi.beg_time` (at the address
/// this module sets it with) sorts third from the end, before `kpi.group`
/// and `kpi.kind`.
fn has_start(x: &Extras) -> bool {
    let e = x.entries();
    e.len() >= 3 && same_address(&e[e.len() - 3].0, X_BEG_TIME)
}

/// Pools of recycled events: one per KPI event type and start flag, one
/// for other events (their extras cleared).
const POOLS: usize = 7;

fn pool_of(type_id: EventTypeId, start: bool) -> usize {
    match type_id {
        schema::NEW_TYPE | schema::STP_TYPE | schema::CHK_TYPE => {
            (type_id - schema::NEW_TYPE) as usize * 2 + start as usize
        }
        _ => POOLS - 1,
    }
}

/// The value lists of a closed group, kept for the next one.
type GroupBuffers = (Vec<(i64, [i64; 5])>, Vec<(InstId, u64)>);

/// Items given back by the writer wait here to be filled again: a
/// conversion allocates its items' buffers once, not per dataset.
const POOL: usize = 8192;

#[derive(Debug, Default)]
pub struct Assembler {
    defs_sent: bool,
    /// The open group of each type, by [`Kind::index`] (looked up per
    /// dataset: an array, not a hashed map).
    open: [Option<Open>; 5],
    /// Current `kpi.proc` membership.
    procs: IntSet<i64>,
    /// Instance names of recycled updates, to be written again.
    spare_names: Vec<String>,
    /// IRQ row name → instance per CPU.
    irq_ids: HashMap<String, IntMap<u32, InstId>, BuildHasherDefault<IntHasher>>,
    irq_count: usize,
    next_group: u64,
    /// Datasets per type, by [`Kind::index`].
    counts: [u64; 5],
    truncated: u64,
    /// The truncated duplicate of each type waiting for its whole dataset.
    follow: Follow,
    /// Sanity flags (spec §9.4): count and first example per flag.
    flags: BTreeMap<&'static str, (u64, String)>,
    /// Problems in the data (bad datasets, sanity flags); not fatal.
    pub warnings: Vec<String>,
    /// Recycled events, apart by type and by whether their extras say
    /// where the group began (see [`pool_of`]): an event taken from its
    /// own pool has its fields and extras laid out as it needs them; from
    /// another, fields and two extras entries are added or dropped (that
    /// churn was a third of `event`).
    spare_events: [Vec<Event>; POOLS],
    spare_texts: Vec<Vec<u8>>,
    /// Recycled samples, ACT ([0]) apart from IRQ ([1]): a sample of the
    /// other kind has other columns, whose values were dropped and made
    /// again one by one.
    spare_samples: [Vec<Sample>; 2],
    spare_indoms: Vec<IndomUpdate>,
    spare_groups: Vec<GroupBuffers>,
    /// Scratch of `message` kept between calls (their allocations reused).
    parsed: Vec<Dataset<'static>>,
    /// The (cpu, count) pairs of the message's IRQ rows, as parsed.
    irq_pairs: Vec<(u32, u64)>,
    events: Vec<Item>,
    /// Give a message's events as one run ([`Item::EventRun`]): set by a
    /// reader whose consumer takes runs.
    pub runs: bool,
    /// Recycled runs, pooled as events are (see [`pool_of`]); boxed as
    /// items carry them, so that recycling one allocates nothing.
    #[allow(clippy::vec_box)]
    spare_runs: [Vec<Box<EventRun>>; POOLS],
}

/// Recycled runs kept per pool: as many as a run of items of the convert
/// loop can hold (each goes back once the run is encoded).
const RUN_POOL: usize = 256;

/// The text buffer a value holds, if any.
fn text_buf(v: Value) -> Option<Vec<u8>> {
    match v {
        Value::Str(s) => Some(s.into_bytes()),
        Value::Bytes(b) => Some(b),
        _ => None,
    }
}

/// `b` as a text value, in `buf`'s allocation.
fn text_in(b: &[u8], mut buf: Vec<u8>) -> Value {
    buf.clear();
    buf.extend_from_slice(b);
    text_owned(buf)
}

/// Make `metrics` hold one value list per id of `ids`, reusing the lists
/// it has; the values they hold are overwritten by [`fill`].
fn columns(metrics: &mut Vec<MetricValues>, ids: &[MetricId]) {
    metrics.truncate(ids.len());
    for (i, id) in ids.iter().enumerate() {
        match metrics.get_mut(i) {
            Some(m) => {
                m.metric = *id;
                if m.values.is_err() {
                    m.values = Ok(Vec::new());
                }
            }
            None => metrics.push(MetricValues {
                metric: *id,
                values: Ok(Vec::new()),
            }),
        }
    }
}

/// A number of a sample's column: what [`fill`] is given (a plain copy,
/// where a [`Value`] it was given had to be dropped after each use: a
/// call per value).
#[derive(Clone, Copy, Debug)]
enum Num {
    I64(i64),
    U64(u64),
}

impl From<Num> for Value {
    fn from(n: Num) -> Value {
        match n {
            Num::I64(y) => Value::I64(y),
            Num::U64(y) => Value::U64(y),
        }
    }
}

/// `col` becomes `vals`, numbers written where they lie: clearing the
/// list first dropped its values one by one (a sample of a recycled KPI
/// group holds hundreds), and most keep their kind.
fn fill(col: &mut Vec<(InstId, Value)>, vals: impl Iterator<Item = (InstId, Num)>) {
    let mut n = 0;
    for (id, v) in vals {
        match col.get_mut(n) {
            Some(slot) => {
                slot.0 = id;
                match (&mut slot.1, v) {
                    (Value::I64(x), Num::I64(y)) => *x = y,
                    (Value::U64(x), Num::U64(y)) => *x = y,
                    (old, v) => *old = v.into(),
                }
            }
            None => col.push((id, v.into())),
        }
        n += 1;
    }
    col.truncate(n);
}

impl Assembler {
    pub fn new() -> Assembler {
        Assembler::default()
    }

    /// Datasets seen of type `kind` (truncated duplicates not counted).
    pub fn count(&self, kind: Kind) -> u64 {
        self.counts[kind.index()]
    }

    /// Datasets seen per type that has any.
    pub fn counts(&self) -> BTreeMap<String, u64> {
        Kind::ALL
            .iter()
            .filter(|k| self.count(**k) > 0)
            .map(|k| (k.name().to_string(), self.count(*k)))
            .collect()
    }

    /// Truncated duplicates dropped so far.
    pub fn truncated(&self) -> u64 {
        self.truncated
    }

    /// Items the writer is done with ([`Assembler::recycle`] each, in
    /// one loop: a call per item, its 120 bytes copied into the call,
    /// cost as much as the pooling).
    pub fn recycle_batch(&mut self, items: &mut Vec<Item>) {
        for item in items.drain(..) {
            self.recycle(item);
        }
    }

    /// An item the writer is done with: its buffers serve a later item.
    #[inline(always)]
    pub fn recycle(&mut self, item: Item) {
        match item {
            Item::Event(mut e) => {
                // Fields stay as they are: `event` sets them where they lie
                // (a value built apart and moved into its slot stalls on
                // store forwarding), text buffers included.
                // Extras of another source's event are not ours to update.
                if ![schema::NEW_TYPE, schema::STP_TYPE, schema::CHK_TYPE].contains(&e.type_id) {
                    e.extras.clear();
                }
                let pool = &mut self.spare_events[pool_of(e.type_id, has_start(&e.extras))];
                if pool.len() < POOL {
                    pool.push(e);
                }
            }
            Item::Sample(s) => {
                let irq = s
                    .metrics
                    .first()
                    .is_some_and(|m| m.metric == schema::IRQ_COUNT);
                let pool = &mut self.spare_samples[irq as usize];
                if pool.len() < POOL {
                    pool.push(s);
                }
            }
            Item::EventRun(r) => {
                // As an event's: extras stay to be set in place, cells
                // keep their buffer.
                let pool =
                    &mut self.spare_runs[pool_of(r.event.type_id, has_start(&r.event.extras))];
                if pool.len() < RUN_POOL {
                    pool.push(r);
                }
            }
            Item::Indom(u) if self.spare_indoms.len() < POOL => self.spare_indoms.push(u),
            _ => {}
        }
    }

    fn indom(&mut self, time: Timestamp, id: IndomId, kind: IndomKind) -> IndomUpdate {
        match self.spare_indoms.pop() {
            Some(mut u) => {
                u.time = time;
                u.id = id;
                u.kind = kind;
                if self.spare_names.len() < POOL {
                    self.spare_names
                        .extend(u.instances.drain(..).map(|i| i.name).take(POOL));
                }
                u.instances.clear();
                u.removed.clear();
                u.extras.clear();
                u
            }
            None => IndomUpdate {
                time,
                id,
                kind,
                instances: vec![],
                removed: vec![],
                extras: Extras::default(),
            },
        }
    }

    fn defs(&mut self, time: Timestamp, out: &mut Vec<Item>) {
        if self.defs_sent {
            return;
        }
        self.defs_sent = true;
        out.extend(schema::definitions());
        for id in [schema::PROC_INDOM, schema::IRQ_INDOM] {
            out.push(Item::Indom(self.indom(time, id, IndomKind::Full)));
        }
    }

    /// The group's extras (`kpi.kind`, `kpi.group`, where the group began)
    /// in `x`, reusing its entries.
    fn group_extras(x: &mut Extras, keys: GroupKeys) {
        // A recycled KPI item has these keys already: values are set in
        // place (no entries moved).
        if !Self::group_extras_in_place(x, keys) {
            Self::group_extras_by_key(x, keys);
        }
    }

    /// [`Self::group_extras`] key by key, for any layout of `x`.
    fn group_extras_by_key(x: &mut Extras, keys: GroupKeys) {
        match keys.stored {
            Stored::Leave => {}
            Stored::Set(Some(t)) => x.set(X_STORAGE, ExtraValue::I64(t)),
            Stored::Set(None) => {
                x.remove(X_STORAGE);
            }
        }
        x.set_str(X_KIND, keys.kind.name());
        x.set(X_GROUP, ExtraValue::U64(keys.group));
        match keys.beg_time {
            Some(t) => x.set(X_BEG_TIME, ExtraValue::I64(t)),
            None => {
                x.remove(X_BEG_TIME);
            }
        }
        match keys.beg_raw {
            Some(r) => x.set(X_BEG_RAW, ExtraValue::U64(r)),
            None => {
                x.remove(X_BEG_RAW);
            }
        }
    }

    /// [`Self::group_extras`] where `x` ends with this module's keys, as
    /// a recycled KPI item does: found by address at their places, no
    /// search (an absent start key otherwise costs a binary search, twice
    /// per event). False, with `x` unchanged, for any other layout.
    fn group_extras_in_place(x: &mut Extras, keys: GroupKeys) -> bool {
        let e = x.entries_mut();
        let n = e.len();
        if n < 2 || !same_address(&e[n - 1].0, X_KIND) || !same_address(&e[n - 2].0, X_GROUP) {
            return false;
        }
        // The start keys sort right before kpi.group, the storage time
        // (`dlt.`) before them.
        let mut i = n - 2;
        let has_time = i >= 1 && same_address(&e[i - 1].0, X_BEG_TIME);
        i -= has_time as usize;
        let has_raw = i >= 1 && same_address(&e[i - 1].0, X_BEG_RAW);
        i -= has_raw as usize;
        let has_stored = i >= 1 && same_address(&e[i - 1].0, X_STORAGE);
        let first = i - has_stored as usize;
        // Whatever comes before must sort before them (a key of ours at
        // another address would not, nor a storage time to set or drop);
        // the storage time must be there exactly when it is to be set.
        let before = match keys.stored {
            Stored::Leave if !has_stored => X_BEG_RAW,
            _ => X_STORAGE,
        };
        if first >= 1 && crate::model::key_order(&e[first - 1].0, before).is_ge() {
            return false;
        }
        match keys.stored {
            Stored::Leave => {}
            Stored::Set(Some(t)) if has_stored => e[first].1.put_i64(t),
            Stored::Set(None) if !has_stored => {}
            Stored::Set(_) => return false,
        }
        match &mut e[n - 1].1 {
            ExtraValue::Str(s) if crate::model::key_eq(s, keys.kind.name()) => {}
            ExtraValue::Str(s) => {
                s.clear();
                s.push_str(keys.kind.name());
            }
            v => *v = ExtraValue::Str(keys.kind.name().to_string()),
        }
        e[n - 2].1.put_u64(keys.group);
        let t_at = i + has_raw as usize;
        match (keys.beg_time, has_time) {
            (Some(t), true) => e[t_at].1.put_i64(t),
            (Some(t), false) => e.insert(t_at, (X_BEG_TIME.into(), ExtraValue::I64(t))),
            (None, true) => {
                e.remove(t_at);
            }
            (None, false) => {}
        }
        match (keys.beg_raw, has_raw) {
            (Some(r), true) => e[i].1.put_u64(r),
            (Some(r), false) => e.insert(i, (X_BEG_RAW.into(), ExtraValue::U64(r))),
            (None, true) => {
                e.remove(i);
            }
            (None, false) => {}
        }
        true
    }

    /// A text buffer the pool can keep.
    fn keep_text(&mut self, v: Value) {
        if let Some(b) = text_buf(v) {
            if b.capacity() > 0 && self.spare_texts.len() < POOL {
                self.spare_texts.push(b);
            }
        }
    }

    /// A KPI event of the message `at`, appended to `events` (the
    /// message's, its first the lead whose extras the others copy): the
    /// numbers `ints`, then the text (command line) if any, set in the
    /// field slots of a recycled event where they lie (same kind: the
    /// value is written in place). The event is moved once, into
    /// `events`, and filled there: built apart and returned, it was
    /// copied twice more.
    fn event(
        &mut self,
        events: &mut Vec<Item>,
        type_id: EventTypeId,
        at: &EventAt,
        ints: &[i64],
        text: Option<&[u8]>,
    ) {
        // From its own pool, else from the events of other sources, else
        // a new one: not from another KPI type's pool. Taken from there,
        // an event had its fields and extras laid out again, and the pools
        // never settled: the demand per type moves, and each pool left
        // short by a taking took in turn (a fifth of all events on a
        // capture). New events fill each pool up to its type's own peak.
        let own = pool_of(type_id, at.beg_time.is_some());
        let e = match self.spare_events[own].pop() {
            Some(e) => e,
            None => self.spare_events[POOLS - 1].pop().unwrap_or_default(),
        };
        events.push(Item::Event(e));
        let Some((Item::Event(e), before)) = events.split_last_mut() else {
            return;
        };
        let lead = before.first();
        e.time = at.time;
        e.raw_clock = at.raw_clock;
        e.type_id = type_id;
        e.cpu = None;
        e.stream = None;
        let n = ints.len() + text.is_some() as usize;
        if e.fields.len() > n {
            for v in e.fields.drain(n..) {
                self.keep_text(v);
            }
        }
        for (i, &x) in ints.iter().enumerate() {
            match e.fields.get_mut(i) {
                Some(Value::I64(y)) => *y = x,
                Some(v) => {
                    let old = std::mem::replace(v, Value::I64(x));
                    self.keep_text(old);
                }
                None => e.fields.push(Value::I64(x)),
            }
        }
        if let Some(b) = text {
            // The slot after the numbers, if the recycled event has one
            // (`fields` holds at least the numbers now).
            match (e.fields.get_mut(ints.len()), crate::model::utf8(b)) {
                (Some(Value::Str(s)), Some(t)) => {
                    s.clear();
                    s.push_str(t);
                }
                (Some(slot), _) => {
                    let buf = text_buf(std::mem::replace(slot, Value::I64(0)));
                    let buf = buf.or_else(|| self.spare_texts.pop()).unwrap_or_default();
                    *slot = text_in(b, buf);
                }
                (None, _) => {
                    let buf = self.spare_texts.pop().unwrap_or_default();
                    e.fields.push(text_in(b, buf));
                }
            }
        }
        // Every event of a message has the same extras (its group's, the
        // message's storage time): the first gets a stamp, the others a
        // copy of its extras with that stamp, so the thread hand-off
        // (`wire`) knows them equal without comparing them entry by entry.
        match lead {
            Some(Item::Event(l)) if l.type_id == type_id => e.extras.copy_from(&l.extras),
            _ => Self::message_extras(&mut e.extras, at),
        }
    }

    /// The extras of the events of message `at` (its group's, its storage
    /// time) in `x`, stamped: the first event's, or a run's.
    fn message_extras(x: &mut Extras, at: &EventAt) {
        let keys = GroupKeys {
            kind: at.kind,
            group: at.group,
            beg_time: at.beg_time,
            beg_raw: at.beg_raw,
            stored: Stored::Set(at.stored),
        };
        Self::group_extras(x, keys);
        x.restamp();
    }

    /// A KPI event of the message `at`, as [`Self::event`] does, or in
    /// runs mode as the next event of the message's run (the last item of
    /// `events`, begun with the message's first event; `used`: the events
    /// it holds so far).
    fn emit(
        &mut self,
        events: &mut Vec<Item>,
        used: &mut usize,
        type_id: EventTypeId,
        at: &EventAt,
        ints: &[i64],
        text: Option<&[u8]>,
    ) {
        if !self.runs {
            return self.event(events, type_id, at, ints, text);
        }
        if *used == 0 {
            let own = pool_of(type_id, at.beg_time.is_some());
            let mut r = self.spare_runs[own].pop().unwrap_or_default();
            let e = &mut r.event;
            e.time = at.time;
            e.raw_clock = at.raw_clock;
            e.type_id = type_id;
            e.cpu = None;
            e.stream = None;
            r.width = (ints.len() + text.is_some() as usize) as u32;
            r.cells.clear();
            Self::message_extras(&mut e.extras, at);
            events.push(Item::EventRun(r));
        }
        let Some(Item::EventRun(r)) = events.last_mut() else {
            return;
        };
        for &x in ints {
            r.cells.push_i64(x);
        }
        if let Some(b) = text {
            r.cells.push_text(b);
        }
        *used += 1;
    }

    /// One KPI message; `args[0]` is the type, sync messages are
    /// `[type, BEG|END]`. Truncated duplicates are dropped here. `stored`:
    /// the container's storage time of the message (DLT), which its
    /// events carry as `dlt.storage_ns`.
    pub fn message(
        &mut self,
        args: &[&[u8]],
        time: Timestamp,
        raw_clock: Option<u64>,
        stored: Option<i64>,
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
                if self.open[kind.index()].is_some() {
                    self.warnings.push(format!(
                        "{} BEG inside an open {} group: closing it",
                        kind.name(),
                        kind.name()
                    ));
                    self.close(kind, out);
                }
                self.open_group(kind, time, raw_clock);
            } else if self.open[kind.index()].is_some() {
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
        let mut parsed = reuse_vec(std::mem::take(&mut self.parsed));
        self.irq_pairs.clear();
        let mut truncated = 0;
        for arg in &args[1..] {
            if is_truncated_duplicate(arg) {
                truncated += 1;
                continue;
            }
            match Dataset::parse_into(kind, arg, &mut self.irq_pairs) {
                Ok(d) => parsed.push(d),
                Err(e) => {
                    self.parsed = reuse_vec(parsed);
                    return Err(e);
                }
            }
        }
        self.truncated += truncated;
        // Data outside a group (bare lines without sync messages) forms a
        // group of its own.
        let implicit = self.open[kind.index()].is_none();
        if implicit {
            self.open_group(kind, time, raw_clock);
        }
        let (group, beg_time, beg_raw) = {
            let Some(o) = &self.open[kind.index()] else {
                unreachable!("opened above")
            };
            (o.group, o.time, o.raw)
        };
        // What every event of this message shares; where the group began
        // is said only when it is not the message itself.
        let at = EventAt {
            time,
            raw_clock,
            kind,
            group,
            beg_time: (beg_time != time).then_some(beg_time.0),
            beg_raw: if beg_raw != raw_clock { beg_raw } else { None },
            stored,
        };
        let mut adds: Option<IndomUpdate> = None;
        let mut irq_adds: Option<IndomUpdate> = None;
        let mut removed: Option<IndomUpdate> = None;
        let mut events = std::mem::take(&mut self.events);
        let mut used = 0usize;
        let irq_pairs = std::mem::take(&mut self.irq_pairs);
        let mut pair_at = 0;
        for ds in parsed.drain(..) {
            self.counts[kind.index()] += 1;
            for f in sanity_flags(&ds) {
                let e = self.flags.entry(f).or_insert_with(|| {
                    (
                        0,
                        format!("{} {}", kind.name(), String::from_utf8_lossy(&ds.render())),
                    )
                });
                e.0 += 1;
            }
            match ds {
                Dataset::New { pid, ppid, cmdline } => {
                    self.add_proc(pid, &cmdline, time, &mut adds);
                    self.emit(
                        &mut events,
                        &mut used,
                        schema::NEW_TYPE,
                        &at,
                        &[pid, ppid],
                        Some(&cmdline),
                    );
                }
                Dataset::Stp { pid } => {
                    if self.procs.remove(&pid) {
                        if let Ok(id) = InstId::try_from(pid) {
                            removed
                                .get_or_insert_with(|| {
                                    self.indom(time, schema::PROC_INDOM, IndomKind::Delta)
                                })
                                .removed
                                .push(id);
                        }
                    }
                    self.emit(&mut events, &mut used, schema::STP_TYPE, &at, &[pid], None);
                }
                Dataset::Chk { pid, cmdline } => {
                    if !self.procs.contains(&pid) {
                        self.add_proc(pid, &cmdline, time, &mut adds);
                    }
                    let cmd = Some(&*cmdline);
                    self.emit(&mut events, &mut used, schema::CHK_TYPE, &at, &[pid], cmd);
                }
                Dataset::Act { pid, values } => {
                    if !self.procs.contains(&pid) {
                        // ACT for a process whose NEW we never saw.
                        self.add_proc(pid, b"", time, &mut adds);
                    }
                    if let Some(o) = self.open[kind.index()].as_mut() {
                        o.act.push((pid, values));
                    }
                }
                Dataset::Irq { name, counts } => {
                    // Parsed columns were kept as pairs, in dataset order.
                    let pairs: &[(u32, u64)] = match &counts {
                        IrqCounts::Text(_, k) => {
                            let p = &irq_pairs[pair_at..pair_at + *k as usize];
                            pair_at += *k as usize;
                            p
                        }
                        IrqCounts::Pairs(p) => p,
                    };
                    // One lookup for a row seen before (all but the first).
                    let ids = match self.irq_ids.get_mut(name.as_ref()) {
                        Some(ids) => ids,
                        None => self.irq_ids.entry(name.to_string()).or_default(),
                    };
                    let mut o = self.open[kind.index()].as_mut();
                    for &(cpu, n) in pairs {
                        let id = match ids.get(&cpu) {
                            Some(id) => *id,
                            None => {
                                let id = self.irq_count as InstId;
                                self.irq_count += 1;
                                ids.insert(cpu, id);
                                irq_adds
                                    .get_or_insert_with(|| IndomUpdate {
                                        time,
                                        id: schema::IRQ_INDOM,
                                        kind: IndomKind::Delta,
                                        instances: vec![],
                                        removed: vec![],
                                        extras: Extras::default(),
                                    })
                                    .instances
                                    .push(Instance {
                                        id,
                                        name: schema::irq_instance_name(&name, cpu),
                                    });
                                id
                            }
                        };
                        if let Some(o) = o.as_deref_mut() {
                            o.irq.push((id, n));
                        }
                    }
                }
            }
        }
        self.parsed = reuse_vec(parsed);
        self.irq_pairs = irq_pairs;
        // One update per indom and message: PCP wants no two records for
        // one indom at one time.
        if let Some(u) = irq_adds {
            out.push(Item::Indom(u));
        }
        if let Some(u) = adds {
            out.push(Item::Indom(u));
        }
        out.append(&mut events);
        self.events = events;
        if let Some(u) = removed {
            out.push(Item::Indom(u));
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
        let (act, irq) = self.spare_groups.pop().unwrap_or_default();
        self.open[kind.index()] = Some(Open {
            time,
            raw,
            group,
            act,
            irq,
        });
    }

    fn add_proc(
        &mut self,
        pid: i64,
        cmdline: &[u8],
        time: Timestamp,
        adds: &mut Option<IndomUpdate>,
    ) {
        let Ok(id) = InstId::try_from(pid) else {
            self.warnings.push(format!("pid {pid} out of range"));
            return;
        };
        self.procs.insert(pid);
        let mut name = self.spare_names.pop().unwrap_or_default();
        schema::proc_instance_name_into(&mut name, pid, cmdline);
        let u = adds.get_or_insert_with(|| self.indom(time, schema::PROC_INDOM, IndomKind::Delta));
        if let Some(i) = u.instances.iter().position(|i| i.id == id) {
            let old = u.instances.remove(i);
            self.spare_names.push(old.name);
        }
        u.instances.push(Instance { id, name });
    }

    /// Close the open group of `kind`, emitting its sample (ACT, IRQ).
    fn close(&mut self, kind: Kind, out: &mut Vec<Item>) {
        let Some(mut o) = self.open[kind.index()].take() else {
            return;
        };
        let wanted = match kind {
            Kind::Act => !o.act.is_empty(),
            Kind::Irq => !o.irq.is_empty(),
            _ => false,
        };
        if wanted {
            let own = (kind == Kind::Irq) as usize;
            let spare =
                (self.spare_samples[own].pop()).or_else(|| self.spare_samples[1 - own].pop());
            let mut s = spare.unwrap_or_else(|| Sample {
                time: o.time,
                raw_clock: o.raw,
                metrics: Vec::new(),
                extras: Extras::with_capacity(3),
            });
            s.time = o.time;
            s.raw_clock = o.raw;
            if kind == Kind::Act {
                columns(&mut s.metrics, &schema::ACT_METRICS);
                for (c, m) in s.metrics.iter_mut().enumerate() {
                    let Ok(col) = &mut m.values else { continue };
                    fill(
                        col,
                        o.act.iter().map(|(pid, v)| {
                            // cpu, io_bytes, io_wait are unsigned in dlt-kpi (%lu).
                            let val = if c == 1 || c == 2 {
                                Num::I64(v[c])
                            } else {
                                Num::U64(v[c] as u64)
                            };
                            (*pid as InstId, val)
                        }),
                    );
                }
            } else {
                columns(&mut s.metrics, &[schema::IRQ_COUNT]);
                if let Some(Ok(col)) = s.metrics.first_mut().map(|m| &mut m.values) {
                    fill(col, o.irq.iter().map(|&(id, n)| (id, Num::U64(n))));
                }
            }
            Self::group_extras(&mut s.extras, GroupKeys::at_start(kind, o.group));
            out.push(Item::Sample(s));
        }
        o.act.clear();
        o.irq.clear();
        self.spare_groups.push((o.act, o.irq));
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
        let kinds: Vec<Kind> = Kind::ALL
            .into_iter()
            .filter(|k| self.open[k.index()].is_some())
            .collect();
        for k in kinds {
            self.warnings.push(format!(
                "{} group not closed by END at end of input",
                k.name()
            ));
            self.close(k, out);
        }
    }
}

/// [`crate::model::text_value`] of bytes owned already (no copy).
fn text_owned(b: Vec<u8>) -> Value {
    match String::from_utf8(b) {
        Ok(s) => Value::Str(s),
        Err(e) => Value::Bytes(e.into_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refilled value list holds exactly the new values, in order,
    /// whatever kinds and how many it held before.
    #[test]
    fn fill_gives_exactly_the_new_values() {
        let mut col = vec![
            (1, Value::I64(5)),
            (2, Value::Str("x".into())),
            (3, Value::U64(7)),
        ];
        fill(&mut col, [(4, Num::I64(-1)), (5, Num::U64(2))].into_iter());
        assert_eq!(col, [(4, Value::I64(-1)), (5, Value::U64(2))]);
        // Each kind over each kind, a text among them, and longer.
        col.insert(1, (9, Value::Str("y".into())));
        let more = [
            (6, Num::U64(1)),
            (7, Num::I64(2)),
            (8, Num::U64(3)),
            (9, Num::I64(-4)),
            (10, Num::U64(5)),
        ];
        fill(&mut col, more.into_iter());
        let want = [
            (6, Value::U64(1)),
            (7, Value::I64(2)),
            (8, Value::U64(3)),
            (9, Value::I64(-4)),
            (10, Value::U64(5)),
        ];
        assert_eq!(col, want);
        fill(&mut col, std::iter::empty());
        assert!(col.is_empty());
    }

    /// Messages of every type, groups with and without BEG/END, repeated
    /// so that recycled items come back for other types and groups.
    fn messages() -> Vec<(i64, Vec<&'static [u8]>)> {
        let mut m: Vec<(i64, Vec<&'static [u8]>)> = Vec::new();
        for round in 0..3 {
            let t = round * 100;
            m.push((t, vec![b"NEW", b"BEG"]));
            m.push((t + 1, vec![b"NEW", b"10;1;/bin/a b", b"11;1;\xff\xfe"]));
            m.push((t + 2, vec![b"NEW", b"END"]));
            m.push((t + 3, vec![b"ACT", b"BEG"]));
            m.push((t + 4, vec![b"ACT", b"10;1;2;3;4;5", b"11;6;7;8;9;10"]));
            m.push((t + 5, vec![b"CHK", b"10;/bin/a b"]));
            m.push((t + 6, vec![b"ACT", b"END"]));
            m.push((t + 7, vec![b"IRQ", b"LOC;cpu0:5;cpu1:7;", b"ERR;cpu0:0;"]));
            m.push((t + 8, vec![b"STP", b"10", b"11"]));
            m.push((
                t + 9,
                vec![b"CHK", b"12;a-rather-longer-command-line --with args"],
            ));
        }
        m
    }

    fn run(recycle: bool) -> Vec<Item> {
        let mut a = Assembler::new();
        let mut got = Vec::new();
        let mut out = Vec::new();
        for (t, args) in messages() {
            // With and without a storage time (DLT, KPI text), so that
            // recycled events change layout.
            let stored = (t % 3 != 0).then_some(t * 1000);
            a.message(&args, Timestamp(t), Some(t as u64 * 10), stored, &mut out)
                .unwrap();
            for it in out.drain(..) {
                got.push(it.clone());
                if recycle {
                    a.recycle(it);
                }
            }
        }
        a.finish(&mut out);
        got.append(&mut out);
        got
    }

    /// The events of one message carry the same extras under one stamp
    /// (the hand-off then knows them equal without comparing); events of
    /// other messages another stamp. Fails if an event's extras are made
    /// apart instead of copied (stamp 0).
    #[test]
    fn events_of_a_message_share_one_stamp_of_their_extras() {
        let mut a = Assembler::new();
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (t, args) in messages() {
            a.message(&args, Timestamp(t), None, Some(t), &mut out)
                .unwrap();
            let events: Vec<&Event> = (out.iter())
                .filter_map(|it| match it {
                    Item::Event(e) => Some(e),
                    _ => None,
                })
                .collect();
            if let Some(lead) = events.first() {
                assert_ne!(lead.extras.stamp(), 0, "at {t}");
                assert!(seen.insert(lead.extras.stamp()), "stamp again at {t}");
                assert_eq!(lead.extras.i64(X_STORAGE), Some(t));
                for e in &events[1..] {
                    assert_eq!(e.extras, lead.extras, "at {t}");
                    assert_eq!(e.extras.stamp(), lead.extras.stamp(), "at {t}");
                }
            }
            for it in out.drain(..) {
                a.recycle(it);
            }
        }
    }

    #[test]
    fn recycled_items_come_out_as_new_ones() {
        let fresh = run(false);
        let reused = run(true);
        assert!(fresh.len() > 30);
        assert_eq!(fresh.len(), reused.len());
        for (i, (a, b)) in fresh.iter().zip(&reused).enumerate() {
            assert!(
                format!("{a:?}") == format!("{b:?}"),
                "item {i}: {a:?} != {b:?}"
            );
        }
    }

    /// The in-place path gives what setting and removing key by key gives,
    /// from every layout a recycled item can have (and is taken for all of
    /// them) and from some it should not have (a start key at another
    /// address, keys after `kpi.kind`), where it must step aside.
    /// A group's keys with a start and storage time.
    fn keys(kind: Kind, group: u64, beg: (Option<i64>, Option<u64>), stored: Stored) -> GroupKeys {
        GroupKeys {
            beg_time: beg.0,
            beg_raw: beg.1,
            stored,
            ..GroupKeys::at_start(kind, group)
        }
    }

    #[test]
    fn group_extras_in_place_matches_key_by_key() {
        let begs = [
            (None, None),
            (Some(-7), None),
            (None, Some(70)),
            (Some(-8), Some(80)),
        ];
        // Recycled layouts: the keys as this module's code put them there
        // (the in-place path finds them by address).
        let mut recycled = Vec::new();
        for prefix in [false, true] {
            for (bt, br) in begs {
                let mut x = Extras::default();
                let stored = Stored::Set(prefix.then_some(5));
                Assembler::group_extras(&mut x, keys(Kind::New, 1, (bt, br), stored));
                recycled.push((x, prefix));
            }
        }
        // A storage time at another address, set by a reader after us.
        let mut late = Extras::default();
        Assembler::group_extras(&mut late, GroupKeys::at_start(Kind::New, 1));
        late.set(ExtraKey::Owned(X_STORAGE.to_string()), ExtraValue::I64(6));
        let mut odd = vec![Extras::default(), late];
        let mut owned = recycled[0].0.clone();
        owned.set(ExtraKey::Owned(X_BEG_TIME.to_string()), ExtraValue::I64(3));
        odd.push(owned);
        let mut after = recycled[3].0.clone();
        after.set("kpi.z", ExtraValue::U64(9));
        odd.push(after);
        let stores = [Stored::Leave, Stored::Set(None), Stored::Set(Some(9))];
        // Each start with whether it is a recycled layout holding a
        // storage time (None: not a recycled layout).
        let starts: Vec<(&Extras, Option<bool>)> = (recycled.iter())
            .map(|(x, p)| (x, Some(*p)))
            .chain(odd.iter().map(|x| (x, None)))
            .collect();
        for ((start, prefix), stored) in starts
            .iter()
            .flat_map(|s| stores.iter().map(move |st| (*s, *st)))
        {
            // Recycled layouts are taken unless the storage time is to be
            // set where there is none or dropped where there is one.
            let must_take = match stored {
                Stored::Leave => prefix.is_some(),
                Stored::Set(t) => prefix == Some(t.is_some()),
            };
            for (bt, br) in begs {
                let mut in_place = start.clone();
                let k = keys(Kind::Chk, 4, (bt, br), stored);
                let took = Assembler::group_extras_in_place(&mut in_place, k);
                if must_take {
                    assert!(took, "not taken from {start:?}");
                }
                if !took {
                    assert_eq!(format!("{in_place:?}"), format!("{start:?}"));
                    Assembler::group_extras(&mut in_place, k);
                }
                let mut key_by_key = start.clone();
                Assembler::group_extras_by_key(&mut key_by_key, k);
                assert_eq!(
                    format!("{in_place:?}"),
                    format!("{key_by_key:?}"),
                    "from {start:?} with {bt:?} {br:?} {stored:?}"
                );
            }
        }
    }
}
