//! C `printf` number formats shared by the listings that must match C
//! tools byte for byte (pmdumplog's `%.8g`/`%.16g`, dlt-convert's `%g`).

/// Append the decimal digits of an integer.
pub fn push_int<I: itoa::Integer>(o: &mut String, v: I) {
    o.push_str(itoa::Buffer::new().format(v));
}

/// C `%.{prec}g`.
pub fn fmt_g(x: f64, prec: usize) -> String {
    let mut s = String::new();
    push_g(&mut s, x, prec);
    s
}

/// A small stack buffer for one formatted number.
struct NumBuf {
    b: [u8; 48],
    n: usize,
}

impl std::fmt::Write for NumBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.n + s.len();
        self.b
            .get_mut(self.n..end)
            .ok_or(std::fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.n = end;
        Ok(())
    }
}

/// Append C `%.{prec}g` of `x`. One exact `%e` conversion gives the digits;
/// the fixed form uses the same digits, as C's rule (precision P - 1 - X
/// with X the rounded exponent) rounds at the same place.
pub fn push_g(o: &mut String, x: f64, prec: usize) {
    if x.is_nan() {
        o.push_str(if x.is_sign_negative() { "-nan" } else { "nan" });
        return;
    }
    if x.is_infinite() {
        o.push_str(if x > 0.0 { "inf" } else { "-inf" });
        return;
    }
    let p = prec.clamp(1, 40);
    let mut nb = NumBuf { b: [0; 48], n: 0 };
    if std::fmt::Write::write_fmt(&mut nb, format_args!("{:.*e}", p - 1, x)).is_err() {
        o.push_str(&format!("{x:e}"));
        return;
    }
    let s = std::str::from_utf8(&nb.b[..nb.n]).unwrap_or("0e0");
    let (mant, exp) = s.split_once('e').unwrap_or((s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (neg, mant) = match mant.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mant),
    };
    if neg {
        o.push('-');
    }
    let trim = |d: &str| -> usize { d.trim_end_matches('0').len() };
    if exp < -4 || exp >= p as i32 {
        let m = if mant.contains('.') {
            mant[..trim(mant)].trim_end_matches('.')
        } else {
            mant
        };
        o.push_str(m);
        o.push('e');
        o.push(if exp < 0 { '-' } else { '+' });
        let e = exp.unsigned_abs();
        if e < 10 {
            o.push('0');
        }
        push_int(o, e);
        return;
    }
    // Digits without the point: d1 d2 ... dp.
    let (d1, rest) = mant.split_at(1);
    let rest = rest.strip_prefix('.').unwrap_or(rest);
    if exp >= 0 {
        let e = exp as usize;
        o.push_str(d1);
        o.push_str(&rest[..e.min(rest.len())]);
        let frac = &rest[e.min(rest.len())..];
        let frac = &frac[..trim(frac)];
        if !frac.is_empty() {
            o.push('.');
            o.push_str(frac);
        }
    } else {
        let digits_end = trim(rest);
        o.push_str("0.");
        for _ in 0..(-exp - 1) {
            o.push('0');
        }
        o.push_str(d1);
        o.push_str(&rest[..digits_end]);
    }
}

/// `s` in double quotes, with the C escapes that TSDL and JSON share
/// (`\"`, `\\`, `\n`, `\r`, `\t`); `other` writes every other character,
/// escaping what its format needs.
pub fn quote_c(s: &str, mut other: impl FnMut(&mut String, char)) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c => other(&mut o, c),
        }
    }
    o.push('"');
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_format_like_c() {
        assert_eq!(fmt_g(5.333333492279053, 8), "5.3333335");
        assert_eq!(fmt_g(0.97_f32 as f64, 8), "0.97000003");
        assert_eq!(fmt_g(1.5, 8), "1.5");
        assert_eq!(fmt_g(0.0, 16), "0");
        assert_eq!(fmt_g(1e20, 16), "1e+20");
        assert_eq!(fmt_g(1.25e-7, 8), "1.25e-07");
        assert_eq!(fmt_g(123456789.0, 8), "1.2345679e+08");
        assert_eq!(fmt_g(0.8333333333333334, 16), "0.8333333333333334");
    }

    /// The peer here is the C library itself: `%g`, `%.8g` and `%.16g` from
    /// snprintf over values of every magnitude, both signs and the edges
    /// where rounding moves the exponent.
    #[test]
    fn g_format_matches_snprintf() {
        let mut xs = vec![
            0.0,
            -0.0,
            1.0,
            9.9999999996,
            99999999.5,
            0.000099999999995,
            1e-5,
            1e16,
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let x = f64::from_bits(seed);
            if x.is_finite() {
                xs.push(x);
            }
            let e = (seed % 40) as i32 - 20;
            xs.push((seed >> 11) as f64 / (1u64 << 53) as f64 * 10f64.powi(e));
            xs.push(f32::from_bits(seed as u32) as f64);
        }
        for x in xs {
            for p in [6usize, 8, 16] {
                let mut buf = [0u8; 64];
                // SAFETY: the buffer is 64 bytes and snprintf is told so.
                let n = unsafe {
                    libc::snprintf(
                        buf.as_mut_ptr() as *mut libc::c_char,
                        buf.len(),
                        c"%.*g".as_ptr(),
                        p as libc::c_int,
                        x,
                    )
                };
                let c = std::str::from_utf8(&buf[..n as usize]).unwrap();
                assert_eq!(fmt_g(x, p), c, "{x:e} at %.{p}g");
            }
        }
    }
}
