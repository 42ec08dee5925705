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

/// The first thing a worker forked without exec (coldstart readers, the
/// fsync-latency writer) does: close every descriptor it inherited past
/// stdio, which belong to the parent's other threads (a block trace's
/// readers among them: while any copy of those is open, removing the trace
/// instance fails with EBUSY), then join the testbed's cgroup.
///
/// # Safety
/// Only for the child between `fork` and `_exit`: it makes only
/// async-signal-safe system calls. `false` (errno set) when joining the
/// cgroup failed.
pub unsafe fn enter_forked_worker(cgroup_procs: Option<&CString>) -> bool {
    // The raw system call: glibc gained the wrapper only in 2.34.
    libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
    let Some(procs) = cgroup_procs else { return true };
    let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return false;
    }
    let written = libc::write(fd, b"0\n".as_ptr().cast(), 2);
    libc::close(fd);
    written == 2
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

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    #[test]
    fn a_forked_worker_holds_none_of_the_parents_descriptors() {
        let held = std::fs::File::open("/proc/self/status").unwrap();
        let fd = held.as_raw_fd();
        // SAFETY: the child makes only system calls and `_exit`s.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            unsafe {
                let joined = super::enter_forked_worker(None);
                let closed = libc::fcntl(fd, libc::F_GETFD) == -1;
                let stdio_open = libc::fcntl(2, libc::F_GETFD) != -1;
                libc::_exit(if joined && closed && stdio_open { 0 } else { 1 });
            }
        }
        assert!(pid > 0, "fork: {}", std::io::Error::last_os_error());
        let mut status = 0;
        // SAFETY: reaping our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child still had the parent's descriptor"
        );
        // The parent's copy is untouched.
        assert_ne!(unsafe { libc::fcntl(fd, libc::F_GETFD) }, -1);
    }
}
