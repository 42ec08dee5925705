//! A media server that dies, stops or crawls mid-run (issue 28, items 1
//! and 2): the run fails, fslab does not hang on its own FUSE mount, and
//! nothing is left behind; and a model too slow for the workload's timeout
//! is refused (or warned about) when the file is read. Needs root and
//! /dev/fuse; the server is the real `fslab media-serve`, killed and
//! stopped with real signals.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fslab::record::RunStatus;

use crate::common;

fn ready() -> bool {
    if !common::root_or_skip() {
        return false;
    }
    if !Path::new("/dev/fuse").exists() {
        fslab::testsupport::skip("media fault tests need /dev/fuse");
        return false;
    }
    true
}

/// Pids of processes whose command line contains every one of `needles`.
fn pids_with(needles: &[&str]) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = String::from_utf8_lossy(&std::fs::read(e.path().join("cmdline")).ok()?).replace('\0', " ");
            needles.iter().all(|n| cmdline.contains(n)).then_some(pid)
        })
        .collect()
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: plain syscall on a pid this test found.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// One `fslab run` of a media testbed, with everything it may leave
/// behind taken down when dropped (also when an assertion fails): fslab
/// killed, its server continued and killed, `fslab cleanup` of its work
/// directory.
struct FaultRun {
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// `fslab-tb-<fslab's pid>-`: what its testbeds, mounts and server carry.
    needle: String,
    /// A word only this test's workload command line contains.
    tag: String,
}

impl FaultRun {
    /// `device` and `timeout` for a `command` workload that writes a file
    /// named `started` and then `mib` MiB followed by `sync`.
    fn start(device: &str, timeout: &str, mib: u32) -> FaultRun {
        let dir = common::workdir("fslab-media-fault");
        let tag = format!("fault{}", dir.path().file_name().unwrap().to_string_lossy().replace(['-', '.'], ""));
        let text = format!(
            "name = \"fault\"\nrepetitions = 1\nworkdir = \"{}\"\n[[variant]]\nname = \"card\"\nfs = \"ext4\"\n\
             size = \"64MiB\"\ndevice = {device}\n[[workload]]\nkind = \"command\"\ntimeout = \"{timeout}\"\n\
             command = 'touch started && dd if=/dev/zero of={tag} bs=1M count={mib} status=none; sync'\n",
            dir.path().join("work").display()
        );
        let spec = common::write_spec(dir.path(), "fault.toml", &text);
        let child = Command::new(common::fslab_bin())
            .arg("run")
            .arg(&spec)
            .arg("--db")
            .arg(dir.path().join("r.db"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let needle = format!("fslab-tb-{}-", child.id());
        FaultRun { dir, child: Some(child), needle, tag }
    }

    fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// The media server's pid once the workload's measured part has begun
    /// (its `started` file exists).
    fn server_when_measuring(&mut self) -> i32 {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
            let mnt = mountinfo
                .lines()
                .find(|l| l.contains(&self.needle) && l.contains(" - ext4 "))
                .and_then(|l| l.split_whitespace().nth(4).map(String::from));
            if mnt.is_some_and(|m| Path::new(&m).join("started").exists()) {
                let servers = pids_with(&["media-serve", &self.needle]);
                assert_eq!(servers.len(), 1, "one media server: {servers:?}");
                return servers[0];
            }
            assert!(Instant::now() < deadline, "the measured part never began");
            let exited = self.child.as_mut().unwrap().try_wait().unwrap();
            assert!(exited.is_none(), "fslab exited early: {exited:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wait up to `limit` for fslab to exit: its exit code, stdout and
    /// stderr, or None when it was still running (then it is killed).
    fn exit_within(&mut self, limit: Duration) -> Option<(Option<i32>, String, String)> {
        let deadline = Instant::now() + limit;
        let child = self.child.as_mut().unwrap();
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = self.child.take().unwrap().wait_with_output().unwrap();
        Some((
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into(),
            String::from_utf8_lossy(&out.stderr).into(),
        ))
    }

    /// The one stored run: its status and error.
    fn stored_run(&self) -> (RunStatus, Option<String>) {
        let store = fslab::store::Store::open(&self.dir.path().join("r.db")).unwrap();
        let id = store.latest_experiment().unwrap().unwrap();
        let runs = store.runs(id).unwrap();
        assert_eq!(runs.len(), 1, "{runs:?}");
        (runs[0].status, runs[0].error.clone())
    }

    /// Nothing of the run is left: no mount, loop device, cgroup, testbed
    /// directory, server, and no workload process (a `dd` stuck in D state
    /// on the device would show here). Processes get a few seconds to go.
    fn assert_nothing_left(&self) {
        assert_eq!(common::leftovers(&self.needle), Vec::<String>::new());
        assert_eq!(common::testbed_dirs(&self.work()), Vec::<String>::new());
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let servers = pids_with(&["media-serve", &self.needle]);
            let workload = pids_with(&[&self.tag]);
            if servers.is_empty() && workload.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "left running: servers {servers:?}, workload {workload:?} ({})",
                workload.iter().map(|p| proc_state(*p)).collect::<Vec<_>>().join(", ")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn proc_state(pid: i32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(')').next().and_then(|s| s.split_whitespace().next()).unwrap_or("?").to_string()
}

impl Drop for FaultRun {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        for pid in pids_with(&["media-serve", &self.needle]) {
            signal(pid, libc::SIGCONT);
            signal(pid, libc::SIGKILL);
        }
        let _ = Command::new(common::fslab_bin()).arg("cleanup").arg("--workdir").arg(self.work()).output();
    }
}

/// Issue 28.1: `kill -9` of the media server during the measured part of
/// a `dd …; sync` workload. Before, the run was `ok` (the writes failed
/// under the workload, `sync` exits 0) and fslab exited 0; the lost device
/// was a note in the HTML report only. Now the run failed, says why, and
/// fslab exits 1 within seconds, leaving nothing.
#[test]
fn timing_a_killed_media_server_fails_the_run_and_leaves_nothing() {
    if !ready() {
        return;
    }
    let mut run = FaultRun::start("{ model = \"sdcard\" }", "60s", 40);
    let server = run.server_when_measuring();
    std::thread::sleep(Duration::from_millis(500));
    signal(server, libc::SIGKILL);
    let killed = Instant::now();
    let (code, stdout, stderr) = run.exit_within(Duration::from_secs(30)).expect("fslab still running 30 s after");
    eprintln!("kill -9 of the media server → fslab exited {code:?} after {:.2} s", killed.elapsed().as_secs_f64());
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    let output = format!("{stdout}\n{stderr}");
    assert!(output.contains("failed") && output.contains("media server"), "{output}");
    let (status, error) = run.stored_run();
    assert_eq!(status, RunStatus::Failed, "{error:?}");
    assert!(error.as_deref().is_some_and(|e| e.contains("media server")), "{error:?}");
    run.assert_nothing_left();
}

/// Issue 28.2: SIGSTOP on the media server. Before, fslab blocked reading
/// `media/evidence` through the stopped server (no output for minutes, the
/// workload's `sync` in D state). Now the stopped server is noticed, its
/// FUSE connection aborted, and the run fails well within its timeout.
#[test]
fn timing_a_stopped_media_server_fails_the_run_within_its_timeout_and_leaves_nothing() {
    if !ready() {
        return;
    }
    let mut run = FaultRun::start("{ model = \"sdcard\" }", "40s", 40);
    let server = run.server_when_measuring();
    std::thread::sleep(Duration::from_millis(500));
    signal(server, libc::SIGSTOP);
    let stopped = Instant::now();
    let (code, stdout, stderr) = run.exit_within(Duration::from_secs(30)).expect("fslab still running 30 s after");
    eprintln!("SIGSTOP of the media server → fslab exited {code:?} after {:.2} s", stopped.elapsed().as_secs_f64());
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    let (status, error) = run.stored_run();
    assert_eq!(status, RunStatus::Failed);
    assert!(error.as_deref().is_some_and(|e| e.contains("stopped")), "{error:?}");
    run.assert_nothing_left();
}

/// SIGTERM to fslab while its media server is stopped: fslab ends (exit
/// 143) promptly and cleans up, rather than waiting on the stopped server.
#[test]
fn timing_sigterm_while_the_media_server_is_stopped_ends_fslab_and_leaves_nothing() {
    if !ready() {
        return;
    }
    let mut run = FaultRun::start("{ model = \"sdcard\" }", "10m", 40);
    let server = run.server_when_measuring();
    signal(server, libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(300));
    signal(run.child.as_ref().unwrap().id() as i32, libc::SIGTERM);
    let termed = Instant::now();
    let (code, stdout, stderr) = run.exit_within(Duration::from_secs(30)).expect("fslab still running 30 s after");
    eprintln!("SIGTERM with a stopped server → fslab exited {code:?} after {:.2} s", termed.elapsed().as_secs_f64());
    assert_eq!(code, Some(143), "{stdout}\n{stderr}");
    run.assert_nothing_left();
}

/// A live server whose model is very slow (one 1 MiB write takes 21 s at
/// 0.05 MB/s): at the workload's 5 s timeout the workload waits on the
/// device in D state, so killing it is not enough; the connection is
/// aborted and the run fails soon after its timeout. Before, it ran on for
/// as long as the model took (minutes; fslab's own evidence read queued
/// behind the 21 s writes).
#[test]
fn timing_a_crawling_model_fails_the_run_soon_after_its_timeout() {
    if !ready() {
        return;
    }
    let started = Instant::now();
    let mut run = FaultRun::start("{ model = \"sdcard\", write_mbps = 0.05 }", "5s", 4);
    // From fslab's start: provisioning is not paced, but everything after
    // it is (ext4's lazy inode-table init alone keeps the card busy).
    let (code, stdout, stderr) = run.exit_within(Duration::from_secs(60)).expect("fslab still running 60 s after");
    eprintln!("5 s timeout on a crawling model → fslab exited {code:?} after {:.2} s", started.elapsed().as_secs_f64());
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    let (status, error) = run.stored_run();
    assert_eq!(status, RunStatus::Failed);
    assert!(error.as_deref().is_some_and(|e| e.contains("timed out")), "{error:?}");
    run.assert_nothing_left();
}

/// The experiment file of one `ext4` variant on `device` (line 7) and a
/// `workload` (from line 9), parsed from `exp.toml`.
fn load(size: &str, device: &str, workload: &str) -> anyhow::Result<fslab::experiment::Experiment> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("exp.toml");
    let text = format!(
        "name = \"m\"\nrepetitions = 1\n[[variant]]\nname = \"v\"\nfs = \"ext4\"\nsize = \"{size}\"\n\
         device = {device}\n[[workload]]\n{workload}\n"
    );
    std::fs::write(&path, text).unwrap();
    fslab::experiment::load(&path)
}

/// An AU larger than the image it is to serve is refused, naming the key.
#[test]
fn an_allocation_unit_larger_than_the_image_is_refused() {
    let err = load("128MiB", "{ model = \"sdcard\", au = \"1GiB\" }", "kind = \"command\"\ncommand = \"true\"")
        .expect_err("a 1 GiB AU on a 128 MiB image");
    let text = format!("{err:#}");
    common::bed::assert_points_at(&text, 7, "device.au");
    assert!(text.contains("128 MiB") || text.contains("128MiB"), "{text}");
}

/// A model on which one 4 KiB write takes longer than the workload may
/// run is refused with the estimate: `program_latency = "1h"` against the
/// default timeout (1 h), `write_mbps = 0.0001` (41 s per 4 KiB) against
/// `timeout = "20s"`.
#[test]
fn a_model_too_slow_for_the_timeout_is_refused_with_the_estimate() {
    let err =
        load("128MiB", "{ model = \"sdcard\", program_latency = \"1h\" }", "kind = \"command\"\ncommand = \"true\"")
            .expect_err("one write takes an hour");
    let text = format!("{err:#}");
    common::bed::assert_points_at(&text, 7, "device.program_latency");
    assert!(text.contains("timeout"), "{text}");
    let err = load(
        "128MiB",
        "{ model = \"sdcard\", write_mbps = 0.0001 }",
        "kind = \"command\"\ncommand = \"true\"\ntimeout = \"20s\"",
    )
    .expect_err("one 4 KiB write takes 41 s");
    let text = format!("{err:#}");
    common::bed::assert_points_at(&text, 7, "device.write_mbps");
    assert!(text.contains("40.97 s") && text.contains("(20 s)"), "{text}");
    // The same model with time enough for a request loads.
    load(
        "128MiB",
        "{ model = \"sdcard\", write_mbps = 0.05 }",
        "kind = \"command\"\ncommand = \"true\"\ntimeout = \"20s\"",
    )
    .unwrap();
}

/// A model that could not write the image once within the timeout is
/// accepted (the workload may write less) and the estimate said on
/// stderr with the file, line and key: checked through the binary.
#[test]
fn a_model_that_cannot_write_the_image_within_the_timeout_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let text = "name = \"m\"\nrepetitions = 1\n[[variant]]\nname = \"v\"\nfs = \"ext4\"\nsize = \"128MiB\"\n\
                device = { model = \"sdcard\", write_mbps = 0.05 }\n[[workload]]\nkind = \"command\"\n\
                command = \"true\"\ntimeout = \"20s\"\n";
    let path = common::write_spec(dir.path(), "exp.toml", text);
    let out = Command::new(common::fslab_bin()).args(["run", "--dry-run"]).arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("exp.toml:7:") && stderr.contains("`device`") && stderr.contains("20 s"), "{stderr}");
}
