//! A testbed's media server: `fslab media-serve`, a child process serving
//! the image through FUSE.
//!
//! A separate process, not a thread of fslab: when fslab is SIGKILLed while
//! one of its threads waits on the testbed's device (a `sync` during
//! preparation), a server inside the same process dies with it, but the
//! process cannot finish exiting (its blocked thread waits on a FUSE
//! request only its own dead server could answer) and hangs in D state
//! until the connection is aborted by hand. A child keeps answering; the
//! parent's I/O completes and it exits. The child runs in a process group
//! of its own (a terminal's Ctrl-C does not reach it) and serves until its
//! mount goes away: teardown (or `fslab cleanup`, after detaching the loop
//! device on it) unmounts it, and it exits. Its command line and mount point
//! carry the testbed's marker-named directory.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::evidence::Evidence;
use super::serve::{self, IMAGE_FILE};
use super::DeviceSpec;

/// How long the server may take to mount.
const START_TIMEOUT: Duration = Duration::from_secs(20);

pub struct MediaServer {
    pub spec: DeviceSpec,
    /// Where the server is mounted: `<testbed>/media`.
    pub mountpoint: PathBuf,
    child: Option<Child>,
}

impl std::fmt::Debug for MediaServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaServer")
            .field("spec", &self.spec.to_string())
            .field("mountpoint", &self.mountpoint)
            .finish()
    }
}

/// The fslab executable that serves: `FSLAB_BIN` when set (tests, whose
/// own executable is the test harness), else this one.
fn fslab_bin() -> Result<PathBuf> {
    match std::env::var_os("FSLAB_BIN") {
        Some(path) => Ok(PathBuf::from(path)),
        None => std::env::current_exe().context("finding fslab's own executable for the media server"),
    }
}

impl MediaServer {
    /// Serve `image` as `spec` at `mountpoint` (created here, empty); its
    /// stderr goes to `<mountpoint>.log`.
    pub fn start(spec: &DeviceSpec, image: &Path, mountpoint: &Path) -> Result<MediaServer> {
        std::fs::create_dir(mountpoint).with_context(|| format!("creating {}", mountpoint.display()))?;
        let log_path = mountpoint.with_extension("log");
        let log = std::fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
        let mut cmd = Command::new(fslab_bin()?);
        cmd.arg("media-serve")
            .arg("--spec")
            .arg(serde_json::to_string(spec)?)
            .arg("--image")
            .arg(image)
            .arg("--mountpoint")
            .arg(mountpoint)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let child = crate::sys::contain::spawn_contained(cmd, None).context("starting the media server")?;
        let mut server = MediaServer { spec: spec.clone(), mountpoint: mountpoint.to_path_buf(), child: Some(child) };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if std::fs::metadata(server.image()).is_ok_and(|m| m.is_file()) {
                return Ok(server);
            }
            let exited = server.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || Instant::now() > deadline {
                let _ = server.stop();
                let why = std::fs::read_to_string(&log_path).unwrap_or_default();
                bail!("the media server did not come up at {}: {}", mountpoint.display(), why.trim());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The served image: what the loop device is attached to.
    pub fn image(&self) -> PathBuf {
        self.mountpoint.join(IMAGE_FILE)
    }

    pub fn evidence(&self) -> Result<Evidence> {
        serve::read_evidence(&self.mountpoint)
    }

    /// Start a new account and pace replies at the medium's speed.
    pub fn reset_evidence(&self) -> Result<()> {
        serve::reset_evidence(&self.mountpoint)
    }

    /// Stop pacing (the model still charges every request).
    pub fn pause(&self) -> Result<()> {
        serve::pause(&self.mountpoint)
    }

    /// Unmount and let the server exit; call after the loop device on it
    /// is detached. Safe to call more than once.
    pub fn stop(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else { return Ok(()) };
        if let Err(e) = crate::testbed::mount::unmount(&self.mountpoint) {
            if child.try_wait().ok().flatten().is_none() {
                self.child = Some(child);
                return Err(e.context("stopping the media server"));
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!("the media server at {} did not exit after unmounting; killed", self.mountpoint.display());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

impl Drop for MediaServer {
    fn drop(&mut self) {
        if self.child.is_some() {
            if let Err(e) = self.stop() {
                crate::output::diagnostic(&format!("fslab: {e:#} (run `fslab cleanup` to retry)"));
            }
        }
    }
}
