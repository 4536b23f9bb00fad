//! `polytrace-convert`: the same code as `polytrace convert`.
fn main() -> std::process::ExitCode {
    polytrace::cli::main_verb("convert")
}
