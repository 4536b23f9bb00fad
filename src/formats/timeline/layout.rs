//! Binary structures of the Snabb timeline layouts (spec sections 3 and 4).
//! Everything is little-endian (the writers were x86-64 only).

use crate::error::{Diagnostic, Error, Position, Result};
use std::path::Path;

pub const HEADER_SIZE: usize = 64;
pub const ENTRY_SIZE: usize = 64;
/// Mainline magic, on disk `01 00 1d 44 23 72 ff a3`.
pub const M_MAGIC: u64 = 0xa3ff_7223_441d_0001;
pub const A_DEFAULT_ENTRIES: u64 = 1024 * 1024;
pub const A_DEFAULT_STRINGS: u64 = 1_000_000;
pub const M_DEFAULT_ENTRIES: u64 = 1_000_000;
pub const M_DEFAULT_STRINGS: u64 = 1_000_000;
/// A2 priority names by number p (bit `1 << p` in msg_id).
pub const PRIORITIES: [&str; 8] = [
    "", "error", "warning", "info", "trace", "app", "packet", "library",
];
/// M msgid meaning "string table was full when the event was defined".
pub const M_UNKNOWN_MSGID: u16 = 0xffff;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    A2,
    M2,
    M3,
}

impl Layout {
    pub fn name(self) -> &'static str {
        match self {
            Layout::A2 => "A2",
            Layout::M2 => "M2",
            Layout::M3 => "M3",
        }
    }
    pub fn max_args(self) -> usize {
        match self {
            Layout::A2 => 4,
            _ => 6,
        }
    }
}

pub fn u16_at(d: &[u8], off: usize) -> u16 {
    d.get(off..off + 2)
        .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]))
}
pub fn u32_at(d: &[u8], off: usize) -> u32 {
    d.get(off..off + 4)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}
pub fn u64_at(d: &[u8], off: usize) -> u64 {
    d.get(off..off + 8).map_or(0, |b| {
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        u64::from_le_bytes(a)
    })
}

/// Family A header fields (3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AHeader {
    pub magic32: u32,
    pub major: u8,
    pub minor: u8,
    pub flags: u16,
    pub priority_mask: u64,
    pub next: u64,
    pub last: u64,
}

/// Mainline header fields (4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MHeader {
    pub major: u16,
    pub minor: u16,
    pub log_bytes: u32,
    pub strings_bytes: u32,
    /// M2 only; never written by Snabb (0).
    pub priority_mask: u16,
}

/// A parsed snapshot over the whole file's bytes.
#[derive(Debug)]
pub struct Snapshot<'a> {
    pub data: &'a [u8],
    pub layout: Layout,
    /// Number of ring slots.
    pub n: usize,
    pub strings_start: usize,
    pub strings_end: usize,
    pub a: Option<AHeader>,
    pub m: Option<MHeader>,
}

/// Is this the mainline magic?
pub fn has_m_magic(d: &[u8]) -> bool {
    d.len() >= 8 && u64_at(d, 0) == M_MAGIC
}

/// The family A heuristic of spec section 5: bytes 4..7 zero, `last + 1` a
/// power of two, and the ring ends before the end of the file.
pub fn a_heuristic(d: &[u8], file_len: u64) -> bool {
    if d.len() < HEADER_SIZE || d[4..8] != [0, 0, 0, 0] {
        return false;
    }
    let last = u64_at(d, 24);
    let Some(n) = last.checked_add(1) else {
        return false;
    };
    if !n.is_power_of_two() {
        return false;
    }
    match n.checked_mul(64).and_then(|x| x.checked_add(64)) {
        Some(end) => end < file_len,
        None => false,
    }
}

/// A file that is nearly a timeline: the start of the mainline magic cut
/// short, or an A-layout header whose ring runs past the end of the file.
pub fn near_miss(d: &[u8], file_len: u64) -> Option<(u64, String)> {
    let magic = M_MAGIC.to_le_bytes();
    if !d.is_empty() && d.len() < 8 && magic.starts_with(d) {
        return Some((
            d.len() as u64,
            format!(
                "the file ends after {} bytes, inside the mainline magic",
                d.len()
            ),
        ));
    }
    if d.len() < HEADER_SIZE || d[4..8] != [0, 0, 0, 0] {
        return None;
    }
    let n = u64_at(d, 24)
        .checked_add(1)
        .filter(|n| n.is_power_of_two())?;
    // Implausible ring sizes are not a near match.
    if n > 1 << 32 {
        return None;
    }
    let end = n * 64 + 64;
    (end >= file_len).then(|| {
        (
            file_len,
            format!(
                "A layout: the header's ring of {n} entries ends at byte {end}, but the file \
                 has {file_len} bytes (cut inside the ring)"
            ),
        )
    })
}

impl<'a> Snapshot<'a> {
    /// Parse the header and check every size against the file.
    pub fn parse(path: &Path, data: &'a [u8], diags: &mut Vec<Diagnostic>) -> Result<Snapshot<'a>> {
        let at = |off: u64, msg: String| Error::format(Position::at(path, off, None), msg);
        if data.len() < HEADER_SIZE {
            return Err(at(
                0,
                format!(
                    "file of {} bytes is shorter than the 64-byte timeline header",
                    data.len()
                ),
            ));
        }
        let len = data.len() as u64;
        if has_m_magic(data) {
            let h = MHeader {
                major: u16_at(data, 8),
                minor: u16_at(data, 10),
                log_bytes: u32_at(data, 12),
                strings_bytes: u32_at(data, 16),
                priority_mask: u16_at(data, 20),
            };
            let layout = match h.major {
                2 => Layout::M2,
                3 => Layout::M3,
                v => {
                    return Err(at(
                        8,
                        format!("unsupported mainline timeline major version {v} (known: 2, 3)"),
                    ))
                }
            };
            if !(h.log_bytes as usize).is_multiple_of(ENTRY_SIZE) {
                return Err(at(
                    12,
                    format!("log_bytes {} is not a multiple of 64", h.log_bytes),
                ));
            }
            let end = 64 + h.log_bytes as u64 + h.strings_bytes as u64;
            if end > len {
                return Err(at(
                    12,
                    format!(
                        "header declares {} bytes of entries and {} of strings ({end} in all), but the file has {len}",
                        h.log_bytes, h.strings_bytes
                    ),
                ));
            }
            if end < len {
                diags.push(Diagnostic::warning(
                    Position::at(path, end, None),
                    format!("{} bytes after the string table ignored", len - end),
                ));
            }
            let strings_start = 64 + h.log_bytes as usize;
            return Ok(Snapshot {
                data,
                layout,
                n: h.log_bytes as usize / ENTRY_SIZE,
                strings_start,
                strings_end: strings_start + h.strings_bytes as usize,
                a: None,
                m: Some(h),
            });
        }
        let h = AHeader {
            magic32: u32_at(data, 0),
            major: data[4],
            minor: data[5],
            flags: u16_at(data, 6),
            priority_mask: u64_at(data, 8),
            next: u64_at(data, 16),
            last: u64_at(data, 24),
        };
        if h.major != 0 || h.minor != 0 || h.flags != 0 {
            return Err(at(
                4,
                format!(
                    "not a timeline file: no mainline magic, and version/flags bytes {:02x} {:02x} {:04x} are not the zeros of the 2016 layout",
                    h.major, h.minor, h.flags
                ),
            ));
        }
        let n = match h.last.checked_add(1) {
            Some(n) if n.is_power_of_two() => n,
            _ => {
                return Err(at(
                    24,
                    format!(
                        "ring size last + 1 = {} is not a power of two",
                        h.last as u128 + 1
                    ),
                ))
            }
        };
        let ring_end = n as u128 * 64 + 64;
        if ring_end > len as u128 {
            return Err(at(
                24,
                format!("ring of {n} entries ({ring_end} bytes with the header) does not fit the file of {len} bytes"),
            ));
        }
        if h.next > h.last {
            diags.push(Diagnostic::warning(
                Position::at(path, 16, None),
                format!("header next = {} is outside the ring of {n} slots", h.next),
            ));
        }
        let snap = Snapshot {
            data,
            layout: Layout::A2,
            n: n as usize,
            strings_start: ring_end as usize,
            strings_end: data.len(),
            a: Some(h),
            m: None,
        };
        if let Some(slot) = snap.looks_a1() {
            diags.push(Diagnostic::warning(
                Position::at(path, snap.entry_offset(slot), Some(slot as u64)),
                "entry shape of the A1 layout (msg_id at offset 16 with a plain priority number); read as A2 as Snabb's final dump would",
            ));
        }
        Ok(snap)
    }

    /// Spec 5.3: A1 cannot be told from A2 by the header; in the first written
    /// slot A2 has a one-hot priority bit in msg_id (offset 24) while A1 has a
    /// plain priority number 1–9 in the low bits of offset 16.
    fn looks_a1(&self) -> Option<usize> {
        let slot = (0..self.n.min(4096)).find(|&i| self.tsc_raw(i) != 0)?;
        let e = self.entry(slot);
        let a2_prio = u64_at(e, 24) & 0xfe;
        let a1_prio = u64_at(e, 16) & 0xff;
        (a2_prio == 0 && (1..=9).contains(&a1_prio)).then_some(slot)
    }

    #[inline]
    pub fn entry(&self, slot: usize) -> &'a [u8] {
        let o = HEADER_SIZE + slot * ENTRY_SIZE;
        &self.data[o..o + ENTRY_SIZE]
    }
    pub fn entry_offset(&self, slot: usize) -> u64 {
        (HEADER_SIZE + slot * ENTRY_SIZE) as u64
    }
    #[inline]
    pub fn tsc_raw(&self, slot: usize) -> u64 {
        u64_at(self.entry(slot), 0)
    }
    /// Unwritten slots are all zero; a zero tsc means "never written".
    #[inline]
    pub fn written(&self, slot: usize) -> bool {
        let t = self.tsc_raw(slot);
        match self.layout {
            Layout::M3 => f64::from_bits(t) != 0.0,
            _ => t != 0,
        }
    }
    pub fn strings(&self) -> &'a [u8] {
        &self.data[self.strings_start..self.strings_end]
    }
    /// The NUL-terminated string at `off` in the table (to the table's end
    /// if unterminated); None when the offset is outside the table.
    pub fn cstr(&self, off: usize) -> Option<&'a [u8]> {
        let t = self.strings();
        let s = t.get(off..)?;
        if s.is_empty() {
            return None;
        }
        let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
        Some(&s[..end])
    }

    /// Oldest slot as Snabb's final dump finds it (3.8 step 3): slot 0 unless
    /// another non-zero tsc is strictly smaller; ties keep the lower index.
    pub fn a_oldest_snabb(&self) -> usize {
        let bt = self.tsc_raw(0);
        if bt == 0 || self.n < 2 {
            return 0;
        }
        // Two halves scanned at once: the scan touches every page of a
        // large ring before the first row can be printed.
        let mid = self.n / 2;
        let (lo, hi) = if self.n >= 1 << 16 {
            std::thread::scope(|sc| {
                let h = sc.spawn(|| self.min_nonzero(mid..self.n));
                let lo = self.min_nonzero(1..mid);
                (lo, h.join().ok().flatten())
            })
        } else {
            (self.min_nonzero(1..mid), self.min_nonzero(mid..self.n))
        };
        let mut best = (bt, 0);
        for c in [lo, hi].into_iter().flatten() {
            if c.0 < best.0 {
                best = c;
            }
        }
        best.1
    }

    /// The smallest non-zero tsc in `slots` and its first slot.
    fn min_nonzero(&self, slots: std::ops::Range<usize>) -> Option<(u64, usize)> {
        let mut best: Option<(u64, usize)> = None;
        for i in slots {
            let t = self.tsc_raw(i);
            if t != 0 && best.is_none_or(|(bt, _)| t < bt) {
                best = Some((t, i));
            }
        }
        best
    }

    /// Ring order of the written slots, oldest first. A: from the oldest
    /// non-zero tsc (Snabb's scan, which also copes with an unwritten slot 0);
    /// M: after the slot with the largest tsc (4.6). Unwritten slots skipped.
    pub fn order(&self) -> Vec<u32> {
        let n = self.n;
        let start = match self.layout {
            Layout::A2 => self.min_nonzero(0..n).map_or(0, |(_, i)| i),
            _ => self.m_newest().map_or(0, |i| (i + 1) % n.max(1)),
        };
        let mut v = Vec::new();
        for j in 0..n {
            let s = (start + j) % n;
            if self.written(s) {
                v.push(s as u32);
            }
        }
        v
    }

    /// M: the slot with the largest timestamp (the writer's head is the
    /// slot after it). Ties resolve to the later slot of a run of equals.
    pub fn m_newest(&self) -> Option<usize> {
        let n = self.n;
        let key = |i: usize| -> f64 {
            let t = self.tsc_raw(i);
            match self.layout {
                Layout::M3 => f64::from_bits(t),
                _ => t as f64,
            }
        };
        let raw_gt = |a: usize, b: usize| -> bool {
            match self.layout {
                Layout::M3 => key(a).total_cmp(&key(b)).is_gt(),
                _ => self.tsc_raw(a) > self.tsc_raw(b),
            }
        };
        let mut best: Option<usize> = None;
        for i in 0..n {
            if !self.written(i) {
                continue;
            }
            if best.is_none_or(|b| raw_gt(i, b)) {
                best = Some(i);
            }
        }
        let mut b = best?;
        // A run of equal maxima: the newest is the last of the run.
        for _ in 0..n {
            let nx = (b + 1) % n;
            if nx != b && self.tsc_raw(nx) == self.tsc_raw(b) && self.written(nx) {
                b = nx;
            } else {
                break;
            }
        }
        Some(b)
    }
}

/// Placeholder name ranges in a format: `$` then a maximal run of ASCII
/// letters and digits (Lua `%w`). Returns (start of `$`, end of name).
pub fn placeholders(fmt: &[u8]) -> Vec<(usize, usize)> {
    let mut v = Vec::new();
    let mut i = 0;
    while i < fmt.len() {
        if fmt[i] == b'$' {
            let mut j = i + 1;
            while j < fmt.len() && fmt[j].is_ascii_alphanumeric() {
                j += 1;
            }
            if j > i + 1 {
                v.push((i, j));
                i = j;
                continue;
            }
        }
        i += 1;
    }
    v
}

/// A2 priority number from a msg_id: index of the set bit in bits 1..7.
pub fn a_priority(msg_id: u64) -> Option<usize> {
    let b = msg_id & 0xfe;
    (b != 0).then(|| b.trailing_zeros() as usize)
}

/// Parsed mainline event spec (4.4).
#[derive(Debug, Clone, PartialEq)]
pub struct MSpec {
    pub level: Option<u8>,
    pub rate: Option<u8>,
    pub category: String,
    pub event: String,
    pub attrs: String,
    pub args: Vec<String>,
    pub description: String,
}

/// Parse `<L,R|R>|<category>.<event>[ attrs]:<argnames>\n<description>`.
/// Lenient: missing parts become empty.
pub fn parse_mspec(s: &[u8]) -> MSpec {
    let s = String::from_utf8_lossy(s);
    let (first, desc) = match s.split_once('\n') {
        Some((a, b)) => (a, b.to_string()),
        None => (&s[..], String::new()),
    };
    let (prefix, rest) = match first.split_once('|') {
        Some((p, r)) => (p, r),
        None => ("", first),
    };
    let digit = |t: &str| -> Option<u8> {
        let t = t.trim();
        (t.len() == 1 && t.as_bytes()[0].is_ascii_digit()).then(|| t.as_bytes()[0] - b'0')
    };
    let (level, rate) = match prefix.split_once(',') {
        Some((l, r)) => (digit(l), digit(r)),
        None => (None, digit(prefix)),
    };
    let (head, argtxt) = match rest.split_once(':') {
        Some((h, a)) => (h, a),
        None => (rest, ""),
    };
    let (name, attrs) = match head.split_once(' ') {
        Some((n, a)) => (n, a.trim().to_string()),
        None => (head, String::new()),
    };
    // The category is one dotted component (a module's last name).
    let (category, event) = match name.split_once('.') {
        Some((c, e)) => (c.to_string(), e.to_string()),
        None => (String::new(), name.to_string()),
    };
    MSpec {
        level,
        rate,
        category,
        event,
        attrs,
        args: argtxt.split_whitespace().map(str::to_string).collect(),
        description: desc,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholder_rules() {
        let f = b"underscore $tcp_count, digit-led $2i, double $$z, lone $ sign";
        let names: Vec<&[u8]> = placeholders(f)
            .into_iter()
            .map(|(a, b)| &f[a + 1..b])
            .collect();
        assert_eq!(names, vec![&b"tcp"[..], b"2i", b"z"]);
    }

    /// The oldest slot found in two halves (on two threads for a large
    /// ring) is the one scan's: the first slot of the smallest non-zero
    /// tsc, slot 0 when slot 0 is unwritten; with unwritten slots and
    /// equal minima in both halves and on their border.
    #[test]
    fn oldest_in_halves_is_the_one_scan() {
        let one_scan = |s: &Snapshot| {
            let (mut best, mut bt) = (0, s.tsc_raw(0));
            for i in 1..s.n {
                let t = s.tsc_raw(i);
                if t != 0 && t < bt {
                    best = i;
                    bt = t;
                }
            }
            best
        };
        let mut rng = crate::model::TestRng(0x9e37_79b9_7f4a_7c15);
        for n in [1usize, 2, 4, 8, 1 << 16, 1 << 17] {
            for round in 0..12 {
                let mut data = vec![0u8; 64 + n * 64];
                data[24..32].copy_from_slice(&(n as u64 - 1).to_le_bytes());
                let mut tsc = vec![0u64; n];
                for t in tsc.iter_mut() {
                    *t = match rng.below(4) {
                        0 => 0,
                        1 => 1 + rng.below(5),
                        _ => 1 + rng.below(1 << 40),
                    };
                }
                // The smallest value again at the halves' border and in
                // both halves; slot 0 unwritten in some rounds.
                let low = 1 + rng.below(3);
                for at in [n / 2, n / 2 + 1, rng.below(n as u64) as usize] {
                    if at < n && round % 3 != 0 {
                        tsc[at] = low;
                    }
                }
                if round % 4 == 1 {
                    tsc[0] = 0;
                }
                for (s, t) in tsc.iter().enumerate() {
                    data[64 + s * 64..72 + s * 64].copy_from_slice(&t.to_le_bytes());
                }
                data.push(0);
                let snap = Snapshot::parse(Path::new("t"), &data, &mut Vec::new()).unwrap();
                assert_eq!(
                    snap.a_oldest_snabb(),
                    one_scan(&snap),
                    "n {n}, round {round}"
                );
            }
        }
    }

    #[test]
    fn mspec() {
        let m = parse_mspec(b"1,8|selftest.two app=demo: a b\nAn event.\nMore.");
        assert_eq!((m.level, m.rate), (Some(1), Some(8)));
        assert_eq!(m.category, "selftest");
        assert_eq!(m.event, "two");
        assert_eq!(m.attrs, "app=demo");
        assert_eq!(m.args, vec!["a", "b"]);
        assert_eq!(m.description, "An event.\nMore.");
        let m = parse_mspec(b"9|selftest.zero app=demo:");
        assert_eq!((m.level, m.rate), (None, Some(9)));
        assert!(m.args.is_empty());
    }
}
