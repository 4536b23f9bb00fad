//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The real files from the real programs, with their reference listings
/// (`testdata/README.md` says where each came from).
pub fn corpus() -> PathBuf {
    testdata()
}

pub fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata")
}

/// True when the long sweeps should run (`scripts/test.sh --full`).
pub fn full() -> bool {
    std::env::var_os("POLYTRACE_FULL").is_some()
}

/// True when golden files should be rewritten instead of compared.
pub fn bless() -> bool {
    std::env::var_os("POLYTRACE_BLESS").is_some()
}

/// Locate a peer tool. Returns None (test skips) unless peers are required
/// (CI), in which case a missing tool is a failure.
pub fn peer(name: &str) -> Option<PathBuf> {
    let candidates = [
        PathBuf::from("/usr/bin").join(name),
        PathBuf::from("/usr/local/bin").join(name),
        PathBuf::from("/var/lib/pcp/pmdas/mmv").join(name),
        PathBuf::from("/usr/libexec/pcp/bin").join(name),
    ];
    if let Some(p) = candidates.into_iter().find(|p| p.is_file()) {
        return Some(p);
    }
    if let Ok(out) = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {name}"))
        .output()
    {
        let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && !s.is_empty() {
            return Some(PathBuf::from(s));
        }
    }
    if std::env::var_os("POLYTRACE_REQUIRE_PEERS").is_some() {
        panic!("peer tool {name} is required (CI) but not installed; run scripts/install-peers.sh");
    }
    eprintln!("skipping: peer tool {name} not installed");
    None
}

/// The PCP testsuite directory, if installed (required in CI).
pub fn pcp_testsuite() -> Option<PathBuf> {
    let p = PathBuf::from("/var/lib/pcp/testsuite");
    if p.join("archives").is_dir() {
        return Some(p);
    }
    if std::env::var_os("POLYTRACE_REQUIRE_PEERS").is_some() {
        panic!("the pcp-testsuite package is required (CI) but not installed");
    }
    None
}

/// Compare `actual` against the golden file at `path`, or rewrite it when
/// POLYTRACE_BLESS is set (review the diff before committing).
pub fn golden(path: &Path, actual: &[u8]) {
    if bless() {
        std::fs::write(path, actual).unwrap();
        return;
    }
    let expected = std::fs::read(path)
        .unwrap_or_else(|e| panic!("{}: {e} (POLYTRACE_BLESS=1 writes it)", path.display()));
    if expected != actual {
        let e = String::from_utf8_lossy(&expected);
        let a = String::from_utf8_lossy(actual);
        for (i, (x, y)) in e.lines().zip(a.lines()).enumerate() {
            if x != y {
                panic!(
                    "{} differs at line {}:\n  expected: {x}\n  actual:   {y}",
                    path.display(),
                    i + 1
                );
            }
        }
        panic!(
            "{} differs in length: expected {} lines, got {}",
            path.display(),
            e.lines().count(),
            a.lines().count()
        );
    }
}

/// First differing line between two texts, for assertion messages.
pub fn first_diff(expected: &str, actual: &str) -> Option<String> {
    for (i, (x, y)) in expected.lines().zip(actual.lines()).enumerate() {
        if x != y {
            return Some(format!("line {}:\n  expected: {x}\n  actual:   {y}", i + 1));
        }
    }
    let (a, b) = (expected.lines().count(), actual.lines().count());
    (a != b).then(|| format!("expected {a} lines, got {b}"))
}

/// Path of a built binary of this crate.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_polytrace"))
}
