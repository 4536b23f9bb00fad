//! KPI text lines against the real dlt-convert -a listing of a dlt-kpi capture.
mod common;

use assert_cmd::Command;
use std::collections::BTreeMap;

const MARKER: &str = "... <<Message truncated, too long>>";

fn capture() -> std::path::PathBuf {
    common::corpus().join("kpi/kpi-capture.convert-a.txt")
}

/// PROC/PROC lines of a dlt-convert -a listing: (noar, payload).
fn kpi_lines(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .filter(|l| l.contains(" PROC PROC "))
        .map(|l| {
            let open = l.find('[').unwrap();
            let close = l.rfind(']').unwrap();
            let head: Vec<&str> = l[..open].split_whitespace().collect();
            let noar: usize = head.last().unwrap().parse().unwrap();
            (noar, l[open + 1..close].to_string())
        })
        .collect()
}

/// Dataset counts per type computed from the argument counts dlt-convert
/// printed (independent of our dataset splitting): every data message has
/// noar − 1 datasets, minus the truncated duplicates.
fn independent_counts(text: &str) -> BTreeMap<String, u64> {
    let mut c = BTreeMap::new();
    for (noar, payload) in kpi_lines(text) {
        let ty = &payload[..3];
        if payload.len() == 7 && (payload.ends_with("BEG") || payload.ends_with("END")) {
            continue;
        }
        let mut n = noar as u64 - 1;
        if payload.ends_with(MARKER) {
            n -= 1;
        }
        *c.entry(ty.to_string()).or_default() += n;
    }
    c
}

#[test]
fn info_counts_match_an_independent_count() {
    let text = std::fs::read_to_string(capture()).unwrap();
    let expected = independent_counts(&text);
    // The spec's numbers for this capture (§7, §3.8): sanity anchor.
    assert_eq!(expected["NEW"], 2540);
    let out = common::output_ok(
        std::process::Command::new(common::bin())
            .args(["info"])
            .arg(capture()),
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    for (ty, n) in &expected {
        let line = format!("{ty} datasets");
        let got: u64 = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(&line))
            .unwrap_or_else(|| panic!("no {line} in:\n{stdout}"))
            .split_whitespace()
            .last()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(got, *n, "{ty}");
    }
}

/// Group payloads with the type word removed, datasets joined by one space,
/// the truncated duplicates taken out (each is a cut-off prefix of the first
/// dataset of the next message of its type).
fn groups_from_convert(text: &str) -> Vec<String> {
    let lines = kpi_lines(text);
    let mut open: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, (_, payload)) in lines.iter().enumerate() {
        let ty = payload[..3].to_string();
        let rest = payload.get(4..).unwrap_or("");
        match rest {
            "BEG" => {
                open.insert(ty, vec![]);
            }
            "END" => {
                let parts = open.remove(&ty).unwrap();
                out.push(format!("{ty} {}", parts.join(" ")));
            }
            _ => {
                let mut body = rest.to_string();
                if let Some(cut) = body.strip_suffix(MARKER).map(str::to_string) {
                    let next = lines[i + 1..]
                        .iter()
                        .map(|(_, p)| p)
                        .find(|p| p.starts_with(&ty) && !p.ends_with("END") && !p.ends_with("BEG"))
                        .unwrap();
                    let next_body = &next[4..];
                    // The longest tail of `cut` (starting at a space or the
                    // start) that is a prefix of the next message's datasets.
                    let start = std::iter::once(0)
                        .chain(cut.match_indices(' ').map(|(k, _)| k + 1))
                        .find(|&k| next_body.starts_with(&cut[k..]))
                        .unwrap();
                    body = cut[..start].trim_end().to_string();
                }
                if !body.is_empty() {
                    open.get_mut(&ty).unwrap().push(body);
                }
            }
        }
    }
    out
}

fn groups_from_bare(text: &str) -> Vec<String> {
    let mut open: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut out = Vec::new();
    for l in text.lines() {
        let ty = l[..3].to_string();
        match &l[3..] {
            " BEG" => {
                open.insert(ty, vec![]);
            }
            " END" => out.push(format!("{ty} {}", open.remove(&ty).unwrap().join(" "))),
            rest => open.get_mut(&ty).unwrap().push(rest[1..].to_string()),
        }
    }
    out
}

#[test]
fn convert_to_bare_lines_and_back_keeps_every_dataset_and_group() {
    let dir = tempfile::tempdir().unwrap();
    let bare = dir.path().join("capture.kpi");
    let back = dir.path().join("back.kpi");
    let run = |args: &[&std::ffi::OsStr]| {
        common::output_ok(std::process::Command::new(common::bin()).args(args));
    };
    run(&[
        "convert".as_ref(),
        capture().as_os_str(),
        "--to".as_ref(),
        "kpi".as_ref(),
        "--kpi-style".as_ref(),
        "bare".as_ref(),
        "-o".as_ref(),
        bare.as_os_str(),
    ]);
    run(&[
        "convert".as_ref(),
        bare.as_os_str(),
        "--to".as_ref(),
        "kpi".as_ref(),
        "-o".as_ref(),
        back.as_os_str(),
    ]);
    let bare_text = std::fs::read_to_string(&bare).unwrap();
    assert_eq!(bare_text, std::fs::read_to_string(&back).unwrap());
    let original = groups_from_convert(&std::fs::read_to_string(capture()).unwrap());
    let ours = groups_from_bare(&bare_text);
    // spec §7: 245 + 370 + 365 + 97 + 39 groups.
    assert_eq!(original.len(), 245 + 370 + 365 + 97 + 39);
    assert_eq!(original.len(), ours.len());
    for (i, (a, b)) in original.iter().zip(&ours).enumerate() {
        assert_eq!(a, b, "group {i}");
    }
}

#[test]
fn dump_rerenders_every_kpi_line_with_its_time() {
    // The native dump of a dlt-convert listing is a dlt-convert listing of
    // the KPI messages: same groups, same timestamps and tmsp per group.
    let out = Command::new(common::bin())
        .arg("dump")
        .arg(capture())
        .output()
        .unwrap();
    assert!(out.status.success());
    let ours = String::from_utf8(out.stdout).unwrap();
    let orig = std::fs::read_to_string(capture()).unwrap();
    let (a, b) = (groups_from_convert(&ours), groups_from_convert(&orig));
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x, y, "group {i}");
    }
    // Every BEG line keeps its storage time and tmsp.
    let beg = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.contains(" PROC PROC ") && l.ends_with(" BEG]"))
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                format!("{} {} {} {}", f[1], f[2], f[3], f[f.len() - 2])
            })
            .collect()
    };
    let (a, b) = (beg(&ours), beg(&orig));
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x, y);
    }
}

#[test]
fn bare_seed_lines_with_interleaved_groups() {
    // Groups split over lines and interleaved with other types (spec §3.1).
    let input = "NEW BEG\nCHK BEG\nCHK 1;/sbin/init 2;(kthreadd)\nCHK END\n\
                 NEW 21226;1;/usr/libexec/nm-dispatcher 21300;1;proc with spaces; and;semis 2\n\
                 NEW 21301;21226;x\nNEW END\nACT 20503;10;389;3;1886649;0\n\
                 IRQ 0;cpu0:133;cpu1:0; 1;cpu0:76827;\nSTP 20541 21301\n";
    let out = Command::new(common::bin())
        .args(["info", "-"])
        .write_stdin(input)
        .output()
        .unwrap();
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{s}");
    let count = |k: &str| -> u64 {
        s.lines()
            .find(|l| l.trim_start().starts_with(k))
            .unwrap()
            .split_whitespace()
            .last()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(count("NEW datasets"), 3);
    assert_eq!(count("CHK datasets"), 2);
    assert_eq!(count("ACT datasets"), 1);
    assert_eq!(count("IRQ datasets"), 2);
    assert_eq!(count("STP datasets"), 2);
    // The command line with spaces and semicolons survives verbatim.
    let d = Command::new(common::bin())
        .args(["dump", "-", "--style", "common"])
        .write_stdin(input)
        .output()
        .unwrap();
    let d = String::from_utf8(d.stdout).unwrap();
    assert!(
        d.contains(r#"cmdline="proc with spaces; and;semis 2""#),
        "{d}"
    );
    // IRQ row with fewer columns than CPUs is accepted.
    assert!(d.contains("kpi.irq.count[2]=76827"), "{d}");
}

// ------------------------------------------------------------ KPI from PCP

/// One pmdumplog record: its time (seconds of the day) and
/// `(metric, instance) → value text`.
type Record = (f64, BTreeMap<(String, i64), String>);

/// `pmdumplog -z ARCHIVE METRIC…`, record by record.
fn pmdumplog_values(archive: &std::path::Path, metrics: &[&str]) -> Option<Vec<Record>> {
    let tool = common::peer("pmdumplog")?;
    let o = common::output_ok(
        std::process::Command::new(tool)
            .arg("-z")
            .arg(archive)
            .args(metrics),
    );
    let mut recs = Vec::new();
    let mut metric = String::new();
    for l in String::from_utf8_lossy(&o.stdout).lines() {
        let t = l.trim_start();
        if l.len() > 15 && l.as_bytes()[2] == b':' && l.contains(" metric") {
            let hms: Vec<f64> = l[..15].split(':').map(|x| x.parse().unwrap()).collect();
            recs.push((hms[0] * 3600.0 + hms[1] * 60.0 + hms[2], BTreeMap::new()));
        } else if let Some(rest) = t.strip_prefix("inst [") {
            let inst: i64 = rest.split_whitespace().next().unwrap().parse().unwrap();
            let v = rest.rsplit_once("] value ").unwrap().1.trim_matches('"');
            recs.last_mut()
                .unwrap()
                .1
                .insert((metric.clone(), inst), v.to_string());
        } else if t.contains(" (") && t.ends_with("):") {
            metric = t[t.find('(').unwrap() + 1..t.len() - 2].to_string();
        } else if t.contains("): value ") {
            let m = t[t.find('(').unwrap() + 1..t.find("):").unwrap()].to_string();
            let v = t.rsplit_once("): value ").unwrap().1;
            recs.last_mut().unwrap().1.insert((m, -1), v.to_string());
        }
    }
    Some(recs)
}

/// KPI data lines of a `dlt-convert -a`-style file: (type, datasets).
/// Command lines hold spaces: a NEW dataset starts at a space followed by
/// `pid;ppid;`, a CHK one at `pid;` (spec §9.2); the others have none.
fn kpi_datasets(text: &str) -> Vec<(String, Vec<String>)> {
    let starts = |rest: &str, fields: usize| -> bool {
        let mut r = rest;
        for _ in 0..fields {
            let n = r.bytes().take_while(|b| b.is_ascii_digit()).count();
            if n == 0 || r.as_bytes().get(n) != Some(&b';') {
                return false;
            }
            r = &r[n + 1..];
        }
        true
    };
    kpi_lines(text)
        .into_iter()
        .filter(|(_, p)| !p.ends_with(" BEG") && !p.ends_with(" END"))
        .map(|(_, p)| {
            let (ty, rest) = p.split_once(' ').unwrap();
            let fields = match ty {
                "NEW" => 2,
                "CHK" => 1,
                _ => 0,
            };
            let mut out: Vec<String> = Vec::new();
            let mut cur = String::new();
            for (i, w) in rest.split(' ').enumerate() {
                if i > 0 && (fields == 0 || starts(w, fields)) {
                    out.push(std::mem::take(&mut cur));
                } else if i > 0 {
                    cur.push(' ');
                }
                cur.push_str(w);
            }
            out.push(cur);
            (ty.to_string(), out)
        })
        .collect()
}

fn convert_to_kpi(input: &std::path::Path) -> (i32, String, String) {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("x.kpi");
    let o = Command::cargo_bin("polytrace")
        .unwrap()
        .args(["convert", "--to", "kpi", "-o"])
        .arg(&out)
        .arg(input)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        std::fs::read_to_string(&out).unwrap_or_default(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn pcp_proc_metrics_give_act_cpu_from_utime_and_stime() {
    let Some(ts) = common::pcp_testsuite() else {
        return;
    };
    let arch = ts.join("archives/proc");
    let Some(recs) = pmdumplog_values(
        &arch,
        &[
            "proc.psinfo.utime",
            "proc.psinfo.stime",
            "proc.psinfo.rss",
            "hinv.ncpu",
        ],
    ) else {
        return;
    };
    let (code, text, err) = convert_to_kpi(&arch);
    assert_eq!(code, 0, "{err}");
    let ds = kpi_datasets(&text);
    // NEW: every process of the proc instance domain (pmlogger logged
    // values for two of them, which have their ppid).
    let new: Vec<&String> = ds
        .iter()
        .filter(|(t, _)| t == "NEW")
        .flat_map(|(_, d)| d)
        .collect();
    let o = std::process::Command::new(common::peer("pmdumplog").unwrap())
        .arg("-i")
        .arg(&arch)
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&o.stdout).into_owned();
    let proc_indom = listing.split("InDom: 60.9\n").nth(1).unwrap();
    let mut pids: Vec<i64> = proc_indom
        .lines()
        .skip(1)
        .map_while(|l| l.trim().split_once(" or ").map(|(i, _)| i.parse().unwrap()))
        .collect();
    pids.sort();
    assert!(pids.len() > 250, "{}", pids.len());
    let new_pids: Vec<i64> = new
        .iter()
        .map(|d| d.split(';').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(new_pids, pids);
    for d in [
        "29922;1;/usr/lib/pcp/bin/pmcd -T 3",
        "30016;1;pmlogger -P -c config.default 20110930.17.20",
    ] {
        assert!(new.iter().any(|n| *n == d), "{d}");
    }
    // ACT by hand from pmdumplog's values: pmcd's utime+stime go
    // 2580 → 2600 → 2610 → 2630 ms at 22.959242, 23.300460, 23.802930,
    // 24.305845 s; 2 CPUs: 20 × 1000 / 341.218 / 2 = 29.3 → 29,
    // 10 × 1000 / 502.470 / 2 = 9.95 → 9, 20 × 1000 / 502.915 / 2 = 19.9 → 19.
    let act: Vec<&String> = ds
        .iter()
        .filter(|(t, _)| t == "ACT")
        .flat_map(|(_, d)| d)
        .collect();
    let cpu_of = |d: &str| -> (i64, i64) {
        let f: Vec<i64> = d.split(';').map(|x| x.parse().unwrap()).collect();
        (f[0], f[1])
    };
    let got: Vec<(i64, i64)> = act.iter().map(|d| cpu_of(d)).collect();
    assert_eq!(got, [(29922, 29), (29922, 9), (29922, 19)]);
    // The same computed from every record pmdumplog lists.
    let with = |r: &BTreeMap<(String, i64), String>, m: &str, i: i64| -> Option<i64> {
        r.get(&(m.to_string(), i)).map(|v| v.parse().unwrap())
    };
    let mut want = Vec::new();
    let scans: Vec<&Record> = recs
        .iter()
        .filter(|(_, r)| r.keys().any(|(m, _)| m == "proc.psinfo.utime"))
        .collect();
    for w in scans.windows(2) {
        let ncpu = with(&w[1].1, "hinv.ncpu", -1).unwrap();
        let dt_us = ((w[1].0 - w[0].0) * 1e6).round() as i64;
        for pid in [29922, 30016] {
            let busy = |r| {
                with(r, "proc.psinfo.utime", pid).unwrap()
                    + with(r, "proc.psinfo.stime", pid).unwrap()
            };
            let cpu = (busy(&w[1].1) - busy(&w[0].1)) * 1_000_000 / dt_us / ncpu;
            if cpu > 0 {
                want.push((pid, cpu));
            }
        }
    }
    assert_eq!(got, want);
    // rss in pages: proc.psinfo.rss is in Kbyte, 4 KiB pages.
    let rss: i64 = act[0].split(';').nth(2).unwrap().parse().unwrap();
    assert_eq!(
        rss,
        with(&scans[1].1, "proc.psinfo.rss", 29922).unwrap() / 4
    );
    // IRQ rows from kernel.percpu.interrupts.*, in /proc/interrupts order.
    let irq = ds.iter().find(|(t, _)| t == "IRQ").unwrap();
    assert!(
        irq.1[0].starts_with("0;cpu0:") && irq.1[0].ends_with(';'),
        "{:?}",
        irq.1
    );
    assert!(
        irq.1.iter().any(|d| d.starts_with("LOC;cpu0:")),
        "{:?}",
        irq.1
    );
}

#[test]
fn pcp_new_datasets_name_the_processes_proc_psinfo_cmd_lists() {
    let Some(ts) = common::pcp_testsuite() else {
        return;
    };
    let arch = ts.join("archives/pcp-ps");
    let Some(recs) = pmdumplog_values(&arch, &["proc.psinfo.cmd", "proc.psinfo.psargs"]) else {
        return;
    };
    // Per pid, cmd and psargs as the first record that has the pid says.
    let mut cmds: BTreeMap<i64, (String, String)> = BTreeMap::new();
    for (_, r) in &recs {
        for ((m, pid), v) in r {
            if m == "proc.psinfo.cmd" {
                let ps = r
                    .get(&("proc.psinfo.psargs".to_string(), *pid))
                    .cloned()
                    .unwrap_or_default();
                cmds.entry(*pid).or_insert_with(|| (v.clone(), ps));
            }
        }
    }
    assert!(cmds.len() > 200, "{}", cmds.len());
    let (code, text, err) = convert_to_kpi(&arch);
    assert_eq!(code, 0, "{err}");
    let mut new: BTreeMap<i64, String> = BTreeMap::new();
    for (t, d) in kpi_datasets(&text) {
        if t == "NEW" {
            for x in d {
                let mut f = x.splitn(3, ';');
                let pid = f.next().unwrap().parse().unwrap();
                new.insert(pid, f.nth(1).unwrap().to_string());
            }
        }
    }
    // Every process the archive lists has a NEW with its command line
    // (psargs; without one, a kernel thread `(name)` or an empty psargs,
    // `(cmd)` as dlt-kpi shows it).
    let mut named = 0;
    for (pid, (cmd, psargs)) in &cmds {
        let Some(cl) = new.get(pid) else {
            panic!("no NEW for pid {pid} ({cmd})")
        };
        let want = if psargs.starts_with('(') || psargs.is_empty() {
            format!("({cmd})")
        } else {
            psargs.clone()
        };
        assert_eq!(cl, &want, "pid {pid}");
        named += cl.contains(cmd.as_str()) as usize;
    }
    // The NEW names the process as proc.psinfo.cmd does, except where the
    // archive's own psargs and cmd disagree (a script's interpreter, a
    // process renamed after exec): 1 of the 258 here (pmpause, psargs
    // `/bin/sh …pmlogger_farm`).
    assert_eq!(cmds.len() - named, 1, "{} of {} named", named, cmds.len());
    // And no NEW the archive does not know.
    assert!(new.keys().all(|p| cmds.contains_key(p)));
    // Processes that went away have an STP, later than their NEW.
    assert!(text.contains("[STP "), "no STP");
}

// ------------------------------------------- field listings (issue 19)

use polytrace::model::FormatId;
use std::path::Path;

/// The KPI content of a file as one reader sees it, dataset by dataset:
/// NEW/STP/CHK events (type, group, tmsp, storage time, fields), ACT/IRQ
/// samples (group, tmsp, storage time, values) and the instance-domain
/// changes. Storage time is the listing's date column for KPI text and
/// `dlt.storage_ns` for `.dlt`. Returns the content and the diagnostics, or
/// the error.
fn kpi_content(
    path: &Path,
    id: FormatId,
    salvage: bool,
) -> Result<(Vec<String>, Vec<String>), String> {
    use polytrace::formats::kpi::schema;
    use polytrace::model::Item;
    let input = polytrace::input::Input::resolve(path).map_err(|e| e.to_string())?;
    let ro = polytrace::options::ReadOptions {
        salvage,
        ..Default::default()
    };
    let mut r = polytrace::formats::get(id)
        .open(&input, &ro)
        .map_err(|e| e.to_string())?;
    // Group, device clock and storage time of an event or sample.
    let stamp = |x: &polytrace::model::Extras, raw: Option<u64>, t: i64| {
        let storage = match id {
            FormatId::Dlt => x.i64("dlt.storage_ns").unwrap(),
            _ => t,
        };
        let group = x.u64(schema::X_GROUP).unwrap();
        format!("g{group} tmsp {raw:?} at {storage}")
    };
    let mut out = Vec::new();
    loop {
        match r.next_item() {
            Ok(Some(Item::Event(e))) if (1..=3).contains(&e.type_id) => out.push(format!(
                "E{} {} {:?}",
                e.type_id,
                stamp(&e.extras, e.raw_clock, e.time.0),
                e.fields
            )),
            Ok(Some(Item::Sample(s))) => out.push(format!(
                "S {} {:?}",
                stamp(&s.extras, s.raw_clock, s.time.0),
                s.metrics
            )),
            Ok(Some(Item::Indom(u))) => out.push(format!(
                "I {} {:?} {:?} {:?}",
                u.id, u.kind, u.instances, u.removed
            )),
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => return Err(e.to_string()),
        }
    }
    let diags = r.diagnostics().iter().map(|d| d.to_string()).collect();
    Ok((out, diags))
}

fn assert_same_content(a: &[String], b: &[String], what: &str) {
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(x, y, "{what}: item {i} differs");
    }
    assert_eq!(a.len(), b.len(), "{what}: item counts differ");
}

/// `TZ=UTC dlt-convert -a FILE` with its stderr mixed in, as people
/// capture it.
fn dlt_convert_listing(dlt_convert: &Path, dlt: &Path) -> Vec<u8> {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("\"$0\" -a \"$1\" 2>&1")
        .arg(dlt_convert)
        .arg(dlt)
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "dlt-convert failed on {}",
        dlt.display()
    );
    out.stdout
}

/// The real listings of every dlt-kpi capture (dlt-convert's own reference
/// output) give exactly the datasets the `.dlt` reader gives, truncated
/// duplicates dropped by the same rule.
#[test]
fn corpus_listings_give_the_datasets_of_their_dlt_files() {
    let mut dlts: Vec<std::path::PathBuf> = Vec::new();
    let mut dirs = vec![common::corpus().join("kpi")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "dlt") {
                dlts.push(p);
            }
        }
    }
    dlts.sort();
    assert!(dlts.len() >= 2, "{dlts:?}");
    // The KPI captures (their listings beside them); the other DLT
    // captures hold no KPI data.
    dlts.retain(|d| d.with_extension("convert-a.txt").exists());
    assert!(dlts.len() >= 2, "{dlts:?}");
    for dlt in &dlts {
        let listing = dlt.with_extension("convert-a.txt");
        let (want, _) = kpi_content(dlt, FormatId::Dlt, false).unwrap();
        let (got, diags) = kpi_content(&listing, FormatId::Kpi, false).unwrap();
        assert!(want.len() > 50, "{}", dlt.display());
        assert_same_content(&want, &got, &listing.display().to_string());
        assert!(
            !diags
                .iter()
                .any(|d| d.contains("truncated duplicate \"") || d.contains("guessed dataset")),
            "{diags:?}"
        );
    }
}

/// Issue 19, case 1: IRQ rows of 16 (fake) CPUs written by our DLT writer
/// with small payload limits and libdlt's truncated duplicates, listed by
/// the real dlt-convert: the text reader gives the `.dlt` reader's datasets.
/// The corpus capture goes the same way (long NEW/CHK command lines).
#[test]
fn truncated_duplicates_listed_by_dlt_convert_read_like_the_dlt() {
    let Some((dc, dir)) = common::peer_and_scratch("dlt-convert") else {
        return;
    };
    let irq16 = common::testdata().join("kpi/irq16.convert-a.txt");
    let capture = common::corpus().join("kpi/kpi-capture.dlt");
    // From the smallest limit that holds the longest row (210 + 17 bytes).
    let step = if common::full() { 1 } else { 13 };
    let sizes: Vec<usize> = (228..=1390).step_by(step).collect();
    let irq_metric = format!("metric: {},", polytrace::formats::kpi::schema::IRQ_COUNT);
    let irq16_columns = kpi_lines(&std::fs::read_to_string(&irq16).unwrap())
        .iter()
        .filter(|(_, p)| p.starts_with("IRQ "))
        .map(|(_, p)| p.matches(";cpu").count())
        .sum::<usize>();
    // 67 rows of 16 columns, 4 ERR/MIS rows of one.
    assert_eq!(irq16_columns, 67 * 16 + 4);
    let mut irq_tails = 0;
    let mut tails_by_type: BTreeMap<String, usize> = BTreeMap::new();
    for (src, sizes) in [(&irq16, &sizes[..]), (&capture, &[300, 1390][..])] {
        for &n in sizes {
            let dlt = dir.path().join(format!("w{n}.dlt"));
            let _ = std::fs::remove_file(&dlt);
            common::output_ok(
                std::process::Command::new(common::bin())
                    .arg("convert")
                    .arg(src)
                    .args([
                        "--to",
                        "dlt",
                        "-q",
                        "--dlt-truncated-tails",
                        "--dlt-payload-max",
                    ])
                    .arg(n.to_string())
                    .arg("-o")
                    .arg(&dlt),
            );
            let listing = dlt_convert_listing(&dc, &dlt);
            let text = String::from_utf8(listing.clone()).unwrap();
            for l in text.lines() {
                let Some(body) = l.strip_suffix(&format!("{MARKER}]")) else {
                    continue;
                };
                let ty = &body[body.rfind(" [").unwrap() + 2..][..3];
                *tails_by_type.entry(ty.to_string()).or_default() += 1;
                if ty == "IRQ" && src == &irq16 {
                    irq_tails += 1;
                    // What is left of the cut row: inside a column, before
                    // the row's first `;`, or nothing.
                    let cut = body.rsplit(' ').next().unwrap();
                    let how = match cut {
                        "" => "IRQ marker only",
                        c if !c.contains(';') => "IRQ cut before the first ;",
                        _ => "IRQ cut in a column",
                    };
                    *tails_by_type.entry(how.to_string()).or_default() += 1;
                }
            }
            let lp = dir.path().join(format!("w{n}.txt"));
            std::fs::write(&lp, &listing).unwrap();
            let (want, _) = kpi_content(&dlt, FormatId::Dlt, false).unwrap();
            let (got, diags) = kpi_content(&lp, FormatId::Kpi, false).unwrap();
            assert_same_content(&want, &got, &format!("{} at {n} bytes", src.display()));
            assert!(
                !diags.iter().any(|d| d.contains("truncated duplicate \"")),
                "{diags:?}"
            );
            // Every IRQ column of the source is there (counted in its text).
            if src == &irq16 {
                let irq_values: usize = want
                    .iter()
                    .filter(|l| l.starts_with("S ") && l.contains(&irq_metric))
                    .map(|l| l.matches("U64(").count())
                    .sum();
                assert_eq!(irq_values, irq16_columns, "at {n} bytes");
            }
        }
    }
    // The case of the issue happened, cut every way, with other types along.
    assert!(irq_tails >= 20, "{tails_by_type:?}");
    for how in [
        "IRQ marker only",
        "IRQ cut before the first ;",
        "IRQ cut in a column",
    ] {
        assert!(tails_by_type.contains_key(how), "{how}: {tails_by_type:?}");
    }
    assert!(
        tails_by_type.get("NEW").is_some_and(|&n| n > 0),
        "{tails_by_type:?}"
    );
    assert!(
        tails_by_type.get("CHK").is_some_and(|&n| n > 0),
        "{tails_by_type:?}"
    );
}

/// Issue 19, case 2: libdlt's own diagnostic lines inside a listing are
/// skipped with one warning that counts them. Built from the corpus: the
/// `B-buf400` listing with the real libdlt lines of that capture's
/// `kpi-stdout.txt` put between its lines (one before the first).
#[test]
fn libdlt_diagnostic_lines_in_a_listing_are_skipped_and_counted() {
    let kpi = common::corpus().join("kpi");
    let listing = std::fs::read_to_string(kpi.join("B-buf400.convert-a.txt")).unwrap();
    let stdout = std::fs::read_to_string(kpi.join("B-buf400.kpi-stdout.txt")).unwrap();
    let diags: Vec<&str> = stdout.lines().filter(|l| l.contains("]~DLT~")).collect();
    assert_eq!(diags.len(), 17);
    let mut mixed = String::new();
    let mut d = diags.iter();
    for (i, l) in listing.lines().enumerate() {
        if i % 3 == 0 {
            if let Some(x) = d.next() {
                mixed.push_str(x);
                mixed.push('\n');
            }
        }
        mixed.push_str(l);
        mixed.push('\n');
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("mixed.txt");
    std::fs::write(&p, &mixed).unwrap();
    // Detected as KPI text although its first line is a diagnostic.
    let (code, stdout, err) = common::pt(&["info"], &[&p]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("format:    kpi"));
    assert_eq!(err.matches("libdlt diagnostic").count(), 1, "{err}");
    assert!(
        err.contains("skipped 17 libdlt diagnostic lines")
            && err.contains("line 1: \"Configured buffer size to [400 bytes]\""),
        "{err}"
    );
    let (want, _) = kpi_content(&kpi.join("B-buf400.dlt"), FormatId::Dlt, false).unwrap();
    let (got, _) = kpi_content(&p, FormatId::Kpi, false).unwrap();
    assert_same_content(&want, &got, "listing with libdlt lines");
}

/// Issue 19, case 3: a file cut in the middle of its last record stays an
/// error (exit 2, nothing written; --salvage: exit 1), the `.dlt` and the
/// listing dlt-convert makes of it (whose libdlt "Cannot read …" line is
/// followed by the cut record printed with a partial or stale payload)
/// alike, and the salvaged datasets agree. A listing cut inside its last
/// line too.
#[test]
fn files_cut_inside_their_last_record_stay_errors() {
    let Some((dc, dir)) = common::peer_and_scratch("dlt-convert") else {
        return;
    };
    let convert = |input: &Path, salvage: bool| {
        let out_path = dir.path().join("out.kpi");
        let _ = std::fs::remove_file(&out_path);
        let mut c = Command::new(common::bin());
        c.arg("convert")
            .arg(input)
            .args(["--to", "kpi", "-o"])
            .arg(&out_path);
        if salvage {
            c.arg("--salvage");
        }
        let out = c.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            out_path.exists(),
        )
    };
    let orig = std::fs::read(common::corpus().join("kpi/B-buf400.dlt")).unwrap();
    // Record starts: 16-byte storage header, then the big-endian length.
    let mut starts = vec![];
    let mut i = 0;
    while i < orig.len() {
        starts.push(i);
        i += 16 + u16::from_be_bytes([orig[i + 18], orig[i + 19]]) as usize;
    }
    // Record 53 is the data message of the last ACT group (`ACT 17536;…`);
    // cut it in its extras, its extended header and its payload.
    let (s, e) = (starts[53], starts[54]);
    for cut in [s + 22, s + 40, s + 45, s + 70, e - 1] {
        let dlt = dir.path().join("cut.dlt");
        std::fs::write(&dlt, &orig[..cut]).unwrap();
        let listing = dlt_convert_listing(&dc, &dlt);
        let text = String::from_utf8_lossy(&listing).into_owned();
        let last_two: Vec<&str> = text.lines().rev().take(2).collect();
        assert!(
            last_two[1].contains("]~DLT~") && last_two[1].contains("Cannot read"),
            "{last_two:?}"
        );
        let lp = dir.path().join("cut.txt");
        std::fs::write(&lp, &listing).unwrap();
        for input in [&dlt, &lp] {
            let (code, err, wrote) = convert(input, false);
            assert_eq!(code, Some(2), "cut at {cut}: {err}");
            assert!(!wrote);
            let (code, err, wrote) = convert(input, true);
            assert_eq!(code, Some(1), "cut at {cut}: {err}");
            assert!(wrote);
        }
        // Named at the diagnostic: line 54, after messages 0–52.
        let (code, err, _) = convert(&lp, false);
        assert!(
            err.contains("Cannot read") && err.contains("record 54"),
            "{code:?} {err}"
        );
        let (want, _) = kpi_content(&dlt, FormatId::Dlt, true).unwrap();
        let (got, _) = kpi_content(&lp, FormatId::Kpi, true).unwrap();
        assert_same_content(&want, &got, &format!("cut at {cut}"));
        assert!(kpi_content(&lp, FormatId::Kpi, false).is_err());
    }
    // A listing cut inside its last line; cut after a whole line it is a
    // shorter listing and reads.
    let listing = std::fs::read(common::corpus().join("kpi/B-buf400.convert-a.txt")).unwrap();
    let line_start = listing[..listing.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap()
        + 1;
    let lp = dir.path().join("cut-line.txt");
    for (cut, code) in [
        (listing.len() - 1, 2),
        (line_start + 60, 2),
        (line_start, 0),
    ] {
        std::fs::write(&lp, &listing[..cut]).unwrap();
        let (got, err, _) = convert(&lp, false);
        assert_eq!(got, Some(code), "{err}");
        if code == 2 {
            assert!(err.contains("no newline at its end"), "{err}");
            assert_eq!(convert(&lp, true).0, Some(1));
        }
    }
}

/// `--dlt-truncated-tails` writes the tails where libdlt wrote them: the
/// corpus capture written again lists (real dlt-convert) every KPI message
/// with the payload of the original listing, its 12 tails included; without
/// the option exactly those 12 messages differ.
#[test]
fn dlt_writer_tails_are_where_libdlt_put_them() {
    let Some((dc, dir)) = common::peer_and_scratch("dlt-convert") else {
        return;
    };
    // From the ECU column on, without tmsp: our group messages share the
    // BEG's tmsp and storage time, libdlt's may differ by a tick.
    let payloads = |listing: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(listing)
            .lines()
            .filter(|l| l.contains(" PROC PROC "))
            .map(|l| l[l.find(" ECU1 ").unwrap()..].to_string())
            .collect()
    };
    let reference =
        payloads(&std::fs::read(common::corpus().join("kpi/kpi-capture.convert-a.txt")).unwrap());
    assert_eq!(reference.len(), 3462);
    for (tails, differing) in [(true, 0), (false, 12)] {
        let out_path = dir.path().join(format!("again-{tails}.dlt"));
        let mut c = Command::new(common::bin());
        c.arg("convert")
            .arg(common::corpus().join("kpi/kpi-capture.dlt"))
            .args(["--to", "dlt", "-q", "-o"])
            .arg(&out_path);
        if tails {
            c.arg("--dlt-truncated-tails");
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ours = payloads(&dlt_convert_listing(&dc, &out_path));
        assert_eq!(ours.len(), reference.len());
        let diff: Vec<(&String, &String)> = ours
            .iter()
            .zip(&reference)
            .filter(|(a, b)| a != b)
            .collect();
        assert_eq!(
            diff.len(),
            differing,
            "tails {tails}: first {:?}",
            diff.first()
        );
        assert!(diff.iter().all(|(_, r)| r.ends_with(&format!("{MARKER}]"))));
    }
}

/// The KPI line writer takes `--dlt-truncated-tails` too: its lines carry
/// the tails the DLT writer puts into messages, and read back to the same
/// datasets as that `.dlt`.
#[test]
fn kpi_lines_with_tails_read_like_the_dlt_with_tails() {
    let dir = tempfile::tempdir().unwrap();
    let irq16 = common::testdata().join("kpi/irq16.convert-a.txt");
    let mut outs = vec![];
    for to in ["kpi", "dlt"] {
        let p = dir.path().join(format!("tails.{to}"));
        common::output_ok(
            std::process::Command::new(common::bin())
                .arg("convert")
                .arg(&irq16)
                // 1000: the 900-character command line fits (the DLT writer
                // would cut it below 917, the line writer would not).
                .args([
                    "-q",
                    "--dlt-truncated-tails",
                    "--dlt-payload-max",
                    "1000",
                    "--to",
                    to,
                    "-o",
                ])
                .arg(&p),
        );
        outs.push(p);
    }
    let text = std::fs::read_to_string(&outs[0]).unwrap();
    let tails = text.matches(&format!("{MARKER}]\n")).count();
    let dlt = std::fs::read(&outs[1]).unwrap();
    let in_dlt = dlt
        .windows(MARKER.len())
        .filter(|w| *w == MARKER.as_bytes())
        .count();
    assert!(tails > 5 && tails == in_dlt, "{tails} {in_dlt}");
    let (want, _) = kpi_content(&outs[1], FormatId::Dlt, false).unwrap();
    let (got, diags) = kpi_content(&outs[0], FormatId::Kpi, false).unwrap();
    assert_same_content(&want, &got, "KPI lines with tails");
    let dropped = format!("dropped {tails} truncated duplicate");
    assert!(diags.iter().any(|d| d.contains(&dropped)), "{diags:?}");
}
