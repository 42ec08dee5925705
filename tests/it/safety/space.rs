//! A full work directory is named as such: checked before the first run,
//! and named when it fills anyway (the loop device turns the host's ENOSPC
//! into I/O errors the workload reports as `Input/output error`).

use std::path::Path;
use std::process::Command;

use super::{fslab, run_args, testbed_dirs, LoopDev};
use crate::common;

/// A work directory on its own small ext4 (mounted from a loop device).
fn small_workdir(dir: &Path, mb: u64) -> (LoopDev, std::path::PathBuf) {
    let mut lo = LoopDev::new(dir, "workfs.img", mb, false);
    let at = dir.join("work");
    let dev = lo.dev.clone();
    lo.mount_ext4(&dev, &at);
    (lo, at)
}

fn spec(dir: &Path, workdir: &Path, size: &str, command: &str) -> std::path::PathBuf {
    common::write_spec(
        dir,
        "space.toml",
        &format!(
            "name = \"space\"\nrepetitions = 1\nworkdir = \"{}\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n\
             size = \"{size}\"\n[[workload]]\nkind = \"command\"\ncommand = \"{command}\"\ntimeout = \"5m\"\n",
            workdir.display()
        ),
    )
}

#[test]
fn too_little_free_space_is_refused_before_anything_starts() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-safety-space");
    let (_lo, work) = small_workdir(dir.path(), 48);
    let spec = spec(dir.path(), &work, "1GiB", "true");
    fslab(run_args(dir.path(), &spec, &[]))
        .expect(3)
        .says(&format!("not enough free space in {}", work.display()))
        .says("variant `a`: filesystem overhead");
    assert!(testbed_dirs(&work).is_empty());
}

#[test]
fn a_work_directory_that_fills_during_a_run_is_named() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-safety-space");
    let (_lo, work) = small_workdir(dir.path(), 160);
    let spec =
        spec(dir.path(), &work, "1GiB", "dd if=/dev/zero of=big bs=1M count=400 oflag=direct status=none && sync");
    let ran = fslab(run_args(dir.path(), &spec, &[]));
    ran.expect(1)
        // The warning before the run, and the reason of the failure.
        .says("a sparse image can grow to 1GiB")
        .says(&format!("the work directory's filesystem is full: {}", work.display()));
    assert!(testbed_dirs(&work).is_empty(), "the full testbed is still torn down");
}

#[test]
fn enospc_while_generating_inputs_is_an_environment_error() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-safety-space");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    assert!(Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=24m", "tmpfs"])
        .arg(&work)
        .status()
        .unwrap()
        .success());
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(&work);
    let spec = super::cleanup::uncached_untar_spec(dir.path());
    let ran = fslab(run_args(dir.path(), &spec, &[]));
    ran.expect(3).says("No space left on device").says("a filesystem fslab writes to is full");
    let left: Vec<_> =
        std::fs::read_dir(work.join("cache")).into_iter().flatten().flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "the half-written archive is removed: {left:?}");
}
