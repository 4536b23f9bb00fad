//! The damage sweep (issue 16): truncations at many offsets, random bit
//! flips and byte overwrites, and hostile length fields, over every corpus
//! input; each variant goes through `dump`, `info`, `convert --to ltt` and
//! `convert --to pcp` with a 10 s limit, and the runs are judged:
//!
//! - no panic, no hang (over 10 s twice: the machine is shared, so a run
//!   over the limit is run once more), no run over 256 MB peak RSS;
//! - no conversion output larger than 4x its input, or 4x what the same
//!   conversion of the undamaged input writes where that is larger (events
//!   become per-type counter records in PCP: `smp_example` converts into
//!   4.8x its size undamaged), plus 1 MiB (an LTT trace is whole blocks of
//!   100,000 bytes or more, so small inputs carry a fixed overhead);
//! - no exit 0 on a truncation the format can detect (a cut that is not at
//!   a record boundary of DLT, PCP and LTT tracefiles, any cut of an MMV
//!   file or a mainline timeline, a cut inside an A-layout timeline's ring;
//!   text and XML files are not judged, the peers cannot tell either).
//!
//! By default a sample of a few variants per file runs (seconds);
//! `POLYTRACE_FULL=1` (`scripts/sweep.sh --full`) runs the long sweep.
//! `POLYTRACE_SWEEP_SEED` changes the random choices.

mod common;

use common::{bin, corpus};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const TIME_LIMIT: Duration = Duration::from_secs(10);
const RSS_LIMIT_KB: i64 = 256 * 1024;

/// Which truncations of a file its format can detect.
#[derive(Clone, Debug)]
enum Judge {
    /// Any cut that is not one of these offsets (record boundaries).
    Records(Vec<u64>),
    /// Any cut below this offset (an A-layout timeline's ring end).
    Below(u64),
    /// Not judged (text, XML: neither we nor the peers can tell).
    No,
}

impl Judge {
    fn detectable(&self, cut: u64, len: u64) -> bool {
        match self {
            Judge::Records(b) => cut < len && !b.contains(&cut),
            Judge::Below(x) => cut < *x,
            Judge::No => false,
        }
    }
}

/// One file of an input that gets damaged.
#[derive(Clone, Debug)]
struct Member {
    rel: String,
    judge: Judge,
    /// (offset, width in bytes, big-endian) of length/size/count fields.
    hostile: Vec<(u64, usize, bool)>,
    /// Text replacements of size attributes (XML), all run in every sweep.
    hostile_text: Vec<(&'static str, &'static str)>,
}

/// One corpus input: a file, a PCP archive (base name) or an LTT directory.
#[derive(Clone, Debug)]
struct Input {
    name: String,
    /// Files to copy (relative to the corpus), and where they go.
    files: Vec<(String, String)>,
    /// What to give the CLI, relative to the variant's directory.
    arg: String,
    members: Vec<Member>,
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn dlt_member(rel: &str, b: &[u8]) -> Member {
    let (mut bounds, mut hostile, mut off) = (vec![0u64], Vec::new(), 0usize);
    while off + 20 <= b.len() && &b[off..off + 4] == b"DLT\x01" {
        let len = u16::from_be_bytes([b[off + 18], b[off + 19]]) as usize;
        if hostile.len() < 8 {
            hostile.push(((off + 18) as u64, 2, true));
        }
        off += 16 + len.max(4);
        bounds.push(off as u64);
    }
    Member {
        rel: rel.into(),
        judge: Judge::Records(bounds),
        hostile,
        hostile_text: vec![],
    }
}

fn pcp_member(rel: &str, b: &[u8]) -> Member {
    let (mut bounds, mut hostile, mut off) = (vec![0u64], Vec::new(), 0usize);
    let v3 = b.get(7) == Some(&3);
    let index = rel.ends_with(".index");
    while let Some(len) = be32(b, off) {
        let len = len as usize;
        if len < 8 || off + len > b.len() {
            break;
        }
        if hostile.len() < 8 {
            hostile.push((off as u64, 4, true));
            hostile.push(((off + len - 4) as u64, 4, true));
        }
        off += len;
        bounds.push(off as u64);
        if index {
            // After its label an index is fixed-size entries.
            let es = if v3 { 32 } else { 20 };
            while off + es <= b.len() {
                off += es;
                bounds.push(off as u64);
            }
            break;
        }
    }
    Member {
        rel: rel.into(),
        judge: Judge::Records(bounds),
        hostile,
        hostile_text: vec![],
    }
}

fn inputs() -> Vec<Input> {
    let c = corpus();
    let read = |rel: &str| std::fs::read(c.join(rel)).unwrap();
    let mut v = Vec::new();
    for f in ["kpi/kpi-capture.dlt", "kpi/B-buf400.dlt"] {
        v.push(Input {
            name: f.into(),
            files: vec![(f.into(), "in.dlt".into())],
            arg: "in.dlt".into(),
            members: vec![dlt_member("in.dlt", &read(f))],
        });
    }
    for f in [
        "kpi/kpi-capture.convert-a.txt",
        "kpi/B-buf400.convert-a.txt",
    ] {
        v.push(Input {
            name: f.into(),
            files: vec![(f.into(), "in.txt".into())],
            arg: "in.txt".into(),
            members: vec![Member {
                rel: "in.txt".into(),
                judge: Judge::No,
                hostile: vec![],
                hostile_text: vec![],
            }],
        });
    }
    for f in [
        "mmv/research_v1.mmv",
        "mmv/research_v2.mmv",
        "mmv/research_py_v1.mmv",
    ] {
        let b = read(f);
        // Header (40 bytes), then table-of-contents entries of 16 bytes:
        // type, count (u32) and offset (u64), host byte order.
        let ntoc = u32::from_le_bytes(b[32..36].try_into().unwrap()) as u64;
        let mut hostile = vec![(32, 4, false)];
        for k in 0..ntoc.min(8) {
            hostile.push((40 + 16 * k + 4, 4, false));
            hostile.push((40 + 16 * k + 8, 8, false));
        }
        v.push(Input {
            name: f.into(),
            files: vec![(f.into(), "in.mmv".into())],
            arg: "in.mmv".into(),
            members: vec![Member {
                rel: "in.mmv".into(),
                judge: Judge::Records(vec![]),
                hostile,
                hostile_text: vec![],
            }],
        });
    }
    for base in ["live_v2", "live_v3"] {
        let files: Vec<(String, String)> = ["meta", "0", "index"]
            .iter()
            .map(|m| (format!("pcp/{base}.{m}"), format!("a.{m}")))
            .collect();
        let members = ["meta", "0", "index"]
            .iter()
            .map(|m| pcp_member(&format!("a.{m}"), &read(&format!("pcp/{base}.{m}"))))
            .collect();
        v.push(Input {
            name: format!("pcp/{base}"),
            files,
            arg: "a".into(),
            members,
        });
    }
    {
        let rels = common::SMP_FILES;
        let files = rels
            .iter()
            .map(|r| (format!("ltt/smp_example/{r}"), format!("t/{r}")))
            .collect();
        let cpu = |r: &str| {
            let b = read(&format!("ltt/smp_example/{r}"));
            let n = b.len() as u64;
            Member {
                rel: format!("t/{r}"),
                judge: Judge::Records(vec![0, n]),
                // block_start's seconds and cycle count, the trailer.
                hostile: vec![(6, 4, false), (14, 8, false), (n - 4, 4, false)],
                hostile_text: vec![],
            }
        };
        v.push(Input {
            name: "ltt/smp_example".into(),
            files,
            arg: "t".into(),
            members: vec![
                cpu("cpu/0"),
                cpu("cpu/1"),
                Member {
                    rel: "t/info/system.xml".into(),
                    judge: Judge::No,
                    hostile: vec![],
                    hostile_text: ["4294967295", "2147483647", "1000001", "999999", "56", "0"]
                        .iter()
                        .map(|v| ("ltt_block_size=\"1000000\"", *v))
                        .collect(),
                },
                Member {
                    rel: "t/eventdefs/core.xml".into(),
                    judge: Judge::No,
                    hostile: vec![],
                    hostile_text: vec![],
                },
            ],
        });
    }
    let mut tl: Vec<String> = std::fs::read_dir(c.join("timeline"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".dat"))
        .collect();
    tl.sort();
    for n in tl {
        let f = format!("timeline/{n}");
        let b = read(&f);
        let mainline = b[..8] == 0xa3ff_7223_441d_0001u64.to_le_bytes();
        let (judge, hostile) = if mainline {
            (Judge::Records(vec![]), vec![(12, 4, false), (16, 4, false)])
        } else {
            let last = u64::from_le_bytes(b[24..32].try_into().unwrap());
            (Judge::Below(64 + (last + 1) * 64), vec![(24, 8, false)])
        };
        v.push(Input {
            name: f.clone(),
            files: vec![(f, "in.dat".into())],
            arg: "in.dat".into(),
            members: vec![Member {
                rel: "in.dat".into(),
                judge,
                hostile,
                hostile_text: vec![],
            }],
        });
    }
    v
}

/// A damage applied to one member.
#[derive(Clone, Debug)]
enum Damage {
    Cut(u64),
    Flip(u64, u8),
    Overwrite(u64, Vec<u8>),
    Hostile(u64, Vec<u8>),
    Text(&'static str, String),
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

fn hostile_values(width: usize, big: bool) -> Vec<Vec<u8>> {
    let vals: [u64; 5] = [u64::MAX, i64::MAX as u64, 1 << 31, 0, 1];
    vals.iter()
        .map(|&v| {
            let v = if width == 8 {
                v
            } else {
                v & ((1u64 << (8 * width)) - 1)
            };
            let b = if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            };
            if big {
                b[8 - width..].to_vec()
            } else {
                b[..width].to_vec()
            }
        })
        .collect()
}

/// The variants of one member: `cuts` truncations (evenly spread, plus
/// around record boundaries), `flips` bit flips and overwrites, and the
/// hostile values of its length fields (all of them in the full sweep).
fn variants(m: &Member, len: u64, cuts: u64, flips: u64, full: bool, rng: &mut Rng) -> Vec<Damage> {
    let mut v = Vec::new();
    if len == 0 {
        return v;
    }
    for k in 0..cuts {
        v.push(Damage::Cut(if cuts == 1 {
            rng.below(len)
        } else {
            k * len / cuts
        }));
    }
    if let Judge::Records(b) = &m.judge {
        let n = if full { 20 } else { 1 };
        for _ in 0..n.min(b.len()) {
            let x = b[rng.below(b.len() as u64) as usize];
            for c in [x.saturating_sub(1), x + 1] {
                if c < len {
                    v.push(Damage::Cut(c));
                }
            }
        }
    }
    for _ in 0..flips {
        let at = rng.below(len);
        if rng.below(2) == 0 {
            v.push(Damage::Flip(at, rng.below(8) as u8));
        } else {
            let n = 1 + rng.below(8);
            v.push(Damage::Overwrite(
                at,
                (0..n).map(|_| rng.next() as u8).collect(),
            ));
        }
    }
    let mut hostile: Vec<Damage> = m
        .hostile
        .iter()
        .filter(|(o, w, _)| o + *w as u64 <= len)
        .flat_map(|&(o, w, big)| {
            hostile_values(w, big)
                .into_iter()
                .map(move |b| Damage::Hostile(o, b))
        })
        .collect();
    if !full && !hostile.is_empty() {
        let k = rng.below(hostile.len() as u64) as usize;
        hostile = vec![hostile.swap_remove(k)];
    }
    v.extend(hostile);
    for (from, to) in &m.hostile_text {
        v.push(Damage::Text(
            from,
            format!("{}\"{to}\"", &from[..from.find('"').unwrap()]),
        ));
    }
    v
}

fn apply(path: &Path, d: &Damage) {
    let mut b = std::fs::read(path).unwrap();
    match d {
        Damage::Cut(n) => b.truncate(*n as usize),
        Damage::Flip(at, bit) => b[*at as usize] ^= 1 << bit,
        Damage::Text(..) => {}
        Damage::Overwrite(at, bytes) | Damage::Hostile(at, bytes) => {
            for (i, x) in bytes.iter().enumerate() {
                if let Some(c) = b.get_mut(*at as usize + i) {
                    *c = *x;
                }
            }
        }
    }
    if let Damage::Text(from, to) = d {
        let t = String::from_utf8_lossy(&b).replace(from, to);
        b = t.into_bytes();
    }
    std::fs::write(path, b).unwrap();
}

fn tree_size(p: &Path) -> u64 {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => std::fs::read_dir(p)
            .map(|rd| rd.flatten().map(|e| tree_size(&e.path())).sum())
            .unwrap_or(0),
        Ok(m) => m.len(),
        Err(_) => 0,
    }
}

/// One run's outcome.
struct Run {
    code: Option<i32>,
    hung: bool,
    rss_kb: i64,
    secs: f64,
    panicked: bool,
}

/// Run the CLI with a time limit, measuring the child's peak RSS.
// The child is reaped by wait4 (for its rusage), not by Child::wait.
#[allow(clippy::zombie_processes)]
fn run_limited(args: &[&std::ffi::OsStr], dir: &Path) -> Run {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // A hard cap well above the judged limit keeps a runaway from hurting
    // the machine; the judgement is on the measured peak RSS.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 4 << 30,
                rlim_max: 4 << 30,
            };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            Ok(())
        });
    }
    let t0 = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let mut s = Vec::new();
        // Keep the head of stderr only; read the rest to avoid blocking.
        let mut buf = [0u8; 8192];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 {
                break;
            }
            if s.len() < 64 << 10 {
                s.extend_from_slice(&buf[..n]);
            }
        }
        s
    });
    let mut hung = false;
    let (status, ru) = loop {
        let mut st = 0;
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut st, libc::WNOHANG, &mut ru) };
        if r == pid {
            break (st, ru);
        }
        if t0.elapsed() > TIME_LIMIT && !hung {
            hung = true;
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let secs = t0.elapsed().as_secs_f64();
    let err = reader.join().unwrap_or_default();
    let code = if libc::WIFEXITED(status) {
        Some(libc::WEXITSTATUS(status))
    } else {
        None
    };
    let text = String::from_utf8_lossy(&err);
    Run {
        code,
        hung,
        rss_kb: ru.ru_maxrss,
        secs,
        panicked: code == Some(101) || text.contains("panicked"),
    }
}

#[derive(Default)]
struct Tally {
    variants: usize,
    runs: usize,
    panics: usize,
    hangs: usize,
    over_rss: usize,
    over_size: usize,
    exit0_detectable: usize,
    killed: usize,
    /// Runs over the time limit once that finished in time when run again.
    retried: usize,
    max_rss_kb: i64,
    max_secs: f64,
    codes: [usize; 4],
    findings: Vec<String>,
}

/// Lay out an input (as damaged by `d`, if any) in `dir`.
fn materialise(input: &Input, dir: &Path, d: Option<(&Member, &Damage)>) {
    let _ = std::fs::remove_dir_all(dir);
    for (from, to) in &input.files {
        let p = dir.join(to);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::copy(corpus().join(from), &p).unwrap();
    }
    if let Some((m, d)) = d {
        apply(&dir.join(&m.rel), d);
    }
}

/// Size of what `convert` wrote to `out` (a file, a directory or a PCP
/// archive `out.*`), removed afterwards.
fn take_output(dir: &Path) -> u64 {
    let mut n = tree_size(&dir.join("out"));
    let _ = std::fs::remove_dir_all(dir.join("out"));
    let _ = std::fs::remove_file(dir.join("out"));
    for e in ["meta", "0", "index"] {
        let p = dir.join(format!("out.{e}"));
        n += tree_size(&p);
        let _ = std::fs::remove_file(p);
    }
    n
}

fn sweep(full: bool, seed: u64) -> Tally {
    let (cuts, flips) = if full { (120, 150) } else { (1, 1) };
    let work = tempfile::tempdir().unwrap();
    let mut jobs = Vec::new();
    // Any seed gives its own sequence (xorshift needs a non-zero state).
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    for input in inputs() {
        for m in &input.members {
            let len = std::fs::metadata(
                corpus().join(&input.files.iter().find(|(_, to)| *to == m.rel).unwrap().0),
            )
            .unwrap()
            .len();
            for d in variants(m, len, cuts, flips, full, &mut rng) {
                jobs.push((input.clone(), m.clone(), len, d));
            }
        }
    }
    // What each conversion of each undamaged input writes.
    let mut baseline = std::collections::HashMap::new();
    for input in inputs() {
        let dir = work.path().join("base");
        materialise(&input, &dir, None);
        for to in ["ltt", "pcp"] {
            let a: [&std::ffi::OsStr; 6] = [
                "convert".as_ref(),
                input.arg.as_ref(),
                "--to".as_ref(),
                to.as_ref(),
                "-o".as_ref(),
                "out".as_ref(),
            ];
            run_limited(&a, &dir);
            baseline.insert((input.name.clone(), to), take_output(&dir));
        }
    }
    let baseline = &baseline;
    let next = AtomicUsize::new(0);
    let tally = Mutex::new(Tally::default());
    let workers = std::env::var("POLYTRACE_SWEEP_JOBS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2usize);
    std::thread::scope(|sc| {
        for w in 0..workers {
            let (jobs, next, tally, work) = (&jobs, &next, &tally, work.path());
            sc.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some((input, m, len, d)) = jobs.get(i) else {
                    break;
                };
                let dir = work.join(format!("w{w}"));
                materialise(input, &dir, Some((m, d)));
                let in_size = tree_size(&dir);
                let detectable = match d {
                    Damage::Cut(c) => m.judge.detectable(*c, *len),
                    _ => false,
                };
                let mut local = Vec::new();
                let arg = std::ffi::OsStr::new(&input.arg);
                let out = std::ffi::OsStr::new("out");
                let cmds: [Vec<&std::ffi::OsStr>; 4] = [
                    vec!["dump".as_ref(), arg],
                    vec!["info".as_ref(), arg],
                    vec![
                        "convert".as_ref(),
                        arg,
                        "--to".as_ref(),
                        "ltt".as_ref(),
                        "-o".as_ref(),
                        out,
                    ],
                    vec![
                        "convert".as_ref(),
                        arg,
                        "--to".as_ref(),
                        "pcp".as_ref(),
                        "-o".as_ref(),
                        out,
                    ],
                ];
                for c in &cmds {
                    let mut r = run_limited(c, &dir);
                    // The machine is shared: a run over the limit is run once
                    // more, and is a hang only if it is over it again.
                    let mut retried = false;
                    if r.hung {
                        if c[0] == "convert" {
                            take_output(&dir);
                        }
                        r = run_limited(c, &dir);
                        retried = !r.hung;
                    }
                    let out_size = if c[0] == "convert" {
                        take_output(&dir)
                    } else {
                        0
                    };
                    local.push((
                        c[0].to_string_lossy().into_owned(),
                        c.get(3).map(|s| s.to_string_lossy().into_owned()),
                        r,
                        out_size,
                        retried,
                    ));
                }
                let mut t = tally.lock().unwrap();
                t.variants += 1;
                if full && t.variants % 500 == 0 {
                    eprintln!("{} of {} variants", t.variants, jobs.len());
                }
                for (verb, to, r, out_size, retried) in local {
                    t.runs += 1;
                    t.retried += retried as usize;
                    t.max_rss_kb = t.max_rss_kb.max(r.rss_kb);
                    t.max_secs = t.max_secs.max(r.secs);
                    let what = format!(
                        "{} {} {:?}: {verb}{}",
                        input.name,
                        m.rel,
                        d_short(d),
                        to.as_ref()
                            .map(|t| format!(" --to {t}"))
                            .unwrap_or_default()
                    );
                    match r.code {
                        Some(c @ 0..=3) => t.codes[c as usize] += 1,
                        _ => t.killed += 1,
                    }
                    if r.panicked {
                        t.panics += 1;
                        t.findings.push(format!("panic: {what}"));
                    }
                    if r.hung {
                        t.hangs += 1;
                        t.findings.push(format!("hang (> 10 s): {what}"));
                    }
                    if r.rss_kb > RSS_LIMIT_KB {
                        t.over_rss += 1;
                        t.findings
                            .push(format!("{} MB RSS: {what}", r.rss_kb / 1024));
                    }
                    let base = to
                        .as_deref()
                        .and_then(|t| {
                            baseline
                                .get(&(input.name.clone(), if t == "ltt" { "ltt" } else { "pcp" }))
                        })
                        .copied()
                        .unwrap_or(0);
                    if out_size > 4 * in_size.max(base) + (1 << 20) {
                        t.over_size += 1;
                        t.findings
                            .push(format!("output {out_size} bytes from {in_size}: {what}"));
                    }
                    if detectable && r.code == Some(0) {
                        t.exit0_detectable += 1;
                        t.findings
                            .push(format!("exit 0 on a detectable cut: {what}"));
                    }
                }
            });
        }
    });
    tally.into_inner().unwrap()
}

fn d_short(d: &Damage) -> String {
    match d {
        Damage::Cut(n) => format!("cut at {n}"),
        Damage::Flip(at, bit) => format!("bit {bit} of byte {at} flipped"),
        Damage::Overwrite(at, b) => format!("{} bytes at {at} overwritten", b.len()),
        Damage::Hostile(at, b) => format!("length field at {at} set to {b:02x?}"),
        Damage::Text(_, to) => to.clone(),
    }
}

#[test]
fn damage_sweep() {
    let full = common::full();
    let seed = std::env::var("POLYTRACE_SWEEP_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    let t0 = Instant::now();
    let t = sweep(full, seed);
    eprintln!(
        "damage sweep ({}, seed {seed}): {} variants, {} runs in {:.0} s; exit codes 0/1/2/3: {:?}, \
         killed {}; panics {}, hangs {} (and {} runs over 10 s that finished in time when run \
         again), over 256 MB {}, outputs over 4x {}, exit 0 on a detectable cut {}; peak RSS \
         {} MB, slowest run {:.2} s",
        if full { "full" } else { "sample" },
        t.variants,
        t.runs,
        t0.elapsed().as_secs_f64(),
        t.codes,
        t.killed,
        t.panics,
        t.hangs,
        t.retried,
        t.over_rss,
        t.over_size,
        t.exit0_detectable,
        t.max_rss_kb / 1024,
        t.max_secs
    );
    assert!(t.variants > 0);
    assert!(
        t.findings.is_empty(),
        "{} findings:\n{}",
        t.findings.len(),
        t.findings[..t.findings.len().min(60)].join("\n")
    );
}
