//! Helpers shared by the integration tests: they provision real testbeds,
//! so they need root; every test uses its own work directory.
#![allow(dead_code)]

pub mod bed;

use std::path::{Path, PathBuf};

/// True when root. Provisioning needs it: outside CI a non-root run skips
/// with a loud note; under `CI=true` (where tests must really run) it fails.
pub fn root_or_skip() -> bool {
    fslab::testsupport::root_or_skip("this test provisions loop devices")
}

/// A fresh work directory on a real disk (not tmpfs: images need O_DIRECT).
pub fn workdir(tag: &str) -> tempfile::TempDir {
    std::fs::create_dir_all("/var/tmp/fslab-tests").unwrap();
    tempfile::Builder::new().prefix(&format!("{tag}-")).tempdir_in("/var/tmp/fslab-tests").unwrap()
}

/// Everything on this host that still carries `needle` (a testbed name or
/// `fslab-tb-<pid>-`): attached loop devices, mounts, cgroups.
pub fn leftovers(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (dev, backing) in fslab::testbed::loopdev::attached() {
        if backing.to_string_lossy().contains(needle) {
            found.push(format!("loop {} -> {}", dev.display(), backing.display()));
        }
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    for line in mountinfo.lines().filter(|l| l.contains(needle)) {
        found.push(format!("mount {line}"));
    }
    for instance in fslab::monitor::blocktrace::marker_instances() {
        if instance.to_string_lossy().contains(needle) {
            found.push(format!("trace instance {}", instance.display()));
        }
    }
    for root in ["/sys/fs/cgroup/blkio", "/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
            if entry.file_name().to_string_lossy().contains(needle) {
                found.push(format!("cgroup {}", entry.path().display()));
            }
        }
    }
    found
}

/// Names of the testbed directories left in a work directory.
pub fn testbed_dirs(workdir: &Path) -> Vec<String> {
    std::fs::read_dir(workdir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("fslab-tb-"))
        .collect()
}

/// Write an experiment file into `dir` and return its path.
pub fn write_spec(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Path of the fslab binary under test.
pub fn fslab_bin() -> &'static str {
    env!("CARGO_BIN_EXE_fslab")
}

/// Tests that run experiments in this process: helpers fslab starts as
/// `fslab <subcommand>` (the media server) must be the fslab binary, not
/// this test harness (`current_exe`).
pub fn children_run_fslab() {
    std::env::set_var("FSLAB_BIN", fslab_bin());
}
