//! Export NAME.count (a counter incremented continuously) and NAME.phase
//! (a string) through PCP's MMV PMDA for SECONDS seconds.
//!
//! `cargo run --release --example mmv_counter -- NAME SECONDS`
//!
//! The file is `$PCP_TMP_DIR/mmv/NAME` (NAME may also be an absolute
//! path); `pminfo -f mmv.NAME.count` reads it while this runs. The file is
//! tied to the process (removed at exit, ignored by the PMDA once the
//! process is gone).

use mmv_values::{Builder, Semantics, Str, Units, FLAG_PROCESS, U64};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: mmv_counter NAME SECONDS");
        std::process::exit(2);
    }
    let seconds: f64 = args[2].parse().expect("SECONDS: a number");
    let mut b = Builder::new(&args[1]);
    b.flags(FLAG_PROCESS);
    let count = b.metric::<U64>(
        "count",
        Semantics::Counter,
        Units::count(),
        "increments made so far",
    );
    let phase = b.metric::<Str>(
        "phase",
        Semantics::Discrete,
        Units::NONE,
        "what the example is doing",
    );
    let mmv = b.start().unwrap_or_else(|e| {
        eprintln!("mmv_counter: {e}");
        std::process::exit(2);
    });
    eprintln!("exporting {}", mmv.path().display());
    let (count, phase) = (mmv.value(count), mmv.value(phase));
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let mut second = 0;
    let t0 = Instant::now();
    while Instant::now() < end {
        let s = t0.elapsed().as_secs();
        if s != second || count.get() == 0 {
            second = s;
            phase.set(if s.is_multiple_of(2) {
                "counting (even second)"
            } else {
                "counting (odd second)"
            });
        }
        // Counting continuously, with a breather so it is not a busy loop.
        for _ in 0..1000 {
            count.inc();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    phase.set("done");
}
