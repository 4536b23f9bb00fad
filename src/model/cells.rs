//! Field values in a compact byte form: the values of a run of events
//! ([`super::EventRun`]). Each is a tag and its bytes, one after the other
//! in one buffer, so a run is filled by appending, handed between threads
//! in one copy (`model::wire` sends the bytes as they are) and read in
//! order without a `Value` (and a `String`) being built per value.
//!
//! The form lives only inside one process (native byte order). The bytes
//! are private: every way in ([`Cells::push_i64`] and friends, or
//! [`Cells::set_bytes`], which checks their framing) keeps them well
//! formed, so reading them never fails (and would end early rather than
//! panic if it did).

use super::Value;

// Value tags; `model::wire` writes values with these too, so that it
// carries a run's cells as they are.
pub(super) const I64: u8 = 0;
pub(super) const U64: u8 = 1;
pub(super) const F32: u8 = 2;
pub(super) const F64: u8 = 3;
pub(super) const STR: u8 = 4;
pub(super) const BYTES: u8 = 5;
pub(super) const ENUM: u8 = 6;

/// One value, borrowed from its [`Cells`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell<'a> {
    I64(i64),
    U64(u64),
    F32(f32),
    F64(f64),
    Enum(i64),
    /// UTF-8 text (as its bytes: most readers of a cell copy them).
    Str(&'a [u8]),
    Bytes(&'a [u8]),
}

impl Cell<'_> {
    /// The value, owned.
    pub fn to_value(self) -> Value {
        match self {
            Cell::I64(x) => Value::I64(x),
            Cell::U64(x) => Value::U64(x),
            Cell::F32(x) => Value::F32(x),
            Cell::F64(x) => Value::F64(x),
            Cell::Enum(x) => Value::Enum(x),
            Cell::Str(b) => match std::str::from_utf8(b) {
                Ok(s) => Value::Str(s.to_string()),
                Err(_) => Value::Bytes(b.to_vec()),
            },
            Cell::Bytes(b) => Value::Bytes(b.to_vec()),
        }
    }
}

impl Value {
    /// The value as a cell; None for nested values (lists, structs,
    /// unions, PCP event records), which have no cell.
    pub fn as_cell(&self) -> Option<Cell<'_>> {
        Some(match self {
            Value::I64(x) => Cell::I64(*x),
            Value::U64(x) => Cell::U64(*x),
            Value::F32(x) => Cell::F32(*x),
            Value::F64(x) => Cell::F64(*x),
            Value::Enum(x) => Cell::Enum(*x),
            Value::Str(s) => Cell::Str(s.as_bytes()),
            Value::Bytes(b) => Cell::Bytes(b),
            Value::List(_) | Value::Struct(_) | Value::Union(_) | Value::Events(_) => return None,
        })
    }
}

/// Values in their byte form, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cells {
    bytes: Vec<u8>,
    count: usize,
}

impl Cells {
    /// Values held.
    pub fn len(&self) -> usize {
        self.count
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// None held; the buffer is kept.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.count = 0;
    }
    /// The byte form (see [`Cells::set_bytes`]).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    #[inline]
    fn number(&mut self, tag: u8, x: u64) {
        let mut a = [0u8; 9];
        a[0] = tag;
        a[1..].copy_from_slice(&x.to_ne_bytes());
        self.bytes.extend_from_slice(&a);
        self.count += 1;
    }
    #[inline]
    fn text(&mut self, tag: u8, s: &[u8]) {
        // A length past u32 cannot be said: such a value is cut (no field
        // of a trace comes near 4 GiB).
        let s = &s[..s.len().min(u32::MAX as usize)];
        let mut a = [0u8; 5];
        a[0] = tag;
        a[1..].copy_from_slice(&(s.len() as u32).to_ne_bytes());
        self.bytes.extend_from_slice(&a);
        self.bytes.extend_from_slice(s);
        self.count += 1;
    }

    pub fn push_i64(&mut self, x: i64) {
        self.number(I64, x as u64);
    }
    /// Text if `b` is UTF-8, else bytes (as a text field of a source that
    /// may hold other bytes is read).
    pub fn push_text(&mut self, b: &[u8]) {
        match crate::model::utf8(b) {
            Some(_) => self.text(STR, b),
            None => self.text(BYTES, b),
        }
    }
    /// `v`; false (nothing pushed) for a nested value.
    pub fn push_value(&mut self, v: &Value) -> bool {
        match v.as_cell() {
            Some(c) => {
                self.push(c);
                true
            }
            None => false,
        }
    }
    pub fn push(&mut self, c: Cell) {
        match c {
            Cell::I64(x) => self.number(I64, x as u64),
            Cell::U64(x) => self.number(U64, x),
            Cell::F32(x) => self.number(F32, x.to_bits() as u64),
            Cell::F64(x) => self.number(F64, x.to_bits()),
            Cell::Enum(x) => self.number(ENUM, x as u64),
            Cell::Str(b) => self.text(STR, b),
            Cell::Bytes(b) => self.text(BYTES, b),
        }
    }

    /// The values, in order.
    pub fn iter(&self) -> CellIter<'_> {
        CellIter { b: &self.bytes }
    }

    /// Take `count` values in the byte form of [`Cells::bytes`] (another
    /// thread's): their framing checked whole (tags, lengths, count); false,
    /// with `self` left empty, if they are not such values. Text is taken
    /// as it is: it was UTF-8 where it came from, and [`Cell::to_value`]
    /// checks it again.
    pub fn set_bytes(&mut self, b: &[u8], count: usize) -> bool {
        self.clear();
        let mut it = CellIter { b };
        for _ in 0..count {
            match it.next_checked() {
                Some(Ok(())) => {}
                _ => return false,
            }
        }
        if !it.b.is_empty() {
            return false;
        }
        self.bytes.extend_from_slice(b);
        self.count = count;
        true
    }
}

/// The values of a [`Cells`], in order.
#[derive(Debug, Clone)]
pub struct CellIter<'a> {
    b: &'a [u8],
}

impl<'a> CellIter<'a> {
    /// Steps over one value, checking it: None at the end, Err(()) where
    /// the bytes are not a value.
    fn next_checked(&mut self) -> Option<Result<(), ()>> {
        let (&tag, rest) = self.b.split_first()?;
        let n = match tag {
            I64 | U64 | F32 | F64 | ENUM => 8,
            STR | BYTES => {
                let Some((len, _)) = rest.split_first_chunk::<4>() else {
                    return Some(Err(()));
                };
                // The text's end is checked with the step below.
                4 + u32::from_ne_bytes(*len) as usize
            }
            _ => return Some(Err(())),
        };
        match rest.get(n..) {
            Some(r) => {
                self.b = r;
                Some(Ok(()))
            }
            None => Some(Err(())),
        }
    }
}

impl<'a> Iterator for CellIter<'a> {
    type Item = Cell<'a>;
    #[inline]
    fn next(&mut self) -> Option<Cell<'a>> {
        let (&tag, rest) = self.b.split_first()?;
        // Well formed by construction (see the module): a short or unknown
        // value ends the values rather than panicking.
        if tag == STR || tag == BYTES {
            let (len, text) = rest.split_first_chunk::<4>()?;
            let len = u32::from_ne_bytes(*len) as usize;
            let s = text.get(..len)?;
            self.b = &text[len..];
            return Some(if tag == STR {
                Cell::Str(s)
            } else {
                Cell::Bytes(s)
            });
        }
        let (x, r) = rest.split_first_chunk::<8>()?;
        self.b = r;
        let x = u64::from_ne_bytes(*x);
        Some(match tag {
            I64 => Cell::I64(x as i64),
            U64 => Cell::U64(x),
            F32 => Cell::F32(f32::from_bits(x as u32)),
            F64 => Cell::F64(f64::from_bits(x)),
            ENUM => Cell::Enum(x as i64),
            _ => {
                self.b = &[];
                return None;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Value> {
        vec![
            Value::I64(-3),
            Value::U64(u64::MAX),
            Value::F32(1.5),
            Value::F64(f64::NAN),
            Value::Enum(7),
            Value::Str("kworker/0:1".into()),
            Value::Str(String::new()),
            Value::Bytes(vec![0xff, 0, 1]),
        ]
    }

    #[test]
    fn values_come_back_as_they_went_in() {
        let mut c = Cells::default();
        for v in sample() {
            assert!(c.push_value(&v));
        }
        assert!(!c.push_value(&Value::List(vec![])));
        assert_eq!(c.len(), 8);
        let back: Vec<Value> = c.iter().map(Cell::to_value).collect();
        // NaN is not equal to itself: compare by bits there.
        for (a, b) in sample().iter().zip(&back) {
            match (a, b) {
                (Value::F64(x), Value::F64(y)) => assert_eq!(x.to_bits(), y.to_bits()),
                _ => assert_eq!(a, b),
            }
        }
        let mut d = Cells::default();
        assert!(d.set_bytes(c.bytes(), c.len()));
        assert_eq!(d.bytes(), c.bytes());
    }

    #[test]
    fn text_that_is_not_utf8_goes_as_bytes() {
        let mut c = Cells::default();
        c.push_text(b"ok");
        c.push_text(&[0xc3, 0x28]);
        let v: Vec<Cell> = c.iter().collect();
        assert_eq!(v, vec![Cell::Str(b"ok"), Cell::Bytes(&[0xc3, 0x28])]);
    }

    #[test]
    fn bytes_that_are_not_values_are_refused() {
        let mut c = Cells::default();
        c.push_i64(1);
        c.push_text(b"abc");
        let b = c.bytes().to_vec();
        let mut d = Cells::default();
        // Every cut, a wrong count, an unknown tag.
        for n in 0..b.len() {
            assert!(!d.set_bytes(&b[..n], 2), "cut at {n}");
            assert!(d.is_empty());
        }
        assert!(!d.set_bytes(&b, 1));
        assert!(!d.set_bytes(&b, 3));
        let mut bad = b.clone();
        bad[0] = 9;
        assert!(!d.set_bytes(&bad, 2));
        assert!(d.set_bytes(&b, 2));
    }
}
