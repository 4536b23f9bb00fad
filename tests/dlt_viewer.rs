//! DLT files written from every kind of source are read by dlt-viewer's
//! command line (Debian's `dlt-viewer -s -c`, headless), message for
//! message as dlt-convert lists them: the same count, ids and payload text.

mod common;

use std::path::Path;
use std::process::Command;

fn polytrace_to_dlt(src: &Path, out: &Path, extra: &[&str]) {
    common::convert(src, "dlt", out, extra);
}

/// ("ECU APID CTID", type, payload) of each message as dlt-viewer exports it:
/// `index date time timestamp count ecu apid ctid session type subtype
/// mode noar payload`.
fn viewer_messages(viewer: &Path, dlt: &Path, dir: &Path) -> Vec<(String, String, String)> {
    let txt = dir.join("viewer.txt");
    let o = Command::new(viewer)
        .env("QT_QPA_PLATFORM", "offscreen")
        .env("HOME", dir)
        .arg("-s")
        .arg("-c")
        .arg(dlt)
        .arg(&txt)
        .output()
        .unwrap();
    assert!(o.status.success(), "dlt-viewer: {o:?}");
    let text = std::fs::read_to_string(&txt).unwrap();
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.splitn(14, ' ').collect();
            assert!(f.len() >= 13, "dlt-viewer line {l:?}");
            (
                format!("{} {} {}", f[5], f[6], f[7]),
                f[9].to_string(),
                f.get(13).unwrap_or(&"").trim_end().to_string(),
            )
        })
        .collect()
}

/// The same from `dlt-convert -a`: `index date time tmsp mcnt ecu apid
/// ctid type subtype mode noar [payload]`.
fn convert_messages(tool: &Path, dlt: &Path) -> Vec<(String, String)> {
    let o = Command::new(tool).arg("-a").arg(dlt).output().unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let (head, payload) = l.split_once(" [").unwrap();
            let f: Vec<&str> = head.split_whitespace().collect();
            // dlt-convert pads ids shorter than 4 characters with '-'.
            let id = |s: &str| s.trim_end_matches('-').to_string();
            (
                format!("{} {} {}", id(f[5]), id(f[6]), id(f[7])),
                payload
                    .strip_suffix(']')
                    .unwrap_or(payload)
                    .trim_end()
                    .to_string(),
            )
        })
        .collect()
}

#[test]
fn dlt_viewer_reads_what_polytrace_writes_from_every_source() {
    let (Some(viewer), Some(conv)) = (common::peer("dlt-viewer"), common::peer("dlt-convert"))
    else {
        return;
    };
    let c = common::corpus();
    let cases: [(&str, &[&str]); 5] = [
        ("kpi/kpi-capture.dlt", &[]),
        ("kpi/kpi-capture.convert-a.txt", &[]),
        ("pcp/live_v3", &[]),
        ("ltt/smp_example", &[]),
        (
            "timeline/a2-priorities.dat",
            &["--tsc-hz", "2.5e9", "--time-origin", "2026-11-23T12:00:00Z"],
        ),
    ];
    for (src, extra) in cases {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("x.dlt");
        polytrace_to_dlt(&c.join(src), &out, extra);
        let a = viewer_messages(&viewer, &out, d.path());
        let b = convert_messages(&conv, &out);
        assert!(!a.is_empty(), "{src}: dlt-viewer listed nothing");
        assert_eq!(a.len(), b.len(), "{src}: message count");
        let logs = a.iter().filter(|x| x.1 == "log").count();
        assert!(logs > 0, "{src}: no log message");
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert_eq!(x.0, y.0, "{src}: message {i}: ids");
            // Log messages: the same text (arguments separated by one
            // space); control messages each tool shows in its own words.
            if x.1 == "log" {
                assert_eq!(x.2, y.1, "{src}: message {i}: payload");
            }
        }
    }
}
