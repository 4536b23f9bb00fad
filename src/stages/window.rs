//! The time window: keep only data items inside `[begin, end]`.

use crate::error::{Diagnostic, Result};
use crate::model::{Header, Item, TimeSpec, Timestamp, TraceReader};

/// A reader that keeps only data items inside `[begin, end]`. Definitions
/// always pass, so writers still see every definition before use.
pub struct Window {
    inner: Box<dyn TraceReader>,
    begin: Option<TimeSpec>,
    end: Option<TimeSpec>,
    first: Option<Timestamp>,
}

impl Window {
    pub fn wrap(
        inner: Box<dyn TraceReader>,
        begin: Option<TimeSpec>,
        end: Option<TimeSpec>,
    ) -> Box<dyn TraceReader> {
        if begin.is_none() && end.is_none() {
            return inner;
        }
        Box::new(Window {
            inner,
            begin,
            end,
            first: None,
        })
    }
    fn resolve(&self, t: TimeSpec) -> Timestamp {
        match t {
            TimeSpec::At(ts) => ts,
            TimeSpec::After(ns) => Timestamp(self.first.unwrap_or_default().0.saturating_add(ns)),
        }
    }
}

impl TraceReader for Window {
    fn header(&self) -> &Header {
        self.inner.header()
    }
    fn next_item(&mut self) -> Result<Option<Item>> {
        loop {
            let Some(item) = self.inner.next_item()? else {
                return Ok(None);
            };
            if !item.is_data() {
                return Ok(Some(item));
            }
            let t = item.time().unwrap_or_default();
            if self.first.is_none() {
                self.first = Some(t);
            }
            if let Some(b) = self.begin {
                if t < self.resolve(b) {
                    continue;
                }
            }
            if let Some(e) = self.end {
                if t > self.resolve(e) {
                    continue;
                }
            }
            return Ok(Some(item));
        }
    }
    fn diagnostics(&self) -> &[Diagnostic] {
        self.inner.diagnostics()
    }
    fn native_counts(&self) -> Vec<(String, u64)> {
        self.inner.native_counts()
    }
}
