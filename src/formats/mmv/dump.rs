//! `mmvdump` (PCP 6.0.3) listing, reproduced byte for byte.
//!
//! This walks the raw bytes the way mmvdump does (its quirks included, e.g.
//! v2 instance offsets printed with the v1 stride), but every read is bounds
//! checked: where mmvdump would read past the mapping we stop with an error.
//! The status is `Err((offset, msg))` when mmvdump would exit 1 or we had to
//! stop early.

// The format strings mirror mmvdump's printf calls, newlines included.
#![allow(clippy::write_with_newline)]

use super::layout::*;
use std::io::{self, Write};
use std::time::{SystemTime, UNIX_EPOCH};

/// Outcome of the listing: `Err(msg)` when mmvdump would report failure.
pub type DumpStatus = std::result::Result<(), (u64, String)>;

struct D<'a, 'w> {
    b: Bytes<'a>,
    out: &'w mut dyn Write,
    /// Set when the listing hit a problem (mmvdump's non-zero status).
    bad: Option<(u64, String)>,
}

fn c_double(x: f64) -> String {
    if x.is_nan() {
        if x.is_sign_negative() {
            "-nan".into()
        } else {
            "nan".into()
        }
    } else if x.is_infinite() {
        if x < 0.0 {
            "-inf".into()
        } else {
            "inf".into()
        }
    } else {
        format!("{x:.6}")
    }
}

fn flagstr(flags: u32) -> String {
    let mut s = String::new();
    if flags == 0 {
        s.push_str("none");
    }
    if flags & FLAG_NOPREFIX != 0 {
        s.push_str("noprefix, ");
    }
    if flags & FLAG_PROCESS != 0 {
        s.push_str("process, ");
    }
    if flags & FLAG_SENTINEL != 0 {
        s.push_str("sentinel, ");
    }
    let rest = flags & !(FLAG_NOPREFIX | FLAG_PROCESS | FLAG_SENTINEL);
    if rest != 0 {
        s.push_str(&format!("unknown={rest:x}"));
    } else if let Some(p) = s.rfind(',') {
        s.truncate(p);
    }
    s
}

fn metrictype(t: i32) -> &'static str {
    match t {
        TYPE_I32 => "32-bit int",
        TYPE_U32 => "32-bit unsigned int",
        TYPE_I64 => "64-bit int",
        TYPE_U64 => "64-bit unsigned int",
        TYPE_FLOAT => "float",
        TYPE_DOUBLE => "double",
        TYPE_STRING => "string",
        TYPE_ELAPSED => "elapsed",
        _ => "?",
    }
}

fn metricsem(s: i32) -> &'static str {
    match s {
        1 => "counter",
        3 => "instant",
        4 => "discrete",
        _ => "?",
    }
}

impl D<'_, '_> {
    fn w(&mut self, s: &str) -> io::Result<()> {
        self.out.write_all(s.as_bytes())
    }
    fn raw(&mut self, s: &[u8]) -> io::Result<()> {
        self.out.write_all(s)
    }
    /// mmvdump's `size < off + n` check, in its wrapping u64 arithmetic.
    fn short(&self, off: u64, n: u64) -> bool {
        self.b.len() < off.wrapping_add(n)
    }
    /// A read mmvdump does without a check: fail instead of misreading.
    fn need(&mut self, off: u64, n: u64, what: &str) -> bool {
        if self.b.slice(off, n).is_some() {
            true
        } else {
            self.fail(
                off,
                format!("{what} at offset {off} lies past the end of the file"),
            );
            false
        }
    }
    fn fail(&mut self, off: u64, msg: String) {
        if self.bad.is_none() {
            self.bad = Some((off, msg));
        }
    }
    /// A string slot copied into a 256-byte buffer (names and help).
    fn buf(&self, off: u64) -> &[u8] {
        self.b.cstr(off, STRINGMAX - 1)
    }
    fn cstr(&self, off: u64) -> &[u8] {
        self.b.cstr(off, usize::MAX)
    }

    fn help(&mut self, off: u64, label: &str, err: &str) -> io::Result<bool> {
        if off != 0 {
            if self.short(off, STRING_SIZE) {
                write!(self.out, "{err}\n")?;
                self.fail(off, err.to_string());
                return Ok(false);
            }
            let s = self.buf(off).to_vec();
            write!(self.out, "       {label}=")?;
            self.raw(&s)?;
            self.w("\n")?;
        } else {
            write!(self.out, "       (no {label})\n")?;
        }
        Ok(true)
    }

    fn indoms(&mut self, idx: u64, base: u64, offset: u64, count: i32) -> io::Result<()> {
        write!(
            self.out,
            "\nTOC[{idx}]: offset {base}, indoms offset {offset} ({count} entries)\n"
        )?;
        for i in 0..count.max(0) as u64 {
            let off = offset.wrapping_add(i * INDOM_SIZE);
            if self.short(off, INDOM_SIZE) || !self.need(off, INDOM_SIZE, "indom") {
                let m = format!("Bad file size: too small for toc[{idx}] indom[{i}]");
                write!(self.out, "{m}\n")?;
                self.fail(off, m);
                return Ok(());
            }
            let serial = self.b.u32(off).unwrap_or(0);
            let cnt = self.b.i32(off + 4).unwrap_or(0);
            let first = self.b.i64(off + 8).unwrap_or(0);
            write!(
                self.out,
                "  [{serial}/{}] {cnt} instances, starting at offset {first}\n",
                off as i64
            )?;
            let st = self.b.u64(off + 16).unwrap_or(0);
            let ht = self.b.u64(off + 24).unwrap_or(0);
            if !self.help(
                st,
                "shorttext",
                &format!("Bad file size: too small for toc[{idx}] indom[{i}] oneline"),
            )? || !self.help(
                ht,
                "helptext",
                &format!("Bad file size: too small for toc[{idx}] indom[{i}] help"),
            )? {
                return Ok(());
            }
        }
        Ok(())
    }

    fn insts(&mut self, idx: u64, base: u64, offset: u64, count: i32, v: i32) -> io::Result<()> {
        write!(
            self.out,
            "\nTOC[{idx}]: offset {base}, instances offset {} ({count} entries)\n",
            offset as i64
        )?;
        let isz = inst_size(v);
        for i in 0..count.max(0) as u64 {
            let off = offset.wrapping_add(i * isz);
            if self.short(off, isz) || !self.need(off, isz, "instance") {
                let m = format!("Bad file size: too small for toc[{idx}] inst[{i}]");
                write!(self.out, "\n{m}\n")?;
                self.fail(off, m);
                return Ok(());
            }
            let io = self.b.u64(off).unwrap_or(0);
            if self.short(io, INDOM_SIZE) || !self.need(io, INDOM_SIZE, "indom") {
                let m = if v == 1 {
                    format!("Bad file size: too small for toc[{idx}] indom[{i}]")
                } else {
                    format!("Bad file size: too small for toc[{idx}] inst[{i}] indom")
                };
                write!(self.out, "\n{m}\n")?;
                self.fail(io, m);
                return Ok(());
            }
            let serial = self.b.u32(io).unwrap_or(0);
            let internal = self.b.i32(off + 12).unwrap_or(0);
            let name = if v == 1 {
                self.cstr(off + 16).to_vec()
            } else {
                let no = self.b.u64(off + 16).unwrap_or(0);
                if self.short(no, STRING_SIZE) {
                    let m = format!("Bad file size: too small for toc[{idx}] inst[{i}] name");
                    write!(self.out, "\n{m}\n")?;
                    self.fail(off + 16, m);
                    return Ok(());
                } else if no == 0 {
                    let m = format!("Bad file: invalid offset for toc[{idx}] inst[{i}] name");
                    write!(self.out, "\n{m}\n")?;
                    self.fail(off + 16, m);
                    return Ok(());
                }
                self.buf(no).to_vec()
            };
            // mmvdump prints v2 instance offsets with the v1 entry size.
            let shown = offset.wrapping_add(i * INST1_SIZE) as i64;
            write!(
                self.out,
                "  [{serial}/{shown}] instance = [{internal} or \""
            )?;
            self.raw(&name)?;
            self.w("\"]\n")?;
        }
        Ok(())
    }

    fn metrics(&mut self, idx: u64, base: u64, offset: u64, count: i32, v: i32) -> io::Result<()> {
        write!(
            self.out,
            "\nTOC[{idx}]: toc offset {base}, metrics offset {} ({count} entries)\n",
            offset as i64
        )?;
        let msz = metric_size(v);
        for i in 0..count.max(0) as u64 {
            let off = offset.wrapping_add(i * msz);
            if self.short(off, msz) || !self.need(off, msz, "metric") {
                let m = format!("Bad file size: too small for toc[{idx}] metric[{i}]");
                write!(self.out, "{m}\n")?;
                self.fail(off, m);
                return Ok(());
            }
            let (name, fb) = if v == 1 {
                (self.cstr(off).to_vec(), off + 64)
            } else {
                let no = self.b.u64(off).unwrap_or(0);
                if self.short(no, STRING_SIZE) {
                    let m = format!("Bad file size: too small for toc[{idx}] metric[{i}] name");
                    write!(self.out, "{m}\n")?;
                    self.fail(off, m);
                    return Ok(());
                } else if no == 0 {
                    let m = format!("Bad file: invalid offset for toc[{idx}] metric[{i}] name");
                    write!(self.out, "{m}\n")?;
                    self.fail(off, m);
                    return Ok(());
                }
                (self.buf(no).to_vec(), off + 8)
            };
            let item = self.b.u32(fb).unwrap_or(0);
            let ty = self.b.i32(fb + 4).unwrap_or(0);
            let sem = self.b.i32(fb + 8).unwrap_or(0);
            let dim = self.b.u32(fb + 12).unwrap_or(0);
            let indom = self.b.i32(fb + 16).unwrap_or(0);
            let pad = self.b.u32(fb + 20).unwrap_or(0);
            write!(self.out, "  [{item}/{}] ", off as i64)?;
            self.raw(&name)?;
            self.w("\n")?;
            write!(
                self.out,
                "       type={} (0x{:x}), sem={} (0x{:x}), pad=0x{pad:x}\n",
                metrictype(ty),
                ty as u32,
                metricsem(sem),
                sem as u32
            )?;
            write!(
                self.out,
                "       units={}\n",
                crate::model::Units::from_word(dim).pcp_str()
            )?;
            if indom != -1 && indom != 0 {
                write!(self.out, "       indom={indom}\n")?;
            } else {
                self.w("       (no indom)\n")?;
            }
            let st = self.b.u64(fb + 24).unwrap_or(0);
            let ht = self.b.u64(fb + 32).unwrap_or(0);
            if !self.help(
                st,
                "shorttext",
                &format!("Bad file size: too small for toc[{idx}] metric[{i}] oneline"),
            )? || !self.help(
                ht,
                "helptext",
                &format!("Bad file size: too small for toc[{idx}] metric[{i}] help"),
            )? {
                return Ok(());
            }
        }
        Ok(())
    }

    fn value(&mut self, off: u64, i: u64, idx: u64, ty: i32, now_us: f64) -> io::Result<bool> {
        let raw = self.b.u64(off).unwrap_or(0);
        let extra = self.b.i64(off + 8).unwrap_or(0);
        match ty {
            TYPE_I32 => write!(self.out, " = {}", raw as u32 as i32)?,
            TYPE_U32 => write!(self.out, " = {}", raw as u32)?,
            TYPE_I64 => write!(self.out, " = {}", raw as i64)?,
            TYPE_U64 => write!(self.out, " = {raw}")?,
            TYPE_FLOAT => write!(
                self.out,
                " = {}",
                c_double(f32::from_bits(raw as u32) as f64)
            )?,
            TYPE_DOUBLE => write!(self.out, " = {}", c_double(f64::from_bits(raw)))?,
            TYPE_STRING => {
                let so = extra as u64;
                if self.short(so, STRING_SIZE) {
                    self.w(" = ?\n")?;
                    let m = format!("Bad file size: toc[{idx}] str value[{i}] extra");
                    write!(self.out, "{m}\n")?;
                    self.fail(off + 8, m);
                    return Ok(false);
                }
                let s = self.cstr(so).to_vec();
                self.w(" = \"")?;
                self.raw(&s)?;
                self.w("\"")?;
            }
            TYPE_ELAPSED => {
                let mut t = raw as i64;
                if extra < 0 {
                    // mmvdump does this sum in double precision.
                    t = (t as f64 + (now_us + extra as f64)) as i64;
                }
                write!(self.out, " = {t} (value={}/extra={extra})", raw as i64)?;
                if extra > 0 {
                    self.w("\nBad (positive) ELAPSED 'extra' value found!")?;
                }
            }
            _ => write!(self.out, "Unknown type {ty}")?,
        }
        self.w("\n")?;
        Ok(true)
    }

    fn values(&mut self, idx: u64, base: u64, offset: u64, count: i32, v: i32) -> io::Result<()> {
        write!(
            self.out,
            "\nTOC[{idx}]: offset {base}, values offset {offset} ({count} entries)\n"
        )?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as f64 * 1e6 + d.subsec_micros() as f64)
            .unwrap_or(0.0);
        let msz = metric_size(v);
        for i in 0..count.max(0) as u64 {
            let off = offset.wrapping_add(i * VALUE_SIZE);
            if self.short(off, VALUE_SIZE) || !self.need(off, VALUE_SIZE, "value") {
                let m = format!("Bad file size: too small for toc[{idx}] value[{i}]");
                write!(self.out, "{m}\n")?;
                self.fail(off, m);
                return Ok(());
            }
            let moff = self.b.u64(off + 16).unwrap_or(0);
            if self.short(moff, msz) || !self.need(moff, msz, "metric") {
                let m = format!("Bad file size: toc[{idx}] value[{i}] metric offset");
                write!(self.out, "{m}\n")?;
                self.fail(off + 16, m);
                return Ok(());
            }
            let (name, fb) = if v == 1 {
                (self.cstr(moff).to_vec(), moff + 64)
            } else {
                let no = self.b.u64(moff).unwrap_or(0);
                if self.short(no, STRING_SIZE) {
                    let m = format!("Bad file size: too small for toc[{idx}] value[{i}] mname");
                    write!(self.out, "{m}\n")?;
                    self.fail(moff, m);
                    return Ok(());
                } else if no == 0 {
                    let m = format!("Bad file: invalid offset for toc[{idx}] value[{i}] mname");
                    write!(self.out, "{m}\n")?;
                    self.fail(moff, m);
                    return Ok(());
                }
                (self.buf(no).to_vec(), moff + 8)
            };
            let item = self.b.u32(fb).unwrap_or(0);
            let ty = self.b.i32(fb + 4).unwrap_or(0);
            let indom = self.b.i32(fb + 16).unwrap_or(0);
            write!(self.out, "  [{item}/{off}] ")?;
            self.raw(&name)?;
            if indom != 0 && indom != -1 {
                let io = self.b.u64(off + 24).unwrap_or(0);
                let isz = inst_size(v);
                if self.short(io, isz) || !self.need(io, isz, "instance") {
                    self.w("\n")?;
                    let m = format!("Bad file size: toc[{idx}] value[{i}] inst offset");
                    write!(self.out, "{m}\n")?;
                    self.fail(off + 24, m);
                    return Ok(());
                }
                let internal = self.b.i32(io + 12).unwrap_or(0);
                let iname = if v == 1 {
                    self.cstr(io + 16).to_vec()
                } else {
                    let no = self.b.u64(io + 16).unwrap_or(0);
                    if self.short(no, STRING_SIZE) {
                        let m = format!("Bad file size: too small for toc[{idx}] value[{i}] iname");
                        write!(self.out, "{m}\n")?;
                        self.fail(io + 16, m);
                        return Ok(());
                    } else if no == 0 {
                        let m =
                            format!("Bad file: invalid offset for toc[{idx}] metric[{i}] iname");
                        write!(self.out, "{m}\n")?;
                        self.fail(io + 16, m);
                        return Ok(());
                    }
                    self.buf(no).to_vec()
                };
                write!(self.out, "[{internal} or \"")?;
                self.raw(&iname)?;
                self.w("\"]")?;
            }
            // mmvdump ignores dump_value's status and goes on.
            self.value(off, i, idx, ty, now)?;
        }
        Ok(())
    }

    fn strings(&mut self, idx: u64, base: u64, offset: u64, count: i32) -> io::Result<()> {
        write!(
            self.out,
            "\nTOC[{idx}]: offset {base}, string offset {offset} ({count} entries)\n"
        )?;
        for i in 0..count.max(0) as u64 {
            // mmvdump checks the size with the 32-byte value stride.
            let chk = offset.wrapping_add(i * VALUE_SIZE);
            let off = offset.wrapping_add(i * STRING_SIZE);
            if self.short(chk, STRING_SIZE) {
                let m = format!("Bad file size: toc[{idx}] string[{i}]");
                write!(self.out, "{m}\n")?;
                self.fail(chk, m);
                return Ok(());
            }
            if off >= self.b.len() {
                self.fail(
                    off,
                    format!("STRINGS entry {i} at offset {off} lies past the end of the file"),
                );
            }
            let s = self.cstr(off).to_vec();
            write!(self.out, "  [{}/{off}] ", i + 1)?;
            self.raw(&s)?;
            self.w("\n")?;
        }
        Ok(())
    }

    fn labels(&mut self, idx: u64, base: u64, offset: u64, count: i32) -> io::Result<()> {
        write!(
            self.out,
            "\nTOC[{idx}]: offset {base}, labels offset {} ({count} entries)\n",
            offset as i64
        )?;
        for i in 0..count.max(0) as u64 {
            let off = offset.wrapping_add(i * LABEL_SIZE);
            if self.short(off, LABEL_SIZE) || !self.need(off, LABEL_SIZE, "label") {
                let m = format!("Bad file size: too small for toc[{idx}] metric[{i}]");
                write!(self.out, "{m}\n")?;
                self.fail(off, m);
                return Ok(());
            }
            let s = self.cstr(off + 12).to_vec();
            write!(self.out, "  [{}/{off}] ", i + 1)?;
            self.raw(&s)?;
            self.w("\n")?;
            write!(
                self.out,
                "        flags=0x{:x}, identity=0x{:x}\n",
                self.b.u32(off).unwrap_or(0),
                self.b.u32(off + 4).unwrap_or(0)
            )?;
            write!(
                self.out,
                "        internal=0x{:x}\n",
                self.b.u32(off + 8).unwrap_or(0)
            )?;
        }
        Ok(())
    }
}

/// Write the mmvdump listing of `data` (named `name`, as given) to `out`.
pub fn mmvdump(name: &str, data: &[u8], out: &mut dyn Write) -> io::Result<DumpStatus> {
    let mut d = D {
        b: Bytes(data),
        out,
        bad: None,
    };
    let b = d.b;
    if b.len() < HDR_SIZE {
        let m = "Bad file size: too small for a header";
        write!(d.out, "{m}\n")?;
        return Ok(Err((0, m.into())));
    }
    let magic = b.slice(0, 4).unwrap_or_default();
    // strncmp(magic, "MMV", 4): exactly "MMV\0".
    if magic != MAGIC {
        d.w("Bad magic: ")?;
        d.raw(magic.get(..3).unwrap_or_default())?;
        d.w("\n")?;
        return Ok(Err((0, "bad magic".into())));
    }
    let version = b.i32(4).unwrap_or(0);
    if !(1..=3).contains(&version) {
        write!(d.out, "Version {version} not supported\n")?;
        return Ok(Err((4, format!("version {version} not supported"))));
    }
    let g1 = b.u64(8).unwrap_or(0);
    let g2 = b.u64(16).unwrap_or(0);
    write!(d.out, "MMV file   = {name}\n")?;
    write!(d.out, "Version    = {version}\n")?;
    write!(d.out, "Generated  = {g1}\n")?;
    if g1 != g2 {
        write!(d.out, "Generated2 = {g2}\n")?;
        write!(d.out, "Mismatched generation numbers ({g1}/{g2})\n")?;
        return Ok(Err((
            8,
            format!("mismatched generation numbers ({g1}/{g2})"),
        )));
    }
    let tocs = b.i32(24).unwrap_or(0);
    write!(d.out, "TOC count  = {}\n", tocs as u32)?;
    if tocs < 2 {
        write!(
            d.out,
            "Bad tocs: invalid table of contents count ({tocs})\n"
        )?;
        return Ok(Err((24, format!("invalid TOC count {tocs}"))));
    }
    let cluster = b.i32(36).unwrap_or(0);
    write!(d.out, "Cluster    = {}\n", cluster as u32)?;
    if !(0..=4095).contains(&cluster) {
        write!(d.out, "Bad cluster: {cluster} is not a valid cluster ID\n")?;
        return Ok(Err((36, format!("{cluster} is not a valid cluster ID"))));
    }
    write!(d.out, "Process    = {}\n", b.i32(32).unwrap_or(0))?;
    let flags = b.u32(28).unwrap_or(0);
    write!(d.out, "Flags      = 0x{flags:x} ({})\n", flagstr(flags))?;
    let toc_bytes = (tocs as u64) * TOC_SIZE;
    if b.len() < HDR_SIZE + toc_bytes {
        write!(d.out, "Bad file size: too small for {tocs} TOC entries\n")?;
        return Ok(Err((24, format!("file too small for {tocs} TOC entries"))));
    }
    for i in 0..tocs as u64 {
        let base = HDR_SIZE + i * TOC_SIZE;
        let ty = b.i32(base).unwrap_or(0);
        let count = b.i32(base + 4).unwrap_or(0);
        let offset = b.u64(base + 8).unwrap_or(0);
        if count == 0 {
            write!(d.out, "Bad TOC[{i}]: invalid entry count {count}\n")?;
            continue;
        }
        match ty {
            TOC_INDOMS => d.indoms(i, base, offset, count)?,
            TOC_INSTANCES => d.insts(i, base, offset, count, version)?,
            TOC_VALUES => d.values(i, base, offset, count, version)?,
            TOC_METRICS => d.metrics(i, base, offset, count, version)?,
            TOC_STRINGS => d.strings(i, base, offset, count)?,
            TOC_LABELS => d.labels(i, base, offset, count)?,
            _ => {
                let m = format!("Unrecognised TOC[{i}] type: 0x{:x}", ty as u32);
                write!(d.out, "{m}\n")?;
                d.fail(base, m);
            }
        }
    }
    Ok(match d.bad {
        Some(e) => Err(e),
        None => Ok(()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_like_mmvdump() {
        assert_eq!(flagstr(0), "none");
        assert_eq!(flagstr(4), "sentinel");
        assert_eq!(flagstr(7), "noprefix, process, sentinel");
        assert_eq!(flagstr(0x11), "noprefix, unknown=10");
    }
}
