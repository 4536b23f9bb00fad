//! Instance-domain records of a non-PCP source: the writer keeps each
//! domain's membership and writes a record only when it really changed.
//!
//! - v3: the first record of a domain is full, later ones are deltas
//!   (added instances with their names, removed ones with string offset
//!   −1), unless an instance changed its name or the delta would be longer
//!   than the membership, as pmlogger decides. libpcp ignores records
//!   without instances, so the record after an empty membership is full.
//! - v2: a full record, only when the membership changed.
//! - Before each result, the changes since the previous result make a
//!   record at the time of the latest change (as before), but only the last
//!   record of each timestamp is written: libpcp uses nothing else (every
//!   result at that time sees the last one), and it treats two equal records
//!   of one timestamp as one, which would break a chain of deltas. So a
//!   record is staged and written once a record of a later time follows.
//! - Record times never go back within a domain (a delta applies to the
//!   latest record before it in time, not in the file) nor before the last
//!   result written (that result was written without the change).

use super::layout::{put_stamp, Stamp, Version, TYPE_INDOM, TYPE_INDOM_DELTA, TYPE_INDOM_V2};
use crate::model::IntMap;
use crate::model::{IndomKind, IndomUpdate};
use std::num::NonZeroU32;

/// An instance name: a slot of its domain's [`Names`], counted from 1 (so
/// that `Option<Name>` takes four bytes).
type Name = NonZeroU32;

/// Generations of a domain's marks run up to this, then start again
/// (`Dom::renumber`; tests do that often: it must not change a record).
const GEN_LIMIT: u32 = if cfg!(test) { 5 } else { u32::MAX - 2 };

/// The instance names of a domain, in slots shared by the membership and
/// the states kept for the next records, each with the count of those that
/// hold it; a slot no state holds is refilled for the next name (no
/// allocation per instance added once there are slots, no atomic count).
#[derive(Default)]
struct Names {
    text: Vec<String>,
    refs: Vec<u32>,
    free: Vec<Name>,
    /// Slots refilled (the randomized test makes sure they are).
    #[cfg(test)]
    reused: u64,
}

impl Names {
    fn get(&self, n: Name) -> &str {
        &self.text[n.get() as usize - 1]
    }

    /// A slot holding `s`, held once.
    fn add(&mut self, s: &str) -> Name {
        match self.free.pop() {
            Some(n) => {
                let k = n.get() as usize - 1;
                let t = &mut self.text[k];
                if t.capacity() < s.len() {
                    // Exactly as long: a slot keeps the longest name it
                    // held, not twice that.
                    *t = s.to_string();
                } else {
                    t.clear();
                    t.push_str(s);
                }
                self.refs[k] = 1;
                #[cfg(test)]
                {
                    self.reused += 1;
                }
                n
            }
            None => {
                self.text.push(s.to_string());
                self.refs.push(1);
                Name::new(self.text.len() as u32).expect("a slot counted from 1")
            }
        }
    }

    #[inline]
    fn hold(&mut self, n: Option<Name>) {
        if let Some(n) = n {
            self.refs[n.get() as usize - 1] += 1;
        }
    }

    #[inline]
    fn release(&mut self, n: Option<Name>) {
        if let Some(n) = n {
            let r = &mut self.refs[n.get() as usize - 1];
            *r -= 1;
            if *r == 0 {
                self.free.push(n);
            }
        }
    }

    fn same(&self, a: Name, b: Name) -> bool {
        a == b || self.get(a) == self.get(b)
    }
}

/// An instance that is a member, or was touched since the last record (24
/// bytes: a KPI source touches thousands between two records).
#[derive(Clone, Copy)]
struct Inst {
    /// Its name now (None: not a member).
    cur: Option<Name>,
    /// Its state in the last record written, if it was touched since (the
    /// domain's `base_gen`).
    base: Option<Name>,
    base_gen: u32,
    /// Its state in the staged record, if it was touched since staging
    /// (the domain's `stage_gen`).
    stage: Option<Name>,
    stage_gen: u32,
    /// The last full update that named it.
    seen: u32,
}

/// A domain's instances were not touched in generation 0.
const NEW: Inst = Inst {
    cur: None,
    base: None,
    base_gen: 0,
    stage: None,
    stage_gen: 0,
    seen: 0,
};

/// What a domain keeps of its instances' states in the last record and in
/// the staged one: an instance's first change since each keeps its state
/// before. Starting a new staged record or writing it ends a generation, so
/// that no instance's mark is cleared one by one.
struct Log {
    names: Names,
    /// Instances touched since the last record written, and since staging
    /// with their staged state (what a new staged record lets go, without
    /// a lookup), once each.
    base_ids: Vec<i32>,
    stage_ids: Vec<(i32, Option<Name>)>,
    spare_ids: Vec<i32>,
    base_gen: u32,
    stage_gen: u32,
    /// Members now.
    members: usize,
}

impl Log {
    /// Note `prev`, the state of instance `id` before a change, where the
    /// change is its first since the last record or (when a record is
    /// staged) since staging. (Once per instance changed: the compiler
    /// kept it out of line.)
    #[inline(always)]
    fn touch(&mut self, e: &mut Inst, id: i32, prev: Option<Name>, staged: bool) {
        if staged && e.stage_gen != self.stage_gen {
            e.stage = prev;
            e.stage_gen = self.stage_gen;
            self.names.hold(prev);
            self.stage_ids.push((id, prev));
        }
        if e.base_gen != self.base_gen {
            e.base = prev;
            e.base_gen = self.base_gen;
            self.names.hold(prev);
            self.base_ids.push(id);
        }
    }

    /// Make instance `id` a member named `name`, unless it is one by that
    /// name already.
    #[inline]
    fn name(&mut self, e: &mut Inst, id: i32, name: &str, staged: bool) {
        match e.cur {
            Some(n) if self.names.get(n) == name => {}
            _ => {
                let n = self.names.add(name);
                self.set(e, id, Some(n), staged);
            }
        }
    }

    /// Give instance `id` the name `n` (None: no member; a name is held by
    /// its instance from `Names::add`), noting its state before.
    #[inline]
    fn set(&mut self, e: &mut Inst, id: i32, n: Option<Name>, staged: bool) {
        let prev = std::mem::replace(&mut e.cur, n);
        self.touch(e, id, prev, staged);
        self.names.release(prev);
        self.members = self.members + n.is_some() as usize - prev.is_some() as usize;
    }
}

struct Dom {
    insts: IntMap<i32, Inst>,
    log: Log,
    /// The last full update.
    full_gen: u32,
    /// Time of the staged record (the membership when it was staged).
    staged: Option<i64>,
    /// Changes since the last result, and the time of the latest.
    dirty: bool,
    changed: i64,
    /// Time of the last record written.
    last_rec: Option<i64>,
    /// libpcp holds a record of this domain that a delta can apply to (it
    /// drops records without instances).
    base: bool,
}

impl Dom {
    fn new() -> Dom {
        Dom {
            insts: IntMap::default(),
            log: Log {
                names: Names::default(),
                base_ids: Vec::new(),
                stage_ids: Vec::new(),
                spare_ids: Vec::new(),
                base_gen: 1,
                stage_gen: 1,
                members: 0,
            },
            full_gen: 0,
            staged: None,
            dirty: false,
            changed: 0,
            last_rec: None,
            base: false,
        }
    }

    /// An instance's name in the staged record.
    fn staged_name(&self, e: &Inst) -> Option<Name> {
        if e.stage_gen == self.log.stage_gen {
            e.stage
        } else {
            e.cur
        }
    }

    /// Generations start again before they run out: the marks of the
    /// current ones become 1, all others 0.
    fn renumber(&mut self) {
        let log = &mut self.log;
        if log.base_gen.max(log.stage_gen).max(self.full_gen) < GEN_LIMIT {
            return;
        }
        for e in self.insts.values_mut() {
            e.base_gen = (e.base_gen == log.base_gen) as u32;
            e.stage_gen = (e.stage_gen == log.stage_gen) as u32;
            e.seen = 0;
        }
        log.base_gen = 1;
        log.stage_gen = 1;
        self.full_gen = 0;
    }

    /// A new staged record: the states noted since the one before go.
    fn restage(&mut self) {
        let log = &mut self.log;
        for (_, n) in log.stage_ids.drain(..) {
            log.names.release(n);
        }
        self.renumber();
        self.log.stage_gen += 1;
    }

    /// The staged record becomes the last one written: the states noted
    /// since staging become those since it, and instances that are no
    /// members and untouched since go.
    fn rebase(&mut self) {
        let log = &mut self.log;
        let old = std::mem::take(&mut log.base_ids);
        for i in &old {
            if let Some(e) = self.insts.get(i) {
                log.names.release(e.base);
            }
        }
        self.renumber();
        let log = &mut self.log;
        log.base_gen += 1;
        // The staged states move over, with their holds.
        let mut ids = std::mem::take(&mut log.spare_ids);
        for (i, n) in log.stage_ids.drain(..) {
            if let Some(e) = self.insts.get_mut(&i) {
                e.base = n;
                e.base_gen = log.base_gen;
            }
            ids.push(i);
        }
        log.base_ids = ids;
        log.stage_gen += 1;
        for i in &old {
            if self
                .insts
                .get(i)
                .is_some_and(|e| e.cur.is_none() && e.base_gen != log.base_gen)
            {
                self.insts.remove(i);
            }
        }
        log.spare_ids = old;
        log.spare_ids.clear();
    }

    /// Every name slot is held as often as the states that hold it say,
    /// and free when none does (tests).
    #[cfg(test)]
    fn check_holds(&self) {
        let n = &self.log.names;
        let mut want = vec![0u32; n.text.len()];
        let (bg, sg) = (self.log.base_gen, self.log.stage_gen);
        for e in self.insts.values() {
            let base = e.base.filter(|_| e.base_gen == bg);
            let stage = e.stage.filter(|_| e.stage_gen == sg);
            for s in [e.cur, base, stage].into_iter().flatten() {
                want[s.get() as usize - 1] += 1;
            }
        }
        assert_eq!(n.refs, want, "holds of the name slots");
        let mut free: Vec<u32> = n.free.iter().map(|s| s.get() - 1).collect();
        free.sort_unstable();
        let none: Vec<u32> = (0..want.len() as u32)
            .filter(|k| want[*k as usize] == 0)
            .collect();
        assert_eq!(free, none, "free name slots");
    }
}

pub struct Tracker {
    v: Version,
    /// By id, in id order (a source has a few domains: a list walked by
    /// index before every result costs less than a map's cursor).
    doms: Vec<(u32, Dom)>,
    /// Entries of the record being built: (instance, name offset or None).
    scratch: Vec<(i32, Option<usize>)>,
    strtab: Vec<u8>,
    /// Scratch of `emit`: (instance, added or renamed) of the changes, and
    /// the members of a full record.
    changes: Vec<(i32, bool)>,
    ids: Vec<i32>,
    /// Records written, for the loss report.
    pub records: u64,
}

impl Tracker {
    pub fn new(v: Version) -> Tracker {
        Tracker {
            v,
            doms: Vec::new(),
            scratch: Vec::new(),
            strtab: Vec::new(),
            changes: Vec::new(),
            ids: Vec::new(),
            records: 0,
        }
    }

    /// Apply an update (written with the next result).
    pub fn update(&mut self, u: &IndomUpdate) {
        let tc = quantize(self.v, u.time.0);
        let k = match self.doms.binary_search_by_key(&u.id, |d| d.0) {
            Ok(k) => k,
            Err(k) => {
                self.doms.insert(k, (u.id, Dom::new()));
                k
            }
        };
        let d = &mut self.doms[k].1;
        if u.kind == IndomKind::Full {
            d.renumber();
        }
        let staged = d.staged.is_some();
        let (insts, log) = (&mut d.insts, &mut d.log);
        match u.kind {
            IndomKind::Full => {
                d.full_gen += 1;
                let g = d.full_gen;
                for i in &u.instances {
                    let e = insts.entry(i.id).or_insert(NEW);
                    if e.seen == g {
                        // Named twice: the second name replaces the first,
                        // noted as a change from no member (as a membership
                        // rebuilt from the update would have it).
                        let n = log.names.add(&i.name);
                        log.touch(e, i.id, None, staged);
                        let old = e.cur.replace(n);
                        log.names.release(old);
                        continue;
                    }
                    e.seen = g;
                    log.name(e, i.id, &i.name, staged);
                }
                for (id, e) in insts.iter_mut() {
                    if e.seen != g && e.cur.is_some() {
                        log.set(e, *id, None, staged);
                    }
                }
            }
            IndomKind::Delta => {
                for id in &u.removed {
                    if let Some(e) = insts.get_mut(id).filter(|e| e.cur.is_some()) {
                        log.set(e, *id, None, staged);
                    }
                }
                for i in &u.instances {
                    let e = insts.entry(i.id).or_insert(NEW);
                    log.name(e, i.id, &i.name, staged);
                }
            }
        }
        d.dirty = true;
        d.changed = tc;
    }

    /// The changes since the last result make a record, before a result
    /// at `t` (None: the end); `after` is the time of the result before.
    /// Records that no later one can replace are written: those of times
    /// before `t`, all of them at the end.
    pub fn before_result(&mut self, t: Option<i64>, after: Option<i64>, out: &mut Vec<u8>) -> bool {
        let after = after.map(|a| quantize(self.v, a));
        let t = t.map(|t| quantize(self.v, t));
        let mut wrote = false;
        for k in 0..self.doms.len() {
            if self.doms[k].1.dirty {
                wrote |= self.stage(k, after, out);
            }
            let due = match (self.doms[k].1.staged, t) {
                (Some(s), Some(t)) => s < t,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if due {
                wrote |= self.emit(k, out);
            }
        }
        wrote
    }

    /// Stage the current membership of domain `k` (an index of `doms`) as
    /// a record at the time of its latest change; a staged record of an
    /// earlier time is written first.
    fn stage(&mut self, k: usize, after: Option<i64>, out: &mut Vec<u8>) -> bool {
        let step = step(self.v);
        let d = &mut self.doms[k].1;
        d.dirty = false;
        let mut t = d.changed;
        if let Some(a) = after {
            t = t.max(a);
        }
        let mut wrote = false;
        if let Some(s) = d.staged {
            if t <= s {
                // The same timestamp: this record replaces the staged one.
                d.restage();
                return false;
            }
            wrote = self.emit(k, out);
        }
        let d = &mut self.doms[k].1;
        if let Some(l) = d.last_rec {
            t = t.max(l + step);
        }
        d.staged = Some(t);
        wrote
    }

    /// Write the staged record of domain `k`, if the membership changed
    /// since the last record (or the domain has none yet).
    fn emit(&mut self, k: usize, out: &mut Vec<u8>) -> bool {
        let (id, d) = &mut self.doms[k];
        let id = *id;
        let Some(t) = d.staged.take() else {
            return false;
        };
        let changes = &mut self.changes;
        changes.clear();
        let (mut adds, mut dels, mut renamed) = (0usize, 0usize, false);
        for i in &d.log.base_ids {
            let e = &d.insts[i];
            let new = d.staged_name(e);
            match (e.base, new) {
                (None, None) => {}
                (Some(a), Some(b)) if d.log.names.same(a, b) => {}
                (None, Some(_)) => {
                    adds += 1;
                    changes.push((*i, true));
                }
                (Some(_), None) => {
                    dels += 1;
                    changes.push((*i, false));
                }
                (Some(_), Some(_)) => {
                    renamed = true;
                    changes.push((*i, true));
                }
            }
        }
        let first = d.last_rec.is_none();
        if changes.is_empty() && !first {
            d.rebase();
            return false;
        }
        changes.sort_unstable_by_key(|c| c.0);
        // Members of the staged record: now, plus those removed since
        // staging, less those added since.
        let mut size = d.log.members;
        for (i, n) in &d.log.stage_ids {
            size = size + n.is_some() as usize - d.insts[i].cur.is_some() as usize;
        }
        let delta = self.v == Version::V3 && d.base && !renamed && adds + dels <= size;
        self.scratch.clear();
        self.strtab.clear();
        let strtab = &mut self.strtab;
        let names = &d.log.names;
        let mut name = |n: Name| {
            let at = strtab.len();
            strtab.extend_from_slice(names.get(n).as_bytes());
            strtab.push(0);
            Some(at)
        };
        if delta {
            for (i, add) in changes.iter() {
                let at = if *add {
                    d.staged_name(&d.insts[i]).and_then(&mut name)
                } else {
                    None
                };
                self.scratch.push((*i, at));
            }
        } else {
            let ids = &mut self.ids;
            ids.clear();
            ids.extend(
                d.insts
                    .iter()
                    .filter(|(_, e)| d.staged_name(e).is_some())
                    .map(|(i, _)| *i),
            );
            ids.sort_unstable();
            for i in ids.iter() {
                if let Some(n) = d.staged_name(&d.insts[i]) {
                    let at = name(n);
                    self.scratch.push((*i, at));
                }
            }
        }
        d.rebase();
        d.last_rec = Some(t);
        d.base = !self.scratch.is_empty();
        let rtype = match (self.v, delta) {
            (Version::V2, _) => TYPE_INDOM_V2,
            (Version::V3, false) => TYPE_INDOM,
            (Version::V3, true) => TYPE_INDOM_DELTA,
        };
        encode(self.v, rtype, t, id, &self.scratch, &self.strtab, out);
        self.records += 1;
        true
    }
}

/// A time in the version's resolution (v2 stores microseconds).
fn quantize(v: Version, t: i64) -> i64 {
    match v {
        Version::V2 => t - t.rem_euclid(1000),
        Version::V3 => t,
    }
}

/// The least step between two record times of the version.
fn step(v: Version) -> i64 {
    match v {
        Version::V2 => 1000,
        Version::V3 => 1,
    }
}

/// One instance-domain record: entries are (instance, offset of its name
/// in `strtab`, None for a removed instance).
pub fn encode(
    v: Version,
    rtype: i32,
    t: i64,
    indom: u32,
    entries: &[(i32, Option<usize>)],
    strtab: &[u8],
    out: &mut Vec<u8>,
) {
    let start = out.len();
    out.extend_from_slice(&[0u8; 4]);
    out.extend_from_slice(&rtype.to_be_bytes());
    put_stamp(v, out, Stamp::from_ns(t));
    out.extend_from_slice(&indom.to_be_bytes());
    out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    for (i, _) in entries {
        out.extend_from_slice(&i.to_be_bytes());
    }
    for (_, at) in entries {
        let w = at.map_or(-1i32, |a| a as i32);
        out.extend_from_slice(&w.to_be_bytes());
    }
    out.extend_from_slice(strtab);
    let len = (out.len() - start + 4) as u32;
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
}

/// The tracker as it was before its instances and names moved into one map
/// and slots (`Arc<str>` names in a map per state): the randomized test
/// below holds the tracker to the records this one writes.
#[cfg(test)]
mod reference {
    use super::super::layout::{Version, TYPE_INDOM, TYPE_INDOM_DELTA, TYPE_INDOM_V2};
    use super::{encode, quantize, step};
    use crate::model::IntHasher;
    use crate::model::{IndomKind, IndomUpdate};
    use std::collections::HashMap;
    use std::hash::BuildHasherDefault;
    use std::sync::Arc;

    /// Names are shared between the membership and the states kept for the
    /// next records: one allocation per instance added, none per record.
    type Name = Arc<str>;
    type Orig = HashMap<i32, Option<Name>, BuildHasherDefault<IntHasher>>;
    /// Unordered: a KPI source adds or removes an instance per process event,
    /// and a full record sorts its ids once.
    type Members = HashMap<i32, Name, BuildHasherDefault<IntHasher>>;

    #[derive(Default)]
    struct Dom {
        /// Current membership.
        cur: Members,
        /// The state in the last record written of every instance touched
        /// since (None: not a member).
        orig_base: Orig,
        /// The state in the staged record of every instance touched since.
        orig_stage: Orig,
        /// Time of the staged record (the membership when it was staged).
        staged: Option<i64>,
        /// Changes since the last result, and the time of the latest.
        dirty: bool,
        changed: i64,
        /// Time of the last record written.
        last_rec: Option<i64>,
        /// libpcp holds a record of this domain that a delta can apply to (it
        /// drops records without instances).
        base: bool,
    }

    impl Dom {
        fn touch(&mut self, id: i32, prev: Option<Name>) {
            if self.staged.is_some() && !self.orig_stage.contains_key(&id) {
                self.orig_stage.insert(id, prev.clone());
            }
            self.orig_base.entry(id).or_insert(prev);
        }

        /// An instance's name in the staged record.
        fn staged_name(&self, id: i32) -> Option<&str> {
            match self.orig_stage.get(&id) {
                Some(o) => o.as_deref(),
                None => self.cur.get(&id).map(|n| &**n),
            }
        }
    }

    pub struct Tracker {
        v: Version,
        /// By id, in id order (a source has a few domains: a list walked by
        /// index before every result costs less than a map's cursor).
        doms: Vec<(u32, Dom)>,
        /// Entries of the record being built: (instance, name offset or None).
        scratch: Vec<(i32, Option<usize>)>,
        strtab: Vec<u8>,
        /// Records written, for the loss report.
        pub records: u64,
    }

    impl Tracker {
        pub fn new(v: Version) -> Tracker {
            Tracker {
                v,
                doms: Vec::new(),
                scratch: Vec::new(),
                strtab: Vec::new(),
                records: 0,
            }
        }

        /// Apply an update (written with the next result).
        pub fn update(&mut self, u: &IndomUpdate) {
            let tc = quantize(self.v, u.time.0);
            let k = match self.doms.binary_search_by_key(&u.id, |d| d.0) {
                Ok(k) => k,
                Err(k) => {
                    self.doms.insert(k, (u.id, Dom::default()));
                    k
                }
            };
            let d = &mut self.doms[k].1;
            match u.kind {
                IndomKind::Full => {
                    let mut old = std::mem::take(&mut d.cur);
                    for i in &u.instances {
                        match old.remove(&i.id) {
                            Some(prev) if *prev == *i.name => {
                                d.cur.insert(i.id, prev);
                            }
                            prev => {
                                d.touch(i.id, prev);
                                d.cur.insert(i.id, i.name.as_str().into());
                            }
                        }
                    }
                    for (id, name) in old {
                        d.touch(id, Some(name));
                    }
                }
                IndomKind::Delta => {
                    for id in &u.removed {
                        if let Some(name) = d.cur.remove(id) {
                            d.touch(*id, Some(name));
                        }
                    }
                    for i in &u.instances {
                        match d.cur.get(&i.id) {
                            Some(n) if **n == *i.name => {}
                            _ => {
                                let prev = d.cur.insert(i.id, i.name.as_str().into());
                                d.touch(i.id, prev);
                            }
                        }
                    }
                }
            }
            d.dirty = true;
            d.changed = tc;
        }

        /// The changes since the last result make a record, before a result
        /// at `t` (None: the end); `after` is the time of the result before.
        /// Records that no later one can replace are written: those of times
        /// before `t`, all of them at the end.
        pub fn before_result(
            &mut self,
            t: Option<i64>,
            after: Option<i64>,
            out: &mut Vec<u8>,
        ) -> bool {
            let after = after.map(|a| quantize(self.v, a));
            let t = t.map(|t| quantize(self.v, t));
            let mut wrote = false;
            for k in 0..self.doms.len() {
                if self.doms[k].1.dirty {
                    wrote |= self.stage(k, after, out);
                }
                let due = match (self.doms[k].1.staged, t) {
                    (Some(s), Some(t)) => s < t,
                    (Some(_), None) => true,
                    (None, _) => false,
                };
                if due {
                    wrote |= self.emit(k, out);
                }
            }
            wrote
        }

        /// Stage the current membership of domain `k` (an index of `doms`) as
        /// a record at the time of its latest change; a staged record of an
        /// earlier time is written first.
        fn stage(&mut self, k: usize, after: Option<i64>, out: &mut Vec<u8>) -> bool {
            let step = step(self.v);
            let d = &mut self.doms[k].1;
            d.dirty = false;
            let mut t = d.changed;
            if let Some(a) = after {
                t = t.max(a);
            }
            let mut wrote = false;
            if let Some(s) = d.staged {
                if t <= s {
                    // The same timestamp: this record replaces the staged one.
                    d.orig_stage.clear();
                    return false;
                }
                wrote = self.emit(k, out);
            }
            let d = &mut self.doms[k].1;
            if let Some(l) = d.last_rec {
                t = t.max(l + step);
            }
            d.staged = Some(t);
            wrote
        }

        /// Write the staged record of domain `k`, if the membership changed
        /// since the last record (or the domain has none yet).
        fn emit(&mut self, k: usize, out: &mut Vec<u8>) -> bool {
            let (id, d) = &mut self.doms[k];
            let id = *id;
            let Some(t) = d.staged.take() else {
                return false;
            };
            let mut changes: Vec<(i32, bool)> = Vec::with_capacity(d.orig_base.len());
            let (mut adds, mut dels, mut renamed) = (0usize, 0usize, false);
            for (i, old) in &d.orig_base {
                let new = d.staged_name(*i);
                match (old.as_deref(), new) {
                    (None, None) => {}
                    (Some(a), Some(b)) if a == b => {}
                    (None, Some(_)) => {
                        adds += 1;
                        changes.push((*i, true));
                    }
                    (Some(_), None) => {
                        dels += 1;
                        changes.push((*i, false));
                    }
                    (Some(_), Some(_)) => {
                        renamed = true;
                        changes.push((*i, true));
                    }
                }
            }
            let first = d.last_rec.is_none();
            // The new base: what the staged record holds.
            let next_orig = std::mem::take(&mut d.orig_stage);
            if changes.is_empty() && !first {
                d.orig_base = next_orig;
                return false;
            }
            changes.sort_unstable_by_key(|c| c.0);
            // Members of the staged record.
            let size = d.cur.len() + next_orig.values().filter(|o| o.is_some()).count()
                - next_orig.keys().filter(|i| d.cur.contains_key(i)).count();
            let delta = self.v == Version::V3 && d.base && !renamed && adds + dels <= size;
            self.scratch.clear();
            self.strtab.clear();
            let strtab = &mut self.strtab;
            let mut name = |n: &str| {
                let at = strtab.len();
                strtab.extend_from_slice(n.as_bytes());
                strtab.push(0);
                Some(at)
            };
            // The staged names: `cur` less what changed since staging.
            let staged_name = |i: i32| -> Option<&str> {
                match next_orig.get(&i) {
                    Some(o) => o.as_deref(),
                    None => d.cur.get(&i).map(|n| &**n),
                }
            };
            if delta {
                for (i, add) in &changes {
                    let at = if *add {
                        staged_name(*i).and_then(&mut name)
                    } else {
                        None
                    };
                    self.scratch.push((*i, at));
                }
            } else {
                // Members now, plus those removed since staging, less those
                // added since.
                let mut ids: Vec<i32> = d.cur.keys().copied().collect();
                ids.extend(next_orig.keys().copied().filter(|i| !d.cur.contains_key(i)));
                ids.sort_unstable();
                for i in ids {
                    if let Some(n) = staged_name(i) {
                        let at = name(n);
                        self.scratch.push((i, at));
                    }
                }
            }
            d.orig_base = next_orig;
            d.last_rec = Some(t);
            d.base = !self.scratch.is_empty();
            let rtype = match (self.v, delta) {
                (Version::V2, _) => TYPE_INDOM_V2,
                (Version::V3, false) => TYPE_INDOM,
                (Version::V3, true) => TYPE_INDOM_DELTA,
            };
            encode(self.v, rtype, t, id, &self.scratch, &self.strtab, out);
            self.records += 1;
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Extras, Instance, Timestamp};

    fn upd(t: i64, kind: IndomKind, add: &[(i32, &str)], del: &[i32]) -> IndomUpdate {
        IndomUpdate {
            time: Timestamp(t),
            id: 7,
            kind,
            instances: add
                .iter()
                .map(|(i, n)| Instance {
                    id: *i,
                    name: n.to_string(),
                })
                .collect(),
            removed: del.to_vec(),
            extras: Extras::default(),
        }
    }

    /// (type, time ns, [(inst, name or None)]) of each record in `b`,
    /// read back by the archive reader's parser.
    /// (record type, time, entries) of an instance-domain record.
    type Rec = (i32, i64, Vec<(i32, Option<String>)>);

    fn records(b: &[u8]) -> Vec<Rec> {
        records_v(Version::V3, b)
    }

    fn records_v(v: Version, b: &[u8]) -> Vec<Rec> {
        let mut out = Vec::new();
        let mut o = 0;
        while o < b.len() {
            let len = u32::from_be_bytes(b[o..o + 4].try_into().unwrap()) as usize;
            let rec = &b[o..o + len];
            let at = super::super::meta::RecAt {
                path: "x".as_ref(),
                off: o as u64,
                recno: 0,
            };
            let r = super::super::meta::parse(v, rec, at, &mut vec![]);
            match r.unwrap() {
                super::super::meta::MetaRec::InDom(i) => {
                    let e = i.entries().map(|(n, s)| (n, s.map(str::to_string)));
                    out.push((i.rtype, i.stamp.ns(), e.collect()))
                }
                r => panic!("not an indom record: {r:?}"),
            }
            o += len;
        }
        out
    }

    /// Drives a tracker as the writer does: `Some(update)` or a result at
    /// a time.
    enum Step {
        U(IndomUpdate),
        R(i64),
    }

    fn run(v: Version, steps: Vec<Step>) -> Vec<u8> {
        let mut tr = Tracker::new(v);
        let mut out = Vec::new();
        let mut last = None;
        for s in steps {
            match s {
                Step::U(u) => tr.update(&u),
                Step::R(t) => {
                    tr.before_result(Some(t), last, &mut out);
                    last = Some(t);
                }
            }
        }
        tr.before_result(None, last, &mut out);
        out
    }

    use Step::{R, U};

    /// The tracker writes the records the one before it wrote
    /// (`reference`), for random runs of full updates, deltas and results:
    /// names that change or stay, ids named twice in one update, removals
    /// of non-members, times that go back, two domains, v2 and v3, and
    /// enough names that their slots are collected and refilled.
    #[test]
    fn records_are_those_of_the_reference_tracker() {
        let mut rng = crate::model::TestRng(0x2545_f491_4f6c_dd1d);
        let mut rnd = move |n: u64| rng.below(n);
        let mut reused = 0;
        for run in 0..4000 {
            let v = if run % 3 == 0 {
                Version::V2
            } else {
                Version::V3
            };
            // Results after most updates in some runs, after few in others.
            let updates = 2 + rnd(8);
            let mut a = Tracker::new(v);
            let mut b = reference::Tracker::new(v);
            let (mut oa, mut ob) = (Vec::new(), Vec::new());
            let mut last = None;
            let mut t = 1_000_000i64;
            let ids = 1 + rnd(14) as i32;
            for step in 0..rnd(150) {
                t += rnd(4000) as i64 - 1000;
                if rnd(10) < updates {
                    let kind = if rnd(6) == 0 {
                        IndomKind::Full
                    } else {
                        IndomKind::Delta
                    };
                    let names = ["a", "b", "c", "a b"];
                    let add: Vec<(i32, String)> = (0..rnd(6))
                        .map(|_| {
                            let i = rnd(ids as u64) as i32;
                            let n = match rnd(5) {
                                k @ 0..=3 => names[k as usize].to_string(),
                                _ => format!("p{}", rnd(50)),
                            };
                            (i, n)
                        })
                        .collect();
                    let del: Vec<i32> = (0..rnd(4)).map(|_| rnd(ids as u64) as i32).collect();
                    let add: Vec<(i32, &str)> = add.iter().map(|(i, n)| (*i, n.as_str())).collect();
                    let mut u = upd(t - rnd(3) as i64 * 700, kind, &add, &del);
                    u.id = 7 + rnd(2) as u32;
                    a.update(&u);
                    b.update(&u);
                } else {
                    let rt = t + rnd(3000) as i64 - 500;
                    let wa = a.before_result(Some(rt), last, &mut oa);
                    let wb = b.before_result(Some(rt), last, &mut ob);
                    assert_eq!((wa, &oa), (wb, &ob), "run {run}, step {step}");
                    last = Some(rt);
                }
            }
            a.before_result(None, last, &mut oa);
            b.before_result(None, last, &mut ob);
            assert_eq!(oa, ob, "run {run}");
            assert_eq!(a.records, b.records, "run {run}");
            for (_, d) in &a.doms {
                d.check_holds();
                reused += d.log.names.reused;
            }
        }
        assert!(reused > 10_000, "name slots reused {reused} times");
    }

    #[test]
    fn deltas_after_one_full_record_and_only_real_changes() {
        let out = run(
            Version::V3,
            vec![
                U(upd(10, IndomKind::Full, &[], &[])),
                R(11),
                U(upd(20, IndomKind::Delta, &[(5, "five"), (2, "two")], &[])),
                R(21),
                // Added and removed again before a result: no record.
                U(upd(30, IndomKind::Delta, &[(9, "nine")], &[])),
                U(upd(30, IndomKind::Delta, &[], &[9])),
                R(31),
                U(upd(40, IndomKind::Delta, &[(3, "three")], &[5])),
                R(41),
            ],
        );
        assert_eq!(
            records(&out),
            vec![
                (TYPE_INDOM, 10, vec![]),
                // libpcp ignores the empty record: the next one is full.
                (
                    TYPE_INDOM,
                    20,
                    vec![(2, Some("two".into())), (5, Some("five".into()))]
                ),
                (
                    TYPE_INDOM_DELTA,
                    40,
                    vec![(3, Some("three".into())), (5, None)]
                ),
            ]
        );
    }

    #[test]
    fn the_last_record_of_a_timestamp_is_written_and_renames_are_full() {
        let out = run(
            Version::V3,
            vec![
                U(upd(10, IndomKind::Full, &[(1, "a"), (2, "b")], &[])),
                R(10),
                // More changes at 10 after a result at 10: the one record
                // at 10 holds them (libpcp uses the last of a timestamp).
                U(upd(10, IndomKind::Delta, &[(3, "c")], &[])),
                R(10),
                U(upd(12, IndomKind::Delta, &[(4, "d")], &[])),
                R(12),
                U(upd(14, IndomKind::Delta, &[(1, "A")], &[])),
                R(15),
            ],
        );
        let r = records(&out);
        assert_eq!(r.len(), 3, "{r:?}");
        assert_eq!((r[0].0, r[0].1, r[0].2.len()), (TYPE_INDOM, 10, 3));
        assert_eq!(r[1], (TYPE_INDOM_DELTA, 12, vec![(4, Some("d".into()))]));
        assert_eq!((r[2].0, r[2].1), (TYPE_INDOM, 14));
        assert_eq!(r[2].2[0], (1, Some("A".into())));
    }

    /// A staged record is written with the membership it was staged with,
    /// even when later changes came before it was written.
    #[test]
    fn staged_record_keeps_its_membership() {
        let out = run(
            Version::V3,
            vec![
                U(upd(10, IndomKind::Full, &[(1, "a"), (2, "b")], &[])),
                R(10),
                U(upd(11, IndomKind::Delta, &[(3, "c")], &[1])),
                R(11),
            ],
        );
        let r = records(&out);
        assert_eq!(
            r[0],
            (
                TYPE_INDOM,
                10,
                vec![(1, Some("a".into())), (2, Some("b".into()))]
            )
        );
        assert_eq!(
            r[1],
            (TYPE_INDOM_DELTA, 11, vec![(1, None), (3, Some("c".into()))])
        );
    }

    #[test]
    fn record_times_never_go_back() {
        let out = run(
            Version::V3,
            vec![
                U(upd(100, IndomKind::Full, &[(1, "a")], &[])),
                R(101),
                // A change stamped before the last result: at that time.
                U(upd(50, IndomKind::Delta, &[(2, "b")], &[])),
                R(101),
            ],
        );
        let r = records(&out);
        assert_eq!((r[1].0, r[1].1), (TYPE_INDOM_DELTA, 101));
    }

    #[test]
    fn v2_writes_full_records_of_changes_only() {
        let out = run(
            Version::V2,
            vec![
                U(upd(1_000, IndomKind::Full, &[(1, "a")], &[])),
                R(5_000),
                U(upd(6_000, IndomKind::Delta, &[(1, "a")], &[])),
                R(7_000),
                U(upd(8_000, IndomKind::Delta, &[(2, "b")], &[])),
                R(9_000),
            ],
        );
        let r = records_v(Version::V2, &out);
        assert_eq!(r.len(), 2);
        assert_eq!(
            r[1],
            (
                TYPE_INDOM_V2,
                8_000,
                vec![(1, Some("a".into())), (2, Some("b".into()))]
            )
        );
    }
}
