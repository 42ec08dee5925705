//! What `fslab kernel prune` may remove from a kernel cache, safely.
//!
//! A cache remembers which stores ran experiments with it
//! ([`record_store`]: the runner notes its store the first time it resolves
//! kernels there), so prune reads every one of them, not only the store it
//! is given: an entry, downloaded package or source tree that any of their
//! experiments names is kept. A store that cannot be read (a database
//! server away) keeps everything it might need: then only what no run has
//! used for `--unused-for` is removed. Prune says what it would remove
//! unless told to remove (`--yes`).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use serde::Serialize;

use super::{build, cache, debian::Archive};

/// The file in a cache listing the stores that used it, one per line.
const STORES_FILE: &str = ".fslab-stores";

/// Note that `store` (as its location prints, passwords hidden) ran an
/// experiment with kernels of `cache` (best effort: a failure to note it
/// only makes a later prune read one store fewer, which `--db` makes up).
pub fn record_store(cache: &Path, store: &str) {
    let file = cache.join(STORES_FILE);
    let _ = (|| -> Result<()> {
        let _lock = cache::lock_for(&cache.join(".fslab-stores.lock"), "noting a store")?;
        let mut known = stores(cache);
        if known.iter().any(|s| s == store) {
            return Ok(());
        }
        known.push(store.to_string());
        crate::sys::trusted::write_replacing(&file, (known.join("\n") + "\n").as_bytes())?;
        Ok(())
    })();
}

/// The stores that ran experiments with `cache`.
pub fn stores(cache: &Path) -> Vec<String> {
    fs::read_to_string(cache.join(STORES_FILE))
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// Forget a store that no longer exists (an SQLite file deleted).
pub fn forget_store(cache: &Path, store: &str) {
    let _ = (|| -> Result<()> {
        let _lock = cache::lock_for(&cache.join(".fslab-stores.lock"), "forgetting a store")?;
        let known: Vec<String> = stores(cache).into_iter().filter(|s| s != store).collect();
        crate::sys::trusted::write_replacing(&cache.join(STORES_FILE), (known.join("\n") + "\n").as_bytes())?;
        Ok(())
    })();
}

/// What the stores need of a cache.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Needs {
    /// Names (cache entry keys, source tree keys, package hashes) some
    /// stored experiment needs.
    pub names: BTreeSet<String>,
    /// Stored documents of experiments from before kernels recorded their
    /// kind: anything named in them is kept.
    #[serde(skip)]
    pub legacy_text: String,
    /// Stores read, with how many experiments each holds.
    pub read: Vec<(String, usize)>,
    /// Stores that could not be read, and why: everything is kept for them.
    pub unreadable: Vec<(String, String)>,
}

impl Needs {
    /// Does some store need `name`? (Every store that could not be read might.)
    pub fn needs(&self, name: &str) -> bool {
        !self.unreadable.is_empty() || self.names.contains(name) || self.legacy_text.contains(name)
    }

    /// A path some store names, as the cache entry (or source tree) it lies in.
    pub fn add_path(&mut self, path: &Path) {
        let mut parts = path.components().map(|c| c.as_os_str().to_string_lossy().into_owned());
        while let Some(part) = parts.next() {
            if part == "kernels" {
                if let Some(key) = parts.next() {
                    self.names.insert(key);
                }
                return;
            }
        }
    }
}

/// One thing prune removes (or would).
#[derive(Clone, Debug, Serialize)]
pub struct Pruned {
    pub kind: PrunedKind,
    /// A cache entry's key, a package's path, a source tree's key.
    pub name: String,
    pub release: Option<String>,
    pub bytes: u64,
    /// Why: no store needs it, or (needed, but) unused for longer than asked.
    pub why: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PrunedKind {
    /// An unpacked or built kernel of the cache.
    Kernel,
    /// A downloaded `.deb`.
    Package,
    /// A source tree and its build directories.
    SourceTree,
}

/// What prune found, and did.
#[derive(Clone, Debug, Serialize)]
pub struct Pruning {
    /// Nothing was removed: it says what it would remove.
    pub dry_run: bool,
    pub removed: Vec<Pruned>,
    pub freed_bytes: u64,
    /// Cache entries kept because a store needs them (or might).
    pub kept: usize,
    pub needs: Needs,
}

fn unused_longer(last: Option<SystemTime>, unused_for: Option<Duration>) -> bool {
    match (last, unused_for) {
        (Some(t), Some(limit)) => t.elapsed().is_ok_and(|age| age > limit),
        _ => false,
    }
}

/// What to remove from `cache`, given what the stores need; removed when `remove`.
pub fn prune(cache_dir: &Path, needs: Needs, unused_for: Option<Duration>, remove: bool) -> Result<Pruning> {
    let kernels = cache::kernels_dir(cache_dir);
    let limit = unused_for.map(|d| format!("not used for {}", humantime::format_duration(d)));
    let why_removed = |needed: bool| -> String {
        if needed {
            limit.clone().unwrap_or_default()
        } else {
            "no store needs it".to_string()
        }
    };
    let mut removed = Vec::new();
    let mut kept_names: BTreeSet<String> = BTreeSet::new();
    let entries = cache::entries(cache_dir)?;
    for e in &entries {
        let needed = needs.needs(&e.key);
        if needed && !unused_longer(cache::last_used(&kernels, &e.key), unused_for) {
            kept_names.insert(e.key.clone());
            continue;
        }
        if remove {
            cache::remove(cache_dir, &e.key)?;
        }
        removed.push(Pruned {
            kind: PrunedKind::Kernel,
            name: e.key.clone(),
            release: e.release.clone(),
            bytes: e.bytes,
            why: why_removed(needed),
        });
    }
    // A downloaded package goes with its unpacked entry (keyed by its
    // SHA-256), unless a store needs it itself (a source package).
    for deb in Archive::at(cache_dir).downloaded() {
        let sha = super::sha256_file(&deb)?;
        if kept_names.contains(&sha) {
            continue;
        }
        let needed = needs.needs(&sha);
        let last = fs::metadata(&deb).and_then(|m| m.accessed()).ok();
        if needed && !unused_longer(last, unused_for) {
            continue;
        }
        let bytes = cache::disk_usage(&deb);
        if remove {
            fs::remove_file(&deb).with_context(|| format!("removing {}", deb.display()))?;
        }
        removed.push(Pruned {
            kind: PrunedKind::Package,
            name: deb.display().to_string(),
            release: None,
            bytes,
            why: why_removed(needed),
        });
    }
    // Source trees and their object directories (1-2 GB each).
    for dirs in build::build_dirs(cache_dir) {
        let needed = needs.needs(&dirs.key);
        let last = dirs.paths.iter().filter_map(|p| fs::metadata(p).and_then(|m| m.modified()).ok()).max();
        if needed && !unused_longer(last, unused_for) {
            continue;
        }
        if remove {
            build::remove_build_dirs(cache_dir, &dirs)?;
        }
        removed.push(Pruned {
            kind: PrunedKind::SourceTree,
            name: dirs.key.clone(),
            release: None,
            bytes: dirs.bytes,
            why: why_removed(needed),
        });
    }
    let freed_bytes = removed.iter().map(|p| p.bytes).sum();
    Ok(Pruning { dry_run: !remove, removed, freed_bytes, kept: kept_names.len(), needs })
}

/// The SQLite file a store's printed location names, if it is one.
pub fn sqlite_file(store: &str) -> Option<PathBuf> {
    (!store.starts_with("postgres://") && !store.starts_with("postgresql://")).then(|| PathBuf::from(store))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_are_noted_once_and_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        record_store(dir.path(), "/a/fslab.db");
        record_store(dir.path(), "postgres://me@db/fslab");
        record_store(dir.path(), "/a/fslab.db");
        assert_eq!(stores(dir.path()), ["/a/fslab.db", "postgres://me@db/fslab"]);
        forget_store(dir.path(), "/a/fslab.db");
        assert_eq!(stores(dir.path()), ["postgres://me@db/fslab"]);
    }

    #[test]
    fn paths_name_the_entry_they_lie_in_and_an_unreadable_store_keeps_everything() {
        let mut needs = Needs::default();
        needs.add_path(Path::new("/var/tmp/fslab/cache/kernels/abc123/boot/config-6.1"));
        needs.add_path(Path::new("/boot/vmlinuz"));
        assert_eq!(needs.names.iter().collect::<Vec<_>>(), ["abc123"]);
        assert!(needs.needs("abc123") && !needs.needs("def"));
        needs.unreadable.push(("postgres://db/x".into(), "refused".into()));
        assert!(needs.needs("def"));
    }
}
