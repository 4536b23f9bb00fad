//! DLT protocol v1 binary structures (spec kpi-dlt.md §4): storage header,
//! standard header, extras, extended header, verbose type info.

/// Storage-header pattern of protocol v1.
pub const PATTERN: [u8; 4] = *b"DLT\x01";
/// Storage-header pattern of protocol v2 (dlt-daemon ≥ 3.0); not supported.
pub const PATTERN_V2: [u8; 4] = *b"DLT\x02";

pub const STORAGE_LEN: usize = 16;
pub const STD_LEN: usize = 4;
pub const EXT_LEN: usize = 10;
/// Storage + standard header: what must be present to know a record's size.
pub const MIN_RECORD: usize = STORAGE_LEN + STD_LEN;
/// Largest possible record: the storage header plus a u16 `len`.
pub const MAX_RECORD: usize = STORAGE_LEN + u16::MAX as usize;

pub const HTYP_UEH: u8 = 0x01;
pub const HTYP_MSBF: u8 = 0x02;
pub const HTYP_WEID: u8 = 0x04;
pub const HTYP_WSID: u8 = 0x08;
pub const HTYP_WTMS: u8 = 0x10;
pub const HTYP_VERSION1: u8 = 0x20;

pub const MSIN_VERB: u8 = 0x01;

pub const TYPE_LOG: u8 = 0;
pub const TYPE_CONTROL: u8 = 3;
pub const CONTROL_RESPONSE: u8 = 2;
pub const CONTROL_TIME: u8 = 3;

// Verbose argument type-info bits (§4.5).
pub const TI_TYLE: u32 = 0x0000_000f;
pub const TI_BOOL: u32 = 0x0000_0010;
pub const TI_SINT: u32 = 0x0000_0020;
pub const TI_UINT: u32 = 0x0000_0040;
pub const TI_FLOA: u32 = 0x0000_0080;
pub const TI_STRG: u32 = 0x0000_0200;
pub const TI_RAWD: u32 = 0x0000_0400;
pub const TI_VARI: u32 = 0x0000_0800;
pub const TI_FIXP: u32 = 0x0000_1000;
pub const TI_TRAI: u32 = 0x0000_2000;
pub const TI_SCOD: u32 = 0x0003_8000;
pub const SCOD_ASCII: u32 = 0;
pub const SCOD_UTF8: u32 = 0x0000_8000;
pub const SCOD_HEX: u32 = 0x0001_0000;
pub const SCOD_BIN: u32 = 0x0001_8000;

/// Size of the optional extras selected by `htyp`.
pub const fn extras_len(htyp: u8) -> usize {
    let mut n = 0;
    if htyp & HTYP_WEID != 0 {
        n += 4;
    }
    if htyp & HTYP_WSID != 0 {
        n += 4;
    }
    if htyp & HTYP_WTMS != 0 {
        n += 4;
    }
    n
}

/// [`headers_len`] of the five low `htyp` bits (the others do not count).
const HEADERS_LEN: [u8; 32] = {
    let mut t = [0u8; 32];
    let mut i = 0;
    while i < 32 {
        let h = i as u8;
        t[i] = (STD_LEN + extras_len(h) + if h & HTYP_UEH != 0 { EXT_LEN } else { 0 }) as u8;
        i += 1;
    }
    t
};

/// Bytes from the standard header to the payload.
#[inline]
pub fn headers_len(htyp: u8) -> usize {
    HEADERS_LEN[(htyp & 0x1f) as usize] as usize
}

/// The size of the record `b` starts with, if its headers are acceptable.
/// Every record of a file passes here twice (pre-scan, main pass): the
/// acceptable case inline, why not out of line.
#[inline]
pub fn check_headers(b: &[u8]) -> Result<usize, String> {
    record_len(b).ok_or_else(|| headers_refused(b))
}

/// [`check_headers`] without the reason.
#[inline]
pub fn record_len(b: &[u8]) -> Option<usize> {
    let h = b.first_chunk::<MIN_RECORD>()?;
    let htyp = h[16];
    let len = u16::from_be_bytes([h[18], h[19]]) as usize;
    // Version bits 0 or 1: dlt-convert reads both alike (loggers such as
    // Chipmunk's write 0); 2–7 would take `DLT\x01` itself (0x44) for a
    // header, so they stay damage for resynchronisation.
    (h[..4] == PATTERN && htyp >> 6 == 0 && len >= headers_len(htyp)).then_some(STORAGE_LEN + len)
}

/// Why [`check_headers`] refuses `b`.
#[cold]
#[inline(never)]
fn headers_refused(b: &[u8]) -> String {
    if b.len() < MIN_RECORD {
        return "record shorter than its headers".into();
    }
    if b[..4] != PATTERN {
        if b[..4] == PATTERN_V2 {
            return "DLT protocol v2 storage header (not supported)".into();
        }
        return "no storage header pattern DLT\\x01".into();
    }
    let htyp = b[16];
    let vers = htyp >> 5;
    if b[16..20] == PATTERN {
        // A logger that stopped after the storage header.
        return "storage header with no message (another storage header follows it)".into();
    }
    if vers > 1 {
        return format!("standard header version {vers} (htyp 0x{htyp:02x}), expected 0 or 1");
    }
    let len = u16::from_be_bytes([b[18], b[19]]) as usize;
    let need = headers_len(htyp);
    format!("message length {len} shorter than its headers ({need} bytes)")
}

/// Extended header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ext {
    pub msin: u8,
    pub noar: u8,
    pub apid: [u8; 4],
    pub ctid: [u8; 4],
}

impl Ext {
    pub fn verbose(&self) -> bool {
        self.msin & MSIN_VERB != 0
    }
    pub fn mstp(&self) -> u8 {
        (self.msin & 0x0e) >> 1
    }
    pub fn mtin(&self) -> u8 {
        self.msin >> 4
    }
}

/// One decoded record (headers parsed, payload borrowed).
#[derive(Debug, Clone, Copy)]
pub struct Msg<'a> {
    /// File offset of the storage header.
    pub offset: u64,
    pub secs: u32,
    pub usecs: i32,
    pub storage_ecu: [u8; 4],
    pub htyp: u8,
    pub mcnt: u8,
    pub len: u16,
    pub ecu: Option<[u8; 4]>,
    pub session: Option<u32>,
    pub tmsp: Option<u32>,
    pub ext: Option<Ext>,
    pub payload: &'a [u8],
    /// The whole record, storage header included.
    pub raw: &'a [u8],
}

/// The first four bytes (callers checked the length; one comparison
/// instead of four bounds checks, and zeros rather than a panic).
#[inline]
fn id4(b: &[u8]) -> [u8; 4] {
    b.first_chunk().copied().unwrap_or_default()
}

/// What a pass over headers alone (the reader's pre-scan) takes of a
/// record: read straight from its bytes, without the whole [`Msg`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub secs: u32,
    pub usecs: i32,
    /// The ECU as dlt-convert chooses it: header extra, else storage header.
    pub ecu: [u8; 4],
    pub session: Option<u32>,
    pub tmsp: Option<u32>,
    /// APID and CTID, if the record has an extended header.
    pub ids: Option<([u8; 4], [u8; 4])>,
}

impl Head {
    /// The headers of a record that passed [`check_headers`] and is whole
    /// (`raw.len() == 16 + len`), as [`Msg::parse`] reads them.
    #[inline]
    pub fn read(raw: &[u8]) -> Head {
        let htyp = raw[16];
        let mut p = MIN_RECORD;
        let mut take4 = |on: bool| {
            on.then(|| {
                let v = id4(raw.get(p..).unwrap_or_default());
                p += 4;
                v
            })
        };
        let ecu = take4(htyp & HTYP_WEID != 0);
        let session = take4(htyp & HTYP_WSID != 0).map(u32::from_be_bytes);
        let tmsp = take4(htyp & HTYP_WTMS != 0).map(u32::from_be_bytes);
        let ids = (htyp & HTYP_UEH != 0).then(|| {
            let e = raw.get(p + 2..).unwrap_or_default();
            (id4(e), id4(e.get(4..).unwrap_or_default()))
        });
        Head {
            secs: u32::from_le_bytes(id4(&raw[4..])),
            usecs: i32::from_le_bytes(id4(&raw[8..])),
            ecu: ecu.unwrap_or_else(|| id4(&raw[12..])),
            session,
            tmsp,
            ids,
        }
    }

    /// The same of a parsed record.
    pub fn of(m: &Msg) -> Head {
        Head {
            secs: m.secs,
            usecs: m.usecs,
            ecu: m.ecu_id(),
            session: m.session,
            tmsp: m.tmsp,
            ids: m.ext.map(|e| (e.apid, e.ctid)),
        }
    }

    /// The storage time in nanoseconds.
    pub fn storage_ns(&self) -> i64 {
        (self.secs as i64) * 1_000_000_000 + (self.usecs as i64) * 1000
    }
}

impl<'a> Msg<'a> {
    /// Parse a record whose headers passed [`check_headers`] and whose
    /// bytes are all present (`raw.len() == 16 + len`).
    #[inline]
    pub fn parse(offset: u64, raw: &'a [u8]) -> Option<Msg<'a>> {
        Self::parse_as(offset, raw, false)
    }

    /// [`Msg::parse`] of a record cut short after its headers (the next
    /// storage header began inside it): the payload is what is present.
    pub fn parse_cut(offset: u64, raw: &'a [u8]) -> Option<Msg<'a>> {
        Self::parse_as(offset, raw, true)
    }

    #[inline(always)]
    fn parse_as(offset: u64, raw: &'a [u8], cut: bool) -> Option<Msg<'a>> {
        if raw.len() < MIN_RECORD {
            return None;
        }
        let htyp = raw[16];
        let len = u16::from_be_bytes([raw[18], raw[19]]);
        let hl = headers_len(htyp);
        let fits = if cut {
            (STORAGE_LEN + hl..STORAGE_LEN + len as usize).contains(&raw.len())
        } else {
            raw.len() == STORAGE_LEN + len as usize
        };
        if (len as usize) < hl || !fits {
            return None;
        }
        let mut p = MIN_RECORD;
        let mut take4 = || {
            let v = id4(&raw[p..]);
            p += 4;
            v
        };
        let ecu = (htyp & HTYP_WEID != 0).then(&mut take4);
        let session = (htyp & HTYP_WSID != 0).then(|| u32::from_be_bytes(take4()));
        let tmsp = (htyp & HTYP_WTMS != 0).then(|| u32::from_be_bytes(take4()));
        let ext = if htyp & HTYP_UEH != 0 {
            let e = Ext {
                msin: raw[p],
                noar: raw[p + 1],
                apid: id4(&raw[p + 2..]),
                ctid: id4(&raw[p + 6..]),
            };
            p += EXT_LEN;
            Some(e)
        } else {
            None
        };
        Some(Msg {
            offset,
            secs: u32::from_le_bytes(id4(&raw[4..])),
            usecs: i32::from_le_bytes(id4(&raw[8..])),
            storage_ecu: id4(&raw[12..]),
            htyp,
            mcnt: raw[17],
            len,
            ecu,
            session,
            tmsp,
            ext,
            payload: &raw[p..],
            raw,
        })
    }

    pub fn msbf(&self) -> bool {
        self.htyp & HTYP_MSBF != 0
    }
    pub fn verbose(&self) -> bool {
        self.ext.is_some_and(|e| e.verbose())
    }
    /// The ECU as dlt-convert chooses it: header extra, else storage header.
    pub fn ecu_id(&self) -> [u8; 4] {
        self.ecu.unwrap_or(self.storage_ecu)
    }
}

/// An id as text: cut at the first NUL (what dlt-convert shows, minus padding).
pub fn id_text(id: &[u8; 4]) -> &[u8] {
    let n = id.iter().position(|&b| b == 0).unwrap_or(4);
    &id[..n]
}

/// A 4-byte id from text: NUL-padded, longer text cut to 4 bytes.
pub fn id_from(s: &str) -> [u8; 4] {
    let mut id = [0u8; 4];
    for (d, s) in id.iter_mut().zip(s.bytes()) {
        *d = s;
    }
    id
}

/// Payload field reader honouring MSBF.
pub struct Cursor<'a> {
    pub b: &'a [u8],
    pub pos: usize,
    pub be: bool,
}

impl<'a> Cursor<'a> {
    pub fn new(b: &'a [u8], be: bool) -> Cursor<'a> {
        Cursor { b, pos: 0, be }
    }
    pub fn left(&self) -> usize {
        self.b.len() - self.pos
    }
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.left() < n {
            return None;
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Some(s)
    }
    pub fn u8(&mut self) -> Option<u8> {
        self.bytes(1).map(|b| b[0])
    }
    pub fn u16(&mut self) -> Option<u16> {
        let b = self.bytes(2)?;
        let a = [b[0], b[1]];
        Some(if self.be {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        })
    }
    pub fn u32(&mut self) -> Option<u32> {
        let b = self.bytes(4)?;
        let a = id4(b);
        Some(if self.be {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        })
    }
    pub fn u64(&mut self) -> Option<u64> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(if self.be {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        })
    }
}

/// The string arguments of a verbose message, each cut at its first NUL.
/// `None` if the message is not verbose or any argument is not an
/// ASCII/UTF-8 string (or the payload is short). A KPI message holds one
/// argument per dataset (a CHK message about 50): each argument's type
/// and length are read with one bounds check, not through a [`Cursor`].
pub fn string_args<'a>(m: &Msg<'a>, out: &mut Vec<&'a [u8]>) -> bool {
    out.clear();
    let Some(ext) = m.ext else { return false };
    if !ext.verbose() {
        return false;
    }
    let p = m.payload;
    let be = m.msbf();
    let u16_at = |b: [u8; 2]| {
        if be {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        }
    };
    let mut at = 0;
    for _ in 0..ext.noar {
        // Type info (u32) and length (u16).
        let Some(&[t0, t1, t2, t3, l0, l1]) = p.get(at..at + 6) else {
            return false;
        };
        let ti = if be {
            u32::from_be_bytes([t0, t1, t2, t3])
        } else {
            u32::from_le_bytes([t0, t1, t2, t3])
        };
        let scod = ti & TI_SCOD;
        if ti & TI_STRG == 0 || !(scod == SCOD_ASCII || scod == SCOD_UTF8) {
            return false;
        }
        at += 6;
        if ti & TI_VARI != 0 {
            // The argument's name: its length, then its bytes.
            let Some(&[n0, n1]) = p.get(at..at + 2) else {
                return false;
            };
            at += 2 + u16_at([n0, n1]) as usize;
        }
        let len = u16_at([l0, l1]) as usize;
        let Some(s) = p.get(at..at + len) else {
            return false;
        };
        at += len;
        out.push(&s[..first_nul(s)]);
    }
    true
}

/// Where the first NUL of `s` is (its length if none; `args::cut_nul`
/// cuts there). String arguments are mostly under 32 bytes (KPI types,
/// datasets): a word at a time, inline, costs less than the vectorised
/// search's call and set-up, which was three quarters of [`string_args`];
/// long ones still go to `memchr`.
#[inline]
pub fn first_nul(s: &[u8]) -> usize {
    if s.len() > 64 {
        return memchr::memchr(0, s).unwrap_or(s.len());
    }
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut words = s.chunks_exact(8);
    let mut at = 0;
    for w in words.by_ref() {
        let x = u64::from_le_bytes(w.try_into().unwrap_or_default());
        // The lowest byte flagged is the first zero byte (a borrow can
        // only flag bytes above a zero one).
        let z = x.wrapping_sub(ONES) & !x & HIGHS;
        if z != 0 {
            return at + (z.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    let rest = words.remainder();
    at + rest.iter().position(|&b| b == 0).unwrap_or(rest.len())
}

/// Append one verbose ASCII string argument (type info 0x200, u16 length
/// including the NUL), little-endian as an x86 libdlt writes it.
pub fn put_string_arg(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&TI_STRG.to_le_bytes());
    out.extend_from_slice(&((s.len() + 1) as u16).to_le_bytes());
    out.extend_from_slice(s);
    out.push(0);
}

/// Size of a string argument on the wire.
pub fn string_arg_len(s: &[u8]) -> usize {
    4 + 2 + s.len() + 1
}

/// Header fields of one record to write.
pub struct RecordSpec<'a> {
    pub secs: u32,
    pub usecs: i32,
    pub ecu: [u8; 4],
    pub mcnt: u8,
    pub session: u32,
    pub tmsp: u32,
    pub msin: u8,
    pub noar: u8,
    pub apid: [u8; 4],
    pub ctid: [u8; 4],
    pub payload: &'a [u8],
}

/// Append a whole record as dlt-receive stores a libdlt verbose message:
/// htyp 0x3d (UEH, WEID, WSID, WTMS, version 1, little-endian payload).
pub fn put_record(out: &mut Vec<u8>, r: &RecordSpec) {
    put_record_flags(out, HTYP_UEH | HTYP_WEID | HTYP_WSID | HTYP_WTMS, r)
}

/// Append a record with the header parts `flags` selects (UEH, WEID, WSID,
/// WTMS; version 1 and a little-endian payload are implied).
pub fn put_record_flags(out: &mut Vec<u8>, flags: u8, r: &RecordSpec) {
    let htyp = (flags & (HTYP_UEH | HTYP_WEID | HTYP_WSID | HTYP_WTMS)) | HTYP_VERSION1;
    let len = headers_len(htyp) + r.payload.len();
    debug_assert!(len <= u16::MAX as usize);
    out.extend_from_slice(&PATTERN);
    out.extend_from_slice(&r.secs.to_le_bytes());
    out.extend_from_slice(&r.usecs.to_le_bytes());
    out.extend_from_slice(&r.ecu);
    out.push(htyp);
    out.push(r.mcnt);
    out.extend_from_slice(&(len as u16).to_be_bytes());
    if htyp & HTYP_WEID != 0 {
        out.extend_from_slice(&r.ecu);
    }
    if htyp & HTYP_WSID != 0 {
        out.extend_from_slice(&r.session.to_be_bytes());
    }
    if htyp & HTYP_WTMS != 0 {
        out.extend_from_slice(&r.tmsp.to_be_bytes());
    }
    if htyp & HTYP_UEH != 0 {
        out.push(r.msin);
        out.push(r.noar);
        out.extend_from_slice(&r.apid);
        out.extend_from_slice(&r.ctid);
    }
    out.extend_from_slice(r.payload);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `string_args` as it was, through a [`Cursor`].
    fn string_args_by_cursor<'a>(m: &Msg<'a>, out: &mut Vec<&'a [u8]>) -> bool {
        out.clear();
        let Some(ext) = m.ext else { return false };
        if !ext.verbose() {
            return false;
        }
        let mut c = Cursor::new(m.payload, m.msbf());
        for _ in 0..ext.noar {
            let Some(ti) = c.u32() else { return false };
            let scod = ti & TI_SCOD;
            if ti & TI_STRG == 0 || !(scod == SCOD_ASCII || scod == SCOD_UTF8) {
                return false;
            }
            let Some(len) = c.u16() else { return false };
            if ti & TI_VARI != 0 {
                let Some(nl) = c.u16() else { return false };
                if c.bytes(nl as usize).is_none() {
                    return false;
                }
            }
            let Some(s) = c.bytes(len as usize) else {
                return false;
            };
            out.push(&s[..first_nul(s)]);
        }
        true
    }

    /// The arguments read with one check each are those read field by
    /// field, on random payloads of string arguments (ASCII, UTF-8, named,
    /// other types, NULs, lengths past the end, cut anywhere) in both byte
    /// orders.
    #[test]
    fn string_args_agree_with_the_cursor() {
        let mut rng = crate::model::TestRng(0x9e37_79b9_7f4a_7c15);
        let mut rnd = move |n: u64| rng.below(n);
        let (mut accepted, mut refused) = (0, 0);
        for case in 0..20_000 {
            let be = case % 2 == 1;
            let noar = rnd(6) as u8;
            let mut payload = Vec::new();
            for _ in 0..noar + rnd(2) as u8 {
                let ti = match rnd(8) {
                    0 => TI_UINT | 4,
                    1 => TI_STRG | SCOD_HEX,
                    2 => TI_STRG | TI_VARI,
                    3 => TI_STRG | SCOD_UTF8,
                    _ => TI_STRG,
                };
                let text: Vec<u8> = (0..rnd(12))
                    .map(|_| [b'a', 0, 0xc3, b';'][rnd(4) as usize])
                    .collect();
                let len = (text.len() as u64 + rnd(3)).saturating_sub(1) as u16;
                let put16 = |v: u16, out: &mut Vec<u8>| {
                    out.extend_from_slice(&if be { v.to_be_bytes() } else { v.to_le_bytes() })
                };
                payload.extend_from_slice(&if be {
                    ti.to_be_bytes()
                } else {
                    ti.to_le_bytes()
                });
                put16(len, &mut payload);
                if ti & TI_VARI != 0 {
                    put16(3, &mut payload);
                    payload.extend_from_slice(b"ab\0");
                }
                payload.extend_from_slice(&text);
            }
            payload.truncate(payload.len() - rnd(3).min(payload.len() as u64) as usize);
            let mut raw = Vec::new();
            put_record(
                &mut raw,
                &RecordSpec {
                    secs: 0,
                    usecs: 0,
                    ecu: *b"E\0\0\0",
                    mcnt: 0,
                    session: 0,
                    tmsp: 0,
                    msin: if rnd(10) == 0 { 0x40 } else { 0x41 },
                    noar,
                    apid: *b"PROC",
                    ctid: *b"PROC",
                    payload: &payload,
                },
            );
            raw[16] |= if be { HTYP_MSBF } else { 0 };
            let m = Msg::parse(0, &raw).unwrap();
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let got = string_args(&m, &mut a);
            assert_eq!(got, string_args_by_cursor(&m, &mut b), "case {case}");
            if got {
                assert_eq!(a, b, "case {case}");
                accepted += 1;
            } else {
                refused += 1;
            }
        }
        assert!(accepted > 1000 && refused > 1000, "{accepted} / {refused}");
    }

    /// The inline check gives what the checks one by one give (size or
    /// reason), for every htyp, length around the headers' size, pattern
    /// and a short record.
    #[test]
    fn check_headers_agrees_with_the_checks_one_by_one() {
        fn reference(b: &[u8]) -> Result<usize, String> {
            if b.len() < MIN_RECORD {
                return Err("record shorter than its headers".into());
            }
            if b[..4] != PATTERN {
                if b[..4] == PATTERN_V2 {
                    return Err("DLT protocol v2 storage header (not supported)".into());
                }
                return Err("no storage header pattern DLT\\x01".into());
            }
            let htyp = b[16];
            let vers = htyp >> 5;
            if vers > 1 {
                return Err(format!(
                    "standard header version {vers} (htyp 0x{htyp:02x}), expected 0 or 1"
                ));
            }
            let len = u16::from_be_bytes([b[18], b[19]]) as usize;
            let need = STD_LEN + extras_len(htyp) + if htyp & HTYP_UEH != 0 { EXT_LEN } else { 0 };
            if len < need {
                return Err(format!(
                    "message length {len} shorter than its headers ({need} bytes)"
                ));
            }
            Ok(STORAGE_LEN + len)
        }
        let mut n = 0;
        for pattern in [PATTERN, PATTERN_V2, *b"DLX\x01"] {
            for htyp in 0..=255u8 {
                for len in [0u16, 3, 4, 5, 13, 14, 15, 17, 18, 26, 27, 28, 29, 30, 65535] {
                    let mut b = [0u8; MIN_RECORD];
                    b[..4].copy_from_slice(&pattern);
                    b[16] = htyp;
                    b[18..20].copy_from_slice(&len.to_be_bytes());
                    for cut in [MIN_RECORD, MIN_RECORD - 1, 0] {
                        assert_eq!(check_headers(&b[..cut]), reference(&b[..cut]));
                        n += check_headers(&b[..cut]).is_ok() as u32;
                    }
                }
            }
        }
        assert!(n > 100, "{n} accepted");
    }

    /// `Head::read` gives what `Msg::parse` gives, for every set of header
    /// parts and both byte orders.
    #[test]
    fn head_read_agrees_with_msg_parse() {
        for htyp in 0..=255u8 {
            let mut raw = Vec::new();
            put_record_flags(
                &mut raw,
                htyp,
                &RecordSpec {
                    secs: 0x0102_0304,
                    usecs: -5,
                    ecu: *b"EC1\0",
                    mcnt: 7,
                    session: 0x0a0b_0c0d,
                    tmsp: 0x1122_3344,
                    msin: 0x41,
                    noar: 2,
                    apid: *b"APP1",
                    ctid: *b"CTX\0",
                    payload: b"xyz",
                },
            );
            // The storage ECU differs from the header extra.
            raw[12..16].copy_from_slice(b"STOR");
            raw[16] |= htyp & HTYP_MSBF;
            assert_eq!(check_headers(&raw), Ok(raw.len()));
            let m = Msg::parse(0, &raw).unwrap();
            assert_eq!(Head::read(&raw), Head::of(&m), "htyp {htyp:#04x}");
        }
    }

    #[test]
    fn first_nul_finds_the_first_zero_byte() {
        // Every length around the word and the memchr bounds, a NUL at
        // every place (and a second one after it), or none.
        for len in 0..80usize {
            let base: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            assert_eq!(first_nul(&base), len, "no NUL, length {len}");
            for at in 0..len {
                let mut s = base.clone();
                s[at] = 0;
                if at + 3 < len {
                    s[at + 3] = 0;
                }
                assert_eq!(first_nul(&s), at, "length {len}, NUL at {at}");
            }
        }
        // Bytes above 0x80 and 0x01 next to a NUL (the borrow cases).
        let s = [0x80u8, 0x01, 0xff, 0x00, 0x01, 0x00, 0x80, 0x01, 0x00];
        assert_eq!(first_nul(&s), 3);
        assert_eq!(
            first_nul(&[0x01u8, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0]),
            8
        );
    }
}
