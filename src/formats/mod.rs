//! Format registry: one module per format, each implementing [`Format`].
//! Detection goes by content; `--from`/`--to` override it.

use crate::error::{Error, Result};
use crate::input::{Input, InputKind};
use crate::model::FormatId;

pub use format::{
    mapping, not_implemented, raw_clock_fate, AbsoluteTime, Caps, CreateRequest, DumpRequest, Fate,
    Format, FormatInfo, Kind, MapLine, RawClock, Rule,
};

pub mod chrome;
pub mod csv;
pub mod ctf;
pub mod dlt;
pub mod format;
pub mod kpi;
pub mod ltt;
pub mod mmv;
pub mod pairs;
pub mod parquet;
pub mod pcp;
pub mod perfetto;
pub mod timeline;

static KPI: kpi::KpiFormat = kpi::KpiFormat;
static DLT: dlt::DltFormat = dlt::DltFormat;
static MMV: mmv::MmvFormat = mmv::MmvFormat;
static PCP: pcp::PcpFormat = pcp::PcpFormat;
static LTT: ltt::LttFormat = ltt::LttFormat;
static TIMELINE: timeline::TimelineFormat = timeline::TimelineFormat;
static CTF: format::Export = ctf::FORMAT;
static CHROME: format::Export = chrome::FORMAT;
static CSV: format::Export = csv::FORMAT;
static PARQUET: format::Export = parquet::FORMAT;
static PERFETTO: format::Export = perfetto::FORMAT;

/// Every format, in `polytrace formats` order.
pub fn all() -> [&'static dyn Format; 11] {
    [
        &KPI, &DLT, &MMV, &PCP, &LTT, &TIMELINE, &CHROME, &CSV, &CTF, &PARQUET, &PERFETTO,
    ]
}

pub fn get(id: FormatId) -> &'static dyn Format {
    all()
        .into_iter()
        .find(|f| f.id() == id)
        .expect("every FormatId is registered")
}

/// Pick the format of `input` by content.
pub fn detect(input: &Input) -> Result<&'static dyn Format> {
    let best = all()
        .into_iter()
        .map(|f| (f.detect(input), f))
        .max_by_key(|(score, _)| *score);
    match best {
        Some((score, f)) if score > 0 => Ok(f),
        _ => {
            // Nothing matches fully: say what it nearly is, and where not.
            if let Some((f, (off, what))) = all()
                .into_iter()
                .find_map(|f| f.near_miss(input).map(|m| (f, m)))
            {
                return Err(Error::format(
                    crate::error::Position::at(&input.path, off, None),
                    format!(
                        "not recognised, but looks like {id}: {what} (give --from {id} to read it anyway)",
                        id = f.id()
                    ),
                ));
            }
            let msg = match input.kind {
                InputKind::File if input.probe.is_empty() => {
                    "empty file: no format to detect".into()
                }
                InputKind::Stdin if input.probe.is_empty() => "empty input on stdin".into(),
                InputKind::Dir => "directory is not an LTT trace (no info/system.xml)".into(),
                // Nothing nearly matched: say what was tried; --from would not help.
                _ => format!(
                    "unrecognised format, not a trace polytrace reads: {}",
                    tried(input)
                ),
            };
            Err(Error::Detect {
                path: input.path.clone(),
                msg,
            })
        }
    }
}

/// What detection looked for, format by format (for the message when
/// nothing matched).
fn tried(input: &Input) -> String {
    let line1 = input
        .probe
        .split(|&b| b == b'\n')
        .next()
        .map(|l| String::from_utf8_lossy(&l[..l.len().min(40)]).into_owned())
        .unwrap_or_default();
    let mut parts = Vec::new();
    for f in all().into_iter().filter(|f| f.caps().read) {
        let why = match f.id() {
            FormatId::Kpi => format!(
                "line 1 ({line1:?}) is no KPI dataset (NEW/STP/ACT/CHK/IRQ) or dlt-convert -a line"
            ),
            FormatId::Dlt => "no DLT storage header (DLT\\x01)".into(),
            FormatId::Mmv => "no MMV header (MMV\\0)".into(),
            FormatId::Pcp => "no PCP archive label (an archive is named by its base name)".into(),
            FormatId::Ltt => "not an LTT trace directory".into(),
            FormatId::Timeline => "no timeline header".into(),
            _ => continue,
        };
        parts.push(format!("not {}: {why}", f.id()));
    }
    parts.join("; ")
}

/// The mapping table as Markdown (`polytrace formats --mapping`, and
/// docs/mapping.md): every readable × writable pair, then what
/// each writer does with each kind.
pub fn mapping_markdown() -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let readers: Vec<&FormatInfo> = all()
        .into_iter()
        .map(|f| f.info())
        .filter(|i| i.caps.read)
        .collect();
    let writers: Vec<&FormatInfo> = all()
        .into_iter()
        .map(|f| f.info())
        .filter(|i| i.caps.write)
        .collect();
    let cell = |lines: &[MapLine], class: &str| -> String {
        let mut names: Vec<String> = Vec::new();
        for l in lines.iter().filter(|l| l.class == class) {
            let n = if l.some {
                format!("{} (some)", l.subject)
            } else {
                l.subject.to_string()
            };
            if !names.contains(&n) {
                names.push(n);
            }
        }
        if names.is_empty() {
            "–".into()
        } else {
            names.join(", ")
        }
    };
    o.push_str("| from | to | kept | degraded | dropped | needs |\n");
    o.push_str("| --- | --- | --- | --- | --- | --- |\n");
    for s in &readers {
        for d in &writers {
            let lines = mapping(s, d);
            writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} |",
                s.id,
                d.id,
                cell(&lines, "kept"),
                cell(&lines, "degraded"),
                cell(&lines, "dropped"),
                cell(&lines, "needs")
            )
            .unwrap();
        }
    }
    o.push_str("\n| to | kind | from | what the writer does |\n");
    o.push_str("| --- | --- | --- | --- |\n");
    for d in &writers {
        for r in d.writes {
            let from = if r.from.is_empty() {
                "any".to_string()
            } else {
                r.from
                    .iter()
                    .map(|f| f.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let what = match r.fate {
                Fate::Kept(how) => format!("kept: {how}"),
                Fate::Degraded(why) => format!("degraded: {why}"),
                Fate::Dropped(why) => format!("dropped: {why}"),
                Fate::SomeDegraded(which, why) => format!("degraded ({which}): {why}"),
                Fate::SomeDropped(which, why) => format!("dropped ({which}): {why}"),
            };
            writeln!(
                o,
                "| {} | {} | {from} | {} |",
                d.id,
                r.kind.name(),
                what.replace('|', "\\|")
            )
            .unwrap();
        }
        let rc = match get(d.id).raw_clock(&crate::options::WriteOptions::default()) {
            RawClock::None => "dropped: the format has no raw clock".to_string(),
            RawClock::Native(m) => format!("kept if they are `{m}`, else dropped"),
            RawClock::Carried => "kept with their meaning".to_string(),
        };
        writeln!(o, "| {} | raw clocks | any | {rc} |", d.id).unwrap();
        let t = match d.absolute_time {
            AbsoluteTime::NotNeeded => "relative time and cycles kept as they are",
            AbsoluteTime::Needed => "needs dates: --time-origin (and --tsc-hz) for undated sources",
            AbsoluteTime::NeededWhen(_) => {
                "needs dates with some options: --time-origin (and --tsc-hz) for undated sources"
            }
        };
        writeln!(o, "| {} | time | any | {t} |", d.id).unwrap();
    }
    o
}
