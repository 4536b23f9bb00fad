//! `.dlt` → model. KPI messages (APID/CTID `PROC`/`PROC` unless
//! `--kpi-app`/`--kpi-ctx` say otherwise) go through the shared KPI
//! [`Assembler`]; every other message becomes an [`Annotation`] carrying
//! its `dlt-convert -a` payload text and, in extras, its ids and its raw
//! record bytes (so `.dlt → .dlt` keeps it verbatim).
//!
//! Time (spec §6): an item's time is `tmsp + offset`, with offset =
//! min(storage time − tmsp) over the boot segment the message belongs to
//! (found by a header-only pre-scan of the file; a segment ends where tmsp
//! jumps back by more than 50 s). `raw_clock` keeps tmsp (0.1 ms ticks).
//! Messages without WTMS get their storage time. From stdin (no pre-scan)
//! the offset comes from the first message with a timestamp.

use super::layout::{self, id_from, id_text, Msg};
use super::scan::Scanner;
use super::text;
use crate::error::{Diagnostic, Position, Result};
use crate::formats::kpi::assemble::Assembler;
use crate::formats::kpi::dataset::Kind;
use crate::formats::kpi::text::{X_APID, X_CTID, X_ECU};
use crate::input::{Input, InputKind};
use crate::model::*;
use crate::options::ReadOptions;
use std::collections::VecDeque;
use std::io::Read;
use std::path::PathBuf;

/// Extras keys of annotations made from non-KPI messages (and of the header).
pub const X_MCNT: &str = "dlt.mcnt";
pub const X_SESSION: &str = "dlt.session";
pub const X_MSIN: &str = "dlt.msin";
pub const X_TMSP: &str = "dlt.tmsp";
/// The whole original record (storage header included).
pub const X_RAW: &str = "dlt.raw";
/// KPI events and samples: the storage-header time (ns) of the message the
/// event came from, or of the group's BEG message for a sample.
pub const X_STORAGE: &str = "dlt.storage_ns";
/// Header: the offset (ns) added to tmsp × 100 µs for the first segment.
pub const X_OFFSET: &str = "dlt.time_offset_ns";

/// A tmsp going back by more than this (0.1 ms ticks) starts a new boot
/// segment (dlt-sortbytimestamp uses the same 50 s).
const SEGMENT_JUMP: u32 = 500_000;

fn storage_ns(m: &Msg) -> i64 {
    (m.secs as i64) * 1_000_000_000 + (m.usecs as i64) * 1000
}

/// Boot segments: (index of the first record, offset in ns).
fn prescan(input: &Input, salvage: bool) -> Result<Vec<(u64, i64)>> {
    let mut segs: Vec<(u64, i64)> = Vec::new();
    let mut sc = Scanner::new(super::open_raw(input)?, input.path.clone(), salvage);
    let mut last: Option<u32> = None;
    let mut idx = 0u64;
    // Damage is reported by the main pass; here it just ends the scan.
    while let Ok(Some(m)) = sc.next_msg() {
        if let Some(t) = m.tmsp {
            let off = storage_ns(&m) - t as i64 * 100_000;
            let new_seg = match last {
                None => true,
                Some(l) => t < l && l - t > SEGMENT_JUMP,
            };
            if new_seg {
                segs.push((idx, off));
            } else if let Some(s) = segs.last_mut() {
                s.1 = s.1.min(off);
            }
            last = Some(t);
        }
        idx += 1;
    }
    Ok(segs)
}

struct State {
    path: PathBuf,
    segs: Vec<(u64, i64)>,
    seg: usize,
    stream_offset: Option<i64>,
    last_tmsp: Option<u32>,
    app: [u8; 4],
    ctx: [u8; 4],
    asm: Assembler,
    queue: VecDeque<Item>,
    header: Header,
    diags: Vec<Diagnostic>,
    kpi_msgs: u64,
    other_msgs: u64,
    bad_kpi: u64,
    warned: usize,
    text: Vec<u8>,
    /// Last KPI message counter and session (spec §9.1: gaps mean loss).
    last_mcnt: Option<(u8, Option<u32>)>,
    mcnt_gaps: u64,
    lost_msgs: u64,
    /// Storage time of the last BEG per KPI type.
    beg_storage: std::collections::HashMap<&'static str, i64>,
}

impl State {
    fn time_of(&mut self, idx: u64, m: &Msg) -> (Timestamp, Option<u64>) {
        let Some(t) = m.tmsp else {
            return (Timestamp(storage_ns(m)), None);
        };
        let off = if self.segs.is_empty() {
            // Streaming: the first timestamped message fixes the offset,
            // and a backward jump starts a new segment.
            let jump = self
                .last_tmsp
                .is_some_and(|l| t < l && l - t > SEGMENT_JUMP);
            if self.stream_offset.is_none() || jump {
                self.stream_offset = Some(storage_ns(m) - t as i64 * 100_000);
            }
            self.stream_offset.unwrap_or(0)
        } else {
            while self.seg + 1 < self.segs.len() && self.segs[self.seg + 1].0 <= idx {
                self.seg += 1;
            }
            self.segs[self.seg].1
        };
        self.last_tmsp = Some(t);
        (Timestamp(off + t as i64 * 100_000), Some(t as u64))
    }

    fn message(&mut self, idx: u64, m: &Msg) {
        let (time, raw) = self.time_of(idx, m);
        let is_kpi = m
            .ext
            .is_some_and(|e| e.apid == self.app && e.ctid == self.ctx);
        if is_kpi {
            let mut args: Vec<&[u8]> = Vec::with_capacity(64);
            if layout::string_args(m, &mut args)
                && args.first().is_some_and(|a| Kind::parse(a).is_some())
            {
                if self.kpi_msgs == 0 {
                    self.header.extras.set(
                        X_ECU,
                        ExtraValue::Str(String::from_utf8_lossy(id_text(&m.ecu_id())).into()),
                    );
                    if let Some(s) = m.session {
                        self.header.extras.set(X_SESSION, ExtraValue::U64(s as u64));
                    }
                }
                self.kpi_msgs += 1;
                self.check_mcnt(idx, m);
                let stored = storage_ns(m);
                if args.len() == 2 && args[1] == b"BEG" {
                    if let Some(k) = Kind::parse(args[0]) {
                        self.beg_storage.insert(k.name(), stored);
                    }
                }
                let mut out = Vec::new();
                if let Err(e) = self.asm.message(&args, time, raw, &mut out) {
                    self.warn(m.offset, idx, e);
                }
                for it in &mut out {
                    self.mark_storage(it, Some(stored));
                }
                self.queue.extend(out);
                for w in std::mem::take(&mut self.asm.warnings) {
                    self.warn(m.offset, idx, w);
                }
                return;
            }
            self.bad_kpi += 1;
            self.warn(
                m.offset,
                idx,
                "message with the KPI ids is not a KPI message (arguments are not strings, or the first is not NEW/STP/ACT/CHK/IRQ); kept as an annotation".into(),
            );
        }
        self.other_msgs += 1;
        self.text.clear();
        text::payload(m, &mut self.text);
        let mut x = Extras::default();
        let id = |b: &[u8; 4]| ExtraValue::Str(String::from_utf8_lossy(id_text(b)).into());
        x.set(X_ECU, id(&m.ecu_id()));
        if let Some(e) = m.ext {
            x.set(X_APID, id(&e.apid));
            x.set(X_CTID, id(&e.ctid));
            x.set(X_MSIN, ExtraValue::U64(e.msin as u64));
        }
        x.set(X_MCNT, ExtraValue::U64(m.mcnt as u64));
        if let Some(s) = m.session {
            x.set(X_SESSION, ExtraValue::U64(s as u64));
        }
        if let Some(t) = m.tmsp {
            x.set(X_TMSP, ExtraValue::U64(t as u64));
        }
        x.set(X_RAW, ExtraValue::Bytes(m.raw.to_vec()));
        self.queue.push_back(Item::Annotation(Annotation {
            time,
            raw_clock: raw,
            text: String::from_utf8_lossy(&self.text).into_owned(),
            extras: x,
        }));
    }

    /// dlt-kpi's messages share one 8-bit counter per context: a jump
    /// means messages were lost (a new session restarts the count).
    fn check_mcnt(&mut self, idx: u64, m: &Msg) {
        if let Some((last, sess)) = self.last_mcnt {
            let expect = last.wrapping_add(1);
            if sess == m.session && m.mcnt != expect {
                let lost = m.mcnt.wrapping_sub(expect) as u64;
                self.mcnt_gaps += 1;
                self.lost_msgs += lost;
                self.warn(
                    m.offset,
                    idx,
                    format!(
                        "KPI message counter jumps from {last} to {}: about {lost} messages lost",
                        m.mcnt
                    ),
                );
            }
        }
        self.last_mcnt = Some((m.mcnt, m.session));
    }

    /// Attach the storage time: the message's for events, the group BEG's
    /// for samples (the assembler emits them at END).
    fn mark_storage(&self, it: &mut Item, event_storage: Option<i64>) {
        match it {
            Item::Event(e) => {
                if let Some(t) = event_storage {
                    e.extras.set(X_STORAGE, ExtraValue::I64(t));
                }
            }
            Item::Sample(s) => {
                let beg = s
                    .extras
                    .str(crate::formats::kpi::schema::X_KIND)
                    .and_then(|k| self.beg_storage.get(k));
                if let Some(t) = beg {
                    s.extras.set(X_STORAGE, ExtraValue::I64(*t));
                }
            }
            _ => {}
        }
    }

    fn warn(&mut self, offset: u64, idx: u64, msg: String) {
        // Data warnings can be many; keep the first 100.
        if self.warned < 100 {
            self.diags.push(Diagnostic::warning(
                Position::at(&self.path, offset, Some(idx)),
                msg,
            ));
        }
        self.warned += 1;
    }

    fn finish(&mut self) {
        let mut out = Vec::new();
        self.asm.finish(&mut out);
        for it in &mut out {
            self.mark_storage(it, None);
        }
        self.queue.extend(out);
        for w in std::mem::take(&mut self.asm.warnings) {
            self.warn(0, 0, w);
        }
        let p = Position::new(&self.path);
        if self.warned > 100 {
            self.diags.push(Diagnostic::warning(
                p.clone(),
                format!("{} more data warnings not shown", self.warned - 100),
            ));
        }
        if self.asm.truncated() > 0 {
            self.diags.push(Diagnostic::warning(
                p.clone(),
                format!(
                    "dropped {} truncated duplicate datasets (libdlt split marker)",
                    self.asm.truncated()
                ),
            ));
        }
        if self.other_msgs > 0 {
            self.diags.push(Diagnostic::warning(
                p,
                format!(
                    "{} messages are not {}/{} KPI messages: kept as annotations",
                    self.other_msgs,
                    String::from_utf8_lossy(id_text(&self.app)),
                    String::from_utf8_lossy(id_text(&self.ctx))
                ),
            ));
        }
    }
}

pub struct DltReader {
    sc: Scanner<Box<dyn Read>>,
    st: State,
    idx: u64,
    done: bool,
}

impl DltReader {
    pub fn open(input: &Input, opts: &ReadOptions) -> Result<DltReader> {
        let segs = if input.kind == InputKind::File {
            prescan(input, opts.salvage)?
        } else {
            Vec::new()
        };
        let mut header = Header::new(FormatId::Dlt, "1");
        header.time_base = TimeBase::Absolute;
        // Items keep the message's tmsp (0.1 ms ticks since boot) as raw clock.
        header.extras.set(
            crate::model::keys::RAW_CLOCK,
            ExtraValue::Str(crate::model::keys::CLOCK_DLT.into()),
        );
        if let Some(s) = segs.first() {
            header.extras.set(X_OFFSET, ExtraValue::I64(s.1));
        }
        let sc = Scanner::new(super::open_raw(input)?, input.path.clone(), opts.salvage);
        Ok(DltReader {
            sc,
            st: State {
                path: input.path.clone(),
                segs,
                seg: 0,
                stream_offset: None,
                last_tmsp: None,
                app: id_from(opts.kpi_app.as_deref().unwrap_or("PROC")),
                ctx: id_from(opts.kpi_ctx.as_deref().unwrap_or("PROC")),
                asm: Assembler::new(),
                queue: VecDeque::new(),
                header,
                diags: Vec::new(),
                kpi_msgs: 0,
                other_msgs: 0,
                bad_kpi: 0,
                warned: 0,
                text: Vec::with_capacity(4096),
                last_mcnt: None,
                mcnt_gaps: 0,
                lost_msgs: 0,
                beg_storage: Default::default(),
            },
            idx: 0,
            done: false,
        })
    }

    /// Datasets per KPI type so far.
    pub fn counts(&self) -> &std::collections::BTreeMap<String, u64> {
        self.st.asm.counts()
    }
}

impl TraceReader for DltReader {
    fn header(&self) -> &Header {
        &self.st.header
    }

    fn next_item(&mut self) -> Result<Option<Item>> {
        loop {
            if let Some(it) = self.st.queue.pop_front() {
                return Ok(Some(it));
            }
            if self.done {
                return Ok(None);
            }
            match self.sc.next_msg() {
                Ok(Some(m)) => {
                    self.st.message(self.idx, &m);
                    self.idx += 1;
                }
                Ok(None) => {
                    self.done = true;
                    self.st.diags.append(&mut self.sc.diags);
                    self.st.finish();
                }
                Err(e) => {
                    self.done = true;
                    return Err(e);
                }
            }
        }
    }

    fn diagnostics(&self) -> &[Diagnostic] {
        &self.st.diags
    }

    fn native_counts(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = Kind::ALL
            .iter()
            .map(|k| {
                let n = self.st.asm.counts().get(k.name()).copied().unwrap_or(0);
                (format!("{} datasets", k.name()), n)
            })
            .collect();
        v.push(("KPI messages".into(), self.st.kpi_msgs));
        v.push(("other messages".into(), self.st.other_msgs));
        v.push(("KPI counter gaps".into(), self.st.mcnt_gaps));
        v.push(("KPI messages lost (by counter)".into(), self.st.lost_msgs));
        v
    }
}
