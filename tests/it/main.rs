//! fslab integration tests: one test binary (ripgrep's `tests/tests.rs` shape),
//! one module per area, shared helpers in [`common`].

mod common;

mod bisect;
mod blocktrace;
mod examples;
mod experiment;
mod filemix;
mod fsinternal;
mod iostat_logs;
mod lifecycle;
mod report;
mod rofs;
mod spec;
mod testbed;
mod verdicts;
mod workloads;
