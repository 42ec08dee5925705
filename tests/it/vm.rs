//! Kernels under test in VMs, on the real thing: Debian kernel packages
//! (found and downloaded once by fslab's own resolver into the shared test
//! kernel cache, see [`vm_prerequisites`]), virtme-ng, QEMU (TCG on
//! the test machines, KVM where the probe finds it works), the fslab binary
//! as the guest agent. Boots are expensive (10-45 s each under TCG on two
//! cores), so each booted VM is asked everything it can answer.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use fslab::kernel::source::{build_tree::BuildTree, deb_file::DebFile, image::Image};
use fslab::kernel::{self, KernelArtifacts, KernelSource};
use fslab::vm::{self, Accel, Failure, VmConfig, VmError, VmSession};

/// One VM at a time in this test process: a TCG guest keeps host cores
/// busy, and two of them at once on a 2-core machine starve the timing
/// tests that run beside them.
static ONE_VM: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub(crate) fn one_vm() -> std::sync::MutexGuard<'static, ()> {
    ONE_VM.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the guest instruction counter can run: QEMU's plugin beside the
/// fslab under test (or where fslab finds it). Says why on skip.
pub(crate) fn icount_plugin_or_skip() -> bool {
    let beside = Path::new(common::fslab_bin()).with_file_name(fslab::vm::icount::PLUGIN_FILE);
    if fslab::vm::icount::plugin().is_some() || beside.is_file() {
        return true;
    }
    fslab::testsupport::skip(&format!(
        "no {} beside {} (cargo build -p fslab-qemu-icount; scripts/test builds it)",
        fslab::vm::icount::PLUGIN_FILE,
        common::fslab_bin()
    ));
    false
}

/// Root, the VM tools and the instruction counter: what a test that boots
/// a built kernel and reads `vm/instructions` needs. Says why on skip.
pub(crate) fn counted_vm_or_skip() -> bool {
    if !common::root_or_skip() {
        return false;
    }
    if let Err(missing) = fslab::vm::tools::discover() {
        fslab::testsupport::skip(&format!("{missing}"));
        return false;
    }
    icount_plugin_or_skip()
}

/// The test kernels' home, shared by every test and test run.
pub(crate) fn kernels_dir() -> PathBuf {
    std::env::var_os("FSLAB_TEST_KERNELS").map(PathBuf::from).unwrap_or_else(|| "/var/tmp/fslab-test-kernels".into())
}

/// The kernel cache the tests share (`FSLAB_KERNEL_CACHE` of the fslab they run).
pub(crate) fn kernel_cache() -> PathBuf {
    kernels_dir().join("cache")
}

/// The newest Debian cloud kernel of the series `version` (`6.1`), as
/// `kernel = "debian:<version>-cloud"` resolves it: found in the archive
/// lists and downloaded by fslab's resolver into the shared test cache
/// (once; the lists are refreshed daily).
pub(crate) fn archive_kernel(
    version: &str,
) -> anyhow::Result<(fslab::kernel::source::debian_image::DebianImage, PathBuf)> {
    use fslab::kernel::debian::Archive;
    use fslab::kernel::source::debian_image::DebianImage;
    let found =
        DebianImage::find(&format!("debian:{version}-cloud"), &kernel_cache()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let deb = Archive::at(&kernel_cache()).download(&found.package)?;
    Ok((found, deb))
}

/// The package `linux-image-<version>…-cloud-amd64` ([`archive_kernel`]).
fn kernel_deb(version: &str) -> anyhow::Result<PathBuf> {
    Ok(archive_kernel(version.trim_end_matches('.'))?.1)
}

/// Root, the VM tools and the kernel package `version`; otherwise a skip
/// (a failure under CI=true).
pub(crate) fn vm_prerequisites(version: &str) -> Option<PathBuf> {
    if !common::root_or_skip() {
        return None;
    }
    if let Err(missing) = vm::tools::discover() {
        fslab::testsupport::skip(&format!("{missing}"));
        return None;
    }
    match kernel_deb(version) {
        Ok(deb) => Some(deb),
        Err(e) => {
            fslab::testsupport::skip(&format!("no Debian {version} cloud kernel (is the network down?): {e:#}"));
            None
        }
    }
}

/// Unpacked once and shared by every test and run (the cache is keyed by content).
pub(crate) fn resolve_deb(deb: &Path) -> KernelArtifacts {
    kernel::resolve(&KernelSource::Deb(DebFile::at(deb).unwrap()), &kernel_cache()).unwrap()
}

/// What the package name says the release is (`linux-image-<release>_…`).
pub(crate) fn release_from_name(deb: &Path) -> String {
    let name = deb.file_name().unwrap().to_string_lossy().into_owned();
    name.strip_prefix("linux-image-").unwrap().split('_').next().unwrap().to_string()
}

fn config(memory_mib: u64) -> VmConfig {
    VmConfig {
        cpus: 2,
        memory_mib,
        agent: Some(PathBuf::from(common::fslab_bin())),
        boot_timeout: Duration::from_secs(300),
        ..VmConfig::default()
    }
}

/// VM processes, cgroups and directories that carry `needle`.
fn vm_leftovers(needle: &str, workdir: &Path) -> Vec<String> {
    let mut found: Vec<String> = vm::leftovers::vm_processes()
        .into_iter()
        .filter(|p| p.cmdline.contains(needle))
        .map(|p| format!("process {} {}", p.pid, p.cmdline))
        .collect();
    found.extend(common::leftovers(needle));
    for entry in std::fs::read_dir(workdir).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().contains(needle) {
            found.push(format!("directory {}", entry.path().display()));
        }
    }
    found
}

fn vm_error(e: &anyhow::Error) -> &VmError {
    e.downcast_ref::<VmError>().unwrap_or_else(|| panic!("not a VM error: {e:#}"))
}

/// Boot the packaged kernel `version` with a testbed disk and the modules a
/// testbed needs (with udev in the guest or, by default, without), and
/// check everything the guest reports.
fn boot_and_check(version: &str, end_with_timeout: bool, udev: bool) {
    let Some(deb) = vm_prerequisites(version) else { return };
    let _one = one_vm();
    let kernel = resolve_deb(&deb);
    assert_eq!(kernel.release, release_from_name(&deb), "the setup header and the package name disagree");
    assert!(kernel.config.as_ref().is_some_and(|c| c.is_file()), "{kernel:?}");
    let work = common::workdir("fslab-vm");
    let mut cfg = config(1024);
    cfg.disk_bytes = Some(256 << 20);
    cfg.modules = ["loop", "xfs", "btrfs", "squashfs", "erofs"].map(String::from).to_vec();
    cfg.udev = udev;
    let mut session = VmSession::boot(&kernel, &cfg, work.path()).unwrap_or_else(|e| panic!("{e:#}"));
    let name = session.name().to_string();
    assert!(!vm_leftovers(&name, work.path()).is_empty(), "a running VM must be visible to the leak check");

    let summary = session.summary();
    assert_eq!(summary.guest_release, kernel.release);
    if session.accelerator() == Accel::Tcg {
        assert!(session.warnings().iter().any(|w| w == vm::TCG_WARNING), "{:?}", session.warnings());
    }

    let facts = session.probe().unwrap();
    assert_eq!(facts.environment.kernel_release, kernel.release, "the guest runs its own kernel");
    assert_eq!(facts.environment.cpu_count, 2);
    assert!(facts.environment.mem_total_kb > 700 * 1024 && facts.environment.mem_total_kb <= 1024 * 1024, "{facts:?}");
    let disk = facts.disk.as_ref().expect("the testbed disk is found by its serial");
    assert_eq!(disk.size_bytes, 256 << 20);
    assert_eq!(session.disk().unwrap().device, disk.path);
    assert_eq!(facts.cgroup.version, 2, "{:?}", facts.cgroup);
    assert!(facts.cgroup.controllers.iter().any(|c| c == "io"), "{:?}", facts.cgroup);
    assert_eq!(facts.tracefs.as_deref(), Some("/sys/kernel/tracing"));
    assert_eq!(facts.udevd_running, udev, "udev runs in the guest only when asked for");
    for module in ["virtio_blk", "loop", "xfs", "btrfs", "squashfs", "erofs"] {
        assert!(
            facts.modules.iter().any(|m| m == module) || facts.filesystems.iter().any(|f| f == module),
            "{module} should be loaded: {:?}",
            facts.modules
        );
    }

    let back = session.request("ping", serde_json::json!({"x": [1, 2, 3]})).unwrap();
    assert_eq!(back, serde_json::json!({"x": [1, 2, 3]}));
    let err = session.request("no-such-kind", serde_json::Value::Null).unwrap_err();
    assert!(vm_error(&err).vm_alive() && err.to_string().contains("knows no request kind `no-such-kind`"), "{err:#}");
    assert_eq!(session.request("ping", serde_json::json!(7)).unwrap(), serde_json::json!(7), "alive after an error");

    if end_with_timeout {
        // probe runs several programs in the guest: never within a millisecond.
        let err = session.request_with_timeout("probe", serde_json::Value::Null, Duration::from_millis(1)).unwrap_err();
        assert!(matches!(vm_error(&err).failure, Failure::RequestTimeout { .. }), "{err:#}");
        assert!(!session.is_alive());
        let err = session.request("ping", serde_json::Value::Null).unwrap_err();
        assert_eq!(vm_error(&err).failure, Failure::Dead);
        drop(session);
    } else {
        session.shutdown().unwrap();
    }
    assert_eq!(vm_leftovers(&name, work.path()), Vec::<String>::new());
}

#[test]
fn debian_6_1_boots_probes_and_shuts_down() {
    boot_and_check("6.1.", false, false);
}

#[test]
fn debian_6_12_boots_with_udev_probes_and_a_request_timeout_kills_it() {
    boot_and_check("6.12.", true, true);
}

#[test]
fn a_kernel_that_cannot_mount_its_root_fails_with_the_console_tail() {
    let Some(deb) = vm_prerequisites("6.1.") else { return };
    let _one = one_vm();
    // The image without its modules: virtiofs is a module, so the root cannot be mounted.
    let image = resolve_deb(&deb).image;
    let kernel =
        kernel::resolve(&KernelSource::Image(Image::at(&image, None, None).unwrap()), Path::new("/nonexistent"))
            .unwrap();
    assert_eq!(kernel.modules_dir, None);
    let work = common::workdir("fslab-vm");
    let mut cfg = config(512);
    cfg.accel = Accel::Tcg;
    let started = Instant::now();
    let err = VmSession::boot(&kernel, &cfg, work.path()).unwrap_err();
    fslab::testsupport::did_not_hang(
        started,
        cfg.boot_timeout,
        "a boot that panics (it must not wait for the boot timeout)",
    );
    let vm_err = vm_error(&err);
    assert!(matches!(vm_err.failure, Failure::Exited { .. }), "{err:#}");
    let text = err.to_string();
    assert!(text.contains("the guest kernel panicked"), "{text}");
    assert!(vm_err.console_tail.contains("Unable to mount root fs"), "{text}");
    assert!(vm_err.session.starts_with(&format!("fslab-tb-{}-s", std::process::id())), "{vm_err:?}");
    assert_eq!(vm_leftovers(&vm_err.session, work.path()), Vec::<String>::new());
}

#[test]
fn a_boot_that_does_not_finish_in_time_is_killed() {
    let Some(deb) = vm_prerequisites("6.12.") else { return };
    let _one = one_vm();
    let kernel = resolve_deb(&deb);
    let work = common::workdir("fslab-vm");
    let mut cfg = config(512);
    cfg.accel = Accel::Tcg;
    cfg.boot_timeout = Duration::from_secs(2);
    let started = Instant::now();
    let err = VmSession::boot(&kernel, &cfg, work.path()).unwrap_err();
    fslab::testsupport::did_not_hang(started, Duration::from_secs(30), "killing a boot past its timeout");
    assert_eq!(vm_error(&err).failure, Failure::BootTimeout(Duration::from_secs(2)), "{err:#}");
    assert!(err.to_string().contains("did not become ready within 2 s"), "{err:#}");
    assert_eq!(vm_leftovers(&vm_error(&err).session, work.path()), Vec::<String>::new());
    let work_entries = std::fs::read_dir(work.path()).unwrap().count();
    assert_eq!(work_entries, 0, "the session directory is removed");
}

#[test]
fn kernel_sources_resolve_to_bootable_artifacts() {
    let Some(deb) = vm_prerequisites("6.1.") else { return };
    let cache = common::workdir("fslab-kcache");
    // Two resolvers at once: one unpacks, the other waits and reuses.
    let resolved: Vec<KernelArtifacts> = (0..2)
        .map(|_| {
            let (deb, cache) = (deb.clone(), cache.path().to_path_buf());
            std::thread::spawn(move || kernel::resolve(&KernelSource::Deb(DebFile::at(&deb).unwrap()), &cache).unwrap())
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    assert_eq!(resolved[0], resolved[1]);
    let deb_kernel = &resolved[0];
    let entries: Vec<String> = std::fs::read_dir(cache.path().join("kernels"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert_eq!(entries, vec![deb_kernel.sha256.clone()], "one complete entry, no temporary directories");
    let moddir = deb_kernel.modules_dir.clone().unwrap();
    assert!(moddir.join("modules.dep").is_file(), "depmod ran in the cache");
    assert!(deb_kernel.image.starts_with(cache.path()));

    // An image with a separate modules directory and config: staged with links.
    let image_source =
        KernelSource::Image(Image::at(&deb_kernel.image, Some(&moddir), deb_kernel.config.as_deref()).unwrap());
    let staged = kernel::resolve(&image_source, cache.path()).unwrap();
    assert_eq!(staged.release, deb_kernel.release);
    assert_ne!(staged.image, deb_kernel.image);
    let staged_moddir = staged.modules_dir.clone().unwrap();
    assert!(staged_moddir.join("modules.dep").is_file());
    let xfs = std::fs::read_dir(staged_moddir.join("kernel/fs/xfs")).unwrap().next().unwrap().unwrap().path();
    assert!(std::fs::symlink_metadata(&xfs).unwrap().file_type().is_symlink(), "modules are linked, not copied");
    assert_eq!(kernel::resolve(&image_source, cache.path()).unwrap(), staged, "the staged root is reused");
    assert!(staged.guest_dirs.contains(&moddir), "the guest must see what the links point into");

    // A build tree: image and .config found in it; no modules.order, no modules.
    let tree = cache.path().join("linux");
    std::fs::create_dir_all(tree.join("arch/x86/boot")).unwrap();
    std::fs::copy(&deb_kernel.image, tree.join("arch/x86/boot/bzImage")).unwrap();
    std::fs::copy(deb_kernel.config.as_ref().unwrap(), tree.join(".config")).unwrap();
    let built = kernel::resolve(&KernelSource::BuildTree(BuildTree::at(&tree).unwrap()), cache.path()).unwrap();
    assert_eq!(built.release, deb_kernel.release);
    assert_eq!(built.config, Some(tree.join(".config")));
    assert_eq!(built.modules_dir, None);

    // Never a write into the user's modules directory.
    assert!(!moddir.join("modules.dep.tmp").exists());
}

#[test]
fn a_garbage_kernel_fails_before_any_vm_starts() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-vm");
    let garbage = dir.path().join("vmlinuz-garbage");
    std::fs::write(&garbage, vec![0xA5u8; 64 << 10]).unwrap();
    let work = dir.path().join("work");
    let out = Command::new(common::fslab_bin())
        .args(["vm-probe", garbage.to_str().unwrap(), "--workdir", work.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("vmlinuz-garbage") && stderr.contains("not a usable x86 kernel image"), "{stderr}");
    assert!(!work.exists(), "nothing was created for a kernel that cannot boot");
}

/// `fslab vm-probe` of a package, held up after it is ready (TCG: these
/// tests are about teardown, not speed, and skip the KVM probe).
fn start_probe(deb: &Path, work: &Path) -> Child {
    Command::new(common::fslab_bin())
        .arg("vm-probe")
        .arg(deb)
        .arg("--workdir")
        .arg(work)
        .arg("--cache")
        .arg(kernels_dir().join("cache"))
        .args(["--memory", "512MiB", "--disk", "64MiB", "--hold", "600s", "--boot-timeout", "300s", "--accel", "tcg"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait until `child`'s VM has reached `stage`: QEMU started, or the agent ready.
fn wait_for(child: &mut Child, work: &Path, ready: bool) -> String {
    let needle = format!("fslab-tb-{}-s", child.id());
    let deadline = Instant::now() + Duration::from_secs(300);
    while Instant::now() < deadline {
        let qemu = vm::leftovers::vm_processes().iter().any(|p| {
            p.cmdline.contains(&needle) && p.cmdline.contains("qemu-system") && !p.cmdline.contains("kvm-probe")
        });
        let agent_ready = std::fs::read_dir(work).into_iter().flatten().flatten().any(|e| {
            e.file_name().to_string_lossy().contains(&needle) && e.path().join("exchange/ready.json").exists()
        });
        if qemu && (!ready || agent_ready) {
            return needle;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("vm-probe exited ({status}) before its VM was up: {err}");
        }
        sleep(Duration::from_millis(100));
    }
    panic!("the VM never came up");
}

fn sigterm_test(ready: bool) {
    let Some(deb) = vm_prerequisites("6.1.") else { return };
    let _one = one_vm();
    resolve_deb(&deb);
    let dir = common::workdir("fslab-vm");
    let work = dir.path().join("work");
    let mut child = start_probe(&deb, &work);
    let needle = wait_for(&mut child, &work, ready);
    assert!(!vm_leftovers(&needle, &work).is_empty());
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    fslab::testsupport::did_not_hang(started, Duration::from_secs(30), "fslab stopping");
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert_eq!(vm_leftovers(&needle, &work), Vec::<String>::new());
}

#[test]
fn sigterm_while_booting_leaves_nothing() {
    sigterm_test(false);
}

#[test]
fn sigterm_while_running_leaves_nothing() {
    sigterm_test(true);
}

#[test]
fn sigkill_leftovers_are_removed_by_cleanup() {
    let Some(deb) = vm_prerequisites("6.1.") else { return };
    let _one = one_vm();
    resolve_deb(&deb);
    let dir = common::workdir("fslab-vm");
    let work = dir.path().join("work");
    let mut child = start_probe(&deb, &work);
    let needle = wait_for(&mut child, &work, true);
    child.kill().unwrap();
    let _ = child.wait();
    let left = vm_leftovers(&needle, &work);
    assert!(left.iter().any(|l| l.contains("qemu-system")), "SIGKILL leaves QEMU running: {left:?}");
    assert!(left.iter().any(|l| l.starts_with("directory")), "{left:?}");

    let out = Command::new(common::fslab_bin()).arg("cleanup").arg("--workdir").arg(&work).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("removed") && stdout.contains(&needle), "{stdout}");
    // virtiofsd may take a moment to notice QEMU is gone; nothing may stay.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !vm_leftovers(&needle, &work).is_empty() && Instant::now() < deadline {
        sleep(Duration::from_millis(100));
    }
    assert_eq!(vm_leftovers(&needle, &work), Vec::<String>::new());
}
