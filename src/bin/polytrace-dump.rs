//! `polytrace-dump`: the same code as `polytrace dump`.
fn main() -> std::process::ExitCode {
    polytrace::cli::main_verb("dump")
}
