//! `dir:/path`: an existing directory used as it is: nothing is created,
//! formatted, throttled or removed.

use std::path::Path;

use super::{Filesystem, Medium};

pub struct Dir;

impl Filesystem for Dir {
    fn name(&self) -> &'static str {
        "dir"
    }

    fn medium(&self) -> Medium {
        Medium::Directory
    }

    fn about(&self) -> &'static str {
        "`dir:/existing/path`: used as it is (nothing provisioned, no throttle)"
    }

    fn module(&self) -> Option<&'static str> {
        None
    }

    fn geometry(&self, _device: &Path, _image: Option<&Path>) -> Option<String> {
        None
    }
}
