//! fslab: reproduce, measure and explain Linux filesystem performance
//! regressions.
//!
//! The library is organised by stage, in the order data flows through it:
//!
//! * [`experiment`]: parse and validate an experiment file, expand the run plan.
//! * [`testbed`]: image file → loop device → mkfs → mount → throttle, and teardown.
//! * [`workload`]: the measured work, one file per kind behind [`workload::Workload`].
//! * [`monitor`]: samplers beside a run (diskstats → iostat metrics, CPU).
//! * [`store`]: where results live (an SQLite file or a PostgreSQL database).
//! * [`stored`]: what an experiment stores besides its runs, as types.
//! * [`stats`]: summaries, A/B comparisons and verdicts (the `fslab-stats` crate).
//! * [`report`]: every output format (terminal table, JSON, CSV, Markdown, HTML).
//! * [`human`]: how numbers, units and p-values are written for people.
//! * [`output`]: standard output and error that survive a closed pipe.
//! * [`exit`]: the exit status of every command, in one place.
//! * [`inspect`]: the environment a run happened in.
//! * [`runner`]: wires the stages together for one experiment.
//! * [`kernel`], [`vm`]: kernels under test, booted in virtual machines.
//! * [`cleanup`]: `fslab cleanup`, leftovers of killed fslab processes (testbeds, VMs, trace instances).
//! * [`sys`]: what fslab asks of the host OS (tools, signals, markers), at the bottom.
//!
//! The `fslab` binary is a thin command-line layer over these modules.

pub mod analysis;
pub mod bisect;
pub mod cleanup;
pub mod exit;
pub mod experiment;
pub mod fsinternal;
pub mod history;
pub mod human;
pub mod inspect;
pub mod iostatlog;
pub mod kernel;
pub mod keys;
pub mod media;
pub mod metric;
pub mod monitor;
pub mod output;
pub mod record;
pub mod report;
pub mod runner;
/// The statistics crate (`crates/stats`), which uses nothing of fslab.
pub use fslab_stats as stats;
pub mod store;
pub mod stored;
pub mod sys;
pub mod testbed;
#[doc(hidden)]
pub mod testsupport;
pub mod units;
pub mod vm;
pub mod workload;
