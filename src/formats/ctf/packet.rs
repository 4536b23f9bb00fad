//! Data streams: one file per stream instance, written as a sequence of
//! packets of bounded size. Every packet starts with the trace packet
//! header and the stream class's packet context (layout below, matching the
//! TSDL `metadata::write` declares).

use crate::error::{Error, Result};
use byteorder::{ByteOrder, LittleEndian as LE};
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

/// CTF packet magic.
pub const MAGIC: u32 = 0xC1FC_1FC1;

/// Packet header: magic u32, uuid [16]u8, stream_id u32, stream_instance_id u64.
pub const HEADER_LEN: usize = 32;
/// Packet context offsets (from the packet start).
const TS_BEGIN: usize = 32;
const TS_END: usize = 40;
const CONTENT_SIZE: usize = 48;
const PACKET_SIZE: usize = 56;
const SEQ_NUM: usize = 64;
const DISCARDED: usize = 72;
/// Context of the "other" stream class ends here; the CPU class adds cpu_id u32.
const CONTEXT_END: usize = 80;

/// Stream class ids (`stream_id` in the packet header).
pub const SC_CPU: u32 = 0;
pub const SC_OTHER: u32 = 1;

/// One stream instance being written.
pub struct Stream {
    pub path: PathBuf,
    file: File,
    pub class: u32,
    /// The packet being filled: header and context first, then events.
    buf: Vec<u8>,
    /// Bytes of header + context (where events start).
    start: usize,
    events: u64,
    /// Time of the last event written (packets never go back in time).
    pub last_ts: u64,
    seq: u64,
    pub written_events: u64,
}

impl Stream {
    pub fn create(
        path: PathBuf,
        uuid: &[u8; 16],
        class: u32,
        instance: u64,
        cpu: Option<u32>,
        cap: usize,
    ) -> Result<Stream> {
        let file = File::create(&path).map_err(|e| Error::io(&path, e))?;
        let mut buf = Vec::with_capacity(cap);
        buf.resize(CONTEXT_END, 0);
        LE::write_u32(&mut buf[0..4], MAGIC);
        buf[4..20].copy_from_slice(uuid);
        LE::write_u32(&mut buf[20..24], class);
        LE::write_u64(&mut buf[24..32], instance);
        if let Some(c) = cpu {
            buf.extend_from_slice(&c.to_le_bytes());
        }
        let start = buf.len();
        Ok(Stream {
            path,
            file,
            class,
            buf,
            start,
            events: 0,
            last_ts: 0,
            seq: 0,
            written_events: 0,
        })
    }

    /// Append one encoded event (header, context, payload) at time `ts`,
    /// first closing the packet if the event would not fit in `cap` bytes.
    /// An event larger than `cap` gets a packet of its own.
    pub fn push(&mut self, ts: u64, event: &[u8], cap: usize) -> Result<()> {
        if self.events > 0 && self.buf.len() + event.len() > cap {
            self.flush_packet()?;
        }
        if self.events == 0 {
            LE::write_u64(&mut self.buf[TS_BEGIN..TS_BEGIN + 8], ts);
        }
        self.buf.extend_from_slice(event);
        self.events += 1;
        self.written_events += 1;
        self.last_ts = ts;
        Ok(())
    }

    /// Write the current packet (if it holds events) and start the next.
    pub fn flush_packet(&mut self) -> Result<()> {
        if self.events == 0 {
            return Ok(());
        }
        let bits = (self.buf.len() as u64) * 8;
        LE::write_u64(&mut self.buf[TS_END..TS_END + 8], self.last_ts);
        LE::write_u64(&mut self.buf[CONTENT_SIZE..CONTENT_SIZE + 8], bits);
        LE::write_u64(&mut self.buf[PACKET_SIZE..PACKET_SIZE + 8], bits);
        LE::write_u64(&mut self.buf[SEQ_NUM..SEQ_NUM + 8], self.seq);
        LE::write_u64(&mut self.buf[DISCARDED..DISCARDED + 8], 0);
        self.file
            .write_all(&self.buf)
            .map_err(|e| Error::io(&self.path, e))?;
        self.seq += 1;
        self.events = 0;
        self.buf.truncate(self.start);
        Ok(())
    }

    pub fn finish(&mut self) -> Result<()> {
        self.flush_packet()?;
        self.file.flush().map_err(|e| Error::io(&self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_split_at_the_cap_and_carry_their_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s");
        let mut s = Stream::create(p.clone(), &[7; 16], SC_CPU, 3, Some(1), 100).unwrap();
        for ts in [10u64, 20, 30] {
            s.push(ts, &[0xaa; 10], 100).unwrap();
        }
        s.finish().unwrap();
        let b = std::fs::read(&p).unwrap();
        // 84 bytes of header+context + 10 + (next one would be 104 > 100).
        let first = LE::read_u64(&b[PACKET_SIZE..]) as usize / 8;
        assert_eq!(first, 94);
        assert_eq!(LE::read_u32(&b[0..]), MAGIC);
        assert_eq!(LE::read_u64(&b[24..]), 3);
        assert_eq!(LE::read_u32(&b[80..]), 1);
        assert_eq!(
            (LE::read_u64(&b[TS_BEGIN..]), LE::read_u64(&b[TS_END..])),
            (10, 10)
        );
        let n = b.len() / 94;
        assert_eq!((n, b.len() % 94), (3, 0));
        assert_eq!(LE::read_u64(&b[94 + SEQ_NUM..]), 1);
        assert_eq!(LE::read_u64(&b[2 * 94 + TS_BEGIN..]), 30);
    }
}
