//! The JSON self-description polytrace writes into the help text of its
//! event-record metrics, so that its own reader restores the original event
//! types, header and extras (see `events.rs`). Plain JSON, documented in
//! `docs/pcp.md`; other producers never write it, so their archives read
//! as before.

use crate::model::{EventType, ExtraValue, Extras, Field, FieldType, Header, Value};
use serde_json::{json, Map, Value as J};

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A float as JSON: a number, or a string for what JSON cannot hold.
fn float_json(x: f64) -> J {
    if x.is_finite() {
        json!(x)
    } else if x.is_nan() {
        json!("NaN")
    } else if x > 0.0 {
        json!("inf")
    } else {
        json!("-inf")
    }
}

fn float_from(j: &J) -> Option<f64> {
    match j {
        J::Number(n) => n.as_f64(),
        J::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "inf" => Some(f64::INFINITY),
            "-inf" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}

// ------------------------------------------------------------ extras

/// Bytes: `{"t":"text"}` when they are UTF-8 (readable), else `{"b":"hex"}`.
fn bytes_json(b: &[u8]) -> J {
    match std::str::from_utf8(b) {
        Ok(s) => json!({ "t": s }),
        Err(_) => json!({ "b": hex(b) }),
    }
}

fn bytes_from(j: &J) -> Option<Vec<u8>> {
    if let Some(t) = j.get("t").and_then(J::as_str) {
        return Some(t.as_bytes().to_vec());
    }
    unhex(j.get("b")?.as_str()?)
}

/// Extras values tagged by kind (`{"u":1}`, `{"i":-1}`, `{"f":0.5}`, bytes
/// as `{"t":"text"}` or `{"b":"hex"}`); strings, booleans and lists as
/// themselves.
pub fn extra_json(v: &ExtraValue) -> J {
    match v {
        ExtraValue::U64(x) => json!({ "u": x }),
        ExtraValue::I64(x) => json!({ "i": x }),
        ExtraValue::F64(x) => json!({ "f": float_json(*x) }),
        ExtraValue::Bool(x) => json!(x),
        ExtraValue::Str(s) => json!(s),
        ExtraValue::Bytes(b) => bytes_json(b),
        ExtraValue::List(l) => J::Array(l.iter().map(extra_json).collect()),
    }
}

pub fn extra_from(j: &J) -> Option<ExtraValue> {
    Some(match j {
        J::Bool(b) => ExtraValue::Bool(*b),
        J::String(s) => ExtraValue::Str(s.clone()),
        J::Array(a) => ExtraValue::List(a.iter().map(extra_from).collect::<Option<_>>()?),
        J::Object(o) if o.len() == 1 => {
            let (k, v) = o.iter().next()?;
            match k.as_str() {
                "u" => ExtraValue::U64(v.as_u64()?),
                "i" => ExtraValue::I64(v.as_i64()?),
                "f" => ExtraValue::F64(float_from(v)?),
                "b" | "t" => ExtraValue::Bytes(bytes_from(j)?),
                _ => return None,
            }
        }
        _ => return None,
    })
}

pub fn extras_json(x: &Extras) -> J {
    J::Object(
        x.iter()
            .map(|(k, v)| (k.to_string(), extra_json(v)))
            .collect(),
    )
}

pub fn extras_from(j: &J) -> Option<Extras> {
    let mut x = Extras::default();
    for (k, v) in j.as_object()? {
        x.set(k.clone(), extra_from(v)?);
    }
    Some(x)
}

// ------------------------------------------------------------ types

/// `"i4"`, `"u8"`, `"f8"`, `"string"`, `"bytes"`, or an object for the
/// composite types.
pub fn field_type_json(t: &FieldType) -> J {
    match t {
        FieldType::Int(n) => json!(format!("i{n}")),
        FieldType::Uint(n) => json!(format!("u{n}")),
        FieldType::Float(n) => json!(format!("f{n}")),
        FieldType::String => json!("string"),
        FieldType::Bytes => json!("bytes"),
        FieldType::Enum { size, labels } => json!({
            "enum": size,
            "labels": labels.iter().map(|(v, l)| json!([v, l])).collect::<Vec<_>>(),
        }),
        FieldType::Array { len, elem } => json!({ "array": len, "of": field_type_json(elem) }),
        FieldType::Sequence { len, elem } => json!({
            "sequence": field_type_json(len),
            "of": field_type_json(elem),
        }),
        FieldType::Struct(f) => json!({ "struct": fields_json(f) }),
        FieldType::Union(f) => json!({ "union": fields_json(f) }),
    }
}

/// Nesting depth accepted when reading a type back (LTT allows 64).
const MAX_DEPTH: usize = 100;

pub fn field_type_from(j: &J) -> Option<FieldType> {
    type_from(j, 0)
}

fn type_from(j: &J, depth: usize) -> Option<FieldType> {
    if depth > MAX_DEPTH {
        return None;
    }
    if let Some(s) = j.as_str() {
        let size = |p: &str| -> Option<u8> {
            let n: u8 = s.strip_prefix(p)?.parse().ok()?;
            matches!(n, 1 | 2 | 4 | 8).then_some(n)
        };
        return match s {
            "string" => Some(FieldType::String),
            "bytes" => Some(FieldType::Bytes),
            _ if s.starts_with('i') => size("i").map(FieldType::Int),
            _ if s.starts_with('u') => size("u").map(FieldType::Uint),
            _ if s.starts_with('f') => size("f").map(FieldType::Float),
            _ => None,
        };
    }
    let o = j.as_object()?;
    if let Some(size) = o.get("enum") {
        let labels = o
            .get("labels")?
            .as_array()?
            .iter()
            .map(|p| Some((p.get(0)?.as_i64()?, p.get(1)?.as_str()?.to_string())))
            .collect::<Option<Vec<_>>>()?;
        return Some(FieldType::Enum {
            size: u8::try_from(size.as_u64()?).ok()?,
            labels,
        });
    }
    if let Some(len) = o.get("array") {
        return Some(FieldType::Array {
            len: u32::try_from(len.as_u64()?).ok()?,
            elem: Box::new(type_from(o.get("of")?, depth + 1)?),
        });
    }
    if let Some(len) = o.get("sequence") {
        return Some(FieldType::Sequence {
            len: Box::new(type_from(len, depth + 1)?),
            elem: Box::new(type_from(o.get("of")?, depth + 1)?),
        });
    }
    if let Some(f) = o.get("struct") {
        return Some(FieldType::Struct(fields_at(f, depth + 1)?));
    }
    if let Some(f) = o.get("union") {
        return Some(FieldType::Union(fields_at(f, depth + 1)?));
    }
    None
}

pub fn fields_json(fs: &[Field]) -> J {
    J::Array(
        fs.iter()
            .map(|f| {
                let mut o = Map::new();
                o.insert("name".into(), json!(f.name));
                o.insert("type".into(), field_type_json(&f.ty));
                if let Some(d) = &f.description {
                    o.insert("description".into(), json!(d));
                }
                J::Object(o)
            })
            .collect(),
    )
}

fn fields_at(j: &J, depth: usize) -> Option<Vec<Field>> {
    j.as_array()?
        .iter()
        .map(|f| {
            Some(Field {
                name: f.get("name")?.as_str()?.to_string(),
                ty: type_from(f.get("type")?, depth)?,
                description: f.get("description").and_then(J::as_str).map(str::to_string),
            })
        })
        .collect()
}

/// The JSON of an event type (everything but its id's meaning, which is
/// model-local and kept as `id`).
pub fn event_type_json(t: &EventType) -> J {
    let mut o = Map::new();
    o.insert("id".into(), json!(t.id));
    o.insert("category".into(), json!(t.category));
    o.insert("name".into(), json!(t.name));
    for (k, v) in [
        ("description", &t.description),
        ("priority", &t.priority),
        ("format", &t.format),
    ] {
        if let Some(v) = v {
            o.insert(k.into(), json!(v));
        }
    }
    o.insert("fields".into(), fields_json(&t.fields));
    if !t.extras.is_empty() {
        o.insert("extras".into(), extras_json(&t.extras));
    }
    J::Object(o)
}

pub fn event_type_from(j: &J) -> Option<EventType> {
    let s = |k: &str| j.get(k).and_then(J::as_str).map(str::to_string);
    let mut t = EventType::new(
        u32::try_from(j.get("id")?.as_u64()?).ok()?,
        j.get("category")?.as_str()?,
        j.get("name")?.as_str()?,
        fields_at(j.get("fields")?, 0)?,
    );
    t.description = s("description");
    t.priority = s("priority");
    t.format = s("format");
    if let Some(x) = j.get("extras") {
        t.extras = extras_from(x)?;
    }
    Some(t)
}

// ------------------------------------------------------------ header

/// What the archive cannot say in its own label: the source's format,
/// version, time base, system description and extras. A header this module
/// restored gives back what it was restored from, so a rewrite is stable.
pub fn header_json(h: &Header) -> J {
    let x = &h.extras;
    let mut o = Map::new();
    o.insert(
        "source".into(),
        json!(x.str(SOURCE_KEY).unwrap_or(h.source.name())),
    );
    o.insert(
        "version".into(),
        json!(x.str(SOURCE_VERSION_KEY).unwrap_or(&h.version)),
    );
    o.insert(
        "time_base".into(),
        json!(x
            .str(TIME_BASE_KEY)
            .map(str::to_string)
            .unwrap_or_else(|| h.time_base.describe())),
    );
    if !h.system.is_empty() {
        o.insert(
            "system".into(),
            J::Array(h.system.iter().map(|(k, v)| json!([k, v])).collect()),
        );
    }
    // The archive's own facts (label, volumes) are the archive's to say.
    let own: Extras = x
        .iter()
        .filter(|(k, _)| !k.starts_with("pcp."))
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    if !own.is_empty() {
        o.insert("extras".into(), extras_json(&own));
    }
    J::Object(o)
}

/// Restore what [`header_json`] saved onto a PCP header. The stream stays a
/// PCP stream (its times are the archive's); the source's own extras and
/// system description come back beside the archive's `pcp.*` extras, and
/// the source's format, version and time base as `pcp.polytrace.*`.
pub fn apply_header(j: &J, h: &mut Header) -> Option<()> {
    if let Some(sys) = j.get("system") {
        h.system = sys
            .as_array()?
            .iter()
            .map(|p| Some((p.get(0)?.as_str()?.into(), p.get(1)?.as_str()?.into())))
            .collect::<Option<Vec<_>>>()?;
    }
    if let Some(x) = j.get("extras") {
        for (k, v) in extras_from(x)? {
            if !k.starts_with("pcp.") {
                h.extras.set(k, v);
            }
        }
    }
    for (key, x) in [
        ("source", SOURCE_KEY),
        ("version", SOURCE_VERSION_KEY),
        ("time_base", TIME_BASE_KEY),
    ] {
        if let Some(v) = j.get(key).and_then(J::as_str) {
            h.extras.set(x, ExtraValue::Str(v.to_string()));
        }
    }
    Some(())
}

/// Header extras of a restored stream: the format, version and time base
/// the events were converted from.
pub const SOURCE_KEY: &str = "pcp.polytrace.source";
pub const SOURCE_VERSION_KEY: &str = "pcp.polytrace.source_version";
pub const TIME_BASE_KEY: &str = "pcp.polytrace.time_base";

// ------------------------------------------------------------ values

/// A composite field value (array, sequence, struct, union) as JSON, by its
/// type: numbers as numbers, strings as strings, bytes as `{"b":"hex"}`.
pub fn value_json(v: &Value, t: &FieldType) -> J {
    match (v, t) {
        (Value::I64(x) | Value::Enum(x), _) => json!(x),
        (Value::U64(x), _) => json!(x),
        (Value::F32(x), _) => float_json(*x as f64),
        (Value::F64(x), _) => float_json(*x),
        (Value::Str(s), _) => json!(s),
        (Value::Bytes(b), _) => bytes_json(b),
        (Value::List(xs), FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. }) => {
            J::Array(xs.iter().map(|x| value_json(x, elem)).collect())
        }
        (Value::Struct(xs) | Value::Union(xs), FieldType::Struct(fs) | FieldType::Union(fs)) => {
            J::Array(
                xs.iter()
                    .enumerate()
                    .map(|(i, x)| match fs.get(i) {
                        Some(f) => value_json(x, &f.ty),
                        None => value_json(x, &FieldType::Bytes),
                    })
                    .collect(),
            )
        }
        // A value whose shape does not follow its type: kept by its own shape.
        (Value::List(xs) | Value::Struct(xs) | Value::Union(xs), _) => J::Array(
            xs.iter()
                .map(|x| value_json(x, &FieldType::Bytes))
                .collect(),
        ),
        (Value::Events(_), _) => J::Null,
    }
}

/// Read a value written by [`value_json`] back as its type says.
pub fn value_from(j: &J, t: &FieldType) -> Option<Value> {
    value_at(j, t, 0)
}

fn value_at(j: &J, t: &FieldType, depth: usize) -> Option<Value> {
    if depth > MAX_DEPTH {
        return None;
    }
    if j.is_object() {
        return bytes_from(j).map(Value::Bytes);
    }
    Some(match t {
        FieldType::Int(_) => Value::I64(j.as_i64()?),
        FieldType::Uint(_) => Value::U64(j.as_u64()?),
        FieldType::Enum { .. } => Value::Enum(j.as_i64()?),
        FieldType::Float(4) => Value::F32(float_from(j)? as f32),
        FieldType::Float(_) => Value::F64(float_from(j)?),
        FieldType::String | FieldType::Bytes => Value::Str(j.as_str()?.to_string()),
        FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. } => Value::List(
            j.as_array()?
                .iter()
                .map(|x| value_at(x, elem, depth + 1))
                .collect::<Option<_>>()?,
        ),
        FieldType::Struct(fs) | FieldType::Union(fs) => {
            let xs = j
                .as_array()?
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    value_at(x, fs.get(i).map_or(&FieldType::Bytes, |f| &f.ty), depth + 1)
                })
                .collect::<Option<Vec<_>>>()?;
            if matches!(t, FieldType::Struct(_)) {
                Value::Struct(xs)
            } else {
                Value::Union(xs)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_and_values_round_trip() {
        let t = FieldType::Struct(vec![
            Field::new("a", FieldType::Uint(1)),
            Field::new(
                "e",
                FieldType::Enum {
                    size: 4,
                    labels: vec![(0, "ZERO".into()), (7, "SEVEN".into())],
                },
            ),
            Field::new(
                "s",
                FieldType::Sequence {
                    len: Box::new(FieldType::Uint(2)),
                    elem: Box::new(FieldType::Float(4)),
                },
            ),
            Field::new(
                "u",
                FieldType::Union(vec![
                    Field::new("x", FieldType::Int(8)),
                    Field::new("y", FieldType::Bytes),
                ]),
            ),
            Field::new(
                "arr",
                FieldType::Array {
                    len: 2,
                    elem: Box::new(FieldType::String),
                },
            ),
        ]);
        let j = field_type_json(&t);
        assert_eq!(field_type_from(&j).as_ref(), Some(&t));
        let v = Value::Struct(vec![
            Value::U64(255),
            Value::Enum(7),
            Value::List(vec![Value::F32(0.1), Value::F32(f32::NAN)]),
            Value::Union(vec![Value::I64(i64::MIN), Value::Bytes(vec![0, 0xff])]),
            Value::List(vec![Value::Str("é\"x".into()), Value::Bytes(vec![0xc3])]),
        ]);
        let back = value_from(&value_json(&v, &t), &t).unwrap();
        // NaN != NaN: compare the text forms.
        assert_eq!(back.text(), v.text());
    }

    #[test]
    fn extras_round_trip() {
        let mut x = Extras::default();
        x.set("a.u", ExtraValue::U64(u64::MAX));
        x.set("a.i", ExtraValue::I64(-5));
        x.set("a.f", ExtraValue::F64(f64::NEG_INFINITY));
        x.set("a.s", ExtraValue::Str("{\"u\":1}".into()));
        x.set("a.b", ExtraValue::Bytes(vec![1, 2, 254]));
        x.set(
            "a.l",
            ExtraValue::List(vec![ExtraValue::Bool(true), ExtraValue::Str("x".into())]),
        );
        assert_eq!(extras_from(&extras_json(&x)), Some(x));
    }
}
