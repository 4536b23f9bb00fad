//! PCP archive writer (v2 or v3): `.meta`, volumes `.0 .1 …`, `.index`.
//! Labels are written with a placeholder start time and rewritten at the
//! end, once the first result's time is known.

use super::data::MISSED_PMID;
use super::events::{EventEncoder, EventResult};
use super::indoms::Tracker;
use super::layout::*;
use super::reader::{PcpReader, RecordSink};
use crate::error::{Error, Result};
use crate::model::*;
use crate::options::WriteOptions;
use crate::output::ChunkedWriter;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{IoSlice, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// pmlogger adds an index entry after about this much data.
const INDEX_EVERY: u64 = 100_000;

/// One file of the archive, written in whole chunks.
struct Out {
    path: PathBuf,
    w: ChunkedWriter<File>,
    size: u64,
}

impl Out {
    fn create(path: PathBuf) -> Result<Out> {
        let f = File::create(&path).map_err(|e| Error::io(&path, e))?;
        Ok(Out {
            path,
            w: ChunkedWriter::new(f),
            size: 0,
        })
    }
    fn put(&mut self, b: &[u8]) -> Result<()> {
        self.w.write_all(b).map_err(|e| Error::io(&self.path, e))?;
        self.size += b.len() as u64;
        Ok(())
    }
    /// Write all of `slices` (a record in pieces), as `put` would their
    /// concatenation.
    fn put_vectored(&mut self, slices: &mut [IoSlice<'_>]) -> Result<()> {
        for s in slices.iter() {
            self.put(s)?;
        }
        Ok(())
    }
    /// Write what is buffered and let the buffer go (a volume before the
    /// next one).
    fn park(&mut self) -> Result<()> {
        self.w.park().map_err(|e| Error::io(&self.path, e))
    }
    /// Flush and rewrite the label at offset 0.
    fn finish(mut self, label: &[u8]) -> Result<()> {
        let p = &self.path;
        self.w.flush().map_err(|e| Error::io(p, e))?;
        let f = self.w.get_mut();
        f.seek(SeekFrom::Start(0)).map_err(|e| Error::io(p, e))?;
        f.write_all(label).map_err(|e| Error::io(p, e))?;
        // No fsync, as in every other writer (and pmlogextract): the staged
        // files are renamed into place whole, which readers see atomically;
        // syncing 360 MB first only made the conversion wait for the disk.
        Ok(())
    }
}

fn frame(body: &mut Vec<u8>) {
    // body starts with a 4-byte placeholder for len.
    let len = (body.len() + 4) as u32;
    body[..4].copy_from_slice(&len.to_be_bytes());
    body.extend_from_slice(&len.to_be_bytes());
}

pub struct PcpWriter {
    base: PathBuf,
    v: Version,
    label: LogLabel,
    meta: Out,
    vols: Vec<(i32, Out)>,
    index: Vec<u8>,
    volume_size: Option<u64>,
    /// pmid -> (type, indom); looked up per metric of every sample.
    descs: IntMap<u32, (i32, u32)>,
    helps: HashSet<(HelpTarget, bool)>,
    /// PCP sources: current membership per indom (ordered as stored), for
    /// v3 deltas written to v2.
    members: HashMap<u32, Vec<(i32, String)>>,
    /// Non-PCP sources: memberships, written as records of real changes
    /// (`indoms.rs`).
    tracker: Tracker,
    meta_buf: Vec<u8>,
    from_pcp: bool,
    labels: Vec<LabelSet>,
    first: Option<Stamp>,
    last: Option<Stamp>,
    /// .meta size after the previous result (index meta offset).
    meta_mark: u64,
    indom_since_result: bool,
    data_since_index: u64,
    last_rec: Option<(Stamp, i32, u64, u64)>,
    last_indexed: Option<(i32, u64)>,
    loss: LossReport,
    scratch: Vec<u8>,
    /// Events as event records (`events.rs`).
    events: EventEncoder,
    /// A verbatim copy (`copy_verbatim`): the source's label start.
    copied_start: Option<Stamp>,
    /// Scratch of `write_result`: value blocks and their pointer words.
    blocks: Vec<u8>,
    pending_ptrs: Vec<(usize, usize)>,
    /// Metadata an event needs, kept from event to event.
    event_meta: Vec<Item>,
    /// Counted here and put in `loss` by `finish` (a keyed count per
    /// result showed in profiles): results and marks written, and results
    /// moved up to the one before (`BACKWARDS`).
    results: u64,
    marks: u64,
    backwards: u64,
}

/// What a result record holds.
enum Body<'a> {
    Sample(&'a Sample),
    Mark,
    Events(&'a EventResult),
}

impl PcpWriter {
    pub fn create(base: &Path, header: &Header, opts: &WriteOptions) -> Result<PcpWriter> {
        let vn = opts.pcp_version.unwrap_or(match header.source {
            FormatId::Pcp if header.version == "2" => 2,
            _ => 3,
        });
        let v = match vn {
            2 => Version::V2,
            3 => Version::V3,
            n => {
                return Err(Error::Usage(format!(
                    "PCP archive version {n} cannot be written (2 or 3)"
                )))
            }
        };
        let from_pcp = header.source == FormatId::Pcp;
        let label = LogLabel {
            version: v,
            pid: header
                .extras
                .i64(X_PID)
                .filter(|_| from_pcp)
                .map(|p| p as i32)
                .unwrap_or(std::process::id() as i32),
            start: Stamp::default(),
            vol: -1,
            features: 0,
            hostname: header.host.clone().unwrap_or_else(|| "localhost".into()),
            timezone: header.timezone.clone().unwrap_or_else(|| "UTC".into()),
            zoneinfo: header
                .extras
                .str(X_ZONEINFO)
                .map(str::to_string)
                .unwrap_or_else(|| {
                    if header.timezone.as_deref().is_none_or(|t| t == "UTC") {
                        ":Etc/UTC".into()
                    } else {
                        String::new()
                    }
                }),
        };
        let name = base.to_string_lossy().to_string();
        let mut meta = Out::create(PathBuf::from(format!("{name}.meta")))?;
        meta.put(&encode_label(&label))?;
        let mut index = Vec::new();
        index.extend_from_slice(&encode_label(&label));
        Ok(PcpWriter {
            base: base.to_path_buf(),
            tracker: Tracker::new(v),
            meta_buf: Vec::new(),
            from_pcp,
            v,
            meta_mark: v.label_len() as u64,
            label,
            meta,
            vols: Vec::new(),
            index,
            volume_size: opts.volume_size.filter(|&s| s > 0),
            descs: IntMap::default(),
            helps: HashSet::new(),
            members: HashMap::new(),
            labels: Vec::new(),
            first: None,
            last: None,
            indom_since_result: false,
            data_since_index: 0,
            last_rec: None,
            last_indexed: None,
            loss: LossReport::default(),
            scratch: Vec::new(),
            events: EventEncoder::new(header),
            copied_start: None,
            blocks: Vec::new(),
            pending_ptrs: Vec::new(),
            event_meta: Vec::new(),
            results: 0,
            marks: 0,
            backwards: 0,
        })
    }

    fn put_meta(&mut self, rec: &[u8]) -> Result<()> {
        self.meta.put(rec)
    }

    fn write_desc(&mut self, m: &MetricDesc) -> Result<()> {
        let t = m.vtype.pcp_code();
        let indom = m.indom.unwrap_or(PM_INDOM_NULL);
        self.descs.insert(m.id, (t, indom));
        let mut b = vec![0u8; 4];
        b.extend_from_slice(&TYPE_DESC.to_be_bytes());
        b.extend_from_slice(&m.id.to_be_bytes());
        b.extend_from_slice(&t.to_be_bytes());
        b.extend_from_slice(&indom.to_be_bytes());
        b.extend_from_slice(&m.sem.pcp_code().to_be_bytes());
        b.extend_from_slice(&m.units.to_word().to_be_bytes());
        let mut names: Vec<String> = m.names.iter().filter(|n| !n.is_empty()).cloned().collect();
        if names.is_empty() {
            // PCP tools need at least one name per descriptor.
            names.push(format!(
                "polytrace.pmid_{}",
                pmid_str(m.id).replace('.', "_")
            ));
            self.loss.degrade(
                "metric descriptors",
                "unnamed metric given a generated name",
            );
        }
        b.extend_from_slice(&(names.len() as u32).to_be_bytes());
        for n in &names {
            b.extend_from_slice(&(n.len() as u32).to_be_bytes());
            b.extend_from_slice(n.as_bytes());
        }
        frame(&mut b);
        self.put_meta(&b)?;
        self.loss.wrote("metric descriptors", 1);
        if let Some(h) = &m.help_short {
            self.write_help(&Help {
                target: HelpTarget::Metric(m.id),
                oneline: true,
                text: h.clone(),
            })?;
        }
        if let Some(h) = &m.help_long {
            self.write_help(&Help {
                target: HelpTarget::Metric(m.id),
                oneline: false,
                text: h.clone(),
            })?;
        }
        Ok(())
    }

    fn write_help(&mut self, h: &Help) -> Result<()> {
        if !self.helps.insert((h.target, h.oneline)) {
            return Ok(());
        }
        let (kind, ident) = match h.target {
            HelpTarget::Metric(p) => (PM_TEXT_PMID, p),
            HelpTarget::Indom(i) => (PM_TEXT_INDOM, i),
        };
        let class = if h.oneline {
            PM_TEXT_ONELINE
        } else {
            PM_TEXT_HELP
        };
        let mut b = vec![0u8; 4];
        b.extend_from_slice(&TYPE_TEXT.to_be_bytes());
        b.extend_from_slice(&(kind | class).to_be_bytes());
        b.extend_from_slice(&ident.to_be_bytes());
        b.extend_from_slice(h.text.as_bytes());
        b.push(0);
        frame(&mut b);
        self.put_meta(&b)?;
        self.loss.wrote("help texts", 1);
        Ok(())
    }

    /// Instance-domain records (non-PCP sources) of the changes since the
    /// last result, before the next one; all of them when `t` is None (the
    /// end).
    fn flush_indoms(&mut self, t: Option<Stamp>) -> Result<()> {
        let mut b = std::mem::take(&mut self.meta_buf);
        b.clear();
        let after = self.last.map(Stamp::ns);
        let wrote = self.tracker.before_result(t.map(Stamp::ns), after, &mut b);
        if wrote {
            self.put_meta(&b)?;
            self.indom_since_result = true;
        }
        self.meta_buf = b;
        Ok(())
    }

    fn write_indom(&mut self, u: &IndomUpdate) -> Result<()> {
        if self.from_pcp {
            return self.write_indom_record(u);
        }
        self.tracker.update(u);
        Ok(())
    }

    fn write_indom_record(&mut self, u: &IndomUpdate) -> Result<()> {
        let cur = self.members.entry(u.id).or_default();
        // Entries to store: (inst, Some(name)) or (inst, None) for deletions.
        let mut entries: Vec<(i32, Option<String>)>;
        let mut delta = false;
        match u.kind {
            IndomKind::Full => {
                *cur = u.instances.iter().map(|i| (i.id, i.name.clone())).collect();
                entries = u
                    .instances
                    .iter()
                    .map(|i| (i.id, Some(i.name.clone())))
                    .collect();
            }
            IndomKind::Delta => {
                let gone: HashSet<i32> = u.removed.iter().copied().collect();
                cur.retain(|(i, _)| !gone.contains(i));
                for i in &u.instances {
                    cur.retain(|(x, _)| *x != i.id);
                    cur.push((i.id, i.name.clone()));
                }
                if self.v == Version::V3 {
                    delta = true;
                    entries = u
                        .instances
                        .iter()
                        .map(|i| (i.id, Some(i.name.clone())))
                        .chain(u.removed.iter().map(|&i| (i, None)))
                        .collect();
                    let order: Vec<i64> = match u.extras.get(X_DELTA_ORDER) {
                        Some(ExtraValue::List(l)) => l
                            .iter()
                            .filter_map(|x| match x {
                                ExtraValue::I64(v) => Some(*v),
                                _ => None,
                            })
                            .collect(),
                        _ => Vec::new(),
                    };
                    if order.len() == entries.len() {
                        // Keep the on-disk order of the source record.
                        let mut pos: HashMap<i64, usize> = HashMap::new();
                        for (k, v) in order.iter().enumerate() {
                            pos.entry(*v).or_insert(k);
                        }
                        entries.sort_by_key(|(i, _)| pos.get(&(*i as i64)).copied());
                    } else {
                        entries.sort_by_key(|(i, _)| *i);
                    }
                } else {
                    // v2 has no delta records: store the membership in full.
                    entries = cur.iter().map(|(i, n)| (*i, Some(n.clone()))).collect();
                }
            }
        }
        let rtype = match (self.v, delta) {
            (Version::V2, _) => TYPE_INDOM_V2,
            (Version::V3, false) => TYPE_INDOM,
            (Version::V3, true) => TYPE_INDOM_DELTA,
        };
        let mut b = vec![0u8; 4];
        b.extend_from_slice(&rtype.to_be_bytes());
        put_stamp(self.v, &mut b, Stamp::from_ns(u.time.0));
        b.extend_from_slice(&u.id.to_be_bytes());
        b.extend_from_slice(&(entries.len() as u32).to_be_bytes());
        for (i, _) in &entries {
            b.extend_from_slice(&i.to_be_bytes());
        }
        // Names that were not UTF-8 in the source are written back as bytes.
        let mut raw: HashMap<i32, &[u8]> = HashMap::new();
        if let Some(ExtraValue::List(l)) = u.extras.get(X_RAW_NAMES) {
            if l.len() == u.instances.len() {
                for (inst, x) in u.instances.iter().zip(l) {
                    if let ExtraValue::Bytes(bytes) = x {
                        raw.insert(inst.id, bytes);
                    }
                }
            }
        }
        let mut strtab = Vec::new();
        for (id, n) in &entries {
            match n {
                Some(n) => {
                    b.extend_from_slice(&(strtab.len() as u32).to_be_bytes());
                    match raw.get(id) {
                        Some(bytes) if raw.len() == u.instances.len() => {
                            strtab.extend_from_slice(bytes)
                        }
                        _ => strtab.extend_from_slice(n.as_bytes()),
                    }
                    strtab.push(0);
                }
                None => b.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        b.extend_from_slice(&strtab);
        frame(&mut b);
        self.put_meta(&b)?;
        self.indom_since_result = true;
        self.loss.wrote("instance domains", 1);
        Ok(())
    }

    /// Called before every item: the usual empty case without a call.
    #[inline]
    fn flush_labels(&mut self) -> Result<()> {
        if self.labels.is_empty() {
            return Ok(());
        }
        self.write_labels()
    }

    fn write_labels(&mut self) -> Result<()> {
        let sets = std::mem::take(&mut self.labels);
        let (ltype, ident) = match sets[0].target {
            LabelTarget::Context => (PM_LABEL_CONTEXT, PM_ID_NULL),
            LabelTarget::Domain(d) => (PM_LABEL_DOMAIN, d),
            LabelTarget::Cluster(c) => (PM_LABEL_CLUSTER, c),
            LabelTarget::Item(p) => (PM_LABEL_ITEM, p),
            LabelTarget::Indom(i) => (PM_LABEL_INDOM, i),
            LabelTarget::Instances(i) => (PM_LABEL_INSTANCES, i),
        };
        let t = sets[0]
            .time
            .map(|t| Stamp::from_ns(t.0))
            .or(self.last)
            .or(self.first)
            .unwrap_or_default();
        let mut b = vec![0u8; 4];
        b.extend_from_slice(
            &(if self.v == Version::V2 {
                TYPE_LABEL_V2
            } else {
                TYPE_LABEL
            })
            .to_be_bytes(),
        );
        put_stamp(self.v, &mut b, t);
        b.extend_from_slice(&ltype.to_be_bytes());
        b.extend_from_slice(&ident.to_be_bytes());
        b.extend_from_slice(&(sets.len() as u32).to_be_bytes());
        for s in &sets {
            b.extend_from_slice(&(s.inst as u32).to_be_bytes());
            let json = s.json.as_bytes();
            let json = &json[..json.len().min(65535)];
            b.extend_from_slice(&(json.len() as u32).to_be_bytes());
            b.extend_from_slice(json);
            let labels: Vec<&Label> = s.labels.iter().take(255).collect();
            b.extend_from_slice(&(labels.len() as u32).to_be_bytes());
            let mut cursor = 0usize;
            for l in labels {
                let (no, vo) = locate_label(&s.json, &l.name, &mut cursor);
                b.extend_from_slice(&(no as u16).to_be_bytes());
                b.push(l.name.len().min(255) as u8);
                b.push(l.flags as u8);
                b.extend_from_slice(&(vo as u16).to_be_bytes());
                b.extend_from_slice(&(l.value.len().min(65535) as u16).to_be_bytes());
            }
        }
        frame(&mut b);
        self.put_meta(&b)?;
        self.loss.wrote("label sets", sets.len() as u64);
        Ok(())
    }

    fn volume(&mut self, rec_len: u64) -> Result<()> {
        let need_new = match self.vols.last() {
            None => true,
            Some((_, o)) => self
                .volume_size
                .is_some_and(|vs| o.size > self.v.label_len() as u64 && o.size + rec_len > vs),
        };
        if need_new {
            let n = self.vols.last().map(|(n, _)| n + 1).unwrap_or(0);
            self.new_volume(n)?;
        }
        Ok(())
    }

    /// Volume `n` begins, with its label; the one before keeps its file
    /// open for its label at the end, and lets its buffer go now (else the
    /// buffers of all the volumes would be held to the end).
    fn new_volume(&mut self, n: i32) -> Result<()> {
        if let Some((_, o)) = self.vols.last_mut() {
            o.park()?;
        }
        let mut o = Out::create(PathBuf::from(format!("{}.{n}", self.base.display())))?;
        let mut l = self.label.clone();
        l.vol = n;
        o.put(&encode_label(&l))?;
        self.vols.push((n, o));
        Ok(())
    }

    fn index_entry(&mut self, t: Stamp, vol: i32, meta_off: u64, data_off: u64) {
        if self.last_indexed == Some((vol, data_off)) {
            return;
        }
        self.last_indexed = Some((vol, data_off));
        self.push_index(t, vol, meta_off, data_off);
        self.data_since_index = 0;
    }

    fn push_index(&mut self, t: Stamp, vol: i32, meta_off: u64, data_off: u64) {
        put_stamp(self.v, &mut self.index, t);
        self.index.extend_from_slice(&vol.to_be_bytes());
        match self.v {
            Version::V2 => {
                self.index
                    .extend_from_slice(&(meta_off.min(i32::MAX as u64) as u32).to_be_bytes());
                self.index
                    .extend_from_slice(&(data_off.min(i32::MAX as u64) as u32).to_be_bytes());
            }
            Version::V3 => {
                self.index.extend_from_slice(&meta_off.to_be_bytes());
                self.index.extend_from_slice(&data_off.to_be_bytes());
            }
        }
    }

    /// Encode event `e` (or the events of a run, `run` with the cells
    /// next): whenever one closes a result, that result and then the
    /// metadata the events made are written.
    fn events_of(&mut self, e: &Event, mut run: Option<(&EventRun, CellIter)>) -> Result<()> {
        let mut left = run.as_ref().map_or(1, |(r, _)| r.len());
        while left > 0 {
            let mut meta = std::mem::take(&mut self.event_meta);
            let (n, done) = match &mut run {
                Some((r, cells)) => self.events.event_rows(r, cells, left, &mut meta),
                None => (1, self.events.event(e, &mut meta)),
            };
            if let Some(res) = done {
                self.write_events(&res, Some(e.time))?;
                self.events.recycle(res);
            }
            for it in &meta {
                self.write_item(it)?;
            }
            meta.clear();
            self.event_meta = meta;
            left = left.saturating_sub(n.max(1));
        }
        Ok(())
    }

    /// Write the pending result of event records, if any, before a result
    /// at `next` (a sample or mark) when there is one.
    fn flush_events(&mut self, next: Option<Timestamp>) -> Result<()> {
        if let Some(r) = self.events.take() {
            self.write_events(&r, next)?;
            self.events.recycle(r);
        }
        Ok(())
    }

    fn write_events(&mut self, r: &EventResult, next: Option<Timestamp>) -> Result<()> {
        // The records keep their own times; the result's is free between
        // the previous result and the next, so results never go back in
        // time even when a source's events run ahead of its samples.
        let mut t = r.time.0;
        if let Some(n) = next {
            t = t.min(n.0);
        }
        t = t.max(self.last.map_or(i64::MIN, |l| l.ns()));
        for it in &r.meta {
            // Instance domains of new streams: at the latest with the result.
            let mut it = it.clone();
            match &mut it {
                Item::Indom(u) => {
                    // The streams domain is the encoder's own, whatever the
                    // source: its records are the tracker's (deltas), so a
                    // PCP -> PCP rewrite writes them as the first writing did.
                    u.time.0 = u.time.0.min(t);
                    self.flush_labels()?;
                    self.tracker.update(u);
                    continue;
                }
                Item::Labels(l) => {
                    if let Some(lt) = &mut l.time {
                        lt.0 = lt.0.min(t);
                    }
                }
                _ => {}
            }
            self.write_item(&it)?;
        }
        self.flush_labels()?;
        self.flush_indoms(Some(Stamp::from_ns(t)))?;
        self.write_result(Stamp::from_ns(t), Body::Events(r))?;
        self.results += 1;
        Ok(())
    }

    /// A sample's or mark's result time: a PCP archive runs forward in
    /// time, so one earlier than the last result (sources that restart
    /// their clock, such as concatenated captures) is moved up to it.
    fn result_stamp(&mut self, t: Timestamp) -> Stamp {
        let s = Stamp::from_ns(t.0);
        match self.last {
            Some(l) if s < l && !self.from_pcp => {
                self.backwards += 1;
                l
            }
            _ => s,
        }
    }

    /// The result of an event batch: the header in `b` (length word and
    /// stamp already in it), then each event array's value block, written
    /// with one vectored write from the encoder's payloads.
    fn write_event_result(&mut self, t: Stamp, mut b: Vec<u8>, r: &EventResult) -> Result<()> {
        b.extend_from_slice(&(r.sets.len() as u32).to_be_bytes());
        let insts: usize = r.sets.iter().map(|(_, v)| v.len()).sum();
        // The value blocks start after the pmid sets (pmid, count,
        // valfmt, then instance and offset per value).
        let blocks_at = b.len() + r.sets.len() * 12 + insts * 8;
        let mut heads = std::mem::take(&mut self.blocks);
        heads.clear();
        let mut boff = 0usize;
        for (p, vals) in &r.sets {
            b.extend_from_slice(&p.to_be_bytes());
            b.extend_from_slice(&(vals.len() as u32).to_be_bytes());
            b.extend_from_slice(&1u32.to_be_bytes());
            for (inst, payload) in vals {
                b.extend_from_slice(&inst.to_be_bytes());
                // DPTR offset in words from a virtual 12-byte header before len.
                let w = ((blocks_at + boff + 8) / 4) as u32;
                b.extend_from_slice(&w.to_be_bytes());
                let vlen = payload.len() + 4;
                heads.extend_from_slice(&((10u32 << 24) | (vlen as u32 & 0xff_ffff)).to_be_bytes());
                boff += vlen.next_multiple_of(4);
            }
        }
        debug_assert_eq!(b.len(), blocks_at);
        let rec_len = blocks_at + boff + 4;
        b[..4].copy_from_slice(&(rec_len as u32).to_be_bytes());
        let tail = (rec_len as u32).to_be_bytes();
        const PAD: [u8; 3] = [b'~'; 3];
        // Header, then per value block its head, payload and padding, then
        // the trailing length: on the stack for the usual few streams.
        let most = 2 + 3 * insts;
        let mut stack = [IoSlice::new(&[]); 2 + 3 * 8];
        let mut heap;
        let slices: &mut [IoSlice] = if most <= stack.len() {
            &mut stack
        } else {
            heap = vec![IoSlice::new(&[]); most];
            &mut heap
        };
        slices[0] = IoSlice::new(&b);
        let mut n = 1;
        let mut k = 0;
        for (_, vals) in &r.sets {
            for (_, payload) in vals {
                slices[n] = IoSlice::new(&heads[k..k + 4]);
                slices[n + 1] = IoSlice::new(payload);
                n += 2;
                let pad = (4 - payload.len() % 4) % 4;
                if pad > 0 {
                    slices[n] = IoSlice::new(&PAD[..pad]);
                    n += 1;
                }
                k += 4;
            }
        }
        slices[n] = IoSlice::new(&tail);
        n += 1;
        let rec_len = rec_len as u64;
        self.volume(rec_len)?;
        let wrote = match self.vols.last_mut() {
            Some((vol, out)) => {
                let vol = *vol;
                let data_off = out.size;
                out.put_vectored(&mut slices[..n])?;
                Some((vol, data_off))
            }
            None => None,
        };
        self.blocks = heads;
        self.scratch = b;
        let Some((vol, data_off)) = wrote else {
            return Ok(());
        };
        self.after_result(t, vol, data_off, rec_len);
        Ok(())
    }

    fn write_result(&mut self, t: Stamp, body: Body<'_>) -> Result<()> {
        self.flush_labels()?;
        let mut b = std::mem::take(&mut self.scratch);
        b.clear();
        b.extend_from_slice(&[0u8; 4]);
        put_stamp(self.v, &mut b, t);
        // Scratch lists kept from result to result.
        let mut blocks = std::mem::take(&mut self.blocks);
        blocks.clear();
        // (pos of offset word, block offset in `blocks`)
        let mut pending = std::mem::take(&mut self.pending_ptrs);
        pending.clear();
        match body {
            Body::Mark => b.extend_from_slice(&0u32.to_be_bytes()),
            Body::Events(r) => {
                // Laid out as below, but written from the encoder's
                // payloads where they lie: no copy into `blocks` and the
                // record, then into the output (266 MB of x167.dlt's).
                self.blocks = blocks;
                self.pending_ptrs = pending;
                return self.write_event_result(t, b, r);
            }
            Body::Sample(s) => {
                let vt0: Vec<u32> = match s.extras.get(X_VTYPE0) {
                    Some(ExtraValue::List(l)) => l
                        .iter()
                        .filter_map(|x| match x {
                            ExtraValue::U64(p) => Some(*p as u32),
                            _ => None,
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                let mut ptypes: IntMap<u32, i32> = IntMap::default();
                if let Some(ExtraValue::List(l)) = s.extras.get(X_PARAM_TYPES) {
                    for x in l {
                        if let ExtraValue::U64(w) = x {
                            ptypes.insert((*w >> 8) as u32, (*w & 0xff) as i32);
                        }
                    }
                }
                b.extend_from_slice(&(s.metrics.len() as u32).to_be_bytes());
                for mv in &s.metrics {
                    b.extend_from_slice(&mv.metric.to_be_bytes());
                    let vals = match &mv.values {
                        Err(code) => {
                            b.extend_from_slice(&code.to_be_bytes());
                            continue;
                        }
                        Ok(v) => v,
                    };
                    let dtype = self.descs.get(&mv.metric).map(|d| d.0);
                    let descs = &self.descs;
                    let ptype = |p: u32| {
                        ptypes
                            .get(&p)
                            .copied()
                            .or_else(|| descs.get(&p).map(|d| d.0))
                    };
                    // Values are in situ when the metric is a 32-bit integer
                    // (`encode_value` gives nothing else for those types, and
                    // never an in-situ value for other types): known before
                    // the values, so each is written as it is encoded, and
                    // the count once they are.
                    let insitu = matches!(dtype, Some(0 | 1));
                    let vt0m = vt0.contains(&mv.metric);
                    let count_at = b.len();
                    b.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, (!insitu) as u8]);
                    let mut n = 0u32;
                    let mut dropped = 0u64;
                    if let Some(t @ (2 | 3 | 5)) = dtype {
                        // 64-bit numbers (KPI samples, most PCP metrics): each
                        // value a 12-byte block, without `Enc` in between.
                        let vt = if vt0m { 0 } else { t as u8 };
                        for (inst, v) in vals {
                            let Some(p) = be64_of(t, v) else {
                                dropped += 1;
                                continue;
                            };
                            n += 1;
                            pending.push((b.len() + 4, blocks.len()));
                            let mut w = [0u8; 8];
                            w[..4].copy_from_slice(&inst.to_be_bytes());
                            b.extend_from_slice(&w);
                            put_block(&mut blocks, vt, &p);
                        }
                    } else {
                        for (inst, v) in vals {
                            let Some(e) = encode_value(dtype, v, &ptype) else {
                                dropped += 1;
                                continue;
                            };
                            n += 1;
                            let mut w = [0u8; 8];
                            w[..4].copy_from_slice(&inst.to_be_bytes());
                            match e {
                                Enc::Insitu(x) if insitu => {
                                    w[4..].copy_from_slice(&x.to_be_bytes());
                                    b.extend_from_slice(&w);
                                }
                                e => {
                                    pending.push((b.len() + 4, blocks.len()));
                                    b.extend_from_slice(&w);
                                    let x;
                                    let (vt, payload): (u8, &[u8]) = match &e {
                                        Enc::Insitu(v) => {
                                            x = v.to_be_bytes();
                                            (0, &x)
                                        }
                                        Enc::Small(t, a, n) => (*t, &a[..*n as usize]),
                                        Enc::Block(t, p) => (*t, p),
                                    };
                                    put_block(&mut blocks, if vt0m { 0 } else { vt }, payload);
                                }
                            }
                        }
                    }
                    self.loss.drop_n(
                        "values",
                        "value does not fit the metric's PCP type",
                        dropped,
                    );
                    b[count_at..count_at + 4].copy_from_slice(&n.to_be_bytes());
                    if n == 0 {
                        // No value format word without values.
                        b.truncate(count_at + 4);
                    }
                }
            }
        }
        let blocks_at = b.len();
        for (wpos, boff) in pending.drain(..) {
            // DPTR offset in words from a virtual 12-byte header before len.
            let w = ((blocks_at + boff + 8) / 4) as u32;
            b[wpos..wpos + 4].copy_from_slice(&w.to_be_bytes());
        }
        self.pending_ptrs = pending;
        // Framed as `frame` does, the value blocks written from where they
        // lie rather than copied after the header first.
        let rec_len = b.len() + blocks.len() + 4;
        b[..4].copy_from_slice(&(rec_len as u32).to_be_bytes());
        let tail = (rec_len as u32).to_be_bytes();
        let rec_len = rec_len as u64;
        let wrote = match self.volume(rec_len) {
            Ok(()) => match self.vols.last_mut() {
                Some((vol, out)) => {
                    let at = (*vol, out.size);
                    let mut parts = [IoSlice::new(&b), IoSlice::new(&blocks), IoSlice::new(&tail)];
                    out.put_vectored(&mut parts).map(|()| Some(at))
                }
                None => Ok(None),
            },
            Err(e) => Err(e),
        };
        self.blocks = blocks;
        self.scratch = b;
        if let Some((vol, data_off)) = wrote? {
            self.after_result(t, vol, data_off, rec_len);
        }
        Ok(())
    }

    /// Index and bookkeeping after a result of `rec_len` bytes written at
    /// `data_off` of volume `vol`.
    fn after_result(&mut self, t: Stamp, vol: i32, data_off: u64, rec_len: u64) {
        let new_vol = data_off == self.v.label_len() as u64;
        let meta_off = self.meta_mark;
        if self.first.is_none() {
            self.first = Some(t);
        }
        if new_vol || self.indom_since_result || self.data_since_index >= INDEX_EVERY {
            self.index_entry(t, vol, meta_off, data_off);
        }
        self.data_since_index += rec_len;
        self.indom_since_result = false;
        self.last = Some(t);
        self.last_rec = Some((t, vol, meta_off, data_off));
        self.meta_mark = self.meta.size;
    }
}

/// Find the offsets of a label's name and value in its JSON text.
fn locate_label(json: &str, name: &str, cursor: &mut usize) -> (usize, usize) {
    let pat = format!("\"{name}\"");
    let from = (*cursor).min(json.len());
    let at = json[from..]
        .find(&pat)
        .map(|i| i + from)
        .or_else(|| json.find(&pat));
    match at {
        Some(i) => {
            let no = i + 1;
            let mut vo = i + pat.len();
            let bytes = json.as_bytes();
            while vo < bytes.len() && (bytes[vo] == b':' || bytes[vo] == b' ') {
                vo += 1;
            }
            *cursor = vo;
            (no, vo)
        }
        None => (0, 0),
    }
}

/// A value block: type and length word, the payload, padding to 4.
#[inline]
fn put_block(blocks: &mut Vec<u8>, vt: u8, payload: &[u8]) {
    let vlen = payload.len() + 4;
    let head = (((vt as u32) << 24) | (vlen as u32 & 0xff_ffff)).to_be_bytes();
    if let Ok(p8) = <[u8; 8]>::try_from(payload) {
        // A 64-bit number (most blocks): head and value in one fixed-size
        // copy, no call.
        let mut w = [0u8; 12];
        w[..4].copy_from_slice(&head);
        w[4..].copy_from_slice(&p8);
        blocks.extend_from_slice(&w);
    } else {
        blocks.extend_from_slice(&head);
        blocks.extend_from_slice(payload);
        while !blocks.len().is_multiple_of(4) {
            blocks.push(b'~');
        }
    }
}

enum Enc {
    Insitu(u32),
    /// A value block of up to 8 bytes (64-bit integers, floats), held
    /// without an allocation of its own.
    Small(u8, [u8; 8], u8),
    Block(u8, Vec<u8>),
}

/// The payload `encode_value` gives a value for a metric of the 64-bit
/// type `t` (2, 3 or 5), None where it gives none; the usual kinds without
/// its detour through `i128` and `Enc`.
#[inline]
fn be64_of(t: i32, v: &Value) -> Option<[u8; 8]> {
    match (t, v) {
        (2, Value::I64(x) | Value::Enum(x)) => Some(x.to_be_bytes()),
        (3, Value::U64(x)) => Some(x.to_be_bytes()),
        (5, Value::F64(x)) => Some(x.to_be_bytes()),
        _ => match encode_value(Some(t), v, &|_| None)? {
            Enc::Small(_, a, 8) => Some(a),
            _ => None,
        },
    }
}

fn small<const N: usize>(t: u8, b: [u8; N]) -> Enc {
    let mut a = [0u8; 8];
    a[..N].copy_from_slice(&b);
    Enc::Small(t, a, N as u8)
}

fn int_of(v: &Value) -> Option<i128> {
    match v {
        Value::I64(x) | Value::Enum(x) => Some(*x as i128),
        Value::U64(x) => Some(*x as i128),
        Value::F32(x) if x.fract() == 0.0 => Some(*x as i128),
        Value::F64(x) if x.fract() == 0.0 => Some(*x as i128),
        _ => None,
    }
}

/// Encode a value for a metric of PCP type `dtype` (or by the value's own
/// kind when there is no descriptor).
fn encode_value(dtype: Option<i32>, v: &Value, ptype: &dyn Fn(u32) -> Option<i32>) -> Option<Enc> {
    let t = dtype.unwrap_or(match v {
        Value::I64(_) | Value::Enum(_) => 2,
        Value::U64(_) => 3,
        Value::F32(_) => 4,
        Value::F64(_) => 5,
        Value::Str(_) => 6,
        Value::Events(_) => 10,
        _ => 7,
    });
    Some(match t {
        0 => Enc::Insitu(i32::try_from(int_of(v)?).ok()? as u32),
        1 => Enc::Insitu(u32::try_from(int_of(v)?).ok()?),
        2 => small(2, (i64::try_from(int_of(v)?).ok()?).to_be_bytes()),
        3 => small(3, (u64::try_from(int_of(v)?).ok()?).to_be_bytes()),
        4 => small(4, (v.as_f64()? as f32).to_be_bytes()),
        5 => small(5, v.as_f64()?.to_be_bytes()),
        6 => {
            let mut b = match v {
                Value::Str(s) => s.as_bytes().to_vec(),
                Value::Bytes(b) => b.clone(),
                _ => return None,
            };
            b.push(0);
            Enc::Block(6, b)
        }
        9 | 10 => match v {
            Value::Events(recs) => Enc::Block(t as u8, encode_events(recs, t == 10, ptype)?),
            Value::Bytes(b) => Enc::Block(t as u8, b.clone()),
            _ => return None,
        },
        _ => match v {
            Value::Bytes(b) => Enc::Block(t.clamp(0, 255) as u8, b.clone()),
            Value::Str(s) => Enc::Block(t.clamp(0, 255) as u8, s.as_bytes().to_vec()),
            _ => return None,
        },
    })
}

fn encode_events(
    recs: &[EventRecord],
    highres: bool,
    ptype: &dyn Fn(u32) -> Option<i32>,
) -> Option<Vec<u8>> {
    let mut b = Vec::new();
    b.extend_from_slice(&(recs.len() as u32).to_be_bytes());
    for r in recs {
        let s = Stamp::from_ns(r.time.0);
        if highres {
            b.extend_from_slice(&s.sec.to_be_bytes());
            b.extend_from_slice(&(s.nsec as i64).to_be_bytes());
        } else {
            b.extend_from_slice(&(s.sec as i32).to_be_bytes());
            b.extend_from_slice(&(s.nsec / 1000).to_be_bytes());
        }
        b.extend_from_slice(&r.flags.to_be_bytes());
        if r.flags & EVENT_FLAG_MISSED != 0 {
            let n = r
                .params
                .iter()
                .find(|p| p.metric == MISSED_PMID)
                .and_then(|p| int_of(&p.value))
                .unwrap_or(0) as i32;
            b.extend_from_slice(&n.to_be_bytes());
            continue;
        }
        b.extend_from_slice(&(r.params.len() as u32).to_be_bytes());
        for p in &r.params {
            let (t, pay): (u8, Vec<u8>) = match &p.value {
                // 32-bit parameters are known by their stored type or descriptor.
                Value::I64(_) | Value::Enum(_) | Value::U64(_)
                    if matches!(ptype(p.metric), Some(0) | Some(1)) =>
                {
                    let t = ptype(p.metric).unwrap_or(0) as u8;
                    let w = int_of(&p.value).unwrap_or(0) as u32;
                    (t, w.to_be_bytes().to_vec())
                }
                Value::I64(x) | Value::Enum(x) => (2, x.to_be_bytes().to_vec()),
                Value::U64(x) => (3, x.to_be_bytes().to_vec()),
                Value::F32(x) => (4, x.to_be_bytes().to_vec()),
                Value::F64(x) => (5, x.to_be_bytes().to_vec()),
                Value::Str(s) => {
                    let mut v = s.as_bytes().to_vec();
                    v.push(0);
                    (6, v)
                }
                Value::Bytes(x) => (7, x.clone()),
                _ => return None,
            };
            b.extend_from_slice(&p.metric.to_be_bytes());
            let len = pay.len() + 4;
            b.extend_from_slice(&(((t as u32) << 24) | (len as u32 & 0xff_ffff)).to_be_bytes());
            b.extend_from_slice(&pay);
            while !b.len().is_multiple_of(4) {
                b.push(0);
            }
        }
    }
    Some(b)
}

impl RecordSink for PcpWriter {
    fn meta_record(&mut self, rec: &[u8]) -> Result<()> {
        self.put_meta(rec)?;
        let what = match bei32(rec, 4).unwrap_or(0) {
            TYPE_DESC => "metric descriptors",
            TYPE_INDOM_V2 | TYPE_INDOM | TYPE_INDOM_DELTA => "instance domains",
            TYPE_LABEL_V2 | TYPE_LABEL => "label records",
            TYPE_TEXT => "help texts",
            _ => "metadata records",
        };
        self.loss.wrote(what, 1);
        Ok(())
    }

    fn result_record(&mut self, vol: u32, t: Stamp, rec: &[u8]) -> Result<()> {
        let vol = vol as i32;
        if self.vols.last().is_none_or(|(n, _)| *n != vol) {
            self.new_volume(vol)?;
        }
        let Some((_, out)) = self.vols.last_mut() else {
            return Ok(());
        };
        let data_off = out.size;
        let new_vol = data_off == self.v.label_len() as u64;
        out.put(rec)?;
        self.first.get_or_insert(t);
        // An index of our own, used when the source's cannot be kept.
        let meta_off = self.meta.size;
        if new_vol || self.data_since_index >= INDEX_EVERY {
            self.index_entry(t, vol, meta_off, data_off);
        }
        self.data_since_index += rec.len() as u64;
        self.last = Some(t);
        self.last_rec = Some((t, vol, meta_off, data_off));
        let numpmid_at = 4 + self.v.ts_len();
        let what = if bei32(rec, numpmid_at) == Some(0) {
            "marks"
        } else {
            "results"
        };
        self.loss.wrote(what, 1);
        Ok(())
    }
}

impl TraceWriter for PcpWriter {
    /// PCP into PCP of the same version and volume layout, with nothing in
    /// between: every record is copied as it is (labels rewritten from the
    /// source's, the index kept when it holds), so the copy lists as the
    /// source does and no value is decoded.
    fn copy_verbatim(&mut self, reader: &mut dyn TraceReader) -> Result<Option<u64>> {
        if !self.from_pcp
            || self.volume_size.is_some()
            || self.last_rec.is_some()
            || self.meta.size != self.v.label_len() as u64
        {
            return Ok(None);
        }
        let Some(r) = reader
            .verbatim()
            .and_then(|a| a.downcast_mut::<PcpReader>())
        else {
            return Ok(None);
        };
        let src = r.label().clone();
        if src.version != self.v {
            return Ok(None);
        }
        self.label = LogLabel { vol: -1, ..src };
        let Some((n, index)) = r.copy_records(self)? else {
            return Ok(None);
        };
        self.copied_start = Some(self.label.start);
        if let Some(entries) = index {
            self.index.truncate(self.v.label_len());
            for (t, vol, m, d) in entries {
                self.push_index(t, vol, m, d);
            }
            // Kept as it is: no entry of our own is added at the end.
            self.last_indexed = self.last_rec.map(|(_, v, _, d)| (v, d));
        }
        Ok(Some(n))
    }

    fn bytes_written(&self) -> Option<u64> {
        Some(
            self.meta.size
                + self.vols.iter().map(|v| v.1.size).sum::<u64>()
                + self.index.len() as u64,
        )
    }
    fn write_item(&mut self, item: &Item) -> Result<()> {
        if !matches!(item, Item::Labels(_)) {
            self.flush_labels()?;
        }
        match item {
            Item::Metric(m) => self.write_desc(m)?,
            Item::Help(h) => self.write_help(h)?,
            Item::Indom(u) => self.write_indom(u)?,
            Item::Labels(l) => {
                if let Some(f) = self.labels.first() {
                    let group = f.time == l.time
                        && f.target == l.target
                        && matches!(l.target, LabelTarget::Instances(_));
                    if !group {
                        self.flush_labels()?;
                    }
                }
                self.labels.push(l.clone());
            }
            Item::Sample(s) => {
                self.flush_events(Some(s.time))?;
                let t = self.result_stamp(s.time);
                self.flush_indoms(Some(t))?;
                self.write_result(t, Body::Sample(s))?;
                self.results += 1;
            }
            Item::Mark(m) => {
                self.flush_events(Some(m.time))?;
                let t = self.result_stamp(m.time);
                self.flush_indoms(Some(t))?;
                self.write_result(t, Body::Mark)?;
                self.marks += 1;
            }
            Item::EventType(t) => {
                let mut meta = Vec::new();
                self.events.define(t, &mut meta);
                for it in &meta {
                    self.write_item(it)?;
                }
                self.loss.wrote("event types", 1);
            }
            Item::Event(e) => self.events_of(e, None)?,
            Item::EventRun(r) => self.events_of(&r.event, Some((r, r.cells.iter())))?,
            Item::Annotation(_) => super::ANNOTATIONS.record(&mut self.loss, None),
        }
        Ok(())
    }

    /// A run's events share what the encoder looks up per event.
    fn takes_runs(&self) -> bool {
        true
    }

    fn finish(mut self: Box<Self>) -> Result<LossReport> {
        self.flush_events(None)?;
        if self.last_rec.is_none() {
            // pmdumplog rejects an archive without records ("Empty archive").
            return Err(Error::nothing_to_write(
                "nothing to write as a PCP archive",
                "no sample or mark (only items an archive cannot hold)",
            ));
        }
        self.flush_labels()?;
        self.flush_indoms(None)?;
        if self.tracker.records > 0 {
            self.loss.wrote("instance domains", self.tracker.records);
        }
        if self.events.written > 0 {
            self.events.loss.wrote("events", self.events.written);
        }
        if self.results > 0 {
            self.loss.wrote("results", self.results);
        }
        if self.marks > 0 {
            self.loss.wrote("marks", self.marks);
        }
        super::BACKWARDS.record_n(&mut self.loss, None, self.backwards);
        let el = std::mem::take(&mut self.events.loss);
        self.loss.merge(&el);
        if self.vols.is_empty() {
            // PCP needs at least one volume, even without results.
            self.volume(0)?;
        }
        if let Some((t, vol, _, data_off)) = self.last_rec {
            let meta_end = self.meta.size;
            if self.last_indexed != Some((vol, data_off)) {
                self.index_entry(t, vol, meta_end, data_off);
            }
        }
        let me = *self;
        let mut label = me.label.clone();
        label.start = me.copied_start.or(me.first).unwrap_or_default();
        let base = me.base.display().to_string();
        label.vol = -1;
        me.meta.finish(&encode_label(&label))?;
        for (n, o) in me.vols {
            label.vol = n;
            o.finish(&encode_label(&label))?;
        }
        label.vol = -2;
        let lab = encode_label(&label);
        let mut index = me.index;
        index[..lab.len()].copy_from_slice(&lab);
        let ip = PathBuf::from(format!("{base}.index"));
        std::fs::write(&ip, &index).map_err(|e| Error::io(&ip, e))?;
        Ok(me.loss)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The archive `items` make, its files' bytes by suffix.
    fn archive_of(header: &Header, items: &[Item]) -> Vec<(String, Vec<u8>)> {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("a");
        let mut w = PcpWriter::create(&base, header, &WriteOptions::default()).unwrap();
        for it in items {
            w.write_item(it).unwrap();
        }
        Box::new(w).finish().unwrap();
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        files.sort();
        files
    }

    /// A run of events is written as its events one by one would be, byte
    /// for byte: results closed inside a run at the record and byte
    /// bounds and after the first event of the archive, a run's first
    /// event defining a new stream and the raw-clock parameter, runs of
    /// several widths and value kinds after plain events, and the KPI
    /// capture as the DLT reader gives it with and without runs.
    #[test]
    fn a_run_writes_what_its_events_write() {
        let mut header = Header::new(FormatId::Kpi, "1");
        header.host = Some("h".into());
        let ty = |id, fields: Vec<FieldType>| {
            let fields = (fields.into_iter().enumerate())
                .map(|(i, ty)| Field::new(&format!("f{i}"), ty))
                .collect();
            Item::EventType(std::sync::Arc::new(EventType::new(
                id,
                "c",
                &format!("t{id}"),
                fields,
            )))
        };
        let run = |t: i64, ty: EventTypeId, raw: Option<u64>, width: u32, rows: &[Vec<Value>]| {
            let mut cells = Cells::default();
            for v in rows.iter().flatten() {
                assert!(cells.push_value(v));
            }
            let mut event = Event {
                time: Timestamp(t),
                raw_clock: raw,
                type_id: ty,
                ..Event::default()
            };
            event.extras.set("k.group", ExtraValue::U64(t as u64));
            event.extras.restamp();
            Item::from(EventRun {
                event,
                width,
                cells,
            })
        };
        let big = "x".repeat(1000);
        let mut items = vec![
            ty(1, vec![FieldType::Int(8), FieldType::String]),
            ty(2, vec![FieldType::Uint(4)]),
            ty(
                3,
                vec![FieldType::Float(8), FieldType::Bytes, FieldType::Int(2)],
            ),
            // The archive's first result closes after its first event (of
            // a run without extras: its first event defines nothing).
            {
                let mut r = run(500, 2, None, 1, &[vec![Value::U64(1)], vec![Value::U64(2)]]);
                if let Item::EventRun(r) = &mut r {
                    r.event.extras = Extras::default();
                }
                r
            },
            Item::Event(Event {
                time: Timestamp(1_000),
                type_id: 2,
                fields: vec![Value::U64(1)],
                ..Event::default()
            }),
        ];
        // Past the record bound of a result (4,096 records of some 50
        // bytes), then past its byte bound (256 KiB) with 1 kB texts, at
        // one time each.
        let many: Vec<Vec<Value>> = (0..5000).map(|i| vec![Value::U64(i)]).collect();
        items.push(run(2_000, 2, None, 1, &many));
        let wide: Vec<Vec<Value>> = (0..400)
            .map(|i| vec![Value::I64(i), Value::Str(big.clone())])
            .collect();
        items.push(run(3_000, 1, Some(7), 2, &wide));
        items.push(run(
            3_000,
            2,
            Some(7),
            1,
            &[vec![Value::U64(9)], vec![Value::I64(-1)]],
        ));
        let mixed = vec![
            vec![
                Value::F64(0.5),
                Value::Bytes(vec![0xff]),
                Value::I64(70_000),
            ],
            vec![Value::F32(1.5), Value::Str("s".into()), Value::I64(1)],
        ];
        items.push(run(4_000, 3, None, 3, &mixed));
        let mut plain = Vec::new();
        for it in &items {
            match it {
                Item::EventRun(r) => r
                    .each_item(|e| {
                        plain.push(e.clone());
                        Ok::<(), ()>(())
                    })
                    .unwrap(),
                it => plain.push(it.clone()),
            }
        }
        assert_eq!(archive_of(&header, &items), archive_of(&header, &plain));

        // The capture, as the DLT reader gives it either way.
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/kpi/kpi-capture.dlt");
        let input = crate::input::Input::resolve(&path).unwrap();
        let read = |runs: bool| {
            let mut r =
                crate::formats::dlt::reader::DltReader::open(&input, &Default::default()).unwrap();
            if runs {
                r.event_runs();
            }
            let mut all = Vec::new();
            while let Some(it) = r.next_item().unwrap() {
                all.push(it);
            }
            (r.header().clone(), all)
        };
        let (h, with) = read(true);
        let (_, without) = read(false);
        assert!(with.iter().any(|it| matches!(it, Item::EventRun(_))));
        assert_eq!(archive_of(&h, &with), archive_of(&h, &without));
    }

    /// A volume that the next one follows holds no buffer to the end:
    /// every volume stays open for its label, and a buffer each held a
    /// conversion into 255 volumes at 80 MB instead of 15 MB.
    #[test]
    fn earlier_volumes_keep_no_buffer() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/kpi/kpi-capture.dlt");
        let input = crate::input::Input::resolve(&path).unwrap();
        let mut r =
            crate::formats::dlt::reader::DltReader::open(&input, &Default::default()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let opts = WriteOptions {
            volume_size: Some(64 << 10),
            ..Default::default()
        };
        let mut w = PcpWriter::create(&dir.path().join("out"), r.header(), &opts).unwrap();
        while let Some(item) = r.next_item().unwrap() {
            w.write_item(&item).unwrap();
            if let Some((last, before)) = w.vols.split_last() {
                assert!(before.iter().all(|(_, o)| o.w.capacity() == 0));
                assert!(last.1.w.capacity() > 0);
            }
        }
        assert!(w.vols.len() > 5, "{} volumes", w.vols.len());
        Box::new(w).finish().unwrap();
    }

    /// A file written through `Out` holds every piece in order, whatever
    /// the pieces' lengths against the chunk (empty ones, pieces ending on
    /// a chunk's end, pieces longer than two chunks, records in slices),
    /// the label written over its start, and `size` counts every byte.
    #[test]
    fn out_writes_every_piece_in_order_across_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = TestRng(0x0c4a11);
        for case in 0..12 {
            let path = dir.path().join(format!("f{case}"));
            let mut out = Out::create(path.clone()).unwrap();
            let mut want = Vec::new();
            for k in 0..40 {
                let n = match rng.below(6) {
                    0 => 0,
                    1 => crate::output::CHUNK - want.len() % crate::output::CHUNK,
                    2 => 2 * crate::output::CHUNK + rng.below(100) as usize,
                    _ => rng.below(5000) as usize,
                };
                let piece: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                if k % 3 == 0 {
                    let (a, b) = piece.split_at(n / 2);
                    out.put_vectored(&mut [IoSlice::new(a), IoSlice::new(b)])
                        .unwrap();
                } else {
                    out.put(&piece).unwrap();
                }
                want.extend_from_slice(&piece);
            }
            assert_eq!(out.size, want.len() as u64);
            let label = [0xabu8; 132];
            out.finish(&label).unwrap();
            want[..label.len()].copy_from_slice(&label);
            assert!(std::fs::read(&path).unwrap() == want, "case {case}");
        }
    }

    /// The 64-bit fast path of samples gives the payload `encode_value`
    /// gives (and drops what it drops), for values of every kind, random
    /// and at the limits.
    #[test]
    fn be64_of_is_encode_value_for_64_bit_types() {
        let mut rng = crate::model::TestRng(0x9e37_79b9_7f4a_7c15);
        let mut next = move || rng.next();
        let edges = [
            0,
            1,
            u64::MAX,
            i64::MAX as u64,
            i64::MIN as u64,
            i64::MAX as u64 + 1,
            (-1.5f64).to_bits(),
            f64::NAN.to_bits(),
        ];
        for k in 0..20_000 {
            let r = edges.get(k).copied().unwrap_or_else(&mut next);
            let values = [
                Value::I64(r as i64),
                Value::Enum(r as i64),
                Value::U64(r),
                Value::F64(f64::from_bits(r)),
                Value::F64((r >> 11) as f64),
                Value::F64(-((r >> 11) as f64)),
                Value::F32(f32::from_bits(r as u32)),
                Value::F32((r >> 40) as f32),
                Value::Str(r.to_string()),
                Value::Bytes(r.to_be_bytes().to_vec()),
            ];
            for t in [2, 3, 5] {
                for v in &values {
                    let want = match encode_value(Some(t), v, &|_| None) {
                        Some(Enc::Small(vt, a, 8)) if vt as i32 == t => Some(a),
                        None => None,
                        _ => panic!("type {t}: {v:?} is not a 64-bit block"),
                    };
                    assert_eq!(be64_of(t, v), want, "type {t}: {v:?}");
                }
            }
        }
    }
}
