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

    /// A time in the version's resolution (v2 stores microseconds).
    fn quantize(&self, t: i64) -> i64 {
        match self.v {
            Version::V2 => t - t.rem_euclid(1000),
            Version::V3 => t,
        }
    }

    fn step(&self) -> i64 {
        match self.v {
            Version::V2 => 1000,
            Version::V3 => 1,
        }
    }

    /// Apply an update (written with the next result).
    pub fn update(&mut self, u: &IndomUpdate) {
        let tc = self.quantize(u.time.0);
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
    pub fn before_result(&mut self, t: Option<i64>, after: Option<i64>, out: &mut Vec<u8>) -> bool {
        let after = after.map(|a| self.quantize(a));
        let t = t.map(|t| self.quantize(t));
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
        let step = self.step();
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
            let r = super::super::meta::parse(v, rec, "x".as_ref(), o as u64, 0, &mut vec![]);
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
