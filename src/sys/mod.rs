//! Reading the kernel's own files (`/proc`, `/sys`): one module per file
//! kind, used by every layer above (testbed, monitor, inspect).

pub mod mountinfo;
