//! The one-line-per-event listing of spec 5.15.

use super::layout::{self, ID_BLOCK_END, ID_BLOCK_START, ID_FACILITY_LOAD, ID_HEARTBEAT};
use super::reader::{Merge, Trace};
use crate::error::{Diagnostic, Error, Result};
use crate::model::Timestamp;
use std::io::Write;

/// Write the listing of `t` to `out`; returns the diagnostics met.
pub fn dump(t: &Trace, no_framing: bool, out: &mut dyn Write) -> Result<Vec<Diagnostic>> {
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
