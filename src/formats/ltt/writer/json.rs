//! The JSON of the self-description records that come once per metadata
//! item (metric definitions, help texts, label sets, instance-domain
//! headers), written straight into a text buffer. The text is exactly what
//! `codec::item_to_json(..)` (plus the writer's keys) gives through
//! `serde_json`, whose maps sort their keys: each writer below lists its
//! keys in that order. Building a `serde_json::Value` costs a map node and
//! a key string per field, and an archive has thousands of such items.

use crate::model::codec;
use crate::model::{Extras, Help, HelpTarget, IndomKind, IndomUpdate, LabelSet, LabelTarget};
use crate::model::{MetricDesc, Units};

/// A JSON string, escaped as `serde_json` escapes it.
pub(super) fn put_str(o: &mut String, s: &str) {
    o.push('"');
    let mut from = 0;
    for (i, b) in s.bytes().enumerate() {
        let esc = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        o.push_str(&s[from..i]);
        from = i + 1;
        if esc.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            o.push_str("\\u00");
            o.push(HEX[(b >> 4) as usize] as char);
            o.push(HEX[(b & 0xf) as usize] as char);
        } else {
            o.push_str(esc);
        }
    }
    o.push_str(&s[from..]);
    o.push('"');
}

fn put_int(o: &mut String, v: impl itoa::Integer) {
    o.push_str(itoa::Buffer::new().format(v));
}

/// `"key":` after a comma unless it is the object's first key.
fn key(o: &mut String, first: &mut bool, k: &str) {
    if !std::mem::take(first) {
        o.push(',');
    }
    o.push('"');
    o.push_str(k);
    o.push_str("\":");
}

/// The extras object under `"x"` (rare in metadata: through `serde_json`).
fn put_extras(o: &mut String, first: &mut bool, x: &Extras) {
    if !x.is_empty() {
        key(o, first, "x");
        o.push_str(&codec::extras_to_json(x).to_string());
    }
}

fn put_units(o: &mut String, u: &Units) {
    let all: [i16; 7] = [
        u.dim_space.into(),
        u.dim_time.into(),
        u.dim_count.into(),
        u.scale_space.into(),
        u.scale_time.into(),
        u.scale_count.into(),
        u.pad.into(),
    ];
    o.push('[');
    for (i, v) in all.into_iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        put_int(o, v);
    }
    o.push(']');
}

/// A metric definition: its item with the writer's `ltt` id and serial `n`.
pub(super) fn metric(o: &mut String, m: &MetricDesc, ltt: u16, n: u64) {
    let f = &mut true;
    o.push('{');
    if let Some(h) = &m.help_short {
        key(o, f, "help");
        put_str(o, h);
    }
    if let Some(h) = &m.help_long {
        key(o, f, "helpl");
        put_str(o, h);
    }
    key(o, f, "id");
    put_int(o, m.id);
    if let Some(i) = m.indom {
        key(o, f, "indom");
        put_int(o, i);
    }
    key(o, f, "k");
    o.push_str("\"metric\"");
    key(o, f, "ltt");
    put_int(o, ltt);
    key(o, f, "n");
    put_int(o, n);
    key(o, f, "names");
    o.push('[');
    for (i, name) in m.names.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        put_str(o, name);
    }
    o.push(']');
    key(o, f, "sem");
    put_int(o, m.sem.pcp_code());
    key(o, f, "type");
    put_int(o, m.vtype.pcp_code());
    key(o, f, "units");
    put_units(o, &m.units);
    put_extras(o, f, &m.extras);
    o.push('}');
}

pub(super) fn help(o: &mut String, h: &Help) {
    o.push_str("{\"k\":\"help\",\"oneline\":");
    o.push_str(if h.oneline { "true" } else { "false" });
    o.push_str(",\"target\":");
    let (kind, id) = match h.target {
        HelpTarget::Metric(m) => ("metric", m),
        HelpTarget::Indom(i) => ("indom", i),
    };
    o.push_str("[\"");
    o.push_str(kind);
    o.push_str("\",");
    put_int(o, id);
    o.push_str("],\"text\":");
    put_str(o, &h.text);
    o.push('}');
}

pub(super) fn labels(o: &mut String, l: &LabelSet) {
    o.push_str("{\"inst\":");
    put_int(o, l.inst);
    o.push_str(",\"json\":");
    put_str(o, &l.json);
    o.push_str(",\"k\":\"labels\",\"labels\":[");
    for (i, x) in l.labels.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        o.push('[');
        put_str(o, &x.name);
        o.push(',');
        put_str(o, &x.value);
        o.push(',');
        put_int(o, x.flags);
        o.push(']');
    }
    o.push(']');
    if let Some(t) = l.time {
        o.push_str(",\"t\":");
        put_int(o, t.0);
    }
    o.push_str(",\"target\":[\"");
    let (kind, id) = match l.target {
        LabelTarget::Context => ("context", None),
        LabelTarget::Domain(d) => ("domain", Some(d)),
        LabelTarget::Cluster(c) => ("cluster", Some(c)),
        LabelTarget::Item(m) => ("item", Some(m)),
        LabelTarget::Indom(i) => ("indom", Some(i)),
        LabelTarget::Instances(i) => ("instances", Some(i)),
    };
    o.push_str(kind);
    o.push('"');
    if let Some(id) = id {
        o.push(',');
        put_int(o, id);
    }
    o.push_str("]}");
}

/// The record before an instance-domain update's events: the update
/// without its members, the `ltt` id, the counts of added and removed
/// instances, and every name when `names` (some name cannot travel in its
/// event).
pub(super) fn indom_head(o: &mut String, u: &IndomUpdate, ltt: u16, names: bool) {
    o.push_str("{\"id\":");
    put_int(o, u.id);
    o.push_str(",\"k\":\"indom\",\"kind\":");
    o.push_str(match u.kind {
        IndomKind::Full => "\"full\"",
        IndomKind::Delta => "\"delta\"",
    });
    o.push_str(",\"ltt\":");
    put_int(o, ltt);
    o.push_str(",\"nadd\":");
    put_int(o, u.instances.len());
    if names {
        o.push_str(",\"names\":[");
        for (k, i) in u.instances.iter().enumerate() {
            if k > 0 {
                o.push(',');
            }
            put_str(o, &i.name);
        }
        o.push(']');
    }
    o.push_str(",\"nrm\":");
    put_int(o, u.removed.len());
    o.push_str(",\"t\":");
    put_int(o, u.time.0);
    let f = &mut false;
    put_extras(o, f, &u.extras);
    o.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ExtraValue, Instance, Item, Label, Semantics, Timestamp, ValueType};
    use serde_json::Value as J;
    use std::sync::Arc;

    /// Every string the escaping can meet: each ASCII byte, quotes,
    /// backslashes, multi-byte characters beside escapes.
    fn strings() -> Vec<String> {
        let mut v: Vec<String> = (0u8..0x80).map(|b| format!("a{}b", b as char)).collect();
        v.extend(
            [
                "",
                "plain",
                "\"q\"",
                "\\",
                "é\u{1}ü\n",
                "\u{7f}\u{80}\u{2028}",
                "x\0y",
                "日本\t",
            ]
            .map(String::from),
        );
        v
    }

    fn extras() -> Vec<Extras> {
        let mut x = Extras::default();
        x.set(
            "pcp.delta_order",
            ExtraValue::List(vec![ExtraValue::I64(-3)]),
        );
        x.set("a", ExtraValue::Str("z\"".into()));
        vec![Extras::default(), x]
    }

    fn with(mut j: J, extra: &[(&str, J)]) -> String {
        if let J::Object(m) = &mut j {
            for (k, v) in extra {
                m.insert(k.to_string(), v.clone());
            }
        }
        j.to_string()
    }

    #[test]
    fn metric_text_is_serde_jsons() {
        for s in strings() {
            for x in extras() {
                for (indom, help) in [(None, None), (Some(7), Some(s.clone()))] {
                    let m = MetricDesc {
                        id: 0xdead_beef,
                        names: vec![s.clone(), "b.c".into()],
                        vtype: ValueType::F64,
                        sem: Semantics::Counter,
                        units: Units {
                            dim_space: -1,
                            dim_time: 1,
                            dim_count: 0,
                            scale_space: 3,
                            scale_time: 255,
                            scale_count: -8,
                            pad: 1,
                        },
                        indom,
                        help_short: help.clone(),
                        help_long: help.clone(),
                        extras: x.clone(),
                    };
                    let mut o = String::new();
                    metric(&mut o, &m, 65535, u64::MAX);
                    let want = with(
                        codec::item_to_json(&Item::Metric(Arc::new(m))),
                        &[("ltt", J::from(65535)), ("n", J::from(u64::MAX))],
                    );
                    assert_eq!(o, want);
                }
            }
        }
    }

    #[test]
    fn help_and_label_texts_are_serde_jsons() {
        for s in strings() {
            for (target, oneline) in [
                (HelpTarget::Metric(1), true),
                (HelpTarget::Indom(u32::MAX), false),
            ] {
                let h = Help {
                    target,
                    oneline,
                    text: s.clone(),
                };
                let mut o = String::new();
                help(&mut o, &h);
                assert_eq!(o, codec::item_to_json(&Item::Help(h)).to_string());
            }
            let targets = [
                LabelTarget::Context,
                LabelTarget::Domain(2),
                LabelTarget::Cluster(3),
                LabelTarget::Item(4),
                LabelTarget::Indom(5),
                LabelTarget::Instances(6),
            ];
            for (k, target) in targets.into_iter().enumerate() {
                let l = LabelSet {
                    time: (k % 2 == 0).then_some(Timestamp(-5)),
                    target,
                    inst: -1,
                    json: s.clone(),
                    labels: (0..k)
                        .map(|i| Label {
                            name: s.clone(),
                            value: i.to_string(),
                            flags: i as u32,
                        })
                        .collect(),
                };
                let mut o = String::new();
                labels(&mut o, &l);
                assert_eq!(o, codec::item_to_json(&Item::Labels(l)).to_string());
            }
        }
    }

    #[test]
    fn indom_head_is_serde_jsons() {
        for s in strings() {
            for x in extras() {
                for (kind, names) in [(IndomKind::Full, false), (IndomKind::Delta, true)] {
                    let u = IndomUpdate {
                        time: Timestamp(i64::MIN),
                        id: 9,
                        kind,
                        instances: vec![
                            Instance {
                                id: 1,
                                name: s.clone(),
                            },
                            Instance {
                                id: 2,
                                name: "two".into(),
                            },
                        ],
                        removed: vec![3],
                        extras: x.clone(),
                    };
                    let mut o = String::new();
                    indom_head(&mut o, &u, 21, names);
                    let mut extra = vec![
                        ("k", J::from("indom")),
                        ("ltt", J::from(21)),
                        ("nadd", J::from(2)),
                        ("nrm", J::from(1)),
                    ];
                    if names {
                        extra.push(("names", J::from(vec![s.as_str(), "two"])));
                    }
                    assert_eq!(o, with(codec::indom_to_json(&u, false), &extra));
                }
            }
        }
    }
}
