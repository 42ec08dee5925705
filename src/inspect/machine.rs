//! Which machine a run ran on: the identity stored with every run, so a
//! shared store can keep results of different hardware apart.
//!
//! [`Machine::capture`] never fails: a fact that cannot be read stays
//! empty, as in [`super::environment`] (whose readers it shares).

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::environment::{cpu_model_from_cpuinfo, meminfo_total_kb, online_cpus};
use crate::sys::mountinfo;

/// The identity of one machine as far as performance goes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// `/proc/sys/kernel/hostname`.
    pub hostname: String,
    /// `/sys/class/dmi/id/product_name` (x86 and some arm64 boards), or the
    /// device-tree `model` (Raspberry Pi and other boards).
    pub product_name: Option<String>,
    /// CPU model from `/proc/cpuinfo`.
    pub cpu_model: Option<String>,
    /// Online CPUs.
    pub cpus: usize,
    /// `MemTotal`, in bytes.
    pub memory_bytes: u64,
    /// `uname -r`.
    pub kernel_release: String,
    /// Model of the disk that holds the testbed (through partitions, device
    /// mapper, md and loop devices), from sysfs.
    pub device_model: Option<String>,
}

impl Machine {
    /// This machine, with `backing` (the work directory, or the block device
    /// under test) naming where the testbed's disk is; `None` leaves
    /// [`Machine::device_model`] empty.
    pub fn capture(backing: Option<&Path>) -> Machine {
        let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| clean(&s)).filter(|s| !s.is_empty());
        Machine {
            hostname: read("/proc/sys/kernel/hostname").unwrap_or_default(),
            product_name: read("/sys/class/dmi/id/product_name").or_else(|| read("/proc/device-tree/model")),
            cpu_model: std::fs::read_to_string("/proc/cpuinfo")
                .ok()
                .map(|t| cpu_model_from_cpuinfo(&t))
                .filter(|s| !s.is_empty()),
            cpus: online_cpus(),
            memory_bytes: std::fs::read_to_string("/proc/meminfo")
                .ok()
                .and_then(|t| meminfo_total_kb(&t))
                .map_or(0, |kb| kb * 1024),
            kernel_release: read("/proc/sys/kernel/osrelease").unwrap_or_default(),
            device_model: backing.and_then(device_model),
        }
    }

    /// Hash of every field: two runs with the same fingerprint ran on the
    /// same machine with the same kernel.
    pub fn fingerprint(&self) -> String {
        hash(&serde_json::to_string(self).unwrap_or_default())
    }

    /// Hash of every field but the kernel release: the same hardware
    /// (comparing kernels on one box must not count as mixing machines).
    pub fn hardware(&self) -> String {
        let without_kernel = Machine { kernel_release: String::new(), ..self.clone() };
        hash(&serde_json::to_string(&without_kernel).unwrap_or_default())
    }

    /// One line for people: `host (product; cpu ×N; 16 GiB; disk model; kernel)`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        parts.extend(self.product_name.clone());
        parts.push(format!("{} × {}", self.cpu_model.as_deref().unwrap_or("unknown CPU"), self.cpus));
        parts.push(format!("{:.1} GiB", self.memory_bytes as f64 / (1u64 << 30) as f64));
        parts.extend(self.device_model.clone());
        parts.push(format!("kernel {}", self.kernel_release));
        format!("{} ({})", self.hostname, parts.join("; "))
    }
}

fn hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// Device-tree strings end in NUL; sysfs ones in a newline.
fn clean(s: &str) -> String {
    s.trim_matches(|c: char| c == '\0' || c.is_whitespace()).to_string()
}

/// The model of the disk under `path` (a file, directory or block device).
pub fn device_model(path: &Path) -> Option<String> {
    let sys = block_sysfs(path)?;
    disk_model(&sys, 0)
}

/// The sysfs directory of the block device that holds `path`.
fn block_sysfs(path: &Path) -> Option<PathBuf> {
    let existing = path.ancestors().find(|p| p.exists())?;
    let md = std::fs::metadata(existing).ok()?;
    if md.file_type().is_block_device() {
        return by_number(md.rdev());
    }
    if let Some(dir) = by_number(md.dev()) {
        return Some(dir);
    }
    // btrfs, overlay and friends report an anonymous device number: ask
    // mountinfo for the mount's source device instead.
    let canon = std::fs::canonicalize(existing).ok()?;
    let mounts = mountinfo::read().ok()?;
    let source = &mountinfo::find_mount(&mounts, &canon)?.source;
    let md = std::fs::metadata(source).ok()?;
    md.file_type().is_block_device().then(|| by_number(md.rdev())).flatten()
}

fn by_number(dev: u64) -> Option<PathBuf> {
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()
}

/// Follows partitions to their disk, stacked devices (dm, md) to their
/// first member and loop devices to the disk of their backing file, then
/// reads the disk's model.
fn disk_model(sys: &Path, depth: usize) -> Option<String> {
    if depth > 8 {
        return None;
    }
    let sys = if sys.join("partition").exists() { sys.parent()?.to_path_buf() } else { sys.to_path_buf() };
    let read = |p: PathBuf| std::fs::read_to_string(p).ok().map(|s| clean(&s)).filter(|s| !s.is_empty());
    if let Some(backing) = read(sys.join("loop/backing_file")) {
        return block_sysfs(Path::new(&backing)).and_then(|d| disk_model(&d, depth + 1));
    }
    if let Some(first) = std::fs::read_dir(sys.join("slaves")).ok().and_then(|mut d| d.next()).and_then(|e| e.ok()) {
        let member = std::fs::canonicalize(first.path()).ok()?;
        return disk_model(&member, depth + 1);
    }
    let device = sys.join("device");
    let model = read(device.join("model")).or_else(|| read(device.join("name")));
    let vendor = read(device.join("vendor")).filter(|v| v != "ATA" && !v.starts_with("0x"));
    match (vendor, model) {
        (Some(v), Some(m)) if !m.starts_with(&v) => Some(format!("{v} {m}")),
        (_, Some(m)) => Some(m),
        // virtio and other paravirtual disks have no model: name the driver.
        (_, None) => std::fs::read_link(device.join("driver"))
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_reads_this_machine() {
        let m = Machine::capture(Some(Path::new("/")));
        assert!(!m.hostname.is_empty());
        assert!(m.cpus > 0);
        assert!(m.memory_bytes > 0);
        assert!(!m.kernel_release.is_empty());
        assert_eq!(m.fingerprint(), m.clone().fingerprint());
        let other_kernel = Machine { kernel_release: "1.0".into(), ..m.clone() };
        assert_ne!(m.fingerprint(), other_kernel.fingerprint());
        assert_eq!(m.hardware(), other_kernel.hardware());
        assert!(m.describe().starts_with(&m.hostname));
        // A path that does not exist yet resolves through its ancestors.
        let deep = Machine::capture(Some(Path::new("/var/tmp/fslab-not-created/x/y")));
        assert_eq!(deep.device_model, Machine::capture(Some(Path::new("/var/tmp"))).device_model);
    }

    #[test]
    fn no_backing_no_model() {
        assert_eq!(Machine::capture(None).device_model, None);
        // proc is not on a block device.
        assert_eq!(device_model(Path::new("/proc/self")), None);
    }
}
