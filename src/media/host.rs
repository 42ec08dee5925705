//! A testbed's media server: the model serving the image through FUSE from
//! a thread of the fslab process that owns the testbed.
//!
//! In-process rather than a separate daemon: a thread cannot outlive
//! fslab, so there is never an orphaned server to find; when fslab is
//! killed, what is left is a FUSE mount with a dead connection (and a loop
//! device on it), named like every testbed leftover, which `fslab cleanup`
//! removes by the marker in its path (loop device first, then the mount).
//! The loop device's I/O is done by kernel workers, so the server thread
//! never waits on the thread that waits on the device.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::evidence::Evidence;
use super::serve::{self, IMAGE_FILE};
use super::DeviceSpec;

pub struct MediaServer {
    pub spec: DeviceSpec,
    /// Where the server is mounted: `<testbed>/media`.
    pub mountpoint: PathBuf,
    session: Option<fuser::BackgroundSession>,
}

impl MediaServer {
    /// Serve `image` as `spec` at `mountpoint` (created here, empty).
    pub fn start(spec: &DeviceSpec, image: &Path, mountpoint: &Path) -> Result<MediaServer> {
        std::fs::create_dir(mountpoint).with_context(|| format!("creating {}", mountpoint.display()))?;
        let session = serve::mount(spec, image, mountpoint)?;
        let server = MediaServer { spec: spec.clone(), mountpoint: mountpoint.to_path_buf(), session: Some(session) };
        // The mount is up when the served file answers.
        std::fs::metadata(server.image())
            .with_context(|| format!("the media server at {} does not answer", mountpoint.display()))?;
        Ok(server)
    }

    /// The served image: what the loop device is attached to.
    pub fn image(&self) -> PathBuf {
        self.mountpoint.join(IMAGE_FILE)
    }

    pub fn evidence(&self) -> Result<Evidence> {
        serve::read_evidence(&self.mountpoint)
    }

    pub fn reset_evidence(&self) -> Result<()> {
        serve::reset_evidence(&self.mountpoint)
    }

    /// Unmount and stop the server; call after the loop device on it is
    /// detached. Safe to call more than once.
    pub fn stop(&mut self) -> Result<()> {
        let Some(session) = self.session.take() else { return Ok(()) };
        if let Err(e) = crate::testbed::mount::unmount(&self.mountpoint) {
            // Keep the handle: dropping it would block on a mount still in use.
            self.session = Some(session);
            return Err(e.context("stopping the media server"));
        }
        session.join().context("media server thread")?;
        Ok(())
    }
}

impl Drop for MediaServer {
    fn drop(&mut self) {
        if self.session.is_some() {
            if let Err(e) = self.stop() {
                crate::output::diagnostic(&format!("fslab: {e:#}"));
                // Last resort so the thread can end: detach the mount lazily.
                let _ = nix::mount::umount2(&self.mountpoint, nix::mount::MntFlags::MNT_DETACH);
                if let Some(session) = self.session.take() {
                    let _ = session.join();
                }
            }
        }
    }
}
