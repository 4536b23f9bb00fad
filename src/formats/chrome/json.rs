//! Low-level JSON for the trace-event lines: exact microsecond timestamps,
//! escaped strings and typed argument values, written straight into the
//! output buffer (no per-event `String`s, no JSON tree).

use crate::model::{FieldType, Value};
use std::io::{self, Write};

/// Nanoseconds as microseconds with three decimals: exact, no float.
pub fn write_us<W: Write + ?Sized>(w: &mut W, ns: i64) -> io::Result<()> {
    let a = ns.unsigned_abs();
    if ns < 0 {
        w.write_all(b"-")?;
    }
    let mut b = itoa::Buffer::new();
    w.write_all(b.format(a / 1000).as_bytes())?;
    let f = (a % 1000) as u16;
    w.write_all(&[
        b'.',
        b'0' + (f / 100) as u8,
        b'0' + (f / 10 % 10) as u8,
        b'0' + (f % 10) as u8,
    ])
}

/// A JSON string literal (RFC 8259 escaping, by serde_json).
pub fn write_str<W: Write + ?Sized>(w: &mut W, s: &str) -> io::Result<()> {
    serde_json::to_writer(&mut *w, s).map_err(io::Error::from)
}

pub fn write_int<W: Write + ?Sized>(w: &mut W, v: impl itoa::Integer) -> io::Result<()> {
    let mut b = itoa::Buffer::new();
    w.write_all(b.format(v).as_bytes())
}

/// A float as a JSON number; NaN and infinities (no JSON number) as strings.
pub fn write_f64<W: Write + ?Sized>(w: &mut W, v: f64) -> io::Result<()> {
    if v.is_finite() {
        // Debug is the shortest text that reads back to the same double,
        // and always a valid JSON number ("1.0", "1e300", "-2.5e-7").
        write!(w, "{v:?}")
    } else {
        write_str(w, &format!("{v}"))
    }
}

fn write_f32<W: Write + ?Sized>(w: &mut W, v: f32) -> io::Result<()> {
    if v.is_finite() {
        write!(w, "{v:?}")
    } else {
        write_str(w, &format!("{v}"))
    }
}

/// Values as a JSON array, each shaped by `elem`.
fn write_list<W: Write + ?Sized>(
    w: &mut W,
    xs: &[Value],
    elem: Option<&FieldType>,
) -> io::Result<()> {
    w.write_all(b"[")?;
    for (i, x) in xs.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        write_value(w, x, elem)?;
    }
    w.write_all(b"]")
}

/// A field value as JSON, shaped by its type where the model has one:
/// enums as their label, structs and unions as objects named by member,
/// arrays and sequences as arrays, bytes as `"0x…"` text.
pub fn write_value<W: Write + ?Sized>(
    w: &mut W,
    v: &Value,
    ty: Option<&FieldType>,
) -> io::Result<()> {
    match v {
        Value::I64(x) => write_int(w, *x),
        Value::U64(x) => write_int(w, *x),
        Value::F32(x) => write_f32(w, *x),
        Value::F64(x) => write_f64(w, *x),
        Value::Str(s) => write_str(w, s),
        Value::Bytes(b) => {
            w.write_all(b"\"0x")?;
            for x in b {
                write!(w, "{x:02x}")?;
            }
            w.write_all(b"\"")
        }
        Value::Enum(x) => {
            let label = match ty {
                Some(FieldType::Enum { labels, .. }) => {
                    labels.iter().find(|(n, _)| n == x).map(|(_, l)| l.as_str())
                }
                _ => None,
            };
            match label {
                Some(l) => write_str(w, l),
                None => write_int(w, *x),
            }
        }
        Value::List(xs) => {
            let elem = match ty {
                Some(FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. }) => {
                    Some(&**elem)
                }
                _ => None,
            };
            write_list(w, xs, elem)
        }
        Value::Struct(xs) | Value::Union(xs) => {
            let members = match ty {
                Some(FieldType::Struct(f) | FieldType::Union(f)) if f.len() == xs.len() => Some(f),
                _ => None,
            };
            match members {
                Some(fields) => {
                    w.write_all(b"{")?;
                    for (i, (f, x)) in fields.iter().zip(xs).enumerate() {
                        if i > 0 {
                            w.write_all(b",")?;
                        }
                        write_str(w, &f.name)?;
                        w.write_all(b":")?;
                        write_value(w, x, Some(&f.ty))?;
                    }
                    w.write_all(b"}")
                }
                // No member names known: the values in order.
                None => write_list(w, xs, None),
            }
        }
        Value::Events(recs) => {
            write!(w, "\"<{} event records>\"", recs.len())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(ns: i64) -> String {
        let mut v = Vec::new();
        write_us(&mut v, ns).unwrap();
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn microseconds_keep_every_nanosecond() {
        assert_eq!(us(0), "0.000");
        assert_eq!(us(7823), "7.823");
        assert_eq!(us(1_000_000_001), "1000000.001");
        assert_eq!(us(-5), "-0.005");
        assert_eq!(us(i64::MIN), "-9223372036854775.808");
    }
}
