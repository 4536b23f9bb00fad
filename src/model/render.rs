//! Value rendering: the one text form of a [`Value`] that the common
//! listing, `info` and writers without a native form (MMV strings) share.

use super::Value;

impl Value {
    /// Append the common-listing text of this value to `out`.
    pub fn push_text(&self, out: &mut String) {
        push_text(self, out)
    }
    /// The common-listing text of this value.
    pub fn text(&self) -> String {
        let mut s = String::new();
        push_text(self, &mut s);
        s
    }
}

fn push_text(v: &Value, out: &mut String) {
    use std::fmt::Write as _;
    match v {
        Value::I64(x) => write!(out, "{x}").unwrap(),
        Value::U64(x) => write!(out, "{x}").unwrap(),
        Value::F32(x) => write!(out, "{x:?}").unwrap(),
        Value::F64(x) => write!(out, "{x:?}").unwrap(),
        Value::Enum(x) => write!(out, "{x}").unwrap(),
        Value::Str(s) => write!(out, "{s:?}").unwrap(),
        Value::Bytes(b) => {
            out.push_str("0x");
            for x in b {
                write!(out, "{x:02x}").unwrap();
            }
        }
        Value::List(xs) | Value::Struct(xs) | Value::Union(xs) => {
            out.push(if matches!(v, Value::List(_)) {
                '['
            } else {
                '{'
            });
            for (i, x) in xs.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                push_text(x, out);
            }
            out.push(if matches!(v, Value::List(_)) {
                ']'
            } else {
                '}'
            });
        }
        Value::Events(recs) => write!(out, "<{} event records>", recs.len()).unwrap(),
    }
}
