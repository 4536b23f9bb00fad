//! `polytrace-record`: the same code as `polytrace record`.
#[global_allocator]
static ALLOC: polytrace::cleanup::Allocator = polytrace::cleanup::Allocator;
fn main() -> std::process::ExitCode {
    polytrace::cli::main_verb("record")
}
