//! Does KVM work for this guest? `/dev/kvm` existing is not enough: on some
//! hosts (nested virtualisation) QEMU with KVM aborts ("failed to set MSR
//! 0x10a") or spins at 100% CPU printing nothing. So the probe boots the
//! kernel itself under KVM, with the machine and CPU model virtme-ng uses
//! under KVM with `--disable-microvm` (QEMU's default `pc`, `-cpu host`),
//! and requires the kernel's first console line
//! ("Linux version …", printed within milliseconds under KVM) within
//! [`PROBE_TIMEOUT`]; otherwise it kills QEMU and reports why. The result is
//! cached per process and kernel image.

use std::collections::HashMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{LazyLock, Mutex};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::sys::contain::{kill_group, spawn_contained};
use crate::sys::signals::cancelled;

/// How long the kernel gets to print its first line under KVM.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

static RESULTS: LazyLock<Mutex<HashMap<PathBuf, Result<(), String>>>> = LazyLock::new(Default::default);

/// Ok when `image` starts under KVM; Err with the reason otherwise. `dir`
/// holds the probe's console log; `name` (carrying fslab's marker) names the
/// QEMU process; `cgroup_procs`, when given, is joined by QEMU.
pub fn probe(qemu: &Path, image: &Path, dir: &Path, name: &str, cgroup_procs: Option<&Path>) -> Result<(), String> {
    if let Some(known) = RESULTS.lock().unwrap_or_else(|e| e.into_inner()).get(image) {
        return known.clone();
    }
    let result = run_probe(qemu, image, dir, name, cgroup_procs);
    // An interrupted probe says nothing about KVM; do not remember it.
    if !cancelled() {
        RESULTS.lock().unwrap_or_else(|e| e.into_inner()).insert(image.to_path_buf(), result.clone());
    }
    result
}

fn run_probe(qemu: &Path, image: &Path, dir: &Path, name: &str, cgroup_procs: Option<&Path>) -> Result<(), String> {
    if let Err(e) = fs::OpenOptions::new().read(true).write(true).open("/dev/kvm") {
        return Err(format!("/dev/kvm cannot be opened: {e}"));
    }
    let log = dir.join("kvm-probe.log");
    let stderr = File::create(dir.join("kvm-probe.stderr")).map_err(|e| format!("creating the probe log: {e}"))?;
    let mut cmd = Command::new(qemu);
    cmd.args(["-name", name, "-machine", "accel=kvm", "-cpu", "host", "-m", "256M", "-smp", "1"])
        .args(["-nodefaults", "-display", "none", "-no-reboot"])
        .arg("-serial")
        .arg(format!("file:{}", log.display()))
        .arg("-kernel")
        .arg(image)
        .args(["-append", "console=ttyS0 earlyprintk=serial,ttyS0,115200 loglevel=8 panic=-1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    let mut child = spawn_contained(cmd, cgroup_procs).map_err(|e| format!("starting {}: {e:#}", qemu.display()))?;
    let pid = child.id() as libc::pid_t;
    let started = Instant::now();
    let outcome = loop {
        if fs::read_to_string(&log).is_ok_and(|t| t.contains("Linux version")) {
            break Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            let why = fs::read_to_string(dir.join("kvm-probe.stderr")).unwrap_or_default();
            break Err(format!("QEMU with KVM exited ({status}) before the kernel printed anything: {}", why.trim()));
        }
        if cancelled() {
            break Err("interrupted".to_string());
        }
        if started.elapsed() >= PROBE_TIMEOUT {
            break Err(format!(
                "under KVM the kernel printed nothing within {} s (QEMU hangs with KVM on this host)",
                PROBE_TIMEOUT.as_secs()
            ));
        }
        sleep(Duration::from_millis(20));
    };
    kill_group(pid);
    let _ = child.wait();
    outcome
}
