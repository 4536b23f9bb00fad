//! Inputs: a file, a directory, a PCP archive base name, or `-` (stdin).

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub mod map;
pub use map::Bytes;

/// Bytes kept from the start of an input for content detection.
pub const PROBE_LEN: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputKind {
    Stdin,
    File,
    Dir,
    /// A PCP archive named by its base (no file of that exact name exists,
    /// but `base.meta`, `base.0`, … do, possibly compressed).
    ArchiveBase,
}

/// A resolved input plus the first bytes of it for detection.
#[derive(Debug, Clone)]
pub struct Input {
    /// As given on the command line; `<stdin>` for `-`, as messages name it.
    pub path: PathBuf,
    pub kind: InputKind,
    /// First bytes of the file (empty for directories, archive bases and stdin
    /// until read).
    pub probe: Vec<u8>,
    /// Stdin copied whole into a temporary file ([`Input::spool_stdin`]), so
    /// that readers which seek, read twice or need the length read it as a
    /// file. Removed when the last clone is dropped.
    pub spool: Option<Arc<tempfile::NamedTempFile>>,
}

/// File name suffixes of compressed PCP archive members, as libpcp knows them.
pub const COMPRESSED_SUFFIXES: [&str; 7] = [".xz", ".lzma", ".bz2", ".bz", ".gz", ".Z", ".z"];

impl Input {
    pub fn resolve(path: &Path) -> Result<Input> {
        if path.as_os_str() == "-" {
            // Keep the first bytes for detection; open_stream replays them.
            let probe = probe_stdin().map_err(|e| Error::io("<stdin>", e))?;
            return Ok(Input {
                path: PathBuf::from("<stdin>"),
                kind: InputKind::Stdin,
                probe,
                spool: None,
            });
        }
        match std::fs::metadata(path) {
            Ok(md) if md.is_dir() => Ok(Input {
                path: path.to_path_buf(),
                kind: InputKind::Dir,
                probe: Vec::new(),
                spool: None,
            }),
            // A FIFO, `<(…)` or a device reads once: it is copied whole
            // into a temporary file on that one read, and read from there
            // as spooled stdin is (detection from the first bytes).
            Ok(md) if !md.is_file() => {
                let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
                let mut input = Input {
                    path: path.to_path_buf(),
                    kind: InputKind::Stdin,
                    probe: Vec::new(),
                    spool: None,
                };
                input.spool_from(&mut f)?;
                let mut probe = Vec::with_capacity(PROBE_LEN);
                input
                    .open_stream()?
                    .take(PROBE_LEN as u64)
                    .read_to_end(&mut probe)
                    .map_err(|e| Error::io(path, e))?;
                input.probe = probe;
                Ok(input)
            }
            Ok(_) => {
                let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
                let mut probe = Vec::with_capacity(PROBE_LEN);
                (&mut f)
                    .take(PROBE_LEN as u64)
                    .read_to_end(&mut probe)
                    .map_err(|e| Error::io(path, e))?;
                Ok(Input {
                    path: path.to_path_buf(),
                    kind: InputKind::File,
                    probe,
                    spool: None,
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if archive_members(path).is_empty() {
                    Err(Error::io(path, not_found(path, e)))
                } else {
                    Ok(Input {
                        path: path.to_path_buf(),
                        kind: InputKind::ArchiveBase,
                        probe: Vec::new(),
                        spool: None,
                    })
                }
            }
            Err(e) => Err(Error::io(path, e)),
        }
    }

    /// Display name for messages (`<stdin>` for `-`).
    pub fn name(&self) -> String {
        self.path.display().to_string()
    }

    /// Copy a stream that can be read only once into a temporary file, the
    /// probe first.
    fn spool_from(&mut self, src: &mut dyn Read) -> Result<()> {
        let name = self.name();
        let fail = |e: std::io::Error| {
            Error::io(
                &name,
                std::io::Error::new(e.kind(), format!("copying to a temporary file: {e}")),
            )
        };
        let mut tmp = tempfile::Builder::new()
            .prefix("polytrace-stdin-")
            .tempfile()
            .map_err(fail)?;
        {
            let mut w = std::io::BufWriter::with_capacity(1 << 16, tmp.as_file_mut());
            std::io::Write::write_all(&mut w, &self.probe).map_err(fail)?;
            std::io::copy(src, &mut w).map_err(fail)?;
            std::io::Write::flush(&mut w).map_err(fail)?;
        }
        self.spool = Some(Arc::new(tmp));
        Ok(())
    }

    /// Copy all of stdin (the probe, then the rest) into a temporary file in
    /// `$TMPDIR`. Afterwards [`Input::file`] names it and [`Input::open_stream`]
    /// reads it, so a reader that needs a seekable file or the file length
    /// reads stdin exactly as it would read the same bytes from a file.
    pub fn spool_stdin(&mut self) -> Result<()> {
        if self.kind != InputKind::Stdin || self.spool.is_some() {
            return Ok(());
        }
        self.spool_from(&mut std::io::stdin().lock())
    }

    /// The file on disk that holds this input's bytes: the file itself, or
    /// the temporary copy of stdin. None for directories, archive base names
    /// and stdin that is read as a stream.
    pub fn file(&self) -> Option<&Path> {
        match (&self.kind, &self.spool) {
            (InputKind::File, _) => Some(&self.path),
            (InputKind::Stdin, Some(s)) => Some(s.path()),
            _ => None,
        }
    }

    /// The whole input as bytes, at most `max` of them: a file (or spooled
    /// stdin) is memory-mapped where that is safe ([`map::read_file`]),
    /// stdin read as a stream is copied. Directories and archive base names
    /// are not single files: `what` says what the format wants instead.
    pub fn bytes(&self, max: u64, what: &str) -> Result<Bytes> {
        if let Some(file) = self.file() {
            return map::read_file(file, Path::new(&self.name()), max);
        }
        if self.kind != InputKind::Stdin {
            return Err(Error::Usage(format!("{}: {what}", self.name())));
        }
        let mut v = Vec::new();
        self.open_stream()?
            .take(max.saturating_add(1))
            .read_to_end(&mut v)
            .map_err(|e| Error::io("<stdin>", e))?;
        if v.len() as u64 > max {
            return Err(Error::format(
                crate::error::Position::new("<stdin>"),
                format!("input larger than the {max} bytes this format can hold"),
            ));
        }
        Ok(Bytes::Owned(v))
    }

    /// Open the input as a byte stream (file or stdin).
    pub fn open_stream(&self) -> Result<Box<dyn BufRead>> {
        if let (InputKind::Stdin, Some(s)) = (&self.kind, &self.spool) {
            let f = File::open(s.path()).map_err(|e| Error::io("<stdin>", e))?;
            return Ok(Box::new(BufReader::with_capacity(1 << 16, f)));
        }
        match self.kind {
            InputKind::Stdin => Ok(Box::new(BufReader::with_capacity(
                1 << 16,
                std::io::Cursor::new(self.probe.clone()).chain(std::io::stdin()),
            ))),
            InputKind::File => {
                let f = File::open(&self.path).map_err(|e| Error::io(&self.path, e))?;
                Ok(Box::new(BufReader::with_capacity(1 << 16, f)))
            }
            _ => Err(Error::Usage(format!(
                "{}: is a directory or archive, not a stream",
                self.name()
            ))),
        }
    }

    /// Files this input consists of (for refusing to overwrite inputs).
    pub fn member_paths(&self) -> Vec<PathBuf> {
        match self.kind {
            InputKind::Stdin => vec![],
            InputKind::File => {
                let mut v = vec![self.path.clone()];
                if let Some(base) = archive_base_of(&self.path) {
                    v.extend(archive_members(&base));
                }
                v
            }
            InputKind::ArchiveBase => archive_members(&self.path),
            InputKind::Dir => walkdir::WalkDir::new(&self.path)
                .follow_links(false)
                .into_iter()
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_file())
                .map(|e| e.into_path())
                .collect(),
        }
    }
}

/// The first bytes of stdin: up to [`PROBE_LEN`], but text stops at its
/// first complete non-blank line, so a live pipe of KPI lines is detected
/// (and converted) without waiting for more input than that.
fn probe_stdin() -> std::io::Result<Vec<u8>> {
    let mut probe = vec![0u8; PROBE_LEN];
    let mut len = 0;
    let mut stdin = std::io::stdin().lock();
    while len < PROBE_LEN {
        let n = match stdin.read(&mut probe[len..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            break;
        }
        len += n;
        if has_text_line(&probe[..len]) {
            break;
        }
    }
    probe.truncate(len);
    Ok(probe)
}

/// A complete line with something in it, and no binary bytes so far.
fn has_text_line(b: &[u8]) -> bool {
    let binary = b
        .iter()
        .any(|&c| c == 0 || (c < 0x20 && !matches!(c, b'\t' | b'\n' | b'\r')));
    !binary
        && b.split(|&c| c == b'\n')
            .rev()
            .skip(1) // what follows the last newline is not complete
            .any(|l| !l.iter().all(u8::is_ascii_whitespace))
}

/// Strip a compression suffix, if any.
pub fn strip_compression(name: &str) -> &str {
    for s in COMPRESSED_SUFFIXES {
        if let Some(b) = name.strip_suffix(s) {
            return b;
        }
    }
    name
}

/// If `path` names a PCP archive member (`x.meta`, `x.index`, `x.N`, maybe
/// compressed), the archive base name.
pub fn archive_base_of(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    let plain = strip_compression(name);
    let (base, suffix) = plain.rsplit_once('.')?;
    if base.is_empty() {
        return None;
    }
    let ok = suffix == "meta"
        || suffix == "index"
        || (!suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit()));
    if ok {
        Some(path.with_file_name(base))
    } else {
        None
    }
}

/// Call `f` with the name of every entry of `dir` but `.` and `..` (names
/// that are not UTF-8 are skipped), borrowed: `std::fs::read_dir` makes two
/// allocations per entry, and an archive's directory can hold thousands of
/// files (the PCP testsuite's 1,334) of which a few are its members.
pub fn each_name(dir: &Path, mut f: impl FnMut(&str)) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a NUL-terminated path.
    let d = unsafe { libc::opendir(c.as_ptr()) };
    if d.is_null() {
        return Err(std::io::Error::last_os_error());
    }
    struct Dir(*mut libc::DIR);
    impl Drop for Dir {
        fn drop(&mut self) {
            // SAFETY: an open directory stream, closed once.
            unsafe { libc::closedir(self.0) };
        }
    }
    let d = Dir(d);
    loop {
        // SAFETY: `d.0` is open and used by this call only; the entry stays
        // valid until the next `readdir` on it and its name is NUL-terminated.
        let name = unsafe {
            let e = libc::readdir(d.0);
            if e.is_null() {
                // The end (or an error, which ends the listing: `read_dir`
                // callers here skipped unreadable entries too).
                return Ok(());
            }
            std::ffi::CStr::from_ptr((*e).d_name.as_ptr())
        };
        match std::str::from_utf8(name.to_bytes()) {
            Ok("." | "..") | Err(_) => {}
            Ok(n) => f(n),
        }
    }
}

/// Existing member files of the archive with base name `base`, sorted.
pub fn archive_members(base: &Path) -> Vec<PathBuf> {
    let Some(stem) = base.file_name().and_then(|s| s.to_str()) else {
        return vec![];
    };
    let dir = match base.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut out = Vec::new();
    let listed = each_name(&dir, |n| {
        let Some(rest) = strip_compression(n)
            .strip_prefix(stem)
            .and_then(|r| r.strip_prefix('.'))
        else {
            return;
        };
        let member = rest == "meta"
            || rest == "index"
            || (!rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()));
        if member {
            out.push(dir.join(n));
        }
    });
    if listed.is_err() {
        return vec![];
    }
    out.sort();
    out
}

/// Edit distance (Levenshtein), for "did you mean".
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = if ca == cb {
                diag
            } else {
                1 + diag.min(up).min(row[j])
            };
            diag = up;
        }
    }
    row[b.len()]
}

/// A missing input, with the nearest names beside it ("did you mean
/// bozo-20170904": a PCP archive is named by its base name).
fn not_found(path: &Path, e: std::io::Error) -> std::io::Error {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return e;
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return e;
    };
    let mut near: Vec<(usize, String)> = Vec::new();
    for entry in entries.take(10_000).flatten() {
        let Ok(n) = entry.file_name().into_string() else {
            continue;
        };
        // An archive member stands for its base name.
        let base = match n.rsplit_once('.') {
            Some((b, "meta" | "index")) => b.to_string(),
            Some((b, v)) if !v.is_empty() && v.bytes().all(|c| c.is_ascii_digit()) => b.to_string(),
            _ => n,
        };
        let d = edit_distance(name, &base);
        if d <= 3.max(name.len() / 4) && !near.iter().any(|(_, b)| *b == base) {
            near.push((d, base));
        }
    }
    if near.is_empty() {
        return e;
    }
    near.sort();
    let names: Vec<String> = near.into_iter().take(3).map(|(_, n)| n).collect();
    std::io::Error::new(
        e.kind(),
        format!("{e}: did you mean {}?", names.join(" or ")),
    )
}
