//! Event field type tree, rich enough for LTT facilities.

/// A named field of an event type (or struct/union member).
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub ty: FieldType,
    pub description: Option<String>,
}

impl Field {
    pub fn new(name: &str, ty: FieldType) -> Field {
        Field {
            name: name.to_string(),
            ty,
            description: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum FieldType {
    /// Signed integer of 1, 2, 4 or 8 bytes.
    Int(u8),
    /// Unsigned integer of 1, 2, 4 or 8 bytes.
    Uint(u8),
    /// IEEE float of 4 or 8 bytes.
    Float(u8),
    /// NUL-terminated / length-known text.
    String,
    /// Opaque bytes.
    Bytes,
    /// Unsigned enum of `size` bytes with (value, label) pairs.
    Enum {
        size: u8,
        labels: Vec<(i64, String)>,
    },
    /// Fixed-length array.
    Array {
        len: u32,
        elem: Box<FieldType>,
    },
    /// Length-prefixed sequence; `len` is the (unsigned) type of the count.
    Sequence {
        len: Box<FieldType>,
        elem: Box<FieldType>,
    },
    Struct(Vec<Field>),
    Union(Vec<Field>),
}

impl FieldType {
    /// True for scalar numeric types a timeline arg or a metric can carry.
    pub fn is_numeric(&self) -> bool {
        matches!(
            self,
            FieldType::Int(_) | FieldType::Uint(_) | FieldType::Float(_) | FieldType::Enum { .. }
        )
    }
    /// Short type name for listings.
    pub fn kind_name(&self) -> &'static str {
        match self {
            FieldType::Int(_) => "int",
            FieldType::Uint(_) => "uint",
            FieldType::Float(_) => "float",
            FieldType::String => "string",
            FieldType::Bytes => "bytes",
            FieldType::Enum { .. } => "enum",
            FieldType::Array { .. } => "array",
            FieldType::Sequence { .. } => "sequence",
            FieldType::Struct(_) => "struct",
            FieldType::Union(_) => "union",
        }
    }
}
