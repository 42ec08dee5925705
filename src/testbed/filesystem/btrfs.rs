//! btrfs: mkfs.btrfs on a block device; tunables in `/sys/fs/btrfs/<uuid>`;
//! allocation counters snapshotted around runs; the scanned device is
//! forgotten before it is detached.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::{Filesystem, Medium};
use crate::sys::exec::run_tool;

pub struct Btrfs;

impl Filesystem for Btrfs {
    fn name(&self) -> &'static str {
        "btrfs"
    }

    fn medium(&self) -> Medium {
        Medium::Block
    }

    fn about(&self) -> &'static str {
        "mkfs.btrfs on a loop device (or --device); `mkfs`, `mount` (e.g. compress=zstd), `sysfs`"
    }

    fn mkfs(&self) -> Option<(&'static str, &'static [&'static str])> {
        Some(("mkfs.btrfs", &["-f", "-q"]))
    }

    /// btrfs keys its sysfs directory by filesystem UUID; find the one whose
    /// `devices/` lists our device.
    fn sysfs_dir(&self, device: &str, mountpoint: &Path) -> Result<PathBuf> {
        for entry in std::fs::read_dir("/sys/fs/btrfs").context("reading /sys/fs/btrfs")?.flatten() {
            if entry.path().join("devices").join(device).exists() {
                return Ok(entry.path());
            }
        }
        bail!("no /sys/fs/btrfs entry for {device} (mounted at {})", mountpoint.display())
    }

    /// btrfs keeps scanned devices registered; let go of ours.
    fn release(&self, device: &Path) {
        if let Some(d) = device.to_str() {
            let _ = run_tool("btrfs", &["device", "scan", "--forget", d]);
        }
    }
}
