//! KPI from any process data: a stage before the KPI writer that derives
//! dlt-kpi's datasets from what other sources record about processes
//! (docs/model.md, "KPI from other sources"):
//!
//! - **PCP-style metrics** (a pmlogger archive with the proc PMDA, or an
//!   MMV file with such names): each sample that holds `proc.*` values is
//!   one dlt-kpi scan of the processes the `proc` instance domain holds at
//!   that time (those with values where there is no instance domain). The
//!   first scan lists every process as NEW (as dlt-kpi's first scan does);
//!   later, processes that appear are NEW and those that are gone STP. ACT per process from two consecutive scans:
//!   cpu = Δ(utime + stime) ms × 1000 / interval ms / ncpu (per mille of
//!   the machine, integer division, listed only when > 0), rss in pages
//!   (`proc.psinfo.rss` or `proc.memory.rss` ÷ page size), ctx =
//!   `vctxsw + nvctxsw` (cumulative), io = `rchar + wchar` (else
//!   `read_bytes + write_bytes`), io_wait from `delayacct_blkio_time` like
//!   cpu. NEW's ppid is `proc.psinfo.ppid`; its command line is
//!   `proc.psinfo.psargs` (argv joined by spaces; else the instance name
//!   after its PID, else `proc.psinfo.cmd`), and for a kernel thread (PCP
//!   shows `(name)`) `(cmd)`, as dlt-kpi reads it from stat. (dlt-kpi
//!   itself shows argv[0] only; the whole line is kept since KPI readers
//!   split NEW at the first two `;` and take the rest verbatim.) CHK lists every process again every 10 s of
//!   trace time (the recorder's `record.check_interval_ns` if given).
//!   `kernel.percpu.interrupts.<row>` values (instances `cpuN`) give one
//!   IRQ dataset per row and sample (`lineN` rows are named `N`, as in
//!   /proc/interrupts); ncpu is `hinv.ncpu`.
//! - **Process events** (LTT): `process` events with sub-id FORK or KTHREAD
//!   and `process_fork` give NEW (child = the first data field, parent =
//!   the process running on that CPU, from `schedchange`), EXIT and
//!   `process_exit` give STP for the process running on that CPU, and
//!   `control.process` events (the trace's `control/processes` file) give
//!   CHK.
//!
//! The stage stays out of the way when the stream carries KPI data of its
//! own (definitions of `kpi.*` types or metrics) or comes from KPI or DLT.
//! Derived items go through the shared KPI [`Assembler`], so groups,
//! instance domains and extras are exactly those of KPI read from a file.

use crate::error::Result;
use crate::formats::kpi::assemble::Assembler;
use crate::formats::kpi::dataset::Dataset;
use crate::model::*;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;

/// CHK interval when the source does not state one.
const DEFAULT_CHECK_NS: i64 = 10_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Utime,
    Stime,
    Cmd,
    Psargs,
    Ppid,
    PsRss,
    MemRss,
    Ctx,
    Rchar,
    Wchar,
    ReadBytes,
    WriteBytes,
    Blkio,
    Ncpu,
}

fn role_of(name: &str) -> Option<Role> {
    Some(match name {
        "proc.psinfo.utime" => Role::Utime,
        "proc.psinfo.stime" => Role::Stime,
        "proc.psinfo.cmd" => Role::Cmd,
        "proc.psinfo.psargs" => Role::Psargs,
        "proc.psinfo.ppid" => Role::Ppid,
        "proc.psinfo.rss" => Role::PsRss,
        "proc.memory.rss" => Role::MemRss,
        "proc.psinfo.vctxsw" | "proc.psinfo.nvctxsw" | "proc.psinfo.nivctxsw" => Role::Ctx,
        "proc.io.rchar" => Role::Rchar,
        "proc.io.wchar" => Role::Wchar,
        "proc.io.read_bytes" => Role::ReadBytes,
        "proc.io.write_bytes" => Role::WriteBytes,
        "proc.psinfo.delayacct_blkio_time" => Role::Blkio,
        "hinv.ncpu" => Role::Ncpu,
        _ => return None,
    })
}

/// How a metric's values are read: its role (or IRQ row) and unit factor.
#[derive(Debug, Clone)]
struct Use {
    role: Option<Role>,
    /// `kernel.percpu.interrupts.<row>`: the row name as dlt-kpi prints it.
    irq_row: Option<String>,
    /// Multiply to get ns (time metrics) or bytes (space metrics).
    scale: f64,
    indom: Option<IndomId>,
}

fn time_scale(u: Units) -> f64 {
    if u.dim_time != 1 {
        return 1e6; // unitless: take milliseconds, PCP's usual
    }
    match u.scale_time {
        0 => 1.0,
        1 => 1e3,
        2 => 1e6,
        3 => 1e9,
        4 => 60e9,
        5 => 3600e9,
        _ => 1e6,
    }
}

fn space_scale(u: Units) -> f64 {
    if u.dim_space != 1 {
        return 1.0;
    }
    (1u64 << (10 * u.scale_space.min(6) as u32)) as f64
}

/// /proc/interrupts order: numbered lines, then the x86 named rows in the
/// kernel's order, then any other name.
fn irq_order(name: &str) -> (u8, u64, usize, String) {
    const NAMED: [&str; 19] = [
        "NMI", "LOC", "SPU", "PMI", "IWI", "RTR", "RES", "CAL", "TLB", "TRM", "THR", "DFR", "MCE",
        "MCP", "ERR", "MIS", "PIN", "NPI", "PIW",
    ];
    if let Ok(n) = name.parse::<u64>() {
        return (0, n, 0, String::new());
    }
    match NAMED.iter().position(|n| *n == name) {
        Some(i) => (1, 0, i, String::new()),
        None => (2, 0, 0, name.to_string()),
    }
}

/// One process's values in one scan.
#[derive(Debug, Default, Clone)]
struct Vals {
    busy_ns: Option<f64>,
    cmd: Option<Vec<u8>>,
    psargs: Option<Vec<u8>>,
    /// `proc.psinfo.psargs` is there and empty: no command line.
    no_cmdline: bool,
    ppid: Option<i64>,
    ps_rss: Option<f64>,
    mem_rss: Option<f64>,
    ctx: Option<i64>,
    chars: Option<u64>,
    bytes: Option<u64>,
    blkio_ns: Option<f64>,
}

#[derive(Debug)]
struct Proc {
    cmdline: Vec<u8>,
    busy_ns: Option<f64>,
    blkio_ns: Option<f64>,
    time: Timestamp,
}

/// What an LTT-style event type means for processes.
#[derive(Debug, Clone)]
enum EvRole {
    /// `process` with an `event_sub_id` enum: the labels of FORK/KTHREAD
    /// and EXIT values.
    Process {
        fork: Vec<i64>,
        exit: Vec<i64>,
    },
    Fork,
    Exit,
    /// `schedchange`: index of the `in` field.
    Sched(usize),
    /// `control.process`: indexes of name and pid.
    Control {
        name: usize,
        pid: usize,
    },
}

pub struct KpiFromProc {
    inner: Box<dyn TraceReader>,
    /// False once the stream shows KPI data of its own.
    active: bool,
    asm: Assembler,
    queue: VecDeque<Item>,
    uses: HashMap<MetricId, Use>,
    inst_names: HashMap<(IndomId, InstId), String>,
    procs: BTreeMap<i64, Proc>,
    scans: u64,
    ncpu: Option<u64>,
    page_size: f64,
    check_ns: i64,
    last_chk: Option<Timestamp>,
    ev_roles: HashMap<EventTypeId, EvRole>,
    current: HashMap<u32, i64>,
    names: HashMap<i64, Vec<u8>>,
    /// CHK datasets of `control.process` events at one time, and that time.
    chk_events: Vec<Vec<u8>>,
    chk_time: Option<Timestamp>,
    /// Roles present in the source (for the loss report of missing columns).
    seen: Vec<Role>,
    /// What the derivation made of the source; `convert` reports it.
    pub loss: Rc<RefCell<LossReport>>,
}

impl KpiFromProc {
    pub fn wrap(inner: Box<dyn TraceReader>) -> KpiFromProc {
        let h = inner.header();
        let active = !matches!(h.source, FormatId::Kpi | FormatId::Dlt);
        let page_size = h
            .extras
            .u64(crate::formats::kpi::schema::X_PAGE_SIZE)
            .unwrap_or(4096)
            .max(1) as f64;
        let check_ns = h
            .extras
            .i64(keys::CHECK_INTERVAL_NS)
            .filter(|n| *n > 0)
            .unwrap_or(DEFAULT_CHECK_NS);
        let ncpu = h.extras.u64(keys::NCPU);
        KpiFromProc {
            inner,
            active,
            asm: Assembler::new(),
            queue: VecDeque::new(),
            uses: HashMap::new(),
            inst_names: HashMap::new(),
            procs: BTreeMap::new(),
            scans: 0,
            ncpu,
            page_size,
            check_ns,
            last_chk: None,
            ev_roles: HashMap::new(),
            current: HashMap::new(),
            names: HashMap::new(),
            chk_events: Vec::new(),
            chk_time: None,
            seen: Vec::new(),
            loss: Default::default(),
        }
    }

    /// Feed one KPI message to the assembler (sanity flags are not ours
    /// to report: the derived values are what the source says).
    fn msg(&mut self, args: &[&[u8]], time: Timestamp) {
        let mut out = Vec::new();
        if self.asm.message(args, time, None, None, &mut out).is_ok() {
            self.queue.extend(out);
        }
        self.asm.warnings.clear();
    }

    /// One group: BEG, the datasets (one message), END.
    fn group(&mut self, kind: &[u8], datasets: &[Vec<u8>], time: Timestamp) {
        if datasets.is_empty() {
            return;
        }
        self.msg(&[kind, b"BEG"], time);
        let mut args: Vec<&[u8]> = vec![kind];
        args.extend(datasets.iter().map(|d| d.as_slice()));
        self.msg(&args, time);
        self.msg(&[kind, b"END"], time);
    }

    fn define_metric(&mut self, m: &MetricDesc) {
        let name = m.name();
        if name.starts_with("kpi.") {
            self.active = false;
            return;
        }
        let role = role_of(name);
        let irq_row = name
            .strip_prefix("kernel.percpu.interrupts.")
            .filter(|r| !r.is_empty() && !r.contains('.'))
            .map(|r| match r.strip_prefix("line") {
                Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => n.to_string(),
                _ => r.to_string(),
            });
        if role.is_none() && irq_row.is_none() {
            return;
        }
        let scale = match role {
            Some(Role::Utime | Role::Stime | Role::Blkio) => time_scale(m.units),
            Some(Role::PsRss | Role::MemRss) => space_scale(m.units),
            _ => 1.0,
        };
        if let Some(r) = role {
            if !self.seen.contains(&r) {
                self.seen.push(r);
            }
        }
        self.uses.insert(
            m.id,
            Use {
                role,
                irq_row,
                scale,
                indom: m.indom,
            },
        );
    }

    fn define_type(&mut self, t: &EventType) {
        if t.category == "kpi" {
            self.active = false;
            return;
        }
        let field = |n: &str| t.fields.iter().position(|f| f.name == n);
        let role = match (t.category.as_str(), t.name.as_str()) {
            ("control", "process") => match (field("name"), field("pid")) {
                (Some(name), Some(pid)) => Some(EvRole::Control { name, pid }),
                _ => None,
            },
            (_, "process_fork") if !t.fields.is_empty() => Some(EvRole::Fork),
            (_, "process_exit") => Some(EvRole::Exit),
            (_, "schedchange") => field("in").map(EvRole::Sched),
            (_, "process") => match t.fields.first().map(|f| &f.ty) {
                Some(FieldType::Enum { labels, .. }) if t.fields.len() >= 2 => {
                    let with = |names: &[&str]| -> Vec<i64> {
                        labels
                            .iter()
                            .filter(|(_, l)| names.iter().any(|n| l.ends_with(n)))
                            .map(|(v, _)| *v)
                            .collect()
                    };
                    Some(EvRole::Process {
                        fork: with(&["_FORK", "_KTHREAD"]),
                        exit: with(&["_EXIT"]),
                    })
                }
                _ => None,
            },
            _ => None,
        };
        if let Some(r) = role {
            self.ev_roles.insert(t.id, r);
        }
    }

    fn indom(&mut self, u: &IndomUpdate) {
        // Only instance names of indoms we read values of are kept.
        if !self.uses.values().any(|x| x.indom == Some(u.id)) {
            return;
        }
        u.apply_to(&mut DomainNames(u.id, &mut self.inst_names));
    }

    fn event(&mut self, e: &Event) {
        let Some(role) = self.ev_roles.get(&e.type_id).cloned() else {
            return;
        };
        let int = |i: usize| e.fields.get(i).and_then(|v| v.as_i128()).map(|v| v as i64);
        let cpu = e.cpu.unwrap_or(0);
        let running = self.current.get(&cpu).copied();
        let new = |me: &mut Self, pid: i64| {
            let ppid = running.unwrap_or(0);
            let cmdline = me.names.get(&ppid).cloned().unwrap_or_default();
            me.names.insert(pid, cmdline.clone());
            let d = Dataset::New {
                pid,
                ppid,
                cmdline: cmdline.into(),
            }
            .render();
            me.group(b"NEW", &[d], e.time);
        };
        let stp = |me: &mut Self, pid: Option<i64>| {
            if let Some(pid) = pid.filter(|p| *p > 0) {
                me.names.remove(&pid);
                let d = Dataset::Stp { pid }.render();
                me.group(b"STP", &[d], e.time);
            }
        };
        match role {
            EvRole::Sched(i) => {
                if let Some(pid) = int(i) {
                    self.current.insert(cpu, pid);
                }
            }
            EvRole::Fork => {
                if let Some(pid) = int(0) {
                    new(self, pid);
                }
            }
            EvRole::Exit => stp(self, running),
            EvRole::Process { fork, exit } => {
                let Some(sub) = int(0) else { return };
                if fork.contains(&sub) {
                    if let Some(pid) = int(1) {
                        new(self, pid);
                    }
                } else if exit.contains(&sub) {
                    stp(self, running);
                }
            }
            EvRole::Control { name, pid } => {
                let (Some(pid), Some(n)) = (int(pid), e.fields.get(name)) else {
                    return;
                };
                let n = match n {
                    Value::Str(s) => s.as_bytes().to_vec(),
                    Value::Bytes(b) => b.clone(),
                    _ => Vec::new(),
                };
                self.names.insert(pid, n.clone());
                // The control file lists processes at one time: one group.
                if self.chk_time.is_some_and(|t| t != e.time) {
                    self.flush_chk();
                }
                let d = Dataset::Chk {
                    pid,
                    cmdline: n.into(),
                }
                .render();
                self.chk_events.push(d);
                self.chk_time = Some(e.time);
            }
        }
    }

    fn sample(&mut self, s: &Sample) {
        let mut scan: BTreeMap<i64, Vals> = BTreeMap::new();
        let mut irq: Vec<(String, Vec<(u32, u64)>)> = Vec::new();
        for mv in &s.metrics {
            let Some(u) = self.uses.get(&mv.metric).cloned() else {
                continue;
            };
            let Ok(vals) = &mv.values else { continue };
            if let Some(row) = &u.irq_row {
                let mut counts: Vec<(u32, u64)> = vals
                    .iter()
                    .filter_map(|(inst, v)| {
                        let n = v.as_i128()? as u64;
                        let cpu = match u.indom.and_then(|d| self.inst_names.get(&(d, *inst))) {
                            Some(name) => name.strip_prefix("cpu")?.parse().ok()?,
                            None => u32::try_from(*inst).ok()?,
                        };
                        Some((cpu, n))
                    })
                    .collect();
                counts.sort();
                if !counts.is_empty() {
                    irq.push((row.clone(), counts));
                }
                continue;
            }
            let Some(role) = u.role else { continue };
            if role == Role::Ncpu {
                if let Some(n) = vals.first().and_then(|(_, v)| v.as_i128()) {
                    self.ncpu = Some(n.max(1) as u64);
                }
                continue;
            }
            for (inst, v) in vals {
                let pid = *inst as i64;
                let e = scan.entry(pid).or_insert_with(|| {
                    let mut x = Vals::default();
                    // The instance name (`PID psargs`) is the fallback command line.
                    if let Some(n) = u.indom.and_then(|d| self.inst_names.get(&(d, *inst))) {
                        let rest = n.trim_start_matches(|c: char| c.is_ascii_digit());
                        let rest = rest.strip_prefix(' ').unwrap_or(rest);
                        if !rest.is_empty() {
                            x.psargs = Some(rest.as_bytes().to_vec());
                        }
                    }
                    x
                });
                let num = v.as_f64();
                let text = match v {
                    Value::Str(s) => Some(s.as_bytes().to_vec()),
                    Value::Bytes(b) => Some(b.clone()),
                    _ => None,
                };
                let add = |o: &mut Option<f64>, x: Option<f64>| {
                    if let Some(x) = x {
                        *o = Some(o.unwrap_or(0.0) + x);
                    }
                };
                match role {
                    Role::Utime | Role::Stime => add(&mut e.busy_ns, num.map(|n| n * u.scale)),
                    Role::Blkio => add(&mut e.blkio_ns, num.map(|n| n * u.scale)),
                    Role::Cmd => e.cmd = text,
                    Role::Psargs => match text {
                        Some(t) if !t.is_empty() => e.psargs = Some(t),
                        _ => e.no_cmdline = e.psargs.is_none(),
                    },
                    Role::Ppid => e.ppid = num.map(|n| n as i64),
                    Role::PsRss => e.ps_rss = num.map(|n| n * u.scale),
                    Role::MemRss => e.mem_rss = num.map(|n| n * u.scale),
                    Role::Ctx => e.ctx = Some(e.ctx.unwrap_or(0) + num.unwrap_or(0.0) as i64),
                    Role::Rchar | Role::Wchar => {
                        e.chars = Some(e.chars.unwrap_or(0) + num.unwrap_or(0.0) as u64)
                    }
                    Role::ReadBytes | Role::WriteBytes => {
                        e.bytes = Some(e.bytes.unwrap_or(0) + num.unwrap_or(0.0) as u64)
                    }
                    Role::Ncpu => {}
                }
            }
        }
        if !scan.is_empty() {
            self.scan(s.time, scan);
        }
        if !irq.is_empty() {
            irq.sort_by_key(|(name, _)| irq_order(name));
            let ds: Vec<Vec<u8>> = irq
                .into_iter()
                .map(|(name, counts)| {
                    Dataset::Irq {
                        name: name.into(),
                        counts: counts.into(),
                    }
                    .render()
                })
                .collect();
            self.group(b"IRQ", &ds, s.time);
        }
    }

    /// The command line of a NEW or CHK dataset: `proc.psinfo.psargs`
    /// (PCP joins argv with spaces; else the instance name after its PID,
    /// else `proc.psinfo.cmd`); a process without one (a kernel thread,
    /// which PCP shows as `(name)`, or an empty psargs) as `(cmd)`, which
    /// dlt-kpi reads from /proc/PID/stat.
    fn cmdline(v: &Vals) -> Vec<u8> {
        let src = v.psargs.as_ref().or(v.cmd.as_ref());
        let Some(s) = src else {
            return b"(null)".to_vec();
        };
        if s.starts_with(b"(") || v.no_cmdline {
            if let Some(c) = v.cmd.as_ref().filter(|c| !c.is_empty()) {
                return [&b"("[..], c, b")"].concat();
            }
        }
        s.clone()
    }

    fn scan(&mut self, time: Timestamp, mut scan: BTreeMap<i64, Vals>) {
        self.scans += 1;
        // The proc indom's membership says which processes exist (its
        // comings and goings), also when a record holds values for only
        // some of them; values alone decide where no indom is known.
        let proc_indom = self
            .uses
            .values()
            .find(|u| u.role.is_some_and(|r| r != Role::Ncpu) && u.indom.is_some())
            .and_then(|u| u.indom);
        if let Some(d) = proc_indom {
            for ((i, inst), name) in &self.inst_names {
                if *i != d {
                    continue;
                }
                scan.entry(*inst as i64).or_insert_with(|| {
                    let mut x = Vals::default();
                    let rest = name.trim_start_matches(|c: char| c.is_ascii_digit());
                    let rest = rest.strip_prefix(' ').unwrap_or(rest);
                    if !rest.is_empty() {
                        x.psargs = Some(rest.as_bytes().to_vec());
                    }
                    x
                });
            }
        }
        let ncpu = self.ncpu.unwrap_or(1).max(1) as i128;
        let mut new = Vec::new();
        let mut act = Vec::new();
        for (pid, v) in &scan {
            match self.procs.get_mut(pid) {
                None => {
                    let cmdline = Self::cmdline(v);
                    new.push(
                        Dataset::New {
                            pid: *pid,
                            ppid: v.ppid.unwrap_or(0),
                            cmdline: cmdline.as_slice().into(),
                        }
                        .render(),
                    );
                    self.procs.insert(
                        *pid,
                        Proc {
                            cmdline,
                            busy_ns: v.busy_ns,
                            blkio_ns: v.blkio_ns,
                            time,
                        },
                    );
                }
                Some(p) => {
                    let interval = (time.0 - p.time.0) as i128;
                    let rate = |now: Option<f64>, before: Option<f64>| -> Option<i64> {
                        let d = (now? - before?).max(0.0) as i128;
                        (interval > 0).then(|| (d * 1000 / interval / ncpu) as i64)
                    };
                    let cpu = rate(v.busy_ns, p.busy_ns).unwrap_or(0);
                    if cpu > 0 {
                        let rss = v.ps_rss.or(v.mem_rss).unwrap_or(0.0) / self.page_size;
                        let values = [
                            cpu,
                            rss as i64,
                            v.ctx.unwrap_or(0),
                            v.chars.or(v.bytes).unwrap_or(0) as i64,
                            rate(v.blkio_ns, p.blkio_ns).unwrap_or(0),
                        ];
                        act.push(Dataset::Act { pid: *pid, values }.render());
                    }
                    if v.busy_ns.is_some() {
                        p.busy_ns = v.busy_ns;
                    }
                    if v.blkio_ns.is_some() {
                        p.blkio_ns = v.blkio_ns;
                    }
                    p.time = time;
                }
            }
        }
        let gone: Vec<i64> = self
            .procs
            .keys()
            .filter(|p| !scan.contains_key(p))
            .copied()
            .collect();
        let mut stp = Vec::new();
        for pid in gone {
            self.procs.remove(&pid);
            stp.push(Dataset::Stp { pid }.render());
        }
        // dlt-kpi's order within a scan: NEW, STP, ACT.
        self.group(b"NEW", &new, time);
        self.group(b"STP", &stp, time);
        self.group(b"ACT", &act, time);
        let first = *self.last_chk.get_or_insert(time);
        if time.0 - first.0 >= self.check_ns {
            self.last_chk = Some(time);
            let chk: Vec<Vec<u8>> = self
                .procs
                .iter()
                .map(|(pid, p)| {
                    Dataset::Chk {
                        pid: *pid,
                        cmdline: p.cmdline.as_slice().into(),
                    }
                    .render()
                })
                .collect();
            self.group(b"CHK", &chk, time);
        }
    }

    fn flush_chk(&mut self) {
        if let Some(t) = self.chk_time.take() {
            let ds = std::mem::take(&mut self.chk_events);
            self.group(b"CHK", &ds, t);
        }
    }

    /// Take the values the derivation used out of a sample (they live on
    /// in the KPI datasets); `None` when nothing else is left.
    fn strip(&mut self, s: Sample) -> Option<Sample> {
        let before = s.metrics.len();
        let mut s = s;
        let mut used = 0u64;
        s.metrics.retain(|mv| {
            let u = self.uses.contains_key(&mv.metric);
            if u {
                used += mv.values.as_ref().map_or(1, |v| v.len() as u64);
            }
            !u
        });
        if used > 0 {
            let key = (
                "proc.*, hinv.ncpu and interrupt values".to_string(),
                "turned into KPI datasets (dlt-kpi units)".to_string(),
            );
            *self.loss.borrow_mut().degraded.entry(key).or_default() += used;
        }
        (s.metrics.len() == before || !s.metrics.is_empty()).then_some(s)
    }

    /// End of the stream: report what the source did not have.
    fn report_missing(&mut self) {
        if self.scans == 0 {
            return;
        }
        let has = |r: Role| self.seen.contains(&r);
        let mut l = self.loss.borrow_mut();
        let mut miss = |col: &str, why: &str| l.degrade(&format!("KPI {col}"), why);
        if !has(Role::Stime) {
            miss("ACT cpu", "the source has no proc.psinfo.stime: utime only");
        }
        if !has(Role::Ppid) {
            miss(
                "NEW ppid",
                "the source has no proc.psinfo.ppid: written as 0",
            );
        }
        if !has(Role::PsRss) && !has(Role::MemRss) {
            miss(
                "ACT rss",
                "the source has no proc.psinfo.rss or proc.memory.rss: written as 0",
            );
        }
        if !has(Role::Ctx) {
            miss(
                "ACT ctx",
                "the source has no proc.psinfo.vctxsw/nvctxsw: written as 0",
            );
        }
        if ![Role::Rchar, Role::Wchar, Role::ReadBytes, Role::WriteBytes]
            .iter()
            .any(|r| has(*r))
        {
            miss(
                "ACT io",
                "the source has no proc.io.rchar/wchar or read_bytes/write_bytes: written as 0",
            );
        }
        if !has(Role::Ncpu) && self.ncpu.is_none() {
            miss(
                "ACT cpu",
                "the source has no hinv.ncpu: per mille of one CPU",
            );
        }
    }
}

impl TraceReader for KpiFromProc {
    fn next_item(&mut self) -> Result<Option<Item>> {
        loop {
            if let Some(it) = self.queue.pop_front() {
                return Ok(Some(it));
            }
            let Some(item) = self.inner.next_item()? else {
                if self.active {
                    self.flush_chk();
                    let mut out = Vec::new();
                    self.asm.finish(&mut out);
                    self.asm.warnings.clear();
                    self.queue.extend(out);
                    self.report_missing();
                    self.active = false;
                    continue;
                }
                return Ok(None);
            };
            if self.active {
                match &item {
                    Item::Metric(m) => self.define_metric(m),
                    Item::EventType(t) => self.define_type(t),
                    Item::Indom(u) => self.indom(u),
                    Item::Event(e) => {
                        if !self.ev_roles.contains_key(&e.type_id)
                            || !matches!(self.ev_roles[&e.type_id], EvRole::Control { .. })
                        {
                            self.flush_chk();
                        }
                        self.event(e)
                    }
                    Item::Sample(s) => {
                        self.flush_chk();
                        self.sample(s);
                        let Item::Sample(s) = item else {
                            unreachable!()
                        };
                        if let Some(s) = self.strip(s) {
                            self.queue.push_back(Item::Sample(s));
                        }
                        continue;
                    }
                    _ => {}
                }
            }
            // The source's own items follow what was derived from them.
            self.queue.push_back(item);
        }
    }
    pass_to_inner!(described);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::kpi::schema;
    use std::sync::Arc;

    fn ev(type_id: EventTypeId, t: i64, cpu: u32, fields: Vec<Value>) -> Item {
        Item::Event(Event {
            time: Timestamp(t),
            raw_clock: None,
            type_id,
            cpu: Some(cpu),
            stream: None,
            fields,
            extras: Extras::default(),
        })
    }

    /// The KPI events the stage adds: (kind, time, fields as text).
    fn derived(items: Vec<Item>, source: FormatId) -> Vec<(String, i64, String)> {
        let trace = Trace {
            header: Header::new(source, "x"),
            items,
        };
        let mut k = KpiFromProc::wrap(Box::new(VecReader::new(trace)));
        let mut out = Vec::new();
        while let Some(it) = k.next_item().unwrap() {
            if let Item::Event(e) = it {
                let kind = match e.type_id {
                    schema::NEW_TYPE => "NEW",
                    schema::STP_TYPE => "STP",
                    schema::CHK_TYPE => "CHK",
                    _ => continue,
                };
                let f: Vec<String> = e.fields.iter().map(|v| v.text()).collect();
                out.push((kind.to_string(), e.time.0, f.join(";")));
            }
        }
        out
    }

    fn ltt_types() -> Vec<Item> {
        let u4 = || FieldType::Uint(4);
        let sched = EventType::new(
            10,
            "core",
            "schedchange",
            vec![
                Field::new("out", u4()),
                Field::new("in", u4()),
                Field::new("out_state", u4()),
            ],
        );
        let labels = ["KTHREAD", "FORK", "EXIT", "WAIT", "SIGNAL", "WAKEUP"]
            .iter()
            .enumerate()
            .map(|(i, l)| (i as i64 + 1, format!("TRACE_EV_PROCESS_{l}")))
            .collect();
        let process = EventType::new(
            11,
            "core",
            "process",
            vec![
                Field::new("event_sub_id", FieldType::Enum { size: 1, labels }),
                Field::new("event_data1", u4()),
                Field::new("event_data2", u4()),
            ],
        );
        let control = EventType::new(
            12,
            "control",
            "process",
            vec![
                Field::new("name", FieldType::String),
                Field::new("pid", u4()),
                Field::new("ppid", u4()),
            ],
        );
        [sched, process, control]
            .into_iter()
            .map(|t| Item::EventType(Arc::new(t)))
            .collect()
    }

    #[test]
    fn ltt_fork_exit_and_control_processes() {
        let s = |x: &str| Value::Str(x.into());
        let mut items = ltt_types();
        items.extend([
            ev(12, 1, 0, vec![s("init"), Value::U64(1), Value::U64(0)]),
            ev(12, 1, 0, vec![s("bash"), Value::U64(100), Value::U64(1)]),
            ev(
                10,
                2,
                0,
                vec![Value::U64(0), Value::U64(100), Value::U64(0)],
            ),
            // FORK on CPU 0 while bash runs there: its child 200.
            ev(
                11,
                3,
                0,
                vec![Value::Enum(2), Value::U64(200), Value::U64(0)],
            ),
            // A wakeup is no process lifecycle event.
            ev(
                11,
                4,
                0,
                vec![Value::Enum(6), Value::U64(100), Value::U64(0)],
            ),
            ev(
                10,
                5,
                1,
                vec![Value::U64(0), Value::U64(200), Value::U64(0)],
            ),
            // EXIT on CPU 1, where 200 runs.
            ev(11, 6, 1, vec![Value::Enum(3), Value::U64(0), Value::U64(0)]),
        ]);
        let got = derived(items, FormatId::Ltt);
        let want = [
            ("CHK", 1, "1;\"init\""),
            ("CHK", 1, "100;\"bash\""),
            ("NEW", 3, "200;100;\"bash\""),
            ("STP", 6, "200"),
        ];
        let want: Vec<(String, i64, String)> = want
            .iter()
            .map(|(k, t, f)| (k.to_string(), *t, f.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_stream_with_its_own_kpi_data_is_left_alone() {
        let mut items: Vec<Item> = schema::definitions();
        items.extend(ltt_types());
        items.push(ev(
            12,
            1,
            0,
            vec![Value::Str("init".into()), Value::U64(1), Value::U64(0)],
        ));
        assert!(derived(items.clone(), FormatId::Ltt).is_empty());
        // KPI and DLT sources are never derived from.
        let items = ltt_types()
            .into_iter()
            .chain([ev(
                12,
                1,
                0,
                vec![Value::Str("x".into()), Value::U64(5), Value::U64(0)],
            )])
            .collect::<Vec<_>>();
        assert!(derived(items.clone(), FormatId::Dlt).is_empty());
        assert_eq!(derived(items, FormatId::Pcp).len(), 1);
    }
}
