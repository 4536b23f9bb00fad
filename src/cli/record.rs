//! The `record` verb: command-line options into a recorder run.

use super::{RecordArgs, EXIT_OK};
use crate::error::Error;
use crate::model::{time::parse_duration, FormatId};
use crate::record::{loss_summary, record, RecordOptions, Stop};
use anyhow::Context;

/// `polytrace record`: options from the command line, then [`record`].
pub fn run(a: &RecordArgs, quiet: bool) -> anyhow::Result<u8> {
    let output = a.output.output.clone().context("-o OUT is required")?;
    let to = a.output.to.unwrap_or(FormatId::Ltt);
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
