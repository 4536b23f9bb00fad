//! Structural validation in the spirit of pmlogcheck: labels, framing,
//! metadata sanity, result order and the temporal index. The first
//! structural problem is an error naming file, byte offset and record
//! (or, with --salvage, a salvaged diagnostic); oddities are warnings.

use super::archive::{self, Members, RecordReader};
use super::layout::*;
use super::meta::MetaRec;
use super::reader::{load_meta, VolumeWalker};
use crate::error::{Diagnostic, Error, Position, Result};
use crate::model::Units;

pub fn check(m: Members, salvage: bool) -> Result<Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let mf = load_meta(&m, salvage, &mut diags)?;
    let v = mf.label.version;
    let warn = |d: &mut Vec<Diagnostic>, off: u64, rec: u64, msg: String| {
        d.push(Diagnostic::warning(
            Position::at(&m.meta, off, Some(rec)),
            msg,
        ))
    };
    if mf.label.features & 0x7fff_ffff != 0 {
        warn(
            &mut diags,
            0,
            0,
            format!("label has unknown feature bits 0x{:x}", mf.label.features),
        );
    }
    // Descriptors.
    let mut indom_times: Vec<(u64, u64, Stamp)> = Vec::new();
    for (i, (off, r)) in mf.recs.iter().enumerate() {
        let recno = i as u64 + 1;
        match r {
            MetaRec::Desc(d) => {
                let p = pmid_str(d.pmid);
                if !(-1..=10).contains(&d.vtype) {
                    warn(
                        &mut diags,
                        *off,
                        recno,
                        format!("{p}: unknown type {}", d.vtype),
                    );
                }
                if ![1, 3, 4].contains(&d.sem) {
                    warn(
                        &mut diags,
                        *off,
                        recno,
                        format!("{p}: unknown semantics {}", d.sem),
                    );
                }
                let u = Units::from_word(d.units);
                if (u.dim_space == 0 && u.scale_space != 0)
                    || (u.dim_time == 0 && u.scale_time != 0)
                    || (u.dim_count == 0 && u.scale_count != 0)
                {
                    warn(
                        &mut diags,
                        *off,
                        recno,
                        format!("{p}: non-zero scale for a zero dimension in units"),
                    );
                }
                if d.names.is_empty() {
                    warn(
                        &mut diags,
                        *off,
                        recno,
                        format!("{p}: descriptor without a name"),
                    );
                }
                if d.indom != PM_INDOM_NULL && pmid_domain(d.pmid) != (d.indom >> 22) & 0x1ff {
                    warn(
                        &mut diags,
                        *off,
                        recno,
                        format!(
                            "{p}: instance domain {} is of another domain",
                            indom_str(d.indom)
                        ),
                    );
                }
            }
            MetaRec::InDom(x) => indom_times.push((*off, recno, x.stamp)),
            MetaRec::Label(x) => indom_times.push((*off, recno, x.stamp)),
            MetaRec::Text(_) => {}
        }
    }
    // Data volumes.
    let types: std::collections::HashMap<u32, i32> = mf
        .recs
        .iter()
        .filter_map(|(_, r)| match r {
            MetaRec::Desc(d) => Some((d.pmid, d.vtype)),
            _ => None,
        })
        .collect();
    let mut value_damage: Option<Error> = None;
    let mut w = VolumeWalker::new(m.clone(), mf.label.clone());
    let mut last: Option<Stamp> = None;
    let mut first: Option<Stamp> = None;
    let mut n = 0u64;
    loop {
        let r = w.next_record(&mut diags).and_then(|more| {
            if more {
                w.parse()
                    .map(|r| Some((r.stamp, stored_type_mismatch(&r, &types))))
            } else {
                Ok(None)
            }
        });
        match r {
            Ok(Some((t, mismatch))) => {
                n += 1;
                let pos = Position::at(w.path(), w.at.0, Some(w.at.2));
                match mismatch {
                    Some((true, msg)) if value_damage.is_none() => {
                        value_damage = Some(Error::format(pos.clone(), msg));
                    }
                    Some((false, msg)) => diags.push(Diagnostic::warning(pos.clone(), msg)),
                    _ => {}
                }
                if first.is_none() {
                    first = Some(t);
                    if t < mf.label.start {
                        diags.push(Diagnostic::warning(
                            pos.clone(),
                            "first result precedes the label start time",
                        ));
                    }
                }
                if let Some(l) = last {
                    if t < l {
                        diags.push(Diagnostic::warning(pos, "timestamp went backwards"));
                    }
                }
                last = Some(t);
            }
            Ok(None) => break,
            Err(e) if salvage => {
                let pos = match &e {
                    Error::Format { pos, .. } => pos.clone(),
                    _ => Position::new(w.path()),
                };
                diags.push(Diagnostic::salvaged(pos, format!("{e}")));
                break;
            }
            Err(e) => return Err(e),
        }
    }
    if n == 0 {
        let e = Error::format(
            Position::new(&m.base),
            "empty archive: no result records in any volume",
        );
        if salvage {
            diags.push(Diagnostic::salvaged(Position::new(&m.base), e.to_string()));
        } else {
            return Err(e);
        }
    }
    if let (Some(f), Some(l)) = (first, last) {
        for (off, recno, t) in &indom_times {
            if *t < f || *t > l {
                warn(
                    &mut diags,
                    *off,
                    *recno,
                    "metadata timestamp outside the archive's time range".into(),
                );
                break;
            }
        }
    }
    if let Some(e) = value_damage {
        if !salvage {
            return Err(e);
        }
        diags.push(super::index::salvaged(e, &m.base));
    }
    check_index(&m, v, &mf.label, mf.size, &mut diags, salvage)?;
    Ok(diags)
}

/// A value stored in a way its descriptor's type cannot be. A 32-bit
/// integer in a value block is damage (libpcp's pmExtractValue refuses it;
/// pmlogcheck: "Impossible value or scale conversion", exit 1): `(true, _)`.
/// A 64-bit value or a double in place is a warning, as pmlogcheck's
/// "encoding botch" is: `(false, _)`.
fn stored_type_mismatch(
    r: &super::data::RawResult<'_>,
    types: &std::collections::HashMap<u32, i32>,
) -> Option<(bool, String)> {
    for vs in r.vsets.iter().filter(|vs| vs.numval > 0) {
        let Some(&ty) = types.get(&vs.pmid) else {
            continue;
        };
        let insitu = vs.valfmt == 0;
        let bad = match ty {
            0 | 1 => !insitu,
            2 | 3 | 5 => insitu,
            _ => false,
        };
        if bad {
            return Some((
                ty <= 1,
                format!(
                    "{}: {} value stored {} (descriptor type {ty})",
                    pmid_str(vs.pmid),
                    if ty <= 1 { "32-bit" } else { "64-bit" },
                    if insitu {
                        "in place"
                    } else {
                        "in a value block"
                    },
                ),
            ));
        }
    }
    None
}

fn check_index(
    m: &Members,
    v: Version,
    label: &LogLabel,
    meta_size: u64,
    diags: &mut Vec<Diagnostic>,
    salvage: bool,
) -> Result<()> {
    let Some(p) = &m.index else {
        diags.push(Diagnostic::warning(
            Position::new(&m.base),
            "no temporal index (.index)",
        ));
        return Ok(());
    };
    let mut rr = RecordReader::open(p)?;
    let l = match rr.label() {
        Ok(l) => l,
        Err(e) if salvage => {
            diags.push(Diagnostic::salvaged(
                Position::at(p, 0, Some(0)),
                e.to_string(),
            ));
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    if l.version != v {
        return Err(Error::format(
            Position::at(p, 0, Some(0)),
            "index label version differs from .meta",
        ));
    }
    if l.vol != -2 || l.hostname != label.hostname || l.pid != label.pid || l.start != label.start {
        diags.push(Diagnostic::warning(
            Position::at(p, 0, Some(0)),
            "index label differs from the .meta label",
        ));
    }
    let b = rr.rest(1 << 34)?;
    let es = if v == Version::V2 { 20 } else { 32 };
    let base = v.label_len() as u64;
    // Damage of the index itself (an entry cut short, offsets no record can
    // have) is an error like damage elsewhere; the rest are warnings.
    let mut damage: Option<Error> = None;
    if b.len() % es != 0 {
        damage = Some(Error::format(
            Position::at(
                p,
                base + (b.len() / es * es) as u64,
                Some((b.len() / es) as u64 + 1),
            ),
            format!("index entry cut short: {} of {es} bytes", b.len() % es),
        ));
    }
    let ts = v.ts_len();
    let mut prev: Option<(Stamp, i32, u64, u64)> = None;
    for (i, e) in b.chunks_exact(es).enumerate() {
        let pos = Position::at(p, base + (i * es) as u64, Some(i as u64 + 1));
        let t = get_stamp(v, e, 0).unwrap_or_default();
        let vol = bei32(e, ts).unwrap_or(0);
        let (mo, d) = if v == Version::V2 {
            (
                be32(e, ts + 4).unwrap_or(0) as i32 as i64 as u64,
                be32(e, ts + 8).unwrap_or(0) as i32 as i64 as u64,
            )
        } else {
            (be64(e, ts + 4).unwrap_or(0), be64(e, ts + 12).unwrap_or(0))
        };
        let mut bad = |m: &str| diags.push(Diagnostic::warning(pos.clone(), m.to_string()));
        if t.sec < 0 || !(0..1_000_000_000).contains(&t.nsec) {
            bad("index entry has an illegal timestamp");
        }
        if vol < 0 {
            bad("index entry has a negative volume");
        } else if !m.volumes.iter().any(|(n, _)| *n as i32 == vol) {
            bad("index entry names a missing volume");
        } else if let Some(sz) = m
            .volumes
            .iter()
            .find(|(n, _)| *n as i32 == vol)
            .and_then(|(_, p)| archive::plain_size(p))
        {
            if d > sz && damage.is_none() {
                damage = Some(Error::format(
                    pos.clone(),
                    format!("index entry points past the end of volume {vol} ({d} > {sz})"),
                ));
            }
        }
        if ((mo as i64) < base as i64 || (d as i64) < base as i64) && damage.is_none() {
            damage = Some(Error::format(
                pos.clone(),
                format!("index entry points inside the label (meta {mo}, log {d})"),
            ));
        }
        if mo > meta_size && damage.is_none() {
            damage = Some(Error::format(
                pos.clone(),
                format!("index entry points past the end of the .meta ({mo} > {meta_size})"),
            ));
        }
        if let Some((pt, pv, pm, pd)) = prev {
            if t < pt {
                bad("index timestamp went backwards");
            }
            if vol < pv {
                bad("index volume number decreased");
            }
            if vol == pv && (mo < pm || d < pd) {
                bad("index offsets decreased");
            }
        }
        prev = Some((t, vol, mo, d));
    }
    if let Some(e) = damage {
        if !salvage {
            return Err(e);
        }
        diags.push(super::index::salvaged(e, p));
    }
    Ok(())
}
