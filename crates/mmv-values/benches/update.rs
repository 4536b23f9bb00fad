//! Nanoseconds per update through a handle, over 10 M updates each.
//! `cargo bench -p mmv-values --bench update`

use mmv_values::{Builder, Semantics, Units, F64, U64};
use std::hint::black_box;
use std::time::Instant;

const CALLS: u64 = 10_000_000;
const BATCH: u64 = 1000;

/// Median batch (other processes' time on a shared machine falls into a
/// few batches) and the whole run's mean, in ns per update.
fn measure(name: &str, mut f: impl FnMut(u64)) {
    let mut v = Vec::with_capacity((CALLS / BATCH) as usize);
    let all = Instant::now();
    for _ in 0..CALLS / BATCH {
        let t = Instant::now();
        f(BATCH);
        v.push(t.elapsed().as_nanos() as f64 / BATCH as f64);
    }
    let mean = all.elapsed().as_nanos() as f64 / CALLS as f64;
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "{name:<28} median {:6.2}  min {:6.2}  whole-run mean {:6.2} ns/update",
        v[v.len() / 2],
        v[0],
        mean
    );
}

fn main() {
    let dir = std::env::temp_dir().join(format!("mmv-bench-{}", std::process::id()));
    let mut b = Builder::at(&dir);
    let c = b.metric::<U64>("count", Semantics::Counter, Units::count(), "");
    let g = b.metric::<F64>("gauge", Semantics::Instant, Units::NONE, "");
    let mmv = b.start().expect("start");
    let (c, g) = (mmv.value(c), mmv.value(g));
    println!("{CALLS} updates per case, in batches of {BATCH}");
    measure("U64 set", |n| {
        for i in 0..n {
            c.set(black_box(i));
        }
    });
    measure("U64 inc (load + store)", |n| {
        for _ in 0..n {
            black_box(&c).inc();
        }
    });
    measure("U64 add_shared (atomic add)", |n| {
        for _ in 0..n {
            black_box(&c).add_shared(1);
        }
    });
    measure("F64 set", |n| {
        for i in 0..n {
            g.set(black_box(i as f64));
        }
    });
    drop(mmv);
    let _ = std::fs::remove_file(&dir);
}
