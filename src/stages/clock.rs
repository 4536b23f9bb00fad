//! Raw clocks keep their meaning: before a writer that takes raw clocks of
//! one meaning (timeline: TSC; DLT and KPI: 0.1 ms ticks), raw clocks of
//! another or unknown meaning are left out, so the writer derives its own
//! from the time. A writer that carries any raw clock (PCP) gets the
//! meaning recorded in the header (`keys::RAW_CLOCK`).

use crate::error::{Diagnostic, Result};
use crate::formats::RawClock;
use crate::model::{keys, ExtraValue, Header, Item, TraceReader};

pub struct RawClocks {
    inner: Box<dyn TraceReader>,
    header: Header,
    strip: bool,
    stripped: u64,
}

impl RawClocks {
    /// `source` is the declaration of the format the stream was read from,
    /// `target` the one of the writer.
    pub fn wrap(
        inner: Box<dyn TraceReader>,
        source: RawClock,
        target: RawClock,
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
        let strip = match target {
            RawClock::Native(want) => meaning.as_deref() != Some(want),
            RawClock::None => false,
            RawClock::Carried => {
                if let Some(m) = &meaning {
                    header
                        .extras
                        .set(keys::RAW_CLOCK, ExtraValue::Str(m.clone()));
                }
                false
            }
        };
        if strip {
            header.extras.0.remove(keys::RAW_CLOCK);
        } else if header.extras == inner.header().extras {
            return inner;
        }
        Box::new(RawClocks {
            inner,
            header,
            strip,
            stripped: 0,
        })
    }
    /// Raw clock values left out so far.
    pub fn stripped(&self) -> u64 {
        self.stripped
    }
}

impl TraceReader for RawClocks {
    fn header(&self) -> &Header {
        &self.header
    }
    fn next_item(&mut self) -> Result<Option<Item>> {
        let mut it = self.inner.next_item()?;
        if self.strip {
            let rc = match &mut it {
                Some(Item::Event(e)) => &mut e.raw_clock,
                Some(Item::Sample(s)) => &mut s.raw_clock,
                Some(Item::Annotation(a)) => &mut a.raw_clock,
                _ => return Ok(it),
            };
            if rc.take().is_some() {
                self.stripped += 1;
            }
        }
        Ok(it)
    }
    fn diagnostics(&self) -> &[Diagnostic] {
        self.inner.diagnostics()
    }
    fn native_counts(&self) -> Vec<(String, u64)> {
        self.inner.native_counts()
    }
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

    fn raw(mut r: Box<dyn TraceReader>) -> Option<u64> {
        match r.next_item().unwrap() {
            Some(Item::Annotation(a)) => a.raw_clock,
            _ => None,
        }
    }

    #[test]
    fn dlt_ticks_are_never_tsc_cycles() {
        let dlt = RawClock::Native("dlt-0.1ms");
        let tsc = RawClock::Native("tsc");
        assert_eq!(raw(RawClocks::wrap(stream(None), dlt, tsc)), None);
        assert_eq!(raw(RawClocks::wrap(stream(None), dlt, dlt)), Some(50_706));
        // The recorder says its raw clock is a TSC, whatever its format.
        assert_eq!(
            raw(RawClocks::wrap(stream(Some("tsc")), dlt, tsc)),
            Some(50_706)
        );
        assert_eq!(raw(RawClocks::wrap(stream(Some("tsc")), dlt, dlt)), None);
        // Carried: kept, and its meaning recorded.
        let r = RawClocks::wrap(stream(None), dlt, RawClock::Carried);
        assert_eq!(r.header().extras.str(keys::RAW_CLOCK), Some("dlt-0.1ms"));
        assert_eq!(raw(r), Some(50_706));
    }
}
