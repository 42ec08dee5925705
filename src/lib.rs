//! fslab: reproduce, measure and explain Linux filesystem performance
//! regressions.
//!
//! The library is organised by stage, in the order data flows through it:
//!
//! * [`experiment`]: parse and validate an experiment file, expand the run plan.
//! * [`testbed`]: image file → loop device → mkfs → mount → throttle, and teardown.
//! * [`workload`]: the measured work, one file per kind behind [`workload::Workload`].
//! * [`monitor`]: samplers beside a run (diskstats → iostat metrics, CPU).
//! * [`store`]: the SQLite file results live in.
//! * [`stats`]: summaries, A/B comparisons and verdicts.
//! * [`report`]: tables and exports.
//! * [`inspect`]: the environment a run happened in.
//! * [`runner`]: wires the stages together for one experiment.
//!
//! The `fslab` binary is a thin command-line layer over these modules.

pub mod analysis;
pub mod bisect;
pub mod experiment;
pub mod fsinternal;
pub mod inspect;
pub mod iostatlog;
pub mod metric;
pub mod monitor;
pub mod record;
pub mod report;
pub mod runner;
pub mod stats;
pub mod store;
pub mod sys;
pub mod testbed;
#[doc(hidden)]
pub mod testsupport;
pub mod units;
pub mod workload;
