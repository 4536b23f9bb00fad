//! `.meta` records: descriptors, instance domains, label sets, help text.

use super::layout::*;
use crate::error::{Diagnostic, Error, Position, Result};
use std::path::Path;

#[derive(Debug, Clone, PartialEq)]
pub struct Desc {
    pub pmid: u32,
    pub vtype: i32,
    pub indom: u32,
    pub sem: u32,
    pub units: u32,
    pub names: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct InDomRec {
    /// TYPE_INDOM_V2, TYPE_INDOM or TYPE_INDOM_DELTA.
    pub rtype: i32,
    pub stamp: Stamp,
    pub indom: u32,
    /// Per entry its instance and its name's range in `names`; None =
    /// deleted (delta only).
    insts: Vec<(i32, Option<(u32, u32)>)>,
    /// Every name of the record one after another (lossy UTF-8): two
    /// allocations per record instead of one per instance (an archive's
    /// `.meta` can hold hundreds of thousands of names).
    names: String,
    /// Raw bytes of every name, in entry order, when some name is not UTF-8.
    pub raw_names: Option<Vec<Vec<u8>>>,
}

impl InDomRec {
    /// Number of entries (instances, and deletions in a delta record).
    pub fn len(&self) -> usize {
        self.insts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.insts.is_empty()
    }

    /// (instance, name) in record order; name None = deleted (delta only).
    pub fn entries(&self) -> impl ExactSizeIterator<Item = (i32, Option<&str>)> + Clone + '_ {
        self.insts.iter().map(|&(id, r)| {
            (
                id,
                r.map(|(a, b)| self.names.get(a as usize..b as usize).unwrap_or("")),
            )
        })
    }

    /// Append a name to the arena: its range, None if the arena would pass
    /// 4 GiB (not reachable from a record, whose length is an i32).
    fn push_name(&mut self, n: &str) -> Option<(u32, u32)> {
        let a = u32::try_from(self.names.len()).ok()?;
        let b = u32::try_from(self.names.len() + n.len()).ok()?;
        self.names.push_str(n);
        Some((a, b))
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct RawLabel {
    pub name_off: u16,
    pub name_len: u8,
    pub flags: u8,
    pub value_off: u16,
    pub value_len: u16,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct RawLabelSet {
    pub inst: u32,
    pub json: Vec<u8>,
    pub nlabels: i32,
    pub labels: Vec<RawLabel>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct LabelRec {
    pub rtype: i32,
    pub stamp: Stamp,
    pub ltype: i32,
    pub ident: u32,
    pub sets: Vec<RawLabelSet>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct TextRec {
    pub ttype: i32,
    pub ident: u32,
    pub text: String,
    /// The stored bytes, when they are not UTF-8 (`text` is then lossy).
    pub raw: Option<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum MetaRec {
    Desc(Desc),
    InDom(InDomRec),
    Label(LabelRec),
    Text(TextRec),
}

impl MetaRec {
    pub fn stamp(&self) -> Option<Stamp> {
        match self {
            MetaRec::InDom(i) => Some(i.stamp),
            MetaRec::Label(l) => Some(l.stamp),
            _ => None,
        }
    }
}

/// Where a `.meta` record is: its file, byte offset and record number
/// (for the errors and warnings about it).
#[derive(Debug, Clone, Copy)]
pub struct RecAt<'a> {
    pub path: &'a Path,
    pub off: u64,
    pub recno: u64,
}

impl RecAt<'_> {
    pub fn position(&self) -> Position {
        Position::at(self.path, self.off, Some(self.recno))
    }
}

/// Parse one `.meta` record (whole record with len words). `v` is the
/// archive version; records of the other version are decoded by their own
/// type (a warning is added to `diags`).
pub fn parse(v: Version, rec: &[u8], at: RecAt, diags: &mut Vec<Diagnostic>) -> Result<MetaRec> {
    let mut s = Scratch::default();
    Ok(match parse_into(v, rec, at, diags, &mut s)? {
        Parsed::Desc(d) => MetaRec::Desc(d),
        Parsed::InDom => MetaRec::InDom(s.indom),
        Parsed::Label => MetaRec::Label(s.label),
        Parsed::Text => MetaRec::Text(s.text),
    })
}

/// Buffers records are parsed into by [`parse_into`], kept from one
/// record to the next: a reader that goes through `.meta` record by
/// record allocates nothing per record but descriptor names.
#[derive(Debug, Default)]
pub struct Scratch {
    pub indom: InDomRec,
    pub label: LabelRec,
    pub text: TextRec,
    /// Label sets a smaller record left over, kept for a larger one.
    spare_sets: Vec<RawLabelSet>,
}

/// What [`parse_into`] parsed: a descriptor, or which buffer of the
/// [`Scratch`] holds the record.
#[derive(Debug)]
pub enum Parsed {
    Desc(Desc),
    InDom,
    Label,
    Text,
}

/// [`parse`] into the buffers of `s` (what they held before is replaced).
pub fn parse_into(
    v: Version,
    rec: &[u8],
    at: RecAt,
    diags: &mut Vec<Diagnostic>,
    s: &mut Scratch,
) -> Result<Parsed> {
    let pos = || at.position();
    let bad = |m: &str| Error::format(pos(), m.to_string());
    let len = rec.len();
    let body_end = len - 4;
    let rtype = bei32(rec, 4).ok_or_else(|| bad("meta record too short"))?;
    let trunc = || bad("meta record shorter than its contents");
    // Time-stamped records come in a v2 and a v3 type: the record's own type
    // decides its layout. Gives its time and the body offset after it.
    let timed = |v2_type: i32, kind: &str, diags: &mut Vec<Diagnostic>| {
        let rv = if rtype == v2_type {
            Version::V2
        } else {
            Version::V3
        };
        if rv != v {
            diags.push(Diagnostic::warning(
                pos(),
                format!(
                    "{kind} record type {rtype} does not belong in a v{} archive",
                    v.number()
                ),
            ));
        }
        let ts = rv.ts_len();
        let stamp = get_stamp(rv, rec, 8)
            .filter(|_| 8 + ts <= body_end)
            .ok_or_else(trunc)?;
        Ok::<_, Error>((stamp, 8 + ts))
    };
    match rtype {
        TYPE_DESC => {
            let g = |o: usize| be32(rec, o).filter(|_| o + 4 <= body_end).ok_or_else(trunc);
            let pmid = g(8)?;
            let vtype = g(12)? as i32;
            let indom = g(16)?;
            let sem = g(20)?;
            let units = g(24)?;
            let mut names = Vec::new();
            if 28 < body_end {
                let n = g(28)? as i32;
                if n < 0 {
                    return Err(bad("descriptor with a negative name count"));
                }
                let mut o = 32;
                for _ in 0..n {
                    let l = g(o)? as usize;
                    o += 4;
                    let s = rec.get(o..o + l).filter(|_| o + l <= body_end);
                    let s = s.ok_or_else(trunc)?;
                    // libpcp treats names as C strings: stop at a NUL.
                    let e = s.iter().position(|&c| c == 0).unwrap_or(s.len());
                    names.push(String::from_utf8_lossy(&s[..e]).into_owned());
                    o += l;
                }
            }
            Ok(Parsed::Desc(Desc {
                pmid,
                vtype,
                indom,
                sem,
                units,
                names,
            }))
        }
        TYPE_INDOM_V2 | TYPE_INDOM | TYPE_INDOM_DELTA => {
            let (stamp, o) = timed(TYPE_INDOM_V2, "instance domain", diags)?;
            let indom = be32(rec, o).ok_or_else(trunc)?;
            let n = bei32(rec, o + 4).ok_or_else(trunc)?;
            if n < 0 {
                return Err(bad("instance domain with a negative instance count"));
            }
            let n = n as usize;
            let insts_at = o + 8;
            let str_at = insts_at
                .checked_add(n.checked_mul(8).ok_or_else(trunc)?)
                .ok_or_else(trunc)?;
            if str_at > body_end {
                return Err(trunc());
            }
            let strtab = &rec[str_at..body_end];
            let out = &mut s.indom;
            out.rtype = rtype;
            out.stamp = stamp;
            out.indom = indom;
            out.insts.clear();
            out.insts.reserve(n);
            // Names never take more than the string table (but for bytes a
            // lossy decode widens).
            out.names.clear();
            out.names.reserve(strtab.len());
            out.raw_names = None;
            let mut non_utf8 = false;
            for i in 0..n {
                let inst = bei32(rec, insts_at + 4 * i).ok_or_else(trunc)?;
                let sidx = bei32(rec, insts_at + 4 * n + 4 * i).ok_or_else(trunc)?;
                if inst < 0 {
                    return Err(bad(&format!(
                        "instance domain {}: negative instance id {inst}",
                        indom_str(indom)
                    )));
                }
                if sidx == -1 {
                    if rtype != TYPE_INDOM_DELTA {
                        return Err(bad(&format!(
                            "instance domain {}: string offset -1 in a full record",
                            indom_str(indom)
                        )));
                    }
                    out.insts.push((inst, None));
                    continue;
                }
                if sidx < 0 || sidx as usize >= strtab.len() {
                    return Err(bad(&format!(
                        "instance domain {}: string offset {sidx} outside the record",
                        indom_str(indom)
                    )));
                }
                let name = cstr(&strtab[sidx as usize..]);
                let range = match crate::model::utf8(name) {
                    Some(n) => out.push_name(n),
                    None => {
                        non_utf8 = true;
                        out.push_name(&String::from_utf8_lossy(name))
                    }
                };
                let range = range.ok_or_else(|| bad("instance names too long"))?;
                out.insts.push((inst, Some(range)));
            }
            // The raw bytes are kept only when some name needs them.
            if non_utf8 {
                let raw = (0..n)
                    .filter_map(|i| {
                        let sidx = bei32(rec, insts_at + 4 * n + 4 * i)?;
                        let at = usize::try_from(sidx).ok()?;
                        Some(cstr(&strtab[at..]).to_vec())
                    })
                    .collect();
                out.raw_names = Some(raw);
            }
            Ok(Parsed::InDom)
        }
        TYPE_LABEL_V2 | TYPE_LABEL => {
            let (stamp, mut o) = timed(TYPE_LABEL_V2, "label", diags)?;
            let g = |o: usize| be32(rec, o).filter(|_| o + 4 <= body_end).ok_or_else(trunc);
            let ltype = g(o)? as i32;
            let ident = g(o + 4)?;
            let nsets = g(o + 8)? as i32;
            o += 12;
            if nsets < 0 {
                return Err(bad("label record with a negative set count"));
            }
            let l = &mut s.label;
            l.rtype = rtype;
            l.stamp = stamp;
            l.ltype = ltype;
            l.ident = ident;
            // Sets (and their buffers) are reused in place, extras dropped.
            let mut k = 0;
            for _ in 0..nsets {
                let inst = g(o)?;
                let jl = g(o + 4)? as i32;
                o += 8;
                if jl < 0 || o + jl as usize > body_end {
                    return Err(bad(&format!("corrupted JSON length {jl} in label set")));
                }
                if k == l.sets.len() {
                    l.sets.push(s.spare_sets.pop().unwrap_or_default());
                }
                let set = &mut l.sets[k];
                k += 1;
                set.inst = inst;
                set.json.clear();
                set.json.extend_from_slice(&rec[o..o + jl as usize]);
                o += jl as usize;
                let nl = g(o)? as i32;
                o += 4;
                set.nlabels = nl;
                let labels = &mut set.labels;
                labels.clear();
                for _ in 0..nl.max(0) {
                    if o + 8 > body_end {
                        return Err(trunc());
                    }
                    labels.push(RawLabel {
                        name_off: u16::from_be_bytes([rec[o], rec[o + 1]]),
                        name_len: rec[o + 2],
                        flags: rec[o + 3],
                        value_off: u16::from_be_bytes([rec[o + 4], rec[o + 5]]),
                        value_len: u16::from_be_bytes([rec[o + 6], rec[o + 7]]),
                    });
                    o += 8;
                }
            }
            s.spare_sets.extend(l.sets.drain(k..));
            Ok(Parsed::Label)
        }
        TYPE_TEXT => {
            let ttype = bei32(rec, 8).filter(|_| 12 <= body_end).ok_or_else(trunc)?;
            let ident = be32(rec, 12).filter(|_| 16 <= body_end).ok_or_else(trunc)?;
            let t = &rec[16..body_end];
            let e = t.iter().position(|&c| c == 0).unwrap_or(t.len());
            let out = &mut s.text;
            out.ttype = ttype;
            out.ident = ident;
            out.text.clear();
            out.text.push_str(&String::from_utf8_lossy(&t[..e]));
            out.raw = std::str::from_utf8(&t[..e])
                .is_err()
                .then(|| t[..e].to_vec());
            Ok(Parsed::Text)
        }
        t => Err(bad(&format!("unknown metadata record type {t}"))),
    }
}

/// `s` up to its first NUL (libpcp reads names as C strings).
fn cstr(s: &[u8]) -> &[u8] {
    &s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())]
}
