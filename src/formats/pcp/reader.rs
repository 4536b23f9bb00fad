//! PCP archive reader: loads `.meta` whole (as libpcp does), then streams
//! the data volumes in order, interleaving time-stamped metadata (instance
//! domains, label sets) before the first result at or after their time.

use super::archive::{self, Members, Rec, RecordReader};
use super::data::{self, FlatVal, FlatVset, RawResult};
use super::events::EventDecoder;
use super::layout::*;
use super::meta::{self, InDomRec, LabelRec, MetaRec, Parsed, Scratch, TextRec};
use crate::error::{Diagnostic, Error, Position, Result};
use crate::model::*;
use crate::options::ReadOptions;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use std::sync::Arc;

/// Everything in `.meta`, in file order, plus positions.
pub struct MetaFile {
    pub label: LogLabel,
    pub recs: Vec<(u64, MetaRec)>,
    /// Decompressed size of `.meta` read so far (the end offset if complete).
    pub size: u64,
}

/// Load the whole `.meta`. In salvage mode damage stops the load with a
/// diagnostic; otherwise it is an error.
pub fn load_meta(m: &Members, salvage: bool, diags: &mut Vec<Diagnostic>) -> Result<MetaFile> {
    let mut recs = Vec::new();
    let (label, size, _) = walk_meta(m, salvage, diags, |off, _, _, p, s| {
        let r = match p {
            Parsed::Desc(d) => MetaRec::Desc(d),
            Parsed::InDom => MetaRec::InDom(std::mem::take(&mut s.indom)),
            Parsed::Label => MetaRec::Label(std::mem::take(&mut s.label)),
            Parsed::Text => MetaRec::Text(std::mem::take(&mut s.text)),
        };
        recs.push((off, r));
    })?;
    Ok(MetaFile { label, recs, size })
}

/// Parse every `.meta` record in turn, handing each to `f` with its offset
/// and bytes (descriptors owned, the others in the scratch buffers). Gives
/// the label and where reading stopped (the end, or damage `--salvage` stopped at).
fn walk_meta(
    m: &Members,
    salvage: bool,
    diags: &mut Vec<Diagnostic>,
    mut f: impl FnMut(u64, u64, &[u8], Parsed, &mut Scratch),
) -> Result<(LogLabel, u64, Scratch)> {
    let mut rr = RecordReader::open(&m.meta)?;
    let label = rr.label()?;
    if label.vol != -1 {
        diags.push(Diagnostic::warning(
            Position::at(&m.meta, 0, Some(0)),
            format!("label volume {} in .meta (expected -1)", label.vol),
        ));
    }
    let mut buf = Vec::new();
    let mut s = Scratch::default();
    loop {
        let off = rr.pos;
        let recno = rr.recno;
        let r = rr.next(&mut buf).and_then(|r| match r {
            Rec::Eof => Ok(None),
            Rec::Ok => {
                let at = meta::RecAt {
                    path: &rr.path,
                    off,
                    recno,
                };
                meta::parse_into(label.version, &buf, at, diags, &mut s).map(Some)
            }
        });
        match r {
            Ok(Some(p)) => f(off, recno, &buf, p, &mut s),
            Ok(None) => break,
            Err(e) if salvage => {
                diags.push(Diagnostic::salvaged(
                    Position::at(&m.meta, off, Some(recno)),
                    format!("metadata damaged, later metadata ignored: {e}"),
                ));
                break;
            }
            Err(e) => return Err(e),
        }
    }
    Ok((label, rr.pos, s))
}

/// A `.meta` record waiting to become items.
enum MetaAt {
    /// Parsed at open: descriptors (their names move into the items), and
    /// every record of an archive whose event records are decoded.
    Parsed(MetaRec),
    /// Checked at open; its bytes are in `PcpReader::meta_bytes` from `at`,
    /// parsed again when its items are made (into kept buffers: no
    /// allocation per record or per instance name).
    Raw {
        at: usize,
        len: usize,
        off: u64,
        recno: u64,
    },
}

/// `.meta` as the item reader keeps it.
struct LeanMeta {
    label: LogLabel,
    size: u64,
    /// (time of time-stamped records, record) in file order.
    recs: Vec<(Option<i64>, MetaAt)>,
    bytes: Vec<u8>,
    /// The buffers the records were parsed into (sized by then).
    scratch: Scratch,
    events: Option<EventDecoder>,
}

/// Load `.meta` for the item reader: descriptors parsed, every other
/// record checked and kept as its bytes. An archive polytrace wrote event
/// records into is parsed whole, for the event decoder.
fn load_lean(m: &Members, salvage: bool, diags: &mut Vec<Diagnostic>) -> Result<LeanMeta> {
    let mut recs = Vec::new();
    let mut bytes = Vec::new();
    let mut has_events = false;
    let (label, size, scratch) = walk_meta(m, salvage, diags, |off, recno, rec, p, s| {
        let stamp = match p {
            Parsed::Desc(d) => {
                recs.push((None, MetaAt::Parsed(MetaRec::Desc(d))));
                return;
            }
            Parsed::InDom => Some(s.indom.stamp.ns()),
            Parsed::Label => Some(s.label.stamp.ns()),
            Parsed::Text => {
                has_events |= EventDecoder::marks_events(&s.text);
                None
            }
        };
        let at = MetaAt::Raw {
            at: bytes.len(),
            len: rec.len(),
            off,
            recno,
        };
        recs.push((stamp, at));
        bytes.extend_from_slice(rec);
    })?;
    let mut lean = LeanMeta {
        label,
        size,
        recs,
        bytes,
        scratch,
        events: None,
    };
    if has_events {
        let mut all = Vec::with_capacity(lean.recs.len());
        for (_, r) in std::mem::take(&mut lean.recs) {
            let r = match r {
                MetaAt::Parsed(r) => r,
                MetaAt::Raw {
                    at,
                    len,
                    off,
                    recno,
                } => {
                    let rec = meta::RecAt {
                        path: &m.meta,
                        off,
                        recno,
                    };
                    let bytes = &lean.bytes[at..at + len];
                    meta::parse(lean.label.version, bytes, rec, &mut Vec::new())?
                }
            };
            all.push((0, r));
        }
        lean.events = EventDecoder::from_meta(&all);
        lean.bytes = Vec::new();
        lean.recs = all
            .into_iter()
            .map(|(_, r)| (r.stamp().map(|s| s.ns()), MetaAt::Parsed(r)))
            .collect();
    }
    Ok(lean)
}

pub fn label_target(ltype: i32, ident: u32) -> LabelTarget {
    match ltype {
        PM_LABEL_DOMAIN => LabelTarget::Domain(ident),
        PM_LABEL_CLUSTER => LabelTarget::Cluster(ident),
        PM_LABEL_ITEM => LabelTarget::Item(ident),
        PM_LABEL_INDOM => LabelTarget::Indom(ident),
        PM_LABEL_INSTANCES => LabelTarget::Instances(ident),
        _ => LabelTarget::Context,
    }
}

/// Model items of one metadata record, into `out`; `spare` lends buffers
/// of items the writer is done with, so that an archive's many instance
/// names are copied into old strings instead of new ones.
fn meta_items(r: MetaRec, spare: &mut Spare, out: &mut VecDeque<Item>) {
    match r {
        MetaRec::Desc(d) => {
            // The record's names move into the descriptor (no copy).
            let md = MetricDesc {
                id: d.pmid,
                names: d.names,
                vtype: ValueType::from_pcp_code(d.vtype),
                sem: Semantics::from_pcp_code(d.sem),
                units: Units::from_word(d.units),
                indom: (d.indom != PM_INDOM_NULL).then_some(d.indom),
                help_short: None,
                help_long: None,
                extras: Extras::default(),
            };
            out.push_back(Item::Metric(Arc::new(md)));
        }
        MetaRec::Text(t) => out.push_back(help_item(&t, spare)),
        MetaRec::InDom(i) => out.push_back(indom_item(&i, spare)),
        MetaRec::Label(l) => label_items(&l, spare, out),
    }
}

fn help_item(t: &TextRec, spare: &mut Spare) -> Item {
    let target = if t.ttype & PM_TEXT_INDOM != 0 {
        HelpTarget::Indom(t.ident)
    } else {
        HelpTarget::Metric(t.ident)
    };
    Item::Help(Help {
        target,
        oneline: t.ttype & PM_TEXT_ONELINE != 0,
        text: spare.string(&t.text),
    })
}

fn indom_item(i: &InDomRec, spare: &mut Spare) -> Item {
    let delta = i.rtype == TYPE_INDOM_DELTA;
    let mut u = spare.indoms.pop().unwrap_or_else(|| IndomUpdate {
        time: Timestamp(0),
        id: 0,
        kind: IndomKind::Full,
        instances: Vec::new(),
        removed: Vec::new(),
        extras: Extras::default(),
    });
    u.time = Timestamp(i.stamp.ns());
    u.id = i.indom;
    u.kind = if delta {
        IndomKind::Delta
    } else {
        IndomKind::Full
    };
    u.extras.clear();
    u.instances.reserve(i.len());
    for (id, name) in i.entries() {
        match name {
            Some(n) => u.instances.push(Instance {
                id,
                name: spare.string(n),
            }),
            None => u.removed.push(id),
        }
    }
    if let Some(raw) = &i.raw_names {
        u.extras.set(
            X_RAW_NAMES,
            ExtraValue::List(raw.iter().map(|b| ExtraValue::Bytes(b.clone())).collect()),
        );
    }
    if delta {
        u.extras.set(
            X_DELTA_ORDER,
            ExtraValue::List(
                i.entries()
                    .map(|(id, _)| ExtraValue::I64(id as i64))
                    .collect(),
            ),
        );
    }
    Item::Indom(u)
}

fn label_items(l: &LabelRec, spare: &mut Spare, out: &mut VecDeque<Item>) {
    for k in 0..l.sets.len() {
        out.push_back(label_item(l, k, spare));
    }
}

/// The label set `k` of `l`.
fn label_item(l: &LabelRec, k: usize, spare: &mut Spare) -> Item {
    let s = &l.sets[k];
    let mut ls = spare.labels.pop().unwrap_or_else(|| LabelSet {
        time: None,
        target: LabelTarget::Context,
        inst: 0,
        json: String::new(),
        labels: Vec::new(),
    });
    ls.time = Some(Timestamp(l.stamp.ns()));
    ls.target = label_target(l.ltype, l.ident);
    ls.inst = s.inst as i32;
    ls.json = spare.string(&String::from_utf8_lossy(&s.json));
    let sub = |spare: &mut Spare, o: u16, n: usize| {
        let o = o as usize;
        match s.json.get(o..o.saturating_add(n)) {
            Some(b) => spare.string(&String::from_utf8_lossy(b)),
            None => spare.string(""),
        }
    };
    for x in &s.labels {
        let label = Label {
            name: sub(spare, x.name_off, x.name_len as usize),
            value: sub(spare, x.value_off, x.value_len as usize),
            flags: x.flags as u32,
        };
        ls.labels.push(label);
    }
    Item::Labels(ls)
}

/// Header of an archive from its `.meta` label.
pub fn header_of(label: &LogLabel, m: &Members) -> Header {
    let mut h = Header::new(FormatId::Pcp, label.version.number().to_string());
    h.host = Some(label.hostname.clone());
    h.timezone = Some(label.timezone.clone());
    h.start = Some(Timestamp(label.start.ns()));
    h.extras.set(X_PID, ExtraValue::I64(label.pid as i64));
    h.extras.set(X_START, ExtraValue::I64(label.start.ns()));
    if label.version == Version::V3 {
        h.extras
            .set(X_FEATURES, ExtraValue::U64(label.features as u64));
        h.extras
            .set(X_ZONEINFO, ExtraValue::Str(label.zoneinfo.clone()));
    }
    h.extras.set(
        X_VOLUMES,
        ExtraValue::List(
            m.volumes
                .iter()
                .map(|(v, _)| ExtraValue::U64(*v as u64))
                .collect(),
        ),
    );
    h
}

/// Streams results from the volumes in order.
pub struct VolumeWalker {
    pub members: Members,
    pub version: Version,
    pub label: LogLabel,
    vol_idx: usize,
    cur: Option<RecordReader>,
    pub buf: Vec<u8>,
    /// Offset, volume and record number of the record in `buf`.
    pub at: (u64, u32, u64),
    pub done: bool,
    /// Size on disk of each volume, for progress.
    vol_sizes: Vec<u64>,
}

impl VolumeWalker {
    pub fn new(members: Members, label: LogLabel) -> VolumeWalker {
        let vol_sizes = members
            .volumes
            .iter()
            .map(|(_, p)| std::fs::metadata(p).map_or(0, |m| m.len()))
            .collect();
        VolumeWalker {
            vol_sizes,
            version: label.version,
            members,
            label,
            vol_idx: 0,
            cur: None,
            buf: Vec::new(),
            at: (0, 0, 0),
            done: false,
        }
    }

    /// Volume bytes read so far and in all, by size on disk. A compressed
    /// volume counts once it is finished (its read position is in
    /// decompressed bytes).
    pub fn progress(&self) -> (u64, u64) {
        let total = self.vol_sizes.iter().sum();
        let k = self.vol_idx.min(self.vol_sizes.len());
        let done: u64 = self.vol_sizes[..k].iter().sum();
        let cur = match (&self.cur, self.vol_sizes.get(k)) {
            (Some(rr), Some(&size)) if !rr.compressed => rr.pos.min(size),
            _ => 0,
        };
        (done + cur, total)
    }

    pub fn path(&self) -> std::path::PathBuf {
        self.members
            .volumes
            .get(self.vol_idx)
            .map(|x| x.1.clone())
            .unwrap_or_default()
    }

    /// Load the next result record into `buf`; false at the end.
    pub fn next_record(&mut self, diags: &mut Vec<Diagnostic>) -> Result<bool> {
        if self.done {
            return Ok(false);
        }
        loop {
            if self.cur.is_none() {
                let Some((vol, path)) = self.members.volumes.get(self.vol_idx).cloned() else {
                    self.done = true;
                    return Ok(false);
                };
                let mut rr = RecordReader::open_in(&self.members, &path, false)?;
                let l = rr.label()?;
                if l.version != self.version {
                    return Err(Error::format(
                        Position::at(&path, 0, Some(0)),
                        format!(
                            "volume is archive version {} but .meta is version {}",
                            l.version.number(),
                            self.version.number()
                        ),
                    ));
                }
                if l.vol != vol as i32 {
                    diags.push(Diagnostic::warning(
                        Position::at(&path, 0, Some(0)),
                        format!("label says volume {} but the file is volume {vol}", l.vol),
                    ));
                }
                if l.hostname != self.label.hostname
                    || l.pid != self.label.pid
                    || l.start != self.label.start
                {
                    diags.push(Diagnostic::warning(
                        Position::at(&path, 0, Some(0)),
                        "label differs from the .meta label (host, pid or start)",
                    ));
                }
                self.cur = Some(rr);
            }
            let Some(rr) = self.cur.as_mut() else {
                continue;
            };
            let off = rr.pos;
            let recno = rr.recno;
            match rr.next(&mut self.buf)? {
                Rec::Ok => {
                    self.at = (off, self.members.volumes[self.vol_idx].0, recno);
                    return Ok(true);
                }
                Rec::Eof => {
                    self.cur = None;
                    self.vol_idx += 1;
                }
            }
        }
    }

    pub fn parse(&self) -> Result<RawResult<'_>> {
        data::parse_result(self.version, &self.buf)
            .map_err(|m| Error::format(Position::at(self.path(), self.at.0, Some(self.at.2)), m))
    }
}

/// The TraceReader.
pub struct PcpReader {
    header: Header,
    /// PM_TYPE of each metric (looked up per value set).
    types: HashMap<u32, i32, BuildHasherDefault<IntHasher>>,
    /// Descriptors and help, in file order: made into items first.
    untimed: VecDeque<MetaAt>,
    /// Time-stamped metadata (instance domains, label sets) in file order,
    /// made into items before the first result at or after their time.
    timed: VecDeque<(i64, MetaAt)>,
    /// The bytes of the `MetaAt::Raw` records, and the buffers they are
    /// parsed into.
    meta_bytes: Vec<u8>,
    meta_scratch: Scratch,
    /// The next set of the label record in `meta_scratch` to hand out
    /// (one at a time, so each set's buffers serve the next).
    label_at: Option<usize>,
    /// Items of the metadata record being handed out.
    meta_out: VecDeque<Item>,
    held: Option<Item>,
    /// Event records polytrace wrote, turned back into events.
    events: Option<EventDecoder>,
    /// Data items of the current result not handed out yet.
    ready: VecDeque<Item>,
    scratch: Vec<Event>,
    /// The value sets and values of the current result (kept for reuse).
    flat: (Vec<FlatVset>, Vec<(i32, FlatVal)>),
    /// Parts of samples the writer is done with (`recycle`), refilled by
    /// later results instead of allocated again.
    spare: Spare,
    /// Bytes done during a verbatim copy (`progress_shared`).
    copied: std::sync::Arc<std::sync::atomic::AtomicU64>,
    walker: VolumeWalker,
    diags: Vec<Diagnostic>,
    salvage: bool,
    /// Where `.meta` was read to (its end, or the damage `--salvage` stopped at).
    meta_end: u64,
    /// The index is undamaged: a verbatim copy can keep it.
    index_ok: bool,
    /// Items were handed out: no verbatim copy any more.
    started: bool,
}

/// Where a verbatim copy puts the records (the PCP writer).
pub trait RecordSink {
    fn meta_record(&mut self, rec: &[u8]) -> Result<()>;
    fn result_record(&mut self, vol: u32, stamp: Stamp, rec: &[u8]) -> Result<()>;
}

impl PcpReader {
    pub fn open(m: Members, opts: &ReadOptions) -> Result<PcpReader> {
        let mut diags = Vec::new();
        let mf = load_lean(&m, opts.salvage, &mut diags)?;
        // The records are read in order, not through the index, but a
        // damaged index is damage all the same.
        let mut index_ok = true;
        if let Some(e) = super::index::index_damage(&m, mf.label.version, mf.size) {
            if !opts.salvage {
                return Err(e);
            }
            index_ok = false;
            diags.push(super::index::salvaged(e, &m.base));
        }
        let mut header = header_of(&mf.label, &m);
        let events = mf.events;
        if let Some(d) = &events {
            d.apply_header(&mut header);
        }
        let mut types = HashMap::default();
        for (_, r) in &mf.recs {
            if let MetaAt::Parsed(MetaRec::Desc(d)) = r {
                types.insert(d.pmid, d.vtype);
            }
        }
        // Records become items one at a time as they are handed out (a
        // verbatim copy needs none), so the buffers of items the writer
        // gives back serve the next ones.
        let (mut untimed, mut timed) = (VecDeque::new(), VecDeque::new());
        for (stamp, r) in mf.recs {
            match stamp {
                None => untimed.push_back(r),
                Some(s) => timed.push_back((s, r)),
            }
        }
        Ok(PcpReader {
            meta_end: mf.size,
            index_ok,
            started: false,
            untimed,
            timed,
            meta_bytes: mf.bytes,
            meta_scratch: mf.scratch,
            label_at: None,
            meta_out: VecDeque::new(),
            header,
            types,
            held: None,
            events,
            ready: VecDeque::new(),
            scratch: Vec::new(),
            flat: (Vec::new(), Vec::new()),
            spare: Spare::default(),
            copied: Default::default(),
            walker: VolumeWalker::new(m, mf.label),
            diags,
            salvage: opts.salvage,
        })
    }

    /// Make the metadata record `r` into items (into `meta_out`).
    fn meta_record(&mut self, r: MetaAt) -> Result<()> {
        let (at, len, off, recno) = match r {
            MetaAt::Parsed(r) => {
                match self.events.as_ref().and_then(|d| d.items_of(&r)) {
                    Some(items) => self.meta_out.extend(items),
                    None => meta_items(r, &mut self.spare, &mut self.meta_out),
                }
                return Ok(());
            }
            MetaAt::Raw {
                at,
                len,
                off,
                recno,
            } => (at, len, off, recno),
        };
        // Checked at open (its warnings given then): parsed the same way.
        let s = &mut self.meta_scratch;
        let rec = meta::RecAt {
            path: &self.walker.members.meta,
            off,
            recno,
        };
        let bytes = &self.meta_bytes[at..at + len];
        let p = meta::parse_into(self.walker.version, bytes, rec, &mut Vec::new(), s)?;
        let (spare, out) = (&mut self.spare, &mut self.meta_out);
        match p {
            Parsed::Desc(d) => meta_items(MetaRec::Desc(d), spare, out),
            Parsed::InDom => out.push_back(indom_item(&s.indom, spare)),
            Parsed::Label => self.label_at = Some(0),
            Parsed::Text => out.push_back(help_item(&s.text, spare)),
        }
        Ok(())
    }

    /// The archive's label (of its `.meta`).
    pub fn label(&self) -> &LogLabel {
        &self.walker.label
    }

    /// Copy every record unchanged into `sink` instead of reading items:
    /// `.meta` as far as it was read at open, then each result record,
    /// checked as the item reader checks it (framing, value sets, labels
    /// of the volumes), with the same damage handling. Returns the number
    /// of results and marks, and the index entries when the copy is whole
    /// and the index undamaged (they then hold for the copy). None when
    /// items were read already.
    pub fn copy_records(
        &mut self,
        sink: &mut dyn RecordSink,
    ) -> Result<Option<(u64, Option<Vec<super::index::Entry>>)>> {
        if self.started {
            return Ok(None);
        }
        self.started = true;
        let mut rr = RecordReader::open(&self.walker.members.meta)?;
        rr.label()?;
        let mut buf = Vec::new();
        while rr.pos < self.meta_end {
            match rr.next(&mut buf)? {
                Rec::Ok => sink.meta_record(&buf)?,
                Rec::Eof => break,
            }
        }
        let mut n = 0u64;
        let mut whole = true;
        let (mut vsets, mut vals) = (Vec::new(), Vec::new());
        loop {
            match self.walker.next_record(&mut self.diags) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    whole = false;
                    self.damage(e)?;
                    break;
                }
            }
            let w = &self.walker;
            match data::parse_result_flat(w.version, &w.buf, &mut vsets, &mut vals) {
                Ok(stamp) => {
                    sink.result_record(w.at.1, stamp, &w.buf)?;
                    n += 1;
                    if n.is_multiple_of(256) {
                        let done = w.progress().0;
                        self.copied
                            .store(done, std::sync::atomic::Ordering::Relaxed);
                    }
                }
                Err(m) => {
                    whole = false;
                    let e = Error::format(Position::at(w.path(), w.at.0, Some(w.at.2)), m);
                    self.damage(e)?;
                    break;
                }
            }
        }
        self.walker.done = true;
        let index = (whole && self.index_ok)
            .then(|| super::index::read_index(&self.walker.members, self.walker.version).0)
            .filter(|e| !e.is_empty());
        Ok(Some((n, index)))
    }

    fn read_data(&mut self) -> Result<Option<Item>> {
        loop {
            if let Some(it) = self.ready.pop_front() {
                return Ok(Some(it));
            }
            match self.read_record()? {
                Some(it) => return Ok(Some(it)),
                // A result of event records only: they are in `ready`.
                None if !self.ready.is_empty() => continue,
                None if self.walker.done => return Ok(None),
                None => continue,
            }
        }
    }

    /// Turn the event records of a result back into events (into `ready`,
    /// in time order) and take their value sets out of `sets`; false when
    /// no value set is one.
    fn take_events(
        &mut self,
        rec: &[u8],
        sets: &mut Vec<FlatVset>,
        vals: &[(i32, FlatVal)],
    ) -> Result<bool> {
        let Some(dec) = &self.events else {
            return Ok(false);
        };
        if !sets.iter().any(|vs| dec.is_record(vs.pmid)) {
            return Ok(false);
        }
        let mut evs = std::mem::take(&mut self.scratch);
        evs.clear();
        let mut err = None;
        sets.retain(|vs| {
            if !dec.is_record(vs.pmid) {
                return true;
            }
            let vt = self.types.get(&vs.pmid).copied().unwrap_or(10);
            for (inst, v) in set_vals(vs, vals) {
                if let data::RawVal::Block(_, p) = v.raw(rec) {
                    if let Err(e) = dec.decode(vs.pmid, vt, *inst, p, &mut evs) {
                        err.get_or_insert(format!("metric {}: {e}", pmid_str(vs.pmid)));
                    }
                }
            }
            false
        });
        if let Some(e) = err {
            self.scratch = evs;
            let at = self.walker.at;
            return Err(Error::format(
                Position::at(self.walker.path(), at.0, Some(at.2)),
                e,
            ));
        }
        // Stable: records of one (type, stream) keep their order, and the
        // writer split results where a sort could not restore the order.
        evs.sort_by_key(|e| e.time);
        self.ready.extend(evs.drain(..).map(Item::Event));
        self.scratch = evs;
        Ok(true)
    }

    /// The items of the next result record: the first is returned, events
    /// go to `ready`. None at the end, or when the record held only events.
    fn read_record(&mut self) -> Result<Option<Item>> {
        match self.walker.next_record(&mut self.diags) {
            Ok(false) => {
                self.walker.done = true;
                return Ok(None);
            }
            Ok(true) => {}
            Err(e) => return self.damage(e),
        }
        // The record is parsed from the walker's buffer into the reader's
        // lists; take them out so the events can be decoded while `self`
        // is borrowed mutably.
        let buf = std::mem::take(&mut self.walker.buf);
        let (mut sets, mut vals) = std::mem::take(&mut self.flat);
        let out = self.record_items(&buf, &mut sets, &mut vals);
        self.walker.buf = buf;
        self.flat = (sets, vals);
        out
    }

    fn record_items(
        &mut self,
        buf: &[u8],
        sets: &mut Vec<FlatVset>,
        vals: &mut Vec<(i32, FlatVal)>,
    ) -> Result<Option<Item>> {
        let stamp = match data::parse_result_flat(self.walker.version, buf, sets, vals) {
            Ok(s) => s,
            Err(m) => {
                let at = self.walker.at;
                let e = Error::format(Position::at(self.walker.path(), at.0, Some(at.2)), m);
                return self.damage(e);
            }
        };
        let time = Timestamp(stamp.ns());
        let had_events = match self.take_events(buf, sets, vals) {
            Ok(b) => b,
            Err(e) => return self.damage(e),
        };
        if had_events && sets.is_empty() {
            return Ok(None);
        }
        if sets.is_empty() {
            return Ok(Some(Item::Mark(Mark {
                time,
                extras: Extras::default(),
            })));
        }
        let mut spare = std::mem::take(&mut self.spare);
        let types = &self.types;
        // Old v1-converted archives have value blocks typed 0 whatever the
        // descriptor says; note them so a rewrite keeps the bytes as PCP sees them.
        let mut odd: Vec<ExtraValue> = Vec::new();
        let mut ptypes: Vec<(u32, i32)> = Vec::new();
        // A recycled sample's lists, values and strings are refilled in
        // place: consecutive results mostly list the same metrics and
        // instances, so a value costs a store, not a drop and a push.
        // Archives log groups of metrics at different intervals: a kept
        // sample that began with the same metric has the same shape.
        let first = sets.first().map(|vs| vs.pmid);
        let like = spare
            .metrics
            .iter()
            .rposition(|m| m.len() == sets.len() && m.first().map(|m| m.metric) == first);
        let mut metrics = match like {
            Some(k) => spare.metrics.swap_remove(k),
            None => spare.metrics.pop().unwrap_or_default(),
        };
        if metrics.len() > sets.len() {
            for m in metrics.drain(sets.len()..) {
                if let Ok(l) = m.values {
                    spare.keep_list(l);
                }
            }
        }
        metrics.reserve(sets.len() - metrics.len());
        for (k, vs) in sets.iter().enumerate() {
            if k == metrics.len() {
                metrics.push(MetricValues {
                    metric: vs.pmid,
                    values: Err(0),
                });
            }
            let m = &mut metrics[k];
            m.metric = vs.pmid;
            if vs.numval < 0 {
                if let Ok(l) = std::mem::replace(&mut m.values, Err(vs.numval)) {
                    spare.keep_list(l);
                }
                continue;
            }
            if m.values.is_err() {
                m.values = Ok(spare.lists.pop().unwrap_or_default());
            }
            let Ok(out) = &mut m.values else {
                unreachable!("set above")
            };
            let t = types.get(&vs.pmid).copied();
            let (ev, hr) = (matches!(t, Some(9) | Some(10)), t == Some(10));
            let sv = set_vals(vs, vals);
            if out.len() > sv.len() {
                for (_, v) in out.drain(sv.len()..) {
                    spare.keep_value(v);
                }
            }
            out.reserve(sv.len() - out.len());
            let mut typed0 = false;
            for (j, (i, v)) in sv.iter().enumerate() {
                typed0 |= matches!(v, FlatVal::Block(0, _, _));
                if j == out.len() {
                    out.push((*i, Value::I64(0)));
                }
                let (inst, slot) = &mut out[j];
                *inst = *i;
                match (ev, v.raw(buf)) {
                    (true, data::RawVal::Block(_, p)) => {
                        let val = data::decode_events_typed(p, hr, &mut ptypes)
                            .map(Value::Events)
                            .unwrap_or_else(|| Value::Bytes(p.to_vec()));
                        spare.keep_value(std::mem::replace(slot, val));
                    }
                    (_, raw) => data::decode_into(t, raw, slot, &mut spare.strings),
                }
            }
            if typed0 && t.is_some_and(|t| t != 0) {
                odd.push(ExtraValue::U64(vs.pmid as u64));
            }
        }
        self.spare = spare;
        let mut extras = Extras::default();
        if !odd.is_empty() {
            extras.set(X_VTYPE0, ExtraValue::List(odd));
        }
        if !ptypes.is_empty() {
            ptypes.sort();
            ptypes.dedup();
            extras.set(
                X_PARAM_TYPES,
                ExtraValue::List(
                    ptypes
                        .iter()
                        .map(|(p, t)| ExtraValue::U64(((*p as u64) << 8) | (*t as u64 & 0xff)))
                        .collect(),
                ),
            );
        }
        Ok(Some(Item::Sample(Sample {
            time,
            raw_clock: None,
            metrics,
            extras,
        })))
    }

    fn damage(&mut self, e: Error) -> Result<Option<Item>> {
        if self.salvage {
            let pos = match &e {
                Error::Format { pos, .. } => pos.clone(),
                _ => Position::new(self.walker.path()),
            };
            self.diags.push(Diagnostic::salvaged(
                pos,
                format!("stopped reading at damage: {e}"),
            ));
            self.walker.done = true;
            Ok(None)
        } else {
            Err(e)
        }
    }
}

impl TraceReader for PcpReader {
    fn header(&self) -> &Header {
        &self.header
    }
    fn next_item(&mut self) -> Result<Option<Item>> {
        self.started = true;
        loop {
            if let Some(i) = self.meta_out.pop_front() {
                return Ok(Some(i));
            }
            if let Some(k) = self.label_at {
                let l = &self.meta_scratch.label;
                if k < l.sets.len() {
                    self.label_at = Some(k + 1);
                    return Ok(Some(label_item(l, k, &mut self.spare)));
                }
                self.label_at = None;
            }
            // Descriptors and help first, time-stamped metadata by time.
            if let Some(r) = self.untimed.pop_front() {
                self.meta_record(r)?;
                continue;
            }
            let Some(h) = &self.held else {
                match self.read_data()? {
                    Some(i) => self.held = Some(i),
                    None => match self.timed.pop_front() {
                        Some((_, r)) => self.meta_record(r)?,
                        None => return Ok(None),
                    },
                }
                continue;
            };
            let t = h.time().map(|t| t.0).unwrap_or(i64::MIN);
            if self.timed.front().is_some_and(|(s, _)| *s <= t) {
                if let Some((_, r)) = self.timed.pop_front() {
                    self.meta_record(r)?;
                }
                continue;
            }
            return Ok(self.held.take());
        }
    }
    fn diagnostics(&self) -> &[Diagnostic] {
        &self.diags
    }
    fn progress(&self) -> Option<(u64, u64)> {
        Some(self.walker.progress())
    }
    fn verbatim(&mut self) -> Option<&mut dyn std::any::Any> {
        (!self.started).then_some(self as &mut dyn std::any::Any)
    }
    fn recycle(&mut self, item: Item) {
        match item {
            Item::Sample(s) => self.spare.keep(s),
            Item::Indom(u) => self.spare.keep_indom(u),
            Item::Labels(l) => self.spare.keep_labels(l),
            Item::Help(h) => self.spare.keep_string(h.text),
            _ => {}
        }
    }
    fn progress_shared(&self) -> Option<(std::sync::Arc<std::sync::atomic::AtomicU64>, u64)> {
        Some((self.copied.clone(), self.walker.progress().1))
    }
}

/// Buffers of recycled items: metric lists, value lists, strings of
/// values, strings of metadata (instance names, help and label texts: kept
/// apart, their sizes differ), instance-domain updates and label sets
/// (emptied).
#[derive(Default)]
struct Spare {
    metrics: Vec<Vec<MetricValues>>,
    lists: Vec<Vec<(InstId, Value)>>,
    strings: Vec<String>,
    texts: Vec<String>,
    indoms: Vec<IndomUpdate>,
    labels: Vec<LabelSet>,
}

impl Spare {
    /// At most this many of each are kept (a sample of pidstat has ~700
    /// value lists and ~1,700 strings; more would only hold memory).
    const LISTS: usize = 16_384;
    const STRINGS: usize = 65_536;

    /// Samples kept whole (their lists and values refilled in place by
    /// the next results); with the writer on its own thread several are
    /// under way at once. More go back as lists.
    const SAMPLES: usize = 16;

    fn keep(&mut self, s: Sample) {
        if self.metrics.len() < Self::SAMPLES {
            self.metrics.push(s.metrics);
            return;
        }
        for m in s.metrics {
            if let Ok(l) = m.values {
                self.keep_list(l);
            }
        }
    }

    /// A value list, its values left in it (refilled in place).
    fn keep_list(&mut self, l: Vec<(InstId, Value)>) {
        if self.lists.len() < Self::LISTS {
            self.lists.push(l);
        }
    }

    /// A value no longer in a list: its text buffer, if any, is kept.
    fn keep_value(&mut self, v: Value) {
        if let Value::Str(st) = v {
            if self.strings.len() < Self::STRINGS {
                self.strings.push(st);
            }
        }
    }

    fn keep_string(&mut self, s: String) {
        if self.texts.len() < Self::STRINGS {
            self.texts.push(s);
        }
    }

    // An instance-domain update's and a label set's strings go back in
    // reverse: the next one of the same shape pops each where it was (same
    // size: no reallocation).
    fn keep_indom(&mut self, mut u: IndomUpdate) {
        for i in u.instances.drain(..).rev() {
            self.keep_string(i.name);
        }
        u.removed.clear();
        if self.indoms.len() < 64 {
            self.indoms.push(u);
        }
    }

    fn keep_labels(&mut self, mut l: LabelSet) {
        for x in l.labels.drain(..).rev() {
            self.keep_string(x.value);
            self.keep_string(x.name);
        }
        self.keep_string(std::mem::take(&mut l.json));
        if self.labels.len() < 64 {
            self.labels.push(l);
        }
    }

    /// `s` in a kept string if there is one.
    fn string(&mut self, s: &str) -> String {
        let mut o = self.texts.pop().unwrap_or_default();
        o.clear();
        o.push_str(s);
        o
    }
}

/// The values of one value set of a flat result.
fn set_vals<'a>(vs: &FlatVset, vals: &'a [(i32, FlatVal)]) -> &'a [(i32, FlatVal)] {
    &vals[vs.first..vs.first + vs.numval.max(0) as usize]
}

/// Open an archive named by any member or its base name.
pub fn members_of(input: &crate::input::Input) -> Result<Members> {
    if input.kind == crate::input::InputKind::Stdin {
        return Err(crate::Error::Usage(
            "<stdin>: a PCP archive is several files (.meta, .index, volumes) and cannot come \
             through stdin: name the archive (its base name or any member file)"
                .into(),
        ));
    }
    archive::resolve(&archive::base_of(input))
}
