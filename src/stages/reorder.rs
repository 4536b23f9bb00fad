//! Time order for sources that are not in it. A DLT storage file holds
//! messages in the order they reached the receiver: two applications (or the
//! daemon and an application) with different buffering delays interleave
//! out of clock order. Writers whose files must run forward in time (LTT
//! tracefiles, PCP volumes) would otherwise clamp those items.
//!
//! A bounded sort: data items (and timed definitions: instance domains,
//! labels) wait in a heap and leave in (time, arrival) order once the
//! newest time seen is `window` past them, or when more than `cap` wait.
//! Untimed definitions leave at once, so they still come before any item
//! that uses them.
//!
//! Items are sorted within a boot cycle, never across one (as
//! dlt-sortbytimestamp does): when the inner reader's clock restarts
//! ([`TraceReader::restarts`]), all that waits leaves first, in order,
//! and the new cycle's items are sorted among themselves. A file of
//! several boots whose storage clock starts again at each (ECUs without
//! a real-time clock; captures joined with `cat`) would otherwise have
//! each boot's last seconds held back and given out among a later boot's.

use crate::error::Result;
use crate::model::{Item, Timestamp, TraceReader};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// How far back an item may come and still be put in its place.
pub const WINDOW_NS: i64 = 10_000_000_000;
/// At most this many items wait.
pub const CAP: usize = 65_536;
/// Items asked of the inner reader at a time.
const RUN_IN: usize = 64;

struct Waiting {
    time: Timestamp,
    seq: u64,
    item: Item,
}

impl PartialEq for Waiting {
    fn eq(&self, o: &Self) -> bool {
        (self.time, self.seq) == (o.time, o.seq)
    }
}
impl Eq for Waiting {}
impl PartialOrd for Waiting {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Waiting {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.time, self.seq).cmp(&(o.time, o.seq))
    }
}

/// Items that came in order, oldest first, kept in the runs of the inner
/// reader they came in: a run taken in whole keeps its buffer (no item
/// moved) and a run that leaves whole goes out in one copy, where a deque
/// of items moved each in and out one by one (two thirds of `Reorder`'s
/// own work, most items waiting here).
#[derive(Default)]
struct InOrder {
    runs: VecDeque<VecDeque<Item>>,
    /// Emptied run buffers, for runs to come.
    spare: Vec<VecDeque<Item>>,
}

/// Emptied run buffers kept at most: enough for the runs that wait
/// in a 10 s window of a capture; more are freed (memory stays flat).
const SPARE_RUNS: usize = 16;

impl InOrder {
    /// `item` joins the back, in the last run while it has room (a run
    /// buffer is not grown: grown ones, kept, made memory grow with the
    /// input).
    fn push(&mut self, item: Item) {
        if let Some(r) = self.runs.back_mut().filter(|r| r.len() < r.capacity()) {
            r.push_back(item);
            return;
        }
        let mut r = (self.spare.pop()).unwrap_or_else(|| VecDeque::with_capacity(RUN_IN));
        r.push_back(item);
        self.runs.push_back(r);
    }

    fn retire(&mut self, r: VecDeque<Item>) {
        if self.spare.len() < SPARE_RUNS {
            self.spare.push(r);
        }
    }

    /// All of `items` join the back: their buffer with them, and `items`
    /// gets an empty one; or, when the last run has room for them (a
    /// short run), copied there (a buffer per short run held memory).
    fn push_run(&mut self, items: &mut Vec<Item>) {
        // No empty run is kept: the front run is never empty.
        if items.is_empty() {
            return;
        }
        if let Some(r) = (self.runs.back_mut()).filter(|r| r.capacity() - r.len() >= items.len()) {
            r.extend(items.drain(..));
            return;
        }
        let next = (self.spare.pop().map(Vec::from)).unwrap_or_else(|| Vec::with_capacity(RUN_IN));
        (self.runs).push_back(VecDeque::from(std::mem::replace(items, next)));
    }

    fn pop(&mut self) -> Option<Item> {
        let r = self.runs.front_mut()?;
        let it = r.pop_front();
        if r.is_empty() {
            if let Some(r) = self.runs.pop_front() {
                self.retire(r);
            }
        }
        it
    }

    /// The `n` oldest (or all there are) into `out`.
    fn take(&mut self, mut n: usize, out: &mut Vec<Item>) {
        while n > 0 {
            let Some(r) = self.runs.front_mut() else {
                return;
            };
            if r.len() > n {
                out.extend(r.drain(..n));
                return;
            }
            n -= r.len();
            if let Some(r) = self.runs.pop_front() {
                let mut v = Vec::from(r);
                out.append(&mut v);
                self.retire(VecDeque::from(v));
            }
        }
    }
}

pub struct Reorder {
    inner: Box<dyn TraceReader>,
    /// Items that came in order wait here (sorted by arrival), the others
    /// in the heap: most sources are mostly in order, and a queue moves
    /// each item once where a heap moves it at every level.
    run: InOrder,
    /// The (time, arrival) of each item of `run`, apart: deciding what
    /// is ready reads these, not the items (and their count is `run`'s).
    run_keys: VecDeque<(Timestamp, u64)>,
    heap: BinaryHeap<Reverse<Waiting>>,
    newest: Option<Timestamp>,
    seq: u64,
    window: i64,
    cap: usize,
    done: bool,
    /// Items of the inner reader's last run not taken in yet (the run out
    /// filled before the run in was through), and the run being read.
    pending: VecDeque<Item>,
    scratch: Vec<Item>,
    inner_done: bool,
    /// The inner reader's error, given once the items before it are in.
    error: Option<crate::error::Error>,
    /// The inner reader's clock restarts up to the items taken in.
    restarts: u64,
    /// A restart came: everything waiting leaves before the new cycle's
    /// items (in `pending`) are taken in.
    flush: bool,
    /// The ordering was handed to the caller (`take_ordering`): items
    /// pass as they come.
    handed: bool,
}

impl Reorder {
    pub fn wrap(inner: Box<dyn TraceReader>) -> Reorder {
        Reorder::with_limits(inner, WINDOW_NS, CAP)
    }
    pub fn with_limits(inner: Box<dyn TraceReader>, window: i64, cap: usize) -> Reorder {
        Reorder {
            inner,
            run: InOrder::default(),
            run_keys: VecDeque::new(),
            heap: BinaryHeap::new(),
            newest: None,
            seq: 0,
            window,
            cap: cap.max(1),
            done: false,
            pending: VecDeque::new(),
            scratch: Vec::new(),
            inner_done: false,
            error: None,
            restarts: 0,
            flush: false,
            handed: false,
        }
    }

    /// An item of time `t` can no longer be overtaken: the newest time seen
    /// is `window` past it.
    fn settled(&self, t: Timestamp) -> bool {
        self.newest
            .is_some_and(|n| n.0.saturating_sub(t.0) >= self.window)
    }

    /// The earliest waiting item, if it can no longer be overtaken (or
    /// too many wait, or the input is done). Items leave straight from
    /// where they wait: one move less per item than an output queue.
    fn pop_ready(&mut self) -> Option<Item> {
        let from_run = match (self.run_keys.front(), self.heap.peek()) {
            (Some(r), Some(Reverse(h))) => *r < (h.time, h.seq),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        let t = if from_run {
            self.run_keys.front().map(|k| k.0)
        } else {
            self.heap.peek().map(|r| r.0.time)
        }?;
        if !(self.settled(t)
            || self.run_keys.len() + self.heap.len() > self.cap
            || self.done
            || self.flush)
        {
            return None;
        }
        if from_run {
            self.run_keys.pop_front();
            self.run.pop()
        } else {
            self.heap.pop().map(|r| r.0.item)
        }
    }

    /// Ready items into `out` until it holds `want`; true when it does.
    fn leave_ready(&mut self, out: &mut Vec<Item>, want: usize) -> bool {
        if self.heap.is_empty() {
            // Only items that came in order wait (most of the time): the
            // ready ones are a front of their queue, counted on the keys
            // alone and moved out in one go (one call per run, not one
            // pop and push per item).
            let Some(room) = want.checked_sub(out.len()).filter(|&r| r > 0) else {
                return true;
            };
            let ready = if self.done || self.flush {
                self.run_keys.len()
            } else {
                // Times in `run` do not decrease, so the settled ones are
                // a front; beyond the cap the oldest leave anyway.
                let settled = match self.newest {
                    Some(n) => (self.run_keys)
                        .partition_point(|k| n.0.saturating_sub(k.0 .0) >= self.window),
                    None => 0,
                };
                settled.max(self.run_keys.len().saturating_sub(self.cap))
            };
            let n = ready.min(room);
            if n > 0 {
                self.run_keys.drain(..n);
                self.run.take(n, out);
            }
            return n == room;
        }
        while out.len() < want {
            match self.pop_ready() {
                Some(it) => out.push(it),
                None => return false,
            }
        }
        true
    }

    /// Takes in the front of `items` that comes in order (nothing waits
    /// out of order, each timed and not older than the newest), as the
    /// back of `run`: such items cannot leave at once. Their keys are
    /// noted here; the items are moved by the caller in one go. How many.
    fn keys_in_order(&mut self, items: &[Item]) -> usize {
        if self.window <= 0 || !self.heap.is_empty() {
            return 0;
        }
        let mut newest = self.newest;
        let n = (items.iter())
            .take_while(|it| match it.time() {
                Some(t) if newest.is_none_or(|n| t >= n) => {
                    newest = Some(t);
                    true
                }
                _ => false,
            })
            .count();
        self.newest = newest;
        let seq = self.seq;
        (self.run_keys).extend(
            (items[..n].iter())
                .zip(seq + 1..)
                .map(|(it, s)| (it.time().unwrap_or_default(), s)),
        );
        self.seq += n as u64;
        n
    }

    /// Take `item` in: it waits, or it leaves at once (into `out`) when it
    /// has no time or would be the first to leave anyway. False when no
    /// waiting item can have become ready: it left at once and the newest
    /// time did not move (most items of a source that restarted its clock;
    /// looking for ready items after each of them cost more than the rest).
    fn accept(&mut self, item: Item, out: &mut Vec<Item>) -> bool {
        let Some(t) = item.time() else {
            // Definitions without a time pass at once.
            out.push(item);
            return false;
        };
        let moved = self.newest.is_none_or(|n| t > n);
        if moved {
            self.newest = Some(t);
        }
        self.seq += 1;
        // Settled already and earlier than all that waits: it would leave
        // first, so it leaves now (a clock that jumps back without a
        // restart being told sends long runs of these).
        let settled = self.settled(t);
        let first = self.run_keys.front().is_none_or(|r| t < r.0)
            && self.heap.peek().is_none_or(|h| t < h.0.time);
        if settled && first {
            out.push(item);
            return moved;
        }
        if self.run_keys.back().is_none_or(|b| b.0 <= t) {
            self.run.push(item);
            self.run_keys.push_back((t, self.seq));
        } else {
            self.heap.push(Reverse(Waiting {
                time: t,
                seq: self.seq,
                item,
            }));
        }
        true
    }
}

impl TraceReader for Reorder {
    fn next_item(&mut self) -> Result<Option<Item>> {
        if self.handed {
            return self.inner.next_item();
        }
        let mut one = std::mem::take(&mut self.scratch);
        let r = self.next_batch(&mut one, 1);
        // An error comes alone: a call that gave an item ended there.
        let item = one.pop();
        self.scratch = one;
        r.map(|_| item)
    }

    /// Items are taken in by runs from the inner reader and leave in
    /// runs: the order is the one item by item (after each item taken in,
    /// whatever became ready leaves before the next is looked at).
    fn next_batch(&mut self, out: &mut Vec<Item>, max: usize) -> Result<bool> {
        if self.handed {
            return self.inner.next_batch(out, max);
        }
        let want = out.len() + max;
        loop {
            if self.leave_ready(out, want) {
                return Ok(true);
            }
            if self.flush {
                // All that waited has left: the new cycle starts afresh.
                self.flush = false;
                self.newest = None;
            }
            if let Some(item) = self.pending.pop_front() {
                self.accept(item, out);
                continue;
            }
            if let Some(e) = self.error.take() {
                return Err(e);
            }
            if self.inner_done {
                if self.done {
                    // All that waited has left.
                    return Ok(false);
                }
                self.done = true;
                continue;
            }
            // No more than fit: each item taken in lets at most one
            // leave at once, and the rest wait where they are, so a run
            // is taken in whole unless ready items fill `out` first.
            let mut run = std::mem::take(&mut self.scratch);
            let r = self
                .inner
                .next_batch(&mut run, RUN_IN.min(want - out.len()));
            let restarts = self.inner.restarts();
            if restarts != self.restarts {
                // The run is the new cycle's: it waits until all before
                // has left.
                self.restarts = restarts;
                self.flush = true;
                self.pending.extend(run.drain(..));
            }
            // An item that comes in order (nothing waits out of order, and
            // it is not older than the newest) joins the back of the queue
            // and cannot leave at once, while what is ready leaves from the
            // front: letting it leave once after a row of such items gives
            // the order of letting it leave after each (one call per row).
            // The row the run begins with (mostly all of it) moves in one go.
            let n = self.keys_in_order(&run);
            let mut owed = n > 0;
            if n == run.len() {
                self.run.push_run(&mut run);
            } else {
                for item in run.drain(..n) {
                    self.run.push(item);
                }
            }
            let mut items = run.drain(..);
            for item in items.by_ref() {
                let in_order = self.window > 0
                    && self.heap.is_empty()
                    && (item.time()).is_some_and(|t| self.newest.is_none_or(|n| t >= n));
                if in_order {
                    self.accept(item, out);
                    owed = true;
                    continue;
                }
                if std::mem::take(&mut owed) && self.leave_ready(out, want) {
                    self.pending.push_back(item);
                    break;
                }
                let woke = self.accept(item, out);
                if out.len() >= want || (woke && self.leave_ready(out, want)) {
                    break;
                }
            }
            if owed {
                self.leave_ready(out, want);
            }
            self.pending.extend(items);
            self.scratch = run;
            match r {
                Ok(true) => {}
                Ok(false) => self.inner_done = true,
                Err(e) => {
                    self.error = Some(e);
                    self.inner_done = true;
                }
            }
        }
    }
    /// Handed over: the inner reader's restarts, for the caller to order
    /// by cycle; else none (each cycle was ordered on its own here).
    fn restarts(&self) -> u64 {
        if self.handed {
            self.inner.restarts()
        } else {
            0
        }
    }
    /// Only before the first item: the window and cap, and items pass as
    /// they come from then on.
    fn take_ordering(&mut self) -> Option<(i64, usize)> {
        if self.seq > 0 || self.inner_done || !self.pending.is_empty() {
            return None;
        }
        self.handed = true;
        Some((self.window, self.cap))
    }
    /// Only once the ordering is handed over: the caller then orders a
    /// run as one item of its events' time (`wire::Ordered`). This stage
    /// orders items, and would let a cap or a window cut through no run.
    fn event_runs(&mut self) -> bool {
        self.handed && self.inner.event_runs()
    }
    pass_to_inner!(described, recycle, recycle_batch);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;

    fn note(t: i64, text: &str) -> Item {
        Item::Annotation(Annotation {
            time: Timestamp(t),
            raw_clock: None,
            text: text.into(),
            extras: Extras::default(),
        })
    }

    fn run(items: Vec<Item>, window: i64, cap: usize) -> Vec<(i64, String)> {
        let trace = Trace {
            header: Header::new(FormatId::Dlt, "1"),
            items,
        };
        let mut r = Reorder::with_limits(Box::new(VecReader::new(trace)), window, cap);
        let mut got = Vec::new();
        while let Some(it) = r.next_item().unwrap() {
            if let Item::Annotation(a) = it {
                got.push((a.time.0, a.text));
            }
        }
        got
    }

    /// Runs give what items one by one give, whatever the run sizes in
    /// and out: definitions without a time where they were, late items in
    /// their place, a clock restart through.
    #[test]
    fn runs_give_the_order_of_items_one_by_one() {
        let def = |id: u32| {
            Item::EventType(std::sync::Arc::new(EventType::new(
                id,
                "c",
                &format!("t{id}"),
                vec![],
            )))
        };
        let items = || {
            vec![
                def(1),
                note(100, "a"),
                note(200, "b"),
                note(150, "c"),
                def(2),
                note(50, "d"),
                note(50, "e"),
                note(195, "f"),
                def(3),
                note(330, "g"),
                note(205, "h"),
                note(400, "i"),
            ]
        };
        let label = |it: &Item| match it {
            Item::Annotation(a) => a.text.clone(),
            Item::EventType(t) => t.name.clone(),
            _ => unreachable!(),
        };
        let trace = || Trace {
            header: Header::new(FormatId::Dlt, "1"),
            items: items(),
        };
        let mut r = Reorder::with_limits(Box::new(VecReader::new(trace())), 10, 100);
        let mut want = Vec::new();
        while let Some(it) = r.next_item().unwrap() {
            want.push(label(&it));
        }
        let by_hand = [
            "t1", "a", "c", "t2", "d", "e", "t3", "f", "b", "h", "g", "i",
        ];
        assert_eq!(want, by_hand);
        for max in [1, 2, 3, 5, 100] {
            for runs in [false, true] {
                let inner: Box<dyn TraceReader> = if runs {
                    Box::new(Runs(VecReader::new(trace())))
                } else {
                    Box::new(VecReader::new(trace()))
                };
                let mut r = Reorder::with_limits(inner, 10, 100);
                let mut got = Vec::new();
                let mut run = Vec::new();
                loop {
                    let more = r.next_batch(&mut run, max).unwrap();
                    assert!(run.len() <= max, "{} items for at most {max}", run.len());
                    got.extend(run.drain(..).map(|it| label(&it)));
                    if !more {
                        break;
                    }
                }
                assert_eq!(got, want, "runs of {max}, inner runs: {runs}");
            }
        }
    }

    #[test]
    fn late_items_take_their_place_and_ties_keep_arrival_order() {
        let got = run(
            vec![
                note(30, "c"),
                note(10, "a"),
                note(20, "b1"),
                note(20, "b2"),
                note(40, "d"),
            ],
            100,
            100,
        );
        let texts: Vec<&str> = got.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["a", "b1", "b2", "c", "d"]);
    }

    #[test]
    fn the_window_and_the_cap_bound_what_waits() {
        // Window 10: "a" (at 5) arrives after 30 has pushed 10 out already.
        let got = run(
            vec![note(10, "x"), note(30, "y"), note(5, "a"), note(35, "z")],
            10,
            100,
        );
        let texts: Vec<&str> = got.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["x", "a", "y", "z"]);
        // Cap 1: at most one waits, so order is only fixed pairwise.
        let got = run(vec![note(3, "c"), note(2, "b"), note(1, "a")], 100, 1);
        let texts: Vec<&str> = got.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["b", "a", "c"]);
    }

    #[test]
    fn a_clock_restart_passes_settled_items_in_order() {
        // "c" and "d" come 150 after "b": settled at once, they leave before
        // "b" (still waiting), ties in arrival order.
        let got = run(
            vec![
                note(100, "a"),
                note(200, "b"),
                note(50, "c"),
                note(50, "d"),
                note(195, "e"),
                note(205, "f"),
            ],
            10,
            100,
        );
        let texts: Vec<&str> = got.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["a", "c", "d", "e", "b", "f"]);
    }

    /// Boot cycles of items; runs end at a cycle's end, and `restarts`
    /// counts the cycles begun before the items given last.
    struct Cycles {
        header: Header,
        cycles: Vec<Vec<Item>>,
        at: usize,
        given: u64,
    }

    impl TraceReader for Cycles {
        fn header(&self) -> &Header {
            &self.header
        }
        fn next_item(&mut self) -> Result<Option<Item>> {
            let mut one = Vec::new();
            self.next_batch(&mut one, 1)?;
            Ok(one.pop())
        }
        fn next_batch(&mut self, out: &mut Vec<Item>, max: usize) -> Result<bool> {
            while self.at < self.cycles.len() && self.cycles[self.at].is_empty() {
                self.at += 1;
            }
            let Some(c) = self.cycles.get_mut(self.at) else {
                return Ok(false);
            };
            let n = max.min(c.len());
            out.extend(c.drain(..n));
            self.given = self.at as u64;
            Ok(true)
        }
        fn restarts(&self) -> u64 {
            self.given
        }
    }

    /// What waits leaves at a restart, before the new cycle's items, and
    /// each cycle is sorted in itself: the first cycle's late items are not
    /// held back until the second's clock passes them, nor given out among
    /// its items (fails without the flush: "b" then leaves last).
    #[test]
    fn a_restart_lets_what_waits_leave_and_sorts_each_cycle() {
        let cycles = || {
            vec![
                vec![note(100, "a"), note(200, "b"), note(195, "c")],
                vec![note(50, "d"), note(40, "e"), note(300, "f"), note(60, "g")],
            ]
        };
        for max in [1, 2, 3, 100] {
            let inner = Cycles {
                header: Header::new(FormatId::Dlt, "1"),
                cycles: cycles(),
                at: 0,
                given: 0,
            };
            let mut r = Reorder::with_limits(Box::new(inner), 1000, 100);
            let (mut got, mut run) = (Vec::new(), Vec::new());
            loop {
                let more = r.next_batch(&mut run, max).unwrap();
                got.extend(run.drain(..).map(|it| match it {
                    Item::Annotation(a) => a.text,
                    _ => unreachable!(),
                }));
                if !more {
                    break;
                }
            }
            assert_eq!(got, ["a", "c", "b", "e", "d", "g", "f"], "runs of {max}");
        }
    }

    /// Cycles of (time, kind) pairs as items labelled `cycle.index`: kind
    /// 0 a definition (untimed), else an annotation at the time.
    fn labelled_cycles(cycles: &[Vec<(i64, u8)>]) -> Cycles {
        Cycles {
            header: Header::new(FormatId::Dlt, "1"),
            cycles: (cycles.iter().enumerate())
                .map(|(c, items)| {
                    (items.iter().enumerate())
                        .map(|(i, &(t, k))| {
                            let label = format!("{c}.{i}");
                            if k == 0 {
                                let t = EventType::new(i as u32, "c", &label, vec![]);
                                Item::EventType(std::sync::Arc::new(t))
                            } else {
                                note(t, &label)
                            }
                        })
                        .collect()
                })
                .collect(),
            at: 0,
            given: 0,
        }
    }

    fn label(it: Item) -> String {
        match it {
            Item::Annotation(a) => a.text,
            Item::EventType(t) => t.name.clone(),
            _ => unreachable!(),
        }
    }

    /// The labels of what `r` gives in runs of at most `max`.
    fn labels_in_runs(
        r: &mut Reorder,
        max: usize,
    ) -> std::result::Result<Vec<String>, proptest::test_runner::TestCaseError> {
        let (mut got, mut run) = (Vec::new(), Vec::new());
        loop {
            let more = r.next_batch(&mut run, max).unwrap();
            proptest::prop_assert!(run.len() <= max);
            got.extend(run.drain(..).map(label));
            if !more {
                return Ok(got);
            }
        }
    }

    /// The labels of what `r` gives item by item.
    fn labels_one_by_one(r: &mut Reorder) -> Vec<String> {
        let mut got = Vec::new();
        while let Some(it) = r.next_item().unwrap() {
            got.push(label(it));
        }
        got
    }

    /// Runs of any size give the order of items one by one (`next_item`
    /// takes runs of one), for random times with ties, late items,
    /// definitions, restarts, windows and caps small enough to matter.
    #[test]
    fn random_runs_give_the_order_of_items_one_by_one() {
        use proptest::prelude::*;
        let item = (0i64..60, 0u8..8).prop_map(|(t, k)| (t, k));
        let case = (
            prop::collection::vec(prop::collection::vec(item, 0..40), 1..4),
            0i64..25,
            1usize..12,
            1usize..70,
        );
        let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
            cases: 400,
            ..Default::default()
        });
        runner
            .run(&case, |(cycles, window, cap, max)| {
                let make = || labelled_cycles(&cycles);
                let mut one = Reorder::with_limits(Box::new(make()), window, cap);
                let want = labels_one_by_one(&mut one);
                let mut r = Reorder::with_limits(Box::new(make()), window, cap);
                let got = labels_in_runs(&mut r, max)?;
                prop_assert_eq!(got, want);
                Ok(())
            })
            .unwrap();
    }

    /// The queue of items in order gives what a plain deque gives, for
    /// random pushes of items and of whole runs, pops and takes of any
    /// size (fails if a run kept as its buffer, or one partly taken, lost
    /// or misplaced an item).
    #[test]
    fn in_order_queue_is_a_deque() {
        use proptest::prelude::*;
        // Sizes mostly short (empty runs and takes of none among them).
        let op = (0u8..4, prop_oneof![0usize..3, 0usize..70]);
        let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
            cases: 2000,
            ..Default::default()
        });
        runner
            .run(&prop::collection::vec(op, 0..60), |ops| {
                let (mut q, mut want) = (InOrder::default(), VecDeque::new());
                let (mut next, mut got, mut taken) = (0i64, Vec::new(), Vec::new());
                let mut label = |it: Item| match it {
                    Item::Annotation(a) => a.time.0,
                    _ => unreachable!(),
                };
                for (kind, n) in ops {
                    match kind {
                        0 => {
                            q.push(note(next, ""));
                            want.push_back(next);
                            next += 1;
                        }
                        1 => {
                            let mut run: Vec<Item> =
                                (next..next + n as i64).map(|t| note(t, "")).collect();
                            want.extend(next..next + n as i64);
                            next += n as i64;
                            q.push_run(&mut run);
                            prop_assert!(run.is_empty());
                        }
                        2 => {
                            prop_assert_eq!(q.pop().map(&mut label), want.pop_front());
                        }
                        _ => {
                            q.take(n, &mut taken);
                            got.extend(taken.drain(..).map(&mut label));
                            let k = n.min(want.len());
                            prop_assert_eq!(&got, &want.drain(..k).collect::<Vec<_>>());
                            got.clear();
                        }
                    }
                }
                q.take(usize::MAX, &mut taken);
                let rest: Vec<i64> = taken.drain(..).map(&mut label).collect();
                prop_assert_eq!(rest, want.into_iter().collect::<Vec<_>>());
                Ok(())
            })
            .unwrap();
    }

    /// The documented order, item by item, written out plainly: untimed
    /// items leave at once; a timed one leaves at once when settled and
    /// earlier than all that waits, else waits in (time, arrival) order;
    /// after each, the earliest waiting leave while settled or more than
    /// `cap` wait; at a restart and at the end all that waits leaves.
    fn documented_order(cycles: &[Vec<(i64, u8)>], window: i64, cap: usize) -> Vec<String> {
        documented_order_of(cycles, window, cap, |_| 1)
    }

    /// [`documented_order`] where an item of kind `k` counts as
    /// `events(k)` against the cap (a run of events counts its events).
    fn documented_order_of(
        cycles: &[Vec<(i64, u8)>],
        window: i64,
        cap: usize,
        events: impl Fn(u8) -> usize,
    ) -> Vec<String> {
        use std::collections::BTreeMap;
        let mut out = Vec::new();
        let mut seq = 0u64;
        for (c, items) in cycles.iter().enumerate() {
            let mut waiting: BTreeMap<(i64, u64), (String, usize)> = BTreeMap::new();
            let mut count = 0;
            let mut newest: Option<i64> = None;
            for (i, &(t, k)) in items.iter().enumerate() {
                let label = format!("{c}.{i}");
                if k == 0 {
                    out.push(label);
                    continue;
                }
                let n = newest.map_or(t, |n| n.max(t));
                newest = Some(n);
                seq += 1;
                let settled = |t: i64| n.saturating_sub(t) >= window;
                let first = waiting.keys().next().is_none_or(|&(w, _)| t < w);
                if settled(t) && first {
                    out.push(label);
                } else {
                    waiting.insert((t, seq), (label, events(k)));
                    count += events(k);
                }
                while let Some((&(w, _), _)) = waiting.first_key_value() {
                    if !(settled(w) || count > cap) {
                        break;
                    }
                    if let Some((_, (l, n))) = waiting.pop_first() {
                        out.push(l);
                        count -= n;
                    }
                }
            }
            out.extend(waiting.into_values().map(|(l, _)| l));
        }
        out
    }

    /// Cycles of (time, kind), a window, a cap and a run size.
    type Case = (Vec<Vec<(i64, u8)>>, i64, usize, usize);

    /// Cycles of (time, kind: 0 a definition without a time) whose times
    /// mostly rise (the common case the rows are for), with some steps
    /// back; a window, a cap and a run size small enough to matter.
    fn mostly_rising() -> impl proptest::strategy::Strategy<Value = Case> {
        use proptest::prelude::*;
        let item = (0i64..8, 0u8..12, 0u8..6).prop_map(|(d, k, back)| (d, k, back == 0));
        let steps = prop::collection::vec(prop::collection::vec(item, 0..120), 1..4);
        let cycles = steps.prop_map(|steps| {
            (steps.iter())
                .map(|c| {
                    let mut t = 100;
                    (c.iter())
                        .map(|&(d, k, back)| {
                            t += if back { -3 * d } else { d };
                            (t, k)
                        })
                        .collect()
                })
                .collect()
        });
        (cycles, 0i64..25, 1usize..40, 1usize..90)
    }

    /// Runs of any size give the documented order (fails if the rows of
    /// items in order taken in or let out in one go were not the order
    /// item by item): mostly ordered times with late items, ties,
    /// definitions, restarts, windows and caps small enough to matter.
    #[test]
    fn random_runs_give_the_documented_order() {
        use proptest::prelude::*;
        // Times that mostly rise (the common case the rows are for), with
        // some steps back.
        let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
            cases: 1000,
            ..Default::default()
        });
        runner
            .run(&mostly_rising(), |(cycles, window, cap, max)| {
                let make = || labelled_cycles(&cycles);
                let want = documented_order(&cycles, window, cap);
                let mut r = Reorder::with_limits(Box::new(make()), window, cap);
                let got = labels_in_runs(&mut r, max)?;
                prop_assert_eq!(&got, &want);
                let mut one = Reorder::with_limits(Box::new(make()), window, cap);
                prop_assert_eq!(labels_one_by_one(&mut one), want);
                Ok(())
            })
            .unwrap();
    }

    /// Items encoded as they come and ordered as records (`wire::Ordered`,
    /// what the writer thread's hand-over does in place of `Reorder`) come
    /// out of the decoder in the documented order and as they went in:
    /// notes whose extras often equal the note's before (the same-extras
    /// mark, which late records must not break), definitions without a
    /// time and timed items that travel whole, restarts, windows and caps
    /// small enough to matter, any run size, a batch decoded after each
    /// run; runs of events (kinds 2 and 3: of 2 and 3 events), which wait
    /// as one record and count their events against the cap. Fails when a
    /// late record takes part in the marks (notes then come out with the
    /// extras of the wrong note), or when a run counts as one event.
    #[test]
    fn records_ordered_on_the_wire_give_the_documented_order() {
        use crate::model::wire::{Ordered, WireBatch, WireDecoder, WireEncoder};
        use proptest::prelude::*;
        let make = |cycles: &[Vec<(i64, u8)>]| {
            let mut r = labelled_cycles(cycles);
            for (c, items) in r.cycles.iter_mut().enumerate() {
                for (i, it) in items.iter_mut().enumerate() {
                    let (t, k) = cycles[c][i];
                    match (k, it) {
                        (1, it) => {
                            // A nested value: no byte form, travels whole.
                            *it = Item::Event(Event {
                                time: Timestamp(t),
                                fields: vec![Value::List(vec![Value::U64(i as u64)])],
                                ..Event::default()
                            });
                        }
                        (2 | 3, it) => {
                            let mut cells = Cells::default();
                            for n in 0..k {
                                cells.push_i64(i as i64 * 10 + n as i64);
                            }
                            let mut event = Event {
                                time: Timestamp(t),
                                ..Event::default()
                            };
                            event.extras.set("x", ExtraValue::U64(c as u64));
                            *it = Item::from(EventRun {
                                event,
                                width: 1,
                                cells,
                            });
                        }
                        (k, Item::Annotation(a)) => {
                            a.extras.set("x", ExtraValue::U64(k as u64 / 4));
                        }
                        _ => {}
                    }
                }
            }
            r
        };
        let show = |it: &Item| format!("{it:?}");
        let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
            cases: 1000,
            ..Default::default()
        });
        runner
            .run(&mostly_rising(), |(cycles, window, cap, max)| {
                // The items as they went in, in the documented order.
                let mut by_label = std::collections::HashMap::new();
                for (c, items) in make(&cycles).cycles.into_iter().enumerate() {
                    for (i, it) in items.into_iter().enumerate() {
                        by_label.insert(format!("{c}.{i}"), show(&it));
                    }
                }
                let events = |k: u8| if k == 2 || k == 3 { k as usize } else { 1 };
                let want: Vec<String> = (documented_order_of(&cycles, window, cap, events).iter())
                    .map(|l| by_label[l].clone())
                    .collect();
                let mut r = make(&cycles);
                let (mut enc, mut dec) = (WireEncoder::new(), WireDecoder::new());
                let mut order = Ordered::new(window, cap);
                let (mut batch, mut run, mut got) = (WireBatch::default(), Vec::new(), Vec::new());
                let mut restarts = r.restarts();
                loop {
                    let more = r.next_batch(&mut run, max).unwrap();
                    if r.restarts() != restarts {
                        restarts = r.restarts();
                        order.flush(&mut batch);
                    }
                    for it in run.iter_mut() {
                        order.accept(&mut enc, it, &mut batch);
                    }
                    order.settle(&mut batch);
                    run.clear();
                    if !more {
                        order.flush(&mut batch);
                    }
                    dec.each(&mut batch, |it| {
                        got.push(show(it));
                        Ok(())
                    })
                    .unwrap();
                    batch.whole_mut().clear();
                    if !more {
                        break;
                    }
                }
                prop_assert_eq!(order.waiting(), 0);
                prop_assert_eq!(got, want);
                Ok(())
            })
            .unwrap();
    }

    /// The ordering is handed over only before the first item; once
    /// handed, items and restarts pass as they come.
    #[test]
    fn ordering_is_handed_over_before_the_first_item_only() {
        let cycles = || vec![vec![note(100, "a"), note(50, "b")], vec![note(10, "c")]];
        let reader = |c: Vec<Vec<Item>>| Cycles {
            header: Header::new(FormatId::Dlt, "1"),
            cycles: c,
            at: 0,
            given: 0,
        };
        let mut r = Reorder::with_limits(Box::new(reader(cycles())), 10, 100);
        assert_eq!(r.take_ordering(), Some((10, 100)));
        let (mut run, mut got) = (Vec::new(), Vec::new());
        let mut restarts = Vec::new();
        while r.next_batch(&mut run, 10).unwrap() {
            restarts.push(r.restarts());
            got.extend(run.drain(..).map(label));
        }
        assert_eq!(got, ["a", "b", "c"]);
        assert_eq!(restarts, [0, 1]);
        let mut r = Reorder::with_limits(Box::new(reader(cycles())), 10, 100);
        assert!(r.next_item().unwrap().is_some());
        assert_eq!(r.take_ordering(), None);
        assert_eq!(r.restarts(), 0);
    }
}
