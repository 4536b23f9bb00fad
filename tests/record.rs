//! `polytrace record`: live recordings of this machine, read back through
//! every writable format (and its peer checker), child processes found with
//! the right PID/PPID/command line/CPU, and SIGINT/SIGTERM at a random moment.
mod common;

use polytrace::formats;
use polytrace::model::FormatId;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// Output path for a format inside `dir`, named as a batch names it (PCP
/// takes a base name).
fn out_path(dir: &Path, f: FormatId) -> PathBuf {
    dir.join(format!("rec{}", polytrace::cli::output_suffix(f)))
}

fn writable() -> Vec<FormatId> {
    formats::all()
        .into_iter()
        .filter(|f| f.caps().write)
        .map(|f| f.id())
        .collect()
}

fn spawn_record(args: &[&str]) -> Child {
    Command::new(common::bin())
        .arg("record")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn polytrace record")
}

/// Exit 0, or 1 when the writer reported drops (the documented contract).
fn assert_record_ok(what: &str, out: &Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code();
    assert!(
        code == Some(0) || (code == Some(1) && err.contains("dropped")),
        "{what}: exit {code:?}\n{err}"
    );
    assert!(!err.contains("polytrace: error"), "{what}: {err}");
}

fn run_ok(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: exit {:?}\n{}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Read a recorded output back with polytrace and with the format's peer.
fn check_output(f: FormatId, path: &Path) {
    let fmt = formats::get(f);
    let what = format!("{f} output {}", path.display());
    if fmt.caps().read {
        let listing = run_ok(
            Command::new(common::bin())
                .args(["dump", "--style", "common", "--from", f.name()])
                .arg(path),
            &what,
        );
        assert!(listing.lines().count() > 5, "{what}: listing too short");
        run_ok(
            Command::new(common::bin())
                .args(["check", "--from", f.name()])
                .arg(path),
            &what,
        );
    }
    match f {
        FormatId::Pcp => {
            if let Some(t) = common::peer("pmlogcheck") {
                let out = run_ok(Command::new(t).arg(path), &what);
                assert!(out.trim().is_empty(), "{what}: pmlogcheck says\n{out}");
            }
            if let Some(t) = common::peer("pmdumplog") {
                let out = Command::new(t).arg("-a").arg(path).output().unwrap();
                let (o, e) = (
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr),
                );
                assert!(
                    out.status.success(),
                    "{what}: pmdumplog exit {:?} signal {:?}\n{e}",
                    out.status.code(),
                    std::os::unix::process::ExitStatusExt::signal(&out.status)
                );
                // libpcp reports indom trouble on stderr only ("Botch: …").
                assert!(e.trim().is_empty(), "{what}: pmdumplog says\n{e}");
                assert!(o.contains("kernel.all.cpu.user"), "{what}: {o}");
                // Process starts as event records, one parameter per field.
                assert!(o.contains("(trace.kpi.NEW.records["), "{what}: {o}");
                assert!(
                    o.contains("(trace.kpi.NEW.cmdline): value \""),
                    "{what}: {o}"
                );
            }
        }
        FormatId::Mmv => {
            if let Some(t) = common::peer("mmvdump") {
                run_ok(Command::new(t).arg(path), &what);
            }
        }
        FormatId::Dlt => {
            if let Some(t) = common::peer("dlt-convert") {
                let out = run_ok(Command::new(t).arg("-a").arg(path), &what);
                assert!(out.contains("NEW BEG"), "{what}: {out}");
            }
        }
        FormatId::Ctf => {
            if let Some(t) = common::peer("babeltrace2") {
                let out = Command::new(t)
                    .args(["--log-level=W", "convert"])
                    .arg(path)
                    .output()
                    .unwrap();
                let e = String::from_utf8_lossy(&out.stderr);
                assert!(
                    out.status.success() && e.is_empty(),
                    "{what}: babeltrace2 says\n{e}"
                );
                let o = String::from_utf8_lossy(&out.stdout);
                assert!(o.contains("metric.kernel.all.cpu.user"), "{what}: {o}");
                assert!(o.contains("kpi.NEW"), "{what}: {o}");
            }
        }
        _ => {}
    }
}

/// The common listing the recorder writes with `--listing`.
struct Listing {
    text: String,
}

impl Listing {
    fn extra(&self, key: &str) -> Option<&str> {
        let pre = format!("# extra {key}=");
        self.text.lines().find_map(|l| l.strip_prefix(pre.as_str()))
    }
    fn events<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let pat = format!(" event {name} ");
        self.text.lines().filter(move |l| l.contains(&pat))
    }
    /// `(time, value text)` after `pat` in every sample line that has it.
    fn after<'a>(&'a self, pat: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        let samples = self.text.lines().filter(|l| l.contains(" sample "));
        samples.filter_map(move |l| {
            let i = l.find(pat)?;
            Some((l.split(' ').next()?, l[i + pat.len()..].split(' ').next()?))
        })
    }
    /// `(time, value)` of `metric[inst]` in every sample line.
    fn values(&self, metric: &str, inst: i64) -> Vec<(String, i64)> {
        let pat = format!(" {metric}[{inst}]=");
        self.after(&pat)
            .filter_map(|(t, v)| Some((t.to_string(), v.parse().ok()?)))
            .collect()
    }
    fn singular(&self, metric: &str) -> Vec<f64> {
        let pat = format!(" {metric}=");
        self.after(&pat)
            .filter_map(|(_, v)| v.parse().ok())
            .collect()
    }
}

fn hz_ok(l: &Listing, key: &str) {
    let hz: f64 = l
        .extra(key)
        .unwrap_or_else(|| panic!("no {key}"))
        .parse()
        .unwrap();
    assert!((1e6..1e10).contains(&hz), "{key}={hz}");
}

#[test]
fn every_writable_format_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut jobs: Vec<(Option<FormatId>, PathBuf, Child)> = Vec::new();
    let listing = dir.path().join("rec.txt");
    let base = ["--duration", "3s", "--interval", "500ms"];
    jobs.push((None, listing.clone(), {
        let mut a = base.to_vec();
        a.extend(["--listing", "-o", listing.to_str().unwrap()]);
        spawn_record(&a)
    }));
    for f in writable() {
        let p = out_path(dir.path(), f);
        let mut a = base.to_vec();
        a.extend(["--to", f.name(), "-o", p.to_str().unwrap()]);
        jobs.push((Some(f), p.clone(), spawn_record(&a)));
    }
    for (f, p, child) in jobs {
        let out = child.wait_with_output().unwrap();
        let what = f.map(|f| f.name()).unwrap_or("listing");
        assert_record_ok(what, &out);
        if let Some(f) = f {
            check_output(f, &p);
        }
    }
    let l = Listing {
        text: std::fs::read_to_string(&listing).unwrap(),
    };
    for k in ["record.tsc_hz", "record.tsc_hz_start", "record.tsc_hz_end"] {
        if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
            hz_ok(&l, k);
        }
    }
    assert_eq!(l.extra("record.stopped_by"), Some("\"duration\""));
    let scans: u64 = l.extra("record.scans").unwrap().parse().unwrap();
    assert!((2..=7).contains(&scans), "{scans} scans in 3 s at 500 ms");
    // The first scan lists every process as NEW, PID 1 with PPID 0.
    assert!(
        l.events("kpi.NEW").any(|e| e.contains(" pid=1 ppid=0 ")),
        "no NEW for PID 1"
    );
    // Counters from /proc/stat and /proc/meminfo, under PCP names.
    let user = l.singular("kernel.all.cpu.user");
    assert_eq!(user.len() as u64, scans);
    assert!(user.windows(2).all(|w| w[0] <= w[1]), "{user:?}");
    let ncpu: f64 = l.extra("record.ncpu").unwrap().parse().unwrap();
    assert_eq!(l.singular("hinv.ncpu")[0], ncpu);
    let free = l.singular("mem.util.free");
    let phys = l.singular("mem.physmem");
    assert!(free[0] > 0.0 && free[0] < phys[0]);
    // Every /proc/interrupts row and CPU is an instance of kpi.irq.
    let text = std::fs::read_to_string("/proc/interrupts").unwrap();
    let ncols = text.lines().next().unwrap().split_whitespace().count();
    let expect: usize = text
        .lines()
        .skip(1)
        .map(|r| {
            r.split_whitespace()
                .skip(1)
                .take(ncols)
                .take_while(|t| t.parse::<u64>().is_ok())
                .count()
        })
        .sum();
    let irq_line = l
        .text
        .lines()
        .find(|x| x.contains(" sample kpi.irq.count["))
        .unwrap();
    assert_eq!(irq_line.matches("kpi.irq.count[").count(), expect);
    // Every data line carries the same wall-clock base as the header says.
    assert!(l.text.contains("time absolute (epoch)"));
}

/// Kills the child on drop so a failing test leaves no busy loop behind.
struct Guard(Child);
impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// utime + stime of a live process, in ticks.
fn proc_ticks(pid: i64) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = s[s.rfind(')').unwrap() + 2..].split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn own_ppid() -> i64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap();
    let rest = &s[s.rfind(')').unwrap() + 2..];
    rest.split(' ').nth(1).unwrap().parse().unwrap()
}

#[test]
fn finds_known_children() {
    let dir = tempfile::tempdir().unwrap();
    let listing = dir.path().join("kids.txt");
    // A comm with a space and a ')' (dlt-kpi would read PPID 0 for it).
    // Started first so the comm is set before the recorder's first scan.
    let odd = Guard(
        Command::new("bash")
            .args(["-c", "printf 'bu sy) x' > /proc/$$/comm; sleep 2.5; true"])
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(300));
    let rec = spawn_record(&[
        "--duration",
        "4s",
        "--interval",
        "250ms",
        "--listing",
        "-o",
        listing.to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_millis(700));
    let me = std::process::id() as i64;
    let sleeper = Command::new("sleep").arg("1.2").spawn().unwrap();
    let busy_start = std::time::Instant::now();
    let busy = Guard(
        Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap(),
    );
    // argv0 with spaces, parentheses and a semicolon (exec -a).
    let named = Guard({
        use std::os::unix::process::CommandExt;
        Command::new("sleep")
            .arg0("my proc (x); y")
            .arg("1.5")
            .spawn()
            .unwrap()
    });
    let (sp, bp, np, op) = (
        sleeper.id() as i64,
        busy.0.id() as i64,
        named.0.id() as i64,
        odd.0.id() as i64,
    );
    let mut sleeper = Guard(sleeper);
    let _ = sleeper.0.wait();
    std::thread::sleep(Duration::from_millis(1000));
    // The busy child's own account of its CPU use, to compare ACT against.
    let busy_ticks = proc_ticks(bp);
    let busy_life = busy_start.elapsed().as_secs_f64();
    drop(busy);
    drop(named);
    drop(odd);
    let out = rec.wait_with_output().unwrap();
    assert_record_ok("listing", &out);
    let l = Listing {
        text: std::fs::read_to_string(&listing).unwrap(),
    };
    let find = |kind: &str, pid: i64| -> Option<String> {
        let pat = format!(" pid={pid} ");
        l.events(kind)
            .find(|e| e.contains(&pat) || e.ends_with(&format!(" pid={pid}")))
            .map(str::to_string)
    };
    for (pid, cmd) in [
        (sp, "sleep"),
        (bp, "sh"),
        (np, "my proc (x); y"),
        (op, "bash"),
    ] {
        let new = find("kpi.NEW", pid).unwrap_or_else(|| panic!("no NEW for {cmd} {pid}"));
        assert!(
            new.ends_with(&format!(" pid={pid} ppid={me} cmdline={cmd:?}")),
            "{new}"
        );
        let stp = find("kpi.STP", pid).unwrap_or_else(|| panic!("no STP for {cmd} {pid}"));
        let t = |s: &str| s.split(' ').next().unwrap().parse::<f64>().unwrap();
        assert!(t(&stp) > t(&new), "{new}\n{stp}");
    }
    // The busy loop wants one CPU: 1000/ncpu per mille on an idle machine.
    // The machine is shared, so compare with what the kernel says the child
    // got over its life (CLK_TCK 100 assumed, as on Linux x86/arm).
    let ncpu: f64 = l.extra("record.ncpu").unwrap().parse().unwrap();
    let cpu: Vec<i64> = l
        .values("kpi.proc.cpu", bp)
        .into_iter()
        .map(|v| v.1)
        .collect();
    assert!(!cpu.is_empty(), "no ACT for the busy child");
    let full = 1000.0 / ncpu;
    let own = busy_ticks as f64 * 10.0 / busy_life / ncpu;
    let mean = cpu.iter().sum::<i64>() as f64 / cpu.len() as f64;
    assert!(
        cpu.iter().all(|v| (*v as f64) <= 1.3 * full),
        "{cpu:?} vs {full}"
    );
    assert!(
        mean >= 0.5 * own && mean <= 1.6 * own + 20.0,
        "ACT {cpu:?} (mean {mean}) vs the child's own {own} per mille (full core {full})"
    );
    let rss = l.values("kpi.proc.rss", bp);
    assert!(rss.iter().all(|v| v.1 > 0), "{rss:?}");
    // The sleepers never show up in ACT.
    assert!(l.values("kpi.proc.cpu", sp).is_empty());
    // The control/processes list at start holds this test process.
    let ctl = l
        .events("control.process")
        .find(|e| e.contains(&format!(" pid={me} ")))
        .expect("control.process for the test itself");
    assert!(ctl.contains(&format!(" ppid={} ", own_ppid())), "{ctl}");
    let ctl = l
        .events("control.process")
        .find(|e| e.contains(&format!(" pid={op} ")))
        .expect("control.process for the odd comm");
    assert!(
        ctl.contains(&format!("name=\"bu sy) x\" pid={op} ppid={me} ")),
        "{ctl}"
    );
}

fn random_ms(lo: u64, hi: u64) -> u64 {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    lo + (n ^ (n >> 7)) % (hi - lo)
}

#[test]
fn signals_leave_valid_output() {
    let dir = tempfile::tempdir().unwrap();
    let mut jobs = Vec::new();
    for sig in ["INT", "TERM"] {
        let l = dir.path().join(format!("sig{sig}.txt"));
        let a = vec![
            "--interval".to_string(),
            "200ms".into(),
            "--listing".into(),
            "-o".into(),
            l.to_string_lossy().into_owned(),
        ];
        jobs.push((sig, None, l, a));
        for f in writable() {
            let p = out_path(&dir.path().join(sig), f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            let a = vec![
                "--interval".to_string(),
                "200ms".into(),
                "--to".into(),
                f.name().into(),
                "-o".into(),
                p.to_string_lossy().into_owned(),
            ];
            jobs.push((sig, Some(f), p, a));
        }
    }
    let running: Vec<_> = jobs
        .into_iter()
        .map(|(sig, f, p, a)| {
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            (sig, f, p, spawn_record(&a))
        })
        .collect();
    let mut done = Vec::new();
    for (sig, f, p, child) in running {
        std::thread::sleep(Duration::from_millis(random_ms(150, 900)));
        let st = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(st.success());
        done.push((sig, f, p, child));
    }
    for (sig, f, p, child) in done {
        let out = child.wait_with_output().unwrap();
        let what = format!("SIG{sig} {}", f.map(|f| f.name()).unwrap_or("listing"));
        assert_record_ok(&what, &out);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("stopped by SIG{sig}")),
            "{what}: {err}"
        );
        match f {
            Some(f) => check_output(f, &p),
            None => {
                let l = Listing {
                    text: std::fs::read_to_string(&p).unwrap(),
                };
                assert_eq!(
                    l.extra("record.stopped_by"),
                    Some(format!("\"SIG{sig}\"").as_str())
                );
                assert!(!l.singular("kernel.all.pswitch").is_empty());
            }
        }
    }
    // Nothing left in any staging area once every recorder has exited.
    for d in walk(dir.path()) {
        assert!(
            !d.to_string_lossy().contains(".polytrace-"),
            "staging left behind: {}",
            d.display()
        );
    }
}

fn walk(p: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(p).unwrap().flatten() {
        let path = e.path();
        if path.is_dir() {
            v.extend(walk(&path));
        }
        v.push(path);
    }
    v
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("x");
    for args in [
        vec!["--interval", "nonsense", "--listing", "-o"],
        vec!["--interval", "0s", "--listing", "-o"],
        vec!["--duration", "1s", "--samples", "3", "--listing", "-o"],
    ] {
        let out = Command::new(common::bin())
            .arg("record")
            .args(&args)
            .arg(&o)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!o.exists());
    }
}

/// What a KPI stream says, independent of item order inside a scan and of
/// instance ids: events as (type, fields), samples as metric → (instance
/// name, value), and the final membership of the two KPI indoms.
#[derive(Debug, PartialEq, Default)]
struct KpiView {
    events: Vec<(u32, Vec<polytrace::model::Value>)>,
    samples: Vec<Vec<(String, String, polytrace::model::Value)>>,
    procs: std::collections::BTreeMap<i32, String>,
    irqs: std::collections::BTreeMap<i32, String>,
}

fn kpi_view(items: &[polytrace::model::Item]) -> KpiView {
    use polytrace::formats::kpi::schema;
    use polytrace::model::Item;
    let mut v = KpiView::default();
    let mut names = std::collections::HashMap::new();
    for it in items {
        match it {
            Item::Metric(m) => {
                names.insert(m.id, m.name().to_string());
            }
            Item::Indom(u) if u.id == schema::PROC_INDOM || u.id == schema::IRQ_INDOM => {
                let map = if u.id == schema::PROC_INDOM {
                    &mut v.procs
                } else {
                    &mut v.irqs
                };
                u.apply_to(map);
            }
            Item::Event(e) if (1..=3).contains(&e.type_id) => {
                v.events.push((e.type_id, e.fields.clone()))
            }
            Item::Sample(s) => {
                let mut row = Vec::new();
                for mv in &s.metrics {
                    let Some(n) = names.get(&mv.metric).filter(|n| n.starts_with("kpi.")) else {
                        continue;
                    };
                    for (inst, val) in mv.values.as_ref().unwrap() {
                        let iname = if n == "kpi.irq.count" {
                            v.irqs.get(inst).cloned().unwrap_or_default()
                        } else {
                            inst.to_string()
                        };
                        row.push((n.clone(), iname, val.clone()));
                    }
                }
                if !row.is_empty() {
                    v.samples.push(row);
                }
            }
            _ => {}
        }
    }
    // Within one scan the recorder and dlt-kpi order groups the same way,
    // but PIDs inside a group may come in any order (spec §3.1).
    v.events.sort_by_key(|(t, f)| (*t, format!("{f:?}")));
    v
}

#[test]
fn kpi_mapping_matches_the_kpi_reader() {
    use polytrace::input::Input;
    use polytrace::model::{Header, Trace};
    use polytrace::options::{ReadOptions, WriteOptions};
    use polytrace::output::OutTarget;
    use polytrace::record::sampler::{Config, Sampler};
    let kpi = formats::get(FormatId::Kpi);
    if !(kpi.caps().write && kpi.caps().read) {
        eprintln!("skipping: KPI format not readable and writable in this build");
        return;
    }
    let mut s = Sampler::new(Config::system(1));
    let mut items = s.definitions();
    for _ in 0..3 {
        s.scan(&mut items);
        std::thread::sleep(Duration::from_millis(200));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scan.kpi");
    let header = Header::new(FormatId::Kpi, "test");
    let mut w = kpi
        .create(
            &OutTarget::Path(path.clone()),
            &header,
            &WriteOptions::default(),
        )
        .unwrap();
    for it in &items {
        w.write_item(it).unwrap();
    }
    let loss = w.finish().unwrap();
    // Only the system metrics and the LTT control events have no KPI form.
    for (what, _) in loss.dropped.keys() {
        assert!(
            what.starts_with("kernel.")
                || what.starts_with("mem.")
                || what.starts_with("hinv.")
                || what.starts_with("control."),
            "unexpected drop: {what}"
        );
    }
    let input = Input::resolve(&path).unwrap();
    let mut r = kpi.open(&input, &ReadOptions::default()).unwrap();
    let back = Trace::collect(r.as_mut()).unwrap();
    let (a, b) = (kpi_view(&items), kpi_view(&back.items));
    assert!(a.events.len() > 10 && a.samples.len() >= 3, "{a:?}");
    assert_eq!(a.procs, b.procs);
    assert_eq!(a.irqs, b.irqs);
    assert_eq!(a.events, b.events);
    assert_eq!(a.samples, b.samples);
}

/// `pminfo -L -f` values: (metric, instance name or "") → value text.
fn pminfo(root: &Path, metrics: &[&str]) -> std::collections::HashMap<(String, String), f64> {
    let tool = common::peer("pminfo").unwrap();
    let out = run_ok(
        Command::new(tool)
            .arg("-n")
            .arg(root)
            .arg("-L")
            .arg("-f")
            .args(metrics),
        "pminfo -L -f",
    );
    let mut m = std::collections::HashMap::new();
    let mut cur = String::new();
    for line in out.lines() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if !line.starts_with(' ') {
            cur = t.to_string();
        } else if let Some(v) = t.strip_prefix("value ") {
            m.insert((cur.clone(), String::new()), v.parse().unwrap());
        } else if let Some(rest) = t.strip_prefix("inst [") {
            let name = rest.split('"').nth(1).unwrap_or("").to_string();
            let v = rest.rsplit("value ").next().unwrap().parse().unwrap();
            m.insert((cur.clone(), name), v);
        }
    }
    m
}

/// The system metrics agree with PCP's own Linux PMDA (pmda_linux.so, run
/// in-process by `pminfo -L`) read just before and just after one scan.
#[test]
fn system_metrics_agree_with_pcp_linux_pmda() {
    let pmns = Path::new("/var/lib/pcp/pmns/root_linux");
    if common::peer("pminfo").is_none() || !pmns.is_file() {
        eprintln!("skipping: pminfo or the Linux PMNS not installed");
        return;
    }
    // pminfo -L needs a PMNS root; the installed one is split per PMDA.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let text = std::fs::read_to_string(pmns).unwrap();
    let body = &text[text.find("root {").unwrap()..];
    std::fs::write(&root, format!("#define LINUX 60\n{body}")).unwrap();
    let counters = [
        ("kernel.all.cpu.user", ""),
        ("kernel.all.cpu.sys", ""),
        ("kernel.all.cpu.idle", ""),
        ("kernel.all.cpu.intr", ""),
        ("kernel.all.pswitch", ""),
        ("kernel.all.sysfork", ""),
        ("kernel.all.intr", ""),
        ("kernel.percpu.cpu.user", "cpu0"),
        ("kernel.percpu.cpu.idle", "cpu0"),
        ("kernel.percpu.interrupts", "LOC::cpu0"),
    ];
    let fixed = [
        "hinv.ncpu",
        "hinv.pagesize",
        "mem.physmem",
        "kernel.all.boottime",
    ];
    let names: Vec<&str> = counters
        .iter()
        .map(|c| c.0)
        .chain(fixed)
        .chain(["mem.util.free"])
        .collect();
    let before = pminfo(&root, &names);
    let listing = dir.path().join("one.txt");
    let out = Command::new(common::bin())
        .args(["record", "--samples", "0", "--listing", "-o"])
        .arg(&listing)
        .output()
        .unwrap();
    assert_record_ok("listing", &out);
    let after = pminfo(&root, &names);
    let l = Listing {
        text: std::fs::read_to_string(&listing).unwrap(),
    };
    // Our instance ids, from the indom lines (`[id "name"]`).
    let inst_id = |name: &str| -> i64 {
        let pat = format!("\"{name}\"]");
        let line = l
            .text
            .lines()
            .find(|x| x.contains(" indom ") && x.contains(&pat));
        let line = line.unwrap_or_else(|| panic!("no instance {name}"));
        let i = line.find(&pat).unwrap();
        let open = line[..i].rfind('[').unwrap();
        line[open + 1..i].trim().parse().unwrap()
    };
    for (m, inst) in counters {
        let key = (m.to_string(), inst.to_string());
        let (a, b) = (before[&key], after[&key]);
        let ours = if inst.is_empty() {
            l.singular(m)[0]
        } else {
            l.values(m, inst_id(inst))[0].1 as f64
        };
        assert!(
            a <= ours && ours <= b,
            "{m}[{inst}]: pcp {a} .. {b}, ours {ours}"
        );
    }
    for m in fixed {
        let key = (m.to_string(), String::new());
        assert_eq!(l.singular(m)[0], before[&key], "{m}");
    }
    let free = l.singular("mem.util.free")[0];
    let pcp = before[&("mem.util.free".to_string(), String::new())];
    assert!(
        (free - pcp).abs() <= 0.1 * pcp,
        "mem.util.free {free} vs {pcp}"
    );
}

/// With no buffer the writer starts at once: the header has only the start
/// calibration and the end values come in a final annotation.
#[test]
fn streaming_mode_puts_end_calibration_in_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.txt");
    let out = Command::new(common::bin())
        .args(["record", "--samples", "1", "--interval", "200ms"])
        .args(["--buffer", "0", "--listing", "-o"])
        .arg(&p)
        .output()
        .unwrap();
    assert_record_ok("streaming", &out);
    let l = Listing {
        text: std::fs::read_to_string(&p).unwrap(),
    };
    if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        hz_ok(&l, "record.tsc_hz_start");
        assert_eq!(l.extra("record.tsc_hz_end"), None);
        let note = l.text.lines().last().unwrap();
        common::assert_has(note, " note \"recording ended (samples); counter rate");
    }
    assert_eq!(l.singular("kernel.all.pswitch").len(), 2, "2 scans");
}

#[test]
fn a_second_ctrl_c_ends_at_once_and_leaves_no_staging() {
    // The first SIGINT asks the recorder to finish; a second one, right
    // after, ends it at once: by SIGINT, with the staging removed (or, had
    // the recorder already finished, with a complete output).
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.ltt");
    let o = out.to_string_lossy().into_owned();
    let child = spawn_record(&["--interval", "2s", "-o", &o]);
    std::thread::sleep(Duration::from_millis(700));
    for _ in 0..2 {
        let st = Command::new("kill")
            .arg("-INT")
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(st.success());
    }
    let res = child.wait_with_output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    match res.status.signal() {
        Some(s) => {
            assert_eq!(s, libc::SIGINT, "{:?}", res.status);
            assert!(!out.exists(), "output of a killed recording");
        }
        None => assert_record_ok("second SIGINT after the end", &res),
    }
    for d in walk(dir.path()) {
        assert!(
            !d.to_string_lossy().contains(".polytrace-"),
            "staging left behind: {}",
            d.display()
        );
    }
}
