//! What every fuzz target is besides its format: the shared harness under
//! the allocation limit (each target includes this file by path).

#[path = "harness.rs"]
mod harness;
#[path = "limit_alloc.rs"]
mod limit_alloc;

pub use harness::run;

#[global_allocator]
static ALLOC: limit_alloc::Limit = limit_alloc::Limit;
