//! Model values into CTF binary fields (little-endian, byte-aligned), by
//! the field classes of `types`. A value that does not fit its class is
//! written as the nearest thing the class holds and flagged, so the writer
//! can report the degradation; a missing value is written as zero/empty.

use super::types::CType;
use crate::model::{EventRecord, Value};

/// What went wrong while encoding one item (each becomes a loss line).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Flags {
    /// A value of another kind than its field (string in an integer, …),
    /// or missing: zero/empty written.
    pub mismatch: bool,
    /// An integer outside its field's range: low bits kept.
    pub range: bool,
    /// A string with a NUL byte: cut at it (CTF strings end at NUL).
    pub nul: bool,
    /// More elements than the length field can count, or an array of
    /// another length: cut or zero-padded.
    pub length: bool,
}

impl Flags {
    pub fn any(&self) -> bool {
        self.mismatch || self.range || self.nul || self.length
    }
}

fn put_int(out: &mut Vec<u8>, v: i128, bytes: u8, signed: bool, fl: &mut Flags) {
    let bits = bytes as u32 * 8;
    let (lo, hi) = if signed {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    };
    if v < lo || v > hi {
        fl.range = true;
    }
    let le = (v as u128 as u64).to_le_bytes();
    out.extend_from_slice(&le[..bytes as usize]);
}

fn int_value(v: Option<&Value>, fl: &mut Flags) -> i128 {
    match v {
        Some(Value::I64(x) | Value::Enum(x)) => *x as i128,
        Some(Value::U64(x)) => *x as i128,
        Some(Value::F32(x)) => {
            fl.mismatch = true;
            *x as i128
        }
        Some(Value::F64(x)) => {
            fl.mismatch = true;
            *x as i128
        }
        _ => {
            fl.mismatch = true;
            0
        }
    }
}

pub fn put_str(out: &mut Vec<u8>, b: &[u8], fl: &mut Flags) {
    match b.iter().position(|&c| c == 0) {
        Some(p) => {
            fl.nul = true;
            out.extend_from_slice(&b[..p]);
        }
        None => out.extend_from_slice(b),
    }
    out.push(0);
}

/// Elements of a list-like value: a list, or the bytes of a string/bytes
/// value for byte-sized elements (LTT char arrays).
enum Elems<'a> {
    List(&'a [Value]),
    Bytes(&'a [u8]),
    None,
}

fn elems<'a>(elem: &CType, v: Option<&'a Value>, fl: &mut Flags) -> Elems<'a> {
    let byte_elem = matches!(elem, CType::Int { bytes: 1, .. });
    match v {
        Some(Value::List(xs)) => Elems::List(xs),
        Some(Value::Bytes(b)) if byte_elem => Elems::Bytes(b),
        Some(Value::Str(s)) if byte_elem => Elems::Bytes(s.as_bytes()),
        None => Elems::None,
        Some(_) => {
            fl.mismatch = true;
            Elems::None
        }
    }
}

fn elems_len(e: &Elems) -> usize {
    match e {
        Elems::List(xs) => xs.len(),
        Elems::Bytes(b) => b.len(),
        Elems::None => 0,
    }
}

fn put_elems(out: &mut Vec<u8>, elem: &CType, e: &Elems, n: usize, fl: &mut Flags) {
    match e {
        Elems::Bytes(b) => {
            let k = n.min(b.len());
            out.extend_from_slice(&b[..k]);
            out.resize(out.len() + (n - k), 0);
        }
        Elems::List(xs) => {
            for i in 0..n {
                encode(out, elem, xs.get(i), fl);
            }
        }
        Elems::None => {
            for _ in 0..n {
                encode(out, elem, None, fl);
            }
        }
    }
}

/// Append the encoding of `v` (None: zero/empty) as a field of class `t`.
pub fn encode(out: &mut Vec<u8>, t: &CType, v: Option<&Value>, fl: &mut Flags) {
    match t {
        CType::Int { bytes, signed } | CType::Enum { bytes, signed, .. } => {
            let x = int_value(v, fl);
            put_int(out, x, *bytes, *signed, fl);
        }
        CType::Float { double } => {
            let x = match v {
                Some(Value::F32(x)) if !*double => {
                    out.extend_from_slice(&x.to_le_bytes());
                    return;
                }
                Some(v) => v.as_f64().unwrap_or_else(|| {
                    fl.mismatch = true;
                    0.0
                }),
                None => {
                    fl.mismatch = true;
                    0.0
                }
            };
            if *double {
                out.extend_from_slice(&x.to_le_bytes());
            } else {
                out.extend_from_slice(&(x as f32).to_le_bytes());
            }
        }
        CType::Str => match v {
            Some(Value::Str(s)) => put_str(out, s.as_bytes(), fl),
            Some(Value::Bytes(b)) => put_str(out, b, fl),
            Some(other) => {
                fl.mismatch = true;
                put_str(out, other.text().as_bytes(), fl)
            }
            None => {
                fl.mismatch = true;
                out.push(0)
            }
        },
        CType::Array { len, elem } => {
            let e = elems(elem, v, fl);
            if elems_len(&e) != *len as usize {
                fl.length = true;
            }
            put_elems(out, elem, &e, *len as usize, fl);
        }
        CType::Seq { len_bytes, elem } => {
            let e = elems(elem, v, fl);
            let max = if *len_bytes >= 8 {
                u64::MAX
            } else {
                (1u64 << (*len_bytes as u32 * 8)) - 1
            };
            let n = elems_len(&e);
            let n = if n as u64 > max {
                fl.length = true;
                max as usize
            } else {
                n
            };
            put_int(out, n as i128, *len_bytes, false, fl);
            put_elems(out, elem, &e, n, fl);
        }
        CType::Struct(fs) => {
            let xs: &[Value] = match v {
                Some(Value::Struct(xs) | Value::Union(xs)) => xs,
                None => &[],
                Some(_) => {
                    fl.mismatch = true;
                    &[]
                }
            };
            if v.is_some() && xs.len() != fs.len() {
                fl.mismatch = true;
            }
            for (i, f) in fs.iter().enumerate() {
                encode(out, &f.ty, xs.get(i), fl);
            }
        }
        CType::Boxed(inner) => encode(out, inner, v, fl),
        CType::Records => match v {
            Some(Value::Events(recs)) => put_records(out, recs, fl),
            _ => {
                fl.mismatch = v.is_some();
                out.extend_from_slice(&0u32.to_le_bytes());
            }
        },
    }
}

fn put_records(out: &mut Vec<u8>, recs: &[EventRecord], fl: &mut Flags) {
    let n = recs.len().min(u32::MAX as usize);
    fl.length |= n < recs.len();
    out.extend_from_slice(&(n as u32).to_le_bytes());
    for r in &recs[..n] {
        out.extend_from_slice(&r.time.0.to_le_bytes());
        out.extend_from_slice(&r.flags.to_le_bytes());
        let m = r.params.len().min(u32::MAX as usize);
        out.extend_from_slice(&(m as u32).to_le_bytes());
        for p in &r.params[..m] {
            out.extend_from_slice(&p.metric.to_le_bytes());
            // Kind tags: the order of types::PARAM_KINDS.
            match &p.value {
                Value::I64(x) | Value::Enum(x) => {
                    out.push(0);
                    out.extend_from_slice(&x.to_le_bytes());
                }
                Value::U64(x) => {
                    out.push(1);
                    out.extend_from_slice(&x.to_le_bytes());
                }
                Value::F32(x) => {
                    out.push(2);
                    out.extend_from_slice(&(*x as f64).to_le_bytes());
                }
                Value::F64(x) => {
                    out.push(2);
                    out.extend_from_slice(&x.to_le_bytes());
                }
                Value::Str(s) => {
                    out.push(3);
                    put_str(out, s.as_bytes(), fl);
                }
                Value::Bytes(b) => {
                    out.push(4);
                    let k = b.len().min(u32::MAX as usize);
                    out.extend_from_slice(&(k as u32).to_le_bytes());
                    out.extend_from_slice(&b[..k]);
                }
                other => {
                    fl.mismatch = true;
                    out.push(3);
                    put_str(out, other.text().as_bytes(), fl);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{FieldType, Value};

    fn enc(t: &FieldType, v: &Value) -> (Vec<u8>, Flags) {
        let mut o = Vec::new();
        let mut f = Flags::default();
        encode(
            &mut o,
            &super::super::types::from_field_type(t),
            Some(v),
            &mut f,
        );
        (o, f)
    }

    #[test]
    fn integers_sizes_signs_and_range() {
        assert_eq!(enc(&FieldType::Int(2), &Value::I64(-2)).0, vec![0xfe, 0xff]);
        assert_eq!(enc(&FieldType::Uint(4), &Value::U64(5)).0, vec![5, 0, 0, 0]);
        let (b, f) = enc(&FieldType::Uint(1), &Value::U64(300));
        assert_eq!((b, f.range), (vec![44], true));
        let (_, f) = enc(&FieldType::Int(8), &Value::Str("x".into()));
        assert!(f.mismatch);
    }

    #[test]
    fn sequences_strings_structs() {
        let seq = FieldType::Sequence {
            len: Box::new(FieldType::Uint(1)),
            elem: Box::new(FieldType::Uint(2)),
        };
        let (b, f) = enc(&seq, &Value::List(vec![Value::U64(1), Value::U64(2)]));
        assert_eq!((b, f.any()), (vec![2, 1, 0, 2, 0], false));
        // An empty string is one NUL byte (babeltrace2 2.0.4 may show it
        // with stale text: docs/ctf.md).
        let (b, f) = enc(&FieldType::String, &Value::Str(String::new()));
        assert_eq!((b, f.any()), (vec![0], false));
        let (b, f) = enc(&FieldType::String, &Value::Str("a\0b".into()));
        assert_eq!((b, f.nul), (vec![b'a', 0], true));
        let st = FieldType::Struct(vec![
            crate::model::Field::new("a", FieldType::Uint(1)),
            crate::model::Field::new("b", FieldType::Float(4)),
        ]);
        let (b, _) = enc(&st, &Value::Struct(vec![Value::U64(9), Value::F32(1.0)]));
        assert_eq!(b, vec![9, 0, 0, 0x80, 0x3f]);
        // An array shorter than declared is zero-padded and flagged.
        let arr = FieldType::Array {
            len: 3,
            elem: Box::new(FieldType::Uint(1)),
        };
        let (b, f) = enc(&arr, &Value::List(vec![Value::U64(4)]));
        assert_eq!((b, f.length), (vec![4, 0, 0], true));
    }
}
