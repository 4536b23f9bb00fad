//! The CLI's shared option groups, defined once and flattened into each verb.

use crate::model::select::Grep;
use crate::model::FormatId;
use crate::model::{CpuList, Glob, Level, MessageSelect, Selection, TimeSpec, TimeWindow};
use crate::options::{DumpOptions, ReadOptions, WriteOptions};
use clap::Args;
use std::path::PathBuf;

pub fn parse_format(s: &str) -> Result<FormatId, String> {
    FormatId::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = FormatId::ALL.iter().map(|f| f.name()).collect();
        format!("unknown format {s:?} (one of: {})", names.join(", "))
    })
}

use crate::input::edit_distance;

/// The registered format names a mistyped one may mean: close by edit
/// distance, containing it (`json` → `chrome-json`) or named in the
/// format's description (`perfetto` → the format Perfetto opens).
pub fn did_you_mean(
    typed: &str,
    candidates: &[&'static dyn crate::formats::Format],
) -> Vec<&'static str> {
    let t = typed.to_ascii_lowercase();
    if t.len() < 2 {
        return Vec::new();
    }
    let mut out: Vec<(usize, &'static str)> = Vec::new();
    for f in candidates {
        let name = f.id().name();
        let d = edit_distance(&t, name);
        let desc = f.describe().to_ascii_lowercase();
        let in_desc = t.len() >= 3
            && desc
                .split(|c: char| !c.is_ascii_alphanumeric())
                .any(|w| w == t);
        if d <= 2.max(name.len() / 3) || (t.len() >= 3 && name.contains(&t)) || in_desc {
            out.push((d, name));
        }
    }
    out.sort();
    out.into_iter().map(|(_, n)| n).collect()
}

/// A `--from`/`--to` value: a registered format the build reads (writes),
/// or an error listing them and suggesting the nearest.
#[derive(Clone)]
pub struct FormatParser {
    write: bool,
}

impl FormatParser {
    fn candidates(&self) -> Vec<&'static dyn crate::formats::Format> {
        crate::formats::all()
            .into_iter()
            .filter(|f| {
                if self.write {
                    f.caps().write
                } else {
                    f.caps().read
                }
            })
            .collect()
    }
}

impl clap::builder::TypedValueParser for FormatParser {
    type Value = FormatId;
    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<FormatId, clap::Error> {
        let s = value.to_string_lossy();
        let c = self.candidates();
        if let Some(f) = c.iter().find(|f| f.id().name() == s) {
            return Ok(f.id());
        }
        let opt = arg
            .and_then(|a| a.get_long())
            .map_or("--to".to_string(), |l| format!("--{l}"));
        let names: Vec<&str> = c.iter().map(|f| f.id().name()).collect();
        let mut msg = format!("{opt} {s}: no such format");
        let near = did_you_mean(&s, &c);
        if !near.is_empty() {
            msg += &format!(": did you mean {}?", near.join(" or "));
        }
        msg += &format!(
            " ({}: {})",
            if self.write { "writable" } else { "readable" },
            names.join(", ")
        );
        // Say why a name of the other direction is not offered.
        if let Some(f) = FormatId::from_name(&s) {
            if self.write {
                msg += &format!("; {f} is not written by this build");
            } else {
                msg += &format!("; {f} is export only: polytrace writes it and does not read it");
            }
        }
        Err(
            clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{msg}\n"))
                .with_cmd(cmd),
        )
    }
    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        let names: Vec<clap::builder::PossibleValue> = self
            .candidates()
            .into_iter()
            .map(|f| clap::builder::PossibleValue::new(f.id().name()))
            .collect();
        Some(Box::new(names.into_iter()))
    }
}

/// `--tsc-hz`: `2.4GHz`, `2400MHz`, `2400000kHz`, `2.4e9`, `2400000000`.
pub fn parse_hz(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (num, mult) = if let Some(n) = lower.strip_suffix("ghz") {
        (n, 1e9)
    } else if let Some(n) = lower.strip_suffix("mhz") {
        (n, 1e6)
    } else if let Some(n) = lower.strip_suffix("khz") {
        (n, 1e3)
    } else if let Some(n) = lower.strip_suffix("hz") {
        (n, 1.0)
    } else {
        (lower.as_str(), 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v * mult >= 1.0 => Ok(v * mult),
        _ => Err(format!("bad frequency {s:?} (e.g. 2.4GHz, 2400MHz, 2.4e9)")),
    }
}

fn parse_time(s: &str) -> Result<TimeSpec, String> {
    TimeSpec::parse(s)
}

fn parse_abs_time(s: &str) -> Result<crate::model::Timestamp, String> {
    TimeSpec::parse_absolute(s)
}

pub fn parse_size(s: &str) -> Result<u64, String> {
    let (num, mult) = match s.trim_end_matches(['b', 'B']) {
        x if x.ends_with(['k', 'K']) => (&x[..x.len() - 1], 1u64 << 10),
        x if x.ends_with(['m', 'M']) => (&x[..x.len() - 1], 1 << 20),
        x if x.ends_with(['g', 'G']) => (&x[..x.len() - 1], 1 << 30),
        x => (x, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("bad size {s:?} (e.g. 1G, 64M, 4096)"))
}

/// `--from` values: the formats this build reads (listed in `--help`,
/// offered by shell completion).
pub fn readable_format() -> FormatParser {
    FormatParser { write: false }
}

/// `--to` values: the formats this build writes.
pub fn writable_format() -> FormatParser {
    FormatParser { write: true }
}

/// A CSV delimiter: one ASCII character other than a quote or line end
/// (`tab` or `\t` for TAB).
fn parse_delimiter(s: &str) -> Result<u8, String> {
    let b = match s {
        "tab" | "\\t" | "\t" => b'\t',
        _ if s.len() == 1 && s.is_ascii() => s.as_bytes()[0],
        _ => {
            return Err(format!(
                "bad delimiter {s:?}: one ASCII character (or `tab`)"
            ))
        }
    };
    if matches!(b, b'"' | b'\r' | b'\n') {
        return Err(format!(
            "bad delimiter {s:?}: a quote or line end cannot separate fields"
        ));
    }
    Ok(b)
}

/// Input selection and reading behaviour.
#[derive(Args, Debug, Clone, Default)]
pub struct InputArgs {
    /// Input format (default: detected from the content).
    #[arg(long, value_parser = readable_format(), value_name = "FORMAT")]
    pub from: Option<FormatId>,
    /// Keep only data at or after this time: RFC 3339 (no zone = local
    /// time, as TZ says), epoch seconds, +DURATION from the start,
    /// -DURATION from the end, or @HH:MM[:SS] on the first day.
    #[arg(long, value_parser = parse_time, allow_hyphen_values = true, value_name = "TIME")]
    pub begin: Option<TimeSpec>,
    /// Keep only data at or before this time (same forms as --begin).
    #[arg(long, value_parser = parse_time, allow_hyphen_values = true, value_name = "TIME")]
    pub end: Option<TimeSpec>,
    /// On damaged input keep what can be read (the records before the damage;
    /// DLT: also those after it, from the next storage header) and exit 1.
    #[arg(long)]
    pub salvage: bool,
    /// Place the first data item at this time (RFC 3339 or epoch seconds):
    /// gives a source with relative time or cycles (with --tsc-hz) the
    /// dates a PCP archive or DLT file needs.
    #[arg(long, value_parser = parse_abs_time, value_name = "TIME")]
    pub time_origin: Option<crate::model::Timestamp>,
    /// The format read options, parsed from [`FormatReadArgs`] (declared
    /// after the output options so that `--help` lists the formats' headings
    /// after Input, Time window, Filters and Output) and moved in here.
    #[arg(skip)]
    pub fmt: FormatReadArgs,
    /// The declared options given on the command line (see `optspec`).
    #[arg(skip)]
    pub given: Vec<&'static str>,
    /// The verb and target whose options the opened inputs are checked for.
    #[arg(skip)]
    pub check: Option<(super::optspec::Verb, super::optspec::Target)>,
    /// The message filters, moved in from [`FilterArgs`] (the reader
    /// applies them, message by message).
    #[arg(skip)]
    pub messages: MessageSelect,
}

/// How some formats are read (under each format's heading in `--help`).
#[derive(Args, Debug, Clone, Default)]
pub struct FormatReadArgs {
    /// Application id of KPI messages (default PROC).
    #[arg(long, value_name = "APID")]
    pub kpi_app: Option<String>,
    /// Context id of KPI messages (default PROC).
    #[arg(long, value_name = "CTID")]
    pub kpi_ctx: Option<String>,
    /// TSC frequency, to place cycles (timeline) on a time axis
    /// (2.4GHz, 2400MHz, 2.4e9).
    #[arg(long, value_parser = parse_hz, value_name = "HZ")]
    pub tsc_hz: Option<f64>,
    /// Epoch time of TSC 0 (RFC 3339 or epoch seconds).
    #[arg(long, value_parser = parse_abs_time, value_name = "TIME")]
    pub tsc_anchor: Option<crate::model::Timestamp>,
    /// Page size for RSS pages (default 4096).
    #[arg(long, value_name = "BYTES")]
    pub page_size: Option<u64>,
}

impl InputArgs {
    pub fn window(&self) -> TimeWindow {
        TimeWindow::new(self.begin, self.end)
    }
    pub fn read_options(&self) -> ReadOptions {
        ReadOptions {
            salvage: self.salvage,
            kpi_app: self.fmt.kpi_app.clone(),
            kpi_ctx: self.fmt.kpi_ctx.clone(),
            tsc_hz: self.fmt.tsc_hz,
            tsc_anchor: self.fmt.tsc_anchor,
            page_size: self.fmt.page_size,
            messages: self.messages.clone(),
        }
    }
}

/// Output selection and writing behaviour.
#[derive(Args, Debug, Clone, Default)]
pub struct OutputArgs {
    /// Output path (`-` = stdout for text formats; missing folders are created).
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<PathBuf>,
    /// Output format (default: from OUT's extension: .kpi, .dlt, .mmv, .ltt,
    /// .timeline, …; a PCP archive needs --to pcp).
    #[arg(long, value_parser = writable_format(), value_name = "FORMAT")]
    pub to: Option<FormatId>,
    /// Replace an existing output (never an input).
    #[arg(long)]
    pub force: bool,
    /// Fail, writing nothing, if the target format would drop or degrade anything.
    #[arg(long)]
    pub strict: bool,
    /// Archive version to write (2 or 3).
    #[arg(long, value_name = "2|3")]
    pub pcp_version: Option<u32>,
    /// Start a new volume after this many bytes (e.g. 64M).
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub volume_size: Option<u64>,
    /// File version to write (1, 2 or 3; default: the smallest that fits).
    #[arg(long, value_name = "1|2|3")]
    pub mmv_version: Option<u32>,
    /// Take the snapshot at this time instead of the last sample
    /// (any --begin form: +2s, -1s, @03:45, RFC 3339, epoch seconds).
    #[arg(long, value_parser = parse_time, allow_hyphen_values = true, value_name = "TIME")]
    pub at: Option<TimeSpec>,
    /// Write numbered outputs (OUT.000, OUT.001, …) each covering this much
    /// time (e.g. 2s, 1m) or holding about this much data (e.g. 64M, 100k);
    /// each is a complete file of the target format; `lifecycle`: a new
    /// file where a DLT ECU restarts.
    #[arg(long, value_parser = parse_split, value_name = "DURATION|SIZE|lifecycle")]
    pub split: Option<crate::split::SplitBy>,
    /// Layout to write (A2 or M3).
    #[arg(long, value_name = "A2|M3")]
    pub timeline_version: Option<String>,
    /// Ring size in entries (A2: a power of two; default: sized to the data).
    #[arg(long, value_name = "N")]
    pub entries: Option<u64>,
    /// Write this ECU id into every message (default: the source's, else
    /// ECU1). Not a filter: --ecu selects input messages.
    #[arg(long, value_name = "ECU")]
    pub out_ecu: Option<String>,
    /// Write this application id into every message (default: PROC for
    /// KPI, else from the category). Not a filter: --app selects.
    #[arg(long, visible_alias = "app-id", value_name = "APID")]
    pub out_app_id: Option<String>,
    /// Write this context id into every message (default: PROC for KPI,
    /// else from the name). Not a filter: --ctx selects.
    #[arg(long, visible_alias = "ctx-id", value_name = "CTID")]
    pub out_ctx_id: Option<String>,
    /// Session id written into every message (default: the source's,
    /// else polytrace's PID).
    #[arg(long, visible_alias = "session-id", value_name = "ID")]
    pub out_session_id: Option<u32>,
    /// Maximum payload bytes per message (libdlt default 1390).
    #[arg(long, value_name = "BYTES")]
    pub dlt_payload_max: Option<usize>,
    /// End each split KPI message with libdlt's truncated copy of the next
    /// dataset (`... <<Message truncated, too long>>`), as libdlt ≥ 2.18.4 does
    /// (also for KPI lines).
    #[arg(long)]
    pub dlt_truncated_tails: bool,
    /// Write bare dataset lines or dlt-convert -a lines (default: dlt when times are absolute).
    #[arg(long, value_parser = ["bare", "dlt"])]
    pub kpi_style: Option<String>,
    /// Block size of the tracefiles (default: the source's, else 100000).
    #[arg(long, value_name = "BYTES")]
    pub ltt_block_size: Option<u64>,
    /// Write a plain trace, without the polytrace self-description that
    /// lets a non-LTT source come back exactly.
    #[arg(long)]
    pub ltt_plain: bool,
    /// Counters as rates per second (default: raw values).
    #[arg(long)]
    pub rate: bool,
    /// A second header line with each column's units.
    #[arg(long)]
    pub units_row: bool,
    /// Field delimiter, one character or `tab` (default ,).
    #[arg(long, value_parser = parse_delimiter, value_name = "CHAR")]
    pub delimiter: Option<u8>,
    /// Only the columns matching one of these globs (`*`, `?`), against
    /// `metric` or `metric[instance]`; columns follow the patterns' order.
    #[arg(long, value_delimiter = ',', value_name = "GLOB,...")]
    pub columns: Vec<String>,
    /// Also write the events table (one row per event) to OUT.events.csv.
    #[arg(long)]
    pub events: bool,
    /// Values from message text: the named groups of REGEX, matched on the
    /// text of each message whose APID.CTID (another source's event type:
    /// category.name) matches GLOB, become samples of APID.CTID.GROUP
    /// (e.g. 'MON.CPUS=CPU usage in interval : (?P<cpu_usage>[0-9.]+)%').
    /// Repeatable.
    #[arg(long, value_parser = parse_extract, value_name = "GLOB=REGEX")]
    pub extract: Vec<crate::options::Extract>,
}

/// `--extract GLOB=REGEX`.
fn parse_extract(s: &str) -> Result<crate::options::Extract, String> {
    crate::options::Extract::parse(s)
}

impl OutputArgs {
    pub fn write_options(&self) -> WriteOptions {
        WriteOptions {
            strict: self.strict,
            pcp_version: self.pcp_version,
            volume_size: self.volume_size,
            mmv_version: self.mmv_version,
            // Relative forms are resolved against the input by the verb.
            at: match self.at {
                Some(TimeSpec::At(t)) => Some(t),
                _ => None,
            },
            timeline_version: self.timeline_version.clone(),
            entries: self.entries,
            ecu: self.out_ecu.clone(),
            app_id: self.out_app_id.clone(),
            ctx_id: self.out_ctx_id.clone(),
            session_id: self.out_session_id,
            dlt_payload_max: self.dlt_payload_max,
            dlt_truncated_tails: self.dlt_truncated_tails,
            kpi_style: self.kpi_style.clone(),
            ltt_block_size: self.ltt_block_size,
            ltt_plain: self.ltt_plain,
            rate: self.rate,
            units_row: self.units_row,
            delimiter: self.delimiter,
            columns: self.columns.clone(),
            events: self.events,
            source: None,
            dataset: false,
            metric_order: Vec::new(),
            extract: self.extract.clone(),
        }
    }
}

/// `--split`: a duration (`2s`, `1m`, `500ms`) or a size (`64M`, `100k`, `1G`, `4096B`).
pub fn parse_split(s: &str) -> Result<crate::split::SplitBy, String> {
    use crate::split::SplitBy;
    let bad = || {
        format!("bad --split {s:?}: want a duration (2s, 1m, 500ms), a size (64M, 100k, 4096B) or lifecycle")
    };
    let unit: String = s
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    let unit: String = unit.chars().rev().collect();
    if s == "lifecycle" {
        return Ok(SplitBy::Restart);
    }
    let v = match unit.as_str() {
        "ns" | "us" | "ms" | "s" | "m" | "min" | "h" => {
            SplitBy::Duration(crate::model::time::parse_duration(s).map_err(|_| bad())?)
        }
        "k" | "K" | "M" | "G" | "B" | "kB" | "KB" | "MB" | "GB" | "KiB" | "MiB" | "GiB" => {
            let t = s.trim_end_matches("iB").trim_end_matches('i');
            SplitBy::Size(parse_size(t).map_err(|_| bad())?)
        }
        _ => return Err(bad()),
    };
    match v {
        SplitBy::Duration(0) | SplitBy::Size(0) => Err(bad()),
        v => Ok(v),
    }
}

/// Which events, metrics, instances and CPUs to keep (`convert`, `dump`,
/// `info`). Patterns are shell globs; each option may be repeated.
#[derive(Args, Debug, Clone, Default)]
pub struct FilterArgs {
    /// Keep only events whose `category.name` matches (LTT: facility.event).
    #[arg(long = "event", value_name = "GLOB")]
    pub event: Vec<String>,
    /// Leave out events whose `category.name` matches.
    #[arg(long = "exclude-event", value_name = "GLOB")]
    pub exclude_event: Vec<String>,
    /// Keep only metrics with a matching name; as with pmdumplog, a name
    /// also selects everything below it (`kernel.all`).
    #[arg(long = "metric", value_name = "GLOB")]
    pub metric: Vec<String>,
    /// Leave out matching metrics (and everything below them).
    #[arg(long = "exclude-metric", value_name = "GLOB")]
    pub exclude_metric: Vec<String>,
    /// Keep only metric values of matching instances (name, its first
    /// word, or id).
    #[arg(long = "instance", value_name = "GLOB")]
    pub instance: Vec<String>,
    /// Leave out values of matching instances.
    #[arg(long = "exclude-instance", value_name = "GLOB")]
    pub exclude_instance: Vec<String>,
    /// Keep only events on these CPUs (e.g. 0,2-3).
    #[arg(long, value_parser = CpuList::parse, value_name = "LIST")]
    pub cpu: Option<CpuList>,
    /// Leave out events on these CPUs.
    #[arg(long = "exclude-cpu", value_parser = CpuList::parse, value_name = "LIST")]
    pub exclude_cpu: Option<CpuList>,
    #[command(flatten)]
    pub messages: MessageArgs,
}

/// Which DLT messages to keep (docs/dlt.md, "Filters"): the reader and the
/// native listing apply them to each message before anything else.
#[derive(Args, Debug, Clone, Default)]
pub struct MessageArgs {
    /// DLT: keep only messages of these ECUs (globs, comma list or repeated).
    #[arg(long, value_delimiter = ',', value_name = "GLOB,...")]
    pub ecu: Vec<String>,
    /// DLT: keep only messages of these application ids (APID globs).
    #[arg(long, value_delimiter = ',', value_name = "GLOB,...")]
    pub app: Vec<String>,
    /// DLT: keep only messages of these context ids (CTID globs).
    #[arg(long, value_delimiter = ',', value_name = "GLOB,...")]
    pub ctx: Vec<String>,
    /// DLT: keep only log messages at this level or above (fatal, error,
    /// warn, info, debug, verbose).
    #[arg(long, value_parser = Level::parse, value_name = "LEVEL")]
    pub level: Option<Level>,
    /// DLT: keep only messages whose payload text (as dlt-convert -a shows
    /// it) matches this regular expression.
    #[arg(long, value_parser = Grep::parse, value_name = "REGEX")]
    pub grep: Option<Grep>,
    /// DLT: keep only the messages of lifecycle N (as `info` numbers them).
    #[arg(long, value_name = "N")]
    pub lifecycle: Option<u32>,
}

impl MessageArgs {
    pub fn select(&self) -> MessageSelect {
        let g = |v: &[String]| v.iter().map(|p| Glob::new(p.trim())).collect();
        MessageSelect {
            ecus: g(&self.ecu),
            apps: g(&self.app),
            ctxs: g(&self.ctx),
            level: self.level,
            grep: self.grep.clone(),
            lifecycle: self.lifecycle,
        }
    }
}

impl FilterArgs {
    pub fn selection(&self) -> Selection {
        let g = |v: &[String]| v.iter().map(|p| Glob::new(p)).collect();
        Selection {
            events: g(&self.event),
            exclude_events: g(&self.exclude_event),
            metrics: g(&self.metric),
            exclude_metrics: g(&self.exclude_metric),
            instances: g(&self.instance),
            exclude_instances: g(&self.exclude_instance),
            cpus: self.cpu.clone(),
            exclude_cpus: self.exclude_cpu.clone(),
        }
    }
}

/// Several inputs into one output.
#[derive(Args, Debug, Clone, Default)]
pub struct MergeArgs {
    /// Merge every trace in the input directory into one output (instead
    /// of converting each into an output tree).
    #[arg(long)]
    pub merge: bool,
    /// Source name of each input, in order (default: its file name); merged
    /// items carry it in their `source` extra.
    #[arg(long = "label", value_name = "NAME")]
    pub label: Vec<String>,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Style {
    /// The format's own reference listing (pmdumplog, mmvdump, dlt-convert -a, …).
    #[default]
    Native,
    /// The common listing, the same for every format.
    Common,
    /// PCP: one line per value (`EPOCH.NNNNNNNNN pmid inst type value`).
    Values,
}

/// Listing options.
#[derive(Args, Debug, Clone, Default)]
pub struct DumpArgs {
    /// Listing style.
    #[arg(long, value_enum, default_value_t = Style::Native)]
    pub style: Style,
    /// List at most N entries (as Snabb's dump(file, N)).
    #[arg(long, value_name = "N")]
    pub max: Option<u64>,
    /// Newest-first `-cycles` listing of the older Snabb dump.
    #[arg(long)]
    pub newest_first: bool,
    /// With --newest-first, also print the rows Snabb's old dump
    /// printed for unwritten slots.
    #[arg(long)]
    pub unwritten_slots: bool,
    /// Leave out block_start, block_end and heartbeat events (with
    /// `--style common`: any format's framing events and their types).
    #[arg(long)]
    pub no_framing: bool,
    /// Header lines only, as `dlt-convert -s`.
    #[arg(long)]
    pub headers_only: bool,
}

impl DumpArgs {
    pub fn dump_options(&self) -> DumpOptions {
        DumpOptions {
            max: self.max,
            newest_first: self.newest_first,
            unwritten_slots: self.unwritten_slots,
            no_framing: self.no_framing,
            values: self.style == Style::Values,
            headers_only: self.headers_only,
            ..Default::default()
        }
    }
}

/// What `check` reads with: only the options that change a validation.
#[derive(Args, Debug, Clone, Default)]
pub struct CheckInputArgs {
    /// Input format (default: detected from the content).
    #[arg(long, value_parser = readable_format(), value_name = "FORMAT")]
    pub from: Option<FormatId>,
    /// On damage, report it and go on where the format allows (exit 1)
    /// instead of stopping at the first problem (exit 2).
    #[arg(long)]
    pub salvage: bool,
    /// Application id of KPI messages (default PROC).
    #[arg(long, value_name = "APID")]
    pub kpi_app: Option<String>,
    /// Context id of KPI messages (default PROC).
    #[arg(long, value_name = "CTID")]
    pub kpi_ctx: Option<String>,
    #[command(flatten)]
    pub messages: MessageArgs,
}

impl CheckInputArgs {
    pub fn read_options(&self) -> ReadOptions {
        ReadOptions {
            salvage: self.salvage,
            kpi_app: self.kpi_app.clone(),
            kpi_ctx: self.kpi_ctx.clone(),
            messages: self.messages.select(),
            ..ReadOptions::default()
        }
    }
}

/// Quietness.
#[derive(Args, Debug, Clone, Default)]
pub struct GlobalArgs {
    /// Print nothing but errors: no progress, no warnings, no loss report.
    #[arg(short, long, global = true)]
    pub quiet: bool,
}
