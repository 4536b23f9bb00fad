//! Every option does what it says (issue 37): each option of `convert`,
//! `dump`, `info` and `record`, given with every source kind and target,
//! either changes the output or is refused (exit 2, naming what it applies
//! to), as the one declaration (`src/cli/optspec.rs`) says.
mod common;

use polytrace::cli::optspec::{self, SourceKind, Target, Verb};
use polytrace::model::{FormatId, TimeBase};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One input of each source kind, small.
struct Source {
    file: FormatId,
    path: PathBuf,
    time: TimeBase,
    /// This input has no events, so an event filter has nothing to act on
    /// here (the format can carry them: PCP event records, MMV none).
    no_events: bool,
}

fn sources(tmp: &Path) -> Vec<Source> {
    let t = common::testdata();
    let abs = || TimeBase::Absolute;
    // A short LTT trace: the first 50 ms of the real one.
    let ltt = tmp.join("small.ltt");
    common::output_ok(
        Command::new(common::bin())
            .args(["convert", "--quiet", "--end", "+50ms", "--to", "ltt", "-o"])
            .arg(&ltt)
            .arg(t.join("ltt/smp_example")),
    );
    vec![
        Source {
            file: FormatId::Kpi,
            path: t.join("kpi/B-buf400.convert-a.txt"),
            time: abs(),
            no_events: false,
        },
        Source {
            file: FormatId::Dlt,
            path: t.join("kpi/B-buf400.dlt"),
            time: abs(),
            no_events: false,
        },
        Source {
            file: FormatId::Mmv,
            path: t.join("mmv/research_v1.mmv"),
            time: abs(),
            no_events: false,
        },
        Source {
            file: FormatId::Pcp,
            path: t.join("pcp/live_v2"),
            time: abs(),
            no_events: true,
        },
        Source {
            file: FormatId::Ltt,
            path: ltt,
            time: abs(),
            no_events: false,
        },
        Source {
            file: FormatId::Timeline,
            path: t.join("timeline/a2-priorities.dat"),
            time: TimeBase::Cycles {
                hz: None,
                anchor: None,
            },
            no_events: false,
        },
    ]
}

/// The values each option is tried with: it changes the output if any of
/// them does.
fn values(long: &str, src: &Source) -> Vec<Vec<String>> {
    let one = |v: &[&str]| vec![v.iter().map(|s| s.to_string()).collect::<Vec<_>>()];
    let flag = || vec![vec![format!("--{long}")]];
    let with = |vals: &[&str]| -> Vec<Vec<String>> {
        vals.iter()
            .map(|v| vec![format!("--{long}"), v.to_string()])
            .collect()
    };
    let other_format = if src.file == FormatId::Kpi {
        "dlt"
    } else {
        "kpi"
    };
    match long {
        "from" => with(&[other_format]),
        "begin" => with(&["+1ms"]),
        // Before the first item: a window that keeps nothing.
        "end" => with(&["+1ms", "2000-01-01T00:00:00Z"]),
        "time-origin" | "tsc-anchor" => with(&["2020-01-01T00:00:00Z"]),
        "event" => with(&["no.such.event"]),
        "exclude-event" | "exclude-metric" | "exclude-instance" => with(&["*"]),
        "metric" => with(&["no.such.metric"]),
        "instance" => with(&["no-such-instance"]),
        "cpu" => with(&["99"]),
        "exclude-cpu" => with(&["0-1023"]),
        "split" => with(&["1ms"]),
        "pcp-version" => with(&["2", "3"]),
        "volume-size" => with(&["1"]),
        "mmv-version" => with(&["1", "2", "3"]),
        "at" => with(&["+0s", "+1ms", "2000-01-01T00:00:00Z"]),
        "timeline-version" => with(&["A2", "M3"]),
        "entries" => with(&["16", "65536"]),
        "out-ecu" | "out-app-id" | "out-ctx-id" | "kpi-app" | "kpi-ctx" => with(&["ZZZZ"]),
        "out-session-id" => with(&["4242"]),
        // Message filters: one keeping some messages, one keeping none.
        "ecu" | "app" | "ctx" => with(&["ZZZZ", "*"]),
        "level" => with(&["fatal", "verbose"]),
        "grep" => with(&["NEW", "^$"]),
        "lifecycle" => with(&["2", "1"]),
        "dlt-payload-max" => with(&["100"]),
        "kpi-style" => with(&["bare", "dlt"]),
        "ltt-block-size" => with(&["4096"]),
        "delimiter" => with(&[";"]),
        "columns" => with(&["no.such.*"]),
        // Every message, any number in its text.
        "extract" => with(&["*=(?P<n>[0-9]+)"]),
        "page-size" => with(&["8192"]),
        "tsc-hz" => with(&["2.4GHz"]),
        "style" => with(&["native", "common", "values"]),
        "max" | "top" => with(&["3"]),
        "live" => with(&["polytrace-options-walk"]),
        _ => {
            let _ = one;
            flag()
        }
    }
}

/// Options the walk does not try, and why (each is tested where named).
const ELSEWHERE: &[(&str, &str)] = &[
    ("output", "names the output (every run gives it)"),
    ("to", "names the target (every run gives it)"),
    ("salvage", "changes only damaged input: tests/damage.rs"),
    (
        "force",
        "changes only an existing output: tests/exit_codes.rs, tests/cli.rs",
    ),
    (
        "strict",
        "changes only a lossy conversion: tests/exit_codes.rs",
    ),
    ("merge", "takes a directory: tests/convert.rs"),
    (
        "dlt-truncated-tails",
        "changes only KPI messages split at the payload limit: tests/kpi.rs",
    ),
    ("label", "takes several inputs: tests/convert.rs"),
];

struct Outcome {
    code: Option<i32>,
    stderr: String,
    /// Stdout, then every output file's name and bytes.
    bytes: Vec<u8>,
}

fn collect(dir: &Path, out: &mut Vec<u8>) {
    let mut entries: Vec<_> = match std::fs::read_dir(dir) {
        Ok(r) => r.map(|e| e.unwrap().path()).collect(),
        Err(_) => return,
    };
    entries.sort();
    for p in entries {
        out.extend_from_slice(p.to_string_lossy().as_bytes());
        if p.is_dir() {
            collect(&p, out);
        } else {
            out.extend_from_slice(&std::fs::read(&p).unwrap());
        }
    }
}

fn run(args: &[String], outdir: &Path) -> Outcome {
    let _ = std::fs::remove_dir_all(outdir);
    std::fs::create_dir_all(outdir).unwrap();
    let o = Command::new(common::bin()).args(args).output().unwrap();
    let mut bytes = o.stdout.clone();
    collect(outdir, &mut bytes);
    Outcome {
        code: o.status.code(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        bytes,
    }
}

fn suffix(to: FormatId) -> &'static str {
    match to {
        FormatId::Kpi => "out.kpi",
        FormatId::Dlt => "out.dlt",
        FormatId::Mmv => "out.mmv",
        FormatId::Pcp => "out",
        FormatId::Ltt => "out.ltt",
        FormatId::Timeline => "out.timeline",
        FormatId::ChromeJson => "out.json",
        FormatId::Csv => "out.csv",
        FormatId::Ctf => "out.ctf",
        FormatId::Parquet => "out.parquet",
        FormatId::Perfetto => "out.perfetto-trace",
    }
}

/// The verb's options, as its clap command lists them.
fn verb_options(verb: Verb) -> Vec<String> {
    let cmd = polytrace::cli::cli_command();
    let sub = cmd.find_subcommand(verb.name()).unwrap();
    sub.get_arguments()
        .filter_map(|a| a.get_long().map(str::to_string))
        .filter(|l| l != "help" && l != "version")
        .collect()
}

/// The base command line of a verb, source and target.
fn base(verb: Verb, src: &Source, t: Target, outdir: &Path) -> Vec<String> {
    let mut a = vec![verb.name().to_string()];
    match (verb, t) {
        (Verb::Convert, Target::To(f)) => {
            a.extend(["--to".into(), f.name().into(), "-o".into()]);
            a.push(outdir.join(suffix(f)).to_string_lossy().into_owned());
            // DLT and KPI lines carry polytrace's PID by default.
            if matches!(f, FormatId::Dlt | FormatId::Kpi) {
                a.extend(["--out-session-id".into(), "1".into()]);
            }
        }
        (Verb::Dump, Target::Common) => a.extend(["--style".into(), "common".into()]),
        (Verb::Info, Target::Stats) => a.push("--stats".into()),
        _ => {}
    }
    a.push(src.path.to_string_lossy().into_owned());
    a
}

fn targets(verb: Verb) -> Vec<Target> {
    match verb {
        Verb::Convert | Verb::Record => polytrace::formats::all()
            .into_iter()
            .filter(|f| f.caps().write)
            .map(|f| Target::To(f.id()))
            .collect(),
        Verb::Dump => vec![Target::Native, Target::Common],
        Verb::Info => vec![Target::Summary, Target::Stats],
    }
}

#[derive(Default)]
struct Tally {
    changed: usize,
    refused: usize,
    skipped_pairs: Vec<String>,
    failures: Vec<String>,
}

fn walk(verb: Verb, srcs: &[Source], outdir: &Path, tally: &mut Tally) {
    let opts = verb_options(verb);
    for t in targets(verb) {
        for src in srcs {
            let kind = SourceKind {
                file: src.file,
                stream: src.file,
                time: &src.time,
            };
            let mut base_args = base(verb, src, t, outdir);
            let mut baseline = run(&base_args, outdir);
            // A pair that needs more to convert at all gets it in the base
            // (those options are then not tried on the pair): cycles a rate
            // and dates, an events-only input into CSV its events table.
            if baseline.code != Some(0) {
                let mut more: Vec<&str> = Vec::new();
                if matches!(src.time, TimeBase::Cycles { .. }) {
                    more.extend(["--tsc-hz", "1e9", "--time-origin", "2020-01-01T00:00:00Z"]);
                }
                if t == Target::To(FormatId::Csv) {
                    more.push("--events");
                }
                if !more.is_empty() {
                    let mut a = base_args.clone();
                    a.splice(1..1, more.iter().map(|s| s.to_string()));
                    let b = run(&a, outdir);
                    if b.code == Some(0) {
                        base_args = a;
                        baseline = b;
                    }
                }
            }
            let what = |long: &str| {
                format!(
                    "{} --{long} with {} into {}",
                    verb.name(),
                    src.path.file_name().unwrap().to_string_lossy(),
                    t.describe()
                )
            };
            for long in &opts {
                if ELSEWHERE.iter().any(|(l, _)| l == long) {
                    continue;
                }
                let spec = optspec::spec(long)
                    .unwrap_or_else(|| panic!("--{long} of {} is not declared", verb.name()));
                // An option that needs another one is tried with it.
                let with: Option<&str> = spec.rules.iter().find_map(|r| r.with);
                let alone = spec.applies(verb, t, &[kind], &[spec.long]);
                let paired = with.is_some_and(|w| spec.applies(verb, t, &[kind], &[spec.long, w]));
                // Already in the base command line.
                if base_args.contains(&format!("--{long}")) {
                    continue;
                }
                if !alone && !paired {
                    for v in values(long, src).into_iter().take(1) {
                        let mut args = base_args.clone();
                        args.splice(1..1, v);
                        let o = run(&args, outdir);
                        let named = o.stderr.contains(&format!("--{long}"))
                            && o.stderr.contains("applies to");
                        if o.code == Some(2) && named && o.bytes.is_empty() {
                            tally.refused += 1;
                        } else {
                            tally.failures.push(format!(
                                "{}: not refused (exit {:?}): {}",
                                what(long),
                                o.code,
                                o.stderr.lines().last().unwrap_or("")
                            ));
                        }
                    }
                    continue;
                }
                let (base_run, base_args) =
                    if !alone && !base_args.contains(&format!("--{}", with.unwrap())) {
                        let w = with.unwrap();
                        let mut a = base_args.clone();
                        a.insert(1, format!("--{w}"));
                        (run(&a, outdir), a)
                    } else {
                        (
                            Outcome {
                                code: baseline.code,
                                stderr: baseline.stderr.clone(),
                                bytes: baseline.bytes.clone(),
                            },
                            base_args.clone(),
                        )
                    };
                if src.no_events && matches!(long.as_str(), "event" | "exclude-event") {
                    tally
                        .skipped_pairs
                        .push(format!("{}: the input has no events", what(long)));
                    continue;
                }
                if base_run.code != Some(0) {
                    // The pair does not convert without the option (e.g. a
                    // target that needs dates): nothing to compare with.
                    tally.skipped_pairs.push(format!(
                        "{}: {}",
                        what(long),
                        base_run.stderr.lines().last().unwrap_or("")
                    ));
                    continue;
                }
                let changed = values(long, src).into_iter().any(|v| {
                    let mut args = base_args.clone();
                    args.splice(1..1, v);
                    let o = run(&args, outdir);
                    o.code != base_run.code
                        || o.bytes != base_run.bytes
                        || o.stderr != base_run.stderr
                });
                if changed {
                    tally.changed += 1;
                } else {
                    tally
                        .failures
                        .push(format!("{}: accepted and changed nothing", what(long)));
                }
            }
        }
    }
}

#[test]
fn every_option_changes_the_output_or_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let srcs = sources(tmp.path());
    let mut tally = Tally::default();
    for verb in [Verb::Convert, Verb::Dump, Verb::Info] {
        walk(verb, &srcs, &tmp.path().join("out"), &mut tally);
    }
    eprintln!(
        "{} option runs changed the output, {} refused, {} skipped (pair does not convert)",
        tally.changed,
        tally.refused,
        tally.skipped_pairs.len()
    );
    for p in &tally.skipped_pairs {
        eprintln!("skipped: {p}");
    }
    assert!(
        tally.failures.is_empty(),
        "{} failures:\n{}",
        tally.failures.len(),
        tally.failures.join("\n")
    );
    assert!(tally.changed > 100 && tally.refused > 100);
}

/// `record`: an option for another target is refused before anything is
/// recorded.
#[test]
fn record_refuses_options_of_other_targets() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = verb_options(Verb::Record);
    let mut refused = 0;
    for t in targets(Verb::Record) {
        let Target::To(f) = t else { unreachable!() };
        for long in &opts {
            let spec = optspec::spec(long).unwrap();
            if spec.applies_to_target(Verb::Record, t, &[spec.long]) {
                continue;
            }
            let src = Source {
                file: f,
                path: PathBuf::new(),
                time: TimeBase::Absolute,
                no_events: false,
            };
            let v = values(long, &src).remove(0);
            let out = tmp.path().join(suffix(f));
            let mut args = vec!["record".to_string(), "--samples".into(), "1".into()];
            args.extend(v);
            args.extend(["--to".into(), f.name().into(), "-o".into()]);
            args.push(out.to_string_lossy().into_owned());
            let o = Command::new(common::bin()).args(&args).output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
            assert!(
                err.contains(&format!("--{long}")) && err.contains("applies to"),
                "{args:?}: {err}"
            );
            assert!(!out.exists(), "{args:?} wrote {}", out.display());
            refused += 1;
        }
    }
    assert!(refused > 50, "{refused}");
}

/// Every option of the four verbs is declared once; docs/options.md is
/// the declaration's table.
#[test]
fn the_declaration_covers_every_option_and_the_docs() {
    for verb in Verb::ALL {
        for long in verb_options(verb) {
            // Declared; one a verb shares but never applies there (record's
            // --at, --split) is refused, as the walks check.
            assert!(
                optspec::spec(&long).is_some(),
                "--{long} of {} is not declared",
                verb.name()
            );
        }
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/options.md");
    if common::bless() {
        std::fs::write(&path, optspec::markdown()).unwrap();
    }
    let doc = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        doc,
        optspec::markdown(),
        "docs/options.md differs from the declaration: regenerate it"
    );
}

/// `--help` groups options under the declaration's headings.
#[test]
fn help_headings_come_from_the_declaration() {
    let o = Command::new(common::bin())
        .args(["convert", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    for h in [
        "CSV output (--to csv):",
        "Counters (--to csv, chrome-json, ctf, perfetto):",
        "Timeline input:",
    ] {
        assert!(help.contains(h), "{h} missing:\n{help}");
    }
}
