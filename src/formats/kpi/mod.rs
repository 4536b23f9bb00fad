//! KPI text lines (dlt-kpi datasets, bare or as `dlt-convert -a` prints them).

use crate::formats::{Caps, Format};
use crate::input::Input;
use crate::model::FormatId;

pub struct KpiFormat;

impl Format for KpiFormat {
    fn id(&self) -> FormatId {
        FormatId::Kpi
    }
    fn caps(&self) -> Caps {
        Caps::default()
    }
    fn describe(&self) -> &'static str {
        "dlt-kpi text lines (bare datasets or dlt-convert -a lines)"
    }
    fn detect(&self, _input: &Input) -> u8 {
        0
    }
}

pub mod schema;
