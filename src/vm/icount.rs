//! Guest instructions executed during a run's measured part: a metric that
//! does not depend on the host's load, for guests under TCG.
//!
//! The counting is done by a separate QEMU plugin
//! (`plugins/qemu-icount`, GPL like QEMU's plugin API), loaded into every
//! TCG session when it is installed. The guest marks the measured part's
//! start and end with two marker instructions ([`measured`]): multi-byte
//! NOPs with a magic displacement, which the plugin recognises by their
//! bytes. At the end marker the plugin writes the whole guest's count (all
//! vCPUs, kernel and user) to a file in the session directory, which the
//! host takes after the run ([`take`]).

use std::path::{Path, PathBuf};

use crate::metric::Metric;

/// The metric's name; lower is better.
pub const METRIC: &str = "vm/instructions";
/// The plugin's file name, as cargo builds it.
pub const PLUGIN_FILE: &str = "libfslab_qemu_icount.so";
/// The file in the session directory the plugin writes each window's count to.
pub const COUNT_FILE: &str = "instructions";

/// Run `measure` between the start and end markers. On the host (and in a
/// guest without the plugin) the markers are plain NOPs.
pub fn measured<T>(measure: impl FnOnce() -> T) -> T {
    marker::start();
    let result = measure();
    marker::end();
    result
}

#[cfg(target_arch = "x86_64")]
mod marker {
    // `nopw DISP(%rax,%rax,1)`: 66 0f 1f 84 00 + the 4-byte displacement,
    // the plugin's MAGIC_START and MAGIC_END.
    pub fn start() {
        // SAFETY: a NOP; touches no memory, registers or flags.
        unsafe { core::arch::asm!("nop word ptr [rax + rax*1 + 0x46534c53]", options(nomem, nostack, preserves_flags)) }
    }
    pub fn end() {
        // SAFETY: as above.
        unsafe { core::arch::asm!("nop word ptr [rax + rax*1 + 0x46534c45]", options(nomem, nostack, preserves_flags)) }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod marker {
    pub fn start() {}
    pub fn end() {}
}

/// The installed plugin: beside the fslab executable (a cargo build), then
/// in `$FSLAB_TOOLS/lib` (`scripts/install-vm-tools`).
pub fn plugin() -> Option<PathBuf> {
    let beside = std::env::current_exe().ok().and_then(|exe| exe.parent().map(|d| d.join(PLUGIN_FILE)));
    beside.into_iter().chain([super::tools::tools_prefix().join("lib").join(PLUGIN_FILE)]).find(|p| p.is_file())
}

/// The count of the last measured window, removed so the next run starts
/// clean; None when the plugin wrote none (no plugin, or the run never
/// reached its end marker).
pub fn take(session_dir: &Path) -> Option<Metric> {
    let path = session_dir.join(COUNT_FILE);
    let text = std::fs::read_to_string(&path).ok()?;
    let _ = std::fs::remove_file(&path);
    let count: u64 = text.trim().parse().ok()?;
    Some(Metric::lower(METRIC, "insn", count as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_is_read_once() {
        let dir = tempfile::tempdir().unwrap();
        assert!(take(dir.path()).is_none());
        std::fs::write(dir.path().join(COUNT_FILE), "12345\n").unwrap();
        let metric = take(dir.path()).unwrap();
        assert_eq!((metric.name.as_str(), metric.value, metric.higher_is_better), (METRIC, 12345.0, false));
        assert!(take(dir.path()).is_none(), "taken once");
        // The markers are NOPs outside the plugin.
        assert_eq!(measured(|| 7), 7);
    }
}
