//! Running workload processes: in the testbed directory, inside the
//! testbed's cgroup, in their own process group, with a deadline and a
//! cancellation flag honoured (Ctrl-C, SIGTERM, SIGHUP, timeout).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::sys::contain::{contain, kill_group};
use crate::sys::signals::{self, cancelled, check_cancelled};

/// How often a running process's waiter looks for Ctrl-C.
const CANCEL_CHECK: Duration = Duration::from_millis(50);
/// The waiter's slice where no stop signal can come (only the deadline ends it).
const NO_CANCEL_CHECK: Duration = Duration::from_secs(3600);

/// What a finished process did.
#[derive(Clone, Debug)]
pub struct ProcessOutcome {
    pub wall_s: f64,
    /// CPU time of the process and the children it waited for.
    pub user_s: f64,
    pub sys_s: f64,
    pub exit_code: Option<i32>,
    /// Last bytes of standard error (at most [`TAIL_BYTES`]).
    pub stderr_tail: String,
    /// Last bytes of standard output (at most [`TAIL_BYTES`]).
    pub stdout_tail: String,
}

/// How much of a process's output is kept.
pub const TAIL_BYTES: usize = 16 * 1024;

/// Where and how the processes of one run execute.
#[derive(Clone, Debug)]
pub struct RunContext {
    /// The directory the workload works in (the mounted testbed).
    pub dir: PathBuf,
    /// Persistent cache for generated inputs, outside the testbed.
    pub cache_dir: PathBuf,
    /// `cgroup.procs` of the testbed's cgroup, joined by every child.
    cgroup_procs: Option<PathBuf>,
    deadline: Option<Instant>,
}

impl RunContext {
    pub fn new(dir: impl Into<PathBuf>, cache_dir: impl Into<PathBuf>) -> Self {
        RunContext { dir: dir.into(), cache_dir: cache_dir.into(), cgroup_procs: None, deadline: None }
    }

    /// Children join the cgroup whose `cgroup.procs` file is given.
    pub fn with_cgroup(mut self, procs_file: Option<PathBuf>) -> Self {
        self.cgroup_procs = procs_file;
        self
    }

    /// Children are killed when `deadline` passes.
    pub fn with_deadline(mut self, deadline: Option<Instant>) -> Self {
        self.deadline = deadline;
        self
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// `cgroup.procs` of the testbed's cgroup, for workloads that start
    /// their own processes without [`Command`] (e.g. fork without exec).
    pub fn cgroup_procs(&self) -> Option<&Path> {
        self.cgroup_procs.as_deref()
    }

    /// A command for `program`, run in the testbed directory.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(&self.dir);
        cmd
    }

    /// `/bin/sh -c script` in the testbed directory (for the user's own commands).
    pub fn shell(&self, script: &str) -> Command {
        let mut cmd = self.command("/bin/sh");
        cmd.arg("-c").arg(script);
        cmd
    }

    /// Run `cmd` to completion inside the cgroup and its own process group.
    /// `what` names the step in errors. A non-zero exit is an error carrying
    /// the stderr tail.
    pub fn execute(&self, cmd: Command, what: &str) -> Result<ProcessOutcome> {
        let outcome = self.execute_unchecked(cmd, what)?;
        if outcome.exit_code != Some(0) {
            let code = outcome.exit_code.map_or("a signal".to_string(), |c| format!("exit code {c}"));
            let stderr = outcome.stderr_tail.trim();
            bail!("{what} failed with {code}{}{}", if stderr.is_empty() { "" } else { ":\n" }, stderr);
        }
        Ok(outcome)
    }

    /// Like [`execute`](Self::execute) but a non-zero exit is returned, not an error.
    pub fn execute_unchecked(&self, mut cmd: Command, what: &str) -> Result<ProcessOutcome> {
        check_cancelled()?;
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        contain(&mut cmd, self.cgroup_procs.as_deref())?;
        let start = Instant::now();
        let mut child = cmd.spawn().with_context(|| format!("starting {what}"))?;
        let pid = child.id() as libc::pid_t;
        let stdout = tail_reader(child.stdout.take());
        let stderr = tail_reader(child.stderr.take());

        // Reap with wait4 on a thread so the wall time is taken the moment the
        // process ends, while this thread watches the deadline and Ctrl-C.
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut status = 0;
            // SAFETY: plain syscall on our own child's pid with valid out-pointers.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
            let wall = start.elapsed();
            let _ = tx.send((rc, status, usage, wall));
        });
        // Woken only to notice Ctrl-C: without signal handlers (the guest
        // agent) the wait ends with the process or at the deadline, so a
        // guest's measured part has no 50 ms wake-ups in it (they add to its
        // instruction count in proportion to the wall time).
        let slice = if signals::installed() { CANCEL_CHECK } else { NO_CANCEL_CHECK };
        let (rc, status, usage, wall) = loop {
            let until_deadline = self.deadline.map(|d| d.saturating_duration_since(Instant::now()));
            match rx.recv_timeout(until_deadline.map_or(slice, |left| left.min(slice))) {
                Ok(done) => break done,
                Err(mpsc::RecvTimeoutError::Disconnected) => bail!("lost track of {what}"),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let timed_out = self.deadline.is_some_and(|d| Instant::now() >= d);
                    if timed_out || cancelled() {
                        kill_group(pid);
                        let _ = rx.recv_timeout(Duration::from_secs(10));
                        if timed_out {
                            bail!("{what} timed out and was killed");
                        }
                        bail!("{what} interrupted");
                    }
                }
            }
        };
        // The process leader is gone; make sure no stragglers of its group stay.
        kill_group(pid);
        drop(child);
        if rc < 0 {
            return Err(anyhow!(std::io::Error::last_os_error())).context(format!("waiting for {what}"));
        }
        let exit_code = if libc::WIFEXITED(status) { Some(libc::WEXITSTATUS(status)) } else { None };
        Ok(ProcessOutcome {
            wall_s: wall.as_secs_f64(),
            user_s: timeval_s(usage.ru_utime),
            sys_s: timeval_s(usage.ru_stime),
            exit_code,
            stderr_tail: stderr.join().unwrap_or_default(),
            stdout_tail: stdout.join().unwrap_or_default(),
        })
    }
}

fn timeval_s(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6
}

/// Drain a pipe on a thread, keeping only the last [`TAIL_BYTES`].
fn tail_reader<R: Read + Send + 'static>(pipe: Option<R>) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let Some(mut pipe) = pipe else { return String::new() };
        let mut tail: Vec<u8> = Vec::new();
        let mut buf = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            tail.extend_from_slice(&buf[..n]);
            if tail.len() > 2 * TAIL_BYTES {
                tail.drain(..tail.len() - TAIL_BYTES);
            }
        }
        if tail.len() > TAIL_BYTES {
            tail.drain(..tail.len() - TAIL_BYTES);
        }
        String::from_utf8_lossy(&tail).into_owned()
    })
}
