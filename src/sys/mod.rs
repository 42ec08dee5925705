//! Facts and settings of the running kernel that several stages need (kernel modules, …).

pub mod modules;
