//! Writer (A2 and M3): to be filled.
use crate::error::Result;
use crate::model::{Header, Item, LossReport, TraceWriter};
use crate::options::WriteOptions;
use crate::output::OutTarget;

pub struct TimelineWriter;
impl TimelineWriter {
    pub fn new(_o: &OutTarget, _h: &Header, _w: &WriteOptions) -> Result<Self> {
        Ok(TimelineWriter)
    }
}
impl TraceWriter for TimelineWriter {
    fn write_item(&mut self, _i: &Item) -> Result<()> {
        Ok(())
    }
    fn finish(self: Box<Self>) -> Result<LossReport> {
        Ok(LossReport::default())
    }
}
