//! Options passed from the CLI to readers, writers and dumpers. Every
//! format-specific flag lives here so the CLI defines it once.

use crate::model::{Glob, MessageSelect, Selection, TimeWindow, Timestamp};

/// Options for reading any format.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// Keep the good prefix on damage (record a diagnostic) instead of failing.
    pub salvage: bool,
    /// DLT: application and context ids of KPI messages (default PROC/PROC).
    pub kpi_app: Option<String>,
    pub kpi_ctx: Option<String>,
    /// Timeline: TSC frequency and the epoch time of TSC 0 (or of the first entry).
    pub tsc_hz: Option<f64>,
    pub tsc_anchor: Option<Timestamp>,
    /// KPI: page size for RSS (default 4096).
    pub page_size: Option<u64>,
    /// DLT: which messages to read (`--ecu`, `--app`, …); the native
    /// listing applies them too.
    pub messages: MessageSelect,
}

/// Options for writing any format.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Any drop or degradation is an error before output is committed.
    pub strict: bool,
    /// PCP: archive version (2 or 3) and volume size in bytes.
    pub pcp_version: Option<u32>,
    pub volume_size: Option<u64>,
    /// MMV: file version (1, 2, 3) and the snapshot time.
    pub mmv_version: Option<u32>,
    pub at: Option<Timestamp>,
    /// Timeline: layout ("A2" or "M3") and ring size in entries.
    pub timeline_version: Option<String>,
    pub entries: Option<u64>,
    /// DLT: ids to write and the payload split size.
    pub ecu: Option<String>,
    pub app_id: Option<String>,
    pub ctx_id: Option<String>,
    pub session_id: Option<u32>,
    pub dlt_payload_max: Option<usize>,
    /// DLT (and KPI lines): end a split KPI message with libdlt's truncated
    /// copy of the dataset that did not fit, as libdlt ≥ 2.18.4 does.
    pub dlt_truncated_tails: bool,
    /// KPI text: "bare" dataset lines or "dlt" (`dlt-convert -a` lines);
    /// default: dlt when the source has absolute time, else bare.
    pub kpi_style: Option<String>,
    /// LTT: block size of the tracefiles (default: the source's, else 100000).
    pub ltt_block_size: Option<u64>,
    /// LTT: no `polytrace` self-description (a plain trace of the era; a
    /// non-LTT source then does not come back exactly).
    pub ltt_plain: bool,
    /// CSV: counters as rates per second instead of raw values.
    pub rate: bool,
    /// CSV: a second header line with each column's units.
    pub units_row: bool,
    /// CSV: field delimiter (default `,`).
    pub delimiter: Option<u8>,
    /// CSV: keep only columns matching one of these globs (`*`, `?`).
    pub columns: Vec<String>,
    /// CSV: also write the events table (`OUT.events.csv`).
    pub events: bool,
    /// The input as the user gave it (Parquet's `source` column).
    pub source: Option<String>,
    /// Parquet: write into a Hive-partitioned dataset (`convert DIR`).
    pub dataset: bool,
    /// CSV: the `--metric` filters in the order given: columns follow it.
    pub metric_order: Vec<String>,
    /// `--extract GLOB=REGEX`: values from message text as samples.
    pub extract: Vec<Extract>,
}

/// One `--extract GLOB=REGEX`: the named groups of REGEX, matched on the
/// text of the messages whose `category.name` (DLT: `APID.CTID`) matches
/// GLOB, become samples of `category.name.group`.
#[derive(Debug, Clone)]
pub struct Extract {
    /// As given.
    pub spec: String,
    pub glob: Glob,
    pub re: regex::Regex,
}

impl Extract {
    /// `GLOB=REGEX` (the glob ends at the first `=`); the regular
    /// expression must compile and name at least one group.
    pub fn parse(s: &str) -> Result<Extract, String> {
        let Some((glob, re)) = s.split_once('=') else {
            return Err(format!(
                "bad --extract {s:?}: want GLOB=REGEX, e.g. 'MON.CPUS=usage (?P<cpu>[0-9.]+)%'"
            ));
        };
        if glob.is_empty() {
            return Err(format!("bad --extract {s:?}: the GLOB before `=` is empty"));
        }
        // The regex crate's message shows the expression with a caret
        // under the position of the error.
        let re =
            regex::Regex::new(re).map_err(|e| format!("bad --extract regular expression:\n{e}"))?;
        if re.capture_names().flatten().next().is_none() {
            return Err(format!(
                "bad --extract {s:?}: the regular expression has no named group (?P<name>...) to take a value from"
            ));
        }
        Ok(Extract {
            spec: s.to_string(),
            glob: Glob::new(glob),
            re,
        })
    }
}

/// Options for listings.
#[derive(Debug, Clone, Default)]
pub struct DumpOptions {
    /// Timeline: number of entries (Snabb's `max`), newest-first listing.
    pub max: Option<u64>,
    pub newest_first: bool,
    /// Timeline: with `newest_first`, also print the rows Snabb's 7629b0f6b
    /// dump prints for unwritten slots (byte-for-byte compatibility).
    pub unwritten_slots: bool,
    /// LTT: leave out block_start/block_end/heartbeat framing events.
    pub no_framing: bool,
    /// PCP: `values` style (one line per value).
    pub values: bool,
    /// DLT: headers only, as `dlt-convert -s`.
    pub headers_only: bool,
    /// `--begin/--end` as given; each listing resolves them against its
    /// trace (or refuses them, naming why).
    pub window: TimeWindow,
    /// `--event/--metric/--instance/--cpu` and their exclusions.
    pub select: Selection,
}
