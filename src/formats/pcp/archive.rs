//! Archive members: name resolution as libpcp does it, decompression, and
//! framed record reading with byte positions.

use super::layout::{self, bei32, LabelError, LogLabel, Version};
use crate::error::{Error, Position, Result};
use crate::input::{
    archive_base_of, each_name, strip_compression, Input, InputKind, COMPRESSED_SUFFIXES,
};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

/// The files of one archive.
#[derive(Debug, Clone)]
pub struct Members {
    pub base: PathBuf,
    pub meta: PathBuf,
    pub index: Option<PathBuf>,
    /// (volume number, path), ascending.
    pub volumes: Vec<(u32, PathBuf)>,
    /// Members being decompressed once into temporary files.
    pub spools: Vec<(PathBuf, std::sync::Arc<Spool>)>,
}

/// Resolve the base name from the input (base, any member, compressed or not).
pub fn base_of(input: &Input) -> PathBuf {
    match input.kind {
        InputKind::File => archive_base_of(&input.path).unwrap_or_else(|| input.path.clone()),
        _ => input.path.clone(),
    }
}

/// Find the members of the archive `base`.
pub fn resolve(base: &Path) -> Result<Members> {
    let stem = base
        .file_name()
        .and_then(|s| s.to_str())
        .ok_or_else(|| Error::Usage(format!("{}: not an archive name", base.display())))?
        .to_string();
    let dir = match base.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut meta: Option<(usize, PathBuf)> = None;
    let mut index: Option<(usize, PathBuf)> = None;
    let mut vols: Vec<(u32, usize, PathBuf)> = Vec::new();
    // Preference among duplicates follows libpcp's lookup order: plain first,
    // then the suffixes in COMPRESSED_SUFFIXES order.
    let rank = |n: &str| -> usize {
        COMPRESSED_SUFFIXES
            .iter()
            .position(|s| n.ends_with(s))
            .map(|i| i + 1)
            .unwrap_or(0)
    };
    each_name(&dir, |n| {
        let Some(rest) = strip_compression(n)
            .strip_prefix(stem.as_str())
            .and_then(|r| r.strip_prefix('.'))
        else {
            return;
        };
        let r = rank(n);
        let p = dir.join(n);
        if rest == "meta" {
            if meta.as_ref().is_none_or(|(k, _)| r < *k) {
                meta = Some((r, p));
            }
        } else if rest == "index" {
            if index.as_ref().is_none_or(|(k, _)| r < *k) {
                index = Some((r, p));
            }
        } else if !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(v) = rest.parse::<u32>() {
                vols.push((v, r, p));
            }
        }
    })
    .map_err(|e| Error::io(&dir, e))?;
    vols.sort();
    let mut volumes: Vec<(u32, PathBuf)> = Vec::new();
    for (v, _, p) in vols {
        if volumes.last().map(|(x, _)| *x) != Some(v) {
            volumes.push((v, p));
        }
    }
    let meta = meta
        .ok_or_else(|| {
            Error::format(
                Position::new(base),
                "no .meta file for this archive (not a PCP archive?)",
            )
        })?
        .1;
    if volumes.is_empty() {
        return Err(Error::format(
            Position::new(base),
            "archive has no data volume (.0, .1, ...)",
        ));
    }
    Ok(Members {
        base: base.to_path_buf(),
        meta,
        index: index.map(|x| x.1),
        volumes,
        spools: Vec::new(),
    })
}

/// Open a member, decompressing by its suffix (streamed).
pub fn open_member(path: &Path) -> Result<Box<dyn Read>> {
    open_member_opt(path, false)
}

/// As [`open_member`]; `fast` skips xz integrity checks (for the quick
/// pre-scan that only looks for the last timestamp).
pub fn open_member_opt(path: &Path, fast: bool) -> Result<Box<dyn Read>> {
    let f = File::open(path).map_err(|e| Error::io(path, e))?;
    let f = BufReader::with_capacity(1 << 16, f);
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.ends_with(".xz") && fast {
        // 0x08 CONCATENATED | 0x10 IGNORE_CHECK (liblzma flag values).
        let s = liblzma::stream::Stream::new_stream_decoder(u64::MAX, 0x08 | 0x10)
            .map_err(|e| Error::io(path, std::io::Error::other(e)))?;
        Ok(Box::new(liblzma::read::XzDecoder::new_stream(f, s)))
    } else if name.ends_with(".xz") {
        Ok(Box::new(liblzma::read::XzDecoder::new_multi_decoder(f)))
    } else if name.ends_with(".lzma") {
        let s = liblzma::stream::Stream::new_lzma_decoder(u64::MAX)
            .map_err(|e| Error::io(path, std::io::Error::other(e)))?;
        Ok(Box::new(liblzma::read::XzDecoder::new_stream(f, s)))
    } else if name.ends_with(".bz2") || name.ends_with(".bz") {
        Ok(Box::new(bzip2::read::MultiBzDecoder::new(f)))
    } else if name.ends_with(".gz") {
        Ok(Box::new(flate2::read::MultiGzDecoder::new(f)))
    } else if name.ends_with(".Z") || name.ends_with(".z") {
        Err(Error::Unsupported(format!(
            "{}: compress(1) .Z/.z members are not supported; uncompress it first",
            path.display()
        )))
    } else {
        Ok(Box::new(f))
    }
}

/// Reads framed records from one member.
pub struct RecordReader {
    pub path: PathBuf,
    inner: Box<dyn Read>,
    /// Offset of the next record.
    pub pos: u64,
    /// Records read so far (label is record 0).
    pub recno: u64,
    pub compressed: bool,
}

/// Outcome of reading a record.
pub enum Rec {
    /// A complete record: offset, bytes (including both len words).
    Ok,
    Eof,
}

impl RecordReader {
    pub fn open(path: &Path) -> Result<RecordReader> {
        RecordReader::open_opt(path, false)
    }

    pub fn open_opt(path: &Path, fast: bool) -> Result<RecordReader> {
        let name = path.to_string_lossy();
        Ok(RecordReader {
            path: path.to_path_buf(),
            inner: open_member_opt(path, fast)?,
            pos: 0,
            recno: 0,
            compressed: strip_compression(&name) != name,
        })
    }

    pub fn err(&self, off: u64, msg: impl Into<String>) -> Error {
        Error::format(Position::at(&self.path, off, Some(self.recno)), msg)
    }

    fn read_full(&mut self, buf: &mut [u8]) -> Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            match self.inner.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // Positioned, so that --salvage can name where the good
                // prefix ends (a damaged compressed stream lands here).
                Err(e) => {
                    return Err(self.err(self.pos, format!("cannot read this record: {e}")));
                }
            }
        }
        Ok(n)
    }

    /// Read the next framed record into `buf` (whole record, len words included).
    /// Returns Eof at a clean end of file.
    pub fn next(&mut self, buf: &mut Vec<u8>) -> Result<Rec> {
        let start = self.pos;
        let mut hdr = [0u8; 4];
        let n = self.read_full(&mut hdr)?;
        if n == 0 {
            return Ok(Rec::Eof);
        }
        if n < 4 {
            return Err(self.err(start, "truncated record header (end of file)"));
        }
        let len = i32::from_be_bytes(hdr);
        if len < 12 {
            return Err(self.err(start, format!("corrupted record: bad length {len}")));
        }
        let want = len as u64 - 4;
        let got = if want <= 1 << 20 {
            // Only bytes the buffer never held are zeroed: the read
            // overwrites the rest (this runs once per record).
            buf.resize(len as usize, 0);
            buf[..4].copy_from_slice(&hdr);
            let n = self.read_full(&mut buf[4..])?;
            buf.truncate(4 + n);
            n as u64
        } else {
            // take() + read_to_end grows the buffer only with data really
            // present, so a huge bogus length cannot drive a huge allocation.
            buf.clear();
            buf.extend_from_slice(&hdr);
            (&mut self.inner)
                .take(want)
                .read_to_end(buf)
                .map_err(|e| Error::io(&self.path, e))? as u64
        };
        if got < want {
            return Err(self.err(
                start,
                format!(
                    "truncated record: length {len} but only {} bytes left",
                    got + 4
                ),
            ));
        }
        let trailer = bei32(buf, len as usize - 4).unwrap_or(0);
        if trailer != len {
            return Err(self.err(
                start,
                format!("corrupted record: trailer length {trailer} != header length {len}"),
            ));
        }
        self.pos += len as u64;
        self.recno += 1;
        Ok(Rec::Ok)
    }

    /// Open `path`, from its spooled copy when `m` has one (positions still
    /// name `path`).
    pub fn open_in(m: &Members, path: &Path, fast: bool) -> Result<RecordReader> {
        match m.spools.iter().find(|(p, _)| p == path) {
            Some((_, sp)) => Ok(RecordReader {
                path: path.to_path_buf(),
                // Unbuffered: records are read whole, straight from the copy.
                inner: Box::new(sp.reader()),
                pos: 0,
                recno: 0,
                compressed: true,
            }),
            None => RecordReader::open_opt(path, fast),
        }
    }

    /// Read and parse the label (record 0).
    pub fn label(&mut self) -> Result<LogLabel> {
        let mut b = vec![0u8; 8];
        let n = self.read_full(&mut b)?;
        if n < 8 {
            return Err(self.err(
                0,
                if n == 0 {
                    "empty file (no label)".to_string()
                } else {
                    "truncated label record".to_string()
                },
            ));
        }
        let version = match layout::sniff(&b) {
            Some(Ok(v)) => v,
            Some(Err(e)) => return Err(self.err(0, e.to_string())),
            None => return Err(self.err(0, "truncated label record")),
        };
        let len = bei32(&b, 0).unwrap_or(0);
        if len as usize != version.label_len() {
            return Err(self.err(0, LabelError::BadLen(len).to_string()));
        }
        b.resize(version.label_len(), 0);
        let n = self.read_full(&mut b[8..])?;
        if n < version.label_len() - 8 {
            return Err(self.err(0, LabelError::Short.to_string()));
        }
        let l = layout::parse_label(&b).map_err(|e| self.err(0, e.to_string()))?;
        self.pos = version.label_len() as u64;
        self.recno = 1;
        Ok(l)
    }

    /// Skip forward to offset `to` (seeking is not possible through a
    /// decompressor, so the bytes are read and dropped).
    pub fn skip_to(&mut self, to: u64) -> Result<()> {
        // Large reads: the reader may be unbuffered (a spooled copy).
        let mut buf = vec![0u8; (to.saturating_sub(self.pos)).min(1 << 20) as usize];
        while self.pos < to {
            let want = ((to - self.pos) as usize).min(buf.len());
            match self.inner.read(&mut buf[..want]) {
                Ok(0) => break,
                Ok(n) => self.pos += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(&self.path, e)),
            }
        }
        Ok(())
    }

    /// Read the rest of the member as raw bytes (for the index).
    pub fn rest(&mut self, cap: u64) -> Result<Vec<u8>> {
        let mut v = Vec::new();
        (&mut self.inner)
            .take(cap)
            .read_to_end(&mut v)
            .map_err(|e| Error::io(&self.path, e))?;
        Ok(v)
    }
}

/// Size of a member once decompressed, for checks (uncompressed: file size).
pub fn plain_size(path: &Path) -> Option<u64> {
    let name = path.to_string_lossy();
    if strip_compression(&name) == name {
        std::fs::metadata(path).ok().map(|m| m.len())
    } else {
        None
    }
}

pub fn version_of_label(l: &LogLabel) -> Version {
    l.version
}

/// A decompressed copy of one compressed member, written by a background
/// thread to an unlinked temporary file, so that a listing decodes each
/// volume once (the "ending" time needs the last record before anything is
/// printed) and decoding overlaps formatting. Readers may run while the copy
/// grows: they wait for data, and meet the decoder's error, if any, at the
/// offset where it happened. When the copy cannot be written (no room in
/// TMPDIR) readers decode the member themselves from where the copy ends.
pub struct Spool {
    /// The compressed member.
    path: PathBuf,
    file: File,
    state: std::sync::Mutex<SpoolState>,
    grown: std::sync::Condvar,
}

#[derive(Default)]
struct SpoolState {
    len: u64,
    done: bool,
    err: Option<(std::io::ErrorKind, String)>,
    /// The copy could not be written (a full temporary file system):
    /// readers go past `len` by decoding the member themselves.
    abandoned: bool,
}

impl std::fmt::Debug for Spool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Spool")
    }
}

impl Spool {
    /// Start decoding `path` into a temporary file; None when no temporary
    /// file can be made (the caller then decodes in place).
    pub fn start(path: &Path) -> Option<std::sync::Arc<Spool>> {
        Some(Spool::start_in(path, tempfile::tempfile().ok()?))
    }

    /// As [`Spool::start`], copying into `file`.
    fn start_in(path: &Path, file: File) -> std::sync::Arc<Spool> {
        let sp = std::sync::Arc::new(Spool {
            path: path.to_path_buf(),
            file,
            state: Default::default(),
            grown: Default::default(),
        });
        // The thread holds only a weak reference: once every reader is gone
        // it stops instead of decoding for nobody.
        let w = std::sync::Arc::downgrade(&sp);
        let path = path.to_path_buf();
        let w2 = w.clone();
        let spawned = std::thread::Builder::new().spawn(move || match open_member(&path) {
            Ok(src) => Spool::fill(w, src),
            Err(e) => {
                if let Some(sp) = w.upgrade() {
                    sp.publish(0, Some((std::io::ErrorKind::Other, e.to_string())), true);
                }
            }
        });
        // No thread to decode with (out of memory or threads): an error
        // of the machine, reported as the read's error, never a panic.
        if let Err(e) = spawned {
            if let Some(sp) = w2.upgrade() {
                sp.publish(
                    0,
                    Some((
                        std::io::ErrorKind::OutOfMemory,
                        format!("cannot start a thread: {e}"),
                    )),
                    true,
                );
            }
        }
        sp
    }

    fn fill(w: std::sync::Weak<Spool>, mut src: Box<dyn Read>) {
        use std::os::unix::fs::FileExt;
        // Small reads: liblzma's reader drops the output of the call that
        // meets damage, and --salvage should lose as little as possible.
        let mut buf = vec![0u8; 1 << 16];
        let mut len = 0u64;
        loop {
            let r = src.read(&mut buf);
            let Some(sp) = w.upgrade() else {
                return;
            };
            let err = match r {
                Ok(0) => None,
                Ok(n) => match sp.file.write_all_at(&buf[..n], len) {
                    Ok(()) => {
                        len += n as u64;
                        sp.publish(len, None, false);
                        continue;
                    }
                    Err(_) => {
                        // Only the bytes before `len` are certain to be there.
                        let mut st = sp.state.lock().unwrap_or_else(|e| e.into_inner());
                        st.abandoned = true;
                        st.done = true;
                        sp.grown.notify_all();
                        return;
                    }
                },
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => Some((e.kind(), e.to_string())),
            };
            sp.publish(len, err, true);
            return;
        }
    }

    fn publish(&self, len: u64, err: Option<(std::io::ErrorKind, String)>, done: bool) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.len = len;
        st.done = done;
        st.err = err;
        self.grown.notify_all();
    }

    /// Whether the decoder has finished (the copy is complete or failed).
    pub fn finished(&self) -> bool {
        self.state.lock().map(|s| s.done).unwrap_or(true)
    }

    /// A reader from the start of the copy.
    pub fn reader(self: &std::sync::Arc<Self>) -> SpoolReader {
        SpoolReader {
            spool: self.clone(),
            pos: 0,
            direct: None,
        }
    }
}

/// Reads a [`Spool`] from the start, waiting for the decoder as needed.
pub struct SpoolReader {
    spool: std::sync::Arc<Spool>,
    pos: u64,
    /// Own decoder, once the copy was abandoned and read to its end.
    direct: Option<Box<dyn Read>>,
}

impl Read for SpoolReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::unix::fs::FileExt;
        if let Some(d) = self.direct.as_mut() {
            return d.read(buf);
        }
        let sp = &self.spool;
        let mut st = sp.state.lock().unwrap_or_else(|e| e.into_inner());
        while st.len <= self.pos && !st.done {
            st = sp.grown.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        if st.len <= self.pos && st.abandoned {
            drop(st);
            let mut d = open_member(&sp.path).map_err(std::io::Error::other)?;
            let skipped = std::io::copy(&mut (&mut d).take(self.pos), &mut std::io::sink())?;
            if skipped < self.pos {
                return Ok(0);
            }
            self.direct = Some(d);
            return self.read(buf);
        }
        if st.len <= self.pos {
            return match &st.err {
                Some((k, m)) => Err(std::io::Error::new(*k, m.clone())),
                None => Ok(0),
            };
        }
        let avail = (st.len - self.pos).min(buf.len() as u64) as usize;
        drop(st);
        let n = sp.file.read_at(&mut buf[..avail], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn xz_member(dir: &Path, data: &[u8]) -> PathBuf {
        let p = dir.join("m.0.xz");
        let mut e = liblzma::write::XzEncoder::new(Vec::new(), 1);
        e.write_all(data).unwrap();
        std::fs::write(&p, e.finish().unwrap()).unwrap();
        p
    }

    /// 2 MB: many of the decoder's 64 KB chunks.
    fn data() -> Vec<u8> {
        (0..500_000u32)
            .flat_map(|i| (i / 3).to_le_bytes())
            .collect()
    }

    #[test]
    fn spooled_copy_reads_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let want = data();
        let p = xz_member(dir.path(), &want);
        let sp = Spool::start(&p).unwrap();
        let mut got = Vec::new();
        sp.reader().read_to_end(&mut got).unwrap();
        assert!(got == want);
        assert!(sp.finished());
    }

    /// A copy that cannot be written (here: a read-only file, as with a
    /// full TMPDIR) still reads back whole: the reader decodes the member.
    #[test]
    fn unwritable_copy_falls_back_to_decoding() {
        let dir = tempfile::tempdir().unwrap();
        let want = data();
        let p = xz_member(dir.path(), &want);
        let sp = Spool::start_in(&p, File::open("/dev/null").unwrap());
        let mut got = Vec::new();
        sp.reader().read_to_end(&mut got).unwrap();
        assert!(got == want);
    }

    /// Damage in the stream reaches the reader as an error after the
    /// bytes that decoded, not as a clean end.
    #[test]
    fn damaged_stream_is_an_error_not_an_end() {
        let dir = tempfile::tempdir().unwrap();
        let p = xz_member(dir.path(), &data());
        let mut b = std::fs::read(&p).unwrap();
        let mid = b.len() / 2;
        b[mid] ^= 0xff;
        b[mid + 1] ^= 0xff;
        std::fs::write(&p, b).unwrap();
        let sp = Spool::start(&p).unwrap();
        let mut got = Vec::new();
        assert!(sp.reader().read_to_end(&mut got).is_err());
    }
}
