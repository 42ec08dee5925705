//! The tracefs block trace of the testbed's device (request sizes,
//! latencies, flags), stored as a [`BlockTraceSummary`] under
//! [`BLOCKTRACE`], also when it was off (then it says why); its `blk/…`
//! evidence comes from that summary.

use anyhow::{Context, Result};

use super::{RunMonitor, Watch};
use crate::monitor::blocktrace::{BlockTraceMonitor, BlockTraceSummary};
use crate::record::RunRecord;

/// The stored extra's key.
pub const BLOCKTRACE: &str = "blocktrace";

#[derive(Default)]
pub struct BlockTrace(Option<BlockTraceMonitor>);

impl RunMonitor for BlockTrace {
    fn name(&self) -> &'static str {
        "block trace"
    }

    fn start(&mut self, watch: &Watch) -> Result<()> {
        self.0 = Some(BlockTraceMonitor::start(watch.testbed.device.as_deref()));
        Ok(())
    }

    fn stop(&mut self, _watch: &Watch, record: &mut RunRecord) -> Result<()> {
        let summary: BlockTraceSummary = self.0.take().context("not started")?.stop();
        record.metrics.extend(summary.metrics());
        record.put_extra(BLOCKTRACE, &summary)
    }
}
