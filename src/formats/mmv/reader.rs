//! MMV file → model stream: header, indoms, help, metric descriptors,
//! labels, then one sample at the file's creation time.

use super::keys::*;
use super::layout::*;
use crate::error::{Diagnostic, Position, Result};
use crate::model::*;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

pub struct MmvReader {
    header: Header,
    items: std::vec::IntoIter<Item>,
    diags: Vec<Diagnostic>,
}

impl TraceReader for MmvReader {
    fn header(&self) -> &Header {
        &self.header
    }
    fn next_item(&mut self) -> Result<Option<Item>> {
        Ok(self.items.next())
    }
    fn diagnostics(&self) -> &[Diagnostic] {
        &self.diags
    }
}

/// libpcp_mmv's generation word: seconds << 32 | microseconds. Some other
/// producers (Parfait) store plain epoch seconds.
pub fn creation_time(g1: u64) -> Option<Timestamp> {
    let hi = g1 >> 32;
    let lo = (g1 & 0xffff_ffff) as u32;
    if hi != 0 && lo < 1_000_000 {
        Some(Timestamp::from_secs_micros(hi as i64, lo))
    } else if hi == 0 && lo != 0 {
        Some(Timestamp::from_secs_nanos(lo as i64, 0))
    } else {
        None
    }
}

/// The inverse of [`creation_time`] for writers.
pub fn generation_of(t: Timestamp) -> u64 {
    let secs = t.secs().clamp(0, u32::MAX as i64) as u64;
    let us = (t.subsec_nanos() / 1000) as u64;
    let g = (secs << 32) | us;
    if g == 0 {
        1
    } else {
        g
    }
}

pub fn effective_cluster(cluster: i32) -> u32 {
    if (1..=4095).contains(&cluster) {
        cluster as u32
    } else {
        1
    }
}

pub fn pmid_of(cluster: u32, item: u32) -> MetricId {
    (MMV_DOMAIN << 22) | ((cluster & 0xfff) << 10) | (item & 0x3ff)
}

pub fn indom_of(cluster: u32, serial: u32) -> IndomId {
    (MMV_DOMAIN << 22) | (((cluster << 11) | serial) & 0x3f_ffff)
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Is `name` one the MMV PMDA accepts (letters, digits, `_`, `.`; starts
/// with a letter)?
pub fn pmda_name_ok(name: &str) -> bool {
    let mut ch = name.chars();
    matches!(ch.next(), Some(c) if c.is_ascii_alphabetic())
        && ch.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// Split a one-pair JSON label `{"name":value}` into name and value text.
pub fn split_label(payload: &str) -> Option<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(payload).ok()?;
    let obj = v.as_object()?;
    if obj.len() != 1 {
        return None;
    }
    let (name, val) = obj.iter().next()?;
    let quoted = serde_json::to_string(name).ok()?;
    let prefix = format!("{{{quoted}:");
    let text = payload
        .strip_prefix(&prefix)
        .and_then(|r| r.strip_suffix('}'))
        .map(str::to_string)
        .unwrap_or_else(|| val.to_string());
    Some((name.clone(), text))
}

pub fn open(path: &Path, data: &[u8], salvage: bool) -> Result<MmvReader> {
    let mut diags = Vec::new();
    let f = parse(data, path, salvage, &mut diags)?;
    let mtime = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| Timestamp::from_secs_nanos(d.as_secs() as i64, d.subsec_nanos()));
    let (header, items) = to_model(&f, data, path, mtime, &mut diags);
    Ok(MmvReader {
        header,
        items: items.into_iter(),
        diags,
    })
}

/// Map a parsed file onto the model.
pub fn to_model(
    f: &MmvFile,
    data: &[u8],
    path: &Path,
    mtime: Option<Timestamp>,
    diags: &mut Vec<Diagnostic>,
) -> (Header, Vec<Item>) {
    let h = f.hdr();
    let version = h.version;
    let time = creation_time(h.g1).or(mtime).unwrap_or(Timestamp::ZERO);
    let cluster = effective_cluster(h.cluster);
    let warn = |diags: &mut Vec<Diagnostic>, off: u64, msg: String| {
        diags.push(Diagnostic::warning(Position::at(path, off, None), msg));
    };
    if h.cluster != 0 && cluster as i32 != h.cluster {
        warn(
            diags,
            36,
            format!(
                "cluster {} is out of range (0..4095); the PMDA would refuse the file, ids use cluster 1",
                h.cluster
            ),
        );
    }

    let mut header = Header::new(FormatId::Mmv, version.to_string());
    header.start = Some(time);
    let x = &mut header.extras;
    x.set(VERSION, ExtraValue::U64(version as u64));
    x.set(FLAGS, ExtraValue::U64(h.flags as u64));
    x.set(CLUSTER, ExtraValue::I64(h.cluster as i64));
    x.set(PID, ExtraValue::I64(h.process as i64));
    x.set(G1, ExtraValue::U64(h.g1));
    x.set(G2, ExtraValue::U64(h.g2));
    x.set(SIZE, ExtraValue::U64(f.size));
    x.set(
        TOC,
        ExtraValue::List(
            f.toc
                .iter()
                .map(|t| {
                    ExtraValue::List(vec![
                        ExtraValue::I64(t.ty as i64),
                        ExtraValue::I64(t.count as i64),
                        ExtraValue::U64(t.offset),
                    ])
                })
                .collect(),
        ),
    );
    if !f.strings.is_empty() {
        x.set(
            STRINGS,
            ExtraValue::List(
                f.strings
                    .iter()
                    .map(|(_, s)| ExtraValue::Bytes(s.clone()))
                    .collect(),
            ),
        );
    }
    let sections_end = f
        .toc
        .iter()
        .map(|t| {
            let es = match t.ty {
                TOC_INDOMS => INDOM_SIZE,
                TOC_INSTANCES => inst_size(version),
                TOC_METRICS => metric_size(version),
                TOC_VALUES => VALUE_SIZE,
                _ => STRING_SIZE,
            };
            t.offset
                .saturating_add(es.saturating_mul(t.count.max(0) as u64))
        })
        .chain([HDR_SIZE + TOC_SIZE * f.toc.len() as u64])
        .max()
        .unwrap_or(0);
    if sections_end < f.size && f.size - sections_end <= 1 << 16 {
        if let Some(t) = data.get(sections_end as usize..) {
            x.set(TRAILER, ExtraValue::Bytes(t.to_vec()));
        }
    }
    if let Some(file) = path.file_name().and_then(|n| n.to_str()) {
        header.system.push(("mmv.file".into(), file.to_string()));
    }

    let mut items = Vec::new();
    let s = |off: u64| (off != 0).then(|| f.string(off).map(lossy)).flatten();

    // Instance domains.
    let mut indom_ids: HashMap<u32, IndomId> = HashMap::new();
    let mut used_indoms = HashSet::new();
    for d in &f.indoms {
        let mut id = indom_of(cluster, d.serial);
        if d.serial > 0x7ff {
            warn(
                diags,
                d.off,
                format!(
                    "indom serial {} does not fit in 11 bits: the PMDA's InDom ({cluster} << 11 | serial) collides with other clusters",
                    d.serial
                ),
            );
        }
        while !used_indoms.insert(id) {
            id = (MMV_DOMAIN << 22) | ((id + 1) & 0x3f_ffff);
        }
        indom_ids.insert(d.serial, id);
        let isz = inst_size(version);
        let mut instances = Vec::new();
        let mut offs = Vec::new();
        let mut name_offs = Vec::new();
        for j in 0..d.count as u64 {
            let io = d.first.wrapping_add(j * isz);
            if let Some(inst) = f.inst_at.get(&io).and_then(|&i| f.insts.get(i)) {
                instances.push(Instance {
                    id: inst.internal,
                    name: lossy(&inst.name),
                });
                offs.push(ExtraValue::U64(io));
                name_offs.push(ExtraValue::U64(inst.name_off));
            }
        }
        let mut ex = Extras::default();
        ex.set(SERIAL, ExtraValue::U64(d.serial as u64));
        ex.set(OFFSET, ExtraValue::U64(d.off));
        ex.set(FIRST, ExtraValue::U64(d.first));
        ex.set(INST_OFFSETS, ExtraValue::List(offs));
        if version >= 2 {
            ex.set(INST_NAME_OFFSETS, ExtraValue::List(name_offs));
        }
        ex.set(HELP_SHORT_OFF, ExtraValue::U64(d.short));
        ex.set(HELP_LONG_OFF, ExtraValue::U64(d.long));
        items.push(Item::Indom(IndomUpdate {
            time,
            id,
            kind: IndomKind::Full,
            instances,
            removed: Vec::new(),
            extras: ex,
        }));
        for (oneline, off) in [(true, d.short), (false, d.long)] {
            if let Some(text) = s(off) {
                items.push(Item::Help(Help {
                    target: HelpTarget::Indom(id),
                    oneline,
                    text,
                }));
            }
        }
    }

    // Metric descriptors.
    let file_name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("mmv")
        .to_string();
    let mut metric_ids: HashMap<u64, MetricId> = HashMap::new();
    let mut by_item: HashMap<u32, MetricId> = HashMap::new();
    let mut used_ids = HashSet::new();
    let mut pmda_names = HashSet::new();
    for m in &f.metrics {
        let name = lossy(&m.name);
        let pmda_name = if h.flags & FLAG_NOPREFIX != 0 {
            format!("mmv.{name}")
        } else {
            format!("mmv.{file_name}.{name}")
        };
        let mut skip = None;
        if !pmda_name_ok(&pmda_name) {
            skip = Some("its name has characters the PMDA does not accept");
        } else if !pmda_names.insert(pmda_name.clone()) {
            skip = Some("its name is a duplicate");
        } else if m.item > 0x3ff {
            skip = Some("its item does not fit in 10 bits");
        } else if by_item.contains_key(&m.item) {
            skip = Some("its item is a duplicate");
        }
        if let Some(why) = skip {
            warn(
                diags,
                m.off,
                format!("the MMV PMDA would skip metric {pmda_name:?}: {why}"),
            );
        }
        let mut id = pmid_of(cluster, m.item);
        if m.item > 0x3ff || used_ids.contains(&id) {
            // Keep model ids unique: the next free item of the cluster.
            id = (0..0x400u32)
                .map(|i| pmid_of(cluster, i))
                .find(|p| !used_ids.contains(p))
                .unwrap_or(m.item);
        }
        used_ids.insert(id);
        by_item.entry(m.item).or_insert(id);
        metric_ids.insert(m.off, id);
        let (vtype, sem, units) = match m.mtype {
            TYPE_ELAPSED => (ValueType::I64, Semantics::Counter, Units::time(1)),
            t => (
                ValueType::from_pcp_code(t),
                Semantics::from_pcp_code(m.sem as u32),
                Units::from_word(m.dim),
            ),
        };
        if !matches!(
            m.mtype,
            TYPE_I32
                | TYPE_U32
                | TYPE_I64
                | TYPE_U64
                | TYPE_FLOAT
                | TYPE_DOUBLE
                | TYPE_STRING
                | TYPE_ELAPSED
        ) {
            warn(
                diags,
                m.off,
                format!(
                    "metric {name:?} has MMV type {}, which has no values",
                    m.mtype
                ),
            );
        }
        let mut d = MetricDesc::new(id, &name, vtype, sem, units);
        if m.has_indom() {
            d.indom = indom_ids.get(&(m.indom as u32)).copied();
        }
        d.help_short = s(m.short);
        d.help_long = s(m.long);
        let ex = &mut d.extras;
        ex.set(ITEM, ExtraValue::U64(m.item as u64));
        ex.set(TYPE, ExtraValue::I64(m.mtype as i64));
        ex.set(SEM, ExtraValue::I64(m.sem as i64));
        ex.set(DIM, ExtraValue::U64(m.dim as u64));
        ex.set(INDOM, ExtraValue::I64(m.indom as i64));
        ex.set(PAD, ExtraValue::U64(m.pad as u64));
        ex.set(OFFSET, ExtraValue::U64(m.off));
        ex.set(NAME_OFF, ExtraValue::U64(m.name_off));
        ex.set(HELP_SHORT_OFF, ExtraValue::U64(m.short));
        ex.set(HELP_LONG_OFF, ExtraValue::U64(m.long));
        ex.set(PMDA_NAME, ExtraValue::Str(pmda_name));
        items.push(Item::Metric(Arc::new(d)));
    }

    // Labels (v3).
    for l in &f.labels {
        let payload = lossy(&l.payload);
        let Some((name, value)) = split_label(&payload) else {
            warn(
                diags,
                l.off + 12,
                format!("label {payload:?} is not a one-pair JSON object; skipped"),
            );
            continue;
        };
        let indom = || {
            let id = indom_ids.get(&l.identity).copied();
            id.unwrap_or(indom_of(cluster, l.identity))
        };
        let (target, inst) = match l.flags & !LABEL_OPTIONAL {
            LABEL_CLUSTER => (LabelTarget::Cluster(l.identity), PM_IN_NULL),
            LABEL_INDOM => (LabelTarget::Indom(indom()), PM_IN_NULL),
            LABEL_ITEM => {
                let pmid = by_item.get(&l.identity).copied();
                let pmid = pmid.unwrap_or(pmid_of(cluster, l.identity));
                (LabelTarget::Item(pmid), PM_IN_NULL)
            }
            LABEL_INSTANCES => (LabelTarget::Instances(indom()), l.internal),
            other => {
                warn(
                    diags,
                    l.off,
                    format!("label {payload:?} has unknown type flags {other:#x}; skipped"),
                );
                continue;
            }
        };
        items.push(Item::Labels(LabelSet {
            time: Some(time),
            target,
            inst,
            json: payload,
            labels: vec![Label {
                name,
                value,
                flags: l.flags,
            }],
        }));
    }

    // Values: one sample, metrics in file order.
    let sentinel = h.flags & FLAG_SENTINEL != 0;
    let now_us = time.nanos() / 1000;
    let mut per_metric: Vec<(MetricId, Vec<(InstId, Value)>)> = Vec::new();
    let mut slot: HashMap<MetricId, usize> = HashMap::new();
    for m in &f.metrics {
        let id = metric_ids[&m.off];
        slot.insert(id, per_metric.len());
        per_metric.push((id, Vec::new()));
    }
    let mut raw_values = Vec::new();
    let mut elapsed_extra = Vec::new();
    for v in &f.values {
        raw_values.push(ExtraValue::List(vec![
            ExtraValue::U64(v.off),
            ExtraValue::U64(v.metric),
            ExtraValue::U64(v.inst),
            ExtraValue::U64(v.raw),
            ExtraValue::I64(v.extra),
        ]));
        let Some(m) = f.metric_at.get(&v.metric).and_then(|&i| f.metrics.get(i)) else {
            continue;
        };
        let inst = if m.has_indom() {
            match f.inst_at.get(&v.inst).and_then(|&i| f.insts.get(i)) {
                Some(i) => i.internal,
                None => continue,
            }
        } else {
            PM_IN_NULL
        };
        let int_sentinel = sentinel && v.raw == u64::MAX;
        let val = match m.mtype {
            TYPE_I32 if !int_sentinel => Value::I64(v.raw as u32 as i32 as i64),
            TYPE_U32 if !int_sentinel => Value::U64(v.raw as u32 as u64),
            TYPE_I64 if !int_sentinel => Value::I64(v.raw as i64),
            TYPE_U64 if !int_sentinel => Value::U64(v.raw),
            TYPE_FLOAT => Value::F32(f32::from_bits(v.raw as u32)),
            TYPE_DOUBLE => Value::F64(f64::from_bits(v.raw)),
            TYPE_STRING => {
                let text = f.string(v.extra as u64).map(lossy).unwrap_or_default();
                if sentinel && text.is_empty() {
                    continue;
                }
                Value::Str(text)
            }
            TYPE_ELAPSED if !int_sentinel => {
                let mut t = v.raw as i64;
                if v.extra < 0 {
                    // An interval still running: count it up to the sample time.
                    t = t.saturating_add(now_us.saturating_add(v.extra).max(0));
                    warn(
                        diags,
                        v.off + 8,
                        format!(
                            "ELAPSED metric {:?} has an interval open since {} µs; counted up to the file's creation time",
                            lossy(&m.name),
                            -v.extra
                        ),
                    );
                } else if v.extra > 0 {
                    warn(
                        diags,
                        v.off + 8,
                        format!(
                            "ELAPSED metric {:?} has a positive 'extra' {}",
                            lossy(&m.name),
                            v.extra
                        ),
                    );
                }
                Value::I64(t)
            }
            _ => continue,
        };
        if m.mtype == TYPE_ELAPSED && v.extra != 0 {
            elapsed_extra.push(ExtraValue::List(vec![
                ExtraValue::U64(metric_ids[&m.off] as u64),
                ExtraValue::I64(inst as i64),
                ExtraValue::I64(v.extra),
            ]));
        }
        if let Some(&k) = slot.get(&metric_ids[&m.off]) {
            per_metric[k].1.push((inst, val));
        }
    }
    let mut extras = Extras::default();
    extras.set(VALUES, ExtraValue::List(raw_values));
    if !elapsed_extra.is_empty() {
        extras.set(ELAPSED_EXTRA, ExtraValue::List(elapsed_extra));
    }
    items.push(Item::Sample(Sample {
        time,
        raw_clock: None,
        metrics: per_metric
            .into_iter()
            .map(|(metric, values)| MetricValues {
                metric,
                values: Ok(values),
            })
            .collect(),
        extras,
    }));
    (header, items)
}
