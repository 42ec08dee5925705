//! Who a process is, in a way that survives pid reuse.
//!
//! A pid alone is not an identity: after fslab is killed its pid can be
//! handed to any other process, which would then look like the "owner" of
//! the testbed it left. The start time (`/proc/PID/stat` field 22, in clock
//! ticks since boot) tells two processes with the same pid apart within a
//! boot, and the boot id (`/proc/sys/kernel/random/boot_id`) tells boots
//! apart for what outlives one (directories on disk, database rows).

use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

/// A process, identified so that a reused pid does not match.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessIdentity {
    pub pid: i32,
    /// `/proc/PID/stat` field 22: clock ticks after boot when it started.
    pub start_time: u64,
    pub boot_id: String,
    pub hostname: String,
}

/// Is the process an identity names still running?
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    Running,
    /// Exited, killed, or the host rebooted since.
    Gone,
    /// It ran on another host: this one cannot tell.
    Elsewhere,
}

static CURRENT: LazyLock<ProcessIdentity> = LazyLock::new(|| {
    let pid = std::process::id() as i32;
    ProcessIdentity { pid, start_time: start_time(pid).unwrap_or(0), boot_id: boot_id(), hostname: hostname() }
});

impl ProcessIdentity {
    /// This process.
    pub fn current() -> &'static ProcessIdentity {
        &CURRENT
    }

    /// Is it still running? Same host and boot: the pid must exist with the
    /// same start time. Same host name, other boot: gone. Other host: unknown.
    pub fn liveness(&self) -> Liveness {
        let here = ProcessIdentity::current();
        if self.boot_id != here.boot_id {
            return if self.hostname == here.hostname { Liveness::Gone } else { Liveness::Elsewhere };
        }
        if running(self.pid, self.start_time) {
            Liveness::Running
        } else {
            Liveness::Gone
        }
    }
}

/// Is process `pid` running, and did it start at `start_time`?
pub fn running(pid: i32, start_time: u64) -> bool {
    self::start_time(pid) == Some(start_time)
}

/// Field 22 of `/proc/PID/stat` (None when there is no such process).
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

/// The start time in `/proc/PID/stat` text, parsed by `procfs-core` (which
/// counts fields after the command name's last `)`, as a name may hold
/// spaces and parentheses).
fn parse_start_time(stat: &[u8]) -> Option<u64> {
    use procfs_core::FromRead;
    procfs_core::process::Stat::from_read(stat).ok().map(|s| s.starttime)
}

/// This boot's id (empty when the kernel does not say).
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map(|s| s.trim().to_string()).unwrap_or_default()
}

/// This host's name (empty when unknown).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_is_field_22_counted_after_the_command_name() {
        // A command name with spaces and a parenthesis, as comm can be.
        let stat = "4242 (we ird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 \
                    18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
        assert_eq!(parse_start_time(stat.as_bytes()), Some(987654));
        assert_eq!(parse_start_time(b"garbage"), None);
    }

    #[test]
    fn this_process_is_running_and_a_changed_start_time_is_not() {
        let me = ProcessIdentity::current().clone();
        assert!(me.start_time > 0 && !me.boot_id.is_empty());
        assert_eq!(me.liveness(), Liveness::Running);
        // The same pid with another start time: a reused pid.
        let reused = ProcessIdentity { start_time: me.start_time + 1, ..me.clone() };
        assert_eq!(reused.liveness(), Liveness::Gone);
        let rebooted = ProcessIdentity { boot_id: "other".into(), ..me.clone() };
        assert_eq!(rebooted.liveness(), Liveness::Gone);
        let elsewhere = ProcessIdentity { boot_id: "other".into(), hostname: "another-host".into(), ..me };
        assert_eq!(elsewhere.liveness(), Liveness::Elsewhere);
    }
}
