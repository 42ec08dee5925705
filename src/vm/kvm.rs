//! Does KVM work for this guest? `/dev/kvm` existing is not enough: on some
//! hosts (nested virtualisation) QEMU with KVM aborts ("failed to set MSR
//! 0x10a") or spins at 100% CPU printing nothing. So the probe boots the
//! kernel itself under KVM, with the machine and CPU model virtme-ng uses
//! under KVM with `--disable-microvm` (QEMU's default `pc`, `-cpu host`),
//! and requires the kernel's first console line
//! ("Linux version …", printed within milliseconds under KVM) within
//! [`PROBE_TIMEOUT`]; otherwise it kills QEMU and reports why. The result is
//! cached per process and kernel image, and on disk per host boot
//! ([`BOOT_CACHE`], keyed by `/proc/sys/kernel/random/boot_id`, QEMU and the
//! kernel image's path, size and mtime), so on a host where QEMU hangs with
//! KVM only the first fslab process after a reboot waits for the probe.
//!
//! Where KVM cannot work for a stock guest the answer comes from the host's
//! modules in microseconds, without starting QEMU: a `/dev/kvm` served only
//! by `kvm_pvm` (pagetable-based virtualisation, for guests built as PVM
//! guests; a stock kernel aborts in QEMU or hangs after decompression) is
//! not usable.

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

/// Where probe answers are kept for the rest of the host's boot (tmpfs:
/// gone at reboot, when the answer may change anyway).
pub const BOOT_CACHE: &str = "/run/fslab/kvm-probe";

static RESULTS: LazyLock<Mutex<HashMap<PathBuf, Result<(), String>>>> = LazyLock::new(Default::default);

/// Ok when `image` starts under KVM; Err with the reason otherwise. `dir`
/// holds the probe's console log; `name` (carrying fslab's marker) names the
/// QEMU process; `cgroup_procs`, when given, is joined by QEMU.
pub fn probe(qemu: &Path, image: &Path, dir: &Path, name: &str, cgroup_procs: Option<&Path>) -> Result<(), String> {
    if let Some(known) = RESULTS.lock().unwrap_or_else(|e| e.into_inner()).get(image) {
        return known.clone();
    }
    let result = quick_answer().unwrap_or_else(|| {
        // Only the boot probe's answer is kept on disk: the quick checks
        // cost nothing and may change within a boot (permissions).
        let stored = boot_key(qemu, image).map(|k| Path::new(BOOT_CACHE).join(k));
        if let Some(answer) = stored.as_deref().and_then(read_answer) {
            return answer;
        }
        let answer = run_probe(qemu, image, dir, name, cgroup_procs);
        if let Some(path) = stored.filter(|_| !cancelled()) {
            write_answer(&path, &answer);
        }
        answer
    });
    // An interrupted probe says nothing about KVM; do not remember it.
    if !cancelled() {
        RESULTS.lock().unwrap_or_else(|e| e.into_inner()).insert(image.to_path_buf(), result.clone());
    }
    result
}

/// The answer where it needs no QEMU (None: only a boot can tell).
fn quick_answer() -> Option<Result<(), String>> {
    if let Err(e) = fs::OpenOptions::new().read(true).write(true).open("/dev/kvm") {
        return Some(Err(format!("/dev/kvm cannot be opened: {e}")));
    }
    unusable_provider(Path::new("/sys/module")).map(Err)
}

/// The on-disk cache's name for this boot, QEMU and kernel image.
fn boot_key(qemu: &Path, image: &Path) -> Option<String> {
    use sha2::{Digest, Sha256};
    use std::os::unix::fs::MetadataExt;
    let boot_id = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let mut h = Sha256::new();
    h.update(boot_id.trim().as_bytes());
    for path in [qemu, image] {
        let meta = fs::metadata(path).ok()?;
        h.update(path.as_os_str().as_encoded_bytes());
        h.update(meta.size().to_le_bytes());
        h.update(meta.mtime().to_le_bytes());
        h.update(meta.mtime_nsec().to_le_bytes());
    }
    Some(h.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect())
}

/// A stored answer: `ok`, or `err` and the reason on the next line.
fn read_answer(path: &Path) -> Option<Result<(), String>> {
    let text = fs::read_to_string(path).ok()?;
    match text.split_once('\n') {
        Some(("err", why)) => Some(Err(why.to_string())),
        _ if text == "ok" => Some(Ok(())),
        _ => None,
    }
}

/// Store an answer (written whole under a temporary name, then renamed;
/// failing to store only costs the next process a probe).
fn write_answer(path: &Path, answer: &Result<(), String>) {
    let text = match answer {
        Ok(()) => "ok".to_string(),
        Err(why) => format!("err\n{why}"),
    };
    let Some(dir) = path.parent() else { return };
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let _ = fs::create_dir_all(dir).and_then(|()| fs::write(&tmp, text)).and_then(|()| fs::rename(&tmp, path));
    let _ = fs::remove_file(&tmp);
}

fn run_probe(qemu: &Path, image: &Path, dir: &Path, name: &str, cgroup_procs: Option<&Path>) -> Result<(), String> {
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

/// Why the host's KVM provider cannot run a stock guest, from the loaded
/// modules under `sys_module` (`/sys/module`), or None when it may (then the
/// boot probe decides).
fn unusable_provider(sys_module: &Path) -> Option<String> {
    let loaded = |m: &str| sys_module.join(m).exists();
    if loaded("kvm_pvm") && !loaded("kvm_intel") && !loaded("kvm_amd") {
        return Some(
            "/dev/kvm is provided by kvm_pvm (pagetable-based virtualisation), which runs only guests \
             built as PVM guests; a stock kernel cannot use it"
                .to_string(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modules(names: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for n in names {
            fs::create_dir(dir.path().join(n)).unwrap();
        }
        dir
    }

    #[test]
    fn stored_answers_read_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("answer");
        assert_eq!(read_answer(&path), None);
        for answer in [Ok(()), Err("QEMU with KVM exited\nwith two lines".to_string())] {
            write_answer(&path, &answer);
            assert_eq!(read_answer(&path), Some(answer));
        }
        fs::write(&path, "garbage").unwrap();
        assert_eq!(read_answer(&path), None);
        let (qemu, image) = (Path::new("/bin/sh"), Path::new("/bin/ls"));
        if Path::new("/proc/sys/kernel/random/boot_id").exists() {
            assert_eq!(boot_key(qemu, image), boot_key(qemu, image));
            assert_ne!(boot_key(qemu, image), boot_key(image, qemu));
        }
    }

    #[test]
    fn kvm_pvm_alone_is_unusable_without_a_probe() {
        let dir = modules(&["kvm", "kvm_pvm"]);
        let why = unusable_provider(dir.path()).expect("kvm_pvm alone must be refused");
        assert!(why.contains("kvm_pvm"), "{why}");
    }

    #[test]
    fn hardware_kvm_goes_to_the_boot_probe() {
        for vendor in ["kvm_intel", "kvm_amd"] {
            assert_eq!(unusable_provider(modules(&["kvm", vendor]).path()), None, "{vendor}");
            // A host may load kvm_pvm beside the hardware module; the probe decides then.
            assert_eq!(unusable_provider(modules(&["kvm", "kvm_pvm", vendor]).path()), None, "{vendor}+pvm");
        }
    }
}
