//! `dlt-convert` text rendering (2.18.8), spec kpi-dlt.md §5: the header
//! line and the `-a` payload, reproducing its 10,024-byte text buffer, its
//! quirks on damaged payloads (the text written so far is kept) and its
//! local-time date column.

use super::layout::*;

/// dlt-convert's text buffer (DLT_CONVERT_TEXTBUFSIZE).
const TEXTBUF: usize = 10024;

const MESSAGE_TYPE: [&str; 8] = ["log", "app_trace", "nw_trace", "control", "", "", "", ""];
const LOG_INFO: [&str; 7] = ["", "fatal", "error", "warn", "info", "debug", "verbose"];
const TRACE_TYPE: [&str; 6] = ["", "variable", "func_in", "func_out", "state", "vfb"];
const NW_TRACE_TYPE: [&str; 6] = ["", "ipc", "can", "flexray", "most", "vfb"];
const CONTROL_TYPE: [&str; 4] = ["", "request", "response", "time"];
const SERVICE_ID_NAME: [&str; 21] = [
    "",
    "set_log_level",
    "set_trace_status",
    "get_log_info",
    "get_default_log_level",
    "store_config",
    "reset_to_factory_default",
    "set_com_interface_status",
    "set_com_interface_max_bandwidth",
    "set_verbose_mode",
    "set_message_filtering",
    "set_timing_packets",
    "get_local_time",
    "use_ecu_id",
    "use_session_id",
    "use_timestamp",
    "use_extended_header",
    "set_default_log_level",
    "set_default_trace_status",
    "get_software_version",
    "message_buffer_overflow",
];
const RETURN_TYPE: [&str; 9] = [
    "ok",
    "not_supported",
    "error",
    "perm_denied",
    "warning",
    "",
    "",
    "",
    "no_matching_context_id",
];

/// Message type and subtype names of an extended header's `msin`, as
/// dlt-convert prints them (`log`, `info`; empty where it prints nothing).
pub fn type_names(msin: u8) -> (&'static str, &'static str) {
    let mstp = ((msin & 0x0e) >> 1) as usize;
    let mtin = (msin >> 4) as usize;
    (MESSAGE_TYPE[mstp], sub_type(mstp, mtin))
}

/// The name of message sub-type `mtin` of message type `mstp` ("" if none).
fn sub_type(mstp: usize, mtin: usize) -> &'static str {
    let sub = match mstp {
        0 => LOG_INFO.get(mtin),
        1 => TRACE_TYPE.get(mtin),
        2 => NW_TRACE_TYPE.get(mtin),
        3 => CONTROL_TYPE.get(mtin),
        _ => None,
    };
    sub.copied().unwrap_or("")
}

/// Log level names by MTIN (1 fatal … 6 verbose).
pub const LOG_LEVELS: [&str; 7] = LOG_INFO;

// ------------------------------------------------------------ integers

/// Append `v` in decimal.
pub fn push_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

pub fn push_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    push_u64(out, v.unsigned_abs());
}

/// Append `v` right-aligned in `width` columns, padded with `pad`.
fn push_padded(out: &mut Vec<u8>, v: u64, width: usize, pad: u8) {
    let mut b = itoa::Buffer::new();
    let digits = b.format(v).as_bytes();
    out.extend(std::iter::repeat_n(pad, width.saturating_sub(digits.len())));
    out.extend_from_slice(digits);
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn push_hex2(out: &mut Vec<u8>, b: u8) {
    out.push(HEX[(b >> 4) as usize]);
    out.push(HEX[(b & 15) as usize]);
}

/// C `printf("%g", v)`.
pub fn fmt_g(v: f64) -> String {
    crate::cfmt::fmt_g(v, 6)
}

// ------------------------------------------------------------ date column

extern "C" {
    fn tzset();
}

/// Storage seconds → `YYYY/MM/DD HH:MM:SS` in local time as `TZ` says
/// (libc localtime_r, exactly what dlt-convert calls), cached per second.
pub struct DateCache {
    secs: Option<u32>,
    text: Vec<u8>,
}

impl Default for DateCache {
    fn default() -> Self {
        DateCache::new()
    }
}

impl DateCache {
    pub fn new() -> DateCache {
        // SAFETY: tzset only reads TZ and initialises libc's zone state.
        unsafe { tzset() };
        DateCache {
            secs: None,
            text: Vec::with_capacity(24),
        }
    }

    pub fn date(&mut self, secs: u32) -> &[u8] {
        if self.secs != Some(secs) {
            self.secs = Some(secs);
            self.text.clear();
            let t: libc::time_t = secs as libc::time_t;
            // SAFETY: tm is plain data; localtime_r writes it or returns null.
            let mut tm: libc::tm = unsafe { std::mem::zeroed() };
            let ok = unsafe { !libc::localtime_r(&t, &mut tm).is_null() };
            if !ok {
                // Out of libc's range: fall back to UTC fields.
                tm = utc_tm(secs as i64);
            }
            let out = &mut self.text;
            push_i64(out, tm.tm_year as i64 + 1900);
            out.push(b'/');
            push_padded(out, (tm.tm_mon + 1) as u64, 2, b'0');
            out.push(b'/');
            push_padded(out, tm.tm_mday as u64, 2, b'0');
            out.push(b' ');
            push_padded(out, tm.tm_hour as u64, 2, b'0');
            out.push(b':');
            push_padded(out, tm.tm_min as u64, 2, b'0');
            out.push(b':');
            push_padded(out, tm.tm_sec as u64, 2, b'0');
        }
        &self.text
    }
}

fn utc_tm(secs: i64) -> libc::tm {
    // SAFETY: plain data.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let days = secs.div_euclid(86400);
    let rem = secs.rem_euclid(86400);
    let (y, m, d) = crate::model::time::civil_from_days(days);
    tm.tm_year = (y - 1900) as i32;
    tm.tm_mon = m as i32 - 1;
    tm.tm_mday = d as i32;
    tm.tm_hour = (rem / 3600) as i32;
    tm.tm_min = (rem / 60 % 60) as i32;
    tm.tm_sec = (rem % 60) as i32;
    tm
}

// ------------------------------------------------------------ header

fn push_id(out: &mut Vec<u8>, id: &[u8; 4]) {
    let t = id_text(id);
    out.extend_from_slice(t);
    for _ in t.len()..4 {
        out.push(b'-');
    }
}

/// dlt_message_header(): the header text, without a trailing space.
pub fn header(dates: &mut DateCache, m: &Msg, out: &mut Vec<u8>) {
    out.extend_from_slice(dates.date(m.secs));
    out.push(b'.');
    // "%.6d" of a signed int.
    if m.usecs < 0 {
        out.push(b'-');
    }
    push_padded(out, m.usecs.unsigned_abs() as u64, 6, b'0');
    out.push(b' ');
    match m.tmsp {
        Some(t) => push_padded(out, t as u64, 10, b' '),
        None => out.extend_from_slice(b"----------"),
    }
    out.push(b' ');
    push_padded(out, m.mcnt as u64, 3, b'0');
    out.push(b' ');
    push_id(out, &m.ecu_id());
    out.push(b' ');
    match m.ext {
        Some(e) if e.apid[0] != 0 => push_id(out, &e.apid),
        _ => out.extend_from_slice(b"----"),
    }
    out.push(b' ');
    match m.ext {
        Some(e) if e.ctid[0] != 0 => push_id(out, &e.ctid),
        _ => out.extend_from_slice(b"----"),
    }
    out.push(b' ');
    match m.ext {
        Some(e) => {
            let mstp = e.mstp() as usize;
            let mtin = e.mtin() as usize;
            out.extend_from_slice(MESSAGE_TYPE[mstp].as_bytes());
            out.push(b' ');
            out.extend_from_slice(sub_type(mstp, mtin).as_bytes());
            out.push(b' ');
            out.push(if e.verbose() { b'V' } else { b'N' });
            out.push(b' ');
            push_u64(out, e.noar as u64);
        }
        None => out.extend_from_slice(b"--- --- N -"),
    }
}

// ------------------------------------------------------------ payload

/// The C text buffer: `snprintf` into what is left of 10,024 bytes.
struct Text<'o> {
    out: &'o mut Vec<u8>,
    start: usize,
}

impl Text<'_> {
    /// `textlength - strlen(text)`.
    fn room(&self) -> usize {
        TEXTBUF.saturating_sub(self.out.len() - self.start)
    }
    /// snprintf: at most room − 1 characters.
    fn put(&mut self, s: &[u8]) {
        let n = s.len().min(self.room().saturating_sub(1));
        self.out.extend_from_slice(&s[..n]);
    }
    fn put_num(&mut self, v: i64) {
        let mut b = Vec::with_capacity(20);
        push_i64(&mut b, v);
        self.put(&b);
    }
    /// dlt_print_hex_string_delim: nothing at all if it does not fit.
    fn hex(&mut self, b: &[u8], delim: u8) {
        if self.room() < b.len() * 3 {
            return;
        }
        for (i, &x) in b.iter().enumerate() {
            if i > 0 {
                self.out.push(delim);
            }
            push_hex2(self.out, x);
        }
    }
}

/// The payload reader with dlt-convert's `datalength` semantics: a failed
/// read sets it to −1 and every later read fails.
struct Rd<'a> {
    b: &'a [u8],
    p: usize,
    dl: i64,
    be: bool,
}

impl<'a> Rd<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.dl < n as i64 {
            self.dl = -1;
            return None;
        }
        let s = self.b.get(self.p..self.p + n)?;
        self.p += n;
        self.dl -= n as i64;
        Some(s)
    }
    fn raw_u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
    fn u16(&mut self) -> Option<u16> {
        let v = self.raw_u16()?;
        Some(if self.be { v.swap_bytes() } else { v })
    }
    fn raw_u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u32(&mut self) -> Option<u32> {
        let v = self.raw_u32()?;
        Some(if self.be { v.swap_bytes() } else { v })
    }
    fn u64(&mut self) -> Option<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        let v = u64::from_le_bytes(a);
        Some(if self.be { v.swap_bytes() } else { v })
    }
    /// Skip `n` bytes after an explicit `datalength < n` check.
    fn skip_checked(&mut self, n: usize) -> Option<()> {
        if self.dl < n as i64 {
            return None;
        }
        self.take(n).map(|_| ())
    }
}

/// dlt_message_payload(…, DLT_OUTPUT_ASCII): the `-a` payload text.
pub fn payload(m: &Msg, out: &mut Vec<u8>) {
    let start = out.len();
    let mut t = Text { out, start };
    let mut r = Rd {
        b: m.payload,
        p: 0,
        dl: m.payload.len() as i64,
        be: m.msbf(),
    };
    match m.ext {
        Some(e) if e.verbose() => verbose(&mut t, &mut r, e.noar),
        _ => nonverbose(&mut t, &mut r, m.ext),
    }
}

fn nonverbose(t: &mut Text, r: &mut Rd, ext: Option<Ext>) {
    let id = r.u32().unwrap_or(0);
    // `((unsigned int)datalength * 3) + 20`, in 32-bit arithmetic.
    let need = (r.dl as u32).wrapping_mul(3).wrapping_add(20) as usize;
    if TEXTBUF < need {
        return;
    }
    let control = ext.is_some_and(|e| e.mstp() == TYPE_CONTROL);
    if control {
        let e = ext.unwrap_or(Ext {
            msin: 0,
            noar: 0,
            apid: [0; 4],
            ctid: [0; 4],
        });
        if id > 0 && (id as usize) < SERVICE_ID_NAME.len() {
            t.put(SERVICE_ID_NAME[id as usize].as_bytes());
        } else if e.mtin() != CONTROL_TIME {
            let mut s = b"service(".to_vec();
            push_u64(&mut s, id as u64);
            s.push(b')');
            t.put(&s);
        }
        if r.dl > 0 {
            t.put(b", ");
        }
        if e.mtin() == CONTROL_RESPONSE && r.dl > 0 {
            if let Some(b) = r.take(1) {
                let rv = b[0] as usize;
                if rv < 5 || rv == 8 {
                    t.put(RETURN_TYPE[rv].as_bytes());
                } else {
                    let mut s = Vec::new();
                    push_hex2(&mut s, rv as u8);
                    t.put(&s);
                }
                if r.dl >= 1 {
                    t.put(b", ");
                }
            }
        }
    } else {
        let mut s = Vec::with_capacity(12);
        push_u64(&mut s, id as u64);
        s.extend_from_slice(b", ");
        t.put(&s);
    }
    if r.dl >= 0 {
        let rest = &r.b[r.p.min(r.b.len())..];
        t.hex(rest, b' ');
    }
}

fn verbose(t: &mut Text, r: &mut Rd, noar: u8) {
    let mut ti_raw = 0u32;
    for num in 0..noar {
        if num != 0 {
            t.put(b" ");
        }
        if let Some(v) = r.raw_u32() {
            ti_raw = v;
        }
        let ti = if r.be { ti_raw.swap_bytes() } else { ti_raw };
        if argument(t, r, ti).is_none() {
            return;
        }
    }
}

/// Copy a string the way DLT_MSG_READ_STRING + `%s` show it.
fn read_string(t: &mut Text, r: &mut Rd, length: u16) -> Option<()> {
    let length = length as usize;
    if r.dl < 0 || length == 0 || t.room() < length || r.dl < length as i64 {
        r.dl = -1;
        return None;
    }
    let s = r.take(length)?;
    // Fast path (every KPI string): one NUL at the end, no CR/LF. The
    // reduction is branch-free so it vectorises.
    let body = &s[..length - 1];
    if s[length - 1] == 0 && !has_nul_cr_lf(body) {
        t.out.extend_from_slice(body);
        return Some(());
    }
    let n = s.iter().position(|&b| b == 0).unwrap_or(length);
    let at = t.out.len();
    t.out.extend_from_slice(&s[..n]);
    // dlt_clean_string: CR and LF become spaces.
    for b in &mut t.out[at..] {
        if *b == b'\r' || *b == b'\n' {
            *b = b' ';
        }
    }
    Some(())
}

/// Does `b` contain a NUL, CR or LF? Eight bytes at a time (SWAR).
fn has_nul_cr_lf(b: &[u8]) -> bool {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let zero = |x: u64| x.wrapping_sub(LO) & !x & HI != 0;
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let mut a = [0u8; 8];
        a.copy_from_slice(c);
        let x = u64::from_le_bytes(a);
        if zero(x) || zero(x ^ (LO * 0x0d)) || zero(x ^ (LO * 0x0a)) {
            return true;
        }
    }
    chunks
        .remainder()
        .iter()
        .any(|&c| c == 0 || c == b'\r' || c == b'\n')
}

fn skip_vari_name(r: &mut Rd) -> Option<()> {
    let l2 = r.u16()?;
    r.skip_checked(l2 as usize)
}

fn skip_vari_name_unit(r: &mut Rd) -> Option<()> {
    let l2 = r.u16()?;
    let l3 = r.u16()?;
    r.skip_checked(l2 as usize)?;
    r.skip_checked(l3 as usize)
}

/// dlt_message_argument_print(); None = DLT_RETURN_ERROR.
fn argument(t: &mut Text, r: &mut Rd, ti: u32) -> Option<()> {
    let scod = ti & TI_SCOD;
    let tyle = ti & TI_TYLE;
    if ti & TI_STRG != 0 && (scod == SCOD_ASCII || scod == SCOD_UTF8) {
        let length = r.u16()?;
        if ti & TI_VARI != 0 {
            skip_vari_name(r)?;
        }
        read_string(t, r, length)?;
    } else if ti & TI_BOOL != 0 {
        if ti & TI_VARI != 0 {
            skip_vari_name(r)?;
        }
        let v = r.take(1)?[0];
        t.put_num(v as i64);
    } else if ti & TI_UINT != 0 && scod == SCOD_BIN {
        // Host order (no MSBF conversion), as dlt-convert reads it.
        let (v, bits) = match tyle {
            1 => (r.take(1)?[0] as u16, 8),
            2 => (r.raw_u16()?, 16),
            _ => return Some(()),
        };
        let mut s = b"0b".to_vec();
        let mut i: u32 = 1 << (bits - 1);
        while i > 0 {
            if i == 1 << 3 || (bits == 16 && (i == 1 << 7 || i == 1 << 11)) {
                s.push(b' ');
            }
            s.push(if v as u32 & i != 0 { b'1' } else { b'0' });
            i >>= 1;
        }
        t.put(&s);
    } else if ti & TI_UINT != 0 && scod == SCOD_HEX {
        let s = match tyle {
            1 => format!("0x{:02x}", r.take(1)?[0]),
            2 => format!("0x{:04x}", r.raw_u16()?),
            3 => format!("0x{:08x}", r.raw_u32()?),
            4 => {
                let b = r.take(8)?;
                let lo = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                let hi = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
                format!("0x{hi:08x}{lo:08x}")
            }
            _ => return Some(()),
        };
        t.put(s.as_bytes());
    } else if ti & (TI_SINT | TI_UINT) != 0 {
        if ti & TI_VARI != 0 {
            skip_vari_name_unit(r)?;
        }
        if ti & TI_FIXP != 0 {
            r.u32()?;
            let n = match tyle {
                1..=3 => 4,
                4 => 8,
                5 => 16,
                _ => return None,
            };
            r.skip_checked(n)?;
        }
        let signed = ti & TI_SINT != 0;
        match tyle {
            1 => {
                let b = r.take(1)?[0];
                t.put_num(if signed { b as i8 as i64 } else { b as i64 });
            }
            2 => {
                let v = r.u16()?;
                t.put_num(if signed { v as i16 as i64 } else { v as i64 });
            }
            3 => {
                let v = r.u32()?;
                t.put_num(if signed { v as i32 as i64 } else { v as i64 });
            }
            4 => {
                let v = r.u64()?;
                if signed {
                    t.put_num(v as i64);
                } else {
                    let mut s = Vec::with_capacity(20);
                    push_u64(&mut s, v);
                    t.put(&s);
                }
            }
            5 => {
                let b = r.take(16)?;
                t.hex(b, b' ');
            }
            _ => return None,
        }
    } else if ti & TI_FLOA != 0 {
        if ti & TI_VARI != 0 {
            skip_vari_name_unit(r)?;
        }
        match tyle {
            1 => {
                let b = r.take(1)?;
                t.hex(b, b' ');
            }
            2 => {
                let b = r.take(2)?;
                t.hex(b, b' ');
            }
            3 => {
                let v = f32::from_bits(r.u32()?);
                t.put(fmt_g(v as f64).as_bytes());
            }
            4 => {
                let v = f64::from_bits(r.u64()?);
                t.put(fmt_g(v).as_bytes());
            }
            5 => {
                let b = r.take(16)?;
                t.hex(b, b' ');
            }
            _ => return None,
        }
    } else if ti & TI_RAWD != 0 {
        let length = r.u16()?;
        if ti & TI_VARI != 0 {
            skip_vari_name(r)?;
        }
        if r.dl < length as i64 {
            return None;
        }
        let b = r.take(length as usize)?;
        t.hex(b, b'\'');
    } else if ti & TI_TRAI != 0 {
        let length = r.u16()?;
        read_string(t, r, length)?;
    } else {
        return None;
    }
    if r.dl < 0 {
        return None;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_format() {
        for (v, s) in [
            (1.5, "1.5"),
            (100000.0, "100000"),
            (1000000.0, "1e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (2.71234567, "2.71235"),
            (-2.5e-300, "-2.5e-300"),
            (123456789.0, "1.23457e+08"),
            (0.0, "0"),
        ] {
            assert_eq!(fmt_g(v), s, "{v}");
        }
    }

    #[test]
    fn padded() {
        let mut v = Vec::new();
        push_padded(&mut v, 5050694, 10, b' ');
        push_padded(&mut v, 7, 3, b'0');
        assert_eq!(v, b"   5050694007");
    }
}

#[cfg(test)]
mod swar_tests {
    use super::has_nul_cr_lf;

    #[test]
    fn finds_specials_anywhere() {
        let base = vec![b'x'; 37];
        assert!(!has_nul_cr_lf(&base));
        for i in 0..base.len() {
            for c in [0u8, b'\r', b'\n'] {
                let mut v = base.clone();
                v[i] = c;
                assert!(has_nul_cr_lf(&v), "{i} {c}");
            }
        }
        // Bytes next to the special values are not special.
        assert!(!has_nul_cr_lf(&[1, 9, 11, 12, 14, 0x80, 0xff, 0x8d, 0x8a]));
    }
}
