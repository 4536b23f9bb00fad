//! Number rendering as Snabb's dump does it: LuaJIT's `%.14g`, which rounds
//! the exact decimal expansion half away from zero (C's printf rounds the
//! binary value half to even; they differ on exact ties such as
//! 123456789012345 → `1.2345678901235e+14`).

const SIG: usize = 14;

/// Render `v` converted to a double (as Lua does with a uint64 value).
pub fn g14_u64(v: u64, out: &mut Vec<u8>) {
    if v < 100_000_000_000_000 {
        // Below 10^14 every u64 is an exact double with ≤ 14 digits.
        push_u64(v, out);
        return;
    }
    let d = v as f64;
    // The double is an integer below 2^64 + 2^11: exact in u128.
    let mut buf = [0u8; 40];
    let n = u128_digits(d as u128, &mut buf);
    g14_digits(&buf[..n], n as i32 - 1, out);
}

/// Render any double like LuaJIT's `%.14g`.
pub fn g14_f64(x: f64, out: &mut Vec<u8>) {
    if x.is_nan() {
        out.extend_from_slice(if x.is_sign_negative() {
            b"-nan"
        } else {
            b"nan"
        });
        return;
    }
    if x.is_infinite() {
        out.extend_from_slice(if x < 0.0 { b"-inf" } else { b"inf" });
        return;
    }
    if x.is_sign_negative() {
        out.push(b'-');
    }
    let a = x.abs();
    if a == 0.0 {
        out.push(b'0');
        return;
    }
    if a.fract() == 0.0 && a < 1e38 {
        let mut buf = [0u8; 40];
        let n = u128_digits(a as u128, &mut buf);
        g14_digits(&buf[..n], n as i32 - 1, out);
        return;
    }
    // 800 significant digits cover the exact expansion of every double.
    let s = format!("{a:.800e}");
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: Vec<u8> = mant.bytes().filter(u8::is_ascii_digit).collect();
    let end = digits.iter().rposition(|&b| b != b'0').map_or(1, |p| p + 1);
    g14_digits(&digits[..end], exp, out);
}

/// `digits` = the exact significant digits (first non-zero), value =
/// 0.d1d2… × 10^(exp+1). Rounds to 14 digits, half away from zero, and picks
/// fixed or exponent notation as `%g` does.
fn g14_digits(digits: &[u8], exp: i32, out: &mut Vec<u8>) {
    let mut d = [b'0'; SIG];
    let take = digits.len().min(SIG);
    d[..take].copy_from_slice(&digits[..take]);
    let mut exp = exp;
    if digits.len() > SIG && digits[SIG] >= b'5' {
        let mut i = SIG;
        loop {
            if i == 0 {
                // 99…9 rounded up to 100…0.
                d[0] = b'1';
                exp += 1;
                break;
            }
            i -= 1;
            if d[i] == b'9' {
                d[i] = b'0';
            } else {
                d[i] += 1;
                break;
            }
        }
    }
    let nz = d.iter().rposition(|&b| b != b'0').map_or(1, |p| p + 1);
    let d = &d[..nz];
    if (-4..SIG as i32).contains(&exp) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            if d.len() <= int_len {
                out.extend_from_slice(d);
                out.extend(std::iter::repeat_n(b'0', int_len - d.len()));
            } else {
                out.extend_from_slice(&d[..int_len]);
                out.push(b'.');
                out.extend_from_slice(&d[int_len..]);
            }
        } else {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', (-exp - 1) as usize));
            out.extend_from_slice(d);
        }
    } else {
        out.push(d[0]);
        if d.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&d[1..]);
        }
        out.push(b'e');
        out.push(if exp < 0 { b'-' } else { b'+' });
        let e = exp.unsigned_abs();
        if e < 10 {
            out.push(b'0');
        }
        push_u64(e as u64, out);
    }
}

fn u128_digits(mut v: u128, buf: &mut [u8; 40]) -> usize {
    let mut tmp = [0u8; 40];
    let mut n = 0;
    loop {
        tmp[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for i in 0..n {
        buf[i] = tmp[n - 1 - i];
    }
    n
}

const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// How many decimal digits `v` has (at least one).
#[inline]
pub fn digit_count(v: u64) -> usize {
    v.checked_ilog10().map_or(1, |l| l as usize + 1)
}

/// The decimal digits of `v` filling `dst` exactly (its length is their
/// count: [`digit_count`]), written in place from the end. A longer `dst`
/// gets them right-aligned, the bytes before them left as they were (a
/// right-aligned column needs no digit count).
#[inline(always)]
pub fn u64_digits_into(mut v: u64, dst: &mut [u8]) {
    let mut i = dst.len();
    while v >= 100 && i >= 2 {
        let r = (v % 100) as usize * 2;
        v /= 100;
        i -= 2;
        dst[i] = PAIRS[r];
        dst[i + 1] = PAIRS[r + 1];
    }
    if v >= 10 && i >= 2 {
        let r = v as usize * 2;
        dst[i - 2] = PAIRS[r];
        dst[i - 1] = PAIRS[r + 1];
    } else if i >= 1 {
        dst[i - 1] = b'0' + (v % 10) as u8;
    }
}

/// Decimal digits of `v`.
#[inline]
pub fn push_u64(v: u64, out: &mut Vec<u8>) {
    let at = out.len();
    out.resize(at + digit_count(v), 0);
    u64_digits_into(v, &mut out[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(v: u64) -> String {
        let mut o = Vec::new();
        g14_u64(v, &mut o);
        String::from_utf8(o).unwrap()
    }
    fn f(v: f64) -> String {
        let mut o = Vec::new();
        g14_f64(v, &mut o);
        String::from_utf8(o).unwrap()
    }

    #[test]
    fn lua_rounding() {
        assert_eq!(u(0), "0");
        assert_eq!(u(4098), "4098");
        assert_eq!(u(99_999_999_999_999), "99999999999999");
        assert_eq!(u(123456789012345), "1.2345678901235e+14");
        assert_eq!(u(1 << 53), "9.007199254741e+15");
        assert_eq!(u(0x8000_0000_0000_0000), "9.2233720368548e+18");
        assert_eq!(u(u64::MAX), "1.844674407371e+19");
        assert_eq!(u(100_000_000_000_000), "1e+14");
        assert_eq!(u(999_999_999_999_995), "1e+15");
        assert_eq!(f(0.5), "0.5");
        assert_eq!(f(-257.0), "-257");
        assert_eq!(f(1e15), "1e+15");
        assert_eq!(f(0.0001), "0.0001");
        assert_eq!(f(0.00001), "1e-05");
        assert_eq!(f(1.0 / 3.0), "0.33333333333333");
        assert_eq!(f(2.5e-300), "2.5e-300");
    }
}
