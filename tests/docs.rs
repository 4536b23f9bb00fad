//! The documentation describes the project as it is: the README stays a
//! page for users, docs/mapping.md is what `polytrace formats --mapping`
//! prints, every page of docs/ is in its index, and no file narrates how the
//! work went ("the fifth session", "a slow phase of the host").
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[test]
fn mapping_page_is_the_mapping_output() {
    let out = common::output_ok(Command::new(common::bin()).args(["formats", "--mapping"]));
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.starts_with("| from | to |"), "{table}");
    let path = root().join("docs/mapping.md");
    let page = std::fs::read_to_string(&path).unwrap();
    let begin = "<!-- formats --mapping: begin";
    let end = "<!-- formats --mapping: end -->";
    let a = page.find(begin).expect("docs/mapping.md: begin marker");
    let a = a + page[a..].find('\n').unwrap() + 1;
    let e = page.find(end).expect("docs/mapping.md: end marker");
    if common::bless() {
        std::fs::write(&path, format!("{}{table}{}", &page[..a], &page[e..])).unwrap();
        return;
    }
    assert!(
        page[a..e] == table,
        "docs/mapping.md is not `polytrace formats --mapping` \
         (POLYTRACE_BLESS=1 cargo test --release --test docs rewrites it)"
    );
    // The page around the table is prose, not a second, stale copy of it.
    let rows = |s: &str| s.lines().filter(|l| l.starts_with("| ")).count();
    assert_eq!(rows(&page), rows(&table), "table rows outside the markers");
}

#[test]
fn readme_is_a_page_for_users() {
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines (at most 300)");
    for must in [
        "cargo install --locked --path .",
        "scripts/test.sh",
        "scripts/demo.sh",
        "docs/README.md",
        "## Exit codes",
    ] {
        assert!(readme.contains(must), "README.md does not mention {must}");
    }
}

#[test]
fn every_docs_page_is_in_the_index() {
    let index = read("docs/README.md");
    let mut pages: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") && n != "README.md")
        .collect();
    pages.sort();
    assert!(pages.len() >= 10, "{pages:?}");
    for p in &pages {
        assert!(
            index.contains(&format!("]({p})")),
            "docs/README.md does not link {p}"
        );
    }
    // And every link of the index, and the README's links into docs/, exist.
    for (file, text) in [
        ("docs/README.md", index.clone()),
        ("README.md", read("README.md")),
    ] {
        let dir = root().join(file).parent().unwrap().to_path_buf();
        for target in links(&text) {
            if target.contains("://") {
                continue;
            }
            let t = target.split('#').next().unwrap();
            assert!(
                dir.join(t).exists(),
                "{file}: link to {target} goes nowhere"
            );
        }
    }
}

/// The targets of Markdown links `[text](target)`.
fn links(text: &str) -> Vec<String> {
    let mut v = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(j) = rest.find(')') {
            v.push(rest[..j].to_string());
        }
    }
    v
}

/// Ordinals that narrate when followed by a word for a sitting of work.
const ORDINALS: [&str; 20] = [
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
    "thirteenth",
    "fourteenth",
    "fifteenth",
    "sixteenth",
    "seventeenth",
    "eighteenth",
    "nineteenth",
    "twentieth",
];
const SITTINGS: [&str; 6] = ["session", "sessions", "run", "runs", "build", "builds"];
/// Words that make "session" a sitting of work, not a DLT session id
/// ("the same --session-id" is DLT's).
const SESSION_NARRATION: [&str; 7] = [
    "this", "that", "previous", "earlier", "later", "last", "next",
];

/// Narration found in `text`: (line, the words).
fn narration(text: &str) -> Vec<(usize, String)> {
    let mut words: Vec<(usize, String)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for w in line.split(|c: char| !c.is_alphanumeric()) {
            if !w.is_empty() {
                words.push((n + 1, w.to_lowercase()));
            }
        }
    }
    let mut found = Vec::new();
    for pair in words.windows(2) {
        let (a, b) = (&pair[0].1, &pair[1].1);
        let ordinal = ORDINALS.contains(&a.as_str()) && SITTINGS.contains(&b.as_str());
        let session = b == "session" && SESSION_NARRATION.contains(&a.as_str());
        let phase = a == "slow" && (b == "phase" || b == "phases");
        if ordinal || session || phase {
            found.push((pair[0].0, format!("{a} {b}")));
        }
    }
    found
}

fn files_under(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if !["target", "corpus", "artifacts"].contains(&name.as_str()) {
                files_under(&p, exts, out);
            }
        } else if exts.iter().any(|x| name.ends_with(x)) {
            out.push(p);
        }
    }
}

#[test]
fn no_narration_of_how_the_work_went() {
    // The finder itself finds what it should.
    assert_eq!(narration("as of the thirteenth\nsession").len(), 1);
    assert_eq!(narration("in a slow phase of the host").len(), 1);
    assert!(narration("the DLT session id of the first message").is_empty());
    assert!(narration("with the same --session-id").is_empty());

    let r = root();
    let mut files = vec![r.join("README.md"), r.join("Cargo.toml")];
    for (dir, exts) in [
        ("docs", &[".md"][..]),
        ("src", &[".rs"][..]),
        ("scripts", &[".sh", ".py"][..]),
        ("benches", &[".rs"][..]),
        ("tests", &[".rs"][..]),
        ("fuzz", &[".md", ".rs", ".sh"][..]),
        ("testdata", &[".md"][..]),
    ] {
        files_under(&r.join(dir), exts, &mut files);
    }
    assert!(files.len() > 50, "{} files", files.len());
    let me = r.join("tests/docs.rs");
    let mut bad = Vec::new();
    for f in files.iter().filter(|f| **f != me) {
        let text = std::fs::read_to_string(f).unwrap();
        for (line, words) in narration(&text) {
            bad.push(format!(
                "{}:{line}: {words}",
                f.strip_prefix(&r).unwrap().display()
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "narration of how the work went:\n{}",
        bad.join("\n")
    );
}

/// `scripts/demo.sh` shows what a user came for: the recording's summary,
/// the busiest processes, samples as a table and a file for a viewer, and
/// nothing of the formats' inner workings.
#[test]
fn the_demo_shows_data_not_internals() {
    if !Path::new("/proc/stat").exists() || !Path::new("/bin/bash").exists() {
        eprintln!("skipping: the demo needs /proc and bash");
        return;
    }
    // A busy process the demo must find among the busiest (it ends by
    // itself should the test die before killing it).
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let busy = Kill(
        Command::new("bash")
            .args([
                "-c",
                "end=$((SECONDS + 30)); while ((SECONDS < end)); do :; done",
            ])
            .spawn()
            .unwrap(),
    );
    let o = Command::new("bash")
        .arg(root().join("scripts/demo.sh"))
        .arg("2")
        .env("POLYTRACE", common::bin())
        .output()
        .unwrap();
    let busy_pid = busy.0.id().to_string();
    drop(busy);
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "demo failed:\n{out}\n{err}");
    assert!(err.trim().is_empty(), "demo wrote to stderr:\n{err}");
    // Framing and self-description of LTT and the other formats.
    for inner in [
        "builtin.",
        "facility_load",
        "polytrace.define",
        "polytrace.event",
        "block_start",
        "block_end",
        "heartbeat",
        "\"ltt\"",
        "raw_clock",
        "# extra",
    ] {
        assert!(!out.contains(inner), "demo shows {inner}:\n{out}");
    }
    // Each step says in one line what it is.
    let steps: Vec<&str> = out.lines().filter(|l| l.starts_with("== ")).collect();
    assert_eq!(steps.len(), 6, "{out}");
    let section = |head: &str| -> Vec<&str> {
        out.split("\n== ")
            .find(|s| s.starts_with(head))
            .unwrap_or_else(|| panic!("no step {head}:\n{out}"))
            .lines()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .collect()
    };
    let info = section("What the archive holds");
    assert!(
        info.iter().any(|l| l.starts_with("format:    pcp")),
        "{info:?}"
    );
    assert!(info.iter().any(|l| l.starts_with("span:")), "{info:?}");
    // A header and at least one process, busiest first, with a share of CPU.
    let busy = section("Busiest processes");
    assert!(busy.len() >= 2, "{busy:?}");
    let rows: Vec<(f64, &str)> = busy[1..]
        .iter()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(w[1], "%", "{l}");
            (w[0].parse().unwrap(), w[2])
        })
        .collect();
    assert!(rows.windows(2).all(|w| w[0].0 >= w[1].0), "{busy:?}");
    assert!(rows.iter().all(|r| r.0 > 0.0 && r.0 <= 100.0), "{busy:?}");
    // The demo lists 8; with fewer than 8 busy processes the loop is one of
    // them (on a machine loaded with more, it may rank below the eighth).
    assert!(rows.len() <= 8, "{busy:?}");
    assert!(
        rows.len() == 8 || rows.iter().any(|r| r.1 == busy_pid),
        "the busy loop (PID {busy_pid}) is not among {busy:?}"
    );
    // 2 s at 1 s: three samples, each a row with a time and free memory.
    let table = section("System samples");
    assert_eq!(table.len(), 4, "{table:?}");
    for row in &table[1..] {
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells.len(), 5, "{row}");
        assert_eq!(cells[0].len(), 8, "time of day: {row}");
        assert!(cells[4].parse::<f64>().unwrap() > 0.0, "{row}");
    }
    let viewer = section("For a trace viewer");
    let json = viewer[0].split_whitespace().last().unwrap();
    let text = std::fs::read_to_string(json).unwrap();
    assert!(
        text.starts_with('{') && text.contains("\"traceEvents\""),
        "{json}"
    );
    if let Some(dir) = Path::new(json).parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
}
