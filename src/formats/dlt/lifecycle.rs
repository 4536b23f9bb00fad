//! Lifecycles (boots) of each ECU, and the message filters that use them
//! (docs/dlt.md, "Lifecycles" and "Filters").
//!
//! A message of ECU E begins a new lifecycle of E when
//! - its tmsp (ECU time since boot) falls back by more than 50 s from E's
//!   last tmsp (the restart dlt-sortbytimestamp sees), or
//! - the boot time it implies (storage time − tmsp) is later than the end
//!   of E's current lifecycle (its boot plus its largest tmsp) by more than
//!   5 s: the ECU booted again while the logger was off, long enough for
//!   tmsp not to fall back (the notion of dlt-viewer's and dlt-logs'
//!   lifecycle views: one boot time per lifecycle).
//!
//! The session id is no sign: libdlt puts the logging process's id there,
//! so it differs between applications of one boot. Messages without tmsp
//! stay in E's current lifecycle. Numbers count from 1 in file order, over
//! all ECUs, so one `--lifecycle N` names one ECU's boot. The tracker is
//! one pass over headers, run by each reader and listing as it goes: the
//! numbers are the same everywhere with no table per message.

use super::layout::{id_text, Msg};
use super::text;
use crate::model::{IntMap, Level, MessageKeys, MessageSelect};
use std::collections::hash_map::Entry;

/// 0.1 ms ticks: tmsp falling back by more than this is a restart.
const FALLBACK: u32 = 500_000;
/// ns: a boot implied this much after the lifecycle's end is a new one.
const GAP_NS: i64 = 5_000_000_000;
/// Storage times before 2000-01-01: an ECU that does not know the date
/// yet (they place no boot).
const DATED_FROM_NS: i64 = 946_684_800 * 1_000_000_000;
/// Lifecycles described in full; past this many (a damaged file) new ones
/// are still numbered but not listed.
const MAX_LISTED: usize = 65_536;

/// One lifecycle as `info` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lifecycle {
    pub number: u32,
    pub ecu: [u8; 4],
    /// Storage times (ns) of its first and last message, and their count.
    pub first_ns: i64,
    pub last_ns: i64,
    pub messages: u64,
    /// Boot time (ns): min(storage − tmsp) over its dated messages.
    pub boot_ns: Option<i64>,
    /// min(storage − tmsp) over all its messages with a tmsp, and the
    /// value of the first of them (what a bare stream places it by).
    pub boot_all: Option<i64>,
    pub first_est: Option<i64>,
}

impl Lifecycle {
    /// What tmsp × 100 µs is offset by to place its messages: the boot
    /// time from its dated messages when it has any, else from all of them,
    /// never before the epoch (an ECU without the date).
    pub fn offset(&self) -> Option<i64> {
        self.boot_ns.or(self.boot_all.map(|b| b.max(0)))
    }
}

/// What [`Tracker::step`] says of a message.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    pub number: u32,
    /// It began a new lifecycle of an ECU seen before (a restart).
    pub restart: bool,
}

#[derive(Default)]
struct Current {
    number: u32,
    boot_all: Option<i64>,
    last_tmsp: Option<u32>,
    max_tmsp: u32,
    boot: Option<i64>,
    /// Index in `listed` (None past MAX_LISTED).
    slot: Option<usize>,
}

#[derive(Default)]
pub struct Tracker {
    /// By the ECU id's four bytes as one integer: a lookup per message.
    ecus: IntMap<u32, Current>,
    next: u32,
    pub listed: Vec<Lifecycle>,
}

fn storage_ns(m: &Msg) -> i64 {
    m.secs as i64 * 1_000_000_000 + m.usecs as i64 * 1000
}

impl Tracker {
    /// The lifecycle number of the next message of the file.
    pub fn push(&mut self, m: &Msg) -> u32 {
        self.step(m.ecu_id(), storage_ns(m), m.tmsp).number
    }

    /// The next message of the file, by its ECU (as dlt-convert shows it),
    /// storage time (ns) and tmsp.
    pub fn step(&mut self, ecu: [u8; 4], st: i64, tmsp: Option<u32>) -> Step {
        let all = tmsp.map(|t| st - t as i64 * 100_000);
        let est = all.filter(|_| st >= DATED_FROM_NS);
        let (c, new, seen) = match self.ecus.entry(u32::from_ne_bytes(ecu)) {
            Entry::Occupied(o) => {
                let c = o.into_mut();
                let new = tmsp.is_some_and(|t| {
                    c.last_tmsp.is_some_and(|l| t < l && l - t > FALLBACK)
                        || matches!((c.boot, est), (Some(b), Some(e))
                            if e > b + c.max_tmsp as i64 * 100_000 + GAP_NS)
                });
                (c, new, true)
            }
            Entry::Vacant(v) => (v.insert(Current::default()), true, false),
        };
        if new {
            self.next += 1;
            let slot = (self.listed.len() < MAX_LISTED).then(|| {
                self.listed.push(Lifecycle {
                    number: self.next,
                    ecu,
                    first_ns: st,
                    last_ns: st,
                    messages: 0,
                    boot_ns: None,
                    boot_all: None,
                    first_est: None,
                });
                self.listed.len() - 1
            });
            *c = Current {
                number: self.next,
                slot,
                ..Current::default()
            };
        }
        if let Some(t) = tmsp {
            c.last_tmsp = Some(t);
            c.max_tmsp = c.max_tmsp.max(t);
        }
        if let Some(e) = est {
            c.boot = Some(c.boot.map_or(e, |b| b.min(e)));
        }
        if let Some(a) = all {
            c.boot_all = Some(c.boot_all.map_or(a, |b| b.min(a)));
        }
        if let Some(l) = c.slot.map(|s| &mut self.listed[s]) {
            l.last_ns = l.last_ns.max(st);
            l.first_ns = l.first_ns.min(st);
            l.messages += 1;
            l.boot_ns = c.boot;
            l.boot_all = c.boot_all;
            if l.first_est.is_none() {
                l.first_est = all.map(|a| a.max(0));
            }
        }
        Step {
            number: c.number,
            restart: new && seen,
        }
    }

    /// Lifecycle `number`, if listed.
    pub fn get(&self, number: u32) -> Option<&Lifecycle> {
        let l = self.listed.get(number.checked_sub(1)? as usize)?;
        (l.number == number).then_some(l)
    }
}

/// The message filters applied to one message (the reader's and the
/// native listing's one rule). `scratch` holds the payload text for
/// `--grep`.
pub fn selected(sel: &MessageSelect, m: &Msg, lifecycle: u32, scratch: &mut Vec<u8>) -> bool {
    let ecu = m.ecu_id();
    let (app, ctx, level) = match &m.ext {
        Some(e) => (
            Some(id_text(&e.apid)),
            Some(id_text(&e.ctid)),
            // Log messages (MSTP 0) with a level DLT defines.
            (e.mstp() == 0 && (1..=6).contains(&e.mtin())).then(|| Level(e.mtin())),
        ),
        None => (None, None, None),
    };
    let keys = MessageKeys {
        ecu: id_text(&ecu),
        app,
        ctx,
        level,
        lifecycle,
    };
    if !sel.keys(&keys) {
        return false;
    }
    if sel.needs_text() {
        scratch.clear();
        text::payload(m, scratch);
        return sel.text(scratch);
    }
    true
}
