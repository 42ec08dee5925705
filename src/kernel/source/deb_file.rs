//! A Debian kernel image package the user has: `kernel = "linux-image-….deb"`
//! (checked by `dpkg-deb`, unpacked once into the cache by its content).

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::{Form, ParseContext, SourceKind};
use crate::kernel::{deb, KernelArtifacts};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DebFile {
    /// The package file (absolute).
    pub path: PathBuf,
    /// The release its package name gives.
    pub release: String,
}

impl DebFile {
    pub fn at(path: &Path) -> Result<DebFile> {
        Ok(DebFile { path: path.to_path_buf(), release: deb::checked_release(path)? })
    }
}

impl SourceKind for DebFile {
    const NAME: &'static str = "deb";
    const FORMS: &'static str = "kernel = \"PATH.deb\" (a Debian linux-image package file)";

    fn claims(form: &Form, cx: &ParseContext) -> bool {
        super::local_path(form, cx).is_some_and(|p| p.is_file() && super::is_deb(&p))
    }

    fn parse(form: &Form, cx: &ParseContext) -> Result<Self> {
        let path = super::existing(cx, "kernel", form.text().unwrap_or_default())?;
        DebFile::at(&path).map_err(|e| cx.usage("kernel", format!("{e:#}")))
    }

    fn release(&self) -> &str {
        &self.release
    }

    fn shown(&self) -> String {
        self.path.display().to_string()
    }

    fn origin(&self) -> String {
        format!("package {}", self.path.display())
    }

    fn resolve(&self, cache: &Path) -> Result<KernelArtifacts> {
        crate::kernel::unpacked_deb(cache, &self.path, self.shown(), None)
    }

    fn keeps(&self) -> Vec<String> {
        // Its entry is keyed by the file's SHA-256: known once read, which
        // prune does from the stored config path instead.
        Vec::new()
    }
}
