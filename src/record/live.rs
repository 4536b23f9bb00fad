//! `record --to mmv --live NAME`: one MMV file, `$PCP_TMP_DIR/mmv/NAME`,
//! whose values are updated in place after every scan, so pmcd's MMV PMDA
//! serves the recorder's current values (`pminfo -f mmv.NAME`).
//!
//! The MMV rules shape it: the metrics and every instance domain's
//! instances are fixed when a file is made, so when processes (or
//! interrupt rows) come or go the file is made again, complete, under a
//! hidden name, and renamed over the old one with a new generation; the
//! PMDA then reloads it. Between such changes each scan is only stores into
//! the mapping. Values a scan did not produce (a process that used no CPU
//! in the interval has no `kpi.proc.cpu`, as with dlt-kpi) are marked "no
//! value" (the SENTINEL flag). The file is tied to the recorder's process
//! (PROCESS flag): it is removed at the end, and the PMDA ignores it if the
//! recorder dies.

use super::{signal, RecordOptions, RecordOutcome, Ticks};
use crate::error::{Error, Result};
use crate::model::*;
use mmv_values as mmv;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An update handle of whatever type the metric has.
enum Handle {
    I32(mmv::Value<mmv::I32>),
    U32(mmv::Value<mmv::U32>),
    I64(mmv::Value<mmv::I64>),
    U64(mmv::Value<mmv::U64>),
    F32(mmv::Value<mmv::F32>),
    F64(mmv::Value<mmv::F64>),
    Str(mmv::Value<mmv::Str>),
}

impl Handle {
    fn set(&self, v: Option<&Value>) {
        let num = |v: &Value| -> Option<(i64, u64, f64)> {
            match v {
                Value::I64(x) => Some((*x, *x as u64, *x as f64)),
                Value::U64(x) => Some((*x as i64, *x, *x as f64)),
                Value::F64(x) => Some((*x as i64, *x as u64, *x)),
                Value::F32(x) => Some((*x as i64, *x as u64, *x as f64)),
                Value::Enum(x) => Some((*x, *x as u64, *x as f64)),
                _ => None,
            }
        };
        match (self, v) {
            (Handle::Str(h), Some(Value::Str(s))) => {
                h.set(s);
            }
            (Handle::Str(h), _) => h.set_none(),
            (h, Some(v)) => match (h, num(v)) {
                (Handle::I32(h), Some((i, _, _))) => h.set(i as i32),
                (Handle::U32(h), Some((_, u, _))) => h.set(u as u32),
                (Handle::I64(h), Some((i, _, _))) => h.set(i),
                (Handle::U64(h), Some((_, u, _))) => h.set(u),
                (Handle::F32(h), Some((_, _, f))) => h.set(f as f32),
                (Handle::F64(h), Some((_, _, f))) => h.set(f),
                (h, _) => h.none(),
            },
            (h, None) => h.none(),
        }
    }
    fn none(&self) {
        match self {
            Handle::I32(h) => h.set_none(),
            Handle::U32(h) => h.set_none(),
            Handle::I64(h) => h.set_none(),
            Handle::U64(h) => h.set_none(),
            Handle::F32(h) => h.set_none(),
            Handle::F64(h) => h.set_none(),
            Handle::Str(h) => h.set_none(),
        }
    }
}

/// A name the PMDA accepts (a letter, then letters, digits, `_` and `.`),
/// at most 255 bytes.
fn mmv_name(name: &str) -> String {
    let mut s = crate::formats::mmv::writer::sanitize(name);
    s.truncate(255);
    s
}

/// `s` cut to at most `max` bytes at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    let mut n = s.len().min(max);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    &s[..n]
}

fn units_word(u: &Units) -> mmv::Units {
    let w = mmv::Units::new(
        u.dim_space,
        u.dim_time,
        u.dim_count,
        u.scale_space,
        u.scale_time,
        u.scale_count,
    );
    mmv::Units(w.0 | u.pad as u32)
}

/// The live file and what it was made from.
pub struct LiveMmv {
    path: PathBuf,
    metrics: BTreeMap<MetricId, Arc<MetricDesc>>,
    members: BTreeMap<IndomId, BTreeMap<InstId, String>>,
    /// The metrics and memberships changed since the file was made.
    dirty: bool,
    file: Option<mmv::Mmv>,
    handles: HashMap<(MetricId, InstId), Handle>,
    /// Files made (the first, then one per change of shape).
    pub generations: u64,
}

impl LiveMmv {
    pub fn new(path: PathBuf) -> LiveMmv {
        LiveMmv {
            path,
            metrics: BTreeMap::new(),
            members: BTreeMap::new(),
            dirty: true,
            file: None,
            handles: HashMap::new(),
            generations: 0,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Take in one scan's items: definitions and membership changes first,
    /// then the file is made again if its shape changed, then every value
    /// is stored (those the scan lacks as "no value").
    pub fn update(&mut self, items: &[Item]) -> Result<()> {
        let mut values: HashMap<(MetricId, InstId), &Value> = HashMap::new();
        for it in items {
            match it {
                Item::Metric(m) => {
                    // The types an MMV file holds.
                    let keep = m.vtype.is_numeric() || m.vtype == ValueType::String;
                    if keep && self.metrics.get(&m.id) != Some(m) {
                        self.metrics.insert(m.id, m.clone());
                        self.dirty = true;
                    }
                }
                Item::Indom(u) => {
                    let set = self.members.entry(u.id).or_default();
                    u.apply_to(set);
                    self.dirty = true;
                }
                Item::Sample(s) => {
                    for mv in &s.metrics {
                        if let Ok(vs) = &mv.values {
                            for (inst, v) in vs {
                                values.insert((mv.metric, *inst), v);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        if self.dirty && !self.metrics.is_empty() {
            self.remake(&values)?;
            self.dirty = false;
        } else {
            for (key, h) in &self.handles {
                h.set(values.get(key).copied());
            }
        }
        Ok(())
    }

    /// Make the file for the current metrics and memberships, with this
    /// scan's values already in it.
    fn remake(&mut self, values: &HashMap<(MetricId, InstId), &Value>) -> Result<()> {
        let mut b = mmv::Builder::at(&self.path);
        b.flags(mmv::FLAG_PROCESS | mmv::FLAG_SENTINEL);
        // Model indoms used by a metric → MMV instance domains.
        let mut indoms: HashMap<IndomId, (mmv::Indom, Vec<InstId>)> = HashMap::new();
        for m in self.metrics.values() {
            let Some(id) = m.indom else { continue };
            if indoms.contains_key(&id) {
                continue;
            }
            let members = self.members.get(&id);
            let list: Vec<(i32, String)> = members
                .into_iter()
                .flatten()
                .map(|(i, n)| {
                    let n = if n.is_empty() {
                        i.to_string()
                    } else {
                        cut(n, 255).replace('\0', " ")
                    };
                    (*i, n)
                })
                .collect();
            let refs: Vec<(i32, &str)> = list.iter().map(|(i, n)| (*i, n.as_str())).collect();
            let d = b.indom(&refs, "", "");
            indoms.insert(id, (d, list.iter().map(|(i, _)| *i).collect()));
        }
        enum D {
            I32(mmv::Decl<mmv::I32>),
            U32(mmv::Decl<mmv::U32>),
            I64(mmv::Decl<mmv::I64>),
            U64(mmv::Decl<mmv::U64>),
            F32(mmv::Decl<mmv::F32>),
            F64(mmv::Decl<mmv::F64>),
            Str(mmv::Decl<mmv::Str>),
        }
        let mut decls = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for m in self.metrics.values() {
            let name = mmv_name(m.names.first().map_or("metric", |s| s.as_str()));
            if !seen.insert(name.clone()) || decls.len() >= 1000 {
                continue;
            }
            let sem = match m.sem {
                Semantics::Counter | Semantics::Other(0) => mmv::Semantics::Counter,
                Semantics::Discrete => mmv::Semantics::Discrete,
                _ => mmv::Semantics::Instant,
            };
            let units = units_word(&m.units);
            let help = cut(m.help_short.as_deref().unwrap_or(""), 255);
            let indom = m.indom.and_then(|i| indoms.get(&i));
            macro_rules! declare {
                ($k:ident) => {{
                    let d = match indom {
                        Some((i, _)) => b.metric_indom::<mmv::$k>(&name, *i, sem, units, help),
                        None => b.metric::<mmv::$k>(&name, sem, units, help),
                    };
                    if let Some(long) = m.help_long.as_deref() {
                        b.long_help(d, cut(long, 255));
                    }
                    D::$k(d)
                }};
            }
            let d = match m.vtype {
                ValueType::I32 => declare!(I32),
                ValueType::U32 => declare!(U32),
                ValueType::I64 => declare!(I64),
                ValueType::U64 => declare!(U64),
                ValueType::F32 => declare!(F32),
                ValueType::F64 => declare!(F64),
                _ => declare!(Str),
            };
            let insts = indom.map_or(vec![PM_IN_NULL], |(_, l)| l.clone());
            decls.push((m.id, d, insts));
        }
        let mut handles = HashMap::new();
        let file = b
            .start_with(|f| {
                for (id, d, insts) in &decls {
                    for &inst in insts {
                        let pick = |i: InstId| (i != PM_IN_NULL).then_some(i);
                        macro_rules! handle {
                            ($d:expr, $k:ident) => {
                                match pick(inst) {
                                    Some(i) => f.instance(*$d, i).map(Handle::$k),
                                    None => Some(Handle::$k(f.value(*$d))),
                                }
                            };
                        }
                        let h = match d {
                            D::I32(d) => handle!(d, I32),
                            D::U32(d) => handle!(d, U32),
                            D::I64(d) => handle!(d, I64),
                            D::U64(d) => handle!(d, U64),
                            D::F32(d) => handle!(d, F32),
                            D::F64(d) => handle!(d, F64),
                            D::Str(d) => handle!(d, Str),
                        };
                        if let Some(h) = h {
                            h.set(values.get(&(*id, inst)).copied());
                            handles.insert((*id, inst), h);
                        }
                    }
                }
            })
            .map_err(|e| match e {
                mmv::Error::Io(p, e) => Error::io(p, e),
                e => Error::Usage(e.to_string()),
            })?;
        // The old file (if any) was replaced by the rename; dropping its
        // mapping now leaves the new one in place.
        self.handles = handles;
        self.file = Some(file);
        self.generations += 1;
        Ok(())
    }
}

/// The pid that made the MMV file at `path`, if that process still runs
/// (another producer's live file is not ours to replace; a stale one is,
/// as libpcp_mmv replaces it).
fn live_owner(path: &Path) -> Option<i32> {
    let mut h = [0u8; 40];
    let mut f = std::fs::File::open(path).ok()?;
    std::io::Read::read_exact(&mut f, &mut h).ok()?;
    if &h[0..4] != b"MMV\0" {
        return None;
    }
    let pid = i32::from_ne_bytes(h[32..36].try_into().ok()?);
    if pid <= 0 || pid as u32 == std::process::id() {
        return None;
    }
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    let alive = r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    alive.then_some(pid)
}

/// Record into the live file until the stop condition.
pub fn record_live(opts: &RecordOptions, name: &str) -> Result<(RecordOutcome, PathBuf, u64)> {
    if opts.interval_ns < 1_000_000 {
        return Err(Error::Usage("--interval must be at least 1ms".into()));
    }
    let valid = name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(Error::Usage(format!(
            "--live {name:?}: the PMDA names metrics mmv.NAME.*, so NAME must be a letter followed by letters, digits and '_'"
        )));
    }
    let path = mmv::pcp_tmp_dir().join("mmv").join(name);
    if let Some(pid) = live_owner(&path) {
        return Err(Error::Usage(format!(
            "{}: an MMV file of process {pid}, which is still running; not replacing it",
            path.display()
        )));
    }
    signal::install().map_err(|e| Error::io("sigaction", e))?;
    let mut sampler = super::Sampler::new(super::Config::system(opts.check_interval_ns));
    let mut live = LiveMmv::new(path.clone());
    let mut items = sampler.definitions();
    let mut outcome = RecordOutcome::default();
    let mut ticks = Ticks::start(opts);
    loop {
        sampler.scan(&mut items);
        live.update(&items)?;
        items.clear();
        if signal::stop_requested() || ticks.wait().is_err() {
            break;
        }
    }
    let sig = signal::which();
    outcome.signal = (sig != 0).then_some(sig);
    outcome.stats = sampler.stats.clone();
    let generations = live.generations;
    // PROCESS flag: the file goes with the recording.
    drop(live);
    Ok((outcome, path, generations))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_pmda_accepts() {
        assert_eq!(mmv_name("kernel.all.load"), "kernel.all.load");
        assert_eq!(mmv_name("kpi.proc-cpu"), "kpi.proc_cpu");
        assert_eq!(mmv_name("1x"), "m1x");
        assert_eq!(cut("aé", 2), "a");
    }
}
