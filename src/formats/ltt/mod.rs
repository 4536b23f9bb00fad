//! LTT directory traces (2003-2005) with XML event definitions. Not implemented yet: see its issue.

use crate::formats::{Caps, Format};
use crate::input::Input;
use crate::model::FormatId;

pub struct LttFormat;

impl Format for LttFormat {
    fn id(&self) -> FormatId {
        FormatId::Ltt
    }
    fn caps(&self) -> Caps {
        Caps::default()
    }
    fn describe(&self) -> &'static str {
        "LTT directory traces (2003-2005) with XML event definitions"
    }
    fn detect(&self, _input: &Input) -> u8 {
        0
    }
}
