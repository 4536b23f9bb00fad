#![no_main]
//! The pcp reader, listing and checker on arbitrary bytes (see ../README.md).

#[path = "../src/target.rs"]
mod target;

libfuzzer_sys::fuzz_target!(|data: &[u8]| target::run(polytrace::model::FormatId::Pcp, data));
