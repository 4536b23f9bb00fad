//! `polytrace-record`: the same code as `polytrace record`.
fn main() -> std::process::ExitCode {
    polytrace::cli::main_verb("record")
}
