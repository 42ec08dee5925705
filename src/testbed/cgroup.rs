//! Device throttling through the block cgroup: v1 `blkio.throttle.*` or
//! v2 `io.max`, whichever the host has.
//!
//! On v1 the throttle hierarchy is flat and writeback is not attributed to
//! cgroups: dirty pages are written by flusher threads and journal threads
//! in the root group. So on v1 fslab sets the same limits twice: on its own
//! group (for the workload's reads, direct and fsync-driven writes) and on
//! the root group for this device only (for writeback). Both groups get the
//! full limit, so when both submit at the same moment the device can see up
//! to twice the limit; v2 `io.max` has no such gap.

use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::config::Throttle;
use crate::sys::blockdev::DevNum;

/// Which block cgroup interface the host offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// v1 blkio hierarchy mounted at this path.
    V1(PathBuf),
    /// v2 unified hierarchy with the io controller, mounted at this path.
    V2(PathBuf),
}

/// Find the blkio (v1) or io-capable (v2) hierarchy.
pub fn detect() -> Option<Flavor> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut v2 = None;
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let fields: Vec<&str> = left.split(' ').collect();
        let rfields: Vec<&str> = right.split(' ').collect();
        if fields.len() < 5 || rfields.len() < 3 {
            continue;
        }
        let mountpoint = PathBuf::from(fields[4]);
        match rfields[0] {
            "cgroup" if rfields[2].split(',').any(|o| o == "blkio") => return Some(Flavor::V1(mountpoint)),
            "cgroup2" => {
                let controllers = fs::read_to_string(mountpoint.join("cgroup.controllers")).unwrap_or_default();
                if controllers.split_whitespace().any(|c| c == "io") {
                    v2 = Some(Flavor::V2(mountpoint));
                }
            }
            _ => {}
        }
    }
    v2
}

/// A cgroup fslab created to throttle one device. Removed by [`remove`](Self::remove).
#[derive(Debug)]
pub struct ThrottleGroup {
    pub flavor: Flavor,
    pub path: PathBuf,
    pub device: DevNum,
    limits: Throttle,
    released: bool,
}

/// A throttle file and the limit of [`Throttle`] it carries.
type LimitFile = (&'static str, fn(&Throttle) -> Option<u64>);

const V1_FILES: [LimitFile; 4] = [
    ("blkio.throttle.read_bps_device", |t| t.read_bps.map(|b| b.0)),
    ("blkio.throttle.write_bps_device", |t| t.write_bps.map(|b| b.0)),
    ("blkio.throttle.read_iops_device", |t| t.read_iops),
    ("blkio.throttle.write_iops_device", |t| t.write_iops),
];

impl ThrottleGroup {
    /// Create cgroup `name` and apply `limits` to `device`.
    pub fn create(flavor: Flavor, name: &str, device: DevNum, limits: Throttle) -> Result<ThrottleGroup> {
        let root = match &flavor {
            Flavor::V1(root) | Flavor::V2(root) => root.clone(),
        };
        let path = root.join(name);
        if let Flavor::V2(root) = &flavor {
            // Writeback is only charged to a v2 group when io and memory are both enabled.
            let _ = write(&root.join("cgroup.subtree_control"), "+io +memory");
            let _ = write(&root.join("cgroup.subtree_control"), "+io");
        }
        fs::create_dir(&path).with_context(|| format!("creating cgroup {}", path.display()))?;
        let mut group = ThrottleGroup { flavor, path, device, limits, released: false };
        if let Err(e) = group.apply() {
            let _ = group.remove();
            return Err(e);
        }
        Ok(group)
    }

    fn apply(&self) -> Result<()> {
        match &self.flavor {
            Flavor::V1(root) => {
                for (file, get) in V1_FILES {
                    if let Some(value) = get(&self.limits) {
                        let rule = format!("{} {value}", self.device);
                        write(&self.path.join(file), &rule)?;
                        write(&root.join(file), &rule)?;
                    }
                }
            }
            Flavor::V2(_) => {
                let t = &self.limits;
                let mut rule = self.device.to_string();
                for (key, value) in [
                    ("rbps", t.read_bps.map(|b| b.0)),
                    ("wbps", t.write_bps.map(|b| b.0)),
                    ("riops", t.read_iops),
                    ("wiops", t.write_iops),
                ] {
                    if let Some(v) = value {
                        rule.push_str(&format!(" {key}={v}"));
                    }
                }
                write(&self.path.join("io.max"), &rule)?;
            }
        }
        Ok(())
    }

    /// The file a process writes `0` into to join this group.
    pub fn procs_file(&self) -> PathBuf {
        self.path.join("cgroup.procs")
    }

    /// Lift the limits (so teardown's unmount is not throttled) and clear the
    /// root-group rules fslab added on v1.
    pub fn release_limits(&mut self) -> Result<()> {
        if self.released {
            return Ok(());
        }
        if let Flavor::V1(root) = &self.flavor {
            clear_v1_rules(root, self.device)?;
            for (file, get) in V1_FILES {
                if get(&self.limits).is_some() {
                    let _ = write(&self.path.join(file), &format!("{} 0", self.device));
                }
            }
        }
        self.released = true;
        Ok(())
    }

    /// Kill every process left in the group, lift limits, remove the group.
    pub fn remove(&mut self) -> Result<()> {
        let released = self.release_limits();
        remove_group(&self.path)?;
        released
    }
}

/// Remove the v1 root-group rules for `device` in every throttle file.
pub fn clear_v1_rules(root: &Path, device: DevNum) -> Result<()> {
    for (file, _) in V1_FILES {
        let path = root.join(file);
        let current = fs::read_to_string(&path).unwrap_or_default();
        if current.lines().any(|l| l.split_whitespace().next() == Some(&device.to_string())) {
            write(&path, &format!("{device} 0"))?;
        }
    }
    Ok(())
}

/// Devices that have a v1 root-group throttle rule.
pub fn v1_root_rules(root: &Path) -> Vec<DevNum> {
    let mut devices = Vec::new();
    for (file, _) in V1_FILES {
        for line in fs::read_to_string(root.join(file)).unwrap_or_default().lines() {
            let Some((major, minor)) = line.split_whitespace().next().and_then(|d| d.split_once(':')) else { continue };
            if let (Ok(major), Ok(minor)) = (major.parse(), minor.parse()) {
                let dev = DevNum { major, minor };
                if !devices.contains(&dev) {
                    devices.push(dev);
                }
            }
        }
    }
    devices
}

/// Kill the group's processes and remove its directory.
pub fn remove_group(path: &Path) -> Result<()> {
    if !path.exists() {
        return Ok(());
    }
    for attempt in 0..50u64 {
        let pids = members(path);
        for pid in &pids {
            // SAFETY: signalling processes that are in fslab's own cgroup.
            unsafe {
                libc::kill(*pid, libc::SIGKILL);
            }
        }
        match fs::remove_dir(path) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) if attempt == 49 => {
                return Err(e).with_context(|| format!("removing cgroup {} (members: {pids:?})", path.display()));
            }
            Err(_) => thread::sleep(Duration::from_millis(20 * (attempt + 1).min(10))),
        }
    }
    bail!("could not remove cgroup {}", path.display())
}

fn members(path: &Path) -> Vec<libc::pid_t> {
    fs::read_to_string(path.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn write(path: &Path, value: &str) -> Result<()> {
    fs::write(path, value).with_context(|| format!("writing `{value}` to {}", path.display()))
}
