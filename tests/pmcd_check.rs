//! The MMV API's example and `record --to mmv --live` served by the real
//! pmcd (scripts/pmcd-check.sh). It starts pmcd, so it runs as root only:
//! in CI (POLYTRACE_REQUIRE_PEERS) anything else is a failure.

mod common;

use std::process::Command;

#[test]
fn pminfo_reads_the_live_files() {
    if common::peer("pminfo").is_none() {
        return;
    }
    let require = std::env::var_os("POLYTRACE_REQUIRE_PEERS").is_some();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(!require, "the pmcd check must run as root in CI");
        eprintln!("skipping: the pmcd check needs root");
        return;
    }
    let out = Command::new("bash")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/pmcd-check.sh"
        ))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(77) && !require {
        eprintln!("skipping: {err}");
        return;
    }
    assert!(out.status.success(), "pmcd-check failed:\n{text}\n{err}");
    assert!(text.contains("pmcd-check: ok"), "{text}");
}
