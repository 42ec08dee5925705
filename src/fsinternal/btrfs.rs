//! btrfs: what sysfs exposes without debugfs, under `/sys/fs/btrfs/<uuid>/`:
//!
//! * `allocation/{data,metadata,system}/*`: space-info counters
//!   (`bytes_used`, `total_bytes`, `disk_used`, `disk_total`, `bytes_pinned`,
//!   …) and the per-profile subdirectories (`single/used_bytes`, `dup/…`);
//!   `allocation/global_rsv_*` at the top.
//! * `commit_stats` (5.18+): `commits`, `cur_commit_ms`, `last_commit_ms`,
//!   `max_commit_ms`, `total_commit_ms`.
//!
//! The filesystem directory is found by its device:
//! `/sys/fs/btrfs/<uuid>/devices/<dev>`.
//!
//! Files holding one number are stored under their name; files of
//! `name value` lines (e.g. `size_classes`) as `file.name`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::{parse_u64, perr, read_text, sub, Found, Internals, Mounted, ParseError, Roots};
use crate::metric::Metric;
use crate::sys::exec;

/// Find `/sys/fs/btrfs/<uuid>` whose `devices/` holds `dev`.
pub fn find_fs_dir(btrfs_root: &Path, dev: &str) -> Result<PathBuf> {
    let entries = std::fs::read_dir(btrfs_root)
        .map_err(|e| anyhow::anyhow!("reading {}: {e} (btrfs module not loaded?)", btrfs_root.display()))?;
    for entry in entries.flatten() {
        let p = entry.path();
        if p.join("devices").join(dev).exists() {
            return Ok(p);
        }
    }
    anyhow::bail!("no {}/*/devices/{dev}: is {dev} a mounted btrfs device?", btrfs_root.display())
}

/// Parse a sysfs counter file: one number, or `name value` lines.
/// Returns (suffix, value) pairs; the suffix is empty for a single number.
pub fn parse_counter_file(text: &str, file: &str) -> Result<Vec<(String, u64)>, ParseError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(perr(file, 0, "empty file"));
    }
    if !trimmed.contains(char::is_whitespace) {
        return Ok(vec![(String::new(), parse_u64(trimmed, file, 1, "value")?)]);
    }
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let toks: Vec<&str> = raw.split_whitespace().collect();
        match toks.as_slice() {
            [] => continue,
            [name, value] => out.push((name.to_string(), parse_u64(value, file, ln, name)?)),
            _ => return Err(perr(file, ln, format!("expected `name value`, found {:?}", raw.trim()))),
        }
    }
    Ok(out)
}

/// Parse `commit_stats` (`name value` lines).
pub fn parse_commit_stats(text: &str, file: &str) -> Result<BTreeMap<String, u64>, ParseError> {
    let mut m = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let toks: Vec<&str> = raw.split_whitespace().collect();
        match toks.as_slice() {
            [] => continue,
            [name, value] => {
                if m.insert(name.to_string(), parse_u64(value, file, ln, name)?).is_some() {
                    return Err(perr(file, ln, format!("duplicate {name}")));
                }
            }
            _ => return Err(perr(file, ln, format!("expected `name value`, found {:?}", raw.trim()))),
        }
    }
    if m.is_empty() {
        return Err(perr(file, 0, "empty file"));
    }
    Ok(m)
}

/// btrfs part of a snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BtrfsSnapshot {
    pub uuid: String,
    /// `allocation/` top-level counters (`global_rsv_size`, `global_rsv_reserved`).
    pub global: BTreeMap<String, u64>,
    /// Space kind (`data`, `metadata`, `system`, …) → counter → value.
    pub allocation: BTreeMap<String, BTreeMap<String, u64>>,
    pub commit_stats: Option<BTreeMap<String, u64>>,
    /// Files that could not be read (permissions) and were skipped.
    #[serde(default)]
    pub notes: Vec<String>,
}

impl BtrfsSnapshot {
    pub fn get(&self, kind: &str, counter: &str) -> Option<u64> {
        self.allocation.get(kind).and_then(|m| m.get(counter)).copied()
    }
}

fn read_counters(
    dir: &Path,
    prefix: &str,
    out: &mut BTreeMap<String, u64>,
    notes: &mut Vec<String>,
    depth: u32,
) -> Result<()> {
    for p in sorted_entries(dir)? {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if p.is_dir() {
            if depth > 0 {
                read_counters(&p, &format!("{prefix}{name}/"), out, notes, depth - 1)?;
            }
            continue;
        }
        let text = match std::fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) => {
                notes.push(format!("skipped {}: {e}", p.display()));
                continue;
            }
        };
        for (suffix, v) in parse_counter_file(&text, &p.display().to_string())? {
            let key = if suffix.is_empty() { format!("{prefix}{name}") } else { format!("{prefix}{name}.{suffix}") };
            out.insert(key, v);
        }
    }
    Ok(())
}

/// The paths in `dir`, sorted (so snapshots list counters in one order).
fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    Ok(entries)
}

/// Read a `/sys/fs/btrfs/<uuid>` directory (or a fixture copy of it).
pub fn read_dir(dir: &Path) -> Result<BtrfsSnapshot> {
    let uuid = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let alloc = dir.join("allocation");
    let mut notes = Vec::new();
    let mut global = BTreeMap::new();
    let mut allocation = BTreeMap::new();
    for p in sorted_entries(&alloc)? {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if p.is_dir() {
            let mut m = BTreeMap::new();
            read_counters(&p, "", &mut m, &mut notes, 1)?;
            allocation.insert(name, m);
        } else {
            let text = read_text(&p)?;
            for (suffix, v) in parse_counter_file(&text, &p.display().to_string())? {
                global.insert(if suffix.is_empty() { name.clone() } else { format!("{name}.{suffix}") }, v);
            }
        }
    }
    let cs = dir.join("commit_stats");
    let commit_stats = if cs.exists() {
        Some(parse_commit_stats(&read_text(&cs)?, &cs.display().to_string())?)
    } else {
        notes.push(format!("{} absent (kernel older than 5.18)", cs.display()));
        None
    };
    Ok(BtrfsSnapshot { uuid, global, allocation, commit_stats, notes })
}

/// after − before for every counter present in both snapshots.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BtrfsDelta {
    pub allocation: BTreeMap<String, BTreeMap<String, i64>>,
    pub commit_stats: Option<BTreeMap<String, i64>>,
    /// `commit_stats` after the run (max/last are not meaningful as deltas).
    pub commit_stats_after: Option<BTreeMap<String, u64>>,
}

fn sub_map(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> BTreeMap<String, i64> {
    a.iter().filter_map(|(k, &av)| b.get(k).map(|&bv| (k.clone(), sub(av, bv)))).collect()
}

pub fn delta(before: &BtrfsSnapshot, after: &BtrfsSnapshot) -> BtrfsDelta {
    let allocation = after
        .allocation
        .iter()
        .filter_map(|(kind, am)| before.allocation.get(kind).map(|bm| (kind.clone(), sub_map(am, bm))))
        .collect();
    let commit_stats = match (&before.commit_stats, &after.commit_stats) {
        (Some(b), Some(a)) => Some(sub_map(a, b)),
        _ => None,
    };
    BtrfsDelta { allocation, commit_stats, commit_stats_after: after.commit_stats.clone() }
}

impl BtrfsDelta {
    pub fn get(&self, kind: &str, counter: &str) -> Option<i64> {
        self.allocation.get(kind).and_then(|m| m.get(counter)).copied()
    }

    /// Metrics (all lower is better):
    /// `btrfs.data_bytes_used_delta`, `btrfs.metadata_bytes_used_delta`,
    /// `btrfs.data_total_bytes_delta` and `btrfs.metadata_total_bytes_delta`
    /// (chunk space allocated), `btrfs.disk_used_delta` (raw bytes, all
    /// kinds and copies), `btrfs.commits`, `btrfs.commit_ms_total`,
    /// `btrfs.commit_ms_max_after`.
    pub fn metrics(&self) -> Vec<Metric> {
        let mut m = Vec::new();
        let mut add = |name: &str, unit: &str, v: Option<i64>| {
            if let Some(v) = v {
                m.push(Metric::lower(name, unit, v as f64));
            }
        };
        add("btrfs.data_bytes_used_delta", "bytes", self.get("data", "bytes_used"));
        add("btrfs.metadata_bytes_used_delta", "bytes", self.get("metadata", "bytes_used"));
        add("btrfs.data_total_bytes_delta", "bytes", self.get("data", "total_bytes"));
        add("btrfs.metadata_total_bytes_delta", "bytes", self.get("metadata", "total_bytes"));
        let disk: Vec<i64> = self.allocation.values().filter_map(|k| k.get("disk_used").copied()).collect();
        add("btrfs.disk_used_delta", "bytes", (!disk.is_empty()).then(|| disk.iter().sum()));
        if let Some(cs) = &self.commit_stats {
            add("btrfs.commits", "count", cs.get("commits").copied());
            add("btrfs.commit_ms_total", "ms", cs.get("total_commit_ms").copied());
        }
        if let Some(cs) = &self.commit_stats_after {
            add("btrfs.commit_ms_max_after", "ms", cs.get("max_commit_ms").map(|&v| v.min(i64::MAX as u64) as i64));
        }
        m
    }
}

/// btrfs: `/sys/fs/btrfs/<uuid>` allocation counters around runs, the
/// superblock as geometry, the doctor's block-group profiles.
pub struct BtrfsInternals;

impl Internals for BtrfsInternals {
    const NAME: &'static str = "btrfs";
    type Snapshot = BtrfsSnapshot;
    type Delta = BtrfsDelta;
    type Facts = BtrfsFacts;

    fn read(roots: &Roots, device: &str) -> Result<BtrfsSnapshot> {
        read_dir(&find_fs_dir(&roots.sys.join("fs/btrfs"), device)?)
    }

    fn delta(before: &BtrfsSnapshot, after: &BtrfsSnapshot) -> BtrfsDelta {
        delta(before, after)
    }

    fn metrics(delta: &BtrfsDelta) -> Vec<Metric> {
        delta.metrics()
    }

    fn geometry(device: &Path) -> Result<String> {
        exec::inspect_tool("btrfs", &["inspect-internal", "dump-super", &device.to_string_lossy()])
    }

    /// Profiles from `btrfs filesystem df` of the mount point (the
    /// superblock does not say which profile the block groups use).
    fn facts(mount: &Mounted, found: &mut Found) -> Option<BtrfsFacts> {
        match exec::run("btrfs", &["filesystem", "df", "-b", mount.mountpoint], exec::DEFAULT_TIMEOUT) {
            Ok(o) if o.success => return Some(parse_btrfs_df(&o.stdout)),
            Ok(o) => found.notes.push(format!(
                "btrfs filesystem df {}: {}",
                mount.mountpoint,
                exec::first_line(&o.stderr).unwrap_or("failed")
            )),
            Err(e) => found.notes.push(format!("btrfs filesystem df: {e}")),
        }
        None
    }
}

/// btrfs block-group profiles (`single`, `dup`, `raid1`, …).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BtrfsFacts {
    pub data_profile: Option<String>,
    pub metadata_profile: Option<String>,
    pub system_profile: Option<String>,
}

/// btrfs profiles from `btrfs filesystem df` text
/// (`Data, single: total=…`).
pub fn parse_btrfs_df(text: &str) -> BtrfsFacts {
    let mut out = BtrfsFacts::default();
    for line in text.lines() {
        let Some((head, _)) = line.split_once(':') else { continue };
        let Some((kind, profile)) = head.split_once(',') else { continue };
        let profile = Some(profile.trim().to_lowercase());
        match kind.trim() {
            "Data" => out.data_profile = profile,
            "Metadata" => out.metadata_profile = profile,
            "System" => out.system_profile = profile,
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn btrfs_geometry() {
        let df = "Data, single: total=8388608, used=0\nSystem, DUP: total=8388608, used=16384\nMetadata, DUP: total=33554432, used=131072\nGlobalReserve, single: total=5767168, used=0\n";
        let b = parse_btrfs_df(df);
        assert_eq!(b.data_profile.as_deref(), Some("single"));
        assert_eq!(b.metadata_profile.as_deref(), Some("dup"));
        assert_eq!(b.system_profile.as_deref(), Some("dup"));
    }
}
