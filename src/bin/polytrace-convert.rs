//! `polytrace-convert`: the same code as `polytrace convert`.
#[global_allocator]
static ALLOC: polytrace::cleanup::Allocator = polytrace::cleanup::Allocator;
fn main() -> std::process::ExitCode {
    polytrace::cli::main_verb("convert")
}
