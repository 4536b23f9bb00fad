//! The repository stands on its own: nothing in it reads or names a folder
//! beside the checkout, which a user's clone does not have.

use std::path::Path;

#[test]
fn nothing_refers_to_a_folder_beside_the_checkout() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Built from parts so this file does not match itself.
    let needle = format!("../{}", "shared");
    let mut hits = Vec::new();
    for entry in walkdir::WalkDir::new(root).into_iter().filter_entry(|e| {
        let n = e.file_name().to_string_lossy();
        !(e.depth() == 1 && (n == "target" || n == ".git"))
            && !(n == "target" && e.path().parent().is_some_and(|p| p.ends_with("fuzz")))
    }) {
        let entry = entry.unwrap();
        if !entry.file_type().is_file() {
            continue;
        }
        let Ok(text) = std::fs::read(entry.path()) else {
            continue;
        };
        if text.windows(needle.len()).any(|w| w == needle.as_bytes()) {
            hits.push(
                entry
                    .path()
                    .strip_prefix(root)
                    .unwrap()
                    .display()
                    .to_string(),
            );
        }
    }
    assert!(hits.is_empty(), "files naming {needle}: {hits:?}");
}

#[test]
fn every_testdata_folder_says_where_its_files_come_from() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&root).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() && !entry.path().join("PROVENANCE.md").is_file() {
            missing.push(entry.file_name());
        }
    }
    assert!(
        missing.is_empty(),
        "testdata folders without PROVENANCE.md: {missing:?}"
    );
}
