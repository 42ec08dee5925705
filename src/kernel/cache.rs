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
        mark_used(kernels, key);
        return Ok(done);
    }
    crate::sys::trusted::ensure_dir(kernels).context("the kernel cache")?;
    let lock_path = kernels.join(format!(".{key}.lock"));
    let _lock = lock_for(&lock_path, &format!("filling {}", done.display()))?;
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
    mark_used(kernels, key);
    Ok(done)
}

/// A finished entry of the cache.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CachedEntry {
    /// The directory name: the package's SHA-256, a build's or a staging key.
    pub key: String,
    pub path: PathBuf,
    /// The kernel release of its image, when it holds one.
    pub release: Option<String>,
    /// What the entry holds, as far as it says.
    pub about: EntryAbout,
    /// Bytes on disk (symlinks not followed).
    pub bytes: u64,
}

/// What an entry holds: an unpacked package, a built kernel, a staged root.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct EntryAbout {
    /// `package` (an unpacked `.deb`, from the archive or a file), `built`, `staged`.
    pub kind: String,
    /// The package's name, or how the kernel was built.
    pub what: String,
    /// The package's version, or the built tree's.
    pub version: Option<String>,
    /// The archive suite, for archive packages.
    pub suite: Option<String>,
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
        found.push(CachedEntry { bytes: disk_usage(&path), about: about(&path), key, path, release });
    }
    found.sort_by(|a, b| a.release.cmp(&b.release).then_with(|| a.key.cmp(&b.key)));
    Ok(found)
}

/// What `entry` says of itself (entries made before fslab kept this say nothing).
fn about(entry: &Path) -> EntryAbout {
    if let Some(info) = fs::read_to_string(entry.join(super::ENTRY_INFO))
        .ok()
        .and_then(|t| serde_json::from_str::<super::EntryInfo>(&t).ok())
    {
        return EntryAbout {
            kind: "package".into(),
            what: info.package,
            version: Some(info.version),
            suite: info.suite,
        };
    }
    if let Some(b) = fs::read_to_string(entry.join(super::build::BUILD_INFO))
        .ok()
        .and_then(|t| serde_json::from_str::<super::build::KernelBuild>(&t).ok())
    {
        return EntryAbout {
            kind: "built".into(),
            what: b.shown(),
            version: Some(b.package.as_ref().map_or_else(|| b.version.clone(), |p| p.version.clone())),
            suite: b.package.map(|p| p.suite),
        };
    }
    EntryAbout { kind: "staged".into(), ..EntryAbout::default() }
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
    let _lock = lock_for(&kernels.join(format!(".{key}.lock")), &format!("removing {key}"))?;
    let doomed = kernels.join(format!(".{key}.tmp-prune-{}", std::process::id()));
    fs::rename(kernels.join(key), &doomed).with_context(|| format!("removing kernel cache entry {key}"))?;
    fs::remove_dir_all(&doomed).with_context(|| format!("removing {}", doomed.display()))?;
    let _ = fs::remove_file(used_stamp(&kernels, key));
    Ok(())
}

/// An exclusive lock held on a file; released when dropped.
pub struct Held {
    _lock: Flock<File>,
}

/// How often a wait for a lock is said again.
const WAIT_REMINDER: Duration = Duration::from_secs(60);

/// Take the exclusive lock on `path`, waiting for another fslab to finish
/// (and giving up when the user interrupts). `what` says what this process
/// does under it: the lock file keeps it with the holder's pid, so a
/// process that has to wait says what it waits for and who holds it,
/// then again every minute.
pub fn lock_for(path: &Path, what: &str) -> Result<Held> {
    use std::io::{Seek, Write};
    let open = || {
        fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("opening lock file {}", path.display()))
    };
    let mut file = open()?;
    let started = std::time::Instant::now();
    let mut said: Option<std::time::Instant> = None;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(mut lock) => {
                if let Some(at) = said {
                    let _ = at;
                    crate::output::diagnostic(&format!(
                        "fslab: got {} after {}",
                        path.display(),
                        crate::human::duration_s(started.elapsed().as_secs_f64())
                    ));
                }
                // Who holds it, for whoever waits next.
                let _ = lock.set_len(0);
                let _ = lock.rewind();
                let _ = writeln!(lock, "pid {}: {what}", std::process::id());
                return Ok(Held { _lock: lock });
            }
            Err((back, nix::errno::Errno::EWOULDBLOCK)) => {
                if cancelled() {
                    bail!("interrupted while waiting for {} ({what})", path.display());
                }
                let due = match said {
                    None => started.elapsed() >= Duration::from_secs(1),
                    Some(at) => at.elapsed() >= WAIT_REMINDER,
                };
                if due {
                    let holder = fs::read_to_string(path).unwrap_or_default();
                    let holder = holder.trim();
                    crate::output::diagnostic(&format!(
                        "fslab: waiting {} for {} to be free ({what}); held by {}",
                        crate::human::duration_s(started.elapsed().as_secs_f64()),
                        path.display(),
                        if holder.is_empty() { "another fslab" } else { holder }
                    ));
                    said = Some(std::time::Instant::now());
                }
                file = back;
                sleep(Duration::from_millis(100));
            }
            Err((_, e)) => return Err(e).with_context(|| format!("locking {}", path.display())),
        }
    }
}

/// [`lock_for`] with what the path says.
pub(crate) fn lock(path: &Path) -> Result<Held> {
    lock_for(path, &format!("using {}", path.display()))
}

/// The file beside entry `key` of `dir` whose time says when it was last
/// used (`fslab kernel prune --unused-for`); beside, not in it, so an entry
/// (a clone, say) holds only what it holds.
fn used_stamp(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!(".{key}.used"))
}

/// Note that entry `key` of `dir` was used now (best effort: a read-only
/// cache still works).
pub fn mark_used(dir: &Path, key: &str) {
    let _ = fs::write(used_stamp(dir, key), "");
}

/// When entry `key` of `dir` was last used (or made).
pub fn last_used(dir: &Path, key: &str) -> Option<SystemTime> {
    fs::metadata(used_stamp(dir, key)).or_else(|_| fs::metadata(dir.join(key))).and_then(|m| m.modified()).ok()
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
