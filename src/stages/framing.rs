//! Framing is not data: drop the source format's bookkeeping events (LTT
//! block start/end, heartbeats, facility loads) before another format's
//! writer sees them. The target writes its own framing where it has any.

use crate::error::Result;
use crate::model::{events_in, EventTypeId, Item, TraceReader};
use crate::model::{keys, ExtraValue, LossReport};
use std::collections::{HashMap, HashSet};

pub struct Unframe {
    inner: Box<dyn TraceReader>,
    framing: IdSet,
    dropped: u64,
    /// Framing types that are part of their source's content (see
    /// `keys::FRAMING_KIND`): their kind, and how many were left out.
    reported: HashMap<EventTypeId, (String, u64)>,
    /// Where those are reported as dropped (when the stream ends).
    pub loss: Option<std::rc::Rc<std::cell::RefCell<LossReport>>>,
}

use crate::formats::format::FRAMING_DROPPED as FRAMING_REASON;

/// Event type ids: a bit per id for the usual small ones (one load per
/// event), a hash set for the rest.
#[derive(Default)]
struct IdSet {
    bits: Vec<u64>,
    large: HashSet<EventTypeId>,
    /// No framing type seen (yet): events pass without a lookup.
    empty: bool,
}

const SMALL_IDS: EventTypeId = 1 << 16;

impl IdSet {
    fn insert(&mut self, id: EventTypeId) {
        self.empty = false;
        if id < SMALL_IDS {
            let w = (id / 64) as usize;
            if self.bits.len() <= w {
                self.bits.resize(w + 1, 0);
            }
            self.bits[w] |= 1 << (id % 64);
        } else {
            self.large.insert(id);
        }
    }
    fn remove(&mut self, id: EventTypeId) {
        if id < SMALL_IDS {
            if let Some(w) = self.bits.get_mut((id / 64) as usize) {
                *w &= !(1 << (id % 64));
            }
        } else {
            self.large.remove(&id);
        }
    }
    #[inline]
    fn contains(&self, id: EventTypeId) -> bool {
        if self.empty {
            return false;
        }
        if id < SMALL_IDS {
            self.bits
                .get((id / 64) as usize)
                .is_some_and(|w| w & (1 << (id % 64)) != 0)
        } else {
            self.large.contains(&id)
        }
    }
}

impl Unframe {
    pub fn wrap(inner: Box<dyn TraceReader>) -> Unframe {
        Unframe {
            inner,
            framing: IdSet {
                empty: true,
                ..IdSet::default()
            },
            dropped: 0,
            reported: HashMap::new(),
            loss: None,
        }
    }
    /// A framing type defined: left out from now on.
    fn define(&mut self, t: &crate::model::EventType) {
        self.framing.insert(t.id);
        if let Some(ExtraValue::Str(k)) = t.extras.get(keys::FRAMING_KIND) {
            self.reported.insert(t.id, (k.clone(), 0));
        }
    }
    /// A framing event (or run) left out.
    #[inline]
    fn leave_out(&mut self, it: &Item) {
        let n = events_in(it) as u64;
        self.dropped += n;
        if !self.reported.is_empty() {
            if let Some(e) = it.event_head() {
                if let Some(r) = self.reported.get_mut(&e.type_id) {
                    r.1 += n;
                }
            }
        }
    }
    /// At the end of the stream: the kinds left out, in the loss report.
    fn report(&mut self) {
        if let Some(loss) = &self.loss {
            let mut l = loss.borrow_mut();
            for (kind, n) in self.reported.values_mut() {
                l.drop_n(kind, FRAMING_REASON, *n);
                *n = 0;
            }
        }
    }
    /// An event, or a run of events, of a framing type.
    #[inline]
    fn is_framing(&self, item: &Item) -> bool {
        item.event_head()
            .is_some_and(|e| self.framing.contains(e.type_id))
    }
    /// Framing events left out so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

impl TraceReader for Unframe {
    fn next_item(&mut self) -> Result<Option<Item>> {
        loop {
            // The result is returned as it came (not taken apart and built
            // again): one item less to move per event on a hot path.
            let r = self.inner.next_item();
            match &r {
                Ok(Some(Item::EventType(t))) if t.framing => {
                    let t = t.clone();
                    self.define(&t);
                    continue;
                }
                Ok(None) => self.report(),
                Ok(Some(Item::EventType(t))) => {
                    // A later definition may reuse an id for real data.
                    self.framing.remove(t.id);
                }
                Ok(Some(it @ (Item::Event(_) | Item::EventRun(_)))) if self.is_framing(it) => {
                    self.leave_out(it);
                    if let Ok(Some(item)) = r {
                        self.inner.recycle(item);
                    }
                    continue;
                }
                _ => {}
            }
            return r;
        }
    }
    /// The inner run with the framing left out, in place.
    fn next_batch(&mut self, out: &mut Vec<Item>, max: usize) -> Result<bool> {
        let start = out.len();
        let r = self.inner.next_batch(out, max);
        // Items before the first to leave out, or the first definition,
        // stay where they are: found by reading alone (most runs hold
        // none of either).
        let first = out[start..].iter().position(|it| match it {
            Item::EventType(_) => true,
            it => self.is_framing(it),
        });
        let Some(first) = first else {
            if matches!(r, Ok(false)) {
                self.report();
            }
            return r;
        };
        // Kept items move down over dropped ones, in order; the dropped
        // end up behind them.
        let from = start + first;
        let mut keep = from;
        for i in from..out.len() {
            let drop = match &out[i] {
                Item::EventType(t) if t.framing => {
                    let t = t.clone();
                    self.define(&t);
                    true
                }
                Item::EventType(t) => {
                    self.framing.remove(t.id);
                    false
                }
                it if self.is_framing(it) => {
                    let it = &out[i];
                    let n = events_in(it) as u64;
                    self.dropped += n;
                    if let Some(r) = it
                        .event_head()
                        .and_then(|e| self.reported.get_mut(&e.type_id))
                    {
                        r.1 += n;
                    }
                    true
                }
                _ => false,
            };
            if !drop {
                if keep != i {
                    out.swap(keep, i);
                }
                keep += 1;
            }
        }
        for item in out.drain(keep..) {
            if let Item::Event(_) | Item::EventRun(_) = item {
                self.inner.recycle(item);
            }
        }
        if matches!(r, Ok(false)) {
            self.report();
        }
        r
    }
    /// Runs are left out as their events are.
    fn event_runs(&mut self) -> bool {
        self.inner.event_runs()
    }
    pass_to_inner!(described, recycle, recycle_batch, restarts);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;
    use std::sync::Arc;

    #[test]
    fn framing_events_and_their_types_are_left_out() {
        let mut block = EventType::new(17, "core", "block_start", vec![]);
        block.framing = true;
        let data = EventType::new(5, "core", "syscall_entry", vec![]);
        let ev = |type_id| {
            Item::Event(Event {
                time: Timestamp(1),
                raw_clock: None,
                type_id,
                cpu: Some(0),
                stream: None,
                fields: vec![],
                extras: Extras::default(),
            })
        };
        let trace = Trace {
            header: Header::new(FormatId::Ltt, "2.1"),
            items: vec![
                Item::EventType(Arc::new(block)),
                Item::EventType(Arc::new(data)),
                ev(17),
                ev(5),
                ev(17),
            ],
        };
        let mut u = Unframe::wrap(Box::new(VecReader::new(trace)));
        let mut kept = Vec::new();
        while let Some(it) = u.next_item().unwrap() {
            kept.push(it);
        }
        assert_eq!(kept.len(), 2, "{kept:?}");
        assert!(matches!(&kept[0], Item::EventType(t) if t.id == 5));
        assert!(matches!(&kept[1], Item::Event(e) if e.type_id == 5));
        assert_eq!(u.dropped(), 2);
    }

    /// A run of framing events is left out whole and counts its events;
    /// another run passes, in runs of items as one by one.
    #[test]
    fn framing_runs_are_left_out_with_their_events() {
        let mut block = EventType::new(17, "core", "block_start", vec![]);
        block.framing = true;
        let data = EventType::new(5, "core", "syscall_entry", vec![]);
        let run = |type_id, n: i64| {
            let mut cells = Cells::default();
            for i in 0..n {
                cells.push_i64(i);
            }
            Item::from(EventRun {
                event: Event {
                    type_id,
                    ..Event::default()
                },
                width: 1,
                cells,
            })
        };
        let trace = || Trace {
            header: Header::new(FormatId::Ltt, "2.1"),
            items: vec![
                Item::EventType(Arc::new(block.clone())),
                Item::EventType(Arc::new(data.clone())),
                run(17, 3),
                run(5, 2),
                run(17, 4),
            ],
        };
        let mut u = Unframe::wrap(Box::new(VecReader::new(trace())));
        let mut kept = Vec::new();
        while let Some(it) = u.next_item().unwrap() {
            kept.push(it);
        }
        assert_eq!(kept.len(), 2, "{kept:?}");
        assert!(matches!(&kept[1], Item::EventRun(r) if r.event.type_id == 5 && r.len() == 2));
        assert_eq!(u.dropped(), 7);
        let mut u = Unframe::wrap(Box::new(VecReader::new(trace())));
        let mut run_of = Vec::new();
        while u.next_batch(&mut run_of, 8).unwrap() {}
        assert_eq!(format!("{run_of:?}"), format!("{kept:?}"));
        assert_eq!(u.dropped(), 7);
    }

    #[test]
    fn large_ids_and_redefined_ids() {
        let ty = |id, framing| {
            let mut t = EventType::new(id, "core", "x", vec![]);
            t.framing = framing;
            Item::EventType(Arc::new(t))
        };
        let ev = |type_id| {
            Item::Event(Event {
                time: Timestamp(1),
                raw_clock: None,
                type_id,
                cpu: None,
                stream: None,
                fields: vec![],
                extras: Extras::default(),
            })
        };
        let big = 1 << 20;
        let trace = Trace {
            header: Header::new(FormatId::Ltt, "2.1"),
            items: vec![
                // Data before any framing type passes.
                ty(3, false),
                ev(3),
                ty(big, true),
                ty(64, true),
                ev(big),
                ev(64),
                ev(3),
                ev(65),
                // A later definition turns id 64 into data.
                ty(64, false),
                ev(64),
            ],
        };
        let mut u = Unframe::wrap(Box::new(VecReader::new(trace.clone())));
        let mut kept = Vec::new();
        while let Some(it) = u.next_item().unwrap() {
            if let Item::Event(e) = it {
                kept.push(e.type_id);
            }
        }
        assert_eq!(kept, [3, 3, 65, 64]);
        assert_eq!(u.dropped(), 2);
        // In runs: the same, whichever run a type and its events fall in
        // (a run can come back empty and the stream go on).
        for max in [1, 2, 3, 4, 100] {
            let mut u = Unframe::wrap(Box::new(Runs(VecReader::new(trace.clone()))));
            let (mut kept, mut types, mut run) = (Vec::new(), 0, Vec::new());
            loop {
                let more = u.next_batch(&mut run, max).unwrap();
                for it in run.drain(..) {
                    match it {
                        Item::Event(e) => kept.push(e.type_id),
                        _ => types += 1,
                    }
                }
                if !more {
                    break;
                }
            }
            assert_eq!(kept, [3, 3, 65, 64], "runs of {max}");
            assert_eq!((types, u.dropped()), (2, 2), "runs of {max}");
        }
    }
}
