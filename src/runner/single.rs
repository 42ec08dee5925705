//! One run: provision → prepare → (drop caches) → measure with monitors →
//! cleanup → teardown. Teardown happens on every path out.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

use super::monitors::{self, Watch};
use super::RunOptions;
use crate::experiment::{CachePolicy, Experiment, PlannedRun, VariantConfig, WorkloadConfig};
use crate::record::{RunRecord, RunStatus};
use crate::testbed::Testbed;
use crate::workload::{RunContext, Workload};

/// Used when a workload sets no `timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3600);

pub(super) fn execute(
    exp: &Experiment,
    planned: &PlannedRun,
    variant: &VariantConfig,
    config: &WorkloadConfig,
    workload: &mut dyn Workload,
    opts: &RunOptions,
) -> RunRecord {
    let started = Instant::now();
    let mut record = RunRecord {
        seq: planned.seq,
        round: planned.round,
        variant: variant.name.clone(),
        workload: config.label.clone(),
        started_at: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64()),
        ..RunRecord::default()
    };
    match measure(exp, variant, config, workload, opts, &mut record) {
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

fn measure(
    exp: &Experiment,
    variant: &VariantConfig,
    config: &WorkloadConfig,
    workload: &mut dyn Workload,
    opts: &RunOptions,
    record: &mut RunRecord,
) -> Result<()> {
    // Read-only images are packed from the tree the workload writes here.
    let mut populate = |dir: &std::path::Path| workload.populate(dir);
    let mut bed = Testbed::provision_with(&variant.testbed, &exp.workdir, opts.device.as_ref(), Some(&mut populate))
        .with_context(|| format!("provisioning variant `{}`", variant.name))?;
    record.mount = bed.mount_facts.clone();
    record.geometry = bed.geometry();
    record.notes.extend(bed.notes.iter().cloned());
    let timeout = config.timeout.unwrap_or(DEFAULT_TIMEOUT);
    let ctx = |deadline: Instant| {
        RunContext::new(bed.root(), exp.cache_dir()).with_cgroup(bed.cgroup_procs()).with_deadline(Some(deadline))
    };

    let prepared = workload.prepare(&ctx(Instant::now() + timeout)).context("workload preparation");
    let measured = prepared.and_then(|()| {
        if config.cache == CachePolicy::Cold {
            crate::sys::caches::drop_caches()?;
            workload.warm_inputs()?;
        }
        let watch = Watch { testbed: &bed, interval: exp.sample_interval };
        let monitors = monitors::start_all(&watch, record);
        let result = workload.run(&ctx(Instant::now() + timeout));
        monitors::stop_all(monitors, &watch, record);
        result
    });
    let cleaned = workload.cleanup(&ctx(Instant::now() + timeout)).context("workload cleanup");
    // Before teardown frees the image: a full host disk reaches the
    // workload as I/O errors, so say what really happened.
    let measured = match (measured, bed.host_full()) {
        (Err(e), Some(full)) => Err(e.context(full)),
        (measured, _) => measured,
    };
    let torn_down = bed.teardown();
    record.metrics = measured?;
    record.metrics.extend(bed.metrics.iter().cloned());
    cleaned?;
    torn_down
}
