//! The `record` verb: command-line options into a recorder run.

use super::{RecordArgs, EXIT_OK};
use crate::error::Error;
use crate::model::{time::parse_duration, FormatId};
use crate::record::{loss_summary, record, RecordOptions, Stop};
use anyhow::Context;

/// `polytrace record`: options from the command line, then [`record`].
pub fn run(a: &RecordArgs, given: &[&str], quiet: bool) -> anyhow::Result<u8> {
    let mut output = a.output.output.clone().context("-o OUT is required")?;
    // The same inference as `convert`: --to, else OUT's extension; a name
    // without one (and --listing, which writes no format) is an LTT trace
    // directory, as `record --help` says.
    let to = if a.listing
        || (a.output.to.is_none()
            && super::naming::format_for_name(&output).is_none()
            && !output.is_dir())
    {
        a.output.to.unwrap_or(FormatId::Ltt)
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
    let interval_ns = parse_duration(&a.interval).map_err(Error::Usage)?;
    let check_interval_ns = parse_duration(&a.check_interval).map_err(Error::Usage)?;
    let stop = match (&a.duration, a.samples) {
        (Some(d), _) => Stop::Duration(parse_duration(d).map_err(Error::Usage)?),
        (None, Some(n)) => Stop::Intervals(n),
        (None, None) => Stop::Signal,
    };
    let opts = RecordOptions {
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
    };
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
