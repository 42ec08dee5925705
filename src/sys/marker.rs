//! Names and files that mark what fslab created.
//!
//! Everything fslab creates on the host (a testbed's directory, image, mount
//! point and cgroup, a trace instance, a VM's directory and processes, a
//! temporary input in the cache) is named `fslab-tb-<pid>-s<start>-<n>`:
//! the pid and start time of the fslab process that made it (see
//! [`crate::sys::identity`]), so `fslab cleanup` can find what a killed
//! fslab left behind and tell whether its owner still runs even when the
//! pid was reused. Parallel fslab processes (and parallel tests) therefore
//! never clean up each other's work.
//!
//! A name can be typed by anyone, so directories also carry a marker FILE
//! ([`MARKER_FILE`]) with the owner's full identity; only a directory with
//! a matching marker file is ever deleted.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::identity::{self, Liveness, ProcessIdentity};

/// Prefix of every name fslab gives to what it creates.
pub const MARKER: &str = "fslab-tb-";

/// The file in every directory fslab creates (testbeds, `dir:` run
/// directories): JSON [`DirMarker`].
pub const MARKER_FILE: &str = ".fslab-testbed";

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// `fslab-tb-<pid>-s<start>`: the part of every name that says who made it.
fn owner_prefix() -> String {
    let me = ProcessIdentity::current();
    format!("{MARKER}{}-s{}", me.pid, me.start_time)
}

/// A name no other live fslab object on this host has.
pub fn unique_name() -> String {
    format!("{}-{}", owner_prefix(), COUNTER.fetch_add(1, Ordering::SeqCst))
}

/// A marker name with a readable tag before the counter
/// (`fslab-tb-<pid>-s<start>-bt3`): for objects numbered per process.
pub fn tagged_name(tag: &str) -> String {
    format!("{}-{tag}{}", owner_prefix(), COUNTER.fetch_add(1, Ordering::SeqCst))
}

/// The owner encoded in a marker name found anywhere in `text`: the pid,
/// and the start time when the name carries one (names made by older
/// fslab versions, `fslab-tb-<pid>-<n>-<nanos>`, do not).
pub fn owner(text: &str) -> Option<(i32, Option<u64>)> {
    let rest = &text[text.find(MARKER)? + MARKER.len()..];
    let mut parts = rest.split(['-', '/', '.']);
    let pid = parts.next()?.parse().ok()?;
    let start = parts.next().and_then(|p| p.strip_prefix('s')).and_then(|s| s.parse().ok());
    Some((pid, start))
}

/// The pid encoded in a marker name found anywhere in `text`.
pub fn owner_pid(text: &str) -> Option<i32> {
    owner(text).map(|(pid, _)| pid)
}

/// Is process `pid` still running?
pub fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Should the leftover named `text` go? Unowned ones and those whose owner
/// is gone (or whose pid now belongs to another process) do; `all` takes
/// those of running fslab processes too.
pub fn stale(text: &str, all: bool) -> bool {
    all || match owner(text) {
        None => true,
        Some((pid, Some(start))) => !identity::running(pid, start),
        Some((pid, None)) => !alive(pid),
    }
}

/// What a marker file says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirMarker {
    /// The directory's own name: a marker copied elsewhere does not match.
    pub name: String,
    pub owner: ProcessIdentity,
    /// Unix time of creation.
    pub created: u64,
}

/// Create `parent/<unique name>` with its marker file; returns the path
/// and the name. Nothing else in `parent` is touched.
pub fn create_marked_dir(parent: &Path) -> Result<(PathBuf, String)> {
    let name = unique_name();
    let dir = parent.join(&name);
    std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let marker = DirMarker {
        name: name.clone(),
        owner: ProcessIdentity::current().clone(),
        created: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
    };
    let written = serde_json::to_string(&marker)
        .map_err(anyhow::Error::from)
        .and_then(|json| std::fs::write(dir.join(MARKER_FILE), json).map_err(Into::into));
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e.context(format!("writing the fslab marker in {}", dir.display())));
    }
    Ok((dir, name))
}

/// Whose a directory named like a marker is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DirOwner {
    /// No marker file matching its name: not made by fslab (or a marker
    /// copied from elsewhere); never deleted.
    NotOurs(String),
    /// Its fslab process still runs.
    Running(ProcessIdentity),
    /// Its fslab process is gone (or ran before a reboot).
    Stale(ProcessIdentity),
    /// Made on another host (a shared work directory): left alone.
    Elsewhere(ProcessIdentity),
}

/// Read `dir`'s marker file and decide whose it is.
pub fn dir_owner(dir: &Path) -> DirOwner {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let path = dir.join(MARKER_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return DirOwner::NotOurs(format!("it has no {MARKER_FILE} file"));
        }
        Err(e) => return DirOwner::NotOurs(format!("its {MARKER_FILE} cannot be read: {e}")),
    };
    let marker: DirMarker = match serde_json::from_str(&text) {
        Ok(m) => m,
        Err(e) => return DirOwner::NotOurs(format!("its {MARKER_FILE} is not fslab's: {e}")),
    };
    if marker.name != name {
        return DirOwner::NotOurs(format!("its {MARKER_FILE} names another directory ({})", marker.name));
    }
    match marker.owner.liveness() {
        Liveness::Running => DirOwner::Running(marker.owner),
        Liveness::Gone => DirOwner::Stale(marker.owner),
        Liveness::Elsewhere => DirOwner::Elsewhere(marker.owner),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_read_from_marker_names() {
        assert_eq!(owner("/var/tmp/fslab/fslab-tb-1234-s99-0/mnt"), Some((1234, Some(99))));
        assert_eq!(owner("fslab-tb-77-s5-bt3"), Some((77, Some(5))));
        // Older names: a pid only.
        assert_eq!(owner("/var/tmp/fslab/fslab-tb-1234-0-ab/mnt"), Some((1234, None)));
        assert_eq!(owner_pid("fslab-tb-77-3-ff"), Some(77));
        assert_eq!(owner("/dev/loop0"), None);
        let ours = unique_name();
        assert!(ours.starts_with(&format!("{MARKER}{}-s", std::process::id())), "{ours}");
        assert!(!stale(&ours, false));
        assert!(stale(&ours, true));
        // Our pid with another start time: the pid was reused.
        let me = ProcessIdentity::current();
        assert!(stale(&format!("{MARKER}{}-s{}-0", me.pid, me.start_time + 7), false));
        assert!(!stale(&tagged_name("bt"), false));
    }

    #[test]
    fn only_a_matching_marker_file_makes_a_directory_ours() {
        let parent = tempfile::tempdir().unwrap();
        let (dir, name) = create_marked_dir(parent.path()).unwrap();
        assert_eq!(dir.file_name().unwrap().to_string_lossy(), name);
        assert!(matches!(dir_owner(&dir), DirOwner::Running(_)));

        // Hand-made, looking like a testbed.
        let fake = parent.path().join("fslab-tb-999999-0-abc");
        std::fs::create_dir(&fake).unwrap();
        assert!(matches!(dir_owner(&fake), DirOwner::NotOurs(_)));
        // A real marker copied into another directory does not match it.
        std::fs::copy(dir.join(MARKER_FILE), fake.join(MARKER_FILE)).unwrap();
        assert!(matches!(dir_owner(&fake), DirOwner::NotOurs(m) if m.contains("another directory")));

        // A marker whose owner's pid was reused: stale.
        let mut marker: DirMarker =
            serde_json::from_str(&std::fs::read_to_string(dir.join(MARKER_FILE)).unwrap()).unwrap();
        marker.owner.start_time += 1;
        std::fs::write(dir.join(MARKER_FILE), serde_json::to_string(&marker).unwrap()).unwrap();
        assert!(matches!(dir_owner(&dir), DirOwner::Stale(_)));
    }
}
