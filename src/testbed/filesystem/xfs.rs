//! XFS: mkfs.xfs on a block device; tunables in `/sys/fs/xfs/<dev>`;
//! per-mount stats snapshotted around runs.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::{Filesystem, Medium};

pub struct Xfs;

impl Filesystem for Xfs {
    fn name(&self) -> &'static str {
        "xfs"
    }

    fn medium(&self) -> Medium {
        Medium::Block
    }

    fn about(&self) -> &'static str {
        "mkfs.xfs on a loop device (or --device); `mkfs` (e.g. -d agcount=N), `mount`, `sysfs`"
    }

    fn mkfs(&self) -> Option<(&'static str, &'static [&'static str])> {
        Some(("mkfs.xfs", &["-f", "-q"]))
    }

    fn sysfs_dir(&self, device: &str, _mountpoint: &Path) -> Result<PathBuf> {
        Ok(PathBuf::from(format!("/sys/fs/xfs/{device}")))
    }
}
