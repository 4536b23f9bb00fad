//! System-wide metrics under the names, pmIDs, types, semantics and units
//! of PCP's Linux PMDA (domain 60), so an archive the recorder writes reads
//! naturally in pmrep/pmchart. The numbers were checked against
//! `pminfo -L -m -d` with PCP 6's pmda_linux.so on this machine.

use super::procfs::{CpuTimes, IrqRow, ProcStat};
use crate::formats::kpi::schema::{indom, pmid};
use crate::model::*;
use std::sync::Arc;

pub const LINUX: u32 = 60;
/// kernel.percpu.cpu.* instances: `cpuN`, id N.
pub const CPU_INDOM: IndomId = indom(LINUX, 0);
/// kernel.all.load instances 1, 5, 15.
pub const LOADAVG_INDOM: IndomId = indom(LINUX, 2);
/// kernel.percpu.interrupts instances `ROW::cpuN`, ids by first appearance.
pub const INTERRUPT_CPU_INDOM: IndomId = indom(LINUX, 40);

const MS: Units = Units::time(2);
const KB: Units = Units::space(1);
const SEC: Units = Units::time(3);
const COUNT: Units = Units::count();
const BYTE: Units = Units::bytes();

/// Where a metric's value comes from.
#[derive(Clone, Copy)]
enum Src {
    /// A /proc/stat cpu column (ticks, converted to ms), all CPUs or per CPU.
    AllCpu(fn(&CpuTimes) -> u64),
    PerCpu(fn(&CpuTimes) -> u64),
    Stat(fn(&ProcStat) -> u64),
    BootTime,
    /// /proc/meminfo key (kB), or MemTotal − MemFree.
    Mem(&'static str),
    MemUsed,
    Load,
    NProcs,
    NCpu,
    PageSize,
    PerCpuInterrupts,
    /// The single-count ERR / MIS rows of /proc/interrupts.
    IrqRow(&'static str),
}

#[derive(Clone, Copy)]
struct Def {
    name: &'static str,
    cluster: u32,
    item: u32,
    vtype: ValueType,
    sem: Semantics,
    units: Units,
    indom: Option<IndomId>,
    help: &'static str,
    src: Src,
}

macro_rules! cpu_defs {
    ($($suffix:literal, $all:literal, $per:literal, $f:expr, $help:literal;)*) => {
        &[$(
            Def { name: concat!("kernel.all.cpu.", $suffix), cluster: 0, item: $all,
                  vtype: ValueType::U64, sem: Semantics::Counter, units: MS, indom: None,
                  help: concat!("total ", $help, " CPU time from /proc/stat for all CPUs"),
                  src: Src::AllCpu($f) },
            Def { name: concat!("kernel.percpu.cpu.", $suffix), cluster: 0, item: $per,
                  vtype: ValueType::U64, sem: Semantics::Counter, units: MS,
                  indom: Some(CPU_INDOM),
                  help: concat!("percpu ", $help, " CPU time from /proc/stat"),
                  src: Src::PerCpu($f) },
        )*]
    };
}

static CPU_DEFS: &[Def] = cpu_defs! {
    "user", 20, 0, |c| c.user, "user (including guest)";
    "nice", 21, 1, |c| c.nice, "nice user (including guest nice)";
    "sys", 22, 2, |c| c.system, "sys";
    "idle", 23, 3, |c| c.idle, "idle";
    "wait.total", 35, 30, |c| c.iowait, "I/O wait";
    "intr", 34, 31, |c| c.irq + c.softirq, "interrupt (hard + soft)";
    "irq.soft", 53, 56, |c| c.softirq, "soft interrupt";
    "irq.hard", 54, 57, |c| c.irq, "hard interrupt";
    "steal", 55, 58, |c| c.steal, "virtualisation steal";
    "guest", 60, 61, |c| c.guest, "virtual guest";
    "guest_nice", 81, 83, |c| c.guest_nice, "virtual guest nice";
    "vuser", 78, 76, |c| c.user.saturating_sub(c.guest), "user (excluding guest)";
    "vnice", 82, 84, |c| c.nice.saturating_sub(c.guest_nice), "nice user (excluding guest nice)";
};

#[allow(clippy::too_many_arguments)] // a table row
fn d(
    name: &'static str,
    cluster: u32,
    item: u32,
    vtype: ValueType,
    sem: Semantics,
    units: Units,
    help: &'static str,
    src: Src,
) -> Def {
    Def {
        name,
        cluster,
        item,
        vtype,
        sem,
        units,
        indom: None,
        help,
        src,
    }
}

fn other_defs() -> Vec<Def> {
    use Semantics::*;
    use ValueType::*;
    let mut v = vec![
        d(
            "kernel.all.intr",
            0,
            12,
            U64,
            Counter,
            COUNT,
            "interrupt count from /proc/stat",
            Src::Stat(|s| s.intr),
        ),
        d(
            "kernel.all.pswitch",
            0,
            13,
            U64,
            Counter,
            COUNT,
            "context switches from /proc/stat",
            Src::Stat(|s| s.ctxt),
        ),
        d(
            "kernel.all.sysfork",
            0,
            14,
            U64,
            Counter,
            COUNT,
            "processes created (forks) from /proc/stat",
            Src::Stat(|s| s.processes),
        ),
        d(
            "kernel.all.running",
            0,
            15,
            U64,
            Instant,
            Units::NONE,
            "number of running processes from /proc/stat",
            Src::Stat(|s| s.running),
        ),
        d(
            "kernel.all.blocked",
            0,
            16,
            U64,
            Instant,
            Units::NONE,
            "number of blocked processes from /proc/stat",
            Src::Stat(|s| s.blocked),
        ),
        d(
            "kernel.all.boottime",
            0,
            17,
            I64,
            Discrete,
            SEC,
            "boot time from /proc/stat",
            Src::BootTime,
        ),
        d(
            "hinv.ncpu",
            0,
            32,
            U32,
            Discrete,
            Units::NONE,
            "number of CPUs in the system",
            Src::NCpu,
        ),
        d(
            "kernel.all.nprocs",
            2,
            3,
            U32,
            Instant,
            Units::NONE,
            "total number of processes (lightweight)",
            Src::NProcs,
        ),
        d(
            "mem.physmem",
            1,
            0,
            U64,
            Discrete,
            KB,
            "total system memory from /proc/meminfo",
            Src::Mem("MemTotal"),
        ),
        d(
            "mem.util.used",
            1,
            1,
            U64,
            Instant,
            KB,
            "used memory (MemTotal - MemFree) from /proc/meminfo",
            Src::MemUsed,
        ),
        d(
            "mem.util.free",
            1,
            2,
            U64,
            Instant,
            KB,
            "free memory from /proc/meminfo",
            Src::Mem("MemFree"),
        ),
        d(
            "mem.util.bufmem",
            1,
            4,
            U64,
            Instant,
            KB,
            "I/O buffers from /proc/meminfo",
            Src::Mem("Buffers"),
        ),
        d(
            "mem.util.cached",
            1,
            5,
            U64,
            Instant,
            KB,
            "page cache from /proc/meminfo",
            Src::Mem("Cached"),
        ),
        d(
            "hinv.pagesize",
            1,
            11,
            U32,
            Discrete,
            BYTE,
            "memory page size",
            Src::PageSize,
        ),
        d(
            "mem.util.active",
            1,
            14,
            U64,
            Instant,
            KB,
            "Kbytes on the active page list",
            Src::Mem("Active"),
        ),
        d(
            "mem.util.inactive",
            1,
            15,
            U64,
            Instant,
            KB,
            "Kbytes on the inactive page list",
            Src::Mem("Inactive"),
        ),
        d(
            "mem.util.swapTotal",
            1,
            20,
            U64,
            Instant,
            KB,
            "Kbytes swap from /proc/meminfo",
            Src::Mem("SwapTotal"),
        ),
        d(
            "mem.util.swapFree",
            1,
            21,
            U64,
            Instant,
            KB,
            "Kbytes free swap from /proc/meminfo",
            Src::Mem("SwapFree"),
        ),
        d(
            "mem.util.dirty",
            1,
            22,
            U64,
            Instant,
            KB,
            "Kbytes in dirty pages from /proc/meminfo",
            Src::Mem("Dirty"),
        ),
        d(
            "mem.util.slab",
            1,
            25,
            U64,
            Instant,
            KB,
            "Kbytes in slab memory from /proc/meminfo",
            Src::Mem("Slab"),
        ),
        d(
            "mem.util.available",
            1,
            58,
            U64,
            Instant,
            KB,
            "available memory from /proc/meminfo",
            Src::Mem("MemAvailable"),
        ),
        d(
            "kernel.all.load",
            2,
            0,
            F32,
            Instant,
            Units::NONE,
            "1, 5 and 15 minute load average",
            Src::Load,
        ),
        d(
            "kernel.percpu.interrupts",
            4,
            1,
            U32,
            Counter,
            COUNT,
            "interrupt counters from /proc/interrupts",
            Src::PerCpuInterrupts,
        ),
        d(
            "kernel.all.interrupts.missed",
            4,
            2,
            U32,
            Counter,
            COUNT,
            "MIS count from /proc/interrupts",
            Src::IrqRow("MIS"),
        ),
        d(
            "kernel.all.interrupts.errors",
            4,
            3,
            U32,
            Counter,
            COUNT,
            "interrupt error count from /proc/interrupts",
            Src::IrqRow("ERR"),
        ),
    ];
    for x in &mut v {
        x.indom = match x.src {
            Src::Load => Some(LOADAVG_INDOM),
            Src::PerCpuInterrupts => Some(INTERRUPT_CPU_INDOM),
            _ => None,
        };
    }
    v
}

/// Everything one system sample is computed from.
pub struct SysInput<'a> {
    pub stat: &'a ProcStat,
    pub meminfo: &'a [Option<u64>],
    pub load: Option<([f32; 3], u64)>,
    pub irqs: &'a [IrqRow],
    /// Instance id of each (row, cpu) of kernel.percpu.interrupts, parallel
    /// to `irqs[i].counts[j]`.
    pub irq_inst: &'a [Vec<InstId>],
    pub ncpu: u32,
    pub page_size: u64,
    pub clk_tck: u64,
}

/// The system metric set: descriptors plus how to fill each.
pub struct SysMetrics {
    defs: Vec<Def>,
    /// meminfo keys wanted, in the order `SysInput::meminfo` holds them.
    pub mem_keys: Vec<&'static str>,
}

impl Default for SysMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl SysMetrics {
    pub fn new() -> SysMetrics {
        let mut defs: Vec<Def> = Vec::new();
        defs.extend(CPU_DEFS.iter().copied());
        defs.extend(other_defs());
        let mut mem_keys = vec!["MemTotal", "MemFree"];
        for d in &defs {
            if let Src::Mem(k) = d.src {
                if !mem_keys.contains(&k) {
                    mem_keys.push(k);
                }
            }
        }
        SysMetrics { defs, mem_keys }
    }

    pub fn descriptors(&self) -> Vec<Arc<MetricDesc>> {
        self.defs
            .iter()
            .map(|d| {
                let mut m = MetricDesc::new(
                    pmid(LINUX, d.cluster, d.item),
                    d.name,
                    d.vtype,
                    d.sem,
                    d.units,
                );
                m.indom = d.indom;
                m.help_short = Some(d.help.to_string());
                Arc::new(m)
            })
            .collect()
    }

    fn mem(&self, inp: &SysInput, key: &str) -> Option<u64> {
        let i = self.mem_keys.iter().position(|k| *k == key)?;
        inp.meminfo.get(i).copied().flatten()
    }

    /// Values of every metric; metrics without a value (missing file or
    /// key) are left out of the sample.
    pub fn values(&self, inp: &SysInput) -> Vec<MetricValues> {
        let ms = |ticks: u64| Value::U64(ticks.saturating_mul(1000) / inp.clk_tck.max(1));
        let mut out = Vec::with_capacity(self.defs.len());
        for d in &self.defs {
            let id = pmid(LINUX, d.cluster, d.item);
            let single = |v: Value| vec![(PM_IN_NULL, v)];
            let vals: Vec<(InstId, Value)> = match d.src {
                Src::AllCpu(f) => single(ms(f(&inp.stat.all))),
                Src::PerCpu(f) => inp
                    .stat
                    .percpu
                    .iter()
                    .map(|(n, c)| (*n as InstId, ms(f(c))))
                    .collect(),
                Src::Stat(f) => single(Value::U64(f(inp.stat))),
                Src::BootTime => single(Value::I64(inp.stat.btime)),
                Src::Mem(k) => match self.mem(inp, k) {
                    Some(v) => single(Value::U64(v)),
                    None => continue,
                },
                Src::MemUsed => match (self.mem(inp, "MemTotal"), self.mem(inp, "MemFree")) {
                    (Some(t), Some(f)) => single(Value::U64(t.saturating_sub(f))),
                    _ => continue,
                },
                Src::Load => match inp.load {
                    Some((a, _)) => vec![
                        (1, Value::F32(a[0])),
                        (5, Value::F32(a[1])),
                        (15, Value::F32(a[2])),
                    ],
                    None => continue,
                },
                Src::NProcs => match inp.load {
                    Some((_, n)) => single(Value::U64(n)),
                    None => continue,
                },
                Src::NCpu => single(Value::U64(inp.ncpu as u64)),
                Src::PageSize => single(Value::U64(inp.page_size)),
                Src::PerCpuInterrupts => {
                    let mut v = Vec::new();
                    for (row, ids) in inp.irqs.iter().zip(inp.irq_inst) {
                        for ((_, n), id) in row.counts.iter().zip(ids) {
                            if *id >= 0 {
                                // PCP keeps these as 32-bit counters.
                                v.push((*id, Value::U64(*n & 0xffff_ffff)));
                            }
                        }
                    }
                    v
                }
                Src::IrqRow(name) => match inp.irqs.iter().find(|r| r.name == name) {
                    Some(r) => single(Value::U64(
                        r.counts.first().map(|c| c.1 & 0xffff_ffff).unwrap_or(0),
                    )),
                    None => continue,
                },
            };
            if vals.is_empty() {
                continue;
            }
            out.push(MetricValues {
                metric: id,
                values: Ok(vals),
            });
        }
        out
    }
}

/// Instance name of a kernel.percpu.interrupts instance, as PCP names it.
pub fn interrupt_cpu_name(row: &str, cpu: u32) -> String {
    format!("{row}::cpu{cpu}")
}

/// Rows PCP reports as singular metrics rather than per CPU.
pub fn is_global_irq_row(name: &str) -> bool {
    name == "ERR" || name == "MIS"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pmids_are_pcps() {
        let m = SysMetrics::new();
        let ds = m.descriptors();
        let find = |n: &str| ds.iter().find(|d| d.name() == n).unwrap().clone();
        assert_eq!(find("kernel.all.cpu.user").id, pmid(60, 0, 20));
        assert_eq!(find("kernel.all.cpu.idle").id, pmid(60, 0, 23));
        assert_eq!(find("kernel.percpu.cpu.sys").id, pmid(60, 0, 2));
        assert_eq!(find("mem.util.free").id, pmid(60, 1, 2));
        assert_eq!(find("kernel.all.load").id, pmid(60, 2, 0));
        assert_eq!(find("kernel.all.load").indom, Some(indom(60, 2)));
        assert_eq!(find("kernel.all.pswitch").id, pmid(60, 0, 13));
        assert_eq!(find("kernel.all.sysfork").id, pmid(60, 0, 14));
        assert_eq!(find("kernel.percpu.interrupts").id, pmid(60, 4, 1));
        assert_eq!(find("kernel.all.cpu.user").units, Units::time(2));
        // No pmID twice.
        let mut ids: Vec<u32> = ds.iter().map(|d| d.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), ds.len());
    }
}
