//! The directories fslab creates testbeds in: the default work directory,
//! the ones fslab recorded itself (so `fslab cleanup` knows where to look
//! and never looks anywhere else), and the system directories it refuses.

use std::fs;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Component, Path, PathBuf};

/// Where fslab puts images, mount points and caches unless told otherwise.
pub const DEFAULT_WORKDIR: &str = "/var/tmp/fslab";

/// Under [`DEFAULT_WORKDIR`]: one directory per line, every directory
/// other than the default that holds fslab testbed or session directories
/// right now (work directories and `dir:` paths), so that `fslab cleanup`
/// finds what a killed fslab left there. Its scope is "directories that
/// may hold leftovers": a directory is recorded when a testbed directory is
/// made in it and forgotten again when the last one there is removed
/// ([`forget_if_clean`]: at teardown, and when `fslab cleanup` cleaned
/// it). A run that ends normally leaves no trace of its work directory.
const REGISTRY: &str = ".fslab-workdirs";

/// Remember that fslab created a testbed directory in `dir` (call it after
/// creating the directory, so a concurrent [`forget_if_clean`] either sees
/// it or runs before this). Best effort: a registry that cannot be written
/// (no permission, read-only disk) only means `fslab cleanup` needs
/// `--workdir` for this one.
pub fn record(dir: &Path) {
    let Ok(dir) = fs::canonicalize(dir) else { return };
    if dir == Path::new(DEFAULT_WORKDIR) {
        return;
    }
    let _ = update_registry(|dirs| {
        if !dirs.contains(&dir) {
            dirs.push(dir.clone());
        }
    });
}

/// Forget `dir` unless it still holds a directory named with fslab's
/// marker (a testbed or VM session of a live or killed fslab). Checked
/// under the registry's lock, after [`record`]'s callers created theirs.
pub fn forget_if_clean(dir: &Path) {
    let Ok(dir) = fs::canonicalize(dir) else { return };
    if !Path::new(DEFAULT_WORKDIR).join(REGISTRY).exists() {
        return;
    }
    let _ = update_registry(|dirs| {
        if dirs.contains(&dir) && !holds_marked_dirs(&dir) {
            dirs.retain(|d| d != &dir);
        }
    });
}

/// Whether `dir` holds a directory named like fslab's testbeds.
fn holds_marked_dirs(dir: &Path) -> bool {
    fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with(crate::sys::marker::MARKER))
}

/// The default work directory and every recorded one that still exists.
pub fn known() -> Vec<PathBuf> {
    let mut dirs = vec![PathBuf::from(DEFAULT_WORKDIR)];
    let text = fs::read_to_string(Path::new(DEFAULT_WORKDIR).join(REGISTRY)).unwrap_or_default();
    for dir in parse_registry(&text) {
        if dir.is_dir() && !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

fn parse_registry(text: &str) -> Vec<PathBuf> {
    text.lines().map(str::trim).filter(|l| l.starts_with('/')).map(PathBuf::from).collect()
}

/// Read, change and write the registry under an exclusive lock (parallel
/// fslab processes record at the same time); directories that no longer
/// exist are dropped, so the file stays small.
fn update_registry(change: impl FnOnce(&mut Vec<PathBuf>)) -> std::io::Result<()> {
    // Root writes it: never in a directory another user owns, never through a link.
    let root = crate::sys::trusted::ensure_dir_io(Path::new(DEFAULT_WORKDIR))?;
    let mut file = crate::sys::trusted::open_rw_nofollow(&root.join(REGISTRY))?;
    // SAFETY: flock on a descriptor we own; released when `file` closes.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    let mut dirs: Vec<PathBuf> = parse_registry(&text).into_iter().filter(|d| d.is_dir()).collect();
    dirs.dedup();
    change(&mut dirs);
    let mut out = String::new();
    for d in &dirs {
        out.push_str(&d.to_string_lossy());
        out.push('\n');
    }
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(out.as_bytes())
}

/// Top-level directories that are never a place for testbeds or runs.
const SYSTEM_DIRS: &[&str] = &[
    "/",
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/home",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/lost+found",
    "/media",
    "/mnt",
    "/opt",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/snap",
    "/srv",
    "/sys",
    "/tmp",
    "/usr",
    "/var",
];

/// Directories whose whole subtree belongs to the system.
const SYSTEM_TREES: &[&str] =
    &["/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sbin", "/sys", "/usr"];

/// Why `path` must not be a work directory or a `dir:` testbed (a run
/// creates, fills and deletes files there), or None when it may be.
/// Refused: `/` and the top-level system directories, everything under
/// `/usr`, `/etc`, `/proc`, `/sys`, `/dev`, `/boot` and the `lib`/`bin`
/// directories, the directories directly in `/var` (`/var/lib`,
/// `/var/tmp`, …), home directories and the user's own home.
pub fn system_dir(path: &Path) -> Option<String> {
    let path = normalize(path);
    let shown = path.display();
    if path == Path::new("/") {
        return Some("`/` is the root directory".to_string());
    }
    let home = std::env::var_os("HOME").map(|h| normalize(Path::new(&h)));
    if home.as_deref() == Some(path.as_path()) {
        return Some(format!("`{shown}` is your home directory"));
    }
    if SYSTEM_DIRS.iter().any(|d| path == Path::new(d)) {
        return Some(format!("`{shown}` is a system directory"));
    }
    if let Some(tree) = SYSTEM_TREES.iter().find(|t| path.starts_with(t)) {
        return Some(format!("`{shown}` is inside the system directory {tree}"));
    }
    if path.parent() == Some(Path::new("/var")) {
        return Some(format!("`{shown}` is a system directory"));
    }
    if path.parent() == Some(Path::new("/home")) {
        return Some(format!("`{shown}` is a home directory"));
    }
    None
}

/// The absolute path with symlinks resolved as far as it exists, and
/// `.`/`..` removed from the rest (so `/var/tmp/../../` is `/`).
fn normalize(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")).join(path)
    };
    let mut clean = PathBuf::from("/");
    for part in absolute.components() {
        match part {
            Component::ParentDir => {
                clean.pop();
            }
            Component::Normal(p) => clean.push(p),
            _ => {}
        }
    }
    // Resolve symlinks in the longest existing prefix (`/var/run` → `/run`).
    let mut existing = clean.clone();
    let mut rest = Vec::new();
    while !existing.exists() {
        match existing.file_name() {
            Some(name) => rest.push(name.to_os_string()),
            None => break,
        }
        existing.pop();
    }
    let mut out = fs::canonicalize(&existing).unwrap_or(existing);
    for name in rest.into_iter().rev() {
        out.push(name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_directories_are_refused_and_work_directories_are_not() {
        for p in
            ["/", "/usr", "/usr/lib/x", "/etc", "/var", "/var/lib", "/var/tmp", "/home", "/tmp", "/dev/shm", "/proc/1"]
        {
            assert!(system_dir(Path::new(p)).is_some(), "{p} should be refused");
        }
        assert!(system_dir(Path::new("/var/tmp/../../")).unwrap().contains("root directory"));
        assert!(system_dir(Path::new("/var/tmp/fslab/../..")).is_some());
        if let Some(home) = std::env::var_os("HOME") {
            assert!(system_dir(Path::new(&home)).is_some());
        }
        for p in
            ["/var/tmp/fslab", "/var/tmp/fslab-tests/x", "/srv/bench/fslab", "/tmp/x", "/mnt/scratch", "/home/me/work"]
        {
            assert_eq!(system_dir(Path::new(p)), None, "{p} should be allowed");
        }
    }

    #[test]
    fn the_registry_keeps_existing_directories_once() {
        // The registry lives under /var/tmp/fslab, which fslab (as root) creates.
        if !crate::testsupport::root_or_skip("writing the work directory registry") {
            return;
        }
        let a = tempfile::tempdir().unwrap();
        record(a.path());
        record(a.path());
        let canonical = fs::canonicalize(a.path()).unwrap();
        assert_eq!(known().iter().filter(|d| **d == canonical).count(), 1);
        assert_eq!(known()[0], PathBuf::from(DEFAULT_WORKDIR));
        drop(a);
        assert!(!known().contains(&canonical));
    }
}
