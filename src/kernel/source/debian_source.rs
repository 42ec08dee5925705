//! A kernel built from a Debian `linux-source-X` package:
//! `kernel = { source = "debian:5.10", config = …, set = {…}, patches = […] }`.
//! The package is found and downloaded by the private apt setup
//! ([`crate::kernel::debian`]) and unpacked with the patches applied, once
//! per package and patch set, into `<cache>/kernel-builds/tree-<key>/`;
//! the build pipeline ([`crate::kernel::build`]) does the rest.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::debian_image::{classified, DebianImage};
use super::{Form, OfferedKernel, ParseContext, SourceKind};
use crate::kernel::build::{self, BuildRequest, KernelBuild, Tree};
use crate::kernel::debian::{Archive, Package, Wanted, INDEX_MAX_AGE, SCHEME};
use crate::kernel::{KernelArtifacts, KernelPackage};

/// The package, its patches, and the build prepared from them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DebianSource {
    /// As written (`debian:5.10`).
    pub reference: String,
    /// `<cache>/debian-archive`.
    pub archive: PathBuf,
    pub package: Package,
    /// The patch files, in order (absolute).
    pub patches: Vec<PathBuf>,
    pub build: KernelBuild,
}

/// The tree a [`DebianSource`] builds: the package unpacked and patched.
struct SourceTree<'a> {
    reference: &'a str,
    archive: &'a Path,
    package: &'a Package,
    patches: &'a [PathBuf],
}

impl Tree for SourceTree<'_> {
    fn reference(&self) -> String {
        self.reference.to_string()
    }

    fn tree_key(&self) -> String {
        let shas: Vec<String> = self.patches().into_iter().map(|(sha, _)| sha).collect();
        crate::kernel::sha256_str(&format!("debian-source\0{}\0{}", self.package.sha256, shas.join("\0")))
    }

    fn content_key(&self) -> Option<String> {
        // An unpacked package never changes: the tree is its content.
        Some(self.tree_key())
    }

    fn ready(&self, builds: &Path) -> Result<PathBuf> {
        let p = self.package;
        let deb = Archive::at_root(self.archive)
            .download(p)
            .with_context(|| format!("{}: {} {} ({})", self.reference, p.name, p.version, p.suite))?;
        unpacked_source(builds, &self.tree_key(), &deb, self.patches)
    }

    fn patches(&self) -> Vec<(String, String)> {
        self.patches
            .iter()
            .map(|p| (crate::kernel::sha256_file(p).unwrap_or_default(), p.display().to_string()))
            .collect()
    }

    fn package(&self) -> Option<KernelPackage> {
        Some(self.package.recorded())
    }

    fn distribution_config(&self, version: &str, cache: &Path) -> Result<PathBuf> {
        let wanted = Wanted { version: self.package.version.clone(), flavour: None };
        let package = Archive::at_root(self.archive).resolve(&wanted).map_err(|e| {
            anyhow::anyhow!("the Debian image matching {} {} ({version}): {e}", self.package.name, self.package.version)
        })?;
        let image = DebianImage { reference: wanted.to_string(), archive: self.archive.to_path_buf(), package };
        let artifacts = image.resolve(cache)?;
        artifacts.config.with_context(|| format!("the Debian image of {} has no config file", self.package.version))
    }
}

impl DebianSource {
    /// The source `package` of the archive at `archive` with `patches`,
    /// its build prepared as `req` asks.
    pub fn prepare(
        reference: &str,
        archive: &Path,
        package: Package,
        patches: Vec<PathBuf>,
        req: &BuildRequest,
        cache: &Path,
    ) -> Result<DebianSource> {
        let mut source = DebianSource {
            reference: reference.to_string(),
            archive: archive.to_path_buf(),
            package,
            patches,
            build: KernelBuild::default(),
        };
        source.build = build::prepare(&source.tree(), req, cache)?;
        Ok(source)
    }

    fn tree(&self) -> SourceTree<'_> {
        SourceTree {
            reference: &self.reference,
            archive: &self.archive,
            package: &self.package,
            patches: &self.patches,
        }
    }
}

impl SourceKind for DebianSource {
    const NAME: &'static str = "debian-source";
    const FORMS: &'static str =
        "kernel = { source = \"debian:VERSION\", config = \"minimal\"|\"debian\"|FILE, set = {…}, \
                                 patches = […] } (built from Debian's linux-source package)";

    fn claims(form: &Form, _cx: &ParseContext) -> bool {
        form.str_key("source").is_some_and(|s| s.starts_with(SCHEME))
    }

    fn parse(form: &Form, cx: &ParseContext) -> Result<Self> {
        let (req, patches) = super::build_keys(form, cx, &["source"])?;
        let reference = form.str_key("source").unwrap_or_default().to_string();
        let wanted = match Wanted::parse(&reference) {
            Some(w) => w.map_err(|e| cx.usage("kernel.source", format!("{e:#}")))?,
            None => return Err(cx.usage("kernel.source", format!("is not {SCHEME}VERSION"))),
        };
        if let Some(fl) = &wanted.flavour {
            return Err(cx.usage(
                "kernel.source",
                format!("a source package has no flavour (`-{fl}`): write {SCHEME}{}", wanted.version),
            ));
        }
        let archive = Archive::at(cx.cache);
        let package = archive.resolve_source(&wanted.version).map_err(|e| {
            let located = cx.err("kernel.source", &e);
            classified(e, located)
        })?;
        DebianSource::prepare(&reference, archive.root(), package, patches, &req, cx.cache)
            .map_err(|e| super::build_error(cx, e))
    }

    fn release(&self) -> &str {
        &self.build.release
    }

    fn shown(&self) -> String {
        self.build.shown()
    }

    fn origin(&self) -> String {
        format!(
            "a kernel built from {} = {} {}{}",
            self.build.shown(),
            self.package.name,
            self.package.version,
            super::patch_names(&self.patches)
        )
    }

    fn resolve(&self, cache: &Path) -> Result<KernelArtifacts> {
        build::build(&self.tree(), &self.build, cache)
    }

    fn build(&self) -> Option<&KernelBuild> {
        Some(&self.build)
    }

    fn with_request(&self, request: &BuildRequest, cache: &Path) -> Result<Self> {
        let build = build::prepare(&self.tree(), request, cache)?;
        Ok(DebianSource { build, ..self.clone() })
    }

    fn keeps(&self) -> Vec<String> {
        vec![self.build.key.clone(), build::short_key(&self.build.tree_key).to_string(), self.package.sha256.clone()]
    }

    fn offered(cache: &Path) -> Result<Vec<OfferedKernel>> {
        let archive = Archive::at(cache);
        // Listed only where the lists are there already: `kernel list
        // --available` refreshed them for the image kind just before.
        if archive.updated_at().is_none() {
            return Ok(Vec::new());
        }
        archive.refresh(INDEX_MAX_AGE).map_err(super::debian_image::classified_plain)?;
        let debs = archive.downloaded();
        let mut sources = archive.sources()?;
        sources.sort_by(|a, b| crate::kernel::debian::newer(b, a));
        Ok(sources
            .iter()
            .map(|p| OfferedKernel {
                kernel: format!("{{ source = \"{SCHEME}{}\" }}", p.abi),
                kind: Self::NAME.to_string(),
                release: p.abi.clone(),
                version: p.version.clone(),
                from: p.suite.clone(),
                flavour: "source".to_string(),
                bytes: Some(p.size),
                cached: debs.iter().any(|d| {
                    d.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{}_{}_", p.name, p.version)))
                }),
            })
            .collect())
    }
}

/// The package unpacked (the `linux-source-X.tar.xz` it carries) and
/// patched, once per key.
fn unpacked_source(builds: &Path, key: &str, deb: &Path, patches: &[PathBuf]) -> Result<PathBuf> {
    let short = build::short_key(key);
    let dir = crate::kernel::cache::entry(builds, &format!("tree-{short}"), |tmp| {
        crate::output::diagnostic(&format!(
            "fslab: unpacking {} (once)",
            deb.file_name().unwrap_or_default().to_string_lossy()
        ));
        let pkg = tmp.join("pkg");
        fs::create_dir(&pkg)?;
        let out = Command::new("dpkg-deb").arg("-x").arg(deb).arg(&pkg).output().context("running dpkg-deb")?;
        if !out.status.success() {
            bail!("dpkg-deb -x {} failed: {}", deb.display(), String::from_utf8_lossy(&out.stderr));
        }
        let tarball = fs::read_dir(pkg.join("usr/src"))?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name().is_some_and(|n| {
                    n.to_string_lossy().starts_with("linux-source-") && n.to_string_lossy().ends_with(".tar.xz")
                })
            })
            .with_context(|| format!("{} holds no usr/src/linux-source-*.tar.xz", deb.display()))?;
        let out = Command::new("tar").arg("-xf").arg(&tarball).arg("-C").arg(tmp).output().context("running tar")?;
        if !out.status.success() {
            bail!("tar -xf {} failed: {}", tarball.display(), String::from_utf8_lossy(&out.stderr));
        }
        fs::remove_dir_all(&pkg)?;
        let top = fs::read_dir(tmp)?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.is_dir())
            .context("the source tarball unpacked to nothing")?;
        fs::rename(&top, tmp.join("src"))?;
        for patch in patches {
            super::apply_patch(patch, &tmp.join("src"), &deb.display().to_string())?;
        }
        Ok(())
    })?;
    Ok(dir.join("src"))
}
