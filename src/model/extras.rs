//! Typed per-format extras: what only one format has travels here so a
//! same-format round trip is lossless. Keys are namespaced by format
//! (`mmv.flags`, `pcp.label.zoneinfo`, `ltt.block_size`, `timeline.msg_id`);
//! each format module defines the keys it uses as constants.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
pub enum ExtraValue {
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<ExtraValue>),
}

impl std::fmt::Display for ExtraValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExtraValue::U64(v) => write!(f, "{v}"),
            ExtraValue::I64(v) => write!(f, "{v}"),
            ExtraValue::F64(v) => write!(f, "{v:?}"),
            ExtraValue::Bool(v) => write!(f, "{v}"),
            ExtraValue::Str(v) => write!(f, "{v:?}"),
            ExtraValue::Bytes(v) => write!(f, "<{} bytes>", v.len()),
            ExtraValue::List(v) => {
                write!(f, "[")?;
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{x}")?;
                }
                write!(f, "]")
            }
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extras(pub BTreeMap<String, ExtraValue>);

impl Extras {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn set(&mut self, key: &str, v: ExtraValue) {
        self.0.insert(key.to_string(), v);
    }
    pub fn get(&self, key: &str) -> Option<&ExtraValue> {
        self.0.get(key)
    }
    pub fn u64(&self, key: &str) -> Option<u64> {
        match self.0.get(key)? {
            ExtraValue::U64(v) => Some(*v),
            ExtraValue::I64(v) => u64::try_from(*v).ok(),
            _ => None,
        }
    }
    pub fn i64(&self, key: &str) -> Option<i64> {
        match self.0.get(key)? {
            ExtraValue::I64(v) => Some(*v),
            ExtraValue::U64(v) => i64::try_from(*v).ok(),
            _ => None,
        }
    }
    pub fn f64(&self, key: &str) -> Option<f64> {
        match self.0.get(key)? {
            ExtraValue::F64(v) => Some(*v),
            _ => None,
        }
    }
    pub fn str(&self, key: &str) -> Option<&str> {
        match self.0.get(key)? {
            ExtraValue::Str(v) => Some(v),
            _ => None,
        }
    }
    pub fn bytes(&self, key: &str) -> Option<&[u8]> {
        match self.0.get(key)? {
            ExtraValue::Bytes(v) => Some(v),
            _ => None,
        }
    }
    pub fn bool(&self, key: &str) -> Option<bool> {
        match self.0.get(key)? {
            ExtraValue::Bool(v) => Some(*v),
            _ => None,
        }
    }
}

/// Extras keys that more than one module reads. A format's own keys stay in
/// its folder; these describe a stream any writer may look at.
pub mod keys {
    /// Header: which counter the items' `raw_clock` holds, so a writer never
    /// takes one clock for another. Values: `tsc` (x86 TSC, recorder and
    /// timeline), `cntvct_el0` (arm64 recorder), `dlt-0.1ms` (DLT header
    /// timestamps: 0.1 ms ticks since boot), `ltt-cycles` (LTT cycle
    /// counter). Absent: no raw clock, or its meaning is unknown.
    pub const RAW_CLOCK: &str = "record.raw_clock";
    /// The values of [`RAW_CLOCK`].
    pub const CLOCK_TSC: &str = "tsc";
    pub const CLOCK_CNTVCT: &str = "cntvct_el0";
    pub const CLOCK_DLT: &str = "dlt-0.1ms";
    pub const CLOCK_LTT: &str = "ltt-cycles";
    /// True when a raw clock of this name counts CPU cycles (a timeline's
    /// TSC can hold it); DLT ticks and unknown clocks do not.
    pub fn is_cycle_counter(name: &str) -> bool {
        matches!(name, CLOCK_TSC | CLOCK_CNTVCT | CLOCK_LTT)
    }
    /// Extras whose value (i64) is a model timestamp in nanoseconds, so
    /// that a stage moving the time axis (`--time-origin`) moves them too.
    pub const TIMESTAMPS: [&str; 2] = ["kpi.beg_time", "dlt.storage_ns"];
    /// Header: the recorder's TSC rate (mean, at start, at end).
    pub const TSC_HZ: &str = "record.tsc_hz";
    pub const TSC_HZ_START: &str = "record.tsc_hz_start";
    pub const TSC_HZ_END: &str = "record.tsc_hz_end";
    /// Header: counter value and CLOCK_REALTIME ns of the first scan (anchor).
    pub const TSC_ANCHOR: &str = "record.tsc_anchor";
    pub const INTERVAL_NS: &str = "record.interval_ns";
    pub const CHECK_INTERVAL_NS: &str = "record.check_interval_ns";
    pub const NCPU: &str = "record.ncpu";
    pub const CLK_TCK: &str = "record.clk_tck";
    pub const SCANS: &str = "record.scans";
    /// Header: why the recording stopped: `duration`, `samples`, `SIGINT`, `SIGTERM`.
    pub const STOPPED_BY: &str = "record.stopped_by";
    /// Data items of a merged stream: the input they came from (its file
    /// name or `--label`).
    pub const SOURCE: &str = "source";
    /// Header of a merged stream: the inputs' names, in order.
    pub const MERGE_SOURCES: &str = "merge.sources";
}
