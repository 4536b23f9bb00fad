//! Model → `.dlt` shaped like dlt-kpi + libdlt output as dlt-receive
//! stores it (spec §1.7, §3.7, §9.5): one `<TYPE> BEG` message, the
//! datasets packed into verbose messages of string arguments up to the
//! payload limit (1390 by default), one `<TYPE> END` message; htyp 0x3d,
//! msin 0x41, one 8-bit message counter over all KPI messages.
//!
//! - Storage header time: the group's item time. tmsp: the item's raw
//!   clock when the source is DLT or KPI text (it is tmsp there), else
//!   derived as 0.1 ms ticks since the first item (also for the recorder,
//!   whose raw clock is a TSC).
//! - Annotations read from a `.dlt` (they carry `dlt.raw`) are written back
//!   verbatim; other annotations become one-string-argument log messages
//!   (APID/CTID from their extras, else `POLY`/`NOTE`).
//! - The truncated-duplicate tail of libdlt ≥ 2.18.4 is not emulated; a
//!   dataset that cannot fit in an empty message is cut to fit (reported
//!   as degraded), where dlt-kpi would loop forever.

use super::layout::{self, id_from, put_record, put_string_arg, RecordSpec};
use super::reader::{X_MSIN, X_RAW};
use crate::error::{Error, Result};
use crate::formats::kpi::grouper::{pack, Group, Grouper, DEFAULT_PAYLOAD_MAX};
use crate::formats::kpi::text::{X_APID, X_CTID, X_ECU};
use crate::model::*;
use crate::options::WriteOptions;
use std::io::Write;
use std::path::PathBuf;

/// msin of dlt-kpi messages: verbose, log, info.
const MSIN_KPI: u8 = 0x41;
/// Type argument: 4 type info + 2 length + 3 letters + NUL.
const TYPE_ARG: usize = 10;
/// Largest payload a u16 `len` allows after the 26 header bytes.
const PAYLOAD_HARD_MAX: usize = u16::MAX as usize - 26;
/// Annotations held back for ordering before they are written anyway.
const MAX_QUEUED_NOTES: usize = 10_000;

pub struct DltWriter<W: Write> {
    out: W,
    name: PathBuf,
    grouper: Grouper,
    loss: LossReport,
    mcnt: u8,
    note_mcnt: u8,
    ecu: [u8; 4],
    apid: [u8; 4],
    ctid: [u8; 4],
    session: u32,
    payload_max: usize,
    tmsp_from_raw: bool,
    first_time: Option<Timestamp>,
    /// Annotations waiting for the groups before them to be written.
    notes: Vec<Annotation>,
    payload: Vec<u8>,
    rec: Vec<u8>,
}

impl<W: Write> DltWriter<W> {
    pub fn new(out: W, name: PathBuf, header: &Header, opts: &WriteOptions) -> DltWriter<W> {
        let session = opts
            .session_id
            .or_else(|| {
                header
                    .extras
                    .u64(super::reader::X_SESSION)
                    .and_then(|s| u32::try_from(s).ok())
            })
            .unwrap_or_else(std::process::id);
        DltWriter {
            out,
            name,
            grouper: Grouper::new(),
            loss: LossReport::default(),
            mcnt: 0,
            note_mcnt: 0,
            ecu: id_from(
                opts.ecu
                    .as_deref()
                    .or(header.extras.str(X_ECU))
                    .unwrap_or("ECU1"),
            ),
            apid: id_from(opts.app_id.as_deref().unwrap_or("PROC")),
            ctid: id_from(opts.ctx_id.as_deref().unwrap_or("PROC")),
            session,
            payload_max: opts
                .dlt_payload_max
                .unwrap_or(DEFAULT_PAYLOAD_MAX)
                .clamp(TYPE_ARG + 8, PAYLOAD_HARD_MAX),
            // DLT and KPI-text sources carry tmsp as their raw clock; the
            // recorder (source Kpi) says when its raw clock is a TSC instead.
            tmsp_from_raw: header.source == FormatId::Dlt
                || (header.source == FormatId::Kpi
                    && header
                        .extras
                        .str(crate::model::keys::RAW_CLOCK)
                        .is_none_or(|c| c == crate::model::keys::CLOCK_DLT)),
            first_time: None,
            notes: Vec::new(),
            payload: Vec::with_capacity(DEFAULT_PAYLOAD_MAX),
            rec: Vec::with_capacity(1 << 16),
        }
    }

    fn tmsp(&mut self, time: Timestamp, raw: Option<u64>) -> u32 {
        let first = *self.first_time.get_or_insert(time);
        match raw {
            Some(r) if self.tmsp_from_raw => r as u32,
            _ => ((time.0 - first.0).max(0) / 100_000) as u32,
        }
    }

    fn storage_time(time: Timestamp) -> (u32, i32) {
        let secs = time.secs().clamp(0, u32::MAX as i64) as u32;
        (secs, (time.subsec_nanos() / 1000) as i32)
    }

    fn message(&mut self, time: Timestamp, tmsp: u32, args: &[&[u8]]) {
        self.payload.clear();
        for a in args {
            put_string_arg(&mut self.payload, a);
        }
        let (secs, usecs) = Self::storage_time(time);
        put_record(
            &mut self.rec,
            &RecordSpec {
                secs,
                usecs,
                ecu: self.ecu,
                mcnt: self.mcnt,
                session: self.session,
                tmsp,
                msin: MSIN_KPI,
                noar: args.len() as u8,
                apid: self.apid,
                ctid: self.ctid,
                payload: &self.payload,
            },
        );
        self.mcnt = self.mcnt.wrapping_add(1);
    }

    fn group(&mut self, mut g: Group) -> Result<()> {
        let tmsp = self.tmsp(g.time, g.raw_clock);
        let kind = g.kind.as_bytes();
        // A dataset must fit with the type argument into one message.
        let max_ds = self.payload_max - TYPE_ARG - 7;
        for d in g.datasets.iter_mut() {
            if d.len() > max_ds {
                d.truncate(max_ds);
                self.loss.degrade(
                    &format!("{} datasets", g.kind),
                    "longer than a message can hold: cut to fit",
                );
            }
        }
        self.message(g.time, tmsp, &[kind, b"BEG"]);
        for r in pack(&g.datasets, self.payload_max) {
            // pack() bounds the count by payload size; noar is a u8.
            for chunk in g.datasets[r].chunks(254) {
                let mut args: Vec<&[u8]> = Vec::with_capacity(chunk.len() + 1);
                args.push(kind);
                args.extend(chunk.iter().map(|d| d.as_slice()));
                self.message(g.time, tmsp, &args);
            }
        }
        self.message(g.time, tmsp, &[kind, b"END"]);
        self.loss
            .wrote(&format!("{} datasets", g.kind), g.datasets.len() as u64);
        self.flush_rec()
    }

    fn note(&mut self, a: &Annotation) -> Result<()> {
        if let Some(raw) = a.extras.bytes(X_RAW) {
            if layout::check_headers(raw).ok() == Some(raw.len()) {
                self.rec.extend_from_slice(raw);
                self.loss.wrote("annotations (original DLT records)", 1);
                return self.flush_rec();
            }
        }
        let tmsp = self.tmsp(a.time, a.raw_clock);
        let (secs, usecs) = Self::storage_time(a.time);
        let mut text = a.text.as_bytes();
        let max = self.payload_max - 7;
        if text.len() > max {
            text = &text[..max];
            self.loss
                .degrade("annotations", "longer than a message can hold: cut to fit");
        }
        self.payload.clear();
        put_string_arg(&mut self.payload, text);
        let msin = a
            .extras
            .u64(X_MSIN)
            .map(|m| (m as u8) | layout::MSIN_VERB)
            .unwrap_or(MSIN_KPI);
        put_record(
            &mut self.rec,
            &RecordSpec {
                secs,
                usecs,
                ecu: self.ecu,
                mcnt: self.note_mcnt,
                session: self.session,
                tmsp,
                msin,
                noar: 1,
                apid: id_from(a.extras.str(X_APID).unwrap_or("POLY")),
                ctid: id_from(a.extras.str(X_CTID).unwrap_or("NOTE")),
                payload: &self.payload,
            },
        );
        self.note_mcnt = self.note_mcnt.wrapping_add(1);
        self.loss.wrote("annotations", 1);
        self.flush_rec()
    }

    fn flush_rec(&mut self) -> Result<()> {
        if self.rec.len() >= 1 << 15 {
            self.out
                .write_all(&self.rec)
                .map_err(|e| Error::io(&self.name, e))?;
            self.rec.clear();
        }
        Ok(())
    }

    /// Write groups, each preceded by the queued annotations older than it
    /// (the grouper hands a group over only when the next one starts).
    fn emit(&mut self, groups: Vec<Group>, all_notes: bool) -> Result<()> {
        for g in groups {
            let n = self.notes.iter().take_while(|a| a.time < g.time).count();
            for a in self.notes.drain(..n).collect::<Vec<_>>() {
                self.note(&a)?;
            }
            self.group(g)?;
        }
        if all_notes || self.notes.len() > MAX_QUEUED_NOTES {
            for a in std::mem::take(&mut self.notes) {
                self.note(&a)?;
            }
        }
        Ok(())
    }
}

impl<W: Write> TraceWriter for DltWriter<W> {
    fn write_item(&mut self, item: &Item) -> Result<()> {
        match item {
            Item::Annotation(a) => {
                self.notes.push(a.clone());
                if self.notes.len() > MAX_QUEUED_NOTES {
                    return self.emit(Vec::new(), true);
                }
                Ok(())
            }
            Item::Mark(_) => {
                self.loss.drop_item("marks", "DLT KPI files have no marks");
                Ok(())
            }
            _ => {
                let groups = self.grouper.item(item, &mut self.loss);
                if groups.is_empty() {
                    return Ok(());
                }
                self.emit(groups, false)
            }
        }
    }

    fn finish(mut self: Box<Self>) -> Result<LossReport> {
        let groups = self.grouper.finish(&mut self.loss);
        self.emit(groups, true)?;
        let rec = std::mem::take(&mut self.rec);
        self.out
            .write_all(&rec)
            .map_err(|e| Error::io(&self.name, e))?;
        self.out.flush().map_err(|e| Error::io(&self.name, e))?;
        Ok(std::mem::take(&mut self.loss))
    }
}
