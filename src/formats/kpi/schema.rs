//! How KPI datasets map into the model (design/model.md §3). Shared by the
//! KPI text format, the DLT reader/writer and the recorder, so that all of
//! them produce and consume the same event types, metrics and indoms.
//!
//! - NEW/STP/CHK datasets are events (types below) and also drive the
//!   `kpi.proc` instance domain (instance id = PID, name = `PID cmdline`).
//! - ACT datasets are samples of `kpi.proc.{cpu,rss,ctxsw,io_bytes,io_wait}`.
//! - IRQ datasets are samples of `kpi.irq.count` over the `kpi.irq` indom,
//!   one instance per (irq, cpu), named `IRQ:cpuN`.

use crate::model::*;
use std::sync::Arc;

/// PCP domain number used for KPI metrics (a private-use number).
pub const DOMAIN: u32 = 452;

pub use crate::model::{indom_id as indom, pmid};

pub const PROC_INDOM: IndomId = indom(DOMAIN, 1);
pub const IRQ_INDOM: IndomId = indom(DOMAIN, 2);

pub const CPU: MetricId = pmid(DOMAIN, 0, 0);
pub const RSS: MetricId = pmid(DOMAIN, 0, 1);
pub const CTXSW: MetricId = pmid(DOMAIN, 0, 2);
pub const IO_BYTES: MetricId = pmid(DOMAIN, 0, 3);
pub const IO_WAIT: MetricId = pmid(DOMAIN, 0, 4);
pub const IRQ_COUNT: MetricId = pmid(DOMAIN, 1, 0);

/// The ACT columns after the pid, in dataset order.
pub const ACT_METRICS: [MetricId; 5] = [CPU, RSS, CTXSW, IO_BYTES, IO_WAIT];

pub const NEW_TYPE: EventTypeId = 1;
pub const STP_TYPE: EventTypeId = 2;
pub const CHK_TYPE: EventTypeId = 3;

/// Extras key: the KPI kind a sample or event came from (`ACT`, `IRQ`, …).
pub const X_KIND: &str = "kpi.kind";
/// Extras key on the header: page size used for RSS (bytes per page).
pub const X_PAGE_SIZE: &str = "kpi.page_size";

/// Event types for NEW, STP and CHK.
pub fn event_types() -> Vec<Arc<EventType>> {
    let pid = || Field::new("pid", FieldType::Int(4));
    let mut new = EventType::new(
        NEW_TYPE,
        "kpi",
        "NEW",
        vec![
            pid(),
            Field::new("ppid", FieldType::Int(4)),
            Field::new("cmdline", FieldType::String),
        ],
    );
    new.description = Some("process first seen".into());
    let mut stp = EventType::new(STP_TYPE, "kpi", "STP", vec![pid()]);
    stp.description = Some("process gone".into());
    let mut chk = EventType::new(
        CHK_TYPE,
        "kpi",
        "CHK",
        vec![pid(), Field::new("cmdline", FieldType::String)],
    );
    chk.description = Some("process still listed (periodic check)".into());
    vec![Arc::new(new), Arc::new(stp), Arc::new(chk)]
}

fn desc(
    id: MetricId,
    name: &str,
    vtype: ValueType,
    sem: Semantics,
    units: Units,
    indom: IndomId,
    help: &str,
) -> Arc<MetricDesc> {
    let mut d = MetricDesc::new(id, name, vtype, sem, units);
    d.indom = Some(indom);
    d.help_short = Some(help.to_string());
    Arc::new(d)
}

/// Metric descriptors for ACT and IRQ datasets.
pub fn metrics() -> Vec<Arc<MetricDesc>> {
    vec![
        desc(
            CPU,
            "kpi.proc.cpu",
            ValueType::U64,
            Semantics::Instant,
            Units::NONE,
            PROC_INDOM,
            "CPU use, per mille of the whole machine (dlt-kpi ACT column 2)",
        ),
        desc(
            RSS,
            "kpi.proc.rss",
            ValueType::I64,
            Semantics::Instant,
            Units::count(),
            PROC_INDOM,
            "resident set size in pages (dlt-kpi ACT column 3)",
        ),
        desc(
            CTXSW,
            "kpi.proc.ctxsw",
            ValueType::I64,
            Semantics::Counter,
            Units::count(),
            PROC_INDOM,
            "context switches of the main thread since start (dlt-kpi ACT column 4)",
        ),
        desc(
            IO_BYTES,
            "kpi.proc.io_bytes",
            ValueType::U64,
            Semantics::Counter,
            Units::bytes(),
            PROC_INDOM,
            "rchar + wchar since start (dlt-kpi ACT column 5)",
        ),
        desc(
            IO_WAIT,
            "kpi.proc.io_wait",
            ValueType::U64,
            Semantics::Instant,
            Units::NONE,
            PROC_INDOM,
            "block I/O delay, per mille of the whole machine (dlt-kpi ACT column 6)",
        ),
        desc(
            IRQ_COUNT,
            "kpi.irq.count",
            ValueType::U64,
            Semantics::Counter,
            Units::count(),
            IRQ_INDOM,
            "interrupts per IRQ row and CPU since boot (dlt-kpi IRQ)",
        ),
    ]
}

/// Every definition item, in the order a KPI stream emits them.
pub fn definitions() -> Vec<Item> {
    let mut v: Vec<Item> = event_types().into_iter().map(Item::EventType).collect();
    v.extend(metrics().into_iter().map(Item::Metric));
    v
}

/// Instance name of a process in `kpi.proc`.
pub fn proc_instance_name(pid: i64, cmdline: &str) -> String {
    format!("{pid} {cmdline}")
}

/// [`proc_instance_name`] into `out` (its buffer reused), from the
/// command line's bytes (invalid UTF-8 replaced, as `from_utf8_lossy`).
pub fn proc_instance_name_into(out: &mut String, pid: i64, cmdline: &[u8]) {
    out.clear();
    out.push_str(itoa::Buffer::new().format(pid));
    out.push(' ');
    if let Some(t) = crate::model::utf8(cmdline) {
        out.push_str(t);
        return;
    }
    for chunk in cmdline.utf8_chunks() {
        out.push_str(chunk.valid());
        if !chunk.invalid().is_empty() {
            out.push(char::REPLACEMENT_CHARACTER);
        }
    }
}

/// Instance name of an IRQ row/CPU pair in `kpi.irq`.
pub fn irq_instance_name(irq: &str, cpu: u32) -> String {
    format!("{irq}:cpu{cpu}")
}

/// Extras key: the group (BEG..END) an item belongs to, numbered in order of
/// BEG; lets a writer rebuild the same groups.
pub const X_GROUP: &str = "kpi.group";

/// Extras keys on events: time and raw clock of the group's BEG message
/// (events carry their own message's time), so writers can rebuild BEG lines.
pub const X_BEG_TIME: &str = "kpi.beg_time";
pub const X_BEG_RAW: &str = "kpi.beg_raw";
