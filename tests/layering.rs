//! The crate's layering, checked from the source text: format folders use
//! only the model and the shared plumbing, and no two parts of the crate
//! import each other (directly or around a circle).
//!
//! A "unit" is a top-level module of `src/` (`model`, `cli`, `stages`, …),
//! except that each format folder (`formats/pcp`, …), the format trait
//! (`formats/format`) and the registry (`formats/mod.rs`) are units of their
//! own. References are `crate::…` paths (and `polytrace::…` in `src/bin`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What a format folder may use besides other format folders.
const FORMAT_MAY_USE: &[&str] = &[
    "model",
    "error",
    "input",
    "output",
    // The registry of paths removed on a signal (std only; staging uses it).
    "cleanup",
    "options",
    "cfmt",
    "formats/format",
];

/// The unit a source file belongs to.
fn unit_of(rel: &Path) -> String {
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let stem = |s: &str| s.trim_end_matches(".rs").to_string();
    match parts.as_slice() {
        [f, name, ..] if f == "formats" && parts.len() > 2 => format!("formats/{name}"),
        [f, file] if f == "formats" && file == "mod.rs" => "formats".into(),
        [f, file] if f == "formats" => format!("formats/{}", stem(file)),
        [first, ..] => stem(first),
        [] => unreachable!(),
    }
}

/// The unit a `crate::a::b` path names.
fn unit_of_path(a: &str, b: Option<&str>) -> String {
    match (a, b) {
        ("formats", Some(b)) if b.chars().next().is_some_and(|c| c.is_ascii_lowercase()) => {
            let is_fn = matches!(b, "get" | "all" | "detect" | "not_implemented");
            if is_fn {
                "formats".into()
            } else {
                format!("formats/{b}")
            }
        }
        ("formats", _) => "formats".into(),
        // lib.rs re-exports the error types at the crate root.
        ("Diagnostic" | "Error" | "Position" | "Result" | "Severity", _) => "error".into(),
        (a, _) => a.to_string(),
    }
}

/// Every `crate::x[::y]` (or `polytrace::x[::y]` in binaries) reference of a file.
fn references(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(off) = text[i..].find(prefix) {
        let start = i + off;
        i = start + prefix.len();
        // Must be a path start, not the tail of another identifier.
        if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            continue;
        }
        let ident = |from: usize| -> &str {
            let n = text[from..]
                .bytes()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == b'_')
                .count();
            &text[from..from + n]
        };
        if text[i..].starts_with('{') {
            // `crate::{a, b::c}`: each member is a path of its own.
            let close = text[i..].find('}').map_or(text.len(), |c| i + c);
            for member in text[i + 1..close].split(',') {
                let mut segs = member.trim().split("::");
                if let Some(a) = segs.next().filter(|a| !a.is_empty()) {
                    out.insert(unit_of_path(a, segs.next()));
                }
            }
            continue;
        }
        let a = ident(i);
        if a.is_empty() {
            continue;
        }
        let after = i + a.len();
        let b = text[after..]
            .strip_prefix("::")
            .map(|_| ident(after + 2))
            .filter(|b| !b.is_empty());
        out.insert(unit_of_path(a, b));
    }
    out
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = common::files_below(&src, &|p| common::has_ext(p, "rs"));
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        if rel == Path::new("lib.rs") {
            continue; // declares the modules, uses none
        }
        let unit = unit_of(rel);
        let text = std::fs::read_to_string(&f).unwrap();
        let prefix = if unit == "bin" {
            "polytrace::"
        } else {
            "crate::"
        };
        let refs = references(&text, prefix);
        let entry = g.entry(unit.clone()).or_default();
        entry.extend(refs.into_iter().filter(|r| *r != unit));
    }
    g
}

#[test]
fn format_folders_use_only_the_model_and_plumbing() {
    let g = graph();
    let mut bad = Vec::new();
    for (unit, deps) in &g {
        if !unit.starts_with("formats/") || unit == "formats/format" {
            continue;
        }
        for d in deps {
            if !(FORMAT_MAY_USE.contains(&d.as_str())
                || (d.starts_with("formats/") && d != "formats"))
            {
                bad.push(format!("{unit} uses {d}"));
            }
        }
    }
    assert!(
        g.contains_key("formats/pcp"),
        "the scan found no format folder"
    );
    assert!(bad.is_empty(), "format folders reach up: {bad:#?}");
}

#[test]
fn no_import_cycle_between_units() {
    let g = graph();
    // Depth-first search with colours; report the first circle found.
    fn visit(
        u: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(u.to_string(), 1);
        stack.push(u.to_string());
        for v in g.get(u).into_iter().flatten() {
            match state.get(v.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|s| s == v).unwrap();
                    let mut c = stack[at..].to_vec();
                    c.push(v.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(v, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(u.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for u in g.keys() {
        if state.get(u.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(u, &g, &mut state, &mut Vec::new()) {
                panic!("import circle: {}", c.join(" -> "));
            }
        }
    }
}

#[test]
fn the_scan_sees_references() {
    // The checker itself: it must find a grouped import, a plain path and a
    // registry function, and must not take `mycrate::x` for `crate::x`.
    let r = references(
        "use crate::{model::Item, error};\nlet f = crate::formats::get(id);\nmycrate::cli::x();\nuse crate::formats::pcp::reader;",
        "crate::",
    );
    let want: BTreeSet<String> = ["model", "error", "formats", "formats/pcp"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(r, want);
}
