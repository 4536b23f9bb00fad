//! The verbs.

use super::args::Style;
use super::report::report_diagnostics;
use super::{Cli, Command, ConvertArgs, DumpCmd, InfoArgs, EXIT_OK, EXIT_SALVAGED};
use crate::formats::{self, Format};
use crate::input::{Input, InputKind};
use crate::pipeline::{self, Dest};
use crate::stages::Window;
use anyhow::{Context, Result};
use std::io::{BufWriter, Write};

pub fn run(cli: Cli) -> Result<u8> {
    let quiet = cli.global.quiet;
    match cli.command {
        Command::Formats => formats_table(),
        Command::Convert(a) => convert(a, quiet),
        Command::Dump(a) => dump(a),
        Command::Info(a) => info(a),
        Command::Check(a) => check(a, quiet),
        Command::Record(a) => super::record::run(&a, quiet),
    }
}

fn formats_table() -> Result<u8> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:<12} {:<6} {:<6} {:<6}  description",
        "format", "read", "write", "dump"
    )?;
    for f in formats::all() {
        let c = f.caps();
        let m = |b: bool| if b { "yes" } else { "-" };
        let mut desc = f.describe().to_string();
        if !(c.read || c.write || c.dump) {
            desc.push_str(" [not implemented yet]");
        }
        writeln!(
            out,
            "{:<12} {:<6} {:<6} {:<6}  {}",
            f.id().name(),
            m(c.read),
            m(c.write),
            m(c.dump),
            desc
        )?;
    }
    writeln!(out, "\n`-` = not implemented yet in this build.")?;
    Ok(EXIT_OK)
}

fn open_input(
    path: &std::path::Path,
    ia: &super::args::InputArgs,
) -> Result<(Input, &'static dyn Format)> {
    let input = Input::resolve(path)?;
    let fmt = pipeline::format_of(&input, ia.from)?;
    Ok((input, fmt))
}

fn convert(a: ConvertArgs, quiet: bool) -> Result<u8> {
    let to_id = a
        .output
        .to
        .context("--to FORMAT is required (see `polytrace formats`)")?;
    let to = formats::get(to_id);
    let input = Input::resolve(&a.input)?;
    if input.kind == InputKind::Dir
        && formats::detect(&input).is_err()
        && a.input_args.from != Some(crate::model::FormatId::Ltt)
    {
        return super::batch::convert_tree(&a, to, quiet);
    }
    let from = pipeline::format_of(&input, a.input_args.from)?;
    let out_path = a.output.output.clone().context("-o OUT is required")?;
    let ropts = a.input_args.read_options();
    let reader = from.open(&input, &ropts)?;
    let reader = Window::wrap(reader, a.input_args.begin, a.input_args.end);
    let dest = if out_path.as_os_str() == "-" {
        Dest::Stdout
    } else {
        Dest::Path {
            path: &out_path,
            force: a.output.force,
        }
    };
    let outcome = pipeline::convert(
        reader,
        &input.member_paths(),
        to,
        dest,
        &a.output.write_options(),
    )?;
    let salvaged = report_diagnostics(&outcome.diagnostics, quiet);
    if !quiet {
        eprint!("{}", indent_report(&outcome.loss.to_string()));
    }
    Ok(if salvaged || outcome.salvaged() {
        EXIT_SALVAGED
    } else {
        EXIT_OK
    })
}

fn indent_report(s: &str) -> String {
    s.lines().map(|l| format!("polytrace: {l}\n")).collect()
}

fn dump(a: DumpCmd) -> Result<u8> {
    let (input, fmt) = open_input(&a.input, &a.input_args)?;
    let ropts = a.input_args.read_options();
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let windowed = a.input_args.begin.is_some() || a.input_args.end.is_some();
    let diags = if a.dump.style == Style::Common || (windowed && a.dump.style == Style::Native) {
        if windowed && a.dump.style == Style::Native {
            eprintln!("polytrace: --begin/--end apply to the common listing; using --style common");
        }
        let mut r = fmt.open(&input, &ropts)?;
        if a.dump.no_framing {
            // The stream as another format's writer sees it.
            r = Box::new(crate::stages::Unframe::wrap(r));
        }
        let mut r = Window::wrap(r, a.input_args.begin, a.input_args.end);
        crate::listing::dump_common(r.as_mut(), &mut out)?;
        r.diagnostics().to_vec()
    } else {
        fmt.dump(&input, &ropts, &a.dump.dump_options(), &mut out)?
    };
    out.flush().map_err(|e| crate::Error::io("<stdout>", e))?;
    Ok(if report_diagnostics(&diags, false) {
        EXIT_SALVAGED
    } else {
        EXIT_OK
    })
}

fn info(a: InfoArgs) -> Result<u8> {
    let (input, fmt) = open_input(&a.input, &a.input_args)?;
    let r = fmt.open(&input, &a.input_args.read_options())?;
    let mut r = Window::wrap(r, a.input_args.begin, a.input_args.end);
    let h = r.header().clone();
    let info = crate::info::info(r.as_mut())?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "file:      {}", input.name())?;
    if h.source == fmt.id() {
        writeln!(out, "format:    {} (version {})", h.source, h.version)?;
    } else {
        // A polytrace-written LTT trace gives back the stream it carries.
        writeln!(
            out,
            "format:    {} (carrying a {} stream, version {})",
            fmt.id(),
            h.source,
            h.version
        )?;
    }
    writeln!(out, "time base: {}", h.time_base.describe())?;
    if let Some(host) = &h.host {
        writeln!(out, "host:      {host}")?;
    }
    if let (Some(f), Some(l)) = (info.first, info.last) {
        writeln!(out, "first:     {f}")?;
        writeln!(out, "last:      {l}")?;
    }
    writeln!(out, "items:")?;
    for (k, v) in &info.items {
        writeln!(out, "  {k:<14} {v}")?;
    }
    if !info.events_by_type.is_empty() {
        writeln!(out, "events by type:")?;
        for (k, v) in &info.events_by_type {
            writeln!(out, "  {k:<30} {v}")?;
        }
    }
    if !info.values_by_metric.is_empty() {
        writeln!(out, "values by metric:")?;
        for (k, v) in &info.values_by_metric {
            writeln!(out, "  {k:<30} {v}")?;
        }
    }
    let native = r.native_counts();
    if !native.is_empty() {
        writeln!(out, "native counts:")?;
        for (k, v) in &native {
            writeln!(out, "  {k:<30} {v}")?;
        }
    }
    let diags = r.diagnostics().to_vec();
    Ok(if report_diagnostics(&diags, false) {
        EXIT_SALVAGED
    } else {
        EXIT_OK
    })
}

fn check(a: InfoArgs, quiet: bool) -> Result<u8> {
    let (input, fmt) = open_input(&a.input, &a.input_args)?;
    let diags = fmt.check(&input, &a.input_args.read_options())?;
    let lossy = report_diagnostics(&diags, false);
    if !quiet && !lossy {
        println!("{}: ok ({} format)", input.name(), fmt.id());
    }
    Ok(if lossy { EXIT_SALVAGED } else { EXIT_OK })
}
