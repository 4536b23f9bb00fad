//! A JSON text form of the model, exact in both directions, for formats that
//! carry another format's stream as self-description (the LTT `polytrace`
//! facility, see `docs/ltt.md`). `decode(encode(x)) == x` for every item,
//! floats included (bit for bit, NaN payloads too); `docs/model.md` lists
//! the shapes.
//!
//! Numbers that must stay exact are written so that no JSON float parser
//! touches them: integers as JSON integers, floats as Rust's shortest
//! round-trip text inside a string (`{"f8":"0.1"}`), NaN by its bits.

use super::*;
use serde_json::{Map, Value as J};

type R<T> = std::result::Result<T, String>;

fn obj(pairs: Vec<(&str, J)>) -> J {
    let mut m = Map::new();
    for (k, v) in pairs {
        m.insert(k.to_string(), v);
    }
    J::Object(m)
}

fn get<'a>(j: &'a J, k: &str) -> Option<&'a J> {
    j.as_object().and_then(|m| m.get(k))
}

fn need<'a>(j: &'a J, k: &str) -> R<&'a J> {
    get(j, k).ok_or_else(|| format!("missing \"{k}\""))
}

fn as_i64(j: &J, what: &str) -> R<i64> {
    j.as_i64().ok_or_else(|| format!("{what}: want an integer"))
}

fn as_u64(j: &J, what: &str) -> R<u64> {
    j.as_u64()
        .ok_or_else(|| format!("{what}: want an unsigned integer"))
}

fn as_u32(j: &J, what: &str) -> R<u32> {
    u32::try_from(as_u64(j, what)?).map_err(|_| format!("{what}: out of range"))
}

fn as_i32(j: &J, what: &str) -> R<i32> {
    i32::try_from(as_i64(j, what)?).map_err(|_| format!("{what}: out of range"))
}

fn as_str<'a>(j: &'a J, what: &str) -> R<&'a str> {
    j.as_str().ok_or_else(|| format!("{what}: want a string"))
}

fn as_arr<'a>(j: &'a J, what: &str) -> R<&'a Vec<J>> {
    j.as_array().ok_or_else(|| format!("{what}: want a list"))
}

fn opt_str(j: &J, k: &str) -> R<Option<String>> {
    get(j, k)
        .map(|v| as_str(v, k).map(str::to_string))
        .transpose()
}

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push(char::from_digit((x >> 4) as u32, 16).unwrap_or('0'));
        s.push(char::from_digit((x & 15) as u32, 16).unwrap_or('0'));
    }
    s
}

fn unhex(s: &str) -> R<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return Err("odd hex length".into());
    }
    s.as_bytes()
        .chunks(2)
        .map(|p| {
            let d = |c: u8| (c as char).to_digit(16).ok_or("bad hex digit");
            Ok((d(p[0])? * 16 + d(p[1])?) as u8)
        })
        .collect()
}

/// A float's text and back: `{x:?}`, a NaN as `nan:0xBITS` (payload kept).
macro_rules! float_text {
    ($text:ident, $parse:ident, $f:ty, $bits:ty) => {
        fn $text(x: $f) -> String {
            if x.is_nan() {
                format!("nan:{:#x}", x.to_bits())
            } else {
                format!("{x:?}")
            }
        }

        fn $parse(s: &str) -> R<$f> {
            if let Some(b) = s.strip_prefix("nan:0x") {
                return <$bits>::from_str_radix(b, 16)
                    .map(<$f>::from_bits)
                    .map_err(|_| format!("bad NaN {s:?}"));
            }
            s.parse().map_err(|_| format!("bad float {s:?}"))
        }
    };
}

float_text!(f64_text, f64_parse, f64, u64);
float_text!(f32_text, f32_parse, f32, u32);

// ------------------------------------------------------------ extras

/// U64 as a plain integer, a negative I64 as a plain integer, any other I64
/// as `{"i":n}`, F64 as `{"f":"text"}`, bytes as `{"b":"hex"}`.
pub fn extra_to_json(v: &ExtraValue) -> J {
    match v {
        ExtraValue::U64(x) => J::from(*x),
        ExtraValue::I64(x) if *x < 0 => J::from(*x),
        ExtraValue::I64(x) => obj(vec![("i", J::from(*x))]),
        ExtraValue::F64(x) => obj(vec![("f", J::from(f64_text(*x)))]),
        ExtraValue::Bool(b) => J::Bool(*b),
        ExtraValue::Str(s) => J::from(s.as_str()),
        ExtraValue::Bytes(b) => obj(vec![("b", J::from(hex(b)))]),
        ExtraValue::List(l) => J::Array(l.iter().map(extra_to_json).collect()),
    }
}

pub fn extra_from_json(j: &J) -> R<ExtraValue> {
    Ok(match j {
        J::Number(n) => {
            if let Some(u) = n.as_u64() {
                ExtraValue::U64(u)
            } else if let Some(i) = n.as_i64() {
                ExtraValue::I64(i)
            } else {
                return Err("extra: plain float (want {\"f\":\"text\"})".into());
            }
        }
        J::Bool(b) => ExtraValue::Bool(*b),
        J::String(s) => ExtraValue::Str(s.clone()),
        J::Array(a) => ExtraValue::List(a.iter().map(extra_from_json).collect::<R<_>>()?),
        J::Object(m) if m.len() == 1 => {
            let (k, v) = m.iter().next().ok_or("extra: empty object")?;
            match k.as_str() {
                "i" => ExtraValue::I64(as_i64(v, "extra i")?),
                "f" => ExtraValue::F64(f64_parse(as_str(v, "extra f")?)?),
                "b" => ExtraValue::Bytes(unhex(as_str(v, "extra b")?)?),
                _ => return Err(format!("extra: unknown tag {k:?}")),
            }
        }
        _ => return Err("extra: unexpected JSON value".into()),
    })
}

pub fn extras_to_json(x: &Extras) -> J {
    J::Object(
        x.iter()
            .map(|(k, v)| (k.to_string(), extra_to_json(v)))
            .collect(),
    )
}

pub fn extras_from_json(j: &J) -> R<Extras> {
    let m = j.as_object().ok_or("extras: want an object")?;
    let mut x = Extras::default();
    for (k, v) in m {
        x.set(k.clone(), extra_from_json(v)?);
    }
    Ok(x)
}

/// Put `"x": extras` into `pairs` unless empty.
fn push_extras(pairs: &mut Vec<(&str, J)>, x: &Extras) {
    if !x.is_empty() {
        pairs.push(("x", extras_to_json(x)));
    }
}

fn extras_of(j: &J) -> R<Extras> {
    get(j, "x").map_or(Ok(Extras::default()), extras_from_json)
}

// ------------------------------------------------------------ values

pub fn value_to_json(v: &Value) -> J {
    match v {
        Value::I64(x) => obj(vec![("i", J::from(*x))]),
        Value::U64(x) => obj(vec![("u", J::from(*x))]),
        Value::F32(x) => obj(vec![("f4", J::from(f32_text(*x)))]),
        Value::F64(x) => obj(vec![("f8", J::from(f64_text(*x)))]),
        Value::Str(s) => obj(vec![("s", J::from(s.as_str()))]),
        Value::Bytes(b) => obj(vec![("b", J::from(hex(b)))]),
        Value::Enum(x) => obj(vec![("e", J::from(*x))]),
        Value::List(l) => obj(vec![("l", values_to_json(l))]),
        Value::Struct(l) => obj(vec![("st", values_to_json(l))]),
        Value::Union(l) => obj(vec![("un", values_to_json(l))]),
        Value::Events(recs) => obj(vec![(
            "ev",
            J::Array(
                recs.iter()
                    .map(|r| {
                        obj(vec![
                            ("t", J::from(r.time.0)),
                            ("fl", J::from(r.flags)),
                            (
                                "p",
                                J::Array(
                                    r.params
                                        .iter()
                                        .map(|p| {
                                            J::Array(vec![
                                                J::from(p.metric),
                                                value_to_json(&p.value),
                                            ])
                                        })
                                        .collect(),
                                ),
                            ),
                        ])
                    })
                    .collect(),
            ),
        )]),
    }
}

pub fn values_to_json(l: &[Value]) -> J {
    J::Array(l.iter().map(value_to_json).collect())
}

pub fn values_from_json(j: &J) -> R<Vec<Value>> {
    as_arr(j, "values")?.iter().map(value_from_json).collect()
}

pub fn value_from_json(j: &J) -> R<Value> {
    let m = j.as_object().ok_or("value: want an object")?;
    let (k, v) = match (m.len(), m.iter().next()) {
        (1, Some(kv)) => kv,
        _ => return Err("value: want one tag".into()),
    };
    Ok(match k.as_str() {
        "i" => Value::I64(as_i64(v, "i")?),
        "u" => Value::U64(as_u64(v, "u")?),
        "f4" => Value::F32(f32_parse(as_str(v, "f4")?)?),
        "f8" => Value::F64(f64_parse(as_str(v, "f8")?)?),
        "s" => Value::Str(as_str(v, "s")?.to_string()),
        "b" => Value::Bytes(unhex(as_str(v, "b")?)?),
        "e" => Value::Enum(as_i64(v, "e")?),
        "l" => Value::List(values_from_json(v)?),
        "st" => Value::Struct(values_from_json(v)?),
        "un" => Value::Union(values_from_json(v)?),
        "ev" => Value::Events(
            as_arr(v, "ev")?
                .iter()
                .map(|r| {
                    Ok(EventRecord {
                        time: Timestamp(as_i64(need(r, "t")?, "t")?),
                        flags: as_u32(need(r, "fl")?, "fl")?,
                        params: as_arr(need(r, "p")?, "p")?
                            .iter()
                            .map(|p| {
                                let p = as_arr(p, "param")?;
                                match p.as_slice() {
                                    [m, v] => Ok(EventParam {
                                        metric: as_u32(m, "param metric")?,
                                        value: value_from_json(v)?,
                                    }),
                                    _ => Err("param: want [metric, value]".to_string()),
                                }
                            })
                            .collect::<R<_>>()?,
                    })
                })
                .collect::<R<_>>()?,
        ),
        k => return Err(format!("value: unknown tag {k:?}")),
    })
}

/// Equality with floats compared bit for bit (NaN equals itself).
pub fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::F32(x), Value::F32(y)) => x.to_bits() == y.to_bits(),
        (Value::F64(x), Value::F64(y)) => x.to_bits() == y.to_bits(),
        (Value::List(x), Value::List(y))
        | (Value::Struct(x), Value::Struct(y))
        | (Value::Union(x), Value::Union(y)) => same_values(x, y),
        (Value::Events(x), Value::Events(y)) => {
            x.len() == y.len()
                && x.iter().zip(y).all(|(r, s)| {
                    r.time == s.time
                        && r.flags == s.flags
                        && r.params.len() == s.params.len()
                        && r.params
                            .iter()
                            .zip(&s.params)
                            .all(|(p, q)| p.metric == q.metric && same_value(&p.value, &q.value))
                })
        }
        _ => a == b,
    }
}

pub fn same_values(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_value(x, y))
}

// ------------------------------------------------------------ types

pub fn field_type_to_json(t: &FieldType) -> J {
    match t {
        FieldType::Int(n) => obj(vec![("int", J::from(*n))]),
        FieldType::Uint(n) => obj(vec![("uint", J::from(*n))]),
        FieldType::Float(n) => obj(vec![("float", J::from(*n))]),
        FieldType::String => J::from("string"),
        FieldType::Bytes => J::from("bytes"),
        FieldType::Enum { size, labels } => obj(vec![
            ("enum", J::from(*size)),
            (
                "labels",
                J::Array(
                    labels
                        .iter()
                        .map(|(v, l)| J::Array(vec![J::from(*v), J::from(l.as_str())]))
                        .collect(),
                ),
            ),
        ]),
        FieldType::Array { len, elem } => obj(vec![
            ("array", J::from(*len)),
            ("of", field_type_to_json(elem)),
        ]),
        FieldType::Sequence { len, elem } => obj(vec![
            ("seq", field_type_to_json(len)),
            ("of", field_type_to_json(elem)),
        ]),
        FieldType::Struct(f) => obj(vec![("struct", fields_to_json(f))]),
        FieldType::Union(f) => obj(vec![("union", fields_to_json(f))]),
    }
}

fn small(j: &J, what: &str) -> R<u8> {
    u8::try_from(as_u64(j, what)?).map_err(|_| format!("{what}: out of range"))
}

/// Type trees nest; a hostile text must not exhaust the stack.
const MAX_TYPE_DEPTH: usize = 64;

pub fn field_type_from_json(j: &J) -> R<FieldType> {
    field_type_in(j, 0)
}

fn field_type_in(j: &J, depth: usize) -> R<FieldType> {
    if depth > MAX_TYPE_DEPTH {
        return Err("field type nested too deeply".into());
    }
    if let Some(s) = j.as_str() {
        return match s {
            "string" => Ok(FieldType::String),
            "bytes" => Ok(FieldType::Bytes),
            _ => Err(format!("field type {s:?}")),
        };
    }
    let d = depth + 1;
    if let Some(n) = get(j, "int") {
        return Ok(FieldType::Int(small(n, "int")?));
    }
    if let Some(n) = get(j, "uint") {
        return Ok(FieldType::Uint(small(n, "uint")?));
    }
    if let Some(n) = get(j, "float") {
        return Ok(FieldType::Float(small(n, "float")?));
    }
    if let Some(n) = get(j, "enum") {
        let labels = as_arr(need(j, "labels")?, "labels")?
            .iter()
            .map(|p| match as_arr(p, "label")?.as_slice() {
                [v, l] => Ok((as_i64(v, "label value")?, as_str(l, "label")?.to_string())),
                _ => Err("label: want [value, name]".to_string()),
            })
            .collect::<R<_>>()?;
        return Ok(FieldType::Enum {
            size: small(n, "enum")?,
            labels,
        });
    }
    if let Some(n) = get(j, "array") {
        return Ok(FieldType::Array {
            len: as_u32(n, "array")?,
            elem: Box::new(field_type_in(need(j, "of")?, d)?),
        });
    }
    if let Some(n) = get(j, "seq") {
        return Ok(FieldType::Sequence {
            len: Box::new(field_type_in(n, d)?),
            elem: Box::new(field_type_in(need(j, "of")?, d)?),
        });
    }
    if let Some(f) = get(j, "struct") {
        return Ok(FieldType::Struct(fields_in(f, d)?));
    }
    if let Some(f) = get(j, "union") {
        return Ok(FieldType::Union(fields_in(f, d)?));
    }
    Err("unknown field type".into())
}

pub fn fields_to_json(f: &[Field]) -> J {
    J::Array(
        f.iter()
            .map(|f| {
                let mut p = vec![
                    ("name", J::from(f.name.as_str())),
                    ("type", field_type_to_json(&f.ty)),
                ];
                if let Some(d) = &f.description {
                    p.push(("desc", J::from(d.as_str())));
                }
                obj(p)
            })
            .collect(),
    )
}

pub fn fields_from_json(j: &J) -> R<Vec<Field>> {
    fields_in(j, 0)
}

fn fields_in(j: &J, depth: usize) -> R<Vec<Field>> {
    as_arr(j, "fields")?
        .iter()
        .map(|f| {
            Ok(Field {
                name: as_str(need(f, "name")?, "name")?.to_string(),
                ty: field_type_in(need(f, "type")?, depth)?,
                description: opt_str(f, "desc")?,
            })
        })
        .collect()
}

pub fn event_type_to_json(t: &EventType) -> J {
    let mut p = vec![
        ("id", J::from(t.id)),
        ("name", J::from(t.name.as_str())),
        ("cat", J::from(t.category.as_str())),
    ];
    if let Some(d) = &t.description {
        p.push(("desc", J::from(d.as_str())));
    }
    if let Some(d) = &t.priority {
        p.push(("prio", J::from(d.as_str())));
    }
    if let Some(d) = &t.format {
        p.push(("fmt", J::from(d.as_str())));
    }
    p.push(("fields", fields_to_json(&t.fields)));
    if t.framing {
        p.push(("framing", J::Bool(true)));
    }
    push_extras(&mut p, &t.extras);
    obj(p)
}

pub fn event_type_from_json(j: &J) -> R<EventType> {
    Ok(EventType {
        id: as_u32(need(j, "id")?, "id")?,
        name: as_str(need(j, "name")?, "name")?.to_string(),
        category: as_str(need(j, "cat")?, "cat")?.to_string(),
        description: opt_str(j, "desc")?,
        priority: opt_str(j, "prio")?,
        format: opt_str(j, "fmt")?,
        fields: fields_from_json(need(j, "fields")?)?,
        framing: get(j, "framing").and_then(J::as_bool).unwrap_or(false),
        extras: extras_of(j)?,
    })
}

fn units_to_json(u: &Units) -> J {
    J::Array(vec![
        J::from(u.dim_space),
        J::from(u.dim_time),
        J::from(u.dim_count),
        J::from(u.scale_space),
        J::from(u.scale_time),
        J::from(u.scale_count),
        J::from(u.pad),
    ])
}

fn units_from_json(j: &J) -> R<Units> {
    let a = as_arr(j, "units")?;
    if a.len() != 7 {
        return Err("units: want 7 numbers".into());
    }
    let i8_ = |k: usize| -> R<i8> {
        i8::try_from(as_i64(&a[k], "units")?).map_err(|_| "units: out of range".to_string())
    };
    let u8_ = |k: usize| small(&a[k], "units");
    Ok(Units {
        dim_space: i8_(0)?,
        dim_time: i8_(1)?,
        dim_count: i8_(2)?,
        scale_space: u8_(3)?,
        scale_time: u8_(4)?,
        scale_count: i8_(5)?,
        pad: u8_(6)?,
    })
}

pub fn metric_to_json(m: &MetricDesc) -> J {
    let mut p = vec![
        ("id", J::from(m.id)),
        (
            "names",
            J::Array(m.names.iter().map(|n| J::from(n.as_str())).collect()),
        ),
        ("type", J::from(m.vtype.pcp_code())),
        ("sem", J::from(m.sem.pcp_code())),
        ("units", units_to_json(&m.units)),
    ];
    if let Some(i) = m.indom {
        p.push(("indom", J::from(i)));
    }
    if let Some(h) = &m.help_short {
        p.push(("help", J::from(h.as_str())));
    }
    if let Some(h) = &m.help_long {
        p.push(("helpl", J::from(h.as_str())));
    }
    push_extras(&mut p, &m.extras);
    obj(p)
}

pub fn metric_from_json(j: &J) -> R<MetricDesc> {
    Ok(MetricDesc {
        id: as_u32(need(j, "id")?, "id")?,
        names: as_arr(need(j, "names")?, "names")?
            .iter()
            .map(|n| as_str(n, "name").map(str::to_string))
            .collect::<R<_>>()?,
        vtype: ValueType::from_pcp_code(as_i32(need(j, "type")?, "type")?),
        sem: Semantics::from_pcp_code(as_u32(need(j, "sem")?, "sem")?),
        units: units_from_json(need(j, "units")?)?,
        indom: get(j, "indom").map(|v| as_u32(v, "indom")).transpose()?,
        help_short: opt_str(j, "help")?,
        help_long: opt_str(j, "helpl")?,
        extras: extras_of(j)?,
    })
}

fn instances_to_json(l: &[Instance]) -> J {
    J::Array(
        l.iter()
            .map(|i| J::Array(vec![J::from(i.id), J::from(i.name.as_str())]))
            .collect(),
    )
}

fn instances_from_json(j: &J) -> R<Vec<Instance>> {
    as_arr(j, "instances")?
        .iter()
        .map(|p| match as_arr(p, "instance")?.as_slice() {
            [id, name] => Ok(Instance {
                id: as_i32(id, "instance id")?,
                name: as_str(name, "instance name")?.to_string(),
            }),
            _ => Err("instance: want [id, name]".to_string()),
        })
        .collect()
}

/// An indom update; `with_members = false` leaves the instances out (a
/// carrier that lists them apart).
pub fn indom_to_json(u: &IndomUpdate, with_members: bool) -> J {
    let mut p = vec![
        ("t", J::from(u.time.0)),
        ("id", J::from(u.id)),
        (
            "kind",
            J::from(match u.kind {
                IndomKind::Full => "full",
                IndomKind::Delta => "delta",
            }),
        ),
    ];
    if with_members {
        p.push(("inst", instances_to_json(&u.instances)));
        p.push((
            "rm",
            J::Array(u.removed.iter().map(|&r| J::from(r)).collect()),
        ));
    }
    push_extras(&mut p, &u.extras);
    obj(p)
}

pub fn indom_from_json(j: &J) -> R<IndomUpdate> {
    Ok(IndomUpdate {
        time: Timestamp(as_i64(need(j, "t")?, "t")?),
        id: as_u32(need(j, "id")?, "id")?,
        kind: match as_str(need(j, "kind")?, "kind")? {
            "full" => IndomKind::Full,
            "delta" => IndomKind::Delta,
            k => return Err(format!("indom kind {k:?}")),
        },
        instances: get(j, "inst").map_or(Ok(Vec::new()), instances_from_json)?,
        removed: get(j, "rm").map_or(Ok(Vec::new()), |r| {
            as_arr(r, "rm")?
                .iter()
                .map(|x| as_i32(x, "removed"))
                .collect()
        })?,
        extras: extras_of(j)?,
    })
}

pub fn help_to_json(h: &Help) -> J {
    let target = match h.target {
        HelpTarget::Metric(m) => J::Array(vec![J::from("metric"), J::from(m)]),
        HelpTarget::Indom(i) => J::Array(vec![J::from("indom"), J::from(i)]),
    };
    obj(vec![
        ("target", target),
        ("oneline", J::Bool(h.oneline)),
        ("text", J::from(h.text.as_str())),
    ])
}

pub fn help_from_json(j: &J) -> R<Help> {
    let t = as_arr(need(j, "target")?, "target")?;
    let target = match t.as_slice() {
        [k, id] => match as_str(k, "target")? {
            "metric" => HelpTarget::Metric(as_u32(id, "target")?),
            "indom" => HelpTarget::Indom(as_u32(id, "target")?),
            k => return Err(format!("help target {k:?}")),
        },
        _ => return Err("help target: want [kind, id]".into()),
    };
    Ok(Help {
        target,
        oneline: need(j, "oneline")?
            .as_bool()
            .ok_or("oneline: want a bool")?,
        text: as_str(need(j, "text")?, "text")?.to_string(),
    })
}

pub fn labels_to_json(l: &LabelSet) -> J {
    let target = match l.target {
        LabelTarget::Context => J::Array(vec![J::from("context")]),
        LabelTarget::Domain(d) => J::Array(vec![J::from("domain"), J::from(d)]),
        LabelTarget::Cluster(c) => J::Array(vec![J::from("cluster"), J::from(c)]),
        LabelTarget::Item(m) => J::Array(vec![J::from("item"), J::from(m)]),
        LabelTarget::Indom(i) => J::Array(vec![J::from("indom"), J::from(i)]),
        LabelTarget::Instances(i) => J::Array(vec![J::from("instances"), J::from(i)]),
    };
    let mut p = Vec::new();
    if let Some(t) = l.time {
        p.push(("t", J::from(t.0)));
    }
    p.push(("target", target));
    p.push(("inst", J::from(l.inst)));
    p.push(("json", J::from(l.json.as_str())));
    p.push((
        "labels",
        J::Array(
            l.labels
                .iter()
                .map(|x| {
                    J::Array(vec![
                        J::from(x.name.as_str()),
                        J::from(x.value.as_str()),
                        J::from(x.flags),
                    ])
                })
                .collect(),
        ),
    ));
    obj(p)
}

pub fn labels_from_json(j: &J) -> R<LabelSet> {
    let t = as_arr(need(j, "target")?, "target")?;
    let id = |k: usize| -> R<u32> { as_u32(t.get(k).ok_or("label target: missing id")?, "id") };
    let target = match as_str(t.first().ok_or("label target: empty")?, "target")? {
        "context" => LabelTarget::Context,
        "domain" => LabelTarget::Domain(id(1)?),
        "cluster" => LabelTarget::Cluster(id(1)?),
        "item" => LabelTarget::Item(id(1)?),
        "indom" => LabelTarget::Indom(id(1)?),
        "instances" => LabelTarget::Instances(id(1)?),
        k => return Err(format!("label target {k:?}")),
    };
    Ok(LabelSet {
        time: get(j, "t")
            .map(|v| as_i64(v, "t").map(Timestamp))
            .transpose()?,
        target,
        inst: as_i32(need(j, "inst")?, "inst")?,
        json: as_str(need(j, "json")?, "json")?.to_string(),
        labels: as_arr(need(j, "labels")?, "labels")?
            .iter()
            .map(|x| match as_arr(x, "label")?.as_slice() {
                [n, v, f] => Ok(Label {
                    name: as_str(n, "label name")?.to_string(),
                    value: as_str(v, "label value")?.to_string(),
                    flags: as_u32(f, "label flags")?,
                }),
                _ => Err("label: want [name, value, flags]".to_string()),
            })
            .collect::<R<_>>()?,
    })
}

// ------------------------------------------------------------ header

pub fn time_base_to_json(tb: &TimeBase) -> J {
    match tb {
        TimeBase::Absolute => J::from("absolute"),
        TimeBase::Relative { origin } => obj(vec![("relative", J::from(origin.as_str()))]),
        TimeBase::Cycles { hz, anchor } => {
            let mut p = Vec::new();
            if let Some(h) = hz {
                p.push(("hz", J::from(f64_text(*h))));
            }
            if let Some(a) = anchor {
                p.push(("anchor", J::from(a.0)));
            }
            obj(vec![("cycles", obj(p))])
        }
    }
}

pub fn time_base_from_json(j: &J) -> R<TimeBase> {
    if j.as_str() == Some("absolute") {
        return Ok(TimeBase::Absolute);
    }
    if let Some(o) = get(j, "relative") {
        return Ok(TimeBase::Relative {
            origin: as_str(o, "relative")?.to_string(),
        });
    }
    if let Some(c) = get(j, "cycles") {
        return Ok(TimeBase::Cycles {
            hz: get(c, "hz")
                .map(|h| f64_parse(as_str(h, "hz")?))
                .transpose()?,
            anchor: get(c, "anchor")
                .map(|a| as_i64(a, "anchor").map(Timestamp))
                .transpose()?,
        });
    }
    Err("unknown time base".into())
}

pub fn header_to_json(h: &Header) -> J {
    let mut p = vec![
        ("source", J::from(h.source.name())),
        ("version", J::from(h.version.as_str())),
    ];
    if let Some(x) = &h.host {
        p.push(("host", J::from(x.as_str())));
    }
    if let Some(x) = &h.timezone {
        p.push(("tz", J::from(x.as_str())));
    }
    p.push((
        "system",
        J::Array(
            h.system
                .iter()
                .map(|(k, v)| J::Array(vec![J::from(k.as_str()), J::from(v.as_str())]))
                .collect(),
        ),
    ));
    p.push(("tb", time_base_to_json(&h.time_base)));
    if let Some(s) = h.start {
        p.push(("start", J::from(s.0)));
    }
    push_extras(&mut p, &h.extras);
    obj(p)
}

pub fn header_from_json(j: &J) -> R<Header> {
    let src = as_str(need(j, "source")?, "source")?;
    let source = FormatId::from_name(src).ok_or_else(|| format!("unknown source {src:?}"))?;
    let mut h = Header::new(source, as_str(need(j, "version")?, "version")?);
    h.host = opt_str(j, "host")?;
    h.timezone = opt_str(j, "tz")?;
    h.system = as_arr(need(j, "system")?, "system")?
        .iter()
        .map(|p| match as_arr(p, "system")?.as_slice() {
            [k, v] => Ok((
                as_str(k, "key")?.to_string(),
                as_str(v, "value")?.to_string(),
            )),
            _ => Err("system: want [key, value]".to_string()),
        })
        .collect::<R<_>>()?;
    h.time_base = time_base_from_json(need(j, "tb")?)?;
    h.start = get(j, "start")
        .map(|v| as_i64(v, "start").map(Timestamp))
        .transpose()?;
    h.extras = extras_of(j)?;
    Ok(h)
}

// ------------------------------------------------------------ items

fn sample_metrics_to_json(s: &Sample) -> J {
    J::Array(
        s.metrics
            .iter()
            .map(|mv| {
                let v = match &mv.values {
                    Ok(vals) => J::Array(
                        vals.iter()
                            .map(|(i, v)| J::Array(vec![J::from(*i), value_to_json(v)]))
                            .collect(),
                    ),
                    Err(code) => obj(vec![("err", J::from(*code))]),
                };
                J::Array(vec![J::from(mv.metric), v])
            })
            .collect(),
    )
}

fn sample_metrics_from_json(j: &J) -> R<Vec<MetricValues>> {
    as_arr(j, "metrics")?
        .iter()
        .map(|p| match as_arr(p, "metric values")?.as_slice() {
            [m, v] => Ok(MetricValues {
                metric: as_u32(m, "metric")?,
                values: match get(v, "err") {
                    Some(c) => Err(as_i32(c, "err")?),
                    None => Ok(as_arr(v, "values")?
                        .iter()
                        .map(|iv| match as_arr(iv, "value")?.as_slice() {
                            [i, v] => Ok((as_i32(i, "instance")?, value_from_json(v)?)),
                            _ => Err("value: want [instance, value]".to_string()),
                        })
                        .collect::<R<_>>()?),
                },
            }),
            _ => Err("metric values: want [metric, values]".to_string()),
        })
        .collect()
}

fn opt_raw(p: &mut Vec<(&str, J)>, raw: Option<u64>) {
    if let Some(r) = raw {
        p.push(("raw", J::from(r)));
    }
}

fn raw_of(j: &J) -> R<Option<u64>> {
    get(j, "raw").map(|v| as_u64(v, "raw")).transpose()
}

/// An event's members, `f` its field values; a run's add its width
/// (`"w"`), its values being every event's in turn.
fn event_parts(e: &Event, width: Option<u32>, f: J) -> Vec<(&'static str, J)> {
    let mut p = vec![("t", J::from(e.time.0))];
    opt_raw(&mut p, e.raw_clock);
    p.push(("type", J::from(e.type_id)));
    if let Some(c) = e.cpu {
        p.push(("cpu", J::from(c)));
    }
    if let Some(s) = &e.stream {
        p.push(("stream", J::from(s.as_str())));
    }
    if let Some(w) = width {
        p.push(("w", J::from(w)));
    }
    p.push(("f", f));
    push_extras(&mut p, &e.extras);
    p
}

/// Any item, tagged by `"k"`.
pub fn item_to_json(item: &Item) -> J {
    let (k, mut j) = match item {
        Item::EventType(t) => ("type", event_type_to_json(t)),
        Item::Metric(m) => ("metric", metric_to_json(m)),
        Item::Indom(u) => ("indom", indom_to_json(u, true)),
        Item::Help(h) => ("help", help_to_json(h)),
        Item::Labels(l) => ("labels", labels_to_json(l)),
        Item::Event(e) => (
            "event",
            obj(event_parts(e, None, values_to_json(&e.fields))),
        ),
        Item::EventRun(r) => {
            let values: Vec<Value> = r.cells.iter().map(Cell::to_value).collect();
            let f = values_to_json(&values);
            ("run", obj(event_parts(&r.event, Some(r.width), f)))
        }
        Item::Sample(s) => {
            let mut p = vec![("t", J::from(s.time.0))];
            opt_raw(&mut p, s.raw_clock);
            p.push(("m", sample_metrics_to_json(s)));
            push_extras(&mut p, &s.extras);
            ("sample", obj(p))
        }
        Item::Mark(m) => {
            let mut p = vec![("t", J::from(m.time.0))];
            push_extras(&mut p, &m.extras);
            ("mark", obj(p))
        }
        Item::Annotation(a) => {
            let mut p = vec![("t", J::from(a.time.0))];
            opt_raw(&mut p, a.raw_clock);
            p.push(("text", J::from(a.text.as_str())));
            push_extras(&mut p, &a.extras);
            ("note", obj(p))
        }
    };
    if let J::Object(m) = &mut j {
        m.insert("k".into(), J::from(k));
    }
    j
}

fn event_from_json(j: &J) -> R<Event> {
    Ok(Event {
        time: Timestamp(as_i64(need(j, "t")?, "t")?),
        raw_clock: raw_of(j)?,
        type_id: as_u32(need(j, "type")?, "type")?,
        cpu: get(j, "cpu").map(|c| as_u32(c, "cpu")).transpose()?,
        stream: opt_str(j, "stream")?,
        fields: values_from_json(need(j, "f")?)?,
        extras: extras_of(j)?,
    })
}

pub fn item_from_json(j: &J) -> R<Item> {
    let t = |j: &J| -> R<Timestamp> { Ok(Timestamp(as_i64(need(j, "t")?, "t")?)) };
    Ok(match as_str(need(j, "k")?, "k")? {
        "type" => Item::EventType(Arc::new(event_type_from_json(j)?)),
        "metric" => Item::Metric(Arc::new(metric_from_json(j)?)),
        "indom" => Item::Indom(indom_from_json(j)?),
        "help" => Item::Help(help_from_json(j)?),
        "labels" => Item::Labels(labels_from_json(j)?),
        "event" => Item::Event(event_from_json(j)?),
        "run" => {
            let mut event = event_from_json(j)?;
            let width = as_u32(need(j, "w")?, "w")?;
            if width == 0 || event.fields.len() % width as usize != 0 {
                return Err(format!(
                    "a run of {} values in events of {width}",
                    event.fields.len()
                ));
            }
            let mut cells = Cells::default();
            for v in event.fields.drain(..) {
                if !cells.push_value(&v) {
                    return Err(
                        "a run's value is nested (lists, structs): runs hold scalars and text"
                            .into(),
                    );
                }
            }
            Item::EventRun(Box::new(EventRun {
                event,
                width,
                cells,
            }))
        }
        "sample" => Item::Sample(Sample {
            time: t(j)?,
            raw_clock: raw_of(j)?,
            metrics: sample_metrics_from_json(need(j, "m")?)?,
            extras: extras_of(j)?,
        }),
        "mark" => Item::Mark(Mark {
            time: t(j)?,
            extras: extras_of(j)?,
        }),
        "note" => Item::Annotation(Annotation {
            time: t(j)?,
            raw_clock: raw_of(j)?,
            text: as_str(need(j, "text")?, "text")?.to_string(),
            extras: extras_of(j)?,
        }),
        k => return Err(format!("unknown item kind {k:?}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(item: Item) {
        let text = item_to_json(&item).to_string();
        let back = item_from_json(&serde_json::from_str(&text).unwrap()).unwrap();
        let again = item_to_json(&back).to_string();
        assert_eq!(text, again);
    }

    #[test]
    fn floats_are_exact_and_nan_keeps_its_bits() {
        for x in [
            0.1f64,
            -0.0,
            f64::MIN_POSITIVE,
            5e-324,
            1.7976931348623157e308,
            f64::INFINITY,
            f64::from_bits(0x7ff8_0000_dead_beef),
        ] {
            let j = value_to_json(&Value::F64(x));
            let Value::F64(y) = value_from_json(&j).unwrap() else {
                panic!()
            };
            assert_eq!(x.to_bits(), y.to_bits(), "{x:?}");
        }
        let j = value_to_json(&Value::F32(f32::from_bits(0x7fc0_1234)));
        let Value::F32(y) = value_from_json(&j).unwrap() else {
            panic!()
        };
        assert_eq!(y.to_bits(), 0x7fc0_1234);
        assert!(same_value(&Value::F64(f64::NAN), &Value::F64(f64::NAN)));
        assert!(!same_value(&Value::F64(0.0), &Value::F64(-0.0)));
    }

    #[test]
    fn extras_keep_their_types() {
        let mut x = Extras::default();
        x.set("a", ExtraValue::U64(u64::MAX));
        x.set("b", ExtraValue::I64(5));
        x.set("c", ExtraValue::I64(-5));
        x.set("d", ExtraValue::F64(1.0));
        x.set("e", ExtraValue::Bytes(vec![0, 255, 16]));
        x.set(
            "f",
            ExtraValue::List(vec![ExtraValue::Str("s".into()), ExtraValue::Bool(true)]),
        );
        let back = extras_from_json(&extras_to_json(&x)).unwrap();
        assert_eq!(x, back);
    }

    #[test]
    fn every_item_kind_round_trips() {
        let mut et = EventType::new(
            7,
            "kpi",
            "NEW",
            vec![
                Field::new("pid", FieldType::Uint(4)),
                Field::new(
                    "e",
                    FieldType::Enum {
                        size: 1,
                        labels: vec![(1, "A".into())],
                    },
                ),
                Field::new(
                    "s",
                    FieldType::Sequence {
                        len: Box::new(FieldType::Uint(2)),
                        elem: Box::new(FieldType::Struct(vec![Field::new("x", FieldType::Bytes)])),
                    },
                ),
            ],
        );
        et.format = Some("E: $pid".into());
        et.priority = Some("error".into());
        et.framing = true;
        rt(Item::EventType(Arc::new(et)));
        let mut m = MetricDesc::new(
            pmid(60, 0, 20),
            "kernel.all.cpu.user",
            ValueType::U64,
            Semantics::Counter,
            Units::time(2),
        );
        m.names.push("alias".into());
        m.indom = Some(5);
        m.help_long = Some("long\n\"text\"".into());
        rt(Item::Metric(Arc::new(m)));
        rt(Item::Indom(IndomUpdate {
            time: Timestamp(-3),
            id: 9,
            kind: IndomKind::Delta,
            instances: vec![Instance {
                id: -1,
                name: "ünï".into(),
            }],
            removed: vec![4, 5],
            extras: Extras::default(),
        }));
        rt(Item::Labels(LabelSet {
            time: None,
            target: LabelTarget::Instances(3),
            inst: 2,
            json: "{\"a\":1}".into(),
            labels: vec![Label {
                name: "a".into(),
                value: "1".into(),
                flags: 8,
            }],
        }));
        rt(Item::Sample(Sample {
            time: Timestamp(1795319114676543893),
            raw_clock: Some(u64::MAX),
            metrics: vec![
                MetricValues {
                    metric: 1,
                    values: Err(-12345),
                },
                MetricValues {
                    metric: 2,
                    values: Ok(vec![
                        (PM_IN_NULL, Value::Bytes(vec![1, 2])),
                        (
                            3,
                            Value::Events(vec![EventRecord {
                                time: Timestamp(1),
                                flags: 4,
                                params: vec![EventParam {
                                    metric: 9,
                                    value: Value::Str("x".into()),
                                }],
                            }]),
                        ),
                    ]),
                },
            ],
            extras: Extras::default(),
        }));
        let mut cells = Cells::default();
        for v in [Value::I64(-1), Value::Str("a\"b".into()), Value::U64(2)] {
            cells.push_value(&v);
        }
        cells.push_value(&Value::Bytes(vec![0xff]));
        rt(Item::from(EventRun {
            event: Event {
                time: Timestamp(4),
                raw_clock: Some(9),
                type_id: 2,
                cpu: Some(1),
                stream: Some("s".into()),
                fields: vec![],
                extras: Extras::default(),
            },
            width: 2,
            cells,
        }));
        // A run's values fill its events: a count that does not is refused.
        let mut j = item_to_json(&Item::from(EventRun {
            width: 1,
            cells: Cells::default(),
            ..EventRun::default()
        }));
        j["w"] = J::from(0);
        assert!(item_from_json(&j).is_err());
        rt(Item::Annotation(Annotation {
            time: Timestamp(5),
            raw_clock: None,
            text: "<a&b>".into(),
            extras: Extras::default(),
        }));
        let mut h = Header::new(FormatId::Timeline, "A2");
        h.time_base = TimeBase::Cycles {
            hz: Some(2.4e9),
            anchor: None,
        };
        let j = header_to_json(&h);
        let b = header_from_json(&j).unwrap();
        assert_eq!(b.time_base, h.time_base);
        assert_eq!(b.source, FormatId::Timeline);
    }

    fn value_strategy() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            any::<i64>().prop_map(Value::I64),
            any::<u64>().prop_map(Value::U64),
            any::<u32>().prop_map(|b| Value::F32(f32::from_bits(b))),
            any::<u64>().prop_map(|b| Value::F64(f64::from_bits(b))),
            ".*".prop_map(Value::Str),
            proptest::collection::vec(any::<u8>(), 0..8).prop_map(Value::Bytes),
            any::<i64>().prop_map(Value::Enum),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::List),
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Struct),
                proptest::collection::vec(inner, 0..4).prop_map(Value::Union),
            ]
        })
    }

    proptest::proptest! {
        /// Any value, floats of any bit pattern included, comes back the same.
        #[test]
        fn any_value_round_trips(v in value_strategy()) {
            let text = value_to_json(&v).to_string();
            let back = value_from_json(&serde_json::from_str(&text).unwrap()).unwrap();
            proptest::prop_assert!(same_value(&v, &back), "{v:?} -> {text} -> {back:?}");
        }

        #[test]
        fn any_extra_round_trips(u in proptest::prelude::any::<u64>(), i in proptest::prelude::any::<i64>(), b in proptest::prelude::any::<u64>(), s in ".*") {
            let mut x = Extras::default();
            x.set("u", ExtraValue::U64(u));
            x.set("i", ExtraValue::I64(i));
            x.set("s", ExtraValue::Str(s));
            x.set("l", ExtraValue::List(vec![ExtraValue::U64(u), ExtraValue::I64(i)]));
            let f = f64::from_bits(b);
            let text = extras_to_json(&x).to_string();
            let back = extras_from_json(&serde_json::from_str(&text).unwrap()).unwrap();
            proptest::prop_assert_eq!(x, back);
            let e = extra_from_json(&extra_to_json(&ExtraValue::F64(f))).unwrap();
            proptest::prop_assert!(matches!(e, ExtraValue::F64(g) if g.to_bits() == f.to_bits()));
        }
    }

    #[test]
    fn hostile_nesting_is_refused() {
        let mut s = String::from("\"string\"");
        for _ in 0..100 {
            s = format!("{{\"array\":1,\"of\":{s}}}");
        }
        let j: J = serde_json::from_str(&s).unwrap();
        assert!(field_type_from_json(&j).is_err());
    }
}
