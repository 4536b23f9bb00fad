//! A global allocator that aborts on any single allocation over 256 MB, so
//! that a size read from a file driving an allocation is a crash the fuzzer
//! reports, even where the pages would never be touched (libFuzzer's own
//! `-malloc_limit_mb` needs a sanitizer build; these targets run without one,
//! the crate being safe Rust).

use std::alloc::{GlobalAlloc, Layout, System};

pub const LIMIT: usize = 256 << 20;

pub struct Limit;

unsafe impl GlobalAlloc for Limit {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        check(l.size());
        System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        check(l.size());
        System.alloc_zeroed(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        check(n);
        System.realloc(p, l, n)
    }
}

fn check(n: usize) {
    if n > LIMIT {
        // No formatting here: it would allocate inside the allocator.
        let msg = b"limit_alloc: single allocation over 256 MB\n";
        unsafe {
            libc_write(msg);
        }
        std::process::abort();
    }
}

unsafe fn libc_write(msg: &[u8]) {
    extern "C" {
        fn write(fd: i32, buf: *const u8, n: usize) -> isize;
    }
    let _ = write(2, msg.as_ptr(), msg.len());
}
