//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

/// A peer tool and a scratch directory, as most peer tests begin; None (the
/// test skips) as [`peer`] says.
pub fn peer_and_scratch(name: &str) -> Option<(PathBuf, tempfile::TempDir)> {
    Some((peer(name)?, tempfile::tempdir().unwrap()))
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

/// Exit code (-1 when a signal ended it), stdout and stderr of `cmd`.
pub fn outcome(cmd: &mut Command) -> (i32, String, String) {
    let o = cmd.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `polytrace ARGS… PATHS…`: exit code, stdout and stderr.
pub fn pt(args: &[&str], paths: &[&Path]) -> (i32, String, String) {
    outcome(Command::new(bin()).args(args).args(paths))
}

/// One corpus input per readable format, named by the format.
pub fn sources() -> Vec<(&'static str, PathBuf)> {
    let c = corpus();
    vec![
        ("kpi", c.join("kpi/kpi-capture.convert-a.txt")),
        ("dlt", c.join("kpi/kpi-capture.dlt")),
        ("mmv", c.join("mmv/research_v2.mmv")),
        ("pcp", c.join("pcp/live_v3")),
        ("ltt", c.join("ltt/smp_example")),
        ("timeline", c.join("timeline/a2-small-wrapped.dat")),
    ]
}

/// Assert two byte strings are equal, naming the first differing line.
pub fn assert_same(what: &str, want: &[u8], got: &[u8]) {
    assert!(
        want == got,
        "{what}: {}",
        first_diff(
            &String::from_utf8_lossy(want),
            &String::from_utf8_lossy(got)
        )
        .unwrap_or_default()
    );
}

/// Run `cmd` and assert it succeeded (its stderr in the message).
pub fn output_ok(cmd: &mut Command) -> Output {
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// The stdout of `cmd`, which must succeed.
pub fn stdout_of(cmd: &mut Command) -> Vec<u8> {
    output_ok(cmd).stdout
}

/// The files of the corpus LTT trace `ltt/smp_example`.
pub const SMP_FILES: [&str; 7] = [
    "info/system.xml",
    "eventdefs/core.xml",
    "control/facilities",
    "control/interrupts",
    "control/processes",
    "cpu/0",
    "cpu/1",
];

/// `polytrace convert --to TO -o OUT EXTRA… IN`, which must exit 0; its stderr.
pub fn convert(input: &Path, to: &str, out: &Path, extra: &[&str]) -> String {
    let mut args = vec!["convert", "--to", to];
    args.extend_from_slice(extra);
    args.push("-o");
    let (code, _, err) = pt(&args, &[out, input]);
    assert_eq!(code, 0, "convert {} --to {to}: {err}", input.display());
    err
}

/// Assert `text` contains `part`, showing `text` when it does not.
pub fn assert_has(text: &str, part: &str) {
    assert!(text.contains(part), "{part:?} is not in:\n{text}");
}

/// Assert `text` holds each of `parts`, naming `what` and the part missing.
pub fn assert_has_all(what: &str, text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{what}: {part:?} is not in:\n{text}");
    }
}

/// `polytrace ARGS… PATHS…`, which must exit with `code`; its stderr.
pub fn pt_exit(code: i32, args: &[&str], paths: &[&Path]) -> String {
    let (got, _, err) = pt(args, paths);
    assert_eq!(got, code, "{args:?}: {err}");
    err
}

/// Copy the corpus file `rel` to `dst`.
pub fn copy_corpus(rel: &str, dst: &Path) {
    std::fs::copy(corpus().join(rel), dst).unwrap();
}

/// The event lines of `dump --style common EXTRA… P` (definitions and
/// header aside), which must exit 0.
pub fn common_events(p: &Path, extra: &[&str]) -> Vec<String> {
    let args = [&["dump", "--style", "common"], extra].concat();
    let (code, out, err) = pt(&args, &[p]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("event"))
        .map(str::to_string)
        .collect()
}

/// The corpus files `rels` (paths below the corpus).
pub fn corpus_files(rels: &[&str]) -> Vec<PathBuf> {
    let c = corpus();
    rels.iter().map(|p| c.join(p)).collect()
}

/// The corpus timeline snapshots (`timeline/*.dat`), sorted.
pub fn timeline_snapshots() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(corpus().join("timeline"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "dat"))
        .collect();
    v.sort();
    v
}

/// A value we wrote and the one `pmrep -o csv -P 9` printed agree: integers
/// exactly, reals to pmrep's 9 decimals (FLOAT widened to double first),
/// strings but for the delimiter pmrep replaces inside them (we quote).
pub fn same_as_pmrep(ours: &str, theirs: &str) -> bool {
    if let (Ok(a), Ok(b)) = (ours.parse::<i128>(), theirs.parse::<i128>()) {
        return a == b;
    }
    if let (Ok(a), Ok(b)) = (ours.parse::<f64>(), theirs.parse::<f64>()) {
        return (a - b).abs() <= 1e-6 * a.abs().max(1.0);
    }
    ours.replace(',', "_") == theirs
}

/// The binary under test: POLYTRACE_TEST_BIN runs a test against another
/// build (e.g. to see it fail on an older one).
pub fn bin_under_test() -> PathBuf {
    std::env::var_os("POLYTRACE_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(bin)
}

/// `ARGS…` run by [`bin_under_test`]: exit code, stdout and stderr.
pub fn pt_under_test(args: &[&str]) -> (i32, String, String) {
    outcome(Command::new(bin_under_test()).args(args))
}

/// `ARGS… PATHS…` run by [`bin_under_test`], which must exit with `code`;
/// its stderr.
pub fn exit_under_test(code: i32, args: &[&str], paths: &[&Path]) -> String {
    let (got, _, err) = outcome(Command::new(bin_under_test()).args(args).args(paths));
    assert_eq!(got, code, "{args:?} {paths:?}: {err}");
    err
}

/// An event item at `t` ns of type `type_id` on `cpu` with `fields`: no
/// raw clock, stream or extras.
pub fn event(
    t: i64,
    type_id: u32,
    cpu: Option<u32>,
    fields: Vec<polytrace::model::Value>,
) -> polytrace::model::Item {
    use polytrace::model::{Event, Item, Timestamp};
    Item::Event(Event {
        time: Timestamp(t),
        raw_clock: None,
        type_id,
        cpu,
        stream: None,
        fields,
        extras: Default::default(),
    })
}

/// Where each record of a DLT storage file starts: after the 16-byte
/// storage header, the standard header's length (big-endian, bytes 2..4)
/// says where the next one is.
pub fn dlt_record_offsets(file: &[u8]) -> Vec<usize> {
    let mut v = Vec::new();
    let mut p = 0;
    while p + 20 <= file.len() {
        v.push(p);
        p += 16 + u16::from_be_bytes([file[p + 18], file[p + 19]]) as usize;
    }
    v
}

/// The entry of event `name` in the output `j` of `stats --json`.
pub fn stats_event<'a>(j: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    j["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == name)
        .unwrap_or_else(|| panic!("no {name} among the events of {j}"))
}

/// The testdata file `rel` as an argument.
pub fn td(rel: &str) -> String {
    testdata().join(rel).to_string_lossy().into_owned()
}

/// A path as an argument.
pub fn path_arg(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The virtual environment's python with duckdb and pyarrow, or None (the
/// test skips; in CI it fails).
pub fn venv_python() -> Option<PathBuf> {
    let venv = std::env::var_os("POLYTRACE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/local/lib/polytrace-venv"));
    let py = venv.join("bin/python3");
    let ok = py.is_file()
        && Command::new(&py)
            .args(["-c", "import duckdb, pyarrow"])
            .output()
            .is_ok_and(|o| o.status.success());
    if ok {
        return Some(py);
    }
    if std::env::var_os("POLYTRACE_REQUIRE_PEERS").is_some() {
        panic!(
            "duckdb and pyarrow are required (CI) in {}; run scripts/install-peers.sh",
            venv.display()
        );
    }
    eprintln!("skipping: no duckdb/pyarrow in {}", venv.display());
    None
}

/// Rows of a DuckDB query as text cells (NULL as an empty cell).
pub fn duckdb(py: &Path, sql: &str) -> Vec<Vec<String>> {
    let script = r#"
import sys, json, duckdb
con = duckdb.connect()
# A slow query (a loaded machine) must not draw a progress bar into the rows.
con.execute("SET enable_progress_bar = false")
for row in con.sql(sys.argv[1]).fetchall():
    # One JSON array a row: strings holding tabs or newlines stay whole.
    print(json.dumps(["" if v is None else repr(v) if isinstance(v, float) else str(v) for v in row]))
"#;
    let o = output_ok(Command::new(py).args(["-c", script, sql]));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: not a row: {l}")))
        .collect()
}

/// `TZ=UTC dlt-convert -a FILE`, the libdlt log lines it prints into
/// stdout (`[ uptime]~DLT~…`, even in the middle of a line) left out; None
/// (test skips) when dlt-convert is not installed.
pub fn dlt_convert_a(file: &Path) -> Option<Vec<u8>> {
    let tool = peer("dlt-convert")?;
    let out = Command::new(tool)
        .env("TZ", "UTC")
        .arg("-a")
        .arg(file)
        .output()
        .unwrap();
    let mut kept = Vec::new();
    let text = out.stdout;
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        let is_log = rest.starts_with(b"[") && {
            let close = rest.iter().position(|&c| c == b']').unwrap_or(0);
            close > 1 && rest[close + 1..].starts_with(b"~DLT~")
        };
        if is_log {
            let nl = rest
                .iter()
                .position(|&c| c == b'\n')
                .unwrap_or(rest.len() - 1);
            i += nl + 1;
            continue;
        }
        kept.push(text[i]);
        i += 1;
    }
    Some(kept)
}

/// The lines of [`dlt_convert_a`]; None (test skips) when dlt-convert is
/// not installed.
pub fn dlt_convert_a_lines(file: &Path) -> Option<Vec<String>> {
    let text = dlt_convert_a(file)?;
    Some(
        String::from_utf8_lossy(&text)
            .lines()
            .map(str::to_string)
            .collect(),
    )
}

/// The files below `dir` (at any depth) that `keep` accepts, sorted.
pub fn files_below(dir: &Path, keep: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    fn walk(d: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, keep, out);
            } else if keep(&p) {
                out.push(p);
            }
        }
    }
    let mut v = Vec::new();
    walk(dir, keep, &mut v);
    v.sort();
    v
}

/// True when `p` ends in `.EXT`.
pub fn has_ext(p: &Path, ext: &str) -> bool {
    p.extension().is_some_and(|x| x == ext)
}

/// Every `.dlt` under testdata (all folders), sorted.
pub fn all_dlt_files() -> Vec<PathBuf> {
    files_below(&testdata(), &|p| has_ext(p, "dlt"))
}

/// A scratch directory with the file `name` holding `bytes`.
pub fn scratch_file(name: &str, bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(name);
    std::fs::write(&p, bytes).unwrap();
    (dir, p)
}

/// `input` converted ([`convert`]) to `to`, as `name` in a new scratch
/// directory.
pub fn convert_in_scratch(
    input: &Path,
    to: &str,
    name: &str,
    extra: &[&str],
) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join(name);
    convert(input, to, &out, extra);
    (dir, out)
}

/// A scratch directory and the corpus input `rel`, as most conversion
/// tests begin.
pub fn scratch_and_corpus(rel: &str) -> (tempfile::TempDir, PathBuf) {
    (tempfile::tempdir().unwrap(), corpus().join(rel))
}
