//! Snabb timeline snapshots (A2 prototype, mainline M2/M3). Not implemented yet: see its issue.

use crate::formats::{Caps, Format};
use crate::input::Input;
use crate::model::FormatId;

pub struct TimelineFormat;

impl Format for TimelineFormat {
    fn id(&self) -> FormatId {
        FormatId::Timeline
    }
    fn caps(&self) -> Caps {
        Caps::default()
    }
    fn describe(&self) -> &'static str {
        "Snabb timeline snapshots (A2 prototype, mainline M2/M3)"
    }
    fn detect(&self, _input: &Input) -> u8 {
        0
    }
}
