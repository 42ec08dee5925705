//! fslab integration tests: one test binary (ripgrep's `tests/tests.rs` shape),
//! one module per area, shared helpers in [`common`].
//!
//! A test whose verdict rests on a wall-time effect is named `timing_…`:
//! `scripts/test` runs those one at a time after the rest, because the
//! parallel tests' cache drops and I/O stall a 0.1 s command by up to a
//! second on a 2-core machine (seen in CI: a good run of `sleep 0.1`
//! measured 1 s and turned a 5x regression inconclusive).

mod common;

mod bisect;
mod bisect_commits;
mod bisect_kconfig;
mod blocktrace;
mod built_kernels;
mod changepoint;
mod debian_kernels;
mod deploy;
mod evidence;
mod examples;
mod experiment;
mod filemix;
mod fleet;
mod formats;
mod fs_names;
mod fsinternal;
mod history_cli;
mod inspect_cli;
mod iostat_logs;
mod kernel_bisect;
mod kernel_cache;
mod kernels;
mod layers;
mod lifecycle;
mod media;
mod media_faults;
mod pipes;
mod planted_kernel;
mod probe;
mod profile;
mod report;
mod rofs;
mod safety;
mod spec;
mod store_cli;
mod test_rules;
mod testbed;
mod verdicts;
mod vm;
mod workloads;
