//! `convert DIR --to FORMAT -o OUTDIR`: walk a tree, convert every trace in
//! it, keep relative paths, continue past failures, end with a summary.

use super::naming::batch_output_name;
use super::progress::{self, BatchBar};
use super::report::report_diagnostics;
use super::{ConvertArgs, EXIT_BATCH_FAILED, EXIT_OK, EXIT_SALVAGED};
use crate::error::Diagnostic;
use crate::formats::{self, Format};
use crate::input::{archive_base_of, Input, InputKind};
use crate::model::FormatId;
use crate::pipeline::{self, Dest};
use anyhow::{Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(Debug)]
enum Outcome {
    Ok,
    Salvaged(String),
    Failed(String),
    Skipped(String),
}

/// Collect the inputs of a tree: files, LTT trace directories, and PCP
/// archives (all members grouped under their base name).
pub(super) fn collect_inputs(root: &Path) -> Vec<(PathBuf, u64)> {
    collect_inputs_skipping(root, None, &mut Vec::new())
}

/// [`collect_inputs`], never entering the folder `skip` (canonical path).
/// What the walk meets and does not take (an unreadable folder, a link, a
/// FIFO) goes to `passed`, with its outcome, for the listing.
fn collect_inputs_skipping(
    root: &Path,
    skip: Option<&Path>,
    passed: &mut Vec<(PathBuf, Outcome)>,
) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let mut seen_bases = BTreeSet::new();
    let mut it = walkdir::WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter();
    while let Some(entry) = it.next() {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                let path = e.path().unwrap_or(root).to_path_buf();
                let why = match e.io_error() {
                    Some(io) => format!("cannot read: {io}"),
                    None => e.to_string(),
                };
                passed.push((path, Outcome::Failed(why)));
                continue;
            }
        };
        let path = entry.path();
        if entry.file_type().is_dir() {
            // The output tree inside the input tree: never re-read what this
            // run or an earlier one wrote there.
            if skip.is_some_and(|s| std::fs::canonicalize(path).is_ok_and(|c| c == s)) {
                it.skip_current_dir();
                continue;
            }
            if path != root && path.join("info").join("system.xml").is_file() {
                let size = walkdir::WalkDir::new(path)
                    .into_iter()
                    .filter_map(|e| e.ok())
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum();
                out.push((path.to_path_buf(), size));
                it.skip_current_dir();
            }
            continue;
        }
        if crate::output::is_own_sidecar(entry.file_name()) {
            continue;
        }
        if !entry.file_type().is_file() {
            let why = if entry.file_type().is_symlink() {
                "symbolic link (not followed)"
            } else {
                "not a regular file"
            };
            passed.push((path.to_path_buf(), Outcome::Skipped(why.into())));
            continue;
        }
        let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
        if let Some(base) = archive_base_of(path) {
            let members = crate::input::archive_members(&base);
            let is_archive = members.iter().any(|m| {
                crate::input::strip_compression(
                    &m.file_name().unwrap_or_default().to_string_lossy(),
                )
                .ends_with(".meta")
            });
            if is_archive {
                if seen_bases.insert(base.clone()) {
                    let total = members
                        .iter()
                        .filter_map(|m| std::fs::metadata(m).ok())
                        .map(|m| m.len())
                        .sum();
                    out.push((base, total));
                }
                continue;
            }
        }
        out.push((path.to_path_buf(), size));
    }
    out
}

/// Each input's output path relative to the output root. Names that two
/// inputs would share (`a.dlt` and `a.kpi` → `a.kpi`) keep their source
/// extension instead (`a.dlt.kpi`, `a.kpi.kpi`).
fn output_names(root: &Path, inputs: &[(PathBuf, u64)], to: FormatId) -> Vec<OsString> {
    let rels: Vec<&Path> = inputs
        .iter()
        .map(|(p, _)| p.strip_prefix(root).unwrap_or(p))
        .collect();
    let short: Vec<OsString> = rels
        .iter()
        .map(|r| batch_output_name(r, to, false))
        .collect();
    let mut seen: BTreeMap<&OsString, usize> = BTreeMap::new();
    for n in &short {
        *seen.entry(n).or_default() += 1;
    }
    rels.iter()
        .zip(&short)
        .map(|(r, n)| {
            if seen[n] > 1 {
                batch_output_name(r, to, true)
            } else {
                n.clone()
            }
        })
        .collect()
}

pub fn convert_tree(a: &ConvertArgs, to: &'static dyn Format, quiet: bool) -> Result<u8> {
    let root = &a.inputs[0];
    let out_root = a
        .output
        .output
        .clone()
        .context("-o OUTDIR is required when converting a directory")?;
    if out_root.as_os_str() == "-" {
        anyhow::bail!("a directory converts into a directory: give -o OUTDIR, not -");
    }
    std::fs::create_dir_all(&out_root)
        .with_context(|| format!("creating {}", out_root.display()))?;
    let canon_out = std::fs::canonicalize(&out_root)?;
    let mut passed = Vec::new();
    let inputs = collect_inputs_skipping(root, Some(&canon_out), &mut passed);
    let names = output_names(root, &inputs, to.id());
    let total_bytes: u64 = inputs.iter().map(|(_, s)| *s).sum();
    let workers = jobs(inputs.len());
    let labels = inputs
        .iter()
        .enumerate()
        .map(|(i, (p, _))| {
            let rel = p.strip_prefix(root).unwrap_or(p);
            format!("{}/{} {}", i + 1, inputs.len(), rel.display())
        })
        .collect();
    let bar = BatchBar::new(progress::bar(total_bytes, quiet), workers, labels);
    let mut results: Vec<(PathBuf, Outcome)> = Vec::new();
    // Independent inputs convert on every core; what each one reports is
    // printed in input order, as one worker would print it.
    let next = AtomicUsize::new(0);
    let (mut started, mut spawn_err) = (0usize, None);
    std::thread::scope(|sc| {
        let (tx, rx) = std::sync::mpsc::channel::<(usize, Outcome, Vec<Diagnostic>)>();
        for slot in 0..workers {
            let (tx, next, bar, inputs, names, out_root) =
                (tx.clone(), &next, &bar, &inputs, &names, &out_root);
            // A worker that cannot be started (out of memory or threads)
            // leaves the inputs to the others; with none, the run fails.
            let spawned = std::thread::Builder::new().spawn_scoped(sc, move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(((path, size), name)) = inputs.get(i).zip(names.get(i)) else {
                    break;
                };
                bar.start_input(slot, i);
                let target = out_root.join(name);
                let dataset = to.dataset().then_some(out_root.as_path());
                let (outcome, diags) =
                    convert_one(a, to, path, &target, (bar, slot, *size), dataset);
                bar.finish_input(slot, *size);
                if tx.send((i, outcome, diags)).is_err() {
                    break;
                }
            });
            match spawned {
                Ok(_) => started += 1,
                Err(e) => spawn_err = Some(e),
            }
        }
        drop(tx);
        let mut pending = BTreeMap::new();
        for (i, outcome, diags) in rx {
            pending.insert(i, (outcome, diags));
            while let Some((outcome, diags)) = pending.remove(&results.len()) {
                let path = &inputs[results.len()].0;
                bar.bar.suspend(|| report_diagnostics(&diags, quiet));
                results.push((
                    path.strip_prefix(root).unwrap_or(path).to_path_buf(),
                    outcome,
                ));
            }
        }
    });
    bar.bar.finish_and_clear();
    if let (0, Some(e)) = (started, spawn_err) {
        anyhow::bail!("cannot start a worker thread: {e}");
    }
    // What the walk met and did not take is listed in its place.
    for (path, o) in passed {
        results.push((path.strip_prefix(root).unwrap_or(&path).to_path_buf(), o));
    }
    results.sort_by(|a, b| a.0.cmp(&b.0));

    let (mut ok, mut salv, mut failed, mut skipped) = (0, 0, 0, 0);
    eprintln!("{:<10} input", "result");
    for (rel, o) in &results {
        let (tag, why) = match o {
            Outcome::Ok => {
                ok += 1;
                ("ok", String::new())
            }
            Outcome::Salvaged(w) => {
                salv += 1;
                ("salvaged", w.clone())
            }
            Outcome::Failed(w) => {
                failed += 1;
                ("failed", w.clone())
            }
            Outcome::Skipped(w) => {
                skipped += 1;
                ("skipped", w.clone())
            }
        };
        let name = shell_quote(rel.as_os_str());
        if why.is_empty() {
            eprintln!("{tag:<10} {name}");
        } else {
            eprintln!("{tag:<10} {name}: {why}");
        }
    }
    eprintln!("{ok} ok, {salv} salvaged, {failed} failed, {skipped} skipped (not a trace, or nothing to write)");
    Ok(if failed > 0 {
        EXIT_BATCH_FAILED
    } else if salv > 0 {
        EXIT_SALVAGED
    } else {
        EXIT_OK
    })
}

/// Inputs converted at once: `POLYTRACE_JOBS` if set (at least 1), else
/// one per core; never more than there are inputs.
fn jobs(inputs: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let want = std::env::var("POLYTRACE_JOBS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(cores);
    want.clamp(1, inputs.max(1))
}

/// Convert one input of the batch; its diagnostics are returned, for the
/// caller to print in input order.
fn convert_one(
    a: &ConvertArgs,
    to: &'static dyn Format,
    path: &Path,
    target: &Path,
    (bar, slot, span): (&Arc<BatchBar>, usize, u64),
    dataset_root: Option<&Path>,
) -> (Outcome, Vec<Diagnostic>) {
    let outcome = |o| (o, Vec::new());
    let input = match Input::resolve(path) {
        Ok(i) => i,
        Err(e) => return outcome(Outcome::Failed(e.to_string())),
    };
    let from = match a.input_args.from {
        Some(id) => formats::get(id),
        None => match formats::detect(&input) {
            Ok(f) => f,
            Err(_) => return outcome(Outcome::Skipped("format not recognised".into())),
        },
    };
    if input.kind == InputKind::Dir && from.id() != FormatId::Ltt {
        return outcome(Outcome::Skipped("directory".into()));
    }
    if let Some(parent) = target.parent().filter(|_| dataset_root.is_none()) {
        if let Err(e) = std::fs::create_dir_all(parent) {
            return outcome(Outcome::Failed(format!("{}: {e}", parent.display())));
        }
    }
    let run = || -> anyhow::Result<pipeline::ConvertOutcome> {
        let src = super::stream::Source { input, fmt: from };
        let st = super::stream::open(
            std::slice::from_ref(&src),
            &[],
            &a.input_args,
            &a.filter,
            &[a.output.at],
        )?;
        let mut wopts = a.output.write_options();
        wopts.at = super::stream::resolve_at(a.output.at, st.start, st.end)?;
        wopts.source = Some(path.display().to_string());
        let reader = progress::ProgressReader::wrap_batch(st.reader, bar, slot, span);
        // A format that writes datasets adds each input's files to one
        // dataset in OUTDIR instead of mirroring the tree.
        let dest = match dataset_root {
            Some(root) => Dest::Dataset { root },
            None => Dest::Path {
                path: target,
                force: a.output.force,
            },
        };
        Ok(pipeline::convert(reader, &st.members, to, dest, &wopts)?)
    };
    match run() {
        Ok(o) => {
            let r = if o.salvaged() {
                let why: Vec<String> = o
                    .diagnostics
                    .iter()
                    .filter(|d| d.severity == crate::Severity::Salvaged)
                    .map(|d| d.msg.clone())
                    .collect();
                Outcome::Salvaged(why.join("; "))
            } else {
                Outcome::Ok
            };
            (r, o.diagnostics)
        }
        // Nothing suits the target (no process data for KPI, an empty
        // window): not a failure of the input, and nothing was written.
        Err(e)
            if matches!(
                e.downcast_ref::<crate::Error>(),
                Some(crate::Error::NothingToWrite { .. })
            ) =>
        {
            outcome(Outcome::Skipped(format!("{e:#}")))
        }
        Err(e) => outcome(Outcome::Failed(format!("{e:#}"))),
    }
}

/// A name as `ls --quoting-style=shell-escape` prints it: as it is when it
/// holds only characters safe in a shell word, else in single quotes, with
/// control characters and bytes that are not UTF-8 as `'$'\n''`,
/// `'$'\377''`: one entry per line whatever the name holds.
fn shell_quote(name: &std::ffi::OsStr) -> String {
    let b = name.as_encoded_bytes();
    let safe = |c: u8| c.is_ascii_alphanumeric() || b"%+,-./:=@_^".contains(&c);
    if !b.is_empty() && b.iter().all(|&c| safe(c)) {
        return String::from_utf8_lossy(b).into_owned();
    }
    let mut out = String::from("'");
    let mut rest = b;
    // Valid UTF-8 runs are kept; everything else is escaped byte by byte.
    while !rest.is_empty() {
        let (good, bad) = match std::str::from_utf8(rest) {
            Ok(s) => (s, &rest[rest.len()..]),
            Err(e) => {
                let (g, b) = rest.split_at(e.valid_up_to());
                (std::str::from_utf8(g).unwrap_or_default(), b)
            }
        };
        for ch in good.chars() {
            match ch {
                '\'' => out.push_str("'\\''"),
                c if c.is_control() => {
                    let mut buf = [0u8; 4];
                    out.push_str("'$'");
                    for byte in c.encode_utf8(&mut buf).bytes() {
                        match byte {
                            b'\n' => out.push_str("\\n"),
                            b'\t' => out.push_str("\\t"),
                            b'\r' => out.push_str("\\r"),
                            x => out.push_str(&format!("\\{x:03o}")),
                        }
                    }
                    out.push_str("''");
                }
                c => out.push(c),
            }
        }
        match bad.split_first() {
            Some((&byte, tail)) => {
                out.push_str(&format!("'$'\\{byte:03o}''"));
                rest = tail;
            }
            None => rest = bad,
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::shell_quote;
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn names_are_quoted_as_ls_shell_escape_does() {
        assert_eq!(shell_quote(OsStr::new("a/b.dlt")), "a/b.dlt");
        assert_eq!(shell_quote(OsStr::new("a b")), "'a b'");
        assert_eq!(shell_quote(OsStr::new("a\nb")), "'a'$'\\n''b'");
        assert_eq!(shell_quote(OsStr::new("it's")), "'it'\\''s'");
        assert_eq!(shell_quote(OsStr::from_bytes(b"x\xffy")), "'x'$'\\377''y'");
    }
}
