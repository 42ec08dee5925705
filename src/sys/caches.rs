//! The kernel's caches, for cold-cache runs.

use anyhow::{Context, Result};

/// Write back dirty data, then drop page cache, dentries and inodes.
pub fn drop_caches() -> Result<()> {
    nix::unistd::sync();
    std::fs::write("/proc/sys/vm/drop_caches", "3").context("dropping caches (/proc/sys/vm/drop_caches)")
}
