//! Loop devices over image files.

use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::sys::blockdev::DevNum;
use crate::sys::exec::run_tool;

/// Attach `image` to a free loop device with direct I/O (so the host page
/// cache does not hide the device's speed), retrying when another process
/// grabs the same free device between lookup and setup.
pub fn attach(image: &Path) -> Result<PathBuf> {
    attach_with(image, false)
}

/// [`attach`], read-only when `read_only` (`losetup --read-only`): for the
/// images of read-only filesystems, so nothing can write to them.
pub fn attach_with(image: &Path, read_only: bool) -> Result<PathBuf> {
    let image_str = image.to_str().context("image path is not UTF-8")?;
    let mut args = vec!["--find", "--show", "--direct-io=on"];
    if read_only {
        args.push("--read-only");
    }
    args.push(image_str);
    let mut last_error = None;
    for attempt in 0..20u64 {
        match run_tool("losetup", &args) {
            Ok(out) => {
                let dev = out.trim();
                if dev.starts_with("/dev/loop") {
                    return Ok(PathBuf::from(dev));
                }
                bail!("losetup printed no device for {}", image.display());
            }
            Err(e) => {
                last_error = Some(e);
                // Back off a little more each time; parallel attaches collide.
                thread::sleep(Duration::from_millis(20 + attempt * 30 + u64::from(std::process::id() % 17)));
            }
        }
    }
    Err(last_error.unwrap()).context(format!("attaching {} to a loop device", image.display()))
}

/// Detach a loop device and wait until the kernel has really let go.
///
/// When something still holds the device open (a probe after mkfs, a
/// failed mount's last reference), the kernel only marks it for detach on
/// last close and `losetup -d` succeeds at once; so success is judged by
/// the device having no backing file any more.
pub fn detach(device: &Path) -> Result<()> {
    let dev = device.to_str().context("device path is not UTF-8")?;
    let mut last_error = None;
    for attempt in 0..300u64 {
        if backing_file(device).is_none() {
            return Ok(());
        }
        if attempt % 10 == 0 {
            if let Err(e) = run_tool("losetup", &["-d", dev]) {
                last_error = Some(e);
            }
        }
        thread::sleep(Duration::from_millis(50));
    }
    match last_error {
        Some(e) => Err(e).context(format!("detaching {dev}")),
        None => bail!("{dev} is still attached 15 s after detaching (something holds it open)"),
    }
}

/// The backing file of an attached loop device (None when not attached).
pub fn backing_file(device: &Path) -> Option<PathBuf> {
    let name = device.file_name()?.to_str()?;
    let text = std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")).ok()?;
    let path = text.trim();
    (!path.is_empty()).then(|| PathBuf::from(path))
}

/// Every attached loop device with its backing file.
pub fn attached() -> Vec<(PathBuf, PathBuf)> {
    let Ok(entries) = std::fs::read_dir("/sys/block") else { return Vec::new() };
    let mut found: Vec<(PathBuf, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            if !name.starts_with("loop") {
                return None;
            }
            let dev = PathBuf::from(format!("/dev/{name}"));
            backing_file(&dev).map(|b| (dev, b))
        })
        .collect();
    found.sort();
    found
}

/// What the kernel keeps of a loop device's backing file
/// (`LOOP_GET_STATUS64`, which `losetup --list` reads too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backing {
    /// The device of the filesystem the file lies on: `0:N` for a FUSE
    /// mount, whose connection fusectl names by that number.
    pub filesystem: DevNum,
    /// The file's inode on it.
    pub inode: u64,
    /// The path the file was attached by (losetup passes it absolute), cut
    /// by the kernel to [`ATTACHED_AS_MAX`] bytes. Unlike
    /// [`backing_file`], which the kernel derives from the open file each
    /// time it is read, it stays when the file's mount is lazily detached
    /// (`backing_file` then reads `/image`, the path inside the detached mount).
    pub attached_as: String,
}

/// How much of the path a loop device was attached by the kernel keeps
/// (`LO_NAME_SIZE` less its NUL).
pub const ATTACHED_AS_MAX: usize = 63;

nix::ioctl_read_bad!(
    loop_get_status64,
    linux_raw_sys::loop_device::LOOP_GET_STATUS64,
    linux_raw_sys::loop_device::loop_info64
);

/// The backing file of the attached loop device `device`, as the kernel
/// keeps it. Reads no byte of the file (a stopped media server under it
/// cannot block this).
pub fn backing(device: &Path) -> Result<Backing> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(device).with_context(|| format!("opening {}", device.display()))?;
    // SAFETY: loop_info64 is plain integers and byte arrays; all-zero is a valid value.
    let mut info: linux_raw_sys::loop_device::loop_info64 = unsafe { std::mem::zeroed() };
    // SAFETY: the ioctl writes one loop_info64 into `info`, which lives across the call.
    unsafe { loop_get_status64(file.as_raw_fd(), &mut info) }
        .with_context(|| format!("reading the status of {} (LOOP_GET_STATUS64)", device.display()))?;
    let name = &info.lo_file_name;
    let len = name.iter().position(|b| *b == 0).unwrap_or(name.len());
    // The kernel encodes the device number as userspace's `makedev` does
    // (`huge_encode_dev`): libc's `major`/`minor` decode it.
    Ok(Backing {
        filesystem: DevNum { major: libc::major(info.lo_device), minor: libc::minor(info.lo_device) },
        inode: info.lo_inode,
        attached_as: String::from_utf8_lossy(&name[..len]).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    /// What the kernel keeps of the backing file: its filesystem and inode
    /// as `stat` gives them, and the path it was attached by, cut to 63
    /// bytes where it is longer.
    #[test]
    fn backing_names_the_files_filesystem_and_the_path_it_was_attached_by() {
        if !crate::testsupport::root_or_skip("loop devices") {
            return;
        }
        let dir = tempfile::Builder::new().prefix("fslab-loopdev-").tempdir_in("/var/tmp").unwrap();
        let long = dir.path().join("a-name-long-enough-to-take-the-path-past-the-kernels-sixty-three-bytes.img");
        for image in [dir.path().join("i.img"), long] {
            std::fs::write(&image, vec![0u8; 1 << 20]).unwrap();
            let device = attach(&image).unwrap();
            let read = backing(&device);
            detach(&device).unwrap();
            let read = read.unwrap();
            let stat = std::fs::metadata(&image).unwrap();
            assert_eq!(read.filesystem, DevNum { major: libc::major(stat.dev()), minor: libc::minor(stat.dev()) });
            assert_eq!(read.inode, stat.ino());
            let path = image.to_string_lossy();
            assert_eq!(read.attached_as, path[..path.len().min(ATTACHED_AS_MAX)]);
        }
    }
}
