//! The common listing: one line per item, the same for every format
//! (`dump --style common`).

use crate::error::{Error, Result};
use crate::model::*;
use std::collections::BTreeMap;
use std::io::Write;

/// The common listing: one line per item, the same for every format.
pub fn dump_common(reader: &mut dyn TraceReader, out: &mut dyn Write) -> Result<()> {
    let io = |e| Error::io("<stdout>", e);
    let h = reader.header().clone();
    writeln!(
        out,
        "# source {} version {} time {}",
        h.source,
        h.version,
        h.time_base.describe()
    )
    .map_err(io)?;
    if let Some(host) = &h.host {
        writeln!(out, "# host {host}").map_err(io)?;
    }
    for (k, v) in &h.system {
        writeln!(out, "# system {k}={v}").map_err(io)?;
    }
    for (k, v) in &h.extras {
        writeln!(out, "# extra {k}={v}").map_err(io)?;
    }
    let mut types: BTreeMap<EventTypeId, std::sync::Arc<EventType>> = BTreeMap::new();
    let mut names: BTreeMap<MetricId, String> = BTreeMap::new();
    let mut line = String::with_capacity(256);
    let mut pending = std::collections::VecDeque::new();
    while let Some(item) = next_plain(reader, &mut pending)? {
        line.clear();
        use std::fmt::Write as _;
        match &item {
            Item::EventType(t) => {
                write!(line, "type {} {}.{} (", t.id, t.category, t.name).unwrap();
                for (i, f) in t.fields.iter().enumerate() {
                    if i > 0 {
                        line.push_str(", ");
                    }
                    write!(line, "{}: {}", f.name, f.ty.kind_name()).unwrap();
                }
                line.push(')');
                types.insert(t.id, t.clone());
            }
            Item::Metric(m) => {
                write!(
                    line,
                    "metric {} {} {:?} {:?} units=0x{:08x}",
                    m.id,
                    m.names.join(","),
                    m.vtype,
                    m.sem,
                    m.units.to_word()
                )
                .unwrap();
                if let Some(i) = m.indom {
                    write!(line, " indom={i}").unwrap();
                }
                names.insert(m.id, m.name().to_string());
            }
            Item::Indom(u) => {
                write!(
                    line,
                    "{} indom {} {:?} {} instances",
                    u.time,
                    u.id,
                    u.kind,
                    u.instances.len()
                )
                .unwrap();
                for i in &u.instances {
                    write!(line, " [{} {:?}]", i.id, i.name).unwrap();
                }
                for r in &u.removed {
                    write!(line, " -{r}").unwrap();
                }
            }
            Item::Help(hp) => write!(
                line,
                "help {:?} oneline={} {:?}",
                hp.target, hp.oneline, hp.text
            )
            .unwrap(),
            Item::Labels(l) => {
                write!(line, "labels {:?} inst={} {}", l.target, l.inst, l.json).unwrap()
            }
            // `next_plain` gives a run's events one by one.
            Item::EventRun(_) => continue,
            Item::Event(e) => {
                let (cat, name) = types
                    .get(&e.type_id)
                    .map(|t| (t.category.as_str(), t.name.as_str()))
                    .unwrap_or(("?", "?"));
                write!(line, "{} event {cat}.{name}", e.time).unwrap();
                if let Some(c) = e.cpu {
                    write!(line, " cpu={c}").unwrap();
                }
                if let Some(s) = &e.stream {
                    write!(line, " stream={s}").unwrap();
                }
                source(&mut line, &e.extras);
                let t = types.get(&e.type_id);
                for (i, v) in e.fields.iter().enumerate() {
                    let fname = t
                        .and_then(|t| t.fields.get(i))
                        .map(|f| f.name.as_str())
                        .unwrap_or("?");
                    write!(line, " {fname}=").unwrap();
                    v.push_text(&mut line);
                }
            }
            Item::Sample(s) => {
                write!(line, "{} sample", s.time).unwrap();
                source(&mut line, &s.extras);
                for mv in &s.metrics {
                    let n = names.get(&mv.metric).map(String::as_str).unwrap_or("?");
                    match &mv.values {
                        Err(code) => write!(line, " {n}=ERR({code})").unwrap(),
                        Ok(vals) => {
                            for (inst, v) in vals {
                                if *inst == PM_IN_NULL {
                                    write!(line, " {n}=").unwrap();
                                } else {
                                    write!(line, " {n}[{inst}]=").unwrap();
                                }
                                v.push_text(&mut line);
                            }
                        }
                    }
                }
            }
            Item::Mark(m) => {
                write!(line, "{} mark", m.time).unwrap();
                source(&mut line, &m.extras);
            }
            Item::Annotation(a) => {
                write!(line, "{} note", a.time).unwrap();
                source(&mut line, &a.extras);
                write!(line, " {:?}", a.text).unwrap();
            }
        }
        line.push('\n');
        out.write_all(line.as_bytes()).map_err(io)?;
    }
    Ok(())
}

/// ` source="NAME"`: the input of an item of a merged stream.
fn source(line: &mut String, x: &Extras) {
    use std::fmt::Write as _;
    if let Some(s) = x.str(keys::SOURCE) {
        write!(line, " source={s:?}").unwrap();
    }
}
