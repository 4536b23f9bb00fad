//! Verbose arguments ↔ typed model fields (spec kpi-dlt.md §4.5).
//!
//! Reading, each argument becomes a field, in either byte order: BOOL →
//! `Enum{1, false/true}`, SINT/UINT of 8–64 bits → `Int`/`Uint(1|2|4|8)`
//! (FIXP: the raw integer), FLOA 16/32 → `Float(4)`, 64/128 → `Float(8)`,
//! STRG and TRAI → `String`, RAWD → `Bytes`, 128-bit integers (no model
//! integer) → 16 bytes as stored, ARAY → nested `Array`s, STRU → `Struct`.
//! The argument name is the VARI name when there is one, else `argN`; the
//! type-info words and units stay in the event type's extras so that a DLT
//! writer gives the same arguments back.
//!
//! Writing, a field gets the closest DLT type (or its original type info
//! when the event type came from a DLT file); see [`put`].

use super::layout::*;
use crate::model::{FieldType, Value};

/// One decoded argument.
#[derive(Debug, Clone, PartialEq)]
pub struct Arg<'a> {
    /// Type info as stored (payload byte order already applied).
    pub ti: u32,
    pub name: Option<&'a [u8]>,
    pub unit: Option<&'a [u8]>,
    pub ty: FieldType,
    pub value: Value,
}

/// `[…]` up to the first NUL: what a DLT reader shows of a name or string.
pub fn cut_nul(b: &[u8]) -> &[u8] {
    &b[..first_nul(b)]
}

/// `Enum{1, false/true}`: how a DLT BOOL is typed in the model.
pub fn bool_type() -> FieldType {
    FieldType::Enum {
        size: 1,
        labels: vec![(0, "false".into()), (1, "true".into())],
    }
}

fn is_bool_type(t: &FieldType) -> bool {
    matches!(t, FieldType::Enum { labels, .. }
        if labels.len() == 2
            && labels.iter().any(|(v, l)| *v == 0 && l.eq_ignore_ascii_case("false"))
            && labels.iter().any(|(v, l)| *v == 1 && l.eq_ignore_ascii_case("true")))
}

fn byte_array(n: u32) -> FieldType {
    FieldType::Array {
        len: n,
        elem: Box::new(FieldType::Uint(1)),
    }
}

fn byte_list(b: &[u8]) -> Value {
    Value::List(b.iter().map(|&x| Value::U64(x as u64)).collect())
}

fn tyle_bytes(tyle: u32) -> Option<usize> {
    match tyle {
        1 => Some(1),
        2 => Some(2),
        3 => Some(4),
        4 => Some(8),
        5 => Some(16),
        _ => None,
    }
}

/// Array and struct type-info bits (§4.5), read only: the writer puts
/// arrays and structs as their text.
pub const TI_ARAY: u32 = 0x0000_0100;
pub const TI_STRU: u32 = 0x0000_4000;

/// Structs inside structs deeper than this are refused (a bound on the
/// recursion a payload can ask for).
const MAX_DEPTH: u8 = 8;

/// Why an argument could not be read.
enum Fail {
    /// The payload ended first.
    Short,
    /// The argument cannot be typed.
    Bad(String),
}

type Parts<'a> = (Option<&'a [u8]>, Option<&'a [u8]>, FieldType, Value);

/// Decode the verbose arguments of `m` into `out`. `Ok(true)`: every
/// argument `noar` announces; `Ok(false)`: the payload ended before them
/// (loggers that count one argument too many), `out` holds the whole
/// arguments before that point, which is what dlt-convert lists. `Err`
/// says why an argument cannot be typed (a type-info word with no type).
pub fn decode<'a>(m: &Msg<'a>, out: &mut Vec<Arg<'a>>) -> Result<bool, String> {
    out.clear();
    let noar = m.ext.map_or(0, |e| e.noar);
    let mut c = Cursor::new(m.payload, m.msbf());
    for i in 0..noar {
        let Some(ti) = c.u32() else { return Ok(false) };
        match argument(&mut c, ti, 0) {
            Ok((name, unit, ty, value)) => out.push(Arg {
                ti,
                name,
                unit,
                ty,
                value,
            }),
            Err(Fail::Short) => return Ok(false),
            Err(Fail::Bad(why)) => return Err(format!("argument {i}: {why}")),
        }
    }
    Ok(true)
}

fn name_only<'a>(c: &mut Cursor<'a>) -> Result<&'a [u8], Fail> {
    let n = c.u16().ok_or(Fail::Short)?;
    c.bytes(n as usize).map(cut_nul).ok_or(Fail::Short)
}

fn name_unit<'a>(c: &mut Cursor<'a>) -> Result<(&'a [u8], &'a [u8]), Fail> {
    let nl = c.u16().ok_or(Fail::Short)?;
    let ul = c.u16().ok_or(Fail::Short)?;
    let name = c.bytes(nl as usize).ok_or(Fail::Short)?;
    let unit = c.bytes(ul as usize).ok_or(Fail::Short)?;
    Ok((cut_nul(name), cut_nul(unit)))
}

/// One argument after its type info.
fn argument<'a>(c: &mut Cursor<'a>, ti: u32, depth: u8) -> Result<Parts<'a>, Fail> {
    let vari = ti & TI_VARI != 0;
    let short = || Fail::Short;
    if ti & TI_STRU != 0 {
        return structure(c, ti, depth);
    }
    if ti & TI_ARAY != 0 {
        return array(c, ti);
    }
    if ti & TI_STRG != 0 {
        // ASCII and UTF-8 alike (a non-UTF-8 string becomes bytes).
        let len = c.u16().ok_or_else(short)?;
        let name = if vari { Some(name_only(c)?) } else { None };
        let s = c.bytes(len as usize).ok_or_else(short)?;
        return Ok((
            name,
            None,
            FieldType::String,
            crate::model::text_value(cut_nul(s)),
        ));
    }
    if ti & TI_BOOL != 0 {
        let name = if vari { Some(name_only(c)?) } else { None };
        let v = c.u8().ok_or_else(short)?;
        return Ok((name, None, bool_type(), Value::Enum(v as i64)));
    }
    if ti & (TI_SINT | TI_UINT | TI_FLOA) != 0 {
        let (name, unit) = if vari {
            let (n, u) = name_unit(c)?;
            (Some(n), Some(u))
        } else {
            (None, None)
        };
        let n = number_len(ti)?;
        skip_fixed_point(c, ti, n)?;
        let b = c.bytes(n).ok_or_else(short)?;
        let (ty, v) = number(b, ti, c.be);
        return Ok((name, unit, ty, v));
    }
    if ti & TI_RAWD != 0 {
        let len = c.u16().ok_or_else(short)?;
        let name = if vari { Some(name_only(c)?) } else { None };
        let b = c.bytes(len as usize).ok_or_else(short)?;
        return Ok((name, None, FieldType::Bytes, Value::Bytes(b.to_vec())));
    }
    if ti & TI_TRAI != 0 {
        let len = c.u16().ok_or_else(short)?;
        let s = c.bytes(len as usize).ok_or_else(short)?;
        return Ok((
            None,
            None,
            FieldType::String,
            crate::model::text_value(cut_nul(s)),
        ));
    }
    Err(Fail::Bad(format!("type info 0x{ti:08x} names no type")))
}

fn number_len(ti: u32) -> Result<usize, Fail> {
    let tyle = ti & TI_TYLE;
    tyle_bytes(tyle).ok_or_else(|| Fail::Bad(format!("bad length code {tyle}")))
}

/// Skip the quantisation (f32) and offset of a fixed-point integer
/// (§4.5.3), when FIXP is set: the field holds the raw integer, as
/// dlt-convert shows it; the factors stay in the record.
fn skip_fixed_point(c: &mut Cursor, ti: u32, n: usize) -> Result<(), Fail> {
    if ti & TI_FIXP != 0 && ti & TI_FLOA == 0 {
        c.u32().ok_or(Fail::Short)?;
        c.bytes(if n <= 4 { 4 } else { n }).ok_or(Fail::Short)?;
    }
    Ok(())
}

/// A number of `b.len()` bytes (1, 2, 4, 8 or 16) in the payload's order.
fn number(b: &[u8], ti: u32, be: bool) -> (FieldType, Value) {
    let n = b.len();
    if n == 16 {
        if ti & TI_FLOA != 0 {
            let mut a = [0u8; 16];
            a.copy_from_slice(b);
            let bits = if be {
                u128::from_be_bytes(a)
            } else {
                u128::from_le_bytes(a)
            };
            return (FieldType::Float(8), Value::F64(f128_to_f64(bits)));
        }
        // 128-bit integers: no model integer holds them; their bytes as
        // stored.
        return (byte_array(16), byte_list(b));
    }
    let mut a = [0u8; 8];
    if be {
        a[8 - n..].copy_from_slice(b);
        a = u64::from_be_bytes(a).to_le_bytes();
    } else {
        a[..n].copy_from_slice(b);
    }
    let raw = u64::from_le_bytes(a);
    if ti & TI_FLOA != 0 {
        return match n {
            2 => (FieldType::Float(4), Value::F32(f16_to_f32(raw as u16))),
            4 => (FieldType::Float(4), Value::F32(f32::from_bits(raw as u32))),
            8 => (FieldType::Float(8), Value::F64(f64::from_bits(raw))),
            // An 8-bit float is no IEEE type: its byte.
            _ => (byte_array(1), byte_list(b)),
        };
    }
    if ti & TI_SINT != 0 {
        let shift = 64 - 8 * n as u32;
        let v = ((raw << shift) as i64) >> shift;
        (FieldType::Int(n as u8), Value::I64(v))
    } else {
        (FieldType::Uint(n as u8), Value::U64(raw))
    }
}

/// IEEE binary16 → f32 (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        // Subnormal: man × 2^-24.
        (0, m) => return sign_of(h) * m as f32 / 16_777_216.0,
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, m) => sign | 0x7fc0_0000 | (m << 13),
        (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

fn sign_of(h: u16) -> f32 {
    if h & 0x8000 != 0 {
        -1.0
    } else {
        1.0
    }
}

/// IEEE binary128 → f64, the mantissa cut to a double's 52 bits.
pub fn f128_to_f64(bits: u128) -> f64 {
    let neg = bits >> 127 != 0;
    let exp = ((bits >> 112) & 0x7fff) as i32;
    let man = bits & ((1u128 << 112) - 1);
    let v = if exp == 0x7fff {
        if man == 0 {
            f64::INFINITY
        } else {
            f64::NAN
        }
    } else if exp == 0 {
        // Subnormal binary128 values are far below the smallest double.
        0.0
    } else {
        let frac = 1.0 + (man >> 60) as f64 / (1u64 << 52) as f64;
        let e = exp - 16383;
        if e > 1023 {
            f64::INFINITY
        } else if e < -1074 {
            0.0
        } else {
            // Two steps keep 2^e representable on the way.
            frac * 2f64.powi(e / 2) * 2f64.powi(e - e / 2)
        }
    };
    if neg {
        -v
    } else {
        v
    }
}

/// STRU: a count of entries, the VARI name, then each entry as a whole
/// argument (type info first).
fn structure<'a>(c: &mut Cursor<'a>, ti: u32, depth: u8) -> Result<Parts<'a>, Fail> {
    if depth >= MAX_DEPTH {
        return Err(Fail::Bad(format!("structs nested deeper than {MAX_DEPTH}")));
    }
    let n = c.u16().ok_or(Fail::Short)?;
    let name = if ti & TI_VARI != 0 {
        Some(name_only(c)?)
    } else {
        None
    };
    let mut fields: Vec<crate::model::Field> = Vec::new();
    let mut values = Vec::new();
    // Every entry takes at least its type info: the loop is bounded by
    // the payload.
    for j in 0..n {
        let eti = c.u32().ok_or(Fail::Short)?;
        let (ename, _unit, ty, v) = argument(c, eti, depth + 1)?;
        let mut fname = match ename {
            Some(e) if !e.is_empty() => String::from_utf8_lossy(e).into_owned(),
            _ => format!("field{j}"),
        };
        if fields.iter().any(|f| f.name == fname) {
            fname = format!("{fname}_{j}");
        }
        fields.push(crate::model::Field::new(&fname, ty));
        values.push(v);
    }
    Ok((name, None, FieldType::Struct(fields), Value::Struct(values)))
}

/// ARAY: the dimensions (a count, then each one's length), the VARI name
/// and unit, the fixed-point factors, then the elements, all of the base
/// type (BOOL, SINT, UINT or FLOA).
fn array<'a>(c: &mut Cursor<'a>, ti: u32) -> Result<Parts<'a>, Fail> {
    let ndims = c.u16().ok_or(Fail::Short)? as usize;
    let dims_b = c.bytes(2 * ndims).ok_or(Fail::Short)?;
    let dim = |k: usize| {
        let b = [dims_b[2 * k], dims_b[2 * k + 1]];
        (if c.be {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        }) as u64
    };
    let dims: Vec<u64> = (0..ndims).map(dim).collect();
    let (name, unit) = if ti & TI_VARI != 0 {
        let (n, u) = name_unit(c)?;
        (Some(n), Some(u))
    } else {
        (None, None)
    };
    let (n, elem_ty) = if ti & TI_BOOL != 0 {
        (1, bool_type())
    } else if ti & (TI_SINT | TI_UINT | TI_FLOA) != 0 {
        let n = number_len(ti)?;
        (n, number(&[0; 16][..n], ti, false).0)
    } else {
        return Err(Fail::Bad(format!(
            "array of type info 0x{ti:08x}: elements must be bool or numbers"
        )));
    };
    skip_fixed_point(c, ti, n)?;
    // The element count is checked against the payload before anything
    // is allocated for it.
    let count = if ndims == 0 {
        0
    } else {
        dims.iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .ok_or(Fail::Short)?
    };
    if count.saturating_mul(n as u64) > c.left() as u64 {
        return Err(Fail::Short);
    }
    let mut flat = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let b = c.bytes(n).ok_or(Fail::Short)?;
        flat.push(if ti & TI_BOOL != 0 {
            Value::Enum(b[0] as i64)
        } else {
            number(b, ti, c.be).1
        });
    }
    // Nested by dimension, the last varying fastest.
    let mut ty = elem_ty;
    let mut vals = flat;
    for &d in dims.iter().rev() {
        ty = FieldType::Array {
            len: d as u32,
            elem: Box::new(ty),
        };
        if d == 0 {
            vals = Vec::new();
            continue;
        }
        vals = vals
            .chunks(d as usize)
            .map(|ch| Value::List(ch.to_vec()))
            .collect();
    }
    let value = if ndims == 0 {
        Value::List(Vec::new())
    } else {
        vals.pop().unwrap_or(Value::List(Vec::new()))
    };
    if ndims == 0 {
        ty = FieldType::Array {
            len: 0,
            elem: Box::new(ty),
        };
    }
    Ok((name, unit, ty, value))
}

// ------------------------------------------------------------------ writing

/// How one field is written: the type info (VARI and FIXP cleared; VARI
/// is set when `name` is given) and the optional name and unit.
#[derive(Debug, Clone, PartialEq)]
pub struct ArgSpec {
    pub ti: u32,
    pub name: Option<String>,
    pub unit: Option<String>,
}

/// The closest DLT type info for a model field type.
pub fn type_info_for(t: &FieldType) -> u32 {
    let tyle = |n: u8| match n {
        1 => 1,
        2 => 2,
        4 => 3,
        _ => 4,
    };
    match t {
        FieldType::Int(n) => TI_SINT | tyle(*n),
        FieldType::Uint(n) => TI_UINT | tyle(*n),
        FieldType::Float(4) => TI_FLOA | 3,
        FieldType::Float(_) => TI_FLOA | 4,
        FieldType::String => TI_STRG,
        t if is_bool_type(t) => TI_BOOL | 1,
        FieldType::Bytes => TI_RAWD,
        FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. }
            if matches!(**elem, FieldType::Uint(1) | FieldType::Int(1)) =>
        {
            TI_RAWD
        }
        // Enum labels, nested arrays and structs: their text.
        _ => TI_STRG,
    }
}

fn put_u16(o: &mut Vec<u8>, v: usize) {
    o.extend_from_slice(&(v.min(u16::MAX as usize) as u16).to_le_bytes());
}

/// Name (and unit) lengths include the NUL, as libdlt writes them.
fn put_name(o: &mut Vec<u8>, s: &Option<String>) {
    if let Some(n) = s {
        o.extend_from_slice(n.as_bytes());
        o.push(0);
    }
}

fn name_len(s: &Option<String>) -> usize {
    s.as_ref().map_or(0, |n| n.len() + 1)
}

fn bytes_of(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::Bytes(b) => Some(b.clone()),
        Value::Str(s) => Some(s.as_bytes().to_vec()),
        Value::List(xs) => xs
            .iter()
            .map(|x| match x {
                Value::U64(b) => u8::try_from(*b).ok(),
                Value::I64(b) => Some(*b as u8),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// What [`put`] could not write exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Degraded {
    /// The value was written as its text (enum label, array, struct).
    AsText,
    /// A string or raw value was cut to the u16 length DLT allows.
    Cut,
}

/// Append one argument. `label` gives the text of an enum value, when the
/// field is an enum written as a string.
pub fn put(
    o: &mut Vec<u8>,
    spec: &ArgSpec,
    value: &Value,
    label: Option<&str>,
) -> Option<Degraded> {
    let vari = spec.name.is_some();
    let mut ti = spec.ti & !(TI_VARI | TI_FIXP);
    if vari {
        ti |= TI_VARI;
    }
    let mut degraded = None;
    // The value decides when it does not fit the planned type.
    let fits = match value {
        Value::I64(_) | Value::U64(_) | Value::Enum(_) if label.is_some() => ti & TI_STRG != 0,
        Value::I64(_) | Value::U64(_) | Value::Enum(_) => {
            ti & (TI_SINT | TI_UINT | TI_BOOL) != 0 && ti & TI_TYLE != 5
        }
        Value::F32(_) | Value::F64(_) => ti & TI_FLOA != 0 && matches!(ti & TI_TYLE, 3 | 4),
        Value::Str(_) | Value::Bytes(_) => ti & (TI_STRG | TI_RAWD | TI_TRAI) != 0,
        Value::List(_) => {
            ti & (TI_RAWD | TI_SINT | TI_UINT | TI_FLOA) != 0 && bytes_of(value).is_some()
        }
        _ => false,
    };
    if !fits {
        ti = match value {
            Value::I64(_) | Value::Enum(_) => TI_SINT | 4,
            Value::U64(_) => TI_UINT | 4,
            Value::F32(_) => TI_FLOA | 3,
            Value::F64(_) => TI_FLOA | 4,
            Value::Bytes(_) => TI_RAWD,
            _ => TI_STRG,
        } | if vari { TI_VARI } else { 0 };
    }
    let text;
    let value = match (value, label) {
        (Value::Enum(_) | Value::I64(_) | Value::U64(_), Some(l)) if ti & TI_STRG != 0 => {
            text = Value::Str(l.to_string());
            &text
        }
        (Value::List(_) | Value::Struct(_) | Value::Union(_) | Value::Events(_), _)
            if ti & TI_STRG != 0 =>
        {
            degraded = Some(Degraded::AsText);
            text = Value::Str(value.text());
            &text
        }
        _ => value,
    };
    o.extend_from_slice(&ti.to_le_bytes());
    if ti & (TI_STRG | TI_RAWD | TI_TRAI) != 0 {
        let mut b = bytes_of(value).unwrap_or_else(|| value.text().into_bytes());
        let nul = ti & TI_RAWD == 0;
        let max = u16::MAX as usize - nul as usize;
        if b.len() > max {
            b.truncate(max);
            degraded = Some(Degraded::Cut);
        }
        put_u16(o, b.len() + nul as usize);
        if vari && ti & TI_TRAI == 0 {
            put_u16(o, name_len(&spec.name));
            put_name(o, &spec.name);
        }
        o.extend_from_slice(&b);
        if nul {
            o.push(0);
        }
        return degraded;
    }
    if ti & TI_BOOL != 0 {
        if vari {
            put_u16(o, name_len(&spec.name));
            put_name(o, &spec.name);
        }
        let v = match value {
            Value::Enum(v) | Value::I64(v) => *v as u8,
            Value::U64(v) => *v as u8,
            _ => 0,
        };
        o.push(v);
        return degraded;
    }
    if vari {
        put_u16(o, name_len(&spec.name));
        put_u16(o, name_len(&spec.unit));
        put_name(o, &spec.name);
        put_name(o, &spec.unit);
    }
    let n = tyle_bytes(ti & TI_TYLE).unwrap_or(8);
    match value {
        Value::F32(v) if n == 4 => o.extend_from_slice(&v.to_le_bytes()),
        Value::F32(v) => o.extend_from_slice(&(*v as f64).to_le_bytes()),
        Value::F64(v) if n == 4 => o.extend_from_slice(&(*v as f32).to_le_bytes()),
        Value::F64(v) => o.extend_from_slice(&v.to_le_bytes()),
        Value::I64(v) | Value::Enum(v) => o.extend_from_slice(&v.to_le_bytes()[..n.min(8)]),
        Value::U64(v) => o.extend_from_slice(&v.to_le_bytes()[..n.min(8)]),
        v => {
            // 128-bit integers and 16/128-bit floats: their bytes as read.
            let mut b = bytes_of(v).unwrap_or_default();
            b.resize(n, 0);
            o.extend_from_slice(&b);
        }
    }
    degraded
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg_of(payload: &[u8], noar: u8) -> Vec<u8> {
        let mut rec = Vec::new();
        put_record(
            &mut rec,
            &RecordSpec {
                secs: 1,
                usecs: 0,
                ecu: *b"ECU1",
                mcnt: 0,
                session: 1,
                tmsp: 1,
                msin: 0x41,
                noar,
                apid: *b"APP\0",
                ctid: *b"CTX\0",
                payload,
            },
        );
        rec
    }

    #[test]
    fn every_written_type_reads_back() {
        let specs = [
            (TI_SINT | 1, Value::I64(-5)),
            (TI_SINT | 2, Value::I64(-300)),
            (TI_SINT | 3, Value::I64(-70000)),
            (TI_SINT | 4, Value::I64(i64::MIN)),
            (TI_UINT | 1, Value::U64(255)),
            (TI_UINT | 4, Value::U64(u64::MAX)),
            (TI_FLOA | 3, Value::F32(1.5)),
            (TI_FLOA | 4, Value::F64(-2.25)),
            (TI_BOOL | 1, Value::Enum(1)),
            (TI_STRG, Value::Str("hello".into())),
            (TI_STRG | SCOD_UTF8, Value::Str("gr\u{fc}\u{df}e".into())),
            (TI_RAWD, Value::Bytes(vec![1, 2, 255])),
            (TI_UINT | 5, byte_list(&[7; 16])),
        ];
        let mut payload = Vec::new();
        for (i, (ti, v)) in specs.iter().enumerate() {
            let name = (i % 2 == 0).then(|| format!("f{i}"));
            let unit = (i == 2).then(|| "ms".to_string());
            let spec = ArgSpec {
                ti: *ti,
                name,
                unit,
            };
            assert_eq!(put(&mut payload, &spec, v, None), None, "{i}");
        }
        let rec = msg_of(&payload, specs.len() as u8);
        let m = Msg::parse(0, &rec).unwrap();
        let mut out = Vec::new();
        decode(&m, &mut out).unwrap();
        assert_eq!(out.len(), specs.len());
        for (i, (a, (ti, v))) in out.iter().zip(&specs).enumerate() {
            assert_eq!(&a.value, v, "{i}");
            assert_eq!(a.ti & !TI_VARI, *ti, "{i}");
            assert_eq!(a.name.is_some(), i % 2 == 0, "{i}");
        }
        assert_eq!(out[2].unit, Some(&b"ms"[..]));
        assert_eq!(out[0].ty, FieldType::Int(1));
        assert_eq!(out[8].ty, bool_type());
        assert_eq!(out[12].ty, byte_array(16));
    }

    #[test]
    fn closest_types_and_fallbacks() {
        assert_eq!(type_info_for(&FieldType::Uint(2)), TI_UINT | 2);
        assert_eq!(type_info_for(&bool_type()), TI_BOOL | 1);
        assert_eq!(
            type_info_for(&FieldType::Sequence {
                len: Box::new(FieldType::Uint(4)),
                elem: Box::new(FieldType::Uint(1))
            }),
            TI_RAWD
        );
        // An enum label is written as a string; a struct as its text.
        let mut o = Vec::new();
        let spec = ArgSpec {
            ti: TI_STRG,
            name: None,
            unit: None,
        };
        assert_eq!(put(&mut o, &spec, &Value::Enum(3), Some("WAKEUP")), None);
        let s = Value::Struct(vec![Value::U64(1), Value::U64(2)]);
        assert_eq!(put(&mut o, &spec, &s, None), Some(Degraded::AsText));
        // A number where a string was planned keeps its number type.
        let num = ArgSpec {
            ti: TI_UINT | 3,
            name: None,
            unit: None,
        };
        put(&mut o, &num, &Value::Str("x".into()), None);
        let rec = msg_of(&o, 3);
        let m = Msg::parse(0, &rec).unwrap();
        let mut out = Vec::new();
        decode(&m, &mut out).unwrap();
        assert_eq!(out[0].value, Value::Str("WAKEUP".into()));
        assert_eq!(out[1].value, Value::Str("{1, 2}".into()));
        assert_eq!(out[2].value, Value::Str("x".into()));
    }

    #[test]
    fn unsupported_and_short_payloads_say_why() {
        let mut p = Vec::new();
        p.extend_from_slice(&0x8000u32.to_le_bytes());
        let rec = msg_of(&p, 1);
        let mut out = Vec::new();
        let e = decode(&Msg::parse(0, &rec).unwrap(), &mut out).unwrap_err();
        assert!(e.contains("names no type"), "{e}");
        // One whole argument of the two announced: typed by it.
        let rec = msg_of(&[0x21, 0, 0, 0, 0xfe, 0x23, 0, 0, 0, 1], 2);
        assert_eq!(decode(&Msg::parse(0, &rec).unwrap(), &mut out), Ok(false));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].value, Value::I64(-2));
    }
}
