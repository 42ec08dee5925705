//! What fslab asks of the host operating system, at the bottom of the
//! house: every other module may use these, and these use none of them.

pub mod blockdev;
pub mod caches;
pub mod contain;
pub mod exec;
pub mod identity;
pub mod marker;
pub mod modules;
pub mod mountinfo;
pub mod signals;
