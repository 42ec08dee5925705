//! `fsync-latency`: how long `fsync` takes after a small append — the
//! latency a database log, a package manager or a journaling app waits on.
//!
//! One writer process appends `append_size` bytes (default 4 KiB) to a
//! fresh file `appends` times (default 1000), calling `fsync` after each
//! append and timing only the `fsync` (CLOCK_MONOTONIC). The writer is a
//! child forked from fslab that joins the testbed's cgroup before its first
//! write, so a throttled variant throttles it on cgroup v1 and v2 alike; it
//! makes only system calls into memory prepared before the fork (no
//! allocation, no locks) and records each latency into a shared anonymous
//! mapping that fslab reads after reaping it. Ctrl-C and the run deadline
//! kill it.
//!
//! Metrics: `fsync_p50_us`, `fsync_p99_us`, `fsync_p99_9_us`, `fsync_max_us`,
//! `fsync_mean_us` (lower is better; nearest-rank percentiles) and
//! `appends_per_s` (higher is better). The median and p99 decide adaptive
//! repetition.

use std::ffi::CString;
use std::ops::Range;
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::{check, BuildEnv, Kind, RunContext, Workload};
use crate::keys::Source;
use crate::metric::Metric;
use crate::stats::percentile::LatencyPercentiles;
use crate::sys::forked;
use crate::units::Bytes;

/// The file the writer appends to, inside the testbed.
pub const FILE: &str = "fsync-latency.dat";

/// `fsync-latency` keys as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsyncLatencyKeys {
    appends: Option<Spanned<i64>>,
    append_size: Option<Spanned<Bytes>>,
}

/// `appends` appends of `append_size` bytes, each followed by `fsync`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FsyncLatencyParams {
    pub appends: u64,
    pub append_size: u64,
}

impl Kind for FsyncLatencyParams {
    const NAME: &'static str = "fsync-latency";
    const ABOUT: &'static str = "small appends, each followed by fsync: `appends`, `append_size`";
    const METRICS: &'static str = "`fsync_p50_us`, `fsync_p99_us`, `fsync_p99_9_us`, `fsync_max_us`, `appends_per_s`";
    type Keys = FsyncLatencyKeys;

    fn resolve(keys: FsyncLatencyKeys, src: &Source, _at: Range<usize>) -> Result<Self> {
        let appends = check::count(src, keys.appends.as_ref(), "appends", 1000, 1..=1_000_000)? as u64;
        let append_size = match &keys.append_size {
            None => 4096,
            Some(s) if (1..=1 << 20).contains(&s.get_ref().0) => s.get_ref().0,
            Some(s) => return Err(src.err(s.span(), "append_size", "must be between 1 byte and 1MiB")),
        };
        Ok(FsyncLatencyParams { appends, append_size })
    }

    fn quick(&mut self) {
        self.appends = self.appends.min(200);
    }

    fn is_decisive(&self, metric: &str) -> bool {
        matches!(metric, "fsync_p50_us" | "fsync_p99_us")
    }

    fn build(&self, _env: &BuildEnv) -> Box<dyn Workload> {
        Box::new(FsyncLatency { params: self.clone() })
    }
}

/// The runnable workload.
pub struct FsyncLatency {
    pub params: FsyncLatencyParams,
}

/// Exit codes of the writer; the failing call's errno is in the last slot
/// of the shared mapping.
const EXIT_OPEN: i32 = 3;
const EXIT_WRITE: i32 = 4;
const EXIT_FSYNC: i32 = 5;

/// A `MAP_SHARED | MAP_ANONYMOUS` array of u64 the child writes and the
/// parent reads after the child exits (the standard way to hand results
/// out of a forked child without a pipe protocol).
struct SharedSlots {
    ptr: *mut u64,
    len: usize,
}

impl SharedSlots {
    fn new(len: usize) -> Result<SharedSlots> {
        let bytes = len * std::mem::size_of::<u64>();
        // SAFETY: anonymous mapping, no file; checked for MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error()).context("mapping the latency buffer");
        }
        Ok(SharedSlots { ptr: ptr.cast(), len })
    }

    fn values(&self) -> &[u64] {
        // SAFETY: ptr/len describe our live mapping; the child has exited.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for SharedSlots {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe { libc::munmap(self.ptr.cast(), self.len * std::mem::size_of::<u64>()) };
    }
}

/// What the writer needs, all allocated before the fork.
struct WriterJob<'a> {
    path: &'a CString,
    block: &'a [u8],
    appends: usize,
    slots: *mut u64,
}

/// The writer (see [`crate::sys::forked::run`]). Only system calls and
/// writes into memory prepared before the fork: no allocation, no locks,
/// no panics.
///
/// # Safety
/// Must only be called in a freshly forked child, which then `_exit`s.
unsafe fn writer_child(job: &WriterJob) -> i32 {
    let WriterJob { path, block, appends, slots } = *job;
    let errno_slot = slots.add(appends);
    let fail = |code: i32| {
        *errno_slot = std::io::Error::last_os_error().raw_os_error().unwrap_or(0) as u64;
        code
    };
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_APPEND | libc::O_CLOEXEC;
    let fd = libc::open(path.as_ptr(), flags, 0o644);
    if fd < 0 {
        return fail(EXIT_OPEN);
    }
    let mut t0: libc::timespec = std::mem::zeroed();
    let mut t1: libc::timespec = std::mem::zeroed();
    for i in 0..appends {
        let mut done = 0;
        while done < block.len() {
            let n = libc::write(fd, block.as_ptr().add(done).cast(), block.len() - done);
            if n <= 0 {
                return fail(EXIT_WRITE);
            }
            done += n as usize;
        }
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t0);
        if libc::fsync(fd) != 0 {
            return fail(EXIT_FSYNC);
        }
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t1);
        let ns = (t1.tv_sec - t0.tv_sec) as i64 * 1_000_000_000 + (t1.tv_nsec - t0.tv_nsec) as i64;
        *slots.add(i) = ns.max(0) as u64;
    }
    libc::close(fd);
    0
}

impl FsyncLatency {
    /// Fork the writer and wait for it, honouring the deadline and Ctrl-C.
    fn write_and_wait(&self, ctx: &RunContext, slots: &SharedSlots) -> Result<Duration> {
        let appends = self.params.appends as usize;
        let path = ctx.dir.join(FILE);
        let cpath = CString::new(path.as_os_str().as_bytes()).context("testbed path has a NUL byte")?;
        let procs = match ctx.cgroup_procs() {
            Some(p) => Some(CString::new(p.as_os_str().as_bytes()).context("cgroup path")?),
            None => None,
        };
        let block = vec![0xa5u8; self.params.append_size as usize];
        let job = WriterJob { path: &cpath, block: &block, appends, slots: slots.ptr };
        let stop = forked::deadline_or_signal(ctx.deadline());
        let errno = || std::io::Error::from_raw_os_error(slots.values()[appends] as i32);
        let failed = |_, ended| match ended {
            forked::Ended::Exited(forked::EXIT_CGROUP) => {
                anyhow!("fsync-latency writer could not join the testbed's cgroup")
            }
            forked::Ended::Exited(EXIT_OPEN) => {
                anyhow!("fsync-latency writer could not create {}: {}", path.display(), errno())
            }
            forked::Ended::Exited(EXIT_WRITE) => {
                anyhow!("fsync-latency writer could not append to {}: {}", path.display(), errno())
            }
            forked::Ended::Exited(EXIT_FSYNC) => anyhow!("fsync of {} failed: {}", path.display(), errno()),
            forked::Ended::Exited(code) => anyhow!("fsync-latency writer exited with {code}"),
            forked::Ended::Signalled(signal) => anyhow!("fsync-latency writer was killed by signal {signal}"),
        };
        // SAFETY: `writer_child` only makes system calls and writes into the
        // shared slots, all set up before the fork.
        let exits =
            unsafe { forked::run("fsync-latency writer", &[job], procs.as_ref(), writer_child, &stop, &failed)? };
        Ok(exits[0].elapsed)
    }
}
impl Workload for FsyncLatency {
    fn kind(&self) -> &'static str {
        FsyncLatencyParams::NAME
    }

    fn run(&mut self, ctx: &RunContext) -> Result<Vec<Metric>> {
        let appends = self.params.appends as usize;
        // One slot per append, plus the errno slot.
        let slots = SharedSlots::new(appends + 1)?;
        let wall = self.write_and_wait(ctx, &slots)?;
        let mut ns = slots.values()[..appends].to_vec();
        let l = LatencyPercentiles::from_ns(&mut ns).context("no fsync was timed")?;
        Ok(vec![
            Metric::lower("fsync_p50_us", "us", l.p50_us),
            Metric::lower("fsync_p99_us", "us", l.p99_us),
            Metric::lower("fsync_p99_9_us", "us", l.p99_9_us),
            Metric::lower("fsync_max_us", "us", l.max_us),
            Metric::lower("fsync_mean_us", "us", l.mean_us),
            Metric::higher("appends_per_s", "appends/s", appends as f64 / wall.as_secs_f64().max(1e-9)),
        ])
    }

    fn cleanup(&mut self, ctx: &RunContext) -> Result<()> {
        let path = ctx.dir.join(FILE);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing {}", path.display()))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[test]
    fn writes_appends_and_times_each_fsync() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = RunContext::new(dir.path(), dir.path().join("cache"))
            .with_deadline(Some(Instant::now() + Duration::from_secs(120)));
        let mut w = FsyncLatency { params: FsyncLatencyParams { appends: 50, append_size: 1000 } };
        let metrics = w.run(&ctx).unwrap();
        assert_eq!(std::fs::metadata(dir.path().join(FILE)).unwrap().len(), 50_000);
        let get = |n: &str| metrics.iter().find(|m| m.name == n).unwrap().value;
        assert!(get("fsync_p50_us") > 0.0);
        assert!(get("fsync_p50_us") <= get("fsync_p99_us") && get("fsync_p99_us") <= get("fsync_max_us"));
        assert!(get("appends_per_s") > 0.0);
        w.cleanup(&ctx).unwrap();
        assert!(!dir.path().join(FILE).exists());
    }

    #[test]
    fn a_missing_directory_is_a_clear_error() {
        let ctx = RunContext::new("/nonexistent/fslab-fsync", "/tmp");
        let mut w = FsyncLatency { params: FsyncLatencyParams { appends: 3, append_size: 10 } };
        let err = format!("{:#}", w.run(&ctx).unwrap_err());
        assert!(err.contains("could not create") && err.contains("No such file"), "{err}");
    }
}
