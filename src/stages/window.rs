//! The time window: keep only data items inside `[begin, end]`.

use crate::error::{Error, Result};
use crate::model::{Item, TimeWindow, Timestamp, TraceReader, WindowClock};

/// A reader that keeps only data items inside the window. Definitions
/// always pass, so writers still see every definition before use.
pub struct Window {
    inner: Box<dyn TraceReader>,
    clock: WindowClock,
}

impl Window {
    /// `start` and `end` are the trace's, where known (`Format::time_bounds`
    /// finds them); a bound counted from the end needs `end`. Without
    /// `start`, the header's is taken, else the first data item's time.
    pub fn wrap(
        inner: Box<dyn TraceReader>,
        window: TimeWindow,
        start: Option<Timestamp>,
        end: Option<Timestamp>,
    ) -> Result<Box<dyn TraceReader>> {
        if window.is_open() {
            return Ok(inner);
        }
        let start = start.or(inner.header().start);
        let clock = WindowClock::new(window, start, end).map_err(Error::Usage)?;
        Ok(Box::new(Window { inner, clock }))
    }
}

impl TraceReader for Window {
    fn next_item(&mut self) -> Result<Option<Item>> {
        loop {
            let Some(item) = self.inner.next_item()? else {
                return Ok(None);
            };
            if !item.is_data() {
                return Ok(Some(item));
            }
            let t = item.time().unwrap_or_default();
            if self.clock.contains(t).map_err(Error::Usage)? {
                return Ok(Some(item));
            }
            // Outside the window: its buffers serve the next item.
            self.inner.recycle(item);
        }
    }
    pass_to_inner!(described, recycle, restarts);
}
