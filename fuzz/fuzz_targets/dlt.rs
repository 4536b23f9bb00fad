#![no_main]
//! The dlt reader, listing and checker on arbitrary bytes (see ../README.md).

use libfuzzer_sys::fuzz_target;

#[path = "../src/harness.rs"]
mod harness;
#[path = "../src/limit_alloc.rs"]
mod limit_alloc;

#[global_allocator]
static ALLOC: limit_alloc::Limit = limit_alloc::Limit;

fuzz_target!(|data: &[u8]| {
    harness::run(polytrace::model::FormatId::Dlt, data);
});
