//! Verbose arguments ↔ typed model fields (spec kpi-dlt.md §4.5).
//!
//! Reading, each argument becomes a field: BOOL → `Enum{1, false/true}`,
//! SINT/UINT of 8–64 bits → `Int`/`Uint(1|2|4|8)`, FLOA 32/64 → `Float`,
//! STRG (ASCII or UTF-8) and TRAI → `String`, RAWD → `Bytes`, and the
//! 128-bit integers and 16/128-bit floats (no model type) → a fixed array of
//! bytes. The argument name is the VARI name when there is one, else
//! `argN`; the type-info words and units stay in the event type's extras so
//! that a DLT writer gives the same arguments back.
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

/// Decode every argument of a verbose message into `out`. `Err` says why
/// the payload cannot be typed (an unsupported type, a short payload).
pub fn decode<'a>(m: &Msg<'a>, out: &mut Vec<Arg<'a>>) -> Result<(), String> {
    out.clear();
    let noar = m.ext.map_or(0, |e| e.noar);
    let mut c = Cursor::new(m.payload, m.msbf());
    for i in 0..noar {
        let short = || format!("argument {i}: payload too short");
        let ti = c.u32().ok_or_else(short)?;
        let scod = ti & TI_SCOD;
        let tyle = ti & TI_TYLE;
        let vari = ti & TI_VARI != 0;
        let mut name = None;
        let mut unit = None;
        let name_only = |c: &mut Cursor<'a>| -> Option<&'a [u8]> {
            let n = c.u16()?;
            c.bytes(n as usize).map(cut_nul)
        };
        let (ty, value) = if ti & TI_STRG != 0 && (scod == SCOD_ASCII || scod == SCOD_UTF8) {
            let len = c.u16().ok_or_else(short)?;
            if vari {
                name = Some(name_only(&mut c).ok_or_else(short)?);
            }
            let s = c.bytes(len as usize).ok_or_else(short)?;
            (FieldType::String, crate::model::text_value(cut_nul(s)))
        } else if ti & TI_BOOL != 0 {
            if vari {
                name = Some(name_only(&mut c).ok_or_else(short)?);
            }
            let v = c.u8().ok_or_else(short)?;
            (bool_type(), Value::Enum(v as i64))
        } else if ti & (TI_SINT | TI_UINT | TI_FLOA) != 0 {
            if vari {
                let nl = c.u16().ok_or_else(short)?;
                let ul = c.u16().ok_or_else(short)?;
                name = Some(cut_nul(c.bytes(nl as usize).ok_or_else(short)?));
                unit = Some(cut_nul(c.bytes(ul as usize).ok_or_else(short)?));
            }
            let n =
                tyle_bytes(tyle).ok_or_else(|| format!("argument {i}: bad length code {tyle}"))?;
            if ti & TI_FIXP != 0 && ti & TI_FLOA == 0 {
                // Quantisation (f32) and offset: kept in the raw record only.
                c.u32().ok_or_else(short)?;
                c.bytes(if n <= 4 { 4 } else { n }).ok_or_else(short)?;
            }
            let b = c.bytes(n).ok_or_else(short)?;
            let mut a = [0u8; 8];
            if n <= 8 {
                if m.msbf() {
                    a[8 - n..].copy_from_slice(b);
                    a = u64::from_be_bytes(a).to_le_bytes();
                } else {
                    a[..n].copy_from_slice(b);
                }
            }
            let raw = u64::from_le_bytes(a);
            if ti & TI_FLOA != 0 {
                match n {
                    4 => (FieldType::Float(4), Value::F32(f32::from_bits(raw as u32))),
                    8 => (FieldType::Float(8), Value::F64(f64::from_bits(raw))),
                    _ => (byte_array(n as u32), byte_list(b)),
                }
            } else if n == 16 {
                (byte_array(16), byte_list(b))
            } else if ti & TI_SINT != 0 {
                let shift = 64 - 8 * n as u32;
                let v = ((raw << shift) as i64) >> shift;
                (FieldType::Int(n as u8), Value::I64(v))
            } else {
                (FieldType::Uint(n as u8), Value::U64(raw))
            }
        } else if ti & TI_RAWD != 0 {
            let len = c.u16().ok_or_else(short)?;
            if vari {
                name = Some(name_only(&mut c).ok_or_else(short)?);
            }
            let b = c.bytes(len as usize).ok_or_else(short)?;
            (FieldType::Bytes, Value::Bytes(b.to_vec()))
        } else if ti & TI_TRAI != 0 {
            let len = c.u16().ok_or_else(short)?;
            let s = c.bytes(len as usize).ok_or_else(short)?;
            (FieldType::String, crate::model::text_value(cut_nul(s)))
        } else {
            return Err(format!(
                "argument {i}: type info 0x{ti:08x} (arrays, structs) is not supported"
            ));
        };
        out.push(Arg {
            ti,
            name,
            unit,
            ty,
            value,
        });
    }
    Ok(())
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
        p.extend_from_slice(&0x100u32.to_le_bytes());
        let rec = msg_of(&p, 1);
        let mut out = Vec::new();
        let e = decode(&Msg::parse(0, &rec).unwrap(), &mut out).unwrap_err();
        assert!(e.contains("not supported"), "{e}");
        let rec = msg_of(&[0x23, 0, 0, 0, 1], 1);
        let e = decode(&Msg::parse(0, &rec).unwrap(), &mut out).unwrap_err();
        assert!(e.contains("too short"), "{e}");
    }
}
