//! Facts the doctor's rules are evaluated against: kernel, config,
//! preemption model, CPUs, memory, and for one path its filesystem, mount
//! options, geometry and block-queue settings.
//!
//! Facts are gathered live ([`Facts::gather`]) or assembled from what a
//! user knows about another machine ([`Facts::offline`], [`Facts::set`]).
//! Anything that could not be learned stays `None`; rules treat it as
//! unknown rather than guessing.
//!
//! Rules see facts through flat keys (see [`FACT_KEYS`]), e.g.
//! `kconfig.SQUASHFS_DECOMP_SINGLE`, `mount.mb_optimize_scan`,
//! `queue.read_ahead_kb`.

//!
//! The module holds one thing per file: [`model`] (the fact types, their
//! keys and derived facts), [`gather`] (reading this machine, or assembling
//! another machine's facts from what a user knows), [`parse`] (the other
//! tools' text fslab reads: the queue scheduler, the kernel command line,
//! debugfs `sched/preempt`, mount option lists) and [`render`] (the human
//! summary). What a filesystem with internals adds (ext4, XFS, btrfs
//! geometry and state) is read by its own file in `fsinternal`.

pub mod gather;
pub mod model;
pub mod parse;
pub mod render;

pub use model::*;
pub use parse::{parse_mount_options, parse_scheduler};
