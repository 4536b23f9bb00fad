//! Staging directories that must not outlive the process: a registry of the
//! live ones, removed when SIGINT, SIGTERM or SIGHUP ends the process, and
//! the recognition of stale ones that a killed run left behind.
//!
//! The signal handler only writes the signal number into a pipe (that is
//! async-signal-safe); a watcher thread removes the registered directories
//! and then ends the process with the same signal, its default action
//! restored, so the exit status still says which signal it was. SIGPIPE is
//! left as Rust sets it (ignored): a closed pipe then surfaces as an EPIPE
//! error, which unwinds through `Staged`'s drop and removes the staging.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard, Once};
use std::time::{Duration, SystemTime};

static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static INSTALL: Once = Once::new();
static PIPE_W: AtomicI32 = AtomicI32::new(-1);

/// The signals that end a conversion and trigger the cleanup.
pub const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Staging left by a run whose process is gone is stale at once; staging
/// whose name carries no process id (or a live one, which may be a reused
/// id) only after this long.
pub const STALE_AGE: Duration = Duration::from_secs(24 * 3600);

fn live() -> MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Make a staging directory with `make` and remember it until
/// [`unregister`]. The signal handlers are installed first (on first use)
/// and the registry is held while `make` runs: a signal that arrives while
/// the directory is being made is acted on once it is registered, so the
/// directory goes too. Made first and registered after, a signal in
/// between ended the process by its default action and left the
/// directory (a CI run of the damage tests caught it).
pub fn register_new<E>(make: impl FnOnce() -> Result<PathBuf, E>) -> Result<PathBuf, E> {
    INSTALL.call_once(install);
    let mut live = live();
    let dir = make()?;
    live.push(dir.clone());
    Ok(dir)
}

pub fn unregister(dir: &Path) {
    live().retain(|p| p != dir);
}

/// Hold off the signal cleanup while a commit moves files into place, so a
/// signal in between leaves the complete output rather than half of it.
pub fn hold() -> MutexGuard<'static, Vec<PathBuf>> {
    live()
}

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = PIPE_W.load(Ordering::SeqCst);
    let b = sig as u8;
    // SAFETY: write(2) on a pipe is async-signal-safe; `b` lives on the stack.
    unsafe {
        libc::write(fd, &b as *const u8 as *const libc::c_void, 1);
    }
}

/// For another signal handler (the recorder's, on a second Ctrl-C): end
/// the process as the cleanup does, removing the staging first; with no
/// staging registered, by the signal's default action. Async-signal-safe.
pub fn end_by_signal(sig: libc::c_int) {
    if PIPE_W.load(Ordering::SeqCst) >= 0 {
        on_signal(sig);
        return;
    }
    // SAFETY: sigaction and raise are async-signal-safe; `sa` is a live
    // local with the default action.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
        libc::raise(sig);
    }
}

fn install() {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills the two-element array we pass.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let (rd, wr) = (fds[0], fds[1]);
    let spawned = std::thread::Builder::new()
        .name("staging-cleanup".into())
        .spawn(move || watch(rd));
    if spawned.is_err() {
        return;
    }
    PIPE_W.store(wr, Ordering::SeqCst);
    for sig in SIGNALS {
        // SAFETY: a zeroed sigaction is valid; we set handler, mask, flags.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            // A signal the parent told us to ignore (nohup) stays ignored.
            libc::sigaction(sig, std::ptr::null(), &mut old);
            if old.sa_sigaction == libc::SIG_IGN {
                continue;
            }
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = libc::SA_RESTART;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Bytes on the pipe from this value up ask for an exit with code
/// `byte - EXIT_BYTE` instead of a signal's death.
const EXIT_BYTE: u8 = 0x80;

/// End the process with `code` from inside a signal handler of a fault that
/// cannot be returned from (a mapped input that shrank): the watcher thread
/// removes the registered staging first, while this thread waits. Only
/// async-signal-safe calls.
pub fn exit_from_signal_handler(code: u8) -> ! {
    let fd = PIPE_W.load(Ordering::SeqCst);
    if fd >= 0 {
        let b = EXIT_BYTE.saturating_add(code);
        // SAFETY: write(2) on a pipe and pause(2) are async-signal-safe.
        unsafe {
            if libc::write(fd, &b as *const u8 as *const libc::c_void, 1) == 1 {
                loop {
                    libc::pause();
                }
            }
        }
    }
    // SAFETY: _exit is async-signal-safe and does not return.
    unsafe { libc::_exit(code as libc::c_int) }
}

fn watch(rd: libc::c_int) {
    loop {
        let mut b = 0u8;
        // SAFETY: reads one byte into a live local.
        let n = unsafe { libc::read(rd, &mut b as *mut u8 as *mut libc::c_void, 1) };
        if n == 1 && b >= EXIT_BYTE {
            let dirs = live();
            remove_all(&dirs);
            // SAFETY: ends the process at once; the faulting thread waits.
            unsafe { libc::_exit((b - EXIT_BYTE) as libc::c_int) }
        }
        if n == 1 {
            break terminate(b as libc::c_int);
        }
        if n == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// Remove the staging directories while the conversion's other threads
/// still run: one of them may create a file or directory in a staging
/// directory while it is being removed (the LTT writer makes its tree as it
/// goes), so a removal that fails is tried again, a few hundred times at
/// most.
fn remove_all(dirs: &[PathBuf]) {
    for d in dirs {
        for _ in 0..200 {
            match std::fs::remove_dir_all(d) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    std::thread::sleep(Duration::from_micros(500))
                }
                _ => break,
            }
        }
    }
}

fn terminate(sig: libc::c_int) {
    {
        let dirs = live();
        remove_all(&dirs);
        // The lock is kept: no new staging may start now.
        std::mem::forget(dirs);
    }
    // SAFETY: restore the default action and send the signal to the whole
    // process, which ends it with that signal's status.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::kill(libc::getpid(), sig);
    }
    // Should the signal not end us (blocked elsewhere), still do not return.
    std::process::exit(128 + sig);
}

/// The prefix of every staging directory of the output file `name`.
pub fn stage_prefix(name: &OsStr) -> OsString {
    let mut s = OsString::from(".");
    s.push(name);
    s.push(".polytrace-");
    s
}

/// The prefix of a new staging directory: it carries our process id, so a
/// later run can tell a dead run's staging from a live one's.
pub fn stage_prefix_for_us(name: &OsStr) -> OsString {
    let mut s = stage_prefix(name);
    s.push(format!("{}-", std::process::id()));
    s
}

/// Remove the staging directories of `name` in `parent` that a run which
/// no longer exists left behind (killed with SIGKILL, power loss). Returns
/// the paths removed.
pub fn remove_stale(parent: &Path, name: &OsStr) -> Vec<PathBuf> {
    let prefix = stage_prefix(name);
    let Ok(rd) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in rd.flatten() {
        let fname = e.file_name();
        let Some(rest) = fname
            .as_encoded_bytes()
            .strip_prefix(prefix.as_encoded_bytes())
            .and_then(|r| std::str::from_utf8(r).ok())
        else {
            continue;
        };
        // Only directories we made: not symlinks, not files.
        let Ok(md) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if !md.is_dir() {
            continue;
        }
        let old = md
            .modified()
            .ok()
            .and_then(|m| SystemTime::now().duration_since(m).ok())
            .is_some_and(|age| age > STALE_AGE);
        let pid = rest
            .split_once('-')
            .and_then(|(p, _)| p.parse::<libc::pid_t>().ok())
            .filter(|&p| p > 0);
        let dead = pid.is_some_and(|p| {
            // SAFETY: kill with signal 0 only checks that the process exists.
            let r = unsafe { libc::kill(p, 0) };
            r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
        });
        let ours = pid == Some(std::process::id() as libc::pid_t);
        if (dead || old) && !ours && std::fs::remove_dir_all(e.path()).is_ok() {
            removed.push(e.path());
        }
    }
    removed
}

/// The allocator of every polytrace binary: the system's, except that an
/// allocation that fails ends the run as an error (exit 2, staging
/// removed) instead of Rust's abort (exit 134): out of memory is the
/// machine's failure, not the input's, and leaves nothing under the
/// output's name.
pub struct Allocator;

static OUT_OF_MEMORY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[cold]
fn out_of_memory(size: usize) -> ! {
    // Nothing here allocates: the message is written from the stack.
    if !OUT_OF_MEMORY.swap(true, Ordering::SeqCst) {
        let mut num = itoa::Buffer::new();
        let parts: [&[u8]; 3] = [
            b"polytrace: error: out of memory (allocating ",
            num.format(size).as_bytes(),
            b" bytes)\n",
        ];
        for p in parts {
            // SAFETY: write(2) of a live buffer to stderr.
            unsafe {
                libc::write(2, p.as_ptr() as *const libc::c_void, p.len());
            }
        }
        exit_from_signal_handler(2);
    }
    // The cleanup itself ran out: a later run removes the staging.
    // SAFETY: _exit does not return.
    unsafe { libc::_exit(2) }
}

// SAFETY: every call goes to the system allocator with the same layout;
// only a null result is acted on.
unsafe impl std::alloc::GlobalAlloc for Allocator {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        let p = std::alloc::System.alloc(l);
        if p.is_null() {
            out_of_memory(l.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: std::alloc::Layout) -> *mut u8 {
        let p = std::alloc::System.alloc_zeroed(l);
        if p.is_null() {
            out_of_memory(l.size());
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, l: std::alloc::Layout, new: usize) -> *mut u8 {
        let p = std::alloc::System.realloc(ptr, l, new);
        if p.is_null() {
            out_of_memory(new);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, l: std::alloc::Layout) {
        std::alloc::System.dealloc(ptr, l)
    }
}
