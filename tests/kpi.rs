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
    let out = Command::new(common::bin())
        .args(["info"])
        .arg(capture())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
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
        let out = Command::new(common::bin()).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
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
