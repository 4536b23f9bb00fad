//! `polytrace dump FILE.dlt`: what `dlt-convert -a` (or `-s` with
//! `--headers-only`) prints, byte for byte, for undamaged files. Damage is
//! reported instead of being skipped silently (see scan.rs).

use super::scan::Scanner;
use super::text::{self, push_u64, DateCache};
use crate::error::{Diagnostic, Error, Result};
use crate::input::Input;
use crate::model::{Timestamp, WindowClock};
use crate::options::{DumpOptions, ReadOptions};
use std::io::Write;

/// Output is collected in a chunk this big before each write.
const CHUNK: usize = 1 << 18;

pub fn dump(
    input: &Input,
    ropts: &ReadOptions,
    dopts: &DumpOptions,
    out: &mut dyn Write,
) -> Result<Vec<Diagnostic>> {
    if !dopts.select.is_empty() {
        return Err(Error::Usage(
            "the dlt-convert listing shows whole messages, and a KPI message carries several datasets of several kinds: --event/--metric/--instance/--cpu do not apply to it (select messages with --ecu/--app/--ctx/--level/--grep/--lifecycle, or use --style common)".into(),
        ));
    }
    // The window goes by the storage time the listing shows; `-DURATION`
    // counts from the latest one (a first pass over the file).
    let mut clock = if dopts.window.is_open() {
        None
    } else {
        let end = if dopts.window.needs_end() {
            let mut sc = Scanner::new(super::open_raw(input)?, input.path.clone(), true);
            let mut end = None;
            while let Ok(Some(m)) = sc.next_msg() {
                let t = storage_time(m.secs, m.usecs);
                end = Some(end.map_or(t, |e: Timestamp| e.max(t)));
            }
            end
        } else {
            None
        };
        Some(WindowClock::new(dopts.window, None, end).map_err(Error::Usage)?)
    };
    let stream = super::open_raw(input)?;
    let mut sc = Scanner::new(stream, input.path.clone(), ropts.salvage);
    let mut dates = DateCache::new();
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK + 16 * 1024);
    let werr = |e| Error::io("<stdout>", e);
    let mut idx = 0u64;
    // The message filters; lines keep their index in the whole file.
    let sel = &ropts.messages;
    let mut lifecycles = super::lifecycle::Tracker::default();
    let mut scratch = Vec::new();
    loop {
        let m = match sc.next_msg() {
            Ok(Some(m)) => m,
            Ok(None) => break,
            Err(e) => {
                // Keep what was listed before the damage.
                out.write_all(&buf).map_err(werr)?;
                return Err(e);
            }
        };
        // Every message counts for the lifecycles, the filtered-out too.
        let lc = if sel.lifecycle.is_some() {
            lifecycles.push(&m)
        } else {
            0
        };
        if let Some(c) = clock.as_mut() {
            // Lines keep their message index, as dlt-convert -b/-e do.
            if !c
                .contains(storage_time(m.secs, m.usecs))
                .map_err(Error::Usage)?
            {
                idx += 1;
                continue;
            }
        }
        if !sel.is_empty() && !super::lifecycle::selected(sel, &m, lc, &mut scratch) {
            idx += 1;
            continue;
        }
        push_u64(&mut buf, idx);
        buf.push(b' ');
        text::header(&mut dates, &m, &mut buf);
        if dopts.headers_only {
            buf.extend_from_slice(b" \n");
        } else {
            buf.extend_from_slice(b" [");
            text::payload(&m, &mut buf);
            buf.extend_from_slice(b"]\n");
        }
        idx += 1;
        if buf.len() >= CHUNK {
            out.write_all(&buf).map_err(werr)?;
            buf.clear();
        }
    }
    out.write_all(&buf).map_err(werr)?;
    Ok(std::mem::take(&mut sc.diags))
}

fn storage_time(secs: u32, usecs: i32) -> Timestamp {
    Timestamp(secs as i64 * 1_000_000_000 + usecs as i64 * 1000)
}
