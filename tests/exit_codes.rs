//! The exit-code table (README "Exit codes"), case by case:
//! 0 done (what the target cannot hold by nature is summarised, `-q`
//! silences it), 1 damaged input salvaged, 2 error with nothing written,
//! 3 batch with failed inputs; `--strict` makes any loss an error.
mod common;

use common::pt;
use std::path::{Path, PathBuf};

/// Lines of the loss summary (not diagnostics).
fn loss_lines(err: &str) -> Vec<&str> {
    err.lines()
        .filter(|l| {
            l.starts_with("polytrace: written:")
                || l.starts_with("polytrace: dropped:")
                || l.starts_with("polytrace: degraded:")
        })
        .collect()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = walkdir::WalkDir::new(dir)
        .min_depth(1)
        .into_iter()
        .filter_map(|e| e.ok())
        .map(|e| {
            e.path()
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    v.sort();
    v
}

/// The corpus capture cut in the middle of a message: damaged input.
fn damaged_dlt(dir: &Path) -> PathBuf {
    let full = std::fs::read(common::corpus().join("kpi/kpi-capture.dlt")).unwrap();
    let p = dir.join("damaged.dlt");
    std::fs::write(&p, &full[..300_000]).unwrap();
    p
}

#[test]
fn format_inherent_loss_is_exit_0_and_summarised_once_per_kind() {
    let dir = tempfile::tempdir().unwrap();
    // DLT daemon messages into KPI lines, an MMV file's help text into
    // Chrome JSON, its strings into a timeline: what the target cannot hold
    // by nature.
    for (src, to, kind) in [
        ("kpi/kpi-capture.dlt", "kpi", "events"),
        ("mmv/research_v2.mmv", "chrome-json", "help texts"),
        ("mmv/research_v2.mmv", "timeline", "sample values"),
    ] {
        let out = dir
            .path()
            .join(format!("out-{to}-{}", kind.replace(' ', "-")));
        let input = common::corpus().join(src);
        let (code, _, err) = pt(&["convert", "--to", to, "-o"], &[&out, &input]);
        assert_eq!(code, 0, "{src} --to {to}: {err}");
        let lines = loss_lines(&err);
        let drops: Vec<&&str> = lines
            .iter()
            .filter(|l| l.starts_with("polytrace: dropped:") && l.contains(kind))
            .collect();
        assert_eq!(drops.len(), 1, "{src} --to {to}: {err}");
        assert!(drops[0].contains(": "), "what and why: {}", drops[0]);
        // -q: the same conversion, the same exit code, no loss lines.
        let (code, _, err) = pt(
            &["convert", "-q", "--force", "--to", to, "-o"],
            &[&out, &input],
        );
        assert_eq!(code, 0, "{err}");
        assert!(loss_lines(&err).is_empty(), "{err}");
    }
}

#[test]
fn nothing_to_write_is_an_error_that_says_why() {
    // Sources without process data into KPI lines, events without --events
    // into CSV: no empty file, exit 2, and the message says what is missing.
    let dir = tempfile::tempdir().unwrap();
    for (src, to, want) in [
        (
            "ltt/smp_example",
            "kpi",
            "no process data for KPI lines in ",
        ),
        ("mmv/research_v2.mmv", "kpi", "it has no proc.* metrics"),
        ("ltt/smp_example", "csv", "its 173151 events need --events"),
    ] {
        let out = dir.path().join(format!("out.{to}"));
        let input = common::corpus().join(src);
        let (code, _, err) = pt(&["convert", "--to", to, "-o"], &[&out, &input]);
        assert_eq!(code, 2, "{src} --to {to}: {err}");
        assert!(err.contains(want), "{src} --to {to}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(entries(dir.path()).is_empty());
    }
}

#[test]
fn damaged_input_is_2_without_salvage_and_1_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = damaged_dlt(dir.path());
    let out = dir.path().join("out");
    let (code, _, err) = pt(&["convert", "--to", "pcp", "-o"], &[&out, &input]);
    assert_eq!(code, 2, "{err}");
    common::assert_has(&err, "damaged.dlt: byte 299621, record 1739");
    assert_eq!(entries(dir.path()), ["damaged.dlt"]);
    let err = common::pt_exit(
        1,
        &["convert", "-q", "--salvage", "--to", "pcp", "-o"],
        &[&out, &input],
    );
    // -q keeps what says the input was damaged.
    assert!(err.contains("salvaged: "), "{err}");
    assert!(out.with_extension("meta").is_file());
}

#[test]
fn strict_refuses_any_loss_and_writes_nothing() {
    let (dir, input) = common::scratch_and_corpus("kpi/kpi-capture.dlt");
    let out = dir.path().join("out");
    let err = common::pt_exit(
        2,
        &["convert", "--strict", "--to", "kpi", "-o"],
        &[&out, &input],
    );
    assert!(
        err.contains("nothing written") && err.contains("dropped: 8 DLTD.INTM events"),
        "{err}"
    );
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
    // To stdout too: nothing reaches it.
    let ltt = common::corpus().join("ltt/smp_example");
    let (code, text, err) = pt(&["convert", "--strict", "--to", "kpi", "-o", "-"], &[&ltt]);
    assert_eq!(code, 2, "{err}");
    assert!(text.is_empty(), "{} bytes on stdout", text.len());
    // Events into MMV become counters: a degradation, refused as well.
    let err = common::pt_exit(
        2,
        &["convert", "--strict", "--to", "mmv", "-o"],
        &[&dir.path().join("out.mmv"), &ltt],
    );
    assert!(err.contains("counters"), "{err}");
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
    // Nothing lost: --strict is no obstacle.
    common::pt_exit(
        0,
        &["convert", "-q", "--strict", "--to", "pcp", "-o"],
        &[&out, &ltt],
    );
}

#[test]
fn batch_with_a_damaged_and_a_failing_input_is_3() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("in");
    std::fs::create_dir_all(&src).unwrap();
    damaged_dlt(&src);
    // Cycles only, into an archive, without --time-origin: fails.
    common::copy_corpus("timeline/a2-priorities.dat", &src.join("cycles.dat"));
    common::copy_corpus("kpi/kpi-capture.convert-a.txt", &src.join("good.txt"));
    let out = dir.path().join("out");
    let err = common::pt_exit(
        3,
        &["convert", "--salvage", "--to", "pcp", "-o"],
        &[&out, &src],
    );
    common::assert_has(&err, "1 ok, 1 salvaged, 1 failed, 0 skipped");
    assert!(err.contains("failed     cycles.dat: "), "{err}");
    assert!(err.contains("salvaged   damaged.dlt: "), "{err}");
    assert!(err.contains("ok         good.txt\n"), "{err}");
    let written = entries(&out);
    assert!(
        !written.iter().any(|f| f.starts_with("cycles")),
        "{written:?}"
    );
    assert!(written.contains(&"damaged.meta".to_string()), "{written:?}");
    // Without the failing input: salvaged only is 1, all good is 0, and a
    // format-inherent loss (the capture's 13 daemon messages) is "ok".
    std::fs::remove_file(src.join("cycles.dat")).unwrap();
    common::pt_exit(
        1,
        &["convert", "--force", "--salvage", "--to", "pcp", "-o"],
        &[&out, &src],
    );
    std::fs::remove_file(src.join("damaged.dlt")).unwrap();
    common::copy_corpus("kpi/kpi-capture.dlt", &src.join("capture.dlt"));
    let err = common::pt_exit(
        0,
        &["convert", "--force", "--to", "pcp", "-o"],
        &[&out, &src],
    );
    assert!(err.contains("ok         capture.dlt\n"), "{err}");
}

#[test]
fn record_writes_what_the_format_holds_and_exits_0() {
    if !Path::new("/proc/stat").exists() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for to in ["kpi", "mmv"] {
        let out = dir.path().join(format!("rec.{to}"));
        let record = |extra: &[&str]| {
            let to = ["--interval", "100ms", "--to", to, "-o"];
            pt(&[&["record"], extra, &to].concat(), &[&out])
        };
        let (code, _, err) = record(&["--samples", "2"]);
        assert_eq!(code, 0, "record --to {to}: {err}");
        // It says what the format left out, and -q silences that.
        assert!(err.contains("dropped:"), "{err}");
        let (code, _, err) = record(&["-q", "--force", "--samples", "1"]);
        assert_eq!(code, 0, "{err}");
        assert!(err.is_empty(), "{err}");
    }
}
