//! `probe`: the facts of the guest a run happens in, stored as the run's
//! environment: the same [`Environment`] the host records (release,
//! cmdline, CPUs, memory, tool versions), plus what the VM path depends on
//! (cgroup version and controllers, the testbed disk, tracefs, modules).
//! Body: `{"disk_serial": "…"}` (optional) names the testbed disk.

use std::fs;
use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::inspect::environment::{self, Environment};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct GuestFacts {
    pub environment: Environment,
    pub cgroup: CgroupFacts,
    /// The disk whose serial the request named, if present.
    pub disk: Option<DiskFacts>,
    /// Where tracefs is mounted, if it is.
    pub tracefs: Option<String>,
    /// Loaded modules (`/proc/modules`), sorted.
    pub modules: Vec<String>,
    /// Registered filesystems (`/proc/filesystems`).
    pub filesystems: Vec<String>,
    /// Is a udevd running ([`crate::vm::udev`]: not unless `vm.udev`)?
    #[serde(default)]
    pub udevd_running: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct CgroupFacts {
    /// 2 when the unified hierarchy is at /sys/fs/cgroup, 1 otherwise (0: none).
    pub version: u8,
    /// v2: `cgroup.controllers` of the root; v1: the mounted controllers.
    pub controllers: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct DiskFacts {
    /// Kernel name, e.g. `vda`.
    pub name: String,
    /// `/dev/vda`.
    pub path: String,
    pub serial: String,
    pub size_bytes: u64,
}

#[derive(Deserialize, Default)]
struct Body {
    #[serde(default)]
    disk_serial: Option<String>,
}

pub fn handle(body: Value) -> Result<Value> {
    let body: Body = if body.is_null() { Body::default() } else { serde_json::from_value(body)? };
    Ok(serde_json::to_value(gather(body.disk_serial.as_deref()))?)
}

/// The facts of the machine this runs on (never fails: unknowns stay empty).
pub fn gather(disk_serial: Option<&str>) -> GuestFacts {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let tracefs = mounts(&mountinfo).find(|m| m.1 == "tracefs").map(|m| m.0.to_string());
    GuestFacts {
        environment: environment::capture(),
        cgroup: cgroup_facts(&mountinfo),
        disk: disk_serial.and_then(disk_by_serial),
        tracefs,
        udevd_running: crate::vm::udev::udevd_running(),
        modules: {
            let mut m: Vec<String> = fs::read_to_string("/proc/modules")
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.split_whitespace().next().map(String::from))
                .collect();
            m.sort();
            m
        },
        filesystems: fs::read_to_string("/proc/filesystems")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_whitespace().last().map(String::from))
            .collect(),
    }
}

/// (mount point, fstype, super options) of each line of mountinfo.
fn mounts(mountinfo: &str) -> impl Iterator<Item = (&str, &str, &str)> {
    mountinfo.lines().filter_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let point = left.split(' ').nth(4)?;
        let mut r = right.split(' ');
        let fstype = r.next()?;
        let _source = r.next()?;
        Some((point, fstype, r.next().unwrap_or("")))
    })
}

fn cgroup_facts(mountinfo: &str) -> CgroupFacts {
    if mounts(mountinfo).any(|(point, fstype, _)| point == "/sys/fs/cgroup" && fstype == "cgroup2") {
        let controllers = fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").unwrap_or_default();
        return CgroupFacts { version: 2, controllers: controllers.split_whitespace().map(String::from).collect() };
    }
    let known: Vec<String> = fs::read_to_string("/proc/cgroups")
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    let mut controllers: Vec<String> = mounts(mountinfo)
        .filter(|(_, fstype, _)| *fstype == "cgroup")
        .flat_map(|(_, _, opts)| {
            opts.split(',').filter(|o| known.iter().any(|k| k == o)).map(String::from).collect::<Vec<_>>()
        })
        .collect();
    controllers.sort();
    controllers.dedup();
    CgroupFacts { version: if controllers.is_empty() { 0 } else { 1 }, controllers }
}

/// The block device whose `serial` is `serial`.
pub fn disk_by_serial(serial: &str) -> Option<DiskFacts> {
    for entry in fs::read_dir("/sys/block").ok()?.flatten() {
        let dir = entry.path();
        let found = fs::read_to_string(dir.join("serial")).unwrap_or_default();
        if found.trim() == serial {
            let name = entry.file_name().to_string_lossy().into_owned();
            let sectors: u64 = read_trimmed(&dir.join("size")).parse().unwrap_or(0);
            return Some(DiskFacts {
                path: format!("/dev/{name}"),
                name,
                serial: serial.to_string(),
                size_bytes: sectors * 512,
            });
        }
    }
    None
}

fn read_trimmed(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_default().trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const V2: &str = "22 1 0:21 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n\
                      30 1 0:12 / /sys/kernel/tracing rw - tracefs tracefs rw\n";

    #[test]
    fn mountinfo_lines_give_point_type_and_options() {
        let all: Vec<_> = mounts(V2).collect();
        assert_eq!(all[0], ("/sys/fs/cgroup", "cgroup2", "rw,nsdelegate"));
        assert_eq!(all[1].1, "tracefs");
    }

    #[test]
    fn the_host_probe_sees_this_machine() {
        let facts = gather(Some("no-such-serial"));
        assert!(!facts.environment.kernel_release.is_empty());
        assert!(facts.disk.is_none());
        assert!(facts.filesystems.iter().any(|f| f == "proc"));
    }
}
