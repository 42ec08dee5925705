//! The measured work. One file per workload kind, all behind [`Workload`].
//!
//! A workload never mounts anything and never computes statistics: it gets a
//! ready directory in a [`RunContext`], does its unmeasured preparation, then
//! its measured part, and returns named [`Metric`]s.

pub mod archive;
pub mod coldstart;
pub mod command;
pub mod filemix;
pub mod fio;
pub mod listing;
pub mod metadata;
pub mod process;
pub mod reported;
pub mod shell1;
pub mod untar;

use std::path::Path;

use anyhow::{bail, Result};

use crate::experiment::{WorkloadConfig, WorkloadParams};
use crate::metric::Metric;
pub use process::{ProcessOutcome, RunContext};

/// The workload an experiment's `[[workload]]` table describes.
pub fn build(config: &WorkloadConfig, seed: u64) -> Result<Box<dyn Workload>> {
    Ok(match &config.params {
        WorkloadParams::Untar { source, scale, compressibility, sync } => {
            Box::new(untar::Untar::new(source.clone(), *scale, *compressibility, *sync, seed))
        }
        WorkloadParams::Command { command, prepare, cleanup } => {
            Box::new(command::Command { command: command.clone(), prepare: prepare.clone(), cleanup: cleanup.clone() })
        }
        WorkloadParams::Shell1 { concurrency, duration } => {
            Box::new(shell1::Shell1::new(concurrency.clone(), *duration))
        }
        WorkloadParams::Metadata { files, file_size, dirs, threads, fsync } => Box::new(metadata::Metadata {
            files: *files,
            file_size: *file_size,
            dirs: *dirs,
            threads: *threads,
            fsync: *fsync,
        }),
        WorkloadParams::Fio { job } => Box::new(fio::Fio::new(job.clone())),
        WorkloadParams::Filemix { users, duration, seed: own_seed, working_set } => {
            Box::new(filemix::Filemix::new(users.clone(), *duration, own_seed.unwrap_or(seed), *working_set))
        }
        WorkloadParams::Coldstart { files, scale, compressibility, readers } => Box::new(coldstart::Coldstart::new(
            *files,
            *scale,
            *compressibility,
            readers.clone(),
            config.cache == crate::experiment::CachePolicy::Cold,
            seed,
        )),
    })
}

/// One kind of measured work.
pub trait Workload: Send {
    /// Short kind name as written in experiment files (`untar`, `command`, …).
    fn kind(&self) -> &'static str;

    /// Generate inputs that are reused by every run (archives, file trees,
    /// input texts) under `cache_dir`. Called once per experiment, before any
    /// testbed exists, outside every measured region.
    fn prepare_inputs(&mut self, _cache_dir: &Path) -> Result<()> {
        Ok(())
    }

    /// Per-run unmeasured preparation inside the mounted testbed.
    /// Runs before caches are dropped for cold runs.
    fn prepare(&mut self, _ctx: &RunContext) -> Result<()> {
        Ok(())
    }

    /// Bring inputs that live outside the testbed back into the page cache
    /// after a cold-cache drop, so that only the testbed starts cold.
    fn warm_inputs(&mut self) -> Result<()> {
        Ok(())
    }

    /// Write the content of a read-only image testbed (squashfs, erofs) into
    /// the empty staging directory `dir`, before the image is built from it.
    /// Called after [`prepare_inputs`](Self::prepare_inputs), outside every
    /// measured region. Workloads that need a writable testbed keep the
    /// default, which refuses.
    fn populate(&mut self, _dir: &Path) -> Result<()> {
        bail!("workload `{}` cannot run on a read-only image testbed", self.kind())
    }

    /// The measured part. Returns the workload's metrics.
    fn run(&mut self, ctx: &RunContext) -> Result<Vec<Metric>>;

    /// Per-run unmeasured cleanup, called after `run` even when it failed.
    fn cleanup(&mut self, _ctx: &RunContext) -> Result<()> {
        Ok(())
    }
}

/// An empty directory at `path`, removing what an earlier run left there.
pub(crate) fn fresh_dir(path: &Path) -> Result<()> {
    use anyhow::Context;
    if path.exists() {
        std::fs::remove_dir_all(path).with_context(|| format!("removing old {}", path.display()))?;
    }
    std::fs::create_dir(path).with_context(|| format!("creating {}", path.display()))
}
