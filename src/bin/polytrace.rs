//! `polytrace`: git-style front end; all logic lives in the library.
fn main() -> std::process::ExitCode {
    polytrace::cli::main()
}
