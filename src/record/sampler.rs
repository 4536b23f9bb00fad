//! One scan of /proc → model items, with dlt-kpi's semantics (spec
//! kpi-dlt §3) and the documented differences: the real CPU count, the
//! measured interval as divisor, every /proc/interrupts row and CPU, comm
//! parsed by the last `)`, and PID reuse reported as STP + NEW.

use super::clock;
use super::procfs::{self, IrqRow};
use super::sysmetrics::{self, SysInput, SysMetrics};
use crate::formats::kpi::schema;
use crate::model::*;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Event type ids of the LTT-style control events (after KPI's 1..=3).
pub const CONTROL_INTERRUPT_TYPE: EventTypeId = 4;
pub const CONTROL_PROCESS_TYPE: EventTypeId = 5;
pub const STREAM_INTERRUPTS: &str = "control/interrupts";
pub const STREAM_PROCESSES: &str = "control/processes";

#[derive(Debug, Clone)]
pub struct Config {
    pub proc_root: PathBuf,
    pub check_interval_ns: u64,
    pub ncpu: u32,
    pub clk_tck: u64,
    pub page_size: u64,
}

impl Config {
    /// The live system's values.
    pub fn system(check_interval_ns: u64) -> Config {
        // SAFETY: sysconf has no memory effects.
        let (ncpu, tck, page) = unsafe {
            (
                libc::sysconf(libc::_SC_NPROCESSORS_ONLN),
                libc::sysconf(libc::_SC_CLK_TCK),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        let ncpu = if ncpu > 0 {
            ncpu as u32
        } else {
            count_cpuinfo_processors().max(1)
        };
        Config {
            proc_root: PathBuf::from("/proc"),
            check_interval_ns,
            ncpu,
            clk_tck: if tck > 0 { tck as u64 } else { 100 },
            page_size: if page > 0 { page as u64 } else { 4096 },
        }
    }
}

/// Fallback CPU count: `processor` lines in the *whole* of /proc/cpuinfo
/// (dlt-kpi counts only the first 4095 bytes, spec §3.4).
fn count_cpuinfo_processors() -> u32 {
    let mut buf = Vec::new();
    if procfs::read_into(std::path::Path::new("/proc/cpuinfo"), &mut buf).is_err() {
        return 0;
    }
    buf.split(|&c| c == b'\n')
        .filter(|l| l.starts_with(b"processor") && l.contains(&b':'))
        .count() as u32
}

#[derive(Debug, Clone)]
struct Proc {
    /// Read once, when first seen (as dlt-kpi).
    ppid: i64,
    cmdline: String,
    start_time: u64,
    last_cpu: u64,
    last_blkio: u64,
    /// Last rchar + wchar read (kept when /proc/PID/io is unreadable).
    io_bytes: u64,
    ctxsw: i64,
    gen: u64,
}

/// One ACT dataset: pid, cpu, rss, ctx, io_bytes, io_wait.
type Act = (i32, u64, i64, i64, u64, u64);

/// Counters for the status line and the final report.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub scans: u64,
    pub processes: u64,
    pub events: u64,
    pub samples: u64,
    pub new: u64,
    pub stp: u64,
    pub pid_reuse: u64,
}

pub struct Sampler {
    cfg: Config,
    sys: SysMetrics,
    procs: HashMap<i32, Proc>,
    gen: u64,
    prev_mono: Option<i64>,
    last_chk_mono: Option<i64>,
    last_time: i64,
    kpi_irq_ids: HashMap<(String, u32), InstId>,
    pcp_irq_ids: HashMap<(String, u32), InstId>,
    next_group: u64,
    dir: Option<procfs::ProcDir>,
    buf: Vec<u8>,
    buf2: Vec<u8>,
    pub stats: Stats,
}

/// dlt-kpi's rate: busy ms = ticks × 1000 / CLK_TCK, then × 1000 per
/// second of interval, per CPU, in integer arithmetic; the interval is the
/// measured one, in µs.
pub fn kpi_rate(delta_ticks: u64, clk_tck: u64, interval_us: u64, ncpu: u32) -> u64 {
    let busy_ms = delta_ticks.saturating_mul(1000) / clk_tck.max(1);
    if interval_us == 0 || ncpu == 0 {
        return busy_ms;
    }
    busy_ms.saturating_mul(1_000_000) / interval_us / ncpu as u64
}

impl Sampler {
    pub fn new(cfg: Config) -> Sampler {
        Sampler {
            cfg,
            sys: SysMetrics::new(),
            procs: HashMap::new(),
            gen: 0,
            prev_mono: None,
            last_chk_mono: None,
            last_time: i64::MIN,
            kpi_irq_ids: HashMap::new(),
            pcp_irq_ids: HashMap::new(),
            next_group: 0,
            dir: None,
            buf: Vec::with_capacity(4096),
            buf2: Vec::with_capacity(4096),
            stats: Stats::default(),
        }
    }

    /// Extras of the next KPI group of kind `k` (`kpi.kind`, `kpi.group`).
    fn group(&mut self, k: &str) -> Extras {
        let mut e = Extras::default();
        e.set(schema::X_KIND, ExtraValue::Str(k.to_string()));
        e.set(schema::X_GROUP, ExtraValue::U64(self.next_group));
        self.next_group += 1;
        e
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Every definition, before any data.
    pub fn definitions(&self) -> Vec<Item> {
        let mut v = schema::definitions();
        v.extend(control_event_types().into_iter().map(Item::EventType));
        v.extend(self.sys.descriptors().into_iter().map(Item::Metric));
        v
    }

    /// Read a /proc file; `pid` None = a top-level file.
    fn read(&mut self, pid: Option<i32>, file: &str, second: bool) -> bool {
        let buf = if second {
            &mut self.buf2
        } else {
            &mut self.buf
        };
        if self.dir.is_none() {
            self.dir = procfs::ProcDir::open(&self.cfg.proc_root).ok();
        }
        match &mut self.dir {
            Some(d) => d.read(pid, file, buf, pid.is_some()).is_ok(),
            None => false,
        }
    }

    /// Scan once, appending the items of this interval to `out`.
    pub fn scan(&mut self, out: &mut Vec<Item>) {
        let mono = clock::monotonic_ns();
        let raw = clock::read_counter();
        // Keep the stream's time non-decreasing even if the wall clock steps back.
        let now = clock::realtime_ns().max(self.last_time);
        self.last_time = now;
        let time = Timestamp(now);
        let first = self.prev_mono.is_none();
        let interval_us = self
            .prev_mono
            .map(|p| ((mono - p) / 1000).max(1) as u64)
            .unwrap_or(0);
        self.prev_mono = Some(mono);
        self.gen += 1;
        let gen = self.gen;
        self.stats.scans += 1;

        let ev = |type_id, fields, extras: Extras| {
            Item::Event(Event {
                time,
                raw_clock: raw,
                type_id,
                cpu: None,
                stream: None,
                fields,
                extras,
            })
        };
        // ---- processes
        let mut new: Vec<i32> = Vec::new();
        let mut reused: Vec<i32> = Vec::new();
        let mut act: Vec<Act> = Vec::new();
        let mut control_procs: Vec<Item> = Vec::new();
        let pids = self.list_pids();
        for pid in pids {
            if !self.read(Some(pid), "stat", false) {
                continue; // vanished between readdir and read: not present
            }
            let Some(st) = procfs::parse_stat(&self.buf) else {
                continue;
            };
            let total = st.utime.saturating_add(st.stime);
            let known = self.procs.get(&pid).map(|p| p.start_time);
            match known {
                Some(start) if start == st.start_time => {
                    let cfg = &self.cfg;
                    let p = self.procs.get_mut(&pid).expect("known pid");
                    p.gen = gen;
                    // dlt-kpi: no value while the previous total is 0 or the
                    // counter went backwards.
                    let cpu = if p.last_cpu > 0 && p.last_cpu <= total {
                        kpi_rate(total - p.last_cpu, cfg.clk_tck, interval_us, cfg.ncpu)
                    } else {
                        0
                    };
                    let io_wait = kpi_rate(
                        st.blkio_ticks.saturating_sub(p.last_blkio),
                        cfg.clk_tck,
                        interval_us,
                        cfg.ncpu,
                    );
                    p.last_cpu = total;
                    p.last_blkio = st.blkio_ticks;
                    if cpu > 0 {
                        act.push((pid, cpu, st.rss, 0, 0, io_wait));
                    }
                }
                other => {
                    // New process, or a reused PID (different start time).
                    if !self.read(Some(pid), "cmdline", true) {
                        continue; // vanished mid-read: report it next scan if it is back
                    }
                    let mut cmdline = procfs::cmdline_arg0(&self.buf2);
                    if cmdline.is_empty() {
                        // Kernel threads and zombies: comm in parentheses, as
                        // dlt-kpi, but the whole comm (spec §3.8 cuts at a space).
                        cmdline = format!("({})", String::from_utf8_lossy(&st.comm));
                    }
                    if other.is_some() {
                        reused.push(pid);
                        self.stats.pid_reuse += 1;
                    }
                    if first {
                        control_procs.push(self.control_process(pid, &st, time, raw));
                    }
                    new.push(pid);
                    self.procs.insert(
                        pid,
                        Proc {
                            ppid: st.ppid,
                            cmdline,
                            start_time: st.start_time,
                            last_cpu: total,
                            last_blkio: st.blkio_ticks,
                            io_bytes: 0,
                            ctxsw: 0,
                            gen,
                        },
                    );
                }
            }
        }
        // ctx and io are only read for the processes ACT lists.
        for a in &mut act {
            let pid = a.0;
            let ctx = self
                .read(Some(pid), "status", false)
                .then(|| procfs::status_ctxsw(&self.buf))
                .flatten();
            let io = self
                .read(Some(pid), "io", false)
                .then(|| procfs::io_bytes(&self.buf))
                .flatten();
            if let Some(p) = self.procs.get_mut(&pid) {
                if let Some(c) = ctx {
                    p.ctxsw = c;
                }
                if let Some(i) = io {
                    p.io_bytes = i;
                }
                a.3 = p.ctxsw;
                a.4 = p.io_bytes;
            }
        }
        let mut gone: Vec<i32> = self
            .procs
            .iter()
            .filter(|(_, p)| p.gen != gen)
            .map(|(pid, _)| *pid)
            .collect();
        gone.sort_unstable();
        for pid in &gone {
            self.procs.remove(pid);
        }
        new.sort_unstable();
        reused.sort_unstable();
        act.sort_unstable_by_key(|a| a.0);

        out.extend(control_procs);
        // Groups in dlt-kpi's order (NEW, STP, ACT, then IRQ and CHK), each
        // numbered as the KPI reader numbers BEG..END groups.
        if !new.is_empty() || !gone.is_empty() || first {
            // The first membership is a full one (libpcp needs a full indom
            // record before any delta); later ones are one delta per scan
            // with additions and removals together (two indom records with
            // one timestamp crash libpcp 6's pmdumplog). A reused PID is
            // re-added under its new name (a rename), never removed, so the
            // update reads the same whatever order a writer applies it in.
            out.push(Item::Indom(IndomUpdate {
                time,
                id: schema::PROC_INDOM,
                kind: IndomKind::full_if(first),
                instances: new
                    .iter()
                    .map(|pid| Instance {
                        id: *pid,
                        name: schema::proc_instance_name(*pid as i64, &self.procs[pid].cmdline),
                    })
                    .collect(),
                removed: gone.clone(),
                extras: Extras::default(),
            }));
        }
        let stp_group = (!gone.is_empty() || !reused.is_empty()).then(|| self.group("STP"));
        for pid in &reused {
            let x = stp_group.clone().unwrap_or_default();
            out.push(ev(schema::STP_TYPE, vec![Value::I64(*pid as i64)], x));
        }
        if !new.is_empty() {
            let x = self.group("NEW");
            for pid in &new {
                let p = &self.procs[pid];
                out.push(ev(
                    schema::NEW_TYPE,
                    vec![
                        Value::I64(*pid as i64),
                        Value::I64(p.ppid),
                        Value::Str(p.cmdline.clone()),
                    ],
                    x.clone(),
                ));
            }
        }
        for pid in &gone {
            let x = stp_group.clone().unwrap_or_default();
            out.push(ev(schema::STP_TYPE, vec![Value::I64(*pid as i64)], x));
        }
        self.stats.new += new.len() as u64;
        self.stats.stp += (gone.len() + reused.len()) as u64;
        self.stats.events += (new.len() + gone.len() + reused.len()) as u64;
        if !act.is_empty() {
            let col = |f: &dyn Fn(&Act) -> Value| -> Vec<(InstId, Value)> {
                act.iter().map(|a| (a.0, f(a))).collect()
            };
            let cols: [Vec<(InstId, Value)>; 5] = [
                col(&|a| Value::U64(a.1)),
                col(&|a| Value::I64(a.2)),
                col(&|a| Value::I64(a.3)),
                col(&|a| Value::U64(a.4)),
                col(&|a| Value::U64(a.5)),
            ];
            out.push(Item::Sample(Sample {
                time,
                raw_clock: raw,
                metrics: schema::ACT_METRICS
                    .iter()
                    .zip(cols)
                    .map(|(m, v)| MetricValues {
                        metric: *m,
                        values: Ok(v),
                    })
                    .collect(),
                extras: self.group("ACT"),
            }));
            self.stats.samples += 1;
        }

        // ---- interrupts
        let irqs = if self.read(None, "interrupts", false) {
            procfs::parse_interrupts(&self.buf)
        } else {
            Vec::new()
        };
        if first {
            for r in &irqs {
                if let Some(n) = procfs::parse_u64(r.name.as_bytes()) {
                    out.push(control_interrupt(n, r, time, raw));
                }
            }
        }
        self.irq_items(&irqs, time, raw, first, out);

        // ---- system metrics
        let stat = if self.read(None, "stat", false) {
            procfs::parse_proc_stat(&self.buf)
        } else {
            procfs::ProcStat::default()
        };
        let meminfo = if self.read(None, "meminfo", false) {
            procfs::meminfo_get(&self.buf, &self.sys.mem_keys)
        } else {
            vec![None; self.sys.mem_keys.len()]
        };
        let load = self
            .read(None, "loadavg", false)
            .then(|| procfs::parse_loadavg(&self.buf))
            .flatten();
        if first {
            let full =
                |id, instances| Item::Indom(IndomUpdate::new(time, id, IndomKind::Full, instances));
            let cpus = stat.percpu.iter();
            out.push(full(
                sysmetrics::CPU_INDOM,
                cpus.map(|(n, _)| Instance::new(*n as InstId, format!("cpu{n}")))
                    .collect(),
            ));
            out.push(full(
                sysmetrics::LOADAVG_INDOM,
                [1, 5, 15]
                    .iter()
                    .map(|m| Instance::new(*m, format!("{m} minute")))
                    .collect(),
            ));
        }
        let pcp_ids: Vec<Vec<InstId>> = irqs
            .iter()
            .map(|r| {
                r.counts
                    .iter()
                    .map(|(cpu, _)| {
                        self.pcp_irq_ids
                            .get(&(r.name.clone(), *cpu))
                            .copied()
                            .unwrap_or(-1)
                    })
                    .collect()
            })
            .collect();
        let values = self.sys.values(&SysInput {
            stat: &stat,
            meminfo: &meminfo,
            load,
            irqs: &irqs,
            irq_inst: &pcp_ids,
            ncpu: self.cfg.ncpu,
            page_size: self.cfg.page_size,
            clk_tck: self.cfg.clk_tck,
        });
        if !values.is_empty() {
            out.push(Item::Sample(Sample {
                time,
                raw_clock: raw,
                metrics: values,
                extras: Extras::default(),
            }));
            self.stats.samples += 1;
        }

        // ---- CHK: at start (as dlt-kpi) and every check interval
        let chk_due = match self.last_chk_mono {
            None => true,
            Some(l) => (mono - l) as u64 >= self.cfg.check_interval_ns,
        };
        if chk_due && self.cfg.check_interval_ns > 0 {
            self.last_chk_mono = Some(mono);
            let mut pids: Vec<i32> = self.procs.keys().copied().collect();
            pids.sort_unstable();
            if !pids.is_empty() {
                let x = self.group("CHK");
                for pid in pids {
                    let p = &self.procs[&pid];
                    out.push(ev(
                        schema::CHK_TYPE,
                        vec![Value::I64(pid as i64), Value::Str(p.cmdline.clone())],
                        x.clone(),
                    ));
                    self.stats.events += 1;
                }
            }
        }
        self.stats.processes = self.procs.len() as u64;
    }

    fn list_pids(&self) -> Vec<i32> {
        let Ok(rd) = std::fs::read_dir(&self.cfg.proc_root) else {
            return Vec::new();
        };
        let mut v: Vec<i32> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let n = e.file_name();
                let s = n.to_str()?;
                if s.bytes().all(|c| c.is_ascii_digit()) {
                    s.parse::<i32>().ok().filter(|p| *p > 0)
                } else {
                    None
                }
            })
            .collect();
        v.sort_unstable();
        v
    }

    fn control_process(
        &mut self,
        pid: i32,
        st: &procfs::Stat,
        time: Timestamp,
        raw: Option<u64>,
    ) -> Item {
        let mut s = if self.read(Some(pid), "status", true) {
            procfs::parse_status(&self.buf2)
        } else {
            procfs::Status::default()
        };
        if s.name.is_empty() {
            s.name = String::from_utf8_lossy(&st.comm).into_owned();
            s.state = st.state;
            s.ppid = st.ppid.max(0) as u64;
        }
        let u = |v: u64| Value::U64(v & 0xffff_ffff);
        let mut fields = vec![
            Value::Str(s.name),
            u(pid as u64),
            u(s.ppid),
            u(s.tracer_pid),
        ];
        fields.extend(s.uid.iter().map(|v| u(*v)));
        fields.extend(s.gid.iter().map(|v| u(*v)));
        fields.push(Value::Enum(procfs::ltt_state(s.state)));
        Item::Event(Event {
            time,
            raw_clock: raw,
            type_id: CONTROL_PROCESS_TYPE,
            cpu: None,
            stream: Some(STREAM_PROCESSES.into()),
            fields,
            extras: Extras::default(),
        })
    }

    fn irq_items(
        &mut self,
        irqs: &[IrqRow],
        time: Timestamp,
        raw: Option<u64>,
        first: bool,
        out: &mut Vec<Item>,
    ) {
        let mut kpi_new = Vec::new();
        let mut pcp_new = Vec::new();
        let mut vals = Vec::new();
        for r in irqs {
            for (cpu, n) in &r.counts {
                let key = (r.name.clone(), *cpu);
                let next = self.kpi_irq_ids.len() as InstId;
                let id = *self.kpi_irq_ids.entry(key.clone()).or_insert_with(|| {
                    kpi_new.push(Instance {
                        id: next,
                        name: schema::irq_instance_name(&r.name, *cpu),
                    });
                    next
                });
                vals.push((id, Value::U64(*n)));
                if !sysmetrics::is_global_irq_row(&r.name) {
                    let next = self.pcp_irq_ids.len() as InstId;
                    self.pcp_irq_ids.entry(key).or_insert_with(|| {
                        pcp_new.push(Instance {
                            id: next,
                            name: sysmetrics::interrupt_cpu_name(&r.name, *cpu),
                        });
                        next
                    });
                }
            }
        }
        // The KPI indom is declared at the first scan even when empty.
        for (id, new, always) in [
            (schema::IRQ_INDOM, kpi_new, first),
            (sysmetrics::INTERRUPT_CPU_INDOM, pcp_new, false),
        ] {
            if always || !new.is_empty() {
                let kind = IndomKind::full_if(first);
                out.push(Item::Indom(IndomUpdate::new(time, id, kind, new)));
            }
        }
        if !vals.is_empty() {
            out.push(Item::Sample(Sample {
                time,
                raw_clock: raw,
                metrics: vec![MetricValues {
                    metric: schema::IRQ_COUNT,
                    values: Ok(vals),
                }],
                extras: self.group("IRQ"),
            }));
            self.stats.samples += 1;
        }
    }
}

fn control_interrupt(number: u64, r: &IrqRow, time: Timestamp, raw: Option<u64>) -> Item {
    let total: u64 = r.counts.iter().map(|c| c.1).fold(0, u64::saturating_add);
    let mut desc = r.desc.splitn(2, ' ');
    let controller = desc.next().unwrap_or("").to_string();
    let name = desc.next().unwrap_or("").to_string();
    Item::Event(Event {
        time,
        raw_clock: raw,
        type_id: CONTROL_INTERRUPT_TYPE,
        cpu: None,
        stream: Some(STREAM_INTERRUPTS.into()),
        fields: vec![
            Value::U64(number & 0xffff_ffff),
            Value::U64(total.min(u32::MAX as u64)),
            Value::Str(controller),
            Value::Str(name),
        ],
        extras: Extras::default(),
    })
}

/// The LTT design's `control` facility events (spec ltt §5.13).
pub fn control_event_types() -> Vec<Arc<EventType>> {
    let u4 = |n: &str| Field::new(n, FieldType::Uint(4));
    let mut irq = EventType::new(
        CONTROL_INTERRUPT_TYPE,
        "control",
        "interrupt",
        vec![
            u4("number"),
            u4("count"),
            Field::new("controller", FieldType::String),
            Field::new("name", FieldType::String),
        ],
    );
    irq.description = Some("an interrupt line at trace start (/proc/interrupts)".into());
    let mut fields = vec![Field::new("name", FieldType::String)];
    for n in [
        "pid",
        "ppid",
        "tracer_pid",
        "uid",
        "euid",
        "suid",
        "fsuid",
        "gid",
        "egid",
        "sgid",
        "fsgid",
    ] {
        fields.push(u4(n));
    }
    fields.push(Field::new(
        "state",
        FieldType::Enum {
            size: 4,
            labels: [
                "Running",
                "WaitInterruptible",
                "WaitUninterruptible",
                "Zombie",
                "Traced",
                "Paging",
            ]
            .iter()
            .enumerate()
            .map(|(i, l)| (i as i64, l.to_string()))
            .collect(),
        },
    ));
    let mut proc_ = EventType::new(CONTROL_PROCESS_TYPE, "control", "process", fields);
    proc_.description = Some("a process at trace start (/proc/PID/status)".into());
    vec![Arc::new(irq), Arc::new(proc_)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_formula() {
        // 2 CPUs, 500 ms: one tick (10 ms) → 10, a full core → 500 (spec §3.4).
        assert_eq!(kpi_rate(1, 100, 500_000, 2), 10);
        assert_eq!(kpi_rate(50, 100, 500_000, 2), 500);
        // Measured 510 ms instead of 500: the divisor follows the measurement.
        assert_eq!(kpi_rate(51, 100, 510_000, 2), 500);
        assert_eq!(kpi_rate(0, 100, 500_000, 2), 0);
    }
}

#[cfg(test)]
mod fake_proc_tests {
    use super::*;
    use std::fs;
    use std::path::Path;

    fn stat(pid: i32, comm: &str, ppid: i32, ticks: u64, start: u64) -> String {
        format!(
            "{pid} ({comm}) S {ppid} {pid} 0 0 -1 4194304 10 0 0 0 {ticks} 0 0 0 20 0 1 0 \
             {start} 1000000 77 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 3 0 0\n"
        )
    }

    fn put(root: &Path, pid: i32, st: &str, cmdline: &[u8], io: Option<&str>) {
        let d = root.join(pid.to_string());
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("stat"), st).unwrap();
        fs::write(d.join("cmdline"), cmdline).unwrap();
        fs::write(
            d.join("status"),
            "Name:\tx\nvoluntary_ctxt_switches:\t5\nnonvoluntary_ctxt_switches:\t2\n",
        )
        .unwrap();
        match io {
            Some(t) => fs::write(d.join("io"), t).unwrap(),
            None => {
                let _ = fs::remove_file(d.join("io"));
            }
        }
    }

    fn events(items: &[Item], ty: EventTypeId) -> Vec<Vec<Value>> {
        items
            .iter()
            .filter_map(|i| match i {
                Item::Event(e) if e.type_id == ty => Some(e.fields.clone()),
                _ => None,
            })
            .collect()
    }

    fn act(items: &[Item], metric: MetricId) -> Vec<(InstId, Value)> {
        items
            .iter()
            .filter_map(|i| match i {
                Item::Sample(s) => s
                    .metrics
                    .iter()
                    .find(|m| m.metric == metric)
                    .and_then(|m| m.values.clone().ok()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    #[test]
    fn lifecycle_on_a_synthetic_proc() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(
            root.join("interrupts"),
            "  CPU0 CPU1\n 9: 1 2 IO-APIC 9-fasteoi acpi\nERR: 0\n",
        )
        .unwrap();
        put(
            root,
            1,
            &stat(1, "init", 0, 100, 1),
            b"/sbin/init\0",
            Some("rchar: 1\nwchar: 2\n"),
        );
        // comm with spaces and parentheses; the real ppid must survive.
        put(
            root,
            20,
            &stat(20, "bu sy) (x", 1, 50, 5),
            b"busy one\0arg\0",
            None,
        );
        put(root, 30, &stat(30, "kworker/0:1", 2, 0, 7), b"", None);
        // A directory without files: vanished between readdir and read.
        fs::create_dir_all(root.join("40")).unwrap();
        let mut s = Sampler::new(Config {
            proc_root: root.to_path_buf(),
            check_interval_ns: 1,
            ncpu: 2,
            clk_tck: 100,
            page_size: 4096,
        });
        let mut a = Vec::new();
        s.scan(&mut a);
        let new = events(&a, schema::NEW_TYPE);
        assert_eq!(
            new,
            vec![
                vec![
                    Value::I64(1),
                    Value::I64(0),
                    Value::Str("/sbin/init".into())
                ],
                vec![Value::I64(20), Value::I64(1), Value::Str("busy one".into())],
                vec![
                    Value::I64(30),
                    Value::I64(2),
                    Value::Str("(kworker/0:1)".into())
                ],
            ]
        );
        assert_eq!(events(&a, CONTROL_PROCESS_TYPE).len(), 3);
        assert_eq!(events(&a, CONTROL_INTERRUPT_TYPE).len(), 1);
        assert_eq!(events(&a, schema::CHK_TYPE).len(), 3);
        assert!(act(&a, schema::CPU).is_empty(), "no ACT on the first scan");
        let irq = act(&a, schema::IRQ_COUNT);
        assert_eq!(irq.len(), 3, "9:cpu0, 9:cpu1, ERR:cpu0");

        std::thread::sleep(std::time::Duration::from_millis(100));
        // pid 20 used 5 ticks (50 ms); pid 1 none; pid 30 is replaced by a
        // new process with the same PID (start time differs); io of pid 1
        // becomes unreadable.
        put(root, 1, &stat(1, "init", 0, 100, 1), b"/sbin/init\0", None);
        put(
            root,
            20,
            &stat(20, "bu sy) (x", 1, 55, 5),
            b"busy one\0",
            Some("rchar: 7\nwchar: 3\n"),
        );
        put(root, 30, &stat(30, "sh", 1, 3, 99), b"sh\0-c\0", None);
        let mut b = Vec::new();
        s.scan(&mut b);
        let stp = events(&b, schema::STP_TYPE);
        assert_eq!(stp, vec![vec![Value::I64(30)]], "PID reuse is STP + NEW");
        let new = events(&b, schema::NEW_TYPE);
        assert_eq!(
            new,
            vec![vec![Value::I64(30), Value::I64(1), Value::Str("sh".into())]]
        );
        let cpu = act(&b, schema::CPU);
        assert_eq!(cpu.len(), 1, "only pid 20 was busy: {cpu:?}");
        assert_eq!(cpu[0].0, 20);
        // 50 ms busy over ~100 ms on 2 CPUs ≈ 250 per mille (measured interval).
        let v = cpu[0].1.as_f64().unwrap();
        assert!((120.0..=260.0).contains(&v), "{v}");
        assert_eq!(act(&b, schema::RSS), vec![(20, Value::I64(77))]);
        assert_eq!(act(&b, schema::CTXSW), vec![(20, Value::I64(7))]);
        assert_eq!(act(&b, schema::IO_BYTES), vec![(20, Value::U64(10))]);

        // pid 20 vanishes; its io keeps the last value meanwhile.
        fs::remove_dir_all(root.join("20")).unwrap();
        let mut c = Vec::new();
        s.scan(&mut c);
        assert_eq!(events(&c, schema::STP_TYPE), vec![vec![Value::I64(20)]]);
        let upd: Vec<&IndomUpdate> = c
            .iter()
            .filter_map(|i| match i {
                Item::Indom(u) if u.id == schema::PROC_INDOM => Some(u),
                _ => None,
            })
            .collect();
        assert_eq!(upd.len(), 1);
        assert_eq!(upd[0].removed, vec![20]);
        assert_eq!(s.stats.pid_reuse, 1);
    }
}
