//! The kernel cache: `<cache>/kernels/<key>/`, each entry built once in a
//! temporary directory and renamed into place, under an exclusive lock, so
//! two fslab processes never unpack into the same directory and nobody ever
//! sees a half-built entry (a directory that exists is complete).

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::thread::sleep;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use nix::fcntl::{Flock, FlockArg};

use crate::sys::signals::cancelled;

/// `<cache>/kernels`.
pub fn kernels_dir(cache: &Path) -> PathBuf {
    cache.join("kernels")
}

/// The entry `key` under `kernels`, built by `build` (which fills the empty
/// directory it is given) if it does not exist yet. Returns its path.
pub fn entry(kernels: &Path, key: &str, build: impl FnOnce(&Path) -> Result<()>) -> Result<PathBuf> {
    let done = kernels.join(key);
    if done.is_dir() {
        return Ok(done);
    }
    crate::sys::trusted::ensure_dir(kernels).context("the kernel cache")?;
    let lock_path = kernels.join(format!(".{key}.lock"));
    let _lock = lock(&lock_path)?;
    if done.is_dir() {
        // Another fslab built it while we waited for the lock.
        return Ok(done);
    }
    // Under the lock, any temporary directory of this key is a dead builder's.
    let prefix = format!(".{key}.tmp-");
    for stale in fs::read_dir(kernels).into_iter().flatten().flatten() {
        if stale.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = fs::remove_dir_all(stale.path());
        }
    }
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let tmp = kernels.join(format!("{prefix}{}-{nanos:x}", std::process::id()));
    fs::create_dir(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    if let Err(e) = build(&tmp) {
        let _ = fs::remove_dir_all(&tmp);
        return Err(e);
    }
    fs::rename(&tmp, &done).with_context(|| format!("moving {} to {}", tmp.display(), done.display()))?;
    Ok(done)
}

/// A finished entry of the cache.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CachedEntry {
    /// The directory name: the package's SHA-256, or a staging key.
    pub key: String,
    pub path: PathBuf,
    /// The kernel release of its image, when it holds one.
    pub release: Option<String>,
    /// The package it was unpacked from (entries made before fslab kept this say nothing).
    pub package: Option<super::EntryInfo>,
    /// Bytes on disk (symlinks not followed).
    pub bytes: u64,
}

/// Every finished entry under `<cache>/kernels`, by release.
pub fn entries(cache: &Path) -> Result<Vec<CachedEntry>> {
    let kernels = kernels_dir(cache);
    let Ok(dir) = fs::read_dir(&kernels) else { return Ok(Vec::new()) };
    let mut found = Vec::new();
    for e in dir.flatten() {
        let key = e.file_name().to_string_lossy().into_owned();
        if key.starts_with('.') || !e.path().is_dir() {
            continue;
        }
        let path = e.path();
        let release = fs::read_dir(path.join("boot"))
            .into_iter()
            .flatten()
            .flatten()
            .find(|b| b.file_name().to_string_lossy().starts_with("vmlinuz-"))
            .and_then(|b| super::bzimage::read_release(&b.path()).ok());
        let package = fs::read_to_string(path.join(super::ENTRY_INFO))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .or_else(|| built_info(&path));
        found.push(CachedEntry { bytes: disk_usage(&path), key, path, release, package });
    }
    found.sort_by(|a, b| a.release.cmp(&b.release).then_with(|| a.key.cmp(&b.key)));
    Ok(found)
}

/// What a built kernel's entry says about its build, shaped like a package's.
fn built_info(entry: &Path) -> Option<super::EntryInfo> {
    let text = fs::read_to_string(entry.join(super::build::BUILD_INFO)).ok()?;
    let b: super::build::KernelBuild = serde_json::from_str(&text).ok()?;
    Some(super::EntryInfo {
        package: format!("built: {}", b.shown()),
        version: b.package.as_ref().map_or_else(|| b.version.clone(), |p| p.version.clone()),
        suite: b.package.map(|p| p.suite),
    })
}

/// Bytes used by `path` and everything under it (links counted, not followed).
pub fn disk_usage(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = fs::symlink_metadata(path) else { return 0 };
    let own = meta.blocks() * 512;
    if !meta.is_dir() {
        return own;
    }
    own + fs::read_dir(path).into_iter().flatten().flatten().map(|e| disk_usage(&e.path())).sum::<u64>()
}

/// Remove the entry `key`: renamed out of sight first (as a dead builder's
/// temporary directory, see [`entry`]) so nobody sees it half deleted.
pub fn remove(cache: &Path, key: &str) -> Result<()> {
    let kernels = kernels_dir(cache);
    let _lock = lock(&kernels.join(format!(".{key}.lock")))?;
    let doomed = kernels.join(format!(".{key}.tmp-prune-{}", std::process::id()));
    fs::rename(kernels.join(key), &doomed).with_context(|| format!("removing kernel cache entry {key}"))?;
    fs::remove_dir_all(&doomed).with_context(|| format!("removing {}", doomed.display()))?;
    Ok(())
}

/// Take the exclusive lock on `path`, waiting for another fslab to finish
/// (and giving up when the user interrupts).
pub(crate) fn lock(path: &Path) -> Result<Flock<File>> {
    let mut file = File::create(path).with_context(|| format!("creating lock file {}", path.display()))?;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(lock),
            Err((back, nix::errno::Errno::EWOULDBLOCK)) => {
                if cancelled() {
                    bail!("interrupted while waiting for another fslab to fill {}", path.display());
                }
                file = back;
                sleep(Duration::from_millis(100));
            }
            Err((_, e)) => return Err(e).with_context(|| format!("locking {}", path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn concurrent_builders_build_once_and_never_expose_a_partial_entry() {
        let dir = tempfile::tempdir().unwrap();
        let kernels = kernels_dir(dir.path());
        let builds = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let kernels = kernels.clone();
                let builds = Arc::clone(&builds);
                std::thread::spawn(move || {
                    entry(&kernels, "k", |tmp| {
                        builds.fetch_add(1, Ordering::SeqCst);
                        fs::write(tmp.join("a"), "1")?;
                        sleep(Duration::from_millis(200));
                        fs::write(tmp.join("b"), "2")?;
                        Ok(())
                    })
                    .unwrap()
                })
            })
            .collect();
        for t in threads {
            let done = t.join().unwrap();
            // Whoever returns sees the whole entry.
            assert_eq!(fs::read_to_string(done.join("b")).unwrap(), "2");
        }
        assert_eq!(builds.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_failed_build_leaves_nothing_and_the_next_one_retries() {
        let dir = tempfile::tempdir().unwrap();
        let kernels = kernels_dir(dir.path());
        let err = entry(&kernels, "k", |tmp| {
            fs::write(tmp.join("half"), "x")?;
            bail!("broken package")
        })
        .unwrap_err();
        assert!(err.to_string().contains("broken package"));
        let names: Vec<String> =
            fs::read_dir(&kernels).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(names, vec![".k.lock".to_string()], "only the lock file may remain");
        let done = entry(&kernels, "k", |tmp| Ok(fs::write(tmp.join("ok"), "y")?)).unwrap();
        assert!(done.join("ok").exists());
    }
}
