//! What fslab asks of the host operating system, at the bottom of the
//! house: every other module may use these, and these use none of them.

pub mod blockdev;
pub mod caches;
pub mod contain;
pub mod exec;
pub mod forked;
pub mod git;
pub mod identity;
pub mod marker;
pub mod modules;
pub mod mount;
pub mod mountinfo;
pub mod signals;
pub mod trusted;

/// `uname -r` of the running kernel (empty when `/proc` cannot say).
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string()
}
