//! Protobuf wire encoding, apart from any message layout: keys, varints,
//! fixed-width numbers and length-delimited fields, appended to a `Vec<u8>`.
//!
//! Nested messages are written in one pass: [`nested`] reserves four bytes
//! for the length and lets the caller write the body, as Perfetto's
//! protozero does; protozero then leaves a redundant four-byte varint,
//! polytrace moves a short body down instead (three bytes saved per
//! message, about a tenth of a trace). Bodies are capped at 2^28 - 1 bytes.

/// The wire types polytrace writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireType {
    Varint = 0,
    Fixed64 = 1,
    Len = 2,
}

/// Largest field number protobuf allows.
pub const MAX_FIELD: u32 = (1 << 29) - 1;

/// Bytes reserved for a nested message's length.
pub const LEN_FIELD_SIZE: usize = 4;

/// Largest body a four-byte redundant varint can state.
pub const MAX_NESTED: usize = (1 << 28) - 1;

/// A nested message longer than [`MAX_NESTED`] bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Oversize(pub usize);

/// The key of a field: field number and wire type in one varint.
pub const fn key(field: u32, wt: WireType) -> u64 {
    ((field as u64) << 3) | wt as u64
}

/// Bytes a varint of `v` takes (1..=10).
pub const fn varint_len(v: u64) -> usize {
    // 7 bits a byte; ilog2 of 0 is undefined, so or in 1.
    ((v | 1).ilog2() as usize) / 7 + 1
}

pub fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

fn put_key(buf: &mut Vec<u8>, field: u32, wt: WireType) {
    debug_assert!((1..=MAX_FIELD).contains(&field), "field number {field}");
    put_varint(buf, key(field, wt));
}

/// A varint field (`uint32`, `uint64`, enums).
pub fn varint_field(buf: &mut Vec<u8>, field: u32, v: u64) {
    put_key(buf, field, WireType::Varint);
    put_varint(buf, v);
}

/// An `int32`/`int64` field: negative values take ten bytes (two's
/// complement as a `u64`), as protobuf's plain ints do.
pub fn int_field(buf: &mut Vec<u8>, field: u32, v: i64) {
    varint_field(buf, field, v as u64);
}

pub fn bool_field(buf: &mut Vec<u8>, field: u32, v: bool) {
    varint_field(buf, field, v as u64);
}

/// A `double` field: fixed 64-bit little-endian.
pub fn double_field(buf: &mut Vec<u8>, field: u32, v: f64) {
    put_key(buf, field, WireType::Fixed64);
    buf.extend_from_slice(&v.to_le_bytes());
}

/// A `bytes` or `string` field (size-first: the length is known).
pub fn bytes_field(buf: &mut Vec<u8>, field: u32, v: &[u8]) {
    put_key(buf, field, WireType::Len);
    put_varint(buf, v.len() as u64);
    buf.extend_from_slice(v);
}

pub fn str_field(buf: &mut Vec<u8>, field: u32, v: &str) {
    bytes_field(buf, field, v.as_bytes());
}

/// A nested message whose body `f` appends. Four bytes are reserved for
/// the length; once the body is written its length goes there as a varint
/// and, when it needs fewer than four bytes, the body is moved down over the
/// spare ones (a short copy: most bodies are tens of bytes), so the output
/// is the minimal encoding.
pub fn nested<E: From<Oversize>>(
    buf: &mut Vec<u8>,
    field: u32,
    f: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
) -> Result<(), E> {
    put_key(buf, field, WireType::Len);
    let at = buf.len();
    buf.extend_from_slice(&[0; LEN_FIELD_SIZE]);
    f(buf)?;
    let len = buf.len() - at - LEN_FIELD_SIZE;
    if len > MAX_NESTED {
        return Err(Oversize(len).into());
    }
    let n = varint_len(len as u64);
    if n < LEN_FIELD_SIZE {
        buf.copy_within(at + LEN_FIELD_SIZE.., at + n);
        buf.truncate(at + n + len);
        let mut v = len;
        for b in &mut buf[at..at + n] {
            *b = (v as u8 & 0x7f) | if v >= 0x80 { 0x80 } else { 0 };
            v >>= 7;
        }
    } else {
        patch_len(&mut buf[at..at + LEN_FIELD_SIZE], len as u32);
    }
    Ok(())
}

/// `len` as a four-byte redundant varint.
fn patch_len(dst: &mut [u8], len: u32) {
    for (i, b) in dst.iter_mut().enumerate() {
        let part = ((len >> (7 * i)) & 0x7f) as u8;
        *b = if i + 1 < LEN_FIELD_SIZE {
            part | 0x80
        } else {
            part
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn exact_bytes() {
        let mut b = Vec::new();
        put_varint(&mut b, 300);
        assert_eq!(b, [0xac, 0x02]);
        b.clear();
        varint_field(&mut b, 10, 1);
        assert_eq!(b, [0x50, 0x01]);
        b.clear();
        int_field(&mut b, 4, -1);
        assert_eq!(b.len(), 11);
        assert_eq!(&b[..2], [0x20, 0xff]);
        assert_eq!(b[10], 0x01);
        b.clear();
        double_field(&mut b, 5, 1.5);
        assert_eq!(b, [0x29, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f]);
        b.clear();
        str_field(&mut b, 2, "ab");
        assert_eq!(b, [0x12, 2, b'a', b'b']);
    }

    #[test]
    fn nested_lengths_are_minimal() {
        let mut b = Vec::new();
        nested::<Oversize>(&mut b, 3, |b| {
            b.extend_from_slice(b"12345");
            Ok(())
        })
        .unwrap();
        // Tag 26 (field 3, length-delimited), then 5 in one byte.
        assert_eq!(b, [26, 5, b'1', b'2', b'3', b'4', b'5']);
        b.clear();
        nested::<Oversize>(&mut b, 1, |b| {
            b.extend_from_slice(&[7; 200]);
            Ok(())
        })
        .unwrap();
        assert_eq!(&b[..3], [0x0a, 0xc8, 0x01]);
        assert_eq!(b.len(), 203);
        assert!(b[3..].iter().all(|&x| x == 7));
        // Nested in nested: the inner one is settled before the outer.
        b.clear();
        nested::<Oversize>(&mut b, 11, |b| {
            b.push(0x48);
            b.push(3);
            nested::<Oversize>(b, 4, |b| {
                b.extend_from_slice(&[8, 1]);
                Ok(())
            })
        })
        .unwrap();
        assert_eq!(b, [0x5a, 6, 0x48, 3, 0x22, 2, 8, 1]);
    }

    #[test]
    fn long_bodies_keep_the_padded_length() {
        let mut b = Vec::new();
        nested::<Oversize>(&mut b, 1, |b| {
            b.resize(b.len() + (1 << 21), 0);
            Ok(())
        })
        .unwrap();
        // 2^21 needs four varint bytes: the reserved ones, as they are.
        assert_eq!(&b[..5], [0x0a, 0x80, 0x80, 0x80, 0x01]);
        assert_eq!(b.len(), 5 + (1 << 21));
    }

    #[test]
    fn key_and_edges() {
        assert_eq!(key(1, WireType::Len), 0x0a);
        assert_eq!(key(60, WireType::Len), 482);
        assert_eq!(varint_len(0), 1);
        assert_eq!(varint_len(127), 1);
        assert_eq!(varint_len(128), 2);
        assert_eq!(varint_len(u64::MAX), 10);
    }

    /// A varint read back, for the round trip below.
    fn read_varint(b: &[u8]) -> (u64, usize) {
        let mut v = 0u64;
        for (i, x) in b.iter().enumerate() {
            v |= ((x & 0x7f) as u64) << (7 * i);
            if x & 0x80 == 0 {
                return (v, i + 1);
            }
        }
        panic!("unterminated varint");
    }

    proptest! {
        #[test]
        fn varint_len_matches_and_round_trips(v in any::<u64>()) {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            prop_assert_eq!(b.len(), varint_len(v));
            prop_assert_eq!(read_varint(&b), (v, b.len()));
        }

        #[test]
        fn patched_len_reads_back(n in 0u32..(1 << 28)) {
            let mut d = [0u8; 4];
            patch_len(&mut d, n);
            prop_assert_eq!(read_varint(&d), (n as u64, 4));
        }
    }
}
