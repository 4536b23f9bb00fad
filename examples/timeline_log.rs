//! Log COUNT events of three kinds into a timeline file, then exit.
//!
//! `cargo run --release --example timeline_log -- PATH COUNT [ENTRIES]`
//!
//! The ring holds ENTRIES slots (default: COUNT rounded up to a power of
//! two, between 1024 and 2^20). Event i is kind i % 3; every kind's
//! arguments are derived from i, so a listing can be checked row by row:
//!   packet: `rx seq $seq len $len`        seq = i, len = 2i + 1
//!   batch:  `batch $seq sum $sum xor $x`  i, i + 7, i ^ 0x5555
//!   tick:   `tick $seq $a $b $c`          i, 3i, 5i, 7i

use timeline_log::{Priority, Timeline};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: timeline_log PATH COUNT [ENTRIES]");
        std::process::exit(2);
    }
    let count: u64 = args[2].parse().expect("COUNT: a number");
    let entries: u64 = match args.get(3) {
        Some(e) => e.parse().expect("ENTRIES: a number"),
        None => count.next_power_of_two().clamp(1024, 1 << 20),
    };
    let tl = Timeline::create(&args[1], entries, 4096).unwrap_or_else(|e| {
        eprintln!("timeline_log: {e}");
        std::process::exit(2);
    });
    let packet = tl
        .define("example", Priority::Packet, "rx seq $seq len $len")
        .expect("define");
    let batch = tl
        .define("example", Priority::App, "batch $seq sum $sum xor $x")
        .expect("define");
    let tick = tl
        .define("example", Priority::Info, "tick $seq $a $b $c")
        .expect("define");
    for i in 0..count {
        match i % 3 {
            0 => packet.log2(i, 2 * i + 1),
            1 => batch.log3(i, i + 7, i ^ 0x5555),
            _ => tick.log4(i, 3 * i, 5 * i, 7 * i),
        }
    }
}
