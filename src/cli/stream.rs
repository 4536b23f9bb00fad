//! Opening what a verb reads as one stream: one input or several merged,
//! then the time window and the filters.

use super::args::{FilterArgs, InputArgs, MergeArgs};
use crate::formats::Format;
use crate::input::{Input, InputKind};
use crate::model::{TimeSpec, TimeWindow, Timestamp, TraceReader};
use crate::pipeline;
use crate::stages::{Filter, Merge, MergeInput, Unframe, Window};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// One opened input.
pub struct Source {
    pub input: Input,
    pub fmt: &'static dyn Format,
}

impl Source {
    pub fn open(path: &Path, ia: &InputArgs) -> Result<Source> {
        let (input, fmt) = pipeline::resolve_input(path, ia.from)?;
        Ok(Source { input, fmt })
    }

    /// The trace's start and (with `need_end`) end, for relative times.
    pub fn bounds(
        &self,
        ia: &InputArgs,
        need_end: bool,
    ) -> Result<(Option<Timestamp>, Option<Timestamp>)> {
        if self.input.kind == InputKind::Stdin {
            bail!("times counted from the end (-DURATION) need a file input, not stdin");
        }
        Ok(self
            .fmt
            .time_bounds(&self.input, &ia.read_options(), need_end)?)
    }
}

/// What a verb reads: one stream, the paths it must never overwrite, and
/// how to find the stream's start and end.
pub struct Stream {
    pub reader: Box<dyn TraceReader>,
    pub members: Vec<PathBuf>,
    /// Start and end of the whole (merged) stream, when they were needed.
    pub start: Option<Timestamp>,
    pub end: Option<Timestamp>,
}

fn needs(specs: &[Option<TimeSpec>]) -> (bool, bool) {
    let w = |s: &Option<TimeSpec>| TimeWindow::new(*s, None);
    let start = specs.iter().any(|s| w(s).needs_start());
    let end = specs.iter().any(|s| w(s).needs_end());
    (start, end)
}

/// Open `sources` as one stream (merged when several), windowed and
/// filtered. `extra` are other time specs that will be resolved against the
/// stream (`--at`): they decide whether the bounds must be found first.
pub fn open(
    sources: &[Source],
    labels: &[String],
    ia: &InputArgs,
    fa: &FilterArgs,
    extra: &[Option<TimeSpec>],
) -> Result<Stream> {
    open_with(sources, labels, ia, fa, extra, false)
}

/// [`open`], with the inputs' framing left out first when `unframe`.
pub fn open_with(
    sources: &[Source],
    labels: &[String],
    ia: &InputArgs,
    fa: &FilterArgs,
    extra: &[Option<TimeSpec>],
    unframe: bool,
) -> Result<Stream> {
    let window = ia.window();
    window.check().map_err(anyhow::Error::msg)?;
    let mut specs = vec![ia.begin, ia.end];
    specs.extend_from_slice(extra);
    let (need_start, need_end) = needs(&specs);
    let ropts = ia.read_options();
    let mut start = None;
    let mut end = None;
    // Open every input first: the option check and --time-origin go by
    // each input's time base.
    let mut readers = Vec::with_capacity(sources.len());
    for s in sources {
        let r = s
            .fmt
            .open(&s.input, &ropts)
            .with_context(|| format!("opening {}", s.input.name()))?;
        readers.push(r);
    }
    if let Some((verb, target)) = ia.check {
        let kinds: Vec<super::optspec::SourceKind<'_>> = sources
            .iter()
            .zip(&readers)
            .map(|(s, r)| super::optspec::SourceKind {
                file: s.fmt.id(),
                stream: r.header().source,
                time: &r.header().time_base,
            })
            .collect();
        let names: Vec<String> = sources.iter().map(|s| s.input.name()).collect();
        super::optspec::check_sources(verb, target, &ia.given, &kinds, &names.join(", "))?;
    }
    // --time-origin places only inputs without dates; dated ones keep theirs.
    let undated: Vec<bool> = readers
        .iter()
        .map(|r| !crate::stages::origin::has_dates(r.header()))
        .collect();
    // A merged stream starts with its earliest input: ask each one.
    if need_end || (need_start && sources.len() > 1) {
        for (k, s) in sources.iter().enumerate() {
            let (mut a, mut b) = s.bounds(ia, need_end)?;
            if let (Some(origin), true) = (ia.time_origin, undated[k]) {
                let shift = a.map(|a| origin.0.saturating_sub(a.0));
                b = b.zip(shift).map(|(b, d)| Timestamp(b.0.saturating_add(d)));
                a = a.map(|_| origin);
            }
            start = match (start, a) {
                (Some(x), Some(y)) => Some(std::cmp::min(x, y)),
                (x, y) => x.or(y),
            };
            end = match (end, b) {
                (Some(x), Some(y)) => Some(std::cmp::max(x, y)),
                (x, y) => x.or(y),
            };
        }
    }
    let mut members = Vec::new();
    let mut placed = Vec::with_capacity(readers.len());
    for ((s, r), undated) in sources.iter().zip(readers).zip(&undated) {
        placed.push(match ia.time_origin {
            Some(origin) if *undated => {
                crate::stages::Origin::wrap(r, Some(origin), &s.input.path)?
            }
            _ => r,
        });
    }
    let mut readers = placed.into_iter();
    let reader: Box<dyn TraceReader> = if sources.len() == 1 {
        let s = &sources[0];
        members.extend(s.input.member_paths());
        let r = readers.next().expect("one reader per source");
        if unframe {
            Box::new(Unframe::wrap(r))
        } else {
            r
        }
    } else {
        if !labels.is_empty() && labels.len() != sources.len() {
            bail!(
                "{} --label given for {} inputs (give one per input, in order)",
                labels.len(),
                sources.len()
            );
        }
        let mut inputs = Vec::new();
        for (k, s) in sources.iter().enumerate() {
            members.extend(s.input.member_paths());
            let r = readers.next().expect("one reader per source");
            // A merged output is a new trace: no input's framing is data,
            // but DLT control messages are messages of the log (a merged
            // `.dlt` keeps them; another target leaves them out with a
            // report, as for one input).
            let mut r: Box<dyn TraceReader> = if r.header().source == crate::model::FormatId::Dlt {
                r
            } else {
                Box::new(Unframe::wrap(r))
            };
            // The merge takes each input in time order; a .dlt is in
            // arrival order (see `stages::reorder`).
            if r.header().source == crate::model::FormatId::Dlt {
                r = Box::new(crate::stages::Reorder::wrap(r));
            }
            let label = labels.get(k).cloned().unwrap_or_else(|| label_of(&s.input));
            inputs.push(MergeInput { reader: r, label });
        }
        Box::new(Merge::new(inputs)?)
    };
    if start.is_none() && need_start {
        start = reader.header().start;
    }
    // `--at +2s` cannot wait for the first item as the window does.
    let (extra_start, _) = needs(extra);
    if start.is_none() && extra_start {
        if let [s] = sources {
            start = s.bounds(ia, false)?.0;
            if let (Some(origin), true) = (ia.time_origin, undated[0]) {
                start = start.map(|_| origin);
            }
        }
    }
    let reader = Window::wrap(reader, window, start, end)?;
    let reader = Filter::wrap(reader, &fa.selection());
    Ok(Stream {
        reader,
        members,
        start,
        end,
    })
}

/// The default source name of an input: its file name.
fn label_of(input: &Input) -> String {
    input
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| input.name())
}

/// The inputs a verb names: several paths, or with `--merge` every trace
/// in one directory.
pub fn sources(paths: &[PathBuf], ma: &MergeArgs, ia: &InputArgs) -> Result<Vec<Source>> {
    if ma.merge {
        let [dir] = paths else {
            bail!("--merge takes one directory (or give the inputs one by one)");
        };
        if !dir.is_dir() {
            bail!("--merge: {} is not a directory", dir.display());
        }
        let mut out = Vec::new();
        for (p, _) in super::batch::collect_inputs(dir) {
            match Source::open(&p, ia) {
                Ok(s) => out.push(s),
                // Not a trace (README, checksums, …): left out, as in a batch.
                Err(_) => eprintln!(
                    "polytrace: {}: not a trace, left out of the merge",
                    p.display()
                ),
            }
        }
        if out.is_empty() {
            bail!("--merge: no traces in {}", dir.display());
        }
        return Ok(out);
    }
    paths.iter().map(|p| Source::open(p, ia)).collect()
}

/// Resolve `--at` against the stream's bounds.
pub fn resolve_at(
    spec: Option<TimeSpec>,
    start: Option<Timestamp>,
    end: Option<Timestamp>,
) -> Result<Option<Timestamp>> {
    let Some(s) = spec else { return Ok(None) };
    s.resolve(start, end)
        .map(Some)
        .with_context(|| format!("--at {s}: the trace's start or end is not known"))
}
