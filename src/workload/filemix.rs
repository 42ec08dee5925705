//! `filemix`: a reaim "disk"-style multi-user job mix.
//!
//! This is the workload behind the `Hmean disk-<users>` tables of the ext4
//! `mb_optimize_scan` thread: many users, each running short file jobs one
//! after another, scored in jobs per minute.
//!
//! # Layout
//!
//! Everything lives under `filemix/` in the testbed. User `i` works only in
//! `filemix/u<i>/` (four digits), which holds a pool of [`POOL_FILES`] files
//! `f0` … `f7` of `file_size = working_set / 8` bytes each (rounded down to
//! 4 KiB, at least 4 KiB). `prepare` (unmeasured) writes the pools for the
//! largest user count and `syncfs`es them, so the measured part starts with
//! the pools on disk.
//!
//! # A job
//!
//! Each user draws jobs from its own endless [`JobStream`]: a ChaCha8
//! generator seeded by `(seed, user index)`, picking a kind with the fixed
//! weights of [`MIX`] and then the job's parameters (which pool file, which
//! blocks). The sequence depends only on the seed and the user index, never
//! on timing or on the user count. All I/O is in 4 KiB blocks of a
//! pseudo-random pattern (one block, repeated); `S` is `file_size`.
//!
//! | job | weight | what it does | reaim analogue |
//! | --- | --- | --- | --- |
//! | `create` | 3 | create `new`, write `S`, `fsync`, close, unlink | `sync_disk_wrt` |
//! | `read` | 3 | read a pool file sequentially to its end | `disk_rd` |
//! | `copy` | 2 | copy pool file `a` into `tmp`, `fsync`, rename over pool file `b` | `sync_disk_cp` |
//! | `append` | 2 | append `S/8` (≥ 4 KiB) to a pool file, `fdatasync`; once it reached `2·S`, truncate it back to `S` | — |
//! | `rewrite` | 3 | overwrite a quarter of a pool file's 4 KiB blocks (at least one; random, repeats allowed) in place, `fdatasync` | `sync_disk_update`, `disk_rw` |
//! | `dirs` | 2 | `mkdir dir`, create 8 empty files in it, list it (count checked), unlink them, `rmdir` | `creat-clo` |
//! | `unlink` | 1 | unlink a pool file and write it anew (`S`, no `fsync`) | `disk_wrt` |
//!
//! # Measurement
//!
//! For each level of `users` the users start together (a barrier) and each
//! runs jobs until `duration` has passed since its start; a job that has
//! begun is finished, never cut short, and only finished jobs count. A
//! user's rate is its jobs × 60 / its own wall time; the metric
//! `filemix-<users>` is the sum over users in jobs per minute (higher is
//! better). Levels run one after another on the same pools, with a
//! `syncfs` between levels so one level's dirty data is not written back
//! inside the next.
//!
//! # Threads, not processes
//!
//! Users are threads of fslab's own process (like `metadata`): a job is a
//! few dozen system calls, and a helper process per user would need a
//! second entry point into the binary. [`RunContext`] only moves child
//! processes into the testbed's cgroup, so these threads' I/O is not in
//! that cgroup. On cgroup v1 the throttle still applies through the
//! root-group rule fslab puts on the testbed's loop device (fslab itself
//! runs in the root blkio group, and writeback is issued from there too); on
//! cgroup v2 a throttled variant does not throttle this workload.
//! Ctrl-C and the run deadline are checked between jobs; an error in one
//! user stops the others.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::{check, content, BuildEnv, Kind, RunContext, Workload};
use crate::keys::Source;
use crate::metric::Metric;
use crate::sys::signals::cancelled;
use crate::units::{Bytes, Seconds};

/// Most concurrent users a level may run.
const MAX_USERS: i64 = 1024;
/// Smallest and largest per-user working set.
const MIN_WORKING_SET: u64 = 64 << 10;
const MAX_WORKING_SET: u64 = 1 << 30;
/// Longest measured duration a `--quick` run keeps.
const QUICK_DURATION: Duration = Duration::from_secs(3);

/// `filemix` keys as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilemixKeys {
    users: Option<Spanned<Vec<i64>>>,
    duration: Option<Spanned<Seconds>>,
    seed: Option<Spanned<i64>>,
    working_set: Option<Spanned<Bytes>>,
}

/// reaim "disk"-style job mix: `users` concurrent users for `duration`, job
/// sequence drawn from `seed` (None: the experiment's seed), each user's
/// files totalling `working_set` bytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FilemixParams {
    pub users: Vec<u32>,
    pub duration: Duration,
    pub seed: Option<u64>,
    pub working_set: u64,
}

impl Kind for FilemixParams {
    const NAME: &'static str = "filemix";
    const FIXED_TIME: bool = true;
    const ABOUT: &'static str = "reaim-disk-like job mix per user (docs/workloads.md), `users`, `duration`";
    const METRICS: &'static str = "`filemix-N` (jobs/min)";
    type Keys = FilemixKeys;

    fn resolve(keys: FilemixKeys, src: &Source, _at: std::ops::Range<usize>) -> Result<Self> {
        let seed = match &keys.seed {
            None => None,
            Some(s) if *s.get_ref() < 0 => return Err(src.err(s.span(), "seed", "must not be negative")),
            Some(s) => Some(*s.get_ref() as u64),
        };
        let working_set = match &keys.working_set {
            None => 1 << 20,
            Some(w) if !(MIN_WORKING_SET..=MAX_WORKING_SET).contains(&w.get_ref().0) => {
                return Err(src.err(w.span(), "working_set", "must be between 64KiB and 1GiB (per user)"));
            }
            Some(w) => w.get_ref().0,
        };
        Ok(FilemixParams {
            users: check::levels(src, keys.users.as_ref(), "users", &[1, 8], "[1, 8, 16]", MAX_USERS)?,
            duration: check::duration(src, keys.duration.as_ref(), Duration::from_secs(60))?,
            seed,
            working_set,
        })
    }

    fn quick(&mut self) {
        self.users.truncate(2);
        self.duration = self.duration.min(QUICK_DURATION);
    }

    fn build(&self, env: &BuildEnv) -> Box<dyn Workload> {
        Box::new(Filemix::new(self.users.clone(), self.duration, self.seed.unwrap_or(env.seed), self.working_set))
    }
}

/// Directory inside the testbed holding every user's directory.
pub const TREE: &str = "filemix";
/// Pool files per user.
pub const POOL_FILES: u32 = 8;
/// Size of every read and write.
pub const BLOCK: u64 = 4096;
/// Entries the `dirs` job creates, lists and removes.
pub const DIR_ENTRIES: usize = 8;

/// The kinds of job a user draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobKind {
    Create,
    Read,
    Copy,
    Append,
    Rewrite,
    Dirs,
    Unlink,
}

/// The fixed mix: each kind with its weight (out of [`MIX_TOTAL`]).
pub const MIX: &[(JobKind, u32)] = &[
    (JobKind::Create, 3),
    (JobKind::Read, 3),
    (JobKind::Copy, 2),
    (JobKind::Append, 2),
    (JobKind::Rewrite, 3),
    (JobKind::Dirs, 2),
    (JobKind::Unlink, 1),
];

/// Sum of the weights in [`MIX`].
pub const MIX_TOTAL: u32 = 16;

impl JobKind {
    /// Name used in the documentation.
    pub fn name(self) -> &'static str {
        match self {
            JobKind::Create => "create",
            JobKind::Read => "read",
            JobKind::Copy => "copy",
            JobKind::Append => "append",
            JobKind::Rewrite => "rewrite",
            JobKind::Dirs => "dirs",
            JobKind::Unlink => "unlink",
        }
    }
}

/// One job with its drawn parameters (pool file numbers, block numbers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Job {
    /// Create `new`, write the file size, fsync, close, unlink.
    Create,
    /// Read pool file `file` sequentially.
    Read { file: u32 },
    /// Copy pool file `from` into `tmp`, fsync, rename over pool file `to`.
    Copy { from: u32, to: u32 },
    /// Append to pool file `file`, fdatasync, truncate back when grown to twice the size.
    Append { file: u32 },
    /// Overwrite the given 4 KiB blocks of pool file `file`, fdatasync.
    Rewrite { file: u32, blocks: Vec<u64> },
    /// mkdir, create [`DIR_ENTRIES`] empty files, list, unlink them, rmdir.
    Dirs,
    /// Unlink pool file `file` and write it anew without fsync.
    Unlink { file: u32 },
}

impl Job {
    pub fn kind(&self) -> JobKind {
        match self {
            Job::Create => JobKind::Create,
            Job::Read { .. } => JobKind::Read,
            Job::Copy { .. } => JobKind::Copy,
            Job::Append { .. } => JobKind::Append,
            Job::Rewrite { .. } => JobKind::Rewrite,
            Job::Dirs => JobKind::Dirs,
            Job::Unlink { .. } => JobKind::Unlink,
        }
    }
}

/// A user's endless, deterministic sequence of jobs.
pub struct JobStream {
    rng: ChaCha8Rng,
    /// 4 KiB blocks in a pool file of the nominal size.
    file_blocks: u64,
}

impl JobStream {
    /// The stream of user `user` for `seed`, with pool files of `file_size` bytes.
    pub fn new(seed: u64, user: u32, file_size: u64) -> Self {
        let mixed = seed ^ (u64::from(user) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        JobStream { rng: ChaCha8Rng::seed_from_u64(mixed), file_blocks: (file_size / BLOCK).max(1) }
    }

    fn below(&mut self, n: u64) -> u64 {
        // Modulo bias is irrelevant for n this small next to 2^64.
        self.rng.next_u64() % n.max(1)
    }

    fn pool_file(&mut self) -> u32 {
        self.below(u64::from(POOL_FILES)) as u32
    }

    /// Draw the next job.
    pub fn next_job(&mut self) -> Job {
        let mut pick = self.below(u64::from(MIX_TOTAL)) as u32;
        let mut kind = JobKind::Unlink;
        for &(k, weight) in MIX {
            if pick < weight {
                kind = k;
                break;
            }
            pick -= weight;
        }
        match kind {
            JobKind::Create => Job::Create,
            JobKind::Read => Job::Read { file: self.pool_file() },
            JobKind::Copy => {
                let from = self.pool_file();
                let to = (from + 1 + self.below(u64::from(POOL_FILES - 1)) as u32) % POOL_FILES;
                Job::Copy { from, to }
            }
            JobKind::Append => Job::Append { file: self.pool_file() },
            JobKind::Rewrite => {
                let file = self.pool_file();
                let count = (self.file_blocks / 4).max(1);
                let blocks = (0..count).map(|_| self.below(self.file_blocks)).collect();
                Job::Rewrite { file, blocks }
            }
            JobKind::Dirs => Job::Dirs,
            JobKind::Unlink => Job::Unlink { file: self.pool_file() },
        }
    }
}

impl Iterator for JobStream {
    type Item = Job;

    fn next(&mut self) -> Option<Job> {
        Some(self.next_job())
    }
}

/// Bytes of each pool file for a per-user working set.
pub fn file_size_for(working_set: u64) -> u64 {
    ((working_set / u64::from(POOL_FILES)) / BLOCK * BLOCK).max(BLOCK)
}

/// The `filemix` workload.
pub struct Filemix {
    pub users: Vec<u32>,
    pub duration: Duration,
    pub seed: u64,
    pub working_set: u64,
}

impl Filemix {
    pub fn new(users: Vec<u32>, duration: Duration, seed: u64, working_set: u64) -> Self {
        Filemix { users, duration, seed, working_set }
    }

    /// Bytes of each pool file.
    pub fn file_size(&self) -> u64 {
        file_size_for(self.working_set)
    }

    /// Run `users` users at once for the duration; jobs per minute summed over them.
    pub fn measure(&self, ctx: &RunContext, users: u32) -> Result<f64> {
        let root = ctx.dir.join(TREE);
        let barrier = Barrier::new(users as usize);
        let abort = AtomicBool::new(false);
        let results: Vec<Result<(u64, f64)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..users)
                .map(|u| {
                    let (root, barrier, abort) = (&root, &barrier, &abort);
                    scope.spawn(move || {
                        let result = self.user(ctx, root, u, barrier, abort);
                        if result.is_err() {
                            abort.store(true, Ordering::SeqCst);
                        }
                        result.with_context(|| format!("filemix user {} of {users}", u + 1))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|_| bail!("filemix user thread panicked"))).collect()
        });
        let mut jpm = 0.0;
        let mut first_error = None;
        for r in results {
            match r {
                Ok((jobs, wall_s)) if wall_s > 0.0 => jpm += jobs as f64 * 60.0 / wall_s,
                Ok(_) => bail!("filemix user reported no wall time"),
                // Prefer the error that caused the abort over "stopped" notes.
                Err(e) if first_error.is_none() || is_stopped(first_error.as_ref()) => first_error = Some(e),
                Err(_) => {}
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        Ok(jpm)
    }

    /// One user's loop: jobs until the duration passed. Returns (jobs, wall seconds).
    fn user(&self, ctx: &RunContext, root: &Path, u: u32, barrier: &Barrier, abort: &AtomicBool) -> Result<(u64, f64)> {
        let mut worker = UserDir::new(user_dir(root, u), self.file_size(), self.seed, u);
        barrier.wait();
        let start = Instant::now();
        let end = start + self.duration;
        let mut jobs = 0u64;
        loop {
            let now = Instant::now();
            if now >= end {
                break;
            }
            if cancelled() {
                bail!("filemix workload interrupted");
            }
            if ctx.deadline().is_some_and(|d| now >= d) {
                bail!("filemix workload timed out");
            }
            if abort.load(Ordering::SeqCst) {
                bail!("{STOPPED}");
            }
            let job = worker.jobs.next_job();
            worker.run(&job).with_context(|| format!("job `{}` ({job:?})", job.kind().name()))?;
            jobs += 1;
        }
        Ok((jobs, start.elapsed().as_secs_f64()))
    }
}

const STOPPED: &str = "stopped because another user failed";

fn is_stopped(e: Option<&anyhow::Error>) -> bool {
    e.is_some_and(|e| e.chain().any(|c| c.to_string() == STOPPED))
}

fn user_dir(root: &Path, u: u32) -> PathBuf {
    root.join(format!("u{u:04}"))
}

fn pool_name(i: u32) -> String {
    format!("f{i}")
}

/// Name an ENOSPC so the user knows which setting to change.
fn io_context(e: std::io::Error, what: &str, path: &Path) -> anyhow::Error {
    if e.raw_os_error() == Some(libc::ENOSPC) {
        anyhow::anyhow!(
            "{what} {}: {e}; the testbed is full (filemix needs about 2.5 × working_set per user: \
             give the variant a larger `size` or the workload a smaller `working_set`)",
            path.display()
        )
    } else {
        anyhow::Error::new(e).context(format!("{what} {}", path.display()))
    }
}

/// One user's directory, data block and job stream.
struct UserDir {
    dir: PathBuf,
    file_size: u64,
    block: Vec<u8>,
    jobs: JobStream,
}

impl UserDir {
    fn new(dir: PathBuf, file_size: u64, seed: u64, user: u32) -> Self {
        // Incompressible bytes, so compressing filesystems store what is written.
        let block = content::ContentReader::new(content::Style::Data, 0.0, seed, &user.to_le_bytes(), BLOCK).into_vec();
        UserDir { dir, file_size, block, jobs: JobStream::new(seed, user, file_size) }
    }

    fn pool(&self, i: u32) -> PathBuf {
        self.dir.join(pool_name(i))
    }

    /// Write `bytes` in blocks to `file`.
    fn fill(&self, file: &mut File, bytes: u64, path: &Path) -> Result<()> {
        let mut left = bytes;
        while left > 0 {
            let n = left.min(BLOCK) as usize;
            file.write_all(&self.block[..n]).map_err(|e| io_context(e, "writing", path))?;
            left -= n as u64;
        }
        Ok(())
    }

    /// Create (or truncate) `path` with `bytes` bytes, optionally fsynced.
    fn write_new(&self, path: &Path, bytes: u64, fsync: bool) -> Result<()> {
        let mut file = File::create(path).map_err(|e| io_context(e, "creating", path))?;
        self.fill(&mut file, bytes, path)?;
        if fsync {
            file.sync_all().map_err(|e| io_context(e, "fsync of", path))?;
        }
        Ok(())
    }

    /// Make the directory and its pool (unmeasured).
    fn create_pool(&self) -> Result<()> {
        fs::create_dir_all(&self.dir).map_err(|e| io_context(e, "creating", &self.dir))?;
        for i in 0..POOL_FILES {
            self.write_new(&self.pool(i), self.file_size, false)?;
        }
        Ok(())
    }

    fn run(&mut self, job: &Job) -> Result<()> {
        let mut buf = [0u8; BLOCK as usize];
        match job {
            Job::Create => {
                let path = self.dir.join("new");
                self.write_new(&path, self.file_size, true)?;
                fs::remove_file(&path).map_err(|e| io_context(e, "removing", &path))?;
            }
            Job::Read { file } => {
                let path = self.pool(*file);
                let mut f = File::open(&path).map_err(|e| io_context(e, "opening", &path))?;
                read_to_end(&mut f, &mut buf, &path)?;
            }
            Job::Copy { from, to } => {
                let (src, tmp, dst) = (self.pool(*from), self.dir.join("tmp"), self.pool(*to));
                let mut input = File::open(&src).map_err(|e| io_context(e, "opening", &src))?;
                let mut output = File::create(&tmp).map_err(|e| io_context(e, "creating", &tmp))?;
                loop {
                    let n = match input.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => n,
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        Err(e) => return Err(io_context(e, "reading", &src)),
                    };
                    output.write_all(&buf[..n]).map_err(|e| io_context(e, "writing", &tmp))?;
                }
                output.sync_all().map_err(|e| io_context(e, "fsync of", &tmp))?;
                drop(output);
                fs::rename(&tmp, &dst).map_err(|e| io_context(e, "renaming onto", &dst))?;
            }
            Job::Append { file } => {
                let path = self.pool(*file);
                let mut f = OpenOptions::new().append(true).open(&path).map_err(|e| io_context(e, "opening", &path))?;
                self.fill(&mut f, (self.file_size / 8).max(BLOCK) / BLOCK * BLOCK, &path)?;
                f.sync_data().map_err(|e| io_context(e, "fdatasync of", &path))?;
                let len = f.metadata().map_err(|e| io_context(e, "stat of", &path))?.len();
                if len >= 2 * self.file_size {
                    f.set_len(self.file_size).map_err(|e| io_context(e, "truncating", &path))?;
                }
            }
            Job::Rewrite { file, blocks } => {
                let path = self.pool(*file);
                let f = OpenOptions::new().write(true).open(&path).map_err(|e| io_context(e, "opening", &path))?;
                for &b in blocks {
                    f.write_all_at(&self.block, b * BLOCK).map_err(|e| io_context(e, "writing", &path))?;
                }
                f.sync_data().map_err(|e| io_context(e, "fdatasync of", &path))?;
            }
            Job::Dirs => {
                let dir = self.dir.join("dir");
                fs::create_dir(&dir).map_err(|e| io_context(e, "creating", &dir))?;
                for i in 0..DIR_ENTRIES {
                    let p = dir.join(format!("e{i}"));
                    File::create(&p).map_err(|e| io_context(e, "creating", &p))?;
                }
                let mut listed = 0;
                for entry in fs::read_dir(&dir).map_err(|e| io_context(e, "listing", &dir))? {
                    entry.map_err(|e| io_context(e, "listing", &dir))?;
                    listed += 1;
                }
                if listed != DIR_ENTRIES {
                    bail!("{} lists {listed} entries, expected {DIR_ENTRIES}", dir.display());
                }
                for i in 0..DIR_ENTRIES {
                    let p = dir.join(format!("e{i}"));
                    fs::remove_file(&p).map_err(|e| io_context(e, "removing", &p))?;
                }
                fs::remove_dir(&dir).map_err(|e| io_context(e, "removing", &dir))?;
            }
            Job::Unlink { file } => {
                let path = self.pool(*file);
                fs::remove_file(&path).map_err(|e| io_context(e, "removing", &path))?;
                self.write_new(&path, self.file_size, false)?;
            }
        }
        Ok(())
    }
}

fn read_to_end(f: &mut File, buf: &mut [u8], path: &Path) -> Result<u64> {
    let mut total = 0u64;
    loop {
        match f.read(buf) {
            Ok(0) => return Ok(total),
            Ok(n) => total += n as u64,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(io_context(e, "reading", path)),
        }
    }
}

/// `syncfs(2)` on the filesystem holding `dir`.
fn syncfs(dir: &Path) -> Result<()> {
    let handle = File::open(dir).with_context(|| format!("opening {}", dir.display()))?;
    // SAFETY: plain syscall on a file descriptor we own for the call's duration.
    let rc = unsafe { libc::syncfs(handle.as_raw_fd()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("syncfs of {}", dir.display()));
    }
    Ok(())
}

impl Workload for Filemix {
    fn kind(&self) -> &'static str {
        "filemix"
    }

    fn prepare(&mut self, ctx: &RunContext) -> Result<()> {
        let root = ctx.dir.join(TREE);
        super::fresh_dir(&root)?;
        let most = self.users.iter().copied().max().unwrap_or(1);
        for u in 0..most {
            if cancelled() {
                bail!("filemix preparation interrupted");
            }
            UserDir::new(user_dir(&root, u), self.file_size(), self.seed, u).create_pool()?;
        }
        syncfs(&root)
    }

    fn run(&mut self, ctx: &RunContext) -> Result<Vec<Metric>> {
        let mut metrics = Vec::new();
        for (i, &users) in self.users.iter().enumerate() {
            if i > 0 {
                syncfs(&ctx.dir)?;
            }
            let jpm = self.measure(ctx, users).with_context(|| format!("filemix with {users} users"))?;
            metrics.push(Metric::higher(&format!("filemix-{users}"), "jobs/min", jpm));
        }
        Ok(metrics)
    }

    fn cleanup(&mut self, ctx: &RunContext) -> Result<()> {
        super::remove_tree(&ctx.dir.join(TREE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_weights_add_up() {
        assert_eq!(MIX.iter().map(|&(_, w)| w).sum::<u32>(), MIX_TOTAL);
    }

    #[test]
    fn job_sequence_is_deterministic_per_seed_and_user() {
        let a: Vec<Job> = JobStream::new(7, 0, 128 << 10).take(500).collect();
        let b: Vec<Job> = JobStream::new(7, 0, 128 << 10).take(500).collect();
        assert_eq!(a, b);
        let other_user: Vec<Job> = JobStream::new(7, 1, 128 << 10).take(500).collect();
        let other_seed: Vec<Job> = JobStream::new(8, 0, 128 << 10).take(500).collect();
        assert_ne!(a, other_user);
        assert_ne!(a, other_seed);
    }

    #[test]
    fn job_sequence_follows_the_weights() {
        let n = 16_000;
        let jobs: Vec<Job> = JobStream::new(1, 0, 128 << 10).take(n).collect();
        for &(kind, weight) in MIX {
            let seen = jobs.iter().filter(|j| j.kind() == kind).count() as f64 / n as f64;
            let expected = f64::from(weight) / f64::from(MIX_TOTAL);
            assert!((seen - expected).abs() < 0.02, "{}: {seen:.3} vs {expected:.3}", kind.name());
        }
        for job in &jobs {
            match job {
                Job::Copy { from, to } => assert!(from != to && *from < POOL_FILES && *to < POOL_FILES),
                Job::Rewrite { file, blocks } => {
                    assert!(*file < POOL_FILES);
                    assert_eq!(blocks.len(), 8);
                    assert!(blocks.iter().all(|&b| b < 32));
                }
                Job::Read { file } | Job::Append { file } | Job::Unlink { file } => assert!(*file < POOL_FILES),
                Job::Create | Job::Dirs => {}
            }
        }
    }

    #[test]
    fn pool_file_size_follows_the_working_set() {
        assert_eq!(file_size_for(1 << 20), 128 << 10);
        assert_eq!(file_size_for(64 << 10), 8 << 10);
        assert_eq!(file_size_for(100_000), 12 << 10);
        assert_eq!(file_size_for(1), BLOCK);
    }

    #[test]
    fn every_job_runs_and_leaves_only_the_pool() {
        let dir = std::env::temp_dir().join(format!("fslab-filemix-unit-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let mut user = UserDir::new(dir.clone(), 16 << 10, 3, 0);
        user.create_pool().unwrap();
        let jobs: Vec<Job> = JobStream::new(3, 0, 16 << 10).take(300).collect();
        for job in &jobs {
            user.run(job).unwrap();
        }
        let mut names: Vec<String> =
            fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        let mut expected: Vec<String> = (0..POOL_FILES).map(pool_name).collect();
        expected.sort();
        assert_eq!(names, expected);
        for i in 0..POOL_FILES {
            let len = fs::metadata(user.pool(i)).unwrap().len();
            assert!(((16 << 10)..(32 << 10)).contains(&len), "f{i} has {len} bytes");
        }
        fs::remove_dir_all(&dir).unwrap();
    }
}
