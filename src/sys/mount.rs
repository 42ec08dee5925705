//! Mounting and unmounting through mount(8) and umount(8). Here, below
//! every stage, because a testbed mounts its filesystem and a media server
//! is unmounted by its owner (`media::host`), and `media` sits below
//! `testbed`. What a mount turned out to be is `testbed::mount`'s.

use std::path::Path;
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result};

use super::exec::run_tool;
use super::mountinfo;

/// `mount -t FSTYPE [-o OPTIONS] SOURCE TARGET`, arguments passed as a list.
pub fn mount(fstype: &str, source: &str, target: &Path, options: &str) -> Result<()> {
    let target_str = target.to_str().context("mount point is not UTF-8")?;
    let mut args = vec!["-t", fstype];
    if !options.is_empty() {
        args.extend(["-o", options]);
    }
    args.extend([source, target_str]);
    run_tool("mount", &args).map(drop)
}

/// Unmount, retrying while the filesystem is briefly busy; nothing to do
/// when nothing is mounted at `target`.
pub fn unmount(target: &Path) -> Result<()> {
    let target_str = target.to_str().context("mount point is not UTF-8")?;
    let mut last_error = None;
    for attempt in 0..20u64 {
        if !is_mounted(target)? {
            return Ok(());
        }
        match run_tool("umount", &[target_str]) {
            Ok(_) => return Ok(()),
            Err(e) => {
                last_error = Some(e);
                thread::sleep(Duration::from_millis(50 * (attempt + 1).min(10)));
            }
        }
    }
    Err(last_error.unwrap()).context(format!("unmounting {target_str}"))
}

/// Whether something is mounted at `target` (the path as mountinfo writes it).
pub fn is_mounted(target: &Path) -> Result<bool> {
    let text = std::fs::read_to_string(mountinfo::PATH).with_context(|| format!("reading {}", mountinfo::PATH))?;
    let target = target.to_string_lossy();
    Ok(mountinfo::parse_lenient(&text).iter().any(|m| m.mountpoint == target))
}
