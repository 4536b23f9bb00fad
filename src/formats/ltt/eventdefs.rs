//! Event definitions (`eventdefs/*.xml`): facilities, events and their types
//! (spec 2.2, 2.3, 5.8–5.11), the facility checksum, and the resolution of
//! a type tree into a concrete layout for one `arch_size`.

use super::xml::{self, Elem, Node};
use crate::model::{Field, FieldType};
use std::collections::HashMap;

/// Bound on the size of a resolved type tree (typerefs can expand
/// exponentially: T2 = {T1, T1}, T3 = {T2, T2}, …).
const MAX_TYPE_NODES: usize = 100_000;

/// An isize token of the XML (spec 2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeTok {
    B1,
    B2,
    B4,
    B8,
    Short,
    Medium,
    Long,
}

impl SizeTok {
    pub fn parse(s: &str) -> Option<SizeTok> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "1" => SizeTok::B1,
            "2" => SizeTok::B2,
            "4" => SizeTok::B4,
            "8" => SizeTok::B8,
            "short" => SizeTok::Short,
            "medium" => SizeTok::Medium,
            "long" => SizeTok::Long,
            _ => return None,
        })
    }
    /// The size code 0..6 hashed for sequences.
    pub fn code(self) -> u8 {
        self as u8
    }
    pub fn from_bytes(n: u8) -> SizeTok {
        match n {
            1 => SizeTok::B1,
            2 => SizeTok::B2,
            4 => SizeTok::B4,
            _ => SizeTok::B8,
        }
    }
    fn int_class(self, unsigned: bool) -> &'static str {
        match (self, unsigned) {
            (SizeTok::B1, false) => "int8_t",
            (SizeTok::B2, false) => "int16_t",
            (SizeTok::B4, false) => "int32_t",
            (SizeTok::B8, false) => "int64_t",
            (SizeTok::Short, false) => "short int",
            (SizeTok::Medium, false) => "int",
            (SizeTok::Long, false) => "long int",
            (SizeTok::B1, true) => "uint8_t",
            (SizeTok::B2, true) => "uint16_t",
            (SizeTok::B4, true) => "uint32_t",
            (SizeTok::B8, true) => "uint64_t",
            (SizeTok::Short, true) => "unsigned short int",
            (SizeTok::Medium, true) => "unsigned int",
            (SizeTok::Long, true) => "unsigned long int",
        }
    }
    fn float_class(self) -> &'static str {
        match self {
            SizeTok::B4 | SizeTok::Medium => "float",
            SizeTok::B8 | SizeTok::Long => "double",
            _ => "undef",
        }
    }
    /// Integer byte size for an arch (spec 2.3); None when arch is unknown.
    pub fn int_bytes(self, arch: Arch) -> Option<u8> {
        Some(match self {
            SizeTok::B1 => 1,
            SizeTok::B2 | SizeTok::Short => 2,
            SizeTok::B4 => 4,
            SizeTok::B8 => 8,
            SizeTok::Medium => match arch {
                Arch::Lp32 => 2,
                Arch::Ilp32 | Arch::Lp64 => 4,
                Arch::Ilp64 => 8,
                Arch::Unknown => return None,
            },
            SizeTok::Long => match arch {
                Arch::Lp32 | Arch::Ilp32 => 4,
                Arch::Lp64 | Arch::Ilp64 => 8,
                Arch::Unknown => return None,
            },
        })
    }
}

/// `arch_size` of system.xml.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    Lp32,
    Ilp32,
    Lp64,
    Ilp64,
    Unknown,
}

impl Arch {
    pub fn parse(s: &str) -> Arch {
        match s.trim().to_ascii_uppercase().as_str() {
            "LP32" => Arch::Lp32,
            "ILP32" => Arch::Ilp32,
            "LP64" => Arch::Lp64,
            "ILP64" => Arch::Ilp64,
            _ => Arch::Unknown,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Arch::Lp32 => "LP32",
            Arch::Ilp32 => "ILP32",
            Arch::Lp64 => "LP64",
            Arch::Ilp64 => "ILP64",
            Arch::Unknown => "UNKNOWN",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    pub name: String,
    /// The `value` attribute exactly as written (hashed as is).
    pub value_text: Option<String>,
    /// The C-rule value (explicit, else previous + 1, first 0).
    pub value: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FieldDef {
    pub name: String,
    pub description: Option<String>,
    pub ty: TypeNode,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Int(SizeTok),
    Uint(SizeTok),
    Float(SizeTok),
    String,
    Enum {
        size: SizeTok,
        labels: Vec<Label>,
        /// Written as the design's whitespace list: labels hashed by name.
        text_labels: bool,
    },
    Array {
        len: u32,
        elem: Box<TypeNode>,
    },
    Sequence {
        lensize: SizeTok,
        elem: Box<TypeNode>,
    },
    Struct(Vec<FieldDef>),
    Union {
        tagsize: SizeTok,
        fields: Vec<FieldDef>,
    },
    Typeref(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct TypeNode {
    pub kind: Kind,
    pub format: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EventDef {
    pub name: String,
    pub description: Option<String>,
    pub payload: Option<TypeNode>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Facility {
    pub name: String,
    pub description: Option<String>,
    pub events: Vec<EventDef>,
    pub types: HashMap<String, TypeNode>,
    pub checksum: u32,
    /// File it came from (relative to eventdefs/).
    pub file: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DefError {
    pub offset: usize,
    pub msg: String,
}

fn derr(offset: usize, msg: impl Into<String>) -> DefError {
    DefError {
        offset,
        msg: msg.into(),
    }
}

/// Parse every `<facility>` of one eventdefs file.
pub fn parse_file(src: &[u8], file: &str) -> Result<Vec<Facility>, DefError> {
    let nodes = xml::parse(src).map_err(|e| derr(e.offset, e.msg))?;
    let mut out = Vec::new();
    for n in &nodes {
        if let Node::Elem(e) = n {
            if e.name == "facility" {
                out.push(parse_facility(e, file)?);
            } else {
                return Err(derr(
                    e.offset,
                    format!("unexpected <{}> at top level", e.name),
                ));
            }
        }
    }
    if out.is_empty() {
        return Err(derr(0, "no <facility> element"));
    }
    Ok(out)
}

fn description(e: &Elem) -> Option<String> {
    e.child("description").map(|d| d.text())
}

fn parse_facility(e: &Elem, file: &str) -> Result<Facility, DefError> {
    let name = e
        .attr_str("name")
        .filter(|s| !s.is_empty())
        .ok_or_else(|| derr(e.offset, "facility without a name"))?
        .to_string();
    let mut events = Vec::new();
    let mut types = HashMap::new();
    for c in e.elems() {
        match c.name.as_str() {
            "description" => {}
            "event" => {
                let ename = c
                    .attr_str("name")
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| derr(c.offset, "event without a name"))?
                    .to_string();
                let payload = match c.elems().find(|x| x.name != "description") {
                    Some(t) => Some(parse_type(t, 0)?),
                    None => None,
                };
                events.push(EventDef {
                    name: ename,
                    description: description(c),
                    payload,
                });
            }
            "type" => {
                let tname = c
                    .attr_str("name")
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| derr(c.offset, "type without a name"))?
                    .to_string();
                let t = c
                    .elems()
                    .find(|x| x.name != "description")
                    .ok_or_else(|| derr(c.offset, format!("type {tname} has no content")))?;
                let node = parse_type(t, 0)?;
                if types.insert(tname.clone(), node).is_some() {
                    return Err(derr(c.offset, format!("type {tname} defined twice")));
                }
            }
            other => {
                return Err(derr(
                    c.offset,
                    format!("unexpected <{other}> in facility {name}"),
                ))
            }
        }
    }
    let mut f = Facility {
        name,
        description: description(e),
        events,
        types,
        checksum: 0,
        file: file.to_string(),
    };
    // Resolve every typeref once, which also rejects unknown and recursive ones.
    f.checksum = checksum(&f).map_err(|m| derr(e.offset, m))?;
    Ok(f)
}

fn size_attr(e: &Elem, attr: &str) -> Result<SizeTok, DefError> {
    let v = e
        .attr_str(attr)
        .ok_or_else(|| derr(e.offset, format!("<{}> needs {attr}=", e.name)))?;
    SizeTok::parse(v).ok_or_else(|| derr(e.offset, format!("bad {attr} {v:?} in <{}>", e.name)))
}

fn parse_int_text(s: &str) -> Option<i64> {
    let s = s.trim();
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = if let Some(h) = body.strip_prefix("0x").or(body.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()?
    } else {
        body.parse::<i64>().ok()?
    };
    Some(if neg { -v } else { v })
}

fn fields_of(e: &Elem, depth: usize) -> Result<Vec<FieldDef>, DefError> {
    let mut out = Vec::new();
    for c in e.elems() {
        match c.name.as_str() {
            "description" => {}
            "field" => {
                let name = c
                    .attr_str("name")
                    .ok_or_else(|| derr(c.offset, "field without a name"))?
                    .to_string();
                let t = c
                    .elems()
                    .find(|x| x.name != "description")
                    .ok_or_else(|| derr(c.offset, format!("field {name} has no type")))?;
                out.push(FieldDef {
                    name,
                    description: description(c),
                    ty: parse_type(t, depth + 1)?,
                });
            }
            other => {
                return Err(derr(
                    c.offset,
                    format!("unexpected <{other}> in <{}>", e.name),
                ))
            }
        }
    }
    Ok(out)
}

fn elem_type(e: &Elem, depth: usize) -> Result<Box<TypeNode>, DefError> {
    let t = e
        .elems()
        .find(|x| x.name != "description")
        .ok_or_else(|| derr(e.offset, format!("<{}> has no element type", e.name)))?;
    Ok(Box::new(parse_type(t, depth + 1)?))
}

fn parse_type(e: &Elem, depth: usize) -> Result<TypeNode, DefError> {
    if depth > xml::MAX_DEPTH {
        return Err(derr(e.offset, "types nested too deeply"));
    }
    let kind = match e.name.as_str() {
        "int" => Kind::Int(size_attr(e, "size")?),
        "uint" => Kind::Uint(size_attr(e, "size")?),
        "float" => {
            let s = size_attr(e, "size")?;
            if matches!(s, SizeTok::B1 | SizeTok::B2 | SizeTok::Short) {
                return Err(derr(e.offset, "float size must be 4, 8, medium or long"));
            }
            Kind::Float(s)
        }
        "string" => Kind::String,
        "enum" => {
            let size = size_attr(e, "size")?;
            let mut labels = Vec::new();
            let mut next = 0i64;
            let has_label_elems = e.elems().any(|c| c.name == "label");
            for c in e.elems() {
                if c.name != "label" {
                    continue;
                }
                let name = c
                    .attr_str("name")
                    .ok_or_else(|| derr(c.offset, "label without a name"))?
                    .to_string();
                let value_text = c.attr_str("value").map(str::to_string);
                let value = match &value_text {
                    Some(v) => parse_int_text(v)
                        .ok_or_else(|| derr(c.offset, format!("bad label value {v:?}")))?,
                    None => next,
                };
                next = value.wrapping_add(1);
                labels.push(Label {
                    name,
                    value_text,
                    value,
                });
            }
            let text_labels = !has_label_elems;
            if text_labels {
                // The design's form: whitespace-separated names, values 0..n-1.
                for (i, w) in e.text().split_whitespace().enumerate() {
                    labels.push(Label {
                        name: w.to_string(),
                        value_text: None,
                        value: i as i64,
                    });
                }
            }
            Kind::Enum {
                size,
                labels,
                text_labels,
            }
        }
        "array" => {
            let v = e
                .attr_str("size")
                .ok_or_else(|| derr(e.offset, "<array> needs size="))?;
            let len = v
                .trim()
                .parse::<u32>()
                .map_err(|_| derr(e.offset, format!("bad array size {v:?}")))?;
            Kind::Array {
                len,
                elem: elem_type(e, depth)?,
            }
        }
        "sequence" => Kind::Sequence {
            lensize: size_attr(e, "lengthsize")?,
            elem: elem_type(e, depth)?,
        },
        "struct" => Kind::Struct(fields_of(e, depth)?),
        "union" => Kind::Union {
            tagsize: size_attr(e, "typecodesize")?,
            fields: fields_of(e, depth)?,
        },
        "typeref" => Kind::Typeref(
            e.attr_str("name")
                .ok_or_else(|| derr(e.offset, "typeref without a name"))?
                .to_string(),
        ),
        other => return Err(derr(e.offset, format!("unknown type <{other}>"))),
    };
    Ok(TypeNode {
        kind,
        format: e.attr_str("format").map(str::to_string),
    })
}

// ------------------------------------------------------------ checksum

fn crc_table() -> &'static [u32; 256] {
    static T: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, slot) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *slot = c;
        }
        t
    })
}

/// Reflected CRC-32 table update with no pre- or post-inversion (spec 2.2).
pub fn upd(mut crc: u32, s: &[u8]) -> u32 {
    let t = crc_table();
    for &b in s {
        crc = t[((crc ^ b as u32) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// The standard CRC-32.
pub fn crc32(s: &[u8]) -> u32 {
    !upd(0xFFFF_FFFF, s)
}

struct Walk<'a> {
    types: &'a HashMap<String, TypeNode>,
    stack: Vec<&'a str>,
    steps: usize,
    depth: usize,
}

/// Deepest resolved type accepted (typeref chains can nest deeper than the
/// XML itself); keeps every recursive walk over a type well within the stack.
pub const MAX_TYPE_DEPTH: usize = 64;

impl<'a> Walk<'a> {
    /// Follow typerefs to a concrete node, rejecting unknown and recursive ones.
    fn deref(&mut self, t: &'a TypeNode) -> Result<(&'a TypeNode, usize), String> {
        let mut cur = t;
        let mut pushed = 0;
        while let Kind::Typeref(name) = &cur.kind {
            if self.stack.contains(&name.as_str()) {
                return Err(format!("recursive typeref {name}"));
            }
            self.stack.push(name);
            pushed += 1;
            cur = self
                .types
                .get(name)
                .ok_or_else(|| format!("typeref to unknown type {name}"))?;
        }
        Ok((cur, pushed))
    }

    fn step(&mut self) -> Result<(), String> {
        self.steps += 1;
        if self.steps > MAX_TYPE_NODES {
            return Err("type tree too large".into());
        }
        Ok(())
    }

    fn hash(&mut self, crc: u32, t: &'a TypeNode) -> Result<u32, String> {
        self.step()?;
        self.depth += 1;
        let r = self.hash_in(crc, t);
        self.depth -= 1;
        r
    }

    fn hash_in(&mut self, crc: u32, t: &'a TypeNode) -> Result<u32, String> {
        if self.depth > MAX_TYPE_DEPTH {
            return Err("types nested too deeply".into());
        }
        let (t, pushed) = self.deref(t)?;
        // Borrowed where it can be: this runs for every node of every type.
        let class: std::borrow::Cow<str> = match &t.kind {
            Kind::Int(s) => s.int_class(false).into(),
            Kind::Uint(s) => s.int_class(true).into(),
            Kind::Float(s) => s.float_class().into(),
            Kind::String => "string".into(),
            Kind::Enum { size, .. } => format!("enum {}", size.int_class(true)).into(),
            Kind::Array { len, .. } => format!("array {len}").into(),
            Kind::Sequence { lensize, .. } => format!("sequence {}", lensize.code()).into(),
            Kind::Struct(_) => "struct".into(),
            Kind::Union { .. } => "union".into(),
            Kind::Typeref(_) => unreachable!("dereferenced above"),
        };
        let mut crc = upd(crc, class.as_bytes());
        if let Some(f) = &t.format {
            crc = upd(crc, f.as_bytes());
        }
        match &t.kind {
            Kind::Array { elem, .. } | Kind::Sequence { elem, .. } => {
                crc = self.hash(crc, elem)?;
            }
            Kind::Struct(fields) | Kind::Union { fields, .. } => {
                for f in fields {
                    crc = upd(crc, f.name.as_bytes());
                    crc = self.hash(crc, &f.ty)?;
                }
            }
            Kind::Enum {
                labels,
                text_labels,
                ..
            } => {
                for l in labels {
                    match (&l.value_text, text_labels) {
                        (Some(v), false) => {
                            crc = upd(crc, format!("{}={}", l.name, v).as_bytes());
                        }
                        _ => crc = upd(crc, l.name.as_bytes()),
                    }
                }
            }
            _ => {}
        }
        for _ in 0..pushed {
            self.stack.pop();
        }
        Ok(crc)
    }
}

/// The facility checksum of spec 2.2.
pub fn checksum(f: &Facility) -> Result<u32, String> {
    let mut w = Walk {
        types: &f.types,
        stack: Vec::new(),
        steps: 0,
        depth: 0,
    };
    let events = f
        .events
        .iter()
        .map(|e| (e.name.as_str(), e.payload.as_ref()));
    let crc = w.facility(&f.name, events)?;
    // Named types never used by an event must still resolve.
    for t in f.types.values() {
        w.hash(0, t)?;
    }
    Ok(crc)
}

/// [`checksum`] of a facility `name` of these events (name, payload) and
/// no named types, without the facility built (a writer generating one
/// event per metric need not keep every payload).
pub fn checksum_of<'a>(
    name: &str,
    events: impl IntoIterator<Item = (&'a str, Option<&'a TypeNode>)>,
) -> Result<u32, String> {
    let types = HashMap::new();
    let mut w = Walk {
        types: &types,
        stack: Vec::new(),
        steps: 0,
        depth: 0,
    };
    let events = events
        .into_iter()
        .map(|(n, p)| -> (&str, Option<&TypeNode>) { (n, p) });
    w.facility(name, events)
}

impl<'a> Walk<'a> {
    fn facility(
        &mut self,
        name: &str,
        events: impl IntoIterator<Item = (&'a str, Option<&'a TypeNode>)>,
    ) -> Result<u32, String> {
        let mut crc = crc32(name.as_bytes());
        for (n, p) in events {
            crc = upd(crc, n.as_bytes());
            if let Some(p) = p {
                crc = self.hash(crc, p)?;
            }
        }
        Ok(crc)
    }
}

// ------------------------------------------------------------ layouts

/// A type with concrete sizes for one arch: what the decoder walks.
#[derive(Debug, Clone, PartialEq)]
pub enum Ty {
    Int(u8),
    Uint(u8),
    Float(u8),
    Str,
    Enum {
        size: u8,
        labels: Vec<(i64, String)>,
    },
    Array {
        len: u32,
        elem: Box<Ty>,
    },
    Seq {
        lensize: u8,
        elem: Box<Ty>,
    },
    Struct(Vec<(String, Ty)>),
    Union {
        tagsize: u8,
        fields: Vec<(String, Ty)>,
    },
}

impl Ty {
    /// Smallest possible encoded size (bounds sequence counts against data).
    pub fn min_size(&self) -> usize {
        match self {
            Ty::Int(n) | Ty::Uint(n) | Ty::Float(n) => *n as usize,
            Ty::Enum { size, .. } => *size as usize,
            Ty::Str => 1,
            Ty::Array { len, elem } => (*len as usize).saturating_mul(elem.min_size()),
            Ty::Seq { lensize, .. } => *lensize as usize,
            Ty::Struct(f) => f
                .iter()
                .fold(0usize, |a, (_, t)| a.saturating_add(t.min_size())),
            Ty::Union { tagsize, fields } => (*tagsize as usize)
                .saturating_add(fields.iter().map(|(_, t)| t.min_size()).min().unwrap_or(0)),
        }
    }
    /// Encoded size when it does not depend on the data.
    pub fn fixed_size(&self) -> Option<usize> {
        match self {
            Ty::Int(n) | Ty::Uint(n) | Ty::Float(n) => Some(*n as usize),
            Ty::Enum { size, .. } => Some(*size as usize),
            Ty::Str | Ty::Seq { .. } | Ty::Union { .. } => None,
            Ty::Array { len, elem } => elem.fixed_size()?.checked_mul(*len as usize),
            Ty::Struct(f) => f
                .iter()
                .try_fold(0usize, |a, (_, t)| a.checked_add(t.fixed_size()?)),
        }
    }

    /// The model's field type.
    pub fn to_field_type(&self) -> FieldType {
        match self {
            Ty::Int(n) => FieldType::Int(*n),
            Ty::Uint(n) => FieldType::Uint(*n),
            Ty::Float(n) => FieldType::Float(*n),
            Ty::Str => FieldType::String,
            Ty::Enum { size, labels } => FieldType::Enum {
                size: *size,
                labels: labels.clone(),
            },
            Ty::Array { len, elem } => FieldType::Array {
                len: *len,
                elem: Box::new(elem.to_field_type()),
            },
            Ty::Seq { lensize, elem } => FieldType::Sequence {
                len: Box::new(FieldType::Uint(*lensize)),
                elem: Box::new(elem.to_field_type()),
            },
            Ty::Struct(f) => FieldType::Struct(to_fields(f)),
            Ty::Union { fields, .. } => FieldType::Union(to_fields(fields)),
        }
    }
}

pub fn to_fields(f: &[(String, Ty)]) -> Vec<Field> {
    f.iter()
        .map(|(n, t)| Field::new(n, t.to_field_type()))
        .collect()
}

/// Resolve an event's payload type for `arch`.
pub fn resolve(f: &Facility, t: &TypeNode, arch: Arch) -> Result<Ty, String> {
    let mut w = Walk {
        types: &f.types,
        stack: Vec::new(),
        steps: 0,
        depth: 0,
    };
    resolve_in(&mut w, t, arch)
}

fn int_size(s: SizeTok, arch: Arch) -> Result<u8, String> {
    s.int_bytes(arch)
        .ok_or_else(|| "short/medium/long size with arch_size unknown".to_string())
}

fn resolve_in<'a>(w: &mut Walk<'a>, t: &'a TypeNode, arch: Arch) -> Result<Ty, String> {
    w.step()?;
    w.depth += 1;
    let r = resolve_inner(w, t, arch);
    w.depth -= 1;
    r
}

fn resolve_inner<'a>(w: &mut Walk<'a>, t: &'a TypeNode, arch: Arch) -> Result<Ty, String> {
    if w.depth > MAX_TYPE_DEPTH {
        return Err("types nested too deeply".into());
    }
    let (t, pushed) = w.deref(t)?;
    let fields = |w: &mut Walk<'a>, fs: &'a [FieldDef]| -> Result<Vec<(String, Ty)>, String> {
        fs.iter()
            .map(|f| Ok((f.name.clone(), resolve_in(w, &f.ty, arch)?)))
            .collect()
    };
    let r = match &t.kind {
        Kind::Int(s) => Ty::Int(int_size(*s, arch)?),
        Kind::Uint(s) => Ty::Uint(int_size(*s, arch)?),
        Kind::Float(s) => match s {
            SizeTok::B4 | SizeTok::Medium => Ty::Float(4),
            SizeTok::B8 | SizeTok::Long => Ty::Float(8),
            _ => return Err("invalid float size".into()),
        },
        Kind::String => Ty::Str,
        Kind::Enum { size, labels, .. } => Ty::Enum {
            size: int_size(*size, arch)?,
            labels: labels.iter().map(|l| (l.value, l.name.clone())).collect(),
        },
        Kind::Array { len, elem } => Ty::Array {
            len: *len,
            elem: Box::new(resolve_in(w, elem, arch)?),
        },
        Kind::Sequence { lensize, elem } => Ty::Seq {
            lensize: int_size(*lensize, arch)?,
            elem: Box::new(resolve_in(w, elem, arch)?),
        },
        Kind::Struct(fs) => Ty::Struct(fields(w, fs)?),
        Kind::Union {
            tagsize,
            fields: fs,
        } => Ty::Union {
            tagsize: int_size(*tagsize, arch)?,
            fields: fields(w, fs)?,
        },
        Kind::Typeref(_) => unreachable!("dereferenced above"),
    };
    for _ in 0..pushed {
        w.stack.pop();
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ck(src: &str) -> u32 {
        parse_file(src.as_bytes(), "t.xml").unwrap()[0].checksum
    }

    #[test]
    fn vectors() {
        assert_eq!(
            ck("<facility name=a>\n<description>d</description>\n</facility>"),
            0xe8b7be43
        );
        assert_eq!(
            ck("<facility name=f><event name=e><description>d</description></event></facility>"),
            0x9da4a484
        );
        assert_eq!(
            ck("<facility name=f>\n <event name=e>\n  <struct>\n   <field name=\"x\"><uint size=4/></field>\n  </struct>\n </event>\n</facility>"),
            0x26d92121
        );
    }

    #[test]
    fn recursion_and_unknown() {
        let r = parse_file(
            b"<facility name=f><event name=e><typeref name=a/></event><type name=a><struct><field name=x><typeref name=a/></field></struct></type></facility>",
            "t",
        );
        assert!(r.unwrap_err().msg.contains("recursive"));
        let r = parse_file(
            b"<facility name=f><event name=e><typeref name=zz/></event></facility>",
            "t",
        );
        assert!(r.unwrap_err().msg.contains("unknown"));
    }

    #[test]
    fn deep_typeref_chains_are_bounded() {
        let mut s = String::from("<facility name=f><event name=e><typeref name=t0/></event>");
        for i in 0..5000 {
            s += &format!(
                "<type name=t{i}><struct><field name=a><typeref name=t{}/></field></struct></type>",
                i + 1
            );
        }
        s += "<type name=t5000><uint size=1/></type></facility>";
        let e = parse_file(s.as_bytes(), "t").unwrap_err();
        assert!(e.msg.contains("deeply"), "{}", e.msg);
    }

    #[test]
    fn exponential_typerefs_are_bounded() {
        let mut s = String::from("<facility name=f><event name=e><typeref name=t40/></event><type name=t0><struct><field name=x><uint size=1/></field></struct></type>");
        for i in 1..=40 {
            s += &format!("<type name=t{i}><struct><field name=a><typeref name=t{}/></field><field name=b><typeref name=t{}/></field></struct></type>", i - 1, i - 1);
        }
        s += "</facility>";
        assert!(parse_file(s.as_bytes(), "t").is_err());
    }
}
