//! PCP MMV memory-mapped value files v1/v2/v3. Not implemented yet: see its issue.

use crate::formats::{Caps, Format};
use crate::input::Input;
use crate::model::FormatId;

pub struct MmvFormat;

impl Format for MmvFormat {
    fn id(&self) -> FormatId {
        FormatId::Mmv
    }
    fn caps(&self) -> Caps {
        Caps::default()
    }
    fn describe(&self) -> &'static str {
        "PCP MMV memory-mapped value files v1/v2/v3"
    }
    fn detect(&self, _input: &Input) -> u8 {
        0
    }
}
