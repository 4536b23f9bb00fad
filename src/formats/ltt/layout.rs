//! Binary structures (spec 5.2–5.6, 5.9): byte order, the builtin events,
//! block framing, and the packed encoding of typed payloads.

use super::eventdefs::Ty;
use crate::model::Value;
use std::io::Write;

pub const ID_FACILITY_LOAD: u16 = 0;
pub const ID_BLOCK_START: u16 = 17;
pub const ID_BLOCK_END: u16 = 18;
pub const ID_HEARTBEAT: u16 = 19;

/// Event header: u16 id + u32 ts32.
pub const HDR: usize = 6;
/// block_start / block_end event: header + 20-byte payload.
pub const FRAME: usize = 26;
/// Heartbeat event: header + 16-byte payload.
pub const HEARTBEAT: usize = 22;
/// Smallest legal block: block_start + block_end + trailer.
pub const MIN_BLOCK: usize = 2 * FRAME + 4;

pub fn builtin_name(id: u16) -> Option<&'static str> {
    match id {
        ID_FACILITY_LOAD => Some("facility_load"),
        ID_BLOCK_START => Some("block_start"),
        ID_BLOCK_END => Some("block_end"),
        ID_HEARTBEAT => Some("time_heartbeat"),
        _ => None,
    }
}

/// The flat payload layouts of spec 5.6 (used when no facility covers the id).
pub fn builtin_type(id: u16) -> Option<Ty> {
    let f = |n: &str, t: Ty| (n.to_string(), t);
    Some(match id {
        ID_FACILITY_LOAD => Ty::Struct(vec![
            f("name", Ty::Str),
            f("checksum", Ty::Uint(4)),
            f("base_code", Ty::Uint(4)),
        ]),
        ID_BLOCK_START | ID_BLOCK_END => Ty::Struct(vec![
            f("seconds", Ty::Uint(4)),
            f("nanoseconds", Ty::Uint(4)),
            f("cycle_count", Ty::Uint(8)),
            f("block_id", Ty::Uint(4)),
        ]),
        ID_HEARTBEAT => Ty::Struct(vec![
            f("seconds", Ty::Uint(4)),
            f("nanoseconds", Ty::Uint(4)),
            f("cycle_count", Ty::Uint(8)),
        ]),
        _ => return None,
    })
}

/// The `N` bytes at `at`, if `b` holds them.
fn bytes_at<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// Byte order of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bo {
    pub big: bool,
}

impl Bo {
    // Read little-endian, swapped for a big-endian trace.
    pub fn u16(self, b: &[u8], at: usize) -> Option<u16> {
        let v = u16::from_le_bytes(bytes_at(b, at)?);
        Some(if self.big { v.swap_bytes() } else { v })
    }
    pub fn u32(self, b: &[u8], at: usize) -> Option<u32> {
        let v = u32::from_le_bytes(bytes_at(b, at)?);
        Some(if self.big { v.swap_bytes() } else { v })
    }
    pub fn u64(self, b: &[u8], at: usize) -> Option<u64> {
        let v = u64::from_le_bytes(bytes_at(b, at)?);
        Some(if self.big { v.swap_bytes() } else { v })
    }
    /// Unsigned integer of 1, 2, 4 or 8 bytes.
    pub fn uint(self, b: &[u8], at: usize, n: u8) -> Option<u64> {
        match n {
            1 => b.get(at).map(|&v| v as u64),
            2 => self.u16(b, at).map(u64::from),
            4 => self.u32(b, at).map(u64::from),
            8 => self.u64(b, at),
            _ => None,
        }
    }
    #[inline]
    pub fn put_uint(self, out: &mut Vec<u8>, v: u64, n: u8) {
        let bytes = if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        let n = n as usize;
        if self.big {
            out.extend_from_slice(&bytes[8 - n..]);
        } else {
            out.extend_from_slice(&bytes[..n]);
        }
    }
}

fn sext(v: u64, n: u8) -> i64 {
    let sh = 64 - 8 * n as u32;
    ((v << sh) as i64) >> sh
}

/// A decode failure inside a payload.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeError {
    pub offset: usize,
    pub msg: String,
}

fn short(at: usize) -> DecodeError {
    DecodeError {
        offset: at,
        msg: "payload runs past the end of the block".into(),
    }
}

/// Count of a sequence/array, checked against what is left so that
/// a corrupt length can neither allocate nor loop without bound.
fn check_count(n: u64, elem: &Ty, at: usize, end: usize) -> Result<usize, DecodeError> {
    let left = end.saturating_sub(at) as u64;
    let min = elem.min_size() as u64;
    let ok = if min == 0 {
        n <= 65_536
    } else {
        n.saturating_mul(min) <= left
    };
    if !ok {
        return Err(DecodeError {
            offset: at,
            msg: format!("element count {n} does not fit in the block"),
        });
    }
    Ok(n as usize)
}

/// Walk a payload without building values; returns the end offset.
pub fn skip(ty: &Ty, b: &[u8], at: usize, bo: Bo) -> Result<usize, DecodeError> {
    let end = b.len();
    match ty {
        Ty::Int(n) | Ty::Uint(n) | Ty::Float(n) | Ty::Enum { size: n, .. } => {
            let e = at + *n as usize;
            if e > end {
                return Err(short(at));
            }
            Ok(e)
        }
        Ty::Str => match b.get(at..).and_then(|s| s.iter().position(|&c| c == 0)) {
            Some(p) => Ok(at + p + 1),
            None => Err(DecodeError {
                offset: at,
                msg: "string without a terminating NUL".into(),
            }),
        },
        Ty::Array { len, elem } => {
            if let Some(sz) = elem.fixed_size() {
                let total = sz.saturating_mul(*len as usize);
                return if at.saturating_add(total) > end {
                    Err(short(at))
                } else {
                    Ok(at + total)
                };
            }
            let n = check_count(*len as u64, elem, at, end)?;
            let mut p = at;
            for _ in 0..n {
                p = skip(elem, b, p, bo)?;
            }
            Ok(p)
        }
        Ty::Seq { lensize, elem } => {
            let n = bo.uint(b, at, *lensize).ok_or_else(|| short(at))?;
            let mut p = at + *lensize as usize;
            let n = check_count(n, elem, p, end)?;
            if let Some(sz) = elem.fixed_size() {
                return Ok(p + sz * n);
            }
            for _ in 0..n {
                p = skip(elem, b, p, bo)?;
            }
            Ok(p)
        }
        Ty::Struct(fields) => {
            let mut p = at;
            for (_, t) in fields {
                p = skip(t, b, p, bo)?;
            }
            Ok(p)
        }
        Ty::Union { tagsize, fields } => {
            let (t, p) = union_member(*tagsize, fields, b, at, bo)?;
            skip(&fields[t].1, b, p, bo)
        }
    }
}

fn union_member(
    tagsize: u8,
    fields: &[(String, Ty)],
    b: &[u8],
    at: usize,
    bo: Bo,
) -> Result<(usize, usize), DecodeError> {
    let tag = bo.uint(b, at, tagsize).ok_or_else(|| short(at))?;
    if tag >= fields.len() as u64 {
        return Err(DecodeError {
            offset: at,
            msg: format!("union tag {tag} out of range ({} members)", fields.len()),
        });
    }
    Ok((tag as usize, at + tagsize as usize))
}

/// A plain number of 1, 2, 4 or 8 bytes (floats: 4 or 8).
fn is_scalar(t: &Ty) -> bool {
    match t {
        Ty::Int(n) | Ty::Uint(n) | Ty::Enum { size: n, .. } => matches!(n, 1 | 2 | 4 | 8),
        Ty::Float(n) => matches!(n, 4 | 8),
        _ => false,
    }
}

/// The field types of a payload made only of plain numbers (a struct of
/// them, or one alone), which `decode_scalars` reads without recursion;
/// None for any other payload.
pub fn scalar_fields(ty: &Ty) -> Option<Vec<Ty>> {
    match ty {
        Ty::Struct(f) if f.iter().all(|(_, t)| is_scalar(t)) => {
            Some(f.iter().map(|(_, t)| t.clone()).collect())
        }
        t if is_scalar(t) => Some(vec![t.clone()]),
        _ => None,
    }
}

/// The model fields of such a payload, as `decode` gives them; None when
/// the payload is too short (`decode` then says where).
pub fn decode_scalars(fields: &[Ty], b: &[u8], bo: Bo) -> Option<Vec<Value>> {
    let mut v = Vec::with_capacity(fields.len());
    decode_scalars_into(fields, b, bo, &mut v).then_some(v)
}

/// [`decode_scalars`] appending to `v` (a reused list); false, with `v`
/// holding a part, when the payload is not plain numbers or too short.
pub fn decode_scalars_into(fields: &[Ty], b: &[u8], bo: Bo, v: &mut Vec<Value>) -> bool {
    v.reserve(fields.len());
    let mut at = 0;
    for t in fields {
        let (n, bits) = match *t {
            Ty::Int(n) | Ty::Uint(n) | Ty::Float(n) | Ty::Enum { size: n, .. } => {
                match bo.uint(b, at, n) {
                    Some(x) => (n, x),
                    None => return false,
                }
            }
            _ => return false,
        };
        at += n as usize;
        // Pushed from registers: the variant is picked by a plain switch
        // on the type below, not built per arm and copied.
        v.push(match *t {
            Ty::Int(_) => Value::I64(sext(bits, n)),
            Ty::Uint(_) => Value::U64(bits),
            Ty::Enum { .. } => Value::Enum(bits as i64),
            Ty::Float(4) => Value::F32(f32::from_bits(bits as u32)),
            _ => Value::F64(f64::from_bits(bits)),
        });
    }
    true
}

/// Decode a payload into a model value. Unions become
/// `Union([U64(tag), member value])`.
pub fn decode(ty: &Ty, b: &[u8], at: &mut usize, bo: Bo) -> Result<Value, DecodeError> {
    let p = *at;
    Ok(match ty {
        Ty::Int(n) => {
            let v = bo.uint(b, p, *n).ok_or_else(|| short(p))?;
            *at += *n as usize;
            Value::I64(sext(v, *n))
        }
        Ty::Uint(n) => {
            let v = bo.uint(b, p, *n).ok_or_else(|| short(p))?;
            *at += *n as usize;
            Value::U64(v)
        }
        Ty::Enum { size, .. } => {
            let v = bo.uint(b, p, *size).ok_or_else(|| short(p))?;
            *at += *size as usize;
            Value::Enum(v as i64)
        }
        Ty::Float(n) => {
            let v = bo.uint(b, p, *n).ok_or_else(|| short(p))?;
            *at += *n as usize;
            if *n == 4 {
                Value::F32(f32::from_bits(v as u32))
            } else {
                Value::F64(f64::from_bits(v))
            }
        }
        Ty::Str => {
            let e = skip(ty, b, p, bo)?;
            *at = e;
            crate::model::text_value(&b[p..e - 1])
        }
        Ty::Array { len, elem } => {
            let n = check_count(*len as u64, elem, p, b.len())?;
            let mut v = Vec::with_capacity(n.min(4096));
            for _ in 0..n {
                v.push(decode(elem, b, at, bo)?);
            }
            Value::List(v)
        }
        Ty::Seq { lensize, elem } => {
            let n = bo.uint(b, p, *lensize).ok_or_else(|| short(p))?;
            *at += *lensize as usize;
            let n = check_count(n, elem, *at, b.len())?;
            let mut v = Vec::with_capacity(n.min(4096));
            for _ in 0..n {
                v.push(decode(elem, b, at, bo)?);
            }
            Value::List(v)
        }
        Ty::Struct(fields) => {
            let mut v = Vec::with_capacity(fields.len());
            for (_, t) in fields {
                v.push(decode(t, b, at, bo)?);
            }
            Value::Struct(v)
        }
        Ty::Union { tagsize, fields } => {
            let (t, q) = union_member(*tagsize, fields, b, p, bo)?;
            *at = q;
            let m = decode(&fields[t].1, b, at, bo)?;
            Value::Union(vec![Value::U64(t as u64), m])
        }
    })
}

/// Print a payload in the listing syntax of spec 5.15, straight from bytes.
pub fn dump(
    ty: &Ty,
    b: &[u8],
    at: &mut usize,
    bo: Bo,
    out: &mut Vec<u8>,
) -> Result<(), DecodeError> {
    let p = *at;
    match ty {
        Ty::Int(n) => {
            let v = bo.uint(b, p, *n).ok_or_else(|| short(p))?;
            *at += *n as usize;
            let _ = write!(out, "{}", sext(v, *n));
        }
        Ty::Uint(n) => {
            let v = bo.uint(b, p, *n).ok_or_else(|| short(p))?;
            *at += *n as usize;
            let _ = write!(out, "{v}");
        }
        Ty::Enum { size, labels } => {
            let v = bo.uint(b, p, *size).ok_or_else(|| short(p))?;
            *at += *size as usize;
            match labels.iter().find(|(lv, _)| *lv as u64 == v) {
                Some((_, name)) => out.extend_from_slice(name.as_bytes()),
                None => {
                    let _ = write!(out, "{v}");
                }
            }
        }
        Ty::Float(n) => {
            let v = bo.uint(b, p, *n).ok_or_else(|| short(p))?;
            *at += *n as usize;
            if *n == 4 {
                let _ = write!(out, "{}", f32::from_bits(v as u32));
            } else {
                let _ = write!(out, "{}", f64::from_bits(v));
            }
        }
        Ty::Str => {
            let e = skip(ty, b, p, bo)?;
            *at = e;
            quote(&b[p..e - 1], out);
        }
        Ty::Array { len, elem } => {
            let n = check_count(*len as u64, elem, p, b.len())?;
            dump_list(elem, n, b, at, bo, out)?;
        }
        Ty::Seq { lensize, elem } => {
            let n = bo.uint(b, p, *lensize).ok_or_else(|| short(p))?;
            *at += *lensize as usize;
            let n = check_count(n, elem, *at, b.len())?;
            dump_list(elem, n, b, at, bo, out)?;
        }
        Ty::Struct(fields) => {
            if fields.is_empty() {
                out.extend_from_slice(b"{ }");
                return Ok(());
            }
            out.extend_from_slice(b"{ ");
            for (i, (name, t)) in fields.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(b" = ");
                dump(t, b, at, bo, out)?;
            }
            out.extend_from_slice(b" }");
        }
        Ty::Union { tagsize, fields } => {
            let (t, q) = union_member(*tagsize, fields, b, p, bo)?;
            *at = q;
            out.extend_from_slice(b"{ ");
            out.extend_from_slice(fields[t].0.as_bytes());
            out.extend_from_slice(b" = ");
            dump(&fields[t].1, b, at, bo, out)?;
            out.extend_from_slice(b" }");
        }
    }
    Ok(())
}

fn dump_list(
    elem: &Ty,
    n: usize,
    b: &[u8],
    at: &mut usize,
    bo: Bo,
    out: &mut Vec<u8>,
) -> Result<(), DecodeError> {
    if n == 0 {
        out.extend_from_slice(b"[ ]");
        return Ok(());
    }
    out.extend_from_slice(b"[ ");
    for i in 0..n {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        dump(elem, b, at, bo, out)?;
    }
    out.extend_from_slice(b" ]");
    Ok(())
}

/// Double-quote a string with `\" \\ \n \t` and `\xNN` escapes.
pub fn quote(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x20..=0x7e => out.push(c),
            0x80..=0xff => {
                // A valid UTF-8 sequence of a printable character stays as is.
                let len = match c {
                    0xc2..=0xdf => 2,
                    0xe0..=0xef => 3,
                    0xf0..=0xf4 => 4,
                    _ => 0,
                };
                let ch = (len > 0)
                    .then(|| s.get(i..i + len))
                    .flatten()
                    .and_then(|seq| std::str::from_utf8(seq).ok())
                    .and_then(|t| t.chars().next())
                    .filter(|ch| !ch.is_control());
                if let Some(ch) = ch {
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                    i += len;
                    continue;
                }
                let _ = write!(out, "\\x{c:02x}");
            }
            _ => {
                let _ = write!(out, "\\x{c:02x}");
            }
        }
        i += 1;
    }
    out.push(b'"');
}

/// Encode a model value by a layout. Mismatched values are coerced where
/// a number is a number; anything else is an error message.
pub fn encode(ty: &Ty, v: &Value, bo: Bo, out: &mut Vec<u8>) -> Result<(), String> {
    match ty {
        Ty::Int(n) | Ty::Uint(n) | Ty::Enum { size: n, .. } => {
            let x: u64 = match v {
                Value::I64(x) | Value::Enum(x) => *x as u64,
                Value::U64(x) => *x,
                Value::F32(f) => *f as i64 as u64,
                Value::F64(f) => *f as i64 as u64,
                _ => return Err(format!("expected an integer, got {v:?}")),
            };
            bo.put_uint(out, x, *n);
        }
        Ty::Float(n) => {
            let f = v
                .as_f64()
                .ok_or_else(|| format!("expected a number, got {v:?}"))?;
            if *n == 4 {
                let bits = match v {
                    Value::F32(x) => x.to_bits(),
                    _ => (f as f32).to_bits(),
                };
                bo.put_uint(out, bits as u64, 4);
            } else {
                bo.put_uint(out, f.to_bits(), 8);
            }
        }
        Ty::Str => {
            let bytes: &[u8] = match v {
                Value::Str(s) => s.as_bytes(),
                Value::Bytes(b) => b,
                _ => return Err(format!("expected a string, got {v:?}")),
            };
            // An embedded NUL would end the string early: cut there.
            let end = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
            out.extend_from_slice(&bytes[..end]);
            out.push(0);
        }
        Ty::Array { len, elem } => {
            let items = list_of(v)?;
            if items.len() != *len as usize {
                return Err(format!(
                    "array of {len} elements given {} values",
                    items.len()
                ));
            }
            for x in items.iter() {
                encode(elem, x, bo, out)?;
            }
        }
        Ty::Seq { lensize, elem } => {
            let items = list_of(v)?;
            let max = if *lensize >= 8 {
                u64::MAX
            } else {
                (1u64 << (8 * *lensize as u32)) - 1
            };
            if items.len() as u64 > max {
                return Err(format!("sequence of {} elements too long", items.len()));
            }
            bo.put_uint(out, items.len() as u64, *lensize);
            for x in items.iter() {
                encode(elem, x, bo, out)?;
            }
        }
        Ty::Struct(fields) => {
            let Value::Struct(vals) = v else {
                return Err(format!("expected a struct, got {v:?}"));
            };
            if vals.len() != fields.len() {
                return Err("struct value has the wrong number of members".into());
            }
            for ((_, t), x) in fields.iter().zip(vals) {
                encode(t, x, bo, out)?;
            }
        }
        Ty::Union { tagsize, fields } => {
            let (tag, m) = match v {
                Value::Union(p) if p.len() == 2 => match p[0] {
                    Value::U64(t) => (t, &p[1]),
                    _ => return Err("union tag is not an integer".into()),
                },
                _ => return Err(format!("expected a union, got {v:?}")),
            };
            let f = fields
                .get(tag as usize)
                .ok_or_else(|| format!("union tag {tag} out of range"))?;
            bo.put_uint(out, tag, *tagsize);
            encode(&f.1, m, bo, out)?;
        }
    }
    Ok(())
}

fn list_of(v: &Value) -> Result<std::borrow::Cow<'_, [Value]>, String> {
    match v {
        Value::List(l) => Ok(std::borrow::Cow::Borrowed(l)),
        Value::Bytes(b) => Ok(std::borrow::Cow::Owned(
            b.iter().map(|&x| Value::U64(x as u64)).collect(),
        )),
        _ => Err(format!("expected a list, got {v:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_number_payloads_decode_as_decode_does() {
        let f = |n: &str, t: Ty| (n.to_string(), t);
        let ty = Ty::Struct(vec![
            f("a", Ty::Int(1)),
            f("b", Ty::Int(2)),
            f("c", Ty::Int(4)),
            f("d", Ty::Int(8)),
            f("e", Ty::Uint(1)),
            f("g", Ty::Uint(2)),
            f("h", Ty::Uint(8)),
            f(
                "i",
                Ty::Enum {
                    size: 4,
                    labels: vec![(0, "x".into())],
                },
            ),
            f("j", Ty::Float(4)),
            f("k", Ty::Float(8)),
        ]);
        let flat = scalar_fields(&ty).expect("plain numbers");
        let bytes: Vec<u8> = (0..ty.fixed_size().unwrap())
            .map(|i| (i as u8).wrapping_mul(37) ^ 0x95)
            .collect();
        for big in [false, true] {
            let bo = Bo { big };
            let mut at = 0;
            let Value::Struct(want) = decode(&ty, &bytes, &mut at, bo).unwrap() else {
                panic!("a struct decodes to a struct")
            };
            assert!(want.iter().any(|v| matches!(v, Value::I64(x) if *x < 0)));
            assert_eq!(decode_scalars(&flat, &bytes, bo).unwrap(), want);
            // Cut short: no fields, so the caller asks decode where.
            assert_eq!(decode_scalars(&flat, &bytes[..bytes.len() - 1], bo), None);
        }
        // One number alone is one field; strings, sequences and nested
        // structs are not plain.
        assert_eq!(scalar_fields(&Ty::Uint(4)).unwrap().len(), 1);
        assert!(scalar_fields(&Ty::Struct(vec![f("s", Ty::Str)])).is_none());
        assert!(scalar_fields(&Ty::Struct(vec![f("t", Ty::Struct(vec![]))])).is_none());
        assert!(scalar_fields(&Ty::Int(3)).is_none());
    }

    #[test]
    fn quoting() {
        let mut o = Vec::new();
        quote(b"a\"\\\n\t\x01\xff\xc3\xa9", &mut o);
        assert_eq!(o, b"\"a\\\"\\\\\\n\\t\\x01\\xff\xc3\xa9\"");
    }

    #[test]
    fn roundtrip_union_and_seq() {
        let ty = Ty::Struct(vec![
            (
                "u".into(),
                Ty::Union {
                    tagsize: 2,
                    fields: vec![("a".into(), Ty::Uint(1)), ("s".into(), Ty::Str)],
                },
            ),
            (
                "q".into(),
                Ty::Seq {
                    lensize: 1,
                    elem: Box::new(Ty::Int(2)),
                },
            ),
        ]);
        let v = Value::Struct(vec![
            Value::Union(vec![Value::U64(1), Value::Str("hi".into())]),
            Value::List(vec![Value::I64(-2), Value::I64(3)]),
        ]);
        for big in [false, true] {
            let bo = Bo { big };
            let mut out = Vec::new();
            encode(&ty, &v, bo, &mut out).unwrap();
            assert_eq!(out.len(), 2 + 3 + 1 + 4);
            let mut at = 0;
            assert_eq!(decode(&ty, &out, &mut at, bo).unwrap(), v);
            assert_eq!(at, out.len());
            let mut txt = Vec::new();
            let mut at = 0;
            dump(&ty, &out, &mut at, bo, &mut txt).unwrap();
            assert_eq!(
                String::from_utf8(txt).unwrap(),
                "{ u = { s = \"hi\" }, q = [ -2, 3 ] }"
            );
        }
    }
}
