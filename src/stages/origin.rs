//! Honest time: `--time-origin TIME` places a stream's first data item at
//! TIME, and the check that a writer needing dates gets them.
//!
//! A source with relative time (bare KPI lines) or cycles only (timeline
//! files) has no date. Writers that need one (PCP, DLT storage time, KPI
//! `dlt-convert -a` lines; `AbsoluteTime` in each `FormatInfo`) stop with an
//! error naming the options instead of inventing 1970.

use crate::error::{Error, Result};
use crate::model::{keys, ExtraValue, Header, Item, TimeBase, Timestamp, TraceReader};
use std::collections::VecDeque;
use std::path::Path;

/// Moves every time of a stream by one offset, chosen so that the first
/// data item lands on the origin, and says the time is absolute from then.
pub struct Origin {
    inner: Box<dyn TraceReader>,
    header: Header,
    origin: Timestamp,
    delta: Option<i64>,
    /// Items before the first data item, held until the offset is known.
    held: VecDeque<Item>,
}

impl Origin {
    /// Wrap `inner` when an origin is given; otherwise leave it as it is.
    /// A stream in cycles without a rate cannot be placed: error.
    pub fn wrap(
        inner: Box<dyn TraceReader>,
        origin: Option<Timestamp>,
        input: &Path,
    ) -> Result<Box<dyn TraceReader>> {
        let Some(origin) = origin else {
            return Ok(inner);
        };
        if let TimeBase::Cycles { hz: None, .. } = inner.header().time_base {
            return Err(Error::Usage(format!(
                "{}: --time-origin needs --tsc-hz HZ: this source has TSC cycles only, \
                 and without their rate they are no time axis",
                input.display()
            )));
        }
        let mut header = inner.header().clone();
        header
            .extras
            .set(ORIGIN_FROM, ExtraValue::Str(header.time_base.describe()));
        header.time_base = TimeBase::Absolute;
        header.start = Some(origin);
        Ok(Box::new(Origin {
            inner,
            header,
            origin,
            delta: None,
            held: VecDeque::new(),
        }))
    }

    fn shift(&self, item: &mut Item) {
        let d = self.delta.unwrap_or(0);
        let mv = |t: &mut Timestamp| t.0 = t.0.saturating_add(d);
        let mv_extras = |x: &mut crate::model::Extras| {
            for k in keys::TIMESTAMPS {
                if let Some(ExtraValue::I64(v)) = x.get_mut(k) {
                    *v = v.saturating_add(d);
                }
            }
        };
        match item {
            Item::Event(e) => {
                mv(&mut e.time);
                mv_extras(&mut e.extras);
            }
            Item::EventRun(r) => {
                mv(&mut r.event.time);
                mv_extras(&mut r.event.extras);
            }
            Item::Sample(s) => {
                mv(&mut s.time);
                mv_extras(&mut s.extras);
            }
            Item::Mark(m) => mv(&mut m.time),
            Item::Annotation(a) => {
                mv(&mut a.time);
                mv_extras(&mut a.extras);
            }
            Item::Indom(u) => mv(&mut u.time),
            Item::Labels(l) => {
                if let Some(t) = &mut l.time {
                    mv(t);
                }
            }
            Item::EventType(_) | Item::Metric(_) | Item::Help(_) => {}
        }
    }
}

/// Header extra: the time base the stream had before `--time-origin`.
pub const ORIGIN_FROM: &str = "time.origin_from";

impl TraceReader for Origin {
    fn header(&self) -> &Header {
        &self.header
    }
    fn next_item(&mut self) -> Result<Option<Item>> {
        if self.delta.is_none() {
            // Hold everything up to the first data item (definitions only:
            // few) to learn the offset.
            loop {
                match self.inner.next_item()? {
                    Some(it) => {
                        let data = it.is_data();
                        if data {
                            let t = it.time().unwrap_or_default();
                            self.delta = Some(self.origin.0.saturating_sub(t.0));
                        }
                        self.held.push_back(it);
                        if data {
                            break;
                        }
                    }
                    None => {
                        // No data: place the first timed definition, if any.
                        let t = self.held.iter().find_map(Item::time).unwrap_or_default();
                        self.delta = Some(self.origin.0.saturating_sub(t.0));
                        break;
                    }
                }
            }
        }
        let mut it = match self.held.pop_front() {
            Some(it) => it,
            None => match self.inner.next_item()? {
                Some(it) => it,
                None => return Ok(None),
            },
        };
        self.shift(&mut it);
        Ok(Some(it))
    }
    pass_to_inner!(diagnostics, native_counts, progress, recycle, restarts);
}

/// True when the stream's times are dates: absolute, or cycles with both a
/// rate and an anchor (`--tsc-hz` and `--tsc-anchor`).
pub fn has_dates(h: &Header) -> bool {
    match &h.time_base {
        TimeBase::Absolute => true,
        TimeBase::Cycles { hz, anchor } => hz.is_some() && anchor.is_some(),
        TimeBase::Relative { .. } => false,
    }
}

/// The error for a stream without dates going into a writer that needs
/// them: says what the source has and which options give the dates.
pub fn no_dates_error(h: &Header, input: &Path, target: &str) -> Error {
    let what = match &h.time_base {
        TimeBase::Relative { origin } => format!("relative time only ({origin})"),
        TimeBase::Cycles { hz: None, .. } => "TSC cycles only".to_string(),
        TimeBase::Cycles { .. } => "TSC cycles at a known rate, but no date".to_string(),
        TimeBase::Absolute => "dates".to_string(),
    };
    let fix = match &h.time_base {
        TimeBase::Cycles { hz: None, .. } => {
            "give --tsc-hz HZ and --time-origin TIME (the date of the first entry), \
             or --tsc-hz HZ and --tsc-anchor TIME (the date of TSC 0)"
        }
        TimeBase::Cycles { .. } => {
            "give --time-origin TIME (the date of the first entry) or --tsc-anchor TIME \
             (the date of TSC 0)"
        }
        _ => "give --time-origin TIME (RFC 3339 or epoch seconds) to place the first item at TIME",
    };
    Error::Usage(format!(
        "{}: the {target} format needs dates, but this {} source has {what}: {fix}; \
         nothing written",
        input.display(),
        h.source
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;
    use std::sync::Arc;

    fn ev(t: i64) -> Item {
        let mut extras = Extras::default();
        extras.set("kpi.beg_time", ExtraValue::I64(t - 5));
        Item::Event(Event {
            time: Timestamp(t),
            raw_clock: Some(7),
            type_id: 1,
            cpu: None,
            stream: None,
            fields: vec![],
            extras,
        })
    }

    #[test]
    fn first_data_item_lands_on_the_origin() {
        let mut h = Header::new(FormatId::Kpi, "bare");
        h.time_base = TimeBase::Relative {
            origin: "line order".into(),
        };
        let items = vec![
            Item::EventType(Arc::new(EventType::new(1, "kpi", "NEW", vec![]))),
            Item::Indom(IndomUpdate {
                time: Timestamp(90),
                id: 1,
                kind: IndomKind::Full,
                instances: vec![],
                removed: vec![],
                extras: Extras::default(),
            }),
            ev(100),
            ev(250),
        ];
        let r = Box::new(VecReader::new(Trace { header: h, items }));
        let origin = Timestamp(1_795_319_035_000_000_000);
        let mut o = Origin::wrap(r, Some(origin), Path::new("x")).unwrap();
        assert!(o.header().time_base.is_absolute());
        assert_eq!(o.header().start, Some(origin));
        let mut times = Vec::new();
        while let Some(it) = o.next_item().unwrap() {
            if let Item::Event(e) = &it {
                assert_eq!(e.extras.i64("kpi.beg_time"), Some(e.time.0 - 5));
                assert_eq!(e.raw_clock, Some(7));
            }
            times.push(it.time().map(|t| t.0 - origin.0));
        }
        assert_eq!(times, [None, Some(-10), Some(0), Some(150)]);
    }

    #[test]
    fn cycles_without_a_rate_cannot_be_placed() {
        let mut h = Header::new(FormatId::Timeline, "A2");
        h.time_base = TimeBase::Cycles {
            hz: None,
            anchor: None,
        };
        let r = Box::new(VecReader::new(Trace {
            header: h.clone(),
            items: vec![],
        }));
        let e = Origin::wrap(r, Some(Timestamp(0)), Path::new("t.dat"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("--tsc-hz"), "{e}");
        assert!(!has_dates(&h));
        let msg = no_dates_error(&h, Path::new("t.dat"), "pcp").to_string();
        assert!(
            msg.contains("--time-origin") && msg.contains("--tsc-hz"),
            "{msg}"
        );
    }
}
