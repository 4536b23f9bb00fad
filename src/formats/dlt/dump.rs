//! `polytrace dump FILE.dlt`: what `dlt-convert -a` (or `-s` with
//! `--headers-only`) prints, byte for byte, for undamaged files. Damage is
//! reported instead of being skipped silently (see scan.rs).

use super::scan::Scanner;
use super::text::{self, push_u64, DateCache};
use crate::error::{Diagnostic, Error, Result};
use crate::input::Input;
use crate::options::{DumpOptions, ReadOptions};
use std::io::Write;

/// Output is collected in a chunk this big before each write.
const CHUNK: usize = 1 << 18;

pub fn dump(
    input: &Input,
    ropts: &ReadOptions,
    dopts: &DumpOptions,
    out: &mut dyn Write,
) -> Result<Vec<Diagnostic>> {
    let stream = super::open_raw(input)?;
    let mut sc = Scanner::new(stream, input.path.clone(), ropts.salvage);
    let mut dates = DateCache::new();
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK + 16 * 1024);
    let werr = |e| Error::io("<stdout>", e);
    let mut idx = 0u64;
    loop {
        let m = match sc.next_msg() {
            Ok(Some(m)) => m,
            Ok(None) => break,
            Err(e) => {
                // Keep what was listed before the damage.
                out.write_all(&buf).map_err(werr)?;
                return Err(e);
            }
        };
        push_u64(&mut buf, idx);
        buf.push(b' ');
        text::header(&mut dates, &m, &mut buf);
        if dopts.headers_only {
            buf.extend_from_slice(b" \n");
        } else {
            buf.extend_from_slice(b" [");
            text::payload(&m, &mut buf);
            buf.extend_from_slice(b"]\n");
        }
        idx += 1;
        if buf.len() >= CHUNK {
            out.write_all(&buf).map_err(werr)?;
            buf.clear();
        }
    }
    out.write_all(&buf).map_err(werr)?;
    Ok(std::mem::take(&mut sc.diags))
}
