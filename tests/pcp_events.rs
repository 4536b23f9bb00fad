//! Events in PCP archives: PM_TYPE_HIGHRES_EVENT records that `pmdumplog`
//! prints parameter by parameter and that polytrace reads back as the same
//! events (docs/pcp.md, "Events as event records").
mod common;

use common::pt;
use std::path::Path;
use std::process::Command;

fn pmdumplog(args: &[&str], base: &Path) -> Option<String> {
    let tool = common::peer("pmdumplog")?;
    let o = common::output_ok(Command::new(tool).args(args).arg(base));
    Some(String::from_utf8_lossy(&o.stdout).into_owned())
}

fn pmlogcheck_clean(base: &Path) {
    let Some(tool) = common::peer("pmlogcheck") else {
        return;
    };
    let o = Command::new(tool).arg(base).output().unwrap();
    assert!(
        o.status.success() && o.stdout.is_empty() && o.stderr.is_empty(),
        "pmlogcheck {}: {}{}",
        base.display(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn ltt_events_are_event_records_pmdumplog_prints_parameters() {
    let (dir, src) = common::scratch_and_corpus("ltt/smp_example");
    let out = dir.path().join("smp");
    let err = common::convert(&src, "pcp", &out, &[]);
    // 173,157 events, of which 6 are LTT framing (block start/end,
    // heartbeats): those never become another format's data.
    assert!(err.contains("173151 events"), "{err}");
    assert!(
        !err.contains("dropped") && !err.contains("degraded"),
        "{err}"
    );
    pmlogcheck_clean(&out);
    let Some(d) = pmdumplog(&["-a", "-Z", "UTC"], &out) else {
        return;
    };
    assert_eq!(d.matches("--- event record [").count(), 173_151);
    // The first syscall_entry of the trace (cpu/0, 13:11:43.000355469 UTC):
    // syscall 8 called from 134523838, each parameter by name.
    let at = d
        .find("--- event record [0] timestamp 13:11:43.000355469 flags 0x1 (point) ---")
        .expect("the first syscall_entry record");
    let head = &d[..at];
    assert!(
        head.ends_with(
            "(trace.core.syscall_entry.records[0 or \"cpu/0\"]): 370 event records\n        "
        ),
        "{}",
        &head[head.len().saturating_sub(200)..]
    );
    let rec: Vec<&str> = d[at..].lines().skip(1).take(3).collect();
    assert_eq!(
        rec,
        [
            "        454.0.1 (trace.core.syscall_entry.syscall_id): value 8",
            "        454.0.2 (trace.core.syscall_entry.address): value 134523838",
            "        454.4095.0 (trace.event.raw_clock): value 152910927",
        ]
    );
    // Descriptors: the field types of core.xml.
    assert!(d.contains(
        "PMID: 454.10.4 (trace.core.file_system.file_name)\n    Data Type: string  InDom: PM_INDOM_NULL 0xffffffff\n    Semantics: instant  Units: none\n"
    ));
    assert!(d.contains(
        "PMID: 454.0.0 (trace.core.syscall_entry.records)\n    Data Type: highres event record array  InDom: 454.0 0x71800000\n"
    ));
    // Streams as instances, with their CPU and tracefile as labels.
    let e = pmdumplog(&["-e"], &out).unwrap();
    common::assert_has(
        &e,
        "InDom 454.0[1] labels (26 bytes): {\"cpu\":1,\"stream\":\"cpu/1\"}",
    );
}

#[test]
fn ltt_to_pcp_to_ltt_listing_is_identical() {
    let (dir, src) = common::scratch_and_corpus("ltt/smp_example");
    let pcp = dir.path().join("smp");
    let back = dir.path().join("back.ltt");
    common::convert(&src, "pcp", &pcp, &[]);
    // Our reader restores the events: same type, CPU, stream, fields, time.
    let want: Vec<String> = common::common_events(&src, &[])
        .into_iter()
        .filter(|l| !l.contains(" core.block_") && !l.contains(" core.time_heartbeat "))
        .collect();
    assert_eq!(want.len(), 173_151);
    let got = common::common_events(&pcp, &[]);
    assert!(
        want == got,
        "{:?}",
        common::first_diff(&want.join("\n"), &got.join("\n"))
    );
    common::convert(&pcp, "ltt", &back, &[]);
    let (c1, a, e1) = pt(&["dump", "--no-framing"], &[&src]);
    let (c2, b, e2) = pt(&["dump", "--no-framing"], &[&back]);
    assert_eq!((c1, c2), (0, 0), "{e1}{e2}");
    assert!(a == b, "{:?}", common::first_diff(&a, &b));
}

#[test]
fn pcp_rewrite_of_event_records_is_byte_identical() {
    let (dir, src) = common::scratch_and_corpus("ltt/smp_example");
    let one = dir.path().join("one");
    let two = dir.path().join("two");
    common::convert(&src, "pcp", &one, &["--volume-size", "2M"]);
    common::convert(&one, "pcp", &two, &["--volume-size", "2M"]);
    let mut members = 0;
    for ext in ["meta", "index", "0", "1", "2", "3", "4"] {
        let a = std::fs::read(one.with_extension(ext));
        let b = std::fs::read(two.with_extension(ext));
        match (a, b) {
            (Ok(a), Ok(b)) => {
                assert!(a == b, "{ext} differs");
                members += 1;
            }
            (Err(_), Err(_)) => {}
            _ => panic!("member .{ext} in one archive only"),
        }
    }
    assert!(members >= 5, "{members} members");
    pmlogcheck_clean(&two);
}

/// `dlt-convert -a` lines of the PROC/PROC messages: (payload) in order.
fn kpi_payloads(dlt: &Path) -> Option<Vec<String>> {
    let lines = common::dlt_convert_a_lines(dlt)?;
    let payload = |l: &String| l.split_once(" [").map_or("", |x| x.1).to_string();
    Some(
        lines
            .iter()
            .filter(|l| l.contains(" PROC PROC log "))
            .map(payload)
            .collect(),
    )
}

#[test]
fn dlt_to_pcp_to_dlt_keeps_datasets_and_groups() {
    let (dir, src) = common::scratch_and_corpus("kpi/kpi-capture.dlt");
    let pcp = dir.path().join("kpi");
    let back = dir.path().join("back.dlt");
    let direct = dir.path().join("direct.dlt");
    common::convert(&src, "pcp", &pcp, &[]);
    pmlogcheck_or_counter_wraps(&pcp);
    common::convert(&pcp, "dlt", &back, &[]);
    common::convert(&src, "dlt", &direct, &[]);
    let (Some(orig), Some(via), Some(same)) = (
        kpi_payloads(&src),
        kpi_payloads(&back),
        kpi_payloads(&direct),
    ) else {
        return;
    };
    // Every KPI message of the capture, in order, in the same groups: the
    // BEG/END lines and the kind of every message are the original's.
    assert_eq!(orig.len(), 3462);
    assert_eq!(via.len(), orig.len());
    let kinds = |v: &[String]| -> Vec<String> {
        v.iter()
            .map(|p| {
                let mut w = p.split_whitespace();
                let k = w.next().unwrap_or("").to_string();
                match w.next() {
                    Some(m @ ("BEG]" | "END]")) => format!("{k} {m}"),
                    _ => k,
                }
            })
            .collect()
    };
    assert_eq!(kinds(&via), kinds(&orig));
    // The datasets themselves: exactly what the DLT writer makes of the
    // capture without the archive in between.
    assert!(
        via == same,
        "{:?}",
        common::first_diff(&same.join("\n"), &via.join("\n"))
    );
}

/// pmlogcheck on a KPI archive: the IRQ counters of dlt-kpi restart, which
/// pmlogcheck reports as counter wraps; anything else is a failure.
fn pmlogcheck_or_counter_wraps(base: &Path) {
    let Some(tool) = common::peer("pmlogcheck") else {
        return;
    };
    let o = Command::new(tool).arg(base).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let odd: Vec<&str> = text
        .lines()
        .filter(|l| !l.ends_with("unsigned 64-bit wrap") && !l.starts_with('\t'))
        .collect();
    assert!(o.status.success() && odd.is_empty(), "{text}");
}

#[test]
fn timeline_events_are_event_records_with_their_extras() {
    let (dir, src) = common::scratch_and_corpus("timeline/a2-priorities.dat");
    let out = dir.path().join("tl");
    let opts = ["--tsc-hz", "2.5e9", "--time-origin", "1795319035.5"];
    common::convert(&src, "pcp", &out, &opts);
    pmlogcheck_clean(&out);
    // Read back: the same events as the timeline read with the same options.
    let want = common::common_events(&src, &opts);
    assert_eq!(want.len(), 42);
    assert_eq!(common::common_events(&out, &[]), want);
    let Some(d) = pmdumplog(&["-a", "-Z", "UTC"], &out) else {
        return;
    };
    assert_eq!(d.matches("--- event record [").count(), 42);
    // The TSC itself, 64 bits, and the slot the entry had, as parameters.
    common::assert_has(
        &d,
        "        454.4095.0 (trace.event.raw_clock): value 1891880793228\n",
    );
    common::assert_has(&d, "(trace.event.extra.timeline_slot): value 0\n");
}

#[test]
fn event_records_of_other_producers_read_as_before() {
    let Some(ts) = common::pcp_testsuite() else {
        return;
    };
    // pmlogger's sample PMDA records: values of samples, not model events.
    let (code, out, err) = pt(&["info"], &[&ts.join("archives/eventrec")]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("  events "), "{out}");
    common::assert_has(&out, "  sample.event.records           10\n");
    let (code, vals, err) = pt(
        &["dump", "--style", "values"],
        &[&ts.join("archives/eventrec")],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        vals.lines().filter(|l| l.ends_with(" <10>")).count(),
        10,
        "{vals}"
    );
}

#[test]
fn recorded_events_go_into_the_archive_as_records() {
    if !Path::new("/proc/stat").exists() {
        return;
    }
    // The recorder's NEW events come a little after the sample of their
    // scan: the archive's results still never go back in time.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rec");
    common::pt_exit(
        0,
        &[
            "record",
            "-q",
            "--samples",
            "3",
            "--interval",
            "100ms",
            "--to",
            "pcp",
            "-o",
        ],
        &[&out],
    );
    pmlogcheck_clean(&out);
    let events = common::common_events(&out, &[]);
    assert!(
        events.iter().any(|l| l.contains(" event kpi.NEW pid=1 ")),
        "{}",
        events.len()
    );
}
