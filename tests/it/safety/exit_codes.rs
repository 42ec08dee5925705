//! The documented exit codes, driven through the binary: 0 all runs ok,
//! 1 runs failed (the summary says how many and why), 2 usage/spec,
//! 3 environment/privilege, 128+N stopped by signal N.
//! (The timeout case is `lifecycle::a_workload_timeout_fails_the_run_and_tears_down`,
//! SIGINT and SIGTERM are `lifecycle::sig*_tears_everything_down`.)

use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use super::cleanup::gated_spec;
use super::{finish, fslab, fslab_cmd, run_args, testbed_dirs, wait_for_mount};
use crate::common;

#[test]
fn failing_mkfs_rejected_mount_option_and_failing_command_exit_1_with_the_reasons() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-safety-exit");
    let spec = common::write_spec(
        dir.path(),
        "fails.toml",
        &format!(
            r#"name = "every run fails"
repetitions = 1
workdir = "{}"
[defaults]
fs = "ext4"
size = "64MiB"
[[variant]]
name = "badmkfs"
mkfs = ["-O", "no_such_feature_fslab"]
[[variant]]
name = "badmount"
mount = "no_such_option_fslab"
[[variant]]
name = "ok"
[[workload]]
kind = "command"
command = "echo exiting-on-purpose >&2; exit 1"
"#,
            dir.path().join("work").display()
        ),
    );
    let ran = fslab(run_args(dir.path(), &spec, &[]));
    let pid_dirs = testbed_dirs(&dir.path().join("work"));
    ran.expect(1)
        .says("0 runs ok, 3 failed")
        // Reasons, with 1-based run numbers as the progress lines use.
        .says("failed: run 1 (badmkfs / command): provisioning variant `badmkfs`")
        .says("formatting")
        .says("no_such_feature_fslab")
        .says("failed: run 2 (badmount / command)")
        .says("no_such_option_fslab")
        .says("failed: run 3 (ok / command)")
        .says("exiting-on-purpose")
        .says("run 1 (badmkfs / command) failed:");
    assert!(pid_dirs.is_empty(), "{pid_dirs:?}");
}

#[test]
fn all_runs_ok_is_0_and_a_bad_spec_or_missing_file_is_2() {
    let dir = common::workdir("fslab-safety-exit");
    let target = dir.path().join("t");
    std::fs::create_dir(&target).unwrap();
    let ok = common::write_spec(
        dir.path(),
        "ok.toml",
        &format!(
            "name = \"ok\"\nrepetitions = 2\nworkdir = \"{}\"\n[[variant]]\nname = \"a\"\nfs = \"dir:{}\"\n\
             [[workload]]\nkind = \"command\"\ncommand = \"true\"\n",
            dir.path().join("work").display(),
            target.display()
        ),
    );
    fslab(run_args(dir.path(), &ok, &[])).expect(0).says("2 runs ok, 0 failed");
    let bad = common::write_spec(dir.path(), "bad.toml", "name = \"x\"\nrepetitons = 3\n");
    fslab(run_args(dir.path(), &bad, &[])).expect(2).says("bad.toml:2:1: unknown field `repetitons`");
    fslab(run_args(dir.path(), &dir.path().join("missing.toml"), &[])).expect(2).says("missing.toml");
    // clap's own usage errors are 2 as well.
    fslab(["run", "--no-such-flag"]).expect(2);
    fslab(["--help"]).expect(0).says("Exit status:").says("143 SIGTERM");
}

#[test]
fn an_image_larger_than_the_work_directory_can_hold_is_3() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-safety-exit");
    let spec = super::ext4_spec(dir.path(), "", "true");
    let text = std::fs::read_to_string(&spec).unwrap().replace("size = \"64MiB\"", "size = \"100TiB\"");
    std::fs::write(&spec, text).unwrap();
    fslab(run_args(dir.path(), &spec, &[])).expect(3).says("not enough free space in").says("100TiB image");
    assert!(testbed_dirs(&dir.path().join("work")).is_empty());
}

#[test]
fn not_root_is_3() {
    if !nix::unistd::geteuid().is_root() {
        // As an ordinary user fslab refuses by itself; the check is the same.
        let dir = tempfile::tempdir().unwrap();
        let spec = super::ext4_spec(dir.path(), "", "true");
        fslab(run_args(dir.path(), &spec, &[])).expect(3).says("needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let spec = super::ext4_spec(dir.path(), "", "true");
    std::fs::set_permissions(&spec, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    for args in [run_args(dir.path(), &spec, &[]), vec!["cleanup".to_string()]] {
        let mut cmd = fslab_cmd(&args);
        cmd.uid(65534).gid(65534);
        let ran = finish(cmd.spawn().unwrap());
        ran.expect(3).says("needs root");
    }
}

#[test]
fn sighup_tears_everything_down_and_exits_129() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-safety-exit");
    let gate = dir.path().join("gate");
    let spec = gated_spec(dir.path(), &gate);
    let mut child = fslab_cmd(run_args(dir.path(), &spec, &[])).spawn().unwrap();
    let needle = format!("fslab-tb-{}-", child.id());
    wait_for_mount(&mut child, &needle);
    assert!(!common::leftovers(&needle).is_empty());
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGHUP).unwrap();
    let started = Instant::now();
    let ran = finish(child);
    fslab::testsupport::did_not_hang(started, Duration::from_secs(60), "fslab stopping on SIGHUP");
    ran.expect(129).says("interrupted");
    assert_eq!(common::leftovers(&needle), Vec::<String>::new());
    assert!(testbed_dirs(&dir.path().join("work")).is_empty());
}
