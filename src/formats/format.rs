//! What every format implements: the [`Format`] trait and its one
//! declaration, [`FormatInfo`]. Kept apart from the registry (`mod.rs`) so
//! that format folders depend on this file and the registry on them, never
//! the other way round.

use crate::error::{Diagnostic, Error, Result};
use crate::input::Input;
use crate::model::{FormatId, Header, Item, LossReport, Timestamp, TraceReader, TraceWriter};
use crate::options::{DumpOptions, ReadOptions, WriteOptions};
use crate::output::OutTarget;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// What a format implementation can do in this build.
#[derive(Debug, Clone, Copy, Default)]
pub struct Caps {
    pub read: bool,
    pub write: bool,
    pub dump: bool,
    /// The writer writes text and may go to stdout.
    pub text_output: bool,
}

/// Whether a format's writer needs absolute (epoch) time. A source with
/// relative or cycle time goes into such a writer only with `--time-origin`
/// (and `--tsc-hz` for cycles): writers never invent a date.
#[derive(Debug, Clone, Copy)]
pub enum AbsoluteTime {
    /// Relative and cycle times are carried as they are.
    NotNeeded,
    /// Timestamps are dates (PCP archive labels and results, DLT storage time).
    Needed,
    /// Only with some write options (KPI `--kpi-style dlt` lines).
    NeededWhen(fn(&WriteOptions) -> bool),
}

impl AbsoluteTime {
    pub fn needed(self, opts: &WriteOptions) -> bool {
        match self {
            AbsoluteTime::NotNeeded => false,
            AbsoluteTime::Needed => true,
            AbsoluteTime::NeededWhen(f) => f(opts),
        }
    }
}

/// What the `raw_clock` of a format's items means (the `keys::RAW_CLOCK`
/// names), so that no writer takes one clock for another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawClock {
    /// No raw clock: the reader gives none, the writer uses none.
    None,
    /// The reader gives, and the writer takes, raw clocks of this meaning
    /// (`tsc`, `dlt-0.1ms`, `ltt-cycles`, …); raw clocks of any other
    /// meaning are left out before the writer sees them.
    Native(&'static str),
    /// The writer keeps raw clocks of any meaning and records which.
    Carried,
}

/// What a stream carries, as the mapping table (`polytrace formats
/// --mapping`) counts it. `info_name` is the name `polytrace info` gives
/// the items of the kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Events,
    Samples,
    Metrics,
    Indoms,
    Help,
    Labels,
    Marks,
    Annotations,
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::Events,
        Kind::Samples,
        Kind::Metrics,
        Kind::Indoms,
        Kind::Help,
        Kind::Labels,
        Kind::Marks,
        Kind::Annotations,
    ];
    /// The table's name of the kind.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Events => "events",
            Kind::Samples => "sample values",
            Kind::Metrics => "metric descriptors",
            Kind::Indoms => "instance domains",
            Kind::Help => "help texts",
            Kind::Labels => "labels",
            Kind::Marks => "marks",
            Kind::Annotations => "annotations",
        }
    }
    /// The item name `polytrace info` counts the kind by.
    pub const fn info_name(self) -> &'static str {
        match self {
            Kind::Events => "events",
            Kind::Samples => "samples",
            Kind::Metrics => "metrics",
            Kind::Indoms => "indom updates",
            Kind::Help => "help texts",
            Kind::Labels => "label sets",
            Kind::Marks => "marks",
            Kind::Annotations => "annotations",
        }
    }
}

/// What a writer does with a kind of item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Kept; the text says how.
    Kept(&'static str),
    /// Kept with less fidelity, always; the text says why.
    Degraded(&'static str),
    /// Not written, always.
    Dropped(&'static str),
    /// Some of them (the first text says which) degraded, the second why.
    SomeDegraded(&'static str, &'static str),
    /// Some of them dropped.
    SomeDropped(&'static str, &'static str),
}

/// Why a target leaves out the framing events its source holds as content
/// (DLT control messages: `model::keys::FRAMING_KIND`).
pub const FRAMING_DROPPED: &str =
    "framing of the source format (control messages), not data this target holds";

/// DLT control messages are framing: every target but DLT and LTT (the
/// reversible encoding, which carries them) leaves them out, per kind. A
/// rule of the source (the `Unframe` stage applies it), like the raw-clock
/// fates, not of any target's table.
pub const DLT_CONTROL_DROPPED: Rule = Rule::some_dropped(
    Kind::Events,
    "control messages",
    "DLT control messages",
    FRAMING_DROPPED,
)
.from(&[FormatId::Dlt]);

/// One line of a writer's mapping declaration. The writer reports a loss
/// under this rule as `what` (the noun ending its loss line, e.g. `values`)
/// and the rule's reason, so the table and the loss report are one text.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub kind: Kind,
    /// The rule applies to streams from these formats only (empty: any).
    pub from: &'static [FormatId],
    pub what: &'static str,
    pub fate: Fate,
}

impl Rule {
    pub const fn kept(kind: Kind, how: &'static str) -> Rule {
        Rule {
            kind,
            from: &[],
            what: "",
            fate: Fate::Kept(how),
        }
    }
    pub const fn degraded(kind: Kind, what: &'static str, why: &'static str) -> Rule {
        Rule {
            kind,
            from: &[],
            what,
            fate: Fate::Degraded(why),
        }
    }
    pub const fn dropped(kind: Kind, what: &'static str, why: &'static str) -> Rule {
        Rule {
            kind,
            from: &[],
            what,
            fate: Fate::Dropped(why),
        }
    }
    /// Every item of the kind dropped, counted under the kind's own item
    /// name (`Kind::info_name`), as `polytrace info` counts them.
    pub const fn dropped_all(kind: Kind, why: &'static str) -> Rule {
        Rule::dropped(kind, kind.info_name(), why)
    }
    pub const fn some_degraded(
        kind: Kind,
        what: &'static str,
        which: &'static str,
        why: &'static str,
    ) -> Rule {
        Rule {
            kind,
            from: &[],
            what,
            fate: Fate::SomeDegraded(which, why),
        }
    }
    pub const fn some_dropped(
        kind: Kind,
        what: &'static str,
        which: &'static str,
        why: &'static str,
    ) -> Rule {
        Rule {
            kind,
            from: &[],
            what,
            fate: Fate::SomeDropped(which, why),
        }
    }
    /// The same rule, for streams from these formats only.
    pub const fn from(self, from: &'static [FormatId]) -> Rule {
        Rule { from, ..self }
    }
    pub fn applies_to(&self, source: FormatId) -> bool {
        self.from.is_empty() || self.from.contains(&source)
    }
    /// The reason a loss under this rule is reported with (None: kept).
    pub fn reason(&self) -> Option<&'static str> {
        match self.fate {
            Fate::Kept(_) => None,
            Fate::Degraded(r) | Fate::Dropped(r) => Some(r),
            Fate::SomeDegraded(_, r) | Fate::SomeDropped(_, r) => Some(r),
        }
    }
    pub fn is_drop(&self) -> bool {
        matches!(self.fate, Fate::Dropped(_) | Fate::SomeDropped(..))
    }
    /// Count one item lost under this rule (`subject` prefixes `what`,
    /// e.g. a metric name).
    pub fn record(&self, loss: &mut LossReport, subject: Option<&str>) {
        self.record_n(loss, subject, 1);
    }
    /// Count `n` items lost under this rule (none: nothing noted).
    pub fn record_n(&self, loss: &mut LossReport, subject: Option<&str>, n: u64) {
        let Some(why) = self.reason() else { return };
        let what = match subject {
            Some(s) => format!("{s} {}", self.what),
            None => self.what.to_string(),
        };
        if self.is_drop() {
            loss.drop_n(&what, why, n);
        } else {
            loss.degrade_n(&what, why, n);
        }
    }
}

/// A writer's rule table, one rule a row: `fate(Kind, texts…)` calls the
/// [`Rule`] constructor of that name with `Kind::Kind`, `.from(A, B)` after
/// it limits the rule to streams from those formats, and a bare name is a
/// rule constant shared with other tables. Rows stay one line each, so a
/// table reads as the mapping it declares.
macro_rules! rules {
    (@rows [$($done:expr,)*]) => {
        [$($done,)*]
    };
    (@rows [$($done:expr,)*] $fate:ident($kind:ident $(, $text:expr)*) $(.from($($src:ident),*))? $(, $($rest:tt)*)?) => {
        $crate::formats::format::rules!(@rows [
            $($done,)*
            $crate::formats::format::Rule::$fate($crate::formats::format::Kind::$kind $(, $text)*)
                $(.from(&[$($crate::model::FormatId::$src),*]))?,
        ] $($($rest)*)?)
    };
    (@rows [$($done:expr,)*] $shared:path $(, $($rest:tt)*)?) => {
        $crate::formats::format::rules!(@rows [$($done,)* $shared,] $($($rest)*)?)
    };
    ($($rows:tt)*) => {
        $crate::formats::format::rules!(@rows [] $($rows)*)
    };
}
pub(crate) use rules;

/// Note `item` (help texts, label sets, marks, annotations) dropped under
/// the rule `writes` (the writer's declaration) has for its kind, so that
/// the loss line and the mapping table say the same.
pub fn note_dropped(loss: &mut LossReport, writes: &[Rule], item: &Item) {
    let kind = match item {
        Item::Help(_) => Some(Kind::Help),
        Item::Labels(_) => Some(Kind::Labels),
        Item::Mark(_) => Some(Kind::Marks),
        Item::Annotation(_) => Some(Kind::Annotations),
        _ => None,
    };
    let rule = kind.and_then(|k| writes.iter().find(|r| r.kind == k && r.is_drop()));
    debug_assert!(
        rule.is_some(),
        "no rule of the writer drops this item whole"
    );
    if let Some(r) = rule {
        r.record(loss, None);
    }
}

/// What becomes of the raw clocks of a stream whose raw clocks mean
/// `meaning` (a `keys::RAW_CLOCK` value, None if unknown) in a writer of
/// `target`; `Dropped` is what the `RawClocks` stage does and reports.
pub fn raw_clock_fate(meaning: Option<&str>, target: RawClock) -> Fate {
    match target {
        RawClock::Native(want) if meaning == Some(want) => Fate::Kept("as the format's own clock"),
        RawClock::Native(_) => {
            Fate::Dropped("the format's raw clock is another clock: derived from the time instead")
        }
        RawClock::Carried => Fate::Kept("kept with their meaning"),
        RawClock::None => Fate::Dropped("the format has no raw clock"),
    }
}

/// One line of the mapping of a source format into a target format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapLine {
    /// The kind (`events`, …, `raw clocks`, `time`).
    pub subject: &'static str,
    pub class: &'static str,
    /// Only some items of the kind (the text says which).
    pub some: bool,
    pub text: String,
}

/// What a writer of `dst` does with what a reader of `src` gives: one line
/// per rule that applies, from the declarations the writers and the
/// pipeline's stages use (so it cannot drift from what they do).
pub fn mapping(src: &FormatInfo, dst: &FormatInfo) -> Vec<MapLine> {
    let line = |subject, class, text: String| MapLine {
        subject,
        class,
        some: false,
        text,
    };
    if src.id == dst.id {
        return vec![line(
            "everything",
            "kept",
            "the format's own reader and writer".into(),
        )];
    }
    let fate_line = |subject, f: Fate| match f {
        Fate::Kept(how) => line(subject, "kept", how.into()),
        Fate::Degraded(why) => line(subject, "degraded", why.into()),
        Fate::Dropped(why) => line(subject, "dropped", why.into()),
        Fate::SomeDegraded(which, why) => MapLine {
            some: true,
            ..line(subject, "degraded", format!("{which}: {why}"))
        },
        Fate::SomeDropped(which, why) => MapLine {
            some: true,
            ..line(subject, "dropped", format!("{which}: {why}"))
        },
    };
    let mut out = Vec::new();
    for &k in src.reads {
        let rules: Vec<&Rule> = dst
            .writes
            .iter()
            .filter(|r| r.kind == k && r.applies_to(src.id))
            .collect();
        if rules.is_empty() {
            out.push(line(k.name(), "kept", "as they are".into()));
        }
        for r in rules {
            out.push(fate_line(k.name(), r.fate));
        }
    }
    if let RawClock::Native(m) = src.raw_clock {
        out.push(fate_line(
            "raw clocks",
            raw_clock_fate(
                Some(m),
                crate::formats::get(dst.id).raw_clock(&WriteOptions::default()),
            ),
        ));
    }
    if src.undated {
        let need = match dst.absolute_time {
            AbsoluteTime::NotNeeded => None,
            AbsoluteTime::Needed => Some("always"),
            AbsoluteTime::NeededWhen(_) => Some("with some options"),
        };
        out.push(match need {
            None => line("time", "kept", "relative time or cycles as they are".into()),
            Some(when) => line(
                "time",
                "needs",
                format!(
                    "dates ({when}): --time-origin TIME (and --tsc-hz for cycles), else an error"
                ),
            ),
        });
    }
    out
}

/// A format's one declaration: its name, what it can do, one line about it.
#[derive(Debug, Clone, Copy)]
pub struct FormatInfo {
    pub id: FormatId,
    pub caps: Caps,
    /// One line for `polytrace formats`.
    pub describe: &'static str,
    /// Whether the writer needs absolute time.
    pub absolute_time: AbsoluteTime,
    /// The meaning of the format's raw clocks.
    pub raw_clock: RawClock,
    /// The kinds of item the reader gives (empty: no reader).
    pub reads: &'static [Kind],
    /// What the writer does with each kind (a kind without a rule is kept
    /// as it is). The writer reports its losses under these rules.
    pub writes: &'static [Rule],
    /// The reader may give relative time or cycles only (no dates).
    pub undated: bool,
}

impl FormatInfo {
    /// A format read, written and listed natively; its reader gives
    /// `reads`. Its writer takes relative time and has no raw clock, its
    /// reader gives dates, unless the `with_` methods say otherwise.
    pub const fn native(
        id: FormatId,
        describe: &'static str,
        reads: &'static [Kind],
        writes: &'static [Rule],
    ) -> FormatInfo {
        FormatInfo {
            id,
            caps: Caps {
                read: true,
                write: true,
                dump: true,
                text_output: false,
            },
            describe,
            absolute_time: AbsoluteTime::NotNeeded,
            raw_clock: RawClock::None,
            reads,
            writes,
            undated: false,
        }
    }
    /// An export: written only, no reader and no listing.
    pub const fn export(
        id: FormatId,
        describe: &'static str,
        writes: &'static [Rule],
    ) -> FormatInfo {
        let mut info = FormatInfo::native(id, describe, &[], writes);
        info.caps.read = false;
        info.caps.dump = false;
        info
    }
    /// The writer writes text and may go to stdout.
    pub const fn with_text_output(mut self) -> FormatInfo {
        self.caps.text_output = true;
        self
    }
    pub const fn with_absolute_time(mut self, absolute_time: AbsoluteTime) -> FormatInfo {
        self.absolute_time = absolute_time;
        self
    }
    pub const fn with_raw_clock(mut self, raw_clock: RawClock) -> FormatInfo {
        self.raw_clock = raw_clock;
        self
    }
    /// The reader gives relative time or cycles only.
    pub const fn undated(mut self) -> FormatInfo {
        self.undated = true;
        self
    }
}

/// One format: reader, writer and native listing.
pub trait Format: Sync {
    fn info(&self) -> &'static FormatInfo;
    /// The raw clocks the writer takes with these options (default: its
    /// declaration; a writer whose options change it says so).
    fn raw_clock(&self, _opts: &WriteOptions) -> RawClock {
        self.info().raw_clock
    }
    fn id(&self) -> FormatId {
        self.info().id
    }
    fn caps(&self) -> Caps {
        self.info().caps
    }
    fn describe(&self) -> &'static str {
        self.info().describe
    }
    /// The reader reads its input front to back once, so stdin can stay a
    /// stream (a live pipe). Otherwise stdin is first copied to a temporary
    /// file ([`Input::spool_stdin`]) and read exactly as a file.
    fn reads_stream(&self) -> bool {
        false
    }
    /// `convert DIR` writes one dataset (Hive-partitioned files added into
    /// OUTDIR, `WriteOptions::dataset`) instead of one output per input.
    fn dataset(&self) -> bool {
        false
    }
    /// How sure we are that `input` is this format: 0 = no, 100 = magic
    /// matched. The default (0) is an export's: it has no reader.
    fn detect(&self, input: &Input) -> u8 {
        let _ = input;
        0
    }
    /// When no format detects `input`: does it nearly look like this one
    /// (a cut or damaged header)? The byte offset and what is wrong there.
    fn near_miss(&self, input: &Input) -> Option<(u64, String)> {
        let _ = input;
        None
    }
    fn open(&self, input: &Input, opts: &ReadOptions) -> Result<Box<dyn TraceReader>> {
        let _ = (input, opts);
        Err(not_implemented(self.id(), "reading"))
    }
    /// Create a writer. `header` is the source stream's header. Formats
    /// implement [`Format::writer`], which takes the three as one request.
    fn create(
        &self,
        out: &OutTarget,
        header: &Header,
        opts: &WriteOptions,
    ) -> Result<Box<dyn TraceWriter>> {
        self.writer(CreateRequest { out, header, opts })
    }
    /// What [`Format::create`] does: the format's writer.
    fn writer(&self, req: CreateRequest) -> Result<Box<dyn TraceWriter>> {
        let _ = req;
        Err(not_implemented(self.id(), "writing"))
    }
    /// The native-style listing (pmdumplog, mmvdump, Snabb's dump, …).
    /// Returns the diagnostics met (salvage ones make the exit code 1).
    /// Formats implement [`Format::listing`].
    fn dump(
        &self,
        input: &Input,
        ropts: &ReadOptions,
        dopts: &DumpOptions,
        out: &mut dyn Write,
    ) -> Result<Vec<Diagnostic>> {
        let req = DumpRequest {
            input,
            ropts,
            dopts,
        };
        self.listing(req, out)
    }
    /// What [`Format::dump`] does: the format's native listing.
    fn listing(&self, req: DumpRequest, out: &mut dyn Write) -> Result<Vec<Diagnostic>> {
        let _ = (req, out);
        Err(not_implemented(self.id(), "dumping"))
    }
    /// The trace's start and, with `need_end`, its end: what `+DURATION`
    /// and `-DURATION` count from. The start is the header's (PCP label,
    /// MMV creation time) or the first data item's time, the end the
    /// latest data item's. The default reads the stream (up to the first
    /// data item when the end is not needed); formats that know their
    /// bounds cheaply say so.
    fn time_bounds(&self, input: &Input, opts: &ReadOptions, need_end: bool) -> Result<Bounds> {
        let mut r = self.open(input, opts)?;
        let mut start = r.header().start;
        let mut end: Option<Timestamp> = None;
        while let Some(item) = r.next_item()? {
            let Some(t) = item.time().filter(|_| item.is_data()) else {
                continue;
            };
            start.get_or_insert(t);
            if !need_end {
                break;
            }
            end = Some(end.map_or(t, |e| e.max(t)));
        }
        Ok((start, end))
    }
    /// Structural validation. The default reads every item.
    fn check(&self, input: &Input, opts: &ReadOptions) -> Result<Vec<Diagnostic>> {
        let mut r = self.open(input, opts)?;
        while r.next_item()?.is_some() {}
        Ok(r.diagnostics().to_vec())
    }
}

/// A trace's start and end (see [`Format::time_bounds`]).
pub type Bounds = (Option<Timestamp>, Option<Timestamp>);

/// What a writer is created for (see [`Format::create`]).
#[derive(Clone, Copy)]
pub struct CreateRequest<'a> {
    /// The file, directory or stdout it writes to.
    pub out: &'a OutTarget,
    /// The source stream's header.
    pub header: &'a Header,
    pub opts: &'a WriteOptions,
}

impl CreateRequest<'_> {
    /// The file or directory written to; stdout is refused with `refusal`
    /// (see [`path_target`]).
    pub fn path(&self, refusal: &str) -> Result<&PathBuf> {
        path_target(self.out, refusal)
    }
}

/// What a native listing lists (see [`Format::dump`]).
#[derive(Clone, Copy)]
pub struct DumpRequest<'a> {
    pub input: &'a Input,
    pub ropts: &'a ReadOptions,
    pub dopts: &'a DumpOptions,
}

/// Makes a format's writer (what [`Format::create`] does).
pub type CreateWriter = fn(CreateRequest) -> Result<Box<dyn TraceWriter>>;

/// An export format: a declaration and a writer, nothing else to say.
/// The exports share this one [`Format`] implementation.
pub struct Export {
    pub info: &'static FormatInfo,
    pub create: CreateWriter,
    /// See [`Format::dataset`].
    pub dataset: bool,
}

impl Format for Export {
    fn info(&self) -> &'static FormatInfo {
        self.info
    }
    fn dataset(&self) -> bool {
        self.dataset
    }
    fn writer(&self, req: CreateRequest) -> Result<Box<dyn TraceWriter>> {
        (self.create)(req)
    }
}

/// The file or directory a writer that cannot write to stdout goes to;
/// stdout is refused with `refusal` (a usage error, nothing written).
pub fn path_target<'a>(out: &'a OutTarget, refusal: &str) -> Result<&'a PathBuf> {
    match out {
        OutTarget::Path(p) => Ok(p),
        OutTarget::Stdout => Err(Error::Usage(refusal.into())),
    }
}

/// A new file, buffered (64 KiB) for a writer's many small writes.
pub fn buffered_file(path: &Path) -> Result<BufWriter<File>> {
    let f = File::create(path).map_err(|e| Error::io(path, e))?;
    Ok(BufWriter::with_capacity(1 << 16, f))
}

pub fn not_implemented(id: FormatId, what: &str) -> Error {
    Error::Unsupported(format!(
        "{what} the {id} format is not implemented yet in this build (see `polytrace formats`)"
    ))
}
