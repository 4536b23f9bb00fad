//! The row spool: the column set of a stream is known only at its end
//! (instances come and go), so rows wait in an unlinked temporary file in
//! a compact binary form, and the table is written from it once the header
//! is known. Memory holds one row and the column list, never the rows.

use byteorder::{LittleEndian as LE, ReadBytesExt, WriteBytesExt};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

/// One cell value as spooled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell<'a> {
    Int(i64),
    Uint(u64),
    F32(f32),
    F64(f64),
    Text(&'a str),
    /// Bytes written as `0x…` hex text.
    Hex(&'a [u8]),
}

const T_INT: u8 = 0;
const T_UINT: u8 = 1;
const T_F32: u8 = 2;
const T_F64: u8 = 3;
const T_TEXT: u8 = 4;
const T_HEX: u8 = 5;
/// Column number that ends a record.
const END: u32 = u32::MAX;

pub struct Spool {
    w: BufWriter<File>,
    records: u64,
}

impl Spool {
    /// An unlinked file in `dir` (the output's staging directory, so it
    /// never outlives the write and sits on the output's file system), or
    /// in `$TMPDIR` without one.
    pub fn new(dir: Option<&Path>) -> io::Result<Spool> {
        let f = match dir {
            Some(d) => tempfile::tempfile_in(d)?,
            None => tempfile::tempfile()?,
        };
        Ok(Spool {
            w: BufWriter::with_capacity(1 << 16, f),
            records: 0,
        })
    }

    pub fn records(&self) -> u64 {
        self.records
    }

    /// Start a record at `time` with a 32-bit `tag`; cells follow, then
    /// [`Spool::end`].
    pub fn begin(&mut self, time: i64, tag: u32) -> io::Result<()> {
        self.records += 1;
        self.w.write_i64::<LE>(time)?;
        self.w.write_u32::<LE>(tag)
    }

    pub fn end(&mut self) -> io::Result<()> {
        self.w.write_u32::<LE>(END)
    }

    pub fn cell(&mut self, col: u32, c: Cell<'_>) -> io::Result<()> {
        let w = &mut self.w;
        w.write_u32::<LE>(col)?;
        match c {
            Cell::Int(v) => {
                w.write_u8(T_INT)?;
                w.write_i64::<LE>(v)
            }
            Cell::Uint(v) => {
                w.write_u8(T_UINT)?;
                w.write_u64::<LE>(v)
            }
            Cell::F32(v) => {
                w.write_u8(T_F32)?;
                w.write_f32::<LE>(v)
            }
            Cell::F64(v) => {
                w.write_u8(T_F64)?;
                w.write_f64::<LE>(v)
            }
            Cell::Text(s) => {
                w.write_u8(T_TEXT)?;
                w.write_u64::<LE>(s.len() as u64)?;
                w.write_all(s.as_bytes())
            }
            Cell::Hex(b) => {
                w.write_u8(T_HEX)?;
                w.write_u64::<LE>(b.len() as u64)?;
                w.write_all(b)
            }
        }
    }

    /// Switch to reading from the start.
    pub fn into_reader(self) -> io::Result<SpoolReader> {
        let mut f = self.w.into_inner().map_err(|e| e.into_error())?;
        f.seek(SeekFrom::Start(0))?;
        Ok(SpoolReader {
            r: BufReader::with_capacity(1 << 16, f),
            left: self.records,
            cells: Vec::new(),
            bytes: Vec::new(),
        })
    }
}

/// A spooled cell: its column, kind, and value bits or byte range.
#[derive(Debug, Clone, Copy)]
pub struct RawCell {
    pub col: u32,
    kind: u8,
    bits: u64,
    start: usize,
    end: usize,
}

pub struct SpoolReader {
    r: BufReader<File>,
    left: u64,
    cells: Vec<RawCell>,
    bytes: Vec<u8>,
}

/// One record read back; cells borrow the reader's buffers.
pub struct Record<'a> {
    pub time: i64,
    pub tag: u32,
    pub cells: &'a [RawCell],
    bytes: &'a [u8],
}

impl Record<'_> {
    pub fn cell(&self, c: &RawCell) -> Cell<'_> {
        match c.kind {
            T_INT => Cell::Int(c.bits as i64),
            T_UINT => Cell::Uint(c.bits),
            T_F32 => Cell::F32(f32::from_bits(c.bits as u32)),
            T_F64 => Cell::F64(f64::from_bits(c.bits)),
            T_TEXT => {
                // Spooled from a &str: valid UTF-8 unless the file was damaged.
                Cell::Text(std::str::from_utf8(&self.bytes[c.start..c.end]).unwrap_or("\u{fffd}"))
            }
            _ => Cell::Hex(&self.bytes[c.start..c.end]),
        }
    }
}

impl SpoolReader {
    pub fn next_record(&mut self) -> io::Result<Option<Record<'_>>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let r = &mut self.r;
        let time = r.read_i64::<LE>()?;
        let tag = r.read_u32::<LE>()?;
        self.cells.clear();
        self.bytes.clear();
        loop {
            let col = r.read_u32::<LE>()?;
            if col == END {
                break;
            }
            let kind = r.read_u8()?;
            let (bits, start, end) = match kind {
                T_INT | T_UINT | T_F64 => (r.read_u64::<LE>()?, 0, 0),
                T_F32 => (r.read_u32::<LE>()? as u64, 0, 0),
                T_TEXT | T_HEX => {
                    let len = r.read_u64::<LE>()? as usize;
                    let start = self.bytes.len();
                    // The length was written by us for bytes that follow:
                    // take exactly that many (a short file is an error).
                    (&mut *r).take(len as u64).read_to_end(&mut self.bytes)?;
                    if self.bytes.len() - start != len {
                        return Err(io::ErrorKind::UnexpectedEof.into());
                    }
                    (0, start, self.bytes.len())
                }
                _ => return Err(io::Error::new(io::ErrorKind::InvalidData, "bad spool cell")),
            };
            self.cells.push(RawCell {
                col,
                kind,
                bits,
                start,
                end,
            });
        }
        Ok(Some(Record {
            time,
            tag,
            cells: &self.cells,
            bytes: &self.bytes,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_come_back_as_written() {
        let mut s = Spool::new(None).unwrap();
        s.begin(-5, 7).unwrap();
        s.cell(0, Cell::Int(-1)).unwrap();
        s.cell(4, Cell::Text("a,\"b\"\n")).unwrap();
        s.cell(2, Cell::F32(0.1)).unwrap();
        s.end().unwrap();
        s.begin(9, 0).unwrap();
        s.cell(1, Cell::Hex(&[0, 255])).unwrap();
        s.cell(3, Cell::Uint(u64::MAX)).unwrap();
        s.end().unwrap();
        let mut r = s.into_reader().unwrap();
        let rec = r.next_record().unwrap().unwrap();
        assert_eq!((rec.time, rec.tag, rec.cells.len()), (-5, 7, 3));
        let got: Vec<_> = rec.cells.iter().map(|c| (c.col, rec.cell(c))).collect();
        assert_eq!(
            got,
            [
                (0, Cell::Int(-1)),
                (4, Cell::Text("a,\"b\"\n")),
                (2, Cell::F32(0.1))
            ]
        );
        let rec = r.next_record().unwrap().unwrap();
        let got: Vec<_> = rec.cells.iter().map(|c| (c.col, rec.cell(c))).collect();
        assert_eq!(got, [(1, Cell::Hex(&[0, 255])), (3, Cell::Uint(u64::MAX))]);
        assert!(r.next_record().unwrap().is_none());
    }
}
