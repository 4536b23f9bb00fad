//! The temporal index (`.index`): its entries, and the damage the format
//! can tell (issue 16, cases 4 and 7). `dump` lists the entries; `dump`,
//! `check` and the reader all report the damage.

use super::archive::{Members, RecordReader};
use super::layout::*;
use crate::error::{Diagnostic, Error, Position};

/// One index entry: time, volume, `.meta` offset, volume offset.
pub type Entry = (Stamp, i32, u64, u64);

/// The temporal index's entries, and the first damage of the index file
/// itself (bad label, an entry cut short): listed as far as it goes, then
/// reported (issue 16, case 4).
pub fn read_index(m: &Members, v: Version) -> (Vec<Entry>, Option<Error>) {
    let mut out = Vec::new();
    let Some(p) = &m.index else {
        return (out, None);
    };
    let mut rr = match RecordReader::open(p) {
        Ok(r) => r,
        Err(e) => return (out, Some(e)),
    };
    if let Err(e) = rr.label() {
        return (out, Some(e));
    }
    let b = match rr.rest(1 << 32) {
        Ok(b) => b,
        Err(e) => return (out, Some(e)),
    };
    let es = if v == Version::V2 { 20 } else { 32 };
    let mut err = None;
    if b.len() % es != 0 {
        let n = b.len() / es;
        err = Some(Error::format(
            Position::at(p, (v.label_len() + n * es) as u64, Some(n as u64 + 1)),
            format!(
                "index entry cut short: {} of {es} bytes (pmlogcheck: unexpected EOF in index entry)",
                b.len() % es
            ),
        ));
    }
    for e in b.chunks_exact(es) {
        let Some(s) = get_stamp(v, e, 0) else {
            continue;
        };
        let ts = v.ts_len();
        let vol = bei32(e, ts).unwrap_or(0);
        let (mo, d) = if v == Version::V2 {
            (
                be32(e, ts + 4).unwrap_or(0) as u64,
                be32(e, ts + 8).unwrap_or(0) as u64,
            )
        } else {
            (be64(e, ts + 4).unwrap_or(0), be64(e, ts + 12).unwrap_or(0))
        };
        out.push((s, vol, mo, d));
    }
    (out, err)
}

/// The first index entry whose offsets cannot be right: inside the label
/// (libpcp then fails to fetch: pmdumplog exits 1), past the end of the
/// .meta, or past the end of a volume that exists (a cut volume).
pub fn index_entry_damage(
    m: &Members,
    v: Version,
    index: &[Entry],
    meta_size: u64,
) -> Option<Error> {
    let p = m.index.as_ref()?;
    let es = if v == Version::V2 { 20 } else { 32 };
    let base = v.label_len() as u64;
    for (i, e) in index.iter().enumerate() {
        let vol_size = m
            .volumes
            .iter()
            .find(|(n, _)| *n as i64 == e.1 as i64)
            .and_then(|(_, vp)| super::archive::plain_size(vp));
        let msg = if (e.2 as i64) < base as i64 || (e.3 as i64) < base as i64 {
            format!(
                "index entry points inside the label (meta {}, log {})",
                e.2, e.3
            )
        } else if e.2 > meta_size {
            format!(
                "index entry points past the end of the .meta ({} > {meta_size})",
                e.2
            )
        } else if let Some(sz) = vol_size.filter(|&sz| e.3 > sz) {
            format!(
                "index entry points past the end of volume {} ({} > {sz}): volume cut short?",
                e.1, e.3
            )
        } else {
            continue;
        };
        return Some(Error::format(
            Position::at(p, base + (i * es) as u64, Some(i as u64 + 1)),
            msg,
        ));
    }
    None
}

/// The index's first damage, if any: a bad label, an entry cut short, an
/// entry whose offsets no record can have.
pub fn index_damage(m: &Members, v: Version, meta_size: u64) -> Option<Error> {
    let (entries, cut) = read_index(m, v);
    let meta_size = super::archive::plain_size(&m.meta).unwrap_or(meta_size);
    cut.or_else(|| index_entry_damage(m, v, &entries, meta_size))
}

/// `e` as a salvaged diagnostic at its own position (`fallback` if it has
/// none), without repeating the position in the message.
pub fn salvaged(e: Error, fallback: &std::path::Path) -> Diagnostic {
    match e {
        Error::Format { pos, msg } => Diagnostic::salvaged(pos, msg),
        e => Diagnostic::salvaged(Position::new(fallback), e.to_string()),
    }
}
