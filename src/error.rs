//! Library errors: small, positioned. `anyhow` is used only in the binaries.

use std::fmt;
use std::path::{Path, PathBuf};

/// Temporary directories shown under another name in messages (an
/// unpacked archive's directory is shown as `archive.tar.gz`, its members
/// as `archive.tar.gz:cpu/1`).
static ALIASES: std::sync::Mutex<Vec<(PathBuf, String)>> = std::sync::Mutex::new(Vec::new());

/// Show paths under `dir` as `shown:REL` from now on (for the process's
/// life: an error naming a member may be printed after the directory went).
pub fn alias_path(dir: &Path, shown: &str) {
    let mut a = ALIASES.lock().unwrap_or_else(|e| e.into_inner());
    a.push((dir.to_path_buf(), shown.to_string()));
}

/// `p` as messages show it.
pub fn shown(p: &Path) -> String {
    let a = ALIASES.lock().unwrap_or_else(|e| e.into_inner());
    for (dir, name) in a.iter() {
        if let Ok(rest) = p.strip_prefix(dir) {
            if rest.as_os_str().is_empty() {
                return name.clone();
            }
            return format!("{name}:{}", rest.display());
        }
    }
    p.display().to_string()
}

/// Where in an input a problem sits.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Position {
    pub file: PathBuf,
    /// Byte offset in `file`, where meaningful.
    pub offset: Option<u64>,
    /// 0-based record index (record, event, line, slot: the format says which).
    pub record: Option<u64>,
}

impl Position {
    pub fn new(file: impl Into<PathBuf>) -> Position {
        Position {
            file: file.into(),
            offset: None,
            record: None,
        }
    }
    pub fn at(file: impl Into<PathBuf>, offset: u64, record: Option<u64>) -> Position {
        Position {
            file: file.into(),
            offset: Some(offset),
            record,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", shown(&self.file))?;
        if let Some(o) = self.offset {
            write!(f, ": byte {o}")?;
        }
        if let Some(r) = self.record {
            write!(f, ", record {r}")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input is malformed at a known position.
    #[error("{pos}: {msg}")]
    Format { pos: Position, msg: String },
    /// An I/O error on a named file.
    #[error("{}: {source}", shown(path))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The input's format could not be recognised.
    #[error("{}: {msg}", path.display())]
    Detect { path: PathBuf, msg: String },
    /// Something the format or this build does not support (yet).
    #[error("{0}")]
    Unsupported(String),
    /// A bad option or option combination.
    #[error("{0}")]
    Usage(String),
    /// `--strict` and the writer would have dropped or degraded something.
    #[error("strict mode: {0}")]
    Strict(String),
    /// Output refused (would overwrite an input, exists without --force).
    #[error("{}: {msg}", path.display())]
    Output { path: PathBuf, msg: String },
    /// The target would receive no data item: nothing is written (a batch
    /// counts the input as skipped). `what` names what is missing, `why`
    /// says why the source has none.
    #[error("{what}: {why}")]
    NothingToWrite { what: String, why: String },
}

impl Error {
    pub fn format(pos: Position, msg: impl Into<String>) -> Error {
        Error::Format {
            pos,
            msg: msg.into(),
        }
    }
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
    pub fn nothing_to_write(what: impl Into<String>, why: impl Into<String>) -> Error {
        Error::NothingToWrite {
            what: what.into(),
            why: why.into(),
        }
    }
    /// True when the error is a closed pipe on output (`| head`).
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Severity of a diagnostic a reader or writer records without failing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Worth telling, nothing lost.
    Warning,
    /// Data was skipped or the read stopped early (salvage): exit code 1.
    Salvaged,
    /// The machine, not the input, failed the read (out of file
    /// descriptors or memory, an I/O error): the run fails, exit code 2,
    /// and nothing is written.
    Fatal,
}

/// Errors of the machine rather than of the input: never damage.
pub fn is_resource_error(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::EIO)
    ) || e.kind() == std::io::ErrorKind::OutOfMemory
}

/// A problem met while reading that did not stop the read.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub pos: Position,
    pub msg: String,
}

impl Diagnostic {
    pub fn warning(pos: Position, msg: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            pos,
            msg: msg.into(),
        }
    }
    /// What an I/O error while reading is: [`Severity::Fatal`] when the
    /// machine failed (see [`is_resource_error`]), else damage.
    pub fn io(pos: Position, msg: impl Into<String>, e: &std::io::Error) -> Diagnostic {
        Diagnostic {
            severity: if is_resource_error(e) {
                Severity::Fatal
            } else {
                Severity::Salvaged
            },
            pos,
            msg: msg.into(),
        }
    }
    pub fn salvaged(pos: Position, msg: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Salvaged,
            pos,
            msg: msg.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = match self.severity {
            Severity::Warning => "warning",
            Severity::Salvaged => "salvaged",
            Severity::Fatal => "error",
        };
        write!(f, "{tag}: {}: {}", self.pos, self.msg)
    }
}
