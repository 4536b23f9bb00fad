//! Typed per-format extras: what only one format has travels here so a
//! same-format round trip is lossless. Keys are namespaced by format
//! (`mmv.flags`, `pcp.label.zoneinfo`, `ltt.block_size`, `timeline.msg_id`);
//! each format module defines the keys it uses as constants.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
pub enum ExtraValue {
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<ExtraValue>),
}

impl std::fmt::Display for ExtraValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExtraValue::U64(v) => write!(f, "{v}"),
            ExtraValue::I64(v) => write!(f, "{v}"),
            ExtraValue::F64(v) => write!(f, "{v:?}"),
            ExtraValue::Bool(v) => write!(f, "{v}"),
            ExtraValue::Str(v) => write!(f, "{v:?}"),
            ExtraValue::Bytes(v) => write!(f, "<{} bytes>", v.len()),
            ExtraValue::List(v) => {
                write!(f, "[")?;
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{x}")?;
                }
                write!(f, "]")
            }
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extras(pub BTreeMap<String, ExtraValue>);

impl Extras {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn set(&mut self, key: &str, v: ExtraValue) {
        self.0.insert(key.to_string(), v);
    }
    pub fn get(&self, key: &str) -> Option<&ExtraValue> {
        self.0.get(key)
    }
    pub fn u64(&self, key: &str) -> Option<u64> {
        match self.0.get(key)? {
            ExtraValue::U64(v) => Some(*v),
            ExtraValue::I64(v) => u64::try_from(*v).ok(),
            _ => None,
        }
    }
    pub fn i64(&self, key: &str) -> Option<i64> {
        match self.0.get(key)? {
            ExtraValue::I64(v) => Some(*v),
            ExtraValue::U64(v) => i64::try_from(*v).ok(),
            _ => None,
        }
    }
    pub fn f64(&self, key: &str) -> Option<f64> {
        match self.0.get(key)? {
            ExtraValue::F64(v) => Some(*v),
            _ => None,
        }
    }
    pub fn str(&self, key: &str) -> Option<&str> {
        match self.0.get(key)? {
            ExtraValue::Str(v) => Some(v),
            _ => None,
        }
    }
    pub fn bytes(&self, key: &str) -> Option<&[u8]> {
        match self.0.get(key)? {
            ExtraValue::Bytes(v) => Some(v),
            _ => None,
        }
    }
    pub fn bool(&self, key: &str) -> Option<bool> {
        match self.0.get(key)? {
            ExtraValue::Bool(v) => Some(*v),
            _ => None,
        }
    }
}
