//! `--device PATH --destroy-data` formats only a spare block device, and
//! says exactly why it refuses anything else. (Device-mapper and md cannot
//! be set up on the test host; their sysfs shapes are unit-tested in
//! `src/testbed/device_optin.rs`.)

use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::{ext4_spec, fslab, run_args, LoopDev};
use crate::common;

/// `fslab run … --device DEV --destroy-data`; refusals are usage errors (2).
fn run_on(dir: &Path, dev: &Path) -> super::Ran {
    let spec = ext4_spec(dir, "", "true");
    fslab(run_args(dir, &spec, &["--device", dev.to_str().unwrap(), "--destroy-data"]))
}

#[test]
fn a_regular_file_is_refused_and_left_untouched() {
    let dir = common::workdir("fslab-safety-dev");
    let file = dir.path().join("precious.img");
    std::fs::write(&file, "my only copy").unwrap();
    run_on(dir.path(), &file).expect(2).says("is a regular file, not a block device").says("refusing to format");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "my only copy");
    // Nothing else was created either.
    assert!(!dir.path().join("work").exists());
}

#[test]
fn a_mounted_loop_device_is_refused() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-safety-dev");
    let mut lo = LoopDev::new(dir.path(), "mounted.img", 64, false);
    let at = dir.path().join("mnt");
    let dev = lo.dev.clone();
    lo.mount_ext4(&dev, &at);
    std::fs::write(at.join("keep.txt"), "data").unwrap();
    run_on(dir.path(), &lo.dev).expect(2).says(&format!("is mounted at {}", at.display()));
    assert_eq!(std::fs::read_to_string(at.join("keep.txt")).unwrap(), "data");
}

#[test]
fn a_loop_device_holding_a_mounted_partition_is_refused() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-safety-dev");
    let mut lo = LoopDev::new(dir.path(), "disk.img", 64, true);
    let part = lo.partition(dir.path());
    let at = dir.path().join("mnt");
    lo.mount_ext4(&part, &at);
    let name = part.file_name().unwrap().to_string_lossy().into_owned();
    run_on(dir.path(), &lo.dev)
        .expect(2)
        .says(&format!("holds the filesystem mounted at {} (through {name})", at.display()));
}

#[test]
fn a_loop_device_another_loop_device_is_stacked_on_is_refused() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-safety-dev");
    let mut lower = LoopDev::new(dir.path(), "lower.img", 64, false);
    let upper = lower.stack_loop();
    let upper_name = upper.file_name().unwrap().to_string_lossy().into_owned();
    // Not mounted: the loop layer on top is enough.
    run_on(dir.path(), &lower.dev).expect(2).says(&format!("loop device {upper_name} is backed by it"));
    // Mounted through the upper layer: the mount depends on it.
    let at = dir.path().join("mnt");
    lower.mount_ext4(&upper, &at);
    run_on(dir.path(), &lower.dev)
        .expect(2)
        .says(&format!("holds the filesystem mounted at {} (through {upper_name})", at.display()));
}

#[test]
fn a_device_another_process_holds_exclusively_is_refused() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-safety-dev");
    let lo = LoopDev::new(dir.path(), "held.img", 64, false);
    // This test process is the "other process" for the fslab child.
    let held = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_EXCL).open(&lo.dev).unwrap();
    run_on(dir.path(), &lo.dev).expect(2).says("is in use: another process or the kernel holds it open exclusively");
    drop(held);
}

#[test]
fn a_fresh_loop_device_is_accepted_and_used_end_to_end() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-safety-dev");
    let lo = LoopDev::new(dir.path(), "spare.img", 96, false);
    let ran = run_on(dir.path(), &lo.dev);
    ran.expect(0).says("1 runs ok, 0 failed");
    // It really was formatted as the variant asked, and nothing is left mounted.
    let blkid = std::process::Command::new("blkid").arg("-o").arg("value").arg("-s").arg("TYPE").arg(&lo.dev).output();
    if let Ok(out) = blkid {
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ext4");
    }
    let dev = lo.dev.to_string_lossy().into_owned();
    assert!(!std::fs::read_to_string("/proc/self/mountinfo").unwrap().lines().any(|l| l.contains(&format!(" {dev} "))));
}

/// A child process with `dev` open as its stdin, killed when dropped (also
/// when an assertion fails).
struct Holder(std::process::Child);

impl Holder {
    fn new(file: std::fs::File) -> Holder {
        Holder(std::process::Command::new("sleep").arg("300").stdin(file).spawn().unwrap())
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_device_another_process_has_open_read_only_or_read_write_is_refused_naming_it() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-safety-dev");
    let lo = LoopDev::new(dir.path(), "opened.img", 64, false);
    for write in [false, true] {
        let file = std::fs::OpenOptions::new().read(true).write(write).open(&lo.dev).unwrap();
        let holder = Holder::new(file);
        let pid = holder.0.id();
        run_on(dir.path(), &lo.dev).expect(2).says(&format!("is in use: process {pid} (sleep) has it open"));
        drop(holder);
    }
    // Nothing was written: no filesystem signature on it.
    let blkid = std::process::Command::new("blkid").arg("-p").arg(&lo.dev).output().unwrap();
    assert!(String::from_utf8_lossy(&blkid.stdout).trim().is_empty(), "{}", String::from_utf8_lossy(&blkid.stdout));
}
