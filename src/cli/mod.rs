//! Command-line interface: `polytrace <verb>`. The binaries in `src/bin`
//! only call [`main`] or [`main_verb`].

pub mod args;
mod batch;
mod commands;
mod naming;
pub mod optspec;
mod progress;
mod record;
mod report;
mod stream;

/// The suffix a converted output gets (tests name their outputs by it).
pub use naming::output_suffix;

use args::{DumpArgs, FilterArgs, FormatReadArgs, GlobalArgs, InputArgs, MergeArgs, OutputArgs};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit codes (also in the README). Done, including what the target format
/// cannot hold by its nature (summarised on stderr).
pub const EXIT_OK: u8 = 0;
/// Damaged input: salvaged output written, or a listing that went on past
/// the damage (each skipped range reported).
pub const EXIT_SALVAGED: u8 = 1;
/// Error: nothing written.
pub const EXIT_ERROR: u8 = 2;
/// A batch finished, but some inputs failed.
pub const EXIT_BATCH_FAILED: u8 = 3;

#[derive(Parser, Debug)]
#[command(
    name = "polytrace",
    version,
    about = "Record, convert and read traces: reads and writes DLT KPI, PCP MMV, PCP archives, LTT, Snabb timeline; exports Chrome JSON, CSV, CTF, Parquet (`polytrace formats`)",
    after_help = "Exit codes: 0 done (what the target format cannot hold is summarised on stderr); 1 damaged input: salvaged output written, or (dump, info) a listing that went on past the damage, each skipped range on stderr; 2 error: nothing written (a listing stopped there: what it printed is not the whole input); 3 batch finished with failed inputs."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
    /// The declared options given on the command line (long names), for
    /// the check that each one applies ([`optspec`]).
    #[arg(skip)]
    pub given: Vec<&'static str>,
}

/// The command line as clap sees it, with the headings and requirements
/// the option declaration ([`optspec`]) sets.
pub fn cli_command() -> clap::Command {
    optspec::apply_headings(Cli::command()).mut_subcommand("record", |c| {
        c.mut_arg("output", |a| a.required_unless_present("live"))
            .override_usage(
                "polytrace record [OPTIONS] --output <OUT>\n       \
                 polytrace record [OPTIONS] --to mmv --live <NAME>",
            )
    })
}

/// The declared options given on the command line of `cmd` (matched as `m`).
fn given_options(cmd: &clap::Command, m: &clap::ArgMatches) -> Vec<&'static str> {
    let mut out = Vec::new();
    for a in cmd.get_arguments() {
        let Some(long) = a.get_long() else { continue };
        let Some(spec) = optspec::spec(long) else {
            continue;
        };
        let id = a.get_id().as_str();
        if m.try_contains_id(id).unwrap_or(false)
            && m.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
        {
            out.push(spec.long);
        }
    }
    out
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Sample /proc (like dlt-kpi) with TSC timestamps and write any format.
    ///
    /// The output is a PCP archive (OUT is its base name: OUT.meta, OUT.0,
    /// OUT.index) unless --to, or an extension of OUT that names a format
    /// (.ltt, .dlt, .kpi, …), asks for another.
    Record(RecordArgs),
    /// Convert a trace (or a directory tree of traces, or several traces
    /// merged into one) into another format.
    Convert(Box<ConvertArgs>),
    /// Print a listing of a trace.
    Dump(DumpCmd),
    /// Print what a trace holds: format, time span, counts (--stats: figures).
    Info(InfoCmd),
    /// Validate a trace; report the first problem with its position.
    Check(CheckArgs),
    /// Show which formats can be read, written and dumped.
    Formats(FormatsArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
    /// Print a man page in roff: `polytrace man convert | man -l -`.
    Man(ManArgs),
}

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// The command whose page to print (default: polytrace itself).
    pub command: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct RecordArgs {
    #[command(flatten)]
    pub output: OutputArgs,
    /// Sampling interval.
    #[arg(long, default_value = "1s")]
    pub interval: String,
    /// Stop after this long (e.g. 10s).
    #[arg(long, conflicts_with = "samples")]
    pub duration: Option<String>,
    /// Stop after this many intervals.
    #[arg(long)]
    pub samples: Option<u64>,
    /// Interval of the CHK (process list) records.
    #[arg(long, default_value = "10s")]
    pub check_interval: String,
    /// Hold up to this much in memory so the header gets the end-of-run
    /// clock calibration; past it, writing starts (0 = stream at once).
    #[arg(long, value_parser = args::parse_size, default_value = "64M", value_name = "SIZE")]
    pub buffer: u64,
    /// Write the common listing (as `dump --style common` prints it)
    /// instead of a trace file; `-o -` for stdout.
    #[arg(long, conflicts_with = "to")]
    pub listing: bool,
    /// With --to mmv: keep the MMV file $PCP_TMP_DIR/mmv/NAME updated in
    /// place every interval (pmcd's MMV PMDA serves it as mmv.NAME.*), no -o.
    #[arg(long, value_name = "NAME")]
    pub live: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct FormatsArgs {
    /// Print, for each source × target pair, what is kept, degraded and
    /// dropped (a Markdown table, from the writers' own declarations).
    #[arg(long)]
    pub mapping: bool,
}

#[derive(clap::Args, Debug)]
pub struct ConvertArgs {
    /// Input file, directory, PCP archive base name, or `-` for stdin;
    /// several inputs are merged into one time-ordered output.
    #[arg(required = true, num_args = 1..)]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub input_args: InputArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub merge: MergeArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub read_fmt: FormatReadArgs,
}

#[derive(clap::Args, Debug)]
pub struct DumpCmd {
    /// Input file, directory, PCP archive base name, or `-` for stdin.
    pub input: PathBuf,
    #[command(flatten)]
    pub input_args: InputArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub dump: DumpArgs,
    #[command(flatten)]
    pub read_fmt: FormatReadArgs,
}

#[derive(clap::Args, Debug)]
pub struct InfoCmd {
    /// Input file, directory, PCP archive base name, or `-` for stdin;
    /// several inputs are taken together, as a merge would see them.
    #[arg(required = true, num_args = 1..)]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub input_args: InputArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Figures: per metric and instance count, min, max, mean (and rate
    /// for counters); per event type count and events/s; per CPU and per
    /// source span and gaps.
    #[arg(long)]
    pub stats: bool,
    /// With --stats: the N busiest instances of each metric (highest mean;
    /// counters: mean rate), its N highest values (counters: rates) with
    /// their times, and the N busiest seconds of each event type. Choose
    /// the metric with --metric.
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// Print as JSON (for scripts).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub read_fmt: FormatReadArgs,
}

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// Input file, directory, PCP archive base name, or `-` for stdin.
    pub input: PathBuf,
    #[command(flatten)]
    pub input_args: args::CheckInputArgs,
}

/// Entry point of `polytrace`.
pub fn main() -> ExitCode {
    run_args(std::env::args_os().collect())
}

/// A `polytrace-<verb>` binary's command line: the verb's options at the top.
#[derive(Parser, Debug)]
#[command(version)]
struct Thin<A: clap::Args> {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(flatten)]
    args: A,
}

/// Entry point of a `polytrace-<verb>` binary: the verb's own command
/// (`polytrace-dump <INPUT>`, `polytrace-convert --version`), the same code.
pub fn main_verb(verb: &str) -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    match verb {
        "convert" => run_thin(verb, argv, |a| Command::Convert(Box::new(a))),
        "dump" => run_thin(verb, argv, Command::Dump),
        "record" => run_thin(verb, argv, Command::Record),
        _ => {
            eprintln!("polytrace: error: no command {verb:?}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// The clap command of `polytrace-<verb>`: help text as `polytrace <verb>`'s.
pub fn thin_command<A: clap::Args>(verb: &str) -> clap::Command {
    let top = cli_command();
    let sub = top
        .find_subcommand(verb)
        .expect("every thin binary names a verb");
    let mut cmd = optspec::headings(Thin::<A>::command())
        .name(format!("polytrace-{verb}"))
        .bin_name(format!("polytrace-{verb}"));
    if verb == "record" {
        cmd = cmd.mut_arg("output", |a| a.required(true));
    }
    if let Some(a) = sub.get_about() {
        cmd = cmd.about(a.clone());
    }
    if let Some(a) = top.get_after_help() {
        cmd = cmd.after_help(a.clone());
    }
    cmd
}

fn run_thin<A: clap::Args + clap::FromArgMatches>(
    verb: &str,
    argv: Vec<std::ffi::OsString>,
    wrap: fn(A) -> Command,
) -> ExitCode {
    let cmd = thin_command::<A>(verb);
    let parsed = cmd
        .clone()
        .try_get_matches_from(argv)
        .and_then(|m| Thin::<A>::from_arg_matches(&m).map(|t| (t, m)));
    match parsed {
        Ok((t, m)) => finish(commands::run(Cli {
            global: t.global,
            command: wrap(t.args),
            given: given_options(&cmd, &m),
        })),
        Err(e) => clap_exit(e),
    }
}

fn clap_exit(e: clap::Error) -> ExitCode {
    let code = if e.use_stderr() { EXIT_ERROR } else { EXIT_OK };
    let _ = e.print();
    ExitCode::from(code)
}

fn run_args(argv: Vec<std::ffi::OsString>) -> ExitCode {
    let cmd = cli_command();
    let parsed = cmd
        .clone()
        .try_get_matches_from(argv)
        .and_then(|m| Cli::from_arg_matches(&m).map(|c| (c, m)));
    match parsed {
        Ok((mut cli, m)) => {
            if let Some((name, sm)) = m.subcommand() {
                if let Some(sub) = cmd.find_subcommand(name) {
                    cli.given = given_options(sub, sm);
                }
            }
            finish(commands::run(cli))
        }
        Err(e) => clap_exit(e),
    }
}

fn finish(result: anyhow::Result<u8>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::from(EXIT_OK);
            }
            eprintln!("polytrace: error: {}", error_text(&e));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// The error and its causes, each cause once: a library error already
/// shows its I/O cause (`file: No such file or directory`), so a cause
/// whose text is already there is not repeated.
fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if text.contains(&c) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&c);
    }
    text
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<crate::Error>()
                .is_some_and(|pe| pe.is_broken_pipe())
    })
}
