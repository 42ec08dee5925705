//! Names that mark what fslab created.
//!
//! Everything fslab creates on the host (a testbed's directory, image, mount
//! point and cgroup, a trace instance, a VM's directory and processes) is
//! named `fslab-tb-<pid>-<n>-<nanos>`, so `fslab cleanup` can find what a
//! killed fslab left behind and tell from the pid whether its owner still
//! runs. Parallel fslab processes (and parallel tests) therefore never clean
//! up each other's work.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Prefix of every name fslab gives to what it creates.
pub const MARKER: &str = "fslab-tb-";

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A name no other live fslab object on this host has.
pub fn unique_name() -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{MARKER}{}-{}-{nanos:x}", std::process::id(), COUNTER.fetch_add(1, Ordering::SeqCst))
}

/// A marker name with a readable tag instead of the counter and time
/// (`fslab-tb-<pid>-bt3`): for objects that are numbered per process.
pub fn tagged_name(tag: &str) -> String {
    format!("{MARKER}{}-{tag}{}", std::process::id(), COUNTER.fetch_add(1, Ordering::SeqCst))
}

/// The pid encoded in a marker name found anywhere in `text`.
pub fn owner_pid(text: &str) -> Option<i32> {
    let rest = &text[text.find(MARKER)? + MARKER.len()..];
    rest.split('-').next()?.parse().ok()
}

/// Is process `pid` still running?
pub fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Should this leftover go? Unowned or dead-owner ones do; `all` takes
/// those of running fslab processes too.
pub fn stale(text: &str, all: bool) -> bool {
    all || owner_pid(text).is_none_or(|pid| !alive(pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pid_is_read_from_marker_names() {
        assert_eq!(owner_pid("/var/tmp/fslab/fslab-tb-1234-0-ab/mnt"), Some(1234));
        assert_eq!(owner_pid("fslab-tb-77-3-ff"), Some(77));
        assert_eq!(owner_pid("/dev/loop0"), None);
        // A live pid (ours) is not stale unless `all`.
        let ours = format!("fslab-tb-{}-0-0", std::process::id());
        assert!(!stale(&ours, false));
        assert!(stale(&ours, true));
        assert!(unique_name().starts_with(&format!("{MARKER}{}-", std::process::id())));
    }
}
