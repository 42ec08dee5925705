//! Cancellation: SIGINT, SIGTERM and SIGHUP set one flag instead of killing
//! fslab, so every wait can notice it, kill what it started and unwind, and
//! testbeds, VMs and cgroups are torn down before fslab exits.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

use anyhow::{bail, Context, Result};

/// The signal that asked fslab to stop (0: none yet).
static RECEIVED: LazyLock<Arc<AtomicUsize>> = LazyLock::new(|| Arc::new(AtomicUsize::new(0)));

/// Signals that mean "stop, cleanly": Ctrl-C, `kill`/`timeout`, and a
/// closed terminal or ssh session.
pub const STOP_SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// [`install`] was called: a stop signal can come.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Route [`STOP_SIGNALS`] to the cancel flag. Safe to call more than once.
pub fn install() -> Result<()> {
    INSTALLED.store(true, Ordering::SeqCst);
    for sig in STOP_SIGNALS {
        signal_hook::flag::register_usize(sig, Arc::clone(&RECEIVED), sig as usize)
            .context("installing signal handler")?;
    }
    Ok(())
}

/// Whether stop signals reach the cancel flag (not in the guest agent,
/// which the host stops by its exchange or by killing the VM): waits that
/// look at [`cancelled`] only for a signal's sake need not wake up without.
pub fn installed() -> bool {
    INSTALLED.load(Ordering::SeqCst)
}

/// True once the user asked fslab to stop.
pub fn cancelled() -> bool {
    RECEIVED.load(Ordering::SeqCst) != 0
}

/// The stop signal received, if any.
pub fn received() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        sig => Some(sig as i32),
    }
}

/// Ask every wait to stop, as a signal would (tests, and fatal errors in
/// one thread that must stop the others).
pub fn cancel(sig: i32) {
    RECEIVED.store(sig as usize, Ordering::SeqCst);
}

/// Fail with a clear message if the user asked fslab to stop.
pub fn check_cancelled() -> Result<()> {
    if cancelled() {
        bail!("interrupted");
    }
    Ok(())
}

/// The shell convention for "ended by signal `sig`": 128 + sig (130 for
/// SIGINT, 143 for SIGTERM, 129 for SIGHUP).
pub fn exit_code(sig: i32) -> u8 {
    (128 + sig).clamp(0, 255) as u8
}
