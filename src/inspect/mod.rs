//! Facts about the machine and the filesystems a run happened on, and
//! what they mean for performance.
//!
//! * [`environment`]: machine snapshot stored with every run; filesystem
//!   geometry text.
//! * [`kconfig`]: kernel config parsing, loading and diffing (with
//!   [`kconfig_notes`], the curated table of performance-relevant options).
//! * [`facts`]: facts about a system and a path, live or offline.
//! * [`rules`]: known-issue rules (TOML files in `rules/`, embedded) and
//!   their condition language.
//! * [`doctor`]: evaluating rules against facts into a report.
//! * [`version`]: kernel versions and version ranges.

pub mod doctor;
pub mod environment;
pub mod facts;
pub mod kconfig;
pub mod kconfig_notes;
pub mod machine;
pub mod rules;
pub mod version;

pub use doctor::{doctor, DoctorReport, Finding};
pub use environment::{capture, Environment};
pub use facts::Facts;
pub use kconfig::{diff as kconfig_diff, KconfigDiff, KernelConfig};
pub use rules::{builtin_rules, Rule, Severity};
