//! A kernel tree the user built: `kernel = "/src/linux"` (a directory with
//! `arch/x86/boot/bzImage`, its `.config` and the modules its
//! `modules.order` lists, which are linked into a staged kernel root).

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::{Form, ParseContext, SourceKind};
use crate::kernel::{bzimage, sha256_file, sha256_str, stage::Modules, KernelArtifacts};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BuildTree {
    /// The tree (absolute).
    pub tree: PathBuf,
    /// The release its image's header gives.
    pub release: String,
}

fn image_of(tree: &Path) -> Result<PathBuf> {
    let image = tree.join("arch/x86/boot/bzImage");
    if !image.is_file() {
        bail!("kernel build tree {} has no arch/x86/boot/bzImage (build it: make bzImage)", tree.display());
    }
    Ok(image)
}

impl BuildTree {
    pub fn at(tree: &Path) -> Result<BuildTree> {
        Ok(BuildTree { tree: tree.to_path_buf(), release: bzimage::read_release(&image_of(tree)?)? })
    }
}

impl SourceKind for BuildTree {
    const NAME: &'static str = "build-tree";
    const FORMS: &'static str =
        "kernel = \"PATH\" of a kernel tree you built (arch/x86/boot/bzImage, .config, modules)";

    fn claims(form: &Form, cx: &ParseContext) -> bool {
        super::local_path(form, cx).is_some_and(|p| p.is_dir())
    }

    fn parse(form: &Form, cx: &ParseContext) -> Result<Self> {
        let path = super::existing(cx, "kernel", form.text().unwrap_or_default())?;
        BuildTree::at(&path).map_err(|e| cx.usage("kernel", format!("{e:#}")))
    }

    fn release(&self) -> &str {
        &self.release
    }

    fn shown(&self) -> String {
        self.tree.display().to_string()
    }

    fn origin(&self) -> String {
        format!("build tree {}", self.tree.display())
    }

    fn resolve(&self, cache: &Path) -> Result<KernelArtifacts> {
        let tree = &self.tree;
        let image = image_of(tree)?;
        let release = bzimage::read_release(&image)?;
        let sha256 = sha256_file(&image)?;
        let dot_config = tree.join(".config");
        let config = dot_config.is_file().then_some(dot_config);
        let modular = config
            .as_ref()
            .map(|c| fs::read_to_string(c).unwrap_or_default().lines().any(|l| l.trim() == "CONFIG_MODULES=y"))
            .unwrap_or(true);
        let order = tree.join("modules.order");
        if !modular || !order.is_file() {
            return Ok(KernelArtifacts::bare(image, config, release, self.shown(), sha256));
        }
        let tree = fs::canonicalize(tree)?;
        let key = sha256_str(&format!(
            "tree\0{}\0{sha256}\0{}\0{}",
            tree.display(),
            sha256_file(&order)?,
            crate::kernel::mtime_ns(&order)
        ));
        let from = Modules::BuildTree(tree.clone());
        crate::kernel::staged(cache, &key, &image, config.as_deref(), release, self.shown(), sha256, &from, tree)
    }

    fn keeps(&self) -> Vec<String> {
        Vec::new()
    }
}
