//! Filesystem internals (ext4 allocator, XFS stats, btrfs allocation)
//! before and after the measured part, and the delta, for kinds that have
//! them (`Filesystem::snapshot`); stored as [`FsSnapshot`]s and an
//! [`FsDelta`], whose headline numbers are the `fs/…` evidence.

use std::path::Path;

use anyhow::{Context, Result};

use super::{RunMonitor, Watch};
use crate::fsinternal::{FsDelta, FsSnapshot};
use crate::metric::Metric;
use crate::record::RunRecord;
use crate::testbed::Testbed;

/// Stored extras' keys: the snapshot before, after, and `after - before`.
pub const FS_BEFORE: &str = "fs_before";
pub const FS_AFTER: &str = "fs_after";
pub const FS_DELTA: &str = "fs_delta";

#[derive(Default)]
pub struct FsInternals(Option<FsSnapshot>);

fn take(testbed: &Testbed) -> Option<Result<FsSnapshot>> {
    let device = testbed.device_name.as_deref()?;
    testbed.kind.fs().snapshot(device, Path::new(&testbed.mountpoint))
}

impl RunMonitor for FsInternals {
    fn name(&self) -> &'static str {
        "filesystem internals"
    }

    fn start(&mut self, watch: &Watch) -> Result<()> {
        self.0 = take(watch.testbed).transpose().context("before the run")?;
        Ok(())
    }

    fn stop(&mut self, watch: &Watch, record: &mut RunRecord) -> Result<()> {
        let Some(before) = self.0.take() else { return Ok(()) };
        record.put_extra(FS_BEFORE, &before)?;
        let Some(after) = take(watch.testbed).transpose().context("after the run")? else { return Ok(()) };
        record.put_extra(FS_AFTER, &after)?;
        let delta = crate::fsinternal::delta(&before, &after);
        record.metrics.extend(evidence(&delta));
        record.put_extra(FS_DELTA, &delta)
    }
}

/// The delta's headline numbers as evidence (`fs/ext4.…`).
fn evidence(delta: &FsDelta) -> Vec<Metric> {
    delta.metrics().into_iter().map(|m| Metric { name: format!("fs/{}", m.name), ..m }).collect()
}
