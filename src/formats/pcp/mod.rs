//! PCP archives v2/v3 (.meta, .0…, .index). Not implemented yet: see its issue.

use crate::formats::{Caps, Format};
use crate::input::Input;
use crate::model::FormatId;

pub struct PcpFormat;

impl Format for PcpFormat {
    fn id(&self) -> FormatId {
        FormatId::Pcp
    }
    fn caps(&self) -> Caps {
        Caps::default()
    }
    fn describe(&self) -> &'static str {
        "PCP archives v2/v3 (.meta, .0…, .index)"
    }
    fn detect(&self, _input: &Input) -> u8 {
        0
    }
}
