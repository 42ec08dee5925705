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
    /// The testbed's loop device and the path it was attached by (see
    /// [`FaultRun::loop_device`]): detached when dropped if still there.
    loop_device: Option<(PathBuf, String)>,
    /// A `fslab cleanup` this test started: waited for when dropped.
    cleanup: Option<Child>,
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
        FaultRun { dir, child: Some(child), needle, tag, loop_device: None, cleanup: None }
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

    /// The testbed's loop device, noted for [`Drop`]: once the media
    /// server's mount is detached its `/sys` backing file reads `/image`,
    /// and only the path it was attached by still says it is this test's.
    fn loop_device(&mut self) -> PathBuf {
        let (device, _) = fslab::testbed::loopdev::attached()
            .into_iter()
            .find(|(_, backing)| backing.to_string_lossy().contains(&self.needle))
            .expect("the testbed's loop device");
        let attached_as = fslab::testbed::loopdev::backing(&device).unwrap().attached_as;
        self.loop_device = Some((device.clone(), attached_as));
        device
    }

    /// Whether the loop device noted by [`FaultRun::loop_device`] is still
    /// attached to this test's image.
    fn loop_device_left(&self) -> Option<String> {
        let (device, attached_as) = self.loop_device.as_ref()?;
        let now = fslab::testbed::loopdev::backing(device).ok()?;
        let shown = fslab::testbed::loopdev::backing_file(device)?;
        (now.attached_as == *attached_as)
            .then(|| format!("loop {} -> {} ({attached_as})", device.display(), shown.display()))
    }

    /// `fslab cleanup --workdir` of this run's work directory, waited for
    /// up to `limit`: its output, or None when it was still running (it is
    /// then left to [`Drop`], which frees it by killing the server).
    fn cleanup_within(&mut self, limit: Duration) -> Option<std::process::Output> {
        let child = Command::new(common::fslab_bin())
            .arg("cleanup")
            .arg("--workdir")
            .arg(self.work())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let child = self.cleanup.insert(child);
        let deadline = Instant::now() + limit;
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
                eprintln!("fslab cleanup (pid {pid}) still running: state {}, waiting in {wchan}", proc_state(pid));
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(self.cleanup.take().unwrap().wait_with_output().unwrap())
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
        // Killing the server closes its /dev/fuse, which aborts its FUSE
        // connection: whatever waited on it (a hung cleanup too) goes on.
        for pid in pids_with(&["media-serve", &self.needle]) {
            signal(pid, libc::SIGCONT);
            signal(pid, libc::SIGKILL);
        }
        if let Some(mut cleanup) = self.cleanup.take() {
            let _ = cleanup.kill();
            let _ = cleanup.wait();
        }
        let _ = Command::new(common::fslab_bin()).arg("cleanup").arg("--workdir").arg(self.work()).output();
        if let (Some(_), Some((device, _))) = (self.loop_device_left(), &self.loop_device) {
            let _ = fslab::testbed::loopdev::detach(device);
        }
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

/// Issue 28.2, `fslab cleanup` after fslab was SIGKILLed while its media
/// server was stopped. The server leads a process group of its own, which
/// fslab's death orphans with a stopped member: the kernel sends it SIGHUP
/// and SIGCONT, on which it detaches its mount lazily and serves on, as
/// the loop device still holds the image. Its FUSE connection is then in
/// no mountinfo, and the loop device's `/sys` backing file reads `/image`.
/// Stopped again, the server holds the ext4 filesystem's writeback; before,
/// `fslab cleanup` found no media mount to abort and hung unmounting it
/// (and left the loop device, whose path no longer carried the marker).
/// Now it finds the connection through the loop device's backing device,
/// aborts it, kills the server, and leaves nothing.
#[test]
fn cleanup_after_sigkill_while_the_media_server_is_stopped_leaves_nothing() {
    if !ready() {
        return;
    }
    let mut run = FaultRun::start("{ model = \"sdcard\" }", "60s", 40);
    let server = run.server_when_measuring();
    let device = run.loop_device();
    std::thread::sleep(Duration::from_millis(500));
    signal(server, libc::SIGSTOP);
    wait_for(|| proc_state(server) == "T", "the media server to stop");
    let mut fslab = run.child.take().unwrap();
    fslab.kill().unwrap();
    fslab.wait().unwrap();
    // The orphaned server's SIGHUP: its mount goes, the connection stays.
    wait_for(|| !media_mounted(&run.needle), "the continued media server to detach its mount");
    assert!(
        fslab::testbed::loopdev::backing_file(&device).is_some_and(|b| !b.to_string_lossy().contains(&run.needle)),
        "the loop device's /sys backing file no longer names the testbed"
    );
    signal(server, libc::SIGSTOP);
    wait_for(|| proc_state(server) == "T", "the media server to stop again");

    let started = Instant::now();
    let cleanup = run.cleanup_within(CLEANUP_BOUND);
    fslab::testsupport::did_not_hang(started, CLEANUP_BOUND, "fslab cleanup with the media server stopped");
    let out = cleanup.expect("fslab cleanup ended");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains(&format!("removed loop device {} (", device.display())), "{stdout}");
    assert_eq!(run.loop_device_left(), None, "{stdout}");
    run.assert_nothing_left();
}

/// How long `fslab cleanup` may take before it counts as hung: it takes a
/// few seconds (its media servers get 2 s to exit).
const CLEANUP_BOUND: Duration = Duration::from_secs(90);

/// Wait up to 20 s for `what`.
fn wait_for(done: impl Fn() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "waited 20 s for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a media server's mount of the run whose testbeds carry
/// `needle` is in mountinfo.
fn media_mounted(needle: &str) -> bool {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    mountinfo.lines().any(|l| l.contains(needle) && l.contains(" fslab-media "))
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
