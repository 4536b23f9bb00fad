//! A batch lists every entry its walk meets: converted, or skipped or
//! failed with the reason; names keep their bytes and are quoted as
//! `ls --quoting-style=shell-escape` quotes them.

mod common;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

#[test]
fn every_entry_is_listed_and_names_keep_their_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let dlt = common::testdata().join("kpi/B-buf400.dlt");
    std::fs::copy(&dlt, src.join("a.dlt")).unwrap();
    std::fs::copy(&dlt, src.join(OsStr::from_bytes(b"b\xff.dlt"))).unwrap();
    std::fs::copy(&dlt, src.join("n\nl.dlt")).unwrap();
    std::os::unix::fs::symlink(src.join("a.dlt"), src.join("link.dlt")).unwrap();
    let fifo = src.join("p.dlt");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let out_dir = dir.path().join("out");
    let err = common::exit_under_test(
        0,
        &["convert", "--to", "chrome-json", "-o"],
        &[&out_dir, &src],
    );
    let listing: Vec<&str> = err
        .lines()
        .skip_while(|l| !l.starts_with("result"))
        .skip(1)
        .collect();
    let want = [
        "ok         a.dlt",
        "ok         'b'$'\\377''.dlt'",
        "skipped    link.dlt: symbolic link (not followed)",
        "ok         'n'$'\\n''l.dlt'",
        "skipped    p.dlt: not a regular file",
        "3 ok, 0 salvaged, 0 failed, 2 skipped (not a trace, or nothing to write)",
    ];
    assert_eq!(listing, want, "{err}");
    // The output of the name that is not UTF-8 keeps its bytes.
    assert!(out_dir.join(OsStr::from_bytes(b"b\xff.json")).is_file());
    assert!(out_dir.join("n\nl.json").is_file());
}
