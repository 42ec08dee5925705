//! A media server's FUSE connection as the kernel shows it in fusectl
//! (`/sys/fs/fuse/connections/<dev>/`): how many requests wait for the
//! server, and `abort`, which fails every pending and future request of the
//! mount with ENOTCONN at once. Aborting is what frees the threads (fslab's
//! own, the loop device's worker, a workload's `sync` in D state) that wait
//! on a server which died, was stopped, or takes longer than anyone will
//! wait; nothing else reaches a request the server has already taken.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::sys::blockdev::DevNum;

/// Where the kernel's FUSE control filesystem is mounted.
const FUSECTL: &str = "/sys/fs/fuse/connections";

/// One FUSE mount's connection.
#[derive(Clone, Debug)]
pub struct Connection {
    /// The mount point, for messages and the forced-unmount fallback; None
    /// for a connection found through a loop device (its mount detached).
    mountpoint: Option<PathBuf>,
    /// Its fusectl directory's name: the superblock's device number as the
    /// kernel writes a `dev_t` (`major << 20 | minor`, major 0 for FUSE).
    dev: u64,
}

impl Connection {
    /// The connection of the FUSE mount at `mountpoint`, from mountinfo's
    /// device number (never a `stat` through the mount, which a stopped
    /// server would not answer).
    pub fn of_mount(mountpoint: &Path) -> Result<Connection> {
        let mounts = crate::sys::mountinfo::read()?;
        // Canonical as mountinfo has it: the parent only, as resolving the
        // mount point itself would ask the server.
        let target = match (mountpoint.parent().map(std::fs::canonicalize), mountpoint.file_name()) {
            (Some(Ok(parent)), Some(name)) => parent.join(name),
            _ => mountpoint.to_path_buf(),
        };
        let target = target.to_string_lossy();
        let Some(m) = mounts.iter().rev().find(|m| m.mountpoint == target && m.fstype.starts_with("fuse")) else {
            bail!("{} is not a FUSE mount", mountpoint.display());
        };
        Ok(Connection::of_line(m))
    }

    /// The connection of a mountinfo line (a FUSE mount's).
    pub fn of_line(m: &crate::sys::mountinfo::MountInfo) -> Connection {
        Connection {
            mountpoint: Some(PathBuf::from(&m.mountpoint)),
            ..Connection::of_device(DevNum { major: m.major, minor: m.minor })
        }
    }

    /// The connection of the FUSE filesystem with device number
    /// `filesystem`, as `stat` gives it or `LOOP_GET_STATUS64` for a loop
    /// device's backing file (which names it also once its mount was
    /// detached); see [`Connection::exists`].
    pub fn of_device(filesystem: DevNum) -> Connection {
        Connection { mountpoint: None, dev: (u64::from(filesystem.major) << 20) | u64::from(filesystem.minor) }
    }

    /// Whether fusectl lists the connection: the device is a FUSE
    /// filesystem's whose connection is still there.
    pub fn exists(&self) -> bool {
        ensure_fusectl().is_ok() && self.dir().is_dir()
    }

    /// Its fusectl name, for messages.
    pub fn name(&self) -> String {
        self.dev.to_string()
    }

    fn dir(&self) -> PathBuf {
        Path::new(FUSECTL).join(self.dev.to_string())
    }

    /// Requests waiting for the server (sent and unanswered, or queued);
    /// None when fusectl cannot be read.
    pub fn waiting(&self) -> Option<u64> {
        ensure_fusectl().ok()?;
        std::fs::read_to_string(self.dir().join("waiting")).ok()?.trim().parse().ok()
    }

    /// Fail every request of the mount, now and later (the mount stays
    /// until unmounted). Through fusectl; where that cannot be mounted, a
    /// forced unmount, whose first step in FUSE is the same abort.
    pub fn abort(&self) -> Result<()> {
        let through_fusectl =
            ensure_fusectl().and_then(|()| std::fs::write(self.dir().join("abort"), b"1").map_err(Into::into));
        let Err(e) = through_fusectl else { return Ok(()) };
        let Some(mountpoint) = &self.mountpoint else {
            return Err(e).with_context(|| format!("aborting FUSE connection {}", self.dev));
        };
        // EBUSY (the loop device still holds the image) after the abort is fine.
        match nix::mount::umount2(mountpoint, nix::mount::MntFlags::MNT_FORCE) {
            Ok(()) | Err(nix::errno::Errno::EBUSY) => Ok(()),
            Err(force) => Err(e).with_context(|| {
                format!(
                    "aborting the FUSE connection of {} (a forced unmount failed too: {force})",
                    mountpoint.display()
                )
            }),
        }
    }
}

/// Mount fusectl where the host has not (systemd mounts it at boot; a
/// minimal VM or container may not). It is the kernel's own view of FUSE
/// connections and is left mounted, as systemd would have it.
fn ensure_fusectl() -> Result<()> {
    let mounted = crate::sys::mountinfo::read()?.iter().any(|m| m.fstype == "fusectl" && m.mountpoint == FUSECTL);
    if mounted {
        return Ok(());
    }
    crate::sys::modules::ensure_loaded("fuse")?;
    nix::mount::mount(Some("fusectl"), FUSECTL, Some("fusectl"), nix::mount::MsFlags::empty(), None::<&str>)
        .with_context(|| format!("mounting fusectl at {FUSECTL}"))
}
