//! A kernel built from the user's own source tree:
//! `kernel = { source = "/src/linux", config = …, set = {…} }`. Built out
//! of tree (`make O=…` in fslab's object directory for that path); fslab
//! never writes into the tree, so it takes no patches. The tree can change
//! between builds, so its image is keyed by content once built.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::{Form, ParseContext, SourceKind};
use crate::kernel::build::{self, BuildRequest, KernelBuild, Tree};
use crate::kernel::KernelArtifacts;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LocalTree {
    /// The tree (absolute).
    pub path: PathBuf,
    pub build: KernelBuild,
}

struct UserTree<'a>(&'a Path);

impl Tree for UserTree<'_> {
    fn reference(&self) -> String {
        self.0.display().to_string()
    }

    fn tree_key(&self) -> String {
        let path = std::fs::canonicalize(self.0).unwrap_or_else(|_| self.0.to_path_buf());
        crate::kernel::sha256_str(&format!("tree\0{}", path.display()))
    }

    fn content_key(&self) -> Option<String> {
        None
    }

    fn ready(&self, _builds: &Path) -> Result<PathBuf> {
        if !self.0.join("Makefile").is_file() || !self.0.join("Kconfig").is_file() {
            bail!("{} is not a kernel source tree (no Makefile and Kconfig)", self.0.display());
        }
        Ok(self.0.to_path_buf())
    }

    fn patches(&self) -> Vec<(String, String)> {
        Vec::new()
    }
}

impl SourceKind for LocalTree {
    const NAME: &'static str = "local-tree";
    const FORMS: &'static str =
        "kernel = { source = \"PATH\", config = …, set = {…} } (built from your kernel source tree, out of tree)";

    fn claims(form: &Form, _cx: &ParseContext) -> bool {
        form.str_key("source").is_some_and(|s| super::scheme_of(s).is_none())
    }

    fn parse(form: &Form, cx: &ParseContext) -> Result<Self> {
        let (req, patches) = super::build_keys(form, cx, &["source"])?;
        let path = cx.path(form.str_key("source").unwrap_or_default());
        if !path.is_dir() {
            return Err(cx.usage(
                "kernel.source",
                format!("{} is not a directory (a kernel source tree) nor debian:<version>", path.display()),
            ));
        }
        if !patches.is_empty() {
            return Err(cx.usage(
                "kernel.patches",
                format!(
                    "patches apply to a `debian:` or `git` source only: fslab does not modify your tree {}",
                    path.display()
                ),
            ));
        }
        let build = build::prepare(&UserTree(&path), &req, cx.cache).map_err(|e| super::build_error(cx, e))?;
        Ok(LocalTree { path, build })
    }

    fn release(&self) -> &str {
        &self.build.release
    }

    fn shown(&self) -> String {
        self.build.shown()
    }

    fn origin(&self) -> String {
        format!("a kernel built from your tree {}", self.build.shown())
    }

    fn resolve(&self, cache: &Path) -> Result<KernelArtifacts> {
        build::build(&UserTree(&self.path), &self.build, cache)
    }

    fn build(&self) -> Option<&KernelBuild> {
        Some(&self.build)
    }

    fn with_request(&self, request: &BuildRequest, cache: &Path) -> Result<Self> {
        Ok(LocalTree { build: build::prepare(&UserTree(&self.path), request, cache)?, ..self.clone() })
    }

    fn keeps(&self) -> Vec<String> {
        vec![build::short_key(&self.build.tree_key).to_string()]
    }
}
