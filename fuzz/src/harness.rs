//! What every fuzz target runs, shared with the regression test of kept
//! crash inputs (`tests/damage.rs` includes this file by path).
//!
//! A single-file format takes the fuzz input as the file. LTT (a directory)
//! and PCP (three or more files) take a small container: `PTFZ1\n`, then
//! entries `name NUL u32-LE-length bytes` (the last length is clamped to
//! what is left). LTT names are paths inside the trace (`info/system.xml`,
//! `cpu/0`); PCP names are members of the archive `a` (`a.meta`, `a.0`).

#![allow(dead_code)]

use polytrace::formats;
use polytrace::input::Input;
use polytrace::model::FormatId;
use polytrace::options::{DumpOptions, ReadOptions};
use std::path::{Path, PathBuf};

pub const MAGIC: &[u8] = b"PTFZ1\n";

/// Items read per run at most: damage must not make a reader loop, but a
/// valid input may be long.
const MAX_ITEMS: usize = 2_000_000;

/// Split a container into (name, bytes); None if `data` is not one.
pub fn unpack(data: &[u8]) -> Option<Vec<(String, &[u8])>> {
    let mut rest = data.strip_prefix(MAGIC)?;
    let mut out = Vec::new();
    while !rest.is_empty() && out.len() < 64 {
        let nul = rest.iter().position(|&c| c == 0)?;
        let name = std::str::from_utf8(&rest[..nul]).ok()?.to_string();
        rest = &rest[nul + 1..];
        let len = rest
            .get(..4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))?;
        rest = &rest[4..];
        let n = (len as usize).min(rest.len());
        out.push((name, &rest[..n]));
        rest = &rest[n..];
    }
    Some(out)
}

/// Build a container (for seeds and tests).
pub fn pack(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    for (name, bytes) in files {
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(bytes);
    }
    out
}

/// A relative path of at most three plain components.
fn safe(name: &str) -> bool {
    let parts: Vec<&str> = name.split('/').collect();
    !name.is_empty()
        && parts.len() <= 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && *p != "."
                && *p != ".."
                && p.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(&c))
        })
}

fn workdir() -> PathBuf {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("temp dir"))
        .path()
        .to_path_buf()
}

/// Lay `data` out as files for `fmt`; the path to open, or None.
pub fn materialise(fmt: FormatId, data: &[u8], dir: &Path) -> Option<PathBuf> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).ok()?;
    match fmt {
        FormatId::Ltt | FormatId::Pcp => {
            let files = unpack(data)?;
            let root = dir.join("t");
            std::fs::create_dir_all(&root).ok()?;
            for (name, bytes) in files {
                let pcp_member =
                    fmt == FormatId::Pcp && name.starts_with("a.") && !name.contains('/');
                if !safe(&name) || (fmt == FormatId::Pcp && !pcp_member) {
                    continue;
                }
                let p = root.join(&name);
                if let Some(parent) = p.parent() {
                    if std::fs::create_dir_all(parent).is_err() {
                        continue;
                    }
                }
                let _ = std::fs::write(&p, bytes);
            }
            Some(if fmt == FormatId::Pcp {
                root.join("a")
            } else {
                root
            })
        }
        _ => {
            let p = dir.join("in");
            std::fs::write(&p, data).ok()?;
            Some(p)
        }
    }
}

/// Read, list and check `data` as format `fmt`. Errors are fine; a panic,
/// a hang or an unbounded allocation is the bug the fuzzer looks for.
pub fn run(fmt: FormatId, data: &[u8]) {
    run_in(fmt, data, &workdir().join("w"));
}

pub fn run_in(fmt: FormatId, data: &[u8], dir: &Path) {
    let Some(path) = materialise(fmt, data, dir) else {
        return;
    };
    let Ok(input) = Input::resolve(&path) else {
        return;
    };
    let _ = formats::detect(&input);
    let f = formats::get(fmt);
    // Both modes matter; which one an input gets is fixed by the input.
    let ropts = ReadOptions {
        salvage: data.len() % 2 == 1,
        ..ReadOptions::default()
    };
    if let Ok(mut r) = f.open(&input, &ropts) {
        let mut n = 0;
        while let Ok(Some(_)) = r.next_item() {
            n += 1;
            if n >= MAX_ITEMS {
                break;
            }
        }
        let _ = r.diagnostics();
    }
    let _ = f.dump(
        &input,
        &ropts,
        &DumpOptions::default(),
        &mut std::io::sink(),
    );
    let _ = f.check(&input, &ropts);
}
