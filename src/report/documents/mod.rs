//! The [`super::Document`]s of commands other than compare and report, one
//! file per command family: plain data the CLI fills, with its text form here (JSON is the serde shape). Documents over a higher
//! layer's data (iostat logs, bisect results, history) implement the trait
//! in their own module.

pub mod cleanup;
pub mod experiments;
pub mod export;
pub mod inspect;
pub mod kernels;
pub mod merge;
pub mod plan;
pub mod probe;
pub mod profile;
pub mod simulation;
pub mod vm;

/// Sizes in one unit, so a column of them compares at a glance.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}
