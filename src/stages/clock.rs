//! Raw clocks keep their meaning: before a writer that takes raw clocks of
//! one meaning (timeline: TSC; DLT and KPI: 0.1 ms ticks) or none at all,
//! raw clocks of another or unknown meaning are left out (and counted), so
//! the writer derives its own from the time. A writer that carries any raw
//! clock (PCP, CTF, LTT) finds the meaning its reader named in the header
//! (`keys::RAW_CLOCK`). The decision is `formats::raw_clock_fate`, the same
//! the mapping table prints.

use crate::error::Result;
use crate::formats::{raw_clock_fate, Fate, RawClock};
use crate::model::{keys, Header, Item, LossReport, TraceReader};
use std::cell::RefCell;
use std::rc::Rc;

pub struct RawClocks {
    inner: Box<dyn TraceReader>,
    header: Header,
    stripped: u64,
    why: &'static str,
    /// Where the count goes at the end of the stream (one loss line).
    loss: Rc<RefCell<LossReport>>,
}

impl RawClocks {
    /// `source` is the declaration of the format the stream was read from,
    /// `target` the one of the writer; raw clocks left out are reported
    /// into `loss` when the stream ends.
    pub fn wrap(
        inner: Box<dyn TraceReader>,
        source: RawClock,
        target: RawClock,
        loss: &Rc<RefCell<LossReport>>,
    ) -> Box<dyn TraceReader> {
        let mut header = inner.header().clone();
        let meaning = header
            .extras
            .str(keys::RAW_CLOCK)
            .map(str::to_string)
            .or(match source {
                RawClock::Native(m) => Some(m.to_string()),
                _ => None,
            });
        match raw_clock_fate(meaning.as_deref(), target) {
            Fate::Dropped(why) => {
                header.extras.remove(keys::RAW_CLOCK);
                Box::new(RawClocks {
                    inner,
                    header,
                    stripped: 0,
                    why,
                    loss: loss.clone(),
                })
            }
            // Readers whose items carry a raw clock name it in the header
            // (`keys::RAW_CLOCK`), so a writer that carries any finds the
            // meaning there; a source without raw clocks (bare KPI lines)
            // is not given one.
            _ => inner,
        }
    }
}

impl RawClocks {
    /// At the end of the stream: the raw clocks left out, one loss line.
    fn report(&mut self) {
        let n = std::mem::take(&mut self.stripped);
        if n > 0 {
            *self
                .loss
                .borrow_mut()
                .dropped
                .entry(("raw clocks".into(), self.why.into()))
                .or_default() += n;
        }
    }
}

impl TraceReader for RawClocks {
    fn header(&self) -> &Header {
        &self.header
    }
    fn next_item(&mut self) -> Result<Option<Item>> {
        // The result goes back as it came (not taken apart and built
        // again): one item less to move per event on a hot path.
        let mut it = self.inner.next_item();
        let rc = match &mut it {
            Ok(Some(Item::Event(e))) => &mut e.raw_clock,
            Ok(Some(Item::Sample(s))) => &mut s.raw_clock,
            Ok(Some(Item::Annotation(a))) => &mut a.raw_clock,
            Ok(None) => {
                self.report();
                return it;
            }
            _ => return it,
        };
        if rc.take().is_some() {
            self.stripped += 1;
        }
        it
    }
    fn next_batch(&mut self, out: &mut Vec<Item>, max: usize) -> Result<bool> {
        let start = out.len();
        let r = self.inner.next_batch(out, max);
        for it in &mut out[start..] {
            let rc = match it {
                Item::Event(e) => &mut e.raw_clock,
                Item::Sample(s) => &mut s.raw_clock,
                Item::Annotation(a) => &mut a.raw_clock,
                _ => continue,
            };
            self.stripped += rc.take().is_some() as u64;
        }
        if matches!(r, Ok(false)) {
            self.report();
        }
        r
    }
    pass_to_inner!(diagnostics, native_counts, progress, recycle, recycle_batch);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;

    fn stream(clock: Option<&str>) -> Box<dyn TraceReader> {
        let mut h = Header::new(FormatId::Dlt, "1");
        if let Some(c) = clock {
            h.extras.set(keys::RAW_CLOCK, ExtraValue::Str(c.into()));
        }
        Box::new(VecReader::new(Trace {
            header: h,
            items: vec![Item::Annotation(Annotation {
                time: Timestamp(1),
                raw_clock: Some(50_706),
                text: "x".into(),
                extras: Extras::default(),
            })],
        }))
    }

    fn raw(source: RawClock, clock: Option<&str>, target: RawClock) -> (Option<u64>, u64) {
        let loss = Rc::new(RefCell::new(LossReport::default()));
        let mut r = RawClocks::wrap(stream(clock), source, target, &loss);
        let v = match r.next_item().unwrap() {
            Some(Item::Annotation(a)) => a.raw_clock,
            _ => None,
        };
        assert!(r.next_item().unwrap().is_none());
        let n = loss.borrow().dropped.values().sum();
        // In a run: the same value and the same loss line.
        let loss2 = Rc::new(RefCell::new(LossReport::default()));
        let mut r = RawClocks::wrap(stream(clock), source, target, &loss2);
        let mut run = Vec::new();
        while r.next_batch(&mut run, 10).unwrap() {}
        let w = match run.as_slice() {
            [Item::Annotation(a)] => a.raw_clock,
            _ => panic!("{run:?}"),
        };
        assert_eq!((w, &*loss2.borrow()), (v, &*loss.borrow()));
        (v, n)
    }

    #[test]
    fn dlt_ticks_are_never_tsc_cycles() {
        let dlt = RawClock::Native("dlt-0.1ms");
        let tsc = RawClock::Native("tsc");
        assert_eq!(raw(dlt, None, tsc), (None, 1));
        assert_eq!(raw(dlt, None, dlt), (Some(50_706), 0));
        // The recorder says its raw clock is a TSC, whatever its format.
        assert_eq!(raw(dlt, Some("tsc"), tsc), (Some(50_706), 0));
        assert_eq!(raw(dlt, Some("tsc"), dlt), (None, 1));
        assert_eq!(raw(dlt, None, RawClock::None), (None, 1));
        // Carried: kept; the meaning is the one the reader named (none
        // named: none invented).
        let loss = Rc::new(RefCell::new(LossReport::default()));
        let r = RawClocks::wrap(stream(Some("dlt-0.1ms")), dlt, RawClock::Carried, &loss);
        assert_eq!(r.header().extras.str(keys::RAW_CLOCK), Some("dlt-0.1ms"));
        let r = RawClocks::wrap(stream(None), dlt, RawClock::Carried, &loss);
        assert_eq!(r.header().extras.str(keys::RAW_CLOCK), None);
        assert_eq!(raw(dlt, None, RawClock::Carried), (Some(50_706), 0));
    }
}
