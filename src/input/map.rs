//! Whole-file inputs as bytes: a read-only memory map of a regular file on
//! a local file system, else a copy in memory ([`read_file`]); or only the
//! map, the caller reading the file itself otherwise ([`map_file`], LTT
//! tracefiles).
//!
//! A mapped file that another program truncates while we read it would end
//! the process with SIGBUS on the first page past the new end. A SIGBUS
//! handler looks the faulting address up among the live mappings; for one
//! of ours it prints `polytrace: error: FILE: byte N: …` and ends the process
//! with exit code 2 after the staging of any output is removed (a conversion
//! writes nothing; a listing keeps what it printed). Any other SIGBUS goes to the handler that was there before.
//!
//! Not mapped, but copied: what is not a regular file (pipes, character
//! devices, `/proc`), empty or small files, files on network and FUSE file
//! systems (another machine can shrink them, and their pages can vanish
//! without a truncation), and every input when `POLYTRACE_NO_MMAP` is set.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::Read;
use std::ops::Deref;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::Once;

/// Below this a copy is as cheap as a map and needs no bookkeeping.
pub const MAP_MIN: u64 = 1 << 16;

/// A file's bytes, mapped or copied.
pub enum Bytes {
    Mapped(Mapping),
    Owned(Vec<u8>),
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => &m.map,
            Bytes::Owned(v) => v,
        }
    }
}

impl Bytes {
    pub fn is_mapped(&self) -> bool {
        matches!(self, Bytes::Mapped(_))
    }

    /// The pages wholly inside `range` are done with: they leave this
    /// process's resident set (read again from the page cache if touched),
    /// so reading a large mapped file front to back keeps memory flat.
    /// Nothing for a copy.
    pub fn release(&self, range: std::ops::Range<usize>) {
        let Bytes::Mapped(m) = self else { return };
        // SAFETY: sysconf has no preconditions.
        let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            p if p > 0 => p as usize,
            _ => return,
        };
        // The map starts on a page boundary (offset 0 of the file).
        let start = range.start.div_ceil(page) * page;
        let end = range.end.min(m.map.len()) / page * page;
        if end > start {
            // SAFETY: a read-only shared map of a file: dropping its page
            // table entries changes no byte anyone reads (a later access
            // maps the file's page again). A failure is harmless.
            let _ = unsafe {
                m.map
                    .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
            };
        }
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Bytes {
        Bytes::Owned(v)
    }
}

/// A registered read-only map; unregistered when dropped.
pub struct Mapping {
    map: memmap2::Mmap,
    slot: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        unregister(self.slot);
    }
}

/// Map the open file `f` whole (`name` is what messages call it) when that
/// is safe (a regular file of at least [`MAP_MIN`] bytes on a local file
/// system, a free slot); None: the caller reads it instead. The map is as
/// long as the file is now.
pub fn map_file(f: &File, name: &Path) -> Option<Bytes> {
    let md = f.metadata().ok()?;
    if md.is_file() && md.len() >= MAP_MIN && mappable(f) {
        return map(f, md.len(), name).map(Bytes::Mapped);
    }
    None
}

/// Read the file at `path` (`name` is what messages call it) whole: mapped
/// when that is safe, else copied, never more than `max` bytes (a larger
/// file is an error naming the limit).
pub fn read_file(path: &Path, name: &Path, max: u64) -> Result<Bytes> {
    let mut f = File::open(path).map_err(|e| Error::io(name, e))?;
    let md = f.metadata().map_err(|e| Error::io(name, e))?;
    if md.is_file() && md.len() > max {
        return Err(too_large(name, md.len(), max));
    }
    if md.is_file() && md.len() >= MAP_MIN && mappable(&f) {
        if let Some(m) = map(&f, md.len(), name) {
            return Ok(Bytes::Mapped(m));
        }
    }
    let mut v = Vec::new();
    f.by_ref()
        .take(max.saturating_add(1))
        .read_to_end(&mut v)
        .map_err(|e| Error::io(name, e))?;
    if v.len() as u64 > max {
        return Err(too_large(name, v.len() as u64, max));
    }
    Ok(Bytes::Owned(v))
}

fn too_large(name: &Path, len: u64, max: u64) -> Error {
    Error::format(
        crate::error::Position::new(name),
        format!("file of {len} bytes is larger than the {max} bytes this format can hold"),
    )
}

/// Whether pages of `f` can only go away by a local truncation (which the
/// handler reports): not on network or FUSE file systems.
fn mappable(f: &File) -> bool {
    if std::env::var_os("POLYTRACE_NO_MMAP").is_some() {
        return false;
    }
    use std::os::fd::AsRawFd;
    // SAFETY: fstatfs fills the zeroed struct we pass for a valid fd.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(f.as_raw_fd(), &mut st) } != 0 {
        return false;
    }
    // NFS, SMB, CIFS, SMB2, FUSE, 9P, Ceph, AFS, Coda, GFS2, OCFS2.
    const REMOTE: [i64; 11] = [
        0x6969,
        0x517b,
        0xff53_4d42u32 as i64,
        0xfe53_4d42u32 as i64,
        0x6573_5546,
        0x0102_1997,
        0x00c3_6400,
        0x5346_414f,
        0x7375_7245,
        0x0116_1970,
        0x7461_636f,
    ];
    let t = st.f_type as i64;
    // f_type is signed on some targets: compare its low 32 bits too.
    !REMOTE.iter().any(|&r| r == t || r == (t & 0xffff_ffff))
}

const SLOTS: usize = 64;

#[allow(clippy::declare_interior_mutable_const)]
const FREE: AtomicBool = AtomicBool::new(false);
#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicUsize = AtomicUsize::new(0);
#[allow(clippy::declare_interior_mutable_const)]
const NULL: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());

/// The live mappings, readable from the signal handler without locks:
/// address range and the message prefix (`polytrace: error: FILE: byte `).
static USED: [AtomicBool; SLOTS] = [FREE; SLOTS];
static START: [AtomicUsize; SLOTS] = [ZERO; SLOTS];
static LEN: [AtomicUsize; SLOTS] = [ZERO; SLOTS];
static MSG: [AtomicPtr<u8>; SLOTS] = [NULL; SLOTS];
static MSG_LEN: [AtomicUsize; SLOTS] = [ZERO; SLOTS];

static INSTALL: Once = Once::new();
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// The SIGBUS action before ours, for faults that are not ours.
static OLD: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());

/// Map `f` of `len` bytes and register it; None (copy instead) when the map
/// fails, the handler cannot be installed or every slot is taken.
fn map(f: &File, len: u64, name: &Path) -> Option<Mapping> {
    let len = usize::try_from(len).ok()?;
    INSTALL.call_once(install);
    if !INSTALLED.load(Ordering::SeqCst) {
        return None;
    }
    let slot = (0..SLOTS).find(|&i| {
        USED[i]
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    })?;
    // SAFETY: a read-only map of a file we hold open. Its length is fixed
    // here from fstat; a later truncation by another program is what the
    // SIGBUS handler reports (see the module comment).
    let map = match unsafe { memmap2::MmapOptions::new().len(len).map(f) } {
        Ok(m) => m,
        Err(_) => {
            USED[slot].store(false, Ordering::SeqCst);
            return None;
        }
    };
    // Readers go front to back: ask for read-ahead (a hint; failure is harmless).
    let _ = map.advise(memmap2::Advice::Sequential);
    let msg = format!("polytrace: error: {}: byte ", name.display()).into_bytes();
    let msg = Box::into_raw(msg.into_boxed_slice());
    MSG_LEN[slot].store(msg.len(), Ordering::SeqCst);
    MSG[slot].store(msg as *mut u8, Ordering::SeqCst);
    START[slot].store(map.as_ptr() as usize, Ordering::SeqCst);
    LEN[slot].store(map.len(), Ordering::SeqCst);
    Some(Mapping { map, slot })
}

fn unregister(slot: usize) {
    LEN[slot].store(0, Ordering::SeqCst);
    START[slot].store(0, Ordering::SeqCst);
    let p = MSG[slot].swap(std::ptr::null_mut(), Ordering::SeqCst);
    let n = MSG_LEN[slot].swap(0, Ordering::SeqCst);
    if !p.is_null() {
        // SAFETY: `p`/`n` came from Box::into_raw of a boxed slice in `map`;
        // the map is no longer borrowed, so no fault can read the message.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n)) });
    }
    USED[slot].store(false, Ordering::SeqCst);
}

fn install() {
    // SAFETY: zeroed sigaction structs are valid; we set handler, mask, flags.
    unsafe {
        let old: *mut libc::sigaction = Box::into_raw(Box::new(std::mem::zeroed()));
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigbus as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        // The stack-overflow handler of Rust's runtime uses an alternate stack.
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        if libc::sigaction(libc::SIGBUS, &sa, old) == 0 {
            OLD.store(old, Ordering::SeqCst);
            INSTALLED.store(true, Ordering::SeqCst);
        }
    }
}

/// Async-signal-safe: atomics, write(2) and the exit path of
/// [`crate::cleanup::exit_from_signal_handler`].
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    for i in 0..SLOTS {
        let len = LEN[i].load(Ordering::SeqCst);
        let start = START[i].load(Ordering::SeqCst);
        if len == 0 || addr < start || addr - start >= len {
            continue;
        }
        let p = MSG[i].load(Ordering::SeqCst);
        let n = MSG_LEN[i].load(Ordering::SeqCst);
        let mut num = [0u8; 20];
        let mut k = num.len();
        let mut off = addr - start;
        loop {
            k -= 1;
            num[k] = b'0' + (off % 10) as u8;
            off /= 10;
            if off == 0 {
                break;
            }
        }
        // A listing stops here (what it printed stays); a conversion's
        // staging is removed, so nothing of it is written.
        const TAIL: &[u8] = b": the file shrank while it was being read (memory-mapped); stopped\n";
        // SAFETY: write(2) of live buffers is async-signal-safe.
        unsafe {
            if !p.is_null() {
                libc::write(2, p as *const libc::c_void, n);
            }
            libc::write(2, num[k..].as_ptr() as *const libc::c_void, num.len() - k);
            libc::write(2, TAIL.as_ptr() as *const libc::c_void, TAIL.len());
        }
        crate::cleanup::exit_from_signal_handler(2);
    }
    // Not ours: what was there before decides.
    let old = OLD.load(Ordering::SeqCst);
    // SAFETY: `old` was filled by sigaction before the handler was installed.
    unsafe {
        if !old.is_null() {
            let h = (*old).sa_sigaction;
            if h != libc::SIG_DFL && h != libc::SIG_IGN {
                if (*old).sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                        std::mem::transmute(h);
                    f(sig, info, ctx);
                } else {
                    let f: extern "C" fn(libc::c_int) = std::mem::transmute(h);
                    f(sig);
                }
                return;
            }
        }
        // Returning re-runs the faulting access with the default action.
        libc::signal(libc::SIGBUS, libc::SIG_DFL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn maps_large_regular_files_and_copies_small_ones() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        let data: Vec<u8> = (0..MAP_MIN as usize * 2).map(|i| (i % 251) as u8).collect();
        std::fs::write(&big, &data).unwrap();
        let b = read_file(&big, &big, u64::MAX).unwrap();
        assert_eq!(&b[..], &data[..]);
        if std::env::var_os("POLYTRACE_NO_MMAP").is_none() {
            assert!(b.is_mapped());
        }
        let small = dir.path().join("small");
        std::fs::write(&small, b"abc").unwrap();
        let s = read_file(&small, &small, u64::MAX).unwrap();
        assert!(!s.is_mapped());
        assert_eq!(&s[..], b"abc");
    }

    #[test]
    fn refuses_files_over_the_limit() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&[0u8; 100]).unwrap();
        let e = read_file(f.path(), Path::new("x.mmv"), 99).err().unwrap();
        assert!(e.to_string().contains("x.mmv"), "{e}");
        assert!(e.to_string().contains("100 bytes"), "{e}");
    }
}
