//! Filesystem-internal snapshots taken before and after a measured run.
//!
//! Each filesystem exposes some allocator / journal state without debugfs:
//!
//! * ext4: `/proc/fs/ext4/<dev>/mb_structs_summary` (both the 5.13–6.0
//!   `fragment_size_tree` layout and the 6.1+ `avg_fragment_size_lists`
//!   layout) and a summary of `/proc/fs/ext4/<dev>/mb_groups`.
//! * XFS: the per-mount `/sys/fs/xfs/<dev>/stats/stats`, parsed by line name.
//! * btrfs: `/sys/fs/btrfs/<uuid>/allocation/*` space counters and
//!   `commit_stats`.
//!
//! [`snapshot`] reads the live files, [`delta`] subtracts two snapshots and
//! [`FsDelta::metrics`] turns a delta into a few headline [`Metric`]s.
//!
//! Parsers never panic on malformed input: they return a [`ParseError`]
//! naming the file and the 1-based line.

pub mod btrfs;
pub mod ext4;
pub mod xfs;

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::metric::Metric;

/// A malformed line (or file) in one of the parsed kernel files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Path (or label) of the file that was being parsed.
    pub file: String,
    /// 1-based line number; 0 when the problem concerns the whole file.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        }
    }
}

impl std::error::Error for ParseError {}

pub(crate) fn perr(file: &str, line: usize, message: impl Into<String>) -> ParseError {
    ParseError { file: file.to_string(), line, message: message.into() }
}

/// Parse an unsigned decimal counter, reporting the file and line on failure.
pub(crate) fn parse_u64(tok: &str, file: &str, line: usize, what: &str) -> Result<u64, ParseError> {
    tok.trim()
        .parse::<u64>()
        .map_err(|_| perr(file, line, format!("{what}: expected an unsigned integer, found {tok:?}")))
}

/// `after - before` without overflow, saturating at the i64 range.
pub(crate) fn sub(after: u64, before: u64) -> i64 {
    let d = after as i128 - before as i128;
    d.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// Element-wise `after - before`; a missing element counts as 0.
pub(crate) fn sub_vec(after: &[u64], before: &[u64]) -> Vec<i64> {
    let n = after.len().max(before.len());
    (0..n).map(|i| sub(after.get(i).copied().unwrap_or(0), before.get(i).copied().unwrap_or(0))).collect()
}

pub(crate) fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))
}

/// One filesystem-internal snapshot of a mounted filesystem.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FsSnapshot {
    pub fstype: String,
    /// Kernel name of the block device (`loop0`, `mmcblk1p2`, `dm-3`).
    pub device: String,
    pub mountpoint: PathBuf,
    pub data: FsData,
}

/// Filesystem-specific content of a snapshot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FsData {
    Ext4(ext4::Ext4Snapshot),
    Xfs(xfs::XfsSnapshot),
    Btrfs(btrfs::BtrfsSnapshot),
    /// Nothing is collected for this filesystem type.
    Unsupported {
        reason: String,
    },
}

/// Where the kernel's proc and sys filesystems are (tests point these at fixture trees).
#[derive(Clone, Debug)]
pub struct Roots {
    pub proc: PathBuf,
    pub sys: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Roots { proc: PathBuf::from("/proc"), sys: PathBuf::from("/sys") }
    }
}

/// Snapshot the live filesystem-internal state of a mounted filesystem.
///
/// `device_kernel_name` is the block device's kernel name (no `/dev/`).
/// Unknown filesystem types give `FsData::Unsupported`, not an error.
/// Errors: a file that should exist cannot be read or is malformed.
pub fn snapshot(fstype: &str, device_kernel_name: &str, mountpoint: &Path) -> Result<FsSnapshot> {
    snapshot_with_roots(&Roots::default(), fstype, device_kernel_name, mountpoint)
}

/// [`snapshot`] with the proc/sys roots given explicitly.
pub fn snapshot_with_roots(
    roots: &Roots,
    fstype: &str,
    device_kernel_name: &str,
    mountpoint: &Path,
) -> Result<FsSnapshot> {
    let dev = device_kernel_name.trim_start_matches("/dev/");
    let data = match fstype {
        "ext4" | "ext3" | "ext2" => FsData::Ext4(ext4::read_dir(&roots.proc.join("fs/ext4").join(dev))?),
        "xfs" => FsData::Xfs(xfs::read_mount(&roots.sys.join("fs/xfs").join(dev))?),
        "btrfs" => {
            let dir = btrfs::find_fs_dir(&roots.sys.join("fs/btrfs"), dev)?;
            FsData::Btrfs(btrfs::read_dir(&dir)?)
        }
        other => FsData::Unsupported { reason: format!("no filesystem-internal snapshot for {other}") },
    };
    Ok(FsSnapshot { fstype: fstype.to_string(), device: dev.to_string(), mountpoint: mountpoint.to_path_buf(), data })
}

/// Change between two snapshots of the same filesystem.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FsDelta {
    pub fstype: String,
    pub device: String,
    pub data: FsDeltaData,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FsDeltaData {
    Ext4(ext4::Ext4Delta),
    Xfs(xfs::XfsDelta),
    Btrfs(btrfs::BtrfsDelta),
    /// The snapshots cannot be compared (unsupported fs, or different kinds).
    Unavailable {
        reason: String,
    },
}

/// `after - before`.
pub fn delta(before: &FsSnapshot, after: &FsSnapshot) -> FsDelta {
    let data = match (&before.data, &after.data) {
        (FsData::Ext4(b), FsData::Ext4(a)) => FsDeltaData::Ext4(ext4::delta(b, a)),
        (FsData::Xfs(b), FsData::Xfs(a)) => FsDeltaData::Xfs(xfs::delta(b, a)),
        (FsData::Btrfs(b), FsData::Btrfs(a)) => FsDeltaData::Btrfs(btrfs::delta(b, a)),
        (FsData::Unsupported { reason }, _) | (_, FsData::Unsupported { reason }) => {
            FsDeltaData::Unavailable { reason: reason.clone() }
        }
        _ => FsDeltaData::Unavailable {
            reason: format!("snapshots of different filesystems ({} vs {})", before.fstype, after.fstype),
        },
    };
    FsDelta { fstype: after.fstype.clone(), device: after.device.clone(), data }
}

impl FsDelta {
    /// A few headline numbers; names are prefixed with the filesystem
    /// (`ext4.`, `xfs.`, `btrfs.`). Empty when nothing is comparable.
    pub fn metrics(&self) -> Vec<Metric> {
        match &self.data {
            FsDeltaData::Ext4(d) => d.metrics(),
            FsDeltaData::Xfs(d) => d.metrics(),
            FsDeltaData::Btrfs(d) => d.metrics(),
            FsDeltaData::Unavailable { .. } => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_error_names_file_and_line() {
        assert_eq!(perr("/proc/x", 7, "bad").to_string(), "/proc/x:7: bad");
        assert_eq!(perr("/proc/x", 0, "empty").to_string(), "/proc/x: empty");
        let e = parse_u64("12a", "f", 3, "count").unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("f", 3));
    }

    #[test]
    fn subtraction_saturates_and_pads() {
        assert_eq!(sub(5, 7), -2);
        assert_eq!(sub(u64::MAX, 0), i64::MAX);
        assert_eq!(sub(0, u64::MAX), i64::MIN);
        assert_eq!(sub_vec(&[5, 1], &[2]), vec![3, 1]);
        assert_eq!(sub_vec(&[1], &[0, 4]), vec![1, -4]);
    }

    #[test]
    fn unsupported_fs_is_not_an_error() {
        let roots = Roots { proc: PathBuf::from("/nonexistent"), sys: PathBuf::from("/nonexistent") };
        let s = snapshot_with_roots(&roots, "vfat", "sdb1", Path::new("/mnt")).unwrap();
        assert!(matches!(s.data, FsData::Unsupported { .. }));
        assert!(delta(&s, &s).metrics().is_empty());
        assert!(snapshot_with_roots(&roots, "ext4", "sdb1", Path::new("/mnt")).is_err());
    }

    #[test]
    fn ext4_summary_tabs_optional_and_sections_strict() {
        let tabbed = "optimize_scan: 1\nmax_free_order_lists:\n\tlist_order_0_groups: 2\navg_fragment_size_lists:\n\tlist_order_0_groups: 3\n";
        let plain = tabbed.replace('\t', "");
        let a = ext4::parse_mb_structs_summary(tabbed, "t").unwrap();
        assert_eq!(a, ext4::parse_mb_structs_summary(&plain, "p").unwrap());
        assert_eq!(a.avg_fragment_size_lists, Some(vec![3]));
        // tree_* outside the tree section is an error with its line.
        let e = ext4::parse_mb_structs_summary("max_free_order_lists:\ntree_min: 1\n", "x").unwrap_err();
        assert_eq!(e.line, 2);
    }

    #[test]
    fn xfs_stats_reject_non_names() {
        let e = xfs::parse_stats("extent_alloc 1 2\n42 1 2\n", "s").unwrap_err();
        assert_eq!(e.line, 2);
    }
}
