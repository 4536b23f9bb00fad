//! SIGINT / SIGTERM / SIGHUP: set a flag; the recording loop finishes the current
//! interval and closes the output. A second signal ends the process at
//! once, through the staging cleanup (`crate::cleanup`), so an impatient
//! second Ctrl-C leaves no staging behind either.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe work here: atomics, and on a second signal a
    // pipe write or sigaction + raise.
    if STOP.swap(true, Ordering::SeqCst) {
        crate::cleanup::end_by_signal(sig);
        return;
    }
    SIGNAL.store(sig, Ordering::SeqCst);
}

/// Install the handlers for SIGINT, SIGTERM and SIGHUP: a closed terminal
/// saves the recording as Ctrl-C does. A signal the parent told us to
/// ignore (nohup) stays ignored.
pub fn install() -> std::io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction is valid; we set the handler, an empty
        // mask and flags, then pass pointers to live locals.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, std::ptr::null(), &mut old);
            if sig == libc::SIGHUP && old.sa_sigaction == libc::SIG_IGN {
                continue;
            }
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = libc::SA_RESTART;
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// The signal that asked us to stop (0 if none).
pub fn which() -> i32 {
    SIGNAL.load(Ordering::SeqCst)
}
