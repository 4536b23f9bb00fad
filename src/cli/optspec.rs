//! Which option applies where: the one declaration that drives the check
//! that refuses an option given where it would change nothing (exit 2,
//! naming what it applies to), the headings of `--help`, docs/options.md
//! and the option × verb × source × target test (tests/options.rs).

use crate::model::{FormatId, TimeBase};

/// The verbs whose options are declared here (`check` has its own few).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Record,
    Convert,
    Dump,
    Info,
}

impl Verb {
    pub const ALL: [Verb; 4] = [Verb::Record, Verb::Convert, Verb::Dump, Verb::Info];
    pub fn name(self) -> &'static str {
        match self {
            Verb::Record => "record",
            Verb::Convert => "convert",
            Verb::Dump => "dump",
            Verb::Info => "info",
        }
    }
}

/// What a run produces: a target format (`convert`, `record`), a listing
/// style (`dump`) or a summary (`info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    To(FormatId),
    /// `dump`: the format's own listing (`--style native`, `values`).
    Native,
    /// `dump --style common`.
    Common,
    /// `info`.
    Summary,
    /// `info --stats`.
    Stats,
}

impl Target {
    pub fn describe(self) -> String {
        match self {
            Target::To(f) => format!("--to {f}"),
            Target::Native => "dump's native listing".into(),
            Target::Common => "dump --style common".into(),
            Target::Summary => "info without --stats".into(),
            Target::Stats => "info --stats".into(),
        }
    }
}

/// Which inputs an option applies to.
#[derive(Debug, Clone, Copy)]
pub enum Src {
    Any,
    /// Inputs of these formats (the file's format or the stream it carries).
    Formats(&'static [FormatId]),
    /// Inputs without dates: relative time or cycles.
    Undated,
    /// Inputs timed by a cycle counter only.
    Cycles,
}

/// Which targets an option applies to.
#[derive(Debug, Clone, Copy)]
pub enum Tgt {
    Any,
    Only(&'static [Target]),
}

/// One case where an option applies: these verbs, sources and targets
/// (and, if `with` names one, only together with that option).
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub verbs: &'static [Verb],
    pub sources: Src,
    pub targets: Tgt,
    pub with: Option<&'static str>,
}

/// One option: its long name, the `--help` heading it is listed under,
/// what it applies to in words (the refusal says it) and the cases.
#[derive(Debug, Clone, Copy)]
pub struct OptSpec {
    pub long: &'static str,
    pub heading: &'static str,
    pub applies: &'static str,
    pub rules: &'static [Rule],
}

use FormatId::{ChromeJson, Csv, Ctf, Dlt, Kpi, Ltt, Mmv, Parquet, Pcp, Perfetto, Timeline};
use Verb::{Convert, Dump, Info, Record};

const RC: &[Verb] = &[Record, Convert];
const CDI: &[Verb] = &[Convert, Dump, Info];

const fn r(verbs: &'static [Verb], sources: Src, targets: Tgt) -> Rule {
    Rule {
        verbs,
        sources,
        targets,
        with: None,
    }
}
const fn to(t: &'static [Target]) -> Tgt {
    Tgt::Only(t)
}
const fn opt(
    long: &'static str,
    heading: &'static str,
    applies: &'static str,
    rules: &'static [Rule],
) -> OptSpec {
    OptSpec {
        long,
        heading,
        applies,
        rules,
    }
}

const ANY_CDI: &[Rule] = &[r(CDI, Src::Any, Tgt::Any)];
const ANY_RC: &[Rule] = &[r(RC, Src::Any, Tgt::Any)];
const ANY_CONVERT: &[Rule] = &[r(&[Convert], Src::Any, Tgt::Any)];
const ANY_RECORD: &[Rule] = &[r(&[Record], Src::Any, Tgt::Any)];

/// Formats whose streams can hold events / metric values.
const EVENT_SOURCES: Src = Src::Formats(&[Kpi, Dlt, Pcp, Ltt, Timeline]);
const METRIC_SOURCES: Src = Src::Formats(&[Kpi, Dlt, Mmv, Pcp]);
/// Targets that keep events (CSV: with --events) and listings of them.
const EVENT_TARGETS: Tgt = to(&EVENT_TARGET_LIST);
const EVENT_TARGET_LIST: [Target; 14] = targets(
    [
        Kpi, Dlt, Mmv, Pcp, Ltt, Timeline, ChromeJson, Ctf, Parquet, Perfetto,
    ],
    &[
        Target::Native,
        Target::Common,
        Target::Summary,
        Target::Stats,
    ],
);
/// An event filter's rules: targets that keep events, and CSV's events
/// table (with --events).
const fn event_filter(sources: Src) -> [Rule; 2] {
    [
        r(CDI, sources, EVENT_TARGETS),
        Rule {
            verbs: &[Convert],
            sources,
            targets: to(&[Target::To(Csv)]),
            with: Some("events"),
        },
    ]
}
const EVENT_FILTER: &[Rule] = &event_filter(EVENT_SOURCES);
const METRIC_FILTER: &[Rule] = &[r(CDI, METRIC_SOURCES, Tgt::Any)];
/// DLT message filters: every verb and target, the native listing included.
const MSG_FILTER: &[Rule] = &[r(CDI, Src::Formats(&[Dlt]), Tgt::Any)];
const MSG_APPLIES: &str =
    "dlt inputs, every verb and target (which messages are read; --out-ecu/--out-app-id/--out-ctx-id set the ids written into --to dlt)";
/// Events with a CPU: LTT tracefiles and timeline cores.
const CPU_SOURCES: Src = Src::Formats(&[Ltt, Timeline]);
const CPU_FILTER: &[Rule] = &event_filter(CPU_SOURCES);
/// Every target and listing but the native one (which shows the file as
/// it is) and a timeline (which keeps cycles as cycles).
const PLACED: Tgt = to(&PLACED_LIST);
const PLACED_LIST: [Target; 13] = targets(
    [
        Kpi, Dlt, Mmv, Pcp, Ltt, ChromeJson, Csv, Ctf, Parquet, Perfetto,
    ],
    &LISTINGS,
);
const NOT_NATIVE: Tgt = to(&NOT_NATIVE_LIST);
const NOT_NATIVE_LIST: [Target; 14] = targets(
    [
        Kpi, Dlt, Mmv, Pcp, Ltt, Timeline, ChromeJson, Csv, Ctf, Parquet, Perfetto,
    ],
    &LISTINGS,
);
/// The listings but the native one.
const LISTINGS: [Target; 3] = [Target::Common, Target::Summary, Target::Stats];

/// `--to` targets of these formats.
const fn to_formats<const N: usize>(f: [FormatId; N]) -> [Target; N] {
    targets(f, &[])
}
/// `--to` targets of `formats`, then the `listings`: `M` targets in all
/// (checked when compiled).
const fn targets<const N: usize, const M: usize>(
    formats: [FormatId; N],
    listings: &[Target],
) -> [Target; M] {
    assert!(
        N + listings.len() == M,
        "the target count is N formats + listings"
    );
    let mut t = [Target::Native; M];
    let mut i = 0;
    while i < M {
        t[i] = if i < N {
            Target::To(formats[i])
        } else {
            listings[i - N]
        };
        i += 1;
    }
    t
}
/// Targets that hold samples of any metric (KPI lines hold process data only).
const SAMPLE_FORMATS: [Target; 10] = to_formats([
    Dlt, Mmv, Pcp, Ltt, Timeline, ChromeJson, Csv, Ctf, Parquet, Perfetto,
]);
const SAMPLE_TARGETS: Tgt = to(&SAMPLE_FORMATS);

const fn target(f: FormatId) -> Tgt {
    match f {
        Kpi => to(&[Target::To(Kpi)]),
        Dlt => to(&[Target::To(Dlt)]),
        Mmv => to(&[Target::To(Mmv)]),
        Pcp => to(&[Target::To(Pcp)]),
        Ltt => to(&[Target::To(Ltt)]),
        Timeline => to(&[Target::To(Timeline)]),
        ChromeJson => to(&[Target::To(ChromeJson)]),
        Csv => to(&[Target::To(Csv)]),
        Ctf => to(&[Target::To(Ctf)]),
        Parquet => to(&[Target::To(Parquet)]),
        Perfetto => to(&[Target::To(Perfetto)]),
    }
}
const fn write(f: FormatId) -> [Rule; 1] {
    [r(RC, Src::Any, target(f))]
}
const PCP_W: &[Rule] = &write(Pcp);
const MMV_W: &[Rule] = &write(Mmv);
const TL_W: &[Rule] = &write(Timeline);
const LTT_W: &[Rule] = &write(Ltt);
const CSV_W: &[Rule] = &write(Csv);
/// DLT ids: DLT files and the `dlt-convert -a` lines of KPI text.
const DLT_IDS: &[Rule] = &[r(RC, Src::Any, to(&[Target::To(Dlt), Target::To(Kpi)]))];
/// How KPI datasets are split into messages: KPI data into DLT, any
/// process data into KPI lines.
const KPI_SPLIT: &[Rule] = &[
    r(RC, Src::Formats(&[Kpi, Dlt]), to(&[Target::To(Dlt)])),
    r(RC, Src::Any, to(&[Target::To(Kpi)])),
];
const KPI_W: &[Rule] = &write(Kpi);
const KPI_IDS: &[Rule] = &[
    r(CDI, Src::Formats(&[Kpi]), Tgt::Any),
    r(CDI, Src::Formats(&[Dlt]), NOT_NATIVE),
];
const RATE: &[Rule] = &[
    r(
        &[Convert],
        METRIC_SOURCES,
        to(&[
            Target::To(Csv),
            Target::To(ChromeJson),
            Target::To(Ctf),
            Target::To(Perfetto),
        ]),
    ),
    // A recording into CSV: the writer computes the rates.
    r(&[Record], Src::Any, target(Csv)),
];

/// Every option of `record`, `convert`, `dump` and `info`, in `--help` order.
pub const OPTIONS: &[OptSpec] = &[
    opt("quiet", "Options", "every verb", &[r(&Verb::ALL, Src::Any, Tgt::Any)]),
    opt("from", "Input", "every input", ANY_CDI),
    opt("salvage", "Input", "every input", ANY_CDI),
    opt("begin", "Time window", "every input", ANY_CDI),
    opt("end", "Time window", "every input", ANY_CDI),
    opt(
        "time-origin",
        "Time window",
        "inputs with relative time or cycles (dated inputs keep their dates), not dump's native listing",
        &[r(CDI, Src::Undated, NOT_NATIVE)],
    ),
    opt("event", "Filters", "inputs with events, into targets that keep them (--to csv: with --events)", EVENT_FILTER),
    opt("exclude-event", "Filters", "inputs with events, into targets that keep them (--to csv: with --events)", EVENT_FILTER),
    opt("metric", "Filters", "inputs with metrics (kpi, dlt, mmv, pcp)", METRIC_FILTER),
    opt("exclude-metric", "Filters", "inputs with metrics (kpi, dlt, mmv, pcp)", METRIC_FILTER),
    opt("instance", "Filters", "inputs with metrics (kpi, dlt, mmv, pcp)", METRIC_FILTER),
    opt("exclude-instance", "Filters", "inputs with metrics (kpi, dlt, mmv, pcp)", METRIC_FILTER),
    opt("cpu", "Filters", "inputs with events on CPUs (ltt, timeline), into targets that keep events (--to csv: with --events)", CPU_FILTER),
    opt("exclude-cpu", "Filters", "inputs with events on CPUs (ltt, timeline), into targets that keep events (--to csv: with --events)", CPU_FILTER),
    opt("ecu", "Filters", MSG_APPLIES, MSG_FILTER),
    opt("app", "Filters", MSG_APPLIES, MSG_FILTER),
    opt("ctx", "Filters", MSG_APPLIES, MSG_FILTER),
    opt("level", "Filters", MSG_APPLIES, MSG_FILTER),
    opt("grep", "Filters", MSG_APPLIES, MSG_FILTER),
    opt("lifecycle", "Filters", MSG_APPLIES, MSG_FILTER),
    opt("merge", "Merging", "convert", ANY_CONVERT),
    opt("label", "Merging", "convert with several inputs", ANY_CONVERT),
    opt("output", "Output", "convert and record", ANY_RC),
    opt("to", "Output", "convert and record", ANY_RC),
    opt("force", "Output", "convert and record", ANY_RC),
    opt("strict", "Output", "convert and record", ANY_RC),
    opt("split", "Output", "convert", ANY_CONVERT),
    opt("pcp-version", "PCP output (--to pcp)", "--to pcp", PCP_W),
    opt("volume-size", "PCP output (--to pcp)", "--to pcp", PCP_W),
    opt("mmv-version", "MMV output (--to mmv)", "--to mmv", MMV_W),
    opt("at", "MMV output (--to mmv)", "--to mmv", &[r(&[Convert], Src::Any, target(Mmv))]),
    opt("timeline-version", "Timeline output (--to timeline)", "--to timeline", TL_W),
    opt("entries", "Timeline output (--to timeline)", "--to timeline", TL_W),
    opt("out-ecu", "DLT output (--to dlt, --to kpi)", "--to dlt and --to kpi (dlt-convert -a lines): the ECU id written; --ecu selects input messages", DLT_IDS),
    opt("out-app-id", "DLT output (--to dlt, --to kpi)", "--to dlt and --to kpi (dlt-convert -a lines): the APID written; --app selects input messages", DLT_IDS),
    opt("out-ctx-id", "DLT output (--to dlt, --to kpi)", "--to dlt and --to kpi (dlt-convert -a lines): the CTID written; --ctx selects input messages", DLT_IDS),
    opt("out-session-id", "DLT output (--to dlt, --to kpi)", "--to dlt and --to kpi (dlt-convert -a lines)", DLT_IDS),
    opt("dlt-payload-max", "DLT output (--to dlt, --to kpi)", "KPI data into --to dlt, and --to kpi (dlt-convert -a lines)", KPI_SPLIT),
    opt("dlt-truncated-tails", "DLT output (--to dlt, --to kpi)", "KPI data into --to dlt, and --to kpi (dlt-convert -a lines)", KPI_SPLIT),
    opt("kpi-style", "KPI output (--to kpi)", "--to kpi", KPI_W),
    opt("ltt-block-size", "LTT output (--to ltt)", "--to ltt", LTT_W),
    opt(
        "ltt-plain",
        "LTT output (--to ltt)",
        "--to ltt from a stream that is not LTT (an LTT trace is written plain anyway)",
        &[r(RC, Src::Formats(&[Kpi, Dlt, Mmv, Pcp, Timeline]), target(Ltt))],
    ),
    opt("rate", "Counters (--to csv, chrome-json, ctf, perfetto)", "--to csv, chrome-json, ctf and perfetto, from inputs with metrics", RATE),
    opt("units-row", "CSV output (--to csv)", "--to csv", CSV_W),
    opt("delimiter", "CSV output (--to csv)", "--to csv", CSV_W),
    opt(
        "columns",
        "CSV output (--to csv)",
        "--to csv from inputs with metrics (the samples table's columns)",
        &[r(RC, METRIC_SOURCES, target(Csv))],
    ),
    opt("events", "CSV output (--to csv)", "--to csv", CSV_W),
    opt(
        "extract",
        "Values from text",
        "convert of inputs with text messages (dlt, kpi, ltt, timeline), into targets that hold samples (not --to kpi)",
        &[r(&[Convert], Src::Formats(&[Kpi, Dlt, Ltt, Timeline]), SAMPLE_TARGETS)],
    ),
    opt(
        "kpi-app",
        "DLT and KPI input",
        "kpi inputs, and dlt inputs other than in dump's native listing (which messages are KPI data)",
        KPI_IDS,
    ),
    opt(
        "kpi-ctx",
        "DLT and KPI input",
        "kpi inputs, and dlt inputs other than in dump's native listing (which messages are KPI data)",
        KPI_IDS,
    ),
    opt(
        "page-size",
        "DLT and KPI input",
        "KPI text inputs, into targets that keep the source's description (mmv, pcp, ltt, ctf, dump --style common)",
        &[r(
            CDI,
            Src::Formats(&[Kpi]),
            to(&[
                Target::To(Mmv),
                Target::To(Pcp),
                Target::To(Ltt),
                Target::To(Ctf),
                Target::Common,
            ]),
        )],
    ),
    opt(
        "tsc-hz",
        "Timeline input",
        "inputs timed in TSC cycles (timeline files), into targets other than a timeline (which keeps cycles)",
        &[r(CDI, Src::Cycles, PLACED)],
    ),
    opt(
        "tsc-anchor",
        "Timeline input",
        "inputs timed in TSC cycles (timeline files), into targets other than a timeline (which keeps cycles)",
        &[r(CDI, Src::Cycles, PLACED)],
    ),
    opt("style", "Listing", "dump", &[r(&[Dump], Src::Any, Tgt::Any)]),
    opt(
        "max",
        "Listing",
        "dump's native listing of a timeline file",
        &[r(&[Dump], Src::Formats(&[Timeline]), to(&[Target::Native]))],
    ),
    opt(
        "newest-first",
        "Listing",
        "dump's native listing of a timeline file",
        &[r(&[Dump], Src::Formats(&[Timeline]), to(&[Target::Native]))],
    ),
    opt(
        "unwritten-slots",
        "Listing",
        "dump --newest-first of a timeline file",
        &[Rule {
            verbs: &[Dump],
            sources: Src::Formats(&[Timeline]),
            targets: to(&[Target::Native]),
            with: Some("newest-first"),
        }],
    ),
    opt(
        "no-framing",
        "Listing",
        "dump of an LTT trace, or dump --style common of a DLT file",
        &[
            r(&[Dump], Src::Formats(&[Ltt]), Tgt::Any),
            r(&[Dump], Src::Formats(&[Dlt]), to(&[Target::Common])),
        ],
    ),
    opt(
        "headers-only",
        "Listing",
        "dump's native listing of a DLT file",
        &[r(&[Dump], Src::Formats(&[Dlt]), to(&[Target::Native]))],
    ),
    opt("stats", "Options", "info", &[r(&[Info], Src::Any, Tgt::Any)]),
    opt("json", "Options", "info", &[r(&[Info], Src::Any, Tgt::Any)]),
    opt("top", "Options", "info --stats", &[r(&[Info], Src::Any, to(&[Target::Stats]))]),
    opt("interval", "Recording", "record", ANY_RECORD),
    opt("duration", "Recording", "record", ANY_RECORD),
    opt("samples", "Recording", "record", ANY_RECORD),
    opt("check-interval", "Recording", "record", ANY_RECORD),
    opt("buffer", "Recording", "record", ANY_RECORD),
    opt("listing", "Recording", "record", ANY_RECORD),
    opt("live", "Recording", "record --to mmv", &[r(&[Record], Src::Any, target(Mmv))]),
];

pub fn spec(long: &str) -> Option<&'static OptSpec> {
    OPTIONS.iter().find(|o| o.long == long)
}

/// What the check knows of one input: its file's format, the format of the
/// stream it carries and its time base.
#[derive(Debug, Clone, Copy)]
pub struct SourceKind<'a> {
    pub file: FormatId,
    pub stream: FormatId,
    pub time: &'a TimeBase,
}

impl Src {
    fn takes(self, s: &SourceKind<'_>) -> bool {
        match self {
            Src::Any => true,
            Src::Formats(f) => f.contains(&s.file) || f.contains(&s.stream),
            Src::Undated => !matches!(
                s.time,
                TimeBase::Absolute
                    | TimeBase::Cycles {
                        hz: Some(_),
                        anchor: Some(_)
                    }
            ),
            Src::Cycles => matches!(s.time, TimeBase::Cycles { .. }),
        }
    }
}

impl Tgt {
    fn takes(self, t: Target) -> bool {
        match self {
            Tgt::Any => true,
            Tgt::Only(l) => l.contains(&t),
        }
    }
}

impl OptSpec {
    /// Does the option apply to this verb and target (sources aside)?
    pub fn applies_to_target(&self, verb: Verb, t: Target, given: &[&str]) -> bool {
        self.rules.iter().any(|r| {
            r.verbs.contains(&verb)
                && r.targets.takes(t)
                && r.with.is_none_or(|w| given.contains(&w))
        })
    }
    /// Does it apply to this verb, target and at least one of the inputs?
    pub fn applies(
        &self,
        verb: Verb,
        t: Target,
        sources: &[SourceKind<'_>],
        given: &[&str],
    ) -> bool {
        self.rules.iter().any(|r| {
            r.verbs.contains(&verb)
                && r.targets.takes(t)
                && r.with.is_none_or(|w| given.contains(&w))
                && sources.iter().any(|s| r.sources.takes(s))
        })
    }
}

fn refusal(long: &str, spec: &OptSpec, why: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "--{long} changes nothing here ({why}): it applies to {}",
        spec.applies
    )
}

/// Refuse an option given where it changes nothing for this verb and
/// target. Sources are checked by [`check_sources`] once they are open.
pub fn check_target(verb: Verb, t: Target, given: &[&str]) -> anyhow::Result<()> {
    for &long in given {
        let Some(s) = spec(long) else { continue };
        if !s.applies_to_target(verb, t, given) {
            return Err(refusal(
                long,
                s,
                &format!("{} {}", verb.name(), t.describe()),
            ));
        }
    }
    Ok(())
}

/// Refuse an option that applies to none of the inputs.
pub fn check_sources(
    verb: Verb,
    t: Target,
    given: &[&str],
    sources: &[SourceKind<'_>],
    names: &str,
) -> anyhow::Result<()> {
    for &long in given {
        let Some(s) = spec(long) else { continue };
        if !s.applies(verb, t, sources, given) {
            let what = match sources {
                [one] => format!(
                    "{names} is {}{}",
                    one.file,
                    if one.time.is_absolute() {
                        ", with dates".to_string()
                    } else {
                        format!(", {}", one.time.describe())
                    }
                ),
                _ => format!("none of {names} is such an input"),
            };
            return Err(refusal(long, s, &what));
        }
    }
    Ok(())
}

/// The `--help` heading of every declared option (the one place it is set).
pub fn apply_headings(cmd: clap::Command) -> clap::Command {
    let mut cmd = cmd;
    for verb in Verb::ALL.iter().map(|v| v.name()).chain(["check"]) {
        cmd = cmd.mut_subcommand(verb, headings);
    }
    cmd
}

/// Headings on one verb's command (also a `polytrace-<verb>` binary's).
pub fn headings(cmd: clap::Command) -> clap::Command {
    let ids: Vec<(String, &'static str)> = cmd
        .get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?;
            let s = spec(long)?;
            Some((a.get_id().to_string(), s.heading))
        })
        .collect();
    let mut cmd = cmd;
    for (id, heading) in ids {
        if heading != "Options" {
            cmd = cmd.mut_arg(id, |a| a.help_heading(heading));
        }
    }
    cmd
}

/// docs/options.md: every option, what it applies to (checked by a test).
pub fn markdown() -> String {
    use std::fmt::Write as _;
    let mut o = String::from(
        "# Options: where each one applies\n\n\
         Generated from the declaration in `src/cli/optspec.rs` (a test checks this file \
         against it). An option given where it would change nothing is refused with exit \
         2, naming what it applies to.\n\n\
         | option | verbs | applies to |\n| --- | --- | --- |\n",
    );
    for s in OPTIONS {
        let mut verbs: Vec<&str> = Vec::new();
        for r in s.rules {
            for v in r.verbs {
                if !verbs.contains(&v.name()) {
                    verbs.push(v.name());
                }
            }
        }
        writeln!(
            o,
            "| `--{}` | {} | {} |",
            s.long,
            verbs.join(", "),
            s.applies.replace('|', "\\|")
        )
        .unwrap();
    }
    o
}
