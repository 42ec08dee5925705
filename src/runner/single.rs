//! One run: provision → prepare → (drop caches) → measure with monitors →
//! cleanup → teardown. Teardown happens on every path out.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

use super::RunOptions;
use crate::experiment::{CachePolicy, Experiment, PlannedRun, VariantConfig, WorkloadConfig};
use crate::fsinternal::FsSnapshot;
use crate::monitor::blocktrace::BlockTraceMonitor;
use crate::monitor::{Monitor, MonitorData};
use crate::record::{RunRecord, RunStatus, EXTRA_FS_AFTER, EXTRA_FS_BEFORE, EXTRA_FS_DELTA};
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
    let mut bed = Testbed::provision_with(variant, &exp.workdir, opts.device.as_ref(), Some(&mut populate))
        .with_context(|| format!("provisioning variant `{}`", variant.name))?;
    record.mount = bed.mount_facts.clone();
    record.geometry = bed.geometry();
    let timeout = config.timeout.unwrap_or(DEFAULT_TIMEOUT);
    let ctx = |deadline: Instant| {
        RunContext::new(bed.root(), exp.cache_dir()).with_cgroup(bed.cgroup_procs()).with_deadline(Some(deadline))
    };

    let prepared = workload.prepare(&ctx(Instant::now() + timeout)).context("workload preparation");
    let measured = prepared.and_then(|()| {
        if config.cache == CachePolicy::Cold {
            drop_caches()?;
            workload.warm_inputs()?;
        }
        let before = fs_snapshot(&bed, record, EXTRA_FS_BEFORE);
        let monitor = Monitor::start(bed.device_name.clone(), exp.sample_interval)?;
        let tracer = BlockTraceMonitor::start(bed.device.as_deref());
        let result = workload.run(&ctx(Instant::now() + timeout));
        record.blocktrace = serde_json::to_value(tracer.stop()).ok();
        let data: Result<MonitorData> = monitor.stop();
        fs_snapshot_after(&bed, before, record);
        let metrics = result?;
        Ok((metrics, data?))
    });
    let cleaned = workload.cleanup(&ctx(Instant::now() + timeout)).context("workload cleanup");
    let torn_down = bed.teardown();
    let (metrics, data) = measured?;
    record.metrics = metrics;
    record.metrics.extend(bed.metrics.iter().cloned());
    record.monitor = Some(data);
    cleaned?;
    torn_down
}

/// Filesystem-internal snapshot of a block testbed (ext4, XFS, btrfs),
/// stored in the record under `kind`. A failure becomes a note: the
/// snapshot is evidence, not part of the measurement.
fn fs_snapshot(bed: &Testbed, record: &mut RunRecord, kind: &str) -> Option<FsSnapshot> {
    let dev = bed.device_name.as_deref()?;
    if !matches!(bed.fstype.as_str(), "ext4" | "xfs" | "btrfs") {
        return None;
    }
    let snap =
        crate::fsinternal::snapshot(&bed.fstype, dev, &bed.mountpoint).and_then(|s| Ok((serde_json::to_value(&s)?, s)));
    match snap {
        Ok((json, s)) => {
            record.fs_snapshots.push((kind.to_string(), json));
            Some(s)
        }
        Err(e) => {
            record.notes.push(format!("{kind} snapshot failed: {e:#}"));
            None
        }
    }
}

/// The after-snapshot and, when both exist, the delta.
fn fs_snapshot_after(bed: &Testbed, before: Option<FsSnapshot>, record: &mut RunRecord) {
    let Some(before) = before else { return };
    let Some(after) = fs_snapshot(bed, record, EXTRA_FS_AFTER) else { return };
    match serde_json::to_value(crate::fsinternal::delta(&before, &after)) {
        Ok(json) => record.fs_snapshots.push((EXTRA_FS_DELTA.to_string(), json)),
        Err(e) => record.notes.push(format!("{EXTRA_FS_DELTA} could not be serialised: {e}")),
    }
}

/// Write back dirty data, then drop page cache, dentries and inodes.
pub fn drop_caches() -> Result<()> {
    nix::unistd::sync();
    std::fs::write("/proc/sys/vm/drop_caches", "3").context("dropping caches (/proc/sys/vm/drop_caches)")
}
