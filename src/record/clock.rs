//! Clocks: CLOCK_REALTIME for the timestamps, CLOCK_MONOTONIC for
//! intervals and calibration, and the CPU's cycle counter as raw clock.

/// Nanoseconds of a POSIX clock.
#[allow(clippy::unnecessary_cast)] // time_t / c_long are not i64 everywhere
fn clock_ns(id: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec we pass.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as i64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as i64)
}

pub fn realtime_ns() -> i64 {
    clock_ns(libc::CLOCK_REALTIME)
}

pub fn monotonic_ns() -> i64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Which raw counter this build reads.
pub fn counter_name() -> Option<&'static str> {
    if cfg!(target_arch = "x86_64") {
        Some(crate::model::keys::CLOCK_TSC)
    } else if cfg!(target_arch = "aarch64") {
        Some(crate::model::keys::CLOCK_CNTVCT)
    } else {
        None
    }
}

/// The raw cycle counter: rdtsc on x86-64, CNTVCT_EL0 on aarch64.
#[inline]
pub fn read_counter() -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions on x86-64.
        Some(unsafe { core::arch::x86_64::_rdtsc() })
    }
    #[cfg(target_arch = "aarch64")]
    {
        let v: u64;
        // SAFETY: CNTVCT_EL0 is readable from EL0 on Linux.
        unsafe { core::arch::asm!("mrs {}, cntvct_el0", out(reg) v) };
        Some(v)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        None
    }
}

/// A (monotonic ns, counter) pair read as close together as we can: the
/// counter is bracketed by two monotonic reads and the tightest of a few
/// tries is kept, its midpoint standing for the counter's instant.
#[derive(Debug, Clone, Copy)]
pub struct ClockPair {
    pub mono: i64,
    pub counter: u64,
}

pub fn read_pair() -> Option<ClockPair> {
    let mut best: Option<(i64, ClockPair)> = None;
    for _ in 0..5 {
        let a = monotonic_ns();
        let c = read_counter()?;
        let b = monotonic_ns();
        let w = b - a;
        if best.is_none_or(|(bw, _)| w < bw) {
            best = Some((
                w,
                ClockPair {
                    mono: a + w / 2,
                    counter: c,
                },
            ));
        }
    }
    best.map(|(_, p)| p)
}

/// Counter rate between two pairs, in Hz.
pub fn rate(a: ClockPair, b: ClockPair) -> Option<f64> {
    let dt = b.mono - a.mono;
    let dc = b.counter.checked_sub(a.counter)?;
    (dt > 0 && dc > 0).then(|| dc as f64 * 1e9 / dt as f64)
}

/// Calibrate over a short window (`window_ms`): returns the first pair
/// and the rate measured over the window.
pub fn calibrate(window_ms: u64) -> Option<(ClockPair, f64)> {
    let a = read_pair()?;
    std::thread::sleep(std::time::Duration::from_millis(window_ms));
    let b = read_pair()?;
    Some((a, rate(a, b)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_move_and_rate_is_plausible() {
        let r0 = realtime_ns();
        assert!(r0 > 1_500_000_000_000_000_000, "realtime {r0}");
        let m0 = monotonic_ns();
        assert!(monotonic_ns() >= m0);
        if counter_name().is_some() {
            let (_, hz) = calibrate(10).unwrap();
            // Any real counter runs between 1 MHz and 10 GHz.
            assert!((1e6..1e10).contains(&hz), "{hz}");
        }
    }
}
