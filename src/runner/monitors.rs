//! The monitors that run beside every measured part, behind one trait.
//!
//! Each monitor starts just before the measured part and stops just after
//! it, and puts what it saw into the run record. [`MONITORS`] is the one
//! list; the runner starts them in list order and stops them in reverse. A
//! monitor that cannot start or stop does not fail the run (the
//! measurement itself is fine): its error is recorded in the run's notes,
//! never dropped.
//!
//! Each monitor also adds its *evidence metrics* to the run's metrics when
//! it stops (`disk/…` and `cpu/…` from the sampler's totals, `blk/…` from
//! the block trace, `fs/…` from the filesystem-internals delta, `media/…`
//! from the media model; see [`crate::metric`]), derived from what it
//! stores, so they are compared like the workload's metrics.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::fsinternal::FsSnapshot;
use crate::monitor::blocktrace::BlockTraceMonitor;
use crate::monitor::Monitor;
use crate::record::{RunRecord, EXTRA_FS_AFTER, EXTRA_FS_BEFORE, EXTRA_FS_DELTA};
use crate::testbed::Testbed;

/// What a monitor watches.
pub struct Watch<'a> {
    pub testbed: &'a Testbed,
    pub interval: Duration,
    /// In a guest: where to ask for the host-served disk's media account.
    pub media_relay: Option<&'a std::path::Path>,
}

/// One kind of evidence collected beside the measured part.
pub trait RunMonitor {
    /// Short name, used in notes about its failures.
    fn name(&self) -> &'static str;
    /// Start watching (just before the measured part).
    fn start(&mut self, watch: &Watch) -> Result<()>;
    /// Stop watching (just after) and store what it saw in `record`.
    fn stop(&mut self, watch: &Watch, record: &mut RunRecord) -> Result<()>;
}

/// Builds each monitor for one run, in start order.
pub const MONITORS: &[fn() -> Box<dyn RunMonitor>] = &[
    || Box::new(FsInternals::default()),
    || Box::new(Sampler::default()),
    || Box::new(BlockTrace::default()),
    || Box::new(Media),
];

/// Start every monitor; failures become notes in `record`.
pub fn start_all(watch: &Watch, record: &mut RunRecord) -> Vec<Box<dyn RunMonitor>> {
    let mut running = Vec::new();
    for make in MONITORS {
        let mut monitor = make();
        match monitor.start(watch) {
            Ok(()) => running.push(monitor),
            Err(e) => record.notes.push(format!("monitor `{}` did not start: {e:#}", monitor.name())),
        }
    }
    running
}

/// Stop monitors in reverse start order; failures become notes in `record`.
pub fn stop_all(monitors: Vec<Box<dyn RunMonitor>>, watch: &Watch, record: &mut RunRecord) {
    for mut monitor in monitors.into_iter().rev() {
        if let Err(e) = monitor.stop(watch, record) {
            record.notes.push(format!("monitor `{}` failed: {e:#}", monitor.name()));
        }
    }
}

/// diskstats → iostat `-x` columns, and CPU, sampled every interval.
#[derive(Default)]
struct Sampler(Option<Monitor>);

impl RunMonitor for Sampler {
    fn name(&self) -> &'static str {
        "iostat/cpu sampler"
    }

    fn start(&mut self, watch: &Watch) -> Result<()> {
        self.0 = Some(Monitor::start(watch.testbed.device_name.clone(), watch.interval)?);
        Ok(())
    }

    fn stop(&mut self, _watch: &Watch, record: &mut RunRecord) -> Result<()> {
        let monitor = self.0.take().context("not started")?.stop()?;
        record.metrics.extend(monitor.disk_totals.iter().flat_map(|t| t.metrics()));
        record.metrics.extend(crate::monitor::cpu_metrics(&monitor.cpu));
        record.monitor = Some(monitor);
        Ok(())
    }
}

/// What the media model went through during the measured part (a new
/// account is started just before it), stored as `media/…` metrics.
/// Nothing for testbeds without a model.
struct Media;

impl RunMonitor for Media {
    fn name(&self) -> &'static str {
        "media model"
    }

    fn start(&mut self, watch: &Watch) -> Result<()> {
        match (&watch.testbed.media, watch.media_relay) {
            (Some(server), _) => server.reset_evidence(),
            (None, Some(exchange)) => crate::media::relay::guest_start(exchange),
            (None, None) => Ok(()),
        }
    }

    fn stop(&mut self, watch: &Watch, record: &mut RunRecord) -> Result<()> {
        let (evidence, device) = match (&watch.testbed.media, watch.media_relay) {
            (Some(server), _) => {
                let evidence = server.evidence()?;
                server.pause()?;
                (evidence, server.spec.to_string())
            }
            (None, Some(exchange)) => (crate::media::relay::guest_stop(exchange)?, "the host's model".to_string()),
            (None, None) => return Ok(()),
        };
        record.metrics.extend(evidence.metrics());
        record.notes.extend(evidence.late_note(&device));
        Ok(())
    }
}

/// The tracefs block trace of the testbed's device (request sizes,
/// latencies, flags). Off, with the reason stored, when it cannot run.
#[derive(Default)]
struct BlockTrace(Option<BlockTraceMonitor>);

impl RunMonitor for BlockTrace {
    fn name(&self) -> &'static str {
        "block trace"
    }

    fn start(&mut self, watch: &Watch) -> Result<()> {
        self.0 = Some(BlockTraceMonitor::start(watch.testbed.device.as_deref()));
        Ok(())
    }

    fn stop(&mut self, _watch: &Watch, record: &mut RunRecord) -> Result<()> {
        let summary = self.0.take().context("not started")?.stop();
        record.metrics.extend(summary.metrics());
        record.blocktrace = Some(serde_json::to_value(summary)?);
        Ok(())
    }
}

/// Filesystem internals (ext4 allocator, XFS stats, btrfs allocation)
/// before and after, and the delta, for kinds that have them.
#[derive(Default)]
struct FsInternals(Option<FsSnapshot>);

impl FsInternals {
    fn take(testbed: &Testbed) -> Option<Result<FsSnapshot>> {
        let device = testbed.device_name.as_deref()?;
        testbed.kind.fs().snapshot(device, Path::new(&testbed.mountpoint))
    }

    fn store(record: &mut RunRecord, kind: &str, value: impl serde::Serialize) -> Result<()> {
        record.fs_snapshots.push((kind.to_string(), serde_json::to_value(value)?));
        Ok(())
    }
}

impl RunMonitor for FsInternals {
    fn name(&self) -> &'static str {
        "filesystem internals"
    }

    fn start(&mut self, watch: &Watch) -> Result<()> {
        self.0 = Self::take(watch.testbed).transpose().context("before the run")?;
        Ok(())
    }

    fn stop(&mut self, watch: &Watch, record: &mut RunRecord) -> Result<()> {
        let Some(before) = self.0.take() else { return Ok(()) };
        Self::store(record, EXTRA_FS_BEFORE, &before)?;
        let Some(after) = Self::take(watch.testbed).transpose().context("after the run")? else { return Ok(()) };
        Self::store(record, EXTRA_FS_AFTER, &after)?;
        let delta = crate::fsinternal::delta(&before, &after);
        record.metrics.extend(fs_evidence(&delta));
        Self::store(record, EXTRA_FS_DELTA, delta)
    }
}

/// The filesystem-internal delta's headline numbers as evidence (`fs/ext4.…`).
fn fs_evidence(delta: &crate::fsinternal::FsDelta) -> Vec<crate::metric::Metric> {
    delta.metrics().into_iter().map(|m| crate::metric::Metric { name: format!("fs/{}", m.name), ..m }).collect()
}
