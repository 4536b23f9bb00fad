//! The MMV instrumentation API (crates/mmv-values): every file it writes
//! is read by PCP's own `mmvdump`, with the values set through handles.

mod common;

use mmv_values::*;
use std::path::Path;
use std::process::Command;

/// A file with every type, an instance domain, help texts; labels when
/// `labels`, a long name (forcing v2) when `long`.
fn build(path: &Path, labels: bool, long: bool) -> Mmv {
    let mut b = Builder::at(path);
    b.cluster(321);
    let ids = b.indom(
        &[(0, "zero"), (7, "seven")],
        "the instances",
        "both of them",
    );
    let requests = b.metric::<U64>("requests", Semantics::Counter, Units::count(), "served");
    b.long_help(requests, "requests served since start");
    let depth = b.metric_indom::<I32>("queue.depth", ids, Semantics::Instant, Units::NONE, "depth");
    let temp = b.metric::<F64>("temperature", Semantics::Instant, Units::NONE, "degrees");
    let ratio = b.metric::<F32>("ratio", Semantics::Instant, Units::NONE, "");
    let status = b.metric_indom::<Str>("status", ids, Semantics::Discrete, Units::NONE, "state");
    let busy = b.metric::<Elapsed>(
        "busy",
        Semantics::Counter,
        Units::microseconds(),
        "busy time",
    );
    let kb = b.metric_indom::<U32>("bytes", ids, Semantics::Counter, Units::kbytes(), "");
    let s64 = b.metric::<I64>("signed64", Semantics::Instant, Units::NONE, "");
    let long_name = "a_metric_name_that_is_longer_than_sixty_four_characters_so_it_needs_v2";
    let lm = long.then(|| b.metric::<U64>(long_name, Semantics::Instant, Units::NONE, ""));
    if labels {
        b.file_label("app", "\"research\"");
        b.indom_label(ids, "shardset", "\"main\"");
        b.metric_label(requests, "unit_hint", "42");
        b.instance_label(ids, 7, "primary", "true");
    }
    let m = b.start().unwrap();
    m.value(requests).add(12345);
    m.instance(depth, 0).unwrap().set(-4);
    m.instance(depth, 7).unwrap().set(99);
    m.value(temp).set(21.5);
    m.value(ratio).set(0.25);
    m.instance(status, 0).unwrap().set("idle");
    m.instance(status, 7).unwrap().set("running fast");
    let b = m.value(busy);
    b.start();
    std::thread::sleep(std::time::Duration::from_millis(3));
    b.stop();
    m.instance(kb, 7).unwrap().add(640);
    m.value(s64).set(-9_000_000_000);
    if let Some(lm) = lm {
        m.value(lm).set(7);
    }
    m
}

fn mmvdump(path: &Path) -> Option<String> {
    let tool = common::peer("mmvdump")?;
    let out = Command::new(tool).arg(path).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "mmvdump failed on {}: {}\n{text}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(text)
}

fn check_common(text: &str) {
    let values = [
        "12345",
        "-4",
        "99",
        "21.5",
        "0.25",
        "\"idle\"",
        "\"running fast\"",
        "640",
        "-9000000000",
        "requests served since start",
        "zero",
        "seven",
    ];
    common::assert_has_all("mmvdump", text, &values);
}

#[test]
fn mmvdump_reads_v1_v2_v3() {
    let dir = tempfile::tempdir().unwrap();
    for (name, labels, long, version) in [
        ("v1", false, false, 1),
        ("v2", false, true, 2),
        ("v3", true, false, 3),
        ("v3long", true, true, 3),
    ] {
        let p = dir.path().join(name);
        let m = build(&p, labels, long);
        assert_eq!(m.version(), version, "{name}");
        let Some(text) = mmvdump(&p) else { return };
        assert!(
            text.contains(&format!("Version    = {version}")),
            "{name}:\n{text}"
        );
        check_common(&text);
        if long {
            assert!(text.contains("longer_than_sixty_four"), "{name}:\n{text}");
        }
        if labels {
            let labels = [
                "{\"app\":\"research\"}",
                "{\"primary\":true}",
                "{\"unit_hint\":42}",
            ];
            common::assert_has_all(&format!("{name} labels"), &text, &labels);
        }
    }
}

#[test]
fn mmvdump_reads_the_example_file() {
    // The example's own file (NAME.count, NAME.phase), written to a path.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("counter");
    let st = Command::new(env!("CARGO"))
        .args(["run", "--release", "-q", "--example", "mmv_counter", "--"])
        .arg(&p)
        .arg("0.3")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap();
    assert!(st.success());
    // PROCESS flag: the file goes with the process.
    assert!(!p.exists());
    let mut b = Builder::at(&p);
    b.flags(FLAG_PROCESS);
    let c = b.metric::<U64>("count", Semantics::Counter, Units::count(), "increments");
    let s = b.metric::<Str>("phase", Semantics::Discrete, Units::NONE, "phase");
    let m = b.start().unwrap();
    m.value(c).set(77);
    m.value(s).set("done");
    let Some(text) = mmvdump(&p) else { return };
    assert!(
        text.contains("count") && text.contains("77") && text.contains("\"done\""),
        "{text}"
    );
    drop(m);
    assert!(!p.exists(), "FLAG_PROCESS: removed when dropped");
}
