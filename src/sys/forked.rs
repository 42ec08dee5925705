//! Workers forked without exec, supervised in one place: the workloads
//! whose measured part must not include an exec or a dynamic loader
//! (coldstart's readers, the fsync-latency writer) run a plain function in
//! a forked child. This module forks them, puts them in the testbed's
//! cgroup, takes each one's completion time when it happens, and kills
//! all of them at a deadline, on cancellation or when one fails.
//!
//! Hand-written because the crates that fork (nix, fork, rustix) stop at
//! the fork itself; the supervision is the part both workloads shared.

use std::ffi::CString;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};

/// The exit code of a worker that could not join the testbed's cgroup.
/// Worker functions use other codes for their own failures.
pub const EXIT_CGROUP: i32 = 120;

/// How one worker ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    Exited(i32),
    Signalled(i32),
}

/// One worker's end and its completion time since the first fork.
#[derive(Clone, Copy, Debug)]
pub struct WorkerExit {
    pub ended: Ended,
    pub elapsed: Duration,
}

/// Why the supervisor stopped the workers early.
pub type StopReason = &'static str;

/// Fork one worker per job, each running `work(job)` after dropping the
/// parent's descriptors and joining the cgroup whose `cgroup.procs` is
/// given, and wait for all of them.
///
/// `stop` is polled every 20 ms; when it names a reason, every worker is
/// killed and the error is "`what` `reason`". A worker that ends with anything
/// but exit 0 gets the others killed at once (their results would measure a
/// different load); its [`WorkerExit`] is in the error's place via
/// `on_failure`, which turns the failed worker's index and end into the
/// error to return.
///
/// # Safety
/// `work` runs in a forked child of a multi-threaded process: it may only
/// make system calls and touch memory that was allocated before the fork
/// (no allocation, no locks), and must return the exit code.
pub unsafe fn run<J>(
    what: &str,
    jobs: &[J],
    cgroup_procs: Option<&CString>,
    work: unsafe fn(&J) -> i32,
    stop: &dyn Fn() -> Option<StopReason>,
    on_failure: &dyn Fn(usize, Ended) -> anyhow::Error,
) -> Result<Vec<WorkerExit>> {
    let (tx, rx) = mpsc::channel::<(usize, libc::c_int, libc::c_int, Duration)>();
    let mut pids: Vec<libc::pid_t> = Vec::new();
    let kill_all = |pids: &[libc::pid_t]| {
        for &pid in pids {
            // SAFETY: signalling our own child; ESRCH is harmless.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    };
    let start = Instant::now();
    let mut failure: Option<anyhow::Error> = None;
    for (k, job) in jobs.iter().enumerate() {
        let pid = libc::fork();
        if pid == 0 {
            let code = if super::contain::enter_forked_worker(cgroup_procs) { work(job) } else { EXIT_CGROUP };
            libc::_exit(code);
        }
        if pid < 0 {
            failure = Some(anyhow::Error::from(std::io::Error::last_os_error()).context(format!("forking {what}")));
            break;
        }
        pids.push(pid);
        let tx = tx.clone();
        // Reap on a thread so each completion time is taken when it happens.
        let waiter = thread::Builder::new().name(format!("forked-wait-{k}")).spawn(move || {
            let mut status = 0;
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: wait4 on our own child with valid out-pointers.
            let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
            let _ = tx.send((k, rc, status, start.elapsed()));
        });
        if let Err(e) = waiter {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
            pids.pop();
            failure = Some(anyhow::Error::from(e).context(format!("starting a waiter thread for {what}")));
            break;
        }
    }
    drop(tx);
    if failure.is_some() {
        kill_all(&pids);
    }
    let mut exits: Vec<Option<WorkerExit>> = vec![None; jobs.len()];
    let mut received = 0;
    while received < pids.len() {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok((k, rc, status, elapsed)) => {
                received += 1;
                let ended = if rc < 0 {
                    Ended::Exited(-1)
                } else if libc::WIFEXITED(status) {
                    Ended::Exited(libc::WEXITSTATUS(status))
                } else {
                    Ended::Signalled(libc::WTERMSIG(status))
                };
                exits[k] = Some(WorkerExit { ended, elapsed });
                if ended != Ended::Exited(0) && failure.is_none() {
                    failure = Some(on_failure(k, ended));
                    kill_all(&pids);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if failure.is_none() {
                    if let Some(reason) = stop() {
                        failure = Some(anyhow!("{what} {reason}"));
                        kill_all(&pids);
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                failure.get_or_insert_with(|| anyhow!("lost track of {what}"));
                break;
            }
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    exits.into_iter().map(|e| e.with_context(|| format!("one of {what} reported no end"))).collect()
}

/// The usual `stop` for a measured run: its deadline or a signal.
pub fn deadline_or_signal(deadline: Option<Instant>) -> impl Fn() -> Option<StopReason> {
    move || {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            Some("timed out and were killed")
        } else if super::signals::cancelled() {
            Some("interrupted")
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe fn exit_with(code: &i32) -> i32 {
        *code
    }

    unsafe fn spin(_: &()) -> i32 {
        loop {
            libc::sched_yield();
        }
    }

    #[test]
    fn each_worker_s_end_is_reported_in_job_order() {
        let exits =
            unsafe { run("workers", &[0, 0, 0], None, exit_with, &|| None, &|k, e| anyhow!("{k} {e:?}")) }.unwrap();
        assert_eq!(exits.len(), 3);
        assert!(exits.iter().all(|e| e.ended == Ended::Exited(0)));
    }

    #[test]
    fn a_failed_worker_is_named_by_the_caller_s_error() {
        let err =
            unsafe { run("workers", &[0, 7], None, exit_with, &|| None, &|k, e| anyhow!("worker {k} ended {e:?}")) }
                .unwrap_err();
        assert_eq!(err.to_string(), "worker 1 ended Exited(7)");
    }

    #[test]
    fn stop_kills_workers_that_would_never_end() {
        let started = Instant::now();
        let stop = deadline_or_signal(Some(Instant::now() + Duration::from_millis(100)));
        let err = unsafe { run("workers", &[(), ()], None, spin, &stop, &|k, e| anyhow!("{k} {e:?}")) }.unwrap_err();
        assert_eq!(err.to_string(), "workers timed out and were killed");
        crate::testsupport::did_not_hang(started, Duration::from_secs(10), "stopping workers that never end");
    }
}
