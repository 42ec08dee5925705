//! udev in the guest: skipped unless a file asks for it (`vm.udev`).
//!
//! virtme-ng's init (both its Rust `virtme-ng-init` and the shell
//! `virtme-init`) starts systemd-udevd when it finds one, runs
//! `udevadm trigger` (the coldplug) and waits in `udevadm settle`. Under
//! TCG that was 5-7 s of an 11-15 s boot to ready, the same with a
//! module-less `minimal` kernel (so rule processing, not module loading;
//! BENCHMARKS.md, issue 27), and udevd kept running beside the measured
//! work, answering every close of a written block device with rules. fslab's
//! guests need none of it: devtmpfs makes the device nodes, the agent loads
//! the modules it needs and finds its disk by serial.
//!
//! virtme-ng (1.42 and its main branch) has no switch for it. What it does
//! have: both inits put the `PATH` they are started with (a `PATH=` word on
//! the kernel command line reaches init's environment) before their
//! defaults, and call `udevadm` by name. So the guest gets a `PATH=` word
//! naming [`shim_dir`], whose `udevadm` stops udevd at `trigger` and returns
//! at once from `settle`, and runs the real `udevadm` for anything else.
//! The agent removes the directory from its `PATH` first thing, so workloads
//! see the guest's normal one. (A `--rodir` over the guest's
//! `/usr/lib/systemd` cannot hide udevd: virtme-ng-init looks for it before
//! it mounts those, and its `/usr` overlay covers them anyway; hiding it on
//! the host in a mount namespace would copy every host mount into a
//! namespace that pins them while the VM lives.)

use std::ffi::{OsStr, OsString};
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The shim's name: what virtme-ng's init runs.
const SHIM_NAME: &str = "udevadm";

/// The shim. Only shell builtins before `exec`: each process start costs
/// tens of milliseconds under emulation. `trigger` is called twice (the
/// subsystems, then the devices); the first ends udevd (a daemon whose
/// parent has returned, so it exists by then), the second finds none. It
/// stops udevd only when init (pid 1) called it: run anywhere else, on a
/// host above all, it leaves every process alone.
const SHIM: &str = r#"#!/bin/sh
# Written by fslab (src/vm/udev.rs): in fslab's guests virtme-ng's init
# skips udev's coldplug and settle; udevd is stopped. Anything else reaches
# the real udevadm.
PATH=${PATH#"${0%/*}:"}
case "$1" in
trigger)
    [ "$PPID" = 1 ] || exit 0
    for comm in /proc/[0-9]*/comm; do
        read -r name < "$comm" 2>/dev/null || continue
        case "$name" in
        systemd-udevd|udevd) pid=${comm#/proc/}; kill "${pid%/comm}" 2>/dev/null ;;
        esac
    done
    exit 0 ;;
settle) exit 0 ;;
esac
exec udevadm "$@"
"#;

/// The directory the guest's init finds the shim in, made (or brought up
/// to date) now: `guest-bin/` in fslab's tools prefix, a host directory the
/// guest sees at boot through its root (one under a directory virtme-ng
/// covers in the guest would appear only after init looked). None when the
/// prefix is such a directory: udev then runs.
pub fn shim_dir() -> Result<Option<PathBuf>> {
    let dir = super::tools::tools_prefix().join("guest-bin");
    if super::hidden_in_guest(&dir) {
        return Ok(None);
    }
    let dir = crate::sys::trusted::ensure_dir(&dir)
        .with_context(|| format!("the guest's shim directory {}", dir.display()))?;
    let shim = dir.join(SHIM_NAME);
    if fs::read_to_string(&shim).ok().as_deref() != Some(SHIM) {
        // Sessions may start side by side: each writes its own file and renames it into place.
        crate::sys::trusted::write_replacing_with_mode(&shim, SHIM.as_bytes(), 0o755)
            .with_context(|| format!("writing {}", shim.display()))?;
    }
    Ok(Some(dir))
}

/// The kernel command line word that puts `dir` first on init's `PATH`.
/// The usual directories follow: virtme-ng's initramfs (older kernels,
/// modules loaded early) runs its busybox script with this `PATH` before
/// virtme-ng's init adds its own defaults.
pub fn kernel_arg(dir: &str) -> String {
    format!("PATH={dir}:/usr/sbin:/usr/bin:/sbin:/bin")
}

/// Take `dir` out of this process's `PATH` (the agent, before it starts
/// anything): the shim is for init alone.
pub fn leave_path(dir: &str) {
    if let Some(kept) = std::env::var_os("PATH").and_then(|path| without(&path, dir)) {
        std::env::set_var("PATH", kept);
    }
}

/// `path` without `dir` (None: nothing to change).
fn without(path: &OsStr, dir: &str) -> Option<OsString> {
    let dirs: Vec<PathBuf> = std::env::split_paths(path).collect();
    let kept: Vec<&PathBuf> = dirs.iter().filter(|p| p.as_path() != Path::new(dir)).collect();
    (kept.len() != dirs.len()).then(|| std::env::join_paths(kept).ok()).flatten()
}

/// Is a udevd running here? The guest's probe reports it. A udevd that
/// was stopped stays a zombie in the guest (virtme-ng's init does not reap
/// the daemons it orphaned), which is not running.
pub fn udevd_running() -> bool {
    use procfs_core::FromRead;
    let Ok(entries) = fs::read_dir("/proc") else { return false };
    entries.flatten().any(|e| {
        let stat = fs::read(e.path().join("stat")).ok();
        let stat = stat.and_then(|s| procfs_core::process::Stat::from_read(s.as_slice()).ok());
        stat.is_some_and(|s| matches!(s.comm.as_str(), "systemd-udevd" | "udevd") && s.state != 'Z')
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;

    #[test]
    fn the_shim_directory_leaves_the_agents_path() {
        let dir = "/var/lib/fslab/tools/guest-bin";
        // What init's PATH becomes: the kernel word's, then init's own defaults.
        let init_path = OsString::from(format!("{}:/usr/local/bin", kernel_arg(dir).trim_start_matches("PATH=")));
        assert_eq!(without(&init_path, dir).unwrap(), "/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/bin");
        assert_eq!(without(OsStr::new("/usr/bin:/bin"), dir), None);
    }

    /// The shim run by sh as init runs it: `trigger` and `settle` return 0 at
    /// once, anything else reaches the real udevadm, and its own directory
    /// leaves `PATH` before that.
    #[test]
    fn the_shim_answers_trigger_and_settle_and_passes_the_rest_on() {
        let dir = tempfile::tempdir().unwrap();
        let shim = dir.path().join(SHIM_NAME);
        fs::write(&shim, SHIM).unwrap();
        fs::set_permissions(&shim, fs::Permissions::from_mode(0o755)).unwrap();
        // A stand-in "real" udevadm further down PATH, which prints its arguments and PATH.
        let real = dir.path().join("real");
        fs::create_dir(&real).unwrap();
        fs::write(real.join(SHIM_NAME), "#!/bin/sh\necho \"real $* PATH=$PATH\"\n").unwrap();
        fs::set_permissions(real.join(SHIM_NAME), fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("{}:{}:/usr/bin:/bin", dir.path().display(), real.display());
        let run = |args: &[&str]| {
            let out = Command::new(&shim).args(args).env("PATH", &path).output().unwrap();
            (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
        };
        assert_eq!(run(&["trigger", "--type=subsystems", "--action=add"]), (Some(0), String::new()));
        assert_eq!(run(&["settle", "--timeout=300"]), (Some(0), String::new()));
        let (code, out) = run(&["info", "--version"]);
        assert_eq!(code, Some(0));
        assert!(out.starts_with("real info --version PATH="), "{out}");
        assert!(!out.contains(&format!("PATH={}:", dir.path().display())), "the shim's directory left PATH: {out}");
    }
}
