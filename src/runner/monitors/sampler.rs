//! diskstats → iostat `-x` columns, and CPU, sampled every interval; its
//! device totals are the `disk/…` evidence, its CPU time `cpu/…`. Its
//! samples are stored in their own tables (`iostat_samples`,
//! `cpu_samples`, `disk_totals`: queried by column), so they travel in
//! [`RunRecord::monitor`] rather than as an extra.

use anyhow::{Context, Result};

use super::{RunMonitor, Watch};
use crate::monitor::Monitor;
use crate::record::RunRecord;

#[derive(Default)]
pub struct Sampler(Option<Monitor>);

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
