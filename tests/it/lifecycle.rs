//! The fslab binary under signals, timeouts and SIGKILL: every path out
//! leaves no loop device, mount or cgroup behind (SIGKILL after `fslab cleanup`).

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// A throttled ext4 testbed whose workload sleeps, so signals arrive mid-run.
fn sleeper_spec(dir: &Path, timeout: &str) -> std::path::PathBuf {
    common::write_spec(
        dir,
        "sleeper.toml",
        &format!(
            r#"
name = "sleeper"
repetitions = 1
workdir = "{}"
[[variant]]
name = "a"
fs = "ext4"
size = "64MiB"
throttle = {{ write_bps = "16MiB" }}
[[workload]]
kind = "command"
command = "sleep 60"
timeout = "{timeout}"
"#,
            dir.join("work").display()
        ),
    )
}

fn start(dir: &Path, spec: &Path) -> Child {
    Command::new(common::fslab_bin())
        .arg("run")
        .arg(spec)
        .arg("--db")
        .arg(dir.join("results.db"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait until the child's testbed is mounted (its workload is running).
fn wait_for_testbed(child: &mut Child) -> String {
    let needle = format!("fslab-tb-{}-", child.id());
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        if mountinfo.contains(&needle) {
            sleep(Duration::from_millis(300));
            return needle;
        }
        assert!(child.try_wait().unwrap().is_none(), "fslab exited before its testbed appeared");
        sleep(Duration::from_millis(50));
    }
    panic!("testbed never appeared");
}

fn finish(child: Child) -> (Option<i32>, String) {
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn signal_test(signal: nix::sys::signal::Signal, expected: i32) {
    let dir = common::workdir("fslab-life");
    let spec = sleeper_spec(dir.path(), "5m");
    let mut child = start(dir.path(), &spec);
    let needle = wait_for_testbed(&mut child);
    assert!(!common::leftovers(&needle).is_empty());
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
    let started = Instant::now();
    let (code, stderr) = finish(child);
    fslab::testsupport::did_not_hang(started, Duration::from_secs(30), "fslab stopping");
    assert_eq!(code, Some(expected), "128 + the signal: {stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert_eq!(common::leftovers(&needle), Vec::<String>::new());
    assert_eq!(common::testbed_dirs(&dir.path().join("work")), Vec::<String>::new());
}

#[test]
fn sigint_tears_everything_down() {
    if common::root_or_skip() {
        signal_test(nix::sys::signal::Signal::SIGINT, 130);
    }
}

#[test]
fn sigterm_tears_everything_down() {
    if common::root_or_skip() {
        signal_test(nix::sys::signal::Signal::SIGTERM, 143);
    }
}

#[test]
fn a_workload_timeout_fails_the_run_and_tears_down() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-life");
    let spec = sleeper_spec(dir.path(), "1s");
    let child = start(dir.path(), &spec);
    let pid = child.id();
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(1), "a failed run exits 1: {stderr}");
    assert!(stderr.contains("timed out"), "{stderr}");
    assert!(stderr.contains("1 failed"), "{stderr}");
    assert_eq!(common::leftovers(&format!("fslab-tb-{pid}-")), Vec::<String>::new());
}

#[test]
fn a_failing_command_shows_its_stderr() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-life");
    let spec = common::write_spec(
        dir.path(),
        "fail.toml",
        &format!(
            "name = \"fail\"\nrepetitions = 1\nworkdir = \"{}\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\nsize = \"64MiB\"\n[[workload]]\nkind = \"command\"\ncommand = \"echo the-disk-is-on-fire >&2; exit 3\"\n",
            dir.path().join("work").display()
        ),
    );
    let child = start(dir.path(), &spec);
    let pid = child.id();
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(1), "a failed run exits 1: {stderr}");
    assert!(stderr.contains("the-disk-is-on-fire") && stderr.contains("exit code 3"), "{stderr}");
    assert_eq!(common::leftovers(&format!("fslab-tb-{pid}-")), Vec::<String>::new());
}

#[test]
fn sigkill_leftovers_are_removed_by_cleanup() {
    if !common::root_or_skip() {
        return;
    }
    // Not while another test runs `fslab cleanup` over everything stale.
    let _serial = crate::safety::cleanup_lock();
    let dir = common::workdir("fslab-life");
    let spec = sleeper_spec(dir.path(), "5m");
    let mut child = start(dir.path(), &spec);
    let needle = wait_for_testbed(&mut child);
    child.kill().unwrap();
    let _ = child.wait();
    // The workload's sleep was in its own process group; it may outlive fslab.
    let left = common::leftovers(&needle);
    assert!(left.iter().any(|l| l.starts_with("mount")), "SIGKILL should leave the mount: {left:?}");
    assert!(left.iter().any(|l| l.starts_with("loop")), "SIGKILL should leave the loop device: {left:?}");

    let out = Command::new(common::fslab_bin())
        .arg("cleanup")
        .arg("--workdir")
        .arg(dir.path().join("work"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("removed mount") && stdout.contains("removed loop device"), "{stdout}");
    assert_eq!(common::leftovers(&needle), Vec::<String>::new());
    assert_eq!(common::testbed_dirs(&dir.path().join("work")), Vec::<String>::new());
}

#[test]
fn not_root_gets_a_clear_message() {
    // Runs as `nobody` when we are root; as ourselves otherwise.
    let dir = tempfile::tempdir().unwrap();
    let spec = common::write_spec(dir.path(), "e.toml", "name = \"x\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n[[workload]]\nkind = \"command\"\ncommand = \"true\"\n");
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&spec, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let mut cmd = Command::new(common::fslab_bin());
    cmd.arg("run").arg(&spec).arg("--db").arg(dir.path().join("x.db"));
    if nix::unistd::geteuid().is_root() {
        use std::os::unix::process::CommandExt;
        cmd.uid(65534).gid(65534);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "environment/privilege problems exit 3: {stderr}");
    assert!(stderr.contains("needs root"), "{stderr}");
}
