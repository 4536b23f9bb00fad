//! `--style values`: one line per value, as the corpus `*.exactdump.txt`
//! (`EPOCH.NNNNNNNNN PMID INST TYPE VALUE`, floats as Python `repr`,
//! strings JSON-escaped with ASCII output).

use super::layout::pmid_str;
use crate::error::{Diagnostic, Error, Result};
use crate::model::*;
use std::collections::HashMap;
use std::io::Write;

/// Python `repr()` of a double: shortest round-trip digits, fixed notation
/// for decimal exponents in [-4, 16), otherwise `d.ddde+XX`.
pub fn py_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let s = format!("{x:e}");
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (neg, mant) = match mant.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mant),
    };
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    let nd = digits.len() as i32;
    if (-4..16).contains(&exp) {
        if exp >= 0 {
            let ip = (exp + 1) as usize;
            if digits.len() <= ip {
                out.push_str(&digits);
                for _ in 0..(ip - digits.len()) {
                    out.push('0');
                }
                out.push_str(".0");
            } else {
                out.push_str(&digits[..ip]);
                out.push('.');
                out.push_str(&digits[ip..]);
            }
        } else {
            out.push_str("0.");
            for _ in 0..(-exp - 1) {
                out.push('0');
            }
            out.push_str(&digits);
        }
    } else {
        out.push_str(&digits[..1]);
        if nd > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exp.abs()));
    }
    out
}

/// JSON string as Python's json.dumps (ensure_ascii) writes it.
pub fn json_str(s: &str) -> String {
    crate::cfmt::quote_c(s, |o, c| match c {
        '\u{8}' => o.push_str("\\b"),
        '\u{c}' => o.push_str("\\f"),
        c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
            let mut b = [0u16; 2];
            for u in c.encode_utf16(&mut b) {
                o.push_str(&format!("\\u{:04x}", u));
            }
        }
        c => o.push(c),
    })
}

/// Write the values listing of a model stream.
pub fn write_values(r: &mut dyn TraceReader, out: &mut dyn Write) -> Result<Vec<Diagnostic>> {
    let mut types: HashMap<MetricId, i32> = HashMap::new();
    let w = |e: std::io::Error| Error::io("<stdout>", e);
    let mut line = String::with_capacity(256);
    while let Some(it) = r.next_item()? {
        match it {
            Item::Metric(m) => {
                types.insert(m.id, m.vtype.pcp_code());
            }
            Item::Mark(m) => {
                writeln!(out, "{} MARK", m.time).map_err(w)?;
            }
            Item::Sample(s) => {
                let ts = s.time.to_string();
                for mv in &s.metrics {
                    let p = pmid_str(mv.metric);
                    match &mv.values {
                        Err(code) => writeln!(out, "{ts} {p} ERR {code}").map_err(w)?,
                        Ok(vals) => {
                            let t = types.get(&mv.metric).copied().unwrap_or(-1);
                            for (inst, v) in vals {
                                line.clear();
                                use std::fmt::Write as _;
                                let _ = write!(line, "{ts} {p} {inst} {t} ");
                                match v {
                                    Value::I64(x) | Value::Enum(x) => {
                                        let _ = write!(line, "{x}");
                                    }
                                    Value::U64(x) => {
                                        let _ = write!(line, "{x}");
                                    }
                                    Value::F32(x) => line.push_str(&py_repr(*x as f64)),
                                    Value::F64(x) => line.push_str(&py_repr(*x)),
                                    Value::Str(x) => line.push_str(&json_str(x)),
                                    _ => {
                                        let _ = write!(line, "<{t}>");
                                    }
                                }
                                line.push('\n');
                                out.write_all(line.as_bytes()).map_err(w)?;
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(r.diagnostics().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn repr_matches_python() {
        assert_eq!(py_repr(5.333333492279053), "5.333333492279053");
        assert_eq!(py_repr(1.5), "1.5");
        assert_eq!(py_repr(0.0), "0.0");
        assert_eq!(py_repr(-0.0), "-0.0");
        assert_eq!(py_repr(1e16), "1e+16");
        assert_eq!(py_repr(1e15), "1000000000000000.0");
        assert_eq!(py_repr(0.0001), "0.0001");
        assert_eq!(py_repr(0.00001), "1e-05");
        assert_eq!(py_repr(1.25e-7), "1.25e-07");
        assert_eq!(py_repr(123456.789), "123456.789");
        assert_eq!(py_repr(0.97_f32 as f64), "0.9700000286102295");
        assert_eq!(py_repr(1.7976931348623157e308), "1.7976931348623157e+308");
    }
    #[test]
    fn json_like_python() {
        assert_eq!(
            json_str("a\"b\\\n\u{1}é😀"),
            "\"a\\\"b\\\\\\n\\u0001\\u00e9\\ud83d\\ude00\""
        );
    }
}
