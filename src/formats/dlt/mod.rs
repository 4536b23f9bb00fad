//! DLT storage files (.dlt) carrying dlt-kpi messages. Not implemented yet: see its issue.

use crate::formats::{Caps, Format};
use crate::input::Input;
use crate::model::FormatId;

pub struct DltFormat;

impl Format for DltFormat {
    fn id(&self) -> FormatId {
        FormatId::Dlt
    }
    fn caps(&self) -> Caps {
        Caps::default()
    }
    fn describe(&self) -> &'static str {
        "DLT storage files (.dlt) carrying dlt-kpi messages"
    }
    fn detect(&self, _input: &Input) -> u8 {
        0
    }
}
