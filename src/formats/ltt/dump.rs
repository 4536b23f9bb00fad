//! The one-line-per-event listing of spec 5.15.

use super::layout::{self, ID_BLOCK_END, ID_BLOCK_START, ID_FACILITY_LOAD, ID_HEARTBEAT};
use super::reader::{Merge, Trace};
use crate::error::{Diagnostic, Error, Result};
use crate::model::{Selection, TimeWindow, Timestamp, WindowClock};
use std::io::Write;

/// Write the listing of `t` to `out`; returns the diagnostics met.
pub fn dump(t: &Trace, no_framing: bool, out: &mut dyn Write) -> Result<Vec<Diagnostic>> {
    dump_subset(
        t,
        no_framing,
        &TimeWindow::default(),
        &Selection::default(),
        out,
    )
}

/// The listing of what the window (event times; `+`/`-` count from the
/// earliest and latest event) and the selection (`--event` on
/// `facility.event`, `--cpu` on the cpu/N tracefiles) keep. Metric and
/// instance filters do not apply: the listing shows events as stored.
pub fn dump_subset(
    t: &Trace,
    no_framing: bool,
    window: &TimeWindow,
    sel: &Selection,
    out: &mut dyn Write,
) -> Result<Vec<Diagnostic>> {
    if sel.names_metrics() {
        return Err(Error::Usage(
            "the LTT listing shows events as stored: --metric/--instance do not apply (samples are metric.<name> events here: use --event 'metric.NAME', or --style common)".into(),
        ));
    }
    let mut clock = if window.is_open() {
        None
    } else {
        let end = if window.needs_end() {
            t.time_span().1.map(Timestamp)
        } else {
            None
        };
        Some(WindowClock::new(*window, None, end).map_err(Error::Usage)?)
    };
    // Per event index: kept by --event? Per file: kept by --cpu?
    let keep_ev: Vec<bool> = t
        .events
        .iter()
        .map(|e| !sel.filters_events() || sel.event_name(&format!("{}.{}", e.facility, e.name)))
        .collect();
    let keep_file: Vec<bool> = t.files.iter().map(|f| sel.cpu(f.cpu)).collect();
    let mut diags = t.diags.clone();
    let mut merge = Merge::new(t, &mut diags);
    // The polytrace self-description is bookkeeping too (docs/ltt.md).
    let carrier = super::selfdesc::ids(t).unwrap_or(0..0);
    // Names as bytes once, not per event.
    let names: Vec<Vec<u8>> = t
        .events
        .iter()
        .map(|e| format!("{}.{}: ", e.facility, e.name).into_bytes())
        .collect();
    let rels: Vec<Vec<u8>> = t
        .files
        .iter()
        .map(|f| format!(" ({})", f.rel).into_bytes())
        .collect();
    let mut line: Vec<u8> = Vec::with_capacity(256);
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
    let io = |e: std::io::Error| Error::io("<output>", e);
    while let Some((ci, ev)) = merge.next(t, &mut diags) {
        let fi = merge.cursors[ci].file_idx;
        if let Some(c) = clock.as_mut() {
            // The first event fixes the start (+DURATION) even when the
            // filters leave it out, as for every other listing.
            if !c.contains(Timestamp(ev.time)).map_err(Error::Usage)? {
                continue;
            }
        }
        // facility_load in control/facilities is bookkeeping a writer
        // regenerates, so it goes with the framing.
        if no_framing
            && (matches!(ev.id, ID_BLOCK_START | ID_BLOCK_END | ID_HEARTBEAT)
                || (ev.id == ID_FACILITY_LOAD && fi == 0 && t.files[0].rel == "control/facilities")
                || carrier.contains(&ev.id))
        {
            continue;
        }
        let Some(&idx) = t.table.get(ev.id as usize) else {
            continue;
        };
        let Some(info) = t.events.get(idx as usize) else {
            continue;
        };
        if !keep_ev[idx as usize] || !keep_file[fi] {
            continue;
        }
        let cur = &merge.cursors[ci];
        line.clear();
        line.extend_from_slice(&names[idx as usize]);
        let _ = write!(line, "{}", Timestamp(ev.time));
        line.extend_from_slice(&rels[fi]);
        if let Some(ty) = &info.ty {
            line.push(b' ');
            let mut at = 0;
            let payload = &cur.buf[ev.start..ev.end];
            if layout::dump(ty, payload, &mut at, t.bo, &mut line).is_err() {
                // skip() already accepted it, so this cannot happen; keep going.
                line.extend_from_slice(b"<undecodable>");
            }
        }
        line.push(b'\n');
        buf.extend_from_slice(&line);
        if buf.len() >= 1 << 16 {
            out.write_all(&buf).map_err(io)?;
            buf.clear();
        }
    }
    out.write_all(&buf).map_err(io)?;
    out.flush().map_err(io)?;
    Ok(diags)
}
