//! Facts about the machine and the filesystems a run happened on.

pub mod environment;
