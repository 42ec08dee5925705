//! A medium served as a raw block device, for `fslab device probe --model`:
//! the same `fslab media-serve` + direct-I/O loop path a testbed's image
//! takes, without the filesystem.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::{loopdev, tuning, workdirs};
use crate::media::evidence::Evidence;
use crate::media::host::MediaServer;
use crate::media::{serve, DeviceSpec};

/// A medium served through fslab's own path, as a user's device would be
/// measured: the `fslab media-serve` FUSE server on a sparse image, a
/// direct-I/O loop device on it (requests up to the server's 1 MiB), no
/// filesystem. Named and marked like a testbed, so `fslab cleanup` finds
/// what a killed probe left; `Drop` tears it down.
pub struct ModelDevice {
    dir: PathBuf,
    server: Option<MediaServer>,
    device: Option<PathBuf>,
}

impl ModelDevice {
    /// Serve `spec` on a fresh `size`-byte image under `workdir`.
    pub fn start(spec: &DeviceSpec, workdir: &Path, size: u64) -> Result<ModelDevice> {
        crate::sys::trusted::ensure_dir(workdir).context("the work directory")?;
        workdirs::record(workdir);
        let (dir, _) = crate::sys::marker::create_marked_dir(workdir)?;
        let mut bed = ModelDevice { dir, server: None, device: None };
        let image = bed.dir.join("image");
        File::create(&image).and_then(|f| f.set_len(size)).with_context(|| format!("creating {}", image.display()))?;
        crate::sys::modules::ensure_loaded("loop")?;
        crate::sys::modules::ensure_loaded("fuse")?;
        let server = MediaServer::start(spec, &image, &bed.dir.join("media"))?;
        // A new account paces replies at the medium's speed.
        server.reset_evidence()?;
        let served = server.image();
        bed.server = Some(server);
        let dev = loopdev::attach(&served)?;
        bed.device = Some(dev.clone());
        let name = crate::sys::blockdev::kernel_name(&dev)?;
        tuning::set_queue(&name, "max_sectors_kb", &(serve::MAX_REQUEST / 1024).to_string())?;
        Ok(bed)
    }

    /// The loop device.
    pub fn path(&self) -> &Path {
        self.device.as_deref().expect("a started model device has a loop device")
    }

    /// What the model went through so far.
    pub fn evidence(&self) -> Result<Evidence> {
        self.server.as_ref().context("the media server is gone")?.evidence()
    }

    /// Detach, stop the server, remove the directory; safe to repeat.
    pub fn stop(&mut self) -> Result<()> {
        if let Some(dev) = &self.device {
            loopdev::detach(dev)?;
            self.device = None;
        }
        if let Some(server) = &mut self.server {
            server.stop()?;
            self.server = None;
        }
        match std::fs::remove_dir_all(&self.dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing {}", self.dir.display()))
            }
            _ => Ok(()),
        }
    }
}

impl Drop for ModelDevice {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            crate::output::diagnostic(&format!("fslab: {e:#} (run `fslab cleanup` to retry)"));
        }
    }
}
