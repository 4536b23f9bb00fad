//! The `record` verb: command-line options into a recorder run.

use super::{RecordArgs, EXIT_OK};
use crate::error::Error;
use crate::model::{time::parse_duration, FormatId};
use crate::record::{loss_summary, record, RecordOptions, Stop};
use anyhow::Context;

/// `polytrace record`: options from the command line, then [`record`].
pub fn run(a: &RecordArgs, given: &[&str], quiet: bool) -> anyhow::Result<u8> {
    if let Some(name) = &a.live {
        return run_live(a, name, given, quiet);
    }
    let mut output = a.output.output.clone().context("-o OUT is required")?;
    // The same inference as `convert`: --to, else OUT's extension. A name
    // without one is a PCP archive's base name: sampled /proc data is what
    // archives are for (pmrep, pmchart and Grafana read them) and an archive
    // holds all of it, process events included. --listing writes no format.
    let to = if a.listing {
        a.output.to.unwrap_or(FormatId::Ltt)
    } else if a.output.to.is_none()
        && super::naming::format_for_name(&output).is_none()
        && !output.is_dir()
    {
        FormatId::Pcp
    } else {
        super::naming::target_format(a.output.to, Some(&output))?
    };
    if !a.listing {
        super::optspec::check_target(
            super::optspec::Verb::Record,
            super::optspec::Target::To(to),
            given,
        )?;
    }
    if to == FormatId::Pcp {
        output = super::naming::pcp_base(&output);
    }
    let opts = record_options(a, output, to, quiet)?;
    let outcome = record(&opts)?;
    if !quiet {
        let s = &outcome.stats;
        eprintln!(
            "polytrace: recorded {} scans ({} NEW, {} STP, {} PID reuses){}",
            s.scans,
            s.new,
            s.stp,
            s.pid_reuse,
            match outcome.signal {
                Some(libc::SIGINT) => ", stopped by SIGINT",
                Some(libc::SIGTERM) => ", stopped by SIGTERM",
                Some(libc::SIGHUP) => ", stopped by SIGHUP",
                _ => "",
            }
        );
        for l in loss_summary(&outcome.loss) {
            eprintln!("polytrace: {l}");
        }
    }
    // The target holds what it can by its nature: that is the job done.
    Ok(EXIT_OK)
}

/// What the recorder is given: the target, and `a`'s clock, buffer and
/// write options.
fn record_options(
    a: &RecordArgs,
    output: std::path::PathBuf,
    to: FormatId,
    quiet: bool,
) -> Result<RecordOptions, Error> {
    let interval_ns = parse_duration(&a.interval).map_err(Error::Usage)?;
    let check_interval_ns = parse_duration(&a.check_interval).map_err(Error::Usage)?;
    let stop = match (&a.duration, a.samples) {
        (Some(d), _) => Stop::Duration(parse_duration(d).map_err(Error::Usage)?),
        (None, Some(n)) => Stop::Intervals(n),
        (None, None) => Stop::Signal,
    };
    Ok(RecordOptions {
        output,
        to,
        force: a.output.force,
        wopts: a.output.write_options(),
        interval_ns,
        check_interval_ns,
        stop,
        buffer_limit: a.buffer as usize,
        quiet,
        listing: a.listing,
    })
}

/// `record --to mmv --live NAME`: the options that apply to a file written
/// at the end do not apply here and are refused.
fn run_live(a: &RecordArgs, name: &str, given: &[&str], quiet: bool) -> anyhow::Result<u8> {
    let o = &a.output;
    if o.to != Some(FormatId::Mmv) {
        return Err(Error::Usage("--live applies to --to mmv only".into()).into());
    }
    let given = [
        (
            o.output.is_some(),
            "-o (the live file is $PCP_TMP_DIR/mmv/NAME)",
        ),
        (o.force, "--force"),
        (o.strict, "--strict"),
        (
            o.mmv_version.is_some(),
            "--mmv-version (the live file's version follows its names, as libpcp_mmv's)",
        ),
        (o.at.is_some(), "--at"),
        (o.split.is_some(), "--split"),
        (a.listing, "--listing"),
        (
            given.contains(&"buffer"),
            "--buffer (the live file holds the last scan, nothing is buffered)",
        ),
        (
            o.pcp_version.is_some()
                || o.volume_size.is_some()
                || o.timeline_version.is_some()
                || o.entries.is_some()
                || o.out_ecu.is_some()
                || o.out_app_id.is_some()
                || o.out_ctx_id.is_some()
                || o.out_session_id.is_some()
                || o.dlt_payload_max.is_some()
                || o.dlt_truncated_tails
                || o.kpi_style.is_some()
                || o.ltt_block_size.is_some()
                || o.ltt_plain
                || o.rate
                || o.units_row
                || o.delimiter.is_some()
                || !o.columns.is_empty()
                || o.events,
            "options of other formats",
        ),
    ];
    if let Some((_, what)) = given.iter().find(|(set, _)| *set) {
        return Err(Error::Usage(format!(
            "{what} does not apply to record --live, which keeps one MMV file updated in place"
        ))
        .into());
    }
    // --force and --listing were refused above: the options read them as unset.
    let opts = record_options(a, std::path::PathBuf::new(), FormatId::Mmv, quiet)?;
    let (outcome, path, generations) = crate::record::live::record_live(&opts, name)?;
    if !quiet {
        let s = &outcome.stats;
        eprintln!(
            "polytrace: {} scans into {} live ({} files made as processes came and went; removed at the end)",
            s.scans,
            path.display(),
            generations
        );
    }
    Ok(EXIT_OK)
}
