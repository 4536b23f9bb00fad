//! The timeline logging API (crates/timeline-log) through its example,
//! read back by `polytrace dump`, also while it logs.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn example_bin() -> PathBuf {
    // Build the example once (cargo test does not build examples it does
    // not run); the binary is beside the test's own target directory.
    let st = Command::new(env!("CARGO"))
        .args(["build", "--release", "--example", "timeline_log", "-q"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo build --example");
    assert!(st.success());
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/examples/timeline_log")
}

/// Parse a row's message into (kind, args); check the args follow the
/// example's rules for index i. Returns i.
fn check_row(row: &str) -> u64 {
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert!(cols.len() >= 5, "short row: {row:?}");
    assert_eq!(cols[3], "example", "category in {row:?}");
    let nums: Vec<u64> = cols[4..]
        .iter()
        .filter_map(|w| {
            let (_, v) = w.split_once('(')?;
            v.strip_suffix(')')?.parse().ok()
        })
        .collect();
    let i = nums[0];
    match cols[4] {
        "rx" => assert_eq!(nums, [i, 2 * i + 1], "{row:?}"),
        "batch" => assert_eq!(nums, [i, i + 7, i ^ 0x5555], "{row:?}"),
        "tick" => assert_eq!(nums, [i, 3 * i, 5 * i, 7 * i], "{row:?}"),
        k => panic!("unknown event {k:?} in {row:?}"),
    }
    let kind = ["rx", "batch", "tick"][(i % 3) as usize];
    assert_eq!(cols[4], kind, "event {i} has the wrong kind: {row:?}");
    i
}

#[test]
fn hundred_thousand_events_dumped_in_order_with_args() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("log.timeline");
    let st = Command::new(example_bin())
        .arg(&file)
        .arg("100000")
        .status()
        .unwrap();
    assert!(st.success());
    let out = common::output_ok(Command::new(common::bin()).arg("dump").arg(&file));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("numa core       cycles category         message")
    );
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 100_000);
    for (k, row) in rows.iter().enumerate() {
        assert_eq!(check_row(row), k as u64, "row {k} out of order");
    }
    assert!(rows[0].contains("<start>"));
    assert_eq!(rows[0].split_whitespace().nth(4), Some("rx"));
    assert!(rows[99_999].ends_with("rx seq seq(99999) len len(199999)"));
    assert!(rows[99_998].ends_with("tick seq(99998) a(299994) b(499990) c(699986)"));
}

#[test]
fn dump_while_logging_never_shows_a_torn_entry() {
    // In shared memory, as a logging program would put it, where there is.
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let file = dir.path().join("live.timeline");
    // A logger that runs far longer than the test: killed at the end.
    let mut child = Command::new(example_bin())
        .arg(&file)
        .arg("100000000000")
        .arg("8192")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !file.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no timeline file"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let (mut dumps, mut rows_seen, mut noted) = (0, 0usize, 0);
    while start.elapsed() < Duration::from_secs(4) || dumps < 20 {
        let out = common::output_ok(Command::new(common::bin()).arg("dump").arg(&file));
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("being written") {
            noted += 1;
        }
        let text = String::from_utf8(out.stdout).unwrap();
        for row in text.lines().skip(1) {
            check_row(row);
            rows_seen += 1;
        }
        dumps += 1;
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "the logger stopped early"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        rows_seen > 1000,
        "{dumps} dumps showed only {rows_seen} rows"
    );
    eprintln!("{dumps} live dumps, {rows_seen} rows checked, {noted} noted skipped entries");
}

#[test]
fn saved_snapshot_dumps_with_each_category_and_the_priority_filter() {
    use timeline_log::{Level, Priority, Timeline};
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("ring");
    let snap = dir.path().join("snap");
    let tl = Timeline::create(&live, 1024, 1024).unwrap();
    let start = tl
        .define("engine", Priority::Info, "breath $n start")
        .unwrap();
    let pulled = tl
        .define("link", Priority::Packet, "pulled $pkts packets")
        .unwrap();
    start.log1(1);
    pulled.log1(64);
    tl.set_priority(Priority::App);
    pulled.log1(65); // filtered: Packet is below App
    start.log1(2);
    tl.set_priority(Level::None);
    start.log1(3); // filtered
    tl.save(&snap).unwrap();
    drop(tl);
    let out = common::output_ok(Command::new(common::bin()).arg("dump").arg(&snap));
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<String> = text
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().skip(3).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        rows,
        [
            "engine breath n(1) start",
            "link pulled pkts(64) packets",
            "engine breath n(2) start"
        ]
    );
    // The snapshot is a plain A2 file: the header keeps the mask (none = 1)
    // and next = 3, and no live tag.
    let b = std::fs::read(&snap).unwrap();
    assert_eq!(u64::from_le_bytes(b[8..16].try_into().unwrap()), 1);
    assert_eq!(u64::from_le_bytes(b[16..24].try_into().unwrap()), 3);
    assert!(b[32..64].iter().all(|&x| x == 0));
}
