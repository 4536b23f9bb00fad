//! The verbs.

use super::args::Style;
use super::naming::{pcp_base, target_format};
use super::optspec::{self, Target, Verb};
use super::progress;
use super::report::report_diagnostics;
use super::stream;
use super::{CheckArgs, Cli, Command, ConvertArgs, DumpCmd, InfoCmd, EXIT_OK, EXIT_SALVAGED};
use crate::formats;
use crate::input::{Input, InputKind};
use crate::pipeline::{self, Dest};
use anyhow::{Context, Result};
use std::io::{BufWriter, Write};

pub fn run(cli: Cli) -> Result<u8> {
    let quiet = cli.global.quiet;
    let given = cli.given;
    match cli.command {
        Command::Formats(a) if a.mapping => mapping_table(),
        Command::Formats(_) => formats_table(),
        // The format read options are parsed apart (for the order of
        // `--help`'s headings) and read through the input options.
        Command::Convert(mut a) => {
            a.input_args.fmt = std::mem::take(&mut a.read_fmt);
            a.input_args.given = given;
            a.input_args.messages = a.filter.messages.select();
            convert(*a, quiet)
        }
        Command::Dump(mut a) => {
            a.input_args.fmt = std::mem::take(&mut a.read_fmt);
            a.input_args.given = given;
            a.input_args.messages = a.filter.messages.select();
            dump(a, quiet)
        }
        Command::Info(mut a) => {
            a.input_args.fmt = std::mem::take(&mut a.read_fmt);
            a.input_args.given = given;
            a.input_args.messages = a.filter.messages.select();
            info(a, quiet)
        }
        Command::Check(a) => check(a, quiet),
        Command::Record(a) => super::record::run(&a, &given, quiet),
        Command::Completions(a) => completions(a.shell),
        Command::Man(a) => man(a.command.as_deref()),
    }
}
fn completions(shell: clap_complete::Shell) -> Result<u8> {
    let mut cmd = super::cli_command();
    clap_complete::generate(shell, &mut cmd, "polytrace", &mut std::io::stdout());
    Ok(EXIT_OK)
}

/// `polytrace man [COMMAND]`: roff from the same clap definitions as
/// `--help`; a verb's page is `polytrace-<verb>(1)`, as git names its pages.
fn man(verb: Option<&str>) -> Result<u8> {
    let top = super::cli_command();
    let cmd = match verb {
        None => top,
        Some(v) => {
            let version = top.get_version().map(str::to_string);
            let names: Vec<&str> = top.get_subcommands().map(|c| c.get_name()).collect();
            let mut sub = top
                .find_subcommand(v)
                .with_context(|| format!("no command {v:?} (one of: {})", names.join(", ")))?
                .clone()
                .name(format!("polytrace-{v}"));
            if let Some(ver) = version {
                sub = sub.version(ver);
            }
            sub
        }
    };
    let mut out = std::io::stdout().lock();
    clap_mangen::Man::new(cmd).render(&mut out)?;
    out.flush()?;
    Ok(EXIT_OK)
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
        // An export is written for other tools: polytrace does not read it back.
        let export = c.write && !c.read;
        let r = |b: bool| if export { "export" } else { m(b) };
        writeln!(
            out,
            "{:<12} {:<6} {:<6} {:<6}  {}",
            f.id().name(),
            r(c.read),
            m(c.write),
            r(c.dump),
            desc
        )?;
    }
    writeln!(
        out,
        "\n`export` = export only: written for other tools, not read back; `-` = not implemented yet in this build."
    )?;
    Ok(EXIT_OK)
}

/// `formats --mapping`: the source × target table, then each writer's rules.
fn mapping_table() -> Result<u8> {
    let mut out = std::io::stdout().lock();
    out.write_all(crate::formats::mapping_markdown().as_bytes())?;
    Ok(EXIT_OK)
}

fn convert(mut a: ConvertArgs, quiet: bool) -> Result<u8> {
    if let [one] = a.inputs.as_slice() {
        // Never resolve `-` here: that would read stdin's first bytes.
        if !a.merge.merge && one.as_os_str() != "-" && one.is_dir() {
            let input = Input::resolve(one)?;
            if input.kind == InputKind::Dir
                && formats::detect(&input).is_err()
                && a.input_args.from != Some(crate::model::FormatId::Ltt)
            {
                if a.output.split.is_some() {
                    anyhow::bail!(
                        "--split cuts one output: not with a directory batch (--merge DIR merges the directory into one)"
                    );
                }
                // OUTDIR is a folder: its name says nothing about the format.
                let to_id = a.output.to.context(
                    "--to FORMAT is required when converting a directory (see `polytrace formats`)",
                )?;
                optspec::check_target(Verb::Convert, Target::To(to_id), &a.input_args.given)?;
                return super::batch::convert_tree(&a, formats::get(to_id), quiet);
            }
        }
    }
    let to_id = target_format(a.output.to, a.output.output.as_deref())?;
    optspec::check_target(Verb::Convert, Target::To(to_id), &a.input_args.given)?;
    let to = formats::get(to_id);
    let mut out_path = a.output.output.clone().context("-o OUT is required")?;
    if to_id == crate::model::FormatId::Pcp {
        out_path = pcp_base(&out_path);
    }
    a.input_args.check = Some((Verb::Convert, Target::To(to_id)));
    let sources = stream::sources(&a.inputs, &a.merge, &a.input_args)?;
    if sources.len() == 1 && !a.merge.label.is_empty() {
        anyhow::bail!("--label names the inputs of a merge; there is one input");
    }
    let names: Vec<String> = sources.iter().map(|s| s.input.name()).collect();
    let names = names.join(", ");
    let st = stream::open(
        &sources,
        &a.merge.label,
        &a.input_args,
        &a.filter,
        &[a.output.at],
    )?;
    needs_seconds(st.reader.header(), to_id, &a.input_args, &names)?;
    let mut wopts = a.output.write_options();
    wopts.at = stream::resolve_at(a.output.at, st.start, st.end)?;
    wopts.source = Some(names.clone());
    wopts.metric_order = a.filter.metric.clone();
    let stdout = out_path.as_os_str() == "-";
    // A byte bar for readers that can tell their position (the stages pass
    // it through), never over output going to the same terminal.
    let size: u64 = sources.iter().map(|s| progress::input_size(&s.input)).sum();
    let show = st.reader.progress().is_some() && !stdout;
    let pb = progress::bar(size, quiet || !show);
    pb.set_message(match sources.as_slice() {
        [one] => one.input.name(),
        many => format!("{} inputs", many.len()),
    });
    let st = stream::Stream {
        reader: progress::ProgressReader::wrap(st.reader, &pb, 0, size),
        ..st
    };
    let outcome = match a.output.split {
        Some(_) if stdout => anyhow::bail!("--split writes numbered files: give -o OUT, not -"),
        Some(by) => crate::split::convert_split(
            st.reader,
            &st.members,
            to,
            &out_path,
            a.output.force,
            &wopts,
            by,
        )
        .map_err(|e| pipeline::name_input(e, &names))?,
        None => {
            let dest = if stdout {
                Dest::Stdout
            } else {
                Dest::Path {
                    path: &out_path,
                    force: a.output.force,
                }
            };
            pipeline::convert(st.reader, &st.members, to, dest, &wopts)
                .map_err(|e| pipeline::name_input(e, &names))
                .map_err(|e| empty_window(e.into(), &sources, &a.input_args))?
        }
    };
    pb.finish_and_clear();
    let salvaged = report_diagnostics(&outcome.diagnostics, quiet);
    if !quiet {
        eprint!("{}", indent_report(&outcome.loss.to_string()));
        if a.output.split.is_some() {
            eprintln!(
                "polytrace: wrote {} pieces",
                pieces(&outcome.outputs, &out_path)
            );
        }
    }
    Ok(if salvaged || outcome.salvaged() {
        EXIT_SALVAGED
    } else {
        EXIT_OK
    })
}

/// How many numbered outputs `--split` committed (a PCP piece is 3+ files).
fn pieces(outputs: &[std::path::PathBuf], out: &std::path::Path) -> usize {
    let base = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut seen = std::collections::BTreeSet::new();
    for p in outputs {
        let n = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some(rest) = n.strip_prefix(&format!("{base}.")) {
            seen.insert(rest.chars().take(3).collect::<String>());
        }
    }
    seen.len()
}

fn indent_report(s: &str) -> String {
    s.lines().map(|l| format!("polytrace: {l}\n")).collect()
}

/// The listing verbs read past damage where the format can resynchronise
/// (DLT: the next storage header), report each skipped range and exit 1
/// (docs/exit-codes.md); `convert` and `check` stop at it unless
/// `--salvage`.
fn listing_args(
    sources: &[stream::Source],
    ia: &crate::cli::args::InputArgs,
) -> crate::cli::args::InputArgs {
    let mut ia = ia.clone();
    if !sources.is_empty()
        && sources
            .iter()
            .all(|s| s.fmt.id() == crate::model::FormatId::Dlt)
    {
        ia.salvage = true;
    }
    ia
}

fn dump(mut a: DumpCmd, quiet: bool) -> Result<u8> {
    let target = if a.dump.style == Style::Common {
        Target::Common
    } else {
        Target::Native
    };
    optspec::check_target(Verb::Dump, target, &a.input_args.given)?;
    a.input_args.check = Some((Verb::Dump, target));
    let src = stream::Source::open(&a.input, &a.input_args)?;
    a.input_args = listing_args(std::slice::from_ref(&src), &a.input_args);
    // (Not on stdin: its bytes are the listing's to read once.)
    if target == Target::Native
        && !a.input_args.given.is_empty()
        && src.input.kind != InputKind::Stdin
    {
        // The native listing reads the file itself: the source check needs
        // its header (a file that cannot be opened is the listing's to report).
        if let Ok(r) = src.fmt.open(&src.input, &a.input_args.read_options()) {
            let h = r.header();
            optspec::check_sources(
                Verb::Dump,
                target,
                &a.input_args.given,
                &[optspec::SourceKind {
                    file: src.fmt.id(),
                    stream: h.source,
                    time: &h.time_base,
                }],
                &src.input.name(),
            )?;
        }
    }
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let diags = if a.dump.style == Style::Common {
        let mut st = stream::open_with(
            std::slice::from_ref(&src),
            &[],
            &a.input_args,
            &a.filter,
            &[],
            // --no-framing: the stream as another format's writer sees it.
            a.dump.no_framing,
        )?;
        crate::listing::dump_common(st.reader.as_mut(), &mut out)?;
        st.reader.diagnostics().to_vec()
    } else {
        // The native listing applies the window and the filters itself (or
        // refuses them, saying why): never a silent change of style.
        let mut dopts = a.dump.dump_options();
        dopts.window = a.input_args.window();
        dopts.window.check().map_err(anyhow::Error::msg)?;
        dopts.select = a.filter.selection();
        src.fmt
            .dump(&src.input, &a.input_args.read_options(), &dopts, &mut out)?
    };
    out.flush().map_err(|e| crate::Error::io("<stdout>", e))?;
    Ok(if report_diagnostics(&diags, quiet) {
        EXIT_SALVAGED
    } else {
        EXIT_OK
    })
}

fn info(mut a: InfoCmd, quiet: bool) -> Result<u8> {
    if a.top.is_some() && !a.stats {
        return Err(crate::Error::Usage("--top applies to info --stats only".into()).into());
    }
    let target = if a.stats {
        Target::Stats
    } else {
        Target::Summary
    };
    optspec::check_target(Verb::Info, target, &a.input_args.given)?;
    a.input_args.check = Some((Verb::Info, target));
    let sources = stream::sources(&a.inputs, &Default::default(), &a.input_args)?;
    a.input_args = listing_args(&sources, &a.input_args);
    let names: Vec<String> = sources.iter().map(|s| s.input.name()).collect();
    let mut st = stream::open(&sources, &[], &a.input_args, &a.filter, &[])?;
    let r = st.reader.as_mut();
    let h = r.header().clone();
    if a.stats {
        // Figures per second need seconds.
        needs_seconds(
            &h,
            crate::model::FormatId::Csv,
            &a.input_args,
            &names.join(", "),
        )
        .map_err(|e| anyhow::anyhow!("{}", e.to_string().replace("--to csv", "info --stats")))?;
    }
    let mut out = std::io::stdout().lock();
    if a.stats {
        let s = crate::info::stats(r, a.top.unwrap_or(0))?;
        if s.first.is_none() {
            return Err(empty_window(
                anyhow::anyhow!("no data item to give figures of"),
                &sources,
                &a.input_args,
            ));
        }
        if a.json {
            serde_json::to_writer_pretty(&mut out, &s)?;
            writeln!(out)?;
        } else {
            write_stats(&mut out, &names.join(", "), &h, &s, a.top.unwrap_or(0))?;
        }
    } else {
        let info = crate::info::info(r)?;
        if info.first.is_none() && (a.input_args.begin.is_some() || a.input_args.end.is_some()) {
            return Err(empty_window(
                anyhow::anyhow!("no data item"),
                &sources,
                &a.input_args,
            ));
        }
        let native = r.native_counts();
        if a.json {
            let j = serde_json::json!({
                "file": names.join(", "),
                "format": h.source.name(),
                "version": h.version,
                "time_base": h.time_base.describe(),
                "host": h.host,
                "first": info.first.map(|t| t.to_string()),
                "last": info.last.map(|t| t.to_string()),
                "first_shown": info.first.map(|t| show_time(t, &h.time_base)),
                "last_shown": info.last.map(|t| show_time(t, &h.time_base)),
                "time_of_dlt_messages": "ECU timestamp (tmsp) placed on the storage-time line by its lifecycle's offset (docs/dlt.md); dump's native listing shows the storage time and tmsp as stored",
                "items": info.items,
                "events_by_type": info.events_by_type,
                "values_by_metric": info.values_by_metric,
                "native_counts": native.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
            });
            serde_json::to_writer_pretty(&mut out, &j)?;
            writeln!(out)?;
        } else {
            writeln!(out, "file:      {}", names.join(", "))?;
            match sources.as_slice() {
                // A polytrace-written LTT trace gives back the stream it carries.
                [one] if one.fmt.id() != h.source => writeln!(
                    out,
                    "format:    {} (carrying a {} stream, version {})",
                    one.fmt.id(),
                    h.source,
                    h.version
                )?,
                _ => writeln!(out, "format:    {} (version {})", h.source, h.version)?,
            }
            writeln!(out, "time base: {}", h.time_base.describe())?;
            if let Some(host) = &h.host {
                writeln!(out, "host:      {host}")?;
            }
            if let (Some(f), Some(l)) = (info.first, info.last) {
                writeln!(out, "first:     {}", show_time(f, &h.time_base))?;
                writeln!(out, "last:      {}", show_time(l, &h.time_base))?;
                if h.source == crate::model::FormatId::Dlt {
                    writeln!(
                        out,
                        "times:     DLT ECU timestamps placed by each lifecycle's boot time (dump's native listing shows storage times)"
                    )?;
                }
                // The same in words a reader takes in at a glance.
                let d = l.nanos().saturating_sub(f.nanos());
                let secs = d as f64 / 1e9;
                if matches!(h.time_base, crate::model::TimeBase::Cycles { hz: None, .. }) {
                    writeln!(out, "span:      {d} cycles")?;
                } else if h.time_base.is_absolute() {
                    writeln!(
                        out,
                        "span:      {secs:.3} s, from {} to {}",
                        f.rfc3339(),
                        l.rfc3339()
                    )?;
                } else {
                    writeln!(out, "span:      {secs:.3} s")?;
                }
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
            if !native.is_empty() {
                writeln!(out, "native counts:")?;
                for (k, v) in &native {
                    writeln!(out, "  {k:<30} {v}")?;
                }
            }
        }
    }
    let diags = r.diagnostics().to_vec();
    Ok(if report_diagnostics(&diags, quiet) {
        EXIT_SALVAGED
    } else {
        EXIT_OK
    })
}

/// `info --stats` as text.
fn write_stats(
    out: &mut dyn Write,
    file: &str,
    h: &crate::model::Header,
    s: &crate::info::Stats,
    top: usize,
) -> Result<()> {
    let num = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |x| format!("{x:.6}"));
    writeln!(out, "file:      {file}")?;
    writeln!(out, "format:    {} (version {})", h.source, h.version)?;
    if let Some((f, l)) = s.first_last {
        writeln!(out, "first:     {}", show_time(f, &h.time_base))?;
        writeln!(out, "last:      {}", show_time(l, &h.time_base))?;
    }
    writeln!(out, "span:      {:.9} s", s.span_s)?;
    if !s.metrics.is_empty() {
        writeln!(
            out,
            "\n{:<40} {:<24} {:>8} {:>16} {:>16} {:>16} {:>16}",
            "metric", "instance", "count", "min", "max", "mean", "rate/s"
        )?;
        for m in &s.metrics {
            let inst = match (&m.instance, &m.instance_name) {
                (None, _) => "-".to_string(),
                (Some(i), Some(n)) => format!("{i} {n}"),
                (Some(i), None) => i.to_string(),
            };
            let inst: String = inst.chars().take(24).collect();
            writeln!(
                out,
                "{:<40} {:<24} {:>8} {:>16} {:>16} {:>16} {:>16}",
                m.metric,
                inst,
                m.count,
                num(m.min),
                num(m.max),
                num(m.mean),
                num(m.rate)
            )?;
        }
    }
    // When: the times of the extremes, percentiles, a counter's peak rate.
    let when = |t: &Option<String>| -> String {
        t.as_deref()
            .map_or_else(|| "-".to_string(), |t| human_time(t, h))
    };
    let inst_of = |i: &Option<i32>, n: &Option<String>| -> String {
        let s = match (i, n) {
            (None, _) => "-".to_string(),
            (Some(i), Some(n)) => format!("{i} {n}"),
            (Some(i), None) => i.to_string(),
        };
        s.chars().take(24).collect()
    };
    if !s.metrics.is_empty() {
        writeln!(
            out,
            "\n{:<40} {:<24} {:>30} {:>30} {:>14} {:>14} {:>14} {:>14} {:>30}",
            "metric", "instance", "min at", "max at", "p50", "p95", "p99", "peak rate/s", "peak at"
        )?;
        for m in &s.metrics {
            writeln!(
                out,
                "{:<40} {:<24} {:>30} {:>30} {:>14} {:>14} {:>14} {:>14} {:>30}",
                m.metric,
                inst_of(&m.instance, &m.instance_name),
                when(&m.min_time),
                when(&m.max_time),
                num(m.p50),
                num(m.p95),
                num(m.p99),
                num(m.peak_rate),
                when(&m.peak_rate_time)
            )?;
        }
    }
    if !s.events.is_empty() {
        writeln!(
            out,
            "\n{:<40} {:>10} {:>14} {:>30} {:>8}",
            "event type", "count", "events/s", "busiest second", "events"
        )?;
        for e in &s.events {
            let tag = if e.framing { " (framing)" } else { "" };
            let (bs, bn) = match &e.busiest_second {
                Some(b) => (human_time(&b.second, h), b.count.to_string()),
                None => ("-".into(), "-".into()),
            };
            writeln!(
                out,
                "{:<40} {:>10} {:>14} {:>30} {:>8}{tag}",
                e.event,
                e.count,
                num(e.per_s),
                bs,
                bn
            )?;
        }
    }
    for t in &s.top {
        writeln!(out, "\nbusiest instances of {}:", t.metric)?;
        for i in &t.instances {
            writeln!(
                out,
                "  {:<24} {:>16}",
                inst_of(&i.instance, &i.instance_name),
                num(Some(i.value))
            )?;
        }
        writeln!(out, "highest values of {}:", t.metric)?;
        let mut iv: Vec<(&str, String, &crate::info::TopInterval)> = s
            .metrics
            .iter()
            .filter(|m| m.metric == t.metric)
            .flat_map(|m| {
                m.top_intervals
                    .iter()
                    .map(move |x| ("", inst_of(&m.instance, &m.instance_name), x))
            })
            .collect();
        iv.sort_by(|a, b| b.2.value.total_cmp(&a.2.value));
        iv.truncate(top);
        for (_, inst, x) in iv {
            let at = match &x.from {
                Some(f) => format!("{} .. {}", human_time(f, h), human_time(&x.time, h)),
                None => human_time(&x.time, h),
            };
            writeln!(out, "  {:<24} {:>16}  {at}", inst, num(Some(x.value)))?;
        }
    }
    for e in s.events.iter().filter(|e| !e.top_seconds.is_empty()) {
        writeln!(out, "\nbusiest seconds of {}:", e.event)?;
        for b in &e.top_seconds {
            writeln!(out, "  {:>30} {:>8}", human_time(&b.second, h), b.count)?;
        }
    }
    for (title, list) in [("cpu", &s.cpus), ("source", &s.sources)] {
        if list.is_empty() {
            continue;
        }
        writeln!(
            out,
            "\n{:<24} {:>10} {:>22} {:>22} {:>12}  largest gaps (s, after)",
            title, "items", "first", "last", "span s"
        )?;
        for c in list {
            let gaps: Vec<String> = c
                .gaps
                .iter()
                .map(|g| format!("{:.6} after {}", g.seconds, g.after))
                .collect();
            writeln!(
                out,
                "{:<24} {:>10} {:>22} {:>22} {:>12.6}  {}",
                c.name,
                c.items,
                c.first,
                c.last,
                c.span_s,
                gaps.join("; ")
            )?;
        }
    }
    Ok(())
}

/// An epoch time of the figures (`SECONDS.NNNNNNNNN`) as a UTC date and
/// time when the trace has dates, else as it is.
fn human_time(t: &str, h: &crate::model::Header) -> String {
    if !h.time_base.is_absolute() {
        return t.to_string();
    }
    let Some(ns) = parse_epoch_ns(t) else {
        return t.to_string();
    };
    let mut s = String::new();
    match crate::model::Timestamp(ns).write_rfc3339(&mut s) {
        Ok(()) => s,
        Err(_) => t.to_string(),
    }
}

fn parse_epoch_ns(t: &str) -> Option<i64> {
    // `Timestamp`'s text: whole seconds (floored, signed), then nine
    // digits that count up from them.
    let (s, f) = t.split_once('.').unwrap_or((t, "0"));
    let mut frac: String = f.chars().take(9).collect();
    while frac.len() < 9 {
        frac.push('0');
    }
    s.parse::<i64>()
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(frac.parse::<i64>().ok()?)
}

/// A time as `info` shows it: epoch seconds and ISO 8601 UTC for dates,
/// seconds for relative time, cycles for cycles without a rate.
pub fn show_time(t: crate::model::Timestamp, tb: &crate::model::TimeBase) -> String {
    use crate::model::TimeBase;
    match tb {
        TimeBase::Absolute
        | TimeBase::Cycles {
            anchor: Some(_),
            hz: Some(_),
        } => {
            format!("{t}  {}", t.rfc3339())
        }
        TimeBase::Cycles { hz: None, .. } => format!("{} cycles", t.0),
        TimeBase::Cycles { .. } => format!("{t} s after TSC 0"),
        TimeBase::Relative { .. } => format!("{t} s (relative)"),
    }
}

/// Targets that show seconds refuse cycles without their rate instead of
/// reading cycles as nanoseconds. CTF is among them: its clock class is
/// declared in nanoseconds. (Perfetto and Parquet refuse in their writers.)
fn needs_seconds(
    h: &crate::model::Header,
    to: crate::model::FormatId,
    ia: &super::args::InputArgs,
    names: &str,
) -> Result<()> {
    use crate::model::{FormatId, TimeBase};
    let seconds = matches!(to, FormatId::ChromeJson | FormatId::Csv | FormatId::Ctf);
    if seconds
        && ia.fmt.tsc_hz.is_none()
        && matches!(h.time_base, TimeBase::Cycles { hz: None, .. })
    {
        anyhow::bail!(
            "{names}: --to {to} shows seconds, and this input has TSC cycles only: \
             give --tsc-hz HZ (e.g. --tsc-hz 2.4GHz) to place them on a time axis"
        );
    }
    Ok(())
}

/// An empty result of a window: say where the trace's data is.
fn empty_window(
    e: anyhow::Error,
    sources: &[stream::Source],
    ia: &super::args::InputArgs,
) -> anyhow::Error {
    if ia.begin.is_none() && ia.end.is_none() {
        return e;
    }
    let mut first = None;
    let mut last = None;
    for s in sources {
        if let Ok((a, b)) = s.bounds(ia, true) {
            first = match (first, a) {
                (Some(x), Some(y)) => Some(std::cmp::min(x, y)),
                (x, y) => x.or(y),
            };
            last = match (last, b) {
                (Some(x), Some(y)) => Some(std::cmp::max(x, y)),
                (x, y) => x.or(y),
            };
        }
    }
    let window = format!(
        "--begin {} --end {}",
        ia.begin.map_or("-".into(), |b| b.to_string()),
        ia.end.map_or("-".into(), |b| b.to_string())
    );
    match (first, last) {
        (Some(f), Some(l)) => anyhow::anyhow!(
            "{e}; nothing inside {window}: the trace runs from {} to {}{} (widen the window or move it there)",
            f.rfc3339(),
            l.rfc3339(),
            nearest(sources, ia, f, l)
        ),
        _ => e.context(format!("nothing inside {window}")),
    }
}

/// A window between two data items (a 30 s window between 60 s samples):
/// the nearest items before and after it. Relative bounds (`+1s`, `-2s`,
/// `@HH:MM`) are resolved against the trace's `first` and `last`, as the
/// window itself was. Read only on this error path.
fn nearest(
    sources: &[stream::Source],
    ia: &super::args::InputArgs,
    first: crate::model::Timestamp,
    last: crate::model::Timestamp,
) -> String {
    let at = |s: Option<crate::model::TimeSpec>| s.and_then(|s| s.resolve(Some(first), Some(last)));
    let (Some(b), Some(e)) = (at(ia.begin), at(ia.end)) else {
        return String::new();
    };
    let mut before: Option<crate::model::Timestamp> = None;
    let mut after: Option<crate::model::Timestamp> = None;
    for s in sources {
        let Ok(mut r) = s.fmt.open(&s.input, &ia.read_options()) else {
            return String::new();
        };
        while let Ok(Some(item)) = r.next_item() {
            let Some(t) = item.is_data().then(|| item.time()).flatten() else {
                continue;
            };
            if t < b && before.is_none_or(|x| t > x) {
                before = Some(t);
            }
            if t > e && after.is_none_or(|x| t < x) {
                after = Some(t);
            }
        }
    }
    match (before, after) {
        (Some(x), Some(y)) => format!(
            "; the nearest data are at {} (before --begin) and {} (after --end)",
            x.rfc3339(),
            y.rfc3339()
        ),
        _ => String::new(),
    }
}

fn check(a: CheckArgs, quiet: bool) -> Result<u8> {
    let (input, fmt) = pipeline::resolve_input(&a.input, a.input_args.from)?;
    if !a.input_args.messages.select().is_empty() && fmt.id() != crate::model::FormatId::Dlt {
        return Err(crate::Error::Usage(format!(
            "--ecu/--app/--ctx/--level/--grep/--lifecycle change nothing here ({} is {}): they apply to dlt inputs",
            input.name(),
            fmt.id()
        ))
        .into());
    }
    let diags = fmt.check(&input, &a.input_args.read_options())?;
    let lossy = report_diagnostics(&diags, quiet);
    if !quiet && !lossy {
        println!("{}: ok ({} format)", input.name(), fmt.id());
    }
    Ok(if lossy { EXIT_SALVAGED } else { EXIT_OK })
}
