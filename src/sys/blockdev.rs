//! Block device identity: major:minor numbers and kernel names.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::{bail, Context, Result};

/// `major:minor` of a block device node, as cgroup files want it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DevNum {
    pub major: u32,
    pub minor: u32,
}

impl DevNum {
    pub fn of(device: &Path) -> Result<DevNum> {
        let meta = std::fs::metadata(device).with_context(|| format!("stat {}", device.display()))?;
        use std::os::unix::fs::FileTypeExt;
        if !meta.file_type().is_block_device() {
            bail!("{} is not a block device", device.display());
        }
        let rdev = meta.rdev();
        Ok(DevNum { major: libc::major(rdev), minor: libc::minor(rdev) })
    }
}

impl std::fmt::Display for DevNum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

/// Kernel name of a block device (`/dev/loop3` → `loop3`), as used in
/// `/proc/diskstats`, `/sys/block` and `/proc/fs/ext4`.
pub fn kernel_name(device: &Path) -> Result<String> {
    let canonical = std::fs::canonicalize(device).with_context(|| format!("resolving {}", device.display()))?;
    canonical
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_string)
        .with_context(|| format!("{} has no device name", device.display()))
}

/// Size of block device `device` in bytes (`/sys/class/block/<name>/size`
/// counts 512-byte sectors whatever the logical block size).
pub fn size_bytes(device: &Path) -> Result<u64> {
    let name = kernel_name(device)?;
    let path = Path::new("/sys/class/block").join(&name).join("size");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let sectors: u64 = text.trim().parse().with_context(|| format!("{}: not a sector count", path.display()))?;
    Ok(sectors * 512)
}

nix::ioctl_none!(blkflsbuf, 0x12, 97);

/// Write back and drop the page cache of the open block device `device`
/// (`BLKFLSBUF`, as `blockdev --flushbufs`): after its bytes were changed
/// from outside (a VM's host rewrote the disk), reads must come from the disk.
pub fn flush_buffers(device: &std::fs::File) -> Result<()> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: BLKFLSBUF takes no argument; the descriptor is open for the call.
    unsafe { blkflsbuf(device.as_raw_fd()) }.context("BLKFLSBUF")?;
    Ok(())
}
