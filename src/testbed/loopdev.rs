//! Loop devices over image files.

use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use anyhow::{bail, Context, Result};

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
