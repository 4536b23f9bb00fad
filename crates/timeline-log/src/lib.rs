//! Log events into a Snabb timeline (the 2016 prototype's A2 layout, which
//! `polytrace dump` lists as Snabb's own `dump()` did).
//!
//! ```no_run
//! use timeline_log::{Priority, Timeline};
//! let tl = Timeline::create("/dev/shm/myapp.timeline", 1 << 16, 64 * 1024).unwrap();
//! let pulled = tl.define("engine", Priority::Info, "pulled $pkts packets, $bytes bytes").unwrap();
//! pulled.log2(8340, 533_760);
//! tl.set_priority(Priority::Trace);
//! tl.save("/tmp/snapshot.timeline").unwrap();
//! ```
//!
//! File: a 64-byte header, a ring of 64-byte entries (a power of two of
//! them), then the string table (categories and messages, NUL-terminated,
//! packed). Each entry: tsc u64, ip u64 (0 here), TSC_AUX u32 (CPU in bits
//! 0–11, NUMA node from bit 12, as Linux sets it), reserved u32, msg_id u64
//! (`category offset << 40 | message offset << 16 | 1 << priority`), four
//! u64 arguments.
//!
//! Concurrency: an entry's tsc is set to 0 before its other fields are
//! written and to the real value last (a Release store), so a reader that
//! reads tsc, the entry, then tsc again (see [`consistent_copy`]) never
//! takes a half-written entry. The ring index is one atomic counter:
//! several threads may log into one timeline; each call then pays one
//! atomic add. A thread that is stopped in the middle of a call for a whole
//! lap of the ring can collide with the thread that reuses its slot.

use memmap2::MmapMut;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Mutex;

pub const HEADER_SIZE: usize = 64;
pub const ENTRY_SIZE: usize = 64;
/// At most this many `$args` per message (the A2 entry holds four).
pub const MAX_ARGS: usize = 4;
/// The header's pad starts with this tag while a logger has the file
/// mapped; readers then copy the ring entry by entry ([`consistent_copy`]).
/// Cleared when the [`Timeline`] is dropped and absent from saved
/// snapshots, which are plain A2 files.
pub const LIVE_TAG: [u8; 8] = *b"ptlive\x01\0";
pub const LIVE_TAG_OFFSET: usize = 32;
/// Priority mask that lets everything through (`all`).
const MASK_ALL: u64 = 0xffff;

/// A2 priorities: the number p is stored as bit `1 << p` of the msg_id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Priority {
    Error = 1,
    Warning = 2,
    Info = 3,
    Trace = 4,
    App = 5,
    Packet = 6,
    Library = 7,
}

/// The minimum priority a timeline logs: a level, everything, or nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    All,
    None,
    Up(Priority),
}

impl From<Priority> for Level {
    fn from(p: Priority) -> Level {
        Level::Up(p)
    }
}

#[derive(Debug)]
pub enum Error {
    Io(PathBuf, io::Error),
    /// Ring size not a power of two, or too small/large.
    Entries(u64),
    /// String table size outside 16 bytes … 64 KiB + 1 (offsets are 16 bits).
    Strings(u64),
    /// More than [`MAX_ARGS`] placeholders on a message's first line.
    TooManyArgs {
        message: String,
        found: usize,
    },
    /// The string table has no room for this text.
    StringTableFull(String),
    /// The path exists and is not a timeline file.
    NotATimeline(PathBuf),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io(p, e) => write!(f, "{}: {e}", p.display()),
            Error::Entries(n) => write!(
                f,
                "{n} entries: the ring needs a power of two between 2 and 2^26"
            ),
            Error::Strings(n) => write!(
                f,
                "string table of {n} bytes: give 16 to 65536 (offsets are 16 bits)"
            ),
            Error::TooManyArgs { message, found } => write!(
                f,
                "message {message:?} has {found} $args on its first line; at most {MAX_ARGS}"
            ),
            Error::StringTableFull(s) => write!(f, "string table full: cannot add {s:?}"),
            Error::NotATimeline(p) => write!(
                f,
                "{}: exists and is not a timeline file; not replacing it",
                p.display()
            ),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Interned strings: offset by text, and the end of the used part.
struct Strings {
    by_text: HashMap<Vec<u8>, u64>,
    used: usize,
}

/// A timeline: the mapped file (or nothing, when disabled).
pub struct Timeline {
    /// Base of the mapping; null when disabled.
    base: *mut u8,
    _map: Option<MmapMut>,
    path: Option<PathBuf>,
    /// Entries ever reserved (the slot is this & `last`).
    next: AtomicU64,
    last: u64,
    /// The priority mask, read by every call (also mirrored in the header).
    mask: AtomicU64,
    strings_start: usize,
    strings_len: usize,
    strings: Mutex<Strings>,
    #[cfg(not(target_arch = "x86_64"))]
    epoch: std::time::Instant,
}

// SAFETY: the mapping is only written through atomics (entries, header
// words) or under the `strings` mutex (string table), and lives as long
// as the Timeline.
unsafe impl Send for Timeline {}
unsafe impl Sync for Timeline {}

/// Placeholders (`$` + a maximal run of ASCII letters and digits) on the
/// first line, as Snabb's `define` counts them.
pub fn count_args(message: &str) -> usize {
    let first = message.split('\n').next().unwrap_or("").as_bytes();
    let mut n = 0;
    let mut i = 0;
    while i < first.len() {
        if first[i] == b'$' {
            let mut j = i + 1;
            while j < first.len() && first[j].is_ascii_alphanumeric() {
                j += 1;
            }
            if j > i + 1 {
                n += 1;
                i = j;
                continue;
            }
        }
        i += 1;
    }
    n
}

fn io_err(p: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |e| Error::Io(p.to_path_buf(), e)
}

/// Does `path` hold an A2 timeline (the same test polytrace's detection
/// makes: bytes 4..7 zero, a power-of-two ring inside the file)?
fn is_timeline_file(path: &Path) -> bool {
    let Ok(mut f) = File::open(path) else {
        return false;
    };
    let Ok(md) = f.metadata() else { return false };
    let mut h = [0u8; HEADER_SIZE];
    if !md.is_file() || io::Read::read_exact(&mut f, &mut h).is_err() {
        return false;
    }
    let last = u64::from_le_bytes(h[24..32].try_into().expect("8 bytes"));
    h[4..8] == [0; 4]
        && last
            .checked_add(1)
            .is_some_and(|n| n.is_power_of_two() && n < 1 << 40 && 64 + 64 * n < md.len())
}

impl Timeline {
    /// Create a timeline file at `path` (in `/dev/shm` for a shared-memory
    /// ring, or anywhere) with `entries` slots (a power of two) and a string
    /// table of `strings_size` bytes. The file is built under a temporary
    /// name beside `path` and renamed into place, so a reader never sees a
    /// part-made header. An existing timeline file at `path` is replaced;
    /// any other existing file is refused.
    pub fn create(path: impl AsRef<Path>, entries: u64, strings_size: u64) -> Result<Timeline> {
        let path = path.as_ref();
        if !entries.is_power_of_two() || !(2..=1 << 26).contains(&entries) {
            return Err(Error::Entries(entries));
        }
        if !(16..=65536).contains(&strings_size) {
            return Err(Error::Strings(strings_size));
        }
        if path.exists() && !is_timeline_file(path) {
            return Err(Error::NotATimeline(path.to_path_buf()));
        }
        let len = HEADER_SIZE as u64 + ENTRY_SIZE as u64 * entries + strings_size;
        let tmp = staging_name(path);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(io_err(&tmp))?;
        let made = (|| {
            file.set_len(len)?;
            // SAFETY: a file we just created; nobody else truncates it.
            let mut map = unsafe { MmapMut::map_mut(&file)? };
            map[8..16].copy_from_slice(&MASK_ALL.to_le_bytes());
            map[24..32].copy_from_slice(&(entries - 1).to_le_bytes());
            map[LIVE_TAG_OFFSET..LIVE_TAG_OFFSET + 8].copy_from_slice(&LIVE_TAG);
            std::fs::rename(&tmp, path)?;
            Ok(map)
        })();
        let mut map = match made {
            Ok(m) => m,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(Error::Io(path.to_path_buf(), e));
            }
        };
        let base = map.as_mut_ptr();
        let strings_start = HEADER_SIZE + ENTRY_SIZE * entries as usize;
        Ok(Timeline {
            base,
            _map: Some(map),
            path: Some(path.to_path_buf()),
            next: AtomicU64::new(0),
            last: entries - 1,
            mask: AtomicU64::new(MASK_ALL),
            strings_start,
            strings_len: strings_size as usize,
            strings: Mutex::new(Strings {
                by_text: HashMap::new(),
                used: 0,
            }),
            #[cfg(not(target_arch = "x86_64"))]
            epoch: std::time::Instant::now(),
        })
    }

    /// A timeline that logs nothing: its events cost one failed mask test.
    /// Decide once (say from an environment variable) and hand this out
    /// instead of a real one.
    pub fn disabled() -> Timeline {
        Timeline {
            base: std::ptr::null_mut(),
            _map: None,
            path: None,
            next: AtomicU64::new(0),
            last: 0,
            mask: AtomicU64::new(0),
            strings_start: 0,
            strings_len: 0,
            strings: Mutex::new(Strings {
                by_text: HashMap::new(),
                used: 0,
            }),
            #[cfg(not(target_arch = "x86_64"))]
            epoch: std::time::Instant::now(),
        }
    }

    pub fn is_enabled(&self) -> bool {
        !self.base.is_null()
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn entries(&self) -> u64 {
        if self.is_enabled() {
            self.last + 1
        } else {
            0
        }
    }

    /// Entries logged so far (filtered calls are not counted).
    pub fn logged(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }

    fn header_word(&self, off: usize) -> &AtomicU64 {
        // SAFETY: enabled timelines only; off is an 8-aligned header offset.
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }

    /// Intern `s` into the string table (NUL-terminated, packed, shared
    /// between categories and messages). Offsets must fit 16 bits.
    fn intern(&self, s: &str) -> Result<u64> {
        let mut st = self.strings.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&off) = st.by_text.get(s.as_bytes()) {
            return Ok(off);
        }
        let off = st.used;
        let end = off + s.len() + 1;
        if end > self.strings_len || off > 0xffff || s.as_bytes().contains(&0) {
            return Err(Error::StringTableFull(s.to_string()));
        }
        // SAFETY: [strings_start + off, + len] lies in the mapping, and
        // only this (locked) code writes the string table.
        unsafe {
            let dst = self.base.add(self.strings_start + off);
            std::ptr::copy_nonoverlapping(s.as_ptr(), dst, s.len());
            *dst.add(s.len()) = 0;
        }
        st.used = end;
        st.by_text.insert(s.as_bytes().to_vec(), off as u64);
        Ok(off as u64)
    }

    /// Define an event: its category, priority and message, whose `$words`
    /// on the first line name its arguments (at most four). The strings
    /// are interned now; logging copies no text. Checked even when the
    /// timeline is disabled, so a bad definition fails in every build.
    pub fn define(&self, category: &str, priority: Priority, message: &str) -> Result<Event<'_>> {
        let nargs = count_args(message);
        if nargs > MAX_ARGS {
            return Err(Error::TooManyArgs {
                message: message.to_string(),
                found: nargs,
            });
        }
        if !self.is_enabled() {
            return Ok(Event {
                tl: self,
                id: 0,
                nargs: nargs as u8,
            });
        }
        let cat = self.intern(category)?;
        let msg = self.intern(message)?;
        Ok(Event {
            tl: self,
            id: cat << 40 | msg << 16 | 1 << priority as u64,
            nargs: nargs as u8,
        })
    }

    /// Log only events of `level` and more important ones (`All`: every
    /// event, `None`: nothing). Takes effect at the next call in every
    /// thread; the header keeps the mask in force, as Snabb's did.
    pub fn set_priority(&self, level: impl Into<Level>) {
        if !self.is_enabled() {
            return;
        }
        let mask = match level.into() {
            Level::All => MASK_ALL,
            Level::None => 1,
            Level::Up(p) => (1u64 << (p as u64 + 1)) - 1,
        };
        self.mask.store(mask, Ordering::Relaxed);
        self.header_word(8).store(mask, Ordering::Relaxed);
    }

    /// Write one entry (the mask test has passed).
    #[inline(always)]
    fn write(&self, id: u64, args: [u64; 4]) {
        let slot = self.next.fetch_add(1, Ordering::Relaxed) & self.last;
        // SAFETY: slot <= last, so the 64-byte entry lies in the ring; the
        // mapping is 4096-aligned, so every word is 8-aligned.
        let e = unsafe {
            &*(self.base.add(HEADER_SIZE + ((slot as usize) << 6)) as *const [AtomicU64; 8])
        };
        // tsc 0 = "being written": readers skip the entry until the last store.
        e[0].store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        e[1].store(0, Ordering::Relaxed);
        e[3].store(id, Ordering::Relaxed);
        e[4].store(args[0], Ordering::Relaxed);
        e[5].store(args[1], Ordering::Relaxed);
        e[6].store(args[2], Ordering::Relaxed);
        e[7].store(args[3], Ordering::Relaxed);
        // The timestamp is read last, as Snabb does.
        let (tsc, aux) = self.clock();
        e[2].store(aux as u64, Ordering::Relaxed);
        e[0].store(tsc, Ordering::Release);
    }

    /// (timestamp, TSC_AUX): `rdtscp` on x86-64; elsewhere monotonic
    /// nanoseconds since the timeline was made (plus 1: 0 means unwritten)
    /// and no CPU number.
    #[inline(always)]
    fn clock(&self) -> (u64, u32) {
        #[cfg(target_arch = "x86_64")]
        {
            let mut aux = 0u32;
            // SAFETY: rdtscp exists on every x86-64 CPU Linux runs this on
            // (checked by the kernel's `rdtscp` flag in practice).
            let tsc = unsafe { std::arch::x86_64::__rdtscp(&mut aux) };
            (tsc, aux)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            (self.epoch.elapsed().as_nanos() as u64 + 1, 0)
        }
    }

    /// A copy of the whole file as it stands, entries that are being
    /// written left out (their tsc reads 0), the header's `next` set to the
    /// slot the next entry goes to, and no live tag: a plain A2 snapshot.
    pub fn snapshot(&self) -> Vec<u8> {
        if !self.is_enabled() {
            return Vec::new();
        }
        let len = self.strings_start + self.strings_len;
        // SAFETY: the mapping is `len` bytes long and outlives this call.
        let live = unsafe { std::slice::from_raw_parts(self.base as *const u8, len) };
        let mut v = consistent_copy(live);
        let next = self.next.load(Ordering::Relaxed) & self.last;
        v[16..24].copy_from_slice(&next.to_le_bytes());
        v[LIVE_TAG_OFFSET..LIVE_TAG_OFFSET + 8].fill(0);
        v
    }

    /// Save a snapshot to `path` (written beside it, then renamed). An
    /// existing file there is replaced only if it is a timeline.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        if path.exists() && !is_timeline_file(path) {
            return Err(Error::NotATimeline(path.to_path_buf()));
        }
        let data = self.snapshot();
        let tmp = staging_name(path);
        let r = (|| {
            let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
            f.write_all(&data)?;
            f.sync_data()?;
            std::fs::rename(&tmp, path)
        })();
        if let Err(e) = r {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::Io(path.to_path_buf(), e));
        }
        Ok(())
    }
}

impl Drop for Timeline {
    fn drop(&mut self) {
        if self.is_enabled() {
            let next = self.next.load(Ordering::Relaxed) & self.last;
            self.header_word(16).store(next, Ordering::Relaxed);
            // No logger any more: readers may take the file as it is.
            self.header_word(LIVE_TAG_OFFSET)
                .store(0, Ordering::Release);
        }
    }
}

/// `.NAME.PID.N` beside `path`: hidden, unique per process and call.
fn staging_name(path: &Path) -> PathBuf {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ))
}

/// An event defined on a timeline: log it with as many values as its
/// message has `$args` (missing ones are stored as 0, extra ones dropped).
#[derive(Clone, Copy)]
pub struct Event<'t> {
    tl: &'t Timeline,
    /// The A2 msg_id; 0 on a disabled timeline (never passes the mask).
    id: u64,
    nargs: u8,
}

impl Event<'_> {
    /// The number of `$args` the message names.
    pub fn args(&self) -> usize {
        self.nargs as usize
    }

    /// The msg_id stored in entries of this event.
    pub fn msg_id(&self) -> u64 {
        self.id
    }

    /// Would a call log now (priority and timeline enabled)?
    #[inline(always)]
    pub fn enabled(&self) -> bool {
        self.id & self.tl.mask.load(Ordering::Relaxed) != 0
    }

    #[inline(always)]
    pub fn log(&self, args: [u64; 4]) {
        // The one test on the disabled path: the priority bit against the mask.
        if self.enabled() {
            self.tl.write(self.id, args);
        }
    }
    #[inline(always)]
    pub fn log0(&self) {
        self.log([0; 4])
    }
    #[inline(always)]
    pub fn log1(&self, a: u64) {
        self.log([a, 0, 0, 0])
    }
    #[inline(always)]
    pub fn log2(&self, a: u64, b: u64) {
        self.log([a, b, 0, 0])
    }
    #[inline(always)]
    pub fn log3(&self, a: u64, b: u64, c: u64) {
        self.log([a, b, c, 0])
    }
    #[inline(always)]
    pub fn log4(&self, a: u64, b: u64, c: u64, d: u64) {
        self.log([a, b, c, d])
    }
}

/// How many times a reader retries an entry that changes under it before
/// leaving it out.
const RETRIES: usize = 64;

/// Copy an A2 file that a logger may be writing (`live`: the whole file,
/// e.g. a shared mapping of it). Each entry is read as a seqlock: tsc,
/// the other words, tsc again; an entry whose tsc is 0 (being written) or
/// changed while it was read is retried and, if it keeps changing, stored
/// as unwritten (all zero). The string table is copied after the entries,
/// so every string an accepted entry refers to was interned before the
/// copy. Returns the copy and how many entries were left out.
pub fn consistent_copy_counted(live: &[u8]) -> (Vec<u8>, usize) {
    let mut out = vec![0u8; live.len()];
    if live.len() < HEADER_SIZE || !(live.as_ptr() as usize).is_multiple_of(8) {
        out.copy_from_slice(live);
        return (out, 0);
    }
    let word = |off: usize| -> &AtomicU64 {
        // SAFETY: off + 8 <= live.len() and off is 8-aligned (checked
        // above for the base); atomics so concurrent writes are defined.
        unsafe { &*(live.as_ptr().add(off) as *const AtomicU64) }
    };
    for off in (0..HEADER_SIZE).step_by(8) {
        out[off..off + 8].copy_from_slice(&word(off).load(Ordering::Relaxed).to_le_bytes());
    }
    let last = u64::from_le_bytes(out[24..32].try_into().expect("8 bytes"));
    let n = last
        .checked_add(1)
        .filter(|n| n.is_power_of_two())
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| n.checked_mul(64).is_some_and(|b| b + 64 <= live.len()))
        .unwrap_or(0);
    let mut skipped = 0;
    for i in 0..n {
        let at = HEADER_SIZE + 64 * i;
        let mut got = None;
        for _ in 0..RETRIES {
            let t1 = word(at).load(Ordering::Acquire);
            if t1 == 0 {
                // Never written, or being written right now.
                let id = word(at + 24).load(Ordering::Relaxed);
                if id == 0 {
                    got = Some([0u64; 8]);
                    break;
                }
                std::hint::spin_loop();
                continue;
            }
            let mut w = [t1, 0, 0, 0, 0, 0, 0, 0];
            for (k, v) in w.iter_mut().enumerate().skip(1) {
                *v = word(at + 8 * k).load(Ordering::Relaxed);
            }
            fence(Ordering::Acquire);
            if word(at).load(Ordering::Relaxed) == t1 {
                got = Some(w);
                break;
            }
        }
        let w = got.unwrap_or_else(|| {
            skipped += 1;
            [0; 8]
        });
        for (k, v) in w.iter().enumerate() {
            out[at + 8 * k..at + 8 * k + 8].copy_from_slice(&v.to_le_bytes());
        }
    }
    fence(Ordering::Acquire);
    let rest = HEADER_SIZE + 64 * n;
    for (k, b) in live[rest..].iter().enumerate() {
        // SAFETY: in bounds; a byte-wide atomic read of shared memory.
        let a = unsafe { &*(b as *const u8 as *const std::sync::atomic::AtomicU8) };
        out[rest + k] = a.load(Ordering::Relaxed);
    }
    (out, skipped)
}

/// [`consistent_copy_counted`] without the count.
pub fn consistent_copy(live: &[u8]) -> Vec<u8> {
    consistent_copy_counted(live).0
}

/// Does this A2 header carry the live tag (a logger has it mapped)?
pub fn is_live(header: &[u8]) -> bool {
    header.get(LIVE_TAG_OFFSET..LIVE_TAG_OFFSET + 8) == Some(&LIVE_TAG[..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tl-log-{}-{name}", std::process::id()));
        let _ = std::fs::remove_file(&d);
        d
    }

    fn rd(v: &[u8], off: usize) -> u64 {
        u64::from_le_bytes(v[off..off + 8].try_into().unwrap())
    }

    #[test]
    fn index_advances_filtered_do_not_and_wrap_keeps_newest() {
        let p = tmp("wrap");
        let tl = Timeline::create(&p, 16, 256).unwrap();
        let a = tl.define("cat", Priority::Info, "a $x").unwrap();
        let b = tl.define("cat", Priority::Packet, "b $x $y").unwrap();
        a.log1(1);
        assert_eq!(tl.logged(), 1);
        tl.set_priority(Priority::App);
        b.log2(1, 2);
        assert_eq!(tl.logged(), 1, "Packet is below App: filtered");
        tl.set_priority(Level::All);
        for i in 0..160 {
            a.log1(i);
        }
        assert_eq!(tl.logged(), 161);
        let s = tl.snapshot();
        // 161 entries in 16 slots: next = 161 & 15 = 1, the newest (x = 159)
        // in slot 0.
        assert_eq!(rd(&s, 16), 1);
        assert_eq!(rd(&s, 64 + 32), 159);
        assert_eq!(rd(&s, 64 + 64 + 32), 144);
        assert_eq!(rd(&s, 64 + 24), a.msg_id());
        assert!(!is_live(&s));
        drop(tl);
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn msg_id_packing_and_strings() {
        let p = tmp("ids");
        let tl = Timeline::create(&p, 16, 64).unwrap();
        let e = tl.define("engine", Priority::Error, "x $a").unwrap();
        // "engine\0" at 0, "x $a\0" at 7.
        assert_eq!(e.msg_id(), 7 << 16 | 1 << 1);
        let f = tl.define("net", Priority::Library, "x $a").unwrap();
        assert_eq!(f.msg_id(), 12u64 << 40 | 7 << 16 | 1 << 7);
        assert!(matches!(
            tl.define("c", Priority::Info, "$a $b $c $d $e"),
            Err(Error::TooManyArgs { found: 5, .. })
        ));
        let long = "y".repeat(60);
        assert!(matches!(
            tl.define("engine", Priority::Info, &long),
            Err(Error::StringTableFull(_))
        ));
        // A shorter one still fits after the failure.
        assert!(tl.define("engine", Priority::Info, "z").is_ok());
        drop(tl);
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn disabled_logs_nothing_but_checks_definitions() {
        let tl = Timeline::disabled();
        let e = tl.define("c", Priority::Info, "$a").unwrap();
        e.log1(5);
        assert!(!e.enabled());
        assert_eq!(tl.logged(), 0);
        assert!(tl.define("c", Priority::Info, "$a$b$c$d$e").is_err());
    }

    #[test]
    fn refuses_to_replace_other_files() {
        let p = tmp("other");
        std::fs::write(&p, b"not a timeline").unwrap();
        assert!(matches!(
            Timeline::create(&p, 16, 64),
            Err(Error::NotATimeline(_))
        ));
        assert_eq!(std::fs::read(&p).unwrap(), b"not a timeline");
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn bad_sizes_refused() {
        let p = tmp("sizes");
        assert!(matches!(
            Timeline::create(&p, 100, 64),
            Err(Error::Entries(100))
        ));
        assert!(matches!(
            Timeline::create(&p, 64, 1 << 20),
            Err(Error::Strings(_))
        ));
        assert!(!p.exists());
    }

    #[test]
    fn threads_share_one_timeline() {
        let p = tmp("threads");
        let tl = Timeline::create(&p, 1 << 14, 256).unwrap();
        let e = tl.define("t", Priority::Info, "v $thread $i").unwrap();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                s.spawn(move || {
                    for i in 0..2000 {
                        e.log2(t, i);
                    }
                });
            }
        });
        let s = tl.snapshot();
        let mut per = [0u64; 4];
        for i in 0..(1 << 14) {
            let at = 64 + 64 * i;
            if rd(&s, at) != 0 {
                per[rd(&s, at + 32) as usize] += 1;
            }
        }
        assert_eq!(per, [2000; 4]);
        drop(tl);
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn copy_skips_entry_being_written() {
        // An entry with tsc 0 but a msg_id: mid-write; it reads as unwritten.
        let mut v = vec![0u64; (64 + 64 * 4 + 64) / 8];
        v[3] = 3; // last = 3
        v[8 + 8 + 3] = 0x1234; // slot 1: msg_id set, tsc 0
        v[8] = 99; // slot 0 complete
        v[8 + 3] = 0x99;
        let bytes: Vec<u8> = v.iter().flat_map(|w| w.to_le_bytes()).collect();
        let aligned: Vec<u64> = bytes
            .chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        // SAFETY: a u64 vector viewed as bytes, 8-aligned.
        let view =
            unsafe { std::slice::from_raw_parts(aligned.as_ptr() as *const u8, aligned.len() * 8) };
        let (c, skipped) = consistent_copy_counted(view);
        assert_eq!(skipped, 1);
        assert_eq!(rd(&c, 64), 99);
        assert_eq!(rd(&c, 64 + 64 + 24), 0, "the torn entry is zeroed");
    }
}
