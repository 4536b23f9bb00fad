//! What `cargo install --locked --path .` puts on a machine: release
//! binaries without debug info, stripped, small enough to ship (the
//! `profiling` profile keeps symbols for perf work).
mod common;

use std::path::PathBuf;

#[test]
fn release_binaries_are_stripped_and_small() {
    let bin = common::bin();
    // Only a release build is what gets installed.
    if cfg!(debug_assertions)
        || bin.parent().and_then(|d| d.file_name()) != Some("release".as_ref())
    {
        eprintln!("skipping: not a release build ({})", bin.display());
        return;
    }
    let mut total = 0;
    for name in ["polytrace-convert", "polytrace-dump", "polytrace-record"] {
        let p: PathBuf = bin.with_file_name(name);
        total += std::fs::metadata(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .len();
    }
    let main = std::fs::metadata(&bin).unwrap().len();
    assert!(
        // Built beside the tests, the binary carries what the dev-dependencies
        // switch on in shared crates (regex's Unicode tables, ~0.2 MB); the
        // installed one (`cargo install --locked`) is 10,000,000 bytes at most.
        main <= 10 << 20,
        "polytrace is {main} bytes (at most 10 MB)"
    );
    assert!(
        total <= 40 << 20,
        "the verb binaries are {total} bytes (at most 40 MB)"
    );
    // Stripped: no symbol table, no DWARF sections.
    let bytes = std::fs::read(&bin).unwrap();
    let Some(names) = elf64_section_names(&bytes) else {
        eprintln!("not a little-endian ELF64 file: sections not checked");
        return;
    };
    assert!(names.iter().any(|n| n == ".text"), "{names:?}");
    for n in &names {
        assert!(
            n != ".symtab" && !n.starts_with(".debug_"),
            "{} has a {n} section",
            bin.display()
        );
    }
}

/// Section names of a little-endian ELF64 file (None for anything else).
fn elf64_section_names(b: &[u8]) -> Option<Vec<String>> {
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 || b[5] != 1 {
        return None;
    }
    let u16_at = |o: usize| Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?) as usize);
    let u32_at = |o: usize| Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?) as usize);
    let u64_at = |o: usize| Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?) as usize);
    let (shoff, shentsize, shnum, shstrndx) =
        (u64_at(0x28)?, u16_at(0x3a)?, u16_at(0x3c)?, u16_at(0x3e)?);
    let header = |i: usize| shoff + i * shentsize;
    let strtab = u64_at(header(shstrndx) + 0x18)?;
    (0..shnum)
        .map(|i| {
            let start = strtab + u32_at(header(i))?;
            let len = b.get(start..)?.iter().position(|&c| c == 0)?;
            Some(String::from_utf8_lossy(&b[start..start + len]).into_owned())
        })
        .collect()
}
