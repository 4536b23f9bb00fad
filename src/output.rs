//! Atomic output: everything is written into a staging directory beside the
//! target and renamed into place on commit. Inputs are never overwritten.
//! Staging is removed when dropped, when a signal ends the process
//! (`crate::cleanup`), and by the next run of the same target if a run that
//! no longer exists left it behind.

use crate::error::{Error, Result};
use std::ffi::{OsStr, OsString};
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
    name: OsString,
    parent: PathBuf,
    force: bool,
    /// The output's format name, for the manifest of a directory output.
    kind: String,
    protected: Vec<PathBuf>,
    committed: bool,
    /// Parent directories this output created (`-o new/sub/out`), deepest
    /// first: removed again, if still empty, when nothing is committed.
    created: Vec<PathBuf>,
    /// Descriptors held for the removal of the staging: a run that fails
    /// for want of descriptors (EMFILE) still has them to remove it with.
    spare: Vec<std::fs::File>,
}

/// Descriptors [`Staged`] keeps aside: `remove_dir_all` needs one per
/// level of the staged tree.
const SPARE_FDS: usize = 4;

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

/// The sidecar beside a directory output that marks it as polytrace's own:
/// `--force` replaces a directory only when this names the same format and
/// the directory holds nothing the sidecar does not list. Beside the
/// directory rather than in it, so the trace itself stays exactly what its
/// format's readers expect.
pub fn manifest_name(name: &OsStr) -> OsString {
    sidecar(name, ".manifest.polytrace")
}

fn sidecar(name: &OsStr, suffix: &str) -> OsString {
    let mut s = OsString::from(".");
    s.push(name);
    s.push(suffix);
    s
}

/// The lock file beside an output, held while a commit moves files in.
pub fn lock_name(name: &OsStr) -> OsString {
    sidecar(name, ".lock.polytrace")
}

/// True for the files polytrace keeps beside its outputs (manifests,
/// locks): never inputs of a batch.
pub fn is_own_sidecar(name: &OsStr) -> bool {
    let n = name.as_encoded_bytes();
    n.starts_with(b".") && (n.ends_with(b".manifest.polytrace") || n.ends_with(b".lock.polytrace"))
}

fn file_id(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

/// The same file: same device and inode (a hard link or a symlink to an
/// input is that input).
fn same_file(a: &Path, b: &Path) -> bool {
    match (file_id(a), file_id(b)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// `dir` is `input` or one of its ancestors.
fn holds(dir: &Path, input: &Path) -> bool {
    match (std::fs::canonicalize(dir), std::fs::canonicalize(input)) {
        (Ok(d), Ok(i)) => i.starts_with(&d),
        _ => false,
    }
}

/// What a FIFO, character device, block device or socket is called, for
/// the messages that refuse to replace it.
fn node_kind(ft: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_fifo() {
        Some("a FIFO")
    } else if ft.is_char_device() {
        Some("a character device")
    } else if ft.is_block_device() {
        Some("a block device")
    } else if ft.is_socket() {
        Some("a socket")
    } else {
        None
    }
}

/// A FIFO or character device at `path`: a single-file text output is
/// written into it, as a shell's `>` would (see `pipeline::convert`).
pub fn is_stream_node(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path)
        .map(|m| m.file_type().is_fifo() || m.file_type().is_char_device())
        .unwrap_or(false)
}

/// Every entry under `dir`, relative, `/`-separated; None for a name that
/// is not UTF-8 (polytrace never writes one).
fn tree_listing(dir: &Path) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(dir).min_depth(1).sort_by_file_name() {
        let e = e.ok()?;
        let rel = e.path().strip_prefix(dir).ok()?.to_str()?;
        if rel.contains('\n') {
            return None;
        }
        out.push(rel.to_string());
    }
    Some(out)
}

/// The manifest of a directory output polytrace wrote: its format, the
/// directory's inode, and every entry in it.
fn write_manifest(path: &Path, dir: &Path, kind: &str) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(dir)?;
    let mut text = format!("polytrace output {kind}\ninode {} {}\n", md.dev(), md.ino());
    for rel in tree_listing(dir).unwrap_or_default() {
        text.push_str(&rel);
        text.push('\n');
    }
    std::fs::write(path, text)
}

/// Why the directory `dir` is not a previous `kind` output polytrace may
/// replace, or None when it is one.
fn not_our_output(dir: &Path, name: &OsStr, kind: &str) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
    let manifest = parent.unwrap_or(Path::new(".")).join(manifest_name(name));
    let foreign = || {
        format!("is a directory polytrace did not write (--force replaces only a previous {kind} output)")
    };
    let Ok(text) = std::fs::read_to_string(&manifest) else {
        return Some(foreign());
    };
    let mut lines = text.lines();
    let Some(k) = lines
        .next()
        .and_then(|l| l.strip_prefix("polytrace output "))
    else {
        return Some(foreign());
    };
    let md = std::fs::symlink_metadata(dir).ok()?;
    let ino = format!("inode {} {}", md.dev(), md.ino());
    if lines.next() != Some(ino.as_str()) {
        return Some(foreign());
    }
    if k != kind {
        return Some(format!(
            "is a previous {k} output, not {kind}: --force replaces only an output of the same kind"
        ));
    }
    let listed: std::collections::HashSet<&str> = lines.collect();
    let Some(now) = tree_listing(dir) else {
        return Some("holds a name polytrace never writes: not replaced".into());
    };
    if let Some(extra) = now.iter().find(|r| !listed.contains(r.as_str())) {
        return Some(format!(
            "holds {extra}, which polytrace did not write there: not replaced"
        ));
    }
    None
}

/// May `dst` be replaced by an output of format `kind`? The rules of
/// `--force`: a regular file or a symbolic link (the link, not what it
/// points to), or a directory that is a previous output of the same kind
/// holding only what polytrace wrote; never an input, a directory holding
/// one, a FIFO or a device.
fn check_dst(dst: &Path, protected: &[PathBuf], force: bool, kind: &str) -> Result<()> {
    let refuse = |msg: String| {
        Err(Error::Output {
            path: dst.to_path_buf(),
            msg,
        })
    };
    let md = match std::fs::symlink_metadata(dst) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(dst, e)),
    };
    if protected.iter().any(|i| same_file(i, dst)) {
        return refuse("refusing to overwrite an input".into());
    }
    let ft = md.file_type();
    if ft.is_symlink() {
        if !force {
            let what = if std::fs::metadata(dst).is_err() {
                "a dangling symbolic link"
            } else {
                "a symbolic link"
            };
            return refuse(format!("exists ({what}; use --force to replace the link)"));
        }
        return Ok(());
    }
    if let Some(node) = node_kind(&ft) {
        return refuse(format!(
            "is {node}: polytrace writes into a FIFO or character device only a single-file text output, and never replaces one"
        ));
    }
    if !force {
        return refuse("exists (use --force to replace it)".into());
    }
    if ft.is_file() {
        return Ok(());
    }
    if let Some(i) = protected.iter().find(|i| holds(dst, i)) {
        return refuse(format!(
            "holds the input {}: --force never replaces it",
            i.display()
        ));
    }
    match not_our_output(dst, dst.file_name().unwrap_or_default(), kind) {
        Some(why) => refuse(why),
        None => Ok(()),
    }
}

/// An exclusive lock on an output name: a file beside it, locked with
/// flock(2) and removed by its holder. Two runs that commit to one name
/// take turns, so each run's members are moved in together.
struct OutputLock {
    path: PathBuf,
    _file: std::fs::File,
}

impl OutputLock {
    fn acquire(parent: &Path, name: &OsStr, target: &Path) -> Result<OutputLock> {
        use std::io::{Read, Write};
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        use std::os::unix::io::AsRawFd;
        let path = parent.join(lock_name(name));
        let err = |e: std::io::Error| Error::Output {
            path: target.to_path_buf(),
            msg: format!("cannot lock {}: {}", path.display(), e),
        };
        let mut told = false;
        loop {
            let mut f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)
                .map_err(err)?;
            let fd = f.as_raw_fd();
            // SAFETY: flock on a descriptor we own.
            if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                    return Err(err(e));
                }
                if !told {
                    let mut pid = String::new();
                    let _ = f.read_to_string(&mut pid);
                    eprintln!(
                        "polytrace: {} is being written by pid {}; waiting",
                        target.display(),
                        pid.trim()
                    );
                    told = true;
                }
                loop {
                    // SAFETY: as above; blocks until the holder is done.
                    if unsafe { libc::flock(fd, libc::LOCK_EX) } == 0 {
                        break;
                    }
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(err(e));
                    }
                }
            }
            // The holder before us removed the file it locked: ours is
            // then a lock on a name nobody else sees. Try again.
            let mine = f.metadata().map_err(err)?;
            match std::fs::symlink_metadata(&path) {
                Ok(m) if m.dev() == mine.dev() && m.ino() == mine.ino() => {
                    let _ = f.set_len(0);
                    let _ = write!(f, "{}", std::process::id());
                    return Ok(OutputLock { path, _file: f });
                }
                _ => continue,
            }
        }
    }
}

impl Drop for OutputLock {
    fn drop(&mut self) {
        // Removed while still locked; the descriptor closes after.
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Staged {
    /// Prepare to write `target`, an output of format `kind` (its name),
    /// refusing to ever replace any of `inputs` or what `--force` may not
    /// replace (see [`check_dst`]).
    pub fn new(target: &Path, inputs: &[PathBuf], force: bool, kind: &str) -> Result<Staged> {
        // Kept as bytes: a name that is not UTF-8 is written as it is.
        let name = target
            .file_name()
            .ok_or_else(|| Error::Output {
                path: target.to_path_buf(),
                msg: "output needs a file name".into(),
            })?
            .to_os_string();
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
        check_dst(target, &protected, force, kind)?;
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
        let spare = (0..SPARE_FDS)
            .map(|_| std::fs::File::open(&parent))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| {
                remove_empty(&created);
                Error::Output {
                    path: target.to_path_buf(),
                    msg: format!(
                        "cannot write in {}: {}",
                        parent.display(),
                        bare_os_error(&e)
                    ),
                }
            })?;
        for gone in crate::cleanup::remove_stale(&parent, &name) {
            eprintln!(
                "polytrace: removed {}, left by a run that no longer exists",
                gone.display()
            );
        }
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
            kind: kind.to_string(),
            protected,
            committed: false,
            created,
            spare,
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

    /// Move everything written into place, under the output's lock.
    /// Returns the final paths.
    pub fn commit(mut self) -> Result<Vec<PathBuf>> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&self.stage_dir)
            .map_err(|e| Error::io(&self.stage_dir, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        // A directory output gets its manifest, moved in after it.
        let mut manifests = Vec::new();
        for src in &entries {
            if src.is_dir() {
                let m = self
                    .stage_dir
                    .join(manifest_name(src.file_name().unwrap_or_default()));
                write_manifest(&m, src, &self.kind).map_err(|e| Error::io(&m, e))?;
                manifests.push(m);
            }
        }
        let target = self.parent.join(&self.name);
        let _lock = OutputLock::acquire(&self.parent, &self.name, &target)?;
        // Check every destination first so a refusal leaves nothing half-moved.
        let mut moves = Vec::new();
        for src in entries {
            let dst = self.parent.join(src.file_name().unwrap_or_default());
            check_dst(&dst, &self.protected, self.force, &self.kind)?;
            moves.push((src, dst));
        }
        for m in manifests {
            let dst = self.parent.join(m.file_name().unwrap_or_default());
            moves.push((m, dst));
        }
        let mut done = Vec::new();
        // A signal now waits until every file is in place.
        let mut live = crate::cleanup::hold();
        for (n, (src, dst)) in moves.into_iter().enumerate() {
            let is_own_manifest = src
                .file_name()
                .is_some_and(|f| f.to_string_lossy().ends_with(".manifest.polytrace"));
            let there = std::fs::symlink_metadata(&dst).ok();
            if there.is_some_and(|m| m.is_dir() || src.is_dir()) {
                // rename() cannot replace a non-empty directory, nor a
                // file or link by a directory: move it aside first (into
                // the staging, removed below).
                let aside = self.stage_dir.join(format!(".replaced-{n}"));
                std::fs::rename(&dst, &aside).map_err(|e| Error::io(&dst, e))?;
            }
            std::fs::rename(&src, &dst).map_err(|e| Error::io(&dst, e))?;
            if !is_own_manifest {
                done.push(dst);
            }
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

/// Standard output sent into a file for as long as this lives: a text
/// writer that streams to stdout streams into a FIFO or device the same way.
pub struct StdoutTo {
    saved: libc::c_int,
}

impl StdoutTo {
    pub fn redirect(f: &std::fs::File) -> std::io::Result<StdoutTo> {
        use std::io::Write;
        use std::os::unix::io::AsRawFd;
        std::io::stdout().flush()?;
        // SAFETY: dup/dup2 on descriptors we hold; the saved one is
        // restored and closed on drop.
        unsafe {
            let saved = libc::dup(1);
            if saved < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::dup2(f.as_raw_fd(), 1) < 0 {
                let e = std::io::Error::last_os_error();
                libc::close(saved);
                return Err(e);
            }
            Ok(StdoutTo { saved })
        }
    }
}

impl Drop for StdoutTo {
    fn drop(&mut self) {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        // SAFETY: puts back the descriptor saved in `redirect`.
        unsafe {
            libc::dup2(self.saved, 1);
            libc::close(self.saved);
        }
    }
}

fn remove_empty(dirs: &[PathBuf]) {
    for d in dirs {
        // Fails, as wanted, once anything else is in there.
        let _ = std::fs::remove_dir(d);
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        self.spare.clear();
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
        let s = Staged::new(&target, &[], false, "kpi").unwrap();
        std::fs::write(s.path(), b"x").unwrap();
        assert!(!target.exists());
        s.commit().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"x");
        // Dropped without commit: nothing appears, nothing is left behind.
        let other = dir.path().join("other.kpi");
        let s = Staged::new(&other, &[], false, "kpi").unwrap();
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
        let s = Staged::new(
            &dir.path().join("a"),
            std::slice::from_ref(&input),
            true,
            "pcp",
        )
        .unwrap();
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
