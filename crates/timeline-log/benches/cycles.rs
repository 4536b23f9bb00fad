//! Cycles (TSC ticks) per logging call over 10 M calls, enabled and
//! disabled, plus the two costs an enabled call cannot avoid here (the
//! `rdtscp` and the atomic add that makes logging thread-safe).
//! `cargo bench -p timeline-log --bench cycles`

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use timeline_log::{Level, Priority, Timeline};

const CALLS: u64 = 10_000_000;
const BATCH: u64 = 1000;

#[cfg(target_arch = "x86_64")]
fn ticks() -> u64 {
    // SAFETY: rdtsc is always available on x86-64.
    unsafe { std::arch::x86_64::_rdtsc() }
}
#[cfg(not(target_arch = "x86_64"))]
fn ticks() -> u64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// Cycles per call of `f` over CALLS calls, made in batches of BATCH: the
/// median and the lowest batch, and the mean of the whole run. On a shared
/// machine the run's mean includes the time other processes had the CPU
/// (the TSC counts wall time); the median batch does not.
fn measure(name: &str, mut f: impl FnMut(u64)) {
    let mut v: Vec<f64> = Vec::with_capacity((CALLS / BATCH) as usize);
    let t_all = ticks();
    for _ in 0..CALLS / BATCH {
        let t0 = ticks();
        f(BATCH);
        v.push((ticks() - t0) as f64 / BATCH as f64);
    }
    let mean = (ticks() - t_all) as f64 / CALLS as f64;
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "{name:<34} median {:8.2}  min {:8.2}  whole-run mean {:8.2} cycles/call",
        v[v.len() / 2],
        v[0],
        mean
    );
}

fn main() {
    let path = std::env::temp_dir().join(format!("timeline-bench-{}", std::process::id()));
    let tl = Timeline::create(&path, 1 << 20, 4096).expect("create");
    let ev = tl
        .define("bench", Priority::Info, "event $a $b")
        .expect("define");
    println!("{CALLS} calls per case, in batches of {BATCH}");
    measure("enabled, 2 args (log2)", |n| {
        for i in 0..n {
            ev.log2(black_box(i), 7);
        }
    });
    tl.set_priority(Level::Up(Priority::Error));
    measure("disabled by priority (log2)", |n| {
        for i in 0..n {
            ev.log2(black_box(i), 7);
        }
    });
    let off = Timeline::disabled();
    let ev_off = off
        .define("bench", Priority::Info, "event $a $b")
        .expect("define");
    measure("disabled timeline (log2)", |n| {
        for i in 0..n {
            ev_off.log2(black_box(i), 7);
        }
    });
    measure("empty loop (black_box only)", |n| {
        for i in 0..n {
            black_box(i);
        }
    });
    #[cfg(target_arch = "x86_64")]
    measure("rdtscp alone", |n| {
        let mut aux = 0u32;
        for _ in 0..n {
            // SAFETY: rdtscp is present (the logger uses it too).
            black_box(unsafe { std::arch::x86_64::__rdtscp(&mut aux) });
        }
    });
    // The alternative clock a reviewer may weigh against rdtscp: the same
    // TSC from rdtsc, and TSC_AUX from rdpid (where the CPU has it).
    #[cfg(target_arch = "x86_64")]
    {
        measure("rdtsc alone", |n| {
            for _ in 0..n {
                black_box(ticks());
            }
        });
        let rdpid = std::arch::x86_64::__cpuid_count(7, 0).ecx & (1 << 22) != 0;
        if rdpid {
            measure("rdpid alone", |n| {
                for _ in 0..n {
                    let r: u64;
                    // SAFETY: the CPU reports rdpid (cpuid 7.0:ECX[22]).
                    unsafe { std::arch::asm!("rdpid {}", out(reg) r) };
                    black_box(r);
                }
            });
        }
    }
    let a = AtomicU64::new(0);
    measure("atomic fetch_add alone", |n| {
        for _ in 0..n {
            black_box(a.fetch_add(1, Ordering::Relaxed));
        }
    });
    drop(tl);
    let _ = std::fs::remove_file(&path);
}
