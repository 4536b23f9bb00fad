//! The PCP writer's instance-domain records (v3 deltas, one record per
//! timestamp, results in time order) and the verbatim PCP -> PCP copy,
//! each read back by PCP's own pmdumplog and pmlogcheck.
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(common::bin()).args(args).output().unwrap()
}

fn peer_out(tool: &Path, args: &[&str], arch: &Path) -> (String, String) {
    let o = Command::new(tool).args(args).arg(arch).output().unwrap();
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// pmdumplog's reconstructed instance domains and values, with v2's
/// microsecond times written as v3's nanoseconds (`.123456` -> `.123456000`).
fn indoms_and_values(dumplog: &Path, arch: &Path) -> String {
    let (out, err) = peer_out(dumplog, &["-i", "-m", "-Z", "UTC"], arch);
    assert!(
        !err.contains("Botch") && !out.contains("Botch"),
        "pmdumplog could not rebuild an instance domain of {}: {err}",
        arch.display()
    );
    let re_v2 = |l: &str| -> String {
        // HH:MM:SS.uuuuuu at the start of a line.
        let b = l.as_bytes();
        if b.len() >= 15 && b[2] == b':' && b[5] == b':' && b[8] == b'.' {
            let digits = b[9..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits == 6 {
                return format!("{}000{}", &l[..15], &l[15..]);
            }
        }
        l.to_string()
    };
    out.lines()
        .filter(|l| !l.starts_with("Note: timezone") && !l.starts_with("PID for"))
        .filter(|l| {
            !l.contains("Log Format Version") && !l.contains("commencing") && !l.contains("ending")
        })
        .map(re_v2)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The corpus KPI capture converted to v3 writes delta records after one
/// full record per domain; libpcp rebuilds from them exactly the domains
/// (and so the values) that the full records of a v2 conversion give.
#[test]
fn v3_delta_indoms_rebuild_to_the_v2_full_records() {
    let (Some(dumplog), Some(check)) = (common::peer("pmdumplog"), common::peer("pmlogcheck"))
    else {
        return;
    };
    let (dir, input) = common::scratch_and_corpus("kpi/kpi-capture.dlt");
    let v3 = dir.path().join("v3");
    let v2 = dir.path().join("v2");
    common::convert(&input, "pcp", &v3, &["-q"]);
    common::convert(&input, "pcp", &v2, &["-q", "--pcp-version", "2"]);
    let (ondisk, _) = peer_out(&dumplog, &["-I"], &v3);
    let deltas = ondisk.lines().filter(|l| l.contains(" delta ")).count();
    assert!(
        deltas > 100,
        "expected delta records, pmdumplog -I:\n{ondisk}"
    );
    assert!(
        !peer_out(&dumplog, &["-I"], &v2).0.contains(" delta "),
        "v2 has no delta records"
    );
    let a = indoms_and_values(&dumplog, &v3);
    let b = indoms_and_values(&dumplog, &v2);
    if a != b {
        panic!(
            "v3 (deltas) and v2 (full records) differ: {}",
            common::first_diff(&b, &a).unwrap_or_default()
        );
    }
    for arch in [&v3, &v2] {
        let (out, err) = peer_out(&check, &[], arch);
        let bad: Vec<&str> = out
            .lines()
            .chain(err.lines())
            // The capture's own IRQ counter wraps: data, not damage.
            .filter(|l| !l.contains("wrap") && !l.trim_start().starts_with("value "))
            .collect();
        assert!(bad.is_empty(), "pmlogcheck {}: {bad:?}", arch.display());
    }
    // The metadata grows with the changes, not with the samples: the v2
    // full records are many times larger than the deltas.
    let size = |p: &PathBuf| {
        std::fs::metadata(format!("{}.meta", p.display()))
            .unwrap()
            .len()
    };
    let (m3, m2) = (size(&v3), size(&v2));
    assert!(m3 * 5 < m2, ".meta v3 {m3} bytes, v2 {m2} bytes");
}

/// A capture concatenated to itself restarts its clock: the results of the
/// second half are moved up to the last time (reported), so the archive
/// still runs forward and pmlogcheck accepts it.
#[test]
fn a_clock_that_goes_back_still_makes_an_archive_in_time_order() {
    let Some(check) = common::peer("pmlogcheck") else {
        return;
    };
    let dumplog = common::peer("pmdumplog").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let one = std::fs::read(common::corpus().join("kpi/kpi-capture.dlt")).unwrap();
    let twice = dir.path().join("twice.dlt");
    std::fs::write(&twice, [one.as_slice(), one.as_slice()].concat()).unwrap();
    let out = dir.path().join("out");
    let err = common::convert(&twice, "pcp", &out, &[]);
    common::assert_has(
        &err,
        "results: time clamped to it (a PCP archive runs forward in time)",
    );
    let (o, e) = peer_out(&check, &[], &out);
    assert!(
        !o.contains("backwards") && !e.contains("backwards"),
        "pmlogcheck: {o}{e}"
    );
    let (o, e) = peer_out(&dumplog, &["-a"], &out);
    assert!(!e.contains("Botch") && !o.contains("Botch"), "{e}");
    // Everything after the restart sits at the last time of the first half.
    let size = std::fs::metadata(format!("{}.meta", out.display()))
        .unwrap()
        .len();
    assert!(size < 400_000, ".meta of {size} bytes");
}

/// Decompressed copies of an archive's members in `dir`, named `base.*`.
fn plain_copy(src: &Path, dir: &Path, base: &str) -> PathBuf {
    let name = src.file_name().unwrap().to_string_lossy().into_owned();
    let parent = src.parent().unwrap();
    for e in std::fs::read_dir(parent).unwrap() {
        let p = e.unwrap().path();
        let f = p.file_name().unwrap().to_string_lossy().into_owned();
        let Some(rest) = f.strip_prefix(&format!("{name}.")) else {
            continue;
        };
        let (member, xz) = match rest.strip_suffix(".xz") {
            Some(m) => (m.to_string(), true),
            None => (rest.to_string(), false),
        };
        if !(member == "meta" || member == "index" || member.parse::<u32>().is_ok()) {
            continue;
        }
        let to = dir.join(format!("{base}.{member}"));
        if xz {
            let o = common::output_ok(Command::new("xz").arg("-dc").arg(&p));
            std::fs::write(&to, o.stdout).unwrap();
        } else {
            std::fs::copy(&p, &to).unwrap();
        }
    }
    dir.join(base)
}

/// PCP -> PCP with nothing in between copies every record: the members
/// come out byte for byte as the (decompressed) input, so pmdumplog -a
/// (index included) and pmlogcheck say exactly what they say of the input.
#[test]
fn pcp_to_pcp_is_a_verbatim_copy() {
    let (Some(dumplog), Some(check)) = (common::peer("pmdumplog"), common::peer("pmlogcheck"))
    else {
        return;
    };
    let mut sets = vec![
        common::corpus().join("pcp/live_v3"),
        common::corpus().join("pcp/live_v2"),
    ];
    if let Some(ts) = common::pcp_testsuite() {
        // Several volumes, xz-compressed members, event records (v2, v3).
        for s in ["ok-mv-bar", "20190628.04.03", "eventrec", "omnibus_v3"] {
            sets.push(ts.join("archives").join(s));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    for (k, src) in sets.iter().enumerate() {
        let plain = plain_copy(src, dir.path(), &format!("in{k}"));
        assert!(
            Path::new(&format!("{}.meta", plain.display())).exists(),
            "{}: no such archive",
            src.display()
        );
        let out = dir.path().join(format!("out{k}"));
        common::convert(src, "pcp", &out, &["-q"]);
        let member = |base: &Path, m: &str| std::fs::read(format!("{}.{m}", base.display())).ok();
        for m in ["meta", "index", "0", "1", "2", "3", "4"] {
            assert!(
                member(&plain, m) == member(&out, m),
                "{}: member .{m} differs",
                src.display()
            );
        }
        let a = peer_out(&dumplog, &["-a", "-Z", "UTC"], &plain);
        let b = peer_out(&dumplog, &["-a", "-Z", "UTC"], &out);
        assert_eq!(a.1, b.1.replace(&format!("out{k}"), &format!("in{k}")));
        if a.0 != b.0 {
            panic!(
                "{}: pmdumplog -a differs: {}",
                src.display(),
                common::first_diff(&a.0, &b.0).unwrap_or_default()
            );
        }
        let strip = |s: String, n: &str| s.replace(n, "ARCH");
        let ca = peer_out(&check, &[], &plain);
        let cb = peer_out(&check, &[], &out);
        assert_eq!(
            strip(ca.0 + &ca.1, &format!("in{k}")),
            strip(cb.0 + &cb.1, &format!("out{k}")),
            "{}: pmlogcheck",
            src.display()
        );
    }
}

/// Damaged archives: the copy stops and reports exactly where decoding and
/// encoding (forced here by `--volume-size`) does, with and without
/// `--salvage`; a salvaged copy holds the same values.
#[test]
fn the_copy_meets_damage_as_the_reader_does() {
    let Some(ts) = common::pcp_testsuite() else {
        return;
    };
    let dumplog = common::peer("pmdumplog");
    let bad = ts.join("badarchives");
    let mut names: Vec<String> = std::fs::read_dir(&bad)
        .unwrap()
        .filter_map(|e| {
            let f = e.ok()?.file_name().to_string_lossy().into_owned();
            f.strip_suffix(".meta")
                .or_else(|| f.strip_suffix(".meta.xz"))
                .map(str::to_string)
        })
        .collect();
    names.sort();
    assert!(names.len() > 20, "badarchives: {names:?}");
    let dir = tempfile::tempdir().unwrap();
    for (k, n) in names.iter().enumerate() {
        let src = bad.join(n);
        for salvage in [false, true] {
            let go = |out: &Path, decode: bool| {
                let mut a = vec![
                    "convert",
                    "-q",
                    src.to_str().unwrap(),
                    "--to",
                    "pcp",
                    "-o",
                    out.to_str().unwrap(),
                ];
                if decode {
                    a.extend_from_slice(&["--volume-size", "1G"]);
                }
                if salvage {
                    a.push("--salvage");
                }
                let r = run(&a);
                let err = String::from_utf8_lossy(&r.stderr).replace(out.to_str().unwrap(), "OUT");
                (r.status.code(), err)
            };
            let a_out = dir.path().join(format!("c{k}{salvage}"));
            let b_out = dir.path().join(format!("d{k}{salvage}"));
            let a = go(&a_out, false);
            let b = go(&b_out, true);
            assert_eq!(a, b, "{n} (salvage {salvage}): copy vs decode");
            // Converted whole: the copy holds the source's values exactly
            // (decoding and encoding a damaged value may not).
            if let (Some(d), Some(0)) = (&dumplog, a.0) {
                let va = peer_out(d, &["-m", "-Z", "UTC"], &a_out).0;
                let vs = peer_out(d, &["-m", "-Z", "UTC"], &src).0;
                assert!(va == vs, "{n} (salvage {salvage}): values");
            }
        }
    }
}
