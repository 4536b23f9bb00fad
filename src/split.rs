//! `convert --split DURATION|SIZE`: numbered outputs `OUT.000`, `OUT.001`,
//! … each a complete file of the target format. Every piece starts with the
//! definitions in force at its start (event types, metric descriptors,
//! instance domains as one full membership, help, labels), so each reads
//! on its own. All pieces are staged and committed together: a failure
//! leaves none behind.

use crate::error::Result;
use crate::formats::{self, Format};
use crate::model::*;
use crate::options::WriteOptions;
use crate::output::{OutTarget, Staged};
use crate::pipeline::{adapt, ConvertOutcome};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How to cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitBy {
    /// Each piece covers this many nanoseconds, counted from the first
    /// data item (piece k: `[t0 + k·D, t0 + (k+1)·D)`).
    Duration(u64),
    /// A new piece starts once the current one holds this many bytes
    /// (checked every 16 data items, so a piece ends a little past it;
    /// writers that do not count their bytes are measured on disk, where
    /// up to 64 KiB per file may still be buffered).
    Size(u64),
    /// A new piece where the source's clock restarts (`TraceReader::
    /// restarts`: a DLT ECU's new lifecycle).
    Restart,
}

/// The definitions in force, to repeat at the start of each piece.
#[derive(Default)]
struct Defs {
    types: Vec<Arc<EventType>>,
    metrics: Vec<Arc<MetricDesc>>,
    /// Per indom (in first-seen order): its current members.
    indoms: Vec<(IndomId, Vec<Instance>)>,
    help: BTreeMap<(HelpTarget, bool), Help>,
    labels: BTreeMap<(LabelTarget, InstId), LabelSet>,
}

impl Defs {
    fn note(&mut self, item: &Item) {
        match item {
            Item::EventType(t) => match self.types.iter_mut().find(|x| x.id == t.id) {
                Some(x) => *x = t.clone(),
                None => self.types.push(t.clone()),
            },
            Item::Metric(m) => match self.metrics.iter_mut().find(|x| x.id == m.id) {
                Some(x) => *x = m.clone(),
                None => self.metrics.push(m.clone()),
            },
            Item::Indom(u) => {
                let k = match self.indoms.iter().position(|x| x.0 == u.id) {
                    Some(k) => k,
                    None => {
                        self.indoms.push((u.id, Vec::new()));
                        self.indoms.len() - 1
                    }
                };
                let cur = &mut self.indoms[k].1;
                if u.kind == IndomKind::Full {
                    cur.clear();
                }
                cur.retain(|i| {
                    !u.removed.contains(&i.id) && !u.instances.iter().any(|n| n.id == i.id)
                });
                cur.extend(u.instances.iter().cloned());
            }
            Item::Help(h) => {
                self.help.insert((h.target, h.oneline), h.clone());
            }
            Item::Labels(l) => {
                self.labels.insert((l.target, l.inst), l.clone());
            }
            _ => {}
        }
    }

    /// The definitions as items, stamped at `t` where they carry a time.
    fn replay(&self, t: Timestamp) -> Vec<Item> {
        let mut v: Vec<Item> = Vec::new();
        v.extend(self.types.iter().cloned().map(Item::EventType));
        v.extend(self.metrics.iter().cloned().map(Item::Metric));
        for (id, members) in &self.indoms {
            let mut instances = members.clone();
            instances.sort_by_key(|i| i.id);
            v.push(Item::Indom(IndomUpdate {
                time: t,
                id: *id,
                kind: IndomKind::Full,
                instances,
                removed: Vec::new(),
                extras: Extras::default(),
            }));
        }
        v.extend(self.help.values().cloned().map(Item::Help));
        v.extend(self.labels.values().map(|l| {
            let mut l = l.clone();
            if l.time.is_some() {
                l.time = Some(t);
            }
            Item::Labels(l)
        }));
        v
    }
}

/// `OUT.000`, `OUT.001`, …
pub fn piece_path(out: &Path, k: usize) -> PathBuf {
    let mut s = out.as_os_str().to_owned();
    s.push(format!(".{k:03}"));
    PathBuf::from(s)
}

struct Piece {
    staged: Staged,
    writer: Box<dyn TraceWriter>,
}

/// Stream `reader` into numbered outputs of format `to` beside `out`.
pub fn convert_split(
    reader: Box<dyn TraceReader>,
    inputs: &[PathBuf],
    to: &dyn Format,
    out: &Path,
    force: bool,
    wopts: &WriteOptions,
    by: SplitBy,
) -> Result<ConvertOutcome> {
    if !to.caps().write {
        return Err(formats::not_implemented(to.id(), "writing"));
    }
    crate::pipeline::check_dates(reader.header(), inputs, to, wopts)?;
    let source = reader.header().source;
    let (mut reader, adapter_loss) = adapt(reader, to, wopts);
    let header = reader.header().clone();
    let mut result = ConvertOutcome::default();
    let mut done: Vec<Staged> = Vec::new();
    let mut defs = Defs::default();
    let open = |k: usize| -> Result<Piece> {
        let staged = Staged::new(&piece_path(out, k), inputs, force, to.id().name())?;
        let writer = to.create(&OutTarget::Path(staged.path()), &header, wopts)?;
        Ok(Piece { staged, writer })
    };
    let mut cur = open(0)?;
    let mut k = 0usize;
    let mut t0: Option<Timestamp> = None;
    let mut data_in_piece = 0u64;
    let mut close = |p: Piece, result: &mut ConvertOutcome| -> Result<()> {
        let loss = p.writer.finish()?;
        result.loss.merge(&loss);
        done.push(p.staged);
        Ok(())
    };
    // A cut seen at a timed item waits for the next data item: what comes
    // in between (PCP lists an instant's indom records before its result)
    // is folded into the definitions the new piece starts with, so no
    // piece holds two records of one indom for one instant.
    let mut pending: Option<usize> = None;
    let mut restarts = reader.restarts();
    while let Some(item) = reader.next_item()? {
        if item.is_data() && t0.is_none() {
            t0 = item.time();
        }
        let next = match (by, item.time(), t0) {
            (SplitBy::Duration(d), Some(t), Some(first)) => {
                let off = (t.0 - first.0).max(0) as u64;
                ((off / d) as usize).max(k)
            }
            (SplitBy::Size(max), Some(_), _) if item.is_data() && data_in_piece > 0 => {
                // Without the writer's count, the staged files are measured
                // every few items (a directory walk).
                let size = match cur.writer.bytes_written() {
                    Some(n) => Some(n),
                    None if data_in_piece.is_multiple_of(16) => Some(cur.staged.written_bytes()),
                    None => None,
                };
                if size.is_some_and(|n| n >= max) {
                    k + 1
                } else {
                    k
                }
            }
            (SplitBy::Restart, _, _) if item.is_data() => {
                let r = reader.restarts();
                let n = k + r.saturating_sub(restarts) as usize;
                restarts = r;
                n
            }
            _ => k,
        };
        if next > k {
            pending = Some(pending.map_or(next, |p| p.max(next)));
        }
        if let Some(n) = pending {
            if !item.is_data() {
                defs.note(&item);
                continue;
            }
            // Pieces with no data in a gap are not written: numbers keep
            // counting time.
            close(std::mem::replace(&mut cur, open(n)?), &mut result)?;
            k = n;
            pending = None;
            data_in_piece = 0;
            for d in defs.replay(item.time().unwrap_or_default()) {
                cur.writer.write_item(&d)?;
            }
        }
        if item.is_data() {
            data_in_piece += 1;
        } else {
            defs.note(&item);
        }
        cur.writer.write_item(&item)?;
        reader.recycle(item);
    }
    close(cur, &mut result)?;
    result.loss.merge(&adapter_loss.borrow());
    crate::pipeline::refuse(&result.loss, source, to, wopts)?;
    crate::pipeline::fatal(reader.diagnostics())?;
    for s in done {
        result.outputs.extend(s.commit()?);
    }
    result.diagnostics = reader.diagnostics().to_vec();
    Ok(result)
}
