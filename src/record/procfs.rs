//! Parsers for the /proc files the recorder reads. Pure functions over
//! bytes so they can be tested on synthetic text; none of them panics on
//! odd input (a field that is missing or not a number gives `None`).

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// Read a whole /proc file into `buf` (cleared first). /proc files report
/// size 0, so read until EOF rather than trusting metadata.
pub fn read_into(path: &Path, buf: &mut Vec<u8>) -> std::io::Result<()> {
    buf.clear();
    let mut f = File::open(path)?;
    f.read_to_end(buf)?;
    Ok(())
}

/// An open /proc directory: files are opened relative to it with
/// `openat` and read with plain `read` calls, which avoids the path walk
/// from `/` and the `statx` that `std::fs::read` does for every file; the
/// recorder opens thousands of small files per second.
pub struct ProcDir {
    fd: libc::c_int,
    name: Vec<u8>,
}

impl ProcDir {
    pub fn open(path: &Path) -> std::io::Result<ProcDir> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: c is a valid NUL-terminated path.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(ProcDir {
            fd,
            name: Vec::with_capacity(64),
        })
    }

    /// Read `PID/file` (or `file` when `pid` is None) into `buf`. With
    /// `single_record` the first short read ends the file: true of the
    /// per-process files, which the kernel renders in one piece.
    pub fn read(
        &mut self,
        pid: Option<i32>,
        file: &str,
        buf: &mut Vec<u8>,
        single_record: bool,
    ) -> std::io::Result<()> {
        use std::io::Write;
        self.name.clear();
        if let Some(p) = pid {
            let _ = write!(self.name, "{p}/");
        }
        self.name.extend_from_slice(file.as_bytes());
        self.name.push(0);
        let cname = std::ffi::CStr::from_bytes_with_nul(&self.name)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: dirfd is open; cname is NUL-terminated.
        let fd = unsafe { libc::openat(self.fd, cname.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let r = read_fd(fd, buf, single_record);
        // SAFETY: fd was opened above and is closed once.
        unsafe { libc::close(fd) };
        r
    }
}

impl Drop for ProcDir {
    fn drop(&mut self) {
        // SAFETY: fd is owned by this struct.
        unsafe { libc::close(self.fd) };
    }
}

fn read_fd(fd: libc::c_int, buf: &mut Vec<u8>, single_record: bool) -> std::io::Result<()> {
    buf.clear();
    loop {
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(buf.capacity().max(4096));
        }
        let spare = buf.spare_capacity_mut();
        let want = spare.len();
        // SAFETY: reading at most `want` bytes into the spare capacity.
        let n = unsafe { libc::read(fd, spare.as_mut_ptr().cast(), want) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let n = n as usize;
        if n == 0 {
            return Ok(());
        }
        // SAFETY: the kernel initialised n bytes of the spare capacity.
        unsafe { buf.set_len(buf.len() + n) };
        // Guard against a file that never ends (not /proc, but cheap).
        if buf.len() > 64 << 20 || (single_record && n < want) {
            return Ok(());
        }
    }
}

/// The fields of `/proc/PID/stat` the recorder uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stat {
    /// Field 2 without its parentheses (may contain spaces and `)`).
    pub comm: Vec<u8>,
    /// Field 3.
    pub state: u8,
    /// Field 4.
    pub ppid: i64,
    /// Fields 14 + 15, clock ticks.
    pub utime: u64,
    pub stime: u64,
    /// Field 22, clock ticks after boot: identifies a process across PID reuse.
    pub start_time: u64,
    /// Field 24, pages.
    pub rss: i64,
    /// Field 42, clock ticks (0 unless delay accounting is on).
    pub blkio_ticks: u64,
}

/// Parse `/proc/PID/stat`. comm is taken between the first `(` and the
/// **last** `)`, so names with spaces or parentheses do not shift the later
/// fields (dlt-kpi splits naïvely on spaces; spec kpi-dlt §3.5).
pub fn parse_stat(b: &[u8]) -> Option<Stat> {
    let open = b.iter().position(|&c| c == b'(')?;
    let close = b.iter().rposition(|&c| c == b')')?;
    if close < open {
        return None;
    }
    let comm = b[open + 1..close].to_vec();
    let rest = b.get(close + 1..)?;
    // Field 3 is the first token after ")".
    let mut toks = rest
        .split(|c| *c == b' ' || *c == b'\t' || *c == b'\n')
        .filter(|t| !t.is_empty());
    let mut st = Stat {
        comm,
        ..Stat::default()
    };
    let mut seen = 0;
    for (i, t) in (3usize..).zip(&mut toks) {
        match i {
            3 => st.state = *t.first()?,
            4 => st.ppid = parse_i64(t)?,
            14 => st.utime = parse_u64(t)?,
            15 => st.stime = parse_u64(t)?,
            22 => st.start_time = parse_u64(t)?,
            24 => st.rss = parse_i64(t)?,
            42 => {
                st.blkio_ticks = parse_u64(t)?;
                seen = 42;
                break;
            }
            _ => {}
        }
        seen = i;
    }
    // Old kernels lack field 42; everything up to 24 is required.
    if seen < 24 {
        return None;
    }
    Some(st)
}

pub fn parse_u64(t: &[u8]) -> Option<u64> {
    if t.is_empty() || t.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in t {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    Some(v)
}

pub fn parse_i64(t: &[u8]) -> Option<i64> {
    match t.first() {
        Some(b'-') => parse_u64(&t[1..]).and_then(|v| i64::try_from(v).ok().map(|v| -v)),
        _ => parse_u64(t).and_then(|v| i64::try_from(v).ok()),
    }
}

/// `/proc/PID/cmdline` as dlt-kpi reports it: up to the first NUL
/// (effectively argv[0]), lossily decoded.
pub fn cmdline_arg0(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// Iterate `Key: value` lines (status, io, meminfo).
fn key_values(b: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    b.split(|&c| c == b'\n').filter_map(|line| {
        let colon = line.iter().position(|&c| c == b':')?;
        let key = &line[..colon];
        let val = line[colon + 1..].trim_ascii();
        Some((key, val))
    })
}

/// First whitespace-separated token.
fn first_tok(v: &[u8]) -> &[u8] {
    v.split(|c| c.is_ascii_whitespace())
        .find(|t| !t.is_empty())
        .unwrap_or(&[])
}

/// voluntary + nonvoluntary context switches from `/proc/PID/status`
/// (main thread only, as the kernel reports them there).
pub fn status_ctxsw(b: &[u8]) -> Option<i64> {
    let mut total: Option<i64> = None;
    for (k, v) in key_values(b) {
        if k == b"voluntary_ctxt_switches" || k == b"nonvoluntary_ctxt_switches" {
            let n = parse_i64(first_tok(v))?;
            total = Some(total.unwrap_or(0).saturating_add(n));
        }
    }
    total
}

/// rchar + wchar from `/proc/PID/io`.
pub fn io_bytes(b: &[u8]) -> Option<u64> {
    let mut total: Option<u64> = None;
    for (k, v) in key_values(b) {
        if k == b"rchar" || k == b"wchar" {
            let n = parse_u64(first_tok(v))?;
            total = Some(total.unwrap_or(0).saturating_add(n));
        }
    }
    total
}

/// What the LTT `control.process` event needs from `/proc/PID/status`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Status {
    pub name: String,
    pub state: u8,
    pub ppid: u64,
    pub tracer_pid: u64,
    /// real, effective, saved, filesystem
    pub uid: [u64; 4],
    pub gid: [u64; 4],
}

pub fn parse_status(b: &[u8]) -> Status {
    let mut s = Status::default();
    let four = |v: &[u8]| {
        let mut out = [0u64; 4];
        for (o, t) in out.iter_mut().zip(
            v.split(|c| c.is_ascii_whitespace())
                .filter(|t| !t.is_empty()),
        ) {
            *o = parse_u64(t).unwrap_or(0);
        }
        out
    };
    for (k, v) in key_values(b) {
        match k {
            b"Name" => s.name = String::from_utf8_lossy(v).into_owned(),
            b"State" => s.state = v.first().copied().unwrap_or(b'?'),
            b"PPid" => s.ppid = parse_u64(first_tok(v)).unwrap_or(0),
            b"TracerPid" => s.tracer_pid = parse_u64(first_tok(v)).unwrap_or(0),
            b"Uid" => s.uid = four(v),
            b"Gid" => s.gid = four(v),
            _ => {}
        }
    }
    s
}

/// The LTT design's process-state enum value for a /proc state letter.
pub fn ltt_state(c: u8) -> i64 {
    match c {
        b'R' => 0,
        b'S' => 1,
        b'D' | b'I' => 2,
        b'Z' | b'X' | b'x' => 3,
        b'T' | b't' => 4,
        b'W' => 5,
        _ => 1,
    }
}

/// The cumulative CPU-time columns of one `cpu` line of /proc/stat, in ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    pub guest: u64,
    pub guest_nice: u64,
}

impl CpuTimes {
    fn from_tokens<'a>(toks: impl Iterator<Item = &'a [u8]>) -> CpuTimes {
        let mut v = [0u64; 10];
        for (slot, t) in v.iter_mut().zip(toks) {
            *slot = parse_u64(t).unwrap_or(0);
        }
        CpuTimes {
            user: v[0],
            nice: v[1],
            system: v[2],
            idle: v[3],
            iowait: v[4],
            irq: v[5],
            softirq: v[6],
            steal: v[7],
            guest: v[8],
            guest_nice: v[9],
        }
    }
}

/// /proc/stat.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcStat {
    pub all: CpuTimes,
    /// (cpu number, times), in file order.
    pub percpu: Vec<(u32, CpuTimes)>,
    pub intr: u64,
    pub ctxt: u64,
    pub processes: u64,
    pub running: u64,
    pub blocked: u64,
    pub btime: i64,
}

pub fn parse_proc_stat(b: &[u8]) -> ProcStat {
    let mut s = ProcStat::default();
    for line in b.split(|&c| c == b'\n') {
        let mut toks = line
            .split(|c| c.is_ascii_whitespace())
            .filter(|t| !t.is_empty());
        let Some(key) = toks.next() else { continue };
        match key {
            b"cpu" => s.all = CpuTimes::from_tokens(toks),
            k if k.starts_with(b"cpu") => {
                if let Some(n) = parse_u64(&k[3..]).and_then(|n| u32::try_from(n).ok()) {
                    s.percpu.push((n, CpuTimes::from_tokens(toks)));
                }
            }
            b"intr" => s.intr = toks.next().and_then(parse_u64).unwrap_or(0),
            b"ctxt" => s.ctxt = toks.next().and_then(parse_u64).unwrap_or(0),
            b"processes" => s.processes = toks.next().and_then(parse_u64).unwrap_or(0),
            b"procs_running" => s.running = toks.next().and_then(parse_u64).unwrap_or(0),
            b"procs_blocked" => s.blocked = toks.next().and_then(parse_u64).unwrap_or(0),
            b"btime" => s.btime = toks.next().and_then(parse_i64).unwrap_or(0),
            _ => {}
        }
    }
    s
}

/// /proc/meminfo values in kB, by key.
pub fn meminfo_get(b: &[u8], want: &[&str]) -> Vec<Option<u64>> {
    let mut out = vec![None; want.len()];
    for (k, v) in key_values(b) {
        if let Some(i) = want.iter().position(|w| w.as_bytes() == k) {
            out[i] = parse_u64(first_tok(v));
        }
    }
    out
}

/// /proc/loadavg: the three averages and the total number of tasks.
pub fn parse_loadavg(b: &[u8]) -> Option<([f32; 3], u64)> {
    let mut toks = b
        .split(|c| c.is_ascii_whitespace())
        .filter(|t| !t.is_empty());
    let mut avg = [0f32; 3];
    for a in &mut avg {
        *a = std::str::from_utf8(toks.next()?).ok()?.parse().ok()?;
    }
    let tasks = toks.next()?;
    let slash = tasks.iter().position(|&c| c == b'/')?;
    Some((avg, parse_u64(&tasks[slash + 1..])?))
}

/// One row of /proc/interrupts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IrqRow {
    /// The row label without its colon (`24`, `NMI`, `ERR`).
    pub name: String,
    /// (cpu number, count) for each count column present; rows may be
    /// shorter than the CPU count (ERR, MIS, or a cut file).
    pub counts: Vec<(u32, u64)>,
    /// Text after the counts (chip, hwirq, device), single-spaced.
    pub desc: String,
}

/// Parse the whole of /proc/interrupts: every row and every CPU column
/// (dlt-kpi reads only the first 4095 bytes, spec §3.6). CPU numbers come
/// from the header (`CPU0 CPU2 …`, so offline CPUs keep their numbers).
pub fn parse_interrupts(b: &[u8]) -> Vec<IrqRow> {
    let mut lines = b.split(|&c| c == b'\n');
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let cpus: Vec<u32> = header
        .split(|c| c.is_ascii_whitespace())
        .filter(|t| t.len() > 3 && t.starts_with(b"CPU"))
        .filter_map(|t| parse_u64(&t[3..]).and_then(|n| u32::try_from(n).ok()))
        .collect();
    let mut rows = Vec::new();
    for line in lines {
        let mut toks = line
            .split(|c| c.is_ascii_whitespace())
            .filter(|t| !t.is_empty())
            .peekable();
        let Some(label) = toks.next() else { continue };
        let Some(name) = label.strip_suffix(b":") else {
            continue;
        };
        let mut counts = Vec::new();
        for &cpu in &cpus {
            match toks.peek().and_then(|t| parse_u64(t)) {
                Some(n) => {
                    counts.push((cpu, n));
                    toks.next();
                }
                None => break,
            }
        }
        let desc: Vec<&[u8]> = toks.collect();
        rows.push(IrqRow {
            name: String::from_utf8_lossy(name).into_owned(),
            counts,
            desc: String::from_utf8_lossy(&desc.join(&b' ')).into_owned(),
        });
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat_line(comm: &str) -> String {
        // Fields 3..=52 of a real stat line (kernel 6.x), comm substituted.
        format!(
            "4242 ({comm}) R 17 4242 17 34816 4242 4194304 120 0 3 0 250 31 0 0 20 0 1 0 \
             987654 10854400 405 18446744073709551615 1 1 0 0 0 0 0 4 65536 0 0 0 17 1 0 0 7 \
             0 0 0 0 0 0 0 0 0 0\n"
        )
    }

    #[test]
    fn stat_plain() {
        let s = parse_stat(stat_line("sleep").as_bytes()).unwrap();
        assert_eq!(s.comm, b"sleep");
        assert_eq!(s.state, b'R');
        assert_eq!(s.ppid, 17);
        assert_eq!((s.utime, s.stime), (250, 31));
        assert_eq!(s.start_time, 987654);
        assert_eq!(s.rss, 405);
        assert_eq!(s.blkio_ticks, 7);
    }

    #[test]
    fn stat_comm_with_spaces_and_parens() {
        for comm in ["bu sy", "a) b (c", ")", "x y z) 1 2 3", ""] {
            let s = parse_stat(stat_line(comm).as_bytes()).unwrap();
            assert_eq!(s.comm, comm.as_bytes(), "{comm:?}");
            assert_eq!(s.ppid, 17, "{comm:?}");
            assert_eq!(s.rss, 405, "{comm:?}");
            assert_eq!(s.utime + s.stime, 281, "{comm:?}");
        }
    }

    #[test]
    fn stat_garbage() {
        for bad in [
            &b""[..],
            b"1 (x",
            b"1 x) R",
            b"1 (x) R 0 0",
            b"1 (x) R a 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0",
        ] {
            assert_eq!(parse_stat(bad), None);
        }
    }

    #[test]
    fn procdir_reads_whole_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("7")).unwrap();
        let big: Vec<u8> = (0..20000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(dir.path().join("7/stat"), b"7 (x) S 1").unwrap();
        std::fs::write(dir.path().join("interrupts"), &big).unwrap();
        let mut d = ProcDir::open(dir.path()).unwrap();
        let mut buf = Vec::new();
        d.read(Some(7), "stat", &mut buf, true).unwrap();
        assert_eq!(buf, b"7 (x) S 1");
        d.read(None, "interrupts", &mut buf, false).unwrap();
        assert_eq!(buf, big);
        assert!(d.read(Some(8), "stat", &mut buf, true).is_err());
        // The live /proc: our own stat parses.
        let mut p = ProcDir::open(Path::new("/proc")).unwrap();
        p.read(Some(std::process::id() as i32), "stat", &mut buf, true)
            .unwrap();
        assert!(parse_stat(&buf).is_some());
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_i64(b"-5"), Some(-5));
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"1x"), None);
    }

    #[test]
    fn status_and_io() {
        let st = b"Name:\tbash\nState:\tS (sleeping)\nPPid:\t1\nTracerPid:\t0\n\
                   Uid:\t1000\t1001\t1002\t1003\nGid:\t5\t6\t7\t8\n\
                   voluntary_ctxt_switches:\t121\nnonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(status_ctxsw(st), Some(128));
        let s = parse_status(st);
        assert_eq!(s.name, "bash");
        assert_eq!(s.state, b'S');
        assert_eq!(s.uid, [1000, 1001, 1002, 1003]);
        assert_eq!(s.gid, [5, 6, 7, 8]);
        assert_eq!(status_ctxsw(b"Name: x\n"), None);
        let io = b"rchar: 100\nwchar: 23\nsyscr: 5\nread_bytes: 4096\n";
        assert_eq!(io_bytes(io), Some(123));
        assert_eq!(io_bytes(b""), None);
    }

    #[test]
    fn cmdline() {
        assert_eq!(cmdline_arg0(b"perl\0-e\0x\0"), "perl");
        assert_eq!(
            cmdline_arg0(b"proc with spaces; and\0"),
            "proc with spaces; and"
        );
        assert_eq!(cmdline_arg0(b""), "");
    }

    #[test]
    fn interrupts_all_rows_ragged() {
        let text = b"           CPU0       CPU2       \n \
            24:          1          0  IO-APIC   5-edge      ACPI:Ged\n \
            LOC:      49048      47384   Local timer interrupts\n \
            ERR:          0\n \
            MIS:          3\n";
        let rows = parse_interrupts(text);
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[0].name, "24");
        assert_eq!(rows[0].counts, vec![(0, 1), (2, 0)]);
        assert_eq!(rows[0].desc, "IO-APIC 5-edge ACPI:Ged");
        assert_eq!(rows[1].counts, vec![(0, 49048), (2, 47384)]);
        assert_eq!(rows[2].counts, vec![(0, 0)]);
        assert_eq!(rows[3].counts, vec![(0, 3)]);
    }

    #[test]
    fn interrupts_big_file() {
        // 16 CPUs and 300 rows: far past dlt-kpi's 4095-byte cut.
        let mut t = String::from(" ");
        for c in 0..16 {
            t += &format!("     CPU{c}");
        }
        t.push('\n');
        for r in 0..300 {
            t += &format!("{r:4}:");
            for c in 0..16 {
                t += &format!(" {:10}", r * 100 + c);
            }
            t += "  PCI-MSI 1-edge dev\n";
        }
        let rows = parse_interrupts(t.as_bytes());
        assert_eq!(rows.len(), 300);
        assert!(rows.iter().all(|r| r.counts.len() == 16));
        assert_eq!(rows[299].counts[15], (15, 29915));
    }

    #[test]
    fn proc_stat() {
        let t = b"cpu  12165 0 3434 114982 871 0 101 314 0 0\n\
                  cpu0 6254 0 1709 57146 652 0 28 159 0 0\n\
                  cpu1 5911 0 1725 57836 218 0 73 155 0 0\n\
                  intr 328988 0 0\nctxt 472723\nbtime 1795321956\nprocesses 10188\n\
                  procs_running 1\nprocs_blocked 0\n";
        let s = parse_proc_stat(t);
        assert_eq!(s.all.user, 12165);
        assert_eq!(s.all.steal, 314);
        assert_eq!(s.percpu.len(), 2);
        assert_eq!(s.percpu[1].0, 1);
        assert_eq!(s.percpu[1].1.softirq, 73);
        assert_eq!((s.intr, s.ctxt, s.processes), (328988, 472723, 10188));
        assert_eq!(s.btime, 1795321956);
    }

    #[test]
    fn loadavg_meminfo() {
        let (a, n) = parse_loadavg(b"0.10 0.24 0.14 1/91 10186\n").unwrap();
        assert_eq!(a, [0.10, 0.24, 0.14]);
        assert_eq!(n, 91);
        assert_eq!(parse_loadavg(b"0.1 x"), None);
        let m = meminfo_get(b"MemTotal: 100 kB\nMemFree:  7 kB\n", &["MemFree", "Nope"]);
        assert_eq!(m, vec![Some(7), None]);
    }
}
