//! ext4: mkfs.ext4 on a block device; tunables in `/sys/fs/ext4/<dev>`;
//! effective options also in `/proc/fs/ext4/<dev>/options`; allocator
//! internals (`mb_structs_summary`, `mb_groups`) snapshotted around runs.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::{Filesystem, Medium};

pub struct Ext4;

impl Filesystem for Ext4 {
    fn name(&self) -> &'static str {
        "ext4"
    }

    fn medium(&self) -> Medium {
        Medium::Block
    }

    fn about(&self) -> &'static str {
        "mkfs.ext4 on a loop device (or --device); `mkfs`, `mount`, `sysfs` (e.g. mb_max_to_scan)"
    }

    fn mkfs(&self) -> Option<(&'static str, &'static [&'static str])> {
        Some(("mkfs.ext4", &["-F", "-q"]))
    }

    fn sysfs_dir(&self, device: &str, _mountpoint: &Path) -> Result<PathBuf> {
        Ok(PathBuf::from(format!("/sys/fs/ext4/{device}")))
    }

    /// `/proc/fs/ext4/<dev>/options`, plus `mb_optimize_scan=N` from
    /// `mb_structs_summary`: the options file prints mb_optimize_scan only
    /// when it is on, and the summary says which allocator scan is in effect.
    fn fs_options(&self, device: &str) -> Option<String> {
        let mut options = std::fs::read_to_string(format!("/proc/fs/ext4/{device}/options")).ok()?;
        let summary = std::fs::read_to_string(format!("/proc/fs/ext4/{device}/mb_structs_summary")).unwrap_or_default();
        let scan = summary.lines().find_map(|l| l.strip_prefix("optimize_scan:")).map(str::trim);
        if let Some(scan) = scan {
            if !options.lines().any(|l| l.starts_with("mb_optimize_scan=")) {
                options.push_str(&format!("mb_optimize_scan={scan}\n"));
            }
        }
        Some(options)
    }
}
