//! Starting child processes contained: in a process group of their own (so
//! one signal reaches the whole tree: a workload's shell and its children,
//! or virtme-run, QEMU and virtiofsd) and, when given, in fslab's
//! marker-named cgroup (so `fslab cleanup` finds and kills them after fslab
//! itself was SIGKILLed). Workloads (`workload::process::RunContext`) and
//! VMs (`vm::session`, `vm::kvm`) both start their children through here.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command};

use anyhow::{Context, Result};

/// Spawn `cmd` as the leader of a new process group, inside the cgroup whose
/// `cgroup.procs` is given.
pub fn spawn_contained(mut cmd: Command, cgroup_procs: Option<&Path>) -> Result<Child> {
    contain(&mut cmd, cgroup_procs)?;
    cmd.spawn().context("spawning")
}

/// Make `cmd`, when spawned, the leader of a new process group inside the
/// cgroup whose `cgroup.procs` is given (between fork and exec, so the child
/// never runs outside it).
pub fn contain(cmd: &mut Command, cgroup_procs: Option<&Path>) -> Result<()> {
    let procs = match cgroup_procs {
        Some(p) => Some(CString::new(p.as_os_str().as_bytes()).context("cgroup path")?),
        None => None,
    };
    // SAFETY: only async-signal-safe calls (setpgid, open, write, close)
    // between fork and exec; the path was allocated before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(path) = &procs {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let written = libc::write(fd, b"0\n".as_ptr().cast(), 2);
                let err = std::io::Error::last_os_error();
                libc::close(fd);
                if written < 0 {
                    return Err(err);
                }
            }
            Ok(())
        });
    }
    Ok(())
}

/// SIGKILL the process group `pgid` (harmless when it is gone).
pub fn kill_group(pgid: libc::pid_t) {
    if pgid > 1 {
        // SAFETY: plain syscall on a process group this module created.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}
