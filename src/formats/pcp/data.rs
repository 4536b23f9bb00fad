//! Data-volume result records and value decoding (spec section 5).

use super::layout::*;
use crate::model::{EventParam, EventRecord, Timestamp, Value};

/// A value as stored.
#[derive(Debug, Clone, Copy)]
pub enum RawVal<'a> {
    Insitu(u32),
    /// Block type byte and payload (vlen - 4 bytes).
    Block(u8, &'a [u8]),
}

#[derive(Debug, Clone)]
pub struct RawVset<'a> {
    pub pmid: u32,
    pub numval: i32,
    pub valfmt: i32,
    pub vals: Vec<(i32, RawVal<'a>)>,
}

#[derive(Debug, Clone)]
pub struct RawResult<'a> {
    pub stamp: Stamp,
    pub vsets: Vec<RawVset<'a>>,
}

/// One value set of a result; its values sit in a shared list so that a
/// listing can reuse two scratch vectors instead of allocating per set.
#[derive(Debug, Clone, Copy)]
pub struct FlatVset {
    pub pmid: u32,
    pub numval: i32,
    pub valfmt: i32,
    /// Index of the set's first value in the shared list.
    pub first: usize,
}

/// A stored value as offsets into the record (no borrow, so scratch lists
/// outlive the record buffer).
#[derive(Debug, Clone, Copy)]
pub enum FlatVal {
    Insitu(u32),
    /// Block type byte and payload range within the record.
    Block(u8, u32, u32),
}

impl FlatVal {
    pub fn raw<'a>(&self, rec: &'a [u8]) -> RawVal<'a> {
        match *self {
            FlatVal::Insitu(w) => RawVal::Insitu(w),
            FlatVal::Block(t, a, b) => RawVal::Block(t, &rec[a as usize..b as usize]),
        }
    }
}

/// Parse a whole result record (len words included). Errors are messages;
/// the caller positions them.
pub fn parse_result(v: Version, rec: &[u8]) -> Result<RawResult<'_>, String> {
    let (mut sets, mut vals) = (Vec::new(), Vec::new());
    let stamp = parse_result_flat(v, rec, &mut sets, &mut vals)?;
    let vsets = sets
        .iter()
        .map(|s| RawVset {
            pmid: s.pmid,
            numval: s.numval,
            valfmt: s.valfmt,
            vals: vals[s.first..s.first + s.numval.max(0) as usize]
                .iter()
                .map(|(i, x)| (*i, x.raw(rec)))
                .collect(),
        })
        .collect();
    Ok(RawResult { stamp, vsets })
}

/// [`parse_result`] into caller-owned lists (cleared first); returns the
/// record's timestamp.
pub fn parse_result_flat(
    v: Version,
    rec: &[u8],
    vsets: &mut Vec<FlatVset>,
    vals: &mut Vec<(i32, FlatVal)>,
) -> Result<Stamp, String> {
    vsets.clear();
    vals.clear();
    let end = rec.len().saturating_sub(4);
    let ts = v.ts_len();
    let stamp = get_stamp(v, rec, 4)
        .filter(|_| 4 + ts <= end)
        .ok_or("result record too short for its timestamp")?;
    let mut o = 4 + ts;
    let g = |o: usize| {
        be32(rec, o)
            .filter(|_| o + 4 <= end)
            .ok_or_else(|| format!("result record truncated at body offset {o}"))
    };
    let numpmid = g(o)? as i32;
    o += 4;
    if numpmid < 0 {
        return Err(format!("negative metric count {numpmid}"));
    }
    // Each value set takes at least 8 bytes: cap the allocation by the record.
    vsets.reserve((numpmid as usize).min(end / 8));
    for _ in 0..numpmid {
        let pmid = g(o)?;
        let numval = g(o + 4)? as i32;
        o += 8;
        let mut vs = FlatVset {
            pmid,
            numval,
            valfmt: 0,
            first: vals.len(),
        };
        if numval > 0 {
            let valfmt = g(o)? as i32;
            o += 4;
            if !(0..=2).contains(&valfmt) {
                return Err(format!(
                    "metric {}: bad value format {valfmt}",
                    pmid_str(pmid)
                ));
            }
            vs.valfmt = valfmt;
            if (numval as usize).saturating_mul(8) > end.saturating_sub(o) {
                return Err(format!(
                    "metric {}: {numval} values do not fit in the record",
                    pmid_str(pmid)
                ));
            }
            vals.reserve(numval as usize);
            // The pairs were checked to fit above: read them directly.
            let pairs = &rec[o..o + 8 * numval as usize];
            o += pairs.len();
            for pair in pairs.chunks_exact(8) {
                let inst = i32::from_be_bytes([pair[0], pair[1], pair[2], pair[3]]);
                let w = u32::from_be_bytes([pair[4], pair[5], pair[6], pair[7]]);
                if valfmt == VALFMT_INSITU {
                    vals.push((inst, FlatVal::Insitu(w)));
                } else {
                    // DPTR word offset is counted from a virtual 12-byte PDU
                    // header that precedes the len word.
                    let at = (w as usize).checked_mul(4).and_then(|x| x.checked_sub(8));
                    let at = at.filter(|&a| a >= 4 && a + 4 <= end).ok_or_else(|| {
                        format!(
                            "metric {}: value offset {w} outside the record",
                            pmid_str(pmid)
                        )
                    })?;
                    let hw = be32(rec, at).unwrap_or(0);
                    let vt = (hw >> 24) as u8;
                    let vlen = (hw & 0x00ff_ffff) as usize;
                    if vlen < 4 || at + vlen > end {
                        return Err(format!(
                            "metric {}: value block length {vlen} outside the record",
                            pmid_str(pmid)
                        ));
                    }
                    vals.push((
                        inst,
                        FlatVal::Block(vt, (at + 4) as u32, (at + vlen) as u32),
                    ));
                }
            }
        }
        vsets.push(vs);
    }
    Ok(stamp)
}

fn f32_of(b: &[u8]) -> Option<f32> {
    b.get(..4)
        .map(|s| f32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

fn u64_of(b: &[u8]) -> Option<u64> {
    be64(b, 0)
}

/// Decode a stored value by the descriptor's type (None when the metric has
/// no descriptor: then the block's own type byte decides).
pub fn decode(dtype: Option<i32>, raw: RawVal<'_>) -> Value {
    decode_reusing(dtype, raw, &mut Vec::new())
}

/// [`decode`], a string value in one of `spare`'s buffers when it has one
/// (a reader refilling recycled samples allocates no string per value).
pub fn decode_reusing(dtype: Option<i32>, raw: RawVal<'_>, spare: &mut Vec<String>) -> Value {
    match raw {
        RawVal::Insitu(w) => insitu_value(dtype, w),
        RawVal::Block(vt, p) => decode_typed_reusing(block_type(dtype, vt), p, spare),
    }
}

/// A block's PM_TYPE: the descriptor's, else the block's own type byte.
fn block_type(dtype: Option<i32>, vt: u8) -> i32 {
    match dtype {
        Some(t) if t >= 0 => t,
        _ => vt as i32,
    }
}

/// A value stored in place, by the descriptor's type.
#[inline]
fn insitu_value(dtype: Option<i32>, w: u32) -> Value {
    match dtype {
        Some(1) => Value::U64(w as u64),
        // Old archives store FLOAT in place as the IEEE bit pattern.
        Some(4) => Value::F32(f32::from_bits(w)),
        _ => Value::I64(w as i32 as i64),
    }
}

/// A numeric block (PM_TYPE 0–5) long enough for its type; None otherwise.
#[inline]
fn number_of(t: i32, p: &[u8]) -> Option<Value> {
    match t {
        0 => bei32(p, 0).map(|v| Value::I64(v as i64)),
        1 => be32(p, 0).map(|v| Value::U64(v as u64)),
        2 => u64_of(p).map(|v| Value::I64(v as i64)),
        3 => u64_of(p).map(Value::U64),
        4 => f32_of(p).map(Value::F32),
        5 => u64_of(p).map(|v| Value::F64(f64::from_bits(v))),
        _ => None,
    }
}

/// A STRING block's text, if UTF-8. Strings normally end in a NUL, but not
/// always (value-test).
fn string_of(p: &[u8]) -> Option<&str> {
    crate::model::utf8(p.strip_suffix(&[0]).unwrap_or(p))
}

/// [`decode_reusing`] into `slot`, which holds a value of an earlier
/// result: a number of the kind the slot holds is stored in it, a string
/// goes into the slot's own buffer; a buffer the slot no longer needs goes
/// to `spare`. (Most values keep their kind from result to result: a
/// value then costs a store, not a drop.)
#[inline]
pub fn decode_into(dtype: Option<i32>, raw: RawVal<'_>, slot: &mut Value, spare: &mut Vec<String>) {
    let (t, p) = match raw {
        RawVal::Insitu(w) => return set_value(slot, insitu_value(dtype, w), spare),
        RawVal::Block(vt, p) => (block_type(dtype, vt), p),
    };
    if let (6, Value::Str(buf)) = (t, &mut *slot) {
        if let Some(s) = string_of(p) {
            buf.clear();
            buf.push_str(s);
            return;
        }
    }
    match number_of(t, p) {
        Some(v) => set_value(slot, v, spare),
        None => replace_value(slot, decode_typed_reusing(t, p, spare), spare),
    }
}

/// `v` into `slot`: a number in place when the slot holds one of its kind.
#[inline]
fn set_value(slot: &mut Value, v: Value, spare: &mut Vec<String>) {
    match (&mut *slot, v) {
        (Value::I64(y), Value::I64(x)) => *y = x,
        (Value::U64(y), Value::U64(x)) => *y = x,
        (Value::F32(y), Value::F32(x)) => *y = x,
        (Value::F64(y), Value::F64(x)) => *y = x,
        (_, v) => replace_value(slot, v, spare),
    }
}

#[cold]
fn replace_value(slot: &mut Value, v: Value, spare: &mut Vec<String>) {
    if let Value::Str(old) = std::mem::replace(slot, v) {
        // As many as the strings that became numbers: bounded by the list.
        spare.push(old);
    }
}

/// Decode a payload of PM_TYPE `t`.
pub fn decode_typed(t: i32, p: &[u8]) -> Value {
    decode_typed_reusing(t, p, &mut Vec::new())
}

/// [`decode_typed`], a string in one of `spare`'s buffers if it has one.
fn decode_typed_reusing(t: i32, p: &[u8], spare: &mut Vec<String>) -> Value {
    match t {
        0..=5 => number_of(t, p).unwrap_or_else(|| Value::Bytes(p.to_vec())),
        6 => match string_of(p) {
            Some(s) => {
                let mut buf = spare.pop().unwrap_or_default();
                buf.clear();
                buf.push_str(s);
                Value::Str(buf)
            }
            None => Value::Bytes(p.strip_suffix(&[0]).unwrap_or(p).to_vec()),
        },
        9 => decode_events(p, false)
            .map(Value::Events)
            .unwrap_or_else(|| Value::Bytes(p.to_vec())),
        10 => decode_events(p, true)
            .map(Value::Events)
            .unwrap_or_else(|| Value::Bytes(p.to_vec())),
        _ => Value::Bytes(p.to_vec()),
    }
}

/// PM_ID_NULL parameter carrying the missed-record count of a MISSED record.
pub const MISSED_PMID: u32 = PM_ID_NULL;

/// Decode an event array payload (after the block header word).
pub fn decode_events(p: &[u8], highres: bool) -> Option<Vec<EventRecord>> {
    decode_events_typed(p, highres, &mut Vec::new())
}

/// As [`decode_events`], also collecting each parameter's stored type.
pub fn decode_events_typed(
    p: &[u8],
    highres: bool,
    ptypes: &mut Vec<(u32, i32)>,
) -> Option<Vec<EventRecord>> {
    let n = bei32(p, 0)?;
    if n < 0 {
        return None;
    }
    let mut o = 4;
    let mut out = Vec::with_capacity((n as usize).min(p.len() / 16));
    for _ in 0..n {
        let time = if highres {
            let s = be64(p, o)? as i64;
            let ns = be64(p, o + 8)? as i64;
            o += 16;
            Timestamp(s.saturating_mul(1_000_000_000).saturating_add(ns))
        } else {
            let s = bei32(p, o)? as i64;
            let us = bei32(p, o + 4)? as i64;
            o += 8;
            Timestamp(s.saturating_mul(1_000_000_000).saturating_add(us * 1000))
        };
        let flags = be32(p, o)?;
        let np = bei32(p, o + 4)?;
        o += 8;
        let mut params = Vec::new();
        if flags & EVENT_FLAG_MISSED != 0 {
            params.push(EventParam {
                metric: MISSED_PMID,
                value: Value::I64(np as i64),
            });
        } else {
            if np < 0 {
                return None;
            }
            for _ in 0..np {
                let pmid = be32(p, o)?;
                let w = be32(p, o + 4)?;
                let t = (w >> 24) as i32;
                let len = (w & 0x00ff_ffff) as usize;
                if len < 4 {
                    return None;
                }
                let pay = p.get(o + 8..o + 4 + len)?;
                params.push(EventParam {
                    metric: pmid,
                    value: decode_typed(t, pay),
                });
                ptypes.push((pmid, t));
                o += 4 + len.div_ceil(4) * 4;
            }
        }
        out.push(EventRecord {
            time,
            flags,
            params,
        });
    }
    Some(out)
}
