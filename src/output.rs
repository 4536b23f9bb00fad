//! Atomic output: everything is written into a staging directory beside the
//! target and renamed into place on commit. Inputs are never overwritten.
//! Staging is removed when dropped, when a signal ends the process
//! (`crate::cleanup`), and by the next run of the same target if a run that
//! no longer exists left it behind.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// Where a writer writes.
#[derive(Debug, Clone)]
pub enum OutTarget {
    /// A path inside a staging directory. A single-file format writes a file
    /// at exactly this path; a directory format creates a directory there; a
    /// PCP archive treats it as the base name (`path.meta`, `path.0`, …).
    Path(PathBuf),
    /// Standard output (text formats only).
    Stdout,
}

/// A staging area for one output. Dropped without `commit`, it is removed.
#[derive(Debug)]
pub struct Staged {
    stage_dir: PathBuf,
    name: String,
    parent: PathBuf,
    force: bool,
    protected: Vec<PathBuf>,
    committed: bool,
    /// Parent directories this output created (`-o new/sub/out`), deepest
    /// first: removed again, if still empty, when nothing is committed.
    created: Vec<PathBuf>,
}

/// Create `dir` and its missing ancestors; return the ones created, deepest first.
fn create_parents(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut missing = Vec::new();
    let mut d = dir;
    while !d.as_os_str().is_empty() && !d.exists() {
        missing.push(d.to_path_buf());
        match d.parent() {
            Some(p) => d = p,
            None => break,
        }
    }
    std::fs::create_dir_all(dir)?;
    Ok(missing)
}

/// An OS error without the path text `tempfile` appends to it ("… at path
/// \"dir/.x.polytrace-AbC\""): the hidden staging name means nothing to the
/// user, who is told the target instead. `tempfile` keeps the original error
/// out of reach, so its text is cut.
fn bare_os_error(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.rsplit_once(" at path ") {
        Some((head, _)) => head.to_string(),
        None => s,
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

impl Staged {
    /// Prepare to write `target`, refusing to ever replace any of `inputs`.
    pub fn new(target: &Path, inputs: &[PathBuf], force: bool) -> Result<Staged> {
        let name = target
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| Error::Output {
                path: target.to_path_buf(),
                msg: "output needs a file name".into(),
            })?
            .to_string();
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if parent.exists() && !parent.is_dir() {
            return Err(Error::Output {
                path: target.to_path_buf(),
                msg: format!("{} is not a directory", parent.display()),
            });
        }
        let protected: Vec<PathBuf> = inputs.to_vec();
        if protected.iter().any(|i| same_file(i, target)) {
            return Err(Error::Output {
                path: target.to_path_buf(),
                msg: "refusing to overwrite an input".into(),
            });
        }
        if target.exists() && !force {
            return Err(Error::Output {
                path: target.to_path_buf(),
                msg: "exists (use --force to replace it)".into(),
            });
        }
        // Like `mkdir -p`: missing parents are created (and removed again
        // if this output is never committed).
        let created = create_parents(&parent).map_err(|e| Error::Output {
            path: target.to_path_buf(),
            msg: format!(
                "cannot create directory {}: {}",
                parent.display(),
                bare_os_error(&e)
            ),
        })?;
        crate::cleanup::remove_stale(&parent, &name);
        let stage_dir = match crate::cleanup::register_new(|| {
            tempfile::Builder::new()
                .prefix(&crate::cleanup::stage_prefix_for_us(&name))
                .tempdir_in(&parent)
                .map(|d| d.keep())
        }) {
            Ok(d) => d,
            Err(e) => {
                remove_empty(&created);
                return Err(Error::Output {
                    path: target.to_path_buf(),
                    msg: format!(
                        "cannot write in {}: {}",
                        parent.display(),
                        bare_os_error(&e)
                    ),
                });
            }
        };
        Ok(Staged {
            stage_dir,
            name,
            parent,
            force,
            protected,
            committed: false,
            created,
        })
    }

    /// The path the writer should write to (see [`OutTarget::Path`]).
    pub fn path(&self) -> PathBuf {
        self.stage_dir.join(&self.name)
    }

    /// An error a writer met inside the staging directory, told with the
    /// path the user asked for (the staging name is an internal detail).
    pub fn relabel(&self, e: Error) -> Error {
        let fix = |p: PathBuf| match p.strip_prefix(&self.stage_dir) {
            Ok(rel) => self.parent.join(rel),
            Err(_) => p,
        };
        match e {
            Error::Io { path, source } => Error::Io {
                path: fix(path),
                source,
            },
            Error::Output { path, msg } => Error::Output {
                path: fix(path),
                msg,
            },
            other => other,
        }
    }

    /// Bytes written into the staging area so far (what buffered writers
    /// have not flushed yet is not counted).
    pub fn written_bytes(&self) -> u64 {
        fn walk(p: &Path) -> u64 {
            let Ok(rd) = std::fs::read_dir(p) else {
                return 0;
            };
            rd.filter_map(|e| e.ok())
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => walk(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        }
        walk(&self.stage_dir)
    }

    /// Move everything written into place. Returns the final paths.
    pub fn commit(mut self) -> Result<Vec<PathBuf>> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&self.stage_dir)
            .map_err(|e| Error::io(&self.stage_dir, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        // Check every destination first so a refusal leaves nothing half-moved.
        let mut moves = Vec::new();
        for src in entries {
            let dst = self.parent.join(src.file_name().unwrap_or_default());
            if self.protected.iter().any(|i| same_file(i, &dst)) {
                return Err(Error::Output {
                    path: dst,
                    msg: "refusing to overwrite an input".into(),
                });
            }
            if dst.exists() && !self.force {
                return Err(Error::Output {
                    path: dst,
                    msg: "exists (use --force to replace it)".into(),
                });
            }
            moves.push((src, dst));
        }
        let mut done = Vec::new();
        // A signal now waits until every file is in place.
        let mut live = crate::cleanup::hold();
        for (src, dst) in moves {
            if dst.is_dir() && !dst.is_symlink() {
                // rename() cannot replace a non-empty directory: move it aside first.
                let aside = self.stage_dir.join(".replaced");
                std::fs::rename(&dst, &aside).map_err(|e| Error::io(&dst, e))?;
            }
            std::fs::rename(&src, &dst).map_err(|e| Error::io(&dst, e))?;
            done.push(dst);
        }
        self.committed = true;
        let _ = std::fs::remove_dir_all(&self.stage_dir);
        live.retain(|p| p != &self.stage_dir);
        Ok(done)
    }
}

/// The files under `dir`, relative to it, sorted.
fn files_under(dir: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir.join(rel))?
        .filter_map(|e| e.ok())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let r = rel.join(e.file_name());
        if e.file_type()?.is_dir() {
            files_under(dir, &r, out)?;
        } else {
            out.push(r);
        }
    }
    Ok(())
}

impl Staged {
    /// Add what was staged to the dataset `root`: a file staged as
    /// `samples/host=H/date=D/part.parquet` becomes
    /// `ROOT/host=H/date=D/part-N.parquet`, one staged under `events/`
    /// the same under `ROOT.events/`, N the first number free there. A
    /// file is linked into place only where no file is (link(2) refuses
    /// an existing name), so nothing of the dataset is ever replaced; if
    /// one link fails, those made before it are removed again.
    pub fn commit_dataset(mut self, root: &Path) -> Result<Vec<PathBuf>> {
        let mut files = Vec::new();
        files_under(&self.path(), Path::new(""), &mut files)
            .map_err(|e| Error::io(&self.stage_dir, e))?;
        let root_name = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "dataset".into());
        let events_root = root.with_file_name(format!("{root_name}.events"));
        let mut done: Vec<PathBuf> = Vec::new();
        let mut live = crate::cleanup::hold();
        let undo = |done: &[PathBuf]| {
            for d in done {
                let _ = std::fs::remove_file(d);
            }
        };
        for rel in files {
            let mut parts = rel.components();
            let table = parts.next().map(|c| c.as_os_str().to_owned());
            let rest: PathBuf = parts.collect();
            let base = match table.as_deref().and_then(|t| t.to_str()) {
                Some("samples") => root.to_path_buf(),
                Some("events") => events_root.clone(),
                _ => continue,
            };
            let dir = base.join(rest.parent().unwrap_or(Path::new("")));
            if let Err(e) = std::fs::create_dir_all(&dir) {
                undo(&done);
                return Err(Error::io(&dir, e));
            }
            let src = self.path().join(&rel);
            let mut n = next_part_number(&dir);
            loop {
                let dst = dir.join(format!("part-{n}.parquet"));
                match std::fs::hard_link(&src, &dst) {
                    Ok(()) => {
                        done.push(dst);
                        break;
                    }
                    // Taken meanwhile (another run adding to the dataset).
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
                    Err(e) => {
                        undo(&done);
                        return Err(Error::io(&dst, e));
                    }
                }
            }
        }
        self.committed = true;
        let _ = std::fs::remove_dir_all(&self.stage_dir);
        live.retain(|p| p != &self.stage_dir);
        Ok(done)
    }
}

/// One more than the highest `part-N.parquet` in `dir` (0 if none).
fn next_part_number(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let n = e.file_name();
                    let n = n.to_str()?;
                    n.strip_prefix("part-")?
                        .strip_suffix(".parquet")?
                        .parse::<u64>()
                        .ok()
                })
                .map(|n| n + 1)
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

fn remove_empty(dirs: &[PathBuf]) {
    for d in dirs {
        // Fails, as wanted, once anything else is in there.
        let _ = std::fs::remove_dir(d);
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.stage_dir);
            crate::cleanup::unregister(&self.stage_dir);
            remove_empty(&self.created);
        }
    }
}

/// Bytes a [`ChunkedWriter`] writes at a time.
pub const CHUNK: usize = 256 << 10;

/// A buffered writer for a large output file: the bytes go out in whole
/// chunks of [`CHUNK`] bytes, at multiples of the chunk from where writing
/// started (offset 0 of a new file), so that every write but the last
/// covers whole pages and there are few of them. Through a 64 kB
/// `BufWriter`, writes end wherever the next record did not fit: the page
/// a write ends in is left for the next one to complete, and the page
/// cache takes the data in smaller pieces. x167.dlt -> PCP (266 MB) on one
/// thread: CPU 0.62 -> 0.56 s, system time 0.15 -> 0.08 s, 1,019 writes
/// instead of 4,348. 1 MB chunks measured worse on this machine class:
/// every other run spent 0.3-0.5 s of system time copying into the page
/// cache.
///
/// Like `BufWriter`, what is buffered is written by `flush` and, errors
/// ignored, when it is dropped.
pub struct ChunkedWriter<W: std::io::Write> {
    inner: W,
    buf: Vec<u8>,
}

impl<W: std::io::Write> ChunkedWriter<W> {
    pub fn new(inner: W) -> ChunkedWriter<W> {
        ChunkedWriter {
            inner,
            // Its pages are taken only as it fills.
            buf: Vec::with_capacity(CHUNK),
        }
    }

    /// The writer underneath, for what comes after the stream (a label
    /// rewritten at offset 0): `flush` first.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    /// Write what is buffered and give the buffer's memory back, for a
    /// file that is done but for what comes after the stream (a PCP
    /// volume before the next one: every volume stays open to the end).
    /// A later write takes a buffer again.
    pub fn park(&mut self) -> std::io::Result<()> {
        self.write_buf()?;
        self.buf = Vec::new();
        Ok(())
    }

    /// Bytes the buffer holds room for (0 once parked).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    fn write_buf(&mut self) -> std::io::Result<()> {
        if !self.buf.is_empty() {
            self.inner.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// `write_all` of bytes that fill the chunk (or more).
    #[cold]
    fn write_across(&mut self, mut b: &[u8]) -> std::io::Result<()> {
        if self.buf.capacity() < CHUNK {
            self.buf.reserve_exact(CHUNK - self.buf.len());
        }
        while !b.is_empty() {
            let n = (CHUNK - self.buf.len()).min(b.len());
            self.buf.extend_from_slice(&b[..n]);
            b = &b[n..];
            if self.buf.len() == CHUNK {
                self.write_buf()?;
            }
        }
        Ok(())
    }
}

impl<W: std::io::Write> std::io::Write for ChunkedWriter<W> {
    #[inline]
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.write_all(b)?;
        Ok(b.len())
    }

    #[inline]
    fn write_all(&mut self, b: &[u8]) -> std::io::Result<()> {
        // Most writes are small and leave the chunk short of full.
        if b.len() < CHUNK - self.buf.len() {
            self.buf.extend_from_slice(b);
            return Ok(());
        }
        self.write_across(b)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.write_buf()?;
        self.inner.flush()
    }
}

impl<W: std::io::Write> Drop for ChunkedWriter<W> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = self.write_buf();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staged_output_appears_only_on_commit() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.kpi");
        let s = Staged::new(&target, &[], false).unwrap();
        std::fs::write(s.path(), b"x").unwrap();
        assert!(!target.exists());
        s.commit().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"x");
        // Dropped without commit: nothing appears, nothing is left behind.
        let other = dir.path().join("other.kpi");
        let s = Staged::new(&other, &[], false).unwrap();
        std::fs::write(s.path(), b"y").unwrap();
        drop(s);
        assert!(!other.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn archive_members_are_all_checked_against_inputs() {
        // A PCP writer writes base.meta, base.0, base.index: each is checked.
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("a.meta");
        std::fs::write(&input, b"in").unwrap();
        let s = Staged::new(&dir.path().join("a"), std::slice::from_ref(&input), true).unwrap();
        std::fs::write(s.path().with_extension("meta"), b"out").unwrap();
        let err = s.commit().unwrap_err().to_string();
        assert!(err.contains("refusing to overwrite an input"), "{err}");
        assert_eq!(std::fs::read(&input).unwrap(), b"in");
    }
}

#[cfg(test)]
mod chunked_tests {
    use super::*;
    use std::io::Write;

    /// Keeps the length of every write it gets.
    #[derive(Default)]
    struct Calls {
        bytes: Vec<u8>,
        writes: Vec<usize>,
        flushes: usize,
    }
    impl Write for &mut Calls {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.bytes.extend_from_slice(b);
            self.writes.push(b.len());
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            self.flushes += 1;
            Ok(())
        }
    }

    /// Pieces of every length against the chunk (empty, filling it to its
    /// end, several chunks long, a byte) come out in order, in writes of a
    /// whole chunk each but the one that `flush` makes; what is left when
    /// the writer is dropped is written too, and so is what `park` leaves.
    #[test]
    fn writes_are_whole_chunks_and_keep_every_byte() {
        let mut rng = crate::model::TestRng(0xc0ffee);
        for case in 0..20 {
            let mut calls = Calls::default();
            let mut want = Vec::new();
            let mut parked = false;
            {
                let mut w = ChunkedWriter::new(&mut calls);
                for _ in 0..60 {
                    let n = match rng.below(6) {
                        0 => 0,
                        1 => CHUNK - want.len() % CHUNK,
                        2 => 3 * CHUNK + rng.below(50) as usize,
                        3 => 1,
                        _ => rng.below(9000) as usize,
                    };
                    let piece: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                    if rng.below(2) == 0 {
                        w.write_all(&piece).unwrap();
                    } else {
                        assert_eq!(w.write(&piece).unwrap(), n);
                    }
                    want.extend_from_slice(&piece);
                    if rng.below(20) == 0 {
                        // Parked: all written, the buffer let go, and
                        // writing goes on (not in whole chunks then).
                        w.park().unwrap();
                        assert_eq!(w.buf.capacity(), 0);
                        parked = true;
                    }
                }
                if case % 2 == 0 {
                    w.flush().unwrap();
                }
            }
            assert!(calls.bytes == want, "case {case}: bytes");
            let (last, whole) = calls.writes.split_last().unwrap();
            if !parked {
                assert!(whole.iter().all(|&n| n == CHUNK), "case {case}: {whole:?}");
            }
            assert!(*last <= CHUNK && *last > 0, "case {case}");
            assert_eq!(calls.flushes, (case % 2 == 0) as usize, "case {case}");
        }
    }
}
