//! A kernel image file: `kernel = "/boot/vmlinuz-…"`, or
//! `kernel = { image = …, modules = …, config = … }` with its modules
//! (`lib/modules/<release>` or a root holding it, linked into a staged
//! kernel root) and config.

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::{Form, ParseContext, SourceKind};
use crate::kernel::{bzimage, sha256_file, sha256_str, stage::Modules, KernelArtifacts};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Image {
    pub image: PathBuf,
    pub modules: Option<PathBuf>,
    pub config: Option<PathBuf>,
    /// The release its setup header gives.
    #[serde(default)]
    pub release: String,
}

impl Image {
    /// The image (checked by its header) with its modules and config.
    pub fn at(image: &Path, modules: Option<&Path>, config: Option<&Path>) -> Result<Image> {
        Ok(Image {
            release: bzimage::read_release(image)?,
            image: image.to_path_buf(),
            modules: modules.map(Path::to_path_buf),
            config: config.map(Path::to_path_buf),
        })
    }
}

impl SourceKind for Image {
    const NAME: &'static str = "image";
    const FORMS: &'static str =
        "kernel = \"PATH\" of a kernel image, or kernel = { image = …, modules = …, config = … }";

    fn claims(form: &Form, cx: &ParseContext) -> bool {
        form.has("image") || super::local_path(form, cx).is_some_and(|p| p.is_file() && !super::is_deb(&p))
    }

    fn parse(form: &Form, cx: &ParseContext) -> Result<Self> {
        let (image, modules, config) = match form {
            Form::Text(text) => (super::existing(cx, "kernel", text)?, None, None),
            Form::Table(t) => {
                if let Some(k) = t.keys().find(|k| !["image", "modules", "config"].contains(&k.as_str())) {
                    return Err(
                        cx.usage(&format!("kernel.{k}"), "is not a setting of a kernel image (image, modules, config)")
                    );
                }
                let path = |key: &str| -> Result<Option<PathBuf>> {
                    match t.get(key) {
                        None => Ok(None),
                        Some(v) => match v.as_str() {
                            Some(p) => super::existing(cx, &format!("kernel.{key}"), p).map(Some),
                            None => Err(cx.usage(&format!("kernel.{key}"), "must be a path (a string)")),
                        },
                    }
                };
                (path("image")?.unwrap_or_default(), path("modules")?, path("config")?)
            }
        };
        if super::is_deb(&image) && form.has("image") {
            return Err(cx.usage(
                "kernel.image",
                format!("{} is a Debian package: write kernel = \"{}\"", image.display(), image.display()),
            ));
        }
        Image::at(&image, modules.as_deref(), config.as_deref()).map_err(|e| cx.usage("kernel", format!("{e:#}")))
    }

    fn release(&self) -> &str {
        &self.release
    }

    fn shown(&self) -> String {
        self.image.display().to_string()
    }

    fn origin(&self) -> String {
        format!("image {}", self.image.display())
    }

    fn resolve(&self, cache: &Path) -> Result<KernelArtifacts> {
        let release = bzimage::read_release(&self.image)?;
        let sha256 = sha256_file(&self.image)?;
        if let Some(config) = &self.config {
            crate::kernel::check_config(config)?;
        }
        let Some(modules) = &self.modules else {
            return Ok(KernelArtifacts::bare(self.image.clone(), self.config.clone(), release, self.shown(), sha256));
        };
        let moddir = crate::kernel::installed_modules(modules, &release)?;
        let config_sha = self.config.as_deref().map(sha256_file).transpose()?.unwrap_or_default();
        let key = sha256_str(&format!(
            "image\0{sha256}\0{}\0{}\0{config_sha}",
            moddir.display(),
            crate::kernel::mtime_ns(&moddir)
        ));
        let from = Modules::Installed(moddir.clone());
        crate::kernel::staged(
            cache,
            &key,
            &self.image,
            self.config.as_deref(),
            release,
            self.shown(),
            sha256,
            &from,
            moddir,
        )
    }

    fn keeps(&self) -> Vec<String> {
        Vec::new()
    }
}
