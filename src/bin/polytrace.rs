//! `polytrace`: git-style front end; all logic lives in the library.
#[global_allocator]
static ALLOC: polytrace::cleanup::Allocator = polytrace::cleanup::Allocator;
fn main() -> std::process::ExitCode {
    polytrace::cli::main()
}
