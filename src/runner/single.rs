//! One run: provision → prepare → (drop caches) → measure with monitors →
//! cleanup → teardown. Teardown happens on every path out.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

use serde::{Deserialize, Serialize};

use super::monitors::{self, Watch};
use crate::experiment::{CachePolicy, PlannedRun, VariantConfig, WorkloadConfig};
use crate::record::{RunPlace, RunRecord, RunStatus};
use crate::testbed::image::{self, PreparedImage};
use crate::testbed::{DeviceOptIn, Testbed};
use crate::workload::{RunContext, Workload};

pub use crate::experiment::DEFAULT_TIMEOUT;

/// Where and how a run is carried out: the same on the host and inside a
/// guest (where the work directory is the guest's own, the cache is the
/// host's shown read-only, and the device is the VM's testbed disk).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunEnv {
    /// Testbed directories are created here.
    pub workdir: std::path::PathBuf,
    /// Workload inputs (archives, trees), prepared before the first run.
    pub cache_dir: std::path::PathBuf,
    pub sample_interval: Duration,
    /// Format this block device instead of a loop-mounted image.
    pub device: Option<std::path::PathBuf>,
    /// In a guest whose disk the host serves through a media model: where
    /// to ask for the model's account ([`crate::media::relay`]).
    #[serde(default)]
    pub media_relay: Option<std::path::PathBuf>,
    /// A guest run's read-only image, prepared by the host (None: a
    /// read-only image testbed takes its image from the cache itself).
    #[serde(default)]
    pub image: Option<PreparedImage>,
}

pub fn execute(
    env: &RunEnv,
    planned: &PlannedRun,
    variant: &VariantConfig,
    config: &WorkloadConfig,
    workload: &mut dyn Workload,
) -> RunRecord {
    let started = Instant::now();
    let mut record = new_record(planned, variant, config);
    match measure(env, variant, config, workload, &mut record) {
        Ok(()) => record.status = Some(RunStatus::Ok),
        Err(e) => {
            record.status = Some(RunStatus::Failed);
            record.error = Some(format!("{e:#}"));
            record.metrics.clear();
        }
    }
    record.wall_s = started.elapsed().as_secs_f64();
    record
}

/// A run that failed before it could start (e.g. its VM did not boot).
pub fn failed(
    planned: &PlannedRun,
    variant: &VariantConfig,
    config: &WorkloadConfig,
    err: &anyhow::Error,
) -> RunRecord {
    let mut record = new_record(planned, variant, config);
    record.status = Some(RunStatus::Failed);
    record.error = Some(format!("{err:#}"));
    record
}

fn new_record(planned: &PlannedRun, variant: &VariantConfig, config: &WorkloadConfig) -> RunRecord {
    RunRecord {
        seq: planned.seq,
        round: planned.round,
        variant: variant.name.clone(),
        workload: config.label.clone(),
        started_at: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64()),
        place: Some(RunPlace::host()),
        ..RunRecord::default()
    }
}

/// The read-only image of `testbed` with `workload`'s content, from the
/// image cache under the input cache `cache_dir` (packed there once).
pub fn prepare_image(
    testbed: &crate::testbed::TestbedConfig,
    cache_dir: &std::path::Path,
    workload: &mut dyn Workload,
) -> Result<PreparedImage> {
    let mut populate = |dir: &std::path::Path| workload.populate(dir);
    image::prepare(testbed, &image::cache_dir(cache_dir), &mut populate)
}

fn measure(
    env: &RunEnv,
    variant: &VariantConfig,
    config: &WorkloadConfig,
    workload: &mut dyn Workload,
    record: &mut RunRecord,
) -> Result<()> {
    // Checked again before every mkfs: what was free may have been mounted since.
    let device = env.device.as_deref().map(DeviceOptIn::new).transpose()?;
    let prepared = match &env.image {
        Some(prepared) => Some(prepared.clone()),
        None if variant.testbed.fs.is_read_only_image() => Some(
            prepare_image(&variant.testbed, &env.cache_dir, workload)
                .with_context(|| format!("provisioning variant `{}`", variant.name))?,
        ),
        None => None,
    };
    let mut bed = Testbed::provision_with(&variant.testbed, &env.workdir, device.as_ref(), prepared.as_ref())
        .with_context(|| format!("provisioning variant `{}`", variant.name))?;
    record.mount = bed.mount_facts.clone();
    record.geometry = bed.geometry();
    record.notes.extend(bed.notes.iter().cloned());
    let timeout = config.timeout_or_default();
    // Each phase's deadline is also the media server's: requests still
    // waiting on it past the deadline lose the device (see media::host).
    let ctx = |deadline: Instant| {
        if let Some(server) = &bed.media {
            server.watch_deadline(Some(deadline));
        }
        RunContext::new(bed.root(), env.cache_dir.clone()).with_cgroup(bed.cgroup_procs()).with_deadline(Some(deadline))
    };

    let prepared = workload.prepare(&ctx(Instant::now() + timeout)).context("workload preparation");
    let measured = prepared.and_then(|()| {
        if config.cache == CachePolicy::Cold {
            crate::sys::caches::drop_caches()?;
            workload.warm_inputs()?;
        }
        let watch = Watch { testbed: &bed, interval: env.sample_interval, media_relay: env.media_relay.as_deref() };
        let monitors = monitors::start_all(&watch, record);
        // The guest's instruction count covers exactly the workload's measured part.
        let result = crate::vm::icount::measured(|| workload.run(&ctx(Instant::now() + timeout)));
        monitors::stop_all(monitors, &watch, record);
        result
    });
    let cleaned = workload.cleanup(&ctx(Instant::now() + timeout)).context("workload cleanup");
    // A run whose device went away (its media server died, was stopped or
    // did not answer) failed, whatever the workload said: its writes
    // failed under it, and its numbers are not the medium's.
    let measured = match (measured, bed.media.as_ref().map(|server| server.check())) {
        (Ok(_), Some(Err(lost))) => Err(lost),
        (Err(e), Some(Err(lost))) => Err(lost.context(format!("{e:#}"))),
        (measured, _) => measured,
    };
    if let Some(server) = &bed.media {
        server.watch_deadline(None);
    }
    // Before teardown frees the image: a full host disk reaches the
    // workload as I/O errors, so say what really happened.
    let measured = match (measured, bed.host_full()) {
        (Err(e), Some(full)) => Err(e.context(full)),
        (measured, _) => measured,
    };
    let torn_down = bed.teardown();
    // The workload's metrics first, then the monitors' evidence (`media/…`).
    let evidence = std::mem::replace(&mut record.metrics, measured?);
    record.metrics.extend(evidence);
    record.metrics.extend(bed.metrics.iter().cloned());
    cleaned?;
    torn_down
}
