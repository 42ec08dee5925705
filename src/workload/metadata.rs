//! `metadata`: fs_mark-style create / stat / unlink.
//!
//! `prepare` (unmeasured) makes `dirs` directories under `metadata/` in the
//! testbed. The measured part has three timed phases, each run by `threads`
//! threads that split the files between them (file `i` belongs to thread
//! `i % threads` and lives in directory `i % dirs`):
//!
//! 1. **create**: `open(O_CREAT|O_EXCL|O_WRONLY)`, write `file_size` bytes,
//!    `fsync` when `fsync = true`, close;
//! 2. **stat**: `lstat` every file (and check its size);
//! 3. **unlink**: remove every file.
//!
//! Metrics: `create_files_per_s`, `stat_files_per_s`, `unlink_files_per_s`
//! (higher is better) and `create_s`, `stat_s`, `unlink_s` (lower is better).
//!
//! The I/O runs on threads inside fslab's own process, not in a child
//! process: file creation at 100k files/s would otherwise measure fork/exec
//! of a helper. Consequence: `RunContext` only moves *child processes* into
//! the testbed's cgroup, so a throttled variant does not throttle this
//! workload's writes (moving fslab itself, or single threads, is not done).
//! Deadlines and Ctrl-C are honoured by checking between files.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::{check, BuildEnv, Kind, RunContext, Workload};
use crate::keys::Source;
use crate::metric::Metric;
use crate::sys::signals::cancelled;
use crate::units::Bytes;

/// `metadata` keys as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetadataKeys {
    files: Option<Spanned<i64>>,
    file_size: Option<Spanned<Bytes>>,
    dirs: Option<Spanned<i64>>,
    threads: Option<Spanned<i64>>,
    fsync: Option<Spanned<bool>>,
}

/// fs_mark-style create / stat / unlink of `files` files.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetadataParams {
    pub files: u64,
    pub file_size: u64,
    pub dirs: u64,
    pub threads: u32,
    pub fsync: bool,
}

impl Kind for MetadataParams {
    const NAME: &'static str = "metadata";
    const ABOUT: &'static str = "fs_mark-style create/stat/unlink: `files`, `file_size`, `dirs`, `threads`, `fsync`";
    const METRICS: &'static str = "files/s per phase";
    type Keys = MetadataKeys;

    fn resolve(keys: MetadataKeys, src: &Source, _at: Range<usize>) -> Result<Self> {
        let files = check::count(src, keys.files.as_ref(), "files", 100_000, 1..=100_000_000)?;
        let dirs = check::count(src, keys.dirs.as_ref(), "dirs", 100, 1..=1_000_000)?;
        let threads = check::count(src, keys.threads.as_ref(), "threads", 1, 1..=256)?;
        if let Some(d) = keys.dirs.as_ref().filter(|_| dirs > files) {
            return Err(src.err(d.span(), "dirs", format!("{dirs} directories for {files} files leaves some empty")));
        }
        if let Some(t) = keys.threads.as_ref().filter(|_| threads > files) {
            return Err(src.err(t.span(), "threads", format!("{threads} threads for {files} files leaves some idle")));
        }
        let file_size = match &keys.file_size {
            None => 0,
            Some(s) if s.get_ref().0 > 1 << 30 => return Err(src.err(s.span(), "file_size", "must be at most 1GiB")),
            Some(s) => s.get_ref().0,
        };
        Ok(MetadataParams {
            files: files as u64,
            file_size,
            dirs: dirs as u64,
            threads: threads as u32,
            fsync: keys.fsync.as_ref().is_some_and(|f| *f.get_ref()),
        })
    }

    fn quick(&mut self) {
        self.files = self.files.min(2000);
        self.dirs = self.dirs.min(self.files);
    }

    /// The rates decide; the phase times say the same thing again.
    fn is_decisive(&self, metric: &str) -> bool {
        metric.ends_with("_files_per_s")
    }

    fn build(&self, _env: &BuildEnv) -> Box<dyn Workload> {
        let p = self.clone();
        Box::new(Metadata { files: p.files, file_size: p.file_size, dirs: p.dirs, threads: p.threads, fsync: p.fsync })
    }
}

/// Directory inside the testbed holding the tree.
pub const TREE: &str = "metadata";

pub struct Metadata {
    pub files: u64,
    pub file_size: u64,
    pub dirs: u64,
    pub threads: u32,
    pub fsync: bool,
}

#[derive(Clone, Copy)]
enum Phase {
    Create,
    Stat,
    Unlink,
}

impl Metadata {
    fn dir_path(root: &Path, d: u64) -> PathBuf {
        root.join(format!("d{d:06}"))
    }

    fn run_phase(&self, ctx: &RunContext, phase: Phase) -> Result<f64> {
        let root = ctx.dir.join(TREE);
        let threads = u64::from(self.threads.max(1));
        let start = Instant::now();
        let results: Vec<Result<()>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let root = &root;
                    scope.spawn(move || self.worker(ctx, root, phase, t, threads))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|_| bail!("metadata worker panicked"))).collect()
        });
        let elapsed = start.elapsed().as_secs_f64();
        for r in results {
            r?;
        }
        Ok(elapsed)
    }

    fn worker(&self, ctx: &RunContext, root: &Path, phase: Phase, t: u64, threads: u64) -> Result<()> {
        let chunk = vec![0x5au8; self.file_size.clamp(1, 1 << 20) as usize];
        let mut path = PathBuf::new();
        let mut done = 0u64;
        let mut i = t;
        while i < self.files {
            if done.is_multiple_of(512) {
                if cancelled() {
                    bail!("metadata workload interrupted");
                }
                if ctx.deadline().is_some_and(|d| Instant::now() >= d) {
                    bail!("metadata workload timed out");
                }
            }
            path.clear();
            path.push(Self::dir_path(root, i % self.dirs));
            path.push(format!("f{i:010}"));
            match phase {
                Phase::Create => {
                    let mut file = match OpenOptions::new().write(true).create_new(true).open(&path) {
                        Ok(f) => f,
                        Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                            bail!(
                                "creating {} (file {} of {}): {e}; the testbed ran out of space or inodes \
                                 (ext4 gets one inode per 16 KiB: give the variant a larger `size` or more inodes, \
                                 e.g. mkfs = [\"-N\", \"200000\"])",
                                path.display(),
                                i + 1,
                                self.files
                            )
                        }
                        Err(e) => return Err(e).with_context(|| format!("creating {}", path.display())),
                    };
                    let mut left = self.file_size;
                    while left > 0 {
                        let n = left.min(chunk.len() as u64) as usize;
                        file.write_all(&chunk[..n]).with_context(|| format!("writing {}", path.display()))?;
                        left -= n as u64;
                    }
                    if self.fsync {
                        file.sync_all().with_context(|| format!("fsync of {}", path.display()))?;
                    }
                }
                Phase::Stat => {
                    let meta = fs::symlink_metadata(&path).with_context(|| format!("stat of {}", path.display()))?;
                    if meta.len() != self.file_size {
                        bail!("{} has {} bytes, expected {}", path.display(), meta.len(), self.file_size);
                    }
                }
                Phase::Unlink => fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?,
            }
            done += 1;
            i += threads;
        }
        Ok(())
    }
}

impl Workload for Metadata {
    fn kind(&self) -> &'static str {
        "metadata"
    }

    fn prepare(&mut self, ctx: &RunContext) -> Result<()> {
        let root = ctx.dir.join(TREE);
        super::fresh_dir(&root)?;
        for d in 0..self.dirs {
            let dir = Self::dir_path(&root, d);
            fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        Ok(())
    }

    fn run(&mut self, ctx: &RunContext) -> Result<Vec<Metric>> {
        let files = self.files as f64;
        let mut metrics = Vec::new();
        for (phase, name) in [(Phase::Create, "create"), (Phase::Stat, "stat"), (Phase::Unlink, "unlink")] {
            let seconds = self.run_phase(ctx, phase).with_context(|| format!("{name} phase"))?;
            metrics.push(Metric::higher(&format!("{name}_files_per_s"), "files/s", files / seconds.max(1e-9)));
            metrics.push(Metric::lower(&format!("{name}_s"), "s", seconds));
        }
        Ok(metrics)
    }

    fn cleanup(&mut self, ctx: &RunContext) -> Result<()> {
        super::remove_tree(&ctx.dir.join(TREE))
    }
}
