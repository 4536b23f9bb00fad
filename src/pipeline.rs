//! The convert driver: open with detection, run the stages, write, commit.

use crate::error::{Diagnostic, Error, Result, Severity};
use crate::formats::{self, Format};
use crate::input::{Input, InputKind};
use crate::model::*;
use crate::options::WriteOptions;
use crate::output::{OutTarget, Staged};
use std::path::{Path, PathBuf};

/// Resolve the format of an input: `--from` wins, else detection.
pub fn format_of(input: &Input, from: Option<FormatId>) -> Result<&'static dyn Format> {
    match from {
        Some(id) => Ok(formats::get(id)),
        None => formats::detect(input),
    }
}

/// Resolve a command-line input and its format. Stdin stays a stream for a
/// format that reads one (KPI text, possibly a live pipe); for any other it
/// is first copied to a temporary file, so that it reads exactly as a file
/// with the same bytes would.
pub fn resolve_input(path: &Path, from: Option<FormatId>) -> Result<(Input, &'static dyn Format)> {
    let mut input = Input::resolve(path)?;
    if input.kind == InputKind::Stdin {
        let streams = match from {
            Some(id) => formats::get(id).reads_stream(),
            None => formats::detect(&input).is_ok_and(|f| f.reads_stream()),
        };
        if !streams {
            input.spool_stdin()?;
        }
    }
    let fmt = format_of(&input, from)?;
    Ok((input, fmt))
}

/// A resource error met while reading (out of file descriptors or
/// memory, EIO) fails the run: the staged output is then dropped unseen.
pub fn fatal(diags: &[Diagnostic]) -> Result<()> {
    match diags.iter().find(|d| d.severity == Severity::Fatal) {
        Some(d) => Err(Error::Io {
            path: d.pos.file.clone(),
            source: std::io::Error::other(d.msg.clone()),
        }),
        None => Ok(()),
    }
}

/// What one conversion did.
#[derive(Debug, Default)]
pub struct ConvertOutcome {
    pub loss: LossReport,
    pub diagnostics: Vec<Diagnostic>,
    pub outputs: Vec<PathBuf>,
}

impl ConvertOutcome {
    /// Damaged input, salvaged prefix written: exit code 1. What the target
    /// cannot hold is not damage; it is reported, and `--strict` refuses it.
    pub fn salvaged(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == Severity::Salvaged)
    }
}

/// Where `convert` writes.
#[derive(Debug, Clone)]
pub enum Dest<'a> {
    Path {
        path: &'a Path,
        force: bool,
    },
    /// A dataset folder the output's files are added to, never replacing
    /// one (a format that writes datasets: [`Format::dataset`]).
    Dataset {
        root: &'a Path,
    },
    Stdout,
}

/// What adapting loses, shared with the adapter that fills it in.
pub type SharedLoss = std::rc::Rc<std::cell::RefCell<LossReport>>;

/// The stages every conversion into `to` needs: another format's framing
/// is never data (its writer makes its own), its raw clocks reach the
/// writer only if they mean what it takes (`RawClock` declarations), MMV,
/// which holds no events, takes them as per-type counters (a PCP archive
/// holds them as event records), and KPI lines come from any process data.
/// What the stages drop or degrade is in the returned report once the
/// stream has been read.
pub fn adapt(
    reader: Box<dyn TraceReader>,
    to: &dyn Format,
    wopts: &WriteOptions,
) -> (Box<dyn TraceReader>, SharedLoss) {
    let loss = SharedLoss::default();
    let mut reader = reader;
    let source = reader.header().source;
    // LTT is the reversible encoding of any stream: DLT control messages,
    // part of what a .dlt holds, go into it (and come back out of it).
    let carried = source == FormatId::Dlt && to.id() == FormatId::Ltt;
    if source != to.id() && !carried {
        let mut u = crate::stages::Unframe::wrap(reader);
        u.loss = Some(loss.clone());
        reader = Box::new(u);
    }
    // Numeric DLT arguments and --extract captures as samples, beside
    // the events, for targets that graph series; before the time sort,
    // so that each sample travels with its message.
    // Merged inputs: a DLT one among them has its messages' samples too
    // (only DLT verbose types give any).
    let merged = reader
        .header()
        .extras
        .get(crate::model::keys::MERGE_SOURCES)
        .is_some();
    let args = (source == FormatId::Dlt || merged) && ARG_SAMPLE_TARGETS.contains(&to.id());
    reader = match crate::stages::Derive::wrap(reader, args, &wopts.extract) {
        Ok(mut d) => {
            d.loss = Some(loss.clone());
            Box::new(d)
        }
        Err(r) => r,
    };
    if source != to.id() {
        // A .dlt holds messages in arrival order, not clock order; another
        // format gets them in time order (a DLT target keeps the file's).
        if source == FormatId::Dlt {
            reader = Box::new(crate::stages::Reorder::wrap(reader));
        }
        reader = crate::stages::RawClocks::wrap(
            reader,
            formats::get(source).info().raw_clock,
            to.raw_clock(wopts),
            &loss,
        );
    }
    if to.id() == FormatId::Mmv {
        let mut ec = crate::stages::EventCounters::wrap(reader);
        ec.loss = loss.clone();
        reader = Box::new(ec);
    }
    // --rate: CSV computes rates itself (its cells); the exports that take
    // values as they come get counters as rates from this stage.
    if wopts.rate && matches!(to.id(), FormatId::ChromeJson | FormatId::Ctf) {
        reader = Box::new(crate::stages::Rates::wrap(reader));
    }
    // KPI lines from any process data (proc.* metrics, process events).
    if to.id() == FormatId::Kpi {
        let mut k = crate::stages::KpiFromProc::wrap(reader);
        k.loss = loss.clone();
        reader = Box::new(k);
    }
    (reader, loss)
}

/// Targets into which a `.dlt`'s numeric verbose arguments also become
/// samples (docs/dlt.md): those that hold series beside the events. LTT,
/// the reversible encoding, and DLT itself keep the messages alone; KPI
/// lines hold process data only; a timeline would add messages.
pub const ARG_SAMPLE_TARGETS: [FormatId; 7] = [
    FormatId::Pcp,
    FormatId::Mmv,
    FormatId::Csv,
    FormatId::Parquet,
    FormatId::Perfetto,
    FormatId::ChromeJson,
    FormatId::Ctf,
];

/// Writers never invent a date: a source without one into a format that
/// needs dates is refused, naming `--time-origin` (and `--tsc-hz`).
pub fn check_dates(
    header: &Header,
    inputs: &[PathBuf],
    to: &dyn Format,
    wopts: &WriteOptions,
) -> Result<()> {
    if to.info().absolute_time.needed(wopts) && !crate::stages::origin::has_dates(header) {
        let input = inputs
            .first()
            .map(PathBuf::as_path)
            .unwrap_or(Path::new("-"));
        return Err(crate::stages::origin::no_dates_error(
            header,
            input,
            to.id().name(),
        ));
    }
    Ok(())
}

/// Refuse what must not be committed: an output that holds none of what
/// reached the writer (design/model.md §5), or under `--strict` any loss.
pub fn refuse(
    loss: &LossReport,
    source: FormatId,
    to: &dyn Format,
    wopts: &WriteOptions,
) -> Result<()> {
    if source != to.id() && loss.written.values().all(|&n| n == 0) {
        return Err(Error::nothing_to_write(
            "nothing to write",
            format!(
                "the {} format holds none of what this {source} source has; nothing written\n{}",
                to.id(),
                loss.to_string().trim_end()
            ),
        ));
    }
    if wopts.strict && loss.has_loss() {
        return Err(Error::Strict(format!(
            "nothing written; the {} writer would lose data:\n{}",
            to.id(),
            loss
        )));
    }
    Ok(())
}

/// Pass every item on; returns how many data items the writer received.
fn feed(reader: &mut dyn TraceReader, w: &mut dyn TraceWriter) -> Result<u64> {
    if let Some(n) = w.copy_verbatim(reader)? {
        return Ok(n);
    }
    if writer_thread(reader) {
        return feed_threaded(reader, w);
    }
    // Items come in runs (`TraceReader::next_batch`): per item, the stages
    // cost a call each, more than the writing of a timeline entry.
    let mut run = Vec::with_capacity(RUN_ITEMS);
    let mut data = 0u64;
    loop {
        let more = reader.next_batch(&mut run, RUN_ITEMS)?;
        for item in &run {
            data += item.is_data() as u64;
            w.write_item(item)?;
        }
        reader.recycle_batch(&mut run);
        if !more {
            return Ok(data);
        }
    }
}

/// Items asked for at a time on one thread: small enough to stay in the
/// cache between reading and writing.
const RUN_ITEMS: usize = 256;

/// Inputs smaller than this are converted on one thread: handing their
/// items to a second costs about what it saves (LTT `smp_example`, 1.6 MB:
/// 28 ms on two threads, 26 ms on one).
const THREAD_FROM_BYTES: u64 = 8 << 20;

/// The writer gets a thread of its own when there is a second CPU and the
/// input is not small (`POLYTRACE_WRITER_THREAD=0` keeps one thread, `=1`
/// takes two whatever the size).
fn writer_thread(reader: &dyn TraceReader) -> bool {
    match std::env::var_os("POLYTRACE_WRITER_THREAD") {
        Some(v) if v == "0" => return false,
        Some(v) if v == "1" => return true,
        _ => {}
    }
    // A reader that cannot tell its size (a stream) may be long.
    let large = reader
        .progress()
        .is_none_or(|(_, total)| total >= THREAD_FROM_BYTES);
    large && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1)
}

/// Items travel in batches (one channel operation per batch, not per
/// item), closed at this many items, values or bytes, whichever comes
/// first, so that wide PCP samples do not make a batch large and a batch
/// stays in the cache. (4,096 items rather than 1,024: fewer hand-offs,
/// x167.dlt -> PCP 0.435 -> 0.420 s; the byte bound closes a batch of
/// KPI events at about 3,600.)
const BATCH_ITEMS: usize = 4096;
const BATCH_VALUES: usize = 4096;
const BATCH_BYTES: usize = 256 << 10;
/// Batches under way at most: memory stays flat whatever the input size.
const BATCHES_AHEAD: usize = 4;

fn weight(item: &Item) -> usize {
    match item {
        Item::EventRun(r) => r.len(),
        Item::Sample(s) => s
            .metrics
            .iter()
            .map(|m| m.values.as_ref().map_or(1, Vec::len))
            .sum::<usize>()
            .max(1),
        _ => 1,
    }
}

/// Reader and stages on this thread, the writer on another: the two halves
/// of a conversion cost about the same, so two CPUs nearly halve the wall
/// time. Items cross in their byte form ([`crate::model::wire`]): the
/// reader gets each item back as soon as it is encoded (its buffers are
/// reused while still in this CPU's cache) and the writer decodes into
/// items of its own; written batches come back empty for reuse.
fn feed_threaded(reader: &mut dyn TraceReader, w: &mut dyn TraceWriter) -> Result<u64> {
    use crate::model::wire::{Ordered, WireBatch, WireDecoder, WireEncoder};
    use std::sync::mpsc;
    let (full_tx, full_rx) = mpsc::sync_channel::<WireBatch>(BATCHES_AHEAD);
    let (spent_tx, spent_rx) = mpsc::channel::<WireBatch>();
    let runs = w.takes_runs();
    std::thread::scope(|s| {
        // Named, so profiles and debuggers tell the two halves apart.
        let writer = std::thread::Builder::new()
            .name("writer".into())
            .spawn_scoped(s, move || -> Result<()> {
                let mut dec = WireDecoder::new();
                for mut batch in full_rx {
                    dec.each(&mut batch, |item| w.write_item(item))?;
                    // The reader may have stopped; the batch is then dropped here.
                    if let Err(mpsc::SendError(b)) = spent_tx.send(batch) {
                        drop(b);
                    }
                }
                Ok(())
            })
            .map_err(|e| Error::Unsupported(format!("cannot start the writer thread: {e}")))?;
        let mut data = 0u64;
        let mut enc = WireEncoder::new();
        let mut spare: Vec<WireBatch> = Vec::new();
        let mut batch = WireBatch::default();
        let mut run: Vec<Item> = Vec::with_capacity(RUN_ITEMS);
        let mut values = 0usize;
        let mut read_err = None;
        let mut writer_gone = false;
        // A time-ordering stage hands its window over: items wait in it as
        // records, and go back to the reader at once (`wire::Ordered`).
        let mut order = reader.take_ordering().map(|(w, cap)| Ordered::new(w, cap));
        // Then a message's events may come as one run, ordered as one
        // record (`Ordered` counts its events against the cap).
        if order.is_some() && runs {
            reader.event_runs();
        }
        let mut restarts = reader.restarts();
        loop {
            // Runs of a few items (`next_batch`), so that a batch closes
            // near its bounds.
            let room = RUN_ITEMS
                .min(BATCH_ITEMS.saturating_sub(batch.len()))
                .max(1);
            let got = reader.next_batch(&mut run, room);
            if let Some(o) = &mut order {
                // The run is a new clock cycle's: all that waits leaves
                // first, and the cycle is ordered on its own.
                let now = reader.restarts();
                if now != restarts {
                    restarts = now;
                    o.flush(&mut batch);
                }
            }
            // On an error, the items before it are still written.
            for item in run.iter_mut() {
                data += item.is_data() as u64;
                values += weight(item);
                match &mut order {
                    Some(o) => o.accept(&mut enc, item, &mut batch),
                    None => enc.push(item, &mut batch),
                }
            }
            if let Some(o) = &mut order {
                o.settle(&mut batch);
            }
            // Back at once, while their buffers are in this CPU's cache.
            reader.recycle_batch(&mut run);
            let more = match got {
                Ok(more) => more,
                Err(e) => {
                    read_err = Some(e);
                    break;
                }
            };
            if !more {
                break;
            }
            if batch.len() >= BATCH_ITEMS
                || values >= BATCH_VALUES
                || batch.byte_len() >= BATCH_BYTES
            {
                // Written batches come back to be filled again: as many
                // batches as can be under way, allocated once.
                for mut b in spent_rx.try_iter() {
                    reader.recycle_batch(b.whole_mut());
                    b.shrink_to(2 * BATCH_BYTES);
                    spare.push(b);
                }
                let next = spare.pop().unwrap_or_default();
                if full_tx.send(std::mem::replace(&mut batch, next)).is_err() {
                    writer_gone = true;
                    break;
                }
                values = 0;
            }
        }
        if let (Some(o), None, false) = (&mut order, &read_err, writer_gone) {
            // The end: all that waits leaves (not after an error, as
            // `Reorder` gives none of it then).
            o.flush(&mut batch);
        }
        if !writer_gone && !batch.is_empty() {
            // An error here means the writer failed: its join says why.
            let _ = full_tx.send(batch);
        }
        drop(full_tx);
        let wrote = match writer.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        };
        match (read_err, wrote) {
            (Some(e), _) => Err(e),
            (None, Err(e)) => Err(e),
            (None, Ok(())) => Ok(data),
        }
    })
}

/// Nothing to write is an error, not an empty file that no reader accepts.
fn nothing_check(data: u64) -> Result<()> {
    if data == 0 {
        return Err(Error::nothing_to_write(
            "nothing to write",
            "no data item (event, sample, mark or annotation) reached the writer: \
             the input has none, or none falls inside --begin/--end",
        ));
    }
    Ok(())
}

/// Name the input in a [`Error::NothingToWrite`] ("… in FILE: why").
pub fn name_input(e: Error, input: &str) -> Error {
    match e {
        Error::NothingToWrite { what, why } => Error::NothingToWrite {
            what: format!("{what} in {input}"),
            why,
        },
        e => e,
    }
}

/// Stream `reader` into a new output of format `to`.
pub fn convert(
    reader: Box<dyn TraceReader>,
    inputs: &[PathBuf],
    to: &dyn Format,
    dest: Dest<'_>,
    wopts: &WriteOptions,
) -> Result<ConvertOutcome> {
    let caps = to.caps();
    if !caps.write {
        return Err(formats::not_implemented(to.id(), "writing"));
    }
    check_dates(reader.header(), inputs, to, wopts)?;
    let source = reader.header().source;
    let mut out = ConvertOutcome::default();
    let (mut reader, adapter_loss) = adapt(reader, to, wopts);
    let header = reader.header().clone();
    let run = |reader: &mut Box<dyn TraceReader>, target: &OutTarget| -> Result<LossReport> {
        let mut w = to.create(target, &header, wopts)?;
        let data = feed(reader.as_mut(), w.as_mut())?;
        fatal(reader.diagnostics())?;
        if data == 0 && adapter_loss.borrow().has_drops() {
            // Everything the source held was left out: say what.
            return Err(Error::nothing_to_write(
                "nothing to write",
                format!(
                    "the {} format holds none of what this {source} source has; nothing written\n{}",
                    to.id(),
                    adapter_loss.borrow().to_string().trim_end()
                ),
            ));
        }
        nothing_check(data)?;
        // A writer refuses (NothingToWrite) when none of the data suits
        // its format; the staged output is then dropped unseen.
        let mut loss = w.finish()?;
        // What the stages adapted counts as loss too (--strict sees it).
        loss.merge(&adapter_loss.borrow());
        refuse(&loss, source, to, wopts)?;
        Ok(loss)
    };
    match dest {
        Dest::Stdout => {
            if !caps.text_output {
                return Err(Error::Usage(format!(
                    "the {} format is binary: give -o FILE, not stdout",
                    to.id()
                )));
            }
            if wopts.strict {
                // Held in a file until the loss is known: nothing reaches
                // stdout if the conversion is refused.
                let tmp = tempfile::NamedTempFile::new().map_err(|e| Error::io("<tmp>", e))?;
                out.loss = run(&mut reader, &OutTarget::Path(tmp.path().to_path_buf()))?;
                let mut f =
                    std::fs::File::open(tmp.path()).map_err(|e| Error::io(tmp.path(), e))?;
                std::io::copy(&mut f, &mut std::io::stdout().lock())
                    .map_err(|e| Error::io("<stdout>", e))?;
            } else {
                out.loss = run(&mut reader, &OutTarget::Stdout)?;
            }
        }
        Dest::Path { path, .. } if caps.text_output && crate::output::is_stream_node(path) => {
            // A FIFO or character device is written into, as a shell's `>`
            // would, never replaced.
            let dev = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| Error::io(path, e))?;
            let _to = crate::output::StdoutTo::redirect(&dev).map_err(|e| Error::io(path, e))?;
            let into_node = |reader: &mut Box<dyn TraceReader>| -> Result<LossReport> {
                if !wopts.strict {
                    return run(reader, &OutTarget::Stdout);
                }
                // As for stdout: held until the loss is known.
                let tmp = tempfile::NamedTempFile::new().map_err(|e| Error::io("<tmp>", e))?;
                let loss = run(reader, &OutTarget::Path(tmp.path().to_path_buf()))?;
                let mut f =
                    std::fs::File::open(tmp.path()).map_err(|e| Error::io(tmp.path(), e))?;
                std::io::copy(&mut f, &mut std::io::stdout().lock())
                    .map_err(|e| Error::io(path, e))?;
                Ok(loss)
            };
            out.loss = into_node(&mut reader).map_err(|e| match e {
                Error::Usage(m) => Error::Output {
                    path: path.to_path_buf(),
                    msg: format!("is a FIFO or device: {m}"),
                },
                e => e,
            })?;
        }
        Dest::Path { path, force } => {
            let staged = Staged::new(path, inputs, force, to.id().name())?;
            out.loss =
                run(&mut reader, &OutTarget::Path(staged.path())).map_err(|e| staged.relabel(e))?;
            out.outputs = staged.commit()?;
        }
        Dest::Dataset { root } => {
            if !to.dataset() {
                return Err(Error::Usage(format!(
                    "the {} format writes one output per input, not a dataset",
                    to.id()
                )));
            }
            // Staged inside the dataset: the files are linked into place
            // from there, on the same file system.
            let name = inputs
                .first()
                .and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "input".into());
            let staged = Staged::new(
                &root.join(format!(".{name}.part")),
                inputs,
                true,
                to.id().name(),
            )?;
            let mut dwopts = wopts.clone();
            dwopts.dataset = true;
            let run = |reader: &mut Box<dyn TraceReader>| -> Result<LossReport> {
                let mut w = to.create(&OutTarget::Path(staged.path()), &header, &dwopts)?;
                nothing_check(feed(reader.as_mut(), w.as_mut())?)?;
                let mut loss = w.finish()?;
                loss.merge(&adapter_loss.borrow());
                refuse(&loss, source, to, &dwopts)?;
                Ok(loss)
            };
            out.loss = run(&mut reader).map_err(|e| staged.relabel(e))?;
            out.outputs = staged.commit_dataset(root)?;
        }
    }
    out.diagnostics = reader.diagnostics().to_vec();
    Ok(out)
}
