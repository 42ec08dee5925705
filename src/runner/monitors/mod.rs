//! The monitors that run beside every measured part, behind one trait.
//!
//! A monitor is one file here plus one line in [`monitors!`] below. It
//! starts just before the measured part and stops just after it; at stop
//! it stores what it saw in the run record as its own serde type under its
//! own keys ([`RunRecord::put_extra`]; the store keeps them in
//! `run_extras` without knowing any monitor) and adds the *evidence
//! metrics* derived from that (`disk/…` and `cpu/…` from the sampler's
//! totals, `blk/…` from the block trace, `fs/…` from the
//! filesystem-internals delta, `media/…` from the media model; see
//! [`crate::metric`]), so they are compared like the workload's metrics.
//!
//! The runner starts them in list order and stops them in reverse. A
//! monitor that cannot start or stop does not fail the run (the
//! measurement itself is fine): its error is recorded in the run's notes,
//! never dropped. The machinery they drive (samplers, trace decoding,
//! snapshots) lives below, in `monitor/`, `fsinternal/`, `media/`; the
//! monitors live here because they watch a [`Testbed`], a layer above.
//!
//! [`RunRecord::put_extra`]: crate::record::RunRecord::put_extra

use std::time::Duration;

use anyhow::Result;

use crate::record::RunRecord;
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
    /// Stop watching (just after): store what it saw in `record` and add
    /// the evidence metrics derived from it.
    fn stop(&mut self, watch: &Watch, record: &mut RunRecord) -> Result<()>;
}

/// Declares the monitors, in start order: each `module::Type` line adds
/// one (`module.rs` here implements [`RunMonitor`] for `Type: Default`).
macro_rules! monitors {
    ($($module:ident::$ty:ident),* $(,)?) => {
        $(mod $module;)*

        /// Builds each monitor for one run, in start order.
        pub const MONITORS: &[fn() -> Box<dyn RunMonitor>] = &[$(|| Box::new($module::$ty::default())),*];
    };
}

monitors! {
    fs_internals::FsInternals,
    sampler::Sampler,
    blocktrace::BlockTrace,
    media::Media,
}

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
