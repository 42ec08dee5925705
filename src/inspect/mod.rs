//! Facts about the machine and the filesystems a run happened on.

mod cmd;
pub mod environment;
