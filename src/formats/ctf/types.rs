//! CTF field classes built from the model's types, their TSDL text, and
//! the identifier escaping (docs/ctf.md, "Names").

use crate::model::{FieldType, ValueType};
use std::collections::HashSet;
use std::fmt::Write as _;

/// A CTF 1.8 field class, as this writer uses them: everything is
/// byte-aligned (`align = 8`), so the binary layout has no padding.
#[derive(Debug, Clone, PartialEq)]
pub enum CType {
    Int {
        bytes: u8,
        signed: bool,
    },
    Float {
        double: bool,
    },
    Str,
    /// Integer container plus (value, label) mappings.
    Enum {
        bytes: u8,
        signed: bool,
        labels: Vec<(i64, String)>,
    },
    Array {
        len: u32,
        elem: Box<CType>,
    },
    /// A sequence; as a struct member it is preceded by its generated
    /// length field (`_<name>_length`, an unsigned integer of `len_bytes`).
    Seq {
        len_bytes: u8,
        elem: Box<CType>,
    },
    Struct(Vec<CField>),
    /// A struct of one member named `elements`, standing in for an array
    /// or sequence element that is itself an array or sequence (TSDL needs
    /// a length field beside every sequence). Takes the inner value as is.
    Boxed(Box<CType>),
    /// PCP event records: a tagged variant per parameter (see `records`).
    Records,
}

impl CType {
    /// A signed integer of `bytes` bytes.
    pub const fn signed(bytes: u8) -> CType {
        CType::Int {
            bytes,
            signed: true,
        }
    }
    /// An unsigned integer of `bytes` bytes.
    pub const fn unsigned(bytes: u8) -> CType {
        CType::Int {
            bytes,
            signed: false,
        }
    }
}

/// A named member of a struct (event payload, struct field).
#[derive(Debug, Clone, PartialEq)]
pub struct CField {
    /// The TSDL identifier.
    pub tsdl: String,
    pub ty: CType,
}

/// TSDL keywords: never usable as plain identifiers.
const KEYWORDS: [&str; 28] = [
    "align",
    "callsite",
    "const",
    "char",
    "clock",
    "double",
    "enum",
    "env",
    "event",
    "floating_point",
    "float",
    "integer",
    "int",
    "long",
    "short",
    "signed",
    "stream",
    "string",
    "struct",
    "trace",
    "typealias",
    "typedef",
    "unsigned",
    "variant",
    "void",
    "_Bool",
    "_Complex",
    "_Imaginary",
];

/// The name a CTF 1.8 reader shows for a TSDL identifier: babeltrace2 (as
/// the CTF 1.8 convention for escaped keywords has it) drops one leading
/// underscore.
pub fn display_name(tsdl: &str) -> &str {
    tsdl.strip_prefix('_').unwrap_or(tsdl)
}

/// Escape a model name into a TSDL identifier that is unique among the
/// `used` display names of its struct (which it joins).
///
/// Characters outside `[A-Za-z0-9_]` become `_`; a name that then starts
/// with `_` or a digit, is empty or is a keyword gets one more leading `_`,
/// which readers drop again, so `_x` shows as `_x` and `event` as `event`.
/// If the shown name is already taken in the struct (two names escaped
/// alike, or a generated `…_length` field), `_2`, `_3`, … is appended.
pub fn ident(name: &str, used: &mut HashSet<String>) -> String {
    let mut t: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let needs_prefix = t.is_empty()
        || t.starts_with('_')
        || t.as_bytes()[0].is_ascii_digit()
        || KEYWORDS.contains(&t.as_str());
    if needs_prefix {
        t.insert(0, '_');
    }
    let base = t.clone();
    let mut k = 2;
    while used.contains(display_name(&t)) {
        t = format!("{base}_{k}");
        k += 1;
    }
    used.insert(display_name(&t).to_string());
    t
}

/// A TSDL string literal (event names, enum labels, env values).
pub fn literal(s: &str) -> String {
    crate::cfmt::quote_c(s, |o, c| {
        if (c as u32) < 0x20 || c == '\u{7f}' {
            // TSDL has C escapes; octal keeps them unambiguous.
            write!(o, "\\{:03o}", c as u32).unwrap();
        } else {
            o.push(c);
        }
    })
}

/// Integer byte size the model allows (1, 2, 4, 8), else 8.
fn int_bytes(n: u8) -> u8 {
    match n {
        1 | 2 | 4 | 8 => n,
        _ => 8,
    }
}

/// The CTF class of a model field type.
pub fn from_field_type(t: &FieldType) -> CType {
    match t {
        FieldType::Int(n) => CType::signed(int_bytes(*n)),
        FieldType::Uint(n) => CType::unsigned(int_bytes(*n)),
        FieldType::Float(n) => CType::Float { double: *n != 4 },
        FieldType::String => CType::Str,
        FieldType::Bytes => bytes_seq(),
        FieldType::Enum { size, labels } => {
            let bytes = int_bytes(*size);
            if labels.is_empty() {
                // A TSDL enum needs at least one mapping.
                return CType::unsigned(bytes);
            }
            let signed = labels.iter().any(|(v, _)| *v < 0);
            CType::Enum {
                bytes,
                signed,
                labels: labels.clone(),
            }
        }
        FieldType::Array { len, elem } => CType::Array {
            len: *len,
            elem: Box::new(element(from_field_type(elem))),
        },
        FieldType::Sequence { len, elem } => CType::Seq {
            len_bytes: match **len {
                FieldType::Uint(n) | FieldType::Int(n) | FieldType::Enum { size: n, .. } => {
                    int_bytes(n)
                }
                _ => 4,
            },
            elem: Box::new(element(from_field_type(elem))),
        },
        FieldType::Struct(fs) | FieldType::Union(fs) => {
            let mut used = HashSet::new();
            CType::Struct(
                fs.iter()
                    .map(|f| member(&f.name, from_field_type(&f.ty), &mut used))
                    .collect(),
            )
        }
    }
}

/// A struct member, reserving the generated length field's name first.
pub fn member(name: &str, ty: CType, used: &mut HashSet<String>) -> CField {
    let tsdl = ident(name, used);
    if matches!(ty, CType::Seq { .. }) {
        // `_<tsdl>_length` shows as `<tsdl>_length` (or `_…` kept): keep it free.
        let len_name = format!("_{tsdl}_length");
        used.insert(display_name(&len_name).to_string());
    }
    CField { tsdl, ty }
}

/// Array and sequence elements that are themselves arrays or sequences
/// go into a one-member struct (TSDL needs a length field per sequence).
fn element(t: CType) -> CType {
    match t {
        CType::Seq { .. } | CType::Array { .. } => CType::Boxed(Box::new(t)),
        t => t,
    }
}

/// Opaque bytes: a sequence of `uint8` with a 32-bit length.
pub fn bytes_seq() -> CType {
    CType::Seq {
        len_bytes: 4,
        elem: Box::new(CType::unsigned(1)),
    }
}

/// The CTF class of a metric value of `vtype`.
pub fn from_value_type(vtype: ValueType) -> CType {
    match vtype {
        ValueType::I32 => CType::signed(4),
        ValueType::U32 => CType::unsigned(4),
        ValueType::I64 => CType::signed(8),
        ValueType::U64 => CType::unsigned(8),
        ValueType::F32 => CType::Float { double: false },
        ValueType::F64 => CType::Float { double: true },
        ValueType::String => CType::Str,
        ValueType::Aggregate => bytes_seq(),
        ValueType::Event | ValueType::HighresEvent => CType::Records,
        // PM_TYPE_NOSUPPORT and unknown numbers: the value's text.
        ValueType::Other(_) => CType::Str,
    }
}

/// Labels of the parameter-kind tag of PCP event records (variant options).
pub const PARAM_KINDS: [&str; 5] = ["i64", "u64", "f64", "str", "bytes"];

// ------------------------------------------------------------ TSDL text

fn int_tsdl(o: &mut String, bytes: u8, signed: bool) {
    write!(
        o,
        "integer {{ size = {}; align = 8; signed = {}; }}",
        bytes as u32 * 8,
        signed
    )
    .unwrap();
}

fn indent(o: &mut String, depth: usize) {
    for _ in 0..depth {
        o.push('\t');
    }
}

/// Append `<type> <name>;` (with the length field first for sequences).
pub fn field_tsdl(o: &mut String, f: &CField, depth: usize) {
    if let CType::Seq { len_bytes, elem } = &f.ty {
        indent(o, depth);
        int_tsdl(o, *len_bytes, false);
        writeln!(o, " _{}_length;", f.tsdl).unwrap();
        indent(o, depth);
        type_tsdl(o, elem, depth);
        writeln!(o, " {}[_{}_length];", f.tsdl, f.tsdl).unwrap();
        return;
    }
    indent(o, depth);
    match &f.ty {
        CType::Array { len, elem } => {
            type_tsdl(o, elem, depth);
            writeln!(o, " {}[{len}];", f.tsdl).unwrap();
        }
        t => {
            type_tsdl(o, t, depth);
            writeln!(o, " {};", f.tsdl).unwrap();
        }
    }
}

/// Append the type specifier of `t` (not arrays or sequences: those are
/// declarators of a member, see `field_tsdl`).
pub fn type_tsdl(o: &mut String, t: &CType, depth: usize) {
    match t {
        CType::Int { bytes, signed } => int_tsdl(o, *bytes, *signed),
        CType::Float { double } => {
            let (e, m) = if *double { (11, 53) } else { (8, 24) };
            write!(
                o,
                "floating_point {{ exp_dig = {e}; mant_dig = {m}; align = 8; }}"
            )
            .unwrap();
        }
        CType::Str => o.push_str("string { encoding = UTF8; }"),
        CType::Enum {
            bytes,
            signed,
            labels,
        } => {
            o.push_str("enum : ");
            int_tsdl(o, *bytes, *signed);
            o.push_str(" { ");
            for (i, (v, l)) in labels.iter().enumerate() {
                if i > 0 {
                    o.push_str(", ");
                }
                write!(o, "{} = {v}", literal(l)).unwrap();
            }
            o.push_str(" }");
        }
        CType::Struct(fs) => {
            o.push_str("struct {\n");
            for f in fs {
                field_tsdl(o, f, depth + 1);
            }
            indent(o, depth);
            o.push_str("} align(8)");
        }
        CType::Boxed(inner) => {
            let f = CField {
                tsdl: "elements".into(),
                ty: (**inner).clone(),
            };
            o.push_str("struct {\n");
            field_tsdl(o, &f, depth + 1);
            indent(o, depth);
            o.push_str("} align(8)");
        }
        CType::Records => records_tsdl(o, depth),
        // Only reachable through a Boxed element (handled above).
        CType::Array { .. } | CType::Seq { .. } => {
            type_tsdl(o, &CType::Boxed(Box::new(t.clone())), depth)
        }
    }
}

/// PCP event records: a sequence of records, each with its time, flags and
/// parameters; a parameter's value is a variant chosen by its kind.
fn records_tsdl(o: &mut String, depth: usize) {
    let d = depth + 1;
    o.push_str("struct {\n");
    indent(o, d);
    o.push_str("integer { size = 32; align = 8; signed = false; } _records_length;\n");
    indent(o, d);
    o.push_str("struct {\n");
    indent(o, d + 1);
    o.push_str("integer { size = 64; align = 8; signed = true; } time_ns;\n");
    indent(o, d + 1);
    o.push_str("integer { size = 32; align = 8; signed = false; } flags;\n");
    indent(o, d + 1);
    o.push_str("integer { size = 32; align = 8; signed = false; } _params_length;\n");
    indent(o, d + 1);
    o.push_str("struct {\n");
    indent(o, d + 2);
    o.push_str("integer { size = 32; align = 8; signed = false; } pmid;\n");
    indent(o, d + 2);
    o.push_str("enum : integer { size = 8; align = 8; signed = false; } { ");
    for (i, k) in PARAM_KINDS.iter().enumerate() {
        if i > 0 {
            o.push_str(", ");
        }
        write!(o, "{k} = {i}").unwrap();
    }
    o.push_str(" } kind;\n");
    indent(o, d + 2);
    o.push_str("variant <kind> {\n");
    let opts = [
        "integer { size = 64; align = 8; signed = true; } i64;",
        "integer { size = 64; align = 8; signed = false; } u64;",
        "floating_point { exp_dig = 11; mant_dig = 53; align = 8; } f64;",
        "string { encoding = UTF8; } str;",
    ];
    for l in opts {
        indent(o, d + 3);
        o.push_str(l);
        o.push('\n');
    }
    indent(o, d + 3);
    o.push_str("struct { integer { size = 32; align = 8; signed = false; } _data_length; integer { size = 8; align = 8; signed = false; } data[_data_length]; } align(8) bytes;\n");
    indent(o, d + 2);
    o.push_str("} value;\n");
    indent(o, d + 1);
    o.push_str("} align(8) params[_params_length];\n");
    indent(o, d);
    o.push_str("} align(8) records[_records_length];\n");
    indent(o, depth);
    o.push_str("} align(8)");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_valid_unique_and_shown_as_named() {
        let mut used = HashSet::new();
        assert_eq!(ident("pid", &mut used), "pid");
        assert_eq!(ident("event", &mut used), "_event");
        assert_eq!(display_name("_event"), "event");
        assert_eq!(ident("_x", &mut used), "__x");
        assert_eq!(display_name("__x"), "_x");
        assert_eq!(ident("2nd", &mut used), "_2nd");
        assert_eq!(ident("$n", &mut used), "__n");
        // "$n" and "%n" escape alike: the second gets a suffix.
        assert_eq!(ident("%n", &mut used), "__n_2");
        assert_eq!(ident("", &mut used), "_");
        // A member named like a generated length field stays apart.
        let mut used = HashSet::new();
        let f = member("data", bytes_seq(), &mut used);
        assert_eq!(f.tsdl, "data");
        assert_eq!(ident("data_length", &mut used), "data_length_2");
    }

    #[test]
    fn literals_escape_quotes_and_controls() {
        assert_eq!(literal("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\001\"");
    }
}
