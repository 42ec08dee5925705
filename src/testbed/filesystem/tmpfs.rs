//! tmpfs: memory, sized by `size`; no block device, so no throttle, queue
//! settings or sysfs tunables.

use std::path::Path;

use super::{Filesystem, Medium};

pub struct Tmpfs;

impl Filesystem for Tmpfs {
    fn name(&self) -> &'static str {
        "tmpfs"
    }

    fn medium(&self) -> Medium {
        Medium::Memory
    }

    fn about(&self) -> &'static str {
        "memory of `size`; `mount` options; no device, so no throttle"
    }

    fn module(&self) -> Option<&'static str> {
        None
    }

    fn geometry(&self, _device: &Path, _image: Option<&Path>) -> Option<String> {
        None
    }
}
