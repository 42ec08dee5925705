//! `fslab cleanup`: find what a killed fslab left behind (mounts, loop
//! devices, cgroups, v1 root throttle rules, tracefs instances, testbed
//! and VM session directories, VM processes) by the `fslab-tb-<pid>-…`
//! marker and remove it when its owner is gone.

use std::fs;
use std::path::{Path, PathBuf};

use super::{cgroup, loopdev, mount};
use crate::sys::blockdev::DevNum;
use crate::sys::marker::{stale, MARKER};

/// What a cleanup pass did.
#[derive(Debug, Default)]
pub struct CleanupReport {
    pub removed: Vec<String>,
    /// Leftovers whose owning fslab process is still running (left alone).
    pub in_use: Vec<String>,
    pub errors: Vec<String>,
}

/// Remove stale fslab leftovers. `workdirs` are scanned for testbed
/// directories; mounts, loop devices and cgroups are found system-wide.
/// With `all`, leftovers of running fslab processes are removed too.
pub fn cleanup(workdirs: &[PathBuf], all: bool) -> CleanupReport {
    let mut report = CleanupReport::default();
    let note = |report: &mut CleanupReport, what: String, result: anyhow::Result<()>| match result {
        Ok(()) => report.removed.push(what),
        Err(e) => report.errors.push(format!("{what}: {e:#}")),
    };

    // cgroups first: killing their processes frees the mounts.
    let flavor = cgroup::detect();
    if let Some(cgroup::Flavor::V1(root) | cgroup::Flavor::V2(root)) = &flavor {
        for entry in fs::read_dir(root).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.starts_with(MARKER) || !entry.path().is_dir() {
                continue;
            }
            if stale(&name, all) {
                note(&mut report, format!("cgroup {}", entry.path().display()), cgroup::remove_group(&entry.path()));
            } else {
                report.in_use.push(format!("cgroup {}", entry.path().display()));
            }
        }
    }

    // VM processes that no cgroup held (see crate::vm::leftovers).
    for process in crate::vm::leftovers::vm_processes() {
        let what = format!("VM process {} ({})", process.pid, process.cmdline.chars().take(120).collect::<String>());
        if stale(&process.cmdline, all) {
            note(&mut report, what, crate::vm::leftovers::kill(&process));
        } else {
            report.in_use.push(what);
        }
    }

    if let Ok(text) = fs::read_to_string("/proc/self/mountinfo") {
        // Deepest first, in case anything was mounted inside a testbed.
        let mut mounts: Vec<_> = mount::parse_mountinfo(&text)
            .into_iter()
            .filter(|m| m.mountpoint.contains(MARKER) || m.source.starts_with(MARKER))
            .collect();
        mounts.sort_by_key(|m| std::cmp::Reverse(m.mountpoint.len()));
        for m in mounts {
            let key = format!("{} {}", m.mountpoint, m.source);
            if stale(&key, all) {
                note(&mut report, format!("mount {}", m.mountpoint), mount::unmount(Path::new(&m.mountpoint)));
            } else {
                report.in_use.push(format!("mount {}", m.mountpoint));
            }
        }
    }

    for (device, backing) in loopdev::attached() {
        let backing_str = backing.to_string_lossy();
        if !backing_str.contains(MARKER) {
            continue;
        }
        if stale(&backing_str, all) {
            if let (Some(cgroup::Flavor::V1(root)), Ok(dev)) = (&flavor, DevNum::of(&device)) {
                let _ = cgroup::clear_v1_rules(root, dev);
            }
            note(
                &mut report,
                format!("loop device {} ({})", device.display(), backing.display()),
                loopdev::detach(&device),
            );
        } else {
            report.in_use.push(format!("loop device {}", device.display()));
        }
    }

    // v1 root rules left on loop devices that are no longer attached.
    if let Some(cgroup::Flavor::V1(root)) = &flavor {
        let attached: Vec<DevNum> = loopdev::attached().iter().filter_map(|(d, _)| DevNum::of(d).ok()).collect();
        for dev in cgroup::v1_root_rules(root) {
            if dev.major == 7 && !attached.contains(&dev) {
                note(&mut report, format!("root throttle rule for {dev}"), cgroup::clear_v1_rules(root, dev));
            }
        }
    }

    // Private trace instances of the block-trace monitor.
    for dir in crate::monitor::blocktrace::marker_instances() {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if stale(&name, all) {
            note(
                &mut report,
                format!("trace instance {}", dir.display()),
                crate::monitor::blocktrace::remove_instance(&dir),
            );
        } else {
            report.in_use.push(format!("trace instance {}", dir.display()));
        }
    }

    for workdir in workdirs {
        for entry in fs::read_dir(workdir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.starts_with(MARKER) || !stale(&name, all) {
                continue;
            }
            let path = entry.path();
            // Never delete through a mount that is still there.
            if mount::facts(&path.join("mnt")).ok().flatten().is_some() {
                report.errors.push(format!("{} is still mounted; not removing", path.display()));
                continue;
            }
            note(&mut report, format!("directory {}", path.display()), fs::remove_dir_all(&path).map_err(Into::into));
        }
    }
    report
}
