//! fslab integration tests: one test binary (ripgrep's `tests/tests.rs` shape),
//! one module per area, shared helpers in [`common`].

mod common;

mod bisect;
mod bisect_commits;
mod blocktrace;
mod changepoint;
mod debian_kernels;
mod deploy;
mod examples;
mod experiment;
mod filemix;
mod fleet;
mod fsinternal;
mod history_cli;
mod inspect_cli;
mod iostat_logs;
mod kernels;
mod layers;
mod lifecycle;
mod media;
mod pipes;
mod report;
mod rofs;
mod safety;
mod spec;
mod store_cli;
mod testbed;
mod verdicts;
mod vm;
mod workloads;
